"""Tuning tables: measured kernel configurations per device and shape bucket.

The Ascend backend's tables (written by :mod:`sgemm_cube.tuning.npu`, read by
:func:`sgemm_cube.tuning.model.choose_tiling`).  The CUDA backend does not read these:
its launch configurations live in ``sgemm_cube/backends/cuda/configs/<gpu>.json``
(schema, key list and validator: :mod:`sgemm_cube.backends.cuda.configs`),
written by :mod:`sgemm_cube.tuning.gpu`.  A ``"cuda"`` table is still accepted here (its
configs checked by that same validator) for ``sgemm-cube tune --show``.

One JSON file per device, named after the device (:func:`table_path`)::

    {"schema": 1,
     "kind": "sgemm_cube.tuning_table",
     "device": "NVIDIA H100 80GB HBM3",      # torch / torch_npu device name, or profile name
     "backend": "cuda",                        # or "ascend"
     "created": "2026-11-22T10:00:00+00:00",
     "environment": {"torch": "...", "triton": "..."},
     "entries": [{"bucket": [4096, 4096, 4096],
                  "config": {"BLOCK_M": 128, ...},
                  "measured": {"ms": 0.71, "tflops": 193.2, "rel_error": 2.3e-07, ...}}]}

Shape buckets round m, n, k up to powers of two (:func:`bucket`); a lookup
takes the entry of the same bucket, else the nearest one in log2 distance.

Where tables are looked for, first hit wins: ``$SGEMM_CUBE_TUNING_DIR`` if
set, else ``$XDG_CACHE_HOME/sgemm_cube/tuning`` (``~/.cache/...``); then the
tables shipped in ``tuning/tables/``.  Tables are written atomically (temporary
file in the same folder, then :func:`os.replace`), and validated when read: a
file that is unreadable, of another schema or kind, for another device or
backend, or with any malformed entry gives a :class:`TuningTableWarning` and is
ignored as a whole, so callers fall back to their defaults.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from sgemm_cube._jsonio import write_json_atomic

__all__ = [
    "BACKENDS",
    "SCHEMA_VERSION",
    "Entry",
    "TableError",
    "TuningTable",
    "TuningTableWarning",
    "bucket",
    "find_tables",
    "format_table",
    "load",
    "lookup",
    "read_table",
    "save",
    "table_dirs",
    "table_path",
    "validate_config",
]

SCHEMA_VERSION = 1
KIND = "sgemm_cube.tuning_table"
BACKENDS = ("cuda", "ascend")
_ENV_DIR = "SGEMM_CUBE_TUNING_DIR"
_PACKAGE_DIR = Path(__file__).resolve().parent / "tables"
_MAX_DIM_LOG2 = 24  # buckets up to 2**24 per dimension; larger shapes use the largest


class TableError(ValueError):
    """A tuning-table file or entry does not follow the schema."""


class TuningTableWarning(UserWarning):
    """A tuning table was ignored (corrupt, foreign or malformed)."""


def bucket(m: int, n: int, k: int) -> tuple[int, int, int]:
    """Shape bucket of an m x k x n product: each size rounded up to a power of two (at least 16)."""
    out = []
    for x in (m, n, k):
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise ValueError(f"sizes must be non-negative integers, got {(m, n, k)}")
        out.append(1 << min(_MAX_DIM_LOG2, max(4, math.ceil(math.log2(max(x, 1))))))
    return tuple(out)


# ---------------------------------------------------------------------------
# Config validation: a table must never select a kernel that cannot launch.

def _int(name: str, v: Any, ok) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not ok(v):
        raise TableError(f"config value {name}={v!r} is out of range")
    return v


def validate_config(config: Any, backend: str) -> dict[str, Any]:
    """Check one entry's config; return a copy or raise :class:`TableError`.

    ``"cuda"`` configs hold launch keys of ``sgemm_cube.backends.cuda``,
    checked by its one validator (:func:`sgemm_cube.backends.cuda.configs.validate_config`:
    known keys, types, ranges).  ``"ascend"`` configs hold
    ``bm``, ``bk``, ``bn`` (positive multiples of 16), ``n_fused`` (>= 1) and
    ``per_term`` (bool: one GEMM pass per product term) and ``l0c_stages`` (1 or 2: accumulator sets in
    L0C), the last three optional.
    """
    if not isinstance(config, Mapping) or not config:
        raise TableError("config must be a non-empty object")
    cfg = dict(config)
    if backend == "cuda":
        from sgemm_cube.backends.cuda.configs import ConfigError
        from sgemm_cube.backends.cuda.configs import validate_config as _validate_cuda

        try:
            cfg = _validate_cuda(cfg, source="cuda config")
        except ConfigError as exc:
            raise TableError(str(exc)) from None
    elif backend == "ascend":
        if set(cfg) - {"bm", "bk", "bn", "n_fused", "per_term", "l0c_stages"} or not {"bm", "bk", "bn"} <= set(cfg):
            raise TableError(f"ascend config needs bm, bk, bn (and optional n_fused, per_term, l0c_stages), "
                             f"got {sorted(cfg)}")
        for key in ("bm", "bk", "bn"):
            _int(key, cfg[key], lambda x: x > 0 and x % 16 == 0)
        if "n_fused" in cfg:
            _int("n_fused", cfg["n_fused"], lambda x: x >= 1)
        if "per_term" in cfg and not isinstance(cfg["per_term"], bool):
            raise TableError(f"ascend config per_term must be true or false, got {cfg['per_term']!r}")
        if "l0c_stages" in cfg:
            _int("l0c_stages", cfg["l0c_stages"], lambda x: x in (1, 2))
    else:
        raise TableError(f"unknown backend {backend!r}; valid: {list(BACKENDS)}")
    return cfg


# ---------------------------------------------------------------------------
# The table


@dataclass
class Entry:
    """The chosen config of one shape bucket, with what was measured for it."""

    bucket: tuple[int, int, int]
    config: dict[str, Any]
    measured: dict[str, Any] = field(default_factory=dict)


@dataclass
class TuningTable:
    """All tuned buckets of one device."""

    device: str
    backend: str
    entries: list[Entry] = field(default_factory=list)
    created: str = ""
    environment: dict[str, Any] = field(default_factory=dict)

    def set(self, bucket_: Iterable[int], config: Mapping[str, Any], measured: Mapping[str, Any] | None = None) -> None:
        """Add or replace the entry of a bucket (the config is validated)."""
        b = tuple(int(x) for x in bucket_)
        entry = Entry(b, validate_config(config, self.backend), dict(measured or {}))
        self.entries = [e for e in self.entries if e.bucket != b] + [entry]
        self.entries.sort(key=lambda e: e.bucket)

    def lookup(self, m: int, n: int, k: int, *, exact: bool = False) -> dict[str, Any] | None:
        """Config of the bucket of (m, n, k), else of the nearest bucket (unless ``exact``)."""
        want = bucket(m, n, k)
        for e in self.entries:
            if e.bucket == want:
                return dict(e.config)
        if exact or not self.entries:
            return None

        def distance(e: Entry) -> tuple[float, tuple[int, ...]]:
            d = sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(e.bucket, want))
            return d, tuple(-x for x in e.bucket)  # ties: the larger bucket

        return dict(min(self.entries, key=distance).config)

    def to_json(self) -> dict[str, Any]:
        """The schema-1 document."""
        return {
            "schema": SCHEMA_VERSION,
            "kind": KIND,
            "device": self.device,
            "backend": self.backend,
            "created": self.created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "environment": self.environment,
            "entries": [{"bucket": list(e.bucket), "config": e.config, "measured": e.measured} for e in self.entries],
        }

    @classmethod
    def from_json(cls, data: Any, *, source: str = "<data>") -> "TuningTable":
        """Validate a schema-1 document; raise :class:`TableError` on any defect."""
        if not isinstance(data, Mapping):
            raise TableError(f"{source}: not a JSON object")
        if data.get("kind") != KIND or data.get("schema") != SCHEMA_VERSION:
            raise TableError(f"{source}: not a schema-{SCHEMA_VERSION} {KIND} file "
                             f"(kind={data.get('kind')!r}, schema={data.get('schema')!r})")
        device, backend = data.get("device"), data.get("backend")
        if not isinstance(device, str) or not device:
            raise TableError(f"{source}: 'device' must be a non-empty string")
        if backend not in BACKENDS:
            raise TableError(f"{source}: 'backend' must be one of {list(BACKENDS)}, got {backend!r}")
        entries = data.get("entries")
        if not isinstance(entries, list):
            raise TableError(f"{source}: 'entries' must be a list")
        table = cls(device, backend, created=str(data.get("created", "")),
                    environment=dict(data.get("environment") or {}))
        for i, e in enumerate(entries):
            try:
                if not isinstance(e, Mapping):
                    raise TableError("entry must be an object")
                b = e.get("bucket")
                if (not isinstance(b, list) or len(b) != 3
                        or any(isinstance(x, bool) or not isinstance(x, int) or x < 16 or x & (x - 1) for x in b)):
                    raise TableError(f"bucket {b!r} must be three powers of two >= 16")
                measured = e.get("measured", {})
                if not isinstance(measured, Mapping):
                    raise TableError("'measured' must be an object")
                if any(tuple(b) == x.bucket for x in table.entries):
                    raise TableError(f"bucket {b} appears twice")
                table.set(b, e.get("config"), measured)
            except TableError as exc:
                raise TableError(f"{source}: entry {i}: {exc}") from None
        return table


# ---------------------------------------------------------------------------
# Files


def table_dirs() -> list[Path]:
    """Folders searched for tables, in order of precedence."""
    env = os.environ.get(_ENV_DIR)
    if env:
        user = Path(env).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        user = Path(cache) / "sgemm_cube" / "tuning"
    return [user, _PACKAGE_DIR]


def table_path(device: str, directory: str | os.PathLike[str] | None = None) -> Path:
    """``<directory>/<slug>.json``; the slug is the device name in lower case, runs of
    other characters than ``[a-z0-9]`` replaced by ``_``.  ``directory``
    defaults to the user folder (the first of :func:`table_dirs`)."""
    slug = re.sub(r"[^a-z0-9]+", "_", device.lower()).strip("_") or "device"
    return Path(directory if directory is not None else table_dirs()[0]) / f"{slug}.json"


def load(path: str | os.PathLike[str]) -> TuningTable:
    """Read and validate one table file; raise :class:`TableError` on any defect."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TableError(f"{path}: unreadable: {exc}") from exc
    return TuningTable.from_json(data, source=str(path))


def save(table: TuningTable, directory: str | os.PathLike[str] | None = None) -> Path:
    """Write ``table`` atomically to :func:`table_path` and return the path.

    The document is validated first (an invalid table raises
    :class:`TableError` and leaves any existing file untouched).
    """
    doc = table.to_json()
    TuningTable.from_json(doc, source="<table to save>")
    path = table_path(table.device, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, doc)
    for key in [k for k in _CACHE if k.startswith(f"{path}|")]:
        del _CACHE[key]
    return path


_CACHE: dict[str, tuple[tuple[int, int, int], TuningTable | None]] = {}


def _cached(path: Path, device: str | None, backend: str | None) -> TuningTable | None:
    """Load with a (mtime, size) cache; warn once per file version when it is unusable."""
    try:
        st = path.stat()
    except OSError:
        return None
    stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
    key = f"{path}|{device}|{backend}"
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    table: TuningTable | None
    try:
        table = load(path)
        if device is not None and table.device != device:
            raise TableError(f"{path}: table is for device {table.device!r}, not {device!r}")
        if backend is not None and table.backend != backend:
            raise TableError(f"{path}: table is for backend {table.backend!r}, not {backend!r}")
    except TableError as exc:
        warnings.warn(f"ignoring tuning table: {exc}", TuningTableWarning, stacklevel=3)
        table = None
    _CACHE[key] = (stamp, table)
    return table


def read_table(device: str, *, backend: str | None = None) -> TuningTable | None:
    """The first usable table for ``device`` in :func:`table_dirs`, or ``None``.

    A file that exists but is unusable warns and is skipped, so a corrupt user
    table falls back to the shipped one and then to the caller's defaults.
    """
    for d in table_dirs():
        table = _cached(table_path(device, d), device, backend)
        if table is not None:
            return table
    return None


def lookup(device_name: str, m: int, n: int, k: int, *, backend: str | None = None) -> dict[str, Any] | None:
    """Tuned config for an m x k x n product on ``device_name``, or ``None``.

    Parameters
    ----------
    device_name : str
        ``torch.cuda.get_device_name()`` for GPUs; the profile name
        (``"Ascend 910A"``) for NPUs.
    m, n, k : int
        Problem sizes (C is m x n).
    backend : {"cuda", "ascend"}, optional
        Reject a table written for another backend.

    Returns
    -------
    dict or None
        A copy of the config of the matching (else nearest) bucket.  CUDA
        configs may carry ``flush_k``, which is an argument of the backend's
        ``matmul``, not a launch key: pop it before passing ``config=``.
    """
    table = read_table(device_name, backend=backend)
    return None if table is None else table.lookup(m, n, k)


def find_tables(directories: Iterable[str | os.PathLike[str]] | None = None) -> list[tuple[Path, TuningTable | str]]:
    """Every ``*.json`` in the table folders with its table, or the reason it is unusable."""
    found = []
    for d in (table_dirs() if directories is None else [Path(x) for x in directories]):
        for path in sorted(Path(d).glob("*.json")) if Path(d).is_dir() else []:
            try:
                found.append((path, load(path)))
            except TableError as exc:
                found.append((path, str(exc)))
    return found


def format_table(table: TuningTable) -> str:
    """Human-readable rendering of a table (one line per bucket)."""
    lines = [f"{table.device}  [{table.backend}]  created {table.created or '-'}"]
    for e in table.entries:
        cfg = " ".join(f"{k}={v}" for k, v in e.config.items())
        meas = e.measured
        perf = f"{meas['tflops']:8.1f} TFLOP/s" if isinstance(meas.get("tflops"), (int, float)) else " " * 16
        err = f"  err {meas['rel_error']:.2e}" if isinstance(meas.get("rel_error"), (int, float)) else ""
        lines.append(f"  {'x'.join(map(str, e.bucket)):>20}  {perf}{err}  {cfg}")
    return "\n".join(lines)
