"""``summary.md``: the page a person reads first after ``invoke check``.

Built from ``summary.json`` alone (so it can be rebuilt for an old results folder): title
with lab, date, duration and time scale S; one verdict line (an incomplete run says so
first); a table of checks; a warning per check whose emulation lost fidelity (its verdict
says less than it seems); the plots inline; the evidence files; the topology and the hash
of every file the lab ran from. Keys beyond the basic ones (``status``, ``time_scale``,
``topology``, ``fingerprint``, per check ``fidelity`` and ``plots``) may be missing and are
read defensively.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import outcome
from ..labs.calibrate import calibrated
from ..labs.state import write_atomic

ICONS = {"passed": "✅ PASS", "failed": "❌ FAIL", "error": "⚠️ ERROR",
         "inconclusive": "❔ INCONCLUSIVE", "skipped": "⏭️ SKIP"}


def cell(text: object) -> str:
    """Table-safe text: a pipe or a newline would break the row."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def verdict(checks: list[dict]) -> str:
    """One line: all passed, inconclusive (by the exit code's rule, checks.outcome), or how
    many failed and could not run."""
    count = {k: sum(c.get("outcome") == k for c in checks) for k in ICONS}
    if not checks:
        return "**No checks ran.**"
    undecided = [c for c in checks if outcome.undecided(c)]
    if not count["failed"] and not count["error"] and undecided:
        return (f"**Inconclusive (exit 3): {len(undecided)} of {len(checks)} checks could not "
                f"decide** ({count['passed']} passed, {count['inconclusive']} inconclusive, "
                f"{count['skipped']} skipped); nothing failed. Rerun a check that lost fidelity "
                "with `--runtime sim` (virtual time) or a larger time scale S; one skipped for "
                "a MISSING CAPABILITY needs a runtime that has it.")
    if not count["failed"] and not count["error"]:
        skipped = f" ({count['skipped']} skipped)" if count["skipped"] else ""
        return f"**All {count['passed']} checks passed.**{skipped}"
    bad = [f"{count['failed']} failed"] + ([f"{count['error']} could not run (error)"]
                                           if count["error"] else [])
    return (f"**{', '.join(bad)}** of {len(checks)} checks "
            f"({count['passed']} passed, {count['inconclusive']} inconclusive, "
            f"{count['skipped']} skipped).")


def fidelity_warnings(checks: list[dict]) -> list[str]:
    """A line per check whose emulation did not keep up: its result may not hold on a
    real fabric; and one per check a slower rerun decided (``congestion.run_incast``)."""
    out = []
    for check in checks:
        fidelity = check.get("fidelity") or {}
        first = fidelity.get("rerun_of")
        if first:
            out.append(f"- **{check.get('name')}**: decided on a rerun at {first.get('factor')} x S: "
                       f"the first run at S = {first.get('time_scale')} lost fidelity ("
                       + ("; ".join(str(p) for p in first.get("problems") or []) or "no details")
                       + ")")
        if fidelity.get("ok", True) and not fidelity.get("problems"):
            continue
        problems = "; ".join(str(p) for p in fidelity.get("problems") or []) or "no details"
        out.append(f"- ⚠️ **{check.get('name')}**: the emulation lost fidelity "
                   f"({problems}); its verdict may not hold on a real fabric.")
    return out


def title(summary: dict) -> list[str]:
    scale = summary.get("time_scale")
    duration = summary.get("duration")
    facts = [f"started {summary.get('started') or 'unknown'}",
             f"duration {duration:.1f} s" if isinstance(duration, (int, float))
             else "duration unknown",
             f"time scale S = {scale:g} (wire rate = speed / S)" if scale
             else "time scale S not recorded"]
    if summary.get("runtime"):
        facts.append(f"runtime {summary['runtime']}")
    if "seed" in summary:
        facts.append(f"seed {summary['seed']}")
    if summary.get("jitter_ns"):
        facts.append(f"timing jitter {summary['jitter_ns']:g} ns mean per hop")
    out = [f"# rocelab checks: {summary.get('lab') or 'unknown lab'}", "", " · ".join(facts)]
    if summary.get("calibration"):  # S chosen at lab.up for the machine (labs.calibrate)
        out += ["", calibrated(summary.get("lab") or "", summary["calibration"])]
    return out


def table(checks: list[dict]) -> list[str]:
    rows = ["| outcome | check | reason | duration |", "|---|---|---|---:|"]
    for c in checks:
        rows.append(f"| {ICONS.get(c.get('outcome'), cell(c.get('outcome')))} "
                    f"| {cell(c.get('name'))} | {cell(c.get('reason') or '')} "
                    f"| {c.get('duration', 0):.2f} s |")
    return rows


def plots(checks: list[dict]) -> list[str]:
    out = []
    for c in checks:
        for path in c.get("plots") or []:
            out += [f"### {c.get('name')}: {Path(path).stem}", "", f"![{Path(path).stem}]({path})",
                    ""]
    return out


def incomplete(summary: dict) -> list[str]:
    """A run that did not finish says so before anything else: its counts are partial."""
    if summary.get("status", "complete") == "complete":
        return []
    return [f"**⚠️ Incomplete run:** {summary.get('status_reason') or 'the checks did not finish'}.",
            ""]


def deployed(summary: dict) -> list[str]:
    """The topology the lab was brought up from and each file's sha256, as they ran; the
    files that differ now (a lab checked with --reuse) are flagged."""
    path = summary.get("topology")
    files = summary.get("fingerprint") or {}
    if not path:
        return []
    base = Path(path).parent
    changed = set(summary.get("changed_since_up") or [])
    out = [f"Brought up from `{path}`" + (":" if files else " (no file hashes recorded)."), ""]
    if files:
        out += ["| file | sha256 |", "|---|---|"]
        for name, digest in files.items():
            shown = Path(name).relative_to(base) if Path(name).is_relative_to(base) else name
            flag = " ⚠️ changed since lab.up" if name in changed else ""
            out.append(f"| {cell(shown)}{flag} | `{digest[:16]}` |")
        out.append("")
    return out


def tables(summary: dict) -> list[str]:
    """Config tables not in force: skipped ones warned, not-emulated ones listed."""
    out = []
    for node, notes in (summary.get("tables") or {}).items():
        if notes.get("skipped"):
            out.append(f"- ⚠️ **{cell(node)}** runs without {', '.join(notes['skipped'])} "
                       "(data-plane meaning not emulated; label rocelab.unemulated-tables)")
        if notes.get("not_emulated"):
            out.append(f"- {cell(node)}: not emulated (no data-plane meaning): "
                       + ", ".join(notes["not_emulated"]))
    return out


def evidence(checks: list[dict]) -> list[str]:
    out = []
    for c in checks:
        files = c.get("evidence") or []
        if files:
            out.append(f"- **{c.get('name')}**: " + ", ".join(f"[{Path(f).name}]({f})"
                                                              for f in files))
    return out


def derivations(checks: list[dict]) -> list[str]:
    """Per check with one, how its expected numbers follow from the config."""
    out = []
    for c in checks:
        lines = c.get("derivation") or []
        if lines:
            out += [f"- **{c.get('name')}**", *(f"  - {cell(line)}" for line in lines)]
    return out


def probed(checks: list[dict]) -> list[str]:
    """Per forwarding check, the pairs it probed and how they were chosen: a pair not listed
    was not checked (``checks.sample``)."""
    out = []
    for c in checks:
        probes = c.get("probes")
        if probes:
            by_sender: dict[str, list[str]] = {}
            for src, dst in probes.get("pairs") or []:
                by_sender.setdefault(src, []).append(dst)
            pairs = "; ".join(f"{src} -> {', '.join(dsts)}" for src, dsts in by_sender.items())
            out.append(f"- **{c.get('name')}**: {len(probes.get('pairs') or [])} pair(s), "
                       f"{cell(probes.get('how'))}: {cell(pairs or 'none')}")
    return out


def write_markdown(results_dir: str | Path) -> Path:
    """Write ``<results_dir>/summary.md`` from its ``summary.json``; the path written."""
    folder = Path(results_dir)
    summary = json.loads((folder / "summary.json").read_text())
    checks = summary.get("checks") or []
    lines = [*title(summary), "", *incomplete(summary), verdict(checks), ""]
    warnings = fidelity_warnings(checks)
    if warnings:
        lines += ["## Fidelity", "", *warnings, ""]
    lines += ["## Checks", "", *table(checks), ""]
    notes = tables(summary)
    if notes:
        lines += ["## Config tables not in force", "", *notes, ""]
    figures = plots(checks)
    if figures:
        lines += ["## Plots", "", *figures]
    pairs = probed(checks)
    if pairs:
        lines += ["## Pairs probed", "", *pairs, ""]
    derived = derivations(checks)
    if derived:
        lines += ["## Thresholds from the config", "", *derived, ""]
    files = evidence(checks)
    if files:
        lines += ["## Evidence", "", *files, ""]
    topology = deployed(summary)
    if topology:
        lines += ["## Topology", "", *topology]
    out = folder / "summary.md"
    write_atomic(out, "\n".join(lines).rstrip("\n") + "\n")
    return out
