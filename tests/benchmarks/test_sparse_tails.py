"""``benchmarks/sparse_tails.py``'s partition ``A B = A' B' + A_tail B' + A B_tail`` under Triton's interpreter:
the tails kernel's output is within the componentwise bound, with its lines consecutive or sorted by tail length
(the same bits), and the same GEMM without its tails is not."""
import math

import pytest

from tests.sgemm_cube.backends.cuda import require_interpreter

torch = require_interpreter("benchmarks/sparse_tails.py on a GPU")

from benchmarks.sparse_tails import split_tails, tail_counts, tails_product  # noqa: E402


def _bound_used(c, a, b):
    ref = a.double() @ b.double()
    bound = (a.double().abs() @ b.double().abs()) * (a.shape[1] * 2.0 ** -24)
    return ((c.double() - ref).abs() / bound).nan_to_num(nan=math.inf).max().item()


def _wide_rows(n, generator):
    """Log-normal (sigma 3) entries of random sign: a few entries of most lines lie below the split."""
    return torch.exp(3 * torch.randn(n, n, generator=generator)) * torch.randn(n, n, generator=generator).sign()


@pytest.mark.parametrize("seed", [0, 1])
def test_tails_restore_the_bound(seed):
    gen = torch.Generator().manual_seed(seed)
    n = 256
    a, b = _wide_rows(n, gen), _wide_rows(n, gen)
    b[5, :] = 2.0 ** -70  # the entry at k = 5 of every column is in its tail: A's tails meet B's
    # Output (3, 7): row 3's tail (all but its largest entry, 1) meets column 7's largest entries (2**40);
    # column 7's tail (its entry 1 at k = 1) meets row 3's largest.
    a[3, :] = 2.0 ** -60
    a[3, 1] = 1.0
    b[:, 7] = 2.0 ** 40
    b[1, 7] = 1.0
    counts = tail_counts(a, 0), tail_counts(b, 1)
    assert int(counts[0][3]) == n - 1 and int(counts[1].min()) >= 1 and int(counts[1][7]) == 1
    cap = max(int(counts[0].max()), int(counts[1].max()))
    launchers, sorted_c = tails_product(a, b, cap=cap, sort=True)
    for launch in launchers.values():
        launch()
    launchers, c = tails_product(a, b, cap=cap)
    for launch in launchers.values():
        launch()
    assert _bound_used(c, a, b) <= 1.0  # SGEMM's bound K 2**-24 |A||B|
    assert torch.equal(sorted_c, c)  # the lines' order changes no output's sum
    # The same GEMM, unscaled, without the tails: output (3, 7) loses 255 2**-20 of |A||B| (bound: 2**-16).
    launchers["gemm"]()
    fa, fb = split_tails(a, 0, 1)[2], split_tails(b, 1, 1)[2]
    without = c * fa[:, None] * fb[None, :]
    assert _bound_used(without[3:4, 7:8], a[3:4], b[:, 7:8]) > 10.0
