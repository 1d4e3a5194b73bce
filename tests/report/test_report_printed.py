"""The report's printed lines (``chain.reporting.printed``): the allocation
line is a true sum, new work + redone + lost = allocated."""

from __future__ import annotations

from chain.reporting.printed import allocation_line


def test_the_allocation_is_new_work_plus_redone_plus_lost() -> None:
    totals = {"allocated_s": 40.0, "useful_s": 36.0, "lost_s": 4.0, "redone_s": 5.5, "efficiency": 0.7625}
    assert allocation_line(totals) == ("allocated 40.0s = new work 30.5s + redone 5.5s + lost 4.0s (efficiency 76.2%)")


def test_with_the_redone_work_unknown_no_efficiency_is_claimed() -> None:
    totals = {"allocated_s": 40.0, "useful_s": 36.0, "lost_s": 4.0, "redone_s": None, "efficiency": None}
    assert allocation_line(totals) == "allocated 40.0s = useful 36.0s + lost 4.0s (efficiency unknown)"
