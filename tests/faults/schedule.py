"""The fault suite's bookkeeping: the report, the steps and how they run
(a fault not proven is tried again, one skipped or never reached fails the
run). No cluster needed: tests/faults/test_driver_logic.py."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evidence import FaultError, NotProven

ATTEMPTS = 3  # tries of one fault whose effect could not be shown (timing), then it fails


# --------------------------------------------------------------------------- report
@dataclass
class Report:
    seed: int
    scale: str
    t0: float = field(default_factory=time.time)
    settings: dict[str, Any] = field(default_factory=dict)
    schedule: list[str] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    invariants: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    duration: float = 0.0

    def t(self) -> float:
        return round(time.time() - self.t0, 1)

    def fault(self, name: str, injected: str, effect: str, ok: bool, proof: str = "", **extra: Any) -> None:
        self.faults.append(
            {"fault": name, "at": self.t(), "injected": injected, "effect": effect, "ok": ok, "proof": proof, **extra}
        )
        print(
            f"[{self.t():7.1f}s] fault {name}: {injected} -> {'OK' if ok else 'FAILED'}: {effect}"
            + (f"\n            proof: {proof}" if proof else ""),
            flush=True,
        )

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.invariants.append({"invariant": name, "ok": bool(ok), "detail": detail})

    def note(self, text: str) -> None:
        self.notes.append(f"[{self.t():.1f}s] {text}")
        print(f"[{self.t():7.1f}s] {text}", flush=True)

    def proven(self) -> collections.Counter[str]:
        return collections.Counter(f["fault"] for f in self.faults if f["ok"])

    @property
    def ok(self) -> bool:
        return all(f["ok"] for f in self.faults) and all(i["ok"] for i in self.invariants) and bool(self.invariants)

    def text(self) -> str:
        lines = [
            (
                f"fault suite: seed {self.seed}, scale {self.scale}, {self.duration:.0f} s, "
                f"{'PASSED' if self.ok else 'FAILED'}"
            ),
            "settings: " + " ".join(f"{k}={v}" for k, v in self.settings.items()),
            "schedule (seeded): " + "; ".join(self.schedule),
            "",
            "faults:",
        ]
        for f in self.faults:
            lines.append(f"  [{f['at']:7.1f}s] {'ok  ' if f['ok'] else 'FAIL'} {f['fault']}: {f['injected']}")
            lines.append(f"             effect: {f['effect']}")
            if f.get("proof"):
                lines.append(f"             proof: {f['proof']}")
        lines += ["", "invariants:"]
        for i in self.invariants:
            lines.append(f"  {'ok  ' if i['ok'] else 'FAIL'} {i['invariant']}: {i['detail']}")
        if self.notes:
            lines += ["", "notes:"] + [f"  {n}" for n in self.notes]
        return "\n".join(lines)


@dataclass
class Step:
    label: str  # as scheduled (with its seeded hold)
    fault: str  # the fault's name in the report ("" for a step that is no fault)
    run: Callable[[], None]


def execute(steps: list[Step], report: Report, nearly_done: Callable[[], bool]) -> None:
    """Run the steps in order. A fault not proven (NotProven) is tried again
    at once, at most ATTEMPTS times, then recorded as failed; a fault the
    chain is too far along for is recorded as failed (skipped), never left
    out; after a FaultError the rest are recorded as not injected."""
    queue = list(steps)
    tries: collections.Counter[str] = collections.Counter()
    while queue:
        step = queue.pop(0)
        if nearly_done():
            report.fault(step.fault or step.label, "(not injected)", "skipped: the chain was nearly done", False)
            continue
        try:
            step.run()
        except NotProven as exc:
            tries[step.label] += 1
            if tries[step.label] < ATTEMPTS:
                report.note(f"{step.label}: attempt {tries[step.label]} not proven, tried again: {exc}")
                queue.insert(0, step)
            else:
                report.fault(step.fault, f"{ATTEMPTS} attempts", f"never proven: {exc}", False)
        except FaultError as exc:
            report.note(f"{step.label}: {exc}")
            if not any(f["ok"] is False for f in report.faults[-1:]):
                report.fault(step.fault or step.label, "(aborted)", str(exc)[:400], False)
            for rest in queue:
                report.fault(rest.fault or rest.label, "(not injected)", f"the run stopped at {step.label}", False)
            queue = []


def proven_check(steps: list[Step], report: Report) -> None:
    """Every scheduled fault was injected and proven, as often as scheduled."""
    expected = collections.Counter(s.fault for s in steps if s.fault)
    proven = report.proven()
    missing = expected - proven
    report.check(
        "every scheduled fault injected and proven",
        not missing,
        f"proven {dict(proven)}" + (f"; missing {dict(missing)}" if missing else ""),
    )
