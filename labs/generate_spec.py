"""What ``labs.generate`` builds a lab from and into: the user's spec (the options of
``invoke topo.generate``), the fabric's shape, and the built fabric of switches, ports and
hosts that ``labs.generate_config`` renders each switch's configuration from."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from ipaddress import IPv4Address, IPv4Interface, IPv4Network

SPEEDS_MBPS = {"100G": 100_000, "400G": 400_000}


class GenerateError(ValueError):
    """A generator input problem, phrased as ``--option: problem``."""


@dataclass(frozen=True)
class Spec:
    """What to generate; the fields are the options of ``invoke topo.generate``."""

    name: str
    hosts_per_leaf: int = 2
    leaves: int = 2
    spines: int = 0  # two tiers with this many spines; 0: the fewest that fit (or 3 tiers)
    speed: str = "100G"
    oversubscription: float = 1.0
    radix: int = 64  # ports per switch
    roce_dscp: int = 26
    roce_priority: int = 3
    cnp_dscp: int = 48
    cnp_priority: int = 6
    routing: str = "static"  # static: STATIC_ROUTE per switch; bgp: eBGP (FRR) with loopbacks
    time_scale: str = "auto"  # the live runtime's S: a number, or auto (chosen at lab.up)

    @property
    def speed_mbps(self) -> int:
        return SPEEDS_MBPS[self.speed.upper()]

    def command(self) -> str:
        """The ``invoke`` command line that generates this lab, every option spelled out."""
        args = [self.name]
        for f in fields(self)[1:]:
            value = getattr(self, f.name)
            if (f.name, value) in (("routing", "static"), ("time_scale", "auto")):
                continue  # the defaults labs were generated with before the option existed
            text = f"{value:g}" if isinstance(value, float) else str(value)
            args.append(f"--{f.name.replace('_', '-')} {text}")
        return "invoke topo.generate " + " ".join(args)


@dataclass(frozen=True)
class Shape:
    """The fabric's tiers and counts, derived from a Spec (``shape``)."""

    tiers: int
    uplinks: int  # per leaf
    spines: int  # per pod (the whole spine layer in two tiers)
    pods: int = 1
    spine_uplinks: int = 0  # per pod spine (three tiers)
    supers_per_plane: int = 0  # planes = spines per pod

    def leaves_per_pod(self, spec: Spec) -> int:
        return spec.leaves // self.pods


@dataclass
class Port:
    iface: str
    peer: str
    cable_m: int
    up: bool = False  # toward a higher tier
    address: IPv4Interface | None = None  # a routed fabric port; None: a rack (host) port
    peer_ip: IPv4Address | None = None


@dataclass
class Switch:
    name: str
    role: str  # leaf, spine, super
    number: int  # 1-based within its role
    ports: list[Port] = field(default_factory=list)
    racks: set[int] = field(default_factory=set)  # the racks (leaf numbers) below it
    vlan: int = 0  # a leaf's rack VLAN ...
    gateway: IPv4Interface | None = None  # ... and its SVI address
    routes: dict[IPv4Network, list[IPv4Address]] = field(default_factory=dict)


@dataclass(frozen=True)
class Host:
    name: str
    address: IPv4Interface
    gateway: IPv4Address


@dataclass
class Fabric:
    spec: Spec
    shape: Shape
    switches: dict[str, Switch]  # in file order: top tier first
    hosts: list[Host]
    links: list[tuple[str, str, str, str]]  # (node, iface, node, iface), in file order
