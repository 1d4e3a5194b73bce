"""The chain directory: its layout, the status store, the runners' records.

Everything is JSON written atomically and validated on load; nothing read
from it is sourced or evaluated.
"""

from chain.core.records import JudgedRunner, RunnerView, judged_runner
from chain.core.status import ChainStatus
from chain.store.chaindir import ChainDir
from chain.store.jsonio import read_counter, read_json, tail_lines, write_json

__all__ = [
    "ChainDir",
    "ChainStatus",
    "JudgedRunner",
    "RunnerView",
    "judged_runner",
    "read_counter",
    "read_json",
    "tail_lines",
    "write_json",
]
