"""What ``tune`` sweeps: the ECN marking band of the RoCE class's egress queue (WRED_PROFILE's
Kmin, Kmax and Pmax) and the NIC's DCQCN reaction point (mlxconfig names), each between
stated bounds, sampled as a seeded Latin hypercube (scipy's ``qmc``) or a grid; and the
published settings every report measures beside the sweep (docs/tune.md, "Reference
points").

Byte thresholds scale with the bottleneck's speed, as the published ones do (Alibaba's are
given per 25G): the default bounds are stated per 25G of port speed and multiplied out for
the lab. A point is plain data, ``{"wred": {...}, "dcqcn": {...}}``, in config_db and
mlxconfig units, so that it hashes, pickles and applies (``tune_apply``) as it is.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from scipy.stats import qmc

from ..nic.settings import FIRMWARE_DEFAULTS

PER_25G = 25e9
KMAX_CAP = 1.0  # Kmax / Kmin at least this: the band is never inverted


class SpaceError(ValueError):
    """A bound or a sweep option that cannot be used (one line)."""


@dataclass(frozen=True)
class Dimension:
    """One swept parameter: ``section`` (wred or dcqcn) and its field, between ``lo`` and
    ``hi`` (inclusive), sampled on a log scale when ``log`` (thresholds and rates span
    decades), rounded to an integer when ``integer`` (every config field here is one)."""

    section: str
    name: str
    lo: float
    hi: float
    log: bool = True
    integer: bool = True

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name}"

    def value(self, u: float) -> float | int:
        """The value at ``u`` in [0, 1] of the range."""
        if self.lo == self.hi:  # pinned, 0 included (a DCQCN parameter's "disabled")
            v = self.lo
        elif self.log:
            v = math.exp(math.log(self.lo) + u * (math.log(self.hi) - math.log(self.lo)))
        else:
            v = self.lo + u * (self.hi - self.lo)
        return round(v) if self.integer else v


def default_space(bottleneck_bps: float) -> list[Dimension]:
    """The default bounds, thresholds multiplied out for a port of ``bottleneck_bps``:

    - kmin 10..200 KB per 25G (the DCQCN paper's 5 KB at 40G is below it, NVIDIA's 150 KB
      and Alibaba's 100 KB per 25G inside it at 100G);
    - kmax_ratio 2..16 (Kmax = Kmin x it: NVIDIA's 10, Alibaba's 4);
    - pmax 1..100 % (the paper's 1 %, Alibaba's 20 %, NVIDIA's 100 %);
    - rpg_time_reset 50..600 us, rpg_ai_rate 1..50 Mb/s, rpg_hai_rate 10..500 Mb/s
      (the firmware's 300 us, 5 and 50 Mb/s inside), the rest at the NIC files' values.
    """
    per = bottleneck_bps / PER_25G
    return [Dimension("wred", "kmin", round(10e3 * per), round(200e3 * per)),
            Dimension("wred", "kmax_ratio", 2.0, 16.0, integer=False),
            Dimension("wred", "pmax", 1, 100),
            Dimension("dcqcn", "rpg_time_reset", 50, 600),
            Dimension("dcqcn", "rpg_ai_rate", 1, 50),
            Dimension("dcqcn", "rpg_hai_rate", 10, 500)]


WRED_FIELDS = ("kmin", "kmax_ratio", "pmax")
BYTE_COUNTER = "rpg_byte_reset"


def override(space: list[Dimension], bounds: list[str]) -> list[Dimension]:
    """``space`` with each ``NAME=LO:HI`` of ``bounds`` replacing a dimension's range or
    adding one (any mlxconfig DCQCN parameter), and ``NAME=VALUE`` pinning it (both ends
    equal; 0 too, which turns off what says "0=DISABLED", the byte counter). NAME is a wred
    field (kmin, kmax_ratio, pmax) or a DCQCN parameter."""
    out = {d.name: d for d in space}
    for text in bounds:
        name, _, rng = text.partition("=")
        lo_text, _, hi_text = rng.partition(":")
        try:
            lo = float(lo_text)
            hi = float(hi_text) if hi_text else lo
        except ValueError:
            raise SpaceError(f"--bound {text!r}: say NAME=LO:HI or NAME=VALUE") from None
        if name in WRED_FIELDS:
            section = "wred"
        elif name in FIRMWARE_DEFAULTS:
            section = "dcqcn"
        else:
            raise SpaceError(f"--bound {name}: not a swept parameter (say one of "
                             f"{', '.join(WRED_FIELDS)} or an mlxconfig DCQCN parameter)")
        if not (0 < lo <= hi or lo == hi == 0):
            raise SpaceError(f"--bound {text!r}: needs 0 < LO <= HI, or VALUE alone (0: "
                             "off, as rpg_byte_reset=0 turns the byte counter off)")
        old = out.get(name)
        integer = name != "kmax_ratio"
        out[name] = (replace(old, lo=lo, hi=hi) if old else
                     Dimension(section, name, lo, hi, integer=integer))
    return list(out.values())


def counter_off_too(points: list[dict], every_other: bool) -> list[dict]:
    """The firmware's byte counter as a factor of two levels, the NICs' own and off
    (``rpg_byte_reset`` 0), which no range can sample: 0 is off, not a small count. A
    sample turns it off on every other point (p01, p03, ...: the sample's order is random,
    so each level gets half the points, spread over the others' ranges); a grid runs every
    combination with it both ways. Off is what lets DCQCN hold a fast port: at 400G the
    firmware's 32767 B bring a byte stage every 0.65 us, each halving the gap back to the
    rate before a cut, long before the next CNP (docs/tune.md, "The byte counter")."""
    def off(point: dict) -> dict:
        return {"wred": point["wred"], "dcqcn": {**point["dcqcn"], BYTE_COUNTER: 0}}
    if every_other:
        return [off(p) if i % 2 else p for i, p in enumerate(points)]
    return [q for p in points for q in (p, off(p))]


def sample(space: list[Dimension], n: int, seed: int) -> list[dict]:
    """``n`` points of a Latin hypercube over ``space`` (scipy, seeded: the same seed, the
    same points)."""
    if n < 1:
        raise SpaceError(f"--points {n}: at least 1")
    unit = qmc.LatinHypercube(d=len(space), seed=seed).random(n)
    return [point_of(space, row) for row in unit]


def grid(space: list[Dimension], levels: int) -> list[dict]:
    """Every combination of ``levels`` values per dimension, ends included."""
    if levels < 2:
        raise SpaceError(f"--grid {levels}: at least 2 levels")
    steps = [i / (levels - 1) for i in range(levels)]
    return [point_of(space, row) for row in itertools.product(steps, repeat=len(space))]


def point_of(space: list[Dimension], unit: object) -> dict:
    point: dict[str, dict] = {"wred": {}, "dcqcn": {}}
    for dim, u in zip(space, unit):
        point[dim.section][dim.name] = dim.value(float(u))
    return finish(point)


def finish(point: dict) -> dict:
    """Kmax from Kmin and the ratio, the form a switch config takes."""
    wred = dict(point["wred"])
    if "kmin" in wred:  # with its ratio: both are always swept (``default_space``)
        wred["kmax"] = round(wred["kmin"] * max(KMAX_CAP, wred.pop("kmax_ratio")))
    return {"wred": wred, "dcqcn": dict(point["dcqcn"])}


def references(bottleneck_bps: float) -> dict[str, dict]:
    """The published settings (docs/tune.md, "Reference points"), the NICs' DCQCN as the
    lab's files have it:

    - nvidia: the Onyx / Cumulus RoCE default, 150 KB / 1500 KB, probability 100 %;
    - alibaba: 100 KB / 400 KB per 25G scaled to the port speed, Pmax 20 %;
    - pfc-only: DCQCN off on every NIC (Meta's choice at 400G), the switches as they are:
      nothing reacts to a mark, so PFC alone holds the incast (the ECN check's baseline).
    """
    per = bottleneck_bps / PER_25G
    return {"nvidia": {"wred": {"kmin": 150_000, "kmax": 1_500_000, "pmax": 100},
                       "dcqcn": {}},
            "alibaba": {"wred": {"kmin": round(100_000 * per), "kmax": round(400_000 * per),
                                 "pmax": 20}, "dcqcn": {}},
            "pfc-only": {"wred": {}, "dcqcn": {"enabled": False}}}
