"""Reference scenarios (``checks/test_reference.py``): published congestion-control results
a lab must reproduce, measured from the switches' counters, captures and the endpoints'
results the way the other congestion checks measure them.

A reference lab says which scenarios it holds and who plays which role in
``reference.yml`` next to its clab file (``load``); the expected figures and their sources
are the checks' and docs/checks.md's ("Reference scenarios"). Nothing here knows a lab's
names: the bottleneck, the senders' switch ports and the RoCE class come from the
topology, the switches' maps and the hosts' NIC settings.

Throughput is read from switch port counters taken at chosen instants while the flows run
(``windows``): every scenario's flows are long enough to outlast the run and are stopped by
the run's time limit, so no flow finishing early hands its share to the others.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..traffic import patterns

REFERENCE_FILE = "reference.yml"
SCENARIOS = ("incast", "pfc_timing", "unfairness")
PAUSE_QUANTUM_BITS = 512  # one PFC quantum: the time of 512 bits at the port's speed
MAX_QUANTA = 0xFFFF


class ReferenceError(ValueError):
    """A reference.yml problem: one line naming the file and the field."""


@dataclass(frozen=True)
class Attachment:
    """Where a host meets the fabric: its switch, that switch's SONiC port, its speed."""

    host: str
    switch: str
    port: str
    speed_bps: float


def attachment(topo, host: str) -> Attachment:
    """The switch port ``host`` is wired to (the first of its links to a switch)."""
    for link in topo.links:
        for mine, peer in ((link.a, link.b), (link.b, link.a)):
            node = topo.nodes[peer.node]
            if mine.node == host and node.is_switch:
                port = topo.port(peer.node, peer.iface)
                return Attachment(host, peer.node, port,
                                  node.config.ports[port].speed_mbps * 1e6)
    raise ReferenceError(f"{topo.path}: host {host} is not wired to a switch")


def load(topo) -> dict[str, dict[str, Any]]:
    """The lab's reference scenarios (empty when it ships none), each checked for the
    hosts it names; an unknown scenario or host is one line naming the file and field."""
    path = Path(topo.path).parent / REFERENCE_FILE
    if not path.is_file():
        return {}
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise ReferenceError(f"{path}: not YAML{where}") from None
    if not isinstance(doc, dict):
        raise ReferenceError(f"{path}: a mapping of scenario -> roles, not {type(doc).__name__}")
    hosts = {h.name for h in topo.hosts}
    for name, roles in doc.items():
        if name not in SCENARIOS:
            raise ReferenceError(f"{path}: {name}: not a reference scenario "
                                 f"({', '.join(SCENARIOS)})")
        if not isinstance(roles, dict):
            raise ReferenceError(f"{path}: {name}: a mapping of role -> host(s)")
        for role, value in roles.items():
            if role == "run_us":
                if not isinstance(value, (int, float)) or value <= 0:
                    raise ReferenceError(f"{path}: {name}.run_us: a positive number of us")
                continue
            for host in value if isinstance(value, list) else [value]:
                if host not in hosts:
                    raise ReferenceError(f"{path}: {name}.{role}: {host!r} is not a host of "
                                         f"the lab ({', '.join(sorted(hosts))})")
    return doc


Counters = dict[str, dict]  # switch -> its counters


def snapshot(lab) -> Counters:
    return {s.name: lab.agent(s.name).counters() for s in lab.topology.switches}


@dataclass
class Windows:
    """Counters of every switch at the run's instants (fabric seconds from its start) and
    the endpoints' results at its end."""

    times: list[float]
    counters: list[Counters]
    result: dict

    def _delta(self, i: int, j: int, switch: str, port: str, key: str) -> int:
        return (self.counters[j][switch]["ports"][port][key]
                - self.counters[i][switch]["ports"][port][key])

    def rate_bps(self, i: int, j: int, switch: str, port: str, key: str) -> float:
        """Bits per second ``port`` of ``switch`` received (``rx_bytes``) or sent
        (``tx_bytes``) between instants ``i`` and ``j``: frame bytes, as the wire carries
        them."""
        return self._delta(i, j, switch, port, key) * 8 / (self.times[j] - self.times[i])

    def pfc_sent(self, i: int, j: int) -> int:
        """PFC frames every switch sent between instants ``i`` and ``j``."""
        return sum(sum(port["pfc_tx"]) - sum(self.counters[i][sw]["ports"][name]["pfc_tx"])
                   for sw, c in self.counters[j].items() for name, port in c["ports"].items())

    def marks(self, i: int, j: int) -> int:
        return sum(port["ecn_marked"] - self.counters[i][sw]["ports"][name]["ecn_marked"]
                   for sw, c in self.counters[j].items() for name, port in c["ports"].items())


def flow_size(line_bps: float, run_s: float, mtu: int) -> int:
    """One message a sender cannot finish within the run even alone at line rate, so
    every flow is still sending when the run's time limit stops it."""
    return math.ceil(2 * line_bps * run_s / 8 / mtu) * mtu


def windows(lab, flows: list[patterns.FlowSpec], run_s: float, instants: Iterable[float],
            nic: patterns.NicOverrides | None = None, pattern: str = "reference") -> Windows:
    """Run ``flows`` for ``run_s`` of fabric time, every switch's counters read at each of
    ``instants`` (fabric seconds from the start, ascending, within the run) and at its
    end. ``lab.wait`` runs the lab's own clock: simulated time in simulation, wall time
    live (where S stretches it: the instants are multiplied by S there)."""
    scale = lab.node_time_scale(flows[0].src)
    marks = sorted(instants)
    if marks and not 0 < marks[0] <= marks[-1] < run_s:
        raise ValueError(f"instants {marks} not within the run's {run_s} s")
    running = patterns.start(lab, flows, pattern=pattern, nic=nic,
                             timeout_s=lab.wall_s(run_s * scale))
    running.started()  # the instants, as the run's elapsed_s, count from the flows' go
    times, counters, at = [0.0], [snapshot(lab)], 0.0
    for t in marks:
        lab.wait(lab.wall_s((t - at) * scale))
        at = t
        times.append(t)
        counters.append(snapshot(lab))
    result = running.wait()
    times.append(result["elapsed_s"] / scale)
    counters.append(snapshot(lab))
    return Windows(times, counters, result)
