"""The switch agent's command line from the netns runtime (no root): its control socket in
the lab's control folder, and the folders its traces may go in: results/, the lab's state
folder, $ROCELAB_TRACE_ROOTS, and a check run's --results folder (``traces_allowed_in``)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from rocelab.fabric.agent import main
from rocelab.labs import state as states
from rocelab.labs import topology
from rocelab.labs.project import PROJECT_ROOT
from rocelab.labs.runtimes.netns import (TRACE_ROOTS_ENV, agent_argv, trace_roots,
                                         traces_allowed_in)
from rocelab.labs.state import LabState


@pytest.fixture
def lab(lab_copy, tmp_path, monkeypatch):
    monkeypatch.setenv(states.STATE_ENV, str(tmp_path / "state"))
    monkeypatch.delenv(TRACE_ROOTS_ENV, raising=False)
    topo = topology.load(lab_copy())
    return topo, LabState.new(topo.name, str(topo.path))


def roots_of(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, arg in enumerate(argv) if arg == "--trace-root"]


def test_the_agent_runs_on_the_projects_interpreter_with_the_labs_trace_folders(lab):
    topo, state = lab
    node = topo.switches[0]
    control = state.dir / "control" / f"{node.name}.sock"
    argv = agent_argv(node, state, control)
    assert argv[:3] == [sys.executable, "-m", "rocelab.fabric.agent"]
    assert argv[argv.index("--control") + 1] == str(control)
    assert argv[argv.index("--ports") + 1] == ",".join(
        f"{iface}={topo.port(node.name, iface)}" for iface in topo.interfaces(node.name))
    assert roots_of(argv) == [str(PROJECT_ROOT / "results"), str(state.dir)]


def test_more_trace_folders_come_from_the_environment_and_a_check_run(lab, tmp_path,
                                                                     monkeypatch):
    topo, state = lab
    monkeypatch.setenv(TRACE_ROOTS_ENV, os.pathsep.join([str(tmp_path / "a"), "", "rel"]))
    expected = [PROJECT_ROOT / "results", state.dir, tmp_path / "a", Path("rel").resolve()]
    assert trace_roots(state) == expected
    with traces_allowed_in(tmp_path / "results"):
        assert trace_roots(state) == [*expected, tmp_path / "results"]
        argv = agent_argv(topo.switches[0], state, state.dir / "x.sock")
        assert roots_of(argv)[-1] == str(tmp_path / "results")
    assert trace_roots(state) == expected  # restored after the block
    monkeypatch.delenv(TRACE_ROOTS_ENV)
    with traces_allowed_in(tmp_path / "results"), traces_allowed_in(None):
        assert os.environ[TRACE_ROOTS_ENV] == str(tmp_path / "results")
    assert TRACE_ROOTS_ENV not in os.environ


@pytest.mark.parametrize("args, why", [
    (["--trace-root", "relative"], "--trace-root must be an absolute path"),
    (["--trace-max-seconds", "0"], "--trace-max-seconds must be positive"),
    (["--trace-max-seconds", "inf"], "--trace-max-seconds must be positive"),
    (["--trace-max-bytes", "10"], "--trace-max-bytes at least"),
])
def test_bad_trace_limits_on_the_command_line_are_refused(args, why, capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["--config", "x", "--name", "sw", "--control", "/tmp/x.sock", "--ports", "",
              *args])
    assert stopped.value.code == 2 and why in capsys.readouterr().err
