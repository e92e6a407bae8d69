"""labs.nic: host NIC settings files load with DcqcnParams' defaults, refuse bad values with
one-line errors, and reach hosts through the rocelab.nic label at topology load time."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from labs import nic, topology
from labs.nic import NicError, NicSettings
from labs.topology import TopologyError
from tests.conftest import TOPOLOGIES
from traffic.dcqcn import DcqcnParams


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "nic.yml"
    path.write_text(text)
    return path


def test_defaults():
    s = NicSettings()
    assert (s.roce.dscp, s.roce.priority, s.roce.mtu, s.roce.ecn) == (26, 3, 1024, True)
    assert (s.cnp.dscp, s.cnp.priority) == (48, 6)
    assert s.dcqcn.enabled
    assert s.dcqcn.to_params(40e9) == DcqcnParams()  # the same defaults, exactly


def test_empty_file_is_all_defaults(tmp_path):
    assert nic.load(write(tmp_path, "")) == NicSettings()


def test_to_params_units():
    d = NicSettings.model_validate({"dcqcn": {"k_us": 10, "t_us": 300, "b_bytes": 1000,
                                              "rai_mbps": 5, "rhai_mbps": 50,
                                              "min_rate_mbps": 2, "cnp_interval_us": 4}}).dcqcn
    p = d.to_params(100e9)
    assert p.line_rate_bps == 100e9
    assert (p.k_s, p.t_s, p.n_s) == pytest.approx((10e-6, 300e-6, 4e-6))
    assert (p.rai_bps, p.rhai_bps, p.min_rate_bps, p.b_bytes) == (5e6, 50e6, 2e6, 1000)


@pytest.mark.parametrize("lab", ["roce-v2-leafspine", "roce-v1-l2"])
def test_shipped_file_round_trip(lab):
    path = TOPOLOGIES / lab / "nic" / "default.yml"
    settings = nic.load(path)
    assert (settings.roce.dscp, settings.roce.priority, settings.cnp.dscp) == (26, 3, 48)
    assert (settings.dcqcn.rai_mbps, settings.dcqcn.rhai_mbps) == (100, 500)  # 100G steps
    again = NicSettings.model_validate(yaml.safe_load(yaml.safe_dump(settings.model_dump())))
    assert again == settings
    assert settings.dcqcn.to_params(100e9) == DcqcnParams(line_rate_bps=100e9, rai_bps=100e6,
                                                          rhai_bps=500e6)


@pytest.mark.parametrize("text, where, problem", [
    ("roce: {dscp: 64}", "roce.dscp", "must be between 0 and 63 (got 64)"),
    ("cnp: {priority: 8}", "cnp.priority", "must be between 0 and 7 (got 8)"),
    ("roce: {mtu: 1500}", "roce.mtu", "must be 256, 512, 1024, 2048 or 4096 (got 1500)"),
    ("roce: {ecn: 'on'}", "roce.ecn", "must be true or false (got 'on')"),
    ("roce: {dscp: '26'}", "roce.dscp", "must be an integer (got '26')"),
    ("roce: {dscpp: 26}", "roce.dscpp", "unknown field"),
    ("pfc: {}", "pfc", "unknown field"),
    ("dcqcn: {g: 0}", "dcqcn.g", "must be greater than 0"),
    ("dcqcn: {f: 0}", "dcqcn.f", "must be at least 1 (got 0)"),
    ("dcqcn: {t_us: -5}", "dcqcn.t_us", "must be positive (got -5.0)"),
    ("roce: 3", "roce", "must be a mapping (got 3)"),
    ("[1]", "(top level)", "must be a mapping"),
])
def test_one_line_errors(tmp_path, text, where, problem):
    path = write(tmp_path, text)
    with pytest.raises(NicError) as e:
        nic.load(path)
    message = str(e.value)
    assert message.startswith(f"{path}: {where}: {problem}")
    assert "\n" not in message


def test_invalid_yaml(tmp_path):
    with pytest.raises(NicError, match=r"nic.yml: line 1: invalid YAML"):
        nic.load(write(tmp_path, "roce: ["))


def test_lab_wide_label_and_per_node_override(lab_copy):
    """kinds.linux.labels gives every host the lab's file; a node's own label wins (the usual
    containerlab merge), and switches carry no NIC settings."""
    def edit(doc: dict) -> None:
        doc["topology"]["nodes"]["h2"]["labels"] = {"rocelab.nic": "nic/h2.yml"}
    clab = lab_copy(edit=edit)
    (clab.parent / "nic" / "h2.yml").write_text("roce: {dscp: 34}\n")
    topo = topology.load(clab)
    assert topo.nodes["h1"].nic_path == (clab.parent / "nic" / "default.yml").resolve()
    assert topo.nodes["h1"].nic.roce.dscp == 26
    assert topo.nodes["h2"].nic.roce.dscp == 34
    assert all(s.nic is None for s in topo.switches)


def test_defaults_labels_reach_hosts(lab_copy):
    def edit(doc: dict) -> None:
        del doc["topology"]["kinds"]["linux"]["labels"]
        doc["topology"]["defaults"] = {"labels": {"rocelab.nic": "nic/default.yml"}}
    topo = topology.load(lab_copy(edit=edit))
    assert all(h.nic is not None for h in topo.hosts)


def test_hosts_without_the_label_have_none(lab_copy):
    def edit(doc: dict) -> None:
        del doc["topology"]["kinds"]["linux"]["labels"]
    topo = topology.load(lab_copy(edit=edit))
    assert all(h.nic is None and h.nic_path is None for h in topo.hosts)


def test_missing_file(lab_copy):
    def edit(doc: dict) -> None:
        doc["topology"]["nodes"]["h1"]["labels"] = {"rocelab.nic": "nic/x.yml"}
    clab = lab_copy(edit=edit)
    with pytest.raises(TopologyError) as e:
        topology.load(clab)
    assert str(e.value).startswith(
        f"{clab}: topology.nodes.h1.labels.rocelab.nic: nic/x.yml: no such file")


def test_bad_file_fails_topology_load(lab_copy):
    clab = lab_copy()
    nic_file = clab.parent / "nic" / "default.yml"
    nic_file.write_text("roce: {dscp: 99}\n")
    with pytest.raises(TopologyError) as e:
        topology.load(clab)
    assert str(e.value) == f"{nic_file.resolve()}: roce.dscp: must be between 0 and 63 (got 99)"
