"""bench.sim's extrapolation: the largest all-to-all fabric a wall budget holds."""
from __future__ import annotations

from bench.sim import WALL_BUDGET_S, largest_alltoall
from tests.unit.bench_render import rendered


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


def test_the_sim_table_has_the_side_by_side_cases_and_the_256_host_verdict():
    from bench.__main__ import sim_rows
    run = {"wall_s": 200.0, "cpu_s": 190.0, "peak_rss_mib": 1500.0, "complete": True,
           "simulated_s": 1.2e-3, "frame_hops_per_s": 30_000, "target_holds": False}
    side = {"wall_s": 30.0, "cpu_s": 30.0, "peak_rss_mib": 400.0, "flows": 16256,
            "flows_completed": 16256, "complete": True, "simulated_s": 1.8e-4,
            "frame_hops": 900_000, "frame_hops_per_s": 30_000, "wall_per_simulated_s": 1.7e5}
    out = {"engine": {"frame_hops_per_s": 24_000, "simulated_s": 2e-3, "wall_s": 1.0,
                      "slowdown": 500},
           "side_by_side": {"htsim": None, "cases": [
               {"hosts": 128, "shape": "2 tiers: 128 hosts at 400G, 16 leaves, 8 spines; x",
                "target_ratio": 2.0, "rocelab": side, "ratio_wall": None,
                "ratio_per_frame_hop": None, "target_holds": None}]},
           "alltoall_256": run}
    text = rendered(sim_rows, out)
    assert "2 tiers: 128 hosts at 400G, 16 leaves, 8 spines: rocelab" in text
    assert "<= 2x: not measured" in text and "bench/htsim/build.sh SRC" in text
    assert "<= 180 s, <= 2 GiB: DOES NOT HOLD" in text


def test_the_sim_table_says_how_the_compiled_build_compares_or_why_not():
    from bench.__main__ import sim_rows
    base = {"engine": {"frame_hops_per_s": 24_000, "simulated_s": 2e-3, "wall_s": 1.0,
                       "slowdown": 500}, "side_by_side": {"htsim": None, "cases": []}}
    text = rendered(sim_rows, {**base, "build": {"state": "compiled", "pairs": 5,
                                                 "ratio": 0.8}})
    assert "0.80x pure Python's time" in text and "median of 5 runs" in text
    why = "pure (no compiled build: scripts/install.sh builds it)"
    assert why in rendered(sim_rows, {**base, "build": {"state": why}})
