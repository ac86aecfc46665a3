"""Per-GPU tables (tuned configs, native-vs-emulation rule) and the hybrid rule.

``configs/<gpu>.json`` is data written from measurements
(``sgemm_cube/bench_gpu.py (sgemm-cube bench) --write-config``; ``benchmarks/NOTES_gpu.md`` says
which run produced each table).  This module needs neither torch nor triton
at import time.
"""
from __future__ import annotations

import functools
import json
import os
import pathlib

__all__ = ["interpreter_active", "device_key", "load_device_table", "prefers_native", "native_rule"]

_CONFIG_DIR = pathlib.Path(__file__).with_name("configs")
_KNOWN = ("h200", "h100", "h800", "h20", "a100")
_HOPPER = ("h100", "h200", "h800", "h20")

# Without a measured table: native FP32 below 2 * 1024**3 flops or for a
# dimension under 256 (the emulation's two split passes and padding to
# 128x128 tiles cost more than they save there).
_DEFAULT_RULE = {"min_flops": 2.0 * 1024 ** 3, "min_mn": 256, "min_k": 256}


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
    name = torch.cuda.get_device_name(device).lower()
    return next((key for key in _KNOWN if key in name), "default")


@functools.lru_cache(maxsize=None)
def load_device_table(key: str) -> dict:
    """Read ``configs/<key>.json``; for a Hopper GPU without its own table, a sibling's; else ``{}``."""
    siblings = _HOPPER if key in _HOPPER else ()  # same SM, so tile choices transfer
    for name in (key, *siblings):
        path = _CONFIG_DIR / f"{name}.json"
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                return json.load(f)
    return {}


def native_rule(key: str) -> dict:
    """The hybrid thresholds for a table: ``min_flops``, ``min_mn``, ``min_k``."""
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
        True when ``2 * batch * m * n * k < min_flops`` or ``min(m, n) <
        min_mn`` or ``k < min_k``, with the thresholds measured on this GPU
        (``configs/<gpu>.json``, key ``"hybrid"``).  Only ``backend="auto"``
        consults this; ``backend="cuda"`` always runs the emulation.
    """
    rule = native_rule(device_key(device))
    return (2.0 * batch * m * n * k < rule["min_flops"] or min(m, n) < rule["min_mn"]
            or k < rule["min_k"])
