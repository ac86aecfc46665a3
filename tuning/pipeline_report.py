"""The tables of ``docs/ascend_pipeline_model.md``: ``python -m sgemm_cube.tuning.pipeline_report``.

MODEL PREDICTIONS: prints the calibration against the paper's 910A
measurements, the Fig. 11 trends, the predicted gains of the kernel changes,
the 910B outlook, and the whole product ``sgemm_cube.matmul`` launches
(``--design package``) against the paper's design, with its listed lines'
band passes (:func:`listed_fractions`) and issue 32's targets
(:func:`package_targets`), as Markdown, each table as it is done (a progress
bar on stderr).  Takes about a minute on two cores.
"""
from __future__ import annotations

import dataclasses
import functools
import sys
from typing import NamedTuple

from tqdm.auto import tqdm

from . import pipeline as pl
from .hardware import get_profile
from .plots import PAPER_FIG10_BEST, PAPER_FIG10_PEAKS, fig10_tilings

__all__ = ["BANDS", "CALIBRATION_SHAPE", "LISTED_TARGET", "PACKAGE_SHAPES", "PackageFigures", "Target",
           "listed_fractions", "package_figures", "package_targets", "package_tables", "targets_table", "main"]

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
    "all terms in one pass, one L0C stage (the reference)": {},
    "before the split change: 32 DataCopys of 32-byte bursts per tile, 1 UB stage": {"split_strips": False},
    "before the epilogue combine: a combine pass always": {"fused_combine": False},
    "one pass per term (`per_term`), at its own best tiling": {"per_term": True},
    "combine with 2 UB stages": {"combine_double": True},
    "two L0C stages (`l0c_stages=2`: two accumulator sets), at its own best tiling": {"l0c_stages": 2},
    "one pass per term with two L0C stages, at its own best tiling": {"per_term": True, "l0c_stages": 2},
    "next A group prefetched tile by tile": {"prefetch_a": True},
    "before the two-level accumulation: K groups as long as L1 holds": {"two_level": False},
}
_OWN_TILING = ("l0c_stages", "per_term", "two_level")  # changes that move the best tiling: ranked anew
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
    print("\nTilings (model's best for the reference row): "
          + ", ".join(f"{'x'.join(map(str, s))}: {tuple(t)[:4]}" for s, t in base_tilings.items()), file=out)


MODE_SHAPES = (CALIBRATION_SHAPE, (16384, 16384, 2816), (8192, 8192, 8192), (4096, 4096, 4096),
               (8192, 8192, 1024))


def modes(out=sys.stdout, bar=None) -> None:
    """The kernel's two GEMM modes at the paper's shapes and 8192^3, and the tuner's pick."""
    bar = _no_bar() if bar is None else bar
    print("\n### The kernel's GEMM modes: all terms in one pass, or one pass per term, each with one or two L0C "
          "stages (TFLOP/s of the whole product)\n", file=out)
    print("| chip | shape | one pass: best tiling | one pass per term: best tiling | "
          "per term at (176, 64, 176, 44) | one pass, two L0C stages | per term, two L0C stages | "
          "tuner's pick (`best_kernel`) |", file=out)
    print("| --- | --- | --- | --- | --- | --- | --- | --- |", file=out)
    for key in ("910a", "910b"):
        p = get_profile(key)
        for s in MODE_SHAPES:
            fused = _rank1(p.key, s, pl.KERNEL)
            per_term = _rank1(p.key, s, pl.KERNEL_PER_TERM)
            try:
                paper = f"{pl.predict(p, *s, PAPER_FIG10_BEST, design=pl.KERNEL_PER_TERM).tflops:.1f}"
            except ValueError:
                paper = "does not fit"
            two = [_rank1(p.key, s, dataclasses.replace(d, l0c_stages=2)) for d in (pl.KERNEL, pl.KERNEL_PER_TERM)]
            pick, preds = pl.best_kernel(p, *s)
            print(f"| {p.name} | {'x'.join(map(str, s))} | {fused.tflops:.1f} at {tuple(fused.tiling)[:4]} | "
                  f"{per_term.tflops:.1f} at {tuple(per_term.tiling)[:4]} | {paper} | "
                  + " | ".join(f"{r.tflops:.1f} at {tuple(r.tiling)[:4]}" for r in two) + f" | {_mode(pick)}, "
                  f"{preds[pl._mode_key(pick.per_term, pick.l0c_stages)].tflops:.1f} at {tuple(pick)[:4]} |", file=out)
            bar.update()


BOOKKEEPING_SHAPES = ((8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 1024))


def bookkeeping(out=sys.stdout, bar=None) -> None:
    """The predicted cost of the guarantee's integers on the device (Design.bookkeeping)."""
    bar = _no_bar() if bar is None else bar
    print("\n### The guarantee's bookkeeping on the device (predicted, ms; at the model's best tiling for the "
          "kernel)\n", file=out)
    print("| chip | shape | product without | line statistics A + B | line meta | split scaling | unscale | "
          "product with, every line scaled | cost | with, no line scaled | cost |", file=out)
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", file=out)
    d = dataclasses.replace(pl.KERNEL, bookkeeping=True)
    d_none = dataclasses.replace(d, scaled=False)
    for key in ("910a", "910b"):
        p = get_profile(key)
        for s in BOOKKEEPING_SHAPES:
            t = _rank1(p.key, s, pl.KERNEL).tiling
            base, full = pl.predict(p, *s, t, design=pl.KERNEL), pl.predict(p, *s, t, design=d)
            none = pl.predict(p, *s, t, design=d_none)
            ms = {k: v * 1e3 for k, v in full.phases.items()}
            split = (full.phases["split_a"] + full.phases["split_b"] - base.phases["split_a"]
                     - base.phases["split_b"]) * 1e3
            print(f"| {p.name} | {'x'.join(map(str, s))} | {base.seconds * 1e3:.2f} | "
                  f"{ms['line_stats_a'] + ms['line_stats_b']:.2f} | {ms['line_meta']:.2f} | {split:.2f} | "
                  f"{ms['unscale']:.2f} | {full.seconds * 1e3:.2f} | {(full.seconds / base.seconds - 1) * 100:+.0f}% | "
                  f"{none.seconds * 1e3:.2f} | {(none.seconds / base.seconds - 1) * 100:+.0f}% |", file=out)
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
        r = max((_rank1(p.key, s, dataclasses.replace(d, l0c_stages=stages))
                 for d in (pl.KERNEL, pl.KERNEL_PER_TERM) for stages in pl.L0C_STAGES), key=lambda row: row.tflops)
        q = _rank1(p.key, s, pl.PAPER_DOUBLE)
        mode = (", per term" if r.tiling.per_term else "") + (", two L0C stages" if r.tiling.l0c_stages == 2 else "")
        print(f"| {'x'.join(map(str, s))} | {tuple(r.tiling)[:4]}{mode} | {r.tflops:.1f} | "
              f"{r.tflops / (p.cube_fp16_tflops / 3) * 100:.0f}% | {r.tflops / p.cube_fp32_tflops:.2f}x | "
              f"{q.tflops:.1f} at {tuple(q.tiling)[:4]} |", file=out)
        bar.update()


PACKAGE_SHAPES = (CALIBRATION_SHAPE, (8192, 8192, 8192), (4096, 4096, 4096), (8192, 8192, 1024))
"""The shapes of issue 32's first target: the package against the paper's design."""
SHARE_SHAPE = (8192, 8192, 8192)
"""Where issue 32 asks for the bookkeeping's share."""
LIMITS = {"vs_paper": 1.10, "share_unscaled": 0.10, "share_scaled": 0.25, "listed": 3.0}
"""Issue 32's targets: package time over the paper's design's (910A), the bookkeeping's share of the
package with no line scaled and with every line scaled, every line listed over none listed."""

class PackageFigures(NamedTuple):
    """The whole product ``sgemm_cube.matmul`` launches at one shape, beside the paper's design (MODEL PREDICTIONS).

    ``package``: :func:`~sgemm_cube.tuning.pipeline.predict_package` with no line listed and every
    batch with a scaled line (the costly case), at ``package_pick``'s tiling (the model's own, no
    measured table); ``unscaled``: the same on data that needs no scaling; ``listed``: the same as
    ``package`` with every line listed, each of :data:`BANDS` exponent bands (the band design:
    ``pipeline.band_parts``); ``listed3``: with 3 bands each; ``special``: every line special (NaN or
    an infinity: the FP32 fix-up kernels); ``alone``: the kernels alone (split, GEMM, combine) at the
    same tiling; ``ranked``: the best row of ``rank_package`` (both modes ranked by the whole product,
    no line listed, every line scaled); ``paper``: the paper's design at its best tiling (``rank``);
    ``native_ms``: the product at the chip's native FP32 cube peak (None without an FP32 cube).
    """

    chip: str
    shape: tuple
    package: pl.Prediction
    unscaled: pl.Prediction
    listed: pl.Prediction
    listed3: pl.Prediction
    special: pl.Prediction
    alone: pl.Prediction
    ranked: pl.Ranked
    paper: pl.Ranked
    native_ms: float | None

    def share(self, pr: pl.Prediction | None = None) -> float:
        """The guarantee's passes' share of a package prediction (default ``package``)."""
        pr = self.package if pr is None else pr
        return 1.0 - self.alone.seconds / pr.seconds

    @property
    def vs_paper(self) -> float:
        return self.package.seconds / self.paper.seconds

    @property
    def listed_ratio(self) -> float:
        """Every line listed (:data:`BANDS` bands each) over none listed."""
        return self.listed.seconds / self.package.seconds

    @property
    def listed3_ratio(self) -> float:
        """Every line listed with 3 bands each over none listed."""
        return self.listed3.seconds / self.package.seconds


BANDS = 2
"""Bands per listed line in the "every line listed" figures: the fewest a listed line has (its span is at
least the band window's W binades, ``cpu_fallback/bands.py``)."""


@functools.lru_cache(maxsize=64)
def package_figures(chip: str, shape: tuple) -> PackageFigures:
    """:class:`PackageFigures` of one chip (profile key) and shape (m, n, k)."""
    p = get_profile(chip)
    m, n, k = shape
    package = pl.predict_package(p, m, n, k, use_table=False)
    t = package.tiling
    mode, stages = bool(t.per_term), int(t.l0c_stages)

    def at(listed=0.0, **kw):
        return pl.predict(p, m, n, k, t, design=pl.package(listed, per_term=mode, l0c_stages=stages, **kw))

    native = None if p.cube_fp32_tflops is None else 2.0 * m * n * k / (p.cube_fp32_tflops * 1e12) * 1e3
    return PackageFigures(p.key, tuple(shape), package, at(scaled=False), at(1.0, bands=BANDS), at(1.0, bands=3),
                          at(special=1.0), pl.predict(p, m, n, k, t, design=pl.Design("kernel", per_term=mode,
                                                                                      l0c_stages=stages)),
                          pl.rank_package(p, m, n, k, top=1)[0], _rank1(p.key, tuple(shape), pl.PAPER_DOUBLE), native)


class Target(NamedTuple):
    """One of issue 32's targets, as the model predicts it: met when ``figure <= limit``."""

    name: str
    chip: str
    shape: tuple
    figure: float
    limit: float

    @property
    def met(self) -> bool:
        return self.figure <= self.limit


LISTED_TARGET = f"every line listed ({BANDS} bands each) / none listed"


def package_targets(chips=("910a", "910b"), shapes=PACKAGE_SHAPES, share_shape=SHARE_SHAPE) -> list[Target]:
    """Issue 32's targets for the package, each with the model's figure (MODEL PREDICTIONS).

    Per chip: on the 910A (the paper's chip) the package's time over the paper's design's at each of
    ``shapes`` (at most 1.10), every batch with a scaled line and (the same limit, for the record) none;
    the guarantee's share of the package at ``share_shape`` with no line
    scaled (at most 10%) and with every line scaled (at most 25%); every line listed (:data:`BANDS`
    bands each) over none listed at each of ``shapes`` (at most 3).
    """
    out = []
    for chip in chips:
        if chip == "910a":
            out += [Target("package time / paper's design time", chip, s, package_figures(chip, s).vs_paper,
                           LIMITS["vs_paper"]) for s in shapes]
            out += [Target("package time / paper's design time, no line scaled", chip, s,
                           package_figures(chip, s).unscaled.seconds / package_figures(chip, s).paper.seconds,
                           LIMITS["vs_paper"]) for s in shapes]
        f = package_figures(chip, tuple(share_shape))
        out.append(Target("bookkeeping share, no line scaled", chip, tuple(share_shape), f.share(f.unscaled),
                          LIMITS["share_unscaled"]))
        out.append(Target("bookkeeping share, every line scaled", chip, tuple(share_shape), f.share(),
                          LIMITS["share_scaled"]))
        out += [Target(LISTED_TARGET, chip, s, package_figures(chip, s).listed_ratio, LIMITS["listed"])
                for s in shapes]
    return out


def _shape(s) -> str:
    return "x".join(map(str, s))


def _mode(t) -> str:
    return ("per term" if t.per_term else "one pass") + (", two L0C stages" if t.l0c_stages == 2 else "")


def package_tables(chip: str, shapes=PACKAGE_SHAPES, out=sys.stdout, bar=None) -> None:
    """The package's whole product against the paper's design on one chip (and native FP32 where it has one),
    its kernels' times, and the band passes with every line listed."""
    bar = _no_bar() if bar is None else bar
    p = get_profile(chip)
    native = p.cube_fp32_tflops is not None
    print(f"\n### {p.name}: the whole product `sgemm_cube.matmul` launches (`--design package`) against the "
          f"paper's design (model predictions)\n", file=out)
    head = ("| shape | package: tiling, mode | TFLOP/s | ms | bookkeeping share | no line scaled: TFLOP/s, share | "
            f"ranked by the package: TFLOP/s at tiling | every line listed, {BANDS} bands: ms | listed / none | "
            "every line listed, 3 bands: ms | listed / none | paper's design: TFLOP/s at tiling | ms | package / paper |")
    print(head + (f" native FP32 at peak ({p.cube_fp32_tflops} TFLOP/s): ms | package / native |" if native else ""),
          file=out)
    print("|" + " --- |" * (14 + 2 * native), file=out)
    figures = []
    for s in shapes:
        f = package_figures(p.key, tuple(s))
        figures.append(f)
        t, q, r = f.package.tiling, f.paper, f.ranked
        row = (f"| {_shape(s)} | {tuple(t)[:4]}, {_mode(t)} | {f.package.tflops:.1f} | {f.package.seconds * 1e3:.2f} | "
               f"{f.share() * 100:.0f}% | {f.unscaled.tflops:.1f}, {f.share(f.unscaled) * 100:.0f}% | "
               f"{r.tflops:.1f} at {tuple(r.tiling)[:4]}, {_mode(r.tiling)} | "
               f"{f.listed.seconds * 1e3:,.1f} | {f.listed_ratio:.2f}x | "
               f"{f.listed3.seconds * 1e3:,.1f} | {f.listed3_ratio:.2f}x | "
               f"{q.tflops:.1f} at {tuple(q.tiling)[:4]} | {q.seconds * 1e3:.2f} | {f.vs_paper:.2f}x |")
        if native:
            row += f" {f.native_ms:.2f} | {f.package.seconds * 1e3 / f.native_ms:.2f}x |"
        print(row, file=out)
        bar.update()
    names = [name for name in dict.fromkeys(name for f in figures for name in f.package.phases)
             if name not in BAND_PHASES]  # no line listed: the band passes do not run
    print("\nms per kernel of the package (no line listed, every line scaled; the read-back on every guarded "
          f"product), the band pairs with every line listed ({BANDS} and 3 bands), and the FP32 fix-up with every "
          "line special:\n", file=out)
    print("| shape | " + " | ".join(names) + f" | band pairs, every line listed, {BANDS} bands | "
          "band pairs, every line listed, 3 bands | fix-up rows, every line special | "
          "fix-up columns, every line special |", file=out)
    print("|" + " --- |" * (len(names) + 5), file=out)
    for f in figures:
        ms = {k: v * 1e3 for k, v in f.package.phases.items()}
        print(f"| {_shape(f.shape)} | " + " | ".join(f"{ms[k]:.3f}" if k in ms else "" for k in names)
              + f" | {f.listed.phases['band_pairs'] * 1e3:,.1f} | {f.listed3.phases['band_pairs'] * 1e3:,.1f}"
              f" | {f.special.phases['fixup_rows'] * 1e3:,.0f} | {f.special.phases['fixup_cols'] * 1e3:,.0f} |",
              file=out)
    print(f"\nms per part of the band pairs pass, every line listed, {BANDS} bands (`pipeline.band_parts`: "
          f"both sides band-split, a ({BANDS}M) x K x ({BANDS}N) product in the product's tiling; no row or column pass "
          "runs):\n", file=out)
    print("| shape | " + " | ".join(PART_NAMES.values()) + " | band pairs | the main product |", file=out)
    print("|" + " --- |" * (len(PART_NAMES) + 3), file=out)
    for f in figures:
        parts = pl.band_parts(p, *f.shape, f.listed.tiling, design=pl.package(
            1.0, per_term=bool(f.listed.tiling.per_term), l0c_stages=f.listed.tiling.l0c_stages, bands=BANDS))
        pairs = parts["band_pairs"]
        print(f"| {_shape(f.shape)} | " + " | ".join(f"{pairs[k] * 1e3:.2f}" for k in PART_NAMES)
              + f" | {sum(pairs.values()) * 1e3:.2f} | {f.package.seconds * 1e3:.2f} |", file=out)


FRACTIONS = (0.001, 0.01, 0.1, 0.2, 0.5, 0.9, 1.0)
"""Fractions of listed lines in :func:`listed_fractions`."""


def listed_fractions(shape=SHARE_SHAPE, chips=("910a", "910b"), fractions=FRACTIONS, out=sys.stdout,
                     bar=None) -> None:
    """The package with a fraction of its lines listed (:data:`BANDS` bands each) over none listed."""
    bar = _no_bar() if bar is None else bar
    print(f"\n### Listed lines: the package with a fraction of the rows and columns listed ({BANDS} bands each) "
          f"over none listed, {_shape(shape)} (model predictions)\n", file=out)
    print("| chip | " + " | ".join(f"{f:g}" for f in fractions) + " |", file=out)
    print("|" + " --- |" * (len(fractions) + 1), file=out)
    for chip in chips:
        f0 = package_figures(chip, tuple(shape))
        t = f0.package.tiling
        cells = []
        for f in fractions:
            pr = pl.predict(chip, *shape, t, design=pl.package(f, per_term=bool(t.per_term), l0c_stages=t.l0c_stages,
                                                               bands=BANDS))
            cells.append(f"{pr.seconds / f0.package.seconds:.2f}x")
        print(f"| {get_profile(chip).name} | " + " | ".join(cells) + " |", file=out)
        bar.update()


BAND_PHASES = ("band_rows", "band_cols", "band_pairs")
PART_NAMES = {"gather": "gather", "split_a": "split of A's bands", "split_b": "split of B's bands", "gemm": "GEMM",
              "combine_unscale": "combine + unscale", "accumulate": "accumulate", "scatter": "write into C"}
"""The parts of a band pass (``pipeline.band_parts``) and their column names."""


def targets_table(targets, out=sys.stdout) -> None:
    """Issue 32's targets as a Markdown table: figure, limit, met or missed."""
    print("\n### Issue 32's targets for the package (model predictions)\n", file=out)
    print("| target | chip | shape | model | limit | |", file=out)
    print("| --- | --- | --- | --- | --- | --- |", file=out)
    for t in targets:
        share = t.name.startswith("bookkeeping")
        fig = (lambda x: f"{x * 100:.0f}%") if share else (lambda x: f"{x:,.2f}x")
        print(f"| {t.name} | {get_profile(t.chip).name} | {_shape(t.shape)} | {fig(t.figure)} | {fig(t.limit)} | "
              f"{'met' if t.met else 'missed'} |", file=out)


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
            + 2 * len(BOOKKEEPING_SHAPES) + len(OUTLOOK_SHAPES) + 2 * len(PACKAGE_SHAPES) + 2)
    out = _AboveTheBar(sys.stdout)
    with tqdm(total=rows, desc="pipeline report", unit="row", file=sys.stderr) as bar:
        calibration(out, bar)
        fig11(out, bar)
        changes("910a", out, bar)
        changes("910b", out, bar)
        modes(out, bar)
        bookkeeping(out, bar)
        outlook_910b(out, bar)
        for chip in ("910a", "910b"):
            package_tables(chip, out=out, bar=bar)
        listed_fractions(out=out, bar=bar)
        targets_table(package_targets(), out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
