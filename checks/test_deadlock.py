"""PFC deadlock: a link failure makes routing bounce lossless traffic back up, the queues of
the bounce wait on each other in a cycle, and nothing moves; the PFC watchdog breaks it; and
the same lab with up-down routing never deadlocks (``checks/deadlock.py``).

Runs on a lab whose switch carries the label ``rocelab.fail-link`` (``pfc-deadlock``);
skipped elsewhere. Each check fails the labelled link (both ends), runs the recipe: every
sender to every receiver, QPS QPs each writing one message of a whole window (so that the
QPs caught in the loop keep more bytes in flight than the bounce's buffers hold before
XOFF), DCQCN off (PFC alone, as a fabric without ECN would), and reads the counters.
Virtual time is the natural runtime (``invoke check pfc-deadlock --runtime sim``): the
watchdog's 200 ms is then simulated, not waited for.
"""
from __future__ import annotations

import pytest

from rocelab.checks import variants
from rocelab.checks import deadlock as dl
from rocelab.checks.report import record_fidelity
from rocelab.fabric.client import fidelity
from rocelab.labs import actions
from rocelab.traffic import patterns

QPS = 4
FORM_FABRIC_S = 0.005  # fabric time the recipe runs before the first reading
HOLD_FABRIC_S = 0.002  # between the two readings: ~12 PFC refreshes at 100G
DCQCN_OFF = {"*": {"dcqcn": {"enabled": False}}}


@pytest.fixture(scope="session")
def scenario(lab):
    try:
        found = dl.scenario_of(lab.topology)
    except ValueError as e:
        pytest.fail(str(e), pytrace=False)
    if found is None:
        pytest.skip(f"lab {lab.name} has no switch labelled {dl.FAIL_LABEL}: no deadlock "
                    "scenario (run it on pfc-deadlock)")
    return found


@pytest.fixture(scope="session")
def deadlock_dir(results):
    folder = results / "deadlock"
    folder.mkdir(exist_ok=True)
    return folder


def recipe(lab, sc: dl.Scenario) -> list[patterns.FlowSpec]:
    """Every sender to every receiver, QPS QPs, one window-sized message each."""
    mtu = patterns.nic_settings(lab.topology.nodes[sc.senders[0]], None).roce.mtu
    return [f for src in sc.senders for dst in sc.receivers
            for f in patterns.incast(dst, [src], patterns.WINDOW * mtu, 1, QPS)]


def counters(lab) -> dict[str, dict]:
    return {s.name: lab.agent(s.name).counters() for s in lab.topology.switches}


def run(lab, sc: dl.Scenario, timeout_wall: float) -> tuple[dict, dict, dict]:
    """Fail the link, run the recipe for ``timeout_wall``; (counters before, counters at
    the end of the run, the flows' results)."""
    actions.set_link(lab, f"{sc.switch}:{sc.iface}", f"{sc.peer}:{sc.peer_iface}", up=False)
    before = counters(lab)
    result = patterns.run(lab, recipe(lab, sc), pattern="deadlock", timeout_s=timeout_wall,
                          nic=DCQCN_OFF)
    return before, counters(lab), result


def keep(request, evidence, lab, name: str, last: dict[str, dict], **data) -> None:
    """The check's figures as evidence, and the emulation's fidelity from the switches'
    last counters (every figure the switches keep since the lab came up)."""
    problems = [f"{s}: {p}" for s, c in last.items() for p in fidelity(c)["problems"]]
    record_fidelity(request, {"ok": not problems, "problems": problems,
                              "runtime": lab.runtime_name})
    evidence.json(name, data)


def test_deadlock_forms(request, lab, scenario, deadlock_dir, evidence):
    """Without the watchdog, the bounce deadlocks: over a hold with no traffic added, a
    cycle of lossless queues holds bytes, sends nothing and stays paused, and nothing is
    dropped anywhere; flows on healthy paths are stuck too (victims)."""
    topo = lab.topology
    with variants.variant(lab, "nowd", deadlock_dir, actions.without_watchdog) as other:
        start, formed, result = run(other, scenario, dl.fabric_wall(topo, FORM_FABRIC_S))
        other.wait(dl.fabric_wall(topo, HOLD_FABRIC_S))
        held = counters(other)
    stuck = dl.stuck_queues(topo, formed, held, scenario.queue, scenario.priority)
    cycle = dl.cycle_of(stuck)
    dropped = dl.drops(formed, held)
    victims = [f["name"] for f in result["flows"]
               if f["delivered_bytes"] and not f["complete"]]
    keep(request, evidence, lab, "deadlock", held, stuck=[vars(s) for s in stuck],
         cycle=[vars(s) for s in cycle],
         drops_during_hold=dropped, drops_during_run=dl.drops(start, formed), victims=victims,
         flows=[{k: f[k] for k in ("name", "delivered_bytes")} for f in result["flows"]])
    assert cycle, f"no cycle of stuck queues: {stuck}"
    assert {scenario.switch} <= {s.switch for s in cycle}, \
        f"the cycle does not pass {scenario.switch}, whose link failed: {cycle}"
    assert not dropped, f"frames dropped while the cycle held: {dropped} (not a deadlock)"
    assert not result["complete"], "every flow completed: nothing deadlocked"
    assert victims, "no flow on a healthy path was held up: the deadlock spread nowhere"


def test_watchdog_breaks_deadlock(request, lab, scenario, deadlock_dir, evidence):
    """With the watchdog on (the lab as shipped), the deadlock forms and the watchdog
    detects it on the queues of the cycle, drops what they hold, and the cycle is gone.

    It runs on a fresh copy of the lab, as the other two deadlock checks do: whether a
    cycle forms depends on when each flow starts, which the checks run before on the same
    lab change (their neighbour caches, its clock); and the link this check fails must not
    stay failed under the checks that run after it."""
    node = lab.topology.nodes[scenario.switch]
    wd = node.config.qos.pfc_wd.get(lab.topology.port(scenario.switch, scenario.iface))
    if wd is None:
        pytest.skip(f"{scenario.switch} {scenario.iface} has no PFC_WD entry")
    poll = node.config.qos.pfc_wd_poll_interval_ms / 1000
    topo = lab.topology
    span = dl.fabric_wall(topo, FORM_FABRIC_S) + dl.watchdog_wall(
        lab, wd.detection_time_ms / 1000 + 1.5 * poll, scenario.switch)
    if lab.runtime_name != "sim" and span > dl.LIVE_WAIT_LIMIT_S:
        pytest.skip(f"the watchdog runs in fabric time: detection {wd.detection_time_ms} ms "
                    f"+ polls at S = {lab.node_time_scale(scenario.switch):g} is {span:.0f} s "
                    f"of wall time here (limit {dl.LIVE_WAIT_LIMIT_S:.0f} s); run it with "
                    "--runtime sim")
    with variants.variant(lab, "wd", deadlock_dir, actions.as_shipped) as other:
        start, end, result = run(other, scenario, span)
        other.wait(dl.fabric_wall(topo, HOLD_FABRIC_S))
        after = counters(other)
    events = dl.watchdog_events(start, end, scenario.queue)
    storms = [dl.Stuck(e["switch"], e["port"],
                       topo.peer(e["switch"], topo.iface(e["switch"], e["port"])).node, 0)
              for e in events if e["kind"] == "storm"]
    cycle = dl.cycle_of(storms)
    dropped = dl.drops(start, end)
    left = dl.cycle_of(dl.stuck_queues(topo, end, after, scenario.queue, scenario.priority))
    keep(request, evidence, lab, "watchdog", after, events=events,
         cycle=[vars(s) for s in cycle], drops=dropped,
         stuck_after=[vars(s) for s in left],
         flows=[{k: f[k] for k in ("name", "delivered_bytes")} for f in result["flows"]])
    assert cycle, f"the watchdog's storms make no cycle (no deadlock seen): {events}"
    assert all(e["action"] == wd.action for e in events if e["kind"] == "storm")
    assert dropped.get("pfc_wd", 0) > 0 or wd.action != "drop", \
        f"the watchdog dropped nothing: {dropped}"
    buffer_drops = {r: n for r, n in dropped.items()
                    if r in ("lossy_limit", "headroom_exhausted")}
    assert not buffer_drops, f"lossless buffers dropped: {buffer_drops}"
    assert not left, f"a cycle is still stuck after the watchdog: {left}"


def test_up_down_routing_never_deadlocks(request, lab, scenario, deadlock_dir, evidence):
    """The negative control: the same failure and traffic on the lab without summary
    routes. No queue is stuck, the watchdog never fires, the failed path's traffic is
    dropped as no_route, and every flow on a healthy path completes."""
    topo = lab.topology
    with variants.variant(lab, "updown", deadlock_dir, dl.up_down_routing) as other:
        start, end, result = run(other, scenario, dl.fabric_wall(topo, FORM_FABRIC_S))
        other.wait(dl.fabric_wall(topo, HOLD_FABRIC_S))
        held = counters(other)
    stuck = dl.stuck_queues(topo, end, held, scenario.queue, scenario.priority)
    events = dl.watchdog_events(start, held, scenario.queue)
    dropped = dl.drops(start, held)
    healthy = [f for f in result["flows"] if f["delivered_bytes"]]
    keep(request, evidence, lab, "up-down", held, stuck=[vars(s) for s in stuck],
         events=events, drops=dropped,
         flows=[{k: f[k] for k in ("name", "delivered_bytes")} for f in result["flows"]])
    assert not stuck, f"queues stuck with up-down routing: {stuck}"
    assert not events, f"the watchdog fired with up-down routing: {events}"
    assert dropped.get("no_route", 0) > 0, \
        f"nothing crossed the failed link (no no_route drop): {dropped}; the scenario " \
        "proved nothing"
    incomplete = [f["name"] for f in healthy if not f["complete"]]
    assert healthy and not incomplete, f"flows on healthy paths did not complete: {incomplete}"

