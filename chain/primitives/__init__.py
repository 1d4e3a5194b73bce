"""What both sides of the contract need, below everything else of chain:
atomic writes and the counter parser (``atomic``), files opened without
trusting what is at their names (``safeio``: no link followed, regular files
only, reads capped), integers and JSON within bounds (``bounded``), the one
table of exit codes (``codes``), the one signal-name parser (``signals``),
which processes chain may signal (``procs``: only the ones it started),
where the shell helpers live (``paths``) and a job's output that never stops
it (``output``). Standard library only; it imports nothing of
chain. ``chain.app`` (the user's helpers) re-exports what users need; the
chain's own layers (core, store, backends, jobs) import it from here."""
