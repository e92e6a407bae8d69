"""One direction of a cable: when a frame's last bit reaches the far end.

A port serialises one frame at a time at its rate, and a frame arrives, last bit first
(store and forward), a propagation delay after it left: ``CABLE_LENGTH`` metres at about
5 ns per metre, stretched by S like every data-plane time. Both runtimes deliver frames
at these times, so headroom is tested against the same round trip in both:

- the simulator (``labs.sim.link``) schedules each arrival in virtual time;
- the live shells (the switch agent, the host endpoint) receive a frame from a veth the
  moment its sender wrote it, which is when its first bit left; a ``DelayLine`` holds it
  until its last bit would have crossed the cable. Without it, a live lab's frames arrive
  a serialisation and a cable earlier than on a real link: a PFC pause stops its sender
  after one frame instead of three, and the PGs go through XOFF/XON cycles about three
  times as often as on the wire the configuration describes.
"""
from __future__ import annotations

from collections import deque

import cython

from .scheduler import Lateness

NS_PER_METRE = 5  # ~2/3 c in fibre or copper: about 5 ns per metre


def propagation_s(metres: float, time_scale: float) -> float:
    """Propagation over ``metres`` of cable, in the lab's time (S times the real one)."""
    return metres * NS_PER_METRE * 1e-9 * time_scale


def whole(x: float) -> float:
    """``x`` rounded to a whole number as ``round`` rounds, halves to even (C's ``rint``)."""
    if not cython.compiled:
        return float(round(x))
    return rint(x)


class Cable:
    """Serialisation and propagation in whatever unit of time the caller keeps: seconds live,
    picoseconds in the simulator, where ``whole`` rounds each frame's time on the wire to a
    whole number, so every time is an integer (exact as a float below 2**53 ps: 2.5 hours).
    Compiled, it is C arithmetic on doubles."""

    __slots__ = ("per_byte", "delay", "whole", "free", "start")

    def __init__(self, per_byte: float, delay: float, whole: bool = False) -> None:
        self.per_byte = per_byte  # time one byte takes on the wire
        self.delay = delay  # propagation
        self.whole = whole
        self.free = 0.0  # when the sender finishes the frame on the wire
        self.start = 0.0  # when the last frame sent started

    def send(self, nbytes: int, now: float) -> float:
        """A frame of ``nbytes`` offered at ``now``: when its last bit arrives. It starts
        (``start``) after the frame on the wire, if any."""
        start = max(now, self.free)
        duration = nbytes * self.per_byte
        self.start = start
        self.free = start + (whole(duration) if self.whole else duration)
        return self.free + self.delay


class DelayLine:
    """Frames received from a veth, released when they would have arrived over the cable.
    Per port, in order: a frame never overtakes the one before it.

    ``lateness``: how much later than its arrival the shell took the first frame of each
    release, the frame that waited longest (once per release, as ingress lag is measured
    once per batch). A shell that reads a frame late but within its cable time delivers it
    on time; what is left over is a longer cable than configured, and is what the fidelity
    verdict judges (``fabric.client.fidelity``)."""

    __slots__ = ("cable", "frames", "lateness")

    def __init__(self, rate_bps: float, delay_s: float) -> None:
        self.cable = Cable(8 / rate_bps, delay_s)
        self.frames: deque[tuple[float, bytes]] = deque()
        self.lateness = Lateness()

    def push(self, frame: bytes, sent: float) -> None:
        """``frame``, which its sender wrote to the veth at ``sent`` (the kernel's receive
        stamp: a veth delivers at once), starting its first bit then."""
        self.frames.append((self.cable.send(len(frame), sent), frame))

    def due(self, now: float) -> list[tuple[float, bytes]]:
        """The frames that have arrived by ``now``, in order, each with when it arrived (a
        shell with several ports hands them to the model in that order across its ports)."""
        frames = self.frames
        if not frames or frames[0][0] > now:
            return []
        self.lateness.record(now - frames[0][0])
        out = []
        while frames and frames[0][0] <= now:
            out.append(frames.popleft())
        return out

    def next_due(self) -> float | None:
        return self.frames[0][0] if self.frames else None
