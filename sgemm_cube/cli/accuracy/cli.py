"""``sgemm-cube accuracy``: the studies from the command line.

:data:`DESCRIPTION` is what ``sgemm-cube accuracy --help`` prints.  The main
``sgemm-cube`` parser calls :func:`add_parser` with its subparsers;
``python -m sgemm_cube.cli.accuracy.cli`` runs :func:`main` alone.  Option
values are checked as they are parsed (:mod:`sgemm_cube._option_types`):
a value a study cannot use stops the command with argparse's usage error
(status 2) before anything runs.
"""
from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
from pathlib import Path

from ..._option_types import (OrderedPair, existing_path, float_at_least, int_in, nonnegative_int, output_folder,
                         positive_int)
from . import condition, exponent_sweep, heatmap, size_sweep
from .data import DISTRIBUTIONS
from .methods import BACKENDS

__all__ = ["DESCRIPTION", "add_parser", "run", "build_parser", "main"]

#: ``sgemm-cube accuracy --help``.
DESCRIPTION = """\
Accuracy studies of the SGEMM-cube and BF16x9 papers, as data files and figures.

    sgemm-cube accuracy exponent-sweep [--exp-range -24 18] [--sb 0 6 12] ...
    sgemm-cube accuracy size-sweep     [--mn-sizes ...] [--k-sizes ...] ...
    sgemm-cube accuracy condition      [--delta-range 10 1e6] [--size 160] ...
    sgemm-cube accuracy heatmap        [--exp-range -32 16] [--m 64 --k 256 --n 64] ...
    sgemm-cube accuracy all            [--preset tiny|small|paper]
    sgemm-cube accuracy plot FILE.json [FILE.csv | REPORT_DIR ...]

Each study compares native FP32, the paper's split as the paper defines it
(scale=None, fixup=False: no scaling, no plain-FP32 fix-up; out of range past
its limit), sgemm_cube with the library's defaults (scaling + fix-up) and,
where the paper shows it, FP16 alone.  Every study takes --out DIR (default
./sgemm_cube_accuracy), --seed, --backend cpu|cuda, --accumulate (CPU model),
--no-plot and --no-progress; it writes DIR/<study>.csv, .json and .png and
prints a Markdown summary.  The data files record the command that reproduces
them; 'sgemm-cube accuracy plot' redraws their figures.  The figures need
matplotlib (pip install 'sgemm_cube[plot]'); without it the data files are
written and the figures skipped.

'sgemm-cube accuracy STUDY --help' describes each study and its options.
"""

#: Offset exponents: FP32 holds 2**-149 .. 2**128; beyond +-1000 every input is 0 or infinite.
_EXPONENT = int_in(-1000, 1000, " (FP32 holds 2^-149 .. 2^128)")

_STUDIES = {module.STUDY: module for module in (exponent_sweep, size_sweep, condition, heatmap)}
_ORDERS = ("termwise", "elementwise")


def _study_fn(module):
    return getattr(module, f"{module.STUDY.replace('-', '_')}_study")


def _common(parser: argparse.ArgumentParser, *, out_default: str = "sgemm_cube_accuracy") -> None:
    parser.add_argument("--out", type=output_folder, default=out_default,
                        help="output folder (created; default: %(default)s)")
    parser.add_argument("--seed", type=nonnegative_int, default=0,
                        help="seed of all random data (default: %(default)s)")
    parser.add_argument("--backend", choices=BACKENDS, default="cpu",
                        help="cpu: NumPy arrays and the CPU arithmetic model; cuda: torch CUDA tensors, the Triton "
                             "kernels and cuBLAS (default: %(default)s)")
    parser.add_argument("--accumulate", choices=["cube16", "sequential"], default=None,
                        help="FP32 accumulation model of the CPU backend (default: cube16)")
    parser.add_argument("--no-plot", action="store_true",
                        help="write the data files only (without matplotlib the figures are skipped anyway)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _study_options(parser: argparse.ArgumentParser, module) -> None:
    """One option per keyword of the study function, with the function's default."""
    d = {name: p.default for name, p in inspect.signature(_study_fn(module)).parameters.items()}
    count = dict(type=positive_int, metavar="N")

    def opt(name, help_text, **kw):
        parser.add_argument("--" + name.replace("_", "-"), dest=name, default=d[name],
                            help=f"{help_text} (default: %(default)s)", **kw)

    if "exp_range" in d:
        opt("exp_range", "first and last offset exponent e, inclusive (LO <= HI)", type=_EXPONENT, nargs=2,
            metavar=("LO", "HI"), action=OrderedPair)
        opt("exp_step", "step between exponents", **count)
    for name in ("m", "k", "n"):
        if name in d:
            opt(name, f"{name.upper()} of the product", **count)
    sb = int_in(0, 24, " (the paper uses 0, 6 or 12)")
    if module is exponent_sweep:
        opt("sb", "scaling exponents of the paper's split", type=sb, nargs="+", metavar="SB")
    elif "sb" in d:
        opt("sb", "scaling exponent of the paper's split", type=sb, metavar="SB")
    if "orders" in d:
        opt("orders", "combination orders of the paper's split", nargs="+", choices=_ORDERS)
    if "order" in d:
        opt("order", "combination order of the paper's split", choices=_ORDERS)
    if "scheme" in d:
        opt("scheme", "fp16x3: the paper's split (--sb, --order; scale=None, fixup=False) beside sgemm_cube's "
            "defaults; auto: sgemm_cube's defaults alone (power-of-two scaling, and plain-FP32 lines where the "
            "split cannot hold the data)", choices=["fp16x3", "auto"])
    if "distributions" in d:
        opt("distributions", "input distributions", nargs="+", choices=list(DISTRIBUTIONS))
    if "distribution" in d:
        opt("distribution", "input distribution", choices=list(DISTRIBUTIONS))
    if module is size_sweep:
        opt("mn_sizes", "M = N values of the first sweep", type=positive_int, nargs="+", metavar="N")
        opt("k_fixed", "K of the first sweep", **count)
        opt("k_sizes", "K values of the second sweep", type=positive_int, nargs="+", metavar="K")
        opt("mn_fixed", "M = N of the second sweep", **count)
        opt("exponent", "offset exponent of the inputs", type=_EXPONENT, metavar="E")
    if module is condition:
        opt("delta_range", "smallest and largest requested condition number (1 <= LO <= HI)",
            type=float_at_least(1.0), nargs=2, metavar=("LO", "HI"), action=OrderedPair)
        opt("delta_count", "number of condition numbers, log-spaced", **count)
        opt("size", "M = K = N of every product", **count)
    if "trials" in d:
        opt("trials", "independent samples averaged per point", **count)


def _plain(doc: str) -> str:
    """A docstring as help text: reStructuredText roles and literals as plain words."""
    doc = re.sub(r":[a-z]+:`~?(?:[\w.]+\.)?([^`]+)`", r"\1", doc)
    return doc.replace("``", "")


def _add_studies(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="accuracy_command", required=True, metavar="STUDY")
    for name, module in _STUDIES.items():
        summary = inspect.getdoc(module).splitlines()[0]
        p = sub.add_parser(name, help=summary, description=_plain(inspect.getdoc(module)),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        _study_options(p, module)
        _common(p)
    p = sub.add_parser("all", help="every study at once: data, PNGs and summary.md in --out",
                       description=_plain(inspect.getdoc(sys.modules[f"{__package__}.report"])),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=["tiny", "small", "paper"], default="small",
                   help="sizes: tiny (seconds), small (minutes on 2 CPU cores), paper (the papers' sizes, for a GPU)")
    _common(p, out_default="sgemm_cube_accuracy_report")
    p = sub.add_parser("plot", help="redraw the PNGs of data files, or of a report folder and its summary.md",
                       description="Redraw the figures of data files written by a study (the PNG goes next to "
                                   "each file, or into --out), or of report folders written by 'all' (their "
                                   "PNGs and summary.md).  Needs matplotlib: pip install 'sgemm_cube[plot]'.")
    p.add_argument("files", nargs="+", type=existing_path, metavar="FILE",
                   help=".json or .csv files, or folders written by 'all'")
    p.add_argument("--out", type=output_folder, default=None,
                   help="folder of the PNGs, and of a report folder's summary.md (created; default: next to each "
                        "file, into each report folder)")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``accuracy`` subcommand to the ``sgemm-cube`` subparsers; it runs :func:`run`."""
    parser = subparsers.add_parser("accuracy", help="accuracy studies of the papers: CSV, JSON and PNG",
                                   description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_studies(parser)
    parser.set_defaults(func=run)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """Stand-alone parser of the ``accuracy`` subcommands."""
    parser = argparse.ArgumentParser(prog="sgemm-cube accuracy", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_studies(parser)
    return parser


def study_kwargs(args: argparse.Namespace) -> dict:
    """The study function's keyword arguments from parsed options (for a study subcommand)."""
    fn = _study_fn(_STUDIES[args.accuracy_command])
    kwargs = {name: getattr(args, name) for name in inspect.signature(fn).parameters if hasattr(args, name)}
    for name, value in kwargs.items():
        if isinstance(value, list):
            kwargs[name] = tuple(value)
    kwargs["progress"] = not args.no_progress
    return kwargs


def run(args: argparse.Namespace) -> int:
    """Run the parsed ``accuracy`` subcommand; returns the exit status.

    2: the backend cannot run here, or ``plot`` without matplotlib; 1: a
    file given to ``plot`` is not study data.  One line on stderr says why.
    """
    from ...backends import BackendUnavailableError
    from .plotting import PlotsUnavailable

    try:
        return _run(args)
    except (BackendUnavailableError, PlotsUnavailable) as exc:
        print(f"sgemm-cube accuracy: {exc}", file=sys.stderr)
        return 2


def _skipped_plots(out) -> None:
    """Say on stderr that the figures were skipped (matplotlib missing) and how to draw them later."""
    from .plotting import matplotlib_missing

    print(f"sgemm-cube accuracy: figures skipped: {matplotlib_missing()}; the data files are complete: draw the "
          f"figures later with 'sgemm-cube accuracy plot {out}'", file=sys.stderr)


def _plot_files(args: argparse.Namespace) -> int:
    """``plot``: redraw the figure of each data file and report folder."""
    from .io import load
    from .plotting import plot, require_matplotlib
    from .report import rebuild_report

    require_matplotlib()
    for path in args.files:
        try:
            if path.is_dir():  # a report folder: every figure and summary.md
                print(rebuild_report(path, out=args.out))
                continue
            data = load(path)
        except KeyError as exc:
            return _not_study_data(f"{path}: not a file written by a study (it has no {exc} entry)")
        except json.JSONDecodeError as exc:
            return _not_study_data(f"{path}: not a file written by a study (invalid JSON: {exc})")
        except (OSError, ValueError) as exc:  # not .json/.csv, no '# study:' line, unreadable, a folder without data
            return _not_study_data(str(exc) if str(path) in str(exc) else f"{path}: {exc}")
        png = (Path(args.out) if args.out else path.parent) / (path.stem + ".png")
        print(plot(data, png))
    return 0


def _not_study_data(message: str) -> int:
    print(f"sgemm-cube accuracy plot: {message}", file=sys.stderr)
    return 1


def _run(args: argparse.Namespace) -> int:
    from .io import save
    from .plotting import matplotlib_missing

    command = args.accuracy_command
    if command == "plot":
        return _plot_files(args)
    plots = not args.no_plot and matplotlib_missing() is None
    if command == "all":
        from .report import run_all

        summary = run_all(out_dir=args.out, preset=args.preset, seed=args.seed, backend=args.backend,
                          accumulate=args.accumulate, plot=plots, progress=not args.no_progress)
        print(f"report: {summary}")
        if not plots and not args.no_plot:
            _skipped_plots(args.out)
        return 0
    module = _STUDIES[command]
    data = _study_fn(module)(**study_kwargs(args))
    name = command.replace("-", "_")
    paths = save(data, args.out, name)
    if plots:
        from .plotting import plot

        paths["png"] = plot(data, Path(args.out) / f"{name}.png")
    print(module.summarize(data))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    if not plots and not args.no_plot:
        _skipped_plots(paths["json"])
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m sgemm_cube.cli.accuracy.cli ARGS`` = ``sgemm-cube accuracy ARGS``."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
