"""``sgemm-cube accuracy``: the studies from the command line.

::

    sgemm-cube accuracy exponent-sweep [--exp-range -24 18] [--sb 0 6 12] ...
    sgemm-cube accuracy size-sweep     [--mn-sizes ...] [--k-sizes ...] ...
    sgemm-cube accuracy condition      [--delta-range 10 1e6] [--size 160] ...
    sgemm-cube accuracy heatmap        [--exp-range -32 16] [--m 64 --k 256 --n 64] ...
    sgemm-cube accuracy all            [--preset tiny|small|paper]
    sgemm-cube accuracy plot FILE.json [FILE.csv | REPORT_DIR ...]

Every study takes ``--out DIR`` (default ``./sgemm_cube_accuracy``),
``--seed``, ``--backend cpu|cuda``, ``--accumulate`` (CPU model),
``--no-plot`` and ``--no-progress``; it writes ``DIR/<study>.csv``,
``.json`` and ``.png`` and prints a Markdown summary.  A study option
``--name`` is the study function's keyword ``name`` (same default), which
is how the data files record the command that reproduces them.

Wiring: the main ``sgemm-cube`` parser calls :func:`add_parser` with its
subparsers; ``python -m sgemm_cube.cli.accuracy.cli`` runs :func:`main` alone.
"""
from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

from . import condition, exponent_sweep, heatmap, size_sweep
from .data import DISTRIBUTIONS
from .methods import BACKENDS

__all__ = ["add_parser", "run", "build_parser", "main"]

_STUDIES = {module.STUDY: module for module in (exponent_sweep, size_sweep, condition, heatmap)}
_ORDERS = ("termwise", "elementwise")


def _study_fn(module):
    return getattr(module, f"{module.STUDY.replace('-', '_')}_study")


def _common(parser: argparse.ArgumentParser, *, out_default: str = "sgemm_cube_accuracy") -> None:
    parser.add_argument("--out", default=out_default, help="output folder (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of all random data (default: %(default)s)")
    parser.add_argument("--backend", choices=BACKENDS, default="cpu",
                        help="cpu: NumPy arrays and the CPU arithmetic model; cuda: torch CUDA tensors, the Triton "
                             "kernels and cuBLAS (default: %(default)s)")
    parser.add_argument("--accumulate", choices=["cube16", "sequential"], default=None,
                        help="FP32 accumulation model of the CPU backend (default: cube16)")
    parser.add_argument("--no-plot", action="store_true", help="write the data files only (no matplotlib)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _study_options(parser: argparse.ArgumentParser, module) -> None:
    """One option per keyword of the study function, with the function's default."""
    d = {name: p.default for name, p in inspect.signature(_study_fn(module)).parameters.items()}
    ints = dict(type=int, metavar="N")

    def opt(name, help_text, **kw):
        parser.add_argument("--" + name.replace("_", "-"), dest=name, default=d[name],
                            help=f"{help_text} (default: %(default)s)", **kw)

    if "exp_range" in d:
        opt("exp_range", "first and last offset exponent e, inclusive", type=int, nargs=2, metavar=("LO", "HI"))
        opt("exp_step", "step between exponents", **ints)
    for name in ("m", "k", "n"):
        if name in d:
            opt(name, f"{name.upper()} of the product", **ints)
    if module is exponent_sweep:
        opt("sb", "scaling exponents of sgemm_cube", type=int, nargs="+", metavar="SB")
    elif "sb" in d:
        opt("sb", "scaling exponent of sgemm_cube", type=int, metavar="SB")
    if "orders" in d:
        opt("orders", "combination orders of sgemm_cube", nargs="+", choices=_ORDERS)
    if "order" in d:
        opt("order", "combination order of sgemm_cube", choices=_ORDERS)
    if "scheme" in d:
        opt("scheme", "sgemm_cube's split: fp16x3 as is (the paper's), or auto (the library's defaults: "
            "power-of-two scaling and plain-FP32 lines where the split cannot hold the data)",
            choices=["fp16x3", "auto"])
    if "distributions" in d:
        opt("distributions", "input distributions", nargs="+", choices=list(DISTRIBUTIONS))
    if "distribution" in d:
        opt("distribution", "input distribution", choices=list(DISTRIBUTIONS))
    if module is size_sweep:
        opt("mn_sizes", "M = N values of the first sweep", type=int, nargs="+", metavar="N")
        opt("k_fixed", "K of the first sweep", **ints)
        opt("k_sizes", "K values of the second sweep", type=int, nargs="+", metavar="K")
        opt("mn_fixed", "M = N of the second sweep", **ints)
        opt("exponent", "offset exponent of the inputs", **ints)
    if module is condition:
        opt("delta_range", "smallest and largest requested condition number", type=float, nargs=2,
            metavar=("LO", "HI"))
        opt("delta_count", "number of condition numbers, log-spaced", **ints)
        opt("size", "M = K = N of every product", **ints)
    if "trials" in d:
        opt("trials", "independent samples averaged per point", **ints)


def _add_studies(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="accuracy_command", required=True, metavar="STUDY")
    for name, module in _STUDIES.items():
        summary = inspect.getdoc(module).splitlines()[0]
        p = sub.add_parser(name, help=summary, description=inspect.getdoc(module),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        _study_options(p, module)
        _common(p)
    p = sub.add_parser("all", help="every study at once: data, PNGs and summary.md in --out",
                       description=inspect.getdoc(sys.modules[f"{__package__}.report"]),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=["tiny", "small", "paper"], default="small",
                   help="sizes: tiny (seconds), small (minutes on 2 CPU cores), paper (the papers' sizes, for a GPU)")
    _common(p, out_default="sgemm_cube_accuracy_report")
    p = sub.add_parser("plot", help="redraw the PNGs of data files, or of a report folder and its summary.md")
    p.add_argument("files", nargs="+", type=Path, help=".json or .csv files, or folders written by 'all'")
    p.add_argument("--out", default=None, help="folder of the PNGs (default: next to each file)")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add the ``accuracy`` subcommand to the ``sgemm-cube`` subparsers; it runs :func:`run`."""
    parser = subparsers.add_parser("accuracy", help="accuracy studies of the papers: CSV, JSON and PNG",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_studies(parser)
    parser.set_defaults(func=run)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """Stand-alone parser of the ``accuracy`` subcommands."""
    parser = argparse.ArgumentParser(prog="sgemm-cube accuracy", description=__doc__,
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
    """Run the parsed ``accuracy`` subcommand; returns the exit status (2: the backend cannot run here)."""
    from ...backends import BackendUnavailableError

    try:
        return _run(args)
    except BackendUnavailableError as exc:
        print(f"sgemm-cube accuracy: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from .io import load, save

    command = args.accuracy_command
    if command == "plot":
        from .plotting import plot
        from .report import rebuild_report

        for path in args.files:
            if path.is_dir():  # a report folder: every figure and summary.md
                print(rebuild_report(path))
                continue
            png = (Path(args.out) if args.out else path.parent) / (path.stem + ".png")
            print(plot(load(path), png))
        return 0
    if command == "all":
        from .report import run_all

        summary = run_all(out_dir=args.out, preset=args.preset, seed=args.seed, backend=args.backend,
                          accumulate=args.accumulate, plot=not args.no_plot, progress=not args.no_progress)
        print(f"report: {summary}")
        return 0
    module = _STUDIES[command]
    data = _study_fn(module)(**study_kwargs(args))
    name = command.replace("-", "_")
    paths = save(data, args.out, name)
    if not args.no_plot:
        from .plotting import plot

        paths["png"] = plot(data, Path(args.out) / f"{name}.png")
    print(module.summarize(data))
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m sgemm_cube.cli.accuracy.cli ARGS`` = ``sgemm-cube accuracy ARGS``."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
