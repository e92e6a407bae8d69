"""SONiC-VS (docker-sonic-vs) as it really starts, loads its configuration and gets ready, and
what it made of that configuration.

Checked against sonic-buildimage (platform/vs/docker-sonic-vs: Dockerfile.j2, start.sh,
supervisord.conf.j2), sonic-swss's test fixtures (tests/conftest.py) and sonic-sairedis's
virtual SAI (vslib), on their master branches; docs/containerlab.md names what was read.

- There is no systemd: the image's entrypoint is supervisord (containerlab's sonic-vs kind
  replaces it with bash and starts supervisord itself once the links exist), so ``config
  reload``, which stops and restarts systemd units, fails before it loads anything.
- ``start.sh`` (supervisord's first program, under ``bash -e``) moves a generated file onto
  ``/etc/sonic/config_db.json``: a bind mount there makes that move fail and SONiC never
  starts. Recent images first copy ``/var/sonic/config_db.json`` into place when it exists:
  binding the config read-only there is the whole load (``LoadMode.BIND``). Older images lack
  that line: the file is copied in and supervisord restarted, so that ``start.sh`` runs again
  on it (``LoadMode.RESTART``; redis keeps no dump, so the databases start empty).
- Ready, as sonic-swss's fixtures wait for it: ``start.sh`` EXITED in ``supervisorctl
  status``; ``PortConfigDone`` and ``PortInitDone`` in APPL_DB's ``PORT_TABLE``; ASIC_DB holding
  a port per front-panel port plus the CPU port. QoS objects come after the ports, so this
  module also waits for the buffer profiles and WRED profiles the config defines.
- BGP is not started by ``start.sh``: containerlab's kind runs ``supervisorctl start bgpd``
  without waiting for supervisord to answer, and a restart loses it; it is started again once
  the switch is ready (``already started`` exits 0).

Everything here is a command line or a parser: the runtime (labs/runtimes/containerlab.py) runs
them, tests feed them recorded output.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ..fabric.config import SwitchConfig
from .errors import LabError
from .topology import SONIC_STAGED_CONFIG

START_SCRIPT = "/usr/bin/start.sh"
START_PROGRAM = "start.sh"  # its supervisord program name
BGP_PROGRAM = "bgpd"
APPL_DB = 0
ASIC_DB = 1
PORT_CONFIG_DONE = "PORT_TABLE:PortConfigDone"  # portsyncd: every configured port is known
PORT_INIT_DONE = "PORT_TABLE:PortInitDone"  # portsyncd: every port's host interface exists
READY_TIMEOUT_S = 300.0
POLL_S = 2.0

# One round trip for every ASIC object readiness and configuration checks read: redis-cli would
# otherwise need a KEYS and one HGETALL per object, each a docker exec.
ASIC_DUMP_SCRIPT = """\
local out = {}
for _, pattern in ipairs(ARGV) do
  for _, key in ipairs(redis.call('KEYS', pattern)) do
    local flat = redis.call('HGETALL', key)
    local fields = {}
    for i = 1, #flat, 2 do fields[flat[i]] = flat[i + 1] end
    out[key] = fields
  end
end
return cjson.encode(out)
"""
ASIC_PORT = "ASIC_STATE:SAI_OBJECT_TYPE_PORT:"
ASIC_BUFFER_PROFILE = "ASIC_STATE:SAI_OBJECT_TYPE_BUFFER_PROFILE:"
ASIC_WRED = "ASIC_STATE:SAI_OBJECT_TYPE_WRED:"
LANES = "SAI_PORT_ATTR_HW_LANE_LIST"  # the CPU port has none


class LoadMode(str, Enum):
    """How an image takes its config_db.json (see the module docstring)."""

    BIND = "bind"  # start.sh copies /var/sonic/config_db.json: bind it there read-only
    RESTART = "restart"  # older start.sh: copy it to /etc/sonic, restart supervisord


# ---- which load the image supports -----------------------------------------------------------

def load_mode_argv(image: str, engine: str = "docker") -> list[str]:
    """Read the image's own start.sh, without starting SONiC: grep exits 0 when it copies the
    staged config, 1 when it does not, 2 when there is no start.sh."""
    return [engine, "run", "--rm", "--network", "none", "--entrypoint", "grep", image,
            "-q", "-F", SONIC_STAGED_CONFIG, START_SCRIPT]


def load_mode(image: str, returncode: int, output: str) -> LoadMode:
    if returncode == 0:
        return LoadMode.BIND
    if returncode == 1:
        return LoadMode.RESTART
    detail = _last_line(output)
    if returncode == 2:
        raise LabError(f"image {image}: no readable {START_SCRIPT} ({detail or 'grep exit 2'}): "
                       "not a docker-sonic-vs image")
    raise LabError(f"image {image}: cannot read its {START_SCRIPT} (docker run exit "
                   f"{returncode}{': ' + detail if detail else ''})")


# ---- supervisord -----------------------------------------------------------------------------

def status_argv(program: str = START_PROGRAM) -> list[str]:
    """Exits 3 while a program is not RUNNING (EXITED included): read its output, not its
    exit code."""
    return ["supervisorctl", "status", program]


def program_state(text: str, program: str = START_PROGRAM) -> str | None:
    """``start.sh    EXITED    Dec 01 03:04 PM`` -> ``EXITED``; None when not listed (or
    when supervisorctl could not reach supervisord)."""
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == program:
            return words[1]
    return None


def start_bgp_argv() -> list[str]:
    return ["supervisorctl", "start", BGP_PROGRAM]


def shutdown_argv() -> list[str]:
    """Asks supervisord to stop every program and exit; returns before it has."""
    return ["supervisorctl", "shutdown"]


def supervisord_pid_argv() -> list[str]:
    """Exits 0 while supervisord answers: polled until it fails after a shutdown."""
    return ["supervisorctl", "pid"]


def supervisord_argv() -> list[str]:
    """supervisord stays in the foreground (nodaemon=true): run it with docker exec -d."""
    return ["supervisord"]


# ---- readiness -------------------------------------------------------------------------------

def port_flags_argv() -> list[str]:
    """EXISTS with two keys answers how many exist: 2 once both flags are set."""
    return ["redis-cli", "-n", str(APPL_DB), "EXISTS", PORT_CONFIG_DONE, PORT_INIT_DONE]


def asic_dump_argv() -> list[str]:
    patterns = [f"{prefix}*" for prefix in (ASIC_PORT, ASIC_BUFFER_PROFILE, ASIC_WRED)]
    return ["redis-cli", "-n", str(ASIC_DB), "--raw", "EVAL", ASIC_DUMP_SCRIPT, "0", *patterns]


def start_script_gap(status_output: str) -> str | None:
    state = program_state(status_output)
    if state == "EXITED":
        return None
    if state is None:
        return (f"supervisorctl status lists no {START_PROGRAM} "
                f"({_last_line(status_output) or 'no output'})")
    return f"{START_PROGRAM} is {state}, not EXITED"


def port_flags_gap(output: str) -> str | None:
    if redis_integer(output) == 2:
        return None
    return (f"APPL_DB lacks {PORT_CONFIG_DONE} or {PORT_INIT_DONE} "
            f"(EXISTS answered {_last_line(output) or 'nothing'})")


def asic_gaps(config_db: dict[str, Any], wired: Iterable[str],
              asic: dict[str, dict[str, str]]) -> list[str]:
    """What ASIC_DB still lacks of the config: a port object for each wired PORT entry
    (``wired``, matched on its lanes, as ASIC ports carry no names), the CPU port, and as many
    buffer profiles and WRED profiles as the config defines. Empty: orchagent has programmed
    all of it."""
    ports = [fields for key, fields in asic.items() if key.startswith(ASIC_PORT)]
    lanes = {frozenset(_ints(f[LANES].partition(":")[2])) for f in ports if LANES in f}
    gaps = []
    for port in wired:
        want = frozenset(_ints((config_db.get("PORT") or {}).get(port, {}).get("lanes", "")))
        if want not in lanes:
            gaps.append(f"ASIC_DB has no port with {port}'s lanes {sorted(want)}")
    if not any(LANES not in f for f in ports):
        gaps.append("ASIC_DB has no CPU port")
    for table, prefix, what in (("BUFFER_PROFILE", ASIC_BUFFER_PROFILE, "buffer profiles"),
                                ("WRED_PROFILE", ASIC_WRED, "WRED profiles")):
        want_n = len(config_db.get(table) or {})
        got_n = sum(1 for key in asic if key.startswith(prefix))
        if got_n < want_n:
            gaps.append(f"ASIC_DB has {got_n} of the config's {want_n} {what}")
    return gaps


def wait_command(timeout_s: float = READY_TIMEOUT_S) -> str:
    """For containerlab's ``exec`` where nobody else waits (clabernetes): wait, bounded, for
    start.sh and both port flags, then start BGP. A failure is only logged there."""
    script = (f"until supervisorctl status {START_PROGRAM} | grep -q EXITED && "
              f'[ "$(redis-cli -n {APPL_DB} EXISTS {PORT_CONFIG_DONE} {PORT_INIT_DONE})" = 2 ]; '
              f"do sleep {POLL_S:g}; done; {shlex.join(start_bgp_argv())}")
    return shlex.join(["timeout", f"{timeout_s:g}", "bash", "-c", script])


# ---- read-back -------------------------------------------------------------------------------

@dataclass(frozen=True)
class AsicBufferProfile:
    size: int
    threshold_mode: str  # SAI_BUFFER_PROFILE_THRESHOLD_MODE_DYNAMIC or _STATIC
    dynamic_th: int | None = None
    static_th: int | None = None
    xon: int | None = None
    xoff: int | None = None


@dataclass(frozen=True)
class AsicWred:
    green_enable: bool
    green_min: int | None
    green_max: int | None
    green_drop_probability: int | None
    ecn_mark_mode: str  # SAI_ECN_MARK_MODE_ALL, ...


@dataclass(frozen=True)
class SonicSummary:
    """What a SONiC-VS switch made of its config: CONFIG_DB (what it loaded) and ASIC_DB (what
    orchagent programmed). Configuration checks compare these with the intended config_db.json
    (see ``mismatches``); there is no data plane behind them to test."""

    node: str
    config_pfc: dict[str, frozenset[int]]  # port -> PORT_QOS_MAP pfc_enable, from CONFIG_DB
    asic_pfc: dict[str, frozenset[int]]  # port -> SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL bits
    buffer_profiles: tuple[AsicBufferProfile, ...]
    wred_profiles: tuple[AsicWred, ...]
    config_db: dict[str, Any]  # everything sonic-cfggen printed, for other checks


def config_db_argv() -> list[str]:
    return ["sonic-cfggen", "-d", "--print-data"]


def redis_integer(text: str) -> int | None:
    """redis-cli prints ``1`` to a pipe and ``(integer) 1`` to a terminal."""
    words = text.split()
    return int(words[-1]) if words and re.fullmatch(r"-?\d+", words[-1]) else None


def parse_asic_dump(text: str) -> dict[str, dict[str, str]]:
    """The JSON object ASIC_DUMP_SCRIPT returns: key -> hash fields."""
    data = json.loads(text.strip() or "{}")
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError("ASIC_DB dump: expected a JSON object of hashes")
    return data


def summarize(node: str, config_db: dict[str, Any],
              asic: dict[str, dict[str, str]]) -> SonicSummary:
    """ASIC ports carry no names: they are matched to CONFIG_DB's PORT table on their lanes."""
    by_lanes = {frozenset(_ints(fields.get("lanes", ""))): port
                for port, fields in (config_db.get("PORT") or {}).items()}
    asic_pfc = {}
    for key, fields in asic.items():
        if not key.startswith(ASIC_PORT) or LANES not in fields:
            continue  # the CPU port has no lanes
        lanes = frozenset(_ints(fields[LANES].partition(":")[2]))
        port = by_lanes.get(lanes)
        mask = fields.get("SAI_PORT_ATTR_PRIORITY_FLOW_CONTROL")
        if port is not None and mask is not None:
            asic_pfc[port] = frozenset(p for p in range(8) if int(mask) >> p & 1)
    config_pfc = {port: frozenset(_ints(fields.get("pfc_enable", "")))
                  for port, fields in (config_db.get("PORT_QOS_MAP") or {}).items()
                  if port != "global"}
    return SonicSummary(
        node=node, config_pfc=config_pfc, asic_pfc=asic_pfc,
        buffer_profiles=tuple(_buffer_profile(f) for k, f in sorted(asic.items())
                              if k.startswith(ASIC_BUFFER_PROFILE)),
        wred_profiles=tuple(_wred(f) for k, f in sorted(asic.items())
                            if k.startswith(ASIC_WRED)),
        config_db=config_db)


def mismatches(intended: SwitchConfig, summary: SonicSummary) -> list[str]:
    """Where SONiC-VS's databases differ from the intended config: PFC priorities per port
    (CONFIG_DB and ASIC), lossless buffer profiles and WRED profiles (ASIC). Empty: it agrees."""
    out = []
    for port, qos in sorted(intended.qos.port_qos.items()):
        if port == "global":
            continue
        want = set(qos.pfc_enable)
        for where, got in (("CONFIG_DB", summary.config_pfc), ("ASIC_DB", summary.asic_pfc)):
            if set(got.get(port, frozenset())) != want:
                out.append(f"{summary.node}: {port}: pfc_enable {sorted(want)} but {where} has "
                           f"{sorted(got.get(port, frozenset()))}")
    for name, profile in sorted(intended.qos.buffer_profiles.items()):
        if profile.xoff is None:
            continue  # only lossless (headroom) profiles are compared
        if not any((p.size, p.xon, p.xoff) == (profile.size, profile.xon, profile.xoff)
                   for p in summary.buffer_profiles):
            out.append(f"{summary.node}: BUFFER_PROFILE|{name}: no ASIC buffer profile with "
                       f"size {profile.size}, xon {profile.xon}, xoff {profile.xoff}")
    for name, wred in sorted(intended.qos.wred_profiles.items()):
        if wred.green is None:
            continue
        want_wred = (wred.green.min_threshold, wred.green.max_threshold,
                     wred.green.drop_probability, "SAI_ECN_MARK_MODE_" + wred.ecn[4:].upper())
        if not any((w.green_min, w.green_max, w.green_drop_probability, w.ecn_mark_mode)
                   == want_wred for w in summary.wred_profiles):
            out.append(f"{summary.node}: WRED_PROFILE|{name}: no ASIC WRED profile with green "
                       f"{want_wred[0]}..{want_wred[1]} bytes, {want_wred[2]} %, {want_wred[3]}")
    return out


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.split(r"[,\s]+", text.strip()) if x]


def _optional_int(fields: dict[str, str], key: str) -> int | None:
    return int(fields[key]) if key in fields else None


def _last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1].strip() if lines else ""


def _buffer_profile(fields: dict[str, str]) -> AsicBufferProfile:
    prefix = "SAI_BUFFER_PROFILE_ATTR_"
    return AsicBufferProfile(
        size=int(fields.get(prefix + "BUFFER_SIZE", "0")),
        threshold_mode=fields.get(prefix + "THRESHOLD_MODE", ""),
        dynamic_th=_optional_int(fields, prefix + "SHARED_DYNAMIC_TH"),
        static_th=_optional_int(fields, prefix + "SHARED_STATIC_TH"),
        xon=_optional_int(fields, prefix + "XON_TH"),
        xoff=_optional_int(fields, prefix + "XOFF_TH"))


def _wred(fields: dict[str, str]) -> AsicWred:
    prefix = "SAI_WRED_ATTR_"
    return AsicWred(green_enable=fields.get(prefix + "GREEN_ENABLE") == "true",
                    green_min=_optional_int(fields, prefix + "GREEN_MIN_THRESHOLD"),
                    green_max=_optional_int(fields, prefix + "GREEN_MAX_THRESHOLD"),
                    green_drop_probability=_optional_int(fields, prefix + "GREEN_DROP_PROBABILITY"),
                    ecn_mark_mode=fields.get(prefix + "ECN_MARK_MODE", ""))
