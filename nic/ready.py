"""The NIC's two heaps (``nic.core.Nic``), entries in ``(at, index, token)`` order, each
with an item. Its ready QPs: requesters that may send, earliest ``next_at`` first, then by
their place among the NIC's senders, each entry with the token that says whether it is
still the QP's current one (the NIC cleans stale entries as they surface). Its timers: a
flow's RC, ACK-coalescing or DCQCN deadline, then the order they were armed in (a number
no two entries share), the token saying which of the three.

Two forms of one order, as the simulator's event heap (``labs.sim.engine``) has: interpreted,
tuples on a list ordered by ``heapq`` (``TupleReady``); compiled, the keys in typed arrays
sifted in C (``ArrayReady``). ``heapq`` compares tuples element by element through the
generic comparison: a 256-host all-to-all spent 3.6 % of its time in the NIC's pop alone.
``tests/unit/test_nic_ready.py`` holds both forms to the same order. The arrays' index
arithmetic keeps within the queue's size, so their functions skip Cython's bounds and
negative-index checks.
"""
from __future__ import annotations

import heapq
from array import array
from typing import Any

import cython

START = 64  # entries an ArrayReady holds before it first grows (it doubles)


class TupleReady:
    """The interpreter's form: ``(at, index, token, item)`` tuples ordered by ``heapq``."""

    def __init__(self) -> None:
        self._items: list[tuple[float, int, int, Any]] = []

    def __len__(self) -> int:
        return len(self._items)

    def push(self, at: float, index: int, token: int, item: Any) -> None:
        heapq.heappush(self._items, (at, index, token, item))

    def first(self) -> Any:
        """The first entry's item (the queue is not empty)."""
        return self._items[0][3]

    def first_token(self) -> int:
        return self._items[0][2]

    def first_at(self) -> float:
        return self._items[0][0]

    def pop(self) -> None:
        """Drop the first entry."""
        heapq.heappop(self._items)


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.bint)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(at="double[::1]", keys="long long[::1]", a=cython.Py_ssize_t,
               b=cython.Py_ssize_t)
def _before(at, keys, a: int, b: int) -> bool:
    """Whether entry ``a`` comes before entry ``b``: ``(at, index, token)`` in order."""
    if at[a] != at[b]:
        return at[a] < at[b]
    if keys[3 * a] != keys[3 * b]:
        return keys[3 * a] < keys[3 * b]
    return keys[3 * a + 1] < keys[3 * b + 1]


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.void)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(at="double[::1]", keys="long long[::1]", to=cython.Py_ssize_t,
               source=cython.Py_ssize_t)
def _move(at, keys, to: int, source: int) -> None:
    at[to] = at[source]
    keys[3 * to] = keys[3 * source]
    keys[3 * to + 1] = keys[3 * source + 1]
    keys[3 * to + 2] = keys[3 * source + 2]


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.void)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(at="double[::1]", keys="long long[::1]", a=cython.Py_ssize_t,
               b=cython.Py_ssize_t, t=cython.double, k0=cython.longlong, k1=cython.longlong,
               k2=cython.longlong)
def _swap(at, keys, a: int, b: int) -> None:
    t, k0, k1, k2 = at[a], keys[3 * a], keys[3 * a + 1], keys[3 * a + 2]
    _move(at, keys, a, b)
    at[b], keys[3 * b], keys[3 * b + 1], keys[3 * b + 2] = t, k0, k1, k2


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.void)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(at="double[::1]", keys="long long[::1]", i=cython.Py_ssize_t,
               parent=cython.Py_ssize_t)
def _sift_up(at, keys, i: int) -> None:
    """The entry put at ``i`` (the last) sifted up. The arrays come as arguments: a typed
    view taken into a local costs two atomic reference counts a call."""
    while i > 0:
        parent = (i - 1) >> 1
        if not _before(at, keys, i, parent):
            break
        _swap(at, keys, i, parent)
        i = parent


@cython.cfunc
@cython.inline
@cython.exceptval(check=False)
@cython.returns(cython.void)
@cython.boundscheck(False)
@cython.wraparound(False)
@cython.locals(at="double[::1]", keys="long long[::1]", i=cython.Py_ssize_t,
               child=cython.Py_ssize_t, size=cython.Py_ssize_t)
def _sift_down(at, keys, size: int) -> None:
    """The first entry gone: the gap moved down to a leaf, then the last entry (``size``,
    past the heap now) put there and sifted up, as ``heapq`` pops (the engine's heap, which
    says why)."""
    i = 0
    child = 1
    while child < size:
        if child + 1 < size and _before(at, keys, child + 1, child):
            child += 1
        _move(at, keys, i, child)
        i = child
        child = 2 * i + 1
    _move(at, keys, i, size)
    _sift_up(at, keys, i)


class ArrayReady:
    """The compiled form, in ``TupleReady``'s order: per entry its ``at`` in one array of
    doubles and its ``(index, token, slot)`` in one of 64-bit integers; the item waits in
    ``_items`` at its slot, ``_free[:capacity - size]`` are the slots not in use."""

    def __init__(self) -> None:
        self._at = array("d", bytes(8 * START))
        self._keys = array("q", bytes(24 * START))
        self._items: list[Any] = [None] * START
        self._free = array("q", range(START))
        self._size = 0

    def __len__(self) -> int:
        return self._size

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(i=cython.Py_ssize_t, slot=cython.Py_ssize_t)
    def push(self, at_: float, index: int, token: int, item: Any) -> None:
        if self._size == len(self._items):
            self._grow()
        slot = self._free[len(self._items) - self._size - 1]
        self._items[slot] = item
        i = self._size
        self._size = i + 1
        self._at[i] = at_
        self._keys[3 * i], self._keys[3 * i + 1], self._keys[3 * i + 2] = index, token, slot
        _sift_up(self._at, self._keys, i)

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def first(self) -> Any:
        return self._items[self._keys[2]]

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def first_token(self) -> int:
        return self._keys[1]

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def first_at(self) -> float:
        return self._at[0]

    @cython.boundscheck(False)
    @cython.wraparound(False)
    @cython.locals(size=cython.Py_ssize_t, slot=cython.Py_ssize_t)
    def pop(self) -> None:
        slot = self._keys[2]
        self._items[slot] = None
        size = self._size - 1
        self._size = size
        self._free[len(self._items) - size - 1] = slot
        _sift_down(self._at, self._keys, size)

    @cython.locals(bigger_at="double[::1]", bigger_keys="long long[::1]")
    def _grow(self) -> None:
        """Twice the room (the queue is full): entries copied over, the new slots free."""
        capacity = len(self._items)
        bigger_at = array("d", bytes(16 * capacity))
        bigger_at[:capacity] = self._at[:capacity]
        bigger_keys = array("q", bytes(48 * capacity))
        bigger_keys[:3 * capacity] = self._keys[:3 * capacity]
        self._at, self._keys = bigger_at, bigger_keys
        self._items.extend([None] * capacity)
        free = array("q", range(capacity, 2 * capacity))  # the new slots; none else is free
        free.extend(array("q", bytes(8 * capacity)))
        self._free = free

