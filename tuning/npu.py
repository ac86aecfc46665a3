"""Measured tuning on an Ascend NPU: time the model's best tilings with the real kernel.

UNTESTED ON HARDWARE: no NPU, CANN toolkit or torch_npu exists on the
development and CI machines.  The driver logic is tested with an injected
runner; on an NPU machine run::

    python -m sgemm_cube.tuning.npu --device 910b --top 8

For each shape it ranks the blocks feasible for this package's kernel in
each of its two GEMM modes (all terms in one pass, one pass per term:
:func:`sgemm_cube.tuning.model.rank` with :func:`sgemm_cube.tuning.model.kernel_blocking`),
runs the ``top`` best of each mode through the AscendC kernel, checks each result against
a float64 reference (relative Frobenius error at most ``max_error_ratio``
times the native FP32 product's on 910B, or than 1e-5 where no native FP32
cube exists), times the accepted ones, and stores the fastest tiling per
shape in the user's copy of the npu backend's tiling table
(:func:`sgemm_cube.tuning.tilings.write_measured`), where
:func:`sgemm_cube.backends.npu.choose_tiling` finds it.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any, Callable, Sequence

from sgemm_cube.backends.npu_schedule import Status, buffer_plan_status, capacity_from_profile, fit_tiling

from .hardware import Profile, get_profile
from .model import Tiling, kernel_blocking, rank
from .table import TuningTable, bucket

__all__ = ["main", "tune"]

_SHAPES = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192))
_ABS_ERROR_LIMIT = 1e-5  # FP32-level relative error, used where no native FP32 product runs


def _default_runner() -> Callable[..., Any]:
    """The AscendC backend's matmul taking a ``tiling=`` override (the Ascend helper's contract).

    Raises :class:`sgemm_cube.backends.BackendUnavailableError` at once, before any work, where the
    backend cannot run (no torch_npu, CANN toolkit or built extension: no NPU to measure on).
    """
    from sgemm_cube.backends import BackendUnavailableError

    try:
        from sgemm_cube.backends import npu as backend
    except ImportError as exc:
        raise BackendUnavailableError("measured NPU tuning needs the AscendC backend (sgemm_cube.backends.npu), "
                                      f"which failed to import: {exc}") from exc
    missing = backend.unavailable_reason()
    if missing:
        raise BackendUnavailableError("measured NPU tuning needs an Ascend NPU with the AscendC backend, which "
                                      f"cannot run here: {missing}")
    matmul = backend.matmul

    def run(a, b, out, tiling: Tiling) -> None:
        matmul(a, b, sb=12, order="termwise", keep_lo_lo=False, out=out, tiling=tiling)

    return run


def _wall_ms(fn: Callable[[], Any], sync: Callable[[], Any], reps: int = 10) -> float:
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[reps // 2]


def tune(
    profile: Profile | str,
    shapes: Sequence[tuple[int, int, int]] = _SHAPES,
    *,
    top: int = 8,
    device: Any = "npu",
    runner: Callable[..., Any] | None = None,
    sync: Callable[[], Any] | None = None,
    native_available: bool | None = None,
    max_error_ratio: float = 1.0,
    seed: int = 0,
    progress: bool = True,
) -> TuningTable:
    """Time the ``top`` model-ranked tilings of each shape and kernel mode, each with one and (where both
    accumulator sets fit L0C) two L0C stages; return the table (not saved).

    ``runner(a, b, out, tiling)`` computes the emulated product of 3-D
    operands into ``out``; ``sync()`` waits for the device (default
    ``torch.npu.synchronize``).  ``native_available`` says whether the native
    FP32 product is a fair accuracy baseline (default: the profile has an
    FP32 cube).  Without ``runner`` and where the AscendC backend cannot run,
    raises :class:`sgemm_cube.backends.BackendUnavailableError` before any work.
    """
    p = get_profile(profile)
    runner = runner or _default_runner()
    import torch
    from tqdm.auto import tqdm

    if sync is None:
        sync = torch.npu.synchronize if hasattr(torch, "npu") else (lambda: None)
    native = p.cube_fp32_tflops is not None if native_available is None else native_available
    table = TuningTable(p.name, "ascend", environment={"torch": torch.__version__, "profile": p.key})
    gen = torch.Generator(device="cpu").manual_seed(seed)
    bar = tqdm(total=len(shapes) * 4 * top, desc=f"tuning {p.name}", unit="tiling", disable=not progress,
               file=sys.stderr)
    try:
        for m, n, k in shapes:
            a = torch.randn(1, m, k, generator=gen)
            b = torch.randn(1, k, n, generator=gen)
            ref = torch.matmul(a.double(), b.double())
            a, b = a.to(device), b.to(device)
            limit = _ABS_ERROR_LIMIT
            if native:
                c32 = torch.matmul(a, b).cpu().double()
                limit = max_error_ratio * float(torch.linalg.norm(c32 - ref) / torch.linalg.norm(ref))
            out = torch.empty(1, m, n, device=device)
            cap = capacity_from_profile(p)
            best = None
            rows = [(row, per_term) for per_term in (False, True)
                    for row in rank(p, m, n, k, top=top, blocking=kernel_blocking(p, per_term=per_term))]
            candidates = []
            for row, per_term in rows:
                # the kernel's K groups (two-level accumulation): what npu.choose_tiling would run
                tiling = fit_tiling(cap, Tiling(row.bm, row.bk, row.bn, row.n_fused, per_term), k=k, terms=3)
                candidates.append((row, tiling))
                # the same blocks with two accumulator sets in L0C, where both fit
                if buffer_plan_status(cap, tiling.bm, tiling.bk, tiling.bn, tiling.n_fused, 3, tiling.per_term,
                                      2)[0] == Status.OK:
                    candidates.append((row, tiling._replace(l0c_stages=2)))
            for row, tiling in candidates:
                bar.update(1)
                try:
                    runner(a, b, out, tiling)
                    sync()
                    c = out.cpu().double()
                    err = float(torch.linalg.norm(c - ref) / torch.linalg.norm(ref))
                    if not math.isfinite(err) or err > limit:
                        continue
                    ms = _wall_ms(lambda: runner(a, b, out, tiling), sync)
                except Exception as exc:  # a tiling the kernel rejects: try the next one
                    bar.write(f"{m}x{n}x{k} {tiling}: {type(exc).__name__}: {exc}")
                    continue
                if best is None or ms < best[0]:
                    best = (ms, tiling, err, row)
            if best is None:
                raise RuntimeError(f"no tiling ran correctly for {m}x{n}x{k}")
            ms, tiling, err, row = best
            table.set(bucket(m, n, k), tiling._asdict(), {
                "shape": [m, n, k], "ms": round(ms, 5), "tflops": round(2.0 * m * n * k / ms / 1e9, 2),
                "rel_error": err, "predicted_tflops": round(row.tflops_double, 2)})
    finally:
        bar.close()
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m sgemm_cube.tuning.npu``: measure, print and save the NPU tuning table."""
    ap = argparse.ArgumentParser(prog="python -m sgemm_cube.tuning.npu", description="Measured block tuning on an Ascend NPU.")
    ap.add_argument("--device", default="910b", help="hardware profile (default 910b)")
    ap.add_argument("--top", type=int, default=8, help="model-ranked tilings to time per shape")
    ap.add_argument("--out", metavar="DIR", help="folder to write the tiling table to (default: the user's, "
                    "sgemm_cube.backends.npu_tilings.user_dir())")
    args = ap.parse_args(argv)
    table = tune(args.device, top=args.top)
    for e in table.entries:
        print(f"{'x'.join(map(str, e.measured['shape'])):>17} {e.measured['tflops']:8.1f} TFLOP/s  {e.config}")
    from .tilings import write_measured

    print(f"wrote {write_measured(args.device, table, directory=args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
