"""config_db.json buffer tables: pools, profiles, the PG and queue bindings, the per-port
profile lists, cable lengths. One parser per table, as in ``fabric.config_tables``, which
lists them among the others in dependency order."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .config import BufferPool, BufferProfile
from .config_draft import Draft, assign, in_field, port_indices, queue_indices
from .config_fields import (Between, BufferPoolFields, BufferProfileFields, BufferRefFields,
                            Invalid, ProfileListFields, validate)
from .userinput import brief


def buffer_pool(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    entry = validate(BufferPoolFields, fields)
    draft.qos.buffer_pools[key] = BufferPool(key, entry.type, entry.mode, entry.size, entry.xoff)


def buffer_profile(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    entry = validate(BufferProfileFields, fields)
    pool = draft.ref("pool", entry.pool, "BUFFER_POOL")
    if (entry.dynamic_th is None) == (entry.static_th is None):
        raise Invalid("needs exactly one of dynamic_th and static_th")
    draft.qos.buffer_profiles[key] = BufferProfile(
        key, pool, entry.size, entry.dynamic_th, entry.static_th, entry.xon, entry.xoff, entry.xon_offset
    )


def buffer_pg(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    keys = port_indices(draft, key)
    profile = draft.ref("profile", validate(BufferRefFields, fields).profile, "BUFFER_PROFILE")
    assign(draft.qos.buffer_pg, keys, profile)


def buffer_queue(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    """An egress queue's profile: its pool must be an egress one (or ``both``), the buffer
    the queue's egress admission draws on. VoQ system-port keys: ``queue_indices``."""
    keys = queue_indices(draft, key)
    profile = draft.ref("profile", validate(BufferRefFields, fields).profile, "BUFFER_PROFILE")
    pool = draft.qos.buffer_pools[draft.qos.buffer_profiles[profile].pool]
    if pool.type == "ingress":
        raise Invalid(f"{profile} is in {pool.name}, an ingress pool: an egress queue needs "
                       "a profile of an egress pool", "profile")
    assign(draft.qos.buffer_queue, keys, profile)


def cable_length(draft: Draft, key: str, fields: dict[str, Any]) -> None:
    """``CABLE_LENGTH|AZURE``: {"Ethernet0": "40m"}; the key's name does not matter."""
    for port, length in fields.items():
        with in_field(port):
            draft.need_port(port)
            if port in draft.qos.cable_length_m:
                raise Invalid("cable length is already set by another CABLE_LENGTH entry")
            if not isinstance(length, str) or not length.endswith("m"):
                raise Invalid(f"{brief(length)} is not a length in metres like '40m'")
            draft.qos.cable_length_m[port] = Between(0)(length.removesuffix("m"))


def port_profile_list(direction: str) -> Callable[[Draft, str, dict[str, Any]], None]:
    """A parser for ``BUFFER_PORT_<direction>_PROFILE_LIST``: a port's profiles, one per pool
    of that direction (or ``both``), as SAI takes them (``QOS_<direction>_BUFFER_PROFILE_LIST``):
    each reserves its ``size`` for the port in its pool and bounds the port's share of the
    rest by its threshold (``fabric.model.port_buffers``)."""
    wrong = "egress" if direction == "ingress" else "ingress"
    lists = "port_ingress_profiles" if direction == "ingress" else "port_egress_profiles"

    def parse(draft: Draft, key: str, fields: dict[str, Any]) -> None:
        draft.need_port(key)
        entry = validate(ProfileListFields, fields)
        by_pool: dict[str, str] = {}
        for value in entry.profile_list:
            name = draft.ref("profile_list", value, "BUFFER_PROFILE")
            pool = draft.qos.buffer_pools[draft.qos.buffer_profiles[name].pool]
            if pool.type == wrong:
                raise Invalid(f"{name} is in {pool.name}, an {wrong} pool: an {direction} "
                              f"list needs profiles of {direction} (or both) pools",
                              "profile_list")
            if pool.name in by_pool:
                raise Invalid(f"{by_pool[pool.name]} and {name} are both in {pool.name}: a "
                              "port takes one profile per pool", "profile_list")
            by_pool[pool.name] = name
        getattr(draft.qos, lists)[key] = tuple(by_pool.values())

    return parse
