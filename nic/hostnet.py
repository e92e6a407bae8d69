"""What a host's kernel knows about its own network, asked in its namespace with ``ip -j``:
the senders (``traffic.blast``, ``nic.endpoint``) build whole frames themselves, so they
need the MACs and addresses the kernel would have put there."""
from __future__ import annotations

import json
import subprocess
from typing import NamedTuple


class NetError(RuntimeError):
    """The host cannot reach a destination the way the caller needs (one line)."""


class Path(NamedTuple):
    """How this host reaches one destination: its own MAC and address, the next hop's MAC."""

    iface: str
    src_mac: str
    src_ip: str
    next_hop_mac: str


def ip_json(*args: str) -> list[dict]:
    proc = subprocess.run(["ip", "-j", *args], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout or "[]")


def next_hop_mac(iface: str, ip: str) -> str:
    """The kernel's neighbour entry for ``ip``, after one ping if it has none."""
    for attempt in range(2):
        for entry in ip_json("neigh", "show", "to", ip, "dev", iface):
            if "lladdr" in entry:
                return entry["lladdr"]
        if not attempt:
            subprocess.run(["ping", "-n", "-c", "1", "-W", "1", ip], capture_output=True)
    raise NetError(f"no ARP entry for {ip} on {iface}")


def path_to(iface: str, dst_ip: str) -> Path:
    """The kernel's route to ``dst_ip``, which must leave through ``iface``."""
    route = ip_json("route", "get", dst_ip)[0]
    if route["dev"] != iface:
        raise NetError(f"{dst_ip} is routed via {route['dev']}, not {iface}")
    src_mac = ip_json("link", "show", "dev", iface)[0]["address"]
    return Path(iface, src_mac, route["prefsrc"],
                next_hop_mac(iface, route.get("gateway", dst_ip)))
