"""A userspace RoCEv2 endpoint: RC queue pairs on a host's interface, run as one process per
host, as a NIC would run them where the kernel has no Soft-RoCE.

    python -m rocelab.nic.endpoint --spec -     (the spec is the first line of stdin)

The spec (written by ``traffic.patterns``) names the interface, the lab's time scale, the
length of the host's cable, the host's NIC settings file, the flows this host sends (requester QPs) and the flows it receives
(responder QPs), with both ends' QPNs and starting PSNs agreed in advance, as connection
setup would. The NIC itself is ``nic.core.Nic``, the pure core the virtual-time runtime
drives too: it builds every frame (``nic.codec``, valid ICRC, the NIC settings' DSCP and
ECN), paces each QP at its DCQCN rate and the port at line rate (speed / S), obeys PFC, runs
RC and answers CE marks with CNPs. This module is its live shell:

- an AF_PACKET socket on the host's interface, and the peers' MAC addresses
  (``nic.hostnet``);
- the wall clock (``time.monotonic``) and a select loop that wakes when the NIC asks
  (``Nic.next_wake``), with late credit on, since a loop wakes late;
- the cable: a frame read from the socket waits in a ``DelayLine`` until its last bit would
  have crossed the host's cable (``fabric.model.cable``), as in the switch agents and the
  simulator, so a pause reaches the NIC a cable's length after the switch sent it;
- a UDP socket on port 4791 it never reads, as rxe's kernel socket does, so the host's
  kernel neither answers RoCE with ICMP port unreachable nor logs it;
- what the kernel did to its frames: receive-ring drops and refused sends;
- real-time scheduling where the host allows it (``fabric.realtime``), so that a frame
  due now is taken now rather than after another process's time slice;
- its ingress lag: from the kernel's receive stamp (SO_TIMESTAMPNS) of the oldest frame
  waiting to when the loop takes it, once per batch as the switch agents measure theirs
  (``fabric.agent``). A frame that waited longer than a frame takes on the wire arrived
  late in fabric time, as if over a longer cable: the congestion checks' fidelity verdict
  counts it (``checks.congestion.endpoint_problems``).

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
import sys
import time
from pathlib import Path

from ..fabric import afpacket
from ..fabric.model.cable import DelayLine, propagation_s
from ..fabric.realtime import realtime
from . import settings as nics
from . import codec, hostnet, roce
from ..fabric.model.scheduler import Lateness
from .core import FrameKind, Nic

BATCH = 64  # frames taken from the ring per call
PROGRESS_S = 0.25  # wall time between progress lines


class Endpoint:
    """The live shell around one ``nic.core.Nic``: its socket, its peers' addresses, the
    wall clock and the parent's JSON lines."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.iface = spec.get("iface", "eth1")
        self.scale = float(spec["time_scale"])
        self.line_bps = spec["speed_mbps"] * 1e6 / self.scale
        self.cable = DelayLine(self.line_bps, propagation_s(float(spec.get("cable_m", 0)),
                                                           self.scale))
        self.deadline_s = float(spec.get("timeout_s", 60.0))
        self.nic = Nic(nics.NicSettings.model_validate(spec.get("nic") or {}), self.line_bps,
                       self.scale, late_credit=True)
        self.sock = afpacket.open_socket(self.iface, ignore_outgoing=True, rx_ring=True)
        self.ring = afpacket.RxRing.of(self.sock)  # frames without a system call each
        self.ingress_lag = Lateness()  # kernel receive stamp -> taken, per batch
        self.mtu_frame_s = (self.nic.settings.roce.mtu + codec.FRAME_OVERHEAD) * 8 / self.line_bps
        self.udp_guard = _hold_roce_port()
        self.paths: dict[str, hostnet.Path] = {}
        for f in spec.get("send", []):
            self.nic.add_sender(f, self._headers("data", f))
        for f in spec.get("receive", []):
            self.nic.add_receiver(f, self._headers("ack", f), self._headers("cnp", f))
        self.kernel_drops = 0
        self.scheduling = realtime()
        self.tx_errors = 0  # frames the kernel refused to send

    def _headers(self, kind: FrameKind, flow: dict) -> codec.Headers:
        ip = flow["peer_ip"]
        if ip not in self.paths:
            self.paths[ip] = hostnet.path_to(self.iface, ip)
        path = self.paths[ip]
        return self.nic.headers(kind, src_mac=path.src_mac, dst_mac=path.next_hop_mac,
                                src_ip=path.src_ip, dst_ip=ip, sport=flow["sport"])

    def run(self, stdin) -> None:
        say({"event": "ready"})
        if not _await_line(stdin, "go"):
            return
        nic = self.nic
        t0 = time.monotonic()
        nic.start(t0)
        deadline = t0 + self.deadline_s
        next_progress = t0 + PROGRESS_S
        reported = False
        while True:
            now = time.monotonic()
            self._receive(now)
            for _, frame in self.cable.due(now):
                nic.receive(frame, now)
            nic.poll(now)
            while (frame := nic.dequeue(now)) is not None:
                self._transmit(frame)
            if now >= next_progress:
                say({"event": "progress", **nic.progress()})
                next_progress = now + PROGRESS_S
            if not reported and (nic.complete or now >= deadline):
                say({"event": "done", **self.results(t0, now, timed_out=not nic.complete)})
                reported = True
            wake = min(t for t in (next_progress, nic.next_wake(now), self.cable.next_due())
                       if t is not None)
            ready, _, _ = select.select([self.sock, stdin], [], [],
                                        max(0.0, wake - time.monotonic()))
            if stdin in ready:
                line = stdin.readline()
                if not line or line.strip() == "stop":
                    if not reported:
                        say({"event": "done",
                             **self.results(t0, time.monotonic(), timed_out=True)})
                    return

    def _receive(self, now: float) -> None:
        """Every frame the ring holds onto the cable, for the NIC when it arrives; what the
        NIC does not consume (ARP, anything not RoCE for its QPs) is the host kernel's, which
        sees it anyway. As the switch agents do: the batch left its sender when the kernel
        stamped its oldest frame, and the cable spaces the rest by their serialisation."""
        stamp = afpacket.oldest_stamp(self.ring)  # before ``take`` hands the slots back
        if stamp is None:
            return
        lag = max(0.0, time.time() - stamp)
        self.ingress_lag.record(lag)
        push, sent = self.cable.push, now - lag
        while frames := self.ring.take(BATCH):
            for frame in frames:
                push(frame, sent)

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

    def results(self, t0: float, now: float, timed_out: bool) -> dict:
        _, drops = afpacket.statistics(self.sock)
        self.kernel_drops += drops
        return {**self.nic.results(t0, now, timed_out),
                "kernel_rx_drops": self.kernel_drops, "tx_errors": self.tx_errors,
                "scheduling": self.scheduling,
                "ingress_lag": self.ingress_lag.as_dict(),
                "arrival_lateness": self.cable.lateness.as_dict(), "mtu_frame_s": self.mtu_frame_s}


def _hold_roce_port() -> socket.socket:
    """A UDP socket on 4791 that is never read: the kernel then has a listener for RoCE,
    queues a few datagrams into its smallest buffer and drops the rest silently."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1)
    sock.bind(("0.0.0.0", roce.ROCE_V2_PORT))
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
    parser = argparse.ArgumentParser(prog="rocelab.nic.endpoint", description=__doc__.split("\n")[0])
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
