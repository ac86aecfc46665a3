// Kernel layer, vector unit: undo the lines' power-of-two scaling on the result, in place,
// with one rounding and no float64 (guard.unscale):
//
//   C[i, j] = fl(alpha * C[i, j] * 2^s),   s = -(ta_i + tb_j)
//
// C holds the combine's FP32 result of scaled lines: zero or normal (its magnitude lies in
// [2^-96, 2^63): scaled entries are below 2^15 and the split's smallest parts above 2^-48).
// With alpha = m * 2^j (1 <= |m| < 2, or m = 0), C * m is one FP32 multiply (exact when
// m = +-1) and j joins s.  Then, with E = e_c + s the result's exponent field (e_c that of C):
//   E >= 1   normal or overflowing: C * 2^k1 * 2^k2 * 2^k3 with k1 + k2 + k3 = s, every
//            factor a normal FP32 power of two; the steps are exact (the value moves
//            monotonically between C and the result, both normal) until an overflow to
//            infinity, which IEEE rounding gives exactly as one rounding would;
//   -63 <= E <= 0  subnormal: C * 2^(s + 64) exactly (normal), then * 2^-64, the one rounding;
//   E < -63  below half the smallest subnormal: the subnormal path gives +-0 there too (the
//            first steps already land below 2^-126, the last below 2^-150).
// So the result is guard.unscale's bit for bit when alpha is 1 (or any power of two); with
// another alpha an output in FP32's subnormal range is rounded twice (C * m, then to the
// subnormal), a difference of at most one unit of 2^-149 in rare cases.
//
// Integer and FP32 operations only, each available on both chips (no shifts: dav_c100
// does not implement ShiftLeft/ShiftRight; exponents go through an exact int32 <-> float
// Cast).  Per element:
//   e_c = Cast(float(bits & 0x7F800000)) * 2^-23                 exact
//   le0 = min(max(1 - E, 0), 1)                                   1 when E <= 0
//   x   = s + 64 le0;  k1 = clamp(x, -126, 126);  k2 = clamp(x - k1, ...);  k3 = clamp(x - k1 - k2, ...)
//   k4  = -64 le0;     2^k as bits: k * 2^23 + 0x3F800000
//   r   = C * 2^k1 * 2^k2 * 2^k3 * 2^k4   (3 x 126 covers every |s| that does not under- or overflow)
//
// The fast path (tile::FastPow2), decided per unit by the scalar unit from the line meta it reads anyway
// (tile::SumsInNormalRange: the bounds of ta over the unit's rows and of tb over its columns, the latter
// scanned once per batch and column chunk): when every s of the unit (alpha_exp included) lies in
// [-126, 127], 2^s is a normal FP32 number, built from the integers in four vector instructions, and
// r = (C * m) * 2^s is one Mul: IEEE multiplication by an exact power of two is the one rounding of the
// product (exact for a normal result, rounded once into the subnormal range or to infinity; zeros,
// NaN and infinities stay), so the bits are those of the path above for every C.  Data whose lines
// need scaling exponents of moderate size (every finite line with |t| < 63, say) takes it everywhere.
//
// After the 910A's GEMM epilogue combined C (UnscaleArgs::epilogue), that epilogue has already applied
// the fast path (tile/accumulator_store.hpp's Unscale, the same bits) to every batch whose words allow it
// for the whole batch (schedule::epilogue_unscales: no line with |t| > kFastLineExponent); this pass then
// reads C back only for the rows of the other batches (a unit straddling batches runs as pieces), so every
// output is unscaled exactly once and the careful path stays here.
#ifndef SGEMM_CUBE_KERNEL_UNSCALE_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_UNSCALE_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/kernel/batch_flags.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"
#include "sgemm_cube/tile/unscale_tile.hpp"
#include "sgemm_cube/tile/vector_copy.hpp"
#include "sgemm_cube/tile/vector_stages.hpp"

namespace sgemm_cube {
namespace kernel {

struct UnscaleArgs {
    uint32_t batch, mp, np;  ///< padded sizes of the result
    uint32_t plan_cores;
    float alpha_mant;        ///< alpha = alpha_mant * 2^alpha_exp, 1 <= |alpha_mant| < 2 or 0
    int32_t alpha_exp;
    uint32_t epilogue;       ///< 1: the 910A's GEMM epilogue unscaled the batches schedule::epilogue_unscales names
};

/// The combine's term buffers when the unscale runs folded into the combine (combine_kernel.hpp's
/// RunCombine with the guarantee's integers): C = ((LL 2^-sb + LH) + HL) 2^-sb + HH is formed in UB, in
/// the combine kernel's order, before the unscale; `c` is then the HH buffer.  `lh` null: C is read
/// from `c` (the unscale pass alone).
struct UnscaleTerms {
    __gm__ float* lh;
    __gm__ float* hl;
    __gm__ float* ll;  ///< null with three terms
    float inv_scale;   ///< 2^-sb
};

/// The unscale over the (batch, mp, np) result in units of whole rows or row chunks (UnscaleGeometry),
/// in place in `c`; with `terms.lh` the terms are combined into C first (the fold into the combine).
/// A unit whose batches have no scaled line (`flags`, batch_flags.hpp) with alpha = 1 has nothing to
/// unscale: alone it is skipped (C stays as the combine wrote it), folded it is combined and written.
template <class SocTag>
__aicore__ inline void RunUnscale(__gm__ float* c, __gm__ int32_t* meta_a, __gm__ int32_t* meta_b, __gm__ float* flags,
                                  const UnscaleArgs& args, const UnscaleTerms& terms)
{
    const bool combine = terms.lh != nullptr, four = terms.ll != nullptr;
    const schedule::UnscaleGeometry u = schedule::make_unscale_geometry(args.batch, args.mp, args.np, args.plan_cores);
    const uint32_t core = uint32_t(AscendC::GetBlockIdx());
    if (core >= u.cores) {
        return;
    }
    AscendC::GlobalTensor<float> gc, glh, ghl, gll;
    AscendC::GlobalTensor<int32_t> ga, gb;
    gc.SetGlobalBuffer(c);
    ga.SetGlobalBuffer(meta_a);
    gb.SetGlobalBuffer(meta_b);
    if (combine) {
        glh.SetGlobalBuffer(terms.lh);
        ghl.SetGlobalBuffer(terms.hl);
        if (four) {
            gll.SetGlobalBuffer(terms.ll);
        }
    }
    tile::UnscaleTile views[schedule::kUnscaleStages];  // each stage's tiles, the shared ones alike
    const AscendC::LocalTensor<uint8_t> ub = tile::VectorUb(schedule::kUnscaleUnitUbBytes);
    for (uint32_t st = 0; st < schedule::kUnscaleStages; ++st) {
        views[st].InitUnit(ub, st);
    }
    BatchFlags batch_flags;
    batch_flags.Init(views[0].flags, flags);
    const bool alpha_one = args.alpha_mant == 1.0f && args.alpha_exp == 0;
    tile::ColumnBounds columns;  // B's columns' exponent bounds, kept between the core's units

    // Two stages, C unscaled in place: a unit's load waits for the store of the unit two before it, so the
    // next unit's load runs beside this one's vector work and store.
    const tile::VectorStages<schedule::kUnscaleStages, tile::StageResults::kInPlace> stage;
    stage.Open();
    uint32_t done = 0;  // units this core has loaded (the stage of the next is done % stages)
    AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // rows' integers read
    // After the 910A's epilogue unscaled the batches schedule::epilogue_unscales names (args.epilogue), a unit's
    // rows of those batches (and of batches with nothing to unscale: together, those with no wide line) are
    // left alone: the unit runs as the runs of consecutive rows whose batches have a wide line, each its own
    // piece (a unit may straddle batches).  Otherwise a unit is one piece.
    const bool after_epilogue = args.epilogue != 0 && schedule::fast_unscale_alpha(args.alpha_exp);
    for (uint32_t unit = core; unit < u.units; unit += u.cores) {
        const uint32_t unit_row0 = (unit / u.col_chunks) * u.rows_per_unit;
        const uint32_t unit_end = unit_row0 + schedule::min_u32(u.rows_per_unit, u.rows - unit_row0);
        const uint32_t col0 = (unit % u.col_chunks) * u.chunk_cols;
        const uint32_t w = schedule::min_u32(u.chunk_cols, u.np - col0);  // columns per row
        for (uint32_t piece_end = unit_row0; piece_end < unit_end;) {
            uint32_t row0 = piece_end, end = unit_end;
            if (after_epilogue) {
                const uint32_t last = (unit_end - 1) / u.mp;
                uint32_t b = row0 / u.mp;
                while (b <= last && !batch_flags.Any(b, b, schedule::kFlagWide)) {
                    ++b;  // unscaled in the epilogue, or nothing to do
                }
                if (b > last) {
                    break;
                }
                uint32_t e = b;
                while (e < last && batch_flags.Any(e + 1, e + 1, schedule::kFlagWide)) {
                    ++e;
                }
                row0 = schedule::max_u32(row0, b * u.mp);
                end = schedule::min_u32(unit_end, (e + 1) * u.mp);
            }
            piece_end = end;
            const uint32_t rows = end - row0;
            const int32_t n = int32_t(rows * w);
            const uint32_t first_batch = row0 / u.mp, last_batch = (row0 + rows - 1) / u.mp;
            const bool unscale = !alpha_one || batch_flags.Any(first_batch, last_batch, schedule::kFlagScaled);
            if (!unscale && !combine) {
                continue;  // C already is alpha * AB here
            }
            const uint64_t at = uint64_t(row0) * u.np + col0;
            const uint32_t st = stage.Of(done++);
            const tile::UnscaleTile& v = views[st];
            // MTE2: the result's rows (or the terms'), B's columns' integers once per row, the rows' integers.
            stage.AwaitLoadable(st);
            AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(0);  // the previous unit's rows' integers were read
            tile::CopyRowsIn(v.c, gc[at], rows, w, u.np, w);
            if (combine) {
                tile::CopyRowsIn(v.lh, glh[at], rows, w, u.np, w);
                tile::CopyRowsIn(v.hl, ghl[at], rows, w, u.np, w);
                if (four) {
                    tile::CopyRowsIn(v.ll, gll[at], rows, w, u.np, w);
                }
            }
            const uint32_t first8 = row0 & ~7u;  // whole 32-byte blocks of A's rows' integers
            if (unscale) {
                for (uint32_t r = 0; r < rows; ++r) {
                    tile::CopyIn(v.t[r * w], gb[uint64_t((row0 + r) / u.mp) * u.np + col0], w);  // its batch's B columns
                }
                tile::CopyIn(v.rows_meta, ga[first8], schedule::round_up(row0 + rows - first8, 8));
            }
            stage.Loaded(st);
            stage.AwaitLoaded(st);
            tile::Handoff<AscendC::HardEvent::MTE2_S>(0);
            AscendC::PipeBarrier<PIPE_V>();  // the previous unit's last vector reads are done
            if (combine) {
                tile::CombineInUb(v, four, terms.inv_scale, n);
            }
            if (unscale && tile::SumsInNormalRange(v, columns, row0, first8, rows, w, u.mp, unit % u.col_chunks,
                                                    u.col_chunks, args.alpha_exp)) {
                // The fast path: every s of the unit in [-126, 127], one Mul by 2^s (FastPow2).
                tile::RowFactorBits(v, row0, first8, rows, w, args.alpha_exp);
                AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // the rows' and columns' integers were read
                if (args.alpha_mant != 1.0f) {
                    AscendC::Muls(v.c, v.c, args.alpha_mant, n);
                }
                AscendC::PipeBarrier<PIPE_V>();
                tile::FastPow2(v, n);
            } else if (unscale) {
                // s = alpha_exp - ta_i - tb_j, with t = (packed - (packed & 3)) / 4 - 1024 (no shifts on 910A).
                tile::RowExponents(v, row0, first8, rows, w, args.alpha_exp);
                AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // the rows' integers were read
                tile::Handoff<AscendC::HardEvent::S_V>(0);  // the columns' integers were read (decoded in place next)
                tile::DecodeExponents(v, n);  // t = tb + 1024
                AscendC::Sub(v.s, v.s, v.t, n);  // s
                if (args.alpha_mant != 1.0f) {
                    AscendC::Muls(v.c, v.c, args.alpha_mant, n);
                }
                AscendC::PipeBarrier<PIPE_V>();
                tile::ApplyPow2(v, n);
            } else {
                AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // no integers were read
            }
            stage.InputRead(st);
            stage.Computed(st);
            tile::CopyRowsOut(gc[at], v.c, rows, w, w, u.np);
            stage.Stored(st);
        }
    }
    stage.Close();
    AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(0);
    batch_flags.Finish();
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_UNSCALE_KERNEL_HPP
