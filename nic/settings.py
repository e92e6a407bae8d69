"""Host NIC settings: how a host marks and paces RoCE, in a YAML file beside the topology.

containerlab's schema allows no keys of our own, so a host names its file with the node label
``rocelab.nic`` (a path relative to the topology file) and the settings live in that file.
They are what the switches must agree with (config.lint's ``host-dscp`` rule) and what a
host's RoCE endpoint uses: the DSCP and priority it marks data and CNPs with, the RoCE path
MTU, whether it sets ECT, and DCQCN. Units in the file are the ones NIC vendors document (us,
Mb/s, bytes; DCQCN in firmware mode exactly as ``mlxconfig`` names them);
``DcqcnSettings.to_params`` converts them to ``nic.dcqcn``'s params of the mode.

Every error is one line, ``<file>: roce.dscp: must be between 0 and 63 (got 64)``, worded
as the switch configs' are (``fabric.config_fields.pydantic_problem``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator,
)
from pydantic_core import PydanticCustomError

from ..fabric.config_fields import pydantic_problem
from ..fabric import yamlfile
from .dcqcn_params import DcqcnParams, FirmwareParams

NIC_LABEL = "rocelab.nic"


class NicError(ValueError):
    """A NIC settings problem, phrased as ``file: field.path: problem``."""


def _between(lo: int, hi: int) -> AfterValidator:
    """An integer range with the same wording as config_db.json's ranges."""
    def check(value: int) -> int:
        if not lo <= value <= hi:
            raise ValueError(f"must be between {lo} and {hi} (got {value})")
        return value
    return AfterValidator(check)


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError(f"must be positive (got {value})")
    return value


Dscp = Annotated[int, _between(0, 63)]
Priority = Annotated[int, _between(0, 7)]
Positive = Annotated[float, AfterValidator(_positive)]


class _Section(BaseModel):
    # strict: YAML already has types; "26" or yes for a number or a flag is a typo to report.
    # YAML's .nan and .inf (and 1e400) are floats too, but no setting here means them.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class RoceSettings(_Section):
    """RoCE data: DSCP for RoCEv2, priority (PCP, and the class PFC pauses) for both versions."""

    dscp: Dscp = 26
    priority: Priority = 3
    mtu: Literal[256, 512, 1024, 2048, 4096] = 1024  # RoCE path MTU, the IB payload sizes
    ecn: bool = True  # send ECT(0), so switches CE-mark instead of dropping


class CnpSettings(_Section):
    """CNPs (DCQCN's feedback): their own DSCP and priority, outside the lossless class."""

    dscp: Dscp = 48
    priority: Priority = 6


Flag = Literal[0, 1]
PaperOnly = Annotated[float, AfterValidator(_positive)] | None


class DcqcnSettings(_Section):
    """DCQCN in vendor units, in one of two modes (``nic.dcqcn``):

    - ``firmware`` (the default): as ConnectX firmware runs it, each parameter named and
      unit-ed as ``mlxconfig`` has it (us, bytes, Mb/s, fixed-point integers), with the
      firmware's defaults (``FirmwareParams``);
    - ``paper``: the SIGCOMM 2015 algorithm with the paper's names (``DcqcnParams``).

    A file sets only its own mode's parameters: one of the other mode is an error rather
    than silently ignored. Unset parameters of the mode take its defaults, filled in here
    (``FIRMWARE_DEFAULTS``, ``PAPER_DEFAULTS``), so a file that only says ``enabled: true``
    runs the firmware's algorithm.
    """

    enabled: bool = True
    mode: Literal["firmware", "paper"] = "firmware"
    # firmware (mlxconfig names)
    rpg_time_reset: Annotated[int, Field(ge=1)] | None = None  # us: increase timer
    rpg_byte_reset: Annotated[int, Field(ge=0)] | None = None  # bytes; 0: off
    rpg_threshold: Annotated[int, _between(1, 31)] | None = None  # fast recovery stages
    rpg_ai_rate: Annotated[int, Field(ge=1)] | None = None  # Mb/s
    rpg_hai_rate: Annotated[int, Field(ge=1)] | None = None  # Mb/s
    rpg_gd: Annotated[int, _between(1, 15)] | None = None  # cut by alpha / 2**(gd - 10)
    rpg_min_dec_fac: Annotated[int, _between(1, 100)] | None = None  # %: smallest cut factor
    rpg_min_rate: Annotated[int, Field(ge=1)] | None = None  # Mb/s
    rate_reduce_monitor_period: Annotated[int, Field(ge=1)] | None = None  # us
    dce_tcp_g: Annotated[int, _between(0, 1023)] | None = None  # g = (1024 - it) / 1024
    dce_tcp_rtt: Annotated[int, Field(ge=1)] | None = None  # us: alpha update period
    initial_alpha_value: Annotated[int, _between(0, 1023)] | None = None  # / 1024
    clamp_tgt_rate: Flag | None = None
    clamp_tgt_rate_after_time_inc: Flag | None = None
    min_time_between_cnps: Annotated[int, Field(ge=0)] | None = None  # us, NP
    # paper
    g: Annotated[float, Field(gt=0, le=1)] | None = None
    k_us: PaperOnly = None  # alpha update period without CNP
    t_us: PaperOnly = None  # rate increase timer
    b_bytes: Annotated[int, Field(gt=0)] | None = None  # byte counter
    f: Annotated[int, Field(ge=1)] | None = None  # fast recovery stages
    rai_mbps: PaperOnly = None
    rhai_mbps: PaperOnly = None
    min_rate_mbps: PaperOnly = None
    cnp_interval_us: PaperOnly = None  # NP: at most one CNP per flow per interval (N)

    @model_validator(mode="after")
    def _one_mode(self) -> DcqcnSettings:
        mine, other = ((FIRMWARE_DEFAULTS, PAPER_DEFAULTS) if self.mode == "firmware"
                       else (PAPER_DEFAULTS, FIRMWARE_DEFAULTS))
        for name in other:
            if getattr(self, name) is not None:
                raise PydanticCustomError(
                    "dcqcn_mode", "{name} is a {other}-mode parameter, but mode is {mode}",
                    {"name": name, "mode": self.mode,
                     "other": "paper" if self.mode == "firmware" else "firmware"})
        for name, default in mine.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, default)
        return self

    def to_params(self, line_rate_bps: float) -> DcqcnParams | FirmwareParams:
        """The real-world params of the mode for a port of ``line_rate_bps`` (scale them
        with ``scaled`` for the lab's time scale)."""
        if self.mode == "paper":
            return DcqcnParams(line_rate_bps=line_rate_bps, g=self.g, k_s=self.k_us / 1e6,
                               t_s=self.t_us / 1e6, b_bytes=self.b_bytes, f=self.f,
                               rai_bps=self.rai_mbps * 1e6, rhai_bps=self.rhai_mbps * 1e6,
                               n_s=self.cnp_interval_us / 1e6,
                               min_rate_bps=self.min_rate_mbps * 1e6)
        return FirmwareParams(
            line_rate_bps=line_rate_bps, rpg_time_reset_s=self.rpg_time_reset / 1e6,
            rpg_byte_reset=self.rpg_byte_reset, rpg_threshold=self.rpg_threshold,
            rpg_ai_rate_bps=self.rpg_ai_rate * 1e6, rpg_hai_rate_bps=self.rpg_hai_rate * 1e6,
            rpg_gd=self.rpg_gd, rpg_min_dec_fac=self.rpg_min_dec_fac,
            rpg_min_rate_bps=self.rpg_min_rate * 1e6,
            rate_reduce_monitor_period_s=self.rate_reduce_monitor_period / 1e6,
            dce_tcp_g=self.dce_tcp_g, dce_tcp_rtt_s=self.dce_tcp_rtt / 1e6,
            initial_alpha_value=self.initial_alpha_value,
            clamp_tgt_rate=bool(self.clamp_tgt_rate),
            clamp_tgt_rate_after_time_inc=bool(self.clamp_tgt_rate_after_time_inc),
            min_time_between_cnps_s=self.min_time_between_cnps / 1e6)


def _firmware_defaults() -> dict[str, int]:
    """The firmware defaults in mlxconfig units, from ``FirmwareParams``' (one source)."""
    p = FirmwareParams()
    return {"rpg_time_reset": round(p.rpg_time_reset_s * 1e6),
            "rpg_byte_reset": p.rpg_byte_reset, "rpg_threshold": p.rpg_threshold,
            "rpg_ai_rate": round(p.rpg_ai_rate_bps / 1e6),
            "rpg_hai_rate": round(p.rpg_hai_rate_bps / 1e6), "rpg_gd": p.rpg_gd,
            "rpg_min_dec_fac": p.rpg_min_dec_fac, "rpg_min_rate": round(p.rpg_min_rate_bps / 1e6),
            "rate_reduce_monitor_period": round(p.rate_reduce_monitor_period_s * 1e6),
            "dce_tcp_g": p.dce_tcp_g, "dce_tcp_rtt": round(p.dce_tcp_rtt_s * 1e6),
            "initial_alpha_value": p.initial_alpha_value,
            "clamp_tgt_rate": int(p.clamp_tgt_rate),
            "clamp_tgt_rate_after_time_inc": int(p.clamp_tgt_rate_after_time_inc),
            "min_time_between_cnps": round(p.min_time_between_cnps_s * 1e6)}


def _paper_defaults() -> dict[str, float | int]:
    p = DcqcnParams()
    return {"g": p.g, "k_us": p.k_s * 1e6, "t_us": p.t_s * 1e6, "b_bytes": p.b_bytes,
            "f": p.f, "rai_mbps": p.rai_bps / 1e6, "rhai_mbps": p.rhai_bps / 1e6,
            "min_rate_mbps": p.min_rate_bps / 1e6, "cnp_interval_us": p.n_s * 1e6}


FIRMWARE_DEFAULTS = _firmware_defaults()
PAPER_DEFAULTS = _paper_defaults()


class NicSettings(_Section):
    """One NIC settings file; every section and field is optional and defaults as above."""

    roce: RoceSettings = RoceSettings()
    cnp: CnpSettings = CnpSettings()
    dcqcn: DcqcnSettings = DcqcnSettings()


def load(path: str | os.PathLike[str]) -> NicSettings:
    """Parse and validate one NIC settings file; raise NicError with one line on a problem."""
    path = Path(path)
    try:
        raw = yamlfile.load(path)
    except yamlfile.YamlError as e:
        raise NicError(str(e)) from None
    try:
        return NicSettings.model_validate({} if raw is None else raw)
    except ValidationError as e:
        where, problem = pydantic_problem(e)
        raise NicError(f"{path}: {where or '(top level)'}: {problem}") from None
