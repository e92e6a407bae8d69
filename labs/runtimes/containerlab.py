"""The containerlab runtime: the same topology file deployed by real containerlab, in containers.

Why it exists next to the embedded netns runtime: containerlab is what network engineers already
run, it can host SONiC-VS (SONiC's own control plane and databases), and a containerlab lab
moves to Kubernetes unchanged with clabernetes (``labs/export.py``).

What this runtime adds to ``containerlab deploy``, and why:

- containerlab deploys a derived copy of the topology, written to the lab's state folder: the
  user's file stays untouched (and valid), while the copy has bind sources made absolute (it
  lives elsewhere), no ``exec`` commands (containerlab only logs their failures; this runtime
  runs them itself and checks exit codes), and each switch set to the implementation it asked
  for.
- Switches of kind ``sonic-vs`` run SONiC-VS by default: configuration level only, because
  SONiC-VS programs QoS into ASIC_DB but has no PFC/ECN/queueing data plane. The node label
  ``rocelab.switch: rocelab`` selects the project's own switch image instead (full data
  plane); a label, because containerlab's schema allows no keys of our own.
- SONiC-VS gets its ``config_db.json`` pushed once it is ready (``docker cp`` + ``config reload
  -y``) instead of bound: its start script rewrites ``/etc/sonic/config_db.json`` in place,
  which fails on a bind mount and would otherwise rewrite the user's file.
- Hosts get the same treatment as under netns: offloads off (the emulated switch reads raw
  frames), then their ``exec`` commands, exit codes checked.
- ``up`` is all-or-nothing: the state is recorded first, and a failed step destroys the lab
  and names the step.

The SONiC-VS read-back (CONFIG_DB and ASIC_DB into a typed summary) and the "not applicable on
SONiC-VS" verdict for data-plane checks live here too: both depend on what this runtime deployed.
"""
from __future__ import annotations

import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from fabric.client import AgentClient, AgentError
from fabric.config import DEFAULT_ECN_MARKING, SwitchConfig
from labs import topology
from labs.runtimes.netns import HOST_OFFLOADS_OFF, PROJECT_ROOT, LabError, step
from labs.state import AgentState, LabState
from labs.topology import SONIC_CONFIG_TARGET, Node, Topology, TopologyError

CONTAINERLAB = "containerlab"
DOCKER = "docker"
CLAB_ENV = {"CLAB_VERSION_CHECK": "disable"}  # no network call to GitHub on every command

SWITCH_LABEL = "rocelab.switch"
SONIC_VS = "sonic-vs"  # the default: SONiC-VS, configuration-level checks only
ROCELAB_SWITCH = "rocelab"  # the project's switch image: full data plane
SWITCH_IMAGE = "rocelab-switch"
HOST_IMAGE = "rocelab-host"
DOCKERFILE = "images/Dockerfile"
IMAGES = {SWITCH_IMAGE: "switch", HOST_IMAGE: "host"}  # image -> its stage in DOCKERFILE
LOCAL_IMAGE_PREFIX = "rocelab-"  # built here by image.build, never pulled
AGENT_DIR = "/run/rocelab"  # in the switch container: agent.sock and agent.log
PORTS_ENV = "ROCELAB_PORTS"  # the ports the switch container waits for before it starts
TIME_SCALE_ENV = "ROCELAB_TIME_SCALE"  # the agent's --time-scale (label rocelab.time-scale)
ECN_MARKING_ENV = "ROCELAB_ECN_MARKING"  # --ecn-marking (label rocelab.ecn-marking), if set
# Where an exported SONiC-VS node finds its config before loading it (see portable_document).
SONIC_STAGED_CONFIG = "/etc/sonic/rocelab/config_db.json"
PORT_INIT_DONE = "PORT_TABLE:PortInitDone"  # APPL_DB key: SONiC's ports are initialised

DEPLOY_TIMEOUT_S = 900.0  # includes image pulls
DESTROY_TIMEOUT_S = 300.0
COMMAND_TIMEOUT_S = 60.0
CONFIG_RELOAD_TIMEOUT_S = 600.0
SONIC_READY_TIMEOUT_S = 300.0
SONIC_POLL_S = 2.0
SONIC_READY_ATTEMPTS = int(SONIC_READY_TIMEOUT_S / SONIC_POLL_S)
AGENT_START_TIMEOUT_S = 60.0
AGENT_POLL_S = 0.5
AGENT_ATTEMPTS = int(AGENT_START_TIMEOUT_S / AGENT_POLL_S)

# Settings that rocelab resolves per node (topology.py merges node > group > kind > defaults)
# and writes at node level in the derived file, so containerlab cannot merge them differently.
NODE_RESOLVED_KEYS = ("exec", "binds", "startup-config")

SONIC_VS_NO_DATA_PLANE = ("not applicable on SONiC-VS: it programs QoS into ASIC_DB but has no "
                          "PFC/ECN/queueing data plane")

# One round trip for every ASIC object a configuration check reads: redis-cli would otherwise
# need a KEYS and one HGETALL per object, each a docker exec.
ASIC_DUMP_SCRIPT = """\
local out = {}
for _, pattern in ipairs(ARGV) do
  for _, key in ipairs(redis.call('KEYS', pattern)) do
    local flat = redis.call('HGETALL', key)
    local fields = {}
    for i = 1, #flat, 2 do fields[flat[i]] = flat[i + 1] end
    out[key] = fields
  end
end
return cjson.encode(out)
"""
ASIC_PORT = "ASIC_STATE:SAI_OBJECT_TYPE_PORT:"
ASIC_BUFFER_PROFILE = "ASIC_STATE:SAI_OBJECT_TYPE_BUFFER_PROFILE:"
ASIC_WRED = "ASIC_STATE:SAI_OBJECT_TYPE_WRED:"


class Runner(Protocol):
    """subprocess.run's shape: tests pass a recorder instead."""

    def __call__(self, args: list[str], **kwargs: Any) -> subprocess.CompletedProcess: ...


# ---- command lines --------------------------------------------------------------------------

def deploy_argv(file: Path) -> list[str]:
    return [CONTAINERLAB, "deploy", "-t", str(file)]


def destroy_argv(file: Path) -> list[str]:
    return [CONTAINERLAB, "destroy", "-t", str(file), "--cleanup"]


def inspect_argv(file: Path) -> list[str]:
    return [CONTAINERLAB, "inspect", "-t", str(file), "--format", "json"]


def docker_exec_argv(container: str, argv: list[str]) -> list[str]:
    return [DOCKER, "exec", container, *argv]


def docker_cp_argv(source: Path, container: str, target: str) -> list[str]:
    return [DOCKER, "cp", str(source), f"{container}:{target}"]


def sonic_ready_argv() -> list[str]:
    return ["redis-cli", "-n", "0", "EXISTS", PORT_INIT_DONE]


def asic_dump_argv() -> list[str]:
    patterns = [f"{prefix}*" for prefix in (ASIC_PORT, ASIC_BUFFER_PROFILE, ASIC_WRED)]
    return ["redis-cli", "-n", "1", "--raw", "EVAL", ASIC_DUMP_SCRIPT, "0", *patterns]


def container_name(lab: str, node: str, prefix: str = "clab") -> str:
    """containerlab's name for a node's container, which is also the name it gives the
    container's network namespace (in /var/run/netns): so lab.status and pingall, which enter
    namespaces, work on containerlab labs unchanged."""
    if prefix == "":
        return node
    if prefix == "__lab-name":
        return f"{lab}-{node}"
    return f"{prefix}-{lab}-{node}"


def project_version() -> str:
    """The switch image's tag: the version of this checkout, so the agent in the container
    speaks the control protocol of the code that talks to it."""
    text = (PROJECT_ROOT / "pyproject.toml").read_text()
    match = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if match is None:
        raise LabError(f"{PROJECT_ROOT / 'pyproject.toml'}: no project version")
    return match.group(1)


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


# ---- which switch a node runs ---------------------------------------------------------------

def switch_implementation(node: Node) -> str:
    """``sonic-vs`` or ``rocelab``: what a switch node runs under containerlab and clabernetes."""
    value = node.labels.get(SWITCH_LABEL, SONIC_VS)
    if value not in (SONIC_VS, ROCELAB_SWITCH):
        raise LabError(f"node {node.name}: label {SWITCH_LABEL}: {value!r} is not one of "
                       f"{SONIC_VS} (SONiC-VS, configuration level) or {ROCELAB_SWITCH} "
                       "(the project's switch image, full data plane)")
    return value


def runs_rocelab_switch(node: Node) -> bool:
    return node.is_switch and switch_implementation(node) == ROCELAB_SWITCH


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
    sonic = tuple(n.name for n in topo.switches if switch_implementation(n) == SONIC_VS)
    return NotApplicable(check, sonic, SONIC_VS_NO_DATA_PLANE) if sonic else None


# ---- the derived topology files -------------------------------------------------------------

def read_document(topo: Topology) -> dict:
    """The topology file as written (``${VAR}`` left for containerlab to expand)."""
    return yaml.safe_load(topo.path.read_text())


def dump_document(doc: dict, header: str) -> str:
    """YAML text of a derived topology, its origin in a comment; wide lines, because folded
    long commands are valid but hard to read."""
    return f"# {header}\n" + yaml.safe_dump(doc, sort_keys=False, width=4096)


def deploy_document(topo: Topology, raw: dict, version: str,
                    agent_dirs: dict[str, Path]) -> dict:
    """The file containerlab deploys on this machine: absolute binds (it lives in the state
    folder), no exec (run and checked by this runtime), SONiC-VS without its config bind
    (pushed once ready), rocelab switches as the switch image with their agent's folder
    (``agent_dirs``) bound where the agent puts its socket and log."""
    doc = _without_layered_settings(raw)
    base = topo.path.resolve().parent
    for node in topo.nodes.values():
        spec = _node_spec(doc, node.name)
        spec.pop("exec", None)
        binds = [_absolute_bind(b, base) for b in _own_binds(node)]
        if runs_rocelab_switch(node):
            _as_rocelab_switch(spec, topo, node, version)
            binds += [f"{node.config_path}:{SONIC_CONFIG_TARGET}:ro",
                      f"{agent_dirs[node.name]}:{AGENT_DIR}"]
        _set_binds(spec, binds)
    return doc


def portable_document(topo: Topology, raw: dict, version: str) -> dict:
    """The file for clabernetes, where containerlab runs in a pod per node and nothing of this
    machine exists: binds stay relative (served from ConfigMaps), and containerlab itself runs
    the commands this runtime would run: host offloads then host exec, and on SONiC-VS a
    bounded wait for readiness followed by loading the staged config."""
    doc = _without_layered_settings(raw)
    for node in topo.nodes.values():
        spec = _node_spec(doc, node.name)
        binds = list(_own_binds(node))
        if not node.is_switch:
            commands = [shlex.join(["ethtool", "-K", iface, *HOST_OFFLOADS_OFF])
                        for iface in topo.interfaces(node.name)] + list(node.exec)
        elif runs_rocelab_switch(node):
            _as_rocelab_switch(spec, topo, node, version)
            binds.append(f"{_relative_source(node.config_path, topo)}:{SONIC_CONFIG_TARGET}:ro")
            commands = []
        else:
            binds.append(f"{_relative_source(node.config_path, topo)}:{SONIC_STAGED_CONFIG}:ro")
            commands = [sonic_load_command()]
        _set_binds(spec, binds)
        if commands:
            spec["exec"] = commands
        else:
            spec.pop("exec", None)
    return doc


def sonic_load_command() -> str:
    """For containerlab's exec on an exported SONiC-VS node: wait (bounded) for its ports,
    then load the staged config as this runtime does with docker cp + config reload."""
    script = (f'until [ "$(redis-cli -n 0 EXISTS {PORT_INIT_DONE})" = 1 ]; do sleep 2; done; '
              f"cp {SONIC_STAGED_CONFIG} {SONIC_CONFIG_TARGET} && config reload -y")
    return shlex.join(["timeout", str(int(SONIC_READY_TIMEOUT_S)), "bash", "-c", script])


def _without_layered_settings(raw: dict) -> dict:
    doc = copy.deepcopy(raw)
    tree = doc.setdefault("topology", {})
    layers = [tree.get("defaults"), *(tree.get("kinds") or {}).values(),
              *(tree.get("groups") or {}).values()]
    for layer in layers:
        if isinstance(layer, dict):
            for key in NODE_RESOLVED_KEYS:
                layer.pop(key, None)
    return doc


def _node_spec(doc: dict, name: str) -> dict:
    """The node's own mapping, with startup-config dropped: rocelab reads it only as a
    switch's config_db.json, which each runtime delivers its own way."""
    nodes = doc["topology"]["nodes"]
    spec = nodes[name] = dict(nodes.get(name) or {})
    spec.pop("startup-config", None)
    return spec


def _own_binds(node: Node) -> tuple[str, ...]:
    """The node's binds without a switch's config_db.json bind (each runtime places it)."""
    return tuple(b for b in node.binds
                 if not (node.is_switch and b.split(":")[1:2] == [SONIC_CONFIG_TARGET]))


def _absolute_bind(bind: str, base: Path) -> str:
    source, sep, rest = bind.partition(":")
    return f"{(base / source).resolve()}{sep}{rest}"


def _relative_source(path: Path | None, topo: Topology) -> str:
    """A switch config's path as the topology file would name it."""
    if path is None:
        raise LabError("a switch without config_db.json (topology.load refuses these)")
    relative = os.path.relpath(path, topo.path.resolve().parent)
    return str(path) if relative.startswith("..") else Path(relative).as_posix()


def _as_rocelab_switch(spec: dict, topo: Topology, node: Node, version: str) -> None:
    """kind linux: containerlab's sonic-vs kind would replace the image's entrypoint and start
    SONiC's supervisord in it."""
    spec["kind"] = "linux"
    spec["image"] = f"{SWITCH_IMAGE}:{version}"
    spec["env"] = {**(spec.get("env") or {}), PORTS_ENV: ",".join(topo.interfaces(node.name)),
                   TIME_SCALE_ENV: f"{node.time_scale:g}"}
    if node.ecn_marking != DEFAULT_ECN_MARKING:
        spec["env"][ECN_MARKING_ENV] = node.ecn_marking


def _set_binds(spec: dict, binds: list[str]) -> None:
    if binds:
        spec["binds"] = binds
    else:
        spec.pop("binds", None)


# ---- SONiC-VS read-back ---------------------------------------------------------------------

@dataclass(frozen=True)
class AsicBufferProfile:
    size: int
    threshold_mode: str  # SAI_BUFFER_PROFILE_THRESHOLD_MODE_DYNAMIC or _STATIC
    dynamic_th: int | None = None
    static_th: int | None = None
    xon: int | None = None
    xoff: int | None = None


@dataclass(frozen=True)
class AsicWred:
    green_enable: bool
    green_min: int | None
    green_max: int | None
    green_drop_probability: int | None
    ecn_mark_mode: str  # SAI_ECN_MARK_MODE_ALL, ...


@dataclass(frozen=True)
class SonicSummary:
    """What a SONiC-VS switch made of its config: CONFIG_DB (what it loaded) and ASIC_DB (what
    orchagent programmed). Configuration checks compare these with the intended config_db.json
    (see ``mismatches``); there is no data plane behind them to test."""

    node: str
    config_pfc: dict[str, frozenset[int]]  # port -> PORT_QOS_MAP pfc_enable, from CONFIG_DB
    asic_pfc: dict[str, frozenset[int]]  # port -> SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL bits
    buffer_profiles: tuple[AsicBufferProfile, ...]
    wred_profiles: tuple[AsicWred, ...]
    config_db: dict[str, Any]  # everything sonic-cfggen printed, for other checks


def redis_integer(text: str) -> int | None:
    """redis-cli prints ``1`` to a pipe and ``(integer) 1`` to a terminal."""
    words = text.split()
    return int(words[-1]) if words and re.fullmatch(r"-?\d+", words[-1]) else None


def parse_asic_dump(text: str) -> dict[str, dict[str, str]]:
    """The JSON object ASIC_DUMP_SCRIPT returns: key -> hash fields."""
    data = json.loads(text.strip() or "{}")
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError("ASIC_DB dump: expected a JSON object of hashes")
    return data


def summarize(node: str, config_db: dict[str, Any],
              asic: dict[str, dict[str, str]]) -> SonicSummary:
    """ASIC ports carry no names: they are matched to CONFIG_DB's PORT table on their lanes."""
    by_lanes = {frozenset(_ints(fields.get("lanes", ""))): port
                for port, fields in (config_db.get("PORT") or {}).items()}
    asic_pfc = {}
    for key, fields in asic.items():
        if not key.startswith(ASIC_PORT) or "SAI_PORT_ATTR_HW_LANE_LIST" not in fields:
            continue  # the CPU port has no lanes
        lanes = frozenset(_ints(fields["SAI_PORT_ATTR_HW_LANE_LIST"].partition(":")[2]))
        port = by_lanes.get(lanes)
        mask = fields.get("SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL")
        if port is not None and mask is not None:
            asic_pfc[port] = frozenset(p for p in range(8) if int(mask) >> p & 1)
    config_pfc = {port: frozenset(_ints(fields.get("pfc_enable", "")))
                  for port, fields in (config_db.get("PORT_QOS_MAP") or {}).items()
                  if port != "global"}
    return SonicSummary(
        node=node, config_pfc=config_pfc, asic_pfc=asic_pfc,
        buffer_profiles=tuple(_buffer_profile(f) for k, f in sorted(asic.items())
                              if k.startswith(ASIC_BUFFER_PROFILE)),
        wred_profiles=tuple(_wred(f) for k, f in sorted(asic.items())
                            if k.startswith(ASIC_WRED)),
        config_db=config_db)


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.split(r"[,\s]+", text.strip()) if x]


def _optional_int(fields: dict[str, str], key: str) -> int | None:
    return int(fields[key]) if key in fields else None


def _buffer_profile(fields: dict[str, str]) -> AsicBufferProfile:
    prefix = "SAI_BUFFER_PROFILE_ATTR_"
    return AsicBufferProfile(
        size=int(fields.get(prefix + "BUFFER_SIZE", "0")),
        threshold_mode=fields.get(prefix + "THRESHOLD_MODE", ""),
        dynamic_th=_optional_int(fields, prefix + "SHARED_DYNAMIC_TH"),
        static_th=_optional_int(fields, prefix + "SHARED_STATIC_TH"),
        xon=_optional_int(fields, prefix + "XON_TH"),
        xoff=_optional_int(fields, prefix + "XOFF_TH"))


def _wred(fields: dict[str, str]) -> AsicWred:
    prefix = "SAI_WRED_ATTR_"
    return AsicWred(green_enable=fields.get(prefix + "GREEN_ENABLE") == "true",
                    green_min=_optional_int(fields, prefix + "GREEN_MIN_THRESHOLD"),
                    green_max=_optional_int(fields, prefix + "GREEN_MAX_THRESHOLD"),
                    green_drop_probability=_optional_int(fields, prefix + "GREEN_DROP_PROBABILITY"),
                    ecn_mark_mode=fields.get(prefix + "ECN_MARK_MODE", ""))


def mismatches(intended: SwitchConfig, summary: SonicSummary) -> list[str]:
    """Where SONiC-VS's databases differ from the intended config: PFC priorities per port
    (CONFIG_DB and ASIC), lossless buffer profiles and WRED profiles (ASIC). Empty: it agrees."""
    out = []
    for port, qos in sorted(intended.qos.port_qos.items()):
        if port == "global":
            continue
        want = set(qos.pfc_enable)
        for where, got in (("CONFIG_DB", summary.config_pfc), ("ASIC_DB", summary.asic_pfc)):
            if set(got.get(port, frozenset())) != want:
                out.append(f"{summary.node}: {port}: pfc_enable {sorted(want)} but {where} has "
                           f"{sorted(got.get(port, frozenset()))}")
    for name, profile in sorted(intended.qos.buffer_profiles.items()):
        if profile.xoff is None:
            continue  # only lossless (headroom) profiles are compared
        if not any((p.size, p.xon, p.xoff) == (profile.size, profile.xon, profile.xoff)
                   for p in summary.buffer_profiles):
            out.append(f"{summary.node}: BUFFER_PROFILE|{name}: no ASIC buffer profile with "
                       f"size {profile.size}, xon {profile.xon}, xoff {profile.xoff}")
    for name, wred in sorted(intended.qos.wred_profiles.items()):
        if wred.green is None:
            continue
        want_wred = (wred.green.min_threshold, wred.green.max_threshold,
                     wred.green.drop_probability, "SAI_ECN_MARK_MODE_" + wred.ecn[4:].upper())
        if not any((w.green_min, w.green_max, w.green_drop_probability, w.ecn_mark_mode)
                   == want_wred for w in summary.wred_profiles):
            out.append(f"{summary.node}: WRED_PROFILE|{name}: no ASIC WRED profile with green "
                       f"{want_wred[0]}..{want_wred[1]} bytes, {want_wred[2]} %, {want_wred[3]}")
    return out


# ---- the runtime ----------------------------------------------------------------------------

def deploy_file(state: LabState) -> Path:
    return state.dir / f"{state.lab}.clab.yml"


class ContainerlabRuntime:
    """The NetnsRuntime interface (up, down, exec) over containerlab and docker. Every command
    goes through ``run`` (subprocess.run's shape), so tests record them instead of running."""

    name = CONTAINERLAB

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
        raw = read_document(topo)
        state = LabState.new(topo.name, str(topo.path), self.name)
        state.namespaces = {n: container_name(topo.name, n, _prefix(raw)) for n in topo.nodes}
        agent_dirs = {n.name: state.dir / n.name for n in topo.switches if runs_rocelab_switch(n)}
        doc = deploy_document(topo, raw, project_version(), agent_dirs)
        self._require_local_images(topo, doc)
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
                    self._configure_switch(switch, state)
        except BaseException as failure:
            self._roll_back(state, failure)
            raise
        state.status = "up"
        state.save()
        return state

    def down(self, state: LabState) -> None:
        """Destroy the containers and the lab folder, then forget the lab. Idempotent; a failed
        destroy keeps the state so that lab.cleanup can try again."""
        if deploy_file(state).exists():
            self._require_containerlab("")
            self._checked(destroy_argv(deploy_file(state)), "containerlab destroy",
                          DESTROY_TIMEOUT_S)
        state.remove()

    def exec_argv(self, state: LabState, node: str, argv: list[str]) -> list[str]:
        """The command line that runs argv inside the node (for interactive use too)."""
        return docker_exec_argv(self._container(state, node), argv)

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

    def sonic_summary(self, state: LabState, node: str) -> SonicSummary:
        """Read a SONiC-VS switch's CONFIG_DB and ASIC_DB back, for configuration checks."""
        container = self._container(state, node)
        config_db = json.loads(self._in_container(
            container, ["sonic-cfggen", "-d", "--print-data"], f"{node}: sonic-cfggen").stdout)
        asic = parse_asic_dump(self._in_container(
            container, asic_dump_argv(), f"{node}: read ASIC_DB").stdout)
        return summarize(node, config_db, asic)

    def wait_sonic_ready(self, container: str, node: str) -> None:
        """SONiC-VS is ready for config when its ports are initialised; bounded, because a
        broken image never gets there."""
        argv = docker_exec_argv(container, sonic_ready_argv())
        last = ""
        for attempt in range(SONIC_READY_ATTEMPTS):
            proc = self.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S,
                            env=self.env)
            if proc.returncode == 0 and redis_integer(proc.stdout) == 1:
                return
            last = _last_line(proc.stderr or proc.stdout) or last
            if attempt + 1 < SONIC_READY_ATTEMPTS:
                self.sleep(SONIC_POLL_S)
        raise LabError(f"{node}: SONiC-VS not ready after {SONIC_READY_TIMEOUT_S:.0f} s "
                       f"({PORT_INIT_DONE} never appeared in APPL_DB; last answer: "
                       f"{last or 'none'})")

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
            detail = _last_line(proc.stderr or proc.stdout)
            raise LabError(f"containerlab runtime: no docker daemon answers ('docker info': "
                           f"{detail or f'exit {proc.returncode}'}); start it{hint}")

    def _require_containerlab(self, hint: str) -> None:
        if self.which(CONTAINERLAB) is None:
            raise LabError(f"containerlab runtime: '{CONTAINERLAB}' not found (install it from "
                           f"containerlab.dev){hint}")

    def _require_local_images(self, topo: Topology, doc: dict) -> None:
        """rocelab's images come from image.build, not a registry: a missing one would make
        containerlab try to pull it and fail obscurely."""
        nodes = doc["topology"]["nodes"]
        images = {nodes[n.name].get("image") or n.image for n in topo.nodes.values()
                  if not n.is_switch or runs_rocelab_switch(n)}
        for image in sorted(i for i in images if i.startswith(LOCAL_IMAGE_PREFIX)):
            proc = self.run([DOCKER, "image", "inspect", image], capture_output=True, text=True,
                            timeout=COMMAND_TIMEOUT_S, env=self.env)
            if proc.returncode != 0:
                raise LabError(f"containerlab runtime: image {image} is not built here: "
                               "invoke image.build")

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

    def _configure_switch(self, switch: Node, state: LabState) -> None:
        container = self._container(state, switch.name)
        if runs_rocelab_switch(switch):
            self._await_agent(switch.name, container, state)
            return
        self.wait_sonic_ready(container, switch.name)
        self._checked(docker_cp_argv(switch.config_path, container, SONIC_CONFIG_TARGET),
                      f"{switch.name}: docker cp config_db.json", COMMAND_TIMEOUT_S)
        self._in_container(container, ["config", "reload", "-y"],
                           f"{switch.name}: config reload -y", CONFIG_RELOAD_TIMEOUT_S)
        self.wait_sonic_ready(container, switch.name)  # reload restarts SONiC's services

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
            tail = _last_line(log.read_text(errors="replace")) if log.exists() else ""
            raise LabError(f"agent {node} did not answer within {AGENT_START_TIMEOUT_S:.0f} s: "
                           f"{tail or f'no log (docker logs {container})'}")
        pid = self._checked([DOCKER, "inspect", "--format", "{{.State.Pid}}", container],
                            f"docker inspect {container}", COMMAND_TIMEOUT_S).stdout
        state.agents[node] = AgentState(node=node, namespace=container, pid=int(pid.strip()),
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

    def _in_container(self, container: str, argv: list[str], what: str,
                      timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
        return self._checked(docker_exec_argv(container, argv), what, timeout)

    def _checked(self, argv: list[str], what: str,
                 timeout: float) -> subprocess.CompletedProcess:
        proc = self.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env)
        if proc.returncode != 0:
            detail = _last_line(proc.stderr or proc.stdout)
            raise LabError(f"{what}: exit {proc.returncode}" + (f": {detail}" if detail else ""))
        return proc


def _prefix(raw: dict) -> str:
    """The file's container name prefix; containerlab treats an empty ``prefix:`` as unset."""
    prefix = raw.get("prefix")
    return "clab" if prefix is None else str(prefix)


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


def _netns_hint(topo: Topology) -> str:
    """What to type instead: the lab's name when it resolves to this file, else its path."""
    try:
        same = topology.resolve(topo.name).resolve() == topo.path.resolve()
        arg = topo.name if same else str(topo.path)
    except TopologyError:
        arg = str(topo.path)
    return f"; the default netns runtime needs no container engine: invoke lab.up {arg}"


# ---- images ---------------------------------------------------------------------------------
#
# Built without an image registry, from Debian packages: mmdebstrap makes a bookworm root file
# system from the apt mirror this machine already uses, the engine imports it as rocelab-base,
# and images/Dockerfile builds both images on it. The project and its Python dependencies go in
# as wheels fetched on this machine (its pip configuration: index, proxy, certificates), so the
# build itself needs no network at all.

BASE_IMAGE = "rocelab-base"
DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "iproute2", "ethtool", "tcpdump", "iperf3",
                 "iputils-ping", "procps", "ca-certificates")
# Like Debian's -slim images: no manual pages, documentation (but copyrights) or translations.
BASE_DPKG_EXCLUDES = ("path-exclude=/usr/share/man/*", "path-exclude=/usr/share/doc/*",
                      "path-include=/usr/share/doc/*/copyright", "path-exclude=/usr/share/locale/*")
# An imported root file system has no ENV at all; the Dockerfile's ENV PATH extends this one.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MMDEBSTRAP = "mmdebstrap"
APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
DEBIAN_SUITES = frozenset({"buster", "bullseye", "bookworm", "trixie", "forky", "duke", "sid",
                           "oldoldstable", "oldstable", "stable", "testing", "unstable"})
SWITCH_ENTRYPOINT = "images/switch/entrypoint.sh"
# What the project's wheel is built from: pyproject.toml's metadata and packages.
PROJECT_FILES = ("pyproject.toml", "README.md", "labs", "fabric", "traffic", "checks")
WHEELS = "wheels"  # the build context's folder of wheels, see images/Dockerfile
# What the base image's python accepts: the wheels are fetched on this machine for it.
PYTHON_TARGET_PROBE = ("import platform, sys; "
                       "print(f'{sys.version_info[0]}.{sys.version_info[1]}', "
                       "platform.libc_ver()[1], platform.machine())")
BUILD_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class AptSource:
    """One ``deb`` line (or deb822 entry, one per URI and suite) of an apt sources file."""

    uri: str
    suite: str
    components: tuple[str, ...]


@dataclass(frozen=True)
class DebianMirrors:
    archive: str  # e.g. http://deb.debian.org/debian
    security: str | None  # e.g. http://deb.debian.org/debian-security

    def sources(self, suite: str = DEBIAN_SUITE) -> list[str]:
        """One-line sources for the base image: main, its updates and its security updates."""
        lines = [f"deb {self.archive} {suite} main", f"deb {self.archive} {suite}-updates main"]
        if self.security:
            lines.append(f"deb {self.security} {suite}-security main")
        return lines


@dataclass(frozen=True)
class PythonTarget:
    """The base image's python, which the wheels must fit."""

    version: str  # 3.11
    glibc: str  # 2.36
    machine: str  # x86_64

    def pip_args(self) -> list[str]:
        """pip download's target: CPython of that version on every manylinux tag that glibc
        runs (pip does not expand a manylinux tag to the older ones by itself)."""
        abi = "cp" + self.version.replace(".", "")
        major, minor = (int(x) for x in self.glibc.split(".")[:2])
        platforms = [f"manylinux_{major}_{m}_{self.machine}" for m in range(minor, 4, -1)]
        legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
        platforms += [f"{legacy[m]}_{self.machine}" for m in legacy if m <= minor]
        args = ["--only-binary=:all:", "--python-version", self.version,
                "--implementation", "cp", "--abi", abi]
        for platform in platforms:
            args += ["--platform", platform]
        return args


def read_apt_sources(paths: tuple[Path, ...] = APT_SOURCES) -> list[AptSource]:
    """The ``deb`` entries apt reads: sources.list, then sources.list.d's ``*.list`` (one-line
    format) and ``*.sources`` (deb822), in apt's order; other files (``.disabled``, ...) apt
    ignores too."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in (".list", ".sources"))
        elif path.is_file():
            files.append(path)
    found: list[AptSource] = []
    for file in files:
        text = file.read_text(errors="replace")
        found += _deb822_sources(text) if file.suffix == ".sources" else _one_line_sources(text)
    return found


def _one_line_sources(text: str) -> list[AptSource]:
    found = []
    for line in text.splitlines():
        line = re.sub(r"\[[^]]*\]", " ", line.split("#", 1)[0])  # drop [options]
        words = line.split()
        if len(words) >= 3 and words[0] == "deb":
            found.append(AptSource(words[1].rstrip("/"), words[2], tuple(words[3:])))
    return found


def _deb822_sources(text: str) -> list[AptSource]:
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in paragraph.splitlines():
            if line.startswith("#") or line[:1].isspace() or ":" not in line:
                continue  # comments, and continuation lines (an inline Signed-By key)
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        components = tuple(fields.get("components", "").split())
        found += [AptSource(uri.rstrip("/"), suite, components)
                  for uri in fields.get("uris", "").split()
                  for suite in fields.get("suites", "").split()]
    return found


def debian_mirrors(sources: list[AptSource], mirror: str | None = None) -> DebianMirrors:
    """The Debian archive and security mirrors among ``sources`` (entries for a Debian suite
    with component main); ``mirror`` replaces the archive's."""
    def base_suite(suite: str) -> str:
        return re.sub(r"(-updates|-security|-backports|-proposed-updates|/updates)$", "", suite)

    debian = [s for s in sources if base_suite(s.suite) in DEBIAN_SUITES and "main" in s.components]
    def is_security(suite: str) -> bool:
        return suite.endswith("-security") or suite.endswith("/updates")

    security = next((s.uri for s in debian if is_security(s.suite)), None)
    archive = mirror.rstrip("/") if mirror else next(
        (s.uri for s in debian if not is_security(s.suite)), None)
    if archive is None:
        raise LabError("image.build: no Debian mirror in this machine's apt sources "
                       "(/etc/apt/sources.list, /etc/apt/sources.list.d): pass --mirror "
                       "http://<debian mirror>/debian")
    return DebianMirrors(archive, security)


def mmdebstrap_argv(mirrors: DebianMirrors, tarball: Path, suite: str = DEBIAN_SUITE) -> list[str]:
    """A minimal root file system (essential packages and apt) with what the images need."""
    return [MMDEBSTRAP, "--variant=minbase", "--include=" + ",".join(BASE_PACKAGES),
            *(f"--dpkgopt={opt}" for opt in BASE_DPKG_EXCLUDES),
            suite, str(tarball), *mirrors.sources(suite)]


def import_argv(engine: str, tarball: Path, version: str) -> list[str]:
    return [engine, "import", "--change", f"ENV PATH={BASE_PATH}",
            "--change", 'CMD ["/bin/bash"]', str(tarball), f"{BASE_IMAGE}:{version}"]


def tag_argv(engine: str, image: str, version: str) -> list[str]:
    return [engine, "tag", f"{image}:{version}", f"{image}:latest"]


def python_target_argv(engine: str, version: str) -> list[str]:
    return [engine, "run", "--rm", "--network", "none", f"{BASE_IMAGE}:{version}",
            "python3", "-c", PYTHON_TARGET_PROBE]


def project_wheel_argv(wheels: Path, source: Path) -> list[str]:
    """The project as a wheel (pure Python), built with this machine's pip from ``source``, a
    copy of the checkout's packaged files (setuptools would leave build/ and *.egg-info in the
    checkout, and package stale modules from an old build/)."""
    return [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(wheels),
            str(source)]


def dependency_wheels_argv(wheels: Path, project_wheel: Path, target: PythonTarget) -> list[str]:
    """The project's dependencies, as wheels for the image's python, with this machine's pip
    configuration (index, find-links, proxy, certificates)."""
    return [sys.executable, "-m", "pip", "download", "--dest", str(wheels), *target.pip_args(),
            str(project_wheel)]


def build_argv(engine: str, image: str, version: str, context: Path) -> list[str]:
    """Tagged with the project version (what the runtime deploys) and ``latest`` (what
    topology files name, e.g. ``rocelab-host:latest``), on the base built with it."""
    return [engine, "build", "-f", str(context / "Dockerfile"), "--target", IMAGES[image],
            "--build-arg", f"BASE={BASE_IMAGE}:{version}",
            "-t", f"{image}:{version}", "-t", f"{image}:latest", str(context)]


def build_images(engine: str = DOCKER, run: Runner = subprocess.run,
                 which: Callable[[str], str | None] = shutil.which,
                 sources: tuple[Path, ...] = APT_SOURCES, mirror: str | None = None,
                 say: Callable[[str], None] = lambda line: None) -> list[str]:
    """Build rocelab-base from Debian packages, then rocelab-switch and rocelab-host on it from
    the checkout. Tools, daemon and mirror are checked first, so anything missing is one clear
    line rather than a build log; the commands' own output goes to the terminal."""
    if which(engine) is None:
        raise LabError(f"image.build: '{engine}' not found (install it: apt-get install "
                       "docker.io, or podman; --engine chooses)")
    if which(MMDEBSTRAP) is None:
        raise LabError(f"image.build: '{MMDEBSTRAP}' not found: it builds the base image from "
                       f"Debian packages (install it: apt-get install {MMDEBSTRAP})")
    probe = run([engine, "info"], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if probe.returncode != 0:
        detail = _last_line(probe.stderr or probe.stdout) or f"exit {probe.returncode}"
        raise LabError(f"image.build: no {engine} daemon answers ('{engine} info': {detail}); "
                       "start it and retry")
    mirrors = debian_mirrors(read_apt_sources(sources), mirror)
    version = project_version()
    with tempfile.TemporaryDirectory(prefix="rocelab-image-") as tmp:
        context = Path(tmp)
        started = time.monotonic()
        say(f"{BASE_IMAGE}: Debian {DEBIAN_SUITE} from {mirrors.archive} (mmdebstrap)")
        tarball = context / "rootfs.tar"
        _must(run(mmdebstrap_argv(mirrors, tarball)), f"{MMDEBSTRAP} (the base root file system)")
        _must(run(import_argv(engine, tarball, version)), f"importing {BASE_IMAGE}")
        tarball.unlink(missing_ok=True)  # the image has it; free the space now
        _must(run(tag_argv(engine, BASE_IMAGE, version)), f"tagging {BASE_IMAGE}")
        say(f"{BASE_IMAGE}:{version}: {time.monotonic() - started:.0f} s")

        probe = run(python_target_argv(engine, version), capture_output=True, text=True,
                    timeout=COMMAND_TIMEOUT_S)
        words = probe.stdout.split() if probe.returncode == 0 else []
        if len(words) != 3:
            detail = _last_line(probe.stderr or probe.stdout) or f"exit {probe.returncode}"
            raise LabError(f"image.build: cannot read {BASE_IMAGE}'s python ({detail})")
        target = PythonTarget(*words)
        wheels = context / WHEELS
        say(f"wheels: the project and its dependencies for python {target.version} "
            f"({target.machine}, glibc {target.glibc}), with this machine's pip")
        source = context / "source"
        for name in PROJECT_FILES:
            if (PROJECT_ROOT / name).is_dir():
                shutil.copytree(PROJECT_ROOT / name, source / name,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                source.mkdir(exist_ok=True)
                shutil.copy2(PROJECT_ROOT / name, source / name)
        _must(run(project_wheel_argv(wheels, source), cwd=context),
              "building the project's wheel")
        project_wheel = next(wheels.glob("rocelab-*.whl"), None)
        if project_wheel is None:
            raise LabError(f"image.build: pip wheel left no rocelab wheel in {wheels}")
        _must(run(dependency_wheels_argv(wheels, project_wheel, target), cwd=context),
              "downloading the dependencies' wheels (pip's index unreachable?)")

        shutil.copy2(PROJECT_ROOT / DOCKERFILE, context / "Dockerfile")
        shutil.copy2(PROJECT_ROOT / SWITCH_ENTRYPOINT, context / "entrypoint.sh")
        built = [f"{BASE_IMAGE}:{version}"]
        for image in IMAGES:
            _must(run(build_argv(engine, image, version, context), cwd=context,
                      timeout=BUILD_TIMEOUT_S), f"building {image}")
            built.append(f"{image}:{version}")
        say(f"all images: {time.monotonic() - started:.0f} s")
    return built


def _must(proc: subprocess.CompletedProcess, what: str) -> None:
    if proc.returncode != 0:
        raise LabError(f"image.build: {what} failed (exit {proc.returncode}; its output is "
                       "above)")
