"""The reference scenarios' helpers (checks/reference.py, checks/test_reference.py), the
endpoints' ingress lag and its place in the congestion checks' fidelity verdict."""
from __future__ import annotations

import shutil
import socket
import time
from pathlib import Path

import pytest

from rocelab.checks import congestion
from rocelab.checks import reference as ref
from rocelab.checks.test_reference import pfc_quanta
from rocelab.fabric import afpacket
from rocelab.fabric.model.frames import pfc_frame
from rocelab.fabric.model.cable import DelayLine
from rocelab.fabric.model.scheduler import Lateness
from rocelab.labs import topology
from rocelab.nic import endpoint
from tests.unit.test_capture import BLOCK, SLOT, nonce, probe_frame, ring_slot

ROOT = Path(__file__).resolve().parents[2]
LABS = ("ref-incast-40g", "ref-incast-100g", "ref-pfc-400g")


@pytest.fixture
def lab_copy(tmp_path):
    """A copy of ref-incast-100g whose reference.yml a test may rewrite."""
    folder = tmp_path / "ref-incast-100g"
    shutil.copytree(ROOT / "topologies" / "ref-incast-100g", folder)
    return folder


@pytest.mark.parametrize("name", LABS)
def test_every_shipped_reference_lab_names_its_roles_among_its_hosts(name):
    topo = topology.load(str(ROOT / "topologies" / name))
    scenarios = ref.load(topo)
    assert scenarios and set(scenarios) <= set(ref.SCENARIOS)
    for roles in scenarios.values():
        for role, value in roles.items():
            if role != "run_us":
                for host in value if isinstance(value, list) else [value]:
                    assert topo.nodes[host].kind == "linux"


def test_the_40g_lab_runs_the_papers_parameters():
    topo = topology.load(str(ROOT / "topologies" / "ref-incast-40g"))
    nic = topo.nodes["h2"].nic.dcqcn
    assert (nic.mode, nic.g, nic.k_us, nic.t_us, nic.b_bytes, nic.f, nic.rai_mbps,
            nic.rhai_mbps) == ("paper", 1 / 256, 55, 55, 10 * 1024 * 1024, 5, 40, 200)
    leaf = topo.nodes["leaf1"]
    assert {p.speed_mbps for p in leaf.config.ports.values()} == {40_000}
    for wred in leaf.config.qos.wred_profiles.values():
        assert (wred.green.min_threshold, wred.green.max_threshold,
                wred.green.drop_probability) == (5000, 200_000, 1)
    assert leaf.ecn_marking == "dequeue"


def test_a_lab_without_reference_file_has_no_scenarios():
    assert ref.load(topology.load(str(ROOT / "topologies" / "roce-v2-leafspine"))) == {}


@pytest.mark.parametrize("text, field", [
    ("storm: {receiver: h1}\n", "storm: not a reference scenario"),
    ("incast: {receiver: h9, senders: [h2]}\n", "incast.receiver: 'h9' is not a host"),
    ("incast: {receiver: h1, senders: [h2, spine1]}\n", "incast.senders: 'spine1'"),
    ("incast: {receiver: h1, senders: [h2], run_us: -3}\n", "incast.run_us"),
    ("incast: [h1]\n", "incast: a mapping"),
    ("- h1\n", "a mapping of scenario"),
    ("incast: {receiver: [h1\n", "not YAML"),
])
def test_bad_reference_files_are_one_line_naming_file_and_field(lab_copy, text, field):
    (lab_copy / ref.REFERENCE_FILE).write_text(text)
    topo = topology.load(str(lab_copy / "ref-incast-100g.clab.yml"))
    with pytest.raises(ref.ReferenceError) as e:
        ref.load(topo)
    assert str(lab_copy / ref.REFERENCE_FILE) in str(e.value) and field in str(e.value)
    assert "\n" not in str(e.value)


def test_attachment_reads_the_switch_port_and_its_speed():
    topo = topology.load(str(ROOT / "topologies" / "ref-pfc-400g"))
    at = ref.attachment(topo, "h5")
    assert (at.switch, at.port, at.speed_bps) == ("leaf2", "Ethernet8", 400e9)


def counters(rx: int, tx: int, pfc: int, marks: int) -> dict:
    return {"leaf1": {"ports": {"Ethernet4": {"rx_bytes": rx, "tx_bytes": tx,
                                              "pfc_tx": [0, 0, 0, pfc, 0, 0, 0, 0],
                                              "ecn_marked": marks}}}}


def test_windows_turn_counter_deltas_into_rates_and_counts():
    w = ref.Windows([0.0, 1e-3, 3e-3], [counters(0, 0, 2, 0), counters(10_000, 500, 2, 7),
                                        counters(60_000, 25_500, 5, 9)], {})
    assert w.rate_bps(1, 2, "leaf1", "Ethernet4", "rx_bytes") == pytest.approx(200e6)
    assert w.rate_bps(0, 1, "leaf1", "Ethernet4", "tx_bytes") == pytest.approx(4e6)
    assert (w.pfc_sent(0, 1), w.pfc_sent(1, 2), w.marks(0, 2)) == (0, 3, 9)


def test_a_flow_outlasts_the_run_at_line_rate():
    size = ref.flow_size(100e9, 4e-3, 4096)
    assert size % 4096 == 0 and size * 8 / 100e9 > 4e-3


def test_pfc_quanta_reads_one_priority_of_a_pfc_frame():
    frame = pfc_frame(bytes(6), {3: 0xFFFF, 5: 0})
    assert pfc_quanta(frame, 3) == 0xFFFF
    assert pfc_quanta(frame, 5) == 0  # an XON
    assert pfc_quanta(frame, 4) is None  # not in the enable vector
    assert pfc_quanta(b"\x00" * 60, 3) is None  # not PFC


def lag(p99_s: float, count: int) -> dict:
    return {"count": count, "p99_s": p99_s, "max_s": p99_s, "mean_s": p99_s}


def test_endpoint_lag_beyond_a_frame_time_loses_fidelity():
    frame_s = 1e-3
    result = {"hosts": {
        "h1": {"kernel_rx_drops": 0, "ingress_lag": lag(3e-3, 500), "mtu_frame_s": frame_s},
        "h2": {"kernel_rx_drops": 0, "ingress_lag": lag(0.5e-3, 500), "mtu_frame_s": frame_s},
        "h3": {"kernel_rx_drops": 0, "ingress_lag": lag(9e-3, 20), "mtu_frame_s": frame_s},
        "h4": {"kernel_rx_drops": 4},  # simulated: no lag reported
        # on a cable: judged by what arrived late past it, not by the raw lag
        "h5": {"kernel_rx_drops": 0, "ingress_lag": lag(3e-3, 500),
               "arrival_lateness": lag(0.2e-3, 500), "mtu_frame_s": frame_s},
        "h6": {"kernel_rx_drops": 0, "ingress_lag": lag(3e-3, 500),
               "arrival_lateness": lag(2e-3, 500), "mtu_frame_s": frame_s,
               "scheduling": "SCHED_FIFO priority 1"},
        "h7": {"kernel_rx_drops": 0, "arrival_lateness": lag(2e-3, 500),
               "mtu_frame_s": frame_s,
               "scheduling": "normal scheduling (SCHED_FIFO refused: Operation not permitted)"},
    }}
    problems, worst = congestion.endpoint_problems(result)
    assert worst["where"] == "h1 endpoint" and worst["ratio"] == 3.0  # the p99 furthest out
    assert problems == ["h1: p99 ingress lag 3.00 ms > one MTU frame (1.00 ms) under its "
                        "endpoint", "h4: 4 frames dropped in the kernel under its endpoint",
                        "h6: p99 arrival lateness 2.00 ms > one MTU frame (1.00 ms) under its "
                        "endpoint",
                        "h7: p99 arrival lateness 2.00 ms > one MTU frame (1.00 ms) under its "
                        "endpoint (normal scheduling (SCHED_FIFO refused: Operation not "
                        "permitted))"]


class FakeNic:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def receive(self, frame: bytes, now: float) -> bool:
        self.frames.append(frame)
        return True


def test_the_endpoint_records_the_oldest_frames_wait_once_per_batch():
    """Three frames in the ring, the oldest stamped 4 ms ago: one batch, its lag the
    oldest's; the frame this host sent is left out; the rest go onto the cable together."""
    now = time.time()
    ring = bytearray(2 * BLOCK)
    rx = afpacket.RxRing(ring, 4, SLOT, BLOCK)
    frames = [probe_frame(nonce(i), tagged=False) for i in range(3)]
    for at, frame, kind in zip(rx.slots, frames, (socket.PACKET_HOST, socket.PACKET_OUTGOING,
                                                  socket.PACKET_HOST)):
        ring_slot(ring, at, frame, pkttype=kind)
    sec = now - 4e-3
    afpacket.SLOT_STAMP.pack_into(ring, rx.slots[0] + afpacket.SLOT_STAMP_OFFSET, int(sec),
                                  int(sec % 1 * 1e9))
    shell = endpoint.Endpoint.__new__(endpoint.Endpoint)  # no socket: no root needed
    shell.ring, shell.nic, shell.ingress_lag = rx, FakeNic(), Lateness()
    shell.cable = DelayLine(8e9, 0.0)  # a byte a nanosecond, no propagation
    shell._receive(now)
    assert shell.ingress_lag.count == 1 and shell.ingress_lag.max >= 4e-3
    # onto the cable from the oldest's kernel stamp, 4 ms ago: both arrived by now
    assert shell.cable.next_due() < now
    assert [frame for _, frame in shell.cable.due(now)] == [frames[0], frames[2]]
    shell._receive(now)  # an empty ring: nothing recorded
    assert shell.ingress_lag.count == 1
