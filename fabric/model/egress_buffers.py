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
A queue without a ``BUFFER_QUEUE`` entry is not limited. A pool of type ``both`` is
accounted apart for ingress and egress: the model keeps no shared total across the two.
"""
from __future__ import annotations

from ..config import BufferProfile, Qos
from .counters import NUM_QUEUES

QUEUE_LIMIT = "queue_limit"  # the egress drop reason


class EgressPool:
    """One egress BUFFER_POOL: the shared bytes its queues hold beyond their reserved parts."""

    __slots__ = ("name", "size", "used", "peak")

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.used = 0
        self.peak = 0

    def as_dict(self) -> dict:
        return {"size": self.size, "used": self.used, "free": self.size - self.used,
                "peak": self.peak}


class QueueBuffer:
    """The egress buffer of one (port, queue) under its BUFFER_QUEUE profile."""

    __slots__ = ("profile", "pool", "reserved", "static_th", "shift", "used")

    def __init__(self, profile: BufferProfile, pool: EgressPool) -> None:
        self.profile = profile.name
        self.pool = pool
        self.reserved = profile.size
        # SAI: a static threshold of 0 means no limit beyond the pool's own size
        self.static_th = None if profile.dynamic_th is not None \
            else (profile.static_th or pool.size)
        self.shift = profile.dynamic_th or 0
        self.used = 0  # bytes queued

    def threshold(self) -> int:
        """The most shared bytes the queue may hold now."""
        if self.static_th is not None:
            return self.static_th
        free = self.pool.size - self.pool.used
        return free << self.shift if self.shift >= 0 else free >> -self.shift

    def take(self, nbytes: int) -> bool:
        """Room for a frame of ``nbytes`` joining the queue: True, and it is counted; False
        when it would pass the queue's threshold or the pool's size (drop it)."""
        before = max(0, self.used - self.reserved)
        after = max(0, self.used + nbytes - self.reserved)
        grow = after - before
        if grow:
            pool = self.pool
            if after > self.threshold() or pool.used + grow > pool.size:
                return False
            pool.used += grow
            if pool.used > pool.peak:
                pool.peak = pool.used
        self.used += nbytes
        return True

    def release(self, nbytes: int) -> None:
        """A frame of ``nbytes`` left the queue (sent or flushed)."""
        before = max(0, self.used - self.reserved)
        self.used -= nbytes
        self.pool.used -= before - max(0, self.used - self.reserved)


def egress_pools(qos: Qos) -> dict[str, EgressPool]:
    """The config's egress pools (type ``egress`` or ``both``), by name."""
    return {name: EgressPool(name, pool.size) for name, pool in qos.buffer_pools.items()
            if pool.type in ("egress", "both")}


def queue_buffers(qos: Qos, port: str,
                  pools: dict[str, EgressPool]) -> list[QueueBuffer | None]:
    """Per queue of ``port``, its egress buffer (None: no BUFFER_QUEUE, not limited)."""
    buffers: list[QueueBuffer | None] = []
    for queue in range(NUM_QUEUES):
        name = qos.buffer_queue.get((port, queue))
        profile = qos.buffer_profiles[name] if name else None
        buffers.append(QueueBuffer(profile, pools[profile.pool]) if profile else None)
    return buffers
