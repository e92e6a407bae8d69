"""What a simulated host's ``exec`` lines configure: its IPv4 and IPv6 addresses (dual stack
on one interface allowed) and a default route per family.

Only lines whose effect the simulator models are accepted (``ip [-4|-6] addr add A/N dev IF``,
IPv6 with ``nodad``; ``ip [-4|-6] route add|replace default via GW``; ``ip link set ... up``);
anything else is refused before the run starts, naming the node and the line: a lab the
simulator cannot model says so rather than running half of it.
"""
from __future__ import annotations

import hashlib
import ipaddress
import shlex
from dataclasses import dataclass, field

IPInterface = ipaddress.IPv4Interface | ipaddress.IPv6Interface
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
MODELLED = ("it models ip [-4|-6] addr add A/N dev IF (IPv6 with nodad), "
            "ip [-4|-6] route add|replace default via GW, ip link set ... up")


class SimError(ValueError):
    """A lab the simulator cannot model, or an operation it cannot do (one line)."""


@dataclass
class HostConfig:
    """What a host's ``exec`` lines configure, per IP version (4, 6)."""

    addresses: dict[int, dict[str, IPInterface]] = field(
        default_factory=lambda: {4: {}, 6: {}})  # version -> iface -> address
    gateways: dict[int, IPAddress] = field(default_factory=dict)  # version -> default gateway

    def interfaces(self) -> list[IPInterface]:
        """Every address, IPv4 ones first (the order a live host's are read in)."""
        return [*self.addresses[4].values(), *self.addresses[6].values()]


def host_config(node: str, lines: tuple[str, ...], ifaces: list[str]) -> HostConfig:
    """Read a host's ``exec`` lines; refuse what the simulator would silently ignore."""
    config = HostConfig()
    for n, line in enumerate(lines, 1):
        where = f"node {node}: exec[{n}] {line!r}"
        try:
            argv = shlex.split(line)
        except ValueError as e:
            raise SimError(f"{where}: {e}") from None
        family = None
        if argv[1:2] in (["-4"], ["-6"]):
            family = int(argv[1][1])
            argv = argv[:1] + argv[2:]
        if argv[:3] in (["ip", "addr", "add"], ["ip", "address", "add"]):
            _address(config, argv[3:], family, ifaces, where)
        elif argv[:2] == ["ip", "route"] and len(argv) == 6 and argv[2] in ("add", "replace") \
                and argv[3] == "default" and argv[4] == "via":
            gateway = _parse(ipaddress.ip_address, argv[5], family, where)
            if gateway.version in config.gateways:
                raise SimError(f"{where}: a second IPv{gateway.version} default route")
            config.gateways[gateway.version] = gateway
        elif argv[:3] == ["ip", "link", "set"] and argv[-1] == "up" and family is None:
            continue
        else:
            raise SimError(f"{where}: not modelled by the simulator ({MODELLED})")
    return config


def _address(config: HostConfig, rest: list[str], family: int | None, ifaces: list[str],
             where: str) -> None:
    """``A/N dev IF`` (IPv6: with ``nodad``, in any order after the address)."""
    if not rest:
        raise SimError(f"{where}: expected 'ip addr add A/N dev <wired iface>'")
    address = _parse(ipaddress.ip_interface, rest[0], family, where)
    options, dev, nodad = rest[1:], None, False
    while options:
        if options[0] == "dev" and len(options) > 1 and dev is None:
            dev, options = options[1], options[2:]
        elif options[0] == "nodad" and address.version == 6 and not nodad:
            nodad, options = True, options[1:]
        else:
            raise SimError(f"{where}: {options[0]!r} is not modelled ({MODELLED})")
    if dev not in ifaces:
        raise SimError(f"{where}: expected 'ip addr add A/N dev <wired iface>' "
                       f"(wired: {', '.join(ifaces)})")
    if address.version == 6 and not nodad:
        raise SimError(f"{where}: add nodad: the simulator does not model duplicate "
                       "address detection, so an IPv6 address is usable at once, as with nodad")
    if dev in config.addresses[address.version]:
        raise SimError(f"{where}: one IPv{address.version} address per interface is modelled")
    config.addresses[address.version][dev] = address


def _parse(parse, text: str, family: int | None, where: str):
    try:
        value = parse(text)
    except ValueError as e:
        raise SimError(f"{where}: {e}") from None
    if family is not None and value.version != family:
        raise SimError(f"{where}: {text} is not an IPv{family} address (ip -{family})")
    return value


def host_mac(lab: str, node: str, iface: str) -> bytes:
    """A stable, locally administered unicast MAC for a host interface."""
    digest = hashlib.sha256(f"{lab}/{node}/{iface}".encode()).digest()
    return bytes([0x02]) + digest[:5]
