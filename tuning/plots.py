"""The paper's figures from the models: Fig. 5 (N_fused and f against bm*bk) and Fig. 10 (pipeline model)."""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from .hardware import Profile, get_profile
from .model import enumerate_blocks

__all__ = ["MissingExtraError", "fig10_data", "fig10_tilings", "fig5_data", "plot_fig10", "plot_fig5",
           "require_matplotlib"]


class MissingExtraError(ImportError):
    """An optional dependency is not installed; the message names the extra that installs it."""


def require_matplotlib():
    """matplotlib's ``Figure`` and Agg canvas classes; :class:`MissingExtraError` saying how to install it.

    The figures need matplotlib, the ``plot`` extra of the package: it is not installed with it.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise MissingExtraError(f"the figures need matplotlib, which is not installed ({exc}); "
                                "install it with: pip install 'sgemm_cube[plot]'") from exc
    return Figure, FigureCanvasAgg


def fig5_data(profile: Profile | str, ratios: Sequence[float] = (0.5, 1.0, 2.0)) -> dict[float, dict[str, np.ndarray]]:
    """Feasible blocks with ``bn == ratio * bm``, per ratio.

    Returns
    -------
    dict
        ``{ratio: {"bm_bk": ..., "n_fused": ..., "f": ..., "bm": ..., "bk": ..., "bn": ...}}``,
        arrays sorted by ``bm*bk`` (then bm).
    """
    cand = enumerate_blocks(profile)
    out = {}
    for r in ratios:
        sel = cand.bn * 1.0 == r * cand.bm
        area = cand.bm[sel] * cand.bk[sel]
        order = np.lexsort((cand.bm[sel], area))
        out[r] = {"bm_bk": area[order], "n_fused": cand.n_fused[sel][order], "f": cand.f[sel][order],
                  "bm": cand.bm[sel][order], "bk": cand.bk[sel][order], "bn": cand.bn[sel][order]}
    return out


def plot_fig5(
    profile: Profile | str, path: str | os.PathLike[str], *, ratios: Sequence[float] = (0.5, 1.0, 2.0), dpi: int = 120
) -> str:
    """Write Fig. 5 (N_fused and f against bm*bk, one series per bn/bm) as an image.

    Needs matplotlib (the ``plot`` extra: :class:`MissingExtraError` without it); uses the
    non-interactive Agg canvas, so it works without a display.  Returns the path written.
    """
    Figure, FigureCanvasAgg = require_matplotlib()
    p = get_profile(profile)
    data = fig5_data(p, ratios)
    fig = Figure(figsize=(10, 4), layout="constrained")
    FigureCanvasAgg(fig)
    ax_n, ax_f = fig.subplots(1, 2)
    for r, d in data.items():
        label = f"bn/bm = {r:g} ({d['bm_bk'].size} blocks)"
        ax_n.scatter(d["bm_bk"], d["n_fused"], s=10, label=label)
        ax_f.scatter(d["bm_bk"], d["f"], s=10, label=label)
    ax_n.set(xscale="log", yscale="log", xlabel="bm * bk (elements)", ylabel="N_fused (Eq. 8)",
             title=f"{p.name}: resident A blocks in L1")
    ax_f.set(xscale="log", xlabel="bm * bk (elements)", ylabel="f = N_fused bm bk / L1",
             title=f"{p.name}: fusion efficiency")
    for ax in (ax_n, ax_f):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.savefig(os.fspath(path), dpi=dpi)
    return os.fspath(path)


# The paper's measured peaks on 910A (Sec. 4.2, Fig. 10), drawn for comparison.
PAPER_FIG10_PEAKS = {"single": 41.7, "double": 65.3}
PAPER_FIG10_BEST = (176, 64, 176, 44)


def fig10_tilings(profile: Profile | str, *, k: int | None = None) -> list:
    """The Fig. 10 sweep: Eq. 10-feasible blocks with bm, bn multiples of 32, bk in {16, 32, 64, 128},
    and the paper's best (176, 64, 176)."""
    from . import pipeline

    tilings = pipeline.feasible_tilings(profile, design=pipeline.PAPER_DOUBLE, k=k)
    grid = [t for t in tilings if t.bm % 32 == 0 and t.bn % 32 == 0 and t.bk in (16, 32, 64, 128)]
    return grid + [t for t in tilings if (t.bm, t.bk, t.bn) == PAPER_FIG10_BEST[:3]]


def fig10_data(profile: Profile | str, m: int, n: int, k: int, *, terms: int = 3,
               progress: bool = True) -> dict[str, list]:
    """Predicted TFLOP/s of the Fig. 10 sweep, ``{"single": [(tiling, tflops)...], "double": [...]}``."""
    from . import pipeline

    tilings = fig10_tilings(profile, k=k)
    return {b: pipeline.sweep(profile, m, n, k, design=pipeline.Design("paper", b, terms), tilings=tilings,
                              progress=progress)
            for b in ("single", "double")}


def plot_fig10(profile: Profile | str, path: str | os.PathLike[str], *, m: int, n: int, k: int, terms: int = 3,
               dpi: int = 120, progress: bool = True) -> str:
    """Write the paper's Fig. 10 from the pipeline model (MODEL PREDICTIONS) as an image.

    One panel per pipeline (single, double buffering, the paper's design):
    predicted FP32-equivalent TFLOP/s of every block of the sweep against
    its cube work per element copied to L0 (``bm bn / (bm + bn)``), coloured
    by bk; the paper's measured 910A peaks drawn as dashed lines for
    comparison (they were measured at its own problem size, which it does not
    state).  Needs matplotlib (the ``plot`` extra: :class:`MissingExtraError` without it); the sweep
    takes a few seconds (``progress``: a bar on stderr after a second).  Returns the path written.
    """
    Figure, FigureCanvasAgg = require_matplotlib()
    p = get_profile(profile)
    data = fig10_data(p, m, n, k, terms=terms, progress=progress)
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (buffering, rows) in zip(axes, data.items()):
        bm = np.array([t.bm for t, _ in rows], dtype=float)
        bn = np.array([t.bn for t, _ in rows], dtype=float)
        bk = np.array([t.bk for t, _ in rows])
        tf = np.array([x for _, x in rows])
        sc = ax.scatter(bm * bn / (bm + bn), tf, c=np.log2(bk), s=14, cmap="viridis")
        i = int(np.argmax(tf))
        t = rows[i][0]
        ax.annotate(f"best of this grid (bm, bk, bn, N_fused) = ({t.bm}, {t.bk}, {t.bn}, {t.n_fused}): {tf[i]:.1f}\n"
                    f"(the table ranks every feasible block: its best can differ)",
                    (bm[i] * bn[i] / (bm[i] + bn[i]), tf[i]),
                    xytext=(-150, 12), textcoords="offset points", fontsize="small",
                    arrowprops={"arrowstyle": "-", "lw": 0.6})
        if p.key == "910a":
            ax.axhline(PAPER_FIG10_PEAKS[buffering], ls="--", c="k", lw=0.8,
                       label=f"paper, measured peak: {PAPER_FIG10_PEAKS[buffering]}")
        ax.axhline(p.cube_fp16_tflops / terms, ls=":", c="gray", lw=0.8,
                   label=f"cube FP16 peak / {terms} products: {p.cube_fp16_tflops / terms:.1f}")
        ax.legend(loc="lower right", fontsize="small")
        ax.set(xlabel="bm bn / (bm + bn)  (cube MACs per element copied to L0)",
               title=f"{buffering}-buffered (model)")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("predicted TFLOP/s (FP32-equivalent)")
    cb = fig.colorbar(sc, ax=axes, shrink=0.8)
    cb.set_label("log2 bk")
    fig.suptitle(f"{p.name}, {m} x {n} x {k}, paper's design ({terms} passes), blocks with bm, bn multiples of 32 "
                 f"and bk in 16..128: MODEL PREDICTIONS")
    fig.savefig(os.fspath(path), dpi=dpi)
    return os.fspath(path)
