"""The AscendC kernels executed on the host: build the harness of ``ascendc_kernels/tests/exec_ascendc/``
for a chip, run one product through it, and stand in for the compiled ``_npu_ext`` with it.

Shared by ``test_executed_kernels.py`` (the kernels against the models) and
``tests/sgemm_cube/backends/test_npu_backend.py`` (``npu.run``'s bookkeeping around the executed kernels).

Every runner takes ``arithmetic``: the open hardware behaviours the stand-in assumes
(``cpu_fallback.arithmetic.Arithmetic`` or its spec string, e.g. ``"cast=trunc"``), passed to that one
subprocess as ``SGEMM_CUBE_EXEC_ARITHMETIC``; None leaves the environment's choice (normally unset: the
defaults).  One build runs every choice.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
import threading
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

# guard::Scale, guard::Subnormals (one source) and the extension's options struct
from sgemm_cube.backends.npu import SCALE_CODE, SUBNORMALS_CODE, MatmulOptions
from sgemm_cube.cpu_fallback.arithmetic import Arithmetic

from .test_ascend_kernel_sources import CHIPS, KERNELS

#: the stand-in's environment variable (exec_ascendc/exec_state.h)
ARITHMETIC_ENV = "SGEMM_CUBE_EXEC_ARITHMETIC"


def subprocess_env(arithmetic: Arithmetic | str | None) -> dict | None:
    """The environment of one harness run: the caller's, with ``SGEMM_CUBE_EXEC_ARITHMETIC`` set to
    ``arithmetic``'s spec (checked by ``Arithmetic.parse`` here, so a typo fails before any run);
    None when ``arithmetic`` is None (inherit)."""
    if arithmetic is None:
        return None
    if isinstance(arithmetic, str):
        arithmetic = Arithmetic.parse(arithmetic)
    return {**os.environ, ARITHMETIC_ENV: arithmetic.check().spec()}


EXEC = KERNELS / "tests" / "exec_ascendc"
HARNESS = EXEC / "run_kernels.cpp"
#: chip as ``CHIPS`` names it -> the ``tuning/profiles/ascend.json`` name
PROFILE = {"910A": "910a", "910B": "910b"}


def _gxx() -> str:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ not found")
    return gxx


#: the bookkeeping kernels' harness (line statistics and meta)
LINE_META_HARNESS = EXEC / "run_line_meta.cpp"


#: the optimisation of the harness builds: the unmodified sources' run hundreds of products
OPT = "-O1"
#: the planted bugs' builds (one product or a few each): -Og compiles in about half of -O1's time and runs
#: about 1.8 times slower (-O0: 60% of the time, 3 times slower).  Both are IEEE arithmetic on x86-64 (SSE,
#: no FMA contraction, no fast-math), so the bits are the same; the unmodified sources built through the
#: planted machinery (:func:`control`) check it, bit for bit.
PLANTED_OPT = "-Og"

#: binaries of the unmodified sources built in this session: (soc, harness, defines, opt) -> path
_BUILT: dict[tuple, Path] = {}
_BUILT_LOCK = threading.Lock()


def build_jobs() -> int:
    """How many builds run at once: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _flags(soc: str, opt: str, defines=()) -> list[str]:
    """g++'s language, optimisation, warning and macro flags of a harness build for ``soc``."""
    arch, macro = CHIPS[soc]
    return (["-std=c++17", opt, "-Wall", "-Wextra", "-Werror", f"-D__NPU_ARCH__={arch}", f"-D{macro}"]
            + [f"-D{d}" for d in defines])


class _ModelHeader(NamedTuple):
    """The functional model's ``kernel_operator.h`` precompiled (every harness includes it first)."""
    header: Path               # includes kernel_operator.h; ``header.gch`` beside it
    kernel_headers: tuple      # the kernel sources' headers it pulls in (include/sgemm_cube/arch, detail)


#: (soc, opt) -> the precompiled model of the planted builds, made on first use in this process
_MODEL_HEADERS: dict[tuple, _ModelHeader] = {}
_MODEL_HEADERS_LOCK = threading.Lock()


def _model_header(soc: str, opt: str) -> _ModelHeader:
    """``kernel_operator.h`` precompiled for ``soc`` at ``opt``, once per process: parsing it (and the C++
    headers it includes) is about a quarter of a planted build's 2.5-3 s of CPU."""
    with _MODEL_HEADERS_LOCK:
        done = _MODEL_HEADERS.get((soc, opt))
        if done is not None:
            return done
        directory = tempfile.mkdtemp(prefix=f"sgemm_cube_model_{soc}{opt}_")
        atexit.register(shutil.rmtree, directory, True)
        header = Path(directory) / "model.h"
        header.write_text('#include "kernel_operator.h"\n')
        cmd = [_gxx(), *_flags(soc, opt), "-I", str(EXEC), "-I", str(KERNELS / "include"), "-x", "c++-header"]
        res = subprocess.run([*cmd, str(header), "-o", f"{header}.gch", "-MD", "-MF", str(header.with_suffix(".d"))],
                             capture_output=True, text=True)
        assert res.returncode == 0, f"the model's header did not precompile for {soc}:\n{res.stderr[-4000:]}"
        deps = header.with_suffix(".d").read_text().replace("\\\n", " ").split()
        inside = (KERNELS / "include").resolve()
        kernel_headers = tuple(sorted(str(Path(d).resolve().relative_to(inside)) for d in deps
                                      if Path(d).resolve().is_relative_to(inside)))
        assert kernel_headers, deps  # arch.hpp at least: a change of the model's includes shows here
        done = _MODEL_HEADERS[soc, opt] = _ModelHeader(header, kernel_headers)
        return done


def _precompiled_for(src_root: Path, soc: str, opt: str) -> list[str]:
    """``-include`` flags of the precompiled model for a build from the copy ``src_root`` of the kernel
    sources, or none where the copy changed a kernel header the precompiled model holds (its bug would be
    hidden by the original)."""
    model = _model_header(soc, opt)
    for rel in model.kernel_headers:
        if (Path(src_root) / "include" / rel).read_bytes() != (KERNELS / "include" / rel).read_bytes():
            return []
    return ["-include", str(model.header), "-Winvalid-pch"]


def build(out: Path, soc: str, *, src_root: Path = KERNELS, defines=(), harness: Path = HARNESS,
          opt: str = OPT, precompiled: bool = False) -> Path:
    """The harness ``harness`` built with g++ for ``soc`` from the kernel sources under ``src_root``, at
    ``out``.  A build of the unmodified sources is made once per session and copied to later ``out``.
    ``precompiled``: include the precompiled model (:func:`_model_header`; no ``defines``), for the many
    builds of planted bugs."""
    key = (soc, str(harness), tuple(defines), opt) if Path(src_root) == KERNELS else None
    with _BUILT_LOCK:
        done = _BUILT.get(key)
    if done is not None and done.exists():
        if Path(out) != done:
            shutil.copy2(done, out)
        return out
    cmd = [_gxx(), *_flags(soc, opt, defines)]
    if precompiled:
        assert not defines, "the precompiled model is built without extra macros"
        cmd += _precompiled_for(src_root, soc, opt)
    cmd += ["-I", str(EXEC), "-I", str(src_root / "include"), "-I", str(KERNELS / "host"),
            "-I", str(src_root / "kernel"), str(harness), "-o", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, f"build for {soc} failed:\n{res.stderr[-4000:]}"
    if key is not None:
        with _BUILT_LOCK:
            _BUILT[key] = Path(out)
    return out


def build_chips(directory: Path, stem: str = "run", *, harness: Path = HARNESS, chips=tuple(CHIPS)) -> dict:
    """``{soc: binary}``: the harness built for each chip, the builds side by side (:func:`build_jobs`)."""
    with ThreadPoolExecutor(max_workers=build_jobs()) as pool:
        futures = {soc: pool.submit(build, directory / f"{stem}_{soc}", soc, harness=harness) for soc in chips}
        return {soc: f.result() for soc, f in futures.items()}


def zz_decode(flat: np.ndarray, batch: int, rows: int, cols: int) -> np.ndarray:
    """Zz (16x16 fractals, row of fractals by row of fractals, each row-major) -> row-major."""
    x = flat.reshape(batch, rows // 16, cols // 16, 16, 16)
    return x.transpose(0, 1, 3, 2, 4).reshape(batch, rows, cols)


def pad16(x: int) -> int:
    return -(-x // 16) * 16


#: FP32 words per batch of the bookkeeping's batch words (``schedule::kFlagWords``; word 0 scaled, 1 listed, 2 wide)
FLAG_WORDS = 8


class Run:
    def __init__(self, proc, c, parts, meta=None, flags=None, stats=None):
        self.rc, self.stdout, self.stderr = proc.returncode, proc.stdout, proc.stderr
        self.c, self.parts, self.meta = c, parts, meta
        self.flags = flags  # guard="device": (batch, FLAG_WORDS) float32, the meta kernels' batch words
        # guard="device": ((big, small_w, finite) of A's rows, the same of B's columns), (batch, lines) int32 each
        self.stats = stats

    @property
    def clean(self) -> bool:
        return self.rc == 0 and "CHECK-SUMMARY errors=0 " in self.stdout


_GUARD_CODE = {None: 0, "device": 1, "fp32": 2, "split": 3, "band": 4}  # the harness's header field `guard`


def run(binary: Path, a, b, *, sb=12, keep_lo_lo=False, tiling=(32, 32, 32, 4), cube=4, vector=4,
        workdir: Path, guard: str | None = None, scale="auto", fixup=True, alpha=1.0,
        arithmetic: Arithmetic | str | None = None, subnormals: str = "gradual", bands=False,
        meta_a=None, meta_b=None, band_a=False, band_b=False) -> Run:
    """One product through the harness; ``guard="device"`` computes the guarantee's integers on the
    device first, scales the lines in the splits and unscales C (times ``alpha``) after the combine
    (``Run.meta``: A's and B's packed integers, ``Run.stats``: their statistics); ``bands``: the
    extension's ``options.bands`` (the fix-up takes the SPECIAL lines only).  ``guard="fp32"`` runs
    ``host/binding.cpp``'s ``matmul_fp32`` instead (C = alpha * AB in plain FP32 on the vector units,
    every row through the fix-up kernel); ``guard="band"`` its ``band_pass``: the given packed integers
    ``meta_a`` (batch, m) and ``meta_b`` (batch, n) scale the lines, ``band_a`` / ``band_b`` put the band
    cutoff on that side's split.  ``arithmetic``: the stand-in's open behaviours (module docstring).
    ``subnormals``: the split range the device's line meta (and the band window) uses (``"flush"``: the
    one safe whichever way FP16 subnormals go, ``cpu_fallback.guard.line_range(..., arithmetic=...)``)."""
    batch, m, k = a.shape
    n = b.shape[2]
    given = b""
    if guard == "band":
        ma, mb = np.asarray(meta_a, np.int32), np.asarray(meta_b, np.int32)
        assert ma.shape == (batch, m) and mb.shape == (batch, n), (ma.shape, mb.shape)
        given = np.ascontiguousarray(ma).tobytes() + np.ascontiguousarray(mb).tobytes()
    # (bm, bk, bn, n_fused[, per_term[, l0c_stages]]): per_term 0 and l0c_stages 1 when not given
    tiling = tuple(int(x) for x in tiling) + (0, 1)[len(tiling) - 4:]
    hdr = np.array([batch, m, n, k, sb, int(keep_lo_lo), *tiling[:5], cube, vector, _GUARD_CODE[guard],
                    SCALE_CODE[scale], int(fixup), int(np.float32(alpha).view(np.uint32)),
                    SUBNORMALS_CODE[subnormals], tiling[5], int(bands), int(band_a), int(band_b)], np.int64)
    inp, outp = workdir / "in.bin", workdir / "out.bin"
    inp.write_bytes(hdr.tobytes() + np.ascontiguousarray(a, np.float32).tobytes()
                    + np.ascontiguousarray(b, np.float32).tobytes() + given)
    if outp.exists():
        outp.unlink()
    proc = subprocess.run([str(binary), str(inp), str(outp)], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(arithmetic))
    if proc.returncode not in (0, 1) or not outp.exists():
        return Run(proc, None, None)
    raw = outp.read_bytes()
    mp, np_, kp = pad16(m), pad16(n), pad16(k)
    c = np.frombuffer(raw, np.float32, batch * m * n).reshape(batch, m, n)
    off = batch * m * n * 4
    parts = []
    for rows, cols in ((mp, kp), (mp, kp), (kp, np_), (kp, np_)):
        cnt = batch * rows * cols
        parts.append(zz_decode(np.frombuffer(raw, np.float16, cnt, off), batch, rows, cols))
        off += cnt * 2
    meta = flags = stats = None
    if guard == "device":
        meta = (np.frombuffer(raw, np.int32, batch * m, off).reshape(batch, m),
                np.frombuffer(raw, np.int32, batch * n, off + batch * m * 4).reshape(batch, n))
        off += batch * (m + n) * 4
        flags = np.frombuffer(raw, np.float32, batch * FLAG_WORDS, off).reshape(batch, FLAG_WORDS)
        off += batch * FLAG_WORDS * 4
        stats = []
        for lines in (m, n):
            stats.append(tuple(np.frombuffer(raw, np.int32, batch * lines, off + i * batch * lines * 4)
                               .reshape(batch, lines) for i in range(3)))
            off += 3 * batch * lines * 4
        stats = tuple(stats)
    return Run(proc, c, parts, meta, flags, stats)


def vector_cores(soc: str, cube_cores: int) -> int:
    """Vector cores of a chip with ``cube_cores`` cube cores, as ``host/binding.cpp`` counts them (910A: the
    same cores; 910B: two AIV per AIC)."""
    return cube_cores if soc.upper() == "910A" else 2 * cube_cores


def _captured():
    """Tensor methods as they are at import: the stand-in extension plays the device, whose own reads a
    test of npu.run's host traffic must not count."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a test dependency
        return None, None, None
    return torch.Tensor.cpu, torch.Tensor.numpy, torch.Tensor.copy_


_CPU, _NUMPY, _COPY = _captured()


def _host(t):
    return _NUMPY(_CPU(t.detach()))


class ExecutedExtension(types.ModuleType):
    """Stands in for the compiled ``_npu_ext`` by running the real kernels in the executable stand-in.

    Same interface as ``host/binding.cpp``'s module and ``ascendc_kernels/tests/check_on_npu.ModelExtension``
    (``soc()``, ``MatmulOptions`` (``npu.MatmulOptions``), ``matmul(a, b, out, options, lines=None)``,
    ``band_pass(a, b, out, meta_a, meta_b, options)``, ``matmul_fp32(a, b, out, alpha=1.0)``, ``calls``
    (matmul / matmul_fp32 / split), ``band_calls`` (band_pass)); every run must leave the flag checker clean.  It reads
    and writes the tensors through functions captured at import, so a test may forbid host read-backs to the
    code that calls it.  ``arithmetic``: the stand-in's open behaviours for every run (module docstring).
    """

    MatmulOptions = MatmulOptions

    def __init__(self, soc: str, cores: int, binary: Path, workdir: Path,
                 arithmetic: Arithmetic | str | None = None):
        super().__init__("sgemm_cube.backends._npu_ext")
        self._soc, self._cores, self._binary, self._workdir, self.calls = soc, cores, binary, workdir, []
        self.band_calls = []  # (bm, bk, bn, n_fused, per_term, band_a, band_b) of each band_pass
        subprocess_env(arithmetic)  # a bad spec fails here, not at the first call
        self._arithmetic = arithmetic

    def soc(self) -> str:
        return self._soc

    def _options(self, o) -> dict:
        """:func:`run`'s keywords for the extension's ``MatmulOptions`` ``o``."""
        return dict(sb=o.sb, keep_lo_lo=o.keep_lo_lo, alpha=o.alpha,
                    tiling=(o.bm, o.bk, o.bn, o.n_fused, int(o.per_term), int(getattr(o, "l0c_stages", 1))),
                    subnormals={code: name for name, code in SUBNORMALS_CODE.items()}[o.subnormals],
                    cube=self._cores, vector=vector_cores(self._soc, self._cores), workdir=self._workdir,
                    arithmetic=self._arithmetic)

    def matmul(self, a, b, out, options, lines=None):
        """The extension's ``matmul``; with ``lines`` (int32 (4, batch * (m + n)), needs ``options.guard``) also
        the lines' packed integers (row 0) and statistics big, small_w, finite (rows 1-3), A's rows then B's
        columns, batch-major, as ``host/binding.cpp`` copies them on the device."""
        import torch

        assert a.is_contiguous() and b.is_contiguous() and out.is_contiguous()
        assert a.dtype == b.dtype == out.dtype == torch.float32
        o = options
        self.calls.append((o.bm, o.bk, o.bn, o.n_fused, bool(o.per_term)))
        scale_name = {code: name for name, code in SCALE_CODE.items()}[o.scale]
        batch, m, _ = a.shape
        n = b.shape[2]
        if lines is not None:
            assert o.guard, "lines needs options.guard"
            assert lines.dtype == torch.int32 and tuple(lines.shape) == (4, batch * (m + n)) and lines.is_contiguous()
        r = run(self._binary, _host(a), _host(b), guard="device" if o.guard else None, scale=scale_name,
                fixup=o.fixup, bands=bool(getattr(o, "bands", False)), **self._options(o))
        assert r.clean, f"the executed kernels failed (rc={r.rc}):\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}"
        _COPY(out, torch.from_numpy(r.c.copy()))
        if lines is not None:
            rows = [np.concatenate([r.meta[0].ravel(), r.meta[1].ravel()])]
            rows += [np.concatenate([sa.ravel(), sb.ravel()]) for sa, sb in zip(*r.stats)]
            _COPY(lines, torch.from_numpy(np.stack(rows).astype(np.int32)))

    def band_pass(self, a, b, out, meta_a, meta_b, options):
        """The extension's ``band_pass``: ``out = guard.unscale(product, ta, tb, alpha)`` of the lines of ``a``
        (batch, R, K) and ``b`` (batch, K, N) scaled by the packed integers ``meta_a`` (batch, R), ``meta_b``
        (batch, N), a side with ``options.band_a`` / ``band_b`` cut to the band window."""
        import torch

        assert a.is_contiguous() and b.is_contiguous() and out.is_contiguous()
        assert a.dtype == b.dtype == out.dtype == torch.float32
        assert meta_a.dtype == meta_b.dtype == torch.int32
        o = options
        self.band_calls.append((o.bm, o.bk, o.bn, o.n_fused, bool(o.per_term), bool(o.band_a), bool(o.band_b)))
        r = run(self._binary, _host(a), _host(b), guard="band", meta_a=_host(meta_a), meta_b=_host(meta_b),
                band_a=bool(o.band_a), band_b=bool(o.band_b), **self._options(o))
        assert r.clean, f"the executed kernels failed (rc={r.rc}):\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}"
        _COPY(out, torch.from_numpy(r.c.copy()))

    def split(self, x, hi, lo, sb):
        """The extension's ``split``: the split kernel alone on (B, R, C) float32 ``x`` (R, C multiples of 16),
        ``hi``/``lo`` float16 of the same shape written in the Zz fractal layout, as the device writes them."""
        import torch

        batch, rows, cols = x.shape
        assert rows % 16 == 0 and cols % 16 == 0 and hi.shape == lo.shape == x.shape
        self.calls.append("split")
        r = run(self._binary, _host(x), np.zeros((batch, cols, 16), np.float32), sb=sb, guard="split",
                tiling=(16, 16, 16, 1), cube=self._cores, vector=vector_cores(self._soc, self._cores),
                workdir=self._workdir, arithmetic=self._arithmetic)
        assert r.rc == 0 and "CHECK-SUMMARY errors=0 " in r.stdout, f"the split kernel failed:\n{r.stdout[-3000:]}"
        for part, target in zip(r.parts[:2], (hi, lo)):
            zz = part.reshape(batch, rows // 16, 16, cols // 16, 16).transpose(0, 1, 3, 2, 4).reshape(x.shape)
            _COPY(target, torch.from_numpy(zz.copy()))

    def matmul_fp32(self, a, b, out, alpha=1.0):
        import torch

        assert a.is_contiguous() and b.is_contiguous() and out.is_contiguous()
        assert a.dtype == b.dtype == out.dtype == torch.float32
        self.calls.append("fp32")
        r = run(self._binary, _host(a), _host(b), guard="fp32", alpha=alpha, cube=self._cores,
                vector=vector_cores(self._soc, self._cores), workdir=self._workdir, arithmetic=self._arithmetic)
        assert r.clean, f"the executed kernels failed (rc={r.rc}):\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}"
        _COPY(out, torch.from_numpy(r.c.copy()))


class LineMetaRun(NamedTuple):
    rc: int
    stdout: str
    stderr: str
    meta: np.ndarray | None     # (batch, lines) int32, guard.pack_meta
    stats: tuple | None         # big, small_w, finite: (batch, lines) int32 each
    flags: np.ndarray | None = None  # (batch, FLAG_WORDS) float32: the batch words this launch added

    @property
    def clean(self) -> bool:
        return self.rc == 0 and "CHECK-SUMMARY errors=0 " in self.stdout


def run_line_meta(binary: Path, x, *, along_rows: bool, sb=12, scale="auto", fixup=True, cores=4,
                  workdir: Path, arithmetic: Arithmetic | str | None = None,
                  subnormals: str = "gradual") -> LineMetaRun:
    """The line-statistics and line-meta kernels on a (batch, rows, cols) float32 operand (``arithmetic``:
    the stand-in's open behaviours, module docstring; ``subnormals``: the split range, as :func:`run`)."""
    x = np.ascontiguousarray(x, np.float32)
    batch, rows, cols = x.shape
    hdr = np.array([batch, rows, cols, int(along_rows), sb, SCALE_CODE[scale], int(fixup), cores,
                    SUBNORMALS_CODE[subnormals]], np.int64)
    inp, outp = workdir / "lm_in.bin", workdir / "lm_out.bin"
    inp.write_bytes(hdr.tobytes() + x.tobytes())
    if outp.exists():
        outp.unlink()
    proc = subprocess.run([str(binary), str(inp), str(outp)], capture_output=True, text=True, timeout=120,
                          env=subprocess_env(arithmetic))
    if proc.returncode not in (0, 1) or not outp.exists():
        return LineMetaRun(proc.returncode, proc.stdout, proc.stderr, None, None)
    lines = rows if along_rows else cols
    data = np.fromfile(outp, np.int32)
    raw = data[:4 * batch * lines].reshape(4, batch, lines)
    flags = data[4 * batch * lines:].view(np.float32).reshape(batch, FLAG_WORDS)
    return LineMetaRun(proc.returncode, proc.stdout, proc.stderr, raw[0], (raw[1], raw[2], raw[3]), flags)


def planted_sources(tmp_path: Path, name: str, rel: str, pattern: str | None, replacement: str = "") -> Path:
    """A copy of the kernel sources (``include/``, ``kernel/``) under ``tmp_path/src`` with one planted bug:
    the first ``pattern`` in ``rel`` replaced by ``replacement`` (``pattern`` None: the copy unmodified).
    Returns the copy's root for :func:`build`."""
    root = tmp_path / "src"
    shutil.copytree(KERNELS / "include", root / "include")
    shutil.copytree(KERNELS / "kernel", root / "kernel")
    if pattern is None:
        return root
    target = root / rel
    text = target.read_text()
    assert pattern in text, f"planted bug {name}: pattern not found in {rel}"
    target.write_text(text.replace(pattern, replacement, 1))
    return root


class PlantedBug(NamedTuple):
    """One bug planted in a copy of the kernel sources (:func:`planted_sources`), built for ``soc`` with
    ``harness`` at :data:`PLANTED_OPT`.  ``pattern`` None: the unmodified sources through the same
    machinery (a control, which must pass)."""
    name: str
    rel: str | None
    pattern: str | None
    replacement: str
    soc: str
    harness: Path = HARNESS

    @property
    def id(self) -> str:
        return f"{self.name}-{self.soc}"


def control(soc: str, harness: Path = HARNESS) -> PlantedBug:
    """The unmodified sources built as a planted bug is (copied, at :data:`PLANTED_OPT`)."""
    return PlantedBug("control", None, None, "", soc, harness)


def build_planted(bug: PlantedBug, directory: Path) -> Path:
    """``bug``'s binary: its copy of the sources under ``directory``, built there."""
    directory.mkdir(parents=True, exist_ok=True)
    root = planted_sources(directory, bug.name, bug.rel, bug.pattern, bug.replacement)
    return build(directory / "run_bug", bug.soc, src_root=root, harness=bug.harness, opt=PLANTED_OPT,
                 precompiled=True)


class PlantedBuilds:
    """The planted bugs of a module's selected tests, built in the background, :func:`build_jobs` at a
    time, in the order the tests run: a test waits for its own binary only (the ``planted_binary``
    fixture of ``tests/ascendc_kernels/conftest.py``).  Each bug is still built from its own modified
    copy of the sources; only the waiting is shared."""

    def __init__(self, directory: Path, bugs=()):
        self._dir, self._futures = directory, {}
        self._pool = ThreadPoolExecutor(max_workers=build_jobs())
        for bug in bugs:
            self._submit(bug)

    def _submit(self, bug: PlantedBug):
        if bug not in self._futures:
            where = self._dir / f"{len(self._futures):03d}_{bug.name}_{bug.soc}"
            self._futures[bug] = self._pool.submit(build_planted, bug, where)
        return self._futures[bug]

    def binary(self, bug: PlantedBug) -> Path:
        return self._submit(bug).result()

    def close(self):
        for f in self._futures.values():
            f.cancel()
        self._pool.shutdown(wait=True)
