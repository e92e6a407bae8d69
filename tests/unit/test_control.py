"""The agent's control socket without root: every malformed request gets an error reply
(``parse_request`` directly), and a real agent (no ports: those need root) answers garbage,
floods and silent clients over its real unix socket while staying alive and answering;
its socket and folder are closed to others, traces are held to its folders and limits."""
from __future__ import annotations

import json
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from rocelab.fabric import control
from rocelab.fabric.agent import Agent
from rocelab.fabric.client import AgentClient, AgentError
from rocelab.fabric.control import (MAX_CONNECTIONS, MAX_REQUEST_BYTES, RequestError,
                                    TraceLimits, parse_request, peer_allowed, secure_folder)
from rocelab.fabric.model.watchdog import WATCHDOG_PROFILES
from tests.unit.test_lossless import leaf1

PORTS = ["Ethernet0", "Ethernet4"]
LIMITS = TraceLimits(max_seconds=60.0, max_bytes=1 << 20)
T = TypeVar("T")


@pytest.mark.parametrize("raw, why", [
    (b"[]", "a request is a JSON object"),
    (b'"x"', "a request is a JSON object"),
    (b"{}", "unknown command None"),
    (b"null", "a request is a JSON object"),
    (b'{"cmd": "reboot"}', "unknown command 'reboot'"),
    (b'{"cmd": ["ping"]}', "unknown command"),
    (b'{"cmd": "ping", "extra": 1}', "unknown field"),
    (b'{"cmd": "port", "port": "Ethernet0"}', "missing field"),
    (b'{"cmd": "port", "port": 5, "up": true}', "port must be one of"),
    (b'{"cmd": "port", "port": "Ethernet99", "up": true}', "port must be one of"),
    (b'{"cmd": "port", "port": "Ethernet0", "up": "yes"}', "up must be true or false"),
    (b'{"cmd": "port", "port": "Ethernet0", "up": 1}', "up must be true or false"),
    (b'{"cmd": "trace"}', "missing field"),
    (b'{"cmd": "trace", "path": 7}', "path must be"),
    (b'{"cmd": "trace", "path": ""}', "path must be"),
    (b'{"cmd": "trace", "path": "/r/t", "interval_ms": "1"}', "interval_ms must be"),
    (b'{"cmd": "trace", "path": "/r/t", "interval_ms": true}', "interval_ms must be"),
    (b'{"cmd": "trace", "path": "/r/t", "interval_ms": 0}', "interval_ms must be"),
    (b'{"cmd": "trace", "path": "/r/t", "interval_ms": -1}', "interval_ms must be"),
    (b'{"cmd": "trace", "path": "/r/t", "interval_ms": 1e999}', "interval_ms must be"),
    (b'{"cmd": "trace", "path": "/r/t", "interval_ms": NaN}', "NaN: numbers must be finite"),
    (b'{"cmd": "trace", "path": "/r/t", "interval_ms": -Infinity}', "finite"),
    (b'{"cmd": "trace", "path": "/r/t", "interval_ms": 1' + b"0" * 400 + b"}",
     "interval_ms must be"),
    (b'{"cmd": "trace", "path": "/r/t", "interval_ms": ' + b"9" * 5000 + b"}", "not JSON"),
    (b'{"cmd": "trace", "path": "/r/t", "max_seconds": 61}', "max_seconds must be"),
    (b'{"cmd": "trace", "path": "/r/t", "max_bytes": 100}', "max_bytes must be"),
    (b'{"cmd": "trace", "path": "/r/t", "max_bytes": 5000.0}', "max_bytes must be an integer"),
    (b'{"cmd": "trace", "path": "/r/t", "max_bytes": 1' + b"0" * 300 + b"}", "max_bytes must"),
    (b'{"cmd": "trace", "path": "/r/t", "ports": "Ethernet0"}', "ports must be a list"),
    (b'{"cmd": "trace", "path": "/r/t", "ports": [1]}', "ports must be a list"),
    (b'{"cmd": "trace", "path": "/r/t", "ports": ["Ethernet0", "Ethernet0"]}', "distinct"),
    (b'{"cmd": "trace", "path": "/r/t", "ports": ["Ethernet99"]}', "not among"),
    (b'{"cmd": "pfc_watchdog"}', "missing field"),
    (b'{"cmd": "pfc_watchdog", "profile": "fast"}', "profile must be one of"),
    (b'{"cmd": "pfc_watchdog", "profile": ["fabric"]}', "profile must be one of"),
    (b'{"cmd": "pfc_watchdog", "profile": null}', "profile must be one of"),
    (b'{"cmd": "pfc_watchdog", "profile": "x' + b"y" * 5000 + b'"}', "profile must be one of"),
    (b'{"cmd": "pfc_watchdog", "profile": "fabric", "port": "Ethernet0"}', "unknown field"),
    (b'{"cmd": "clear_watermarks"}', "missing field"),
    (b'{"cmd": "clear_watermarks", "kind": "buffer"}', "kind must be one of queue, pg"),
    (b'{"cmd": "clear_watermarks", "kind": ["pg"]}', "kind must be one of queue, pg"),
    (b"{", "not JSON"),
    (b"garbage", "not JSON"),
    (b"", "not JSON"),
    (b'{"cmd": "ping"} trailing', "not JSON"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b'{"cmd": "\xc3"}', "not UTF-8"),
    (b"[" * 60000, "nests too deeply"),
    (b"[" * 100000, f"longer than {MAX_REQUEST_BYTES}"),
])
def test_a_malformed_request_is_refused_with_a_short_reason(raw, why):
    with pytest.raises(RequestError, match=why) as caught:
        parse_request(raw, PORTS, LIMITS)
    assert len(str(caught.value)) < 300  # never echoes the input at length


def test_a_well_formed_request_comes_back_checked():
    assert parse_request(b'{"cmd": "ping"}', PORTS, LIMITS) == {"cmd": "ping"}
    assert parse_request(b'{"cmd": "port", "port": "Ethernet4", "up": false}', PORTS,
                         LIMITS) == {"cmd": "port", "port": "Ethernet4", "up": False}
    raw = json.dumps({"cmd": "trace", "path": "/r/t.jsonl", "interval_ms": 2,
                      "ports": ["Ethernet0"], "max_seconds": 60, "max_bytes": 4096}).encode()
    assert parse_request(raw, PORTS, LIMITS) == {
        "cmd": "trace", "path": "/r/t.jsonl", "interval_ms": 2, "ports": ["Ethernet0"],
        "max_seconds": 60, "max_bytes": 4096}
    assert parse_request(b'{"cmd": "trace", "path": "/r/t", "ports": null}', PORTS,
                         LIMITS)["ports"] is None
    for kind in ("queue", "pg"):
        raw = json.dumps({"cmd": "clear_watermarks", "kind": kind}).encode()
        assert parse_request(raw, PORTS, LIMITS) == {"cmd": "clear_watermarks", "kind": kind}
    for profile in WATCHDOG_PROFILES:
        raw = json.dumps({"cmd": "pfc_watchdog", "profile": profile}).encode()
        assert parse_request(raw, PORTS, LIMITS) == {"cmd": "pfc_watchdog", "profile": profile}


def test_only_root_or_the_agents_own_user_may_talk_to_it():
    assert peer_allowed(0) and peer_allowed(os.geteuid())
    assert not peer_allowed(max(os.geteuid(), 0) + 12345)


def test_the_control_folder_is_made_private_and_a_link_is_refused(tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    secure_folder(loose)
    assert stat.S_IMODE(loose.stat().st_mode) == 0o700
    secure_folder(tmp_path / "new")
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
    (tmp_path / "link").symlink_to(loose)
    with pytest.raises(control.ControlError, match="symbolic link"):
        secure_folder(tmp_path / "link")
    (tmp_path / "file").write_text("")
    with pytest.raises(control.ControlError, match="not a folder"):
        secure_folder(tmp_path / "file")


class Running:
    """An agent with no ports (they need root) running its loop in a thread."""

    def __init__(self, tmp_path: Path) -> None:
        self.results = tmp_path / "results"
        self.results.mkdir()
        self.folder = tmp_path / "control"
        self.folder.mkdir(mode=0o755)  # too open: the agent closes it
        self.agent = Agent(leaf1(), {}, self.folder / "sw.sock", "sw", [self.results],
                           TraceLimits(max_seconds=30.0, max_bytes=1 << 20))
        self.path = self.folder / "sw.sock"
        self.client = AgentClient(self.path, timeout=3.0)
        self.thread = threading.Thread(target=self.agent.run)
        self.thread.start()

    def raw(self, data: bytes, finish: bool = True) -> dict:
        """Send ``data`` as is (``finish``: then say no more) and read the reply line."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(3.0)
            s.connect(str(self.path))
            s.sendall(data)
            if finish:
                s.shutdown(socket.SHUT_WR)
            return json.loads(s.makefile("rb").readline())

    @staticmethod
    def until(ask: Callable[[], T], done: Callable[[T], bool] = bool,
              timeout: float = 5.0) -> T:
        """``ask()`` again until ``done`` with its answer (an AgentError counts as not
        done), for at most ``timeout`` seconds: awaits what the agent does in its own time."""
        deadline, answer = time.monotonic() + timeout, None
        while True:
            try:
                answer = ask()
                if done(answer):
                    return answer
            except AgentError:
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                raise AssertionError(f"still not done after {timeout} s: {answer}")

    def stop(self) -> None:
        self.agent.running = False
        self.thread.join(5.0)
        assert not self.thread.is_alive()


@pytest.fixture
def running(tmp_path) -> Iterator[Running]:
    agent = Running(tmp_path)
    try:
        yield agent
    finally:
        agent.stop()
    assert not agent.path.exists()  # the socket is removed on the way out


def test_socket_is_0600_in_a_0700_folder(running):
    assert stat.S_IMODE(running.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(running.folder.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(running.path.stat().st_mode)


@pytest.mark.parametrize("data", [
    b"[]\n", b'"x"\n', b"{}\n", b"\xff\xfe\n", b"{\n", b'{"cmd": "nope"}\n',
    b'{"cmd": "port", "port": [], "up": 1}\n', b"[]",  # no newline: the end of input ends it
    b'{"cmd": "trace", "path": "/x", "interval_ms": ' + b"9" * 5000 + b"}\n",
    b"x" * (MAX_REQUEST_BYTES + 10),  # too long, no newline at all
])
def test_garbage_gets_an_error_reply_and_the_agent_answers_on(running, data):
    reply = running.raw(data)
    assert reply["ok"] is False and reply["error"]
    assert running.client.ping()["ok"] is True
    assert running.client.ping()["control"]["rejected"] == 1


def test_a_silent_or_slow_client_does_not_hold_up_the_others(running):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.settimeout(3.0)
        slow.connect(str(running.path))
        slow.sendall(b'{"cmd": ')
        assert running.client.ping()["ok"]  # served while the slow one is half-way
        slow.sendall(b'"ping"}\n')
        assert json.loads(slow.makefile("rb").readline())["ok"] is True


def test_a_client_that_never_finishes_is_cut_off(running, monkeypatch):
    monkeypatch.setattr(control, "CONNECTION_TIMEOUT_S", 0.2)
    reply = running.raw(b'{"cmd": "pi', finish=False)  # waits for the agent to give up
    assert reply == {"ok": False, "error": "no complete request within 0.2 s"}
    assert running.client.ping()["control"]["timed_out"] == 1


def test_connections_beyond_the_limit_are_turned_away_then_served_again(running):
    idle = []
    try:
        for _ in range(MAX_CONNECTIONS):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(running.path))
            idle.append(s)
        # connect() returns once the kernel queued it: wait until the agent took them all
        running.until(lambda: len(running.agent.control.conns), lambda n: n == MAX_CONNECTIONS)
        with pytest.raises(AgentError, match="busy"):
            running.client.ping()
    finally:
        for s in idle:
            s.close()
    status = running.until(running.client.ping)  # once the closed ones were noticed
    assert status["control"]["refused_busy"] >= 1


def test_traces_stay_in_the_agents_folders_and_end_at_their_limit(running, tmp_path):
    outside = tmp_path / "outside.jsonl"
    with pytest.raises(AgentError, match="outside the agent's trace folders"):
        running.client.trace_start(outside)
    assert not outside.exists()
    with pytest.raises(AgentError, match="max_seconds must be"):
        running.client.trace_start(running.results / "t.jsonl", max_seconds=31)
    header = running.client.trace_start(running.results / "t.jsonl", interval_ms=10,
                                        max_seconds=0.05)
    assert header["max_seconds"] == 0.05 and header["max_bytes"] == 1 << 20
    ended = running.until(lambda: running.client.ping()["trace"],
                          lambda trace: not trace["running"])
    assert ended["reason"] == "max_seconds"
    end = running.client.trace_end()
    assert end["reason"] == "max_seconds" and end["samples"] >= 1
    lines = (running.results / "t.jsonl").read_text().splitlines()
    assert len(lines) == end["samples"] + 1
    with pytest.raises(AgentError, match="no trace is running"):
        running.client.trace_stop()


def test_the_watchdog_profile_is_set_over_the_socket_and_a_bad_one_refused(running):
    running.client.pfc_watchdog("storm-check")
    assert running.client.counters()["pfc_watchdog"] == "storm-check"
    with pytest.raises(AgentError, match="profile must be one of fabric, storm-check"):
        running.client.pfc_watchdog("wall")
    assert running.client.counters()["pfc_watchdog"] == "storm-check"
    assert running.client.ping()["control"]["rejected"] == 1
