"""Every GPU test runs with TF32 off, so that native means true FP32 SGEMM (restored afterwards)."""
import sys

import pytest


@pytest.fixture(autouse=True)
def _true_fp32():
    torch = sys.modules["torch"]  # imported by the module's require_gpu() (else the module was skipped)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old
