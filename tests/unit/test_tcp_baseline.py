"""iperf3 incast pieces without a lab: argv, JSON parsing, totals."""
from __future__ import annotations

from pathlib import Path

import pytest

from rocelab.traffic.tcp_baseline import (TcpBaselineError, TcpFlow, TcpIncast, client_argv,
                                          dscp_to_tos, parse_client, server_argv)

DATA = Path(__file__).resolve().parent.parent / "data" / "iperf3"


def test_client_json_gives_receiver_goodput_and_sender_retransmits():
    flow = parse_client("h2", 5201, (DATA / "client_h2.json").read_text())
    assert flow == TcpFlow("h2", 5201, 2.004871, 11534336, 11403264, 45501740.3, 17)
    assert flow.received_bytes <= flow.sent_bytes


def test_iperf3_error_is_reported_in_one_line():
    with pytest.raises(TcpBaselineError, match=r"^iperf3 h3:5202: unable to connect to "
                                               r"server: Connection refused$"):
        parse_client("h3", 5202, (DATA / "client_refused.json").read_text())


def test_output_that_is_not_json_is_quoted():
    with pytest.raises(TcpBaselineError, match="printed no JSON: 'iperf3: error - boom'"):
        parse_client("h2", 5201, "iperf3: error - boom\n")


def test_json_without_end_sums_is_refused():
    with pytest.raises(TcpBaselineError, match="lacks end.sum_sent/sum_received"):
        parse_client("h2", 5201, '{"start": {}, "intervals": [], "end": {}}')


@pytest.mark.parametrize("dscp,tos", [(0, 0), (26, 104), (46, 184), (63, 252)])
def test_dscp_goes_in_the_tos_byte_above_the_ecn_bits(dscp, tos):
    assert dscp_to_tos(dscp) == tos


@pytest.mark.parametrize("dscp", [-1, 64])
def test_dscp_out_of_range_is_refused(dscp):
    with pytest.raises(TcpBaselineError, match="out of range"):
        dscp_to_tos(dscp)


def test_server_is_one_off_on_its_port():
    assert server_argv(5202) == ["iperf3", "-s", "-1", "-p", "5202"]


def test_client_for_a_duration_with_dscp():
    assert client_argv("10.1.1.11", 5201, seconds=2, dscp=26) == [
        "iperf3", "-c", "10.1.1.11", "-p", "5201", "--json", "-t", "2", "-S", "104"]


def test_client_for_a_byte_count_without_dscp():
    assert client_argv("10.1.1.11", 5202, nbytes=1_000_000) == [
        "iperf3", "-c", "10.1.1.11", "-p", "5202", "--json", "-n", "1000000"]


@pytest.mark.parametrize("kw", [{}, {"seconds": 1, "nbytes": 10}])
def test_client_needs_exactly_one_of_duration_and_bytes(kw):
    with pytest.raises(TcpBaselineError, match="exactly one"):
        client_argv("10.1.1.11", 5201, **kw)


@pytest.mark.parametrize("kw", [{"seconds": 0}, {"nbytes": 0}])
def test_client_needs_something_to_send(kw):
    with pytest.raises(TcpBaselineError, match="at least 1 second or 1 byte, not 0"):
        client_argv("10.1.1.11", 5201, **kw)


def test_totals_add_up_the_flows():
    result = TcpIncast("h1", 26, [TcpFlow("h2", 5201, 1.0, 1000, 900, 7200.0, 3),
                                  TcpFlow("h3", 5202, 1.0, 500, 500, 4000.0, 0)])
    assert (result.sent_bytes, result.received_bytes) == (1500, 1400)
    assert result.goodput_bps == 11200.0
    assert result.retransmits == 3
