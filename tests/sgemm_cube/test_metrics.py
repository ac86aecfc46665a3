"""sgemm_cube.metrics: each metric against values worked out by hand, and its edge cases."""
import numpy as np
import pytest

from sgemm_cube.metrics import (componentwise_relative_error, dot_condition_numbers, reference_matmul64,
                                relative_error, snr_db, to_numpy)


def test_reference_is_the_float64_product_of_the_float32_values():
    a = np.array([[1 + 2.0 ** -20, 3.0]], dtype=np.float32)
    b = np.array([[1 - 2.0 ** -20], [2.0 ** -30]], dtype=np.float32)
    ref = reference_matmul64(a, b)
    assert ref.dtype == np.float64
    # (1 + e)(1 - e) + 3 * 2**-30 with e = 2**-20, exact in float64 (not in float32).
    assert ref[0, 0] == 1 - 2.0 ** -40 + 3 * 2.0 ** -30


def test_relative_error_is_the_frobenius_ratio():
    ref = np.array([[3.0, 0.0], [0.0, 4.0]])
    c = np.array([[3.0, 0.0], [0.0, 4.0 + 0.5]], dtype=np.float32)
    assert relative_error(c, ref) == pytest.approx(0.5 / 5.0, rel=1e-15)
    assert relative_error(ref, ref) == 0.0


def test_snr_db_is_minus_20_log10_of_the_relative_error():
    ref = np.array([3.0, 4.0])
    assert snr_db(ref + np.array([5e-7, 0.0]), ref) == pytest.approx(140.0)  # relative error 1e-7
    assert snr_db(ref, ref) == float("inf")
    assert np.isnan(snr_db(np.array([np.nan, 4.0]), ref))


def test_componentwise_error_at_zero_references():
    ref = np.array([2.0, 0.0, 0.0, -4.0])
    c = np.array([2.5, 0.0, 1e-30, -4.0], dtype=np.float32)
    out = componentwise_relative_error(c, ref)
    assert out.tolist() == [0.25, 0.0, np.inf, 0.0]  # 0 where both are 0, inf where only ref is


def test_dot_condition_numbers():
    a = np.array([[1.0, 0.0], [1.0, 1.0]], dtype=np.float32)
    b = np.array([[2.0, 1.0], [0.0, -1.0]], dtype=np.float32)  # columns (2, 0) and (1, -1)
    kappa = dot_condition_numbers(a, b)
    # Row (1, 0) with column (2, 0): parallel, 1.  Row (1, 1) with column (1, -1): orthogonal, inf.
    assert kappa[0, 0] == 1.0
    assert kappa[1, 1] == np.inf
    # Row (1, 1) with column (2, 0): |a| |b| / |a.b| = sqrt(2) * 2 / 2.
    assert kappa[1, 0] == pytest.approx(np.sqrt(2.0))


def test_metrics_take_torch_tensors():
    torch = pytest.importorskip("torch")
    a = torch.tensor([[1.0, 2.0]], requires_grad=True)
    assert isinstance(to_numpy(a), np.ndarray) and to_numpy(a).tolist() == [[1.0, 2.0]]
    x = np.array([1.0, 2.0])
    assert to_numpy(x) is x  # arrays pass through, no copy
    assert relative_error(torch.tensor([3.0, 4.0]), torch.tensor([3.0, 4.0], dtype=torch.float64)) == 0.0
