"""Work redone after a resume set checkpoints aside (they failed verification
at a runner's start): the runner's record keeps the counter chain had
(``iter_before``, never lowered) and where its app resumed
(``iter_resumed``); the report counts the difference as redone, for that
runner, once."""

from __future__ import annotations

from test_report_redone import _runner

from chain.core.records import JudgedRunner, RunnerRecord, RunnerView
from chain.reporting.metrics import lost_iterations, redone_from_runners, set_aside_iterations


def test_the_runner_that_set_a_checkpoint_aside_redid_the_difference() -> None:
    # runner 2 found checkpoint 30 corrupt, resumed from 20 and reached 45: 10 redone, 15 new
    saved = {"app_exit_code": 99}
    runners = [_runner(1, 0, 30, **saved), _runner(2, 30, 45, iter_resumed=20, **saved), _runner(3, 45, 60, **saved)]
    assert [set_aside_iterations(r) for r in runners] == [0, 10, 0]
    redone = redone_from_runners(runners)
    assert (redone.iterations, redone.by_job, redone.unknown) == (10, {"42": 10}, ())
    assert redone.seconds_by_job == {"42": 55.0 * 10 / 25}  # its useful time, at its own pace


def test_what_a_killed_runner_lost_is_counted_from_where_it_resumed() -> None:
    # printed 21..40 after resuming from 20 (recorded 30), kept 35: lost 5, not the 10 set aside again
    killed = _runner(2, 30, 35, iter_resumed=20, iter_first=21, iter_reached=40, app_exit_code=143)
    assert lost_iterations(killed) == 5


def test_iter_resumed_travels_from_the_record_to_the_judged_line_and_back() -> None:
    record = RunnerRecord("42", iter_before=30, iter_resumed=20)
    assert record.to_json()["iter_resumed"] == 20
    assert "iter_resumed" not in RunnerRecord("43").to_json()  # absent unless a resume set one aside
    line = JudgedRunner(job_id="42", iter_before=30, iter_after=45, iter_resumed=20)
    assert JudgedRunner.from_json(line.to_json()) == line
    assert "iter_resumed" not in JudgedRunner(job_id="43").to_json()
    assert RunnerView.merge("42", record, None).iter_resumed == 20
