"""Host side of the CUDA backend: configs, padding, the three launches.

``matmul`` = split A, split B (:mod:`.split_kernel`: slices, line meta,
fix-up lists), then the GEMM of the scheme's slice products
(:mod:`.gemm_kernel`: three or four FP16 products for fp16x3, fp16x4, nine
or six BF16 products for bf16x9, bf16x6), whose extra programs compute the
fix-up lines' outputs in plain FP32 (:mod:`.fixup_kernel`).  Nothing is
read back to the host.  Which tile shape and kernel variant to use is
data: ``configs/default.json`` and ``configs/<gpu>.json`` hold the measured
choice per mode and shape bucket (schema and validator: :mod:`.configs`; see
``docs/cuda_design.md`` for how each number was measured).

Runs on CUDA tensors, or on CPU tensors when ``TRITON_INTERPRET=1`` was set
before Triton was imported (the CI tests do that).
"""
from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
import torch
import triton

from sgemm_cube.cpu_fallback import get_scheme
from sgemm_cube.cpu_fallback.guard import fixup_min_class as _fixup_min_class
from sgemm_cube.cpu_fallback.guard import line_range

from . import configs as _configs
from .fixup_kernel import fixup_shape
from .gemm_kernel import VARIANTS, sgemm_cube_kernel
from .hybrid import device_key, interpreter_active, load_device_table
from .split_kernel import SCALE_MODES, line_integers_kernel, split_scaled_kernel, tile_stats_kernel

__all__ = ["matmul", "run", "split_operands", "resolve_config", "flush_steps",
           "SplitOperands", "LineOutputs", "DEFAULT_FLUSH_K"]

_DEFAULTS = _configs.defaults()
#: Default K interval between round-to-nearest flushes of the hi*hi partial (``configs/default.json``).
DEFAULT_FLUSH_K = _DEFAULTS["gemm_termwise"][0]["config"]["flush_k"]
#: The launch keys (:data:`.configs.KEYS`, the one list).
_CONFIG_KEYS = tuple(_configs.KEYS)
#: (lines, statistics tiles per step) of one program of the line-integers pass; ``split_block`` overrides it.
LINE_BLOCK = (32, 64)
#: (max K, config): up to this K, on a GPU, the hi*hi partial is flushed every 32 elements
#: (``configs/default.json``, key ``small_k``, says why).
SMALL_K_FLUSH = (_DEFAULTS["small_k"]["max_k"], dict(_DEFAULTS["small_k"]["config"]))
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
    fix-up lines of each block of ``block_l`` lines.
    """

    meta: torch.Tensor
    lists: torch.Tensor
    counts: torch.Tensor
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
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count


def _unique_batch(x: torch.Tensor) -> torch.Tensor:
    """Drop a broadcast (stride-0) batch axis: split it once, not per batch."""
    if x.shape[0] > 1 and x.stride(0) == 0:
        return x[:1]
    return x


class _Ref(NamedTuple):
    """A kernel argument that is memory of one call: the operands, ``out``, or a piece of the workspace.

    ``role``: ``"a"``, ``"b"``, ``"out"``, ``"ws"`` (``offset`` bytes into the
    workspace, ``dtype`` and ``shape`` of the piece), ``"desc"`` (a TMA
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
    fn: object
    grid: tuple
    args: tuple           # values and _Refs, in the kernel's parameter order (constexprs last)
    n_constexpr: int      # how many trailing args are constexprs
    names: tuple          # the constexprs' names
    num_warps: int
    num_stages: int


def _ws_piece(offset: int, dtype, shape) -> tuple[_Ref, int]:
    """A workspace piece and the offset after it (pieces start at multiples of 256 bytes)."""
    nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    return _Ref("ws", offset, dtype, tuple(shape)), offset + _cdiv_up(max(nbytes, 1), 256)


class _SplitSide(NamedTuple):
    """One operand's part of the three split launches (:mod:`.split_kernel`)."""

    stats_args: tuple     # x, part, n_lt, n_kt, L, K, L_PAD, strides of x
    lines_args: tuple     # part, n_kt, meta, list, count, mat_t, n_blocks, L, L_PAD
    scaled_args: tuple    # x, out, meta, n_lt, n_kt, L, K, L_PAD, K_PAD, strides of x and out
    tile_programs: int
    line_programs: int
    tile: tuple           # (lines, K elements) of passes 1 and 3
    slices: _Ref
    ints: tuple           # (meta, lists, counts) refs


def _split_side(x_role: str, x_shape, x_strides, *, lines_axis: int, rows_pad: int, cols_pad: int, sb: int,
                scheme: str, scale, block_l: int, offset: int):
    """One operand's arguments of the split launches and its workspace pieces; returns (side, next offset).

    Passes 1 and 3 use tiles of 32 lines x 128 K elements for A (rows
    contiguous along K) and 128 x 32 for B (columns contiguous across the
    lines): coalesced either way.  Pass 2 owns ``block_l`` whole lines.
    """
    sch = get_scheme(scheme)
    bx = x_shape[0]
    slices, offset = _ws_piece(offset, torch.int16 if sch.format.name == "bf16" else torch.float16,
                               (sch.slices, bx, rows_pad, cols_pad))
    if lines_axis == 1:
        n_lines, n_k, lines_pad, k_pad = x_shape[1], x_shape[2], rows_pad, cols_pad
        s_xl, s_xk, s_ol, s_ok = x_strides[1], x_strides[2], cols_pad, 1
        tile = (32, 128)
    else:
        n_lines, n_k, lines_pad, k_pad = x_shape[2], x_shape[1], cols_pad, rows_pad
        s_xl, s_xk, s_ol, s_ok = x_strides[2], x_strides[1], 1, cols_pad
        tile = (128, 32)
    n_lt, n_kt = triton.cdiv(lines_pad, tile[0]), triton.cdiv(k_pad, tile[1])
    n_blocks = triton.cdiv(lines_pad, block_l)
    parts, offset = _ws_piece(offset, torch.float32, (bx, 2, n_kt, lines_pad))
    meta, offset = _ws_piece(offset, torch.int32, (bx, n_lines))
    lists, offset = _ws_piece(offset, torch.int32, (bx, n_blocks * block_l))
    counts, offset = _ws_piece(offset, torch.int32, (bx, n_blocks))
    mat_t = _Ref("mat_t", 0 if lines_axis == 1 else 1) if scale == "matrix" else meta
    x = _Ref(x_role)
    x_strides3 = (x_strides[0], s_xl, s_xk)
    side = _SplitSide((x, parts, n_lt, n_kt, n_lines, n_k, lines_pad) + x_strides3,
                      (parts, n_kt, meta, lists, counts, mat_t, n_blocks, n_lines, lines_pad),
                      (x, slices, meta, n_lt, n_kt, n_lines, n_k, lines_pad, k_pad) + x_strides3
                      + (bx * rows_pad * cols_pad, rows_pad * cols_pad, s_ol, s_ok),
                      n_lt * n_kt * bx, n_blocks * bx, tile, slices, (meta, lists, counts))
    return side, offset


def _split_launches(a: _SplitSide, b: _SplitSide, *, sb: int, scheme: str, scale, fixup_min_class: int,
                    block: tuple[int, int], num_warps: int) -> tuple[_Launch, _Launch, _Launch]:
    """The three split launches, each over both operands (A's programs first)."""
    rng = line_range(scheme, sb)
    tiles = dict(A_BLOCK_L=a.tile[0], A_BLOCK_K=a.tile[1], B_BLOCK_L=b.tile[0], B_BLOCK_K=b.tile[1])
    stats = _Launch(tile_stats_kernel, (a.tile_programs + b.tile_programs,),
                    (a.tile_programs,) + a.stats_args + b.stats_args + tuple(tiles.values()),
                    len(tiles), tuple(tiles), 4, 1)
    lines_c = dict(TOP=rng.top, SCALE_MODE=SCALE_MODES[scale], FIXUP_MIN_CLASS=fixup_min_class,
                   A_BLOCK_L=block[0], B_BLOCK_L=block[0], BLOCK_T=block[1])
    lines = _Launch(line_integers_kernel, (a.line_programs + b.line_programs,),
                    (a.line_programs,) + a.lines_args + b.lines_args + (rng.lower, rng.upper)
                    + tuple(lines_c.values()),
                    len(lines_c), tuple(lines_c), num_warps, 1)
    scaled_c = dict(SB_SCALE=float(2.0 ** sb), BF16=get_scheme(scheme).format.name == "bf16", **tiles)
    scaled = _Launch(split_scaled_kernel, (a.tile_programs + b.tile_programs,),
                     (a.tile_programs,) + a.scaled_args + b.scaled_args + tuple(scaled_c.values()),
                     len(scaled_c), tuple(scaled_c), 4, 1)
    return stats, lines, scaled


class _Problem(NamedTuple):
    """Everything about one product but the memory: launches, workspace size, the plan's numbers."""

    launches: tuple
    ws_bytes: int
    a_lines: tuple        # (meta, lists, counts) refs, block_l
    b_lines: tuple
    slices: tuple         # (a, b) refs
    m: int
    n: int
    k: int
    batch: int
    top: int


def _problem(a_shape, a_strides, b_shape, b_strides, out_strides, device, *, sb: int, order: str, scheme: str,
             scale, fixup_min_class: int, flush_k: int | None, config: dict | None) -> _Problem:
    batch, m, k = a_shape
    n = b_shape[2]
    cfg = resolve_config(batch, m, n, k, device, order=order, config=config, scheme=scheme)
    block_k, steps = flush_steps(cfg["flush_k"] if flush_k is None else flush_k, cfg["BLOCK_K"])
    mp, np_, kp = _cdiv_up(m, cfg["BLOCK_M"]), _cdiv_up(n, cfg["BLOCK_N"]), _cdiv_up(k, block_k)
    ba = 1 if batch > 1 and a_strides[0] == 0 else batch  # a broadcast operand is split once
    bb = 1 if batch > 1 and b_strides[0] == 0 else batch
    sms = _num_sms(device)
    block = tuple(cfg["split_block"] or ((16, 16) if interpreter_active() else LINE_BLOCK))
    side_a, offset = _split_side("a", (ba, m, k), a_strides, lines_axis=1, rows_pad=mp, cols_pad=kp, sb=sb,
                                 scheme=scheme, scale=scale, block_l=block[0], offset=0)
    side_b, offset = _split_side("b", (bb, k, n), b_strides, lines_axis=2, rows_pad=kp, cols_pad=np_, sb=sb,
                                 scheme=scheme, scale=scale, block_l=block[0], offset=offset)
    split_launches = _split_launches(side_a, side_b, sb=sb, scheme=scheme, scale=scale, fixup_min_class=fixup_min_class,
                                     block=block, num_warps=cfg["split_warps"])
    a_slices, b_slices, a_ints, b_ints = side_a.slices, side_b.slices, side_a.ints, side_b.ints
    la = lb = block[0]
    sch = get_scheme(scheme)
    bf16 = sch.format.name == "bf16"
    slices = sch.slices
    block_m, block_n = cfg["BLOCK_M"], cfg["BLOCK_N"]
    a2d = (slices * ba * mp, kp)
    b2d = (slices * bb * kp, np_)
    use_tma, persistent = VARIANTS[cfg["variant"]]
    dtype = torch.bfloat16 if bf16 else torch.float16  # the split kernel wrote BF16 as int16 bit patterns
    if use_tma:
        a_src = _Ref("desc", a_slices.offset, dtype, a2d, (block_m, block_k))
        b_src = _Ref("desc", b_slices.offset, dtype, b2d, (block_k, block_n))
    else:
        a_src = a_slices._replace(shape=a2d, dtype=dtype)
        b_src = b_slices._replace(shape=b2d, dtype=dtype)
    num_tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n) * batch
    programs = min(num_tiles, sms) if persistent else num_tiles
    fix_tile, fix_programs = fixup_shape(k, sms)
    args = (a_src, b_src, _Ref("out"),
            m, n, kp, batch, programs,
            ba * mp, mp if ba > 1 else 0, bb * kp, kp if bb > 1 else 0, kp, np_,
            out_strides[0], out_strides[1],
            _Ref("a"), a_strides[0], a_strides[1], a_strides[2], _Ref("b"), b_strides[0], b_strides[1], b_strides[2],
            k,
            a_ints[0], m if ba > 1 else 0, b_ints[0], n if bb > 1 else 0,
            a_ints[2], a_ints[1], a_ints[2].shape[1], b_ints[2], b_ints[1], b_ints[2].shape[1], fix_programs,
            _Ref("alpha"))
    constexprs = dict(
        FIXUP_MIN_CLASS=fixup_min_class, BLOCK_LA=la, BLOCK_LB=lb,
        FIX_GROUP=fix_tile[0], FIX_BLOCK_O=fix_tile[1], FIX_BLOCK_K=fix_tile[2],
        SCALE=sch.level_scale(sb), TERMWISE=order == "termwise", SLICES=slices,
        TOP_LEVEL=max(i + j for i, j in sch.products), FLUSH_STEPS=steps,
        SPLIT_CORR=bool(cfg["split_corr"]), USE_TMA=use_tma, UPCAST=bf16 and interpreter_active(),
        MERGE_LEVELS=bf16 and bool(cfg["merge_levels"]), PERSISTENT=persistent,
        WARP_SPECIALIZE=bool(cfg["warp_specialize"]),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=cfg["GROUP_M"])
    gemm = _Launch(sgemm_cube_kernel, (programs + fix_programs,), args + tuple(constexprs.values()),
                   len(constexprs), tuple(constexprs), cfg["num_warps"], cfg["num_stages"])
    return _Problem((*split_launches, gemm), offset, (a_ints, la), (b_ints, lb), (a_slices, b_slices),
                    m, n, k, batch, line_range(scheme, sb).top)


def _view(ws: torch.Tensor, ref: _Ref) -> torch.Tensor:
    nbytes = math.prod(ref.shape) * torch.empty((), dtype=ref.dtype).element_size()
    return ws[ref.offset:ref.offset + nbytes].view(ref.dtype).view(ref.shape)


class _Memory:
    """The memory of one call, resolved to tensors (first call, interpreter) or to addresses (cached calls)."""

    def __init__(self, a, b, out, ws, mat_t, alpha=1.0):
        self.a, self.b, self.out, self.ws, self.mat_t, self.alpha = a, b, out, ws, mat_t, alpha

    def tensor(self, ref: _Ref):
        if ref.role in ("a", "b", "out", "alpha"):
            return getattr(self, ref.role)
        if ref.role == "mat_t":
            return self.mat_t[ref.offset]
        view = _view(self.ws, ref)
        if ref.role == "desc":
            from triton.tools.tensor_descriptor import TensorDescriptor

            return TensorDescriptor(view, list(view.shape), list(view.stride()), list(ref.block))
        return view


def _resolve(args, mem: _Memory):
    return [mem.tensor(x) if isinstance(x, _Ref) else x for x in args]


def _launch_slow(launch: _Launch, mem: _Memory):
    """Launch through Triton's own dispatch; returns the compiled kernel (None under the interpreter)."""
    args = _resolve(launch.args, mem)
    n = len(args) - launch.n_constexpr
    kernel = launch.fn[launch.grid](*args[:n], **dict(zip(launch.names, args[n:])),
                                    num_warps=launch.num_warps, num_stages=launch.num_stages)
    if hasattr(kernel, "result"):
        kernel = kernel.result()
    return kernel if hasattr(kernel, "packed_metadata") else None


def _matrix_exponents(x: torch.Tensor, top: int) -> torch.Tensor:
    """``scale="matrix"``: per batch, the shift putting the largest finite magnitude in ``[2**top, 2**(top+1))``."""
    big = torch.where(torch.isfinite(x), x.abs(), torch.zeros((), dtype=x.dtype, device=x.device)).amax(dim=(1, 2))
    e = torch.frexp(big.double()).exponent - 1
    return torch.where(big > 0, top - e, torch.zeros_like(e)).to(torch.int32)


def _memory(prob: _Problem, a, b, out, scale, alpha: float = 1.0) -> _Memory:
    ws = torch.empty(prob.ws_bytes, dtype=torch.uint8, device=a.device)
    mat_t = None
    if scale == "matrix":
        mat_t = (_matrix_exponents(_unique_batch(a), prob.top), _matrix_exponents(_unique_batch(b), prob.top))
    return _Memory(a, b, out, ws, mat_t, alpha)


class _Cached:
    """A product's launches with Triton's dispatch done once: each call patches addresses and launches.

    Triton specializes a kernel on its integer arguments (equal to 1,
    divisible by 16) and on the alignment of its pointers; the cache key
    holds every integer and the operands' alignment, so the compiled kernels
    stay valid for every call with that key.
    """

    def __init__(self, prob: _Problem, kernels):
        self.prob = prob
        self.kernels = kernels
        self.templates = []
        for launch in prob.launches:
            args = list(launch.args)
            patches = [(i, x) for i, x in enumerate(args) if isinstance(x, _Ref)]
            self.templates.append((args, patches))
        self.descs = {}

    def _address(self, ref: _Ref, a, b, out, ws_ptr, alpha):
        if ref.role == "alpha":
            return alpha
        if ref.role == "ws":
            return ws_ptr + ref.offset
        if ref.role == "desc":
            desc = self.descs.get(ref)
            if desc is None:
                from triton.tools.tensor_descriptor import TensorDescriptor

                strides = [ref.shape[1], 1]
                desc = self.descs[ref] = TensorDescriptor(_Address(ws_ptr + ref.offset, ref.dtype), list(ref.shape),
                                                          strides, list(ref.block))
            desc.base = _Address(ws_ptr + ref.offset, ref.dtype)
            return desc
        return (a if ref.role == "a" else b if ref.role == "b" else out).data_ptr()

    def __call__(self, a, b, out, alpha: float = 1.0):
        ws = torch.empty(self.prob.ws_bytes, dtype=torch.uint8, device=a.device)
        ws_ptr = ws.data_ptr()
        stream = torch._C._cuda_getCurrentRawStream(a.get_device())  # what Triton's own dispatch reads
        for (args, patches), launch, kernel in zip(self.templates, self.prob.launches, self.kernels):
            for i, ref in patches:
                args[i] = self._address(ref, a, b, out, ws_ptr, alpha)
            g = launch.grid
            kernel.run(g[0], g[1] if len(g) > 1 else 1, 1, stream, kernel.function, kernel.packed_metadata,
                       None, None, None, *args)
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


def split_operands(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, *, sb: int = 12,
                   order: str = "termwise", scheme: str = "fp16x3", scale="auto", fixup_min_class: int = 1,
                   config: dict | None = None, flush_k: int | None = None) -> SplitOperands:
    """Run the two split launches of a product and return their outputs (for tests and studies)."""
    prob = _problem(tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), (0, 0), a.device, sb=sb, order=order,
                    scheme=scheme, scale=scale, fixup_min_class=fixup_min_class, flush_k=flush_k, config=config)
    mem = _memory(prob, a, b, out, scale)
    for launch in prob.launches[:-1]:
        _launch_slow(launch, mem)
    (a_ints, la), (b_ints, lb) = prob.a_lines, prob.b_lines
    sl = [mem.tensor(r) for r in prob.slices]
    if get_scheme(scheme).format.name == "bf16":
        sl = [t.view(torch.bfloat16) for t in sl]
    return SplitOperands(sl[0], sl[1], prob.batch, prob.m, prob.n, prob.k,
                         LineOutputs(*(mem.tensor(r) for r in a_ints), la),
                         LineOutputs(*(mem.tensor(r) for r in b_ints), lb), scheme)


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


def matmul(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor, sb: int = 12, order: str = "termwise",
           scheme: str = "fp16x3", keep_lo_lo: bool = False, scale="auto", fixup: bool = True,
           flush_k: int | None = None, config: dict | None = None) -> None:
    """Emulated FP32 batched product ``out[i] = a[i] @ b[i]`` on tensor cores, checked arguments.

    Parameters
    ----------
    a : torch.Tensor, shape (B, M, K), float32
    b : torch.Tensor, shape (B, K, N), float32
        Any strides; a batch stride of 0 broadcasts.
    out : torch.Tensor, shape (B, M, N), float32, last stride 1
        Written in full.
    sb : int
        Scaling exponent of the FP16 residuals, 0 <= sb <= 24 (unused by the BF16 schemes).
    order : {"termwise", "elementwise"}
    scheme : {"fp16x3", "fp16x4", "bf16x9", "bf16x6"}
        The split scheme (:mod:`sgemm_cube.cpu_fallback.schemes`); ``keep_lo_lo`` is shorthand for fp16x4.
    scale, fixup
        As in :func:`sgemm_cube.matmul` (:mod:`sgemm_cube.cpu_fallback.guard`).
    flush_k : int, optional
        K elements between round-to-nearest flushes of the hi*hi tensor-core
        partial (default: the config's, 64 unless a measured table says
        otherwise); 0 never flushes (for comparison only).
    config : dict, optional
        Overrides of the launch configuration (keys of :func:`resolve_config`).
    """
    _check(a, b, sb, order, out)
    run(a, b, out, sb=sb, order=order, scheme=_scheme(scheme, keep_lo_lo), scale=scale, fixup=fixup,
        flush_k=flush_k, config=config)


def run(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, *, sb: int, order: str, scheme: str, scale,
        fixup: bool, flush_k: int | None = None, config: dict | None = None, alpha: float = 1.0) -> None:
    """:func:`matmul` without the argument checks (the public API has made them): three launches, no sync.

    ``alpha``: ``out = alpha * (a @ b)``, each output rounded once (``alpha`` taken as float32).

    The launches of a product are prepared once per (shapes, strides, operand
    alignment, options, device) and replayed with new addresses afterwards
    (:class:`_Cached`): a call then costs one allocation and three launches of host work.
    """
    batch, m, k = a.shape
    n = b.shape[2]
    if batch == 0 or m == 0 or n == 0 or k == 0:
        out.zero_()
        return
    if alpha != 1:
        alpha = float(np.float32(alpha))  # the kernels take it as float32, as PyTorch's float32 kernels do
    fix = _fixup_min_class(fixup)
    fast = (a.is_cuda and config is None and flush_k is None and scale != "matrix")
    if fast:
        key = (a.device, a.shape, b.shape, a.stride(), b.stride(), out.stride(), a.data_ptr() % 16,
               b.data_ptr() % 16, out.data_ptr() % 16, sb, order, scheme, scale, fix)
        cached = _CACHE.get(key)
        if cached is not None:
            cached(a, b, out, alpha)
            return
    prob = _problem(tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), out.stride(), a.device, sb=sb,
                    order=order, scheme=scheme, scale=scale, fixup_min_class=fix, flush_k=flush_k, config=config)
    mem = _memory(prob, a, b, out, scale, alpha)
    kernels = [_launch_slow(launch, mem) for launch in prob.launches]
    if fast and all(kernels):
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.clear()
        _CACHE[key] = _Cached(prob, kernels)
