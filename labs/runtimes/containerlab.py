"""The containerlab runtime: the same topology file deployed by real containerlab, in containers.

Why it exists next to the embedded netns runtime: containerlab is what network engineers already
run, it can host SONiC-VS (SONiC's own control plane and databases), and a containerlab lab
moves to Kubernetes with clabernetes (``labs/export.py``).

The shipped topology files deploy with plain ``containerlab deploy`` as they are. What this
runtime adds, and why:

- Every image is checked before anything is created, each missing one named with the way to
  obtain it (``labs/images.py``); each SONiC-VS image's ``start.sh`` is read to learn how it
  loads its config (``labs/sonic.py``).
- containerlab deploys a derived copy of the topology, written to the lab's state folder: the
  user's file stays untouched (and valid), while the copy has bind sources made absolute (it
  lives elsewhere), no ``exec`` commands (containerlab only logs their failures; this runtime
  runs them itself and checks exit codes), each SONiC-VS config bound where that image reads it
  (or copied in afterwards, for older images), and each switch set to the implementation it
  asked for.
- Switches of kind ``sonic-vs`` run SONiC-VS by default: configuration level only, because
  SONiC-VS programs QoS into ASIC_DB but has no PFC/ECN/queueing data plane. The node label
  ``rocelab.switch: rocelab`` selects the project's own switch image instead (full data
  plane); a label, because containerlab's schema allows no keys of our own.
- SONiC-VS switches are waited for as sonic-swss's own tests wait (start.sh exited, port flags,
  ASIC objects), then BGP is started.
- Hosts get the same treatment as under netns: offloads off (the emulated switch reads raw
  frames), then their ``exec`` commands, exit codes checked.
- ``up`` is all-or-nothing: the state is recorded first, and a failed step destroys the lab
  and names the step.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...fabric.client import AgentClient, AgentError
from .. import sonic, topology
from ..clabfile import (SONIC_VS, deploy_document, dump_document, read_document,
                        runs_rocelab_switch, switch_implementation)
from ..images import (DOCKER, SWITCH_IMAGE, NeededImage, Runner, image_inspect_argv, last_line,
                      missing_message, project_version)
from .netns import HOST_OFFLOADS_OFF
from ..errors import LabError, step
from ..sonic import LoadMode
from ..state import AgentState, LabState, keep_logs, process_start
from ..topology import SONIC_CONFIG_TARGET, Node, Topology, TopologyError

CONTAINERLAB = "containerlab"
CLAB_ENV = {"CLAB_VERSION_CHECK": "disable"}  # no network call to GitHub on every command


DEPLOY_TIMEOUT_S = 900.0
DESTROY_TIMEOUT_S = 300.0
COMMAND_TIMEOUT_S = 60.0
SUPERVISORD_STOP_TIMEOUT_S = 60.0  # SONiC-VS's programs stopping, when its config is copied in
AGENT_START_TIMEOUT_S = 60.0
AGENT_POLL_S = 0.5
AGENT_ATTEMPTS = int(AGENT_START_TIMEOUT_S / AGENT_POLL_S)

SONIC_VS_NO_DATA_PLANE = ("not applicable on SONiC-VS: it programs QoS into ASIC_DB but has no "
                          "PFC/ECN/queueing data plane")


# ---- command lines --------------------------------------------------------------------------

def deploy_argv(file: Path) -> list[str]:
    return [CONTAINERLAB, "deploy", "-t", str(file)]


def destroy_argv(file: Path) -> list[str]:
    return [CONTAINERLAB, "destroy", "-t", str(file), "--cleanup"]


def inspect_argv(file: Path) -> list[str]:
    return [CONTAINERLAB, "inspect", "-t", str(file), "--format", "json"]


def docker_exec_argv(container: str, argv: list[str], detach: bool = False) -> list[str]:
    return [DOCKER, "exec", *(["-d"] if detach else []), container, *argv]


def docker_cp_argv(source: Path, container: str, target: str) -> list[str]:
    return [DOCKER, "cp", str(source), f"{container}:{target}"]


def container_name(lab: str, node: str, prefix: str = "clab") -> str:
    """containerlab's name for a node's container, which is also the name it gives the
    container's network namespace (in /var/run/netns): so lab.status and pingall, which enter
    namespaces, work on containerlab labs unchanged."""
    if prefix == "":
        return node
    if prefix == "__lab-name":
        return f"{lab}-{node}"
    return f"{prefix}-{lab}-{node}"


# ---- containerlab inspect -------------------------------------------------------------------

@dataclass(frozen=True)
class ContainerRecord:
    """One container of a deployed lab, as ``containerlab inspect`` reports it."""

    name: str  # container name, clab-<lab>-<node>
    kind: str
    image: str
    state: str  # running, exited, ...
    ipv4: str | None  # management address with prefix length
    ipv6: str | None
    container_id: str
    lab: str


def parse_inspect(text: str) -> list[ContainerRecord]:
    """Both JSON shapes containerlab has printed: ``{"containers": [...]}`` (older releases, and
    a bare list before that) and ``{"<lab>": [...]}`` (newer ones, keyed by lab name)."""
    data = json.loads(text) if text.strip() else []
    if isinstance(data, dict):
        groups = [data["containers"]] if "containers" in data else list(data.values())
    else:
        groups = [data]
    rows = [row for group in groups for row in (group or [])]
    if not all(isinstance(row, dict) and "name" in row for row in rows):
        raise ValueError("containerlab inspect: unexpected JSON (expected container records)")
    return [ContainerRecord(name=row["name"], kind=row.get("kind", ""),
                            image=row.get("image", ""), state=row.get("state", ""),
                            ipv4=_address(row.get("ipv4_address")),
                            ipv6=_address(row.get("ipv6_address")),
                            container_id=row.get("container_id", ""),
                            lab=row.get("lab_name", ""))
            for row in rows]


def _address(value: Any) -> str | None:
    return value if isinstance(value, str) and value not in ("", "N/A") else None


# ---- what a lab can check ------------------------------------------------------------------

@dataclass(frozen=True)
class NotApplicable:
    """A check that cannot mean anything on this lab: the checks framework reports it as
    skipped with ``str(result)`` as the reason, instead of a pass that proves nothing."""

    check: str
    nodes: tuple[str, ...]
    reason: str

    def __str__(self) -> str:
        return f"{self.check}: {', '.join(self.nodes)}: {self.reason}"


def data_plane_check(check: str, topo: Topology, runtime: str) -> NotApplicable | None:
    """None when every switch has a data plane to test; otherwise which ones lack it."""
    if runtime != CONTAINERLAB:
        return None
    sonic_vs = tuple(n.name for n in topo.switches if switch_implementation(n) == SONIC_VS)
    return NotApplicable(check, sonic_vs, SONIC_VS_NO_DATA_PLANE) if sonic_vs else None


# ---- images ---------------------------------------------------------------------------------

def needed_images(topo: Topology, version: str) -> list[NeededImage]:
    """Every image the lab's containers run, with its nodes: the project's switch image for
    switches labelled ``rocelab``, each node's own (node > group > kind > defaults) otherwise."""
    nodes: dict[str, list[str]] = {}
    sonic_vs: set[str] = set()
    for node in topo.nodes.values():
        image = f"{SWITCH_IMAGE}:{version}" if runs_rocelab_switch(node) else node.image
        if not image:
            raise LabError(f"{topo.path}: topology.nodes.{node.name}: no image (set image on "
                           "the node, its group, its kind or topology.defaults)")
        nodes.setdefault(image, []).append(node.name)
        if node.is_switch and not runs_rocelab_switch(node):
            sonic_vs.add(image)
    return [NeededImage(image, tuple(names), image in sonic_vs) for image, names in nodes.items()]


# ---- the runtime ----------------------------------------------------------------------------

def deploy_file(state: LabState) -> Path:
    return state.dir / f"{state.lab}.clab.yml"


class ContainerlabRuntime:
    """The ``Runtime`` interface (``labs.runtimes``) over containerlab and docker. Every
    command goes through ``run`` (subprocess.run's shape), so tests record them instead of
    running."""

    name = CONTAINERLAB
    runs_frr = False  # a SONiC-VS image runs its own FRR; its sessions are not read here

    def __init__(self, run: Runner = subprocess.run,
                 which: Callable[[str], str | None] = shutil.which,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.run = run
        self.which = which
        self.sleep = sleep

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, **CLAB_ENV}

    def up(self, topo: Topology) -> LabState:
        for node in topo.switches:
            switch_implementation(node)  # a bad label is refused before anything runs
        self.require_engine(_netns_hint(topo))
        version = project_version()
        needed = needed_images(topo, version)
        self._require_images(needed)
        modes = self._load_modes(needed)
        load_modes = {n.name: modes[n.image] for n in topo.switches if not runs_rocelab_switch(n)}
        raw = read_document(topo)
        state = LabState.new(topo.name, str(topo.path), self.name)
        state.namespaces = {n: container_name(topo.name, n, _prefix(raw)) for n in topo.nodes}
        agent_dirs = {n.name: state.dir / n.name for n in topo.switches if runs_rocelab_switch(n)}
        doc = deploy_document(topo, raw, version, agent_dirs, load_modes)
        state.save()  # recorded before anything exists: a crash here is still cleanable
        try:
            with step("write deploy file"):
                for folder in agent_dirs.values():
                    folder.mkdir(parents=True, exist_ok=True)
                deploy_file(state).write_text(dump_document(
                    doc, f"derived by rocelab from {topo.path.resolve()}: edit that file instead"))
            with step("deploy"):
                self._checked(deploy_argv(deploy_file(state)), "containerlab deploy",
                              DEPLOY_TIMEOUT_S)
            with step("inspect"):
                self._require_running(state)
            for host in topo.hosts:
                with step(f"exec on {host.name}"):
                    self._prepare_host(topo, host, state)
            for switch in topo.switches:
                with step(f"configure {switch.name}"):
                    if runs_rocelab_switch(switch):
                        self._await_agent(switch.name, self._container(state, switch.name),
                                          state)
                    else:
                        self._configure_sonic(switch, state, load_modes[switch.name])
        except BaseException as failure:
            self._roll_back(state, failure)
            raise
        state.status = "up"
        state.save()
        return state

    def down(self, state: LabState, logs: Path | None = None) -> None:
        """Keep the agents' logs (in ``logs``, default under the state root), destroy the
        containers and the lab folder, then forget the lab. Idempotent; a failed destroy
        keeps the state so that lab.cleanup can try again."""
        keep_logs(state, logs)
        if deploy_file(state).exists():
            self._require_containerlab("")
            self._checked(destroy_argv(deploy_file(state)), "containerlab destroy",
                          DESTROY_TIMEOUT_S)
        state.remove()

    def exec_argv(self, state: LabState, node: str, argv: list[str]) -> list[str]:
        """The command line that runs argv inside the node (for interactive use too)."""
        return docker_exec_argv(self._container(state, node), argv)

    @staticmethod
    def runs_agent(node: Node) -> bool:
        """Only the project's switch image runs a rocelab agent: a SONiC-VS switch has none
        to be alive or dead."""
        return runs_rocelab_switch(node)

    def exec(self, state: LabState, node: str, argv: list[str],
             timeout: float | None = None) -> subprocess.CompletedProcess:
        return self.run(self.exec_argv(state, node, argv),
                        capture_output=True, text=True, timeout=timeout)

    def inspect(self, state: LabState) -> dict[str, ContainerRecord]:
        """The lab's containers by node name."""
        proc = self._checked(inspect_argv(deploy_file(state)), "containerlab inspect",
                             COMMAND_TIMEOUT_S)
        nodes = {container: node for node, container in state.namespaces.items()}
        return {nodes[r.name]: r for r in parse_inspect(proc.stdout) if r.name in nodes}

    def sonic_summary(self, state: LabState, node: str) -> sonic.SonicSummary:
        """Read a SONiC-VS switch's CONFIG_DB and ASIC_DB back, for configuration checks."""
        container = self._container(state, node)
        config_db = json.loads(self._in_container(
            container, sonic.config_db_argv(), f"{node}: sonic-cfggen").stdout)
        asic = sonic.parse_asic_dump(self._in_container(
            container, sonic.asic_dump_argv(), f"{node}: read ASIC_DB").stdout)
        return sonic.summarize(node, config_db, asic)

    def wait_sonic_ready(self, container: str, switch: Node) -> None:
        """Ready as sonic-swss's own tests wait for it (labs/sonic.py); bounded, because a
        broken image or config never gets there. The error names what was still missing."""
        config_db = json.loads(switch.config_path.read_text()) if switch.config_path else {}
        wired = list(switch.ports.ports.values()) if switch.ports else []
        self._await(lambda: self._sonic_gap(container, config_db, wired),
                    f"{switch.name}: SONiC-VS not ready", sonic.READY_TIMEOUT_S)

    # -- capabilities

    def require_engine(self, hint: str) -> None:
        """containerlab, then a docker daemon that answers: checked before anything runs,
        each missing piece said in one line with what still works without it."""
        self._require_containerlab(hint)
        if self.which(DOCKER) is None:
            raise LabError(f"containerlab runtime: '{DOCKER}' not found (containerlab needs a "
                           f"container engine: install docker){hint}")
        proc = self.run([DOCKER, "info"], capture_output=True, text=True,
                        timeout=COMMAND_TIMEOUT_S, env=self.env)
        if proc.returncode != 0:
            detail = last_line(proc.stderr or proc.stdout)
            raise LabError(f"containerlab runtime: no docker daemon answers ('docker info': "
                           f"{detail or f'exit {proc.returncode}'}); start it{hint}")

    def _require_containerlab(self, hint: str) -> None:
        if self.which(CONTAINERLAB) is None:
            raise LabError(f"containerlab runtime: '{CONTAINERLAB}' not found (install it from "
                           f"containerlab.dev){hint}")

    def _require_images(self, needed: list[NeededImage]) -> None:
        """Every image present here: none is left for containerlab to pull (or fail to pull,
        for the ones no registry has) in the middle of a deploy."""
        missing = [need for need in needed
                   if self.run(image_inspect_argv(need.image), capture_output=True, text=True,
                               timeout=COMMAND_TIMEOUT_S, env=self.env).returncode != 0]
        if missing:
            raise LabError(missing_message(missing))

    def _load_modes(self, needed: list[NeededImage]) -> dict[str, LoadMode]:
        """How each SONiC-VS image takes its config, read from its own start.sh."""
        modes = {}
        for need in needed:
            if need.sonic_vs:
                proc = self.run(sonic.load_mode_argv(need.image), capture_output=True,
                                text=True, timeout=COMMAND_TIMEOUT_S, env=self.env)
                modes[need.image] = sonic.load_mode(need.image, proc.returncode,
                                                    proc.stderr or proc.stdout)
        return modes

    # -- steps

    def _require_running(self, state: LabState) -> None:
        records = self.inspect(state)
        missing = [n for n in state.namespaces if n not in records]
        stopped = [f"{n} ({r.state})" for n, r in records.items() if r.state != "running"]
        if missing or stopped:
            raise LabError("not running: " + ", ".join(missing + stopped))

    def _prepare_host(self, topo: Topology, host: Node, state: LabState) -> None:
        container = self._container(state, host.name)
        for iface in topo.interfaces(host.name):
            self._in_container(container, ["ethtool", "-K", iface, *HOST_OFFLOADS_OFF],
                               f"{host.name}: ethtool -K {iface}")
        for command in host.exec:
            self._in_container(container, shlex.split(command), f"{host.name}: {command!r}")

    def _configure_sonic(self, switch: Node, state: LabState, mode: LoadMode) -> None:
        """A bound config was loaded by start.sh already; an older image's first start ran on
        its default config, so the file is copied in and supervisord started again (start.sh
        loads it into empty databases). Then: ready, and BGP started."""
        container = self._container(state, switch.name)
        if mode is LoadMode.RESTART:
            self._await(lambda: sonic.start_script_gap(self._output(container,
                                                                    sonic.status_argv())),
                        f"{switch.name}: SONiC-VS's first start did not finish",
                        sonic.READY_TIMEOUT_S)
            self._checked(docker_cp_argv(switch.config_path, container, SONIC_CONFIG_TARGET),
                          f"{switch.name}: docker cp config_db.json", COMMAND_TIMEOUT_S)
            self._in_container(container, sonic.shutdown_argv(),
                               f"{switch.name}: supervisorctl shutdown")
            self._await(lambda: self._supervisord_gap(container),
                        f"{switch.name}: supervisord did not stop", SUPERVISORD_STOP_TIMEOUT_S)
            self._checked(docker_exec_argv(container, sonic.supervisord_argv(), detach=True),
                          f"{switch.name}: start supervisord", COMMAND_TIMEOUT_S)
        self.wait_sonic_ready(container, switch)
        self._in_container(container, sonic.start_bgp_argv(),
                           f"{switch.name}: supervisorctl start {sonic.BGP_PROGRAM}")

    def _sonic_gap(self, container: str, config_db: dict, wired: list[str]) -> str | None:
        """The first readiness condition not met yet, or None: each stage only once the one
        before holds, as each needs the previous (supervisord, redis, orchagent). ``wired``:
        the PORT entries on the switch's wires."""
        gap = sonic.start_script_gap(self._output(container, sonic.status_argv()))
        if gap is None:
            gap = sonic.port_flags_gap(self._output(container, sonic.port_flags_argv()))
        if gap is None:
            dump = self.run(docker_exec_argv(container, sonic.asic_dump_argv()),
                            capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                            env=self.env)
            if dump.returncode != 0:
                return f"ASIC_DB unreadable: {last_line(dump.stderr or dump.stdout)}"
            gaps = sonic.asic_gaps(config_db, wired, sonic.parse_asic_dump(dump.stdout))
            gap = "; ".join(gaps) or None
        return gap

    def _supervisord_gap(self, container: str) -> str | None:
        proc = self.run(docker_exec_argv(container, sonic.supervisord_pid_argv()),
                        capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, env=self.env)
        return f"supervisord still answers (pid {proc.stdout.strip()})" \
            if proc.returncode == 0 else None

    def _await(self, gap: Callable[[], str | None], what: str, timeout_s: float) -> None:
        """Poll ``gap`` (what is still missing, None once nothing is) every sonic.POLL_S, at
        most ``timeout_s``; the error ends with the last thing that was missing."""
        attempts = max(1, int(timeout_s / sonic.POLL_S))
        last = None
        for attempt in range(attempts):
            last = gap()
            if last is None:
                return
            if attempt + 1 < attempts:
                self.sleep(sonic.POLL_S)
        raise LabError(f"{what} after {timeout_s:.0f} s: {last}")

    def _await_agent(self, node: str, container: str, state: LabState) -> None:
        """Ready means it answers on its socket, which the container's bind puts in the state
        folder; its host pid (docker's view) makes it visible to lab.status and lab.cleanup."""
        folder = state.dir / node
        control, log = folder / "agent.sock", folder / "agent.log"
        client = AgentClient(control, timeout=AGENT_POLL_S)
        for _ in range(AGENT_ATTEMPTS):
            try:
                client.ping()
                break
            except AgentError:
                self.sleep(AGENT_POLL_S)
        else:
            tail = last_line(log.read_text(errors="replace")) if log.exists() else ""
            raise LabError(f"agent {node} did not answer within {AGENT_START_TIMEOUT_S:.0f} s: "
                           f"{tail or f'no log (docker logs {container})'}")
        pid = self._checked([DOCKER, "inspect", "--format", "{{.State.Pid}}", container],
                            f"docker inspect {container}", COMMAND_TIMEOUT_S).stdout
        state.agents[node] = AgentState(node=node, namespace=container, pid=int(pid.strip()),
                                        started=process_start(int(pid.strip())),
                                        control=str(control), log=str(log))
        state.save()

    def _roll_back(self, state: LabState, failure: BaseException) -> None:
        try:
            self.down(state)
        except LabError as e:
            if isinstance(failure, LabError):
                raise LabError(f"{failure}; rollback failed too: {e} (state kept in "
                               f"{state.dir}: invoke lab.cleanup)") from None

    # -- running commands

    def _container(self, state: LabState, node: str) -> str:
        if node not in state.namespaces:
            raise LabError(f"lab {state.lab} has no node {node!r} "
                           f"(nodes: {', '.join(state.namespaces)})")
        return state.namespaces[node]

    def _output(self, container: str, argv: list[str]) -> str:
        """What a command printed, whatever its exit code (a poll reads the answer, and
        supervisorctl status exits 3 while a program is not running)."""
        proc = self.run(docker_exec_argv(container, argv), capture_output=True, text=True,
                        timeout=COMMAND_TIMEOUT_S, env=self.env)
        return proc.stdout if proc.stdout.strip() else proc.stderr

    def _in_container(self, container: str, argv: list[str], what: str,
                      timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
        return self._checked(docker_exec_argv(container, argv), what, timeout)

    def _checked(self, argv: list[str], what: str,
                 timeout: float) -> subprocess.CompletedProcess:
        proc = self.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env)
        if proc.returncode != 0:
            detail = last_line(proc.stderr or proc.stdout)
            raise LabError(f"{what}: exit {proc.returncode}" + (f": {detail}" if detail else ""))
        return proc


def _prefix(raw: dict) -> str:
    """The file's container name prefix; containerlab treats an empty ``prefix:`` as unset."""
    prefix = raw.get("prefix")
    return "clab" if prefix is None else str(prefix)


def _netns_hint(topo: Topology) -> str:
    """What to type instead: the lab's name when it resolves to this file, else its path."""
    try:
        same = topology.resolve(topo.name).resolve() == topo.path.resolve()
        arg = topo.name if same else str(topo.path)
    except TopologyError:
        arg = str(topo.path)
    return f"; the default netns runtime needs no container engine: invoke lab.up {arg}"
