"""Measured tuning of the CUDA backend: time launch configs per shape bucket.

The one writer of the CUDA backend's per-GPU config files (schema and
validator: :mod:`sgemm_cube.backends.cuda.configs`).  One command on a GPU
machine updates the file the backend ships::

    python -m sgemm_cube.tuning.gpu --quick --out sgemm_cube/backends/cuda/configs/

(without ``--out``: the user's folder, :func:`~sgemm_cube.backends.cuda.configs.user_dir`,
read before the shipped file).  ``sgemm-cube bench --matrix --write-config``
stores its fitted hybrid rule through :func:`write_hybrid_rule`.

For every shape of the grid it draws FP32 operands (normal, and uniform
[0, 1) where accumulation errors are largest), computes their float64
references and cuBLAS SGEMM's errors (TF32 off) once, then for every
candidate config runs ``sgemm_cube.backends.cuda.matmul(..., config=...)``,
rejects configs that fail to compile or launch, or whose relative Frobenius
error exceeds ``max_error_ratio`` times SGEMM's on either data set (the
flush interval trades accuracy), and times the rest with
:func:`triton.testing.do_bench` (median, split passes included).  The fastest accepted config of each shape becomes
the ``gemm_termwise`` entry of its bucket in the device's file; the file's
other entries (other modes, other buckets, the hybrid rule) stay.
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import pathlib
import sys
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from sgemm_cube.backends.cuda import configs as C
from sgemm_cube.backends.native import true_fp32

from .hardware import cuda_profile

__all__ = [
    "QUICK_SHAPES",
    "FULL_SHAPES",
    "Measurement",
    "candidate_configs",
    "format_results",
    "main",
    "parse_args",
    "smem_bytes",
    "tune",
    "device_path",
    "merge_measured",
    "write_measured",
    "write_hybrid_rule",
]

QUICK_SHAPES: tuple[tuple[int, int, int], ...] = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
                                                  (8192, 8192, 8192))
FULL_SHAPES: tuple[tuple[int, int, int], ...] = QUICK_SHAPES + (
    (512, 512, 512), (8192, 8192, 1024), (1024, 1024, 8192), (8192, 1024, 8192), (16384, 16384, 4096))

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages).  Three FP32 tile
# accumulators (hi*hi, its tensor-core partial, the correction) must fit the
# 64K-register file with the operand fragments: tiles of 128 x 128 are the
# largest that do not spill, hence no 256 x 256.
_QUICK_TILES = ((128, 128, 64, 8, 3), (128, 128, 32, 8, 4), (128, 128, 32, 8, 3), (128, 128, 64, 4, 3),
                (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (256, 64, 32, 8, 3), (64, 256, 32, 8, 3))
_QUICK_VARIANTS = ("ptr", "tma", "tma_persistent")


class Measurement(dict):
    """One candidate's outcome: ``shape``, ``config``, ``ms``, ``tflops``, ``status``, and
    ``rel_error``/``sgemm_rel_error`` (normal data) and ``..._uniform01`` (uniform data)."""


def smem_bytes(config: Mapping[str, Any]) -> int:
    """Shared memory of the GEMM kernel's operand pipeline, bytes: four FP16 tiles
    (A_hi, A_lo: BLOCK_M x BLOCK_K; B_hi, B_lo: BLOCK_K x BLOCK_N) per stage.

    An upper estimate (Triton may keep one stage fewer in shared memory);
    configs it rejects wrongly would only be missing from the search."""
    per_stage = 2 * 2 * config["BLOCK_K"] * (config["BLOCK_M"] + config["BLOCK_N"])
    return per_stage * config["num_stages"]


def candidate_configs(*, quick: bool = True, smem_limit: int | None = None,
                      flush_ks: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Launch configs to time (keys of the CUDA backend's ``config=`` plus ``flush_k``).

    ``quick`` takes 8 tile shapes x 3 kernel variants at ``flush_k=64`` (the
    backend's default: at 128 the tensor cores' truncation on same-sign data
    leaves the error above half of SGEMM's, ``docs/cuda_design.md``);
    otherwise a grid over BLOCK_M, BLOCK_N in {64, 128, 256} (at most 32768
    elements), BLOCK_K in {32, 64}, num_warps in {4, 8}, num_stages in
    {3, 4, 5}, GROUP_M in {8}, flush_k in {64, 128}.  Configs needing more
    shared memory than ``smem_limit`` bytes are dropped.
    """
    if quick:
        tiles: Iterable = _QUICK_TILES
        flush_ks = (64,) if flush_ks is None else flush_ks
    else:
        tiles = [(bm, bn, bk, w, s) for bm, bn, bk, w, s in
                 itertools.product((64, 128, 256), (64, 128, 256), (32, 64), (4, 8), (3, 4, 5)) if bm * bn <= 32768]
        flush_ks = (64, 128) if flush_ks is None else flush_ks
    out = []
    for (bm, bn, bk, warps, stages), variant, fk in itertools.product(tiles, _QUICK_VARIANTS, flush_ks):
        cfg = C.validate_config({"variant": variant, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8,
                                 "num_warps": warps, "num_stages": stages, "flush_k": fk}, source="candidate")
        if smem_limit is None or smem_limit <= 0 or smem_bytes(cfg) <= smem_limit:
            out.append(cfg)
    return out


def _rel_fro(c, ref) -> float:
    """||c - ref||_F / ||ref||_F in float64."""
    import torch

    return float(torch.linalg.norm(c.double() - ref) / torch.linalg.norm(ref))


def _operands(m: int, n: int, k: int, gen, dev) -> dict[str, tuple]:
    """Test operands per accuracy check: ``{suffix: (name, a, b, ref64, sgemm_rel_error)}``.

    Normal data (suffix ``""``, also the timing data) and uniform [0, 1) data
    (``"_uniform01"``), where partial sums grow with k and tensor-core
    truncation hurts most (without flushes the error grows with K: docs/cuda_design.md)."""
    import torch

    out = {}
    for suffix, name, draw in (("", "normal", torch.randn), ("_uniform01", "uniform [0, 1)", torch.rand)):
        a = draw(1, m, k, generator=gen).to(dev)
        b = draw(1, k, n, generator=gen).to(dev)
        ref = torch.matmul(a.double(), b.double())
        with true_fp32():  # native SGEMM, not TF32
            sgemm_err = _rel_fro(torch.matmul(a, b), ref)
        out[suffix] = (name, a, b, ref, sgemm_err)
    return out


def _wall_bench(fn: Callable[[], Any], *, rep_ms: float = 50.0) -> float:
    """Median wall time in ms (for CPU tensors, where do_bench's CUDA events are missing)."""
    fn()
    times = []
    t_end = time.perf_counter() + rep_ms / 1e3
    while not times or (time.perf_counter() < t_end and len(times) < 100):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def _cuda_bench(fn: Callable[[], Any]) -> float:
    from triton.testing import do_bench

    return float(do_bench(fn, warmup=10, rep=60, return_mode="median"))


def _default_matmul():
    from sgemm_cube.backends.cuda import matmul

    return matmul


def tune(
    shapes: Sequence[tuple[int, int, int]] = QUICK_SHAPES,
    candidates: Sequence[Mapping[str, Any]] | None = None,
    *,
    device: Any = "cuda",
    device_name: str | None = None,
    sb: int = 12,
    order: str = "termwise",
    max_error_ratio: float = 1.0,
    time_budget_s: float | None = None,
    matmul: Callable[..., Any] | None = None,
    bench: Callable[[Callable[[], Any]], float] | None = None,
    seed: int = 0,
    progress: bool = True,
    command: str | None = None,
) -> tuple[dict, list[Measurement]]:
    """Time candidate configs per shape and build the device's config document.

    Parameters
    ----------
    shapes : sequence of (m, n, k)
        One measurement shape per bucket (C is m x n).
    candidates : sequence of dict, optional
        Configs (launch keys and optional ``flush_k``); default
        :func:`candidate_configs` for the device's shared memory.
    device : torch device, keyword-only
        Where the operands live (``"cpu"`` only with an injected ``matmul``
        or under ``TRITON_INTERPRET=1``).
    device_name : str, optional, keyword-only
        The document's ``device``; default ``torch.cuda.get_device_name``.
    sb, order : keyword-only
        Passed to the backend (the table does not depend on them).
    max_error_ratio : float, keyword-only
        Accept a config only if its relative Frobenius error against float64
        is at most this times cuBLAS SGEMM's on the same operands, on both
        normal and uniform [0, 1) data (timing uses the normal data).
    time_budget_s : float, optional, keyword-only
        Stop timing new candidates of a shape once its share of the budget is
        spent (the shapes share what is left equally).
    matmul, bench : callables, optional, keyword-only
        The backend entry point (``sgemm_cube.backends.cuda.matmul``) and the
        timer (``triton.testing.do_bench`` median on CUDA, wall-clock median
        otherwise); injectable for tests.
    seed : int, keyword-only
        Seed of the operands.
    progress : bool, keyword-only
        Show a tqdm progress bar on stderr.
    command : str, optional, keyword-only
        The command line recorded in the document's metadata.

    Returns
    -------
    (dict, list of Measurement)
        The schema-2 document (:mod:`sgemm_cube.backends.cuda.configs`; one
        ``gemm_termwise`` bucket entry per shape; not yet saved) and every candidate's outcome.

    Raises
    ------
    RuntimeError
        If no candidate is accepted for some shape.
    """
    import torch
    from tqdm.auto import tqdm

    dev = torch.device(device)
    on_cuda = dev.type == "cuda"
    if device_name is None:
        device_name = torch.cuda.get_device_name(dev) if on_cuda else f"{dev.type} (interpreter)"
    if candidates is None:
        smem = cuda_profile(dev)["smem_per_block_bytes"] if on_cuda else None
        candidates = candidate_configs(smem_limit=smem)
    if not candidates:
        raise ValueError("no candidate configs to time")
    candidates = [C.validate_config(c, source=f"candidate {i}") for i, c in enumerate(candidates)]
    matmul = matmul or _default_matmul()
    bench = bench or (_cuda_bench if on_cuda else _wall_bench)
    env = {"torch": torch.__version__}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:  # pragma: no cover - only with an injected matmul
        pass
    entries: dict[tuple, dict] = {}
    results: list[Measurement] = []
    gen = torch.Generator(device="cpu").manual_seed(seed)
    t_start = time.perf_counter()
    bar = tqdm(total=len(shapes) * len(candidates), desc=f"tuning {device_name}", unit="cfg",
               disable=not progress, file=sys.stderr)
    try:
        for i_shape, (m, n, k) in enumerate(shapes):
            data = _operands(m, n, k, gen, dev)
            out = torch.empty(1, m, n, device=dev)
            deadline = None
            if time_budget_s is not None:
                left = time_budget_s - (time.perf_counter() - t_start)
                deadline = time.perf_counter() + max(0.0, left) / (len(shapes) - i_shape)
            best: Measurement | None = None
            for cfg in candidates:
                bar.update(1)
                rec = Measurement(shape=[m, n, k], config=dict(cfg), ms=None, tflops=None, status="ok",
                                  **{f"sgemm_rel_error{suffix}": d[4] for suffix, d in data.items()})
                results.append(rec)
                if deadline is not None and time.perf_counter() > deadline and best is not None:
                    rec["status"] = "skipped (time budget)"
                    continue
                launch = {key: v for key, v in cfg.items() if key != "flush_k"}

                def run(a, b, flush_k=cfg.get("flush_k"), launch=launch) -> None:
                    matmul(a, b, sb=sb, order=order, keep_lo_lo=False, out=out, flush_k=flush_k, config=launch)

                try:
                    for suffix, (_, a, b, ref, sgemm_err) in data.items():
                        run(a, b)
                        if on_cuda:
                            torch.cuda.synchronize(dev)
                        err = rec[f"rel_error{suffix}"] = _rel_fro(out, ref)
                        if not math.isfinite(err) or err > max_error_ratio * sgemm_err:
                            rec["status"] = (f"rejected: error {err:.2e} > {max_error_ratio:g} x SGEMM's "
                                             f"{sgemm_err:.2e} on {data[suffix][0]} data")
                            break
                    else:
                        a, b = data[""][1:3]
                        ms = float(bench(lambda: run(a, b)))
                except Exception as exc:  # compile or launch failure: report it and go on
                    rec["status"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
                if rec["status"] != "ok":
                    continue
                rec["ms"], rec["tflops"] = ms, 2.0 * m * n * k / (ms * 1e-3) / 1e12
                if best is None or ms < best["ms"]:
                    best = rec
                    bar.set_postfix_str(f"{m}x{n}x{k}: {rec['tflops']:.1f} TFLOP/s")
            if best is None:
                raise RuntimeError(f"no candidate config ran correctly for {m}x{n}x{k}; statuses: "
                                   + "; ".join(r["status"] for r in results[-len(candidates):]))
            measured = {"shape": [m, n, k], "ms": round(best["ms"], 5), "tflops": round(best["tflops"], 2)}
            measured.update({key: v for key, v in best.items() if "rel_error" in key})
            measured["candidates"] = sum(r["ms"] is not None for r in results[-len(candidates):])
            b = C.bucket(m, n, k)
            entries[b] = {"bucket": list(b), "config": best["config"], "measured": measured}
    finally:
        bar.close()
    doc = {"schema": C.SCHEMA_VERSION, "kind": C.KIND, "device": device_name,
           "metadata": dict(env, commands=[command or "sgemm_cube.tuning.gpu.tune()"], created=_now(), sb=sb, order=order,
                            max_error_ratio=max_error_ratio, seed=seed),
           "gemm_termwise": [entries[b] for b in sorted(entries)]}
    C.validate_document(doc, f"measured document for {device_name}")
    return doc, results


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def device_path(device_name: str, directory=None) -> pathlib.Path:
    """``<directory>/<gpu>.json`` (:func:`~sgemm_cube.backends.cuda.configs.file_stem`); ``directory``
    defaults to the user folder (:func:`~sgemm_cube.backends.cuda.configs.user_dir`)."""
    return pathlib.Path(directory if directory is not None else C.user_dir()) / f"{C.file_stem(device_name)}.json"


def merge_measured(old: Mapping | None, new: Mapping) -> dict:
    """``old`` with the measured ``gemm_termwise`` bucket entries of ``new`` added or replaced;
    everything else of ``old`` (other modes and buckets, the hybrid rule) stays.  Metadata
    records both runs' commands; ``new``'s versions and date win."""
    if not old:
        return json.loads(json.dumps(new))
    doc = json.loads(json.dumps(old))
    doc["device"] = new["device"]
    measured = {tuple(e["bucket"]) for e in new.get("gemm_termwise", [])}
    kept = [e for e in doc.get("gemm_termwise", []) if tuple(e.get("bucket", ())) not in measured]
    doc["gemm_termwise"] = kept + list(new.get("gemm_termwise", []))
    meta = dict(doc.get("metadata", {}))
    commands = list(meta.get("commands", [])) + [c for c in new["metadata"].get("commands", [])
                                                 if c not in meta.get("commands", [])]
    meta.update(new.get("metadata", {}), commands=commands)
    doc["metadata"] = meta
    return doc


def write_measured(doc: Mapping, directory=None) -> pathlib.Path:
    """Merge ``doc`` (from :func:`tune`) into the device's file in ``directory`` and write it atomically."""
    path = device_path(doc["device"], directory)
    old = C.load(path) if path.is_file() else None  # an invalid file raises: fix it, do not overwrite it
    return C.save(merge_measured(old, doc), path)


def write_hybrid_rule(rule: Mapping, key: str, *, source: str | None = None, device: str | None = None,
                      directory=None) -> pathlib.Path:
    """Store a fitted hybrid rule (``sgemm_cube.cli.bench_gpu.derive_hybrid_rule``) in ``<directory>/<key>.json``.

    ``directory`` defaults to the package's ``configs/``.  The rule's
    thresholds (``min_flops``, ``min_mn``, ``min_k``, any other of
    :data:`~sgemm_cube.backends.cuda.configs.HYBRID_KEYS` it has), ``source``
    and the number of problems it sends native although the emulation won
    them replace the file's ``"hybrid"``; the file's other keys stay.  A GPU
    without a file of its own starts from the table it reads today (a
    sibling's, without the sibling's measured buckets), so a new file changes
    nothing but the rule.
    """
    from sgemm_cube.backends.cuda import hybrid

    path = pathlib.Path(directory if directory is not None else C.CONFIG_DIR) / f"{key}.json"
    if path.is_file():
        doc = dict(C.load(path))
    else:
        doc = json.loads(json.dumps(hybrid.load_device_table(key)))
        if doc:
            for mode in C.MODES:
                if f"gemm_{mode}" in doc:
                    doc[f"gemm_{mode}"] = [e for e in doc[f"gemm_{mode}"] if "bucket" not in e]
            doc["metadata"] = {"inherited_from": f"{C.file_stem(doc['device'])}.json"}
            doc.pop("note", None)  # the sibling's note describes the sibling's file
            doc.pop("small_k", None), doc.pop("interpreter", None)  # default.json's own keys
        else:
            doc = {"schema": C.SCHEMA_VERSION, "kind": C.KIND, "device": device or key, "metadata": {}}
    if device:
        doc["device"] = device
    entry = {k: rule[k] for k in C.HYBRID_KEYS if k in rule}
    if source:
        entry["source"] = source
    if "fit" in rule:
        entry["faster_but_native"] = len(rule["fit"]["faster_but_native"])
    doc["hybrid"] = entry
    meta = dict(doc.get("metadata", {}))
    meta["hybrid_command"] = "sgemm-cube bench --matrix --write-config"
    doc["metadata"] = meta
    return C.save(doc, path)


def format_document(doc: Mapping) -> str:
    """A config document as text: one line per entry of each mode."""
    lines = [f"{doc['device']}  created {doc.get('metadata', {}).get('created', '-')}"]
    for mode in C.MODES:
        for e in doc.get(f"gemm_{mode}", []):
            where = "x".join(map(str, e["bucket"])) if "bucket" in e else "any shape"
            meas = e.get("measured", {})
            perf = f"{meas['tflops']:8.1f} TFLOP/s" if isinstance(meas.get("tflops"), (int, float)) else " " * 16
            cfg = " ".join(f"{k}={v}" for k, v in e["config"].items())
            lines.append(f"  {mode:>11} {where:>20}  {perf}  {cfg}")
    return "\n".join(lines)


def format_results(doc: Mapping) -> str:
    """The measured document as text: one line per shape with throughput, both errors and the config."""
    lines = ["rel. errors vs float64 (Frobenius): this kernel / cuBLAS SGEMM, normal and uniform [0,1) data",
             f"{'shape':>17} {'TFLOP/s':>8} {'ms':>9} {'normal':>17} {'uniform':>17}  config"]
    for e in doc.get("gemm_termwise", []):
        if "measured" not in e or "shape" not in e["measured"]:
            continue
        meas = e["measured"]
        errs = [f"{meas['rel_error' + s]:.1e} / {meas['sgemm_rel_error' + s]:.1e}" for s in ("", "_uniform01")]
        lines.append(f"{'x'.join(map(str, meas['shape'])):>17} {meas['tflops']:8.1f} {meas['ms']:9.4f} "
                     f"{errs[0]:>17} {errs[1]:>17}  {e['config']}")
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command line of ``python -m sgemm_cube.tuning.gpu``."""
    p = argparse.ArgumentParser(prog="python -m sgemm_cube.tuning.gpu", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="4 square shapes x 24 configs (under 4 minutes on an H100)")
    p.add_argument("--shapes", nargs="+", metavar="MxNxK", help="shapes to tune (one per bucket)")
    p.add_argument("--out", metavar="DIR", help=f"folder of the per-GPU file to update (default {C.user_dir()}; "
                   "sgemm_cube/backends/cuda/configs/ updates the shipped file)")
    p.add_argument("--no-save", action="store_true", help="print the table only")
    p.add_argument("--max-error-ratio", type=float, default=1.0,
                   help="accept configs whose error is at most this times SGEMM's (default 1)")
    p.add_argument("--time-budget", type=float, default=None, metavar="S",
                   help="seconds for all timing (default: 210 with --quick, unlimited otherwise)")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def _parse_shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"bad shape {text!r}: write MxNxK, e.g. 4096x4096x4096") from None
    return m, n, k


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tuning on the current CUDA device, print and save the table."""
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("tuning.gpu: no CUDA device (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    shapes = [_parse_shape(s) for s in args.shapes] if args.shapes else list(QUICK_SHAPES if args.quick else FULL_SHAPES)
    prof = cuda_profile()
    cands = candidate_configs(quick=args.quick, smem_limit=prof["smem_per_block_bytes"])
    budget = args.time_budget if args.time_budget is not None else (210.0 if args.quick else None)
    print(f"{prof['name']}: {prof['sm_count']} SMs, {prof['smem_per_block_bytes'] // 1024} KiB shared memory per "
          f"block; {len(shapes)} shapes x {len(cands)} configs")
    t0 = time.perf_counter()
    command = "python -m sgemm_cube.tuning.gpu " + " ".join(sys.argv[1:] if argv is None else argv)
    doc, results = tune(shapes, cands, max_error_ratio=args.max_error_ratio, time_budget_s=budget, seed=args.seed,
                        command=command.strip())
    path = device_path(doc["device"], args.out)
    old = C.load(path) if path.is_file() else None
    print(f"\nmeasured in {time.perf_counter() - t0:.0f} s")
    print(format_results(doc))
    failed = [r for r in results if r["status"].startswith("failed")]
    if failed:
        print(f"{len(failed)} candidate runs failed, e.g. {failed[0]['config']}: {failed[0]['status']}")
    if old is not None:
        print(f"\nprevious {path}:\n" + format_document(old))
    if not args.no_save:
        print(f"\nwrote {write_measured(doc, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
