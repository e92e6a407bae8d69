"""The lab in real namespaces: up, forwarding through the emulated switches, down, no traces.

Needs root. Each test works on a copy of a project lab under a fresh name, so nothing clashes
with a lab the user has running; every lab a test brings up is taken down even on failure.
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys

import pytest
from pyroute2 import netns

from rocelab.fabric import realtime
from rocelab.labs import live
from rocelab.labs import state as states
from rocelab.labs.errors import LabError
from rocelab.labs.runtimes.netns import agent_alive
from rocelab.labs.topology import TopologyError

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: network namespaces and veth"),
]

SPINE_SIDE = {"10.0.0.0", "10.0.0.2"}  # spine1/spine2 addresses facing leaf1
LEAF2_SIDE = {"10.0.0.5", "10.0.0.7"}  # leaf2's addresses facing spine1/spine2


def traces(name: str) -> dict:
    """Everything a lab of this name could leave on the machine."""
    prefix = f"{name}-"
    pids = subprocess.run(["pgrep", "-f", f"fabric.agent.*{states.lab_dir(name)}/"],
                          capture_output=True, text=True).stdout.split()
    return {"namespaces": [n for n in netns.listnetns() if n.startswith(prefix)],
            "state": states.lab_dir(name).exists(), "agents": pids}


NOTHING = {"namespaces": [], "state": False, "agents": []}




def test_every_host_reaches_every_other_host_both_ways(lab):
    results = lab.ping_all()
    assert len(results) == 12
    failed = [f"{r.src}->{r.dst}" for r in results if not r.ok]
    assert failed == []
    hops = {(r.src, r.dst): r.hops for r in results}
    rack = {"h1": 1, "h2": 1, "h3": 2, "h4": 2}
    for (src, dst), n in hops.items():
        # same rack: bridged in the VLAN, no router; across racks: leaf, spine, leaf route it
        assert n == (0 if rack[src] == rack[dst] else 3), (src, dst, n)


def test_cross_rack_path_goes_leaf_spine_leaf(lab):
    path = lab.trace("h1", "10.1.2.13")
    assert len(path) == 4, path
    gateway, spine, leaf2, host = path
    assert gateway == "10.1.1.1"
    assert spine in SPINE_SIDE
    assert leaf2 in LEAF2_SIDE
    assert host == "10.1.2.13"


def test_ecmp_spreads_flows_over_both_spines(lab):
    """Many UDP flows (different source ports) from h1 to h3 use both of leaf1's uplinks."""
    before = lab.agent("leaf1").counters()["ports"]
    script = ("import socket\n"
              "for sport in range(20000, 20064):\n"
              "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
              "    s.bind(('10.1.1.11', sport)); s.sendto(b'x' * 64, ('10.1.2.13', 4791))\n"
              "    s.close()\n")
    assert lab.exec("h1", [sys.executable, "-c", script], timeout=20).returncode == 0
    after = lab.agent("leaf1").counters()["ports"]
    sent = {p: after[p]["tx_packets"] - before[p]["tx_packets"] for p in ("Ethernet0", "Ethernet4")}
    assert sum(sent.values()) >= 64
    assert min(sent.values()) >= 10, sent  # 64 flows hashed onto 2 paths: both carry many


TCP_SINK = """
import socket, sys
srv = socket.create_server(("10.1.2.14", 5201))
print("listening", flush=True)
conn, _ = srv.accept()
total = 0
while chunk := conn.recv(65536):
    total += len(chunk)
conn.sendall(str(total).encode())
"""
TCP_SOURCE = """
import socket
s = socket.create_connection(("10.1.2.14", 5201), timeout=30)
s.sendall(bytes(4 << 20))
s.shutdown(socket.SHUT_WR)
print(s.recv(64).decode())
"""


def test_tcp_crosses_the_fabric(lab):
    """4 MiB over real TCP (the kernels' stacks at both ends) through three routers."""
    sink = subprocess.Popen(["ip", "netns", "exec", lab.state.namespaces["h4"],
                             sys.executable, "-c", TCP_SINK], stdout=subprocess.PIPE, text=True)
    try:
        assert select.select([sink.stdout], [], [], 10)[0], "TCP sink did not start"
        assert sink.stdout.readline().strip() == "listening"
        proc = lab.exec("h1", [sys.executable, "-c", TCP_SOURCE], timeout=60)
        assert proc.returncode == 0, proc.stderr[-500:]
        assert int(proc.stdout) == 4 << 20  # every byte, counted by the receiver
    finally:
        sink.kill()
        sink.wait()


def test_status_shows_agents_alive_links_up_and_counters(lab):
    assert lab.ping("h1", "h2", "10.1.1.12").ok  # traffic of its own, whatever ran before
    nodes, links = lab.status()
    switches = [n for n in nodes if n.agent_alive is not None]
    assert len(switches) == 4 and all(n.agent_alive for n in switches)
    assert all(n.namespace_present for n in nodes)
    assert len(links) == 8 and all(link.up for link in links)
    leaf1 = next(n for n in nodes if n.name == "leaf1")
    assert leaf1.counters["ports"]["Ethernet8"]["rx_packets"] > 0  # h1's port carried traffic
    assert leaf1.counters["ports"]["Ethernet8"]["kernel_rx_drops"] == 0


def test_agents_run_real_time_and_their_children_would_not(lab):
    """As root, on a kernel that throttles real-time tasks, every agent asked for and got
    SCHED_FIFO (``fabric.realtime``), not inherited by anything it starts."""
    if int(realtime.RT_RUNTIME.read_text()) < 0:
        pytest.skip("real-time tasks are not throttled on this kernel: agents stay normal")
    policies = {a.node: os.sched_getscheduler(a.pid) for a in lab.state.agents.values()}
    assert policies == dict.fromkeys(lab.state.agents,
                                     os.SCHED_FIFO | os.SCHED_RESET_ON_FORK)


def test_router_refuses_non_ip_frames_addressed_to_it(lab):
    """A RoCEv1-like frame (EtherType 0x8915) to the gateway MAC is dropped and counted."""
    gw_mac = lab.topology.nodes["leaf1"].config.mac
    frame = "bytes.fromhex('{}') + bytes(6) + b'\\x89\\x15' + bytes(64)".format(
        gw_mac.replace(":", ""))
    script = ("import socket\n"
              "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
              f"s.bind(('eth1', 0)); s.send({frame})\n")
    before = lab.agent("leaf1").counters()["drops"].get("non_ip_to_router", 0)
    assert lab.exec("h1", [sys.executable, "-c", script], timeout=10).returncode == 0
    wait_for(lambda: lab.agent("leaf1").counters()["drops"].get("non_ip_to_router", 0) > before)


def test_agent_survives_its_port_going_down_and_up(lab):
    """A switch port taken down under the agent is reported once on its socket: no crash."""
    for state in ("down", "up"):
        assert lab.exec("leaf1", ["ip", "link", "set", "eth4", state]).returncode == 0
    wait_for(lambda: all(link.up for link in lab.status()[1]))
    # the kernel's link is up at once; the agent reopens its port at its next housekeeping
    wait_for(lambda: lab.agent("leaf1").counters()["ports"]["Ethernet12"]["fault"] is None)
    assert agent_alive(lab.state.agents["leaf1"])
    assert lab.ping("h1", "h2", "10.1.1.12").ok


def test_two_labs_run_side_by_side(lab, tmp_path):
    from tests.conftest import copy_lab
    other = live.up(str(copy_lab(tmp_path)))
    try:
        assert set(other.state.namespaces.values()).isdisjoint(lab.state.namespaces.values())
        assert all(r.ok for r in other.ping_all())
        assert all(r.ok for r in lab.ping_all())
    finally:
        other.down()
    assert traces(other.name) == NOTHING


def test_down_is_idempotent(tmp_path):
    from tests.conftest import copy_lab
    path = copy_lab(tmp_path)
    lab = live.up(str(path))
    assert live.down(str(path)) is True
    assert live.down(str(path)) is False
    assert live.down(lab.name) is False
    assert traces(lab.name) == NOTHING


def test_bad_link_creates_nothing(tmp_path):
    from tests.conftest import copy_lab
    path = copy_lab(tmp_path, edit=lambda d: d["topology"]["links"].append(
        {"endpoints": ["h1:eth2", "leaf9:eth1"]}))
    name = path.stem.removesuffix(".clab")
    with pytest.raises(TopologyError) as err:
        live.up(str(path))
    assert "\n" not in str(err.value) and "unknown node 'leaf9'" in str(err.value)
    assert traces(name) == NOTHING


def test_malformed_config_field_creates_nothing(tmp_path):
    from tests.conftest import copy_lab
    path = copy_lab(tmp_path)
    config = path.parent / "configs/spine1/config_db.json"
    data = json.loads(config.read_text())
    data["PORT"]["Ethernet0"]["mtu"] = "jumbo"
    config.write_text(json.dumps(data))
    with pytest.raises(TopologyError) as err:
        live.up(str(path))
    assert str(err.value).startswith(f"{config}: PORT|Ethernet0: mtu: ")
    assert traces(path.stem.removesuffix(".clab")) == NOTHING


def test_failing_exec_rolls_back_and_names_the_step(tmp_path):
    from tests.conftest import copy_lab
    path = copy_lab(tmp_path, edit=lambda d: d["topology"]["nodes"]["h3"]["exec"].append(
        "ip route add 10.99.0.0/16 via 192.0.2.1"))  # unreachable gateway: ip refuses
    name = path.stem.removesuffix(".clab")
    with pytest.raises(LabError) as err:
        live.up(str(path))
    assert "step 'exec on h3' failed" in str(err.value)
    assert traces(name) == NOTHING


def test_cleanup_removes_a_lab_whose_agent_died(tmp_path):
    from tests.conftest import copy_lab
    lab = live.up(str(copy_lab(tmp_path)))
    try:
        agent = lab.state.agents["spine2"]
        os.kill(agent.pid, signal.SIGKILL)
        wait_for(lambda: not agent_alive(agent))
        assert lab.name in live.cleanup().removed
    finally:
        live.down(lab.name)
    assert traces(lab.name) == NOTHING


def wait_for(condition, timeout: float = 5.0) -> None:
    """Await a condition by polling it (there is no event to wait on across processes)."""
    import time
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_exec_task_passes_the_shells_words_unchanged(lab):
    """``invoke lab.exec h1 -- echo "it's"``: invoke joins the words after -- with spaces,
    which lost the quoting; the task takes them from its own command line."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, "-m", "invoke", "lab.exec", "h1", "--lab", lab.name,
                           "--", "echo", "it's", "a  b"],
                          cwd=root, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "it's a  b\n"
