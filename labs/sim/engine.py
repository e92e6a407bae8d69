"""A discrete-event engine in integer picoseconds.

Events are ordered by ``(time_ps, seq)``: ties run in the order they were scheduled, so a
run is a pure function of the lab, the seed and the calls made on it.

An event is a ``Handler`` and one argument: ``fire(arg)`` runs it. The per-frame kinds (a
frame's arrival on a wire, a switch port's wake, a NIC's wake) are handlers themselves, so
compiled the engine calls them in C with no tuple made per event; any other call is wrapped
in a ``Call`` (``at``, ``after``).

The heap takes the form each build runs fastest, the one place where the two differ
(Cython's ``cython.compiled`` chooses): interpreted, tuples on a list ordered by ``heapq``
in C (``TupleHeap``); compiled, integers in a typed array sifted in C (``ArrayHeap``). Each
form run in the other build was measured slower: the array sifted by the interpreter made a
72-host all-to-all 1.8x slower, and ``heapq``'s tuple comparisons were 9 % of the compiled
run's instructions. ``tests/unit/test_sim.py`` holds both to the same order. The array
heap's index arithmetic keeps within its size, so its functions skip Cython's bounds and
negative-index checks. One byte is a whole number of picoseconds at every Ethernet speed
(100G: 80 ps, 400G: 20 ps), so serialisation times are exact; the models' float deadlines
are converted with ``ceil`` so a wake never lands before the moment the model said
(``to_ps``).

While it runs, the cyclic garbage collector looks at young objects only every
``GC_YOUNG_THRESHOLD`` new ones (``few_collections``): at Python's default of 700 it collected
every few events, so whatever outlives a few hundred events (heap entries, queued frames)
reached the oldest generation and brought full collections over every QP's objects: 14 % of
a 256-host run's CPU in the collector, more in the caches it emptied. The objects that exist
when it starts (the lab, its QPs) are also frozen out of the collector's sight until it ends
(``gc.freeze``): the few full collections left still walked them all, 0.9 s of a 128-host
all-to-all's 18. Reference counting frees the simulator's garbage as before; only cycles
wait longer.
"""
from __future__ import annotations

import gc
import heapq
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import cython

PS = 10**12  # picoseconds per second
# PS as a float: the same quotient for any ps below 2**53 (2.5 hours), and a C double when
# compiled, so ``to_ps`` runs without Python numbers
PS_FLOAT = cython.declare(cython.double, 1e12)
LAST_PS = cython.declare(cython.double, 2.0**62)  # beyond it, a time is no 64-bit integer
EXACT_PS = cython.declare(cython.longlong, 2**53)  # below it, a time is exact as a double
GC_YOUNG_THRESHOLD = 100_000  # new container objects between young collections, while running
HEAP_START = 1024  # events an ArrayHeap holds before it first grows (it doubles)


@contextmanager
def few_collections() -> Iterator[None]:
    """Young-generation collections every ``GC_YOUNG_THRESHOLD`` new objects instead of 700,
    and the objects that exist already frozen out of every collection (module docstring);
    both undone after, so cycles among them are collected again."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], GC_YOUNG_THRESHOLD), *old[1:])
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*old)


@cython.locals(exact=cython.double, ps=cython.longlong)
def to_ps(seconds: float) -> int:
    """A model's deadline in ps, never early: the models compare ``now`` (``ps / PS``, a
    float again) with their own float deadline, so the round trip must not land a hair
    before it, or a wake would find nothing to do and re-arm at the same instant forever."""
    exact = seconds * PS_FLOAT
    if not -LAST_PS < exact < LAST_PS:  # infinite, NaN, or past the clock's 64 bits
        raise OverflowError(f"{seconds} s cannot be a time on the simulator's clock")
    ps = cython.cast(cython.longlong, exact)  # toward zero; then up, as math.ceil
    if ps < exact:
        ps += 1
    while ps / PS_FLOAT < seconds:
        ps += 1
    return ps


class Handler:
    """What an event runs: ``fire(arg)``, with the one argument it was scheduled with."""

    def fire(self, arg: Any) -> None:
        raise NotImplementedError


class Call(Handler):
    """``handler(*args)`` as an event: what ``at`` and ``after`` schedule."""

    def __init__(self, handler: Callable[..., Any], args: tuple) -> None:
        self.handler = handler
        self.args = args

    def fire(self, arg: Any) -> None:
        self.handler(*self.args)


class TupleHeap:
    """The interpreter's event heap: ``(time, seq, handler, arg)`` tuples on a list, kept
    in order by ``heapq`` (C code)."""

    def __init__(self) -> None:
        self._items: list[tuple[int, int, Handler, Any]] = []
        self.firing = -1  # the sequence number of the event being handled

    def __len__(self) -> int:
        return len(self._items)

    def earliest(self) -> int:
        """The time of the next event (the heap is not empty)."""
        return self._items[0][0]

    def push(self, when: int, seq: int, handler: Handler, arg: Any) -> None:
        heapq.heappush(self._items, (when, seq, handler, arg))

    def fire_next(self) -> None:
        """Take the next event off the heap and run it."""
        _, self.firing, handler, arg = heapq.heappop(self._items)
        handler.fire(arg)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.void)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(keys="long long[::1]", to=cython.Py_ssize_t, when=cython.longlong,
               seq=cython.longlong, slot=cython.longlong)
def _put(keys, to: int, when: int, seq: int, slot: int) -> None:
    """Entry ``to`` of an ArrayHeap's keys set to one event's ``(time, seq, slot)``."""
    keys[3 * to] = when
    keys[3 * to + 1] = seq
    keys[3 * to + 2] = slot


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.void)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(keys="long long[::1]", to=cython.Py_ssize_t, source=cython.Py_ssize_t)
def _move(keys, to: int, source: int) -> None:
    """Entry ``source`` of an ArrayHeap's keys copied over entry ``to``."""
    _put(keys, to, keys[3 * source], keys[3 * source + 1], keys[3 * source + 2])


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.bint)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(keys="long long[::1]", a=cython.Py_ssize_t, b=cython.Py_ssize_t)
def _before(keys, a: int, b: int) -> bool:
    """Whether entry ``a`` of an ArrayHeap's keys runs before entry ``b``: earlier, or as
    early and scheduled first."""
    return keys[3 * a] < keys[3 * b] or (keys[3 * a] == keys[3 * b]
                                         and keys[3 * a + 1] < keys[3 * b + 1])


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.void)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(keys="long long[::1]", i=cython.Py_ssize_t, parent=cython.Py_ssize_t,
               when=cython.longlong, seq=cython.longlong, slot=cython.longlong)
def _sift_up(keys, i: int, when: int, seq: int, slot: int) -> None:
    """A new event put at entry ``i`` (the heap's last), sifted up. Its sequence number is
    the largest, so it stops below any parent not later than it. The keys come as an
    argument: a typed view taken into a local costs two atomic reference counts a call."""
    while i > 0:
        parent = (i - 1) >> 1
        if keys[3 * parent] <= when:
            break
        _move(keys, i, parent)
        i = parent
    _put(keys, i, when, seq, slot)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.void)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(keys="long long[::1]", i=cython.Py_ssize_t, child=cython.Py_ssize_t,
               parent=cython.Py_ssize_t, size=cython.Py_ssize_t)
def _sift_down(keys, size: int) -> None:
    """The first entry gone: the gap it left moved down to a leaf along the earlier child,
    then the last entry (``size``, past the heap now) sifted up from there, as ``heapq``
    pops: the last entry is late, so it rarely climbs, and each level costs one comparison
    where stopping on the way down cost two."""
    i = 0
    child = 1
    while child < size:
        if child + 1 < size and _before(keys, child + 1, child):
            child += 1
        _move(keys, i, child)
        i = child
        child = 2 * i + 1
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(keys, size, parent):
            break
        _move(keys, i, parent)
        i = parent
    _move(keys, i, size)


class ArrayHeap:
    """The compiled build's event heap, with ``TupleHeap``'s order: integers only, each
    event's ``(time, seq, slot)`` in one array of 64-bit integers (a C array to the compiled
    code, so the sift compares C integers); its handler and argument wait in ``_handlers``
    and ``_args`` at its slot. ``_free[:capacity - size]`` are the slots not in use. Both
    integer arrays are typed views to the compiled code."""

    def __init__(self) -> None:
        self._keys = array("q", bytes(24 * HEAP_START))
        self._handlers: list[Handler | None] = [None] * HEAP_START
        self._args: list[Any] = [None] * HEAP_START
        self._free = array("q", range(HEAP_START))
        self._size = 0
        self.firing = -1  # the sequence number of the event being handled

    def __len__(self) -> int:
        return self._size

    def earliest(self) -> int:
        """The time of the next event (the heap is not empty)."""
        return self._keys[0]

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(slot=cython.longlong)
    def push(self, when: int, seq: int, handler: Handler, arg: Any) -> None:
        """Add an event whose ``seq`` is larger than any before it."""
        if self._size == len(self._handlers):
            self._grow()
        slot = self._free[len(self._handlers) - self._size - 1]
        self._handlers[slot] = handler
        self._args[slot] = arg
        self._size += 1
        _sift_up(self._keys, self._size - 1, when, seq, slot)

    @cython.locals(bigger="long long[::1]")
    def _grow(self) -> None:
        """Twice the room (the heap is full): the heap copied over, the new slots free."""
        capacity = len(self._handlers)
        bigger = array("q", bytes(48 * capacity))
        bigger[:3 * capacity] = self._keys[:3 * capacity]
        self._keys = bigger
        self._handlers.extend([None] * capacity)
        self._args.extend([None] * capacity)
        free = array("q", range(capacity, 2 * capacity))  # the new slots; none else is free
        free.extend(array("q", bytes(8 * capacity)))
        self._free = free

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(first=cython.longlong, handler=Handler)
    def fire_next(self) -> None:
        """Take the next event off the heap and run it."""
        first = self._keys[2]
        self.firing = self._keys[1]
        self._size -= 1
        self._free[len(self._handlers) - self._size - 1] = first
        _sift_down(self._keys, self._size)
        # the slot is free again before the handler runs (it may schedule into it)
        handler, self._handlers[first] = self._handlers[first], None
        arg, self._args[first] = self._args[first], None
        if self._size:  # the next event's objects start on their way into the cache
            _prefetch(self._handlers, self._args, self._keys[2])
        handler.fire(arg)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.void)
@cython.locals(handlers=list, args=list, slot=cython.Py_ssize_t)
def _prefetch(handlers, args, slot: int) -> None:
    """Compiled: ask the CPU for the handler and argument of the event in ``slot`` while
    this one runs. Each event's objects were last touched thousands of events ago; reading
    them when their turn came was a cache miss at every event."""
    if cython.compiled:
        __builtin_prefetch(PyList_GET_ITEM_PTR(handlers, slot))
        __builtin_prefetch(PyList_GET_ITEM_PTR(args, slot))


class Engine:
    """The clock and the event heap. ``now`` is seconds (what the models take)."""

    def __init__(self) -> None:
        self.now_ps = 0
        self._heap = ArrayHeap() if cython.compiled else TupleHeap()
        self._seq = 0
        self.events = 0  # handled so far: the engine's own speed figure
        self._halted = False

    @property
    def now(self) -> float:
        return self.seconds()

    def seconds(self) -> float:
        """``now`` as a call: compiled, the shells reach it in C, where a property is looked
        up by name at every frame. Below 2**53 ps (2.5 hours) the integer converts exactly,
        so the C quotient is Python's (``to_ps``)."""
        if self.now_ps < EXACT_PS:
            return self.now_ps / PS_FLOAT
        return self.now_ps / PS

    def at(self, when_ps: int, handler: Callable[..., Any], *args: Any) -> None:
        """Run ``handler(*args)`` at ``when_ps`` (at once if that is in the past)."""
        self.later(max(when_ps, self.now_ps), Call(handler, args), None)

    def after(self, delay_ps: int, handler: Callable[..., Any], *args: Any) -> None:
        self.later(self.now_ps + max(delay_ps, 0), Call(handler, args), None)

    @cython.locals(seq=cython.longlong)
    def later(self, when_ps: int, handler: Handler, arg: Any) -> int:
        """The per-frame path's ``at``: ``handler.fire(arg)`` at ``when_ps``, which is known
        not to be in the past (a wire's arrivals, a million a minute). Returns the event's
        sequence number, which ``firing`` gives while it is handled."""
        seq = self._seq
        self._seq = seq + 1
        self._heap.push(when_ps, seq, handler, arg)
        return seq

    def firing(self) -> int:
        """The sequence number of the event being handled: a handler that re-arms (a port's
        wake) keeps its latest event's (``later``) and ignores the others, superseded,
        without numbering its own generations (a boxed integer per wake)."""
        return self._heap.firing

    def halt(self) -> None:
        """Make the running ``run`` return True once the event being handled is done: a
        handler's word that what the caller waits for may have happened (a condition asked
        after every event would cost a Python call per event)."""
        self._halted = True

    @cython.locals(handled=cython.Py_ssize_t, until=cython.longlong, when=cython.longlong)
    def run(self, until_ps: int) -> bool:
        """Handle events up to ``until_ps`` (the clock then stands there), or until a handler
        calls ``halt``; True if it halted."""
        heap, handled, until = self._heap, 0, until_ps
        self._halted = False
        try:
            with few_collections():
                while len(heap):
                    when = heap.earliest()
                    if when > until:
                        break
                    self.now_ps = when
                    heap.fire_next()
                    handled += 1
                    if self._halted:
                        return True
        finally:
            self.events += handled
        self.now_ps = max(self.now_ps, until_ps)
        return False

    @property
    def pending(self) -> int:
        return len(self._heap)
