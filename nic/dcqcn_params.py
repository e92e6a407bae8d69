"""DCQCN's parameters, in its two modes (``nic.dcqcn``): the paper's (``DcqcnParams``) and
the ConnectX firmware's, named as ``mlxconfig`` names them (``FirmwareParams``).

Time scale (docs/design.md, "Time scale"): the lab runs every port at ``speed / S`` and stretches
data-plane time constants by S, keeping byte quantities unchanged. Params hold real-world
values; ``scaled(S)`` gives the emulated ones: every time (a field ending in ``_s``) times
S, every rate (``_bps``) divided by S, everything else (bytes, gains, stage counts) as it is.
Rates are then emulated bits per second, the rate the endpoint actually paces at.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import TypeVar

_P = TypeVar("_P", "DcqcnParams", "FirmwareParams")


def _scaled(params: _P, scale: float) -> _P:
    """``params`` for time scale S: fields ending ``_s`` times S, ``_bps`` divided by S."""
    if not 0 < scale < math.inf:
        raise ValueError(f"time scale must be positive, got {scale}")
    changes = {}
    for f in fields(params):
        value = getattr(params, f.name)
        if f.name.endswith("_s"):
            changes[f.name] = value * scale
        elif f.name.endswith("_bps"):
            changes[f.name] = value / scale
    return replace(params, **changes)


@dataclass(frozen=True)
class DcqcnParams:
    """Paper DCQCN parameters, real-world units (seconds, bytes, b/s) unless ``scaled``.

    Defaults are the paper's: g = 1/256, K = T = 55 us, B = 10 MB, F = 5, N = 50 us, and
    R_AI = 40 Mb/s, R_HAI = 200 Mb/s from the authors' simulator at 40 Gb/s, hence the 40 Gb/s
    default line rate. The increase steps are kept as published rather than scaled with the
    line rate: a 100G port that wants the same relative steps passes ``rai_bps`` and
    ``rhai_bps`` (e.g. 100 and 500 Mb/s) explicitly. ``min_rate_bps`` defaults to the
    firmware's floor of 1 Mb/s, since the paper gives none.
    """

    line_rate_bps: float = 40e9
    g: float = 1 / 256  # alpha gain
    k_s: float = 55e-6  # alpha update period without CNP
    t_s: float = 55e-6  # rate increase timer
    b_bytes: int = 10 * 1024 * 1024  # byte counter, the paper's 10 MB (taken as MiB)
    f: int = 5  # fast recovery stages
    rai_bps: float = 40e6  # additive increase step
    rhai_bps: float = 200e6  # hyper increase step
    n_s: float = 50e-6  # NP: at most one CNP per flow per N
    min_rate_bps: float = 1e6

    def __post_init__(self) -> None:
        if not 0 < self.g <= 1:
            raise ValueError(f"g must be in (0, 1], got {self.g}")
        if min(self.k_s, self.t_s, self.n_s) <= 0 or self.b_bytes <= 0 or self.f < 1:
            raise ValueError("K, T, N and B must be positive and F at least 1")
        if not 0 < self.min_rate_bps <= self.line_rate_bps:
            raise ValueError("need 0 < min_rate_bps <= line_rate_bps")

    @property
    def cnp_interval_s(self) -> float:
        """The NP's interval: at most one CNP per flow per N."""
        return self.n_s

    def scaled(self, scale: float) -> DcqcnParams:
        """The parameters for a lab running at time scale ``scale`` (S): timers x S, rates / S.

        Byte quantities (B) and the dimensionless g and F stay, so the dynamics keep their
        shape in bytes and in emulated time.
        """
        return _scaled(self, scale)


@dataclass(frozen=True)
class FirmwareParams:
    """ConnectX firmware DCQCN, each field an ``mlxconfig`` parameter (its unit as a suffix:
    seconds, b/s; the rest as mlxconfig has them) with the firmware's default.

    - ``rpg_gd`` and ``rpg_min_dec_fac``: a cut multiplies the rate by
      ``max(1 - alpha * 2**(10 - rpg_gd), rpg_min_dec_fac / 100)`` (alpha is a 10-bit
      fraction in firmware, so 11 is a cut by alpha / 2, never by more than half);
    - ``dce_tcp_g``: alpha's gain is ``(1024 - dce_tcp_g) / 1024``; ``initial_alpha_value``
      is alpha at the first CNP, over 1024;
    - ``rpg_byte_reset``: the byte counter, in bytes (0: off), the firmware's 32767 by
      default. Read as bytes it makes a stage every ~3 us at 100G, so between cuts the rate
      climbs back by byte stages far sooner than by the 300 us timer, and senders swing
      between the floor and line rate under incast. An independent reading of the
      firmware's rules (``nic.dcqcn_reference``, compared event by event in
      ``bench/dcqcn_compare.py``) swings the same way: that is the firmware's behaviour,
      not this model's (docs/concepts.md, "DCQCN: the paper and the firmware");
    - ``clamp_tgt_rate``: every cut sets the target rate to the current rate; otherwise
      ``clamp_tgt_rate_after_time_inc`` does so only if a timer increase happened since the
      last cut, and with both off, only if any increase (timer or byte) did.
    """

    line_rate_bps: float = 100e9
    rpg_time_reset_s: float = 300e-6  # increase timer T
    rpg_byte_reset: int = 32767  # byte counter B, bytes (0: off)
    rpg_threshold: int = 1  # fast recovery stages F
    rpg_ai_rate_bps: float = 5e6
    rpg_hai_rate_bps: float = 50e6
    rpg_gd: int = 11
    rpg_min_dec_fac: int = 50  # percent
    rpg_min_rate_bps: float = 1e6
    rate_reduce_monitor_period_s: float = 4e-6  # at most one cut per period
    dce_tcp_g: int = 1019
    dce_tcp_rtt_s: float = 1e-6  # alpha update period
    initial_alpha_value: int = 1023
    clamp_tgt_rate: bool = False
    clamp_tgt_rate_after_time_inc: bool = True
    min_time_between_cnps_s: float = 4e-6  # NP: at most one CNP per QP per interval

    def __post_init__(self) -> None:
        if min(self.rpg_time_reset_s, self.rate_reduce_monitor_period_s,
               self.dce_tcp_rtt_s) <= 0 or self.min_time_between_cnps_s < 0:
            raise ValueError("rpg_time_reset, rate_reduce_monitor_period and dce_tcp_rtt must "
                             "be positive, min_time_between_cnps not negative")
        if self.rpg_byte_reset < 0 or self.rpg_threshold < 1:
            raise ValueError("rpg_byte_reset must not be negative, rpg_threshold at least 1")
        if not 0 <= self.dce_tcp_g < 1024 or not 0 <= self.initial_alpha_value <= 1023:
            raise ValueError("dce_tcp_g must be 0..1023 and initial_alpha_value 0..1023")
        if not 1 <= self.rpg_min_dec_fac <= 100 or self.rpg_gd < 1:
            raise ValueError("rpg_min_dec_fac must be 1..100 (%) and rpg_gd at least 1")
        if not 0 < self.rpg_min_rate_bps <= self.line_rate_bps:
            raise ValueError("need 0 < rpg_min_rate <= line rate")

    @property
    def g(self) -> float:
        return (1024 - self.dce_tcp_g) / 1024

    @property
    def initial_alpha(self) -> float:
        return self.initial_alpha_value / 1024

    @property
    def cnp_interval_s(self) -> float:
        """The NP's interval (``min_time_between_cnps``)."""
        return self.min_time_between_cnps_s

    def cut_factor(self, alpha: float) -> float:
        """What a cut multiplies the current rate by at ``alpha``."""
        return max(1 - alpha * 2.0 ** (10 - self.rpg_gd), self.rpg_min_dec_fac / 100)

    def scaled(self, scale: float) -> FirmwareParams:
        """The parameters at time scale S: every ``_s`` field x S, every ``_bps`` field / S;
        bytes, gains and stage counts stay."""
        return _scaled(self, scale)
