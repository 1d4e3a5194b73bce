"""The contract's environment as the app reads it (``chain.app.contract.AppEnv``):
the runner's variables parsed, the defaults a run by hand uses, and a
malformed number said with its name."""

from __future__ import annotations

from pathlib import Path

import pytest

from chain.app.contract import AppEnv


def test_the_runners_variables_are_parsed() -> None:
    env = AppEnv.from_environ(
        {
            "MAX_ITER": " 500 ",
            "CKPT_PATH": "out/n.txt",
            "CHECKPOINT_EVERY": "10",
            "CHAIN_DEADLINE": "1800000000.5",
            "CHAIN_STOP_SIGNAL": "SIGINT",
            "CHAIN_SHELL_HELPERS": "/opt/helpers",
            "SLURM_JOB_ID": "4242",
        }
    )
    assert env == AppEnv(500, Path("out/n.txt"), 10, 1800000000.5, "INT", Path("/opt/helpers"), "4242")


def test_a_run_by_hand_takes_the_defaults() -> None:
    env = AppEnv.from_environ({}, max_iter=60, checkpoint_every=5)
    assert (env.max_iter, env.ckpt_path, env.checkpoint_every) == (60, Path("state_iter.txt"), 5)
    assert (env.deadline, env.stop_signal, env.job_id) == (None, "TERM", None)
    assert AppEnv.from_environ({"CHECKPOINT_EVERY": "0"}, max_iter=1).checkpoint_every == 1  # at least one


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({}, "MAX_ITER is not set"),
        ({"MAX_ITER": "  "}, "MAX_ITER is not set"),
        ({"MAX_ITER": "ten"}, "MAX_ITER='ten' is not an integer"),
        ({"MAX_ITER": "-1"}, "MAX_ITER='-1' is negative"),
        ({"MAX_ITER": "5", "CHECKPOINT_EVERY": "2.5"}, "CHECKPOINT_EVERY='2.5' is not an integer"),
    ],
)
def test_a_required_or_malformed_number_is_said_by_its_name(environ: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AppEnv.from_environ(environ)


def test_a_deadline_that_cannot_be_read_is_no_deadline(caplog: pytest.LogCaptureFixture) -> None:
    env = AppEnv.from_environ({"MAX_ITER": "5", "CHAIN_DEADLINE": "tomorrow"})
    assert env.deadline is None
    assert "ignoring unparseable CHAIN_DEADLINE='tomorrow'" in caplog.text
