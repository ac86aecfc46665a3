// Kernel layer, vector unit: the termwise combination of cpu_fallback
// (small terms first), elementwise over the (batch, mp, np) term buffers:
//
//   corr = LH                         (keep_lo_lo: corr = fl(fl(LL * 2^-sb) + LH))
//   corr = fl(corr + HL)
//   C    = fl(fl(corr * 2^-sb) + HH)
//
// `out` may be the HH buffer itself (each tile is read before it is written).
//
// With the guarantee's integers (CombineUnscale::meta_a not null) the unscale is folded in: the
// result is alpha * C * 2^-(ta_i + tb_j), one rounding, unscale_kernel.hpp's arithmetic on the C just
// combined in UB (RunUnscale with the terms), written over the HH buffer (`out` must be it); the
// separate unscale pass is then not launched.  Its units are whole rows or row chunks (the unscale's
// geometry, which needs each element's row and column), not the flat tiles of the plain combine; the
// elementwise arithmetic is the same, so C's bits are.  Units of batches with no scaled line and
// alpha = 1 are combined and written only (batch_flags.hpp).
#ifndef SGEMM_CUBE_KERNEL_COMBINE_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_COMBINE_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/kernel/unscale_kernel.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"
#include "sgemm_cube/tile/vector_stages.hpp"

namespace sgemm_cube {
namespace kernel {

struct CombineArgs {
    uint64_t total;       ///< elements of one term buffer
    uint32_t plan_cores;  ///< vector cores the host planned with
    uint32_t keep_lo_lo;  ///< 1: a fourth (LL) term buffer exists
    float inv_scale;      ///< 2^-sb, exact
};

/// The unscale folded into the combine (the guarantee's bookkeeping); meta_a null: the plain combine.
struct CombineUnscale {
    __gm__ int32_t* meta_a;
    __gm__ int32_t* meta_b;
    __gm__ float* flags;  ///< the batches' words (batch_flags.hpp); null: every unit is unscaled
    uint32_t batch, mp, np;  ///< the term buffers' padded shape
    float alpha_mant;        ///< alpha = alpha_mant * 2^alpha_exp, as the unscale kernel takes it
    int32_t alpha_exp;
};

template <class SocTag>
__aicore__ inline void RunCombine(__gm__ float* hh, __gm__ float* lh, __gm__ float* hl, __gm__ float* ll,
                                  __gm__ float* out, const CombineArgs& args, const CombineUnscale& unscale)
{
    using AscendC::LocalTensor;
    if (unscale.meta_a != nullptr) {  // folded: in place over HH (out == hh)
        RunUnscale<SocTag>(hh, unscale.meta_a, unscale.meta_b, unscale.flags,
                           UnscaleArgs{unscale.batch, unscale.mp, unscale.np, args.plan_cores, unscale.alpha_mant,
                                       unscale.alpha_exp, 0u},
                           UnscaleTerms{lh, hl, args.keep_lo_lo ? ll : nullptr, args.inv_scale});
        return;
    }
    constexpr uint32_t kTile = schedule::kCombineTile;
    const schedule::CombineGeometry c = schedule::make_combine_geometry(args.total, args.plan_cores);
    const uint32_t core = uint32_t(AscendC::GetBlockIdx());
    if (core >= c.cores) {
        return;
    }
    AscendC::GlobalTensor<float> ghh, glh, ghl, gll, gout;
    ghh.SetGlobalBuffer(hh);
    glh.SetGlobalBuffer(lh);
    ghl.SetGlobalBuffer(hl);
    gout.SetGlobalBuffer(out);
    if (args.keep_lo_lo) {
        gll.SetGlobalBuffer(ll);
    }

    const LocalTensor<float> base = tile::VectorUb(schedule::kCombineUbBytes).ReinterpretCast<float>();
    LocalTensor<float> vhh = base[0];
    LocalTensor<float> vlh = base[kTile];
    LocalTensor<float> vhl = base[2 * kTile];
    LocalTensor<float> vll = base[3 * kTile];

    // One stage, C formed in place over vhh: the next tile's load waits for this one's store.
    const tile::VectorStages<1, tile::StageResults::kInPlace> stage;
    stage.Open();
    for (uint32_t t = core; t < c.tiles; t += c.cores) {
        const uint32_t len = schedule::combine_tile_len(c, t);  // multiple of 256
        const uint64_t off = uint64_t(t) * kTile;
        stage.AwaitLoadable(0);
        AscendC::DataCopy(vhh, ghh[off], len);
        AscendC::DataCopy(vlh, glh[off], len);
        AscendC::DataCopy(vhl, ghl[off], len);
        if (args.keep_lo_lo) {
            AscendC::DataCopy(vll, gll[off], len);
        }
        stage.Loaded(0);
        stage.AwaitLoaded(0);
        if (args.keep_lo_lo) {
            AscendC::Muls(vll, vll, args.inv_scale, int32_t(len));  // LL * 2^-sb: the smallest term first
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Add(vlh, vll, vlh, int32_t(len));
            AscendC::PipeBarrier<PIPE_V>();
        }
        AscendC::Add(vlh, vlh, vhl, int32_t(len));                 // corr = LH + HL
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Muls(vlh, vlh, args.inv_scale, int32_t(len));     // corr * 2^-sb
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Add(vhh, vlh, vhh, int32_t(len));                 // + HH
        stage.InputRead(0);
        stage.Computed(0);
        AscendC::DataCopy(gout[off], vhh, len);
        stage.Stored(0);
    }
    stage.Close();
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_COMBINE_KERNEL_HPP
