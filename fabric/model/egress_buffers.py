"""Egress admission per (port, queue): ``BUFFER_QUEUE`` profiles limit what a queue holds in
its egress pool, so a lossy class drops at the egress queue where a SONiC switch drops it.

Built from ``BUFFER_POOL`` (pools of type ``egress``, or ``both``), ``BUFFER_PROFILE`` and
``BUFFER_QUEUE``. Bytes as configured, never scaled by the lab's time scale. A queue's use
is the bytes waiting in it (a frame that cuts through an idle port never waits and takes
none): first its reserved part (the profile's ``size``), then its pool's shared buffer up to
the profile's threshold, ``static_th`` bytes or ``2 ** dynamic_th`` x the pool's free shared
bytes (SAI's dynamic threshold, as on the ingress side, ``buffers``). A frame that does not
fit is dropped whole, counted on the egress port as ``queue_limit``.

SONiC's shipped profiles give lossless queues a static threshold of the whole pool, so they
never drop here (PFC holds the senders back at ingress), and lossy queues a dynamic one.
A queue without a ``BUFFER_QUEUE`` entry is not limited. A port with a
``BUFFER_PORT_EGRESS_PROFILE_LIST`` entry has a share of each listed pool (``port_buffers``):
a queue's bytes beyond its reserved part go to the port's reservation first, and its shared
bytes must fit the port's threshold too.

A pool of type ``both`` is one buffer for ingress and egress (Broadcom DNX platforms): its
queues draw on the ingress side's ``pools.SharedPool`` itself, so each side's thresholds
shrink as the other fills it. A frame is stored once: one whose ingress PG is in the same
pool already counts there (``counted``), and its queue then limits it without counting it
again; any other frame's shared bytes count in the pool as in an egress pool.
"""
from __future__ import annotations

from collections.abc import Mapping

from ..config import BufferProfile, Qos
from .pools import EgressPool, SharedPool
from .counters import NUM_QUEUES
from .port_buffers import PortPool, port_pools

QUEUE_LIMIT = "queue_limit"  # the egress drop reason


class QueueBuffer:
    """The egress buffer of one (port, queue) under its BUFFER_QUEUE profile."""

    __slots__ = ("profile", "pool", "port_pool", "reserved", "static_th", "shift", "used",
                 "reserved_used", "port_reserved_used", "shared", "pooled")

    def __init__(self, profile: BufferProfile, pool: EgressPool | SharedPool,
                 port_pool: PortPool | None = None) -> None:
        """``port_pool``: the port's share of ``pool`` (its profile list), if it has one."""
        self.profile = profile.name
        self.pool = pool
        self.port_pool = port_pool
        self.reserved = profile.size
        # SAI: a static threshold of 0 means no limit beyond the pool's own size
        self.static_th = None if profile.dynamic_th is not None \
            else (profile.static_th or pool.size)
        self.shift = profile.dynamic_th or 0
        self.used = 0  # bytes queued: reserved_used + port_reserved_used + shared
        self.reserved_used = 0
        self.port_reserved_used = 0
        self.shared = 0  # beyond both reservations: what the thresholds bound
        self.pooled = 0  # ... of which this queue counts in the pool (at most ``shared``)

    def threshold(self) -> int:
        """The most shared bytes the queue may hold now."""
        if self.static_th is not None:
            return self.static_th
        free = self.pool.size - self.pool.used
        return free << self.shift if self.shift >= 0 else free >> -self.shift

    def take(self, nbytes: int, counted: bool = False) -> bool:
        """Room for a frame of ``nbytes`` joining the queue: True, and it is counted; False
        when it would pass the queue's threshold, the port's, or the pool's size (drop it).
        ``counted``: the frame's bytes already count in this pool (module docstring)."""
        room = min(nbytes, self.reserved - self.reserved_used)
        rest = nbytes - room
        share = self.port_pool
        to_port = min(rest, share.reserved_room()) if share is not None and rest else 0
        rest -= to_port
        if rest:
            pool = self.pool
            if self.shared + rest > self.threshold() \
                    or (share is not None and rest > share.shared_room()) \
                    or (not counted and pool.used + rest > pool.size):
                return False
            self.shared += rest
            if share is not None:
                share.shared += rest
            if not counted:
                self.pooled += rest
                pool.used += rest
                if pool.used > pool.peak:
                    pool.peak = pool.used
        self.reserved_used += room
        if to_port:
            self.port_reserved_used += to_port
            share.reserved_used += to_port
        self.used += nbytes
        return True

    def release(self, nbytes: int, counted: bool = False) -> int:
        """A frame of ``nbytes`` left the queue (sent or flushed): its shared bytes first,
        then the port's reserved ones, then the queue's. Returns the bytes it gave back to
        the pool's shared part."""
        self.used -= nbytes
        shared = min(nbytes, self.shared)
        self.shared -= shared
        nbytes -= shared
        share = self.port_pool
        if share is not None:
            share.shared -= shared
            to_port = min(nbytes, self.port_reserved_used)
            self.port_reserved_used -= to_port
            share.reserved_used -= to_port
            nbytes -= to_port
        self.reserved_used -= nbytes
        # the bytes this queue counts in the pool stay within its shared bytes
        given = max(0 if counted else min(shared, self.pooled), self.pooled - self.shared)
        self.pooled -= given
        self.pool.used -= given
        return given


def egress_pools(qos: Qos, shared: Mapping[str, SharedPool] | None = None
                 ) -> dict[str, EgressPool | SharedPool]:
    """The config's egress pools (type ``egress`` or ``both``), by name; a ``both`` pool is
    the ingress side's own ``SharedPool`` where ``shared`` (``IngressBuffers.pools``) has it."""
    shared = shared or {}
    return {name: shared.get(name) if pool.type == "both" and name in shared
            else EgressPool(name, pool.size)
            for name, pool in qos.buffer_pools.items() if pool.type in ("egress", "both")}


def queue_buffers(qos: Qos, port: str, pools: Mapping[str, EgressPool | SharedPool]
                  ) -> list[QueueBuffer | None]:
    """Per queue of ``port``, its egress buffer (None: no BUFFER_QUEUE, not limited)."""
    shares = port_pools(qos, port, "egress", pools)
    buffers: list[QueueBuffer | None] = []
    for queue in range(NUM_QUEUES):
        name = qos.buffer_queue.get((port, queue))
        profile = qos.buffer_profiles[name] if name else None
        buffers.append(QueueBuffer(profile, pools[profile.pool], shares.get(profile.pool))
                       if profile else None)
    return buffers
