// Block scheduling and index arithmetic of the SGEMM-cube kernels.
//
// Plain C++17 with no AscendC types: the device kernels, the host launcher
// and the g++ tests (ascendc_kernels/tests/test_schedule.cpp) all include it,
// and sgemm_cube/backends/npu_schedule.py mirrors it line for line (a test
// compares the two step sequences).  Everything that decides *which* data a
// core touches and *where* it goes lives here; kernel/block/tile only turn
// these numbers into AscendC calls.
//
// The GEMM loop nest (SGEMM-cube Algorithm 1).  Two ways to run the three or
// four product terms, chosen by the tiling (`Tiling::per_term`):
//   fused     one pass; hi and lo planes of each block travel together, so
//             every staged tile serves several Mmads, each term into its own
//             FP32 accumulator in L0C (3-4 accumulators: smaller blocks);
//   per-term  the paper's design: one pass per term, one plane of A and of B
//             and one accumulator resident (larger blocks fit, e.g. the
//             paper's (176, 64, 176, 44) on 910A; operands staged once per term).
//
//   for pass p in passes                          # 1 (fused) or one per term
//   for item w = core, core + cores, ...          # (batch, block row i, column range s)
//     for group g of n_fused K blocks             # A_hi/A_lo blocks i x [g] staged in L1 once
//       for column block j in range s
//         for K block kk in group g               # B_hi/B_lo blocks ping-pong in two L1 slots
//           L1 -> L0A/L0B; Mmad every term into its own FP32 accumulator in L0C
//         write the accumulators of C block (i, j): group 0 stores, later groups
//         add to what is in GM (FP32 round-to-nearest atomic add); with one
//         K group, a fused pass and C through UB (910A), the epilogue
//         combines the terms in UB and writes C itself (no combine kernel)
//
// L0C stages (`Tiling::l0c_stages`, 1 or 2): with 2, L0C holds two sets of
// accumulators; the write-backs of one core alternate between them (write-back
// c uses set c % 2, `Step::l0c_stage`), each set with its own M -> Out and
// Out -> M flags, so the cube starts the next C block while the previous one
// drains.  The arithmetic is the same: each write-back's accumulators start from
// zero and hold one (C block, K group) partial sum either way.
//
// Operands live in GM in the "Zz" fractal layout written by the split kernel:
// a padded R x C matrix is cut into 16x16 fractals stored row of fractals by
// row of fractals, each fractal row-major, so element (r, c) sits at
//   (r / 16) * (C * 16) + (c / 16) * 256 + (r % 16) * 16 + c % 16.
// A block of whole fractals is then "rows/16 runs of (cols * 32) bytes", one
// strided DataCopy, and L1 -> L0 is a plain fractal copy (B transposed per
// fractal on the way, giving the Zn layout the cube reads).
#ifndef SGEMM_CUBE_SCHEDULE_SCHEDULE_HPP
#define SGEMM_CUBE_SCHEDULE_SCHEDULE_HPP

#include <cstdint>

#include "sgemm_cube/arch/arch.hpp"
#include "sgemm_cube/detail/macros.hpp"

namespace sgemm_cube {
namespace schedule {

// ---------------------------------------------------------------- constants
constexpr uint32_t kCube = 16;            ///< fractal edge (cube alignment of Eq. 10)
constexpr uint32_t kFractalElems = 256;   ///< elements of one 16x16 fractal
constexpr uint32_t kHalfBytes = 2;
constexpr uint32_t kFloatBytes = 4;
constexpr uint32_t kBlockBytes = 32;      ///< DataCopy length/gap unit
constexpr uint32_t kParts = 2;            ///< hi and lo part (plane) of each operand
constexpr uint32_t kBSlots = 2;           ///< ping-pong B buffers in L1
constexpr uint32_t kMaxGap = 65535;       ///< DataCopyParams::srcStride/dstStride (blocks)
constexpr uint32_t kMaxBlockCount = 4095; ///< DataCopyParams::blockCount
constexpr uint32_t kMaxRepeat = 255;      ///< LoadData2DParams::repeatTimes (fractals)
constexpr uint32_t kMaxMmadDim = 4095;    ///< MmadParams m, n, k
constexpr uint32_t kMaxTerms = 4;
constexpr uint32_t kSplitTileCols = 256;  ///< columns of one 16-row split tile (two in UB at once)
constexpr uint32_t kSplitStages = 2;      ///< split tiles in UB at once (load, compute and store overlap)
constexpr uint32_t kCombineTile = 8192;   ///< floats of one combine tile

/// Product terms; each has its own FP32 accumulator (termwise order).
enum Term : uint32_t { kHiHi = 0, kLoHi = 1, kHiLo = 2, kLoLo = 3 };

/// Which part (0 = hi, 1 = lo) of A a term reads.
SGEMM_CUBE_HOST_DEVICE uint32_t term_a_part(uint32_t term) { return (term == kLoHi || term == kLoLo) ? 1u : 0u; }
/// Which part (0 = hi, 1 = lo) of B a term reads.
SGEMM_CUBE_HOST_DEVICE uint32_t term_b_part(uint32_t term) { return (term == kHiLo || term == kLoLo) ? 1u : 0u; }

SGEMM_CUBE_HOST_DEVICE uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }
SGEMM_CUBE_HOST_DEVICE uint32_t round_up(uint32_t a, uint32_t b) { return ceil_div(a, b) * b; }
SGEMM_CUBE_HOST_DEVICE uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }
SGEMM_CUBE_HOST_DEVICE uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }
/// Extent of block `index` of size `block` in a dimension of length `total`.
SGEMM_CUBE_HOST_DEVICE uint32_t block_extent(uint32_t total, uint32_t block, uint32_t index)
{
    return min_u32(block, total - index * block);
}

// ------------------------------------------------------------ tiling / plan
/// Block sizes chosen by the tuner (multiples of 16) and the number of K
/// blocks of A kept resident in L1 per group (SGEMM-cube Eq. 8).
struct Tiling {
    uint32_t bm;
    uint32_t bk;
    uint32_t bn;
    uint32_t n_fused;
    uint32_t per_term = 0;  ///< 1: one pass per product term (the paper's design); 0: all terms in one pass
    uint32_t l0c_stages = 1;  ///< accumulator sets in L0C: 2 overlaps a C block's write-back with the next one's Mmads
};

enum class Status : uint32_t {
    kOk = 0,
    kEmpty,       ///< a dimension is 0: nothing to launch
    kNotAligned,  ///< bm/bk/bn not positive multiples of 16, or n_fused == 0
    kBadTerms,    ///< terms not 3 or 4
    kNoCores,     ///< zero cores
    kTooLarge,    ///< padded sizes overflow 32 bits
    kMmadDim,     ///< a block edge above the Mmad limit (4095)
    kRepeat,      ///< a tile above LoadData's 255 fractals
    kL1,          ///< resident A group + two B buffers exceed L1
    kL0A,
    kL0B,
    kL0C,         ///< one FP32 accumulator per term exceeds L0C
    kUb,          ///< 910A epilogue staging exceeds UB
    kBadMode,     ///< per_term not 0 or 1, or l0c_stages not 1 or 2
};

/// Host only (error messages of the launcher and the tests).
inline const char* status_message(Status s)
{
    switch (s) {
        case Status::kOk: return "ok";
        case Status::kEmpty: return "empty problem";
        case Status::kNotAligned: return "bm, bk, bn must be positive multiples of 16 and n_fused >= 1";
        case Status::kBadTerms: return "terms must be 3 or 4";
        case Status::kNoCores: return "no cores";
        case Status::kTooLarge: return "matrix too large for 32-bit padded sizes";
        case Status::kMmadDim: return "block edge above the Mmad limit of 4095";
        case Status::kRepeat: return "tile above LoadData's 255 fractals";
        case Status::kL1: return "resident A group and two B buffers exceed L1";
        case Status::kL0A: return "A tiles (both planes when fused) exceed L0A";
        case Status::kL0B: return "B tiles (both planes when fused) exceed L0B";
        case Status::kL0C: return "the FP32 accumulators (one per term when fused, per L0C stage) exceed L0C";
        case Status::kUb: return "L0C -> UB staging exceeds UB";
        case Status::kBadMode: return "per_term must be 0 or 1 and l0c_stages 1 or 2";
    }
    return "unknown status";
}

/// Byte layout of every on-chip buffer of one core (offsets from the start
/// of each buffer).  Sizes are for full blocks; tail blocks use a prefix.
struct BufferPlan {
    uint32_t a_tile;     ///< bytes of one bm x bk FP16 tile
    uint32_t b_tile;     ///< bytes of one bk x bn FP16 tile
    uint32_t c_tile;     ///< bytes of one bm x bn FP32 accumulator
    uint32_t n_fused;    ///< A tiles per plane in the resident group
    uint32_t planes;     ///< operand planes resident per block: 2 (hi, lo: fused) or 1 (per-term)
    uint32_t l1_b;       ///< L1 offset of B slot 0 (the A group starts at 0)
    uint32_t l1_bytes;   ///< A group (planes x n_fused tiles) + 2 slots x planes B tiles
    uint32_t l0_stages;  ///< L0A/L0B ping-pong depth (2 when it fits, else 1)
    uint32_t l0a_bytes;
    uint32_t l0b_bytes;
    uint32_t terms;
    uint32_t accumulators;  ///< FP32 accumulators of one L0C stage: one per term (fused) or 1 (per-term)
    uint32_t l0c_bytes;     ///< l0c_stages x accumulators x c_tile
    uint32_t ub_tiles;   ///< 910A epilogue: FP32 tiles staged in UB (NZ copy + ND tiles); 0 on 910B
    uint32_t ub_bytes;
    uint32_t l0c_stages;  ///< accumulator sets in L0C (Tiling::l0c_stages); stage s's accumulators follow stage s-1's
};

/// L1 byte offset of A tile `kk` of the resident group, plane position `pos`
/// (fused: 0 = hi, 1 = lo; per-term: 0, the pass's plane).
SGEMM_CUBE_HOST_DEVICE uint32_t l1_a_offset(const BufferPlan& p, uint32_t pos, uint32_t kk)
{
    return (pos * p.n_fused + kk) * p.a_tile;
}
/// L1 byte offset of B tile (slot, plane position).
SGEMM_CUBE_HOST_DEVICE uint32_t l1_b_offset(const BufferPlan& p, uint32_t slot, uint32_t pos)
{
    return p.l1_b + (slot * p.planes + pos) * p.b_tile;
}
SGEMM_CUBE_HOST_DEVICE uint32_t l0a_offset(const BufferPlan& p, uint32_t stage, uint32_t pos)
{
    return (stage * p.planes + pos) * p.a_tile;
}
SGEMM_CUBE_HOST_DEVICE uint32_t l0b_offset(const BufferPlan& p, uint32_t stage, uint32_t pos)
{
    return (stage * p.planes + pos) * p.b_tile;
}
/// L0C byte offset of accumulator `acc` of L0C stage `stage`.
SGEMM_CUBE_HOST_DEVICE uint32_t l0c_offset(const BufferPlan& p, uint32_t stage, uint32_t acc)
{
    return (stage * p.accumulators + acc) * p.c_tile;
}
/// UB (910A only): FP32 tile `i` of the epilogue's staging (0: the NZ copy of
/// an accumulator; then ND tiles, or with the combine the second NZ tile first).
SGEMM_CUBE_HOST_DEVICE uint32_t ub_tile_offset(const BufferPlan& p, uint32_t i) { return i * p.c_tile; }

/// Largest n_fused whose A group fits in L1 next to the two B buffers:
/// Eq. 8 of the paper with `planes` planes of each operand resident.
SGEMM_CUBE_HOST_DEVICE uint32_t max_n_fused(const arch::Capacity& cap, uint32_t bm, uint32_t bk, uint32_t bn,
                                            uint32_t planes = kParts)
{
    const uint64_t b_bytes = uint64_t(kBSlots) * planes * bk * bn * kHalfBytes;
    const uint64_t a_tiles = uint64_t(planes) * bm * bk * kHalfBytes;
    if (a_tiles == 0 || b_bytes >= cap.l1) {
        return 0;
    }
    return uint32_t((cap.l1 - b_bytes) / a_tiles);
}

/// Buffer plan of a tiling, and whether it fits the capacities.
SGEMM_CUBE_HOST_DEVICE Status make_buffer_plan(const arch::Capacity& cap, uint32_t bm, uint32_t bk, uint32_t bn,
                                 uint32_t n_fused, uint32_t terms, BufferPlan* plan, uint32_t per_term = 0,
                                 uint32_t l0c_stages = 1)
{
    if (bm == 0 || bk == 0 || bn == 0 || bm % kCube || bk % kCube || bn % kCube || n_fused == 0) {
        return Status::kNotAligned;
    }
    if (terms != 3 && terms != 4) {
        return Status::kBadTerms;
    }
    if (per_term > 1 || l0c_stages < 1 || l0c_stages > 2) {
        return Status::kBadMode;
    }
    if (bm > kMaxMmadDim || bk > kMaxMmadDim || bn > kMaxMmadDim) {
        return Status::kMmadDim;
    }
    if (bm * bk / kFractalElems > kMaxRepeat || bk * bn / kFractalElems > kMaxRepeat) {
        return Status::kRepeat;
    }
    BufferPlan p{};
    p.a_tile = bm * bk * kHalfBytes;
    p.b_tile = bk * bn * kHalfBytes;
    p.c_tile = bm * bn * kFloatBytes;
    p.n_fused = n_fused;
    p.planes = per_term ? 1 : kParts;
    const uint64_t l1_a = uint64_t(p.planes) * n_fused * p.a_tile;
    const uint64_t l1 = l1_a + uint64_t(kBSlots) * p.planes * p.b_tile;
    if (l1 > cap.l1) {
        return Status::kL1;
    }
    p.l1_b = uint32_t(l1_a);
    p.l1_bytes = uint32_t(l1);
    // Two L0 stages let MTE1 fill one while the cube reads the other.
    p.l0_stages = (2 * p.planes * p.a_tile <= cap.l0a && 2 * p.planes * p.b_tile <= cap.l0b) ? 2 : 1;
    p.l0a_bytes = p.l0_stages * p.planes * p.a_tile;
    p.l0b_bytes = p.l0_stages * p.planes * p.b_tile;
    if (p.l0a_bytes > cap.l0a) {
        return Status::kL0A;
    }
    if (p.l0b_bytes > cap.l0b) {
        return Status::kL0B;
    }
    p.terms = terms;
    p.accumulators = per_term ? 1 : terms;
    p.l0c_stages = l0c_stages;
    p.l0c_bytes = l0c_stages * p.accumulators * p.c_tile;
    if (p.l0c_bytes > cap.l0c) {
        return Status::kL0C;
    }
    // 910A: the NZ copy and two ND tiles (one ND tile when only that fits:
    // the next reorder then waits for the previous GM write).
    const uint32_t ub_room = cap.ub - cap.ub_reserved;
    p.ub_tiles = !cap.c_through_ub ? 0 : (3 * p.c_tile <= ub_room ? 3 : 2);
    p.ub_bytes = p.ub_tiles * p.c_tile;
    if (p.ub_bytes > ub_room) {
        return Status::kUb;
    }
    *plan = p;
    return Status::kOk;
}

// ---------------------------------------------------------------- geometry
/// Everything derived from the problem size, tiling and core count.
struct Geometry {
    uint32_t batch, m, n, k;  ///< logical sizes
    uint32_t mp, np, kp;      ///< sizes padded to 16 (the split kernel's output)
    uint32_t bm, bk, bn;
    uint32_t mb, nb, kb;      ///< block counts along M, N, K
    uint32_t n_fused;         ///< K blocks per resident A group (tiling's, clamped to kb)
    uint32_t groups;          ///< ceil(kb / n_fused)
    uint32_t n_split;         ///< column-block ranges per block row (parallelism for short M)
    uint32_t items;           ///< batch * mb * n_split work items
    uint32_t cores;           ///< cores that get at least one item
    uint32_t terms;           ///< 3, or 4 with A_lo B_lo
    uint32_t passes;          ///< 1 (fused), or one per term (per-term)
    bool combine_in_epilogue; ///< the GEMM writes C itself (one K group, fused, C through UB with room)
    BufferPlan plan;
};

/// Column ranges per block row: 1 when there are enough block rows to keep
/// every core busy, else enough to give each core an item (at most nb).
SGEMM_CUBE_HOST_DEVICE uint32_t choose_n_split(uint32_t rows, uint32_t nb, uint32_t cores)
{
    if (rows >= cores) {
        return 1;
    }
    return min_u32(nb, ceil_div(cores, rows));
}

SGEMM_CUBE_HOST_DEVICE Status make_geometry(uint32_t batch, uint32_t m, uint32_t n, uint32_t k, const Tiling& t,
                                     uint32_t cores, uint32_t terms, const arch::Capacity& cap, Geometry* out)
{
    if (batch == 0 || m == 0 || n == 0 || k == 0) {
        return Status::kEmpty;
    }
    if (cores == 0) {
        return Status::kNoCores;
    }
    if (m > 0xFFFF0000u || n > 0xFFFF0000u || k > 0xFFFF0000u) {
        return Status::kTooLarge;
    }
    Geometry g{};
    g.batch = batch;
    g.m = m;
    g.n = n;
    g.k = k;
    g.mp = round_up(m, kCube);
    g.np = round_up(n, kCube);
    g.kp = round_up(k, kCube);
    g.bm = t.bm;
    g.bk = t.bk;
    g.bn = t.bn;
    if (t.bm == 0 || t.bk == 0 || t.bn == 0 || t.bm % kCube || t.bk % kCube || t.bn % kCube || t.n_fused == 0) {
        return Status::kNotAligned;
    }
    if (t.per_term > 1 || t.l0c_stages < 1 || t.l0c_stages > 2) {
        return Status::kBadMode;
    }
    g.mb = ceil_div(g.mp, t.bm);
    g.nb = ceil_div(g.np, t.bn);
    g.kb = ceil_div(g.kp, t.bk);
    g.n_fused = min_u32(t.n_fused, g.kb);
    g.groups = ceil_div(g.kb, g.n_fused);
    const uint64_t rows = uint64_t(batch) * g.mb;
    if (rows * g.nb > 0xFFFFFFFFull) {
        return Status::kTooLarge;
    }
    g.n_split = choose_n_split(uint32_t(rows), g.nb, cores);
    g.items = uint32_t(rows) * g.n_split;
    g.cores = min_u32(cores, g.items);
    g.terms = terms;
    g.passes = t.per_term ? terms : 1;
    const Status status = make_buffer_plan(cap, t.bm, t.bk, t.bn, g.n_fused, terms, &g.plan, t.per_term,
                                           t.l0c_stages);
    // With one K group every accumulator holds its term's final value at the
    // write-back, so the terms can be combined there, where C already passes
    // through UB (910A; the 910B cube core has no vector unit).
    g.combine_in_epilogue = cap.c_through_ub && g.groups == 1 && g.passes == 1 && g.plan.ub_tiles == 3;
    if (status == Status::kOk) {
        *out = g;
    }
    return status;
}

/// Term accumulated by accumulator `acc` during pass `pass_index`.
SGEMM_CUBE_HOST_DEVICE uint32_t pass_term(const Geometry& g, uint32_t pass_index, uint32_t acc)
{
    return g.passes == 1 ? acc : pass_index;
}
/// Plane (0 = hi, 1 = lo) of A held at position `pos` of L1/L0 during pass `pass_index`.
SGEMM_CUBE_HOST_DEVICE uint32_t a_plane(const Geometry& g, uint32_t pass_index, uint32_t pos)
{
    return g.passes == 1 ? pos : term_a_part(pass_index);
}
/// Plane of B held at position `pos` during pass `pass_index`.
SGEMM_CUBE_HOST_DEVICE uint32_t b_plane(const Geometry& g, uint32_t pass_index, uint32_t pos)
{
    return g.passes == 1 ? pos : term_b_part(pass_index);
}
/// Position in L0A of the A plane `term` reads (the B plane: term_b_pos).
SGEMM_CUBE_HOST_DEVICE uint32_t term_a_pos(const Geometry& g, uint32_t term)
{
    return g.passes == 1 ? term_a_part(term) : 0u;
}
SGEMM_CUBE_HOST_DEVICE uint32_t term_b_pos(const Geometry& g, uint32_t term)
{
    return g.passes == 1 ? term_b_part(term) : 0u;
}

/// Item -> (batch, block row, column range); items run batch-major, then
/// block row, then column range, and go to cores round-robin.
SGEMM_CUBE_HOST_DEVICE void item_coords(const Geometry& g, uint32_t item, uint32_t* batch, uint32_t* row_block,
                                 uint32_t* split)
{
    *split = item % g.n_split;
    const uint32_t row = item / g.n_split;
    *row_block = row % g.mb;
    *batch = row / g.mb;
}
/// Column blocks [first, last) of column range `split` (balanced partition).
SGEMM_CUBE_HOST_DEVICE void split_columns(const Geometry& g, uint32_t split, uint32_t* first, uint32_t* last)
{
    *first = uint32_t(uint64_t(split) * g.nb / g.n_split);
    *last = uint32_t(uint64_t(split + 1) * g.nb / g.n_split);
}
/// K blocks in group `group` (n_fused except possibly the last group).
SGEMM_CUBE_HOST_DEVICE uint32_t group_k_blocks(const Geometry& g, uint32_t group)
{
    return min_u32(g.n_fused, g.kb - group * g.n_fused);
}

// ----------------------------------------------------------- GM addressing
// Element offsets into the batched, padded GM buffers (64-bit: a batch of
// large matrices passes 2^32 elements).

/// First element of A tile (row block, K block) in the Zz A_hi / A_lo buffers.
SGEMM_CUBE_HOST_DEVICE uint64_t gm_a_tile(const Geometry& g, uint32_t batch, uint32_t row_block, uint32_t k_block)
{
    return uint64_t(batch) * g.mp * g.kp + uint64_t(row_block) * g.bm * g.kp + uint64_t(k_block) * g.bk * kCube;
}
/// First element of B tile (K block, column block) in the Zz B_hi / B_lo buffers.
SGEMM_CUBE_HOST_DEVICE uint64_t gm_b_tile(const Geometry& g, uint32_t batch, uint32_t k_block, uint32_t col_block)
{
    return uint64_t(batch) * g.kp * g.np + uint64_t(k_block) * g.bk * g.np + uint64_t(col_block) * g.bn * kCube;
}
/// First element of C tile (row block, column block) in the row-major
/// (batch, mp, np) FP32 term buffers.
SGEMM_CUBE_HOST_DEVICE uint64_t gm_c_tile(const Geometry& g, uint32_t batch, uint32_t row_block, uint32_t col_block)
{
    return uint64_t(batch) * g.mp * g.np + uint64_t(row_block) * g.bm * g.np + uint64_t(col_block) * g.bn;
}

/// One strided copy of whole fractal rows: `runs` runs of `run_blocks`
/// 32-byte blocks, `gap_blocks` apart in the source, packed in the target.
struct FractalRuns {
    uint32_t runs;
    uint32_t run_blocks;
    uint32_t gap_blocks;
};
/// GM -> L1 copy of an A tile (rows x cols halves of a Zz matrix whose padded
/// width is `kp`): one run per row of fractals.
SGEMM_CUBE_HOST_DEVICE FractalRuns a_tile_runs(const Geometry& g, uint32_t rows, uint32_t cols)
{
    // A row of fractals `cols` wide is cols/16 fractals of 512 bytes = cols blocks.
    return FractalRuns{rows / kCube, cols, g.kp - cols};
}
SGEMM_CUBE_HOST_DEVICE FractalRuns b_tile_runs(const Geometry& g, uint32_t rows, uint32_t cols)
{
    return FractalRuns{rows / kCube, cols, g.np - cols};
}

// --------------------------------------------------------------- core steps
/// One K step of one core: the C block it accumulates and the buffers it uses.
struct Step {
    uint32_t index;       ///< position in this core's step sequence
    uint32_t pass_index;  ///< pass (per-term: the term it computes; fused: 0)
    uint32_t item;
    uint32_t batch;
    uint32_t row_block;
    uint32_t col_block;
    uint32_t group;
    uint32_t k_in_group;  ///< index of the A tile in the resident group
    uint32_t k_block;     ///< global K block
    uint32_t m_act;       ///< rows of this C block (multiple of 16)
    uint32_t n_act;       ///< columns of this C block (multiple of 16)
    uint32_t k_act;       ///< K extent of this step (multiple of 16)
    uint32_t b_slot;      ///< L1 B buffer this step reads (ping-pong: index % 2)
    uint32_t l0_stage;    ///< L0A/L0B stage this step uses
    uint32_t l0c_stage;   ///< L0C accumulator set: this core's write-back count % l0c_stages
    bool group_start;     ///< first step of (item, group): stage the A group first
    bool group_end;       ///< last step of (item, group): the A group is free after it
    bool first_k;         ///< first K step of the C block in this group: Mmad starts from 0
    bool last_k;          ///< last K step of the C block in this group: write it back
    bool first_group;     ///< group 0: the write-back stores; later groups accumulate
    bool last_group;
};

/// The steps of one core, in execution order (an iterator: no storage).
class CoreSchedule {
public:
    SGEMM_CUBE_HOST_DEVICE CoreSchedule(const Geometry& g, uint32_t core)
        : g_(g), core_(core), pass_(0), round_(0), index_(0), c_block_(0)
    {
        start_item();
    }
    SGEMM_CUBE_HOST_DEVICE bool done() const { return done_; }
    SGEMM_CUBE_HOST_DEVICE const Step& step() const { return step_; }
    SGEMM_CUBE_HOST_DEVICE void next()
    {
        ++index_;
        if (step_.last_k) {
            ++c_block_;  // the step just done wrote its accumulators back: the next C block uses the next set
        }
        if (++kk_ < group_k_blocks(g_, group_)) {
            return fill();
        }
        kk_ = 0;
        if (++col_ < col_last_) {
            return fill();
        }
        col_ = col_first_;
        if (++group_ < g_.groups) {
            return fill();
        }
        ++round_;
        start_item();
    }

private:
    SGEMM_CUBE_HOST_DEVICE void start_item()
    {
        uint64_t item = uint64_t(core_) + uint64_t(round_) * g_.cores;
        if (core_ < g_.cores && item >= g_.items && pass_ + 1 < g_.passes) {
            ++pass_;  // the next term's pass revisits this core's items
            round_ = 0;
            item = core_;
        }
        done_ = core_ >= g_.cores || item >= g_.items;
        if (done_) {
            return;
        }
        item_ = uint32_t(item);
        uint32_t split = 0;
        item_coords(g_, item_, &batch_, &row_block_, &split);
        split_columns(g_, split, &col_first_, &col_last_);
        col_ = col_first_;
        group_ = 0;
        kk_ = 0;
        fill();
    }
    SGEMM_CUBE_HOST_DEVICE void fill()
    {
        const uint32_t kcount = group_k_blocks(g_, group_);
        Step& s = step_;
        s.index = index_;
        s.pass_index = pass_;
        s.item = item_;
        s.batch = batch_;
        s.row_block = row_block_;
        s.col_block = col_;
        s.group = group_;
        s.k_in_group = kk_;
        s.k_block = group_ * g_.n_fused + kk_;
        s.m_act = block_extent(g_.mp, g_.bm, row_block_);
        s.n_act = block_extent(g_.np, g_.bn, col_);
        s.k_act = block_extent(g_.kp, g_.bk, s.k_block);
        s.b_slot = index_ % kBSlots;
        s.l0_stage = index_ % g_.plan.l0_stages;
        s.l0c_stage = c_block_ % g_.plan.l0c_stages;
        s.first_k = kk_ == 0;
        s.last_k = kk_ + 1 == kcount;
        s.group_start = s.first_k && col_ == col_first_;
        s.group_end = s.last_k && col_ + 1 == col_last_;
        s.first_group = group_ == 0;
        s.last_group = group_ + 1 == g_.groups;
    }

    Geometry g_;
    uint32_t core_;
    uint32_t pass_;
    uint32_t round_;
    uint32_t index_;
    uint32_t c_block_;  ///< write-backs done so far
    bool done_ = true;
    uint32_t item_ = 0, batch_ = 0, row_block_ = 0, col_first_ = 0, col_last_ = 0;
    uint32_t col_ = 0, group_ = 0, kk_ = 0;
    Step step_{};
};

// ------------------------------------------------------- pipeline program
/// Synchronisation directions between the pipes of one AI core
/// (SetFlag/WaitFlag<HardEvent::...>).  "Out" is the pipe that drains L0C:
/// FIX on 910B (Fixpipe), V on 910A (L0C -> UB copy).
enum class Sync : uint32_t {
    kMte2ToMte1,  ///< GM -> L1 data ready for L1 -> L0
    kMte1ToMte2,  ///< L1 buffer read, may be refilled
    kMte1ToM,     ///< L0A/L0B ready for Mmad
    kMToMte1,     ///< L0A/L0B read by Mmad, may be refilled
    kMToOut,      ///< accumulators complete
    kOutToM,      ///< accumulators drained, Mmad may restart them
};

/// Event ids (each direction has its own id space).
struct Event {
    static constexpr int32_t kBSlot0 = 0;  ///< + slot: B buffers (Mte2ToMte1 / Mte1ToMte2)
    static constexpr int32_t kAGroup = 2;  ///< resident A group (Mte2ToMte1 / Mte1ToMte2)
    static constexpr int32_t kL0Stage0 = 0;  ///< + stage: L0A/L0B stages (MToMte1)
    static constexpr int32_t kL0Ready = 0;   ///< Mte1ToM
    static constexpr int32_t kCTile = 0;     ///< + L0C stage: accumulator sets (MToOut / OutToM)
};

/// The "buffer is free" flags of one core (B slots, A group, L0 stages, L0C):
/// run_core sets them all before its first step and consumes them all after
/// its last, so every SetFlag has its WaitFlag.
template <class Visitor>
SGEMM_CUBE_DEVICE void buffer_free_flags(const Geometry& g, Visitor& v, bool set)
{
    struct Flag {
        Sync sync;
        int32_t id;
    };
    Flag flags[kBSlots + 1 + 2 + 2];
    uint32_t count = 0;
    for (uint32_t s = 0; s < kBSlots; ++s) {
        flags[count++] = Flag{Sync::kMte1ToMte2, Event::kBSlot0 + int32_t(s)};
    }
    flags[count++] = Flag{Sync::kMte1ToMte2, Event::kAGroup};
    for (uint32_t s = 0; s < g.plan.l0_stages; ++s) {
        flags[count++] = Flag{Sync::kMToMte1, Event::kL0Stage0 + int32_t(s)};
    }
    for (uint32_t s = 0; s < g.plan.l0c_stages; ++s) {
        flags[count++] = Flag{Sync::kOutToM, Event::kCTile + int32_t(s)};
    }
    for (uint32_t i = 0; i < count; ++i) {
        if (set) {
            v.set(flags[i].sync, flags[i].id);
        } else {
            v.wait(flags[i].sync, flags[i].id);
        }
    }
}

/// Drives one core through its steps: calls the visitor's data operations
/// and the set/wait of every flag, in program order.  The kernel's visitor
/// turns these into AscendC calls; the test's visitor records them and
/// replays them on a pipe model to prove that no buffer is read while it is
/// being refilled.  Visitor interface:
///   set(Sync, int32_t id), wait(Sync, int32_t id)       - flags
///   load_a_group(step)   MTE2: every A tile of the step's group, each resident plane -> L1
///   load_b(step)         MTE2: B tile of the step, each resident plane -> L1 slot b_slot
///   load_l0(step)        MTE1: A tiles k_in_group -> L0A, B slot -> L0B (stage l0_stage)
///   mmad(step)           M:    every accumulator of the pass (L0C stage l0c_stage), from zero when first_k
///   store_c(step)        Out:  accumulators of stage l0c_stage -> GM (store when first_group, else add),
///                              or C itself when combine_in_epilogue
template <class Visitor>
SGEMM_CUBE_DEVICE void run_core(const Geometry& g, uint32_t core, Visitor& v)
{
    CoreSchedule it(g, core);
    if (it.done()) {
        return;
    }
    // Every buffer starts free: the first wait on each "free" flag passes.
    buffer_free_flags(g, v, true);

    Step cur = it.step();
    // Prologue: the first group's A tiles and the first B tile.
    v.wait(Sync::kMte1ToMte2, Event::kAGroup);
    v.load_a_group(cur);
    v.set(Sync::kMte2ToMte1, Event::kAGroup);
    v.wait(Sync::kMte1ToMte2, Event::kBSlot0 + int32_t(cur.b_slot));
    v.load_b(cur);
    v.set(Sync::kMte2ToMte1, Event::kBSlot0 + int32_t(cur.b_slot));

    while (true) {
        it.next();
        const bool has_next = !it.done();
        Step nxt{};
        if (has_next) {
            nxt = it.step();
            // Ping-pong: refill the other B slot while the cube works on this one.
            v.wait(Sync::kMte1ToMte2, Event::kBSlot0 + int32_t(nxt.b_slot));
            v.load_b(nxt);
            v.set(Sync::kMte2ToMte1, Event::kBSlot0 + int32_t(nxt.b_slot));
        }
        // L1 -> L0 of this step.
        v.wait(Sync::kMToMte1, Event::kL0Stage0 + int32_t(cur.l0_stage));
        if (cur.group_start) {
            v.wait(Sync::kMte2ToMte1, Event::kAGroup);
        }
        v.wait(Sync::kMte2ToMte1, Event::kBSlot0 + int32_t(cur.b_slot));
        v.load_l0(cur);
        v.set(Sync::kMte1ToMte2, Event::kBSlot0 + int32_t(cur.b_slot));
        if (cur.group_end) {
            v.set(Sync::kMte1ToMte2, Event::kAGroup);
        }
        v.set(Sync::kMte1ToM, Event::kL0Ready);
        v.wait(Sync::kMte1ToM, Event::kL0Ready);
        // The cube: every term into its own accumulator of the step's L0C stage,
        // once that stage's previous write-back has drained it.
        if (cur.first_k) {
            v.wait(Sync::kOutToM, Event::kCTile + int32_t(cur.l0c_stage));
        }
        v.mmad(cur);
        v.set(Sync::kMToMte1, Event::kL0Stage0 + int32_t(cur.l0_stage));
        if (cur.last_k) {
            v.set(Sync::kMToOut, Event::kCTile + int32_t(cur.l0c_stage));
            v.wait(Sync::kMToOut, Event::kCTile + int32_t(cur.l0c_stage));
            v.store_c(cur);
            v.set(Sync::kOutToM, Event::kCTile + int32_t(cur.l0c_stage));
        }
        if (!has_next) {
            break;
        }
        if (nxt.group_start) {
            // The next group's A tiles replace this group's once MTE1 is done with them.
            v.wait(Sync::kMte1ToMte2, Event::kAGroup);
            v.load_a_group(nxt);
            v.set(Sync::kMte2ToMte1, Event::kAGroup);
        }
        cur = nxt;
    }
    // Drain: consume the last "free" flag of every buffer.
    buffer_free_flags(g, v, false);
}

// ------------------------------------------------------- vector kernels
/// Split kernel work: strips of 16 rows of the (batch * rows) x cols FP32
/// input (rows, cols multiples of 16), each in column tiles of at most
/// kSplitTileCols, strips to cores round-robin, kSplitStages tiles in UB.
///
/// A tile's 16 rows are loaded so that each row's 16-element pieces land one
/// fractal apart in UB: the tile sits in UB in Zz order, the split (all
/// elementwise) keeps that order, and the tile's hi and lo each leave as one
/// contiguous burst, because in the Zz output a 16-row strip is contiguous.
struct SplitGeometry {
    uint32_t strips;  ///< batch * rows / 16
    uint32_t strips_per_batch;  ///< rows / 16
    uint32_t cols;
    uint32_t tiles_per_strip;
    uint32_t cores;
};
SGEMM_CUBE_HOST_DEVICE SplitGeometry make_split_geometry(uint32_t batch, uint32_t rows, uint32_t cols, uint32_t cores)
{
    SplitGeometry s{};
    s.strips = batch * (rows / kCube);
    s.strips_per_batch = rows / kCube;
    s.cols = cols;
    s.tiles_per_strip = ceil_div(cols, kSplitTileCols);
    s.cores = min_u32(cores, s.strips);
    return s;
}
/// Element offset of row `r` (0..15) of tile (strip, tile) in the FP32 input.
SGEMM_CUBE_HOST_DEVICE uint64_t split_in_offset(const SplitGeometry& s, uint32_t strip, uint32_t tile, uint32_t r)
{
    return (uint64_t(strip) * kCube + r) * s.cols + uint64_t(tile) * kSplitTileCols;
}
SGEMM_CUBE_HOST_DEVICE uint32_t split_tile_cols(const SplitGeometry& s, uint32_t tile)
{
    return block_extent(s.cols, kSplitTileCols, tile);
}
/// UB element offset of row `r`'s first piece (Zz order inside the tile:
/// piece p of row r at p * 256 + r * 16).
SGEMM_CUBE_HOST_DEVICE uint32_t split_ub_row_offset(uint32_t r) { return r * kCube; }
/// The GM -> UB copy of one row: `pieces` runs of `piece_blocks` 32-byte
/// blocks (16 floats), packed in GM, `ub_gap_blocks` apart in UB (the rest
/// of a fractal).
struct RowPieces {
    uint32_t pieces;
    uint32_t piece_blocks;
    uint32_t ub_gap_blocks;
};
SGEMM_CUBE_HOST_DEVICE RowPieces split_row_pieces(uint32_t w)
{
    return RowPieces{w / kCube, kCube * kFloatBytes / kBlockBytes, (kFractalElems - kCube) * kFloatBytes / kBlockBytes};
}
/// Element offset of tile (strip, tile) in the Zz FP16 output: its 16 x w
/// elements are the contiguous range [offset, offset + 16 w).
SGEMM_CUBE_HOST_DEVICE uint64_t split_out_offset(const SplitGeometry& s, uint32_t strip, uint32_t tile)
{
    return uint64_t(strip) * kCube * s.cols + uint64_t(tile) * kSplitTileCols * kCube;
}

/// Combine kernel work: the (batch, mp, np) term buffers as one flat range
/// in tiles of kCombineTile floats, tiles to cores round-robin.
struct CombineGeometry {
    uint64_t total;
    uint32_t tiles;
    uint32_t cores;
};
SGEMM_CUBE_HOST_DEVICE CombineGeometry make_combine_geometry(uint64_t total, uint32_t cores)
{
    CombineGeometry c{};
    c.total = total;
    c.tiles = uint32_t((total + kCombineTile - 1) / kCombineTile);
    c.cores = min_u32(cores, c.tiles);
    return c;
}
SGEMM_CUBE_HOST_DEVICE uint32_t combine_tile_len(const CombineGeometry& c, uint32_t tile)
{
    const uint64_t left = c.total - uint64_t(tile) * kCombineTile;
    return left < kCombineTile ? uint32_t(left) : kCombineTile;
}

/// Line-statistics kernel work (the guarantee's bookkeeping, guard/line_meta.hpp): the FP32
/// (batch * rows) x cols input (rows, cols multiples of 16) in tiles of 16 rows x at most
/// kStatsTileCols columns.  Lines along rows (rows of A): strips of 16 rows go to cores
/// round-robin, each visits its column tiles.  Lines along columns (columns of B): column tiles
/// (batch, 256 columns) go to cores round-robin, each visits every 16-row strip of its batch.
constexpr uint32_t kStatsTileCols = 256;
constexpr uint32_t kStatsTile = kCube * kStatsTileCols;  ///< int32 elements of one tile
constexpr uint32_t kStatsStages = 3;                     ///< UB stages of the input tile
constexpr uint32_t kStatsConstBytes = 256;               ///< one repeat's constant (8 blocks)
constexpr uint32_t kMetaChunk = 1024;                    ///< lines per chunk of the line-meta kernel
struct LineStatsGeometry {
    bool along_rows;
    uint32_t batch, rows, cols;
    uint32_t col_tiles;  ///< ceil(cols / kStatsTileCols)
    uint32_t work;       ///< strips (along rows) or batch * col_tiles (along columns)
    uint32_t cores;
    uint32_t lines;      ///< lines per batch: rows (along rows) or cols
};
SGEMM_CUBE_HOST_DEVICE LineStatsGeometry make_line_stats_geometry(uint32_t batch, uint32_t rows, uint32_t cols,
                                                                  bool along_rows, uint32_t cores)
{
    LineStatsGeometry g{};
    g.along_rows = along_rows;
    g.batch = batch;
    g.rows = rows;
    g.cols = cols;
    g.col_tiles = ceil_div(cols, kStatsTileCols);
    g.work = along_rows ? batch * (rows / kCube) : batch * g.col_tiles;
    g.cores = min_u32(cores, g.work);
    g.lines = along_rows ? rows : cols;
    return g;
}
SGEMM_CUBE_HOST_DEVICE uint32_t stats_tile_cols(const LineStatsGeometry& g, uint32_t col_tile)
{
    return block_extent(g.cols, kStatsTileCols, col_tile);
}
/// Element offset of row `r` of the 16-row strip `strip` (counted over batch * rows), column tile `t`.
SGEMM_CUBE_HOST_DEVICE uint64_t stats_in_offset(const LineStatsGeometry& g, uint32_t strip, uint32_t t, uint32_t r)
{
    return (uint64_t(strip) * kCube + r) * g.cols + uint64_t(t) * kStatsTileCols;
}

/// Unscale work (the guarantee's bookkeeping, alone or folded into the combine): the (batch * mp) x np
/// FP32 result in units of at most kUnscaleUnit elements: several whole rows when np <= kUnscaleUnit,
/// else one row's column chunk (the chunks of a row equal to within 16 columns); units to cores
/// round-robin.  kUnscaleTile: the fix-up kernels' column chunk (and their UnscaleTile::Init tiles).
/// The unit is as large as two stages of its tiles fit UB (kUnscaleUnitUbBytes): every vector instruction
/// of the unscale waits behind a barrier, so larger units pay fewer barriers per element.
constexpr uint32_t kUnscaleTile = 2048;
constexpr uint32_t kUnscaleUnit = 3840;
struct UnscaleGeometry {
    uint32_t rows;           ///< batch * mp
    uint32_t mp, np;
    uint32_t rows_per_unit;  ///< kUnscaleUnit / np when np <= kUnscaleUnit, else 1
    uint32_t col_chunks;     ///< ceil(np / kUnscaleUnit)
    uint32_t chunk_cols;     ///< columns of a chunk (the last may be shorter): np / col_chunks rounded up to 16
    uint32_t units;
    uint32_t cores;
};
SGEMM_CUBE_HOST_DEVICE UnscaleGeometry make_unscale_geometry(uint32_t batch, uint32_t mp, uint32_t np, uint32_t cores)
{
    UnscaleGeometry u{};
    u.rows = batch * mp;
    u.mp = mp;
    u.np = np;
    u.rows_per_unit = np <= kUnscaleUnit ? kUnscaleUnit / np : 1;
    u.col_chunks = ceil_div(np, kUnscaleUnit);
    u.chunk_cols = round_up(ceil_div(np, u.col_chunks), kCube);
    u.units = ceil_div(u.rows, u.rows_per_unit) * u.col_chunks;
    u.cores = min_u32(cores, u.units);
    return u;
}

/// The per-batch words of the guarantee's bookkeeping: one 32-byte block of FP32 per batch, zeroed by
/// the host before the line-meta kernel, which adds 1 (FP32 atomic add) to word kFlagScaled for every
/// chunk of lines of that batch with a scaling exponent t != 0 and to word kFlagListed for every chunk
/// with a line listed for the fix-up (class >= fixup_min_class); A's and B's lines add to the same
/// block.  A word is +0 (bits 0) exactly when no line of the batch is scaled (listed): the split's
/// scaling, the unscale and the fix-up kernels read it and skip their work for that batch, with no
/// host synchronisation.  Readers bring at most kFlagReadBatches blocks into UB at once.
///
/// Word kFlagWide counts the chunks with a line whose |t| exceeds kFastLineExponent.  A batch whose
/// kFlagWide word is +0 has every s = alpha_exp - ta_i - tb_j in [alpha_exp - 2T, alpha_exp + 2T]
/// (T = kFastLineExponent), inside FP32's normal exponents [-126, 127] whenever fast_unscale_alpha(alpha_exp)
/// holds: the unscale's fast path (tile::FastPow2, one Mul by the exact 2^s) is then valid for the
/// whole batch, decided once per batch rather than per unit, so the 910A's GEMM epilogue can take it
/// (issue 32).  T = 60 leaves alpha_exp in [-6, 7] (alpha within [2^-6, 2^8)) and covers data
/// whose lines are within 2^60 of the split's range, i.e. all but extreme lines.
constexpr uint32_t kFlagWords = 8;
constexpr uint32_t kFlagScaled = 0;
constexpr uint32_t kFlagListed = 1;
constexpr uint32_t kFlagWide = 2;
constexpr int32_t kFastLineExponent = 60;
constexpr int32_t kFastExponentMin = -126;  ///< FP32's normal exponents: 2^s is a normal FP32 number
constexpr int32_t kFastExponentMax = 127;
/// Whether a batch with no wide line (word kFlagWide +0) has every s in [-126, 127] for this alpha_exp.
SGEMM_CUBE_HOST_DEVICE constexpr bool fast_unscale_alpha(int32_t alpha_exp)
{
    return alpha_exp - 2 * kFastLineExponent >= kFastExponentMin &&
           alpha_exp + 2 * kFastLineExponent <= kFastExponentMax;
}
/// Whether line exponent t keeps its batch's kFlagWide word +0.
SGEMM_CUBE_HOST_DEVICE constexpr bool fast_line_exponent(int32_t t)
{
    return t >= -kFastLineExponent && t <= kFastLineExponent;
}
static_assert(fast_unscale_alpha(0) && fast_unscale_alpha(-2), "alpha = 1 and alpha = 0.37 take the fast path");
/// Whether the 910A's GEMM epilogue (one K group, C combined in UB) unscales a batch itself, from the
/// batch's words: the fast path valid for the whole batch (no wide line, fast_unscale_alpha) and something
/// to do (a scaled line, or alpha != 1).  The unscale pass after it skips a unit whose batches all have
/// no wide line (fast_unscale_alpha holding): each was unscaled here or needs nothing, so every output is
/// unscaled exactly once.
SGEMM_CUBE_HOST_DEVICE constexpr bool epilogue_unscales(bool scaled, bool wide, bool alpha_one, int32_t alpha_exp)
{
    return fast_unscale_alpha(alpha_exp) && !wide && (scaled || !alpha_one);
}
constexpr uint32_t kFlagReadBatches = 16;
constexpr uint32_t kFlagUbBytes = kFlagReadBatches * kBlockBytes;
static_assert(kFlagWords * 4 == kBlockBytes, "one 32-byte block of words per batch");

/// UB bytes of the vector kernels: the split's x, tmp, hi, lo per stage and
/// its two int32 constants; the combine's single-buffered term tiles.
constexpr uint32_t kSplitStageBytes = kCube * kSplitTileCols * (4 + 4 + 2 + 2);
/// ... then the bound test's three int32 constant tiles, two FP32 factor tiles (scaled lines) and the
/// packed integers of one tile's lines and the batch words' staging.
constexpr uint32_t kSplitUbBytes = kSplitStages * kSplitStageBytes + kCube * kSplitTileCols * (3 * 4 + 2 * 4) +
                                   kSplitTileCols * 4 + kFlagUbBytes;
constexpr uint32_t kCombineUbBytes = kMaxTerms * kCombineTile * kFloatBytes;
static_assert(kSplitUbBytes <= arch::Ascend910B::kUbBytes - arch::Ascend910B::kUbReservedBytes &&
                  kSplitUbBytes <= arch::Ascend910A::kUbBytes - arch::Ascend910A::kUbReservedBytes,
              "split tile exceeds UB");
static_assert(kCombineUbBytes <= arch::Ascend910B::kUbBytes - arch::Ascend910B::kUbReservedBytes &&
                  kCombineUbBytes <= arch::Ascend910A::kUbBytes - arch::Ascend910A::kUbReservedBytes,
              "combine tile exceeds UB");
static_assert(kSplitTileCols % kCube == 0 && kCombineTile % kFractalElems == 0, "vector tiles must be whole fractals");
/// Line statistics: the input tile per stage, two pairs of work tiles (p, q), three accumulators of
/// kStatsTile int32, two one-repeat constants and the output staging (3 x kStatsTileCols int32).
constexpr uint32_t kStatsUbBytes =
    (kStatsStages + 4 + 3) * kStatsTile * 4 + 2 * kStatsConstBytes + 3 * kStatsTileCols * 4;
/// The fix-up kernels' UnscaleTile::Init: eight tiles of kUnscaleTile words (result, integers, work, three
/// constants), the rows' integers and the batch words' staging.
constexpr uint32_t kUnscaleUbBytes = 9 * kUnscaleTile * 4 + kFlagUbBytes;
/// The unscale (alone or folded into the combine) in kUnscaleStages UB stages, so that a unit's load, vector
/// work and store overlap its neighbours': per stage five tiles of kUnscaleUnit words (C, B's integers, the
/// three term tiles, which then serve as three of the work tiles); shared, the fourth work tile, the
/// exponent mask, the rows' integers (at most kUnscaleUnit / 16 rows and 8 more), the batch words' staging
/// and the fast path's one-repeat mask (~3, broadcast to every repeat of an And).
constexpr uint32_t kUnscaleStages = 2;
constexpr uint32_t kUnscaleStageTiles = 5;
constexpr uint32_t kUnscaleUnitMetaWords = kUnscaleUnit / kCube + 8;
constexpr uint32_t kUnscaleMaskBytes = 256;
/// The fast path's column bounds kept per core (tile::ColumnBounds): one slot per column chunk (mod this).
constexpr uint32_t kUnscaleBoundSlots = 16;
constexpr uint32_t kUnscaleUnitUbBytes = (kUnscaleStages * kUnscaleStageTiles + 2) * kUnscaleUnit * 4 +
                                         kUnscaleUnitMetaWords * 4 + kFlagUbBytes + kUnscaleMaskBytes;
static_assert(kUnscaleUnitUbBytes <= arch::Ascend910B::kUbBytes - arch::Ascend910B::kUbReservedBytes &&
                  kUnscaleUnitUbBytes <= arch::Ascend910A::kUbBytes - arch::Ascend910A::kUbReservedBytes &&
                  kUnscaleUnitMetaWords % 8 == 0 && kUnscaleUnit % kCube == 0,
              "the unscale's tiles exceed UB");
/// Fix-up of fix-up rows: the unscale tiles, then B's row, two factor tiles, A's row (kUnscaleTile
/// words each) and one 32-byte block of A's rows' integers.
constexpr uint32_t kFixupUbBytes = kUnscaleUbBytes + 4 * kUnscaleTile * 4 + kBlockBytes;
/// Fix-up of fix-up columns: rows of A per unit (a multiple of 8, at most kUnscaleTile), and the UB of
/// the unscale tiles, one accumulator, the rows' 8-column block, A's column, two factor tiles, the rows'
/// exponents, one 32-byte block and a chunk of B's integers.
constexpr uint32_t kFixupColRows = 512;
constexpr uint32_t kFixupColsUbBytes =
    kUnscaleUbBytes + kFixupColRows * 4 * (1 + 8 + 4) + kBlockBytes + kUnscaleTile * 4;
static_assert(kFixupColRows % 8 == 0 && kFixupColRows <= kUnscaleTile, "fix-up row chunk");
/// Line meta: three input chunks and one output chunk of kMetaChunk int32, and one batch block of words.
constexpr uint32_t kMetaUbBytes = 4 * kMetaChunk * 4 + kBlockBytes;
static_assert(kStatsUbBytes <= arch::Ascend910B::kUbBytes - arch::Ascend910B::kUbReservedBytes &&
                  kStatsUbBytes <= arch::Ascend910A::kUbBytes - arch::Ascend910A::kUbReservedBytes,
              "line-statistics tiles exceed UB");

}  // namespace schedule
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_SCHEDULE_SCHEDULE_HPP
