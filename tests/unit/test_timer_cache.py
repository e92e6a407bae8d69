"""``Switch.next_timer`` keeps its answer between frames (a shell may ask after every
arrival); asked between every change, it must still move as soon as a timer does: an XOFF
starts a refresh, an XON ends it, a next hop being resolved retries, a resolved one expires,
a port going down forgets its neighbours. ``timers_moved`` says when asking can find it moved:
the simulator asks ``next_timer`` only then."""
from __future__ import annotations

from rocelab.fabric.model.pause import MAX_QUANTA, pause_seconds
from rocelab.fabric.model.neighbors import ARP_LIFETIME_S, ARP_RETRY_S
from tests.unit.test_forwarding import (
    H1, H1_IP, H2, H3_IP, NEXTHOPS, RMAC, SPINE_MAC, SPINE_PORT, arp, expected_spine,
    leaf1 as routed_leaf1, udp,
)
from tests.unit.test_lossless import (
    H1_PORT, H2_PORT, RATE, blast_until_pfc, learned, leaf1, pfc_quanta, udp_frame,
)


def test_timers_moved_holds_after_the_frame_that_sends_xoff_and_not_before():
    sw = learned(leaf1())
    sw.tick(0.0)
    assert sw.timers_moved()  # the tick ran: the watchdogs' polls moved
    idle = sw.next_timer()
    assert not sw.timers_moved()
    for _ in range(2000):
        if pfc_quanta(sw.receive(H2_PORT, udp_frame(26), 0.0), H2_PORT):
            break
        assert not sw.timers_moved()  # queued, forwarded: no timer of the switch moved
    else:
        raise AssertionError("no XOFF")
    assert sw.timers_moved()  # the XOFF's refresh
    assert sw.next_timer() == min(idle, pause_seconds(MAX_QUANTA, RATE) / 2)
    assert not sw.timers_moved()


def test_timers_moved_holds_when_a_next_hop_starts_resolving_or_is_learned():
    sw = routed_leaf1()
    sw.tick(0.0)  # the route's next hops asked for
    sw.next_timer()
    assert not sw.timers_moved()
    assert sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=50000), 0.25) == []
    assert not sw.timers_moved()  # held for a next hop already being resolved
    spine = expected_spine(H1_IP, H3_IP, 50000)
    our_ip = "10.0.0.1" if spine == NEXTHOPS[0] else "10.0.0.3"
    sw.receive(SPINE_PORT[spine], arp(2, SPINE_MAC[spine], spine, our_ip, dst_mac=RMAC,
                                      hwdst=RMAC), 0.5)
    assert sw.timers_moved()  # learned: its lifetime runs
    assert sw.next_timer() == ARP_RETRY_S  # the other spine's retry
    assert not sw.timers_moved()


def test_next_timer_follows_xoff_and_xon_when_asked_after_every_frame():
    sw = learned(leaf1())
    sw.tick(0.0)
    idle = sw.next_timer()
    assert idle is not None and sw.next_timer() == idle  # kept: nothing moved
    blast_until_pfc(sw)
    half = pause_seconds(MAX_QUANTA, RATE) / 2
    assert sw.next_timer() == min(idle, half)  # XOFF at 0.0: its refresh
    now, xon = 0.0, []
    while not xon:  # drain h1's port, asking for the timer after every frame
        now = max(now, sw.next_send_time(H1_PORT))
        assert sw.dequeue(H1_PORT, now) is not None
        xon = pfc_quanta(sw.take_control(), H2_PORT)
        if not xon:
            assert sw.next_timer() == min(idle, half)
    assert sw.next_timer() == idle  # XON: no refresh left


def test_next_timer_follows_a_next_hop_from_unresolved_to_resolved_to_forgotten():
    sw = routed_leaf1()
    router = sw._router
    assert router.next_timer() == 0.0  # the route's next hops, to be asked for at once
    sw.tick(0.0)
    assert router.next_timer() == ARP_RETRY_S  # both spines are being resolved
    assert sw.receive("Ethernet8", udp(RMAC, H1, H1_IP, H3_IP, sport=50000), 0.25) == []
    spine = expected_spine(H1_IP, H3_IP, 50000)
    other = NEXTHOPS[1] if spine == NEXTHOPS[0] else NEXTHOPS[0]

    def reply(ip: str, now: float) -> list:
        our_ip = "10.0.0.1" if ip == NEXTHOPS[0] else "10.0.0.3"
        return sw.receive(SPINE_PORT[ip], arp(2, SPINE_MAC[ip], ip, our_ip, dst_mac=RMAC,
                                              hwdst=RMAC), now)

    assert [port for port, _ in reply(spine, 0.5)] == [SPINE_PORT[spine]]  # what it held
    assert router.next_timer() == ARP_RETRY_S  # the other spine's retry
    assert reply(other, 0.75) == []
    assert router.next_timer() == 0.5 + ARP_LIFETIME_S  # resolved: re-probed when old
    sw.set_port_up(SPINE_PORT[spine], False)
    assert router.next_timer() == 0.75 + ARP_LIFETIME_S  # forgotten with its port
    sw.set_port_up(SPINE_PORT[other], False)
    assert router.next_timer() is None


def test_next_timer_is_the_earliest_refresh_over_ports_paused_at_different_times():
    """Both ports in XOFF, h2's first: its refresh leads; once it resumes, h1's does."""
    sw = learned(leaf1())
    sw.tick(0.0)
    idle = sw.next_timer()
    half = pause_seconds(MAX_QUANTA, RATE) / 2
    blast_until_pfc(sw)  # h2 -> h1, XOFF on h2's port at 0.0
    later = half / 4
    for _ in range(2000):  # h1 -> h2, XOFF on h1's port at ``later``
        if pfc_quanta(sw.receive(H1_PORT, udp_frame(26, src=H1, dst=H2), later), H1_PORT):
            break
    assert sw.next_timer() == min(idle, half)
    now = later
    while sw.next_timer() == min(idle, half):  # drain toward h1 until h2's PG resumes
        now = max(now, sw.next_send_time(H1_PORT))
        assert sw.dequeue(H1_PORT, now) is not None
        sw.take_control()
    assert sw.next_timer() == min(idle, later + half)
