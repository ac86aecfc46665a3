#!/usr/bin/env python3
"""Per-call time of small products: PyTorch's own call, ``sgemm_cube.matmul`` and the switch.

What small-batch inference pays: back-to-back calls with one synchronisation at the end (host loop,
the median of 5 loops of 2000 calls), for square products up to 512^3 and ``nn.Linear(768, 768)`` on
1-64 tokens, TF32 off; and, with the switch off but its kernels registered, the cost of the crossing
into Python and back alone.  Each call here runs native FP32 under ``backend="auto"`` (the hybrid rule),
so the difference to PyTorch is sgemm_cube's own host work.  The switch's kernels are removed
(``sgemm_cube.switch.restore()``) after each problem, so PyTorch's figures are its own.  ``--profile`` adds the hottest
functions of 2000 ``sgemm_cube.matmul`` calls at 64^3 (cProfile)::

    python benchmarks/small_calls.py --out benchmarks/results      # on a CUDA machine
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import pathlib
import platform
import pstats
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import sgemm_cube  # noqa: E402

CALLS, LOOPS = 2000, 5


def per_call_us(fn) -> float:
    """Median over LOOPS loops of CALLS back-to-back calls, then one synchronisation (microseconds)."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(LOOPS):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / CALLS * 1e6)
    return sorted(times)[LOOPS // 2]


def cases():
    """name -> (torch call, sgemm_cube.matmul call, the switch's call)."""
    out = {}
    for s in (64, 128, 256, 512):
        a, b = torch.randn(s, s, device="cuda"), torch.randn(s, s, device="cuda")
        out[f"matmul {s}^3"] = (lambda a=a, b=b: torch.matmul(a, b), lambda a=a, b=b: sgemm_cube.matmul(a, b),
                                lambda a=a, b=b: torch.matmul(a, b))
    layer = torch.nn.Linear(768, 768, device="cuda")
    for tokens in (1, 8, 32, 64):
        x = torch.randn(tokens, 768, device="cuda")
        with torch.no_grad():
            out[f"nn.Linear 768 on {tokens} tokens"] = (
                lambda x=x: layer(x), lambda x=x: sgemm_cube.matmul(x, layer.weight.T), lambda x=x: layer(x))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, help="directory for the JSON record")
    parser.add_argument("--profile", action="store_true", help="cProfile 2000 sgemm_cube.matmul calls at 64^3")
    args = parser.parse_args(argv)
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    with torch.no_grad():
        for name, (native, api, switched) in cases().items():
            t_native = per_call_us(native)
            t_api = per_call_us(api)
            with sgemm_cube.enabled():
                t_switch = per_call_us(switched)
            # Switch off, kernels still registered: each call crosses into Python and back to PyTorch's
            # kernel, which is the floor of any switch written in Python.
            t_off = per_call_us(switched)
            # Take them out, so that the next problem's PyTorch figure is PyTorch's own.
            sgemm_cube.switch.restore()
            rows.append(dict(problem=name, torch_us=t_native, api_us=t_api, switch_us=t_switch,
                             switch_off_registered_us=t_off))
            print(f"{name:<28} torch {t_native:6.1f} us | sgemm_cube.matmul {t_api:6.1f} us ({t_api / t_native:4.2f}x)"
                  f" | switch {t_switch:6.1f} us ({t_switch / t_native:4.2f}x)"
                  f" | switch off, registered {t_off:6.1f} us ({t_off / t_native:4.2f}x)", flush=True)
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
    if args.out:
        doc = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, python=platform.python_version(),
                   command="python benchmarks/small_calls.py " + " ".join(argv or sys.argv[1:]),
                   date=time.strftime("%Y-%m-%dT%H:%M:%S"), calls=CALLS, loops=LOOPS, rows=rows)
        args.out.mkdir(parents=True, exist_ok=True)
        gpu = torch.cuda.get_device_name().split()[-1].lower()
        path = args.out / f"small_calls_{gpu}_{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
