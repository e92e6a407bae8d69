"""What SONiC's buffermgrd does at boot in the traditional buffer model: lossless PGs from the
platform's ``pg_profile_lookup.ini``.

A config rendered by SONiC's templates for a traditional-model platform often has no lossless
``BUFFER_PG`` at all (only the lossy ``|0``): buffermgrd (sonic-swss ``cfgmgr/buffermgr.cpp``,
``doSpeedUpdateTask``) adds them once it knows a port's speed, its ``CABLE_LENGTH`` and its
``PORT_QOS_MAP`` ``pfc_enable``:

- the row of ``pg_profile_lookup.ini`` for that speed and cable length (``# speed cable
  size xon xoff threshold [xon_offset]``) becomes the profile
  ``pg_lossless_<speed>_<cable>_profile`` in ``ingress_lossless_pool``, its threshold a
  ``dynamic_th`` or ``static_th`` as the pool's ``mode`` says; a profile of that name already
  in the config is used as it is;
- the port's lossless PGs get it: ``BUFFER_PG|<port>|3-4``.

buffermgrd reads only a port's own ``pfc_enable`` (it ignores ``PORT_QOS_MAP|global``), skips
a port whose cable is ``0m`` (an inactive port), and creates nothing when the lookup has no
row for the speed and cable, or when ``ingress_lossless_pool`` is missing: those PGs stay
lossy. (On Mellanox and Barefoot platforms it also leaves admin-down ports out; here they get
their PGs like any port, which changes nothing: a down port forwards nothing.)

``derive`` does the same for the lossless PGs the config leaves out (a ``BUFFER_PG`` the
config gives is kept as it is) and records each port's outcome in
``SwitchConfig.derived_pgs``, so that ``lab.status`` and ``config.lint`` say what was made
and what was not. buffermgrd takes the ``pfc_enable`` priorities as PG numbers; here they go
through the port's ``pfc_to_pg_map`` (its own, else ``global``'s; identity without one) to
the PG that accounts and pauses each priority, which is the same PG with SONiC's maps.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

from .config import BufferProfile, ConfigError, DerivedPgs, SwitchConfig
from .qos import bound
from .userinput import MAX_INT_DIGITS, brief, read_text

# Where a SONiC image has its platform's PG lookup table, read at boot: a switch node that
# binds its file there gets its lossless PGs derived from it.
PG_LOOKUP_TARGET = "/usr/share/sonic/hwsku/pg_profile_lookup.ini"

LOOKUP_POOL = "ingress_lossless_pool"  # buffermgrd's INGRESS_LOSSLESS_PG_POOL_NAME
_COLUMNS = ("speed", "cable", "size", "xon", "xoff", "threshold", "xon_offset")


@dataclass(frozen=True)
class LookupRow:
    """One line of pg_profile_lookup.ini: the lossless PG profile for a speed and cable."""

    speed_mbps: int
    cable_m: int
    size: int
    xon: int
    xoff: int
    threshold: int  # dynamic_th or static_th, as the lossless pool's mode says
    xon_offset: int | None
    line: int

    def describe(self, path: str) -> str:
        return (f"{path} line {self.line}: {self.speed_mbps} {self.cable_m}m size {self.size} "
                f"xon {self.xon} xoff {self.xoff} threshold {self.threshold}"
                + (f" xon_offset {self.xon_offset}" if self.xon_offset is not None else ""))


@dataclass(frozen=True)
class PgLookup:
    """A platform's pg_profile_lookup.ini, read: its rows by (speed, cable metres)."""

    path: str
    rows: dict[tuple[int, int], LookupRow]


def read_lookup(path: str | os.PathLike[str]) -> PgLookup:
    """Read pg_profile_lookup.ini; a malformed line is one ConfigError naming the file, the
    line and the column."""
    name = os.fspath(path)
    text = read_text(name, ConfigError)
    rows: dict[tuple[int, int], LookupRow] = {}
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if len(words) not in (6, 7):
            raise ConfigError(f"{name}: line {number}: {len(words)} columns; a row is "
                              f"{' '.join(_COLUMNS[:6])} [xon_offset]")
        row = LookupRow(*_numbers(name, number, words), line=number)
        rows[(row.speed_mbps, row.cable_m)] = row  # a later row wins, as in buffermgrd's map
    return PgLookup(name, rows)


def _numbers(path: str, line: int, words: list[str]) -> list[int | None]:
    values: list[int | None] = []
    for column, word in zip(_COLUMNS, words):
        if column == "cable":  # buffermgrd matches "40m" as CABLE_LENGTH writes it
            ok, text = word.endswith("m") and word[:-1].isdigit(), word[:-1]
        else:
            text = word
            ok = (text.removeprefix("-") if column == "threshold" else text).isdigit()
        if not ok or not text.isascii():
            what = "a length like 40m" if column == "cable" else (
                "an integer" if column == "threshold" else "a whole number")
            raise ConfigError(f"{path}: line {line}: {column}: {brief(word)} is not {what}")
        if len(text) > MAX_INT_DIGITS:
            raise ConfigError(f"{path}: line {line}: {column}: a number of {len(text)} digits "
                              "is out of range")
        values.append(int(text))
    return values + [None] * (len(_COLUMNS) - len(values))


def derive(config: SwitchConfig, lookup: PgLookup) -> SwitchConfig:
    """``config`` with the lossless PGs buffermgrd would add at boot (module docstring); a
    dynamic-model config is returned as it is (buffermgrd's dynamic mode is not emulated)."""
    if config.buffer_model != "traditional":
        return replace(config, pg_lookup=lookup.path)
    qos = config.qos
    profiles, pgs = dict(qos.buffer_profiles), dict(qos.buffer_pg)
    derived: list[DerivedPgs] = []
    for port, settings in qos.port_qos.items():
        if port == "global" or not settings.pfc_enable:
            continue
        missing = [pg for pg in _lossless_pgs(config, port, settings.pfc_enable)
                   if (port, pg) not in pgs]
        for run in _runs(missing):
            outcome = _profile_for(config, port, lookup, profiles)
            if isinstance(outcome, BufferProfile):
                profiles[outcome.name] = outcome
                pgs.update({(port, pg): outcome.name for pg in run})
                derived.append(DerivedPgs(port, run, outcome.name, _source(config, port,
                                                                            lookup)))
            else:
                derived.append(DerivedPgs(port, run, None, outcome))
    return replace(config, qos=replace(qos, buffer_profiles=profiles, buffer_pg=pgs),
                   pg_lookup=lookup.path, derived_pgs=tuple(derived))


def _lossless_pgs(config: SwitchConfig, port: str, priorities: frozenset[int]) -> list[int]:
    """The PGs that account the port's ``pfc_enable`` priorities (module docstring)."""
    name, _ = bound(config.qos, port, "pfc_to_pg_map")
    if name is None:
        return sorted(priorities)
    mapping = config.qos.pfc_priority_to_pg[name]
    return sorted({mapping[p] for p in priorities if p in mapping})


def _runs(pgs: list[int]) -> list[tuple[int, ...]]:
    """Consecutive PGs in one BUFFER_PG key each (``3-4``), as buffermgrd writes them."""
    runs: list[list[int]] = []
    for pg in pgs:
        if runs and runs[-1][-1] == pg - 1:
            runs[-1].append(pg)
        else:
            runs.append([pg])
    return [tuple(run) for run in runs]


def _profile_for(config: SwitchConfig, port: str, lookup: PgLookup,
                 profiles: dict[str, BufferProfile]) -> BufferProfile | str:
    """The profile buffermgrd gives the port's lossless PGs, or why it gives none."""
    speed = config.ports[port].speed_mbps
    cable = config.qos.cable_length_m.get(port)
    if cable is None:
        return f"{port} has no CABLE_LENGTH: buffermgrd waits for one"
    if cable == 0:
        return f"{port}'s cable is 0m: buffermgrd leaves an inactive port's PGs lossy"
    name = f"pg_lossless_{speed}_{cable}m_profile"
    if name in profiles:
        return profiles[name]
    row = lookup.rows.get((speed, cable))
    if row is None:
        return f"{lookup.path} has no row for {speed} {cable}m ({port}'s speed and cable)"
    pool = config.qos.buffer_pools.get(LOOKUP_POOL)
    if pool is None:
        return f"BUFFER_POOL has no {LOOKUP_POOL}, the pool buffermgrd puts the profile in"
    static = pool.mode == "static"
    if not static and not -8 <= row.threshold <= 7:
        raise ConfigError(f"{lookup.path}: line {row.line}: threshold: {row.threshold} is not "
                          f"a dynamic_th (-8..7), as {LOOKUP_POOL} (mode dynamic) needs")
    return BufferProfile(name, LOOKUP_POOL, row.size,
                         dynamic_th=None if static else row.threshold,
                         static_th=row.threshold if static else None,
                         xon=row.xon, xoff=row.xoff, xon_offset=row.xon_offset)


def _source(config: SwitchConfig, port: str, lookup: PgLookup) -> str:
    """Where the derived profile came from: the lookup row, or the config's own profile."""
    speed = config.ports[port].speed_mbps
    cable = config.qos.cable_length_m[port]
    name = f"pg_lossless_{speed}_{cable}m_profile"
    if name in config.qos.buffer_profiles:
        return f"BUFFER_PROFILE|{name} of the config"
    return lookup.rows[(speed, cable)].describe(lookup.path)


def pinned(data: dict, config: SwitchConfig) -> None:
    """Write the PGs buffermgrd made at boot for ``config`` into its config_db.json
    ``data``, as SONiC's buffermgrd writes them into CONFIG_DB: the config the switch runs
    after boot, for an edit that must reach those PGs too (a variant lab's smaller
    headroom). A profile of the same name already there is kept, as buffermgrd keeps it."""
    profiles = data.setdefault("BUFFER_PROFILE", {})
    pgs = data.setdefault("BUFFER_PG", {})
    for made in config.derived_pgs:
        if made.profile is None:
            continue
        profile = config.qos.buffer_profiles[made.profile]
        profiles.setdefault(profile.name, {
            field: str(value) for field, value in (
                ("pool", profile.pool), ("size", profile.size), ("xon", profile.xon),
                ("xoff", profile.xoff), ("dynamic_th", profile.dynamic_th),
                ("static_th", profile.static_th), ("xon_offset", profile.xon_offset))
            if value is not None})
        pgs[made.key] = {"profile": profile.name}
