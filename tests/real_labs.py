"""Labs built from what SONiC itself renders for real platforms (the corpus): a platform's
QoS and buffer tables, values unchanged, in a small leaf-spine that rocelab runs like any
other lab.

The corpus's files are SONiC's, not the project's, so the repository keeps only their
manifest (``tests/data/sonic_corpus/<platform>/provenance.json``: repository, commit, path
and git blob of each file); the files themselves live in the project's shared reference
folder beside the checkout (``../shared/reference/sonic-corpus/<platform>/``) or where
``$ROCELAB_SONIC_CORPUS`` says. Each platform's folder holds one SKU's files as
sonic-buildimage has them: ``qos.json`` and ``buffers.json`` as its
config engine renders them, ``port_config.ini`` (the PORT table SONiC builds from it),
``pg_profile_lookup.ini`` (what buffermgrd derives lossless PGs from at boot) and, where
port_config.ini has no speed column, ``hwsku.json`` (the speed of the default breakout mode).

``make`` wraps those tables in what a lab needs around them and nothing more: DEVICE_METADATA,
the routed uplinks, the hosts' VLAN, static routes, and PFC_WD as ``pfcwd start_default``
writes it. Leaves wire their uplinks to the platform's uplink-role ports and their hosts to
its downlink-role ports (per-port-role maps: uplinks bind other maps than ``global``);
spines face the leaves at the leaves' uplink speed, from downlink-role ports where the
platform has them at that speed, as a tier faces the one below. Real
platforms' port names and lanes never match SONiC-VS's default layout, so every switch binds
a ``lanemap.ini`` giving each wire its port's lanes, as the SONiC-VS image reads it from its
hwsku folder; the hosts' NIC file carries a RoCE and a CNP class the platform's maps agree
on at every wired port.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import yaml


MANIFESTS = Path(__file__).resolve().parent / "data" / "sonic_corpus"
CORPUS_ENV = "ROCELAB_SONIC_CORPUS"
# Where the SONiC-VS image reads its SKU's files; a switch node binds them there.
HWSKU_DIR = "/usr/share/sonic/hwsku"
LINK_MTU = 9100  # SONiC's port MTU (minigraph renders every port with it)
SPINES, LEAVES, HOSTS_PER_LEAF = 2, 2, 2
QOS_FIELDS = ("dscp_to_tc_map", "tc_to_queue_map", "tc_to_pg_map", "pfc_to_queue_map",
              "dot1p_to_tc_map")


def platforms() -> list[str]:
    """The corpus's platforms, by manifest."""
    return sorted(p.parent.name for p in MANIFESTS.glob("*/provenance.json"))


def corpus_dir() -> Path:
    """Where the corpus's files are: ``$ROCELAB_SONIC_CORPUS``, else the shared reference
    folder beside the checkout."""
    given = os.environ.get(CORPUS_ENV)
    return Path(given) if given else MANIFESTS.parents[3] / "shared" / "reference" / "sonic-corpus"


@dataclass(frozen=True)
class Platform:
    """One corpus platform: what SONiC renders and ships for one SKU."""
    name: str

    @property
    def folder(self) -> Path:
        return corpus_dir() / self.name

    def missing(self) -> str | None:
        """Why the platform's files cannot be read here, or None."""
        absent = [f for f in self.provenance["files"] if not (self.folder / f).is_file()]
        if not absent:
            return None
        return (f"the SONiC corpus's {self.name} files are not on this machine "
                f"({', '.join(absent)} under {self.folder}): fetch them as "
                f"tests/data/sonic_corpus/{self.name}/provenance.json names them, or set "
                f"{CORPUS_ENV}")

    @cached_property
    def provenance(self) -> dict:
        return json.loads((MANIFESTS / self.name / "provenance.json").read_text())

    @cached_property
    def tables(self) -> dict[str, dict]:
        """qos.json and buffers.json as rendered: no table is in both."""
        qos = json.loads((self.folder / "qos.json").read_text())
        buffers = json.loads((self.folder / "buffers.json").read_text())
        both = sorted(set(qos) & set(buffers))
        if both:
            raise ValueError(f"{self.folder}: {', '.join(both)} rendered twice")
        return {**qos, **buffers}

    @cached_property
    def ports(self) -> dict[str, dict[str, str]]:
        """PORT rows as SONiC reads port_config.ini: the commented header names the columns,
        each column but ``name`` is a field, ``alias`` defaults to the name; a port without a
        speed column runs its default breakout mode's speed (hwsku.json)."""
        titles = ["name", "lanes", "alias", "index"]
        rows: dict[str, dict[str, str]] = {}
        for line in (self.folder / "port_config.ini").read_text().splitlines():
            if line.startswith("#"):
                if "name" in line:
                    titles = line.strip("#").split()
                continue
            tokens = line.split()
            if len(tokens) < 2:
                continue
            row = dict(zip(titles, tokens))
            name = row.pop("name")
            row.setdefault("alias", name)
            rows[name] = row
        for name, row in rows.items():
            if "speed" not in row and name in self._breakout_speeds:
                row["speed"] = self._breakout_speeds[name]
        return rows

    @cached_property
    def _breakout_speeds(self) -> dict[str, str]:
        path = self.folder / "hwsku.json"
        if not path.exists():
            return {}
        out = {}
        for name, entry in json.loads(path.read_text())["interfaces"].items():
            m = re.match(r"(\d+)x(\d+)G", entry.get("default_brkout_mode", ""))
            if m:
                out[name] = str(int(m.group(2)) * 1000)
        return out

    def port_roles(self) -> tuple[list[str], list[str]]:
        """(uplinks, downlinks) in port order: ports whose maps differ from ``global``'s are
        uplinks (per-port-role maps); without roles every QoS port serves both."""
        qos = self.tables["PORT_QOS_MAP"]
        default = qos.get("global", {}).get("dscp_to_tc_map")
        ports = sorted((p for p in qos if p in self.ports), key=self._order)
        ups = [p for p in ports if default and qos[p].get("dscp_to_tc_map") != default]
        downs = [p for p in ports if p not in ups]
        return (ups, downs) if ups and downs else (ports, ports)

    def scheduler_type(self, port: str, queue: int) -> str | None:
        """The type of the scheduler QUEUE gives ``port``'s ``queue`` (keys may be ranges; a
        VoQ line card's keys lead with its own ``<host>|<asic>``)."""
        meta = self.provenance.get("device_metadata", {})
        local = "|".join(meta[k] for k in ("hostname", "asic_name") if k in meta)
        for key, entry in self.tables.get("QUEUE", {}).items():
            *owner, name, queues = key.split("|")
            low, _, high = queues.partition("-")
            if (name == port and "|".join(owner) in ("", local)
                    and int(low) <= queue <= int(high or low)):
                return self.tables.get("SCHEDULER", {}).get(entry.get("scheduler"), {}).get("type")
        return None

    def _order(self, port: str) -> tuple[int, int]:
        digits = re.sub(r"\D", "", port)
        return int(self.ports[port].get("index", 0)), int(digits or 0)


@dataclass(frozen=True)
class Wire:
    """A switch's end of a link: its interface, the platform port behind it, its peer."""
    iface: str
    port: str
    peer: str
    peer_iface: str


def make(dest: Path, platform: str, name: str | None = None) -> Path:
    """Write a lab from corpus ``platform`` under ``dest``; its clab file's path."""
    plat = Platform(platform)
    name = name or platform
    folder = dest / name
    wiring = _wiring(plat)
    roce, cnp = traffic_classes(plat, [w.port for ws in wiring.values() for w in ws])
    (folder / "nic").mkdir(parents=True)
    (folder / "nic" / "default.yml").write_text(
        f"# RoCE and CNP classes {platform}'s maps agree on at every wired port\n"
        + yaml.safe_dump({"roce": {"dscp": roce[0], "priority": roce[1], "mtu": 4096,
                                   "ecn": True},
                          "cnp": {"dscp": cnp[0], "priority": cnp[1]}}, sort_keys=False))
    (folder / "configs").mkdir()
    (folder / "configs" / "pg_profile_lookup.ini").write_bytes(
        (plat.folder / "pg_profile_lookup.ini").read_bytes())
    for switch, wires in wiring.items():
        out = folder / "configs" / switch
        out.mkdir()
        (out / "config_db.json").write_text(json.dumps(switch_config(plat, switch, wires),
                                                       indent=2) + "\n")
        (out / "lanemap.ini").write_text("".join(
            f"{w.iface}:{plat.ports[w.port]['lanes']}\n" for w in wires))
    clab = folder / f"{name}.clab.yml"
    clab.write_text(f"# {platform}: {plat.provenance['hwsku']} ({plat.provenance['asic']}), "
                    "tables as SONiC renders them (tests/real_labs.py)\n"
                    + yaml.safe_dump(_clab(plat, name, wiring), sort_keys=False))
    return clab


def _wiring(plat: Platform) -> dict[str, list[Wire]]:
    """Each switch's wires: leaves' uplinks on uplink-role ports, hosts on downlink-role
    ports, spines' links to the leaves on ports of the leaves' uplink speed."""
    ups, downs = plat.port_roles()
    leaf_up = ups[:SPINES]
    leaf_down = [p for p in downs if p not in leaf_up][:HOSTS_PER_LEAF]
    # both ends of a wire run one speed: a spine faces the leaves at their uplinks' speed,
    # from downlink-role ports where the platform has them at that speed
    speed = {plat.ports[p].get("speed") for p in leaf_up}
    spine_down = ([p for p in downs if plat.ports[p].get("speed") in speed]
                  or [p for p in ups if plat.ports[p].get("speed") in speed])[:LEAVES]
    if (len(leaf_up) < SPINES or len(speed) != 1 or len(leaf_down) < HOSTS_PER_LEAF
            or len(spine_down) < LEAVES):
        raise ValueError(f"{plat.folder}: too few QoS ports for a {SPINES}x{LEAVES} leaf-spine")
    wiring: dict[str, list[Wire]] = {}
    for s in range(1, SPINES + 1):
        wiring[f"spine{s}"] = [Wire(f"eth{i}", spine_down[i - 1], f"leaf{i}", f"eth{s}")
                               for i in range(1, LEAVES + 1)]
    for leaf in range(1, LEAVES + 1):
        wires = [Wire(f"eth{s}", leaf_up[s - 1], f"spine{s}", f"eth{leaf}")
                 for s in range(1, SPINES + 1)]
        for n in range(HOSTS_PER_LEAF):
            host = f"h{(leaf - 1) * HOSTS_PER_LEAF + n + 1}"
            wires.append(Wire(f"eth{SPINES + n + 1}", leaf_down[n], host, "eth1"))
        wiring[f"leaf{leaf}"] = wires
    return wiring


def traffic_classes(plat: Platform, ports: list[str]) -> tuple[tuple[int, int], tuple[int, int]]:
    """((dscp, priority) of RoCE, (dscp, priority) of CNPs) on ``ports``: RoCE on the lowest
    priority every port pauses, with the lowest DSCP every port's map sends to it; CNPs on
    the highest class no port pauses, a strict queue's where there is one."""
    qos = plat.tables["PORT_QOS_MAP"]

    def field(port: str, name: str) -> str | None:
        return qos[port].get(name, qos.get("global", {}).get(name))

    def dscps(tc: int) -> list[int]:
        maps = [plat.tables["DSCP_TO_TC_MAP"][field(p, "dscp_to_tc_map")] for p in ports]
        return [d for d in range(64) if all(int(m.get(str(d), -1)) == tc for m in maps)]

    paused = [{int(x) for x in (field(p, "pfc_enable") or "").split(",") if x} for p in ports]
    lossless = sorted(set.intersection(*paused))
    roce = next(((dscps(tc)[0], tc) for tc in lossless if dscps(tc)), None)
    if roce is None:
        raise ValueError(f"{plat.folder}: no DSCP reaches a priority every port pauses")
    lossy = [tc for tc in range(8) if not any(tc in p for p in paused) and dscps(tc)]
    strict = [tc for tc in lossy if all(_strict(plat, p, tc) for p in ports)]
    tc = max(strict or lossy)
    return roce, (dscps(tc)[0], tc)


def _strict(plat: Platform, port: str, tc: int) -> bool:
    """Whether ``tc`` leaves ``port`` by a STRICT queue."""
    queue_map = plat.tables["PORT_QOS_MAP"][port].get("tc_to_queue_map")
    queue = int(plat.tables.get("TC_TO_QUEUE_MAP", {}).get(queue_map, {}).get(str(tc), tc))
    return plat.scheduler_type(port, queue) == "STRICT"


def _fabric_ip(leaf: int, spine: int) -> tuple[str, str]:
    """(spine end, leaf end) of a leaf-spine /31, numbered as the shipped labs number them."""
    k = 2 * ((leaf - 1) * SPINES + spine - 1)
    return f"10.0.0.{k}", f"10.0.0.{k + 1}"


def switch_config(plat: Platform, switch: str, wires: list[Wire]) -> dict:
    """The platform's rendered tables, unchanged, plus what this switch needs around them."""
    wired = {w.port: w for w in wires}
    ports = {}
    for port, row in plat.ports.items():
        entry = dict(row)
        # what SONiC's minigraph rendering adds to every port it reads from port_config.ini
        if port in wired:
            entry["admin_status"] = "up"
            entry["description"] = f"{wired[port].peer}:{wired[port].peer_iface}"
        else:
            entry["description"] = row["alias"]
        entry.update(mtu=str(LINK_MTU), tpid="0x8100", pfc_asym="off")
        if entry.get("speed") == "100000":
            entry.setdefault("fec", "rs")
        ports[port] = entry
    config: dict[str, dict] = {
        "DEVICE_METADATA": {"localhost": _metadata(plat, switch)},
        "PORT": ports,
        **plat.tables,
        "PFC_WD": _pfc_wd(plat, [w.port for w in wires]),
    }
    config.update(_addresses(switch, wires))
    return config


def _metadata(plat: Platform, switch: str) -> dict[str, str]:
    """The switch's identity; a VoQ line card keeps the hostname and ASIC its rendered QUEUE
    keys name (``<host>|<asic>|<port>|<queue>``), so every switch of such a lab shares it."""
    kind, number = re.match(r"([a-z]+)(\d+)", switch).groups()
    meta = {"hostname": switch,
            "mac": f"02:52:4c:00:{1 if kind == 'leaf' else 0:02x}:{int(number):02x}",
            "hwsku": plat.provenance["hwsku"], "platform": plat.provenance["platform"],
            "type": "LeafRouter" if kind == "leaf" else "SpineRouter",
            "buffer_model": "traditional", "default_pfcwd_status": "enable"}
    meta.update(plat.provenance.get("device_metadata", {}))
    return meta


def _pfc_wd(plat: Platform, ports: list[str]) -> dict[str, dict[str, str]]:
    """PFC_WD as ``pfcwd start_default`` writes it at boot: the defaults on every connected
    port with ``pfc_enable`` (timers scale with every 32 such ports) and the poll interval."""
    qos = plat.tables["PORT_QOS_MAP"]
    paused = [p for p in ports if "pfc_enable" in qos.get(p, {})]
    scale = max(1, (len(paused) - 1) // 32 + 1)
    out = {p: {"action": "drop", "detection_time": str(200 * scale),
               "restoration_time": str(200 * scale), "pfc_stat_history": "disable"}
           for p in paused}
    out["GLOBAL"] = {"POLL_INTERVAL": str(min(200 * scale, 1000))}
    return out


def _addresses(switch: str, wires: list[Wire]) -> dict[str, dict]:
    """Routed /31 uplinks, the rack's VLAN with its gateway, static routes to the racks."""
    number = int(re.sub(r"\D", "", switch))
    interface: dict[str, dict] = {}
    routes: dict[str, dict] = {}
    if switch.startswith("spine"):
        for w in wires:
            leaf = int(re.sub(r"\D", "", w.peer))
            mine, theirs = _fabric_ip(leaf, number)
            interface.update({w.port: {}, f"{w.port}|{mine}/31": {}})
            routes[f"10.1.{leaf}.0/24"] = {"nexthop": theirs}
        return {"INTERFACE": interface, "STATIC_ROUTE": routes}
    spines = []
    for w in wires:
        if w.peer.startswith("spine"):
            theirs, mine = _fabric_ip(number, int(re.sub(r"\D", "", w.peer)))
            interface.update({w.port: {}, f"{w.port}|{mine}/31": {}})
            spines.append(theirs)
    for other in range(1, LEAVES + 1):
        if other != number:
            routes[f"10.1.{other}.0/24"] = {"nexthop": ",".join(spines)}
    vlan = f"Vlan{100 * number}"
    hosts = [w.port for w in wires if not w.peer.startswith("spine")]
    return {"INTERFACE": interface, "STATIC_ROUTE": routes,
            "VLAN": {vlan: {"vlanid": str(100 * number)}},
            "VLAN_MEMBER": {f"{vlan}|{p}": {"tagging_mode": "untagged"} for p in hosts},
            "VLAN_INTERFACE": {vlan: {}, f"{vlan}|10.1.{number}.1/24": {}}}


def _clab(plat: Platform, name: str, wiring: dict[str, list[Wire]]) -> dict:
    """The containerlab file: switches bind their config, lanemap and the SKU's PG lookup
    where SONiC-VS reads them; hosts sit in their leaf's rack subnet."""
    nodes: dict[str, dict] = {}
    for switch in wiring:
        nodes[switch] = {"kind": "sonic-vs", "binds": [
            f"configs/{switch}/config_db.json:/var/sonic/config_db.json:ro",
            f"configs/{switch}/lanemap.ini:{HWSKU_DIR}/lanemap.ini:ro",
            f"configs/pg_profile_lookup.ini:{HWSKU_DIR}/pg_profile_lookup.ini:ro"]}
    links = []
    for switch, wires in wiring.items():
        for w in wires:
            if w.peer.startswith("h"):
                leaf = int(re.sub(r"\D", "", switch))
                host = int(w.peer[1:])
                nodes[w.peer] = {"kind": "linux", "exec": [
                    f"ip addr add 10.1.{leaf}.{10 + host}/24 dev eth1",
                    f"ip route replace default via 10.1.{leaf}.1"]}
            if switch.startswith("leaf"):
                links.append({"endpoints": [f"{switch}:{w.iface}", f"{w.peer}:{w.peer_iface}"],
                              "mtu": LINK_MTU})
    topology: dict = {}  # no time-scale label: S follows the fastest port (labs.topology)
    topology["kinds"] = {"sonic-vs": {"image": "docker-sonic-vs:latest"},
                         "linux": {"image": "rocelab-host:latest",
                                   "labels": {"rocelab.nic": "nic/default.yml"}}}
    topology["nodes"] = nodes
    topology["links"] = links
    return {"name": name, "topology": topology}
