"""One generated switch's ``config_db.json`` and the hosts' NIC file: the lossless RoCE
profile, every number derived from the port speed, cable lengths, radix and RoCE class of a
``labs.generate_spec.Spec``.

The profile (the same tables the shipped labs carry):

- classes: the RoCE DSCP -> TC = the RoCE priority (PG and queue of the same number, PFC on
  it, WRED/ECN on its queue); the CNP DSCP -> TC = the CNP priority, a STRICT queue. Every
  other DSCP goes to TC dscp // 8 as SONiC's DSCP maps do, except that no other DSCP shares
  the lossless or the CNP class (it goes to the best-effort TC): a lossless class carrying
  unknown traffic spreads its pauses, a strict queue carrying bulk traffic starves the rest;
- headroom: SONiC's formula (``fabric.qos.required_headroom``, the one ``config.lint``
  checks) for the port's speed and cable, private to each PG (size = xon + xoff, no shared
  headroom pool), so that every lossless PG can be in XOFF at once, as in an all-to-all;
- buffer: an ASIC's packet buffer grows with its switching capacity; the ingress pool is
  ``ASIC_BUFFER_PER_GBPS`` x radix x speed, less the reserved headroom of the ports in use;
- ECN: marking from 1.5 KB per Gb/s of port speed (150 KB at 100G, the band NVIDIA's RoCE
  guides give) to ten times that, at most an eighth of the pool, with probability 100 % at
  the top of the band (NVIDIA's RoCE value: every ECT frame past it is marked); the lossless
  PG's
  dynamic_th is the smallest at which a lone congested PG reaches XOFF only past twice the
  top of the ECN band, so DCQCN acts before PFC and PFC still comes early;
- hosts: DCQCN as ConnectX firmware runs it, mlxconfig's names and defaults
  (``nic.settings.FIRMWARE_DEFAULTS``), as in the shipped labs' NIC files;
- cables: SONiC's defaults per neighbour role: 5 m to servers, 40 m leaf-spine, 300 m to the
  super-spines;
- schedulers and the PFC watchdog: SONiC's defaults (DWRR 14 lossy / 15 lossless, strict
  for CNPs; watchdog drop, 200 ms / 200 ms, polled every 200 ms).
"""
from __future__ import annotations

import json

from ..fabric.portmap import DEFAULT_LANES
from ..fabric.qos import HeadroomParams, required_headroom
from ..nic.settings import FIRMWARE_DEFAULTS

from .generate_spec import Fabric, Spec, Switch

LAB_NIC = "nic/default.yml"
CABLE_M = {"host-leaf": 5, "leaf-spine": 40, "spine-super": 300}
PORT_MTU = 9100
ROCE_PATH_MTU = 4096  # the RoCE payload AI fabrics run; the headroom formula assumes it
ASIC_BUFFER_PER_GBPS = 4400  # bytes: 25.6 Tb/s data-center ASICs carry about 113 MB
ECN_MIN_PER_GBPS = 1500  # bytes of queue per Gb/s of port speed where marking starts
ECN_SPAN = 10  # max threshold = ECN_SPAN x min threshold
ECN_POOL_FRACTION = 8  # ... and at most 1/8 of the ingress pool (small-radix switches)
ECN_PROBABILITY = 100  # % at the max threshold: NVIDIA's RoCE value (config.lint warns < 50)
XOFF_OVER_ECN = 2  # a lone PG's XOFF point at least this many times the ECN max
CELL = 128  # bytes, SONiC-VS's buffer cell
MAP = "AZURE"  # SONiC's name for its default maps
ROLE_TYPE = {"leaf": "ToRRouter", "spine": "LeafRouter", "super": "SpineRouter"}
ROLE_MAC = {"leaf": 1, "spine": 2, "super": 3}
SUPER_ASN = 65000
SPINE_ASN = 65100  # + the pod number in three tiers
LEAF_ASN_BASE = 4_200_000_000  # + the leaf number (RFC 6996 private 4-byte ASNs)
BGP_KEEPALIVE, BGP_HOLDTIME = "3", "9"
LANES = {100_000: 4, 400_000: 8}
WATCHDOG_MS = "200"
LOSSY_WEIGHT, LOSSLESS_WEIGHT = "14", "15"


def classes(spec: Spec) -> dict[int, int]:
    """DSCP -> TC: RoCE and CNPs alone in their classes, the rest by DSCP // 8."""
    reserved = {spec.roce_priority, spec.cnp_priority}
    best_effort = best_effort_tc(spec)
    special = {spec.roce_dscp: spec.roce_priority, spec.cnp_dscp: spec.cnp_priority}
    return {d: special.get(d, d // 8 if d // 8 not in reserved else best_effort)
            for d in range(64)}


def best_effort_tc(spec: Spec) -> int:
    """The lowest TC that is neither RoCE's nor the CNPs': lossy traffic's TC and PG."""
    return min(set(range(8)) - {spec.roce_priority, spec.cnp_priority})


def _ranges(kinds: list[str]) -> list[tuple[str, str]]:
    """[(index key, kind)] for queues/PGs 0..7, equal neighbours merged: ("0-2", "lossy")."""
    out, start = [], 0
    for i in range(1, len(kinds) + 1):
        if i == len(kinds) or kinds[i] != kinds[start]:
            out.append((str(start) if i - 1 == start else f"{start}-{i - 1}", kinds[start]))
            start = i
    return out


def _identity() -> dict[str, str]:
    return {str(i): str(i) for i in range(8)}


def buffers(spec: Spec, sw: Switch) -> tuple[dict, dict, dict]:
    """(BUFFER_POOL, BUFFER_PROFILE, WRED_PROFILE) tables, sized for this switch's ports."""
    speed = spec.speed_mbps
    gbps = speed // 1000
    params = HeadroomParams(lossless_mtu=ROCE_PATH_MTU)  # the NIC file's roce.mtu
    headroom = {m: required_headroom(speed, m, PORT_MTU, params)
                for m in sorted({p.cable_m for p in sw.ports})}
    total = ASIC_BUFFER_PER_GBPS * gbps * spec.radix // CELL * CELL
    shared = total - sum(headroom[p.cable_m].size for p in sw.ports)
    ecn_max = min(ECN_MIN_PER_GBPS * gbps * ECN_SPAN, shared // ECN_POOL_FRACTION)
    ecn_min = ecn_max // ECN_SPAN
    th = next(t for t in range(-8, 8)
              if 2.0 ** t * shared / (1 + 2.0 ** t) >= XOFF_OVER_ECN * ecn_max)
    profiles: dict[str, dict[str, str]] = {
        "ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                  "dynamic_th": "3"}}
    for m, h in headroom.items():
        profiles[pg_profile(speed, m)] = {
            "pool": "ingress_lossless_pool", "size": str(h.size), "xon": str(h.xon),
            "xoff": str(h.xoff), "xon_offset": str(h.xon), "dynamic_th": str(th)}
    profiles["egress_lossless_profile"] = {"pool": "egress_lossless_pool", "size": "0",
                                           "static_th": str(total)}
    profiles["egress_lossy_profile"] = {"pool": "egress_lossy_pool", "size": "1518",
                                        "dynamic_th": "3"}
    color = {"min_threshold": str(ecn_min), "max_threshold": str(ecn_max),
             "drop_probability": str(ECN_PROBABILITY)}
    wred = {**{f"wred_{c}_enable": "true" for c in ("green", "yellow", "red")},
            "ecn": "ecn_all",
            **{f"{c}_{k}": v for c in ("green", "yellow", "red") for k, v in color.items()}}
    pools = {"ingress_lossless_pool": {"type": "ingress", "mode": "dynamic",
                                       "size": str(shared)},
             "egress_lossless_pool": {"type": "egress", "mode": "static", "size": str(total)},
             "egress_lossy_pool": {"type": "egress", "mode": "dynamic", "size": str(shared)}}
    return pools, profiles, {f"{MAP}_LOSSLESS": wred}


def pg_profile(speed_mbps: int, cable_m: int) -> str:
    """SONiC's name for a lossless PG profile."""
    return f"pg_lossless_{speed_mbps}_{cable_m}m_profile"


def bgp_asn(sw: Switch) -> int:
    """RFC 7938's numbering: the super-spines share one AS, the spines of a pod share one
    (so a path never climbs back through the same tier), every leaf has its own (4-byte
    private range, so a fabric of any size fits)."""
    if sw.role == "super":
        return SUPER_ASN
    if sw.role == "spine":
        pod = int(sw.name[3:sw.name.index("-")]) if sw.name.startswith("pod") else 0
        return SPINE_ASN + pod
    return LEAF_ASN_BASE + sw.number


def _bgp(fabric: Fabric, sw: Switch, names: list[str], db: dict) -> None:
    """bgp_asn, Loopback0 and one BGP_NEIGHBOR per fabric link, as production configs are."""
    index = list(fabric.switches).index(sw.name) + 1
    db["DEVICE_METADATA"]["localhost"]["bgp_asn"] = str(bgp_asn(sw))
    db["LOOPBACK_INTERFACE"] = {"Loopback0": {},
                                f"Loopback0|10.255.{index >> 8}.{index & 0xff}/32": {}}
    db["BGP_NEIGHBOR"] = {
        str(p.peer_ip): {"asn": str(bgp_asn(fabric.switches[p.peer])), "name": p.peer,
                         "local_addr": str(p.address.ip), "admin_status": "up",
                         "holdtime": BGP_HOLDTIME, "keepalive": BGP_KEEPALIVE}
        for p in sw.ports if p.address is not None}
    db["DEVICE_NEIGHBOR"] = {name: {"name": p.peer} for name, p in zip(names, sw.ports)}


def port_lanes(index: int, count: int) -> tuple[int, ...]:
    """The lanes of the switch's ``index``-th port, on wire eth{index + 1}: the default hwsku's
    for that wire where it has them at this width, so that SONiC-VS puts the port there
    without a lanemap.ini (``fabric.portmap``); else lanes of its own that no default wire
    has (past them, or of another width), so the port is found by its alias."""
    if count == len(DEFAULT_LANES[0]) and index < len(DEFAULT_LANES):
        return DEFAULT_LANES[index]
    return tuple(range(index * count + 1, (index + 1) * count + 1))


def config_db(fabric: Fabric, sw: Switch) -> str:
    """The switch's config_db.json text."""
    spec = fabric.spec
    speed = spec.speed_mbps
    ports = sw.ports
    names = [f"Ethernet{4 * i}" for i in range(len(ports))]
    lossy_pg = best_effort_tc(spec)
    roce, cnp = spec.roce_priority, spec.cnp_priority
    queue_kind = ["lossless" if q == roce else "cnp" if q == cnp else "lossy" for q in range(8)]
    mac_role, number = ROLE_MAC[sw.role], sw.number
    db: dict[str, dict] = {
        "DEVICE_METADATA": {"localhost": {
            "hostname": sw.name,
            "mac": f"02:52:4c:{mac_role:02x}:{number >> 8:02x}:{number & 0xff:02x}",
            "hwsku": f"rocelab-{spec.radix}x{speed // 1000}G", "type": ROLE_TYPE[sw.role],
            "platform": "x86_64-kvm_x86_64-r0", "buffer_model": "traditional",
            "default_pfcwd_status": "enable"}},
        "PORT": {name: {"alias": p.iface, "admin_status": "up", "speed": str(speed),
                        "mtu": str(PORT_MTU), "index": str(i),
                        "lanes": ",".join(map(str, port_lanes(i, LANES[speed])))}
                 for i, (name, p) in enumerate(zip(names, ports))},
        "INTERFACE": {},
    }
    for name, p in zip(names, ports):
        if p.address is not None:
            db["INTERFACE"][name] = {}
            db["INTERFACE"][f"{name}|{p.address}"] = {}
    if sw.gateway is not None:
        vlan = f"Vlan{sw.vlan}"
        rack = [name for name, p in zip(names, ports) if p.address is None]
        db["VLAN"] = {vlan: {"vlanid": str(sw.vlan)}}
        db["VLAN_MEMBER"] = {f"{vlan}|{name}": {"tagging_mode": "untagged"} for name in rack}
        db["VLAN_INTERFACE"] = {vlan: {}, f"{vlan}|{sw.gateway}": {}}
    if spec.routing == "bgp":
        _bgp(fabric, sw, names, db)
    else:
        db["STATIC_ROUTE"] = {str(prefix): {"nexthop": ",".join(map(str, hops))}
                              for prefix, hops in sw.routes.items()}
    db["DSCP_TO_TC_MAP"] = {MAP: {str(d): str(tc) for d, tc in classes(spec).items()}}
    db["DOT1P_TO_TC_MAP"] = {MAP: _identity()}
    db["TC_TO_PRIORITY_GROUP_MAP"] = {MAP: {str(tc): str(roce if tc == roce else lossy_pg)
                                            for tc in range(8)}}
    db["TC_TO_QUEUE_MAP"] = {MAP: _identity()}
    db["MAP_PFC_PRIORITY_TO_QUEUE"] = {MAP: _identity()}
    db["PORT_QOS_MAP"] = {name: {
        "dscp_to_tc_map": MAP, "dot1p_to_tc_map": MAP, "tc_to_pg_map": MAP,
        "tc_to_queue_map": MAP, "pfc_to_queue_map": MAP, "pfc_enable": str(roce),
        "pfcwd_sw_enable": str(roce)} for name in names}
    pools, profiles, wred = buffers(spec, sw)
    db["BUFFER_POOL"], db["BUFFER_PROFILE"] = pools, profiles
    profile_of = {"lossless": "egress_lossless_profile", "cnp": "egress_lossy_profile",
                  "lossy": "egress_lossy_profile"}
    db["BUFFER_PG"] = {
        f"{name}|{pg}": {"profile": "ingress_lossy_profile" if pg == lossy_pg
                         else pg_profile(speed, p.cable_m)}
        for name, p in zip(names, ports) for pg in sorted((lossy_pg, roce))}
    queue_profiles = _ranges([profile_of[k] for k in queue_kind])
    db["BUFFER_QUEUE"] = {f"{name}|{key}": {"profile": prof}
                          for name in names for key, prof in queue_profiles}
    db["CABLE_LENGTH"] = {MAP: {name: f"{p.cable_m}m" for name, p in zip(names, ports)}}
    db["WRED_PROFILE"] = wred
    db["SCHEDULER"] = {"scheduler.0": {"type": "DWRR", "weight": LOSSY_WEIGHT},
                       "scheduler.1": {"type": "DWRR", "weight": LOSSLESS_WEIGHT},
                       "scheduler.2": {"type": "STRICT"}}
    queue_entry = {"lossy": {"scheduler": "scheduler.0"},
                   "lossless": {"scheduler": "scheduler.1", "wred_profile": f"{MAP}_LOSSLESS"},
                   "cnp": {"scheduler": "scheduler.2"}}
    db["QUEUE"] = {f"{name}|{key}": queue_entry[kind]
                   for name in names for key, kind in _ranges(queue_kind)}
    db["PFC_WD"] = {**{name: {"action": "drop", "detection_time": WATCHDOG_MS,
                              "restoration_time": WATCHDOG_MS} for name in names},
                    "GLOBAL": {"POLL_INTERVAL": WATCHDOG_MS}}
    return json.dumps(db, indent=4) + "\n"


# What each firmware DCQCN parameter means, for the generated NIC file (nic.settings names them)
FIRMWARE_NOTES = {
    "rpg_time_reset": "us: rate increase timer",
    "rpg_byte_reset": "bytes per byte-counter increase; 0: off (firmware: 32767)",
    "rpg_threshold": "fast recovery stages before additive increase",
    "rpg_ai_rate": "Mb/s: additive increase step",
    "rpg_hai_rate": "Mb/s: hyper increase step",
    "rpg_gd": "a cut takes alpha / 2**(rpg_gd - 10) of the rate ...",
    "rpg_min_dec_fac": "... never more than half (%)",
    "rpg_min_rate": "Mb/s: the floor",
    "rate_reduce_monitor_period": "us: at most one cut per period",
    "dce_tcp_g": "alpha gain g = (1024 - dce_tcp_g) / 1024",
    "dce_tcp_rtt": "us: alpha update period",
    "initial_alpha_value": "alpha at the first CNP, / 1024",
    "clamp_tgt_rate": "target := current rate on every cut: no ...",
    "clamp_tgt_rate_after_time_inc": "... only if a timer increase came since the last cut",
    "min_time_between_cnps": "us: receiver, at most one CNP per QP per interval",
}


def nic_yaml(spec: Spec) -> str:
    """The hosts' NIC settings: the lab's RoCE and CNP classes, and DCQCN in firmware mode
    with ConnectX's defaults (``nic.settings.FIRMWARE_DEFAULTS``: the same at every port speed)."""
    width = max(len(f"{name}: {value}") for name, value in FIRMWARE_DEFAULTS.items())
    return "\n".join([
        f"# Host NIC settings for every host of {spec.name} (label rocelab.nic in",
        "# topology.kinds.linux.labels), generated with the lab. Format and defaults:",
        '# docs/lab-guide.md, "Host NIC settings".',
        "roce:",
        f"  dscp: {spec.roce_dscp}        # RoCEv2 data: the switches map it to TC "
        f"{spec.roce_priority}, PFC on priority {spec.roce_priority}",
        f"  priority: {spec.roce_priority}",
        f"  mtu: {ROCE_PATH_MTU}       # RoCE path MTU (ports carry {PORT_MTU}); the switches' "
        "headroom assumes it",
        "  ecn: true       # send ECT(0): the switches CE-mark instead of dropping",
        "cnp:",
        f"  dscp: {spec.cnp_dscp}        # CNPs: TC {spec.cnp_priority}, a strict queue outside "
        "the lossless class",
        f"  priority: {spec.cnp_priority}",
        "dcqcn:",
        "  enabled: true",
        "  # DCQCN as ConnectX firmware runs it, mlxconfig's names, units and defaults",
        '  # (docs/concepts.md, "DCQCN: the paper and the firmware"). mode: paper runs the',
        "  # SIGCOMM 2015 algorithm instead, with its own parameter names.",
        "  mode: firmware",
        *(f"  {f'{name}: {value}':<{width}}  # {FIRMWARE_NOTES[name]}"
          for name, value in FIRMWARE_DEFAULTS.items()),
    ]) + "\n"
