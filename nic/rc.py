"""Reliable Connected transport as pure state machines: the requester (sender) and the
responder (receiver) of one RoCE queue pair, as a NIC runs them (IBTA Vol. 1, 9.7).

The requester segments messages at the path MTU into packets with consecutive 24-bit PSNs,
keeps at most ``window`` packets unacknowledged, and goes back N: a NAK (PSN sequence
error) or a retransmit timeout resends everything from the oldest unacknowledged PSN.
After ``retry_limit`` timeouts in a row without progress the QP fails, as a NIC's
retry-exceeded error does. The responder accepts only the PSN it expects, coalesces ACKs
(one per ``ack_every`` packets or when the requester asks), NAKs the first packet after a
gap once, and re-ACKs duplicates so that a requester whose ACK was lost can go on.

Like ``nic.dcqcn``, nothing here reads a clock or touches a socket: the endpoint feeds
in ``now`` and the packets, and turns the segments and replies into frames.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import cython

PSN_MODULO = 1 << 24
Operation = Literal["write", "send"]

# BTH opcodes by (operation, part); a one-packet message is "only"
OPCODES = {
    ("send", "first"): 0x00, ("send", "middle"): 0x01, ("send", "last"): 0x02,
    ("send", "only"): 0x04,
    ("write", "first"): 0x06, ("write", "middle"): 0x07, ("write", "last"): 0x08,
    ("write", "only"): 0x0A,
}
ENDS_MESSAGE = {OPCODES[op, part] for op in ("send", "write") for part in ("last", "only")}
RETH_OPCODES = frozenset((OPCODES["write", "first"], OPCODES["write", "only"]))
DATA_OPCODES = frozenset(OPCODES.values())


def psn_add(psn: int, n: int) -> int:
    modulo = PSN_MODULO  # a C integer when compiled, as the arithmetic then is
    return (psn + n) % modulo


def psn_diff(a: int, b: int) -> int:
    """a - b on the 24-bit PSN circle, in [-2^23, 2^23): positive when a is ahead."""
    modulo = PSN_MODULO
    return (a - b + modulo // 2) % modulo - modulo // 2


@dataclass(frozen=True)
class Segment:
    """One packet for the requester to put on the wire."""

    psn: int
    opcode: int
    payload: int  # bytes
    ackreq: bool
    message: int  # index of the message it belongs to
    offset: int  # byte offset in the message (the RETH's address for a WRITE's first packet)
    message_bytes: int  # the whole message (the RETH's DMA length)
    retransmit: bool


@dataclass
class RequesterStats:
    packets_sent: int = 0
    bytes_sent: int = 0  # payload bytes, retransmissions included
    retransmitted: int = 0  # packets sent again
    naks_received: int = 0
    timeouts: int = 0
    acks_received: int = 0
    messages_done: int = 0
    bytes_acked: int = 0
    # per completed message: seconds from its first packet's first transmission to its ACK
    completion_s: list[float] = field(default_factory=list)


class Requester:
    """The sending side of one RC QP: ``count`` messages of ``size`` bytes.

    Messages become sendable as they are posted (``post``; all of them unless ``posted`` says
    fewer), which is how a ring all-reduce step waits for the previous step's data.
    """

    def __init__(self, *, size: int, count: int, mtu: int = 1024, op: Operation = "write",
                 window: int = 64, rto_s: float, retry_limit: int = 7, start_psn: int = 0,
                 posted: int | None = None) -> None:
        if size < 1 or count < 0 or mtu < 1 or window < 1 or rto_s <= 0 or retry_limit < 0:
            raise ValueError("size, mtu, window and rto must be positive, count and "
                             "retry_limit not negative")
        self.size, self.count, self.mtu, self.op = size, count, mtu, op
        self.window, self.rto_s, self.retry_limit = window, rto_s, retry_limit
        self.start_psn = start_psn % PSN_MODULO
        self.per_message = max(1, math.ceil(size / mtu))
        # a packet's opcode by its place in a message: only, first, middle, last
        self.opcodes = tuple(OPCODES[op, part] for part in ("only", "first", "middle", "last"))
        self.total = self.per_message * count  # packets in the whole flow
        self.posted = count if posted is None else min(posted, count)
        self.una = 0  # index of the oldest unacknowledged packet
        self.nxt = 0  # index of the next packet to send
        self.sent_high = 0  # one past the highest index ever sent
        self.first_sent: dict[int, float] = {}  # message -> first transmission of its first packet
        self.deadline: float | None = None  # retransmit timer
        self.retries = 0  # timeouts in a row without progress
        self.failed: str | None = None
        self.stats = RequesterStats()

    @property
    def done(self) -> bool:
        return self.is_done()

    def is_done(self) -> bool:
        """``done`` as a call: compiled, a C call, where a property is looked up by name."""
        return self.una >= self.total or self.failed is not None

    @property
    def outstanding(self) -> int:
        return self.nxt - self.una

    def post(self, messages: int) -> None:
        """Allow ``messages`` more messages to be sent."""
        self.posted = min(self.count, self.posted + messages)

    def psn_of(self, index: int) -> int:
        return psn_add(self.start_psn, index)

    def index_of(self, psn: int) -> int:
        """The packet index a PSN names, taken as the one nearest the acknowledged edge."""
        return self.una + psn_diff(psn, self.psn_of(self.una))

    def can_send(self) -> bool:
        return (self.failed is None and self.nxt < self.total
                and self.nxt - self.una < self.window  # ``outstanding``, read in C
                and self.nxt // self.per_message < self.posted)

    def next_segment(self, now: float) -> Segment | None:
        """The packet to send at ``now`` (None when the window, the posted messages or the
        flow's end stop it); the caller sends it at once."""
        if not self.can_send():
            return None
        index = self.nxt
        message = index // self.per_message
        part_index = index - message * self.per_message
        offset = part_index * self.mtu
        payload = min(self.mtu, self.size - offset)
        last = part_index == self.per_message - 1
        part = 0 if self.per_message == 1 else 1 if part_index == 0 else 3 if last else 2
        retransmit = index < self.sent_high
        if not part_index:  # its first packet: a message's parts go out in order
            self.first_sent.setdefault(message, now)
        self.nxt += 1
        self.sent_high = max(self.sent_high, self.nxt)
        stats = self.stats
        stats.packets_sent += 1
        stats.bytes_sent += payload
        stats.retransmitted += retransmit
        if self.deadline is None:
            self.deadline = now + self.rto_s
        ackreq = last or self.nxt - self.una >= self.window
        if not cython.compiled:
            return Segment(self.psn_of(index), self.opcodes[part], payload, ackreq=ackreq,
                           message=message, offset=offset, message_bytes=self.size,
                           retransmit=retransmit)
        # compiled, its fields set in C: the call boxed eight values for __init__ to unbox
        segment = Segment.__new__(Segment)
        segment.psn, segment.opcode = self.psn_of(index), self.opcodes[part]
        segment.payload, segment.ackreq, segment.message = payload, ackreq, message
        segment.offset, segment.message_bytes, segment.retransmit = offset, self.size, retransmit
        return segment

    def on_ack(self, psn: int, now: float) -> None:
        """A (coalesced) ACK: every packet up to and including ``psn`` arrived."""
        self.stats.acks_received += 1
        self._acknowledge(self.index_of(psn) + 1, now)

    def on_nak(self, psn: int, now: float) -> None:
        """A PSN sequence error NAK: everything before ``psn`` arrived, ``psn`` did not;
        go back to it. A NAK behind the acknowledged edge is stale and ignored."""
        self.stats.naks_received += 1
        index = self.index_of(psn)
        if index < self.una:
            return
        self._acknowledge(index, now)
        self.nxt = min(self.nxt, self.una)

    def poll(self, now: float) -> bool:
        """Run the retransmit timer; True when it fired (go back to the oldest unacked)."""
        if self.deadline is None or now < self.deadline or self.done:
            return False
        self.stats.timeouts += 1
        self.retries += 1
        if self.retries > self.retry_limit:
            self.failed = (f"retry limit: {self.retry_limit} timeouts without progress at "
                           f"PSN {self.psn_of(self.una)}")
            self.deadline = None
            return True
        self.nxt = self.una
        self.deadline = now + self.rto_s
        return True

    def _acknowledge(self, upto: int, now: float) -> None:
        """Packets before index ``upto`` arrived: slide the window, complete messages."""
        upto = min(upto, self.sent_high)
        if upto <= self.una:
            return
        first_message = self.una // self.per_message
        self.una = upto
        self.nxt = max(self.nxt, self.una)
        self.retries = 0
        self.deadline = None if self.una >= self.sent_high else now + self.rto_s
        stats = self.stats
        for message in range(first_message, self.una // self.per_message):
            stats.messages_done += 1
            stats.bytes_acked += self.size
            stats.completion_s.append(now - self.first_sent.pop(message))


@dataclass(frozen=True)
class Reply:
    """An ACK or a NAK for the responder to send: the AETH's PSN and MSN."""

    kind: Literal["ack", "nak"]
    psn: int
    msn: int


@dataclass
class ResponderStats:
    packets: int = 0  # data packets received, duplicates and out-of-sequence included
    bytes: int = 0  # payload bytes accepted (each once)
    messages: int = 0
    duplicates: int = 0
    out_of_sequence: int = 0  # packets after a gap, discarded
    acks_sent: int = 0
    naks_sent: int = 0


class Responder:
    """The receiving side of one RC QP."""

    def __init__(self, *, start_psn: int = 0, ack_every: int = 16,
                 ack_delay_s: float | None = None) -> None:
        if ack_every < 1 or (ack_delay_s is not None and ack_delay_s <= 0):
            raise ValueError("ack_every must be at least 1 and ack_delay_s positive")
        self.epsn = start_psn % PSN_MODULO  # the PSN expected next
        self.ack_every = ack_every
        self.ack_delay_s = ack_delay_s
        self.unacked = 0  # in-sequence packets since the last ACK
        self.unacked_since: float | None = None  # when the oldest of them arrived
        self.nak_sent = False  # a NAK for this gap is out; one per gap
        self.stats = ResponderStats()

    @property
    def msn(self) -> int:
        return self.stats.messages % PSN_MODULO

    def on_packet(self, psn: int, opcode: int, payload: int, ackreq: bool,
                  now: float = 0.0) -> Reply | None:
        """A data packet arrived at ``now``; the ACK or NAK to send for it, if any."""
        stats = self.stats
        stats.packets += 1
        ahead = psn_diff(psn, self.epsn)
        if ahead < 0:  # already have it: the requester went back further than needed
            stats.duplicates += 1
            return self._reply("ack", psn_add(self.epsn, -1))
        if ahead > 0:
            stats.out_of_sequence += 1
            if self.nak_sent:
                return None
            self.nak_sent = True
            return self._reply("nak", self.epsn)
        self.epsn = psn_add(self.epsn, 1)
        self.nak_sent = False
        stats.bytes += payload
        if opcode in ENDS_MESSAGE:
            stats.messages += 1
        self.unacked += 1
        if self.unacked_since is None:
            self.unacked_since = now
        if ackreq or self.unacked >= self.ack_every:
            return self._reply("ack", psn)
        return None

    def next_timer(self) -> float | None:
        """When ``poll`` has an ACK to send (None: nothing is waiting for one)."""
        if self.ack_delay_s is None or self.unacked_since is None:
            return None
        return self.unacked_since + self.ack_delay_s

    def poll(self, now: float) -> Reply | None:
        """The coalescing timer, as NICs have one: packets that neither filled the count
        nor asked are acknowledged ``ack_delay_s`` after the first of them arrived, so a
        slow, rate-limited requester is never left to its retransmit timer."""
        due = self.next_timer()
        if due is None or now < due:
            return None
        return self._reply("ack", psn_add(self.epsn, -1))

    def _reply(self, kind: Literal["ack", "nak"], psn: int) -> Reply:
        self.unacked = 0
        self.unacked_since = None
        if kind == "ack":
            self.stats.acks_sent += 1
        else:
            self.stats.naks_sent += 1
        return Reply(kind, psn, self.msn)
