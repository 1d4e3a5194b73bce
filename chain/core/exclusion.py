"""Nodes a chain stops using (issue 30). Pure.

A runner that stalled (``--stall-timeout``) or lost a node (NODE_FAIL,
BOOT_FAIL) puts a strike on the node to blame: the nodes Slurm shows down or
not responding among its nodes when it is judged; else, for a runner on one
node, that node. A multi-node runner that hung with all its nodes up names
no node (any of them may be the cause: blaming all would exclude good
nodes). An app's own failure (its exit code) is the app's, never a node's. A node with ``EXCLUDE_AFTER`` strikes is left out
of the chain's later runners (``sbatch --exclude``) until ``chain submit
--resume --reset-excluded``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

EXCLUDE_AFTER = 2


def blamed(nodes: Sequence[str], down: Collection[str], bad: bool) -> list[str]:
    """The nodes a bad runner's failure is put on (none for a good runner)."""
    if not bad or not nodes:
        return []
    gone = [n for n in nodes if n in down]
    if gone:
        return gone
    return list(nodes) if len(nodes) == 1 else []


def struck(strikes: Mapping[str, int], nodes: Sequence[str]) -> dict[str, int]:
    """The strikes after one more on each of ``nodes``."""
    out = dict(strikes)
    for node in dict.fromkeys(nodes):
        out[node] = out.get(node, 0) + 1
    return out


def excluded(strikes: Mapping[str, int], after: int = EXCLUDE_AFTER) -> list[str]:
    """The nodes the chain's runners no longer use, sorted."""
    return sorted(node for node, count in strikes.items() if count >= after)
