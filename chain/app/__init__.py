"""App-side helpers for programs run by a ``chain``: atomic checkpoints, the
progress counter, retention, stop signals, termination warnings, checkpoint
intervals, asynchronous saves and run logs.  Standard library only.

Typical step loop::

    env = AppEnv.from_environ()
    store = CheckpointStore("checkpoints", counter_path=env.ckpt_path)
    restored = store.restore()
    with StopMonitor() as monitor:
        for step in range(start + 1, env.max_iter + 1):
            train_step()
            status = monitor.status(lead_seconds=2 * meter.worst + 60)
            if step % env.checkpoint_every == 0 or monitor.urgent_save_due(status):
                store.save(step, state)
            if status.exit_code is not None:
                store.save(step, state)
                raise SystemExit(status.exit_code)
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
