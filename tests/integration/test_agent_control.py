"""The switch agent in a real lab (root): its control socket survives garbage and is closed
to other users, its traces stay in the lab's folders, follow no link and survive a full
disk, and a port whose peer namespace is deleted goes down without ending or spinning the
agent, and comes back with a new wire. The peer-deletion test breaks its lab: it runs last.
"""
from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from rocelab.fabric.client import AgentClient, AgentError
from rocelab.labs import live
from rocelab.labs.runtimes.netns import remove_namespace, traces_allowed_in
from tests.integration.test_lab import NOTHING, traces

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces)")
T = TypeVar("T")
NOBODY = 65534
IDLE_CPU_BOUND_S = 0.3  # CPU an idle agent may use from a wire deletion to IDLE_WINDOW_S
# after its port went down: it uses ~0.01 s; one spinning on the dead socket, ~0.65 s or more
IDLE_WINDOW_S = 3.0


def until(ask: Callable[[], T], done: Callable[[T], bool], timeout: float = 10.0) -> T:
    """``ask()`` until ``done`` with its answer, for at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        answer = ask()
        if done(answer):
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"still not done after {timeout} s: {answer}")
        time.sleep(0.05)


def raw_exchange(path: str, data: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5.0)
        s.connect(path)
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        return json.loads(s.makefile("rb").readline())


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def host_neighbours(lab, node: str) -> list[str]:
    topo = lab.topology
    return [peer.node for iface in topo.interfaces(node)
            if (peer := topo.peer(node, iface)) is not None and not topo.nodes[peer.node].is_switch]


@pytest.fixture(scope="module")
def switch(lab):
    """The first switch of the lab wired to a host, its agent's state and a client."""
    node = next(n.name for n in lab.topology.switches if host_neighbours(lab, n.name))
    agent = lab.state.agents[node]
    return node, agent, AgentClient(agent.control)


def test_socket_is_0600_in_a_root_only_folder(lab):
    for agent in lab.state.agents.values():
        sock, folder = Path(agent.control).stat(), Path(agent.control).parent.stat()
        assert stat.S_ISSOCK(sock.st_mode) and stat.S_IMODE(sock.st_mode) == 0o600
        assert stat.S_IMODE(folder.st_mode) == 0o700 and folder.st_uid == 0


@pytest.mark.parametrize("data", [
    b"[]\n", b'"x"\n', b"{}\n", b"\xff\xfe\n", b"[" * 100 + b"\n", b'{"cmd": 1}\n',
    b'{"cmd": "port", "port": "Ethernet0", "up": "no"}\n',
    b'{"cmd": "trace", "path": "/tmp/x", "interval_ms": 1e999}\n',
    b'{"cmd": "trace", "path": "/tmp/x", "interval_ms": ' + b"1" * 5000 + b"}\n",
    b"x" * (70 << 10),
])
def test_garbage_gets_an_error_and_the_switch_lives_on(lab, switch, data):
    _, agent, client = switch
    reply = raw_exchange(agent.control, data)
    assert reply["ok"] is False and reply["error"]
    assert alive(agent.pid) and client.ping()["pid"] == agent.pid


def test_after_garbage_the_switch_still_forwards(lab, switch):
    _, agent, client = switch
    for data in (b"[]\n", b"\x00" * 100 + b"\n", b"{\n"):
        raw_exchange(agent.control, data)
    hosts = lab.host_addresses()
    src = host_neighbours(lab, switch[0])[0]
    dst = next(h for h in hosts if h != src)  # src's frames cross the switch either way
    assert lab.ping(src, dst, hosts[dst]).ok
    assert client.ping()["control"]["rejected"] >= 3


CONNECT_AS_NOBODY = textwrap.dedent("""
    import json, socket, sys
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(sys.argv[1])
    except PermissionError:
        print(json.dumps({"connect": "EACCES"}))
        sys.exit()
    try:
        s.sendall(b'{"cmd": "ping"}\\n')
    except BrokenPipeError:  # refused at once: the reason is already waiting
        pass
    print(s.makefile("rb").readline().decode().strip())
""")


def as_nobody(control: str) -> dict:
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", CONNECT_AS_NOBODY, control],
                          user=NOBODY, group=NOBODY, capture_output=True, text=True,
                          timeout=15)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_another_user_can_neither_reach_the_socket_nor_talk_to_it(switch):
    _, agent, client = switch
    assert as_nobody(agent.control) == {"connect": "EACCES"}  # the folder is 0700
    folder, sock = Path(agent.control).parent, Path(agent.control)
    # opened up by mistake, the folders on the way included (the tests' state root sits in
    # pytest's private 0700 tmp folder): the peer check still refuses
    closed = [(p, p.stat().st_mode & 0o7777) for p in (folder, *folder.parents)
              if not p.stat().st_mode & 0o001]
    for path, mode in closed:
        path.chmod(mode | 0o711)
    sock.chmod(0o666)
    try:
        reply = as_nobody(agent.control)
    finally:
        sock.chmod(0o600)
        for path, mode in closed:
            path.chmod(mode)
    assert reply == {"ok": False, "error": f"permission denied for uid {NOBODY}"}
    assert client.ping()["control"]["refused_peer"] == 1
    assert "refused pid" in Path(agent.log).read_text()


def test_a_trace_outside_the_labs_folders_is_refused(switch, tmp_path):
    _, _, client = switch
    for path in (tmp_path / "trace.jsonl", Path("/etc/rocelab-trace-test.jsonl")):
        with pytest.raises(AgentError, match="outside the agent's trace folders"):
            client.trace_start(path)
        assert not path.exists()


def test_a_symbolic_link_in_the_state_folder_is_not_followed(lab, switch, tmp_path):
    _, agent, client = switch
    victim = tmp_path / "victim"
    victim.write_text("precious")
    link = lab.state.dir / "trace-link.jsonl"
    link.symlink_to(victim)
    try:
        reply = raw_exchange(agent.control, json.dumps(
            {"cmd": "trace", "path": str(link)}).encode() + b"\n")
    finally:
        link.unlink()
    assert reply["ok"] is False and "symbolic link" in reply["error"]
    assert victim.read_text() == "precious"


def test_a_trace_in_the_state_folder_runs_and_stops(lab, switch):
    node, _, client = switch
    path = lab.state.dir / "trace-ok.jsonl"
    header = client.trace_start(path, interval_ms=5)
    assert header["node"] == node
    end = client.trace_end()
    assert end["reason"] == "stopped" and end["path"] == str(path)
    assert len(path.read_text().splitlines()) == end["samples"] + 1


def test_the_trace_stop_task_stops_a_running_trace(lab, switch):
    node, _, client = switch
    path = lab.state.dir / "trace-task.jsonl"
    client.trace_start(path, interval_ms=5)
    proc = subprocess.run([sys.executable, "-m", "invoke", "lab.trace-stop", node,
                           "--lab", lab.name], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{path}: ") and "ended: stopped" in proc.stdout
    assert client.ping()["trace"] is None  # collected: nothing running, nothing pending
    again = subprocess.run([sys.executable, "-m", "invoke", "lab.trace-stop", node,
                            "--lab", lab.name], capture_output=True, text=True, timeout=60)
    assert again.returncode == 1 and "no trace is running" in again.stderr


def test_a_full_disk_ends_the_trace_and_is_reported(lab, switch):
    """A 16 KiB tmpfs mounted in the agent's own mount namespace (``ip netns exec`` gave it
    one): the trace's first flush fails with ENOSPC."""
    _, agent, client = switch
    folder = lab.state.dir / "small"
    folder.mkdir()
    mount = ["nsenter", "-t", str(agent.pid), "-m"]
    subprocess.run([*mount, "mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(folder)],
                   check=True)
    try:
        failures = client.ping()["trace_failures"]
        client.trace_start(folder / "trace.jsonl", interval_ms=0.05)
        status = until(client.ping, lambda s: s["trace_failures"] == failures + 1)
        assert status["trace"]["reason"] == "write_error"
        assert "ENOSPC" in status["trace"]["error"]
        with pytest.raises(AgentError, match="No space left on device"):
            client.trace_stop()
        assert alive(agent.pid) and client.counters()["agent"]["trace_failures"] == failures + 1
        assert "No space left on device" in Path(agent.log).read_text()
    finally:
        subprocess.run([*mount, "umount", str(folder)], check=True)


def test_a_check_runs_results_folder_is_a_trace_folder_of_the_agents_it_starts(lab_copy,
                                                                               tmp_path):
    """What ``checks.run`` does with --results: the lab it brings up may trace there."""
    results = tmp_path / "results"
    results.mkdir()
    with traces_allowed_in(results):
        other = live.up(str(lab_copy()))
    try:
        client = other.agent(other.topology.switches[0].name)
        client.trace_start(results / "trace.jsonl", interval_ms=5)
        end = client.trace_end()
        assert end["reason"] == "stopped" and end["path"] == str(results / "trace.jsonl")
        assert len((results / "trace.jsonl").read_text().splitlines()) == end["samples"] + 1
    finally:
        other.down()
    assert traces(other.name) == NOTHING


def test_a_port_whose_peer_namespace_is_deleted_goes_down_without_spinning(lab, switch):
    """Last: it breaks the lab. The host namespace on the far side of one of the switch's
    wires is deleted, which deletes the veth pair; then a new wire is made in its place."""
    node, agent, client = switch
    link = next(link for link in lab.topology.links
                if node in (link.a.node, link.b.node)
                and not lab.topology.nodes[link.b.node if link.a.node == node
                                           else link.a.node].is_switch)
    mine, far = (link.a, link.b) if link.a.node == node else (link.b, link.a)
    port = lab.topology.port(node, mine.iface)
    assert client.counters()["ports"][port]["fault"] is None
    before = cpu_seconds(agent.pid)
    remove_namespace(lab.state.namespaces[far.node])

    down = until(client.counters, lambda c: c["ports"][port]["fault"] is not None)
    assert (down["ports"][port]["admin_up"], down["ports"][port]["oper_up"]) == (True, False)
    assert down["agent"]["ports_down"] == {port: down["ports"][port]["fault"]}
    time.sleep(IDLE_WINDOW_S)  # a measurement window: the agent's CPU time from the deletion
    used = cpu_seconds(agent.pid) - before
    print(f"agent CPU from the deletion to {IDLE_WINDOW_S:g} s after the port went down: "
          f"{used:.3f} s")
    assert used < IDLE_CPU_BOUND_S, f"agent used {used:.2f} s of CPU"
    assert alive(agent.pid) and client.ping()["pid"] == agent.pid
    assert f"{port} ({mine.iface}) down" in Path(agent.log).read_text()

    far_ns = lab.state.namespaces[far.node]  # recreated: lab.down removes it again
    sw_ns = lab.state.namespaces[node]
    subprocess.run(["ip", "netns", "add", far_ns], check=True)
    subprocess.run(["ip", "-n", sw_ns, "link", "add", mine.iface, "type", "veth", "peer",
                    "name", far.iface, "netns", far_ns], check=True)
    subprocess.run(["ip", "-n", far_ns, "link", "set", far.iface, "up"], check=True)
    subprocess.run(["ip", "-n", sw_ns, "link", "set", mine.iface, "up"], check=True)
    back = until(client.counters, lambda c: c["ports"][port]["fault"] is None)
    assert back["ports"][port]["oper_up"] is True and back["agent"]["ports_down"] == {}
    assert f"{port} ({mine.iface}) up again" in Path(agent.log).read_text()
