"""A port's share of one buffer pool, from ``BUFFER_PORT_INGRESS_PROFILE_LIST`` and
``BUFFER_PORT_EGRESS_PROFILE_LIST``: the per-port limits SAI sets with a port's ingress and
egress buffer profile lists (SAI_PORT_ATTR_QOS_INGRESS_BUFFER_PROFILE_LIST, one profile per
pool), which every Mellanox traditional-mode template renders.

Each listed profile names a pool and gives the port, in that pool:

- ``size``: bytes reserved for the port alone: what its PGs (ingress) or queues (egress) hold
  beyond their own reserved parts goes here first, and takes nothing from the pool's shared
  bytes (like every reserved part: SONiC sizes a pool after setting them aside);
- its threshold (``static_th`` bytes, or ``2 ** dynamic_th`` x the pool's free shared bytes):
  the most of the pool's shared bytes the port may hold, all its PGs or queues together.

So a frame that a PG or queue admits also has to fit the port's share; a lossless PG that
meets the port's threshold sends XOFF as at its own. Bytes as configured, never scaled.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ..config import BufferProfile, Qos


class Pool(Protocol):
    """What a port's share reads of its pool (``pools.SharedPool``, ``pools.EgressPool``)."""

    size: int
    used: int


class PortPool:
    """One port's reserved bytes and its share of the shared bytes in one pool."""

    __slots__ = ("profile", "pool", "reserved", "reserved_used", "shared", "static_th",
                 "shift")

    def __init__(self, profile: BufferProfile, pool: Pool) -> None:
        self.profile = profile.name
        self.pool = pool
        self.reserved = profile.size
        self.reserved_used = 0
        self.shared = 0  # the port's bytes in the pool's shared part
        # SAI: a static threshold of 0 means no limit beyond the pool's own size
        self.static_th = None if profile.dynamic_th is not None \
            else (profile.static_th or pool.size)
        self.shift = profile.dynamic_th or 0

    def reserved_room(self) -> int:
        return self.reserved - self.reserved_used

    def shared_room(self) -> int:
        """The shared bytes the port may still take now."""
        if self.static_th is not None:
            return self.static_th - self.shared
        free = self.pool.size - self.pool.used
        return (free << self.shift if self.shift >= 0 else free >> -self.shift) - self.shared

    def as_dict(self) -> dict:
        return {"profile": self.profile, "reserved": self.reserved,
                "reserved_used": self.reserved_used, "shared": self.shared}


def port_pools(qos: Qos, port: str, direction: str,
               pools: Mapping[str, Pool]) -> dict[str, PortPool]:
    """``port``'s shares from its ``direction`` ("ingress" or "egress") profile list, by the
    pool's name (the loader checked that each profile's pool is of that direction)."""
    lists = qos.port_ingress_profiles if direction == "ingress" else qos.port_egress_profiles
    out = {}
    for name in lists.get(port, ()):
        profile = qos.buffer_profiles[name]
        out[profile.pool] = PortPool(profile, pools[profile.pool])
    return out
