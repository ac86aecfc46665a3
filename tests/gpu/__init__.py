"""GPU tests: ``pytest tests/gpu`` on a machine with a CUDA GPU (not part of CI)."""
import os

import pytest


def require_gpu():
    """Skip the calling test module unless torch, triton and a CUDA GPU are here; return torch.

    Also skips under ``TRITON_INTERPRET=1``, which would run the kernels on the CPU: run
    ``tests/gpu`` in a pytest process of its own.
    """
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU", allow_module_level=True)
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        pytest.skip("TRITON_INTERPRET=1: run tests/gpu in its own pytest process", allow_module_level=True)
    pytest.importorskip("triton")
    return torch
