"""Host side of the CUDA backend: configs, padding, the two launches.

``matmul`` = split A, split B (:mod:`.split_kernel`), then the GEMM of the
scheme's slice products (:mod:`.gemm_kernel`): three or four FP16 products
(fp16x3, fp16x4), nine or six BF16 products (bf16x9, bf16x6).  Which tile shape and kernel variant to use is
data: ``configs/<gpu>.json`` holds the measured choice per shape bucket (see
``benchmarks/NOTES_gpu.md`` for how each number was measured).

Runs on CUDA tensors, or on CPU tensors when ``TRITON_INTERPRET=1`` was set
before Triton was imported (the CI tests do that).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
import triton

from cpu_fallback import get_scheme

from ..base import SplitStats
from . import SCHEMES
from .gemm_kernel import VARIANTS, sgemm_cube_kernel
from .hybrid import device_key, interpreter_active, load_device_table
from .split_kernel import split_operand

__all__ = ["matmul", "split_operands", "launch_gemm", "resolve_config", "flush_steps", "SplitOperands",
           "DEFAULT_FLUSH_K"]

#: Default K interval between round-to-nearest flushes of the hi*hi partial:
#: measured both faster and, on same-sign data, twice as accurate as 128 on
#: the H200 (benchmarks/NOTES_gpu.md).
DEFAULT_FLUSH_K = 64

_CONFIG_KEYS = ("variant", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages",
                "split_corr", "warp_specialize", "split_block", "split_warps", "flush_k", "merge_levels")
# Used where no measured table entry matches: the fastest accurate config of
# the H200 sweeps (benchmarks/NOTES_gpu.md).  ``split_corr`` puts the two
# correction products in two accumulators instead of one chain; it spills at
# 128x128 and measured slower.
_FALLBACK = {"variant": "tma", "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8,
             "num_warps": 8, "num_stages": 3, "split_corr": False, "warp_specialize": False,
             "split_block": [64, 64], "split_warps": 4, "flush_k": DEFAULT_FLUSH_K, "merge_levels": False}
# A fourth 128x128 accumulator (lo*lo) does not fit in the registers: half the
# tile.  BF16 schemes keep four accumulators too and load six tiles per K step.
# Compiled for sm_90 here (NOTES_gpu.md): 64x128 with 8 warps waits after
# every MMA, 128x64 does not (164 registers, no spill); 72 KiB per stage, so
# two stages (144 KiB of Hopper's 227).  ``merge_levels`` (three
# accumulators, 128x128, 232 registers) is the alternative to measure.
_BF16 = {"BLOCK_M": 128, "BLOCK_N": 64, "num_stages": 2}
_FALLBACK_MODE = {"termwise": {}, "elementwise": {}, "lo_lo": {"BLOCK_M": 64}, "bf16x9": _BF16, "bf16x6": _BF16}
# Under the interpreter small tiles keep the NumPy emulation quick.
_INTERPRETER = {"variant": "ptr", "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 2,
                "num_warps": 4, "num_stages": 1, "split_corr": False, "warp_specialize": False,
                "split_block": [32, 32], "split_warps": 4, "flush_k": DEFAULT_FLUSH_K, "merge_levels": False}


class SplitOperands(NamedTuple):
    """The split operands of one problem, as :func:`launch_gemm` reads them.

    ``a_hilo`` (S, Ba, Mp, Kp) and ``b_hilo`` (S, Bb, Kp, Np), zero padded:
    for FP16 schemes float16 with S = 2 (plane 0 hi, plane 1 lo), for BF16
    schemes bfloat16 with S = 3 (the slices s0, s1, s2); ``Ba``/``Bb`` are 1
    for a broadcast operand.  ``stats`` is the :class:`SplitStats` of the
    original operands; ``scheme`` the split scheme's name.
    """

    a_hilo: torch.Tensor
    b_hilo: torch.Tensor
    batch: int
    m: int
    n: int
    k: int
    stats: SplitStats
    scheme: str = "fp16x3"


def _scheme(scheme: str, keep_lo_lo: bool) -> str:
    """The scheme that runs: ``keep_lo_lo`` is shorthand for fp16x4."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; the cuda backend runs {list(SCHEMES)}")
    if keep_lo_lo:
        if scheme not in ("fp16x3", "fp16x4"):
            raise ValueError(f"keep_lo_lo is shorthand for scheme='fp16x4'; it does not combine with {scheme!r}")
        return "fp16x4"
    return scheme


def _mode(order: str, scheme: str) -> str:
    """Config table key: the FP16 order, ``"lo_lo"`` (fp16x4) or the BF16 scheme's name."""
    if scheme == "fp16x3":
        return order
    return "lo_lo" if scheme == "fp16x4" else scheme


def _tuned(device, m: int, n: int, k: int) -> dict | None:
    """The tuner's measured config for this GPU and shape bucket (:mod:`tuning.table`), if any."""
    try:
        from tuning.table import lookup
    except ImportError:  # sgemm_cube installed without its tuning package
        return None
    return lookup(torch.cuda.get_device_name(device), m, n, k, backend="cuda")


def _has_tma(device) -> bool:
    """Whether the GPU has the tensor memory accelerator (Hopper, compute capability 9, and later)."""
    return torch.cuda.get_device_capability(device)[0] >= 9


@functools.lru_cache(maxsize=4096)
def _stored_config(device, batch: int, m: int, n: int, k: int, mode: str) -> dict:
    """Sources 1-3 of :func:`resolve_config`, cached: a small product spends less
    time on the GPU than these look-ups take in Python.  (A table the tuner
    writes later in the same process is therefore not seen.)"""
    chosen = dict(_FALLBACK, **_FALLBACK_MODE[mode])
    table = load_device_table(device_key(device))
    flops = 2.0 * batch * m * n * k
    for entry in table.get(f"gemm_{mode}", []):
        if flops <= (entry.get("max_flops") or math.inf) and k <= (entry.get("max_k") or math.inf):
            chosen.update(entry["config"])
            break
    if mode == "termwise":
        chosen.update(_tuned(device, m, n, k) or {})
    if not _has_tma(device):
        chosen["variant"] = "ptr"
    return chosen


def resolve_config(batch: int, m: int, n: int, k: int, device, *, order: str = "termwise",
                   keep_lo_lo: bool = False, config: dict | None = None, scheme: str = "fp16x3") -> dict:
    """Pick the launch configuration (and default ``flush_k``) for a problem.

    Later sources override earlier ones, key by key:

    1. the built-in fallback (small tiles under the interpreter);
    2. this package's table ``configs/<gpu>.json``: one list per mode,
       ``"gemm_termwise"``, ``"gemm_elementwise"``, ``"gemm_lo_lo"`` (fp16x4),
       ``"gemm_bf16x9"``, ``"gemm_bf16x6"`` (both orders), of
       ``{"max_flops": F, "max_k": K, "config": {...}}`` (limits optional);
       the first entry with ``2 * batch * m * n * k <= F`` and ``k <= K``
       applies;
    3. for the termwise three-product mode, the tuner's table for this GPU
       (``sgemm-cube tune --device cuda --measure``, :mod:`tuning.table`);
    4. ``config``.
    """
    mode = _mode(order, _scheme(scheme, keep_lo_lo))
    if interpreter_active():
        chosen = dict(_INTERPRETER)
    else:
        chosen = dict(_stored_config(torch.device(device), batch, m, n, k, mode))
    chosen.update(config or {})
    unknown = set(chosen) - set(_CONFIG_KEYS)
    if unknown:
        raise ValueError(f"unknown config keys {sorted(unknown)}; valid: {list(_CONFIG_KEYS)}")
    if chosen["variant"] not in VARIANTS:
        raise ValueError(f"unknown kernel variant {chosen['variant']!r}; choose one of {sorted(VARIANTS)}")
    return chosen


def flush_steps(flush_k: int, block_k: int) -> tuple[int, int]:
    """Return (BLOCK_K, FLUSH_STEPS) for a flush interval of ``flush_k`` K elements; 0 = never flush.

    BLOCK_K is halved until it divides the interval.
    """
    if isinstance(flush_k, bool) or not isinstance(flush_k, int) or flush_k < 0:
        raise ValueError(f"flush_k must be a non-negative integer, got {flush_k!r}")
    if flush_k == 0:
        return block_k, 0
    if flush_k % 16:
        raise ValueError(f"flush_k must be 0 (never) or a positive multiple of 16, got {flush_k}")
    while flush_k % block_k:
        block_k //= 2
    return block_k, flush_k // block_k


def _cdiv_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _num_sms(device) -> int:
    if torch.device(device).type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def _unique_batch(x: torch.Tensor) -> torch.Tensor:
    """Drop a broadcast (stride-0) batch axis: split it once, not per batch."""
    if x.shape[0] > 1 and x.stride(0) == 0:
        return x[:1]
    return x


def split_operands(a: torch.Tensor, b: torch.Tensor, *, sb: int, cfg: dict, block_k: int,
                   scheme: str = "fp16x3") -> SplitOperands:
    """Split both operands into padded slice buffers (two launches).

    ``a`` (B, M, K), ``b`` (B, K, N) float32 with any strides; a batch axis of
    stride 0 is split once.  ``cfg`` is a :func:`resolve_config` result,
    ``block_k`` the K step of the GEMM that will read the buffers and
    ``scheme`` the split scheme (FP16 hi/lo or three BF16 slices).
    """
    batch, m, k = a.shape
    n = b.shape[2]
    a_u, b_u = _unique_batch(a), _unique_batch(b)
    mp, np_, kp = _cdiv_up(m, cfg["BLOCK_M"]), _cdiv_up(n, cfg["BLOCK_N"]), _cdiv_up(k, block_k)
    kw = dict(sb=sb, block=tuple(cfg["split_block"]), num_warps=cfg["split_warps"], scheme=scheme)
    a_hilo, a_max, a_bad = split_operand(a_u, rows_pad=mp, cols_pad=kp, k_axis=1, **kw)
    b_hilo, b_max, b_bad = split_operand(b_u, rows_pad=kp, cols_pad=np_, k_axis=0, **kw)
    stats = SplitStats(a_max.expand(batch, m), b_max.expand(batch, n), a_bad, b_bad)
    return SplitOperands(a_hilo, b_hilo, batch, m, n, k, stats, scheme)


def launch_gemm(ops: SplitOperands, out: torch.Tensor, *, sb: int, order: str, keep_lo_lo: bool, cfg: dict,
                block_k: int, flush_steps: int) -> None:
    """Run the GEMM of ``ops.scheme``'s products on split operands, writing all of ``out`` (B, M, N).

    ``keep_lo_lo`` adds the fourth product to an FP16 scheme (fp16x4).
    """
    sch = get_scheme(_scheme(ops.scheme, keep_lo_lo))
    bf16 = sch.format.name == "bf16"
    slices, ba, mp, kp = ops.a_hilo.shape
    bb, np_ = ops.b_hilo.shape[1], ops.b_hilo.shape[3]
    block_m, block_n = cfg["BLOCK_M"], cfg["BLOCK_N"]
    a2d = ops.a_hilo.view(slices * ba * mp, kp)
    b2d = ops.b_hilo.view(slices * bb * kp, np_)
    use_tma, persistent = VARIANTS[cfg["variant"]]
    if use_tma:
        from triton.tools.tensor_descriptor import TensorDescriptor

        a_src = TensorDescriptor(a2d, list(a2d.shape), list(a2d.stride()), [block_m, block_k])
        b_src = TensorDescriptor(b2d, list(b2d.shape), list(b2d.stride()), [block_k, block_n])
    else:
        a_src, b_src = a2d, b2d
    num_tiles = triton.cdiv(ops.m, block_m) * triton.cdiv(ops.n, block_n) * ops.batch
    programs = min(num_tiles, _num_sms(out.device)) if persistent else num_tiles
    sgemm_cube_kernel[(programs,)](
        a_src, b_src, out,
        ops.m, ops.n, kp, ops.batch, programs,
        ba * mp, mp if ba > 1 else 0, bb * kp, kp if bb > 1 else 0, kp, np_,
        out.stride(0), out.stride(1),
        SCALE=sch.level_scale(sb), TERMWISE=order == "termwise", SLICES=sch.slices,
        TOP_LEVEL=max(i + j for i, j in sch.products), FLUSH_STEPS=flush_steps,
        SPLIT_CORR=bool(cfg["split_corr"]), USE_TMA=use_tma, UPCAST=bf16 and interpreter_active(),
        MERGE_LEVELS=bf16 and bool(cfg["merge_levels"]),
        PERSISTENT=persistent,
        WARP_SPECIALIZE=bool(cfg["warp_specialize"]),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=cfg["GROUP_M"],
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])


def _check(a, b, sb, order, out) -> None:
    if order not in ("termwise", "elementwise"):
        raise ValueError(f"unknown order {order!r}; choose one of ['termwise', 'elementwise']")
    if isinstance(sb, bool) or not isinstance(sb, int) or not 0 <= sb <= 24:
        raise ValueError(f"sb must be an integer in [0, 24], got {sb!r}")
    if a.dim() != 3 or b.dim() != 3 or out.dim() != 3:
        raise ValueError(f"expected 3-D a, b, out; got {tuple(a.shape)}, {tuple(b.shape)}, {tuple(out.shape)}")
    batch, m, k = a.shape
    if b.shape[0] != batch or b.shape[1] != k or tuple(out.shape) != (batch, m, b.shape[2]):
        raise ValueError(f"shapes {tuple(a.shape)} @ {tuple(b.shape)} -> {tuple(out.shape)} do not match")
    for name, t in (("a", a), ("b", b), ("out", out)):
        if t.dtype != torch.float32:
            raise TypeError(f"{name} must be float32, got {t.dtype}")
        if t.device != a.device:
            raise ValueError(f"{name} is on {t.device}, a on {a.device}")
    if a.device.type != "cuda" and not interpreter_active():
        raise ValueError(f"the cuda backend needs CUDA tensors (or TRITON_INTERPRET=1), got {a.device}")
    if out.stride(2) != 1 and out.shape[2] > 1:
        raise ValueError("out must have a last stride of 1")


def matmul(a: torch.Tensor, b: torch.Tensor, *, sb: int, order: str, keep_lo_lo: bool, out: torch.Tensor,
           flush_k: int | None = None, config: dict | None = None, scheme: str = "fp16x3",
           check=None) -> SplitStats:
    """Emulated FP32 batched product ``out[i] = a[i] @ b[i]`` on tensor cores.

    Parameters
    ----------
    a : torch.Tensor, shape (B, M, K), float32
    b : torch.Tensor, shape (B, K, N), float32
        Any strides; a batch stride of 0 broadcasts.  Non-finite elements are
        split as 0 (the caller patches the special outputs).
    sb : int
        Scaling exponent of the FP16 residuals, 0 <= sb <= 24 (checked, and
        unused, for the BF16 schemes).
    order : {"termwise", "elementwise"}
    keep_lo_lo : bool
        Also accumulate ``A_lo @ B_lo * 2**-2sb`` (shorthand for fp16x4).
    out : torch.Tensor, shape (B, M, N), float32, last stride 1
        Written in full.
    flush_k : int, optional
        K elements between round-to-nearest flushes of the hi*hi tensor-core
        partial (default: the config's, 64 unless a measured table says
        otherwise); 0 never flushes (for comparison only).
    config : dict, optional
        Overrides of the launch configuration (keys of :func:`resolve_config`).
    scheme : {"fp16x3", "fp16x4", "bf16x9", "bf16x6"}
        The split scheme (:mod:`cpu_fallback.schemes`).  The BF16 schemes
        split each operand into three BF16 slices and multiply nine (bf16x9)
        or the six largest (bf16x6) slice products on the tensor cores.
    check : callable, optional
        Called with the :class:`SplitStats` after the split and before the
        GEMM is launched.  The API layer reads its range check back to the
        host there: the host waits for the short split pass only, and its
        own overhead overlaps the GEMM; raising aborts before the GEMM.

    Returns
    -------
    SplitStats
        Row maxima of ``|a|``, column maxima of ``|b|`` (shapes (B, M), (B, N)),
        and the non-finite flags, all on the operands' device.
    """
    _check(a, b, sb, order, out)
    scheme = _scheme(scheme, keep_lo_lo)
    batch, m, k = a.shape
    n = b.shape[2]
    if batch == 0 or m == 0 or n == 0 or k == 0:
        out.zero_()
        dev = a.device
        return SplitStats(torch.zeros((batch, m), device=dev), torch.zeros((batch, n), device=dev),
                          torch.any(~torch.isfinite(a)), torch.any(~torch.isfinite(b)))
    cfg = resolve_config(batch, m, n, k, a.device, order=order, config=config, scheme=scheme)
    block_k, steps = flush_steps(cfg["flush_k"] if flush_k is None else flush_k, cfg["BLOCK_K"])
    ops = split_operands(a, b, sb=sb, cfg=cfg, block_k=block_k, scheme=scheme)
    if check is not None:
        check(ops.stats)
    launch_gemm(ops, out, sb=sb, order=order, keep_lo_lo=False, cfg=cfg, block_k=block_k, flush_steps=steps)
    return ops.stats
