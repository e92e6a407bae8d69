"""Which SONiC port each wire of a switch is, by the rule SONiC-VS follows.

A SONiC-VS container's wires are containerlab's eth1, eth2, ...; its ``lanemap.ini`` (read at
``/usr/share/sonic/hwsku/lanemap.ini``) gives each wire its ASIC lanes, and the PORT entry
whose ``lanes`` are those lanes is the port on that wire. Without a lanemap bound, the image's
default hwsku (Force10-S6000) gives ethN the lanes of port_config.ini's Nth line, the lanes of
``Ethernet4*(N-1)``. A PORT entry that no lanes match is found by its ``alias`` (the wire's
name), and a PORT table that states no lanes at all follows the default layout by name.
Every part of rocelab that turns a wire into a port asks a ``PortMap`` built here.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .config import SwitchConfig

LANEMAP_TARGET = "/usr/share/sonic/hwsku/lanemap.ini"  # where SONiC-VS's SAI reads it

Lanes = tuple[int, ...]

# The default VS hwsku's lanes, wire by wire (eth1 first): sonic-device-data writes the VS
# lanemap.ini from the hwsku's port_config.ini, its Nth port line becoming ethN.
DEFAULT_LANES: tuple[Lanes, ...] = tuple(
    tuple(range(first, first + 4)) for first in (
        25, 29, 33, 37, 45, 41, 1, 5, 13, 9, 17, 21, 53, 49, 57, 61,
        69, 65, 73, 77, 109, 105, 113, 117, 125, 121, 81, 85, 93, 89, 101, 97))
# A lanemap line lists 1, 2, 4 or 8 lanes (vslib's LaneMapFileParser refuses other counts).
LANE_COUNTS = (1, 2, 4, 8)


class PortMapError(ValueError):
    """A lanemap.ini that SONiC-VS would not read, or a wiring no PORT entry answers."""


def default_port(iface: str) -> str:
    """The default layout's port on a wire, by name: eth1 -> Ethernet0, ethN -> 4*(N-1)."""
    return f"Ethernet{4 * (_wire_number(iface) - 1)}"


def default_lanes(iface: str) -> Lanes | None:
    """The lanes the default hwsku's lanemap gives a wire (None past its 32 ports)."""
    n = _wire_number(iface)
    return DEFAULT_LANES[n - 1] if n <= len(DEFAULT_LANES) else None


def _wire_number(iface: str) -> int:
    if not iface.startswith("eth") or not iface[3:].isdigit() or int(iface[3:]) < 1:
        raise PortMapError(f"{iface!r} is not a switch data port (expected eth1, eth2, ...)")
    return int(iface[3:])


def parse_lanemap(text: str, path: str | Path) -> dict[str, Lanes]:
    """A lanemap.ini as vslib reads it: ``ethX:lane,...`` or ``N:ethX:lane,...`` (switch
    index N; only switch 0 is the one container's), ``#`` and ``;`` comments."""
    out: dict[str, Lanes] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        parts = line.split(":")
        where = f"{path}: line {number}"
        if len(parts) == 3:
            if not parts[0].strip().isdigit():
                raise PortMapError(f"{where}: {parts[0]!r} is not a switch index")
            if int(parts[0]) != 0:
                continue
            parts = parts[1:]
        if len(parts) != 2:
            raise PortMapError(f"{where}: expected ethX:lane,lane,... (got {line!r})")
        iface, lanes = parts[0].strip(), [lane.strip() for lane in parts[1].split(",")]
        if not iface.isalnum() or not iface.isascii():
            raise PortMapError(f"{where}: {iface!r} is not an interface name")
        if not all(lane.isdigit() for lane in lanes) or len(lanes) not in LANE_COUNTS:
            raise PortMapError(f"{where}: {iface}: expected 1, 2, 4 or 8 lane numbers "
                               f"(got {parts[1]!r})")
        if iface in out:
            raise PortMapError(f"{where}: {iface} is given lanes twice")
        out[iface] = tuple(int(lane) for lane in lanes)
    return out


def read_lanemap(path: Path) -> dict[str, Lanes]:
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise PortMapError(f"{path}: cannot read the lanemap: {e}") from None
    return parse_lanemap(text, path)


def wire(config: SwitchConfig, iface: str, lanemap: Mapping[str, Lanes] | None) -> str | None:
    """The PORT entry on ``iface``, or None when none answers (a lanemap without the wire
    gives it no lanes, as SONiC-VS would create no port there)."""
    lanes = lanemap.get(iface) if lanemap is not None else default_lanes(iface)
    if lanes is not None:
        for port in config.ports.values():
            if port.lanes and set(port.lanes) == set(lanes):
                return port.name
    for port in config.ports.values():
        if port.alias == iface:
            return port.name
    if not any(port.lanes for port in config.ports.values()):
        name = default_port(iface)
        return name if name in config.ports else None
    return None


def wiring(config: SwitchConfig, ifaces: Iterable[str],
           lanemap: Mapping[str, Lanes] | None) -> dict[str, str | None]:
    """Each wired interface's PORT entry (None: unmapped), in the order given."""
    return {iface: wire(config, iface, lanemap) for iface in ifaces}


def doubles(ports: Mapping[str, str | None]) -> dict[str, list[str]]:
    """PORT entries that more than one wire maps to, with those wires."""
    wires: dict[str, list[str]] = {}
    for iface, port in ports.items():
        if port is not None:
            wires.setdefault(port, []).append(iface)
    return {port: ifaces for port, ifaces in wires.items() if len(ifaces) > 1}


def unmapped_reason(config: SwitchConfig, iface: str, lanemap: Mapping[str, Lanes] | None,
                    lanemap_path: str | Path | None) -> str:
    """Why no PORT entry is on ``iface``: the lanes looked for, where they came from, and
    the config that lacks them."""
    lanes = lanemap.get(iface) if lanemap is not None else default_lanes(iface)
    source = str(lanemap_path) if lanemap_path else "the default hwsku's lanemap"
    looked = (f"lanes {','.join(map(str, lanes))} (from {source})" if lanes is not None
              else f"lanes ({source} gives {iface} none)")
    return f"no PORT entry of {config.path} has its {looked} or alias {iface}"


@dataclass(frozen=True)
class PortMap:
    """A switch's wired interfaces and the PORT entry on each."""

    ports: dict[str, str]  # iface -> PORT name, in wiring order

    @classmethod
    def build(cls, config: SwitchConfig, ifaces: Iterable[str],
              lanemap: Mapping[str, Lanes] | None = None,
              lanemap_path: str | Path | None = None, node: str = "") -> PortMap:
        """The map, or PortMapError (naming ``node``, the wire and the config) for the first
        wire with no PORT entry or one that shares its entry with another wire."""
        found = wiring(config, ifaces, lanemap)
        at = f"{node}:" if node else ""
        for iface, port in found.items():
            if port is None:
                raise PortMapError(f"{at}{iface} is wired but "
                                   f"{unmapped_reason(config, iface, lanemap, lanemap_path)}")
        for port, wires in doubles(found).items():
            raise PortMapError(f"{at}{' and '.join(wires)} are wired to one PORT entry of "
                               f"{config.path}, {port}")
        return cls({iface: port for iface, port in found.items() if port is not None})

    @classmethod
    def parse(cls, text: str) -> PortMap:
        """``eth1=Ethernet0,eth2=Ethernet8``, as the agent's command line carries it."""
        ports = {}
        for item in filter(None, text.split(",")):
            iface, sep, port = item.partition("=")
            if not sep or not iface or not port:
                raise PortMapError(f"{item!r} is not iface=PORT (eth1=Ethernet0)")
            ports[iface] = port
        return cls(ports)

    def __str__(self) -> str:
        return ",".join(f"{iface}={port}" for iface, port in self.ports.items())

    def port(self, iface: str) -> str:
        try:
            return self.ports[iface]
        except KeyError:
            raise PortMapError(f"{iface} is not a wired port of this switch") from None

    def iface(self, port: str) -> str:
        try:
            return self._ifaces[port]
        except KeyError:
            raise PortMapError(f"{port} is on none of this switch's wires") from None

    @cached_property
    def _ifaces(self) -> dict[str, str]:
        return {port: iface for iface, port in self.ports.items()}

    def get(self, iface: str) -> str | None:
        return self.ports.get(iface)
