"""The traditional buffer model's boot (fabric.buffermgrd): the lossless PGs a config leaves out
come from the platform's pg_profile_lookup.ini by the port's speed and CABLE_LENGTH, as
buffermgrd makes them; a missing row leaves them lossy, said by lab.status and config.lint.
The configs and lookup tables are tests/platform_configs.py's; the expected numbers come
from their values."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocelab.checks.lint import lint, load_lab
from rocelab.fabric.agent import main as agent_main
from rocelab.fabric.buffermgrd import pinned, read_lookup
from rocelab.fabric.config import BufferProfile, ConfigError, DerivedPgs
from rocelab.fabric.config_load import load, parse
from rocelab.fabric.model import Switch
from rocelab.fabric.model.buffers import IngressBuffers
from rocelab.fabric.model.pause import MAX_QUANTA
from rocelab.labs import state as states
from rocelab.labs import topology
from rocelab.labs.runtimes.netns import agent_argv
from rocelab.labs.state import LabState
from rocelab.fabric.buffermgrd import PG_LOOKUP_TARGET
from rocelab.labs.topology import TopologyError, table_notes
from tests.platform_configs import (LOSSLESS, MAP, SHARED_HEADROOM_LOOKUP, SPECTRUM_LOOKUP,
                                    TRADITIONAL_PORTS, VOQ_LOOKUP, VOQ_PORTS, Lookup,
                                    traditional, voq_line_card)
from tests.unit.test_forwarding import LEAF1_JSON
from tests.unit.test_lossless import FRAME, H2_PORT, S, blast_until_pfc, learned, udp_frame

(P1, (SPEED1, CABLE1, _)), (P2, (SPEED2, CABLE2, _)) = TRADITIONAL_PORTS.items()
LOSSLESS_RUN = f"{LOSSLESS[0]}-{LOSSLESS[-1]}"  # as buffermgrd writes the PGs' key
LEAF1_ROW = SHARED_HEADROOM_LOOKUP.row(100000, 40)  # leaf1's ports: 100G on 40 m cables


def lookup(tmp_path: Path, text: str, name: str = "pg_profile_lookup.ini"):
    path = tmp_path / name
    path.write_text(text)
    return read_lookup(path)


def profile_name(speed: int, cable: int) -> str:
    return f"pg_lossless_{speed}_{cable}m_profile"


def described(path: str, table: Lookup, speed: int, cable: int) -> str:
    """How a derived PG names the lookup row it came from."""
    r = table.row(speed, cable)
    return (f"{path} line {table.line(speed, cable)}: {speed} {cable}m size {r.size} "
            f"xon {r.xon} xoff {r.xoff} threshold {r.threshold}"
            + ("" if r.xon_offset is None else f" xon_offset {r.xon_offset}"))


@pytest.mark.parametrize("table", [SPECTRUM_LOOKUP, VOQ_LOOKUP, SHARED_HEADROOM_LOOKUP],
                         ids=["spectrum", "voq", "shared-headroom"])
def test_the_lookup_tables_read_as_buffermgrd_reads_them(tmp_path, table):
    read = lookup(tmp_path, table.text)
    assert sorted(read.rows) == sorted((r.speed, r.cable) for r in table.rows)
    for r in table.rows:
        got = read.rows[(r.speed, r.cable)]
        assert (got.size, got.xon, got.xoff, got.threshold, got.xon_offset, got.line) == (
            r.size, r.xon, r.xoff, r.threshold, r.xon_offset, table.line(r.speed, r.cable))


_WORDS = dict(zip(("speed", "cable", "size", "xon", "xoff", "threshold"), LEAF1_ROW.words()))


def _line(**changed: str) -> str:
    """LEAF1_ROW's line without its xon_offset, with ``changed`` columns."""
    return " ".join({**_WORDS, **changed}.values())


@pytest.mark.parametrize("line, problem", [
    (" ".join(list(_WORDS.values())[:4]), "4 columns; a row is speed cable size xon xoff "
                                          "threshold [xon_offset]"),
    (_line(cable=str(LEAF1_ROW.cable)),
     f"cable: '{LEAF1_ROW.cable}' is not a length like 40m"),
    (_line(xon=f"-{LEAF1_ROW.xon}"), f"xon: '-{LEAF1_ROW.xon}' is not a whole number"),
    (_line(threshold="low"), "threshold: 'low' is not an integer"),
    (_line(size="5" + "0" * 40), "size: a number of 41 digits is out of range"),
])
def test_a_bad_lookup_line_is_one_line_naming_file_line_and_column(tmp_path, line, problem):
    path = tmp_path / "pg_profile_lookup.ini"
    path.write_text(f"# speed cable size xon xoff threshold\n{line}\n")
    with pytest.raises(ConfigError) as error:
        read_lookup(path)
    assert str(error.value) == f"{path}: line 2: {problem}"


def test_buffermgrd_makes_the_lossless_pgs_from_the_lookup_row(tmp_path):
    """The traditional config has no lossless BUFFER_PG: each port gets PGs 3-4 with the
    profile of its speed and cable's row, in ingress_lossless_pool (dynamic: dynamic_th)."""
    table = lookup(tmp_path, SPECTRUM_LOOKUP.text)
    config = parse(traditional(), "trad/config_db.json", lookup=table)
    qos = config.qos
    expected = []
    for port, (speed, cable, _) in TRADITIONAL_PORTS.items():
        row, name = SPECTRUM_LOOKUP.row(speed, cable), profile_name(speed, cable)
        assert qos.buffer_profiles[name] == BufferProfile(
            name, "ingress_lossless_pool", row.size, dynamic_th=row.threshold, xon=row.xon,
            xoff=row.xoff)
        assert {pg: qos.buffer_pg[(port, pg)] for pg in LOSSLESS} == dict.fromkeys(LOSSLESS,
                                                                                   name)
        assert qos.buffer_pg[(port, 0)] == "ingress_lossy_profile"  # the config's, kept
        expected.append(DerivedPgs(port, LOSSLESS, name,
                                   described(table.path, SPECTRUM_LOOKUP, speed, cable)))
    assert config.pg_lookup == table.path
    assert config.derived_pgs == tuple(expected)
    assert config.derived_pgs[0].note == (
        f"BUFFER_PG|{P1}|{LOSSLESS_RUN}: {profile_name(SPEED1, CABLE1)} from "
        + described(table.path, SPECTRUM_LOOKUP, SPEED1, CABLE1))
    row = SPECTRUM_LOOKUP.row(SPEED1, CABLE1)
    pg = IngressBuffers.from_config(qos, config.ports).pg(P1, LOSSLESS[0])
    # no shared headroom pool: the PG reserves size, of which xoff is its headroom
    assert (pg.lossless, pg.priorities, pg.reserved, pg.headroom) == (
        True, (LOSSLESS[0],), row.size - row.xoff, row.xoff)


def test_pinned_writes_what_buffermgrd_made_into_the_config_as_it_runs(tmp_path):
    """A variant lab edits the config its switch runs after boot: the derived PGs, written
    in, load to the same buffers with nothing left to derive, and an edit reaches them."""
    table = lookup(tmp_path, SPECTRUM_LOOKUP.text)
    data = traditional()
    booted = parse(data, "trad/config_db.json", lookup=table)
    pinned(data, booted)
    again = parse(data, "trad/config_db.json", lookup=table)
    assert again.qos.buffer_pg == booted.qos.buffer_pg
    assert again.qos.buffer_profiles == booted.qos.buffer_profiles
    assert all(d.profile is None or d.key not in {m.key for m in again.derived_pgs}
               for d in booted.derived_pgs)
    name = booted.derived_pgs[0].profile
    data["BUFFER_PROFILE"][name]["xoff"] = "1024"
    assert parse(data, "trad/config_db.json", lookup=table).qos.buffer_profiles[name].xoff == 1024


def test_without_a_row_the_pgs_stay_lossy_and_say_why(tmp_path):
    table = lookup(tmp_path, SPECTRUM_LOOKUP.without(SPEED1, CABLE1).text)
    config = parse(traditional(), "trad/config_db.json", lookup=table)
    lossy = config.derived_pgs[0]
    assert (lossy.port, lossy.pgs, lossy.profile) == (P1, LOSSLESS, None)
    assert lossy.note == (f"BUFFER_PG|{P1}|{LOSSLESS_RUN}: stays lossy: {table.path} has no "
                          f"row for {SPEED1} {CABLE1}m ({P1}'s speed and cable)")
    assert (P1, LOSSLESS[0]) not in config.qos.buffer_pg
    assert not IngressBuffers.from_config(config.qos, config.ports).pg(P1, LOSSLESS[0]).lossless
    assert config.derived_pgs[1].profile == profile_name(SPEED2, CABLE2)  # P2's row


def _derived(tmp_path, edit, text: str = SPECTRUM_LOOKUP.text):
    cfg = traditional()
    edit(cfg)
    return parse(cfg, "trad/config_db.json", lookup=lookup(tmp_path, text))


def test_what_buffermgrd_leaves_alone(tmp_path):
    def cable(cfg):  # no cable length for P1, 0 m (an inactive port) for P2
        cfg["CABLE_LENGTH"][MAP] = {P2: "0m"}
    assert [d.why for d in _derived(tmp_path, cable).derived_pgs] == [
        f"{P1} has no CABLE_LENGTH: buffermgrd waits for one",
        f"{P2}'s cable is 0m: buffermgrd leaves an inactive port's PGs lossy"]

    def no_pool(cfg):
        del cfg["BUFFER_POOL"]["ingress_lossless_pool"]
        for name in ("ingress_lossless_zero_profile", "ingress_lossless_profile"):
            del cfg["BUFFER_PROFILE"][name]
        for entry in cfg["BUFFER_PORT_INGRESS_PROFILE_LIST"].values():
            entry["profile_list"] = "ingress_lossy_profile"
    assert {d.why for d in _derived(tmp_path, no_pool).derived_pgs} == {
        "BUFFER_POOL has no ingress_lossless_pool, the pool buffermgrd puts the profile in"}

    def given(cfg):  # a PG the config gives, a port with PFC from global alone, a dynamic model
        cfg["BUFFER_PG"][f"{P1}|{LOSSLESS_RUN}"] = {"profile": "ingress_lossy_profile"}
        cfg["PORT_QOS_MAP"]["global"]["pfc_enable"] = ",".join(map(str, LOSSLESS))
        del cfg["PORT_QOS_MAP"][P2]["pfc_enable"]
    config = _derived(tmp_path, given)
    assert config.derived_pgs == () and config.qos.buffer_pg[(P1, LOSSLESS[0])] == \
        "ingress_lossy_profile"
    dynamic = _derived(tmp_path, lambda cfg: cfg["DEVICE_METADATA"]["localhost"].update(
        buffer_model="dynamic"))
    assert dynamic.derived_pgs == () and (P1, LOSSLESS[0]) not in dynamic.qos.buffer_pg


def test_an_existing_profile_of_that_name_a_static_pool_and_the_pfc_to_pg_map(tmp_path):
    mapped = (5, 6)  # the PGs P2's lossless priorities map to

    def existing(cfg):
        cfg["BUFFER_PROFILE"][profile_name(SPEED1, CABLE1)] = {
            "pool": "ingress_lossless_pool", "size": "1000", "xoff": "500", "dynamic_th": "1"}
        cfg["BUFFER_POOL"]["ingress_lossless_pool"]["mode"] = "static"
        cfg["PFC_PRIORITY_TO_PRIORITY_GROUP_MAP"] = {"M": {str(p): str(pg) for p, pg in
                                                           zip(LOSSLESS, mapped)}}
        cfg["PORT_QOS_MAP"][P2]["pfc_to_pg_map"] = "M"
    config = _derived(tmp_path, existing)
    first, second = config.derived_pgs
    assert (first.profile, first.why) == (profile_name(SPEED1, CABLE1),
                                          f"BUFFER_PROFILE|{profile_name(SPEED1, CABLE1)} of "
                                          "the config")
    assert config.qos.buffer_profiles[first.profile].size == 1000
    assert (second.key, second.profile) == (f"{P2}|{mapped[0]}-{mapped[1]}",
                                            profile_name(SPEED2, CABLE2))
    made = config.qos.buffer_profiles[second.profile]
    # the row's threshold, as static_th
    assert (made.static_th, made.dynamic_th) == (SPECTRUM_LOOKUP.row(SPEED2, CABLE2).threshold,
                                                 None)
    # P1's row, on line 3, with a threshold no dynamic pool takes
    text = (f"# speed cable size xon xoff threshold\n{SPEED2} {CABLE2}m 1 1 1 0\n"
            f"{SPEED1} {CABLE1}m 1 1 1 9\n")
    with pytest.raises(ConfigError, match=r"line 3: threshold: 9 is not a dynamic_th \(-8..7\)"):
        _derived(tmp_path, lambda cfg: None, text)


def test_a_voq_line_card_gets_its_lossless_pgs_in_its_both_pool(tmp_path):
    table = lookup(tmp_path, VOQ_LOOKUP.text)
    config = parse(voq_line_card(), "lc1/config_db.json", lookup=table)
    assert [d.key for d in config.derived_pgs] == [f"{port}|{LOSSLESS_RUN}" for port in VOQ_PORTS]
    ingress = IngressBuffers.from_config(config.qos, config.ports)
    for port, (speed, cable) in VOQ_PORTS.items():
        row = VOQ_LOOKUP.row(speed, cable)
        profile = config.qos.buffer_profiles[profile_name(speed, cable)]
        assert (profile.pool, profile.size, profile.xon, profile.xoff, profile.dynamic_th,
                profile.xon_offset) == ("ingress_lossless_pool", row.size, row.xon, row.xoff,
                                        row.threshold, row.xon_offset)
        pg = ingress.pg(port, LOSSLESS[-1])
        # a shared headroom pool (the both pool's xoff): size is the reserved part, xoff the
        # headroom
        assert (pg.lossless, pg.reserved, pg.headroom, pg.shares_headroom) == (
            True, row.size, row.xoff, True)


def leaf1_left_to_buffermgrd(pool: int | None = None) -> dict:
    """leaf1 as SONiC renders a traditional config: no lossless PG, no profile for it."""
    data = json.loads(LEAF1_JSON.read_text())
    if pool is not None:
        data["BUFFER_POOL"]["ingress_lossless_pool"]["size"] = str(pool)
    del data["BUFFER_PROFILE"]["pg_lossless_100000_40m_profile"]
    for key in [k for k in data["BUFFER_PG"] if k.endswith("|3")]:
        del data["BUFFER_PG"][key]
    return data


def test_pfc_fires_at_the_derived_profiles_xoff_and_the_headroom_is_its_xoff(tmp_path):
    """leaf1 with the shared-headroom table's row for 100G / 40 m: the row's size reserved
    (its pool has a shared headroom pool), XOFF when the PG's shared bytes reach 2^threshold
    of the free pool, then exactly the row's xoff of headroom before headroom_exhausted."""
    row, pool = LEAF1_ROW, 262144  # test_lossless's pool
    assert row.threshold < 0 and row.xoff < 100 * FRAME  # (what the arithmetic below takes)
    config = parse(leaf1_left_to_buffermgrd(pool=pool), str(LEAF1_JSON),
                   lookup=lookup(tmp_path, SHARED_HEADROOM_LOOKUP.text))
    assert [d.key for d in config.derived_pgs] == [f"Ethernet{4 * i}|3" for i in range(4)]
    sw = learned(Switch(config, time_scale=S, rand=lambda: 0.5))
    _, quanta = blast_until_pfc(sw)
    assert quanta == [{3: MAX_QUANTA}]
    pg = sw.counters()["ports"][H2_PORT]["pgs"]["3"]
    assert (pg["profile"], pg["reserved"], pg["headroom"]) == (
        "pg_lossless_100000_40m_profile", row.size, row.xoff)
    # the rule (fabric.model.buffers.PgBuffer): reserved first, then shared bytes while the
    # frame stays below 2^threshold x the free pool; the frame that reaches it sends XOFF
    reserved = shared = 0
    while True:
        spill = FRAME - min(FRAME, row.size - reserved)
        reserved += FRAME - spill
        room = ((pool - shared) >> -row.threshold) - shared
        if spill < room:
            shared += spill
            continue
        shared += room
        break
    assert (pg["reserved_used"], pg["shared"]) == (reserved, shared)
    beyond = pg["headroom_used"]  # the XOFF frame's bytes past the threshold
    assert beyond == spill - room
    for _ in range(100):
        sw.receive(H2_PORT, udp_frame(26), 0.0)
    pg = sw.counters()["ports"][H2_PORT]["pgs"]["3"]
    fitted = (row.xoff - beyond) // FRAME  # whole frames the rest of the headroom holds
    assert pg["headroom_used"] == beyond + fitted * FRAME
    assert pg["drops"] == 100 - fitted and pg["xoff_count"] == 1


def with_lookup_bound(lab_copy, tmp_path, text: str | None) -> Path:
    """The leaf-spine lab with leaf1 left to buffermgrd and, unless ``text`` is None, a
    lookup table bound where SONiC images have it."""
    def bind(doc):
        if text is not None:
            doc["topology"]["nodes"]["leaf1"]["binds"].append(
                f"platform/pg_profile_lookup.ini:{PG_LOOKUP_TARGET}:ro")
    clab = lab_copy(edit=bind)
    (clab.parent / "configs" / "leaf1" / "config_db.json").write_text(
        json.dumps(leaf1_left_to_buffermgrd()))
    if text is not None:
        (clab.parent / "platform").mkdir()
        (clab.parent / "platform" / "pg_profile_lookup.ini").write_text(text)
    return clab


def test_a_bound_lookup_table_reaches_the_switch_lab_status_and_the_agent(lab_copy, tmp_path,
                                                                         monkeypatch):
    clab = with_lookup_bound(lab_copy, tmp_path, SHARED_HEADROOM_LOOKUP.text)
    topo = topology.load(clab)
    leaf1 = topo.nodes["leaf1"]
    assert leaf1.pg_lookup_path == clab.parent / "platform" / "pg_profile_lookup.ini"
    assert leaf1.config.qos.buffer_pg[("Ethernet8", 3)] == "pg_lossless_100000_40m_profile"
    assert table_notes(topo)["leaf1"]["derived_pgs"][0].startswith(
        "BUFFER_PG|Ethernet0|3: pg_lossless_100000_40m_profile from ")
    assert "leaf2" not in table_notes(topo)  # nothing left to buffermgrd there
    monkeypatch.setenv(states.STATE_ENV, str(tmp_path / "state"))
    argv = agent_argv(leaf1, LabState.new(topo.name, str(topo.path)), tmp_path / "a.sock")
    assert argv[argv.index("--pg-profile-lookup") + 1] == str(leaf1.pg_lookup_path)
    leaf2 = agent_argv(topo.nodes["leaf2"], LabState.new(topo.name, str(topo.path)),
                       tmp_path / "b.sock")
    assert "--pg-profile-lookup" not in leaf2


def test_a_bad_lookup_table_stops_the_lab_and_the_agent(lab_copy, tmp_path, capsys):
    clab = with_lookup_bound(lab_copy, tmp_path, " ".join(LEAF1_ROW.words()[:3]) + "\n")
    bad = clab.parent / "platform" / "pg_profile_lookup.ini"
    with pytest.raises(TopologyError) as error:
        topology.load(clab)
    assert str(error.value) == (f"{bad.resolve()}: line 1: 3 columns; a row is speed cable size "
                                "xon xoff threshold [xon_offset]")
    config = clab.parent / "configs" / "leaf1" / "config_db.json"
    assert agent_main(["--config", str(config), "--name", "leaf1", "--control",
                       str(tmp_path / "a.sock"), "--ports", "eth1",
                       "--pg-profile-lookup", str(bad)]) == 2
    assert capsys.readouterr().err == (f"leaf1: {bad}: line 1: 3 columns; a row is speed "
                                       "cable size xon xoff threshold [xon_offset]\n")


def test_lint_says_what_buffermgrd_made_and_what_it_could_not(lab_copy, tmp_path):
    made = lint(load_lab(with_lookup_bound(lab_copy, tmp_path / "a",
                                           SHARED_HEADROOM_LOOKUP.text)))
    derived = [f for f in made if f.rule == "derived-pgs"]
    assert {(f.severity, f.where) for f in derived} == {
        ("info", f"BUFFER_PG|Ethernet{4 * i}|3") for i in range(4)}
    assert {f.rule for f in made if f.severity == "error"} <= {"ecn-below-xoff"}  # judged too

    rowless = SHARED_HEADROOM_LOOKUP.without(LEAF1_ROW.speed, LEAF1_ROW.cable).text
    lossy = [f for f in lint(load_lab(with_lookup_bound(lab_copy, tmp_path / "b", rowless)))
             if f.rule == "lossless-chain" and f.where == "BUFFER_PG|Ethernet8|3|profile"]
    assert len(lossy) == 1 and lossy[0].severity == "error"
    assert "buffermgrd makes none at boot (" in lossy[0].why
    assert "has no row for 100000 40m (Ethernet8's speed and cable)" in lossy[0].why
    assert lossy[0].fix.startswith("give buffermgrd what it lacks (above), or add BUFFER_PG")

    unbound = [f for f in lint(load_lab(with_lookup_bound(lab_copy, tmp_path / "c", None)))
               if f.rule == "lossless-chain" and f.where == "BUFFER_PG|Ethernet8|3|profile"]
    assert PG_LOOKUP_TARGET in unbound[0].fix and "buffermgrd" not in unbound[0].why


def test_load_reads_the_lookup_table_it_is_given(tmp_path):
    config_path = tmp_path / "config_db.json"
    config_path.write_text(json.dumps(leaf1_left_to_buffermgrd()))
    ini = tmp_path / "pg_profile_lookup.ini"
    ini.write_text(SHARED_HEADROOM_LOOKUP.text)
    assert load(config_path).derived_pgs == ()
    assert len(load(config_path, pg_lookup=ini).derived_pgs) == 4
    with pytest.raises(ConfigError, match="cannot read"):
        load(config_path, pg_lookup=tmp_path / "missing.ini")
