"""sonic-mgmt's thresholds derived from a config (checks.sonic_mgmt.derive) agree with the
switch model itself, packet by packet: over a seeded sweep of small configs (dynamic_th -2..3,
static_th, shared headroom pool on and off, port reservations, ``both`` pools, frames 64..9216
bytes) run through fabric.model.buffers and egress_buffers, and over named cases run through
a whole Switch on leaf1's config. sonic-mgmt's own formulas (checks.sonic_mgmt.upstream) are
held to the reference's worked example."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass

import pytest

from rocelab.checks.sonic_mgmt import derive
from rocelab.checks.sonic_mgmt.upstream import (cell_occupancy, mellanox_params,
                                                mellanox_shp_trig_pfc, nvidia_static_th,
                                                pfc_xoff_first_stage, static_th)
from rocelab.checks.sonic_mgmt.fill import pg_limits
from rocelab.fabric.config import (BufferPool, BufferProfile, Port, PortQos, Qos,
                                   SwitchConfig)
from rocelab.fabric.config_load import parse
from rocelab.fabric.model import Switch
from rocelab.fabric.model.buffers import IngressBuffers
from rocelab.fabric.model.egress_buffers import egress_pools, queue_buffers
from tests.unit.test_forwarding import LEAF1_JSON
from tests.unit.test_lossless import H1_PORT, H2_PORT, S, learned, pfc_quanta, udp_frame

SRC, DST = "Ethernet0", "Ethernet8"
SOURCES = ("Ethernet0", "Ethernet4", "Ethernet12")
PG = QUEUE = 3  # the stream's PG and queue in the sweep (lossless when PFC is on for it)
FRAMES = (64, 65, 128, 300, 1000, 1024, 1500, 4096, 9216)


# --- configs of our own ----------------------------------------------------------------------

def threshold(rng: random.Random, pool: int) -> dict:
    """dynamic_th -2..3, or static_th: 0 (the pool), below the pool, or past it."""
    if rng.random() < 0.7:
        return {"dynamic_th": rng.randint(-2, 3)}
    return {"static_th": rng.choice([0, rng.randrange(1, pool), rng.randrange(pool, 2 * pool)])}


def sweep_config(seed: int) -> tuple[SwitchConfig, int]:
    """A switch with one stream's worth of buffer config, every part drawn from ``seed``;
    and the frame size."""
    rng = random.Random(seed)
    lossless = rng.random() < 0.6
    size = rng.randrange(20_000, 300_000)
    both = rng.random() < 0.3
    shp = rng.choice([0, 0, rng.randrange(1, 60_000)])
    pools = {"in": BufferPool("in", "both" if both else "ingress", "dynamic", size, shp)}
    xoff = rng.randrange(0, 40_000)
    xon = rng.choice([None, rng.randrange(0, 30_000)])
    xon_offset = rng.choice([None, 0, rng.randrange(0, 20_000), rng.randrange(0, 400_000)])
    profiles = {"pg": BufferProfile("pg", "in", rng.randrange(0, 40_000), xon=xon, xoff=xoff,
                                    xon_offset=xon_offset, **threshold(rng, size))}
    buffer_pg = {} if not lossless and rng.random() < 0.2 else {(SRC, PG): "pg"}
    queue_pool = "in" if both and rng.random() < 0.7 else "out"
    if queue_pool == "out":
        out = rng.randrange(20_000, 300_000) if rng.random() < 0.5 else size + 60_000
        pools["out"] = BufferPool("out", "egress", "dynamic", out)
    buffer_queue = {}
    if rng.random() < 0.9:
        # lossless queues mostly as SONiC ships them: the whole pool, which never drops
        limit = ({"static_th": 0} if lossless and rng.random() < 0.7
                 else threshold(rng, pools[queue_pool].size))
        profiles["q"] = BufferProfile("q", queue_pool, rng.randrange(0, 20_000), **limit)
        buffer_queue[(DST, QUEUE)] = "q"
    ingress_lists, egress_lists = {}, {}
    if rng.random() < 0.4:
        profiles["port_in"] = BufferProfile("port_in", "in", rng.randrange(0, 20_000),
                                            **threshold(rng, size))
        ingress_lists[SRC] = ("port_in",)
    if rng.random() < 0.3:
        profiles["port_out"] = BufferProfile("port_out", queue_pool, rng.randrange(0, 20_000),
                                             **threshold(rng, pools[queue_pool].size))
        egress_lists[DST] = ("port_out",)
    qos = Qos(port_qos={SRC: PortQos(pfc_enable=frozenset({PG} if lossless else ())),
                        DST: PortQos()},
              buffer_pools=pools, buffer_profiles=profiles, buffer_pg=buffer_pg,
              buffer_queue=buffer_queue, port_ingress_profiles=ingress_lists,
              port_egress_profiles=egress_lists)
    frame = rng.choice([*FRAMES, rng.randrange(64, 9217)])
    return SwitchConfig(f"sweep-{seed}.json", "sw", "02:00:00:00:00:01",
                        ports={p: Port(p, 100_000, 9100) for p in (SRC, DST, *SOURCES)},
                        qos=qos), frame


# --- the model, frame by frame ---------------------------------------------------------------

@dataclass
class Model:
    """IngressBuffers and the dst queue's QueueBuffer driven as the switch drives them with
    the dst's TX disabled: a frame admitted at ingress joins the queue or, dropped there,
    gives its ingress bytes back."""

    config: SwitchConfig

    def __post_init__(self) -> None:
        qos = self.config.qos
        self.ingress = IngressBuffers.from_config(qos, self.config.ports)
        self.queues = queue_buffers(qos, DST, egress_pools(qos, self.ingress.pools))
        self.queued: dict[int, int] = {}

    def send(self, port: str, pg: int, queue: int, frame: int) -> tuple[bool, str | None]:
        """(XOFF sent, where it was dropped: "ingress", "egress" or None)."""
        buffer = self.ingress.pg(port, pg)
        admission = buffer.admit(frame, 0.0)
        if not admission.accepted:
            return admission.xoff, "ingress"
        q = self.queues[queue]
        if q is not None and not q.take(frame, q.pool is buffer.pool):
            self.ingress.release(port, pg, frame, 0.0)
            return admission.xoff, "egress"
        self.queued[queue] = self.queued.get(queue, 0) + 1
        return admission.xoff, None

    def drain_until_xon(self, port: str, pg: int, queue: int, frame: int) -> int | None:
        """Frames that leave the queue before the PG resumes (None: it never does)."""
        buffer = self.ingress.pg(port, pg)
        q = self.queues[queue]
        for left in range(1, self.queued.get(queue, 0) + 1):
            if q is not None:
                q.release(frame, q.pool is buffer.pool)
            if buffer in self.ingress.release(port, pg, frame, 0.0):
                return left
        return None

    def marks(self, frame: int) -> tuple:
        pg = self.ingress.pg(SRC, PG)
        q = self.queues[QUEUE]
        return (pg.shared, pg.headroom_used, self.queued.get(QUEUE, 0) * frame,
                None if q is None else q.shared, pg.pool.used, pg.pool.headroom_used,
                None if q is None else q.pool.used)


def derived_marks(w: derive.Watermarks) -> tuple:
    return (w.pg_shared.value, w.pg_headroom.value, w.queue.value,
            None if w.queue_shared is None else w.queue_shared.value, w.pool.value,
            w.headroom_pool.value, None if w.egress_pool is None else w.egress_pool.value)


def first_events(model: Model, frame: int, until: int, watch: set[int]
                 ) -> tuple[int | None, int | None, dict[int, tuple]]:
    """(first XOFF frame, first dropped frame, watermarks at each frame of ``watch``)."""
    xoff_at = drop_at = None
    seen = {}
    for k in range(1, until + 1):
        xoff, dropped = model.send(SRC, PG, QUEUE, frame)
        if xoff and xoff_at is None:
            xoff_at = k
        if dropped and drop_at is None:
            drop_at = k
        if k in watch:
            seen[k] = model.marks(frame)
    return xoff_at, drop_at, seen


NOT_DERIVED = "not derived"


def derive_stream(config: SwitchConfig, frame: int) -> dict | str:
    """Everything derive says of the sweep's stream, or NOT_DERIVED when it refuses."""
    args = (config, SRC, PG, frame, DST, QUEUE)
    try:
        if pg_limits(config, SRC, PG).lossless:
            return {"pfc": derive.trig_pfc(*args).value, "drop": derive.trig_ingr_drp(*args).value}
        return {"pfc": None, "drop": derive.trig_egr_drp(*args).value}
    except ValueError as e:
        assert NOT_DERIVED in str(e) and config.path in str(e), e
        return NOT_DERIVED


@pytest.mark.parametrize("chunk", range(4))
def test_derived_thresholds_and_watermarks_are_the_models_packet_by_packet(chunk):
    derived_count = 0
    for seed in range(chunk * 50, chunk * 50 + 50):
        config, frame = sweep_config(seed)
        expected = derive_stream(config, frame)
        if expected == NOT_DERIVED:
            continue
        derived_count += 1
        rng = random.Random(seed)
        drop = expected["drop"]
        watch = {1, drop - 1, drop, drop + 2, rng.randrange(1, drop + 3)}
        if expected["pfc"] is not None:
            watch |= {expected["pfc"] - 1, expected["pfc"]}
        watch.discard(0)
        xoff_at, drop_at, seen = first_events(Model(config), frame, max(watch), watch)
        assert (xoff_at, drop_at) == (expected["pfc"], drop), seed
        for n, marks in seen.items():
            w = derive.watermarks(config, SRC, PG, frame, DST, QUEUE, n)
            assert derived_marks(w) == marks, (seed, n)
    assert derived_count >= 30  # refused: lossless frames a small egress queue drops


@pytest.mark.parametrize("chunk", range(2))
def test_xon_comes_after_exactly_the_derived_drain(chunk):
    checked = 0
    for seed in range(chunk * 100, chunk * 100 + 100):
        config, frame = sweep_config(seed)
        expected = derive_stream(config, frame)
        if expected == NOT_DERIVED or expected["pfc"] is None:
            continue
        # (where the XOFF frame itself is dropped, right after it: the PG is paused all the same)
        sent = expected["pfc"] if expected["pfc"] == expected["drop"] else \
            random.Random(seed).randrange(expected["pfc"], expected["drop"] + 3)
        model = Model(config)
        for _ in range(sent):
            model.send(SRC, PG, QUEUE, frame)
        resumed_after = model.drain_until_xon(SRC, PG, QUEUE, frame)
        drained = derive.xon_drain(config, SRC, PG, frame, DST, QUEUE, sent).value
        assert resumed_after == drained, seed
        checked += 1
    assert checked >= 35


def plan_config(seed: int) -> tuple[SwitchConfig, int]:
    """Lossless PGs 3 and 4 on three source ports in one pool, with or without a shared
    headroom pool and port reservations; queues 3 and 4 of DST not limited, or (a pool of
    type ``both``, VoQ-like) limited in the same pool."""
    rng = random.Random(seed)
    size = rng.randrange(40_000, 400_000)
    shp = rng.choice([0, rng.randrange(1, 30_000), rng.randrange(30_000, 120_000)])
    both = rng.random() < 0.3
    xoff = rng.randrange(0, 30_000)
    profiles = {"pg": BufferProfile("pg", "in", rng.randrange(0, 30_000), xoff=xoff,
                                    **threshold(rng, size))}
    lists = {}
    if rng.random() < 0.5:
        profiles["port"] = BufferProfile("port", "in", rng.randrange(0, 30_000),
                                         **threshold(rng, size))
        lists = {port: ("port",) for port in SOURCES}
    queues = {}
    if both:
        profiles["q"] = BufferProfile("q", "in", rng.randrange(0, 5_000),
                                      **rng.choice([{"static_th": 0}, {"dynamic_th": 3}]))
        queues = {(DST, q): "q" for q in (3, 4)}
    qos = Qos(port_qos={p: PortQos(pfc_enable=frozenset({3, 4})) for p in SOURCES},
              buffer_pools={"in": BufferPool("in", "both" if both else "ingress", "dynamic",
                                             size, shp)},
              buffer_profiles=profiles,
              buffer_pg={(p, pg): "pg" for p in SOURCES for pg in (3, 4)},
              buffer_queue=queues, port_ingress_profiles=lists)
    return SwitchConfig(f"plan-{seed}.json", "sw", "02:00:00:00:00:01",
                        ports={p: Port(p, 100_000, 9100) for p in (*SOURCES, DST)},
                        qos=qos), rng.choice(FRAMES)


@pytest.mark.parametrize("seed", range(60))
def test_the_headroom_pool_plan_is_the_models(seed):
    config, frame = plan_config(seed)
    sources = [(port, pg, pg) for port in SOURCES for pg in (3, 4)]
    try:
        plan = derive.headroom_pool_plan(config, sources, frame, DST)
    except ValueError as e:  # a VoQ-like queue that might drop lossless frames
        assert NOT_DERIVED in str(e) and config.qos.buffer_queue, e
        return
    model = Model(config)
    for (port, pg, queue), expected in zip(sources, plan):
        xoff_at = drop_at = None
        k = 0
        while drop_at is None:
            k += 1
            xoff, dropped = model.send(port, pg, queue, frame)
            if xoff:
                xoff_at = k
            if dropped:
                assert dropped == "ingress"
                drop_at = k
        buffer = model.ingress.pg(port, pg)
        assert (xoff_at, drop_at) == (expected.trig_pfc.value, expected.drop.value), (port, pg)
        assert expected.hdrm_full.value == max(drop_at - xoff_at - 1, 0)
        assert expected.headroom_pool.value == buffer.pool.headroom_used
    if not config.qos.port_ingress_profiles:  # (a port's threshold binds its PGs together)
        triggers = [p.trig_pfc.value for p in plan]
        assert triggers == sorted(triggers, reverse=True)  # the free pool only shrinks


# --- named cases through a whole Switch (leaf1's config, its pools shrunk) -------------------

def leaf1(**changes: dict) -> SwitchConfig:
    """leaf1's config_db.json with some BUFFER_POOL / BUFFER_PROFILE fields changed."""
    data = json.loads(LEAF1_JSON.read_text())
    for key, fields in changes.items():
        table, name = key.split("|")
        data[table][name].update({k: str(v) for k, v in fields.items()})
    return parse(data, str(LEAF1_JSON))


def stopped_switch(config: SwitchConfig) -> Switch:
    """The switch with h1's port (Ethernet8) TX disabled at time 0, as sonic-mgmt's tests
    disable it."""
    sw = learned(Switch(config, time_scale=S))
    sw.set_tx_enabled(H1_PORT, False, 0.0)
    return sw


def stream_events(sw: Switch, dscp: int, frame: int, count: int) -> tuple[int | None, dict]:
    """Send ``count`` frames h2 -> h1; (the first that sent XOFF out of h2's port, counters)."""
    xoff_at = None
    for k in range(1, count + 1):
        out = sw.receive(H2_PORT, udp_frame(dscp, size=frame), 0.0)
        if xoff_at is None and any(q for q in pfc_quanta(out, H2_PORT) if any(q.values())):
            xoff_at = k
    return xoff_at, sw.counters()["ports"]


SHRUNK = {"BUFFER_POOL|ingress_lossless_pool": {"size": 262144},
          "BUFFER_POOL|egress_lossy_pool": {"size": 100_000}}


@pytest.mark.parametrize("frame", [64, 1024, 1500, 9000])
@pytest.mark.parametrize("shp", [1720320, 20_000, 0])
def test_leaf1_lossless_pfc_and_drop_in_the_switch(frame, shp):
    """DSCP 26 -> PG 3, queue 3 on leaf1 (from the config, as the switch maps it): XOFF at
    exactly trig_pfc, nothing dropped before trig_ingr_drp, which is dropped."""
    config = leaf1(**{**SHRUNK, "BUFFER_POOL|ingress_lossless_pool": {"size": 262144,
                                                                       "xoff": shp}})
    sw = stopped_switch(config)
    dscp = next(d for d, tc in config.qos.dscp_to_tc["AZURE"].items() if tc == PG)
    _, pg, queue = sw.classify(H2_PORT, udp_frame(dscp), H1_PORT)
    args = (config, H2_PORT, pg, frame, H1_PORT, queue)
    pfc, drop = derive.trig_pfc(*args).value, derive.trig_ingr_drp(*args).value
    xoff_at, ports = stream_events(sw, dscp, frame, drop - 1)
    assert xoff_at == pfc and ports[H2_PORT]["pgs"][str(pg)]["drops"] == 0
    _, ports = stream_events(sw, dscp, frame, 1)
    assert ports[H2_PORT]["pgs"][str(pg)]["drops"] == 1
    marks = derive.watermarks(*args, drop)
    assert ports[H1_PORT]["queues"][str(queue)]["depth_bytes"] == marks.queue.value
    assert ports[H2_PORT]["pgs"][str(pg)]["headroom_peak"] == marks.pg_headroom.value


@pytest.mark.parametrize("pool, where", [(50_000, "lossy_limit"), (100_000_000, "queue_limit")])
def test_leaf1_lossy_first_drop_in_the_switch(pool, where):
    """DSCP 0 -> PG 0, queue 0: the first drop is the ingress PG's (a small ingress pool) or
    the egress queue's, as derived."""
    config = leaf1(**{**SHRUNK, "BUFFER_POOL|ingress_lossless_pool": {"size": pool}})
    sw = stopped_switch(config)
    _, pg, queue = sw.classify(H2_PORT, udp_frame(0), H1_PORT)
    first = derive.trig_egr_drp(config, H2_PORT, pg, 1024, H1_PORT, queue).value
    _, ports = stream_events(sw, 0, 1024, first - 1)
    assert ports[H2_PORT]["pgs"][str(pg)]["drops"] == 0 and not ports[H1_PORT]["egress_drops"]
    _, ports = stream_events(sw, 0, 1024, 1)
    drops = ports[H2_PORT]["drops"] | ports[H1_PORT]["egress_drops"]
    assert drops == {where: 1}


def test_leaf1_xon_after_the_derived_drain_in_the_switch():
    config = leaf1(**SHRUNK)
    sw = stopped_switch(config)
    args = (config, H2_PORT, PG, 1024, H1_PORT, QUEUE)
    sent = derive.trig_pfc(*args).value + 20
    stream_events(sw, 26, 1024, sent)
    sw.set_tx_enabled(H1_PORT, True, 0.0)
    drained, now = 0, 0.0
    while True:
        now = sw.next_send_time(H1_PORT)
        assert sw.dequeue(H1_PORT, now) is not None
        drained += 1
        if any(q == {PG: 0} for q in pfc_quanta(sw.take_control(), H2_PORT)):
            break
    assert drained == derive.xon_drain(*args, sent).value


def test_one_frame_less_of_xoff_drops_exactly_one_frame_sooner():
    """The negative control: trig_ingr_drp follows the profile's xoff, frame for frame."""
    frame = 1024
    profile = "BUFFER_PROFILE|pg_lossless_100000_40m_profile"
    base = leaf1(**SHRUNK)
    xoff = base.qos.buffer_profiles["pg_lossless_100000_40m_profile"].xoff
    smaller = leaf1(**SHRUNK, **{profile: {"xoff": xoff - frame}})
    drops = []
    for config in (base, smaller):
        args = (config, H2_PORT, PG, frame, H1_PORT, QUEUE)
        drop = derive.trig_ingr_drp(*args).value
        _, ports = stream_events(stopped_switch(config), 26, frame, drop)
        assert ports[H2_PORT]["pgs"][str(PG)]["drops"] == 1
        drops.append(drop)
    assert drops[1] == drops[0] - 1
    assert derive.trig_pfc(smaller, H2_PORT, PG, frame, H1_PORT, QUEUE).value == \
        derive.trig_pfc(base, H2_PORT, PG, frame, H1_PORT, QUEUE).value


# --- derivations and refusals ----------------------------------------------------------------

def test_the_steps_name_the_config_values_they_use():
    config = leaf1(**SHRUNK)
    steps = derive.trig_pfc(config, H2_PORT, PG, 1024, H1_PORT, QUEUE).steps
    text = "\n".join(steps)
    profile = config.qos.buffer_profiles[config.qos.buffer_pg[(H2_PORT, PG)]]
    assert f"BUFFER_PROFILE|{profile.name} dynamic_th {profile.dynamic_th}" in text
    assert f"BUFFER_POOL|{profile.pool} xoff" in text and "static_th = size" in text
    assert steps[-1].startswith("-> pkts_num_trig_pfc ")


@pytest.mark.parametrize("call, message", [
    (lambda c: derive.trig_pfc(c, H2_PORT, 0, 1024, H1_PORT, 0), "lossy"),
    (lambda c: derive.trig_egr_drp(c, H2_PORT, PG, 1024, H1_PORT, QUEUE), "lossless"),
    (lambda c: derive.trig_pfc(c, "Ethernet99", PG, 1024, H1_PORT, QUEUE), "PORT|Ethernet99"),
    (lambda c: derive.trig_pfc(c, H2_PORT, PG, 0, H1_PORT, QUEUE), "frame size"),
    (lambda c: derive.xon_drain(c, H2_PORT, PG, 1024, H1_PORT, QUEUE, 3), "no XON"),
])
def test_what_is_not_derived_is_refused_in_one_line(call, message):
    config = leaf1(**SHRUNK)
    with pytest.raises(ValueError, match=message) as e:
        call(config)
    assert str(e.value).startswith(config.path) and "\n" not in str(e.value)


def test_a_pg_no_ingress_pool_limits_is_refused():
    config, _ = sweep_config(0)
    bare = SwitchConfig("bare.json", "sw", "02:00:00:00:00:01", ports=config.ports)
    with pytest.raises(ValueError, match=r"^bare.json: BUFFER_PG\|Ethernet0\|3: no ingress "):
        derive.trig_egr_drp(bare, SRC, PG, 1024, DST, QUEUE)


def test_a_lossless_stream_a_small_egress_queue_would_drop_is_refused():
    config = leaf1(**SHRUNK, **{"BUFFER_POOL|egress_lossless_pool": {"size": 50_000}})
    with pytest.raises(ValueError, match="BUFFER_QUEUE.*may drop lossless frames.*not derived"):
        derive.trig_pfc(config, H2_PORT, PG, 1024, H1_PORT, QUEUE)


# --- sonic-mgmt's own formulas: the reference's worked example (ACS-MSN2700, spc1) -----------

def test_static_th_of_qos_sai_base():
    assert static_th(50176, 3302912, 0).value == 1701632
    assert static_th(0, 1000, -2).value == 200  # alpha 1/4: a fifth of the pool
    assert static_th(0, 900, 3).value == 800


def test_the_mellanox_generator_on_the_worked_example():
    p = mellanox_params("spc1", 100000, size=50176, xon=19456, xoff=30720,
                        lossless_static_th=static_th(50176, 3302912, 0).value,
                        ingress_lossy_static_th=1000 * 96, egress_lossy_static_th=900 * 96,
                        shared_headroom_pool=False)
    assert (p.ingress_lossless_size, p.hysteresis.value) == (17203, 0)
    assert (p.trig_pfc.value, p.trig_ingr_drp.value, p.dismiss_pfc.value) == (17406, 17631, 17204)
    assert p.trig_egr_drp.value == 901  # the smaller of the lossy limits, plus one
    assert "headroom_overhead 95" in p.trig_ingr_drp.steps[-1]
    occupancy = cell_occupancy(300, "spc1")
    assert occupancy == 4
    assert pfc_xoff_first_stage(p.trig_pfc.value, occupancy, leak_out=0, margin=4) == 4346


def test_the_mellanox_generator_with_a_shared_headroom_pool_and_spc3_at_400g():
    p = mellanox_params("spc3", 400000, size=19456, xon=19456, xoff=30720,
                        lossless_static_th=1_000_000, ingress_lossy_static_th=144,
                        egress_lossy_static_th=288, shared_headroom_pool=True, dual_tor=True)
    xon, xoff = 136, 214  # ceil(19456 / 144), ceil(30720 / 144)
    ils = 6945 - xon  # ceil(1e6 / 144) - xon
    assert (p.trig_pfc.value, p.extra_margin) == (ils + xon, 16)
    assert p.trig_ingr_drp.value == ils + xon + xoff + 3 * xoff  # + xoff, + 2 xoff dual ToR
    assert p.trig_egr_drp.value == 2
    assert mellanox_shp_trig_pfc("spc3", p, 19456, ports=2, pgs_per_port=2) == [
        ils + xon, ils // 2 + xon, ils // 4 + xon, ils // 8 + xon]


def test_the_spc4_headroom_pool_triggers_see_the_pool_earlier_ports_left():
    p = mellanox_params("spc4", 100000, size=19200, xon=19200, xoff=19200,
                        lossless_static_th=96_000, ingress_lossy_static_th=192,
                        egress_lossy_static_th=192, shared_headroom_pool=True)
    got = mellanox_shp_trig_pfc("spc4", p, 19200, ports=2, pgs_per_port=2, pg_alpha=1,
                                port_alpha=1, pool_size=192 * 3000)
    # per port: pool P, used u: ceil((P - u - u) / 3); then P shrinks by the port's use:
    # 3000 -> 1000, 334; 1666 -> 556, 185 cells; plus xon 100 cells
    assert got == [1100, 434, 656, 285]


def test_the_nvidia_two_level_threshold():
    # a_pg = a_port = 1: scale 1/3; max(size, port size x 1/2)
    assert nvidia_static_th(1000, 30_000, 0, 0, 4000).value == 10_000 + 2000
    assert nvidia_static_th(5000, 30_000, 0, 0, 4000).value == 10_000 + 5000
    assert nvidia_static_th(0, 65_000, 7, 7, 0, pg_unlimited=True).value == 64_000
