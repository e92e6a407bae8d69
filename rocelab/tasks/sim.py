"""``sim.*``: the virtual-time runtime next to the live one (docs/runtimes.md)."""
from __future__ import annotations

from pathlib import Path

from invoke import Collection, Exit, task
from rich.table import Table

from labs import lab as labs
from rocelab.tasks.common import FAILED, USER_ERRORS, console, fail


@task(help={"name": "lab name (topologies/NAME) or path to a .clab.yml",
            "results": "folder for both runs (default: results/compare-<lab>-<time>/)",
            "seed": "the simulated run's seed"})
def compare(c, name, results="", seed=0):
    """Each congestion scenario live and in virtual time at the lab's S, side by side:
    verdicts, PFC frames, pause time, completion time, frames lost (docs/runtimes.md)."""
    from checks import compare as cmp
    from checks import run as checks
    try:
        folder = Path(results) if results else checks.fresh_results(
            f"compare-{labs.lab_name(name)}")
        rows = cmp.compare(name, folder, say=console.print, seed=int(seed))
    except USER_ERRORS as e:
        raise fail(e) from None
    table = Table(title=f"live vs simulated at the lab's S ({folder})")
    for col in ("scenario", "verdict live / sim", *(f"{f} live / sim" for f in cmp.FIGURES)):
        table.add_column(col)
    for row in rows:
        cells = [row.scenario, f"{row.live.get('verdict')} / {row.sim.get('verdict')}"
                 + ("" if row.verdicts_agree else " [red]differ[/]")]
        for f in cmp.FIGURES:
            a, b = row.live.get(f), row.sim.get(f)
            mark = "" if row.agrees(f) else " [yellow]>15%[/]"
            cells.append(f"{a:.4g} / {b:.4g}{mark}" if a is not None and b is not None
                         else f"{a} / {b}")
        table.add_row(*cells)
    console.print(table)
    if not all(r.verdicts_agree for r in rows):
        raise Exit("rocelab: live and simulated verdicts differ", code=FAILED)


ns = Collection("sim", compare)
