"""App-side helpers for programs run by a ``chain``: atomic checkpoints, the
progress counter, retention, stop signals, termination warnings, checkpoint
intervals, asynchronous saves and run logs.  Standard library only.

Typical step loop (see examples/python/train.py for the full version)::

    env = AppEnv.from_environ()
    store = CheckpointStore("checkpoints", counter_path=env.ckpt_path)
    restored = store.restore()  # newest loadable; falls back, logs why
    step = restored.info.step if restored else 0
    meter = CostMeter()
    with StopMonitor() as monitor:
        while step < env.max_iter:
            status = monitor.status(lead_seconds(meter.worst, margin=5))
            if status.exit_code is not None:  # 99 signal/deadline, 75 warning
                store.save(step, state)
                raise SystemExit(status.exit_code)
            step = train_step(state)
            if step % env.checkpoint_every == 0 or monitor.urgent_save_due(status):
                with meter.measure():
                    store.save(step, state)  # counter written after, never ahead
        store.save(step, state)  # exit 0: counter == MAX_ITER
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chain.app.asyncsave import AsyncSaver
    from chain.app.atomic import (
        DONE_MARKER,
        CounterFormatError,
        fsync_dir,
        is_complete_dir,
        publish_dir,
        read_counter,
        read_done_marker,
        write_bytes_atomic,
        write_counter,
        write_done_marker,
        write_json_atomic,
        write_text_atomic,
    )
    from chain.app.contract import AppEnv, ExitCode, shell_helpers_dir
    from chain.app.interval import (
        CheckpointPolicy,
        CostMeter,
        IntervalMode,
        SaveReason,
        StepSchedule,
        WallClockSchedule,
        lead_seconds,
        overhead_interval,
        young_daly_interval,
    )
    from chain.app.runlog import RunLog, configure_logging, log_iteration
    from chain.app.serial import BytesSerializer, JsonSerializer, Serializer
    from chain.app.stop import StopMonitor, StopReason, StopStatus, parse_instant
    from chain.app.store import (
        CheckpointInfo,
        CheckpointKind,
        CheckpointStore,
        CorruptCheckpoint,
        MetricMode,
        Restored,
    )

# Each name is imported from its module when first used (PEP 562): the
# chain's own commands import chain.app.atomic and chain.app.contract
# without paying for the rest (``chain status`` stays fast).
_WHERE = {
    "AsyncSaver": "chain.app.asyncsave",
    "DONE_MARKER": "chain.app.atomic",
    "CounterFormatError": "chain.app.atomic",
    "fsync_dir": "chain.app.atomic",
    "is_complete_dir": "chain.app.atomic",
    "publish_dir": "chain.app.atomic",
    "read_counter": "chain.app.atomic",
    "read_done_marker": "chain.app.atomic",
    "write_bytes_atomic": "chain.app.atomic",
    "write_counter": "chain.app.atomic",
    "write_done_marker": "chain.app.atomic",
    "write_json_atomic": "chain.app.atomic",
    "write_text_atomic": "chain.app.atomic",
    "AppEnv": "chain.app.contract",
    "ExitCode": "chain.app.contract",
    "shell_helpers_dir": "chain.app.contract",
    "CheckpointPolicy": "chain.app.interval",
    "CostMeter": "chain.app.interval",
    "IntervalMode": "chain.app.interval",
    "SaveReason": "chain.app.interval",
    "StepSchedule": "chain.app.interval",
    "WallClockSchedule": "chain.app.interval",
    "lead_seconds": "chain.app.interval",
    "overhead_interval": "chain.app.interval",
    "young_daly_interval": "chain.app.interval",
    "RunLog": "chain.app.runlog",
    "configure_logging": "chain.app.runlog",
    "log_iteration": "chain.app.runlog",
    "BytesSerializer": "chain.app.serial",
    "JsonSerializer": "chain.app.serial",
    "Serializer": "chain.app.serial",
    "StopMonitor": "chain.app.stop",
    "StopReason": "chain.app.stop",
    "StopStatus": "chain.app.stop",
    "parse_instant": "chain.app.stop",
    "CheckpointInfo": "chain.app.store",
    "CheckpointKind": "chain.app.store",
    "CheckpointStore": "chain.app.store",
    "CorruptCheckpoint": "chain.app.store",
    "MetricMode": "chain.app.store",
    "Restored": "chain.app.store",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'chain.app' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "DONE_MARKER",
    "AppEnv",
    "AsyncSaver",
    "BytesSerializer",
    "CheckpointInfo",
    "CheckpointKind",
    "CheckpointPolicy",
    "CheckpointStore",
    "CorruptCheckpoint",
    "CostMeter",
    "CounterFormatError",
    "ExitCode",
    "IntervalMode",
    "JsonSerializer",
    "MetricMode",
    "Restored",
    "RunLog",
    "SaveReason",
    "Serializer",
    "StepSchedule",
    "StopMonitor",
    "StopReason",
    "StopStatus",
    "WallClockSchedule",
    "configure_logging",
    "fsync_dir",
    "is_complete_dir",
    "lead_seconds",
    "log_iteration",
    "overhead_interval",
    "parse_instant",
    "publish_dir",
    "read_counter",
    "read_done_marker",
    "shell_helpers_dir",
    "write_bytes_atomic",
    "write_counter",
    "write_done_marker",
    "write_json_atomic",
    "write_text_atomic",
    "young_daly_interval",
]
