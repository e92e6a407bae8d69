"""``tune``: the sampled space, a point written into a lab copy, the verdicts and the choice
drawn from figures, and the measurements themselves (deterministic per seed, the same
through the process pool and through Dask)."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from rocelab.checks import congestion as cg
from rocelab.checks import tune_report as rep
from rocelab.checks.tune_apply import ApplyError, apply, copy_lab
from rocelab.checks import tune_fanout
from rocelab.checks.tune_fanout import Store, code_digest, key, lab_digest, run
from rocelab.checks.tune_run import Task, measure
from rocelab.checks.tune import plan
from rocelab.checks.tune_space import (
    SpaceError, counter_off_too, default_space, grid, override, references, sample,
)
from rocelab.labs import topology
from tests.conftest import copy_lab as copy_test_lab

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "topologies" / "roce-v2-leafspine" / "roce-v2-leafspine.clab.yml"
QUICK = 0.02  # of each scenario's volume: a few ms of simulation


# --- the space -----------------------------------------------------------------------------

def test_a_seeded_sample_is_the_same_points_within_the_bounds():
    space = default_space(100e9)
    a, b = sample(space, 8, seed=3), sample(space, 8, seed=3)
    assert a == b and a != sample(space, 8, seed=4)
    kmin = next(d for d in space if d.name == "kmin")
    for p in a:
        assert kmin.lo <= p["wred"]["kmin"] <= kmin.hi
        assert 2 * p["wred"]["kmin"] - 1 <= p["wred"]["kmax"] <= 16 * p["wred"]["kmin"] + 1
        assert 1 <= p["wred"]["pmax"] <= 100 and isinstance(p["dcqcn"]["rpg_ai_rate"], int)


def test_a_latin_hypercube_puts_one_point_in_each_stratum():
    space = default_space(100e9)
    pmax = next(d for d in space if d.name == "pmax")
    points = sample([pmax], 5, seed=0)
    strata = sorted(int(5 * (math.log(p["wred"]["pmax"]) - math.log(1)) / math.log(100))
                    for p in points)
    assert strata == [0, 1, 2, 3, 4]


def test_bounds_scale_with_the_bottleneck_and_the_references_too():
    k100 = next(d for d in default_space(100e9) if d.name == "kmin")
    k400 = next(d for d in default_space(400e9) if d.name == "kmin")
    assert (k400.lo, k400.hi) == (4 * k100.lo, 4 * k100.hi)
    assert references(400e9)["alibaba"]["wred"] == {"kmin": 1_600_000, "kmax": 6_400_000,
                                                    "pmax": 20}
    assert references(100e9)["nvidia"]["wred"]["kmax"] == 1_500_000


def test_a_bound_overrides_pins_or_adds_a_dimension():
    space = override(default_space(100e9), ["pmax=5:50", "rpg_ai_rate=7",
                                           "min_time_between_cnps=2:8"])
    dims = {d.name: d for d in space}
    assert (dims["pmax"].lo, dims["pmax"].hi) == (5, 50)
    assert all(p["dcqcn"]["rpg_ai_rate"] == 7 for p in sample(space, 4, 0))
    assert dims["min_time_between_cnps"].section == "dcqcn"
    assert len(grid(space[:2], 3)) == 9


def test_a_parameter_can_be_pinned_off_at_zero():
    """``rpg_byte_reset=0`` is the firmware's "0=DISABLED": the byte counter off."""
    space = override(default_space(400e9), ["rpg_byte_reset=0"])
    assert {p["dcqcn"]["rpg_byte_reset"] for p in sample(space, 3, 0)} == {0}


@pytest.mark.parametrize("bad, says", [("foo=1:2", "--bound foo"), ("pmax=x", "NAME=LO:HI"),
                                       ("pmax=5:1", "0 < LO <= HI"),
                                       ("rpg_byte_reset=0:100", "0 < LO <= HI")])
def test_a_bad_bound_is_one_line(bad, says):
    with pytest.raises(SpaceError, match=says):
        override(default_space(100e9), [bad])


# --- a point written into a lab --------------------------------------------------------------

def test_a_point_edits_the_roce_queues_wred_and_the_nic_files(tmp_path):
    topo = topology.load(str(LAB))
    clab = copy_lab(topo, tmp_path / "lab")
    point = {"wred": {"kmin": 123_000, "kmax": 456_000, "pmax": 7},
             "dcqcn": {"rpg_ai_rate": 9}}
    patch = apply(topo, clab, point)
    copy = topology.load(str(clab))
    for node in copy.switches:
        for name, profile in node.config.qos.wred_profiles.items():
            assert (profile.green.min_threshold, profile.green.max_threshold,
                    profile.green.drop_probability) == (123_000, 456_000, 7)
    assert all(h.nic.dcqcn.rpg_ai_rate == 9 for h in copy.hosts)
    ops = patch["configs/leaf1/config_db.json"]
    assert {"op": "replace", "path": "/WRED_PROFILE/AZURE_LOSSLESS/green_min_threshold",
            "value": "123000"} in ops
    assert patch["nic/default.yml"] == [{"op": "replace", "path": "/dcqcn/rpg_ai_rate",
                                         "value": 9}]
    # the lab itself is untouched
    assert topology.load(str(LAB)).hosts[0].nic.dcqcn.rpg_ai_rate == 5


def test_a_value_the_nic_refuses_names_the_file_and_field(tmp_path):
    topo = topology.load(str(LAB))
    clab = copy_lab(topo, tmp_path / "lab")
    with pytest.raises(ApplyError, match=r"default.yml: dcqcn.rpg_gd"):
        apply(topo, clab, {"wred": {}, "dcqcn": {"rpg_gd": 99}})


def test_pfc_only_turns_dcqcn_off_in_the_nic_files(tmp_path):
    topo = topology.load(str(LAB))
    clab = copy_lab(topo, tmp_path / "lab")
    apply(topo, clab, references(100e9)["pfc-only"])
    assert yaml.safe_load((clab.parent / "nic" / "default.yml").read_text())["dcqcn"][
        "enabled"] is False


# --- verdicts and the choice -------------------------------------------------------------------

def _check(xoff: float, share: float, **more) -> dict:
    return {"xoff_fraction": xoff, "bottleneck_share": share, "marks": 5, "cnps": 5,
            "cnps_received": 5, "complete": True, "retransmitted": 0, **more}


def test_the_ecn_verdict_is_the_checks_assertions():
    without = _check(0.6, 0.99, marks=0, cnps=0, cnps_received=0)
    assert rep.ecn_problems(_check(0.1, 0.9), without) == []
    assert rep.ecn_problems(_check(cg.MAX_XOFF_FRACTION, 0.9), without) == [
        f"XOFF {cg.MAX_XOFF_FRACTION:.0%} >= {cg.MAX_XOFF_FRACTION:.0%}"]
    assert rep.ecn_problems(_check(0.7, 0.9), without)[0] == "DCQCN did not reduce pausing"
    assert "share 60% < 70%" in rep.ecn_problems(_check(0.1, 0.6), without)
    assert rep.ecn_problems(_check(0.1, 0.9, cnps=0), without) == ["no ECN feedback loop"]


def _fig(pause: float, share: float, p99: float, retransmitted: int = 0, **more) -> dict:
    return {"pause_fraction": pause, "share": share, "fct_p50_s": p99 / 2, "fct_p99_s": p99,
            "ce_marks": 1, "cnps": 1, "drops": 0, "drop_reasons": {},
            "retransmitted": retransmitted, "complete": True, **more}


def _rows(spec: dict[str, tuple]) -> list[dict]:
    results = []
    for name, (pause, share, p99, *rest) in spec.items():
        fig = _fig(pause, share, p99, *rest, ecn_check=_check(pause, share))
        results.append((Task("lab", name, {"wred": {}, "dcqcn": {}}, "incast", 0), fig))
    return rep.summarize(results)


def test_the_front_keeps_the_undominated_and_drops_what_lost_data():
    rows = _rows({"pfc-only": (0.6, 0.99, 1.0), "a": (0.1, 0.9, 1.05), "b": (0.2, 0.85, 1.1),
                  "c": (0.0, 0.95, 1.0, 2)})
    assert sorted(rep.pareto(rows)) == ["a", "pfc-only"]
    assert next(r for r in rows if r["name"] == "b")["p99"] == pytest.approx(1.1)


def test_the_recommendation_is_the_least_pausing_near_the_best_p99_that_passes():
    rows = _rows({"pfc-only": (0.6, 0.99, 1.0), "fast": (0.3, 0.9, 1.0),
                  "calm": (0.05, 0.9, 1.08), "calmer": (0.0, 0.9, 1.5)})
    chosen, passes = rep.recommend(rows)
    assert (chosen["name"], passes) == ("calm", True)


def test_without_a_passing_point_the_best_drop_free_one_is_named_as_failing():
    rows = _rows({"pfc-only": (0.6, 0.99, 1.0), "a": (0.55, 0.9, 1.0)})
    chosen, passes = rep.recommend(rows)
    assert chosen["name"] == "a" and not passes and chosen["ecn_check"]


def test_the_plot_is_written(tmp_path):
    rows = _rows({"pfc-only": (0.6, 0.99, 1.0), "a": (0.1, 0.9, 1.05), "c": (0.0, 0.9, 1.0, 2)})
    path = rep.plot(rows, rep.pareto(rows), "a", ["pfc-only"], tmp_path / "t.png")
    assert path.stat().st_size > 1000


# --- measurements ------------------------------------------------------------------------------

def test_the_key_changes_with_the_lab_the_point_and_the_seed(tmp_path):
    topo = topology.load(str(LAB))
    clab = copy_lab(topo, tmp_path / "lab")
    task = Task(str(clab), "x", {"wred": {"kmin": 1}, "dcqcn": {}}, "incast", 0)
    digest = lab_digest(clab)
    assert key(task, digest) == key(task, lab_digest(clab))
    other = Task(str(clab), "y", {"wred": {"kmin": 2}, "dcqcn": {}}, "incast", 0)
    reseeded = Task(str(clab), "x", task.point, "incast", 1)
    quick = Task(str(clab), "x", task.point, "incast", 0, 0.5)
    assert len({key(t, digest) for t in (task, other, reseeded, quick)}) == 4
    apply(topo, clab, {"wred": {}, "dcqcn": {"rpg_ai_rate": 6}})
    assert lab_digest(clab) != digest


def test_the_key_changes_with_the_code(monkeypatch):
    """A result measured by other code is not reused: the key carries ``code_digest``."""
    task = Task(str(LAB), "x", {"wred": {"kmin": 1}, "dcqcn": {}}, "incast", 0)
    digest = lab_digest(LAB)
    before = key(task, digest)
    monkeypatch.setattr(tune_fanout, "code_digest", lambda: "other code")
    assert key(task, digest) != before


def test_the_code_digest_is_the_run_code_wherever_it_is(tmp_path, monkeypatch):
    """The same sources elsewhere give the same digest; a change to any of them (the
    simulator's, the model's, the checks') another; tests, the CLI, the benchmarks, .pyc
    files and folders that are no subpackage (a virtualenv) do not count."""
    package = tune_fanout.PACKAGE
    copy = tmp_path / "elsewhere" / "rocelab"
    copy.mkdir(parents=True)
    for module in package.glob("*.py"):  # __init__, compiled...
        shutil.copy(module, copy)
    for folder in ("checks", "fabric", "labs", "nic", "traffic"):
        shutil.copytree(package / folder, copy / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    digest = tune_fanout.code_digest.__wrapped__  # the uncached function
    assert code_digest() == digest()
    monkeypatch.setattr(tune_fanout, "PACKAGE", copy)
    assert digest() == code_digest()
    for ignored in ("tests/unit/test_x.py", "cli/x.py", "bench/x.py", "tasks.py",
                    ".venv/lib/x.py", "labs/__pycache__/sim.cpython-311.pyc"):
        (copy / ignored).parent.mkdir(parents=True, exist_ok=True)
        (copy / ignored).write_text("x = 1\n")
    assert digest() == code_digest()
    sim = copy / "labs" / "sim" / "engine.py"
    sim.write_text(sim.read_text() + "\n# changed\n")
    assert digest() != code_digest()


@pytest.fixture(scope="module")
def quick_tasks() -> list[Task]:
    nvidia = references(100e9)["nvidia"]
    return [Task(str(LAB), "nvidia", nvidia, "incast", 0, QUICK),
            Task(str(LAB), "nvidia", nvidia, "alltoall", 0, QUICK)]


def test_the_same_seed_gives_identical_figures(quick_tasks):
    first = measure(quick_tasks[0])
    assert first == measure(quick_tasks[0])
    assert first["ce_marks"] > 0 and first["complete"] and "ecn_check" in first


def test_the_pool_and_dask_give_the_same_results_and_a_rerun_skips_them(quick_tasks,
                                                                         tmp_path):
    distributed = pytest.importorskip("distributed")
    import dask  # distributed's own dependency
    pooled = run(quick_tasks, tmp_path / "pool", workers=2, progress=False)
    # dask's scratch files in the test's folder, not the machine's temporary one
    with dask.config.set({"temporary-directory": str(tmp_path / "dask-scratch")}), \
            distributed.LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                                     dashboard_address=None) as cluster:
        dasked = run(quick_tasks, tmp_path / "dask", cluster=cluster, progress=False)
    assert [f for _, f in pooled] == [f for _, f in dasked]
    stored = sorted((tmp_path / "pool" / "runs").glob("*.json"))
    assert len(stored) == 2
    again = []
    run(quick_tasks, tmp_path / "pool", workers=2, progress=False,
        on_result=lambda t, f: again.append(t))
    assert again == [] and [f for _, f in run(quick_tasks, tmp_path / "pool",
                                              progress=False)] == [f for _, f in pooled]
    assert json.loads(stored[0].read_text())["task"]["scenario"] in ("incast", "alltoall")


def test_a_stored_result_is_read_back(tmp_path):
    store = Store(tmp_path)
    task = Task("lab", "x", {"wred": {}, "dcqcn": {}}, "incast", 0)
    assert store.get("k") is None
    store.put("k", task, {"share": 0.5})
    assert store.get("k") == {"share": 0.5}


# --- the command -------------------------------------------------------------------------------

def rocelab(capsys, *argv: str) -> tuple[int, str]:
    from rocelab.cli.program import program
    try:
        program.run(["rocelab", *argv])
        code = 0
    except SystemExit as done:
        code = done.code or 0
    return code, capsys.readouterr().err


def test_a_bad_bound_exits_2_with_one_line(capsys, tmp_path):
    code, err = rocelab(capsys, "tune", str(LAB), "--bound", "kmin=9:1", "--results",
                        str(tmp_path))
    assert code == 2 and err.strip() == ("rocelab: --bound 'kmin=9:1': needs 0 < LO <= HI, or "
                                         "VALUE alone (0: off, as rpg_byte_reset=0 turns the "
                                         "byte counter off)")


def test_tune_writes_the_recommendation_as_a_lab_copy_and_a_patch(capsys, tmp_path):
    code, _ = rocelab(capsys, "tune", str(LAB), "--points", "1", "--fraction", str(QUICK),
                      "--results", str(tmp_path), "--bound", "kmin=150000",
                      "--bound", "kmax_ratio=3")
    assert code == 0
    outcome = json.loads((tmp_path / "points.json").read_text())
    names = [r["name"] for r in outcome["points"]]
    assert names == ["p00", "nvidia", "alibaba", "pfc-only"]
    assert len(list((tmp_path / "runs").glob("*.json"))) == 4 * 3 + 2  # and the recheck
    report = (tmp_path / "report.md").read_text()
    assert all(f"| {n}" in report for n in names) and (tmp_path / "tune.png").is_file()
    chosen = next(r for r in outcome["points"] if r["name"] == outcome["recommended"])
    copy = topology.load(str(tmp_path / "recommended" / LAB.parent.name / LAB.name))
    patch = json.loads((tmp_path / "recommended.patch.json").read_text())
    if chosen["point"]["wred"]:
        leaf = copy.nodes["leaf1"].config.qos.wred_profiles["AZURE_LOSSLESS"]
        assert leaf.green.min_threshold == chosen["point"]["wred"]["kmin"]
        assert "configs/leaf1/config_db.json" in patch
    else:
        assert patch == {"nic/default.yml": [{"op": "replace", "path": "/dcqcn/enabled",
                                              "value": False}]}


# --- the byte counter as a factor --------------------------------------------------------------

def test_the_byte_counter_is_off_on_every_other_sampled_point():
    points = sample(default_space(400e9), 4, 0)
    mixed = counter_off_too(points, every_other=True)
    assert [p["dcqcn"].get("rpg_byte_reset") for p in mixed] == [None, 0, None, 0]
    assert [{**p, "dcqcn": {k: v for k, v in p["dcqcn"].items() if k != "rpg_byte_reset"}}
            for p in mixed] == points


def test_a_grid_runs_each_point_with_the_byte_counter_and_without():
    points = grid(default_space(100e9)[:2], 2)
    both = counter_off_too(points, every_other=False)
    assert len(both) == 2 * len(points)
    assert [p["dcqcn"].get("rpg_byte_reset") for p in both] == [None, 0] * len(points)


def test_the_plan_adds_the_factor_only_where_nics_count_bytes_and_no_bound_names_it(tmp_path):
    """The default lab's NICs say ``rpg_byte_reset: 0``; its copy without the line runs the
    firmware's 32767."""
    assert not plan(str(LAB), points=2, scenarios=("incast",)).counter_off
    clab = copy_test_lab(tmp_path)
    nic = clab.parent / "nic" / "default.yml"
    nic.write_text("".join(line for line in nic.read_text().splitlines(keepends=True)
                           if "rpg_byte_reset" not in line))
    factor = plan(str(clab), points=2, scenarios=("incast",))
    assert [p["dcqcn"].get("rpg_byte_reset") for p in factor.points.values()][:2] == [None, 0]
    assert factor.counter_off
    pinned = plan(str(clab), points=2, scenarios=("incast",),
                  bounds=["rpg_byte_reset=65536"])
    assert {p["dcqcn"]["rpg_byte_reset"] for n, p in pinned.points.items()
            if n in ("p00", "p01")} == {65536}
    assert not pinned.counter_off
