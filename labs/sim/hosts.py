"""What checks and traffic ask of a lab's hosts, answered by the simulated ones: addresses,
routes, neighbours, pings and traceroutes, for IPv4 and IPv6 as ``labs.live_hosts`` answers
them live from the hosts' kernels (a host's address is its first IPv4 one, else its first IPv6
one; the default gateway the IPv4 one, else the IPv6 one; hops are 64 minus the reply's TTL
or hop limit).
"""
from __future__ import annotations

import functools
import ipaddress
import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..records import HOST_TTL, Ping
from ..errors import LabError
from .engine import to_ps
from .host import PingReply, SimHost
from .hostconfig import IPAddress, IPInterface

if TYPE_CHECKING:
    from ..topology import Topology
    from .engine import Engine
    from .network import SimNetwork

PING_WAIT_S = 2.0  # wall seconds a live ping waits (-W 2): the same fabric time here


@functools.lru_cache(maxsize=None)
def _address(text: str) -> IPAddress:
    """``text`` parsed, once per address: setting up a fabric's flows asks for the next hop
    of every pair of hosts, 130,000 pairs at 512 hosts, each by address text."""
    try:
        return ipaddress.ip_address(text)
    except ValueError as e:
        raise LabError(str(e)) from None


@functools.lru_cache(maxsize=None)
def _mac_text(mac: bytes) -> str:
    return ":".join(f"{b:02x}" for b in mac)


class SimHosts:
    """The host half of ``labs.runtimes.sim.SimLab`` (which provides ``net``, ``engine``,
    ``name``, ``topology``, ``time_scale``, ``rng`` and ``sim_s``): what its flows
    (``labs.sim.flows``) drive too."""

    net: SimNetwork
    engine: Engine
    name: str
    topology: Topology
    time_scale: float
    rng: random.Random
    sim_s: Callable[[float], float]
    _ident = 0  # the last ICMP echo identifier used

    def _host(self, name: str) -> SimHost:
        host = self.net.hosts.get(name)
        if host is None:
            raise LabError(f"lab {self.name} has no host {name!r}")
        return host

    def host_addresses(self) -> dict[str, str]:
        return {name: str(h.address.ip) for name, h in self.net.hosts.items() if h.address}

    def host_interfaces(self) -> dict[str, list[IPInterface]]:
        return {name: h.config.interfaces() for name, h in self.net.hosts.items()}

    def default_gateway(self, host: str) -> str | None:
        gateways = self._host(host).config.gateways
        gateway = gateways.get(4) or gateways.get(6)
        return None if gateway is None else str(gateway)

    def mac(self, host: str, iface: str) -> str:
        return _mac_text(self._host(host).macs[iface])

    def host_iface(self, host: str, ip: str) -> str:
        want = _address(ip)
        config = self._host(host).config
        for iface, address in config.addresses[want.version].items():
            if address.ip == want:
                return iface
        raise LabError(f"{host} has no address {ip}")

    def route(self, host: str, dst_ip: str) -> tuple[str, str | None]:
        """(interface, gateway or None when on-link) ``host`` uses toward ``dst_ip``."""
        dst = _address(dst_ip)
        hop = self._host(host).route(dst)
        if hop is None:
            raise LabError(f"{host} has no route to {dst_ip}")
        return hop[0], None if hop[1] == dst else str(hop[1])

    def neighbour(self, host: str, iface: str, ip: str) -> str | None:
        """``host``'s MAC for ``ip``, resolving it (an echo) when it has none yet."""
        sim, key = self._host(host), _address(ip)
        if key not in sim.neighbours:
            self._echo(sim, ip, HOST_TTL)
        mac = sim.neighbours.get(key)
        return None if mac is None else _mac_text(mac)

    def next_hop_mac(self, host: str, ip: str) -> str:
        iface, gateway = self.route(host, ip)
        mac = self.neighbour(host, iface, gateway or ip)
        if mac is None:
            raise LabError(f"{host} cannot resolve the next hop toward {ip} "
                           "(no ARP or neighbour discovery reply)")
        return mac

    def _echo(self, host: SimHost, ip: str, ttl: int) -> PingReply | None:
        """One echo request, the clock run until its answer or a live ping's wait."""
        self._ident = (self._ident + 1) & 0xFFFF
        key = (self._ident, 1)
        if not host.ping(ip, *key, ttl=ttl):
            return None
        deadline = self.engine.now_ps + to_ps(self.sim_s(PING_WAIT_S))
        while key not in host.replies and self.engine.run(deadline):  # halted by a reply
            pass
        return host.replies.pop(key, None)

    def ping(self, src: str, dst: str, dst_ip: str, count: int = 2) -> Ping:
        host = self._host(src)
        replies = [self._echo(host, dst_ip, HOST_TTL) for _ in range(count)]
        got = [r for r in replies if r is not None and r.kind == "reply"]
        return Ping(src, dst, dst_ip, len(got) == count,
                    HOST_TTL - got[-1].ttl if got else None)

    def ping_all(self, dst: str | None = None) -> list[Ping]:
        """Every host to every other (with ``dst``, every other to it); a pair with a host
        without an address fails, saying so (as live)."""
        addrs = self.host_addresses()
        out = []
        for s in self.net.hosts:
            for d in self.net.hosts:
                if s == d or dst not in (None, d):
                    continue
                missing = next((h for h in (s, d) if h not in addrs), None)
                out.append(self.ping(s, d, addrs[d]) if missing is None else
                           Ping(s, d, addrs.get(d, ""), False, None,
                                f"host {missing} has no IP address on a wired interface"))
        return out

    def trace(self, src: str, dst_ip: str, max_hops: int = 8) -> list[str]:
        """The routers on the path, from time-exceeded answers to TTL- (hop-) limited
        echoes."""
        host, hops = self._host(src), []
        for ttl in range(1, max_hops + 1):
            reply = self._echo(host, dst_ip, ttl)
            if reply is None:
                hops.append("*")
            elif reply.kind == "time-exceeded":
                hops.append(reply.from_ip)
            else:
                hops.append(dst_ip)
                return hops
        return hops
