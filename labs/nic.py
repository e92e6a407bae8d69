"""Host NIC settings: how a host marks and paces RoCE, in a YAML file beside the topology.

containerlab's schema allows no keys of our own, so a host names its file with the node label
``rocelab.nic`` (a path relative to the topology file) and the settings live in that file.
They are what the switches must agree with (config.lint's ``host-dscp`` rule) and what a
host's RoCE endpoint uses: the DSCP and priority it marks data and CNPs with, the RoCE path
MTU, whether it sets ECT, and DCQCN. Units in the file are the ones NIC vendors document (us,
Mb/s, bytes); ``DcqcnSettings.to_params`` converts them to ``traffic.dcqcn.DcqcnParams``.

Every error is one line, ``<file>: roce.dscp: must be between 0 and 63 (got 64)``, worded
as the switch configs' are (``fabric.config.pydantic_problem``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from fabric.config import pydantic_problem
from labs import yamlfile
from traffic.dcqcn import DcqcnParams

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


class DcqcnSettings(_Section):
    """DCQCN in vendor units. Defaults are ``DcqcnParams``' (the paper's; test_nic checks that
    they agree), so a file that only says ``enabled: true`` gets the published algorithm."""

    enabled: bool = True
    g: Annotated[float, Field(gt=0, le=1)] = 1 / 256
    k_us: Positive = 55.0  # alpha update period without CNP
    t_us: Positive = 55.0  # rate increase timer
    b_bytes: Annotated[int, Field(gt=0)] = 10 * 1024 * 1024  # byte counter
    f: Annotated[int, Field(ge=1)] = 5  # fast recovery stages
    rai_mbps: Positive = 40.0
    rhai_mbps: Positive = 200.0
    min_rate_mbps: Positive = 1.0
    cnp_interval_us: Positive = 50.0  # NP: at most one CNP per flow per interval (N)

    def to_params(self, line_rate_bps: float) -> DcqcnParams:
        """The real-world ``DcqcnParams`` for a port of ``line_rate_bps`` (scale it with
        ``DcqcnParams.scaled`` for the lab's time scale)."""
        return DcqcnParams(line_rate_bps=line_rate_bps, g=self.g, k_s=self.k_us / 1e6,
                           t_s=self.t_us / 1e6, b_bytes=self.b_bytes, f=self.f,
                           rai_bps=self.rai_mbps * 1e6, rhai_bps=self.rhai_mbps * 1e6,
                           n_s=self.cnp_interval_us / 1e6,
                           min_rate_bps=self.min_rate_mbps * 1e6)


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
