"""labs.state: the record a lab leaves, readable from any process."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rocelab.labs import state as states
from rocelab.labs.state import AgentState, LabState


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
    assert [p.name for p in (state_dir / "lab1").iterdir()] == ["state.json"]


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


def test_concurrent_writers_never_share_a_temporary_file(state_dir):
    """With one fixed temporary name, a writer renames away the file another is still
    writing, and that one's rename then fails."""
    import threading
    path = state_dir / "state.json"
    errors = []

    def write(n: int) -> None:
        try:
            for i in range(200):
                states.write_atomic(path, f'{{"writer": {n}, "i": {i}}}')
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(p.name for p in state_dir.iterdir()) == ["state.json"]  # no temporaries


def test_a_process_is_known_by_pid_and_start_time():
    me = states.process_start(os.getpid())
    assert me is not None and states.pid_alive(os.getpid(), me)
    assert not states.pid_alive(os.getpid(), me + 1)  # a later process with a reused pid
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    started = states.process_start(child.pid)
    assert started is not None and started >= me
    assert states.pid_alive(child.pid, started)
    child.communicate(b"")
    assert states.process_start(child.pid) is None and not states.pid_alive(child.pid, started)


def test_agent_liveness_uses_the_start_time_not_the_command_line():
    from rocelab.labs.runtimes.netns import agent_alive
    me = AgentState(node="leaf1", namespace="x", pid=os.getpid(),
                    started=states.process_start(os.getpid()), control="c", log="l")
    assert agent_alive(me)  # this process runs no fabric.agent: the start time says it all
    assert not agent_alive(me.model_copy(update={"started": me.started - 1}))


def test_logs_are_kept_before_the_state_goes_and_only_for_the_last_labs(state_dir):
    for n in range(states.KEPT_LABS + 2):
        s = LabState.new(f"lab{n}", "/x.clab.yml")
        s.save()
        log = s.dir / "leaf1.log"
        log.write_text(f"first\nsecond\nlab{n} died: boom\n")
        s.agents["leaf1"] = AgentState(node="leaf1", namespace="x", pid=1, control="c",
                                       log=str(log))
        assert states.keep_logs(s) == states.kept_logs(f"lab{n}")
        s.remove()
        os.utime(states.kept_logs(f"lab{n}"), (n, n))  # oldest first, whatever the clock
    kept = sorted(p.name for p in (state_dir / states.KEPT_LOGS).iterdir())
    assert len(kept) == states.KEPT_LABS and "lab0" not in kept and "lab1" not in kept
    last = states.kept_logs(f"lab{states.KEPT_LABS + 1}") / "leaf1.log"
    assert states.log_tail(last) == f"first | second | lab{states.KEPT_LABS + 1} died: boom"
    assert [s.lab for s in states.all_labs()] == [] and states.unreadable() == []


def test_keep_logs_into_a_named_folder(tmp_path):
    s = LabState.new("lab1", "/x.clab.yml")
    s.save()
    (s.dir / "spine1.log").write_text("bye\n")
    s.agents["spine1"] = AgentState(node="spine1", namespace="x", pid=1, control="c",
                                    log=str(s.dir / "spine1.log"))
    dest = tmp_path / "results" / "agent-logs"
    assert states.keep_logs(s, dest) == dest
    assert (dest / "spine1.log").read_text() == "bye\n"
