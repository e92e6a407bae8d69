"""``config.*`` (and ``rocelab lint``): static checks of a lab's configs, no root, no lab."""
from __future__ import annotations

from pathlib import Path

from invoke import Collection, Exit, task
from rich.table import Table

from .common import FAILED, USER_ERRORS, console, fail


@task(help={"name": "lab folder, .clab.yml path, or lab name (./topologies/NAME)",
            "priority": "lossless RoCE priority (default: the lab's: label "
                        "rocelab.roce-priority, the hosts' NIC files, the switches' pfc_enable)",
            "dscp": "DSCP of RoCEv2 data (default: the hosts' NIC files, else the switches' "
                    "maps)",
            "cnp_dscp": "DSCP of CNPs (default: the hosts' NIC files)",
            "json": "print the findings as JSON instead of a table",
            "junit": "also write the findings as JUnit XML to this file",
            "strict": "fail (exit 1) on warnings too, not only on errors"})
def lint(c, name, priority=-1, dscp=-1, cnp_dscp=-1, json=False, junit="", strict=False):
    """Static checks of the switch configs (no root, no lab): the lossless path, headroom,
    ECN before PFC, CNP queue, PFC watchdog, references, consistency, host NIC DSCP
    (docs/lint.md). Exit 0 clean, 1 errors (or warnings with --strict), 2 bad input."""
    from ...checks import lint as lints
    from ...checks.lint_junit import junit as as_junit

    def given(value: int) -> int | None:
        return None if value < 0 else value

    try:
        lab = lints.load_lab(name, given(priority), given(dscp), given(cnp_dscp))
    except USER_ERRORS as e:
        raise fail(e) from None
    findings = lints.lint(lab)
    counts = lints.counts(findings)
    if junit:
        try:
            Path(junit).parent.mkdir(parents=True, exist_ok=True)
            Path(junit).write_text(as_junit(lab, findings, strict))
        except OSError as e:
            raise fail(f"--junit {junit}: {e.strerror}") from None
    if json:
        print(lints.as_json(lab, findings))
    else:
        if findings:
            console.print(_lint_table(lab, findings))
        s = lab.settings
        more = "".join(f", also lossless: priority {k.priority}"
                       + (f" (DSCP {k.dscp})" if k.dscp is not None else "") for k in s.more)
        console.print(f"{lab.topology.name}: {counts['error']} errors, {counts['warning']} "
                      f"warnings, {counts['info']} info in {len(lab.configs)} switch configs "
                      f"(RoCE priority {s.priority}, DSCP {s.dscp}, CNP DSCP {s.cnp_dscp}"
                      f"{more}; from {s.source})", soft_wrap=True)
    if counts["error"] or strict and counts["warning"]:
        raise Exit(code=FAILED)


def _lint_table(lab, findings) -> Table:
    """One row per finding; files relative to the lab's folder, which every one is under."""
    table = Table(title=f"config.lint {lab.topology.path}", show_lines=True)
    for col in ("severity", "rule", "file", "where", "why", "fix"):
        table.add_column(col, overflow="fold")
    colour = {"error": "red", "warning": "yellow", "info": "blue"}
    base = lab.topology.path.parent
    for f in findings:
        path = Path(f.file)
        shown = path.relative_to(base) if path.is_relative_to(base) else path
        table.add_row(f"[{colour[f.severity]}]{f.severity}[/]", f.rule, str(shown), f.where,
                      f.why, f.fix)
    return table


ns = Collection("config", lint)
