// Kernel layer, vector unit: the statistics of every line (row of A or column of B) that
// the accuracy guarantee's bookkeeping starts from (guard/line_meta.hpp, cpu_fallback/guard.py
// line_stats): per line the bits of its largest finite magnitude (`big`), of its smallest
// nonzero finite magnitude minus 1 (`small_w`) and whether every entry is finite (`finite`).
//
// Integer and bit operations only, none that can overflow, so nothing depends on the chip's float
// saturation mode, NaN compares or int32 wrap-around.  With E = 0x7F800000 (the exponent field;
// bit patterns of non-negative floats order as the values, |x| >= E exactly for NaN/Inf):
//
//   a = bits(x) & 0x7FFFFFFF                    |x|                       -> max over the line: A
//   p = (a - E) | 0x80000000     a - E (in [-E, -1]) if x is finite; NaN/Inf: a - E >= 0, so the
//                                sign bit puts it below -E                -> max over the line: P
//   q = (a - 1) & 0x7FFFFFFF     a - 1 in [0, E - 2] if x is finite and nonzero, E - 1 or more
//                                if it is NaN/Inf, 0x7FFFFFFF if it is zero   -> min over the line: Q
//
// and per line, by the scalar unit: big = P + E, small_w = Q if Q < E - 1 else 0x7FFFFFFF,
// finite = -1 if A < E else 0.  Zero entries (the host's padding, the unused columns of a tail
// tile) are neutral: the accumulators start at A = 0, P = -E, Q = 0x7FFFFFFF.
//
// A tile is 16 rows x 256 columns (4096 int32), row-major in UB, brought in by one DataCopy (16
// GM runs) into one of three UB stages, so that MTE2 loads ahead while V works.  Four dependent
// steps per tile (a; p, q and A; the | and &; P and Q), two of them software-pipelined
// with the next tile (p and q double-buffered), so a tile costs two PipeBarrier<PIPE_V> and eight
// vector instructions over the whole tile (And / Or with a one-block constant, repeat stride 0).
// The accumulators keep the tile's shape (elementwise max / min, no reduction per tile); at the end
// of a work item they are reduced once: along rows (A: a strip of 16 rows, every column tile) each
// row's 256 values to 8 by strided level-0 Max / Min over the 16 rows at once (repeat stride one
// row), which the scalar unit finishes; along columns (B: one column tile, every 16-row strip of
// its batch) the 16 rows to one by halving, which the scalar unit decodes.
#ifndef SGEMM_CUBE_KERNEL_LINE_STATS_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_LINE_STATS_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/line_stats_tile.hpp"
#include "sgemm_cube/tile/soc.hpp"
#include "sgemm_cube/tile/vector_copy.hpp"
#include "sgemm_cube/tile/vector_stages.hpp"

namespace sgemm_cube {
namespace kernel {

struct LineStatsArgs {
    uint32_t batch, rows, cols;  ///< padded sizes, multiples of 16
    uint32_t along_rows;         ///< 1: lines are rows (A, reduced along K = cols); 0: columns (B)
    uint32_t plan_cores;
};

/// The per-line outputs: three int32 arrays of batch * lines (guard/line_meta.hpp's LineStats).
struct LineStatsOut {
    __gm__ int32_t* big;
    __gm__ int32_t* small_w;
    __gm__ int32_t* finite;
};

/// The input stages of the line statistics: loaded by MTE2, read by the vector unit; nothing is stored from
/// them (the scalar unit reads the accumulators).
using StatsStages = tile::VectorStages<schedule::kStatsStages, tile::StageResults::kNone>;

/// Tile i of work item w into UB stage s: 16 rows x (at most) 256 columns, row-major, one DataCopy.
template <class SocTag>
__aicore__ inline void LoadStatsTile(const tile::LineStatsTile<SocTag>& stats, const StatsStages& stages,
                                     const schedule::LineStatsGeometry& g, const AscendC::GlobalTensor<int32_t>& gx,
                                     uint32_t w, uint32_t i, uint32_t s)
{
    constexpr uint32_t kCols = schedule::kStatsTileCols;
    constexpr int32_t kZeroEvent = int32_t(schedule::kStatsStages);  // V_MTE2 events 0 .. stages - 1: the stages
    const uint32_t t = g.along_rows ? i : w % g.col_tiles;
    const uint32_t strip = g.along_rows ? w : (w / g.col_tiles) * (g.rows / schedule::kCube) + i;
    const uint32_t cols = schedule::stats_tile_cols(g, t);
    stages.AwaitLoadable(s);  // the stage's previous tile has been read
    if (cols < kCols) {  // zeros are neutral: the unused columns of the tile
        AscendC::Duplicate<int32_t>(stats.x_[s], int32_t(0), int32_t(schedule::kStatsTile));
        tile::Handoff<AscendC::HardEvent::V_MTE2>(kZeroEvent);
    }
    tile::CopyRowsIn(stats.x_[s], gx[schedule::stats_in_offset(g, strip, t, 0)], schedule::kCube, cols, g.cols, kCols);
    stages.Loaded(s);
}

template <class SocTag>
__aicore__ inline void RunLineStats(__gm__ float* x, const LineStatsOut& out, const LineStatsArgs& args)
{
    const schedule::LineStatsGeometry g =
        schedule::make_line_stats_geometry(args.batch, args.rows, args.cols, args.along_rows != 0, args.plan_cores);
    const uint32_t core = uint32_t(AscendC::GetBlockIdx());
    if (core >= g.cores) {
        return;
    }
    AscendC::GlobalTensor<int32_t> gx, gbig, gsmall, gfinite;
    gx.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(x));  // bit patterns: only integer operations follow
    gbig.SetGlobalBuffer(out.big);
    gsmall.SetGlobalBuffer(out.small_w);
    gfinite.SetGlobalBuffer(out.finite);
    tile::LineStatsTile<SocTag> stats;
    stats.Init(tile::VectorUb(schedule::kStatsUbBytes));

    constexpr uint32_t kCols = schedule::kStatsTileCols;
    const uint32_t steps = g.along_rows ? g.col_tiles : g.rows / schedule::kCube;  // tiles of each item
    const StatsStages stages;
    stages.Open();
    // The accumulators are read by the scalar unit at the end of an item, the output staging by MTE3;
    // the next item resets and refills them after that.
    AscendC::SetFlag<AscendC::HardEvent::S_V>(0);
    AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(0);
    uint32_t n = 0;  // this core's tiles so far; tile n is in input stage n % kStages, work pair n % 2
    LoadStatsTile(stats, stages, g, gx, core, 0, 0);
    for (uint32_t w = core; w < g.work; w += g.cores) {
        AscendC::WaitFlag<AscendC::HardEvent::S_V>(0);
        stats.ResetAccumulators();
        for (uint32_t i = 0; i < steps; ++i, ++n) {
            const uint32_t s = StatsStages::Of(n), next = StatsStages::Of(n + 1), pair = n % 2, ps = 1 - pair;
            // The next tile's load is issued before this tile's work and the item's end, so MTE2 runs ahead.
            if (i + 1 < steps) {
                LoadStatsTile(stats, stages, g, gx, w, i + 1, next);
            } else if (w + g.cores < g.work) {
                LoadStatsTile(stats, stages, g, gx, w + g.cores, 0, next);
            }
            stages.AwaitLoaded(s);
            stats.Front(s, i > 0, ps);
            stats.Back(s, pair, i > 0, ps);
            stages.InputRead(s);
            AscendC::PipeBarrier<PIPE_V>();
        }
        const uint32_t last = (n - 1) % 2;  // steps 3 and 4 of the item's last tile (its work pair)
        stats.Step3(last);
        AscendC::PipeBarrier<PIPE_V>();
        stats.Step4(last);
        AscendC::PipeBarrier<PIPE_V>();
        if (g.along_rows) {
            stats.ReduceRows();
        } else {
            stats.ReduceColumns();
        }
        tile::Handoff<AscendC::HardEvent::V_S>(0);  // the scalar unit reads the reduced accumulators
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(0);
        uint64_t line0;  // the item's first line (batches counted together) and its lines
        uint32_t lines;
        if (g.along_rows) {
            stats.DecodeRows();
            line0 = uint64_t(w) * schedule::kCube;  // strips count rows over the batch
            lines = schedule::kCube;
        } else {
            const uint32_t t = w % g.col_tiles;
            lines = schedule::stats_tile_cols(g, t);
            stats.DecodeColumns(lines);
            line0 = uint64_t(w / g.col_tiles) * g.cols + uint64_t(t) * kCols;
        }
        AscendC::SetFlag<AscendC::HardEvent::S_V>(0);  // accumulators read
        tile::Handoff<AscendC::HardEvent::S_MTE3>(0);
        tile::CopyOut(gbig[line0], stats.out_, lines);
        tile::CopyOut(gsmall[line0], stats.out_[kCols], lines);
        tile::CopyOut(gfinite[line0], stats.out_[2 * kCols], lines);
        AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(0);
    }
    stages.Close();
    AscendC::WaitFlag<AscendC::HardEvent::S_V>(0);
    AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(0);
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_LINE_STATS_KERNEL_HPP
