"""The sonic-mgmt PFC watchdog cases (checks/sonic_mgmt/pfcwd.py): each passes on the default
lab's switches and fails once a defect is seeded into the switch model's watchdog; the
cases are enumerated from PFC_WD; the DUT's timeline (storms and flows played together)."""
from dataclasses import replace

import pytest

from rocelab.checks.sonic_mgmt import cases, pfcwd
from rocelab.checks.sonic_mgmt.dut import Dut
from rocelab.fabric.model.egress import PFC_WD_DROP
from rocelab.fabric.model.watchdog import QueueWatchdog
from rocelab.fabric.qos import queue_of_tc, tc_of_dscp


@pytest.fixture(scope="module")
def case(lab):
    """A leaf's port with a watchdog: one whose switch has a third wired port."""
    return next(c for c in cases.watchdog_cases(lab) if c.switch == "leaf1")


def bench(lab, case, config=None) -> pfcwd.Bench:
    node = lab.nodes[case.switch]
    if config is not None:
        node = replace(node, config=config)
    return pfcwd.Bench(Dut(node), case, 1024)


def watchdog(bench: pfcwd.Bench) -> QueueWatchdog:
    """The model's watchdog of the case's queue, to seed a defect into."""
    return bench.dut.switch._ports[bench.case.port].egress.watchdogs[bench.case.queue]


class WatchdogDropsUncounted(dict):
    """An egress port's drop counts that lose the watchdog's: the defect seeded."""

    def setdefault(self, reason, default=None):
        return list(default) if reason == PFC_WD_DROP else super().setdefault(reason, default)


def with_timers(config, detect_ms, restore_ms, poll_ms):
    pfc_wd = {p: replace(w, detection_time_ms=detect_ms, restoration_time_ms=restore_ms)
              for p, w in config.qos.pfc_wd.items()}
    return replace(config, qos=replace(config.qos, pfc_wd=pfc_wd,
                                       pfc_wd_poll_interval_ms=poll_ms))


def run(check, b, *args):
    recorded = []
    out = check(b, recorded.extend, *args)
    assert recorded and all(isinstance(line, str) for line in recorded)
    return out


# --- enumeration ----------------------------------------------------------------------


def test_every_wired_port_with_pfc_wd_is_a_case_per_lossless_queue(lab):
    found = cases.watchdog_cases(lab)
    for node in cases.switches(lab):
        config = node.config
        expected = {(p, q) for p in cases.wired(node) if p in config.qos.pfc_wd
                    for q in cases.watchdog_queues(config, p)}
        assert {(c.port, c.queue) for c in found if c.switch == node.name} == expected
    for c in found:
        assert not c.missing
        config = lab.nodes[c.switch].config
        assert c.src != c.port
        assert queue_of_tc(config, c.port, tc_of_dscp(config, c.src, c.dscp)[0])[0] == c.queue


def test_a_switch_without_pfc_wd_is_one_case_that_names_the_table(lab):
    node = lab.nodes["leaf1"]
    config = replace(node.config, qos=replace(node.config.qos, pfc_wd={}))
    variant = replace(lab, nodes={**lab.nodes, "leaf1": replace(node, config=config)})
    leaf1 = [c for c in cases.watchdog_cases(variant) if c.switch == "leaf1"]
    assert len(leaf1) == 1 and "PFC_WD" in leaf1[0].missing and leaf1[0].id == "leaf1"


def test_a_watchdog_on_a_port_without_lossless_queue_names_pfc_enable(lab):
    node = lab.nodes["leaf1"]
    port = cases.wired(node)[0]
    qos = node.config.qos
    port_qos = {**qos.port_qos, port: replace(qos.port_qos[port], pfc_enable=frozenset())}
    config = replace(node.config, qos=replace(qos, port_qos=port_qos))
    variant = replace(lab, nodes={**lab.nodes, "leaf1": replace(node, config=config)})
    on_port = [c for c in cases.watchdog_cases(variant) if (c.switch, c.port) == ("leaf1", port)]
    assert len(on_port) == 1 and "pfc_enable" in on_port[0].missing


def test_with_action_replaces_every_entry(lab):
    config = pfcwd.with_action(lab.nodes["leaf1"].config, "forward")
    assert {w.action for w in config.qos.pfc_wd.values()} == {"forward"}


# --- the timeline ---------------------------------------------------------------------


def test_a_storm_played_before_a_flow_holds_it_and_after_does_not(lab, case):
    for storm_first, held in ((True, True), (False, False)):
        b = bench(lab, case)
        start = b.dut.now + 0.01
        storm = b.storm(start, 0.001)
        flow, ident = b.flow(1, start)
        b.dut.play(storm + flow if storm_first else flow + storm, until=start + 0.0005)
        assert (b.delivered(ident) == 0) == held


def test_storm_arrivals_are_dut_storm_frames(lab, case):
    b = bench(lab, case)
    arrivals = b.storm(1.0, 0.01)
    reference = Dut(lab.nodes[case.switch])
    before = reference.read()["ports"][case.port]["pfc_rx"]
    reference.storm(case.port, case.priorities, 0.01)
    after = reference.read()["ports"][case.port]["pfc_rx"]
    sent = {p: after[p] - before[p] for p in case.priorities}
    assert all(n == len(arrivals) for n in sent.values())
    gaps = {round(b2[0] - a[0], 12) for a, b2 in zip(arrivals, arrivals[1:])}
    assert len(gaps) == 1 and all(a[0] < 1.01 for a in arrivals)


def test_a_line_rate_flow_is_spaced_by_the_frame_time(lab, case):
    b = bench(lab, case)
    flow, _ = b.flow(3, 0.0)
    speed = lab.nodes[case.switch].config.ports[case.src].speed_mbps * 1e6
    assert flow[1][0] - flow[0][0] == pytest.approx((1024 + 20) * 8 / speed)


# --- the cases: pass, and fail with a seeded defect -------------------------------------


def test_timer_accuracy_passes_and_samples_the_poll_interval(lab, case):
    times = run(pfcwd.timer_accuracy, bench(lab, case))
    t = pfcwd.timers(lab.nodes[case.switch].config, case.port)
    assert len(times["detect_s"]) == pfcwd.TIMER_STORMS
    assert max(times["detect_s"]) - min(times["detect_s"]) > t.poll / 2
    assert len(pfcwd.timer_summary(times)) == 2


def test_timer_accuracy_holds_under_other_timers(lab, case):
    config = with_timers(lab.nodes[case.switch].config, 400, 300, 100)
    times = run(pfcwd.timer_accuracy, bench(lab, case, config), 5)
    assert all(0.4 < d <= 0.5 + 1e-9 for d in times["detect_s"])


def test_timer_accuracy_fails_a_late_detection(lab, case):
    b = bench(lab, case)
    wd = watchdog(b)
    wd.detection_s += wd.interval_s / 2
    with pytest.raises(AssertionError, match="detected .* expected in"):
        run(pfcwd.timer_accuracy, b)


def test_timer_accuracy_fails_an_early_restore(lab, case):
    b = bench(lab, case)
    watchdog(b).restoration_s /= 2
    with pytest.raises(AssertionError, match="restored .* expected in"):
        run(pfcwd.timer_accuracy, b)


@pytest.mark.parametrize("action", ["drop", "forward"])
def test_actions_pass(lab, case, action):
    config = pfcwd.with_action(lab.nodes[case.switch].config, action)
    run(pfcwd.actions, bench(lab, case, config))


@pytest.mark.parametrize("action,defect", [("drop", "alert"), ("forward", "alert"),
                                          ("forward", "drop")])
def test_actions_fail_a_watchdog_acting_otherwise(lab, case, action, defect):
    b = bench(lab, case, pfcwd.with_action(lab.nodes[case.switch].config, action))
    watchdog(b).action = defect
    with pytest.raises(AssertionError, match="stormed queue"):
        run(pfcwd.actions, b)


def test_actions_fail_a_drop_action_on_another_queue(lab, case):
    b = bench(lab, case, pfcwd.with_action(lab.nodes[case.switch].config, "drop"))
    other = pfcwd.other_queue(b.dut.config, case)[1]
    egress = b.dut.switch._ports[case.port].egress
    egress._watchdog_of[other] = egress.watchdogs[case.queue]
    with pytest.raises(AssertionError, match=f"queue {other} of {case.port} during the storm"):
        run(pfcwd.actions, b)


def test_actions_fail_a_drop_action_on_another_port(lab, case):
    b = bench(lab, case, pfcwd.with_action(lab.nodes[case.switch].config, "drop"))
    third = pfcwd.other_port(b.dut.ports, case)
    stormed = b.dut.switch._ports[case.port].egress.watchdogs[case.queue]
    b.dut.switch._ports[third].egress._watchdog_of[case.queue] = stormed
    with pytest.raises(AssertionError, match=f"queue {case.queue} of {third} during the storm"):
        run(pfcwd.actions, b)


def test_burst_storm_passes(lab, case):
    run(pfcwd.burst_storm, bench(lab, case))


def test_burst_storm_fails_a_watchdog_that_detects_bursts(lab, case):
    b = bench(lab, case)
    wd = watchdog(b)
    wd.detection_s = wd.interval_s = wd.interval_s / 8
    with pytest.raises(AssertionError, match="from 15 bursts, expected none"):
        run(pfcwd.burst_storm, b)


@pytest.mark.parametrize("trigger", [True, False])
def test_basic_passes(lab, case, trigger):
    run(pfcwd.basic, bench(lab, case), trigger)


def test_basic_trigger_fails_a_watchdog_that_never_detects(lab, case):
    b = bench(lab, case)
    watchdog(b).detection_s *= 10
    with pytest.raises(AssertionError, match="expected \\['storm', 'restore'\\]"):
        run(pfcwd.basic, b, True)


def test_basic_no_trigger_fails_a_watchdog_that_detects_early(lab, case):
    b = bench(lab, case)
    wd = watchdog(b)
    wd.detection_s = wd.interval_s = wd.detection_s / 8
    with pytest.raises(AssertionError, match="expected \\[\\]"):
        run(pfcwd.basic, b, False)


def test_basic_trigger_expects_no_loss_under_forward(lab, case):
    config = pfcwd.with_action(lab.nodes[case.switch].config, "forward")
    run(pfcwd.basic, bench(lab, case, config), True)


@pytest.mark.parametrize("action", ["drop", "forward"])
def test_storm_during_traffic_passes(lab, case, action):
    config = pfcwd.with_action(lab.nodes[case.switch].config, action)
    run(pfcwd.storm_during_traffic, bench(lab, case, config))


def test_storm_during_traffic_fails_drops_not_counted(lab, case, monkeypatch):
    b = bench(lab, case, pfcwd.with_action(lab.nodes[case.switch].config, "drop"))
    monkeypatch.setattr(b.dut.switch._ports[b.case.port].egress, "dropped",
                        WatchdogDropsUncounted())
    with pytest.raises(AssertionError, match="watchdog drops, expected"):
        run(pfcwd.storm_during_traffic, b)


def test_storm_during_traffic_fails_a_late_restore(lab, case):
    b = bench(lab, case, pfcwd.with_action(lab.nodes[case.switch].config, "forward"))
    wd = watchdog(b)
    wd.restoration_s += 2 * wd.interval_s
    with pytest.raises(AssertionError, match="restored .* expected in"):
        run(pfcwd.storm_during_traffic, b)


def test_no_traffic_passes(lab, case):
    run(pfcwd.no_traffic, bench(lab, case))


def test_no_traffic_fails_a_watchdog_blind_to_the_queue(lab, case, monkeypatch):
    def stuck(self, now, depth, tx, last_pfc):  # PFC arriving is enough: no bytes needed
        return last_pfc is not None and now - last_pfc <= self.interval_s
    monkeypatch.setattr(QueueWatchdog, "_stuck", stuck)
    with pytest.raises(AssertionError, match="on an empty queue, expected none"):
        run(pfcwd.no_traffic, bench(lab, case))


def test_play_refuses_a_frame_before_the_clock(lab, case):
    b = bench(lab, case)
    b.dut.run(1.0)
    with pytest.raises(ValueError, match="before the DUT's clock"):
        b.dut.play(b.storm(0.5, 0.001))
