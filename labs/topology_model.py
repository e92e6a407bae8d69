"""The typed model of a containerlab topology (nodes, links, the switches' loaded configs)
and the names and labels a clab file may use: what ``labs.topology`` loads a file into."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from ..fabric.config import DEFAULT_ECN_MARKING, SwitchConfig
from ..fabric.portmap import Lanes, PortMap, PortMapError
from ..fabric.model.pause import min_refreshable_scale
from ..nic.settings import NicSettings

# The lab's time scale S: every port runs at speed / S and data-plane time constants
# stretch by S (docs/design.md, "Time scale"). A node label, lab-wide when set in
# topology.defaults.labels. The default keeps a 100G frame of 1 KB at ~0.25 ms on the wire,
# above the ~0.1-0.3 ms timer granularity of this kind of machine (machine-facts.md), so a
# switch paces every frame on time on 2 cores.
TIME_SCALE_LABEL = "rocelab.time-scale"
DEFAULT_TIME_SCALE = 3000.0
AUTO = "auto"  # the time-scale label's value for "choose S for this machine at lab.up"

# Where the switches take the WRED/ECN decision, at dequeue (the default) or at enqueue
# (fabric.config.ECN_MARKING_POINTS): a switch label, lab-wide in topology.defaults.labels.
ECN_MARKING_LABEL = "rocelab.ecn-marking"
SWITCH_KINDS = {"sonic-vs"}
HOST_KINDS = {"linux"}
SONIC_CONFIG_TARGET = "/etc/sonic/config_db.json"  # where SONiC and the rocelab switch read it
# Where docker-sonic-vs's start.sh copies it from (a bind at SONIC_CONFIG_TARGET breaks start.sh)
SONIC_STAGED_CONFIG = "/var/sonic/config_db.json"
SONIC_CONFIG_BINDS = (SONIC_STAGED_CONFIG, SONIC_CONFIG_TARGET)  # targets naming the config
DEFAULT_MTU = 9500  # containerlab's veth default
# Files a node reads (binds, startup-config, rocelab.nic) stay inside the topology's folder
# unless this node label (lab-wide in topology.defaults.labels) says "true": a clab file
# runs as root, so one fetched from elsewhere must not reach /etc or ~/.ssh unannounced.
ALLOW_OUTSIDE_LABEL = "rocelab.allow-outside-paths"

NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,31}$")  # clab's pattern, bounded length
IFACE_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,15}$")  # Linux IFNAMSIZ
# names the kernel refuses (".", "..") or that every namespace already has or reserves
# (lo; "all" and "default" are taken in /proc/sys/net/*/conf)
RESERVED_IFACES = {".", "..", "lo", "all", "default"}
SWITCH_IFACE_RE = re.compile(r"^eth[1-9][0-9]*$")
ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::=([^}]*))?\}")

TOP_KEYS = {"name", "prefix", "mgmt", "topology", "settings", "debug"}
TOPOLOGY_KEYS = {"nodes", "links", "kinds", "defaults", "groups"}
# containerlab v0.79.0's node keys: schemas/clab.schema.json, definitions.node-config.properties
# (vendored as tests/data/schemas/clab.schema.json; a unit test keeps this equal to it).
NODE_KEYS = {
    "aliases", "auto-remove", "binds", "cap-add", "certificate", "cgroup-parent",
    "cgroupns-mode", "cmd", "components", "config", "cpu", "cpu-set", "credentials", "devices",
    "dns", "enforce-startup-config", "entrypoint", "env", "env-files", "exec", "extras", "group",
    "healthcheck", "hostname", "image", "image-pull-policy", "kind", "labels", "license",
    "link-apply-mode", "memory", "mgmt-ipv4", "mgmt-ipv6", "network-mode", "pid-mode", "ports",
    "privileged", "restart-policy", "runtime", "security-opts", "shm-size", "stages",
    "startup-config", "startup-delay", "suppress-startup-config", "sysctls", "tmpfs", "type",
    "user", "volumes",
}
LINK_KEYS = {"endpoints", "mtu", "labels", "vars", "type"}


class TopologyError(ValueError):
    """A topology problem, phrased as ``file: key.path: problem``."""


def auto_floor(fastest_mbps: int) -> float:
    """The S a switch that declares none starts from, before lab.up raises it for the machine
    (``labs.calibrate``, from the lab's load): the default, or more if a PFC pause on its
    fastest port could not be refreshed at the default."""
    return max(DEFAULT_TIME_SCALE, min_refreshable_scale(fastest_mbps))


@dataclass(frozen=True)
class Endpoint:
    node: str
    iface: str

    def __str__(self) -> str:
        return f"{self.node}:{self.iface}"


@dataclass(frozen=True)
class Link:
    a: Endpoint
    b: Endpoint
    mtu: int = DEFAULT_MTU


@dataclass(frozen=True)
class Node:
    name: str
    kind: str
    image: str = ""
    exec: tuple[str, ...] = ()
    binds: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    config_path: Path | None = None  # a switch's config_db.json
    pg_lookup_path: Path | None = None  # ... and its platform's pg_profile_lookup.ini, if bound
    config: SwitchConfig | None = None  # parsed and validated
    # a switch's lanemap.ini, bound where SONiC-VS reads it, and its wires' lanes; None: the
    # image's default layout (fabric.portmap)
    lanemap_path: Path | None = None
    lanemap: dict[str, Lanes] | None = None
    ports: PortMap | None = None  # which PORT entry each wire is; set with config
    time_scale: float = DEFAULT_TIME_SCALE  # label rocelab.time-scale
    # no S declared (label absent or "auto"): time_scale is the floor ``labs.calibrate``
    # raises at lab.up for the machine, the same for every such node
    time_scale_auto: bool = False
    ecn_marking: str = DEFAULT_ECN_MARKING  # label rocelab.ecn-marking
    # a host's NIC settings file (label rocelab.nic) and its parsed settings; None without
    # the label: nothing is assumed about that NIC (config.lint's host-dscp skips it)
    nic_path: Path | None = None
    nic: NicSettings | None = None

    @property
    def is_switch(self) -> bool:
        return self.kind in SWITCH_KINDS


@dataclass(frozen=True)
class Topology:
    name: str
    path: Path
    nodes: dict[str, Node]
    links: tuple[Link, ...]

    @property
    def switches(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.is_switch]

    @property
    def hosts(self) -> list[Node]:
        return [n for n in self.nodes.values() if not n.is_switch]

    def with_time_scale(self, scale: float | None) -> "Topology":
        """This topology with every node that declares no S at ``scale`` (None: at the
        largest of their floors, which one lab shares); nodes that declare S keep theirs."""
        auto = [n for n in self.nodes.values() if n.time_scale_auto]
        if not auto:
            return self
        scale = scale if scale is not None else max(n.time_scale for n in auto)
        nodes = {name: replace(n, time_scale=scale) if n.time_scale_auto else n
                 for name, n in self.nodes.items()}
        return replace(self, nodes=nodes)

    def interfaces(self, node: str) -> list[str]:
        """The node's wired interfaces, in link order."""
        return list(self._interfaces.get(node, ()))

    def cable_m(self, node: str, iface: str) -> float:
        """Metres of the cable a frame crosses into ``node``'s ``iface``: that switch port's
        CABLE_LENGTH, or, into a host, the CABLE_LENGTH of the switch port at the other end
        (SONiC states the cable per port, for the port's own headroom); 0 when neither
        end says. Both runtimes delay frames by it (``fabric.model.cable``)."""
        peer = self.peer(node, iface)
        for end in (Endpoint(node, iface), peer):
            config = self.nodes[end.node].config if end is not None else None
            if config is not None:
                return config.qos.cable_length_m.get(self.port(end.node, end.iface), 0)
        return 0

    def port(self, node: str, iface: str) -> str:
        """The PORT entry on a switch's wire (its config loaded)."""
        return self._map(node).port(iface)

    def iface(self, node: str, port: str) -> str:
        """The wire a switch's PORT entry is on."""
        return self._map(node).iface(port)

    def _map(self, node: str) -> PortMap:
        ports = self.nodes[node].ports
        if ports is None:
            raise PortMapError(f"{self.path}: {node} is not a switch whose config is loaded")
        return ports

    def peer(self, node: str, iface: str) -> Endpoint | None:
        return self._peers.get(Endpoint(node, iface))

    # Indexes over the links, built on first use: a counter snapshot asks for every port's
    # peer, and scanning a 256-host fabric's links each time was most of a probe's cost.
    @cached_property
    def _peers(self) -> dict[Endpoint, Endpoint]:
        out: dict[Endpoint, Endpoint] = {}
        for link in self.links:
            out.setdefault(link.a, link.b)
            out.setdefault(link.b, link.a)
        return out

    @cached_property
    def _interfaces(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for link in self.links:
            for end in (link.a, link.b):
                out.setdefault(end.node, []).append(end.iface)
        return out
