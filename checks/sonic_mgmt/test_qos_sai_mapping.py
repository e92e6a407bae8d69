"""sonic-mgmt's classification cases (``tests/qos/test_qos_sai.py``): one packet per DSCP
(or PCP), and the per-queue and per-PG counter deltas the config's maps predict."""
from __future__ import annotations

from collections import Counter

from rocelab.checks.report import record_derivation
from rocelab.fabric.qos import pg_of_tc, queue_of_tc, tc_of_dscp


def testQosSaiDscpQueueMapping(pair, dut_of, frame_bytes, request):
    """DscpMappingPB: a packet for each DSCP 0..63, every one received on dst; each egress
    queue's TX delta == the DSCPs DSCP_TO_TC_MAP and TC_TO_QUEUE_MAP send to it."""
    dut = dut_of(pair.switch)
    config = dut.config
    expected: Counter[int] = Counter()
    lines = []
    for dscp in range(64):
        tc, dscp_map = tc_of_dscp(config, pair.src, dscp)
        queue, queue_map = queue_of_tc(config, pair.dst, tc)
        expected[queue] += 1
        lines.append(f"DSCP_TO_TC_MAP|{dscp_map} {dscp} -> TC {tc}; "
                     f"TC_TO_QUEUE_MAP|{queue_map} on {pair.dst} -> queue {queue}")
    record_derivation(request, lines)
    before = dut.read()["ports"][pair.dst]["queues"]
    for dscp in range(64):
        dut.send(pair.src, dut.packet(pair.src, pair.dst, dscp, frame_bytes, ident=dscp))
        dut.settle()  # one at a time: a mapping case congests nothing
    after = dut.read()["ports"][pair.dst]["queues"]
    got = {q: after[str(q)]["tx_packets"] - before[str(q)]["tx_packets"] for q in range(8)}
    assert len(dut.captures[pair.dst].frames) == 64, \
        f"{len(dut.captures[pair.dst].frames)} of 64 packets reached {pair.dst}"
    assert got == {q: expected.get(q, 0) for q in range(8)}, \
        f"per-queue TX on {pair.dst}: {got}, expected {dict(sorted(expected.items()))}"


def testQosSaiDscpToPgMapping(pair, dut_of, frame_bytes, request):
    """DscpToPgMapping: for each PG, a packet per DSCP mapped to it; each PG's packet
    counter on src rises by exactly that many."""
    dut = dut_of(pair.switch)
    config = dut.config
    expected: Counter[int] = Counter()
    lines = []
    for dscp in range(64):
        tc, dscp_map = tc_of_dscp(config, pair.src, dscp)
        pg, pg_map = pg_of_tc(config, pair.src, tc)
        expected[pg] += 1
        lines.append(f"DSCP_TO_TC_MAP|{dscp_map} {dscp} -> TC {tc}; "
                     f"TC_TO_PRIORITY_GROUP_MAP|{pg_map} on {pair.src} -> PG {pg}")
    record_derivation(request, lines)
    before = dut.read()["ports"][pair.src]["pgs"]
    for dscp in range(64):
        dut.send(pair.src, dut.packet(pair.src, pair.dst, dscp, frame_bytes, ident=dscp))
        dut.settle()
    after = dut.read()["ports"][pair.src]["pgs"]
    got = {pg: after[str(pg)]["rx_packets"] - before[str(pg)]["rx_packets"] for pg in range(8)}
    assert got == {pg: expected.get(pg, 0) for pg in range(8)}, \
        f"per-PG packets on {pair.src}: {got}, expected {dict(sorted(expected.items()))}"
