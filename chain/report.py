"""Chain reports: usage table (CSV) and progress plot (PNG).

Minimal first version: the chain's own runner records as CSV. Usage from
sacct and the progress plot come with the analytics issue.
"""

from __future__ import annotations

import csv
from pathlib import Path

from chain.state import ChainDir

COLUMNS = ("seq", "job_id", "state", "exit_code", "iter_before", "iter_after", "start", "end",
           "stop_to_exit", "verdict", "reason")


def make_report(chain_dir: Path, *, echo: bool = True) -> list[Path]:
    chain = ChainDir(chain_dir)
    chain.reports.mkdir(parents=True, exist_ok=True)
    path = chain.reports / "runners.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for entry in chain.iter_runners():
            writer.writerow(entry)
    return [path]
