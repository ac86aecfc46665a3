// Kernel layer, vector unit: the fix-up columns of B (class >= fixup_min_class) computed in plain FP32 on the
// device, as fixup_kernel.hpp does for the fix-up rows of A: the unscaled operands, products summed in K
// order with every product and sum rounded to FP32 (recursive summation), then times alpha.  Run after
// the rows' fix-up: an output in a listed row and a listed column gets the same value from both (same
// products, same order).
//
// Vectorised over a chunk of kFixupColRows rows of A, sequential over K: A's columns are not contiguous,
// so each 8-column block of the chunk's rows is loaded (one 32-byte block per row) and transposed by the
// scalar unit; every listed column's B entry is loaded as its 32-byte block.  Outputs are written back by
// read-modify-write of their 32-byte blocks: one core owns a (batch, row chunk) unit with every listed
// column of it, so no other core touches those blocks.  A rare path, with plain PipeBarrier<PIPE_ALL>
// between dependent steps.  A batch whose word says no line is listed (batch_flags.hpp) is skipped.
#ifndef SGEMM_CUBE_KERNEL_FIXUP_COLS_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_FIXUP_COLS_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/guard/line_meta.hpp"
#include "sgemm_cube/kernel/fixup_kernel.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/vector_stages.hpp"

namespace sgemm_cube {
namespace kernel {

template <class SocTag>
__aicore__ inline void RunFixupCols(__gm__ float* a, __gm__ float* b, __gm__ int32_t* meta_a, __gm__ int32_t* meta_b,
                                    __gm__ float* c, __gm__ float* flags, const FixupArgs& args)
{
    constexpr uint32_t kR = schedule::kFixupColRows;
    constexpr uint32_t kW = schedule::kUnscaleTile;
    const uint32_t chunks = schedule::ceil_div(args.mp, kR);
    const uint32_t units = args.batch * chunks;
    const uint32_t cores = schedule::min_u32(args.plan_cores, units);
    const uint32_t core = uint32_t(AscendC::GetBlockIdx());
    if (core >= cores) {
        return;
    }
    (void)meta_a;  // the fix-up uses the unscaled operands: A's line meta is not needed here
    AscendC::GlobalTensor<float> ga, gb, gc;
    AscendC::GlobalTensor<int32_t> gmb;
    ga.SetGlobalBuffer(a);
    gb.SetGlobalBuffer(b);
    gc.SetGlobalBuffer(c);
    gmb.SetGlobalBuffer(meta_b);
    const AscendC::LocalTensor<uint8_t> base = tile::VectorUb(schedule::kFixupColsUbBytes);
    tile::UnscaleTile v;  // v.c: one column's result; v.s: alpha's exponent
    v.Init(base);
    uint32_t at = schedule::kUnscaleUbBytes;
    const AscendC::LocalTensor<float> acc = base[at].ReinterpretCast<float>();  // one accumulator: column j
    at += kR * 4;
    const AscendC::LocalTensor<float> blk = base[at].ReinterpretCast<float>();  // kR rows x 8 columns of A
    at += kR * 8 * 4;
    const AscendC::LocalTensor<float> col = base[at].ReinterpretCast<float>();  // A's column k
    at += kR * 4;
    const AscendC::LocalTensor<float> bb = base[at].ReinterpretCast<float>();  // one 32-byte block of B or C
    at += schedule::kBlockBytes;
    const AscendC::LocalTensor<int32_t> mb = base[at].ReinterpretCast<int32_t>();  // B's packed integers, a chunk
    BatchFlags batch_flags;
    batch_flags.Init(v.flags, flags);

    for (uint32_t unit = core; unit < units; unit += cores) {
        const uint32_t batch = unit / chunks;
        if (!batch_flags.Any(batch, batch, schedule::kFlagListed)) {
            continue;  // no listed line in this batch
        }
        const uint32_t r0 = (unit % chunks) * kR;
        const uint32_t rows = schedule::min_u32(kR, args.mp - r0);
        const uint64_t row0 = uint64_t(batch) * args.mp + r0;  // first row over the batch
        for (uint32_t j0 = 0; j0 < args.np; j0 += kW) {
            const uint32_t w = schedule::min_u32(kW, args.np - j0);
            AscendC::DataCopy(mb, gmb[uint64_t(batch) * args.np + j0],
                              AscendC::DataCopyParams(1, uint16_t(w * 4 / schedule::kBlockBytes), 0, 0));
            AscendC::PipeBarrier<PIPE_ALL>();
            for (uint32_t jj = 0; jj < w; ++jj) {
                const guard::LineMeta cm = guard::unpack(mb.GetValue(jj));
                if (cm.cls < int32_t(args.fixup_min_class)) {
                    continue;
                }
                const uint32_t j = j0 + jj;
                AscendC::Duplicate<float>(acc, 0.0f, int32_t(rows));
                AscendC::PipeBarrier<PIPE_ALL>();
                for (uint32_t k0 = 0; k0 < args.k; k0 += 8) {
                    // Columns k0..k0+7 of the chunk's rows: one 32-byte block per row.
                    AscendC::DataCopy(blk, ga[row0 * args.kp + k0],
                                      AscendC::DataCopyParams(uint16_t(rows), 1, uint16_t(args.kp / 8 - 1), 0));
                    AscendC::PipeBarrier<PIPE_ALL>();
                    for (uint32_t k = k0; k < k0 + 8 && k < args.k; ++k) {
                        for (uint32_t i = 0; i < rows; ++i) {  // the scalar unit transposes column k
                            col.SetValue(i, blk.GetValue(i * 8 + (k - k0)));
                        }
                        // B[k, j]'s block (one element used).
                        AscendC::DataCopy(bb, gb[(uint64_t(batch) * args.kp + k) * args.np + (j & ~7u)],
                                          AscendC::DataCopyParams(1, 1, 0, 0));
                        AscendC::PipeBarrier<PIPE_ALL>();
                        const float x = bb.GetValue(j & 7u);
                        AscendC::PipeBarrier<PIPE_ALL>();
                        AscendC::Muls(col, col, x, int32_t(rows));  // fl(a b)
                        AscendC::PipeBarrier<PIPE_V>();
                        AscendC::Add(acc, acc, col, int32_t(rows));  // fl(acc + a b)
                        AscendC::PipeBarrier<PIPE_ALL>();
                    }
                }
                // Times alpha: alpha_mant, then 2^alpha_exp.
                AscendC::Duplicate<int32_t>(v.s, args.alpha_exp, int32_t(rows));
                AscendC::DataCopy(v.c, acc, AscendC::DataCopyParams(1, uint16_t(rows * 4 / schedule::kBlockBytes), 0, 0));
                AscendC::PipeBarrier<PIPE_V>();
                if (args.alpha_mant != 1.0f) {
                    AscendC::Muls(v.c, v.c, args.alpha_mant, int32_t(rows));
                    AscendC::PipeBarrier<PIPE_V>();
                }
                tile::ApplyPow2(v, int32_t(rows));
                AscendC::PipeBarrier<PIPE_ALL>();
                // Column j of the chunk's rows, each through its 32-byte block.
                for (uint32_t i = 0; i < rows; ++i) {
                    const uint64_t blk_at = (row0 + i) * args.np + (j & ~7u);
                    AscendC::DataCopy(bb, gc[blk_at], AscendC::DataCopyParams(1, 1, 0, 0));
                    AscendC::PipeBarrier<PIPE_ALL>();
                    bb.SetValue(j & 7u, v.c.GetValue(i));
                    AscendC::PipeBarrier<PIPE_ALL>();
                    AscendC::DataCopy(gc[blk_at], bb, AscendC::DataCopyParams(1, 1, 0, 0));
                    AscendC::PipeBarrier<PIPE_ALL>();
                }
            }
            AscendC::PipeBarrier<PIPE_ALL>();  // B's integers read before the next chunk of them arrives
        }
        AscendC::PipeBarrier<PIPE_ALL>();  // the unit's outputs written before the next unit's work starts
    }
    batch_flags.Finish();
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_FIXUP_COLS_KERNEL_HPP
