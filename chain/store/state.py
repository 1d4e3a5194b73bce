"""Transitional: the names of chain.store, for modules not yet moved to it."""

from chain.store import (
    ChainDir,
    ChainStatus,
    read_counter,
    read_json,
    runner_entry,
    tail_lines,
    write_json_atomic,
)

__all__ = ["ChainDir", "ChainStatus", "read_counter", "read_json", "runner_entry", "tail_lines",
           "write_json_atomic"]
