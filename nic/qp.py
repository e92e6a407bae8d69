"""The per-QP records of ``nic.core.Nic``: a requester with its pacing state, a responder
with its notification point, and the statistics each reports in the endpoint's results.

Pure, like the NIC: times are arguments.
"""
from __future__ import annotations

import statistics
from array import array
from dataclasses import dataclass, field

import cython

from ..fabric.model.cable import whole
from . import codec
from .dcqcn import NotificationPoint, ReactionPoint
from .rc import Requester, Responder


@dataclass
class SendFlow:
    """A requester QP and everything that paces it."""

    name: str
    qpn: int
    peer_qpn: int
    rc: Requester
    headers: codec.Headers
    rp: ReactionPoint | None
    line_bps: float
    after: str | None = None  # a receive flow whose messages gate this one's (all-reduce)
    index: int = 0  # its place among the NIC's senders: ties in next_at go to the first
    next_at: float = 0.0  # may send from then on
    # when an ACK, a NAK or a post last let it send again after it could not (window,
    # messages): late credit never counts a frame as started before that
    unblocked_at: float = 0.0
    last_sent: float | None = None  # start of the last frame sent (the pacing timeline)
    last_bits: int = 0  # its size
    paced_bps: float = 0.0  # the rate next_at was timed at (the NIC starts it at line rate)
    started: float | None = None
    finished: float | None = None
    cnps: int = 0
    # (time, rate) points, flat in one array: 16 bytes a point, where a tuple of two floats
    # took 104 (a 512-host all-to-all keeps 13 million points)
    rate_series: array = field(default_factory=lambda: array("d"))
    queued: int = 0  # the token of its entry among the NIC's ready QPs; 0: not there
    rc_timer: float | None = None  # when the NIC's timer heap next looks at the RC timer
    rp_timer: float | None = None  # ... and at DCQCN

    def rate_points(self) -> list[tuple[float, float]]:
        """The rate series as (time, rate) pairs."""
        series = self.rate_series
        return list(zip(series[::2], series[1::2]))

    @cython.boundscheck(False)
    @cython.wraparound(False)
    def rate_series_since(self, t0: float) -> list[list[float]]:
        """The rate series for the results: ``[time from t0, rate]`` pairs, times rounded
        to the microsecond. Scaled and rounded whole in C, where ``round(t, 6)`` formatted
        each time in decimal: 3 % of a 128-host run (16,256 series)."""
        series = self.rate_series
        out = []
        for i in range(0, len(series), 2):
            out.append([whole((series[i] - t0) * 1e6) / 1e6, series[i + 1]])
        return out

    def add_rate_point(self, at: float, rate: float) -> None:
        """``(at, rate)`` onto the rate series: compiled, copied into the array's buffer in
        C, where ``append`` is a method looked up by name (millions of points a run)."""
        if not cython.compiled:
            self.rate_series.append(at)
            self.rate_series.append(rate)
            return
        series = self.rate_series
        c_array.extend_buffer(series, cython.cast(cython.p_char, cython.address(at)), 1)
        c_array.extend_buffer(series, cython.cast(cython.p_char, cython.address(rate)), 1)

    def rate(self, now: float) -> float:
        return self.line_bps if self.rp is None else self.rp.rate(now)

    def retime(self, now: float) -> bool:
        """Follow a rate change (None: none since the last look): re-time the pending gap
        at the new rate, the last frame's bits from that frame's start (HPCC's
        ``ChangeRate``). A cut never puts ``next_at`` before ``now`` (see ``nic.core``).
        True if the rate changed."""
        if self.rp is None:
            return False
        rate = self.rp.rate(now)
        if rate == self.paced_bps:
            return False
        if self.last_sent is not None:
            next_at = self.last_sent + self.last_bits / rate
            self.next_at = max(next_at, now) if rate < self.paced_bps else next_at
        self.paced_bps = rate
        return True

    def result(self, t0: float, now: float) -> dict:
        stats, rc = self.rc.stats, self.rc
        end = self.finished if self.finished is not None else now
        elapsed = end - (self.started if self.started is not None else end)
        return {
            "name": self.name, "role": "sender", "qpn": self.qpn, "messages": rc.count,
            "message_bytes": rc.size, "messages_done": stats.messages_done,
            "bytes": stats.bytes_acked, "elapsed_s": elapsed,
            "goodput_bps": stats.bytes_acked * 8 / elapsed if elapsed > 0 else 0.0,
            "completion_s": _percentiles(stats.completion_s),
            "packets_sent": stats.packets_sent, "payload_bytes_sent": stats.bytes_sent,
            "retransmitted": stats.retransmitted, "naks_received": stats.naks_received,
            "timeouts": stats.timeouts, "acks_received": stats.acks_received,
            "cnps_received": self.cnps, "failed": rc.failed,
            "rate_series": self.rate_series_since(t0),
        }


@dataclass
class ReceiveFlow:
    """A responder QP and its notification point."""

    name: str
    qpn: int
    peer_qpn: int
    rc: Responder
    count: int  # messages expected
    ack_headers: codec.Headers
    cnp_headers: codec.Headers
    np: NotificationPoint | None
    ce_marked: int = 0
    finished: float | None = None
    ack_timer: float | None = None  # when the NIC's timer heap next looks at ACK coalescing

    def result(self) -> dict:
        s = self.rc.stats
        return {"name": self.name, "role": "receiver", "qpn": self.qpn,
                "messages": s.messages, "bytes": s.bytes, "packets": s.packets,
                "duplicates": s.duplicates, "out_of_sequence": s.out_of_sequence,
                "acks_sent": s.acks_sent, "naks_sent": s.naks_sent,
                "ce_marked": self.ce_marked, "cnps_sent": self.np.cnps_sent if self.np else 0}


def _percentiles(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    ordered = sorted(values)
    return {"p50": statistics.median(ordered),
            "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "max": ordered[-1]}
