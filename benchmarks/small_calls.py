#!/usr/bin/env python3
"""Per-call time of small products: PyTorch's own call, ``sgemm_cube.matmul`` and the switch.

What small-batch inference pays: back-to-back calls with one synchronisation at the end (host loop),
for square products up to 512^3 and ``nn.Linear(768, 768)`` on 1-64 tokens, TF32 off.  Each call here
runs native FP32 under ``backend="auto"`` (the hybrid rule), so the difference to PyTorch is
sgemm_cube's own host work.  ``sgemm_cube.matmul`` is compared with ``torch.matmul`` of the same
operands; the switch with PyTorch's call, under its C++ kernels (``sgemm_cube.switch.kernels()``, the
default where they build) and its Python kernels alone (``SGEMM_CUBE_SWITCH_KERNELS=python``), each on,
and off with its kernels registered; the kernels are removed (``sgemm_cube.switch.restore()``) after
each, so PyTorch's figures are its own.  Each figure is the median of 7 rounds of 2000 calls in which
every variant runs once (interleaved: the host's drift hits all alike).  ``--profile`` adds the hottest
functions of 2000 ``sgemm_cube.matmul`` calls at 64^3 (cProfile)::

    python benchmarks/small_calls.py            # on a CUDA machine; the record goes to benchmarks/results
"""
from __future__ import annotations

import argparse
import cProfile
import io
import os
import pathlib
import pstats
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import sgemm_cube  # noqa: E402
from sgemm_cube import switch_kernels  # noqa: E402

from _record import add_out_argument, cuda_setup, write_record  # noqa: E402

CALLS, ROUNDS = 2000, 7


def loop_us(fn) -> float:
    """Per-call time of CALLS back-to-back calls after 50 warm-up calls, then one synchronisation (us)."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(CALLS):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / CALLS * 1e6


def cases():
    """name -> (PyTorch's call, PyTorch's call of sgemm_cube.matmul's product, sgemm_cube.matmul's call);
    the switch is timed on PyTorch's call."""
    out = {}
    for s in (64, 128, 256, 512):
        a, b = torch.randn(s, s, device="cuda"), torch.randn(s, s, device="cuda")
        call = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731
        out[f"matmul {s}^3"] = (call, call, lambda a=a, b=b: sgemm_cube.matmul(a, b))
    layer = torch.nn.Linear(768, 768, device="cuda")
    for tokens in (1, 8, 32, 64):
        x = torch.randn(tokens, 768, device="cuda")
        out[f"nn.Linear 768 on {tokens} tokens"] = (
            lambda x=x: layer(x), lambda x=x: torch.matmul(x, layer.weight.T),
            lambda x=x: sgemm_cube.matmul(x, layer.weight.T))
    return out


def use_kernels(kernels: str) -> None:
    """Make the next enable() register the C++ (``"c++"``) or the Python (``"python"``) kernels."""
    if kernels == "python":
        os.environ[switch_kernels.ENV_VAR] = "python"
    else:
        os.environ.pop(switch_kernels.ENV_VAR, None)
    sgemm_cube.switch.restore()


def one_round(native, native_product, api, kinds) -> dict:
    """Each variant's per-call time, once (a round: the variants interleave, so drifts hit all alike)."""
    times = dict(torch_us=loop_us(native), torch_product_us=loop_us(native_product), api_us=loop_us(api))
    for kernels in kinds:
        label = "cpp" if kernels == "c++" else "python"
        use_kernels(kernels)
        with sgemm_cube.enabled():
            assert sgemm_cube.switch.kernels().language == kernels, sgemm_cube.switch.kernels()
            times[f"switch_{label}_us"] = loop_us(native)
        times[f"switch_{label}_off_registered_us"] = loop_us(native)  # crossing our kernels to PyTorch's
        sgemm_cube.switch.restore()  # PyTorch's next figures are its own
    return times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_out_argument(parser)
    parser.add_argument("--profile", action="store_true", help="cProfile 2000 sgemm_cube.matmul calls at 64^3")
    args = parser.parse_args(argv)
    cuda_setup()
    status = sgemm_cube.switch.kernels()
    kinds = ("c++", "python") if status.language == "c++" else ("python",)
    print(f"the switch's kernels: {status.language} ({status.detail})", flush=True)
    rows = []
    with torch.no_grad():
        for name, calls in cases().items():
            rounds = [one_round(*calls, kinds) for _ in range(ROUNDS)]
            row = dict(problem=name, **{key: statistics.median(r[key] for r in rounds) for key in rounds[0]})
            rows.append(row)
            print(f"{name:<28} torch {row['torch_us']:6.1f} us | matmul {row['api_us'] / row['torch_product_us']:4.2f}x"
                  f" of torch.matmul | " + " | ".join(f"{key[7:-3]} {value / row['torch_us']:4.2f}x"
                                                      for key, value in row.items() if key.startswith("switch_")),
                  flush=True)
    use_kernels("c++")
    if args.profile:
        a = b = torch.randn(64, 64, device="cuda")
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            sgemm_cube.matmul(a, b)
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(18)
        print(text.getvalue())
    path = write_record(args.out, "small_calls", rows, calls=CALLS, rounds=ROUNDS, switch_kernels=status.detail,
                        method="per call: CALLS back-to-back calls then one synchronisation; each figure is the "
                               "median of ROUNDS rounds in which every variant runs once, interleaved; "
                               "sgemm_cube.matmul (api_us) is compared with torch.matmul of the same operands "
                               "(torch_product_us), the switch with PyTorch's call (torch_us)")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
