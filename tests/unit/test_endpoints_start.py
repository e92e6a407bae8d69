"""A live run's instants count from the endpoints' go, as its elapsed_s does: spawning and
readying the endpoints can take seconds on a loaded machine, and a start-up window measured
from ``patterns.start`` instead came out that much short (a bottleneck at 107 % of its line
rate)."""
import threading

from rocelab.labs import endpoints


def running(monkeypatch, go: bool) -> tuple[endpoints.Running, threading.Event]:
    release = threading.Event()

    def run(lab, specs, timeout_s, on_progress=None, on_go=None):
        release.wait(5)  # the endpoints spawning and getting ready
        if go:
            on_go()
        return {}, 0.0
    monkeypatch.setattr(endpoints, "run", run)
    return endpoints.Running(None, {}, 10.0), release


def test_started_waits_for_the_go(monkeypatch):
    flows, release = running(monkeypatch, go=True)
    assert not flows.started(0.2)  # still starting
    release.set()
    assert flows.started(5)
    flows.wait()


def test_a_run_that_ended_without_a_go_never_started(monkeypatch):
    flows, release = running(monkeypatch, go=False)
    release.set()
    assert not flows.started(5)
    flows.wait()


def test_a_simulated_run_starts_with_its_clock():
    from rocelab.labs.runtimes.sim import simulated
    from rocelab.traffic import patterns
    lab = simulated("roce-v2-leafspine")
    hosts = sorted(h.name for h in lab.topology.hosts)
    flows = patterns.start(lab, [patterns.FlowSpec(hosts[0], hosts[1], 4096, 1)],
                           pattern="t", timeout_s=5)
    assert flows.started()
    assert flows.wait()["complete"]
