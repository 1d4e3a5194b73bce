"""Slurm host lists expanded without asking Slurm (chain.core.hostlist), as
``scontrol show hostnames`` prints them."""

from __future__ import annotations

import pytest

from chain.core.hostlist import expand_hostlist


@pytest.mark.parametrize(
    "text, names",
    [
        ("n1", ["n1"]),
        ("n[1-3]", ["n1", "n2", "n3"]),
        ("n[1-2,5],gpu-a01", ["n1", "n2", "n5", "gpu-a01"]),
        ("node[08-10]", ["node08", "node09", "node10"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("chaindev-n[1-2],vm", ["chaindev-n1", "chaindev-n2", "vm"]),
        ("", []),
    ],
)
def test_host_lists_expand(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("text", ["n[1-", "n[a-b]", "n]1["])
def test_a_malformed_list_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Slurm host list"):
        expand_hostlist(text)
