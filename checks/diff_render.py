"""``rocelab diff`` output: text for a terminal, Markdown for a CI page (a pull request
comment or a job summary), JSON for tools. All three from ``checks.diff.compare``'s data."""
from __future__ import annotations

import json
from itertools import groupby

FORMATS = ("text", "markdown", "json")


def render(diff: dict, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(diff, indent=1) + "\n"
    return (markdown if fmt == "markdown" else text)(diff)


def _headline(diff: dict) -> str:
    lint = diff["lint"]
    moved = len(diff["results"]["moved"]) if diff["results"] else None
    return (f"{len(diff['chain'])} chain facts changed, lint +{len(lint['added'])} "
            f"-{len(lint['removed'])}"
            + ("" if moved is None else f", {moved} metrics moved"))


def _classes(diff: dict) -> str:
    b, h = diff["base"]["classes"], diff["head"]["classes"]
    return ", ".join(h) if b == h else f"{', '.join(b)} -> {', '.join(h)}"


def _value(v: object) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def _delta(before: object, after: object) -> str:
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool)
                  for v in (before, after))
    return f" ({after - before:+g})" if numbers else ""


def text(diff: dict) -> str:
    out = [f"rocelab diff {diff['lab']}: {diff['base']['label']} -> {diff['head']['label']}",
           f"  {_headline(diff)}; lossless classes: {_classes(diff)}", ""]
    out.append("lossless chain (before -> after):" if diff["chain"]
               else "lossless chain: unchanged")
    for (switch, where), rows in groupby(diff["chain"], lambda r: (r["switch"], r["where"])):
        out.append(f"  {switch} {where}")
        for r in rows:
            out.append(f"    {r['fact']:<16} {r['before']}  ->  {r['after']}")
    out += ["", "lint:" if any(diff["lint"].values()) else "lint: no finding added or removed"]
    for sign, key in (("+", "added"), ("-", "removed")):
        for f in diff["lint"][key]:
            out.append(f"  {sign} [{f['severity']}] {f['rule']} {f['file']} {f['where']}: "
                       f"{f['why']}")
    if diff["results"] is not None:
        moved = diff["results"]["moved"]
        out += ["", "metrics (before -> after):" if moved else "metrics: none moved"]
        for subject, rows in groupby(moved, lambda r: r["subject"]):
            out.append(f"  {subject}")
            for r in rows:
                out.append(f"    {r['metric']:<22} {_value(r['before'])}  ->  "
                           f"{_value(r['after'])}{_delta(r['before'], r['after'])}")
    return "\n".join(out) + "\n"


def _cell(v: object) -> str:
    return _value(v).replace("|", "\\|").replace("\n", " ")


def markdown(diff: dict) -> str:
    out = [f"## rocelab diff: {_cell(diff['lab'])}", "",
           f"`{_cell(diff['base']['label'])}` → `{_cell(diff['head']['label'])}`: "
           f"**{_headline(diff)}**. Lossless classes: {_cell(_classes(diff))}.", ""]
    out += ["### Lossless chain", ""]
    if diff["chain"]:
        out += ["| switch | port / class | fact | before | after |", "|---|---|---|---|---|"]
        out += [f"| {_cell(r['switch'])} | {_cell(r['where'])} | {_cell(r['fact'])} "
                f"| {_cell(r['before'])} | {_cell(r['after'])} |" for r in diff["chain"]]
    else:
        out.append("Unchanged.")
    out += ["", "### Lint findings", ""]
    if any(diff["lint"].values()):
        out += ["| | severity | rule | file | where | why |", "|---|---|---|---|---|---|"]
        for sign, key in (("➕ added", "added"), ("➖ removed", "removed")):
            out += [f"| {sign} | {f['severity']} | {_cell(f['rule'])} | {_cell(f['file'])} "
                    f"| `{_cell(f['where'])}` | {_cell(f['why'])} |" for f in diff["lint"][key]]
    else:
        out.append("No finding added or removed.")
    if diff["results"] is not None:
        out += ["", "### Check metrics", ""]
        if diff["results"]["moved"]:
            out += ["| subject | metric | before | after |", "|---|---|---:|---:|"]
            out += [f"| {_cell(r['subject'])} | {_cell(r['metric'])} | {_cell(r['before'])} "
                    f"| {_cell(r['after'])}{_delta(r['before'], r['after'])} |"
                    for r in diff["results"]["moved"]]
        else:
            out.append("No metric moved.")
    return "\n".join(out) + "\n"
