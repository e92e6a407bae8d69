"""The virtual-time runtime's benchmarks (``invoke bench --only sim``).

- engine speed: the default lab's lossless incast (the check's own sizing, DCQCN off) in
  simulation, in frame-hops per second (a frame crossing one wire) and events per second,
  with a profile of where the time goes; the compiled build's time over the pure-Python
  reference's on the same run (``build_ratio``);
- ``sim-suite``, on its own (it needs root and about five minutes of both cores): the
  default lab's whole check suite simulated, then the same suite live, back to back in this
  run on one private copy of the lab (``suite``; target: at most a tenth);
- side by side with htsim (``bench.sim_side``): all-to-all of 64 KiB per pair on 128 and
  512 hosts, htsim's own shape, both simulators in this run when ``--htsim`` names its
  binary (targets: rocelab/htsim at most 2 and 1);
- fabric scale, each in a child process so its peak memory is its own: 256 hosts at 400G,
  all-to-all of 64 KiB per pair (target: under 3 minutes and 2 GiB); 1024 hosts, ring
  all-reduce of 1 MiB per host (reported);
- the largest all-to-all fabric of the same shape that fits in 10 minutes, extrapolated
  from the 256-host run's frame-hops per second (an all-to-all's frames grow as N^2).
"""
from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import yaml

from rocelab.labs.calibrate import cpu_jiffies

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LAB = ROOT / "topologies" / "roce-v2-leafspine" / "roce-v2-leafspine.clab.yml"
WALL_BUDGET_S = 600.0
ALLTOALL_256_TARGET = {"wall_s": 180.0, "peak_rss_mib": 2048.0}  # at most
SUITE_TARGET = 0.1  # the simulated check suite's wall time over the live one's, at most


def _lab(path: Path):
    from rocelab.labs.runtimes.sim import simulated
    return simulated(str(path))


def frame_hops(lab) -> int:
    return sum(w.frames for w in lab.net.wires.values())


def engine_speed() -> dict:
    """The lossless incast of the checks, simulated; frame-hops/s and a profile."""
    profile = cProfile.Profile()
    profiled = incast_run(profile)
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(12)
    # the profiler slows every call alike; rates come from an unprofiled repeat
    run = incast_run()
    wall, hops, result = run["wall_s"], run["frame_hops"], profiled["result"]
    return {"complete": result["complete"], "simulated_s": result["elapsed_s"],
            "wall_s": wall, "frame_hops": hops, "frame_hops_per_s": hops / wall,
            "events": profiled["events"], "slowdown": wall / result["elapsed_s"],
            "profile_top": [line for line in text.getvalue().splitlines()
                            if "(" in line and "{" not in line][:12]}


def incast_run(profile: cProfile.Profile | None = None) -> dict:
    """The default lab's lossless incast (the check's own sizing, DCQCN off) on a fresh
    build of the lab, under ``profile`` if given: its wall s, frame-hops, events and
    ``patterns.run``'s result."""
    from rocelab.checks import incast as ic
    from rocelab.traffic import patterns
    lab = _lab(DEFAULT_LAB)
    incast = ic.incast_of(lab)
    mtu = patterns.nic_settings(lab.topology.nodes[incast.receiver], None).roce.mtu
    flows = incast.flows(4, 2, mtu)
    hops0, events0, start = frame_hops(lab), lab.engine.events, time.perf_counter()
    if profile is not None:
        profile.enable()
    result = patterns.run(lab, flows, pattern="incast", timeout_s=90,
                          nic={"*": {"dcqcn": {"enabled": False}}})
    if profile is not None:
        profile.disable()
    return {"wall_s": time.perf_counter() - start, "frame_hops": frame_hops(lab) - hops0,
            "events": lab.engine.events - events0, "result": result}


def build_ratio(pairs: int = 5) -> dict:
    """The compiled build against the pure-Python reference (``compiled.py``): the
    engine's incast in child processes, compiled then pure, ``pairs`` times in turn; the
    ratio of the median walls. Not measured when this machine has no current build."""
    from rocelab import compiled
    state = compiled.state()
    if state != "compiled":
        return {"state": state}
    walls: dict[str, list[float]] = {"compiled": [], "pure": []}
    code = "from bench.sim import incast_run; print(incast_run()['wall_s'])"
    for _ in range(pairs):
        for build, env in (("compiled", {}), ("pure", {compiled.PURE_ENV: "1"})):
            out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                                 capture_output=True, text=True, env={**os.environ, **env})
            walls[build].append(float(out.stdout.strip().splitlines()[-1]))
    return {"state": state, "pairs": pairs, "walls": walls,
            "ratio": statistics.median(walls["compiled"]) / statistics.median(walls["pure"])}


def private_copy(dest: Path) -> Path:
    """The default lab's folder copied under a fresh name: the live run brings it up and
    takes it down itself (a lab someone has running would otherwise be reused, its lab.up
    left out of the time), and nothing collides with a lab or run of the same name."""
    name = f"b{uuid.uuid4().hex[:6]}"
    folder = dest / name
    shutil.copytree(DEFAULT_LAB.parent, folder)
    source = folder / DEFAULT_LAB.name
    doc = yaml.safe_load(source.read_text())
    doc["name"] = name
    source.unlink()
    path = folder / f"{name}.clab.yml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def timed_checks(lab: Path, runtime: str, results: Path) -> dict:
    """One ``invoke check`` of ``lab``: wall time (a live one's lab.up and lab.down
    included, as a user waits for them), the checks' own time, what ran, and how busy the
    machine was meanwhile (other work on it slows a live run more than a simulated one)."""
    from rocelab.checks import run as checks
    said: list[tuple[float, str]] = []
    load0, (busy0, total0) = os.getloadavg()[0], cpu_jiffies()
    start = time.perf_counter()
    code, folder = checks.run(str(lab), runtime=runtime, results=results,
                              say=lambda line: said.append((time.perf_counter() - start, line)))
    wall = time.perf_counter() - start
    busy1, total1 = cpu_jiffies()
    summary = json.loads((folder / "summary.json").read_text())
    return {"wall_s": wall, "checks_s": summary["duration"], "exit": code,
            "status": summary["status"], "counts": summary["counts"],
            "outcomes": {c["name"]: c["outcome"] for c in summary["checks"]},
            "machine_busy": (busy1 - busy0) / max(1, total1 - total0),
            "load_1min": [load0, os.getloadavg()[0]], "cores": os.cpu_count(),
            "said": [[round(t, 1), line] for t, line in said], "results": str(folder)}


def suite(results: Path | None = None) -> dict:
    """The default lab's whole check suite simulated, then live, back to back on one
    private copy; the ratio of their wall times (target ``SUITE_TARGET``) and of the
    checks' own times. ``comparable`` holds when both ran the same checks; a live run that
    lost fidelity still took its wall time, and says so in its outcomes."""
    results = results or Path("results") / f"bench-suite-{time.strftime('%Y%m%d-%H%M%S')}"
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="rocelab-bench-") as tmp:
        lab = private_copy(Path(tmp))
        out["lab"] = lab.stem
        for runtime in ("sim", "netns"):
            out[runtime] = timed_checks(lab, runtime, results / runtime)
    sim, live = out["sim"], out["netns"]
    out["ratio"] = sim["wall_s"] / live["wall_s"]
    out["checks_ratio"] = sim["checks_s"] / live["checks_s"]
    out["comparable"] = set(sim["outcomes"]) == set(live["outcomes"])
    return out


def scale(pattern: str, lab: str, size: int, timeout_s: float = 3600) -> dict:
    """One pattern on a large lab in a child process: wall time, peak memory, rates."""
    proc = subprocess.run([sys.executable, "-m", "bench.sim", pattern, lab, str(size)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_pattern(pattern: str, lab_name: str, size: int) -> dict:
    """The child's work: build the lab, run the pattern, say what it cost."""
    from rocelab.traffic import patterns
    start = time.perf_counter()
    lab = _lab(ROOT / "topologies" / lab_name / f"{lab_name}.clab.yml")
    hosts = sorted(h.name for h in lab.topology.hosts)
    built = time.perf_counter() - start
    flows = (patterns.alltoall(hosts, size, 1, 1) if pattern == "alltoall"
             else patterns.ring_allreduce(hosts, size))
    result = patterns.run(lab, flows, pattern=pattern, timeout_s=3600)
    wall = time.perf_counter() - start
    hops = frame_hops(lab)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"lab": lab_name, "pattern": pattern, "hosts": len(hosts),
            "switches": len(lab.topology.switches), "flows": len(flows), "size": size,
            "complete": result["complete"], "simulated_s": result["elapsed_s"],
            "build_s": built, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "frame_hops": hops,
            "frame_hops_per_s": hops / (wall - built), "events": lab.engine.events,
            "peak_rss_mib": usage.ru_maxrss / 1024}


def largest_alltoall(run: dict) -> int:
    """Hosts of the same fabric shape whose 64 KiB all-to-all fits WALL_BUDGET_S, from a
    measured run: frame-hops grow as N(N-1), the rate is taken as it was."""
    per_pair = run["frame_hops"] / (run["hosts"] * (run["hosts"] - 1))
    budget = run["frame_hops_per_s"] * (WALL_BUDGET_S - run["build_s"])
    n = run["hosts"]
    while (n + 1) * n * per_pair <= budget:
        n += 1
    while n > 2 and n * (n - 1) * per_pair > budget:
        n -= 1
    return n


def alltoall_256_holds(run: dict) -> bool | None:
    """The 256-host all-to-all's target: complete, within its wall time and memory."""
    if "wall_s" not in run:
        return None
    return run["complete"] and all(run[k] <= v for k, v in ALLTOALL_256_TARGET.items())


def measure(hosts: list[int] | None = None, htsim: str | None = None) -> dict:
    """The engine's speed, the side-by-side cases (``hosts``, default 128 and 512) and the
    fabric runs (``suite`` is a bench of its own)."""
    from bench import sim_side
    out = {"engine": engine_speed(), "build": build_ratio(),
           "side_by_side": sim_side.measure(hosts or list(sim_side.TARGETS), htsim)}
    a2a = scale("alltoall", "sizing-256", 64 * 1024)
    a2a["target_holds"] = alltoall_256_holds(a2a)
    out["alltoall_256"] = a2a
    if "frame_hops" in a2a:
        out["largest_alltoall_in_10_min"] = largest_alltoall(a2a)
    out["allreduce_1024"] = scale("allreduce", "sizing-1024", 1 << 20)
    return out


if __name__ == "__main__":
    print(json.dumps(run_pattern(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
