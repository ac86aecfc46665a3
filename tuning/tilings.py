"""Write the NPU backend's tiling tables (:mod:`sgemm_cube.backends.npu_tilings`): the model's, and a user's measured rows.

The runtime looks tilings up instead of running the pipeline model on each
new shape; this module is where the tuner's answers become that data.

* :func:`write_model_table`: :func:`sgemm_cube.tuning.pipeline.package_pick` (the model alone, no
  measured table: the whole product ranked, bookkeeping included) on every bucket of a grid, with the whole product's predicted TFLOP/s
  (bookkeeping included: ``backend="auto"``'s route on the 910B reads it).  The shipped tables::

      sgemm-cube tune --device 910a --write-tilings --workers 16
      sgemm-cube tune --device 910b --write-tilings --workers 16

* :func:`write_measured`: ``sgemm-cube tune --device 910b --measure`` rows (:func:`sgemm_cube.tuning.npu.tune`)
  into the user's copy of the table (:func:`sgemm_cube.backends.npu_tilings.user_dir`), which the
  runtime reads first, as the CUDA side's ``tuning/gpu.py`` does with its configs.

Both go through :func:`sgemm_cube.backends.npu_tilings.update` and ``save``.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Sequence

from sgemm_cube.backends import npu_schedule as ns
from sgemm_cube.backends import npu_tilings as nt

from .hardware import Profile, get_profile

__all__ = ["GRID", "TERMS", "model_command", "model_rows", "write_model_table", "measured_rows", "write_measured"]

#: Bucket edges of the shipped tables: powers of four from 16 to 65536 in each of M, N, K (343 buckets;
#: every power of two in between is one octave from an edge, and lookup takes the nearest in log2 distance).
GRID = tuple(4 ** i for i in range(2, 9))
#: Term counts with entries of their own (fp16x3, fp16x4): the fused mode's accumulators differ.
TERMS = (3, 4)


def model_command(profile: Profile) -> str:
    """The command that regenerates ``profile``'s shipped table (recorded in its ``source`` field)."""
    return f"sgemm-cube tune --device {profile.key} --write-tilings"


def _package(terms: int, per_term: bool, l0c_stages: int = 1):
    """The whole product :func:`npu.run` launches on data that lists no line: the kernels, the guarantee's
    bookkeeping, the fix-up kernels (which find nothing) and the host's read-back of the lines' integers."""
    from .pipeline import Design

    return Design("kernel", terms=terms, per_term=per_term, bookkeeping=True, l0c_stages=l0c_stages, listed=0.0)


def _predicted(p: Profile, m: int, n: int, k: int, tiling: ns.Tiling, terms: int) -> float:
    """The whole product's TFLOP/s with the guarantee's bookkeeping and the read-back, as :func:`npu.run`
    launches it on data that lists no line (``backend="auto"``'s route on the 910B compares it with native)."""
    from .pipeline import predict

    return predict(p, m, n, k, tiling, design=_package(terms, bool(tiling.per_term), int(tiling.l0c_stages))).tflops


def _model_row(job) -> dict:
    p, (m, n, k), terms = job
    from .pipeline import package_pick

    tiling = package_pick(p, m, n, k, terms=terms, use_table=False)
    return {"bucket": [m, n, k], "terms": terms, "tiling": tiling, "source": "model",
            "predicted_tflops": _predicted(p, m, n, k, tiling, terms)}


def model_rows(profile: Profile | str, buckets: Iterable[tuple[int, int, int]], *, terms: Sequence[int] = TERMS,
               workers: int = 1, progress: bool = False) -> list[dict]:
    """The model's row of every bucket and term count (about 1-3 s each; ``workers`` processes share them)."""
    from tqdm.auto import tqdm

    p = get_profile(profile)
    jobs = [(p, tuple(b), t) for b in buckets for t in terms]
    bar = dict(total=len(jobs), desc=f"tilings {p.key}", unit="bucket", disable=not progress)
    if workers <= 1:
        return [_model_row(j) for j in tqdm(jobs, **bar)]
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return list(tqdm(pool.imap(_model_row, jobs, chunksize=1), **bar))


def write_model_table(profile: Profile | str, *, directory: str | os.PathLike | None = None,
                      grid: Sequence[int] = GRID, terms: Sequence[int] = TERMS, workers: int = 1,
                      progress: bool = False) -> Path:
    """Generate ``profile``'s table from the model on ``grid`` x ``grid`` x ``grid`` and write it
    (default: the shipped ``sgemm_cube/backends/npu_tilings/<chip>.json``)."""
    p = get_profile(profile)
    if p.pipes is None:
        raise ValueError(f"profile {p.key!r} has no 'pipes' table: the pipeline model cannot choose its tilings")
    command = model_command(p)
    if tuple(grid) != GRID or tuple(terms) != TERMS:
        command = (f"python -c 'from sgemm_cube.tuning import tilings; tilings.write_model_table(\"{p.key}\", "
                   f"grid={tuple(grid)}, terms={tuple(terms)})'")
    doc = nt.new_document(p.key, p.name, f"{command} (pipeline model: MODEL PREDICTION, untested on hardware)",
                          ns.capacity_from_profile(p), p.cube_fp32_tflops)
    buckets = [(m, n, k) for m in grid for n in grid for k in grid]
    doc = nt.update(doc, model_rows(p, buckets, terms=terms, workers=workers, progress=progress))
    return nt.save(doc, nt.table_path(p.key, directory))


def measured_rows(profile: Profile | str, table, *, terms: int = 3) -> list[dict]:
    """Rows of a measured :class:`~sgemm_cube.tuning.table.TuningTable` (:func:`sgemm_cube.tuning.npu.tune`).

    Each row's bucket is the measured shape itself (a lookup of that shape finds it at distance 0); its
    ``predicted_tflops`` is the model's for the measured tiling, bookkeeping included, so the route
    decision stays a model prediction.
    """
    p = get_profile(profile)
    rows = []
    for e in table.entries:
        m, n, k = e.measured.get("shape", e.bucket)
        tiling = ns.fit_tiling(ns.capacity_from_profile(p), ns.Tiling(**{"n_fused": 1 << 30, **e.config}),
                               k=k, terms=terms)
        rows.append({"bucket": [m, n, k], "terms": terms, "tiling": tiling, "source": "measured",
                     "predicted_tflops": _predicted(p, m, n, k, tiling, terms), "measured": dict(e.measured)})
    return rows


def write_measured(profile: Profile | str, table, *, directory: str | os.PathLike | None = None,
                   terms: int = 3) -> Path:
    """Merge measured rows into the user's table for the chip (created from the table in force) and write it.

    ``directory`` defaults to :func:`sgemm_cube.backends.npu_tilings.user_dir`, which the runtime reads
    before the shipped tables.
    """
    p = get_profile(profile)
    path = nt.table_path(p.key, nt.user_dir() if directory is None else directory)
    base = nt.load(path) if path.is_file() else nt.read(p.key)
    doc = nt.update({**base, "source": f"{base['source']}; measured rows: sgemm-cube tune --device {p.key} "
                                       "--measure" if "--measure" not in base["source"] else base["source"]},
                    measured_rows(p, table, terms=terms))
    return nt.save(doc, path)
