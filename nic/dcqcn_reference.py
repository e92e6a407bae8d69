"""An independent reaction point (RP) of firmware DCQCN, the yardstick for ``nic.dcqcn``.

Written from the parameter descriptions of ConnectX DCQCN (the mlxconfig names, units and
defaults in the project's reference notes, "DCQCN as ConnectX firmware runs it" and "DCQCN
defaults and tuning guidance", and the paper's stage rules they refer to), before reading
``nic/dcqcn.py``'s rate-increase code and sharing none of it: a second reading of the same
text, so that where the two models agree, the behaviour is what the rules produce, and where
they differ, one of them misread them. It is a plain event machine, not fast: it runs every
timer tick one by one, for comparisons (``bench/dcqcn_compare.py``), not for the simulator.

Parameters are taken in mlxconfig's own units (us, bytes, Mb/s, 1/1024 fixed point), as a
NIC settings file writes them, so a comparison also covers the unit conversion.

The readings where the description leaves a choice (each one a deliberate decision):

1. The RP is idle until the QP's first CNP: it sends at ``rpg_max_rate`` (0: the line
   rate), runs no timer and counts no bytes. The first CNP sets alpha to
   ``initial_alpha_value / 1024``; that value stands for this CNP (it does not raise alpha
   again at the next alpha period).
2. Alpha (``dce_tcp_rtt``, ``dce_tcp_g``): from the first CNP on, at every period end,
   ``alpha = (1 - g) * alpha + g`` if a CNP arrived in the period, ``(1 - g) * alpha``
   otherwise, with ``g = (1024 - dce_tcp_g) / 1024``. A cut uses alpha as it stands: the
   CNP that causes the cut raises alpha only at the next period end.
3. Cut (``rpg_gd``, ``rpg_min_dec_fac``): alpha is a 10-bit fraction shifted right by
   ``rpg_gd`` bits, so the rate loses ``alpha * 2**(10 - rpg_gd)`` of itself (alpha / 2 at
   11), but keeps at least ``rpg_min_dec_fac`` % of itself; never below ``rpg_min_rate``.
4. Merging (``rate_reduce_monitor_period``): a CNP cuts at once if no cut happened in the
   last period; otherwise it is held and one cut for all CNPs held comes when the period
   since the last cut ends.
5. Target (``clamp_tgt_rate``, ``clamp_tgt_rate_after_time_inc``): a cut sets the target to
   the current rate (before the cut) if ``clamp_tgt_rate`` is 1, or if
   ``clamp_tgt_rate_after_time_inc`` is 1 and a *timer* stage (not a byte stage) happened
   since the last cut, or at the first cut; otherwise the target stays.
6. ``rate_to_set_on_first_cnp`` (Mb/s, 0: off): when set, the first CNP sets the current
   and target rates to it instead of cutting.
7. Stages: each cut zeroes the time-stage counter T (i), the byte-stage counter BC (j) and
   the bytes counted, and restarts the increase timer. The timer then ends every
   ``rpg_time_reset`` us (a time stage); every ``rpg_byte_reset`` bytes sent after the cut
   (0: the byte counter is off) is a byte stage. A stage's kind is decided by the counters
   before it, then its own counter goes up by one: fast recovery while
   ``max(i, j) < rpg_threshold`` (``Rc = (Rt + Rc) / 2``); hyper when both are at or over
   it (``Rt += rpg_hai_rate * (min(i, j) - F + 1)``, then the same halving); additive
   otherwise (``Rt += rpg_ai_rate``, then the halving). With the byte counter off j stays 0,
   so there is no hyper stage, as the paper's rule reads.
8. ``Rt`` and ``Rc`` never exceed ``rpg_max_rate`` (0: the line rate).
9. At one instant timers run before the event given (a CNP at a period's end belongs to
   the next period); an alpha period end runs before a cut, a cut before an increase.

Reading 4 has a second candidate, taken by the HPCC simulator's model of this firmware and
so by ``nic.dcqcn``: ``grid_cuts=True`` runs the decrease check on a grid of
``rate_reduce_monitor_period`` from the first CNP, which itself cuts nothing; a check cuts
once if a CNP arrived since the one before, and at one instant an increase runs before it.
It changes when a cut lands (up to one period later), not what a cut or a stage does, so a
comparison can tell a timing reading from a stage rule.

The notification point's parameters (``min_time_between_cnps``, ``cnp_dscp``,
``cnp_802p_prio``) shape which CNPs arrive, not what the RP does with them: the CNP times
given to ``on_cnp`` are already the NP's.
"""
from __future__ import annotations

from dataclasses import dataclass

PS_PER_US = 1_000_000


def _ps(seconds: float) -> int:
    """Time in integer picoseconds, so that timer ends and events compare exactly."""
    return round(seconds * 1e12)


@dataclass(frozen=True)
class MlxParams:
    """The RP's mlxconfig parameters in mlxconfig's units, with the firmware's defaults."""

    line_rate_mbps: float = 100_000.0
    rpg_time_reset: int = 300  # us
    rpg_byte_reset: int = 32767  # bytes, 0: off
    rpg_threshold: int = 1
    rpg_ai_rate: int = 5  # Mb/s
    rpg_hai_rate: int = 50  # Mb/s
    rpg_max_rate: int = 0  # Mb/s, 0: full speed
    rpg_min_rate: int = 1  # Mb/s
    rpg_gd: int = 11
    rpg_min_dec_fac: int = 50  # %
    rate_to_set_on_first_cnp: int = 0  # Mb/s, 0: off
    rate_reduce_monitor_period: int = 4  # us
    dce_tcp_g: int = 1019
    dce_tcp_rtt: int = 1  # us
    initial_alpha_value: int = 1023
    clamp_tgt_rate: int = 0
    clamp_tgt_rate_after_time_inc: int = 1

    @property
    def max_rate_bps(self) -> float:
        mbps = self.rpg_max_rate or self.line_rate_mbps
        return min(mbps, self.line_rate_mbps) * 1e6


class ReferenceReactionPoint:
    """One QP's rate, moved by CNPs, its timers and the bytes it sends (times in seconds)."""

    def __init__(self, p: MlxParams, *, grid_cuts: bool = False) -> None:
        self.p = p
        self.grid_cuts = grid_cuts
        self.origin = 0  # ps of the first CNP: the grid's start
        self.rc = self.rt = p.max_rate_bps  # current and target rate, b/s
        self.alpha = 0.0
        self.active = False  # a first CNP has come
        self.cnp_in_period = False  # for alpha
        self.last_cut: int | None = None
        self.time_inc_since_cut = False
        self.i = self.j = 0  # time and byte stages since the last cut
        self.byte_count = 0
        self.alpha_due = self.cut_due = self.inc_due = None  # ps, or None: not running
        self.now = 0

    # events -------------------------------------------------------------------------
    def on_cnp(self, t: float) -> None:
        self.advance(t)
        if not self.active:
            self._first_cnp()
            return
        self.cnp_in_period = True
        period = self._period(self.p.rate_reduce_monitor_period)
        if self.grid_cuts:
            if self.cut_due is None:  # the next check of the grid cuts
                self.cut_due = self.origin + (-(-(self.now - self.origin) // period)
                                              or 1) * period
        elif self.last_cut is None or self.now - self.last_cut >= period:
            self._cut()
        elif self.cut_due is None:  # held: one cut for all CNPs held, when the period ends
            self.cut_due = self.last_cut + period

    def on_bytes_sent(self, n: int, t: float) -> None:
        self.advance(t)
        if self.inc_due is None or not self.p.rpg_byte_reset:  # no cut yet, or counter off
            return
        self.byte_count += n
        while self.byte_count >= self.p.rpg_byte_reset:
            self.byte_count -= self.p.rpg_byte_reset
            self._stage(time_stage=False)

    def advance(self, t: float) -> None:
        """Run every timer that ends at or before ``t``."""
        until = _ps(t)
        while (due := self.next_timer_ps()) is not None and due <= until:
            self.now = due
            if due == self.alpha_due:
                self._alpha_tick()
            elif due == self.cut_due and not (self.grid_cuts and due == self.inc_due):
                self.cut_due = None
                self._cut()
            else:
                self.inc_due += self._period(self.p.rpg_time_reset)
                self._stage(time_stage=True)
        self.now = max(self.now, until)

    def rate(self, t: float) -> float:
        self.advance(t)
        return self.rc

    def next_timer_ps(self) -> int | None:
        pending = [d for d in (self.alpha_due, self.cut_due, self.inc_due) if d is not None]
        return min(pending) if pending else None

    def next_rate_change_ps(self) -> int | None:
        """When a timer may next change the rate (a held cut, an increase); alpha's
        periods never do by themselves."""
        pending = [d for d in (self.cut_due, self.inc_due) if d is not None]
        return min(pending) if pending else None

    # rules --------------------------------------------------------------------------
    @staticmethod
    def _period(us: int) -> int:
        return us * PS_PER_US

    def _first_cnp(self) -> None:
        self.active = True
        self.origin = self.now
        self.alpha = self.p.initial_alpha_value / 1024
        self.alpha_due = self.now + self._period(self.p.dce_tcp_rtt)
        if self.p.rate_to_set_on_first_cnp:
            self.rc = self.rt = min(self.p.rate_to_set_on_first_cnp * 1e6, self.p.max_rate_bps)
            self._restart_stages()
        elif self.grid_cuts:
            self.cut_due = self.now + self._period(self.p.rate_reduce_monitor_period)
        else:
            self._cut()

    def _alpha_tick(self) -> None:
        g = (1024 - self.p.dce_tcp_g) / 1024
        self.alpha = (1 - g) * self.alpha + (g if self.cnp_in_period else 0.0)
        self.cnp_in_period = False
        self.alpha_due += self._period(self.p.dce_tcp_rtt)

    def _cut(self) -> None:
        p = self.p
        if p.clamp_tgt_rate or self.last_cut is None or (
                p.clamp_tgt_rate_after_time_inc and self.time_inc_since_cut):
            self.rt = self.rc
        keep = max(1 - self.alpha * 2.0 ** (10 - p.rpg_gd), p.rpg_min_dec_fac / 100)
        self.rc = max(self.rc * keep, p.rpg_min_rate * 1e6)
        self.last_cut = self.now
        self._restart_stages()

    def _restart_stages(self) -> None:
        self.i = self.j = self.byte_count = 0
        self.time_inc_since_cut = False
        self.inc_due = self.now + self._period(self.p.rpg_time_reset)

    def _stage(self, time_stage: bool) -> None:
        p, f = self.p, self.p.rpg_threshold
        if max(self.i, self.j) < f:
            pass  # fast recovery: the target stays
        elif min(self.i, self.j) >= f:
            self.rt += p.rpg_hai_rate * 1e6 * (min(self.i, self.j) - f + 1)
        else:
            self.rt += p.rpg_ai_rate * 1e6
        self.rt = min(self.rt, p.max_rate_bps)
        self.rc = min((self.rt + self.rc) / 2, p.max_rate_bps)
        if time_stage:
            self.i += 1
            self.time_inc_since_cut = True
        else:
            self.j += 1
