"""The virtual-time switch shell ticks the model when ``Switch.next_timer`` says, as the
agent does: an idle switch ticks only for its FDB sweep, a PFC refresh leaves exactly half a
pause after XOFF (not on a fixed grid), one tick is pending at a time and a superseded one
does nothing. leaf1 of tests/unit/test_lossless.py: h2 (Ethernet12) sends to h1 (Ethernet8).
"""
from __future__ import annotations

import pytest

from rocelab.fabric.model.frames import mac_bytes, pfc_frame
from rocelab.fabric.model.pause import MAX_QUANTA, pause_seconds
from rocelab.labs.sim.engine import PS, Engine, to_ps
from rocelab.labs.sim.link import Wire
from rocelab.labs.sim.switch import SimSwitch
from tests.unit.test_forwarding import H1
from tests.unit.test_lossless import (
    H1_PORT, H2_PORT, RATE, learned, leaf1, pfc_quanta, udp_frame,
)


class Recorder(Wire):
    """A wire that keeps what the switch sends on it, with the engine's time (a Wire: the
    compiled shell calls its wires' ``send`` as a Wire's)."""

    def __init__(self, engine: Engine, port: str) -> None:
        super().__init__(engine, RATE, 0, lambda frame: None)
        self.port = port
        self.sent: list[tuple[float, str, bytes]] = []

    def send(self, frame: bytes) -> None:
        self.sent.append((self.engine.now, self.port, frame))


@pytest.fixture
def sim(monkeypatch) -> tuple[Engine, SimSwitch, list[float]]:
    """A started SimSwitch whose model records the time of every ``tick`` (patched on the
    class: a switch has slots, not an instance dict)."""
    engine = Engine()
    model = learned(leaf1())
    ticks: list[float] = []
    tick = type(model).tick

    def recorded(self, now: float) -> list[tuple[str, bytes]]:
        ticks.append(now)
        return tick(self, now)

    monkeypatch.setattr(type(model), "tick", recorded)
    switch = SimSwitch(engine, "leaf1", model, {H1_PORT: "eth3", H2_PORT: "eth4"})
    switch.wires = {port: Recorder(engine, port) for port in (H1_PORT, H2_PORT)}
    switch.start()
    return engine, switch, ticks


def test_an_idle_switch_ticks_only_when_a_timer_is_due(sim):
    engine, switch, ticks = sim
    engine.run(to_ps(3.5))
    # the watchdogs' first poll at once, then the FDB sweep every second (the watchdogs
    # poll every 200 ms x S = 200 s); a fixed 20 us x S grid would have ticked 175 times
    assert ticks == [0.0, 1.0, 2.0, 3.0]
    assert engine.pending == 1  # the next tick, and only it


def test_the_pfc_refresh_leaves_half_a_pause_after_xoff(sim):
    engine, switch, ticks = sim
    xoff_at = 0.25
    engine.run(to_ps(xoff_at))
    # h1 pauses priority 3 toward itself: what h2 sends stays queued, its PG reaches XOFF
    switch.arrive(H1_PORT, pfc_frame(mac_bytes(H1), {3: MAX_QUANTA}))
    wire = switch.wires[H2_PORT]
    while not pfc_quanta([(p, f) for _, p, f in wire.sent], H2_PORT):
        switch.arrive(H2_PORT, udp_frame(26))
    half = pause_seconds(MAX_QUANTA, RATE) / 2
    assert half < 1.0 - xoff_at  # the refresh comes before the sweep armed earlier
    engine.run(to_ps(xoff_at + half + 1e-6))
    pfc = [(at, pfc_quanta([(p, f)], H2_PORT)) for at, p, f in wire.sent
           if pfc_quanta([(p, f)], H2_PORT)]
    assert pfc == [(xoff_at, [{3: MAX_QUANTA}]), (to_ps(xoff_at + half) / PS, [{3: MAX_QUANTA}])]
    # ticks: the first polls, then the refresh; the sweep's tick armed at 1.0 was superseded
    # by the earlier refresh and re-armed after it, so the engine holds one tick event
    assert ticks == [0.0, to_ps(xoff_at + half) / PS]
    engine.run(to_ps(1.0))
    assert ticks[-1] == 1.0 and ticks.count(1.0) == 1
