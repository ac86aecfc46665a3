// Kernel layer, vector unit: the fix-up rows of A (class >= fixup_min_class in their packed integers) computed
// in plain FP32 on the device from the UNSCALED operands, as guard.py defines the fix-up where the
// hardware has no FP64: the products summed in K order, each product and each sum rounded to FP32
// (recursive summation: tests/guarantee_data.sequential_fp32), then times alpha (alpha_mant, then the
// exact power of two 2^alpha_exp: tile/unscale_tile.hpp's ApplyPow2).  No scaling: a line spanning FP32's
// whole range loses none of its entries, and an infinity meets its partners as they are.  NaN and
// infinities come out as IEEE arithmetic gives them, as native SGEMM's do; the sums can overflow
// part-way, as native's can.
//
// Vectorised over the columns of a chunk (kUnscaleTile), sequential over K: for each k the row's entry
// (a scalar) times B's row k chunk (Muls), added to the accumulator (Add), two roundings as recursive
// summation has.  Every listed row reads all of B.  A rare path: plain PipeBarrier<PIPE_ALL> between
// dependent steps instead of per-buffer flags.  A batch whose word says no line is listed
// (batch_flags.hpp) is skipped without reading its rows' integers.
#ifndef SGEMM_CUBE_KERNEL_FIXUP_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_FIXUP_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/kernel/batch_flags.hpp"
#include "sgemm_cube/kernel/split_kernel.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"
#include "sgemm_cube/tile/unscale_tile.hpp"
#include "sgemm_cube/tile/vector_stages.hpp"

namespace sgemm_cube {
namespace kernel {

struct FixupArgs {
    uint32_t batch, mp, np, kp;  ///< padded sizes; A (batch * mp) x kp, B (batch * kp) x np, C (batch * mp) x np
    uint32_t k;                  ///< the product's K: the sum stops there (adding the padding's +0 could turn -0 into +0)
    uint32_t fixup_min_class;           ///< guard.fixup_min_class: 1 (fixup) or 2
    uint32_t plan_cores;
    float alpha_mant;            ///< alpha = alpha_mant * 2^alpha_exp, as the unscale kernel takes it
    int32_t alpha_exp;
};

/// The FP32 value of a bit pattern (a power of two from line_factors).
__aicore__ inline float bits_to_float(uint32_t bits)
{
    union {
        uint32_t u;
        float f;
    } x;
    x.u = bits;
    return x.f;
}

template <class SocTag>
__aicore__ inline void RunFixupRows(__gm__ float* a, __gm__ float* b, __gm__ int32_t* meta_a, __gm__ int32_t* meta_b,
                                    __gm__ float* c, __gm__ float* flags, const FixupArgs& args)
{
    constexpr uint32_t kW = schedule::kUnscaleTile;
    const uint32_t rows = args.batch * args.mp;
    const uint32_t cores = schedule::min_u32(args.plan_cores, rows);
    const uint32_t core = uint32_t(AscendC::GetBlockIdx());
    if (core >= cores) {
        return;
    }
    (void)meta_b;  // the fix-up uses the unscaled operands: B's line meta is not needed here
    AscendC::GlobalTensor<float> ga, gb, gc;
    AscendC::GlobalTensor<int32_t> gma;
    ga.SetGlobalBuffer(a);
    gb.SetGlobalBuffer(b);
    gc.SetGlobalBuffer(c);
    gma.SetGlobalBuffer(meta_a);
    const AscendC::LocalTensor<uint8_t> base = tile::VectorUb(schedule::kFixupUbBytes);
    tile::UnscaleTile v;  // v.c accumulates, v.s holds alpha's exponent
    v.Init(base);
    const uint32_t at = schedule::kUnscaleUbBytes;
    const AscendC::LocalTensor<float> brow = base[at].ReinterpretCast<float>();
    const AscendC::LocalTensor<float> arow = base[at + kW * 4].ReinterpretCast<float>();
    const AscendC::LocalTensor<int32_t> ameta = base[at + 2 * kW * 4].ReinterpretCast<int32_t>();
    BatchFlags batch_flags;  // null flags (the FP32 route): every batch may have listed rows
    batch_flags.Init(v.flags, flags);

    for (uint32_t r = core; r < rows; r += cores) {
        if (!batch_flags.Any(r / args.mp, r / args.mp, schedule::kFlagListed)) {
            continue;  // no listed line in this batch
        }
        AscendC::DataCopy(ameta, gma[r & ~7u], AscendC::DataCopyParams(1, 1, 0, 0));  // the 8 rows around r
        AscendC::PipeBarrier<PIPE_ALL>();
        const guard::LineMeta row = guard::unpack(ameta.GetValue(r & 7u));
        AscendC::PipeBarrier<PIPE_ALL>();  // read before the next row's integers arrive
        if (row.cls < int32_t(args.fixup_min_class)) {
            continue;
        }
        const uint32_t batch = r / args.mp;
        for (uint32_t col0 = 0; col0 < args.np; col0 += kW) {
            const uint32_t w = schedule::min_u32(kW, args.np - col0);
            const int32_t n = int32_t(w);
            AscendC::Duplicate<int32_t>(v.s, args.alpha_exp, n);  // the result's power of two: alpha's only
            AscendC::Duplicate<float>(v.c, 0.0f, n);               // the accumulators
            AscendC::PipeBarrier<PIPE_ALL>();
            for (uint32_t k0 = 0; k0 < args.k; k0 += kW) {
                const uint32_t ka = schedule::min_u32(kW, args.k - k0);
                const uint32_t load = schedule::round_up(ka, 8);  // whole 32-byte blocks (within the padded row)
                AscendC::DataCopy(arow, ga[uint64_t(r) * args.kp + k0],
                                  AscendC::DataCopyParams(1, uint16_t(load * 4 / schedule::kBlockBytes), 0, 0));
                AscendC::PipeBarrier<PIPE_ALL>();
                for (uint32_t k = 0; k < ka; ++k) {
                    const float x = arow.GetValue(k);
                    AscendC::DataCopy(brow, gb[(uint64_t(batch) * args.kp + k0 + k) * args.np + col0],
                                      AscendC::DataCopyParams(1, uint16_t(w * 4 / schedule::kBlockBytes), 0, 0));
                    AscendC::PipeBarrier<PIPE_ALL>();
                    AscendC::Muls(brow, brow, x, n);  // fl(a b)
                    AscendC::PipeBarrier<PIPE_V>();
                    AscendC::Add(v.c, v.c, brow, n);  // fl(acc + a b)
                    AscendC::PipeBarrier<PIPE_ALL>();
                }
            }
            if (args.alpha_mant != 1.0f) {
                AscendC::Muls(v.c, v.c, args.alpha_mant, n);
                AscendC::PipeBarrier<PIPE_V>();
            }
            tile::ApplyPow2(v, n);
            AscendC::PipeBarrier<PIPE_ALL>();
            AscendC::DataCopy(gc[uint64_t(r) * args.np + col0], v.c,
                              AscendC::DataCopyParams(1, uint16_t(w * 4 / schedule::kBlockBytes), 0, 0));
            AscendC::PipeBarrier<PIPE_ALL>();
        }
    }
    batch_flags.Finish();
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_FIXUP_KERNEL_HPP
