"""``chain.reporting.report``'s short report, the one a relay runner that ends
its chain makes in its own slot (``job_report``); the full report's content is
tested in tests/report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeBackend

from chain import api
from chain.reporting import report


def _chain_dir(tmp_path: Path) -> Path:
    settings = {"app_cmd": "true", "max_iter": 10, "mode": "relay"}
    api.submit(settings, {}, config=None, chain_dir=tmp_path / ".chain", workdir=tmp_path, backend=FakeBackend())
    return tmp_path / ".chain"


def test_without_the_plot_the_report_has_its_table_and_summary_and_no_stale_plot(tmp_path: Path) -> None:
    chain_dir = _chain_dir(tmp_path)
    (chain_dir / "report").mkdir(exist_ok=True)
    (chain_dir / "report" / "progress.png").write_bytes(b"a plot of the chain's first half")
    paths = report.make_report(chain_dir, echo=False, backends=lambda name, d: FakeBackend(), settle=0, plot=False)
    assert [p.name for p in paths] == ["usage.csv", "summary.json"]
    assert not (chain_dir / "report" / "progress.png").exists()
    summary = json.loads((chain_dir / "report" / "summary.json").read_text())
    assert report.PLOT_LATER in summary["notes"] and "progress" not in summary["files"]


def test_job_report_asks_accounting_once_and_renders_no_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Path, dict[str, Any]]] = []

    def make_report(chain_dir: Path, **kw: Any) -> list[Path]:
        calls.append((chain_dir, kw))
        return []

    monkeypatch.setattr(report, "make_report", make_report)
    assert report.job_report(["--chain-dir", str(tmp_path)]) == 0
    assert calls == [(tmp_path, {"echo": False, "settle": 0.0, "plot": False})]
