"""Bad input everywhere: a topology, switch config, NIC file or lab state
that is not what it must be gives one line naming the file and the field (or line), never a
traceback; the task exits 2 and nothing is built. Each case goes through the loader and, for
the files a task reads, through the task as the invoke CLI runs it."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import yaml
from invoke import Program
from pyroute2 import netns

import tasks
from rocelab.fabric import config, config_load
from rocelab.labs import live
from rocelab.nic import settings as nic
from rocelab.labs import topology
from rocelab.labs import state as states
from rocelab.nic.settings import NicError
from rocelab.labs.live import LiveLab
from rocelab.labs.state import LabState
from rocelab.labs.topology import TopologyError

LINE_LIMIT = 600  # a one-line error quotes user input bounded: never kilobytes


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(states.STATE_ENV, str(tmp_path / "state"))
    return tmp_path / "state"


def invoke(capsys, *argv: str) -> tuple[int, str, str]:
    """Run tasks in this process exactly as ``invoke ARGV`` does: (exit code, stdout, stderr)."""
    try:
        Program(namespace=tasks.ns).run(["invoke", *argv])
        code = 0
    except SystemExit as done:
        code = done.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line(message: str) -> str:
    assert "Traceback" not in message
    (line,) = message.strip().splitlines()
    assert len(line) < LINE_LIMIT, line[:LINE_LIMIT]
    return line


def assert_refused(capsys, state_dir: Path, clab: Path, name: str, *expected: str) -> str:
    """``invoke lab.up CLAB`` says one line holding ``expected``, exits 2 and builds nothing."""
    code, out, err = invoke(capsys, "lab.up", str(clab))
    line = one_line(err)
    assert code == 2, out + err
    assert line.startswith("rocelab: ")
    for text in expected:
        assert text in line
    assert not state_dir.exists() or not any(state_dir.iterdir())
    assert not [ns for ns in netns.listnetns() if ns.startswith(f"{name}-")]
    return line


def nodes(doc):
    return doc["topology"]["nodes"]


def links(doc):
    return doc["topology"]["links"]


def bomb(levels: int) -> str:
    """YAML anchors a..: each a list of nine uses of the one before, 9**levels values in all."""
    names = [chr(ord("a") + i) for i in range(levels)]
    lines = ["  a: &a [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"  {n}: &{n} [" + ", ".join([f"*{p}"] * 9) + "]"
              for p, n in zip(names, names[1:])]
    return "mgmt:\n" + "\n".join(lines) + "\n"


# ---- topology files

def on_doc(change):
    """An edit of the clab file's parsed document."""
    def edit(clab: Path) -> None:
        doc = yaml.safe_load(clab.read_text())
        change(doc)
        clab.write_text(yaml.safe_dump(doc, sort_keys=False, width=10 ** 7))
    return edit


def on_text(change):
    """An edit of the clab file's text (or bytes, for what YAML cannot express)."""
    def edit(clab: Path) -> None:
        result = change(clab.read_text())
        clab.write_bytes(result if isinstance(result, bytes) else result.encode())
    return edit


TOPOLOGY_CASES = {
    "kind is a list": (on_doc(lambda d: nodes(d)["h1"].update(kind=["linux"])),
                       ["topology.nodes.h1.kind: unsupported kind ['linux']"]),
    "group is a list": (on_doc(lambda d: nodes(d)["h1"].update(group=["a"])),
                        ["topology.nodes.h1.group: expected a group name, got ['a']"]),
    "non-UTF-8 byte": (on_text(lambda t: t.encode() + b"# caf\xe9\n"),
                       ["not UTF-8 text (byte 0xe9)"]),
    "3000-deep nesting": (on_text(lambda t: t + "debug: " + "[" * 3000 + "]" * 3000 + "\n"),
                          ["invalid YAML: nested deeper than 50 levels"]),
    "alias bomb": (on_text(lambda t: bomb(9) + t),
                   ["invalid YAML: this value expands to more than 100000 values"]),
    "duplicate node": (on_text(lambda t: t.replace("  nodes:\n",
                                                   "  nodes:\n    h1:\n      kind: linux\n", 1)),
                       ["invalid YAML: duplicate key 'h1' (first at line"]),
    "wire named lo": (on_doc(lambda d: links(d).append({"endpoints": ["h1:lo", "h2:eth2"]})),
                      ["topology.links[8].endpoints[0]: 'lo' is not a name a wire can take"]),
    "wire named .": (on_doc(lambda d: links(d).append({"endpoints": ["h1:eth2", "h2:."]})),
                     ["topology.links[8].endpoints[1]: '.' is not a name a wire can take"]),
    "unbalanced quote in exec": (on_doc(lambda d: nodes(d)["h2"]["exec"].append("echo 'it")),
                                 ["topology.nodes.h2.exec[2]: ", "No closing quotation"]),
    "5000-digit integer": (on_text(lambda t: t.replace("mtu: 9100", "mtu: " + "9" * 5000, 1)),
                           ["invalid YAML: an integer of 5000 digits is out of range"]),
    "huge key": (on_doc(lambda d: nodes(d)["h1"].update({"x" * 10 ** 5: 1})),
                 ["topology.nodes.h1.'xxxx", "unknown key"]),
}


@pytest.mark.parametrize("case", sorted(TOPOLOGY_CASES))
def test_bad_topology(case, lab_copy, capsys, state_dir):
    edit, expected = TOPOLOGY_CASES[case]
    clab = lab_copy()
    name = clab.stem.removesuffix(".clab")
    edit(clab)
    started = time.monotonic()
    with pytest.raises(TopologyError) as err:
        topology.load(clab)
    assert time.monotonic() - started < 10  # an alias bomb is refused, not expanded
    message = one_line(str(err.value))
    assert message.startswith(f"{clab}: ")
    for text in expected:
        assert text in message
    line = assert_refused(capsys, state_dir, clab, name, *expected)
    assert line == f"rocelab: {message}"


def test_large_alias_expansion_is_quoted_bounded(lab_copy, capsys, state_dir):
    """Under the expansion cap (9**4 values) but far too big to print: the error quotes it
    bounded."""
    clab = lab_copy()
    text = clab.read_text()
    clab.write_text(bomb(4) + text.replace("      kind: linux\n", "      kind: *d\n", 1))
    with pytest.raises(TopologyError, match=r"\.kind: unsupported kind \[\[\[") as err:
        topology.load(clab)
    one_line(str(err.value))
    assert_refused(capsys, state_dir, clab, clab.stem.removesuffix(".clab"), ".kind: ")


def test_anchors_and_merge_keys_still_load(lab_copy):
    """containerlab users share settings with anchors and ``<<``: that is not refused."""
    clab = lab_copy()
    text = clab.read_text().replace(
        "    h1:\n      kind: linux\n",
        "    h1: &host\n      kind: linux\n      labels: {team: a}\n", 1)
    text = text.replace("    h2:\n      kind: linux\n",
                        "    h2:\n      <<: *host\n      kind: linux\n", 1)
    clab.write_text(text)
    topo = topology.load(clab)
    assert topo.nodes["h2"].labels["team"] == "a"


# ---- the lab name through ${VAR:=default}, the same for every task

def test_name_from_the_environment_is_the_same_for_every_task(lab_copy, monkeypatch, capsys):
    clab = lab_copy()
    default = clab.stem.removesuffix(".clab")
    clab.write_text(clab.read_text().replace(f"name: {default}", f"name: ${{LAB:={default}}}"))
    monkeypatch.delenv("LAB", raising=False)
    assert topology.load(clab).name == live.lab_name(str(clab)) == default
    code, out, err = invoke(capsys, "lab.status", "--name", str(clab))
    assert code == 1 and one_line(err) == f"rocelab: lab {default} is not running " \
                                           f"(invoke lab.up {clab})"
    code, out, _ = invoke(capsys, "config.lint", str(clab))
    assert code == 0 and f"{default}: 0 errors" in out
    monkeypatch.setenv("LAB", "")  # empty takes the default, as in the shell
    assert live.lab_name(str(clab)) == default
    monkeypatch.setenv("LAB", f"{default}-b")
    assert topology.load(clab).name == live.lab_name(str(clab)) == f"{default}-b"
    monkeypatch.setenv("LAB", "bad name!")
    for argv in (["lab.up", str(clab)], ["lab.down", str(clab)],
                 ["lab.status", "--name", str(clab)]):
        code, _, err = invoke(capsys, *argv)
        assert code == 2
        assert one_line(err) == (f"rocelab: {clab}: name: 'bad name!' is not a valid lab name "
                                 "(letters, digits, - _ . ; at most 32; starts alphanumeric)")


# ---- switch configs (config_db.json), through the topology that binds them

def number_in(field_value: str, table: str = "PORT", key: str = "Ethernet0",
              field: str = "speed"):
    """Edit: a field of leaf1's (PORT|Ethernet0 speed by default) becomes raw JSON text
    ``field_value``."""
    def edit(text: str) -> str:
        data = json.loads(text)
        data[table][key][field] = "@@"
        return json.dumps(data, indent=1).replace('"@@"', field_value)
    return edit


def extra_table(raw: str):
    def edit(text: str) -> str:
        return text.rstrip().removesuffix("}") + f', "BGP_NEIGHBOR": {{"10.0.0.1": {raw}}}}}'
    return edit


CONFIG_CASES = {
    "[ x 100000": (lambda t: "[" * 100000, "invalid JSON: nested too deeply to parse"),
    "5000-digit number": (number_in("9" * 5000),
                          "PORT|Ethernet0: speed: an integer of 5000 digits is out of range"),
    "5000-digit string": (number_in('"' + "9" * 5000 + '"'),
                          "PORT|Ethernet0: speed: an integer of 5000 digits is out of range"),
    "5000-digit number in a list": (number_in("[1, " + "9" * 5000 + "]"),
                                    "PORT|Ethernet0: speed[1]: an integer of 5000 digits"),
    "5000-digit number in an ignored table": (
        extra_table('{"asn": ' + "9" * 5000 + "}"),
        "BGP_NEIGHBOR|10.0.0.1: asn: an integer of 5000 digits is out of range"),
    "5000-digit key": (lambda t: t.replace('"Ethernet0"', '"Ethernet' + "9" * 5000 + '"', 1),
                       "PORT|Ethernet999"),
    "NaN": (number_in("NaN"), "PORT|Ethernet0: speed: NaN is not a JSON number"),
    "Infinity": (number_in("Infinity"),
                 "PORT|Ethernet0: speed: Infinity is not a JSON number"),
    "-Infinity": (number_in("-Infinity"),
                  "PORT|Ethernet0: speed: -Infinity is not a JSON number"),
    "1e999": (number_in("1e999"), "PORT|Ethernet0: speed: '1e999' is out of range"),
    "NaN in an ignored table": (extra_table('{"asn": NaN}'),
                                "BGP_NEIGHBOR|10.0.0.1: asn: NaN is not a JSON number"),
    "non-UTF-8": (lambda t: t.encode("latin-1").replace(b'"leaf1"', b'"l\xe9af1"'),
                  "invalid JSON: not UTF-8 text"),
    # past any switch's buffer (and the compiled build's 64-bit counters)
    "a pool of 10**19 bytes": (number_in('"' + "1" + "0" * 19 + '"', "BUFFER_POOL",
                                         "ingress_lossless_pool", "size"),
                               "size: must be between 0 and 281474976710656 (got 1"),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_bad_switch_config(case, lab_copy, capsys, state_dir):
    edit, expected = CONFIG_CASES[case]
    clab = lab_copy()
    path = clab.parent / "configs" / "leaf1" / "config_db.json"
    result = edit(path.read_text())
    path.write_bytes(result if isinstance(result, bytes) else result.encode())
    with pytest.raises(config.ConfigError) as err:
        config_load.load(path)
    message = one_line(str(err.value))
    assert message.startswith(f"{path}: ") and expected in message
    assert_refused(capsys, state_dir, clab, clab.stem.removesuffix(".clab"),
                   f"{path.resolve()}: ", expected)


# ---- host NIC settings files (label rocelab.nic)

NIC_CASES = {
    "non-UTF-8": (b"roce: {dscp: 26}  # caf\xe9\n", "line 1: not UTF-8 text (byte 0xe9)"),
    "NaN": (b"dcqcn: {k_us: .nan}\n", "dcqcn.k_us: must be a finite number (got nan)"),
    "infinite": (b"dcqcn: {rai_mbps: .inf}\n", "dcqcn.rai_mbps: must be a finite number"),
    "minus infinite": (b"dcqcn: {t_us: -.inf}\n", "dcqcn.t_us: must be a finite number"),
    "overflowing float": (b"dcqcn: {g: 1.0e+400}\n", "dcqcn.g: must be a finite number"),
    "dscp out of range": (b"roce: {dscp: 64}\n", "roce.dscp: must be between 0 and 63 (got 64)"),
    "priority out of range": (b"cnp: {priority: -1}\n", "cnp.priority: must be between 0 and 7"),
    "g out of range": (b"dcqcn: {g: 2}\n", "dcqcn.g: must be at most 1"),
    "f out of range": (b"dcqcn: {f: 0}\n", "dcqcn.f: must be at least 1 (got 0)"),
    "5000-digit integer": (b"dcqcn: {b_bytes: " + b"9" * 5000 + b"}\n",
                           "line 1: invalid YAML: an integer of 5000 digits is out of range"),
    "duplicate key": (b"roce:\n  dscp: 26\n  dscp: 34\n", "line 3: invalid YAML: duplicate key"),
}


@pytest.mark.parametrize("case", sorted(NIC_CASES))
def test_bad_nic_file(case, lab_copy, capsys, state_dir):
    text, expected = NIC_CASES[case]
    clab = lab_copy()
    path = clab.parent / "nic" / "default.yml"
    path.write_bytes(text)
    with pytest.raises(NicError) as err:
        nic.load(path)
    message = one_line(str(err.value))
    assert message.startswith(f"{path}: ") and expected in message
    assert_refused(capsys, state_dir, clab, clab.stem.removesuffix(".clab"),
                   f"{path.resolve()}: ", expected)


# ---- a corrupt state.json

CORRUPT_STATES = {
    "truncated": (b'{"lab": "x", "topo', "Invalid JSON: EOF while parsing"),
    "not UTF-8": (b"\xff\xfe{}", "Invalid JSON"),
    "wrong type": (b'{"lab": 1}', "lab: Input should be a valid string"),
    "empty": (b"", "Invalid JSON"),
    "a folder": (None, "Is a directory"),
}


@pytest.mark.parametrize("case", sorted(CORRUPT_STATES))
def test_corrupt_state(case, lab_copy, capsys, state_dir):
    content, expected = CORRUPT_STATES[case]
    clab = lab_copy()
    name = clab.stem.removesuffix(".clab")
    path = state_dir / name / "state.json"
    path.parent.mkdir(parents=True)
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    for argv in (["lab.status", "--name", name], ["lab.down", name], ["lab.up", str(clab)]):
        code, out, err = invoke(capsys, *argv)
        line = one_line(err)
        assert code == 2, out + err
        assert line.startswith(f"rocelab: {path}: unreadable lab state (") and expected in line
        assert "invoke lab.cleanup --all" in line
    assert not [ns for ns in netns.listnetns() if ns.startswith(f"{name}-")]

    code, out, err = invoke(capsys, "lab.list")  # lists what it can and names the rest
    assert code == 0 and not err and f"{name}; invoke lab.cleanup --all removes" in out
    code, out, err = invoke(capsys, "lab.cleanup")  # the others' leftovers only
    assert code == 0 and not err and path.parent.exists()
    code, out, err = invoke(capsys, "lab.cleanup", "--all")
    assert code == 0 and not err and f"removed: {name}" in out
    assert not path.parent.exists()


# ---- lab.exec: the words after -- arrive as the shell passed them

@pytest.fixture
def running_lab(lab_copy, state_dir):
    """A recorded lab (state only: nothing runs) whose h1 lab.exec can address."""
    clab = lab_copy()
    name = clab.stem.removesuffix(".clab")
    state = LabState.new(name, str(clab))
    state.namespaces["h1"] = f"{name}-h1"
    state.status = "up"
    state.save()
    return state


def recorded_commands(monkeypatch) -> list[list[str]]:
    """The command lines lab.exec would start in a node, recorded instead of run (exit 0)."""
    ran: list[list[str]] = []

    class Recorded:
        def __init__(self, argv: list[str]) -> None:
            ran.append(argv)

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(LiveLab, "popen", lambda self, node, argv, **kw: Recorded(
        self.runtime.exec_argv(self.state, node, argv)))
    return ran


def test_exec_keeps_the_shells_quoting(running_lab, monkeypatch, capsys):
    argv = ["invoke", "lab.exec", "h1", "--", "echo", "it's", "a  b", ""]
    monkeypatch.setattr(sys, "argv", argv)
    ran = recorded_commands(monkeypatch)
    code, out, err = invoke(capsys, *argv[1:])
    assert (code, err) == (0, "")
    assert ran == [["ip", "netns", "exec", f"{running_lab.lab}-h1", "echo", "it's", "a  b", ""]]


def test_exec_without_the_shells_words_splits_and_refuses_bad_quoting(running_lab, monkeypatch,
                                                                      capsys):
    """Driven from Python (no argv to take words from), the remainder is split like a shell
    line: quotes work, an unbalanced one is a one-line error."""
    monkeypatch.setattr(sys, "argv", ["pytest"])
    ran = recorded_commands(monkeypatch)
    code, _, err = invoke(capsys, "lab.exec", "h1", "--", "echo", "\"it's\"")
    assert (code, err) == (0, "") and ran[-1][-2:] == ["echo", "it's"]
    code, _, err = invoke(capsys, "lab.exec", "h1", "--", "echo", "it's")
    assert code == 2
    assert one_line(err) == "rocelab: the command after --: No closing quotation"
    assert len(ran) == 1


# ---- files a node reads stay in the topology's folder

def outside_file(clab: Path) -> Path:
    """A file beside the lab's folder, not in it."""
    path = clab.parent.parent / "outside.json"
    path.write_text((clab.parent / "configs" / "leaf1" / "config_db.json").read_text())
    return path


def bind(node: str, source: str, target: str = "/etc/sonic/config_db.json"):
    return lambda d: nodes(d)[node].update(binds=[f"{source}:{target}"])


def startup(source: str):
    def change(d):
        del nodes(d)["leaf1"]["binds"]
        nodes(d)["leaf1"]["startup-config"] = source
    return change


ESCAPES = {
    "bind with ..": (bind("leaf1", "../outside.json"), "topology.nodes.leaf1.binds[0]: "
                     "'../outside.json' is outside the topology's folder"),
    "absolute bind": (lambda d: nodes(d)["h1"].update(binds=["/etc/hostname:/etc/hostname"]),
                      "topology.nodes.h1.binds[0]: '/etc/hostname' is outside"),
    "bind through a symlink": (bind("leaf1", "configs/link.json"),
                               "topology.nodes.leaf1.binds[0]: 'configs/link.json' is outside"),
    "startup-config with ..": (startup("../outside.json"),
                               "topology.nodes.leaf1.startup-config: '../outside.json' is "
                               "outside"),
    "NIC file elsewhere": (lambda d: nodes(d)["h1"].update(labels={"rocelab.nic":
                                                                   "../outside.json"}),
                           "topology.nodes.h1.labels.rocelab.nic: '../outside.json' is outside"),
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_paths_outside_the_topology_folder_are_refused(case, lab_copy, capsys, state_dir):
    change, expected = ESCAPES[case]
    clab = lab_copy()
    outside_file(clab)
    (clab.parent / "configs" / "link.json").symlink_to(clab.parent.parent / "outside.json")
    on_doc(change)(clab)
    with pytest.raises(TopologyError) as err:
        topology.load(clab)
    assert expected in one_line(str(err.value))
    line = assert_refused(capsys, state_dir, clab, clab.stem.removesuffix(".clab"), expected)
    assert 'label rocelab.allow-outside-paths: "true" allows it' in line


@pytest.mark.parametrize("case", ["bind with ..", "startup-config with ..",
                                  "bind through a symlink"])
def test_the_label_allows_paths_outside(case, lab_copy):
    change, _ = ESCAPES[case]
    clab = lab_copy()
    outside = outside_file(clab)
    (clab.parent / "configs" / "link.json").symlink_to(outside)

    def allowed(d):
        change(d)
        nodes(d)["leaf1"]["labels"] = {"rocelab.allow-outside-paths": "true"}
    on_doc(allowed)(clab)
    assert topology.load(clab).nodes["leaf1"].config_path == outside.resolve()


def test_the_label_is_true_or_false(lab_copy):
    clab = lab_copy()
    on_doc(lambda d: d["topology"].update(
        defaults={"labels": {"rocelab.allow-outside-paths": "yes"}}))(clab)
    with pytest.raises(TopologyError, match=r": topology\.nodes\.\w+\.labels\.rocelab\."
                       r"allow-outside-paths: must be \"true\" or \"false\" \(got 'yes'\)$"):
        topology.load(clab)
