"""A multirun's jobs as the sweep's points: each in its Hydra directory; a
re-run finds its jobs again by their directories, adds the new ones, and
never puts another job into a directory that holds one."""

from __future__ import annotations

import dataclasses

import pytest

from chain.core.settings import Settings
from chain.errors import ConfigError
from hydra_plugins.hydra_chain_launcher._jobs import HydraJob, merged, settings_change

SETTINGS = Settings(app_cmd="/py -m job {job_num} {overrides} -- /py /w/t.py", max_iter=5)


def _jobs(lrs: list[str], seeds: list[int]) -> list[HydraJob]:
    overrides = [(f"lr={lr}", f"seed={s}") for lr in lrs for s in seeds]
    return [HydraJob(n, o, str(n)) for n, o in enumerate(overrides)]


def test_a_new_sweep_has_one_point_per_job_in_its_directory() -> None:
    plan = merged(None, SETTINGS, _jobs(["0.1", "0.2"], [0, 1, 2]), 1.0)
    assert plan.record.names() == ["0", "1", "2", "3", "4", "5"] and plan.raise_to is None
    assert plan.record.points[4].point.as_dict() == {"job_num": 4, "overrides": "lr=0.2 seed=1"}
    assert all(entry.given for entry in plan.record.points)


def test_the_same_multirun_again_changes_nothing() -> None:
    first = merged(None, SETTINGS, _jobs(["0.1", "0.2"], [0, 1, 2]), 1.0).record
    again = merged(first, SETTINGS, _jobs(["0.1", "0.2"], [0, 1, 2]), 2.0)
    assert again.record == first and again.raise_to is None


def test_a_grown_multirun_adds_only_its_new_jobs() -> None:
    first = merged(None, SETTINGS, _jobs(["0.1", "0.2"], [0, 1]), 1.0).record
    grown = merged(first, SETTINGS, _jobs(["0.1", "0.2", "0.3"], [0, 1]), 2.0).record
    assert grown.names() == ["0", "1", "2", "3", "4", "5"] and grown.points[:4] == first.points


def test_a_directory_holding_another_jobs_overrides_is_refused() -> None:
    first = merged(None, SETTINGS, _jobs(["0.1", "0.2"], [0, 1]), 1.0).record
    with pytest.raises(ConfigError, match=r"job #2's directory '2' holds the job 'lr=0.2 seed=0'.*override_dirname"):
        merged(first, SETTINGS, _jobs(["0.1"], [0, 1, 2]), 2.0)


def test_a_job_whose_number_moved_is_the_same_point_in_the_same_directory() -> None:
    first = merged(None, SETTINGS, [HydraJob(0, ("lr=0.1",), "lr=0.1")], 1.0).record
    moved = merged(first, SETTINGS, [HydraJob(0, ("lr=0.05",), "lr=0.05"), HydraJob(1, ("lr=0.1",), "lr=0.1")], 2.0)
    assert moved.record.names() == ["lr=0.1", "lr=0.05"]
    assert moved.record.points[0].point.as_dict()["job_num"] == 0  # the stored point, left alone


def test_a_rerun_may_raise_max_iter_and_change_nothing_else() -> None:
    first = merged(None, SETTINGS, _jobs(["0.1"], [0]), 1.0).record
    raised = merged(first, dataclasses.replace(SETTINGS, max_iter=9), _jobs(["0.1"], [0]), 2.0)
    assert raised.raise_to == 9 and raised.record.settings.max_iter == 5  # Sweep.resume raises it
    assert settings_change(SETTINGS, SETTINGS) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_iter": 4}, "max_iter 4 is below the sweep's 5"),
        ({"runner_time": "0:30"}, "another runner_time"),
        ({"app_cmd": "/py -m job {job_num} {overrides} -- /py /w/other.py"}, "another the app's command line"),
    ],
)
def test_a_rerun_with_other_settings_is_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_change(SETTINGS, dataclasses.replace(SETTINGS, **change))  # type: ignore[arg-type]
