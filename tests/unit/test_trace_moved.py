"""A trace samples only the ports the switch says may have moved (``sample_moved``): what it
has written must still be every port's whole state at every sample."""
from __future__ import annotations

from rocelab.checks import congestion as cg
from rocelab.checks import incast as ic
from rocelab.fabric.trace import Trace
from rocelab.labs import topology
from rocelab.labs.runtimes import sim
from rocelab.traffic import patterns
from tests.conftest import TOPOLOGIES

DEFAULT = TOPOLOGIES / "roce-v2-leafspine" / "roce-v2-leafspine.clab.yml"


def test_at_every_sample_of_a_pausing_incast_the_trace_holds_every_ports_state(
        monkeypatch, tmp_path):
    checked, paused, xoff = [], set(), set()
    poll = Trace.poll

    def poll_and_compare(self: Trace, now: float) -> bool:
        count = self.count
        going = poll(self, now)
        if self.count > count:  # a sample was written at ``now``
            whole = self.switch.sample(now, self.ports)["ports"]
            assert self.last_ports == whole, f"{self.header['node']} at {now}"
            checked.append(now)
            node = self.header["node"]
            paused.update((node, n) for n, e in whole.items() if any(e["pause_s"]))
            xoff.update((node, n) for n, e in whole.items() if any(e["xoff"]))
        return going

    monkeypatch.setattr(Trace, "poll", poll_and_compare)
    lab = sim.up(topology.load(str(DEFAULT)), 1.0, 3, 0.0)
    switches = [s.name for s in lab.topology.switches]
    for s in switches:
        lab.agent(s).trace_start(tmp_path / f"{s}.jsonl", interval_ms=cg.TRACE_INTERVAL_MS)
    incast = ic.incast_of(lab)  # the lossless check's incast: sized to reach XOFF
    result = patterns.run(lab, cg.load(lab, incast).flows, pattern="incast", timeout_s=30,
                          nic={"*": {"dcqcn": {"enabled": False}}})
    for s in switches:
        lab.agent(s).trace_stop()
    assert result["complete"]
    # the comparison saw what the shortcut could get wrong: pauses received counting down,
    # PGs in XOFF and back
    assert len(checked) > 1000 and paused and xoff
