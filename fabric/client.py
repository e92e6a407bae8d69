"""Talk to a running switch agent over its control socket (one JSON line each way).

Only root or the agent's own user may connect (``fabric.control``)."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path


class AgentError(RuntimeError):
    """The agent is not there, or refused the request."""


class AgentClient:
    def __init__(self, control: str | Path, timeout: float = 2.0) -> None:
        self.control = str(control)
        self.timeout = timeout

    def request(self, cmd: str, **args: object) -> dict:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(self.timeout)
                s.connect(self.control)
                try:
                    s.sendall(json.dumps({"cmd": cmd, **args}).encode() + b"\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # turned away before it read the request: its reason is waiting
                line = s.makefile("rb").readline()
        except (OSError, socket.timeout) as e:
            raise AgentError(f"agent at {self.control}: {e.strerror or e}") from None
        if not line:
            raise AgentError(f"agent at {self.control} closed the connection")
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise AgentError(f"agent at {self.control}: unreadable reply")
        if not reply.get("ok"):
            raise AgentError(f"agent at {self.control}: {reply.get('error', 'failed')}")
        return reply

    def ping(self) -> dict:
        return self.request("ping")

    def counters(self) -> dict:
        return self.request("counters")["counters"]

    def set_port(self, port: str, up: bool) -> None:
        self.request("port", port=port, up=up)

    def clear_watermarks(self, kind: str) -> None:
        """Peaks (``queue`` or ``pg``) start again from now, as sonic-clear does."""
        self.request("clear_watermarks", kind=kind)

    def clear_fidelity(self) -> None:
        """Restart the fidelity figures (lateness, bytes after XOFF, kernel drops), so the
        next ``counters`` judge only what happened since."""
        self.request("clear_fidelity")

    def pfc_watchdog(self, profile: str) -> None:
        """Run the switch's PFC watchdogs on ``profile`` (``fabric.model.watchdog``:
        ``fabric``, times x S, or the storm check's ``storm-check``)."""
        self.request("pfc_watchdog", profile=profile)

    def trace_start(self, path: str | Path, interval_ms: float = 1.0,
                    ports: list[str] | None = None, max_seconds: float | None = None,
                    max_bytes: int | None = None) -> dict:
        """Start the agent writing a time series to ``path`` (``fabric.trace.Trace``),
        which must lie in one of the agent's trace folders; returns its header. The agent
        runs elsewhere, so the path's folder is made absolute (and real) here; its last
        part is left alone: the agent refuses a symbolic link there rather than follow it.
        ``max_seconds``/``max_bytes`` end the trace sooner than the agent's limits."""
        path = Path(path)
        limits = {k: v for k, v in (("max_seconds", max_seconds), ("max_bytes", max_bytes))
                  if v is not None}
        return self.request("trace", path=os.path.join(path.parent.resolve(), path.name),
                            interval_ms=interval_ms, ports=ports, **limits)["header"]

    def trace_end(self) -> dict:
        """Stop the running trace, or collect one that ended by itself: path, samples,
        bytes, seconds and reason (``stopped``, ``max_seconds``, ``max_bytes``). A trace
        that failed to write (a full disk) raises AgentError: its file is incomplete."""
        return self.request("trace_stop")

    def trace_stop(self) -> int:
        """``trace_end``, for the number of samples written."""
        return self.trace_end()["samples"]


# Below this many paced frames a port's "p99" is its single worst frame: one scheduling
# hiccup on a lightly used uplink is not a lost emulation (its max is still reported).
MIN_FRAMES_FOR_P99 = 100


def fidelity(counters: dict) -> dict:
    """Whether the emulation kept up, from a switch's counters (docs/design.md, "Keeping a
    real-time emulation honest"): ``{"ok": bool, "problems": [...]}``. A problem is a frame
    the kernel dropped under a port (a wire loss), a lossless PG that took more bytes after
    XOFF than its headroom holds, or a paced port whose p99 lateness or p99 arrival
    lateness, over at least MIN_FRAMES_FOR_P99 frames (releases, for arrivals), exceeds one
    MTU-sized frame time: it did not dequeue at size/rate intervals, or frames reached the
    model later than their last bit crossed the cable (``fabric.model.cable.DelayLine``: in
    fabric time a longer cable, and more bytes in flight after XOFF than the headroom was
    sized for). A port without a delay line (an agent of before) is judged by its raw
    ingress lag, kernel stamp to taken.
    A switch run in virtual time (``virtual_time``) cannot fall behind: bytes after XOFF
    beyond its headroom are then the configuration's doing, and the drops they cause decide
    the verdict, not fidelity."""
    if counters.get("virtual_time"):
        return {"ok": True, "problems": []}
    problems, worst = [], None
    paced = counters.get("time_scale") is not None
    for name, port in counters.get("ports", {}).items():
        if port.get("kernel_rx_drops"):
            problems.append(f"{name}: {port['kernel_rx_drops']} frames dropped in the kernel")
        block = port.get("fidelity", {})
        for use in block.get("headroom", []):
            if not use["within"]:
                problems.append(f"{name} PG {use['pg']}: {use['after_xoff_max']} B after XOFF "
                                f"> headroom {use['headroom']} B")
        # frames read late but within their cable time arrive on time: with a delay line
        # the verdict judges what is left over (arrival lateness), else the raw lag
        lag = ("arrival_lateness", "arrival lateness") if "arrival_lateness" in block \
            else ("ingress_lag", "ingress lag")
        for key, what in (("lateness", "lateness"), lag):
            late = block.get(key, {})
            if paced and late.get("count", 0) >= MIN_FRAMES_FOR_P99:
                worst = closest(worst, name, what, late["p99_s"], block["mtu_frame_s"])
                if late["p99_s"] > block["mtu_frame_s"]:
                    problems.append(f"{name}: p99 {what} {late['p99_s'] * 1e3:.2f} ms > one "
                                    f"MTU frame ({block['mtu_frame_s'] * 1e3:.2f} ms)")
    return {"ok": not problems, "problems": problems, "worst": worst}


def closest(worst: dict | None, where: str, what: str, p99_s: float,
            bound_s: float) -> dict | None:
    """The p99 lateness nearest its bound (one MTU frame time) so far: how much room a run
    that kept fidelity had left, or how far one that lost it went."""
    ratio = p99_s / bound_s if bound_s else float("inf")
    if worst is not None and worst["ratio"] >= ratio:
        return worst
    return {"where": where, "what": what, "p99_s": p99_s, "bound_s": bound_s,
            "ratio": round(ratio, 3)}
