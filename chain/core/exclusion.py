"""Nodes a chain stops using. Pure.

A runner puts a strike on the node to blame when it ``failed`` there (the
watchdog stopped it as stalled, or Slurm ended it NODE_FAIL or BOOT_FAIL):
the nodes Slurm shows down or not responding among its nodes when it is
judged; else, for a runner on one node, that node. A multi-node runner that
hung with all its nodes up names no node (any of them may be the cause:
blaming all would exclude good nodes). A runner Slurm ``taken_back``
(preempted, requeued) strikes only those of its nodes shown down: a node
failure is answered with a requeue too, a preemption is nobody's fault. An
app's own failure (its exit code) is the app's, never a node's. A node with
``--exclude-after`` strikes (``EXCLUDE_AFTER`` by default) is left out of
the chain's later runners (``sbatch --exclude``) until ``chain submit
--resume --reset-excluded``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

EXCLUDE_AFTER = 2


def asks_node_states(nodes: Sequence[str], *, failed: bool, taken_back: bool) -> bool:
    """Whether ``blamed`` depends on which nodes are down (else it need not be asked)."""
    return bool(nodes) and (failed or taken_back) and not (failed and len(nodes) == 1)


def blamed(nodes: Sequence[str], down: Collection[str], *, failed: bool, taken_back: bool = False) -> list[str]:
    """The nodes a runner's end is put on (none when it neither failed nor was taken back)."""
    if not nodes or not (failed or taken_back):
        return []
    gone = [n for n in nodes if n in down]
    if gone or not failed:
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
