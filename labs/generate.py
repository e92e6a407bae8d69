"""Generate a lab folder for a leaf-spine (two tiers) or leaf/spine/super-spine (three tiers)
RoCE fabric of a given size: the clab file, one ``config_db.json`` per switch with a complete
lossless profile (``labs.generate_config``) and the hosts' NIC settings file.

Pure: ``render`` returns the files as text, ``write`` puts them in a folder (built under a
temporary name next to it and renamed at the end, so a failure leaves nothing). A size beyond
the generator's limits raises ``GenerateError`` with one line naming the option.

Shape. A leaf has ``hosts_per_leaf`` host ports and ``ceil(hosts_per_leaf /
oversubscription)`` uplinks, all at one speed. Each layer above has the fewest switches that
carry the uplinks below it (at least two where there are two uplinks, so that one switch is
not the whole layer): every lower switch spreads its uplinks evenly over them, with parallel
links when it has more uplinks than there are upper switches. Two tiers hold as many leaves
as one spine's ``radix`` allows; beyond that, leaves are grouped in pods whose spines use half
their ports down and half up (oversubscription is at the leaves only), and spine j of every
pod connects to super-spine plane j.

Addressing. Each leaf is a rack: one VLAN (the same id on every leaf; VLANs are local to a
leaf) with an SVI gateway ``.1`` and its hosts from ``.11`` in ``10.<1 + n // 256>.<n %
256>.0/24`` for leaf n. Fabric links are routed /31s from 10.0.0.0 (upper end even). Every
switch has a static route to every rack subnet it is not on, ECMP over all the links that
lead toward it. Racks rather than routed host ports: the same shape as the shipped labs, so
every check and probe written for them (RoCEv1 within a rack, RoCEv2 across the fabric)
applies, and a switch carries one route per rack rather than one per host.
"""
from __future__ import annotations

import math
import os
import shutil
import uuid
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path

from .generate_config import CABLE_M, LAB_NIC, config_db, nic_yaml
from .generate_spec import (SPEEDS_MBPS, Fabric, GenerateError, Host, Port, Shape, Spec,
                            Switch)
from .topology import AUTO, NAME_RE, SONIC_STAGED_CONFIG

MAX_HOSTS = 4096
MAX_RACK_HOSTS = 244  # hosts .11 to .254 of a rack's /24
ROUTING = ("static", "bgp")
RADIX_RANGE = (4, 256)
FABRIC_BASE = IPv4Address("10.0.0.0")
RACK_VLAN = 1000
LINK_MTU = 9100  # SONiC's port MTU: hosts must not send larger frames


# --------------------------------------------------------------------------- limits and shape


def _fail(option: str, problem: str) -> GenerateError:
    return GenerateError(f"--{option.replace('_', '-')}: {problem}")


def _positive(text: str) -> bool:
    try:
        return 0 < float(text) < math.inf
    except ValueError:
        return False


def check(spec: Spec) -> None:
    """Every limit that does not depend on the fabric's shape."""
    if not NAME_RE.match(spec.name):
        raise GenerateError(f"name: {spec.name!r} is not a valid lab name (letters, digits, "
                            "- _ . ; at most 32; starts alphanumeric)")
    if spec.time_scale != AUTO and not _positive(spec.time_scale):
        raise _fail("time_scale", f"{spec.time_scale!r} is neither {AUTO} nor a positive number")
    if spec.routing not in ROUTING:
        raise _fail("routing", f"{spec.routing!r} is not one of {', '.join(ROUTING)}")
    if spec.speed.upper() not in SPEEDS_MBPS:
        raise _fail("speed", f"{spec.speed!r} is not one of {', '.join(SPEEDS_MBPS)}")
    hosts = spec.hosts_per_leaf * spec.leaves
    if hosts > MAX_HOSTS and spec.hosts_per_leaf > 0:
        raise _fail("leaves", f"{spec.leaves} leaves x {spec.hosts_per_leaf} hosts = {hosts} "
                    f"hosts, beyond the generator's limit of {MAX_HOSTS}")
    for option, value, low, high in (("hosts_per_leaf", spec.hosts_per_leaf, 1, MAX_RACK_HOSTS),
                                     ("leaves", spec.leaves, 2, MAX_HOSTS),
                                     ("spines", spec.spines, 0, MAX_HOSTS),
                                     ("radix", spec.radix, *RADIX_RANGE),
                                     ("roce_dscp", spec.roce_dscp, 0, 63),
                                     ("cnp_dscp", spec.cnp_dscp, 0, 63),
                                     ("roce_priority", spec.roce_priority, 0, 7),
                                     ("cnp_priority", spec.cnp_priority, 0, 7)):
        if not low <= value <= high:
            raise _fail(option, f"{value} is not in {low}..{high}")
    if spec.radix % 2:
        raise _fail("radix", f"{spec.radix} is odd: a three-tier spine uses half its ports "
                    "down and half up")
    if not (math.isfinite(spec.oversubscription) and spec.oversubscription >= 1):
        raise _fail("oversubscription", f"{spec.oversubscription:g} is below 1 (it is host "
                    "bandwidth over uplink bandwidth per leaf: 1 is non-blocking, 3 is 3:1)")
    if spec.cnp_dscp == spec.roce_dscp:
        raise _fail("cnp_dscp", f"{spec.cnp_dscp} is also the RoCE DSCP: CNPs need their own "
                    "class, outside the lossless one")
    if spec.cnp_priority == spec.roce_priority:
        raise _fail("cnp_priority", f"{spec.cnp_priority} is also the RoCE priority: CNPs "
                    "would be paused with the data they slow down")


def _fewest(uplinks: int, lowers: int, ports: int) -> int | None:
    """The fewest upper switches (a divisor of each lower switch's ``uplinks``, at least two
    where there are two uplinks) whose ports take every link of ``lowers`` switches."""
    for n in range(min(2, uplinks), uplinks + 1):
        if uplinks % n == 0 and lowers * (uplinks // n) <= ports:
            return n
    return None


def shape(spec: Spec) -> Shape:
    """Tiers and counts for ``spec`` (checked), or the GenerateError naming the limit."""
    check(spec)
    hosts, radix = spec.hosts_per_leaf, spec.radix
    uplinks = math.ceil(hosts / spec.oversubscription)
    if hosts + uplinks > radix:
        raise _fail("hosts_per_leaf", f"{hosts} hosts + {uplinks} uplinks "
                    f"(oversubscription {spec.oversubscription:g}) need {hosts + uplinks} "
                    f"ports on a leaf, more than --radix {radix}")
    if spec.spines:
        if uplinks % spec.spines:
            raise _fail("spines", f"{spec.spines} spines do not divide the {uplinks} uplinks "
                        "of a leaf evenly")
        need = spec.leaves * (uplinks // spec.spines)
        if need > radix:
            raise _fail("spines", f"each of {spec.spines} spines would need {need} ports, "
                        f"more than --radix {radix} (leave --spines at 0 for three tiers)")
        return Shape(2, uplinks, spec.spines)
    spines = _fewest(uplinks, spec.leaves, radix)
    if spines is not None:
        return Shape(2, uplinks, spines)
    for pods in range(2, min(spec.leaves, radix) + 1):
        if spec.leaves % pods:
            continue
        per_pod = spec.leaves // pods
        pod_spines = _fewest(uplinks, per_pod, radix // 2)
        if pod_spines is None:
            continue
        down = per_pod * uplinks // pod_spines
        supers = _fewest(down, pods, radix)
        if supers is not None:
            return Shape(3, uplinks, pod_spines, pods, down, supers)
    raise _fail("radix", f"{spec.leaves} leaves with {uplinks} uplink(s) each do not fit "
                f"three tiers of {radix}-port switches (pods of equal size, spines half down, "
                "half up)")


# --------------------------------------------------------------------------- the fabric


def rack_subnet(leaf: int) -> IPv4Network:
    return IPv4Network(f"10.{1 + leaf // 256}.{leaf % 256}.0/24")


class _Wiring:
    """Allocates switch ports (eth1 up, per switch) and /31s, in the order links are made."""

    def __init__(self, switches: dict[str, Switch]) -> None:
        self.switches = switches
        self.links: list[tuple[str, str, str, str]] = []
        self.pairs = 0

    def iface(self, node: str) -> str:
        return f"eth{len(self.switches[node].ports) + 1}"

    def fabric(self, lower: str, upper: str, cable_m: int) -> None:
        low_if, up_if = self.iface(lower), self.iface(upper)
        up_ip = FABRIC_BASE + 2 * self.pairs
        self.pairs += 1
        self.switches[lower].ports.append(Port(low_if, upper, cable_m, True,
                                               IPv4Interface(f"{up_ip + 1}/31"), up_ip))
        self.switches[upper].ports.append(Port(up_if, lower, cable_m, False,
                                               IPv4Interface(f"{up_ip}/31"), up_ip + 1))
        self.links.append((lower, low_if, upper, up_if))


def build(spec: Spec) -> Fabric:
    """The whole fabric: switches with their ports and routes, hosts, links."""
    sh = shape(spec)
    switches: dict[str, Switch] = {}
    if sh.tiers == 3:
        for plane in range(1, sh.spines + 1):
            for k in range(1, sh.supers_per_plane + 1):
                name = f"super{plane}-{k}"
                switches[name] = Switch(name, "super", len(switches) + 1)
        first = len(switches)
        for pod in range(1, sh.pods + 1):
            for j in range(1, sh.spines + 1):
                name = f"pod{pod}-spine{j}"
                switches[name] = Switch(name, "spine", len(switches) - first + 1)
    else:
        for j in range(1, sh.spines + 1):
            switches[f"spine{j}"] = Switch(f"spine{j}", "spine", j)
    for n in range(1, spec.leaves + 1):
        switches[f"leaf{n}"] = Switch(f"leaf{n}", "leaf", n, racks={n}, vlan=RACK_VLAN,
                                      gateway=IPv4Interface(f"{rack_subnet(n)[1]}/24"))
    wiring = _Wiring(switches)
    per_pod = sh.leaves_per_pod(spec)
    for n in range(1, spec.leaves + 1):
        pod = (n - 1) // per_pod + 1
        for u in range(sh.uplinks):
            j = u % sh.spines + 1
            spine = f"pod{pod}-spine{j}" if sh.tiers == 3 else f"spine{j}"
            wiring.fabric(f"leaf{n}", spine, CABLE_M["leaf-spine"])
            switches[spine].racks.add(n)
    if sh.tiers == 3:  # spine J of every pod to the super-spines of plane J
        for pod in range(1, sh.pods + 1):
            for j in range(1, sh.spines + 1):
                spine = f"pod{pod}-spine{j}"
                for v in range(sh.spine_uplinks):
                    top = f"super{j}-{v % sh.supers_per_plane + 1}"
                    wiring.fabric(spine, top, CABLE_M["spine-super"])
                    switches[top].racks |= switches[spine].racks
    hosts = _racks(spec, switches, wiring)
    for sw in switches.values():
        sw.routes = _routes(sw, switches, spec.leaves)
    return Fabric(spec, sh, switches, hosts, wiring.links)


def _racks(spec: Spec, switches: dict[str, Switch], wiring: _Wiring) -> list[Host]:
    """Hosts h1.. in leaf order, each on the next port of its leaf (after the uplinks)."""
    hosts = []
    for n in range(1, spec.leaves + 1):
        leaf = f"leaf{n}"
        subnet = rack_subnet(n)
        for i in range(1, spec.hosts_per_leaf + 1):
            name = f"h{(n - 1) * spec.hosts_per_leaf + i}"
            port = wiring.iface(leaf)
            switches[leaf].ports.append(Port(port, name, CABLE_M["host-leaf"]))
            wiring.links.append((name, "eth1", leaf, port))
            hosts.append(Host(name, IPv4Interface(f"{subnet[10 + i]}/24"), subnet[1]))
    return hosts


def _routes(sw: Switch, switches: dict[str, Switch],
            leaves: int) -> dict[IPv4Network, list[IPv4Address]]:
    """A route to every rack not on ``sw``: down the links whose far end has the rack below
    it, else ECMP over every uplink."""
    up = [p.peer_ip for p in sw.ports if p.up]
    routes = {}
    for rack in range(1, leaves + 1):
        if sw.role == "leaf" and rack == sw.number:
            continue  # connected: the SVI's subnet
        down = [p.peer_ip for p in sw.ports
                if p.address and not p.up and rack in switches[p.peer].racks]
        routes[rack_subnet(rack)] = down or up
    return routes


# --------------------------------------------------------------------------- files


def render(fabric: Fabric) -> dict[str, str]:
    """Every file of the lab folder: relative path -> text."""
    spec = fabric.spec
    files = {f"{spec.name}.clab.yml": _clab(fabric), LAB_NIC: nic_yaml(spec)}
    for sw in fabric.switches.values():
        files[f"configs/{sw.name}/config_db.json"] = config_db(fabric, sw)
    return files


def _count(n: int, thing: str, things: str) -> str:
    return f"{n} {thing if n == 1 else things}"


def describe(fabric: Fabric) -> str:
    """One line: tiers and counts, for the clab header and the task's output."""
    spec, sh = fabric.spec, fabric.shape
    count = {role: sum(s.role == role for s in fabric.switches.values())
             for role in ("leaf", "spine", "super")}
    layers = (f"{_count(count['leaf'], 'leaf', 'leaves')}, "
              f"{_count(count['spine'], 'spine', 'spines')}")
    if sh.tiers == 3:
        layers += (f" in {sh.pods} pods, {_count(count['super'], 'super-spine', 'super-spines')}"
                   f" in {_count(sh.spines, 'plane', 'planes')}")
    ratio = spec.hosts_per_leaf / sh.uplinks
    return (f"{sh.tiers} tiers: {len(fabric.hosts)} hosts at {spec.speed.upper()}, {layers}; "
            f"{_count(spec.hosts_per_leaf, 'host', 'hosts')} and "
            f"{_count(sh.uplinks, 'uplink', 'uplinks')} per leaf (oversubscription {ratio:.3g}:1)")


def _clab(fabric: Fabric) -> str:
    spec, sh = fabric.spec, fabric.shape
    per_pod = sh.leaves_per_pod(spec)
    pods = ([f"#   pods of {per_pod} leaves (pod1: leaf1..leaf{per_pod}); podP-spineJ "
             "connects to plane J's super-spines superJ-K"] if sh.tiers == 3 else [])
    lines = [
        f"# Generated by rocelab: {spec.command()}",
        "# Regenerate with that command rather than editing by hand (docs/lab-guide.md,",
        '# "Generating a fabric").',
        f"# {describe(fabric)}.",
        f"#   leafN is rack N: hosts on untagged Vlan{RACK_VLAN} members, SVI gateway .1 of "
        "10.<1 + N // 256>.<N % 256>.0/24",
        "#   fabric links: routed /31s from 10.0.0.0 (upper end even); " + (
            "eBGP on every link (keepalive 3 s, hold 9 s), Loopback0 10.255.x.y/32, ECMP"
            if spec.routing == "bgp" else "static routes to every rack, ECMP"),
        *pods,
        f"#   lossless RoCE: DSCP {spec.roce_dscp} -> priority {spec.roce_priority} (PFC), CNPs "
        f"DSCP {spec.cnp_dscp} -> strict queue {spec.cnp_priority}",
        "#",
        "# Valid for containerlab as it is: settings of rocelab's own live in node labels.",
        f"name: {spec.name}",
        "",
        "topology:",
        "  defaults:",
        "    labels:",
        f'      rocelab.time-scale: "{spec.time_scale}"  # live runtime only: speed / S per port',
        f'      rocelab.roce-priority: "{spec.roce_priority}"',
        "  kinds:",
        "    sonic-vs:",
        "      image: docker-sonic-vs:latest",
        "    linux:",
        "      image: rocelab-host:latest",
        "      labels:",
        f"        rocelab.nic: {LAB_NIC}",
        "  nodes:",
    ]
    for sw in fabric.switches.values():
        lines += [f"    {sw.name}:", "      kind: sonic-vs", "      binds:",
                  f"        - configs/{sw.name}/config_db.json:{SONIC_STAGED_CONFIG}:ro"]
    for host in fabric.hosts:
        lines += [f"    {host.name}:", "      kind: linux", "      exec:",
                  f"        - ip addr add {host.address} dev eth1",
                  f"        - ip route replace default via {host.gateway}"]
    lines += ["", "  links:"]
    for a, a_if, b, b_if in fabric.links:
        lines += [f'    - endpoints: ["{a}:{a_if}", "{b}:{b_if}"]', f"      mtu: {LINK_MTU}"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Written:
    path: Path
    fabric: Fabric


def write(spec: Spec, out: Path | None = None, force: bool = False) -> Written:
    """Write the lab folder ``out`` (default ./topologies/<name>, where a bare lab name is
    looked up first: labs.topology.lab_folders): built under a temporary
    name beside it, then renamed, so that nothing is left half-written. An existing folder
    is replaced only with ``force``."""
    out = (out or Path.cwd() / "topologies" / spec.name).resolve()
    fabric = build(spec)
    if out.exists() and not force:
        raise _fail("out", f"{out} exists (--force replaces it)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{uuid.uuid4().hex[:8]}.tmp"
    old = tmp.with_suffix(".old")
    try:
        for rel, text in render(fabric).items():
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if out.exists():
            os.rename(out, old)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out.exists():
            os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return Written(out, fabric)
