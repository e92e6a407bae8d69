"""The switch agent: the I/O shell around the pure model.

It owns what the model must not: AF_PACKET sockets on the switch's ports, the clock, timers
and a control socket. A frame read from a port is held in the port's ``DelayLine`` until its
last bit would have crossed the cable (serialisation at speed / S, then ``CABLE_LENGTH`` at
5 ns per metre times S: ``fabric.model.cable``), as the simulator delivers it; then it goes
through ``Switch.receive``; what
the model returns (PFC) is written out at once; forwarded frames leave when their port's
scheduler releases them (``Switch.dequeue``), paced at speed / S. The loop sleeps until
the earliest of: a frame arriving, a backlogged port's next send time, the switch's next
timer (``Switch.next_timer``: a PFC refresh, a watchdog poll, an ARP retry), a held frame's
arrival, the next sample of a running trace (``fabric.trace.Trace``). Each port's ingress lag, from the kernel's
receive stamp of the oldest frame waiting in its ring to the moment the loop takes it, is
part of the fidelity verdict (``fabric.client.fidelity``). The control socket
(``fabric.control``) is served from the same loop, without blocking it, and what each request
does (counters, port up/down, traces) is ``fabric.commands``; a port whose wire
vanished is taken down in the model rather than ending the agent, and brought back when its
interface is up again.
``select.select`` rather than epoll: epoll rounds timeouts up to whole milliseconds, longer
than a frame time at the emulated rate (machine-facts.md). Run inside the switch's network
namespace:

    python -m rocelab.fabric.agent --config config_db.json --name leaf1 \
        --control /run/.../control/leaf1.sock --ports eth1=Ethernet0,eth2=Ethernet4 \
        --time-scale 3000 --trace-root /path/to/results --trace-root /run/rocelab/<lab>

``--ports`` names each wire's PORT entry, as the lab's loader mapped it (``fabric.portmap``); a
bare ``eth3`` is mapped here by the same rule, with ``--lanemap`` as SONiC-VS would read it.
"""
from __future__ import annotations

import argparse
import errno
import os
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from . import afpacket
from .commands import Commands
from .config import DEFAULT_ECN_MARKING, ECN_MARKING_POINTS, ConfigError, SwitchConfig
from .config_load import load
from .control import ControlError, ControlServer, TraceLimits
from .model.cable import DelayLine, propagation_s
from .model.scheduler import Lateness, wire_rate_bps
from .model.switch import Switch
from .portmap import PortMap, PortMapError, read_lanemap
from .realtime import realtime
from .routesync import RouteSync
from .trace import MIN_MAX_BYTES

IDLE_TICK_S = 1.0  # the longest sleep when the switch has no timer running
BATCH = 64  # frames drained from one port before the loop looks at the others
HOUSEKEEPING_S = 0.5  # control connections expired, downed ports looked at again
# a send or a pending socket error with one of these: the port's interface is down or gone
# (its peer namespace was deleted, taking the veth pair with it)
WIRE_GONE = (errno.ENXIO, errno.ENODEV, errno.ENETDOWN)
FRAME_LOST = (errno.ENOBUFS, errno.EAGAIN, errno.EMSGSIZE)


class Port:
    """One AF_PACKET socket bound to one wire, its receive ring (a frame per copy rather
    than per system call), plus what the kernel dropped under it."""

    def __init__(self, name: str, iface: str,
                 on_fault: Callable[[Port, OSError], None] | None = None,
                 line: DelayLine | None = None) -> None:
        """``line``: where frames wait for their arrival over the cable; None (an unpaced
        switch) hands them to the model as they are read."""
        self.name = name
        self.iface = iface
        self.line = line
        # frames we send must not come back to us
        self.sock = afpacket.open_socket(iface, ignore_outgoing=True, rx_ring=True)
        self.ring = afpacket.RxRing.of(self.sock)
        self.fd = self.sock.fileno()  # os.write(fd) is a little cheaper than sock.send
        self.kernel_drops = 0
        self.tx_errors = 0
        self.fault: str | None = None  # why the wire is down, while it is
        self.on_fault = on_fault
        self.ingress_lag = Lateness()  # kernel receive stamp -> taken, per batch

    def write(self, frame: bytes) -> None:
        try:
            os.write(self.fd, frame)
        except OSError as e:
            self.send_failed(e)

    def send_failed(self, error: OSError) -> None:
        """A full queue loses the frame, counted; a wire that is down or gone loses it too
        and is reported (``on_fault``) once; anything else is a bug."""
        if error.errno not in FRAME_LOST and error.errno not in WIRE_GONE:
            raise error
        self.tx_errors += 1
        if error.errno in WIRE_GONE and self.fault is None and self.on_fault is not None:
            self.on_fault(self, error)

    def pending_error(self) -> int:
        """The socket's pending error (0: none), read and so cleared: a wire that went
        down leaves one, and until it is read ``select`` reports the socket readable."""
        return self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)

    def poll_kernel_drops(self) -> int:
        """PACKET_STATISTICS resets on read: accumulate. Frames too long for a ring slot
        were lost in the kernel too."""
        self.kernel_drops += afpacket.statistics(self.sock)[1]
        return self.kernel_drops + self.ring.truncated

    def close(self) -> None:
        self.ring.close()
        self.sock.close()


class Agent:
    def __init__(self, switch: Switch, ports: dict[str, Port], control_path: Path,
                 name: str, trace_roots: list[Path] | None = None,
                 limits: TraceLimits = TraceLimits()) -> None:
        """``trace_roots``: the folders traces may be written in (default: the control
        socket's folder); ``limits``: the longest and largest trace allowed."""
        self.switch = switch
        self.ports = ports
        self.fds = {name: port.fd for name, port in ports.items()}  # drain's per-frame map
        self.lines = [(name, port.line) for name, port in ports.items() if port.line is not None]
        self.name = name
        self.sel = selectors.SelectSelector()
        self.running = True
        self.started = time.monotonic()
        self.housekeeping_at = self.started + HOUSEKEEPING_S
        switch.wired(ports)
        for port in ports.values():
            port.on_fault = self.port_failed
            self.sel.register(port.sock, selectors.EVENT_READ, ("port", port))
        # what each control request does; its trace is polled by the loop below
        self.commands = Commands(switch, ports, name, trace_roots or [control_path.parent],
                                 limits, self.log, self.started)
        self.control = ControlServer(control_path, self.sel, self.commands.handle, list(ports),
                                     limits, self.log)
        self.commands.control = self.control
        self.route_sync: RouteSync | None = None

    def sync_routes(self) -> None:
        """Program the forwarding table from the kernel's routes (FRR's), kept in sync."""
        wires = {port.iface: name for name, port in self.ports.items()}
        self.route_sync = self.commands.route_sync = RouteSync(self.switch, self.log, wires)
        self.sel.register(self.route_sync, selectors.EVENT_READ, ("routes", self.route_sync))

    def log(self, message: str) -> None:
        print(f"{self.name}: {message}", flush=True)

    def run(self) -> None:
        next_tick = self.next_tick(time.monotonic())
        while self.running:
            for key, mask in self.sel.select(self.timeout(next_tick)):
                what, obj = key.data
                if what == "port":
                    self.drain(obj)
                elif what == "routes":
                    obj.ready()
                else:
                    self.control.ready(obj, mask)
            now = time.monotonic()
            self.arrive(now)
            self.pump(now)
            trace = self.commands.trace
            if trace is not None and not trace.poll(now):
                self.commands.trace_ended()
            if now >= self.housekeeping_at:
                self.housekeeping(now)
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
        """Seconds until the next tick, the next housekeeping, the next trace sample or the
        earliest send time of a backlogged port."""
        wake = min(next_tick, self.housekeeping_at)
        trace = self.commands.trace
        if trace is not None and trace.next_at < wake:
            wake = trace.next_at
        for _, line in self.lines:
            at = line.next_due()
            if at is not None and at < wake:
                wake = at
        next_send_time = self.switch.next_send_time
        for port in self.switch.backlogged():
            at = next_send_time(port)
            if at is not None and at < wake:
                wake = at
        return max(0.0, wake - time.monotonic())

    def drain(self, port: Port) -> None:
        """Up to BATCH frames of ``port``: onto its delay line, or (unpaced) through the
        model at once. This is the per-frame path: one ring call a batch, locals."""
        now = time.monotonic()
        lag = 0.0
        stamp = afpacket.oldest_stamp(port.ring)  # before ``take`` hands the slots back
        if stamp is not None:
            lag = max(0.0, time.time() - stamp)
            port.ingress_lag.record(lag)
        frames = port.ring.take(BATCH)
        if not frames:  # readable with an empty ring: an error is pending on the socket
            self.check_port(port)
        if port.line is None:
            self.receive(port.name, frames)
            return
        # the batch left its sender when the kernel stamped its oldest frame; the cable
        # spaces the rest by their serialisation, so a lag shorter than that is absorbed
        push, sent = port.line.push, now - lag
        for frame in frames:
            push(frame, sent)

    def arrive(self, now: float) -> None:
        """The held frames whose last bit has crossed their cable by ``now``, to the model
        in the order they arrived. Frames due on several ports in one turn of the loop (it
        woke a little late) are merged by arrival time, not taken port by port: in port
        order, the first port's frames would always join a shared egress queue ahead of the
        others', and its PG would drain faster than on a real switch."""
        released = [(name, line.due(now)) for name, line in self.lines
                    if line.frames and line.frames[0][0] <= now]
        if len(released) == 1:
            name, frames = released[0]
            self.receive(name, [frame for _, frame in frames])
        elif released:
            for _, _, name, frame in sorted((at, i, name, frame)
                                            for i, (name, frames) in enumerate(released)
                                            for at, frame in frames):
                self.receive(name, (frame,))

    def receive(self, name: str, frames: Iterable[bytes]) -> None:
        """Frames that arrived on port ``name`` through the model, each sent on as the model
        says (``transmit``, inlined)."""
        fds, write = self.fds, os.write
        receive, monotonic = self.switch.receive, time.monotonic
        for frame in frames:
            for dest, data in receive(name, frame, monotonic()):
                try:
                    write(fds[dest], data)
                except OSError as e:
                    self.ports[dest].send_failed(e)

    def pump(self, now: float) -> None:
        """Send every frame whose time has come, then the XONs their departure raised."""
        dequeue = self.switch.dequeue
        for name in self.switch.backlogged():
            write = self.ports[name].write  # only a wired port is up (``Switch.wired``)
            while (frame := dequeue(name, now)) is not None:
                write(frame)
        self.transmit(self.switch.take_control())

    def transmit(self, out: list[tuple[str, bytes]]) -> None:
        """Send what the model sends outside a received frame (timers, control)."""
        ports = self.ports
        for name, frame in out:
            ports[name].write(frame)

    def housekeeping(self, now: float) -> None:
        """Now and then, not per frame: close stale control connections, and bring back a
        port whose interface is up again."""
        self.housekeeping_at = now + HOUSEKEEPING_S
        self.control.expire(now)
        for port in [p for p in self.ports.values() if p.fault is not None]:
            if afpacket.link_running(port.iface):
                self.reopen(port)

    def check_port(self, port: Port) -> None:
        """Read the error the kernel left on a port's socket: a wire that is down or gone
        takes the port down; any other is logged."""
        error = port.pending_error()
        if error in WIRE_GONE:
            self.port_failed(port, OSError(error, os.strerror(error)))
        elif error:
            self.log(f"{port.name} ({port.iface}): socket error {os.strerror(error)}")

    def port_failed(self, port: Port, error: OSError) -> None:
        """The wire is down or gone (its peer namespace deleted): the port goes down in the
        model (routes withdrawn, queues flushed) and its socket leaves the selector, where it
        would otherwise report an error at every turn of the loop. The socket stays open
        until a new one replaces it, so the send path's descriptor stays valid."""
        if port.fault is not None:
            return
        port.fault = f"{error.strerror} ({errno.errorcode.get(error.errno, error.errno)})"
        self.sel.unregister(port.sock)
        if port.line is not None:  # frames on a cut cable never arrive
            port.line.frames.clear()
        self.switch.set_link_up(port.name, False)
        self.log(f"{port.name} ({port.iface}) down: {port.fault}; "
                 "the port is back when its interface is up again")

    def reopen(self, port: Port) -> None:
        """A new socket on the interface that came back (a deleted one is a new device)."""
        try:
            fresh = Port(port.name, port.iface, self.port_failed, port.line)
        except OSError as e:
            self.log(f"{port.name} ({port.iface}): still unusable: {e.strerror}")
            return
        fresh.kernel_drops, fresh.tx_errors = port.kernel_drops, port.tx_errors
        fresh.ingress_lag = port.ingress_lag
        self.ports[port.name] = fresh
        self.fds[port.name] = fresh.fd
        self.sel.register(fresh.sock, selectors.EVENT_READ, ("port", fresh))
        port.close()
        self.switch.set_link_up(port.name, True)
        self.log(f"{port.name} ({port.iface}) up again")

    def close(self) -> None:
        self.commands.close()
        self.control.close()
        if self.route_sync is not None:
            self.route_sync.close()
        for port in self.ports.values():
            port.close()


def delay_line(config: SwitchConfig, port: str, time_scale: float | None) -> DelayLine | None:
    """The cable into ``port``: its speed / S and its CABLE_LENGTH; None when unpaced."""
    if time_scale is None or port not in config.ports:
        return None
    return DelayLine(wire_rate_bps(config.ports[port].speed_mbps, time_scale),
                     propagation_s(config.qos.cable_length_m.get(port, 0), time_scale))


def port_map(config: SwitchConfig, text: str, lanemap: Path | None) -> PortMap:
    """``--ports``: the pairs as given, the bare wires mapped by SONiC-VS's rule."""
    items = [item for item in text.split(",") if item]
    bare = [item for item in items if "=" not in item]
    given = PortMap.parse(",".join(item for item in items if "=" in item)).ports
    if not bare:
        return PortMap(given)
    lanes = read_lanemap(lanemap) if lanemap is not None else None
    return PortMap({**given, **PortMap.build(config, bare, lanes, lanemap).ports})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rocelab.fabric.agent", description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the switch's config_db.json")
    parser.add_argument("--name", required=True, help="node name, for messages")
    parser.add_argument("--control", required=True, help="unix socket path for fabric.client")
    parser.add_argument("--ports", required=True,
                        help="comma list of wired interfaces and their PORT entries "
                        "(eth1=Ethernet0,eth2=Ethernet8); a bare ethN is mapped as SONiC-VS does")
    parser.add_argument("--lanemap", type=Path, default=None, metavar="FILE",
                        help="the lanemap.ini bare interfaces are mapped with (default: the "
                        "image's default layout)")
    parser.add_argument("--time-scale", type=float, default=None, metavar="S",
                        help="run every port at speed / S (default: unpaced, infinite rate)")
    parser.add_argument("--trace-root", type=Path, action="append", default=[],
                        metavar="DIR", help="a folder traces may be written in (repeat for "
                        "more; default: the control socket's folder)")
    parser.add_argument("--trace-max-seconds", type=float, default=TraceLimits.max_seconds,
                        metavar="S", help="longest trace, and the default length (wall s)")
    parser.add_argument("--trace-max-bytes", type=int, default=TraceLimits.max_bytes,
                        metavar="N", help="largest trace file, and the default size")
    parser.add_argument("--unemulated-tables", choices=("refuse", "skip"), default="refuse",
                        help="skip: run without config tables whose data-plane meaning is "
                        "not emulated (the topology label rocelab.unemulated-tables)")
    parser.add_argument("--ecn-marking", choices=ECN_MARKING_POINTS, default=DEFAULT_ECN_MARKING,
                        help="where WRED marks CE (default: %(default)s)")
    parser.add_argument("--pg-profile-lookup", metavar="INI", default=None,
                        help="the platform's pg_profile_lookup.ini: the lossless PGs the "
                        "config leaves out are made from it as buffermgrd makes them at boot")
    args = parser.parse_args(argv)
    if args.time_scale is not None and args.time_scale <= 0:
        parser.error("--time-scale must be positive")
    if not 0 < args.trace_max_seconds < float("inf") or args.trace_max_bytes < MIN_MAX_BYTES:
        parser.error(f"--trace-max-seconds must be positive and --trace-max-bytes at least "
                     f"{MIN_MAX_BYTES}")
    if not all(root.is_absolute() for root in args.trace_root):
        parser.error("--trace-root must be an absolute path")
    try:
        config = load(args.config, args.unemulated_tables, args.pg_profile_lookup)
        switch = Switch(config, time_scale=args.time_scale, ecn_marking=args.ecn_marking)
    except ConfigError as e:
        print(f"{args.name}: {e}", file=sys.stderr)
        return 2
    try:
        wires = port_map(config, args.ports, args.lanemap)
    except PortMapError as e:
        print(f"{args.name}: --ports: {e}", file=sys.stderr)
        return 2
    ports = {}
    for iface, port in wires.ports.items():
        if port not in config.ports:
            print(f"{args.name}: --ports: {port} is not in PORT of {config.path}", file=sys.stderr)
            return 2
        try:
            ports[port] = Port(port, iface, line=delay_line(config, port, args.time_scale))
        except OSError as e:
            print(f"{args.name}: cannot open {iface}: {e.strerror}", file=sys.stderr)
            return 2
    try:
        agent = Agent(switch, ports, Path(args.control), args.name, args.trace_root,
                      TraceLimits(args.trace_max_seconds, args.trace_max_bytes))
    except (ControlError, OSError) as e:
        print(f"{args.name}: control socket {args.control}: {e}", file=sys.stderr)
        return 2
    # timely wake-ups matter only where ports are paced; an unpaced agent forwards as fast
    # as it can, and at a real-time priority would take a whole core from everything else
    agent.log(realtime() if args.time_scale is not None else "normal scheduling (unpaced)")

    if config.bgp is not None:
        try:
            agent.sync_routes()
        except OSError as e:
            print(f"{args.name}: route sync (netlink): {e}", file=sys.stderr)
            return 2

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
