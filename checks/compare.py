"""``invoke sim.compare LAB``: each congestion scenario run live and in virtual time at the
live lab's S, side by side.

The runs are ordinary check runs (``checks.run``) into their own results folders: one live,
and one simulated per seed. A live run has randomness no one chooses (when each host's
first frame leaves, how the scheduler interleaves the agents); in the simulator the seed
stands for it (start jitter, ECMP and WRED draws). Some scenarios barely depend on it (a
PFC-only incast); others do (with DCQCN, a few PFC frames or none, completion within about
20 %, depending on the seed). So the live run is compared with the spread of several seeds,
not with one draw of it.

The simulated runs are given the live run's timing jitter (``live_jitter_s``): the live
shells take frames some tens of microseconds late, the simulator's clocks are exact, and a
scenario that turns every phase difference into drops (small headroom) paused 17 % longer
with exact clocks than live. ``jitter_ns=0`` compares with exact clocks instead.

The table is read from what the runs wrote: each check's outcome (summary.json) and each
scenario's figures (``congestion/<scenario>/summary.json``): PFC frames sent, seconds
paused (switches and hosts, every priority), completion time, frames lost. Agreement: the
live verdict is every seed's verdict, and each live figure lies within the seeds' range or
within TOLERANCE of its nearer end (both zero counts as agreement); frames lost agree when
both runs lost some or both none.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import run as checks
from ..labs import topology

TOLERANCE = 0.15
SCENARIOS = "congestion and not storm and not dscp"  # the incast scenarios
FIGURES = ("pfc_sent", "paused_s", "elapsed_s", "lost")
# Frames lost (drops beyond the lossy class's own, retransmissions) decide a lossless
# verdict by being there or not; how many a lossy class loses follows RC's go-back-N
# timing, not the fabric's configuration.
PRESENCE = ("lost",)


@dataclass
class Row:
    scenario: str
    live: dict
    sims: list[dict]  # one per seed

    def span(self, figure: str) -> tuple[float, float] | None:
        """The simulated runs' lowest and highest value of ``figure``."""
        values = [s[figure] for s in self.sims if s.get(figure) is not None]
        return (min(values), max(values)) if values else None

    def agrees(self, figure: str) -> bool:
        a, span = self.live.get(figure), self.span(figure)
        if a is None or span is None:
            return False
        lo, hi = span
        if figure in PRESENCE:  # what decides a verdict: lost or not, not how many
            return all((a > 0) == (b > 0) for b in span)
        return lo <= a <= hi or any(
            a == b or abs(a - b) <= TOLERANCE * max(abs(a), abs(b)) for b in span)

    @property
    def sim_verdicts(self) -> set:
        return {s.get("verdict") for s in self.sims}

    @property
    def verdicts_agree(self) -> bool:
        """The live verdict is every seed's; a live run that lost fidelity has none, so it
        cannot differ."""
        live = self.live.get("verdict")
        return live == "inconclusive" or self.sim_verdicts == {live}


def _means(results: Path, scenarios: Sequence[str]) -> Iterator[tuple[str, int, float]]:
    """(kind, count, mean seconds) of every lateness figure the given scenarios of a live
    run recorded: each switch port's scheduler (``lateness``) and delay line
    (``arrival_lateness``) over the run (``counters.json``, after), and each host's delay
    line (``flows.json``)."""
    for folder in (results / "congestion" / name for name in sorted(scenarios)):
        counters, flows = folder / "counters.json", folder / "flows.json"
        if counters.exists():
            for switch in json.loads(counters.read_text()).get("after", {}).values():
                for port in switch.get("ports", {}).values():
                    for kind, fig in (port.get("fidelity") or {}).items():
                        if kind in ("lateness", "arrival_lateness"):
                            yield kind, fig["count"], fig["mean_s"]
        if flows.exists():
            for host in json.loads(flows.read_text()).get("hosts", {}).values():
                if "arrival_lateness" in host:
                    fig = host["arrival_lateness"]
                    yield "arrival_lateness", fig["count"], fig["mean_s"]


def live_jitter_s(results: Path, time_scale: float, scenarios: Sequence[str]) -> float:
    """The live run's mean timing error per frame per hop, in fabric seconds: how late a
    switch port sent a frame, plus how late a switch or host took a frame after its cable
    time, each a mean over every frame (or release) of the given scenarios, divided by S.
    A frame's lateness is the sum of the two: its arrival is reckoned from when it was
    sent. Give the scenarios that kept fidelity: a lost one's stalls are not the jitter
    the others ran with."""
    totals: dict[str, list[float]] = {}
    for kind, count, mean in _means(results, scenarios):
        total = totals.setdefault(kind, [0, 0.0])
        total[0] += count
        total[1] += count * mean
    wall = sum(t / n for n, t in totals.values() if n)
    return wall / time_scale


def figures(results: Path) -> dict[str, dict]:
    """Per scenario folder: its figures, and the verdict of the check that ran it."""
    summary = json.loads((results / "summary.json").read_text())
    out: dict[str, dict] = {}
    for path in sorted((results / "congestion").glob("*/summary.json")):
        run = json.loads(path.read_text())
        lost = sum(n for reason, n in run["drops"].items() if reason != "lossy_limit") \
            + run["retransmitted"]
        out[path.parent.name] = {"pfc_sent": run["pfc_sent"], "paused_s": run["paused_s"],
                                 "elapsed_s": run["elapsed_s"], "lost": lost,
                                 "fidelity_ok": run["fidelity"].get("ok", True)}
    verdicts = {c["name"]: c["outcome"] for c in summary["checks"]}
    for scenario, check in SCENARIO_CHECKS.items():
        if scenario in out:
            out[scenario]["verdict"] = verdicts.get(check)
    return out


SCENARIO_CHECKS = {"lossless": "test_lossless_incast",
                   "without-pfc": "test_negative_control_without_pfc",
                   "dcqcn": "test_ecn_before_pfc", "lossy": "test_lossy_class_drops_and_never_pauses",
                   "small-headroom": "test_headroom_too_small_drops"}


def compare(spec: str, results: Path, say: Callable[[str], None] = print,
            seeds: Sequence[int] = (0, 1, 2, 3, 4),
            jitter_ns: float | None = None) -> tuple[list[Row], float]:
    """Run the scenarios live (bringing the lab up if needed), then simulated at its S once
    per seed, with the live run's timing jitter unless ``jitter_ns`` is given; the rows
    and the jitter (fabric ns) the simulated runs had."""
    if not seeds:
        raise ValueError("sim.compare needs at least one seed")
    topo = topology.load(spec)
    scale = max(n.time_scale for n in topo.switches)
    live_dir = results / "live"
    say(f"live run of {topo.name} at S = {scale:g}")
    checks.run(spec, k=SCENARIOS, results=live_dir, say=say)
    live = figures(live_dir)
    if jitter_ns is None:
        kept = [name for name, run in live.items() if run.get("verdict") != "inconclusive"]
        jitter_ns = live_jitter_s(live_dir, scale, kept) * 1e9
        say(f"the live run's timing jitter: {jitter_ns:.3g} ns per hop (fabric time)")
    sims: dict[int, dict[str, dict]] = {}
    for seed in seeds:
        say(f"simulated run of {topo.name} at S = {scale:g}, seed {seed}")
        sim_dir = results / f"sim-seed{seed}"
        checks.run(spec, k=SCENARIOS, results=sim_dir, runtime="sim", say=say,
                   extra=["--time-scale", str(scale), "--seed", str(seed),
                          "--jitter-ns", repr(jitter_ns)])
        sims[seed] = figures(sim_dir)
    rows = [Row(name, live[name], [run[name] for run in sims.values()])
            for name in live if all(name in run for run in sims.values())]
    (results / "compare.json").write_text(json.dumps(
        [{"scenario": r.scenario, "live": r.live, "seeds": list(seeds), "jitter_ns": jitter_ns,
          "sim": r.sims,
          "verdicts_agree": r.verdicts_agree,
          "agree": {f: r.agrees(f) for f in FIGURES}} for r in rows], indent=1) + "\n")
    return rows, jitter_ns
