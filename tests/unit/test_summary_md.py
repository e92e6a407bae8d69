"""checks.summary_md: the page read first; and checks.report attaching plots and fidelity."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from rocelab.checks import summary_md

ROOT = Path(__file__).resolve().parents[2]

SUMMARY = {
    "lab": "roce-v2-leafspine", "runtime": "netns", "time_scale": 3000.0,
    "started": "2026-11-30T01:00:00+00:00", "duration": 42.5, "results": "/r",
    "counts": {"passed": 1, "failed": 1, "skipped": 1, "error": 1},
    "checks": [
        {"name": "test_incast_lossless", "outcome": "passed", "reason": "", "duration": 12.0,
         "evidence": ["incast/counters.json"], "plots": ["incast/queues.png"],
         "fidelity": {"ok": False, "problems": ["scheduler late by 4 ms on leaf1"]}},
        {"name": "test_pfc_off_drops", "outcome": "failed",
         "reason": "no drop on leaf1 Ethernet8 | PG3", "duration": 3.25, "evidence": []},
        {"name": "test_skipped", "outcome": "skipped", "reason": "no rxe", "duration": 0.0},
        {"name": "test_dead", "outcome": "error", "reason": "setup: agent leaf9 is dead",
         "duration": 0.1, "fidelity": None, "plots": None},
    ],
}


def write(tmp_path: Path, summary: dict) -> str:
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    out = summary_md.write_markdown(tmp_path)
    assert out == tmp_path / "summary.md"
    return out.read_text()


def test_title_names_lab_date_duration_and_time_scale(tmp_path):
    text = write(tmp_path, SUMMARY)
    first, _, facts = text.splitlines()[:3]
    assert first == "# rocelab checks: roce-v2-leafspine"
    assert "2026-11-30T01:00:00+00:00" in facts and "42.5 s" in facts and "S = 3000" in facts


def test_title_says_how_lab_up_chose_the_time_scale(tmp_path):
    assert "chose" not in write(tmp_path, SUMMARY) and "raised" not in write(tmp_path, SUMMARY)
    record = {"time_scale": 4500.0, "floor": 3000.0, "core_fps": 60000.0, "cores": 2,
              "cores_free": 1.3, "share": 0.045, "capped": False}
    text = write(tmp_path, {**SUMMARY, "time_scale": 4500.0, "calibration": record})
    assert ("lab roce-v2-leafspine: time scale S = 4500, raised from 3000 (1.3 of 2 cores "
            "free, per-core speed") in text


def test_verdict_counts_failures_and_errors(tmp_path):
    text = write(tmp_path, SUMMARY)
    assert "**1 failed, 1 could not run (error)** of 4 checks (1 passed, 0 inconclusive, " \
           "1 skipped)." in text
    lost = {**SUMMARY, "checks": SUMMARY["checks"][:1]}  # passed, fidelity lost
    assert "**Inconclusive (exit 3): 1 of 1 checks could not decide**" in write(tmp_path, lost)
    kept = {**lost["checks"][0], "fidelity": {"ok": True, "problems": []}}
    assert "**All 1 checks passed.**" in write(tmp_path, {**SUMMARY, "checks": [kept]})


def test_verdict_says_inconclusive_and_how_to_get_one(tmp_path):
    lost = {"name": "test_lossless_incast", "outcome": "inconclusive",
            "reason": "INCONCLUSIVE: the emulation lost fidelity (...)", "duration": 3.0}
    kept = {**SUMMARY["checks"][0], "fidelity": {"ok": True, "problems": []}}
    text = write(tmp_path, {**SUMMARY, "checks": [kept, lost]})
    assert "**Inconclusive (exit 3): 1 of 2 checks could not decide**" in text
    assert "(1 passed, 1 inconclusive, 0 skipped)" in text and "`--runtime sim`" in text
    assert "| ❔ INCONCLUSIVE | test_lossless_incast |" in text


def test_table_has_a_row_per_check_with_its_reason(tmp_path):
    text = write(tmp_path, SUMMARY)
    assert "| ✅ PASS | test_incast_lossless |  | 12.00 s |" in text
    assert "| ❌ FAIL | test_pfc_off_drops | no drop on leaf1 Ethernet8 \\| PG3 | 3.25 s |" \
        in text
    assert "| ⚠️ ERROR | test_dead | setup: agent leaf9 is dead | 0.10 s |" in text


def test_warns_when_the_emulation_lost_fidelity(tmp_path):
    text = write(tmp_path, SUMMARY)
    warnings = [line for line in text.splitlines() if "lost fidelity" in line]
    assert warnings == ["- ⚠️ **test_incast_lossless**: the emulation lost fidelity "
                        "(scheduler late by 4 ms on leaf1); its verdict may not hold on a "
                        "real fabric."]


def test_embeds_plots_and_links_evidence_relatively(tmp_path):
    text = write(tmp_path, SUMMARY)
    assert "![queues](incast/queues.png)" in text
    assert "- **test_incast_lossless**: [counters.json](incast/counters.json)" in text


def test_an_old_summary_without_the_new_keys_still_renders(tmp_path):
    old = {k: v for k, v in SUMMARY.items() if k != "time_scale"}
    old["checks"] = [{"name": "test_a", "outcome": "passed", "reason": "", "duration": 1.0,
                      "evidence": []}]
    text = write(tmp_path, old)
    assert "time scale S not recorded" in text and "## Plots" not in text
    assert "## Fidelity" not in text


FAKE_CHECKS = '''
from rocelab.checks.report import record_fidelity, record_plot, results_dir

def test_with_plot(request):
    png = results_dir(request.config) / "plots" / "q.png"
    png.parent.mkdir(parents=True)
    png.write_bytes(b"png")
    record_plot(request, png)
    record_fidelity(request, {"ok": True, "problems": [], "late_ms": 0.1})
    record_fidelity(request, {"ok": False, "problems": ["leaf1 dropped frames on its socket"]})

def test_plain():
    pass
'''


def test_report_plugin_records_plots_and_fidelity_and_writes_the_markdown(tmp_path):
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "test_fake.py").write_text(FAKE_CHECKS)
    results = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(tmp_path / "checks"), "-p", "rocelab.checks.report",
         "-p", "no:cacheprovider", "--results", str(results), "-q", "--rootdir",
         str(tmp_path)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"report: {results / 'summary.md'}" in proc.stdout
    by_name = {c["name"]: c for c in json.loads((results / "summary.json").read_text())["checks"]}
    (plot,) = by_name["test_with_plot"]["plots"]
    assert plot == "plots/q.png" and (results / plot).is_file()
    assert by_name["test_with_plot"]["fidelity"] == {
        "ok": False, "problems": ["leaf1 dropped frames on its socket"], "late_ms": 0.1}
    assert by_name["test_plain"]["fidelity"] is None and by_name["test_plain"]["plots"] == []
    text = (results / "summary.md").read_text()
    assert f"![q]({plot})" in text and "leaf1 dropped frames on its socket" in text


def test_an_incomplete_run_says_so_before_the_verdict(tmp_path):
    text = write(tmp_path, {**SUMMARY, "status": "incomplete",
                            "status_reason": "the checks were interrupted: the results are "
                                             "partial"})
    lines = [line for line in text.splitlines() if line]
    banner = next(i for i, line in enumerate(lines) if "Incomplete run" in line)
    assert "interrupted" in lines[banner]
    assert banner < next(i for i, line in enumerate(lines) if line.startswith("**1 failed"))
    assert "Incomplete" not in write(tmp_path, SUMMARY)  # a complete run has no banner


def test_names_the_topology_and_the_hash_of_every_file_that_ran(tmp_path):
    files = {"/labs/x/x.clab.yml": "a" * 64, "/labs/x/configs/leaf1/config_db.json": "b" * 64,
             "/elsewhere/nic.yml": "c" * 64}
    text = write(tmp_path, {**SUMMARY, "topology": "/labs/x/x.clab.yml", "fingerprint": files,
                            "changed_since_up": ["/labs/x/configs/leaf1/config_db.json"]})
    section = text[text.index("## Topology"):]
    assert "Brought up from `/labs/x/x.clab.yml`" in section
    assert f"| x.clab.yml | `{'a' * 16}` |" in section
    assert f"| configs/leaf1/config_db.json ⚠️ changed since lab.up | `{'b' * 16}` |" in section
    assert f"| /elsewhere/nic.yml | `{'c' * 16}` |" in section
