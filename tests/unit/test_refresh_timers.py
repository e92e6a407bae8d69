"""``RefreshTimers``: the pending PFC refreshes ``Switch.next_timer`` reads without walking
every sender; what moved a sender (XOFF, refresh, XON) is what it reports."""
from __future__ import annotations

from rocelab.fabric.model.pause import PfcSender
from rocelab.fabric.model.refresh import RefreshTimers

RATE = 100e9


def test_the_earliest_refresh_of_the_senders_in_xoff():
    timers, a, b = RefreshTimers(), PfcSender([3], RATE), PfcSender([4], RATE)
    assert timers.earliest() is None
    a.set_xoff(1.0)
    timers.moved(a)
    b.set_xoff(0.5)
    timers.moved(b)
    assert timers.earliest() == b.next_refresh
    b.set_xon(0.6)  # the earliest goes: the next one is due, the stale entry is dropped
    timers.moved(b)
    assert timers.earliest() == a.next_refresh
    assert len(timers) == 1
    a.set_xon(1.1)
    timers.moved(a)
    assert timers.earliest() is None and len(timers) == 0


def test_a_refresh_moves_the_sender_later_and_leaves_no_stale_entry_behind():
    timers, a = RefreshTimers(), PfcSender([3], RATE)
    a.set_xoff(0.0)
    timers.moved(a)
    first = a.next_refresh
    for _ in range(100):
        a.tick(a.next_refresh)
        timers.moved(a)
    assert timers.earliest() == a.next_refresh > first
    assert len(timers) == 1  # the earlier ones went as they reached the top
