"""chain.store.counter: every --counter-cmd reader on real files and
processes, and the one entry point that falls back to CKPT_PATH."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _torch_files import Runs, torch_like

from chain.app.contract import NO_CHECKPOINT_EXIT
from chain.core.resolution import resolve
from chain.core.settings import Settings
from chain.errors import CheckpointError
from chain.store import counter
from chain.store.counter import (
    CounterReading,
    counter_source,
    known_counter,
    read_chain_counter,
    read_cmd,
    read_counter_state,
    saved_at,
)

HAS_TORCH = importlib.util.find_spec("torch") is not None


def _settings(spec: str = "", **flags: str) -> Settings:
    return resolve({"app_cmd": "python3 train.py", "counter_cmd": spec, **flags}, {}, {})


def test_without_a_spec_the_counter_is_ckpt_path(tmp_path: Path) -> None:
    s = _settings(ckpt_path="out/n.txt")
    assert read_counter_state(s, tmp_path) == CounterReading(0, False, tmp_path / "out/n.txt")
    (tmp_path / "out").mkdir()
    (tmp_path / "out/n.txt").write_text("12\n")
    assert (
        read_chain_counter(s, tmp_path) == 12
        and known_counter(3, tmp_path, counter_cmd="", ckpt_path="out/n.txt") == 12
    )
    assert counter_source(s) == "out/n.txt"
    (tmp_path / "out/n.txt").write_text("twelve\n")
    with pytest.raises(CheckpointError, match="does not hold a plain integer"):
        read_chain_counter(s, tmp_path)


def test_json_key_paths(tmp_path: Path) -> None:
    s = _settings("json:out/trainer_state.json:state.log.1.step")
    assert read_counter_state(s, tmp_path) == CounterReading(0, False, tmp_path / "out/trainer_state.json")
    (tmp_path / "out").mkdir()
    path = tmp_path / "out/trainer_state.json"
    path.write_text(json.dumps({"state": {"log": [{"step": 5}, {"step": 500}]}}))
    assert read_counter_state(s, tmp_path) == CounterReading(500, True, path)
    assert known_counter(3, tmp_path, counter_cmd=s.counter_cmd, ckpt_path="") == 500
    assert counter_source(s) == "out/trainer_state.json (--counter-cmd json:out/trainer_state.json:state.log.1.step)"
    assert (
        counter_source(_settings("glob:out/checkpoint-*")) == "out/checkpoint-* (--counter-cmd glob:out/checkpoint-*)"
    )
    assert counter_source(_settings("cat n")) == "(--counter-cmd 'cat n' exited 100: none yet)"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ({"state": {}}, "out.json has no key state.log"),
        ({"state": {"log": [{"step": 1}]}}, "out.json has no key state.log.1"),
        ({"state": {"log": [{}, {"step": "500"}]}}, "key state.log.1.step of .*out.json is '500', not a non-negative"),
        ({"state": {"log": [{}, {"step": -3}]}}, "not a non-negative integer"),
    ],
)
def test_json_errors_name_the_file_and_the_key(tmp_path: Path, content: object, message: str) -> None:
    (tmp_path / "out.json").write_text(json.dumps(content))
    with pytest.raises(CheckpointError, match=message) as err:
        read_chain_counter(_settings("json:out.json:state.log.1.step"), tmp_path)
    assert str(err.value).startswith("--counter-cmd json:out.json:state.log.1.step: ")


def test_json_half_written_is_an_error_not_zero(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text('{"iter_num": 4')
    with pytest.raises(CheckpointError, match="s.json is not valid JSON"):
        read_chain_counter(_settings("json:s.json:iter_num"), tmp_path)


def test_glob_takes_the_largest_trailing_integer(tmp_path: Path) -> None:
    s = _settings("glob:out/checkpoint-*")
    assert read_counter_state(s, tmp_path) == CounterReading(0, False, None)
    (tmp_path / "out").mkdir()
    for name in ("checkpoint-500", "checkpoint-1500", "checkpoint-best", "checkpoint-900"):
        (tmp_path / "out" / name).mkdir()
        (tmp_path / "out" / name / "trainer_state.json").write_text("{}")
    reading = read_counter_state(s, tmp_path)
    assert (reading.value, reading.present, reading.file) == (1500, True, tmp_path / "out/checkpoint-1500")
    (tmp_path / "out" / "checkpoint-1500").rename(tmp_path / "out" / "checkpoint-latest")
    assert read_chain_counter(s, tmp_path) == 900  # names without a number are passed over


def test_a_shell_command_prints_the_counter(tmp_path: Path) -> None:
    (tmp_path / "n").write_text("42\n")
    assert read_cmd("cat n", tmp_path) == CounterReading(42, True, None)  # run in the working directory
    assert read_chain_counter(_settings("cat n"), tmp_path) == 42
    assert known_counter(3, tmp_path, counter_cmd="cat n", ckpt_path="") == 3  # never run by chain status


def test_exit_100_means_no_checkpoint_yet(tmp_path: Path) -> None:
    assert NO_CHECKPOINT_EXIT == 100
    assert read_cmd("test -f n && cat n || exit 100", tmp_path) == CounterReading(0, False, None)


def test_another_exit_status_is_an_error_with_the_last_stderr_line(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError) as err:
        read_cmd("echo first >&2; echo 'no such file' >&2; exit 1", tmp_path)
    assert str(err.value) == (
        "--counter-cmd \"echo first >&2; echo 'no such file' >&2; exit 1\" exited 1: no such file"
    )


@pytest.mark.parametrize("output", ["", "12 13", "12.5", "-3", "step 12"])
def test_anything_but_one_integer_is_bad_output(tmp_path: Path, output: str) -> None:
    with pytest.raises(CheckpointError, match="not one integer") as err:
        read_cmd(f"echo '{output}'", tmp_path)
    assert "\n" not in str(err.value)


def test_a_command_that_takes_too_long_is_stopped_with_its_children(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(CheckpointError, match=r"--counter-cmd 'sleep 30 & sleep 30; echo 1' timed out after 0.3 s"):
        read_cmd("sleep 30 & sleep 30; echo 1", tmp_path, timeout=0.3)
    assert time.monotonic() - started < 5


def test_the_default_bound_is_documented_in_the_help() -> None:
    assert counter.COUNTER_CMD_TIMEOUT == 120.0


def test_saved_at_is_the_files_mtime(tmp_path: Path) -> None:
    path = tmp_path / "ckpt.json"
    path.write_text("{}")
    os.utime(path, (1000.0, 1234.5))
    assert saved_at(CounterReading(3, True, path)) == 1234.5
    assert saved_at(CounterReading(3, True, None)) is None
    assert saved_at(CounterReading(0, False, tmp_path / "absent")) is None


def test_torch_missing_file_is_zero_without_starting_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(subprocess, "Popen", None)  # would fail if called
    assert read_counter_state(_settings("torch:out/ckpt.pt:iter_num"), tmp_path).value == 0
    assert known_counter(3, tmp_path, counter_cmd="torch:out/ckpt.pt:iter_num", ckpt_path="") == 3


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_reads_a_key_of_a_saved_dict(tmp_path: Path) -> None:
    save = (
        "import sys, torch; torch.save({'iter_num': int(sys.argv[2]), 'step': torch.tensor([7]), "
        "'vec': torch.zeros(3), 'name': 'x', 'model': {'w': torch.ones(2)}}, sys.argv[1])"
    )
    subprocess.run([sys.executable, "-c", save, str(tmp_path / "ckpt.pt"), "250"], check=True)
    reading = read_counter_state(_settings("torch:ckpt.pt:iter_num"), tmp_path)
    assert reading == CounterReading(250, True, tmp_path / "ckpt.pt")
    assert read_chain_counter(_settings("torch:ckpt.pt:step"), tmp_path) == 7  # a one-element tensor
    for key, message in (
        ("vec", "key 'vec' of .* is .*not a non-negative integer"),
        ("name", "key 'name' .* not a non-negative integer"),
        ("absent", "has no key 'absent'"),
    ):
        with pytest.raises(CheckpointError, match=message) as err:
            read_chain_counter(_settings(f"torch:ckpt.pt:{key}"), tmp_path)
        assert str(err.value).startswith(f"--counter-cmd torch:ckpt.pt:{key} exited 2: ")


def test_the_runner_side_never_imports_torch(tmp_path: Path) -> None:
    """The torch: reader reads a plain integer from the file itself and loads
    anything else in a subprocess: reading the counter leaves torch out of
    the reading process."""
    probe = (
        "import sys; from pathlib import Path; from chain.core.resolution import resolve; "
        "from chain.store.counter import read_chain_counter; "
        "s = resolve({'app_cmd': 'x', 'counter_cmd': 'torch:absent.pt:k'}, {}, {}); "
        "print(read_chain_counter(s, Path(sys.argv[1])), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "False"]


def test_the_views_counter_is_the_recorded_one_unless_a_checkpoint_tells_without_a_program(tmp_path: Path) -> None:
    def shown(counter_cmd: str = "", ckpt_path: str = "state_iter.txt", workdir: Path | str = tmp_path) -> int:
        return known_counter(7, workdir, counter_cmd=counter_cmd, ckpt_path=ckpt_path)

    assert shown() == 7  # no checkpoint (yet, or any more): what the jobs recorded
    (tmp_path / "state_iter.txt").write_text("nine\n")
    assert shown() == 7  # unreadable: the view goes on with the recorded one
    (tmp_path / "state_iter.txt").write_text("9\n")
    assert shown() == 9 and shown(workdir="") == 7 and shown(ckpt_path="") == 7
    assert shown("json:") == 7  # a spec that does not parse: nothing is read
    torch_like(tmp_path / "ckpt.pt", {"iter_num": 11, "step": Runs("true")})
    assert shown("torch:ckpt.pt:iter_num") == 11
    assert shown("torch:ckpt.pt:step") == 7  # only torch can read it: not here
