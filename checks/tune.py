"""``rocelab tune LAB``: sweep ECN marking (WRED) and DCQCN on the lab's own scenarios in
virtual time, and recommend a setting with the evidence behind it (docs/tune.md).

The sweep (``tune_space``) is measured beside the published reference points on every
scenario (``tune_run``) and seed, fanned out and stored (``tune_fanout``), reduced to a
Pareto front and a recommendation (``tune_report``), and written to the results folder:

- ``report.md``: the bounds, the rule, the recommendation beside the references, the table;
- ``points.json``: every point's parameters, figures and verdicts; ``tune.png``: the plot;
- ``recommended/<lab folder>``: the lab with the recommendation applied (``rocelab diff
  LAB results/recommended/<folder>`` shows it; ``invoke check`` runs it), and
  ``recommended.patch.json``: the same change as an RFC 6902 patch per file; the ECN
  check's verdict rerun on that copy (``recheck``) stands beside the sweep's own.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from . import incast as ic
from . import tune_report as rep
from .tune_apply import apply, check_points, copy_lab
from .tune_fanout import run
from .tune_run import SCENARIOS, Task
from .tune_space import (
    BYTE_COUNTER, Dimension, SpaceError, counter_off_too, default_space, grid, override,
    references, sample,
)
from ..labs import topology
from ..nic.settings import NicSettings
from ..labs.runtimes.sim import SimLab, simulated

DEFAULT_POINTS = 6
AS_IS = {"wred": {}, "dcqcn": {}}  # a point that changes nothing: the lab as its files are


@dataclass
class Plan:
    """What a sweep runs: the space, its points and the references, the seeds."""

    clab: str
    bottleneck_bps: float
    space: list[Dimension]
    points: dict[str, dict]
    references: list[str]
    seeds: list[int]
    fraction: float = 1.0  # of each scenario's volume (``tune_run.Task``)
    scenarios: tuple[str, ...] = SCENARIOS
    counter_off: str = ""  # how the byte counter is a factor (``counter_off_too``), if it is

    def tasks(self) -> list[Task]:
        return [Task(self.clab, name, point, s, seed, self.fraction)
                for name, point in self.points.items() for s in self.scenarios
                for seed in self.seeds]


def counting(lab: SimLab) -> bool:
    """Whether any of the lab's NICs runs the firmware's DCQCN with its byte counter on."""
    nics = [(h.nic or NicSettings()).dcqcn for h in lab.topology.hosts]
    return any(d.enabled and d.mode == "firmware" and d.rpg_byte_reset for d in nics)


def plan(spec: str, *, points: int = DEFAULT_POINTS, seed: int = 0, seeds: int = 1,
         levels: int = 0, bounds: list[str] = (), fraction: float = 1.0,
         scenarios: tuple[str, ...] = SCENARIOS) -> Plan:
    """The sweep for the lab ``spec``: ``points`` Latin-hypercube points (``seed``), or a
    grid of ``levels`` per dimension, within the default bounds for its bottleneck's speed
    with ``bounds`` overriding them, plus the references, over seeds seed..seed+seeds-1, on
    ``scenarios`` (all three by default; the incast alone answers the ECN check). Where the
    NICs count bytes and no bound names ``rpg_byte_reset``, the byte counter is a factor
    too (``counter_off_too``)."""
    if unknown := sorted(set(scenarios) - set(SCENARIOS)):
        raise SpaceError(f"--scenario {unknown[0]}: say {', '.join(SCENARIOS)}")
    if not 0 < fraction <= 1:
        raise SpaceError(f"--fraction {fraction:g}: between 0 (excluded) and 1")
    lab = simulated(spec, seed=seed)
    try:
        bps = ic.bottleneck_bps(lab, ic.incast_of(lab))
    finally:
        lab.down()
    clab = str(Path(lab.topology_path).resolve())
    space = override(default_space(bps), list(bounds))
    chosen = grid(space, levels) if levels else sample(space, points, seed)
    counter_off = ""
    if counting(lab) and all(d.name != BYTE_COUNTER for d in space):
        chosen = counter_off_too(chosen, every_other=not levels)
        counter_off = ("each grid point as the NICs' files have it and off" if levels else
                       "as the NICs' files have it on the even points (p00, p02, ...), "
                       "off on the odd ones (p01, p03, ...)")
    named = {f"p{i:02d}": p for i, p in enumerate(chosen)}
    refs = references(bps)
    check_points(lab.topology, [*named.values(), *refs.values()])
    return Plan(clab, bps, space, {**named, **refs}, list(refs),
                list(range(seed, seed + max(1, seeds))), fraction, tuple(scenarios),
                counter_off)


def tune(p: Plan, results: Path, *, workers: int | None = None, cluster: object = None,
         progress: bool = True) -> dict:
    """Run the plan and write its report into ``results``: the outcome as data."""
    results.mkdir(parents=True, exist_ok=True)
    how = {"workers": workers, "cluster": cluster, "progress": progress}
    measured = run(p.tasks(), results, **how)
    rows = rep.summarize(measured)
    front = rep.pareto(rows)
    chosen, passes = rep.recommend(rows)
    rep.plot(rows, front, chosen and chosen["name"], p.references, results / "tune.png")
    rechecked = None
    if chosen is not None:
        topo = topology.load(p.clab)
        clab = copy_lab(topo, results / "recommended" / topo.path.parent.name)
        patch = apply(topo, clab, chosen["point"])
        (results / "recommended.patch.json").write_text(json.dumps(patch, indent=1) + "\n")
        rechecked = recheck(clab, p, results, **how)
    outcome = {"lab": p.clab, "bottleneck_bps": p.bottleneck_bps, "seeds": p.seeds,
               "fraction": p.fraction, "scenarios": list(p.scenarios),
               "space": [vars(d) for d in p.space], "byte_counter_off": p.counter_off,
               "rule": rep.RULE,
               "recommended": chosen and chosen["name"], "passes_ecn_check": passes,
               "recheck": rechecked, "front": front, "references": p.references,
               "points": rows}
    (results / "points.json").write_text(json.dumps(outcome, indent=1) + "\n")
    (results / "report.md").write_text(markdown(outcome))
    return outcome


def recheck(clab: Path, p: Plan, results: Path, **how: object) -> dict | None:
    """The ECN check rerun on the lab copy ``clab`` (the recommendation applied), as
    ``invoke check`` would judge it: the incast with the copy's files as they are, against
    the same incast with DCQCN off on the copy's own switches (the check's "without"), per
    seed of the plan, measured and stored like the sweep's runs. None when the plan runs
    no incast."""
    if "incast" not in p.scenarios:
        return None
    off = references(p.bottleneck_bps)[rep.BASELINE]
    tasks = [Task(str(clab), name, point, "incast", seed, p.fraction)
             for name, point in (("recommended", AS_IS), (rep.BASELINE, off))
             for seed in p.seeds]
    got = {(t.point_name, t.seed): f["ecn_check"] for t, f in run(tasks, results, **how)}
    seeds = {seed: {"with_dcqcn": got["recommended", seed], "without": got[rep.BASELINE, seed]}
             for seed in p.seeds}
    problems = sorted({q for s in seeds.values()
                       for q in rep.ecn_problems(s["with_dcqcn"], s["without"])})
    return {"lab": str(clab), "problems": problems, "seeds": seeds}


def _params(point: dict) -> str:
    parts = [f"{k}={v}" for k, v in point["wred"].items()]
    parts += [f"{k}={v}" for k, v in point["dcqcn"].items()]
    return ", ".join(parts) or "(the lab's own)"


def _row(r: dict, front: list[str]) -> str:
    check = ("baseline" if r["name"] == rep.BASELINE else "n/a" if r["ecn_check"] is None
             else "pass" if not r["ecn_check"] else "; ".join(r["ecn_check"]))
    scen = " ".join(f"{s}: {v['pause_fraction']:.2f}/{v['share']:.2f}/"
                    f"{v['fct_p99_s'] * 1e3:.2f}ms/{v['ce_marks']:.0f}/{v['cnps']:.0f}/"
                    f"{v['drops']:.0f}" for s, v in r["scenarios"].items())
    return (f"| {r['name']}{' (front)' if r['name'] in front else ''} | {_params(r['point'])} "
            f"| {r['pause']:.3f} | {r['p99']:.3f} | {r['share']:.3f} | {r['lost']} | {check} "
            f"| {scen} |")


def verdict(passes: bool | None) -> str:
    """The sweep's ECN-check verdict on its recommendation, in words."""
    if passes is None:
        return "the ECN check not judged (no incast among the scenarios)"
    return ("passes the ECN check" if passes else "**no point in the bounds passes the ECN "
            "check**; the best that lost nothing")


def rechecked(r: dict) -> str:
    """The ECN check rerun on the recommended copy (``recheck``), with its figures."""
    figures = "; ".join(
        f"seed {seed}: XOFF {s['with_dcqcn']['xoff_fraction']:.1%} (DCQCN off "
        f"{s['without']['xoff_fraction']:.1%}), share {s['with_dcqcn']['bottleneck_share']:.1%}"
        f" (off {s['without']['bottleneck_share']:.1%})" for seed, s in r["seeds"].items())
    outcome = "passes" if not r["problems"] else "fails: " + "; ".join(r["problems"])
    return (f"The ECN check rerun on `{Path(r['lab']).parent.name}` in `recommended/` (its "
            f"incast with DCQCN as the copy's files say, and off): {outcome} ({figures}).")


def markdown(o: dict) -> str:
    """The report: the recommendation and the references first, then every point."""
    rows = {r["name"]: r for r in o["points"]}
    head = ["| point | parameters | pause | p99 slowdown | share | lost | ECN check "
            "| per scenario: pause/share/p99/marks/CNPs/drops |", "|" + "---|" * 8]
    lines = [f"# tune: {Path(o['lab']).name.removesuffix('.clab.yml')}", "",
             f"Bottleneck {o['bottleneck_bps'] / 1e9:g} Gb/s; seeds {o['seeds']}; scenarios "
             f"{', '.join(o['scenarios'])} in virtual time"
             + (f" at {o['fraction']:g} of their volume (a quick look: not the ECN check's "
                "incast)" if o["fraction"] != 1 else "") + ". Bounds: "
             + ", ".join(f"{d['name']} {d['lo']:g}..{d['hi']:g}" for d in o["space"]) + "."
             + (f" The byte counter (rpg_byte_reset): {o['byte_counter_off']}."
                if o["byte_counter_off"] else ""),
             "", f"Rule: {o['rule']}.", ""]
    if o["recommended"] is None:
        lines += ["**No recommendation**: every point lost data.", ""]
    else:
        r = rows[o["recommended"]]
        lines += [f"**Recommended: {r['name']}** ({_params(r['point'])}), "
                  f"{verdict(o['passes_ecn_check'])}. Apply `recommended.patch.json`, or "
                  "compare with `rocelab diff`: the lab with it applied is in "
                  "`recommended/`.", ""]
        if o["recheck"] is not None:
            lines += [rechecked(o["recheck"]), ""]
    lines += ["Beside it, the published reference points (docs/tune.md, \"Reference "
              "points\"):", "", *head]
    beside = dict.fromkeys(n for n in [o["recommended"], *o["references"]] if n in rows)
    lines += [_row(rows[n], o["front"]) for n in beside]
    lines += ["", "Every point:", "", *head]
    lines += [_row(r, o["front"]) for r in o["points"]]
    lines += ["", "![trade-off](tune.png)", ""]
    return "\n".join(lines)
