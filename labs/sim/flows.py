"""RoCE flows and PFC storms in virtual time: the same specs the live endpoints read
(``traffic.patterns.specs``), each host's NIC core (``nic.core.Nic``) on its wire.

A run is started (NICs built, their starts scheduled with the seed's jitter) and then
advanced by whoever waits on it: ``flowing`` runs the clock until a first byte is
acknowledged, ``wait`` until every flow is complete or the time limit. What else the caller
does meanwhile (a storm, pings) runs on the same clock, so it happens during the flows,
as it does live.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...fabric.model.frames import pfc_frame
from ...nic.settings import NicSettings
from .engine import few_collections, to_ps
from .host import SimHost
from ...nic.core import MAX_RATE_POINTS, Nic

if TYPE_CHECKING:
    from .hosts import SimHosts

START_JITTER_FABRIC_S = 1e-6  # flows start within this much fabric time of each other
DONE_POLL_FABRIC_S = 20e-6  # how often a run looks whether every flow is complete
RATE_SAMPLE_WALL_S = 0.005  # the live endpoint's rate-series interval, in live wall time
RATE_SAMPLE_MIN_FABRIC_S = 2e-6  # but no finer than this: a sample walks every QP of a NIC
RATE_POINTS = 1_000_000  # rate-series points over all senders: ~100 MB at fabric scale
STORM_QUANTA = 0xFFFF


class SimRunning:
    """Endpoints started in the engine; ``wait`` gives (each host's done report, elapsed)."""

    def __init__(self, lab: SimHosts, specs: dict[str, dict], timeout_s: float,
                 on_progress: Callable[[int], Any] | None = None) -> None:
        self.lab = lab
        self.engine = engine = lab.engine
        self.on_progress = on_progress
        senders = sum(len(spec["send"]) for spec in specs.values())
        self.points = max(50, min(MAX_RATE_POINTS, RATE_POINTS // max(1, senders)))
        self.addresses = lab.host_addresses()
        self.hops: dict[tuple[str, str], str] = {}  # (host, peer) -> next hop MAC, per run
        with few_collections():  # a fabric's QPs are millions of objects, all kept
            self.nics = {name: self._nic(name, spec) for name, spec in specs.items()}
        self.t0 = engine.now
        self.limit_ps = engine.now_ps + to_ps(lab.sim_s(timeout_s))
        self.done = False
        self._unfinished = list(self.nics.values())  # NICs with a flow not yet done
        self.acked = 0  # bytes acknowledged, as of the last look that summed them (``_look``)
        jitter = to_ps(START_JITTER_FABRIC_S * lab.time_scale)
        for name, nic in self.nics.items():
            host = lab.net.hosts[name]
            host.attach(nic, specs[name]["iface"])
            engine.at(engine.now_ps + lab.rng.randrange(jitter + 1), self._start, host)
        self.poll_ps = to_ps(DONE_POLL_FABRIC_S * lab.time_scale)
        engine.after(self.poll_ps, self._look)

    def _nic(self, name: str, spec: dict) -> Nic:
        lab = self.lab
        nic = Nic(NicSettings.model_validate(spec["nic"]),
                  spec["speed_mbps"] * 1e6 / lab.time_scale, lab.time_scale,
                  rate_sample_s=max(lab.sim_s(RATE_SAMPLE_WALL_S),
                                    RATE_SAMPLE_MIN_FABRIC_S * lab.time_scale),
                  max_rate_points=self.points)
        src_ip, src_mac = self.addresses[name], lab.mac(name, spec["iface"])
        for flow in spec["send"]:
            nic.add_sender(flow, nic.headers("data", **self._ends(name, src_mac, src_ip, flow)))
        for flow in spec["receive"]:
            ends = self._ends(name, src_mac, src_ip, flow)
            nic.add_receiver(flow, nic.headers("ack", **ends), nic.headers("cnp", **ends))
        return nic

    def _ends(self, name: str, src_mac: str, src_ip: str, flow: dict) -> dict:
        key = (name, flow["peer_ip"])
        if key not in self.hops:
            self.hops[key] = self.lab.next_hop_mac(*key)
        return dict(src_mac=src_mac, dst_mac=self.hops[key], src_ip=src_ip,
                    dst_ip=flow["peer_ip"], sport=flow["sport"])

    @staticmethod
    def _start(host: SimHost) -> None:
        host.nic.start(host.engine.now)
        host.kick()

    def _look(self) -> None:
        """Every DONE_POLL_FABRIC_S: whether every flow is done, and the bytes acknowledged,
        summed over every QP only while someone reads them (``on_progress``, or ``flowing``
        until the first): a 1023:1 incast has 4092 QPs, and summing them at every look was
        3 % of its run."""
        self._unfinished = [n for n in self._unfinished if not n.complete]
        self.done = not self._unfinished
        first = not self.acked
        if self.on_progress is not None or first:
            self.acked = sum(n.progress()["sent_bytes"] for n in self.nics.values())
        if self.done or first and self.acked:  # what ``flowing`` and ``wait`` wait for
            self.engine.halt()
        if self.on_progress is not None:
            self.on_progress(self.acked)
        if not self.done:
            self.engine.after(self.poll_ps, self._look)

    def started(self, timeout_s: float) -> bool:
        """At once: the run's clock (``t0``) started with it."""
        return True

    def flowing(self, timeout_s: float) -> bool:
        """Run the clock until a first byte is acknowledged (or ``timeout_s``, a live span)."""
        until = min(self.limit_ps, self.engine.now_ps + to_ps(self.lab.sim_s(timeout_s)))
        while not (self.acked > 0 or self.done) and self.engine.run(until):
            pass
        return self.acked > 0

    def wait(self) -> tuple[dict[str, dict], float]:
        engine = self.engine
        try:
            while not self.done and engine.run(self.limit_ps):
                pass
        finally:
            now = engine.now
            with few_collections():  # as many results, and rate series points
                done = {name: {"event": "done",
                               **nic.results(self.t0, now, timed_out=not nic.complete),
                               "kernel_rx_drops": 0, "tx_errors": 0}
                        for name, nic in self.nics.items()}
            for name in self.nics:
                self.lab.net.hosts[name].attach(None, None)
        return done, now - self.t0


class SimStorm:
    """A host pausing ``priority`` of its link for ``seconds`` of the lab's clock, each PFC
    frame (the largest pause) sent at half the pause time, so that its link partner's queue
    never resumes on its own. ``result`` runs the clock to the storm's end."""

    def __init__(self, lab: SimHosts, host: str, priority: int, seconds: float) -> None:
        self.lab = lab
        self.engine = lab.engine
        iface = lab.topology.interfaces(host)[0]
        self.wire = lab.net.wires[host, iface]
        self.frame = pfc_frame(bytes.fromhex(lab.mac(host, iface).replace(":", "")),
                               {priority: STORM_QUANTA})
        self.interval_ps = to_ps(STORM_QUANTA * 512 / self.wire.rate_bps / 2)
        self.end_ps = self.engine.now_ps + to_ps(seconds)
        self.priority = priority
        self.sent, self.first, self.last = 0, self.engine.now, self.engine.now
        self._send()

    def _send(self) -> None:
        if self.engine.now_ps >= self.end_ps:
            return
        self.wire.send(self.frame)
        self.sent += 1
        self.last = self.engine.now
        self.engine.after(self.interval_ps, self._send)

    def result(self) -> dict:
        self.engine.run(self.end_ps)
        return {"frames": self.sent, "first": self.first, "last": self.last,
                "priority": self.priority}
