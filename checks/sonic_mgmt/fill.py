"""The arithmetic of sonic-mgmt's thresholds on rocelab's switch model (``derive``): one PG
or egress queue filled with identical frames while nothing leaves, solved in closed form.

The rules are the model's (fabric/model/buffers.py, egress_buffers.py, port_buffers.py):
frame k fills the PG's (or queue's) reserved bytes, then its port's reservation, then shared
bytes, so from the first frame that spills it holds ``k x frame - base`` shared bytes. Each
bound on them (the profile's threshold, the port's, the pool's end) is passed when ``shared +
held > limit(free)``: ``limit`` is ``static_th``, or ``2 ** dynamic_th`` x ``free``, the
pool's free shared bytes, which fall by one frame per frame. That is linear in k, so its first
solution is one floor division (``Bound.first``). A lossless PG sends XOFF at the frame that
reaches a bound, then takes frames into its headroom until one does not fit.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ...fabric.config import BufferPool, BufferProfile, SwitchConfig
from ...fabric.qos import port_setting, priorities_of_pg
from ..thresholds import NO_PROFILE, pg_profile

NUM_PGS = NUM_QUEUES = 8


class NotDerived(ValueError):
    """A config these closed forms do not solve exactly (a case then skips, saying why);
    any other ValueError here is a caller's mistake."""


@dataclass(frozen=True)
class Derived:
    """A number a sonic-mgmt case asserts, and the lines that derive it from the config."""

    value: int
    steps: tuple[str, ...]


@dataclass(frozen=True)
class Bound:
    """One limit on the shared bytes of a PG or queue: ``static`` bytes (``shift`` None), or
    ``2 ** shift`` x the pool's free shared bytes; ``held``: bytes others already hold under
    it (the port's other PGs or queues)."""

    what: str
    shift: int | None = None
    static: int = 0
    held: int = 0

    def limit(self, free: int) -> int:
        if self.shift is None:
            return self.static
        return free << self.shift if self.shift >= 0 else free >> -self.shift

    def first(self, u: int, b: int, a: int, w: int) -> int:
        """The least k with ``u k + b + held > limit(a - w k)`` (u > 0, w >= 0): the frame
        whose shared bytes ``u k + b`` pass this bound while the pool has ``a - w k`` free.
        Exact in integers, since for an integer x, ``x > floor(y)`` iff ``x > y``."""
        b += self.held
        if self.shift is None:
            return (self.static - b) // u + 1
        if self.shift >= 0:
            alpha = 1 << self.shift
            return (alpha * a - b) // (u + alpha * w) + 1
        div = 1 << -self.shift
        return (a - div * b) // (div * u + w) + 1

    def most(self, below: int, free: int) -> int:
        """The most shared bytes s with ``s + below + held <= limit(free - s)``: what may be
        held ``below`` bytes under this bound when the pool has ``free`` without them."""
        c = below + self.held
        if self.shift is None:
            return self.static - c
        if self.shift >= 0:
            alpha = 1 << self.shift
            return (alpha * free - c) // (1 + alpha)
        div = 1 << -self.shift
        return (free - div * c) // (div + 1)


# frames lo..hi (hi None: no end) during which the pool's free bytes are ``a - w k``
Segment = tuple[int, int | None, int, int]


def first_over(bounds: Sequence[Bound], u: int, b: int,
               segments: Sequence[Segment]) -> tuple[int, Bound]:
    """The first frame k whose shared bytes ``u k + b`` pass one of ``bounds``, and which
    (the earlier bound on a tie); the last segment has no end, so every bound has one."""
    hits = []
    for bound in bounds:
        for lo, hi, a, w in segments:
            k = max(lo, bound.first(u, b, a, w))
            if hi is None or k <= hi:
                hits.append((k, bound))
                break
    return min(hits, key=lambda hit: hit[0])


def threshold(profile: BufferProfile, pool: BufferPool, owner: str, port_share: bool = False
              ) -> tuple[Bound, str]:
    """A profile's threshold as a bound (SAI: ``static_th`` 0 is the pool's size), and the
    line saying so."""
    name = f"BUFFER_PROFILE|{profile.name}"
    shared = f"{owner}'s shared bytes" + (" (all its PGs or queues)" if port_share else "")
    if profile.dynamic_th is not None:
        s = profile.dynamic_th
        return (Bound(f"{name} dynamic_th {s}", shift=s),
                f"{name} dynamic_th {s} -> alpha {2.0 ** s:g}: {shared} <= "
                f"{2.0 ** s:g} x BUFFER_POOL|{pool.name}'s free shared bytes")
    limit = profile.static_th or pool.size
    return (Bound(f"{name} static_th {profile.static_th}", static=limit),
            f"{name} static_th {profile.static_th}"
            + (f" (0: the pool's size {pool.size})" if not profile.static_th else "")
            + f" -> {shared} <= {limit} B")


def port_share(config: SwitchConfig, port: str, pool: BufferPool, ingress: bool
               ) -> tuple[int, Bound | None, tuple[str, ...]]:
    """The port's reservation in ``pool`` and its threshold there, from its profile list."""
    table = "BUFFER_PORT_INGRESS_PROFILE_LIST" if ingress else "BUFFER_PORT_EGRESS_PROFILE_LIST"
    lists = config.qos.port_ingress_profiles if ingress else config.qos.port_egress_profiles
    for name in lists.get(port, ()):
        profile = config.qos.buffer_profiles[name]
        if profile.pool == pool.name:
            bound, line = threshold(profile, pool, f"port {port}", port_share=True)
            return profile.size, replace(bound, what=f"{table}|{port} {bound.what}"), (
                f"{table}|{port} -> BUFFER_PROFILE|{name}: port reservation {profile.size} B",
                line)
    return 0, None, ()


# --- the ingress side ------------------------------------------------------------------------

@dataclass(frozen=True)
class PgLimits:
    """What the config gives one (port, PG)."""

    port: str
    pg: int
    lossless: bool
    reserved: int
    headroom: int  # xoff: private, or at most this much of the pool's shared headroom pool
    xon: int
    xon_offset: int
    pool: BufferPool
    port_reserved: int
    bounds: tuple[Bound, ...]  # the profile's threshold, then the port's
    steps: tuple[str, ...]


def pg_limits(config: SwitchConfig, port: str, pg: int) -> PgLimits:
    """The PG's profile (or the model's default), its lossless state, reserved bytes,
    headroom and bounds, as the switch model builds its ``PgBuffer``."""
    if port not in config.ports:
        raise ValueError(f"{config.path}: PORT|{port}: no such port")
    if not 0 <= pg < NUM_PGS:
        raise ValueError(f"{config.path}: BUFFER_PG|{port}|{pg}: PGs are 0..{NUM_PGS - 1}")
    where = f"BUFFER_PG|{port}|{pg}"
    profile = pg_profile(config, port, pg)
    if profile is None:
        raise NotDerived(f"{config.path}: {where}: no ingress BUFFER_POOL limits it: "
                         "no threshold to derive")
    pool = config.qos.buffer_pools[profile.pool]
    if pool.type == "egress":
        raise ValueError(f"{config.path}: {where}: profile {profile.name} is in the egress "
                         f"pool {pool.name}; a PG needs an ingress pool")
    enabled, _ = port_setting(config.qos, port, "pfc_enable")
    priorities = (enabled.intersection(priorities_of_pg(config.qos, port, pg))
                  if profile.name != NO_PROFILE else set())
    steps = [f"{where} -> " + (f"BUFFER_PROFILE|{profile.name}" if profile.name != NO_PROFILE
                               else "no entry: dynamic_th 0, no reserved bytes")
             + f" in BUFFER_POOL|{pool.name} (size {pool.size}, type {pool.type})",
             f"PORT_QOS_MAP|{port} pfc_enable -> PG {pg} "
             + (f"lossless (PFC priorities {', '.join(map(str, sorted(priorities)))})"
                if priorities else "lossy")]
    xoff = profile.xoff or 0
    if pool.xoff > 0:
        reserved = profile.size
        steps.append(f"BUFFER_POOL|{pool.name} xoff {pool.xoff} -> shared headroom pool: "
                     f"reserved = size = {reserved} B"
                     + (f", headroom at most xoff {xoff} B of it" if priorities else ""))
    else:
        reserved = max(profile.size - xoff, 0)
        steps.append(f"BUFFER_POOL|{pool.name} xoff 0 -> private headroom: reserved = size - "
                     f"xoff = {profile.size} - {xoff} = {reserved} B"
                     + (f", headroom {xoff} B" if priorities else ""))
    own, line = threshold(profile, pool, f"PG {pg}")
    steps.append(line)
    port_reserved, port_bound, port_lines = port_share(config, port, pool, ingress=True)
    steps += port_lines
    return PgLimits(port, pg, bool(priorities), reserved, xoff if priorities else 0,
                    profile.xon or 0, profile.xon_offset or 0, pool, port_reserved,
                    (own,) + ((port_bound,) if port_bound else ()), tuple(steps))


@dataclass(frozen=True)
class Others:
    """What other PGs already hold where this one draws: the pool's shared bytes, the port's
    reservation and shared bytes in that pool, the shared headroom pool."""

    pool: int = 0
    port_reserved: int = 0
    port_shared: int = 0
    headroom_pool: int = 0


@dataclass(frozen=True)
class Fill:
    """A PG filled with identical frames from ``others``' occupancy, nothing leaving."""

    pg: PgLimits
    frame: int
    others: Others
    base: int  # bytes before shared ones: the PG's reserved + what is left of the port's
    event: int  # lossless: the frame that sends XOFF; lossy: the first dropped
    bound: Bound  # the bound the event frame meets
    shared: int  # shared bytes from the event on
    headroom: int  # headroom bytes the XOFF frame took
    room: int  # headroom the PG may take: its xoff, or what the shared pool has left
    kept: bool  # the XOFF frame was accepted (else dropped: no headroom for it)
    steps: tuple[str, ...]

    @property
    def fits(self) -> int:
        """Frames after the XOFF frame that the headroom takes."""
        return (self.room - self.headroom) // self.frame if self.kept else 0

    @property
    def drop(self) -> int:
        """The first frame dropped at ingress."""
        return self.event + self.fits + 1 if self.pg.lossless and self.kept else self.event

    def accepted(self, n: int) -> int:
        """Frames of the first ``n`` that were accepted (every one after a drop is dropped:
        the PG's state no longer changes)."""
        return min(n, self.drop - 1)

    def held(self, n: int) -> tuple[int, int, int, int]:
        """(reserved, port reservation, shared, headroom) bytes after ``n`` frames."""
        if self.pg.lossless and self.kept and n >= self.event:
            return (self.pg.reserved, self.base - self.pg.reserved, self.shared,
                    self.headroom + self.frame * (self.accepted(n) - self.event))
        total = self.accepted(n) * self.frame
        reserved = min(total, self.pg.reserved)
        port = min(total, self.base) - reserved
        return reserved, port, max(total - self.base, 0), 0


def fill_pg(pg: PgLimits, frame: int, others: Others = Others()) -> Fill:
    """Solve where ``pg`` sends XOFF (lossless) or drops (lossy), and what it holds then."""
    base = pg.reserved + max(pg.port_reserved - others.port_reserved, 0)
    start = base // frame + 1  # the first frame that takes shared bytes
    free = pg.pool.size - others.pool
    bounds = [pg.bounds[0], *(replace(b, held=others.port_shared) for b in pg.bounds[1:]),
              Bound(f"BUFFER_POOL|{pg.pool.name} size {pg.pool.size}", static=free)]
    # a lossless frame sends XOFF on reaching a bound, a lossy one is dropped past it
    reach = 1 if pg.lossless else 0
    segments = [(start, start, free, 0), (start + 1, None, free + base + frame, frame)]
    event, hit = first_over(bounds, frame, reach - base, segments)
    before = max((event - 1) * frame - base, 0)
    steps = [f"{frame} B frames: frames 1..{start - 1} fit in the {base} B before shared "
             f"bytes (PG reserved {pg.reserved} + port reservation {base - pg.reserved})"
             if start > 1 else f"{frame} B frames: shared bytes from frame 1 (nothing reserved)"]
    if others.pool or others.port_shared or others.headroom_pool:
        steps.append(f"earlier PGs hold {others.pool} B of the pool's shared bytes, "
                     f"{others.port_shared} B of the port's, {others.headroom_pool} B of its "
                     "shared headroom pool")
    after = event * frame - base
    limit = hit.limit(free - before)
    verb = "reaches" if pg.lossless else "passes"
    steps.append(f"{hit.what} -> frame {event} {verb} it: shared {after}"
                 + (f" + {hit.held} held" if hit.held else "") + f" vs limit {limit}"
                 + (f" (pool free {free - before})" if hit.shift is not None else ""))
    if not pg.lossless:
        return Fill(pg, frame, others, base, event, hit, before, 0, 0, False, tuple(steps))
    room = min(b.limit(free - before) - b.held - before for b in bounds)
    beyond = after - before - max(room, 0)  # what the XOFF frame puts in headroom
    headroom = pg.headroom
    if pg.pool.xoff > 0:
        headroom = min(headroom, pg.pool.xoff - others.headroom_pool)
        source = (f"min(xoff {pg.headroom}, shared headroom pool {pg.pool.xoff} - "
                  f"{others.headroom_pool} held)")
    else:
        source = f"private xoff {pg.headroom}"
    kept = beyond <= headroom
    steps.append(f"headroom {headroom} B ({source}); the XOFF frame puts {beyond} B there"
                 + ("" if kept else ": it does not fit and is dropped"))
    return Fill(pg, frame, others, base, event, hit, before + (max(room, 0) if kept else 0),
                beyond if kept else 0, headroom, kept, tuple(steps))


# --- the egress side -------------------------------------------------------------------------

@dataclass(frozen=True)
class QueueLimits:
    """What the config gives one egress (port, queue) with a BUFFER_QUEUE profile."""

    port: str
    queue: int
    reserved: int
    port_reserved: int
    pool: BufferPool
    bounds: tuple[Bound, ...]
    steps: tuple[str, ...]

    @property
    def base(self) -> int:
        return self.reserved + self.port_reserved

    def counted(self, pg: PgLimits) -> bool:
        """Frames of ``pg`` count once, at ingress, in a ``both`` pool they share."""
        return self.pool.type == "both" and self.pool.name == pg.pool.name


def queue_limits(config: SwitchConfig, port: str, queue: int) -> QueueLimits | None:
    """The queue's buffer, None when no BUFFER_QUEUE limits it."""
    if port not in config.ports:
        raise ValueError(f"{config.path}: PORT|{port}: no such port")
    if not 0 <= queue < NUM_QUEUES:
        raise ValueError(f"{config.path}: BUFFER_QUEUE|{port}|{queue}: queues are "
                         f"0..{NUM_QUEUES - 1}")
    name = config.qos.buffer_queue.get((port, queue))
    if name is None:
        return None
    profile = config.qos.buffer_profiles[name]
    pool = config.qos.buffer_pools[profile.pool]
    own, line = threshold(profile, pool, f"queue {queue}")
    port_reserved, port_bound, port_lines = port_share(config, port, pool, ingress=False)
    steps = (f"BUFFER_QUEUE|{port}|{queue} -> BUFFER_PROFILE|{name} in BUFFER_POOL|"
             f"{pool.name} (size {pool.size}, type {pool.type}): reserved {profile.size} B",
             line, *port_lines)
    return QueueLimits(port, queue, profile.size, port_reserved, pool,
                       (own,) + ((port_bound,) if port_bound else ()), steps)


def queue_drop(q: QueueLimits, fill: Fill, egress: int | None = None) -> tuple[int, Bound, str]:
    """The first frame the queue drops, of a lossy stream nothing else holds it against
    (frames before the ingress drop): the arithmetic of ``fill_pg``; in a ``both`` pool the
    queue's limit reads the free bytes the PG's own shared bytes leave. ``egress``: the
    frame's bytes in the queue, as it leaves (a VLAN tag added or removed), where they
    differ from its ingress bytes (``fill.frame``)."""
    frame = fill.frame
    out = egress or frame
    start = q.base // out + 1
    size = q.pool.size
    if q.counted(fill.pg):  # pool use = the PG's shared bytes after the frame's ingress
        pg_start = fill.base // frame + 1
        segments = [s for s in ((start, pg_start - 1, size, 0),
                                (max(start, pg_start), None, size + fill.base, frame))
                    if s[1] is None or s[0] <= s[1]]
        bounds = q.bounds
    else:
        segments = [(start, start, size, 0), (start + 1, None, size + q.base + out, out)]
        bounds = (*q.bounds, Bound(f"BUFFER_POOL|{q.pool.name} size {size}", static=size))
    k, hit = first_over(bounds, out, -q.base, segments)
    return k, hit, (f"{hit.what} -> queue {q.queue} of {q.port} drops frame {k}: shared "
                    f"{k * out - q.base} would pass it")


def egress_holds(config: SwitchConfig, dst: str, loads: dict[int, list[tuple[PgLimits, int]]],
                 ingress_shared: dict[str, int]) -> None:
    """Refuse, naming the bound, when a limited egress queue of ``dst`` might drop lossless
    frames: ``loads`` gives per queue the (PG, bytes) it receives, ``ingress_shared`` each
    ingress pool's shared bytes at the end. Checked at the fullest point (pools only fill
    while nothing leaves, so a bound the end state keeps was never passed), and with the
    port's reservation left out (its queues share it): shared bytes are over-counted, never
    under-counted."""
    queues = {n: queue_limits(config, dst, n) for n in loads}
    pooled: dict[str, int] = dict(ingress_shared)
    port_shared: dict[str, int] = {}
    shared = {}
    for n, q in queues.items():
        if q is None:
            continue
        counted = {q.counted(pg) for pg, _ in loads[n]}
        if len(counted) > 1 or (not counted.pop() and q.pool.name in ingress_shared):
            raise NotDerived(f"{config.path}: BUFFER_QUEUE|{dst}|{n}: its pool {q.pool.name} "
                             "holds frames of PGs in other pools, which its own PGs' limits "
                             "would see: not derived")
        shared[n] = max(sum(b for _, b in loads[n]) - q.reserved, 0)
        port_shared[q.pool.name] = port_shared.get(q.pool.name, 0) + shared[n]
        if not q.counted(loads[n][0][0]):
            pooled[q.pool.name] = pooled.get(q.pool.name, 0) + shared[n]
    for n, q in queues.items():
        if q is None or not shared[n]:
            continue
        used = pooled.get(q.pool.name, 0)
        over = [b for b in q.bounds[:1] if shared[n] > b.limit(q.pool.size - used)]
        over += [b for b in q.bounds[1:]
                 if port_shared[q.pool.name] > b.limit(q.pool.size - used)]
        if used > q.pool.size:
            over.append(Bound(f"BUFFER_POOL|{q.pool.name} size {q.pool.size}"))
        if over:
            raise NotDerived(f"{config.path}: BUFFER_QUEUE|{dst}|{n}: {over[0].what} may drop "
                             f"lossless frames at egress ({shared[n]} B shared queued): the "
                             "XOFF/XON/headroom cases assume it does not; not derived")
