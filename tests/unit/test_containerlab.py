"""labs.runtimes.containerlab: command lines, parsing, image checks, SONiC-VS configuration and
readiness, rollback, run against a recording fake instead of containerlab and docker (no root,
no engine needed). Every deploy file is validated against containerlab's schema.

The last tests deploy for real, and skip saying why when this machine cannot.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from rocelab.labs import clabfile, sonic, topology
from rocelab.labs import state as states
from rocelab.labs.images import project_version
from rocelab.labs.runtimes import containerlab as clab
from rocelab.labs.runtimes.containerlab import ContainerlabRuntime, NotApplicable
from rocelab.labs.runtimes.netns import HOST_OFFLOADS_OFF
from rocelab.labs.errors import LabError
from rocelab.labs.sonic import LoadMode
from tests.fakes import Answer, FakeRun, installed
from tests.schemas import clab_problems

DATA = Path(__file__).resolve().parent.parent / "data" / "containerlab"
VERSION = project_version()
EXITED = "start.sh                         EXITED    Dec 01 03:04 PM\n"


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


def asic_db_for(config_db: dict) -> dict[str, dict[str, str]]:
    """An ASIC_DB that holds what config_db defines: the CPU port, a port per PORT entry (by
    its lanes), one object per buffer profile and per WRED profile."""
    objects: dict[str, dict[str, str]] = {f"{sonic.ASIC_PORT}oid:0x1": {}}
    for i, port in enumerate((config_db.get("PORT") or {}).values(), start=2):
        lanes = port["lanes"].split(",")
        objects[f"{sonic.ASIC_PORT}oid:0x{i:x}"] = {sonic.LANES: f"{len(lanes)}:{port['lanes']}"}
    for table, prefix in (("BUFFER_PROFILE", sonic.ASIC_BUFFER_PROFILE),
                          ("WRED_PROFILE", sonic.ASIC_WRED)):
        for i, _ in enumerate(config_db.get(table) or {}):
            objects[f"{prefix}oid:0x{i:x}"] = {}
    return objects


def ready_lab(run: FakeRun, topo: topology.Topology) -> FakeRun:
    """Rules under which a deploy of topo succeeds: inspect lists it, every SONiC-VS image
    binds its config, and each switch is ready at the first look (start.sh exited, both port
    flags, its config's objects in ASIC_DB)."""
    containers = {clab.container_name(topo.name, n.name): n for n in topo.switches}

    def asic(argv: list[str]) -> Answer:
        node = containers[argv[2]]
        return 0, json.dumps(asic_db_for(json.loads(node.config_path.read_text()))), ""

    return (run.on([clab.CONTAINERLAB, "inspect"], (0, running_lab(topo), ""))
               .on(["docker", "exec", None, "supervisorctl", "status"], (3, EXITED, ""))
               .on(["docker", "exec", None, "redis-cli", "-n", "0", "EXISTS"], (0, "2\n", ""))
               .on(["docker", "exec", None, "redis-cli", "-n", "1"], asic))


def sonic_calls(run: FakeRun, container: str) -> list[list[str]]:
    """What ran in or on one container, in order."""
    return [c for c in run.calls if any(word == container or word.startswith(f"{container}:")
                                        for word in c)]


def ready_argvs(container: str) -> list[list[str]]:
    """One readiness look that finds the switch ready."""
    return [clab.docker_exec_argv(container, sonic.status_argv()),
            clab.docker_exec_argv(container, sonic.port_flags_argv()),
            clab.docker_exec_argv(container, sonic.asic_dump_argv())]


def labelled(*switches: str, value: str = "rocelab"):
    def edit(doc):
        for name in switches:
            doc["topology"]["nodes"][name]["labels"] = {clabfile.SWITCH_LABEL: value}
    return edit


# ---- command lines --------------------------------------------------------------------------

def test_command_lines():
    f = Path("/run/rocelab/lab/lab.clab.yml")
    assert clab.deploy_argv(f) == ["containerlab", "deploy", "-t", str(f)]
    assert clab.destroy_argv(f) == ["containerlab", "destroy", "-t", str(f), "--cleanup"]
    assert clab.inspect_argv(f) == ["containerlab", "inspect", "-t", str(f), "--format", "json"]
    assert clab.docker_exec_argv("clab-lab-h1", ["ip", "addr"]) == [
        "docker", "exec", "clab-lab-h1", "ip", "addr"]
    assert clab.docker_exec_argv("clab-lab-leaf1", ["supervisord"], detach=True) == [
        "docker", "exec", "-d", "clab-lab-leaf1", "supervisord"]
    assert clab.docker_cp_argv(Path("/x/config_db.json"), "clab-lab-leaf1",
                               "/etc/sonic/config_db.json") == [
        "docker", "cp", "/x/config_db.json", "clab-lab-leaf1:/etc/sonic/config_db.json"]


def test_container_names_follow_the_prefix():
    assert clab.container_name("lab", "h1") == "clab-lab-h1"
    assert clab.container_name("lab", "h1", "ci") == "ci-lab-h1"
    assert clab.container_name("lab", "h1", "") == "h1"
    assert clab.container_name("lab", "h1", "__lab-name") == "lab-h1"


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
        ("clab-roce-v2-leafspine-h1", "linux", "running", "172.20.20.6/24"),
        ("clab-roce-v2-leafspine-leaf1", "sonic-vs", "running", "172.20.20.3/24")]
    assert records[0].ipv6 == "3fff:172:20:20::6/64"  # JSON keeps the prefix length
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
    assert run.calls[1:3] == [["docker", "image", "inspect", "docker-sonic-vs:latest"],
                              ["docker", "image", "inspect", "rocelab-host:latest"]]
    assert run.calls[3] == sonic.load_mode_argv("docker-sonic-vs:latest")  # once per image
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
    assert sonic_calls(run, leaf1) == [  # loaded by start.sh from the bind: wait, then BGP
        *ready_argvs(leaf1), clab.docker_exec_argv(leaf1, ["supervisorctl", "start", "bgpd"])]
    assert not any("config" in c and "reload" in c for c in run.calls)
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
    assert clab_problems(doc) == []
    for name, spec in doc["topology"]["nodes"].items():
        assert "exec" not in spec  # run and checked by the runtime, not logged by containerlab
        assert "startup-config" not in spec
    for kind in doc["topology"]["kinds"].values():
        assert not set(kind) & set(clabfile.NODE_RESOLVED_KEYS)
    config = topo.nodes["leaf1"].config_path  # where this image's start.sh copies it from:
    assert doc["topology"]["nodes"]["leaf1"]["binds"] == [f"{config}:/var/sonic/config_db.json:ro"]
    assert doc["topology"]["links"] == yaml.safe_load(topo.path.read_text())["topology"]["links"]


def test_deploy_document_for_the_project_switch(lab_copy, tmp_path):
    topo = topology.load(lab_copy(edit=labelled("leaf1")))
    modes = {n.name: LoadMode.BIND for n in topo.switches if n.name != "leaf1"}
    doc = clabfile.deploy_document(topo, clabfile.read_document(topo), "9.9",
                               {"leaf1": tmp_path / "agent"}, modes)
    assert clab_problems(doc) == []
    leaf1 = doc["topology"]["nodes"]["leaf1"]
    assert leaf1["kind"] == "linux"  # containerlab's sonic-vs kind would start supervisord
    assert leaf1["image"] == "rocelab-switch:9.9"
    assert leaf1["env"] == {"ROCELAB_PORTS": str(topo.nodes["leaf1"].ports),
                            "ROCELAB_TIME_SCALE": "3000"}
    assert leaf1["env"]["ROCELAB_PORTS"] == ("eth1=Ethernet0,eth2=Ethernet4,eth3=Ethernet8,"
                                             "eth4=Ethernet12")
    assert leaf1["labels"] == {"rocelab.switch": "rocelab"}
    assert leaf1["binds"] == [f"{topo.nodes['leaf1'].config_path}:/etc/sonic/config_db.json:ro",
                              f"{tmp_path / 'agent'}:/run/rocelab"]
    assert doc["topology"]["nodes"]["spine1"]["kind"] == "sonic-vs"


def test_deploy_document_passes_an_enqueue_marking_point(lab_copy, tmp_path):
    def edit(doc):
        labelled("leaf1")(doc)
        doc["topology"]["nodes"]["leaf1"]["labels"]["rocelab.ecn-marking"] = "enqueue"
    topo = topology.load(lab_copy(edit=edit))
    modes = {n.name: LoadMode.BIND for n in topo.switches if n.name != "leaf1"}
    doc = clabfile.deploy_document(topo, clabfile.read_document(topo), "9.9",
                                   {"leaf1": tmp_path / "agent"}, modes)
    assert doc["topology"]["nodes"]["leaf1"]["env"]["ROCELAB_ECN_MARKING"] == "enqueue"


def test_absolute_binds_for_a_file_that_lives_elsewhere(lab_copy, tmp_path):
    def edit(doc):
        doc["topology"]["nodes"]["h1"]["binds"] = ["notes.txt:/root/notes.txt:ro"]
    path = lab_copy(edit=edit)
    (path.parent / "notes.txt").write_text("hello\n")
    topo = topology.load(path)
    modes = {n.name: LoadMode.BIND for n in topo.switches}
    doc = clabfile.deploy_document(topo, clabfile.read_document(topo), "1", {}, modes)
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
    assert not run.ran(["docker", "exec", clab.container_name(topo.name, "spine1")])  # stopped
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
    from rocelab.labs.runtimes.registry import runtime_for
    assert isinstance(runtime_for("containerlab"), ContainerlabRuntime)
    with pytest.raises(LabError, match="available: netns, containerlab"):
        runtime_for("kubernetes")



# ---- SONiC-VS -------------------------------------------------------------------------------

def restart_lab(run: FakeRun, topo: topology.Topology) -> FakeRun:
    """ready_lab for an older SONiC-VS image: its start.sh does not read /var/sonic, and each
    switch's supervisord, once shut down, stops answering after one more look."""
    looked: set[str] = set()

    def pid(argv: list[str]) -> Answer:
        if argv[2] in looked:
            return 1, "", "unix:///var/run/supervisor.sock no such file\n"
        looked.add(argv[2])
        return 0, "17\n", ""

    return (ready_lab(run, topo)
            .on(["docker", "run"], (1, "", ""))
            .on(["docker", "exec", None, "supervisorctl", "pid"], pid))


def test_sonic_images_are_read_for_how_they_load_config(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = restart_lab(FakeRun(), topo)
    state = runtime(run).up(topo)
    doc = yaml.safe_load(clab.deploy_file(state).read_text())
    assert clab_problems(doc) == []
    assert all("binds" not in doc["topology"]["nodes"][s.name] for s in topo.switches)
    assert len([c for c in run.calls if c[:2] == ["docker", "run"]]) == 1  # one image, one look


def test_older_images_get_the_config_copied_in_and_supervisord_restarted(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run, sleeps = restart_lab(FakeRun(), topo), []
    runtime(run, sleeps=sleeps).up(topo)
    leaf1 = clab.container_name(topo.name, "leaf1")
    exec_ = lambda *argv: clab.docker_exec_argv(leaf1, list(argv))  # noqa: E731
    assert sonic_calls(run, leaf1) == [
        exec_("supervisorctl", "status", "start.sh"),  # the first start (default config) done
        clab.docker_cp_argv(topo.nodes["leaf1"].config_path, leaf1, "/etc/sonic/config_db.json"),
        exec_("supervisorctl", "shutdown"),
        exec_("supervisorctl", "pid"), exec_("supervisorctl", "pid"),  # until it is gone
        clab.docker_exec_argv(leaf1, ["supervisord"], detach=True),
        *ready_argvs(leaf1),  # start.sh ran again, on the copied file
        exec_("supervisorctl", "start", "bgpd")]
    assert not any("reload" in c for c in run.calls)
    assert sleeps.count(sonic.POLL_S) == len(topo.switches)  # one per supervisord stop


def test_readiness_waits_for_each_stage_in_turn(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    leaf1 = clab.container_name(topo.name, "leaf1")
    running = "start.sh                         RUNNING   pid 301, uptime 0:00:04\n"
    run = ready_lab(FakeRun(), topo)
    run.rules.insert(0, (["docker", "exec", leaf1, "supervisorctl", "status"],
                         [(1, "", "unix:///var/run/supervisor.sock no such file\n"),
                          (3, running, ""), (3, EXITED, "")]))
    run.rules.insert(0, (["docker", "exec", leaf1, "redis-cli", "-n", "0"],
                         [(0, "1\n", ""), (0, "2\n", "")]))
    run.rules.insert(0, (["docker", "exec", leaf1, "redis-cli", "-n", "1"],
                         [(0, "{}", ""), run.rules[-1][1][0]]))
    sleeps: list[float] = []
    runtime(run, sleeps=sleeps).up(topo)
    looks = [c[4:6] for c in sonic_calls(run, leaf1) if c[4:5] != ["start"]]
    assert looks == [["status", "start.sh"], ["status", "start.sh"],  # not up, then running
                     ["status", "start.sh"], ["-n", "0"],  # exited; one port flag of two
                     ["status", "start.sh"], ["-n", "0"], ["-n", "1"],  # ASIC_DB still empty
                     ["status", "start.sh"], ["-n", "0"], ["-n", "1"]]  # ready
    assert sleeps == [sonic.POLL_S] * 4


def test_readiness_wait_is_bounded_and_names_what_is_missing(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    spine1 = clab.container_name(topo.name, "spine1")
    run = ready_lab(FakeRun(), topo)
    run.rules.insert(0, (["docker", "exec", spine1, "redis-cli", "-n", "1"], [(0, "{}", "")]))
    sleeps: list[float] = []
    with pytest.raises(LabError, match=r"^step 'configure spine1' failed: spine1: SONiC-VS not "
                                       r"ready after 300 s: ASIC_DB has no port with Ethernet0's "
                                       r"lanes \[25, 26, 27, 28\]; .*ASIC_DB has no CPU port"):
        runtime(run, sleeps=sleeps).up(topo)
    attempts = int(sonic.READY_TIMEOUT_S / sonic.POLL_S)
    assert len([c for c in run.calls if c[2:4] == [spine1, "redis-cli"]
                and c[5] == "1"]) == attempts
    assert len(sleeps) == attempts - 1 and sum(sleeps) < sonic.READY_TIMEOUT_S
    assert run.ran(["containerlab", "destroy"])


def test_sonic_not_running_rolls_back(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = ready_lab(FakeRun(), topo)
    run.rules.insert(0, (["docker", "exec", clab.container_name(topo.name, "spine1")],
                         [(1, "", "Error response from daemon: container is not running\n")]))
    with pytest.raises(LabError, match="step 'configure spine1' failed: spine1: SONiC-VS not "
                                       "ready after 300 s: supervisorctl status lists no "
                                       r"start.sh \(Error response from daemon"):
        runtime(run).up(topo)
    assert run.ran(["containerlab", "destroy"])


def test_failed_bgp_start_fails_the_step(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = ready_lab(FakeRun(), topo).on(["docker", "exec", None, "supervisorctl", "start"],
                                        (7, "bgpd: ERROR (spawn error)\n", ""))
    with pytest.raises(LabError, match=r"configure spine1' failed: spine1: supervisorctl start "
                                       r"bgpd: exit 7: bgpd: ERROR \(spawn error\)"):
        runtime(run).up(topo)


def test_a_sonic_image_that_is_not_one_is_refused_before_anything(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = ready_lab(FakeRun(), topo).on(
        ["docker", "run"], (2, "", "grep: /usr/bin/start.sh: No such file or directory\n"))
    with pytest.raises(LabError, match="image docker-sonic-vs:latest: no readable "
                                       "/usr/bin/start.sh"):
        runtime(run).up(topo)
    assert not run.ran(["containerlab"]) and states.load(topo.name) is None


def test_every_missing_image_is_named_with_how_to_get_it(lab_copy, state_dir):
    topo = topology.load(lab_copy())
    run = FakeRun().on(["docker", "image", "inspect", "docker-sonic-vs:latest"],
                       (1, "", "Error: No such image: docker-sonic-vs:latest"))
    with pytest.raises(LabError) as e:
        runtime(run).up(topo)
    assert str(e.value).startswith(
        "containerlab runtime: image docker-sonic-vs:latest (nodes spine1, spine2, leaf1, "
        "leaf2) is not here: SONiC-VS is on no registry: download docker-sonic-vs.gz")
    assert "docker load -i docker-sonic-vs.gz" in str(e.value)
    assert not run.ran(["containerlab"]) and not run.ran(["docker", "run"])
    assert states.load(topo.name) is None


def test_a_node_without_image_is_refused(lab_copy, state_dir):
    def edit(doc):
        del doc["topology"]["kinds"]["linux"]["image"]
    topo = topology.load(lab_copy(edit=edit))
    with pytest.raises(LabError, match=r"topology.nodes.h1: no image \(set image on the node"):
        runtime(FakeRun()).up(topo)


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
        clab.docker_exec_argv("clab-lab-leaf1", sonic.asic_dump_argv())]
    intended = topology.load("roce-v2-leafspine").nodes["leaf1"].config
    assert s.node == "leaf1" and sonic.mismatches(intended, s) == []


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
            return f"image {image} is not here (docs/containerlab.md says how to obtain it)"
    return None


def test_end_to_end_sonic_vs(lab_copy, state_dir):
    reason = _cannot_deploy("docker-sonic-vs:latest", "rocelab-host:latest")
    if reason:
        pytest.skip(reason)
    from rocelab.labs import live
    handle = live.up(str(lab_copy()), runtime="containerlab")
    try:
        rt = handle.runtime
        assert {r.state for r in rt.inspect(handle.state).values()} == {"running"}
        for switch in handle.topology.switches:
            got = rt.sonic_summary(handle.state, switch.name)
            assert sonic.mismatches(switch.config, got) == []
        assert clab.data_plane_check("pfc", handle.topology, "containerlab") is not None
    finally:
        handle.down()
    assert states.load(handle.name) is None


def test_end_to_end_project_switch(lab_copy, state_dir):
    reason = _cannot_deploy(f"rocelab-switch:{VERSION}", "rocelab-host:latest")
    if reason:
        pytest.skip(reason)
    from rocelab.labs import live
    path = lab_copy(edit=labelled("spine1", "spine2", "leaf1", "leaf2"))
    handle = live.up(str(path), runtime="containerlab")
    try:
        assert all(p.ok for p in handle.ping_all())
        nodes, _ = handle.status()
        assert all(n.agent_alive for n in nodes if n.kind == "sonic-vs")
    finally:
        handle.down()
