"""Operator actions on a running lab: a link down or up, a PFC storm from a host, a variant of
a lab brought up under its own name. The tasks (``invoke action.*``) and the checks call
these; they work on the live lab and, where it makes sense, on the simulated one.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..fabric.model.watchdog import FABRIC, STORM_CHECK
from .errors import LabError
from .topology import Endpoint, Link, Topology

RESTORE_SLACK_S = 0.1  # past the last restoration a storm's watchdogs may report


def find_link(topo: Topology, a: str, b: str) -> Link:
    """The link between ``a`` and ``b``, each a node or ``node:iface``; one line naming the
    lab's file when there is none or more than one."""
    def matches(end: Endpoint, spec: str) -> bool:
        node, _, iface = spec.partition(":")
        return end.node == node and (not iface or end.iface == iface)

    found = [k for k in topo.links
             if (matches(k.a, a) and matches(k.b, b)) or (matches(k.a, b) and matches(k.b, a))]
    if not found:
        raise LabError(f"{topo.path}: no link between {a} and {b}")
    if len(found) > 1:
        raise LabError(f"{topo.path}: {len(found)} links between {a} and {b}: name the "
                       f"interfaces ({', '.join(f'{k.a} - {k.b}' for k in found)})")
    return found[0]


def set_link(lab, a: str, b: str, up: bool) -> Link:
    """Both ends of the link between ``a`` and ``b`` down or up, as a pulled cable: a switch
    end through its agent (its routes through the port go, or come back), a host end with
    ``ip link`` in the host (live; the simulator downs both directions of the wire from the
    switch end)."""
    link = find_link(lab.topology, a, b)
    ends = (link.a, link.b)
    if not any(lab.topology.nodes[e.node].is_switch for e in ends):
        raise LabError(f"link {link.a} - {link.b}: neither end is a switch")
    for end in ends:
        if lab.topology.nodes[end.node].is_switch:
            lab.agent(end.node).set_port(lab.topology.port(end.node, end.iface), up)
        elif lab.runtime_name != "sim":
            proc = lab.exec(end.node, ["ip", "link", "set", "dev", end.iface,
                                       "up" if up else "down"], timeout=10)
            if proc.returncode:
                raise LabError(f"{end.node}: ip link set {end.iface}: {proc.stderr.strip()}")
    return link


@dataclass(frozen=True)
class Storm:
    """What ``traffic.storm`` reports: PFC frames sent, and the first and last send times."""

    host: str
    priority: int
    frames: int
    first: float
    last: float


def pfc_storm(lab, host: str, priority: int, seconds: float) -> Storm:
    """A host pauses ``priority`` on its link for ``seconds`` (a broken NIC's PFC storm):
    ``traffic.storm`` in its namespace live, frames on its wire simulated (``Lab.storm``).
    The watchdogs run in fabric time (x S) otherwise, 600 s of wall time for 200 ms at
    S = 3000, so for the storm and its restoration window every switch runs the
    ``storm-check`` profile (the configured times as the lab's own clock), then ``fabric``
    again."""
    if host not in {h.name for h in lab.topology.hosts}:
        raise LabError(f"lab {lab.name} has no host {host!r}")
    switches = [s for s in lab.topology.switches]
    window = max((wd.restoration_time_ms / 1000 + s.config.qos.pfc_wd_poll_interval_ms / 1000
                  for s in switches for wd in s.config.qos.pfc_wd.values()), default=0.0)
    for switch in switches:
        lab.agent(switch.name).pfc_watchdog(STORM_CHECK)
    try:
        out = lab.storm(host, priority, seconds).result()
        lab.wait(lab.wall_s(window + RESTORE_SLACK_S))  # the restoration, in the lab's clock
    finally:
        for switch in switches:
            lab.agent(switch.name).pfc_watchdog(FABRIC)
    return Storm(host, priority, out["frames"], out["first"], out["last"])


# --- variants --------------------------------------------------------------------------


def as_shipped(data: dict) -> None:
    """No edit: a fresh copy of the lab as shipped, for a check whose outcome must not
    depend on what ran on the lab before it (neighbour caches, its clock, a failed link)."""


def without_pfc(data: dict) -> None:
    """Every port's ``pfc_enable`` removed: the RoCE PG becomes lossy."""
    for entry in data.get("PORT_QOS_MAP", {}).values():
        entry.pop("pfc_enable", None)


def headroom_of(xoff: int) -> Callable[[dict], None]:
    """Every lossless profile's headroom (its ``xoff``) set to ``xoff`` bytes."""
    def edit(data: dict) -> None:
        for profile in data.get("BUFFER_PROFILE", {}).values():
            if "xoff" in profile:
                profile["xoff"] = str(xoff)
    return edit


def without_watchdog(data: dict) -> None:
    """The PFC watchdog off: no ``PFC_WD`` table, no ``pfcwd_sw_enable``."""
    data.pop("PFC_WD", None)
    for entry in data.get("PORT_QOS_MAP", {}).values():
        entry.pop("pfcwd_sw_enable", None)


def write_variant(source: Path, name: str, out: Path, edit: Callable[[dict], None] | None = None,
                  nic_edit: Callable[[dict], None] | None = None,
                  hosts: tuple[str, ...] = ()) -> Path:
    """A copy of the lab folder of ``source`` (its clab file) in ``out``, named ``name``,
    every switch config passed through ``edit`` and, for ``hosts``, a NIC settings file of
    their own passed through ``nic_edit`` (bound with their ``rocelab.nic`` label). Returns
    the new clab file. ``out`` is replaced."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(source.parent, out, ignore=shutil.ignore_patterns("*.clab.yml"))
    doc = yaml.safe_load(source.read_text())
    doc["name"] = name
    if edit is not None:
        for config in sorted((out / "configs").glob("*/config_db.json")):
            data = json.loads(config.read_text())
            edit(data)
            config.write_text(json.dumps(data, indent=4) + "\n")
    if nic_edit is not None:
        nodes = doc["topology"]["nodes"]
        for host in hosts:
            current = _nic_file(doc, host)
            if current is None:
                raise LabError(f"{source}: host {host} has no rocelab.nic label to re-mark")
            data = yaml.safe_load((out / current).read_text())
            nic_edit(data)
            mine = Path("nic") / f"{host}.yml"
            (out / mine).parent.mkdir(exist_ok=True)
            (out / mine).write_text(yaml.safe_dump(data, sort_keys=False))
            nodes[host].setdefault("labels", {})["rocelab.nic"] = str(mine)
    clab = out / f"{name}.clab.yml"
    clab.write_text(yaml.safe_dump(doc, sort_keys=False))
    return clab


def _nic_file(doc: dict, host: str) -> str | None:
    """The NIC settings file a host's labels (its own, else its kind's) name."""
    node = doc["topology"]["nodes"].get(host)
    if node is None:
        return None
    own = (node.get("labels") or {}).get("rocelab.nic")
    kind = doc["topology"].get("kinds", {}).get(node.get("kind", ""), {})
    return own or (kind.get("labels") or {}).get("rocelab.nic")


def dscp_remarked(dscp: int) -> Callable[[dict], None]:
    """A NIC settings edit: RoCE data sent with ``dscp``."""
    def edit(data: dict) -> None:
        data.setdefault("roce", {})["dscp"] = dscp
    return edit

