"""The switch agent: the I/O shell around the pure model.

It owns what the model must not: AF_PACKET sockets on the switch's ports, the clock, timers
and a control socket. Every frame read from a port goes through ``Switch.receive``; what
the model returns (PFC) is written out at once; forwarded frames leave when their port's
scheduler releases them (``Switch.dequeue``), paced at speed / S. The loop sleeps until
the earliest of: a frame arriving, a backlogged port's next send time, the next tick.
``select.select`` rather than epoll: epoll rounds timeouts up to whole milliseconds, longer
than a frame time at the emulated rate (machine-facts.md). Run inside the switch's network
namespace:

    python -m fabric.agent --config config_db.json --name leaf1 --control /run/.../leaf1.sock \
        --ports eth1,eth2 --time-scale 3000
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import selectors
import signal
import socket
import sys
import time
from pathlib import Path

from fabric import afpacket
from fabric.client import fidelity
from fabric.config import ConfigError, load, port_name
from fabric.model.switch import Switch

TICK_S = 0.1
BATCH = 64  # frames drained from one port before the loop looks at the others


class Port:
    """One AF_PACKET socket bound to one wire, plus what the kernel dropped under it."""

    def __init__(self, name: str, iface: str) -> None:
        self.name = name
        self.iface = iface
        # frames we send must not come back to us
        self.sock = afpacket.open_socket(iface, ignore_outgoing=True)
        self.kernel_drops = 0
        self.tx_errors = 0

    def read(self) -> bytes | None:
        """One frame with its 802.1Q tag put back; b"" for one of our own transmissions
        (kernels before 4.20 cannot ignore them), None when nothing is queued."""
        got = afpacket.recv_frame(self.sock)
        if got is None:
            return None
        frame, pkttype = got
        return b"" if pkttype == socket.PACKET_OUTGOING else frame

    def write(self, frame: bytes) -> None:
        try:
            self.sock.send(frame)
        except OSError as e:
            if e.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.ENETDOWN, errno.EMSGSIZE):
                raise
            self.tx_errors += 1

    def poll_kernel_drops(self) -> int:
        """PACKET_STATISTICS resets on read: accumulate."""
        self.kernel_drops += afpacket.statistics(self.sock)[1]
        return self.kernel_drops


class Agent:
    def __init__(self, switch: Switch, ports: dict[str, Port], control_path: Path) -> None:
        self.switch = switch
        self.ports = ports
        self.control_path = control_path
        self.sel = selectors.SelectSelector()
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
            for key, _ in self.sel.select(self.timeout(next_tick)):
                what, obj = key.data
                if what == "port":
                    self.drain(obj)
                elif what == "accept":
                    self.accept()
                else:
                    self.serve(key.fileobj)
            now = time.monotonic()
            self.pump(now)
            if now >= next_tick:
                self.transmit(self.switch.tick(now))
                next_tick = now + TICK_S
        self.close()

    def timeout(self, next_tick: float) -> float:
        """Seconds until the next tick or the earliest send time of a backlogged port."""
        wake = next_tick
        next_send_time = self.switch.next_send_time
        for port in self.switch.backlogged():
            at = next_send_time(port)
            if at is not None and at < wake:
                wake = at
        return max(0.0, wake - time.monotonic())

    def drain(self, port: Port) -> None:
        receive, transmit = self.switch.receive, self.transmit
        for _ in range(BATCH):
            frame = port.read()
            if frame is None:
                return
            if frame:
                transmit(receive(port.name, frame, time.monotonic()))

    def pump(self, now: float) -> None:
        """Send every frame whose time has come, then the XONs their departure raised."""
        dequeue = self.switch.dequeue
        for name in self.switch.backlogged():
            port = self.ports[name]
            while (frame := dequeue(name, now)) is not None:
                port.write(frame)
        self.transmit(self.switch.take_control())

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
            counters["fidelity"] = fidelity(counters)
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
    parser.add_argument("--time-scale", type=float, default=None, metavar="S",
                        help="run every port at speed / S (default: unpaced, infinite rate)")
    args = parser.parse_args(argv)
    if args.time_scale is not None and args.time_scale <= 0:
        parser.error("--time-scale must be positive")
    try:
        switch = Switch(load(args.config), time_scale=args.time_scale)
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
    print(f"{args.name}: forwarding on {', '.join(p.iface for p in ports.values())}, "
          f"time scale {args.time_scale or 'none (unpaced)'}", flush=True)
    agent.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
