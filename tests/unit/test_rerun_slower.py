"""A live scenario that lost fidelity is run once more on a copy of the lab at a
larger time scale, and that run decides; a virtual-time one never is."""
from contextlib import contextmanager
from types import SimpleNamespace

import yaml

from rocelab.checks import congestion as cg
from rocelab.checks import rerun, variants
from rocelab.labs import topology
from rocelab.labs.topology import TIME_SCALE_LABEL


def fake(monkeypatch, slower_ok: bool):
    calls = []

    def run(lab, incast, folder, name, **kw):
        calls.append((lab.name, name, kw["timeout_s"]))
        ok = lab.name == "slow" and slower_ok
        return SimpleNamespace(fidelity={"ok": ok, "problems": [] if ok else [f"{name}: late"],
                                         "time_scale": 3000.0})

    @contextmanager
    def variant(lab, suffix, folder, edit, scale=1.0):
        assert (suffix, scale, edit) == ("slower", rerun.RERUN_SCALE, variants.keep_configs)
        yield SimpleNamespace(name="slow", runtime_name=lab.runtime_name)

    monkeypatch.setattr(cg, "_run_incast", run)
    monkeypatch.setattr(rerun, "variant", variant)
    return calls


def incast(runtime, tmp_path):
    lab = SimpleNamespace(name="lab", runtime_name=runtime)
    return cg.run_incast(lab, None, tmp_path, "x", flows=[], timeout_s=10.0)


def test_a_live_run_that_lost_fidelity_is_decided_by_one_slower_rerun(monkeypatch, tmp_path):
    calls = fake(monkeypatch, slower_ok=True)
    run = incast("netns", tmp_path)
    assert calls == [("lab", "x", 10.0), ("slow", "x-slower", 10.0 * rerun.RERUN_SCALE)]
    assert run.fidelity["ok"]
    assert run.fidelity["rerun_of"] == {"name": "x", "time_scale": 3000.0,
                                        "factor": rerun.RERUN_SCALE, "problems": ["x: late"]}


def test_only_one_rerun_and_it_may_stay_undecided(monkeypatch, tmp_path):
    calls = fake(monkeypatch, slower_ok=False)
    run = incast("netns", tmp_path)
    assert len(calls) == 2 and not run.fidelity["ok"]
    assert run.fidelity["problems"] == ["x-slower: late"]


def test_virtual_time_never_reruns(monkeypatch, tmp_path):
    calls = fake(monkeypatch, slower_ok=True)
    assert not incast("sim", tmp_path).fidelity["ok"] and len(calls) == 1


def test_the_slower_copy_scales_every_nodes_time_scale():
    lab = topology.load("roce-v2-leafspine")
    doc = yaml.safe_load(lab.path.read_text())
    variants.scaled(doc, lab, 2.0)
    for name, node in doc["topology"]["nodes"].items():
        assert float(node["labels"][TIME_SCALE_LABEL]) == 2 * lab.nodes[name].time_scale


def test_the_report_says_which_checks_a_rerun_decided(tmp_path):
    from rocelab.checks.summary_md import fidelity_warnings
    lines = fidelity_warnings([{"name": "test_x", "fidelity": {
        "ok": True, "problems": [], "rerun_of": {"name": "x", "time_scale": 3000.0,
                                                 "factor": 2.0, "problems": ["h2: late"]}}}])
    assert lines == ["- **test_x**: decided on a rerun at 2.0 x S: the first run at S = "
                     "3000.0 lost fidelity (h2: late)"]


def test_a_variant_runs_at_its_labs_calibrated_s_not_calibrated_again():
    """A negative control's copy (scale 1) of a lab lab.up ran at S = 4500: the copy
    declares 4500 on every node, so its own lab.up keeps it."""
    lab = topology.load("roce-v2-leafspine").with_time_scale(4500.0)
    doc = yaml.safe_load(lab.path.read_text())
    variants.scaled(doc, lab, 1.0)
    assert {node["labels"][TIME_SCALE_LABEL] for node in doc["topology"]["nodes"].values()} \
        == {"4500"}


def test_any_scenario_reruns_the_same_way(monkeypatch, tmp_path):
    """The modes' and the victim's runs (an attempt returning their figures) get the same
    one slower rerun as an incast: the slower copy, its label and its factor."""
    calls = fake(monkeypatch, slower_ok=True)
    seen = []

    def attempt(lab, label, factor):
        seen.append((lab.name, label, factor))
        ok = lab.name == "slow"
        return {"fidelity": {"ok": ok, "problems": [] if ok else ["late"], "time_scale": 9.0}}
    lab = SimpleNamespace(name="lab", runtime_name="netns")
    got = rerun.decided(lab, tmp_path, "lossy", attempt, lambda m: m["fidelity"])
    assert calls == [] and seen == [("lab", "lossy", 1.0), ("slow", "lossy-slower",
                                                            rerun.RERUN_SCALE)]
    assert got["fidelity"]["rerun_of"]["problems"] == ["late"]


def test_a_checks_fidelity_keeps_the_worst_lateness_of_all_its_runs():
    from rocelab.checks.report import FIDELITY, merged_fidelity
    near = {"where": "h2", "ratio": 0.9}
    merged = merged_fidelity([(FIDELITY, {"ok": True, "problems": [], "worst": near}),
                              (FIDELITY, {"ok": True, "problems": [],
                                          "worst": {"where": "h3", "ratio": 0.2}})])
    assert merged["worst"] == near and merged["ok"]
