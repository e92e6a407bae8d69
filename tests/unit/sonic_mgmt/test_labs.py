"""The sonic-mgmt suite on labs in shapes the shipped labs lack (tests/sonic_mgmt_labs.py:
Spectrum-style buffermgrd PGs, a DNX-style ``both`` pool with a shared headroom pool,
Broadcom-style static thresholds; other lossless DSCPs and priorities, strict queues, other
DWRR weights and PFC_WD timers, routed, untagged and tagged ports, 400G beside 100G).

The whole suite per lab is slow (about a minute of virtual-time traffic each, run twice to
show it is deterministic); the cases it once failed on such labs are held here on their own,
quickly: queue bytes of tagged frames, snappi shares and m2o on ports of different speeds.
"""
from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from rocelab.checks.run import run
from rocelab.checks.sonic_mgmt import buffer_cases as bc
from rocelab.checks.sonic_mgmt import cases, derive, snappi
from rocelab.checks.sonic_mgmt.dut import Dut
from rocelab.checks.sonic_mgmt.fill import queue_drop
from rocelab.checks.sonic_mgmt.sched import Unsupported
from rocelab.labs import topology
from tests import sonic_mgmt_labs

FRAME = 1024  # the suite's default --frame-bytes


@pytest.fixture(scope="module")
def labs(tmp_path_factory) -> dict[str, Path]:
    dest = tmp_path_factory.mktemp("sm-labs")
    return {name: sonic_mgmt_labs.make(dest, name) for name in sonic_mgmt_labs.VARIANTS}


def _case(lab: Path, src: str, dst: str, dscp: int) -> tuple[Dut, cases.PortCase]:
    node = topology.load(str(lab)).nodes[sonic_mgmt_labs.SWITCH]
    return Dut(node), cases.case(node, src, dst, dscp)


def _suite(clab: Path, results: Path) -> dict:
    code, folder = run(str(clab), results=results, runtime="sim", suite="sonic-mgmt",
                       say=lambda _: None)
    summary = json.loads((folder / "summary.json").read_text())
    summary["exit"] = code
    return summary


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(sonic_mgmt_labs.VARIANTS))
def test_the_whole_suite_holds_on_a_lab_it_was_not_written_for(labs, variant, tmp_path):
    clab = labs[variant]
    first = _suite(clab, tmp_path / "first")
    bad = {c["name"]: c["reason"] for c in first["checks"]
           if c["outcome"] not in ("passed", "skipped")}
    assert not bad and first["exit"] == 0, f"{variant}: {bad}"
    tables = set(json.loads((clab.parent / "configs" / sonic_mgmt_labs.SWITCH
                             / "config_db.json").read_text()))
    for c in first["checks"]:
        if c["outcome"] == "skipped":
            named = set(re.findall(r"\b[A-Z][A-Z0-9_]+\b", c["reason"])) & tables
            assert named, f"{variant} {c['name']}: skip reason names no config table: " \
                          f"{c['reason']}"
        else:
            assert c["derivation"], f"{variant} {c['name']}: no derivation recorded"
    again = _suite(clab, tmp_path / "again")

    def outcomes(summary: dict) -> list[tuple]:
        return [(c["name"], c["outcome"], c["reason"], c["derivation"])
                for c in summary["checks"]]
    assert outcomes(again) == outcomes(first), f"{variant}: two runs differ"


# --- what the suite once got wrong on these labs ----------------------------------------------

def test_a_tagged_dst_queues_the_frame_with_its_tag(labs):
    """dnx: routed Ethernet4 -> tagged Ethernet8: the queue holds 1028 B frames; the lossy
    drop point derived so is the model's, the one from the 1024 B ingress frame is not."""
    dut, case = _case(labs["dnx"], "Ethernet4", "Ethernet8", 0)
    egress = derive.egress_frame(dut.config, case.src, FRAME - 4, case.dst)
    assert egress.bytes == FRAME and "Ethernet8 tagged" in egress.steps[0]
    drop = derive.trig_egr_drp(dut.config, case.src, case.pg, FRAME - 4, case.dst, case.queue)
    bc.lossy_queue(dut, case, FRAME, drop.value)
    fill, q, _ = derive._stream(dut.config, case.src, case.pg, FRAME - 4, case.dst, case.queue)
    untagged, _, _ = queue_drop(q, fill)
    assert untagged != drop.value
    with pytest.raises(AssertionError):
        bc.lossy_queue(_case(labs["dnx"], "Ethernet4", "Ethernet8", 0)[0], case, FRAME,
                       untagged)


def test_a_tagged_src_loses_its_tag_on_a_routed_dst(labs):
    dut, case = _case(labs["broadcom"], "Ethernet12", "Ethernet0", 0)
    assert derive.egress_frame(dut.config, case.src, FRAME - 4, case.dst).bytes == FRAME - 8
    sent = 3
    marks = derive.watermarks(dut.config, case.src, case.pg, FRAME - 4, case.dst, case.queue,
                              sent)
    assert marks.queue.value == sent * (FRAME - 8)
    frame = dut.packet(case.src, case.dst, case.dscp, FRAME)
    dut.set_tx(case.dst, False)
    dut.send(case.src, frame, sent)
    assert dut.read()["ports"][case.dst]["queues"][str(case.queue)]["watermark_bytes"] \
        == marks.queue.value


def test_pause_shares_are_of_the_slower_port(labs):
    """spectrum: 400G Ethernet0 -> 100G Ethernet8, a storm on a lossy class: 45 % of the
    100G port is 11.25 % of the 400G one, and the background loses nothing at that rate;
    at 45 % of the 400G port it would overrun Ethernet8."""
    dut, case = _case(labs["spectrum"], "Ethernet0", "Ethernet8", 0)
    plan = snappi.pause_plan(dut.config, case, FRAME, paused=False)
    assert plan.rate == pytest.approx(snappi.TEST_RATE / 4)
    snappi.pause(dut, plan)
    with pytest.raises(AssertionError, match="background flows"):
        snappi.pause(_case(labs["spectrum"], "Ethernet0", "Ethernet8", 0)[0],
                     replace(plan, rate=snappi.TEST_RATE))


def test_m2o_needs_srcs_that_pass_dst_speed(labs):
    dut, case = _case(labs["spectrum"], "Ethernet24", "Ethernet0", 24)
    ports = list(dut.ports)
    with pytest.raises(Unsupported, match=r"PORT speed .* Ethernet0's 400000"):
        snappi.m2o_plan(dut.config, case, ports, FRAME)
    dut, case = _case(labs["spectrum"], "Ethernet8", "Ethernet16", 24)
    plan = snappi.m2o_plan(dut.config, case, ports, FRAME)
    assert plan.srcs == ("Ethernet8", "Ethernet0")
    snappi.m2o_lossless(dut, plan)
