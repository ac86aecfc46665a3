// Kernel layer, vector unit: the FP32 -> (FP16 hi, FP16 lo) split of
// cpu_fallback.split, written straight into the Zz fractal layout the GEMM
// kernel loads.  For every element x (non-finite ones first replaced by +0,
// the backend contract; see below):
//
//   hi = fp16(x)                        Cast, round to nearest even
//   lo = fp16((x - f32(hi)) * 2^sb)     Cast back (exact), Sub (exact), Muls (exact), Cast RNE
//
// Input: (batch * rows) x cols FP32 row-major, rows and cols multiples of 16
// (the host zero-pads).  Work: strips of 16 rows, round-robin over the cores,
// in column tiles of at most schedule::kSplitTileCols, two tiles in UB at once
// (stage t % 2), so the load of one tile, the vector work on another and the
// store of a third overlap.  Each row is loaded with its 16-element pieces a
// fractal apart, so the tile sits in UB in Zz order; everything below is
// elementwise, and the tile's hi and lo each leave in one contiguous burst
// (a 16-row strip is contiguous in the Zz output).  The pipeline model
// (tuning/pipeline.py, docs/ascend_pipeline_model.md) predicted this layout
// at 2.9x less split time than 32 copies of 32-byte bursts per tile.
//
// Non-finite inputs become +0 here, on the vector unit, before anything
// reaches the cube.  Why in the kernel: 910A's cube in its default saturation
// mode turns Inf into ~65504 and NaN into 0, 910B's does not, and Mmad's doc
// warns that NaN inputs may cause execution errors; the API layer also zeroes
// them (sgemm_cube/backends/npu.py) but npu.matmul can be called directly.
// How: integer and bit operations only, so the result cannot depend on the
// chip's float saturation mode (910A turns `inf * 0` into 0, not NaN) or on
// NaN semantics of its float compare.  Every call below exists for these
// types on dav-c100 and dav-c220 (impl/basic_api/dav_c{100,220}/
// kernel_operator_vec_binary_impl.h, ..._vec_duplicate_impl.h); per-element
// Select and Compares do not exist on 910A (Select mode 0 applies one
// 128-bit mask to every repeat).  With b = bits(x) as int32:
//
//   e = b & 0x7F800000       exponent field (And on the uint16 view)
//   u = e - 0x7F800000       0 for Inf/NaN, negative for finite x (no overflow)
//   m = max(u, -1)           -1 (all ones) for finite x, 0 for Inf/NaN
//   b = b & m                finite x unchanged, Inf/NaN -> +0
#ifndef SGEMM_CUBE_KERNEL_SPLIT_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_SPLIT_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"

namespace sgemm_cube {
namespace kernel {

struct SplitArgs {
    uint32_t batch, rows, cols;  ///< padded sizes, multiples of 16
    uint32_t plan_cores;         ///< vector cores the host planned with
    float scale;                 ///< 2^sb, exact
};

template <class SocTag>
__aicore__ inline void RunSplit(__gm__ float* x, __gm__ half* hi, __gm__ half* lo, const SplitArgs& args)
{
    using AscendC::LocalTensor;
    constexpr uint32_t kTile = schedule::kCube * schedule::kSplitTileCols;  // elements of the largest tile
    const schedule::SplitGeometry s = schedule::make_split_geometry(args.batch, args.rows, args.cols, args.plan_cores);
    const uint32_t core = uint32_t(AscendC::GetBlockIdx());
    if (core >= s.cores) {
        return;
    }
    AscendC::GlobalTensor<float> gx;
    AscendC::GlobalTensor<half> ghi, glo;
    gx.SetGlobalBuffer(x);
    ghi.SetGlobalBuffer(hi);
    glo.SetGlobalBuffer(lo);

    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::VECCALC> ub;
    pipe.InitBuffer(ub, schedule::kSplitUbBytes);
    const LocalTensor<uint8_t> base = ub.Get<uint8_t>();
    // Per stage: x (FP32), tmp (FP32), hi, lo (FP16); then the two constants.
    LocalTensor<float> vx[schedule::kSplitStages], vtmp[schedule::kSplitStages];
    LocalTensor<half> vhi[schedule::kSplitStages], vlo[schedule::kSplitStages];
    for (uint32_t st = 0; st < schedule::kSplitStages; ++st) {
        const uint32_t at = st * schedule::kSplitStageBytes;
        vx[st] = base[at].ReinterpretCast<float>();
        vtmp[st] = base[at + kTile * 4].ReinterpretCast<float>();
        vhi[st] = base[at + kTile * 8].ReinterpretCast<half>();
        vlo[st] = base[at + kTile * 10].ReinterpretCast<half>();
    }
    const uint32_t consts = schedule::kSplitStages * schedule::kSplitStageBytes;
    LocalTensor<int32_t> vexp = base[consts].ReinterpretCast<int32_t>();
    LocalTensor<int32_t> vones = base[consts + kTile * 4].ReinterpretCast<int32_t>();
    pipe.Destroy();

    // Constants of the non-finite test (see the file comment), once.
    AscendC::Duplicate<int32_t>(vexp, int32_t(0x7F800000), int32_t(kTile));  // FP32 exponent field
    AscendC::Duplicate<int32_t>(vones, int32_t(-1), int32_t(kTile));         // all bits set
    AscendC::PipeBarrier<PIPE_V>();
    for (uint32_t st = 0; st < schedule::kSplitStages; ++st) {
        AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(int32_t(st));  // vx[st] free
        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(int32_t(st));  // vhi[st] / vlo[st] free
    }
    uint32_t seq = 0;
    for (uint32_t strip = core; strip < s.strips; strip += s.cores) {
        for (uint32_t t = 0; t < s.tiles_per_strip; ++t, ++seq) {
            const uint32_t st = seq % schedule::kSplitStages;
            const int32_t ev = int32_t(st);
            const uint32_t w = schedule::split_tile_cols(s, t);
            const uint32_t count = schedule::kCube * w;
            // GM -> UB, row by row: the pieces of row r go to p * 256 + r * 16 (Zz order).
            AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(ev);
            const schedule::RowPieces rp = schedule::split_row_pieces(w);
            for (uint32_t r = 0; r < schedule::kCube; ++r) {
                AscendC::DataCopy(vx[st][schedule::split_ub_row_offset(r)], gx[schedule::split_in_offset(s, strip, t, r)],
                                  AscendC::DataCopyParams(uint16_t(rp.pieces), uint16_t(rp.piece_blocks), 0,
                                                          uint16_t(rp.ub_gap_blocks)));
            }
            AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(ev);
            AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(ev);
            // Non-finite -> +0 (see the file comment).
            LocalTensor<uint16_t> xu = vx[st].ReinterpretCast<uint16_t>();
            LocalTensor<uint16_t> tu = vtmp[st].ReinterpretCast<uint16_t>();
            LocalTensor<int32_t> ti = vtmp[st].ReinterpretCast<int32_t>();
            AscendC::And(tu, xu, vexp.ReinterpretCast<uint16_t>(), int32_t(2 * count));  // e
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Sub(ti, ti, vexp, int32_t(count));                                  // u = e - 0x7F800000
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Max(ti, ti, vones, int32_t(count));                                 // m = max(u, -1)
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::And(xu, xu, tu, int32_t(2 * count));                                // x & m
            AscendC::PipeBarrier<PIPE_V>();
            // The split.
            AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(ev);
            AscendC::Cast(vhi[st], vx[st], SocTag::kToHalf, count);                  // hi = fp16(x)
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Cast(vtmp[st], vhi[st], AscendC::RoundMode::CAST_NONE, count);  // f32(hi), exact
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Sub(vtmp[st], vx[st], vtmp[st], int32_t(count));               // x - f32(hi), exact
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Muls(vtmp[st], vtmp[st], args.scale, int32_t(count));           // * 2^sb, exact
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Cast(vlo[st], vtmp[st], SocTag::kToHalf, count);                // lo, round to nearest even
            AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(ev);
            AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(ev);
            AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(ev);
            // UB -> GM: the tile is one contiguous Zz range; one burst per part.
            const uint64_t out = schedule::split_out_offset(s, strip, t);
            const AscendC::DataCopyParams burst(1, uint16_t(count * schedule::kHalfBytes / schedule::kBlockBytes), 0, 0);
            AscendC::DataCopy(ghi[out], vhi[st], burst);
            AscendC::DataCopy(glo[out], vlo[st], burst);
            AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(ev);
        }
    }
    for (uint32_t st = 0; st < schedule::kSplitStages; ++st) {
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(int32_t(st));
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(int32_t(st));
    }
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_SPLIT_KERNEL_HPP
