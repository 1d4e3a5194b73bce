"""Reading a user's enforced job limits from Slurm (chain.backends.slurm.limits):
the parsers on literal sacctmgr/scontrol output (Slurm 22.05, the dev cluster),
and which clients are asked when."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from chain.backends.slurm.limits import (
    Association,
    association_for,
    combine,
    job_qos,
    limits_enforced,
    parse_associations,
    parse_qos_limits,
    site_limits,
)
from chain.core.limits import JobLimits, Limit
from chain.errors import SchedulerError

# sacctmgr -n -P show user root withassoc format=user,defaultaccount,account,partition,maxjobs,maxsubmit,qos,defaultqos
# with MaxJobs=3 MaxSubmitJobs=5 set on the account root (the user's row shows them inherited)
ASSOC = "root|root|root||3|5|normal|\n"
ASSOC_MANY = "ana|lab|lab||4||normal,long|long\nana|lab|lab|gpu|1|2|normal|\nana|lab|other|||||normal\n"
QOS = "normal|7|9\nlong||3\n"
CONFIG = (
    "AccountingStorageBackupHost = (null)\n"
    "AccountingStorageEnforce = associations,limits\n"
    "AccountingStorageHost   = localhost\n"
)


def test_associations_parse() -> None:
    assert parse_associations(ASSOC) == [Association("root", "root", "", 3, 5, ("normal",), "")]
    rows = parse_associations(ASSOC_MANY)
    assert [(r.account, r.partition, r.max_jobs, r.max_submit) for r in rows] == [
        ("lab", "", 4, None),
        ("lab", "gpu", 1, 2),
        ("other", "", None, None),
    ]
    assert rows[0].qos == ("normal", "long") and rows[0].default_qos == "long"
    assert parse_associations("") == [] and parse_associations("garbage\n") == []


def test_the_association_of_a_job() -> None:
    rows = parse_associations(ASSOC_MANY)
    assert association_for(rows, "", "") is rows[0]  # the default account's own row
    assert association_for(rows, "", "gpu") is rows[1]  # a partition's row wins
    assert association_for(rows, "lab", "debug") is rows[0]  # no row of its own: the account's
    assert association_for(rows, "other", "") is rows[2]
    assert association_for(rows, "nosuch", "") is None and association_for([], "", "") is None


def test_the_qos_of_a_job() -> None:
    rows = parse_associations(ASSOC_MANY)
    assert job_qos(rows[0], "") == "long"  # the association's default
    assert job_qos(rows[1], "") == "normal"  # its only QOS
    assert job_qos(rows[0], "normal") == "normal"  # the one asked
    assert job_qos(Association("a", "a", "", None, None, ("x", "y"), ""), "") == "normal"


def test_qos_limits_and_enforcement_parse() -> None:
    assert parse_qos_limits(QOS) == {"normal": (7, 9), "long": (None, 3)}
    assert limits_enforced(CONFIG)
    assert limits_enforced("AccountingStorageEnforce = safe\n")
    assert not limits_enforced("AccountingStorageEnforce = associations\n")
    assert not limits_enforced("AccountingStorageEnforce = none\n")
    assert not limits_enforced("")


def test_the_tightest_limit_wins_and_says_where_it_comes_from() -> None:
    row = parse_associations(ASSOC)[0]
    assert combine(row, "normal", parse_qos_limits(QOS)) == JobLimits(
        queued=Limit(5, "association MaxSubmitJobs"), running=Limit(3, "association MaxJobs")
    )
    lab = parse_associations(ASSOC_MANY)[0]
    assert combine(lab, "long", parse_qos_limits(QOS)) == JobLimits(
        queued=Limit(3, "QOS long MaxSubmitJobsPerUser"), running=Limit(4, "association MaxJobs")
    )
    assert combine(lab, "none", {}) == JobLimits(queued=None, running=Limit(4, "association MaxJobs"))


class Clients:
    """Answers each Slurm client with literal output; records what was asked."""

    def __init__(self, answers: dict[str, str], failing: str = "") -> None:
        self.answers, self.failing, self.asked = answers, failing, list[str]()

    def __call__(self, argv: Sequence[str]) -> str:
        key = argv[0] if argv[0] == "scontrol" else f"{argv[0]} {argv[4]}"
        self.asked.append(key)
        if key == self.failing:
            raise SchedulerError(f"{argv[0]}: Problem talking to the database: Connection refused")
        return self.answers[key]


def test_site_limits_asks_slurmctld_only_when_a_limit_is_set() -> None:
    clients = Clients({"sacctmgr user": "ana|lab|lab||||normal|\n", "sacctmgr qos": "normal||\n"})
    assert site_limits(clients, "ana") is None
    assert clients.asked == ["sacctmgr user", "sacctmgr qos"]  # no scontrol: nothing to enforce


def test_site_limits_found_and_enforced() -> None:
    clients = Clients({"sacctmgr user": ASSOC, "sacctmgr qos": QOS, "scontrol": CONFIG})
    assert site_limits(clients, "root") == JobLimits(
        Limit(5, "association MaxSubmitJobs"), Limit(3, "association MaxJobs")
    )


def test_limits_not_enforced_are_no_limits() -> None:
    clients = Clients(
        {"sacctmgr user": ASSOC, "sacctmgr qos": QOS, "scontrol": "AccountingStorageEnforce = associations\n"}
    )
    assert site_limits(clients, "root") is None


@pytest.mark.parametrize("failing", ["sacctmgr user", "sacctmgr qos", "scontrol"])
def test_a_check_that_cannot_ask_never_refuses(failing: str) -> None:
    clients = Clients({"sacctmgr user": ASSOC, "sacctmgr qos": QOS, "scontrol": CONFIG}, failing=failing)
    assert site_limits(clients, "root") is None


def test_a_user_without_an_association_has_no_limits() -> None:
    assert site_limits(Clients({"sacctmgr user": ""}), "nobody") is None
