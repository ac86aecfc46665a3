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
epilogue combined), with ``bookkeeping`` the guarantee's passes, with ``listed``
the two FP32 fix-up kernels (for the ``special`` lines), the host's read-back of the
lines' integers and the band passes of the listed lines (:func:`band_parts`);
:data:`PACKAGE` is all of them, what
``sgemm_cube.matmul`` launches with default options (:func:`predict_package`,
:func:`rank_package`, ``sgemm-cube tune --design package``); for the ``paper``
design (Algorithm 1) one GEMM pass per
product term with FP16 operands in GM.  Every core runs the same program on its own items, so the
model replays core 0, which has the most items (round-robin) and full
blocks; the result is that core's finishing time.
"""
from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass, replace as _replace_fields
from typing import Callable, Iterable, NamedTuple, Sequence

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
    "PACKAGE",
    "package",
    "band_parts",
    "predict_package",
    "rank_package",
    "Prediction",
    "best_kernel",
    "package_pick",
    "L0C_STAGES",
    "rank_stages",
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
        2: two sets of accumulators in L0C (``Tiling.l0c_stages``, built in the
        kernel: ``schedule.hpp``), so the cube starts the next C block while
        the previous one drains; both sets must fit L0C (smaller blocks).
        The tuner (:func:`best_kernel`) tries 1 and 2 for each GEMM mode.
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
        scaling and the unscale: folded into the combine kernel, or its own
        pass where the 910A's GEMM epilogue combined), as ``npu.run`` launches
        them.  The FP32 fix-up of fix-up lines is counted only with ``listed``.
        ``False``: the kernels alone, as ``npu.matmul`` and the tuner's
        ranking (these passes do not depend on the tiling).
    listed : float or None
        With ``bookkeeping``: the fraction of the rows of A and of the
        columns of B that are listed and finite (class ``LOSES_BITS``), each
        computed on the cube by exponent bands (``cpu_fallback/bands.py``,
        ``backends/npu_bands.py``; :func:`band_parts`): after the main
        product the host reads back the lines' integers (phase ``readback``,
        on every guarded product, listed lines or not), then the band passes
        ``band_rows``, ``band_cols``, ``band_pairs``.  A float also counts
        both FP32 fix-up kernels (phases ``fixup_rows``, ``fixup_cols``),
        which now take only the ``special`` lines.  ``None``: neither the
        read-back, the band passes nor the fix-up kernels counted (the
        kernels and bookkeeping alone, what the tiling tables store).
    special : float
        With ``listed`` not None: the fraction of the rows and of the columns
        holding NaN or an infinity (class ``SPECIAL``), recomputed in plain
        FP32 by recursive summation on the vector unit (``fixup_kernel.hpp``,
        ``fixup_cols_kernel.hpp``; :func:`_fixup_rows_cycles`).  Both kernels
        run whenever the bookkeeping does and read the batch words; with a
        special line in the batch, every line's integers.  Special lines are
        spread evenly over the cores: the busiest core gets ``ceil(special
        lines / cores)``, so any fraction above 0 costs at least one line.
        ``listed + special <= 1`` (a line is of one class).
    bands : int
        With ``listed``: exponent bands per listed line (at least 2: a
        listed line spans at least the band window's ``W`` binades).
    scaled : bool
        With ``bookkeeping``: whether every batch has a scaled line (some
        t != 0).  ``True`` (the costly case): the split scales every line and
        the unscale runs on every output.  ``False``: data that needs no
        scaling (``scale="auto"`` on most data): the meta kernel's word per
        batch (``kernel/batch_flags.hpp``) is +0, so the split skips the
        factors and multiplies and the unscale skips every unit (its own
        pass) or only combines (folded into the combine); the word reads
        remain.
    two_level : bool
        ``kernel`` only: K groups of exactly ``cpu_fallback.K_GROUP`` (1,024) elements, the
        cube's partial sum added into the term buffer in GM after each
        (``npu_schedule.group_n_fused``: ``bk`` divides 1,024, ``n_fused = 1024 / bk``, one
        group for shorter K), as the backend runs it.  ``False`` models the kernel before:
        ``n_fused`` as large as L1 holds (fewer groups, error growing with K).
    fused_combine : bool
        Where the kernel's geometry allows it (910A, one K group, fused
        terms: ``Geometry.combine_in_epilogue``) the combine runs in the
        GEMM's epilogue: the terms are combined in UB and one FP32 C is
        written; no term buffers, no combine pass (the kernel as it is;
        ``False`` models it before this change).
    epilogue_unscale : bool
        With ``bookkeeping`` and the 910A's epilogue combine: that epilogue also unscales every batch
        whose words allow the fast path (issue 32), charged to the GEMM's store; the unscale pass
        only reads the words.  ``False``: the epilogue has no words (a band pass: ``band_pass`` launches
        without them) and the unscale pass does the whole unscale, as before.
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
    listed: float | None = None
    two_level: bool = True
    scaled: bool = True
    special: float = 0.0
    bands: int = 2
    epilogue_unscale: bool = True

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
        if self.listed is not None and not (self.bookkeeping and 0.0 <= self.listed <= 1.0):
            raise ValueError(f"listed is a fraction in [0, 1] of the lines the bookkeeping classifies "
                             f"(bookkeeping=True), got {self.listed!r}"
                             f"{'' if self.bookkeeping else ' without bookkeeping'}")
        if not 0.0 <= self.special <= 1.0 or (self.special and self.listed is None):
            raise ValueError(f"special is a fraction in [0, 1] of the lines, counted with listed (not None), "
                             f"got special={self.special!r}, listed={self.listed!r}")
        if self.listed is not None and self.listed + self.special > 1.0 + 1e-12:
            raise ValueError(f"listed + special must not exceed 1 (a line is of one class), got "
                             f"{self.listed!r} + {self.special!r}")
        if isinstance(self.bands, bool) or not isinstance(self.bands, int) or self.bands < 2:
            raise ValueError(f"bands is an integer >= 2 (a listed line spans at least one band window), "
                             f"got {self.bands!r}")

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
PACKAGE = Design("kernel", bookkeeping=True, listed=0.0)
"""What ``sgemm_cube.matmul`` launches on an NPU with default options (``npu.run``): line statistics, line
meta, split with line scaling, GEMM, combine (or the 910A's epilogue), unscale, both fix-up kernels (no line
special), the read-back of the lines' integers, the band passes (no line listed: none).  Its GEMM mode is the tuner's pick: :func:`predict_package`, :func:`rank_package`; :func:`package`
gives it for a mode and a fraction of listed lines."""


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

def _replay_vector(tiles: Sequence, *, stages: int, ops: Callable, flag_latency: float) -> float:
    """A vector kernel's time: its loop of MTE2 load, V compute, MTE3 store per tile, ``stages`` UB buffers.

    The flags of ``split_kernel.hpp``/``combine_kernel.hpp`` (one stage; with two stages, proposed, tile
    t uses buffers ``t % 2`` and each flag has one event per stage), followed tile by tile: the same
    cycles, bit for bit, as :func:`replay` of the program of those flags and ops, some 25 times faster
    (``tests/tuning/test_pipeline_model.py`` builds that program and compares).  The load of tile t waits until V has read the input of the stage's
    previous tile, V waits for the load and for MTE3 to have written the stage's previous output,
    MTE3 for V; each set fires ``flag_latency`` after its pipe reached it.  ``ops(tile)`` must
    put loads on MTE2, compute on V and stores on MTE3 (as every vector kernel here does), and
    depend on the tile alone (it is called once per distinct tile).
    """
    lat = flag_latency
    input_free, output_free = [lat] * stages, [lat] * stages  # ready times of the latest V -> MTE2, MTE3 -> V
    t_mte2 = t_v = t_mte3 = 0.0
    durations: dict = {}
    for t, tile in enumerate(tiles):
        s = t % stages
        cycles = durations.get(tile)
        if cycles is None:
            cycles = durations[tile] = tuple(_pipe_cycles(part, pipe)
                                             for part, pipe in zip(ops(tile), ("MTE2", "V", "MTE3")))
        load, compute, store = cycles
        if input_free[s] > t_mte2:
            t_mte2 = input_free[s]
        for c in load:
            t_mte2 += c
        ready = t_mte2 + lat
        if ready > t_v:
            t_v = ready
        if output_free[s] > t_v:
            t_v = output_free[s]
        for c in compute:
            t_v += c
        input_free[s] = ready = t_v + lat
        if ready > t_mte3:
            t_mte3 = ready
        for c in store:
            t_mte3 += c
        output_free[s] = t_mte3 + lat
    return max(t_mte2, t_v, t_mte3, *input_free, *output_free)


def _replay_serial(loops: Sequence, *, ops: Callable, flag_latency: float) -> float:
    """A vector kernel's time where every step ends in ``PipeBarrier<PIPE_ALL>`` (the fix-up kernels).

    ``loops`` is a loop nest: a sequence of ``(item, count)``, ``item`` a tile (a hashable tuple,
    given to ``ops`` as :func:`_replay_vector` does) or a list, itself such a sequence (a loop body),
    run ``count`` times.  ``ops(tile)`` gives its (MTE2 loads, V compute, MTE3 stores) as in
    :func:`_replay_vector`.  A barrier follows each part of a tile that has operations: the load, the
    compute and the store run one after another, each followed by ``flag_latency`` (operations of one
    part run back to back, so a barrier inside a part is charged in that operation's cycles, as
    :meth:`_Timing.vector` does).  Nothing overlaps, so the time is the sum over the nest, computed
    without unrolling it: what :func:`replay` gives for the unrolled program with a set/wait pair
    between consecutive parts (``tests/tuning/test_package_model.py`` compares).
    """
    tiles: dict = {}

    def tile_cycles(tile) -> float:
        hit = tiles.get(tile)
        if hit is None:
            parts = [_pipe_cycles(part, pipe) for part, pipe in zip(ops(tile), ("MTE2", "V", "MTE3"))]
            tiles[tile] = hit = sum(sum(part) + flag_latency for part in parts if part)
        return hit

    def nest(body) -> float:
        return sum(count * (nest(item) if isinstance(item, list) else tile_cycles(item))
                   for item, count in body if count > 0)

    return nest(loops)


def _pipe_cycles(ops: Sequence[_Op], pipe: str) -> tuple[float, ...]:
    for op in ops:
        if op.step[0] != pipe:
            raise ValueError(f"a vector kernel's {pipe} part has an operation on {op.step[0]}")
    return tuple(op.step[1] for op in ops)


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
            return (terms * to_ub + (3 if terms == 3 else 5) * self.vector(tile) + reorder
                    + self._epilogue_unscale(m, n, active) + write)
        return stage + (terms - 1) * max(stage, write) + write

    def _epilogue_unscale(self, m: int, n: int, active: int) -> float:
        """The unscale in StoreCombined (``accumulator_store.hpp``, issue 32), serial with the tile's store
        on the cube core's vector unit: with the bookkeeping, the batch's words (one 32-byte block, MTE2 -> S;
        charged per tile, an upper bound: the store reads them when its batch changes); with scaled data (the
        predictions' lines take the fast path, ``schedule::epilogue_unscales``) the tile's rows' and columns'
        integers (MTE2, hand-offs to V and S and back), the columns' part of the factor bits
        (``EPILOGUE_UNSCALE_COLUMN_OPS``), one ``Adds`` per row behind one barrier (the scalar unit decodes
        the row's integer first) and the one ``Mul`` (alpha = 1: no ``Muls`` by its mantissa)."""
        d, pp = self.design, self.pp
        if not (d.bookkeeping and d.epilogue_unscale):
            return 0.0
        words = self.gm_read(32, 1, active) + 3 * pp.flag_latency_cycles
        if not d.scaled:
            return words
        ints = self.gm_read((m + n) * _FLOAT, 2, active) + 5 * pp.flag_latency_cycles
        columns = EPILOGUE_UNSCALE_COLUMN_OPS * self.vector(n * _FLOAT)
        # one Adds per row, behind one barrier (as the pass's RowFactorBits: UNSCALE_FAST_VECTOR_OPS counts it once)
        rows = self.vector(m * n * _FLOAT) + m * SCALAR_CYCLES_PER_ACCESS * UNSCALE_SCALAR_OPS_PER_ROW
        return words + ints + columns + rows + self.vector(m * n * _FLOAT)


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
    # The kernel's own plan: with two L0C stages both accumulator sets must fit L0C (the 910A's UB staging
    # is not doubled: AccumulatorStore orders its reuse across write-backs with its own flags).
    status, _ = ns.buffer_plan_status(_capacity(p, design), t.bm, t.bk, t.bn, 1, design.terms,
                                      design.per_term, design.l0c_stages)
    return status == ns.Status.OK


def geometry(profile: Profile | str, m: int, n: int, k: int, tiling: ns.Tiling, *, design: Design = KERNEL,
             batch: int = 1) -> ns.Geometry:
    """The kernel's geometry for a design (raises :class:`~sgemm_cube.backends.npu_schedule.TilingError`)."""
    p = get_profile(profile)
    t = ns.Tiling(*map(int, tiling))
    if not _tiling_ok(p, design, t):
        raise ns.TilingError(ns.Status.L0C, f"tiling {tuple(t)} does not fit {p.name} for the {design.kind} design"
                                            f"{' with two accumulator sets' if design.l0c_stages == 2 else ''}")
    nf = max(1, min(t.n_fused, _max_n_fused(p, design, t.bm, t.bk, t.bn)))
    if design.kind == "kernel" and design.two_level:
        nf = ns.group_n_fused(k, t.bk)
        if nf is None or nf > _max_n_fused(p, design, t.bm, t.bk, t.bn):
            raise ns.TilingError(ns.Status.L1, f"tiling {tuple(t)} cannot run K = {k} in K groups of "
                                               f"{ns.K_GROUP} on {p.name} (bk must divide it; its A group must fit L1)")
    return ns.make_geometry(batch, m, n, k, t._replace(n_fused=nf, per_term=design.per_term,
                                                       l0c_stages=design.l0c_stages), p.ai_cores,
                            design.terms, _capacity(p, design))


# ------------------------------------------------------------- vector kernels

SCALAR_CYCLES_PER_ACCESS = 1.0
"""Cycles of one scalar-unit instruction (GetValue, SetValue, an integer operation) in the bookkeeping
kernels.  An assumption: no public figure was found; it is not fitted (nothing measured exercises it)."""


@functools.lru_cache(maxsize=1024)  # profiles and designs are hashable; the time does not depend on the tiling
def _split_cycles(p: Profile, design: Design, strips: int, cols: int, scale_lines: str = "rows",
                  batch: int = 1) -> float:
    """Core 0's time for the split of a (16 strips) x cols FP32 matrix of ``batch`` matrices (``scale_lines``:
    A's rows or B's columns), its tiles in the kernel's order: strip by strip; B's, per batch, tile by tile
    over the core's strips of that batch, each column factor tile built once for them."""
    tm = _Timing(p, design)
    cores = min(p.ai_cores, strips)
    width = ns.SPLIT_TILE_COLS if design.split_strips else 512
    widths = [min(width, cols - c) for c in range(0, cols, width)]
    mine = range(0, strips, cores)
    per_column = scale_lines == "columns" and design.bookkeeping and design.scaled
    if per_column:  # (w, reads the batch word, builds the factor tiles)
        per_batch = strips // batch
        groups = [sum(1 for s in mine if s // per_batch == b) for b in range(batch)]
        tiles = [(w, t == 0 and g == 0, g == 0) for n in groups if n for t, w in enumerate(widths) for g in range(n)]
    else:
        tiles = [(w, t == 0, t == 0) for _ in mine for t, w in enumerate(widths)]

    def ops(tile: tuple):
        w, reads_word, builds = tile
        count = 16 * w
        rate = tm.pp.ub_to_gm_bytes_per_cycle
        compute = [_Op("xfer", step=("V", tm.vector(count * _FLOAT))) for _ in range(10)]  # 5 bound-test + 5 split ops
        if design.bookkeeping and reads_word:  # the batch word (batch_flags.hpp: read once per batch)
            compute.append(_Op("xfer", step=("V", 2 * SCALAR_CYCLES_PER_ACCESS)))
        if design.bookkeeping and design.scaled:  # the line scaling: factor tiles, then two multiplies
            if builds:
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

    return _replay_vector(tiles, stages=ns.SPLIT_STAGES if design.split_strips else 1, ops=ops,
                          flag_latency=tm.pp.flag_latency_cycles)


@functools.lru_cache(maxsize=1024)
def _line_stats_cycles(p: Profile, design: Design, batch: int, rows: int, cols: int, along_rows: bool) -> float:
    """Core 0's time for the line statistics of a (batch * rows) x cols FP32 matrix (``line_stats_kernel.hpp``).

    Per 16 x 256 tile: one DataCopy of 16 GM runs into one of three UB stages; eight vector
    instructions over the whole tile (And; two Adds and a Max; Or and And; a Max and a Min: the
    last four are the previous tile's, software-pipelined) behind two pipe barriers, into
    accumulators of the tile's shape.  At the end of a work item: the last tile's Or/And and
    Max/Min (two barriers), the reduction of the accumulators (along rows: 18 strided level-0
    instructions over the 16 rows, 4 barriers; along columns: 4 halvings, 3 barriers), the V -> S
    flag, the scalar unit's finishing and decoding, and three stores.
    """
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
        tiles += [(w, i == 0, i + 1 == len(widths)) for i, w in enumerate(widths)]
    rate = tm.pp.ub_to_gm_bytes_per_cycle
    lat = tm.pp.flag_latency_cycles
    n = 16 * tile_cols * _FLOAT

    def vec(nbytes: float, barrier: bool = False) -> _Op:
        """One vector instruction over ``nbytes`` of UB, followed by a pipe barrier or not."""
        return _Op("xfer", step=("V", nbytes / tm.pp.vector_bytes_per_cycle + (lat if barrier else 0.0)))

    def ops(tile: tuple):
        w, first, last = tile
        load = [_Op("xfer", step=("MTE2", tm.gm_read(16 * w * _FLOAT, 16, cores)))]
        compute = []
        if w < tile_cols:  # the tail tile zeroed before its load (V -> MTE2 flag)
            compute.append(vec(n, barrier=True))
        if first:  # the accumulators reset
            compute += [vec(n) for _ in range(3)]
        steps = 1 if first else 3  # And (+ the previous tile's Or, And)
        compute += [vec(n) for _ in range(steps - 1)] + [vec(n, barrier=True)]
        steps = 3 if first else 5  # Adds, Adds, Max (+ the previous tile's Max, Min)
        compute += [vec(n) for _ in range(steps - 1)] + [vec(n, barrier=True)]
        store = []
        if last:
            compute += [vec(n), vec(n, barrier=True), vec(n), vec(n, barrier=True)]  # the last tile's steps 3, 4
            # The reductions' last barrier stands for the V -> S flag before the scalar unit reads.
            if along_rows:  # 256 -> 8 per row: 6 folds of 3 instructions, 16 repeats of 256 bytes each
                for count in (2, 1, 1, 1, 1):  # folds between barriers
                    compute += [vec(16 * 256) for _ in range(3 * count - 1)] + [vec(16 * 256, barrier=True)]
                # per row and statistic: 8 reads and compares, the decoding, one write
                scalar = 16 * 3 * (8 + 8 + 1 + 1)
                store = [_Op("xfer", step=("MTE3", tm.gm_write(16 * _FLOAT, 1, cores, rate))) for _ in range(3)]
            else:  # 16 rows -> 1 by halving
                for half in (2048, 1024, 512, 256):
                    compute += [vec(half * _FLOAT) for _ in range(2)] + [vec(half * _FLOAT, barrier=True)]
                scalar = w * 3 * (1 + 1 + 1)  # per column and statistic: read, decode, write
                store = [_Op("xfer", step=("MTE3", tm.gm_write(w * _FLOAT, 1, cores, rate))) for _ in range(3)]
            compute.append(_Op("xfer", step=("V", SCALAR_CYCLES_PER_ACCESS * scalar)))
        return load, compute, store

    return _replay_vector(tiles, stages=ns.STATS_STAGES, ops=ops, flag_latency=lat)


LINE_META_SCALAR_OPS = 40
"""Scalar instructions per line of the line-meta kernel (guard/line_meta.hpp's decoding, normalising and
comparisons; counted from the source, not measured)."""


@functools.lru_cache(maxsize=1024)
def _line_meta_cycles(p: Profile, design: Design, lines: int) -> float:
    """Core 0's time for the line meta of ``lines`` lines (``line_meta_kernel.hpp``)."""
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

    return _replay_vector(mine, stages=1, ops=ops, flag_latency=tm.pp.flag_latency_cycles)


UNSCALE_VECTOR_OPS = 40
"""Vector instructions per unit of the unscale's careful path (``unscale_kernel.hpp``: the exponents'
decoding, ``s``, ``ApplyPow2``), each behind a ``PipeBarrier<PIPE_V>``; counted from the source."""

UNSCALE_FAST_VECTOR_OPS = 5
"""Vector instructions per unit of the unscale's fast path (``unscale_tile.hpp``: the rows' factor
integers, ``Duplicate`` per row behind one barrier, then ``FastPow2``'s And, Sub, Muls and the one Mul),
each behind a ``PipeBarrier<PIPE_V>``; counted from the source."""

UNSCALE_SCALAR_OPS_PER_ROW = 8
"""Scalar instructions per row of a unit for each pass over the rows' integers (``GetValue``, ``unpack``,
the row's constant or bounds); the fast path makes two (``SumsInNormalRange``, ``RowFactorBits``), the
careful path two as well (``SumsInNormalRange`` decides, ``RowExponents``)."""

UNSCALE_SCALAR_OPS_PER_COLUMN = 3
"""Scalar instructions per column when ``SumsInNormalRange`` scans a (batch, column chunk)'s integers
(``GetValue`` and two compares); done once per core while its units stay in that batch (the bounds are
kept per chunk, ``UNSCALE_BOUND_SLOTS`` slots)."""

EPILOGUE_UNSCALE_COLUMN_OPS = 5
"""Vector instructions per tile for the columns' part of the 910A epilogue's unscale factors
(``AccumulatorStore::Unscale``: ``Duplicate``, ``And``, ``Sub``, ``Adds``, ``Muls``), each behind a
``PipeBarrier<PIPE_V>``; counted from the source."""

UNSCALE_BOUND_SLOTS = 16
"""``schedule::kUnscaleBoundSlots``: column chunks whose bounds a core keeps (slot = chunk % slots)."""

UNSCALE_STAGES = 2
"""``schedule::kUnscaleStages``: the unscale's UB stages (``VectorStages``)."""


@functools.lru_cache(maxsize=1024)
def _unscale_cycles(p: Profile, design: Design, batch: int, mp: int, np_: int, combine: bool = False,
                    unscale: bool | None = None, fast: bool = True) -> float:
    """Core 0's time for the unscale of the (batch, mp, np) result (``unscale_kernel.hpp``'s ``RunUnscale``).

    Units of whole rows or a row's column chunk (at most ``UNSCALE_UNIT`` elements, a row's chunks equal
    to within 16 columns) to cores round-robin.  ``combine``: folded into the combine kernel
    (``combine_kernel.hpp`` with the integers): each unit loads the term tiles and combines them in UB
    first (they then serve as work tiles), and is always written back.  ``unscale``: whether
    the units are unscaled (None: ``design.scaled``).  A core reads its units' batch words when their
    batches change (``batch_flags.hpp``: one 32-byte block, MTE2 -> S); a unit with nothing to unscale is
    skipped (alone) or only combined (folded).  The default ``alpha = 1``.

    ``fast``: every unit takes the fast path (``UNSCALE_FAST_VECTOR_OPS``: its exponent sums
    ``alpha_exp - ta_i - tb_j`` all in [-126, 127], as for any data whose lines need scaling exponents
    ``|t| <= 63``: the predictions assume it); False: every unit the careful path
    (``UNSCALE_VECTOR_OPS``, and the S -> V hand-off before the columns' integers are decoded in place).
    The scalar unit decides per unit from the rows' integers and the columns' bounds, which it scans once
    per (batch, column chunk) while a core's units stay there.  ``UNSCALE_STAGES`` UB stages: a unit's load
    runs beside the previous unit's vector work and store.
    """
    tm = _Timing(p, design)
    tile = ns.UNSCALE_UNIT
    rows_per_unit = tile // np_ if np_ <= tile else 1
    chunks = -(-np_ // tile)
    chunk_cols = -(-(-(-np_ // chunks)) // 16) * 16
    units = -(-(batch * mp) // rows_per_unit) * chunks
    cores = min(p.ai_cores, units)
    rate = tm.pp.ub_to_gm_bytes_per_cycle
    unscale = design.scaled if unscale is None else unscale
    terms = design.terms if combine else 1
    steps, last, cached = [], None, {}
    for unit in range(0, units, cores):
        row0 = (unit // chunks) * rows_per_unit
        span = (row0 // mp, (min(row0 + rows_per_unit, batch * mp) - 1) // mp)
        if span != last:
            steps.append(("word",))
            last = span
        scans = 0
        if unscale:  # SumsInNormalRange's column bounds, kept per (batch, chunk) in slot chunk % slots
            chunk, slot = unit % chunks, unit % chunks % UNSCALE_BOUND_SLOTS
            for b in range(span[0], span[1] + 1):
                if cached.get(slot) != (b, chunk):
                    scans, cached[slot] = scans + 1, (b, chunk)
        if unscale or combine:
            steps.append(("unit", min(chunk_cols, np_ - (unit % chunks) * chunk_cols), scans))

    def ops(step: tuple):
        if step[0] == "word":
            return ([_Op("xfer", step=("MTE2", tm.gm_read(32, 1, cores)))],
                    [_Op("xfer", step=("V", 2 * SCALAR_CYCLES_PER_ACCESS))], [])
        _, w, scans = step
        n = rows_per_unit * w
        load = [_Op("xfer", step=("MTE2", tm.gm_read(n * _FLOAT, rows_per_unit, cores))) for _ in range(terms)]
        compute = []
        if combine:
            compute += [_Op("xfer", step=("V", tm.vector(n * _FLOAT))) for _ in range(3 if terms == 3 else 5)]
        if unscale:
            load += [_Op("xfer", step=("MTE2", tm.gm_read(w * _FLOAT, 1, cores))) for _ in range(rows_per_unit)]
            scalar = 2 * UNSCALE_SCALAR_OPS_PER_ROW * rows_per_unit + UNSCALE_SCALAR_OPS_PER_COLUMN * w * scans
            compute.append(_Op("xfer", step=("V", SCALAR_CYCLES_PER_ACCESS * scalar)))
            ops_ = UNSCALE_FAST_VECTOR_OPS if fast else UNSCALE_VECTOR_OPS
            compute += [_Op("xfer", step=("V", tm.vector(n * _FLOAT))) for _ in range(ops_)]
            if not fast:
                compute.append(_Op("xfer", step=("V", tm.pp.flag_latency_cycles)))  # S -> V hand-off
        store = [_Op("xfer", step=("MTE3", tm.gm_write(n * _FLOAT, rows_per_unit, cores, rate)))]
        return load, compute, store

    return _replay_vector(steps, stages=UNSCALE_STAGES, ops=ops, flag_latency=tm.pp.flag_latency_cycles)


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

    return _replay_vector(lens, stages=2 if design.combine_double else 1, ops=ops,
                          flag_latency=tm.pp.flag_latency_cycles)


# ------------------------------------------------------------ fix-up kernels

FIXUP_COL_ROWS = 512
"""Rows of A per unit of the column fix-up (``schedule::kFixupColRows``)."""

APPLY_POW2_BARRIERS = 35
"""``unscale_kernel.hpp``'s ``ApplyPow2``: 36 vector instructions, a ``PipeBarrier<PIPE_V>`` after all but
one (two Muls share one); counted from the source."""

FIXUP_SCALAR_OPS_PER_LINE = 4
"""Scalar instructions to decide whether a line is listed: GetValue of its packed integers, the unpack's
shift and mask (``guard::unpack``), the comparison with ``fixup_min_class``; counted from the source."""


def _listed_lines(fraction: float, lines: int, cores: int, mine: int) -> int:
    """Listed lines on the busiest core: ``ceil(fraction * lines)`` spread evenly over ``cores``."""
    listed = math.ceil(fraction * lines - 1e-9) if fraction > 0 else 0
    return min(mine, -(-max(listed, 1 if fraction > 0 else 0) // cores))


def _batch_word(tm: _Timing, cores: int) -> tuple:
    """``BatchFlags::Any`` for one batch (``batch_flags.hpp``): its block of words into UB, MTE2 -> S,
    the scalar reads the word, S -> MTE2: one tile of :func:`_replay_serial`."""
    return ([_Op("xfer", step=("MTE2", tm.gm_read(32, 1, cores)))],
            [_Op("xfer", step=("V", 2 * SCALAR_CYCLES_PER_ACCESS))], [])


def _apply_pow2(tm: _Timing, nbytes: float) -> list:
    """``ApplyPow2`` over ``nbytes`` of UB: its vector instructions and barriers (V operations)."""
    one = nbytes / tm.pp.vector_bytes_per_cycle
    return [_Op("xfer", step=("V", tm.vector(nbytes))) for _ in range(APPLY_POW2_BARRIERS)] + \
        [_Op("xfer", step=("V", one))]


@functools.lru_cache(maxsize=1024)
def _fixup_rows_cycles(p: Profile, design: Design, batch: int, m: int, mp: int, np_: int, k: int) -> float:
    """Core 0's time for the fix-up rows of A (``fixup_kernel.hpp``), ``design.special`` of the m rows listed
    for it (class ``SPECIAL``: the banded ``LOSES_BITS`` lines go to the band passes, :func:`band_parts`).

    A core first reads the word of each batch its rows belong to (``batch_flags.hpp``, the last answer
    kept); with no such line (``special`` 0) it skips the batch.  Otherwise every row's packed
    integers are read and decoded; a listed row is computed in column chunks of
    ``UNSCALE_TILE``, each over K: A's next ``UNSCALE_TILE`` entries loaded, then per k the scalar reads
    A's entry, B's row chunk is loaded, one Muls and one Add (the recursive sum), then ``ApplyPow2`` and
    the chunk written to C.  The default ``alpha = 1`` (no Muls by its mantissa).  Every step behind
    ``PipeBarrier<PIPE_ALL>``: :func:`_replay_serial`.
    """
    tm = _Timing(p, design)
    pp, lat = tm.pp, tm.pp.flag_latency_cycles
    rows = batch * mp
    cores = min(p.ai_cores, rows)
    mine = len(range(0, rows, cores))
    hot = _listed_lines(design.special, batch * m, cores, mine)
    batches = len({r // mp for r in range(0, rows, cores)})  # batch words core 0 reads
    kw = ns.UNSCALE_TILE
    bare = 1.0 / pp.vector_bytes_per_cycle  # cycles per byte of one vector instruction, no barrier

    def op(pipe: str, cycles: float) -> _Op:
        return _Op("xfer", step=(pipe, cycles))

    def ops(tile: tuple):
        kind = tile[0]
        if kind == "init":  # UnscaleTile::Init: two Duplicates, PIPE_V
            return [], [op("V", kw * _FLOAT * bare), op("V", tm.vector(kw * _FLOAT))], []
        if kind == "flags":
            return _batch_word(tm, cores)
        if kind == "meta":  # the 8 rows' integers (one 32-byte block), PIPE_ALL, decode, PIPE_ALL
            return ([op("MTE2", tm.gm_read(32, 1, cores))],
                    [op("V", SCALAR_CYCLES_PER_ACCESS * FIXUP_SCALAR_OPS_PER_LINE)], [])
        w = tile[1]
        if kind == "start":  # Duplicate the exponents and the accumulators, PIPE_ALL
            return [], [op("V", w * _FLOAT * bare), op("V", w * _FLOAT * bare)], []
        if kind == "k":  # (A's next entries, PIPE_ALL,) B's row chunk, PIPE_ALL, GetValue, Muls, PIPE_V, Add, PIPE_ALL
            a_words = tile[2]
            load = [op("MTE2", tm.gm_read(-(-a_words // 8) * 8 * _FLOAT, 1, cores) + lat)] if a_words else []
            load.append(op("MTE2", tm.gm_read(w * _FLOAT, 1, cores)))
            return load, [op("V", SCALAR_CYCLES_PER_ACCESS), op("V", tm.vector(w * _FLOAT)),
                          op("V", w * _FLOAT * bare)], []
        # "end": ApplyPow2, PIPE_ALL, the chunk of C written, PIPE_ALL
        return [], _apply_pow2(tm, w * _FLOAT), [op("MTE3", tm.gm_write(w * _FLOAT, 1, cores,
                                                                        pp.ub_to_gm_bytes_per_cycle))]

    def k_loop(w: int, ka: int) -> list:
        return [(("k", w, ka), 1), (("k", w, 0), ka - 1)]

    def chunk(w: int) -> list:
        return [(("start", w), 1), (k_loop(w, kw), k // kw), (k_loop(w, k % kw), 1 if k % kw else 0),
                (("end", w), 1)]

    listed_row = [(("meta",), 1), (chunk(kw), np_ // kw), (chunk(np_ % kw), 1 if np_ % kw else 0)]
    work = [(listed_row, hot), (("meta",), mine - hot)] if design.special else []  # none listed: skipped
    return _replay_serial([(("init",), 1), (("flags",), batches)] + work, ops=ops, flag_latency=lat)


@functools.lru_cache(maxsize=1024)
def _fixup_cols_cycles(p: Profile, design: Design, batch: int, n: int, mp: int, np_: int, k: int) -> float:
    """Core 0's time for the fix-up columns of B (``fixup_cols_kernel.hpp``), ``design.special`` of the n listed
    for it (class ``SPECIAL``).

    Units of ``FIXUP_COL_ROWS`` rows of A (per batch) to cores round-robin.  A core reads the word of
    each of its units' batches (the last answer kept) and skips a batch with no such line (``special``
    0).  Otherwise a unit reads B's integers in
    chunks of ``UNSCALE_TILE`` and decodes each column's; for each listed column of its batch: over K in
    blocks of 8, the rows' 8 columns of A loaded (one 32-byte block per row), then per k the scalar
    transposes column k, B's entry's 32-byte block is loaded, the scalar reads it, one Muls and one Add
    over the unit's rows; then ``ApplyPow2`` and each row's output written through its 32-byte block
    (read, set, write).  Every step behind ``PipeBarrier<PIPE_ALL>``: :func:`_replay_serial`.
    """
    tm = _Timing(p, design)
    pp, lat = tm.pp, tm.pp.flag_latency_cycles
    kr, kw = FIXUP_COL_ROWS, ns.UNSCALE_TILE
    chunks = -(-mp // kr)
    units = batch * chunks
    cores = min(p.ai_cores, units)
    hot = _listed_lines(design.special, n, 1, np_)  # every unit computes all listed columns of its batch
    bare = 1.0 / pp.vector_bytes_per_cycle

    def op(pipe: str, cycles: float) -> _Op:
        return _Op("xfer", step=(pipe, cycles))

    def ops(tile: tuple):
        kind = tile[0]
        if kind == "init":  # UnscaleTile::Init
            return [], [op("V", kw * _FLOAT * bare), op("V", tm.vector(kw * _FLOAT))], []
        if kind == "flags":
            return _batch_word(tm, cores)
        if kind == "barrier":  # a unit's outputs written before the next unit's work starts
            return [], [op("V", 0.0)], []
        if kind == "meta":  # a chunk of B's integers, PIPE_ALL, each column decoded, PIPE_ALL at the chunk's end
            w = tile[1]
            return ([op("MTE2", tm.gm_read(w * _FLOAT, 1, cores))],
                    [op("V", SCALAR_CYCLES_PER_ACCESS * FIXUP_SCALAR_OPS_PER_LINE * w)], [])
        rows = tile[1]
        if kind == "start":  # Duplicate the accumulator, PIPE_ALL
            return [], [op("V", rows * _FLOAT * bare)], []
        if kind == "k":  # (A's 8-column block, PIPE_ALL,) transpose, B's block, PIPE_ALL, GetValue, PIPE_ALL,
            #              Muls, PIPE_V, Add, PIPE_ALL
            load = [op("MTE2", tm.gm_read(rows * 32, rows, cores) + lat)] if tile[2] else []
            load.append(op("MTE2", tm.gm_read(32, 1, cores)))
            return load, [op("V", SCALAR_CYCLES_PER_ACCESS * (2 * rows + 1) + lat), op("V", tm.vector(rows * _FLOAT)),
                          op("V", rows * _FLOAT * bare)], []
        if kind == "end":  # Duplicate the exponents, copy the accumulator, PIPE_V, ApplyPow2, PIPE_ALL
            return [], [op("V", rows * _FLOAT * bare), op("V", rows * _FLOAT * bare + lat),
                        *_apply_pow2(tm, rows * _FLOAT)], []
        # "write": one output through its 32-byte block: read, PIPE_ALL, SetValue, PIPE_ALL, write, PIPE_ALL
        return ([op("MTE2", tm.gm_read(32, 1, cores))], [op("V", 2 * SCALAR_CYCLES_PER_ACCESS)],
                [op("MTE3", tm.gm_write(32, 1, cores, pp.ub_to_gm_bytes_per_cycle))])

    def column(rows: int) -> list:
        def k_block(count: int) -> list:
            return [(("k", rows, True), 1), (("k", rows, False), count - 1)]
        return [(("start", rows), 1), (k_block(8), k // 8), (k_block(k % 8), 1 if k % 8 else 0),
                (("end", rows), 1), (("write", rows), rows)]

    mine: dict = {}  # rows of core 0's units -> how many
    for u in range(0, units, cores):
        rows = min(kr, mp - (u % chunks) * kr)
        mine[rows] = mine.get(rows, 0) + 1
    batches = len({u // chunks for u in range(0, units, cores)})  # batch words core 0 reads
    meta = [(("meta", kw), np_ // kw), (("meta", np_ % kw), 1 if np_ % kw else 0)]
    loops = [(("init",), 1), (("flags",), batches)]
    if design.special:  # no line listed for the fix-up: every batch skipped
        loops += [(meta + [(column(rows), hot), (("barrier",), 1)], count) for rows, count in mine.items()]
    return _replay_serial(loops, ops=ops, flag_latency=lat)


# ------------------------------------------------- listed lines by exponent bands

READBACK_BYTES_PER_LINE = 16
"""Bytes per line of the guarded product's one read-back (``npu_bands.LINE_ROWS`` int32 words: the packed
integers and the statistics big, small_w, finite), A's rows then B's columns of every batch."""

BAND_GATHER_TRANSFERS = 2
"""FP32 transfers per element of a side's gather (``index_select`` of the listed rows of A, or columns of B,
once per band; of the ordinary ones when they are not all of the operand: read, write); counted from
``npu_bands.run_band_passes``."""

BAND_ACC_TRANSFERS = 7
"""FP32 transfers per element of an accumulator block, per block (a band, or a pair of bands), in
``npu_bands.run_band_passes``'s ``acc[where] = acc[where] + part[...]``: the indexed gather of ``acc``
(read, write), the add (two reads, a write), the indexed write (read, write)."""

BAND_SCATTER_TRANSFERS = 2
"""FP32 transfers per output written into C by each pass: the indexed write of its accumulator (read,
write); each pass's accumulator holds exactly the outputs it writes."""


def _lines(fraction: float, lines: int) -> int:
    """``ceil(fraction * lines)`` lines (at least one for any fraction above 0), as :func:`_listed_lines`."""
    if fraction <= 0:
        return 0
    return min(lines, max(1, math.ceil(fraction * lines - 1e-9)))


def _stream_seconds(p: Profile, nbytes: float) -> float:
    """A bandwidth-bound pass (torch's copies, adds and indexed writes on the device) over ``nbytes`` of
    main-memory traffic at the chip's nominal HBM rate (optimistic: no efficiency below peak, no launch)."""
    return nbytes / (p.hbm_gbps * 1e9)


def _readback_seconds(p: Profile, batch: int, m: int, n: int) -> float:
    """The guarded product's one device -> host copy of the lines' integers and its synchronisation."""
    pp = p.pipes
    if pp.host_readback_us is None or pp.d2h_gbps is None:
        raise ValueError(f"profile {p.key!r} has no pipes.host_readback_us / pipes.d2h_gbps: the package's "
                         f"read-back of the lines' integers needs them (tuning/profiles/ascend.json)")
    return pp.host_readback_us * 1e-6 + READBACK_BYTES_PER_LINE * batch * (m + n) / (pp.d2h_gbps * 1e9)


def _pass_tiling(p: Profile, design: Design, shape: tuple, rows: int, cols: int,
                 t: ns.Tiling) -> tuple[ns.Tiling, Design]:
    """The tiling and mode ``npu.run`` gives a band pass of ``rows x K x cols`` (``shape``: the product's m, n,
    k): the tuner's for the pass's shape (``npu.choose_tiling``, the same K groups) where the product runs
    the tuner's, else the product's own ``t`` in ``design``'s mode."""
    from sgemm_cube.backends import npu

    m, n, k = shape
    try:
        if tuple(t) == tuple(npu.choose_tiling(p.key, m, n, k, terms=design.terms)):
            own = npu.choose_tiling(p.key, rows, cols, k, terms=design.terms)
            return own, _replace_fields(design, per_term=bool(own.per_term), l0c_stages=int(own.l0c_stages))
    except (KeyError, ValueError):  # a profile without a tiling table: the product's tiling
        pass
    return t, design


def _pass_kernels(p: Profile, design: Design, rows: int, cols: int, k: int, pass_tiling: tuple,
                  exact: bool) -> dict:
    """Seconds of one ``band_pass`` (one batch) in ``pass_tiling`` (:func:`_pass_tiling`'s tiling and design):
    the split of both sides (every line scaled: the pass has no batch words), the GEMM, the combine with the
    unscale (or the 910A's epilogue and its own unscale pass: no words, so no unscale in the epilogue):
    :func:`_predict` of the kernels with the bookkeeping, less the line statistics and meta, which the pass
    does not run."""
    t, design = pass_tiling
    d = _replace_fields(design, listed=None, special=0.0, bands=2, scaled=True, epilogue_unscale=False)
    ph = _predict(p, d, 1, rows, cols, k, t, exact).phases
    return {"split_a": ph["split_a"], "split_b": ph["split_b"], "gemm": ph["gemm"],
            "combine_unscale": ph.get("combine", 0.0) + ph["unscale"]}


@functools.lru_cache(maxsize=1024)
def _band_parts(p: Profile, design: Design, batch: int, m: int, n: int, k: int, t: ns.Tiling,
                exact: bool) -> tuple:
    f, nb = design.listed or 0.0, design.bands
    r, c = _lines(f, m), _lines(f, n)  # banded rows of A, columns of B (per batch)
    plain_r = max(0, m - r - _lines(design.special, m))  # class SPLIT: the ordinary lines
    plain_c = max(0, n - c - _lines(design.special, n))
    fl = _FLOAT
    parts: dict = {"band_rows": {}, "band_cols": {}, "band_pairs": {}}

    def tiling(rows: int, cols: int) -> tuple:
        return _pass_tiling(p, design, (m, n, k), rows, cols, t)

    gathered_a = gathered_b = False
    if r and plain_c:  # the bands of the banded rows against B's ordinary columns (gathered unless all)
        ordinary = (plain_c * k if plain_c < n else 0) + nb * r * k
        parts["band_rows"] = {"gather": _stream_seconds(p, BAND_GATHER_TRANSFERS * ordinary * fl),
                              **_pass_kernels(p, design, nb * r, plain_c, k, tiling(nb * r, plain_c), exact),
                              "accumulate": _stream_seconds(p, (1 + nb * BAND_ACC_TRANSFERS) * r * plain_c * fl),
                              "scatter": _stream_seconds(p, BAND_SCATTER_TRANSFERS * r * plain_c * fl)}
        gathered_a = True
    if c and plain_r:  # A's ordinary rows (gathered unless all) against the bands of the banded columns
        ordinary = (plain_r * k if plain_r < m else 0) + nb * c * k
        parts["band_cols"] = {"gather": _stream_seconds(p, BAND_GATHER_TRANSFERS * ordinary * fl),
                              **_pass_kernels(p, design, plain_r, nb * c, k, tiling(plain_r, nb * c), exact),
                              "accumulate": _stream_seconds(p, (1 + nb * BAND_ACC_TRANSFERS) * plain_r * c * fl),
                              "scatter": _stream_seconds(p, BAND_SCATTER_TRANSFERS * plain_r * c * fl)}
        gathered_b = True
    if r and c:  # every pair of bands, both sides band-split
        gather = ((0 if gathered_a else nb * r * k) + (0 if gathered_b else nb * c * k)) * BAND_GATHER_TRANSFERS * fl
        parts["band_pairs"] = {"gather": _stream_seconds(p, gather),
                               **_pass_kernels(p, design, nb * r, nb * c, k, tiling(nb * r, nb * c), exact),
                               "accumulate": _stream_seconds(p, (1 + nb * nb * BAND_ACC_TRANSFERS) * r * c * fl),
                               "scatter": _stream_seconds(p, BAND_SCATTER_TRANSFERS * r * c * fl)}
    return tuple((name, tuple((part, batch * v) for part, v in ps.items())) for name, ps in parts.items())


def band_parts(profile: Profile | str, m: int, n: int, k: int, tiling, *, design: Design,
               batch: int = 1, exact: bool = False) -> dict:
    """Seconds of each part of each band pass of ``design`` (MODEL PREDICTION): ``{"band_rows": {...},
    "band_cols": {...}, "band_pairs": {...}}``, each ``{}`` when the pass does not run, else ``gather``,
    ``split_a``, ``split_b``, ``gemm``, ``combine_unscale``, ``accumulate``, ``scatter``.

    The passes are ``sgemm_cube.backends.npu_bands.run_band_passes``'s, per batch: with ``R`` banded rows
    and ``C`` banded columns (``ceil(listed * m)``, ``ceil(listed * n)``), each of ``bands`` bands, the
    bands of a side stacked into one matrix, so at most three ``band_pass`` calls:

    * ``band_rows`` (when some column is ordinary): the ``bands * R`` band rows against B's ordinary
      columns (gathered unless they are all of B), a ``(bands R) x K x N_ordinary`` product;
    * ``band_cols`` (when some row is ordinary): A's ordinary rows against the ``bands * C`` band columns;
    * ``band_pairs`` (when both are banded): ``(bands R) x K x (bands C)``, both sides band-split.

    Each ``band_pass`` is the split of both sides (B's, or A's, split again), the GEMM and the
    combine with the unscale, in the tiling ``npu.run`` gives the pass (:func:`_pass_tiling`: the tuner's
    for the pass's shape where ``tiling``, the product's, is the tuner's, else ``tiling``; the K groups,
    and so the bits, are the product's either way), timed by the same phase models as the product's
    kernels (:func:`_pass_kernels`).  Around them, bandwidth-bound passes at the nominal HBM
    rate (:func:`_stream_seconds`): each side's gather (:data:`BAND_GATHER_TRANSFERS`, counted in the
    first pass that uses it), the accumulator's zeroing and per-block adds (:data:`BAND_ACC_TRANSFERS`),
    the write into C (:data:`BAND_SCATTER_TRANSFERS`).  No launch overheads (the model has none).
    """
    p = get_profile(profile)
    if design.listed is None:
        return {"band_rows": {}, "band_cols": {}, "band_pairs": {}}
    t = ns.Tiling(*map(int, tiling))
    return {name: dict(ps) for name, ps in _band_parts(p, design, batch, m, n, k, t, exact)}


# ------------------------------------------------------- the GEMM's replay

def _replay_core_steps(timing: _GemmTiming, g: ns.Geometry, *, b_slots: int) -> tuple[float, dict]:
    """``replay(core_program(g, 0, b_slots=...), timing, ...)`` without building the program (``l0c_sets``
    below: ``g.plan.l0c_stages``, the geometry's accumulator sets).

    Same answer, bit for bit (``tests/tuning/test_pipeline_model.py`` compares the two on every variant),
    some 30 times faster: the program's flags are followed step by step instead of through queues.
    Each pipe is in order and a flag is first in first out per event, so every wait of
    :func:`sgemm_cube.backends.npu_schedule.core_program` has a known set to match (cycles):

    * MTE2 loads B for step x once MTE1 has copied step ``x - b_slots`` (the slot's previous
      tile) to L0; it loads a group's A tiles after that group's first B tile, once MTE1 has
      copied the previous group's last step;
    * MTE1 copies step x once M has multiplied step ``x - l0_stages`` (the L0 stage's previous
      contents), the group's A tiles and x's B tile are in L1;
    * M multiplies step x once it is in L0 and, at a C block's first K step, once OUT has
      drained block ``c - l0c_sets`` (the accumulator set's previous block); OUT drains block c
      after its last product.

    Every set fires ``flag_latency_cycles`` after its pipe reached it; the program's first sets
    (buffers free) at 0, its last waits hold each pipe until the final sets have fired.  The
    sums and maxima are those :func:`replay` computes, in the same order.  ``prefetch_a`` is not
    covered (replay the program).
    """
    lat = timing.pp.flag_latency_cycles
    stages = g.plan.l0_stages
    gm_active, duration, kinds = timing.active, timing._duration, _STEP_KINDS
    template = ns.Step(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, True, False, True, False, True, False)
    costs: dict = {}

    def cost(kind: str, m_act: int, n_act: int, k_act: int, group: int, first_group: bool, active: int) -> float:
        key = (kind, m_act, n_act, k_act, group, first_group, active)
        hit = costs.get(key)
        if hit is None:
            s = template._replace(m_act=m_act, n_act=n_act, k_act=k_act, group=group, first_group=first_group)
            costs[key] = hit = duration(kinds[kind], s, active)[1]
        return hit

    def block_costs(m_act: int, n_act: int, k_tail: int, first_group: bool, active: int) -> tuple:
        """(B load, L0 copy, product) of a full K step and of the last one, the C block's write-back."""
        key = (m_act, n_act, k_tail, first_group, active)
        hit = costs.get(key)
        if hit is None:
            costs[key] = hit = tuple(cost(kind, m_act, n_act, k_act, 0, first_group, active)
                                     for k_act in (g.bk, k_tail) for kind in ("load_b", "load_l0", "mmad")) + \
                (cost("store_c", m_act, n_act, 0, 0, first_group, active),)
        return hit

    # Ready times (cycles) of the latest set of each B slot (MTE1 -> MTE2), L0 stage (M -> MTE1),
    # accumulator set (OUT -> M); the program's first sets fire at 0.  Slots, stages and sets
    # are 1 or 2, so ``x & (count - 1)`` is ``x % count``.
    l0c_sets = g.plan.l0c_stages
    if not {b_slots, stages, l0c_sets} <= {1, 2}:
        raise ValueError(f"B slots, L0 stages and accumulator sets must be 1 or 2, got {(b_slots, stages, l0c_sets)}")
    slot_free, stage_free, c_free = [lat] * b_slots, [lat] * stages, [lat] * l0c_sets
    slot_mask, stage_mask, c_mask = b_slots - 1, stages - 1, l0c_sets - 1
    a_free = a_ready = lat  # MTE1 -> MTE2: A tiles read for the last time; MTE2 -> MTE1: A tiles in L1
    t_mte2 = t_mte1 = t_m = t_out = 0.0
    busy_mte2 = busy_mte1 = busy_m = busy_out = 0.0
    x = c_block = 0
    nf = g.n_fused
    for _ in range(g.passes):
        for item in range(0, g.items, g.cores):
            active = gm_active(item)
            _, row_block, split = ns.item_coords(g, item)
            first_col, last_col = ns.split_columns(g, split)
            m_act = ns._block_extent(g.mp, g.bm, row_block)
            for group in range(g.groups):
                first_group = group == 0
                kcount = ns.group_k_blocks(g, group)
                k_tail = ns._block_extent(g.kp, g.bk, group * nf + kcount - 1)  # only the last block is short
                # Groups before the last have full K blocks: their A tiles cost what group 0's do.
                a_load = cost("load_a_group", m_act, 0, 0, group if group + 1 == g.groups else 0, False, active)
                for col in range(first_col, last_col):
                    b, l, mm, b_last, l_last, mm_last, store = block_costs(
                        m_act, ns._block_extent(g.np, g.bn, col), k_tail, first_group, active)
                    # K steps of the C block: the first, those in between (-1: all at once), the last.
                    for kk in (0, -1, kcount - 1) if kcount > 3 else range(kcount):
                        if kk + 1 == kcount:  # the last K step
                            b, l, mm = b_last, l_last, mm_last
                        elif kk < 0:
                            # Between the first and last: only the flags between MTE2, MTE1 and M.
                            for x in range(x, x + kcount - 2):
                                ready = slot_free[x & slot_mask]
                                if ready > t_mte2:
                                    t_mte2 = ready
                                t_mte2 += b
                                ready = t_mte2 + lat
                                if stage_free[x & stage_mask] > t_mte1:
                                    t_mte1 = stage_free[x & stage_mask]
                                if ready > t_mte1:
                                    t_mte1 = ready
                                t_mte1 += l
                                slot_free[x & slot_mask] = ready = t_mte1 + lat
                                if ready > t_m:
                                    t_m = ready
                                t_m += mm
                                stage_free[x & stage_mask] = t_m + lat
                            x += 1
                            busy_mte2 += b * (kcount - 2)
                            busy_mte1 += l * (kcount - 2)
                            busy_m += mm * (kcount - 2)
                            continue
                        if x == 0:  # the program's head: A tiles before the first B tile
                            if a_free > t_mte2:
                                t_mte2 = a_free
                            t_mte2 += a_load
                            busy_mte2 += a_load
                            a_ready = t_mte2 + lat
                        # MTE2: this step's B tile into its slot.
                        ready = slot_free[x & slot_mask]
                        if ready > t_mte2:
                            t_mte2 = ready
                        t_mte2 += b
                        busy_mte2 += b
                        b_ready = t_mte2 + lat
                        group_start = kk == 0 and col == first_col
                        if group_start and x:
                            # MTE2: the group's A tiles, once the previous group's are read.
                            if a_free > t_mte2:
                                t_mte2 = a_free
                            t_mte2 += a_load
                            busy_mte2 += a_load
                            a_ready = t_mte2 + lat
                        # MTE1: copy to L0 once the stage is free and the tiles are in L1.
                        ready = stage_free[x & stage_mask]
                        if ready > t_mte1:
                            t_mte1 = ready
                        if group_start and a_ready > t_mte1:
                            t_mte1 = a_ready
                        if b_ready > t_mte1:
                            t_mte1 = b_ready
                        t_mte1 += l
                        busy_mte1 += l
                        slot_free[x & slot_mask] = l0_ready = t_mte1 + lat
                        last_k = kk + 1 == kcount
                        if last_k and col + 1 == last_col:
                            a_free = l0_ready
                        # M: the products, once the operands are in L0 and the accumulators drained.
                        if l0_ready > t_m:
                            t_m = l0_ready
                        if kk == 0:
                            ready = c_free[c_block & c_mask]
                            if ready > t_m:
                                t_m = ready
                        t_m += mm
                        busy_m += mm
                        stage_free[x & stage_mask] = t_m + lat
                        if last_k:  # OUT: drain the accumulators
                            ready = t_m + lat
                            if ready > t_out:
                                t_out = ready
                            t_out += store
                            busy_out += store
                            c_free[c_block & c_mask] = t_out + lat
                            c_block += 1
                        x += 1
    # The program's last waits: every buffer free again.
    t_mte2 = max(t_mte2, *slot_free, a_free)
    t_mte1 = max(t_mte1, *stage_free)
    t_m = max(t_m, *c_free)
    busy = dict.fromkeys(PIPES, 0.0)
    busy.update(MTE2=busy_mte2, MTE1=busy_mte1, M=busy_m, OUT=busy_out)
    return max(t_mte2, t_mte1, t_m, t_out), busy


_STEP_KINDS = {kind: _Op(kind) for kind in ("load_a_group", "load_b", "load_l0", "mmad", "store_c")}


def _replay_gemm(p: Profile, design: Design, batch: int, m: int, n: int, k: int, t: ns.Tiling, *,
                 program: bool = False):
    """Core 0's GEMM replayed in full: (cycles, busy cycles per pipe, geometry).

    ``program=True`` replays the program of :func:`~sgemm_cube.backends.npu_schedule.core_program`
    through :func:`replay`, as ``prefetch_a`` always does; otherwise :func:`_replay_core_steps`
    gives the same answer faster.
    """
    g = geometry(p, m, n, k, t, design=design, batch=batch)
    timing = _GemmTiming(p, design, g, 0)
    b_slots = 2
    if design.buffering == "single":
        # Fig. 6(a): one B buffer in L1, one L0A/L0B stage and one accumulator set.
        g = g._replace(plan=g.plan._replace(l0_stages=1, l0c_stages=1))
        b_slots = 1
    if program or design.prefetch_a:
        cycles, busy = replay(ns.core_program(g, 0, b_slots=b_slots, prefetch_a=design.prefetch_a),
                              timing, _SYNCS, timing.pp.flag_latency_cycles)
    else:
        cycles, busy = _replay_core_steps(timing, g, b_slots=b_slots)
    return cycles, busy, g


# ------------------------------------------------------------------ API


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
        periodic regime (longer for large products; same answer within 0.5%).

    Returns
    -------
    Prediction
    """
    pr = _predict(get_profile(profile), design, batch, m, n, k, ns.Tiling(*map(int, tiling)), exact)
    return pr._replace(phases=dict(pr.phases), busy=dict(pr.busy))  # the caller's own dicts


@functools.lru_cache(maxsize=8192)  # rank, the Fig. 10 sweep and the report ask for the same products again
def _predict(p: Profile, design: Design, batch: int, m: int, n: int, k: int, t: ns.Tiling, exact: bool) -> Prediction:
    cycles, busy, g = _gemm_cycles(p, design, batch, m, n, k, t, exact)
    hz = p.clock_ghz * 1e9
    phases = {"gemm": design.passes * cycles / hz, **_other_phases(p, design, batch, g)}
    if design.listed is not None:  # the read-back of the lines' integers, then the listed lines' band passes
        phases["readback"] = _readback_seconds(p, batch, m, n)
        for name, parts in _band_parts(p, design, batch, m, n, k, t, exact):
            phases[name] = sum(v for _, v in parts)
    seconds = sum(phases.values())
    return Prediction(seconds, 2.0 * batch * m * n * k / seconds / 1e12, phases,
                      {pipe: b / cycles for pipe, b in busy.items() if b > 0},
                      ns.Tiling(g.bm, g.bk, g.bn, g.n_fused, design.per_term, g.plan.l0c_stages), g.groups)


def _other_phases(p: Profile, design: Design, batch: int, g: ns.Geometry) -> dict:
    """Seconds of the product's kernels other than the GEMM (split, bookkeeping, combine).

    With the bookkeeping the combine kernel unscales too (``combine_kernel.hpp``): ``combine`` is its time with
    nothing to unscale, ``unscale`` what the unscale adds (0 when ``design.scaled`` is False: the batch words
    say no line is scaled).  Where the 910A's epilogue combined, it unscaled too (the GEMM's store charges it:
    ``_GemmTiming._epilogue_unscale``) every batch whose words allow the fast path (the predictions' data: lines
    of moderate ``|t|``), and ``unscale`` is the pass that is left: it reads the words and skips every unit.
    """
    hz = p.clock_ghz * 1e9
    phases = {}
    if design.kind == "kernel":
        phases["split_a"] = _split_cycles(p, design, batch * g.mp // 16, g.kp, "rows") / hz
        phases["split_b"] = _split_cycles(p, design, batch * g.kp // 16, g.np, "columns", batch) / hz
        if design.bookkeeping:
            phases["line_stats_a"] = _line_stats_cycles(p, design, batch, g.mp, g.kp, True) / hz
            phases["line_stats_b"] = _line_stats_cycles(p, design, batch, g.kp, g.np, False) / hz
            phases["line_meta"] = (_line_meta_cycles(p, design, batch * g.mp)
                                   + _line_meta_cycles(p, design, batch * g.np)) / hz
            if design.fused_combine and g.combine_in_epilogue:  # the 910A's epilogue combined (and unscaled)
                after = False if design.epilogue_unscale else None  # None: the pass unscales (design.scaled)
                phases["unscale"] = _unscale_cycles(p, design, batch, g.mp, g.np, unscale=after) / hz
            else:  # folded into the combine kernel: its combine-only time, and what the unscale adds to it
                plain = _unscale_cycles(p, design, batch, g.mp, g.np, True, False)
                phases["unscale"] = (_unscale_cycles(p, design, batch, g.mp, g.np, True) - plain) / hz
                phases["combine"] = plain / hz
        if not (design.fused_combine and g.combine_in_epilogue) and not design.bookkeeping:
            phases["combine"] = _combine_cycles(p, design, batch * g.mp * g.np) / hz
    if design.listed is not None:  # after the unscale: the special lines in FP32 (Design.special)
        phases["fixup_rows"] = _fixup_rows_cycles(p, design, batch, g.m, g.mp, g.np, g.k) / hz
        phases["fixup_cols"] = _fixup_cols_cycles(p, design, batch, g.n, g.mp, g.np, g.k) / hz
    return phases


def _screen_seconds(p: Profile, design: Design, batch: int, m: int, n: int, k: int, t: ns.Tiling) -> float:
    """The whole product's time estimated from a short replay (the screen of :func:`rank`).

    The GEMM is replayed on one round of block rows (one block row per core) and one K group; its time is
    scaled by the rounds core 0 runs on the whole product (items over cores, rounded up: the cores left
    idle in the last round count) and by the K blocks of the whole product over those of the short one.
    The other kernels (split, combine unless the epilogue combines) are timed on the whole product.
    """
    short_m, short_k = min(m, t.bm * p.ai_cores), min(k, t.bk * t.n_fused)
    gemm = _predict(p, design, 1, short_m, n, short_k, t, False).phases["gemm"]
    g = geometry(p, m, n, k, t, design=design, batch=batch)
    gs = geometry(p, short_m, n, short_k, t, design=design)
    scale = (-(-g.items // g.cores) / -(-gs.items // gs.cores)) * (g.kb / gs.kb)
    return gemm * scale + sum(_other_phases(p, design, batch, g).values())


L0C_STAGES = (1, 2)
"""Accumulator sets in L0C the tuner tries for each GEMM mode (:func:`best_kernel`, :func:`rank_package`,
:func:`rank_stages`): both on both chips, the model decides per shape (on 910A two sets pay where K runs in
several groups, on 910B the halved room for accumulators costs more than the overlap gains)."""


L0C2_MARGIN = 0.01
""":func:`best_kernel` picks two L0C stages only where the model predicts them more than this fraction faster
than the best with one: a change never run on hardware is not adopted for a gain within the model's noise."""


def _mode_key(per_term: bool, l0c_stages: int) -> str:
    """The key of :func:`best_kernel`'s predictions: ``fused``/``per_term``, ``_l0c2`` with two L0C stages."""
    return ("per_term" if per_term else "fused") + ("_l0c2" if l0c_stages == 2 else "")


def best_kernel(profile: Profile | str, m: int, n: int, k: int, *, terms: int = 3,
                batch: int = 1, use_table: bool = True) -> tuple[ns.Tiling, dict]:
    """The kernel's tiling for one product: which GEMM mode, with which blocks (MODEL PREDICTION).

    A measured tuning-table entry for the shape wins (:mod:`sgemm_cube.tuning.table`) unless
    ``use_table`` is False (the model's own answer: what ``--write-tilings`` stores).
    Otherwise each mode of the kernel (all terms in one pass; one pass per
    term), with one and with two accumulator sets in L0C (:data:`L0C_STAGES`),
    is ranked by :func:`rank` (every candidate screened by its
    estimated whole-product time, the best 24 timed on the whole product:
    split, GEMM, combine or the epilogue's); the fastest best wins (ties: the
    first of fused, fused with two L0C stages, per term, per term with two),
    except that two L0C stages must be more than :data:`L0C2_MARGIN` faster
    than the best with one.
    About 2-4 s per shape on a 2-core machine.

    Returns the tiling and ``{"fused": Prediction, "fused_l0c2": ..., "per_term": ..., "per_term_l0c2": ...}``
    (each variant's best, where one fits; empty when a table entry answered).
    """
    from . import table

    p = get_profile(profile)
    cap = ns.capacity_from_profile(p)
    cfg = table.lookup(p.name, m, n, k, backend="ascend") if use_table else None
    if cfg is not None:
        measured = ns.Tiling(cfg["bm"], cfg["bk"], cfg["bn"], cfg.get("n_fused", 1 << 30),
                             bool(cfg.get("per_term", False)), int(cfg.get("l0c_stages", 1)))
        return ns.fit_tiling(cap, measured, k=k, terms=terms), {}
    predictions = {}
    for per_term in (False, True):
        for stages in L0C_STAGES:
            design = Design("kernel", terms=terms, per_term=per_term, l0c_stages=stages)
            try:
                best = rank(p, m, n, k, design=design, top=1, batch=batch)[0]
            except ValueError:  # no tiling of this mode fits
                continue
            predictions[_mode_key(per_term, stages)] = predict(p, m, n, k, best.tiling, design=design, batch=batch)
    if not predictions:
        raise ValueError(f"no tiling of the kernel fits {p.name}")
    best = max(predictions.values(), key=lambda pr: pr.tflops)
    one = [pr for pr in predictions.values() if pr.tiling.l0c_stages == 1]
    if best.tiling.l0c_stages == 2 and one and best.tflops <= (1 + L0C2_MARGIN) * max(pr.tflops for pr in one):
        best = max(one, key=lambda pr: pr.tflops)  # two sets must pay by more than the margin
    return best.tiling, predictions


def package(listed: float = 0.0, *, per_term: bool = False, terms: int = 3, scaled: bool = True,
            l0c_stages: int = 1, bands: int = 2, special: float = 0.0) -> Design:
    """:data:`PACKAGE`, the whole product ``sgemm_cube.matmul`` launches, for one GEMM mode (and accumulator
    sets in L0C), fraction of listed lines (``Design.listed``: banded, each of ``bands`` exponent bands),
    fraction of special lines (``Design.special``: the FP32 fix-up) and scaling (``Design.scaled``: every
    batch has a scaled line, or none)."""
    return _replace_fields(PACKAGE, listed=float(listed), per_term=per_term, terms=terms, scaled=scaled,
                           l0c_stages=int(l0c_stages), bands=int(bands), special=float(special))


def predict_package(profile: Profile | str, m: int, n: int, k: int, *, listed: float = 0.0, terms: int = 3,
                    scaled: bool = True, batch: int = 1, use_table: bool = True, bands: int = 2,
                    special: float = 0.0) -> Prediction:
    """Predicted time of the whole product ``sgemm_cube.matmul`` launches on the NPU (MODEL PREDICTION).

    The tiling and GEMM mode are :func:`package_pick`'s (what the NPU backend's tiling tables store);
    the product is :func:`package`'s: every kernel ``npu.run`` launches with default options, the
    read-back of the lines' integers, the band passes of a fraction ``listed`` of the rows of A and
    columns of B (``bands`` bands each; :func:`band_parts`), the FP32 fix-up of a fraction ``special``,
    every batch with a scaled line or (``scaled=False``) none.  ``phases`` has each kernel's (each
    pass's) seconds.
    """
    p = get_profile(profile)
    pick = package_pick(p, m, n, k, terms=terms, batch=batch, use_table=use_table)
    return predict(p, m, n, k, pick, design=package(listed, per_term=pick.per_term, terms=terms, scaled=scaled,
                                                    l0c_stages=pick.l0c_stages, bands=bands, special=special),
                   batch=batch)


def package_pick(profile: Profile | str, m: int, n: int, k: int, *, terms: int = 3, batch: int = 1,
                 use_table: bool = True) -> ns.Tiling:
    """The tiling and GEMM mode ``sgemm_cube.matmul`` launches on the NPU for one shape (MODEL PREDICTION).

    A measured tuning-table entry for the shape wins (``use_table``; :func:`best_kernel`'s look-up);
    otherwise :func:`rank_package`'s first row: the whole product ranked, bookkeeping included (every
    batch with a scaled line, no line listed), which is what ``--write-tilings`` stores.  It can differ
    from :func:`best_kernel`'s pick, which ranks the kernels alone: where the 910A's epilogue unscales,
    two accumulator sets in L0C let that work overlap the next tile's products.
    """
    from . import table

    p = get_profile(profile)
    if use_table and table.lookup(p.name, m, n, k, backend="ascend") is not None:
        return best_kernel(p, m, n, k, terms=terms, batch=batch, use_table=True)[0]  # the measured entry
    return rank_package(p, m, n, k, terms=terms, batch=batch, top=1)[0].tiling


_FIXED_PHASES = ("fixup_rows", "fixup_cols", "readback")
"""Phases of the package whose time does not depend on the tiling (:func:`rank_package`'s ties)."""


def rank_package(profile: Profile | str, m: int, n: int, k: int, *, listed: float = 0.0, terms: int = 3,
                 scaled: bool = True, top: int | None = 10, batch: int = 1, bands: int = 2, special: float = 0.0,
                 **options) -> list[Ranked]:
    """Tilings of both GEMM modes ranked by the whole product's predicted time (MODEL PREDICTIONS).

    :func:`rank` of :func:`package` for all terms in one pass and for one pass per term, each with one and
    with two accumulator sets in L0C (:data:`L0C_STAGES`; a row's ``tiling.l0c_stages``) (``options``:
    ``screen``, ``min_l0_intensity``, ``progress``), the rows of both in one list, best first (ties:
    within 0.1% of the best time without the fix-up and the read-back, the larger block first); each
    row's ``tiling.per_term`` says its mode.  The fix-up's and the read-back's time does not depend on
    the tiling; the bookkeeping's can (where the unscale runs depends on the mode and the K groups), and
    the band passes' does (they run in the product's tiling), so the first row can beat
    :func:`best_kernel`'s pick, which ranks the kernels alone.  :func:`rank`'s screen leaves the read-back
    and the band passes out; the rows it keeps are timed with them.
    """
    p = get_profile(profile)
    rows = []
    for per_term in (False, True):
        rows += _rank_over_stages(p, m, n, k, package(listed, per_term=per_term, terms=terms, scaled=scaled,
                                                      bands=bands, special=special),
                                  L0C_STAGES, batch, options)
    if not rows:
        raise ValueError(f"no tiling of the kernel fits {p.name}")
    # As rank sorts (ties to the larger block), with ties to 0.1% of the best time without the fix-up and the
    # read-back, which every tiling pays alike and which can make the product a thousand times slower.
    first = predict(p, m, n, k, rows[0].tiling, design=package(listed, per_term=bool(rows[0].tiling.per_term),
                                                              terms=terms, scaled=scaled,
                                                              l0c_stages=rows[0].tiling.l0c_stages,
                                                              bands=bands, special=special), batch=batch)
    fixed = sum(first.phases[name] for name in _FIXED_PHASES)
    fastest = min(r.seconds for r in rows) - fixed
    rows.sort(key=lambda r: (round((r.seconds - fixed) / fastest, 3), -(r.tiling.bm * r.tiling.bk * r.tiling.bn)))
    return rows if top is None else rows[:top]


def _rank_over_stages(p: Profile, m: int, n: int, k: int, design: Design, stages, batch: int,
                      options: dict) -> list[Ranked]:
    """The rows of :func:`rank` of ``design`` with each accumulator-set count in ``stages``, unsorted; a count
    no tiling fits drops out."""
    rows = []
    for count in stages:
        d = _replace_fields(design, l0c_stages=count)
        if feasible_tilings(p, design=d, k=k):
            rows += rank(p, m, n, k, design=d, top=None, batch=batch, **options)
    return rows


def rank_stages(profile: Profile | str, m: int, n: int, k: int, *, design: Design = KERNEL, top: int | None = 10,
                batch: int = 1, **options) -> list[Ranked]:
    """:func:`rank` of ``design`` with each of :data:`L0C_STAGES` accumulator sets (the kernel design; the
    rows of all in one list, sorted as :func:`rank` sorts; a row's ``tiling.l0c_stages`` says which)."""
    p = get_profile(profile)
    rows = _rank_over_stages(p, m, n, k, design, L0C_STAGES if design.kind == "kernel" else (design.l0c_stages,),
                             batch, options)
    if not rows:
        raise ValueError(f"no tiling fits {p.name} for the {design.kind} design")
    rows.sort(key=lambda r: (-round(r.tflops, 1), -(r.tiling.bm * r.tiling.bk * r.tiling.bn)))
    return rows if top is None else rows[:top]


def feasible_tilings(profile: Profile | str, *, design: Design = KERNEL, k: int | None = None,
                     max_edge: int = 256) -> list[ns.Tiling]:
    """Every (bm, bk, bn) up to ``max_edge`` that fits, with its largest ``n_fused``."""
    tilings = _fitting_tilings(get_profile(profile), design, max_edge)
    if k is None:
        return list(tilings)
    kp = -(-k // 16) * 16  # K padded to the cube's 16: no more resident A blocks than K blocks
    if design.kind == "kernel" and design.two_level:  # K groups of K_GROUP elements: n_fused is K's
        fitted = ((t, ns.group_n_fused(k, t.bk)) for t in tilings)
        return [t._replace(n_fused=nf) for t, nf in fitted if nf is not None and nf <= t.n_fused]
    return [t._replace(n_fused=min(t.n_fused, -(-kp // t.bk))) for t in tilings]


@functools.lru_cache(maxsize=64)  # every ranking and sweep of a profile and design starts here
def _fitting_tilings(p: Profile, design: Design, max_edge: int) -> tuple[ns.Tiling, ...]:
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
                out.append(t._replace(n_fused=nf, per_term=design.per_term, l0c_stages=design.l0c_stages))
    return tuple(out)


def _roofline(p: Profile, design: Design, m: int, n: int, k: int, tilings: Sequence[ns.Tiling]):
    blocking = roofline.kernel_blocking(p, n_terms=design.terms) if design.kind == "kernel" else None
    q = roofline._with_blocking(p, blocking)
    bm, bk, bn = (np.array([getattr(t, f) for t in tilings]) for f in ("bm", "bk", "bn"))
    return roofline.predict(q, m, n, k, bm, bk, bn, n_terms=design.terms)


_PROGRESS_DELAY_S = 1.0
"""Seconds before a progress bar shows: quick runs print none."""


def rank(profile: Profile | str, m: int, n: int, k: int, *, design: Design = KERNEL, top: int | None = 10,
         screen: int = 24, min_l0_intensity: float = 0.5, batch: int = 1, progress: bool = False) -> list[Ranked]:
    """Tilings for a product, best predicted time first (MODEL PREDICTIONS).

    Candidates are the feasible tilings whose cube work per element copied to
    L0 (:func:`sgemm_cube.tuning.model.l0_intensity`) is at least ``min_l0_intensity``
    of the best one's (the rest lose on MTE1 and B traffic; 0 keeps all).
    Each is first screened by an estimate of its whole-product time: the
    GEMM timed on a short version of the problem (one block row per core,
    one K group) and scaled by the rounds of block rows core 0 runs (the
    last round's idle cores count) and by the K blocks, plus the other
    kernels on the whole product (:func:`_screen_seconds`).  The ``screen``
    best of those are then timed on the whole product and sorted by
    predicted TFLOP/s (to 0.1; ties go to the larger block: fewer
    instructions).  The roofline's prediction
    (:func:`sgemm_cube.tuning.model.predict`) is reported beside each row.
    Takes 0.3-1.5 s for one product (``progress``: a bar on stderr after a
    second).  At the shapes ``tests/tuning/test_pipeline_model.py`` checks,
    the screen's first row is the one timing every candidate on the whole
    product (``screen`` at least the number of candidates; a few seconds)
    finds, e.g. (256, 64, 144, 30) at 49.8 TFLOP/s at 910A 8192^3, paper's
    design, which the screen by the short problem's own TFLOP/s (blind to
    the last round's idle cores) missed for (176, 80, 192, 35) at 43.7.
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
    with tqdm(total=len(tilings) + min(screen, len(tilings)), desc=f"pipeline model, {p.key}", unit="tiling",
              disable=not progress, delay=_PROGRESS_DELAY_S) as bar:
        estimate = []
        for t in tilings:  # one round of block rows, one K group, scaled to the whole product
            estimate.append(_screen_seconds(p, design, batch, m, n, k, t))
            bar.update()
        order = np.argsort(np.asarray(estimate), kind="stable")[:screen]
        chosen = [tilings[i] for i in order]
        rows = []
        roof = _roofline(p, design, m, n, k, chosen)
        for i, t in enumerate(chosen):
            pr = predict(p, m, n, k, t, design=design, batch=batch)
            rows.append(Ranked(pr.tiling, pr.tflops, pr.seconds, pr.busy, float(roof.tflops_double[i]),
                               float(roof.traffic_bytes[i])))
            bar.update()
    rows.sort(key=lambda r: (-round(r.tflops, 1), -(r.tiling.bm * r.tiling.bk * r.tiling.bn)))
    return rows if top is None else rows[:top]


def sweep(profile: Profile | str, m: int, n: int, k: int, *, design: Design, tilings=None,
          progress: bool = False) -> list[tuple[ns.Tiling, float]]:
    """Predicted TFLOP/s of every tiling (the paper's Fig. 10 sweep; ``progress``: a bar after a second)."""
    from tqdm.auto import tqdm

    p = get_profile(profile)
    tilings = feasible_tilings(p, design=design, k=k) if tilings is None else tilings
    return [(t, predict(p, m, n, k, t, design=design).tflops)
            for t in tqdm(tilings, desc=f"{design.kind} {design.buffering}", unit="tiling", disable=not progress,
                          delay=_PROGRESS_DELAY_S)]
