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
from chain.app.runlog import RunLog, configure_logging
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
