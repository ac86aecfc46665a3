"""Python model of the AscendC GEMM kernel's schedule, on the NumPy arithmetic model.

This module mirrors ``ascendc_kernels/include/sgemm_cube/schedule/schedule.hpp``
function for function (same names, same integer arithmetic): the buffer plan,
the geometry, and the order in which every core visits its steps.  A test
compiles the C++ header's driver and checks that both produce the same step
sequences; another runs :func:`simulate` and compares it with
:mod:`sgemm_cube.cpu_fallback` bit for bit.

What the kernel computes, and how it relates to :mod:`sgemm_cube.cpu_fallback`
------------------------------------------------------------------
Every core owns block rows of C.  For a block row it stages ``n_fused`` K
blocks of ``A_hi`` and ``A_lo`` in L1 (a *group*), then streams the B tiles of
each column block through two ping-pong L1 buffers; every product term
(``A_hi B_hi``, ``A_lo B_hi``, ``A_hi B_lo`` and optionally ``A_lo B_lo``)
accumulates in its own FP32 accumulator in L0C across the group's K blocks.
With ``Tiling.per_term`` the terms run one after another instead, each pass
holding one plane of A and of B and one accumulator (the paper's design:
larger blocks fit); each term's arithmetic is the same.
At the end of a group the accumulators leave L0C: group 0 stores them to one
FP32 buffer per term in GM, every later group *adds* its partial sum there
(FP32 round-to-nearest; toward zero under ``Arithmetic(atomic="trunc")``, which
:func:`simulate` takes as ``arithmetic=``).  A last vector pass combines the terms termwise
(on 910A with one K group and fused terms, the GEMM's epilogue does, in the
same order)::

    corr = fl(fl(LL * 2**-sb + LH) + HL)        (corr = fl(LH + HL) without LL)
    C    = fl(fl(corr * 2**-sb) + HH)

So with ``G = ceil(ceil(K / bk) / n_fused)`` groups, each term is::

    T = fl(...fl(fl(P_0 + P_1) + P_2)... + P_{G-1})

where ``P_g = cpu_fallback.accumulate_product`` over the K range of group ``g``
(K cut at multiples of ``n_fused * bk``): a two-level accumulation, the cube's
partial sum over one group added into a second FP32 accumulator.  The tilings
the backend runs (:func:`fit_tiling`, the tuner's candidates) make every group
exactly ``cpu_fallback.K_GROUP`` = 1,024 elements long (``bk`` divides it,
``n_fused = 1024 / bk``, one group when K is shorter), so the error stays flat
in K and the product is ``cpu_fallback.emulated_matmul(a, b, order="termwise")``
with its default ``k_group``, bit for bit, under every arithmetic.  Another
``n_fused`` (an explicit ``tiling=``) gives :func:`grouped_reference` with its
own group length.

Non-finite inputs are zeroed by the split (the backend contract); the model
does the same.
"""
from __future__ import annotations

import enum
from typing import Iterator, NamedTuple

import numpy as np

from sgemm_cube.cpu_fallback.accumulate import K_GROUP  # the two-level accumulation's K group

__all__ = [
    "Capacity",
    "Tiling",
    "BufferPlan",
    "Geometry",
    "Step",
    "Status",
    "TilingError",
    "KERNEL_CUBE",
    "K_GROUP",
    "capacity_from_profile",
    "chip_arithmetic",
    "make_buffer_plan",
    "l0c_offset",
    "max_n_fused",
    "make_geometry",
    "choose_n_split",
    "item_coords",
    "split_columns",
    "group_k_blocks",
    "group_n_fused",
    "core_steps",
    "pass_term",
    "a_plane",
    "b_plane",
    "term_a_pos",
    "term_b_pos",
    "Sync",
    "Event",
    "ProgramOp",
    "core_program",
    "fit_tiling",
    "simulate",
    "grouped_reference",
]

KERNEL_CUBE = 16        #: fractal edge (cube alignment)
_FRACTAL = 256          # elements of one 16 x 16 fractal
_HALF, _FLOAT = 2, 4    # bytes
_PARTS = 2              # hi and lo of each operand
_B_SLOTS = 2            # ping-pong B buffers
_MAX_REPEAT = 255       # LoadData2DParams.repeatTimes
_MAX_MMAD_DIM = 4095    # MmadParams m, n, k
SPLIT_TILE_COLS = 256   #: columns of one 16-row split tile (``schedule::kSplitTileCols``)
SPLIT_STAGES = 2        #: split tiles in UB at once (``schedule::kSplitStages``)
COMBINE_TILE = 8192     #: floats of one combine tile (``schedule::kCombineTile``)
STATS_TILE_COLS = 256   #: columns of one line-statistics tile (``schedule::kStatsTileCols``)
STATS_STAGES = 3        #: UB stages of the line-statistics input tile (``schedule::kStatsStages``)
META_CHUNK = 1024       #: lines per chunk of the line-meta kernel (``schedule::kMetaChunk``)
UNSCALE_TILE = 2048     #: the fix-up kernels' column chunk (``schedule::kUnscaleTile``)
UNSCALE_UNIT = 3840     #: elements of one unit of the unscale, alone or in the combine (``schedule::kUnscaleUnit``)
TERM_HIHI, TERM_LOHI, TERM_HILO, TERM_LOLO = range(4)


def _term_a_part(term: int) -> int:
    return 1 if term in (TERM_LOHI, TERM_LOLO) else 0


def _term_b_part(term: int) -> int:
    return 1 if term in (TERM_HILO, TERM_LOLO) else 0


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _block_extent(total: int, block: int, index: int) -> int:
    return min(block, total - index * block)


class Status(enum.IntEnum):
    """Mirror of ``schedule::Status`` (same values)."""

    OK = 0
    EMPTY = 1
    NOT_ALIGNED = 2
    BAD_TERMS = 3
    NO_CORES = 4
    TOO_LARGE = 5
    MMAD_DIM = 6
    REPEAT = 7
    L1 = 8
    L0A = 9
    L0B = 10
    L0C = 11
    UB = 12
    BAD_MODE = 13


class TilingError(ValueError):
    """A tiling the kernel cannot run; ``status`` says which limit it breaks."""

    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status = status


class Capacity(NamedTuple):
    """Buffer capacities of one AI core, bytes (``arch::Capacity``)."""

    l1: int
    l0a: int
    l0b: int
    l0c: int
    ub: int
    ub_reserved: int
    c_through_ub: bool


class Tiling(NamedTuple):
    """Block sizes (multiples of 16), resident A blocks per group, and the pass structure (``schedule::Tiling``).

    ``per_term`` False: all product terms in one pass (hi and lo planes of each
    block together, one accumulator per term); True: one pass per term, one
    plane and one accumulator resident (the paper's Algorithm 1).
    ``l0c_stages`` 1 or 2: accumulator sets in L0C; with 2 a core's write-backs
    alternate between the sets, so the cube fills one while the other drains
    (both sets must fit L0C: smaller blocks).  The arithmetic is the same.
    """

    bm: int
    bk: int
    bn: int
    n_fused: int
    per_term: bool = False
    l0c_stages: int = 1


class BufferPlan(NamedTuple):
    """Byte layout of one core's buffers (``schedule::BufferPlan``)."""

    a_tile: int
    b_tile: int
    c_tile: int
    n_fused: int
    planes: int
    l1_b: int
    l1_bytes: int
    l0_stages: int
    l0a_bytes: int
    l0b_bytes: int
    terms: int
    accumulators: int  #: accumulators of one L0C stage
    l0c_bytes: int     #: l0c_stages x accumulators x c_tile
    ub_tiles: int
    ub_bytes: int
    l0c_stages: int = 1


class Geometry(NamedTuple):
    """Derived sizes of one launch (``schedule::Geometry``)."""

    batch: int
    m: int
    n: int
    k: int
    mp: int
    np: int
    kp: int
    bm: int
    bk: int
    bn: int
    mb: int
    nb: int
    kb: int
    n_fused: int
    groups: int
    n_split: int
    items: int
    cores: int
    terms: int
    passes: int
    combine_in_epilogue: bool
    plan: BufferPlan


class Step(NamedTuple):
    """One K step of one core (``schedule::Step``)."""

    index: int
    pass_index: int
    item: int
    batch: int
    row_block: int
    col_block: int
    group: int
    k_in_group: int
    k_block: int
    m_act: int
    n_act: int
    k_act: int
    b_slot: int
    l0_stage: int
    l0c_stage: int  #: L0C accumulator set: this core's write-back count % l0c_stages
    group_start: bool
    group_end: bool
    first_k: bool
    last_k: bool
    first_group: bool
    last_group: bool


_STATUS_MESSAGES = {
    Status.NOT_ALIGNED: "bm, bk, bn must be positive multiples of 16 and n_fused >= 1",
    Status.BAD_TERMS: "terms must be 3 or 4",
    Status.MMAD_DIM: "block edge above the Mmad limit of 4095",
    Status.REPEAT: "tile above LoadData's 255 fractals",
    Status.L1: "resident A group and two B buffers exceed L1",
    Status.L0A: "A tiles (both planes when fused) exceed L0A",
    Status.L0B: "B tiles (both planes when fused) exceed L0B",
    Status.L0C: "the FP32 accumulators (one per term when fused, per L0C stage) exceed L0C",
    Status.UB: "L0C -> UB staging exceeds UB",
    Status.BAD_MODE: "per_term must be 0 or 1 and l0c_stages 1 or 2",
    Status.EMPTY: "empty problem",
    Status.NO_CORES: "no cores",
    Status.TOO_LARGE: "matrix too large for 32-bit padded sizes",
}


def _fail(status: Status, what: str) -> TilingError:
    return TilingError(status, f"{what}: {_STATUS_MESSAGES[status]}")


def capacity_from_profile(profile) -> Capacity:
    """Capacities of a chip: its key (``"910b"``) or a :class:`sgemm_cube.tuning.hardware.Profile`.

    ``tuning/profiles/ascend.json`` is the one table.  A Profile is read by its
    attributes (the tuner, user profiles included); a key is read from the chip's
    tiling table (:func:`.npu_tilings.capacity`), which the tuner generates from that
    profile, so the runtime never imports the tuner.  The C++ ``arch.hpp``
    repeats the numbers and a test keeps the three equal.
    """
    if isinstance(profile, str):
        from .npu_tilings import capacity

        return Capacity(**capacity(profile))
    p = profile
    through_ub = "ub" in p.c_path
    return Capacity(p.l1_bytes, p.l0a_bytes, p.l0b_bytes, p.l0c_bytes, p.ub_bytes,
                    p.blocking.c_reserved_bytes if through_ub else 0, through_ub)


def max_n_fused(cap: Capacity, bm: int, bk: int, bn: int, planes: int = _PARTS) -> int:
    """Eq. 8 with ``planes`` planes of each operand resident (``schedule::max_n_fused``)."""
    b_bytes = _B_SLOTS * planes * bk * bn * _HALF
    a_tiles = planes * bm * bk * _HALF
    if a_tiles == 0 or b_bytes >= cap.l1:
        return 0
    return (cap.l1 - b_bytes) // a_tiles


def buffer_plan_status(cap: Capacity, bm: int, bk: int, bn: int, n_fused: int, terms: int,
                       per_term: bool = False, l0c_stages: int = 1) -> tuple[Status, BufferPlan | None]:
    """``schedule::make_buffer_plan``: the status and, when it is OK, the plan."""
    if bm <= 0 or bk <= 0 or bn <= 0 or bm % KERNEL_CUBE or bk % KERNEL_CUBE or bn % KERNEL_CUBE or n_fused < 1:
        return Status.NOT_ALIGNED, None
    if terms not in (3, 4):
        return Status.BAD_TERMS, None
    if int(per_term) not in (0, 1) or l0c_stages not in (1, 2):
        return Status.BAD_MODE, None
    if max(bm, bk, bn) > _MAX_MMAD_DIM:
        return Status.MMAD_DIM, None
    if bm * bk // _FRACTAL > _MAX_REPEAT or bk * bn // _FRACTAL > _MAX_REPEAT:
        return Status.REPEAT, None
    planes = 1 if per_term else _PARTS
    a_tile, b_tile, c_tile = bm * bk * _HALF, bk * bn * _HALF, bm * bn * _FLOAT
    l1_a = planes * n_fused * a_tile
    l1 = l1_a + _B_SLOTS * planes * b_tile
    if l1 > cap.l1:
        return Status.L1, None
    stages = 2 if (2 * planes * a_tile <= cap.l0a and 2 * planes * b_tile <= cap.l0b) else 1
    l0a, l0b = stages * planes * a_tile, stages * planes * b_tile
    if l0a > cap.l0a:
        return Status.L0A, None
    if l0b > cap.l0b:
        return Status.L0B, None
    accumulators = 1 if per_term else terms
    if l0c_stages * accumulators * c_tile > cap.l0c:
        return Status.L0C, None
    # 910A: the NZ copy and two ND tiles, or one ND tile when only that fits.
    room = cap.ub - cap.ub_reserved
    ub_tiles = 0 if not cap.c_through_ub else (3 if 3 * c_tile <= room else 2)
    if ub_tiles * c_tile > room:
        return Status.UB, None
    return Status.OK, BufferPlan(a_tile, b_tile, c_tile, n_fused, planes, l1_a, l1, stages, l0a, l0b, terms,
                                 accumulators, l0c_stages * accumulators * c_tile, ub_tiles, ub_tiles * c_tile,
                                 l0c_stages)


def l0c_offset(plan: BufferPlan, stage: int, acc: int) -> int:
    """L0C byte offset of accumulator ``acc`` of L0C stage ``stage`` (``schedule::l0c_offset``)."""
    return (stage * plan.accumulators + acc) * plan.c_tile


def make_buffer_plan(cap: Capacity, bm: int, bk: int, bn: int, n_fused: int, terms: int,
                     per_term: bool = False, l0c_stages: int = 1) -> BufferPlan:
    """Buffer plan of a tiling; raises :class:`TilingError` when it does not fit."""
    status, plan = buffer_plan_status(cap, bm, bk, bn, n_fused, terms, per_term, l0c_stages)
    if status != Status.OK:
        mode = (", one pass per term" if per_term else "") + (", two L0C stages" if l0c_stages == 2 else "")
        raise _fail(status, f"tiling {bm}x{bk}x{bn} n_fused={n_fused} with {terms} terms{mode}")
    return plan


def choose_n_split(rows: int, nb: int, cores: int) -> int:
    """Column ranges per block row (``schedule::choose_n_split``)."""
    return 1 if rows >= cores else min(nb, _ceil_div(cores, rows))


def make_geometry(batch: int, m: int, n: int, k: int, tiling: Tiling, cores: int, terms: int,
                  cap: Capacity) -> Geometry:
    """``schedule::make_geometry``; raises :class:`TilingError` on any failure."""
    if min(batch, m, n, k) <= 0:
        raise _fail(Status.EMPTY, f"problem {batch}x{m}x{n}x{k}")
    if cores <= 0:
        raise _fail(Status.NO_CORES, f"{cores} cores")
    if max(m, n, k) > 0xFFFF0000:
        raise _fail(Status.TOO_LARGE, f"problem {m}x{n}x{k}")
    tiling = Tiling(*tiling)
    bm, bk, bn, nf = (int(x) for x in tiling[:4])
    per_term = int(tiling.per_term)
    l0c_stages = int(tiling.l0c_stages)
    if bm <= 0 or bk <= 0 or bn <= 0 or bm % KERNEL_CUBE or bk % KERNEL_CUBE or bn % KERNEL_CUBE or nf < 1:
        raise _fail(Status.NOT_ALIGNED, f"tiling {tuple(tiling)}")
    if per_term not in (0, 1) or l0c_stages not in (1, 2):
        raise _fail(Status.BAD_MODE, f"tiling {tuple(tiling)}")
    mp, np_, kp = (_ceil_div(x, KERNEL_CUBE) * KERNEL_CUBE for x in (m, n, k))
    mb, nb, kb = _ceil_div(mp, bm), _ceil_div(np_, bn), _ceil_div(kp, bk)
    n_fused = min(nf, kb)
    groups = _ceil_div(kb, n_fused)
    rows = batch * mb
    if rows * nb > 0xFFFFFFFF:
        raise _fail(Status.TOO_LARGE, f"{rows * nb} C blocks")
    n_split = choose_n_split(rows, nb, cores)
    items = rows * n_split
    plan = make_buffer_plan(cap, bm, bk, bn, n_fused, terms, bool(per_term), l0c_stages)
    passes = terms if per_term else 1
    # One K group: every accumulator is final at the write-back, where C already passes through UB (910A).
    in_epilogue = cap.c_through_ub and groups == 1 and passes == 1 and plan.ub_tiles == 3
    return Geometry(batch, m, n, k, mp, np_, kp, bm, bk, bn, mb, nb, kb, n_fused, groups, n_split, items,
                    min(cores, items), terms, passes, in_epilogue, plan)


def pass_term(g: Geometry, pass_index: int, acc: int) -> int:
    """Term accumulated by accumulator ``acc`` during pass ``pass_index`` (``schedule::pass_term``)."""
    return acc if g.passes == 1 else pass_index


def a_plane(g: Geometry, pass_index: int, pos: int) -> int:
    """Plane (0 hi, 1 lo) of A held at position ``pos`` during a pass (``schedule::a_plane``)."""
    return pos if g.passes == 1 else _term_a_part(pass_index)


def b_plane(g: Geometry, pass_index: int, pos: int) -> int:
    """Plane of B held at position ``pos`` during a pass (``schedule::b_plane``)."""
    return pos if g.passes == 1 else _term_b_part(pass_index)


def term_a_pos(g: Geometry, term: int) -> int:
    """Position in L0A of the A plane a term reads (``schedule::term_a_pos``)."""
    return _term_a_part(term) if g.passes == 1 else 0


def term_b_pos(g: Geometry, term: int) -> int:
    """Position in L0B of the B plane a term reads (``schedule::term_b_pos``)."""
    return _term_b_part(term) if g.passes == 1 else 0


def item_coords(g: Geometry, item: int) -> tuple[int, int, int]:
    """Item -> (batch, block row, column range) (``schedule::item_coords``)."""
    split = item % g.n_split
    row = item // g.n_split
    return row // g.mb, row % g.mb, split


def split_columns(g: Geometry, split: int) -> tuple[int, int]:
    """Column blocks [first, last) of a column range (``schedule::split_columns``)."""
    return split * g.nb // g.n_split, (split + 1) * g.nb // g.n_split


def group_k_blocks(g: Geometry, group: int) -> int:
    """K blocks in a group (``schedule::group_k_blocks``)."""
    return min(g.n_fused, g.kb - group * g.n_fused)


def core_steps(g: Geometry, core: int) -> Iterator[Step]:
    """The steps of one core in execution order (``schedule::CoreSchedule``)."""
    index = 0
    c_block = 0  # write-backs so far: the L0C stage of the next C block
    items = range(core, g.items, g.cores) if core < g.cores else ()
    for pass_index in range(g.passes):
        for item in items:
            batch, row_block, split = item_coords(g, item)
            first_col, last_col = split_columns(g, split)
            m_act = _block_extent(g.mp, g.bm, row_block)
            for group in range(g.groups):
                kcount = group_k_blocks(g, group)
                for col in range(first_col, last_col):
                    for kk in range(kcount):
                        k_block = group * g.n_fused + kk
                        yield Step(index, pass_index, item, batch, row_block, col, group, kk, k_block, m_act,
                                   _block_extent(g.np, g.bn, col), _block_extent(g.kp, g.bk, k_block),
                                   index % _B_SLOTS, index % g.plan.l0_stages, c_block % g.plan.l0c_stages,
                                   kk == 0 and col == first_col, kk + 1 == kcount and col + 1 == last_col,
                                   kk == 0, kk + 1 == kcount, group == 0, group + 1 == g.groups)
                        index += 1
                    c_block += 1


class Sync(enum.IntEnum):
    """Mirror of ``schedule::Sync``: which pipe signals which (SetFlag/WaitFlag)."""

    MTE2_MTE1 = 0  #: GM -> L1 data ready for L1 -> L0
    MTE1_MTE2 = 1  #: L1 buffer read, may be refilled
    MTE1_M = 2     #: L0A/L0B ready for Mmad
    M_MTE1 = 3     #: L0A/L0B read by Mmad, may be refilled
    M_OUT = 4      #: accumulators complete
    OUT_M = 5      #: accumulators drained, Mmad may restart them


class Event:
    """Mirror of ``schedule::Event`` (event ids; each direction has its own space)."""

    B_SLOT0 = 0   #: + slot: B buffers (MTE2_MTE1 / MTE1_MTE2)
    A_GROUP = 2   #: resident A group (MTE2_MTE1 / MTE1_MTE2)
    L0_STAGE0 = 0  #: + stage: L0A/L0B stages (M_MTE1)
    L0_READY = 0  #: MTE1_M
    C_TILE = 0    #: + L0C stage: accumulator sets (M_OUT / OUT_M)


class ProgramOp(NamedTuple):
    """One call ``schedule::run_core`` makes on its visitor.

    ``kind`` is ``"set"`` or ``"wait"`` (then ``sync`` and ``event`` name the
    flag) or a data operation: ``"load_a_group"`` and ``"load_b"`` (MTE2),
    ``"load_l0"`` (MTE1), ``"mmad"`` (M), ``"store_c"`` (the pipe draining
    L0C); then ``step`` is the step it works for.
    """

    kind: str
    sync: Sync | None = None
    event: int = 0
    step: Step | None = None


def _buffer_free_flags(g: Geometry, kind: str, b_slots: int) -> Iterator[ProgramOp]:
    for slot in range(b_slots):
        yield ProgramOp(kind, Sync.MTE1_MTE2, Event.B_SLOT0 + slot)
    yield ProgramOp(kind, Sync.MTE1_MTE2, Event.A_GROUP)
    for stage in range(g.plan.l0_stages):
        yield ProgramOp(kind, Sync.M_MTE1, Event.L0_STAGE0 + stage)
    for c_set in range(g.plan.l0c_stages):
        yield ProgramOp(kind, Sync.OUT_M, Event.C_TILE + c_set)


A_TILE_FREE = 3
"""Event id of the per-tile "A tile read for the last time" flag (MTE1 -> MTE2) of the
``prefetch_a`` variant; not in ``schedule.hpp``."""


def core_program(g: Geometry, core: int, *, b_slots: int = _B_SLOTS, prefetch_a: bool = False) -> Iterator[ProgramOp]:
    """The calls of ``schedule::run_core`` for one core, in program order.

    Data operations and every SetFlag/WaitFlag, exactly as the kernel's
    visitor receives them (a test compares this with the C++ header's
    recording).  :mod:`sgemm_cube.tuning.pipeline` times this program on a model of the
    core's pipes.

    The accumulator sets are the tiling's (``g.plan.l0c_stages``): C block ``c`` of the core uses set
    ``c % l0c_stages`` (``Step.l0c_stage``), each set with its own M -> Out / Out -> M flags.
    The keywords describe kernel changes proposed by that model and *not* in
    ``schedule.hpp`` (the defaults are the header):

    b_slots : 1 or 2
        B buffers in L1; 1 is the paper's single-buffered pipeline (Fig. 6(a)):
        the next B tile loads only once the current one has been copied to L0.
    prefetch_a : bool
        The next group's A tiles load during the current group's last column
        block, tile ``kk`` right after that column's copy of tile ``kk`` to L0
        (its last reader), instead of all at once after the group.  The op
        ``"load_a_tile"`` loads one tile (both parts); its step is the next
        group's first step and ``event`` the tile index.
    """
    steps = core_steps(g, core)
    cur = next(steps, None)
    if cur is None:
        return
    set_, wait = "set", "wait"
    yield from _buffer_free_flags(g, set_, b_slots)
    yield ProgramOp(wait, Sync.MTE1_MTE2, Event.A_GROUP)
    yield ProgramOp("load_a_group", step=cur)
    yield ProgramOp(set_, Sync.MTE2_MTE1, Event.A_GROUP)
    yield ProgramOp(wait, Sync.MTE1_MTE2, Event.B_SLOT0 + cur.b_slot % b_slots)
    yield ProgramOp("load_b", step=cur)
    yield ProgramOp(set_, Sync.MTE2_MTE1, Event.B_SLOT0 + cur.b_slot % b_slots)
    next_group = None  # prefetch_a: first step of the next group, once known
    while True:
        nxt = next(steps, None)
        if nxt is not None:
            # Ping-pong: refill the other B slot while the cube works on this one.
            yield ProgramOp(wait, Sync.MTE1_MTE2, Event.B_SLOT0 + nxt.b_slot % b_slots)
            yield ProgramOp("load_b", step=nxt)
            yield ProgramOp(set_, Sync.MTE2_MTE1, Event.B_SLOT0 + nxt.b_slot % b_slots)
        yield ProgramOp(wait, Sync.M_MTE1, Event.L0_STAGE0 + cur.l0_stage)
        if cur.group_start:
            yield ProgramOp(wait, Sync.MTE2_MTE1, Event.A_GROUP)
        yield ProgramOp(wait, Sync.MTE2_MTE1, Event.B_SLOT0 + cur.b_slot % b_slots)
        yield ProgramOp("load_l0", step=cur)
        yield ProgramOp(set_, Sync.MTE1_MTE2, Event.B_SLOT0 + cur.b_slot % b_slots)
        if prefetch_a and _in_last_column(g, cur):
            if next_group is None:
                next_group = _next_group_start(g, core, cur)
            if next_group is not None:
                # Tile kk of the next group replaces tile kk, read for the last time just now.
                yield ProgramOp(set_, Sync.MTE1_MTE2, A_TILE_FREE)
                yield ProgramOp(wait, Sync.MTE1_MTE2, A_TILE_FREE)
                tiles = [cur.k_in_group]
                if cur.last_k:  # tiles the current group did not have are free already
                    tiles += range(cur.k_in_group + 1, group_k_blocks(g, next_group.group))
                for kk in tiles:
                    if kk < group_k_blocks(g, next_group.group):
                        yield ProgramOp("load_a_tile", event=kk, step=next_group)
                if cur.last_k:
                    yield ProgramOp(set_, Sync.MTE2_MTE1, Event.A_GROUP)
        elif cur.group_end:
            yield ProgramOp(set_, Sync.MTE1_MTE2, Event.A_GROUP)
        yield ProgramOp(set_, Sync.MTE1_M, Event.L0_READY)
        yield ProgramOp(wait, Sync.MTE1_M, Event.L0_READY)
        c_set = Event.C_TILE + cur.l0c_stage
        if cur.first_k:
            yield ProgramOp(wait, Sync.OUT_M, c_set)
        yield ProgramOp("mmad", step=cur)
        yield ProgramOp(set_, Sync.M_MTE1, Event.L0_STAGE0 + cur.l0_stage)
        if cur.last_k:
            yield ProgramOp(set_, Sync.M_OUT, c_set)
            yield ProgramOp(wait, Sync.M_OUT, c_set)
            yield ProgramOp("store_c", step=cur)
            yield ProgramOp(set_, Sync.OUT_M, c_set)
        if nxt is None:
            break
        if nxt.group_start:
            if prefetch_a and next_group is not None:
                next_group = None  # already loaded tile by tile
            else:
                # The next group's A tiles replace this group's once MTE1 is done with them.
                yield ProgramOp(wait, Sync.MTE1_MTE2, Event.A_GROUP)
                yield ProgramOp("load_a_group", step=nxt)
                yield ProgramOp(set_, Sync.MTE2_MTE1, Event.A_GROUP)
        cur = nxt
    if prefetch_a:
        yield ProgramOp(set_, Sync.MTE1_MTE2, Event.A_GROUP)  # the last group, never replaced
    yield from _buffer_free_flags(g, wait, b_slots)


def _in_last_column(g: Geometry, s: Step) -> bool:
    """Whether a step belongs to the last column block its item visits in this group."""
    _, _, split = item_coords(g, s.item)
    return s.col_block + 1 == split_columns(g, split)[1]


def _next_group_start(g: Geometry, core: int, s: Step) -> Step | None:
    """The first step of the group after ``s``'s on this core (None after the last)."""
    pass_index = s.pass_index
    if s.group + 1 < g.groups:
        item, group = s.item, s.group + 1
    else:
        item, group = s.item + g.cores, 0
        if item >= g.items:
            if pass_index + 1 >= g.passes:
                return None
            pass_index, item = pass_index + 1, core
    batch, row_block, split = item_coords(g, item)
    first, _ = split_columns(g, split)
    k_block = group * g.n_fused
    return Step(-1, pass_index, item, batch, row_block, first, group, 0, k_block,
                _block_extent(g.mp, g.bm, row_block),
                _block_extent(g.np, g.bn, first), _block_extent(g.kp, g.bk, k_block), 0, 0, 0,
                True, False, True, False, group == 0, group + 1 == g.groups)


def group_n_fused(k: int, bk: int) -> int | None:
    """``n_fused`` for the two-level accumulation: K groups of exactly ``cpu_fallback.K_GROUP`` elements.

    One group when K (padded to 16) fits in ``K_GROUP``: every K block resident, any ``bk``.  Longer K:
    ``K_GROUP // bk`` blocks per group, so the cube's partial sums cover the same K ranges as
    ``cpu_fallback.emulated_matmul``'s default ``k_group`` (its bit-for-bit mirror); None when ``bk``
    does not divide ``K_GROUP`` (no tiling with that ``bk`` runs such a K).
    """
    kp = _ceil_div(k, KERNEL_CUBE) * KERNEL_CUBE
    if kp <= K_GROUP:
        return _ceil_div(kp, bk)
    return K_GROUP // bk if K_GROUP % bk == 0 else None


def fit_tiling(cap: Capacity, tiling: Tiling | None, *, k: int, terms: int) -> Tiling:
    """A tiling the kernel accepts for the default product, as close to ``tiling`` as possible.

    ``n_fused`` is set by :func:`group_n_fused` (K groups of ``cpu_fallback.K_GROUP`` elements; one
    group for shorter K), with ``bk`` lowered to the next power of two times 16 when it does not divide
    the group.  When the blocks then do not fit (the resident group exceeds L1, or ``tiling`` is None)
    the largest square-ish blocks that do are used, in the tiling's pass mode and L0C stages (fused, one
    stage when None; both stages' accumulators must fit L0C).
    """
    per_term = tiling is not None and bool(Tiling(*tiling).per_term)
    l0c_stages = 1 if tiling is None else int(Tiling(*tiling).l0c_stages)

    def fitted(bm, bk, bn):
        nf = group_n_fused(k, bk)
        if nf is None or buffer_plan_status(cap, bm, bk, bn, nf, terms, per_term, l0c_stages)[0] != Status.OK:
            return None
        return Tiling(bm, bk, bn, nf, per_term, l0c_stages)

    if tiling is not None:
        bm, bk, bn = (int(x) for x in Tiling(*tiling)[:3])
        if group_n_fused(k, bk) is None and bk >= KERNEL_CUBE:  # 16 times the largest power of two below
            bk = KERNEL_CUBE << ((bk // KERNEL_CUBE).bit_length() - 1)
        t = fitted(bm, bk, bn)
        if t is not None:
            return t
    best = None
    for bm in range(256, 0, -KERNEL_CUBE):
        for bn in (bm, bm - KERNEL_CUBE):
            for bk in (64, 32, 16):
                t = fitted(bm, bk, bn) if bn > 0 else None
                if t is None:
                    continue
                key = (min(bm, bn) * max(bm, bn), bk)
                if best is None or key > best[0]:
                    best = (key, t)
    if best is None:
        raise _fail(Status.L1, "no tiling fits this capacity")
    return best[1]


# ----------------------------------------------------------------- numerics

def _as_batched(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise TypeError(f"{name} must be float32, got {x.dtype}")
    if x.ndim not in (2, 3):
        raise ValueError(f"{name} must be 2-D or 3-D, got shape {x.shape}")
    return x[None] if x.ndim == 2 else x


def _split_padded(x: np.ndarray, rows: int, cols: int, sb: int, arithmetic=None) -> tuple[np.ndarray, np.ndarray]:
    """The split kernel: zero non-finite values, zero-pad, split (cpu_fallback's rule)."""
    from sgemm_cube.cpu_fallback import split

    padded = np.zeros((x.shape[0], rows, cols), np.float32)
    padded[:, : x.shape[1], : x.shape[2]] = np.where(np.isfinite(x), x, np.float32(0))
    return split(padded, sb, arithmetic=arithmetic)


def chip_arithmetic(soc: str, arithmetic=None):
    """The :class:`~sgemm_cube.cpu_fallback.arithmetic.Arithmetic` as it acts on ``soc``'s kernels.

    ``cast`` and ``l0c_to_ub`` are the 910A's: its split converts with ``CAST_NONE`` and drains L0C
    through UB.  The 910B's split asks for ``CAST_RINT`` by name (documented) and drains L0C by
    Fixpipe, so on the 910B those two fields are their defaults whatever ``arithmetic`` says.
    """
    from sgemm_cube.cpu_fallback.arithmetic import DEFAULT, as_arithmetic

    ar = as_arithmetic(arithmetic)
    if soc.lower() == "910b":
        ar = ar._replace(cast=DEFAULT.cast, l0c_to_ub=DEFAULT.l0c_to_ub)
    return ar


def _model(accumulate, arithmetic):
    """(Arithmetic, accumulation model, the atomic add) of :func:`simulate` / :func:`grouped_reference`."""
    from sgemm_cube.cpu_fallback.accumulate import add_toward_zero
    from sgemm_cube.cpu_fallback.arithmetic import as_arithmetic

    ar = as_arithmetic(arithmetic)
    atomic_add = add_toward_zero if ar.atomic == "trunc" else np.add
    return ar, accumulate or ar.accumulate, atomic_add


def _combine(t: np.ndarray, sb: int, keep_lo_lo: bool) -> np.ndarray:
    """The combine kernel, in cpu_fallback's termwise order."""
    scale = np.float32(2.0 ** -sb)
    corr = t[TERM_LOHI]
    if keep_lo_lo:
        corr = t[TERM_LOLO] * scale + corr
    corr = corr + t[TERM_HILO]
    return corr * scale + t[TERM_HIHI]


def simulate(a, b, *, sb: int = 12, keep_lo_lo: bool = False, tiling: Tiling, cap: Capacity, cores: int,
             accumulate: str | None = None, arithmetic=None) -> np.ndarray:
    """Run the kernels' loop nest on the NumPy arithmetic model.

    Parameters
    ----------
    a : ndarray, shape (M, K) or (B, M, K), float32
    b : ndarray, shape (K, N) or (B, K, N), float32
    sb : int
        Scaling exponent of the residuals.
    keep_lo_lo : bool
        Also accumulate ``A_lo B_lo`` (a fourth L0C accumulator).
    tiling : Tiling
        Must fit ``cap`` (see :func:`fit_tiling`).
    cap : Capacity
        Buffer capacities of the SoC (:func:`capacity_from_profile`).
    cores : int
        AI cores the GEMM kernel is launched on.
    accumulate : {"cube16", "sequential", "truncate"} or None
        Accumulation model of the cube (:func:`sgemm_cube.cpu_fallback.accumulate_product`);
        None: ``arithmetic``'s.
    arithmetic : Arithmetic, str or None
        The hardware behaviours the docs leave open (:mod:`sgemm_cube.cpu_fallback.arithmetic`):
        the split's conversions, the cube's accumulation (unless ``accumulate`` is given) and the
        FP32 atomic add of later K groups (``atomic``: to nearest or toward zero); taken as given: pass
        :func:`chip_arithmetic` of the chip (the 910B's split is not open to ``cast``).

    Returns
    -------
    ndarray, float32, shape (M, N) or (B, M, N) like the inputs
        Bit-identical to :func:`sgemm_cube.cpu_fallback.emulated_matmul` (termwise, same
        ``arithmetic``) when the geometry has one K group, to :func:`grouped_reference` always.
    """
    from sgemm_cube.cpu_fallback import accumulate_product

    ar, accumulate, atomic_add = _model(accumulate, arithmetic)

    a3, b3 = _as_batched(a, "a"), _as_batched(b, "b")
    if a3.shape[0] != b3.shape[0] or a3.shape[2] != b3.shape[1]:
        raise ValueError(f"shapes {np.shape(a)} and {np.shape(b)} do not multiply")
    batch, m, k = a3.shape
    n = b3.shape[2]
    terms = 4 if keep_lo_lo else 3
    g = make_geometry(batch, m, n, k, tiling, cores, terms, cap)
    a_parts = _split_padded(a3, g.mp, g.kp, sb, ar)
    b_parts = _split_padded(b3, g.kp, g.np, sb, ar)
    term_buf = np.zeros((terms, batch, g.mp, g.np), np.float32)  # GM: one FP32 buffer per term
    for core in range(g.cores):
        # the L0C accumulators, per L0C stage
        stages: list[list[np.ndarray | None]] = [[None] * g.plan.accumulators for _ in range(g.plan.l0c_stages)]
        for s in core_steps(g, core):
            acc = stages[s.l0c_stage]
            rows = slice(s.row_block * g.bm, s.row_block * g.bm + s.m_act)
            cols = slice(s.col_block * g.bn, s.col_block * g.bn + s.n_act)
            ks = slice(s.k_block * g.bk, s.k_block * g.bk + s.k_act)
            for i in range(g.plan.accumulators):
                t = pass_term(g, s.pass_index, i)
                acc[i] = accumulate_product(a_parts[_term_a_part(t)][s.batch, rows, ks],
                                            b_parts[_term_b_part(t)][s.batch, ks, cols],
                                            accumulate=accumulate, acc=None if s.first_k else acc[i])
            if s.last_k:  # write-back: store for group 0, FP32 atomic add for later groups
                for i in range(g.plan.accumulators):
                    target = term_buf[pass_term(g, s.pass_index, i), s.batch, rows, cols]
                    if s.first_group:
                        target[...] = acc[i]
                    else:
                        target[...] = atomic_add(target, acc[i])
    # The combine kernel, or the GEMM's epilogue in the same order (combine_in_epilogue).
    c = _combine(term_buf, sb, keep_lo_lo)[:, :m, :n]
    return c[0] if np.ndim(a) == 2 else c


def grouped_reference(a, b, *, sb: int = 12, keep_lo_lo: bool = False, group_k: int,
                      accumulate: str | None = None, arithmetic=None) -> np.ndarray:
    """The kernel's arithmetic in closed form, without any blocking.

    Each term is accumulated with :func:`sgemm_cube.cpu_fallback.accumulate_product` over
    consecutive K ranges of ``group_k`` elements (``n_fused * bk``), the range
    results are summed in FP32 in K order, and the terms are combined
    termwise: ``cpu_fallback.emulated_matmul(a, b, order="termwise", k_group=group_k)`` with
    non-finite inputs as 0.

    Parameters
    ----------
    a : ndarray, shape (M, K), float32
    b : ndarray, shape (K, N), float32
    group_k : int
        Positive multiple of 16.
    accumulate, arithmetic
        As :func:`simulate` takes them (the range results are added with the arithmetic's atomic add).
    """
    from sgemm_cube.cpu_fallback import emulated_matmul

    if group_k <= 0 or group_k % KERNEL_CUBE:
        raise ValueError(f"group_k must be a positive multiple of 16, got {group_k}")
    ar, accumulate, _ = _model(accumulate, arithmetic)
    a = np.where(np.isfinite(a), a, np.float32(0)).astype(np.float32)
    b = np.where(np.isfinite(b), b, np.float32(0)).astype(np.float32)
    # cpu_fallback's termwise product in two levels is this closed form (its K groups added with the
    # arithmetic's atomic add); the combine is the kernel's order (_combine), the same operations.
    return emulated_matmul(a, b, sb=sb, keep_lo_lo=keep_lo_lo, arithmetic=ar._replace(accumulate=accumulate),
                           k_group=group_k)
