"""labs.lock: one operation at a time per lab, refused at once naming the holder."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocelab.labs import live
from rocelab.labs import lock
from rocelab.labs import state as states
from rocelab.labs.lock import LabBusy
from rocelab.labs.state import LabState

ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
import sys
from rocelab.labs import lock
with lock.hold(sys.argv[1], exclusive=sys.argv[2] == "ex", command="invoke check demo"):
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(states.STATE_ENV, str(tmp_path))
    return tmp_path


@pytest.fixture
def holder():
    """Another process holding a lab's lock until the test ends."""
    procs = []

    def start(lab: str, exclusive: bool = True) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, lab, "ex" if exclusive else "sh"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        procs.append(proc)
        assert proc.stdout.readline() == "held\n"
        return proc

    yield start
    for proc in procs:
        proc.communicate("\n", timeout=10)


def test_an_exclusive_holder_refuses_everyone_else_naming_its_pid_and_command(holder):
    proc = holder("lab1")
    for exclusive in (True, False):
        with pytest.raises(LabBusy) as err:
            with lock.hold("lab1", exclusive=exclusive):
                pass
        message = str(err.value)
        assert "\n" not in message
        assert f"lab lab1 is busy: held by pid {proc.pid} (invoke check demo)" in message


def test_shared_holders_coexist_and_keep_out_an_exclusive_one(holder):
    proc = holder("lab1", exclusive=False)
    with lock.hold("lab1", exclusive=False):  # a second reader: welcome
        assert len(lock.holders("lab1")) == 2
    with pytest.raises(LabBusy, match=f"held by pid {proc.pid} "):
        with lock.hold("lab2", exclusive=True), lock.hold("lab1", exclusive=True):
            pass
    assert lock.holders("lab2") == []  # lab2 was let go when lab1 refused


def test_other_labs_are_not_affected(holder):
    holder("lab1")
    with lock.hold("lab2", exclusive=True):
        (me,) = lock.holders("lab2")
        assert me.startswith(f"pid {os.getpid()} (")


def test_a_process_reenters_its_own_lock_and_lets_go_only_at_the_outermost():
    with lock.hold("lab1", exclusive=True):
        with lock.hold("lab1", exclusive=True), lock.hold("lab1", exclusive=False):
            pass
        assert _elsewhere("lab1") == "busy"
    assert _elsewhere("lab1") == "free"


def test_a_shared_holder_cannot_upgrade_itself():
    with lock.hold("lab1", exclusive=False):
        with pytest.raises(LabBusy, match="holds it shared"):
            with lock.hold("lab1", exclusive=True):
                pass


def test_the_lock_file_goes_with_the_lab_and_stays_while_it_exists(state_dir):
    with lock.hold("gone", exclusive=True):
        assert lock.lock_path("gone").is_file()
    assert not lock.lock_path("gone").exists()
    LabState.new("alive", "/x/alive.clab.yml").save()
    with lock.hold("alive", exclusive=True):
        pass
    assert lock.lock_path("alive").is_file()
    assert [s.lab for s in states.all_labs()] == ["alive"]  # .locks is no lab


def test_a_dead_holders_record_is_not_named(state_dir, holder):
    proc = holder("lab1", exclusive=False)
    record = lock.lock_path("lab1").with_suffix(".lock.d")
    (record / "999999999").write_text("999999999 1 ghost\n")
    assert lock.holders("lab1") == [f"pid {proc.pid} (invoke check demo)"]


def test_cleanup_reports_a_busy_lab_and_still_removes_the_others(holder):
    for name in ("busy", "free"):
        LabState.new(name, f"/x/{name}.clab.yml").save()
    proc = holder("busy")
    done = live.cleanup(everything=True)
    assert done.removed == ["free"]
    assert list(done.failed) == ["busy"]
    assert f"held by pid {proc.pid}" in done.failed["busy"]
    assert states.load("busy") is not None and states.load("free") is None


def test_invoke_refuses_at_once_in_one_line_naming_the_holder(state_dir, holder):
    """lab.status here; every task that uses a lab takes its lock the same way."""
    proc = holder("lab1")
    done = subprocess.run([sys.executable, "-m", "invoke", "lab.status", "--name", "lab1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, states.STATE_ENV: str(state_dir)})
    assert done.returncode == 1
    assert done.stderr.strip() == (f"rocelab: lab lab1 is busy: held by pid {proc.pid} "
                                   "(invoke check demo); try again when it ends")


def _elsewhere(lab: str) -> str:
    """What another process finds when it tries to take ``lab`` exclusively."""
    script = ("import sys\nfrom labs import lock\ntry:\n"
              "    with lock.hold(sys.argv[1], exclusive=True):\n        print('free')\n"
              "except lock.LabBusy:\n    print('busy')\n")
    return subprocess.run([sys.executable, "-c", script, lab], cwd=ROOT, capture_output=True,
                          text=True, timeout=30, check=True).stdout.strip()


def test_cleanup_passes_over_a_healthy_lab_in_use_without_calling_it_a_failure(holder):
    state = LabState.new("inuse", "/x/inuse.clab.yml")
    state.status = "up"  # no agents: nothing dead
    state.save()
    holder("inuse", exclusive=False)
    done = live.cleanup()
    assert done.removed == [] and done.failed == {}
    assert states.load("inuse") is not None
