"""Fig. 5 of the paper: N_fused and f against bm*bk for several bn/bm."""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from .hardware import Profile, get_profile
from .model import enumerate_blocks

__all__ = ["fig5_data", "plot_fig5"]


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

    Needs matplotlib (the ``plot`` extra); uses the non-interactive Agg
    canvas, so it works without a display.  Returns the path written.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

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
