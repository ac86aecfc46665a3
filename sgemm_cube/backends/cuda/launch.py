"""Host side of the CUDA backend: configs, padding, the five launches of a product.

:func:`run` runs five Triton launches on the current stream, each over both
operands where it reads them, and reads nothing back to the host:

1. :func:`.split_kernel.tile_stats_kernel` -- the statistics of both operands;
2. :func:`.split_kernel.line_meta_kernel` -- their line meta and fix-up lists
   (BF16 schemes, and FP16 schemes from K = 16 under ``scale`` "auto" or "rows": after
   :func:`.split_kernel.line_summary_kernel`, the summaries of both operands' lines that decide
   how far below its top each line may reach: six launches);
3. :func:`.split_kernel.split_scaled_kernel` -- the scaled split (FP16 or BF16 slices);
4. :func:`.gemm_kernel.gemm_kernel` -- the GEMM of the scheme's slice products
   (three or four FP16 products for fp16x3, fp16x4; nine or six BF16 products
   for bf16x9, bf16x6), whose fix-up programs compute the fix-up lines'
   outputs (:mod:`.fixup_kernel`);
5. :func:`.fixup_kernel.overflow_recheck_kernel` -- computes again, from the
   unscaled operands, the outputs of the tiles the GEMM listed where an output
   overflowed and the emulation's error bound could not tell whether the exact
   one does (returns at once where none did: every product but those with huge
   cancelling terms).

A chunked product (config keys ``row_chunks``, ``col_chunks``) splits and multiplies its operands a
block at a time after passes 1 and 2, to hold less memory (:func:`_chunked_launches`).

``scheme="auto"`` (:func:`_auto_problem`) runs eight: the line meta under both
schemes' ranges (both schemes' summaries in one launch, then both line metas in one), the GPU's choice
(:func:`.split_kernel.scheme_choice_kernel`),
the split in the chosen scheme, and the GEMMs of fp16x3 and bf16x6, of which the
one not chosen returns at once.

(``scale="matrix"`` adds PyTorch's reductions for the matrices' exponents.)
Which tile shape and kernel variant to use is data: ``configs/default.json``
and ``configs/<gpu>.json`` hold the measured choice per mode and shape bucket
(schema and validator: :mod:`.configs`; see ``docs/cuda_design.md`` for how
each number was measured).  Every launch is described once per problem by a
:class:`_Launch` holding the kernel's arguments by name; the first call goes
through Triton's public launch path, later calls with the same key replay the
launches through Triton's private launcher (:class:`_Cached`,
:func:`_private_launcher`, which checks the Triton version).

Runs on CUDA tensors, or on CPU tensors when ``TRITON_INTERPRET=1`` was set
before Triton was imported (the CI tests do that).
"""
from __future__ import annotations

import functools
import inspect
import math
import re
import warnings
from typing import NamedTuple

import numpy as np
import torch
import triton

from sgemm_cube.cpu_fallback import get_scheme
from sgemm_cube.cpu_fallback.guard import fixup_min_class as _fixup_min_class
from sgemm_cube.cpu_fallback.guard import (LineClass, certificate_threshold, certifies, emulated_error_bound,
                                          fp16_rule_applies, line_range)

from . import configs as _configs
from .fixup_kernel import (_ITEMS_PER_PROGRAM, APART_MAXNREG, APART_WARPS, RECHECK_ENTRY, apart_shape, fixup_shape,
                           overflow_recheck_kernel)
from .gemm_kernel import gemm_kernel
from .gemm_tiles import VARIANTS
from .hybrid import device_key, interpreter_active, load_device_table
from .split_kernel import (PAIR_BF16, PAIR_FP16, PAIR_NONE, SCALE_MODES, SUMMARY_WORDS, line_meta_kernel,
                           line_summary_kernel, scheme_choice_kernel, split_scaled_kernel, tile_stats_kernel)

__all__ = ["run", "check_operands", "split_operands", "resolve_config", "plan_config", "flush_steps",
           "SplitOperands", "LineOutputs", "DEFAULT_FLUSH_K"]

_DEFAULTS = _configs.defaults()
#: Default K interval between round-to-nearest flushes of the hi*hi partial (``configs/default.json``).
DEFAULT_FLUSH_K = _DEFAULTS["gemm_termwise"][0]["config"]["flush_k"]
#: The launch keys (:data:`.configs.KEYS`, the one list).
_CONFIG_KEYS = tuple(_configs.KEYS)
#: (lines, statistics tiles per step) of one program of the line-meta pass; ``split_block`` overrides it.
LINE_BLOCK = (32, 64)
#: The same under the interpreter, where small blocks keep the NumPy emulation quick.
_INTERPRETER_LINE_BLOCK = (16, 16)
#: (lines, K elements) of a program of the tiled split passes (statistics, scaled split): A's rows are
#: contiguous along K, B's columns across the lines, so that both read coalesced.
SPLIT_TILE_A = (32, 128)
SPLIT_TILE_B = (128, 32)
#: (lines, K elements per step, steps along K) of a program of the statistics pass, per operand: one
#: program reads ``steps`` tiles in a row and writes one statistic per line for them all, so that the
#: line-meta pass reads fewer (both operands: one per 64 elements of K).  A's tile is its split tile.
#: B's is 256 lines wide and 16 deep, so that each of four warps' threads holds adjacent columns over the
#: tile's K and reduces them without a shuffle: B's pass alone 171 -> 102 us at 8192^3 (A's 92 us), the
#: same statistics (H200, 2026-11-29, ``docs/speed.md``).  512 x 16 in one step read faster (86 us) but
#: wrote eight times the statistics, and the line-meta passes then took longer than the pass saved.
#: Two steps of A against one: H100, 2026-11-27, statistics + line-meta passes at 4096^3 / 8192^3 /
#: 16384^3: 1 step 87 / 335 / 1447 us, 2 steps 77 / 275 / 1177 us, 4 steps 85 / 285 / 1292 us.
STATS_TILE_A = (32, 128, 2)
STATS_TILE_B = (256, 16, 4)
#: Workspace pieces start at multiples of this many bytes (at least the 16 that TMA descriptors and
#: Triton's specialization of pointer arguments need).
_WS_ALIGN = 256
#: "SMs" of the CPU under Triton's interpreter (programs of the persistent and recheck grids): two, so
#: that a persistent program strides over tiles.
_INTERPRETER_SMS = 2
#: The same for the fix-up programs (:func:`.fixup_kernel.fixup_shape`: 2-4 programs per "SM").  Every
#: interpreted fix-up program costs about 45 ms even with nothing listed (its lists' counts, through
#: nested jit calls); with one "SM", 4 programs (2 from LONG_K), items still go round-robin to several
#: programs where they number more than ``fixup_kernel._ITEMS_PER_PROGRAM``, and the CUDA backend's
#: interpreted tests took a fifth less time than with two (246 -> 202 s, pytest -n 2 on two cores:
#: tests/sgemm_cube/backends/cuda, test_guarantee.py, test_accuracy_studies.py).
_INTERPRETER_FIXUP_SMS = 1
#: (max K, config): up to this K, on a GPU, the hi*hi partial is flushed every 32 elements
#: (``configs/default.json``, key ``small_k``, says why).
SMALL_K_FLUSH = (_DEFAULTS["small_k"]["max_k"], dict(_DEFAULTS["small_k"]["config"]))
#: ``scheme="auto"`` (``configs/default.json``, key ``auto_scheme``, says why): the two schemes the device
#: chooses between, the products from which it chooses (from AUTO_MIN_FLOPS flops, or from K = AUTO_MIN_K),
#: and the margin of recomputed outputs.
AUTO_SCHEMES = tuple(_DEFAULTS["auto_scheme"]["schemes"])
AUTO_MIN_FLOPS = float(_DEFAULTS["auto_scheme"]["min_flops"])
AUTO_MIN_K = int(_DEFAULTS["auto_scheme"]["min_k"])
AUTO_MARGIN = float(_DEFAULTS["auto_scheme"]["margin"])
# Under the interpreter small tiles keep the NumPy emulation quick (``configs/default.json``, key ``interpreter``).
_INTERPRETER = dict(_DEFAULTS["interpreter"]["config"])


class SplitOperands(NamedTuple):
    """The split operands of one problem, as the GEMM launch reads them.

    ``a_hilo`` (S, Ba, Mp, Kp) and ``b_hilo`` (S, Bb, Kp, Np), zero padded:
    for FP16 schemes float16 with S = 2 (plane 0 hi, plane 1 lo), for BF16
    schemes bfloat16 with S = 3 (the slices s0, s1, s2); ``Ba``/``Bb`` are 1
    for a broadcast operand.  ``a_lines``/``b_lines`` are the split pass's
    :class:`LineOutputs`; ``scheme`` the split scheme's name.
    """

    a_hilo: torch.Tensor
    b_hilo: torch.Tensor
    batch: int
    m: int
    n: int
    k: int
    a_lines: "LineOutputs"
    b_lines: "LineOutputs"
    scheme: str = "fp16x3"


class LineOutputs(NamedTuple):
    """What the split pass writes per line besides the slices (:mod:`.split_kernel`).

    ``meta`` (Bx, L) int32 packed line meta (:func:`sgemm_cube.cpu_fallback.guard.unpack_meta`);
    ``lists`` (Bx, blocks * block_l) and ``counts`` (Bx, blocks) int32, the
    fix-up lines of each block of ``block_l`` lines; ``order`` (Bx, L) int32, the
    same lines compacted per batch in rank order, then the other lines (ascending),
    and ``totals`` (Bx,) int32 their number (what the fix-up programs read).
    """

    meta: torch.Tensor
    lists: torch.Tensor
    counts: torch.Tensor
    order: torch.Tensor
    totals: torch.Tensor
    block_l: int

    @property
    def blocks(self) -> int:
        return self.counts.shape[1]


def _scheme(scheme: str, keep_lo_lo: bool) -> str:
    """The scheme that runs: ``keep_lo_lo`` is shorthand for fp16x4."""
    if scheme not in _configs.SCHEMES:
        raise ValueError(f"unknown scheme {scheme!r}; the cuda backend runs {list(_configs.SCHEMES)}")
    if keep_lo_lo:
        if scheme not in ("fp16x3", "fp16x4"):
            raise ValueError(f"keep_lo_lo is shorthand for scheme='fp16x4'; it does not combine with {scheme!r}")
        return "fp16x4"
    return scheme


def _tuned(device, m: int, n: int, k: int) -> dict | None:
    """The termwise config of this user's measured table for this GPU (``tuning/gpu.py``'s default
    output, :func:`.configs.user_dir`), if any; an invalid file raises :class:`.configs.ConfigError`."""
    path = _configs.user_dir() / f"{_configs.file_stem(torch.cuda.get_device_name(device))}.json"
    if not path.is_file():
        return None
    return _configs.choose(_configs.load(path), "termwise", 1, m, n, k)  # written on this GPU


def _device_name(device) -> str | None:
    """``torch.cuda.get_device_name`` of a CUDA device; ``None`` for another device."""
    return torch.cuda.get_device_name(device) if torch.device(device).type == "cuda" else None


def _has_tma(device) -> bool:
    """Whether the GPU has the tensor memory accelerator (Hopper, compute capability 9, and later)."""
    return torch.cuda.get_device_capability(device)[0] >= 9


@functools.lru_cache(maxsize=4096)
def _stored_config(device, batch: int, m: int, n: int, k: int, mode: str) -> dict:
    """Sources 1-3 of :func:`resolve_config`, cached: a small product spends less
    time on the GPU than these look-ups take in Python.  (A table the tuner
    writes later in the same process is therefore not seen.)"""
    chosen = _configs.choose(_DEFAULTS, mode, batch, m, n, k)
    chosen.update(_configs.choose(load_device_table(device_key(device)), mode, batch, m, n, k,
                                  device_name=_device_name(device)))
    if mode == "termwise":
        chosen.update(_tuned(device, m, n, k) or {})
    if not _has_tma(device):
        chosen["variant"] = "ptr"
    return chosen


def resolve_config(batch: int, m: int, n: int, k: int, device, *, order: str = "termwise",
                   keep_lo_lo: bool = False, config: dict | None = None, scheme: str = "fp16x3") -> dict:
    """Pick the launch configuration (and default ``flush_k``) for a problem.

    Later sources override earlier ones, key by key (:func:`.configs.choose`
    picks within one file: the first unbucketed entry whose ``max_flops`` /
    ``max_k`` hold, then the nearest shape bucket's entry):

    1. ``configs/default.json``'s list for the mode (``"gemm_termwise"``,
       ``"gemm_elementwise"``, ``"gemm_lo_lo"`` (fp16x4), ``"gemm_bf16x9"``,
       ``"gemm_bf16x6"``), or its ``"interpreter"`` config under ``TRITON_INTERPRET=1``;
    2. this package's ``configs/<gpu>.json`` (a Hopper GPU without one reads a sibling's);
    3. for the termwise three-product mode, the user's measured table for this
       GPU (``sgemm-cube tune --device cuda --measure``, :func:`.configs.user_dir`);
    4. for ``k <= SMALL_K_FLUSH[0]`` (on a GPU), ``SMALL_K_FLUSH[1]``: flushes
       every 32 elements of K, which the accuracy at small K needs;
    5. ``config`` (checked by :func:`.configs.validate_config`).
    """
    mode = _configs.mode_of(order, _scheme(scheme, keep_lo_lo))
    if interpreter_active():
        chosen = dict(_INTERPRETER)
    else:
        chosen = dict(_stored_config(torch.device(device), batch, m, n, k, mode))
    if k <= SMALL_K_FLUSH[0] and not interpreter_active():
        chosen.update(SMALL_K_FLUSH[1])
    chosen.update(_configs.validate_config(config or {}, source="config="))
    return chosen


def _frozen(config: dict) -> tuple:
    """A config as sorted ``(key, value)`` pairs, lists as tuples: the hashable form a plan carries."""
    return tuple(sorted((key, tuple(v) if isinstance(v, list) else v) for key, v in config.items()))


@functools.lru_cache(maxsize=4096)
def _plan_config(batch: int, m: int, n: int, k: int, device, order: str, scheme: str, interpreted: bool) -> tuple:
    return _frozen(resolve_config(batch, m, n, k, device, order=order, scheme=scheme))


def plan_config(batch: int, m: int, n: int, k: int, device, *, order: str, scheme: str) -> tuple:
    """:func:`resolve_config`'s choice for this problem (no overrides) as the sorted pairs a
    :class:`~sgemm_cube.plan.Plan` carries (:func:`sgemm_cube.backends.cuda.plan`); cached, as the
    stored tables' look-up is (:func:`_stored_config`)."""
    return _plan_config(batch, m, n, k, torch.device(device), order, scheme, interpreter_active())


def flush_steps(flush_k: int, block_k: int) -> tuple[int, int]:
    """Return (BLOCK_K, FLUSH_STEPS) for a flush interval of ``flush_k`` K elements; 0 = never flush.

    BLOCK_K is halved until it divides the interval.
    """
    _configs.validate_config({"flush_k": flush_k}, source="flush_k argument")
    if flush_k == 0:
        return block_k, 0
    while flush_k % block_k:
        block_k //= 2
    return block_k, flush_k // block_k


def _cdiv_up(x: int, m: int) -> int:
    return -(-x // m) * m


def _num_sms(device) -> int:
    if torch.device(device).type != "cuda":
        return _INTERPRETER_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def _unique_batch(x: torch.Tensor) -> torch.Tensor:
    """Drop a broadcast (stride-0) batch axis: split it once, not per batch."""
    if x.shape[0] > 1 and x.stride(0) == 0:
        return x[:1]
    return x


class _Ref(NamedTuple):
    """A kernel argument that is memory of one call: the operands, ``out``, or a piece of the workspace.

    ``role``: ``"a"``, ``"b"``, ``"out"`` (``offset`` elements into the tensor: a chunk's first line),
    ``"ws"`` (``offset`` bytes into the workspace, ``dtype`` and ``shape`` of the piece), ``"desc"`` (a TMA
    descriptor of a workspace piece, ``block`` its block shape) or
    ``"mat_t"`` (per-call exponents of ``scale="matrix"``, ``offset`` 0 for A, 1 for B) or ``"alpha"``
    (the call's float32 factor of the outputs).
    """

    role: str
    offset: int = 0
    dtype: torch.dtype | None = None
    shape: tuple = ()
    block: tuple = ()


class _Launch(NamedTuple):
    """One kernel launch of a product, built once per problem."""

    kernel: object        # the @triton.jit function
    grid: tuple
    kwargs: dict          # every parameter of the kernel by name (constexprs included): values and _Refs
    num_warps: int
    num_stages: int
    maxnreg: int | None = None  # registers per thread the kernel is compiled to (None: ptxas's choice)


def _param_names(kernel) -> tuple:
    """The parameters of a @triton.jit function, in order (the private launcher takes them positionally)."""
    return _parameters(kernel.fn)


@functools.lru_cache(maxsize=None)
def _parameters(fn) -> tuple:
    return tuple(inspect.signature(fn).parameters)


def _positional(launch: _Launch) -> list:
    """A launch's arguments in its kernel's parameter order; every parameter must be given, and only those."""
    names = _param_names(launch.kernel)
    if set(names) != set(launch.kwargs):
        raise TypeError(f"arguments of {launch.kernel.fn.__name__}: missing {sorted(set(names) - set(launch.kwargs))}, "
                        f"unknown {sorted(set(launch.kwargs) - set(names))}")
    return [launch.kwargs[name] for name in names]


def _ws_piece(offset: int, dtype, shape) -> tuple[_Ref, int]:
    """A workspace piece and the offset after it (pieces start at multiples of ``_WS_ALIGN`` bytes)."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    return _Ref("ws", offset, dtype, tuple(shape)), offset + _cdiv_up(max(nbytes, 1), _WS_ALIGN)


class _SplitSide(NamedTuple):
    """One operand's part of the three split launches (:mod:`.split_kernel`)."""

    args: dict            # the split kernels' a_*/b_* parameters, named without the prefix
    tile_programs: int    # programs of the scaled split (one split tile each)
    stats_programs: int   # programs of the statistics pass (:data:`STATS_TILE_A`, :data:`STATS_TILE_B`)
    line_programs: int    # programs of the line-meta pass
    tile: tuple           # (lines, K elements) of a program of the scaled split
    stats_tile: tuple     # (lines, K elements per step, steps) of a program of the statistics pass
    slices: _Ref
    ints: tuple           # (meta, lists, counts, order, totals) refs


def _split_side(x_role: str, x_shape, x_strides, *, lines_axis: int, rows_pad: int, cols_pad: int,
                scheme: str, scale, block_l: int, offset: int, slice_lines: int | None = None):
    """One operand's arguments of the split launches and its workspace pieces; returns (side, next offset).

    ``slice_lines``: the slice buffer holds this many (padded) lines, a chunk's (:func:`_chunked_launches`);
    ``None``: every line.

    Pass 3 uses tiles of :data:`SPLIT_TILE_A` for A (rows contiguous along K) and
    :data:`SPLIT_TILE_B` for B (columns contiguous across the lines), pass 1 :data:`STATS_TILE_A` and
    :data:`STATS_TILE_B`: coalesced either way.
    Pass 2 owns ``block_l`` whole lines.
    """
    sch = get_scheme(scheme)
    bx = x_shape[0]
    held = (rows_pad if lines_axis == 1 else cols_pad) if slice_lines is None else slice_lines
    slices, offset = _ws_piece(offset, torch.int16 if sch.format.name == "bf16" else torch.float16,
                               (sch.slices, bx, *((held, cols_pad) if lines_axis == 1 else (rows_pad, held))))
    if lines_axis == 1:
        n_lines, n_k, lines_pad, k_pad = x_shape[1], x_shape[2], rows_pad, cols_pad
        s_xl, s_xk, s_ol, s_ok = x_strides[1], x_strides[2], cols_pad, 1
        tile, stats_tile = SPLIT_TILE_A, STATS_TILE_A
    else:
        n_lines, n_k, lines_pad, k_pad = x_shape[2], x_shape[1], cols_pad, rows_pad
        s_xl, s_xk, s_ol, s_ok = x_strides[2], x_strides[1], 1, cols_pad
        tile, stats_tile = SPLIT_TILE_B, STATS_TILE_B
    n_lt, n_kt = triton.cdiv(lines_pad, tile[0]), triton.cdiv(k_pad, tile[1])
    n_slt = triton.cdiv(lines_pad, stats_tile[0])  # statistics tiles across the lines ...
    n_st = triton.cdiv(k_pad, stats_tile[1] * stats_tile[2])  # ... and along K
    n_blocks = triton.cdiv(lines_pad, block_l)
    parts, offset = _ws_piece(offset, torch.float32, (bx, 2, n_st, lines_pad))
    meta, offset = _ws_piece(offset, torch.int32, (bx, n_lines))
    lists, offset = _ws_piece(offset, torch.int32, (bx, n_blocks * block_l))
    counts, offset = _ws_piece(offset, torch.int32, (bx, n_blocks))
    order, offset = _ws_piece(offset, torch.int32, (bx, n_lines))
    totals, offset = _ws_piece(offset, torch.int32, (bx,))
    summary, offset = _ws_piece(offset, torch.int32, (bx, n_blocks, SUMMARY_WORDS.value))  # BF16 schemes
    args = dict(x=_Ref(x_role), stride_xb=x_strides[0], stride_xl=s_xl, stride_xk=s_xk,
                L=n_lines, K=n_k, L_PAD=lines_pad, K_PAD=k_pad, n_lt=n_lt, n_lt_stats=n_slt, n_kt=n_st,
                n_kt_split=n_kt, n_blocks=n_blocks,
                part=parts, meta=meta, list=lists, count=counts, order=order, total=totals,
                summary=summary, summary_bf=summary, n_summary=bx * n_blocks, lines=bx * n_lines,
                mat_t=_Ref("mat_t", 0 if lines_axis == 1 else 1) if scale == "matrix" else meta,
                # scheme="auto": the BF16 line meta and lists (:func:`_with_bf16_ints`)
                meta_bf=meta, list_bf=lists, count_bf=counts, order_bf=order, total_bf=totals,
                out=slices, stride_oplane=bx * rows_pad * cols_pad, stride_ob=rows_pad * cols_pad,
                stride_ol=s_ol, stride_ok=s_ok)
    side = _SplitSide(args, n_lt * n_kt * bx, n_slt * n_st * bx, n_blocks * bx, tile, stats_tile, slices,
                      (meta, lists, counts, order, totals))
    return side, offset


def _two_sided(kernel, a: _SplitSide, b: _SplitSide, programs_a: int, programs: int, shared: dict,
               num_warps: int) -> _Launch:
    """A split launch over both operands, ``programs`` in all, A's ``programs_a`` first: the kernel's ``a_*``
    and ``b_*`` parameters from each side's arguments, the others from ``shared``."""
    kwargs = dict(programs_a=programs_a, **shared)
    for prefix, side in (("a_", a), ("b_", b)):
        kwargs.update({name: side.args[name[2:]] for name in _param_names(kernel) if name.startswith(prefix)})
    return _Launch(kernel, (programs,), kwargs, num_warps, 1)


def _scale_mode(bf16: bool, scale) -> int:
    """The line-meta pass's SCALE_MODE for ``scale``: a BF16 scheme scales every line under ``"auto"``."""
    return SCALE_MODES["rows" if bf16 and scale == "auto" else scale]


def _line_meta_launch(a: _SplitSide, b: _SplitSide, *, scheme: str, scale, k: int, rng, fixup_min_class: int,
                      block: tuple[int, int], num_warps: int, bf16: tuple | None = None) -> tuple[_Launch, ...]:
    """Split pass 2 over both operands: their line meta and fix-up lists under ``rng``, ``scheme``'s
    :func:`line_range`.  Where the lines are classified beside the other operand's (BF16 schemes; FP16
    schemes where :func:`sgemm_cube.cpu_fallback.guard.fp16_rule_applies` for ``k``) two launches, the
    lines' summaries first; a BF16 scheme scales every line under ``scale="auto"``
    (:func:`sgemm_cube.cpu_fallback.guard.meta_from_stats`).

    ``bf16`` (``scheme="auto"``, ``scheme`` fp16x3's): (bf16x6's ``rng``, its ``fixup_min_class``): the same
    launches also classify the lines under bf16x6's range, into the sides' ``*_bf`` pieces
    (:func:`_with_bf16_ints`), with as many programs again: two launches for both schemes, not four."""
    both = bf16 is not None
    is_bf16 = get_scheme(scheme).format.name == "bf16"
    pair = (PAIR_BF16 if is_bf16 else PAIR_FP16 if fp16_rule_applies(scheme, scale, k) else PAIR_NONE).value
    mode = _scale_mode(is_bf16, scale)
    rng_bf, min_class_bf = bf16 if both else (rng, fixup_min_class)
    mode_bf = _scale_mode(True, scale) if both else mode
    blocks = dict(A_BLOCK_L=block[0], B_BLOCK_L=block[0], BLOCK_T=block[1])
    ranges = dict(LOWER=rng.lower, UPPER=rng.upper, TOP=rng.top, SCALE_MODE=mode, PAIR=pair,
                  TOP_BF=rng_bf.top, SCALE_MODE_BF=mode_bf, BOTH=both)
    job = a.line_programs + b.line_programs  # one scheme's programs
    launches = []
    if pair != PAIR_NONE.value or both:
        first = job if pair != PAIR_NONE.value else 0  # fp16x3 below K = 16 has no summaries: bf16x6's alone
        launches.append(_two_sided(line_summary_kernel, a, b, a.line_programs, first + job * both,
                                   dict(**ranges, **blocks, programs_job=first), num_warps))
    launches.append(_two_sided(line_meta_kernel, a, b, a.line_programs, job * (1 + both),
                               dict(**ranges, **blocks, programs_job=job, FIXUP_MIN_CLASS=fixup_min_class,
                                    LOWER_BF=rng_bf.lower, UPPER_BF=rng_bf.upper, FIXUP_MIN_CLASS_BF=min_class_bf),
                               num_warps))
    return tuple(launches)


def _scaled_launch(a: _SplitSide, b: _SplitSide, programs_a: int, programs_b: int, *, sb: int, scheme: str,
                   block: tuple[int, int], choice: _Ref | None, compact: bool = True, split: bool = True) -> _Launch:
    """Split pass 3 (:func:`.split_kernel.split_scaled_kernel`) over ``programs_a`` tiles of A and
    ``programs_b`` of B: the compaction of the fix-up lists (``compact``) and the scaled split (``split``)."""
    tiles = dict(A_BLOCK_L=a.tile[0], A_BLOCK_K=a.tile[1], B_BLOCK_L=b.tile[0], B_BLOCK_K=b.tile[1])
    return _two_sided(split_scaled_kernel, a, b, programs_a, programs_a + programs_b,
                      dict(SB_SCALE=float(2.0 ** sb), BF16=get_scheme(scheme).format.name == "bf16", LIST_BLOCK=block[0],
                           CHOOSE=choice is not None, choice=a.args["meta"] if choice is None else choice,
                           COMPACT=compact, SPLIT=split, **tiles), 4)


def _compact_only(side: _SplitSide) -> tuple[_SplitSide, int]:
    """A side as the compaction alone reads it (one program per tile of lines: K tiles 1), and its programs."""
    programs = side.tile_programs // side.args["n_kt_split"]
    return side._replace(args={**side.args, "n_kt_split": 1}), programs


def _split_launches(a: _SplitSide, b: _SplitSide, *, sb: int, scheme: str, scale, rng, fixup_min_class: int,
                    block: tuple[int, int], num_warps: int, recheck: _Ref,
                    choice: _Ref | None = None, chunked: bool = False, bf16: tuple | None = None) -> tuple[_Launch, ...]:
    """The split launches, each over both operands (three; a BF16 scheme's four); ``rng`` is the scheme's
    :func:`line_range`.

    ``choice`` (``scheme="auto"``): the split runs in the scheme the GPU chose there, fp16x3 from the sides'
    ``meta``, bf16x6 from their ``meta_bf`` (:func:`_with_bf16_ints`); ``scheme`` is then fp16x3's.
    ``chunked``: the last launch only compacts the fix-up lists; :func:`_chunked_launches` splits the chunks.
    ``bf16``: pass 2 classifies the lines under bf16x6's range too (:func:`_line_meta_launch`).
    """
    stats_tiles = {f"{side}_{name}": n for side, x in (("A", a), ("B", b))
                   for name, n in zip(("BLOCK_L", "BLOCK_K", "STEPS"), x.stats_tile)}
    stats = _two_sided(tile_stats_kernel, a, b, a.stats_programs, a.stats_programs + b.stats_programs,
                       dict(recheck=recheck, **stats_tiles), 4)
    lines = _line_meta_launch(a, b, scheme=scheme, scale=scale, k=a.args["K"], rng=rng,
                              fixup_min_class=fixup_min_class, block=block, num_warps=num_warps, bf16=bf16)
    if chunked:
        (a, programs_a), (b, programs_b) = _compact_only(a), _compact_only(b)
        scaled = _scaled_launch(a, b, programs_a, programs_b, sb=sb, scheme=scheme, block=block, choice=choice,
                                split=False)
    else:
        scaled = _scaled_launch(a, b, a.tile_programs, b.tile_programs, sb=sb, scheme=scheme, block=block,
                                choice=choice)
    return stats, *lines, scaled


def _chunk_lines(cfg: dict, batch: int, m: int, n: int, block_m: int, block_n: int) -> tuple[int, int] | None:
    """(A's rows, B's columns) per chunk under ``cfg``'s ``row_chunks`` and ``col_chunks``, whole tiles of
    (``block_m``, ``block_n``); ``None`` where the product is not chunked (one chunk each way, or a batch)."""
    if batch != 1:
        return None
    rows = _cdiv_up(triton.cdiv(m, cfg["row_chunks"]), block_m)
    cols = _cdiv_up(triton.cdiv(n, cfg["col_chunks"]), block_n)
    return None if rows >= m and cols >= n else (rows, cols)


def _chunk_side(side: _SplitSide, lines_axis: int, first: int, lines: int, lines_pad: int) -> _SplitSide:
    """The side of one chunk: lines ``first .. first + lines - 1`` of the operand, split into its slice
    buffer (``lines_pad`` lines, :func:`_split_side`'s ``slice_lines``), with their line meta."""
    args = side.args
    k_pad = args["K_PAD"]

    def shifted(ref: _Ref) -> _Ref:  # int32 per line, one batch
        return ref._replace(offset=ref.offset + 4 * first, shape=(1, lines))

    n_lt = triton.cdiv(lines_pad, side.tile[0])
    planes = dict(stride_oplane=lines_pad * k_pad, stride_ob=lines_pad * k_pad,
                  **(dict(stride_ol=k_pad, stride_ok=1) if lines_axis == 1 else dict(stride_ol=1, stride_ok=lines_pad)))
    args = {**args, **planes, "x": _Ref(args["x"].role, first * args["stride_xl"]), "L": lines, "L_PAD": lines_pad,
            "n_lt": n_lt, "meta": shifted(args["meta"]), "meta_bf": shifted(args["meta_bf"])}
    return side._replace(args=args, tile_programs=n_lt * args["n_kt_split"], ints=(shifted(side.ints[0]), *side.ints[1:]))


def _chunked_launches(a_views: tuple, b_views: tuple, *, m: int, n: int, k_pad: int, chunk: tuple[int, int],
                      split, gemms, fixup_after: bool) -> tuple[list, tuple]:
    """The launches after the split's statistics, line meta and compaction of a chunked product.

    A chunked product (``row_chunks`` or ``col_chunks`` above 1, a single product) holds the slices of one
    chunk of A's rows and one of B's columns at a time: its workspace is that of the chunks' slices plus the
    whole operands' line meta, so that the memory beyond the inputs is about ``1 + planes / row_chunks +
    planes / col_chunks`` FP32 outputs (planes: 1.0 for FP16 schemes, 1.5 for ``"auto"`` and BF16, at
    M = N = K) instead of ``1 + 2 planes``.  The line meta and fix-up lists are the whole operands', computed
    once before, so every output has the bits of the product unchunked.  Launches: the fix-up programs over
    the whole product (``gemms(..., "fixup")``), then for each chunk of B's columns its split, and for each
    chunk of A's rows under it the split of that chunk and the GEMM's tile programs for the (rows, columns)
    block.  The chunks of A's rows run forwards under the even chunks of B's columns and backwards under the
    odd ones, so that the chunk of A that ends one column chunk, still in its slice buffer, starts the next
    without a split (where A is one chunk it is split once).  What it costs: A is split ``col_chunks`` times
    but for that one chunk each time (where ``row_chunks`` > 1), and the fix-up no longer overlaps the tiles
    (docs/speed.md measures it).

    ``a_views``, ``b_views``: each operand's sides (one; ``scheme="auto"``: fp16x3's and bf16x6's, which
    share the slices); ``split(a, b, programs_a, programs_b)`` makes a split launch of chunk sides;
    ``gemms(a_views, b_views, m, n, padded, origin, programs)`` the GEMM launch(es).  ``fixup_after``
    (config ``fixup_apart``): the fix-up programs' launch comes last, the tiles storing every output.
    Returns the launches and the fix-up launch(es), over the whole product (what the recheck reads).
    """
    rows, cols = chunk
    fixup = gemms(a_views, b_views, m, n, (rows, cols, k_pad), (0, 0), "fixup")
    launches = [] if fixup_after else list(fixup)
    a_chunks = [(r0, min(rows, m - r0)) for r0 in range(0, m, rows)]
    for j, c0 in enumerate(range(0, n, cols)):
        nc = min(cols, n - c0)
        b_chunk = tuple(_chunk_side(v, 2, c0, nc, cols) for v in b_views)
        for i, (r0, mr) in enumerate(a_chunks if j % 2 == 0 else a_chunks[::-1]):
            a_chunk = tuple(_chunk_side(v, 1, r0, mr, rows) for v in a_views)
            split_a = a_chunk[0].tile_programs if (j == 0 or i > 0) else 0
            split_b = b_chunk[0].tile_programs if i == 0 else 0
            if split_a + split_b:
                launches.append(split(a_chunk[0], b_chunk[0], split_a, split_b))
            launches.extend(gemms(a_chunk, b_chunk, mr, nc, (rows, cols, k_pad), (r0, c0),
                                  "tiles_first" if fixup_after else "tiles"))
    if fixup_after:
        launches.extend(fixup)
    return launches, fixup


def _fixup_policy(scheme: str, scale, fixup_min_class: int) -> tuple[int, bool]:
    """``(fixup_min_class, certify)`` of ``scheme``'s launches: where
    :func:`sgemm_cube.cpu_fallback.guard.certifies` (FP16 schemes under ``scale="rows"`` with the fix-up) the
    LOSES_BITS lines are emulated, and their outputs certified (:func:`.gemm_tiles.store_tile`)."""
    fixup = fixup_min_class == LineClass.LOSES_BITS
    certify = certifies(scheme, scale, fixup)
    return int(_fixup_min_class(fixup, certify)), certify


def _gemm_launch(cfg: dict, a: _SplitSide, b: _SplitSide, *, scheme: str, order: str, sb: int,
                 fixup_min_class: int, batch: int, m: int, n: int, k: int, batches: tuple,
                 padded: tuple, strides: tuple, block_k: int, flush: int, sms: int, recheck: _Ref,
                 run_if: tuple[_Ref, int] | None = None, origin: tuple[int, int] = (0, 0),
                 programs: str = "both", certify: bool = False) -> _Launch:
    """The GEMM launch (:func:`.gemm_kernel.gemm_kernel`), its arguments by name.

    ``batches`` (Ba, Bb): 1 for a broadcast operand; ``padded`` (Mp, Np, Kp); ``strides`` of A, B
    and ``out``; ``flush`` the K steps between flushes (:func:`flush_steps`); ``run_if`` (choice, value):
    the launch computes only where the device's choice (``scheme="auto"``) is ``value``.
    ``origin``: the first row and column of the launch's outputs (a chunk's, :func:`_chunked_launches`;
    ``m`` and ``n`` are then the chunk's); ``programs``: ``"both"``, or only the ``"fixup"`` programs
    (compiled without the tiles' code; :func:`.fixup_kernel.apart_shape` under ``cfg["fixup_apart"]``), or
    only the tiles: ``"tiles"`` where the fix-up programs' launch came before (the tiles leave the fix-up
    lines' outputs alone), ``"tiles_first"`` where it comes after (the tiles store every output, 16 bytes at
    a time, and the fix-up overwrites its lines'); ``certify``: :func:`_fixup_policy`'s.
    """
    sch = get_scheme(scheme)
    bf16 = sch.format.name == "bf16"
    (ba, bb), (mp, np_, kp), (a_strides, b_strides, out_strides) = batches, padded, strides
    block_m, block_n = cfg["BLOCK_M"], cfg["BLOCK_N"]
    a2d = (sch.slices * ba * mp, kp)
    b2d = (sch.slices * bb * kp, np_)
    use_tma, persistent = VARIANTS[cfg["variant"]]
    dtype = torch.bfloat16 if bf16 else torch.float16  # the split kernel wrote BF16 as int16 bit patterns
    if use_tma:
        a_slices = _Ref("desc", a.slices.offset, dtype, a2d, (block_m, block_k))
        b_slices = _Ref("desc", b.slices.offset, dtype, b2d, (block_k, block_n))
    else:
        a_slices = a.slices._replace(shape=a2d, dtype=dtype)
        b_slices = b.slices._replace(shape=b2d, dtype=dtype)
    num_tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n) * batch
    tile_programs = 0 if programs == "fixup" else min(num_tiles, sms) if persistent else num_tiles
    fix_sms = _INTERPRETER_FIXUP_SMS if interpreter_active() else sms
    num_warps, num_stages, maxnreg = cfg["num_warps"], cfg["num_stages"], None
    if programs == "fixup" and cfg["fixup_apart"]:
        fix_tile, fixup_programs, fix_items = apart_shape(k, fix_sms)
        num_warps, num_stages, maxnreg = APART_WARPS, 1, APART_MAXNREG
    else:
        (fix_tile, fixup_programs), fix_items = fixup_shape(k, fix_sms, num_warps), _ITEMS_PER_PROGRAM.value
    if programs in ("tiles", "tiles_first"):
        fixup_programs = 0
    row0, col0 = origin
    (a_meta, _, _, a_order, a_totals), (b_meta, _, _, b_order, b_totals) = a.ints, b.ints
    kwargs = dict(
        a_slices=a_slices, a_plane_rows=ba * mp, a_batch_rows=mp if ba > 1 else 0,
        b_slices=b_slices, b_plane_rows=bb * kp, b_batch_rows=kp if bb > 1 else 0,
        a_meta=a_meta, a_meta_batch=m if ba > 1 else 0, b_meta=b_meta, b_meta_batch=n if bb > 1 else 0,
        a_ptr=_Ref("a", row0 * a_strides[1]), a_stride_batch=a_strides[0], a_stride_m=a_strides[1],
        a_stride_k=a_strides[2],
        b_ptr=_Ref("b", col0 * b_strides[2]), b_stride_batch=b_strides[0], b_stride_k=b_strides[1],
        b_stride_n=b_strides[2],
        a_fix_order=a_order, a_fix_total=a_totals, b_fix_order=b_order, b_fix_total=b_totals,
        c_ptr=_Ref("out", row0 * out_strides[1] + col0), c_stride_batch=out_strides[0], c_stride_m=out_strides[1],
        alpha=_Ref("alpha"), c_error_bound=emulated_error_bound(k, line_range(scheme, sb)),
        c_threshold=certificate_threshold(k) if certify else 0.0, c_recheck=recheck,
        c_row_base=row0, c_col_base=col0,
        M=m, N=n, K=k, Kp=kp, Np=np_, batch=batch, tile_programs=tile_programs, fixup_programs=fixup_programs,
        choice=a_meta if run_if is None else run_if[0], RUN_IF=-1 if run_if is None else run_if[1],
        FIXUP_MIN_CLASS=fixup_min_class, CERTIFY=certify,
        FIX_GROUP=fix_tile[0], FIX_BLOCK_O=fix_tile[1], FIX_BLOCK_K=fix_tile[2], FIX_ITEMS=fix_items,
        SLICES=sch.slices, SCALE=sch.level_scale(sb), TOP_LEVEL=max(i + j for i, j in sch.products),
        TERMWISE=order == "termwise", FLUSH_STEPS=flush, SPLIT_CORR=bool(cfg["split_corr"]),
        # merge_levels is a BF16 option (FP16 has one level >= 2, with an accumulator of its own).
        MERGE_LEVELS=bf16 and bool(cfg["merge_levels"]),
        # Only BF16 tiles need FP32 copies under the interpreter (:func:`.gemm_tiles.load_tile`).
        HAS_TILES=programs != "fixup", FIXUP_AFTER=programs == "tiles_first",
        USE_TMA=use_tma, UPCAST=bf16 and interpreter_active(), PERSISTENT=persistent,
        WARP_SPECIALIZE=bool(cfg["warp_specialize"]),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=cfg["GROUP_M"])
    return _Launch(gemm_kernel, (tile_programs + fixup_programs,), kwargs, num_warps, num_stages, maxnreg)


def _launch_parts(cfg: dict, programs: str) -> tuple[str, ...]:
    """The GEMM launches of ``programs`` (:func:`_gemm_launch`): the fix-up programs and the tiles in one
    launch, or under ``cfg["fixup_apart"]`` the tiles, storing every output, then the fix-up programs in a
    launch of their own, overwriting the fix-up lines' outputs."""
    return ("tiles_first", "fixup") if programs == "both" and cfg["fixup_apart"] else (programs,)


def _recheck_piece(batch: int, m: int, n: int, tiles: list[tuple[int, int]], offset: int) -> tuple[_Ref, int]:
    """The GEMM's list of tiles to recheck (:func:`.fixup_kernel.overflow_recheck_kernel`): room for every
    tile of the smallest of ``tiles`` ((BLOCK_M, BLOCK_N) of each GEMM launch)."""
    most = max(batch * triton.cdiv(m, bm) * triton.cdiv(n, bn) for bm, bn in tiles)
    return _ws_piece(offset, torch.int32, (1 + RECHECK_ENTRY.value * most,))


def _recheck_launch(gemms: tuple[_Launch, ...], sms: int) -> _Launch:
    """The launch after the GEMM(s) that computes again the outputs of the tiles they listed: its arguments are
    the GEMM's own (operands, line meta, output, alpha, the list).  Two GEMMs (``scheme="auto"``: fp16x3's,
    then bf16x6's): the recheck reads the line meta of the one the device chose."""
    first = gemms[0].kwargs
    kwargs = {name: first[name] for name in _param_names(overflow_recheck_kernel) if name in first}
    alt = gemms[-1].kwargs
    kwargs.update(recheck=first["c_recheck"], a_meta_bf=alt["a_meta"], b_meta_bf=alt["b_meta"],
                  CHOOSE=len(gemms) > 1)
    return _Launch(overflow_recheck_kernel, (sms,), kwargs, 4, 1)


class _LaunchPlan(NamedTuple):
    """Everything about one product but its memory: the launches, the workspace size, the sizes."""

    launches: tuple       # the _Launch of a product, the GEMM(s) and the overflow recheck last (module docstring)
    ws_bytes: int
    a_lines: tuple        # (meta, lists, counts, order, totals) refs, block_l
    b_lines: tuple
    slices: tuple         # (a, b) refs
    m: int
    n: int
    k: int
    batch: int
    top: int


def _with_bf16_ints(side: _SplitSide, offset: int) -> tuple[_SplitSide, _SplitSide, int]:
    """``scheme="auto"``: (the side as fp16x3 reads it, as bf16x6 reads it, next offset): one slice buffer of
    three 16-bit planes and one set of statistics, a line meta, fix-up lists and counts per scheme."""
    bx, lines = side.ints[0].shape
    n_list, n_blocks = side.ints[1].shape[1], side.ints[2].shape[1]
    meta, offset = _ws_piece(offset, torch.int32, (bx, lines))
    lists, offset = _ws_piece(offset, torch.int32, (bx, n_list))
    counts, offset = _ws_piece(offset, torch.int32, (bx, n_blocks))
    order, offset = _ws_piece(offset, torch.int32, (bx, lines))
    totals, offset = _ws_piece(offset, torch.int32, (bx,))
    summary, offset = _ws_piece(offset, torch.int32, side.args["summary"].shape)  # beside fp16x3's in one launch
    # the chosen split reads both metas and compacts the chosen lists
    bf16_ints = {"meta_bf": meta, "list_bf": lists, "count_bf": counts, "order_bf": order, "total_bf": totals,
                 "summary_bf": summary}
    fp16 = side._replace(args={**side.args, **bf16_ints})
    bf16 = side._replace(args={**side.args, "meta": meta, "list": lists, "count": counts, "order": order,
                               "total": totals, "summary": summary},
                         ints=(meta, lists, counts, order, totals))
    return fp16, bf16, offset


def _auto_problem(a_shape, a_strides, b_shape, b_strides, out_strides, device, *, sb: int, scale,
                  fixup_min_class: int, flush_k: int | None, config: dict | None) -> _LaunchPlan:
    """``scheme="auto"``: the launches of fp16x3 and of bf16x6 over one split, the device choosing.

    Eight launches, no sync: the statistics; the line meta under each scheme's range (the summaries of
    both schemes in one launch, fp16x3's none below K = 16; then both schemes' line meta in one launch:
    :func:`_line_meta_launch`); the choice (:func:`.split_kernel.scheme_choice_kernel`);
    the split in the chosen scheme;
    both GEMMs, of which the one not chosen returns at once; the overflow recheck, with the chosen
    scheme's line meta.  Both GEMMs read one padding (the larger of their tiles) and one buffer of three
    16-bit planes per operand (FP16 fills two).
    """
    batch, m, k = a_shape
    n = b_shape[2]
    cfgs = {s: resolve_config(batch, m, n, k, device, order="termwise", config=config, scheme=s) for s in AUTO_SCHEMES}
    steps = {s: flush_steps(c["flush_k"] if flush_k is None else flush_k, c["BLOCK_K"]) for s, c in cfgs.items()}
    mp = _cdiv_up(m, max(c["BLOCK_M"] for c in cfgs.values()))
    np_ = _cdiv_up(n, max(c["BLOCK_N"] for c in cfgs.values()))
    kp = _cdiv_up(k, max(bk for bk, _ in steps.values()))
    ba = 1 if batch > 1 and a_strides[0] == 0 else batch
    bb = 1 if batch > 1 and b_strides[0] == 0 else batch
    sms = _num_sms(device)
    cfg16 = cfgs[AUTO_SCHEMES[0]]
    block = tuple(cfg16["split_block"] or (_INTERPRETER_LINE_BLOCK if interpreter_active() else LINE_BLOCK))
    chunk = _chunk_lines(cfg16, batch, m, n, max(c["BLOCK_M"] for c in cfgs.values()),
                         max(c["BLOCK_N"] for c in cfgs.values()))
    side_a, offset = _split_side("a", (ba, m, k), a_strides, lines_axis=1, rows_pad=mp, cols_pad=kp,
                                 scheme="bf16x6", scale=scale, block_l=block[0], offset=0,
                                 slice_lines=chunk and chunk[0])
    side_b, offset = _split_side("b", (bb, k, n), b_strides, lines_axis=2, rows_pad=kp, cols_pad=np_,
                                 scheme="bf16x6", scale=scale, block_l=block[0], offset=offset,
                                 slice_lines=chunk and chunk[1])
    a16, abf, offset = _with_bf16_ints(side_a, offset)
    b16, bbf, offset = _with_bf16_ints(side_b, offset)
    choice, offset = _ws_piece(offset, torch.int32, (1,))
    recheck, offset = _recheck_piece(batch, m, n, [(c["BLOCK_M"], c["BLOCK_N"]) for c in cfgs.values()], offset)
    policy = {s: _fixup_policy(s, scale, fixup_min_class) for s in AUTO_SCHEMES}
    stats, *lines, scaled = _split_launches(a16, b16, sb=sb, scheme=AUTO_SCHEMES[0], scale=scale,
                                            rng=line_range(AUTO_SCHEMES[0], sb),
                                            fixup_min_class=policy[AUTO_SCHEMES[0]][0],
                                            block=block, num_warps=cfg16["split_warps"], recheck=recheck,
                                            choice=choice, chunked=chunk is not None,
                                            bf16=(line_range(AUTO_SCHEMES[1], sb), policy[AUTO_SCHEMES[1]][0]))
    decide = _Launch(scheme_choice_kernel, (1,),
                     dict(choice=choice, a_count=a16.ints[2], b_count=b16.ints[2], a_count_bf=abf.ints[2],
                          b_count_bf=bbf.ints[2], a_n_counts=math.prod(a16.ints[2].shape),
                          b_n_counts=math.prod(b16.ints[2].shape), a_lines=ba * m, b_lines=bb * n,
                          MARGIN=AUTO_MARGIN, BLOCK=256), 4, 1)

    def gemm_launches(a_views, b_views, m_, n_, padded, origin, programs):  # fp16x3's, then bf16x6's
        return tuple(_gemm_launch(cfgs[s], sa, sb_, scheme=s, order="termwise", sb=sb, fixup_min_class=policy[s][0],
                                  batch=batch, m=m_, n=n_, k=k, batches=(ba, bb), padded=padded,
                                  strides=(a_strides, b_strides, out_strides), block_k=steps[s][0], flush=steps[s][1],
                                  sms=sms, recheck=recheck, run_if=(choice, value), origin=origin, programs=part,
                                  certify=policy[s][1])
                     for part in _launch_parts(cfg16, programs)
                     for value, (s, sa, sb_) in enumerate(zip(AUTO_SCHEMES, a_views, b_views)))

    head = (stats, *lines, decide, scaled)
    if chunk is None:
        gemms = gemm_launches((a16, abf), (b16, bbf), m, n, (mp, np_, kp), (0, 0), "both")
        body = gemms
    else:
        body, gemms = _chunked_launches((a16, abf), (b16, bbf), m=m, n=n, k_pad=kp, chunk=chunk,
                                        split=functools.partial(_scaled_launch, sb=sb, scheme=AUTO_SCHEMES[0],
                                                                block=block, choice=choice),
                                        gemms=gemm_launches, fixup_after=cfg16["fixup_apart"])
    return _LaunchPlan((*head, *body, _recheck_launch(gemms, sms)), offset,
                       (a16.ints, block[0]), (b16.ints, block[0]), (side_a.slices, side_b.slices), m, n, k, batch, 0)


def _problem(a_shape, a_strides, b_shape, b_strides, out_strides, device, *, sb: int, order: str, scheme: str,
             scale, fixup_min_class: int, flush_k: int | None, config: dict | None) -> _LaunchPlan:
    if scheme == "auto":
        return _auto_problem(a_shape, a_strides, b_shape, b_strides, out_strides, device, sb=sb, scale=scale,
                             fixup_min_class=fixup_min_class, flush_k=flush_k, config=config)
    batch, m, k = a_shape
    n = b_shape[2]
    cfg = resolve_config(batch, m, n, k, device, order=order, config=config, scheme=scheme)
    block_k, steps = flush_steps(cfg["flush_k"] if flush_k is None else flush_k, cfg["BLOCK_K"])
    mp, np_, kp = _cdiv_up(m, cfg["BLOCK_M"]), _cdiv_up(n, cfg["BLOCK_N"]), _cdiv_up(k, block_k)
    ba = 1 if batch > 1 and a_strides[0] == 0 else batch  # a broadcast operand is split once
    bb = 1 if batch > 1 and b_strides[0] == 0 else batch
    sms = _num_sms(device)
    rng = line_range(scheme, sb)  # the split's range, and the top binade of a scaled line
    fixup_min_class, certify = _fixup_policy(scheme, scale, fixup_min_class)
    block = tuple(cfg["split_block"] or (_INTERPRETER_LINE_BLOCK if interpreter_active() else LINE_BLOCK))
    chunk = _chunk_lines(cfg, batch, m, n, cfg["BLOCK_M"], cfg["BLOCK_N"])
    side_a, offset = _split_side("a", (ba, m, k), a_strides, lines_axis=1, rows_pad=mp, cols_pad=kp,
                                 scheme=scheme, scale=scale, block_l=block[0], offset=0,
                                 slice_lines=chunk and chunk[0])
    side_b, offset = _split_side("b", (bb, k, n), b_strides, lines_axis=2, rows_pad=kp, cols_pad=np_,
                                 scheme=scheme, scale=scale, block_l=block[0], offset=offset,
                                 slice_lines=chunk and chunk[1])
    recheck, offset = _recheck_piece(batch, m, n, [(cfg["BLOCK_M"], cfg["BLOCK_N"])], offset)
    split_launches = _split_launches(side_a, side_b, sb=sb, scheme=scheme, scale=scale, rng=rng,
                                     fixup_min_class=fixup_min_class, block=block, num_warps=cfg["split_warps"],
                                     recheck=recheck, chunked=chunk is not None)

    def gemm_launches(a_views, b_views, m_, n_, padded, origin, programs):
        return tuple(_gemm_launch(cfg, a_views[0], b_views[0], scheme=scheme, order=order, sb=sb,
                                  fixup_min_class=fixup_min_class, batch=batch, m=m_, n=n_, k=k, batches=(ba, bb),
                                  padded=padded, strides=(a_strides, b_strides, out_strides), block_k=block_k,
                                  flush=steps, sms=sms, recheck=recheck, origin=origin, programs=part,
                                  certify=certify)
                     for part in _launch_parts(cfg, programs))

    if chunk is None:
        body = gemms = gemm_launches((side_a,), (side_b,), m, n, (mp, np_, kp), (0, 0), "both")
    else:
        body, gemms = _chunked_launches((side_a,), (side_b,), m=m, n=n, k_pad=kp, chunk=chunk,
                                        split=functools.partial(_scaled_launch, sb=sb, scheme=scheme, block=block,
                                                                choice=None),
                                        gemms=gemm_launches, fixup_after=cfg["fixup_apart"])
    return _LaunchPlan((*split_launches, *body, _recheck_launch(gemms[:1], sms)), offset, (side_a.ints, block[0]),
                       (side_b.ints, block[0]), (side_a.slices, side_b.slices), m, n, k, batch, rng.top)


def _view(ws: torch.Tensor, ref: _Ref) -> torch.Tensor:
    nbytes = math.prod(ref.shape) * torch.empty((), dtype=ref.dtype).element_size()
    return ws[ref.offset:ref.offset + nbytes].view(ref.dtype).view(ref.shape)


class _Memory:
    """The memory of one call, resolved to tensors (first call, interpreter) or to addresses (cached calls)."""

    def __init__(self, a, b, out, ws, mat_t, alpha=1.0):
        self.a, self.b, self.out, self.ws, self.mat_t, self.alpha = a, b, out, ws, mat_t, alpha

    def tensor(self, ref: _Ref):
        if ref.role in ("a", "b", "out") and ref.offset:  # a chunk's first line: a view starting there
            t = getattr(self, ref.role)
            return t.as_strided((1,), (1,), t.storage_offset() + ref.offset)
        if ref.role in ("a", "b", "out", "alpha"):
            return getattr(self, ref.role)
        if ref.role == "mat_t":
            return self.mat_t[ref.offset]
        view = _view(self.ws, ref)
        if ref.role == "desc":
            from triton.tools.tensor_descriptor import TensorDescriptor

            return TensorDescriptor(view, list(view.shape), list(view.stride()), list(ref.block))
        return view


def _launch_public(launch: _Launch, mem: _Memory):
    """Launch through Triton's public path, ``kernel[grid](**kwargs)``; returns what it returns (the
    compiled kernel on a GPU)."""
    kwargs = {name: mem.tensor(x) if isinstance(x, _Ref) else x for name, x in launch.kwargs.items()}
    options = {} if launch.maxnreg is None else {"maxnreg": launch.maxnreg}
    compiled = launch.kernel[launch.grid](**kwargs, num_warps=launch.num_warps, num_stages=launch.num_stages,
                                          **options)
    if hasattr(compiled, "result"):  # a future, where Triton compiles asynchronously
        compiled = compiled.result()
    return compiled


#: The Triton releases (major, minor) whose private launcher :func:`_private_launcher` drives: from 3.3
#: (triton-lang/triton PR 5512: the launcher takes every kernel argument, constexprs included) to the
#: newest this code was checked against.  Outside them every call takes the public path.
PRIVATE_LAUNCH_TRITON = ((3, 3), (3, 9))


def _triton_version() -> tuple[int, int]:
    found = re.match(r"(\d+)\.(\d+)", triton.__version__)
    return (int(found[1]), int(found[2])) if found else (0, 0)


@functools.lru_cache(maxsize=None)
def _private_launch_supported(version: tuple[int, int]) -> bool:
    """Whether Triton ``version`` is in :data:`PRIVATE_LAUNCH_TRITON`; warns (once) where it is not."""
    first, last = PRIVATE_LAUNCH_TRITON
    if first <= version <= last:
        return True
    warnings.warn(f"sgemm_cube's CUDA backend replays its launches through Triton's private launcher on "
                  f"Triton {first[0]}.{first[1]} to {last[0]}.{last[1]} only; with Triton {triton.__version__} "
                  f"every call takes Triton's public launch path (the same kernels, more host time per call)",
                  RuntimeWarning, stacklevel=2)
    return False


def _private_launcher(compiled, grid: tuple):
    """Triton's private launcher of a compiled kernel, as ``launch(stream, args)``, or ``None``: then
    every call must take the public path (:func:`_launch_public`).

    This is the one use of Triton's private API.  ``CompiledKernel.run`` is called as Triton's own
    ``JITFunction.run`` calls it: (grid x, y, z, stream, function, packed metadata, launch metadata,
    enter hook, exit hook, *args), ``args`` being every kernel argument in parameter order,
    constexprs included (:func:`_positional`), with addresses for pointers.  That skips what the
    public path does on every call (binding and specializing the arguments, the cache look-up),
    which :class:`_Cached`'s key makes unnecessary; launch hooks (profilers) are not called.
    ``None`` where the Triton version is not in :data:`PRIVATE_LAUNCH_TRITON` or the compiled kernel
    lacks the launcher's parts (both warn), or ``compiled`` is ``None``.
    """
    if compiled is None or not _private_launch_supported(_triton_version()):
        return None
    try:
        run, function, packed = compiled.run, compiled.function, compiled.packed_metadata
    except AttributeError as err:
        warnings.warn(f"Triton {triton.__version__}'s compiled kernel has no {err.name!r}: sgemm_cube's CUDA "
                      f"backend takes Triton's public launch path on every call", RuntimeWarning, stacklevel=2)
        return None
    x, y = grid[0], grid[1] if len(grid) > 1 else 1

    def launch(stream, args):
        run(x, y, 1, stream, function, packed, None, None, None, *args)

    return launch


def _matrix_exponents(x: torch.Tensor, top: int) -> torch.Tensor:
    """``scale="matrix"``: per batch, the shift putting the largest finite magnitude in ``[2**top, 2**(top+1))``."""
    big = torch.where(torch.isfinite(x), x.abs(), torch.zeros((), dtype=x.dtype, device=x.device)).amax(dim=(1, 2))
    e = torch.frexp(big.double()).exponent - 1
    return torch.where(big > 0, top - e, torch.zeros_like(e)).to(torch.int32)


#: What the caching allocator raises where a CUDA allocation does not fit (``torch.OutOfMemoryError`` from
#: torch 2.5; ``torch.cuda.OutOfMemoryError`` before).
_OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
#: (row_chunks, col_chunks) tried in turn, each holding less, where a product's workspace does not fit in the
#: GPU's memory (:func:`_chunked_to_fit`): at M = N = K the memory beyond the inputs falls from about 4 FP32
#: outputs (``"auto"``) to about 2.0 (8 x 2) and towards 1.1.
OOM_CHUNKS = ((2, 2), (4, 2), (8, 2), (8, 4), (16, 4), (16, 8), (32, 16), (64, 32))


def _allocate_workspace(nbytes: int, device) -> torch.Tensor:
    """The workspace of one call: one ``torch.empty`` (tests replace it to play a full GPU)."""
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def _memory(prob: _LaunchPlan, a, b, out, scale, alpha: float = 1.0) -> _Memory:
    ws = _allocate_workspace(prob.ws_bytes, a.device)
    mat_t = None
    if scale == "matrix":
        mat_t = (_matrix_exponents(_unique_batch(a), prob.top), _matrix_exponents(_unique_batch(b), prob.top))
    return _Memory(a, b, out, ws, mat_t, alpha)


class _Cached:
    """A product's launches with Triton's dispatch done once: each call patches addresses and launches.

    Triton specializes a kernel on its integer arguments (equal to 1,
    divisible by 16) and on the alignment of its pointers; the cache key
    holds every integer and the operands' alignment, so the compiled kernels
    stay valid for every call with that key.  ``launchers``: each launch's
    :func:`_private_launcher`.  The arguments that change from call to call
    (addresses, tensor descriptors, alpha) are sorted out here once, so that
    a call only adds offsets to four base addresses: every line of
    :meth:`__call__` is host time that a small product's GPU time may not hide.
    """

    def __init__(self, prob: _LaunchPlan, launchers):
        self.prob = prob
        self.steps = []
        for launch, launcher in zip(prob.launches, launchers):
            args = _positional(launch)
            addresses, descs, alphas = [], [], []
            for i, x in enumerate(args):
                if not isinstance(x, _Ref):
                    continue
                if x.role == "alpha":
                    alphas.append(i)
                elif x.role == "desc":
                    descs.append((i, x))
                elif x.role == "ws":
                    addresses.append((i, 3, x.offset))  # bytes
                else:  # a, b, out: float32 elements (check_operands); scale="matrix" is never cached
                    assert x.role in ("a", "b", "out"), x
                    addresses.append((i, ("a", "b", "out").index(x.role), x.offset * 4))
            self.steps.append((launcher, args, addresses, descs, alphas))
        self.descs = {}

    def _desc(self, ref: _Ref, ws_ptr: int):
        """``ref``'s tensor descriptor over the workspace at ``ws_ptr`` (one object per ref, its base moved)."""
        desc = self.descs.get(ref)
        if desc is None:
            from triton.tools.tensor_descriptor import TensorDescriptor

            desc = self.descs[ref] = TensorDescriptor(_Address(ws_ptr + ref.offset, ref.dtype), list(ref.shape),
                                                      [ref.shape[1], 1], list(ref.block))
        desc.base = _Address(ws_ptr + ref.offset, ref.dtype)
        return desc

    def __call__(self, a, b, out, alpha: float = 1.0):
        ws = _allocate_workspace(self.prob.ws_bytes, a.device)
        ws_ptr = ws.data_ptr()
        bases = (a.data_ptr(), b.data_ptr(), out.data_ptr(), ws_ptr)
        stream = torch._C._cuda_getCurrentRawStream(a.get_device())  # what Triton's own dispatch reads
        for launcher, args, addresses, descs, alphas in self.steps:
            for i, base, offset in addresses:
                args[i] = bases[base] + offset
            for i, ref in descs:
                args[i] = self._desc(ref, ws_ptr)
            for i in alphas:
                args[i] = alpha
            launcher(stream, args)
        return ws  # kept alive by the caller until the launches are queued


class _Address:
    """An address that Triton's launcher and tensor descriptors accept as a tensor's base."""

    __slots__ = ("ptr", "dtype")

    def __init__(self, ptr: int, dtype):
        self.ptr = ptr
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self.ptr


_CACHE: dict = {}
_CACHE_LIMIT = 1024


def _remember(key, entry) -> None:
    """Cache ``entry`` (a :class:`_Cached` plan, or :class:`_BatchSlices`) for ``key``, emptying a full cache."""
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[key] = entry


def _cache_key(a, b, out, sb, order, scheme, scale, fix, config) -> tuple:
    """:data:`_CACHE`'s key of a product (``config`` frozen, :func:`_frozen`): what the compiled launches depend on."""
    return (a.device, a.shape, b.shape, a.stride(), b.stride(), out.stride(), a.data_ptr() % 16,
            b.data_ptr() % 16, out.data_ptr() % 16, sb, order, scheme, scale, fix, config)


def replay(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *, sb: int, order: str, scheme: str, scale,
           fixup: bool, config: tuple | None = None):
    """The launches :func:`run` queued for these operands and options (its :class:`_Cached` plan), for another
    call of the same shapes, strides, alignment and options; ``None`` where :func:`run` keeps none (``scale``
    ``"matrix"``, CPU tensors under the interpreter, a Triton without the private launch path, a workspace
    that did not fit).  Call it as ``launches(a, b, out)``: it raises PyTorch's out-of-memory error, having
    launched nothing, where the workspace does not fit now."""
    if not a.is_cuda or scale == "matrix":
        return None
    cached = _CACHE.get(_cache_key(a, b, out, sb, order, scheme, scale, _fixup_min_class(fixup), config))
    return cached if isinstance(cached, _Cached) else None


def split_operands(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *, sb: int = 12,
                   order: str = "termwise", scheme: str = "fp16x3", scale="auto", fixup_min_class: int = 1,
                   config: dict | None = None, flush_k: int | None = None) -> SplitOperands:
    """Run the three split launches of a product (all but the GEMM) and return their outputs (for tests and studies).

    ``scheme`` names one scheme: ``"auto"``'s split depends on the GPU's choice (:func:`_auto_problem`)."""
    if scheme not in _configs.SCHEMES:
        raise ValueError(f"split_operands takes one of the schemes {list(_configs.SCHEMES)}, not {scheme!r}")
    whole = {**(config or {}), "row_chunks": 1, "col_chunks": 1}  # the slices of every line, in one buffer
    prob = _problem(tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), (0, 0), a.device, sb=sb, order=order,
                    scheme=scheme, scale=scale, fixup_min_class=fixup_min_class, flush_k=flush_k, config=whole)
    mem = _memory(prob, a, b, out, scale)
    for launch in prob.launches:  # not the GEMM(s) (with fixup_apart, two launches) and the overflow recheck
        if launch.kernel not in (gemm_kernel, overflow_recheck_kernel):
            _launch_public(launch, mem)
    (a_ints, la), (b_ints, lb) = prob.a_lines, prob.b_lines
    sl = [mem.tensor(r) for r in prob.slices]
    if get_scheme(scheme).format.name == "bf16":
        sl = [t.view(torch.bfloat16) for t in sl]
    return SplitOperands(sl[0], sl[1], prob.batch, prob.m, prob.n, prob.k,
                         LineOutputs(*(mem.tensor(r) for r in a_ints), la),
                         LineOutputs(*(mem.tensor(r) for r in b_ints), lb), scheme)


def check_operands(a, b, out) -> None:
    """The operand checks of :func:`sgemm_cube.backends.cuda.matmul` (3-D float32 tensors of matching shapes on
    one device the kernels run on, ``out`` with a last stride of 1); the options are the plan's, checked by
    :func:`sgemm_cube.plan.make_request`."""
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


class _BatchSlices:
    """A batch whose workspace did not fit, as the products of consecutive slices of ``size`` matrices, each a
    call of :func:`run` of its own (which slices again, or chunks a single matrix, where a slice does not fit
    either): what the cache holds for its key afterwards.  ``options``: the keyword arguments of :func:`run`."""

    def __init__(self, size: int, options: dict):
        self.size = size
        self.options = options

    def __call__(self, a, b, out, alpha: float = 1.0):
        for first in range(0, a.shape[0], self.size):
            end = first + self.size
            run(a[first:end], b[first:end], out[first:end], alpha=alpha, **self.options)


def _sliced_to_fit(prob: _LaunchPlan, a, b, out, alpha: float, options: dict) -> _BatchSlices:
    """Where the workspace of the batched ``prob`` did not fit in the GPU's memory: the product in slices of
    half the batch (:class:`_BatchSlices`, run here), with a warning that says so; returns the slicing."""
    batch, m, k = a.shape
    sliced = _BatchSlices(-(-batch // 2), options)
    sliced(a, b, out, alpha)
    warnings.warn(f"sgemm_cube: the workspace of the batch of {batch} {m} x {k} x {b.shape[2]} products "
                  f"({prob.ws_bytes / 2**30:.3g} GiB) did not fit in the GPU's free memory; this and later calls of "
                  f"this shape run it in slices of at most {sliced.size} "
                  f"{'matrix' if sliced.size == 1 else 'matrices'}, each a call of its own (the same guarantee; the "
                  f"device's choice of scheme and its line rules see the slice, not the whole batch)", stacklevel=2)
    return sliced


def _chunked_to_fit(plan, config, prob: _LaunchPlan, err: Exception, a, b, out, scale,
                    alpha: float) -> tuple[_LaunchPlan, _Memory]:
    """Where the workspace of the single product ``prob`` did not fit in the GPU's memory (``err``): the first
    plan of :data:`OOM_CHUNKS` holding less whose workspace fits, and its memory, with a warning that says so
    (the outputs are the same bits: :func:`_chunked_launches`).  ``plan(config=...)`` makes a plan of the
    product.  Raises ``err`` again where none fits or none holds less."""
    for rows, cols in OOM_CHUNKS:
        smaller = plan(config={**dict(config or ()), "row_chunks": rows, "col_chunks": cols})
        if smaller.ws_bytes >= prob.ws_bytes:
            continue
        try:
            mem = _memory(smaller, a, b, out, scale, alpha)
        except _OUT_OF_MEMORY:
            continue
        warnings.warn(f"sgemm_cube: the {prob.m} x {prob.k} x {prob.n} product's CUDA workspace "
                      f"({prob.ws_bytes / 2**30:.3g} GiB) did not fit in the GPU's free memory; its split "
                      f"planes are held in {rows} x {cols} chunks ({smaller.ws_bytes / 2**30:.3g} GiB; the same "
                      f"results, a few percent slower) by this and later calls of this shape",
                      stacklevel=2)
        return smaller, mem
    raise err


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *, sb: int, order: str, scheme: str, scale,
        fixup: bool, flush_k: int | None = None, config: dict | tuple | None = None, alpha: float = 1.0) -> None:
    """Five or six launches, no sync: the product of a plan (:func:`sgemm_cube.backends.cuda.run` passes its fields;
    the options were checked when the plan was made, :func:`sgemm_cube.plan.make_request`).

    ``alpha``: ``out = alpha * (a @ b)``, each output rounded once (``alpha`` taken as float32).

    The launches of a product are prepared once per (shapes, strides, operand
    alignment, options, device) and replayed with new addresses afterwards
    (:class:`_Cached`): a call then costs one allocation and five or six launches of host work.  A repeated
    call through :func:`sgemm_cube.matmul` skips even this function: :mod:`sgemm_cube.product` replays the
    cached launches itself (:func:`replay`).

    ``config``: the launch configuration or overrides of it (:func:`resolve_config`), as a dict or as
    the sorted pairs a plan carries (:func:`plan_config`).

    Where the workspace does not fit in the GPU's free memory (PyTorch's out-of-memory error, raised before
    anything is launched), a single product runs in chunks (:func:`_chunked_to_fit`: the same bits) and a
    batch in slices of half the batch (:class:`_BatchSlices`, again where a slice does not fit), with a
    warning; where even the smallest chunks of one matrix do not fit, the error stays.
    """
    batch, m, k = a.shape
    n = b.shape[2]
    if batch == 0 or m == 0 or n == 0 or k == 0:
        out.zero_()
        return
    if alpha != 1:
        alpha = float(np.float32(alpha))  # the kernels take it as float32, as PyTorch's float32 kernels do
    fix = _fixup_min_class(fixup)
    if isinstance(config, dict):
        config = _frozen(config)
    fast = (a.is_cuda and flush_k is None and scale != "matrix")
    if fast:
        key = _cache_key(a, b, out, sb, order, scheme, scale, fix, config)
        try:
            cached = _CACHE.get(key)
        except TypeError:  # a config value no config takes (resolve_config's check below says which)
            fast, cached = False, None
        if cached is not None:
            try:
                cached(a, b, out, alpha)  # allocates the workspace before it launches anything
                return
            except _OUT_OF_MEMORY:
                del _CACHE[key]  # plan again: chunks where the workspace does not fit now
    plan = functools.partial(_problem, tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), out.stride(),
                             a.device, sb=sb, order=order, scheme=scheme, scale=scale, fixup_min_class=fix,
                             flush_k=flush_k)
    prob = plan(config=None if config is None else dict(config))
    try:
        mem = _memory(prob, a, b, out, scale, alpha)
    except _OUT_OF_MEMORY as err:
        if batch > 1:
            sliced = _sliced_to_fit(prob, a, b, out, alpha, dict(sb=sb, order=order, scheme=scheme, scale=scale,
                                                                  fixup=fixup, flush_k=flush_k, config=config))
            if fast:
                _remember(key, sliced)
            return
        prob, mem = _chunked_to_fit(plan, config, prob, err, a, b, out, scale, alpha)
    compiled = [_launch_public(launch, mem) for launch in prob.launches]
    if fast:
        launchers = [_private_launcher(kernel, launch.grid) for kernel, launch in zip(compiled, prob.launches)]
        if all(launchers):
            _remember(key, _Cached(prob, launchers))
