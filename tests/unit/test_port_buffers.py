"""Buffer pools shared by ingress and egress (``type: both``) and a port's share of a pool
(BUFFER_PORT_INGRESS_PROFILE_LIST / _EGRESS_): fabric.model.buffers, egress_buffers and
port_buffers, byte-exact, then in the switch (a PG resumes when egress bytes leave its
``both`` pool). The configs shaped as SONiC renders them (tests/platform_configs.py) where
the numbers allow."""
from __future__ import annotations

import json

from rocelab.fabric.config import BufferPool, BufferProfile, PortQos, Qos
from rocelab.fabric.config_load import parse
from rocelab.fabric.model import Switch
from rocelab.fabric.model.buffers import DROP_LOSSY_LIMIT, IngressBuffers
from rocelab.fabric.model.egress_buffers import egress_pools, queue_buffers
from rocelab.fabric.model.frames import PFC_MAC, mac_bytes, pfc_frame
from rocelab.fabric.model.pause import MAX_QUANTA
from tests.platform_configs import (BOTH_POOL_SIZE, LOSSLESS, LOSSY_QUEUES, TRADITIONAL_PORTS,
                                    VOQ_PORTS, traditional, voq_line_card)
from tests.unit.test_forwarding import H1, LEAF1_JSON
from tests.unit.test_lossless import (FRAME, H1_PORT, H2_PORT, S, learned, pfc_quanta,
                                      udp_frame)

P0, P4 = "Ethernet0", "Ethernet4"


def one_pool(kind: str) -> Qos:
    """PG 0 of P0 and queue 0 of P4, both alpha 1 (dynamic_th 0) with nothing reserved, in
    one 10 000-byte pool of type ``kind`` ("both"), or in two such pools ("apart")."""
    pools = ({"pool": BufferPool("pool", "both", "dynamic", 10_000)} if kind == "both" else
             {"pool": BufferPool("pool", "ingress", "dynamic", 10_000),
              "out": BufferPool("out", "egress", "dynamic", 10_000)})
    return Qos(
        port_qos={P0: PortQos(), P4: PortQos()},
        buffer_pools=pools,
        buffer_profiles={"in": BufferProfile("in", "pool", 0, dynamic_th=0),
                         "q": BufferProfile("q", "pool" if kind == "both" else "out", 0,
                                            dynamic_th=0)},
        buffer_pg={(P0, 0): "in"}, buffer_queue={(P4, 0): "q"})


def test_a_both_pool_is_one_size_for_ingress_and_egress():
    qos = one_pool("both")
    ingress = IngressBuffers.from_config(qos, [P0, P4])
    pools = egress_pools(qos, ingress.pools)
    assert pools["pool"] is ingress.pools["pool"]  # one buffer, not two
    pg, queue = ingress.pg(P0, 0), queue_buffers(qos, P4, pools)[0]
    for _ in range(4):
        assert ingress.admit(P0, 0, 1000, 0.0).accepted
    assert queue.threshold() == 6000  # the egress limit sees what ingress holds
    # frames from elsewhere (not counted at ingress in this pool) take egress bytes of it
    assert queue.take(3000) and ingress.pools["pool"].used == 7000
    assert pg.threshold() == 3000 < pg.shared  # ... and the ingress limit sees them
    assert ingress.admit(P0, 0, 1000, 0.0).verdict == DROP_LOSSY_LIMIT
    assert queue.release(3000) == 3000 and ingress.admit(P0, 0, 1000, 0.0).accepted
    # a frame whose PG is in the pool is stored once: its queue bounds it, adds nothing
    assert queue.take(1000, counted=True) and ingress.pools["pool"].used == 5000
    assert queue.release(1000, counted=True) == 0 and ingress.pools["pool"].used == 5000


def test_pools_apart_do_not_see_each_other():
    qos = one_pool("apart")
    ingress = IngressBuffers.from_config(qos, [P0, P4])
    queue = queue_buffers(qos, P4, egress_pools(qos, ingress.pools))[0]
    for _ in range(4):
        ingress.admit(P0, 0, 1000, 0.0)
    assert queue.threshold() == 10_000 and queue.take(5000)
    assert ingress.pg(P0, 0).threshold() == 6000 and ingress.pools["pool"].used == 4000


def test_a_counted_frame_released_after_others_gives_back_what_it_never_took():
    """Two frames, the first counted at ingress: whichever leaves first, the pool ends with
    nothing of this queue's (what it counts stays within its shared bytes)."""
    qos = one_pool("both")
    pools = egress_pools(qos, IngressBuffers.from_config(qos, [P0, P4]).pools)
    queue = queue_buffers(qos, P4, pools)[0]
    assert queue.take(1000, counted=True) and queue.take(1000)
    assert pools["pool"].used == 1000
    assert queue.release(1000, counted=True) == 0 and pools["pool"].used == 1000
    assert queue.release(1000) == 1000 and (pools["pool"].used, queue.pooled) == (0, 0)


def test_the_voq_line_cards_both_pool_serves_its_pgs_and_its_queues():
    data = voq_line_card()
    config = parse(data, "lc1/config_db.json")
    first, second = VOQ_PORTS
    ingress = IngressBuffers.from_config(config.qos, config.ports)
    pools = egress_pools(config.qos, ingress.pools)
    queues = queue_buffers(config.qos, second, pools)
    lossless = LOSSLESS[0]
    assert queues[lossless].pool is ingress.pg(first, 0).pool is \
        ingress.pools["ingress_lossless_pool"]
    assert ingress.admit(first, 0, 1_000_000, 0.0).accepted
    # egress_lossless_profile: dynamic_th th < 0, 2^th of the free shared bytes, which the
    # ingress frame took its bytes from
    th = int(data["BUFFER_PROFILE"]["egress_lossless_profile"]["dynamic_th"])
    assert th < 0 and queues[lossless].threshold() == (BOTH_POOL_SIZE - 1_000_000) >> -th


def test_the_egress_profile_list_reserves_per_port():
    """The traditional config: egress_lossy_profile in the port's egress list reserves its
    size of egress_lossy_pool for each port: its lossy queues (q_lossy_profile, nothing
    reserved of their own) fill that first, then the pool's shared bytes."""
    data = traditional()
    reserve = int(data["BUFFER_PROFILE"]["egress_lossy_profile"]["size"])
    assert data["BUFFER_PROFILE"]["q_lossy_profile"]["size"] == "0" and reserve > 5000
    config = parse(data, "trad/config_db.json")
    port, neighbour = TRADITIONAL_PORTS
    pools = egress_pools(config.qos)
    queues = queue_buffers(config.qos, port, pools)
    lossy = pools["egress_lossy_pool"]
    a, b, c = LOSSY_QUEUES[0], LOSSY_QUEUES[-1], LOSSY_QUEUES[1]
    assert queues[a].port_pool is queues[b].port_pool  # one share per port and pool
    assert queues[a].take(5000) and queues[b].take(reserve - 5000) and lossy.used == 0
    assert queues[c].take(1000) and lossy.used == 1000
    assert queues[a].port_pool.as_dict() == {"profile": "egress_lossy_profile",
                                             "reserved": reserve, "reserved_used": reserve,
                                             "shared": 1000}
    other = queue_buffers(config.qos, neighbour, pools)[a]
    assert other.take(reserve) and lossy.used == 1000  # the neighbour's own reservation
    queues[a].release(5000)
    assert queues[a].port_pool.reserved_used == reserve - 5000 and lossy.used == 1000


def test_the_ingress_profile_list_reserves_and_bounds_per_port():
    """A port's ingress share: 3000 bytes reserved for all its PGs, then at most 4000 shared
    bytes (static_th) for the port, whatever each PG's own threshold allows."""
    qos = Qos(
        port_qos={P0: PortQos()},
        buffer_pools={"pool": BufferPool("pool", "ingress", "dynamic", 100_000)},
        buffer_profiles={"pg": BufferProfile("pg", "pool", 0, dynamic_th=0),
                         "port": BufferProfile("port", "pool", 3000, static_th=4000)},
        buffer_pg={(P0, 0): "pg", (P0, 1): "pg"}, port_ingress_profiles={P0: ("port",)})
    ingress = IngressBuffers.from_config(qos, [P0])
    share = ingress.shares[P0]["pool"]
    for _ in range(3):
        assert ingress.admit(P0, 0, 1000, 0.0).accepted
    assert (share.reserved_used, ingress.pools["pool"].used) == (3000, 0)
    for _ in range(4):
        assert ingress.admit(P0, 1, 1000, 0.0).accepted
    assert (share.shared, ingress.pools["pool"].used) == (4000, 4000)
    assert ingress.admit(P0, 0, 1000, 0.0).verdict == DROP_LOSSY_LIMIT  # the port's limit
    ingress.release(P0, 1, 1000, 0.0)
    assert ingress.admit(P0, 0, 1000, 0.0).accepted and share.shared == 4000
    assert ingress.pg(P0, 0).as_dict(0.0)["port_reserved_used"] == 3000


def leaf1_with_a_both_pool() -> Switch:
    """leaf1 with one 8000-byte ``both`` pool (and a shared headroom pool) for its lossless
    PG 3 and every egress queue, its lossy PGs in an ingress pool of their own: 5 queued
    lossy frames leave room for exactly 2 lossless ones before XOFF (alpha 1, nothing
    reserved)."""
    data = json.loads(LEAF1_JSON.read_text())
    data["BUFFER_POOL"] = {
        "both_pool": {"type": "both", "mode": "dynamic", "size": "8000", "xoff": "100000"},
        "lossy_in": {"type": "ingress", "mode": "dynamic", "size": "10000000"}}
    data["BUFFER_PROFILE"] = {
        "ingress_lossy_profile": {"pool": "lossy_in", "size": "0", "dynamic_th": "3"},
        "pg_lossless_100000_40m_profile": {"pool": "both_pool", "size": "0", "xoff": "20000",
                                           "dynamic_th": "0"},
        "egress_lossless_profile": {"pool": "both_pool", "size": "0", "static_th": "0"},
        "egress_lossy_profile": {"pool": "both_pool", "size": "0", "dynamic_th": "3"}}
    return learned(Switch(parse(data, str(LEAF1_JSON)), time_scale=S, rand=lambda: 0.5))


def test_egress_bytes_leaving_a_both_pool_resume_a_pg_in_xoff():
    sw = leaf1_with_a_both_pool()
    sw.receive(H1_PORT, pfc_frame(mac_bytes(H1), {3: MAX_QUANTA}), 0.0)  # h1 holds queue 3
    for _ in range(6):  # the first cuts through the idle port, 5 wait in queue 0
        assert pfc_quanta(sw.receive(H2_PORT, udp_frame(0), 0.0), H2_PORT) == []
    assert pfc_quanta(sw.receive(H2_PORT, udp_frame(26), 0.0), H2_PORT) == []
    assert pfc_quanta(sw.receive(H2_PORT, udp_frame(26), 0.0), H2_PORT) == [{3: MAX_QUANTA}]
    counters = sw.counters()
    assert counters["pools"]["both_pool"] == counters["egress_pools"]["both_pool"]
    assert counters["pools"]["both_pool"]["used"] == 5 * FRAME + 2 * FRAME  # each byte once
    # queue 3 stays paused: only lossy frames leave, and their bytes raise PG 3's threshold
    frame = sw.dequeue(H1_PORT, sw.next_send_time(H1_PORT))
    assert not frame.startswith(PFC_MAC)
    assert pfc_quanta(sw.take_control(), H2_PORT) == [{3: 0}]
    assert not sw.counters()["ports"][H2_PORT]["pgs"]["3"]["xoff"]
