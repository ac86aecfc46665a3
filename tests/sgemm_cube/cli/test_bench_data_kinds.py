"""The wide-range data kinds of ``sgemm-cube bench --matrix`` (issue 33), on the CPU.

Each generator is checked for shape, dtype, finiteness and seeding, and for the property it is
there for (rows spanning many binades, exact zeros, column scales); :func:`bench_gpu.fixup_fractions`
against lines built to be listed or not.  No GPU, no timing.
"""
import argparse
import json
import math

import pytest

torch = pytest.importorskip("torch")

from sgemm_cube.cli import bench_gpu  # noqa: E402
from sgemm_cube.cli.bench_gpu import WIDE_RANGE_KINDS, BenchProblem  # noqa: E402


def _data(kind, m, n, k, seed=0, batch=1):
    lead = (batch,) if batch > 1 else ()
    return bench_gpu.make_data(kind, (*lead, m, k), (*lead, k, n), "cpu", torch.Generator().manual_seed(seed))


def _span(x, dim):
    """Binades between the largest and the smallest nonzero magnitude of each line along ``dim``."""
    mag = x.abs().double()
    small = torch.where(mag > 0, mag, torch.tensor(math.inf, dtype=torch.float64)).amin(dim)
    return torch.log2(mag.amax(dim) / small)


@pytest.mark.parametrize("kind", WIDE_RANGE_KINDS)
@pytest.mark.parametrize("batch, m, n, k", [(1, 64, 48, 96), (1, 33, 20, 200), (2, 17, 5, 40)])
def test_wide_range_operands_are_seeded_finite_float32(kind, batch, m, n, k):
    assert kind in bench_gpu.DATA_KINDS and bench_gpu.DATA_KINDS[kind]  # a line saying what it is
    a, b = _data(kind, m, n, k, batch=batch)
    lead = (batch,) if batch > 1 else ()
    assert a.shape == (*lead, m, k) and b.shape == (*lead, k, n)
    assert a.dtype == b.dtype == torch.float32 and a.is_contiguous() and b.is_contiguous()
    assert torch.isfinite(a).all() and torch.isfinite(b).all()
    assert (a != 0).any(dim=-1).all()  # no empty row: every output has work
    a2, b2 = _data(kind, m, n, k, batch=batch)
    assert torch.equal(a, a2) and torch.equal(b, b2)  # the seed fixes the data
    a3, b3 = _data(kind, m, n, k, seed=1, batch=batch)
    assert not (torch.equal(a, a3) and torch.equal(b, b3))


def test_unknown_wide_range_kind_is_refused():
    with pytest.raises(ValueError, match="vandermonde"):
        bench_gpu.make_wide_range("chebyshev", (4, 4), (4, 4), "cpu")


def test_vandermonde_holds_powers_and_rows_span_many_binades():
    a, _ = _data("vandermonde", 512, 8, 200)
    x = a[:, 1].double()
    assert ((x >= 0.5) & (x < 2)).all()
    assert (a[:, 0] == 1).all() and (a[:, 96] == 1).all() and (a[:, 192] == 1).all()  # x_v^0 per variable
    for p in (2, 17, 95):
        assert torch.allclose(a[:, p].double(), x ** p, rtol=1e-5)
    assert torch.allclose(a[:, 96 + 5].double(), a[:, 97].double() ** 5, rtol=1e-5)  # the second variable
    assert a.abs().max() < 2.0 ** 96 and a.abs().min() >= 2.0 ** -96
    span = _span(a[:, :96], -1)
    assert (span >= 40).float().mean() >= 0.5  # the split holds about 29 binades


def test_laplace_kernels_span_binades_by_length_scale():
    wide, _ = _data("laplace h=0.05", 256, 4, 256)
    assert (torch.diagonal(wide) == 1).all() and (wide <= 1).all()  # square: the points' own kernel
    assert torch.allclose(wide, wide.T)
    assert (_span(wide, -1) >= 20).all()
    wider, _ = _data("laplace h=0.01", 256, 4, 256)
    assert _span(wider, -1).median() >= 100
    tiny = (wider > 0) & (wider < torch.finfo(torch.float32).tiny)
    assert tiny.any() and (wider == 0).any()  # subnormals and underflowed zeros
    rect, _ = _data("laplace h=0.05", 40, 4, 100)  # not square: other points
    assert rect.shape == (40, 100) and (rect < 1).all()


def test_log_normal_on_both_operands_or_a_only():
    a, b = _data("log-normal both s=3", 64, 512, 1024)
    assert (a > 0).all() and (b > 0).all()
    assert _span(a, -1).median() >= 20 and _span(b, -2).median() >= 20
    z = torch.log(a.double()) / 3  # standard normal
    assert abs(float(z.std()) - 1) < 0.05
    a1, b1 = _data("log-normal s=3", 64, 512, 1024)
    assert (a1 > 0).all() and (b1 < 0).any() and _span(a1, -1).median() >= 20


def test_gram_operands_are_x_transposed_and_x_with_wide_column_scales():
    a, b = _data("gram X^T X", 300, 200, 500)
    assert torch.equal(a[:200], b.T)  # X is (500 samples, 300 features): a = X^T, b = its first 200 columns
    rms = b.double().square().mean(0).sqrt()
    assert math.log2(float(rms.max() / rms.min())) >= 20  # columns at scales 1e-4..1e4
    assert float(rms.max()) < 1e6 and float(rms.min()) > 1e-6


def test_power_law_graph_is_sparse_normalised_and_heavy_tailed():
    a, _ = _data("power-law graph", 512, 8, 512)
    assert torch.equal(a, a.T) and (torch.diagonal(a) > 0).all()  # symmetric, self-loops
    assert (a == 0).float().mean() >= 0.9  # mostly exact zeros
    assert (a >= 0).all() and (a <= 1).all()
    degree = (a > 0).sum(-1).double()
    assert degree.max() >= 10 * degree.median()  # hubs
    nz = a[a > 0].double()
    assert math.log2(float(nz.max() / nz.min())) >= 5  # 1/sqrt(d_i d_j): hubs against leaves
    d = degree.rsqrt()
    assert torch.allclose(a.double(), (a > 0).double() * d[:, None] * d[None, :], rtol=1e-5)


def test_fixup_fractions_count_listed_rows_columns_and_outputs():
    a = torch.randn(8, 32)
    b = torch.randn(32, 4)
    assert bench_gpu.fixup_fractions(a, b) == {"rows": 0.0, "cols": 0.0, "outputs": 0.0, "scheme": "fp16x3"}
    a[3, ::2] *= 2.0 ** -40  # a row mixing 1 and 2^-40: loses bits in the split...
    assert bench_gpu.fixup_fractions(a, b)["rows"] == 0.0  # ...emulated beside tight columns (guard.fp16_rule)
    b[0] = 0  # ...listed beside columns holding a zero
    b[5, 1] = float("nan")   # a special column: listed even with fixup=False
    f = bench_gpu.fixup_fractions(a, b)
    assert f["rows"] == 1 / 8 and f["cols"] == 1 / 4
    assert f["outputs"] == pytest.approx((1 * 4 + 8 * 1 - 1) / 32)
    assert bench_gpu.fixup_fractions(a, b, fixup=False) == {"rows": 0.0, "cols": 0.25, "outputs": 0.25,
                                                            "scheme": "fp16x3"}
    # batched, B broadcast
    f = bench_gpu.fixup_fractions(torch.stack([a, torch.randn(8, 32)]), b.expand(2, 32, 4))
    assert f["rows"] == pytest.approx(1 / 16) and f["cols"] == 0.25


def test_fixup_fractions_of_the_wide_range_kinds():
    """Lines past the split's ~29 binades are emulated beside random normal columns (no zero, within 23
    binades: ``guard.fp16_rule``) and listed beside log-normal ones; one scale per line (Gram) or a narrow one
    (graph) is not listed."""
    listed = {kind: bench_gpu.fixup_fractions(*_data(kind, 256, 64, 256)) for kind in WIDE_RANGE_KINDS}
    a, b = _data("laplace h=0.01", 256, 64, 256)
    assert (_span(a, -1) > 29).all() and (_span(_data("vandermonde", 256, 64, 96)[0], -1) > 29).float().mean() > 0.5
    assert all(listed[kind]["outputs"] == 0.0 for kind in ("laplace h=0.01", "laplace h=0.05", "vandermonde",
                                                             "log-normal s=3", "gram X^T X", "power-law graph"))
    assert listed["log-normal both s=3"]["rows"] > 0 and listed["log-normal both s=3"]["cols"] > 0
    assert all(f["cols"] == 0.0 for kind, f in listed.items() if kind != "log-normal both s=3")
    # BF16 slices hold lines up to 99 binades: the log-normal rows and one variable's Vandermonde features
    # (K = 96: x^0..x^95, x in [0.5, 2)) are not listed there; the Laplacian rows (spanning 100-150 binades)
    # reach 152 binades below their top beside normal columns (guard.bf16_rule), so they are not either
    bf16 = {kind: bench_gpu.fixup_fractions(*_data(kind, 256, 64, 96 if kind == "vandermonde" else 256),
                                            scheme="bf16x6")
            for kind in ("vandermonde", "log-normal both s=3", "laplace h=0.01")}
    assert all(f["outputs"] == 0.0 for f in bf16.values()), bf16
    assert (_span(a, -1) > 99).all()  # listed without the columns' summary (the range alone)
    # scheme="auto": the one the GPU chooses (bf16x6 where fp16x3 lists 35% more of the outputs)
    assert bench_gpu.fixup_fractions(a, b, scheme="auto")["scheme"] == "fp16x3"
    assert bench_gpu.fixup_fractions(*_data("log-normal both s=3", 256, 256, 1024), scheme="auto")["scheme"] == "bf16x6"
    assert bench_gpu.fixup_fractions(*_data("gram X^T X", 256, 64, 256), scheme="auto")["scheme"] == "fp16x3"


def test_matrix_has_the_wide_range_problems_and_only_selects_them(tmp_path, monkeypatch):
    probs = bench_gpu.matrix_problems()
    wide = bench_gpu.wide_range_problems()
    assert all(p in probs for p in wide) and len({p.name for p in probs}) == len(probs)
    assert {p.data for p in wide} == set(WIDE_RANGE_KINDS)
    short_k = {p.data for p in wide if (p.m, p.n, p.k) == (8192, 4096, 96)}  # the Vandermonde shape
    assert short_k == set(WIDE_RANGE_KINDS)  # every kind at it
    cubes = {(p.m, p.data) for p in wide if p.k != 96 and p.m == p.n == p.k}
    assert cubes == {(s, kind) for s in (4096, 2048, 1536) for kind in WIDE_RANGE_KINDS}
    worst = {(p.data, p.m, p.n, p.k) for p in wide if (p.m, p.n, p.k) == (8192, 8192, 64)}
    assert worst == {("log-normal both s=3", 8192, 8192, 64)}  # the slowest short-K case measured (0.97x)
    assert len(wide) == len(short_k) + len(cubes) + len(worst)  # nothing else
    # make_operands builds them (a small copy of each problem)
    for p in wide:
        a, b = bench_gpu.make_operands(p._replace(m=16, n=8, k=min(p.k, 24)), "cpu", torch.Generator().manual_seed(0))
        assert a.shape == (16, min(p.k, 24)) and b.shape == (min(p.k, 24), 8)

    seen = []
    monkeypatch.setattr(bench_gpu, "run_matrix", lambda problems, **kw: seen.extend(problems) or [])
    parser = argparse.ArgumentParser()
    bench_gpu._add_arguments(parser)
    args = parser.parse_args(["--matrix", "--only", "wide-range", "--results-dir", str(tmp_path)])
    doc = {}
    assert bench_gpu._run_matrix_mode(args, {"device": "test"}, "h100", "stamp",
                                      lambda path, d: doc.update(json.loads(json.dumps(d, default=str)))) == 0
    assert seen == list(wide) and doc["rows"] == []


def test_table_shows_the_listed_fractions():
    p = BenchProblem("wide-range test", 1, 8, 8, 8, "wide-range", data="vandermonde")
    times = dict.fromkeys(bench_gpu.MATRIX_METHODS, 1.0)
    row = dict(p._asdict(), flops=1024.0, gpu_ms=dict(times), host_ms=dict(times), failed={},
               rel_err=dict.fromkeys(times, 1e-7), explain={"backend": "cuda", "scheme": "fp16x3"},
               fixup_listed={"rows": 0.5, "cols": 0.25, "outputs": 0.625})
    bench_gpu._derive_rates(row)
    assert "0.50/0.25" in bench_gpu.format_matrix_table([row]) and "0.50/0.25" in bench_gpu._row_line(row)
    row.pop("fixup_listed")
    assert "wide-range test" in bench_gpu.format_matrix_table([row])
