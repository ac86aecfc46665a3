"""The CUDA backend's kernels under Triton's interpreter (CI has no GPU); ``tests/gpu`` runs them compiled."""
import os
import sys

import pytest


def require_interpreter(gpu_tests: str):
    """Make the calling test module run the kernels under ``TRITON_INTERPRET=1``; return torch.

    Call it at the top of the module, before anything imports triton: triton picks the interpreter when its
    own and our ``@triton.jit`` functions are defined.  Skips the module where torch or triton is missing, or
    where a GPU is present and the interpreter was not asked for (``gpu_tests`` names the module that runs
    the compiled kernels there); fails where triton was imported too early to switch.
    """
    torch = pytest.importorskip("torch")
    if os.environ.get("TRITON_INTERPRET", "0") != "1":
        if torch.cuda.is_available():
            pytest.skip(f"a GPU is present: {gpu_tests} runs the compiled kernels", allow_module_level=True)
        if "triton" in sys.modules:
            pytest.fail("triton was imported before this module could set TRITON_INTERPRET=1; "
                        "set it in the environment", pytrace=False)
        os.environ["TRITON_INTERPRET"] = "1"
    pytest.importorskip("triton")
    return torch
