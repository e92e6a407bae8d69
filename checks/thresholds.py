"""How many bytes a switch holds before a class pauses or drops, from its config: what the
congestion checks size their incasts by, and the XOFF point lint holds ECN against.

The formulas are SONiC's and sonic-mgmt's (``qos_sai_base``: a PG alone in its pool reaches
its threshold at ``size + alpha / (1 + alpha) x pool``, alpha = 2 ** dynamic_th; then its
headroom, ``xoff``, fills before it drops), applied to the buffer semantics the switch
model emulates (``fabric/model/buffers.py``, ``egress_buffers.py``): a PG fills its reserved
part, then the pool's shared buffer up to its threshold, then (lossless) its headroom; a
pool of type ``ingress`` or ``both`` serves the PGs alike.

Several PGs filling one pool together: with a dynamic threshold each may hold alpha x the
pool's free shared bytes, so ``n`` PGs filling alike stop at ``alpha x pool / (1 + n x
alpha)`` each. Whatever the spread, when the ``n`` together hold ``n x`` that, one of them
is at its threshold; so an incast that brings that much into the switch through ``n``
ports pauses (or, without PFC, drops) in at least one of them. That sizes a 6 GB VoQ pool
whose lossless PGs take 1/64 of it by the PGs' thresholds, not by the pool.
"""
from __future__ import annotations

from collections.abc import Iterable

from ..fabric.config import BufferPool, BufferProfile, SwitchConfig
from ..fabric.model.buffers import DEFAULT_DYNAMIC_TH

INGRESS = ("ingress", "both")  # pool types PGs draw on
NO_PROFILE = "(no BUFFER_PG)"


def alpha(profile: BufferProfile) -> float:
    """A dynamic threshold's share of the pool's free bytes."""
    return 2.0 ** (profile.dynamic_th or 0)


def shared_limit(profile: BufferProfile, pool: BufferPool, sharers: int = 1) -> float:
    """The pool's shared bytes one of ``sharers`` buffers on ``profile``, filling alike,
    holds at its threshold: ``static_th`` (0: the pool's size), or ``alpha x pool / (1 +
    sharers x alpha)``; never more than the pool shares out among them."""
    if profile.dynamic_th is None:
        return min(profile.static_th or pool.size, pool.size / sharers)
    a = alpha(profile)
    return a * pool.size / (1 + sharers * a)


def xoff_trigger(config: SwitchConfig, profile: BufferProfile) -> tuple[float, str]:
    """Shared bytes a PG alone in its pool holds when it sends XOFF, and how that was
    reached (for a finding)."""
    pool = config.qos.buffer_pools[profile.pool]
    trigger = shared_limit(profile, pool)
    if profile.dynamic_th is None:
        return trigger, f"static_th {profile.static_th}"
    return trigger, (f"dynamic_th {profile.dynamic_th} (alpha {alpha(profile):g}) x pool "
                     f"{pool.size} / (1 + alpha)")


def pg_profile(config: SwitchConfig, port: str, pg: int) -> BufferProfile | None:
    """The PG's BUFFER_PG profile; a PG without one gets the switch's default (no reserved
    bytes, ``dynamic_th`` 0 in the first ingress pool, as the model gives it), and None
    when the switch has no ingress pool at all (nothing limits it)."""
    name = config.qos.buffer_pg.get((port, pg))
    if name is not None:
        return config.qos.buffer_profiles[name]
    pool = next((n for n, p in config.qos.buffer_pools.items() if p.type in INGRESS), None)
    return None if pool is None else BufferProfile(NO_PROFILE, pool, 0, DEFAULT_DYNAMIC_TH)


def ingress_fill(config: SwitchConfig, ports: Iterable[str], pg: int,
                 inputs: int) -> int | None:
    """Bytes the switch holds in PG ``pg`` over ``inputs`` of ``ports`` (where an incast
    enters it) when one of them must be at its limit, headroom full: per port its reserved
    part and headroom (``xoff``: private, or drawn from a shared headroom pool), and the
    shared bytes ``inputs`` PGs hold together at their thresholds. The largest of the
    ports' figures, so that any ``inputs`` of them will do; None when no ingress pool
    limits the PG."""
    own, shared = 0, 0.0
    for port in ports:
        profile = pg_profile(config, port, pg)
        if profile is None:
            return None
        pool = config.qos.buffer_pools[profile.pool]
        xoff = profile.xoff or 0
        reserved = profile.size if pool.xoff > 0 else max(profile.size - xoff, 0)
        own = max(own, reserved + xoff)
        shared = max(shared, inputs * shared_limit(profile, pool, inputs))
    return round(inputs * own + shared)


def egress_fill(config: SwitchConfig, port: str, queue: int) -> int | None:
    """Bytes egress ``queue`` of ``port`` holds when it drops (its BUFFER_QUEUE profile's
    reserved part and threshold, alone in its pool); None when no profile limits it."""
    name = config.qos.buffer_queue.get((port, queue))
    if name is None:
        return None
    profile = config.qos.buffer_profiles[name]
    return round(profile.size + shared_limit(profile, config.qos.buffer_pools[profile.pool]))
