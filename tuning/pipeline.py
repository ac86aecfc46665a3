"""An event-driven model of the SGEMM-cube kernels on the pipes of an Ascend AI core.

MODEL PREDICTIONS, NOT MEASUREMENTS: nothing here has run on an NPU.  The
model is calibrated against the only measurements there are, the paper's
(Sec. 4.2 of the SGEMM-cube paper), in ``docs/ascend_pipeline_model.md``.

What is modelled
----------------
One AI core has independent, in-order pipes: MTE2 (GM -> L1 / UB), MTE1
(L1 -> L0A / L0B), M (the cube), OUT (the pipe that drains L0C: the vector
unit's L0C -> UB copy followed by MTE3's UB -> GM on 910A, Fixpipe on 910B),
and for the vector kernels V and MTE3.  A kernel is the program its scalar
unit issues: data operations, each queued on its pipe, and SetFlag/WaitFlag
pairs, a SetFlag firing when every earlier operation of its source pipe has
finished and a WaitFlag holding its destination pipe until then.  The GEMM's
program is the kernel's own, :func:`sgemm_cube.backends.npu_schedule.core_program`
(the Python mirror of ``schedule.hpp``'s ``run_core``, tested call for call
against the C++ header); this module only gives each operation a duration
and replays the program (:func:`replay`).

Durations come from the profile's ``pipes`` table (``tuning/profiles/ascend.json``,
each number with its public source): bytes over per-core rates, a DMA head
cost for transfers under 16 KB, a minimum burst for short GM runs, one 16^3
fractal per cube cycle at the profile's FP16 peak.  Main memory is shared:
a core's GM rate is the smaller of its link rate and ``hbm_gbps`` divided by
the cores running in the same round, and the B stream, which every core reads,
is served by L2 for a fitted fraction ``shared_l2_hit``.  ``flag_latency_cycles``
(a SetFlag reaching its WaitFlag) is the second and last fitted parameter.

The whole product is the sequence of kernels the package launches: for the
``kernel`` design the split of A and of B, the GEMM (all terms in one pass, or
with ``per_term`` one pass per term) and the combine (unless the GEMM's
epilogue combined); for the ``paper`` design (Algorithm 1) one GEMM pass per
product term with FP16 operands in GM.  Every core runs the same program on its own items, so the
model replays core 0, which has the most items (round-robin) and full
blocks; the result is that core's finishing time.
"""
from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from sgemm_cube.backends import npu_schedule as ns

from .hardware import Profile, get_profile
from . import model as roofline

__all__ = [
    "Design",
    "PAPER_DOUBLE",
    "PAPER_SINGLE",
    "KERNEL",
    "KERNEL_PER_TERM",
    "Prediction",
    "best_kernel",
    "Ranked",
    "feasible_tilings",
    "geometry",
    "predict",
    "rank",
    "replay",
    "sweep",
]

PIPES = ("MTE2", "MTE1", "M", "OUT", "V", "MTE3")
_HALF, _FLOAT = 2, 4
_FRACTAL_MACS = 16 * 16 * 16

# Source and destination pipe of every flag direction of schedule.hpp.
_SYNC_PIPES = {
    ns.Sync.MTE2_MTE1: ("MTE2", "MTE1"),
    ns.Sync.MTE1_MTE2: ("MTE1", "MTE2"),
    ns.Sync.MTE1_M: ("MTE1", "M"),
    ns.Sync.M_MTE1: ("M", "MTE1"),
    ns.Sync.M_OUT: ("M", "OUT"),
    ns.Sync.OUT_M: ("OUT", "M"),
}


@dataclass(frozen=True)
class Design:
    """How an emulated product runs, and which kernel changes are applied.

    Attributes
    ----------
    kind : {"kernel", "paper"}
        ``kernel``: this package's kernels (split, GEMM, combine).  ``paper``:
        Algorithm 1, one pass per term over FP16 planes, C read, added and
        written through UB at every K group, no split or combine counted.
    per_term : bool
        ``kernel`` only: the GEMM's mode (``Tiling.per_term``).  False: hi
        and lo planes of each block together in L1/L0, every term in one pass
        into its own accumulator.  True: one pass per term, one plane and
        one accumulator resident (larger blocks fit).
    buffering : {"double", "single"}
        ``double``: ``run_core`` (two B slots in L1, two L0 stages).
        ``single``: the paper's Fig. 6(a): ``run_core`` with one B buffer
        and one L0 stage, so a B tile loads only after the previous one has
        been copied to L0, and a copy to L0 waits for the previous product.
    terms : int
        3, or 4 with A_lo B_lo.
    l0c_stages : int
        2: two sets of accumulators, so the cube starts the next C block while
        the previous one drains (proposed kernel change).
    prefetch_a : bool
        Load the next group's A tiles one by one during the last column block
        of the current group, as each tile is released (proposed change).
    split_strips : bool
        The split kernel as it is now: rows loaded into UB in Zz order, each
        part of a 16 x 256 tile written as one contiguous burst, two UB
        stages.  ``False`` models the layout before this change: one UB
        stage, 16 x 512 tiles, 32 DataCopys of 32-byte bursts per tile.
    combine_double : bool
        Combine kernel with two UB stages (proposed change).
    bookkeeping : bool
        The guarantee's integers computed on the device (the kernels of
        ``line_stats_kernel.hpp``, ``line_meta_kernel.hpp``, the split's line
        scaling and ``unscale_kernel.hpp``), as ``npu.run`` launches them.  The
        FP32 recomputation of listed lines is not counted (on typical data no
        line is listed).  ``False``: the kernels alone, as ``npu.matmul`` and
        the tuner's ranking (these passes do not depend on the tiling).
    fused_combine : bool
        Where the kernel's geometry allows it (910A, one K group, fused
        terms: ``Geometry.combine_in_epilogue``) the combine runs in the
        GEMM's epilogue: the terms are combined in UB and one FP32 C is
        written; no term buffers, no combine pass (the kernel as it is;
        ``False`` models it before this change).
    """

    kind: str = "kernel"
    buffering: str = "double"
    terms: int = 3
    l0c_stages: int = 1
    prefetch_a: bool = False
    split_strips: bool = True
    combine_double: bool = False
    fused_combine: bool = True
    per_term: bool = False
    bookkeeping: bool = False

    def __post_init__(self):
        if self.kind not in ("kernel", "paper"):
            raise ValueError(f"design kind must be 'kernel' or 'paper', got {self.kind!r}")
        if self.buffering not in ("double", "single"):
            raise ValueError(f"buffering must be 'double' or 'single', got {self.buffering!r}")
        if self.terms not in (3, 4):
            raise ValueError(f"terms must be 3 or 4, got {self.terms}")
        if self.l0c_stages not in (1, 2):
            raise ValueError(f"l0c_stages must be 1 or 2, got {self.l0c_stages}")
        if self.kind == "paper" and (self.combine_double or self.per_term or self.bookkeeping):
            raise ValueError("combine and pass options apply to the kernel design only")

    @property
    def parts(self) -> int:
        """Operand planes held per block (hi and lo together, or one plane)."""
        return 2 if self.kind == "kernel" and not self.per_term else 1

    @property
    def passes(self) -> int:
        """Replays of the GEMM program (the kernel's program holds its own per-term passes)."""
        return 1 if self.kind == "kernel" else self.terms

    @property
    def mmads(self) -> int:
        """Cube products (and accumulators written back) per K step."""
        return self.terms if self.kind == "kernel" and not self.per_term else 1


PAPER_DOUBLE = Design("paper", "double", fused_combine=False)
PAPER_SINGLE = Design("paper", "single", fused_combine=False)
KERNEL = Design("kernel")
KERNEL_PER_TERM = Design("kernel", per_term=True)


class Prediction(NamedTuple):
    """The model's answer for one product and tiling.

    ``seconds`` is the whole product (every kernel launched), ``tflops``
    FP32-equivalent ``2 m n k / seconds``; ``phases`` the seconds of each
    kernel; ``busy`` the fraction of the GEMM time each pipe of core 0 works.
    """

    seconds: float
    tflops: float
    phases: dict
    busy: dict
    tiling: ns.Tiling
    groups: int


class Ranked(NamedTuple):
    """One row of :func:`rank`: the model's prediction beside the roofline's."""

    tiling: ns.Tiling
    tflops: float
    seconds: float
    busy: dict
    roofline_tflops: float
    traffic_bytes: float


# ------------------------------------------------------------------ replay

def replay(program: Iterable, duration: Callable, sync_pipes, flag_latency: float) -> tuple[float, dict]:
    """Time a program on in-order pipes; returns (finish time, busy time per pipe).

    ``program`` yields objects with ``kind`` (``"set"``, ``"wait"`` or a data
    operation), ``sync`` and ``event``; ``duration(op)`` gives a data
    operation's ``(pipe, cycles)``; ``sync_pipes[sync]`` its flag's (source,
    destination) pipes.  The scalar unit hands every call to its pipe's
    queue in program order; each pipe runs its queue in order.  A set fires
    ``flag_latency`` cycles after its source pipe has finished every earlier
    operation; a wait holds its pipe until the matching set has fired (flags
    count, first in first out).  Raises RuntimeError if the program deadlocks.
    """
    queues: dict = {pipe: [] for pipe in PIPES}
    for op in program:
        kind = op.kind
        if kind == "set":
            queues[sync_pipes[op.sync][0]].append((0, (op.sync, op.event), 0.0))
        elif kind == "wait":
            queues[sync_pipes[op.sync][1]].append((1, (op.sync, op.event), 0.0))
        else:
            pipe, cycles = duration(op)
            queues[pipe].append((2, pipe, cycles))
    clock = dict.fromkeys(PIPES, 0.0)
    busy = dict.fromkeys(PIPES, 0.0)
    head = dict.fromkeys(PIPES, 0)
    fired: dict = {}
    left = sum(len(q) for q in queues.values())
    while left:
        progress = 0
        for pipe, queue in queues.items():
            i, t, n = head[pipe], clock[pipe], len(queue)
            work = 0.0
            while i < n:
                what, key, cycles = queue[i]
                if what == 2:
                    t += cycles
                    work += cycles
                elif what == 0:
                    fired.setdefault(key, deque()).append(t + flag_latency)
                else:
                    tokens = fired.get(key)
                    if not tokens:
                        break  # blocked until the matching set fires
                    ready = tokens.popleft()
                    if ready > t:
                        t = ready
                i += 1
            progress += i - head[pipe]
            head[pipe], clock[pipe] = i, t
            busy[pipe] += work
        if not progress:
            raise RuntimeError(f"the program deadlocks with {left} operations left")
        left -= progress
    return max(clock.values()), busy


class _Op(NamedTuple):
    kind: str
    sync: object = None
    event: int = 0
    step: object = None


# --------------------------------------------------------------- programs

def _vector_program(tiles: Sequence[tuple], *, stages: int, ops: Callable) -> Iterator[_Op]:
    """A vector kernel's loop: MTE2 load, V compute, MTE3 store per tile, ``stages`` UB buffers.

    The flags of ``split_kernel.hpp``/``combine_kernel.hpp`` (one stage): the
    load of tile t+1 waits until V has read tile t's input, V waits for the
    load and for MTE3 to have written the previous output out.  With two
    stages (proposed), tile t uses buffers ``t % 2`` and each flag has one
    event per stage.
    """
    for s in range(stages):
        yield _Op("set", ("V", "MTE2"), s)
        yield _Op("set", ("MTE3", "V"), s)
    for t, tile in enumerate(tiles):
        s = t % stages
        load, compute, store = ops(tile)
        yield _Op("wait", ("V", "MTE2"), s)
        yield from load
        yield _Op("set", ("MTE2", "V"), s)
        yield _Op("wait", ("MTE2", "V"), s)
        yield _Op("wait", ("MTE3", "V"), s)
        yield from compute
        yield _Op("set", ("V", "MTE2"), s)
        yield _Op("set", ("V", "MTE3"), s)
        yield _Op("wait", ("V", "MTE3"), s)
        yield from store
        yield _Op("set", ("MTE3", "V"), s)
    for s in range(stages):
        yield _Op("wait", ("V", "MTE2"), s)
        yield _Op("wait", ("MTE3", "V"), s)


def _sync_pipes(sync) -> tuple[str, str]:
    return _SYNC_PIPES[sync] if isinstance(sync, ns.Sync) else sync


class _SyncTable(dict):
    def __missing__(self, key):
        self[key] = pipes = _sync_pipes(key)
        return pipes


_SYNCS = _SyncTable()


# ------------------------------------------------------------------ costs

class _Timing:
    """Durations (cycles) of the operations of one product on one profile."""

    def __init__(self, p: Profile, design: Design):
        if p.pipes is None:
            raise ValueError(f"profile {p.key!r} has no 'pipes' table: the pipeline model needs one")
        self.p, self.pp, self.design = p, p.pipes, design
        flop_per_cycle = p.cube_fp16_tflops * 1e12 / p.ai_cores / (p.clock_ghz * 1e9)
        self.fractal_cycles = 2 * _FRACTAL_MACS / flop_per_cycle
        self.hbm_bytes_per_cycle = p.hbm_gbps / p.clock_ghz  # whole chip
        self.through_ub = "ub" in p.c_path

    # -- main memory
    def _gm_rate(self, active: int) -> float:
        return min(self.pp.mte2_hbm_bytes_per_cycle, self.hbm_bytes_per_cycle / max(active, 1))

    def _head(self, nbytes: float) -> float:
        return self.pp.dma_head_cycles if nbytes < self.pp.dma_head_below_bytes else 0.0

    def _burst_bytes(self, nbytes: float, runs: int) -> float:
        return runs * max(nbytes / runs, self.pp.dma_min_burst_bytes)

    def gm_read(self, nbytes: float, runs: int, active: int, *, shared: bool = False) -> float:
        """One DataCopy GM -> L1/UB of ``runs`` contiguous runs totalling ``nbytes``."""
        hit = self.pp.shared_l2_hit if shared else 0.0
        per_byte = (1.0 - hit) / self._gm_rate(active) + hit / self.pp.mte2_l2_bytes_per_cycle
        return self._head(nbytes) + self._burst_bytes(nbytes, runs) * per_byte

    def gm_write(self, nbytes: float, runs: int, active: int, link: float) -> float:
        """One copy to GM over a link of ``link`` bytes/cycle (MTE3 or Fixpipe)."""
        rate = min(link, self.hbm_bytes_per_cycle / max(active, 1))
        return self._head(nbytes) + self._burst_bytes(nbytes, runs) / rate

    def vector(self, nbytes: float) -> float:
        """One vector instruction over ``nbytes`` of UB, then a pipe barrier."""
        return nbytes / self.pp.vector_bytes_per_cycle + self.pp.flag_latency_cycles


class _GemmTiming(_Timing):
    def __init__(self, p: Profile, design: Design, g: ns.Geometry, core: int):
        super().__init__(p, design)
        self.g, self.core = g, core
        self.cache: dict = {}

    def active(self, item: int) -> int:
        rnd = (item - self.core) // self.g.cores
        return min(self.g.cores, self.g.items - rnd * self.g.cores)

    def _a_tile(self, s, kk: int, active: int) -> float:
        g = self.g
        k_act = ns._block_extent(g.kp, g.bk, s.group * g.n_fused + kk)
        return self.design.parts * self.gm_read(s.m_act * k_act * _HALF, s.m_act // 16, active)

    def __call__(self, op) -> tuple[str, float]:
        s = op.step
        key = (op.kind, s.m_act, s.n_act, s.k_act, s.group, s.first_group, self.active(s.item), op.event)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        self.cache[key] = out = self._duration(op, s, key[6])
        return out

    def _duration(self, op, s, active: int) -> tuple[str, float]:
        d, pp, g = self.design, self.pp, self.g
        m, n, k = s.m_act, s.n_act, s.k_act
        if op.kind == "load_a_group":
            return "MTE2", sum(self._a_tile(s, kk, active) for kk in range(ns.group_k_blocks(g, s.group)))
        if op.kind == "load_a_tile":
            return "MTE2", self._a_tile(s, op.event, active)
        if op.kind == "load_b":
            return "MTE2", d.parts * self.gm_read(k * n * _HALF, k // 16, active, shared=True)
        if op.kind == "load_l0":
            a = pp.mte1_start_cycles + m * k * _HALF / pp.mte1_l0a_bytes_per_cycle
            b = pp.mte1_start_cycles + k * n * _HALF / pp.mte1_l0b_bytes_per_cycle
            return "MTE1", d.parts * (a + b)
        if op.kind == "mmad":
            return "M", d.mmads * (m // 16) * (n // 16) * (k // 16) * self.fractal_cycles
        if op.kind == "store_c":
            return "OUT", self._store(s, active)
        raise ValueError(f"unknown operation {op.kind!r}")

    def _store(self, s, active: int) -> float:
        d, pp = self.design, self.pp
        m, n = s.m_act, s.n_act
        tile = m * n * _FLOAT
        terms = d.mmads
        if not self.through_ub:  # Fixpipe: L0C -> GM, one term after another
            return terms * self.gm_write(tile, m, active, pp.l0c_out_bytes_per_cycle)
        # 910A: L0C -> UB (NZ), NZ -> ND on the vector unit (n/16 copies), UB -> GM on MTE3;
        # two ND buffers let MTE3 write one term while the next is staged.
        stage = tile / pp.l0c_out_bytes_per_cycle + (n // 16) * self.vector(tile / (n // 16))
        write = self.gm_write(tile, m, active, pp.ub_to_gm_bytes_per_cycle)
        if d.kind == "paper" and not s.first_group:
            # Algorithm 1 accumulates C through UB: read it, add, write it back.
            stage += self.gm_read(tile, m, active) + self.vector(2 * tile)
        if d.kind == "kernel" and d.fused_combine and self.g.combine_in_epilogue:
            # StoreCombined: every accumulator L0C -> UB, 3 (4 with LL) adds and
            # scalings of the NZ tiles, one NZ -> ND reorder, one C written.
            to_ub = tile / pp.l0c_out_bytes_per_cycle
            reorder = (n // 16) * self.vector(tile / (n // 16))
            return terms * to_ub + (3 if terms == 3 else 5) * self.vector(tile) + reorder + write
        return stage + (terms - 1) * max(stage, write) + write


# -------------------------------------------------------------- geometry

def _capacity(p: Profile, design: Design) -> ns.Capacity:
    cap = ns.capacity_from_profile(p)
    if design.kind == "paper":
        # One FP16 plane per block: the kernel's plan checks with every operand
        # buffer counted for one plane (the C path is checked by Eq. 10 instead).
        big = 1 << 40
        return cap._replace(l1=2 * cap.l1, l0a=2 * cap.l0a, l0b=2 * cap.l0b, l0c=big, ub=big)
    return cap


def _max_n_fused(p: Profile, design: Design, bm: int, bk: int, bn: int) -> int:
    if design.kind == "paper":
        return int(roofline.n_fused(p, bm, bk, bn))
    return ns.max_n_fused(_capacity(p, design), bm, bk, bn, design.parts)


def _tiling_ok(p: Profile, design: Design, t: ns.Tiling) -> bool:
    if design.kind == "paper":
        return bool(roofline.feasible(p, t.bm, t.bk, t.bn))
    status, plan = ns.buffer_plan_status(_capacity(p, design), t.bm, t.bk, t.bn, 1, design.terms,
                                         design.per_term)
    if status != ns.Status.OK:
        return False
    if design.l0c_stages == 2:
        cap = _capacity(p, design)
        if 2 * plan.l0c_bytes > cap.l0c or (cap.c_through_ub and 2 * plan.ub_bytes > cap.ub - cap.ub_reserved):
            return False
    return True


def geometry(profile: Profile | str, m: int, n: int, k: int, tiling: ns.Tiling, *, design: Design = KERNEL,
             batch: int = 1) -> ns.Geometry:
    """The kernel's geometry for a design (raises :class:`~sgemm_cube.backends.npu_schedule.TilingError`)."""
    p = get_profile(profile)
    t = ns.Tiling(*map(int, tiling))
    if not _tiling_ok(p, design, t):
        raise ns.TilingError(ns.Status.L0C, f"tiling {tuple(t)} does not fit {p.name} for the {design.kind} design"
                                            f"{' with two accumulator sets' if design.l0c_stages == 2 else ''}")
    nf = max(1, min(t.n_fused, _max_n_fused(p, design, t.bm, t.bk, t.bn)))
    return ns.make_geometry(batch, m, n, k, t._replace(n_fused=nf, per_term=design.per_term), p.ai_cores,
                            design.terms, _capacity(p, design))


# ------------------------------------------------------------- vector kernels

SCALAR_CYCLES_PER_ACCESS = 1.0
"""Cycles of one scalar-unit instruction (GetValue, SetValue, an integer operation) in the bookkeeping
kernels.  An assumption: no public figure was found; it is not fitted (nothing measured exercises it)."""


@functools.lru_cache(maxsize=1024)  # profiles and designs are hashable; the time does not depend on the tiling
def _split_cycles(p: Profile, design: Design, strips: int, cols: int, scale_lines: str = "rows") -> float:
    """Core 0's time for the split of a (16 strips) x cols FP32 matrix (``scale_lines``: A's rows or B's columns)."""
    tm = _Timing(p, design)
    cores = min(p.ai_cores, strips)
    mine = len(range(0, strips, cores))
    width = ns.SPLIT_TILE_COLS if design.split_strips else 512
    tiles = [(min(width, cols - c), c == 0) for c in range(0, cols, width)] * mine

    def ops(tile: tuple):
        w, first_of_strip = tile
        count = 16 * w
        rate = tm.pp.ub_to_gm_bytes_per_cycle
        compute = [_Op("xfer", step=("V", tm.vector(count * _FLOAT))) for _ in range(10)]  # 5 bound-test + 5 split ops
        if design.bookkeeping:  # the line scaling: factor tiles, then two multiplies
            if scale_lines == "columns" or first_of_strip:
                lines = 16 if scale_lines == "rows" else w
                compute.append(_Op("xfer", step=("V", SCALAR_CYCLES_PER_ACCESS * lines * (1 + 2 * (16 if scale_lines == "rows" else 1))
                                                 + 8 * tm.vector(ns.SPLIT_TILE_COLS * 16 * _FLOAT / 4))))
            compute += [_Op("xfer", step=("V", tm.vector(count * _FLOAT))) for _ in range(2)]
        if design.split_strips:
            # Each row's 16-element pieces land a fractal apart in UB (Zz order), so the
            # elementwise split leaves hi and lo in Zz and each goes out in one burst.
            load = [_Op("xfer", step=("MTE2", tm.gm_read(w * _FLOAT, 1, cores))) for _ in range(16)]
            store = [_Op("xfer", step=("MTE3", tm.gm_write(count * _HALF, 1, cores, rate))) for _ in range(2)]
        else:  # today: one strided load; 16 rows x 2 parts out, each w/16 bursts of 32 bytes a fractal apart
            load = [_Op("xfer", step=("MTE2", tm.gm_read(count * _FLOAT, 16, cores)))]
            store = [_Op("xfer", step=("MTE3", tm.gm_write(w * _HALF, w // 16, cores, rate))) for _ in range(32)]
        return load, compute, store

    program = _vector_program(tiles, stages=ns.SPLIT_STAGES if design.split_strips else 1, ops=ops)
    cycles, _ = replay(program, lambda op: op.step, _SYNCS, tm.pp.flag_latency_cycles)
    return cycles


@functools.lru_cache(maxsize=1024)
def _line_stats_cycles(p: Profile, design: Design, batch: int, rows: int, cols: int, along_rows: bool) -> float:
    """Core 0's time for the line statistics of a (batch * rows) x cols FP32 matrix (``line_stats_kernel.hpp``)."""
    tm = _Timing(p, design)
    tile_cols = ns.STATS_TILE_COLS
    col_tiles = -(-cols // tile_cols)
    work = batch * rows // 16 if along_rows else batch * col_tiles
    cores = min(p.ai_cores, work)
    tiles = []
    for item in range(0, work, cores):
        if along_rows:
            widths = [min(tile_cols, cols - c) for c in range(0, cols, tile_cols)]
        else:
            widths = [min(tile_cols, cols - (item % col_tiles) * tile_cols)] * (rows // 16)
        tiles += [(w, i + 1 == len(widths)) for i, w in enumerate(widths)]
    rate = tm.pp.ub_to_gm_bytes_per_cycle
    n = 16 * tile_cols * _FLOAT

    def ops(tile: tuple):
        w, last = tile
        if along_rows:  # each row's pieces a fractal apart (Zz order), as the split
            load = [_Op("xfer", step=("MTE2", tm.gm_read(w * _FLOAT, 1, cores))) for _ in range(16)]
        else:
            load = [_Op("xfer", step=("MTE2", tm.gm_read(16 * w * _FLOAT, 16, cores)))]
        compute = [_Op("xfer", step=("V", tm.vector(n))) for _ in range(11)]  # the three statistics
        compute += [_Op("xfer", step=("V", tm.vector(3 * half * _FLOAT))) for half in (2048, 1024, 512, 256)]
        compute.append(_Op("xfer", step=("V", tm.vector(3 * tile_cols * _FLOAT))))  # accumulate
        store = []
        if last:
            if along_rows:  # the scalar unit finishes 16 values per row and statistic
                compute.append(_Op("xfer", step=("V", SCALAR_CYCLES_PER_ACCESS * (3 * 256 + 3 * 16))))
                store = [_Op("xfer", step=("MTE3", tm.gm_write(16 * _FLOAT, 1, cores, rate))) for _ in range(3)]
            else:
                store = [_Op("xfer", step=("MTE3", tm.gm_write(w * _FLOAT, 1, cores, rate))) for _ in range(3)]
        return load, compute, store

    program = _vector_program(tiles, stages=1, ops=ops)
    cycles, _ = replay(program, lambda op: op.step, _SYNCS, tm.pp.flag_latency_cycles)
    return cycles


LINE_META_SCALAR_OPS = 40
"""Scalar instructions per line of the line-meta kernel (guard/line_meta.hpp's decoding, normalising and
comparisons; counted from the source, not measured)."""


@functools.lru_cache(maxsize=1024)
def _line_meta_cycles(p: Profile, design: Design, lines: int) -> float:
    """Core 0's time for the per-line integers of ``lines`` lines (``line_meta_kernel.hpp``)."""
    tm = _Timing(p, design)
    chunk = ns.META_CHUNK
    chunks = -(-lines // chunk)
    cores = min(p.ai_cores, chunks)
    mine = [min(chunk, lines - c * chunk) for c in range(0, chunks, cores)]
    rate = tm.pp.ub_to_gm_bytes_per_cycle

    def ops(n: int):
        load = [_Op("xfer", step=("MTE2", tm.gm_read(n * _FLOAT, 1, cores))) for _ in range(3)]
        compute = [_Op("xfer", step=("V", SCALAR_CYCLES_PER_ACCESS * LINE_META_SCALAR_OPS * n))]
        store = [_Op("xfer", step=("MTE3", tm.gm_write(n * _FLOAT, 1, cores, rate)))]
        return load, compute, store

    cycles, _ = replay(_vector_program(mine, stages=1, ops=ops), lambda op: op.step, _SYNCS, tm.pp.flag_latency_cycles)
    return cycles


@functools.lru_cache(maxsize=1024)
def _unscale_cycles(p: Profile, design: Design, batch: int, mp: int, np_: int) -> float:
    """Core 0's time for the unscaling of the (batch, mp, np) result (``unscale_kernel.hpp``)."""
    tm = _Timing(p, design)
    tile = ns.UNSCALE_TILE
    rows_per_unit = tile // np_ if np_ <= tile else 1
    chunks = -(-np_ // tile)
    units = -(-(batch * mp) // rows_per_unit) * chunks
    cores = min(p.ai_cores, units)
    mine = len(range(0, units, cores))
    w = min(tile, np_)
    n = rows_per_unit * w
    rate = tm.pp.ub_to_gm_bytes_per_cycle

    def ops(_):
        load = [_Op("xfer", step=("MTE2", tm.gm_read(n * _FLOAT, rows_per_unit, cores)))]
        load += [_Op("xfer", step=("MTE2", tm.gm_read(w * _FLOAT, 1, cores))) for _ in range(rows_per_unit)]
        compute = [_Op("xfer", step=("V", tm.vector(n * _FLOAT))) for _ in range(40)]
        compute.append(_Op("xfer", step=("V", SCALAR_CYCLES_PER_ACCESS * 8 * rows_per_unit)))
        store = [_Op("xfer", step=("MTE3", tm.gm_write(n * _FLOAT, rows_per_unit, cores, rate)))]
        return load, compute, store

    cycles, _ = replay(_vector_program([None] * mine, stages=1, ops=ops), lambda op: op.step, _SYNCS,
                       tm.pp.flag_latency_cycles)
    return cycles


@functools.lru_cache(maxsize=1024)
def _combine_cycles(p: Profile, design: Design, total: int) -> float:
    """Core 0's time for the termwise combine of ``total`` elements per term."""
    tm = _Timing(p, design)
    tile = ns.COMBINE_TILE // (2 if design.combine_double else 1)
    n_tiles = -(-total // tile)
    cores = min(p.ai_cores, n_tiles)
    lens = [min(tile, total - t * tile) for t in range(0, n_tiles, cores)]
    terms = design.terms

    def ops(n: int):
        load = [_Op("xfer", step=("MTE2", tm.gm_read(n * _FLOAT, 1, cores))) for _ in range(terms)]
        compute = [_Op("xfer", step=("V", tm.vector(n * _FLOAT))) for _ in range(3 if terms == 3 else 5)]
        store = [_Op("xfer", step=("MTE3", tm.gm_write(n * _FLOAT, 1, cores, tm.pp.ub_to_gm_bytes_per_cycle)))]
        return load, compute, store

    program = _vector_program(lens, stages=2 if design.combine_double else 1, ops=ops)
    cycles, _ = replay(program, lambda op: op.step, _SYNCS, tm.pp.flag_latency_cycles)
    return cycles


# ------------------------------------------------------------------ API

def _replay_gemm(p: Profile, design: Design, batch: int, m: int, n: int, k: int, t: ns.Tiling):
    g = geometry(p, m, n, k, t, design=design, batch=batch)
    timing = _GemmTiming(p, design, g, 0)
    if design.buffering == "single":
        # Fig. 6(a): one B buffer in L1 and one L0A/L0B stage.
        g = g._replace(plan=g.plan._replace(l0_stages=1))
        program = ns.core_program(g, 0, b_slots=1)
    else:
        program = ns.core_program(g, 0, l0c_sets=design.l0c_stages, prefetch_a=design.prefetch_a)
    cycles, busy = replay(program, timing, _SYNCS, timing.pp.flag_latency_cycles)
    return cycles, busy, g


# Loop counts above these are extrapolated from two shorter replays (see _gemm_cycles).
_SAMPLES = {"cols": (4, 6), "groups": (2, 4), "rounds": (2, 4)}


def _gemm_cycles(p: Profile, design: Design, batch: int, m: int, n: int, k: int, t: ns.Tiling,
                 exact: bool = False) -> tuple[float, dict, ns.Geometry]:
    """Core 0's GEMM time in cycles, its pipes' busy cycles, and the geometry.

    Every loop of the schedule repeats identical iterations apart from its
    first and last ones (the tail block, and the last round, K group or
    column block), so the replayed time is affine in each loop count once the
    pipeline is in its periodic regime.  When a loop (rounds of items over
    the cores, K groups, column blocks) is longer than its samples, the
    product is replayed with that loop cut to two sample counts (tail
    iteration kept) and the time extended along the line through them
    (``tests/tuning/test_pipeline_model.py`` checks this against full replays).
    ``exact=True`` replays the whole program.
    """
    g = geometry(p, m, n, k, t, design=design, batch=batch)
    if exact:
        return _replay_gemm(p, design, batch, m, n, k, t)
    bm, bk, bn = g.bm, g.bk, g.bn
    rounds = -(-g.items // g.cores)
    if g.n_split == 1 and g.nb > _SAMPLES["cols"][1]:
        tail = g.np - (g.nb - 1) * bn
        return _extend(lambda c: _gemm_cycles(p, design, batch, m, (c - 1) * bn + tail, k, t), g.nb,
                       _SAMPLES["cols"], g)
    if g.groups > _SAMPLES["groups"][1]:
        span = g.n_fused * bk
        tail = g.kp - (g.groups - 1) * span
        return _extend(lambda c: _gemm_cycles(p, design, batch, m, n, (c - 1) * span + tail, t), g.groups,
                       _SAMPLES["groups"], g)
    if batch == 1 and g.n_split == 1 and rounds > _SAMPLES["rounds"][1]:
        last = g.mp - (rounds - 1) * g.cores * bm  # rows of the last round, kept as they are
        return _extend(lambda c: _gemm_cycles(p, design, batch, (c - 1) * g.cores * bm + last, n, k, t), rounds,
                       _SAMPLES["rounds"], g)
    return _replay_gemm(p, design, batch, m, n, k, t)


def _extend(run: Callable, count: int, samples: tuple[int, int], g: ns.Geometry):
    (lo, hi) = samples
    t_lo, b_lo, _ = run(lo)
    t_hi, b_hi, _ = run(hi)
    scale = (count - lo) / (hi - lo)
    busy = {pipe: b_lo[pipe] + (b_hi[pipe] - b_lo[pipe]) * scale for pipe in b_lo}
    return t_lo + (t_hi - t_lo) * scale, busy, g


def predict(profile: Profile | str, m: int, n: int, k: int, tiling, *, design: Design = KERNEL,
            batch: int = 1, exact: bool = False) -> Prediction:
    """Predicted time of one ``batch x m x k @ k x n`` emulated product (MODEL PREDICTION).

    Parameters
    ----------
    profile : Profile or str
        Needs a ``pipes`` table (the built-in ``910a``, ``910b`` have one).
    m, n, k, batch : int
    tiling : (bm, bk, bn, n_fused)
        ``n_fused`` is clamped to what fits and to the K blocks.
    design : Design, keyword-only
    exact : bool, keyword-only
        Replay every step instead of extending long loops along their
        periodic regime (slow for large products; same answer within 0.5%).

    Returns
    -------
    Prediction
    """
    p = get_profile(profile)
    t = ns.Tiling(*map(int, tiling))
    cycles, busy, g = _gemm_cycles(p, design, batch, m, n, k, t, exact)
    hz = p.clock_ghz * 1e9
    phases = {"gemm": design.passes * cycles / hz}
    if design.kind == "kernel":
        phases["split_a"] = _split_cycles(p, design, batch * g.mp // 16, g.kp, "rows") / hz
        phases["split_b"] = _split_cycles(p, design, batch * g.kp // 16, g.np, "columns") / hz
        if design.bookkeeping:
            phases["line_stats_a"] = _line_stats_cycles(p, design, batch, g.mp, g.kp, True) / hz
            phases["line_stats_b"] = _line_stats_cycles(p, design, batch, g.kp, g.np, False) / hz
            phases["line_meta"] = (_line_meta_cycles(p, design, batch * g.mp)
                                   + _line_meta_cycles(p, design, batch * g.np)) / hz
            phases["unscale"] = _unscale_cycles(p, design, batch, g.mp, g.np) / hz
        if not (design.fused_combine and g.combine_in_epilogue):
            phases["combine"] = _combine_cycles(p, design, batch * g.mp * g.np) / hz
    seconds = sum(phases.values())
    return Prediction(seconds, 2.0 * batch * m * n * k / seconds / 1e12, phases,
                      {pipe: b / cycles for pipe, b in busy.items() if b > 0},
                      ns.Tiling(g.bm, g.bk, g.bn, g.n_fused, design.per_term), g.groups)


def _kernel_candidates(p: Profile, design: Design, k: int) -> list[ns.Tiling]:
    """A few tilings per K block size: the two with the most cube work per element copied to L0
    (:func:`sgemm_cube.tuning.model.l0_intensity`) and the two largest square ones."""
    by_bk: dict = {}
    for t in feasible_tilings(p, design=design, k=k):
        by_bk.setdefault(t.bk, []).append(t)
    out = []
    for bk in sorted(by_bk):
        ts = sorted(by_bk[bk], key=lambda t: (t.bm * t.bn / (t.bm + t.bn), -abs(t.bm - t.bn)), reverse=True)
        squares = [t for t in ts if t.bm == t.bn]
        out += ts[:2] + [sq for sq in squares[:2] if sq not in ts[:2]]
    return out


def best_kernel(profile: Profile | str, m: int, n: int, k: int, *, terms: int = 3,
                batch: int = 1) -> tuple[ns.Tiling, dict]:
    """The kernel's tiling for one product: which GEMM mode, with which blocks (MODEL PREDICTION).

    A measured tuning-table entry for the shape wins (:mod:`sgemm_cube.tuning.table`).
    Otherwise, for each mode of the kernel (all terms in one pass; one pass
    per term) a few candidate blocks per K block size (the two with the most
    cube work per element copied to L0 and the two largest square ones) are timed
    by this model on one round of block rows and one K group, and the three
    best of them on the whole product (split, GEMM, combine or the
    epilogue's); the fastest wins.  A screen, not :func:`rank`'s search.

    Returns the tiling and ``{"fused": Prediction, "per_term": Prediction}``
    (each mode's best; empty when a table entry answered).
    """
    from . import table

    p = get_profile(profile)
    cap = ns.capacity_from_profile(p)
    cfg = table.lookup(p.name, m, n, k, backend="ascend")
    if cfg is not None:
        measured = ns.Tiling(cfg["bm"], cfg["bk"], cfg["bn"], cfg.get("n_fused", 1 << 30),
                             bool(cfg.get("per_term", False)))
        return ns.fit_tiling(cap, measured, k=k, terms=terms), {}
    predictions = {}
    for mode, per_term in (("fused", False), ("per_term", True)):
        design = Design("kernel", terms=terms, per_term=per_term)
        candidates = _kernel_candidates(p, design, k)
        # rank()'s screen: one round of block rows, one K group; then the whole product for the best three.
        short = [predict(p, min(m, t.bm * p.ai_cores), n, min(k, t.bk * t.n_fused), t, design=design).tflops
                 for t in candidates]
        best3 = [candidates[i] for i in np.argsort(-np.asarray(short), kind="stable")[:3]]
        timed = [predict(p, m, n, k, t, design=design, batch=batch) for t in best3]
        if timed:
            predictions[mode] = max(timed, key=lambda pr: pr.tflops)
    if not predictions:
        raise ValueError(f"no tiling of the kernel fits {p.name}")
    best = max(predictions.values(), key=lambda pr: pr.tflops)
    return best.tiling, predictions


def feasible_tilings(profile: Profile | str, *, design: Design = KERNEL, k: int | None = None,
                     max_edge: int = 256) -> list[ns.Tiling]:
    """Every (bm, bk, bn) up to ``max_edge`` that fits, with its largest ``n_fused``."""
    p = get_profile(profile)
    out = []
    edges = range(16, max_edge + 1, 16)
    for bm in edges:
        for bk in edges:
            for bn in edges:
                t = ns.Tiling(bm, bk, bn, 1)
                if not _tiling_ok(p, design, t):
                    continue
                nf = _max_n_fused(p, design, bm, bk, bn)
                if nf < 1:
                    continue
                if k is not None:
                    nf = min(nf, -(-(-(-k // 16) * 16) // bk))
                out.append(t._replace(n_fused=nf, per_term=design.per_term))
    return out


def _roofline(p: Profile, design: Design, m: int, n: int, k: int, tilings: Sequence[ns.Tiling]):
    blocking = roofline.kernel_blocking(p, n_terms=design.terms) if design.kind == "kernel" else None
    q = roofline._with_blocking(p, blocking)
    bm, bk, bn = (np.array([getattr(t, f) for t in tilings]) for f in ("bm", "bk", "bn"))
    return roofline.predict(q, m, n, k, bm, bk, bn, n_terms=design.terms)


def rank(profile: Profile | str, m: int, n: int, k: int, *, design: Design = KERNEL, top: int | None = 10,
         screen: int = 24, min_l0_intensity: float = 0.5, batch: int = 1, progress: bool = False) -> list[Ranked]:
    """Tilings for a product, best predicted time first (MODEL PREDICTIONS).

    Candidates are the feasible tilings whose cube work per element copied to
    L0 (:func:`sgemm_cube.tuning.model.l0_intensity`) is at least ``min_l0_intensity``
    of the best one's (the rest lose on MTE1 and B traffic; 0 keeps all).
    Each is first timed on a short version of the problem (one block row
    per core, one K group); the ``screen`` best of those are then timed on
    the whole product and sorted by predicted TFLOP/s (to 0.1; ties go to
    the larger block: fewer instructions).  The roofline's prediction
    (:func:`sgemm_cube.tuning.model.predict`) is reported beside each row.
    """
    from tqdm.auto import tqdm

    if not 0.0 <= min_l0_intensity <= 1.0:
        raise ValueError(f"min_l0_intensity must lie in [0, 1], got {min_l0_intensity}")
    if min(m, n, k, batch) < 1:
        raise ValueError(f"need m, n, k, batch >= 1, got {(m, n, k, batch)}")
    p = get_profile(profile)
    tilings = feasible_tilings(p, design=design, k=k)
    if not tilings:
        raise ValueError(f"no tiling fits {p.name} for the {design.kind} design")
    intensity = roofline.l0_intensity([t.bm for t in tilings], [t.bn for t in tilings])
    tilings = [t for t, x in zip(tilings, intensity) if x >= min_l0_intensity * intensity.max() * (1 - 1e-12)]
    short = []
    for t in tilings:  # one round of block rows, one K group (long loops are extended, see _gemm_cycles)
        short.append(predict(p, min(m, t.bm * p.ai_cores), n, min(k, t.bk * t.n_fused), t,
                             design=design, batch=1).tflops)
    order = np.argsort(-np.asarray(short), kind="stable")[:screen]
    chosen = [tilings[i] for i in order]
    rows = []
    roof = _roofline(p, design, m, n, k, chosen)
    for i, t in enumerate(tqdm(chosen, desc="pipeline model", unit="tiling", disable=not progress)):
        pr = predict(p, m, n, k, t, design=design, batch=batch)
        rows.append(Ranked(pr.tiling, pr.tflops, pr.seconds, pr.busy, float(roof.tflops_double[i]),
                           float(roof.traffic_bytes[i])))
    rows.sort(key=lambda r: (-round(r.tflops, 1), -(r.tiling.bm * r.tiling.bk * r.tiling.bn)))
    return rows if top is None else rows[:top]


def sweep(profile: Profile | str, m: int, n: int, k: int, *, design: Design, tilings=None,
          progress: bool = False) -> list[tuple[ns.Tiling, float]]:
    """Predicted TFLOP/s of every tiling (the paper's Fig. 10 sweep)."""
    from tqdm.auto import tqdm

    p = get_profile(profile)
    tilings = feasible_tilings(p, design=design, k=k) if tilings is None else tilings
    return [(t, predict(p, m, n, k, t, design=design).tflops)
            for t in tqdm(tilings, desc=f"{design.kind} {design.buffering}", unit="tiling", disable=not progress)]
