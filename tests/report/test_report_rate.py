"""One rate format: chain status, the report and the plot
print a rate through ``format_rate``, which prints it one way."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _report_data import ITER_LOG

from chain.reporting import metrics
from chain.reporting.metrics import format_rate, parse_iteration_log
from chain.reporting.plot import progress_data, progress_title
from chain.reporting.report import make_report


@pytest.mark.parametrize(
    ("rate", "shown"),
    [
        (32409.2, "32,400 it/h"),
        (34054, "34,100 it/h"),
        (60414.9, "60,400 it/h"),
        (2_512_345.0, "2,510,000 it/h"),
        (999.6, "1,000 it/h"),
        (523.4, "523 it/h"),
        (5.234, "5.23 it/h"),
        (5.0, "5 it/h"),
        (0.52, "0.52 it/h"),
        (0.0012, "0.0012 it/h"),
        (0, "0 it/h"),
        (None, "-"),
        (float("nan"), "-"),
        (-1.0, "-"),
    ],
)
def test_format_rate(rate: float | None, shown: str) -> None:
    assert format_rate(rate) == shown


def test_the_report_prints_the_rate_through_format_rate(chain_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = make_report(chain_dir, echo=True, settle=0)
    out = capsys.readouterr().out
    mean = re.search(r"mean rate (.*) over the chain's span", out)
    assert mean, out
    summary = json.loads(paths[1].read_text())
    assert mean.group(1) == format_rate(summary["mean_rate_per_hour"])


def test_the_plot_title_prints_the_rate_through_format_rate() -> None:
    data = progress_data(parse_iteration_log(ITER_LOG), [], max_iter=30, chain_id="chain-effb11")
    assert data.rate_per_hour
    assert progress_title(data).endswith(f"rate {format_rate(data.rate_per_hour)})")
    assert re.search(r"rate [\d,]+(\.\d+)? it/h\)$", progress_title(data))


def test_no_other_module_formats_a_rate() -> None:
    """The unit is written once, in the formatter: another ``it/h`` in the
    package is a second format."""
    package = Path(metrics.__file__).resolve().parents[1]
    elsewhere = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.name != "metrics.py" and "it/h" in path.read_text(encoding="utf-8")
    ]
    assert elsewhere == []
