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
compares kernel variants at one size (``benchmarks/NOTES_gpu.md`` records
why each exists).  ``--write-config`` stores the measured hybrid rule (and
the sweep's winners) in ``sgemm_cube/backends/cuda/configs/<gpu>.json``.

Run on a GPU machine from the repository root::

    sgemm-cube bench                               # the full benchmark
    sgemm-cube bench --sizes 4096 8192 --no-rect
    sgemm-cube bench --sweep --sweep-size 8192
    python -m sgemm_cube.bench_gpu ...             # the same without the console script
"""
from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import platform
import sys
import time

__all__ = ["add_parser", "run", "main", "run_benchmark", "run_sweep", "derive_native_rule",
           "sweep_winners", "host_overhead", "SQUARE_SIZES", "RECT_SHAPES", "SWEEP_CONFIGS"]

ROOT = pathlib.Path(__file__).resolve().parents[1]  # the checkout (for --write-config)
RESULTS_DIR = pathlib.Path("benchmarks") / "results"  # relative to where it runs

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
METHODS = ("sgemm", "tf32", "fp16_fp32", "torch_split", "cube", "api")

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
# Earlier sweeps (results/sweep_h200_*.json, NOTES_gpu.md) also had: 128x64 and
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
    """The "ten-line PyTorch" alternative (gpu.md): split, three cuBLAS GEMMs, termwise sum."""
    a_hi = a.half()
    a_lo = ((a - a_hi.float()) * 2.0 ** sb).half()
    b_hi = b.half()
    b_lo = ((b - b_hi.float()) * 2.0 ** sb).half()
    corr = _mm_fp32_out(a_lo, b_hi) + _mm_fp32_out(a_hi, b_lo)
    return corr * 2.0 ** -sb + _mm_fp32_out(a_hi, b_hi)


def _rel_err(c, ref) -> float:
    torch = _torch()
    c = c.reshape(ref.shape).double()
    if not torch.isfinite(c).all():
        return float("nan")
    return float(torch.linalg.norm((c - ref).flatten()) / torch.linalg.norm(ref.flatten()))


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
    block_k, _ = launch.flush_steps(cfg["flush_k"], cfg["BLOCK_K"])
    row["ms"]["cube_split"] = _bench(lambda: launch.split_operands(a, b, sb=12, cfg=cfg, block_k=block_k), reps_ms)
    row["config"] = cfg
    return row


def derive_native_rule(rows, *, margin: float = 1.0) -> dict:
    """Smallest hybrid thresholds that send every measured loss of the emulation to cuBLAS.

    ``rows`` carry ``batch, m, n, k`` and ``ms["sgemm"], ms["cube"]``.  Among
    thresholds taken from the measured shapes, return the rule
    ``{"min_flops", "min_mn", "min_k"}`` that routes every shape where
    ``cube > margin * sgemm`` to native, and the fewest others.
    """
    def key(r):
        return 2.0 * r["batch"] * r["m"] * r["n"] * r["k"], min(r["m"], r["n"]), r["k"]

    loses = [key(r) for r in rows if r["ms"]["cube"] > margin * r["ms"]["sgemm"]]
    wins = [key(r) for r in rows if r["ms"]["cube"] <= margin * r["ms"]["sgemm"]]
    flops_c = sorted({0.0} | {f * 1.0001 for f, _, _ in loses})
    mn_c = sorted({0} | {mn + 1 for _, mn, _ in loses})
    k_c = sorted({0} | {kk + 1 for _, _, kk in loses})
    best = None
    for fl in flops_c:
        for mn in mn_c:
            for kk in k_c:
                native = lambda s: s[0] < fl or s[1] < mn or s[2] < kk  # noqa: E731
                if not all(native(s) for s in loses):
                    continue
                cost = (sum(native(s) for s in wins), fl, mn, kk)
                if best is None or cost < best[0]:
                    best = (cost, {"min_flops": fl, "min_mn": mn, "min_k": kk})
    return best[1]


def _env():
    torch = _torch()
    import triton

    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda, "python": platform.python_version(),
            "sms": torch.cuda.get_device_properties(0).multi_processor_count,
            "command": " ".join([pathlib.Path(sys.executable).name] + sys.argv),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


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
    from sgemm_cube.backends.cuda.split_kernel import split_operand

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
    for stats in (True, False):  # the statistics' atomics: what they cost
        t = _bench(lambda: [split_operand(x, rows_pad=size, cols_pad=size, k_axis=ax, sb=12, stats=stats)
                            for x, ax in ((a, 1), (b, 0))], reps_ms)
        print(f"split of A and B (stats={stats}): {t:.3f} ms, {4 * size * size * 2 * 2 / t * 1e-6:.0f} GB/s "
              f"(bytes read + written)", flush=True)
        rows.append({"name": f"split stats={stats}", "ms": t})
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
            full = launch.resolve_config(1, size, size, size, a.device, order=order, config=cfg)
            bk, steps = launch.flush_steps(full["flush_k"] if flush_k is None else flush_k, full["BLOCK_K"])
            ops = launch.split_operands(a, b, sb=12, cfg=full, block_k=bk)
            row["gemm_ms"] = _bench(lambda: launch.launch_gemm(ops, out, sb=12, order=order, keep_lo_lo=False,
                                                               cfg=full, block_k=bk, flush_steps=steps), reps_ms)
            row["tflops"] = flops / row["ms"] * 1e-9
            print(f"{name:>22}: {row['tflops']:6.1f} TFLOP/s ({row['ms']:.3f} ms, gemm alone {row['gemm_ms']:.3f} ms)"
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


def add_parser(subparsers, name: str = "bench"):
    """Register the benchmark as ``sgemm-cube <name>``; returns the parser (run with :func:`run`)."""
    p = subparsers.add_parser(name, help="time sgemm_cube's CUDA backend against cuBLAS",
                              description=__doc__.split("\n\n")[0])
    _add_arguments(p)
    p.set_defaults(func=run)
    return p


def _add_arguments(p):
    p.add_argument("--sizes", type=int, nargs="+", default=list(SQUARE_SIZES), help="square sizes")
    p.add_argument("--no-rect", action="store_true", help="skip the rectangular and batched shapes")
    p.add_argument("--reps-ms", type=float, default=200.0, help="timing budget per measurement (ms)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sweep", action="store_true", help="compare kernel variants instead")
    p.add_argument("--overhead", action="store_true", help="profile the host time of one call instead")
    p.add_argument("--sweep-size", type=int, default=8192)
    p.add_argument("--results-dir", type=pathlib.Path, default=RESULTS_DIR, help="where the JSON goes")
    p.add_argument("--write-config", action="store_true",
                   help="store the measured hybrid rule (and the sweep's winners) in "
                        "sgemm_cube/backends/cuda/configs/<gpu>.json")


def run(args) -> int:
    """Run the benchmark described by parsed ``args``; returns an exit status."""
    torch = _torch()
    if not torch.cuda.is_available():
        print("bench_gpu: no CUDA GPU", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    env = _env()
    print(json.dumps(env), flush=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    from sgemm_cube.backends.cuda.hybrid import device_key

    key = device_key("cuda")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    config_path = ROOT / "sgemm_cube" / "backends" / "cuda" / "configs" / f"{key}.json"
    table = json.loads(config_path.read_text()) if config_path.is_file() else {}
    table["device"] = env["device"]

    def save(path, doc):  # after every shape or variant: a run cut short keeps what it measured
        path.write_text(json.dumps(doc, indent=1, default=str) + "\n")

    if args.overhead:
        host_overhead()
        return 0
    if args.sweep:
        path = args.results_dir / f"sweep_{key}_{stamp}.json"
        sweep = run_sweep(size=args.sweep_size, reps_ms=args.reps_ms, seed=args.seed,
                          on_row=lambda partial: save(path, dict(env, sweep=partial)))
        winners = sweep_winners(sweep)
        print(f"winners: {json.dumps(winners)}")
        save(path, dict(env, sweep=sweep, winners=winners))
        for order, cfg in winners.items():
            table[f"gemm_{order}"] = [{"max_flops": None, "config": cfg, "source": path.name}]
    else:
        path = args.results_dir / f"bench_{key}_{stamp}.json"
        rows = run_benchmark(sizes=args.sizes, rect=not args.no_rect, reps_ms=args.reps_ms, seed=args.seed,
                             on_row=lambda partial: save(path, dict(env, rows=partial)))
        rule = derive_native_rule(rows)
        slower = [r for r in rows if r["ms"]["auto"] > 1.02 * r["ms"]["sgemm"]]
        print(f"hybrid rule from this run: {rule}; shapes where auto was >2% slower than sgemm "
              f"under the rule in force: {[(r['batch'], r['m'], r['n'], r['k']) for r in slower]}")
        save(path, dict(env, rows=rows, derived_native_rule=rule))
        table["hybrid"] = dict(rule, source=path.name)
    if args.write_config:
        config_path.parent.mkdir(parents=True, exist_ok=True)
        config_path.write_text(json.dumps(table, indent=1) + "\n")
        print(f"wrote {config_path}")
    print(f"wrote {path}")
    return 0


def main(argv=None) -> int:
    """Command-line entry point (``python -m sgemm_cube.bench_gpu --help``)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
