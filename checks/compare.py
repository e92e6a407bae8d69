"""``invoke sim.compare LAB``: each congestion scenario run live and in virtual time at the
live lab's S, side by side.

Both runs are ordinary check runs (``checks.run``) into two results folders; the table is
read from what they wrote: each check's outcome (summary.json) and each scenario's figures
(``congestion/<scenario>/summary.json``): PFC frames sent, seconds paused (switches and
hosts, every priority), completion time, frames lost. Agreement: the same verdict, and each
figure within TOLERANCE of the other (both zero counts as agreement).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from checks import run as checks
from labs import topology

TOLERANCE = 0.15
SCENARIOS = "congestion and not storm and not dscp"  # the incast scenarios
FIGURES = ("pfc_sent", "paused_s", "elapsed_s", "lost")


@dataclass
class Row:
    scenario: str
    live: dict
    sim: dict

    def agrees(self, figure: str) -> bool:
        a, b = self.live.get(figure), self.sim.get(figure)
        if a is None or b is None:
            return False
        if a == b:
            return True
        return abs(a - b) <= TOLERANCE * max(abs(a), abs(b))

    @property
    def verdicts_agree(self) -> bool:
        """The same verdict; a live run that lost fidelity has none, so it cannot differ."""
        live = self.live.get("verdict")
        return live == "inconclusive" or live == self.sim.get("verdict")


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
            seed: int = 0) -> list[Row]:
    """Run the scenarios live (bringing the lab up if needed) and simulated at its S."""
    topo = topology.load(spec)
    scale = max(n.time_scale for n in topo.switches)
    live_dir, sim_dir = results / "live", results / "sim"
    say(f"live run of {topo.name} at S = {scale:g}")
    checks.run(spec, k=SCENARIOS, results=live_dir, say=say)
    say(f"simulated run of {topo.name} at S = {scale:g}")
    checks.run(spec, k=SCENARIOS, results=sim_dir, runtime="sim", say=say,
               extra=["--time-scale", str(scale), "--seed", str(seed)])
    live, sim = figures(live_dir), figures(sim_dir)
    rows = [Row(name, live[name], sim[name]) for name in live if name in sim]
    (results / "compare.json").write_text(json.dumps(
        [{"scenario": r.scenario, "live": r.live, "sim": r.sim,
          "verdicts_agree": r.verdicts_agree,
          "agree": {f: r.agrees(f) for f in FIGURES}} for r in rows], indent=1) + "\n")
    return rows
