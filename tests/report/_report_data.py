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
{"end": 1795938881.5052211, "exit_code": 99, "iter_after": 11, "iter_before": 0, "job_id": "36", "reason": "app checkpointed (99) (0->11)", "recorded": true, "seq": 1, "start": 1795938875.6853447, "state": "FAILED", "stop_to_exit": null, "submitted": 1795938872.620649, "verdict": "continue"}
{"end": 1795938888.7277374, "exit_code": 99, "iter_after": 22, "iter_before": 11, "job_id": "37", "reason": "app checkpointed (99) (11->22)", "recorded": true, "seq": 2, "start": 1795938882.8722122, "state": "FAILED", "stop_to_exit": null, "submitted": 1795938882.1257625, "verdict": "continue"}
{"end": 1795938896.3823469, "exit_code": 0, "iter_after": 30, "iter_before": 22, "job_id": "38", "reason": "app finished at 30", "recorded": true, "seq": 3, "start": 1795938892.0808673, "state": "COMPLETED", "stop_to_exit": null, "submitted": 1795938889.1779118, "verdict": "complete"}
"""

# runners/<id>.json (argv dropped).
RECORDS = [
    {"app_exit_code": 99, "detail": "app exited 99", "end": 1795938881.5052211, "end_planned": 1795938885.6853447, "exit_code": 99, "external_signal": None, "host": "vm", "iter_after": 11, "iter_before": 0, "job_id": "36", "job_name": "chain-effb11.r1", "kill_at": 1795938884.9353447, "killed": False, "seq": 1, "slurm_end": 1795938935.0, "start": 1795938875.6853447, "status": "ended", "stop_at": 1795938882.6853447, "stop_sent": None, "stop_to_exit": None},
    {"app_exit_code": 99, "detail": "app exited 99", "end": 1795938888.7277374, "end_planned": 1795938892.8722122, "exit_code": 99, "external_signal": None, "host": "vm", "iter_after": 22, "iter_before": 11, "job_id": "37", "job_name": "chain-effb11.r2", "kill_at": 1795938892.1222122, "killed": False, "seq": 2, "slurm_end": 1795938942.0, "start": 1795938882.8722122, "status": "ended", "stop_at": 1795938889.8722122, "stop_sent": None, "stop_to_exit": None},
    {"app_exit_code": 0, "detail": "app exited 0", "end": 1795938896.3823469, "end_planned": 1795938902.0808673, "exit_code": 0, "external_signal": None, "host": "vm", "iter_after": 30, "iter_before": 22, "job_id": "38", "job_name": "chain-effb11.r3", "kill_at": 1795938901.3308673, "killed": False, "seq": 3, "slurm_end": 1795938951.0, "start": 1795938892.0808673, "status": "ended", "stop_at": 1795938899.0808673, "stop_sent": None, "stop_to_exit": None},
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
    state = {"chain_id": "chain-effb11", "state": "completed", "backend": backend, "workdir": str(root),
             "iteration": 30, "runner_seq": 3, "runner_job_id": "38", "created": 1795938872.0}
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
