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
    refresh.moved(heap, a, "Ethernet0")
    b.set_xoff(0.5)
    refresh.moved(heap, b, "Ethernet4")
    assert refresh.earliest(heap) == b.next_refresh
    b.set_xon(0.6)  # the earliest goes: the next one is due, the stale entry is dropped
    refresh.moved(heap, b, "Ethernet4")
    assert refresh.earliest(heap) == a.next_refresh
    assert len(heap) == 1
    a.set_xon(1.1)
    refresh.moved(heap, a, "Ethernet0")
    assert refresh.earliest(heap) is None and heap == []


def test_a_refresh_moves_the_sender_later_and_leaves_no_stale_entry_behind():
    heap: list[refresh.Entry] = []
    a = PfcSender([3], RATE)
    a.set_xoff(0.0)
    refresh.moved(heap, a, "Ethernet0")
    first = a.next_refresh
    for _ in range(100):
        a.tick(a.next_refresh)
        refresh.moved(heap, a, "Ethernet0")
        assert refresh.earliest(heap) == a.next_refresh
    assert a.next_refresh > first
    assert len(heap) == 1  # the earlier ones went as they reached the top


def test_a_tick_finds_the_ports_with_a_refresh_due_and_only_those():
    heap: list[refresh.Entry] = []
    a, b, c = PfcSender([3], RATE), PfcSender([4], RATE), PfcSender([3], RATE)
    for sender, port, at in ((a, "Ethernet0", 0.0), (b, "Ethernet0", 0.1), (c, "Ethernet4", 0.2)):
        sender.set_xoff(at)
        refresh.moved(heap, sender, port)
    c.set_xon(0.3)  # gone to XON: its entry is stale
    refresh.moved(heap, c, "Ethernet4")
    assert refresh.due(heap, a.next_refresh) == {"Ethernet0"}
    assert refresh.earliest(heap) == b.next_refresh  # a's entry taken, b's left
    assert refresh.due(heap, 10.0) == {"Ethernet0"}  # b's; c's is stale
    assert heap == []
