"""``sgemm-cube accuracy all``: every study, its data files, plots and a Markdown summary.

Three presets of sizes:

``"tiny"``
    Seconds: the CI smoke test of the whole pipeline.
``"small"`` (default)
    About a minute on a 2-core CPU with the CPU model (26-72 s measured);
    the papers' qualitative findings are visible.
``"paper"``
    The source papers' sizes where they give them (SGEMM-cube Fig. 9:
    K = 2816; BF16x9 Fig. 4: 160 x 160; Fig. 5: 512 x 1024 x 2048), with
    1000 trials instead of their 10000: for a GPU (``backend="cuda"``;
    167 s on one H200).

The report folder holds, per study, ``<name>.csv``, ``<name>.json`` and
``<name>.png``, and ``summary.md`` with the device, the command of each
figure, the key numbers and the paper's findings checked on the data.
"""
from __future__ import annotations

import time
from pathlib import Path

from . import condition, exponent_sweep, heatmap, size_sweep
from .io import load, save

__all__ = ["PRESETS", "run_all", "rebuild_report"]

#: preset -> [(file name, study module, keyword arguments)], in report order.
PRESETS = {
    "tiny": [
        ("exponent_sweep", exponent_sweep, dict(exp_range=(-20, 16), exp_step=4, m=24, k=64, n=16)),
        ("size_sweep", size_sweep, dict(mn_sizes=(8, 16), k_fixed=96, k_sizes=(32, 128), mn_fixed=8)),
        ("condition", condition, dict(delta_range=(1e1, 1e6), delta_count=3, size=24, trials=2)),
        ("heatmap", heatmap, dict(exp_range=(-24, 16), exp_step=8, m=8, k=32, n=8)),
        ("heatmap_wide", heatmap, dict(exp_range=(-140, 120), exp_step=45, m=8, k=32, n=8)),
    ],
    "small": [
        ("exponent_sweep", exponent_sweep, dict()),
        ("size_sweep", size_sweep, dict()),
        ("condition", condition, dict(trials=50)),
        ("heatmap", heatmap, dict()),
        ("heatmap_wide", heatmap, dict(exp_range=(-140, 120), exp_step=10)),
    ],
    "paper": [
        ("exponent_sweep", exponent_sweep, dict(m=1024, k=1024, n=1024, trials=3)),
        ("size_sweep", size_sweep, dict(mn_sizes=(256, 512, 1024, 2048, 4096, 8192), k_fixed=2816,
                                        k_sizes=(256, 1024, 4096, 16384, 65536), mn_fixed=1024, trials=3)),
        ("condition", condition, dict(size=160, trials=1000)),
        ("heatmap", heatmap, dict(m=512, k=1024, n=2048)),
        ("heatmap_wide", heatmap, dict(exp_range=(-140, 120), exp_step=10, m=512, k=1024, n=2048)),
    ],
}

_TITLES = {
    "exponent_sweep": "Relative error vs offset exponent (SGEMM-cube Fig. 8)",
    "size_sweep": "Relative error vs matrix size (SGEMM-cube Fig. 9)",
    "condition": "Error vs dot-product condition number (BF16x9 Fig. 4)",
    "heatmap": "SNR over exponents of A and B, FP16 range (BF16x9 Fig. 6)",
    "heatmap_wide": "SNR over exponents of A and B, whole FP32 range (BF16x9 Fig. 5)",
}


def run_all(*, out_dir, preset: str = "small", seed: int = 0, backend: str = "cpu", accumulate: str | None = None,
            plot: bool = True, progress: bool = True, print_fn=print) -> Path:
    """Run every study and write the report folder.

    Parameters
    ----------
    out_dir : str or Path
        Folder of the report (created).
    preset : {"tiny", "small", "paper"}
        Sizes (module docstring).
    seed : int
        Seed of every study.
    backend : {"cpu", "cuda"}
        Where the products run.
    accumulate : {"cube16", "sequential"} or None
        CPU model's accumulation.
    plot : bool
        Draw the PNGs (needs matplotlib: ``pip install 'sgemm_cube[plot]'``;
        without it :class:`~.plotting.PlotsUnavailable` is raised before any
        study runs); ``False`` writes data and summary only (draw them later
        with :func:`rebuild_report`).
    progress : bool
        Show progress bars.
    print_fn : callable or None
        Receives one line per finished study.

    Returns
    -------
    Path
        ``out_dir / "summary.md"``.
    """
    try:
        studies = PRESETS[preset]
    except KeyError:
        raise ValueError(f"unknown preset {preset!r}; choose one of {list(PRESETS)}") from None
    if plot:
        from .plotting import require_matplotlib

        require_matplotlib()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for name, module, kwargs in studies:
        start = time.perf_counter()
        study_fn = getattr(module, f"{module.STUDY.replace('-', '_')}_study")
        data = study_fn(**kwargs, seed=seed, backend=backend, accumulate=accumulate, progress=progress)
        data.meta["invoked_as"] = f"sgemm-cube accuracy all --preset {preset}"
        data.meta["seconds"] = round(time.perf_counter() - start, 1)
        save(data, out_dir, name)
        results[name] = data
        if print_fn:
            print_fn(f"{name}: {data.meta['seconds']:.1f} s -> {out_dir / name}.*")
    return _write_report(out_dir, results, plot=plot)


def rebuild_report(folder, *, out=None) -> Path:
    """Redraw the PNGs and rewrite ``summary.md`` from the JSON files of a report folder.

    For a report computed where matplotlib is missing (``plot=False``, e.g.
    on a GPU server): copy the folder, then rebuild it here.  ``out``: the
    folder of the PNGs and ``summary.md`` (created; default: ``folder``).
    Raises :class:`~.plotting.PlotsUnavailable` without matplotlib.
    """
    from .plotting import require_matplotlib

    require_matplotlib()
    folder = Path(folder)
    results = {name: load(folder / f"{name}.json") for name in _TITLES if (folder / f"{name}.json").exists()}
    if not results:
        raise FileNotFoundError(f"{folder} holds none of {[f'{n}.json' for n in _TITLES]}")
    out_dir = Path(out) if out is not None else folder
    out_dir.mkdir(parents=True, exist_ok=True)
    return _write_report(out_dir, results, plot=True)


def _write_report(out_dir: Path, results: dict, *, plot: bool) -> Path:
    modules = {module.STUDY: module for module in (exponent_sweep, size_sweep, condition, heatmap)}
    sections, meta = [], {}
    for name, data in results.items():
        if plot:
            from .plotting import plot as draw

            draw(data, out_dir / f"{name}.png")
        meta = data.meta
        figure = f"![{_TITLES[name]}]({name}.png)\n\n" if plot else ""
        seconds = f" ({meta['seconds']:.0f} s)" if "seconds" in meta else ""
        sections.append(f"## {_TITLES[name]}\n\n{figure}Data: `{name}.csv`, `{name}.json`{seconds}. Reproduce:\n\n"
                        f"```bash\n{meta['command']}\n```\n\n{modules[data.study].summarize(data)}")
    head = meta.get("invoked_as", "sgemm-cube accuracy all")
    summary = out_dir / "summary.md"
    summary.write_text(f"# sgemm_cube accuracy report\n\n`{head}`, seed {meta.get('seed')}, backend "
                       f"`{meta.get('backend')}`: {meta.get('device')}.\n\n" + "\n".join(sections), encoding="utf-8")
    return summary
