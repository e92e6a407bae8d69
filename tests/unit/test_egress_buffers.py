"""Egress admission (fabric.model.egress_buffers): BUFFER_QUEUE profiles limit what a queue
holds in its egress pool, so the lossy class drops at the egress queue as on a SONiC switch,
while the lossless queue (static threshold of the whole pool) never does."""
from __future__ import annotations

import json

from rocelab.fabric.config import BufferProfile
from rocelab.fabric.config_load import parse
from rocelab.fabric.model import Switch
from rocelab.fabric.model.egress_buffers import QueueBuffer
from rocelab.fabric.model.pools import EgressPool
from tests.unit.test_forwarding import LEAF1_JSON
from tests.unit.test_lossless import FRAME, H1_PORT, H2_PORT, S, learned, udp_frame

LOSSY_DSCP = 0  # leaf1: DSCP 0 -> TC 0 -> queue 0, PG 0 (lossy)


def profile(size: int = 0, dynamic_th: int | None = None,
            static_th: int | None = None) -> BufferProfile:
    return BufferProfile("p", "pool", size, dynamic_th=dynamic_th, static_th=static_th)


def test_static_threshold_after_the_reserved_part():
    pool = EgressPool("pool", 10_000)
    q = QueueBuffer(profile(size=1000, static_th=3000), pool)
    assert q.take(1000) and pool.used == 0  # reserved
    assert q.take(2500) and pool.used == 2500
    assert not q.take(600)  # 3100 shared > 3000
    assert q.take(500) and (q.used, pool.used) == (4000, 3000)
    q.release(3500)
    assert (q.used, pool.used) == (500, 0)


def test_dynamic_threshold_shrinks_as_the_pool_fills():
    pool = EgressPool("pool", 9000)
    a, b = (QueueBuffer(profile(dynamic_th=0), pool) for _ in range(2))
    while a.take(100):  # alone: alpha 1, settles at half the pool
        pass
    assert a.used == 4500
    while b.take(100):  # the second one about half of what is left (4500 / 2, in 100s)
        pass
    assert b.used == 2300 and pool.used == 6800
    a.release(4500)
    assert pool.used == 2300 and b.take(100)


def test_the_pool_size_bounds_every_queue():
    pool = EgressPool("pool", 1000)
    q = QueueBuffer(profile(static_th=0), pool)  # SAI: 0 = the pool's size
    assert q.take(1000) and not q.take(1)


def leaf1_with_egress_pool(size: int) -> Switch:
    data = json.loads(LEAF1_JSON.read_text())
    data["BUFFER_POOL"]["egress_lossy_pool"]["size"] = str(size)
    return Switch(parse(data, str(LEAF1_JSON)), time_scale=S, rand=lambda: 0.5)


def test_a_lossy_queue_drops_at_its_egress_limit_before_ingress_does():
    """egress_lossy_profile: size 1518, dynamic_th 3 (alpha 8) in a 100 KB pool: the queue
    holds 1518 + 8/9 of the pool, then drops; the ingress PG (alpha 8 in the much larger
    ingress pool) drops nothing; draining gives the pool back."""
    sw = learned(leaf1_with_egress_pool(100_000))
    for _ in range(200):
        sw.receive(H2_PORT, udp_frame(LOSSY_DSCP), 0.0)
    counters = sw.counters()
    port = counters["ports"][H1_PORT]
    queued = port["queues"]["0"]["depth_bytes"]
    limit = 0  # SAI's rule: a frame joins while its shared bytes stay within 8 x free
    while max(0, limit + FRAME - 1518) <= 8 * (100_000 - max(0, limit - 1518)):
        limit += FRAME
    assert queued == limit and abs(queued - (1518 + 100_000 * 8 / 9)) < 2 * FRAME
    assert port["egress_drops"] == {"queue_limit": 200 - 1 - queued // FRAME}
    assert port["queues"]["0"]["buffer_profile"] == "egress_lossy_profile"
    assert counters["ports"][H2_PORT]["pgs"]["0"]["drops"] == 0
    assert counters["egress_pools"]["egress_lossy_pool"]["used"] == queued - 1518
    now = 0.0
    while (at := sw.next_send_time(H1_PORT)) is not None:
        now = max(now, at)
        sw.dequeue(H1_PORT, now)
    assert sw.counters()["egress_pools"]["egress_lossy_pool"]["used"] == 0


def test_the_lossless_queue_is_not_limited_at_egress():
    sw = learned(leaf1_with_egress_pool(100_000))
    for _ in range(200):
        sw.receive(H2_PORT, udp_frame(26), 0.0)
    port = sw.counters()["ports"][H1_PORT]
    assert "queue_limit" not in port["egress_drops"]
    assert port["queues"]["3"]["buffer_profile"] == "egress_lossless_profile"


def test_flushed_frames_give_their_egress_bytes_back():
    sw = learned(leaf1_with_egress_pool(100_000))
    for _ in range(20):
        sw.receive(H2_PORT, udp_frame(LOSSY_DSCP), 0.0)
    assert sw.counters()["egress_pools"]["egress_lossy_pool"]["used"] > 0
    sw.set_port_up(H1_PORT, False)  # a dead wire: the queues are lost
    assert sw.counters()["egress_pools"]["egress_lossy_pool"]["used"] == 0
