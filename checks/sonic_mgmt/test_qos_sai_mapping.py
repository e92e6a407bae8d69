"""sonic-mgmt's classification cases (``tests/qos/test_qos_sai.py``): one packet per DSCP
(or PCP), and the per-queue and per-PG counter deltas the config's maps predict."""
from __future__ import annotations

from collections import Counter

from rocelab.checks.report import record_derivation
from rocelab.fabric.qos import pg_of_tc, queue_of_tc, tc_of_dscp


def _sweep(pair, dut_of, frame_bytes, request, side: str, kind: str, to_class) -> None:
    """A packet per DSCP 0..63 from src to dst, one at a time (a mapping case congests
    nothing); the ``kind`` counters of ``side`` rise by the DSCPs ``to_class(tc)`` sends
    to each, as DSCP_TO_TC_MAP and then ``to_class``'s map say."""
    dut = dut_of(pair.switch)
    expected: Counter[int] = Counter()
    lines = []
    for dscp in range(64):
        tc, dscp_map = tc_of_dscp(dut.config, pair.src, dscp)
        index, line = to_class(dut.config, tc)
        expected[index] += 1
        lines.append(f"DSCP_TO_TC_MAP|{dscp_map} {dscp} -> TC {tc}; {line}")
    record_derivation(request, lines)
    port = pair.dst if side == "dst" else pair.src
    field = "tx_packets" if kind == "queues" else "rx_packets"
    before = dut.read()["ports"][port][kind]
    for dscp in range(64):
        dut.send(pair.src, dut.packet(pair.src, pair.dst, dscp, frame_bytes, ident=dscp))
        dut.settle()
    after = dut.read()["ports"][port][kind]
    got = {i: after[str(i)][field] - before[str(i)][field] for i in range(8)}
    if kind == "queues":
        arrived = len(dut.captures[pair.dst].frames)
        assert arrived == 64, f"{arrived} of 64 packets reached {pair.dst}"
    assert got == {i: expected.get(i, 0) for i in range(8)}, \
        f"per-{kind[:-1]} counts on {port}: {got}, expected {dict(sorted(expected.items()))}"


def testQosSaiDscpQueueMapping(pair, dut_of, frame_bytes, request):
    """DscpMappingPB: every packet received on dst; each egress queue's TX delta == the
    DSCPs DSCP_TO_TC_MAP and TC_TO_QUEUE_MAP send to it."""
    def queue(config, tc):
        q, name = queue_of_tc(config, pair.dst, tc)
        return q, f"TC_TO_QUEUE_MAP|{name} on {pair.dst} -> queue {q}"
    _sweep(pair, dut_of, frame_bytes, request, "dst", "queues", queue)


def testQosSaiDscpToPgMapping(pair, dut_of, frame_bytes, request):
    """DscpToPgMapping: each PG's packet counter on src rises by exactly the DSCPs
    DSCP_TO_TC_MAP and TC_TO_PRIORITY_GROUP_MAP send to it."""
    def pg(config, tc):
        p, name = pg_of_tc(config, pair.src, tc)
        return p, f"TC_TO_PRIORITY_GROUP_MAP|{name} on {pair.src} -> PG {p}"
    _sweep(pair, dut_of, frame_bytes, request, "src", "pgs", pg)
