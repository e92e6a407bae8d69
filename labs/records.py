"""What a lab reports, the same from every runtime: its nodes' and links' status, a ping's
outcome, what a cleanup removed. Plain records, so that runtimes, checks and tasks share them
without importing each other."""
from __future__ import annotations

from dataclasses import dataclass, field

HOST_TTL = 64  # Linux's initial TTL and IPv6 hop limit: hops = HOST_TTL - reply TTL


@dataclass
class NodeStatus:
    name: str
    kind: str
    namespace: str
    namespace_present: bool
    agent_pid: int | None = None
    agent_alive: bool | None = None  # None: not a switch
    agent_error: str = ""
    counters: dict = field(default_factory=dict)


@dataclass
class LinkStatus:
    a: str
    b: str
    mtu: int
    up: bool


@dataclass
class Ping:
    src: str
    dst: str
    dst_ip: str
    ok: bool
    hops: int | None  # routers that decremented TTL on the way back
    error: str = ""  # why it could not even be tried (a host missing or without address)


@dataclass
class Cleanup:
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # lab -> why it could not be removed
