"""checks.lint: the project's labs lint clean, and each rule fires on one seeded mistake with
its id, the file and the TABLE|key|field to fix."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocelab.checks.lint import load_lab, lint
from rocelab.fabric.qos import required_headroom
from tests.conftest import ROOT, copy_lab

Config = dict[str, Any]


def seeded(tmp_path: Path, node: str, edit: Callable[[Config], None],
           lab: str = "roce-v2-leafspine") -> tuple[Path, Path]:
    """A copy of ``lab`` with ``edit`` applied to ``node``'s config_db.json:
    (clab file, the edited config)."""
    clab = copy_lab(tmp_path, lab=lab)
    config = clab.parent / "configs" / node / "config_db.json"
    data = json.loads(config.read_text())
    edit(data)
    config.write_text(json.dumps(data, indent=4))
    return clab, config


def findings_of(clab: Path, rule: str, **settings) -> list:
    return [f for f in lint(load_lab(clab, **settings)) if f.rule == rule]


@pytest.mark.parametrize("lab", ["roce-v2-leafspine", "roce-v1-l2"])
def test_project_labs_lint_clean(lab):
    findings = lint(load_lab(lab))
    assert [f for f in findings if f.severity == "error"] == []


def test_headroom_formula():
    """SONiC-VS constants at 100G / 40 m / MTU 9100: xon is the 18 KB pipeline; xoff is
    lossless MTU 4096 + (9100 + cable 5050.5 + MAC/PHY 819.2 + 394 quanta x 64 B) = 44281.7,
    rounded up to 45056."""
    need = required_headroom(100000, 40, 9100)
    assert (need.xon, need.xoff, need.size) == (18432, 45056, 18432 + 45056)
    assert required_headroom(100000, 40, 9100, shared_pool=True).size == 18432


def _set(table: str, key: str, field: str, value: str) -> Callable[[Config], None]:
    def edit(data: Config) -> None:
        data[table][key][field] = value
    return edit


def test_lossless_chain_names_the_dscp_hop(tmp_path):
    clab, config = seeded(tmp_path, "leaf1", _set("DSCP_TO_TC_MAP", "AZURE", "26", "1"))
    found = findings_of(clab, "lossless-chain")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("error", str(config), "DSCP_TO_TC_MAP|AZURE|26")]


def test_lossless_chain_pfc_off(tmp_path):
    clab, config = seeded(tmp_path, "spine1", _set("PORT_QOS_MAP", "Ethernet0", "pfc_enable", ""))
    wheres = {f.where for f in findings_of(clab, "lossless-chain") if f.file == str(config)}
    assert wheres == {"PORT_QOS_MAP|Ethernet0|pfc_enable"}


def test_lossless_chain_no_ecn(tmp_path):
    clab, config = seeded(tmp_path, "leaf2", _set("WRED_PROFILE", "AZURE_LOSSLESS", "ecn",
                                                 "ecn_none"))
    found = findings_of(clab, "lossless-chain")
    assert {(f.file, f.where) for f in found} == {(str(config), "WRED_PROFILE|AZURE_LOSSLESS|ecn")}


def test_lossless_chain_dot1p_mismatch_roce_v1(tmp_path):
    clab, config = seeded(tmp_path, "leaf1", _set("DOT1P_TO_TC_MAP", "AZURE", "3", "0"),
                          lab="roce-v1-l2")
    found = findings_of(clab, "lossless-chain")
    assert {(f.severity, f.file, f.where) for f in found} == {
        ("error", str(config), "DOT1P_TO_TC_MAP|AZURE|3")}


def test_lossless_chain_lossy_pg(tmp_path):
    def lossy_pg(data: Config) -> None:
        data["BUFFER_PG"]["Ethernet8|3"]["profile"] = "ingress_lossy_profile"
    clab, config = seeded(tmp_path, "leaf1", lossy_pg)
    found = findings_of(clab, "lossless-chain")
    assert [(f.file, f.where) for f in found] == [
        (str(config), "BUFFER_PROFILE|ingress_lossy_profile|xoff")]
    assert "Ethernet8" in found[0].why


def test_headroom_xoff_too_small(tmp_path):
    profile = "pg_lossless_100000_40m_profile"
    clab, config = seeded(tmp_path, "spine2", _set("BUFFER_PROFILE", profile, "xoff", "30720"))
    found = findings_of(clab, "headroom")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("error", str(config), f"BUFFER_PROFILE|{profile}|xoff")]
    assert "45056" in found[0].why


def test_headroom_size_without_shared_pool(tmp_path):
    def no_shared_pool(data: Config) -> None:
        del data["BUFFER_POOL"]["ingress_lossless_pool"]["xoff"]
        data["BUFFER_PROFILE"]["pg_lossless_100000_40m_profile"]["size"] = "18432"
    clab, config = seeded(tmp_path, "leaf2", no_shared_pool)
    found = findings_of(clab, "headroom")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("warning", str(config), "BUFFER_PROFILE|pg_lossless_100000_40m_profile|size")]


@pytest.mark.parametrize("lab", ["roce-v2-leafspine", "roce-v1-l2"])
def test_project_labs_mark_fully_and_count_headroom_once(lab):
    rules = {f.rule for f in lint(load_lab(lab))}
    assert not rules & {"headroom", "ecn-probability"}


def test_headroom_counted_twice_with_a_shared_pool(tmp_path):
    """size = xon + xoff while the pool has a shared headroom pool: the PG reserves its
    headroom and draws it from the shared pool as well."""
    profile = "pg_lossless_100000_40m_profile"
    clab, config = seeded(tmp_path, "leaf1", _set("BUFFER_PROFILE", profile, "size", "66560"))
    found = findings_of(clab, "headroom")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("warning", str(config), f"BUFFER_PROFILE|{profile}|size")]
    assert "counted twice" in found[0].why and found[0].fix.startswith("set size to 18432")


def test_low_marking_probability_where_hosts_run_dcqcn(tmp_path):
    def five_percent(data: Config) -> None:
        data["WRED_PROFILE"]["AZURE_LOSSLESS"]["green_drop_probability"] = "5"
    clab, config = seeded(tmp_path, "spine1", five_percent)
    found = findings_of(clab, "ecn-probability")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("warning", str(config), "WRED_PROFILE|AZURE_LOSSLESS|green_drop_probability")]
    assert "5 %" in found[0].why
    nic = clab.parent / "nic" / "default.yml"
    nic.write_text(nic.read_text().replace("  enabled: true", "  enabled: false"))
    assert findings_of(clab, "ecn-probability") == []  # no DCQCN: no one needs the marks


def test_the_byte_counter_is_explained(tmp_path):
    """The firmware's own 32767 B at 100G: a byte stage every ~2.6 us against a 300 us
    timer, recovery in microseconds, the swing under incast; off (as the default lab ships
    it): the timer alone, unlike the firmware; a counter slower than the timer says nothing."""
    clab, _ = seeded(tmp_path, "spine1", lambda data: None)
    nic = clab.parent / "nic" / "default.yml"
    shipped = nic.read_text()

    def byte_reset(value: int) -> list:
        nic.write_text(re.sub(r"rpg_byte_reset: \d+", f"rpg_byte_reset: {value}", shipped))
        return findings_of(clab, "dcqcn-byte-counter")

    found = byte_reset(32767)
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("info", str(nic), "dcqcn.rpg_byte_reset")]
    assert "32767 B, 2.6 us at 100G" in found[0].why and "300 us" in found[0].why
    assert "7 stages, 18 us at line rate" in found[0].why and "2.1 ms" in found[0].why
    off = byte_reset(0)
    assert [f.severity for f in off] == ["info"] and "off, unlike the firmware" in off[0].why
    assert byte_reset(8000000) == []  # 640 us a stage: the timer leads


def test_ecn_above_xoff(tmp_path):
    """A static XOFF at 100 KB under an ECN band that starts at 150 KB: PFC fires first."""
    def static_xoff(data: Config) -> None:
        profile = data["BUFFER_PROFILE"]["pg_lossless_100000_40m_profile"]
        del profile["dynamic_th"]
        profile["static_th"] = "100000"
    clab, config = seeded(tmp_path, "leaf1", static_xoff)
    found = findings_of(clab, "ecn-below-xoff")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("error", str(config), "WRED_PROFILE|AZURE_LOSSLESS|green_min_threshold")]
    assert "150000" in found[0].why and "100000" in found[0].why


def test_a_static_threshold_of_zero_sends_xoff_at_the_pool_not_at_zero(tmp_path):
    """SAI: a static threshold of 0 limits the PG by the pool alone, as the model has it."""
    def static_zero(data: Config) -> None:
        profile = data["BUFFER_PROFILE"]["pg_lossless_100000_40m_profile"]
        del profile["dynamic_th"]
        profile["static_th"] = "0"
    clab, _ = seeded(tmp_path, "leaf1", static_zero)
    assert findings_of(clab, "ecn-below-xoff") == []


def _cnp_scheduler(name: str) -> Callable[[Config], None]:
    def edit(data: Config) -> None:
        for key, queue in data["QUEUE"].items():
            if key.endswith("|6"):
                queue["scheduler"] = name
    return edit


def test_an_unpaused_dwrr_cnp_queue_of_their_own_is_fine(tmp_path):
    """Not strict, lighter than RoCE's: CNPs still have a queue no pause stops and no data
    fills, so they are served within a round."""
    clab, _ = seeded(tmp_path, "spine1", _cnp_scheduler("scheduler.0"))
    assert findings_of(clab, "cnp-queue") == []


def test_cnps_in_a_paused_queue(tmp_path):
    """The CNP TC is lossy, but its queue is the one PFC for priority 3 stops."""
    clab, config = seeded(tmp_path, "leaf1", _set("TC_TO_QUEUE_MAP", "AZURE", "6", "3"))
    found = findings_of(clab, "cnp-queue")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("error", str(config), "TC_TO_QUEUE_MAP|AZURE|6")]
    assert "which PFC for priority 3 stops" in found[0].why


def test_cnps_starved_behind_a_strict_roce_queue(tmp_path):
    def strict_roce(data: Config) -> None:
        _cnp_scheduler("scheduler.0")(data)
        for key, queue in data["QUEUE"].items():
            if key.endswith("|3"):
                queue["scheduler"] = "scheduler.2"
    clab, config = seeded(tmp_path, "leaf2", strict_roce)
    found = findings_of(clab, "cnp-queue")
    assert found and {(f.severity, f.file) for f in found} == {("error", str(config))}
    assert "QUEUE|Ethernet0|6|scheduler" in {f.where for f in found}
    assert "STRICT RoCE queue 3" in found[0].why


def test_cnps_sharing_a_dwrr_queue_with_lossy_traffic_is_a_warning(tmp_path):
    def shared(data: Config) -> None:
        data["TC_TO_QUEUE_MAP"]["AZURE"]["6"] = "0"
    clab, config = seeded(tmp_path, "spine2", shared)
    found = findings_of(clab, "cnp-queue")
    assert {(f.severity, f.file, f.where) for f in found} == {
        ("warning", str(config), "TC_TO_QUEUE_MAP|AZURE|6")}


def test_cnp_in_lossless_tc(tmp_path):
    clab, config = seeded(tmp_path, "leaf2", _set("DSCP_TO_TC_MAP", "AZURE", "48", "3"))
    found = findings_of(clab, "cnp-queue")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("error", str(config), "DSCP_TO_TC_MAP|AZURE|48")]


def test_pfcwd_missing(tmp_path):
    def no_watchdog(data: Config) -> None:
        del data["PFC_WD"]["Ethernet4"]
    clab, config = seeded(tmp_path, "leaf1", no_watchdog)
    found = findings_of(clab, "pfcwd-coverage")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("warning", str(config), "PFC_WD|Ethernet4")]


def test_dangling_reference_is_a_finding(tmp_path):
    clab, config = seeded(tmp_path, "spine2", _set("QUEUE", "Ethernet0|3", "wred_profile",
                                                   "AZURE_LOSSLES"))
    found = findings_of(clab, "references")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("error", str(config), "QUEUE|Ethernet0|3|wred_profile")]
    assert "AZURE_LOSSLES" in found[0].why


def test_switches_disagree(tmp_path):
    """spine2 alone moves RoCE to priority 4: its own chain is whole, but the path is not."""
    def priority_4(data: Config) -> None:
        for port in data["PORT_QOS_MAP"].values():
            port["pfc_enable"] = port["pfcwd_sw_enable"] = "4"
        data["DSCP_TO_TC_MAP"]["AZURE"]["26"] = "4"
    clab, config = seeded(tmp_path, "spine2", priority_4)
    found = findings_of(clab, "consistency")
    assert {(f.severity, f.file, f.where) for f in found} == {
        ("error", str(config), "DSCP_TO_TC_MAP|AZURE|26"),
        ("error", str(config), "PORT_QOS_MAP|Ethernet0|pfc_enable")}
    assert all("spine1/config_db.json" in f.why for f in found)  # names the other file


def test_per_port_role_maps_are_consistent_when_each_role_is(tmp_path):
    """The leaves' uplinks classify DSCP 26 into TC 1 with a map of their own (traffic from
    the spines re-marked by design) while their host ports keep AZURE: every leaf alike is
    consistent; one leaf alone is not, and the finding names the role."""
    def uplinks(data: Config) -> None:
        data["DSCP_TO_TC_MAP"]["UPLINK"] = {**data["DSCP_TO_TC_MAP"]["AZURE"], "26": "1"}
        for port in ("Ethernet0", "Ethernet4"):
            data["PORT_QOS_MAP"][port]["dscp_to_tc_map"] = "UPLINK"
    clab, config = seeded(tmp_path, "leaf2", uplinks)
    found = findings_of(clab, "consistency")
    assert [(f.severity, f.file, f.where) for f in found] == [
        ("error", str(config), "DSCP_TO_TC_MAP|UPLINK|26")]
    assert "on ports T0 toward T1 is 1 here but 3 in" in found[0].why
    leaf1 = clab.parent / "configs" / "leaf1" / "config_db.json"
    data = json.loads(leaf1.read_text())
    uplinks(data)
    leaf1.write_text(json.dumps(data))
    assert findings_of(clab, "consistency") == []


def test_priority_label_and_option(tmp_path):
    """The label moves the lossless priority; a clean lab then fails the chain on it, and the
    option overrides the label."""
    def label(doc: dict) -> None:
        doc["topology"].setdefault("defaults", {})["labels"] = {"rocelab.roce-priority": "4"}
    clab = copy_lab(tmp_path, edit=label)
    assert load_lab(clab).settings.priority == 4
    assert any(f.severity == "error" for f in lint(load_lab(clab)))
    assert not any(f.severity == "error" for f in lint(load_lab(clab, priority=3)))


def test_task_exits_non_zero_on_errors(tmp_path):
    clab, _ = seeded(tmp_path, "leaf1", _set("DSCP_TO_TC_MAP", "AZURE", "26", "0"))
    run = subprocess.run([sys.executable, "-m", "invoke", "config.lint", str(clab), "--json"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    report = json.loads(run.stdout)
    assert report["counts"]["error"] >= 1
    assert "DSCP_TO_TC_MAP|AZURE|26" in {f["where"] for f in report["findings"]}


def _write_nic(clab: Path, text: str) -> Path:
    (clab.parent / "nic" / "default.yml").write_text(text)
    return clab


@pytest.mark.parametrize("lab", ["roce-v2-leafspine", "roce-v1-l2"])
def test_host_dscp_mismatch_names_the_nic_file(tmp_path, lab):
    """A host marking RoCE DSCP 0 lands in TC 0, lossy on its leaf port: one error (every host
    shares the lab-wide file) naming the file and the field."""
    clab = _write_nic(copy_lab(tmp_path, lab=lab), "roce: {dscp: 0}\n")
    found = findings_of(clab, "host-dscp")
    nic = str(clab.parent / "nic" / "default.yml")
    assert [(f.severity, f.file, f.where) for f in found] == [("error", nic, "roce.dscp")]
    assert "DSCP 0 -> TC 0" in found[0].why and "h1:eth1 -> leaf1 Ethernet8" in found[0].why


def test_host_priority_and_cnp_mismatch(tmp_path):
    clab = _write_nic(copy_lab(tmp_path, lab="roce-v1-l2"),
                      "roce: {priority: 4}\ncnp: {dscp: 26}\n")
    found = {f.where: f for f in findings_of(clab, "host-dscp")}
    assert set(found) == {"roce.priority", "cnp.dscp"}
    assert "priority 4" in found["roce.priority"].why
    assert "CNP DSCP 26 -> TC 3" in found["cnp.dscp"].why


def test_host_without_nic_settings_is_not_checked(tmp_path):
    def no_label(doc: dict) -> None:
        del doc["topology"]["kinds"]["linux"]["labels"]
    assert findings_of(copy_lab(tmp_path, edit=no_label), "host-dscp") == []


def test_a_table_sonic_takes_but_rocelab_does_not_emulate_is_no_dangling_reference(tmp_path):
    """PORTCHANNEL stops the switch (not emulated), but it is no mistake of the config's: the
    finding says so under not-emulated, not references (which says SONiC would refuse it)."""
    def lag(data: Config) -> None:
        data["PORTCHANNEL"] = {"PortChannel1": {"admin_status": "up"}}
    clab, config = seeded(tmp_path, "leaf1", lag)
    found = [f for f in lint(load_lab(clab)) if f.file == str(config)]
    assert [(f.severity, f.rule, f.where) for f in found] == [
        ("error", "not-emulated", "PORTCHANNEL")]
    assert "SONiC takes it" in found[0].why and "rocelab.unemulated-tables: skip" in found[0].fix


def test_a_voq_line_cards_other_cards_are_listed_not_judged(tmp_path):
    from tests.platform_configs import OTHER_CARDS, VOQ_ASIC, voq_line_card
    card = f"{OTHER_CARDS[0]}|{VOQ_ASIC}"

    def voq(data: Config) -> None:
        sample = voq_line_card()
        data["DEVICE_METADATA"]["localhost"].update(switch_type="voq", asic_name=VOQ_ASIC)
        data["QUEUE"].update({key: entry for key, entry in sample["QUEUE"].items()
                              if key.startswith(f"{card}|")})
        data["WRED_PROFILE"].update(sample["WRED_PROFILE"])  # what those entries name
    clab, config = seeded(tmp_path, "leaf1", voq)
    found = [f for f in findings_of(clab, "not-emulated") if f.file == str(config)]
    assert [(f.severity, f.where) for f in found] == [("info", "QUEUE")]
    assert card in found[0].why
