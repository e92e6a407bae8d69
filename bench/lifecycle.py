"""lab.up / lab.down wall time against a bare iproute2 script building the same wires.

The baseline is what any lab costs at the least: the namespaces and veths built by a plain
``ip`` script, plus starting the same switch agents. rocelab adds validation, state records,
host offload settings and readiness checks on top; the ratio says what that costs.
"""
from __future__ import annotations

import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rocelab.labs import live
from rocelab.labs.project import PROJECT_ROOT
from rocelab.labs.runtimes.netns import await_agent, in_namespace, stop_processes
from rocelab.labs.state import AgentState
from rocelab.labs.topology import Topology
from rocelab.labs.topology import load as load_topology
from tests.conftest import copy_lab

RUNS = 3


def bare_script(topo: Topology, prefix: str) -> tuple[str, str]:
    """The same namespaces, veths and host commands as plain iproute2: (up, down) scripts."""
    up, down = ["set -e"], []
    for node in topo.nodes:
        up.append(f"ip netns add {prefix}{node}")
        up.append(f"ip -n {prefix}{node} link set lo up")
        down.append(f"ip netns del {prefix}{node}")
    for link in topo.links:
        up.append(f"ip -n {prefix}{link.a.node} link add {link.a.iface} mtu {link.mtu} type veth "
                  f"peer name {link.b.iface} netns {prefix}{link.b.node} mtu {link.mtu}")
    for node in topo.nodes.values():
        for iface in topo.interfaces(node.name):
            up.append(f"ip -n {prefix}{node.name} link set {iface} up")
        for command in node.exec:
            up.append(f"ip netns exec {prefix}{node.name} {command}")
    return "\n".join(up) + "\n", "\n".join(down) + "\n"


def start_agents_bare(topo: Topology, prefix: str, folder: Path) -> list[AgentState]:
    """Start the switch agents in the bare namespaces and wait until each answers."""
    agents = []
    for node in topo.switches:
        control = folder / f"{node.name}.sock"
        log = folder / f"{node.name}.log"
        argv = in_namespace(f"{prefix}{node.name}", [
            sys.executable, "-m", "rocelab.fabric.agent", "--config", str(node.config_path),
            "--name", node.name, "--control", str(control),
            "--ports", ",".join(topo.interfaces(node.name))])
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=PROJECT_ROOT)
        agents.append(AgentState(node=node.name, namespace=f"{prefix}{node.name}",
                                 pid=proc.pid, control=str(control), log=str(log)))
    deadline = time.monotonic() + 15
    for agent in agents:
        await_agent(agent, deadline)
    return agents


def run_bash(script: str, folder: Path, name: str) -> float:
    path = folder / name
    path.write_text(script)
    t = time.perf_counter()
    subprocess.run(["bash", str(path)], check=True, capture_output=True)
    return time.perf_counter() - t


def measure(lab: str = "roce-v2-leafspine") -> dict:
    up_times, down_times, bare_up, bare_agents, bare_down = [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="rocelab-bench-") as tmp:
        folder = Path(tmp)
        path = copy_lab(folder, lab=lab, name="benchlab")
        topo = load_topology(path)
        for i in range(RUNS):
            t = time.perf_counter()
            handle = live.up(str(path))
            up_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            handle.down()
            down_times.append(time.perf_counter() - t)

            prefix = f"bare{i}-"
            up_script, down_script = bare_script(topo, prefix)
            bare_up.append(run_bash(up_script, folder, f"up{i}.sh"))
            t = time.perf_counter()
            agents = start_agents_bare(topo, prefix, folder)
            bare_agents.append(time.perf_counter() - t)
            t = time.perf_counter()
            stop_processes([a.pid for a in agents])
            bare_down.append(run_bash(down_script, folder, f"down{i}.sh")
                             + time.perf_counter() - t)
    med = statistics.median
    baseline = med(bare_up) + med(bare_agents)
    return {
        "lab": lab, "runs": RUNS,
        "lab_up_s": med(up_times), "lab_down_s": med(down_times),
        "bare_iproute2_up_s": med(bare_up), "bare_agent_start_s": med(bare_agents),
        "bare_down_s": med(bare_down),
        "up_ratio": med(up_times) / baseline,
        "targets": {"up_ratio_max": 2.0, "lab_down_s_max": 1.0},
        "bare_script_lines": len(bare_script(topo, "x-")[0].splitlines()),
        "command": shlex.join(["invoke", "lab.up", lab]),
    }
