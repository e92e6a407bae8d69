"""A host's RoCE NIC as one pure object: the QPs it sends and receives on one port, and
everything between them and the wire: one NIC model, driven by two shells.

The live endpoint (``nic.endpoint``: an AF_PACKET socket and a select loop) and the
virtual-time host both drive the same ``Nic``; nothing here reads a clock, sleeps or touches
a socket. Time is ``now`` in float seconds on the caller's clock, the same clock for every
call. The seam has the shape of the switch model's (``fabric.model``) and of HPCC's
``RdmaHw``:

- ``receive(frame, now)``: a frame from the wire. PFC/PAUSE sets the pause timer; RoCE data
  runs the RC responder and the DCQCN notification point (CNPs and ACKs are queued);
  ACK/NAK drive the requester; a CNP cuts the reaction point's rate.
- ``dequeue(now)``: the next frame for the wire. CNPs first (their own class, never held by
  a pause of the RoCE priority), then ACK/NAKs (held while the RoCE priority is paused),
  then the data of the QP that has waited longest among those due. The port sends one frame
  at a time at line rate, each QP at its DCQCN rate.
- ``poll(now)``: the timers (RC retransmit, ACK coalescing, DCQCN, rate samples), and
  ``next_wake(now)``: when either has something to do. A caller that wakes at those times,
  and after each ``receive``, misses nothing; one that calls more often loses nothing.

Pacing follows the rate. A QP keeps the start and the size of the frame it
sent last; ``next_at = last_sent + bits / rate``. When the rate changes (a cut, at the CNP
or at the reaction point's next decrease check, or an increase: the NIC wakes at each
``ReactionPoint.next_event``) the pending gap is re-timed at the new rate from the last
start, as HPCC's ``ChangeRate`` does, so a QP cut to the floor sends as soon as its
recovered rate allows instead of waiting out the floor's gap. A re-timed ``next_at`` in
the past means "may send now", never a burst: the next frame starts no earlier than
``now``. A cut also never sets ``next_at`` before ``now``: with ``late_credit`` (below) a
past ``next_at`` would let the first frame at the lower rate count as started before the
cut.

Timing of frames. By default the NIC is exact, for a virtual-time caller that calls at the
times ``next_wake`` gives: a frame starts at ``now``. A live event loop wakes late by a
scheduler's jitter, which at emulated rates (a frame takes ~270 us at S = 3000) would cost
rate; with ``late_credit`` a frame may count as started up to one frame time before ``now``
(on the port and on its QP), so a late wake-up does not lose rate, and a much later one
restarts the timeline rather than bursting to catch up. The credit never reaches back
before the frame could have been sent at all: not before its priority's pause ended (an
XON, or the quanta run out), nor before the ACK, NAK or post that let a blocked QP send
again, nor (an ACK or NAK) before the data it answers arrived.
Without that floor, the first frame after every pause would count as sent a frame time
before the XON, so the next would leave at once: two frames back to back where the wire
allows one.
"""
from __future__ import annotations

import itertools
import math
from collections import deque
from typing import Literal

import cython

from .settings import NicSettings
from . import codec
from .codec import ACK_OPCODE, CNP_OPCODE, Incoming, ack_frame, cnp_frame, data_frame, parse
from .dcqcn import NotificationPoint, ReactionPoint, reaction_point
from .dcqcn_params import DcqcnParams
from .pause import PauseTimer
from .qp import ReceiveFlow, SendFlow
from .rc import DATA_OPCODES, RETH_OPCODES, Reply, Requester, Responder, Segment
from .ready import ArrayReady, TupleReady

ECT0 = 2
CE = 3
RATE_SAMPLE_S = 0.005  # seconds between points of a flow's rate series
MAX_RATE_POINTS = 4000
NAK_SYNDROME = 0b011  # AETH syndrome bits 31..29 of a NAK

FrameKind = Literal["data", "ack", "cnp"]

# which deadline of its flow a timer entry looks at: the entry's token in ``Nic._timers``
ACK_TIMER = cython.declare(cython.longlong, 0)  # a responder's ACK coalescing
RC_TIMER = cython.declare(cython.longlong, 1)  # a requester's retransmit timer
RP_TIMER = cython.declare(cython.longlong, 2)  # a requester's DCQCN reaction point
NEVER = cython.declare(cython.double, math.inf)  # no wake: a C double when compiled


@cython.cfunc
@cython.inline
@cython.returns(cython.double)
@cython.locals(kind=cython.longlong, sender=SendFlow)
def _armed(flow: SendFlow | ReceiveFlow, kind: int) -> float:
    """The deadline the timer heap holds for ``flow``'s ``kind`` timer (NEVER: none), a C
    double for the callers, which compare it with the heap's own."""
    if kind == ACK_TIMER:
        due = cython.cast(ReceiveFlow, flow).ack_timer
    else:
        sender = cython.cast(SendFlow, flow)
        due = sender.rc_timer if kind == RC_TIMER else sender.rp_timer
    return NEVER if due is None else due


@cython.cfunc
@cython.inline
@cython.locals(kind=cython.longlong, sender=SendFlow)
def _set_armed(flow: SendFlow | ReceiveFlow, kind: int, due: float | None) -> None:
    if kind == ACK_TIMER:
        cython.cast(ReceiveFlow, flow).ack_timer = due
        return
    sender = cython.cast(SendFlow, flow)
    if kind == RC_TIMER:
        sender.rc_timer = due
    else:
        sender.rp_timer = due


class Nic:
    """One port's RoCE NIC: requester and responder QPs, pacing, PFC, DCQCN, RC.

    Work per frame does not grow with the number of QPs: the QPs that may send wait in a
    heap by ``next_at``, and the RC, ACK-coalescing and DCQCN timers in another, both
    lazily cleaned (an entry whose flow moved on is dropped when it reaches the top). A
    timer entry may be early (its deadline moved later since): it then only re-arms.
    """

    def __init__(self, settings: NicSettings, line_bps: float, time_scale: float = 1.0,
                 rate_sample_s: float = RATE_SAMPLE_S, *, late_credit: bool = False,
                 max_rate_points: int = MAX_RATE_POINTS) -> None:
        """``line_bps`` is the port's emulated rate (speed / S); DCQCN's parameters are the
        settings' for the real speed, scaled by S. ``late_credit``: see the module."""
        if line_bps <= 0 or time_scale <= 0 or rate_sample_s <= 0:
            raise ValueError("line_bps, time_scale and rate_sample_s must be positive")
        self.settings = settings
        self.line_bps = line_bps
        self.time_scale = time_scale
        self.rate_sample_s = rate_sample_s
        self.max_rate_points = max_rate_points  # per sender: a fabric's QPs share a budget
        self.late_credit = late_credit
        dcqcn = settings.dcqcn
        self.params: DcqcnParams | None = (
            dcqcn.to_params(line_bps * time_scale).scaled(time_scale) if dcqcn.enabled
            else None)
        self.pause = PauseTimer(settings.roce.priority, line_bps)
        self.senders: list[SendFlow] = []
        self._sampling: list[SendFlow] = []  # senders whose rate series may still grow
        self.receivers: dict[int, ReceiveFlow] = {}
        self.by_qpn: dict[int, SendFlow] = {}
        self.gated: dict[str, list[SendFlow]] = {}  # receive flow name -> senders it posts
        self.wire_free = 0.0
        self.started = False
        self.cnp_queue: deque[bytes] = deque()
        # ACK/NAKs, each with when it was made: the RoCE class, held by a pause
        self.ack_queue: deque[tuple[float, bytes]] = deque()
        # (next_at, index, token) -> SendFlow, in the form this build runs fastest
        self._ready = ArrayReady() if cython.compiled else TupleReady()
        # (deadline, sequence, ACK_TIMER/RC_TIMER/RP_TIMER) -> its flow, the same way
        self._timers = ArrayReady() if cython.compiled else TupleReady()
        self._seq = itertools.count(1)  # tokens and timer tie-breaks
        self._unfinished = 0  # flows not yet done
        self._next_sample = 0.0

    # --- set-up --------------------------------------------------------------------------

    def marking(self, kind: FrameKind) -> tuple[int, int]:
        """(DSCP, ECN) this NIC puts on a kind of frame: data and ACK/NAKs in the RoCE
        class, ECT(0) when ECN is on (a QP's traffic class goes on every packet it sends,
        as the kernel's Soft-RoCE stamps it: a Not-ECT ACK would be dropped, not marked, by
        the WRED of a lossless queue that drops); CNPs in their own class, Not-ECT."""
        roce = self.settings.roce
        if kind == "cnp":
            return self.settings.cnp.dscp, 0
        return roce.dscp, ECT0 if roce.ecn else 0

    def headers(self, kind: FrameKind, *, src_mac: str, dst_mac: str, src_ip: str,
                dst_ip: str, sport: int) -> codec.Headers:
        """The ``codec.Headers`` for one direction of one QP, marked as ``marking`` says."""
        dscp, ecn = self.marking(kind)
        return codec.Headers(src_mac, dst_mac, src_ip, dst_ip, dscp=dscp, ecn=ecn, sport=sport)

    def _reaction_point(self) -> ReactionPoint | None:
        """A requester's DCQCN rate control (None with DCQCN off): the one place that picks
        the implementation, so another mode with the same interface plugs in here."""
        return reaction_point(self.params) if self.params else None

    def _notification_point(self) -> NotificationPoint | None:
        return NotificationPoint(self.params) if self.params else None

    def add_sender(self, flow: dict, headers: codec.Headers) -> SendFlow:
        """A requester QP from one entry of a spec's ``send`` list (``traffic.patterns``);
        ``headers`` carry its data frames (``headers("data", ...)``)."""
        rc = Requester(size=flow["size"], count=flow["count"], mtu=self.settings.roce.mtu,
                       op=flow.get("op", "write"), window=flow.get("window", 64),
                       rto_s=flow["rto_s"], start_psn=flow.get("start_psn", 0),
                       posted=1 if flow.get("after") else None)
        sender = SendFlow(flow["name"], flow["qpn"], flow["peer_qpn"], rc, headers,
                          self._reaction_point(), self.line_bps,
                          after=flow.get("after"), index=len(self.senders),
                          paced_bps=self.line_bps)
        self.senders.append(sender)
        self._sampling.append(sender)
        self.by_qpn[sender.qpn] = sender
        if sender.after is not None:
            self.gated.setdefault(sender.after, []).append(sender)
        self._unfinished += not rc.done
        self._offer(sender)  # only once started; a QP added later may send at once
        return sender

    def add_receiver(self, flow: dict, ack_headers: codec.Headers,
                     cnp_headers: codec.Headers) -> ReceiveFlow:
        """A responder QP from one entry of a spec's ``receive`` list."""
        receiver = ReceiveFlow(
            flow["name"], flow["qpn"], flow["peer_qpn"],
            Responder(start_psn=flow.get("start_psn", 0), ack_every=flow.get("ack_every", 16),
                      ack_delay_s=flow["ack_delay_s"]),
            flow["count"], ack_headers, cnp_headers,
            self._notification_point())
        self.receivers[receiver.qpn] = receiver
        self._unfinished += receiver.count > 0
        return receiver

    def start(self, now: float) -> None:
        """Let the requesters send from ``now`` on (the patterns' common ``go``)."""
        self.started = True
        self._next_sample = now
        for flow in self.senders:
            flow.next_at = now
            self._offer(flow)

    # --- the wire ------------------------------------------------------------------------

    @cython.locals(sender=SendFlow, receiver=ReceiveFlow, incoming=Incoming)
    def receive(self, frame: bytes, now: float) -> bool:
        """A frame from the wire at ``now``; True if the NIC consumed it (PFC or PAUSE, or
        RoCE for one of its QPs), False for the host's own stack. What it did may make
        ``next_wake`` earlier (an XON, an ACK that opens the window, a CNP to send)."""
        if self.pause.on_frame(frame, now):
            return True
        incoming = parse(frame)
        if incoming is None:
            return False
        if incoming.opcode in DATA_OPCODES:
            receiver = self.receivers.get(incoming.dqpn)
            if receiver is None:
                return False
            self._on_data(receiver, incoming, now)
            return True
        sender = self.by_qpn.get(incoming.dqpn)
        if sender is None:
            return False
        if incoming.opcode == CNP_OPCODE:
            sender.cnps += 1
            if sender.rp is not None:
                sender.rp.on_cnp(now)
                self._follow_rate(sender, now)
                self._arm_rp(sender, now)
        elif incoming.opcode == ACK_OPCODE and incoming.aeth is not None:
            if incoming.aeth >> 29 == NAK_SYNDROME:
                sender.rc.on_nak(incoming.psn, now)
            else:
                sender.rc.on_ack(incoming.psn, now)
            self._after_rc(sender, now)
        else:
            return False
        return True

    @cython.locals(flow=ReceiveFlow, rc=Responder, sender=SendFlow, ce=cython.bint,
                   before=cython.longlong, delivered=cython.longlong)
    def _on_data(self, flow: ReceiveFlow, incoming: Incoming, now: float) -> None:
        ce = incoming.ecn == CE
        flow.ce_marked += ce
        if flow.np is not None and flow.np.on_packet(now, ce):
            self.cnp_queue.append(cnp_frame(flow.cnp_headers, flow.peer_qpn))
        rc = flow.rc
        before = rc.stats.messages
        self._reply(flow, now, rc.on_packet(incoming.psn, incoming.opcode, incoming.payload,
                                       incoming.ackreq, now))
        self._arm(flow, ACK_TIMER, rc.next_timer())
        delivered = rc.stats.messages - before
        if delivered:
            if rc.stats.messages >= flow.count and flow.finished is None:
                flow.finished = now
                self._unfinished -= 1
            for sender in self.gated.get(flow.name, ()):
                sender.rc.post(delivered)
                if not sender.queued:
                    sender.unblocked_at = now
                    self._offer(sender)

    def _reply(self, flow: ReceiveFlow, now: float, reply: Reply | None) -> None:
        if reply is not None:
            self.ack_queue.append((now, ack_frame(  # positional: a C call when compiled
                flow.ack_headers, flow.peer_qpn, reply.psn, reply.msn, reply.kind == "nak")))

    @cython.locals(flow=SendFlow, rc=Requester, segment=Segment, now=cython.double,
                   bits=cython.Py_ssize_t, rate=cython.double, start=cython.double)
    def dequeue(self, now: float) -> bytes | None:
        """The next frame to put on the wire at ``now``, or None (the wire busy, the RoCE
        priority paused, or nothing due). Call until None. Timers due by ``now`` run first,
        so a DCQCN increase re-times its QP before the choice."""
        if len(self._timers) and self._timers.first_at() <= now:
            self.poll(now)
        if now < self.wire_free:
            return None
        if self.cnp_queue:
            return self._occupy(self.cnp_queue.popleft(), now, earliest=0.0)  # not paused
        if now < self.pause.until:
            return None
        if self.ack_queue:
            made, frame = self.ack_queue.popleft()
            return self._occupy(frame, now, earliest=max(made, self.pause.until))
        flow = self._first_ready()
        if flow is None or flow.next_at > now:
            return None
        self._ready.pop()
        flow.queued = 0
        rc = flow.rc
        segment = rc.next_segment(now)
        reth = (segment.offset, segment.message_bytes) \
            if segment.opcode in RETH_OPCODES else None
        frame = data_frame(flow.headers, flow.peer_qpn, segment.psn, segment.opcode,
                           segment.payload, segment.ackreq, reth)  # positional: a C call
        if flow.started is None:
            flow.started = now
        bits = len(frame) * 8
        if flow.rp is not None:
            flow.rp.on_bytes_sent(len(frame), now)
            self._arm_rp(flow, now)
        rate = flow.rate(now)
        start = max(flow.next_at, now - bits / rate, flow.unblocked_at,
                    self.pause.until) if self.late_credit else now
        flow.last_sent, flow.last_bits, flow.paced_bps = start, bits, rate
        flow.next_at = start + bits / rate
        self._arm(flow, RC_TIMER, rc.deadline)
        self._offer(flow)
        return self._occupy(frame, now, earliest=start)

    def _occupy(self, frame: bytes, now: float, earliest: float) -> bytes:
        """The port sends ``frame`` from ``now`` (or, with late credit, from as early as one
        frame time before, but not before ``earliest``: when the frame could first have been
        sent): it holds the wire for its bits at line rate."""
        frame_s = len(frame) * 8 / self.line_bps
        start = max(self.wire_free, now - frame_s, earliest) if self.late_credit else now
        self.wire_free = start + frame_s
        return frame

    # --- the ready QPs -------------------------------------------------------------------

    @cython.locals(flow=SendFlow)
    def _offer(self, flow: SendFlow) -> None:
        """Put ``flow`` among the ready QPs at its ``next_at`` (again, if that moved); a QP
        that cannot send (window, posted messages, done) waits for the event that frees
        it: an ACK, a NAK, a timeout or a post offers it again."""
        if not self.started or not flow.rc.can_send():
            flow.queued = 0
            return
        flow.queued = next(self._seq)
        self._ready.push(flow.next_at, flow.index, flow.queued, flow)

    @cython.locals(flow=SendFlow, ready=ArrayReady)
    def _first_ready(self) -> SendFlow | None:
        """The ready QP with the earliest ``next_at``, dropping stale and blocked entries."""
        ready = self._ready
        while len(ready):
            flow = ready.first()
            if ready.first_token() == flow.queued:
                if flow.rc.can_send():
                    return flow
                flow.queued = 0
            ready.pop()
        return None

    @cython.locals(flow=SendFlow)
    def _after_rc(self, flow: SendFlow, now: float) -> None:
        """An ACK, a NAK or the retransmit timer moved the requester: it may be done, free
        to send again, or have a new deadline."""
        if flow.rc.is_done():
            if flow.finished is None:
                flow.finished = now
                self._unfinished -= 1
            return
        if not flow.queued:
            flow.unblocked_at = now
            self._offer(flow)
        self._arm(flow, RC_TIMER, flow.rc.deadline)

    # --- timers --------------------------------------------------------------------------

    def _arm(self, flow: SendFlow | ReceiveFlow, kind: int, due: float | None) -> None:
        """Make sure the timer heap looks at ``flow``'s ``kind`` timer by ``due``. An entry
        already due earlier stays: it re-arms when it fires, so a deadline that keeps
        moving later (an RC timer on every ACK) costs no push each time."""
        if due is None or _armed(flow, kind) <= cython.cast(cython.double, due):
            return
        _set_armed(flow, kind, due)
        self._timers.push(due, next(self._seq), kind, flow)

    @cython.locals(timers=ArrayReady, kind=cython.longlong, sender=SendFlow)
    def _first_timer(self, now: float) -> float:
        """When the earliest timer is really due (NEVER: none): entries that are stale, or
        early because their deadline moved later or went away, are dropped (and re-armed)
        on the way."""
        timers = self._timers
        while len(timers):
            at, kind, flow = timers.first_at(), timers.first_token(), timers.first()
            if _armed(flow, kind) == at:
                if at <= now:  # due: poll runs it (DCQCN may have advanced meanwhile)
                    return at
                if kind == ACK_TIMER:
                    due = cython.cast(ReceiveFlow, flow).rc.next_timer()
                else:
                    sender = cython.cast(SendFlow, flow)
                    if sender.rc.is_done():
                        due = None
                    elif kind == RC_TIMER:
                        due = sender.rc.deadline
                    else:
                        due = sender.rp.next_event(now)
                if due == at:
                    return at
                _set_armed(flow, kind, None)
                timers.pop()
                self._arm(flow, kind, due)
            else:
                timers.pop()
        return NEVER

    @cython.locals(flow=SendFlow)
    def _follow_rate(self, flow: SendFlow, now: float) -> None:
        """DCQCN may have changed the QP's rate by ``now`` (a CNP in paper mode cuts at
        once, in firmware mode at the next decrease check; increases come with timers and
        bytes): re-time its pending send, and put a cut in its rate series."""
        before = flow.paced_bps
        if flow.retime(now):
            if flow.queued:
                self._offer(flow)
            if flow.paced_bps < before:
                self._sample_rate(flow, now)

    @cython.locals(flow=SendFlow)
    def _arm_rp(self, flow: SendFlow, now: float) -> None:
        if not flow.rc.is_done():
            self._arm(flow, RP_TIMER, flow.rp.next_event(now))

    @cython.locals(timers=ArrayReady, kind=cython.longlong, receiver=ReceiveFlow,
                   sender=SendFlow)
    def poll(self, now: float) -> None:
        """Run the timers due by ``now``: RC retransmits, the responders' ACK coalescing,
        DCQCN (a rate change re-times the QP's pending send), and every ``rate_sample_s``
        a point of each unfinished sender's rate series."""
        timers = self._timers
        while len(timers) and timers.first_at() <= now:
            due, kind, flow = timers.first_at(), timers.first_token(), timers.first()
            timers.pop()
            if _armed(flow, kind) != due:
                continue  # superseded by an earlier entry, which already fired
            _set_armed(flow, kind, None)
            if kind == ACK_TIMER:
                receiver = cython.cast(ReceiveFlow, flow)
                self._reply(receiver, now, receiver.rc.poll(now))
                self._arm(receiver, kind, receiver.rc.next_timer())
            elif kind == RC_TIMER:
                sender = cython.cast(SendFlow, flow)
                sender.rc.poll(now)
                self._after_rc(sender, now)
            elif not cython.cast(SendFlow, flow).rc.is_done():
                self._follow_rate(flow, now)
                self._arm_rp(flow, now)
        if self.started and now >= self._next_sample:
            self._next_sample = now + self.rate_sample_s
            # a fabric's thousands of QPs fill their share of points early: look only at
            # those that can still take one
            self._sampling = [f for f in self._sampling if self._sample_rate(f, now)]

    def next_wake(self, now: float) -> float | None:
        """The earliest time, not before ``now``, at which ``dequeue`` or ``poll`` may have
        something to do; None when nothing is pending. Rate samples are taken at the
        polls that happen anyway, so they do not count."""
        wake = self.wake_at(now)
        return None if wake == NEVER else wake

    @cython.locals(flow=SendFlow, wake=cython.double)
    def wake_at(self, now: float) -> float:
        """``next_wake`` as a C double, NEVER for None: the simulator asks at every wake."""
        wake = NEVER
        if self.cnp_queue:
            wake = self.wire_free
        if self.ack_queue:
            wake = min(wake, max(self.wire_free, self.pause.until))
        if (flow := self._first_ready()) is not None:
            wake = min(wake, max(flow.next_at, self.wire_free, self.pause.until))
        return max(min(wake, self._first_timer(now)), now)

    @cython.locals(flow=SendFlow)
    def _sample_rate(self, flow: SendFlow, now: float) -> bool:
        """A point of the flow's rate series: at each cut and each sampling tick. False once
        the series can take no more (full, or the flow done: both for good)."""
        series = flow.rate_series
        if len(series) >= 2 * self.max_rate_points or flow.rc.is_done():
            return False
        flow.add_rate_point(now, flow.rate(now))
        return len(series) < 2 * self.max_rate_points

    # --- results -------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """Every requester done (or failed) and every responder got its messages."""
        return self._unfinished == 0

    def progress(self) -> dict:
        return {"sent_bytes": sum(f.rc.stats.bytes_acked for f in self.senders),
                "received_bytes": sum(f.rc.stats.bytes for f in self.receivers.values())}

    def results(self, t0: float, now: float, timed_out: bool) -> dict:
        """Every flow's statistics, the pause time up to ``now`` included; times in rate
        series are from ``t0``. The shell adds what only it knows (kernel drops)."""
        self.pause.settle(now)
        return {"timed_out": timed_out, "time_scale": self.time_scale,
                "line_rate_bps": self.line_bps,
                "senders": [f.result(t0, now) for f in self.senders],
                "receivers": [f.result() for f in self.receivers.values()],
                "pfc_received": dict(self.pause.received), "paused_s": self.pause.paused_s,
                "paused_priority": self.pause.priority}
