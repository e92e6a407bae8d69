"""``tune`` on labs the project does not ship, generated here: the same seed gives the same
report, the recommended copy's ECN check rerun (the code path the sweep judges with) agrees
with the sweep's column, and what such a lab may hold (no incast, a DCQCN the sweep cannot
write, files beside it or outside its folder) is one line before any run, never a worker's
traceback or a copy of everything near the clab file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from rocelab.checks import tune_report as rep
from rocelab.checks.tune import plan, recheck, tune, verdict
from rocelab.checks.tune_apply import ApplyError, check_points, copy_lab
from rocelab.checks.tune_fanout import lab_digest
from rocelab.checks.tune_run import Task
from rocelab.checks.tune_space import references
from rocelab.labs import generate as gen
from rocelab.labs import topology
from rocelab.labs.generate_spec import Spec

from tests.unit.test_tune import QUICK, rocelab


def generated(tmp_path: Path, name: str = "unseen", **spec: object) -> Path:
    """A lab written by the generator into ``tmp_path``: its clab file."""
    return gen.write(Spec(name, **spec), tmp_path / name).path / f"{name}.clab.yml"


# --- a whole sweep, twice ------------------------------------------------------------------


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> tuple[Path, list[dict]]:
    """A quick sweep (one sampled point and the references, the incast only) of a generated
    lab of its own shape (DSCP 24 on priority 4, CNPs on priority 7, 3 hosts per leaf),
    run twice into two folders with the same seed."""
    tmp = tmp_path_factory.mktemp("unseen")
    clab = generated(tmp, hosts_per_leaf=3, roce_dscp=24, roce_priority=4, cnp_dscp=40,
                     cnp_priority=7, radix=16)
    outcomes = []
    for run in ("a", "b"):
        p = plan(str(clab), points=1, seed=5, fraction=QUICK, scenarios=("incast",))
        outcomes.append(tune(p, tmp / run, workers=2, progress=False))
    return tmp, outcomes


def _figures(outcome: dict) -> dict:
    """An outcome without the one thing that names its folder: the recommended copy's path."""
    return {**outcome, "recheck": {k: v for k, v in outcome["recheck"].items() if k != "lab"}}


def test_the_same_seed_gives_the_same_report(swept):
    tmp, (first, second) = swept
    assert _figures(first) == _figures(second)
    on_disk = [json.loads((tmp / run / "points.json").read_text()) for run in ("a", "b")]
    assert _figures(on_disk[0]) == _figures(on_disk[1])
    assert [r["name"] for r in first["points"]] == ["p00", "nvidia", "alibaba", "pfc-only"]


def test_the_recommended_copys_ecn_check_is_the_reports_column(swept, tmp_path):
    tmp, (outcome, _) = swept
    chosen = next(r for r in outcome["points"] if r["name"] == outcome["recommended"])
    copy = tmp / "a" / "recommended" / "unseen" / "unseen.clab.yml"
    assert outcome["recheck"]["lab"] == str(copy)
    assert outcome["recheck"]["problems"] == chosen["ecn_check"]
    # run afresh, into another folder: measured again, not read back
    p = plan(str(copy), points=1, seed=5, fraction=QUICK, scenarios=("incast",))
    again = recheck(copy, p, tmp_path, workers=1, progress=False)
    assert again["problems"] == chosen["ecn_check"] and len(list(tmp_path.glob("runs/*"))) == 2
    report = (tmp / "a" / "report.md").read_text()
    assert "The ECN check rerun on `unseen` in `recommended/`" in report


# --- verdicts ------------------------------------------------------------------------------


def test_without_an_incast_the_ecn_check_is_not_judged_rather_than_failed():
    fig = {"pause_fraction": 0.1, "share": 0.9, "fct_p50_s": 1.0, "fct_p99_s": 2.0,
           "ce_marks": 1, "cnps": 1, "drops": 0, "drop_reasons": {}, "retransmitted": 0,
           "complete": True}
    rows = rep.summarize([(Task("lab", name, {"wred": {}, "dcqcn": {}}, "alltoall", 0), fig)
                          for name in ("p00", "pfc-only")])
    chosen, passes = rep.recommend(rows)
    assert chosen is not None and passes is None
    assert verdict(passes) == "the ECN check not judged (no incast among the scenarios)"


# --- labs as they come ---------------------------------------------------------------------


def test_a_lab_without_an_incast_is_one_line(capsys, tmp_path):
    clab = generated(tmp_path, "pair", hosts_per_leaf=1)
    code, err = rocelab(capsys, "tune", str(clab), "--results", str(tmp_path / "out"))
    assert code == 2 and err.strip() == ("rocelab: lab pair: no host is reached by two "
                                         "others, no incast: nothing for tune to measure")
    assert not (tmp_path / "out").exists()


def test_a_missing_lab_is_one_line(capsys, tmp_path):
    code, err = rocelab(capsys, "tune", str(tmp_path / "nowhere.clab.yml"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("rocelab: ") and "nowhere.clab.yml" in err


def test_a_dcqcn_the_sweep_cannot_write_stops_the_plan_before_any_run(tmp_path):
    clab = generated(tmp_path)
    nic = clab.parent / "nic" / "default.yml"
    data = yaml.safe_load(nic.read_text())
    data["dcqcn"] = {"enabled": True, "mode": "paper"}
    nic.write_text(yaml.safe_dump(data))
    with pytest.raises(ApplyError, match=r"firmware-mode parameter") as refused:
        plan(str(clab), points=1)
    assert str(refused.value).startswith(f"{nic}: dcqcn")  # the lab's file, not a copy


def test_a_copy_holds_the_lab_and_nothing_beside_it(tmp_path):
    clab = generated(tmp_path)
    (clab.parent / "notes.txt").write_text("not the lab's\n")
    (clab.parent / "results" / "runs").mkdir(parents=True)
    (clab.parent / "results" / "runs" / "x.json").write_text("{}\n")
    topo = topology.load(str(clab))
    copy = copy_lab(topo, tmp_path / "copy")
    copied = sorted(str(p.relative_to(copy.parent)) for p in copy.parent.rglob("*")
                    if p.is_file())
    assert copied == sorted(["unseen.clab.yml", "nic/default.yml",
                             *(f"configs/{s.name}/config_db.json" for s in topo.switches)])
    digest = lab_digest(clab)
    (clab.parent / "notes.txt").write_text("edited\n")
    assert lab_digest(clab) == digest
    check_points(topo, [references(100e9)["alibaba"]])
    config = clab.parent / "configs" / "leaf1" / "config_db.json"
    config.write_text(config.read_text().replace('"ecn_all"', '"ecn_all" '))
    assert lab_digest(clab) != digest


def test_a_config_outside_the_lab_folder_is_refused_in_one_line(tmp_path):
    clab = generated(tmp_path)
    outside = tmp_path / "elsewhere" / "config_db.json"
    outside.parent.mkdir()
    (clab.parent / "configs" / "leaf1" / "config_db.json").rename(outside)
    doc = yaml.safe_load(clab.read_text())
    leaf1 = doc["topology"]["nodes"]["leaf1"]
    leaf1["binds"] = [b.replace("configs/leaf1/config_db.json", str(outside))
                      for b in leaf1["binds"]]
    leaf1["labels"] = {topology.ALLOW_OUTSIDE_LABEL: "true"}
    clab.write_text(yaml.safe_dump(doc))
    topo = topology.load(str(clab))
    with pytest.raises(ApplyError, match=r"leaf1's config .*elsewhere/config_db.json is "
                                         r"outside the lab's folder"):
        check_points(topo, [references(100e9)["nvidia"]])
    check_points(topo, [references(100e9)["pfc-only"]])  # the NIC file alone: inside


def test_when_every_point_lost_data_the_command_says_so(capsys, tmp_path, monkeypatch):
    from rocelab.checks import tune as tuning
    from rocelab.cli.program import program
    monkeypatch.setattr(tuning, "plan", lambda *a, **k: tuning.Plan(
        str(tmp_path / "x.clab.yml"), 100e9, [], {}, [], [0]))
    monkeypatch.setattr(tuning, "tune", lambda *a, **k: {
        "recommended": None, "passes_ecn_check": False, "recheck": None})
    program.run(["rocelab", "tune", "roce-v2-leafspine", "--results", str(tmp_path)])
    out = " ".join(capsys.readouterr().out.split())
    assert "no recommendation: every point lost data" in out and "passes" not in out
