"""sonic-mgmt's scheduling and dot1p cases (``tests/qos/test_qos_sai.py``): DWRR finish
order from the SCHEDULER weights, before and after rewriting them, and PCP classification
where DOT1P_TO_TC_MAP is bound. The logic is in ``sched``."""
from __future__ import annotations

import pytest

from rocelab.checks.report import record_derivation
from rocelab.checks.sonic_mgmt import sched
from rocelab.checks.sonic_mgmt.dut import Dut


def _plan(request, make, *args):
    try:
        plan = make(*args)
    except sched.Unsupported as why:
        pytest.skip(str(why))
    record_derivation(request, plan.lines)
    return plan


def testQosSaiDwrr(pair, dut_of, frame_bytes, request):
    """WRRtest: dst TX off, per queue packets in proportion to its weight, TX on; every
    queue's last packet within one DWRR round of the end; no drop."""
    dut = dut_of(pair.switch)
    sched.dwrr(dut, _plan(request, sched.dwrr_plan, dut.config, pair, frame_bytes,
                          pair.switch))


def testQosSaiDwrrWeightChange(pair, suite_lab, frame_bytes, request):
    """wrr_chg: SCHEDULER weights rewritten in CONFIG_DB (lossless doubled, lossy halved;
    the DUT is built from the rewritten config, as the model takes no runtime change),
    then WRRtest against the new weights."""
    node = suite_lab.nodes[pair.switch]
    try:
        config, changed = sched.changed_weights(node.config, pair.dst)
    except sched.Unsupported as why:
        pytest.skip(str(why))
    plan = _plan(request, sched.dwrr_plan, config, pair, frame_bytes, pair.switch)
    record_derivation(request, changed)
    sched.dwrr(Dut(sched.with_config(node, config), request.config.getoption("seed")), plan)


def testQosSaiDot1pQueueMapping(pair, dut_of, frame_bytes, request):
    """Dot1pToQueueMapping: a frame per PCP; per-queue TX on dst as DOT1P_TO_TC_MAP and
    TC_TO_QUEUE_MAP give."""
    dut = dut_of(pair.switch)
    sched.dot1p_queues(dut, _plan(request, sched.dot1p_plan, dut.config, pair, frame_bytes,
                                  True))


def testQosSaiDot1pPgMapping(pair, dut_of, frame_bytes, request):
    """Dot1pToPgMapping: a frame per PCP; per-PG packets on src as DOT1P_TO_TC_MAP and
    TC_TO_PRIORITY_GROUP_MAP give."""
    dut = dut_of(pair.switch)
    sched.dot1p_pgs(dut, _plan(request, sched.dot1p_plan, dut.config, pair, frame_bytes))
