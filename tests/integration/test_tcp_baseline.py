"""TCP incast and perftest through the real emulated fabric.

Needs root. One copy of the default lab serves the module and is taken down even on failure.
perftest needs Soft-RoCE: where the kernel or userspace lacks it, the test skips with
detect()'s one-line reason.
"""
from __future__ import annotations

import os

import pytest

from rocelab.traffic import softroce, tcp_baseline

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces and veth"),
]


def test_two_to_one_tcp_incast_delivers_on_both_flows(lab):
    result = tcp_baseline.incast(lab, "h1", ["h2", "h3"], seconds=1, dscp=0)
    assert [(f.src, f.port) for f in result.flows] == [("h2", 5201), ("h3", 5202)]
    for flow in result.flows:
        assert 0 < flow.received_bytes <= flow.sent_bytes, flow
        assert flow.goodput_bps > 0 and flow.retransmits >= 0
    assert result.received_bytes == sum(f.received_bytes for f in result.flows)
    assert tcp_baseline.listening_ports(lab, "h1").isdisjoint({5201, 5202})


def test_perftest_write_bw_or_skip_with_the_reason(lab):
    found = softroce.detect()
    if not found.available:
        pytest.skip(found.reason)
    run = softroce.run(lab, "h2", "h1", "write_bw", size=4096, iterations=200)
    assert run.summary["bw_avg_gbps"] > 0
