"""chain.core.verify: what makes a checkpoint complete, and what a resume
sets aside when the newest ones fail."""

from __future__ import annotations

import pytest

from chain.core.verify import (
    Candidate,
    Check,
    Marks,
    Verified,
    candidates,
    hf_state_problem,
    in_ignored_dir,
    manifest_sizes,
    marks_complete,
    newest_complete,
    plan_resume,
    required_marker,
    set_aside_name,
    size_problem,
)


def test_candidates_are_numbered_names_newest_first_never_set_aside_ones() -> None:
    found = candidates(
        [
            "/w/out/checkpoint-500",
            "/w/out/checkpoint-best",
            "/w/out/checkpoint-1500",
            "/w/out/chain-set-aside/checkpoint-2000.1700000000",
            "/w/out/chain-incomplete/checkpoint-2500.1700000000",
            "/w/out/ckpt-000000000700.d",
            "/w/out/ckpt-000000000900.d.corrupt",  # quarantined by chain.app.store
            "/w/out/.tmp-ckpt-000000000800.d.4242",  # a save in progress
        ]
    )
    assert [c.number for c in found] == [1500, 700, 500]
    assert in_ignored_dir("out/chain-set-aside/x-1") and not in_ignored_dir("out/chain-set-aside")


@pytest.mark.parametrize(
    ("name", "is_dir", "has_done", "marker"),
    [
        ("out/checkpoint-40", True, False, "trainer_state.json"),
        ("out/checkpoint-40", True, True, "DONE"),
        ("ck/ckpt-000000000040.d", True, False, "DONE"),
        ("ck/step-40", True, True, "DONE"),
        ("ck/step-40", True, False, None),  # a format chain does not know: --verify-cmd says more
        ("ck/ckpt-000000000040.ckpt", False, False, None),  # a file: published by a rename
    ],
)
def test_the_marker_each_format_writes_last(name: str, is_dir: bool, has_done: bool, marker: str | None) -> None:
    assert required_marker(name, is_dir=is_dir, has_done=has_done) == marker


def _marks(n: int, *, is_dir: bool = True, done: bool = False, marker: bool = False, name: str = "step") -> Marks:
    return Marks(Candidate(f"/w/{name}-{n}", n), is_dir, not is_dir, done, marker or done)


def test_newest_complete_passes_over_a_save_cut_short() -> None:
    hf = [_marks(30, name="checkpoint"), _marks(20, name="checkpoint", marker=True)]
    assert newest_complete(hf) == hf[1]  # checkpoint-30 has no trainer_state.json
    # the writer marks its checkpoints (DONE in 20): a 30 without DONE is cut short, whatever it holds
    marked = [_marks(30, name="checkpoint", marker=True), _marks(20, name="checkpoint", done=True)]
    assert not marks_complete(marked[0], marked=True) and marks_complete(marked[0], marked=False)
    assert newest_complete(marked) == marked[1]
    fifo = Marks(Candidate("/w/step-9", 9), is_dir=False, is_file=False)  # a FIFO, a socket, a link to nothing
    assert newest_complete([fifo]) is None
    assert newest_complete([_marks(5, is_dir=False)]) == _marks(5, is_dir=False)


def _v(n: int, check: Check, why: str = "") -> Verified:
    return Verified(Candidate(f"/w/step-{n}", n), check, why)


def test_resume_sets_aside_every_newer_one_down_to_the_first_that_passes() -> None:
    plan = plan_resume(
        [_v(30, Check.INCOMPLETE), _v(20, Check.BROKEN, "shard a.bin is missing"), _v(10, Check.COMPLETE)]
    )
    assert [v.candidate.number for v in plan.set_aside] == [30, 20]
    assert plan.resume == Candidate("/w/step-10", 10) and not plan.error
    assert plan_resume([_v(10, Check.COMPLETE)]).set_aside == ()
    assert plan_resume([]).resume is None and not plan_resume([]).set_aside


def test_when_none_passes_nothing_complete_looking_is_moved() -> None:
    plan = plan_resume([_v(20, Check.REJECTED, "--verify-cmd exited 1"), _v(10, Check.REJECTED, "x")])
    assert plan.set_aside == () and plan.resume is None
    assert plan.error == "no checkpoint passes verification (newest /w/step-20: --verify-cmd exited 1)"
    cut_short = plan_resume([_v(20, Check.INCOMPLETE), _v(10, Check.INCOMPLETE)])
    assert [v.candidate.number for v in cut_short.set_aside] == [20, 10] and not cut_short.error


def test_set_aside_beside_the_checkpoint_under_a_name_no_glob_counts() -> None:
    target = set_aside_name("/w/out/checkpoint-30", 1700000000)
    assert target == "/w/out/chain-set-aside/checkpoint-30.1700000000"
    assert candidates([target]) == []


def test_manifest_sizes_refuse_what_a_hostile_done_says() -> None:
    assert manifest_sizes({"files": {"a.bin": {"size": 3, "sha256": "x"}, "d/b": {"size": 0}}}) == {
        "a.bin": 3,
        "d/b": 0,
    }
    assert manifest_sizes([]) == "DONE is not a JSON object"
    assert manifest_sizes({"files": []}) == "DONE lists no files object"
    assert "outside" in str(manifest_sizes({"files": {"../../etc/passwd": {"size": 1}}}))
    assert "outside" in str(manifest_sizes({"files": {"/etc/passwd": {"size": 1}}}))
    assert "no size" in str(manifest_sizes({"files": {"a": {"size": True}}}))
    assert "no size" in str(manifest_sizes({"files": {"a": {"size": -1}}}))


def test_size_problem_names_the_first_shard_that_differs() -> None:
    assert size_problem({"a": 3, "b": 4}, {"a": 3, "b": 4}) == ""
    assert size_problem({"a": 3}, {"a": None}) == "shard a is missing"
    assert size_problem({"a": 3}, {"a": 2}) == "shard a has 2 bytes, DONE says 3"


def test_a_trainer_state_must_be_an_object_of_the_same_step() -> None:
    assert hf_state_problem({"global_step": 40}, 40) == ""
    assert hf_state_problem({}, 40) == ""
    assert hf_state_problem([], 40) == "trainer_state.json is not a JSON object"
    assert hf_state_problem({"global_step": 30}, 40) == "trainer_state.json says global_step 30, the name 40"
