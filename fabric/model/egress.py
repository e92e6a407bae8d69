"""One port's egress side: its eight queues and their scheduler, the pauses it received,
WRED/ECN per queue and the PFC watchdog of its lossless queues, built from the config.

The switch drives it: ``admit`` (WRED, watchdog drop) when a frame is forwarded to the port,
then ``PortScheduler.start_now`` if the port is idle or else ``PortScheduler.enqueue``;
``PortScheduler.dequeue`` when the wire is free, then ``depart``; ``poll`` on tick for the
watchdog. Per-queue counters live here: ECN marks, WRED and watchdog drops (the depth
watermark is the scheduler's).

The ECN marking point (``fabric.config.ECN_MARKING_POINTS``): marking at ``enqueue`` decides
on the depth the frame finds as it joins the queue; marking at ``dequeue`` decides on the
bytes still queued behind it as it leaves (HPCC's ``SwitchNotifyDequeue``), so the receiver
learns of the queue as it is now rather than one drain time ago (docs/concepts.md). Either way
WRED's drops of Not-ECT frames happen at enqueue: a frame is dropped before it takes buffer.
"""
from __future__ import annotations

from collections.abc import Callable

from ..config import Port, Qos
from .counters import NUM_QUEUES
from .egress_buffers import egress_pools, queue_buffers
from .pools import EgressPool
from .pause import NUM_PRIORITIES, PauseState
from .frames import ETH_HEADER_LEN, VLAN_TAG_LEN
from .scheduler import PortScheduler, disciplines, wire_rate_bps
from .watchdog import QueueWatchdog, WatchdogEvent
from .wred import DROP, MARK, NOT_ECT, Wred, ecn_field, mark_ce
from ..qos import bound, port_setting

# Egress drop reasons (counted on the egress port, apart from the ingress dispositions).
WRED_DROP = "wred"
PFC_WD_DROP = "pfc_wd"


def queue_priorities(qos: Qos, port: str) -> list[tuple[int, ...]]:
    """Per queue, the PFC priorities whose pause stops it (``pfc_to_queue_map``; identity
    without one, as SAI maps priority p to queue p by default)."""
    name, _ = bound(qos, port, "pfc_to_queue_map")
    mapping = qos.pfc_priority_to_queue[name] if name else {p: p for p in range(NUM_PRIORITIES)}
    return [tuple(p for p, q in sorted(mapping.items()) if q == queue)
            for queue in range(NUM_QUEUES)]


class EgressPort:
    """The queues of one port and what acts on them."""

    __slots__ = ("name", "rate_bps", "pause", "scheduler", "wred", "watchdogs", "_prios",
                 "_watchdog_of", "_queues", "ecn_marked", "dropped", "rand", "mark_at_dequeue",
                 "buffers", "tx_enabled")

    def __init__(self, qos: Qos, port: Port, time_scale: float | None,
                 rand: Callable[[], float], mark_at_dequeue: bool = True,
                 watchdog_scale: float = 1.0,
                 pools: dict[str, EgressPool] | None = None) -> None:
        """``watchdog_scale``: what the PFC watchdogs' configured times are multiplied by
        (``watchdog``'s profiles); ``mark_at_dequeue``: where WRED marks (module docstring);
        ``pools``: the switch's egress pools, which the BUFFER_QUEUE limits draw on."""
        self.name = port.name
        self.tx_enabled = True  # SAI_PORT_ATTR_PKT_TX_ENABLE (Switch.set_tx_enabled)
        self.rate_bps = (float("inf") if time_scale is None
                         else wire_rate_bps(port.speed_mbps, time_scale))
        self.pause = PauseState(self.rate_bps, port_setting(qos, port.name, "pfc_enable")[0])
        self._prios = queue_priorities(qos, port.name)
        self.scheduler = PortScheduler(self.rate_bps, disciplines(qos, port.name),
                                       port.mtu + ETH_HEADER_LEN + VLAN_TAG_LEN, self.pause,
                                       self._prios)
        self.wred: list[Wred | None] = []
        for queue in range(NUM_QUEUES):
            entry = qos.queues.get((port.name, queue))
            profile = entry.wred_profile if entry is not None else None
            self.wred.append(Wred(qos.wred_profiles[profile]) if profile else None)
        self.watchdogs: dict[int, QueueWatchdog] = {}
        settings = qos.pfc_wd.get(port.name)
        if settings is not None:
            for priority in sorted(port_setting(qos, port.name, "pfc_enable")[0]):
                for queue, prios in enumerate(self._prios):
                    if priority in prios and queue not in self.watchdogs:
                        self.watchdogs[queue] = QueueWatchdog(port.name, queue, settings,
                                                              qos.pfc_wd_poll_interval_ms,
                                                              watchdog_scale)
        # what ``admit`` reads per frame, indexed by queue rather than looked up or called
        self._watchdog_of = [self.watchdogs.get(q) for q in range(NUM_QUEUES)]
        self._queues = self.scheduler.queues
        self.ecn_marked = [0] * NUM_QUEUES
        self.dropped: dict[str, list[int]] = {}  # reason -> per queue
        self.rand = rand
        self.mark_at_dequeue = mark_at_dequeue
        # per queue: its BUFFER_QUEUE limit, None where there is none
        self.buffers = queue_buffers(qos, port.name,
                                     egress_pools(qos) if pools is None else pools)

    def admit(self, queue: int, frame: bytes) -> bytes | None:
        """The frame as it enters ``queue`` (CE-marked if WRED selected an ECT frame and the
        switch marks at enqueue), or None when it is dropped (WRED on a Not-ECT frame, or
        the queue's watchdog drops)."""
        watchdog = self._watchdog_of[queue]
        if watchdog is not None and watchdog.drops:
            self.count_drop(PFC_WD_DROP, queue)
            return None
        wred = self.wred[queue]
        if wred is not None:
            q = self._queues[queue]
            depth = q.depth
            if depth >= wred.min_bytes:
                ect = ecn_field(frame) != NOT_ECT
                if ect and wred.marks and self.mark_at_dequeue:
                    return frame  # ``depart`` decides
                verdict = wred.mark_or_drop(depth, ect, self.rand())
                if verdict is MARK:
                    self.ecn_marked[queue] += 1
                    frame = mark_ce(frame)
                elif verdict is DROP:
                    self.count_drop(WRED_DROP, queue)
                    return None
        return frame

    def depart(self, queue: int, frame: bytes) -> bytes:
        """The frame as it leaves ``queue`` (dequeued, or cut through an idle port): when the
        switch marks at dequeue, an ECT frame is CE-marked with WRED's probability for the
        bytes left in the queue behind it."""
        wred = self.wred[queue]
        if wred is None or not self.mark_at_dequeue or not wred.marks:
            return frame
        q = self._queues[queue]
        depth = q.depth
        if depth < wred.min_bytes or ecn_field(frame) == NOT_ECT:
            return frame
        if self.rand() < wred.probability(depth):
            self.ecn_marked[queue] += 1
            return mark_ce(frame)
        return frame

    def count_drop(self, reason: str, queue: int, n: int = 1) -> None:
        """Frames lost on this port's egress (WRED, watchdog, port down), per queue."""
        self.dropped.setdefault(reason, [0] * NUM_QUEUES)[queue] += n

    def drop_totals(self) -> dict[str, int]:
        return {reason: sum(per_queue) for reason, per_queue in sorted(self.dropped.items())}

    def poll(self, now: float, tx_packets: list[int]) -> list[WatchdogEvent]:
        """Run the watchdogs that are due; a storm stops (drop, forward) or a restoration
        resumes honouring PFC on the queue's priorities."""
        events = []
        for queue, watchdog in self.watchdogs.items():
            if now < watchdog.due:
                continue
            last_pfc = max((t for p in self._prios[queue]
                            if (t := self.pause.last_pfc_rx[p]) is not None), default=None)
            for event in watchdog.poll(now, self.scheduler.depth_bytes(queue),
                                       tx_packets[queue], last_pfc):
                for priority in self._prios[queue]:
                    self.pause.ignore(priority, watchdog.ignores_pfc, now)
                events.append(event)
        return events

    def as_dict(self, now: float) -> dict:
        pause = self.pause
        return {
            "pfc_rx": list(pause.pfc_rx), "pause_rx": pause.pause_rx,
            "paused_s": [pause.paused_seconds(p, now) for p in range(NUM_PRIORITIES)],
            "queues": {str(q): {"depth_bytes": self.scheduler.depth_bytes(q),
                                "buffer_profile": b.profile if (b := self.buffers[q]) else None,
                                "depth_packets": self.scheduler.depth_packets(q),
                                "watermark_bytes": self.scheduler.depth_peak[q],
                                "ecn_marked": self.ecn_marked[q],
                                "dropped": {r: n[q] for r, n in self.dropped.items()}}
                       for q in range(NUM_QUEUES)},
            "watchdog": {str(q): {"action": w.action, "stormed": w.stormed,
                                  "events": [e._asdict() for e in w.events]}
                         for q, w in self.watchdogs.items()},
        }
