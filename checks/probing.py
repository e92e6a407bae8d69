"""One forwarding probe and the switches' counters around it, its evidence saved.

A probe reads the counters of the switches on its path only (``checks.paths``): every
switch's, read three times per probe, is what made the forwarding checks scale with hosts
x switches. Every wire is still captured, so a frame that reaches a switch off that path
is seen, and that switch is read too (``send``).
"""
from __future__ import annotations

from dataclasses import dataclass

from . import roce
from .paths import Paths
from ..traffic.probe import ProbeResult, probe

COUNT = 3  # frames per probe: enough to tell "all" from "some", cheap to capture


@dataclass
class Run:
    """One probe and the counters around it: ``before`` of the switches it may cross
    (``switches``), ``after`` of those its frames reached."""

    result: ProbeResult
    before: dict
    after: dict
    label: str
    switches: frozenset[str]

    def delta(self) -> dict:
        return roce.delta(self.before, self.after)


def send(lab, evidence, paths: Paths, src: str, dst: str, kind: str, **kw) -> Run:
    """Probe, with counters read before on the switches of its path (``checks.paths``:
    every ECMP candidate, since which one a hash picks is not known in advance) and after
    on those its frames reached (the sightings say which: a switch no frame reached
    counted none of them); sightings, counters and pcaps saved.

    Every wire is captured, so a frame that reached a switch off that path is seen: the
    probe is then sent again with that switch read too, and the Run returned has the
    counters of every switch its frames reached."""
    read = paths.between(src, dst, routed=kind == "v2")
    while True:
        run = _send(lab, evidence, read, src, dst, kind, **kw)
        off = reached(run.result) - read
        if not off:
            return run
        read |= off


def reached(result: ProbeResult) -> frozenset[str]:
    """The switches a probe's frames reached."""
    return frozenset(result.received_by() - result.hosts)


def _send(lab, evidence, read: frozenset[str], src: str, dst: str, kind: str, **kw) -> Run:
    label = evidence.next(f"{kind}-{src}-{dst}" + "".join(f"-{k}{v}" for k, v in kw.items()))
    before = roce.snapshot(lab, read)
    result = probe(lab, src, dst, kind, count=COUNT, pcap_dir=evidence.path(f"{label}-pcap"),
                   **kw)
    after = roce.settled(lab, switches=reached(result) & read)
    run = Run(result, before, after, label, read)
    evidence.json(f"{label}-probe", {
        "probe": {"kind": kind, "src": src, "dst": dst, "count": COUNT, **kw},
        "verdict": result.verdict(),
        "counters_read": {"before": sorted(read), "after": sorted(after)},
        "off_path": sorted(reached(result) - read),
        "capture_drops": result.capture_drops,
        "sent": [roce.describe(frame) for frame in result.sent],
        "sightings": [{"node": s.node, "iface": s.iface, "dir": s.direction,
                       "t": round(s.time, 6), **roce.describe(s.frame, s.info)}
                      for s in sorted(result.sightings, key=lambda s: s.time)],
    })
    # the ports the probe moved, before and after: every switch's would be 10 MB per probe
    # on a 256-host fabric, and nearly all of it the same twice
    moved = run.delta()
    evidence.json(f"{label}-counters", {"delta": moved,
                                        "before": roce.trimmed(before, moved),
                                        "after": roce.trimmed(after, moved)})
    assert not result.capture_drops, (
        f"{kind} {src}->{dst}: the capture lost {result.capture_drops} frames, so its "
        "sightings are incomplete; nothing can be concluded")
    return run
