// The accuracy guarantee's line meta on the device: cpu_fallback/guard.py's
// meta_from_stats, bit for bit, in integer arithmetic on FP32 bit patterns (no float
// compare, no float64: the AI cores have none, and 910A's saturation mode must not
// matter).  Plain C++ (no AscendC types): the line-meta kernel, the host and the g++
// tests include it.
//
// A line is a row of A or a column of B.  The line-stats kernel reduces each line to
//   big      bits of its largest finite magnitude (0 when none),
//   small_w  bits of its smallest nonzero finite magnitude, minus 1 (0x7FFFFFFF when none),
//   finite   -1 when every entry is finite, 0 when one is NaN or infinite;
// for non-negative FP32 values the bit patterns order as the values do, so these are
// integer max / min / max reductions.  From them, as guard.py:
//   t    the power of two the line is scaled by before the split,
//   cls  0: the split keeps 22 bits of every entry; 1: some entry would lose bits;
//        2: NaN/Inf, or an entry the split cannot hold;
// packed as guard.pack_meta does: cls | (t + 1024) << 2.
#ifndef SGEMM_CUBE_GUARD_LINE_META_HPP
#define SGEMM_CUBE_GUARD_LINE_META_HPP

#include <cstdint>

#include "sgemm_cube/detail/macros.hpp"

namespace sgemm_cube {
namespace guard {

constexpr uint32_t kNoSmall = 0x7FFFFFFFu;   ///< small_w of a line with no nonzero finite entry
constexpr uint32_t kExpMask = 0x7F800000u;   ///< FP32 exponent field
constexpr uint32_t kMantMask = 0x007FFFFFu;

/// guard.SCALES: which lines are scaled by a power of two before the split.
enum class Scale : uint32_t { kNone = 0, kAuto = 1, kRows = 2, kMatrix = 3 };

/// guard.line_range for the FP16 schemes: lower <= |x| < upper is split to 22 bits;
/// scaled lines' largest entry lands in [2^top, 2^(top + 1)).
struct LineRange {
    uint32_t upper_bits;  ///< FP32 bits of upper = min(65520, 2^(27 - sb))
    uint32_t lower_bits;  ///< FP32 bits of lower = 2^(-3 - min(sb, 12)), or 2^max(8 - sb, -14) (kFlush)
    int32_t top;          ///< min(14, 26 - sb)
};

/// What the range assumes of FP16 subnormals in the split's Cast and the cube's inputs
/// (cpu_fallback/arithmetic.py's field `subnormals`; guard.line_range's `arithmetic`).  kFlush's
/// range holds under both: the backend's default until a recorded hardware answer says gradual.
enum class Subnormals : uint32_t { kGradual = 0, kFlush = 1 };

SGEMM_CUBE_HOST_DEVICE LineRange fp16_line_range(uint32_t sb, Subnormals subnormals)
{
    LineRange r{};
    // 65520 = 0x477FF000 (the largest value FP16 rounds below infinity); 2^e = (e + 127) << 23.
    r.upper_bits = sb <= 11 ? 0x477FF000u : uint32_t(27 - int32_t(sb) + 127) << 23;
    if (subnormals == Subnormals::kFlush) {
        // lo below 2^-14 is lost (an error under 2^(-14 - sb)), hi must be normal (split.py's docstring)
        const int32_t low = 8 - int32_t(sb) > -14 ? 8 - int32_t(sb) : -14;
        r.lower_bits = uint32_t(low + 127) << 23;
    } else {
        r.lower_bits = uint32_t(-3 - int32_t(sb < 12 ? sb : 12) + 127) << 23;
    }
    r.top = 26 - int32_t(sb) < 14 ? 26 - int32_t(sb) : 14;
    return r;
}

/// What the split zeroes (kernel/split_kernel.hpp's keep_below, keep_from): entries whose |x| (bits, after the
/// line scaling) is at or above keep_below, or below keep_from.
struct SplitCutoff {
    uint32_t keep_below;  ///< FP32 bits of the bound the split holds below
    uint32_t keep_from;   ///< FP32 bits of the lower bound; 0: none
};

/// The split's cutoff under the guarantee's integers: the ordinary split holds what lies below `upper`
/// (guard.py: the class-2 entries, at or above split_limits(sb).max_abs, go to 0, no lower bound); a band
/// (cpu_fallback/bands.py, `band`) keeps its window [lower, 2^(top + 1)) of `r` (bands.band_window).
SGEMM_CUBE_HOST_DEVICE SplitCutoff split_cutoff(const LineRange& r, bool band)
{
    return band ? SplitCutoff{uint32_t(r.top + 1 + 127) << 23, r.lower_bits} : SplitCutoff{r.upper_bits, 0u};
}

/// The smallest class the fix-up kernels recompute in FP32: guard.fixup_min_class(fixup) (1 with fixup, else 2),
/// except with `bands` (cpu_fallback/bands.py), where the LOSES_BITS lines go to the band passes and only the
/// SPECIAL ones (NaN/Inf, beyond the split's top) stay on the vector unit's FP32 fix-up.
SGEMM_CUBE_HOST_DEVICE uint32_t fixup_min_class(bool fixup, bool bands) { return fixup && !bands ? 1u : 2u; }

/// Number of leading zero bits of a nonzero 32-bit word.
SGEMM_CUBE_HOST_DEVICE int32_t leading_zeros(uint32_t x)
{
    int32_t n = 0;
    while ((x & 0x80000000u) == 0) {
        x <<= 1;
        ++n;
    }
    return n;
}

/// A positive finite FP32 value (bits) as m * 2^(e - 23) with m in [2^23, 2^24): e = floor(log2 x).
struct Normalised {
    uint32_t m;
    int32_t e;
};
SGEMM_CUBE_HOST_DEVICE Normalised normalise(uint32_t bits)
{
    const uint32_t ex = (bits & kExpMask) >> 23;
    if (ex != 0) {
        return Normalised{(bits & kMantMask) | 0x800000u, int32_t(ex) - 127};
    }
    const int32_t shift = leading_zeros(bits & kMantMask) - 8;  // brings the leading 1 to bit 23
    return Normalised{(bits & kMantMask) << shift, -126 - shift};
}

/// floor(log2 x) of a positive finite FP32 value (subnormals included); 0 for x == 0 (guard._floor_log2).
SGEMM_CUBE_HOST_DEVICE int32_t floor_log2(uint32_t bits) { return bits == 0 ? 0 : normalise(bits).e; }

/// x * 2^t >= u, exactly, for positive finite FP32 x and u (bits); false for x == 0.
SGEMM_CUBE_HOST_DEVICE bool scaled_ge(uint32_t x_bits, int32_t t, uint32_t u_bits)
{
    if (x_bits == 0) {
        return false;
    }
    const Normalised x = normalise(x_bits), u = normalise(u_bits);
    const int32_t ex = x.e + t;
    return ex > u.e || (ex == u.e && x.m >= u.m);
}

struct LineStats {
    uint32_t big;
    uint32_t small_w;
    int32_t finite;
};

struct LineMeta {
    int32_t t;
    int32_t cls;
};

/// The scaling exponent of "matrix" scaling from the largest big of the batch's lines (bits).
SGEMM_CUBE_HOST_DEVICE int32_t matrix_t(uint32_t big_of_matrix, const LineRange& r)
{
    return big_of_matrix == 0 ? 0 : r.top - floor_log2(big_of_matrix);
}

/// guard.meta_from_stats for one line; `t_matrix` is used with Scale::kMatrix only.
SGEMM_CUBE_HOST_DEVICE LineMeta meta_from_stats(const LineStats& s, const LineRange& r, Scale scale, int32_t t_matrix,
                                                bool fixup)
{
    const bool has_small = s.small_w != kNoSmall;
    const uint32_t small = s.small_w + 1u;  // bits of the smallest nonzero finite magnitude
    const int32_t e = floor_log2(s.big);
    const int32_t to_top = s.big != 0 ? r.top - e : 0;
    int32_t t = 0;
    switch (scale) {
        case Scale::kNone: t = 0; break;
        case Scale::kRows: t = to_top; break;
        case Scale::kMatrix: t = t_matrix; break;
        case Scale::kAuto: {
            const bool fits = !scaled_ge(s.big, 0, r.upper_bits) && (!has_small || scaled_ge(small, 0, r.lower_bits));
            t = fits ? 0 : to_top;
            break;
        }
    }
    int32_t cls = has_small && !scaled_ge(small, t, r.lower_bits) ? 1 : 0;
    if (scaled_ge(s.big, t, r.upper_bits) || s.finite == 0) {
        cls = 2;
    }
    if (cls >= (fixup ? 1 : 2)) {
        t = s.big != 0 ? -e : 0;  // fix-up lines: largest finite entry into [1, 2)
    }
    return LineMeta{t, cls};
}

/// guard.pack_meta: one int32 per line, bits 0-1 cls, bits 2-12 t + 1024.
SGEMM_CUBE_HOST_DEVICE int32_t pack(const LineMeta& m) { return m.cls | ((m.t + 1024) << 2); }
/// guard.unpack_meta (scalar arithmetic: the vector units of 910A have no shifts).
SGEMM_CUBE_HOST_DEVICE LineMeta unpack(int32_t packed)
{
    const int32_t cls = packed & 3;
    return LineMeta{(packed - cls) / 4 - 1024, cls};
}

}  // namespace guard
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_GUARD_LINE_META_HPP
