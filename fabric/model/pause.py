"""PFC (802.1Qbb) and PAUSE (802.3x) timing: the egress side that a received frame stops
(``PauseState``) and the ingress side that asks the upstream port to stop (``PfcSender``).

A pause quantum is 512 bit times at the port's speed. The emulation runs every port at
``speed / S`` (docs/design.md, "Time scale"), and quanta count bit times at that emulated rate,
so a pause stretches by S like every data-plane time constant: 0xFFFF quanta hold a 100G
port for 335.5 us and a 10G port for 3.36 ms at S = 1, a thousand times longer at S = 1000.

Times are seconds on the caller's clock (a monotonic one, so never negative); nothing here
reads a clock (principle 4).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping

QUANTUM_BITS = 512
MAX_QUANTA = 0xFFFF
NUM_PRIORITIES = 8
# The shortest XOFF pause (0xFFFF quanta at speed / S) a live agent can keep refreshed: it
# refreshes when half the pause has run and its event loop wakes within ~0.1-0.3 ms of a
# deadline on this kind of machine (machine-facts.md), so 2 ms of wall time leaves the
# refresh 1 ms, several wake-up delays, before the upstream's pause would lapse.
MIN_REFRESHABLE_PAUSE_S = 2e-3


def pause_seconds(quanta: int, rate_bps: float) -> float:
    """How long ``quanta`` pause quanta last on a port running at ``rate_bps``."""
    return quanta * QUANTUM_BITS / rate_bps


def min_refreshable_scale(speed_mbps: int) -> float:
    """The smallest time scale S at which a port of ``speed_mbps`` sends XOFF pauses of at
    least ``MIN_REFRESHABLE_PAUSE_S`` (0xFFFF quanta at speed / S)."""
    return MIN_REFRESHABLE_PAUSE_S * speed_mbps * 1e6 / (MAX_QUANTA * QUANTUM_BITS)


class PauseState:
    """Which priorities of one egress port are paused by the PFC/PAUSE frames it received.

    Per priority: the time the current (or last) pause ends, ``until``, which is also what
    the scheduler's gate reads (see ``scheduler.PortScheduler``); the time spent paused, for
    the pause-duration counters; the PFC frames received and the time of the last one that
    paused (the PFC watchdog's evidence of a storm).

    Rules (802.1Qbb, and the receiver behaviour sonic-mgmt checks):

    - a PFC frame reloads each enabled priority's timer with its quanta, so a later frame
      extends or shortens the pause; quanta 0 resumes at once;
    - a class-enable vector of 0 pauses nothing and counts nothing (``parse_pfc`` then gives
      an empty dict);
    - PFC pauses only the priorities the port has PFC enabled on (``PORT_QOS_MAP``
      ``pfc_enable``, which SONiC programs as the port's PFC RX and TX bitmap); a PFC frame
      for any other priority is counted and ignored (sonic-mgmt's lossy-priority pause
      tests: "PFC on lossy prios pauses nothing");
    - an 802.3x PAUSE stops every priority on a port without PFC; on a PFC port, where PFC
      replaces link-level pause, it is counted and ignored (sonic-mgmt's global pause
      test); either way it is counted apart from PFC;
    - a priority whose PFC is ignored (``ignore``, the watchdog's drop and forward actions)
      still counts the frames it receives but is never paused by them.
    """

    __slots__ = ("quantum_s", "pfc_rx", "pause_rx", "last_pfc_rx", "ends", "_since",
                 "_paused_s", "_ignored", "_pfc_enabled")

    def __init__(self, rate_bps: float,
                 pfc_enabled: Iterable[int] = range(NUM_PRIORITIES)) -> None:
        """``pfc_enabled``: the priorities PFC pauses (all, by default; none: a port without
        PFC, which honours 802.3x PAUSE instead)."""
        self.quantum_s = QUANTUM_BITS / rate_bps
        self._pfc_enabled = [p in set(pfc_enabled) for p in range(NUM_PRIORITIES)]
        self.pfc_rx = [0] * NUM_PRIORITIES  # PFC frames with the priority enabled
        self.pause_rx = 0  # 802.3x PAUSE frames
        # when a PFC frame last asked this priority to pause (quanta > 0); None: never
        self.last_pfc_rx: list[float | None] = [None] * NUM_PRIORITIES
        # per priority, the current or last pause ends here (``until``; read by the
        # egress gate for every frame, hence a plain list)
        self.ends = [0.0] * NUM_PRIORITIES
        self._since = [0.0] * NUM_PRIORITIES  # ... and began here
        self._paused_s = [0.0] * NUM_PRIORITIES  # time paused before the current pause
        self._ignored = [False] * NUM_PRIORITIES

    def on_pfc(self, quanta_by_priority: Mapping[int, int], now: float) -> None:
        """A PFC frame arrived: ``{priority: quanta}`` for its enabled classes."""
        for priority, quanta in quanta_by_priority.items():
            self.pfc_rx[priority] += 1
            if not self._pfc_enabled[priority]:
                continue
            if quanta:
                self.last_pfc_rx[priority] = now
            self._load(priority, quanta, now)

    def on_pause(self, quanta: int, now: float) -> None:
        """An 802.3x PAUSE arrived: on a port without PFC it stops (or, with 0, resumes)
        every priority."""
        self.pause_rx += 1
        if any(self._pfc_enabled):
            return
        for priority in range(NUM_PRIORITIES):
            self._load(priority, quanta, now)

    def _load(self, priority: int, quanta: int, now: float) -> None:
        """Reload one priority's pause timer with ``quanta`` at ``now``."""
        if self._ignored[priority]:
            return
        until = self.ends[priority]
        if not quanta:
            if until > now:
                self.ends[priority] = now
            return
        if until <= now:  # not paused: a new pause interval starts
            self._paused_s[priority] += until - self._since[priority]
            self._since[priority] = now
        self.ends[priority] = now + quanta * self.quantum_s

    def paused(self, priority: int, now: float) -> bool:
        return self.ends[priority] > now

    def until(self, priority: int) -> float:
        """When the priority's current pause ends; at or before now: since when it is free."""
        return self.ends[priority]

    def next_expiry(self, now: float) -> float | None:
        """The earliest end of a pause still running at ``now`` (a wake-up for the agent)."""
        running = [until for until in self.ends if until > now]
        return min(running) if running else None

    def paused_seconds(self, priority: int, now: float) -> float:
        """Total time the priority has been paused up to ``now``."""
        current = min(now, self.ends[priority]) - self._since[priority]
        return self._paused_s[priority] + max(0.0, current)

    def ignore(self, priority: int, ignored: bool, now: float) -> None:
        """Stop (or resume) honouring pauses on ``priority``; stopping ends any pause now."""
        self._ignored[priority] = ignored
        if ignored and self.ends[priority] > now:
            self.ends[priority] = now


class PfcSender:
    """The PFC frames an ingress priority group in XOFF sends out of its port, upstream.

    At XOFF it sends ``quanta`` (0xFFFF, the longest pause) for its priorities; while the
    group stays in XOFF it sends again when half of that pause has run at the port's
    emulated rate, so the upstream timer is reloaded well before it could expire and let a
    burst into the headroom; at XON it sends quanta 0, which resumes the upstream at once
    (docs/design.md, "PFC").

    Each method returns ``{priority: quanta}`` for one PFC frame (``pfc_frame``), or an empty
    dict when nothing is to be sent.
    """

    __slots__ = ("priorities", "quanta", "refresh_s", "xoff", "next_refresh")

    def __init__(self, priorities: Iterable[int], rate_bps: float,
                 quanta: int = MAX_QUANTA) -> None:
        if not 0 < quanta <= MAX_QUANTA:
            raise ValueError(f"XOFF pause quanta {quanta} is not 1..{MAX_QUANTA}")
        self.priorities = tuple(sorted(set(priorities)))
        self.quanta = quanta
        self.refresh_s = pause_seconds(quanta, rate_bps) / 2
        self.xoff = False
        self.next_refresh: float | None = None  # when tick() sends again; None in XON

    def set_xoff(self, now: float) -> dict[int, int]:
        """The group crossed XOFF: pause the upstream (nothing new if already paused)."""
        if self.xoff:
            return {}
        self.xoff = True
        return self._pause(now)

    def set_xon(self, now: float) -> dict[int, int]:
        """The group fell to XON: resume the upstream (nothing if it was not paused)."""
        if not self.xoff:
            return {}
        self.xoff = False
        self.next_refresh = None
        return dict.fromkeys(self.priorities, 0)

    def tick(self, now: float) -> dict[int, int]:
        """The refresh, when it is due."""
        if self.next_refresh is None or now < self.next_refresh:
            return {}
        return self._pause(now)

    def _pause(self, now: float) -> dict[int, int]:
        self.next_refresh = now + self.refresh_s  # the upstream's timer starts on arrival
        return dict.fromkeys(self.priorities, self.quanta)
