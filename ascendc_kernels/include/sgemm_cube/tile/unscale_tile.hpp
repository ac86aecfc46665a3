// Tile layer, vector unit: the element operations of the unscale on one unit of C in UB, and the
// combine's when the unscale is folded into it (kernel/unscale_kernel.hpp has the arithmetic and why each
// step is exact; the kernel layer schedules the units, their copies and the flags between pipes).  The
// fix-up kernels (kernel/fixup_kernel.hpp, fixup_cols_kernel.hpp) use the same tiles and ApplyPow2 for
// alpha.  Every vector instruction on the same UB waits behind a PIPE_V barrier: the vector unit may
// reorder unordered instructions.
#ifndef SGEMM_CUBE_TILE_UNSCALE_TILE_HPP
#define SGEMM_CUBE_TILE_UNSCALE_TILE_HPP

#include "kernel_operator.h"
#include "sgemm_cube/guard/line_meta.hpp"
#include "sgemm_cube/schedule/schedule.hpp"

namespace sgemm_cube {
namespace tile {

/// One tile's worth of work buffers (kUnscaleTile words each), the three bit-mask constants and the
/// staging of the batches' words (`flags`, schedule::kFlagUbBytes): the fix-up kernels' Init.  The
/// unscale's InitUnit: one UB stage's view, kUnscaleUnit words each, the term tiles LH, HL, LL (when folded
/// into the combine) are the work tiles s, e, w1.
struct UnscaleTile {
    AscendC::LocalTensor<float> c;
    AscendC::LocalTensor<int32_t> t, s, e, w1, w2, abs, exp, rows_meta;
    AscendC::LocalTensor<uint8_t> flags;
    AscendC::LocalTensor<float> lh, hl, ll;  ///< InitUnit only
    AscendC::LocalTensor<int32_t> low_bits;  ///< InitUnit only: one repeat (8 blocks) of ~3 (the packed integers' class bits off)

    /// Stage `stage`'s view of schedule::kUnscaleUnitUbBytes of UB (kUnscaleStages stages): per stage C, t,
    /// LH = s, HL = e, LL = w1 (what MTE2 loads, and the work tiles the terms become once combined:
    /// CombineInUb); shared by the stages: w2, the exponent mask, the rows' integers, the batch words and one
    /// repeat of ~3 (the fast path's mask).  The shared constants are written by stage 0's InitUnit.
    __aicore__ inline void InitUnit(const AscendC::LocalTensor<uint8_t>& base, uint32_t stage)
    {
        constexpr uint32_t kBytes = schedule::kUnscaleUnit * 4;
        constexpr uint32_t kShared = schedule::kUnscaleStages * schedule::kUnscaleStageTiles * kBytes;
        const uint32_t own = stage * schedule::kUnscaleStageTiles * kBytes;
        c = base[own].ReinterpretCast<float>();
        t = base[own + kBytes].ReinterpretCast<int32_t>();
        lh = base[own + 2 * kBytes].ReinterpretCast<float>();
        hl = base[own + 3 * kBytes].ReinterpretCast<float>();
        ll = base[own + 4 * kBytes].ReinterpretCast<float>();
        s = base[own + 2 * kBytes].ReinterpretCast<int32_t>();
        e = base[own + 3 * kBytes].ReinterpretCast<int32_t>();
        w1 = base[own + 4 * kBytes].ReinterpretCast<int32_t>();
        w2 = base[kShared].ReinterpretCast<int32_t>();
        exp = base[kShared + kBytes].ReinterpretCast<int32_t>();
        rows_meta = base[kShared + 2 * kBytes].ReinterpretCast<int32_t>();
        flags = base[kShared + 2 * kBytes + schedule::kUnscaleUnitMetaWords * 4];
        low_bits = base[kShared + 2 * kBytes + schedule::kUnscaleUnitMetaWords * 4 + schedule::kFlagUbBytes]
                       .ReinterpretCast<int32_t>();
        if (stage == 0) {
            AscendC::Duplicate<int32_t>(exp, int32_t(0x7F800000), int32_t(schedule::kUnscaleUnit));
            AscendC::Duplicate<int32_t>(low_bits, int32_t(-4), int32_t(schedule::kUnscaleMaskBytes / 4));  // ~3
            AscendC::PipeBarrier<PIPE_V>();
        }
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

/// v.s = alpha_exp - ta_i + 1024 over each of the unit's `rows` rows of `w` elements, ta_i decoded by the
/// scalar unit from the rows' packed integers in v.rows_meta (which starts at row `first8`).  The caller
/// frees v.rows_meta (S_MTE2) after it: the scalar unit has read it.
__aicore__ inline void RowExponents(const UnscaleTile& v, uint32_t row0, uint32_t first8, uint32_t rows, uint32_t w,
                                    int32_t alpha_exp)
{
    for (uint32_t r = 0; r < rows; ++r) {
        const int32_t ta = guard::unpack(v.rows_meta.GetValue(row0 + r - first8)).t;
        AscendC::Duplicate<int32_t>(v.s[r * w], alpha_exp - ta + 1024, int32_t(w));
    }
}

/// The fast path's per-unit decision (scalar unit): the bounds of the exponent sums
/// s = alpha_exp - ta_i - tb_j over a unit.  The rows' ta come from v.rows_meta (as RowExponents reads
/// them); the columns' tb from the packed integers in v.t, scanned once per (batch, column chunk) and
/// kept for the core's next units in slot chunk % kSlots (a core's units of one batch then scan each
/// chunk once, whatever the number of cores).  Integers are monotonic in t (packed = cls + 4 (t + 1024),
/// cls < 4), so the bounds of the packed integers give those of t.
struct ColumnBounds {
    static constexpr uint32_t kSlots = schedule::kUnscaleBoundSlots;
    uint32_t key[kSlots];        ///< batch * col_chunks + chunk of the slot's bounds; ~0: none yet
    int32_t lo[kSlots], hi[kSlots];  ///< min and max of tb over the chunk's columns
    __aicore__ inline ColumnBounds()
    {
        for (uint32_t i = 0; i < kSlots; ++i) {
            key[i] = ~0u;
            lo[i] = 0;
            hi[i] = 0;
        }
    }
};

/// Whether every s of the unit (rows row0 .. row0 + rows - 1 of the result, `w` columns of chunk
/// `chunk` of `col_chunks`, the rows' batch = row / mp) lies in [-126, 127], the normal exponents of
/// FP32: then 2^s is an FP32 number and fl(c * 2^s) is the one rounding (FastPow2).  Reads v.t (after the
/// MTE2 -> S hand-off) and v.rows_meta; `cols` keeps the columns' bounds between units.
__aicore__ inline bool SumsInNormalRange(const UnscaleTile& v, ColumnBounds& cols, uint32_t row0, uint32_t first8,
                                         uint32_t rows, uint32_t w, uint32_t mp, uint32_t chunk,
                                         uint32_t col_chunks, int32_t alpha_exp)
{
    int32_t ta_lo = 0, ta_hi = 0, tb_lo = 0, tb_hi = 0;
    uint32_t last_batch = ~0u;
    for (uint32_t r = 0; r < rows; ++r) {
        const int32_t ta = guard::unpack(v.rows_meta.GetValue(row0 + r - first8)).t;
        ta_lo = r == 0 || ta < ta_lo ? ta : ta_lo;
        ta_hi = r == 0 || ta > ta_hi ? ta : ta_hi;
        const uint32_t batch = (row0 + r) / mp;
        if (batch == last_batch) {
            continue;  // the same columns as the row before
        }
        const uint32_t key = batch * col_chunks + chunk, slot = chunk % ColumnBounds::kSlots;
        if (key != cols.key[slot]) {
            int32_t p_lo = v.t.GetValue(r * w), p_hi = p_lo;
            for (uint32_t j = 1; j < w; ++j) {
                const int32_t p = v.t.GetValue(r * w + j);
                p_lo = p < p_lo ? p : p_lo;
                p_hi = p > p_hi ? p : p_hi;
            }
            cols.key[slot] = key;
            cols.lo[slot] = guard::unpack(p_lo).t;
            cols.hi[slot] = guard::unpack(p_hi).t;
        }
        tb_lo = last_batch == ~0u || cols.lo[slot] < tb_lo ? cols.lo[slot] : tb_lo;
        tb_hi = last_batch == ~0u || cols.hi[slot] > tb_hi ? cols.hi[slot] : tb_hi;
        last_batch = batch;
    }
    return alpha_exp - ta_hi - tb_hi >= -126 && alpha_exp - ta_lo - tb_lo <= 127;
}

/// The fast path's row part: v.s = 4 (alpha_exp - ta_i + 1151) over each of the unit's rows (int32), so
/// that v.s - 4 (tb_j + 1024) = 4 (s + 127), s = alpha_exp - ta_i - tb_j.  As RowExponents for the rest.
__aicore__ inline void RowFactorBits(const UnscaleTile& v, uint32_t row0, uint32_t first8, uint32_t rows, uint32_t w,
                                     int32_t alpha_exp)
{
    for (uint32_t r = 0; r < rows; ++r) {
        const int32_t ta = guard::unpack(v.rows_meta.GetValue(row0 + r - first8)).t;
        AscendC::Duplicate<int32_t>(v.s[r * w], 4 * (alpha_exp - ta + 1151), int32_t(w));
    }
}

/// The fast path: v.c *= 2^s elementwise, s = alpha_exp - ta_i - tb_j from v.s (RowFactorBits) and B's
/// packed integers in v.t, when every s of the unit lies in [-126, 127] (SumsInNormalRange): 2^s is then
/// the FP32 number with exponent field s + 127 and a zero mantissa, built in w2 with integer operations,
/// and the one Mul is the one rounding of c * 2^s (IEEE: exact, or rounded once into the subnormal range
/// or to infinity; NaN, infinities and zeros stay), the bits ApplyPow2 gives.  4 vector instructions:
///   w2 = t & ~3                     4 (tb + 1024)  (the class bits off; And on halfwords, ~3 broadcast)
///   w2 = s - w2                     4 (s + 127), in [4, 1016]
///   w2 = w2 * 2^21                  (s + 127) 2^23: the bits of 2^s (below 2^31: no overflow)
///   c  = c * w2                     one rounding
__aicore__ inline void FastPow2(const UnscaleTile& v, int32_t n)
{
    constexpr int32_t kHalvesPerRepeat = 128;
    const AscendC::LocalTensor<uint16_t> tu = v.t.ReinterpretCast<uint16_t>(), wu = v.w2.ReinterpretCast<uint16_t>();
    const AscendC::LocalTensor<uint16_t> mask = v.low_bits.ReinterpretCast<uint16_t>();
    const AscendC::BinaryRepeatParams broadcast(1, 1, 1, 8, 8, 0);  // the mask block in every repeat
    const int32_t halves = 2 * n, repeats = halves / kHalvesPerRepeat, tail = halves % kHalvesPerRepeat;
    for (int32_t done = 0; done < repeats; done += 255) {  // at most 255 repeats an instruction
        const int32_t now = repeats - done < 255 ? repeats - done : 255;
        AscendC::And(wu[done * kHalvesPerRepeat], tu[done * kHalvesPerRepeat], mask, uint64_t(kHalvesPerRepeat),
                     uint8_t(now), broadcast);
    }
    if (tail != 0) {
        AscendC::And(wu[repeats * kHalvesPerRepeat], tu[repeats * kHalvesPerRepeat], mask, uint64_t(tail), uint8_t(1),
                     broadcast);
    }
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Sub(v.w2, v.s, v.w2, n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Muls(v.w2, v.w2, int32_t(1 << 21), n);
    AscendC::PipeBarrier<PIPE_V>();
    AscendC::Mul(v.c, v.c, v.w2.ReinterpretCast<float>(), n);
    AscendC::PipeBarrier<PIPE_V>();
}

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_UNSCALE_TILE_HPP
