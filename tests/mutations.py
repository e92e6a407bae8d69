"""Known config defects, each seeded into a copy of a lab, for the mutation tests
(tests/unit/test_mutations.py, docs/real-configs.md "Mutation testing").

Each defect edits one switch's ``config_db.json``: the first switch, by name, with a host
wired to it, at that host's port. What it edits comes from the lab's own files (the hosts'
NIC file for the RoCE and CNP classes, the switch's bound maps), so the same defect seeds
into the shipped labs and into every corpus lab alike.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rocelab.labs import topology


@dataclass(frozen=True)
class Target:
    """Where a defect goes: a switch's config, the PORT a host is wired to, the classes."""
    switch: str
    config_path: Path
    pg_lookup_path: Path | None  # the bound pg_profile_lookup.ini buffermgrd derives PGs from
    port: str
    roce_dscp: int
    roce_priority: int
    cnp_dscp: int


def target(clab: Path) -> Target:
    """The first switch, by name, with a host on one of its wires, and that host's port."""
    topo = topology.load(clab)
    for node in sorted(topo.switches, key=lambda n: n.name):
        for iface in topo.interfaces(node.name):
            peer = topo.peer(node.name, iface)
            host = topo.nodes[peer.node] if peer is not None else None
            if host is not None and not host.is_switch and host.nic is not None:
                return Target(node.name, node.config_path, node.pg_lookup_path,
                              topo.port(node.name, iface),
                              host.nic.roce.dscp, host.nic.roce.priority, host.nic.cnp.dscp)
    raise ValueError(f"{clab}: no switch has a host with a NIC file wired to it")


def _field(config: dict, port: str, name: str) -> str | None:
    """A PORT_QOS_MAP field on ``port``, else ``global``'s, as SONiC binds it."""
    qos = config["PORT_QOS_MAP"]
    for key in (port, "global"):
        if qos.get(key, {}).get(name):
            return qos[key][name]
    return None


def _priorities(text: str | None) -> list[int]:
    return [int(p) for p in (text or "").split(",") if p]


def _roce_tc(config: dict, t: Target) -> int:
    return int(config["DSCP_TO_TC_MAP"][_field(config, t.port, "dscp_to_tc_map")][str(t.roce_dscp)])


def _paused_queues(config: dict, port: str) -> set[int]:
    """The queues PFC stops on ``port``: pfc_to_queue_map's for each enabled priority, or
    queue = priority without one."""
    enabled = _priorities(_field(config, port, "pfc_enable"))
    name = _field(config, port, "pfc_to_queue_map")
    if name is None:
        return set(enabled)
    table = config["MAP_PFC_PRIORITY_TO_QUEUE"][name]
    return {int(table.get(str(p), p)) for p in enabled}


def _own_map(config: dict, port: str, field: str, table: str) -> dict[str, str]:
    """A private copy of the map ``field`` binds on ``port``, bound to that port alone, so
    editing it changes nothing on the switch's other ports."""
    name = _field(config, port, field)
    mine = f"{name}_MUTATED"
    config[table][mine] = dict(config[table][name])
    config["PORT_QOS_MAP"].setdefault(port, {})[field] = mine
    return config[table][mine]


def pfc_off(config: dict, t: Target) -> None:
    """The RoCE priority out of ``pfc_enable`` on the host's port."""
    left = [p for p in _priorities(_field(config, t.port, "pfc_enable")) if p != t.roce_priority]
    config["PORT_QOS_MAP"].setdefault(t.port, {})["pfc_enable"] = ",".join(map(str, left))


def dscp_to_lossy_tc(config: dict, t: Target) -> None:
    """The switch's DSCP_TO_TC_MAP sends the RoCE DSCP to TC 0 (every port that binds it)."""
    config["DSCP_TO_TC_MAP"][_field(config, t.port, "dscp_to_tc_map")][str(t.roce_dscp)] = "0"


def tc_to_lossy_queue(config: dict, t: Target) -> None:
    """The host port's TC_TO_QUEUE_MAP sends the RoCE TC to the lowest queue PFC never stops."""
    tc = _roce_tc(config, t)
    queue = min(set(range(8)) - _paused_queues(config, t.port))
    _own_map(config, t.port, "tc_to_queue_map", "TC_TO_QUEUE_MAP")[str(tc)] = str(queue)


def cnp_into_lossless(config: dict, t: Target) -> None:
    """The host port's DSCP_TO_TC_MAP sends the CNP DSCP to the RoCE TC."""
    tc = _roce_tc(config, t)
    _own_map(config, t.port, "dscp_to_tc_map", "DSCP_TO_TC_MAP")[str(t.cnp_dscp)] = str(tc)


def no_watchdog(config: dict, t: Target) -> None:
    """No PFC_WD table on the switch."""
    del config["PFC_WD"]


def headroom_short(config: dict, t: Target) -> None:
    """Every lossless profile's xoff an eighth of what it was, far below any need: the
    switch's BUFFER_PROFILEs and, where buffermgrd derives the PGs, every row of the bound
    pg_profile_lookup.ini (``speed cable size xon xoff ...``)."""
    for profile in config.get("BUFFER_PROFILE", {}).values():
        if "xoff" in profile:
            profile["xoff"] = str(int(profile["xoff"]) // 8)
    if t.pg_lookup_path is not None:
        rows = []
        for line in t.pg_lookup_path.read_text().splitlines():
            cells = line.split()
            if len(cells) >= 5 and not line.lstrip().startswith("#"):
                cells[4] = str(int(cells[4]) // 8)
                line = " ".join(cells)
            rows.append(line + "\n")
        t.pg_lookup_path.write_text("".join(rows))


def ecn_off(config: dict, t: Target) -> None:
    """No wred_profile on the RoCE queue of the host's port (every QUEUE key covering it)."""
    name = _field(config, t.port, "tc_to_queue_map")
    queue = int(config["TC_TO_QUEUE_MAP"][name].get(str(_roce_tc(config, t)), _roce_tc(config, t)))
    for key, entry in config["QUEUE"].items():
        *_, port, queues = key.split("|")
        low, _, high = queues.partition("-")
        if port == t.port and int(low) <= queue <= int(high or low):
            entry.pop("wred_profile", None)


DEFECTS: dict[str, Callable[[dict, Target], None]] = {
    "pfc-off": pfc_off,
    "dscp-to-lossy-tc": dscp_to_lossy_tc,
    "tc-to-lossy-queue": tc_to_lossy_queue,
    "cnp-into-lossless": cnp_into_lossless,
    "no-watchdog": no_watchdog,
    "headroom-short": headroom_short,
    "ecn-off": ecn_off,
}


def seed(clab: Path, defect: str) -> Target:
    """Seed ``defect`` into the lab of ``clab`` (edited in place); where it went."""
    t = target(clab)
    config = json.loads(t.config_path.read_text())
    DEFECTS[defect](config, t)
    t.config_path.write_text(json.dumps(config, indent=2) + "\n")
    return t
