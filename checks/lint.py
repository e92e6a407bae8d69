"""Static lint of a lab's switch configs: does the lossless RoCE path hold together?

No root and no running lab: it reads the topology and every switch's config_db.json and
reports findings (severity, file, ``TABLE|key|field``, why it matters, the fix). Each rule is
a small function with a stable id taking a ``Lab`` and yielding ``Finding``s. The host rule
reads each host's NIC settings file (nic.settings) against the switch port it is wired to, and
its findings name the NIC file and field (``roce.dscp``). What the lab means to carry (RoCE
DSCP and priority, CNP DSCP, lossless priorities) comes from its own files
(``checks.classes``); a lab with two lossless priorities has its chain checked on both.
See docs/lint.md.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Literal

from ..fabric import tables
from ..fabric.config import BufferProfile, ConfigError, SwitchConfig
from ..fabric.config_load import load as load_config
from ..fabric.portmap import doubles, unmapped_reason, wiring as wire_ports
from ..fabric.qos import (HeadroomParams, bound, pauses_sender, pg_of_tc, port_setting,
                          qos_ports, queue_of_tc, required_headroom, tc_of_dscp, tc_of_pcp)
from .classes import RoceClass, expectations
from .port_roles import port_roles
from .thresholds import xoff_trigger
from ..nic.settings import NicSettings
from ..fabric.buffermgrd import PG_LOOKUP_TARGET
from ..labs.topology import Node, Topology
from ..labs.topology import load as load_topology

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
ECN_ON_GREEN = {"ecn_green", "ecn_green_yellow", "ecn_green_red", "ecn_all"}
MIN_MARKING_PERCENT = 50  # ecn-probability: below this, marking is too weak for DCQCN


@dataclass(frozen=True)
class Finding:
    severity: Severity
    rule: str
    file: str
    where: str  # TABLE|key|field
    why: str  # what is wrong and why it matters
    fix: str


@dataclass(frozen=True)
class Settings:
    """What the lab means to carry: RoCE on ``priority`` marked ``dscp``, CNPs ``cnp_dscp``,
    and ``more`` lossless classes (another lossless priority, and the DSCP mapped to it)."""

    priority: int
    dscp: int | None
    cnp_dscp: int
    headroom: HeadroomParams = HeadroomParams()
    more: tuple[RoceClass, ...] = ()
    source: str = "given"

    @property
    def classes(self) -> tuple[RoceClass, ...]:
        return (RoceClass(self.dscp, self.priority), *self.more)

    @property
    def lossless(self) -> frozenset[int]:
        return frozenset(c.priority for c in self.classes)

    def one(self, c: RoceClass) -> "Settings":
        """These settings for class ``c`` alone: what the per-class rules look at."""
        return Settings(c.priority, c.dscp, self.cnp_dscp, self.headroom, (), self.source)


@dataclass
class Lab:
    """The topology and each switch's config (None where it failed to load), and which PORT
    entry each wire of a loaded one is (None: none is, ``fabric.portmap``)."""

    topology: Topology
    settings: Settings
    configs: dict[str, SwitchConfig | None] = field(default_factory=dict)
    load_errors: dict[str, ConfigError] = field(default_factory=dict)
    wires: dict[str, dict[str, str | None]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        for name, config in self.switches():
            self.wires[name] = wire_ports(config, self.topology.interfaces(name),
                                          self.topology.nodes[name].lanemap)

    def port(self, node: str, iface: str) -> str | None:
        """The PORT entry on a switch's wire (None: none answers it, or no config loaded)."""
        return self.wires.get(node, {}).get(iface)

    def qos_ports(self, node: str, config: SwitchConfig) -> list[str]:
        """The switch's QoS ports that a wire of the lab uses: the ports its traffic crosses.
        A real platform's config often leaves its unused ports lossy; that is no finding
        about this lab."""
        wired = set(self.wires.get(node, {}).values())
        return [port for port in qos_ports(config) if port in wired]

    def switches(self) -> Iterator[tuple[str, SwitchConfig]]:
        """(node, config) for every switch whose config loaded."""
        for name, config in self.configs.items():
            if config is not None:
                yield name, config


Rule = Callable[[Lab], Iterator[Finding]]


# --------------------------------------------------------------------------- rules


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


def lossless_chain(lab: Lab) -> Iterator[Finding]:
    """DSCP -> TC -> PG (PFC on, lossless buffer) and TC -> queue (ECN on), and the same PCP
    to the same TC for RoCEv1: the first broken hop puts RoCE in a lossy place."""
    hosts_class = lab.settings.classes[0]
    roles = port_roles(lab.topology, lab.port)
    for c in lab.settings.classes:
        s = lab.settings.one(c)
        broken, holds = [], set()
        for node, config in lab.switches():
            for port in lab.qos_ports(node, config):
                found = list(_chain_on_port(config, port, s))
                broken += [(roles.get((node, port)), f) for f in found]
                if not any(f.severity == "error" for f in found):
                    holds.add(roles.get((node, port)))
        for role, finding in broken:
            yield finding if c == hosts_class or role in holds else _by_design(finding, c)


def _by_design(finding: Finding, c: RoceClass) -> Finding:
    """A lossless class the configs carry but no host's NIC marks, broken on a port role
    where no switch keeps it lossless: a per-port-role design (the class is lossless on
    another role only), so a warning; only that class's traffic, which the lab's hosts do
    not send, would be lost there."""
    if finding.severity != "error":
        return finding
    return replace(finding, severity="warning",
                   why=f"{finding.why} (priority {c.priority} is lossless on other port "
                       "roles only, and no host of the lab marks it)")


def _chain_on_port(config: SwitchConfig, port: str, s: Settings) -> Iterator[Finding]:
    def bad(where: str, why: str, fix: str, severity: Severity = "error") -> Finding:
        return Finding(severity, "lossless-chain", config.path, where, why, fix)

    if s.dscp is None:  # a lossless priority no DSCP maps to: RoCEv1 (PCP) only
        yield from _pcp_only(config, port, s, bad)
        return
    tc, dscp_map = tc_of_dscp(config, port, s.dscp)
    if dscp_map is None:
        yield bad(f"PORT_QOS_MAP|{port}|dscp_to_tc_map",
                  f"no DSCP map on {port}: RoCEv2 (DSCP {s.dscp}) lands in TC 0, lossy",
                  "bind a DSCP_TO_TC_MAP on this port or on PORT_QOS_MAP|global")
        return
    if tc != s.priority:
        yield bad(f"DSCP_TO_TC_MAP|{dscp_map}|{s.dscp}",
                  f"DSCP {s.dscp} -> TC {tc} on {port}, not the lossless TC {s.priority}: "
                  "RoCE is classified lossy and drops under incast",
                  f'map "{s.dscp}": "{s.priority}"')
        return
    enabled, source = port_setting(config.qos, port, "pfc_enable")
    if s.priority not in enabled:
        yield bad(f"PORT_QOS_MAP|{source or port}|pfc_enable",
                  f"priority {s.priority} has no PFC on {port} (pfc_enable "
                  f"{','.join(map(str, sorted(enabled))) or 'empty'}): the switch never pauses "
                  "the sender, so a full buffer drops RoCE", f"add {s.priority} to pfc_enable")
    pg, _ = pg_of_tc(config, port, tc)
    yield from _pfc_pg(config, port, pg, s, bad)
    yield from _lossless_pg(config, port, tc, pg, bad)
    queue, _ = queue_of_tc(config, port, tc)
    yield from _pfc_queue(config, port, queue, s, bad)
    yield from _ecn_queue(config, port, tc, queue, bad)
    yield from _dot1p(config, port, s, bad)


def _pcp_only(config: SwitchConfig, port: str, s: Settings, bad) -> Iterator[Finding]:
    """A lossless priority that no DSCP reaches is still a class (RoCEv1, tagged RoCE): its
    PCP must reach its TC, and its PG and queue must be lossless and ECN-marked."""
    tc, name = tc_of_pcp(config, port, s.priority)
    if name is None or tc != s.priority:
        return  # no dot1p map, or the priority is used for something else: nothing to judge
    pg, _ = pg_of_tc(config, port, tc)
    yield from _lossless_pg(config, port, tc, pg, bad)
    queue, _ = queue_of_tc(config, port, tc)
    yield from _pfc_queue(config, port, queue, s, bad)
    yield from _ecn_queue(config, port, tc, queue, bad)


def _pfc_pg(config: SwitchConfig, port: str, pg: int, s: Settings, bad) -> Iterator[Finding]:
    """PFC frames the PG sends must name the RoCE priority, else they pause the wrong one."""
    name, _ = bound(config.qos, port, "pfc_to_pg_map")
    if name is not None:
        target = config.qos.pfc_priority_to_pg[name].get(s.priority)
        if target != pg:
            yield bad(f"PFC_PRIORITY_TO_PRIORITY_GROUP_MAP|{name}|{s.priority}",
                      f"priority {s.priority} -> PG {target} but RoCE fills PG {pg} on {port}: "
                      "the PG that fills is not the one PFC accounts",
                      f'map "{s.priority}": "{pg}"')


def _lossless_pg(config: SwitchConfig, port: str, tc: int, pg: int,
                 bad) -> Iterator[Finding]:
    profile = config.qos.buffer_pg.get((port, pg))
    if profile is None:
        derived = next((d for d in config.derived_pgs if d.port == port and pg in d.pgs), None)
        why, fix = "", "add BUFFER_PG with a lossless profile (xon, xoff, size)"
        if derived is not None:  # buffermgrd could not make it
            why = f", and buffermgrd makes none at boot ({derived.why})"
            fix = f"give buffermgrd what it lacks (above), or {fix}"
        elif config.buffer_model == "traditional" and not config.pg_lookup:
            fix += (f", or bind the platform's pg_profile_lookup.ini to {PG_LOOKUP_TARGET}: "
                    "buffermgrd makes it at boot from there, as on a SONiC switch")
        yield bad(f"BUFFER_PG|{port}|{pg}|profile",
                  f"TC {tc} -> PG {pg} on {port}, which has no BUFFER_PG{why}: no XOFF "
                  "threshold and no headroom, so PFC is never sent and RoCE drops", fix)
    elif config.qos.buffer_profiles[profile].xoff is None:
        yield bad(f"BUFFER_PROFILE|{profile}|xoff",
                  f"PG {pg} on {port} uses {profile}, which has no xoff: a lossy PG never "
                  "sends PFC", "use a lossless profile (xon, xoff, size = xon + xoff)")


def _pfc_queue(config: SwitchConfig, port: str, queue: int, s: Settings,
               bad) -> Iterator[Finding]:
    """A PFC frame received for the RoCE priority must stop the queue RoCE is in."""
    name, _ = bound(config.qos, port, "pfc_to_queue_map")
    if name is not None:
        target = config.qos.pfc_priority_to_queue[name].get(s.priority)
        if target != queue:
            yield bad(f"MAP_PFC_PRIORITY_TO_QUEUE|{name}|{s.priority}",
                      f"a pause for priority {s.priority} stops queue {target}, but RoCE leaves "
                      f"{port} by queue {queue}: the upstream keeps sending into a full buffer",
                      f'map "{s.priority}": "{queue}"')


def _ecn_queue(config: SwitchConfig, port: str, tc: int, queue: int,
               bad) -> Iterator[Finding]:
    entry = config.qos.queues.get((port, queue))
    if entry is None or entry.wred_profile is None:
        yield bad(f"QUEUE|{port}|{queue}|wred_profile",
                  f"TC {tc} -> queue {queue} on {port} has no WRED profile: no ECN marks, so "
                  "DCQCN never slows senders and PFC does all the work (congestion spreading)",
                  "set wred_profile to a WRED_PROFILE with ecn ecn_all (or ecn_green)")
        return
    wred = config.qos.wred_profiles[entry.wred_profile]
    if wred.ecn not in ECN_ON_GREEN or wred.green is None:
        yield bad(f"WRED_PROFILE|{wred.name}|ecn",
                  f"queue {queue} on {port} uses {wred.name} with ecn {wred.ecn}: green (RoCE) "
                  "packets are never CE-marked, so DCQCN has no signal",
                  "set ecn to ecn_all (or ecn_green) with green thresholds")


def _dot1p(config: SwitchConfig, port: str, s: Settings, bad) -> Iterator[Finding]:
    """RoCEv1 has no IP header: the PCP alone must bring it to the same lossless TC."""
    tc, name = tc_of_pcp(config, port, s.priority)
    if name is None:
        yield bad(f"PORT_QOS_MAP|{port}|dot1p_to_tc_map",
                  f"no dot1p map on {port}: RoCEv1 (PCP {s.priority}) lands in TC 0, lossy",
                  "bind a DOT1P_TO_TC_MAP (needed only if RoCEv1 or tagged RoCE uses the port)",
                  "warning")
    elif tc != s.priority:
        yield bad(f"DOT1P_TO_TC_MAP|{name}|{s.priority}",
                  f"PCP {s.priority} -> TC {tc} on {port}, but DSCP {s.dscp} -> TC "
                  f"{s.priority}: RoCEv1 is lossy while RoCEv2 is lossless",
                  f'map "{s.priority}": "{s.priority}"')


def headroom(lab: Lab) -> Iterator[Finding]:
    """Every lossless PG must hold what still arrives after XOFF (SONiC's formula), and
    reserve xon + xoff unless the headroom comes from a shared headroom pool."""
    for _, config in lab.switches():
        for (port, pg), name in sorted(config.qos.buffer_pg.items()):
            profile = config.qos.buffer_profiles[name]
            if profile.xoff is not None:
                yield from _pg_headroom(config, port, pg, profile, lab.settings)


def _pg_headroom(config: SwitchConfig, port: str, pg: int, profile: BufferProfile,
                 s: Settings) -> Iterator[Finding]:
    where = f"BUFFER_PROFILE|{profile.name}"
    speed = config.ports[port].speed_mbps
    cable = config.qos.cable_length_m.get(port)
    if cable is None:
        yield Finding("warning", "headroom", config.path, f"CABLE_LENGTH|*|{port}",
                      f"{port} has no cable length: its headroom for PG {pg} cannot be checked",
                      'add it to CABLE_LENGTH (e.g. "40m")')
        return
    try:
        need = required_headroom(speed, cable, config.ports[port].mtu, s.headroom)
    except KeyError:
        yield Finding("info", "headroom", config.path, f"PORT|{port}|speed",
                      f"no pause-quanta figure for {speed} Mb/s: headroom not checked", "-")
        return
    if profile.xoff < need.xoff:
        yield Finding("error", "headroom", config.path, f"{where}|xoff",
                      f"xoff {profile.xoff} < {need.xoff} needed on {port} ({speed // 1000}G, "
                      f"{cable} m): {need.why}. Bytes in flight after XOFF overflow the "
                      "headroom and a lossless PG drops", f"set xoff to at least {need.xoff}")
    pool = config.qos.buffer_pools[profile.pool]
    shared = pool.xoff > 0
    xon = profile.xon or 0
    if shared and profile.xoff and profile.size >= xon + profile.xoff:
        yield Finding("warning", "headroom", config.path, f"{where}|size",
                      f"size {profile.size} holds xon {xon} + xoff {profile.xoff}, but "
                      f"{profile.pool} has a shared headroom pool (xoff {pool.xoff}): the "
                      "headroom is counted twice, reserved per PG and shared",
                      f"set size to {xon} (xon alone with a shared headroom pool)")
    if not shared and profile.size < xon + profile.xoff:
        yield Finding("warning", "headroom", config.path, f"{where}|size",
                      f"size {profile.size} < xon {xon} + xoff {profile.xoff} with no shared "
                      f"headroom pool ({profile.pool} xoff 0): the reserved part cannot hold "
                      "the headroom", f"set size to {xon + profile.xoff}")


def ecn_below_xoff(lab: Lab) -> Iterator[Finding]:
    """The DCQCN design rule: ECN must mark before PFC fires, or pauses spread upstream."""
    for c, config, port in _class_ports(lab):
        tc = tc_of_dscp(config, port, c.dscp)[0] if c.dscp is not None else c.priority
        pg, _ = pg_of_tc(config, port, tc)
        queue, _ = queue_of_tc(config, port, tc)
        profile_name = config.qos.buffer_pg.get((port, pg))
        entry = config.qos.queues.get((port, queue))
        if profile_name is None or entry is None or entry.wred_profile is None:
            continue  # lossless-chain reports the missing hop
        wred = config.qos.wred_profiles[entry.wred_profile]
        profile = config.qos.buffer_profiles[profile_name]
        if wred.green is not None and profile.xoff is not None:
            yield from _ecn_vs_xoff(config, port, wred.name, wred.green.min_threshold,
                                    wred.green.max_threshold, profile)


def _class_ports(lab: Lab) -> Iterator[tuple[RoceClass, SwitchConfig, str]]:
    """(class, switch config, port) for every lossless class on every wired QoS port."""
    for c in lab.settings.classes:
        for node, config in lab.switches():
            for port in lab.qos_ports(node, config):
                yield c, config, port


def _ecn_vs_xoff(config: SwitchConfig, port: str, wred: str, low: int, high: int,
                 profile: BufferProfile) -> Iterator[Finding]:
    trigger, how = xoff_trigger(config, profile)
    where = f"WRED_PROFILE|{wred}|green_min_threshold"
    if low >= trigger:
        yield Finding("error", "ecn-below-xoff", config.path, where,
                      f"ECN starts at {low} B but {port} sends XOFF at {trigger:.0f} B ({how}): "
                      "PFC fires before any CE mark, pauses spread upstream and DCQCN never "
                      "acts", f"lower green_min_threshold below {trigger:.0f}")
    elif high > trigger:
        yield Finding("warning", "ecn-below-xoff", config.path,
                      f"WRED_PROFILE|{wred}|green_max_threshold",
                      f"ECN band {low}..{high} B reaches past the XOFF point {trigger:.0f} B on "
                      f"{port} ({how}): marking is still weak when PFC fires",
                      f"lower green_max_threshold below {trigger:.0f}")


def ecn_probability(lab: Lab) -> Iterator[Finding]:
    """Hosts that run DCQCN need marks as the queue builds: a low marking probability marks
    a few frames per band and lets the queue run on to PFC (NVIDIA's RoCE default is
    100 % over 150 KB..1.5 MB; SONiC's generic 5 % marks late)."""
    if not any(h.nic is not None and h.nic.dcqcn.enabled for h in lab.topology.hosts):
        return
    s = lab.settings
    for node, config in lab.switches():
        seen = set()
        for port in lab.qos_ports(node, config):
            queue, _ = queue_of_tc(config, port, tc_of_dscp(config, port, s.dscp)[0])
            entry = config.qos.queues.get((port, queue))
            wred = config.qos.wred_profiles.get(entry.wred_profile) if entry and \
                entry.wred_profile else None
            if wred is None or wred.green is None or wred.name in seen:
                continue
            seen.add(wred.name)
            if wred.green.drop_probability < MIN_MARKING_PERCENT:
                yield Finding("warning", "ecn-probability", config.path,
                              f"WRED_PROFILE|{wred.name}|green_drop_probability",
                              f"RoCE marks at most {wred.green.drop_probability} % of frames "
                              f"between {wred.green.min_threshold} and "
                              f"{wred.green.max_threshold} B while the hosts run DCQCN: the "
                              "signal comes late and the queue runs on to PFC",
                              f"set green_drop_probability to 100 (at least "
                              f"{MIN_MARKING_PERCENT})")


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


def cnp_queue(lab: Lab) -> Iterator[Finding]:
    """CNPs are the brake of DCQCN: they must not be paused with the data they slow down,
    nor starved behind it. A queue of their own that PFC never stops serves them in time,
    strict or not."""
    s = lab.settings
    for node, config in lab.switches():
        for port in lab.qos_ports(node, config):
            yield from _cnp_on_port(config, port, s)


def _cnp_on_port(config: SwitchConfig, port: str, s: Settings) -> Iterator[Finding]:
    tc, name = tc_of_dscp(config, port, s.cnp_dscp)
    enabled, _ = port_setting(config.qos, port, "pfc_enable")
    if tc in s.lossless or tc in enabled:
        yield Finding("error", "cnp-queue", config.path, f"DSCP_TO_TC_MAP|{name}|{s.cnp_dscp}",
                      f"CNP DSCP {s.cnp_dscp} -> TC {tc}, a lossless TC on {port}: CNPs are "
                      "paused together with the data they should slow down",
                      f'map "{s.cnp_dscp}" to its own TC and queue (SONiC: 6)')
        return
    queue, queue_map = queue_of_tc(config, port, tc)
    where = f"TC_TO_QUEUE_MAP|{queue_map}|{tc}" if queue_map else f"QUEUE|{port}|{queue}"
    pausing = sorted(p for p in enabled if _paused_queue(config, port, p) == queue)
    if pausing:
        yield Finding("error", "cnp-queue", config.path, where,
                      f"CNP DSCP {s.cnp_dscp} -> queue {queue} on {port}, which PFC for "
                      f"priority {_list(frozenset(pausing))} stops: CNPs are paused together "
                      "with the data they should slow down",
                      "send the CNP TC to a queue no PFC priority pauses (SONiC: 6)")
        return
    data = {queue_of_tc(config, port, _class_tc(config, port, c))[0] for c in s.classes}
    sched = _scheduler(config, port, queue)
    ahead = sorted(q for q in data if _strictly_before(config, port, q, queue, sched))
    if ahead:
        yield Finding("error", "cnp-queue", config.path, f"QUEUE|{port}|{queue}|scheduler",
                      f"CNP queue {queue} on {port} is served after the STRICT RoCE queue "
                      f"{ahead[0]}: while RoCE is backlogged, the CNPs that would slow it "
                      "starve", f"give queue {queue} a STRICT scheduler above the RoCE queues")
        return
    shared = sorted(t for t in _classes_in_use(config, port)
                    if t != tc and queue_of_tc(config, port, t)[0] == queue)
    if shared and (sched is None or sched.type != "STRICT"):
        yield Finding("warning", "cnp-queue", config.path, where,
                      f"CNP queue {queue} on {port} also carries TC "
                      f"{_list(frozenset(shared))}, and is not strict: CNPs can wait behind "
                      "that traffic", "give the CNPs a queue of their own (SONiC: 6)")


def _class_tc(config: SwitchConfig, port: str, c: RoceClass) -> int:
    return tc_of_dscp(config, port, c.dscp)[0] if c.dscp is not None else c.priority


def _paused_queue(config: SwitchConfig, port: str, priority: int) -> int | None:
    """The queue a PFC frame for ``priority`` stops on ``port``: ``pfc_to_queue_map``'s,
    else queue = priority (SAI's default)."""
    name, _ = bound(config.qos, port, "pfc_to_queue_map")
    return config.qos.pfc_priority_to_queue[name].get(priority) if name else priority


def _classes_in_use(config: SwitchConfig, port: str) -> set[int]:
    """TCs 0..7, and any higher TC the port's DSCP or dot1p map puts traffic in (SONiC's
    TCs run to 15; dual-ToR templates use TC 8)."""
    mapped: set[int] = set()
    for binding, maps in (("dscp_to_tc_map", config.qos.dscp_to_tc),
                          ("dot1p_to_tc_map", config.qos.dot1p_to_tc)):
        name, _ = bound(config.qos, port, binding)
        if name is not None:
            mapped |= set(maps[name].values())
    return set(range(8)) | mapped


def _strictly_before(config: SwitchConfig, port: str, data: int, cnp: int, cnp_sched) -> bool:
    """Whether a backlogged ``data`` queue is always served before the ``cnp`` queue: it
    is STRICT and the CNPs' is not, or is STRICT with a lower index (ASICs serve strict
    queues highest index first)."""
    sched = _scheduler(config, port, data)
    if data == cnp or sched is None or sched.type != "STRICT":
        return False
    return cnp_sched is None or cnp_sched.type != "STRICT" or data > cnp


def _scheduler(config: SwitchConfig, port: str, queue: int):
    entry = config.qos.queues.get((port, queue))
    if entry is None or entry.scheduler is None:
        return None
    return config.qos.schedulers[entry.scheduler]


def pfcwd_coverage(lab: Lab) -> Iterator[Finding]:
    """A port that honours PFC can be frozen by a storming neighbour: the watchdog is what
    breaks the storm (and a deadlock)."""
    for node, config in lab.switches():
        for port in lab.qos_ports(node, config):
            enabled, _ = port_setting(config.qos, port, "pfc_enable")
            if not enabled:
                continue
            if port not in config.qos.pfc_wd:
                yield Finding("warning", "pfcwd-coverage", config.path, f"PFC_WD|{port}",
                              f"{port} has PFC on {_list(enabled)} but no PFC watchdog: a PFC "
                              "storm pauses it forever",
                              'add PFC_WD|<port> (action drop, detection_time 200, '
                              'restoration_time 200)')
            watched, source = port_setting(config.qos, port, "pfcwd_sw_enable")
            if not enabled <= watched:
                yield Finding("warning", "pfcwd-coverage", config.path,
                              f"PORT_QOS_MAP|{source or port}|pfcwd_sw_enable",
                              f"{port}: priorities {_list(enabled - watched)} have PFC but no "
                              "watchdog", f"set pfcwd_sw_enable to {_list(enabled)}")


def _list(priorities: frozenset[int]) -> str:
    return ",".join(map(str, sorted(priorities)))


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
        lossless = {_list(port_setting(config.qos, p, "pfc_enable")[0]) for p in ports}
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
                  f"on {_list(enabled) or 'no priority'}): the host's RoCE drops under incast",
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


RULES: dict[str, Rule] = {
    "references": references,
    "wiring": wiring,
    "lossless-chain": lossless_chain,
    "headroom": headroom,
    "ecn-below-xoff": ecn_below_xoff,
    "ecn-probability": ecn_probability,
    "dcqcn-byte-counter": dcqcn_byte_counter,
    "cnp-queue": cnp_queue,
    "pfcwd-coverage": pfcwd_coverage,
    "consistency": consistency,
    "host-dscp": host_dscp,
    "not-emulated": not_emulated,
    "derived-pgs": derived_pgs,
}


# --------------------------------------------------------------------------- running


def load_lab(spec: str | Path, priority: int | None = None, dscp: int | None = None,
             cnp_dscp: int | None = None) -> Lab:
    """The topology and every switch config; a config that fails to load is kept as its
    error. What the lab carries comes from its own files (``checks.classes``); ``priority``,
    ``dscp`` and ``cnp_dscp`` override it."""
    topology = load_topology(spec, configs=False)
    configs: dict[str, SwitchConfig | None] = {}
    errors: dict[str, ConfigError] = {}
    for node in topology.switches:
        try:
            configs[node.name] = load_config(node.config_path, _unemulated(topology, node),
                                             node.pg_lookup_path)
        except ConfigError as e:
            configs[node.name] = None
            errors[node.name] = e
    return Lab(topology, settings_of(topology, configs, priority, dscp, cnp_dscp),
               configs, errors)


def settings_of(topology: Topology, configs: Mapping[str, SwitchConfig | None],
                priority: int | None = None, dscp: int | None = None,
                cnp_dscp: int | None = None) -> Settings:
    """Lint settings from the lab's expectations (``checks.classes.expectations``)."""
    e = expectations(topology, configs, dscp, priority, cnp_dscp)
    return Settings(e.roce.priority, e.roce.dscp, e.cnp_dscp, more=e.classes[1:],
                    source=e.source)


def _unemulated(topology: Topology, node: Node) -> tables.UnemulatedPolicy:
    """The node's rocelab.unemulated-tables label; a bad value is a finding like a bad config."""
    try:
        return tables.policy(node.labels.get(tables.UNEMULATED_LABEL))
    except ValueError as e:
        raise ConfigError(f"{topology.path}: topology.nodes.{node.name}.labels."
                          f"{tables.UNEMULATED_LABEL}: {e}") from None


def lint(lab: Lab) -> list[Finding]:
    """Every rule's findings, each reported once, errors first."""
    unique = {}
    for rule in RULES.values():
        for f in rule(lab):
            unique.setdefault((f.rule, f.file, f.where, f.severity), f)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(unique.values(), key=lambda f: (order[f.severity], f.file, f.rule, f.where))


def counts(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(f.severity == s for f in findings) for s in SEVERITIES}


def as_json(lab: Lab, findings: list[Finding]) -> str:
    return json.dumps({"lab": lab.topology.name, "topology": str(lab.topology.path),
                       "settings": {"priority": lab.settings.priority,
                                    "dscp": lab.settings.dscp,
                                    "cnp_dscp": lab.settings.cnp_dscp,
                                    "lossless_priorities": sorted(lab.settings.lossless),
                                    "classes": [asdict(c) for c in lab.settings.classes],
                                    "source": lab.settings.source},
                       "counts": counts(findings),
                       "findings": [asdict(f) for f in findings]}, indent=2)
