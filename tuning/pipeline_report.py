"""The tables of ``docs/ascend_pipeline_model.md``: ``python -m sgemm_cube.tuning.pipeline_report``.

MODEL PREDICTIONS: prints the calibration against the paper's 910A
measurements, the Fig. 11 trends, the predicted gains of the kernel changes
and the 910B outlook, as Markdown, each table as it is done (a progress bar
on stderr).  Takes about half a minute on two cores.
"""
from __future__ import annotations

import dataclasses
import functools
import sys

from tqdm.auto import tqdm

from . import pipeline as pl
from .hardware import get_profile
from .plots import PAPER_FIG10_BEST, PAPER_FIG10_PEAKS, fig10_tilings

__all__ = ["CALIBRATION_SHAPE", "main"]

CALIBRATION_SHAPE = (11264, 11264, 2816)
"""The shape the two free parameters were fitted at.  The paper does not state
Fig. 10's; k = 64 x 44 = 2816 is implied by its best N_fused = 44 at bk = 64
(one K group, and the k of its Fig. 9(a)); m = n = 11264 = 2 x 32 x 176 fills
whole waves of its best bm on 32 cores."""

_SIZES = (1024, 2048, 4096, 8192, 16384, 32768)


def _best(profile, m, n, k, design, tilings=None):
    rows = pl.sweep(profile, m, n, k, design=design, tilings=tilings or fig10_tilings(profile, k=k))
    return max(rows, key=lambda r: r[1])


@functools.lru_cache(maxsize=256)  # the sections rank the same products again
def _rank1(profile_key: str, shape: tuple, design: pl.Design) -> pl.Ranked:
    """The model's best row for one product (:func:`sgemm_cube.tuning.pipeline.rank`)."""
    return pl.rank(profile_key, *shape, design=design, top=1)[0]


def _no_bar():
    return tqdm(disable=True)  # update() does nothing: the sections run without a bar


def calibration(out=sys.stdout, bar=None) -> None:
    bar = _no_bar() if bar is None else bar
    p = get_profile("910a")
    m, n, k = CALIBRATION_SHAPE
    print(f"### Calibration (910A, {m} x {n} x {k}, paper's design)\n", file=out)
    print("| pipeline | paper, measured | model, best of the Fig. 10 sweep | model at (176, 64, 176, 44) |", file=out)
    print("| --- | --- | --- | --- |", file=out)
    for buffering in ("single", "double"):
        d = pl.Design("paper", buffering)
        t, best = _best(p, m, n, k, d)
        at = pl.predict(p, m, n, k, PAPER_FIG10_BEST, design=d).tflops
        print(f"| {buffering} | {PAPER_FIG10_PEAKS[buffering]} | {best:.1f} at {tuple(t)[:4]} | {at:.1f} |", file=out)
        bar.update()
    print("\nSensitivity to the unknown m, n (k = 2816):\n", file=out)
    print("| m = n | best double (model) | at (176, 64, 176, 44) | best single (model) |", file=out)
    print("| --- | --- | --- | --- |", file=out)
    for s in (8192, 11264, 16384):
        td, bd = _best(p, s, s, k, pl.PAPER_DOUBLE)
        ts, bs = _best(p, s, s, k, pl.PAPER_SINGLE)
        at = pl.predict(p, s, s, k, PAPER_FIG10_BEST, design=pl.PAPER_DOUBLE).tflops
        print(f"| {s} | {bd:.1f} at {tuple(td)[:4]} | {at:.1f} | {bs:.1f} at {tuple(ts)[:4]} |", file=out)
        bar.update()


def fig11(out=sys.stdout, bar=None) -> None:
    bar = _no_bar() if bar is None else bar
    p = get_profile("910a")
    d = pl.PAPER_DOUBLE
    t = PAPER_FIG10_BEST
    print("\n### Fig. 11 trends (910A, paper's design, double-buffered, tiling (176, 64, 176, 44), no refit)\n",
          file=out)
    print("| size | (a) m = n = size, k = 2816 | (b) k = size, m = n = 16384 | (c) m = n = k = size |", file=out)
    print("| --- | --- | --- | --- |", file=out)
    for s in _SIZES:
        a = pl.predict(p, s, s, 2816, t, design=d).tflops
        b = pl.predict(p, 16384, 16384, s, t, design=d).tflops
        c = pl.predict(p, s, s, s, t, design=d).tflops
        print(f"| {s} | {a:.1f} | {b:.1f} | {c:.1f} |", file=out)
        bar.update()


CHANGES = {
    "the kernel as it is (all terms in one pass)": {},
    "before the split change: 32 DataCopys of 32-byte bursts per tile, 1 UB stage": {"split_strips": False},
    "before the epilogue combine: a combine pass always": {"fused_combine": False},
    "one pass per term (`per_term`), at its own best tiling": {"per_term": True},
    "combine with 2 UB stages": {"combine_double": True},
    "L0C double buffering (two accumulator sets)": {"l0c_stages": 2},
    "next A group prefetched tile by tile": {"prefetch_a": True},
}
_OWN_TILING = ("l0c_stages", "per_term")  # changes that move the best tiling: ranked anew
SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 1024), (256, 8192, 8192), (2048, 2048, 16384))


def changes(profile_key: str = "910a", out=sys.stdout, bar=None) -> None:
    bar = _no_bar() if bar is None else bar
    p = get_profile(profile_key)
    print(f"\n### Kernel changes ({p.name}, this package's kernel, TFLOP/s of the whole product)\n", file=out)
    print("| change | " + " | ".join("x".join(map(str, s)) for s in SHAPES) + " |", file=out)
    print("| --- |" + " --- |" * len(SHAPES), file=out)
    base_tilings = {}
    for s in SHAPES:
        base_tilings[s] = _rank1(p.key, s, pl.KERNEL).tiling
        bar.update()
    base = {s: pl.predict(p, *s, base_tilings[s], design=pl.KERNEL).tflops for s in SHAPES}
    for name, kw in CHANGES.items():
        d = dataclasses.replace(pl.KERNEL, **kw)
        cells = []
        for s in SHAPES:
            t = _rank1(p.key, s, d).tiling if set(kw) & set(_OWN_TILING) else base_tilings[s]
            v = pl.predict(p, *s, t, design=d).tflops
            cells.append(f"{v:.1f}" if not kw else f"{v:.1f} ({(v / base[s] - 1) * 100:+.0f}%)")
        print(f"| {name} | " + " | ".join(cells) + " |", file=out)
        bar.update()
    print("\nTilings (model's best for the kernel as it is): "
          + ", ".join(f"{'x'.join(map(str, s))}: {tuple(t)[:4]}" for s, t in base_tilings.items()), file=out)


MODE_SHAPES = (CALIBRATION_SHAPE, (16384, 16384, 2816), (8192, 8192, 8192), (4096, 4096, 4096),
               (8192, 8192, 1024))


def modes(out=sys.stdout, bar=None) -> None:
    """The kernel's two GEMM modes at the paper's shapes and 8192^3, and the tuner's pick."""
    bar = _no_bar() if bar is None else bar
    print("\n### The kernel's GEMM modes: all terms in one pass, or one pass per term (TFLOP/s of the whole "
          "product)\n", file=out)
    print("| chip | shape | one pass: best tiling | one pass per term: best tiling | "
          "per term at (176, 64, 176, 44) | tuner's pick (`best_kernel`) |", file=out)
    print("| --- | --- | --- | --- | --- | --- |", file=out)
    for key in ("910a", "910b"):
        p = get_profile(key)
        for s in MODE_SHAPES:
            fused = _rank1(p.key, s, pl.KERNEL)
            per_term = _rank1(p.key, s, pl.KERNEL_PER_TERM)
            try:
                paper = f"{pl.predict(p, *s, PAPER_FIG10_BEST, design=pl.KERNEL_PER_TERM).tflops:.1f}"
            except ValueError:
                paper = "does not fit"
            pick, preds = pl.best_kernel(p, *s)
            mode = "per term" if pick.per_term else "one pass"
            print(f"| {p.name} | {'x'.join(map(str, s))} | {fused.tflops:.1f} at {tuple(fused.tiling)[:4]} | "
                  f"{per_term.tflops:.1f} at {tuple(per_term.tiling)[:4]} | {paper} | {mode}, "
                  f"{max(v.tflops for v in preds.values()):.1f} at {tuple(pick)[:4]} |", file=out)
            bar.update()


BOOKKEEPING_SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 1024))


def bookkeeping(out=sys.stdout, bar=None) -> None:
    """The predicted cost of the guarantee's integers on the device (Design.bookkeeping)."""
    bar = _no_bar() if bar is None else bar
    print("\n### The guarantee's bookkeeping on the device (predicted, ms; at the model's best tiling for the "
          "kernel)\n", file=out)
    print("| chip | shape | product without | line statistics A + B | line meta | split scaling | unscale | "
          "product with | cost |", file=out)
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |", file=out)
    d = dataclasses.replace(pl.KERNEL, bookkeeping=True)
    for key in ("910a", "910b"):
        p = get_profile(key)
        for s in BOOKKEEPING_SHAPES:
            t = _rank1(p.key, s, pl.KERNEL).tiling
            base, full = pl.predict(p, *s, t, design=pl.KERNEL), pl.predict(p, *s, t, design=d)
            ms = {k: v * 1e3 for k, v in full.phases.items()}
            split = (full.phases["split_a"] + full.phases["split_b"] - base.phases["split_a"]
                     - base.phases["split_b"]) * 1e3
            print(f"| {p.name} | {'x'.join(map(str, s))} | {base.seconds * 1e3:.2f} | "
                  f"{ms['line_stats_a'] + ms['line_stats_b']:.2f} | {ms['line_meta']:.2f} | {split:.2f} | "
                  f"{ms['unscale']:.2f} | {full.seconds * 1e3:.2f} | {(full.seconds / base.seconds - 1) * 100:+.0f}% |",
                  file=out)
            bar.update()


OUTLOOK_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 16384))


def outlook_910b(out=sys.stdout, bar=None) -> None:
    bar = _no_bar() if bar is None else bar
    p = get_profile("910b")
    print(f"\n### {p.name}: the model's best tiling against the native FP32 cube ({p.cube_fp32_tflops} TFLOP/s peak)\n",
          file=out)
    print("| shape | kernel design: tiling | predicted TFLOP/s | of FP16/3 peak | vs native FP32 peak | "
          "paper's design: predicted |", file=out)
    print("| --- | --- | --- | --- | --- | --- |", file=out)
    for s in OUTLOOK_SHAPES:
        r = max((_rank1(p.key, s, d) for d in (pl.KERNEL, pl.KERNEL_PER_TERM)), key=lambda row: row.tflops)
        q = _rank1(p.key, s, pl.PAPER_DOUBLE)
        mode = ", per term" if r.tiling.per_term else ""
        print(f"| {'x'.join(map(str, s))} | {tuple(r.tiling)[:4]}{mode} | {r.tflops:.1f} | "
              f"{r.tflops / (p.cube_fp16_tflops / 3) * 100:.0f}% | {r.tflops / p.cube_fp32_tflops:.2f}x | "
              f"{q.tflops:.1f} at {tuple(q.tiling)[:4]} |", file=out)
        bar.update()


class _AboveTheBar:
    """A text file whose lines are written above the progress bar (``tqdm.write``), so that tables and bar
    do not mix on a terminal; each line is flushed as it is done."""

    def __init__(self, out):
        self._out, self._partial = out, ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            tqdm.write(line, file=self._out)
        self._out.flush()
        return len(text)

    def flush(self) -> None:
        self._out.flush()


def main() -> int:
    rows = (2 + 3 + len(_SIZES) + 2 * (len(SHAPES) + len(CHANGES)) + 2 * len(MODE_SHAPES)
            + 2 * len(BOOKKEEPING_SHAPES) + len(OUTLOOK_SHAPES))
    out = _AboveTheBar(sys.stdout)
    with tqdm(total=rows, desc="pipeline report", unit="row", file=sys.stderr) as bar:
        calibration(out, bar)
        fig11(out, bar)
        changes("910a", out, bar)
        changes("910b", out, bar)
        modes(out, bar)
        bookkeeping(out, bar)
        outlook_910b(out, bar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
