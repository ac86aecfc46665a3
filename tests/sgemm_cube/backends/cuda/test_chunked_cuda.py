"""Chunked products of the CUDA backend (config keys ``row_chunks``, ``col_chunks``) under TRITON_INTERPRET=1.

A chunked product holds the split slices of one chunk of A's rows and one chunk of B's columns at a time
(:func:`sgemm_cube.backends.cuda.launch._chunked_launches`), so that its workspace shrinks towards the
whole operands' line meta.  The line meta, the fix-up lists and the scheme ``"auto"`` chooses are the
whole operands', computed once, so what is claimed and checked here is:

* every output has the bits of the product unchunked, for fp16x3, bf16x6 and ``"auto"``, on normal,
  log-normal and special data (NaN, Inf, listed rows and columns, near-overflow entries), with chunks
  that do not divide the shape, transposed operands and an output with a wider row stride;
* the overflow recheck of a tile in a chunk away from the origin finds its outputs (the list holds
  whole-product coordinates): the exact 0s of cancelling huge terms, as unchunked;
* the workspace shrinks as the plan says (slices of a chunk per operand), and a batch is not chunked;
* the keys are checked like every config key;
* a workspace that does not fit in the GPU's memory (played here: the allocation raises PyTorch's OOM
  error above a limit) runs in the first chunks of ``launch.OOM_CHUNKS`` that fit, with a warning and the
  same bits; a batch runs in slices of its matrices, each with the bits of that matrix called alone; too
  little memory for any chunks of one matrix keeps the error.

The compiled kernels on a GPU, and the cached replay there: ``tests/gpu/test_cuda_gpu.py``.
"""
import numpy as np
import pytest

from tests.sgemm_cube.backends.cuda import require_interpreter

torch = require_interpreter("tests/gpu/test_cuda_gpu.py")

from sgemm_cube.backends.cuda import configs, launch  # noqa: E402

from tests.guarantee_data import check_emulated_overflow, emulated_overflow_cases  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _run(a, b, scheme, chunks=None, out=None, apart=False):
    """``launch.run`` (default options otherwise) on 3-D CPU tensors, chunked as ``chunks`` (rows, cols), the
    fix-up in a launch of its own after the tiles' with ``apart`` (config key ``fixup_apart``)."""
    if out is None:
        out = torch.full((a.shape[0], a.shape[1], b.shape[2]), float("nan"))
    cfg = {} if chunks is None else {"row_chunks": chunks[0], "col_chunks": chunks[1]}
    cfg = {**cfg, "fixup_apart": True} if apart else cfg or None
    launch.run(a, b, out, sb=12, order="termwise", scheme=scheme, scale="auto", fixup=True, config=cfg)
    return out


def _data(kind, m, k, n):
    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(1, m, k, generator=gen), torch.randn(1, k, n, generator=gen)
    if kind == "log-normal":
        a, b = torch.exp(3 * a), torch.exp(3 * b)
    elif kind == "special":
        a[0, 5, 3] = 1e-30          # a row the FP16 split cannot hold: listed (fp16x3)
        a[0, 70, :] *= 1e20         # a row scaled down
        b[0, 7, 60] = float("inf")  # a column of NaN/Inf outputs
        b[0, :, 33] *= 2.0 ** -60   # a column scaled up
        a[0, 90, 1], a[0, 90, 2] = 3e38, -3e38
    return a, b


def _same_bits(x, y):
    return torch.equal(x.view(torch.int32), y.view(torch.int32))


@pytest.mark.parametrize("kind", ["normal", "log-normal", "special"])
@pytest.mark.parametrize("scheme", ["fp16x3", "bf16x6", "auto"])
def test_chunked_products_have_the_bits_of_the_whole(kind, scheme):
    """100 x 40 x 90 (the interpreter's 32 x 32 tiles): 2 x 2 chunks of 64 lines (the last short), one chunk
    of rows with 3 of columns, and 4 x 1; and with the fix-up in a launch of its own after the tiles', whole and
    2 x 2 (the tiles store every output, the fix-up overwrites its lines' outputs)."""
    a, b = _data(kind, 100, 40, 90)
    whole = _run(a, b, scheme)
    for chunks in ((3, 2), (1, 3), (4, 1)):
        assert _same_bits(_run(a, b, scheme, chunks), whole), (kind, scheme, chunks)
    for chunks in (None, (3, 2)):
        assert _same_bits(_run(a, b, scheme, chunks, apart=True), whole), (kind, scheme, chunks, "apart")


@pytest.mark.parametrize("apart_scheme", ["fp16x3", "bf16x6"])
def test_fixup_apart_in_one_of_auto_s_configs(monkeypatch, apart_scheme):
    """Under ``scheme="auto"`` the two schemes' configs may disagree on ``fixup_apart`` (each scheme reads its own
    entry): whole and chunked, where the device chooses either scheme, every output has the bits of the product
    with neither apart -- the tiles store every output only where the fix-up launch comes after theirs.  The
    device chooses fp16x3 on the special values' data and bf16x6 on the wide rows, each with lines listed."""
    monkeypatch.setattr(launch, "AUTO_MIN_FLOPS", 0.0)
    resolve = launch.resolve_config

    def one_apart(*args, scheme="fp16x3", config=None, **kw):
        return resolve(*args, scheme=scheme, config={**(config or {}), "fixup_apart": scheme == apart_scheme}, **kw)

    cases = {"special": _data("special", 100, 40, 90), "wide rows": _data("normal", 100, 40, 90)}
    a, b = cases["wide rows"]  # the device chooses fp16x3 on the first, bf16x6 on these
    a.copy_(torch.exp(6 * a))  # rows spanning 40 binades or more: more than fp16x3's split holds
    a[0, :, 0] = a[0, :, 1:].amax(dim=1) * 2.0 ** -40
    b[0, 0, :] = 0  # every column holds a zero: fp16x3 lists every wide row, bf16x6 none
    b[0, 7, 60] = float("inf")  # a fix-up column under both schemes
    want = {kind: {chunks: _run(a, b, "auto", chunks) for chunks in (None, (3, 2))} for kind, (a, b) in cases.items()}
    monkeypatch.setattr(launch, "resolve_config", one_apart)
    for kind, (a, b) in cases.items():
        for chunks in (None, (3, 2)):
            assert _same_bits(_run(a, b, "auto", chunks), want[kind][chunks]), (kind, chunks)


def test_chunked_strided_operands_and_output():
    """A transposed (its rows strided), B a column slice of a wider matrix, the output a block of a wider
    buffer: the chunks' first lines are found through the strides."""
    a, b = _data("special", 100, 40, 90)
    at = a[0].T.contiguous().T[None]                    # (1, 100, 40), strides (., 1, 100)
    wide_b = torch.zeros(1, 40, 130)
    wide_b[:, :, 20:110] = b
    bv = wide_b[:, :, 20:110]                           # row stride 130
    whole = _run(at, bv, "fp16x3")
    buffer = torch.full((1, 100, 120), 7.0)
    got = _run(at, bv, "fp16x3", (3, 2), out=buffer[:, :, 10:100])
    assert _same_bits(got, whole)
    assert (buffer[:, :, :10] == 7).all() and (buffer[:, :, 100:] == 7).all()  # nothing written outside


def test_overflow_recheck_of_a_chunk_away_from_the_origin():
    """Sixteen of the "cancelling" rows (huge terms whose exact sums are 0, some of whose emulated sums
    overflow) placed at rows 64.. of A, their column at column 40 of B, among normal lines; two chunks of
    rows and three of columns: the recheck computes the infinite outputs again there (exact 0s), as the
    product unchunked does.  Rows 16-31 of the case: the recheck's FP64 sums decide some of their outputs and
    the exact path computes others (the whole case took four times as long under the interpreter)."""
    name, ra, rb = emulated_overflow_cases(np.random.default_rng(1))[0]   # (64, 96) @ (96, 1)
    ra = ra[16:32]
    rng = np.random.default_rng(2)
    a = rng.standard_normal((80, 96)).astype(np.float32)
    b = rng.standard_normal((96, 70)).astype(np.float32)
    a[64:], b[:, 40] = ra, rb[:, 0]
    ta, tb = torch.from_numpy(a)[None], torch.from_numpy(b)[None]
    whole = _run(ta, tb, "fp16x3")
    got = _run(ta, tb, "fp16x3", (2, 3))
    assert _same_bits(got, whole)
    c = got[0].numpy()
    assert (msg := check_emulated_overflow(name, c[64:, 40:41], ra, rb)) == "", msg


def _plan(m, k, n, batch=1, scheme="fp16x3", chunks=(1, 1)):
    a, b, out = torch.empty(batch, m, k), torch.empty(batch, k, n), torch.empty(batch, m, n)
    return launch._problem(tuple(a.shape), a.stride(), tuple(b.shape), b.stride(), out.stride(), a.device, sb=12,
                           order="termwise", scheme=scheme, scale="auto", fixup_min_class=1, flush_k=None,
                           config={"row_chunks": chunks[0], "col_chunks": chunks[1]})


@pytest.mark.parametrize("scheme, planes", [("fp16x3", 2), ("bf16x6", 3), ("auto", 3)])
def test_workspace_holds_a_chunk_of_each_operand(scheme, planes):
    """At 2048^3 (no launch: the plan alone) the workspace is the slices of one chunk per operand plus
    the line meta, lists and statistics, which the whole product has too."""
    n = 2048
    whole = _plan(n, n, n, scheme=scheme).ws_bytes
    slices = planes * 2 * n * n  # bytes of one operand's slices
    rest = whole - 2 * slices
    assert 0 < rest < 0.05 * slices
    for rows, cols in ((4, 2), (16, 2), (1, 8)):
        chunked = _plan(n, n, n, scheme=scheme, chunks=(rows, cols))
        assert chunked.ws_bytes - rest == pytest.approx(slices / rows + slices / cols, rel=0.01), (rows, cols)
        gemms = [x for x in chunked.launches if x.kernel is launch.gemm_kernel]
        assert len(gemms) == (2 if scheme == "auto" else 1) * (1 + rows * cols)  # the fix-up, then the blocks
        # A's chunks are split once per column chunk, but for the one that ends a column chunk and starts
        # the next (its slices are still in the buffer: the row chunks run forwards, then backwards)
        body = chunked.launches[chunked.launches.index(gemms[0]):]
        splits_a = [x for x in body if x.kernel is launch.split_scaled_kernel and x.kwargs["programs_a"]]
        assert len(splits_a) == (rows + (cols - 1) * (rows - 1) if rows > 1 else 1), (rows, cols)


def test_batches_and_single_chunks_are_not_chunked():
    assert _plan(256, 64, 256, batch=2, chunks=(4, 4)).ws_bytes == _plan(256, 64, 256, batch=2).ws_bytes
    assert _plan(100, 64, 30, chunks=(1, 4)).ws_bytes == _plan(100, 64, 30).ws_bytes  # 30 columns: one tile


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_chunk_keys_are_checked(value):
    for key in ("row_chunks", "col_chunks"):
        with pytest.raises(configs.ConfigError, match=key):
            configs.validate_config({key: value})


def _full_gpu(monkeypatch, limit):
    """Play a GPU with ``limit`` bytes free for the workspace: larger allocations raise PyTorch's OOM error."""
    allocate = launch._allocate_workspace

    def allocate_or_fail(nbytes, device):
        if nbytes > limit:
            raise launch._OUT_OF_MEMORY(f"CUDA out of memory (played: {nbytes} bytes asked, {limit} free)")
        return allocate(nbytes, device)

    monkeypatch.setattr(launch, "_allocate_workspace", allocate_or_fail)


@pytest.mark.parametrize("scheme", ["fp16x3", "auto"])
def test_a_workspace_that_does_not_fit_is_chunked(monkeypatch, scheme):
    """Where the workspace does not fit, the product runs in the first chunks of ``launch.OOM_CHUNKS`` that fit
    (here 4 x 2: 2 x 2 is still too large), with a warning that says so, and the outputs are the bits of the
    product unchunked."""
    a, b = _data("special", 100, 40, 90)
    whole = _run(a, b, scheme)
    assert launch.OOM_CHUNKS[:2] == ((2, 2), (4, 2))
    sizes = {chunks: _plan(100, 40, 90, scheme=scheme, chunks=chunks).ws_bytes for chunks in ((1, 1), (2, 2), (4, 2))}
    assert sizes[(1, 1)] > sizes[(2, 2)] > sizes[(4, 2)]
    _full_gpu(monkeypatch, sizes[(4, 2)])
    with pytest.warns(UserWarning, match=r"did not fit in the GPU's free memory; .* 4 x 2 chunks .* the same results"):
        got = _run(a, b, scheme)
    assert _same_bits(got, whole)


def test_out_of_memory_stays_an_error_where_chunks_cannot_help(monkeypatch):
    """Where even the smallest chunks of one matrix do not fit: PyTorch's OOM error, as for any allocation that
    does not fit, for a single product and for a batch (its slices end in single products)."""
    a, b = _data("normal", 100, 40, 90)
    _full_gpu(monkeypatch, 1000)
    with pytest.raises(launch._OUT_OF_MEMORY, match="out of memory"):
        _run(a, b, "fp16x3")
    with pytest.raises(launch._OUT_OF_MEMORY, match="out of memory"):
        _run(a.repeat(2, 1, 1), b.repeat(2, 1, 1), "fp16x3")


@pytest.mark.parametrize("broadcast", [False, True])
@pytest.mark.parametrize("scheme", ["fp16x3", "auto"])
def test_a_batch_that_does_not_fit_runs_in_slices(monkeypatch, scheme, broadcast):
    """A batch is not chunked: where its workspace does not fit it runs in slices of half the batch, again
    where a slice does not fit (here a batch of 3: slices of 2, which do not fit either, then of 1), with a
    warning; every matrix's outputs are the bits of that matrix's product called alone.  B broadcast (a
    stride-0 batch) too."""
    a, b = _data("special", 100, 40, 90)
    a3 = torch.cat([a, a * 2.0 ** 30, torch.exp(3 * a)])  # special; scaled rows; wide rows
    b3 = b.expand(3, -1, -1) if broadcast else torch.cat([b, b.flip(-1), torch.exp(3 * b)])
    alone = [_run(a3[i:i + 1], b3[i:i + 1], scheme) for i in range(3)]
    _full_gpu(monkeypatch, _plan(100, 40, 90, batch=1, scheme=scheme).ws_bytes)  # one matrix fits, two do not
    with pytest.warns(UserWarning, match=r"batch of 3 100 x 40 x 90 products .* slices of at most 2 matrices"):
        got = _run(a3, b3, scheme)
    for i in range(3):
        assert _same_bits(got[i:i + 1], alone[i]), i
