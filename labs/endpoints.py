"""Live RoCE endpoints: one ``nic.endpoint`` process per host, inside its namespace,
driven over JSON lines (``ready``, ``go``, ``progress``, ``done``); what ``Lab.start_endpoints``
does for the live runtimes. The simulator drives the same NIC core in its event loop.
"""
from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .errors import EndpointError

if TYPE_CHECKING:
    from .lab import Lab

START_TIMEOUT_S = 15.0


class Running:
    """``run`` on a thread, so its caller can do something else during the flows (start a
    storm, ping): ``started`` waits for the go (the run's clock starts there: its
    ``elapsed_s`` counts from it), ``flowing`` for a first acknowledged byte, ``wait`` for
    the end."""

    def __init__(self, lab: Lab, specs: dict[str, dict], timeout_s: float,
                 on_progress: Callable[[int], Any] | None = None) -> None:
        self._go = threading.Event()
        self._flowing = threading.Event()

        def progress(acked: int) -> None:
            if acked:
                self._flowing.set()
            if on_progress is not None:
                on_progress(acked)

        self._pool = ThreadPoolExecutor(1)
        self._future = self._pool.submit(run, lab, specs, timeout_s, progress, self._go.set)

    def started(self, timeout_s: float) -> bool:
        return self._awaited(self._go, timeout_s)

    def flowing(self, timeout_s: float) -> bool:
        return self._awaited(self._flowing, timeout_s)

    def _awaited(self, event: threading.Event, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not event.wait(0.1):
            if self._future.done() or time.monotonic() >= deadline:
                break
        return event.is_set()

    def wait(self) -> tuple[dict[str, dict], float]:
        try:
            return self._future.result()
        finally:
            self._pool.shutdown()


class Storm:
    """``traffic.storm`` in a host's namespace, on a thread; ``result`` is its report."""

    def __init__(self, lab: Lab, host: str, priority: int, seconds: float) -> None:
        argv = [sys.executable, "-m", "rocelab.traffic.storm", "--iface",
                lab.topology.interfaces(host)[0], "--priority", str(priority),
                "--seconds", str(seconds)]
        self._pool = ThreadPoolExecutor(1)
        self._future = self._pool.submit(lab.node(host).exec, argv, seconds + 30)

    def result(self) -> dict:
        try:
            proc = self._future.result()
        finally:
            self._pool.shutdown()
        if proc.returncode != 0:
            raise EndpointError(f"storm: {(proc.stderr or proc.stdout).strip()[-300:]}")
        return json.loads(proc.stdout)


def run(lab: Lab, specs: dict[str, dict], timeout_s: float,
        on_progress: Callable[[int], Any] | None = None,
        on_go: Callable[[], Any] | None = None) -> tuple[dict[str, dict], float]:
    """Start every host's endpoint, let them resolve their peers, say ``go`` to all at once
    (``on_go`` then); (each host's ``done`` report, wall seconds from go to the last
    report)."""
    procs: dict[str, subprocess.Popen] = {}
    try:
        for host in specs:
            procs[host] = lab.node(host).popen(
                [sys.executable, "-m", "rocelab.nic.endpoint", "--spec", "-"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        events = _Events(procs)
        for host, spec in specs.items():
            events.tell(host, json.dumps(spec))
        events.await_all("ready", time.monotonic() + START_TIMEOUT_S)
        started = time.monotonic()
        for host in procs:
            events.tell(host, "go")
        if on_go is not None:
            on_go()
        done = events.await_all("done", started + timeout_s + START_TIMEOUT_S,
                                on_progress=on_progress)
        return done, time.monotonic() - started
    finally:
        _stop(procs)


class _Events:
    """JSON lines from every endpoint, read from the pipes' bytes as they come (a buffered
    reader could hold a second line where select() no longer sees it)."""

    def __init__(self, procs: dict[str, subprocess.Popen]) -> None:
        self.procs = procs
        self.sel = selectors.DefaultSelector()
        self.pending: dict[str, bytes] = {host: b"" for host in procs}
        for host, proc in procs.items():
            self.sel.register(proc.stdout.fileno(), selectors.EVENT_READ, host)
        self.acked: dict[str, int] = {}

    def tell(self, host: str, line: str) -> None:
        try:
            self.procs[host].stdin.write(line.encode() + b"\n")
            self.procs[host].stdin.flush()
        except BrokenPipeError:
            raise EndpointError(f"endpoint on {host} exited: {self._why(host)}") from None

    def lines(self, timeout: float) -> list[tuple[str, str]]:
        """(host, line) for every complete line that arrived within ``timeout``."""
        out = []
        for key, _ in self.sel.select(timeout):
            host = key.data
            chunk = os.read(key.fd, 65536)
            if not chunk:
                raise EndpointError(f"endpoint on {host} exited: {self._why(host)}")
            *complete, self.pending[host] = (self.pending[host] + chunk).split(b"\n")
            out += [(host, line.decode()) for line in complete]
        return out

    def await_all(self, kind: str, deadline: float,
                  on_progress: Callable[[int], Any] | None = None) -> dict[str, dict]:
        got: dict[str, dict] = {}
        while len(got) < len(self.procs):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(set(self.procs) - set(got))
                raise EndpointError(f"endpoints on {', '.join(missing)} sent no {kind!r} in time")
            for host, line in self.lines(remaining):
                try:
                    event = json.loads(line)
                except ValueError:
                    raise EndpointError(f"endpoint on {host} said: {line[:200]}") from None
                if event["event"] == "error":
                    raise EndpointError(f"endpoint on {host}: {event['error']}")
                if event["event"] == "progress":
                    self.acked[host] = event["sent_bytes"]
                    if on_progress:
                        on_progress(sum(self.acked.values()))
                elif event["event"] == kind:
                    got[host] = event
        return got

    def _why(self, host: str) -> str:
        proc = self.procs[host]
        try:
            proc.wait(timeout=2)
            err = proc.stderr.read().decode(errors="replace")
        except subprocess.TimeoutExpired:
            return "no output"
        lines = err.strip().splitlines()
        return lines[-1] if lines else f"exit code {proc.returncode}"


def _stop(procs: dict[str, subprocess.Popen]) -> None:
    """Close every endpoint's stdin (its signal to exit), then make sure it is gone."""
    for proc in procs.values():
        try:
            proc.stdin.close()
        except OSError:
            pass
    for proc in procs.values():
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            stream.close()
