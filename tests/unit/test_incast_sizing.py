"""checks.incast.Incast sizing: what the congestion checks write, from the congested PG's
thresholds (checks.thresholds), held against the switch model's own buffers (no lab
needed, or a simulated one)."""
from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import pytest

from rocelab.checks import congestion as cg
from rocelab.checks import incast as ic
from rocelab.checks import thresholds as th
from rocelab.checks.deadlock import live_scale
from rocelab.fabric.config_load import load as load_config
from rocelab.fabric.model.buffers import IngressBuffers
from rocelab.labs.records import Ping
from rocelab.labs.runtimes.sim import simulated
from rocelab.traffic import patterns
from tests.conftest import TOPOLOGIES, copy_lab

MTU = 4096
FRAME = 4200  # a RoCE frame of MTU 4096 on the wire, about
LEAF = TOPOLOGIES / "roce-v2-leafspine" / "configs" / "leaf1" / "config_db.json"
PORTS = ["Ethernet0", "Ethernet4", "Ethernet12"]  # leaf1's ports other than h1's

# Buffers shaped as SONiC renders them for a VoQ line card (values ours): one pool of type
# both, gigabytes deep, with a shared headroom pool, and a lossless PG profile of the kind
# buffermgrd derives from a pg_profile_lookup.ini row (size 0, xon, xoff, xon_offset).
VOQ_POOL = {"ingress_lossless_pool": {"size": "8000000000", "type": "both", "mode": "dynamic",
                                      "xoff": "1200000000"}}
VOQ_PROFILES = {
    "ingress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0", "xon_offset": "0",
                              "dynamic_th": "0"},
    "egress_lossless_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                "dynamic_th": "-1"},
    "egress_lossy_profile": {"pool": "ingress_lossless_pool", "size": "0", "dynamic_th": "-4"},
    "pg_lossless_100000_300m_profile": {"pool": "ingress_lossless_pool", "size": "0",
                                        "xon": "3072", "xoff": "120000", "dynamic_th": "-6",
                                        "xon_offset": "400000"}}


def voq(config: dict) -> dict:
    """A config_db.json with the VoQ line card's buffers in place of its own."""
    config["BUFFER_POOL"] = VOQ_POOL
    config["BUFFER_PROFILE"] = VOQ_PROFILES
    for entry in config["BUFFER_PG"].values():
        if entry["profile"].startswith("pg_lossless"):
            entry["profile"] = "pg_lossless_100000_300m_profile"
    return config


def voq_config(tmp_path: Path):
    path = tmp_path / "config_db.json"
    path.write_text(json.dumps(voq(json.loads(LEAF.read_text()))))
    return load_config(path)


def xoff_reached(config, ports: list[str], pg: int, shares: list[float], total: int) -> bool:
    """Bring ``total`` bytes into ``pg`` of ``ports`` in the model's buffers, frame by frame,
    each port taking its share, nothing leaving: whether any of them sent XOFF."""
    buffers = IngressBuffers.from_config(config.qos, ports)
    sent = [0.0] * len(ports)
    for _ in range(total // FRAME):
        i = min(range(len(ports)), key=lambda k: sent[k] / shares[k])
        sent[i] += FRAME
        if buffers.admit(ports[i], pg, FRAME, 0.0).xoff:
            return True
    return False


@pytest.mark.parametrize("make", ["leaf", "voq"])
def test_n_pgs_filling_together_stop_at_alpha_pool_over_one_plus_n_alpha(make, tmp_path):
    config = load_config(LEAF) if make == "leaf" else voq_config(tmp_path)
    profile = config.qos.buffer_profiles[config.qos.buffer_pg[PORTS[0], 3]]
    pool = config.qos.buffer_pools[profile.pool]
    for n in (1, 2, 3):
        buffers = IngressBuffers.from_config(config.qos, PORTS[:n])
        pgs = [buffers.pg(p, 3) for p in PORTS[:n]]
        while not any(pg.xoff for pg in pgs):
            for pg in pgs:
                pg.admit(FRAME, 0.0)
        assert max(pg.shared for pg in pgs) == pytest.approx(
            th.shared_limit(profile, pool, n), abs=n * FRAME)


@pytest.mark.parametrize("make", ["leaf", "voq"])
@pytest.mark.parametrize("shares", [[1, 1], [4, 1], [1, 1, 1], [6, 3, 1], [1, 1, 1, 1]])
def test_whatever_the_spread_what_n_pgs_hold_at_their_limits_brings_one_to_xoff(
        make, shares, tmp_path):
    config = load_config(LEAF) if make == "leaf" else voq_config(tmp_path)
    ports = ["Ethernet0", "Ethernet4", "Ethernet12", "Ethernet8"][:len(shares)]
    fill = th.ingress_fill(config, ports, 3, len(ports))
    assert xoff_reached(config, ports, 3, shares, fill)


@pytest.mark.parametrize("make", ["leaf", "voq"])
def test_the_fewest_inputs_are_the_case_to_size_for(make, tmp_path):
    """k ports bring (k - 1) senders' volume at least; what k PGs hold at their limits
    grows slower than k - 1, so sizing for the fewest ports covers any more."""
    config = load_config(LEAF) if make == "leaf" else voq_config(tmp_path)
    per_sender = [th.ingress_fill(config, PORTS, 3, k) / (k - 1) for k in range(2, 10)]
    assert per_sender == sorted(per_sender, reverse=True)


def test_the_fewest_inputs_are_the_local_senders_own_and_one_uplink():
    up = (("eth1", "spine1", "eth1"), ("eth2", "spine2", "eth1"), ("eth4", "h2", "eth1"),
          ("eth5", "h5", "eth1"))
    assert ic.fewest_inputs(("h2", "h3", "h4"), up) == 2  # h2's own, one uplink for both
    assert ic.fewest_inputs(("h2", "h5", "h3"), up) == 3
    assert ic.fewest_inputs(("h2", "h5"), up) == 2  # all local: their own ports
    assert ic.fewest_inputs(("h3", "h4"), up) == 2  # all remote: at least two to congest


def test_a_static_threshold_of_zero_is_the_whole_pool():
    config = load_config(LEAF)
    pool = config.qos.buffer_pools["egress_lossless_pool"]
    profile = config.qos.buffer_profiles["egress_lossless_profile"]  # static_th = pool
    zero = type(profile)(profile.name, profile.pool, 0, None, 0)
    assert th.shared_limit(zero, pool) == th.shared_limit(profile, pool) == pool.size
    assert th.shared_limit(profile, pool, 4) == pool.size / 4


def test_the_default_labs_incast_is_sized_by_its_lossless_pg():
    incast = ic.incast_of(simulated("roce-v2-leafspine"))
    config = load_config(LEAF)
    profile = config.qos.buffer_profiles["pg_lossless_100000_40m_profile"]
    pool = config.qos.buffer_pools[profile.pool].size
    assert incast.inputs == 2  # h2's port, and one uplink may carry h3 and h4
    # two PGs: reserved (size, the headroom being shared) + xoff each, and alpha 1: 2/3 pool
    assert incast.fill == round(2 * (profile.size + profile.xoff) + 2 * pool / 3)
    per_sender = incast.message_size(4, 2, MTU) * 4 * 2
    assert ic.OVERLOAD * incast.fill <= per_sender < ic.OVERLOAD * incast.fill + 8 * MTU
    assert incast.qps_to_overflow(4, MTU) == 4  # four QPs already hold it in flight
    # h2 on leaf1 writes its port's share; h3 and h4, behind the uplinks, one share together
    written = {}
    for f in incast.flows(4, 2, MTU):
        written[f.src] = written.get(f.src, 0) + f.size * f.count
    assert written["h2"] == per_sender
    assert written["h3"] == written["h4"] == incast.message_size(4, 4, MTU) * 4 * 2
    assert per_sender <= written["h3"] + written["h4"] < per_sender + 16 * MTU
    lab = simulated("roce-v2-leafspine")
    assert ic.time_limit(lab, incast, ic.flow_bits(cg.load(lab, incast).flows), 90.0) == 90.0


def incast_of(senders: tuple[str, ...], local: tuple[str, ...]) -> ic.Incast:
    """An incast into h1 on leaf1 from ``senders``, ``local`` of them wired to leaf1."""
    up = tuple((f"eth{i}", peer, "eth1") for i, peer in enumerate(("spine1", "spine2") + local))
    return ic.Incast("h1", senders, "leaf1", "Ethernet8", up, tuple(f"Ethernet{4 * i}"
                     for i in range(len(up))), 24, 3, 3, 3,
                     ic.fewest_inputs(senders, up), 1_000_000)


def test_each_local_sender_writes_a_share_and_the_remote_ones_one_share_together():
    incast = incast_of(("h2", "h3", "h5", "h6", "h7"), ("h2", "h3"))
    share = ic.OVERLOAD * 1_000_000 / 2  # three inputs: h2's port, h3's, one uplink
    assert incast.sender_bytes() == {"h2": share, "h3": share, "h5": share / 3,
                                     "h6": share / 3, "h7": share / 3}
    # a subset (a victim's sender left out) splits the share among the remote ones left
    assert incast.sender_bytes(senders=("h2", "h3", "h5", "h6")) == {
        "h2": share, "h3": share, "h5": share / 2, "h6": share / 2}


def test_with_no_sender_on_the_congested_switch_each_writes_a_share():
    """Any uplink may carry one sender alone: each must bring a share through it."""
    incast = incast_of(("h5", "h6", "h7"), ())
    assert incast.inputs == 2
    assert incast.sender_bytes() == dict.fromkeys(("h5", "h6", "h7"), ic.OVERLOAD * 1_000_000)


def overflows(config, ports: list[str], pg: int, loads: list[float]) -> bool:
    """Bring ``loads[i]`` bytes in by ``ports[i]``, every port a frame per slot (line rate)
    while the bottleneck sends one frame per slot, oldest first, and nothing pauses the
    senders: whether a PG dropped (past XOFF and through its headroom)."""
    buffers = IngressBuffers.from_config(config.qos, ports)
    left, queue = list(loads), deque()
    while any(b > 0 for b in left):
        for i, port in enumerate(ports):
            if left[i] > 0:
                left[i] -= FRAME
                if not buffers.admit(port, pg, FRAME, 0.0).accepted:
                    return True
                queue.append(port)
        buffers.release(queue.popleft(), pg, FRAME, 0.0)
    return False


@pytest.mark.parametrize("local, spread", [(1, [1]), (1, [1, 1]), (1, [9, 1]), (1, [3, 2, 1]),
                                           (2, [1]), (2, [1, 1]), (2, [9, 1])])
def test_remote_senders_writing_one_share_overflow_however_ecmp_spreads_them(local, spread):
    """The local senders' ports and one uplink are the fewest inputs; the remote senders'
    one share, spread over more uplinks in any proportion, still overflows the PG."""
    config = load_config(LEAF)
    ports = ["Ethernet0", "Ethernet4", "Ethernet12", "Ethernet8"]  # leaf1's four
    share = ic.OVERLOAD * th.ingress_fill(config, ports, 3, local + 1) / local
    loads = [share] * local + [share * w / sum(spread) for w in spread]
    assert overflows(config, ports[:len(loads)], 3, loads)


def test_a_fraction_of_a_share_from_the_remote_senders_may_not_overflow():
    """The negative control of the sizing above: one local sender's share and a quarter
    share from behind the uplinks leave the switch a backlog below its limits."""
    config = load_config(LEAF)
    ports = ["Ethernet0", "Ethernet4"]
    share = ic.OVERLOAD * th.ingress_fill(config, ports, 3, 2)
    assert not overflows(config, ports, 3, [share, share / 4])


def test_a_trace_samples_at_its_interval_unless_the_scenario_outlasts_a_plots_points():
    """The default lab's incasts keep the 2 ms wall interval on the congested switch; a
    scenario whose traffic takes longer than TRACE_POINTS of those at line rate is sampled
    TRACE_POINTS times there, PAUSE_POINTS times on the other switches."""
    lab = simulated("roce-v2-leafspine")
    incast = ic.incast_of(lab)
    for load in (cg.load(lab, incast), cg.ecn_load(lab, incast)):
        span = ic.line_span(lab, incast, ic.flow_bits(load.flows))
        assert span * 1e3 / cg.TRACE_INTERVAL_MS < cg.TRACE_POINTS
        assert cg.trace_interval_ms(span) == cg.TRACE_INTERVAL_MS
    long = cg.TRACE_POINTS * cg.TRACE_INTERVAL_MS / 1e3 * 7
    assert cg.trace_interval_ms(long) == pytest.approx(7 * cg.TRACE_INTERVAL_MS)
    assert cg.trace_interval_ms(long, cg.PAUSE_POINTS) == pytest.approx(
        7 * cg.TRACE_INTERVAL_MS * cg.TRACE_POINTS / cg.PAUSE_POINTS)
    assert cg.trace_interval_ms(None) == cg.TRACE_INTERVAL_MS


def test_a_lossy_class_is_sized_by_its_tighter_limit_the_egress_queue():
    incast = ic.incast_of(simulated("roce-v2-leafspine"))
    config = load_config(LEAF)
    queue = config.qos.buffer_profiles["egress_lossy_profile"]
    pool = config.qos.buffer_pools[queue.pool].size
    assert incast.class_fill(config, 0, 0) == round(queue.size + 8 / 9 * pool)  # alpha 8
    assert incast.class_fill(config, 0, 0) < th.ingress_fill(config, incast.ports(), 0, 2)


def test_a_voq_pool_of_type_both_is_judged_in_milliseconds(tmp_path):
    """The incast is sized from the lossless PG's threshold (1/64 of the free pool), not
    from the 8 GB pool: milliseconds at 100G, where 1.5 x the pool takes a second."""
    clab = copy_lab(tmp_path)
    for path in (clab.parent / "configs").glob("*/config_db.json"):
        path.write_text(json.dumps(voq(json.loads(path.read_text()))))
    lab = simulated(str(clab))
    incast = ic.incast_of(lab)
    line_bps = 100e9
    pool = int(VOQ_POOL["ingress_lossless_pool"]["size"])
    xoff = int(VOQ_PROFILES["pg_lossless_100000_300m_profile"]["xoff"])
    assert incast.fill == round(2 * xoff + 2 * pool / 64 / (1 + 2 / 64))
    assert ic.OVERLOAD * incast.fill * 8 / line_bps < 0.05
    assert ic.OVERLOAD * pool * 8 / line_bps > 0.5
    qps = incast.qps_to_overflow(4, MTU)
    per_qp = patterns.WINDOW * (MTU + patterns.FRAME_OVERHEAD)
    in_flight = sum(min(qps * per_qp, b) for b in incast.sender_bytes().values())
    assert qps > 4 and in_flight >= ic.OVERLOAD * incast.fill
    # its time limit grows with it: a fixed one (90 s live, 30 ms of fabric time) cut it
    flows = incast.flows(qps, 2, MTU)
    fabric_s = ic.flow_bits(flows) / line_bps
    scale = live_scale(lab.topology)  # S live: a wall second is 1 / S of fabric time
    assert ic.time_limit(lab, incast, ic.flow_bits(flows), 90.0) == pytest.approx(
        ic.TIME_LIMIT_X * fabric_s * scale)
    assert fabric_s > 90.0 / scale


def test_a_lab_whose_switch_has_no_ingress_pool_carries_no_incast(tmp_path):
    clab = copy_lab(tmp_path)
    for path in (clab.parent / "configs").glob("*/config_db.json"):
        config = json.loads(path.read_text())
        for table in ("BUFFER_POOL", "BUFFER_PROFILE", "BUFFER_PG", "BUFFER_QUEUE"):
            config.pop(table, None)
        path.write_text(json.dumps(config))
    with pytest.raises(ic.NoIncast, match="no ingress buffer pool"):
        ic.incast_of(simulated(str(clab)))


def test_the_incast_pings_toward_one_candidate_at_a_time(monkeypatch):
    """The receiver is found by pinging toward one host at a time, with the senders every
    pair's pings would give; a first host none reaches passes the choice to the next."""
    lab = simulated("roce-v2-leafspine")
    hosts = sorted(h.name for h in lab.topology.hosts)
    every = {(p.src, p.dst) for p in lab.ping_all() if p.ok}
    sent: list[tuple[str, str]] = []
    real = lab.ping

    def ping(src, dst, dst_ip, count=2, refuse=()):
        sent.append((src, dst))
        return Ping(src, dst, dst_ip, False, None) if dst in refuse else \
            real(src, dst, dst_ip, count)
    monkeypatch.setattr(lab, "ping", ping)
    incast = ic.incast_of(lab)
    assert sent == [(h, hosts[0]) for h in hosts[1:]]  # n - 1 pings, not n x (n - 1)
    assert (incast.receiver, incast.senders) == (
        hosts[0], tuple(sorted(s for s, d in every if d == hosts[0])))
    sent.clear()
    monkeypatch.setattr(lab, "ping", lambda *a, **kw: ping(*a, **kw, refuse=hosts[:1]))
    incast = ic.incast_of(lab)
    assert {d for _, d in sent} == set(hosts[:2])
    assert (incast.receiver, incast.senders) == (
        hosts[1], tuple(sorted(s for s, d in every if d == hosts[1])))
