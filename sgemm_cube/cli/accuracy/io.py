"""Study results as data files: CSV and JSON that carry their own provenance.

A study returns a :class:`StudyData`: a flat table (one row per measured
point) plus metadata.  :func:`save` writes it as ``<name>.csv`` and
``<name>.json``; both hold the command line that reproduces the data, the
seed, the backend and device, and the versions used.  :func:`load` reads
either file back into an equal :class:`StudyData`.

CSV layout: ``# key: <JSON value>`` comment lines for the metadata, then a
header row and the data: any CSV reader that skips lines starting with
``#`` reads the table (``pandas.read_csv(path, comment="#")``).
Missing values (a point outside the split's range) are empty in the CSV and
``null`` in the JSON.
"""
from __future__ import annotations

import csv
import datetime
import json
import math
import platform
import shlex
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["StudyData", "save", "load", "command_line", "study_meta", "error_cells", "worse_than_native_line",
           "FORMAT_VERSION"]

#: Bumped when the file layout changes.
FORMAT_VERSION = 1


@dataclass
class StudyData:
    """One study's measurements.

    Attributes
    ----------
    study : str
        Subcommand name (``"exponent-sweep"``, ``"size-sweep"``, ``"condition"``, ``"heatmap"``).
    columns : list of str
        Column names, in order.
    rows : list of dict
        One dict per point; values are str, int, float (NaN for missing) or None.
    meta : dict
        ``command``, ``seed``, ``backend``, ``device``, ``params`` (the study's
        keyword arguments), ``versions`` and whatever the study adds.
    """

    study: str
    columns: list[str]
    rows: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def column(self, name: str, **where) -> list:
        """Values of column ``name`` in the rows whose columns equal ``where``."""
        return [r[name] for r in self.rows if all(r.get(k) == v for k, v in where.items())]

    def values(self, name: str, **where) -> list:
        """Distinct values of column ``name`` (in the rows matching ``where``), in order of appearance."""
        return list(dict.fromkeys(self.column(name, **where)))

    def label(self, method: str) -> str:
        """Legend text of a method key (the key itself if the metadata has none)."""
        return self.meta.get("labels", {}).get(method, method)


#: Method keys that are not sgemm_cube (the baselines beside it).
_BASELINES = ("fp16", "fp32")


def error_cells(method: str, values, native) -> tuple[list[str], list[int]]:
    """A summary table's cells of ``method``'s errors, those above native FP32's ``native`` (same data) marked.

    Returns the cells (``"3.1e-07 **(2.1x native)**"`` where sgemm_cube's error exceeds native's) and the
    indices of the marked ones.  The baselines themselves are never marked.
    """
    cells, worse = [], []
    for i, (v, nat) in enumerate(zip(values, native)):
        if v is None or v != v:  # missing (NaN)
            cells.append("-")
            continue
        if method not in _BASELINES and nat == nat and v > nat:
            cells.append(f"{v:.2e} **({v / nat:.2f}x native)**" if nat > 0 else f"{v:.2e} **(native 0)**")
            worse.append(i)
        else:
            cells.append(f"{v:.2e}")
    return cells, worse


def worse_than_native_line(flagged: dict, axis: str, points: list) -> str:
    """The line under a summary table: where sgemm_cube's error exceeded native FP32's, or that it never did.

    ``flagged``: method label -> indices into ``points`` (the sweep's values of ``axis``) where it did;
    runs of neighbouring points are written ``first..last``.
    """
    parts = []
    for label, indices in flagged.items():
        if not indices:
            continue
        runs, start = [], indices[0]
        for prev, i in zip(indices, indices[1:] + [None]):
            if i != prev + 1:
                runs.append(f"{points[start]}" if start == prev else f"{points[start]}..{points[prev]}")
                start = i
        parts.append(f"{label} at {axis}=" + ", ".join(runs))
    if not parts:
        return "sgemm_cube's error is at most native FP32's at every point of this sweep."
    return "**sgemm_cube's error exceeds native FP32's** (cells marked): " + "; ".join(parts) + "."


def command_line(subcommand: str, params: dict) -> str:
    """The ``sgemm-cube accuracy`` command that runs ``subcommand`` with ``params``.

    Each keyword ``name`` becomes ``--name-with-dashes``; sequences become
    several values, ``True`` a bare flag, ``False`` and ``None`` nothing.
    :mod:`sgemm_cube.cli.accuracy.cli` defines its options the same way, so the
    line parses back to the same parameters.
    """
    words = ["sgemm-cube", "accuracy", subcommand]
    for name, value in params.items():
        flag = "--" + name.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            words.append(flag)
        elif isinstance(value, (list, tuple)):
            words += [flag, *(_word(v) for v in value)]
        else:
            words += [flag, _word(value)]
    return shlex.join(words)


def study_meta(study: str, params: dict, *, device: str, methods=(), **extra) -> dict:
    """Metadata of a study run: the command that reproduces it, seed, backend, device, versions.

    ``params`` are the study function's keyword arguments (those that change
    the data: not the progress bar); ``methods`` the compared products (their
    ``key`` -> ``label`` becomes ``labels``); ``extra`` adds study-specific entries.
    """
    import numpy as np

    from ... import __version__

    versions = {"sgemm_cube": __version__, "numpy": np.__version__, "python": platform.python_version()}
    if params.get("backend") == "cuda":
        import torch

        versions["torch"] = torch.__version__
    return {"command": command_line(study, params), "seed": params.get("seed"), "backend": params.get("backend"),
            "device": device, "params": params, "labels": {m.key: m.label for m in methods}, "versions": versions,
            "created_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), **extra}


def _word(value) -> str:
    return format(value, "g") if isinstance(value, float) else str(value)


def _json_value(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _from_json_value(value):
    if value is None:
        return math.nan
    if value in ("inf", "-inf"):
        return float(value)
    return value


def save(data: StudyData, out_dir, name: str | None = None) -> dict[str, Path]:
    """Write ``data`` to ``out_dir/<name>.csv`` and ``.json`` (``name`` defaults to the study).

    Returns
    -------
    dict
        ``{"csv": path, "json": path}``.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = name or data.study.replace("-", "_")
    paths = {"csv": out_dir / f"{name}.csv", "json": out_dir / f"{name}.json"}
    head = {"format_version": FORMAT_VERSION, "study": data.study, "meta": data.meta, "columns": data.columns}
    rows = ",\n".join(json.dumps([_json_value(row.get(c)) for c in data.columns]) for row in data.rows)
    # One row per line: readable and diff-friendly, a third of the size of an indented dump.
    paths["json"].write_text(json.dumps(head, indent=1)[:-2] + f',\n "rows": [\n{rows}\n ]\n}}\n', encoding="utf-8")
    with paths["csv"].open("w", newline="", encoding="utf-8") as f:
        f.write(f"# study: {json.dumps(data.study)}\n")
        for key, value in data.meta.items():
            f.write(f"# {key}: {json.dumps(value)}\n")
        writer = csv.writer(f)
        writer.writerow(data.columns)
        for row in data.rows:
            writer.writerow(["" if _missing(row.get(c)) else _csv_cell(row.get(c)) for c in data.columns])
    return paths


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _csv_cell(value):
    return repr(value) if isinstance(value, float) else value  # repr round-trips floats exactly


def load(path) -> StudyData:
    """Read a file written by :func:`save` (``.json`` or ``.csv``) back into a :class:`StudyData`.

    Numbers come back as int or float (missing values as NaN), text as str.
    """
    path = Path(path)
    if path.suffix == ".json":
        doc = json.loads(path.read_text(encoding="utf-8"))
        rows = [{c: _from_json_value(v) for c, v in zip(doc["columns"], values)} for values in doc["rows"]]
        return StudyData(doc["study"], list(doc["columns"]), rows, doc["meta"])
    if path.suffix != ".csv":
        raise ValueError(f"{path}: expected a .json or .csv file written by sgemm_cube.cli.accuracy")
    meta, study, lines = {}, None, []
    with path.open(encoding="utf-8", newline="") as f:
        for line in f:
            if line.startswith("# "):
                key, _, value = line[2:].partition(": ")
                if key == "study":
                    study = json.loads(value)
                else:
                    meta[key] = json.loads(value)
            else:
                lines.append(line)
    reader = csv.reader(lines)
    columns = next(reader)
    rows = [{c: _parse_cell(v) for c, v in zip(columns, values)} for values in reader]
    if study is None:
        raise ValueError(f"{path}: no '# study:' line; not a file written by sgemm_cube.cli.accuracy")
    return StudyData(study, columns, rows, meta)


def _parse_cell(text: str):
    if text == "":
        return math.nan
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
