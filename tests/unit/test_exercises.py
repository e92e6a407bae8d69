"""The course's exercises: every one has a lab, a self-check that selects real checks, and
a section in docs/exercises.md; the mystery exercise checks an answer against lint."""
from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rocelab.checks import exercises
from rocelab.labs import topology

ROOT = Path(__file__).resolve().parents[2]


def check_names() -> set[str]:
    names = set()
    for path in (ROOT / "checks").glob("test_*.py"):
        tree = ast.parse(path.read_text())
        names |= {n.name for n in tree.body if isinstance(n, ast.FunctionDef)
                  and n.name.startswith("test_")}
    return names


def test_at_least_ten_numbered_in_order():
    numbers = [e.number for e in exercises.EXERCISES]
    assert len(numbers) >= 10 and numbers == list(range(1, len(numbers) + 1))


@pytest.mark.parametrize("ex", exercises.EXERCISES, ids=lambda e: str(e.number))
def test_each_has_a_lab_and_checks_that_exist(ex):
    topology.load(ex.lab)
    if ex.k:
        names = check_names()
        for word in re.split(r"\s+(?:or|and)\s+", ex.k):
            assert any(word in n for n in names), f"exercise {ex.number}: -k {word!r}"


def test_docs_have_a_section_and_a_self_check_per_exercise():
    text = (ROOT / "docs" / "exercises.md").read_text()
    for ex in exercises.EXERCISES:
        assert re.search(rf"^## {ex.number}\. ", text, re.M), f"no section {ex.number}"
        assert f"invoke exercise.check {ex.number}" in text


def test_the_mystery_answer_is_checked_against_lint():
    ex = next(e for e in exercises.EXERCISES if not e.k)
    truth = exercises.culprits(ex.lab)
    assert len(truth) == 1
    switches = {s.name for s in topology.load(ex.lab).switches}
    said = []
    assert exercises.check(ex.number, answer=next(iter(truth)), say=said.append) == 0
    wrong = sorted(switches - truth)[0]
    assert exercises.check(ex.number, answer=wrong, say=said.append) == 1
    with pytest.raises(exercises.ExerciseError, match="give your answer"):
        exercises.check(ex.number, say=said.append)


def test_unknown_exercise_and_wrong_runtime_are_one_line(monkeypatch):
    with pytest.raises(exercises.ExerciseError, match="no exercise 99"):
        exercises.check(99)
    live_only = dataclasses.replace(exercises.EXERCISES[0], number=98, runtimes=("live",))
    monkeypatch.setattr(exercises, "EXERCISES", (*exercises.EXERCISES, live_only))
    with pytest.raises(exercises.ExerciseError, match="runs only live"):
        exercises.check(live_only.number, runtime="sim")


def test_the_mystery_switch_fails_the_classification_check_in_virtual_time(tmp_path):
    """The data plane names the same switch lint does: its maps put the lossless DSCP in a
    PG that sends no PFC. Every switch doing what its own config says is not enough (the
    check asserts the class stays lossless at every hop it crosses)."""
    ex = next(e for e in exercises.EXERCISES if not e.k)
    (culprit,) = exercises.culprits(ex.lab)
    done = subprocess.run(
        [sys.executable, "-m", "rocelab.cli", "check", ex.lab, "--runtime", "sim",
         "-k", "dscp_lands and lossless", "--results", str(tmp_path / "results")],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"a lossless class, is lossy on {culprit}: PG" in done.stdout
    assert "passed, 0 failed" not in done.stdout
