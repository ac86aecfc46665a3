"""``sgemm-cube tune``: rank block sizes with the pipeline model of the AscendC
kernels (roofline beside it), plot Fig. 10 and Fig. 5, run measured tuning,
show tuning tables.

Wire it into another argparse program with :func:`add_parser` and
:func:`run`; ``python -m sgemm_cube.tuning.cli ...`` runs it alone.

Examples::

    sgemm-cube tune --device 910a --m 8192 --n 8192 --k 8192     # ranked table (paper's design)
    sgemm-cube tune --device 910a --design kernel                 # this package's kernel
    sgemm-cube tune --device 910a --design package --json         # what sgemm_cube.matmul launches, per pass
    sgemm-cube tune --device 910a --design package --listed 0.01  # ... with 1% of the lines listed (2 bands each)
    sgemm-cube tune --device 910a --design package --listed 1 --bands 3 --json   # every line, 3 bands, per pass
    sgemm-cube tune --device 910a --plot fig10.png                 # Fig. 10 from the model
    sgemm-cube tune --device 910a --plot-fig5 fig5.png             # Fig. 5
    sgemm-cube tune --show                                         # stored tables
    sgemm-cube tune --device cuda --measure --quick --out tuning/tables/
    sgemm-cube tune --device 910a --write-tilings --workers 16     # the npu backend's tiling table
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from typing import Sequence

from sgemm_cube.backends.npu_schedule import TilingError
from sgemm_cube._option_types import output_file, positive_int

from . import pipeline
from .hardware import ProfileError, get_profile, list_profiles, load_profiles
from .model import bm_opt, constraints, kernel_blocking, rank, representative_f, round_bm_opt
from .plots import MissingExtraError, require_matplotlib
from .table import find_tables, format_table, table_dirs

__all__ = ["add_parser", "main", "parse_args", "run"]

_DESCRIPTION = ("Choose SGEMM-cube block sizes: rank the feasible (bm, bk, bn) of an Ascend profile by the "
                "event-driven pipeline model of the kernel (calibrated to the paper's 910A measurements; model "
                "predictions, not measurements), with the roofline of Eq. 8-11 beside it, or measure on a GPU/NPU. "
                "--design package predicts the whole product sgemm_cube.matmul launches on the NPU, every kernel "
                "and pass timed (--json: 'phases').")


def _fraction(text: str) -> float:
    """A number in [0, 1] (``--listed``, ``--special``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1], got {text}")
    return value


def _bands(text: str) -> int:
    """An integer of at least 2 (``--bands``: a listed line spans at least one band window)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"a listed line has at least 2 bands, got {text}")
    return value


def _configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--device", default="910a",
                   help="hardware profile (910a, 910b, a user profile) or 'cuda' (default 910a)")
    p.add_argument("--m", type=positive_int, default=8192, help="rows of A and C (default 8192)")
    p.add_argument("--n", type=positive_int, default=8192, help="columns of B and C (default 8192)")
    p.add_argument("--k", type=positive_int, default=8192, help="reduction length (default 8192)")
    p.add_argument("--top", type=positive_int, default=10, help="rows of the ranked table (default 10)")
    p.add_argument("--sort", choices=("time", "traffic"), default="time",
                   help="rank by the pipeline model's time, or by the roofline's main-memory traffic")
    p.add_argument("--buffering", choices=("double", "single"), default="double",
                   help="with --design paper: the double-buffered pipeline or the single-buffered one of Fig. 6(a)")
    p.add_argument("--terms", type=int, choices=(3, 4), default=3, help="FP16 products per emulated GEMM")
    p.add_argument("--design", choices=("paper", "kernel", "kernel-per-term", "package"), default="paper",
                   help="blocking of the paper's Algorithm 1 (one pass per term; reproduces Eq. 10), of this "
                        "package's AscendC kernel with all terms in one pass (hi and lo resident together, one "
                        "accumulator per term), of that kernel with one pass per term (split and combine "
                        "counted), or 'package': the whole product sgemm_cube.matmul launches on the NPU with "
                        "default options (line statistics, line meta, split with line scaling, the GEMM in "
                        "either mode, combine or epilogue, unscale, the FP32 fix-up of --special lines, the "
                        "read-back of the lines' integers, the band passes of --listed lines), both GEMM modes "
                        "ranked together")
    p.add_argument("--listed", type=_fraction, metavar="FRACTION",
                   help="with --design package: the fraction of rows of A and columns of B that are listed "
                        "(finite, too wide for the split) and computed on the cube by exponent bands (phases "
                        "band_rows, band_cols, band_pairs; default 0; 1 = every line)")
    p.add_argument("--bands", type=_bands, metavar="N",
                   help="with --design package: exponent bands per listed line (default 2, the fewest a listed "
                        "line has)")
    p.add_argument("--special", type=_fraction, metavar="FRACTION",
                   help="with --design package: the fraction of rows and columns holding NaN or an infinity, "
                        "recomputed in FP32 on the vector unit (phases fixup_rows, fixup_cols; default 0)")
    p.add_argument("--scaled", choices=("every", "none"),
                   help="with --design package: every batch has a scaled line, so the split scales and the "
                        "unscale runs (default, the costly case), or none (data that needs no scaling)")
    p.add_argument("--min-l0-intensity", type=float, default=0.5, metavar="FRACTION",
                   help="drop blocks whose bm*bn/(bm+bn) is below this fraction of the best (0 = keep all)")
    p.add_argument("--profiles", metavar="FILE", action="append", default=[],
                   help="extra profile file (JSON or TOML, schema of tuning/profiles/ascend.json)")
    p.add_argument("--list-profiles", action="store_true", help="list the known profiles and exit")
    p.add_argument("--plot", metavar="PNG", type=output_file,
                   help="write Fig. 10 (predicted TFLOP/s over the paper's block grid, single vs double buffering) "
                        "for the profile and --m/--n/--k: the paper's design only (refused with another --design)")
    p.add_argument("--plot-fig5", metavar="PNG", type=output_file,
                   help="write Fig. 5 (N_fused and f against bm*bk) for the profile")
    p.add_argument("--json", action="store_true",
                   help="print the ranked table as JSON (model rows: 'ms' the whole product, 'phases' each "
                        "kernel's ms, 'mode' the GEMM's)")
    p.add_argument("--show", action="store_true", help="print the stored tuning tables and exit")
    p.add_argument("--measure", action="store_true",
                   help="time candidates on the device ('cuda': Triton configs; Ascend: the AscendC kernel)")
    p.add_argument("--quick", action="store_true", help="with --measure on cuda: the 4-minute grid")
    p.add_argument("--out", metavar="DIR", help="with --measure or --write-tilings: folder for the table (default: "
                   "cuda, the user's config folder; Ascend --measure, the user's tiling tables, read before the "
                   "shipped ones; --write-tilings, the shipped sgemm_cube/backends/npu_tilings/)")
    p.add_argument("--write-tilings", action="store_true",
                   help="Ascend: write the chip's tiling table (shape buckets -> tiling, mode and predicted TFLOP/s) "
                        "from the pipeline model, which the npu backend looks up instead of running the model")
    p.add_argument("--workers", type=positive_int, default=1, help="with --write-tilings: processes (default 1)")
    return p


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``tune`` subcommand to an ``argparse`` subparsers object; dispatch with :func:`run`."""
    p = subparsers.add_parser("tune", help="choose block sizes (model ranking, Fig. 10/5, measured tuning)",
                              description=_DESCRIPTION)
    _configure(p)
    p.set_defaults(func=run)
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the options of ``tune`` alone (for ``python -m sgemm_cube.tuning.cli`` and tests)."""
    return _configure(argparse.ArgumentParser(prog="sgemm-cube tune", description=_DESCRIPTION)).parse_args(argv)


def _show(out) -> int:
    found = find_tables()
    if not found:
        print(f"no tuning tables in {', '.join(map(str, table_dirs()))}", file=out)
    for path, table in found:
        print(f"# {path}", file=out)
        print(format_table(table) if not isinstance(table, str) else f"  unusable: {table}", file=out)
    return 0


def _gb(x: float) -> str:
    return f"{x / 1e9:9.3f}"


def _print_header(args, profile, out) -> None:
    c = constraints(profile)
    f_rep = representative_f(profile)
    print(f"{profile.name} ({profile.key}): {profile.ai_cores} cores at {profile.clock_ghz:g} GHz, "
          f"L1 {profile.l1_bytes // 1024} KiB, L0A/L0B {profile.l0a_bytes // 1024}/{profile.l0b_bytes // 1024} KiB, "
          f"L0C {profile.l0c_bytes // 1024} KiB, UB {profile.ub_bytes // 1024} KiB, "
          f"FP16 cube {profile.cube_fp16_tflops:g} TFLOP/s, HBM {profile.hbm_gbps:g} GB/s", file=out)
    print(f"Eq. 10: b* % {c.align} == 0, bm*bk <= {c.max_a_elems}, bk*bn <= {c.max_b_elems}, "
          f"bm*bn*{c.c_bytes_per_element} <= {c.c_budget_bytes} ({c.c_budget_bytes / 1024:g} KiB)", file=out)
    print(f"Eq. 11: bm_opt = sqrt(f L1 / (2 N_core)) = {bm_opt(profile, f_rep):.2f} at median f = {f_rep:.3f} "
          f"(0.5 <= bn/bm <= 2) -> bm = {round_bm_opt(profile, f_rep)}", file=out)


def _print_model(args, profile, design, rows, out) -> None:
    shown = profile
    if design.kind == "kernel":  # Eq. 10 as the kernel's buffers make it
        per_term = bool(rows[0].tiling.per_term) if rows else design.per_term  # package: the first row's mode
        shown = dataclasses.replace(profile, blocking=kernel_blocking(profile, n_terms=args.terms, per_term=per_term))
    _print_header(args, shown, out)
    what = f"{args.design} design" + (f", {design.buffering} buffering" if design.kind == "paper" else "")
    print(f"{args.m} x {args.n} x {args.k}, {args.terms} FP16 products, {what}, ranked by "
          f"{'the pipeline model' if args.sort == 'time' else 'roofline traffic'}:", file=out)
    mixed = args.design == "package"  # both GEMM modes in one ranking: say each row's
    stages = design.kind == "kernel"  # one and two L0C stages in one ranking: say each row's
    print(f"{'#':>3} {'bm':>4} {'bk':>4} {'bn':>4} {'N_fused':>7}{' mode    ' if mixed else ''}"
          f"{' L0C' if stages else ''} {'TFLOP/s':>8} "
          f"{'ms':>8}  {'MTE2':>5} {'MTE1':>5} {'M':>5} {'OUT':>5}  {'roofline':>8} {'traffic GB':>10}", file=out)
    for i, r in enumerate(rows, 1):
        t, b = r.tiling, r.busy
        mode = f" {_mode(t):<8}" if mixed else ""
        mode += f" {t.l0c_stages:3d}" if stages else ""
        print(f"{i:3d} {t.bm:4d} {t.bk:4d} {t.bn:4d} {t.n_fused:7d}{mode} {r.tflops:8.1f} {r.seconds * 1e3:8.3f}  "
              + " ".join(f"{b.get(pipe, 0.0):5.2f}" for pipe in ("MTE2", "MTE1", "M", "OUT"))
              + f"  {r.roofline_tflops:8.1f} {_gb(r.traffic_bytes):>10}", file=out)
    print("MODEL PREDICTIONS (tuning/pipeline.py; docs/ascend_pipeline_model.md), not measurements: TFLOP/s are "
          "FP32-equivalent (2mnk / time) for the whole product; MTE2..OUT the fraction of the GEMM time each pipe "
          "of a core is busy; 'roofline' the bound of Eq. 9 at double buffering"
          + ("; L0C the accumulator sets in L0C (Tiling.l0c_stages)" if design.kind == "kernel" else "") + ".",
          file=out)


def _mode(tiling) -> str:
    return "per_term" if tiling.per_term else "fused"


def _ms(phases: dict) -> dict:
    return {name: seconds * 1e3 for name, seconds in phases.items()}


def _row_prediction(args, profile, design, row) -> pipeline.Prediction:
    """The model's prediction (with its phases) for one ranked row, in the row's GEMM mode."""
    if design.kind == "kernel":
        design = dataclasses.replace(design, per_term=bool(row.tiling.per_term), l0c_stages=row.tiling.l0c_stages)
    return pipeline.predict(profile, args.m, args.n, args.k, row.tiling, design=design)


def _bookkeeping_share(args, profile, pr: pipeline.Prediction) -> float:
    """The share of a package prediction that the guarantee's passes take (against the kernels alone)."""
    alone = pipeline.predict(profile, args.m, args.n, args.k, pr.tiling,
                             design=pipeline.Design("kernel", terms=args.terms, per_term=bool(pr.tiling.per_term),
                                                    l0c_stages=pr.tiling.l0c_stages))
    return 1.0 - alone.seconds / pr.seconds


def _print_package(args, profile, pr: pipeline.Prediction, out) -> None:
    t = pr.tiling
    print(f"sgemm_cube.matmul's tiling (package_pick, as the NPU backend's tiling tables store it): "
          f"({t.bm}, {t.bk}, {t.bn}, {t.n_fused}), {'one pass per term' if t.per_term else 'all terms in one pass'}"
          f"{', two L0C stages' if t.l0c_stages == 2 else ''}: "
          f"{pr.seconds * 1e3:.3f} ms, {pr.tflops:.1f} TFLOP/s, the guarantee's passes "
          f"{_bookkeeping_share(args, profile, pr) * 100:.0f}% of it; {args.listed or 0.0:g} of the lines listed "
          f"({args.bands or 2} bands each), {args.special or 0.0:g} special, "
          f"{'no' if args.scaled == 'none' else 'every'} batch with a scaled line. "
          f"ms per kernel:", file=out)
    print("  " + ", ".join(f"{name} {ms:.3f}" for name, ms in _ms(pr.phases).items()), file=out)


def _print_ranked(args, profile, rows, out) -> None:
    _print_header(args, profile, out)
    print(f"{args.m} x {args.n} x {args.k}, {args.terms} FP16 products, {args.design} design, ranked by {args.sort} "
          f"({args.buffering} buffering):", file=out)
    print(f"{'#':>3} {'bm':>4} {'bk':>4} {'bn':>4} {'N_fused':>7} {'f':>6} {'traffic GB':>10} {'T_comp ms':>9} "
          f"{'T_mem ms':>8} {'TFLOP/s 2buf':>12} {'TFLOP/s 1buf':>12}", file=out)
    for i, r in enumerate(rows, 1):
        print(f"{i:3d} {r.bm:4d} {r.bk:4d} {r.bn:4d} {r.n_fused:7d} {r.f:6.3f} {_gb(r.traffic_bytes):>10} "
              f"{r.t_comp * 1e3:9.3f} {r.t_mem * 1e3:8.3f} {r.tflops_double:12.1f} {r.tflops_single:12.1f}",
              file=out)
    print("TFLOP/s are FP32-equivalent (2mnk / time), roofline upper bounds.", file=out)


def _measure(args, extra, out) -> int:
    if args.device.lower() == "cuda":
        from . import gpu

        argv = (["--quick"] if args.quick else []) + (["--out", args.out] if args.out else [])
        return gpu.main(argv)
    from . import npu

    from . import tilings

    # Says at once (BackendUnavailableError, reported by run()) when no NPU can run the kernel.
    profile = get_profile(args.device, extra=extra)
    table = npu.tune(profile, [(args.m, args.n, args.k)])
    print(format_table(table), file=out)
    # The runtime's table, updated the way the model's rows are written (tuning/tilings.py).
    print(f"wrote {tilings.write_measured(profile, table, directory=args.out, terms=args.terms)}", file=out)
    return 0


def run(args: argparse.Namespace, *, out=None) -> int:
    """Execute ``tune`` with parsed arguments; return the exit status."""
    out = out or sys.stdout
    if args.show:
        return _show(out)
    try:
        extra = {}
        for path in args.profiles:
            extra.update(load_profiles(path))
        if args.list_profiles:
            for key, p in list_profiles(extra=extra).items():
                print(f"{key:>8}  {p.name}", file=out)
            return 0
        if args.measure:
            return _measure(args, extra, out)
        if args.write_tilings:
            from . import tilings

            path = tilings.write_model_table(get_profile(args.device, extra=extra), directory=args.out,
                                             workers=args.workers, progress=True)
            print(f"wrote {path}", file=out)
            return 0
        if args.device.lower() == "cuda":
            return _cuda_info(args, out)
        if args.plot and args.design != "paper":
            raise ValueError(f"--plot draws Fig. 10, the paper's design (single against double buffering); "
                             f"--design {args.design} has no such figure: drop --plot, or use --design paper")
        if args.plot or args.plot_fig5:
            require_matplotlib()  # before the work, not after it
        profile = get_profile(args.device, extra=extra)
        packaged = args.design == "package"
        kernel = args.design.startswith("kernel") or packaged
        for given, option in ((args.listed is not None, "--listed"), (args.scaled is not None, "--scaled"),
                              (args.bands is not None, "--bands"), (args.special is not None, "--special")):
            if given and not packaged:
                raise ValueError(f"{option} applies to --design package (the whole product), not --design "
                                 f"{args.design}")
        if kernel and args.buffering == "single":
            raise ValueError("the kernel design is double-buffered; --buffering single applies to --design paper")
        per_term = args.design == "kernel-per-term"
        if packaged:
            design = pipeline.package(args.listed or 0.0, terms=args.terms, scaled=args.scaled != "none",
                                      bands=args.bands or 2, special=args.special or 0.0)
        else:
            design = pipeline.Design("kernel" if kernel else "paper", args.buffering, args.terms, per_term=per_term,
                                     fused_combine=kernel)
        if profile.pipes is None and packaged:
            raise ValueError(f"profile {profile.key!r} has no 'pipes' table: --design package needs the pipeline "
                             f"model")
        default, model_rows = None, None
        if profile.pipes is None:
            # A user profile without the pipe table: the roofline alone.
            print(f"sgemm-cube tune: note: profile {profile.key!r} has no 'pipes' table; ranking by the roofline",
                  file=sys.stderr)
            if kernel:
                profile = dataclasses.replace(profile, blocking=kernel_blocking(profile, n_terms=args.terms,
                                                                                per_term=per_term))
            rows = rank(profile, args.m, args.n, args.k, n_terms=args.terms, buffering=args.buffering,
                        sort=args.sort, min_l0_intensity=args.min_l0_intensity, top=args.top)
            model_rows = None
        elif packaged:
            model_rows = pipeline.rank_package(profile, args.m, args.n, args.k, listed=design.listed,
                                               terms=args.terms, scaled=design.scaled, bands=design.bands,
                                               special=design.special, top=None,
                                               min_l0_intensity=args.min_l0_intensity, progress=not args.json)
            default = pipeline.predict_package(profile, args.m, args.n, args.k, listed=design.listed,
                                               terms=args.terms, scaled=design.scaled, bands=design.bands,
                                               special=design.special)
        elif kernel:  # one and two L0C stages (pipeline.L0C_STAGES), ranked together
            model_rows = pipeline.rank_stages(profile, args.m, args.n, args.k, design=design, top=None,
                                              min_l0_intensity=args.min_l0_intensity, progress=not args.json)
        else:
            model_rows = pipeline.rank(profile, args.m, args.n, args.k, design=design, top=None,
                                       min_l0_intensity=args.min_l0_intensity, progress=not args.json)
        if model_rows is not None:
            if args.sort == "traffic":
                least = min(r.traffic_bytes for r in model_rows)
                model_rows.sort(key=lambda r: (round(r.traffic_bytes / least, 2), -r.tflops))
            model_rows = model_rows[:args.top]
    except (KeyError, ValueError, ProfileError, RuntimeError, TilingError, MissingExtraError) as exc:
        print(f"sgemm-cube tune: error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    if args.json:
        extra_json = {}
        if model_rows is None:
            rows_json = [r._asdict() for r in rows]
        else:
            rows_json = []
            for r in model_rows:
                pr = _row_prediction(args, profile, design, r)
                rows_json.append({**r.tiling._asdict(), **({"mode": _mode(r.tiling)} if kernel else {}),
                                  "model_tflops": r.tflops, "model_seconds": r.seconds, "ms": pr.seconds * 1e3,
                                  "phases": _ms(pr.phases), "busy": r.busy, "roofline_tflops": r.roofline_tflops,
                                  "traffic_bytes": r.traffic_bytes})
        if default is not None:
            extra_json = {"listed": design.listed, "bands": design.bands, "special": design.special,
                          "scaled": design.scaled,
                          "default": {**default.tiling._asdict(), "mode": _mode(default.tiling),
                                      "model_tflops": default.tflops, "ms": default.seconds * 1e3,
                                      "phases": _ms(default.phases),
                                      "bookkeeping_share": _bookkeeping_share(args, profile, default)}}
        json.dump({"profile": profile.key, "shape": [args.m, args.n, args.k], "design": args.design,
                   "buffering": args.buffering, "ranked_by": "roofline" if model_rows is None else args.sort,
                   "model_predictions": model_rows is not None, **extra_json, "rows": rows_json}, out, indent=1)
        print(file=out)
    elif model_rows is None:
        _print_ranked(args, profile, rows, out)
    else:
        _print_model(args, profile, design, model_rows, out)
        if default is not None:
            _print_package(args, profile, default, out)
    if args.plot:
        from .plots import plot_fig10

        print(f"wrote {plot_fig10(profile, args.plot, m=args.m, n=args.n, k=args.k, terms=args.terms)}", file=out)
    if args.plot_fig5:
        from .plots import plot_fig5

        print(f"wrote {plot_fig5(profile, args.plot_fig5)}", file=out)
    return 0


def _cuda_info(args, out) -> int:
    from .hardware import cuda_profile

    prof = cuda_profile()  # RuntimeError without a GPU, reported by run()
    print(json.dumps(prof), file=out)
    from sgemm_cube.backends.cuda.launch import resolve_config

    cfg = resolve_config(1, args.m, args.n, args.k, "cuda")
    print(f"config for {args.m}x{args.n}x{args.k} (termwise): {cfg}", file=out)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m sgemm_cube.tuning.cli``."""
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
