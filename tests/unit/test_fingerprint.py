"""labs.fingerprint and labs.live.checked: a running lab whose files changed since lab.up, or
that came from another folder, is refused in one line naming the file; --reuse warns."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from rocelab.labs import fingerprint
from rocelab.labs import live
from rocelab.labs import state as states
from rocelab.labs import topology
from rocelab.labs.errors import LabError
from rocelab.labs.state import LabState
from tests.conftest import copy_lab


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(states.STATE_ENV, str(tmp_path / "state"))
    return tmp_path / "state"


def recorded(path: Path) -> LabState:
    """The state lab.up leaves (no namespaces needed to judge the files)."""
    topo = topology.load(path)
    state = LabState.new(topo.name, str(topo.path))
    state.status, state.fingerprint = "up", fingerprint.of(topo)
    state.save()
    return state


def test_every_file_the_lab_is_made_of_is_hashed(tmp_path):
    path = copy_lab(tmp_path)
    prints = fingerprint.of(topology.load(path))
    folder = path.parent
    expected = {path, folder / "nic/default.yml",
                *(folder / "configs" / s / "config_db.json"
                  for s in ("spine1", "spine2", "leaf1", "leaf2"))}
    assert set(prints) == {str(p) for p in expected}
    for name, digest in prints.items():
        assert digest == hashlib.sha256(Path(name).read_bytes()).hexdigest()


def test_a_bound_folder_counts_every_file_in_it(tmp_path):
    def bind_folder(doc):
        doc["topology"]["nodes"]["h1"]["binds"] = ["extra:/opt/extra"]
    path = copy_lab(tmp_path, edit=bind_folder)
    (path.parent / "extra" / "sub").mkdir(parents=True)
    (path.parent / "extra" / "sub" / "a.txt").write_text("a")
    assert str(path.parent / "extra/sub/a.txt") in fingerprint.of(topology.load(path))


def test_an_unchanged_lab_passes(tmp_path):
    path = copy_lab(tmp_path)
    state = recorded(path)
    lab = live.checked(str(path))
    assert lab.name == state.lab and lab.state.fingerprint == state.fingerprint
    assert live.checked(state.lab).name == state.lab  # by name too


def test_an_edited_config_is_refused_in_one_line_naming_the_file(tmp_path):
    path = copy_lab(tmp_path)
    state = recorded(path)
    config = path.parent / "configs/leaf2/config_db.json"
    data = json.loads(config.read_text())
    for entry in data["PORT_QOS_MAP"].values():
        entry.pop("pfc_enable", None)
    config.write_text(json.dumps(data))
    with pytest.raises(LabError) as err:
        live.checked(state.lab)
    assert str(err.value) == (f"lab {state.lab} is stale: configs/leaf2/config_db.json "
                              f"changed since lab.up: invoke lab.down {state.lab} and lab.up "
                              "again, or pass --reuse")


def test_reuse_warns_and_goes_on(tmp_path):
    path = copy_lab(tmp_path)
    state = recorded(path)
    (path.parent / "nic/default.yml").write_text(
        (path.parent / "nic/default.yml").read_text() + "\n# edited\n")
    said = []
    assert live.checked(state.lab, reuse=True, warn=said.append).name == state.lab
    assert said == [f"warning: lab {state.lab} is stale: nic/default.yml changed since "
                    "lab.up (--reuse: checking it anyway)"]


def test_several_changes_name_the_first_and_count_the_rest(tmp_path):
    path = copy_lab(tmp_path)
    state = recorded(path)
    for switch in ("leaf1", "spine1"):
        (path.parent / "configs" / switch / "config_db.json").write_text("{}")
    with pytest.raises(LabError, match=r"stale: configs/leaf1/config_db.json changed since "
                                       r"lab.up \(and 1 more\)"):
        live.checked(state.lab)  # the configs no longer load either: stale is the news


def test_a_deleted_file_and_a_newly_referenced_one_are_changes(tmp_path):
    path = copy_lab(tmp_path)
    state = recorded(path)
    (path.parent / "nic/default.yml").rename(path.parent / "nic/h1.yml")
    with pytest.raises(LabError, match="stale: nic/default.yml changed"):
        live.checked(state.lab)
    (path.parent / "nic/h1.yml").rename(path.parent / "nic/default.yml")
    (path.parent / "configs/spine1/extra.json").write_text("{}")
    doc = yaml.safe_load(path.read_text())
    doc["topology"]["nodes"]["spine1"]["binds"].append("configs/spine1/extra.json:/etc/x.json")
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    state.fingerprint.pop(str(path))  # the clab file "unchanged": only the new file tells
    state.save()
    with pytest.raises(LabError, match="stale: configs/spine1/extra.json is new since lab.up"):
        live.checked(state.lab)


def test_a_lab_brought_up_from_another_folder_is_refused(tmp_path):
    path = copy_lab(tmp_path / "a", name="same")
    recorded(path)
    other = copy_lab(tmp_path / "b", name="same")
    with pytest.raises(LabError) as err:
        live.checked(str(other))
    assert str(err.value).startswith(f"lab same was brought up from {path}, not from {other}")


def test_a_lab_without_a_recorded_fingerprint_is_refused(tmp_path):
    path = copy_lab(tmp_path)
    state = recorded(path)
    state.fingerprint = {}
    state.save()
    with pytest.raises(LabError, match="has no record of the files it was brought up from"):
        live.checked(state.lab)
