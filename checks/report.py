"""pytest plugin: netlab-style verdicts for the checks, and a JSON summary for CI.

Loaded with ``-p checks.report`` (``invoke check`` does). It

- prints one line per check as it finishes: ``[PASS] name``, ``[FAIL] name: reason``
  (the first line of the assertion message), ``[SKIP] name: reason``, ``[ERROR] name:
  reason`` (the check could not run: its setup failed, or it crashed: an exception other
  than a failed assertion or ``pytest.fail`` came out of it, which says nothing about the
  fabric and so is neither a FAIL nor, ever, a SKIP or a PASS);
- writes ``<results>/summary.json`` (atomically): status (``complete``, or ``incomplete``
  when the run was interrupted), lab, runtime, time scale, the topology path and the sha256
  of every file the lab was deployed from (``labs.fingerprint``), start time, duration, and
  per check its outcome, reason, duration, evidence files, plots and fidelity;
- writes ``<results>/summary.md`` from it (``checks.summary_md``), the page to read first;
- ends with one count line: ``checks: 5 passed, 1 failed (results in ...) report: .../summary.md``.

``invoke check`` writes a provisional summary (status ``incomplete``) before pytest starts
(``provisional``), so a run killed outright still leaves one that says so.

A crashed check is an error in summary.json, summary.md and JUnit alike: its JUnit test case
carries the property ``outcome`` = ``error`` and an ``<error>`` element where pytest wrote a
``<failure>`` (``junit_errors``, once pytest has written the file).

Checks attach evidence with ``record_evidence(item_or_request, path)``, or a whole folder
with ``record_evidence_dir``; a PNG to show in the report with ``record_plot``, or a
scenario's figures to have drawn and shown with ``record_figures`` (``checks.drawing``: a
figure that cannot be drawn makes its check an error, in JUnit too); whether the
emulation kept up with ``record_fidelity``; how its expected numbers follow from the
lab's config with ``record_derivation`` (lines "config value -> number"); which host pairs
a forwarding check probed, and how they were chosen, with ``record_probes``. Files are
listed relative to the results folder.
"""
from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest

from .drawing import Drawer, DrawingError, Figures
from .summary_md import write_markdown
from ..labs import fingerprint
from ..labs import state as states
from ..labs.topology import NAME_RE

LAB_INFO = pytest.StashKey[dict]()  # {"lab", "runtime", "time_scale"}, set by the lab fixture
EVIDENCE = "evidence"
EVIDENCE_DIR = "evidence_dir"
PLOT = "plot"
FIDELITY = "fidelity"
DERIVATION = "derivation"
PROBES = "probes"
PLUGIN = "rocelab-report"
OUTCOME = "outcome"  # a JUnit property, "error" on a check that crashed
LABELS = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP", "error": "ERROR",
          "inconclusive": "INCONCLUSIVE"}
INCONCLUSIVE = "INCONCLUSIVE"  # a skip whose reason starts with this: fidelity was lost
RERUN_HINT = "rerun with --runtime sim (virtual time) or a larger time scale S"
NOT_FINISHED = "the checks did not finish: pytest was killed or crashed"
INTERRUPTED = "the checks were interrupted: the results are partial"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rocelab checks")
    group.addoption("--results", default=None, metavar="DIR",
                    help="folder for evidence, summary.json (and junit.xml if asked)")


def results_dir(config: pytest.Config) -> Path | None:
    value = config.getoption("results", default=None)
    return Path(value).resolve() if value else None


def record_evidence(request, path: str | Path) -> None:
    """Attach one evidence file to the running check (``request`` or an item)."""
    node = getattr(request, "node", request)
    node.user_properties.append((EVIDENCE, str(path)))


def record_evidence_dir(request, path: str | Path) -> None:
    """Attach every file that ends up in ``path`` (listed when the session ends)."""
    node = getattr(request, "node", request)
    node.user_properties.append((EVIDENCE_DIR, str(path)))


def record_plot(request, path: str | Path) -> None:
    """Attach a PNG the report shows inline (it is not repeated as evidence)."""
    node = getattr(request, "node", request)
    node.user_properties.append((PLOT, str(path)))


def record_figures(request, figures: Figures) -> None:
    """Attach a scenario's figures and have them drawn (``checks.drawing``): in the check on
    a live lab, by a worker process while the next check runs on a simulated one."""
    node = getattr(request, "node", request)
    for path in figures.outputs():
        record_plot(node, path)
    report = node.config.pluginmanager.get_plugin(PLUGIN)
    if report is None:  # the checks run without this plugin: nothing would wait for them
        figures.draw()
    else:
        report.drawer.draw(node.nodeid, figures)


def record_fidelity(request, fidelity: dict) -> None:
    """Say whether the emulation kept up during the check: ``{"ok": bool, "problems":
    [str, ...]}`` plus any figures; the report warns when it did not."""
    node = getattr(request, "node", request)
    node.user_properties.append((FIDELITY, dict(fidelity)))


def record_derivation(request, lines: list[str]) -> None:
    """Attach how the check's expected numbers were derived from the lab's config."""
    node = getattr(request, "node", request)
    node.user_properties.append((DERIVATION, list(lines)))


def record_probes(request, probes: dict) -> None:
    """Attach which pairs the check probed and how they were chosen (``checks.sample``):
    ``{"how": str, "sampled": bool, "pairs": [[src, dst], ...]}``."""
    node = getattr(request, "node", request)
    node.user_properties.append((PROBES, dict(probes)))


def merged_fidelity(properties: list[tuple[str, object]]) -> dict | None:
    """One fidelity per check: ok only if every record was ok, all problems listed, the
    p99 lateness nearest its bound over every record, the other figures of the latest
    record (None when the check recorded none)."""
    records = [value for key, value in properties if key == FIDELITY]
    if not records:
        return None
    merged: dict = {}
    for record in records:
        merged.update(record)
    merged["ok"] = all(bool(r.get("ok", True)) and not r.get("problems") for r in records)
    merged["problems"] = [p for r in records for p in r.get("problems") or []]
    worst = [r["worst"] for r in records if r.get("worst")]
    if worst:  # the record with the least room decides how close the check came
        merged["worst"] = max(worst, key=lambda w: w.get("ratio", 0.0))
    return merged


def deployed(lab: str | None) -> dict:
    """What the lab was brought up from: its topology path and the sha256 of each file
    (the hashes that ran), and which of them differ now (a lab used with --reuse)."""
    try:
        state = states.load(lab) if lab and NAME_RE.match(lab) else None
    except ValueError:  # unreadable: nothing to say about what ran
        state = None
    if state is None:
        return {"topology": None, "fingerprint": {}, "changed_since_up": [], "calibration": {}}
    return {"topology": state.topology, "fingerprint": state.fingerprint,
            "changed_since_up": fingerprint.changed(state.fingerprint),
            "calibration": state.calibration}


def write_summary(results: Path, summary: dict) -> Path:
    """summary.json, written atomically, and summary.md from it; the markdown's path."""
    results.mkdir(parents=True, exist_ok=True)
    states.write_atomic(results / "summary.json", json.dumps(summary, indent=1) + "\n")
    return write_markdown(results)


def provisional(results: Path, lab: str, runtime: str, time_scale: float | None) -> Path:
    """The summary a run leaves if pytest never writes its own: status incomplete."""
    return write_summary(results, {
        "status": "incomplete", "status_reason": NOT_FINISHED, "lab": lab, "runtime": runtime,
        "time_scale": time_scale, **deployed(lab),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "duration": None, "results": str(results),
        "counts": {k: 0 for k in LABELS}, "checks": []})


def crashed(call: pytest.CallInfo) -> bool:
    """Whether the check raised something other than a verdict: a failed assertion or
    ``pytest.fail`` is a FAIL, a skip a SKIP, anything else a crash."""
    return call.excinfo is not None and not call.excinfo.errisinstance(
        (AssertionError, pytest.fail.Exception, pytest.skip.Exception))


def junit_errors(path: Path, undrawn: dict[str, DrawingError]) -> None:
    """Rewrite, in the JUnit file pytest wrote, each crashed check's ``<failure>`` as an
    ``<error>`` (its test case has the property ``outcome`` = ``error``), and the suite's
    counts with it: pytest calls any exception in a test's body a failure. A check whose
    figures could not be drawn (``undrawn``: one of its ``plot`` properties, and why) is an
    error too, whatever pytest wrote of it, its error carrying the worker's traceback."""
    tree = ET.parse(path)
    for suite in tree.getroot().iter("testsuite"):
        counts = {k: int(suite.get(k, "0")) for k in ("failures", "errors", "skipped")}
        for case in suite.iter("testcase"):
            props = [(p.get("name"), p.get("value")) for p in case.iter("property")]
            why = next((undrawn[v] for k, v in props if k == PLOT and v in undrawn), None)
            if (OUTCOME, "error") not in props and why is None:
                continue
            for failure in case.findall("failure"):
                failure.tag = "error"
                counts["failures"] -= 1
                counts["errors"] += 1
            if why is not None:
                for skipped in case.findall("skipped"):
                    case.remove(skipped)
                    counts["skipped"] -= 1
                if case.find("error") is None:
                    error = ET.SubElement(case, "error", message=f"figures not drawn: {why.line}")
                    error.text = why.trace
                    counts["errors"] += 1
        for key, value in counts.items():
            suite.set(key, str(value))
    tree.write(path, encoding="utf-8", xml_declaration=True)


def reason_of(report: pytest.TestReport) -> str:
    """One line a person can read: the assertion's own message when it has one."""
    if report.skipped:
        longrepr = report.longrepr
        if isinstance(longrepr, tuple) and len(longrepr) == 3:
            return str(longrepr[2]).removeprefix("Skipped: ")
        return str(longrepr or "")
    crash = getattr(report.longrepr, "reprcrash", None)
    message = crash.message if crash is not None else str(report.longrepr or "")
    for prefix in ("AssertionError: ", "Failed: "):
        if message.startswith(prefix):
            message = message[len(prefix):]
            break
    first = message.strip().splitlines()[0] if message.strip() else ""
    if first == "AssertionError" or not first:
        return "assertion failed (no message)"
    return first


class _Check:
    def __init__(self, nodeid: str, name: str) -> None:
        self.nodeid = nodeid
        self.name = name
        self.outcome = "passed"
        self.reason = ""
        self.duration = 0.0
        self.properties: list[tuple[str, object]] = []
        self.printed = False
        self.called = False  # its call phase reported (an interrupt can cut it short)
        self.crashed = False  # its call raised something other than a verdict


class Report:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.started = time.time()
        self.checks: dict[str, _Check] = {}
        self.drawer = Drawer(background=config.getoption("runtime", default=None) == "sim")

    def _check(self, report: pytest.TestReport) -> _Check:
        check = self.checks.get(report.nodeid)
        if check is None:
            name = report.nodeid.split("::", 1)[-1]
            check = self.checks[report.nodeid] = _Check(report.nodeid, name)
        return check

    def _write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)
        else:
            print(line, flush=True)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call):
        """A check that crashed is an error, whatever its fidelity. A check whose emulation
        lost fidelity has no verdict: whatever its assertions said, it is reported as
        skipped (JUnit too) with an INCONCLUSIVE reason that keeps what it would have said
        and how to get a verdict."""
        outcome = yield
        report = outcome.get_result()
        if report.when != "call" or report.skipped:
            return
        if crashed(call):
            self._check(report).crashed = True
            item.user_properties.append((OUTCOME, "error"))
            return
        fidelity = merged_fidelity(item.user_properties)
        if fidelity is None or fidelity["ok"]:
            return
        would = "passed" if report.passed else f"failed: {reason_of(report)}"
        problems = "; ".join(fidelity["problems"][:3]) + (
            f" (+{len(fidelity['problems']) - 3} more)" if len(fidelity["problems"]) > 3 else "")
        message = (f"{INCONCLUSIVE}: the emulation lost fidelity ({problems}); the check "
                   f"would have {would}; {RERUN_HINT}")
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {message}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_report_teststatus(self, report, config):
        """Keep pytest's categories (its counts stay right) but drop its dots and words:
        the [PASS]/[FAIL] lines say it."""
        outcome = yield
        result = outcome.get_result()
        if result:
            outcome.force_result((result[0], "", ""))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        check = self._check(report)
        check.duration += report.duration
        for prop in report.user_properties:
            if prop not in check.properties:
                check.properties.append(prop)
        if report.when == "call":
            check.called = True
            if report.failed and check.crashed:
                check.outcome, check.reason = "error", f"crashed: {reason_of(report)}"
            elif report.failed:
                check.outcome, check.reason = "failed", reason_of(report)
            elif report.skipped:
                reason = reason_of(report)
                check.outcome = "inconclusive" if reason.startswith(INCONCLUSIVE) else "skipped"
                check.reason = reason
        elif report.failed and check.outcome != "failed" and not check.crashed:
            check.outcome = "error"  # its setup or teardown broke
            check.reason = f"{report.when}: {reason_of(report)}"
        elif report.when == "setup" and report.skipped:
            check.outcome, check.reason = "skipped", reason_of(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        """A check file that does not even import is a failure to report, not to hide."""
        if report.failed:
            check = self._check(report)
            check.outcome = "error"
            check.reason = f"collection: {reason_of(report)}"
            self._print(check)

    def pytest_runtest_logfinish(self, nodeid: str, location) -> None:
        check = self.checks.get(nodeid)
        if check is not None:
            self._print(check)

    def _print(self, check: _Check) -> None:
        if check.printed:
            return
        check.printed = True
        label = LABELS[check.outcome]
        self._write(f"[{label}] {check.name}" + (f": {check.reason}" if check.reason else ""))

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in LABELS}
        for check in self.checks.values():
            out[check.outcome] += 1
        return out

    def evidence(self, check: _Check, results: Path | None) -> list[str]:
        files: list[Path] = []
        plots = {Path(str(value)).resolve() for key, value in check.properties if key == PLOT}
        for key, value in check.properties:
            if key == EVIDENCE:
                files.append(Path(str(value)))
            elif key == EVIDENCE_DIR and Path(str(value)).is_dir():
                files += sorted(p for p in Path(str(value)).rglob("*")
                                if p.is_file() and p.resolve() not in plots)
        return self.relative(files, results)

    def plots(self, check: _Check, results: Path | None) -> list[str]:
        return self.relative([Path(str(v)) for k, v in check.properties if k == PLOT], results)

    @staticmethod
    def relative(files: list[Path], results: Path | None) -> list[str]:
        """Paths relative to the results folder when inside it (links in summary.md work
        wherever the folder is copied), absolute otherwise; no duplicates."""
        out = []
        for f in files:
            f = f.resolve()
            text = str(f.relative_to(results)) if results and f.is_relative_to(results) else str(f)
            if text not in out:
                out.append(text)
        return out

    def summary(self, complete: bool = True) -> dict:
        results = results_dir(self.config)
        info = self.config.stash.get(LAB_INFO, {})
        lab = info.get("lab") or self.config.getoption("lab", default=None)
        return {
            "status": "complete" if complete else "incomplete",
            "status_reason": "" if complete else INTERRUPTED,
            "lab": lab,
            "runtime": info.get("runtime"),
            "time_scale": info.get("time_scale"),
            **(info.get("deployed") or deployed(lab)),
            **({k: info[k] for k in ("seed", "jitter_ns") if k in info}),
            "tables": info.get("tables", {}),
            "started": datetime.fromtimestamp(self.started, timezone.utc).isoformat(
                timespec="seconds"),
            "duration": round(time.time() - self.started, 3),
            "results": str(results) if results else None,
            "counts": self.counts(),
            "checks": [{"name": c.name, "nodeid": c.nodeid, "outcome": c.outcome,
                        "reason": c.reason, "duration": round(c.duration, 3),
                        "evidence": self.evidence(c, results),
                        "plots": self.plots(c, results),
                        "fidelity": merged_fidelity(c.properties),
                        "derivation": [line for k, v in c.properties if k == DERIVATION
                                       for line in v],
                        "probes": next((v for k, v in reversed(c.properties) if k == PROBES),
                                       None)}
                       for c in self.checks.values()],
        }

    def undrawn(self, complete: bool) -> dict[str, DrawingError]:
        """Wait for the figures drawn in the background; each check whose figures could not
        be drawn becomes an error, unless it is one already (and is printed again, after
        the worker's traceback). Per plot of those, why."""
        plots: dict[str, DrawingError] = {}
        for nodeid, why in self.drawer.finish(cancel=not complete).items():
            check = self.checks[nodeid]
            if check.outcome != "error":
                had = check.outcome + (f": {check.reason}" if check.reason else "")
                check.outcome = "error"
                check.reason = f"figures not drawn: {why.line} (it had {had})"
                check.printed = False
            if why.trace:  # what a live run's check would have shown as its crash
                self._write(f"{check.name}: its figures could not be drawn\n{why.trace.rstrip()}")
            plots.update((str(v), why) for k, v in check.properties if k == PLOT)
        return plots

    @pytest.hookimpl(trylast=True)  # after pytest's junitxml has written its file
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus) -> None:
        complete = exitstatus != pytest.ExitCode.INTERRUPTED
        for check in self.checks.values():
            if not complete and check.outcome == "passed" and not check.called:
                check.outcome, check.reason = "error", "interrupted before it finished"
        undrawn = self.undrawn(complete)
        if undrawn and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED  # pytest's own exit code too
        xml = self.config.getoption("xmlpath", default=None)
        if xml and Path(xml).is_file() and (undrawn or any(c.crashed
                                                           for c in self.checks.values())):
            junit_errors(Path(xml), undrawn)
        for check in self.checks.values():
            self._print(check)
        summary = self.summary(complete=complete)
        results = results_dir(self.config)
        where = ""
        if results is not None:
            where = f" (results in {results}) report: {write_summary(results, summary)}"
        counts = summary["counts"]
        parts = [f"{counts[k]} {k}" for k in ("passed", "failed", "error", "inconclusive",
                                              "skipped")
                 if counts[k] or k in ("passed", "failed")]
        self._write(f"checks: {', '.join(parts)}{where}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Report(config), PLUGIN)
