"""What a lab is to the code that drives it, whatever runs it: the ``Lab`` protocol.

Checks (``checks/``), traffic (``traffic/``) and tasks ask only what is written here, so the
same check runs on a live lab (``labs.live.LiveLab``: namespaces or containers, real frames,
wall time) and on a simulated one (``labs.runtimes.sim.SimLab``: virtual time in this
process). Times a caller gives are live wall seconds; a simulated lab maps them to the same
span of fabric time (``sim_s``). ``tests/unit/test_lab_protocol.py`` holds both
implementations to every member, with the same parameters.
"""
from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable
from ipaddress import IPv4Interface, IPv6Interface
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from .errors import LabError
from .records import LinkStatus, NodeStatus, Ping
from .topology import Topology


class SwitchAgent(Protocol):
    """A switch's control interface: ``fabric.client.AgentClient`` live, a simulated
    switch's own answers in virtual time."""

    def ping(self) -> dict: ...

    def counters(self) -> dict: ...

    def set_port(self, port: str, up: bool) -> None: ...

    def clear_fidelity(self) -> None: ...

    def clear_watermarks(self, kind: str) -> None: ...

    def pfc_watchdog(self, profile: str) -> None: ...

    def trace_start(self, path: str | Path, interval_ms: float = 1.0,
                    ports: list[str] | None = None) -> dict: ...

    def trace_stop(self) -> int: ...


class FrameCapture(Protocol):
    """Frames seen on a lab's wires, both directions, as each node saw them."""

    def __enter__(self) -> FrameCapture: ...

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None: ...

    def wait_quiet(self, quiet: float = 0.2, timeout: float = 3.0) -> bool: ...

    def frames(self, match: Callable[[bytes], bool] | None = None) -> list: ...

    def kernel_drops(self) -> int: ...


class Flows(Protocol):
    """RoCE endpoints under way in a lab's hosts (``Lab.start_endpoints``)."""

    def started(self, timeout_s: float) -> bool: ...

    def flowing(self, timeout_s: float) -> bool: ...

    def wait(self) -> tuple[dict[str, dict], float]: ...


class PfcStorm(Protocol):
    """A PFC storm under way from a host (``Lab.storm``)."""

    def result(self) -> dict: ...


class Lab(Protocol):
    """A lab, up: its topology, its nodes, its switches' agents, traffic and frames."""

    @property
    def name(self) -> str: ...

    topology: Topology

    @property
    def topology_path(self) -> str: ...

    @property
    def runtime_name(self) -> str: ...

    # --- time: live wall seconds in, the lab's own clock inside ---------------------------

    def sim_s(self, wall_s: float) -> float: ...

    def wall_s(self, lab_s: float) -> float: ...

    def wait(self, wall_s: float) -> None: ...

    def wait_for(self, condition: Callable[[], bool], seconds: float,
                 step: float = 0.05) -> bool: ...

    def node_time_scale(self, node: str) -> float: ...

    # --- the lab itself -------------------------------------------------------------------

    def variant(self, clab: str) -> Lab: ...

    def down(self, logs: Path | None = None) -> None: ...

    def status(self) -> tuple[list[NodeStatus], list[LinkStatus]]: ...

    def agent(self, node: str) -> SwitchAgent: ...

    # --- nodes ----------------------------------------------------------------------------

    def node(self, name: str) -> NodeHandle: ...

    def exec(self, node: str, argv: list[str],
             timeout: float | None = None) -> subprocess.CompletedProcess: ...

    def popen(self, node: str, argv: list[str], **kwargs: Any) -> subprocess.Popen: ...

    # --- hosts ----------------------------------------------------------------------------

    def host_addresses(self) -> dict[str, str]: ...

    def host_interfaces(self) -> dict[str, list[IPv4Interface | IPv6Interface]]: ...

    def default_gateway(self, host: str) -> str | None: ...

    def route(self, host: str, dst_ip: str) -> tuple[str, str | None]: ...

    def mac(self, host: str, iface: str) -> str: ...

    def host_iface(self, host: str, ip: str) -> str: ...

    def neighbour(self, host: str, iface: str, ip: str) -> str | None: ...

    def ping(self, src: str, dst: str, dst_ip: str, count: int = 2) -> Ping: ...

    def ping_all(self, dst: str | None = None) -> list[Ping]: ...

    def trace(self, src: str, dst_ip: str, max_hops: int = 8) -> list[str]: ...

    # --- traffic and frames ---------------------------------------------------------------

    def start_endpoints(self, specs: dict[str, dict], timeout_s: float,
                        on_progress: Callable[[int], object] | None = None) -> Flows: ...

    def storm(self, host: str, priority: int, seconds: float) -> PfcStorm: ...

    def capture(self, *, where: Iterable[tuple[str, str]] | None = None,
                pcap_dir: Path | None = None, match: Callable[[bytes], bool] | None = None,
                bpf: list[tuple[int, int, int, int]] | None = None) -> FrameCapture: ...

    def send_frames(self, host: str, iface: str, frames: Iterable[bytes]) -> None: ...


class NodeHandle:
    """One node of a lab, to run things in: ``lab.node("h1").exec(["ip", "-j", "addr"])``."""

    def __init__(self, lab: Lab, name: str) -> None:
        if name not in lab.topology.nodes:
            raise LabError(f"lab {lab.name} has no node {name!r} "
                           f"(nodes: {', '.join(lab.topology.nodes)})")
        self.lab = lab
        self.name = name

    def exec(self, argv: list[str], timeout: float | None = None) -> subprocess.CompletedProcess:
        """``argv`` inside the node, to completion: its exit code and output (text)."""
        return self.lab.exec(self.name, argv, timeout)

    def popen(self, argv: list[str], **kwargs: Any) -> subprocess.Popen:
        """``argv`` started inside the node and left running (``subprocess.Popen``'s
        keywords)."""
        return self.lab.popen(self.name, argv, **kwargs)
