"""The agent shell's timer arming and control commands, with no port (no root needed): it
ticks when the switch's next timer is due, and switches the watchdog's time profile."""
from __future__ import annotations

import pytest

from rocelab.fabric.agent import IDLE_TICK_S, Agent
from rocelab.fabric.model.cable import DelayLine
from rocelab.fabric.model.pause import MAX_QUANTA, pause_seconds
from tests.unit.test_lossless import RATE, blast_until_pfc, learned, leaf1


@pytest.fixture
def agent(tmp_path):
    made = Agent(learned(leaf1()), {}, tmp_path / "leaf1.sock", "leaf1")
    made.switch.wired(made.switch.counters()["ports"])  # as if cabled: no socket here
    yield made
    made.close()


def test_tick_is_armed_at_the_switch_timer(agent):
    agent.switch.tick(0.0)
    assert agent.next_tick(0.0) == agent.switch.next_timer() == 1.0  # the FDB sweep
    blast_until_pfc(agent.switch)
    assert agent.next_tick(0.0) == pause_seconds(MAX_QUANTA, RATE) / 2  # the PFC refresh


def test_idle_switch_sleeps_at_most_idle_tick(tmp_path, monkeypatch):
    agent = Agent(learned(leaf1()), {}, tmp_path / "x.sock", "leaf1")
    monkeypatch.setattr(type(agent.switch), "next_timer", lambda self: None)  # slots
    assert agent.next_tick(5.0) == 5.0 + IDLE_TICK_S
    agent.close()


def test_pfc_watchdog_profile_command(agent):
    """Through the control socket's request path: checked (``fabric.control``), then run."""
    respond = agent.control.respond
    assert respond(b'{"cmd": "pfc_watchdog", "profile": "storm-check"}') == {"ok": True}
    assert agent.switch.pfc_watchdog == "storm-check"
    assert respond(b'{"cmd": "counters"}')["counters"]["pfc_watchdog"] == "storm-check"
    reply = respond(b'{"cmd": "pfc_watchdog", "profile": "wall"}')
    assert reply["ok"] is False and "storm-check" in reply["error"]
    assert agent.switch.pfc_watchdog == "storm-check"
    assert agent.control.stats["rejected"] == 1


def test_frames_due_on_several_ports_reach_the_model_in_arrival_order(agent, monkeypatch):
    """A loop that woke late finds frames due on two ports: interleaved by when each
    arrived, not the first port's all before the second's."""
    got = []
    monkeypatch.setattr(agent, "receive", lambda name, frames: got.append((name, list(frames))))
    first, second = DelayLine(RATE, 0.0), DelayLine(RATE, 0.0)
    agent.lines = [("Ethernet0", first), ("Ethernet4", second)]
    frame_s = 1000 * 8 / RATE
    first.push(b"a1" * 500, 1.0)  # arrives at 1.0 + frame_s, then a2 a frame later
    first.push(b"a2" * 500, 1.0)
    second.push(b"b1" * 500, 1.0 + frame_s / 2)  # between them
    agent.arrive(1.0 + 3 * frame_s)
    assert [(name, frames[0][:2]) for name, frames in got] == [
        ("Ethernet0", b"a1"), ("Ethernet4", b"b1"), ("Ethernet0", b"a2")]
    got.clear()
    first.push(b"a3" * 500, 2.0)  # one port alone: one call with its whole release
    first.push(b"a4" * 500, 2.0)
    agent.arrive(3.0)
    assert [(name, [f[:2] for f in frames]) for name, frames in got] == [
        ("Ethernet0", [b"a3", b"a4"])]


def test_a_port_entry_with_no_wire_is_down(agent, tmp_path):
    """A PORT entry the agent has no wire for (a 32-port config wired on 4) is oper-down
    (``Switch.wired``): the first tick asks ARP of leaf1's spines only through wired ports,
    so no frame ever goes to a port with no socket. Here the same switch with no port at
    all asks nothing; wired (the fixture) it asks both spines."""
    wired = {name for name, _ in agent.switch.tick(0.0)}
    assert wired == {"Ethernet0", "Ethernet4"}
    bare = Agent(learned(leaf1()), {}, tmp_path / "bare.sock", "leaf1")
    try:
        ports = bare.switch.counters()["ports"]
        assert all(e["admin_up"] and not e["oper_up"] for e in ports.values())
        assert bare.switch.tick(0.0) == []
    finally:
        bare.close()
