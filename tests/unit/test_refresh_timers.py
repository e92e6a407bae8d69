"""``fabric.model.refresh``: the pending PFC refreshes ``Switch.next_timer`` reads without
walking every sender; what moved a sender (XOFF, refresh, XON) is what it reports."""
from __future__ import annotations

from rocelab.fabric.model import refresh
from rocelab.fabric.model.pause import PfcSender

RATE = 100e9


def test_the_earliest_refresh_of_the_senders_in_xoff():
    heap: list[refresh.Entry] = []
    a, b = PfcSender([3], RATE), PfcSender([4], RATE)
    assert refresh.earliest(heap) is None
    a.set_xoff(1.0)
    refresh.moved(heap, a)
    b.set_xoff(0.5)
    refresh.moved(heap, b)
    assert refresh.earliest(heap) == b.next_refresh
    b.set_xon(0.6)  # the earliest goes: the next one is due, the stale entry is dropped
    refresh.moved(heap, b)
    assert refresh.earliest(heap) == a.next_refresh
    assert len(heap) == 1
    a.set_xon(1.1)
    refresh.moved(heap, a)
    assert refresh.earliest(heap) is None and heap == []


def test_a_refresh_moves_the_sender_later_and_leaves_no_stale_entry_behind():
    heap: list[refresh.Entry] = []
    a = PfcSender([3], RATE)
    a.set_xoff(0.0)
    refresh.moved(heap, a)
    first = a.next_refresh
    for _ in range(100):
        a.tick(a.next_refresh)
        refresh.moved(heap, a)
        assert refresh.earliest(heap) == a.next_refresh
    assert a.next_refresh > first
    assert len(heap) == 1  # the earlier ones went as they reached the top
