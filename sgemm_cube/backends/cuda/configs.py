"""The one schema, key list and validator of the CUDA backend's launch configurations.

Every reader and writer of ``configs/<gpu>.json`` goes through this module:
:mod:`.launch` and :mod:`.hybrid` read, ``tuning/gpu.py`` (``sgemm-cube tune
--device cuda --measure``; ``sgemm-cube bench --matrix --write-config`` calls
it for the hybrid rule) writes.  Needs neither torch nor triton.

One file per GPU (``h100.json``, ``h200.json``), plus ``default.json`` holding
what applies where a GPU file says nothing (the fallbacks, the small-K flush,
the interpreter's tiles, the default hybrid rule)::

    {"schema": 2, "kind": "sgemm_cube.cuda_configs",
     "device": "NVIDIA H200",                  # torch.cuda.get_device_name of the measuring GPU
     "metadata": {"commands": [...], "torch": "...", "triton": "...", "created": "..."},
     "hybrid": {"min_flops": 5e9, "min_flops_per_matrix": 1e9, "min_mn": 256, "min_k": 0, "min_tiles": 128,
                "source": "...", "note": "..."},
     "gemm_termwise": [                        # one list per mode (MODES)
        {"config": {...}},                                 # no bucket: applies to every shape ...
        {"max_flops": F, "max_k": K, "config": {...}},     # ... whose 2*batch*m*n*k <= F and k <= K
        {"bucket": [4096, 4096, 4096], "config": {...}, "measured": {...}}],  # measured shape bucket
     ...,
     "auto_scheme": {"schemes": ["fp16x3", "bf16x6"], "min_flops": F, "min_k": 1024, "margin": 0.35},  # default.json only
     "small_k": {"max_k": 2048, "config": {...}},   # default.json only
     "interpreter": {"config": {...}}}              # default.json only

Choice for a mode (:func:`choose`), later layers overriding earlier ones key by
key: the first unbucketed entry whose limits hold, then the entry of the
problem's shape bucket (:func:`bucket`), else the nearest bucket in log2
distance (ties: the larger).  Bucket entries apply only on the GPU named by
the file's ``device`` (measurements do not transfer to a sibling GPU).  So on that GPU
a list with buckets always ends with a bucket's keys: an unbucketed ``max_k`` entry
there sets only the keys no bucket sets, and a choice that must hold for a range
of K is written as buckets (``h200.json``'s ``[8192, 8192, K]``).  Entries may
carry ``source``, ``note`` and ``measured`` (free-form records of how they were
obtained).

Key ranges are those the kernels accept (``gemm_kernel.py``, ``split_kernel.py``):

* ``BLOCK_M/N/K``: powers of two in [16, 512] (``tl.dot`` needs 16 or more);
* ``flush_k``: 0 (never flush) or a positive multiple of 16.  :func:`.launch.flush_steps`
  halves BLOCK_K until it divides ``flush_k``, so 16 launches (BLOCK_K 16, the
  smallest ``tl.dot`` K);
* ``merge_levels``: a boolean.  The kernel's ``MERGE_LEVELS`` applies to
  the BF16 schemes only (levels >= 2 summed with level 1 needs ``SCALE == 1``); the
  launcher ignores it otherwise, so a table entry of an FP16 mode saying
  ``true`` is rejected as a mistake, while ``config=`` overrides may carry it;
* ``split_block``: ``null`` (the launcher's default) or two powers of two;
* ``variant``: one of ``gemm_tiles.VARIANTS``;
* ``row_chunks``, ``col_chunks``: integers >= 1, the chunks of A's rows and of B's columns whose
  split planes a product holds one at a time (1, 1: the whole operands; a single product only,
  :func:`.launch._chunked_launches` says how and what it costs);
* ``fixup_apart``: a boolean, the fix-up programs in a launch of their own after the tiles' (which then store
  every output), of four-warp programs (:func:`.fixup_kernel.apart_shape`), rather than first in the tiles'
  launch; a chunked product's fix-up launch takes that shape and place too.
"""
from __future__ import annotations

import functools
import json
import math
import os
import pathlib
import re
from typing import Any, Mapping

from sgemm_cube._jsonio import write_json_atomic

__all__ = ["SCHEMA_VERSION", "KIND", "SCHEMES", "ORDERS", "MODES", "mode_of", "KEYS", "VARIANT_NAMES", "HYBRID_KEYS", "CONFIG_DIR",
           "ConfigError", "validate_config", "validate_document", "load", "defaults", "bucket", "choose",
           "gpu_key", "file_stem", "user_dir", "save"]

SCHEMA_VERSION = 2
KIND = "sgemm_cube.cuda_configs"
CONFIG_DIR = pathlib.Path(__file__).with_name("configs")
#: Split schemes the kernels implement (:mod:`sgemm_cube.cpu_fallback.schemes`).
SCHEMES = ("fp16x3", "fp16x4", "bf16x9", "bf16x6")
#: Accumulation orders of the GEMM kernels (their ``TERMWISE`` switch).
ORDERS = ("termwise", "elementwise")
#: Config table modes: the FP16 orders, ``lo_lo`` (fp16x4) and the BF16 schemes (:func:`mode_of`).
MODES = ("termwise", "elementwise", "lo_lo", "bf16x9", "bf16x6")
_BF16_MODES = ("bf16x9", "bf16x6")


def mode_of(order: str, scheme: str) -> str:
    """Config table mode of a product: the FP16 order, ``"lo_lo"`` (fp16x4) or the BF16 scheme's name."""
    if scheme == "fp16x3":
        return order
    return "lo_lo" if scheme == "fp16x4" else scheme

#: ``gemm_tiles.VARIANTS`` (kept here so that validation needs no triton; a test checks they agree).
VARIANT_NAMES = ("ptr", "tma", "tma_persistent")
#: Thresholds of the hybrid rule (:func:`.hybrid.prefers_native`).
HYBRID_KEYS = ("min_flops", "min_flops_per_matrix", "min_mn", "min_k", "min_tiles")
#: GPU names with a key of their own (``gpu_key``): the first contained in the lower-cased device name.
KNOWN_GPUS = ("h200", "h100", "h800", "h20", "a100")

_POW2_BLOCK = (16, 32, 64, 128, 256, 512)
_WARPS = (1, 2, 4, 8, 16)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _split_block(v) -> bool:
    return v is None or (isinstance(v, (list, tuple)) and len(v) == 2
                         and all(_is_int(x) and x in _POW2_BLOCK for x in v))


#: The launch keys: name -> (check, what the check requires).
KEYS: dict[str, tuple[Any, str]] = {
    "variant": (lambda v: v in VARIANT_NAMES, f"one of {list(VARIANT_NAMES)}"),
    "BLOCK_M": (lambda v: _is_int(v) and v in _POW2_BLOCK, f"a power of two in {list(_POW2_BLOCK)}"),
    "BLOCK_N": (lambda v: _is_int(v) and v in _POW2_BLOCK, f"a power of two in {list(_POW2_BLOCK)}"),
    "BLOCK_K": (lambda v: _is_int(v) and v in _POW2_BLOCK, f"a power of two in {list(_POW2_BLOCK)}"),
    "GROUP_M": (lambda v: _is_int(v) and 1 <= v <= 64, "an integer in [1, 64]"),
    "num_warps": (lambda v: _is_int(v) and v in _WARPS, f"one of {list(_WARPS)}"),
    "num_stages": (lambda v: _is_int(v) and 1 <= v <= 8, "an integer in [1, 8]"),
    "split_corr": (lambda v: isinstance(v, bool), "true or false"),
    "warp_specialize": (lambda v: isinstance(v, bool), "true or false"),
    "split_block": (_split_block, "null or two powers of two in [16, 512]"),
    "split_warps": (lambda v: _is_int(v) and v in _WARPS, f"one of {list(_WARPS)}"),
    "flush_k": (lambda v: _is_int(v) and v >= 0 and v % 16 == 0,
                "0 (never flush) or a positive multiple of 16"),
    "merge_levels": (lambda v: isinstance(v, bool), "true or false"),
    "row_chunks": (lambda v: _is_int(v) and 1 <= v <= 1024, "an integer in [1, 1024]"),
    "col_chunks": (lambda v: _is_int(v) and 1 <= v <= 1024, "an integer in [1, 1024]"),
    "fixup_apart": (lambda v: isinstance(v, bool), "true or false"),
}


class ConfigError(ValueError):
    """A config file, entry or key does not follow the schema (the message names file and key)."""


def validate_config(config: Any, *, source: str = "config", mode: str | None = None) -> dict:
    """Check the launch keys of one config (a subset of :data:`KEYS`); return a copy.

    ``source`` names where the config comes from (file and entry) in the
    error; ``mode``, when given, rejects ``merge_levels: true`` outside the
    BF16 modes (the launcher would ignore it).
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"{source}: config must be an object, got {config!r}")
    for key, value in config.items():
        if key not in KEYS:
            raise ConfigError(f"{source}: unknown config keys [{key!r}]; valid: {list(KEYS)}")
        check, need = KEYS[key]
        if not check(value) and key == "variant":
            raise ConfigError(f"{source}: unknown kernel variant {value!r} (config key 'variant'); "
                              f"choose one of {list(VARIANT_NAMES)}")
        if not check(value):
            raise ConfigError(f"{source}: config key {key}={value!r} must be {need}")
    if mode is not None and mode not in _BF16_MODES and config.get("merge_levels"):
        raise ConfigError(f"{source}: config key merge_levels=True applies to the BF16 modes only "
                          f"({list(_BF16_MODES)}), not {mode!r}")
    out = dict(config)
    if isinstance(out.get("split_block"), list):
        out["split_block"] = list(out["split_block"])
    return out


_ENTRY_KEYS = ("config", "bucket", "max_flops", "max_k", "source", "note", "measured")
_TOP_KEYS = ("schema", "kind", "device", "metadata", "note", "hybrid", "small_k", "interpreter", "auto_scheme",
             *(f"gemm_{m}" for m in MODES))


def _limit(v) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0)


def _entry(e: Any, where: str, mode: str) -> dict:
    if not isinstance(e, Mapping):
        raise ConfigError(f"{where}: entry must be an object")
    for key in e:
        if key not in _ENTRY_KEYS:
            raise ConfigError(f"{where}: unknown entry key {key!r}; valid: {list(_ENTRY_KEYS)}")
    if "config" not in e:
        raise ConfigError(f"{where}: entry has no 'config'")
    validate_config(e["config"], source=where, mode=mode)
    for key in ("max_flops", "max_k"):
        if not _limit(e.get(key)):
            raise ConfigError(f"{where}: entry key {key}={e[key]!r} must be a positive number or null")
    if "bucket" in e:
        b = e["bucket"]
        if not (isinstance(b, list) and len(b) == 3 and all(_is_int(x) and x >= 16 and not x & (x - 1) for x in b)):
            raise ConfigError(f"{where}: entry key bucket={b!r} must be three powers of two >= 16")
        if e.get("max_flops") is not None or e.get("max_k") is not None:
            raise ConfigError(f"{where}: a bucket entry takes no max_flops / max_k")
    if not isinstance(e.get("measured", {}), Mapping):
        raise ConfigError(f"{where}: entry key 'measured' must be an object")
    return dict(e)


def validate_document(doc: Any, source: str = "<document>", *, is_default: bool = False) -> dict:
    """Check a whole file's document; raise :class:`ConfigError` naming ``source`` and the key."""
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{source}: not a JSON object")
    if doc.get("kind") != KIND or doc.get("schema") != SCHEMA_VERSION:
        raise ConfigError(f"{source}: not a schema-{SCHEMA_VERSION} {KIND} file "
                          f"(key 'kind'={doc.get('kind')!r}, key 'schema'={doc.get('schema')!r})")
    for key in doc:
        if key not in _TOP_KEYS:
            raise ConfigError(f"{source}: unknown key {key!r}; valid: {list(_TOP_KEYS)}")
    if not isinstance(doc.get("device"), str) or not doc["device"]:
        raise ConfigError(f"{source}: key 'device' must be a non-empty string")
    if not isinstance(doc.get("metadata", {}), Mapping):
        raise ConfigError(f"{source}: key 'metadata' must be an object")
    hyb = doc.get("hybrid", {})
    if not isinstance(hyb, Mapping):
        raise ConfigError(f"{source}: key 'hybrid' must be an object")
    for key, value in hyb.items():
        if key in HYBRID_KEYS:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
                raise ConfigError(f"{source}: key hybrid.{key}={value!r} must be a non-negative number")
        elif key not in ("source", "note", "faster_but_native"):
            raise ConfigError(f"{source}: unknown key hybrid.{key!r}; valid: {list(HYBRID_KEYS)} "
                              "and 'source', 'note', 'faster_but_native'")
    if is_default and set(HYBRID_KEYS) - set(hyb):
        raise ConfigError(f"{source}: key 'hybrid' must give every threshold {list(HYBRID_KEYS)}")
    for mode in MODES:
        entries = doc.get(f"gemm_{mode}", [])
        if not isinstance(entries, list):
            raise ConfigError(f"{source}: key 'gemm_{mode}' must be a list of entries")
        seen = set()
        for i, e in enumerate(entries):
            e = _entry(e, f"{source}: gemm_{mode}[{i}]", mode)
            if "bucket" in e:
                if tuple(e["bucket"]) in seen:
                    raise ConfigError(f"{source}: gemm_{mode}[{i}]: bucket {e['bucket']} appears twice")
                seen.add(tuple(e["bucket"]))
    if "auto_scheme" in doc:
        auto = doc["auto_scheme"]
        if not is_default:
            raise ConfigError(f"{source}: key 'auto_scheme' belongs in default.json only")
        if not (isinstance(auto, Mapping) and list(auto.get("schemes", ())) == ["fp16x3", "bf16x6"]
                and _limit(auto.get("min_flops")) and auto.get("min_flops") is not None
                and _limit(auto.get("min_k")) and isinstance(auto.get("min_k"), int)
                and isinstance(auto.get("margin"), (int, float)) and not isinstance(auto.get("margin"), bool)
                and 0 <= auto["margin"] <= 1):
            raise ConfigError(f"{source}: key 'auto_scheme' must give schemes ['fp16x3', 'bf16x6'], a positive "
                              f"min_flops, a positive integer min_k and a margin in [0, 1]; got {auto!r}")
    for key in ("small_k", "interpreter"):
        if key not in doc:
            continue
        if not is_default:
            raise ConfigError(f"{source}: key {key!r} belongs in default.json only")
        part = doc[key]
        if not isinstance(part, Mapping) or "config" not in part:
            raise ConfigError(f"{source}: key {key!r} must be an object with a 'config'")
        validate_config(part["config"], source=f"{source}: {key}")
        if key == "small_k" and not (_is_int(part.get("max_k")) and part["max_k"] > 0):
            raise ConfigError(f"{source}: key small_k.max_k={part.get('max_k')!r} must be a positive integer")
    if is_default:
        for mode in MODES:
            if missing := set(KEYS) - set(choose(doc, mode, 1, 1, 1, 1)):
                raise ConfigError(f"{source}: gemm_{mode} must give every launch key; missing {sorted(missing)}")
        if "small_k" not in doc or "interpreter" not in doc or set(KEYS) - set(doc["interpreter"]["config"]):
            raise ConfigError(f"{source}: keys 'small_k' and 'interpreter' (with every launch key) are required")
        if "auto_scheme" not in doc:
            raise ConfigError(f"{source}: key 'auto_scheme' is required")
    return dict(doc)


@functools.lru_cache(maxsize=64)
def _load_cached(path: str, stamp: tuple) -> dict:
    try:
        doc = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable: {exc}") from exc
    return validate_document(doc, path, is_default=pathlib.Path(path).name == "default.json")


def load(path: str | os.PathLike) -> dict:
    """Read and validate one file (cached while its size and mtime stay); raise :class:`ConfigError`."""
    path = pathlib.Path(path)
    st = path.stat()
    return _load_cached(str(path), (st.st_mtime_ns, st.st_size))


def defaults() -> dict:
    """``configs/default.json``."""
    return load(CONFIG_DIR / "default.json")


def bucket(m: int, n: int, k: int) -> tuple[int, int, int]:
    """Shape bucket of an m x k x n product: each size rounded up to a power of two in [16, 2**24]."""
    out = []
    for x in (m, n, k):
        if isinstance(x, bool) or not isinstance(x, int) or x < 0:
            raise ValueError(f"sizes must be non-negative integers, got {(m, n, k)}")
        out.append(1 << min(24, max(4, math.ceil(math.log2(max(x, 1))))))
    return tuple(out)


def choose(doc: Mapping, mode: str, batch: int, m: int, n: int, k: int, *, device_name: str | None = None) -> dict:
    """The config keys ``doc`` sets for one problem of ``mode`` (see the module's docstring).

    Bucket entries are measurements of the file's ``device``: given a
    ``device_name`` that differs (a sibling GPU reading this file), they are
    left out and only the unbucketed entries apply.
    """
    chosen: dict = {}
    entries = doc.get(f"gemm_{mode}", [])
    flops = 2.0 * batch * m * n * k
    for entry in entries:
        if "bucket" in entry:
            continue
        if flops <= (entry.get("max_flops") or math.inf) and k <= (entry.get("max_k") or math.inf):
            chosen.update(entry["config"])
            break
    buckets = [e for e in entries if "bucket" in e]
    if buckets and (device_name is None or device_name == doc.get("device")):
        want = bucket(m, n, k)

        def distance(e) -> tuple:
            d = sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(e["bucket"], want))
            return d, tuple(-x for x in e["bucket"])

        chosen.update(min(buckets, key=distance)["config"])
    return chosen


def gpu_key(device_name: str) -> str:
    """``"h100"``, ``"h200"``, ... for a ``torch.cuda.get_device_name``; ``"default"`` for other GPUs."""
    name = device_name.lower()
    return next((key for key in KNOWN_GPUS if key in name), "default")


def file_stem(device_name: str) -> str:
    """The file name (without ``.json``) a GPU's measured table is written to: its key, or for a
    GPU without one, its name in lower case with other characters than ``[a-z0-9]`` as ``_``."""
    key = gpu_key(device_name)
    if key != "default":
        return key
    return re.sub(r"[^a-z0-9]+", "_", device_name.lower()).strip("_") or "device"


def user_dir() -> pathlib.Path:
    """Where a user's measured tables go and are read first: ``$SGEMM_CUBE_TUNING_DIR/cuda``, else
    ``$XDG_CACHE_HOME/sgemm_cube/tuning/cuda`` (``~/.cache/...``)."""
    env = os.environ.get("SGEMM_CUBE_TUNING_DIR")
    if env:
        base = pathlib.Path(env).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = pathlib.Path(cache) / "sgemm_cube" / "tuning"
    return base / "cuda"


def save(doc: Mapping, path: str | os.PathLike) -> pathlib.Path:
    """Validate ``doc`` and write it atomically to ``path`` (an invalid one leaves the file untouched)."""
    path = pathlib.Path(path)
    validate_document(doc, str(path), is_default=path.name == "default.json")
    return write_json_atomic(path, doc)
