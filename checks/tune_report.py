"""From ``tune``'s measurements to a choice: every point's figures over scenarios and seeds,
the ECN check's verdict on it, the Pareto front, the recommended point and the plot.

Per point, over seeds (means) and scenarios (the worst of them):

- pause: the largest pause fraction of any scenario (lower is better);
- p99: the largest p99 flow completion time of any scenario, as a slowdown over the best
  any measured point reached in that scenario (lower is better, 1 is the best);
- share: the bottleneck's smallest share of its line rate in any scenario (higher is better);
- lost: retransmissions plus drops of any reason but WRED's (WRED drops Not-ECT frames in
  the RoCE queue above Kmin by design, ``fabric.model.wred``: not data the flows lose);
  a point that lost anything, or did not complete, is off the front and never recommended;
- ecn_check: the problems ``checks/test_congestion.py::test_ecn_before_pfc`` would find on
  the incast, against the PFC-only reference of the same seed (that check's "without").

The recommendation rule (RULE): among points that lost nothing and pass the ECN check (if
none passes, among those that lost nothing, and the report says so), the lowest pause
fraction of those whose p99 slowdown is within P99_TOLERANCE of the best of them; ties go
to the higher share.
"""
from __future__ import annotations

import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import congestion as cg  # noqa: E402
from .tune_run import SCENARIOS, Task  # noqa: E402

P99_TOLERANCE = 0.10
RULE = (f"among points with nothing lost that pass the ECN check, the lowest pause fraction "
        f"of those whose p99 slowdown is within {P99_TOLERANCE:.0%} of the best; ties to the "
        "higher bottleneck share")
BASELINE = "pfc-only"


def ecn_problems(with_dcqcn: dict, without: dict) -> list[str]:
    """What ``test_ecn_before_pfc`` asserts, on ``congestion.after_startup`` figures of the
    incast with the point's DCQCN and with DCQCN off: an empty list passes."""
    problems = []
    if not (with_dcqcn["complete"] and without["complete"]):
        problems.append("not every message arrived")
    if with_dcqcn["retransmitted"]:
        problems.append("retransmitted")
    if not (with_dcqcn["marks"] and with_dcqcn["cnps"] and with_dcqcn["cnps_received"]):
        problems.append("no ECN feedback loop")
    if not without["xoff_fraction"] > 0:
        problems.append("nothing paused without DCQCN: nothing to compare")
    if not with_dcqcn["xoff_fraction"] < without["xoff_fraction"]:
        problems.append("DCQCN did not reduce pausing")
    if not with_dcqcn["xoff_fraction"] < cg.MAX_XOFF_FRACTION:
        problems.append(f"XOFF {with_dcqcn['xoff_fraction']:.0%} >= "
                        f"{cg.MAX_XOFF_FRACTION:.0%}")
    share = with_dcqcn["bottleneck_share"]
    if share < cg.MIN_BOTTLENECK_SHARE:
        problems.append(f"share {share:.0%} < {cg.MIN_BOTTLENECK_SHARE:.0%}")
    if share and without["bottleneck_share"] / share > cg.MAX_SLOWDOWN:
        problems.append(f"share below 1/{cg.MAX_SLOWDOWN} of PFC alone's")
    return problems


def lost(figures: dict) -> int:
    return figures["retransmitted"] + sum(n for reason, n in figures["drop_reasons"].items()
                                          if reason != "wred")


def summarize(results: list[tuple[Task, dict]]) -> list[dict]:
    """One row per point (in first-seen order): its parameters, per scenario the mean of
    each figure over seeds, the objectives and the ECN check's problems."""
    by_point: dict[str, dict] = {}
    for task, fig in results:
        row = by_point.setdefault(task.point_name, {"name": task.point_name,
                                                    "point": task.point, "runs": {}})
        row["runs"].setdefault(task.scenario, {})[task.seed] = fig
    baseline = by_point.get(BASELINE, {}).get("runs", {}).get("incast", {})
    best_p99 = {s: min(statistics.fmean(f["fct_p99_s"] for f in r["runs"][s].values())
                       for r in by_point.values() if s in r["runs"])
                for s in SCENARIOS if any(s in r["runs"] for r in by_point.values())}
    rows = []
    for row in by_point.values():
        scen = {}
        for s, seeds in row["runs"].items():
            figs = list(seeds.values())
            scen[s] = {k: statistics.fmean(f[k] for f in figs)
                       for k in ("pause_fraction", "share", "fct_p50_s", "fct_p99_s",
                                 "ce_marks", "cnps", "drops")}
            scen[s]["lost"] = sum(lost(f) for f in figs)
            scen[s]["complete"] = all(f["complete"] for f in figs)
        problems = sorted({p for seed, f in row["runs"].get("incast", {}).items()
                           if seed in baseline
                           for p in ecn_problems(f["ecn_check"], baseline[seed]["ecn_check"])})
        rows.append({"name": row["name"], "point": row["point"], "scenarios": scen,
                     "pause": max(v["pause_fraction"] for v in scen.values()),
                     "p99": max(v["fct_p99_s"] / best_p99[s] for s, v in scen.items()),
                     "share": min(v["share"] for v in scen.values()),
                     "lost": sum(v["lost"] for v in scen.values()),
                     "complete": all(v["complete"] for v in scen.values()),
                     "ecn_check": problems if "incast" in scen and baseline else None})
    return rows


def feasible(row: dict) -> bool:
    return row["complete"] and row["lost"] == 0


def pareto(rows: list[dict]) -> list[str]:
    """Names of the feasible rows no other feasible row dominates (pause and p99 no worse,
    share no lower, one of them strictly better)."""
    ok = [r for r in rows if feasible(r)]

    def dominates(a: dict, b: dict) -> bool:
        no_worse = a["pause"] <= b["pause"] and a["p99"] <= b["p99"] and a["share"] >= b["share"]
        better = a["pause"] < b["pause"] or a["p99"] < b["p99"] or a["share"] > b["share"]
        return no_worse and better
    return [r["name"] for r in ok if not any(dominates(o, r) for o in ok if o is not r)]


def recommend(rows: list[dict]) -> tuple[dict | None, bool | None]:
    """The recommended row (RULE) and whether it passes the ECN check: None when the check
    was not run (no incast among the scenarios, or no PFC-only baseline), not a failure. The
    row is None when every point lost data."""
    ok = [r for r in rows if feasible(r)]
    passing = [r for r in ok if r["ecn_check"] == []]
    pool = passing or ok
    judged = any(r["ecn_check"] is not None for r in rows)
    if not pool:
        return None, False if judged else None
    best = min(r["p99"] for r in pool)
    near = [r for r in pool if r["p99"] <= best * (1 + P99_TOLERANCE)]
    chosen = min(near, key=lambda r: (r["pause"], -r["share"], r["p99"]))
    return chosen, bool(passing) if judged else None


def plot(rows: list[dict], front: list[str], chosen: str | None, references: list[str],
         path: Path) -> Path:
    """Pause fraction against p99 slowdown, colour the bottleneck share; the front joined,
    the references named, the recommendation starred, points that lost data crossed."""
    fig, ax = plt.subplots(figsize=(7.5, 5))
    ok = [r for r in rows if feasible(r)]
    bad = [r for r in rows if not feasible(r)]
    dots = ax.scatter([r["p99"] for r in ok], [r["pause"] for r in ok],
                      c=[r["share"] for r in ok], cmap="viridis", vmin=0, vmax=1, s=36,
                      zorder=3)
    fig.colorbar(dots, ax=ax, label="bottleneck share (worst scenario)")
    if bad:
        ax.scatter([r["p99"] for r in bad], [r["pause"] for r in bad], marker="x",
                   color="red", label="lost data", zorder=3)
    edge = sorted((r for r in rows if r["name"] in front), key=lambda r: r["p99"])
    ax.plot([r["p99"] for r in edge], [r["pause"] for r in edge], color="grey", lw=1,
            label="Pareto front", zorder=2)
    for r in rows:
        if r["name"] in references:
            ax.annotate(r["name"], (r["p99"], r["pause"]), textcoords="offset points",
                        xytext=(5, 5), fontsize=8)
        if r["name"] == chosen:
            ax.scatter([r["p99"]], [r["pause"]], marker="*", s=260, facecolor="none",
                       edgecolor="black", label=f"recommended ({chosen})", zorder=4)
    ax.set_xlabel("p99 flow completion, slowdown over the best (worst scenario)")
    ax.set_ylabel("pause fraction (worst scenario)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
