"""A discrete-event engine in integer picoseconds.

Events are ``(time_ps, seq, handler, args)`` on a heap: ties run in the order they were
scheduled, so a run is a pure function of the lab, the seed and the calls made on it. One
byte is a whole number of picoseconds at every Ethernet speed (100G: 80 ps, 400G: 20 ps), so
serialisation times are exact; the models' float deadlines are converted with ``ceil`` so a
wake never lands before the moment the model said (``to_ps``).
"""
from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import Any

PS = 10**12  # picoseconds per second


def to_ps(seconds: float) -> int:
    """A model's deadline in ps, never early: the models compare ``now`` (``ps / PS``, a
    float again) with their own float deadline, so the round trip must not land a hair
    before it, or a wake would find nothing to do and re-arm at the same instant forever."""
    ps = math.ceil(seconds * PS)
    while ps / PS < seconds:
        ps += 1
    return ps


class Engine:
    """The clock and the event heap. ``now`` is seconds (what the models take)."""

    def __init__(self) -> None:
        self.now_ps = 0
        self._heap: list[tuple[int, int, Callable[..., Any], tuple]] = []
        self._seq = itertools.count()
        self.events = 0  # handled so far: the engine's own speed figure

    @property
    def now(self) -> float:
        return self.now_ps / PS

    def at(self, when_ps: int, handler: Callable[..., Any], *args: Any) -> None:
        """Run ``handler(*args)`` at ``when_ps`` (at once if that is in the past)."""
        heapq.heappush(self._heap, (max(when_ps, self.now_ps), next(self._seq), handler, args))

    def after(self, delay_ps: int, handler: Callable[..., Any], *args: Any) -> None:
        self.at(self.now_ps + delay_ps, handler, *args)

    def run(self, until_ps: int, stop: Callable[[], bool] | None = None) -> bool:
        """Handle events up to ``until_ps`` (the clock then stands there), or until ``stop()``
        holds after an event; True if it stopped on ``stop``."""
        heap, pop = self._heap, heapq.heappop
        while heap and heap[0][0] <= until_ps:
            when, _, handler, args = pop(heap)
            self.now_ps = when
            handler(*args)
            self.events += 1
            if stop is not None and stop():
                return True
        self.now_ps = max(self.now_ps, until_ps)
        return False

    @property
    def pending(self) -> int:
        return len(self._heap)
