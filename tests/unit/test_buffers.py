"""Ingress buffers per (port, PG) (fabric.model.buffers): admission into reserved, shared and
headroom buffer, XOFF/XON, dynamic and static thresholds, watermarks. Byte-exact: frame
sizes are chosen so every boundary is hit exactly, and time is injected."""
from __future__ import annotations

import json

import pytest

from rocelab.fabric.config import BufferPool, BufferProfile, PortQos, Qos
from rocelab.fabric.config_load import load
from rocelab.fabric.model.buffers import (ACCEPT, ACCEPT_HEADROOM, DROP_HEADROOM_EXHAUSTED,
                                          DROP_LOSSY_LIMIT, UNLIMITED_POOL, IngressBuffers)

LEAF1 = "/work/main/topologies/roce-v2-leafspine/configs/leaf1/config_db.json"
P0, P4 = "Ethernet0", "Ethernet4"


def profile(name: str = "lossless", size: int = 0, xoff: int | None = None,
            xon: int | None = None, xon_offset: int | None = None,
            dynamic_th: int | None = None, static_th: int | None = None) -> BufferProfile:
    if dynamic_th is None and static_th is None:
        dynamic_th = 0
    return BufferProfile(name, "pool", size, dynamic_th, static_th, xon, xoff, xon_offset)


def buffers(pgs: dict[tuple[str, int], BufferProfile], pool_size: int = 100_000,
            pool_xoff: int = 0, pfc_enable: frozenset[int] = frozenset({3}),
            ports: tuple[str, ...] = (P0, P4), **kwargs) -> IngressBuffers:
    """A switch with one ingress pool, ``pgs`` {(port, pg): profile}, PFC on ``pfc_enable``."""
    qos = Qos(
        port_qos={port: PortQos(pfc_enable=pfc_enable) for port in ports},
        buffer_pools={"pool": BufferPool("pool", "ingress", "dynamic", pool_size, pool_xoff)},
        buffer_profiles={p.name: p for p in pgs.values()},
        buffer_pg={key: p.name for key, p in pgs.items()},
    )
    return IngressBuffers.from_config(qos, ports, **kwargs)


def fill(b: IngressBuffers, port: str, pg: int, frames: int, size: int = 1000,
         now: float = 0.0) -> list:
    return [b.admit(port, pg, size, now) for _ in range(frames)]


# --- XOFF, headroom, XON ---------------------------------------------------------------------


def test_xoff_exactly_at_the_threshold_and_not_before():
    # reserved 2000 (size = reserved + xoff with private headroom), shared threshold 10000
    b = buffers({(P0, 3): profile(size=6000, xoff=4000, static_th=10_000)})
    pg = b.pg(P0, 3)
    assert (pg.reserved, pg.headroom, pg.lossless, pg.priorities) == (2000, 4000, True, (3,))
    before = fill(b, P0, 3, 11)  # 2000 reserved + 9000 shared
    assert all(a.verdict == ACCEPT and not a.xoff for a in before)
    assert (pg.reserved_used, pg.shared, pg.xoff) == (2000, 9000, False)
    at = b.admit(P0, 3, 1000, 1.0)  # shared reaches 10000: the threshold
    assert (at.verdict, at.xoff, at.accepted) == (ACCEPT, True, True)
    assert (pg.shared, pg.headroom_used, pg.xoff, pg.xoff_count) == (10_000, 0, True, 1)
    again = b.admit(P0, 3, 1000, 1.1)
    assert (again.verdict, again.xoff) == (ACCEPT_HEADROOM, False)  # XOFF is sent once


def test_a_frame_crossing_the_threshold_is_split_at_it():
    b = buffers({(P0, 3): profile(size=4000, xoff=4000, static_th=10_000)})
    pg = b.pg(P0, 3)
    fill(b, P0, 3, 6, 1500)  # 9000 shared
    crossing = b.admit(P0, 3, 1500, 0.0)
    assert (crossing.verdict, crossing.xoff) == (ACCEPT_HEADROOM, True)
    assert (pg.shared, pg.headroom_used, pg.after_xoff_max) == (10_000, 500, 500)


def test_headroom_absorbs_exactly_xoff_bytes_then_drops_as_headroom_exhausted():
    b = buffers({(P0, 3): profile(size=4000, xoff=4000, static_th=10_000)})
    pg = b.pg(P0, 3)
    assert fill(b, P0, 3, 10)[-1].xoff
    absorbed = fill(b, P0, 3, 4)
    assert all(a.verdict == ACCEPT_HEADROOM for a in absorbed)
    assert (pg.headroom_used, pg.shared) == (4000, 10_000)
    dropped = b.admit(P0, 3, 1000, 0.0)
    assert (dropped.verdict, dropped.xoff, dropped.accepted) == (
        DROP_HEADROOM_EXHAUSTED, False, False)
    assert b.admit(P0, 3, 64, 0.0).verdict == DROP_HEADROOM_EXHAUSTED  # not a byte more
    assert (pg.drops, pg.dropped_bytes) == (2, 1064)
    assert (pg.headroom_used, pg.headroom_peak) == (4000, 4000)
    (use,) = b.headroom_use(P0)
    assert (use.port, use.pg, use.headroom, use.after_xoff_max, use.headroom_peak) == (
        P0, 3, 4000, 5064, 4000)
    assert not use.within  # more arrived after XOFF than the headroom holds


def test_headroom_use_is_within_when_the_burst_fits():
    b = buffers({(P0, 3): profile(size=4000, xoff=4000, static_th=10_000)})
    fill(b, P0, 3, 14)
    (use,) = b.headroom_use(P0)
    assert (use.after_xoff_max, use.drops, use.within) == (4000, 0, True)


@pytest.mark.parametrize("xon, xon_offset, resume_at", [
    (None, 2000, 8000),  # xon_offset below the XOFF point
    (9000, 2000, 9000),  # xon is higher: it wins (SAI: max(XON_TH, limit - XON_OFFSET_TH))
    (None, None, 10_000),  # neither: resume once the headroom has drained
])
def test_xon_hysteresis(xon, xon_offset, resume_at):
    b = buffers({(P0, 3): profile(size=4000, xoff=4000, xon=xon, xon_offset=xon_offset,
                                  static_th=10_000)})
    pg = b.pg(P0, 3)
    fill(b, P0, 3, 12, now=0.0)  # XOFF at 10000 shared, then 2000 into headroom
    resumed = b.release(P0, 3, 2000, 1.0)  # the headroom drains first
    while not resumed:  # then shared, a byte at a time
        if pg.used == resume_at + 1:  # inside the band: still XOFF, arrivals to headroom
            inside = b.admit(P0, 3, 500, 1.0)
            assert (inside.verdict, inside.xoff, pg.xoff) == (ACCEPT_HEADROOM, False, True)
            assert b.release(P0, 3, 500, 1.0) == []
        resumed = b.release(P0, 3, 1, 1.0)
    assert (resumed, pg.xoff, pg.used) == ([pg], False, resume_at)  # not a byte earlier
    # no flapping: back in XON, the next XOFF comes only at the threshold again
    frames = max((10_000 - resume_at) // 1000, 1)
    results = fill(b, P0, 3, frames, now=3.0)
    assert [a.xoff for a in results] == [False] * (frames - 1) + [True]
    assert pg.xoff_count == 2 and pg.seconds_in_xoff(4.0) == 2.0


def test_xon_needs_the_headroom_drained_first():
    b = buffers({(P0, 3): profile(size=4000, xoff=4000, xon=50_000, static_th=10_000)})
    pg = b.pg(P0, 3)
    fill(b, P0, 3, 12)
    assert b.release(P0, 3, 1999, 1.0) == []  # use is under xon, but headroom holds a byte
    assert b.release(P0, 3, 1, 1.0) == [pg]


def test_release_order_returns_bytes_to_the_pool_and_watermarks_keep_the_peak():
    b = buffers({(P0, 3): profile(size=3000, xoff=2000, static_th=5000)})
    pg, pool = b.pg(P0, 3), b.pools["pool"]
    fill(b, P0, 3, 8)  # 1000 reserved, 5000 shared (XOFF), 2000 headroom
    assert (pg.reserved_used, pg.shared, pg.headroom_used, pool.used) == (1000, 5000, 2000, 5000)
    b.release(P0, 3, 2500, 1.0)  # headroom first, then shared
    assert (pg.reserved_used, pg.shared, pg.headroom_used, pool.used) == (1000, 4500, 0, 4500)
    b.release(P0, 3, 5500, 1.0)
    assert (pg.used, pool.used, pool.free) == (0, 0, 100_000)
    assert (pg.peak, pg.shared_peak, pg.headroom_peak, pool.peak) == (8000, 5000, 2000, 5000)
    with pytest.raises(ValueError, match="releasing 1 bytes, holding 0"):
        b.release(P0, 3, 1, 1.0)


def test_time_in_xoff():
    b = buffers({(P0, 3): profile(size=1000, xoff=1000, static_th=1000)})
    pg = b.pg(P0, 3)
    b.admit(P0, 3, 1000, 1.0)
    assert pg.seconds_in_xoff(1.25) == 0.25
    assert b.release(P0, 3, 1000, 1.5) == [pg]
    assert pg.seconds_in_xoff(9.0) == 0.5


# --- thresholds ------------------------------------------------------------------------------


def test_dynamic_threshold_is_alpha_times_the_free_pool_and_shrinks_as_it_fills():
    b = buffers({(P0, 3): profile(xoff=4000, dynamic_th=1), (P4, 0): profile("lossy", 0)})
    pg = b.pg(P0, 3)
    assert pg.threshold() == 200_000  # alpha 2 x 100000 free
    fill(b, P4, 0, 30)  # another port's lossy PG takes 30000 of the pool
    assert pg.threshold() == 140_000
    fill(b, P0, 3, 10)
    assert pg.threshold() == 120_000


def test_one_pg_alone_stops_at_alpha_over_one_plus_alpha_of_the_pool():
    b = buffers({(P0, 3): profile(xoff=4000, dynamic_th=0)})
    pg = b.pg(P0, 3)
    results = fill(b, P0, 3, 51)
    assert not any(a.xoff for a in results[:50]) and pg.shared == 50_000
    # at 50000 shared the threshold (the 50000 left) is reached: the next frame is past it
    assert (results[50].verdict, results[50].xoff) == (ACCEPT_HEADROOM, True)


@pytest.mark.parametrize("dynamic_th", [0, -2])
@pytest.mark.parametrize("lossless", [False, True])
def test_two_competing_pgs_settle_at_alpha_over_one_plus_two_alpha(dynamic_th, lossless):
    pool = 1_200_000
    pg_index = 3 if lossless else 0
    b = buffers({(P0, pg_index): profile("p", xoff=1_000_000, dynamic_th=dynamic_th),
                 (P4, pg_index): profile("p", xoff=1_000_000, dynamic_th=dynamic_th)},
                pool_size=pool)
    first, second = b.pg(P0, pg_index), b.pg(P4, pg_index)
    assert first.lossless is second.lossless is lossless
    for _ in range(pool // 1000):  # frames alternate between the two ports
        fill(b, P0, pg_index, 1)
        fill(b, P4, pg_index, 1)
    alpha = 2.0 ** dynamic_th
    share = alpha / (1 + 2 * alpha) * pool  # 400000 for alpha 1, 200000 for 1/4
    for pg in (first, second):
        assert abs(pg.shared - share) <= 2000, (pg.shared, share)
        if lossless:
            assert pg.xoff and pg.drops == 0
        else:
            assert pg.drops > 0 and not pg.xoff and pg.headroom_used == 0


def test_a_release_elsewhere_in_the_pool_can_resume_a_dynamic_pg():
    b = buffers({(P0, 3): profile(xoff=4000, xon_offset=2000, dynamic_th=0),
                 (P4, 0): profile("big", static_th=60_000)})
    pg = b.pg(P0, 3)
    fill(b, P4, 0, 60)  # 60000 of the pool held by another port
    results = fill(b, P0, 3, 21)  # XOFF at 20000 shared (threshold: the 20000 left)
    assert results[-1].xoff and pg.shared == 20_000 and pg.headroom_used == 1000
    assert b.release(P0, 3, 1000, 1.0) == []  # threshold 20000, resumes at 18000 or less
    assert b.release(P4, 0, 10_000, 2.0) == [pg]  # threshold 30000: 20000 <= 28000


def test_static_threshold():
    b = buffers({(P0, 0): profile("lossy", size=1000, static_th=5000),
                 (P0, 1): profile("nolimit", static_th=0)})
    assert b.pg(P0, 0).threshold() == 5000
    results = fill(b, P0, 0, 7)
    assert [a.verdict for a in results] == [ACCEPT] * 6 + [DROP_LOSSY_LIMIT]
    assert b.pg(P0, 1).threshold() == 100_000  # SAI: static_th 0 is no limit but the pool's


# --- lossy PGs -------------------------------------------------------------------------------


def test_lossy_pgs_drop_at_their_limit_and_never_xoff():
    b = buffers({(P0, 0): profile("lossy", dynamic_th=-1),
                 (P0, 4): profile("lossless", size=8000, xoff=4000, static_th=3000)})
    lossy, unpaused = b.pg(P0, 0), b.pg(P0, 4)  # PG 4: lossless profile, PFC not on 4
    assert not lossy.lossless and not unpaused.lossless and unpaused.headroom == 0
    results = fill(b, P0, 0, 50) + fill(b, P0, 4, 20)
    assert not any(a.xoff for a in results)
    assert {a.verdict for a in results} == {ACCEPT, DROP_LOSSY_LIMIT}
    # alpha 1/2: 33000 shared = (100000 - 33000) / 2 rounded down to whole frames
    assert (lossy.shared, lossy.xoff, lossy.headroom_used) == (33_000, False, 0)
    assert (unpaused.reserved_used, unpaused.shared, unpaused.drops) == (4000, 3000, 13)
    assert b.headroom_use(P0) == []


def test_a_full_pool_drops_lossy_frames_whatever_alpha_says():
    b = buffers({(P0, 0): profile("lossy", dynamic_th=3)}, pool_size=10_500)
    results = fill(b, P0, 0, 11)
    assert [a.verdict for a in results] == [ACCEPT] * 10 + [DROP_LOSSY_LIMIT]


def test_pgs_without_buffer_pg_are_lossy_in_the_default_profile():
    b = buffers({}, pfc_enable=frozenset({3}))
    pg = b.pg(P0, 3)  # PFC on 3, but no BUFFER_PG: no headroom, so no PFC
    assert (pg.profile, pg.lossless, pg.reserved, pg.headroom) == (None, False, 0, 0)
    results = fill(b, P0, 3, 60)
    # dynamic_th 0 alone in the pool: half of it
    assert not any(a.xoff for a in results) and pg.shared == 50_000 and pg.drops == 10


def test_without_ingress_pools_nothing_is_limited():
    qos = Qos(buffer_pools={"egress": BufferPool("egress", "egress", "static", 1000)})
    b = IngressBuffers.from_config(qos, [P0])
    assert list(b.pools) == [UNLIMITED_POOL]
    assert all(a.verdict == ACCEPT for a in fill(b, P0, 0, 1000, 9000))


def test_a_buffer_pg_on_an_egress_pool_is_refused():
    qos = Qos(buffer_pools={"egress": BufferPool("egress", "egress", "static", 1000)},
              buffer_profiles={"e": BufferProfile("e", "egress", 0, static_th=1000)},
              buffer_pg={(P0, 0): "e"})
    with pytest.raises(ValueError, match=r"BUFFER_PG\|Ethernet0\|0: .* egress pool egress"):
        IngressBuffers.from_config(qos, [P0])


# --- which PGs are lossless ------------------------------------------------------------------


def test_the_caller_can_map_pgs_to_priorities():
    pgs = {(P0, 1): profile(xoff=4000), (P0, 3): profile(xoff=4000)}
    b = buffers(pgs, ports=(P0,), pg_priorities=lambda port, pg: {1: (3, 5)}.get(pg, ()))
    assert (b.pg(P0, 1).lossless, b.pg(P0, 1).priorities) == (True, (3,))
    assert not b.pg(P0, 3).lossless


def test_pfc_to_pg_map_and_global_pfc_enable_come_from_the_config():
    qos = Qos(
        pfc_priority_to_pg={"M": {3: 4, 4: 4}},
        port_qos={P0: PortQos(pfc_to_pg_map="M"), "global": PortQos(pfc_enable=frozenset({3}))},
        buffer_pools={"pool": BufferPool("pool", "ingress", "dynamic", 100_000)},
        buffer_profiles={"lossless": profile(xoff=4000)},
        buffer_pg={(P0, 3): "lossless", (P0, 4): "lossless"},
    )
    b = IngressBuffers.from_config(qos, [P0])
    assert (b.pg(P0, 4).lossless, b.pg(P0, 4).priorities) == (True, (3,))
    assert not b.pg(P0, 3).lossless


# --- shared headroom pool --------------------------------------------------------------------


def test_a_shared_headroom_pool_caps_each_pg_at_xoff_and_all_at_the_pool():
    lossless = profile(size=2000, xoff=2000, static_th=5000)  # size = xon with a shared pool
    b = buffers({(P0, 3): lossless, (P4, 3): lossless}, pool_xoff=3000)
    first, second, pool = b.pg(P0, 3), b.pg(P4, 3), b.pools["pool"]
    assert (first.reserved, first.headroom, first.shares_headroom) == (2000, 2000, True)
    fill(b, P0, 3, 7)  # 2000 reserved + 5000 shared: XOFF
    assert [a.verdict for a in fill(b, P0, 3, 3)] == [ACCEPT_HEADROOM] * 2 + [
        DROP_HEADROOM_EXHAUSTED]  # its own cap, xoff, though the pool has 1000 left
    fill(b, P4, 3, 7)
    assert [a.verdict for a in fill(b, P4, 3, 2)] == [ACCEPT_HEADROOM, DROP_HEADROOM_EXHAUSTED]
    assert (pool.headroom_used, pool.headroom_peak) == (3000, 3000)
    b.release(P0, 3, 1500, 1.0)
    assert (first.headroom_used, pool.headroom_used) == (500, 1500)


# --- the lab's config ------------------------------------------------------------------------


def test_leaf1_config():
    config = load(LEAF1)
    b = IngressBuffers.from_config(config.qos, config.ports)
    pool = b.pools["ingress_lossless_pool"]
    assert (pool.size, pool.headroom_size) == (12_766_208, 1_720_320)
    assert list(b.pools) == ["ingress_lossless_pool"]  # egress pools are not ingress buffers
    for port in config.ports:
        pg3, pg0, pg1 = b.pg(port, 3), b.pg(port, 0), b.pg(port, 1)
        assert (pg3.profile, pg3.lossless, pg3.priorities) == (
            "pg_lossless_100000_40m_profile", True, (3,))
        # xoff 48128 comes from the shared headroom pool, so the PG's size is xon alone
        assert (pg3.headroom, pg3.xon, pg3.xon_offset) == (48_128, 18_432, 2496)
        assert pg3.reserved == 18_432
        assert pg3.threshold() == 12_766_208  # dynamic_th 0: alpha 1 x the free pool
        assert (pg0.profile, pg0.lossless, pg0.headroom) == ("ingress_lossy_profile", False, 0)
        assert pg0.threshold() == 8 * 12_766_208  # dynamic_th 3
        assert (pg1.profile, pg1.lossless) == (None, False)
    pg3 = b.pg("Ethernet8", 3)
    results = fill(b, "Ethernet8", 3, 18 + 6234, 1024)  # reserved, then shared up to XOFF
    assert not any(a.xoff for a in results[:-1]) and results[-1].xoff
    assert (pg3.reserved_used, pg3.shared) == (18_432, 6_383_616)  # half the pool + 512
    headroom = fill(b, "Ethernet8", 3, 48, 1024)
    assert [a.verdict for a in headroom] == [ACCEPT_HEADROOM] * 47 + [DROP_HEADROOM_EXHAUSTED]
    assert pg3.headroom_used == 48_128 and pool.headroom_used == 48_128
    snapshot = b.snapshot(1.0)
    json.dumps(snapshot)
    assert snapshot["pgs"]["Ethernet8"]["3"]["headroom_peak"] == 48_128
    assert snapshot["pgs"]["Ethernet8"]["3"]["after_xoff_max"] == 48 * 1024
    assert snapshot["pools"]["ingress_lossless_pool"]["used"] == 6_383_616
    assert set(snapshot["pgs"]) == set(config.ports) and len(snapshot["pgs"][P0]) == 8
