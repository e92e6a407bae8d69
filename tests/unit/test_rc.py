"""RC transport state machines (nic.rc): a Requester and a Responder driven against each
other through a tiny in-order wire that can drop chosen data PSNs or ACKs. Times are
injected (binary fractions, so every sum is exact)."""
from __future__ import annotations

import pytest

from rocelab.nic.rc import (OPCODES, PSN_MODULO, Reply, Requester, Responder, Segment, psn_add,
                            psn_diff)

WRAP = PSN_MODULO  # 2**24


# --------------------------------------------------------------------------- the wire


class Wire:
    """Delivers segments in order to the responder and replies in order to the requester.

    ``drop_psns``: data PSNs lost once each (the first transmission that carries them).
    ``drop_acks``: reply PSNs (kind "ack") lost once each.
    Everything the requester sent and the responder replied is recorded.
    """

    def __init__(self, req: Requester, resp: Responder, *, drop_psns=(), drop_acks=()):
        self.req, self.resp = req, resp
        self.drop_psns = list(drop_psns)
        self.drop_acks = list(drop_acks)
        self.sent: list[Segment] = []
        self.replies: list[Reply] = []  # every reply the responder made, lost or not
        self.max_outstanding = 0

    def burst(self, now: float) -> list[Segment]:
        """Everything the requester may send at ``now``."""
        out = []
        while (seg := self.req.next_segment(now)) is not None:
            out.append(seg)
            self.max_outstanding = max(self.max_outstanding, self.req.outstanding)
        self.sent += out
        return out

    def to_responder(self, segments: list[Segment]) -> list[Reply]:
        replies = []
        for seg in segments:
            if seg.psn in self.drop_psns:
                self.drop_psns.remove(seg.psn)
                continue
            reply = self.resp.on_packet(seg.psn, seg.opcode, seg.payload, seg.ackreq)
            if reply is not None:
                replies.append(reply)
        self.replies += replies
        return replies

    def to_requester(self, replies: list[Reply], now: float) -> None:
        for reply in replies:
            if reply.kind == "ack" and reply.psn in self.drop_acks:
                self.drop_acks.remove(reply.psn)
                continue
            if reply.kind == "ack":
                self.req.on_ack(reply.psn, now)
            else:
                self.req.on_nak(reply.psn, now)

    def round(self, send_at: float, reply_at: float) -> list[Segment]:
        """Send a burst at ``send_at``; its replies reach the requester at ``reply_at``."""
        segments = self.burst(send_at)
        self.to_requester(self.to_responder(segments), reply_at)
        return segments

    def run(self, *, start: float = 0.0, step: float = 0.125, limit: int = 1000) -> float:
        """Rounds until done; when nothing moves, jump to the retransmit deadline."""
        now = start
        for _ in range(limit):
            if self.req.done:
                return now
            if not self.round(now, now + step):
                deadline = self.req.deadline
                assert deadline is not None, "stuck: nothing to send and no timer"
                now = max(now + step, deadline)
                self.req.poll(now)
            else:
                now += step
        raise AssertionError("flow did not finish")


def psns(segments):
    return [s.psn for s in segments]


def make(*, size=2500, count=4, mtu=1024, op="write", window=64, rto_s=0.5, retry_limit=7,
         start_psn=0, posted=None, ack_every=16):
    req = Requester(size=size, count=count, mtu=mtu, op=op, window=window, rto_s=rto_s,
                    retry_limit=retry_limit, start_psn=start_psn, posted=posted)
    resp = Responder(start_psn=start_psn, ack_every=ack_every)
    return req, resp


# --------------------------------------------------------------------------- PSN arithmetic


def test_psn_add_and_diff_wrap_at_2_to_the_24():
    assert psn_add(WRAP - 1, 1) == 0
    assert psn_add(WRAP - 2, 3) == 1
    assert psn_add(0, -1) == WRAP - 1
    assert psn_add(5, WRAP) == 5
    assert psn_diff(0, WRAP - 1) == 1
    assert psn_diff(WRAP - 1, 0) == -1
    assert psn_diff(1, WRAP - 2) == 3
    assert psn_diff(WRAP - 2, 1) == -3
    assert psn_diff(7, 7) == 0
    # the circle's halves: [-2^23, 2^23)
    assert psn_diff(2 ** 23 - 1, 0) == 2 ** 23 - 1
    assert psn_diff(2 ** 23, 0) == -(2 ** 23)
    assert psn_diff(0, 2 ** 23) == -(2 ** 23)


# --------------------------------------------------------------------------- segmentation


@pytest.mark.parametrize("op, opcodes", [("write", [0x06, 0x07, 0x08]),
                                         ("send", [0x00, 0x01, 0x02])])
def test_a_message_is_cut_at_the_mtu_into_first_middle_last(op, opcodes):
    req, _ = make(size=2500, count=2, mtu=1024, op=op)
    segs = []
    while (seg := req.next_segment(0.0)) is not None:
        segs.append(seg)
    assert req.per_message == 3 and req.total == 6
    assert [s.opcode for s in segs] == opcodes * 2
    assert [s.payload for s in segs] == [1024, 1024, 452] * 2
    assert [s.offset for s in segs] == [0, 1024, 2048] * 2
    assert [s.message for s in segs] == [0, 0, 0, 1, 1, 1]
    assert [s.message_bytes for s in segs] == [2500] * 6
    assert psns(segs) == [0, 1, 2, 3, 4, 5]
    assert [s.ackreq for s in segs] == [False, False, True] * 2
    assert not any(s.retransmit for s in segs)
    assert req.stats.packets_sent == 6 and req.stats.bytes_sent == 5000
    assert req.stats.retransmitted == 0


@pytest.mark.parametrize("op, opcode", [("write", 0x0A), ("send", 0x04)])
@pytest.mark.parametrize("size", [1, 1000, 1024])
def test_a_message_within_the_mtu_is_one_only_packet(op, opcode, size):
    req, _ = make(size=size, count=3, mtu=1024, op=op, start_psn=100)
    segs = [req.next_segment(0.0) for _ in range(3)]
    assert req.next_segment(0.0) is None
    assert [s.opcode for s in segs] == [opcode] * 3
    assert [s.payload for s in segs] == [size] * 3
    assert [s.offset for s in segs] == [0, 0, 0]
    assert [s.message for s in segs] == [0, 1, 2]
    assert psns(segs) == [100, 101, 102]
    assert all(s.ackreq for s in segs)


def test_a_message_one_byte_over_the_mtu_takes_two_packets():
    req, _ = make(size=1025, count=1, mtu=1024)
    segs = [req.next_segment(0.0), req.next_segment(0.0)]
    assert req.next_segment(0.0) is None
    assert [(s.opcode, s.payload, s.offset) for s in segs] == [(0x06, 1024, 0), (0x08, 1, 1024)]


def test_opcode_table():
    assert OPCODES == {
        ("send", "first"): 0x00, ("send", "middle"): 0x01, ("send", "last"): 0x02,
        ("send", "only"): 0x04, ("write", "first"): 0x06, ("write", "middle"): 0x07,
        ("write", "last"): 0x08, ("write", "only"): 0x0A,
    }


def test_psns_wrap_around_2_to_the_24_and_the_flow_completes():
    start = WRAP - 2
    req, resp = make(size=2500, count=2, start_psn=start)
    wire = Wire(req, resp)
    wire.run()
    assert psns(wire.sent) == [WRAP - 2, WRAP - 1, 0, 1, 2, 3]
    assert [(r.kind, r.psn, r.msn) for r in wire.replies] == [("ack", 0, 1), ("ack", 3, 2)]
    assert req.done and req.failed is None
    assert req.stats.messages_done == 2 and req.stats.bytes_acked == 5000
    assert resp.epsn == 4 and resp.stats.messages == 2 and resp.stats.bytes == 5000


def test_start_psn_is_taken_modulo_2_to_the_24():
    req, resp = make(size=100, count=1, start_psn=WRAP + 5)
    assert req.next_segment(0.0).psn == 5
    assert resp.epsn == 5


@pytest.mark.parametrize("kwargs", [dict(size=0), dict(count=-1), dict(mtu=0), dict(window=0),
                                    dict(rto_s=0), dict(retry_limit=-1)])
def test_bad_requester_parameters_are_refused(kwargs):
    with pytest.raises(ValueError):
        make(**kwargs)


def test_bad_ack_every_is_refused():
    with pytest.raises(ValueError):
        Responder(ack_every=0)


# --------------------------------------------------------------------------- window


def test_the_window_limits_outstanding_packets_and_its_edge_asks_for_an_ack():
    req, resp = make(size=2500, count=3, window=4)
    wire = Wire(req, resp)
    first = wire.burst(0.0)
    assert psns(first) == [0, 1, 2, 3]
    assert req.outstanding == 4 and req.next_segment(0.0) is None
    # ackreq: message end (PSN 2) and the window's last slot (PSN 3)
    assert [s.ackreq for s in first] == [False, False, True, True]
    replies = wire.to_responder(first)
    assert [(r.kind, r.psn, r.msn) for r in replies] == [("ack", 2, 1), ("ack", 3, 1)]
    wire.to_requester(replies, 0.125)
    assert req.una == 4 and req.outstanding == 0
    second = wire.burst(0.25)
    assert psns(second) == [4, 5, 6, 7]
    assert [s.ackreq for s in second] == [False, True, False, True]
    wire.to_requester(wire.to_responder(second), 0.375)
    third = wire.burst(0.5)
    assert psns(third) == [8] and third[0].ackreq
    wire.to_requester(wire.to_responder(third), 0.625)
    assert req.done and wire.max_outstanding == 4
    assert req.stats.completion_s == [0.125, 0.375 - 0.0, 0.625 - 0.25]
    assert resp.stats.messages == 3 and resp.stats.bytes == 7500


def test_a_partial_ack_opens_the_window_by_as_much():
    req, resp = make(size=100, count=10, window=3, ack_every=100)
    assert psns([req.next_segment(0.0) for _ in range(3)]) == [0, 1, 2]
    assert req.next_segment(0.0) is None
    req.on_ack(0, 0.125)
    seg = req.next_segment(0.125)
    assert seg.psn == 3 and seg.ackreq  # only packet, and the window is full again
    assert req.next_segment(0.125) is None and req.outstanding == 3


@pytest.mark.parametrize("window", [1, 2, 5, 7])
def test_never_more_than_window_outstanding_over_a_whole_flow(window):
    req, resp = make(size=2500, count=5, window=window, ack_every=3)
    wire = Wire(req, resp)
    wire.run()
    assert req.done and wire.max_outstanding == window
    assert resp.stats.messages == 5 and resp.stats.bytes == 12500
    assert resp.stats.duplicates == 0 and req.stats.retransmitted == 0
    # every packet that fills the window asks for an ACK, so nothing stalls on a timer
    assert req.stats.timeouts == 0


# --------------------------------------------------------------------------- post()


def test_posted_messages_gate_what_is_sent():
    req, resp = make(size=2500, count=3, posted=1)
    wire = Wire(req, resp)
    assert psns(wire.burst(0.0)) == [0, 1, 2]
    assert req.next_segment(0.0) is None and not req.done
    wire.to_requester(wire.to_responder(wire.sent), 0.125)
    assert req.una == 3 and not req.done
    assert wire.burst(0.25) == []  # acknowledged, but message 1 is not posted
    req.post(1)
    assert psns(wire.burst(0.25)) == [3, 4, 5]
    assert wire.burst(0.25) == []
    req.post(5)  # more than remain: capped at count
    assert req.posted == 3
    assert psns(wire.burst(0.25)) == [6, 7, 8]


def test_posted_zero_sends_nothing():
    req, _ = make(size=100, count=2, posted=0)
    assert req.next_segment(0.0) is None and req.deadline is None
    req.post(1)
    assert req.next_segment(0.0).psn == 0
    assert req.next_segment(0.0) is None


# --------------------------------------------------------------------------- loss: NAK


def test_a_dropped_packet_is_naked_once_and_resent_go_back_n():
    req, resp = make(size=2500, count=4, window=64)
    wire = Wire(req, resp, drop_psns=[4])
    first = wire.burst(0.0)
    assert psns(first) == list(range(12))
    replies = wire.to_responder(first)
    # ACK of the first message; PSN 4 lost: 5 is NAKed, 6..11 only counted
    assert [(r.kind, r.psn, r.msn) for r in replies] == [("ack", 2, 1), ("nak", 4, 1)]
    assert resp.stats.naks_sent == 1 and resp.stats.out_of_sequence == 7
    assert resp.epsn == 4 and resp.nak_sent
    wire.to_requester(replies, 0.125)
    assert req.stats.naks_received == 1 and req.stats.acks_received == 1
    assert req.una == 4 and req.nxt == 4  # PSN 3 acknowledged by the NAK
    second = wire.burst(0.25)
    assert psns(second) == list(range(4, 12))  # exactly from the missing PSN
    assert all(s.retransmit for s in second)
    assert req.stats.retransmitted == 8 and req.stats.packets_sent == 20
    wire.to_requester(wire.to_responder(second), 0.375)
    assert req.done and req.failed is None
    assert resp.stats.messages == 4 and resp.stats.bytes == 2500 * 4
    assert resp.stats.packets == 19 and resp.stats.duplicates == 0  # 20 sent, 1 lost
    assert resp.stats.naks_sent == 1 and not resp.nak_sent
    assert req.stats.messages_done == 4 and req.stats.bytes_acked == 10000
    assert req.stats.completion_s == [0.125, 0.375, 0.375, 0.375]
    assert req.stats.timeouts == 0


@pytest.mark.parametrize("op", ["write", "send"])
@pytest.mark.parametrize("drop", [[0], [5], [13], [1, 7], [3, 4, 5], [14]])
def test_every_message_is_delivered_exactly_once_whatever_is_dropped(op, drop):
    req, resp = make(size=2500, count=5, op=op, window=6, ack_every=2)
    wire = Wire(req, resp, drop_psns=drop)
    wire.run()
    assert req.done and req.failed is None
    assert resp.stats.messages == 5 and resp.stats.bytes == 12500
    assert req.stats.messages_done == 5 and req.stats.bytes_acked == 12500
    assert wire.max_outstanding <= 6
    assert resp.stats.packets == req.stats.packets_sent - len(drop)
    assert req.stats.retransmitted == req.stats.packets_sent - 15
    assert req.stats.retransmitted >= len(drop)
    assert resp.epsn == 15


def test_go_back_n_with_a_window_resends_from_the_hole():
    req, resp = make(size=100, count=8, window=4, ack_every=100)
    wire = Wire(req, resp, drop_psns=[1])
    first = wire.burst(0.0)
    assert psns(first) == [0, 1, 2, 3]
    replies = wire.to_responder(first)
    assert [(r.kind, r.psn) for r in replies] == [("ack", 0), ("nak", 1)]
    wire.to_requester(replies, 0.125)
    second = wire.burst(0.25)
    assert psns(second) == [1, 2, 3, 4]
    assert [s.retransmit for s in second] == [True, True, True, False]
    assert req.stats.retransmitted == 3


def test_a_lost_nak_is_recovered_by_the_timer():
    req, resp = make(size=100, count=4, window=64, rto_s=1.0, ack_every=100)
    wire = Wire(req, resp, drop_psns=[1])
    segs = wire.burst(0.0)
    replies = wire.to_responder(segs)
    assert [(r.kind, r.psn) for r in replies] == [("ack", 0), ("nak", 1)]
    wire.to_requester(replies[:1], 0.125)  # the NAK is lost
    assert req.una == 1 and req.deadline == 1.125
    assert req.next_segment(0.125) is None  # all sent: only the timer can help
    # the responder does not NAK the same gap again
    assert resp.on_packet(3, 0x0A, 100, True) is None and resp.stats.naks_sent == 1
    assert not req.poll(1.0) and req.poll(1.125)
    assert psns(wire.burst(1.125)) == [1, 2, 3]


# --------------------------------------------------------------------------- loss: ACK


def test_a_dropped_last_ack_is_recovered_by_timeout_and_duplicates_are_reacked():
    req, resp = make(size=2500, count=2, rto_s=0.5)
    wire = Wire(req, resp, drop_acks=[5])
    first = wire.burst(0.0)
    assert psns(first) == [0, 1, 2, 3, 4, 5]
    assert req.deadline == 0.5
    wire.to_requester(wire.to_responder(first), 0.125)
    assert [(r.kind, r.psn, r.msn) for r in wire.replies] == [("ack", 2, 1), ("ack", 5, 2)]
    assert req.una == 3 and not req.done
    assert req.deadline == 0.625  # restarted by the progress at 0.125
    assert wire.burst(0.25) == []  # nothing more to send
    assert not req.poll(0.25)
    assert not req.poll(0.624)
    assert req.stats.timeouts == 0
    assert req.poll(0.625)
    assert req.stats.timeouts == 1 and req.retries == 1
    assert req.nxt == req.una == 3 and req.deadline == 1.125
    resent = wire.burst(0.625)
    assert psns(resent) == [3, 4, 5] and all(s.retransmit for s in resent)
    assert [s.ackreq for s in resent] == [False, False, True]
    replies = wire.to_responder(resent)
    # each duplicate is re-ACKed with the last PSN received
    assert [(r.kind, r.psn, r.msn) for r in replies] == [("ack", 5, 2)] * 3
    assert resp.stats.duplicates == 3 and resp.stats.messages == 2
    assert resp.stats.bytes == 5000 and resp.stats.packets == 9
    wire.to_requester(replies, 0.75)
    assert req.done and req.failed is None and req.deadline is None and req.retries == 0
    assert req.stats.acks_received == 4  # 1 + 3 duplicates' ACKs
    assert req.stats.retransmitted == 3 and req.stats.packets_sent == 9
    assert req.stats.completion_s == [0.125, 0.75]
    assert not req.poll(10.0)  # done: the timer never fires again


def test_the_coalescing_timer_acks_a_slow_qp_before_its_retransmit_timer():
    """A rate-limited QP sends one packet at a time; waiting for the coalescing count
    would let the requester's timer fire although nothing was lost."""
    req, _ = make(size=100 * 1024, count=1, rto_s=1.0)
    resp = Responder(ack_every=16, ack_delay_s=0.25)
    first = req.next_segment(0.0)
    assert not first.ackreq and resp.on_packet(first.psn, first.opcode, first.payload,
                                               first.ackreq, 0.0) is None
    second = req.next_segment(0.1)
    assert resp.on_packet(second.psn, second.opcode, second.payload, second.ackreq, 0.1) \
        is None
    assert resp.next_timer() == 0.25  # from the first packet not yet acknowledged
    assert resp.poll(0.249) is None
    reply = resp.poll(0.25)
    assert (reply.kind, reply.psn) == ("ack", 1) and resp.next_timer() is None
    req.on_ack(reply.psn, 0.25)
    assert req.una == 2 and req.deadline is None
    assert not req.poll(1.0)  # the retransmit timer never fires
    assert resp.poll(10.0) is None  # nothing waiting, nothing sent


def test_without_a_delay_the_responder_only_counts():
    resp = Responder(ack_every=16)
    assert resp.on_packet(0, 0x06, 1024, False, 0.0) is None
    assert resp.next_timer() is None and resp.poll(100.0) is None


def test_a_late_ack_after_a_timeout_moves_the_requester_on():
    req, resp = make(size=100, count=3, rto_s=0.5, ack_every=100)
    segs = [req.next_segment(0.0) for _ in range(3)]
    assert req.poll(0.5)
    assert req.nxt == 0
    req.on_ack(segs[-1].psn, 0.5)  # the ACK was only slow
    assert req.done and req.nxt == 3 and req.stats.completion_s == [0.5, 0.5, 0.5]


# --------------------------------------------------------------------------- retry limit


def test_after_retry_limit_timeouts_without_progress_the_qp_fails():
    req, resp = make(size=100, count=2, rto_s=1.0, retry_limit=2, start_psn=777)
    sent = []
    now = 0.0
    sent += [req.next_segment(now), req.next_segment(now)]
    assert req.deadline == 1.0
    for k in range(1, 3):  # timeouts 1 and 2: go back and resend
        now = float(k)
        assert not req.poll(now - 0.5)
        assert req.poll(now) and req.failed is None and not req.done
        seg = req.next_segment(now)
        assert seg.psn == 777 and seg.retransmit
        sent += [seg, req.next_segment(now)]
    assert req.poll(3.0)  # the third (retry_limit + 1) timeout
    assert req.done and req.failed is not None
    assert "PSN 777" in req.failed and "retry limit: 2" in req.failed
    assert req.stats.timeouts == 3 and req.retries == 3
    assert req.deadline is None
    assert req.next_segment(3.0) is None and not req.can_send()
    assert not req.poll(100.0) and req.stats.timeouts == 3
    assert [s.psn for s in sent] == [777, 778] * 3
    assert req.stats.packets_sent == 6 and req.stats.retransmitted == 4
    assert req.stats.messages_done == 0 and req.stats.completion_s == []


def test_retry_limit_zero_fails_on_the_first_timeout():
    req, _ = make(size=100, count=1, rto_s=1.0, retry_limit=0)
    req.next_segment(0.0)
    assert req.poll(1.0) and req.failed is not None and "PSN 0" in req.failed


def test_progress_resets_the_retry_count():
    req, resp = make(size=100, count=3, rto_s=1.0, retry_limit=1, ack_every=100)
    [req.next_segment(0.0) for _ in range(3)]
    assert req.poll(1.0) and req.retries == 1
    [req.next_segment(1.0) for _ in range(3)]
    req.on_ack(0, 1.5)  # progress
    assert req.retries == 0 and req.deadline == 2.5
    assert req.poll(2.5) and req.failed is None and req.retries == 1
    assert req.poll(3.5) and req.failed is not None and "PSN 1" in req.failed


def test_every_packet_lost_fails_the_flow_on_the_wire():
    req, resp = make(size=2500, count=2, rto_s=0.5, retry_limit=3)
    wire = Wire(req, resp, drop_psns=list(range(6)) * 10)
    wire.run()
    assert req.failed is not None and "PSN 0" in req.failed
    assert req.stats.timeouts == 4
    assert req.stats.packets_sent == 6 * 4  # first try + 3 retries
    assert resp.stats.packets == 0
    assert wire.burst(100.0) == []


# --------------------------------------------------------------------------- stale NAK


def test_a_nak_behind_the_acknowledged_edge_is_stale_and_ignored():
    req, _ = make(size=100, count=10, ack_every=100)
    [req.next_segment(0.0) for _ in range(9)]
    req.on_ack(5, 0.125)
    assert req.una == 6 and req.nxt == 9
    deadline = req.deadline
    req.on_nak(3, 0.25)
    req.on_nak(5, 0.25)  # just behind the edge
    assert req.stats.naks_received == 2
    assert req.una == 6 and req.nxt == 9 and req.deadline == deadline
    assert req.next_segment(0.25).psn == 9
    req.on_nak(6, 0.25)  # at the edge: a real NAK, go back to 6
    assert req.una == 6 and req.nxt == 6
    assert req.next_segment(0.25).psn == 6


def test_a_stale_nak_across_the_wrap_is_ignored():
    start = WRAP - 3
    req, _ = make(size=100, count=6, start_psn=start, ack_every=100)
    sent = [req.next_segment(0.0).psn for _ in range(6)]
    assert sent == [WRAP - 3, WRAP - 2, WRAP - 1, 0, 1, 2]
    req.on_ack(0, 0.125)
    assert req.una == 4
    req.on_nak(WRAP - 1, 0.25)  # behind the edge, on the other side of the wrap
    assert req.una == 4 and req.nxt == 6
    req.on_nak(1, 0.25)
    assert req.una == 4 and req.nxt == 4


# --------------------------------------------------------------------------- responder


def test_acks_are_coalesced_every_ack_every_in_order_packets():
    resp = Responder(ack_every=4)
    replies = [resp.on_packet(psn, 0x07, 1024, False) for psn in range(10)]
    assert [(i, r.kind, r.psn) for i, r in enumerate(replies) if r] == [(3, "ack", 3),
                                                                      (7, "ack", 7)]
    assert resp.stats.acks_sent == 2 and resp.stats.bytes == 10240
    assert resp.stats.messages == 0 and resp.unacked == 2


def test_ackreq_forces_an_ack_and_restarts_the_count():
    resp = Responder(ack_every=4)
    out = [resp.on_packet(0, 0x07, 1, False), resp.on_packet(1, 0x08, 1, True)]
    out += [resp.on_packet(psn, 0x07, 1, False) for psn in range(2, 6)]
    assert [(r.kind, r.psn, r.msn) if r else None for r in out] == [
        None, ("ack", 1, 1), None, None, None, ("ack", 5, 1)]


def test_a_duplicate_is_acked_with_epsn_minus_one():
    resp = Responder(ack_every=4, start_psn=10)
    for psn in range(10, 16):
        resp.on_packet(psn, 0x07, 8, False)
    assert resp.epsn == 16
    reply = resp.on_packet(12, 0x07, 8, False)
    assert reply == Reply("ack", 15, 0)
    assert resp.stats.duplicates == 1 and resp.stats.bytes == 48 and resp.stats.packets == 7
    assert resp.epsn == 16


def test_a_duplicate_just_past_the_wrap_is_acked_before_it():
    resp = Responder(start_psn=WRAP - 1, ack_every=100)
    resp.on_packet(WRAP - 1, 0x0A, 8, True)
    resp.on_packet(0, 0x0A, 8, True)
    assert resp.epsn == 1
    assert resp.on_packet(WRAP - 1, 0x0A, 8, True) == Reply("ack", 0, 2)
    assert resp.stats.duplicates == 1


def test_one_nak_per_gap_and_a_new_gap_gets_a_new_nak():
    resp = Responder(ack_every=100)
    assert resp.on_packet(0, 0x0A, 1, True) == Reply("ack", 0, 1)
    assert resp.on_packet(2, 0x0A, 1, True) == Reply("nak", 1, 1)
    assert resp.on_packet(3, 0x0A, 1, True) is None
    assert resp.on_packet(4, 0x0A, 1, True) is None
    assert resp.stats.out_of_sequence == 3 and resp.stats.naks_sent == 1
    assert resp.on_packet(1, 0x0A, 1, True) == Reply("ack", 1, 2)  # the hole filled
    assert resp.on_packet(3, 0x0A, 1, True) == Reply("nak", 2, 2)  # a new gap
    assert resp.stats.naks_sent == 2 and resp.stats.messages == 2


def test_msn_counts_completed_messages_only():
    resp = Responder(ack_every=1)
    got = [resp.on_packet(psn, op, 10, False)
           for psn, op in enumerate([0x00, 0x01, 0x02, 0x04, 0x06, 0x08, 0x0A])]
    assert [r.msn for r in got] == [0, 0, 1, 2, 2, 3, 4]


# --------------------------------------------------------------------------- completion times


def test_completion_times_are_ack_time_minus_first_transmission():
    req, resp = make(size=2500, count=3, window=64, rto_s=4.0, ack_every=100)
    wire = Wire(req, resp)
    # message 0 at 0.0, message 1 at 0.25, message 2's first packet at 0.5, rest at 0.75
    segs = [req.next_segment(0.0) for _ in range(3)]
    segs += [req.next_segment(0.25) for _ in range(3)]
    segs += [req.next_segment(0.5)]
    segs += [req.next_segment(0.75) for _ in range(2)]
    replies = wire.to_responder(segs)
    assert [r.psn for r in replies] == [2, 5, 8]
    req.on_ack(2, 1.0)
    assert req.stats.completion_s == [1.0]
    req.on_ack(7, 1.5)  # mid-message 2: completes message 1 only
    assert req.stats.completion_s == [1.0, 1.25]
    req.on_ack(8, 2.25)
    assert req.stats.completion_s == [1.0, 1.25, 1.75]
    assert req.done and req.first_sent == {}


def test_completion_time_counts_from_the_first_transmission_not_the_retransmission():
    req, resp = make(size=2500, count=1, rto_s=0.5)
    wire = Wire(req, resp, drop_psns=[0])
    wire.to_requester(wire.to_responder(wire.burst(0.0)), 0.125)
    assert [(r.kind, r.psn) for r in wire.replies] == [("nak", 0)]
    wire.to_requester(wire.to_responder(wire.burst(0.25)), 0.375)
    assert req.done and req.stats.completion_s == [0.375]
