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
// in column tiles of at most schedule::kSplitTileCols (one tile in UB at a time).
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
    LocalTensor<float> vx = base[0].ReinterpretCast<float>();
    LocalTensor<float> vtmp = base[kTile * 4].ReinterpretCast<float>();
    LocalTensor<half> vhi = base[kTile * 8].ReinterpretCast<half>();
    LocalTensor<half> vlo = base[kTile * 10].ReinterpretCast<half>();
    LocalTensor<int32_t> vexp = base[kTile * 12].ReinterpretCast<int32_t>();
    LocalTensor<int32_t> vones = base[kTile * 16].ReinterpretCast<int32_t>();
    pipe.Destroy();

    // Constants of the non-finite test (see the file comment), once.
    AscendC::Duplicate<int32_t>(vexp, int32_t(0x7F800000), int32_t(kTile));  // FP32 exponent field
    AscendC::Duplicate<int32_t>(vones, int32_t(-1), int32_t(kTile));         // all bits set
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(0);  // vx free
    AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(0);  // vhi / vlo free

    for (uint32_t strip = core; strip < s.strips; strip += s.cores) {
        for (uint32_t t = 0; t < s.tiles_per_strip; ++t) {
            const uint32_t w = schedule::split_tile_cols(s, t);
            const uint32_t count = schedule::kCube * w;
            // GM -> UB: 16 rows of w floats.
            AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(0);
            const uint64_t in = schedule::split_in_offset(s, strip, t);
            const uint32_t row_blocks = w * schedule::kFloatBytes / schedule::kBlockBytes;
            const uint32_t gap = (s.cols - w) * schedule::kFloatBytes / schedule::kBlockBytes;
            if (gap <= schedule::kMaxGap) {
                AscendC::DataCopy(vx, gx[in], AscendC::DataCopyParams(schedule::kCube, uint16_t(row_blocks),
                                                                      uint16_t(gap), 0));
            } else {
                for (uint32_t r = 0; r < schedule::kCube; ++r) {
                    AscendC::DataCopy(vx[r * w], gx[in + uint64_t(r) * s.cols],
                                      AscendC::DataCopyParams(1, uint16_t(row_blocks), 0, 0));
                }
            }
            AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(0);
            AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(0);

            // Non-finite -> +0 (see the file comment).
            LocalTensor<uint16_t> xu = vx.ReinterpretCast<uint16_t>();
            LocalTensor<uint16_t> tu = vtmp.ReinterpretCast<uint16_t>();
            LocalTensor<int32_t> ti = vtmp.ReinterpretCast<int32_t>();
            AscendC::And(tu, xu, vexp.ReinterpretCast<uint16_t>(), int32_t(2 * count));  // e
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Sub(ti, ti, vexp, int32_t(count));                                  // u = e - 0x7F800000
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Max(ti, ti, vones, int32_t(count));                                 // m = max(u, -1)
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::And(xu, xu, tu, int32_t(2 * count));                                // x & m
            AscendC::PipeBarrier<PIPE_V>();

            // The split.
            AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(0);
            AscendC::Cast(vhi, vx, SocTag::kToHalf, count);                      // hi = fp16(x)
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Cast(vtmp, vhi, AscendC::RoundMode::CAST_NONE, count);    // f32(hi), exact
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Sub(vtmp, vx, vtmp, int32_t(count));                      // x - f32(hi), exact
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Muls(vtmp, vtmp, args.scale, int32_t(count));             // * 2^sb, exact
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Cast(vlo, vtmp, SocTag::kToHalf, count);                    // lo, round to nearest even
            AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(0);
            AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(0);
            AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(0);

            // UB -> GM in Zz: row r's 16-element pieces land one fractal (15 blocks of gap) apart.
            for (uint32_t r = 0; r < schedule::kCube; ++r) {
                const uint64_t out = schedule::split_out_offset(s, strip, t, r);
                const AscendC::DataCopyParams zz(uint16_t(w / schedule::kCube), 1, 0, schedule::kCube - 1);
                AscendC::DataCopy(ghi[out], vhi[r * w], zz);
                AscendC::DataCopy(glo[out], vlo[r * w], zz);
            }
            AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(0);
        }
    }
    AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(0);
    AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(0);
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_SPLIT_KERNEL_HPP
