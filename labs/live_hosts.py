"""What checks and traffic ask of a live lab's hosts, answered by their kernels: addresses,
routes, neighbours (``ip -j`` and netlink in each host's namespace), pings and traceroutes.
``labs.sim.hosts.SimHosts`` answers the same in virtual time."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from ipaddress import IPv4Interface, IPv6Interface, ip_interface

from .errors import LabError
from .records import HOST_TTL, Ping
from .runtimes.netns import open_namespace
from .topology import Topology

REACHABLE_TIMEOUT_S = 30.0  # a BGP lab's routes reach every agent within this
TTL_RE = re.compile(r"ttl=(\d+)")
TIME_EXCEEDED_RE = re.compile(
    r"From (\S+) icmp_seq=\d+ Time (?:to live exceeded|exceeded: Hop limit)")
ADDRESS_FAMILIES = (socket.AF_INET, socket.AF_INET6)  # a host's address: IPv4 first
RT_SCOPE_UNIVERSE = 0  # a global address (not link-local fe80::, not host ::1)


class LiveHosts:
    """The host half of ``labs.live.LiveLab`` (which provides ``name``, ``topology``,
    ``exec`` and ``namespace``)."""

    name: str
    topology: Topology

    def exec(self, node: str, argv: list[str],
             timeout: float | None = None) -> subprocess.CompletedProcess: ...

    def namespace(self, node: str) -> str: ...

    def host_interfaces(self) -> dict[str, list[IPv4Interface | IPv6Interface]]:
        """Each host's IPv4 and global IPv6 addresses with their prefixes, on its wired
        interfaces."""
        out: dict[str, list[IPv4Interface | IPv6Interface]] = {}
        for host in self.topology.hosts:
            wired = set(self.topology.interfaces(host.name))
            with open_namespace(self.namespace(host.name)) as ipr:
                names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
                out[host.name] = [
                    ip_interface(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}")
                    for family in ADDRESS_FAMILIES for a in ipr.get_addr(family=family)
                    if names.get(a["index"]) in wired and a["scope"] == RT_SCOPE_UNIVERSE]
        return out

    def default_gateway(self, host: str) -> str | None:
        """The host's default gateway, from its kernel: the IPv4 one, else the IPv6 one."""
        with open_namespace(self.namespace(host)) as ipr:
            for family in ADDRESS_FAMILIES:
                for route in ipr.get_routes(family=family):
                    if route["dst_len"] == 0 and route.get_attr("RTA_GATEWAY"):
                        return route.get_attr("RTA_GATEWAY")
        return None

    def route(self, host: str, dst_ip: str) -> tuple[str, str | None]:
        """(interface, gateway or None when on-link) ``host``'s kernel uses toward ``dst_ip``."""
        route = self._ip_json(host, ["route", "get", dst_ip])[0]
        return route["dev"], route.get("gateway")

    def mac(self, host: str, iface: str) -> str:
        return self._ip_json(host, ["link", "show", "dev", iface])[0]["address"]

    def host_iface(self, host: str, ip: str) -> str:
        """The interface of ``host`` that holds address ``ip``."""
        return self._ip_json(host, ["addr", "show", "to", ip])[0]["ifname"]

    def neighbour(self, host: str, iface: str, ip: str) -> str | None:
        """The MAC ``host`` has for ``ip``; one ping to make its kernel resolve it first."""
        def lladdr() -> str | None:
            # no entry yet is an empty list, not an error (_ip_json would raise on it)
            proc = self.exec(host, ["ip", "-j", "neigh", "show", "to", ip, "dev", iface],
                             timeout=10)
            if proc.returncode != 0:
                raise LabError(f"{host}: ip neigh show to {ip} dev {iface}: "
                               f"{proc.stderr.strip()}")
            entries = json.loads(proc.stdout or "[]")
            return next((e["lladdr"] for e in entries if "lladdr" in e), None)
        mac = lladdr()
        if mac is None:
            self.exec(host, ["ping", "-n", "-c", "1", "-W", "1", ip], timeout=5)
            mac = lladdr()
        return mac

    def _ip_json(self, host: str, args: list[str]) -> list[dict]:
        proc = self.exec(host, ["ip", "-j", *args], timeout=10)
        data = json.loads(proc.stdout or "[]") if proc.returncode == 0 else []
        if not data:
            raise LabError(f"{host}: ip {' '.join(args)}: "
                           f"{proc.stderr.strip() or 'nothing found'}")
        return data

    def host_addresses(self) -> dict[str, str]:
        """Each host's first IPv4 address on a wired interface, else its first global IPv6
        one, read from its kernel (hosts without one are left out; a host whose namespace
        is gone is an error)."""
        out = {}
        for host in self.topology.hosts:
            if (addr := self.host_address(host.name)) is not None:
                out[host.name] = addr
        return out

    def host_address(self, host: str) -> str | None:
        wired = set(self.topology.interfaces(host))
        try:
            with open_namespace(self.namespace(host)) as ipr:
                names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
                for family in ADDRESS_FAMILIES:
                    for addr in ipr.get_addr(family=family):
                        if names.get(addr["index"]) in wired \
                                and addr["scope"] == RT_SCOPE_UNIVERSE:
                            return addr.get_attr("IFA_ADDRESS")
        except LabError as e:
            raise LabError(f"host {host}: {e} (invoke lab.status {self.name})") from None
        return None

    def ping(self, src: str, dst: str, dst_ip: str, count: int = 2) -> Ping:
        proc = self.exec(src, ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "2", dst_ip],
                         timeout=10 + count)
        ttls = [int(t) for t in TTL_RE.findall(proc.stdout)]
        return Ping(src, dst, dst_ip, proc.returncode == 0 and bool(ttls),
                    HOST_TTL - ttls[-1] if ttls else None)

    def ping_all(self, dst: str | None = None) -> list[Ping]:
        """Every host of the topology to every other (with ``dst``, every other to it), in
        parallel; a pair with a host that is missing or has no address fails, saying so."""
        hosts = [h.name for h in self.topology.hosts]
        addrs: dict[str, str] = {}
        problems: dict[str, str] = {}
        for host in hosts:
            try:
                addr = self.host_address(host)
            except LabError as e:
                problems[host] = str(e)
                continue
            if addr is None:
                problems[host] = f"host {host} has no IP address on a wired interface"
            else:
                addrs[host] = addr

        def one(src: str, dst: str) -> Ping:
            problem = problems.get(src) or problems.get(dst)
            if problem:
                return Ping(src, dst, addrs.get(dst, ""), False, None, problem)
            return self.ping(src, dst, addrs[dst])

        pairs = [(s, d) for s in hosts for d in hosts if s != d and dst in (None, d)]
        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(lambda p: one(*p), pairs))

    def await_reachable(self, timeout_s: float = REACHABLE_TIMEOUT_S) -> None:
        """Ping every host pair until all answer (a BGP lab: its sessions are up, its
        routes still on their way to the agents); the error names the pairs that never did."""
        deadline = time.monotonic() + timeout_s
        while True:
            failed = [p for p in self.ping_all() if not p.ok]
            if not failed:
                return
            if time.monotonic() > deadline:
                raise LabError(f"{len(failed)} host pairs still unreachable after "
                               f"{timeout_s:.0f} s: " + ", ".join(
                                   f"{p.src} -> {p.dst} ({p.dst_ip or p.error})"
                                   for p in failed[:8]) + " (lab.status shows each "
                               "switch's BGP sessions and routes)")

    def trace(self, src: str, dst_ip: str, max_hops: int = 8) -> list[str]:
        """The routers on the path, from ICMP time-exceeded replies to TTL-limited pings."""
        hops = []
        for ttl in range(1, max_hops + 1):
            proc = self.exec(src, ["ping", "-n", "-c", "1", "-W", "2", "-t", str(ttl), dst_ip],
                             timeout=10)
            match = TIME_EXCEEDED_RE.search(proc.stdout)
            if match:
                hops.append(match.group(1))
            elif proc.returncode == 0:
                hops.append(dst_ip)
                return hops
            else:
                hops.append("*")
        return hops
