"""nic.settings: host NIC settings files load with DcqcnParams' defaults, refuse bad values with
one-line errors, and reach hosts through the rocelab.nic label at topology load time."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rocelab.nic import settings as nic
from rocelab.labs import topology
from rocelab.nic.settings import NicError, NicSettings
from rocelab.labs.topology import TopologyError
from tests.conftest import TOPOLOGIES
from rocelab.nic.dcqcn_params import DcqcnParams, FirmwareParams


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "nic.yml"
    path.write_text(text)
    return path


def test_defaults():
    s = NicSettings()
    assert (s.roce.dscp, s.roce.priority, s.roce.mtu, s.roce.ecn) == (26, 3, 1024, True)
    assert (s.cnp.dscp, s.cnp.priority) == (48, 6)
    assert s.dcqcn.enabled and s.dcqcn.mode == "firmware"
    assert s.dcqcn.to_params(100e9) == FirmwareParams()  # the same defaults, exactly
    paper = NicSettings.model_validate({"dcqcn": {"mode": "paper"}}).dcqcn
    assert paper.to_params(40e9) == DcqcnParams()
    assert paper.rpg_time_reset is None and s.dcqcn.k_us is None  # the other mode's: unset


def test_empty_file_is_all_defaults(tmp_path):
    assert nic.load(write(tmp_path, "")) == NicSettings()


def test_to_params_units():
    d = NicSettings.model_validate({"dcqcn": {"mode": "paper", "k_us": 10, "t_us": 300,
                                              "b_bytes": 1000,
                                              "rai_mbps": 5, "rhai_mbps": 50,
                                              "min_rate_mbps": 2, "cnp_interval_us": 4}}).dcqcn
    p = d.to_params(100e9)
    assert p.line_rate_bps == 100e9
    assert (p.k_s, p.t_s, p.n_s) == pytest.approx((10e-6, 300e-6, 4e-6))
    assert (p.rai_bps, p.rhai_bps, p.min_rate_bps, p.b_bytes) == (5e6, 50e6, 2e6, 1000)


def test_firmware_to_params_units():
    d = NicSettings.model_validate({"dcqcn": {
        "rpg_time_reset": 55, "rpg_byte_reset": 0, "rpg_threshold": 5, "rpg_ai_rate": 40,
        "rpg_hai_rate": 200, "rpg_gd": 10, "rpg_min_dec_fac": 70, "rpg_min_rate": 10,
        "rate_reduce_monitor_period": 8, "dce_tcp_g": 1020, "dce_tcp_rtt": 2,
        "initial_alpha_value": 512, "clamp_tgt_rate": 1, "clamp_tgt_rate_after_time_inc": 0,
        "min_time_between_cnps": 50}}).dcqcn
    p = d.to_params(25e9)
    assert isinstance(p, FirmwareParams) and p.line_rate_bps == 25e9
    assert (p.rpg_time_reset_s, p.rate_reduce_monitor_period_s, p.dce_tcp_rtt_s,
            p.min_time_between_cnps_s) == pytest.approx((55e-6, 8e-6, 2e-6, 50e-6))
    assert (p.rpg_ai_rate_bps, p.rpg_hai_rate_bps, p.rpg_min_rate_bps) == (40e6, 200e6, 10e6)
    assert (p.rpg_byte_reset, p.rpg_threshold, p.rpg_gd, p.rpg_min_dec_fac) == (0, 5, 10, 70)
    assert (p.dce_tcp_g, p.initial_alpha_value) == (1020, 512)
    assert (p.clamp_tgt_rate, p.clamp_tgt_rate_after_time_inc) == (True, False)


def test_partial_firmware_file_takes_the_other_defaults():
    d = NicSettings.model_validate({"dcqcn": {"rpg_ai_rate": 20}}).dcqcn
    assert d.to_params(100e9) == FirmwareParams(rpg_ai_rate_bps=20e6)


@pytest.mark.parametrize("lab", ["roce-v2-leafspine", "roce-v1-l2"])
def test_shipped_file_round_trip(lab):
    path = TOPOLOGIES / lab / "nic" / "default.yml"
    settings = nic.load(path)
    assert (settings.roce.dscp, settings.roce.priority, settings.cnp.dscp) == (26, 3, 48)
    assert settings.dcqcn.mode == "firmware"  # every mlxconfig parameter, at its default
    assert settings.dcqcn.model_fields_set >= set(nic.FIRMWARE_DEFAULTS)
    again = NicSettings.model_validate(yaml.safe_load(yaml.safe_dump(settings.model_dump())))
    assert again == settings
    # the firmware's defaults, but the default lab's byte counter, off for its ECN check
    # (its NIC file says why)
    byte_reset = 0 if lab == "roce-v2-leafspine" else FirmwareParams.rpg_byte_reset
    assert settings.dcqcn.to_params(100e9) == FirmwareParams(line_rate_bps=100e9,
                                                             rpg_byte_reset=byte_reset)


@pytest.mark.parametrize("text, where, problem", [
    ("roce: {dscp: 64}", "roce.dscp", "must be between 0 and 63 (got 64)"),
    ("cnp: {priority: 8}", "cnp.priority", "must be between 0 and 7 (got 8)"),
    ("roce: {mtu: 1500}", "roce.mtu", "must be 256, 512, 1024, 2048 or 4096 (got 1500)"),
    ("roce: {ecn: 'on'}", "roce.ecn", "must be true or false (got 'on')"),
    ("roce: {dscp: '26'}", "roce.dscp", "must be an integer (got '26')"),
    ("roce: {dscpp: 26}", "roce.dscpp", "unknown field"),
    ("pfc: {}", "pfc", "unknown field"),
    ("dcqcn: {mode: paper, g: 0}", "dcqcn.g", "must be greater than 0"),
    ("dcqcn: {mode: paper, f: 0}", "dcqcn.f", "must be at least 1 (got 0)"),
    ("dcqcn: {mode: paper, t_us: -5}", "dcqcn.t_us", "must be positive (got -5.0)"),
    ("dcqcn: {mode: fw}", "dcqcn.mode", "must be 'firmware' or 'paper' (got 'fw')"),
    ("dcqcn: {rpg_gd: 16}", "dcqcn.rpg_gd", "must be between 1 and 15 (got 16)"),
    ("dcqcn: {clamp_tgt_rate: 2}", "dcqcn.clamp_tgt_rate", "must be 0 or 1 (got 2)"),
    ("dcqcn: {rpg_time_reset: 0}", "dcqcn.rpg_time_reset", "must be at least 1 (got 0)"),
    ("dcqcn: {k_us: 55}", "dcqcn", "k_us is a paper-mode parameter, but mode is firmware"),
    ("dcqcn: {mode: paper, rpg_ai_rate: 5}", "dcqcn",
     "rpg_ai_rate is a firmware-mode parameter, but mode is paper"),
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
