"""Read a SONiC config_db.json into a validated ``SwitchConfig``: ``load`` and ``parse``.

The emulated switch reads the tables SONiC uses, with SONiC's names and semantics, and
rejects what it does not understand: every error is one line,
``<file>: <TABLE>|<key>: <field>: <problem>``, so a config that loads here is one an
engineer can load on a SONiC switch. The per-table parsers are in ``fabric.config_tables``,
the field schemas in ``fabric.config_fields``, the result's types in ``fabric.config``.
"""
from __future__ import annotations

import difflib
import os
from dataclasses import replace
from typing import Any

from .buffermgrd import PgLookup, derive, read_lookup
from .config import ConfigError, SwitchConfig
from .config_fields import Invalid, one_line
from .config_draft import Draft
from .config_tables import TABLES
from .tables import (NOT_EMULATED, UNEMULATED_LABEL, UnemulatedPolicy, not_emulated_reason,
                     refused_reason)
from .userinput import MAX_KEY_SHOWN, JsonError, brief, decode_json, read_text, shown_key

# parse() walks the tables in dependency order (PORT before anything naming a port, maps
# before PORT_QOS_MAP, ...), so every entry can check its references against what is
# already accepted. Entry parsers raise Invalid(problem, field); parse() adds the file,
# table and key, which keeps every message on one line in one format.


def load(path: str | os.PathLike[str], unemulated: UnemulatedPolicy = "refuse",
         pg_lookup: str | os.PathLike[str] | None = None) -> SwitchConfig:
    """Read and validate a config_db.json file (``unemulated``: see ``parse``). ``pg_lookup``:
    the platform's pg_profile_lookup.ini, from which the lossless PGs the config leaves out
    are made as buffermgrd makes them at boot (``fabric.buffermgrd``)."""
    name = os.fspath(path)
    text = read_text(name, ConfigError, "invalid JSON: not UTF-8 text")
    try:
        data = decode_json(text, name)
    except JsonError as e:
        raise ConfigError(str(e), e.where) from None
    lookup = read_lookup(pg_lookup) if pg_lookup is not None else None
    return parse(data, name, unemulated, lookup)


def parse(data: dict[str, Any], path: str, unemulated: UnemulatedPolicy = "refuse",
          lookup: PgLookup | None = None) -> SwitchConfig:
    """Validate config_db.json content; *path* only names the source in error messages.
    ``unemulated``: "skip" runs without tables whose data-plane meaning is not emulated
    (``fabric.tables.REFUSED``) instead of refusing the file; they are listed in ``skipped``.
    ``lookup``: a pg_profile_lookup.ini read, for ``fabric.buffermgrd.derive``."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object of tables")
    _reject_unknown_tables(data, path, unemulated)
    draft = Draft()
    for table, parse_entry in TABLES.items():
        entries = data.get(table, {})
        if not isinstance(entries, dict):
            raise ConfigError(one_line(f"{path}: {table}: must be a JSON object of entries"))
        for key, fields in entries.items():
            try:
                if not isinstance(fields, dict):
                    raise Invalid(f"entry must be a JSON object, not {brief(fields)}")
                parse_entry(draft, key, fields)
            except Invalid as invalid:
                shown = shown_key(key)
                where = "|".join([table, shown, *([invalid.field] if invalid.field else [])])
                raise ConfigError(invalid.message(path, f"{table}|{shown}"), where) from None
    config = draft.finish(path)
    if lookup is not None:
        config = derive(config, lookup)
    return replace(config,
                   not_emulated=tuple(sorted(t for t in data if not_emulated_reason(t))),
                   skipped=tuple(sorted(t for t in data if t not in TABLES
                                        and refused_reason(t))))


def _reject_unknown_tables(data: dict[str, Any], path: str, unemulated: UnemulatedPolicy) -> None:
    """A table we would silently skip is config the engineer believes is in force: tables
    with no data-plane meaning pass (listed as not emulated), tables whose meaning is not
    emulated are refused unless the lab runs without them, anything else is unknown."""
    for table in data:
        if table in TABLES or not_emulated_reason(table):
            continue
        reason = refused_reason(table)
        if reason and unemulated == "skip":
            continue
        if reason:
            raise ConfigError(one_line(
                f"{path}: {shown_key(table)}: not emulated ({reason}); the topology label "
                f"{UNEMULATED_LABEL}: skip runs the lab without it"), table)
        known = [*TABLES, *NOT_EMULATED]
        close = difflib.get_close_matches(table[:MAX_KEY_SHOWN], known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigError(one_line(
            f"{path}: {shown_key(table)}: unknown table ({hint}rocelab reads the tables listed in docs/lab-guide.md)"))
