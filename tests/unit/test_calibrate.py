"""labs.calibrate: the S a lab that declares none runs at, chosen for the machine at lab.up."""
from __future__ import annotations

import pytest

from rocelab.labs import calibrate, generate, topology
from rocelab.labs.generate_spec import Spec
from rocelab.labs.live import LiveLab
from rocelab.labs.state import LabState


def machine(cores_free: float = 2.0, speed: float = 1.0) -> calibrate.Machine:
    return calibrate.Machine(calibrate.REFERENCE_CORE_FPS * speed, 2, cores_free)


@pytest.fixture(scope="module")
def default_lab() -> topology.Topology:
    return topology.load("roce-v2-leafspine")


def test_the_reference_machine_runs_the_default_lab_at_its_floor(default_lab):
    chosen = calibrate.choose(default_lab, machine())
    assert chosen.time_scale == chosen.floor == calibrate.REFERENCE_SCALE
    assert chosen.share == pytest.approx(calibrate.REFERENCE_SHARE, rel=0.05)
    assert not chosen.capped


@pytest.mark.parametrize("free, expected", [
    (1.0, 6000.0),  # one core taken: twice the S, the same share of what is left
    (0.5, 12000.0),
    (1.8, 3000.0),  # within NEAR of the floor: runs stay at the floor
])
def test_s_grows_as_the_machine_offers_less(default_lab, free, expected):
    chosen = calibrate.choose(default_lab, machine(free))
    assert chosen.time_scale == expected
    assert chosen.share <= calibrate.REFERENCE_SHARE * calibrate.NEAR


def test_the_per_core_speed_is_recorded_but_does_not_move_s(default_lab):
    """A short window reads a virtual machine's core up to 1.7x slow now and then: S would
    jump between runs of one lab on one idle machine."""
    slow = calibrate.choose(default_lab, machine(speed=0.5))
    assert slow.time_scale == calibrate.REFERENCE_SCALE
    assert slow.core_fps == calibrate.REFERENCE_CORE_FPS * 0.5
    assert "per-core speed 0.50x the reference" in slow.line("x")


def test_a_machine_that_cannot_hold_the_lab_is_capped_and_says_so(default_lab):
    for free in (0.05, 0.0):  # none free at all: every core busy while lab.up looked
        chosen = calibrate.choose(default_lab, machine(cores_free=free))
        assert chosen.capped
        assert chosen.time_scale == calibrate.REFERENCE_SCALE * calibrate.MAX_FACTOR
        assert "may come out INCONCLUSIVE, --runtime sim decides them" in chosen.line("x")


def test_a_larger_load_gets_a_larger_s(default_lab, tmp_path):
    """Three racks of two 100G hosts: more frames a second at the same S than the default
    lab's four 25G hosts, so a larger S for the same share, on the same machine."""
    done = generate.write(Spec("three-rack", hosts_per_leaf=2, leaves=3), tmp_path / "lab")
    larger = topology.load(done.path / "three-rack.clab.yml")
    assert calibrate.floor_of(larger) == calibrate.REFERENCE_SCALE  # generated: auto
    base = calibrate.choose(default_lab, machine()).time_scale
    chosen = calibrate.choose(larger, machine())
    assert chosen.time_scale > base
    assert chosen.share <= calibrate.REFERENCE_SHARE * 1.001  # up to the rounding of a step


def test_a_lab_that_declares_s_keeps_it_and_nothing_is_measured(monkeypatch):
    monkeypatch.setattr(calibrate, "measure", lambda *a, **k: pytest.fail("measured"))
    topo = topology.load("sizing-32")
    same, record = calibrate.calibrate(topo)
    assert same is topo and record is None


def test_calibrate_applies_the_choice_to_every_node_that_declares_none(default_lab):
    topo, chosen = calibrate.calibrate(default_lab, machine(cores_free=1.0))
    assert chosen is not None and chosen.time_scale == 6000.0
    assert {n.time_scale for n in topo.nodes.values()} == {6000.0}
    assert {n.time_scale for n in default_lab.nodes.values()} == {3000.0}  # untouched


def test_the_record_round_trips_into_the_line_reports_print(default_lab):
    chosen = calibrate.choose(default_lab, machine(cores_free=1.0))
    line = calibrate.calibrated("roce-v2-leafspine", chosen.as_record())
    assert line.startswith("lab roce-v2-leafspine: time scale S = 6000, raised from 3000")
    assert "1.0 of 2 cores free" in line
    floor = calibrate.calibrated("x", calibrate.choose(default_lab, machine()).as_record())
    assert "S = 3000, the lab's floor" in floor


def test_a_live_lab_runs_at_the_s_its_state_recorded(default_lab):
    state = LabState.new("roce-v2-leafspine", str(default_lab.path))
    assert LiveLab(state, default_lab).node_time_scale("h1") == 3000.0
    state.time_scale = 7500.0
    lab = LiveLab(state, default_lab)
    assert lab.node_time_scale("h1") == lab.node_time_scale("leaf1") == 7500.0


def test_measure_reports_this_machines_speed_and_free_cores():
    found = calibrate.measure(cores=2, seconds=0.05)
    assert found.core_fps > 0 and found.cores == 2
    assert 0 <= found.cores_free <= 2  # 0 when other work holds both cores
