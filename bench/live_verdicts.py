"""Whether live check runs decide on this machine: N back-to-back ``invoke check`` runs of
the default lab (each with its own lab.up and lab.down, as a user's quick start has), the
share that decided every check, per scenario the p99 lateness nearest its bound (one MTU
frame time, ``fabric.client.fidelity``), and any decided verdict that differs from the
same checks in virtual time, run first as the reference."""
from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from bench.sim import cpu_jiffies, private_copy, timed_checks
from rocelab.checks.outcome import undecided

RUNS = 10


def verdicts(folder: Path) -> dict[str, dict]:
    """Per check of a run: its outcome (``inconclusive`` when it could not decide), and
    the p99 lateness nearest its bound with the run that decided it."""
    summary = json.loads((folder / "summary.json").read_text())
    out = {}
    for check in summary["checks"]:
        fidelity = check.get("fidelity") or {}
        out[check["name"]] = {
            "outcome": "inconclusive" if undecided(check) else check["outcome"],
            "worst": fidelity.get("worst"), "rerun": bool(fidelity.get("rerun_of"))}
    return out


def measure(runs: int = RUNS, results: Path | None = None) -> dict:
    results = results or Path("results") / f"bench-live-verdicts-{time.strftime('%Y%m%d-%H%M%S')}"
    out: dict = {"runs": [], "cores": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="rocelab-bench-") as tmp:
        lab = private_copy(Path(tmp))
        reference = timed_checks(lab, "sim", results / "sim")
        out["sim"] = {"wall_s": reference["wall_s"], "counts": reference["counts"]}
        expected = verdicts(Path(reference["results"]))
        for n in range(runs):
            busy0, total0 = cpu_jiffies()
            run = timed_checks(lab, "netns", results / f"live-{n + 1}")
            busy1, total1 = cpu_jiffies()
            got = verdicts(Path(run["results"]))
            out["runs"].append({
                "wall_s": run["wall_s"], "exit": run["exit"], "counts": run["counts"],
                "machine_busy": (busy1 - busy0) / max(1, total1 - total0),
                "undecided": sorted(n_ for n_, v in got.items()
                                    if v["outcome"] == "inconclusive"),
                "reruns": sorted(n_ for n_, v in got.items() if v["rerun"]),
                "differs_from_sim": sorted(
                    n_ for n_, v in got.items()
                    if v["outcome"] in ("passed", "failed")
                    and expected.get(n_, {}).get("outcome") in ("passed", "failed")
                    and v["outcome"] != expected[n_]["outcome"]),
                "worst": {n_: v["worst"] for n_, v in got.items() if v["worst"]}})
    decided = [r for r in out["runs"] if not r["undecided"]]
    out["decided_share"] = len(decided) / len(out["runs"]) if out["runs"] else 0.0
    scenarios: dict[str, list[float]] = {}
    for r in out["runs"]:
        for name, worst in r["worst"].items():
            scenarios.setdefault(name, []).append(worst["ratio"])
    out["scenarios"] = {name: {"max_ratio": max(ratios), "median_ratio":
                               sorted(ratios)[len(ratios) // 2], "runs": len(ratios)}
                        for name, ratios in sorted(scenarios.items())}
    return out
