"""``invoke check``: run the checks against a lab, bringing it up (and down) if needed.

pytest runs in a subprocess, so a check that hangs or crashes the interpreter cannot take
the lab's teardown with it; the lab this brought up is always taken down again. The whole
run holds the lab's lock exclusively. A lab already running is refused when it is not what
its files say (``labs.live.checked``) unless ``reuse``; a lab this run brings up is deployed
fresh from the files. Ctrl-C, SIGTERM and SIGHUP are forwarded to pytest once, as an
interrupt, and the run waits for pytest's teardown (which takes down its variant labs)
before taking its own lab down; variant labs a killed pytest left are removed here.
"""
from __future__ import annotations

import itertools
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from . import outcome, report
from ..labs import live
from ..labs.lab import Lab
from ..labs import lock
from ..labs import state as states
from ..labs import topology
from ..labs.interrupt import ALL, Interrupted, deferred, here_only, interruptible
from ..labs.calibrate import calibrated
from ..labs.errors import LabError
from ..labs.runtimes.netns import traces_allowed_in

ROOT = Path(__file__).resolve().parent.parent
TEARDOWN_TIMEOUT_S = 120.0  # after an interrupt, pytest's teardown gets this long
AGENT_LOGS = "agent-logs"  # in the results folder
SUITES = ("rocelab", "sonic-mgmt")  # what --suite may name
SONIC_MGMT_DIR = "sonic_mgmt"  # the sonic-mgmt suite's folder in checks/


def fresh_results(lab_name: str, base: Path | None = None) -> Path:
    """A new folder ``results/<lab>-<YYYYmmdd-HHMMSS>[-N]`` under the current directory
    (where the user runs the command, not where the package is installed), created here: two
    runs in the same second (even in two processes: mkdir is atomic) get two folders."""
    base = (base or Path.cwd() / "results").resolve()
    base.mkdir(parents=True, exist_ok=True)
    stem = f"{lab_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    for n in itertools.count(1):
        folder = base / (stem if n == 1 else f"{stem}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue


def given_results(results: str | Path, overwrite: bool) -> Path:
    """The folder ``--results`` names, refused when it holds anything unless ``overwrite``;
    even then only a previous run's results (it has a summary.json) are replaced."""
    folder = Path(results).resolve()
    if folder.exists() and not folder.is_dir():
        raise LabError(f"--results {folder}: not a folder")
    if folder.is_dir() and any(folder.iterdir()):
        if not overwrite:
            raise LabError(f"--results {folder} is not empty: name a new folder, or pass "
                           "--overwrite to replace a previous run's results")
        if not (folder / "summary.json").is_file():
            raise LabError(f"--results {folder}: --overwrite replaces only a previous run's "
                           "results (a folder with a summary.json), and it has none")
    return folder


def pytest_argv(lab: str, results: Path, k: str | None = None,
                extra: list[str] | None = None, suite: str = "rocelab") -> list[str]:
    """The pytest command line: the suite's checks, the report plugin, JUnit XML in
    ``results``; ``extra``: more pytest options, e.g. ``--runtime sim --seed 3``. It runs in
    the package's folder (``ROOT``), so every path in it is absolute."""
    folder = ROOT / "checks" / (SONIC_MGMT_DIR if suite == "sonic-mgmt" else "")
    argv = [sys.executable, "-m", "pytest", str(folder), "--suite", suite,
            "-p", "rocelab.checks.report", "-p", "no:cacheprovider",
            "--lab", lab, "--results", str(results),
            f"--junitxml={results / 'junit.xml'}", "-o", "junit_family=xunit1",
            "-q", "--tb=short", "--no-header", "-o", "addopts="]
    if k:
        argv += ["-k", k]
    return argv + list(extra or [])


def run(spec: str, k: str | None = None, results: str | Path | None = None,
        runtime: str = "netns", say: Callable[[str], None] = print,
        extra: list[str] | None = None, reuse: bool = False,
        overwrite: bool = False, suite: str = "rocelab") -> tuple[int, Path]:
    """Run the checks on lab ``spec`` (name or topology path); (the run's exit code, as
    checks.outcome's contract says: 0 passed, 1 failed, 2 usage, 3 inconclusive; results
    folder). A lab that is not running is brought up first and always taken down after.
    The agents this run starts (the lab's, the checks' variant labs') may trace into
    ``results``. ``runtime`` sim runs the lab's files in virtual time inside pytest: there
    is nothing to bring up, lock or take down. ``suite`` sonic-mgmt runs sonic-mgmt's cases
    on the lab's switches, in virtual time only (``checks/sonic_mgmt``)."""
    if suite not in SUITES:
        raise LabError(f"--suite {suite!r}: say {' or '.join(SUITES)}")
    if suite == "sonic-mgmt" and runtime != "sim":
        raise LabError("--suite sonic-mgmt runs in virtual time only (--runtime sim): its "
                       "cases count packets against thresholds exactly, which a live lab's "
                       "timing cannot promise")
    if runtime == "sim":
        topo = topology.load(spec)  # bad input is one line before pytest starts
        folder = given_results(results, overwrite) if results else fresh_results(topo.name)
        if results:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
        report.provisional(folder, topo.name, "sim", None)
        argv = pytest_argv(str(topo.path.resolve()), folder, k,
                           ["--runtime", "sim", *(extra or [])], suite)
        return outcome.verdict_code(_pytest(argv, say), folder), folder
    with traces_allowed_in(Path(results) if results else None):
        return _run(spec, k, results, runtime, say, extra, reuse, overwrite)


def _run(spec: str, k: str | None, results: str | Path | None, runtime: str,
         say: Callable[[str], None], extra: list[str] | None, reuse: bool,
         overwrite: bool) -> tuple[int, Path]:
    name = live.lab_name(spec)
    given = given_results(results, overwrite) if results else None
    with lock.hold(name, exclusive=True), interruptible():
        brought_up: Lab | None = None
        folder: Path | None = None
        try:
            if states.load(name) is None:
                topology.load(spec)  # a bad topology is reported before anything is made
                say(f"lab {name} is not running: bringing it up for the checks")
                lab = brought_up = live.up(spec, runtime)
                if lab.state.calibration:
                    say(calibrated(name, lab.state.calibration))
            else:
                lab = live.checked(spec, reuse=reuse, warn=say)
            if given is not None:
                shutil.rmtree(given, ignore_errors=True)  # empty, or a previous run's results
                given.mkdir(parents=True)
            folder = given or fresh_results(lab.name)
            report.provisional(folder, lab.name, lab.state.runtime,
                               max((n.time_scale for n in lab.topology.switches), default=None))
            code = _pytest(pytest_argv(lab.name, folder, k, extra), say)
            return outcome.verdict_code(code, folder), folder
        finally:
            with deferred():
                logs = folder / AGENT_LOGS if folder is not None else None
                if folder is not None:
                    _remove_variants(name, folder, say)
                if brought_up is not None:
                    brought_up.down(logs=logs)
                    say(f"lab {name} taken down" + (f" (agent logs in {logs})" if logs else ""))
                elif logs is not None:
                    states.keep_logs(lab.state, logs)


def _pytest(argv: list[str], say: Callable[[str], None]) -> int:
    """Run pytest in its own session (a terminal's Ctrl-C reaches only this process) and
    wait for it. The first SIGINT, SIGTERM or SIGHUP is forwarded as SIGINT, which pytest
    turns into a clean stop: its teardown runs and its summary is written. Interrupted is
    raised once pytest has exited, so the caller's cleanup runs after pytest's."""
    received: list[int] = []
    started: list[subprocess.Popen] = []

    class Forwarded(Exception):
        """Breaks the wait so that the teardown's deadline starts."""

    def forward(signum: int, frame) -> None:
        received.append(signum)
        # raised only while pytest runs, so only in the loop that catches it: before pytest
        # started, the loop forwards what arrived; once it has exited, Interrupted is raised
        if len(received) == 1 and started and started[0].poll() is None:
            started[0].send_signal(signal.SIGINT)
            raise Forwarded
        if len(received) > 1:
            say(f"{signal.Signals(signum).name}: still waiting for the checks' teardown")

    # Our handlers go in before pytest starts: a child inherits an ignored SIGINT (as a
    # script's background job gets it) but not a caught one, and pytest ignoring SIGINT
    # would turn the forwarded stop into a kill at the deadline.
    main = threading.current_thread() is threading.main_thread()
    old = {s: signal.signal(s, here_only(forward)) for s in ALL} if main else {}
    deadline = None
    try:
        proc = subprocess.Popen(argv, cwd=ROOT, start_new_session=True)
        while True:
            try:
                # inside this try: from the moment pytest is in `started`, a signal makes
                # `forward` raise Forwarded, at whatever line it lands
                if not started:
                    started.append(proc)
                    if received:  # arrived while pytest was starting
                        proc.send_signal(signal.SIGINT)
                        raise Forwarded
                code = proc.wait(None if deadline is None
                                 else max(0.0, deadline - time.monotonic()))
                break
            except Forwarded:
                say(f"{signal.Signals(received[0]).name}: stopping the checks, waiting for "
                    f"their teardown (at most {TEARDOWN_TIMEOUT_S:.0f} s)")
                deadline = time.monotonic() + TEARDOWN_TIMEOUT_S
            except subprocess.TimeoutExpired:
                say(f"the checks did not finish their teardown in {TEARDOWN_TIMEOUT_S:.0f} s: "
                    "killed")
                proc.kill()
                deadline = None
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    if received:
        raise Interrupted(received[0])
    return code


def _remove_variants(name: str, folder: Path, say: Callable[[str], None]) -> None:
    """Variant labs of this lab still up once pytest is gone (it was killed before its
    teardown): taken down, their logs kept with the results."""
    for state in states.all_labs():
        if state.parent == name:
            live.down(state.lab, logs=folder / AGENT_LOGS / state.lab)
            say(f"variant lab {state.lab} was left up by the checks: taken down")
