"""A switch's buffer pools: the bytes each ``BUFFER_POOL`` has in use, read per frame by the
PGs that draw on it (``buffers``, ingress) and by the egress queues (``egress_buffers``). An
egress queue draws on an egress pool or, on a ``both`` platform, on the ingress side's own:
both derive from ``Pool``, so the compiled queues read either in C."""
from __future__ import annotations


class Pool:
    """A BUFFER_POOL's shared bytes: its size, the bytes in use, the most ever in use."""

    __slots__ = ("name", "size", "used", "peak")

    def __init__(self, name: str, size: int) -> None:
        self.name = name
        self.size = size
        self.used = 0
        self.peak = 0

    @property
    def free(self) -> int:
        return self.size - self.used


class SharedPool(Pool):
    """One ingress BUFFER_POOL: its shared bytes in use, and its shared headroom pool."""

    __slots__ = ("headroom_size", "headroom_used", "headroom_peak", "in_xoff")

    def __init__(self, name: str, size: int, headroom_size: int = 0) -> None:
        super().__init__(name, size)
        self.headroom_size = headroom_size  # BUFFER_POOL xoff: 0 = headroom is private
        self.headroom_used = 0
        self.headroom_peak = 0
        # the pool's PGs in XOFF (``buffers.PgBuffer``s, an ordered set): a release
        # anywhere in the pool raises dynamic thresholds and may resume any of them (the
        # PGs import this module, so it names their type only here)
        self.in_xoff: dict[object, None] = {}

    def as_dict(self) -> dict:
        return {"size": self.size, "used": self.used, "free": self.free, "peak": self.peak,
                "headroom_size": self.headroom_size, "headroom_used": self.headroom_used,
                "headroom_peak": self.headroom_peak}


class EgressPool(Pool):
    """One egress BUFFER_POOL: the shared bytes its queues hold beyond their reserved parts."""

    __slots__ = ()

    def as_dict(self) -> dict:
        return {"size": self.size, "used": self.used, "free": self.free, "peak": self.peak}
