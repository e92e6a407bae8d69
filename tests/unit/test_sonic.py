"""labs.sonic: SONiC-VS's command lines and the parsers of what it prints (readiness, load mode,
read-back), on recorded samples (tests/data/containerlab/README.md). No SONiC-VS runs here."""
from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from rocelab.labs import sonic, topology
from rocelab.labs.errors import LabError
from rocelab.labs.sonic import LoadMode

DATA = Path(__file__).resolve().parent.parent / "data" / "containerlab"


def config_db(lab: str = "roce-v2-leafspine", node: str = "leaf1") -> dict:
    """The lab's own config for node, as the readiness wait reads it."""
    topo = topology.load(lab)
    return json.loads(topo.nodes[node].config_path.read_text())


def asic() -> dict[str, dict[str, str]]:
    return sonic.parse_asic_dump((DATA / "sonic-asic-dump.txt").read_text())


# ---- which load the image supports ---------------------------------------------------------

def test_load_mode_is_read_from_the_images_start_script():
    assert sonic.load_mode_argv("docker-sonic-vs:202411") == [
        "docker", "run", "--rm", "--network", "none", "--entrypoint", "grep",
        "docker-sonic-vs:202411", "-q", "-F", "/var/sonic/config_db.json", "/usr/bin/start.sh"]
    assert sonic.load_mode("i", 0, "") is LoadMode.BIND
    assert sonic.load_mode("i", 1, "") is LoadMode.RESTART
    with pytest.raises(LabError, match=r"^image alpine: no readable /usr/bin/start.sh \(grep: "
                                       r"/usr/bin/start.sh: No such file or directory\): not a "
                                       r"docker-sonic-vs image$"):
        sonic.load_mode("alpine", 2, "grep: /usr/bin/start.sh: No such file or directory\n")
    with pytest.raises(LabError, match=r"cannot read its /usr/bin/start.sh \(docker run exit 125: "
                                       r"docker: Error response from daemon"):
        sonic.load_mode("x", 125, "docker: Error response from daemon: no such image\n")


# ---- supervisord -----------------------------------------------------------------------------

def test_program_state_from_supervisorctl_status():
    text = (DATA / "supervisorctl-status.txt").read_text()
    assert sonic.program_state(text) == "EXITED"
    assert sonic.program_state(text, "bgpd") == "RUNNING"
    assert sonic.program_state(text, "zebra") == "STOPPED"
    assert sonic.program_state(text, "teamd") is None
    assert sonic.program_state("unix:///var/run/supervisor.sock no such file\n") is None
    assert sonic.start_script_gap(text) is None
    running = "start.sh                         RUNNING   pid 301, uptime 0:00:04\n"
    assert sonic.start_script_gap(running) == "start.sh is RUNNING, not EXITED"
    assert sonic.start_script_gap("") == "supervisorctl status lists no start.sh (no output)"
    assert sonic.start_script_gap("unix:///var/run/supervisor.sock no such file\n") == (
        "supervisorctl status lists no start.sh (unix:///var/run/supervisor.sock no such file)")
    assert sonic.status_argv() == ["supervisorctl", "status", "start.sh"]
    assert sonic.start_bgp_argv() == ["supervisorctl", "start", "bgpd"]
    assert sonic.shutdown_argv() == ["supervisorctl", "shutdown"]
    assert sonic.supervisord_pid_argv() == ["supervisorctl", "pid"]


# ---- readiness -------------------------------------------------------------------------------

def test_both_port_flags_are_required():
    assert sonic.port_flags_argv() == ["redis-cli", "-n", "0", "EXISTS",
                                       "PORT_TABLE:PortConfigDone", "PORT_TABLE:PortInitDone"]
    assert sonic.port_flags_gap("2\n") is None
    assert sonic.port_flags_gap("(integer) 2\n") is None
    assert sonic.port_flags_gap("1\n") == ("APPL_DB lacks PORT_TABLE:PortConfigDone or "
                                           "PORT_TABLE:PortInitDone (EXISTS answered 1)")
    assert "answered Could not connect" in sonic.port_flags_gap(
        "Could not connect to Redis at 127.0.0.1:6379: Connection refused\n")


def test_recorded_asic_db_holds_everything_the_config_defines():
    wired = topology.load("roce-v2-leafspine").nodes["leaf1"].ports.ports.values()
    assert sonic.asic_gaps(config_db(), wired, asic()) == []


def test_asic_gaps_name_what_is_missing():
    dump = asic()
    for key, fields in list(dump.items()):
        if fields.get(sonic.LANES) == "4:33,34,35,36" or "SAI_WRED_ATTR_GREEN_ENABLE" in fields:
            del dump[key]  # Ethernet8's port object, the WRED profile
        elif key.startswith(sonic.ASIC_PORT) and sonic.LANES not in fields:
            del dump[key]  # the CPU port
    profiles = [k for k in dump if k.startswith(sonic.ASIC_BUFFER_PROFILE)]
    del dump[profiles[0]]
    wired = topology.load("roce-v2-leafspine").nodes["leaf1"].ports.ports.values()
    assert sonic.asic_gaps(config_db(), wired, dump) == [
        "ASIC_DB has no port with Ethernet8's lanes [33, 34, 35, 36]",
        "ASIC_DB has no CPU port",
        "ASIC_DB has 3 of the config's 4 buffer profiles",
        "ASIC_DB has 0 of the config's 1 WRED profiles"]
    assert sonic.asic_gaps(config_db(), ["Ethernet0"], {}) == [
        "ASIC_DB has no port with Ethernet0's lanes [25, 26, 27, 28]", "ASIC_DB has no CPU port",
        "ASIC_DB has 0 of the config's 4 buffer profiles",
        "ASIC_DB has 0 of the config's 1 WRED profiles"]


def test_only_wired_ports_are_waited_for():
    dump = {k: v for k, v in asic().items()
            if v.get(sonic.LANES) != "4:37,38,39,40"}  # Ethernet12 (eth4) never came
    assert sonic.asic_gaps(config_db(), ["Ethernet0", "Ethernet4", "Ethernet8"], dump) == []


def test_wait_command_for_clabernetes_waits_then_starts_bgp():
    argv = shlex.split(sonic.wait_command())
    assert argv[:4] == ["timeout", "300", "bash", "-c"]
    script = argv[4]
    assert script.startswith("until supervisorctl status start.sh | grep -q EXITED && ")
    assert ('[ "$(redis-cli -n 0 EXISTS PORT_TABLE:PortConfigDone PORT_TABLE:PortInitDone)" '
            '= 2 ]') in script
    assert script.endswith("; do sleep 2; done; supervisorctl start bgpd")
    assert "config reload" not in script


# ---- read-back -------------------------------------------------------------------------------

def test_redis_integer_reads_pipe_and_terminal_forms():
    assert sonic.redis_integer("1\n") == 1
    assert sonic.redis_integer("(integer) 0\n") == 0
    assert sonic.redis_integer("") is None
    assert sonic.redis_integer("Could not connect to Redis at 127.0.0.1:6379") is None


def summary(asic_text: str | None = None) -> sonic.SonicSummary:
    recorded = json.loads((DATA / "sonic-config-db.json").read_text())
    dump = sonic.parse_asic_dump(asic_text or (DATA / "sonic-asic-dump.txt").read_text())
    return sonic.summarize("leaf1", recorded, dump)


def test_summary_from_recorded_databases():
    s = summary()
    ports = {"Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"}
    assert s.config_pfc == {p: frozenset({3}) for p in ports}
    assert s.asic_pfc == {p: frozenset({3}) for p in ports}  # mask 8, matched on lanes
    assert sonic.AsicBufferProfile(
        size=18432, threshold_mode="SAI_BUFFER_PROFILE_THRESHOLD_MODE_DYNAMIC", dynamic_th=0,
        xon=18432, xoff=48128) in s.buffer_profiles
    assert len(s.buffer_profiles) == 4
    assert s.wred_profiles == (sonic.AsicWred(True, 150000, 1500000, 100,
                                              "SAI_ECN_MARK_MODE_ALL"),)
    assert s.config_db["FEATURE"]["swss"]["state"] == "enabled"


def test_recorded_sonic_agrees_with_the_intended_config():
    intended = topology.load("roce-v2-leafspine").nodes["leaf1"].config
    assert sonic.mismatches(intended, summary()) == []


def test_mismatches_name_the_port_and_the_database():
    dump = json.loads((DATA / "sonic-asic-dump.txt").read_text())
    for fields in dump.values():
        if fields.get(sonic.LANES) == "4:33,34,35,36":  # Ethernet8
            fields["SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL"] = "24"
        if "SAI_WRED_ATTR_ECN_MARK_MODE" in fields:
            fields["SAI_WRED_ATTR_ECN_MARK_MODE"] = "SAI_ECN_MARK_MODE_NONE"
        if fields.get("SAI_BUFFER_PROFILE_ATTR_XOFF_TH") == "48128":
            fields["SAI_BUFFER_PROFILE_ATTR_XOFF_TH"] = "40960"
    intended = topology.load("roce-v2-leafspine").nodes["leaf1"].config
    assert sonic.mismatches(intended, summary(json.dumps(dump))) == [
        "leaf1: Ethernet8: pfc_enable [3] but ASIC_DB has [3, 4]",
        "leaf1: BUFFER_PROFILE|pg_lossless_100000_40m_profile: no ASIC buffer profile with "
        "size 18432, xon 18432, xoff 48128",
        "leaf1: WRED_PROFILE|AZURE_LOSSLESS: no ASIC WRED profile with green 150000..1500000 "
        "bytes, 100 %, SAI_ECN_MARK_MODE_ALL"]


def test_asic_dump_must_be_an_object_of_hashes():
    assert sonic.parse_asic_dump("\n") == {}
    with pytest.raises(ValueError, match="object of hashes"):
        sonic.parse_asic_dump('["ASIC_STATE"]')
    dump = sonic.asic_dump_argv()
    assert dump[:5] == ["redis-cli", "-n", "1", "--raw", "EVAL"]
    assert dump[5] == sonic.ASIC_DUMP_SCRIPT and dump[6] == "0"
    assert dump[7:] == ["ASIC_STATE:SAI_OBJECT_TYPE_PORT:*",
                        "ASIC_STATE:SAI_OBJECT_TYPE_BUFFER_PROFILE:*",
                        "ASIC_STATE:SAI_OBJECT_TYPE_WRED:*"]
