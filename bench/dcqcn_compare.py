"""The byte-counter question, settled by two readings of the firmware's rules.

With the firmware's byte counter (``rpg_byte_reset`` 32767 bytes) our reaction point swings
between the floor and line rate. Either the firmware's rules do that, or ``nic.dcqcn``
misreads them. ``nic.dcqcn_reference`` is a second reaction point written from the
parameter descriptions alone; this script drives both with the same events and compares
their rates after every one.

The events are recorded, not synthesised: the default lab's incast (the ECN check's shape:
every sender of its worst incast, 4 QPs each, 8 ms of the bottleneck at line rate) is
simulated with the NIC file's DCQCN and ``rpg_byte_reset`` as given, and every CNP that
reaches a sender's reaction point and every frame it sends are recorded per QP, with their
fabric time. Each QP's sequence is then replayed into a fresh ``FirmwareReactionPoint``
(through the NIC settings, as the simulator builds it) and a fresh reference, and the rates
are compared after every recorded event and every timer end of either model in between.

    python -m bench.dcqcn_compare [--lab CLAB] [--byte-reset 32767] [--seed 0] [--out DIR]

writes ``DIR/dcqcn-compare.json`` (per QP: events, points compared, the first difference)
and ``DIR/dcqcn-compare.png`` (both models' rates of the busiest QP over time).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from unittest import mock

from rocelab.nic.dcqcn import ReactionPoint

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LAB = ROOT / "topologies" / "roce-v2-leafspine" / "roce-v2-leafspine.clab.yml"
QPS = 4
MESSAGES = 2
RUN_S = 8e-3  # fabric seconds of the bottleneck at line rate, as the ECN check
REL_TOL = 1e-9  # rates agree when within this share of each other (float rounding only)

Event = tuple  # (t, "cnp") or (t, "bytes", n)


@dataclass
class Recorded:
    """One QP's reaction-point inputs, in the order the simulator gave them."""

    events: list[Event] = field(default_factory=list)


class _Recorder(ReactionPoint):
    """Stands in front of the simulator's reaction point and writes down its inputs (a
    ``ReactionPoint``, as the compiled NIC takes no other)."""

    def __init__(self, rp: ReactionPoint, into: Recorded) -> None:
        self._rp, self._into = rp, into

    def on_cnp(self, now: float) -> None:
        self._into.events.append((now, "cnp"))
        self._rp.on_cnp(now)

    def on_bytes_sent(self, n: int, now: float) -> None:
        self._into.events.append((now, "bytes", n))
        self._rp.on_bytes_sent(n, now)

    def advance(self, now: float) -> None:
        self._rp.advance(now)

    def rate(self, now: float) -> float:
        return self._rp.rate(now)

    def next_event(self, now: float) -> float | None:
        return self._rp.next_event(now)


@contextmanager
def recording() -> Iterator[list[Recorded]]:
    """Every reaction point the simulator's NICs make, recorded (``nic.core.Nic`` makes
    them in one place, ``_reaction_point``, through its module's ``reaction_point``: the
    module is what is patched, the compiled build's classes cannot be)."""
    from rocelab.nic import core
    qps: list[Recorded] = []
    make = core.reaction_point

    def recorded(params):
        qps.append(Recorded())
        return _Recorder(make(params), qps[-1])

    with mock.patch.object(core, "reaction_point", recorded):
        yield qps


def record(lab_path: Path, byte_reset: int, seed: int, run_s: float = RUN_S
           ) -> tuple[list[Recorded], dict, float]:
    """Simulate the lab's ECN-check incast (``run_s`` of the bottleneck at line rate) with
    ``byte_reset`` and record every QP's events; also return the sender's DCQCN settings
    (mlxconfig units) and its line rate."""
    from rocelab.checks import incast as ic
    from rocelab.labs.runtimes.sim import simulated
    from rocelab.traffic import patterns
    lab = simulated(str(lab_path), seed=seed)
    incast = ic.incast_of(lab)
    mtu = ic.roce_mtu(lab, incast)
    line_bps = ic.bottleneck_bps(lab, incast)
    per_message = line_bps * run_s / 8 / (len(incast.senders) * QPS * MESSAGES)
    size = math.ceil(per_message / mtu) * mtu
    flows = patterns.incast(incast.receiver, list(incast.senders), size, MESSAGES, QPS)
    nic = {"*": {"dcqcn": {"rpg_byte_reset": byte_reset}}}
    dcqcn = patterns.nic_settings(lab.topology.nodes[incast.senders[0]], nic).dcqcn
    with recording() as qps:
        result = patterns.run(lab, flows, pattern="incast", timeout_s=90, nic=nic)
    if not result["complete"]:
        raise RuntimeError(f"{lab_path}: the incast did not complete in simulation")
    settings = {k: v for k, v in dcqcn.model_dump().items()
                if k not in ("enabled", "mode") and v is not None}
    return [q for q in qps if q.events], settings, line_bps


def models(settings: dict, line_bps: float, grid_cuts: bool):
    """Ours, built as the simulator builds it (settings -> params), and the reference from
    the same mlxconfig values, with its cut-timing reading."""
    from rocelab.nic.dcqcn import reaction_point
    from rocelab.nic.dcqcn_reference import MlxParams, ReferenceReactionPoint
    from rocelab.nic.settings import DcqcnSettings
    ours = reaction_point(DcqcnSettings(mode="firmware", **settings).to_params(line_bps))
    fields = {k: v for k, v in settings.items() if k in MlxParams.__dataclass_fields__}
    return ours, ReferenceReactionPoint(MlxParams(line_rate_mbps=line_bps / 1e6, **fields),
                                       grid_cuts=grid_cuts)


def compare(events: list[Event], settings: dict, line_bps: float, *, grid_cuts: bool,
            series: list | None = None) -> dict:
    """Replay ``events`` into both models; after each event, and at every timer end of
    either model between events, compare the rates. The first difference, if any, with
    what happened there; ``series`` collects (t, ours, reference) points. Past a difference
    the replay goes on (the events are recorded, so neither model feeds back), and the
    swing of each, the share of the time at under 10 % or over 90 % of line rate, shows
    whether a difference changes the picture."""
    ours, ref = models(settings, line_bps, grid_cuts)
    swing = Swing(line_bps)
    first = None
    points = 0
    end = events[-1][0] if events else 0.0
    queue = list(events)
    index = 0
    t = 0.0
    while index < len(queue):
        upcoming = queue[index][0]
        timers = [x for x in (ours.next_event(t), _ref_next(ref)) if x is not None and x < upcoming]
        if timers:
            t, what = min(timers), ("timer",)
            ours.advance(t)
            ref.advance(t)
        else:
            what = queue[index]
            t = what[0]
            index += 1
            if what[1] == "cnp":
                ours.on_cnp(t)
                ref.on_cnp(t)
            else:
                ours.on_bytes_sent(what[2], t)
                ref.on_bytes_sent(what[2], t)
        a, b = ours.rate(t), ref.rate(t)
        points += 1
        swing.add(t, a, b)
        if series is not None:
            series.append((t, a, b))
        if first is None and not math.isclose(a, b, rel_tol=REL_TOL):
            first = {"t_s": t, "event": list(what), "ours_bps": a, "reference_bps": b,
                     "reference_state": _state(ref),
                     "before": [list(e) for e in queue[max(0, index - 6):index]]}
    out = {"points": points, "agree": first is None, "end_s": end, "swing": swing.shares()}
    return out if first is None else {**out, "first_difference": first}


class Swing:
    """Time-weighted shares of a rate series near the floor (< 10 % of line) and near line
    rate (> 90 %), for ours and the reference."""

    def __init__(self, line_bps: float) -> None:
        self.line = line_bps
        self.last: tuple[float, float, float] | None = None
        self.time = {"ours": [0.0, 0.0], "reference": [0.0, 0.0]}
        self.total = 0.0

    def add(self, t: float, ours: float, ref: float) -> None:
        if self.last is not None:
            dt = t - self.last[0]
            self.total += dt
            for name, rate in (("ours", self.last[1]), ("reference", self.last[2])):
                self.time[name][0] += dt * (rate < 0.1 * self.line)
                self.time[name][1] += dt * (rate > 0.9 * self.line)
        self.last = (t, ours, ref)

    def shares(self) -> dict:
        total = self.total or 1.0
        return {name: {"under_10pct": round(low / total, 3), "over_90pct": round(high / total, 3)}
                for name, (low, high) in self.time.items()}


def _ref_next(ref) -> float | None:
    due = ref.next_rate_change_ps()
    return None if due is None else due / 1e12


def _state(ref) -> dict:
    return {"rc_bps": ref.rc, "rt_bps": ref.rt, "alpha": ref.alpha, "time_stages": ref.i,
            "byte_stages": ref.j, "bytes_counted": ref.byte_count}


def plot(series: list, path: Path, title: str) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(9, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ts = [p[0] * 1e3 for p in series]
    ax.step(ts, [p[1] / 1e9 for p in series], where="post", label="nic.dcqcn (ours)", lw=2.5)
    ax.step(ts, [p[2] / 1e9 for p in series], where="post", label="nic.dcqcn_reference",
            lw=1, ls="--")
    ax.set_xlabel("fabric time (ms)")
    ax.set_ylabel("current rate Rc (Gb/s)")
    ax.set_title(title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


READINGS = {"as-written": False, "grid-cuts": True}  # the reference's cut-timing readings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", type=Path, default=DEFAULT_LAB)
    parser.add_argument("--byte-reset", type=int, default=32767)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results"))
    args = parser.parse_args(argv)
    qps, settings, line_bps = record(args.lab, args.byte_reset, args.seed)
    report = {"lab": str(args.lab), "seed": args.seed, "line_rate_bps": line_bps,
              "dcqcn": settings, "readings": {}}
    for reading, grid_cuts in READINGS.items():
        results = []
        for n, qp in enumerate(qps):
            out = compare(qp.events, settings, line_bps, grid_cuts=grid_cuts)
            results.append({"qp": n, "events": len(qp.events),
                            "cnps": sum(e[1] == "cnp" for e in qp.events), **out})
        report["readings"][reading] = {"agree": all(r["agree"] for r in results),
                                       "qps": results}
        print(f"reference read {reading}:")
        for r in results:
            where = "" if r["agree"] else f"; first difference {r['first_difference']}"
            sw = r["swing"]
            print(f"  QP {r['qp']:2}: {r['events']:6} events, {r['cnps']:4} CNPs, "
                  f"{r['points']:6} points {'agree' if r['agree'] else 'DIFFER'}; "
                  f"time under 10 % / over 90 % of line: ours "
                  f"{sw['ours']['under_10pct']:.0%} / {sw['ours']['over_90pct']:.0%}, "
                  f"reference {sw['reference']['under_10pct']:.0%} / "
                  f"{sw['reference']['over_90pct']:.0%}{where}")
    grid = report["readings"]["grid-cuts"]["qps"]
    busiest = max(range(len(qps)), key=lambda n: grid[n]["cnps"])
    series: list = []
    compare(qps[busiest].events, settings, line_bps, grid_cuts=True, series=series)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dcqcn-compare.json").write_text(json.dumps(report, indent=1) + "\n")
    plot(series, args.out / "dcqcn-compare.png",
         f"{args.lab.stem}, rpg_byte_reset {args.byte_reset}, seed {args.seed}: QP {busiest} "
         f"({grid[busiest]['cnps']} CNPs), ours and the reference (grid cuts)")
    agree = report["readings"]["grid-cuts"]["agree"]
    print(f"{'agree' if agree else 'differ'} (grid-cuts reading): {args.out}/dcqcn-compare.json")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
