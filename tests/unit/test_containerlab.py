"""labs.runtimes.containerlab: command lines, parsing, rollback and SONiC-VS read-back, run
against a recording fake instead of containerlab and docker (no root, no engine needed).

The last tests deploy for real, and skip saying why when this machine cannot.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from labs import state as states
from labs import topology
from labs.runtimes import containerlab as clab
from labs.runtimes.containerlab import ContainerlabRuntime, NotApplicable
from labs.runtimes.netns import HOST_OFFLOADS_OFF, PROJECT_ROOT, LabError

DATA = Path(__file__).resolve().parent.parent / "data" / "containerlab"
VERSION = clab.project_version()
Answer = tuple[int, str, str]


class FakeRun:
    """Stands in for subprocess.run: records every command line, answers from rules.

    ``on(prefix, *answers)``: commands starting with ``prefix`` (``None`` matches any word)
    get the answers in order, the last one repeating; an answer is ``(returncode, stdout,
    stderr)`` or a callable taking the argv and returning one. Anything else succeeds
    silently.
    """

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.kwargs: list[dict] = []
        self.rules: list[tuple[list[str | None], list]] = []

    def on(self, prefix: list[str | None],
           *answers: Answer | Callable[[list[str]], Answer]) -> FakeRun:
        self.rules.append((prefix, list(answers)))
        return self

    def __call__(self, argv: list[str], **kwargs) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        self.kwargs.append(kwargs)
        for prefix, answers in self.rules:
            if len(argv) >= len(prefix) and all(
                    p is None or p == a for p, a in zip(prefix, argv)):
                answer = answers.pop(0) if len(answers) > 1 else answers[0]
                rc, out, err = answer(argv) if callable(answer) else answer
                return subprocess.CompletedProcess(argv, rc, out, err)
        return subprocess.CompletedProcess(argv, 0, "", "")

    def index(self, prefix: list[str]) -> int:
        """Position of the first call starting with prefix (ValueError when none)."""
        return next(i for i, c in enumerate(self.calls) if c[:len(prefix)] == prefix)

    def ran(self, prefix: list[str]) -> bool:
        return any(c[:len(prefix)] == prefix for c in self.calls)


def installed(name: str) -> str | None:
    return f"/usr/bin/{name}"


def runtime(run: FakeRun, which: Callable[[str], str | None] = installed,
            sleeps: list[float] | None = None) -> ContainerlabRuntime:
    return ContainerlabRuntime(run=run, which=which,
                               sleep=(sleeps if sleeps is not None else []).append)


def running_lab(topo: topology.Topology) -> str:
    """containerlab inspect output (newer form) with every node of topo running."""
    rows = [{"lab_name": topo.name, "name": clab.container_name(topo.name, n),
             "container_id": f"{i:012x}", "image": "x", "kind": "linux", "state": "running",
             "ipv4_address": f"172.20.20.{i + 2}", "ipv6_address": "N/A"}
            for i, n in enumerate(topo.nodes)]
    return json.dumps({topo.name: rows})


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    folder = tmp_path / "state"
    monkeypatch.setenv(states.STATE_ENV, str(folder))
    return folder


def ready_lab(run: FakeRun, topo: topology.Topology) -> FakeRun:
    """Rules under which a deploy of topo succeeds: inspect lists it, SONiC-VS is ready."""
    return (run.on([clab.CONTAINERLAB, "inspect"], (0, running_lab(topo), ""))
               .on(["docker", "exec", None, "redis-cli"], (0, "1\n", "")))


def labelled(*switches: str, value: str = "rocelab"):
    def edit(doc):
        for name in switches:
            doc["topology"]["nodes"][name]["labels"] = {clab.SWITCH_LABEL: value}
    return edit


# ---- command lines --------------------------------------------------------------------------

def test_command_lines():
    f = Path("/run/rocelab/lab/lab.clab.yml")
    assert clab.deploy_argv(f) == ["containerlab", "deploy", "-t", str(f)]
    assert clab.destroy_argv(f) == ["containerlab", "destroy", "-t", str(f), "--cleanup"]
    assert clab.inspect_argv(f) == ["containerlab", "inspect", "-t", str(f), "--format", "json"]
    assert clab.docker_exec_argv("clab-lab-h1", ["ip", "addr"]) == [
        "docker", "exec", "clab-lab-h1", "ip", "addr"]
    assert clab.docker_cp_argv(Path("/x/config_db.json"), "clab-lab-leaf1",
                               "/etc/sonic/config_db.json") == [
        "docker", "cp", "/x/config_db.json", "clab-lab-leaf1:/etc/sonic/config_db.json"]
    assert clab.sonic_ready_argv() == ["redis-cli", "-n", "0", "EXISTS",
                                       "PORT_TABLE:PortInitDone"]
    dump = clab.asic_dump_argv()
    assert dump[:5] == ["redis-cli", "-n", "1", "--raw", "EVAL"]
    assert dump[5] == clab.ASIC_DUMP_SCRIPT and dump[6] == "0"
    assert dump[7:] == ["ASIC_STATE:SAI_OBJECT_TYPE_PORT:*",
                        "ASIC_STATE:SAI_OBJECT_TYPE_BUFFER_PROFILE:*",
                        "ASIC_STATE:SAI_OBJECT_TYPE_WRED:*"]


def test_container_names_follow_the_prefix():
    assert clab.container_name("lab", "h1") == "clab-lab-h1"
    assert clab.container_name("lab", "h1", "ci") == "ci-lab-h1"
    assert clab.container_name("lab", "h1", "") == "h1"
    assert clab.container_name("lab", "h1", "__lab-name") == "lab-h1"


def test_project_version_is_the_pyproject_version():
    assert f'version = "{VERSION}"' in (PROJECT_ROOT / "pyproject.toml").read_text()


# ---- inspect --------------------------------------------------------------------------------

def test_parses_the_older_containers_form():
    records = clab.parse_inspect((DATA / "inspect-containers.json").read_text())
    assert [r.name for r in records] == ["clab-roce-v2-leafspine-h1",
                                         "clab-roce-v2-leafspine-leaf1",
                                         "clab-roce-v2-leafspine-spine1"]
    h1, leaf1, spine1 = records
    assert (h1.kind, h1.image, h1.state) == ("linux", "rocelab-host:latest", "running")
    assert (h1.ipv4, h1.ipv6) == ("172.20.20.6/24", "3fff:172:20:20::6/64")
    assert h1.container_id == "4f1c2a9b7d3e" and h1.lab == "roce-v2-leafspine"
    assert leaf1.kind == "sonic-vs"
    assert spine1.state == "exited" and spine1.ipv4 is None and spine1.ipv6 is None


def test_parses_the_newer_per_lab_form():
    records = clab.parse_inspect((DATA / "inspect-by-lab.json").read_text())
    assert [(r.name, r.kind, r.state, r.ipv4) for r in records] == [
        ("clab-roce-v2-leafspine-h1", "linux", "running", "172.20.20.6"),
        ("clab-roce-v2-leafspine-leaf1", "sonic-vs", "running", "172.20.20.3")]
    assert records[1].image == "docker-sonic-vs:latest"
    assert records[1].container_id == "9a0e6c1d2b4f"


def test_parses_a_bare_list_and_nothing():
    rows = json.loads((DATA / "inspect-containers.json").read_text())["containers"]
    assert len(clab.parse_inspect(json.dumps(rows))) == 3
    assert clab.parse_inspect("") == []
    assert clab.parse_inspect('{"containers": null}') == []
    with pytest.raises(ValueError, match="unexpected JSON"):
        clab.parse_inspect('{"lab": [1, 2]}')


def test_inspect_maps_containers_to_nodes(state_dir):
    state = states.LabState.new("roce-v2-leafspine", "x.clab.yml", "containerlab")
    state.namespaces = {n: clab.container_name(state.lab, n) for n in ("h1", "leaf1", "h9")}
    run = FakeRun().on(["containerlab", "inspect"],
                       (0, (DATA / "inspect-by-lab.json").read_text(), ""))
    records = runtime(run).inspect(state)
    assert sorted(records) == ["h1", "leaf1"]  # spine1 is not ours, h9 not deployed
    assert run.calls == [clab.inspect_argv(clab.deploy_file(state))]


# ---- refusing early -------------------------------------------------------------------------

def test_missing_containerlab_is_one_line_and_runs_nothing(state_dir):
    run = FakeRun()
    which = {"docker": "/usr/bin/docker"}.get
    topo = topology.load("roce-v2-leafspine")
    with pytest.raises(LabError) as e:
        runtime(run, which).up(topo)
    assert str(e.value) == (
        "containerlab runtime: 'containerlab' not found (install it from containerlab.dev); "
        "the default netns runtime needs no container engine: invoke lab.up roce-v2-leafspine")
    assert run.calls == []
    assert not state_dir.exists()


def test_missing_docker_daemon_is_one_line(state_dir):
    run = FakeRun().on(["docker", "info"], (1, "", "Cannot connect to the Docker daemon at "
                                                   "unix:///var/run/docker.sock. Is the docker "
                                                   "daemon running?\n"))
    with pytest.raises(LabError) as e:
        runtime(run).up(topology.load("roce-v2-leafspine"))
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("containerlab runtime: no docker daemon answers ('docker info': "
                              "Cannot connect to the Docker daemon")
    assert message.endswith("invoke lab.up roce-v2-leafspine")
    assert run.calls == [["docker", "info"]]
    assert not state_dir.exists()


def test_missing_docker_client(state_dir):
    which = {"containerlab": "/usr/bin/containerlab"}.get
    with pytest.raises(LabError, match="'docker' not found"):
        runtime(FakeRun(), which).up(topology.load("roce-v2-leafspine"))


def test_a_lab_from_a_path_is_named_by_its_path(lab_copy, state_dir):
    path = lab_copy()
    with pytest.raises(LabError, match=f"invoke lab.up {path}$"):
        runtime(FakeRun(), {}.get).up(topology.load(path))


def test_unbuilt_rocelab_image_is_refused_before_anything(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = FakeRun().on(["docker", "image", "inspect"], (1, "", "Error: No such image"))
    with pytest.raises(LabError, match="image rocelab-host:latest is not built here: "
                                       "invoke image.build"):
        runtime(run).up(topo)
    assert not run.ran(["containerlab"])
    assert states.load(topo.name) is None


def test_bad_switch_label_is_refused_before_anything(lab_copy, state_dir):
    topo = topology.load(lab_copy(edit=labelled("leaf1", value="cumulus")))
    run = FakeRun()
    with pytest.raises(LabError, match="node leaf1: label rocelab.switch: 'cumulus'"):
        runtime(run).up(topo)
    assert run.calls == []


# ---- up, down, exec -------------------------------------------------------------------------

def test_up_deploys_then_prepares_hosts_and_configures_sonic(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = ready_lab(FakeRun(), topo)
    sleeps: list[float] = []
    state = runtime(run, sleeps=sleeps).up(topo)

    file = clab.deploy_file(state)
    assert run.calls[0] == ["docker", "info"]
    assert ["docker", "image", "inspect", "rocelab-host:latest"] in run.calls
    deploy = run.index(clab.deploy_argv(file))
    assert run.kwargs[deploy]["env"]["CLAB_VERSION_CHECK"] == "disable"
    assert run.index(clab.inspect_argv(file)) == deploy + 1

    h3 = clab.container_name(topo.name, "h3")
    host_calls = [c for c in run.calls if c[:3] == ["docker", "exec", h3]]
    assert host_calls == [["docker", "exec", h3, "ethtool", "-K", "eth1", *HOST_OFFLOADS_OFF],
                          ["docker", "exec", h3, "ip", "addr", "add", "10.1.2.13/24", "dev",
                           "eth1"],
                          ["docker", "exec", h3, "ip", "route", "replace", "default", "via",
                           "10.1.2.1"]]

    leaf1 = clab.container_name(topo.name, "leaf1")
    leaf_calls = [c for c in run.calls if any(word.startswith(leaf1) for word in c)]
    config = topo.nodes["leaf1"].config_path
    assert leaf_calls == [clab.docker_exec_argv(leaf1, clab.sonic_ready_argv()),
                          clab.docker_cp_argv(config, leaf1, "/etc/sonic/config_db.json"),
                          clab.docker_exec_argv(leaf1, ["config", "reload", "-y"]),
                          clab.docker_exec_argv(leaf1, clab.sonic_ready_argv())]
    assert sleeps == []  # ready at the first look

    assert state.runtime == "containerlab" and state.status == "up" and state.agents == {}
    assert state.namespaces["h1"] == f"clab-{topo.name}-h1"
    assert states.load(topo.name).status == "up"
    assert not run.ran(["containerlab", "destroy"])


def test_deploy_file_is_containerlab_valid_and_left_for_us(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    state = runtime(ready_lab(FakeRun(), topo)).up(topo)
    text = clab.deploy_file(state).read_text()
    assert text.startswith(f"# derived by rocelab from {topo.path.resolve()}")
    doc = yaml.safe_load(text)
    assert doc["name"] == topo.name
    for name, spec in doc["topology"]["nodes"].items():
        assert set(spec) <= topology.NODE_KEYS, name
        assert "exec" not in spec  # run and checked by the runtime, not logged by containerlab
        assert "startup-config" not in spec
    for kind in doc["topology"]["kinds"].values():
        assert not set(kind) & set(clab.NODE_RESOLVED_KEYS)
    assert "binds" not in doc["topology"]["nodes"]["leaf1"]  # pushed once SONiC-VS is ready
    assert doc["topology"]["links"] == yaml.safe_load(topo.path.read_text())["topology"]["links"]


def test_deploy_document_for_the_project_switch(lab_copy, tmp_path):
    topo = topology.load(lab_copy(edit=labelled("leaf1")))
    doc = clab.deploy_document(topo, clab.read_document(topo), "9.9",
                               {"leaf1": tmp_path / "agent"})
    leaf1 = doc["topology"]["nodes"]["leaf1"]
    assert leaf1["kind"] == "linux"  # containerlab's sonic-vs kind would start supervisord
    assert leaf1["image"] == "rocelab-switch:9.9"
    assert leaf1["env"] == {"ROCELAB_PORTS": "eth1,eth2,eth3,eth4", "ROCELAB_TIME_SCALE": "3000"}
    assert leaf1["labels"] == {"rocelab.switch": "rocelab"}
    assert leaf1["binds"] == [f"{topo.nodes['leaf1'].config_path}:/etc/sonic/config_db.json:ro",
                              f"{tmp_path / 'agent'}:/run/rocelab"]
    assert doc["topology"]["nodes"]["spine1"]["kind"] == "sonic-vs"


def test_deploy_document_passes_an_enqueue_marking_point(lab_copy, tmp_path):
    def edit(doc):
        labelled("leaf1")(doc)
        doc["topology"]["nodes"]["leaf1"]["labels"]["rocelab.ecn-marking"] = "enqueue"
    topo = topology.load(lab_copy(edit=edit))
    doc = clab.deploy_document(topo, clab.read_document(topo), "9.9",
                               {"leaf1": tmp_path / "agent"})
    assert doc["topology"]["nodes"]["leaf1"]["env"]["ROCELAB_ECN_MARKING"] == "enqueue"


def test_absolute_binds_for_a_file_that_lives_elsewhere(lab_copy, tmp_path):
    def edit(doc):
        doc["topology"]["nodes"]["h1"]["binds"] = ["notes.txt:/root/notes.txt:ro"]
    path = lab_copy(edit=edit)
    (path.parent / "notes.txt").write_text("hello\n")
    topo = topology.load(path)
    doc = clab.deploy_document(topo, clab.read_document(topo), "1", {})
    assert doc["topology"]["nodes"]["h1"]["binds"] == [
        f"{(path.parent / 'notes.txt').resolve()}:/root/notes.txt:ro"]


def test_up_with_the_project_switch_waits_for_its_agent(lab_copy, state_dir):
    topo = topology.load(lab_copy(edit=labelled("leaf1")))
    agents: list[FakeAgent] = []

    def deploy(argv):  # containerlab starts the container, whose agent opens its socket
        agents.append(FakeAgent(state_dir / topo.name / "leaf1" / "agent.sock"))
        return 0, "", ""

    run = ready_lab(FakeRun(), topo).on(["containerlab", "deploy"], deploy).on(
        ["docker", "inspect", "--format"], (0, "4242\n", ""))
    try:
        state = runtime(run).up(topo)
    finally:
        for agent in agents:
            agent.close()
    leaf1 = clab.container_name(topo.name, "leaf1")
    assert ["docker", "image", "inspect", f"rocelab-switch:{VERSION}"] in run.calls
    assert not any(leaf1 in c and "redis-cli" in c for c in run.calls)  # no SONiC there
    agent = state.agents["leaf1"]
    assert agent.pid == 4242 and agent.namespace == leaf1
    assert agent.control == str(state_dir / topo.name / "leaf1" / "agent.sock")
    assert agent.log == str(state_dir / topo.name / "leaf1" / "agent.log")
    assert sorted(state.agents) == ["leaf1"]
    doc = yaml.safe_load(clab.deploy_file(state).read_text())
    assert f"{state_dir / topo.name / 'leaf1'}:/run/rocelab" in doc["topology"]["nodes"][
        "leaf1"]["binds"]


class FakeAgent:
    """Answers every request on a unix socket with ok, as fabric.agent's control socket does."""

    def __init__(self, path: Path) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.makefile("rb").readline()
                conn.sendall(b'{"ok": true}\n')

    def close(self) -> None:
        self.server.close()


def test_agent_that_never_answers_fails_the_step_and_rolls_back(lab_copy, state_dir):
    topo = topology.load(lab_copy(edit=labelled("leaf1")))

    def deploy(argv):
        (state_dir / topo.name / "leaf1" / "agent.log").write_text(
            "leaf1: cannot open eth3: No such device\n")
        return 0, "", ""

    sleeps: list[float] = []
    run = ready_lab(FakeRun(), topo).on(["containerlab", "deploy"], deploy)
    with pytest.raises(LabError, match="step 'configure leaf1' failed: agent leaf1 did not "
                                       "answer within 60 s: leaf1: cannot open eth3"):
        runtime(run, sleeps=sleeps).up(topo)
    assert len(sleeps) == clab.AGENT_ATTEMPTS
    assert run.ran(["containerlab", "destroy"])


def test_failed_deploy_destroys_and_names_the_step(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = FakeRun().on(["containerlab", "deploy"],
                       (1, "", "INFO deploying\nError: failed to create node h2: boom\n"))
    with pytest.raises(LabError) as e:
        runtime(run).up(topo)
    assert str(e.value) == ("step 'deploy' failed: containerlab deploy: exit 1: Error: failed "
                            "to create node h2: boom")
    file = state_dir / topo.name / f"{topo.name}.clab.yml"
    assert run.calls[-1] == clab.destroy_argv(file)
    assert run.index(clab.destroy_argv(file)) > run.index(clab.deploy_argv(file))
    assert states.load(topo.name) is None and not (state_dir / topo.name).exists()


def test_failed_host_command_destroys_the_lab(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    h3 = clab.container_name(topo.name, "h3")
    run = ready_lab(FakeRun(), topo).on(
        ["docker", "exec", h3, "ip", "route"], (2, "", "Error: Nexthop has invalid gateway.\n"))
    with pytest.raises(LabError, match=r"step 'exec on h3' failed: h3: 'ip route replace "
                                       r"default via 10.1.2.1': exit 2: Error: Nexthop"):
        runtime(run).up(topo)
    assert run.ran(["containerlab", "destroy"])
    assert not run.ran(["docker", "cp"])  # stopped at the failing step
    assert states.load(topo.name) is None


def test_container_not_running_after_deploy_fails_inspect(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    rows = json.loads(running_lab(topo))
    rows[topo.name][0]["state"] = "exited"
    rows[topo.name].pop()
    run = FakeRun().on(["containerlab", "inspect"], (0, json.dumps(rows), ""))
    first, last = list(topo.nodes)[0], list(topo.nodes)[-1]
    with pytest.raises(LabError, match=f"step 'inspect' failed: not running: {last}, "
                                       f"{first} \\(exited\\)"):
        runtime(run).up(topo)
    assert run.ran(["containerlab", "destroy"])


def test_failed_rollback_says_so_and_keeps_the_state(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = (FakeRun().on(["containerlab", "deploy"], (1, "", "Error: deploy broke"))
                    .on(["containerlab", "destroy"], (1, "", "Error: destroy broke")))
    with pytest.raises(LabError, match="step 'deploy' failed: .*deploy broke; rollback failed "
                                       "too: containerlab destroy: exit 1: Error: destroy broke"):
        runtime(run).up(topo)
    assert states.load(topo.name) is not None  # lab.cleanup can try again


def test_down_destroys_and_is_idempotent(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    rt = runtime(ready_lab(FakeRun(), topo))
    state = rt.up(topo)
    run = FakeRun()
    rt = runtime(run)
    rt.down(state)
    assert run.calls == [clab.destroy_argv(clab.deploy_file(state))]
    assert states.load(topo.name) is None
    rt.down(state)  # nothing left: nothing run
    assert len(run.calls) == 1


def test_exec_runs_in_the_container(state_dir):
    state = states.LabState.new("lab", "x", "containerlab")
    state.namespaces = {"h1": "clab-lab-h1"}
    run = FakeRun().on(["docker", "exec"], (0, "64 bytes from 10.1.1.12\n", ""))
    proc = runtime(run).exec(state, "h1", ["ping", "-c1", "10.1.1.12"], timeout=5)
    assert proc.stdout.startswith("64 bytes")
    assert run.calls == [["docker", "exec", "clab-lab-h1", "ping", "-c1", "10.1.1.12"]]
    assert run.kwargs[0]["timeout"] == 5
    with pytest.raises(LabError, match="lab lab has no node 'h9'"):
        runtime(run).exec(state, "h9", ["true"])


def test_lab_api_knows_the_runtime():
    from labs import lab
    assert isinstance(lab.runtime_for("containerlab"), ContainerlabRuntime)
    with pytest.raises(LabError, match="available: netns, containerlab"):
        lab.runtime_for("kubernetes")


# ---- SONiC-VS -------------------------------------------------------------------------------

def test_redis_integer_reads_pipe_and_terminal_forms():
    assert clab.redis_integer("1\n") == 1
    assert clab.redis_integer("(integer) 0\n") == 0
    assert clab.redis_integer("") is None
    assert clab.redis_integer("Could not connect to Redis at 127.0.0.1:6379") is None


def test_readiness_wait_polls_until_port_init_done():
    run = FakeRun().on(["docker", "exec"],
                       (1, "", "Could not connect to Redis at 127.0.0.1:6379: Connection "
                               "refused\n"),
                       (0, "0\n", ""), (0, "1\n", ""))
    sleeps: list[float] = []
    runtime(run, sleeps=sleeps).wait_sonic_ready("clab-lab-leaf1", "leaf1")
    assert run.calls == [clab.docker_exec_argv("clab-lab-leaf1", clab.sonic_ready_argv())] * 3
    assert sleeps == [clab.SONIC_POLL_S] * 2


def test_readiness_wait_is_bounded():
    run = FakeRun().on(["docker", "exec"], (0, "0\n", ""))
    sleeps: list[float] = []
    with pytest.raises(LabError, match=r"leaf1: SONiC-VS not ready after 300 s "
                                       r"\(PORT_TABLE:PortInitDone never appeared"):
        runtime(run, sleeps=sleeps).wait_sonic_ready("clab-lab-leaf1", "leaf1")
    assert len(run.calls) == clab.SONIC_READY_ATTEMPTS
    assert len(sleeps) == clab.SONIC_READY_ATTEMPTS - 1
    assert sum(sleeps) < clab.SONIC_READY_TIMEOUT_S


def test_sonic_not_ready_rolls_back(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = FakeRun().on(["containerlab", "inspect"], (0, running_lab(topo), "")).on(
        ["docker", "exec", clab.container_name(topo.name, "spine1"), "redis-cli"],
        (1, "", "Error response from daemon: container is not running"))
    with pytest.raises(LabError, match="step 'configure spine1' failed: spine1: SONiC-VS not "
                                       "ready .* last answer: Error response from daemon"):
        runtime(run).up(topo)
    assert run.ran(["containerlab", "destroy"])


def summary(asic_text: str | None = None) -> clab.SonicSummary:
    config_db = json.loads((DATA / "sonic-config-db.json").read_text())
    asic = clab.parse_asic_dump(asic_text or (DATA / "sonic-asic-dump.txt").read_text())
    return clab.summarize("leaf1", config_db, asic)


def test_summary_from_recorded_databases():
    s = summary()
    ports = {"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"}
    assert s.config_pfc == {p: frozenset({3}) for p in ports}
    assert s.asic_pfc == {p: frozenset({3}) for p in ports}  # mask 8, matched on lanes
    assert clab.AsicBufferProfile(
        size=18432, threshold_mode="SAI_BUFFER_PROFILE_THRESHOLD_MODE_DYNAMIC", dynamic_th=0,
        xon=18432, xoff=48128) in s.buffer_profiles
    assert len(s.buffer_profiles) == 4
    assert s.wred_profiles == (clab.AsicWred(True, 150000, 1500000, 100,
                                             "SAI_ECN_MARK_MODE_ALL"),)
    assert s.config_db["FEATURE"]["swss"]["state"] == "enabled"


def test_recorded_sonic_agrees_with_the_intended_config():
    intended = topology.load("roce-v2-leafspine").nodes["leaf1"].config
    assert clab.mismatches(intended, summary()) == []


def test_mismatches_name_the_port_and_the_database():
    asic = json.loads((DATA / "sonic-asic-dump.txt").read_text())
    for fields in asic.values():
        if fields.get("SAI_PORT_ATTR_HW_LANE_LIST") == "4:33,34,35,36":  # Ethernet8
            fields["SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL"] = "24"
        if "SAI_WRED_ATTR_ECN_MARK_MODE" in fields:
            fields["SAI_WRED_ATTR_ECN_MARK_MODE"] = "SAI_ECN_MARK_MODE_NONE"
        if fields.get("SAI_BUFFER_PROFILE_ATTR_XOFF_TH") == "48128":
            fields["SAI_BUFFER_PROFILE_ATTR_XOFF_TH"] = "40960"
    intended = topology.load("roce-v2-leafspine").nodes["leaf1"].config
    assert clab.mismatches(intended, summary(json.dumps(asic))) == [
        "leaf1: Ethernet8: pfc_enable [3] but ASIC_DB has [3, 4]",
        "leaf1: BUFFER_PROFILE|pg_lossless_100000_40m_profile: no ASIC buffer profile with "
        "size 18432, xon 18432, xoff 48128",
        "leaf1: WRED_PROFILE|AZURE_LOSSLESS: no ASIC WRED profile with green 150000..1500000 "
        "bytes, 100 %, SAI_ECN_MARK_MODE_ALL"]


def test_sonic_summary_reads_both_databases(state_dir):
    state = states.LabState.new("lab", "x", "containerlab")
    state.namespaces = {"leaf1": "clab-lab-leaf1"}
    run = (FakeRun().on(["docker", "exec", "clab-lab-leaf1", "sonic-cfggen"],
                        (0, (DATA / "sonic-config-db.json").read_text(), ""))
                    .on(["docker", "exec", "clab-lab-leaf1", "redis-cli"],
                        (0, (DATA / "sonic-asic-dump.txt").read_text(), "")))
    s = runtime(run).sonic_summary(state, "leaf1")
    assert run.calls == [
        ["docker", "exec", "clab-lab-leaf1", "sonic-cfggen", "-d", "--print-data"],
        clab.docker_exec_argv("clab-lab-leaf1", clab.asic_dump_argv())]
    assert s == summary()


def test_asic_dump_must_be_an_object_of_hashes():
    assert clab.parse_asic_dump("\n") == {}
    with pytest.raises(ValueError, match="object of hashes"):
        clab.parse_asic_dump('["ASIC_STATE"]')


def test_data_plane_checks_are_not_applicable_on_sonic_vs(lab_copy):
    topo = topology.load("roce-v2-leafspine")
    result = clab.data_plane_check("pfc_xoff", topo, "containerlab")
    assert isinstance(result, NotApplicable)
    assert result.nodes == ("spine1", "spine2", "leaf1", "leaf2")
    assert result.reason == ("not applicable on SONiC-VS: it programs QoS into ASIC_DB but has "
                             "no PFC/ECN/queueing data plane")
    assert str(result).startswith("pfc_xoff: spine1, spine2, leaf1, leaf2: not applicable on")
    assert clab.data_plane_check("pfc_xoff", topo, "netns") is None
    every = topology.load(lab_copy(edit=labelled("spine1", "spine2", "leaf1", "leaf2")))
    assert clab.data_plane_check("pfc_xoff", every, "containerlab") is None
    mixed = topology.load(lab_copy(edit=labelled("leaf1", "leaf2")))
    assert clab.data_plane_check("ecn", mixed, "containerlab").nodes == ("spine1", "spine2")


# ---- images ---------------------------------------------------------------------------------

APT = DATA / "apt"
APT_SOURCES = (APT / "sources.list", APT / "sources.list.d")
MIRRORS = clab.DebianMirrors("http://mirror.example.org/debian",
                             "http://security.example.org/debian-security")


def test_the_base_image_comes_from_this_machines_debian_mirror():
    sources = clab.read_apt_sources(APT_SOURCES)
    # deb lines only (no deb-src), every URI x suite of deb822, the disabled entry and the
    # .disabled file left out, [options] dropped.
    assert [(s.uri, s.suite) for s in sources] == [
        ("http://mirror.example.org/debian", "bookworm"),
        ("http://mirror.example.org/debian", "bookworm-updates"),
        ("http://security.example.org/debian-security", "bookworm-security"),
        ("https://apt.vendor.example/apt", "cloud-sdk-bookworm")]
    assert clab.debian_mirrors(sources) == MIRRORS
    assert clab.debian_mirrors(sources, "http://other.example/debian/").archive == \
        "http://other.example/debian"
    one_line = clab._one_line_sources(
        "deb [signed-by=/k.gpg] http://m.example/debian/ trixie main  # comment\n"
        "deb http://m.example/debian-security trixie-security main\n")
    assert clab.debian_mirrors(one_line) == clab.DebianMirrors(
        "http://m.example/debian", "http://m.example/debian-security")
    with pytest.raises(LabError, match=r"^image.build: no Debian mirror in this machine's apt "
                                       r"sources .*: pass --mirror"):
        clab.debian_mirrors(clab.read_apt_sources((APT / "sources.list.d" / "vendor.list",)))


def test_image_command_lines(tmp_path):
    tarball = tmp_path / "rootfs.tar"
    assert clab.mmdebstrap_argv(MIRRORS, tarball) == [
        "mmdebstrap", "--variant=minbase",
        "--include=python3,python3-venv,iproute2,ethtool,tcpdump,iperf3,iputils-ping,procps,"
        "ca-certificates",
        "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-include=/usr/share/doc/*/copyright",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        "bookworm", str(tarball),
        "deb http://mirror.example.org/debian bookworm main",
        "deb http://mirror.example.org/debian bookworm-updates main",
        "deb http://security.example.org/debian-security bookworm-security main"]
    assert clab.DebianMirrors("http://m/debian", None).sources() == [
        "deb http://m/debian bookworm main", "deb http://m/debian bookworm-updates main"]
    assert clab.import_argv("docker", tarball, "0.1.0") == [
        "docker", "import",
        "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change", 'CMD ["/bin/bash"]', str(tarball), "rocelab-base:0.1.0"]
    assert clab.tag_argv("podman", "rocelab-base", "0.1.0") == [
        "podman", "tag", "rocelab-base:0.1.0", "rocelab-base:latest"]
    assert clab.python_target_argv("docker", "0.1.0")[:6] == [
        "docker", "run", "--rm", "--network", "none", "rocelab-base:0.1.0"]
    assert clab.project_wheel_argv(tmp_path / "wheels", tmp_path / "source")[1:] == [
        "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path / "wheels"),
        str(tmp_path / "source")]
    assert clab.build_argv("docker", "rocelab-switch", "0.1.0", tmp_path) == [
        "docker", "build", "-f", str(tmp_path / "Dockerfile"), "--target", "switch",
        "--build-arg", "BASE=rocelab-base:0.1.0",
        "-t", "rocelab-switch:0.1.0", "-t", "rocelab-switch:latest", str(tmp_path)]
    target = clab.PythonTarget("3.11", "2.36", "x86_64")
    args = target.pip_args()
    assert args[:8] == ["--only-binary=:all:", "--python-version", "3.11",
                        "--implementation", "cp", "--abi", "cp311", "--platform"]
    platforms = args[8::2]
    assert platforms[0] == "manylinux_2_36_x86_64" and "manylinux_2_5_x86_64" in platforms
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(platforms)
    wheel = tmp_path / "wheels" / "rocelab-0.1.0-py3-none-any.whl"
    download = clab.dependency_wheels_argv(tmp_path / "wheels", wheel, target)
    assert download[1:5] == ["-m", "pip", "download", "--dest"] and download[-1] == str(wheel)


def image_build_run(python: Answer = (0, "3.11 2.36 x86_64\n", "")) -> FakeRun:
    """docker and pip as image.build meets them: pip wheel leaves the project's wheel."""
    def wheel(argv: list[str]) -> Answer:
        wheels = Path(argv[argv.index("--wheel-dir") + 1])
        wheels.mkdir(parents=True)
        (wheels / "rocelab-0.1.0-py3-none-any.whl").write_bytes(b"")
        return 0, "", ""
    return (FakeRun().on(["docker", "run"], python)
            .on([None, "-m", "pip", "wheel"], wheel))


def test_build_images_builds_the_base_then_both_on_it():
    run, said = image_build_run(), []
    assert clab.build_images("docker", run, installed, APT_SOURCES, say=said.append) == [
        f"rocelab-base:{VERSION}", f"rocelab-switch:{VERSION}", f"rocelab-host:{VERSION}"]
    context = Path(run.calls[-1][-1])
    tarball = context / "rootfs.tar"
    target = clab.PythonTarget("3.11", "2.36", "x86_64")
    wheel = context / "wheels" / "rocelab-0.1.0-py3-none-any.whl"
    assert run.calls == [["docker", "info"],
                         clab.mmdebstrap_argv(MIRRORS, tarball),
                         clab.import_argv("docker", tarball, VERSION),
                         clab.tag_argv("docker", "rocelab-base", VERSION),
                         clab.python_target_argv("docker", VERSION),
                         clab.project_wheel_argv(context / "wheels", context / "source"),
                         clab.dependency_wheels_argv(context / "wheels", wheel, target),
                         clab.build_argv("docker", "rocelab-switch", VERSION, context),
                         clab.build_argv("docker", "rocelab-host", VERSION, context)]
    assert all("shell" not in kwargs for kwargs in run.kwargs)
    assert run.kwargs[-1]["cwd"] == context
    assert not context.exists()  # the temporary build context is gone
    assert said[0] == ("rocelab-base: Debian bookworm from http://mirror.example.org/debian "
                       "(mmdebstrap)")


def test_build_without_a_tool_or_daemon_is_one_line():
    run = FakeRun().on(["docker", "info"], (1, "", "Cannot connect to the Docker daemon at "
                                                   "unix:///var/run/docker.sock.\n"))
    with pytest.raises(LabError, match=r"^image.build: no docker daemon answers \('docker "
                                       r"info': Cannot connect.*\); start it and retry$"):
        clab.build_images("docker", run, installed, APT_SOURCES)
    assert len(run.calls) == 1
    with pytest.raises(LabError, match=r"'podman' not found \(install it: apt-get install "
                                       r"docker.io, or podman"):
        clab.build_images("podman", FakeRun(), {}.get)
    no_mmdebstrap = FakeRun()
    with pytest.raises(LabError, match=r"^image.build: 'mmdebstrap' not found: .*"
                                       r"\(install it: apt-get install mmdebstrap\)$"):
        clab.build_images("docker", no_mmdebstrap, lambda name: None if name == "mmdebstrap"
                          else installed(name), APT_SOURCES)
    assert no_mmdebstrap.calls == []
    no_mirror = FakeRun()
    with pytest.raises(LabError, match="no Debian mirror"):
        clab.build_images("docker", no_mirror, installed, ())
    assert no_mirror.calls == [["docker", "info"]]


def test_failed_step_names_it():
    run = image_build_run().on(["docker", "build"], (1, "", ""))
    with pytest.raises(LabError, match=r"^image.build: building rocelab-switch failed \(exit 1"):
        clab.build_images("docker", run, installed, APT_SOURCES)
    run = FakeRun().on(["mmdebstrap"], (2, "", ""))
    with pytest.raises(LabError, match=r"^image.build: mmdebstrap \(the base root file system\) "
                                       r"failed \(exit 2"):
        clab.build_images("docker", run, installed, APT_SOURCES)
    assert run.calls[-1][0] == "mmdebstrap"
    run = image_build_run(python=(125, "", "Unable to find image"))
    with pytest.raises(LabError, match=r"cannot read rocelab-base's python \(Unable to find"):
        clab.build_images("docker", run, installed, APT_SOURCES)


def test_dockerfile_builds_every_image_on_the_debian_base():
    """What docker would check at build time, checked here without a daemon: no stage comes
    from a registry, and every COPY source is in the context build_images prepares."""
    text = (PROJECT_ROOT / clab.DOCKERFILE).read_text()
    for stage in clab.IMAGES.values():
        assert f" AS {stage}\n" in text, stage
    assert "ARG BASE=rocelab-base:latest\n" in text
    stages = set()
    for line in text.splitlines():
        if line.startswith("FROM "):
            words = line.split()
            assert words[1] == "${BASE}" or words[1] in stages, line
            stages.add(words[3])
        if line.startswith("COPY ") and "--from=" not in line:
            assert line.split()[1] in (clab.WHEELS, "entrypoint.sh"), line
    assert "pip install --no-cache-dir --no-index --find-links /tmp/wheels rocelab" in text
    assert (PROJECT_ROOT / clab.SWITCH_ENTRYPOINT).is_file()
    pyproject = (PROJECT_ROOT / "pyproject.toml").read_text()
    include = re.search(r"^include = \[(.*)\]$", pyproject, re.M)
    for package in re.findall(r'"(\w+)\*"', include.group(1)):  # the wheel is built from a copy
        assert package in clab.PROJECT_FILES, package


def test_switch_entrypoint_starts_the_agent_on_the_found_ports():
    text = (PROJECT_ROOT / "images/switch/entrypoint.sh").read_text()
    assert text.startswith("#!/bin/sh")
    assert os.access(PROJECT_ROOT / "images/switch/entrypoint.sh", os.X_OK)
    assert ("exec python -m fabric.agent --config \"$CONFIG\" --name \"$NAME\" \\\n"
            "    --control \"$CONTROL_DIR/agent.sock\" --ports \"$ports\"") in text
    assert "CONFIG=${ROCELAB_CONFIG:-/etc/sonic/config_db.json}" in text
    assert clab.PORTS_ENV in text
    if shutil.which("sh"):
        assert subprocess.run(["sh", "-n", str(PROJECT_ROOT / "images/switch/entrypoint.sh")],
                              capture_output=True).returncode == 0


# ---- for real -------------------------------------------------------------------------------

def _cannot_deploy(*images: str) -> str | None:
    """Why this machine cannot run containerlab labs, or None."""
    if shutil.which("containerlab") is None:
        return "containerlab is not installed (containerlab.dev)"
    if shutil.which("docker") is None:
        return "no docker client"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return "no docker daemon answers (docker info failed)"
    if os.geteuid() != 0:
        return "containerlab needs root"
    for image in images:
        if subprocess.run(["docker", "image", "inspect", image],
                          capture_output=True).returncode != 0:
            return f"image {image} is not here (docker pull it, or invoke image.build)"
    return None


def test_end_to_end_sonic_vs(lab_copy, state_dir):
    reason = _cannot_deploy("docker-sonic-vs:latest", "rocelab-host:latest")
    if reason:
        pytest.skip(reason)
    from labs import lab
    handle = lab.up(str(lab_copy()), runtime="containerlab")
    try:
        rt = handle.runtime
        assert {r.state for r in rt.inspect(handle.state).values()} == {"running"}
        for switch in handle.topology.switches:
            got = rt.sonic_summary(handle.state, switch.name)
            assert clab.mismatches(switch.config, got) == []
        assert clab.data_plane_check("pfc", handle.topology, "containerlab") is not None
    finally:
        handle.down()
    assert states.load(handle.name) is None


def test_end_to_end_project_switch(lab_copy, state_dir):
    reason = _cannot_deploy(f"rocelab-switch:{VERSION}", "rocelab-host:latest")
    if reason:
        pytest.skip(reason)
    from labs import lab
    path = lab_copy(edit=labelled("spine1", "spine2", "leaf1", "leaf2"))
    handle = lab.up(str(path), runtime="containerlab")
    try:
        assert all(p.ok for p in handle.ping_all())
        nodes, _ = handle.status()
        assert all(n.agent_alive for n in nodes if n.kind == "sonic-vs")
    finally:
        handle.down()
