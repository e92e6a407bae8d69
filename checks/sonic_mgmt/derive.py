"""sonic-mgmt's QoS SAI thresholds (reference/sonic-mgmt-qos.md §1.2) derived from one
switch's config, exact for rocelab's switch model: the packet at which a PG sends XOFF, drops
at ingress, or (lossy) drops anywhere; how many queued packets must leave before XON; the
watermarks after n packets; and the headroom pool test's plan.

sonic-mgmt's PTF tests stop the egress port, send identical frames of one DSCP from one port
and read counters. In virtual time nothing leaks out and no margin is needed, and the model
charges a frame its length (a cell is a byte), so each threshold is one exact packet
(``pkts_num_leak_out`` = ``pkts_num_margin`` = 0). Only the config is read (BUFFER_POOL,
BUFFER_PROFILE, BUFFER_PG, BUFFER_QUEUE, BUFFER_PORT_*_PROFILE_LIST, PORT_QOS_MAP), through
the model's own rules solved in closed form (``fill``); ``upstream`` has sonic-mgmt's formulas
as they are, for comparison with hardware.

Each result carries its derivation, lines of "config value -> number", for the case's report.
What the model does and this module does not solve (a lossless frame dropped at a limited
egress queue, a queue fed from PGs of several pools) raises ``ValueError`` saying so, never a
wrong number.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple
from dataclasses import dataclass

from ...fabric.config import SwitchConfig
from .fill import (Derived, Fill, NotDerived, Others, PgLimits, QueueLimits, egress_holds, fill_pg,
                   pg_limits, queue_drop, queue_limits)
from .upstream import static_th

__all__ = ["Derived", "NotDerived", "PgPlan", "Watermarks", "headroom_pool_plan", "trig_egr_drp",
           "trig_ingr_drp", "trig_pfc", "watermarks", "xon_drain"]


# --- what the cases ask ----------------------------------------------------------------------

def _frame(config: SwitchConfig, frame_bytes: int) -> int:
    if isinstance(frame_bytes, bool) or not isinstance(frame_bytes, int) or frame_bytes < 1:
        raise ValueError(f"{config.path}: frame size {frame_bytes!r}: a positive number of "
                         "bytes")
    return frame_bytes


TAG_BYTES = 4  # an 802.1Q tag


class Egress(NamedTuple):
    """A frame's bytes in the dst queue, and why they differ from its ingress bytes."""

    bytes: int
    steps: tuple[str, ...]


def _tagging(config: SwitchConfig, port: str) -> str:
    tagged = any(v.members.get(port) == "tagged" for v in config.vlans.values())
    return "tagged" if tagged else "untagged"


def egress_frame(config: SwitchConfig, src_port: str, frame_bytes: int,
                 dst_port: str) -> Egress:
    """A frame from ``src_port`` as it waits in a queue of ``dst_port``: the model charges a
    queue the frame it sends, which carries a VLAN tag where dst is a tagged member
    (VLAN_MEMBER tagging_mode) and none where only src was."""
    src, dst = _tagging(config, src_port), _tagging(config, dst_port)
    change = TAG_BYTES * ((dst == "tagged") - (src == "tagged"))
    if not change:
        return Egress(frame_bytes, ())
    return Egress(frame_bytes + change, (
        f"VLAN_MEMBER tagging_mode: {src_port} {src}, {dst_port} {dst} -> the frame "
        f"{'gains' if change > 0 else 'loses'} its tag: {frame_bytes + change} B in the "
        f"queue, {frame_bytes} B at ingress",))


def _stream(config: SwitchConfig, src_port: str, pg: int, frame_bytes: int, dst_port: str,
            queue: int) -> tuple[Fill, QueueLimits | None, Egress]:
    """The PG's fill, the queue's limits and the frame's bytes in the queue."""
    fill = fill_pg(pg_limits(config, src_port, pg), _frame(config, frame_bytes))
    q = queue_limits(config, dst_port, queue)
    egress = egress_frame(config, src_port, frame_bytes, dst_port)
    if fill.pg.lossless:
        kept = fill.accepted(fill.drop) * egress.bytes
        egress_holds(config, dst_port, {queue: [(fill.pg, kept)]},
                     {fill.pg.pool.name: fill.held(fill.drop)[2]})
    return fill, q, egress


def _lossless(fill: Fill, config: SwitchConfig, what: str) -> None:
    if not fill.pg.lossless:
        raise ValueError(f"{config.path}: BUFFER_PG|{fill.pg.port}|{fill.pg.pg}: the PG is "
                         f"lossy (no pfc_enable priority maps to it): no {what}")


def trig_pfc(config: SwitchConfig, src_port: str, pg: int, frame_bytes: int, dst_port: str,
             queue: int) -> Derived:
    """``pkts_num_trig_pfc``: the 1-based frame whose arrival makes ``(src_port, pg)`` send
    XOFF, frames of ``frame_bytes`` to ``queue`` of ``dst_port``, whose TX is disabled."""
    fill, _, _ = _stream(config, src_port, pg, frame_bytes, dst_port, queue)
    _lossless(fill, config, "pkts_num_trig_pfc")
    return Derived(fill.event, (*fill.pg.steps, *_reference(config, fill.pg), *fill.steps[:-1],
                                f"-> pkts_num_trig_pfc {fill.event} (frame {frame_bytes} B)"))


def trig_ingr_drp(config: SwitchConfig, src_port: str, pg: int, frame_bytes: int,
                  dst_port: str, queue: int) -> Derived:
    """``pkts_num_trig_ingr_drp``: the 1-based frame first dropped at ingress, its headroom
    exhausted (same stream as ``trig_pfc``)."""
    fill, _, _ = _stream(config, src_port, pg, frame_bytes, dst_port, queue)
    _lossless(fill, config, "pkts_num_trig_ingr_drp")
    return Derived(fill.drop, (*fill.pg.steps, *fill.steps,
                               f"{fill.fits} more frames fit in the headroom"
                               f" -> pkts_num_trig_ingr_drp {fill.drop} (frame {frame_bytes} B)"))


def trig_egr_drp(config: SwitchConfig, src_port: str, pg: int, frame_bytes: int,
                 dst_port: str, queue: int) -> Derived:
    """``pkts_num_trig_egr_drp`` of a lossy stream: the 1-based frame first dropped, at the
    ingress PG's limit or at the egress queue's (sonic-mgmt's min of the two), the queued
    frames holding their ingress bytes."""
    fill, q, egress = _stream(config, src_port, pg, frame_bytes, dst_port, queue)
    if fill.pg.lossless:
        raise ValueError(f"{config.path}: BUFFER_PG|{src_port}|{pg}: the PG is lossless: "
                         "it pauses instead of dropping, no pkts_num_trig_egr_drp")
    steps = [*fill.pg.steps, *fill.steps]
    value = fill.drop
    if q is None:
        steps.append(f"BUFFER_QUEUE|{dst_port}|{queue}: none, the queue is not limited")
    else:
        k, _, line = queue_drop(q, fill, egress.bytes)
        steps += [*egress.steps, *q.steps, line]
        value = min(value, k)
    steps.append(f"-> pkts_num_trig_egr_drp {value} (frame {frame_bytes} B)")
    return Derived(value, tuple(steps))


def xon_drain(config: SwitchConfig, src_port: str, pg: int, frame_bytes: int, dst_port: str,
              queue: int, sent: int) -> Derived:
    """With ``sent`` frames sent (the PG in XOFF) and ``dst_port``'s TX then enabled: how many
    of the queued frames must leave before the PG sends XON. SAI's rule (``PgBuffer.try_xon``):
    headroom empty and reserved + shared at most ``max(xon, reserved + threshold -
    xon_offset)``, the threshold rising as the pool drains."""
    fill, _, _ = _stream(config, src_port, pg, frame_bytes, dst_port, queue)
    _lossless(fill, config, "XON")
    if sent < fill.event:  # (an XOFF frame dropped for want of headroom still sent XOFF)
        raise ValueError(f"{config.path}: BUFFER_PG|{src_port}|{pg}: {sent} frames sent, "
                         f"XOFF comes at frame {fill.event}: no XON to wait for")
    p = fill.pg
    reserved, port_reserved, shared, headroom = fill.held(sent)
    queued = fill.accepted(sent)
    free = p.pool.size  # with this PG's shared bytes gone
    bound_steps = [f"XON when headroom is empty and reserved + shared <= max(xon {p.xon}, "
                   f"reserved {p.reserved} + threshold - xon_offset {p.xon_offset})"]
    most = min(b.most(p.xon_offset, free) for b in p.bounds)
    limit = max(p.xon - p.reserved, most)  # on the shared bytes, the reserved part full
    bound_steps.append(f"{sent} frames sent: {queued} queued, holding headroom {headroom}, "
                       f"shared {shared}, port reservation {port_reserved}, reserved "
                       f"{reserved} B -> XON once shared <= {limit}")
    if limit >= 0:
        needed = headroom + max(shared - limit, 0)
    else:  # shared bytes gone, the reserved ones must drain too (xon >= 0: they can)
        floor = max(p.xon, p.reserved + min(b.limit(free) - b.held for b in p.bounds)
                    - p.xon_offset)
        needed = headroom + shared + port_reserved + reserved - floor
        bound_steps.append(f"the reserved bytes must drain to {floor} B too")
    drained = max(-(-needed // frame_bytes), 1)
    return Derived(drained, (*p.steps, *fill.steps, *bound_steps,
                             f"{needed} B to drain -> XON after {drained} frames leave "
                             f"(frame {frame_bytes} B)"))


@dataclass(frozen=True)
class Watermarks:
    """Occupancy after n frames (each only grows while nothing leaves, so it is also the
    watermark): the src PG's shared and headroom bytes, the dst queue's bytes (and shared
    ones), the PG's pool's shared bytes and its shared headroom pool's, and the queue's pool.
    ``queue_shared`` and ``egress_pool`` are None when no BUFFER_QUEUE limits the queue."""

    pg_shared: Derived
    pg_headroom: Derived
    queue: Derived
    queue_shared: Derived | None
    pool: Derived
    headroom_pool: Derived
    egress_pool: Derived | None


def watermarks(config: SwitchConfig, src_port: str, pg: int, frame_bytes: int, dst_port: str,
               queue: int, sent: int) -> Watermarks:
    """The watermarks after ``sent`` frames of the stream (``trig_pfc``'s, or a lossy one's:
    after its first drop every frame is dropped, at ingress or at the queue)."""
    fill, q, egress = _stream(config, src_port, pg, frame_bytes, dst_port, queue)
    steps = (*fill.pg.steps, *fill.steps, *egress.steps)
    kept = fill.accepted(sent)
    if q is not None and not fill.pg.lossless:
        k, _, line = queue_drop(q, fill, egress.bytes)
        kept = min(kept, k - 1, sent)
        steps += (*q.steps, line)
    held = fill.held(kept)
    shared, headroom = held[2], held[3]
    queued = kept * egress.bytes
    said = f"after {sent} frames ({kept} kept): "

    def derived(name: str, value: int, how: str) -> Derived:
        return Derived(value, (*steps, f"{said}{name} {value} B{how}"))

    shp = headroom if fill.pg.pool.xoff > 0 else 0
    queue_shared = egress_pool = None
    if q is not None:
        q_shared = max(queued - q.base, 0)
        queue_shared = derived("queue shared", q_shared, f" ({queued} queued - {q.base})")
        if q.counted(fill.pg):
            egress_pool = derived("egress pool", shared, ": the PG's pool, counted at ingress")
        else:
            egress_pool = derived(f"BUFFER_POOL|{q.pool.name} shared", q_shared, "")
    return Watermarks(
        derived("PG shared", shared, ""), derived("PG headroom", headroom, ""),
        derived("queue", queued, f" ({kept} x {egress.bytes})"), queue_shared,
        derived(f"BUFFER_POOL|{fill.pg.pool.name} shared", shared, ""),
        derived(f"BUFFER_POOL|{fill.pg.pool.name} headroom pool", shp, ""), egress_pool)


# --- the headroom pool test ------------------------------------------------------------------

@dataclass(frozen=True)
class PgPlan:
    """One PG of HdrmPoolSizeTest's fill, counted in frames sent to that PG: ``trig_pfc``
    sends XOFF, ``hdrm_full`` more fill its headroom (its own or what the shared headroom
    pool has left), ``drop`` is the one after (or ``trig_pfc`` when no headroom is left for
    the XOFF frame); ``headroom_pool``: its shared headroom pool's bytes once it is full."""

    port: str
    pg: int
    trig_pfc: Derived
    hdrm_full: Derived
    drop: Derived
    headroom_pool: Derived


def headroom_pool_plan(config: SwitchConfig, sources: Sequence[tuple[str, int, int]],
                       frame_bytes: int, dst_port: str) -> tuple[PgPlan, ...]:
    """HdrmPoolSizeTest's plan: ``sources`` (src port, lossless PG, its queue on
    ``dst_port``) filled one after another, each up to its XOFF and then its headroom
    (``trig_pfc + hdrm_full`` frames, none dropped), all queued on ``dst_port`` (TX off). The
    pool's free bytes shrink as PGs fill, so later PGs send XOFF sooner; the last PG's
    ``drop`` is where the test expects its ingress drop."""
    plans: list[PgPlan] = []
    pool_shared: dict[str, int] = {}
    headroom_used: dict[str, int] = {}
    port_reserved: dict[tuple[str, str], int] = {}
    port_shared: dict[tuple[str, str], int] = {}
    loads: dict[int, list[tuple[PgLimits, int]]] = {}
    _frame(config, frame_bytes)
    for src_port, pg, queue in sources:
        p = pg_limits(config, src_port, pg)
        queue_limits(config, dst_port, queue)
        key = (src_port, p.pool.name)
        fill = fill_pg(p, frame_bytes, Others(pool_shared.get(p.pool.name, 0),
                                             port_reserved.get(key, 0),
                                             port_shared.get(key, 0),
                                             headroom_used.get(p.pool.name, 0)))
        _lossless(fill, config, "headroom pool plan")
        sent = fill.event + fill.fits if fill.kept else fill.event
        _, in_port, shared, headroom = fill.held(sent)
        pool_shared[p.pool.name] = pool_shared.get(p.pool.name, 0) + shared
        port_reserved[key] = port_reserved.get(key, 0) + in_port
        port_shared[key] = port_shared.get(key, 0) + shared
        if p.pool.xoff > 0:
            headroom_used[p.pool.name] = headroom_used.get(p.pool.name, 0) + headroom
        egress = egress_frame(config, src_port, frame_bytes, dst_port).bytes
        loads.setdefault(queue, []).append((p, fill.accepted(sent) * egress))
        steps = (*p.steps, *fill.steps)
        name = f"{src_port} PG {pg}"
        plans.append(PgPlan(
            src_port, pg, Derived(fill.event, (*steps, f"-> {name}: XOFF at frame {fill.event}")),
            Derived(fill.fits, (*steps, f"-> {name}: {fill.fits} more frames fill its headroom")),
            Derived(fill.drop, (*steps, f"-> {name}: frame {fill.drop} is dropped")),
            Derived(headroom_used.get(p.pool.name, 0),
                    (*steps, f"-> {p.pool.name}'s shared headroom pool holds "
                     f"{headroom_used.get(p.pool.name, 0)} B after {name}"))))
    egress_holds(config, dst_port, loads, pool_shared)
    return tuple(plans)


def _reference(config: SwitchConfig, pg: PgLimits) -> tuple[str, ...]:
    """sonic-mgmt's own reading of the profile (qos_sai_base), for comparison: a PG alone at
    ``size + alpha / (1 + alpha) x pool``."""
    name = config.qos.buffer_pg.get((pg.port, pg.pg))
    profile = config.qos.buffer_profiles.get(name) if name else None
    if profile is None or profile.dynamic_th is None:
        return ()
    alone = static_th(profile.size, pg.pool.size, profile.dynamic_th)
    return (f"for comparison, sonic-mgmt {alone.steps[-1]}",)
