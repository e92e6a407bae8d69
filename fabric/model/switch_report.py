"""What a switch reports, and the resets its reporting has: counters (``sonic-clear``'s
watermarks, the fidelity figures), the time series' samples, the QoS tables as resolved.
Reads of the forwarding state ``fabric.model.switch`` keeps; nothing here forwards."""
from __future__ import annotations

from collections.abc import Iterable

from .bridge import MODE_NAMES, VlanBridge
from .buffers import IngressBuffers
from .counters import CpuCounters, drop_totals
from .pools import EgressPool, SharedPool
from .frames import ETH_HEADER_LEN, mac_text
from .ports import PortState
from .router import Router
from .router6 import Router6
from .scheduler import Lateness


class SwitchReport:
    """The reporting half of ``Switch``: the state it reads is the switch's own."""

    __slots__ = ()  # Switch holds the slots (switch.py)

    hostname: str
    time_scale: float | None
    ecn_marking: str
    pfc_watchdog: str
    cpu: CpuCounters
    _now: float
    _ports: dict[str, PortState]
    _vlans: dict[str, VlanBridge]
    _buffers: IngressBuffers
    _egress_pools: dict[str, EgressPool | SharedPool]
    _router: Router
    _router6: Router6
    _moved: set[str] | None
    _paused: set[str]

    def clear_fidelity(self) -> None:
        """Start the fidelity figures afresh (scheduler lateness, bytes after XOFF), as
        ``sonic-clear`` does watermarks: a run is judged by what happened during it."""
        for port in self._ports.values():
            port.egress.scheduler.lateness = Lateness()
        self._buffers.clear_fidelity()

    def clear_watermarks(self, kind: str) -> None:
        """``queue``: each egress queue's deepest so far becomes its depth now; ``pg``: the
        ingress PGs' and pools' peaks likewise (``sonic-clear queue|priority-group
        watermark``)."""
        if kind == "queue":
            for port in self._ports.values():
                scheduler = port.egress.scheduler
                scheduler.depth_peak = [scheduler.depth_bytes(q)
                                        for q in range(len(scheduler.depth_peak))]
        elif kind == "pg":
            self._buffers.clear_watermarks()
        else:
            raise ValueError(f"watermark kind {kind!r} is not queue or pg")

    def qos_tables(self) -> dict:
        """Per port, the PORT_QOS_MAP bindings classification resolved (which map, from the
        port's entry or ``global``) and the effective DSCP/dot1p -> TC, TC -> PG and
        TC -> queue tables, JSON-ready."""
        return {name: p.qos.as_dict() for name, p in self._ports.items()}

    def counters(self) -> dict:
        """Everything countable, JSON-ready. See ``fabric.model.counters`` for the meaning
        of each field; ``drops`` totals ports and cpu; ages are relative to the last
        ``now`` the switch was given."""
        now = self._now
        ports = {name: self._port_counters(p, now) for name, p in self._ports.items()}
        cpu = self.cpu.as_dict()
        fdb = [{"vlan": b.name, "vid": b.vid, "mac": mac_text(mac), "port": port.name,
                "age": round(now - seen, 3)}
               for b in self._vlans.values() for mac, (port, seen) in b.fdb.items()]
        return {
            "hostname": self.hostname,
            "time": now,
            "ports": ports,
            "cpu": cpu,
            "drops": drop_totals(*(p["drops"] for p in ports.values()),
                                 *(p["egress_drops"] for p in ports.values()), cpu["drops"]),
            "time_scale": self.time_scale,
            "ecn_marking": self.ecn_marking,
            "pfc_watchdog": self.pfc_watchdog,
            "pools": {name: pool.as_dict() for name, pool in self._buffers.pools.items()},
            "egress_pools": {name: pool.as_dict() for name, pool in self._egress_pools.items()},
            "fdb": fdb,
            "arp": self._router.neighbor_table(now),
            "ndp": self._router6.neighbor_table(now),
            "routes": self._router.route_table() + self._router6.route_table(),
            "vlans": {b.name: {"vid": b.vid, "members": {p.name: MODE_NAMES[m]
                                                         for p, m in b.members}}
                      for b in self._vlans.values()},
        }

    def sample(self, now: float, ports: Iterable[str] | None = None) -> dict:
        """The congestion state at ``now`` for a time series (the agent's ``trace``), JSON-
        ready and cheap enough to take every millisecond: per port (all, or ``ports``) the
        egress queue depths, the ingress PG occupancy and XOFF state, and the seconds each
        priority's egress pause still has to run (0.0: not paused); per pool its shared and
        headroom bytes in use. Reads only: ``counters`` has the totals and watermarks."""
        names = self._ports if ports is None else ports
        return {"ports": {name: self._port_sample(self._ports[name], now) for name in names},
                "pools": {name: {"used": pool.used, "headroom_used": pool.headroom_used}
                          for name, pool in self._buffers.pools.items()}}

    def sample_moved(self, now: float, ports: list[str], everything: bool = False) -> dict:
        """``sample`` of those of ``ports`` whose state may have moved since the last call
        (``everything``: all of them, as a trace's first line): a frame admitted to or freed
        from one of their PGs, queued or sent, a pause received, a timer run, or a pause
        still running at the last call (it counts down). What a trace takes every interval:
        a busy switch of 64 ports moves a few between two samples, and sampling every port
        cost the simulator four tenths of a 256-host incast."""
        moved, self._moved = self._moved, set()
        if moved is None:  # the first call: nothing was kept before it
            everything = True
        if not everything:
            moved |= self._paused
            ports = [name for name in ports if name in moved]
        sample = self.sample(now, ports)
        self._paused = {name for name, entry in sample["ports"].items()
                        if any(entry["pause_s"])}
        return sample

    @staticmethod
    def _port_sample(port: PortState, now: float) -> dict:
        # taken every sample interval of every traced port while the fabric is busy (the
        # simulator writes a hundred thousand per check run): plain reads, and the pause
        # list only worked out when some priority is paused
        ends = port.egress.pause.ends
        paused = max(ends) > now
        return {"queue_bytes": [q.depth for q in port.egress.scheduler.queues],
                "pg_bytes": [pg.used for pg in port.pgs],
                "xoff": [pg.xoff for pg in port.pgs],
                "pause_s": [round(end - now, 9) if end > now else 0.0 for end in ends]
                if paused else [0.0] * 8}

    def _port_counters(self, port: PortState, now: float) -> dict:
        """One port's counters: dispositions, per-PG buffer state, per-queue egress state,
        PFC both ways, and the fidelity figures (scheduler lateness, headroom use)."""
        entry = {"admin_up": port.admin_up, "oper_up": port.up, "role": port.role,
                 **port.counters.as_dict()}
        egress = port.egress.as_dict(now)
        for pg, buffer in enumerate(port.pgs):
            entry["pgs"][str(pg)].update(buffer.as_dict(now))
        for queue, fields in egress.pop("queues").items():
            entry["queues"][queue].update(fields)
        entry.update(egress)
        entry["pfc_tx"] = list(port.pfc_tx)
        entry["ecn_marked"] = sum(port.egress.ecn_marked)
        entry["egress_drops"] = port.egress.drop_totals()
        scheduler = port.egress.scheduler
        mtu_frame = port.mtu + ETH_HEADER_LEN
        entry["fidelity"] = {
            "lateness": scheduler.lateness.as_dict(),
            "mtu_frame_s": mtu_frame * 8 / scheduler.rate_bps,
            "headroom": [{**use._asdict(), "within": use.within}
                         for use in self._buffers.headroom_use(port.name)],
        }
        return entry
