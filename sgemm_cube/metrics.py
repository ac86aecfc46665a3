"""Accuracy metrics, as the source papers define them.

Every accuracy figure in this package (tests, demo, benchmarks, studies) is
one of these, computed against a float64 reference product.
"""
from __future__ import annotations

import numpy as np

__all__ = ["relative_error", "reference_matmul64", "to_numpy"]


def to_numpy(x) -> np.ndarray:
    """NumPy copy/view of an array or a torch tensor (any device)."""
    if isinstance(x, np.ndarray):
        return x
    return x.detach().cpu().numpy()


def reference_matmul64(a, b) -> np.ndarray:
    """The float64 product ``a @ b`` on the host: the ground truth (FP64 DGEMM)."""
    return np.matmul(to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64))


def relative_error(c, ref) -> float:
    """Relative Frobenius error ``||ref - c||_F / ||ref||_F`` (SGEMM-cube Eq. 12).

    Parameters
    ----------
    c : array or tensor
        Computed result, any float dtype.
    ref : ndarray, float64
        Reference result of the same shape.
    """
    ref = np.asarray(ref, dtype=np.float64)
    diff = to_numpy(c).astype(np.float64) - ref
    return float(np.linalg.norm(diff.ravel()) / np.linalg.norm(ref.ravel()))
