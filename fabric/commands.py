"""What each control request does: the agent's answers to ``fabric.control``'s requests.

``fabric.control`` carries requests in and replies out and checks each request's fields
(``parse_request``); ``Commands.handle`` acts on a checked one: reads the switch's counters
with the agent's own (kernel drops, send errors, ingress lag, arrival lateness), takes a port
down or up, clears fidelity counters or watermarks, sets the watchdog profile, and starts or
stops a trace (``fabric.trace.Trace``). The running trace, the last one that ended by itself
and the ports taken down by command live here; the agent's loop polls the trace and closes
it on the way out, and keeps a port taken down by command down when its wire comes back.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .client import fidelity
from .control import TraceLimits
from .model.scheduler import Lateness
from .trace import Trace, TraceEnd, TracePathError, open_trace_file

if TYPE_CHECKING:
    from .control import ControlServer
    from .model.cable import DelayLine
    from .model.switch import Switch
    from .routesync import RouteSync


class PortView(Protocol):
    """What the commands read and reset of one of the agent's ports (``fabric.agent.Port``)."""

    name: str
    iface: str
    line: DelayLine | None
    ring: Any  # its ``truncated`` count: frames too long for a ring slot
    kernel_drops: int
    tx_errors: int
    fault: str | None
    ingress_lag: Lateness

    def poll_kernel_drops(self) -> int: ...


class Commands:
    """The agent's control requests, acted on against its switch and ports.

    ``ports`` is the agent's own map, read at each request (a port whose wire came back is a
    new ``Port`` under the same name). ``control`` and ``route_sync`` are set by the agent
    once it has them; ``status`` reports their counts."""

    def __init__(self, switch: Switch, ports: Mapping[str, PortView], name: str,
                 trace_roots: list[Path], limits: TraceLimits, log: Callable[[str], None],
                 started: float) -> None:
        """``trace_roots``: the folders traces may be written in; ``limits``: the longest and
        largest trace allowed; ``started``: when the agent started (monotonic), for its
        uptime."""
        self.switch = switch
        self.ports = ports
        self.name = name
        self.trace_roots = trace_roots
        self.limits = limits
        self.log = log
        self.started = started
        self.trace: Trace | None = None
        self.last_trace: TraceEnd | None = None  # ended by itself, until trace_stop asks
        self.trace_failures = 0
        self.control: ControlServer | None = None
        self.route_sync: RouteSync | None = None

    def handle(self, request: dict) -> dict:
        """A request ``fabric.control.parse_request`` checked: its reply."""
        cmd = request["cmd"]
        if cmd == "ping":
            return {"ok": True, "pid": os.getpid(), "uptime": time.monotonic() - self.started,
                    **self.status()}
        if cmd == "counters":
            counters = self.switch.counters()
            for port in self.ports.values():
                entry = counters["ports"].setdefault(port.name, {})
                entry["iface"] = port.iface
                entry["kernel_rx_drops"] = port.poll_kernel_drops()
                entry["tx_errors"] = port.tx_errors
                entry["fault"] = port.fault
                block = entry.setdefault("fidelity", {})
                block["ingress_lag"] = port.ingress_lag.as_dict()
                if port.line is not None:
                    block["arrival_lateness"] = port.line.lateness.as_dict()
            counters["fidelity"] = fidelity(counters)
            counters["agent"] = self.status()
            return {"ok": True, "counters": counters}
        if cmd == "port":
            self.switch.set_port_up(request["port"], request["up"])
            return {"ok": True}
        if cmd == "clear_fidelity":
            self.switch.clear_fidelity()
            for port in self.ports.values():
                port.poll_kernel_drops()
                port.kernel_drops = port.ring.truncated = 0
                port.ingress_lag = Lateness()
                if port.line is not None:
                    port.line.lateness = Lateness()
            return {"ok": True}
        if cmd == "clear_watermarks":
            self.switch.clear_watermarks(request["kind"])
            return {"ok": True}
        if cmd == "pfc_watchdog":
            self.switch.set_watchdog_profile(request["profile"])
            return {"ok": True}
        if cmd == "trace":
            return self.start_trace(request)
        return self.stop_trace()

    def status(self) -> dict:
        """What the agent itself went through: the trace running or the last one that
        ended by itself, failed traces, ports down for a fault, the control socket's
        counts."""
        trace = None
        if self.trace is not None:
            trace = {"path": self.trace.path, "samples": self.trace.count,
                     "bytes": self.trace.bytes, "running": True}
        elif self.last_trace is not None:
            trace = {**self.last_trace.as_dict(), "running": False}
        return {"trace": trace, "trace_failures": self.trace_failures,
                "ports_down": {p.name: p.fault for p in self.ports.values() if p.fault},
                "route_sync": self.route_sync.stats if self.route_sync else None,
                "control": dict(self.control.stats) if self.control else None}

    def start_trace(self, request: dict) -> dict:
        """``trace``: path (absolute, inside one of the agent's trace folders), interval_ms
        (wall time, default 1.0), ports (default: every port it forwards on), max_seconds
        and max_bytes (default and ceiling: the agent's limits)."""
        if self.trace is not None:
            return {"ok": False, "error": f"a trace to {self.trace.path} is running; "
                                          "trace_stop first"}
        try:
            out = open_trace_file(request["path"], self.trace_roots)
        except TracePathError as e:
            return {"ok": False, "error": str(e)}
        self.last_trace = None
        self.trace = Trace(self.switch, self.name, out, request["path"],
                           request.get("interval_ms", 1.0) / 1e3,
                           request.get("ports") or sorted(self.ports), time.monotonic(),
                           max_seconds=request.get("max_seconds", self.limits.max_seconds),
                           max_bytes=request.get("max_bytes", self.limits.max_bytes))
        if self.trace.ended is not None:  # the header could not be written
            self.trace_ended()
            return self.stop_trace()
        return {"ok": True, "header": self.trace.header}

    def trace_ended(self) -> None:
        """The running trace ended: kept for ``trace_stop`` and ``status``, and logged when
        it ended by itself (a limit, a failed write)."""
        trace, self.trace = self.trace, None
        end = self.last_trace = trace.ended
        if end.reason == "write_error":
            self.trace_failures += 1
            self.log(f"trace to {end.path} failed after {end.samples} samples: {end.error}")
        elif end.reason != "stopped":
            self.log(f"trace to {end.path} reached its {end.reason} limit after "
                     f"{end.samples} samples ({end.bytes} bytes, {end.seconds:g} s)")

    def stop_trace(self) -> dict:
        """``trace_stop``: how the trace ended (``fabric.trace.TraceEnd``): stopped now, or
        earlier at a limit. One that failed to write is an error: its file is incomplete."""
        if self.trace is not None:
            self.trace.close(time.monotonic())
            self.trace_ended()
        end, self.last_trace = self.last_trace, None
        if end is None:
            return {"ok": False, "error": "no trace is running"}
        if end.reason == "write_error":
            return {"ok": False, "error": f"trace to {end.path} failed after {end.samples} "
                                          f"samples: {end.error}", "trace": end.as_dict()}
        return {"ok": True, **end.as_dict()}

    def close(self) -> None:
        """The agent is stopping: a running trace is closed (its file flushed)."""
        if self.trace is not None:
            self.trace.close(time.monotonic())
