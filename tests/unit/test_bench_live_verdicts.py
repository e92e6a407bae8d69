"""bench.live_verdicts: a run's checks read as decided or not, with the lateness nearest
its bound; the table says the share decided and what differed from virtual time."""
import json


from bench import live_verdicts
from bench.__main__ import verdict_rows
from tests.unit.bench_render import rendered


def test_verdicts_read_undecided_checks_and_their_worst_lateness(tmp_path):
    worst = {"where": "h2 endpoint", "what": "arrival lateness", "p99_s": 1.2e-3,
             "bound_s": 1e-3, "ratio": 1.2}
    (tmp_path / "summary.json").write_text(json.dumps({"checks": [
        {"name": "test_a", "outcome": "passed", "fidelity": {"ok": True, "worst": None}},
        {"name": "test_b", "outcome": "skipped", "reason": "INCONCLUSIVE: late",
         "fidelity": {"ok": False, "problems": ["late"], "worst": worst}},
        {"name": "test_c", "outcome": "passed",
         "fidelity": {"ok": True, "rerun_of": {"name": "c"}}}]}))
    got = live_verdicts.verdicts(tmp_path)
    assert got == {"test_a": {"outcome": "passed", "worst": None, "rerun": False},
                   "test_b": {"outcome": "inconclusive", "worst": worst, "rerun": False},
                   "test_c": {"outcome": "passed", "worst": None, "rerun": True}}


def test_the_table_gives_the_share_decided_and_the_disagreements():
    run = {"wall_s": 200.0, "exit": 0, "counts": {}, "machine_busy": 0.5, "undecided": [],
           "reruns": ["test_b"], "differs_from_sim": [], "worst": {}}
    out = {"cores": 2, "sim": {"wall_s": 20.0, "counts": {"passed": 21}},
           "runs": [run, {**run, "exit": 3, "undecided": ["test_b"]}],
           "decided_share": 0.5,
           "scenarios": {"test_b": {"max_ratio": 1.3, "median_ratio": 0.8, "runs": 2}}}
    text = rendered(verdict_rows, out)
    assert "1 of 2" in text and "50%" in text and "test_b" in text and "max 1.30" in text
    assert "of the default lab deciding" in text and "S = " not in text
    loaded = {**out, "racks": 3, "hog": True, "runs": [{**run, "time_scale": 4500.0}]}
    text = rendered(verdict_rows, loaded)
    assert "a generated 3-rack lab" in text and "one core held by a CPU-bound process" in text
    assert "run 1: exit 0, 200 s, S = 4500" in text


def test_the_generated_lab_has_the_racks_asked_and_leaves_s_to_lab_up(tmp_path):
    from rocelab.labs import topology
    lab = topology.load(live_verdicts.generated(tmp_path, 3))
    assert len([n for n in lab.switches if n.name.startswith("leaf")]) == 3
    assert len(lab.hosts) == 6 and all(n.time_scale_auto for n in lab.nodes.values())


def test_the_hog_holds_one_core_for_the_block_and_goes():
    import os
    with live_verdicts.hogging(False) as none:
        assert none is None
    with live_verdicts.hogging(True) as hog:
        assert hog.poll() is None
        assert os.sched_getaffinity(hog.pid) == {os.cpu_count() - 1}
    assert hog.poll() is not None
