// Tile layer, vector unit: the element operations of the split kernel on one tile in UB
// (kernel/split_kernel.hpp has the arithmetic and why each step is exact; the kernel layer
// schedules the tiles, their copies and the flags between pipes).  Every function issues
// vector instructions on `count` elements, each behind a PIPE_V barrier: the vector unit
// may reorder unordered instructions on the same UB.
#ifndef SGEMM_CUBE_TILE_SPLIT_TILE_HPP
#define SGEMM_CUBE_TILE_SPLIT_TILE_HPP

#include "kernel_operator.h"
#include "sgemm_cube/schedule/schedule.hpp"

namespace sgemm_cube {
namespace tile {

/// One UB stage of the split: the FP32 tile, an FP32 work tile, and the two FP16 parts.
struct SplitStage {
    AscendC::LocalTensor<float> x, tmp;
    AscendC::LocalTensor<half> hi, lo;
};

/// The bound test's constants, one tile each: the bound's bits, all ones, all but the sign.
struct SplitBound {
    AscendC::LocalTensor<int32_t> bound, ones, abs_mask;
};

/// The split's UB (schedule::kSplitUbBytes), carved in this order: kSplitStages stages of kSplitStageBytes, the
/// bound test's constants, the two factor tiles, the packed integers of kSplitTileCols lines, the staging of
/// the batches' words (kernel/batch_flags.hpp).  Every tile holds the largest split tile (16 x kSplitTileCols).
struct SplitUb {
    SplitStage stage[schedule::kSplitStages];
    SplitBound bound;
    AscendC::LocalTensor<float> f1, f2;    ///< factor tiles 2^t1, 2^t2 (scaled lines)
    AscendC::LocalTensor<int32_t> meta;    ///< the lines' packed integers
    AscendC::LocalTensor<uint8_t> flags;   ///< the batches' words

    __aicore__ inline void Init(const AscendC::LocalTensor<uint8_t>& base)
    {
        constexpr uint32_t kTile = schedule::kCube * schedule::kSplitTileCols;
        for (uint32_t st = 0; st < schedule::kSplitStages; ++st) {  // x (FP32), tmp (FP32), hi, lo (FP16)
            const uint32_t at = st * schedule::kSplitStageBytes;
            stage[st].x = base[at].ReinterpretCast<float>();
            stage[st].tmp = base[at + kTile * 4].ReinterpretCast<float>();
            stage[st].hi = base[at + kTile * 8].ReinterpretCast<half>();
            stage[st].lo = base[at + kTile * 10].ReinterpretCast<half>();
        }
        const uint32_t consts = schedule::kSplitStages * schedule::kSplitStageBytes;
        bound.bound = base[consts].ReinterpretCast<int32_t>();
        bound.ones = base[consts + kTile * 4].ReinterpretCast<int32_t>();
        bound.abs_mask = base[consts + kTile * 8].ReinterpretCast<int32_t>();
        f1 = base[consts + kTile * 12].ReinterpretCast<float>();
        f2 = base[consts + kTile * 16].ReinterpretCast<float>();
        meta = base[consts + kTile * 20].ReinterpretCast<int32_t>();
        flags = base[consts + kTile * 20 + schedule::kSplitTileCols * 4];
    }
};

/// The bound test's constants over `count` elements: the bound's bits (`keep_below`), all ones, all but the
/// sign; then a barrier (the test reads them).
__aicore__ inline void FillSplitBound(const SplitBound& c, uint32_t keep_below, uint32_t count)
{
    AscendC::Duplicate<int32_t>(c.bound, int32_t(keep_below), int32_t(count));
    AscendC::Duplicate<int32_t>(c.ones, int32_t(-1), int32_t(count));               // all bits set
    AscendC::Duplicate<int32_t>(c.abs_mask, int32_t(0x7FFFFFFF), int32_t(count));  // all but the sign
    AscendC::PipeBarrier<PIPE_V>();
}

/// x * f1 * f2: the line scaling by 2^t1 * 2^t2, elementwise against the factor tiles.
__aicore__ inline void ScaleByFactors(const SplitStage& v, const AscendC::LocalTensor<float>& f1,
                                      const AscendC::LocalTensor<float>& f2, uint32_t count)
{
    AscendC::Mul(v.x, v.x, f1, int32_t(count));
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Mul(v.x, v.x, f2, int32_t(count));
    AscendC::PipeBarrier<PIPE_V>();
}

/// |x| at or above the bound (`keep_below`), NaN and Inf -> +0, with integer and bit operations only.
__aicore__ inline void ZeroUnsplittable(const SplitStage& v, const SplitBound& c, uint32_t count)
{
    using AscendC::LocalTensor;
    LocalTensor<uint16_t> xu = v.x.ReinterpretCast<uint16_t>();
    LocalTensor<uint16_t> tu = v.tmp.ReinterpretCast<uint16_t>();
    LocalTensor<int32_t> ti = v.tmp.ReinterpretCast<int32_t>();
    AscendC::And(tu, xu, c.abs_mask.ReinterpretCast<uint16_t>(), int32_t(2 * count));  // a
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Sub(ti, ti, c.bound, int32_t(count));                                     // u = a - L
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Max(ti, ti, c.ones, int32_t(count));                                      // max(u, -1)
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Mins(ti, ti, int32_t(0), int32_t(count));                                 // m
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::And(xu, xu, tu, int32_t(2 * count));                                      // x & m
    AscendC::PipeBarrier<PIPE_V>();
}

/// The band cutoff (kernel/split_kernel.hpp): |x| below `keep_from` (FP32 bits, nonzero) -> +0, with integer
/// and bit operations only, after ZeroUnsplittable (an entry it zeroed has |x| = 0 < keep_from: still +0).
/// With a = bits(|x|) and F = keep_from: n = min(max((F - 1) - a, -1), 0) is -1 (all ones) where a >= F and 0
/// where a < F (F - 1 - a lies in [-2^31 + 1, 2^31 - 1]: no overflow); x & n.  Scalar operands only (Muls,
/// Adds, Maxs, Mins on int32, every one on dav-c100 and dav-c220): no constant tile, so the split's UB is
/// unchanged.  Six more instructions, issued only for a band (keep_from != 0).
__aicore__ inline void ZeroBelow(const SplitStage& v, const SplitBound& c, uint32_t keep_from, uint32_t count)
{
    using AscendC::LocalTensor;
    LocalTensor<uint16_t> xu = v.x.ReinterpretCast<uint16_t>();
    LocalTensor<uint16_t> tu = v.tmp.ReinterpretCast<uint16_t>();
    LocalTensor<int32_t> ti = v.tmp.ReinterpretCast<int32_t>();
    const int32_t below = int32_t(keep_from) - 1;  // a > below keeps: the lower bound itself is in the window
    AscendC::And(tu, xu, c.abs_mask.ReinterpretCast<uint16_t>(), int32_t(2 * count));  // a
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Muls(ti, ti, int32_t(-1), int32_t(count));                                // -a
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Adds(ti, ti, below, int32_t(count));                                      // (F - 1) - a
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Maxs(ti, ti, int32_t(-1), int32_t(count));
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Mins(ti, ti, int32_t(0), int32_t(count));                                 // n
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::And(xu, xu, tu, int32_t(2 * count));                                      // x & n
    AscendC::PipeBarrier<PIPE_V>();
}

/// hi = fp16(x); lo = fp16((x - f32(hi)) * scale), the chip's FP32 -> FP16 rounding `to_half`.
/// The last Cast is left unbarriered: the caller's flag to MTE3 orders the store after it.
__aicore__ inline void SplitToHalves(const SplitStage& v, AscendC::RoundMode to_half, float scale, uint32_t count)
{
    AscendC::Cast(v.hi, v.x, to_half, count);                          // hi = fp16(x)
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Cast(v.tmp, v.hi, AscendC::RoundMode::CAST_NONE, count);  // f32(hi), exact
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Sub(v.tmp, v.x, v.tmp, int32_t(count));                  // x - f32(hi), exact
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Muls(v.tmp, v.tmp, scale, int32_t(count));                // * 2^sb, exact
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Cast(v.lo, v.tmp, to_half, count);                        // lo, round to nearest even
}

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_SPLIT_TILE_HPP
