"""A PFC-honouring RoCEv2 sender for tests: N frames at the host link's emulated rate,
paused by the PFC frames its link partner sends. Run inside a host's namespace:

    python -m traffic.blast --iface eth1 --dst-ip 10.1.1.11 --count 3000 --time-scale 3000

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
import subprocess
import sys
import time

from fabric import afpacket
from fabric.model.pause import QUANTUM_BITS
from traffic import packets

DEST_QPN = 0xB1A57  # the receiving QP: how a capture tells blast frames apart
BTH_OFFSET = 14 + 20 + 8  # untagged IPv4 + UDP
PSN = struct.Struct("!I")  # the BTH's last word: AckReq bit, reserved bits, 24-bit PSN


def ip_json(*args: str) -> list[dict]:
    proc = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout or "[]")


def next_hop_mac(iface: str, ip: str) -> str:
    """The kernel's neighbour entry for ``ip``, after one ping if it has none."""
    for attempt in range(2):
        for entry in ip_json("neigh", "show", "to", ip, "dev", iface):
            if "lladdr" in entry:
                return entry["lladdr"]
        if not attempt:
            subprocess.run(["ping", "-n", "-c", "1", "-W", "1", ip], capture_output=True)
    raise SystemExit(f"blast: no ARP entry for {ip} on {iface}")


def template(iface: str, dst_ip: str, dscp: int, size: int) -> bytearray:
    """One RoCEv2 RC SEND frame of ``size`` bytes (ECT(0)) to ``dst_ip`` via the kernel's
    route; PSN and ICRC get rewritten per frame."""
    route = ip_json("route", "get", dst_ip)[0]
    if route["dev"] != iface:
        raise SystemExit(f"blast: {dst_ip} is routed via {route['dev']}, not {iface}")
    src_mac = ip_json("link", "show", "dev", iface)[0]["address"]
    flow = packets.Flow(src_mac, next_hop_mac(iface, route.get("gateway", dst_ip)),
                        route["prefsrc"], dst_ip, dscp=dscp)
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
        self.quantum_s = QUANTUM_BITS / rate_bps
        self.priority = priority
        self.paused_until = 0.0
        self.pause_began = 0.0
        self.paused_s = 0.0
        self.pfc = {"xoff": 0, "xon": 0, "pause": 0}

    def read_pauses(self, now: float) -> None:
        """Apply every PFC/PAUSE frame waiting on the socket."""
        while (got := afpacket.recv_frame(self.sock)) is not None:
            frame = got[0]
            quanta = packets.parse_pfc(frame)
            if quanta is None:
                if not packets.is_pause(frame):
                    continue
                self.pfc["pause"] += 1
                quanta = {self.priority: struct.unpack_from("!H", frame, 16)[0]}
            if self.priority not in quanta:
                continue
            q = quanta[self.priority]
            self.pfc["xoff" if q else "xon"] += 1
            self.pause(now, now + q * self.quantum_s)

    def pause(self, now: float, until: float) -> None:
        """Reload the pause timer at ``now``; ``until <= now`` resumes."""
        self.settle(now)
        self.pause_began = now
        self.paused_until = max(until, now)

    def settle(self, now: float) -> None:
        """Count the time paused up to ``now`` (or to the pause's end, if sooner)."""
        if self.paused_until > self.pause_began:
            upto = min(now, self.paused_until)
            self.paused_s += upto - self.pause_began
            self.pause_began = upto

    def run(self, count: int) -> dict:
        frame, psn_at, sock = self.frame, BTH_OFFSET + 8, self.sock
        ackreq = frame[psn_at] << 24
        start = next_at = time.monotonic()
        sent = 0
        while sent < count:
            now = time.monotonic()
            self.read_pauses(now)
            if now < self.paused_until or now < next_at:
                wake = max(self.paused_until, next_at)
                select.select([sock], [], [], wake - now)
                continue
            self.settle(now)
            PSN.pack_into(frame, psn_at, ackreq | sent & 0xFFFFFF)
            frame[-4:] = packets.icrc(frame).to_bytes(4, "big")
            try:
                sock.send(frame)
            except BlockingIOError:
                select.select([], [sock], [], self.frame_s)
                continue
            sent += 1
            next_at = max(next_at, now - self.frame_s) + self.frame_s
        now = time.monotonic()
        self.settle(now)
        return {"sent": sent, "bytes": sent * len(frame), "frame_bytes": len(frame),
                "pfc": self.pfc, "paused_s": self.paused_s, "elapsed_s": now - start,
                "rate_bps": len(frame) * 8 / self.frame_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="traffic.blast", description=__doc__.split("\n")[0])
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
