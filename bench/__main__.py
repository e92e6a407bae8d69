"""Run the benchmarks, print a table, keep the numbers in results/bench-<time>.json."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench import forwarding, incast, lifecycle, live_verdicts, sim, sim_side


def incast_table(cast: dict) -> Table:
    """Per S, the incast's verdict and evidence; the caption is the issue's answer."""
    table = Table(title=f"incast fidelity vs emulated rate (3:1 to h1 on {cast['lab']}, "
                        f"DSCP {cast['dscp']}, ~{cast['drain_s']:g} s drain; an S passes if "
                        f"all {cast['tries']} tries do)")
    for col in incast.COLUMNS:
        table.add_column(col, overflow="fold")
    for row in incast.rows(cast):
        table.add_row(*row)
    if cast["best_time_scale"] is None:
        table.caption = "no S kept fidelity without losing a lossless frame"
    else:
        table.caption = (f"highest rate with fidelity and no lossless loss: "
                         f"{cast['best_port_rate_mbps']:,.2f} Mb/s per port "
                         f"(S = {cast['best_time_scale']:g})"
                         + ("" if cast["clean_edge"] else "; edge not clean, repeat"))
    return table


BENCHES = ("lifecycle", "forwarding", "incast", "sim", "sim-suite", "live-verdicts")
ROOTLESS = {"sim"}  # the simulator builds no namespace


def sim_rows(table: Table, out: dict) -> None:
    """The simulator's figures as rows of the benchmark table."""
    eng = out["engine"]
    table.add_row("sim engine, lossless incast", f"{eng['frame_hops_per_s']:,.0f} frame-hops/s",
                  f"{eng['simulated_s'] * 1e3:.2f} ms simulated in {eng['wall_s']:.1f} s",
                  f"{eng['slowdown']:,.0f}x slower than real time", "report")
    build = out.get("build", {})
    if "ratio" in build:
        table.add_row("compiled build, same incast",
                      f"{build['ratio']:.2f}x pure Python's time",
                      f"median of {build['pairs']} runs each, in turn", "", "report")
    elif build:
        table.add_row("compiled build", build["state"], "", "", "report")
    sim_side.rows(table, out["side_by_side"])
    a2a_target = (f"<= {sim.ALLTOALL_256_TARGET['wall_s']:.0f} s, <= "
                  f"{sim.ALLTOALL_256_TARGET['peak_rss_mib'] / 1024:g} GiB: "
                  + sim_side.verdict(out.get("alltoall_256", {}).get("target_holds")))
    for key, label, target in (("alltoall_256", "256 hosts all-to-all 64 KiB", a2a_target),
                               ("allreduce_1024", "1024 hosts all-reduce 1 MiB", "report")):
        run = out.get(key, {})
        if "wall_s" in run:
            table.add_row(label, f"{run['wall_s']:.0f} s ({run['cpu_s']:.0f} s CPU), "
                                 f"{run['peak_rss_mib']:,.0f} MiB",
                          f"{run['simulated_s'] * 1e3:.2f} ms simulated, "
                          f"{run['frame_hops_per_s']:,.0f} frame-hops/s",
                          "complete" if run["complete"] else "INCOMPLETE", target)
        else:
            table.add_row(label, f"failed: {run.get('error')}", "", "", target)
    if "largest_alltoall_in_10_min" in out:
        table.add_row("largest 64 KiB all-to-all in 10 min", f"{out['largest_alltoall_in_10_min']} hosts",
                      "extrapolated from the 256-host run", "", "report")


def suite_rows(table: Table, suite: dict) -> None:
    """The check suite simulated and live, measured back to back in this run."""
    simulated, live = suite["sim"], suite["netns"]
    same = "same checks" if suite["comparable"] else "DIFFERENT checks ran"
    table.add_row("check suite, sim vs live (wall)", f"{simulated['wall_s']:.0f} s",
                  f"{live['wall_s']:.0f} s live, lab.up/down included ({same})",
                  f"{suite['ratio']:.2f}x", f"<= {sim.SUITE_TARGET:g}x: "
                  + sim_side.verdict(suite["ratio"] <= sim.SUITE_TARGET))
    table.add_row("check suite, sim vs live (checks only)", f"{simulated['checks_s']:.0f} s",
                  f"{live['checks_s']:.0f} s live", f"{suite['checks_ratio']:.2f}x", "report")
    for name, run in (("sim", simulated), ("live", live)):
        table.add_row(f"  {name} run: verdict {run['status']}",
                      ", ".join(f"{v} {k}" for k, v in run["counts"].items() if v),
                      f"machine {run['machine_busy']:.0%} busy, load "
                      f"{run['load_1min'][0]:.1f} -> {run['load_1min'][1]:.1f} "
                      f"on {run['cores']} cores", "", "")


def verdict_rows(table: Table, out: dict) -> None:
    """The live runs' share that decided every check, and per scenario how close its p99
    lateness came to its bound (1.0: the bound, one MTU frame time)."""
    runs = out["runs"]
    lab = f"a generated {out['racks']}-rack lab" if out.get("racks") else "the default lab"
    load = ", one core held by a CPU-bound process" if out.get("hog") else ""
    table.add_row(f"live check runs of {lab} deciding every check ({out['cores']} cores{load})",
                  f"{sum(1 for r in runs if not r['undecided'])} of {len(runs)}",
                  f"sim {out['sim']['wall_s']:.0f} s: "
                  + ", ".join(f"{v} {k}" for k, v in out["sim"]["counts"].items() if v),
                  f"{out['decided_share']:.0%}", ">= 90%")
    differ = sorted({n for r in runs for n in r["differs_from_sim"]})
    table.add_row("  decided verdicts differing from sim", ", ".join(differ) or "none", "",
                  "", "none")
    for r, n in zip(runs, range(1, len(runs) + 1)):
        scale = f", S = {r['time_scale']:g}" if r.get("time_scale") else ""
        table.add_row(f"  run {n}: exit {r['exit']}, {r['wall_s']:.0f} s{scale}",
                      ", ".join(r["undecided"]) or "all decided",
                      f"machine {r['machine_busy']:.0%} busy",
                      ("reruns: " + ", ".join(r["reruns"])) if r["reruns"] else "", "")
    for name, s in out["scenarios"].items():
        table.add_row(f"  {name}: p99 lateness / bound", f"max {s['max_ratio']:.2f}",
                      f"median {s['median_ratio']:.2f} over {s['runs']} runs", "", "<= 1")


def option(args: list[str], name: str) -> str | None:
    """The value of ``name VALUE`` in ``args``, both taken out of it; None if absent."""
    if name not in args:
        return None
    at = args.index(name)
    if at + 1 >= len(args):
        raise SystemExit(f"bench: {name} needs a value")
    value = args[at + 1]
    del args[at:at + 2]
    return value


def main(argv: list[str] | None = None) -> int:
    """``python -m bench [lifecycle] [forwarding] ... [--runs N] [--racks R] [--hog] [--hosts
    128,512] [--htsim PATH]``: the ones named, default all; ``--runs``, ``--racks``,
    ``--hog``: live-verdicts' number of check runs, lab (a generated one of R racks) and a
    core held busy; ``--hosts``, ``--htsim``: sim's side-by-side cases and the htsim binary
    to run them on."""
    args = list(sys.argv[1:] if argv is None else argv)
    runs = int(option(args, "--runs") or live_verdicts.RUNS)
    racks = int(option(args, "--racks") or 0)
    hog = "--hog" in args
    if hog:
        args.remove("--hog")
    hosts_text = option(args, "--hosts")
    htsim = option(args, "--htsim") or None
    try:
        hosts = sim_side.hosts_option(hosts_text) if hosts_text else None
        if htsim:
            sim_side.adapter.check_binary(htsim)
    except sim_side.adapter.HtsimError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    chosen = args or list(BENCHES)
    unknown = [name for name in chosen if name not in BENCHES]
    if unknown:
        print(f"bench: unknown {', '.join(unknown)}; choose from {', '.join(BENCHES)}",
              file=sys.stderr)
        return 2
    if os.geteuid() != 0 and set(chosen) - ROOTLESS:
        print(f"bench: {', '.join(sorted(set(chosen) - ROOTLESS))} need root (they build "
              "network namespaces)", file=sys.stderr)
        return 2
    console = Console()
    results = {}
    if "lifecycle" in chosen:
        with console.status("lab.up / lab.down against bare iproute2"):
            results["lifecycle"] = lifecycle.measure()
    if "forwarding" in chosen:
        with console.status("forwarding rate against a bare relay"):
            results["forwarding"] = forwarding.measure()
    if "incast" in chosen:
        with console.status("3:1 incast fidelity, S walking down"):
            results["incast"] = incast.measure()
    if "sim" in chosen:
        with console.status("the simulator: engine speed, fabric scale"):
            results["sim"] = sim.measure(hosts, htsim)
    if "sim-suite" in chosen:
        with console.status("the default lab's check suite, simulated then live"):
            results["sim_suite"] = sim.suite()
    if "live-verdicts" in chosen:
        what = f"a generated {racks}-rack lab's" if racks else "the default lab's"
        load = ", one core held by a CPU-bound process" if hog else ""
        with console.status(f"{what} checks live, {runs} runs back to back{load}"):
            results["live_verdicts"] = live_verdicts.measure(runs, racks=racks, hog=hog)
    table = Table(title="rocelab benchmarks (medians; ratios against baselines of this run, "
                        "per round in brackets)")
    for col in ("measure", "value", "baseline", "ratio", "target"):
        table.add_column(col)
    if "lifecycle" in results:
        life = results["lifecycle"]
        table.add_row("lab.up", f"{life['lab_up_s']:.3f} s",
                      f"{life['bare_iproute2_up_s']:.3f} s iproute2 + "
                      f"{life['bare_agent_start_s']:.3f} s agents",
                      f"{life['up_ratio']:.2f}x", "<= 2x")
        table.add_row("lab.down", f"{life['lab_down_s']:.3f} s", f"{life['bare_down_s']:.3f} s",
                      f"{life['lab_down_s'] / life['bare_down_s']:.2f}x", "< 1 s")
    if "forwarding" in results:
        fwd = results["forwarding"]
        for key, ratio, label in (
                ("agent_bridged_pps", "bridged_vs_bare", "agent, bridged"),
                ("agent_routed_pps", "routed_vs_bare", "agent, routed"),
                ("agent_full_pipeline_pps", "full_pipeline_vs_bare",
                 "agent, routed + lossless pipeline")):
            table.add_row(f"forwarding 1 KB, {label}", f"{fwd[key]:,.0f} pps",
                          f"{fwd['bare_relay_pps']:,.0f} pps bare relay",
                          f"{fwd[ratio]:.2f}x (" + ", ".join(
                              f"{a / b:.2f}" for a, b in zip(fwd["rounds"][key],
                                                             fwd["rounds"]["bare_relay_pps"]))
                          + ")",
                          ">= 0.5x" if key == "agent_full_pipeline_pps" else "report")
    if "sim" in results:
        sim_rows(table, results["sim"])
    if "sim_suite" in results:
        suite_rows(table, results["sim_suite"])
    if "live_verdicts" in results:
        verdict_rows(table, results["live_verdicts"])
    console.print(table)
    if "incast" in results:
        console.print(incast_table(results["incast"]))
    out = Path("results") / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    console.print(f"numbers kept in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
