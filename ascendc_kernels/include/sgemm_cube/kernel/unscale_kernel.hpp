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
#ifndef SGEMM_CUBE_KERNEL_UNSCALE_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_UNSCALE_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/guard/line_meta.hpp"
#include "sgemm_cube/kernel/batch_flags.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"

namespace sgemm_cube {
namespace kernel {

struct UnscaleArgs {
    uint32_t batch, mp, np;  ///< padded sizes of the result
    uint32_t plan_cores;
    float alpha_mant;        ///< alpha = alpha_mant * 2^alpha_exp, 1 <= |alpha_mant| < 2 or 0
    int32_t alpha_exp;
};

/// One tile's worth of work buffers (kUnscaleTile words each), the three bit-mask constants and the
/// staging of the batches' words (`flags`, schedule::kFlagUbBytes): the fix-up kernels' Init.  The
/// unscale's InitUnit: kUnscaleUnit words each, the term tiles LH, HL, LL (when folded into the combine)
/// are the work tiles s, e, w1.
struct UnscaleTile {
    AscendC::LocalTensor<float> c;
    AscendC::LocalTensor<int32_t> t, s, e, w1, w2, abs, exp, rows_meta;
    AscendC::LocalTensor<uint8_t> flags;
    AscendC::LocalTensor<float> lh, hl, ll;  ///< InitUnit only

    /// schedule::kUnscaleUnitUbBytes of UB: C, t, LH = s, HL = e, LL = w1, w2, the exponent mask, the
    /// rows' integers, the batch words.  The term tiles become work tiles once combined (CombineInUb).
    __aicore__ inline void InitUnit(const AscendC::LocalTensor<uint8_t>& base)
    {
        constexpr uint32_t kBytes = schedule::kUnscaleUnit * 4;
        c = base[0].ReinterpretCast<float>();
        t = base[kBytes].ReinterpretCast<int32_t>();
        lh = base[2 * kBytes].ReinterpretCast<float>();
        hl = base[3 * kBytes].ReinterpretCast<float>();
        ll = base[4 * kBytes].ReinterpretCast<float>();
        s = base[2 * kBytes].ReinterpretCast<int32_t>();
        e = base[3 * kBytes].ReinterpretCast<int32_t>();
        w1 = base[4 * kBytes].ReinterpretCast<int32_t>();
        w2 = base[5 * kBytes].ReinterpretCast<int32_t>();
        exp = base[6 * kBytes].ReinterpretCast<int32_t>();
        rows_meta = base[7 * kBytes].ReinterpretCast<int32_t>();
        flags = base[7 * kBytes + schedule::kUnscaleUnitMetaWords * 4];
        AscendC::Duplicate<int32_t>(exp, int32_t(0x7F800000), int32_t(schedule::kUnscaleUnit));
        AscendC::PipeBarrier<PIPE_V>();
    }

    __aicore__ inline void Init(const AscendC::LocalTensor<uint8_t>& base)
    {
        constexpr uint32_t kBytes = schedule::kUnscaleTile * 4;
        c = base[0].ReinterpretCast<float>();
        t = base[kBytes].ReinterpretCast<int32_t>();
        s = base[2 * kBytes].ReinterpretCast<int32_t>();
        e = base[3 * kBytes].ReinterpretCast<int32_t>();
        w1 = base[4 * kBytes].ReinterpretCast<int32_t>();
        w2 = base[5 * kBytes].ReinterpretCast<int32_t>();
        abs = base[6 * kBytes].ReinterpretCast<int32_t>();
        exp = base[7 * kBytes].ReinterpretCast<int32_t>();
        rows_meta = base[8 * kBytes].ReinterpretCast<int32_t>();  // the packed integers of a unit's rows
        flags = base[9 * kBytes];
        constexpr int32_t n = int32_t(schedule::kUnscaleTile);
        AscendC::Duplicate<int32_t>(abs, int32_t(0x7FFFFFFF), n);
        AscendC::Duplicate<int32_t>(exp, int32_t(0x7F800000), n);
        AscendC::PipeBarrier<PIPE_V>();
    }
};

/// clamp(v, lo, hi) in place (int32).
__aicore__ inline void ClampInPlace(const AscendC::LocalTensor<int32_t>& v, int32_t lo, int32_t hi, int32_t n)
{
    AscendC::Maxs(v, v, lo, n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Mins(v, v, hi, n);
    AscendC::PipeBarrier<PIPE_V>();
}

/// c *= 2^k for the exponents in `k` (int32, in [-126, 126]); `bits` is a work tile.
__aicore__ inline void MulPow2(const AscendC::LocalTensor<float>& c, const AscendC::LocalTensor<int32_t>& k,
                               const AscendC::LocalTensor<int32_t>& bits, int32_t n)
{
    AscendC::Muls(bits, k, int32_t(1 << 23), n);        // k * 2^23
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Adds(bits, bits, int32_t(0x3F800000), n);  // + the bits of 1.0
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Mul(c, c, bits.ReinterpretCast<float>(), n);
    AscendC::PipeBarrier<PIPE_V>();
}

/// The packed integers in v.t (guard.pack_meta) -> t + 1024, in place: (packed - (packed & 3)) / 4
/// through an exact float round trip (no shifts on 910A).  Uses v.w1.
__aicore__ inline void DecodeExponents(const UnscaleTile& v, int32_t n)
{
    const AscendC::LocalTensor<uint16_t> tu = v.t.ReinterpretCast<uint16_t>(), w1u = v.w1.ReinterpretCast<uint16_t>();
    AscendC::Duplicate<int32_t>(v.w1, int32_t(3), n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::And(w1u, tu, w1u, 2 * n);  // packed & 3 (the high halfword of 3 is 0)
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Sub(v.t, v.t, v.w1, n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Cast(v.w1.ReinterpretCast<float>(), v.t, AscendC::RoundMode::CAST_NONE, uint32_t(n));  // exact
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Muls(v.w1.ReinterpretCast<float>(), v.w1.ReinterpretCast<float>(), 0.25f, n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Cast(v.t, v.w1.ReinterpretCast<float>(), AscendC::RoundMode::CAST_RINT, uint32_t(n));  // tb + 1024
    AscendC::PipeBarrier<PIPE_V>();
}

/// v.c *= 2^(v.s) elementwise with one rounding (see the file comment; v.c may hold any FP32 value: NaN and
/// infinities stay, subnormals are scaled exactly up or rounded once down).  Uses v.e, v.t, v.w1, v.w2; v.s
/// is consumed.
__aicore__ inline void ApplyPow2(const UnscaleTile& v, int32_t n)
{
    using AscendC::LocalTensor;
    // E = e_c + s.
    const LocalTensor<uint16_t> cu = v.c.ReinterpretCast<uint16_t>(), eu = v.e.ReinterpretCast<uint16_t>();
    AscendC::And(eu, cu, v.exp.ReinterpretCast<uint16_t>(), 2 * n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Cast(v.w1.ReinterpretCast<float>(), v.e, AscendC::RoundMode::CAST_NONE, uint32_t(n));  // e_c 2^23
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Muls(v.w1.ReinterpretCast<float>(), v.w1.ReinterpretCast<float>(), 1.0f / 8388608.0f, n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Cast(v.e, v.w1.ReinterpretCast<float>(), AscendC::RoundMode::CAST_RINT, uint32_t(n));
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Add(v.e, v.e, v.s, n);  // E
    AscendC::PipeBarrier<PIPE_V>();
    // le0 = min(max(1 - E, 0), 1) into t; x = s + 64 le0 into s; k4 = -64 le0 into w2.
    AscendC::Muls(v.t, v.e, int32_t(-1), n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Adds(v.t, v.t, int32_t(1), n);
    AscendC::PipeBarrier<PIPE_V>();
    ClampInPlace(v.t, 0, 1, n);
    AscendC::Muls(v.w1, v.t, int32_t(64), n);
    AscendC::Muls(v.w2, v.t, int32_t(-64), n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Add(v.s, v.s, v.w1, n);  // x
    AscendC::PipeBarrier<PIPE_V>();
    // k1, k2, k3 from x (t is free again): k = clamp(rest, -126, 126), rest -= k.
    for (int32_t step = 0; step < 3; ++step) {
        AscendC::Adds(v.t, v.s, int32_t(0), n);  // copy of the rest
        AscendC::PipeBarrier<PIPE_V>();
        ClampInPlace(v.t, -126, 126, n);
        AscendC::Sub(v.s, v.s, v.t, n);
        AscendC::PipeBarrier<PIPE_V>();
        MulPow2(v.c, v.t, v.w1, n);
    }
    MulPow2(v.c, v.w2, v.w1, n);  // k4
}

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

/// v.c = the termwise combine of v.c (HH) and the term tiles (combine_kernel.hpp's order and roundings).
__aicore__ inline void CombineInUb(const UnscaleTile& v, bool four, float inv_scale, int32_t n)
{
    if (four) {
        AscendC::Muls(v.ll, v.ll, inv_scale, n);  // LL * 2^-sb: the smallest term first
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Add(v.lh, v.ll, v.lh, n);
        AscendC::PipeBarrier<PIPE_V>();
    }
    AscendC::Add(v.lh, v.lh, v.hl, n);  // corr = LH + HL
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Muls(v.lh, v.lh, inv_scale, n);  // corr * 2^-sb
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Add(v.c, v.lh, v.c, n);  // + HH
    AscendC::PipeBarrier<PIPE_V>();
}

/// The unscale over the (batch, mp, np) result in units of whole rows or row chunks (UnscaleGeometry),
/// in place in `c`; with `terms.lh` the terms are combined into C first (the fold into the combine).
/// A unit whose batches have no scaled line (`flags`, batch_flags.hpp) with alpha = 1 has nothing to
/// unscale: alone it is skipped (C stays as the combine wrote it), folded it is combined and written.
template <class SocTag>
__aicore__ inline void RunUnscale(__gm__ float* c, __gm__ int32_t* meta_a, __gm__ int32_t* meta_b, __gm__ float* flags,
                                  const UnscaleArgs& args, const UnscaleTerms& terms)
{
    using AscendC::LocalTensor;
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
    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::VECCALC> ub;
    pipe.InitBuffer(ub, schedule::kUnscaleUnitUbBytes);
    UnscaleTile v;
    v.InitUnit(ub.Get<uint8_t>());
    BatchFlags batch_flags;
    batch_flags.Init(v.flags, flags);
    pipe.Destroy();
    const bool alpha_one = args.alpha_mant == 1.0f && args.alpha_exp == 0;

    AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(0);    // work tiles free
    AscendC::SetFlag<AscendC::HardEvent::MTE3_MTE2>(0); // result written out
    AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);    // rows' integers read
    for (uint32_t unit = core; unit < u.units; unit += u.cores) {
        const uint32_t row0 = (unit / u.col_chunks) * u.rows_per_unit;
        const uint32_t rows = schedule::min_u32(u.rows_per_unit, u.rows - row0);
        const uint32_t col0 = (unit % u.col_chunks) * u.chunk_cols;
        const uint32_t w = schedule::min_u32(u.chunk_cols, u.np - col0);  // columns per row
        const int32_t n = int32_t(rows * w);
        const uint16_t row_blocks = uint16_t(w * 4 / schedule::kBlockBytes);
        const bool unscale = !alpha_one || batch_flags.Any(row0 / u.mp, (row0 + rows - 1) / u.mp, schedule::kFlagScaled);
        if (!unscale && !combine) {
            continue;  // C already is alpha * AB here
        }
        const uint64_t at = uint64_t(row0) * u.np + col0;
        const AscendC::DataCopyParams in(uint16_t(rows), row_blocks, uint16_t((u.np - w) * 4 / 32), 0);
        // MTE2: the result's rows (or the terms'), B's columns' integers once per row, the rows' integers.
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(0);
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_MTE2>(0);
        AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(0);
        AscendC::DataCopy(v.c, gc[at], in);
        if (combine) {
            AscendC::DataCopy(v.lh, glh[at], in);
            AscendC::DataCopy(v.hl, ghl[at], in);
            if (four) {
                AscendC::DataCopy(v.ll, gll[at], in);
            }
        }
        const uint32_t first8 = row0 & ~7u;  // whole 32-byte blocks of A's rows' integers
        if (unscale) {
            for (uint32_t r = 0; r < rows; ++r) {
                const uint32_t batch = (row0 + r) / u.mp;
                AscendC::DataCopy(v.t[r * w], gb[uint64_t(batch) * u.np + col0], AscendC::DataCopyParams(1, row_blocks, 0, 0));
            }
            const uint32_t blocks8 = (row0 + rows - first8 + 7) / 8;
            AscendC::DataCopy(v.rows_meta, ga[first8], AscendC::DataCopyParams(1, uint16_t(blocks8), 0, 0));
        }
        AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(0);
        AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(0);
        AscendC::SetFlag<AscendC::HardEvent::MTE2_S>(0);
        AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(0);
        AscendC::PipeBarrier<PIPE_V>();  // the previous unit's last vector reads are done
        if (combine) {
            CombineInUb(v, four, terms.inv_scale, n);
        }
        if (unscale) {
            // s = alpha_exp - ta_i - tb_j, with t = (packed - (packed & 3)) / 4 - 1024 (no shifts on 910A).
            for (uint32_t r = 0; r < rows; ++r) {
                const int32_t ta = guard::unpack(v.rows_meta.GetValue(row0 + r - first8)).t;
                AscendC::Duplicate<int32_t>(v.s[r * w], args.alpha_exp - ta + 1024, int32_t(w));
            }
            AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // the rows' integers were read
            DecodeExponents(v, n);  // t = tb + 1024
            AscendC::Sub(v.s, v.s, v.t, n);  // s
            if (args.alpha_mant != 1.0f) {
                AscendC::Muls(v.c, v.c, args.alpha_mant, n);
            }
            AscendC::PipeBarrier<PIPE_V>();
            ApplyPow2(v, n);
        } else {
            AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // no integers were read
        }
        AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(0);
        AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(0);
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(0);
        AscendC::DataCopy(gc[at], v.c, AscendC::DataCopyParams(uint16_t(rows), row_blocks, 0, uint16_t((u.np - w) * 4 / 32)));
        AscendC::SetFlag<AscendC::HardEvent::MTE3_MTE2>(0);
    }
    AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(0);
    AscendC::WaitFlag<AscendC::HardEvent::MTE3_MTE2>(0);
    AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(0);
    batch_flags.Finish();
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_UNSCALE_KERNEL_HPP
