"""Lint rules along the lossless chain of each port a RoCE class crosses: the PG and queue
that pause, their headroom, the ECN band below the XOFF point, the CNP's queue, the PFC
watchdog. Each takes a ``Lab`` and yields ``Finding``s (``checks.lint`` runs them)."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ..fabric.config import BufferProfile, SwitchConfig
from ..fabric.qos import (bound, pg_of_tc, port_setting, queue_of_tc, required_headroom,
                          tc_of_dscp, tc_of_pcp)
from .classes import RoceClass
from .port_roles import port_roles
from .thresholds import xoff_trigger
from ..fabric.buffermgrd import PG_LOOKUP_TARGET
from .lint_model import Finding, Lab, Settings, Severity, listed

ECN_ON_GREEN = {"ecn_green", "ecn_green_yellow", "ecn_green_red", "ecn_all"}
MIN_MARKING_PERCENT = 50  # ecn-probability: below this, marking is too weak for DCQCN


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
    mapped = _pfc_map(config, port, "pfc_to_pg_map", s.priority)
    if mapped is not None and mapped[1] != pg:
        name, target = mapped
        yield bad(f"PFC_PRIORITY_TO_PRIORITY_GROUP_MAP|{name}|{s.priority}",
                  f"priority {s.priority} -> PG {target} but RoCE fills PG {pg} on {port}: "
                  "the PG that fills is not the one PFC accounts",
                  f'map "{s.priority}": "{pg}"')


def _pfc_map(config: SwitchConfig, port: str, field: str,
             priority: int) -> tuple[str, int | None] | None:
    """The PFC map bound to ``port`` as ``field`` (PORT_QOS_MAP) and where it sends
    ``priority``: (its name, the PG or queue); None when none is bound."""
    name, _ = bound(config.qos, port, field)
    if name is None:
        return None
    table = (config.qos.pfc_priority_to_pg if field == "pfc_to_pg_map"
             else config.qos.pfc_priority_to_queue)
    return name, table[name].get(priority)


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
    mapped = _pfc_map(config, port, "pfc_to_queue_map", s.priority)
    if mapped is not None and mapped[1] != queue:
        name, target = mapped
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
                      f"priority {listed(frozenset(pausing))} stops: CNPs are paused together "
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
                      f"{listed(frozenset(shared))}, and is not strict: CNPs can wait behind "
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
                              f"{port} has PFC on {listed(enabled)} but no PFC watchdog: a PFC "
                              "storm pauses it forever",
                              'add PFC_WD|<port> (action drop, detection_time 200, '
                              'restoration_time 200)')
            watched, source = port_setting(config.qos, port, "pfcwd_sw_enable")
            if not enabled <= watched:
                yield Finding("warning", "pfcwd-coverage", config.path,
                              f"PORT_QOS_MAP|{source or port}|pfcwd_sw_enable",
                              f"{port}: priorities {listed(enabled - watched)} have PFC but no "
                              "watchdog", f"set pfcwd_sw_enable to {listed(enabled)}")
