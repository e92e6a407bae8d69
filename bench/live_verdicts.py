"""Whether live check runs decide on this machine: N back-to-back ``invoke check`` runs of
the default lab, or of a generated lab of R racks (each run with its own lab.up and
lab.down, as a user's quick start has), the share that decided every check, per scenario
the p99 lateness nearest its bound (one MTU frame time, ``fabric.client.fidelity``), the S
each lab.up chose, and any decided verdict that differs from the same checks in virtual
time, run first as the reference. ``hog``: a CPU-bound process holds one core throughout,
the loaded machine users also have."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.sim import cpu_jiffies, private_copy, timed_checks
from rocelab.checks.outcome import undecided
from rocelab.labs import generate
from rocelab.labs.generate_spec import Spec

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


def generated(dest: Path, racks: int) -> Path:
    """A lab of ``racks`` leaves of two 100G hosts each and two spines, generated afresh
    under a fresh name, its S left to lab.up (``invoke topo.generate``'s default)."""
    name = f"g{uuid.uuid4().hex[:6]}"
    folder = generate.write(Spec(name, hosts_per_leaf=2, leaves=racks), dest / name).path
    return folder / f"{name}.clab.yml"


@contextmanager
def hogging(on: bool) -> Iterator[subprocess.Popen | None]:
    """With ``on``, a CPU-bound process pinned to the last core for the block."""
    if not on:
        yield None
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(proc.pid, {(os.cpu_count() or 1) - 1})
        yield proc
    finally:
        proc.kill()
        proc.wait()


def measure(runs: int = RUNS, results: Path | None = None, racks: int = 0,
            hog: bool = False) -> dict:
    """``racks`` 0: the default lab; more: a generated lab of that many racks."""
    results = results or Path("results") / f"bench-live-verdicts-{time.strftime('%Y%m%d-%H%M%S')}"
    out: dict = {"runs": [], "cores": os.cpu_count(), "racks": racks, "hog": hog}
    with tempfile.TemporaryDirectory(prefix="rocelab-bench-") as tmp:
        lab = generated(Path(tmp), racks) if racks else private_copy(Path(tmp))
        reference = timed_checks(lab, "sim", results / "sim")
        out["sim"] = {"wall_s": reference["wall_s"], "counts": reference["counts"]}
        expected = verdicts(Path(reference["results"]))
        for n in range(runs):
            busy0, total0 = cpu_jiffies()
            with hogging(hog):
                run = timed_checks(lab, "netns", results / f"live-{n + 1}")
            busy1, total1 = cpu_jiffies()
            got = verdicts(Path(run["results"]))
            summary = json.loads((Path(run["results"]) / "summary.json").read_text())
            out["runs"].append({
                "wall_s": run["wall_s"], "exit": run["exit"], "counts": run["counts"],
                "time_scale": summary.get("time_scale"),
                "calibration": summary.get("calibration") or {},
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
