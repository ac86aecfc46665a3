"""The L1-aware blocking model of SGEMM-cube (section 3.3 of the paper, Eq. 8-11).

One emulated product runs ``n_terms`` (3, or 4 with the lo*lo term) FP16 GEMM
passes (or one pass over hi and lo planes held together, when the profile's
``blocking.fused_terms`` is set).  Each pass follows Algorithm 1: every AI
core owns block rows of A (bm x K); it keeps ``N_fused`` A blocks (bm x bk each) resident in L1, streams
B blocks (bk x bn) through ``b_buffers`` L1 buffers, and reads, updates and
writes its C tile (bm x bn, FP32) once per group of ``N_fused`` K blocks.

Everything here is vectorised over candidate blocks with NumPy and is exact
integer arithmetic where the paper is (block counts, capacities); the time
model is a roofline in float64.  Symbols follow the paper:

* Eq. 8:  ``N_fused = floor((L1 - b_buffers*bk*bn) / (bm*bk))``, with L1 in
  operand elements (``l1_bytes / operand_bytes``), and the fusion efficiency
  ``f = N_fused * bm * bk / L1``.
* Eq. 9:  main-memory traffic in elements, ``A_r = m k``,
  ``B_r = m k n / (N_core bm)``, ``C_rw = 2 m k n bm / (f L1)``.
  :func:`traffic` counts blocks exactly (ceil divisions, at least one C
  write); it equals Eq. 9 whenever bm divides m and ``N_fused*bk`` divides k.
* Eq. 10: :func:`constraints`, generic in the profile; for the 910A profile it
  is the paper's ``bm*bk <= 64*256``, ``bk*bn <= 64*256``,
  ``bm*bn*6 <= 248*1024``.
* Eq. 11: ``bm_opt = sqrt(f L1 / (2 N_core))``, the minimiser of
  ``B_r + C_rw`` over bm (:func:`bm_opt`).

The predicted time is ``T_comp + T_mem`` (single buffering) or
``max(T_comp, T_mem)`` (double buffering, section 3.3.2), with ``T_comp`` the
aligned cube work spread over the cores in waves at the FP16 peak and
``T_mem`` the Eq. 9 bytes at the HBM bandwidth.  It ignores L1 -> L0 and
instruction overheads, so it is an upper bound on throughput (the paper
measures 65.3 TFLOP/s on 910A where the double-buffered bound is 85.3); the
paper's observation that small blocks underuse L0A/L0B is applied as a filter
in :func:`rank` (``min_l0_intensity``).

Rounding Eq. 11 to the alignment: the paper says "nearest multiple of 16" and
gets 96 from 86-90, which only rounding up or the traffic-minimising
neighbour (:func:`round_bm_opt`, used here) give.
"""
from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np

from sgemm_cube.backends.npu_schedule import Tiling  # the one tiling type (schedule::Tiling)

from .hardware import Blocking, Profile, get_profile

__all__ = [
    "C_BYTES",
    "Candidates",
    "Constraints",
    "Prediction",
    "RankedTiling",
    "Tiling",
    "bm_opt",
    "choose_tiling",
    "constraints",
    "enumerate_blocks",
    "feasible",
    "fusion_efficiency",
    "kernel_blocking",
    "l0_intensity",
    "l1_elements",
    "n_fused",
    "predict",
    "rank",
    "representative_f",
    "round_bm_opt",
    "traffic",
    "traffic_eq9",
]

C_BYTES = 4
"""Bytes of one C element in main memory (FP32)."""


class Constraints(NamedTuple):
    """Eq. 10 for one profile, in elements except where named ``_bytes``.

    Attributes
    ----------
    align : int
        bm, bk, bn must be multiples of this (the cube fractal edge).
    max_a_elems : int
        Largest bm*bk: L0A bytes / (l0_stages * operand_bytes).
    max_b_elems : int
        Largest bk*bn: L0B bytes / (l0_stages * operand_bytes).
    c_bytes_per_element : int
        C-path bytes per element of a bm x bn tile.
    c_budget_bytes : int
        Bytes those tiles may use: the smallest ``c_path`` buffer less the
        reserve; ``bm*bn*c_bytes_per_element <= c_budget_bytes``.
    l1_elems : int
        L1 capacity in operand elements; N_fused >= 1 needs
        ``bm*bk + b_buffers*bk*bn <= l1_elems``.
    """

    align: int
    max_a_elems: int
    max_b_elems: int
    c_bytes_per_element: int
    c_budget_bytes: int
    l1_elems: int


class Candidates(NamedTuple):
    """Feasible blocks, one entry per configuration (int64 arrays)."""

    bm: np.ndarray
    bk: np.ndarray
    bn: np.ndarray
    n_fused: np.ndarray
    f: np.ndarray  # float64

    def __len__(self) -> int:  # number of configurations, not of fields
        return int(self.bm.size)


class Prediction(NamedTuple):
    """Model outputs for candidates on one problem (float64 arrays).

    Traffic is summed over the passes; times are seconds;
    throughput is FP32-equivalent (``2 m n k / time``), TFLOP/s.
    """

    n_fused: np.ndarray  # effective: at most the number of K blocks
    traffic_elems: np.ndarray
    traffic_bytes: np.ndarray
    t_comp: np.ndarray
    t_mem: np.ndarray
    t_single: np.ndarray
    t_double: np.ndarray
    tflops_single: np.ndarray
    tflops_double: np.ndarray



class RankedTiling(NamedTuple):
    """One row of :func:`rank`'s table."""

    bm: int
    bk: int
    bn: int
    n_fused: int
    f: float
    traffic_bytes: float
    t_comp: float
    t_mem: float
    t_single: float
    t_double: float
    tflops_single: float
    tflops_double: float


def _with_blocking(p: Profile, blocking: Blocking | None) -> Profile:
    return p if blocking is None else dataclasses.replace(p, blocking=blocking)


def kernel_blocking(profile: Profile | str, *, n_terms: int = 3, per_term: bool = False) -> Blocking:
    """Blocking constants of this package's AscendC kernel (``ascendc_kernels/``).

    By default (``per_term=False``) that kernel keeps the hi and lo parts of
    every block together (4 bytes per operand element in L1, L0A and L0B,
    two L0 stages, two B buffers) and runs all ``n_terms`` products in one
    pass, each into its own FP32 accumulator in L0C (``4 * n_terms`` bytes
    per C element).  Where C leaves through UB (910A) the epilogue holds two
    or three FP32 tiles there (the bound uses three: 12 bytes per element)
    next to the profile's UB reserve.  One budget, the smallest C-path
    buffer less that reserve, bounds the larger of the two needs: never
    looser than the kernel's own per-buffer checks.

    ``per_term=True`` is its other mode, the paper's: one pass per term with
    one FP16 plane (2 bytes per operand element) and one accumulator (4
    bytes per C element; 8 on 910A, for the NZ copy and one ND tile in UB).
    """
    p = get_profile(profile)
    if n_terms not in (3, 4):
        raise ValueError(f"n_terms must be 3 or 4, got {n_terms}")
    through_ub = "ub" in p.c_path
    if per_term:
        return Blocking(operand_bytes=2, l0_stages=2, b_buffers=2, c_bytes_per_element=8 if through_ub else 4,
                        c_reserved_bytes=p.blocking.c_reserved_bytes, fused_terms=False)
    c_bytes = max(4 * n_terms, 12 if through_ub else 0)
    return Blocking(operand_bytes=4, l0_stages=2, b_buffers=2, c_bytes_per_element=c_bytes,
                    c_reserved_bytes=p.blocking.c_reserved_bytes, fused_terms=True)


def l1_elements(profile: Profile | str) -> int:
    """L1 capacity in streamed operand elements (the paper's ``L1``)."""
    p = get_profile(profile)
    return p.l1_bytes // p.blocking.operand_bytes


def constraints(profile: Profile | str) -> Constraints:
    """Eq. 10 derived from a profile (see :class:`Constraints`).

    For the 910A profile (64 KiB L0A/L0B, two L0 stages, FP16 operands;
    L0C and UB of 256 KiB on the C path, 8 KiB reserved, 6 B per C element)
    this is exactly the paper's Eq. 10.
    """
    p = get_profile(profile)
    b = p.blocking
    return Constraints(
        align=p.cube_block,
        max_a_elems=p.l0a_bytes // (b.l0_stages * b.operand_bytes),
        max_b_elems=p.l0b_bytes // (b.l0_stages * b.operand_bytes),
        c_bytes_per_element=b.c_bytes_per_element,
        c_budget_bytes=p.c_budget_bytes,
        l1_elems=l1_elements(p),
    )


def n_fused(profile: Profile | str, bm, bk, bn) -> np.ndarray:
    """Eq. 8: A blocks that stay resident in L1 beside the B buffers (int64, may be <= 0)."""
    p = get_profile(profile)
    bm, bk, bn = (np.asarray(x, dtype=np.int64) for x in (bm, bk, bn))
    return (l1_elements(p) - p.blocking.b_buffers * bk * bn) // (bm * bk)


def fusion_efficiency(profile: Profile | str, bm, bk, bn) -> np.ndarray:
    """Eq. 8's ``f = N_fused * bm * bk / L1``: the fraction of L1 holding resident A."""
    nf = n_fused(profile, bm, bk, bn)
    return nf * np.asarray(bm, dtype=np.int64) * np.asarray(bk, dtype=np.int64) / l1_elements(profile)


def feasible(profile: Profile | str, bm, bk, bn) -> np.ndarray:
    """Whether blocks satisfy Eq. 10 and leave room for at least one A block in L1."""
    c = constraints(profile)
    bm, bk, bn = (np.asarray(x, dtype=np.int64) for x in (bm, bk, bn))
    return (
        (bm > 0) & (bk > 0) & (bn > 0)
        & (bm % c.align == 0) & (bk % c.align == 0) & (bn % c.align == 0)
        & (bm * bk <= c.max_a_elems)
        & (bk * bn <= c.max_b_elems)
        & (bm * bn * c.c_bytes_per_element <= c.c_budget_bytes)
        & (n_fused(profile, bm, bk, bn) >= 1)
    )


def enumerate_blocks(
    profile: Profile | str, *, max_bm: int | None = None, max_bk: int | None = None, max_bn: int | None = None
) -> Candidates:
    """Every feasible (bm, bk, bn), optionally capped per dimension.

    The caps (rounded up to the alignment) let :func:`rank` skip blocks larger
    than the problem.  Order: bm, then bk, then bn ascending.
    """
    c = constraints(profile)
    top = max(c.max_a_elems, c.max_b_elems) // c.align  # no single edge can exceed this

    def edges(cap: int | None) -> np.ndarray:
        hi = top if cap is None else min(top, max(c.align, -(-cap // c.align) * c.align))
        return np.arange(c.align, hi + 1, c.align, dtype=np.int64)

    bm, bk, bn = (g.ravel() for g in np.meshgrid(edges(max_bm), edges(max_bk), edges(max_bn), indexing="ij"))
    ok = feasible(profile, bm, bk, bn)
    bm, bk, bn = bm[ok], bk[ok], bn[ok]
    return Candidates(bm, bk, bn, n_fused(profile, bm, bk, bn), fusion_efficiency(profile, bm, bk, bn))


def traffic_eq9(profile: Profile | str, m: int, n: int, k: int, bm, f) -> np.ndarray:
    """Eq. 9 as printed: ``m k + m k n / (N_core bm) + 2 m k n bm / (f L1)`` elements, one pass."""
    p = get_profile(profile)
    bm, f = np.asarray(bm, dtype=np.float64), np.asarray(f, dtype=np.float64)
    mkn = float(m) * k * n
    return m * k + mkn / (p.ai_cores * bm) + 2.0 * mkn * bm / (f * l1_elements(p))


def traffic(profile: Profile | str, m: int, n: int, k: int, bm, bk, bn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. 9 counted block by block for one pass: (A_r, B_r, C_rw) in elements.

    ``A_r = m k``; ``B_r = ceil(m/bm) k n / N_core`` (each block row streams
    all of B, shared by the cores as in the paper); ``C_rw = 2 m n`` per group
    of ``N_fused`` K blocks, ``ceil(ceil(k/bk) / N_fused)`` groups.
    """
    p = get_profile(profile)
    bm, bk, bn = (np.asarray(x, dtype=np.int64) for x in (bm, bk, bn))
    k_blocks = -(-k // bk)
    nf = np.minimum(n_fused(p, bm, bk, bn), k_blocks)
    groups = -(-k_blocks // np.maximum(nf, 1))
    a_r = np.full(bm.shape, float(m) * k)
    b_r = (-(-m // bm)) * (float(k) * n) / p.ai_cores
    c_rw = 2.0 * m * n * groups
    return a_r, b_r, c_rw


def predict(profile: Profile | str, m: int, n: int, k: int, bm, bk, bn, *, n_terms: int = 3) -> Prediction:
    """Traffic, compute/transfer times and throughput of blocks on an m x k x n product.

    Parameters
    ----------
    profile : Profile or str
    m, n, k : int
        C is m x n, the reduction is over k.
    bm, bk, bn : array_like of int
        Blocks (broadcast together); feasibility is not checked here.
    n_terms : int, keyword-only
        FP16 GEMM passes: 3 (hi*hi, lo*hi, hi*lo) or 4 with lo*lo.

    Notes
    -----
    ``T_comp = n_terms * waves * 2 (M'/ceil(m/bm)) (N'/ceil(n/bn)) K' / P_core``:
    the work of the sizes rounded up to the cube alignment (M', N', K'),
    spread evenly over the ``ceil(m/bm) ceil(n/bn)`` C tiles, done in
    ``waves = ceil(tiles / N_core)`` rounds at the per-core FP16 peak ``P_core``.
    ``T_mem = passes * (operand_bytes (A_r + B_r) + 4 C_rw) / BW`` with
    ``passes = n_terms``, or 1 for a ``fused_terms`` kernel.
    """
    p = get_profile(profile)
    if min(m, n, k) < 1 or n_terms < 1:
        raise ValueError(f"need m, n, k, n_terms >= 1, got {(m, n, k, n_terms)}")
    bm, bk, bn = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (bm, bk, bn)))
    a_r, b_r, c_rw = traffic(p, m, n, k, bm, bk, bn)
    passes = 1 if p.blocking.fused_terms else n_terms
    elems = passes * (a_r + b_r + c_rw)
    nbytes = passes * (p.blocking.operand_bytes * (a_r + b_r) + C_BYTES * c_rw)
    # The cube works on 16 x 16 fractals, so edge tiles cost their size rounded up
    # to the alignment, not a whole block: spread the aligned work evenly over
    # the tiles and count the waves of tiles over the cores.
    a = p.cube_block
    m_al, n_al, k_al = (-(-x // a) * a for x in (m, n, k))
    m_blocks, n_blocks = -(-m // bm), -(-n // bn)
    waves = -(-(m_blocks * n_blocks) // p.ai_cores)
    core_peak = p.cube_fp16_tflops * 1e12 / p.ai_cores
    t_comp = n_terms * waves * 2.0 * (m_al / m_blocks) * (n_al / n_blocks) * k_al / core_peak
    t_mem = nbytes / (p.hbm_gbps * 1e9)
    t_single, t_double = t_comp + t_mem, np.maximum(t_comp, t_mem)
    flops = 2.0 * m * n * k
    nf = np.minimum(n_fused(p, bm, bk, bn), -(-k // bk))
    return Prediction(nf, elems, nbytes, t_comp, t_mem, t_single, t_double,
                      flops / t_single / 1e12, flops / t_double / 1e12)


def l0_intensity(bm, bn) -> np.ndarray:
    """Cube MACs per operand element moved from L1 to L0A/L0B: ``bm bn / (bm + bn)``.

    One mmad loads ``bm*bk + bk*bn`` elements for ``bm*bk*bn`` MACs; bk cancels.
    """
    bm, bn = np.asarray(bm, dtype=np.float64), np.asarray(bn, dtype=np.float64)
    return bm * bn / (bm + bn)


def rank(
    profile: Profile | str,
    m: int,
    n: int,
    k: int,
    *,
    n_terms: int = 3,
    buffering: str = "double",
    sort: str = "time",
    min_l0_intensity: float = 0.5,
    top: int | None = None,
    blocking: Blocking | None = None,
) -> list[RankedTiling]:
    """Feasible blocks for an m x k x n product, best first.

    Parameters
    ----------
    profile : Profile or str
    m, n, k : int
    n_terms : int, keyword-only
        FP16 GEMM passes (3, or 4 with the lo*lo term).
    buffering : {"double", "single"}, keyword-only
        Which predicted time ranks: ``max(T_comp, T_mem)`` or ``T_comp + T_mem``.
    sort : {"time", "traffic"}, keyword-only
        Primary key; the other one breaks ties.  Both are compared in steps of
        1% of the best value (the model is no more accurate than that, and
        otherwise sub-percent wave effects would decide alone).  A final
        tie-break prefers the larger mmad (fewer cube instructions), then
        smaller bm, bk, bn.
    min_l0_intensity : float in [0, 1], keyword-only
        Keep only blocks whose :func:`l0_intensity` is at least this fraction
        of the best one the problem allows.  The roofline does not see the
        L1 -> L0A/L0B transfers (no public bandwidth figure), which the paper
        found make small blocks slow (its Fig. 10); 0 disables the filter and
        ranks by Eq. 9 and the roofline alone.
    top : int, optional, keyword-only
        Return only the first ``top`` rows.
    blocking : Blocking, optional, keyword-only
        Kernel-design constants replacing the profile's (see :mod:`sgemm_cube.tuning.hardware`).

    Returns
    -------
    list of RankedTiling
        ``n_fused`` is the effective value (at most the number of K blocks).
    """
    if buffering not in ("double", "single"):
        raise ValueError(f"buffering must be 'double' or 'single', got {buffering!r}")
    if sort not in ("time", "traffic"):
        raise ValueError(f"sort must be 'time' or 'traffic', got {sort!r}")
    if not 0.0 <= min_l0_intensity <= 1.0:
        raise ValueError(f"min_l0_intensity must lie in [0, 1], got {min_l0_intensity}")
    p = _with_blocking(get_profile(profile), blocking)
    cand = enumerate_blocks(p, max_bm=m, max_bk=k, max_bn=n)
    if len(cand) == 0:  # pragma: no cover - a 16^3 block is feasible on any sane profile
        raise ValueError(f"profile {p.key!r} admits no block at all")
    intensity = l0_intensity(cand.bm, cand.bn)
    keep = intensity >= min_l0_intensity * intensity.max() * (1 - 1e-12)
    cand = Candidates(*(a[keep] for a in cand))
    pred = predict(p, m, n, k, cand.bm, cand.bk, cand.bn, n_terms=n_terms)
    t = pred.t_double if buffering == "double" else pred.t_single
    # 1% steps: near-equal predictions tie and the later keys decide.
    t_key, b_key = np.round(t / t.min(), 2), np.round(pred.traffic_bytes / pred.traffic_bytes.min(), 2)
    first, second = (t_key, b_key) if sort == "time" else (b_key, t_key)
    order = np.lexsort((cand.bn, cand.bk, cand.bm, -(cand.bm * cand.bk * cand.bn), second, first))
    if top is not None:
        order = order[:top]
    return [
        RankedTiling(int(cand.bm[i]), int(cand.bk[i]), int(cand.bn[i]), int(pred.n_fused[i]), float(cand.f[i]),
                     float(pred.traffic_bytes[i]), float(pred.t_comp[i]), float(pred.t_mem[i]),
                     float(pred.t_single[i]), float(pred.t_double[i]),
                     float(pred.tflops_single[i]), float(pred.tflops_double[i]))
        for i in order
    ]


def representative_f(profile: Profile | str, *, ratio: tuple[float, float] = (0.5, 2.0)) -> float:
    """Median fusion efficiency over feasible blocks with ``ratio[0] <= bn/bm <= ratio[1]``.

    The paper evaluates Eq. 11 with "f" from this range of shapes (its Fig. 5)
    without saying which value; the median is the value this package uses.
    """
    cand = enumerate_blocks(profile)
    r = cand.bn / cand.bm
    sel = (r >= ratio[0]) & (r <= ratio[1])
    return float(np.median(cand.f[sel]))


def bm_opt(profile: Profile | str, f: float | None = None) -> float:
    """Eq. 11: ``sqrt(f L1 / (2 N_core))``, L1 in operand elements.

    ``f`` defaults to :func:`representative_f`.  On 910A this is 88.99
    (f = 0.967); f over [0.92, 0.99] gives 86.8 to 90.0.
    """
    p = get_profile(profile)
    f = representative_f(p) if f is None else f
    return math.sqrt(f * l1_elements(p) / (2 * p.ai_cores))


def round_bm_opt(profile: Profile | str, f: float | None = None) -> int:
    """Eq. 11's optimum moved to the cube alignment.

    Of the two aligned neighbours of :func:`bm_opt`, the one with the smaller
    ``B_r + C_rw`` of Eq. 9: since that sum is ``a/bm + b*bm`` with
    ``a/b = bm_opt**2``, the upper neighbour ``hi`` wins when
    ``bm_opt**2 > lo*hi``.  On 910A: 88.99**2 > 80*96, so 96, the paper's value.
    """
    p = get_profile(profile)
    x, a = bm_opt(p, f), p.cube_block
    lo = max(a, math.floor(x / a) * a)
    hi = lo + a
    return hi if x * x > lo * hi else lo


def choose_tiling(
    profile_name: Profile | str,
    m: int,
    n: int,
    k: int,
    *,
    n_terms: int = 3,
    use_table: bool = True,
    blocking: Blocking | str = "kernel",
) -> Tiling:
    """The tiling the AscendC kernel should use for an m x k x n product.

    A measured entry of the tuning table for this profile's device (see
    :mod:`sgemm_cube.tuning.table`; written by ``tuning.npu``) wins when it exists and is
    feasible for the profile; otherwise the model's best (:func:`rank` with its
    defaults).  The returned ``n_fused`` never exceeds ``ceil(k / bk)``; for the kernel it makes K
    groups of ``cpu_fallback.K_GROUP`` elements (``npu_schedule.fit_tiling``: the two-level accumulation).

    ``blocking`` names the kernel design the tiling is for: ``"kernel"``
    (default) this package's AscendC kernel with all terms in one pass
    (:func:`kernel_blocking`), ``"kernel-per-term"`` the same kernel with one
    pass per term (the returned tiling has ``per_term=True``), ``"paper"``
    the profile's own rows (the paper's Algorithm 1), or any
    :class:`~sgemm_cube.tuning.hardware.Blocking`.  A table entry is used
    only for the mode it was measured in.  Which mode is faster for a shape
    is the pipeline model's call: :func:`sgemm_cube.tuning.pipeline.best_kernel`.
    """
    base = get_profile(profile_name)
    per_term = blocking == "kernel-per-term"
    kernel = blocking in ("kernel", "kernel-per-term")
    if kernel:
        blocking = kernel_blocking(base, n_terms=n_terms, per_term=per_term)
    elif blocking == "paper":
        blocking = None
    elif not isinstance(blocking, Blocking):
        raise ValueError(f"blocking must be 'kernel', 'kernel-per-term', 'paper' or a Blocking, got {blocking!r}")
    p = _with_blocking(base, blocking)
    if use_table:
        from . import table  # late: table validates Ascend entries with this module

        cfg = table.lookup(p.name, m, n, k, backend="ascend")
        if cfg is not None and bool(cfg.get("per_term", False)) == per_term:
            bm, bk, bn = cfg["bm"], cfg["bk"], cfg["bn"]
            if bool(feasible(p, bm, bk, bn)):
                nf = min(int(n_fused(p, bm, bk, bn)), -(-k // bk), cfg.get("n_fused", 1 << 30))
                return _for_kernel(base, Tiling(bm, bk, bn, nf, per_term), k, n_terms, kernel)
    best = rank(p, m, n, k, n_terms=n_terms, top=1)[0]
    return _for_kernel(base, Tiling(best.bm, best.bk, best.bn, best.n_fused, per_term), k, n_terms, kernel)


def _for_kernel(p: Profile, t: Tiling, k: int, n_terms: int, kernel: bool) -> Tiling:
    """The kernel's tilings run K groups of ``cpu_fallback.K_GROUP`` elements (``npu_schedule.fit_tiling``
    sets ``n_fused``, and ``bk`` where it does not divide the group); other designs' as they are."""
    if not kernel:
        return t
    from sgemm_cube.backends import npu_schedule as ns

    return ns.fit_tiling(ns.capacity_from_profile(p), t, k=k, terms=n_terms)
