"""Carrying out the protocol (``chain.core.protocol``): the executor, the
only code that saves ``state.json``, and the effects the jobs and commands
share (submitting and dropping runners, judging, ending, hooks, notify)."""
