"""One direction of a link: frames serialise at the port's rate and arrive, last bit first
(store and forward), a propagation delay later.

The senders (switch scheduler, NIC) already pace their frames at this rate; the wire still
keeps its own ``free_ps`` so that a frame sent while another is on the wire (a PFC frame
the switch returns "to send now") waits for it, as on a real port, instead of overtaking.
Taps see every frame as the sender puts it on the wire and as the receiver gets it.
"""
from __future__ import annotations

from collections.abc import Callable

from labs.sim.engine import PS, Engine

SPEED_OF_LIGHT_IN_FIBRE_NS_PER_M = 5  # ~2/3 c: about 5 ns per metre
Tap = Callable[[str, int, bytes], None]  # (direction "out"|"in", time_ps, frame)


class Wire:
    """Frames from one port to its peer, delivered to ``deliver(frame)``."""

    def __init__(self, engine: Engine, rate_bps: float, delay_ps: int,
                 deliver: Callable[[bytes], None]) -> None:
        self.engine = engine
        self.rate_bps = rate_bps
        self.ps_per_byte = PS * 8 / rate_bps
        self.delay_ps = delay_ps
        self.deliver = deliver
        self.free_ps = 0
        self.up = True
        self.tx_taps: list[Tap] = []  # as the sender transmits
        self.rx_taps: list[Tap] = []  # as the receiver gets it
        self.frames = 0

    def send(self, frame: bytes) -> None:
        engine = self.engine
        start = max(engine.now_ps, self.free_ps)
        # the frame's own bytes, as the senders' pacing counts them (no preamble or gap)
        self.free_ps = start + round(len(frame) * self.ps_per_byte)
        if not self.up:
            return
        self.frames += 1
        for tap in self.tx_taps:
            tap("out", start, frame)
        engine.later(self.free_ps + self.delay_ps, self._arrive, (frame,))

    def _arrive(self, frame: bytes) -> None:
        if not self.up:
            return
        for tap in self.rx_taps:
            tap("in", self.engine.now_ps, frame)
        self.deliver(frame)


def cable_delay_ps(metres: float, time_scale: float) -> int:
    """Propagation over ``metres`` of cable, stretched by S like every data-plane time."""
    return round(metres * SPEED_OF_LIGHT_IN_FIBRE_NS_PER_M * 1000 * time_scale)
