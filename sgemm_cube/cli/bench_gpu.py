"""Speed and accuracy of sgemm_cube's CUDA backend against cuBLAS, in one run.

For every shape, on the same random data, this times (``triton.testing.do_bench``
medians, CUDA events) and measures the relative Frobenius error against a
float64 product of:

* ``sgemm``      cuBLAS FP32 (``torch.backends.cuda.matmul.allow_tf32 = False``)
* ``tf32``       cuBLAS TF32
* ``fp16_fp32``  cuBLAS FP16 inputs, FP32 output (``out_dtype=torch.float32``):
                 three of these are the emulation's ceiling
* ``torch_split`` the "ten-line PyTorch" alternative: split with torch ops,
                 three FP16 GEMMs with FP32 output, combined termwise
* ``cube``       sgemm_cube's CUDA backend (``backend="cuda"``), splits included
* ``api``        the same through the public ``sgemm_cube.matmul(a, b, backend="cuda")``:
                 argument checks, range check (one host sync) and NaN/Inf check included
* ``auto``       what ``backend="auto"`` runs: ``sgemm`` where the hybrid rule
                 (``prefers_native``) says so, else ``cube``

It prints TFLOP/s, the ratio to SGEMM, the fraction of the FP16/3 ceiling and
the errors on normal and uniform [0, 1) data, and writes everything as JSON to
``benchmarks/results/`` (device, versions, command).  ``--sweep`` instead
compares kernel variants at one size (``docs/cuda_design.md`` records
why each exists).  ``--matrix --write-config`` stores the fitted hybrid rule in
``sgemm_cube/backends/cuda/configs/<gpu>.json`` through ``tuning.gpu.write_hybrid_rule``;
kernel configs are measured and written by ``python -m sgemm_cube.tuning.gpu`` alone.

``--matrix`` times the *public API* with default options instead -- what a
user gets -- on a matrix of problems (squares, odd sizes, tall-skinny,
short-wide, K-heavy, batched, transposed and strided views, transformer
linear layers, real-shaped data, and the wide-range data of issue 33:
Vandermonde features, Laplacian kernels, log-normal, an unstandardised
Gram matrix, a power-law graph, ``--only wide-range``): ``sgemm_cube.matmul(a, b)``, ``backend="cuda"``,
``scheme="auto"`` and cuBLAS SGEMM on the same data, each by
``do_bench`` (GPU time) and by a host loop (back-to-back calls, one
synchronize: host overhead included), with errors against float64, what
``sgemm_cube.explain`` says and the fractions of rows and columns listed for
the fix-up (:func:`fixup_fractions`).  :func:`derive_hybrid_rule` fits the
``backend="auto"`` thresholds to it (``--write-config`` stores them).
``--model`` runs the TransformerEncoder benchmark of
:mod:`sgemm_cube.cli.bench_model` (``benchmarks/model_bench.py``).

Run on a GPU machine from the repository root::

    sgemm-cube bench                               # the full benchmark
    sgemm-cube bench --sizes 4096 8192 --no-rect
    sgemm-cube bench --sweep --sweep-size 8192
    sgemm-cube bench --matrix                      # the API matrix (about 4 minutes on an H100)
    sgemm-cube bench --matrix --write-config       # ... and store the fitted hybrid rule
    sgemm-cube bench --matrix --only square linear # a part of it
    sgemm-cube bench --matrix --only wide-range    # the wide-range data kinds (issue 33)
    sgemm-cube bench --model                       # TransformerEncoder, native vs sgemm_cube.enabled()
    python -m sgemm_cube.cli.bench_gpu ...             # the same without the console script
"""
from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import pathlib
import sys
import time
from typing import NamedTuple

from .._option_types import nonnegative_int, positive_float, positive_int
from ..backends.native import true_fp32
from .records import RESULTS_DIR
from .records import environment as _env
from .records import rel_error as _rel_err
from .records import synchronize as _sync

__all__ = ["add_parser", "run", "main", "run_benchmark", "run_sweep", "derive_native_rule",
           "sweep_winners", "host_overhead", "SQUARE_SIZES", "RECT_SHAPES", "SWEEP_CONFIGS",
           "BenchProblem", "LAYOUTS", "MATRIX_METHODS", "matrix_problems", "make_operands", "measure_problem",
           "run_matrix", "host_loop_ms", "submit_ms", "reference_rows", "format_matrix_table", "matrix_summary",
           "derive_hybrid_rule", "write_hybrid_config", "DATA_KINDS", "WIDE_RANGE_KINDS", "make_data",
           "make_wide_range", "WIDE_RANGE_SIZES", "WIDE_RANGE_SHORT_K",
           "WIDE_RANGE_SHORT_K_WORST", "wide_range_problems", "fixup_fractions"]


SQUARE_SIZES = (256, 512, 1024, 1536, 2048, 3072, 4096, 8192, 16384)
#: (batch, m, n, k, kind)
RECT_SHAPES = (
    (1, 16384, 256, 8192, "tall-skinny"),
    (1, 65536, 64, 4096, "tall-skinny"),
    (1, 32768, 128, 4096, "tall-skinny"),
    (1, 8192, 8192, 256, "short-K"),
    (1, 1024, 1024, 65536, "K-heavy"),
    (1, 2048, 2048, 32768, "K-heavy"),
    (16, 1024, 1024, 1024, "batched"),
    (64, 512, 512, 512, "batched"),
    (32, 2048, 2048, 2048, "batched, B broadcast"),
)

# Kernel variants compared by --sweep: (name, config overrides, flush_k argument, order).
_BASE = {"variant": "tma", "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8,
         "num_warps": 8, "num_stages": 3, "split_corr": True, "warp_specialize": False}
SWEEP_CONFIGS = (
    ("one-corr f64", dict(_BASE, split_corr=False, flush_k=64), None, "termwise"),
    ("one-corr f128", dict(_BASE, split_corr=False, flush_k=128), None, "termwise"),
    ("persistent one-corr f64", dict(_BASE, variant="tma_persistent", split_corr=False, flush_k=64), None,
     "termwise"),
    ("one-corr f32", dict(_BASE, split_corr=False, flush_k=32), None, "termwise"),
    ("split-corr f64", dict(_BASE, flush_k=64), None, "termwise"),
    ("ptr one-corr f64", dict(_BASE, variant="ptr", split_corr=False, flush_k=64), None, "termwise"),
    ("one-corr f64 ws", dict(_BASE, split_corr=False, flush_k=64, warp_specialize=True), None, "termwise"),
    ("no-flush", dict(_BASE, split_corr=False), 0, "termwise"),
    ("elementwise f64", dict(_BASE, split_corr=False, flush_k=64), None, "elementwise"),
)
# Earlier sweeps (results/sweep_h200_*.json, docs/cuda_design.md) also had: 128x64 and
# 64x128 tiles, BLOCK_K 32 with 4-5 stages, GROUP_M 4/16: all slower.


def _torch():
    import torch

    return torch


def _mm_fp32_out(x16, y16):
    """FP16 x FP16 -> FP32 product through cuBLAS (batched or not)."""
    torch = _torch()
    if x16.dim() == 2:
        return torch.mm(x16, y16, out_dtype=torch.float32)
    return torch.bmm(x16, y16, out_dtype=torch.float32)


def torch_split_matmul(a, b, sb: int = 12):
    """The "ten-line PyTorch" alternative (docs/cuda_design.md): split, three cuBLAS GEMMs, termwise sum."""
    a_hi = a.half()
    a_lo = ((a - a_hi.float()) * 2.0 ** sb).half()
    b_hi = b.half()
    b_lo = ((b - b_hi.float()) * 2.0 ** sb).half()
    corr = _mm_fp32_out(a_lo, b_hi) + _mm_fp32_out(a_hi, b_lo)
    return corr * 2.0 ** -sb + _mm_fp32_out(a_hi, b_hi)




def _make(batch, m, n, k, dist, broadcast_b, gen):
    torch = _torch()
    draw = torch.randn if dist == "normal" else torch.rand
    a = draw((batch, m, k), device="cuda", generator=gen)
    b = draw((1 if broadcast_b else batch, k, n), device="cuda", generator=gen)
    if broadcast_b:
        b = b.expand(batch, k, n)
    return a, b


def _squeeze(x, batch):
    return x[0] if batch == 1 else x


def _bench(fn, reps_ms: float) -> float:
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=max(10, reps_ms // 4), rep=reps_ms, return_mode="median"))


def _cube_runner(a, b, out, *, config=None, flush_k=None, order="termwise", keep_lo_lo=False):
    from sgemm_cube.backends import cuda

    def fn():
        cuda.matmul(a, b, sb=12, order=order, keep_lo_lo=keep_lo_lo, out=out, flush_k=flush_k, config=config)
        return out

    return fn


def _methods(a, b, batch):
    """name -> zero-argument callable returning the product, for one problem."""
    torch = _torch()
    a2, b2 = _squeeze(a, batch), _squeeze(b, batch)
    a16, b16 = a2.half(), b2.half()
    out32 = torch.empty(a.shape[0], a.shape[1], b.shape[2], device="cuda")
    out2 = _squeeze(out32, batch)

    def sgemm():
        torch.backends.cuda.matmul.allow_tf32 = False
        return torch.matmul(a2, b2, out=out2)

    def tf32():
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.matmul(a2, b2, out=out2)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False

    import sgemm_cube

    out_api = torch.empty_like(out2)
    return {"sgemm": sgemm, "tf32": tf32, "fp16_fp32": lambda: _mm_fp32_out(a16, b16),
            "torch_split": lambda: torch_split_matmul(a2, b2),
            "cube": _cube_runner(a, b, torch.empty_like(out32)),
            "api": lambda: sgemm_cube.matmul(a2, b2, backend="cuda", out=out_api)}


def _measure_shape(batch, m, n, k, kind, *, reps_ms, seed):
    """Time every method on normal data, and measure errors on normal and uniform data."""
    torch = _torch()
    from sgemm_cube.backends.cuda import prefers_native

    broadcast_b = "broadcast" in kind
    flops = 2.0 * batch * m * n * k
    row = {"batch": batch, "m": m, "n": n, "k": k, "kind": kind, "flops": flops, "ms": {}, "tflops": {},
           "err_normal": {}, "err_uniform": {}}
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for dist in ("uniform", "normal"):  # normal last: its data is the one timed
        a, b = _make(batch, m, n, k, dist, broadcast_b, gen)
        ref = torch.matmul(a.double(), b.double())
        fns = _methods(a, b, batch)
        for name, fn in list(fns.items()):
            try:
                row[f"err_{dist}"][name] = _rel_err(fn(), _squeeze(ref, batch))
            except Exception as exc:  # e.g. a torch without out_dtype for bmm: report, keep going
                row.setdefault("failed", {})[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
                row[f"err_{dist}"][name] = float("nan")
                fns[name] = None
        del ref
    # Round robin, median of three: the clock a method runs at depends on what
    # ran just before it (seen: 9% between two places of one kernel in a run).
    times = {name: [] for name in fns}
    for _ in range(3):
        for name, fn in fns.items():
            times[name].append(_bench(fn, reps_ms) if fn is not None else float("nan"))
    for name, ts in times.items():
        row["ms"][name] = sorted(ts)[1]
        row["tflops"][name] = flops / row["ms"][name] * 1e-9
    native = prefers_native(batch, m, n, k, a.device)
    row["auto_native"] = native
    row["ms"]["auto"] = row["ms"]["sgemm" if native else "cube"]
    row["tflops"]["auto"] = flops / row["ms"]["auto"] * 1e-9
    for dist in ("normal", "uniform"):
        row[f"err_{dist}"]["auto"] = row[f"err_{dist}"]["sgemm" if native else "cube"]
    # Split passes alone (part of "cube"): memory-bound, compare with copy bandwidth.
    from sgemm_cube.backends.cuda import launch

    cfg = launch.resolve_config(batch, m, n, k, a.device)
    row["ms"]["cube_split"] = _bench(lambda: launch.split_operands(a, b, sb=12, config=cfg), reps_ms)
    row["config"] = cfg
    return row


def _rule_key(r) -> tuple:
    """(flops, min(m, n), k) of a row: the three quantities the hybrid rule compares."""
    return 2.0 * r["batch"] * r["m"] * r["n"] * r["k"], min(r["m"], r["n"]), r["k"]


def _goes_native(rule: dict, point: tuple) -> bool:
    """Whether ``rule`` sends a (flops, min(m, n), k) point to cuBLAS (as ``hybrid.prefers_native``)."""
    flops, mn, k = point
    return flops < rule["min_flops"] or mn < rule["min_mn"] or k < rule["min_k"]


def _fit_thresholds(loses, wins, *, fewest_cuts: bool = False) -> dict:
    """Thresholds that send every point of ``loses`` native and the fewest points of ``wins``.

    Points are ``(flops, min(m, n), k)``.  Candidates for ``min_mn`` and
    ``min_k`` are 0 and one above each losing point's value; for each pair,
    ``min_flops`` is the smallest value (just above a losing point's flops,
    or 0) that catches the losing points the other two leave.  Among rules
    that send the same number of winning points native: the smallest
    ``min_flops``, then ``min_mn``, then ``min_k``; or, with ``fewest_cuts``,
    the fewest nonzero thresholds, then the smallest ``min_mn``, ``min_k``
    and ``min_flops`` (a shape cut-off only where the flops cannot do it).
    """
    best = None
    for mn in sorted({0} | {p[1] + 1 for p in loses}):
        for kk in sorted({0} | {p[2] + 1 for p in loses}):
            left = [p[0] for p in loses if p[1] >= mn and p[2] >= kk]
            rule = {"min_flops": max(left) * 1.0001 if left else 0.0, "min_mn": mn, "min_k": kk}
            missed = sum(_goes_native(rule, p) for p in wins)
            if fewest_cuts:
                cost = (missed, sum(v > 0 for v in rule.values()), mn, kk, rule["min_flops"])
            else:
                cost = (missed, rule["min_flops"], mn, kk)
            if best is None or cost < best[0]:
                best = (cost, rule)
    return best[1]


def derive_native_rule(rows, *, margin: float = 1.0) -> dict:
    """Smallest hybrid thresholds that send every measured loss of the emulation to cuBLAS.

    ``rows`` carry ``batch, m, n, k`` and ``ms["sgemm"], ms["cube"]``.  Among
    thresholds taken from the measured shapes, return the rule
    ``{"min_flops", "min_mn", "min_k"}`` that routes every shape where
    ``cube > margin * sgemm`` to native, and the fewest others.
    """
    loses = [_rule_key(r) for r in rows if r["ms"]["cube"] > margin * r["ms"]["sgemm"]]
    wins = [_rule_key(r) for r in rows if r["ms"]["cube"] <= margin * r["ms"]["sgemm"]]
    return _fit_thresholds(loses, wins)






def run_benchmark(*, sizes=SQUARE_SIZES, rect=True, reps_ms: float = 200.0, seed: int = 0, on_row=None):
    """Measure every shape; return the list of rows (see module docstring).

    ``on_row(rows_so_far)`` is called after every shape.
    """
    shapes = [(1, s, s, s, "square") for s in sizes] + (list(RECT_SHAPES) if rect else [])
    rows = []
    for shape in shapes:
        t0 = time.time()
        rows.append(_measure_shape(*shape, reps_ms=reps_ms, seed=seed))
        _print_row(rows[-1], time.time() - t0)
        if on_row:
            on_row(rows)
    return rows


def _print_row(r, secs):
    ms, tf, en, eu = r["ms"], r["tflops"], r["err_normal"], r["err_uniform"]
    ceiling = tf["fp16_fp32"] / 3
    shape = f"{r['batch']}x{r['m']}x{r['n']}x{r['k']}" if r["batch"] > 1 else f"{r['m']}x{r['n']}x{r['k']}"
    print(f"{shape:>22} {r['kind'][:12]:>12} | TFLOP/s sgemm {tf['sgemm']:6.1f} tf32 {tf['tf32']:6.1f} "
          f"fp16 {tf['fp16_fp32']:6.1f} tsplit {tf['torch_split']:6.1f} cube {tf['cube']:6.1f} api {tf['api']:6.1f} "
          f"auto {tf['auto']:6.1f}{'(n)' if r['auto_native'] else '   '} | cube/sgemm {ms['sgemm'] / ms['cube']:5.2f}x "
          f"ceil {tf['cube'] / ceiling:5.1%} split {ms['cube_split']:.3f}ms | err normal sgemm {en['sgemm']:.2e} "
          f"cube {en['cube']:.2e} tsplit {en['torch_split']:.2e} | uniform sgemm {eu['sgemm']:.2e} "
          f"cube {eu['cube']:.2e} tsplit {eu['torch_split']:.2e} [{secs:.0f}s]", flush=True)


def run_sweep(*, size: int = 8192, reps_ms: float = 300.0, seed: int = 0, configs=SWEEP_CONFIGS, on_row=None):
    """Compare kernel variants on one square size; return rows with time and error per variant.

    ``on_row(result_so_far)`` is called after every variant (to save partial results).
    """
    torch = _torch()
    from sgemm_cube.backends.cuda import launch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    data = {}
    for dist in ("uniform", "normal"):
        a, b = _make(1, size, size, size, dist, False, gen)
        data[dist] = (a, b, torch.matmul(a.double(), b.double()))
    flops = 2.0 * size ** 3
    a, b, ref = data["normal"]
    rows = []
    sgemm = _methods(a, b, 1)["sgemm"]
    base = {"name": "cuBLAS sgemm", "ms": _bench(sgemm, reps_ms), "err_normal": _rel_err(sgemm(), ref[0]),
            "err_uniform": _rel_err(_methods(*data["uniform"][:2], 1)["sgemm"](), data["uniform"][2][0])}
    fp16 = _methods(a, b, 1)["fp16_fp32"]
    print(f"sweep {size}^3: sgemm {base['ms']:.3f} ms ({flops / base['ms'] * 1e-9:.1f} TFLOP/s), "
          f"fp16->fp32 {flops / _bench(fp16, reps_ms) * 1e-9:.1f} TFLOP/s", flush=True)
    # The three split launches (statistics, line meta, scaled split): memory-bound, against copy bandwidth.
    t = _bench(lambda: launch.split_operands(a, b, sb=12), reps_ms)
    print(f"split of A and B: {t:.3f} ms, {4 * size * size * 2 * 2 / t * 1e-6:.0f} GB/s (bytes read + written)",
          flush=True)
    rows.append({"name": "split", "ms": t})
    for name, cfg, flush_k, order in configs:
        row = {"name": name, "config": cfg, "flush_k": flush_k, "order": order}
        try:
            out = torch.full((1, size, size), float("nan"), device="cuda")
            t0 = time.time()
            fn = _cube_runner(a, b, out, config=cfg, flush_k=flush_k, order=order)
            fn()
            torch.cuda.synchronize()
            row["compile_s"] = time.time() - t0
            row["err_normal"] = _rel_err(out[0], ref[0])
            ua, ub, uref = data["uniform"]
            _cube_runner(ua, ub, out, config=cfg, flush_k=flush_k, order=order)()
            row["err_uniform"] = _rel_err(out[0], uref[0])
            row["ms"] = _bench(fn, reps_ms)
            row["tflops"] = flops / row["ms"] * 1e-9
            print(f"{name:>22}: {row['tflops']:6.1f} TFLOP/s ({row['ms']:.3f} ms)"
                  f" = {base['ms'] / row['ms']:.2f}x sgemm | err normal {row['err_normal']:.2e} "
                  f"(sgemm {base['err_normal']:.2e}) uniform {row['err_uniform']:.2e} "
                  f"(sgemm {base['err_uniform']:.2e}) | compile+run {row['compile_s']:.1f}s", flush=True)
        except Exception as exc:  # report and go on: one variant failing to compile must not end the sweep
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            print(f"{name:>22}: FAILED {row['error']}", flush=True)
        rows.append(row)
        if on_row:
            on_row({"size": size, "sgemm": base, "variants": rows})
    return {"size": size, "sgemm": base, "variants": rows}


def sweep_winners(sweep: dict, *, max_error_ratio: float = 0.5) -> dict:
    """Fastest variant per order among those within ``max_error_ratio`` of SGEMM's error.

    Rows that never flush are left out (they are there for the notes).
    Returns ``{"termwise": config, "elementwise": config}`` (an order is
    absent if no row qualified).
    """
    base = sweep["sgemm"]
    best = {}
    for row in sweep["variants"]:
        if "tflops" not in row or row.get("flush_k") == 0:
            continue
        if row["err_normal"] > max_error_ratio * base["err_normal"] or \
                row["err_uniform"] > max_error_ratio * base["err_uniform"]:
            continue
        order = row["order"]
        if order not in best or row["tflops"] > best[order]["tflops"]:
            best[order] = row
    return {order: dict(row["config"]) for order, row in best.items()}


def host_overhead(sizes=(1024, 2048), calls: int = 200):
    """Host time per ``backend="cuda"`` call against its GPU time, and where the host time goes."""
    import cProfile
    import pstats

    torch = _torch()
    for n in sizes:
        a = torch.randn(1, n, n, device="cuda")
        b = torch.randn(1, n, n, device="cuda")
        out = torch.empty(1, n, n, device="cuda")
        fn = _cube_runner(a, b, out)
        fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        host = (time.perf_counter() - t0) / calls * 1e3
        torch.cuda.synchronize()
        gpu = _bench(fn, 100)
        print(f"{n}^3: host {host:.3f} ms per call (no sync), GPU-timed {gpu:.3f} ms", flush=True)
    prof = cProfile.Profile()
    prof.runcall(lambda: [fn() for _ in range(calls)])
    pstats.Stats(prof).sort_stats("tottime").print_stats(12)


# ---- the benchmark matrix (--matrix): the public API against cuBLAS SGEMM ---------------------------

class BenchProblem(NamedTuple):
    """One product of the benchmark matrix: ``batch`` products of an (m, k) by a (k, n) matrix.

    ``batch == 1`` means 2-D operands.  ``layout`` says how the operands are
    laid out in memory (:data:`LAYOUTS`; :func:`make_operands` builds them).
    """

    name: str
    batch: int
    m: int
    n: int
    k: int
    kind: str
    layout: str = "contiguous"
    data: str = "normal"


#: Data of the matrix's operands (:func:`make_operands`): name -> what ``a`` and ``b`` hold.  The
#: wide-range kinds are what users pick an FP32-accurate GEMM for; their rows span more binades than
#: the FP16 split holds (about 29), so the guarantee computes those outputs from the unscaled lines.
DATA_KINDS = {
    "normal": "a, b standard normal",
    "uniform": "a, b uniform in [0, 1)",
    "rbf kernel": "a = exp(-|x_i - x_j|^2 / (2 * 0.5)) of 16-d normal points (entries down to 1e-45), b normal",
    "softmax T=0.1": "a = softmax(s / 0.1) of normal scores s along each row (attention probabilities), b normal",
    "softmax T=1": "a = softmax(s) of normal scores s along each row, b normal",
    "softmax T=10": "a = softmax(s / 10) of normal scores s along each row, b normal",
    "log-normal s=4": "a = exp(4 z), z standard normal (rows spanning about 60 binades), b normal",
    "mixed rows 1%": "a normal, 1% of its rows with every other entry times 1e-10 (33 binades), b normal",
    "mixed rows 10%": "a normal, 10% of its rows mixed-magnitude as above, b normal",
    "mixed rows 100%": "a normal, every row mixed-magnitude as above, b normal",
    # The wide-range kinds of issue 33 (``--only wide-range``), built by :func:`make_wide_range`.
    "vandermonde": "a = polynomial features x_v^p, p = 0..95 per variable x_v uniform in [0.5, 2) "
                   "(columns j: variable j // 96, power j % 96; rows up to 95 binades), b normal coefficients",
    "laplace h=0.05": "a = exp(-|x_i - y_j| / 0.05) of uniform points in the unit cube (3-d; Laplacian kernel, "
                      "rows spanning about 20-50 binades), b normal",
    "laplace h=0.01": "a = exp(-|x_i - y_j| / 0.01) as above (rows spanning about 100-250 binades, "
                      "subnormals and underflowed zeros), b normal",
    "log-normal both s=3": "a = exp(3 z), b = exp(3 z'), z, z' standard normal (lines spanning about 30 binades)",
    "log-normal s=3": "a = exp(3 z), z standard normal, b normal",
    "gram X^T X": "a = X^T, b = X: the Gram matrix of unstandardised data X (k samples) whose columns are "
                  "10^u * (z + mu), u uniform in [-4, 4), mu uniform in [-3, 3) (column scales 1e-4..1e4)",
    "power-law graph": "a = D^-1/2 (G + I) D^-1/2 of a Chung-Lu power-law graph G (degree exponent 2.1, "
                       "mean degree about 16; mostly exact zeros, entries 1/sqrt(d_i d_j)), b normal features",
}

#: The :data:`DATA_KINDS` built by :func:`make_wide_range` (issue 33: the data users pick an FP32-accurate
#: GEMM for); their problems are named ``wide-range ...`` (``--only wide-range``).
WIDE_RANGE_KINDS = ("vandermonde", "laplace h=0.05", "laplace h=0.01", "log-normal both s=3", "log-normal s=3",
                    "gram X^T X", "power-law graph")


def make_data(kind: str, a_shape, b_shape, device="cuda", generator=None):
    """Contiguous float32 operands of shapes ``a_shape`` (..., m, k), ``b_shape`` (..., k, n) holding
    :data:`DATA_KINDS` ``kind``."""
    torch = _torch()
    if kind not in DATA_KINDS:
        raise ValueError(f"unknown data kind {kind!r}; choose one of {list(DATA_KINDS)}")
    if kind in WIDE_RANGE_KINDS:
        return make_wide_range(kind, a_shape, b_shape, device, generator)
    kw = dict(device=device, generator=generator, dtype=torch.float32)
    b = torch.randn(b_shape, **kw)
    if kind == "normal":
        return torch.randn(a_shape, **kw), b
    if kind == "uniform":
        return torch.rand(a_shape, **kw), torch.rand(b_shape, **kw)
    if kind == "rbf kernel":
        *lead, m, k = a_shape
        x = torch.randn(*lead, m, 16, **kw)
        y = x if k == m else torch.randn(*lead, k, 16, **kw)  # square: the points' own kernel matrix
        return torch.exp(-torch.cdist(x, y).square() / (2 * 0.5)), b
    if kind.startswith("softmax"):
        temperature = float(kind.split("=")[1])
        return torch.softmax(torch.randn(a_shape, **kw) / temperature, dim=-1), b
    if kind.startswith("log-normal"):
        return torch.exp(float(kind.split("=")[1]) * torch.randn(a_shape, **kw)), b
    share = float(kind.split()[-1].rstrip("%")) / 100
    a = torch.randn(a_shape, **kw)
    rows = a[..., : max(1, round(share * a_shape[-2])), :]  # which rows does not matter to the kernels
    rows[..., ::2] *= 1e-10
    return a, b


def _vandermonde(a_shape, kw):
    """Polynomial features: column j of a row holds ``x_v ** (j % 96)`` for the row's variable ``v = j // 96``."""
    torch = _torch()
    *lead, m, k = a_shape
    degree = 96
    x = 0.5 + 1.5 * torch.rand(*lead, m, -(-k // degree), **kw)  # uniform in [0.5, 2)
    j = torch.arange(k, device=x.device)
    return torch.pow(x[..., j // degree], (j % degree).to(torch.float32))


def _laplace(a_shape, h: float, kw):
    """Laplacian kernel exp(-|x_i - y_j| / h) of uniform points in the unit cube (the points' own when square)."""
    torch = _torch()
    *lead, m, k = a_shape
    x = torch.rand(*lead, m, 3, **kw)
    y = x if k == m else torch.rand(*lead, k, 3, **kw)
    # Exact distances (the matrix-product form is neither exact on the diagonal nor TF32-proof).
    return torch.exp(-torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist") / h)


def _power_law_graph(a_shape, kw):
    """GCN-normalised adjacency D^-1/2 (G + I) D^-1/2 of a symmetric Chung-Lu graph with power-law weights."""
    torch = _torch()
    *lead, m, k = a_shape
    n = max(m, k)
    dev = kw["device"]
    gamma, mean_degree = 2.1, 16.0
    w = torch.arange(1, n + 1, device=dev, dtype=torch.float64) ** (-1.0 / (gamma - 1.0))
    w *= mean_degree / w.mean()
    p = (w[:, None] * w[None, :] / w.sum()).clamp(max=1.0).float()
    upper = torch.triu(torch.rand(*lead, n, n, **kw) < p, diagonal=1)
    g = (upper | upper.mT).float() + torch.eye(n, device=dev)
    d = g.sum(-1).rsqrt()
    return (d[..., :, None] * g * d[..., None, :])[..., :m, :k].contiguous()


def _gram(a_shape, b_shape, kw):
    """a = X^T, b = X for unstandardised X (k samples) with column scales 1e-4..1e4 (contiguous copies)."""
    torch = _torch()
    *lead, m, k = a_shape
    n = b_shape[-1]
    f = max(m, n)
    scale = 10.0 ** (8.0 * torch.rand(*lead, 1, f, **kw) - 4.0)
    mu = 6.0 * torch.rand(*lead, 1, f, **kw) - 3.0
    x = scale * (torch.randn(*lead, k, f, **kw) + mu)
    return x[..., :m].mT.contiguous(), x[..., :n].contiguous()


def make_wide_range(kind: str, a_shape, b_shape, device="cuda", generator=None):
    """Contiguous float32 operands holding the wide-range kind ``kind`` (:data:`WIDE_RANGE_KINDS`).

    Built on ``device`` from ``generator`` (seeded by the caller), as :data:`DATA_KINDS` says:

    * ``"vandermonde"``: polynomial features x^0..x^95 of variables uniform in [0.5, 2);
    * ``"laplace h=..."``: Laplacian kernel matrices exp(-|x - y| / h) of random points;
    * ``"log-normal both s=3"`` / ``"log-normal s=3"``: exp(3 z) on both operands / on ``a`` only;
    * ``"gram X^T X"``: ``a = X^T``, ``b = X``, columns of X at scales 1e-4..1e4 (``b_shape[-2]`` samples);
    * ``"power-law graph"``: the degree-normalised adjacency of a power-law graph times normal features.
    """
    torch = _torch()
    if kind not in WIDE_RANGE_KINDS:
        raise ValueError(f"unknown wide-range kind {kind!r}; choose one of {list(WIDE_RANGE_KINDS)}")
    kw = dict(device=device, generator=generator, dtype=torch.float32)
    if kind == "gram X^T X":
        return _gram(a_shape, b_shape, kw)
    if kind == "vandermonde":
        a = _vandermonde(a_shape, kw)
    elif kind.startswith("laplace"):
        a = _laplace(a_shape, float(kind.split("=")[1]), kw)
    elif kind.startswith("log-normal"):
        a = torch.exp(3.0 * torch.randn(a_shape, **kw))
        if "both" in kind:
            return a, torch.exp(3.0 * torch.randn(b_shape, **kw))
    else:
        a = _power_law_graph(a_shape, kw)
    return a, torch.randn(b_shape, **kw)


#: Operand layouts of the matrix: both contiguous; b one (k, n) matrix against a batch of a;
#: a = x.mT of a contiguous x; a = every other column of a contiguous (m, 2k) x; b = W.mT of a
#: contiguous (n, k) weight (what ``F.linear`` passes).
LAYOUTS = ("contiguous", "b broadcast", "a transposed view", "a strided view", "b = W.t()")

#: What the matrix times, on the same data: name -> description.
MATRIX_METHODS = {
    "sgemm": "torch.matmul(a, b), cuBLAS FP32 (allow_tf32 = False)",
    "auto": "sgemm_cube.matmul(a, b): backend='auto' (hybrid rule may pick cuBLAS)",
    "cuda": "sgemm_cube.matmul(a, b, backend='cuda'): the emulation, always",
    "scheme_auto": "sgemm_cube.matmul(a, b, scheme='auto')",
}


def matrix_problems() -> tuple:
    """The problems of ``--matrix`` (see :class:`BenchProblem`), cheap ones first, 16384^3 last.

    Squares (odd sizes included), linear layers with 8192 tokens, tall-skinny,
    short-wide, K-heavy, odd shapes, batched (B broadcast included) and
    strided/transposed operands; then real-shaped data (:data:`DATA_KINDS`).
    """
    P = BenchProblem
    squares = [P(f"square {s}", 1, s, s, s, "square")
               for s in (128, 256, 384, 512, 768, 1000, 1024, 1536, 2048, 3000, 3072, 4096, 6144, 8192)]
    tokens = 8192
    linear = [P(f"linear {d_in}->{d_out}", 1, tokens, d_out, d_in, "linear, 8192 tokens", "b = W.t()")
              for d_in, d_out in ((768, 768), (768, 3072), (3072, 768), (4096, 4096), (4096, 11008))]
    shapes = [
        P("tall-skinny 65536x64 k4096", 1, 65536, 64, 4096, "tall-skinny"),
        P("tall-skinny 16384x256 k8192", 1, 16384, 256, 8192, "tall-skinny"),
        P("tall-skinny 32768x128 k4096", 1, 32768, 128, 4096, "tall-skinny"),
        P("short-wide 64x65536 k4096", 1, 64, 65536, 4096, "short-wide"),
        P("short-wide 256x16384 k8192", 1, 256, 16384, 8192, "short-wide"),
        P("K-heavy 1024x1024 k16384", 1, 1024, 1024, 16384, "K-heavy"),
        P("K-heavy 2048x2048 k32768", 1, 2048, 2048, 32768, "K-heavy"),
        P("K-heavy 1024x1024 k65536", 1, 1024, 1024, 65536, "K-heavy"),
        P("wide-N 1024x16384 k1024", 1, 1024, 16384, 1024, "wide-N"),
        P("short-K 8192x8192 k256", 1, 8192, 8192, 256, "short-K"),
        P("odd 1000x3000 k777", 1, 1000, 3000, 777, "odd"),
        P("odd 3000x777 k1000", 1, 3000, 777, 1000, "odd"),
        P("odd 777x1000 k3000", 1, 777, 1000, 3000, "odd"),
        P("odd 4097x4095 k4099", 1, 4097, 4095, 4099, "odd"),
        P("batched 64x512^3", 64, 512, 512, 512, "batched"),
        P("batched 16x1024^3", 16, 1024, 1024, 1024, "batched"),
        P("batched 8x2048^3 B broadcast", 8, 2048, 2048, 2048, "batched", "b broadcast"),
        P("a transposed view 4096^3", 1, 4096, 4096, 4096, "layout", "a transposed view"),
        P("a transposed view 1000x3000 k777", 1, 1000, 3000, 777, "layout", "a transposed view"),
        P("a strided view 4096^3", 1, 4096, 4096, 4096, "layout", "a strided view"),
        P("a strided view 2048^3", 1, 2048, 2048, 2048, "layout", "a strided view"),
    ]
    data = [P(f"data {kind} 8192^3", 1, 8192, 8192, 8192, "data", data=kind)
            for kind in DATA_KINDS if kind not in ("normal",) and not kind.startswith("softmax")]
    data += [P("data mixed rows 100% 4096^3", 1, 4096, 4096, 4096, "data", data="mixed rows 100%"),
             P("data rbf kernel 8192x1024 k8192", 1, 8192, 1024, 8192, "data", data="rbf kernel")]
    data += [P(f"data {kind} 16x2048x1024 k2048", 16, 2048, 1024, 2048, "data", data=kind)
             for kind in DATA_KINDS if kind.startswith("softmax")]
    return tuple(squares + linear + shapes + data + wide_range_problems()
                 + [P("square 16384", 1, 16384, 16384, 16384, "square")])


#: The cube sizes of the wide-range problems: 4096^3 (issue 33's 1.5x target), 2048^3 (from which ``scheme="auto"``
#: lets the GPU choose, ``launch.AUTO_MIN_FLOPS``) and 1536^3 (below that, where the hybrid rule of the H100 and
#: H200 still emulates and the GPU chooses from K = 1024, ``launch.AUTO_MIN_K``; the target there is 1.0x).
WIDE_RANGE_SIZES = (4096, 2048, 1536)
#: The short-K shape (m, n, k) of the wide-range problems: the issue's Vandermonde features (8192 x 96) @ (96 x 4096),
#: every kind at it.  The hybrid rule emulates it and ``scheme="auto"`` runs fp16x3 there (under 2^34 flops and
#: K < 1024), so it is where the FP64 fix-up's lines cost most.
WIDE_RANGE_SHORT_K = (8192, 4096, 96)
#: Short-K problems of one kind each (kind, m, n, k): the slowest against SGEMM of those measured where the hybrid
#: rule emulates, log-normal data on both operands at 8192^2 x 64 (0.97x on an H200, 2026-11-29, 1.01x with the
#: fix-up after the tiles; docs/speed.md, the fix-up's programs at short K and the section after it).
WIDE_RANGE_SHORT_K_WORST = (("log-normal both s=3", 8192, 8192, 64),)


def wide_range_problems() -> list:
    """The problems of :data:`WIDE_RANGE_KINDS` (issue 33), named ``wide-range ...``: each kind at the short-K
    shape :data:`WIDE_RANGE_SHORT_K` and at the cubes of :data:`WIDE_RANGE_SIZES`, and the problems of
    :data:`WIDE_RANGE_SHORT_K_WORST`."""
    P = BenchProblem
    short_k = [(kind, *WIDE_RANGE_SHORT_K) for kind in WIDE_RANGE_KINDS] + list(WIDE_RANGE_SHORT_K_WORST)
    return ([P(f"wide-range {kind} {m}x{n} k{k}", 1, m, n, k, "wide-range", data=kind) for kind, m, n, k in short_k]
            + [P(f"wide-range {kind} {s}^3", 1, s, s, s, "wide-range", data=kind)
               for s in WIDE_RANGE_SIZES for kind in WIDE_RANGE_KINDS])


def make_operands(p: BenchProblem, device="cuda", generator=None):
    """Float32 operands of ``p`` in its layout: random normal (never zeros), or ``p.data`` (:func:`make_data`,
    contiguous)."""
    torch = _torch()
    if p.layout not in LAYOUTS:
        raise ValueError(f"unknown layout {p.layout!r}; choose one of {list(LAYOUTS)}")
    if p.data != "normal":
        lead = (p.batch,) if p.batch > 1 else ()
        return make_data(p.data, (*lead, p.m, p.k), (*lead, p.k, p.n), device, generator)

    def randn(*shape):
        return torch.randn(shape, device=device, generator=generator, dtype=torch.float32)

    lead = (p.batch,) if p.batch > 1 else ()
    if p.layout == "a transposed view":
        a = randn(*lead, p.k, p.m).mT
    elif p.layout == "a strided view":
        a = randn(*lead, p.m, 2 * p.k)[..., ::2]
    else:
        a = randn(*lead, p.m, p.k)
    if p.layout == "b broadcast":
        b = randn(p.k, p.n)
    elif p.layout == "b = W.t()":
        b = randn(*lead, p.n, p.k).mT
    else:
        b = randn(*lead, p.k, p.n)
    return a, b


def _matrix_methods(a, b) -> dict:
    """name -> zero-argument callable, for :data:`MATRIX_METHODS` (TF32 must be off:
    :class:`~sgemm_cube.backends.native.true_fp32`)."""
    torch = _torch()
    import sgemm_cube

    return {"sgemm": lambda: torch.matmul(a, b),
            "auto": lambda: sgemm_cube.matmul(a, b),
            "cuda": lambda: sgemm_cube.matmul(a, b, backend="cuda"),
            "scheme_auto": lambda: sgemm_cube.matmul(a, b, scheme="auto")}




def _gpu_time(fn, rep_ms: float, device) -> float:
    """GPU time per call (ms): ``triton.testing.do_bench``'s median on CUDA (L2 flushed before
    every call); on the CPU (dry runs, which check the runner, not speed) the wall time of one call."""
    torch = _torch()
    if torch.device(device).type == "cuda":
        return _bench(fn, rep_ms)
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def host_loop_ms(fn, calls: int, device, loops: int = 1) -> float:
    """Wall time per call (ms) of ``calls`` back-to-back calls followed by one synchronize.

    Unlike ``do_bench``, nothing runs between the calls: host work (argument
    checks, read-backs, launches) that the GPU cannot hide shows up here.
    The median over ``loops`` such loops.
    """
    fn()
    _sync(device)
    per_call = []
    for _ in range(max(1, loops)):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync(device)
        per_call.append((time.perf_counter() - t0) * 1e3 / calls)
    return sorted(per_call)[len(per_call) // 2]


def submit_ms(fn, calls: int, device) -> float:
    """The host's own time per call (ms): ``calls`` back-to-back calls timed without a synchronize, after one.

    Where it reaches the GPU's time per call the calls are bound by the host: the GPU waits for launches,
    and both timings read the host's time.  ``calls`` must leave the GPU's launch queue unfilled (about a
    thousand launches: at most :data:`SUBMIT_CALLS` calls of a few launches each), or the loop waits for
    the GPU too."""
    fn()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - t0
    _sync(device)
    return elapsed * 1e3 / calls


#: Calls per :func:`submit_ms` loop: about 200 launches for the emulation's 6-10 launches a call.
SUBMIT_CALLS = 20
#: A method is listed as host-bound (:func:`matrix_summary`) where its submit time reaches this share of its
#: GPU time.
HOST_BOUND_SHARE = 0.9


def _host_calls(gpu_ms: float, host_ms: float) -> int:
    """Calls per host loop: about ``host_ms`` of GPU work, between 2 and 200."""
    if not math.isfinite(gpu_ms) or gpu_ms <= 0:
        return 2
    return int(min(200, max(2, host_ms / gpu_ms)))


def reference_rows(p: BenchProblem, max_flops: float) -> int:
    """Rows of ``a`` (per batch) the float64 reference covers: all, or the first ones within ``max_flops``."""
    per_row = 2.0 * p.batch * p.n * p.k
    return int(min(p.m, max(1, max_flops // per_row)))


def _oom_error():
    torch = _torch()
    return getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


def _explain(a, b, **options) -> dict:
    """What ``sgemm_cube.explain(a, b, **options)`` says (backend, scheme, ...), or the error it raised."""
    import sgemm_cube

    try:
        plan = sgemm_cube.explain(a, b, **options)
    except Exception as exc:  # its signature or behaviour may differ between versions: record, go on
        return {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    fields = ("backend", "scheme", "scale", "sb", "reason")
    return {f: getattr(plan, f) for f in fields if hasattr(plan, f)} or {"repr": repr(plan)[:300]}


def fixup_fractions(a, b, *, fixup: bool = True, scheme: str = "fp16x3", margin: float | None = None) -> dict:
    """Fractions of rows of ``a``, columns of ``b`` and outputs that ``scheme`` lists for the fix-up.

    The line statistics (largest and smallest nonzero finite magnitude, NaN/Inf) are taken where the
    operands are, with torch; the classes follow from them as in every backend
    (:func:`sgemm_cube.cpu_fallback.guard.meta_from_stats`: ``scheme``, ``sb=12``, ``scale="auto"``, each
    operand's lines beside the other's).  ``scheme="auto"``: the scheme the GPU chooses
    (:func:`sgemm_cube.cpu_fallback.guard.choose_scheme`'s rule, ``margin`` the launch's by default).
    A line of class ``>= fixup_min_class(fixup)`` has all its outputs computed by the fix-up, so an output is
    listed where its row or its column is.  Returns ``{"rows", "cols", "outputs", "scheme"}`` (averaged over
    batches; ``scheme`` the one counted).
    """
    torch = _torch()
    from sgemm_cube.cpu_fallback.guard import LineStats, fixup_min_class, meta_from_stats

    def stats(x, dim):
        x = x.reshape(-1, *x.shape[-2:])
        finite = torch.isfinite(x)
        mag = torch.where(finite, x.abs(), torch.zeros((), dtype=x.dtype, device=x.device))
        big = mag.amax(dim)
        small = torch.where(mag > 0, mag, torch.full((), float("inf"), dtype=x.dtype, device=x.device)).amin(dim)
        return LineStats(big.double().cpu().numpy(), small.double().cpu().numpy(), (~finite.all(dim)).cpu().numpy(),
                         (x == 0).any(dim).cpu().numpy())

    sa, sb = stats(a, -1), stats(b, -2)

    def fractions(name):
        listed = [torch.from_numpy(meta_from_stats(own, scheme=name, fixup=fixup, partner=other, k=a.shape[-1]).cls
                                   >= int(fixup_min_class(fixup))).double() for own, other in ((sa, sb), (sb, sa))]
        fr, fc = listed[0].mean(-1), listed[1].mean(-1)  # per batch
        return {"rows": float(fr.mean()), "cols": float(fc.mean()), "outputs": float((fr + fc - fr * fc).mean()),
                "scheme": name}

    if scheme != "auto":
        return fractions(scheme)
    if margin is None:
        from sgemm_cube.backends.cuda.launch import AUTO_MARGIN as margin
    fp16, bf16 = fractions("fp16x3"), fractions("bf16x6")
    return bf16 if fp16["outputs"] - bf16["outputs"] > margin else fp16


def _hybrid_native(p: BenchProblem, device):
    """What the hybrid rule in force (``prefers_native``) says for ``p`` on ``device``; None off CUDA."""
    torch = _torch()
    if torch.device(device).type != "cuda":
        return None
    try:
        from sgemm_cube.backends.cuda import prefers_native

        return bool(prefers_native(p.batch, p.m, p.n, p.k, device))
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:200]}"


def _failure(exc) -> str:
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def measure_problem(p: BenchProblem, *, device="cuda", rep_ms: float = 100.0, rounds: int = 3,
                    host_ms: float = 50.0, ref_max_flops: float = 2e12, seed: int = 0) -> dict:
    """Errors and timings of every :data:`MATRIX_METHODS` entry on one problem; returns its row.

    Errors are relative Frobenius norms against ``torch.matmul`` in float64
    on the same device, over the first ``err_rows`` rows of every batch
    (:func:`reference_rows`).  GPU times are medians over ``rounds``
    round-robin ``do_bench`` runs (the clock a method runs at depends on
    what ran before it); host times come from :func:`host_loop_ms`.
    ``speedup_*`` is SGEMM's time over the method's (above 1: faster than
    SGEMM).  A method that fails (out of memory included) is listed under
    ``failed`` with NaN figures; the other methods still run.
    """
    torch = _torch()
    oom = _oom_error()
    flops = 2.0 * p.batch * p.m * p.n * p.k
    row = dict(p._asdict(), flops=flops, rel_err={}, gpu_ms={}, host_ms={}, host_calls={}, submit_ms={},
               failed={})
    gen = torch.Generator(device=device).manual_seed(seed)
    a, b = make_operands(p, device, gen)
    row.update(a_shape=list(a.shape), a_stride=list(a.stride()), b_shape=list(b.shape), b_stride=list(b.stride()))
    fns = _matrix_methods(a, b)

    def fail(name, exc):
        row["failed"][name] = _failure(exc)
        fns[name] = None
        if isinstance(exc, oom):
            gc.collect()
            torch.cuda.empty_cache()

    rows_ref = reference_rows(p, ref_max_flops)
    row["err_rows"] = rows_ref
    ref = torch.matmul(a[..., :rows_ref, :].double(), b.double())
    for name, fn in list(fns.items()):
        try:
            c = fn()
            row["rel_err"][name] = _rel_err(c[..., :rows_ref, :], ref)
            del c
        except Exception as exc:  # report, keep going with the other methods
            fail(name, exc)
            row["rel_err"][name] = float("nan")
    del ref
    row["explain"] = _explain(a, b)
    row["hybrid_native"] = _hybrid_native(p, device)
    # what the emulation lists: auto's scheme, or where auto runs native, that of backend='cuda' (its column)
    emulated = row["explain"] if row["explain"].get("backend") != "native" else _explain(a, b, backend="cuda")
    try:
        row["fixup_listed"] = fixup_fractions(a, b, scheme=emulated.get("scheme", "fp16x3"))
    except Exception as exc:  # the guard's bookkeeping may change: the timings matter more
        row["fixup_listed"] = {"error": _failure(exc)}

    times = {name: [] for name in fns}
    for _ in range(max(1, rounds)):
        for name, fn in fns.items():
            if fns[name] is None:
                continue
            try:
                times[name].append(_gpu_time(fn, rep_ms, device))
            except Exception as exc:
                fail(name, exc)
    for name, ts in times.items():
        row["gpu_ms"][name] = sorted(ts)[len(ts) // 2] if ts and fns[name] is not None else float("nan")
    for name, fn in fns.items():
        row["host_ms"][name] = float("nan")
        if fn is None:
            continue
        calls = _host_calls(row["gpu_ms"][name], host_ms)
        row["host_calls"][name] = calls
        try:
            row["host_ms"][name] = host_loop_ms(fn, calls, device, loops=3 if calls >= 10 else 1)
            row["submit_ms"][name] = submit_ms(fn, SUBMIT_CALLS, device)
        except Exception as exc:
            fail(name, exc)
    _derive_rates(row)
    return row


def _derive_rates(row: dict) -> None:
    """TFLOP/s and speedup over SGEMM for both timings of a row (NaN where a time is missing)."""
    for timing in ("gpu", "host"):
        ms = row[f"{timing}_ms"]
        base = ms.get("sgemm", float("nan"))
        row[f"tflops_{timing}"] = {name: row["flops"] / t * 1e-9 if t > 0 else float("nan")
                                   for name, t in ms.items()}
        row[f"speedup_{timing}"] = {name: base / t if t > 0 else float("nan") for name, t in ms.items()}


def run_matrix(problems=None, *, device="cuda", rep_ms: float = 100.0, rounds: int = 3, host_ms: float = 50.0,
               ref_max_flops: float = 2e12, seed: int = 0, budget_s: float | None = 330.0, on_row=None,
               show_progress: bool = True) -> list:
    """Measure every problem (default :func:`matrix_problems`); return the rows (:func:`measure_problem`).

    Runs with TF32 off (restored afterwards) and frees memory between
    problems.  A problem that runs out of memory or fails is recorded with
    ``error``; once ``budget_s`` seconds have passed, the remaining problems
    are recorded with ``skipped`` instead of measured.  ``on_row(rows)`` is
    called after every problem (to save partial results).
    """
    torch = _torch()
    problems = matrix_problems() if problems is None else tuple(problems)
    bar, say = _progress_bar(len(problems), show_progress)
    rows = []
    start = time.time()
    with true_fp32():
        for p in problems:
            t0 = time.time()
            if budget_s is not None and t0 - start > budget_s:
                row = dict(p._asdict(), flops=2.0 * p.batch * p.m * p.n * p.k,
                           skipped=f"time budget of {budget_s:.0f} s spent")
            else:
                if bar is not None:
                    bar.set_postfix_str(p.name)
                try:
                    row = measure_problem(p, device=device, rep_ms=rep_ms, rounds=rounds, host_ms=host_ms,
                                          ref_max_flops=ref_max_flops, seed=seed)
                except Exception as exc:  # out of memory while building the data, or worse: record it
                    row = dict(p._asdict(), flops=2.0 * p.batch * p.m * p.n * p.k, error=_failure(exc))
                row["seconds"] = time.time() - t0
            rows.append(row)
            gc.collect()
            if torch.device(device).type == "cuda":
                torch.cuda.empty_cache()
            say(_row_line(row))
            if bar is not None:
                bar.update(1)
            if on_row:
                on_row(rows)
    if bar is not None:
        bar.close()
    return rows


def _progress_bar(total: int, enabled: bool):
    """A tqdm bar and a print function that does not break it; (None, print) without tqdm."""
    if enabled:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            pass
        else:
            bar = tqdm(total=total, desc="matrix", unit="problem", dynamic_ncols=True)
            return bar, lambda msg: tqdm.write(msg)
    return None, lambda msg: print(msg, flush=True)


def _shape_text(r) -> str:
    """``b x m x n x k`` (the batch only when above 1)."""
    return (f"{r['batch']}x" if r["batch"] > 1 else "") + f"{r['m']}x{r['n']}x{r['k']}"


def _row_line(r) -> str:
    """One line per measured problem, printed as the matrix runs."""
    head = f"{r['name']:<34} {_shape_text(r):>20}"
    if "skipped" in r or "error" in r:
        return f"{head} | {r.get('skipped') or r.get('error')}"
    sg, sh, e = r["speedup_gpu"], r["speedup_host"], r["rel_err"]
    fails = f" | failed: {sorted(r['failed'])}" if r["failed"] else ""
    return (f"{head} | sgemm {r['gpu_ms']['sgemm']:8.3f} ms | x SGEMM gpu/host: auto {sg['auto']:5.2f}/"
            f"{sh['auto']:5.2f} cuda {sg['cuda']:5.2f}/{sh['cuda']:5.2f} scheme_auto {sg['scheme_auto']:5.2f}/"
            f"{sh['scheme_auto']:5.2f} | host auto {r.get('submit_ms', {}).get('auto', math.nan) * 1e3:4.0f} "
            f"us/call | err auto {e['auto']:.1e} sgemm {e['sgemm']:.1e} | "
            f"fix-up {_listed_text(r)} [{r.get('seconds', 0):.1f}s]{fails}")


def _listed_text(r) -> str:
    """``rows/cols`` fractions listed for the fix-up (:func:`fixup_fractions`), or ``-``."""
    f = r.get("fixup_listed") or {}
    return f"{f['rows']:.2f}/{f['cols']:.2f}" if "rows" in f else "-"


def format_matrix_table(rows) -> str:
    """The end-of-run table: per problem, auto's (and cuda's) speedup over SGEMM on both timings, errors."""
    head = (f"{'problem':<34} {'b x m x n x k':>20} {'auto':>8} {'auto':>8} {'cuda':>8} "
            f"{'err auto':>9} {'err cuda':>9} {'err sgemm':>9} {'fix-up':>9}  explain (backend/scheme)")
    sub = f"{'':<34} {'':>20} {'GPU':>8} {'host':>8} {'GPU':>8} {'':>9} {'':>9} {'':>9} {'rows/cols':>9}"
    lines = ["speed against cuBLAS SGEMM = SGEMM time / method time (above 1: faster than SGEMM); "
             "GPU: do_bench, host: back-to-back calls", head, sub]
    for r in rows:
        if "skipped" in r or "error" in r:
            lines.append(f"{r['name']:<34} {_shape_text(r):>20}  {r.get('skipped') or r.get('error')}")
            continue
        ex = r.get("explain", {})
        plan = "error" if "error" in ex else f"{ex.get('backend')}/{ex.get('scheme')}"
        lines.append(f"{r['name']:<34} {_shape_text(r):>20} {r['speedup_gpu']['auto']:>7.2f}x "
                     f"{r['speedup_host']['auto']:>7.2f}x {r['speedup_gpu']['cuda']:>7.2f}x "
                     f"{r['rel_err']['auto']:>9.2e} {r['rel_err']['cuda']:>9.2e} {r['rel_err']['sgemm']:>9.2e} "
                     f"{_listed_text(r):>9}  "
                     f"{plan}{' (hybrid: native)' if r.get('hybrid_native') is True else ''}")
    return "\n".join(lines)


def _measured(rows) -> list:
    return [r for r in rows if "gpu_ms" in r]


def matrix_summary(rows) -> dict:
    """Headline figures of a matrix run: geometric-mean speedups, where auto lost to SGEMM, worst errors."""
    out = {}
    measured = _measured(rows)
    for name in MATRIX_METHODS:
        for timing in ("gpu", "host"):
            s = [r[f"speedup_{timing}"][name] for r in measured
                 if math.isfinite(r[f"speedup_{timing}"].get(name, float("nan")))]
            out[f"geomean_speedup_{timing}_{name}"] = math.exp(sum(map(math.log, s)) / len(s)) if s else None
        errs = [r["rel_err"][name] for r in measured if math.isfinite(r["rel_err"].get(name, float("nan")))]
        out[f"max_rel_err_{name}"] = max(errs) if errs else None
    out["auto_slower_than_sgemm_gpu"] = [r["name"] for r in measured if r["speedup_gpu"]["auto"] < 0.98]
    out["auto_slower_than_sgemm_host"] = [r["name"] for r in measured if r["speedup_host"]["auto"] < 0.98]
    out["auto_host_bound"] = [r["name"] for r in measured
                              if r.get("submit_ms", {}).get("auto", 0.0) >= HOST_BOUND_SHARE * r["gpu_ms"]["auto"]]
    out["failed"] = {r["name"]: r.get("error") or r["failed"] for r in rows if r.get("error") or r.get("failed")}
    out["skipped"] = [r["name"] for r in rows if "skipped" in r]
    return out


def derive_hybrid_rule(rows, *, margin: float = 1.0, method: str = "cuda") -> dict:
    """Fit the hybrid rule of ``backend="auto"`` to a matrix run.

    The rule (``sgemm_cube/backends/cuda/hybrid.py``) runs the emulation when
    ``2*batch*m*n*k >= min_flops and min(m, n) >= min_mn and k >= min_k`` and
    cuBLAS SGEMM otherwise.  The thresholds returned send every problem where
    the forced emulation (``gpu_ms[method]``, default ``"cuda"``) is slower
    than ``margin`` times SGEMM's GPU time to native, and keep as many of the
    others on the emulation as possible.  Among rules that do equally well
    the one with the fewest thresholds in use wins, then the one with the
    smallest ``min_mn`` and ``min_k``: the work (flops) is the main axis,
    the shape cut-offs are used only where the measurements demand them
    (a ``min_mn`` of 1025 fitted to squares alone would also send every
    large skinny product native).

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`run_matrix` (``batch, m, n, k, name`` and
        ``gpu_ms[{"sgemm", method}]``); rows without both times are left out
        and listed in ``fit["skipped"]``.
    margin : float
        The emulation "loses" when ``gpu_ms[method] > margin * gpu_ms["sgemm"]``.

    Returns
    -------
    dict
        ``{"min_flops": float, "min_mn": int, "min_k": int, "fit": {...}}``;
        ``fit`` counts the problems, lists those the emulation wins but the
        rule sends native (``faster_but_native``, with their speedups), and
        those it loses but the rule keeps (``slower_but_emulated``: empty by
        construction, checked).
    """
    used, skipped, loses, wins = [], [], [], []
    for r in rows:
        ms = r.get("gpu_ms", {})
        t_emu, t_ref = ms.get(method, float("nan")), ms.get("sgemm", float("nan"))
        if not (math.isfinite(t_emu) and math.isfinite(t_ref) and t_emu > 0 and t_ref > 0):
            skipped.append(r.get("name", _shape_text(r)))
            continue
        slower = t_emu > margin * t_ref
        used.append((r, slower, t_ref / t_emu))
        (loses if slower else wins).append(_rule_key(r))
    rule = _fit_thresholds(loses, wins, fewest_cuts=True)

    def entry(r, speedup):
        return {"name": r.get("name", _shape_text(r)), "batch": r["batch"], "m": r["m"], "n": r["n"], "k": r["k"],
                "speedup": speedup}

    native = [(r, slower, sp) for r, slower, sp in used if _goes_native(rule, _rule_key(r))]
    fit = {"method": method, "margin": margin, "problems": len(used), "emulation_slower": len(loses),
           "emulation_faster": len(wins), "sent_native": len(native),
           "faster_but_native": [entry(r, sp) for r, slower, sp in native if not slower],
           "slower_but_emulated": [entry(r, sp) for r, slower, sp in used
                                   if slower and not _goes_native(rule, _rule_key(r))],
           "skipped": skipped}
    return {"min_flops": float(rule["min_flops"]), "min_mn": int(rule["min_mn"]), "min_k": int(rule["min_k"]),
            "fit": fit}


#: ``--matrix --write-config`` writes no rule fitted to fewer measured problems (``--only`` runs, failures).
MIN_PROBLEMS_FOR_CONFIG = 20


def write_hybrid_config(rule: dict, key: str, *, source: str | None = None, device: str | None = None,
                        config_dir=None) -> pathlib.Path:
    """Store a fitted rule (:func:`derive_hybrid_rule`) as ``"hybrid"`` in ``configs/<key>.json``
    through the one writer of those files, :func:`sgemm_cube.tuning.gpu.write_hybrid_rule` (the file's other
    keys stay; ``config_dir`` defaults to the package's own ``backends/cuda/configs``, the folder
    :mod:`sgemm_cube.backends.cuda.configs` reads)."""
    from sgemm_cube.backends.cuda.configs import CONFIG_DIR
    from sgemm_cube.tuning.gpu import write_hybrid_rule

    base = CONFIG_DIR if config_dir is None else pathlib.Path(config_dir)
    return write_hybrid_rule(rule, key, source=source, device=device, directory=base)


def _run_matrix_mode(args, env, key, stamp, save) -> int:
    """``--matrix``: run, print the table and the fitted rule, write the JSON (and the config)."""
    problems = matrix_problems()
    if args.only:
        problems = tuple(p for p in problems if any(s.lower() in p.name.lower() for s in args.only))
    path = args.results_dir / f"matrix_{key}_{stamp}.json"
    options = {"rep_ms": args.reps_ms or 100.0, "rounds": args.rounds, "host_ms": args.host_ms,
               "ref_max_flops": args.ref_max_flops, "seed": args.seed, "budget_s": args.budget_s}
    head = dict(env, methods=MATRIX_METHODS, options=options,
                legend={"gpu_ms": "triton.testing.do_bench median per call (L2 flushed between calls)",
                        "host_ms": "wall time of host_calls back-to-back calls, then one synchronize, per call",
                        "submit_ms": f"the host's own time per call: {SUBMIT_CALLS} back-to-back calls timed "
                                     f"without a synchronize; auto_host_bound (summary) lists the problems where "
                                     f"auto's reaches {HOST_BOUND_SHARE} of its gpu_ms",
                        "speedup_gpu/host": "SGEMM time / method time: above 1 is faster than SGEMM",
                        "rel_err": "||C - C64||_F / ||C64||_F over the first err_rows rows of each batch",
                        "m, n, k": "a is (batch, m, k), b is (batch, k, n); batch 1 means 2-D operands"})
    print(f"{len(problems)} problems, time budget {args.budget_s:.0f} s", flush=True)
    rows = run_matrix(problems, **options, on_row=lambda partial: save(path, dict(head, rows=partial)))
    rule = derive_hybrid_rule(rows, margin=args.margin)
    try:
        from sgemm_cube.backends.cuda.hybrid import native_rule

        in_force = native_rule(key)
    except Exception as exc:  # the hybrid module may change: the run's record matters more
        in_force = _failure(exc)
    doc = dict(head, rows=rows, summary=matrix_summary(rows), derived_hybrid_rule=rule,
               hybrid_rule_in_force=in_force)
    save(path, doc)
    print(format_matrix_table(rows))
    bound = doc["summary"]["auto_host_bound"]
    print(f"bound by the host (auto's host time per call >= {HOST_BOUND_SHARE} of its GPU time): "
          f"{len(bound)} of {len(_measured(rows))} problems{': ' + ', '.join(bound) if bound else ''}")
    print(f"hybrid rule in force: {doc['hybrid_rule_in_force']}")
    print(f"hybrid rule fitted to this run: { {k: rule[k] for k in ('min_flops', 'min_mn', 'min_k')} }; "
          f"{rule['fit']['emulation_slower']} of {rule['fit']['problems']} problems slower on the emulation, "
          f"faster but sent native: {[e['name'] for e in rule['fit']['faster_but_native']]}")
    if args.write_config:
        if rule["fit"]["problems"] < MIN_PROBLEMS_FOR_CONFIG:
            print(f"not writing the config: the rule rests on {rule['fit']['problems']} measured problems "
                  f"(at least {MIN_PROBLEMS_FOR_CONFIG} needed)", file=sys.stderr)
        else:
            print(f"wrote {write_hybrid_config(rule, key, source=path.name, device=env['device'])}")
    print(f"wrote {path}")
    return 0


def add_parser(subparsers, name: str = "bench"):
    """Register the benchmark as ``sgemm-cube <name>``; returns the parser (run with :func:`run`)."""
    p = subparsers.add_parser(name, help="time sgemm_cube's CUDA backend against cuBLAS",
                              description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    p.set_defaults(func=run)
    return p


def _add_arguments(p):
    p.add_argument("--sizes", type=positive_int, nargs="+", default=list(SQUARE_SIZES), metavar="N",
                   help="square sizes M = N = K")
    p.add_argument("--no-rect", action="store_true", help="skip the rectangular and batched shapes")
    p.add_argument("--reps-ms", type=positive_float, default=None,
                   help="timing budget per measurement (ms; default 200, with --matrix 100)")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the random data (default: %(default)s)")
    p.add_argument("--sweep", action="store_true", help="compare kernel variants instead")
    p.add_argument("--overhead", action="store_true", help="profile the host time of one call instead")
    p.add_argument("--sweep-size", type=positive_int, default=8192, metavar="N",
                   help="M = N = K of --sweep (default: %(default)s)")
    p.add_argument("--results-dir", type=pathlib.Path, default=RESULTS_DIR, help="where the JSON goes")
    p.add_argument("--write-config", action="store_true",
                   help="with --matrix: store the fitted hybrid rule in "
                        "sgemm_cube/backends/cuda/configs/<gpu>.json (kernel configs: python -m sgemm_cube.tuning.gpu)")
    m = p.add_argument_group("benchmark matrix (--matrix): the public API against cuBLAS SGEMM")
    m.add_argument("--matrix", action="store_true",
                   help="time sgemm_cube.matmul (auto, backend='cuda', scheme='auto') and SGEMM on "
                        f"{len(matrix_problems())} problems; JSON to <results-dir>/matrix_<gpu>_<time>.json")
    m.add_argument("--only", nargs="+", metavar="TEXT",
                   help="only the problems whose name contains one of these (e.g. 'square' 'linear' 'wide-range')")
    m.add_argument("--rounds", type=positive_int, default=3, help="round-robin do_bench runs per method (median)")
    m.add_argument("--host-ms", type=positive_float, default=50.0,
                   help="GPU work per host loop (ms): sets the number of back-to-back calls")
    m.add_argument("--ref-max-flops", type=positive_float, default=2e12,
                   help="largest float64 reference product; beyond it the error covers the first rows only")
    m.add_argument("--budget-s", type=positive_float, default=330.0,
                   help="after this many seconds the remaining problems are skipped (recorded as such)")
    m.add_argument("--margin", type=positive_float, default=1.0,
                   help="fitting the hybrid rule, the emulation loses where it takes > margin x SGEMM's time")
    md = p.add_argument_group("model benchmark (--model): a TransformerEncoder, native vs sgemm_cube.enabled()")
    md.add_argument("--model", action="store_true",
                    help="run benchmarks/model_bench.py's benchmark (sgemm_cube.cli.bench_model) instead")
    from .bench_model import add_model_arguments

    add_model_arguments(md)


def run(args) -> int:
    """Run the benchmark described by parsed ``args``; returns an exit status."""
    if getattr(args, "model", False):
        from .bench_model import run as run_model

        return run_model(args)
    try:
        torch = _torch()
        import triton  # noqa: F401  (do_bench, and the kernels timed)
    except ImportError as exc:
        print(f"bench_gpu: needs torch and triton ({exc}): pip install 'sgemm_cube[cuda]'", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA GPU", file=sys.stderr)
        return 2
    env = _env()
    print(json.dumps(env), flush=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    from sgemm_cube.backends.cuda.hybrid import device_key

    key = device_key("cuda")
    args.results_dir.mkdir(parents=True, exist_ok=True)

    def save(path, doc):  # after every shape or variant: a run cut short keeps what it measured
        path.write_text(json.dumps(doc, indent=1, default=str) + "\n")

    if getattr(args, "matrix", False):
        return _run_matrix_mode(args, env, key, stamp, save)
    if args.write_config:
        print("bench_gpu: --write-config stores the hybrid rule of --matrix only; kernel configs are measured and "
              "written by python -m sgemm_cube.tuning.gpu (sgemm-cube tune --device cuda --measure)", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    reps_ms = args.reps_ms or 200.0
    if args.overhead:
        host_overhead()
        return 0
    if args.sweep:
        path = args.results_dir / f"sweep_{key}_{stamp}.json"
        sweep = run_sweep(size=args.sweep_size, reps_ms=reps_ms, seed=args.seed,
                          on_row=lambda partial: save(path, dict(env, sweep=partial)))
        winners = sweep_winners(sweep)
        print(f"winners: {json.dumps(winners)}")
        save(path, dict(env, sweep=sweep, winners=winners))
    else:
        path = args.results_dir / f"bench_{key}_{stamp}.json"
        rows = run_benchmark(sizes=args.sizes, rect=not args.no_rect, reps_ms=reps_ms, seed=args.seed,
                             on_row=lambda partial: save(path, dict(env, rows=partial)))
        rule = derive_native_rule(rows)
        slower = [r for r in rows if r["ms"]["auto"] > 1.02 * r["ms"]["sgemm"]]
        print(f"hybrid rule from this run: {rule}; shapes where auto was >2% slower than sgemm "
              f"under the rule in force: {[(r['batch'], r['m'], r['n'], r['k']) for r in slower]}")
        save(path, dict(env, rows=rows, derived_native_rule=rule))
    print(f"wrote {path}")
    return 0


def main(argv=None) -> int:
    """Command-line entry point (``python -m sgemm_cube.cli.bench_gpu --help``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
