// Tile layer, vector unit: the element operations of the line statistics on 16 x 256 tiles in UB
// (kernel/line_stats_kernel.hpp has the arithmetic and why nothing can overflow; the kernel layer schedules
// the tiles, their loads into the input stages and the flags between pipes).  The four steps of a tile are
// split so that the kernel can interleave two tiles (Front, Back: this tile's steps 1 and 2 beside the
// previous tile's steps 3 and 4); the accumulators keep the tile's shape until a work item ends, then are
// reduced (ReduceRows / ReduceColumns, vector) and decoded per line (DecodeRows / DecodeColumns, scalar).
#ifndef SGEMM_CUBE_TILE_LINE_STATS_TILE_HPP
#define SGEMM_CUBE_TILE_LINE_STATS_TILE_HPP

#include "kernel_operator.h"
#include "sgemm_cube/guard/line_meta.hpp"
#include "sgemm_cube/schedule/schedule.hpp"

namespace sgemm_cube {
namespace tile {

/// The UB tiles of the line statistics: kStages input tiles x, two pairs of work tiles p, q, the
/// accumulators A, P, Q, the one-block constants and the output staging (schedule::kStatsUbBytes).
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

    /// The scalar unit, after ReduceRows: the 16 rows' statistics into out_ (big at 0, small_w at 256, finite
    /// at 512) from the 8 values per row and accumulator left (row r at r * 256).
    __aicore__ inline void DecodeRows()
    {
        constexpr uint32_t kCols = schedule::kStatsTileCols;
        for (uint32_t r = 0; r < schedule::kCube; ++r) {
            int32_t a = 0, p = -kExp, q = int32_t(guard::kNoSmall);
            for (uint32_t c = 0; c < 8; ++c) {
                const int32_t va = acc_a_.GetValue(r * kCols + c);
                const int32_t vp = acc_p_.GetValue(r * kCols + c);
                const int32_t vq = acc_q_.GetValue(r * kCols + c);
                a = va > a ? va : a;
                p = vp > p ? vp : p;
                q = vq < q ? vq : q;
            }
            out_.SetValue(r, Big(p));
            out_.SetValue(kCols + r, SmallW(q));
            out_.SetValue(2 * kCols + r, Finite(a));
        }
    }
    /// The scalar unit, after ReduceColumns: the first `lines` columns' statistics into out_ (as DecodeRows).
    __aicore__ inline void DecodeColumns(uint32_t lines)
    {
        constexpr uint32_t kCols = schedule::kStatsTileCols;
        for (uint32_t c = 0; c < lines; ++c) {
            out_.SetValue(c, Big(acc_p_.GetValue(c)));
            out_.SetValue(kCols + c, SmallW(acc_q_.GetValue(c)));
            out_.SetValue(2 * kCols + c, Finite(acc_a_.GetValue(c)));
        }
    }

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

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_LINE_STATS_TILE_HPP
