"""A discrete-event engine in integer picoseconds.

Events are ``(time_ps, seq, handler, args)`` on a heap: ties run in the order they were
scheduled, so a run is a pure function of the lab, the seed and the calls made on it. One
byte is a whole number of picoseconds at every Ethernet speed (100G: 80 ps, 400G: 20 ps), so
serialisation times are exact; the models' float deadlines are converted with ``ceil`` so a
wake never lands before the moment the model said (``to_ps``).

While it runs, the cyclic garbage collector looks at young objects only every
``GC_YOUNG_THRESHOLD`` new ones (``few_collections``): at Python's default of 700 it collected
every few events, so whatever outlives a few hundred events (heap entries, queued frames)
reached the oldest generation and brought full collections over every QP's objects: 14 % of
a 256-host run's CPU in the collector, more in the caches it emptied. Reference counting
frees the simulator's garbage as before; only cycles wait longer.
"""
from __future__ import annotations

import gc
import heapq
import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

PS = 10**12  # picoseconds per second
GC_YOUNG_THRESHOLD = 100_000  # new container objects between young collections, while running


@contextmanager
def few_collections() -> Iterator[None]:
    """Young-generation collections every ``GC_YOUNG_THRESHOLD`` new objects instead of 700
    (module docstring), restored after."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], GC_YOUNG_THRESHOLD), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


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

    def later(self, when_ps: int, handler: Callable[..., Any], args: tuple) -> None:
        """``at`` for the per-frame path: ``when_ps`` is known not to be in the past and the
        arguments come as a tuple (a wire's arrivals, a million a minute)."""
        heapq.heappush(self._heap, (when_ps, next(self._seq), handler, args))

    def run(self, until_ps: int, stop: Callable[[], bool] | None = None) -> bool:
        """Handle events up to ``until_ps`` (the clock then stands there), or until ``stop()``
        holds after an event; True if it stopped on ``stop``."""
        heap, pop = self._heap, heapq.heappop
        handled = 0
        try:
            with few_collections():
                while heap and heap[0][0] <= until_ps:
                    when, _, handler, args = pop(heap)
                    self.now_ps = when
                    handler(*args)
                    handled += 1
                    if stop is not None and stop():
                        return True
        finally:
            self.events += handled
        self.now_ps = max(self.now_ps, until_ps)
        return False

    @property
    def pending(self) -> int:
        return len(self._heap)
