"""WRED/ECN decisions and CE marking (fabric.model.wred): exact, with injected random draws."""
from __future__ import annotations

import dataclasses
import random

import pytest

from rocelab.fabric.config import WredColor, WredProfile
from rocelab.fabric.model import frames as f
from rocelab.fabric.model.wred import (CE, DROP, ECT0, ECT1, MARK, NOT_ECT, PASS, Wred,
                                       ecn_field, mark_ce)
from rocelab.traffic.packets import Flow, rc_send, set_ecn
from rocelab.nic.roce import ecn_of, verify_icrc

GREEN = WredColor(enable=True, min_threshold=100_000, max_threshold=300_000, drop_probability=20)


def wred(ecn: str = "ecn_all", green: WredColor | None = GREEN, **colors) -> Wred:
    return Wred(WredProfile("P", ecn, green=green, **colors))


def test_curve_is_zero_below_min_linear_to_the_probability_and_one_from_max():
    w = wred()
    assert w.probability(0) == 0.0
    assert w.probability(99_999) == 0.0
    assert w.probability(100_000) == 0.0
    assert w.probability(150_000) == pytest.approx(0.05)
    assert w.probability(200_000) == pytest.approx(0.10)
    assert w.probability(299_999) == pytest.approx(0.2 * 199_999 / 200_000)
    assert w.probability(300_000) == 1.0
    assert w.probability(10_000_000) == 1.0


def test_equal_thresholds_make_a_step():
    w = wred(green=WredColor(True, 5000, 5000, 10))
    assert w.probability(4999) == 0.0
    assert w.probability(5000) == 1.0


def test_a_frame_is_selected_when_the_draw_is_below_the_probability():
    w = wred()  # p = 0.1 at 200 KB
    assert w.mark_or_drop(200_000, ect=True, rand=0.0999) == MARK
    assert w.mark_or_drop(200_000, ect=True, rand=0.1001) == PASS
    assert w.mark_or_drop(99_999, ect=True, rand=0.0) == PASS  # below min: never
    assert w.mark_or_drop(300_000, ect=True, rand=0.9999) == MARK  # from max: always


def test_ect_is_marked_where_non_ect_is_dropped_with_the_same_probability():
    w = wred("ecn_all")
    for depth, rand in ((150_000, 0.04), (250_000, 0.14), (400_000, 0.5)):
        assert w.mark_or_drop(depth, ect=True, rand=rand) == MARK
        assert w.mark_or_drop(depth, ect=False, rand=rand) == DROP
    assert w.mark_or_drop(150_000, ect=False, rand=0.06) == PASS


def test_ecn_none_drops_ect_frames_too():
    w = wred("ecn_none")
    assert w.mark_or_drop(250_000, ect=True, rand=0.1) == DROP
    assert w.mark_or_drop(400_000, ect=True, rand=0.99) == DROP
    assert w.mark_or_drop(250_000, ect=True, rand=0.2) == PASS


@pytest.mark.parametrize("mode, marks", [
    ("ecn_green", True), ("ecn_green_yellow", True), ("ecn_green_red", True),
    ("ecn_all", True), ("ecn_yellow", False), ("ecn_red", False), ("ecn_yellow_red", False),
])
def test_only_ecn_modes_covering_green_mark(mode, marks):
    """Every frame is green in the emulation (no policers)."""
    assert wred(mode).mark_or_drop(400_000, ect=True, rand=0.5) == (MARK if marks else DROP)


def test_wred_disabled_for_green_passes_everything():
    off = dataclasses.replace(GREEN, enable=False)
    w = wred("ecn_none", green=off)
    assert w.mark_or_drop(400_000, ect=False, rand=0.0) == PASS
    assert w.mark_or_drop(400_000, ect=True, rand=0.0) == PASS


def test_ecn_only_profile_marks_ect_and_never_drops():
    w = wred("ecn_all", green=dataclasses.replace(GREEN, enable=False))
    assert w.mark_or_drop(400_000, ect=True, rand=0.0) == MARK
    assert w.mark_or_drop(400_000, ect=False, rand=0.0) == PASS


def test_a_profile_without_green_settings_passes_everything():
    w = wred("ecn_all", green=None, yellow=GREEN, red=GREEN)
    assert w.mark_or_drop(10**9, ect=True, rand=0.0) == PASS
    assert w.mark_or_drop(10**9, ect=False, rand=0.0) == PASS


def test_sonic_default_lossless_profile_marks_at_the_configured_rate():
    """AZURE_LOSSLESS: ecn_all, 1 MiB .. 2 MiB, 5 %; 1.5 MiB marks 2.5 % of ECT frames."""
    w = wred("ecn_all", green=WredColor(True, 1048576, 2097152, 5))
    rng = random.Random(4)
    draws = 200_000
    marked = sum(w.mark_or_drop(1572864, True, rng.random()) == MARK for _ in range(draws))
    assert marked / draws == pytest.approx(0.025, abs=0.0015)


# ---- CE marking


def ipv4_frame(tos: int, tag: bytes = b"") -> bytes:
    packet = f.ipv4_packet(f.ip_int("10.0.0.1"), f.ip_int("10.0.0.2"), f.IPPROTO_UDP,
                           bytes(40), tos=tos, ident=0x1234)
    return f.ethernet_frame(b"\x02" * 6, b"\x04" * 6, f.ETH_P_IPV4, packet, tag=tag)


def ipv6_frame(tclass: int) -> bytes:
    header = bytes([0x60 | tclass >> 4, (tclass & 0x0F) << 4, 0x12, 0x34]) + bytes(4) + bytes(32)
    return f.ethernet_frame(b"\x02" * 6, b"\x04" * 6, f.ETH_P_IPV6, header + bytes(20))


@pytest.mark.parametrize("tag", [b"", f.vlan_tag(10, pcp=3)])
@pytest.mark.parametrize("ecn", [ECT0, ECT1])
def test_mark_ce_sets_ce_on_ipv4_and_keeps_the_header_checksum_valid(ecn, tag):
    frame = ipv4_frame(26 << 2 | ecn, tag)
    marked = mark_ce(frame)
    net = 14 + len(tag)
    assert ecn_field(frame) == ecn and ecn_field(marked) == CE
    assert marked[net + 1] == 26 << 2 | CE
    assert f.internet_checksum(marked[net:net + 20]) == 0
    assert marked[:net + 1] == frame[:net + 1] and marked[net + 12:] == frame[net + 12:]


def test_mark_ce_sets_ce_on_ipv6_and_changes_nothing_else():
    frame = ipv6_frame(26 << 2 | ECT0)
    marked = mark_ce(frame)
    assert ecn_field(marked) == CE
    assert marked[15] == frame[15] | 0x30
    assert marked[:15] + marked[16:] == frame[:15] + frame[16:]


def test_mark_ce_leaves_not_ect_ce_and_non_ip_frames_alone():
    for frame in (ipv4_frame(26 << 2 | NOT_ECT), ipv4_frame(26 << 2 | CE),
                  ipv6_frame(26 << 2 | NOT_ECT),
                  f.ethernet_frame(b"\xff" * 6, b"\x04" * 6, f.ETH_P_ARP, bytes(28)),
                  b"\x00" * 10):
        assert mark_ce(frame) == frame
    assert ecn_field(b"\x00" * 10) == NOT_ECT


@pytest.mark.parametrize("flow", [
    Flow("02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.2"),
    Flow("02:00:00:00:00:01", "02:00:00:00:00:02", "fd00::1", "fd00::2", vid=20),
])
def test_marked_rocev2_frame_equals_the_reference_marking_and_keeps_its_icrc(flow):
    packet = rc_send(flow, 0x11, 7, b"payload", ecn=ECT0)
    marked = mark_ce(bytes(packet))
    assert marked == bytes(set_ecn(packet, CE))
    assert ecn_of(marked) == CE and verify_icrc(marked)


def test_rocev1_grh_is_not_an_ip_header_to_the_switch():
    frame = bytes(rc_send(Flow("02:00:00:00:00:01", "02:00:00:00:00:02", version=1), 1, 1,
                          ecn=ECT0))
    assert ecn_field(frame) == NOT_ECT
    assert mark_ce(frame) == frame
