"""``diff``: what a config change did to a lab (``checks.diff``)."""
from __future__ import annotations

import sys
from pathlib import Path

from invoke import task

from .common import fail


@task(help={"base": "the lab before: a lab folder, .clab.yml or name; with --lab, a git "
                    "revision (origin/main)",
            "head": "the lab after: likewise (with --lab, an existing path is the working "
                    "tree's folder)",
            "lab": "a lab folder in a git repository: BASE and HEAD are its revisions",
            "format": "text (default), markdown (a CI page) or json",
            "out": "write the report to this file instead of standard output",
            "base_results": "check results folder of BASE (summary.json): metrics that moved",
            "head_results": "check results folder of HEAD"})
def diff(c, base, head, lab="", format="text", out="", base_results="", head_results=""):
    """Per switch and port, the lossless chain before and after, lint findings added and
    removed, and (given two check results) the metrics that moved. Exit 0 when the report was
    written, 2 for bad input (not a lab, no such revision, two different fabrics)."""
    from ...checks import diff as diffs
    from ...checks.diff_render import FORMATS, render
    if format not in FORMATS:
        raise fail(f"--format {format!r}: say {', '.join(FORMATS)}")
    try:
        with diffs.sides(base, head, lab or None) as (before, after):
            report = render(diffs.compare(before, after, base_results or None,
                                          head_results or None), format)
    except diffs.DiffError as e:
        raise fail(str(e)) from None
    if out:
        try:
            Path(out).write_text(report)
        except OSError as e:
            raise fail(f"--out {out}: {e.strerror}") from None
    else:
        sys.stdout.write(report)
