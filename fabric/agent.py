"""The switch agent: the I/O shell around the pure model.

It owns what the model must not: AF_PACKET sockets on the switch's ports, the clock, timers
and a control socket. Every frame read from a port goes through ``Switch.receive``; what
the model returns (PFC) is written out at once; forwarded frames leave when their port's
scheduler releases them (``Switch.dequeue``), paced at speed / S. The loop sleeps until
the earliest of: a frame arriving, a backlogged port's next send time, the switch's next
timer (``Switch.next_timer``: a PFC refresh, a watchdog poll, an ARP retry), the next sample
of a running trace (``Trace``). Each port's ingress lag, from the kernel's receive stamp of
the oldest frame waiting in its ring to the moment the loop takes it, is part of the
fidelity verdict (``fabric.client.fidelity``).
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
from fabric.config import DEFAULT_ECN_MARKING, ECN_MARKING_POINTS, ConfigError, load, port_name
from fabric.model.scheduler import Lateness
from fabric.model.switch import Switch
from fabric.model.watchdog import WATCHDOG_PROFILES

IDLE_TICK_S = 1.0  # the longest sleep when the switch has no timer running
BATCH = 64  # frames drained from one port before the loop looks at the others


class Port:
    """One AF_PACKET socket bound to one wire, its receive ring (a frame per copy rather
    than per system call), plus what the kernel dropped under it."""

    def __init__(self, name: str, iface: str) -> None:
        self.name = name
        self.iface = iface
        # frames we send must not come back to us
        self.sock = afpacket.open_socket(iface, ignore_outgoing=True, rx_ring=True)
        self.ring = afpacket.RxRing.of(self.sock)
        self.fd = self.sock.fileno()  # os.write(fd) is a little cheaper than sock.send
        self.kernel_drops = 0
        self.tx_errors = 0
        self.ingress_lag = Lateness()  # kernel receive stamp -> taken, per batch

    def write(self, frame: bytes) -> None:
        try:
            os.write(self.fd, frame)
        except OSError as e:
            self.send_failed(e)

    def send_failed(self, error: OSError) -> None:
        """A full queue or a link going down loses the frame, counted; anything else is
        a bug."""
        if error.errno not in (errno.ENOBUFS, errno.EAGAIN, errno.ENETDOWN, errno.EMSGSIZE):
            raise error
        self.tx_errors += 1

    def poll_kernel_drops(self) -> int:
        """PACKET_STATISTICS resets on read: accumulate. Frames too long for a ring slot
        were lost in the kernel too."""
        self.kernel_drops += afpacket.statistics(self.sock)[1]
        return self.kernel_drops + self.ring.truncated

    def close(self) -> None:
        self.ring.close()
        self.sock.close()


class Trace:
    """A time series of ``Switch.sample`` written as JSON lines, for plots: a header line
    (node, time_scale, interval_ms, ports, started: epoch seconds), then one line per sample,
    ``{"t": seconds since start, "ports": ..., "pools": ...}``.

    The event loop takes the samples (``poll``) between frames, so a sample never races
    the model; the file is written through a large buffer so a sample costs a ``json.dumps``
    and no system call. Intervals are wall time, while data-plane times are stretched by S:
    at S = 3000, 1 ms of wall time is ~0.33 us of emulated time. A loop late by more than an
    interval skips the missed samples rather than writing a burst of identical ones.
    """

    BUFFER = 1 << 20

    def __init__(self, switch: Switch, node: str, path: Path, interval_s: float,
                 ports: list[str], now: float) -> None:
        self.switch = switch
        self.path = path
        self.interval_s = interval_s
        self.ports = ports
        self.started = now
        self.next_at = now
        self.count = 0
        self.file = open(path, "w", buffering=self.BUFFER)
        self.header = {"node": node, "time_scale": switch.time_scale,
                       "interval_ms": interval_s * 1e3, "ports": ports, "started": time.time()}
        self.file.write(json.dumps(self.header) + "\n")

    def poll(self, now: float) -> None:
        """Write a sample if one is due at ``now``."""
        if now < self.next_at:
            return
        sample = {"t": round(now - self.started, 6), **self.switch.sample(now, self.ports)}
        self.file.write(json.dumps(sample, separators=(",", ":")) + "\n")
        self.count += 1
        self.next_at += self.interval_s
        if self.next_at <= now:
            self.next_at = now + self.interval_s

    def close(self) -> int:
        """Flush and close the file; the number of samples written."""
        self.file.close()
        return self.count


class Agent:
    def __init__(self, switch: Switch, ports: dict[str, Port], control_path: Path,
                 name: str) -> None:
        self.switch = switch
        self.ports = ports
        self.fds = {name: port.fd for name, port in ports.items()}  # drain's per-frame map
        self.control_path = control_path
        self.name = name
        self.trace: Trace | None = None
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
        next_tick = self.next_tick(time.monotonic())
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
            if self.trace is not None:
                self.trace.poll(now)
            if now >= next_tick:
                self.transmit(self.switch.tick(now))
            next_tick = self.next_tick(now)
        self.close()

    def next_tick(self, now: float) -> float:
        """When ``Switch.tick`` is due: its next timer, re-read after every turn of the loop
        (a frame may have started one, e.g. XOFF its refresh)."""
        due = self.switch.next_timer()
        return now + IDLE_TICK_S if due is None else due

    def timeout(self, next_tick: float) -> float:
        """Seconds until the next tick, the next trace sample or the earliest send time of
        a backlogged port."""
        wake = next_tick
        if self.trace is not None and self.trace.next_at < wake:
            wake = self.trace.next_at
        next_send_time = self.switch.next_send_time
        for port in self.switch.backlogged():
            at = next_send_time(port)
            if at is not None and at < wake:
                wake = at
        return max(0.0, wake - time.monotonic())

    def drain(self, port: Port) -> None:
        """Up to BATCH frames of ``port`` through the model, each sent on as the model says.
        This is the per-frame path: one ring call a batch, locals, the sends inlined."""
        name, fds, write = port.name, self.fds, os.write
        receive, monotonic = self.switch.receive, time.monotonic
        stamp = afpacket.oldest_stamp(port.ring)
        if stamp is not None:
            port.ingress_lag.record(max(0.0, time.time() - stamp))
        for frame in port.ring.take(BATCH):
            for dest, data in receive(name, frame, monotonic()):  # ``transmit``, inlined
                try:
                    write(fds[dest], data)
                except OSError as e:
                    self.ports[dest].send_failed(e)

    def pump(self, now: float) -> None:
        """Send every frame whose time has come, then the XONs their departure raised."""
        dequeue = self.switch.dequeue
        for name in self.switch.backlogged():
            port = self.ports[name]
            while (frame := dequeue(name, now)) is not None:
                port.write(frame)
        self.transmit(self.switch.take_control())

    def transmit(self, out: list[tuple[str, bytes]]) -> None:
        ports = self.ports
        for name, frame in out:
            ports[name].write(frame)

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
                entry.setdefault("fidelity", {})["ingress_lag"] = port.ingress_lag.as_dict()
            counters["fidelity"] = fidelity(counters)
            return {"ok": True, "counters": counters}
        if cmd == "port":
            port, up = request.get("port"), request.get("up")
            if port not in self.ports or not isinstance(up, bool):
                return {"ok": False, "error": f"usage: port=<one of {sorted(self.ports)}>, up=bool"}
            self.switch.set_port_up(port, up)
            return {"ok": True}
        if cmd == "clear_fidelity":
            self.switch.clear_fidelity()
            for port in self.ports.values():
                port.poll_kernel_drops()
                port.kernel_drops = port.ring.truncated = 0
                port.ingress_lag = Lateness()
            return {"ok": True}
        if cmd == "pfc_watchdog":
            profile = request.get("profile")
            if profile not in WATCHDOG_PROFILES:
                return {"ok": False, "error": f"usage: profile=<one of {list(WATCHDOG_PROFILES)}>"}
            self.switch.set_watchdog_profile(profile)
            return {"ok": True}
        if cmd == "trace":
            return self.start_trace(request)
        if cmd == "trace_stop":
            if self.trace is None:
                return {"ok": False, "error": "no trace is running"}
            path = str(self.trace.path)
            return {"ok": True, "path": path, "samples": self.stop_trace()}
        return {"ok": False, "error": f"unknown command {cmd!r}"}

    def start_trace(self, request: dict) -> dict:
        """``trace``: path (absolute: the agent's working directory is not the caller's),
        interval_ms (wall time, default 1.0), ports (default: every port it forwards on)."""
        path, interval_ms = request.get("path"), request.get("interval_ms", 1.0)
        ports = request.get("ports") or sorted(self.ports)
        if self.trace is not None:
            return {"ok": False, "error": f"a trace to {self.trace.path} is running; "
                                          "trace_stop first"}
        if not isinstance(path, str) or not Path(path).is_absolute():
            return {"ok": False, "error": "usage: path=<absolute file path>"}
        if not isinstance(interval_ms, (int, float)) or interval_ms <= 0:
            return {"ok": False, "error": "interval_ms must be a positive number"}
        unknown = [p for p in ports if p not in self.ports] if isinstance(ports, list) else ports
        if unknown:
            return {"ok": False, "error": f"ports {unknown} are not among {sorted(self.ports)}"}
        self.trace = Trace(self.switch, self.name, Path(path), interval_ms / 1e3, ports,
                           time.monotonic())
        return {"ok": True, "header": self.trace.header}

    def stop_trace(self) -> int:
        trace, self.trace = self.trace, None
        return trace.close() if trace is not None else 0

    def close(self) -> None:
        self.stop_trace()
        self.control.close()
        self.control_path.unlink(missing_ok=True)
        for port in self.ports.values():
            port.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fabric.agent", description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the switch's config_db.json")
    parser.add_argument("--name", required=True, help="node name, for messages")
    parser.add_argument("--control", required=True, help="unix socket path for fabric.client")
    parser.add_argument("--ports", required=True,
                        help="comma list of wired interfaces (eth1,eth2,...)")
    parser.add_argument("--time-scale", type=float, default=None, metavar="S",
                        help="run every port at speed / S (default: unpaced, infinite rate)")
    parser.add_argument("--ecn-marking", choices=ECN_MARKING_POINTS, default=DEFAULT_ECN_MARKING,
                        help="where WRED marks CE (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.time_scale is not None and args.time_scale <= 0:
        parser.error("--time-scale must be positive")
    try:
        switch = Switch(load(args.config), time_scale=args.time_scale,
                        ecn_marking=args.ecn_marking)
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
    agent = Agent(switch, ports, Path(args.control), args.name)

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
