"""checks.compare: reading two runs' figures and judging their agreement."""
from __future__ import annotations

import json

import pytest

from rocelab.checks.compare import Row, figures, live_jitter_s


def write_run(folder, outcome: str, pfc: int, paused: float, elapsed: float, drops: dict,
              retransmitted: int) -> None:
    (folder / "congestion" / "lossless").mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(
        {"checks": [{"name": "test_lossless_incast", "outcome": outcome}]}))
    (folder / "congestion" / "lossless" / "summary.json").write_text(json.dumps(
        {"pfc_sent": pfc, "paused_s": paused, "elapsed_s": elapsed, "drops": drops,
         "retransmitted": retransmitted, "fidelity": {"ok": outcome != "inconclusive"}}))


def test_figures_and_agreement_within_the_tolerance(tmp_path):
    write_run(tmp_path / "live", "passed", 1000, 10.0, 7.0, {"lossy_limit": 5}, 0)
    write_run(tmp_path / "sim", "passed", 900, 11.9, 7.1, {}, 0)
    live, sim = figures(tmp_path / "live"), figures(tmp_path / "sim")
    row = Row("lossless", live["lossless"], [sim["lossless"]])
    assert live["lossless"]["lost"] == 0  # a lossy class's drops are not lossless losses
    assert row.verdicts_agree and row.agrees("pfc_sent") and row.agrees("elapsed_s")
    assert not row.agrees("paused_s")  # 10 vs 11.9: more than 15 % apart


def test_an_inconclusive_live_run_cannot_disagree_but_a_real_verdict_can():
    assert Row("x", {"verdict": "inconclusive"}, [{"verdict": "passed"}]).verdicts_agree
    assert not Row("x", {"verdict": "failed"}, [{"verdict": "passed"}]).verdicts_agree
    assert Row("x", {"lost": 0}, [{"lost": 0}]).agrees("lost")


def test_the_live_run_is_judged_against_the_spread_of_the_seeds():
    sims = [{"pfc_sent": 82, "verdict": "passed"}, {"pfc_sent": 0, "verdict": "passed"},
            {"pfc_sent": 6, "verdict": "passed"}]
    assert Row("dcqcn", {"pfc_sent": 40}, sims).agrees("pfc_sent")  # inside 0..82
    assert Row("dcqcn", {"pfc_sent": 0}, sims).agrees("pfc_sent")
    assert Row("dcqcn", {"pfc_sent": 94}, sims).agrees("pfc_sent")  # within 15 % of 82
    assert not Row("dcqcn", {"pfc_sent": 100}, sims).agrees("pfc_sent")
    assert Row("dcqcn", {"verdict": "passed"}, sims).verdicts_agree
    # a verdict that changes with the seed agrees with no live verdict
    split = [*sims, {"verdict": "failed"}]
    assert not Row("dcqcn", {"verdict": "passed"}, split).verdicts_agree
    assert not Row("dcqcn", {"verdict": "failed"}, split).verdicts_agree


def test_frames_lost_agree_by_being_there_or_not():
    sims = [{"lost": 16000}, {"lost": 24000}]
    assert Row("lossy", {"lost": 40000}, sims).agrees("lost")
    assert not Row("lossy", {"lost": 0}, sims).agrees("lost")
    assert not Row("lossless", {"lost": 3}, [{"lost": 0}]).agrees("lost")


def test_a_hosts_pause_counts_once_on_its_own_priority(tmp_path):
    """Switch ports pause per priority; a host's NIC pauses its RoCE priority only. The
    total counted each host once per priority (eight times) before."""
    from rocelab.checks.congestion import Run

    def port(paused: list[float]) -> dict:
        return {"ports": {"Ethernet0": {"paused_s": paused}}}
    run = Run(folder=tmp_path, traces={}, name="lossless",
              before={"sw": port([0.0] * 8)},
              after={"sw": port([0, 0, 0, 1.5, 0.5, 0, 0, 0])},
              result={"hosts": {"h1": {"paused_s": 2.0, "paused_priority": 3},
                                "h2": {"paused_s": 0.0, "paused_priority": 3}}})
    assert run.paused_s() == 4.0
    assert run.paused_s(3) == 3.5
    assert run.paused_s(4) == 0.5


def test_the_live_runs_jitter_is_its_mean_lateness_per_hop_in_fabric_time(tmp_path):
    """Scheduler lateness (switch ports) plus arrival lateness (switch ports and hosts),
    each a mean weighted by how many frames it covers, over every scenario, divided by S."""
    def lateness(count: int, mean_s: float) -> dict:
        return {"count": count, "mean_s": mean_s, "p99_s": 4.6 * mean_s, "max_s": 9 * mean_s}
    for scenario, (sched, arrival, host) in {"lossless": ((300, 40e-6), (100, 50e-6),
                                                          (100, 70e-6)),
                                             "dcqcn": ((100, 80e-6), (0, 0.0), (0, 0.0))}.items():
        folder = tmp_path / "congestion" / scenario
        folder.mkdir(parents=True)
        idle = {"lateness": lateness(0, 0.0), "arrival_lateness": lateness(0, 0.0)}
        (folder / "counters.json").write_text(json.dumps(
            {"before": {"leaf1": {"ports": {"Ethernet0": {"fidelity": {
                "lateness": lateness(10**6, 1.0)}}}}},  # before the run: not counted
             "after": {"leaf1": {"ports": {
                 "Ethernet0": {"fidelity": {"lateness": lateness(*sched),
                                            "arrival_lateness": lateness(*arrival)}},
                 "Ethernet4": {"fidelity": idle}}}}}))
        (folder / "flows.json").write_text(json.dumps(
            {"hosts": {"h1": {"arrival_lateness": lateness(*host), "paused_s": 0.0}}}))
    # scheduler: (300 x 40 + 100 x 80) / 400 = 50 us; arrival: (100 x 50 + 100 x 70) / 200 = 60
    assert live_jitter_s(tmp_path, 1000.0, ["lossless", "dcqcn"]) == pytest.approx(110e-6 / 1000)
    # a scenario left out (one that lost fidelity) does not count: 40 + 60 us
    assert live_jitter_s(tmp_path, 1000.0, ["lossless"]) == pytest.approx(100e-6 / 1000)
    assert live_jitter_s(tmp_path, 1000.0, []) == 0.0
