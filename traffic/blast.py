"""A PFC-honouring RoCEv2 sender for tests: N frames at the host link's emulated rate,
paused by the PFC frames its link partner sends. Run inside a host's namespace:

    python -m rocelab.traffic.blast --iface eth1 --dst-ip 10.1.1.11 --count 3000 --time-scale 3000

It resolves what the host's kernel knows (its MAC and address, the route to the
destination, the next hop's MAC, one ping if ARP has not run), builds one RC SEND frame
with scapy and then only rewrites its PSN and ICRC per frame (struct and zlib). Frames
leave at ``speed / S`` with no catch-up bursts: a late sender restarts its timeline, as a
NIC that cannot send faster than its line. A PFC frame enabling the sender's priority
stops it for ``quanta * 512`` bit times at that rate (quanta 0 resumes); an 802.3x PAUSE
stops it too. The result is one JSON line on stdout: frames and bytes sent, PFC/PAUSE
frames received (XOFF and XON), time spent paused, elapsed time.
"""
from __future__ import annotations

import argparse
import json
import select
import struct
import sys
import time

from ..fabric import afpacket
from ..nic import hostnet
from . import packets
from ..nic import roce
from ..nic.pause import PauseTimer

DEST_QPN = 0xB1A57  # the receiving QP: how a capture tells blast frames apart
BTH_OFFSET = 14 + 20 + 8  # untagged IPv4 + UDP
PSN = struct.Struct("!I")  # the BTH's last word: AckReq bit, reserved bits, 24-bit PSN


def template(iface: str, dst_ip: str, dscp: int, size: int) -> bytearray:
    """One RoCEv2 RC SEND frame of ``size`` bytes (ECT(0)) to ``dst_ip`` via the kernel's
    route; PSN and ICRC get rewritten per frame."""
    try:
        path = hostnet.path_to(iface, dst_ip)
    except hostnet.NetError as e:
        raise SystemExit(f"blast: {e}") from None
    flow = packets.Flow(path.src_mac, path.next_hop_mac, path.src_ip, dst_ip, dscp=dscp)
    header = len(bytes(packets.rc_send(flow, DEST_QPN, 0, b"")))
    if size < header:
        raise SystemExit(f"blast: --size {size} is below the {header}-byte header")
    return bytearray(bytes(packets.rc_send(flow, DEST_QPN, 0, bytes(size - header))))


class Sender:
    """The pacing and pause state of one priority on one link."""

    def __init__(self, iface: str, frame: bytearray, rate_bps: float, priority: int) -> None:
        self.sock = afpacket.open_socket(iface, ignore_outgoing=True)
        self.frame = frame
        self.frame_s = len(frame) * 8 / rate_bps
        self.pause = PauseTimer(priority, rate_bps)

    def read_pauses(self, now: float) -> None:
        """Apply every PFC/PAUSE frame waiting on the socket."""
        while (got := afpacket.recv_frame(self.sock)) is not None:
            self.pause.on_frame(got[0], now)

    def run(self, count: int) -> dict:
        frame, psn_at, sock = self.frame, BTH_OFFSET + 8, self.sock
        ackreq = frame[psn_at] << 24
        start = next_at = time.monotonic()
        sent = 0
        while sent < count:
            now = time.monotonic()
            self.read_pauses(now)
            if now < self.pause.until or now < next_at:
                wake = max(self.pause.until, next_at)
                select.select([sock], [], [], wake - now)
                continue
            self.pause.settle(now)
            PSN.pack_into(frame, psn_at, ackreq | sent & 0xFFFFFF)
            frame[-4:] = roce.icrc(frame).to_bytes(4, "big")
            try:
                sock.send(frame)
            except BlockingIOError:
                select.select([], [sock], [], self.frame_s)
                continue
            sent += 1
            next_at = max(next_at, now - self.frame_s) + self.frame_s
        now = time.monotonic()
        self.pause.settle(now)
        return {"sent": sent, "bytes": sent * len(frame), "frame_bytes": len(frame),
                "pfc": self.pause.received, "paused_s": self.pause.paused_s,
                "elapsed_s": now - start, "rate_bps": len(frame) * 8 / self.frame_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rocelab.traffic.blast", description=__doc__.split("\n")[0])
    parser.add_argument("--iface", default="eth1")
    parser.add_argument("--dst-ip", required=True)
    parser.add_argument("--count", type=int, required=True, help="frames to send")
    parser.add_argument("--size", type=int, default=1024, help="frame bytes (no FCS)")
    parser.add_argument("--dscp", type=int, default=26, help="26: TC3, the lossless class")
    parser.add_argument("--priority", type=int, default=3, help="PFC priority to honour")
    parser.add_argument("--speed-mbps", type=int, default=100000, help="the host link's speed")
    parser.add_argument("--time-scale", type=float, required=True, help="the lab's S")
    args = parser.parse_args(argv)
    frame = template(args.iface, args.dst_ip, args.dscp, args.size)
    sender = Sender(args.iface, frame, args.speed_mbps * 1e6 / args.time_scale, args.priority)
    print(json.dumps(sender.run(args.count)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
