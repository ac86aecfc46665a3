"""The ``sgemm-cube`` command line and its tooling: demo, bench, tune, accuracy.

Each subcommand lives in its own module; this file only wires them into
:mod:`argparse`.  ``sgemm-cube <command> --help`` describes each one.

* :mod:`sgemm_cube.cli.accuracy` - the papers' accuracy experiments (``sgemm-cube accuracy``);
* :mod:`sgemm_cube.cli.bench_cpu`, :mod:`sgemm_cube.cli.bench_gpu`,
  :mod:`sgemm_cube.cli.bench_model` - speed against native FP32 through the public API
  (``sgemm-cube bench-cpu``, ``sgemm-cube bench``), :mod:`sgemm_cube.cli.records` what their records share;
* :mod:`sgemm_cube.cli.demo` - ``sgemm-cube demo``;
* :mod:`sgemm_cube._option_types` - option types that refuse values a command cannot use;
* ``sgemm-cube tune`` is :mod:`sgemm_cube.tuning.cli`.

The library never imports this package: ``import sgemm_cube`` loads none of it.
"""
from __future__ import annotations

import argparse
import sys

from .._option_types import nonnegative_int, output_folder, positive_int

__all__ = ["main", "build_parser"]

#: The demo's largest --size: a 2**20 x 2**20 float32 matrix is 4 TiB (larger sizes are beyond any memory).
_DEMO_MAX_SIZE = 2 ** 20


def _demo_size(text: str) -> int:
    size = positive_int(text)
    if size > _DEMO_MAX_SIZE:
        raise argparse.ArgumentTypeError(f"must be at most {_DEMO_MAX_SIZE}, got {size} (the demo holds several "
                                          f"N x N matrices; at N = {_DEMO_MAX_SIZE} one is 4 TiB)")
    return size


def _demo(args) -> int:
    from ..backends import BackendUnavailableError
    from .demo import run_demo

    try:
        run_demo(size=args.size, device=args.device, seed=args.seed, repeats=args.repeats)
    except BackendUnavailableError as exc:
        print(f"sgemm-cube demo: {exc}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"sgemm-cube demo: --size {args.size}: its {args.size} x {args.size} matrices "
              f"({args.size ** 2 * 4 / 2 ** 30:.3g} GiB each in float32) do not fit in this machine's memory; "
              f"choose a smaller --size", file=sys.stderr)
        return 2
    return 0


def _bench_cpu(args) -> int:
    from .bench_cpu import run_cpu_benchmark

    run_cpu_benchmark(size=args.size, repeats=args.repeats, out_dir=args.out)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sgemm-cube",
                                     description="FP32-accurate matrix multiply from FP16 matrix engines (SGEMM-cube).")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"sgemm-cube {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="multiply random matrices on the best backend and compare accuracy")
    demo.add_argument("--size", type=_demo_size, default=None, metavar="N",
                      help="M = N = K (default 4096 on a GPU, 512 on the CPU)")
    demo.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                      help="cuda: the Triton kernels on a CUDA GPU; cpu: the CPU arithmetic model; "
                           "auto: cuda where a GPU is usable, else cpu (default: %(default)s)")
    demo.add_argument("--seed", type=nonnegative_int, default=0,
                      help="seed of the random normal inputs (default: %(default)s)")
    demo.add_argument("--repeats", type=positive_int, default=3, metavar="N",
                      help="timed calls per method after one warm-up; the best is shown (default: %(default)s)")
    demo.set_defaults(func=_demo)

    bench = sub.add_parser("bench-cpu", help="time the CPU arithmetic model against numpy.matmul in float32")
    bench.add_argument("--size", type=positive_int, default=1024, metavar="N",
                       help="M = N = K (default: %(default)s)")
    bench.add_argument("--repeats", type=positive_int, default=3, metavar="N",
                       help="timed calls of the model after one warm-up; the best is shown (numpy.matmul: at "
                            "least 5) (default: %(default)s)")
    bench.add_argument("--out", type=output_folder, default=None,
                       help="folder for the JSON record (created; default: print only)")
    bench.set_defaults(func=_bench_cpu)

    from sgemm_cube.tuning.cli import add_parser as add_tune_parser

    from .bench_gpu import add_parser as add_bench_parser

    from .accuracy.cli import add_parser as add_accuracy_parser

    add_bench_parser(sub, name="bench")
    add_tune_parser(sub)
    add_accuracy_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``sgemm-cube`` console script."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
