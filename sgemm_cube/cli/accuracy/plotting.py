"""Figures of the studies, drawn with matplotlib from a :class:`~.io.StudyData`.

matplotlib is imported inside the functions (``import sgemm_cube`` never
imports it) and only through its object-oriented API with the Agg canvas,
so plotting neither needs a display nor changes the backend of a user's
interactive session.  :func:`plot` picks the figure by the data's study;
the same data loaded back from CSV/JSON gives the same figure.

matplotlib is the optional extra ``plot`` (``pip install 'sgemm_cube[plot]'``):
without it :func:`plot` raises :class:`PlotsUnavailable` saying so, and
:func:`matplotlib_missing` lets a command skip its figures beforehand.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .io import StudyData

__all__ = ["plot", "plot_exponent_sweep", "plot_size_sweep", "plot_condition", "plot_heatmap", "PlotsUnavailable",
           "matplotlib_missing", "require_matplotlib", "INSTALL_PLOT"]

#: How to install what the figures need.
INSTALL_PLOT = "pip install 'sgemm_cube[plot]'"

_SB_COLOURS = {0: "tab:red", 6: "tab:orange", 12: "tab:blue"}
_OTHER_COLOURS = ["tab:purple", "tab:brown", "tab:pink", "tab:cyan", "tab:olive"]
_DEFAULTS_COLOUR = "tab:green"  # sgemm_cube with the library's defaults ("auto")


class PlotsUnavailable(ImportError):
    """matplotlib cannot be imported; the message names the extra to install."""


def matplotlib_missing() -> str | None:
    """Why the figures cannot be drawn here (matplotlib does not import), or None when they can."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        return f"the figures need matplotlib, which cannot be imported ({exc}): {INSTALL_PLOT}"
    return None


def require_matplotlib() -> None:
    """Raise :class:`PlotsUnavailable` (one line: what to install) when matplotlib does not import."""
    reason = matplotlib_missing()
    if reason:
        raise PlotsUnavailable(reason)


def _figure(width: float, height: float, data: StudyData):
    """A figure whose bottom strip prints the command that reproduces it; returns (figure, drawing area)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    footer = 0.32  # inches
    fig = Figure(figsize=(width, height + footer), layout="constrained")
    FigureCanvasAgg(fig)
    main, bottom = fig.subfigures(2, 1, height_ratios=[height, footer])
    bottom.text(0.005, 0.5, f"{data.meta.get('command', '')}\n{data.meta.get('device', '')}", fontsize=6,
                color="0.35", ha="left", va="center")
    return fig, main


def _style(key: str) -> dict:
    """Line style of a method key: baselines in black and grey, the paper's split coloured by sb, the
    library's defaults in green."""
    if key == "fp16":
        return dict(color="black", linestyle=":", marker="x", markersize=4, linewidth=1.3)
    if key == "fp32":
        return dict(color="0.45", linestyle="-", linewidth=3.0, alpha=0.8)
    if key == "auto":
        # under the other curves (drawn after them, thicker): the paper's split shows where both coincide
        return dict(color=_DEFAULTS_COLOUR, linestyle="-", marker="s", markersize=4.5, linewidth=3.0, alpha=0.75,
                    zorder=1.9)
    kind, _, sb = key.rpartition("_sb")
    sb = int(sb)
    colour = _SB_COLOURS.get(sb, _OTHER_COLOURS[sb % len(_OTHER_COLOURS)])
    if kind == "termwise":
        return dict(color=colour, linestyle="-", marker="o", markersize=3.5, linewidth=1.5)
    return dict(color=colour, linestyle="--", marker="^", markersize=3.5, linewidth=1.2, markerfacecolor="none")


def _legend_below(main, ax, ncol: int = 3) -> None:
    """One legend for all panels (they share the methods), under the axes."""
    main.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=ncol, fontsize=8)


def plot(data: StudyData, path) -> Path:
    """Draw the figure of ``data``'s study into ``path`` (PNG, 120 dpi) and return the path.

    Raises :class:`PlotsUnavailable` when matplotlib cannot be imported.
    """
    require_matplotlib()
    draw = {"exponent-sweep": plot_exponent_sweep, "size-sweep": plot_size_sweep, "condition": plot_condition,
            "heatmap": plot_heatmap}
    try:
        fn = draw[data.study]
    except KeyError:
        raise ValueError(f"no figure for study {data.study!r}; known: {list(draw)}") from None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fn(data).savefig(path, dpi=120)
    return path


def plot_exponent_sweep(data: StudyData):
    """SGEMM-cube Fig. 8: relative error vs offset exponent, one panel per distribution."""
    p = data.meta["params"]
    dists = data.values("distribution")
    fig, main = _figure(6.2 * len(dists), 5.4, data)
    axes = main.subplots(1, len(dists), sharey=True, squeeze=False)[0]
    for ax, dist, letter in zip(axes, dists, "abcdef"):
        for key in data.values("method"):
            sel = [r for r in data.rows if r["distribution"] == dist and r["method"] == key]
            ax.plot([r["exponent"] for r in sel], [r["rel_error"] for r in sel], label=data.label(key),
                    **_style(key))
        beyond = sorted({r["exponent"] for r in data.rows
                         if r["distribution"] == dist and r["status"] == "out_of_range"})
        if beyond:
            right = max(r["exponent"] for r in data.rows) + 0.5
            ax.axvspan(beyond[0] - 0.5, right, color="0.88", zorder=0)
            ax.text((beyond[0] - 0.5 + right) / 2, 0.5, "paper's split: beyond its range (Rule 2)", rotation=90,
                    transform=ax.get_xaxis_transform(), ha="center", va="center", fontsize=7, color="0.3")
        span = "[-2^e, 2^e]" if dist == "symmetric" else "[0, 2^e]" if dist == "nonnegative" else f"{dist}, scale 2^e"
        ax.set_title(f"({letter}) inputs {span}", fontsize=10)
        ax.set_yscale("log")
        ax.set_xlabel("offset exponent e of the inputs")
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("relative error ||C - C64||_F / ||C64||_F")
    _legend_below(main, axes[0])
    main.suptitle(f"Relative error vs offset exponent (SGEMM-cube Fig. 8): {p['m']}x{p['k']} times {p['k']}x{p['n']}, "
                  f"{p['trials']} trial(s), backend {p['backend']}", fontsize=10)
    return fig


def plot_size_sweep(data: StudyData):
    """SGEMM-cube Fig. 9: error vs M = N (K fixed) and vs K (M = N fixed), one row per distribution."""
    p = data.meta["params"]
    dists = data.values("distribution")
    fig, main = _figure(11.0, 3.8 * len(dists) + 0.6, data)
    axes = main.subplots(len(dists), 2, squeeze=False)
    for row, dist in enumerate(dists):
        for col, (sweep, axis, title) in enumerate((("mn", "m", f"vs M = N, K = {p['k_fixed']}"),
                                                    ("k", "k", f"vs K, M = N = {p['mn_fixed']}"))):
            ax = axes[row, col]
            for key in data.values("method"):
                sel = [r for r in data.rows if r["sweep"] == sweep and r["distribution"] == dist and r["method"] == key]
                ax.plot([r[axis] for r in sel], [r["rel_error"] for r in sel], label=data.label(key),
                        **_style(key))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("M = N" if sweep == "mn" else "K")
            ax.set_title(f"{dist} inputs, {title}", fontsize=10)
            ax.grid(True, which="major", alpha=0.3)
        axes[row, 0].set_ylabel("relative error (Eq. 12)")
    _legend_below(main, axes[0, 0])
    main.suptitle(f"Relative error vs matrix size (SGEMM-cube Fig. 9): offset exponent {p['exponent']}, "
                  f"{p['trials']} trial(s), backend {p['backend']}", fontsize=10)
    return fig


def plot_condition(data: StudyData):
    """BF16x9 Fig. 4: average componentwise error vs condition number, and share of outputs better than FP32."""
    p = data.meta["params"]
    fig, main = _figure(11.0, 4.6, data)
    ax_err, ax_share = main.subplots(1, 2)
    for key in data.values("method"):
        sel = [r for r in data.rows if r["method"] == key]
        kappa = [r["kappa_mean"] for r in sel]
        ax_err.plot(kappa, [r["mean_rel_error"] for r in sel], label=data.label(key), **_style(key))
        if key != "fp32":
            ax_share.plot(kappa, [100 * r["share_better"] for r in sel], label=data.label(key), **_style(key))
    ax_err.set_xscale("log")
    ax_err.set_yscale("log")
    ax_err.set_xlabel("average dot-product condition number (measured)")
    ax_err.set_ylabel("average componentwise relative error")
    ax_err.set_title("error vs conditioning", fontsize=10)
    ax_err.legend(fontsize=7)
    ax_share.axhline(50, color="0.5", linewidth=1, linestyle=":")
    ax_share.set_xscale("log")
    ax_share.set_ylim(0, 100)
    ax_share.set_xlabel("average dot-product condition number (measured)")
    ax_share.set_ylabel("outputs more accurate than native FP32 (%)")
    ax_share.set_title("share of outputs more accurate than native FP32", fontsize=10)
    ax_share.legend(fontsize=7, loc="lower right")
    for ax in (ax_err, ax_share):
        ax.grid(True, which="major", alpha=0.3)
    main.suptitle(f"Error vs dot-product condition number (BF16x9 Fig. 4): {p['trials']} pairs of "
                  f"{p['size']}x{p['size']} per point, backend {p['backend']}", fontsize=10)
    return fig


def plot_heatmap(data: StudyData):
    """BF16x9 Fig. 5/6: SNR in dB over exponents of A and B, every method on one colour scale (top row), and
    each emulation's SNR minus native FP32's under it (bottom row)."""
    from matplotlib import colormaps

    from .heatmap import grid

    p = data.meta["params"]
    keys = data.values("method")  # native FP32 first, then the emulations
    grids = {}
    for key in keys:
        exps, grids[key] = grid(data, key)
    finite = np.concatenate([z[np.isfinite(z)] for z in grids.values()])
    vmax = math.ceil(finite.max() / 10) * 10 if finite.size else 160
    step = exps[1] - exps[0] if len(exps) > 1 else 1
    extent = (exps[0] - step / 2, exps[-1] + step / 2, exps[0] - step / 2, exps[-1] + step / 2)
    fig, main = _figure(5.6 * len(keys), 9.6, data)
    axes = main.subplots(2, len(keys), squeeze=False)
    snr_map = colormaps["viridis"].with_extremes(bad="0.8")
    for ax, key in zip(axes[0], keys):
        image = ax.imshow(np.clip(grids[key], 0, None), origin="lower", extent=extent, cmap=snr_map, vmin=0,
                          vmax=vmax, aspect="auto", interpolation="nearest")
        ax.set_title(f"{data.label(key)}\nSNR (dB)", fontsize=9)
    main.colorbar(image, ax=axes[0].tolist(), label="SNR = -20 log10(RMS) dB (same scale)", shrink=0.9)
    limit = 20.0
    diff_map = colormaps["RdBu"].with_extremes(bad="0.8")
    native = grids["fp32"]
    for ax, key in zip(axes[1, 1:], keys[1:]):
        image = ax.imshow(np.clip(grids[key] - native, -limit, limit), origin="lower", extent=extent, cmap=diff_map,
                          vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
        ax.set_title(f"{data.label(key)}\nminus native FP32: blue = more accurate", fontsize=9)
    main.colorbar(image, ax=axes[1, 1:].tolist(), label=f"SNR difference in dB (clipped at +-{limit:.0f})",
                  shrink=0.9)
    axes[1, 0].axis("off")
    paper = any(key not in ("fp32", "auto") for key in keys)
    axes[1, 0].text(0.0, 0.5, "Top: SNR of each method.\nBottom: SNR difference to native FP32\n"
                    "under each emulation (blue: more accurate,\nred: less accurate).\n\n"
                    "Grey cells have no SNR: "
                    + ("the paper's split\nbeyond its range (Rule 2), " if paper else "")
                    + "a result that\nis not finite (FP32 overflow), or inputs\nflushed to zero.",
                    transform=axes[1, 0].transAxes, ha="left", va="center", fontsize=9)
    for ax in [*axes[0], *axes[1, 1:]]:
        ax.set_xlabel("exponent of A (values scaled by 2^e_A)")
        ax.set_ylabel("exponent of B (values scaled by 2^e_B)")
    main.suptitle(f"SNR over input exponents (BF16x9 Fig. 5/6): {p['m']}x{p['k']} times {p['k']}x{p['n']}, "
                  f"{p['distribution']} inputs, backend {p['backend']}", fontsize=10)
    return fig
