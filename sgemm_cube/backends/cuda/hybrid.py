"""Per-GPU tables (tuned configs, native-vs-emulation rule) and the hybrid rule.

``configs/<gpu>.json`` is data written from measurements by ``tuning/gpu.py``
(the schema and its validator: :mod:`.configs`; ``docs/cuda_design.md`` says
which run produced each table).  This module needs neither torch nor triton
at import time.
"""
from __future__ import annotations

import functools
import os

from . import configs as _configs
__all__ = ["interpreter_active", "device_key", "load_device_table", "prefers_native", "native_rule"]

_CONFIG_DIR = _configs.CONFIG_DIR
_HOPPER = ("h100", "h200", "h800", "h20")

#: Without a measured rule: ``configs/default.json``'s ``"hybrid"`` thresholds.
_DEFAULT_RULE = {k: _configs.defaults()["hybrid"][k] for k in _configs.HYBRID_KEYS}
#: The output tile of the rule's ``min_tiles`` (the GEMM's default 128 x 128).
_RULE_TILE = 128


def interpreter_active() -> bool:
    """Whether Triton runs kernels in its NumPy interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def device_key(device) -> str:
    """Table name for a device: ``"h100"``, ``"h200"``, ..., ``"default"``, or
    ``"interpreter"`` for CPU tensors under ``TRITON_INTERPRET=1``."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return "interpreter"
    return _cuda_key(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _cuda_key(index: int) -> str:
    import torch

    return _configs.gpu_key(torch.cuda.get_device_name(index))


@functools.lru_cache(maxsize=None)
def load_device_table(key: str) -> dict:
    """``configs/<key>.json``, validated (:func:`.configs.load`); for a Hopper GPU without its own
    table, a sibling's (same SM, so tile choices transfer); else ``{}``.  ``"default"`` (a GPU
    without a key of its own) reads ``default.json``, which holds every fallback."""
    siblings = _HOPPER if key in _HOPPER else ()
    for name in (key, *siblings):
        path = _CONFIG_DIR / f"{name}.json"
        if path.is_file():
            return _configs.load(path)
    return {}


@functools.lru_cache(maxsize=None)
def native_rule(key: str) -> dict:
    """The hybrid thresholds for a table: ``min_flops``, ``min_flops_per_matrix``, ``min_mn``, ``min_k``, ``min_tiles``."""
    rule = dict(_DEFAULT_RULE)
    rule.update({k: v for k, v in load_device_table(key).get("hybrid", {}).items() if k in rule})
    return rule


def prefers_native(batch: int, m: int, n: int, k: int, device) -> bool:
    """Whether cuBLAS SGEMM is expected to beat the emulation on this problem.

    Parameters
    ----------
    batch, m, n, k : int
        Problem size: ``batch`` products of (m, k) @ (k, n).
    device : torch.device or str
        The operands' device (selects the measured table).

    Returns
    -------
    bool
        True when ``2 * batch * m * n * k < min_flops``, ``2 * m * n * k <
        min_flops_per_matrix``, ``min(m, n) < min_mn``, ``k < min_k`` or the
        product has fewer than ``min_tiles`` 128 x 128 output tiles, with the thresholds measured on this GPU
        (``configs/<gpu>.json``, key ``"hybrid"``).  Few output tiles leave
        multiprocessors idle, and few rows or columns leave the split pass
        (one program per group of whole rows) with little parallelism.  Only
        ``backend="auto"`` consults this; ``backend="cuda"`` always runs the
        emulation.
    """
    rule = native_rule(device_key(device))
    tiles = batch * -(-m // _RULE_TILE) * -(-n // _RULE_TILE)
    flops = 2.0 * m * n * k
    return (batch * flops < rule["min_flops"] or flops < rule["min_flops_per_matrix"] or min(m, n) < rule["min_mn"]
            or k < rule["min_k"] or tiles < rule["min_tiles"])
