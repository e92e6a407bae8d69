"""labs.state: the record a lab leaves, readable from any process."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from labs import state as states
from labs.state import AgentState, LabState


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(states.STATE_ENV, str(tmp_path))
    return tmp_path


def test_saved_state_reads_back(state_dir):
    s = LabState.new("lab1", "/x/lab1.clab.yml")
    s.namespaces["h1"] = "lab1-h1"
    s.agents["leaf1"] = AgentState(node="leaf1", namespace="lab1-leaf1", pid=123,
                                   control="/run/x.sock", log="/run/x.log")
    s.save()
    back = states.load("lab1")
    assert back == s
    assert back.deployer_pid == os.getpid()
    assert not (state_dir / "lab1" / "state.json.tmp").exists()


def test_all_labs_lists_every_recorded_lab_and_remove_forgets_it():
    for name in ("b", "a"):
        LabState.new(name, f"/{name}.clab.yml").save()
    assert [s.lab for s in states.all_labs()] == ["a", "b"]
    states.load("a").remove()
    assert [s.lab for s in states.all_labs()] == ["b"]
    assert states.load("a") is None


def test_corrupt_state_is_reported_with_its_path(state_dir):
    (state_dir / "bad").mkdir()
    (state_dir / "bad" / "state.json").write_text('{"lab": 1}')
    with pytest.raises(ValueError, match=r"bad/state.json: unreadable lab state"):
        states.load("bad")


def test_pid_alive_sees_running_dead_and_zombie_processes():
    assert states.pid_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
    assert not states.pid_alive(child.pid)  # a zombie is not alive
    child.wait()
    assert not states.pid_alive(child.pid)
