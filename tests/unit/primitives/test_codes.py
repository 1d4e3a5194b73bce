"""chain.primitives.codes: the one table of exit codes, and the places that
spell it again (the shell helpers, the errors, the chain's end states)."""

from __future__ import annotations

import re
from pathlib import Path

from chain import errors
from chain.core.model import CONTINUE_CODES, ChainState
from chain.core.runner_rules import job_exit_code
from chain.primitives.codes import CliExit, ExitCode, RunnerExit
from chain.primitives.paths import shell_helpers_dir


def _shell_codes(path: Path, pattern: str) -> dict[str, int]:
    return {name: int(value) for name, value in re.findall(pattern, path.read_text(encoding="utf-8"), re.MULTILINE)}


def test_the_shell_helpers_spell_the_apps_codes_as_the_table() -> None:
    expected = {f"CHAIN_EXIT_{code.name}": int(code) for code in ExitCode}
    helpers = shell_helpers_dir({})
    assert _shell_codes(helpers / "chain.sh", r"^(CHAIN_EXIT_[A-Z]+)=(\d+)") == expected
    assert _shell_codes(helpers / "chain.R", r"^(CHAIN_EXIT_[A-Z]+) <- (\d+)L") == expected


def test_the_apps_codes_hand_over_and_the_runner_job_completes() -> None:
    """An app that exits as the contract says hands over to the next runner,
    and the runner job exits 0 for it (Slurm shows COMPLETED, no FAIL mail)."""
    assert {ExitCode.STOPPED, ExitCode.TEMPFAIL} <= CONTINUE_CODES
    assert all(job_exit_code(code) == 0 for code in (*ExitCode, RunnerExit.TIMEOUT_ADVANCED))
    assert job_exit_code(RunnerExit.BAD_CHECKPOINT) == RunnerExit.BAD_CHECKPOINT


def test_every_error_and_end_state_exits_with_a_command_code() -> None:
    family = [
        value for value in vars(errors).values() if isinstance(value, type) and issubclass(value, errors.ChainError)
    ]
    assert {cls.exit_code for cls in family} <= set(CliExit)
    ends = {state: state.exit_code for state in ChainState if state.ended}
    assert ends[ChainState.COMPLETED] == CliExit.OK
    # a watched chain's end never reads as an error of the command, nor two ends alike
    assert len(set(ends.values())) == len(ends)
    assert not set(ends.values()) & {cls.exit_code for cls in family}
