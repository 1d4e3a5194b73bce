"""A user's enforced per-user job limits, read from Slurm's accounting.

The limits (association ``MaxJobs``/``MaxSubmitJobs``, QOS
``MaxJobsPerUser``/``MaxSubmitJobsPerUser``) come from ``sacctmgr``, which
asks slurmdbd, not slurmctld; ``sacctmgr`` prints a user's association with
the limits it inherits from its account (measured on 22.05). Only when one
is found is slurmctld asked, once, whether limits are enforced
(``AccountingStorageEnforce`` holds ``limits`` or ``safe``): most sites set
none, and then the controller is not asked at all. The parsers are pure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chain.core.limits import JobLimits, Limit
from chain.errors import SchedulerError

ASSOC_FORMAT = "user,defaultaccount,account,partition,maxjobs,maxsubmit,qos,defaultqos"
QOS_FORMAT = "name,maxjobspu,maxsubmitpu"


@dataclass(frozen=True)
class Association:
    """One row of ``sacctmgr show user U withassoc``."""

    default_account: str
    account: str
    partition: str
    max_jobs: int | None
    max_submit: int | None
    qos: tuple[str, ...]
    default_qos: str


def _number(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def parse_associations(text: str) -> list[Association]:
    """``sacctmgr -n -P show user U withassoc format=ASSOC_FORMAT``."""
    rows = []
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) < 8:
            continue
        rows.append(
            Association(
                default_account=fields[1],
                account=fields[2],
                partition=fields[3],
                max_jobs=_number(fields[4]),
                max_submit=_number(fields[5]),
                qos=tuple(q for q in fields[6].split(",") if q),
                default_qos=fields[7],
            )
        )
    return rows


def parse_qos_limits(text: str) -> dict[str, tuple[int | None, int | None]]:
    """``sacctmgr -n -P show qos format=QOS_FORMAT``: name -> (MaxJobsPU, MaxSubmitPU)."""
    found = {}
    for line in text.splitlines():
        fields = line.split("|")
        if len(fields) >= 3 and fields[0]:
            found[fields[0]] = (_number(fields[1]), _number(fields[2]))
    return found


def limits_enforced(config: str) -> bool:
    """``scontrol show config``: AccountingStorageEnforce holds limits (or safe, which implies them)."""
    for line in config.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageEnforce":
            return bool({"limits", "safe"} & {v.strip() for v in value.lower().split(",")})
    return False


def association_for(rows: Sequence[Association], account: str, partition: str) -> Association | None:
    """The association a job of ``account`` (default: the user's default
    account) in ``partition`` runs under: the partition's own row, else the
    account's row without a partition."""
    account = account or (rows[0].default_account if rows else "")
    mine = [r for r in rows if r.account == account]
    return next((r for r in mine if partition and r.partition == partition), None) or next(
        (r for r in mine if not r.partition), None
    )


def job_qos(row: Association, qos: str) -> str:
    """The QOS a job gets: the one asked, the association's default, its only QOS, or ``normal``."""
    return qos or row.default_qos or (row.qos[0] if len(row.qos) == 1 else "normal")


def _tightest(*limits: Limit | None) -> Limit | None:
    found = [limit for limit in limits if limit is not None]
    return min(found, key=lambda limit: limit.value) if found else None


def combine(row: Association, qos_name: str, qos: dict[str, tuple[int | None, int | None]]) -> JobLimits:
    """The tightest of the association's and the QOS's per-user limits."""
    jobs_pu, submit_pu = qos.get(qos_name, (None, None))

    def limit(value: int | None, source: str) -> Limit | None:
        return Limit(value, source) if value is not None else None

    return JobLimits(
        queued=_tightest(
            limit(row.max_submit, "association MaxSubmitJobs"), limit(submit_pu, f"QOS {qos_name} MaxSubmitJobsPerUser")
        ),
        running=_tightest(limit(row.max_jobs, "association MaxJobs"), limit(jobs_pu, f"QOS {qos_name} MaxJobsPerUser")),
    )


def site_limits(
    call: Callable[[Sequence[str]], str], user: str, *, account: str = "", qos: str = "", partition: str = ""
) -> JobLimits | None:
    """The enforced limits on ``user``'s jobs, or None when there are none
    or accounting does not answer (a check that cannot ask never refuses).
    ``call`` runs one Slurm client and returns its output."""
    try:
        rows = parse_associations(
            call(["sacctmgr", "-n", "-P", "show", "user", user, "withassoc", f"format={ASSOC_FORMAT}"])
        )
        row = association_for(rows, account, partition)
        if row is None:
            return None
        name = job_qos(row, qos)
        found = combine(
            row, name, parse_qos_limits(call(["sacctmgr", "-n", "-P", "show", "qos", f"format={QOS_FORMAT}"]))
        )
        if found == JobLimits() or not limits_enforced(call(["scontrol", "show", "config"])):
            return None
        return found
    except SchedulerError:
        return None
