"""nic.core: the pure NIC core both the live endpoint and the virtual-time host drive.

Two ``Nic`` objects joined back to back by a zero-delay wire (``Loop``) run with exact times:
a frame reaches the peer the moment its last bit leaves, and the loop jumps from one
``next_wake`` or arrival to the next, so every send time below is the NIC's own decision.
The settings deliberately differ from the shipped labs' (DSCP, priorities, MTU), and tests
read them back from the settings rather than assuming them.
"""
from __future__ import annotations

import copy
import heapq
import json
from collections.abc import Callable

import pytest

from rocelab.nic.settings import NicSettings
from rocelab.traffic import packets
from rocelab.nic import roce
from rocelab.nic import codec
from rocelab.nic.dcqcn import ReactionPoint
from rocelab.nic.core import CE, ECT0, Nic
from rocelab.nic.rc import psn_diff

LINE = 10e9  # b/s on the wire
MAC_A, MAC_B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
IP_A, IP_B = "192.0.2.1", "192.0.2.2"
SPORT = 0xC123
SETTINGS = NicSettings.model_validate({
    "roce": {"dscp": 10, "priority": 5, "mtu": 2048},
    "cnp": {"dscp": 40, "priority": 2},
})  # DCQCN as the settings' default mode has it: tests read its numbers from the objects
UNPACED = SETTINGS.model_copy(update={"dcqcn": SETTINGS.dcqcn.model_copy(
    update={"enabled": False})})
MTU = SETTINGS.roce.mtu
ACK_DELAY_S = 1e-3

# today's endpoint "done" dict (tests/integration/test_endpoint.py and checks read these)
RESULT_KEYS = {"timed_out", "time_scale", "line_rate_bps", "senders", "receivers",
               "pfc_received", "paused_s", "paused_priority"}
SENDER_KEYS = {"name", "role", "qpn", "messages", "message_bytes", "messages_done", "bytes",
               "elapsed_s", "goodput_bps", "completion_s", "packets_sent",
               "payload_bytes_sent", "retransmitted", "naks_received", "timeouts",
               "acks_received", "cnps_received", "failed", "rate_series"}
RECEIVER_KEYS = {"name", "role", "qpn", "messages", "bytes", "packets", "duplicates",
                 "out_of_sequence", "acks_sent", "naks_sent", "ce_marked", "cnps_sent"}


def send_spec(size: int, count: int, **extra) -> dict:
    """One ``send`` entry as traffic.patterns writes it."""
    return {"name": "a->b", "qpn": 0x100, "peer_qpn": 0x800, "peer_ip": IP_B, "size": size,
            "count": count, "op": "write", "window": 1024, "rto_s": 0.5,
            "start_psn": 0xFFFFF0, "after": None, "sport": SPORT, **extra}


def receive_spec(count: int, **extra) -> dict:
    return {"name": "a->b", "qpn": 0x800, "peer_qpn": 0x100, "peer_ip": IP_A,
            "count": count, "ack_delay_s": ACK_DELAY_S, "start_psn": 0xFFFFF0,
            "sport": SPORT, **extra}


def sender_nic(settings: NicSettings, size: int, count: int, line: float = LINE,
               **extra) -> Nic:
    nic = Nic(settings, line)
    nic.add_sender(send_spec(size, count, **extra),
                   nic.headers("data", src_mac=MAC_A, dst_mac=MAC_B, src_ip=IP_A,
                               dst_ip=IP_B, sport=SPORT))
    return nic


def receiver_nic(settings: NicSettings, count: int, **extra) -> Nic:
    nic = Nic(settings, LINE)
    addresses = dict(src_mac=MAC_B, dst_mac=MAC_A, src_ip=IP_B, dst_ip=IP_A, sport=SPORT)
    nic.add_receiver(receive_spec(count, **extra), nic.headers("ack", **addresses),
                     nic.headers("cnp", **addresses))
    return nic


Tamper = Callable[[int, bytes, float], bytes | None]  # (from nic, frame, time) -> frame


class Loop:
    """Two NICs back to back on a zero-delay wire, driven with exact times."""

    def __init__(self, a: Nic, b: Nic, tamper: Tamper | None = None) -> None:
        self.nics = (a, b)
        self.tamper = tamper
        self.in_flight: list[tuple[float, int, int, bytes]] = []  # (arrival, seq, to, frame)
        self.sent: list[tuple[float, int, bytes]] = []  # (start, from, frame)
        self.t = 0.0

    def run(self, until: float) -> float:
        """Run until both NICs are complete (or nothing is pending); the time reached."""
        a, b = self.nics
        a.start(self.t)
        b.start(self.t)
        spins = 0
        while True:
            while self.in_flight and self.in_flight[0][0] <= self.t:
                _, _, to, frame = heapq.heappop(self.in_flight)
                self.nics[to].receive(frame, self.t)
            for i, nic in enumerate(self.nics):
                nic.poll(self.t)
                while (frame := nic.dequeue(self.t)) is not None:
                    self.sent.append((self.t, i, frame))
                    arrives = self.t + len(frame) * 8 / nic.line_bps
                    if self.tamper is not None:
                        frame = self.tamper(i, frame, self.t)
                    if frame is not None:
                        heapq.heappush(self.in_flight, (arrives, len(self.sent), 1 - i, frame))
            if a.complete and b.complete:
                break
            wakes = [w for nic in self.nics if (w := nic.next_wake(self.t)) is not None]
            wakes += [self.in_flight[0][0]] if self.in_flight else []
            if not wakes:
                break
            t = min(wakes)
            spins = spins + 1 if t == self.t else 0
            assert spins < 100, f"no progress at t={t}: next_wake says due, dequeue says no"
            assert t <= until, f"still running at {until}"
            self.t = t
        return self.t

    def frames(self, src: int, opcode: int | None = None) -> list[tuple[float, codec.Incoming]]:
        """(start, parsed) of every RoCE frame NIC ``src`` sent, of one opcode if given."""
        out = []
        for t, i, frame in self.sent:
            parsed = codec.parse(frame)
            if i == src and parsed is not None and opcode in (None, parsed.opcode):
                out.append((t, parsed))
        return out


def data_frames(loop: Loop) -> list[tuple[float, codec.Incoming]]:
    return [(t, f) for t, f in loop.frames(0) if f.opcode not in (codec.ACK_OPCODE,
                                                                   codec.CNP_OPCODE)]


def peer_data(psn: int, *, ecn: int, ackreq: bool = False) -> bytes:
    """A data frame from the receive flow's peer to the NIC's responder QP 0x800."""
    headers = codec.Headers(MAC_A, MAC_B, IP_A, IP_B, dscp=SETTINGS.roce.dscp, ecn=ecn,
                           sport=SPORT)
    return codec.data_frame(headers, 0x800, psn, 0x07, MTU, ackreq=ackreq)  # WRITE middle


def cnp_for_sender() -> bytes:
    headers = codec.Headers(MAC_B, MAC_A, IP_B, IP_A, dscp=SETTINGS.cnp.dscp, ecn=0,
                           sport=SPORT)
    return codec.cnp_frame(headers, 0x100)


def cnp_until_cut(nic: Nic, t: float) -> float:
    """A CNP for the NIC's first sender at ``t``, then its reaction point's own events until
    the rate drops (at once in paper mode, at the next decrease check in firmware mode),
    and the NIC's timers at that moment: the time of the cut."""
    rp = nic.senders[0].rp
    before = rp.rate(t)
    nic.receive(cnp_for_sender(), t)
    for _ in range(100):
        if rp.rate(t) < before:
            nic.poll(t)
            return t
        t = rp.next_event(t)
    raise AssertionError(f"no cut after a CNP at {t}")


def clone(rp: ReactionPoint) -> ReactionPoint:
    """An independent copy of a reaction point of any mode (scalars and frozen
    parameters: a shallow copy is one)."""
    twin = copy.copy(rp)
    assert twin is not rp and twin.__class__ is rp.__class__
    return twin


def pfc(priority: int, quanta: int) -> bytes:
    return bytes(packets.pfc_frame(MAC_B, {priority: quanta}))


def frame_s(frame: bytes) -> float:
    return len(frame) * 8 / LINE


# -- a message end to end ----------------------------------------------------------------------


def test_messages_complete_across_the_psn_wrap():
    size, count = 10 * MTU + 100, 3
    a, b = sender_nic(SETTINGS, size, count), receiver_nic(SETTINGS, count)
    loop = Loop(a, b)
    end = loop.run(until=1.0)
    sender = a.results(0.0, end, timed_out=False)["senders"][0]
    receiver = b.results(0.0, end, timed_out=False)["receivers"][0]
    assert (sender["messages_done"], sender["bytes"]) == (count, size * count)
    assert sender["retransmitted"] == sender["timeouts"] == sender["naks_received"] == 0
    assert sender["packets_sent"] == 11 * count
    assert (receiver["messages"], receiver["bytes"]) == (count, size * count)
    assert receiver["duplicates"] == receiver["out_of_sequence"] == 0
    psns = [f.psn for _, f in data_frames(loop)]
    assert psns[0] == 0xFFFFF0 and 0 in psns  # the PSN wrapped on the way
    assert all(psn_diff(b_, a_) == 1 for a_, b_ in zip(psns, psns[1:]))


@pytest.mark.parametrize("ecn", [True, False])
def test_data_and_acks_carry_the_settings_marking(ecn):
    """The QP's traffic class on data and ACKs alike: the RoCE class, ECT(0) with ECN on."""
    settings = SETTINGS.model_copy(update={"roce": SETTINGS.roce.model_copy(
        update={"ecn": ecn})})
    a, b = sender_nic(settings, 2 * MTU, 1), receiver_nic(settings, 1)
    loop = Loop(a, b)
    loop.run(until=1.0)
    tos = {i: {f[15] for _, j, f in loop.sent if j == i} for i in (0, 1)}
    marked = settings.roce.dscp << 2 | (ECT0 if ecn else 0)
    assert tos == {0: {marked}, 1: {marked}}
    assert all(roce.verify_icrc(f) for _, _, f in loop.sent)


def test_unpaced_sender_fills_the_line():
    """No DCQCN: data frames leave back to back, one frame time apart, and goodput is the
    line rate less the headers."""
    size, count = 64 * MTU, 4
    a, b = sender_nic(UNPACED, size, count), receiver_nic(UNPACED, count)
    loop = Loop(a, b)
    end = loop.run(until=1.0)
    sent = [(t, f) for t, i, f in loop.sent if i == 0]
    for (t0, f0), (t1, _) in zip(sent, sent[1:]):
        assert t1 == pytest.approx(t0 + frame_s(f0), rel=1e-12)
    wire_bits = sum(len(f) * 8 for _, f in sent)
    assert wire_bits / (sent[-1][0] + frame_s(sent[-1][1]) - sent[0][0]) == \
        pytest.approx(LINE, rel=1e-9)
    goodput = a.results(0.0, end, timed_out=False)["senders"][0]["goodput_bps"]
    best = LINE * size * count * 8 / wire_bits
    assert 0.99 * best < goodput <= best


def test_qps_share_the_port_in_turn():
    """Several unpaced QPs on one port: each frame goes to the QP that has waited longest,
    so they take turns, and the port stays full."""
    qps = 5
    a, b = Nic(UNPACED, LINE), Nic(UNPACED, LINE)
    for q in range(qps):
        a.add_sender(send_spec(8 * MTU, 1, name=f"q{q}", qpn=0x100 + q, peer_qpn=0x800 + q),
                     a.headers("data", src_mac=MAC_A, dst_mac=MAC_B, src_ip=IP_A,
                               dst_ip=IP_B, sport=SPORT + q))
        b.add_receiver(receive_spec(1, name=f"q{q}", qpn=0x800 + q, peer_qpn=0x100 + q),
                       b.headers("ack", src_mac=MAC_B, dst_mac=MAC_A, src_ip=IP_B,
                                 dst_ip=IP_A, sport=SPORT + q),
                       b.headers("cnp", src_mac=MAC_B, dst_mac=MAC_A, src_ip=IP_B,
                                 dst_ip=IP_A, sport=SPORT + q))
    loop = Loop(a, b)
    loop.run(until=1.0)
    order = [f.dqpn - 0x800 for _, f in data_frames(loop)]
    assert order == list(range(qps)) * 8
    starts = [t for t, _ in data_frames(loop)]
    frames = [f for t, i, f in loop.sent if i == 0]
    assert all(t1 == pytest.approx(t0 + frame_s(f), rel=1e-12)
               for t0, t1, f in zip(starts, starts[1:], frames))


def test_a_window_bound_qp_resumes_on_each_ack():
    window = 4
    a, b = sender_nic(UNPACED, 40 * MTU, 1, window=window), receiver_nic(UNPACED, 1)
    loop = Loop(a, b)
    end = loop.run(until=1.0)
    sender = a.results(0.0, end, timed_out=False)["senders"][0]
    assert sender["messages_done"] == 1 and sender["timeouts"] == 0
    assert sender["acks_received"] == 40 // window  # one per window: AckReq when it fills
    assert end < send_spec(1, 1)["rto_s"]


def test_a_lost_last_packet_is_acked_up_to_the_gap_by_the_timer_and_resent_on_timeout():
    size = 6 * MTU
    rto = send_spec(size, 1)["rto_s"]
    last = (0xFFFFF0 + 5) % (1 << 24)

    def drop_last_once(src: int, frame: bytes, t: float) -> bytes | None:
        if src == 0 and codec.parse(frame).psn == last and not dropped:
            dropped.append(t)
            return None
        return frame

    dropped: list[float] = []
    a, b = sender_nic(UNPACED, size, 1), receiver_nic(UNPACED, 1)
    loop = Loop(a, b, tamper=drop_last_once)
    end = loop.run(until=10.0)
    sender = a.results(0.0, end, timed_out=False)["senders"][0]
    assert (sender["timeouts"], sender["naks_received"], sender["retransmitted"]) == (1, 0, 1)
    acks = [(t, f.psn, frame) for (t, f), (_, _, frame) in
            zip(loop.frames(1), [s for s in loop.sent if s[1] == 1])]
    first_arrival = data_frames(loop)[0][0] + frame_s(loop.sent[0][2])
    acked_at, psn, ack = acks[0]
    assert psn == (last - 1) % (1 << 24)  # the coalescing timer, for the first five
    assert acked_at == pytest.approx(first_arrival + ACK_DELAY_S)
    resent = data_frames(loop)[-1][0]
    assert resent == pytest.approx(acked_at + frame_s(ack) + rto)  # RC timer, re-armed by it
    assert acks[-1][1] == last and len(acks) == 2


# -- ACK coalescing ----------------------------------------------------------------------------


def test_responder_acks_every_16_packets_and_the_last():
    size = 40 * MTU
    a, b = sender_nic(UNPACED, size, 1), receiver_nic(UNPACED, 1)
    loop = Loop(a, b)
    loop.run(until=1.0)
    data = [f.psn for _, f in data_frames(loop)]
    acks = [f.psn for _, f in loop.frames(1, codec.ACK_OPCODE)]
    assert acks == [data[15], data[31], data[39]]
    assert b.receivers[0x800].rc.stats.acks_sent == 3


def test_the_coalescing_timer_acks_what_neither_count_nor_ackreq_did():
    nic = receiver_nic(SETTINGS, 10)
    for k, t in enumerate((1.0, 1.0002, 1.0004)):
        assert nic.receive(peer_data(0xFFFFF0 + k, ecn=0), t) is True
        nic.poll(t)
        assert nic.dequeue(t) is None  # three packets: no ACK yet
    due = 1.0 + ACK_DELAY_S
    assert nic.next_wake(1.0004) == due
    nic.poll(due - 1e-9)
    assert nic.dequeue(due - 1e-9) is None
    nic.poll(due)
    ack = codec.parse(nic.dequeue(due))
    assert (ack.opcode, ack.psn, ack.aeth >> 29) == (codec.ACK_OPCODE, 0xFFFFF2, 0)
    assert nic.next_wake(due) is None


# -- loss ------------------------------------------------------------------------------------


def test_a_lost_frame_gives_one_nak_and_go_back_n():
    size, count, lost = 8 * MTU, 2, 5
    dropped = []

    def drop_once(src: int, frame: bytes, t: float) -> bytes | None:
        parsed = codec.parse(frame)
        if src == 0 and not dropped and parsed.psn == (0xFFFFF0 + lost) % (1 << 24):
            dropped.append(t)
            return None
        return frame

    a, b = sender_nic(UNPACED, size, count), receiver_nic(UNPACED, count)
    loop = Loop(a, b, tamper=drop_once)
    end = loop.run(until=1.0)
    sender = a.results(0.0, end, timed_out=False)["senders"][0]
    receiver = b.results(0.0, end, timed_out=False)["receivers"][0]
    assert dropped
    assert (receiver["naks_sent"], sender["naks_received"], sender["timeouts"]) == (1, 1, 0)
    psns = [f.psn for _, f in data_frames(loop)]
    back = next(i for i in range(1, len(psns)) if psn_diff(psns[i], psns[i - 1]) != 1)
    assert psns[back] == psns[lost]  # went back to the lost packet, not earlier
    total = 8 * count
    assert psns[back:] == [(0xFFFFF0 + k) % (1 << 24) for k in range(lost, total)]
    assert sender["retransmitted"] == back - lost == len(psns) - total
    assert receiver["out_of_sequence"] == back - lost - 1
    assert (receiver["bytes"], receiver["messages"]) == (size * count, count)


# -- PFC ---------------------------------------------------------------------------------------


def both_ways() -> Nic:
    """A NIC that sends on QP 0x100 and receives on QP 0x800, started at 0."""
    nic = sender_nic(SETTINGS, 100 * MTU, 1)
    addresses = dict(src_mac=MAC_A, dst_mac=MAC_B, src_ip=IP_A, dst_ip=IP_B, sport=SPORT)
    nic.add_receiver(receive_spec(10), nic.headers("ack", **addresses),
                     nic.headers("cnp", **addresses))
    nic.start(0.0)
    return nic


def test_xoff_holds_data_and_acks_but_not_cnps_and_xon_resumes():
    nic = both_ways()
    roce = SETTINGS.roce.priority
    assert nic.dequeue(0.0) is not None
    paused_at = nic.wire_free
    assert nic.receive(pfc(roce, 0xFFFF), paused_at) is True
    assert nic.receive(peer_data(0xFFFFF0, ecn=CE, ackreq=True), paused_at) is True
    cnp = codec.parse(nic.dequeue(paused_at))  # a CNP: its own class, not paused
    assert cnp.opcode == codec.CNP_OPCODE and cnp.dqpn == 0x100
    t = nic.wire_free
    assert nic.dequeue(t) is None  # the ACK and the data wait
    quantum_s = 512 / LINE
    assert nic.next_wake(t) == pytest.approx(paused_at + 0xFFFF * quantum_s)
    resume = t + 100 * quantum_s
    assert nic.dequeue(resume - 1e-12) is None
    assert nic.receive(pfc(roce, 0), resume) is True  # XON
    ack = codec.parse(nic.dequeue(resume))
    assert ack.opcode == codec.ACK_OPCODE and ack.psn == 0xFFFFF0
    data = codec.parse(nic.dequeue(nic.wire_free))
    assert data.opcode not in (codec.ACK_OPCODE, codec.CNP_OPCODE) and data.dqpn == 0x800
    results = nic.results(0.0, resume, timed_out=False)
    assert results["pfc_received"] == {"xoff": 1, "xon": 1, "pause": 0}
    assert results["paused_s"] == pytest.approx(resume - paused_at)


def test_a_pause_ends_by_itself_after_its_quanta_and_other_priorities_do_not_pause():
    nic = both_ways()
    other = (SETTINGS.roce.priority + 1) % 8
    assert nic.receive(pfc(other, 0xFFFF), 0.0) is True
    assert nic.dequeue(0.0) is not None  # not our priority
    t = nic.wire_free
    nic.receive(pfc(SETTINGS.roce.priority, 1000), t)
    end = nic.next_wake(t)
    assert end == pytest.approx(t + 1000 * 512 / LINE, rel=1e-12)
    assert nic.dequeue(end - 1e-12) is None
    assert nic.dequeue(end) is not None


# -- DCQCN -------------------------------------------------------------------------------------


def test_ce_marks_make_at_most_one_cnp_per_interval():
    nic = receiver_nic(SETTINGS, 1000)
    interval = nic.receivers[0x800].np.interval_s
    step = interval * 0.24
    cnps = []
    for k in range(21):
        t = k * step
        nic.receive(peer_data((0xFFFFF0 + k) % (1 << 24), ecn=CE if k != 4 else ECT0), t)
        while (frame := nic.dequeue(t)) is not None:
            if codec.parse(frame).opcode == codec.CNP_OPCODE:
                assert frame[15] == SETTINGS.cnp.dscp << 2  # the CNP class, not ECT
                cnps.append(k)
    # first mark at once; then the first mark at least one interval after the last CNP
    # (k = 4 is not marked, so k = 5 is the first marked one past 0 + interval)
    assert cnps == [0, 5, 10, 15, 20]
    stats = nic.results(0.0, 1.0, timed_out=False)["receivers"][0]
    assert (stats["ce_marked"], stats["cnps_sent"]) == (20, 5)


def test_no_dcqcn_no_cnps():
    nic = receiver_nic(UNPACED, 10)
    for k in range(5):
        nic.receive(peer_data((0xFFFFF0 + k) % (1 << 24), ecn=CE), k * 1e-3)
        while (frame := nic.dequeue(k * 1e-3)) is not None:
            assert codec.parse(frame).opcode == codec.ACK_OPCODE


def test_a_cnp_cuts_the_rate_and_re_times_the_pending_send():
    """At 10 Mb/s a frame's gap outlasts the time a CNP takes to cut (none in paper mode,
    up to a decrease period in firmware mode), so the cut must stretch the pending gap."""
    line = 10e6
    nic = sender_nic(SETTINGS, 100 * MTU, 1, line=line)
    nic.start(0.0)
    frame = nic.dequeue(0.0)
    flow = nic.senders[0]
    bits = len(frame) * 8
    assert flow.next_at == pytest.approx(bits / line)
    cut_at = cnp_until_cut(nic, 0.0)
    cut = flow.rp.rate(cut_at)
    assert cut < line and flow.cnps == 1 and cut_at < bits / line
    assert flow.next_at == pytest.approx(bits / cut)  # the last frame's gap at the new rate
    assert nic.dequeue(bits / line) is None  # where the old gap ended
    assert nic.dequeue(flow.next_at) is not None


def test_a_qp_cut_to_the_floor_sends_as_soon_as_its_recovering_rate_allows():
    """One frame at line rate, CNPs until the rate is at the floor, then DCQCN
    raises it. The next frame goes at the first moment at which the last frame's bits at
    the current rate have elapsed since it was sent: within one increase period of the rate
    reaching a level at which a frame fits in that period, and not ~bits / floor later as
    when the gap was fixed at send time. Only the reaction point's interface is used, so
    this holds for any DCQCN mode."""
    nic = sender_nic(SETTINGS, 100 * MTU, 1)
    nic.start(0.0)
    bits = len(nic.dequeue(0.0)) * 8
    flow = nic.senders[0]
    t, rates = 0.0, [LINE]
    while len(rates) < 3 or rates[-1] < rates[-3]:  # a CNP every 5 us until none lowers it
        nic.receive(cnp_for_sender(), t)
        end = t + 5e-6
        while (event := flow.rp.next_event(t)) is not None and event <= end:
            t = event
            nic.poll(t)
        t = end
        nic.poll(t)
        rates.append(flow.rp.rate(t))
        assert len(rates) < 200
    floor = rates[-1]
    assert flow.next_at == pytest.approx(bits / floor)  # a cut re-times too

    reference = clone(flow.rp)  # the same rate trajectory, event by event
    trajectory = [(t, reference.rate(t))]
    while len(trajectory) < 3 * 10**4:  # three rises, and a frame's gap within one period
        rises = [t1 for (_, r0), (t1, r1) in zip(trajectory, trajectory[1:]) if r1 > r0]
        if len(rises) >= 3 and bits / trajectory[-1][1] <= min(
                b - a for a, b in zip(rises, rises[1:])):
            break
        event = reference.next_event(trajectory[-1][0])
        trajectory.append((event, reference.rate(event)))
    # ideal: the first moment at which bits at the rate of that moment have elapsed since 0
    ideal = next(max(t0, bits / r) for (t0, r), (t1, _) in zip(trajectory, trajectory[1:])
                 if bits / r <= t1)
    period = min(b - a for a, b in zip(rises, rises[1:]))  # the increase period
    recovered = next(t1 for t1, r in trajectory if bits / r <= period)

    sent = None
    while sent is None:
        t = nic.next_wake(t)
        nic.poll(t)
        if nic.dequeue(t) is not None:
            sent = t
    assert sent == pytest.approx(ideal, rel=1e-9)
    assert sent <= recovered + period
    assert sent < bits / floor / 10


def test_late_credit_keeps_the_rate_of_a_late_caller_but_gives_no_burst_after_a_cut():
    """The live shell's mode: a wake-up up to one frame late loses no rate; a cut while the
    QP had nothing to send starts its new gap at the cut, not in the past."""
    nic = Nic(UNPACED, LINE, late_credit=True)
    nic.add_sender(send_spec(100 * MTU, 1), nic.headers(
        "data", src_mac=MAC_A, dst_mac=MAC_B, src_ip=IP_A, dst_ip=IP_B, sport=SPORT))
    nic.start(0.0)
    first = nic.dequeue(0.0)
    late = frame_s(first) * 1.5  # half a frame late
    second = nic.dequeue(late)
    assert nic.wire_free == pytest.approx(frame_s(first) + frame_s(second))  # as if on time
    exact = sender_nic(UNPACED, 100 * MTU, 1)
    exact.start(0.0)
    exact.dequeue(0.0)
    exact.dequeue(late)
    assert exact.wire_free == pytest.approx(late + frame_s(second))  # exact: from now

    paced = Nic(SETTINGS, LINE, late_credit=True)
    paced.add_sender(send_spec(100 * MTU, 1), paced.headers(
        "data", src_mac=MAC_A, dst_mac=MAC_B, src_ip=IP_A, dst_ip=IP_B, sport=SPORT))
    paced.start(0.0)
    bits = len(paced.dequeue(0.0)) * 8
    cut_at = cnp_until_cut(paced, 1.0)  # long after the gap of any rate the cut can give
    rate = paced.senders[0].rp.rate(cut_at)
    assert paced.senders[0].next_at == cut_at
    assert paced.dequeue(cut_at) is not None
    assert paced.senders[0].next_at == pytest.approx(cut_at + bits / rate)
    assert paced.dequeue(paced.wire_free) is None


def late_sender(window: int = 1024) -> Nic:
    nic = Nic(UNPACED, LINE, late_credit=True)
    nic.add_sender(send_spec(100 * MTU, 1, window=window), nic.headers(
        "data", src_mac=MAC_A, dst_mac=MAC_B, src_ip=IP_A, dst_ip=IP_B, sport=SPORT))
    nic.start(0.0)
    return nic


def test_late_credit_never_reaches_back_before_the_pause_ended():
    """An XON taken half a frame late: the first frame starts at the XON, not a frame
    before it, so the second cannot follow at once (two frames back to back)."""
    nic = late_sender()
    first = nic.dequeue(0.0)
    roce = SETTINGS.roce.priority
    nic.receive(pfc(roce, 0xFFFF), nic.wire_free)
    xon_at = 1e-3
    nic.receive(pfc(roce, 0), xon_at)
    late = xon_at + frame_s(first) / 2
    second = nic.dequeue(late)
    assert nic.wire_free == pytest.approx(xon_at + frame_s(second))  # started at the XON
    assert nic.dequeue(late) is None


def test_late_credit_never_reaches_back_before_the_ack_that_opened_the_window():
    nic = late_sender(window=1)
    first = nic.dequeue(0.0)
    assert nic.dequeue(1e-3) is None  # one packet in flight: the window is shut
    acked_at = 1e-3
    ack = codec.ack_frame(codec.Headers(MAC_B, MAC_A, IP_B, IP_A, dscp=SETTINGS.roce.dscp,
                                      ecn=0, sport=SPORT), 0x100, 0xFFFFF0, 1)
    assert nic.receive(ack, acked_at) is True
    second = nic.dequeue(acked_at + frame_s(first) / 2)
    assert nic.senders[0].last_sent == pytest.approx(acked_at)
    assert nic.wire_free == pytest.approx(acked_at + frame_s(second))


def test_rate_series_has_a_point_per_cut_and_per_sampling_tick():
    nic = sender_nic(SETTINGS, 100 * MTU, 1)
    nic.start(0.0)
    nic.poll(0.0)
    nic.dequeue(0.0)
    cut_at = cnp_until_cut(nic, 1e-6)
    sender = nic.senders[0]
    assert sender.rate_points() == [(0.0, LINE), (cut_at, sender.rp.rate(cut_at))]
    assert sender.rate_points()[1][1] < LINE
    nic.poll(nic.rate_sample_s / 2)
    assert len(sender.rate_points()) == 2
    nic.poll(nic.rate_sample_s)
    assert [t for t, _ in sender.rate_points()][2:] == [nic.rate_sample_s]
    assert nic.results(0.0, 1.0, False)["senders"][0]["rate_series"] == \
        [[round(t * 1e6) / 1e6, r] for t, r in sender.rate_points()]


def test_a_rate_series_keeps_its_first_points_up_to_its_share():
    nic = Nic(SETTINGS, LINE, max_rate_points=3)
    nic.add_sender(send_spec(100 * MTU, 1), nic.headers(
        "data", src_mac=MAC_A, dst_mac=MAC_B, src_ip=IP_A, dst_ip=IP_B, sport=SPORT))
    nic.start(0.0)
    ticks = [k * nic.rate_sample_s for k in range(10)]
    for now in ticks:
        nic.poll(now)
    assert [t for t, _ in nic.senders[0].rate_points()] == ticks[:3]


# -- the seam ---------------------------------------------------------------------------------


def test_receive_leaves_what_is_not_its_own_to_the_host():
    nic = both_ways()
    arp = bytes.fromhex("ffffffffffff" + MAC_B.replace(":", "") + "0806") + bytes(28)
    assert nic.receive(arp, 0.0) is False
    stranger = codec.data_frame(codec.Headers(MAC_B, MAC_A, IP_B, IP_A, dscp=0, ecn=0,
                                            sport=SPORT), 0x999, 0, 0x07, MTU, ackreq=False)
    assert nic.receive(stranger, 0.0) is False
    assert nic.receive(pfc(SETTINGS.roce.priority, 5), 0.0) is True


def test_nothing_is_sent_before_start_and_nothing_pending_means_no_wake():
    nic = sender_nic(SETTINGS, MTU, 1)
    assert nic.dequeue(0.0) is None and nic.next_wake(0.0) is None
    nic.start(2.0)
    assert nic.next_wake(2.0) == 2.0
    assert nic.dequeue(2.0) is not None


def test_an_after_flow_sends_each_message_once_the_gating_flow_delivered_one():
    nic = sender_nic(SETTINGS, MTU, 2, after="b->a")
    addresses = dict(src_mac=MAC_A, dst_mac=MAC_B, src_ip=IP_A, dst_ip=IP_B, sport=SPORT)
    nic.add_receiver(receive_spec(1, name="b->a"), nic.headers("ack", **addresses),
                     nic.headers("cnp", **addresses))
    nic.start(0.0)
    assert nic.dequeue(0.0) is not None  # the first message is posted from the start
    t = nic.wire_free
    assert nic.dequeue(t) is None
    headers = codec.Headers(MAC_B, MAC_A, IP_B, IP_A, dscp=0, ecn=0, sport=SPORT)
    nic.receive(codec.data_frame(headers, 0x800, 0xFFFFF0, 0x0A, MTU, ackreq=True,
                                reth=(0, MTU)), t)
    assert codec.parse(nic.dequeue(t)).opcode == codec.ACK_OPCODE
    assert nic.dequeue(nic.wire_free) is not None  # the second message, now posted


def test_results_keep_the_endpoints_keys_and_are_json():
    a, b = sender_nic(SETTINGS, 4 * MTU, 2), receiver_nic(SETTINGS, 2)
    end = Loop(a, b).run(until=1.0)
    for nic in (a, b):
        results = nic.results(0.0, end, timed_out=False)
        assert set(results) == RESULT_KEYS
        assert all(set(s) == SENDER_KEYS for s in results["senders"])
        assert all(set(r) == RECEIVER_KEYS for r in results["receivers"])
        assert results["time_scale"] == 1.0 and results["line_rate_bps"] == LINE
        json.dumps(results)
    assert a.results(0.0, end, False)["senders"] and b.results(0.0, end, False)["receivers"]
    assert a.complete and b.complete
    assert a.progress() == {"sent_bytes": 8 * MTU, "received_bytes": 0}
    assert b.progress() == {"sent_bytes": 0, "received_bytes": 8 * MTU}
