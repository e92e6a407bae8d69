"""What lint works on and reports: the lab (its topology, each switch's config and
which PORT entry each wire is), what it means to carry (``Settings``), and a ``Finding``."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from ..fabric.config import ConfigError, SwitchConfig
from ..fabric.portmap import wiring as wire_ports
from ..fabric.qos import HeadroomParams, qos_ports
from .classes import RoceClass
from ..labs.topology import Topology

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


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


def listed(priorities: frozenset[int]) -> str:
    """Priorities as a finding writes them: ``3,4``."""
    return ",".join(map(str, sorted(priorities)))
