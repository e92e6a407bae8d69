"""The switch agent: the I/O shell around the pure model.

It owns what the model must not: AF_PACKET sockets on the switch's ports, the clock, timers
and a control socket. Every frame read from a port goes through ``Switch.receive`` and
whatever the model returns is written out. Run inside the switch's network namespace:

    python -m fabric.agent --config config_db.json --name leaf1 --control /run/.../leaf1.sock
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from pathlib import Path

from fabric.config import ConfigError, load, port_name
from fabric.model.switch import Switch

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_AUXDATA = 8
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
AUXDATA = struct.Struct("=IIIHHHH")  # struct tpacket_auxdata
TICK_S = 0.1
BATCH = 64  # frames drained from one port before the loop looks at the others
RCVBUF = 4 << 20
SO_RCVBUFFORCE = 33  # not in the socket module


class Port:
    """One AF_PACKET socket bound to one wire, plus what the kernel dropped under it."""

    def __init__(self, name: str, iface: str) -> None:
        self.name = name
        self.iface = iface
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
        try:  # frames we send must not come back to us (Linux >= 4.20)
            self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        except OSError:
            pass
        try:  # the kernel drops silently when this fills: make it deep, and count drops
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)
        except PermissionError:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)
        self.sock.bind((iface, ETH_P_ALL))
        self.sock.setblocking(False)
        self.kernel_drops = 0
        self.tx_errors = 0

    def read(self) -> bytes | None:
        """One frame with its 802.1Q tag put back (the kernel strips it into auxdata)."""
        try:
            data, anc, _flags, addr = self.sock.recvmsg(65536, 64)
        except BlockingIOError:
            return None
        if addr[2] == socket.PACKET_OUTGOING:
            return b""
        for level, kind, raw in anc:
            if level == SOL_PACKET and kind == PACKET_AUXDATA and len(raw) >= AUXDATA.size:
                status, _, _, _, _, tci, tpid = AUXDATA.unpack_from(raw)
                if status & TP_STATUS_VLAN_VALID:
                    if not status & TP_STATUS_VLAN_TPID_VALID:
                        tpid = 0x8100
                    return data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
        return data

    def write(self, frame: bytes) -> None:
        try:
            self.sock.send(frame)
        except OSError as e:
            if e.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.ENETDOWN, errno.EMSGSIZE):
                raise
            self.tx_errors += 1

    def poll_kernel_drops(self) -> int:
        """PACKET_STATISTICS resets on read: accumulate."""
        _packets, drops = struct.unpack("II", self.sock.getsockopt(SOL_PACKET,
                                                                    PACKET_STATISTICS, 8))
        self.kernel_drops += drops
        return self.kernel_drops


class Agent:
    def __init__(self, switch: Switch, ports: dict[str, Port], control_path: Path) -> None:
        self.switch = switch
        self.ports = ports
        self.control_path = control_path
        self.sel = selectors.DefaultSelector()
        self.running = True
        self.started = time.monotonic()
        for port in ports.values():
            self.sel.register(port.sock, selectors.EVENT_READ, ("port", port))
        control_path.unlink(missing_ok=True)
        self.control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.control.bind(str(control_path))
        self.control.listen(8)
        self.control.setblocking(False)
        self.sel.register(self.control, selectors.EVENT_READ, ("accept", None))

    def run(self) -> None:
        next_tick = time.monotonic() + TICK_S
        while self.running:
            timeout = max(0.0, next_tick - time.monotonic())
            for key, _ in self.sel.select(timeout):
                what, obj = key.data
                if what == "port":
                    self.drain(obj)
                elif what == "accept":
                    self.accept()
                else:
                    self.serve(key.fileobj)
            now = time.monotonic()
            if now >= next_tick:
                self.transmit(self.switch.tick(now))
                next_tick = now + TICK_S
        self.close()

    def drain(self, port: Port) -> None:
        receive, transmit = self.switch.receive, self.transmit
        for _ in range(BATCH):
            frame = port.read()
            if frame is None:
                return
            if frame:
                transmit(receive(port.name, frame, time.monotonic()))

    def transmit(self, out: list[tuple[str, bytes]]) -> None:
        for name, frame in out:
            self.ports[name].write(frame)

    def accept(self) -> None:
        try:
            conn, _ = self.control.accept()
        except BlockingIOError:
            return
        conn.setblocking(True)
        conn.settimeout(2.0)
        self.sel.register(conn, selectors.EVENT_READ, ("conn", None))

    def serve(self, conn: socket.socket) -> None:
        """One JSON request line in, one JSON reply line out, then close."""
        self.sel.unregister(conn)
        try:
            line = conn.makefile("rb").readline()
            reply = self.handle(json.loads(line) if line else {})
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except (OSError, ValueError) as e:
            try:
                conn.sendall(json.dumps({"ok": False, "error": str(e)}).encode() + b"\n")
            except OSError:
                pass
        finally:
            conn.close()

    def handle(self, request: dict) -> dict:
        cmd = request.get("cmd")
        if cmd == "ping":
            return {"ok": True, "pid": os.getpid(), "uptime": time.monotonic() - self.started}
        if cmd == "counters":
            counters = self.switch.counters()
            for port in self.ports.values():
                entry = counters["ports"].setdefault(port.name, {})
                entry["iface"] = port.iface
                entry["kernel_rx_drops"] = port.poll_kernel_drops()
                entry["tx_errors"] = port.tx_errors
            return {"ok": True, "counters": counters}
        if cmd == "port":
            port, up = request.get("port"), request.get("up")
            if port not in self.ports or not isinstance(up, bool):
                return {"ok": False, "error": f"usage: port=<one of {sorted(self.ports)}>, up=bool"}
            self.switch.set_port_up(port, up)
            return {"ok": True}
        return {"ok": False, "error": f"unknown command {cmd!r}"}

    def close(self) -> None:
        self.control.close()
        self.control_path.unlink(missing_ok=True)
        for port in self.ports.values():
            port.sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fabric.agent", description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the switch's config_db.json")
    parser.add_argument("--name", required=True, help="node name, for messages")
    parser.add_argument("--control", required=True, help="unix socket path for fabric.client")
    parser.add_argument("--ports", required=True,
                        help="comma list of wired interfaces (eth1,eth2,...)")
    args = parser.parse_args(argv)
    try:
        switch = Switch(load(args.config))
    except ConfigError as e:
        print(f"{args.name}: {e}", file=sys.stderr)
        return 2
    ports = {}
    for iface in filter(None, args.ports.split(",")):
        try:
            ports[port_name(iface)] = Port(port_name(iface), iface)
        except OSError as e:
            print(f"{args.name}: cannot open {iface}: {e.strerror}", file=sys.stderr)
            return 2
    agent = Agent(switch, ports, Path(args.control))

    def stop(_signum: int, _frame: object) -> None:
        agent.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"{args.name}: forwarding on {', '.join(p.iface for p in ports.values())}",
          flush=True)
    agent.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
