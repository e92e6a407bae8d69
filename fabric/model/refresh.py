"""The PFC refreshes a switch has pending, earliest first, for ``Switch.next_timer``.

Its caller asks after every received frame, and a fabric switch has a PFC sender per
lossless PG of each of its ports: walking them all whenever one sends (an XOFF, a refresh,
an XON) made a congested switch's next-timer query cost O(ports). Here a sender that sends
pushes its new refresh time onto a heap, and an entry that no longer matches its sender (it
went to XON, or refreshed since) is dropped when it reaches the top: O(log n) per PFC frame,
O(1) per query.
"""
from __future__ import annotations

import heapq

from .pause import PfcSender


class RefreshTimers:
    """The ``next_refresh`` of every PFC sender in XOFF, earliest first."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, PfcSender]] = []  # (next_refresh, seq, sender)
        self._seq = 0  # ties never compare senders

    def moved(self, sender: PfcSender) -> None:
        """``sender`` sent a PFC frame: its refresh timer started, or stopped (XON)."""
        at = sender.next_refresh
        if sender.xoff and at is not None:
            self._seq += 1
            heapq.heappush(self._heap, (at, self._seq, sender))

    def earliest(self) -> float | None:
        """The earliest refresh due (None: no PG in XOFF), dropping entries gone stale."""
        heap = self._heap
        while heap:
            at, _, sender = heap[0]
            if sender.xoff and sender.next_refresh == at:
                return at
            heapq.heappop(heap)
        return None

    def __len__(self) -> int:
        """Entries held, stale ones included (what a test bounds)."""
        return len(self._heap)
