"""What a switch does when no frame arrives: its timers (ARP and NDP retries and re-probes,
the FDB sweep, PFC refreshes of PGs still in XOFF, PFC watchdog polls), run by ``tick`` when
``next_timer`` says, and the watchdogs' time profile. The frames ``fabric.model.switch``
forwards move these timers; nothing here forwards."""
from __future__ import annotations

import math
from collections.abc import Callable

from . import refresh
from .bridge import VlanBridge
from .buffers import PgBuffer
from .egress import PFC_WD_DROP
from .pause import PfcSender
from .ports import PortState
from .router import Router
from .router6 import Router6
from .watchdog import FABRIC, WATCHDOG_PROFILES

FDB_SWEEP_INTERVAL_S = 1.0


class SwitchTimers:
    """The timer half of ``Switch``: the state it runs on and the sending it triggers are the
    switch's own."""

    __slots__ = ()  # Switch holds the slots (switch.py)

    time_scale: float | None
    pfc_watchdog: str
    _now: float
    _ports: dict[str, PortState]
    _vlans: dict[str, VlanBridge]
    _router: Router
    _router6: Router6
    _moved: set[str] | None
    _transmit: Callable[[list[tuple[PortState, bytes, tuple]],
                         tuple[PgBuffer, int, tuple] | None, float], None]
    _send_pfc: Callable[[PortState, dict[int, int], PfcSender], None]
    _flush: Callable[[PortState, int, float, str], None]
    take_control: Callable[[], list[tuple[str, bytes]]]

    def _init_timers(self) -> None:
        """What ``next_timer`` looks at: the pending PFC refreshes, kept as senders send
        (``refresh``), and the watchdogs there are, whose earliest poll (and the FDB sweep)
        is kept until one moves: a tick (watchdog polls, the sweep), a watchdog rescaled.
        Called once the ports have their egress (their watchdogs)."""
        self._next_sweep = 0.0
        self._refreshes: list[refresh.Entry] = []
        self._refresh_moved = False  # a refresh pushed since next_timer (timers_moved)
        self._watchdogs = [w for p in self._ports.values() for w in p.egress.watchdogs.values()]
        self._watchdog_at = -math.inf  # the earliest poll due, as of the last tick
        self._timers_moved = True
        self._own_timer: float | None = None

    def tick(self, now: float) -> list[tuple[str, bytes]]:
        """Run timers up to ``now``: ARP retries, give-ups and re-probes, FDB aging, PFC
        refreshes of PGs still in XOFF, PFC watchdog polls. Returns frames to send now."""
        self._now = now
        out: list[tuple[PortState, bytes, tuple]] = []
        for router in (self._router, self._router6):
            at = router.next_timer()
            if at is not None and now >= at:  # else its tick would find nothing due
                router.tick(now, out)
        if now >= self._next_sweep:
            for bridge in self._vlans.values():
                bridge.sweep(now)
            self._next_sweep = now + FDB_SWEEP_INTERVAL_S
        self._transmit(out, None, 0, None, now)
        self._timers_moved = True
        polling = now >= self._watchdog_at
        if polling:  # a watchdog poll is due: every port, in order
            if self._moved is not None:  # a watchdog may have cut a pause short
                self._moved.update(self._ports)
            ports = self._ports.values()
        else:  # only PFC refreshes: the ports with one due, in the same order
            due = refresh.due(self._refreshes, now)
            ports = [p for name, p in self._ports.items() if name in due] if due else []
        for port in ports:
            for sender in port.pfc:
                if sender is not None and sender.xoff:
                    self._send_pfc(port, sender.tick(now), sender)
            if polling:
                for event in port.egress.poll(now, port.counters.queue_tx_packets):
                    if port.egress.watchdogs[event.queue].drops:
                        self._flush(port, event.queue, now, PFC_WD_DROP)
        if polling:
            self._watchdog_at = min((w.due for w in self._watchdogs), default=math.inf)
        return self.take_control()

    def next_timer(self) -> float | None:
        """The earliest time ``tick`` has work: the PFC refresh of a PG in XOFF (due when
        half its pause has run), a PFC watchdog poll, an ARP or NDP retry or re-probe, the
        FDB sweep; None when there is none. Call ``tick`` then, so refreshes leave when due
        whatever the caller's clock (the agent's, a virtual one). A received pause ending
        is not a tick's work: ``next_send_time`` counts a paused queue from its end."""
        self._refresh_moved = False
        if self._timers_moved:
            own = self._next_sweep if self._vlans else None
            for watchdog in self._watchdogs:
                if own is None or watchdog.due < own:
                    own = watchdog.due
            self._own_timer, self._timers_moved = own, False
        due = self._own_timer
        if self._refreshes:  # a PG in XOFF (or a stale entry)
            at = refresh.earliest(self._refreshes)
            if at is not None and (due is None or at < due):
                due = at
        for router in (self._router, self._router6):
            at = router.next_timer()  # kept by the router until a neighbour's timer moves
            if at is not None and (due is None or at < due):
                due = at
        return due

    def set_watchdog_profile(self, profile: str) -> None:
        """Switch every PFC watchdog to ``profile`` (``watchdog.WATCHDOG_PROFILES``); the
        next poll is due at once."""
        scale = self._watchdog_scale(profile, self.time_scale)
        for watchdog in self._watchdogs:
            watchdog.rescale(scale)
        self._watchdog_at = -math.inf
        self._timers_moved = True
        self.pfc_watchdog = profile

    @staticmethod
    def _watchdog_scale(profile: str, time_scale: float | None) -> float:
        if profile not in WATCHDOG_PROFILES:
            raise ValueError(f"PFC watchdog profile {profile!r} is not one of "
                             f"{', '.join(WATCHDOG_PROFILES)}")
        return time_scale if profile == FABRIC and time_scale is not None else 1.0
