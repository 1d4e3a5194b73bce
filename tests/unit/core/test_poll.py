"""The submitter's polling (``chain.core.poll``): rare far from a runner's
end, dense near it, within its budget."""

from chain.core.poll import PollPolicy


def test_poll_is_rare_far_from_the_end_and_dense_near_it() -> None:
    p = PollPolicy(slurm_min=10, slurm_max=300)
    assert p.next_slurm_query(0, None) == 300  # pending: longest interval
    assert p.next_slurm_query(0, 86400) == 300  # far from the end
    assert p.next_slurm_query(0, 100) == 50  # halve the distance
    assert p.next_slurm_query(0, 12) == 10  # never below the minimum
    assert p.next_slurm_query(100, 90) == 110  # past the end: minimum


def test_poll_budget_for_a_24_hour_runner() -> None:
    """At most 12 Slurm queries per runner-hour while the runner runs."""
    p = PollPolicy()
    end = 24 * 3600.0
    t, queries = 0.0, 0
    while t < end:
        t = p.next_slurm_query(t, end)
        queries += 1
    assert queries / 24 <= 12
