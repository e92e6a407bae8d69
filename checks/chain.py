"""The effective lossless chain of every switch port, as flat facts ``rocelab diff`` compares.

For each switch, QoS port and lossless class of the lab (``checks.classes``): where the
class goes (DSCP -> TC -> PG -> queue), whether PFC is on for its priority, the PG's buffer
profile (XON, XOFF/headroom, size, threshold), the queue's WRED band and ECN mode, the
queue's scheduler and the port's PFC watchdog. Each fact is a short string ("3", "DWRR w15",
"absent"), so that two labs' chains compare key by key and a change reads as ``before ->
after``.
"""
from __future__ import annotations

from ..fabric.config import SwitchConfig
from ..fabric.qos import pg_of_tc, port_setting, qos_ports, queue_of_tc, tc_of_dscp, tc_of_pcp
from .classes import RoceClass

ABSENT = "absent"
Chain = dict[str, dict[str, dict[str, str]]]  # switch -> "port class" -> fact -> value


def port_chain(config: SwitchConfig, port: str, c: RoceClass) -> dict[str, str]:
    """The facts of class ``c`` on ``port``, in the order the frame meets them."""
    qos = config.qos
    facts: dict[str, str] = {}
    if c.dscp is not None:
        tc, name = tc_of_dscp(config, port, c.dscp)
        facts["dscp->tc"] = f"{c.dscp}->{tc}" if name else f"{c.dscp}->{tc} (no map)"
    else:
        tc, name = tc_of_pcp(config, port, c.priority)
        facts["pcp->tc"] = f"{c.priority}->{tc}" if name else f"{c.priority}->{tc} (no map)"
    pg, _ = pg_of_tc(config, port, tc)
    queue, _ = queue_of_tc(config, port, tc)
    facts["tc->pg"] = str(pg)
    facts["tc->queue"] = str(queue)
    enabled, _ = port_setting(qos, port, "pfc_enable")
    facts["pfc_enable"] = ",".join(map(str, sorted(enabled))) or "none"
    facts["pfc on class"] = "yes" if c.priority in enabled else "no"
    profile_name = qos.buffer_pg.get((port, pg))
    if profile_name is None:
        facts["pg profile"] = ABSENT
    else:
        p = qos.buffer_profiles[profile_name]
        facts["pg profile"] = profile_name
        facts["xon"] = str(p.xon) if p.xon is not None else ABSENT
        facts["xoff (headroom)"] = str(p.xoff) if p.xoff is not None else ABSENT
        facts["pg size"] = str(p.size)
        facts["threshold"] = (f"static {p.static_th}" if p.static_th is not None
                              else f"dynamic {p.dynamic_th}")
    entry = qos.queues.get((port, queue))
    wred = qos.wred_profiles.get(entry.wred_profile) if entry and entry.wred_profile else None
    if wred is None:
        facts["wred"] = ABSENT
    else:
        band = (f"{wred.green.min_threshold}..{wred.green.max_threshold} "
                f"p{wred.green.drop_probability}" if wred.green is not None else "no green")
        facts["wred"] = f"{wred.name}: {band}, ecn {wred.ecn}"
    sched = qos.schedulers.get(entry.scheduler) if entry and entry.scheduler else None
    facts["scheduler"] = ABSENT if sched is None else (
        sched.type if sched.weight is None else f"{sched.type} w{sched.weight}")
    wd = qos.pfc_wd.get(port)
    watched, _ = port_setting(qos, port, "pfcwd_sw_enable")
    facts["watchdog"] = ABSENT if wd is None else (
        f"{wd.action} {wd.detection_time_ms}/{wd.restoration_time_ms} ms, "
        f"priorities {','.join(map(str, sorted(watched))) or 'none'}")
    return facts


def chain(configs: dict[str, SwitchConfig | None], classes: tuple[RoceClass, ...],
          errors: dict[str, str] | None = None) -> Chain:
    """Every switch's chain; a switch whose config did not load has one fact, its error."""
    out: Chain = {}
    for switch, config in sorted(configs.items()):
        if config is None:
            out[switch] = {"config": {"error": (errors or {}).get(switch, "does not load")}}
            continue
        out[switch] = {f"{port} {c.label}": port_chain(config, port, c)
                       for port in qos_ports(config) for c in classes}
    return out
