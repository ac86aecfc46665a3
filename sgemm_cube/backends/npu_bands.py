"""The host side of the listed lines' exponent bands on the NPU (issue 32, item 4).

:mod:`sgemm_cube.cpu_fallback.bands` is the arithmetic (read its docstring first); this module launches
it.  The guarded product (``ext.matmul`` with ``bands=True``) leaves the outputs of the *banded* lines
(class ``LOSES_BITS``: finite, too wide for the split) to this module; the vector unit's FP32 fix-up
keeps only the lines with NaN or an infinity (class ``SPECIAL``).  Then:

1. **One read-back** of the lines' integers and statistics (``lines``: 16 bytes per line), the NPU
   path's one host synchronisation: which lines are banded and how many bands each has decide which
   passes run and on what shapes.  A product with no banded line launches nothing more.
2. Per batch with banded lines, the **passes**: the bands of the banded rows of A stacked into one
   matrix (and those of the banded columns of B), each band scaled into the split's window by its own
   packed integers (:func:`~sgemm_cube.cpu_fallback.bands.band_exponents`), through ``ext.band_pass``:
   the split (with the band's cutoff on a banded side), the GEMM and the combine with the unscale, as
   the ordinary product runs them, in a tiling with the product's K groups (the tuner's for the pass's
   shape where the product runs the tuner's: the bits are those of the product's own tiling).  At most
   three passes per batch: banded rows against ordinary columns, ordinary rows against banded columns,
   banded against banded.
3. The passes' results added in FP32 on the device (an accumulator from ``+0``, smallest bands first:
   the order of :func:`~sgemm_cube.cpu_fallback.bands.banded_outputs`) and written into the outputs of
   the banded lines, except where the other line is ``SPECIAL`` (the fix-up wrote those).

Every tensor operation here is a torch operation on the product's device (gather, add, indexed write);
the read-back is the only transfer to the host.  Untested on hardware: executed in CI through the
functional model of the AscendC API (``tests/ascendc_kernels/``), bit for bit with the CPU model.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sgemm_cube.cpu_fallback.bands import BandWindow, band_counts_of, band_exponents
from sgemm_cube.cpu_fallback.guard import LineClass, LineMeta, pack_meta, unpack_meta

__all__ = ["LINE_ROWS", "line_buffer", "run_band_passes"]

#: Rows of the ``lines`` buffer ``ext.matmul`` fills: the packed integers, then the statistics big,
#: small_w, finite (the line-statistics kernel's int32 encodings), each over A's rows then B's columns.
LINE_ROWS = 4
_NO_SMALL = 0x7FFFFFFF  # small_w of a line with no nonzero finite entry


def line_buffer(batch: int, m: int, n: int, device):
    """The int32 (4, batch * (m + n)) device tensor ``ext.matmul`` copies the lines' integers into."""
    import torch

    return torch.empty((LINE_ROWS, batch * (m + n)), dtype=torch.int32, device=device)


def _read_lines(lines, batch: int, m: int, n: int):
    """A's and B's ``(LineMeta, big, small)`` from the read-back ``lines``: the packed integers as (batch,
    lines) arrays, the largest and smallest nonzero finite magnitudes (float64, flat; small 0 where none)."""
    host = lines.cpu().numpy()  # the one read-back of the NPU path
    meta = unpack_meta(host[0])
    big = host[1].view(np.float32).astype(np.float64)
    small_w = host[2]
    with np.errstate(over="ignore"):  # small_w + 1 wraps where there is no small: replaced by 0
        small = np.where(small_w == _NO_SMALL, 0, small_w + 1).astype(np.int32).view(np.float32).astype(np.float64)
    la = batch * m

    def side(sl, lines_):
        return LineMeta(meta.t[sl].reshape(batch, lines_), meta.cls[sl].reshape(batch, lines_)), big[sl], small[sl]

    return side(slice(0, la), m), side(slice(la, None), n)


class _Side(NamedTuple):
    """One operand's side of a band pass: its lines' values (A: (1, L, K); B: (1, K, L)), their packed
    integers (1, L), whether they are bands (the split's band cutoff), and the blocks ``(start, length,
    positions)`` the lines form, smallest band first: rows ``start..start+length`` of the side go to
    ``positions`` of the accumulator."""

    values: object
    meta: object
    banded: bool
    blocks: list


def run_band_passes(ext, a, b, out, lines, pass_options, window: BandWindow) -> int:
    """The banded lines' outputs of ``out`` (batch, m, n) from their band passes; returns ``band_pass`` calls.

    ``a`` (batch, m, k), ``b`` (batch, k, n): the contiguous operands ``ext.matmul`` took, ``lines`` what it
    filled (:func:`line_buffer`), ``pass_options(rows, cols)`` the ``MatmulOptions`` of a pass of that
    shape (sb, alpha, a tiling with the product's K groups; ``band_a`` and ``band_b`` are set here),
    ``window`` the band window of the split range the lines were classified with
    (:func:`~sgemm_cube.cpu_fallback.bands.band_window`).

    The bands of a batch's banded rows are stacked into one matrix (band ``k`` holding only the rows that
    reach it), and so are the banded columns' bands, so that one ``band_pass`` computes every band of
    the banded rows against B's ordinary columns, one every band of the banded columns against A's
    ordinary rows, and one every pair of bands: at most three GEMMs per batch, each band split once.
    """
    import torch

    batch, m, _ = a.shape
    n = b.shape[2]
    (ma, big_a, small_a), (mb, big_b, small_b) = _read_lines(lines, batch, m, n)
    counts_a = band_counts_of(big_a, small_a, window).reshape(batch, m)
    counts_b = band_counts_of(big_b, small_b, window).reshape(batch, n)
    banded_a, banded_b = ma.cls == LineClass.LOSES_BITS, mb.cls == LineClass.LOSES_BITS
    plain_a, plain_b = ma.cls == LineClass.SPLIT, mb.cls == LineClass.SPLIT
    dev, calls = a.device, 0

    def packed(meta: LineMeta, i, idx, band=None):
        t = meta.t[i, idx] if band is None else band_exponents(meta.t[i, idx], band, window)
        return pack_meta(LineMeta(t, meta.cls[i, idx]))

    def on_device(x):
        return torch.as_tensor(x, device=dev)

    def bands_side(x, meta, i, lines_, counts, along_rows: bool) -> _Side:
        """The bands of ``lines_`` stacked, smallest first, each with only the lines that reach it (a line past
        its last band would add +0 to its outputs, which leaves them as they are)."""
        picked, metas, blocks, start = [], [], [], 0
        for k in reversed(range(int(counts.max(initial=0)))):
            keep = np.flatnonzero(counts > k)
            picked.append(lines_[keep])
            metas.append(packed(meta, i, lines_[keep], k))
            blocks.append((start, keep.size, on_device(keep)))
            start += keep.size
        idx = on_device(np.concatenate(picked))
        values = x.index_select(1, idx) if along_rows else x.index_select(2, idx).contiguous()
        return _Side(values, on_device(np.concatenate(metas)[None]), True, blocks)

    def ordinary_side(x, meta, i, lines_, count, along_rows: bool) -> _Side:
        """The ordinary lines ``lines_`` of ``count``: the operand itself when that is all of them, else
        gathered (the pass then computes only the outputs it writes)."""
        if lines_.size < count:
            idx = on_device(lines_)
            x = x.index_select(1, idx) if along_rows else x.index_select(2, idx).contiguous()
        return _Side(x, on_device(packed(meta, i, lines_)[None]), False,
                     [(0, lines_.size, torch.arange(lines_.size, device=dev))])

    def accumulate(sa: _Side, sb: _Side, rows: int, cols: int):
        """One band_pass of the two sides, its blocks added in FP32 (round to nearest, on the device) into an
        accumulator from +0, A's blocks outside, B's inside, smallest bands first."""
        nonlocal calls
        part = torch.empty((1, sa.values.shape[1], sb.values.shape[2]), dtype=torch.float32, device=dev)
        options = pass_options(sa.values.shape[1], sb.values.shape[2])
        ext.band_pass(sa.values, sb.values, part, sa.meta, sb.meta,
                      ext.MatmulOptions(**options._replace(band_a=sa.banded, band_b=sb.banded)._asdict()))
        calls += 1
        acc = torch.zeros((rows, cols), dtype=torch.float32, device=dev)
        for s0, la, at in sa.blocks:
            for t0, lb, bt in sb.blocks:
                where = (at[:, None], bt[None, :])
                acc[where] = acc[where] + part[0, s0:s0 + la, t0:t0 + lb]
        return acc

    for i in range(batch):
        ri, ci = np.flatnonzero(banded_a[i]), np.flatnonzero(banded_b[i])
        if not ri.size and not ci.size:
            continue
        pr, pc = np.flatnonzero(plain_a[i]), np.flatnonzero(plain_b[i])
        ri_t, ci_t, pr_t, pc_t = (on_device(x) for x in (ri, ci, pr, pc))
        whole_a, whole_b = a[i:i + 1], b[i:i + 1]
        a_bands = bands_side(whole_a, ma, i, ri, counts_a[i, ri], True) if ri.size else None
        b_bands = bands_side(whole_b, mb, i, ci, counts_b[i, ci], False) if ci.size else None
        if ri.size and pc.size:  # banded rows against B's ordinary columns
            acc = accumulate(a_bands, ordinary_side(whole_b, mb, i, pc, n, False), ri.size, pc.size)
            out[i, ri_t[:, None], pc_t[None, :]] = acc
        if ci.size and pr.size:  # A's ordinary rows against banded columns
            acc = accumulate(ordinary_side(whole_a, ma, i, pr, m, True), b_bands, pr.size, ci.size)
            out[i, pr_t[:, None], ci_t[None, :]] = acc
        if ri.size and ci.size:  # banded rows against banded columns: every pair of bands, once
            out[i, ri_t[:, None], ci_t[None, :]] = accumulate(a_bands, b_bands, ri.size, ci.size)
    return calls
