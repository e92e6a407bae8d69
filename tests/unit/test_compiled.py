"""The compiled build (compiled.py): current wherever it can be built, loaded only when
current, and giving results identical to the pure-Python reference's."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocelab import compiled
from rocelab.labs.state import STATE_ENV
from tests.conftest import ROOT, copy_lab

spec = importlib.util.spec_from_file_location("compile_script", ROOT / "scripts" / "compile.py")
compile_script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compile_script)

LACKING = compile_script.missing_tools()
needs_build = pytest.mark.skipif(LACKING is not None,
                                 reason=f"no compiled build can be made here: {LACKING}")


def wall_clock_free(header: bytes) -> dict:
    """A trace's header without when it began in wall-clock time."""
    fields = json.loads(header)
    del fields["started"]
    return fields


def child_env(**env: str) -> dict[str, str]:
    """This process's environment for a child, ``ROCELAB_PURE`` only if given here (the
    suite may run with it set, to test the reference)."""
    return {**{k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}, **env}


def state_in_child(**env: str) -> str:
    out = subprocess.run([sys.executable, "-c",
                          "from rocelab import compiled; print(compiled.state())"],
                         env=child_env(**env), capture_output=True, text=True, check=True)
    return out.stdout.strip()


@needs_build
def test_the_build_is_current_where_it_can_be_built():
    """scripts/install.sh built it; this process (unless told to run pure) and its children
    load it."""
    assert compiled.build_state() == "compiled"
    if compiled.state() == "compiled":
        for module in compiled.MODULES:
            assert sys.modules.get(module) is None or \
                sys.modules[module].__file__ == str(compiled.extension_path(module))
    assert state_in_child() == "compiled"
    assert state_in_child(ROCELAB_PURE="1") == "pure (ROCELAB_PURE is set)"


def test_a_stale_build_is_not_loaded(tmp_path, monkeypatch):
    """A module of the build whose source changed since: none of the build is loaded (its
    modules share their typed classes), and the state says what to do."""
    source = tmp_path / "m.py"
    source.write_text("x = 1\n")
    monkeypatch.setattr(compiled, "source_files", lambda module: [source])
    monkeypatch.setattr(compiled, "MANIFEST", tmp_path / "manifest.json")
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    assert "no compiled build" in compiled.state()
    compiled.MANIFEST.write_text(f'{{"fingerprint": "{compiled.fingerprint()}"}}')
    monkeypatch.setattr(compiled, "extension_path", lambda module: source)  # present
    assert compiled.state() == "compiled"
    source.write_text("x = 2\n")
    assert compiled.state() == ("pure (the compiled build is older than its sources: run "
                                "scripts/install.sh)")
    source.unlink()  # a module of the build gone from the checkout
    assert compiled.state().startswith("pure (the compiled build cannot be checked: ")
    compiled.MANIFEST.write_text("[]")
    assert compiled.state().startswith("pure (the compiled build cannot be checked: ")


@pytest.mark.slow
@needs_build
def test_compiled_and_pure_give_identical_results(tmp_path):
    """The default lab's whole check suite simulated, compiled and pure: every figure of
    evidence byte for byte (JSON and configs, the scenarios' own summary.json among them;
    the switch traces' samples, under a header that says when, in wall-clock time, each
    began), every plot drawn from them, and the same verdicts in the run's summary.json,
    whose other fields are wall-clock times and paths. Captures differ between any two runs
    (the probes' random payload tags), so the figures behind them are what is compared."""
    assert state_in_child() == "compiled"  # else this compares pure with pure
    lab = copy_lab(tmp_path / "lab")
    runs = {}
    state = {STATE_ENV: str(tmp_path / "state")}  # its lock, not under /run/rocelab
    for build, env in (("compiled", state), ("pure", {compiled.PURE_ENV: "1", **state})):
        results = tmp_path / build
        subprocess.run([sys.executable, "-m", "rocelab.cli", "check", str(lab), "--runtime",
                        "sim", "--results", str(results)],
                       env=child_env(**env), capture_output=True, check=True)
        runs[build] = results
    files = {build: sorted(p.relative_to(r) for p in r.rglob("*") if p.is_file())
             for build, r in runs.items()}
    assert files["compiled"] == files["pure"]
    evidence = [f for f in files["compiled"] if f.suffix in (".json", ".jsonl", ".yml", ".png")
                and f != Path("summary.json")]
    assert any(f.name == "summary.json" for f in evidence)  # the scenario's figures
    for name in evidence:
        ours, reference = ((runs[b] / name).read_bytes() for b in ("compiled", "pure"))
        if name.suffix == ".jsonl":  # a trace: its header, then one sample per line
            (ours_header, ours), (reference_header, reference) = (
                text.split(b"\n", 1) for text in (ours, reference))
            assert wall_clock_free(ours_header) == wall_clock_free(reference_header), name
        assert ours == reference, name

    def verdicts(results: Path) -> list:
        summary = json.loads((results / "summary.json").read_text())
        return [(c["name"], c["outcome"]) for c in summary["checks"]]
    assert verdicts(runs["compiled"]) == verdicts(runs["pure"])
    assert ("test_lossless_incast", "passed") in verdicts(runs["compiled"])
    assert len(evidence) > 100 and any(f.name == "pauses.png" for f in evidence)
