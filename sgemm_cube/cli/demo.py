"""``sgemm-cube demo``: the package's main job in one command.

Multiplies random normal FP32 matrices on the best backend available here
(the Triton kernels on a CUDA GPU, otherwise the CPU arithmetic model) and
prints time and relative error vs float64 of:

* sgemm_cube with the library's defaults (sb = 12, power-of-two scaling of
  the lines that need it, plain-FP32 fix-up of those the split cannot
  hold), termwise and elementwise;
* the paper's split as is, sb = 0 without scaling or fix-up
  (``scale=None, fixup=False``), termwise and elementwise: on normal data
  its error is close to sb = 12's (only entries far below a line's largest
  lose bits, and they weigh little in the product); the accuracy studies
  (``sgemm-cube accuracy exponent-sweep``) show where sb matters;
* native FP32 and plain FP16 (FP32 accumulation) on the same data.

Each row's label names the options it runs.
"""
from __future__ import annotations

import functools
import time

import numpy as np

from ..api import matmul
from ..backends import BackendUnavailableError, available_backends
from ..metrics import reference_matmul64, relative_error

__all__ = ["run_demo", "format_table", "best_time"]

# What the rows' labels say about the options they run.
DEFAULTS = "defaults: scaling + fix-up"
SCALED = "scaling + fix-up"
UNPROTECTED = "scale=None, fixup=False"


def format_table(rows: list[dict], columns: list[str]) -> str:
    """Plain-text table of ``rows`` (dicts) with the given column keys."""
    cells = [[str(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
    return "\n".join([line, rule, *body])


def _format_row(values, widths) -> str:
    return "  ".join(str(v).ljust(w) for v, w in zip(values, widths)).rstrip()


def best_time(fn, repeats: int, sync=None):
    """Best wall time of ``repeats`` calls after one warm-up (synchronising the device)."""
    result = fn()
    best = float("inf")
    for _ in range(repeats):
        if sync:
            sync()
        t0 = time.perf_counter()
        result = fn()
        if sync:
            sync()
        best = min(best, time.perf_counter() - t0)
    return result, best


def _has_cuda_gpu() -> bool:
    """A real GPU (the cuda backend also runs on Triton's CPU interpreter, far too slowly for a demo)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def _plain_fp16(a, b):
    """fp16(a) @ fp16(b) with FP32 accumulation: what an FP16 engine gives alone."""
    if isinstance(a, np.ndarray) or a.device.type == "cpu":  # the CPU model (torch has no FP16->FP32 mm there)
        from sgemm_cube.cpu_fallback import accumulate_product

        a, b = (x if isinstance(x, np.ndarray) else x.detach().numpy() for x in (a, b))
        return accumulate_product(a.astype(np.float16), b.astype(np.float16))
    import torch

    try:
        return torch.mm(a.half(), b.half(), out_dtype=torch.float32)
    except TypeError:  # torch without out_dtype
        return torch.mm(a.half(), b.half()).float()


def run_demo(*, size: int | None = None, device: str = "auto", seed: int = 0, repeats: int = 3,
             print_fn=None) -> list[dict]:
    """Run the demo and print its table, each row as soon as it is measured; returns the rows.

    Parameters
    ----------
    size : int, optional
        M = N = K.  Default 4096 on a GPU, 512 on the CPU.
    device : {"auto", "cpu", "cuda"}
        Where to compute; ``"auto"`` takes CUDA when the cuda backend can run.
    seed : int
        Seed of the random normal inputs.
    repeats : int
        Timed repetitions (the best is reported) after one warm-up.
    print_fn : callable, optional
        Receives each line of the table (default: :func:`print`, flushed).

    Raises
    ------
    ValueError
        ``size`` or ``repeats`` is below 1, or ``device`` is unknown.
    BackendUnavailableError
        ``device="cuda"`` and no CUDA GPU can run the kernels here (the
        message says what is missing).
    """
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}; choose one of ['auto', 'cpu', 'cuda']")
    for name, value in (("size", size), ("repeats", repeats)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    status = available_backends()
    if device == "auto":
        device = "cuda" if status.get("cuda") == "available" and _has_cuda_gpu() else "cpu"
    elif device == "cuda":
        if status.get("cuda") != "available":
            raise BackendUnavailableError(f"sgemm_cube backend 'cuda' is unavailable: {status.get('cuda')}")
        if not _has_cuda_gpu():  # the Triton interpreter (TRITON_INTERPRET=1) without a GPU
            raise BackendUnavailableError("the demo's cuda device needs a CUDA GPU (torch.cuda.is_available() is "
                                          "False; Triton's interpreter is far too slow for the demo's sizes)")
    if size is None:
        size = 4096 if device == "cuda" else 512
    rng = np.random.default_rng(seed)
    a_np = rng.standard_normal((size, size), dtype=np.float32)
    b_np = rng.standard_normal((size, size), dtype=np.float32)
    ref = reference_matmul64(a_np, b_np)
    sync = None
    if device == "cuda":
        import torch

        a, b = torch.from_numpy(a_np).cuda(), torch.from_numpy(b_np).cuda()
        sync = torch.cuda.synchronize
        engine = "cuda"
    else:
        a, b = a_np, b_np
        engine = "cpu"
    # sb=0 as the paper's split: with the defaults, lines of normal data that do not fit sb=0's range would
    # be scaled or computed in plain FP32, and the row would be sb=12's under another name.
    paper = dict(scale=None, fixup=False)
    variants = [
        (f"sgemm_cube sb=12 termwise ({DEFAULTS})", engine, lambda: matmul(a, b, 12, backend=engine)),
        (f"sgemm_cube sb=12 elementwise ({SCALED})", engine,
         lambda: matmul(a, b, 12, order="elementwise", backend=engine)),
        (f"paper's split sb=0 termwise ({UNPROTECTED})", engine, lambda: matmul(a, b, 0, backend=engine, **paper)),
        (f"paper's split sb=0 elementwise ({UNPROTECTED})", engine,
         lambda: matmul(a, b, 0, order="elementwise", backend=engine, **paper)),
        ("native FP32", "native", lambda: matmul(a, b, backend="native")),
        ("plain FP16 (FP32 accumulation)", "fp16", lambda: _plain_fp16(a, b)),
    ]
    flops = 2.0 * size ** 3
    columns = ["method", "backend", "shape", "time_ms", "GFLOP/s", "rel_error_vs_fp64"]
    known = {"method": [name for name, _, _ in variants], "backend": [backend for _, backend, _ in variants],
             "shape": [f"{size}x{size}x{size}"]}
    widths = [max(len(c), 9, *(len(v) for v in known.get(c, ()))) for c in columns]
    say = print_fn or functools.partial(print, flush=True)  # each row as it finishes: the CPU model takes a while
    say(f"sgemm_cube demo on {device} (random normal FP32, seed {seed}); backends: "
        + ", ".join(f"{k}={'yes' if v == 'available' else 'no'}" for k, v in status.items()))
    if device == "cpu":
        say("The CPU backend is an exact arithmetic model of the FP16 engine, slow by design (tens of times "
            "numpy.matmul): its times are not the speed of sgemm_cube on a GPU or NPU.")
    say(_format_row(columns, widths))
    say(_format_row(["-" * w for w in widths], widths))
    rows = []
    for name, backend, fn in variants:
        c, seconds = best_time(fn, repeats, sync)
        row = {"method": name, "backend": backend, "shape": f"{size}x{size}x{size}",
               "time_ms": f"{seconds * 1e3:.2f}", "GFLOP/s": f"{flops / seconds / 1e9:.1f}",
               "rel_error_vs_fp64": f"{relative_error(c, ref):.2e}"}
        rows.append(row)
        say(_format_row([row[c] for c in columns], widths))
    return rows
