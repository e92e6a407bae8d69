"""The traffic AI training puts on a fabric, as RoCE flows between a lab's hosts, and the
runner that drives ``nic.endpoint`` processes in the hosts and gathers their results.

- incast: N senders to one receiver (a parameter server, the last stage of a reduction);
- all-to-all: every host to every other (expert parallelism, shuffles);
- ring all-reduce: host i sends to host i+1 in 2(N-1) steps of size/N, each step waiting
  for the previous step's chunk from host i-1 (data parallel gradient synchronisation), so
  the slowest link paces the whole ring.

Every flow is one RC QP. QPNs, starting PSNs and UDP source ports are agreed here, as
connection set-up would; source ports differ per flow, so ECMP spreads them.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..nic.settings import NicSettings
from ..labs.topology import Node
from ..nic.codec import FRAME_OVERHEAD
from ..nic.rc import Operation

if TYPE_CHECKING:  # the lab is the caller's; patterns only read it
    from ..labs.lab import Lab

SENDER_QPN = 0x100
RECEIVER_QPN = 0x800000  # QPNs are 24 bits: senders and receivers never meet, at any size
SPORT_BASE = 0xC000  # UDP source ports from the dynamic range, 0xC000..0xFFFF, reused
SPORTS = 0x10000 - SPORT_BASE  # past that many flows (all-to-all at fabric scale)
# Packets a QP keeps in flight. A NIC bounds RDMA WRITEs only by the PSN space, so the
# window is wide: congestion control and PFC, not the window, must keep queues in check.
WINDOW = 1024
RTO_FLOOR_S = 0.5  # live wall time: scheduling hiccups must not look like losses
START_WAIT_S = 60.0  # live wall time for endpoints to spawn and be told go, at most
ACK_DELAYS_PER_TIMEOUT = 8  # a held ACK goes out well before the sender's timer fires
DEFAULT_SPEED_MBPS = 100_000


NicOverrides = dict[str, dict[str, dict[str, Any]]]  # host or "*" -> section -> fields


class PatternError(RuntimeError):
    """A pattern that cannot run as asked (one line)."""


@dataclass(frozen=True)
class FlowSpec:
    """One RC QP: ``count`` messages of ``size`` bytes from ``src`` to ``dst``."""

    src: str
    dst: str
    size: int
    count: int
    op: Operation = "write"
    after: str | None = None  # a flow into ``src`` whose messages gate this one's
    qp: int | None = None  # which of several QPs between the same hosts

    @property
    def name(self) -> str:
        return f"{self.src}->{self.dst}" + ("" if self.qp is None else f"#{self.qp}")


def _pair(src: str, dst: str, size: int, count: int, qps: int) -> list[FlowSpec]:
    """``qps`` QPs between two hosts, as collective libraries open several per peer."""
    if qps < 1:
        raise PatternError(f"qps must be at least 1 (got {qps})")
    if qps == 1:
        return [FlowSpec(src, dst, size, count)]
    return [FlowSpec(src, dst, size, count, qp=q) for q in range(qps)]


def incast(dst: str, srcs: list[str], size: int, count: int, qps: int = 1) -> list[FlowSpec]:
    if dst in srcs:
        raise PatternError(f"incast: {dst} is both the receiver and a sender")
    return [f for src in srcs for f in _pair(src, dst, size, count, qps)]


def alltoall(hosts: list[str], size: int, count: int, qps: int = 1) -> list[FlowSpec]:
    return [f for a in hosts for b in hosts if a != b for f in _pair(a, b, size, count, qps)]


def ring_allreduce(hosts: list[str], size: int) -> list[FlowSpec]:
    """Reduce-scatter then all-gather around the ring: 2(N-1) chunks of size/N per hop."""
    n = len(hosts)
    if n < 2:
        raise PatternError("allreduce: a ring needs at least two hosts")
    chunk = math.ceil(size / n)
    return [FlowSpec(h, hosts[(i + 1) % n], chunk, 2 * (n - 1),
                     after=f"{hosts[i - 1]}->{h}") for i, h in enumerate(hosts)]


def retransmit_timeout(flows: list[FlowSpec], line_bps: float, mtu: int,
                       window: int = WINDOW, floor_s: float = RTO_FLOOR_S) -> float:
    """A timeout no lossless queue can trip: twice as long as the busiest receiver's port
    takes to drain every packet its flows can have in flight, and at least ``floor_s``
    (RTO_FLOOR_S of wall time live; the same span of fabric time simulated). A real NIC's
    timeout is ~10^4 round trips; the emulation cannot afford that, but it must never fire
    when nothing was lost."""
    in_flight: dict[str, int] = {}
    for f in flows:
        packets = min(window, math.ceil(f.size / mtu) * f.count)
        in_flight[f.dst] = in_flight.get(f.dst, 0) + packets
    return max(floor_s, 2 * max(in_flight.values()) * (mtu + FRAME_OVERHEAD) * 8 / line_bps)


def nic_settings(node: Node, overrides: NicOverrides | None) -> NicSettings:
    """A host's NIC settings with ``overrides`` (for the host, or ``*`` for every host)
    laid over its file's, section by section: how a check turns DCQCN off or mis-marks one
    host without editing the lab."""
    settings = node.nic or NicSettings()
    for key in ("*", node.name):
        for section, fields in (overrides or {}).get(key, {}).items():
            current = getattr(settings, section)
            settings = settings.model_copy(update={
                section: type(current).model_validate({**current.model_dump(), **fields})})
    return settings


def check_hosts(lab: Lab, flows: list[FlowSpec]) -> dict[str, Node]:
    """The lab's hosts by name, once every flow's ends are among them."""
    hosts = {h.name: h for h in lab.topology.hosts}
    for flow in flows:
        for end in (flow.src, flow.dst):
            if end not in hosts:
                raise PatternError(f"lab {lab.name} has no host {end!r} "
                                   f"(hosts: {', '.join(hosts)})")
        if flow.src == flow.dst:
            raise PatternError(f"flow {flow.name}: a host cannot send to itself")
    return hosts


def specs(lab: Lab, flows: list[FlowSpec], *, rto_s: float, timeout_s: float,
          nic: NicOverrides | None = None) -> dict[str, dict]:
    """Each host's endpoint spec (see ``nic.endpoint``)."""
    hosts = check_hosts(lab, flows)
    addresses = lab.host_addresses()
    out: dict[str, dict] = {}
    for name in sorted({f.src for f in flows} | {f.dst for f in flows}):
        node = hosts[name]
        if name not in addresses:
            raise PatternError(f"host {name} has no IP address on a lab link")
        iface = lab.topology.interfaces(name)[0]
        out[name] = {"iface": iface, "time_scale": lab.node_time_scale(name),
                     "speed_mbps": host_speed_mbps(lab, name),
                     "cable_m": lab.topology.cable_m(name, iface), "timeout_s": timeout_s,
                     "nic": nic_settings(node, nic).model_dump(),
                     "send": [], "receive": []}
    for i, flow in enumerate(flows):
        psn = (i * 0x10000 + 0xFFFF00) % (1 << 24)  # a few flows wrap their PSN on the way
        common = {"name": flow.name, "start_psn": psn, "sport": SPORT_BASE + i % SPORTS}
        out[flow.src]["send"].append({
            **common, "qpn": SENDER_QPN + i, "peer_qpn": RECEIVER_QPN + i,
            "peer_ip": addresses[flow.dst], "size": flow.size, "count": flow.count,
            "op": flow.op, "window": WINDOW, "rto_s": rto_s, "after": flow.after})
        out[flow.dst]["receive"].append({
            **common, "qpn": RECEIVER_QPN + i, "peer_qpn": SENDER_QPN + i,
            "peer_ip": addresses[flow.src], "count": flow.count,
            "ack_delay_s": rto_s / ACK_DELAYS_PER_TIMEOUT})
    return out


Progress = Callable[[int, int], None]  # (bytes acknowledged so far, bytes in all flows)


def host_speed_mbps(lab: Lab, host: str) -> int:
    """The speed of the switch port a host is wired to (PORT table), which its NIC runs at
    too; 100G when the peer is not a switch with a config."""
    topo = lab.topology
    for link in topo.links:
        for mine, peer in ((link.a, link.b), (link.b, link.a)):
            config = topo.nodes[peer.node].config if mine.node == host else None
            port = config.ports[topo.port(peer.node, peer.iface)] if config else None
            if port is not None:
                return port.speed_mbps
    return DEFAULT_SPEED_MBPS


class PatternRun:
    """Flows under way (``start``): ``flowing`` waits for a first acknowledged byte,
    ``wait`` for every flow and merges the hosts' reports."""

    def __init__(self, lab: Lab, flows: list[FlowSpec], pattern: str, scale: float,
                 rto_s: float, running: Any) -> None:
        self.lab, self.flows, self.pattern = lab, flows, pattern
        self.scale, self.rto_s, self.running = scale, rto_s, running

    def started(self, timeout_s: float = START_WAIT_S) -> bool:
        """Whether the flows' own clock has started (live: every endpoint told go, which
        can be seconds after ``start`` on a loaded machine): instants within a run count
        from there, as its ``elapsed_s`` does."""
        return self.running.started(timeout_s)

    def flowing(self, timeout_s: float) -> bool:
        return self.running.flowing(timeout_s)

    def wait(self) -> dict[str, Any]:
        done, elapsed = self.running.wait()
        return merge(self.pattern, self.lab.name, self.flows, done, self.scale, self.rto_s,
                     elapsed)


def start(lab: Lab, flows: list[FlowSpec], *, pattern: str, timeout_s: float = 60.0,
          nic: NicOverrides | None = None, progress: Progress | None = None) -> PatternRun:
    """Start ``flows`` through ``lab`` together; the lab runs its endpoints its own way
    (``Lab.start_endpoints``: processes in the hosts' namespaces live, NIC cores in the
    event loop simulated), from the same specs. They end when every flow is complete or at
    ``timeout_s`` (wall time of the live lab: the simulator runs the same span of fabric
    time)."""
    if not flows:
        raise PatternError(f"{pattern}: no flows")
    nodes = check_hosts(lab, flows)
    scale = lab.node_time_scale(flows[0].src)
    mtu = nic_settings(nodes[flows[0].src], nic).roce.mtu
    slowest = min(host_speed_mbps(lab, h) for h in {e for f in flows for e in (f.src, f.dst)})
    rto_s = retransmit_timeout(flows, slowest * 1e6 / scale, mtu,
                               floor_s=lab.sim_s(RTO_FLOOR_S))
    per_host = specs(lab, flows, rto_s=rto_s, timeout_s=timeout_s, nic=nic)
    total = sum(f.size * f.count for f in flows)
    running = lab.start_endpoints(
        per_host, timeout_s, on_progress=progress and (lambda acked: progress(acked, total)))
    return PatternRun(lab, flows, pattern, scale, rto_s, running)


def run(lab: Lab, flows: list[FlowSpec], *, pattern: str, timeout_s: float = 60.0,
        nic: NicOverrides | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """``start`` the flows and wait for them: every flow's results."""
    return start(lab, flows, pattern=pattern, timeout_s=timeout_s, nic=nic,
                 progress=progress).wait()


def merge(pattern: str, lab: str, flows: list[FlowSpec], done: dict[str, dict], scale: float,
          rto_s: float, elapsed: float) -> dict[str, Any]:
    """One record per flow from its sender's and its receiver's reports."""
    senders = {(host, s["name"]): s for host, r in done.items() for s in r["senders"]}
    receivers = {(host, r["name"]): r for host, rep in done.items() for r in rep["receivers"]}
    out = []
    for flow in flows:
        sender = senders[flow.src, flow.name]
        receiver = receivers[flow.dst, flow.name]
        complete = (receiver["messages"] == flow.count and sender["messages_done"] == flow.count
                    and not sender["failed"])
        sender = {k: v for k, v in sender.items() if k != "role"}
        out.append({**sender, "src": flow.src, "dst": flow.dst,
                    "time_scale": scale, "complete": complete,
                    "delivered_bytes": receiver["bytes"], "receiver": receiver})
    hosts = {host: {k: v for k, v in report.items()
                    if k not in ("event", "senders", "receivers")}
             for host, report in done.items()}
    return {"pattern": pattern, "lab": lab, "time_scale": scale, "rto_s": rto_s,
            "elapsed_s": elapsed, "complete": all(f["complete"] for f in out),
            "flows": out, "hosts": hosts}
