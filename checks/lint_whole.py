"""Lint rules on the lab as a whole: files that load and reference each other, wires that
reach a port, the same classes on every switch, hosts marking what their switch expects,
the DCQCN byte counter, tables not emulated, PGs buffermgrd derives. Each takes a ``Lab``
and yields ``Finding``s (``checks.lint`` runs them)."""
from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from ..fabric import tables
from ..fabric.config import ConfigError, SwitchConfig
from ..fabric.portmap import doubles, unmapped_reason
from ..fabric.qos import (pauses_sender, pg_of_tc, port_setting, qos_ports, tc_of_dscp,
                          tc_of_pcp)
from .port_roles import port_roles
from ..nic.settings import NicSettings
from ..labs.topology import Node
from .lint_model import Finding, Lab, Settings, listed

def references(lab: Lab) -> Iterator[Finding]:
    """A config that does not load (a dangling map/profile/scheduler name among others) is
    refused by the switch: nothing else can be judged on it. A table rocelab does not
    emulate is not such a mistake (SONiC takes it): ``not_emulated`` reports it."""
    for node, error in lab.load_errors.items():
        if _refused_table(error) is None:
            yield Finding("error", "references", str(lab.topology.nodes[node].config_path),
                          error.where, str(error).split(": ", 1)[-1],
                          "define the missing entry or correct the name (the message says "
                          "which)")


def _refused_table(error: ConfigError) -> str | None:
    """The table a load error refuses as not emulated (``fabric.tables.REFUSED``), if so."""
    where = error.where
    return where if where and "|" not in where and tables.refused_reason(where) else None


def wiring(lab: Lab) -> Iterator[Finding]:
    """Every wire of a switch must be one PORT entry of its own (by lanes, alias or the
    default layout, as SONiC-VS maps them): else the lab does not come up."""
    fix = ("give the PORT entry the wire's lanes (from the bound lanemap.ini, or the default "
           "layout's) or alias it as the wire")
    for name, config in lab.switches():
        node, found = lab.topology.nodes[name], lab.wires[name]
        for iface, port in found.items():
            if port is None:
                yield Finding("error", "wiring", config.path, f"PORT|{iface}|lanes",
                              f"{name}:{iface} is wired but "
                              f"{unmapped_reason(config, iface, node.lanemap, node.lanemap_path)}",
                              fix)
        for port, ifaces in doubles(found).items():
            yield Finding("error", "wiring", config.path, f"PORT|{port}|lanes",
                          f"{' and '.join(f'{name}:{i}' for i in ifaces)} are wired to one "
                          f"PORT entry of {config.path}, {port}: a port has one wire", fix)


def dcqcn_byte_counter(lab: Lab) -> Iterator[Finding]:
    """What the firmware byte counter does to recovery after a cut, derived from the NIC
    file at the fastest port it drives. On (the firmware's 32767 B), a byte stage comes far
    sooner than the increase timer: each halves the gap to the target rate, so a cut QP is
    back near its target within microseconds, and under incast senders swing between the
    floor and line rate, as the firmware's rules make them (an independent reading agrees
    event by event: docs/concepts.md, "DCQCN: the paper and the firmware"). Off, recovery
    waits for the timer alone, which the firmware does not ship. Information, not a
    fault: one finding per NIC file."""
    fastest: dict[Path, tuple[float, NicSettings]] = {}
    for host, _iface, _switch, config, name in _nic_ports(lab):
        port = config.ports.get(name)
        if port is not None and host.nic_path is not None:
            bps = port.speed_mbps * 1e6
            if bps > fastest.get(host.nic_path, (0.0, host.nic))[0]:
                fastest[host.nic_path] = (bps, host.nic)
    for path, (bps, nic) in fastest.items():
        d = nic.dcqcn
        if not d.enabled or d.mode != "firmware":
            continue
        # fast recovery halves the gap to the target: within 1 % after this many stages
        stages = math.ceil(math.log2(100))
        timer = f"{stages} x {d.rpg_time_reset} us = {stages * d.rpg_time_reset / 1e3:g} ms"
        if not d.rpg_byte_reset:
            yield Finding("info", "dcqcn-byte-counter", str(path), "dcqcn.rpg_byte_reset",
                          f"the byte counter is off, unlike the firmware (32767 B): after a "
                          f"cut the rate is back within 1 % of its target only after "
                          f"{timer} of timer stages",
                          "leave rpg_byte_reset out (the firmware's 32767) unless the lab "
                          "reproduces a model without it")
            continue
        stage_us = d.rpg_byte_reset * 8 / bps * 1e6
        if stage_us >= d.rpg_time_reset:
            continue
        yield Finding("info", "dcqcn-byte-counter", str(path), "dcqcn.rpg_byte_reset",
                      f"a byte stage every {d.rpg_byte_reset} B, {stage_us:.2g} us at "
                      f"{bps / 1e9:g}G against a {d.rpg_time_reset} us increase timer: after "
                      f"a cut the rate is back within 1 % of its target in {stages} stages, "
                      f"{stages * stage_us:.2g} us at line rate (the timer alone: {timer}), "
                      "so under incast senders swing between the floor and line rate and "
                      "PFC fires more than with the counter off, as the firmware does",
                      "nothing to fix in the NIC file: it is the firmware's behaviour "
                      "(rpg_byte_reset 0 models a NIC without the counter)")


def consistency(lab: Lab) -> Iterator[Finding]:
    """A hop-by-hop lossless path needs every switch to agree on the RoCE class: one switch
    with a different DSCP -> TC or lossless priority breaks it in the middle. Agreement is
    per port role (``checks.port_roles``): uplinks and downlinks may use different maps by
    design, as long as each role's are the same on every switch."""
    roles = port_roles(lab.topology, lab.port)
    seen: dict[tuple[str, str], tuple[str, str]] = {}  # (role, fact) -> (file, value) first
    for node, config in lab.switches():
        for role, fact, value, where in _class_facts(node, config, lab.settings, roles):
            first = seen.setdefault((role, fact), (config.path, value))
            if first[1] != value:
                yield Finding("error", "consistency", config.path, where,
                              f"{fact} on ports {role} is {value} here but {first[1]} in "
                              f"{first[0]}: the lossless class changes from hop to hop",
                              "use the same QoS maps and pfc_enable on every switch's ports "
                              "of that role")


def _class_facts(node: str, config: SwitchConfig, s: Settings,
                 roles: dict[tuple[str, str], str]) -> Iterator[tuple[str, str, str, str]]:
    """(role, fact, value, where) of the lossless classes on ``node``'s wired QoS ports."""
    by_role: dict[str, list[str]] = {}
    for port in qos_ports(config):
        if (node, port) in roles:
            by_role.setdefault(roles[node, port], []).append(port)
    for role, ports in by_role.items():
        for dscp in dict.fromkeys(c.dscp for c in s.classes if c.dscp is not None):
            tcs = {tc_of_dscp(config, p, dscp) for p in ports}
            for tc, name in sorted(tcs, key=str):
                yield role, f"DSCP {dscp} -> TC", str(tc), f"DSCP_TO_TC_MAP|{name}|{dscp}"
        lossless = {listed(port_setting(config.qos, p, "pfc_enable")[0]) for p in ports}
        source = port_setting(config.qos, ports[0], "pfc_enable")[1] or ports[0]
        for value in sorted(lossless):
            yield (role, "lossless priorities (pfc_enable)", value or "none",
                   f"PORT_QOS_MAP|{source}|pfc_enable")


def host_dscp(lab: Lab) -> Iterator[Finding]:
    """The NIC and the switch port it is wired to must agree on the RoCE class: a host that
    marks another DSCP or priority than the switch treats as lossless sends RoCE into a lossy
    place, whatever the switches' own chain looks like."""
    for host, iface, switch, config, port in _nic_ports(lab):
        yield from _host_on_port(host, iface, host.nic, switch, config, port)


def _nic_ports(lab: Lab) -> Iterator[tuple[Node, str, str, SwitchConfig, str]]:
    """(host, its interface, switch, switch config, SONiC port) for every host with NIC
    settings, per interface wired to a switch whose config loaded."""
    for host in lab.topology.hosts:
        if host.nic is None:
            continue
        for iface in lab.topology.interfaces(host.name):
            peer = lab.topology.peer(host.name, iface)
            config = lab.configs.get(peer.node) if peer else None
            port = lab.wires[peer.node].get(peer.iface) if config is not None else None
            if port is not None:  # an unmapped wire is the wiring rule's finding
                yield host, iface, peer.node, config, port


def _host_on_port(host: Node, iface: str, nic: NicSettings, switch: str,
                  config: SwitchConfig, port: str) -> Iterator[Finding]:
    def bad(field: str, why: str, fix: str) -> Finding:
        return Finding("error", "host-dscp", str(host.nic_path), field,
                       f"{host.name}:{iface} -> {switch} {port}: {why}", fix)

    roce, cnp = nic.roce, nic.cnp
    enabled, _ = port_setting(config.qos, port, "pfc_enable")
    tc, _ = tc_of_dscp(config, port, roce.dscp)
    pg, _ = pg_of_tc(config, port, tc)
    lossless = pauses_sender(config, port, tc)
    if not lossless:
        yield bad("roce.dscp",
                  f"DSCP {roce.dscp} -> TC {tc} (PG {pg}), which is not lossless there (PFC "
                  f"on {listed(enabled) or 'no priority'}): the host's RoCE drops under incast",
                  "set roce.dscp to the DSCP the switches map to the lossless TC")
    elif roce.priority != tc:
        yield bad("roce.priority",
                  f"RoCE is lossless in TC {tc} there, but the NIC sends on priority "
                  f"{roce.priority}: the switch's PFC for priority {tc} does not pause it",
                  f"set roce.priority to {tc}")
    pcp_tc, dot1p_map = tc_of_pcp(config, port, roce.priority)
    if dot1p_map is not None and lossless and pcp_tc != tc:
        yield bad("roce.priority",
                  f"PCP {roce.priority} -> TC {pcp_tc} but DSCP {roce.dscp} -> TC {tc}: the "
                  "host's RoCEv1 (classified by PCP) is lossy", f"set roce.priority to {tc}")
    cnp_tc, _ = tc_of_dscp(config, port, cnp.dscp)
    if cnp_tc in enabled:
        yield bad("cnp.dscp",
                  f"CNP DSCP {cnp.dscp} -> TC {cnp_tc}, a lossless TC: CNPs are paused with "
                  "the data they should slow down",
                  "set cnp.dscp to the DSCP the switches map to the CNP TC (SONiC: 48)")


def not_emulated(lab: Lab) -> Iterator[Finding]:
    """Tables a real dump carries that are not in force here: say so, so nobody believes
    they are (skipped ones, whose data-plane meaning is lost, as warnings; one that stops
    the switch, which SONiC would take, as an error)."""
    for node, error in lab.load_errors.items():
        table = _refused_table(error)
        if table is not None:
            yield Finding("error", "not-emulated", str(lab.topology.nodes[node].config_path),
                          table, f"the switch refuses the config: {tables.refused_reason(table)}"
                          " (SONiC takes it; rocelab does not emulate it)",
                          f"remove {table}, or run without it: label the node "
                          f"{tables.UNEMULATED_LABEL}: skip")
    for name, config in lab.switches():
        for table in config.skipped:
            yield Finding("warning", "not-emulated", config.path, table,
                          f"skipped: {tables.refused_reason(table)} (label "
                          f"{tables.UNEMULATED_LABEL}: skip)",
                          "expect the fabric to forward as if this table were absent")
        for table in config.not_emulated:
            yield Finding("info", "not-emulated", config.path, table,
                          f"accepted, not emulated: {tables.not_emulated_reason(table)}",
                          "nothing to do: it has no data-plane meaning here")
        if config.other_line_cards:
            yield Finding("info", "not-emulated", config.path, "QUEUE",
                          "QUEUE and BUFFER_QUEUE entries of other line cards' system ports ("
                          f"{', '.join(config.other_line_cards)}): accepted, not emulated (one "
                          "switch is emulated; the chassis fabric to the others is not)",
                          "nothing to do: this switch's own system ports are its queues")


def derived_pgs(lab: Lab) -> Iterator[Finding]:
    """Lossless PGs the config leaves out and buffermgrd makes at boot (traditional buffer
    model, the platform's pg_profile_lookup.ini): in force, though not in the file. Those it
    cannot make stay lossy, which ``lossless-chain`` reports."""
    for _, config in lab.switches():
        for derived in config.derived_pgs:
            if derived.profile is not None:
                yield Finding("info", "derived-pgs", config.path, f"BUFFER_PG|{derived.key}",
                              f"not in the config: buffermgrd makes it at boot, "
                              f"{derived.profile} from {derived.why}",
                              "nothing to do (write it into the config to pin it)")
