"""sonic-mgmt's PFC watchdog cases (``tests/pfcwd/test_pfcwd_function.py``,
``test_pfcwd_timer_accuracy.py``, ``tests/snappi_tests/pfcwd``) per switch, port with a
``PFC_WD`` entry and lossless queue; the logic is ``checks.sonic_mgmt.pfcwd``'s."""
from __future__ import annotations

import pytest

from rocelab.checks.report import record_derivation
from rocelab.checks.sonic_mgmt import pfcwd


@pytest.fixture
def bench(watchdog, dut_of, frame_bytes) -> pfcwd.Bench:
    """The case's DUT as its config has it; a lab that cannot run the case skips."""
    if watchdog.missing:
        pytest.skip(watchdog.missing)
    return pfcwd.Bench(dut_of(watchdog.switch), watchdog, frame_bytes)


@pytest.fixture
def record(request):
    return lambda lines: record_derivation(request, lines)


def reconfigured(watchdog, dut_of_config, suite_lab, frame_bytes, action) -> pfcwd.Bench:
    """The case's DUT with its PFC_WD action set to ``action``, as sonic-mgmt restarts the
    watchdog for each action it tests."""
    if watchdog.missing:
        pytest.skip(watchdog.missing)
    config = pfcwd.with_action(suite_lab.nodes[watchdog.switch].config, action)
    return pfcwd.Bench(dut_of_config(watchdog.switch, config), watchdog, frame_bytes)


def test_pfcwd_timer_accuracy(bench, record, evidence):
    """20 storms: every detect time in (detection_time, + poll], every restore time in
    [restoration_time, + poll]; the distribution is the case's evidence."""
    times = pfcwd.timer_accuracy(bench, record)
    evidence.json(f"timers-{bench.case.id}", {k.replace("_s", "_ms"): [round(v * 1000, 6)
                                                                    for v in vs]
                                              for k, vs in times.items()})
    record(pfcwd.timer_summary(times))


@pytest.mark.parametrize("action", ["drop", "forward"])
def test_pfcwd_actions(watchdog, dut_of_config, suite_lab, frame_bytes, record, action):
    """Storm detected: the stormed queue's packets dropped (drop) or forwarded (forward),
    counted; another queue and another port forward; restored after the storm."""
    pfcwd.actions(reconfigured(watchdog, dut_of_config, suite_lab, frame_bytes, action),
                  record)


def test_pfcwd_burst_storm(bench, record):
    """15 storms of half a poll interval: never detected, nothing lost."""
    pfcwd.burst_storm(bench, record)


@pytest.mark.parametrize("trigger", [True, False], ids=["trigger_pfcwd", "no_trigger_pfcwd"])
def test_pfcwd_basic(bench, record, trigger):
    """A storm past detection_time + poll is detected (flow 1 lost under drop, flow 2 after
    the restore delivered); one of half detection_time is not, and nothing is lost."""
    pfcwd.basic(bench, record, trigger)


@pytest.mark.parametrize("action", ["drop", "forward"])
def test_pfcwd_storm_during_traffic(watchdog, dut_of_config, suite_lab, frame_bytes, record,
                                    action):
    """A storm into a flowing queue: detected, its packets dropped and counted (drop) or
    forwarded (forward) until the restore."""
    pfcwd.storm_during_traffic(
        reconfigured(watchdog, dut_of_config, suite_lab, frame_bytes, action), record)


def test_pfcwd_no_traffic(bench, record):
    """A storm on a queue that holds nothing is never detected."""
    pfcwd.no_traffic(bench, record)
