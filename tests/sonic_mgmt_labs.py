"""Small labs in shapes the shipped labs do not have, for running the sonic-mgmt suite on
configs it was not written against: one switch (``tor1``) with four wired ports, each to a
host, in SONiC's table shapes for three kinds of platform.

- ``spectrum``: a traditional-model Spectrum-style buffer config: separate ingress and egress
  pools, per-port profile lists, only the lossy ``BUFFER_PG|<port>|0``, the lossless PGs left
  to buffermgrd (the lab binds a ``pg_profile_lookup.ini``); lossless priorities 2 and 5
  (DSCP 24, 46), mixed 400G and 100G ports, untagged VLAN members;
- ``dnx``: a DNX-style single pool of type ``both`` with a shared headroom pool, lossless
  profiles that reserve only xon with a negative ``dynamic_th`` and an ``xon_offset``;
  lossless priorities 3 and 6 (DSCP 26, 30), CNPs on a strict queue 7, a VLAN of tagged
  members only, per-queue DWRR weights;
- ``broadcom``: Broadcom-style static thresholds on the lossless PGs, private headroom (no
  shared headroom pool), negative ``dynamic_th`` on the lossy profiles, a static egress
  lossless pool; lossless priority 4 (DSCP 34), a strict queue 6, a VLAN with a tagged and
  an untagged member, ``PFC_WD`` 400/400 ms with a 100 ms poll.

Every switch has two routed ports and two VLAN members with an SVI. Table and field names
and key shapes are SONiC's; every value is chosen here (tests/platform_configs.py makes the
lookup rows). ``make`` writes a lab folder: the containerlab file, the switch's
config_db.json and lanemap.ini, the lookup where the variant has one, the hosts' NIC file.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.platform_configs import SPECTRUM_LOOKUP, Lookup, xoff_bytes

SWITCH = "tor1"
MAP = "LAB"  # the name of every QoS map and of the CABLE_LENGTH entry
LANES_PER_PORT = 4
MIB = 1 << 20
TIME_SCALE_400G = 12000  # the live time scale a 400G port needs (as real_labs sets it)


@dataclass(frozen=True)
class Port:
    name: str
    speed: int  # Mb/s
    cable: int  # metres
    role: str  # routed, untagged or tagged


@dataclass(frozen=True)
class Variant:
    """One lab's choices: its ports, classes, scheduler, watchdog and buffer tables."""

    name: str
    ports: tuple[Port, ...]
    lossless: dict[int, int]  # DSCP -> TC of each lossless class (TC = PFC priority = PG)
    cnp: tuple[int, int]  # (DSCP, TC) of CNPs, a lossy class
    weights: dict[int, int | None]  # queue -> DWRR weight; None: STRICT
    pfc_wd: tuple[int, int, int]  # detection_time, restoration_time, POLL_INTERVAL (ms)
    buffers: Callable[[Variant], dict]
    vlan: int = 100
    lookup: Lookup | None = None
    extra: dict = field(default_factory=dict)

    @property
    def lossless_tcs(self) -> list[int]:
        return sorted(set(self.lossless.values()))


# ---- QoS maps, scheduler, watchdog

def dscp_map(v: Variant) -> dict[str, str]:
    """DSCP -> TC: the lossless and CNP DSCPs to their classes; the rest by eighths (0-7 to
    TC 0, 8-15 to TC 1, ...) where that TC is lossy and not the CNPs', else to TC 1."""
    special = {**v.lossless, v.cnp[0]: v.cnp[1]}
    reserved = set(v.lossless_tcs) | {v.cnp[1]}
    return {str(d): str(special.get(d, d // 8 if d // 8 not in reserved else 1))
            for d in range(64)}


def _qos_tables(v: Variant) -> dict:
    identity = {str(i): str(i) for i in range(8)}
    enabled = ",".join(map(str, v.lossless_tcs))
    return {
        "DSCP_TO_TC_MAP": {MAP: dscp_map(v)},
        "DOT1P_TO_TC_MAP": {MAP: identity},
        "TC_TO_PRIORITY_GROUP_MAP": {MAP: {str(tc): str(tc if tc in v.lossless_tcs else 0)
                                           for tc in range(8)}},
        "TC_TO_QUEUE_MAP": {MAP: identity},
        "MAP_PFC_PRIORITY_TO_QUEUE": {MAP: identity},
        "PORT_QOS_MAP": {p.name: {"dscp_to_tc_map": MAP, "dot1p_to_tc_map": MAP,
                                  "tc_to_pg_map": MAP, "tc_to_queue_map": MAP,
                                  "pfc_to_queue_map": MAP, "pfc_enable": enabled,
                                  "pfcwd_sw_enable": enabled} for p in v.ports},
        "SCHEDULER": {_scheduler(w): ({"type": "STRICT"} if w is None
                                      else {"type": "DWRR", "weight": str(w)})
                      for w in v.weights.values()},
        "QUEUE": {f"{p.name}|{q}": {"scheduler": _scheduler(w)}
                  for p in v.ports for q, w in v.weights.items()},
        "PFC_WD": {**{p.name: {"action": "drop", "detection_time": str(v.pfc_wd[0]),
                               "restoration_time": str(v.pfc_wd[1])} for p in v.ports},
                   "GLOBAL": {"POLL_INTERVAL": str(v.pfc_wd[2])}},
        "CABLE_LENGTH": {MAP: {p.name: f"{p.cable}m" for p in v.ports}},
    }


def _scheduler(weight: int | None) -> str:
    return "strict" if weight is None else f"dwrr_{weight}"


# ---- buffer tables, one shape per platform kind

def _runs(indices: list[int]) -> list[str]:
    """[0, 1, 2, 5] -> ["0-2", "5"], as BUFFER_QUEUE and BUFFER_PG keys write ranges."""
    runs: list[list[int]] = []
    for i in indices:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return [f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs]


def _queues(v: Variant, lossless: str, lossy: str) -> dict:
    tcs = v.lossless_tcs
    return {f"{p.name}|{run}": {"profile": profile} for p in v.ports
            for queues, profile in ((tcs, lossless),
                                    ([q for q in range(8) if q not in tcs], lossy))
            for run in _runs(queues)}


def spectrum_buffers(v: Variant) -> dict:
    """Separate ingress and egress pools, profile lists per port, lossless PGs derived by
    buffermgrd from the lookup (none in BUFFER_PG)."""
    pool = lambda kind, size: {"type": kind, "mode": "dynamic", "size": str(size)}  # noqa: E731
    return {
        "BUFFER_POOL": {"ingress_lossless_pool": pool("ingress", 10 * MIB),
                        "ingress_lossy_pool": pool("ingress", 6 * MIB),
                        "egress_lossless_pool": pool("egress", 20 * MIB),
                        "egress_lossy_pool": pool("egress", 6 * MIB)},
        "BUFFER_PROFILE": {
            "ingress_lossless_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                         "dynamic_th": "7"},
            "ingress_lossy_profile": {"pool": "ingress_lossy_pool", "size": "0",
                                      "dynamic_th": "3"},
            "egress_lossless_profile": {"pool": "egress_lossless_pool", "size": "0",
                                        "dynamic_th": "7"},
            "egress_lossy_profile": {"pool": "egress_lossy_pool", "size": "9216",
                                     "dynamic_th": "7"},
            "q_lossy_profile": {"pool": "egress_lossy_pool", "size": "0", "dynamic_th": "1"}},
        "BUFFER_PORT_INGRESS_PROFILE_LIST": {
            p.name: {"profile_list": "ingress_lossless_profile,ingress_lossy_profile"}
            for p in v.ports},
        "BUFFER_PORT_EGRESS_PROFILE_LIST": {
            p.name: {"profile_list": "egress_lossless_profile,egress_lossy_profile"}
            for p in v.ports},
        "BUFFER_PG": {f"{p.name}|0": {"profile": "ingress_lossy_profile"} for p in v.ports},
        "BUFFER_QUEUE": _queues(v, "egress_lossless_profile", "q_lossy_profile"),
    }


def dnx_buffers(v: Variant) -> dict:
    """One ``both`` pool with a shared headroom pool; lossless profiles reserve xon only and
    take their headroom from the pool's xoff."""
    profiles = {f"pg_lossless_{p.speed}_{p.cable}m_profile": {
        "pool": "ingress_lossless_pool", "size": "4096", "xon": "4096",
        "xoff": str(xoff_bytes(p.speed, p.cable)), "xon_offset": "8192", "dynamic_th": "-2"}
        for p in v.ports}
    return {
        "BUFFER_POOL": {"ingress_lossless_pool": {"type": "both", "mode": "dynamic",
                                                  "size": str(24 * MIB),
                                                  "xoff": str(MIB)}},
        "BUFFER_PROFILE": {
            **profiles,
            "ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                      "dynamic_th": "-1"},
            "egress_lossless_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                        "dynamic_th": "3"},
            "egress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                     "dynamic_th": "-3"}},
        "BUFFER_PG": {
            **{f"{p.name}|0": {"profile": "ingress_lossy_profile"} for p in v.ports},
            **{f"{p.name}|{run}": {"profile": f"pg_lossless_{p.speed}_{p.cable}m_profile"}
               for p in v.ports for run in _runs(v.lossless_tcs)}},
        "BUFFER_QUEUE": _queues(v, "egress_lossless_profile", "egress_lossy_profile"),
    }


def broadcom_buffers(v: Variant) -> dict:
    """Static thresholds on the lossless PGs with private headroom (size = xon + xoff, no
    pool xoff), negative dynamic_th on the lossy profiles, a static egress lossless pool."""
    profiles = {}
    for p in v.ports:
        xoff = xoff_bytes(p.speed, p.cable)
        profiles[f"pg_lossless_{p.speed}_{p.cable}m_profile"] = {
            "pool": "ingress_lossless_pool", "size": str(3072 + xoff), "xon": "3072",
            "xoff": str(xoff), "static_th": str(2 * MIB)}
    return {
        "BUFFER_POOL": {"ingress_lossless_pool": {"type": "ingress", "mode": "dynamic",
                                                  "size": str(9 * MIB)},
                        "egress_lossless_pool": {"type": "egress", "mode": "static",
                                                 "size": str(12 * MIB)},
                        "egress_lossy_pool": {"type": "egress", "mode": "dynamic",
                                              "size": str(5 * MIB)}},
        "BUFFER_PROFILE": {
            **profiles,
            "ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                      "dynamic_th": "-2"},
            "egress_lossless_profile": {"pool": "egress_lossless_pool", "size": "0",
                                        "static_th": str(12 * MIB)},
            "egress_lossy_profile": {"pool": "egress_lossy_pool", "size": "1518",
                                     "dynamic_th": "-1"}},
        "BUFFER_PG": {
            **{f"{p.name}|0": {"profile": "ingress_lossy_profile"} for p in v.ports},
            **{f"{p.name}|{tc}": {"profile": f"pg_lossless_{p.speed}_{p.cable}m_profile"}
               for p in v.ports for tc in v.lossless_tcs}},
        "BUFFER_QUEUE": _queues(v, "egress_lossless_profile", "egress_lossy_profile"),
    }


VARIANTS = {v.name: v for v in (
    Variant("spectrum",
            (Port("Ethernet0", 400000, 300, "routed"), Port("Ethernet8", 100000, 40, "routed"),
             Port("Ethernet16", 100000, 5, "untagged"),
             Port("Ethernet24", 100000, 40, "untagged")),
            lossless={24: 2, 46: 5}, cnp=(48, 6),
            weights={0: 10, 1: 10, 2: 40, 3: 10, 4: 10, 5: 40, 6: None, 7: 10},
            pfc_wd=(200, 200, 200), buffers=spectrum_buffers, lookup=SPECTRUM_LOOKUP),
    Variant("dnx",
            (Port("Ethernet0", 100000, 300, "routed"), Port("Ethernet4", 100000, 300, "routed"),
             Port("Ethernet8", 100000, 300, "tagged"), Port("Ethernet12", 100000, 300, "tagged")),
            lossless={26: 3, 30: 6}, cnp=(48, 7),
            weights={0: 5, 1: 10, 2: 15, 3: 60, 4: 20, 5: 20, 6: 60, 7: None},
            pfc_wd=(300, 600, 100), buffers=dnx_buffers, vlan=40),
    Variant("broadcom",
            (Port("Ethernet0", 100000, 40, "routed"), Port("Ethernet4", 100000, 40, "routed"),
             Port("Ethernet8", 100000, 5, "untagged"), Port("Ethernet12", 100000, 5, "tagged")),
            lossless={34: 4}, cnp=(46, 6),
            weights={0: 20, 1: 20, 2: 20, 3: 20, 4: 50, 5: 20, 6: None, 7: 20},
            pfc_wd=(400, 400, 100), buffers=broadcom_buffers, vlan=30),
)}


# ---- the switch's config_db.json and the lab around it

def switch_config(v: Variant) -> dict:
    """config_db.json of ``tor1``: ports, two routed /31s, the VLAN with its SVI, maps,
    scheduler, watchdog and the variant's buffer tables."""
    ports = {p.name: {"alias": f"etp{i + 1}", "index": str(i), "admin_status": "up",
                      "speed": str(p.speed), "mtu": "9100", "fec": "rs",
                      "lanes": ",".join(str(n) for n in _lanes(i)),
                      "description": f"h{i + 1}:eth1"}
             for i, p in enumerate(v.ports)}
    interface: dict[str, dict] = {}
    for i, p in enumerate(v.ports):
        if p.role == "routed":
            interface.update({p.name: {}, f"{p.name}|10.0.{i}.0/31": {}})
    vlan = f"Vlan{v.vlan}"
    members = {f"{vlan}|{p.name}": {"tagging_mode": p.role} for p in v.ports
               if p.role != "routed"}
    return {
        "DEVICE_METADATA": {"localhost": {
            "hostname": SWITCH, "mac": "02:52:4c:00:0e:01", "hwsku": f"RL-{v.name.upper()}",
            "type": "ToRRouter", "buffer_model": "traditional",
            "default_pfcwd_status": "enable"}},
        "PORT": ports,
        "INTERFACE": interface,
        "VLAN": {vlan: {"vlanid": str(v.vlan)}},
        "VLAN_MEMBER": members,
        "VLAN_INTERFACE": {vlan: {}, f"{vlan}|10.{v.vlan}.0.1/24": {}},
        **_qos_tables(v),
        **v.buffers(v),
        **v.extra,
    }


def _lanes(i: int) -> range:
    return range(1 + i * LANES_PER_PORT, 1 + (i + 1) * LANES_PER_PORT)


def _host_exec(v: Variant, i: int, p: Port) -> list[str]:
    if p.role == "routed":
        return [f"ip addr add 10.0.{i}.1/31 dev eth1",
                f"ip route replace default via 10.0.{i}.0"]
    dev = "eth1" if p.role == "untagged" else f"eth1.{v.vlan}"
    add = [] if p.role == "untagged" else [
        f"ip link add link eth1 name {dev} type vlan id {v.vlan}", f"ip link set {dev} up"]
    return add + [f"ip addr add 10.{v.vlan}.0.{10 + i}/24 dev {dev}",
                  f"ip route replace default via 10.{v.vlan}.0.1"]


def make(dest: Path, variant: str) -> Path:
    """Write lab ``sm-<variant>`` under ``dest``; its containerlab file's path."""
    v = VARIANTS[variant]
    name = f"sm-{v.name}"
    folder = dest / name
    (folder / "configs" / SWITCH).mkdir(parents=True)
    (folder / "nic").mkdir()
    roce_dscp, roce_tc = min(v.lossless.items())
    (folder / "nic" / "default.yml").write_text(yaml.safe_dump(
        {"roce": {"dscp": roce_dscp, "priority": roce_tc, "mtu": 4096, "ecn": True},
         "cnp": {"dscp": v.cnp[0], "priority": v.cnp[1]}}, sort_keys=False))
    config_dir = folder / "configs" / SWITCH
    (config_dir / "config_db.json").write_text(json.dumps(switch_config(v), indent=2) + "\n")
    (config_dir / "lanemap.ini").write_text("".join(
        f"eth{i + 1}:{','.join(str(n) for n in _lanes(i))}\n" for i in range(len(v.ports))))
    binds = [f"configs/{SWITCH}/config_db.json:/var/sonic/config_db.json:ro",
             f"configs/{SWITCH}/lanemap.ini:/usr/share/sonic/hwsku/lanemap.ini:ro"]
    if v.lookup is not None:
        (folder / "configs" / "pg_profile_lookup.ini").write_text(v.lookup.text)
        binds.append("configs/pg_profile_lookup.ini:"
                     "/usr/share/sonic/hwsku/pg_profile_lookup.ini:ro")
    nodes: dict[str, dict] = {SWITCH: {"kind": "sonic-vs", "binds": binds}}
    links = []
    for i, p in enumerate(v.ports):
        nodes[f"h{i + 1}"] = {"kind": "linux", "exec": _host_exec(v, i, p)}
        links.append({"endpoints": [f"{SWITCH}:eth{i + 1}", f"h{i + 1}:eth1"], "mtu": 9100})
    topology: dict = {}
    if max(p.speed for p in v.ports) > 100000:
        topology["defaults"] = {"labels": {"rocelab.time-scale": str(TIME_SCALE_400G)}}
    topology["kinds"] = {"sonic-vs": {"image": "docker-sonic-vs:latest"},
                         "linux": {"image": "rocelab-host:latest",
                                   "labels": {"rocelab.nic": "nic/default.yml"}}}
    topology.update(nodes=nodes, links=links)
    clab = folder / f"{name}.clab.yml"
    clab.write_text(f"# {name}: one switch in {v.name}-shaped tables "
                    "(tests/sonic_mgmt_labs.py)\n"
                    + yaml.safe_dump({"name": name, "topology": topology}, sort_keys=False))
    return clab
