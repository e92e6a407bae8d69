"""config.lint's findings as JUnit XML, so a CI page lists lint beside the checks.

One test suite per lab; one test case per rule and file (a switch's config_db.json or a
host's NIC file), so a CI page names what to open. A case fails on an error, and on a
warning with ``strict``; otherwise its warnings and info are its output. A rule with no
finding is one passing case per lab: the page shows what was checked, not only what broke.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from .lint import RULES, Finding, Lab


def junit(lab: Lab, findings: list[Finding], strict: bool = False) -> str:
    """The XML text: ``<testsuites><testsuite name="lint:<lab>">...``."""
    base = lab.topology.path.parent
    cases: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        cases.setdefault((f.rule, _shown(f.file, base)), []).append(f)
    for rule in RULES:
        if not any(r == rule for r, _ in cases):
            cases[(rule, "")] = []
    suite = ET.Element("testsuite", name=f"lint:{lab.topology.name}", tests=str(len(cases)))
    failures = 0
    for (rule, file), found in sorted(cases.items()):
        case = ET.SubElement(suite, "testcase", classname=f"lint.{rule}",
                             name=f"{rule} {file}" if file else f"{rule} (whole lab)")
        if file:
            case.set("file", file)
        bad = [f for f in found if f.severity == "error" or strict and f.severity == "warning"]
        if bad:
            failures += 1
            failure = ET.SubElement(case, "failure", message=f"{bad[0].where}: {bad[0].why}",
                                    type=bad[0].severity)
            failure.text = "\n".join(_line(f) for f in bad)
        rest = [f for f in found if f not in bad]
        if rest:
            ET.SubElement(case, "system-out").text = "\n".join(_line(f) for f in rest)
    suite.set("failures", str(failures))
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def _shown(file: str, base: Path) -> str:
    path = Path(file)
    return str(path.relative_to(base)) if path.is_relative_to(base) else file


def _line(f: Finding) -> str:
    return f"[{f.severity}] {f.where}: {f.why} (fix: {f.fix})"
