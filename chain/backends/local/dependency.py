"""Slurm's job dependencies for the local backend: parsing and the verdict.

A job may start when its dependency expression is satisfied ("ok"), must
keep waiting ("wait"), or never can ("never": Slurm leaves such a job
pending with reason DependencyNeverSatisfied).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from chain.backends.local.spool import JobRecord, Spool
from chain.core.model import JobState

Verdict = Literal["ok", "wait", "never"]


def parse_dependency(text: str) -> list[list[tuple[str, list[str]]]]:
    """``a:1:2,b:3?c:4`` -> OR-groups of AND-terms ``(type, ids)``.

    Slurm separates all-of terms with ``,`` and any-of terms with ``?``; a
    dependency uses one or the other, so both nest here as OR of ANDs.
    Raises ValueError for anything sbatch would refuse.
    """
    groups: list[list[tuple[str, list[str]]]] = []
    for alternative in text.split("?"):
        terms: list[tuple[str, list[str]]] = []
        for term in alternative.split(","):
            kind, _, rest = term.strip().partition(":")
            kind = kind.lower()
            if kind == "singleton" and not rest:
                terms.append((kind, []))
                continue
            if kind not in ("after", "afterany", "afterok", "afternotok", "aftercorr"):
                raise ValueError(f"unknown dependency type {kind!r}")
            ids = [i.split("+")[0] for i in rest.split(":")]  # "+minutes" delay ignored
            if not ids or not all(i.split("_")[0].isdigit() for i in ids):
                raise ValueError(f"bad job ids in dependency {term!r}")
            terms.append((kind, [i.split("_")[0] for i in ids]))
        groups.append(terms)
    return groups


def _term_verdict(spool: Spool, me: JobRecord, kind: str, ids: list[str], ended: set[str]) -> Verdict:
    if kind == "singleton":
        return _singleton_verdict(spool, me, ended)
    return _all([_after_verdict(kind, spool.refresh(dep_id)) for dep_id in ids])


def _singleton_verdict(spool: Spool, me: JobRecord, ended: set[str]) -> Verdict:
    """Wait while an earlier job of the same name is active."""
    for other_id in spool.ids_by_name(me.name):
        if int(other_id) < int(me.job_id) and other_id not in ended:
            other = spool.refresh(other_id)
            if other is not None and other.active:
                return "wait"
            ended.add(other_id)  # ended jobs stay ended: read each once
    return "ok"


# after<kind>:<id> once the job has ended, by its final state.
_ENDED_RULES: dict[str, Callable[[JobState], Verdict]] = {
    "afterany": lambda state: "ok",
    "afterok": lambda state: "ok" if state is JobState.COMPLETED else "never",
    "aftercorr": lambda state: "ok" if state is JobState.COMPLETED else "never",
    "afternotok": lambda state: "never" if state is JobState.COMPLETED else "ok",
}


def _after_verdict(kind: str, dep: JobRecord | None) -> Verdict:
    if dep is None:  # purged ids count as satisfied in Slurm
        return "ok"
    if kind == "after":  # started (or ended) will do
        return "wait" if dep.state is JobState.PENDING else "ok"
    if dep.active:
        return "wait"
    return _ENDED_RULES[kind](dep.state)


def _all(verdicts: list[Verdict]) -> Verdict:
    if "never" in verdicts:
        return "never"
    return "wait" if "wait" in verdicts else "ok"


def dependency_verdict(spool: Spool, me: JobRecord, ended: set[str] | None = None) -> Verdict:
    """Can ``me`` start? ``ended`` caches ids known finished between calls."""
    if not me.dependency:
        return "ok"
    ended = set() if ended is None else ended
    alternatives = [
        _all([_term_verdict(spool, me, kind, ids, ended) for kind, ids in terms])
        for terms in parse_dependency(me.dependency)
    ]
    if "ok" in alternatives:
        return "ok"
    return "wait" if "wait" in alternatives else "never"
