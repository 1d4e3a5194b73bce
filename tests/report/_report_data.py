"""Literal data captured on the dev cluster (Slurm 22.05.8), and a chain directory built from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# sacct -n -P -j 36,37,38 -o JobIDRaw,State,ExitCode,Submit,Start,End,ElapsedRaw,TotalCPU,NodeList,MaxRSS
# (a complete 3-runner chain: two voluntary checkpoints (99), then done)
SACCT_CHAIN = """\
36|FAILED|99:0|2026-11-29T07:54:32|2026-11-29T07:54:35|2026-11-29T07:54:41|6|00:00.620|vm|
36.batch|FAILED|99:0|2026-11-29T07:54:35|2026-11-29T07:54:35|2026-11-29T07:54:41|6|00:00.620|vm|
37|FAILED|99:0|2026-11-29T07:54:42|2026-11-29T07:54:42|2026-11-29T07:54:48|6|00:00.720|vm|
37.batch|FAILED|99:0|2026-11-29T07:54:42|2026-11-29T07:54:42|2026-11-29T07:54:48|6|00:00.720|vm|
38|COMPLETED|0:0|2026-11-29T07:54:49|2026-11-29T07:54:51|2026-11-29T07:54:56|5|00:00.685|vm|
38.batch|COMPLETED|0:0|2026-11-29T07:54:51|2026-11-29T07:54:51|2026-11-29T07:54:56|5|00:00.685|vm|
"""

# Same fields, other jobs: memory in the batch script and an srun step, a
# time-limit kill, a scancel, a pending job.
SACCT_MIXED = """\
22|COMPLETED|0:0|2026-11-29T07:52:15|2026-11-29T07:52:15|2026-11-29T07:52:50|35|00:00.495|vm|
22.batch|COMPLETED|0:0|2026-11-29T07:52:15|2026-11-29T07:52:15|2026-11-29T07:52:50|35|00:00.279|vm|98492K
22.0|COMPLETED|0:0|2026-11-29T07:52:38|2026-11-29T07:52:38|2026-11-29T07:52:50|12|00:00.216|vm|54552K
23|TIMEOUT|0:0|2026-11-29T07:52:15|2026-11-29T07:52:15|2026-11-29T07:53:18|63|00:00.003|vm|
23.batch|CANCELLED|0:15|2026-11-29T07:52:15|2026-11-29T07:52:15|2026-11-29T07:53:18|63|00:00.003|vm|2968K
24|CANCELLED by 0|0:0|2026-11-29T07:52:15|2026-11-29T07:52:15|2026-11-29T07:52:31|16|00:00.003|vm|
24.batch|CANCELLED|0:15|2026-11-29T07:52:15|2026-11-29T07:52:15|2026-11-29T07:52:31|16|00:00.003|vm|3208K
41|PENDING|0:0|2026-11-29T07:55:02|Unknown|Unknown|0|00:00:00|None assigned|
"""

# The same jobs with -X: TotalCPU is not summed over the steps there.
SACCT_MIXED_X = """\
22|COMPLETED|0:0|2026-11-29T07:52:15|2026-11-29T07:52:15|2026-11-29T07:52:50|35|00:00:00|vm|
23|TIMEOUT|0:0|2026-11-29T07:52:15|2026-11-29T07:52:15|2026-11-29T07:53:18|63|00:00:00|vm|
24|CANCELLED by 0|0:0|2026-11-29T07:52:15|2026-11-29T07:52:15|2026-11-29T07:52:31|16|00:00:00|vm|
"""

ACCOUNTING_DISABLED = "Slurm accounting storage is disabled\n"

# runners.jsonl of that chain (chain-effb11), as the submitter wrote it.
RUNNERS_JSONL = """\
{"app_exit_code": 99, "end": 1795938881.5052211, "exit_code": 99, "iter_after": 11, "iter_before": 0, "job_id": "36", "reason": "app checkpointed (99) (0->11)", "recorded": true, "seq": 1, "start": 1795938875.6853447, "state": "FAILED", "stop_to_exit": null, "submitted": 1795938872.620649, "verdict": "continue"}
{"app_exit_code": 99, "end": 1795938888.7277374, "exit_code": 99, "iter_after": 22, "iter_before": 11, "job_id": "37", "reason": "app checkpointed (99) (11->22)", "recorded": true, "seq": 2, "start": 1795938882.8722122, "state": "FAILED", "stop_to_exit": null, "submitted": 1795938882.1257625, "verdict": "continue"}
{"app_exit_code": 0, "end": 1795938896.3823469, "exit_code": 0, "iter_after": 30, "iter_before": 22, "job_id": "38", "reason": "app finished at 30", "recorded": true, "seq": 3, "start": 1795938892.0808673, "state": "COMPLETED", "stop_to_exit": null, "submitted": 1795938889.1779118, "verdict": "complete"}
"""

# runners/<id>.json (argv dropped).
RECORDS = [
    {
        "app_exit_code": 99,
        "detail": "app exited 99",
        "end": 1795938881.5052211,
        "end_planned": 1795938885.6853447,
        "exit_code": 99,
        "external_signal": None,
        "host": "vm",
        "iter_after": 11,
        "iter_before": 0,
        "job_id": "36",
        "job_name": "chain-effb11.r1",
        "kill_at": 1795938884.9353447,
        "killed": False,
        "seq": 1,
        "slurm_end": 1795938935.0,
        "start": 1795938875.6853447,
        "status": "ended",
        "stop_at": 1795938882.6853447,
        "stop_sent": None,
        "stop_to_exit": None,
    },
    {
        "app_exit_code": 99,
        "detail": "app exited 99",
        "end": 1795938888.7277374,
        "end_planned": 1795938892.8722122,
        "exit_code": 99,
        "external_signal": None,
        "host": "vm",
        "iter_after": 22,
        "iter_before": 11,
        "job_id": "37",
        "job_name": "chain-effb11.r2",
        "kill_at": 1795938892.1222122,
        "killed": False,
        "seq": 2,
        "slurm_end": 1795938942.0,
        "start": 1795938882.8722122,
        "status": "ended",
        "stop_at": 1795938889.8722122,
        "stop_sent": None,
        "stop_to_exit": None,
    },
    {
        "app_exit_code": 0,
        "detail": "app exited 0",
        "end": 1795938896.3823469,
        "end_planned": 1795938902.0808673,
        "exit_code": 0,
        "external_signal": None,
        "host": "vm",
        "iter_after": 30,
        "iter_before": 22,
        "job_id": "38",
        "job_name": "chain-effb11.r3",
        "kill_at": 1795938901.3308673,
        "killed": False,
        "seq": 3,
        "slurm_end": 1795938951.0,
        "start": 1795938892.0808673,
        "status": "ended",
        "stop_at": 1795938899.0808673,
        "stop_sent": None,
        "stop_to_exit": None,
    },
]

# iterations.log of that chain (ITER_SECONDS=0.5, checkpoint every 5).
ITER_LOG = """\
1795938875.908 start 0 36 2698
1795938876.409 iter 1 36 2698
1795938876.911 iter 2 36 2698
1795938877.412 iter 3 36 2698
1795938877.914 iter 4 36 2698
1795938878.415 iter 5 36 2698
1795938878.421 ckpt 5 36 2698
1795938878.922 iter 6 36 2698
1795938879.424 iter 7 36 2698
1795938879.925 iter 8 36 2698
1795938880.427 iter 9 36 2698
1795938880.929 iter 10 36 2698
1795938880.937 ckpt 10 36 2698
1795938881.438 iter 11 36 2698
1795938881.453 ckpt 11 36 2698
1795938881.453 exit 11 36 2698 99
1795938883.155 start 11 37 3072
1795938883.656 iter 12 37 3072
1795938884.158 iter 13 37 3072
1795938884.660 iter 14 37 3072
1795938885.162 iter 15 37 3072
1795938885.169 ckpt 15 37 3072
1795938885.670 iter 16 37 3072
1795938886.172 iter 17 37 3072
1795938886.674 iter 18 37 3072
1795938887.175 iter 19 37 3072
1795938887.677 iter 20 37 3072
1795938887.682 ckpt 20 37 3072
1795938888.183 iter 21 37 3072
1795938888.684 iter 22 37 3072
1795938888.685 ckpt 22 37 3072
1795938888.685 exit 22 37 3072 99
1795938892.295 start 22 38 3530
1795938892.796 iter 23 38 3530
1795938893.297 iter 24 38 3530
1795938893.799 iter 25 38 3530
1795938893.802 ckpt 25 38 3530
1795938894.303 iter 26 38 3530
1795938894.804 iter 27 38 3530
1795938895.305 iter 28 38 3530
1795938895.806 iter 29 38 3530
1795938896.306 iter 30 38 3530
1795938896.307 ckpt 30 38 3530
1795938896.307 exit 30 38 3530 0
"""

# A log with a fault: job 50's app is SIGKILLed after iteration 13 (last
# checkpoint 10, no exit line); job 51 restarts from 10 and redoes 11-13.
ITER_LOG_RESTART = """\
1000.000 start 0 50 100
1001.000 iter 1 50 100
1002.000 iter 2 50 100
1003.000 iter 3 50 100
1004.000 iter 4 50 100
1005.000 iter 5 50 100
1005.010 ckpt 5 50 100
1006.000 iter 6 50 100
1007.000 iter 7 50 100
1008.000 iter 8 50 100
1009.000 iter 9 50 100
1010.000 iter 10 50 100
1010.010 ckpt 10 50 100
1011.000 iter 11 50 100
1012.000 iter 12 50 100
1013.000 iter 13 50 100
1020.000 start 10 51 200
1021.500 iter 11 51 200
1023.000 iter 12 51 200
1024.500 iter 13 51 200
1026.000 iter 14 51 200
1027.500 iter 15 51 200
1027.510 ckpt 15 51 200
1027.510 exit 15 51 200 0
"""


def write_chain(root: Path, *, backend: str = "slurm", log: str | None = ITER_LOG) -> Path:
    """A finished chain directory (``<root>/.chain``) holding the literal records above."""
    chain = root / ".chain"
    (chain / "runners").mkdir(parents=True)
    state = {
        "chain_id": "chain-effb11",
        "state": "completed",
        "backend": backend,
        "workdir": str(root),
        "iteration": 30,
        "runner_seq": 3,
        "runner_job_id": "38",
        "created": 1795938872.0,
    }
    (chain / "state.json").write_text(json.dumps(state))
    (chain / "settings.json").write_text(json.dumps({"max_iter": 30, "checkpoint_every": 5}))
    (chain / "runners.jsonl").write_text(RUNNERS_JSONL)
    (chain / "worker_ids.txt").write_text("36\n37\n38\n")
    for record in RECORDS:
        (chain / "runners" / f"{record['job_id']}.json").write_text(json.dumps(record))
    if log is not None:
        (root / "iterations.log").write_text(log)
    return chain


def records() -> list[dict[str, Any]]:
    return [dict(r) for r in RECORDS]


# sacct -n -P -j 1,3,4,5,7,8,9,11,2,6,10 -o SACCT_USAGE_FIELDS (with AllocCPUS), on the dev
# cluster (Slurm 22.05.8): an 80-iteration chain whose runners (1 3 4 5 7 8 9 11) asked for
# --cpus-per-task 2 and whose submitter restarted twice (jobs 2, 6, 10: 1 CPU each).
SACCT_DRIVER = """\
1|COMPLETED|0:0|2026-12-01T12:59:46|2026-12-01T12:59:46|2026-12-01T12:59:52|6|00:00.348|vm||2
1.batch|COMPLETED|0:0|2026-12-01T12:59:46|2026-12-01T12:59:46|2026-12-01T12:59:52|6|00:00.348|vm||2
2|COMPLETED|0:0|2026-12-01T12:59:46|2026-12-01T12:59:46|2026-12-01T13:00:11|25|00:00.439|vm||1
2.batch|COMPLETED|0:0|2026-12-01T12:59:46|2026-12-01T12:59:46|2026-12-01T13:00:11|25|00:00.439|vm|20128K|1
3|COMPLETED|0:0|2026-12-01T12:59:52|2026-12-01T12:59:53|2026-12-01T12:59:59|6|00:00.427|vm||2
3.batch|COMPLETED|0:0|2026-12-01T12:59:53|2026-12-01T12:59:53|2026-12-01T12:59:59|6|00:00.427|vm||2
4|COMPLETED|0:0|2026-12-01T12:59:59|2026-12-01T13:00:02|2026-12-01T13:00:08|6|00:00.474|vm||2
4.batch|COMPLETED|0:0|2026-12-01T13:00:02|2026-12-01T13:00:02|2026-12-01T13:00:08|6|00:00.474|vm||2
5|COMPLETED|0:0|2026-12-01T13:00:08|2026-12-01T13:00:09|2026-12-01T13:00:15|6|00:00.438|vm||2
5.batch|COMPLETED|0:0|2026-12-01T13:00:09|2026-12-01T13:00:09|2026-12-01T13:00:15|6|00:00.438|vm||2
6|COMPLETED|0:0|2026-12-01T13:00:11|2026-12-01T13:00:12|2026-12-01T13:00:37|25|00:00.451|vm||1
6.batch|COMPLETED|0:0|2026-12-01T13:00:12|2026-12-01T13:00:12|2026-12-01T13:00:37|25|00:00.451|vm|19952K|1
7|COMPLETED|0:0|2026-12-01T13:00:15|2026-12-01T13:00:16|2026-12-01T13:00:22|6|00:00.465|vm||2
7.batch|COMPLETED|0:0|2026-12-01T13:00:16|2026-12-01T13:00:16|2026-12-01T13:00:22|6|00:00.465|vm||2
8|COMPLETED|0:0|2026-12-01T13:00:23|2026-12-01T13:00:23|2026-12-01T13:00:29|6|00:00.428|vm||2
8.batch|COMPLETED|0:0|2026-12-01T13:00:23|2026-12-01T13:00:23|2026-12-01T13:00:29|6|00:00.428|vm||2
9|COMPLETED|0:0|2026-12-01T13:00:29|2026-12-01T13:00:32|2026-12-01T13:00:38|6|00:00.337|vm||2
9.batch|COMPLETED|0:0|2026-12-01T13:00:32|2026-12-01T13:00:32|2026-12-01T13:00:38|6|00:00.337|vm||2
10|COMPLETED|0:0|2026-12-01T13:00:37|2026-12-01T13:00:40|2026-12-01T13:00:47|7|00:02.471|vm||1
10.batch|COMPLETED|0:0|2026-12-01T13:00:40|2026-12-01T13:00:40|2026-12-01T13:00:47|7|00:02.471|vm||1
11|COMPLETED|0:0|2026-12-01T13:00:40|2026-12-01T13:00:43|2026-12-01T13:00:45|2|00:00.500|vm||2
11.batch|COMPLETED|0:0|2026-12-01T13:00:43|2026-12-01T13:00:43|2026-12-01T13:00:45|2|00:00.500|vm||2
"""
DRIVER_RUNNERS = ["1", "3", "4", "5", "7", "8", "9", "11"]
DRIVER_SUBMITTERS = ["2", "6", "10"]

# A local backend job record (local-jobs/jobs/2.json; env dropped): the submitter of a local chain.
LOCAL_SUBMITTER = {
    "batch_pid": 7064,
    "batch_script": "/tmp/capl/.chain/local-jobs/jobs/2.sh",
    "batch_ticks": 33122,
    "boot_id": "0e83b2fc-4ec8-4b0b-8163-7fc80ee01849",
    "cancel_requested": False,
    "cancelled_by": None,
    "dependency": None,
    "end": 1796130068.2384808,
    "exit_code": 0,
    "hostname": "vm",
    "job_id": "2",
    "kill_wait": 30.0,
    "name": "chain-586737.s0",
    "open_mode": "append",
    "reason": "None",
    "script": "/tmp/capl/.chain/scripts/submitter.sbatch",
    "signal": 0,
    "start": 1796130055.4503417,
    "state": "COMPLETED",
    "stderr": "/tmp/capl/.chain/logs/submitter-2.out",
    "stdout": "/tmp/capl/.chain/logs/submitter-2.out",
    "submit_dir": "/tmp/capl",
    "submit_time": 1796130055.094479,
    "supervisor_pid": 7063,
    "supervisor_ticks": 33119,
    "time_limit": 240.0,
    "time_limit_text": "00:04:00",
    "time_scale": 1.0,
    "user": "root",
    "work_dir": "/tmp/capl",
    "env": {},
}

# Production-sized values for the 80-column test: 8-digit job ids, a long
# node name, day-long runners, 6-digit counters, "CANCELLED by <uid>".
SACCT_LONG = """\
41234567|TIMEOUT|0:0|2026-11-20T08:00:00|2026-11-20T09:30:00|2026-11-21T09:29:00|86340|31-10:12:00|node0123||32
41234567.batch|CANCELLED|0:15|2026-11-20T09:30:00|2026-11-20T09:30:00|2026-11-21T09:29:00|86340|31-10:12:00|node0123|12345678K|32
41234568|CANCELLED by 12345|0:0|2026-11-21T09:29:30|2026-11-21T12:00:00|2026-11-22T02:00:00|50400|18-16:00:00|node0123||32
41234568.batch|CANCELLED|0:15|2026-11-21T12:00:00|2026-11-21T12:00:00|2026-11-22T02:00:00|50400|18-16:00:00|node0123|11345678K|32
41234569|COMPLETED|0:0|2026-11-22T02:01:00|2026-11-22T02:05:00|2026-11-22T20:05:00|64800|23-00:00:00|node0123||32
41234569.batch|COMPLETED|0:0|2026-11-22T02:05:00|2026-11-22T02:05:00|2026-11-22T20:05:00|64800|23-00:00:00|node0123|10345678K|32
41234560|RUNNING|0:0|2026-11-20T07:59:00|2026-11-20T07:59:30|Unknown|230430|00:10:00|node0007||1
"""
RUNNERS_LONG = """\
{"app_exit_code": 0, "end": 1795253330.0, "exit_code": 124, "iter_after": 100480, "iter_before": 100000, "job_id": "41234567", "reason": "stopped at the deadline (100000->100480)", "recorded": true, "seq": 101, "start": 1795167005.0, "state": "TIMEOUT", "stop_to_exit": 42.5, "submitted": 1795161600.0, "verdict": "continue"}
{"app_exit_code": 99, "end": 1795312790.0, "exit_code": 1, "iter_after": 100700, "iter_before": 100480, "job_id": "41234568", "reason": "cancelled", "recorded": true, "seq": 102, "start": 1795262405.0, "state": "CANCELLED", "stop_to_exit": 3.0, "submitted": 1795253370.0, "verdict": "continue"}
{"app_exit_code": 0, "end": 1795377890.0, "exit_code": 0, "iter_after": 101000, "iter_before": 100700, "job_id": "41234569", "reason": "app finished at 101000", "recorded": true, "seq": 103, "start": 1795313105.0, "state": "COMPLETED", "stop_to_exit": null, "submitted": 1795312860.0, "verdict": "complete"}
"""
LONG_HOST = "node0123.cluster.example.org"  # os.uname().nodename in the runner records


def write_long_chain(root: Path, *, backend: str = "slurm") -> Path:
    """A finished chain with the production-sized values above (no iteration log)."""
    chain = root / ".chain"
    (chain / "runners").mkdir(parents=True)
    state = {
        "chain_id": "chain-7f3a9c",
        "state": "completed",
        "reason": "reached MAX_ITER=101000",
        "backend": backend,
        "workdir": str(root),
        "iteration": 101000,
        "runner_seq": 103,
        "submitter_job_id": "41234560",
    }
    (chain / "state.json").write_text(json.dumps(state))
    (chain / "settings.json").write_text(json.dumps({"max_iter": 101000}))
    (chain / "runners.jsonl").write_text(RUNNERS_LONG)
    (chain / "worker_ids.txt").write_text("41234567\n41234568\n41234569\n")
    (chain / "submitter_ids.txt").write_text("41234560\n")
    for line in RUNNERS_LONG.splitlines():
        entry = json.loads(line)
        record = {k: entry[k] for k in ("job_id", "seq", "start", "end", "iter_before", "iter_after", "exit_code")}
        record.update(status="ended", host=LONG_HOST)
        (chain / "runners" / f"{entry['job_id']}.json").write_text(json.dumps(record))
    return chain
