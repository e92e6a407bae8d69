"""The agent shell's timer arming and control commands, with no port (no root needed): it
ticks when the switch's next timer is due, and switches the watchdog's time profile."""
from __future__ import annotations

import pytest

from fabric.agent import IDLE_TICK_S, Agent
from fabric.model.pause import MAX_QUANTA, pause_seconds
from tests.unit.test_lossless import RATE, blast_until_pfc, learned, leaf1


@pytest.fixture
def agent(tmp_path):
    made = Agent(learned(leaf1()), {}, tmp_path / "leaf1.sock", "leaf1")
    yield made
    made.close()


def test_tick_is_armed_at_the_switch_timer(agent):
    agent.switch.tick(0.0)
    assert agent.next_tick(0.0) == agent.switch.next_timer() == 1.0  # the FDB sweep
    blast_until_pfc(agent.switch)
    assert agent.next_tick(0.0) == pause_seconds(MAX_QUANTA, RATE) / 2  # the PFC refresh


def test_idle_switch_sleeps_at_most_idle_tick(tmp_path, monkeypatch):
    agent = Agent(learned(leaf1()), {}, tmp_path / "x.sock", "leaf1")
    monkeypatch.setattr(agent.switch, "next_timer", lambda: None)
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
