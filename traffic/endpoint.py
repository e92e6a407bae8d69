"""A userspace RoCEv2 endpoint: RC queue pairs on a host's interface, run as one process per
host, as a NIC would run them where the kernel has no Soft-RoCE.

    python -m traffic.endpoint --spec -     (the spec is the first line of stdin)

The spec (written by ``traffic.patterns``) names the interface, the lab's time scale, the
host's NIC settings file, the flows this host sends (requester QPs) and the flows it receives
(responder QPs), with both ends' QPNs and starting PSNs agreed in advance, as connection
setup would. The endpoint

- builds every frame itself (``traffic.wire``) with a valid ICRC, marks data with the NIC's
  RoCE DSCP and ECT(0) when ECN is on, CNPs with the CNP DSCP;
- paces each QP at its DCQCN rate (``traffic.dcqcn``, timers and rates scaled by S) and the
  port at line rate (speed / S), and holds its RoCE frames (data, ACKs) while its link
  partner pauses the RoCE priority (CNPs travel in their own class);
- runs RC (``traffic.rc``): ACK coalescing (by count and by a timer), NAK and go-back-N,
  the retransmit timeout;
- as the notification point, answers CE-marked packets with CNPs (at most one per flow per
  interval);
- holds UDP port 4791 with a socket it never reads, as rxe's kernel socket does, so the
  host's kernel neither answers RoCE with ICMP port unreachable nor logs it.

It talks to its parent with JSON lines: ``{"event": "ready"}`` once its socket is open and
its peers resolved; then it waits for ``go`` on stdin, prints ``progress`` lines, and
``{"event": "done", ...}`` with its statistics when its flows are complete (or failed, or
the deadline passed). It keeps answering (a last ACK may have been lost) until ``stop`` or
the end of stdin.
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import select
import socket
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from fabric import afpacket
from labs import nic as nics
from traffic import hostnet, wire
from traffic.dcqcn import NotificationPoint, ReactionPoint
from traffic.pause import PauseTimer
from traffic.rc import DATA_OPCODES, RETH_OPCODES, Reply, Requester, Responder

ECT0 = 2
CE = 3
PROGRESS_S = 0.25  # wall time between progress lines
RATE_SAMPLE_S = 0.005  # wall time between points of a flow's rate series
MAX_RATE_POINTS = 4000


@dataclass
class SendFlow:
    """A requester QP and everything that paces it."""

    name: str
    qpn: int
    peer_qpn: int
    rc: Requester
    headers: wire.Headers
    rp: ReactionPoint | None
    line_bps: float
    after: str | None = None  # a receive flow whose messages gate this one's (all-reduce)
    next_at: float = 0.0
    started: float | None = None
    finished: float | None = None
    cnps: int = 0
    rate_series: list[list[float]] = field(default_factory=list)

    def rate(self, now: float) -> float:
        return self.line_bps if self.rp is None else self.rp.rate(now)

    def result(self, t0: float) -> dict:
        stats, rc = self.rc.stats, self.rc
        end = self.finished or time.monotonic()
        elapsed = end - (self.started or end)
        done = stats.completion_s
        return {
            "name": self.name, "role": "sender", "qpn": self.qpn, "messages": rc.count,
            "message_bytes": rc.size, "messages_done": stats.messages_done,
            "bytes": stats.bytes_acked, "elapsed_s": elapsed,
            "goodput_bps": stats.bytes_acked * 8 / elapsed if elapsed > 0 else 0.0,
            "completion_s": _percentiles(done),
            "packets_sent": stats.packets_sent, "payload_bytes_sent": stats.bytes_sent,
            "retransmitted": stats.retransmitted, "naks_received": stats.naks_received,
            "timeouts": stats.timeouts, "acks_received": stats.acks_received,
            "cnps_received": self.cnps, "failed": rc.failed,
            "rate_series": [[round(t - t0, 6), r] for t, r in self.rate_series],
        }


@dataclass
class ReceiveFlow:
    """A responder QP and its notification point."""

    name: str
    qpn: int
    peer_qpn: int
    rc: Responder
    count: int  # messages expected
    ack_headers: wire.Headers
    cnp_headers: wire.Headers
    np: NotificationPoint | None
    ce_marked: int = 0
    finished: float | None = None

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


class Endpoint:
    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.iface = spec.get("iface", "eth1")
        self.scale = float(spec["time_scale"])
        self.line_bps = spec["speed_mbps"] * 1e6 / self.scale
        self.nic = nics.NicSettings.model_validate(spec.get("nic") or {})
        self.deadline_s = float(spec.get("timeout_s", 60.0))
        roce = self.nic.roce
        self.mtu = roce.mtu
        self.data_ecn = ECT0 if roce.ecn else 0
        self.pause = PauseTimer(roce.priority, self.line_bps)
        dcqcn = self.nic.dcqcn
        self.params = dcqcn.to_params(self.line_bps * self.scale).scaled(self.scale) \
            if dcqcn.enabled else None
        self.sock = afpacket.open_socket(self.iface, ignore_outgoing=True)
        self.udp_guard = _hold_roce_port()
        self.paths: dict[str, hostnet.Path] = {}
        self.senders = [self._send_flow(f) for f in spec.get("send", [])]
        self.receivers = {f["qpn"]: self._receive_flow(f) for f in spec.get("receive", [])}
        self.by_qpn = {f.qpn: f for f in self.senders}
        self.wire_free = 0.0
        self.held: list[bytes] = []  # ACKs/NAKs waiting out a pause of their priority
        self.kernel_drops = 0
        self.tx_errors = 0  # frames the kernel refused to send

    # --- set-up ------------------------------------------------------------------------

    def _path(self, ip: str) -> hostnet.Path:
        if ip not in self.paths:
            self.paths[ip] = hostnet.path_to(self.iface, ip)
        return self.paths[ip]

    def _headers(self, peer_ip: str, dscp: int, ecn: int, sport: int) -> wire.Headers:
        path = self._path(peer_ip)
        return wire.Headers(path.src_mac, path.next_hop_mac, path.src_ip, peer_ip, dscp=dscp,
                            ecn=ecn, sport=sport)

    def _send_flow(self, f: dict) -> SendFlow:
        roce = self.nic.roce
        rc = Requester(size=f["size"], count=f["count"], mtu=self.mtu, op=f.get("op", "write"),
                       window=f.get("window", 64), rto_s=f["rto_s"],
                       start_psn=f.get("start_psn", 0), posted=1 if f.get("after") else None)
        return SendFlow(f["name"], f["qpn"], f["peer_qpn"], rc,
                        self._headers(f["peer_ip"], roce.dscp, self.data_ecn, f["sport"]),
                        ReactionPoint(self.params) if self.params else None, self.line_bps,
                        after=f.get("after"))

    def _receive_flow(self, f: dict) -> ReceiveFlow:
        roce, cnp = self.nic.roce, self.nic.cnp
        return ReceiveFlow(
            f["name"], f["qpn"], f["peer_qpn"],
            Responder(start_psn=f.get("start_psn", 0), ack_every=f.get("ack_every", 16),
                      ack_delay_s=f["ack_delay_s"]),
            f["count"], self._headers(f["peer_ip"], roce.dscp, 0, f["sport"]),
            self._headers(f["peer_ip"], cnp.dscp, 0, f["sport"]),
            NotificationPoint(self.params) if self.params else None)

    # --- the event loop ----------------------------------------------------------------

    def run(self, stdin) -> None:
        say({"event": "ready"})
        if not _await_line(stdin, "go"):
            return
        t0 = time.monotonic()
        for flow in self.senders:
            flow.next_at = t0
        deadline = t0 + self.deadline_s
        next_progress = t0 + PROGRESS_S
        reported = False
        while True:
            now = time.monotonic()
            self._receive(now)
            self._timers(now)
            self._send(now)
            if now >= next_progress:
                say({"event": "progress", **self.progress()})
                next_progress = now + PROGRESS_S
            if not reported and (self.complete() or now >= deadline):
                self.pause.settle(now)
                say({"event": "done", **self.results(t0, timed_out=not self.complete())})
                reported = True
            wake = self._wake(now, next_progress)
            ready, _, _ = select.select([self.sock, stdin], [], [],
                                        max(0.0, wake - time.monotonic()))
            if stdin in ready:
                line = stdin.readline()
                if not line or line.strip() == "stop":
                    if not reported:
                        say({"event": "done", **self.results(t0, timed_out=True)})
                    return

    def complete(self) -> bool:
        return all(f.rc.done for f in self.senders) and \
            all(f.rc.stats.messages >= f.count for f in self.receivers.values())

    def _wake(self, now: float, next_progress: float) -> float:
        wake = next_progress
        for flow in self.senders:
            if flow.rc.deadline is not None:
                wake = min(wake, flow.rc.deadline)
            if flow.rc.can_send():
                wake = min(wake, max(flow.next_at, self.wire_free, self.pause.until))
            if flow.rp is not None and not flow.rc.done \
                    and (event := flow.rp.next_event(now)) is not None:
                wake = min(wake, event)
        for receiver in self.receivers.values():
            if (due := receiver.rc.next_timer()) is not None:
                wake = min(wake, due)
        if self.held:
            wake = min(wake, self.pause.until)
        return wake

    def _receive(self, now: float) -> None:
        while (got := afpacket.recv_frame(self.sock)) is not None:
            frame, kind = got
            if kind == socket.PACKET_OUTGOING:  # kernels that ignore PACKET_IGNORE_OUTGOING
                continue
            if self.pause.on_frame(frame, now):
                continue
            incoming = wire.parse(frame)
            if incoming is None:
                continue
            if incoming.opcode in DATA_OPCODES:
                flow = self.receivers.get(incoming.dqpn)
                if flow is not None:
                    self._on_data(flow, incoming, now)
                continue
            sender = self.by_qpn.get(incoming.dqpn)
            if sender is None:
                continue
            if incoming.opcode == wire.CNP_OPCODE:
                sender.cnps += 1
                if sender.rp is not None:
                    sender.rp.on_cnp(now)
                    self._sample_rate(sender, now, force=True)
            elif incoming.opcode == wire.ACK_OPCODE and incoming.aeth is not None:
                if incoming.aeth >> 29 == 0b011:
                    sender.rc.on_nak(incoming.psn, now)
                else:
                    sender.rc.on_ack(incoming.psn, now)
                if sender.rc.done and sender.finished is None:
                    sender.finished = now

    def _on_data(self, flow: ReceiveFlow, incoming: wire.Incoming, now: float) -> None:
        ce = incoming.ecn == CE
        flow.ce_marked += ce
        if flow.np is not None and flow.np.on_packet(now, ce):
            self._control(wire.cnp_frame(flow.cnp_headers, flow.peer_qpn), paused=False)
        before = flow.rc.stats.messages
        self._reply(flow, flow.rc.on_packet(incoming.psn, incoming.opcode, incoming.payload,
                                            incoming.ackreq, now), now)
        delivered = flow.rc.stats.messages - before
        if delivered:
            if flow.rc.stats.messages >= flow.count and flow.finished is None:
                flow.finished = now
            for sender in self.senders:
                if sender.after == flow.name:
                    sender.rc.post(delivered)

    def _reply(self, flow: ReceiveFlow, reply: Reply | None, now: float) -> None:
        if reply is not None:
            self._control(wire.ack_frame(flow.ack_headers, flow.peer_qpn, reply.psn, reply.msn,
                                         nak=reply.kind == "nak"), paused=now < self.pause.until)

    def _control(self, frame: bytes, paused: bool) -> None:
        """ACKs and NAKs travel in the RoCE class, so a pause holds them; CNPs have their own
        class (the CNP priority is not the paused one)."""
        if paused:
            self.held.append(frame)
        else:
            self._transmit(frame)

    def _timers(self, now: float) -> None:
        if self.held and now >= self.pause.until:
            held, self.held = self.held, []
            for frame in held:
                self._transmit(frame)
        for receiver in self.receivers.values():
            self._reply(receiver, receiver.rc.poll(now), now)
        for flow in self.senders:
            flow.rc.poll(now)
            if flow.rc.done and flow.finished is None:
                flow.finished = now
            self._sample_rate(flow, now)

    def _send(self, now: float) -> None:
        """Put due packets on the wire: the port one frame time at a time, each QP at its
        own rate; a late loop restarts the timeline rather than bursting to catch up."""
        while now >= self.wire_free and now >= self.pause.until:
            due = [f for f in self.senders if f.next_at <= now and f.rc.can_send()]
            if not due:
                return
            flow = min(due, key=lambda f: f.next_at)
            segment = flow.rc.next_segment(now)
            reth = (segment.offset, segment.message_bytes) \
                if segment.opcode in RETH_OPCODES else None
            frame = wire.data_frame(flow.headers, flow.peer_qpn, segment.psn, segment.opcode,
                                    segment.payload, ackreq=segment.ackreq, reth=reth)
            self._transmit(frame)
            if flow.started is None:
                flow.started = now
            bits = len(frame) * 8
            if flow.rp is not None:
                flow.rp.on_bytes_sent(len(frame), now)
            frame_s = bits / flow.rate(now)
            flow.next_at = max(flow.next_at, now - frame_s) + frame_s
            self.wire_free = max(self.wire_free, now - bits / self.line_bps) + \
                bits / self.line_bps

    def _transmit(self, frame: bytes) -> None:
        """Send, waiting while the socket is full. A frame the kernel refuses (the veth
        backlog full, the link down) is lost on the wire: counted, and RC recovers it."""
        while True:
            try:
                self.sock.send(frame)
                return
            except BlockingIOError:
                select.select([], [self.sock], [], 0.01)
            except OSError as e:
                if e.errno not in (errno.ENOBUFS, errno.ENETDOWN):
                    raise
                self.tx_errors += 1
                return

    def _sample_rate(self, flow: SendFlow, now: float, force: bool = False) -> None:
        series = flow.rate_series
        if len(series) >= MAX_RATE_POINTS or flow.rc.done:
            return
        if force or not series or now - series[-1][0] >= RATE_SAMPLE_S:
            series.append([now, flow.rate(now)])

    # --- results -----------------------------------------------------------------------

    def progress(self) -> dict:
        return {"sent_bytes": sum(f.rc.stats.bytes_acked for f in self.senders),
                "received_bytes": sum(f.rc.stats.bytes for f in self.receivers.values())}

    def results(self, t0: float, timed_out: bool) -> dict:
        _, drops = afpacket.statistics(self.sock)
        self.kernel_drops += drops
        return {"timed_out": timed_out, "time_scale": self.scale, "line_rate_bps": self.line_bps,
                "senders": [f.result(t0) for f in self.senders],
                "receivers": [f.result() for f in self.receivers.values()],
                "pfc_received": self.pause.received, "paused_s": self.pause.paused_s,
                "kernel_rx_drops": self.kernel_drops, "tx_errors": self.tx_errors}


def _hold_roce_port() -> socket.socket:
    """A UDP socket on 4791 that is never read: the kernel then has a listener for RoCE,
    queues a few datagrams into its smallest buffer and drops the rest silently."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
    sock.bind(("0.0.0.0", wire.ROCE_V2_PORT))
    return sock


def _await_line(stdin, word: str) -> bool:
    """Block until the parent says ``word``; False if it closed stdin or said stop."""
    while True:
        line = stdin.readline()
        if not line or line.strip() == "stop":
            return False
        if line.strip() == word:
            return True


def say(event: dict) -> None:
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="traffic.endpoint", description=__doc__.split("\n")[0])
    parser.add_argument("--spec", required=True,
                        help="JSON file written by traffic.patterns, or - for stdin's first line")
    args = parser.parse_args(argv)
    stdin = os.fdopen(sys.stdin.fileno(), "r", buffering=1)
    try:
        text = stdin.readline() if args.spec == "-" else Path(args.spec).read_text()
        endpoint = Endpoint(json.loads(text))
    except (OSError, ValueError, KeyError, hostnet.NetError) as e:
        say({"event": "error", "error": f"spec {args.spec}: {str(e).splitlines()[0]}"})
        return 1
    endpoint.run(stdin)
    return 0


if __name__ == "__main__":
    sys.exit(main())
