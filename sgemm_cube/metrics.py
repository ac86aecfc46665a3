"""Accuracy metrics, as the source papers define them.

Every accuracy figure in this package (tests, demo, benchmarks, studies) is
one of these, computed against a float64 reference product.
"""
from __future__ import annotations

import numpy as np

__all__ = ["relative_error", "reference_matmul64", "to_numpy", "snr_db", "componentwise_relative_error",
           "dot_condition_numbers"]


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
    ref : ndarray or tensor, float64
        Reference result of the same shape (any device).
    """
    ref = to_numpy(ref).astype(np.float64)
    diff = to_numpy(c).astype(np.float64) - ref
    return float(np.linalg.norm(diff.ravel()) / np.linalg.norm(ref.ravel()))


def snr_db(c, ref) -> float:
    """Signal-to-noise ratio in decibels, ``-20 log10(RMS)`` (BF16x9 paper Eq. 6, 7).

    The paper's RMS, ``sqrt(sum (c - ref)**2 / sum ref**2)``, is the relative
    Frobenius error of :func:`relative_error`; so 140 dB is a relative error
    of 1e-7 and every 20 dB is a factor of 10.

    Parameters
    ----------
    c : array or tensor
        Computed result, any float dtype.
    ref : ndarray, float64
        Reference result of the same shape (not all zero).

    Returns
    -------
    float
        SNR in dB; ``inf`` for an exact result, NaN if ``c`` is not finite.
    """
    rms = relative_error(c, ref)
    if not np.isfinite(rms):
        return float("nan")
    return float("inf") if rms == 0 else float(-20.0 * np.log10(rms))


def componentwise_relative_error(c, ref) -> np.ndarray:
    """Elementwise relative error ``|c - ref| / |ref|`` in float64.

    Parameters
    ----------
    c : array or tensor
        Computed result, any float dtype.
    ref : ndarray, float64
        Reference result of the same shape.

    Returns
    -------
    ndarray, float64, same shape
        Where ``ref == 0``: 0 if ``c`` is also 0, otherwise ``inf``.
    """
    ref = np.asarray(ref, dtype=np.float64)
    diff = np.abs(to_numpy(c).astype(np.float64) - ref)
    scale = np.abs(ref)
    out = np.where(diff == 0, 0.0, np.inf)
    np.divide(diff, scale, out=out, where=scale > 0)
    return out


def dot_condition_numbers(a, b) -> np.ndarray:
    """Condition number of every dot product of ``a @ b`` (BF16x9 paper Eq. 2).

    ``kappa[i, j] = ||a[i, :]||_2 ||b[:, j]||_2 / |a[i, :] . b[:, j]|``,
    computed in float64 from the given values: 1 for parallel vectors,
    large for nearly orthogonal ones.

    Parameters
    ----------
    a : array or tensor, shape (M, K)
    b : array or tensor, shape (K, N)

    Returns
    -------
    ndarray, shape (M, N), float64
        ``inf`` where the exact dot product is 0.
    """
    a64 = to_numpy(a).astype(np.float64)
    b64 = to_numpy(b).astype(np.float64)
    norms = np.linalg.norm(a64, axis=1)[:, None] * np.linalg.norm(b64, axis=0)[None, :]
    dots = np.abs(a64 @ b64)
    out = np.full(dots.shape, np.inf)
    np.divide(norms, dots, out=out, where=dots > 0)
    return out
