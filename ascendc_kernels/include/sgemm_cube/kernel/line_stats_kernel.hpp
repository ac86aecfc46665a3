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
#include "sgemm_cube/guard/line_meta.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"

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

template <class SocTag>
class LineStatsTile {
public:
    using I32 = AscendC::LocalTensor<int32_t>;
    using U16 = AscendC::LocalTensor<uint16_t>;
    static constexpr uint32_t kStages = schedule::kStatsStages;  ///< input tiles (x)
    static constexpr uint32_t kPairs = 2;                         ///< work tiles p, q: this tile's and the previous one's
    static constexpr int32_t kN = int32_t(schedule::kStatsTile);
    static constexpr int32_t kExp = int32_t(guard::kExpMask);
    static constexpr uint8_t kRepeats = uint8_t(schedule::kStatsTile * 4 / 256);  ///< 256-byte repeats per tile
    static constexpr uint64_t kHalves = 128;                                        ///< 16-bit elements per repeat

    __aicore__ inline void Init(const AscendC::LocalTensor<uint8_t>& base)
    {
        constexpr uint32_t kTileBytes = schedule::kStatsTile * 4;
        for (uint32_t s = 0; s < kStages; ++s) {
            x_[s] = base[s * kTileBytes].ReinterpretCast<int32_t>();
        }
        for (uint32_t s = 0; s < kPairs; ++s) {
            p_[s] = base[(kStages + s) * kTileBytes].ReinterpretCast<int32_t>();
            q_[s] = base[(kStages + kPairs + s) * kTileBytes].ReinterpretCast<int32_t>();
        }
        const uint32_t acc = (kStages + 2 * kPairs) * kTileBytes;
        acc_a_ = base[acc].ReinterpretCast<int32_t>();
        acc_p_ = base[acc + kTileBytes].ReinterpretCast<int32_t>();
        acc_q_ = base[acc + 2 * kTileBytes].ReinterpretCast<int32_t>();
        const uint32_t consts = acc + 3 * kTileBytes;
        abs_ = base[consts].ReinterpretCast<int32_t>();
        sign_ = base[consts + schedule::kStatsConstBytes].ReinterpretCast<int32_t>();
        out_ = base[consts + 2 * schedule::kStatsConstBytes].ReinterpretCast<int32_t>();
        constexpr int32_t kBlock = int32_t(schedule::kStatsConstBytes / 4);
        AscendC::Duplicate<int32_t>(abs_, int32_t(0x7FFFFFFF), kBlock);
        AscendC::Duplicate<int32_t>(sign_, int32_t(-2147483647 - 1), kBlock);  // 0x80000000
        AscendC::PipeBarrier<PIPE_V>();
    }

    /// Accumulators to their neutral values (after the previous item's readers are done).
    __aicore__ inline void ResetAccumulators()
    {
        AscendC::Duplicate<int32_t>(acc_a_, int32_t(0), kN);
        AscendC::Duplicate<int32_t>(acc_p_, int32_t(-kExp), kN);
        AscendC::Duplicate<int32_t>(acc_q_, int32_t(guard::kNoSmall), kN);
    }

    /// Step 1 of the tile in input stage s (a = |x|, in place) beside step 3 of the previous tile (its p, q in
    /// work pair ps), then a barrier.
    __aicore__ inline void Front(uint32_t s, bool previous, uint32_t ps)
    {
        const U16 xu = x_[s].ReinterpretCast<uint16_t>();
        AscendC::And(xu, xu, abs_.ReinterpretCast<uint16_t>(), kHalves, kRepeats, Broadcast());
        if (previous) {
            Step3(ps);
        }
        AscendC::PipeBarrier<PIPE_V>();
    }
    /// Step 2 of the tile in input stage s (p, q into work pair w, before their masks; A) beside step 4 of the
    /// previous tile (pair ps).  The caller sets the stage's V_MTE2 flag after it (x is not read any more)
    /// and a barrier.
    __aicore__ inline void Back(uint32_t s, uint32_t w, bool previous, uint32_t ps)
    {
        AscendC::Adds(p_[w], x_[s], int32_t(-kExp), kN);  // a - E
        AscendC::Adds(q_[w], x_[s], int32_t(-1), kN);     // a - 1
        AscendC::Max(acc_a_, acc_a_, x_[s], kN);
        if (previous) {
            Step4(ps);
        }
    }
    /// Step 3: p |= 0x80000000, q &= 0x7FFFFFFF (one constant block, read again in every repeat).
    __aicore__ inline void Step3(uint32_t s)
    {
        const U16 pu = p_[s].ReinterpretCast<uint16_t>();
        AscendC::Or(pu, pu, sign_.ReinterpretCast<uint16_t>(), kHalves, kRepeats, Broadcast());
        const U16 qu = q_[s].ReinterpretCast<uint16_t>();
        AscendC::And(qu, qu, abs_.ReinterpretCast<uint16_t>(), kHalves, kRepeats, Broadcast());
    }
    /// Step 4: P = max(P, p), Q = min(Q, q), elementwise.
    __aicore__ inline void Step4(uint32_t s)
    {
        AscendC::Max(acc_p_, acc_p_, p_[s], kN);
        AscendC::Min(acc_q_, acc_q_, q_[s], kN);
    }

    /// Along rows: each row's 256 accumulated values to 8 (at r * 256), all 16 rows per instruction (one
    /// repeat per row); no barrier after the last step (the caller's V_S flag follows).
    __aicore__ inline void ReduceRows()
    {
        constexpr uint32_t kCols = schedule::kStatsTileCols;
        const AscendC::BinaryRepeatParams rows(1, 1, 1, kCols * 4 / 32, kCols * 4 / 32, kCols * 4 / 32);
        for (uint32_t k = 0; k < 2; ++k) {  // 256 -> 128: blocks of 64 k and k + 2
            Fold(k * 64, (k + 2) * 64, 64, rows);
        }
        AscendC::PipeBarrier<PIPE_V>();
        Fold(0, 64, 64, rows);  // 128 -> 64
        for (uint32_t m = 32; m >= 8; m /= 2) {  // 64 -> 8 under a mask of the first m elements
            AscendC::PipeBarrier<PIPE_V>();
            Fold(0, m, m, rows);
        }
    }
    /// Along columns: the 16 accumulated rows to one (the first 256 values), by halving; no final barrier.
    __aicore__ inline void ReduceColumns()
    {
        for (int32_t half = kN / 2; half >= int32_t(schedule::kStatsTileCols); half /= 2) {
            AscendC::Max(acc_a_, acc_a_, acc_a_[half], half);
            AscendC::Max(acc_p_, acc_p_, acc_p_[half], half);
            AscendC::Min(acc_q_, acc_q_, acc_q_[half], half);
            if (half > int32_t(schedule::kStatsTileCols)) {
                AscendC::PipeBarrier<PIPE_V>();
            }
        }
    }

    /// The line's statistics from its reduced accumulators (scalar unit).
    static __aicore__ inline int32_t Big(int32_t p) { return p + kExp; }
    static __aicore__ inline int32_t SmallW(int32_t q)
    {
        return q < kExp - 1 ? q : int32_t(guard::kNoSmall);
    }
    static __aicore__ inline int32_t Finite(int32_t a) { return a < kExp ? -1 : 0; }

    I32 x_[kStages], p_[kPairs], q_[kPairs];
    I32 acc_a_, acc_p_, acc_q_, abs_, sign_, out_;

private:
    static __aicore__ inline AscendC::BinaryRepeatParams Broadcast()
    {
        return AscendC::BinaryRepeatParams(1, 1, 1, 8, 8, 0);  // src1: the same eight blocks every repeat
    }
    /// acc[dst + r * 256 ..] = max / min(acc[dst + ..], acc[src + ..]) for the first `mask` elements, every row r.
    __aicore__ inline void Fold(uint32_t dst, uint32_t src, uint64_t mask, const AscendC::BinaryRepeatParams& rows)
    {
        const uint8_t n = uint8_t(schedule::kCube);
        AscendC::Max(acc_a_[dst], acc_a_[dst], acc_a_[src], mask, n, rows);
        AscendC::Max(acc_p_[dst], acc_p_[dst], acc_p_[src], mask, n, rows);
        AscendC::Min(acc_q_[dst], acc_q_[dst], acc_q_[src], mask, n, rows);
    }
};

/// Tile i of work item w into UB stage s: 16 rows x (at most) 256 columns, row-major, one DataCopy.
template <class SocTag>
__aicore__ inline void LoadStatsTile(const LineStatsTile<SocTag>& tile, const schedule::LineStatsGeometry& g,
                                     const AscendC::GlobalTensor<int32_t>& gx, uint32_t w, uint32_t i, uint32_t s)
{
    constexpr uint32_t kCols = schedule::kStatsTileCols;
    constexpr int32_t kZeroEvent = int32_t(schedule::kStatsStages);  // V_MTE2 events 0 .. stages - 1: the stages
    const uint32_t t = g.along_rows ? i : w % g.col_tiles;
    const uint32_t strip = g.along_rows ? w : (w / g.col_tiles) * (g.rows / schedule::kCube) + i;
    const uint32_t cols = schedule::stats_tile_cols(g, t);
    AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(int32_t(s));  // the stage's previous tile has been read
    if (cols < kCols) {  // zeros are neutral: the unused columns of the tile
        AscendC::Duplicate<int32_t>(tile.x_[s], int32_t(0), int32_t(schedule::kStatsTile));
        AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(kZeroEvent);
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(kZeroEvent);
    }
    const uint32_t blocks = cols * 4 / schedule::kBlockBytes;
    AscendC::DataCopy(tile.x_[s], gx[schedule::stats_in_offset(g, strip, t, 0)],
                      AscendC::DataCopyParams(uint16_t(schedule::kCube), uint16_t(blocks),
                                              uint16_t((g.cols - cols) * 4 / schedule::kBlockBytes),
                                              uint16_t((kCols - cols) * 4 / schedule::kBlockBytes)));
    AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(int32_t(s));
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

    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::VECCALC> ub;
    pipe.InitBuffer(ub, schedule::kStatsUbBytes);
    LineStatsTile<SocTag> tile;
    tile.Init(ub.Get<uint8_t>());
    pipe.Destroy();

    using Tile = LineStatsTile<SocTag>;
    constexpr uint32_t kCols = schedule::kStatsTileCols;
    constexpr uint32_t kStages = schedule::kStatsStages;
    const uint32_t steps = g.along_rows ? g.col_tiles : g.rows / schedule::kCube;  // tiles of each item
    for (uint32_t s = 0; s < kStages; ++s) {
        AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(int32_t(s));  // stage free
    }
    // The accumulators are read by the scalar unit at the end of an item, the output staging by MTE3;
    // the next item resets and refills them after that.
    AscendC::SetFlag<AscendC::HardEvent::S_V>(0);
    AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(0);
    uint32_t n = 0;  // this core's tiles so far; tile n is in input stage n % kStages, work pair n % 2
    LoadStatsTile(tile, g, gx, core, 0, 0);
    for (uint32_t w = core; w < g.work; w += g.cores) {
        AscendC::WaitFlag<AscendC::HardEvent::S_V>(0);
        tile.ResetAccumulators();
        for (uint32_t i = 0; i < steps; ++i, ++n) {
            const uint32_t s = n % kStages, next = (n + 1) % kStages, pair = n % 2, ps = 1 - pair;
            // The next tile's load is issued before this tile's work and the item's end, so MTE2 runs ahead.
            if (i + 1 < steps) {
                LoadStatsTile(tile, g, gx, w, i + 1, next);
            } else if (w + g.cores < g.work) {
                LoadStatsTile(tile, g, gx, w + g.cores, 0, next);
            }
            AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(int32_t(s));
            tile.Front(s, i > 0, ps);
            tile.Back(s, pair, i > 0, ps);
            AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(int32_t(s));
            AscendC::PipeBarrier<PIPE_V>();
        }
        const uint32_t last = (n - 1) % 2;  // steps 3 and 4 of the item's last tile (its work pair)
        tile.Step3(last);
        AscendC::PipeBarrier<PIPE_V>();
        tile.Step4(last);
        AscendC::PipeBarrier<PIPE_V>();
        if (g.along_rows) {
            tile.ReduceRows();
        } else {
            tile.ReduceColumns();
        }
        AscendC::SetFlag<AscendC::HardEvent::V_S>(0);
        AscendC::WaitFlag<AscendC::HardEvent::V_S>(0);
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(0);
        uint64_t line0;
        uint32_t lines;
        if (g.along_rows) {  // 8 values per row and statistic left (row r at r * 256)
            for (uint32_t r = 0; r < schedule::kCube; ++r) {
                int32_t a = 0, p = -Tile::kExp, q = int32_t(guard::kNoSmall);
                for (uint32_t c = 0; c < 8; ++c) {
                    const int32_t va = tile.acc_a_.GetValue(r * kCols + c);
                    const int32_t vp = tile.acc_p_.GetValue(r * kCols + c);
                    const int32_t vq = tile.acc_q_.GetValue(r * kCols + c);
                    a = va > a ? va : a;
                    p = vp > p ? vp : p;
                    q = vq < q ? vq : q;
                }
                tile.out_.SetValue(r, Tile::Big(p));
                tile.out_.SetValue(kCols + r, Tile::SmallW(q));
                tile.out_.SetValue(2 * kCols + r, Tile::Finite(a));
            }
            line0 = uint64_t(w) * schedule::kCube;  // strips count rows over the batch
            lines = schedule::kCube;
        } else {  // one value per column and statistic
            const uint32_t t = w % g.col_tiles;
            lines = schedule::stats_tile_cols(g, t);
            for (uint32_t c = 0; c < lines; ++c) {
                tile.out_.SetValue(c, Tile::Big(tile.acc_p_.GetValue(c)));
                tile.out_.SetValue(kCols + c, Tile::SmallW(tile.acc_q_.GetValue(c)));
                tile.out_.SetValue(2 * kCols + c, Tile::Finite(tile.acc_a_.GetValue(c)));
            }
            line0 = uint64_t(w / g.col_tiles) * g.cols + uint64_t(t) * kCols;
        }
        AscendC::SetFlag<AscendC::HardEvent::S_V>(0);  // accumulators read
        AscendC::SetFlag<AscendC::HardEvent::S_MTE3>(0);
        AscendC::WaitFlag<AscendC::HardEvent::S_MTE3>(0);
        const AscendC::DataCopyParams run(1, uint16_t(lines * 4 / schedule::kBlockBytes), 0, 0);
        AscendC::DataCopy(gbig[line0], tile.out_, run);
        AscendC::DataCopy(gsmall[line0], tile.out_[kCols], run);
        AscendC::DataCopy(gfinite[line0], tile.out_[2 * kCols], run);
        AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(0);
    }
    for (uint32_t s = 0; s < kStages; ++s) {
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(int32_t(s));
    }
    AscendC::WaitFlag<AscendC::HardEvent::S_V>(0);
    AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(0);
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_LINE_STATS_KERNEL_HPP
