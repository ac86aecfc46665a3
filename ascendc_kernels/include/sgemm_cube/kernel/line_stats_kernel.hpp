// Kernel layer, vector unit: the statistics of every line (row of A or column of B) that
// the accuracy guarantee's bookkeeping starts from (guard/line_meta.hpp, cpu_fallback/guard.py
// line_stats): per line the bits of its largest finite magnitude (`big`), of its smallest
// nonzero finite magnitude minus 1 (`small_w`) and whether every entry is finite (`finite`).
//
// Integer and bit operations only, as the split's non-finite test, so nothing depends on
// the chip's float saturation mode or NaN compares.  With b = bits(x) as int32:
//
//   a  = b & 0x7FFFFFFF            |x| (bit patterns of non-negative floats order as the values)
//   m  = max((b & 0x7F800000) - 0x7F800000, -1)     -1 for finite x, 0 for NaN/Inf
//   fa = a & m                     |x| if finite, else 0              -> max over the line: big
//   w  = max((a - 1) & 0x7FFFFFFF, (-1 - m) & 0x7FFFFFFF)
//                                  |x| - 1 if finite and nonzero, else 0x7FFFFFFF
//                                                                    -> min over the line: small_w
//   m                                                                -> max over the line: finite
// Zero entries (the host's padding, the tile's unused columns) are neutral in all three.
//
// A tile is 16 rows x 256 columns (4096 int32).  Along rows (A), the tile is loaded in Zz
// order, as the split does: piece p of row r at p * 256 + r * 16.  Along columns (B), row-major.
// Either way three halvings of contiguous halves (4096 -> 2048 -> ... -> 256) reduce the
// tile: along columns to one value per column; along rows to 16 per row, which the scalar
// unit finishes at the end of the strip.
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

    __aicore__ inline void Init(const AscendC::LocalTensor<uint8_t>& base)
    {
        constexpr uint32_t kTileBytes = schedule::kStatsTile * 4;
        x_ = base[0].ReinterpretCast<int32_t>();
        fa_ = base[kTileBytes].ReinterpretCast<int32_t>();
        m_ = base[2 * kTileBytes].ReinterpretCast<int32_t>();
        tmp_ = base[3 * kTileBytes].ReinterpretCast<int32_t>();
        abs_ = base[4 * kTileBytes].ReinterpretCast<int32_t>();
        exp_ = base[5 * kTileBytes].ReinterpretCast<int32_t>();
        minus1_ = base[6 * kTileBytes].ReinterpretCast<int32_t>();
        plus1_ = base[7 * kTileBytes].ReinterpretCast<int32_t>();
        const uint32_t acc = 8 * kTileBytes;
        acc_big_ = base[acc].ReinterpretCast<int32_t>();
        acc_small_ = base[acc + schedule::kStatsTileCols * 4].ReinterpretCast<int32_t>();
        acc_finite_ = base[acc + 2 * schedule::kStatsTileCols * 4].ReinterpretCast<int32_t>();
        out_ = base[acc + 3 * schedule::kStatsTileCols * 4].ReinterpretCast<int32_t>();
        constexpr int32_t n = int32_t(schedule::kStatsTile);
        AscendC::Duplicate<int32_t>(abs_, int32_t(0x7FFFFFFF), n);
        AscendC::Duplicate<int32_t>(exp_, int32_t(guard::kExpMask), n);
        AscendC::Duplicate<int32_t>(minus1_, int32_t(-1), n);
        AscendC::Duplicate<int32_t>(plus1_, int32_t(1), n);
        AscendC::PipeBarrier<PIPE_V>();
    }

    /// The tile (x_) reduced to 256 values of each statistic, folded into the accumulators.
    __aicore__ inline void Reduce()
    {
        constexpr int32_t n = int32_t(schedule::kStatsTile);
        const U16 xu = x_.ReinterpretCast<uint16_t>(), fau = fa_.ReinterpretCast<uint16_t>();
        const U16 mu = m_.ReinterpretCast<uint16_t>(), tu = tmp_.ReinterpretCast<uint16_t>();
        const U16 absu = abs_.ReinterpretCast<uint16_t>(), expu = exp_.ReinterpretCast<uint16_t>();
        AscendC::And(mu, xu, expu, 2 * n);          // exponent field
        AscendC::And(tu, xu, absu, 2 * n);          // a = |x|
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Sub(m_, m_, exp_, n);              // 0 for NaN/Inf, negative for finite x
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Max(m_, m_, minus1_, n);           // m
        AscendC::Sub(x_, tmp_, plus1_, n);          // a - 1 (x is not needed any more)
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::And(fau, tu, mu, 2 * n);           // fa = a & m
        AscendC::And(xu, xu, absu, 2 * n);          // (a - 1) & 0x7FFFFFFF
        AscendC::PipeBarrier<PIPE_V>();             // a (in tmp) is read above and replaced below
        AscendC::Sub(tmp_, minus1_, m_, n);         // -1 - m
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::And(tu, tu, absu, 2 * n);          // (-1 - m) & 0x7FFFFFFF
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Max(x_, x_, tmp_, n);              // w
        AscendC::PipeBarrier<PIPE_V>();
        for (int32_t half = n / 2; half >= int32_t(schedule::kStatsTileCols); half /= 2) {
            AscendC::Max(fa_, fa_, fa_[half], half);
            AscendC::Min(x_, x_, x_[half], half);
            AscendC::Max(m_, m_, m_[half], half);
            AscendC::PipeBarrier<PIPE_V>();
        }
        constexpr int32_t cols = int32_t(schedule::kStatsTileCols);
        AscendC::Max(acc_big_, acc_big_, fa_, cols);
        AscendC::Min(acc_small_, acc_small_, x_, cols);
        AscendC::Max(acc_finite_, acc_finite_, m_, cols);
        AscendC::PipeBarrier<PIPE_V>();
    }

    /// Accumulators to the neutral values of max / min / max (after the previous readers are done).
    __aicore__ inline void ResetAccumulators()
    {
        constexpr int32_t cols = int32_t(schedule::kStatsTileCols);
        AscendC::Duplicate<int32_t>(acc_big_, int32_t(0), cols);
        AscendC::Duplicate<int32_t>(acc_small_, int32_t(guard::kNoSmall), cols);
        AscendC::Duplicate<int32_t>(acc_finite_, int32_t(-1), cols);
        AscendC::PipeBarrier<PIPE_V>();
    }

    I32 x_, fa_, m_, tmp_, abs_, exp_, minus1_, plus1_;
    I32 acc_big_, acc_small_, acc_finite_, out_;
};

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

    constexpr uint32_t kCols = schedule::kStatsTileCols;
    // The accumulators are read at the end of an item by the scalar unit (along rows) or by MTE3
    // (along columns); the next item resets them after that.
    AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(0);  // x tile free
    if (g.along_rows) {
        AscendC::SetFlag<AscendC::HardEvent::S_V>(0);     // accumulators read
        AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(0);  // output staging written out
    } else {
        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(0);  // accumulators written out
    }
    for (uint32_t w = core; w < g.work; w += g.cores) {
        if (g.along_rows) {
            AscendC::WaitFlag<AscendC::HardEvent::S_V>(0);
        } else {
            AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(0);
        }
        tile.ResetAccumulators();
        const uint32_t first_tile = g.along_rows ? 0 : w % g.col_tiles;
        const uint32_t tiles = g.along_rows ? g.col_tiles : g.rows / schedule::kCube;  // steps of this item
        for (uint32_t i = 0; i < tiles; ++i) {
            const uint32_t t = g.along_rows ? i : first_tile;
            const uint32_t strip = g.along_rows ? w : (w / g.col_tiles) * (g.rows / schedule::kCube) + i;
            const uint32_t cols = schedule::stats_tile_cols(g, t);
            AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(0);
            if (cols < kCols) {  // zeros are neutral: the unused columns of the tile
                AscendC::Duplicate<int32_t>(tile.x_, int32_t(0), int32_t(schedule::kStatsTile));
                AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(1);
                AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(1);
            }
            if (g.along_rows) {
                // Row r's 16-element pieces a fractal apart (Zz order), as the split loads them.
                const schedule::RowPieces rp = schedule::split_row_pieces(cols);
                for (uint32_t r = 0; r < schedule::kCube; ++r) {
                    AscendC::DataCopy(tile.x_[schedule::split_ub_row_offset(r)],
                                      gx[schedule::stats_in_offset(g, strip, t, r)],
                                      AscendC::DataCopyParams(uint16_t(rp.pieces), uint16_t(rp.piece_blocks), 0,
                                                              uint16_t(rp.ub_gap_blocks)));
                }
            } else {
                // 16 rows, row-major with a row stride of 256 in UB.
                const uint32_t blocks = cols * 4 / schedule::kBlockBytes;
                AscendC::DataCopy(tile.x_, gx[schedule::stats_in_offset(g, strip, t, 0)],
                                  AscendC::DataCopyParams(uint16_t(schedule::kCube), uint16_t(blocks),
                                                          uint16_t((g.cols - cols) * 4 / schedule::kBlockBytes),
                                                          uint16_t((kCols - cols) * 4 / schedule::kBlockBytes)));
            }
            AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(0);
            AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(0);
            tile.Reduce();
            AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(0);
        }
        if (g.along_rows) {
            // 16 values per row left (row r at r * 16): the scalar unit finishes each row.
            AscendC::SetFlag<AscendC::HardEvent::V_S>(0);
            AscendC::WaitFlag<AscendC::HardEvent::V_S>(0);
            AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(0);
            for (uint32_t r = 0; r < schedule::kCube; ++r) {
                int32_t big = 0, small = int32_t(guard::kNoSmall), finite = -1;
                for (uint32_t c = 0; c < schedule::kCube; ++c) {
                    const int32_t b = tile.acc_big_.GetValue(r * schedule::kCube + c);
                    const int32_t s = tile.acc_small_.GetValue(r * schedule::kCube + c);
                    const int32_t f = tile.acc_finite_.GetValue(r * schedule::kCube + c);
                    big = b > big ? b : big;
                    small = s < small ? s : small;
                    finite = f > finite ? f : finite;
                }
                tile.out_.SetValue(r, big);
                tile.out_.SetValue(schedule::kCube + r, small);
                tile.out_.SetValue(2 * schedule::kCube + r, finite);
            }
            AscendC::SetFlag<AscendC::HardEvent::S_V>(0);
            AscendC::SetFlag<AscendC::HardEvent::S_MTE3>(0);
            AscendC::WaitFlag<AscendC::HardEvent::S_MTE3>(0);
            const uint64_t line0 = uint64_t(w) * schedule::kCube;  // strips count rows over the batch
            const AscendC::DataCopyParams two_blocks(1, 2, 0, 0);     // 16 int32
            AscendC::DataCopy(gbig[line0], tile.out_, two_blocks);
            AscendC::DataCopy(gsmall[line0], tile.out_[schedule::kCube], two_blocks);
            AscendC::DataCopy(gfinite[line0], tile.out_[2 * schedule::kCube], two_blocks);
            AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(0);
        } else {
            const uint32_t cols = schedule::stats_tile_cols(g, first_tile);
            const uint64_t line0 = uint64_t(w / g.col_tiles) * g.cols + uint64_t(first_tile) * kCols;
            const AscendC::DataCopyParams run(1, uint16_t(cols * 4 / schedule::kBlockBytes), 0, 0);
            AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(0);
            AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(0);
            AscendC::DataCopy(gbig[line0], tile.acc_big_, run);
            AscendC::DataCopy(gsmall[line0], tile.acc_small_, run);
            AscendC::DataCopy(gfinite[line0], tile.acc_finite_, run);
            AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(0);
        }
    }
    AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(0);
    if (g.along_rows) {
        AscendC::WaitFlag<AscendC::HardEvent::S_V>(0);
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(0);
    } else {
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(0);
    }
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_LINE_STATS_KERNEL_HPP
