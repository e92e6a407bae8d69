"""bench.sim's extrapolation: the largest all-to-all fabric a wall budget holds."""
from __future__ import annotations

from bench.sim import WALL_BUDGET_S, largest_alltoall


def test_largest_alltoall_grows_with_the_rate_and_fits_the_budget():
    run = {"hosts": 256, "frame_hops": 4_000_000, "frame_hops_per_s": 20_000, "build_s": 10}
    n = largest_alltoall(run)
    per_pair = 4_000_000 / (256 * 255)
    budget = 20_000 * (WALL_BUDGET_S - 10)
    assert n * (n - 1) * per_pair <= budget < (n + 1) * n * per_pair
    faster = largest_alltoall({**run, "frame_hops_per_s": 80_000})
    assert 1.9 * n < faster < 2.1 * n  # four times the rate, twice the hosts


def test_the_256_host_alltoall_target_is_time_memory_and_completion():
    from bench.sim import alltoall_256_holds
    run = {"wall_s": 170.0, "peak_rss_mib": 1500.0, "complete": True}
    assert alltoall_256_holds(run) is True
    assert alltoall_256_holds({**run, "wall_s": 181.0}) is False
    assert alltoall_256_holds({**run, "peak_rss_mib": 2049.0}) is False
    assert alltoall_256_holds({**run, "complete": False}) is False
    assert alltoall_256_holds({"error": ["Traceback"]}) is None
