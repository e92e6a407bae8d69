"""PFC watchdog: detect a PFC storm on one lossless queue, contain it, notice its end.

Per ``PFC_WD|<port>`` (action, detection_time, restoration_time) and
``PFC_WD|GLOBAL: POLL_INTERVAL``, for each lossless queue of the port. The rules are
SONiC's (docs/design.md, "PFC watchdog"):

- storm: the queue holds bytes, transmits nothing, and PFC keeps arriving, for the
  detection time. A poll sees that over the interval since the previous poll: bytes held
  at both polls, the transmit count unchanged, and a pausing PFC frame received within the
  last poll interval (SONiC's detect plugin: occupancy, ``QUEUE_STAT_PACKETS`` unchanged,
  ``PFC_RX_PKTS`` risen). The storm is taken to start at the previous poll of its first such
  interval, when the backlogged queue was already held, and is declared once it has lasted
  detection_time: never earlier than detection_time after it really began, so a shorter
  storm never triggers (SONiC's plugin counts the same intervals, in whole poll intervals);
- restored: no pausing PFC received for the restoration time;
- actions while stormed: ``drop``, the queue stops honouring PFC and its packets, queued
  and arriving, are dropped; ``forward``, it stops honouring PFC and transmits; ``alert``,
  the storm is only reported (the queue stays paused).

Timing: the watchdog's detection time, restoration time and poll interval are compared with
data-plane events (pauses of 0xFFFF quanta, incasts that hold a queue for milliseconds), so
in a data-plane-faithful run they run in fabric time like every such constant: scaled by the
lab's S (docs/design.md, "Keeping a real-time emulation honest": a 200 ms watchdog in wall
time at S = 3000 is 67 us of fabric time, shorter than ordinary congestion pauses). That is
the ``fabric`` profile. The storm check has a short profile of its own, ``storm-check``:
the configured milliseconds as wall time, so that a storm of a second or two shows detection
and restoration within the check; a congestion run must not use it (``WATCHDOG_PROFILES``).

The caller polls at ``due``: one poll interval after the last poll, or sooner when a
detection or restoration deadline falls in between. A storm is then declared between
detection_time and detection_time + poll interval after it began, and restored exactly
restoration_time after the last PFC. (A storm shows only after one whole held interval, so
a detection_time shorter than the poll interval acts as one interval.) Polling strictly
every interval is also correct: a deadline then waits for the next poll, which keeps the
bound whenever detection_time is a multiple of the interval (SONiC's defaults: 200 ms and
200 ms).
"""
from __future__ import annotations

from typing import NamedTuple

from ..config import PfcWatchdog

STORM = "storm"
RESTORE = "restore"

# Watchdog time profiles: the clock its times run on (module docstring, "Timing").
FABRIC = "fabric"  # times x S: every data-plane-faithful run
STORM_CHECK = "storm-check"  # the configured times as wall time: the storm check only
WATCHDOG_PROFILES = (FABRIC, STORM_CHECK)

# Poll times come from a float clock: a poll meant for a deadline may land an ulp short.
_EPSILON_S = 1e-9


class WatchdogEvent(NamedTuple):
    time: float
    kind: str  # STORM or RESTORE
    port: str
    queue: int
    action: str  # drop, forward or alert


class QueueWatchdog:
    """The PFC watchdog of one (port, lossless queue)."""

    __slots__ = ("port", "queue", "action", "detection_s", "restoration_s", "interval_s",
                 "stormed", "drops", "ignores_pfc", "due", "events", "_polled_at", "_depth",
                 "_tx", "_storm_from", "_settings", "_poll_ms")

    def __init__(self, port: str, queue: int, settings: PfcWatchdog,
                 poll_interval_ms: int, time_scale: float = 1.0) -> None:
        """``time_scale``: what the configured times are multiplied by (S in the ``fabric``
        profile, 1 in ``storm-check``; ``rescale`` changes it)."""
        self.port = port
        self.queue = queue
        self.action = settings.action
        self._settings = settings
        self._poll_ms = poll_interval_ms
        self.rescale(time_scale)
        self._set_stormed(False)
        self.due = float("-inf")  # when the caller should poll next
        self.events: list[WatchdogEvent] = []
        self._polled_at: float | None = None
        self._depth = 0
        self._tx = 0
        self._storm_from: float | None = None  # a suspected storm's start

    def rescale(self, time_scale: float) -> None:
        """Run the configured times x ``time_scale`` from now on; the next poll is due at
        once, so that a shorter interval takes effect without waiting out the old one."""
        self.detection_s = self._settings.detection_time_ms / 1000 * time_scale
        self.restoration_s = self._settings.restoration_time_ms / 1000 * time_scale
        self.interval_s = self._poll_ms / 1000 * time_scale
        self.due = float("-inf")

    def _set_stormed(self, stormed: bool) -> None:
        """Enter or leave a storm, and with it what the data plane does: ``drops``, the
        queue's packets, queued and arriving, are dropped; ``ignores_pfc``, the queue does
        not honour PFC (``PauseState.ignore``). Attributes, not properties: the egress
        reads ``drops`` for every frame it admits."""
        self.stormed = stormed
        self.drops = stormed and self.action == "drop"
        self.ignores_pfc = stormed and self.action in ("drop", "forward")

    def poll(self, now: float, queue_depth: int, tx_count: int,
             last_pfc_rx_time: float | None) -> list[WatchdogEvent]:
        """Look at the queue at ``now``: its depth in bytes, its transmit count so far and when
        a PFC frame last paused its priority (None: never). Returns the new events."""
        new: list[WatchdogEvent] = []
        if self.stormed:
            deadline = self._restore_deadline(last_pfc_rx_time)
            if deadline is None or now >= deadline - _EPSILON_S:
                self._set_stormed(False)
                new.append(self._event(now, RESTORE))
        elif self._stuck(now, queue_depth, tx_count, last_pfc_rx_time):
            if self._storm_from is None:
                self._storm_from = self._polled_at
            if now >= self._storm_from + self.detection_s - _EPSILON_S:
                self._set_stormed(True)
                self._storm_from = None
                new.append(self._event(now, STORM))
        else:
            self._storm_from = None
        self._polled_at, self._depth, self._tx = now, queue_depth, tx_count
        self.due = self._next_due(now, last_pfc_rx_time)
        self.events.extend(new)
        return new

    def _stuck(self, now: float, depth: int, tx: int, last_pfc: float | None) -> bool:
        """Stuck since the previous poll: bytes held then and now, nothing sent, PFC arriving."""
        return (self._polled_at is not None and self._depth > 0 and depth > 0
                and tx == self._tx and last_pfc is not None
                and now - last_pfc <= self.interval_s + _EPSILON_S)

    def _restore_deadline(self, last_pfc: float | None) -> float | None:
        return None if last_pfc is None else last_pfc + self.restoration_s

    def _next_due(self, now: float, last_pfc: float | None) -> float:
        due = now + self.interval_s
        if self.stormed:
            deadline = self._restore_deadline(last_pfc)
        elif self._storm_from is not None:
            deadline = self._storm_from + self.detection_s
        else:
            deadline = None
        return due if deadline is None or deadline <= now else min(due, deadline)

    def _event(self, now: float, kind: str) -> WatchdogEvent:
        return WatchdogEvent(now, kind, self.port, self.queue, self.action)
