"""labs.load: whether this machine can hold a lab live, from the lab's own files."""
from __future__ import annotations

import pytest

from rocelab.labs import load, topology
from tests.conftest import TOPOLOGIES


def lab(name: str) -> topology.Topology:
    return topology.load(str(TOPOLOGIES / name / f"{name}.clab.yml"))


def test_the_default_lab_fits_without_a_warning():
    estimate = load.estimate(lab("roce-v2-leafspine"), cores=2, rate=130_000)
    assert load.diameter(lab("roce-v2-leafspine")) == 3  # leaf, spine, leaf
    # 4 hosts x 33.3 Mb/s / (4096 + 74 B) x 3 switches
    assert estimate.demand_fps == pytest.approx(4 * 33.33e6 / (8 * 4170) * 3, rel=0.01)
    assert estimate.refusal("x") is None and estimate.warning("x") is None


def test_a_fabric_beyond_the_agents_budget_is_refused_naming_the_sim():
    estimate = load.estimate(lab("sizing-256"), cores=2, rate=130_000)
    refusal = estimate.refusal("sizing-256")
    assert refusal and "--runtime sim" in refusal and "rocelab.time-scale" in refusal


def test_many_agents_per_core_warn_even_when_the_rate_fits():
    estimate = load.estimate(lab("sizing-32"), cores=2, rate=1e9)  # any rate: 12 agents
    assert estimate.refusal("x") is None
    assert "12 switch agents on 2 cores" in estimate.warning("x")


def test_the_newest_bench_figure_is_the_agent_rate(tmp_path, monkeypatch):
    monkeypatch.setattr(load, "RESULTS", tmp_path)
    assert load.agent_pps() == load.MEASURED_AGENT_PPS
    (tmp_path / "bench-20261201-100000.json").write_text(
        '{"forwarding": {"agent_full_pipeline_pps": 90000}}')
    (tmp_path / "bench-20261201-120000.json").write_text('{"lifecycle": {}}')
    assert load.agent_pps() == 90_000  # the newest file with the figure
