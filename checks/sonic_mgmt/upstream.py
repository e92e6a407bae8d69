"""sonic-mgmt's own threshold formulas, ported as they are (reference/sonic-mgmt-qos.md §2.1,
§2.2), for engineers comparing rocelab's exact figures (``derive``) with what sonic-mgmt
expects of hardware: the fixture's ``static_th`` (``qos_sai_base``), its Nvidia two-level
variant, and the Mellanox parameter generator (``tests/qos/files/mellanox/
qos_param_generator.py``), in cells. Cisco's generator is left out: §2.3 names its
hardware quantisation and per-ASIC tuning constants without giving them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .fill import Derived


def _alpha(dynamic_th: int) -> float:
    return 2.0 ** dynamic_th


def static_th(size: int, pool_size: int, dynamic_th: int) -> Derived:
    """``qos_sai_base.__computeBufferThreshold``: a PG or queue alone in its pool holds at
    most ``size + int(alpha / (1 + alpha) x pool)`` bytes, alpha = 2 ** dynamic_th."""
    alpha = _alpha(dynamic_th)
    value = size + int(alpha / (1 + alpha) * pool_size)
    return Derived(value, (f"qos_sai_base: dynamic_th {dynamic_th} -> alpha {alpha:g}",
                           f"static_th = size {size} + int({alpha:g}/(1+{alpha:g}) x pool "
                           f"{pool_size}) = {value} B"))


def nvidia_static_th(size: int, pool_size: int, pg_dynamic_th: int, port_dynamic_th: int,
                     port_size: int, pg_unlimited: bool = False) -> Derived:
    """``qos_sai_base.__compute_buffer_threshold_for_nvidia_device`` (SN5600-class with port
    alpha): the PG's and the port's alphas (dynamic_th 7 means alpha 64) share the pool, so
    ``static_th = int(pool x scale) + max(size, port size x a_pg / (1 + a_pg))`` with
    ``scale = a_port a_pg / (a_port a_pg + a_pg + 1)``, or ``a_port / (1 + a_port)`` for a PG
    without a limit of its own (``pg_unlimited``)."""

    def alpha(th: int) -> float:
        return 64.0 if th == 7 else _alpha(th)

    a_pg, a_port = alpha(pg_dynamic_th), alpha(port_dynamic_th)
    if pg_unlimited:
        scale, how = a_port / (1 + a_port), f"{a_port:g}/(1+{a_port:g})"
    else:
        scale = a_port * a_pg / (a_port * a_pg + a_pg + 1)
        how = f"{a_port:g}x{a_pg:g}/({a_port:g}x{a_pg:g}+{a_pg:g}+1)"
    own = max(size, port_size * a_pg / (1 + a_pg))
    value = int(int(pool_size * scale) + own)
    return Derived(value, (f"nvidia: alpha pg {a_pg:g} (dynamic_th {pg_dynamic_th}), port "
                           f"{a_port:g} (dynamic_th {port_dynamic_th}) -> scale {how}",
                           f"static_th = int({pool_size} x {scale:.6g}) + max({size}, "
                           f"{port_size} x {a_pg:g}/(1+{a_pg:g})) = {value} B"))


@dataclass(frozen=True)
class MellanoxAsic:
    """The generator's per-ASIC constants (cells of ``cell_size`` bytes)."""

    cell_size: int
    headroom_overhead: int
    private_headroom: int = 30


MELLANOX_ASICS = {
    "spc1": MellanoxAsic(96, 95), "spc2": MellanoxAsic(144, 64), "spc3": MellanoxAsic(144, 64),
    "spc4": MellanoxAsic(192, 47), "spc5": MellanoxAsic(192, 47), "spc6": MellanoxAsic(256, 47),
}
SPC3_400G_OVERHEAD = 59  # spc3 at 400G: more headroom overhead ...
SPC3_400G_MARGIN = 16  # ... and an extra margin on dismiss_pfc (two buffer units)
DESCRIPTOR_SIZE = {"spc6": 32}  # bytes each packet carries into its cells; 0 elsewhere


def cell_occupancy(packet_size: int, asic: str) -> int:
    """Cells one packet takes: ``ceil((packet_size + descriptor) / cell_size)``."""
    cell = MELLANOX_ASICS[asic].cell_size
    return math.ceil((packet_size + DESCRIPTOR_SIZE.get(asic, 0)) / cell)


@dataclass(frozen=True)
class MellanoxParams:
    """The generator's thresholds, in cells (one 64 B packet = one cell)."""

    cell_size: int
    trig_pfc: Derived
    trig_ingr_drp: Derived
    dismiss_pfc: Derived
    trig_egr_drp: Derived
    hysteresis: Derived
    ingress_lossless_size: int  # ``ils``: the PG's shared cells before XOFF
    extra_margin: int  # added to xon_N's dismiss_pfc


def mellanox_params(asic: str, speed_mbps: int, size: int, xon: int, xoff: int,
                    lossless_static_th: int, ingress_lossy_static_th: int,
                    egress_lossy_static_th: int, shared_headroom_pool: bool,
                    dual_tor: bool = False) -> MellanoxParams:
    """``QosParamMellanox.collect_qos_configurations``: from the src port's lossless profile
    (``size``, ``xon``, ``xoff`` bytes, ``lossless_static_th`` from ``static_th``), the lossy
    PG's and queue's ``static_th``, and whether ``ingress_lossless_pool`` has an ``xoff``
    (shared headroom pool). Every byte figure is rounded up to cells first."""
    if asic not in MELLANOX_ASICS:
        raise ValueError(f"Mellanox ASIC {asic!r} is not one of {', '.join(MELLANOX_ASICS)}")
    consts = MELLANOX_ASICS[asic]
    cell = consts.cell_size
    overhead, extra_margin = consts.headroom_overhead, 0
    if asic == "spc3" and speed_mbps == 400000:
        overhead, extra_margin = overhead + SPC3_400G_OVERHEAD, SPC3_400G_MARGIN

    def cells(n: int) -> int:
        return math.ceil(n / cell)

    xon_c, xoff_c, size_c = cells(xon), cells(xoff), cells(size)
    th_c = cells(lossless_static_th)
    inputs = (f"mellanox {asic}: cell {cell} B; xon {xon} -> {xon_c}, xoff {xoff} -> {xoff_c}, "
              f"size {size} -> {size_c}, static_th {lossless_static_th} -> {th_c} cells")
    if shared_headroom_pool:
        headroom, ils = xon_c + xoff_c, th_c - xon_c
        how = f"shared headroom pool: headroom = xon + xoff = {headroom}, ils = {th_c} - xon"
    else:
        headroom, ils = size_c, th_c - size_c
        how = f"private headroom: headroom = size = {headroom}, ils = {th_c} - headroom"
    hysteresis = headroom - (xon_c + xoff_c)
    base = (inputs, f"{how} = {ils}", f"hysteresis = headroom - (xon + xoff) = {hysteresis}")
    trig_pfc = ils + xon_c + hysteresis
    drop = ils + headroom
    if shared_headroom_pool:
        extra = xoff_c + (2 * xoff_c if dual_tor else 0)
        drop_how = f"ils + headroom + xoff{' + 2 xoff (dual ToR)' if dual_tor else ''}"
    else:
        extra = -overhead
        drop_how = f"ils + headroom - headroom_overhead {overhead}"
    drop += extra
    lossy_egress, lossy_ingress = cells(egress_lossy_static_th), cells(ingress_lossy_static_th)
    egr = (lossy_egress if lossy_egress <= lossy_ingress else lossy_ingress) + 1
    return MellanoxParams(
        cell,
        Derived(trig_pfc, (*base, f"pkts_num_trig_pfc = ils + xon + hysteresis = {trig_pfc}")),
        Derived(drop, (*base, f"pkts_num_trig_ingr_drp = {drop_how} = {drop}")),
        Derived(ils + 1, (*base, f"pkts_num_dismiss_pfc = ils + 1 = {ils + 1}")),
        Derived(egr, (f"lossy static_th: egress {egress_lossy_static_th} -> {lossy_egress}, "
                      f"ingress {ingress_lossy_static_th} -> {lossy_ingress} cells",
                      f"pkts_num_trig_egr_drp = min of the two + 1 = {egr}")),
        Derived(hysteresis, base), ils, extra_margin)


def mellanox_shp_trig_pfc(asic: str, params: MellanoxParams, xon: int, ports: int = 7,
                          pgs_per_port: int = 2, pg_alpha: float | None = None,
                          port_alpha: float | None = None, pool_size: int | None = None
                          ) -> list[int]:
    """``pkts_num_trig_pfc_shp`` of the headroom pool test: per PG in fill order, in cells.
    spc1-3 halve the occupancy for every further PG (alpha 1, the free pool shrinking);
    spc4/5 solve ``pg_occ = ceil((a_pg a_port (P - used) - a_pg used) / (1 + a_pg a_port +
    a_pg))`` per port, each port seeing the pool its predecessors left (``pool_size`` bytes,
    ``xon`` bytes)."""
    cell = params.cell_size
    xon_c, hysteresis = math.ceil(xon / cell), params.hysteresis.value
    out = []
    if asic in ("spc4", "spc5"):
        if pg_alpha is None or port_alpha is None or pool_size is None:
            raise ValueError(f"{asic}: the headroom pool triggers need pg_alpha, port_alpha "
                             "and pool_size")
        pool = math.ceil(pool_size / cell)
        for _ in range(ports):
            used = 0
            for _ in range(pgs_per_port):
                occupancy = math.ceil((pg_alpha * port_alpha * (pool - used) - pg_alpha * used)
                                      / (1 + pg_alpha * port_alpha + pg_alpha))
                out.append(occupancy + xon_c + hysteresis)
                used += occupancy
            pool -= used
        return out
    occupancy = params.ingress_lossless_size
    for _ in range(ports * pgs_per_port):
        out.append(occupancy + xon_c + hysteresis)
        occupancy //= 2
    return out


def pfc_xoff_first_stage(trig_pfc: int, occupancy: int, leak_out: int = 0,
                         margin: int = 2) -> int:
    """PFCtest's stage (a): packets sent before PFC may fire, ``(L + T_pfc) // occ - 1 - M``."""
    return (leak_out + trig_pfc) // occupancy - 1 - margin
