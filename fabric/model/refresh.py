"""The PFC refreshes a switch has pending, earliest first, for ``Switch.next_timer``.

Its caller asks after every received frame, and a fabric switch has a PFC sender per
lossless PG of each of its ports: walking them all whenever one sends (an XOFF, a refresh,
an XON) made a congested switch's next-timer query cost O(ports). Here a sender that sends
pushes its new refresh time onto a heap (a plain list, so that the query tests it for
emptiness without a call), with its port's name, and an entry that no longer matches its
sender (it went to XON, or refreshed since) is dropped when it reaches the top: O(log n)
per PFC frame, O(1) per query, and a tick finds the ports with a refresh due (``due``)
without walking the others.
"""
from __future__ import annotations

import heapq
from itertools import count

from .pause import PfcSender

Entry = tuple[float, int, PfcSender, str]  # (next_refresh, tie-break, sender, its port)
_tie = count()  # ties never compare senders


def moved(heap: list[Entry], sender: PfcSender, port: str) -> None:
    """``sender`` (of ``port``) sent a PFC frame: its refresh timer started, or stopped
    (XON)."""
    at = sender.next_refresh
    if sender.xoff and at is not None:
        heapq.heappush(heap, (at, next(_tie), sender, port))


def earliest(heap: list[Entry]) -> float | None:
    """The earliest refresh due (None: no PG in XOFF), dropping entries gone stale."""
    while heap:
        at, _, sender, _ = heap[0]
        if sender.xoff and sender.next_refresh == at:
            return at
        heapq.heappop(heap)
    return None


def due(heap: list[Entry], now: float) -> set[str]:
    """The ports with a refresh due at ``now``, their entries taken off the heap (each
    refresh sent pushes its next)."""
    ports = set()
    while heap and heap[0][0] <= now:
        at, _, sender, port = heapq.heappop(heap)
        if sender.xoff and sender.next_refresh == at:
            ports.add(port)
    return ports
