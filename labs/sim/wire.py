"""One direction of a link in virtual time: frames serialise at the port's rate and arrive,
last bit first (store and forward), a propagation delay later (``fabric.model.cable``, the
timing the live shells follow too).

The senders (switch scheduler, NIC) already pace their frames at this rate; the wire still
keeps its own time (``Cable.free``) so that a frame sent while another is on the wire (a PFC frame
the switch returns "to send now") waits for it, as on a real port, instead of overtaking.
Taps see every frame as the sender puts it on the wire and as the receiver gets it.
"""
from __future__ import annotations

from collections.abc import Callable

from fabric.model.cable import Cable, propagation_s
from labs.sim.engine import PS, Engine

Tap = Callable[[str, int, bytes], None]  # (direction "out"|"in", time_ps, frame)


class Wire:
    """Frames from one port to its peer, delivered to ``deliver(frame)``."""

    def __init__(self, engine: Engine, rate_bps: float, delay_ps: int,
                 deliver: Callable[[bytes], None]) -> None:
        self.engine = engine
        self.rate_bps = rate_bps
        self.cable = Cable(PS * 8 / rate_bps, delay_ps, round)
        self.deliver = deliver
        self.up = True
        self.tx_taps: list[Tap] = []  # as the sender transmits
        self.rx_taps: list[Tap] = []  # as the receiver gets it
        self.frames = 0

    def send(self, frame: bytes) -> None:
        engine = self.engine
        # the frame's own bytes, as the senders' pacing counts them (no preamble or gap)
        start, arrival = self.cable.send(len(frame), engine.now_ps)
        if not self.up:
            return
        self.frames += 1
        for tap in self.tx_taps:
            tap("out", start, frame)
        engine.later(arrival, self._arrive, (frame,))

    def _arrive(self, frame: bytes) -> None:
        if not self.up:
            return
        for tap in self.rx_taps:
            tap("in", self.engine.now_ps, frame)
        self.deliver(frame)


def cable_delay_ps(metres: float, time_scale: float) -> int:
    """Propagation over ``metres`` of cable, stretched by S like every data-plane time."""
    return round(propagation_s(metres, time_scale) * PS)
