"""Ingress buffering per (port, priority group): admission into reserved, shared and
headroom buffer, the XOFF/XON decisions behind PFC, occupancy, watermarks and drops.

Built from ``BUFFER_POOL``, ``BUFFER_PROFILE``, ``BUFFER_PG`` and ``PORT_QOS_MAP``
(``pfc_enable``, ``pfc_to_pg_map``). Every quantity is bytes as configured, never scaled
by the lab's time scale (docs/design.md, "Time scale"); time is the caller's, passed in.

The three parts of a PG's buffer (SAI's ingress priority group):

- reserved: bytes only this PG may use; filled first;
- shared: bytes from its pool's shared buffer, up to the PG's threshold: ``static_th``
  bytes, or ``alpha * free`` with ``alpha = 2 ** dynamic_th`` and ``free`` the pool's
  unused shared bytes when the frame arrives. The dynamic threshold shrinks as the pool
  fills, so n PGs competing settle near ``alpha / (1 + n * alpha)`` of the pool each;
- headroom (lossless PGs only): where the bytes still in flight after XOFF land.

Profile fields -> parts. The headroom is ``xoff`` (SAI ``XOFF_TH``); where it lives depends
on the pool (docs/design.md, "Headroom": "size = xoff + xon (xon alone with a shared
pool)"; SONiC's shared headroom pool design):

- pool without shared headroom (``BUFFER_POOL`` ``xoff`` 0): the headroom is private and part
  of ``size`` (normally xon + xoff): reserved = size - xoff;
- pool with a shared headroom pool (``xoff`` > 0): ``size`` is the reserved part (normally xon)
  and the headroom is drawn from the pool's ``xoff`` bytes, at most ``xoff`` per PG
  (SAI: "XOFF_TH specifies the maximum amount of headroom pool buffer one PG can use").
  A PG's headroom is ``xoff`` either way; a shared one may run out earlier.

A frame fills reserved, then shared, then (lossless, past XOFF) headroom, split at the byte
where each part ends, as cells would be. Releasing returns bytes the other way round:
headroom, then shared, then reserved, which is how ASICs (and ns-3's HPCC MMU) count it, so
nothing need be remembered per frame.

The shared pool holds only shared bytes: reserved and headroom bytes are set aside
separately, as SONiC sizes a pool after subtracting them.

A port with a ``BUFFER_PORT_INGRESS_PROFILE_LIST`` entry also has a share of each listed pool
(``port_buffers``): what its PG's reserved part cannot hold goes to the port's reservation
first, and the PG's shared bytes must fit the port's threshold too. A pool of type ``both``
is one buffer for ingress and egress: the egress queues' limits (``egress_buffers``) read
and draw on the same ``SharedPool``.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import NamedTuple

from ..config import BufferProfile, Qos
from .counters import NUM_PGS
from .pools import SharedPool
from .port_buffers import PortPool, port_pools
from ..qos import port_setting, priorities_of_pg

# What admit decided (strings, so they read well in counters and traces; the drop ones
# are the drop reasons).
ACCEPT = "accept"  # into reserved and/or shared buffer
ACCEPT_HEADROOM = "accept_headroom"  # at least part of it into headroom (lossless, XOFF)
DROP_LOSSY_LIMIT = "lossy_limit"  # a lossy PG at its threshold (or the pool is full)
DROP_HEADROOM_EXHAUSTED = "headroom_exhausted"  # a lossless PG: the headroom is full

DEFAULT_DYNAMIC_TH = 0  # PGs without BUFFER_PG: alpha 1, at most half of an idle pool
UNLIMITED_POOL = "(unlimited)"  # their pool when the config has no ingress pool at all


class Admission(NamedTuple):
    """What became of one arriving frame.

    ``xoff``: this frame brought the PG to XOFF: send PFC for ``PgBuffer.priorities`` out
    of the ingress port (``pause.PfcSender.set_xoff``). It can come with a drop.
    """

    verdict: str  # ACCEPT, ACCEPT_HEADROOM, DROP_LOSSY_LIMIT or DROP_HEADROOM_EXHAUSTED
    xoff: bool = False

    @property
    def accepted(self) -> bool:
        return self.verdict in (ACCEPT, ACCEPT_HEADROOM)


# The only admissions there are, shared so the per-frame path allocates nothing (and a
# caller can tell the usual one, ADMITTED, by identity).
ADMITTED = Admission(ACCEPT)
_ACCEPTED_XOFF = Admission(ACCEPT, True)
_HEADROOM = Admission(ACCEPT_HEADROOM)
_HEADROOM_XOFF = Admission(ACCEPT_HEADROOM, True)
_LOSSY_DROP = Admission(DROP_LOSSY_LIMIT)
_HEADROOM_DROP = Admission(DROP_HEADROOM_EXHAUSTED)
_HEADROOM_DROP_XOFF = Admission(DROP_HEADROOM_EXHAUSTED, True)
_NONE_RESUMED: tuple[PgBuffer, ...] = ()


class PgBuffer:
    """The buffer of one (ingress port, PG): its limits from the profile, its occupancy,
    XOFF state, watermarks and drops.

    XOFF (lossless PGs): when a frame brings the PG's shared use to its threshold, or the
    pool runs out; reaching the threshold is enough. From then on every arriving byte goes
    to headroom, even after draining has taken shared use back below the threshold (that is
    the hysteresis); a frame that does not fit in the headroom left is dropped whole
    (``headroom_exhausted``). XOFF is only checked when a frame arrives for the PG: a PG
    nothing arrives for has nobody to pause.

    XON: SAI's rule (saibuffer.h ``XON_TH``/``XON_OFFSET_TH``; SONiC's ``xon_offset``: "XON
    ... when the memory consumed by the PG drops to ... - xon_offset or xon, which is
    larger"): once the headroom is empty and the PG's use, reserved + shared, is at most
    ``max(xon, reserved + threshold - xon_offset)``, i.e. ``xon_offset`` bytes below the XOFF
    point, or down to ``xon`` bytes of use if that is higher. A missing ``xon`` or
    ``xon_offset`` counts as 0 (SAI's default), and then the PG resumes as soon as its
    headroom has drained and it is back at its XOFF point. With a dynamic threshold draining
    also raises the threshold, so a PG alone in its pool resumes after draining about
    ``xon_offset / (1 + alpha)`` bytes of shared buffer; and other PGs' releases raise it
    too, which is why ``IngressBuffers.release`` checks every PG of the pool in XOFF.

    Lossy PGs take reserved, then shared up to the threshold; a frame that would go past it
    (or past what the pool has left) is dropped whole (``lossy_limit``). They have no
    headroom and never XOFF.
    """

    __slots__ = ("port", "pg", "profile", "lossless", "priorities", "pool", "reserved",
                 "headroom", "shares_headroom", "static_th", "shift", "xon", "xon_offset",
                 "port_pool", "reserved_used", "port_reserved_used", "shared",
                 "headroom_used", "xoff",
                 "peak", "shared_peak", "headroom_peak", "after_xoff", "after_xoff_max",
                 "xoff_count", "xoff_since", "xoff_seconds", "drops", "dropped_bytes")

    def __init__(self, port: str, pg: int, profile: BufferProfile | None, pool: SharedPool,
                 priorities: Iterable[int] = (), port_pool: PortPool | None = None) -> None:
        """``port_pool``: the port's share of ``pool`` (its profile list), if it has one."""
        self.port = port
        self.pg = pg
        self.profile = profile.name if profile else None
        self.priorities = tuple(sorted(set(priorities)))  # PFC priorities this PG pauses
        self.lossless = bool(self.priorities)
        self.pool = pool
        self.shares_headroom = pool.headroom_size > 0
        size = profile.size if profile else 0
        xoff = (profile.xoff or 0) if profile else 0
        self.reserved = size if self.shares_headroom else max(size - xoff, 0)
        self.headroom = xoff if self.lossless else 0  # a lossy PG never uses its xoff
        dynamic_th = profile.dynamic_th if profile else DEFAULT_DYNAMIC_TH
        # SAI: a static threshold of 0 means no limit beyond the pool's own size
        self.static_th = None if dynamic_th is not None else (profile.static_th or pool.size)
        self.shift = dynamic_th or 0  # alpha = 2 ** shift, applied as a bit shift
        self.xon = (profile.xon or 0) if profile else 0
        self.xon_offset = (profile.xon_offset or 0) if profile else 0
        self.port_pool = port_pool
        # occupancy
        self.reserved_used = 0
        self.port_reserved_used = 0  # held in the port's reservation (``port_pool``)
        self.shared = 0
        self.headroom_used = 0  # private, or drawn from the pool's when shares_headroom
        self.xoff = False
        # watermarks and counters
        self.peak = 0
        self.shared_peak = 0
        self.headroom_peak = 0
        self.after_xoff = 0  # bytes past the XOFF point in the current XOFF episode
        self.after_xoff_max = 0  # ... the most in any episode (the fidelity evidence)
        self.xoff_count = 0
        self.xoff_since = 0.0
        self.xoff_seconds = 0.0  # time in XOFF before the current episode
        self.drops = 0
        self.dropped_bytes = 0

    @property
    def used(self) -> int:
        return self.in_use()

    def in_use(self) -> int:
        """``used`` as a call: compiled, the per-frame path reaches it in C, where a
        property is looked up by name."""
        return self.reserved_used + self.port_reserved_used + self.shared + self.headroom_used

    def threshold(self) -> int:
        """The most shared bytes the PG may hold now (its XOFF point in shared buffer)."""
        if self.static_th is not None:
            return self.static_th
        free = self.pool.size - self.pool.used
        return free << self.shift if self.shift >= 0 else free >> -self.shift

    def admit(self, nbytes: int, now: float) -> Admission:
        """A frame of ``nbytes`` arrives for this PG at ``now``."""
        if self.xoff:
            self._past_xoff(nbytes)
            if nbytes > self._headroom_room():
                return self._drop(nbytes, _HEADROOM_DROP)
            self._into_headroom(nbytes)
            return _HEADROOM
        room = self.reserved - self.reserved_used
        if nbytes <= room:  # the per-frame case of a PG that keeps up: _watermark, inlined
            self.reserved_used += nbytes
            used = self.reserved_used + self.shared + self.headroom_used
            if used > self.peak:
                self.peak = used
            return ADMITTED
        spill = nbytes - room  # what the reserved part cannot hold
        shared_room = min(self.threshold() - self.shared, self.pool.size - self.pool.used)
        to_port = 0
        if self.port_pool is not None:  # the port's reservation first, then its share
            to_port = min(spill, self.port_pool.reserved_room())
            spill -= to_port
            shared_room = min(shared_room, self.port_pool.shared_room())
        if not spill or spill < shared_room or (spill == shared_room and not self.lossless):
            self._into_shared(room, spill, to_port)
            return ADMITTED
        if not self.lossless:
            return self._drop(nbytes, _LOSSY_DROP)
        # the frame reaches the threshold (or the pool's end): XOFF, the rest to headroom
        self._start_xoff(now)
        to_shared = max(shared_room, 0)
        beyond = spill - to_shared
        self._past_xoff(beyond)
        if beyond > self._headroom_room():
            return self._drop(nbytes, _HEADROOM_DROP_XOFF)
        self._into_shared(room, to_shared, to_port)
        if not beyond:
            return _ACCEPTED_XOFF
        self._into_headroom(beyond)
        return _HEADROOM_XOFF

    def release(self, nbytes: int) -> None:
        """``nbytes`` of this PG's frames left the switch (sent, or dropped at egress):
        headroom first, then shared, then reserved. Whether the PG may resume is
        ``try_xon``'s question."""
        if not self.headroom_used and not self.shared and not self.port_reserved_used \
                and nbytes <= self.reserved_used:
            self.reserved_used -= nbytes  # only reserved bytes held: the per-frame case
            return
        if nbytes > self.in_use():
            raise ValueError(f"{self.port} PG {self.pg}: releasing {nbytes} bytes, "
                             f"holding {self.used}")
        pool = self.pool
        if self.headroom_used:
            take = min(nbytes, self.headroom_used)
            self.headroom_used -= take
            if self.shares_headroom:
                pool.headroom_used -= take
            nbytes -= take
        if nbytes and self.shared:
            take = min(nbytes, self.shared)
            self.shared -= take
            pool.used -= take
            if self.port_pool is not None:
                self.port_pool.shared -= take
            nbytes -= take
        if nbytes and self.port_reserved_used:
            take = min(nbytes, self.port_reserved_used)
            self.port_reserved_used -= take
            self.port_pool.reserved_used -= take
            nbytes -= take
        self.reserved_used -= nbytes

    def try_xon(self, now: float) -> bool:
        """Leave XOFF if the XON condition (class docstring) holds; True when it did."""
        if not self.xoff or self.headroom_used:
            return False
        threshold = self.threshold()
        if self.port_pool is not None:  # the port's share may be what stopped it
            threshold = min(threshold, self.shared + self.port_pool.shared_room())
        resume_at = max(self.xon, self.reserved + threshold - self.xon_offset)
        if self.reserved_used + self.shared > resume_at:
            return False
        self.xoff = False
        self.xoff_seconds += now - self.xoff_since
        del self.pool.in_xoff[self]
        return True

    def seconds_in_xoff(self, now: float) -> float:
        """Total time this PG has held its upstream paused, up to ``now``."""
        return self.xoff_seconds + (now - self.xoff_since if self.xoff else 0.0)

    # --- the parts -----------------------------------------------------------------------

    def _into_shared(self, reserved_bytes: int, shared_bytes: int, port_bytes: int = 0) -> None:
        """Take reserved bytes, then the port's reserved bytes, then shared ones."""
        self.reserved_used += reserved_bytes
        self.shared += shared_bytes
        pool = self.pool
        pool.used += shared_bytes
        if pool.used > pool.peak:
            pool.peak = pool.used
        if self.port_pool is not None:
            self.port_reserved_used += port_bytes
            self.port_pool.reserved_used += port_bytes
            self.port_pool.shared += shared_bytes
        if self.shared > self.shared_peak:
            self.shared_peak = self.shared
        self._watermark()

    def _headroom_room(self) -> int:
        room = self.headroom - self.headroom_used
        if self.shares_headroom:
            pool = self.pool
            room = min(room, pool.headroom_size - pool.headroom_used)
        return room

    def _into_headroom(self, nbytes: int) -> None:
        """Take ``nbytes`` of headroom (the caller checked ``_headroom_room``)."""
        self.headroom_used += nbytes
        if self.shares_headroom:
            pool = self.pool
            pool.headroom_used += nbytes
            if pool.headroom_used > pool.headroom_peak:
                pool.headroom_peak = pool.headroom_used
        if self.headroom_used > self.headroom_peak:
            self.headroom_peak = self.headroom_used
        self._watermark()

    def _start_xoff(self, now: float) -> None:
        self.xoff = True
        self.xoff_count += 1
        self.xoff_since = now
        self.after_xoff = 0
        self.pool.in_xoff[self] = None

    def _past_xoff(self, nbytes: int) -> None:
        self.after_xoff += nbytes
        if self.after_xoff > self.after_xoff_max:
            self.after_xoff_max = self.after_xoff

    def _drop(self, nbytes: int, admission: Admission) -> Admission:
        self.drops += 1
        self.dropped_bytes += nbytes
        return admission

    def _watermark(self) -> None:
        used = self.in_use()
        if used > self.peak:
            self.peak = used

    def as_dict(self, now: float) -> dict:
        return {
            "profile": self.profile, "lossless": self.lossless,
            "priorities": list(self.priorities), "pool": self.pool.name,
            "reserved": self.reserved, "headroom": self.headroom,
            "threshold": self.threshold(), "used": self.used,
            "reserved_used": self.reserved_used, "port_reserved_used": self.port_reserved_used,
            "shared": self.shared,
            "headroom_used": self.headroom_used, "peak": self.peak,
            "shared_peak": self.shared_peak, "headroom_peak": self.headroom_peak,
            "after_xoff_max": self.after_xoff_max, "xoff": self.xoff,
            "xoff_count": self.xoff_count, "xoff_seconds": self.seconds_in_xoff(now),
            "drops": self.drops, "dropped_bytes": self.dropped_bytes,
        }


class HeadroomUse(NamedTuple):
    """A lossless PG's worst XOFF episode against its configured headroom (the fidelity
    check: bytes arriving after an XOFF should stay within the headroom)."""

    port: str
    pg: int
    headroom: int  # configured (profile xoff)
    after_xoff_max: int  # most bytes that arrived past the XOFF point in one episode
    headroom_peak: int  # most headroom bytes held at once
    drops: int

    @property
    def within(self) -> bool:
        return self.after_xoff_max <= self.headroom


PgPriorities = Callable[[str, int], Iterable[int]]  # (port, pg) -> PFC priorities of the PG


class IngressBuffers:
    """Every (port, PG) buffer of a switch and the ingress pools they share.

    Per frame: ``admit`` when it arrives (after classification into its PG), and, if it
    was accepted, ``release`` with the same size when it leaves the switch (transmitted, or
    dropped at egress). Both are dict and list lookups and integer arithmetic.
    """

    def __init__(self, pools: dict[str, SharedPool], pgs: dict[str, list[PgBuffer]],
                 shares: dict[str, dict[str, PortPool]] | None = None) -> None:
        self.pools = pools
        self._pgs = pgs
        self.shares = shares or {}  # port -> pool -> its share (BUFFER_PORT_INGRESS_...)

    @classmethod
    def from_config(cls, qos: Qos, ports: Iterable[str],
                    pg_priorities: PgPriorities | None = None) -> IngressBuffers:
        """All eight PGs of each port in ``ports``.

        A PG is lossless when it has a BUFFER_PG entry and PFC is enabled (``pfc_enable``
        of the port's PORT_QOS_MAP, or of ``global`` when the port's leaves it empty) for a
        priority that maps to it: ``pg_priorities(port, pg)``, by default the inverse of the
        port's ``pfc_to_pg_map`` and, without one, priority p -> PG p. A PG without BUFFER_PG
        entry is lossy whatever pfc_enable says (no headroom: it could not honour PFC) and
        gets a default profile: no reserved bytes, ``dynamic_th`` 0 in the first ingress pool
        (at most half of it when alone), or an unlimited pool when the config has none. A PG
        draws on its port's share of its pool too, where the port's profile list gives one.
        """
        pools = {name: SharedPool(name, pool.size, pool.xoff)
                 for name, pool in qos.buffer_pools.items() if pool.type != "egress"}
        default_pool = next(iter(pools.values()), None) or SharedPool(UNLIMITED_POOL, 1 << 62)
        priorities_of = pg_priorities or partial(priorities_of_pg, qos)
        pgs: dict[str, list[PgBuffer]] = {}
        shares: dict[str, dict[str, PortPool]] = {}
        for port in ports:
            enabled, _ = port_setting(qos, port, "pfc_enable")
            pgs[port] = buffers = []
            shares[port] = share = port_pools(qos, port, "ingress", pools)
            for pg in range(NUM_PGS):
                name = qos.buffer_pg.get((port, pg))
                if name is None:
                    buffers.append(PgBuffer(port, pg, None, default_pool,
                                            port_pool=share.get(default_pool.name)))
                    continue
                profile = qos.buffer_profiles[name]
                pool = pools.get(profile.pool)
                if pool is None:
                    raise ValueError(f"BUFFER_PG|{port}|{pg}: profile {name} uses the egress "
                                     f"pool {profile.pool}; a PG needs an ingress pool")
                pfc_priorities = enabled.intersection(priorities_of(port, pg))
                buffers.append(PgBuffer(port, pg, profile, pool, pfc_priorities,
                                        share.get(pool.name)))
        if default_pool.name == UNLIMITED_POOL:
            pools[UNLIMITED_POOL] = default_pool
        return cls(pools, pgs, shares)

    def pg(self, port: str, pg: int) -> PgBuffer:
        return self._pgs[port][pg]

    def admit(self, port: str, pg: int, nbytes: int, now: float) -> Admission:
        """A frame of ``nbytes`` arrived on ``port`` in ``pg`` (``PgBuffer.admit``)."""
        return self._pgs[port][pg].admit(nbytes, now)

    def release(self, port: str, pg: int, nbytes: int, now: float) -> Sequence[PgBuffer]:
        """A frame admitted on ``(port, pg)`` left the switch. Returns the PGs that went
        back to XON (send pause time 0 for their priorities): usually none; this one, or
        with dynamic thresholds any PG of the pool in XOFF, since they all rose."""
        return self.free(self._pgs[port][pg], nbytes, now)

    def free(self, buffer: PgBuffer, nbytes: int, now: float) -> Sequence[PgBuffer]:
        """``release`` for a caller that holds the PG's buffer (the switch, per frame)."""
        buffer.release(nbytes)
        return self.resume(buffer.pool, now) if buffer.pool.in_xoff else _NONE_RESUMED

    @staticmethod
    def resume(pool: SharedPool, now: float) -> list[PgBuffer]:
        """The PGs of ``pool`` in XOFF that may resume now that bytes left it (the switch
        calls this after ``PgBuffer.release`` only when the pool has PGs in XOFF)."""
        return [other for other in list(pool.in_xoff) if other.try_xon(now)]

    def clear_fidelity(self) -> None:
        """Forget the worst XOFF episodes so far: the next run's are its own."""
        for buffers in self._pgs.values():
            for buffer in buffers:
                buffer.after_xoff_max = 0

    def clear_watermarks(self) -> None:
        """Peaks start again from the occupancy of now (``sonic-clear priority-group
        watermark``): of each PG (used, shared, headroom) and of each pool."""
        for buffers in self._pgs.values():
            for b in buffers:
                b.peak, b.shared_peak, b.headroom_peak = b.used, b.shared, b.headroom_used
        for pool in self.pools.values():
            pool.peak, pool.headroom_peak = pool.used, pool.headroom_used

    def headroom_use(self, port: str) -> list[HeadroomUse]:
        """Each of the port's lossless PGs' worst XOFF episode against its headroom."""
        return [HeadroomUse(b.port, b.pg, b.headroom, b.after_xoff_max, b.headroom_peak,
                            b.drops)
                for b in self._pgs.get(port, []) if b.lossless]

    def snapshot(self, now: float) -> dict:
        """Occupancy, thresholds, watermarks and drops of every pool and PG, JSON-ready
        (PGs keyed "0".."7" under their port, like the counters)."""
        return {
            "pools": {name: pool.as_dict() for name, pool in self.pools.items()},
            "pgs": {port: {str(b.pg): b.as_dict(now) for b in buffers}
                    for port, buffers in self._pgs.items()},
        }
