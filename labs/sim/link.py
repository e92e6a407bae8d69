"""One direction of a link in virtual time: frames serialise at the port's rate and arrive,
last bit first (store and forward), a propagation delay later (``fabric.model.cable``, the
timing the live shells follow too).

The senders (switch scheduler, NIC) already pace their frames at this rate; the wire still
keeps its own time (``Cable.free``) so that a frame sent while another is on the wire (a PFC frame
the switch returns "to send now") waits for it, as on a real port, instead of overtaking.
Taps see every frame as the sender puts it on the wire and as the receiver gets it.

Timing jitter (``jitter_ps``, off by default): every port here runs on a perfect clock, so a
pause restarts its sender on the bottleneck's departure grid and the two stay phase-locked;
the live shells take each frame some tens of microseconds late (their measured scheduler
and arrival lateness), which breaks that lock. Given a mean, each frame arrives a draw of
an exponential delay with that mean later than its cable says (the live lateness histograms
are close to exponential: p99 four to six times the mean, an exponential's 4.6), never
before the frame ahead of it, so ``invoke sim.compare`` can simulate what the live lab's clocks did
(docs/runtimes.md, "Timing jitter").
"""
from __future__ import annotations

import random
from collections.abc import Callable

import cython

from ...fabric.model.cable import Cable, propagation_s
from .engine import PS, Engine, Handler

# the cable keeps ps as doubles, exact integers below this (a C double when compiled)
EXACT_PS = cython.declare(cython.double, 2.0**53)

End = tuple[str, str]  # (node, interface)
# (the end that sees it, direction "out"|"in", time_ps, frame): one tap serves many wires
Tap = Callable[[End, str, int, bytes], None]


class Deliver(Handler):
    """A plain callable as a wire's far end (tests): ``deliver(frame)``."""

    def __init__(self, deliver: Callable[[bytes], None]) -> None:
        self.deliver = deliver

    def fire(self, frame: bytes) -> None:
        self.deliver(frame)


class Wire(Handler):
    """Frames from one port to its peer, each handed to ``deliver``, the far end's inlet:
    a ``Handler`` whose ``fire(frame)`` the compiled wire calls in C (the shells' port
    inlets), or a plain callable. A frame's arrival is an event of the wire's (``fire``)."""

    def __init__(self, engine: Engine, rate_bps: float, delay_ps: int,
                 deliver: Handler | Callable[[bytes], None], jitter_ps: float = 0.0,
                 rng: random.Random | None = None, ends: tuple[End, End] = (("", ""), ("", ""))
                 ) -> None:
        self.engine = engine
        self.src, self.dst = ends  # the interface it leaves and the one it reaches
        self.rate_bps = rate_bps
        self.cable = Cable(PS * 8 / rate_bps, delay_ps, whole=True)
        self.deliver = deliver if isinstance(deliver, Handler) else Deliver(deliver)
        self.up = True
        self.tx_taps: list[Tap] = []  # as the sender transmits
        self.rx_taps: list[Tap] = []  # as the receiver gets it
        self.frames = 0
        if jitter_ps and rng is None:
            raise ValueError("a jittered wire needs its own seeded rng")
        self.jitter_rate = 1 / jitter_ps if jitter_ps else 0.0  # expovariate's lambda
        self.rng = rng
        self.last_arrival = 0  # a frame never overtakes the one ahead of it

    @cython.locals(arrival=cython.double)
    def send(self, frame: bytes) -> None:
        engine = self.engine
        # the frame's own bytes, as the senders' pacing counts them (no preamble or gap)
        arrival = self.cable.send(len(frame), engine.now_ps)
        if not self.up:
            return
        self.frames += 1
        for tap in self.tx_taps:
            tap(self.src, "out", int(self.cable.start), frame)
        if self.jitter_rate:
            arrival = max(self.last_arrival,
                          arrival + round(self.rng.expovariate(self.jitter_rate)))
            self.last_arrival = arrival
        if arrival >= EXACT_PS:
            raise OverflowError(f"{self.src}: a frame arriving {arrival} ps after the start is "
                                "past the exact range of the cable's clock")
        engine.later(cython.cast(cython.longlong, arrival), self, frame)

    def fire(self, frame: bytes) -> None:
        """``frame`` arrives at the far end."""
        if not self.up:
            return
        for tap in self.rx_taps:
            tap(self.dst, "in", self.engine.now_ps, frame)
        self.deliver.fire(frame)


def cable_delay_ps(metres: float, time_scale: float) -> int:
    """Propagation over ``metres`` of cable, stretched by S like every data-plane time."""
    return round(propagation_s(metres, time_scale) * PS)
