// Kernel layer, vector unit: the FP32 -> (FP16 hi, FP16 lo) split of
// cpu_fallback.split, written straight into the Zz fractal layout the GEMM
// kernel loads.  For every element x (first scaled by its line's power of two
// when the guarantee's integers are given, then replaced by +0 when non-finite
// or, with those integers, when |x| is at or above what the split holds; see below):
//
//   x  = x * 2^t                        (optional) t of x's row (A) or column (B), one rounding
//   hi = fp16(x)                        Cast, round to nearest even
//   lo = fp16((x - f32(hi)) * 2^sb)     Cast back (exact), Sub (exact), Muls (exact), Cast RNE
//
// Input: (batch * rows) x cols FP32 row-major, rows and cols multiples of 16
// (the host zero-pads).  Work: strips of 16 rows, round-robin over the cores,
// in column tiles of at most schedule::kSplitTileCols (B's scaled split takes a
// core's strips of one batch tile by tile, see RunSplit), two tiles in UB at once
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
// 128-bit mask to every repeat).  With b = bits(x) as int32 and L the bits of
// the bound (0x7F800000, infinity, without the guarantee's integers; the
// split's max_abs with them, guard.py's class-2 entries):
//
//   a = b & 0x7FFFFFFF       |x| (non-negative floats order as their bits)
//   u = a - L                negative below the bound, >= 0 at or above it and for Inf/NaN
//   m = min(max(u, -1), 0)   -1 (all ones) below the bound, 0 otherwise
//   b = b & m                kept, or +0
//
// The band cutoff (`keep_from`, the listed lines' exponent bands, cpu_fallback/bands.py): a band pass
// keeps only the entries whose scaled magnitude lies in the split's window [lower, 2^(top + 1)): the
// host passes keep_below = bits of 2^(top + 1) and keep_from = bits of lower (guard::fp16_line_range),
// and after the test above a second one zeroes what lies below F = keep_from
// (tile::ZeroBelow: n = min(max((F - 1) - a, -1), 0), b = b & n), so that the split reads exactly
// bands.band_values(x, t, axis, band_window(sb, arithmetic)) when t is the band's exponent t_a.  The
// lower bound belongs to the window (kept), the upper one does not: an entry of band a that scales to
// 2^(top + 1) is the lowest of band a - 1 (scaled to lower by that band's t).  keep_from = 0 is no
// lower bound: the second test is not issued, so the ordinary split costs what it did.
//
// The scaling (guard.scale_lines): 2^t is applied as two multiplies, by 2^t1
// and 2^t2 with t1 = min(t, 127) and t2 = t - t1 (t <= 163: a line's largest
// entry lands at most at 2^15), so each factor is an FP32 value; only the
// last can round (scaling a subnormal result), as the float64 path rounds
// once.  A band's exponent reaches top + 150 (bands.band_exponents' cap, which scales every
// nonzero FP32 magnitude to 2^(top + 1) or more: an empty band): t1 = 127, t2 <= 37, both factors
// FP32 values; the valid range of t is [-127, top + 150] (a band pass's integers come from the host
// unchecked).  Each row's (A) or column's (B) factors fill a factor tile in the
// tile's Zz order: the scalar unit writes one piece (256 values), UB -> UB
// copies double it to 16 pieces.  A strip of a batch whose word says no line is scaled
// (batch_flags.hpp, set by the line-meta kernel) skips the factors and the two multiplies: every t of
// that batch is 0 and x * 2^0 is x, so the output is the same bits.
#ifndef SGEMM_CUBE_KERNEL_SPLIT_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_SPLIT_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/guard/line_meta.hpp"
#include "sgemm_cube/kernel/batch_flags.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"
#include "sgemm_cube/tile/split_tile.hpp"
#include "sgemm_cube/tile/vector_copy.hpp"
#include "sgemm_cube/tile/vector_stages.hpp"

namespace sgemm_cube {
namespace kernel {

struct SplitArgs {
    uint32_t batch, rows, cols;  ///< padded sizes, multiples of 16
    uint32_t plan_cores;         ///< vector cores the host planned with
    float scale;                 ///< 2^sb, exact
    uint32_t scaled_lines;       ///< 0: no line scaling; 1: per row (A); 2: per column (B), from `meta`
    uint32_t keep_below;         ///< FP32 bits of the bound: |x| at or above it (and NaN/Inf) become +0
    uint32_t keep_from;          ///< FP32 bits of the band's lower bound: |x| below it becomes +0; 0: none
};

/// The two FP32 factors 2^t1, 2^t2 (bits) of a line's scaling exponent t (see the file comment).
__aicore__ inline void line_factors(int32_t t, uint32_t* f1, uint32_t* f2)
{
    const int32_t t1 = t < 127 ? t : 127;
    const int32_t t2 = t - t1;
    *f1 = t1 >= -126 ? uint32_t(t1 + 127) << 23 : 0x00400000u >> (-127 - t1);  // t >= -127 (guard.py)
    *f2 = uint32_t(t2 + 127) << 23;
}

/// The factor tiles of tile t of the strip, in its Zz order (element (r, c) at (c / 16) * 256 + r * 16 + c % 16):
/// rows (A): 2^t of row r of the strip; columns (B): 2^t of column c of the tile.  The scalar unit decodes
/// the packed integers (guard.pack_meta) and writes piece 0 (rows) or row 0 of every piece (columns); UB -> UB
/// copies on the vector pipe replicate it.
__aicore__ inline void BuildFactors(const AscendC::LocalTensor<float>& f1, const AscendC::LocalTensor<float>& f2,
                                    const AscendC::LocalTensor<int32_t>& vmeta,
                                    const AscendC::GlobalTensor<int32_t>& gmeta, const schedule::SplitGeometry& s,
                                    uint32_t strip, uint32_t t, bool per_row)
{
    constexpr uint32_t kPiece = schedule::kFractalElems;
    const uint32_t lines = per_row ? schedule::kCube : schedule::split_tile_cols(s, t);
    // per row: the strip's 16 rows (batch * rows counted together); per column: the tile's columns of
    // the strip's batch (strips of one batch are rows / 16 = s.strips / batch apart: meta is per batch).
    const uint64_t first = per_row ? uint64_t(strip) * schedule::kCube
                                   : uint64_t(strip / s.strips_per_batch) * s.cols + uint64_t(t) * schedule::kSplitTileCols;
    AscendC::WaitFlag<AscendC::HardEvent::V_S>(0);     // the previous factors are no longer read
    AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(0);  // nor the previous integers
    tile::CopyIn(vmeta, gmeta[first], lines);
    tile::Handoff<AscendC::HardEvent::MTE2_S>(0);
    const AscendC::LocalTensor<uint32_t> u1 = f1.ReinterpretCast<uint32_t>(), u2 = f2.ReinterpretCast<uint32_t>();
    for (uint32_t i = 0; i < lines; ++i) {
        uint32_t b1, b2;
        line_factors(guard::unpack(vmeta.GetValue(i)).t, &b1, &b2);
        if (per_row) {  // row i of piece 0, all 16 columns
            for (uint32_t j = 0; j < schedule::kCube; ++j) {
                u1.SetValue(i * schedule::kCube + j, b1);
                u2.SetValue(i * schedule::kCube + j, b2);
            }
        } else {  // column i: piece i / 16, position i % 16 of its row 0
            u1.SetValue((i / schedule::kCube) * kPiece + i % schedule::kCube, b1);
            u2.SetValue((i / schedule::kCube) * kPiece + i % schedule::kCube, b2);
        }
    }
    AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);
    tile::Handoff<AscendC::HardEvent::S_V>(0);
    if (per_row) {  // piece 0 -> all 16 pieces: 256 -> 512 -> ... -> 4096 elements
        for (uint32_t n = kPiece; n < schedule::kCube * kPiece; n *= 2) {
            const AscendC::DataCopyParams run(1, uint16_t(n * 4 / schedule::kBlockBytes), 0, 0);
            AscendC::DataCopy(f1[n], f1, run);
            AscendC::DataCopy(f2[n], f2, run);
            AscendC::PipeBarrier<PIPE_V>();
        }
    } else {  // row 0 of every piece -> rows 1..15: 16 -> 32 -> ... -> 256 elements per piece
        const uint32_t pieces = lines / schedule::kCube;
        for (uint32_t n = schedule::kCube; n < kPiece; n *= 2) {
            const uint16_t blocks = uint16_t(n * 4 / schedule::kBlockBytes);
            const uint16_t gap = uint16_t((kPiece - n) * 4 / schedule::kBlockBytes);
            const AscendC::DataCopyParams run(uint16_t(pieces), blocks, gap, gap);
            AscendC::DataCopy(f1[n], f1, run);
            AscendC::DataCopy(f2[n], f2, run);
            AscendC::PipeBarrier<PIPE_V>();
        }
    }
}

template <class SocTag>
__aicore__ inline void RunSplit(__gm__ float* x, __gm__ half* hi, __gm__ half* lo, __gm__ int32_t* meta,
                                __gm__ float* flags, const SplitArgs& args)
{
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

    tile::SplitUb ub;
    ub.Init(tile::VectorUb(schedule::kSplitUbBytes));
    tile::SplitStage* v = ub.stage;
    BatchFlags batch_flags;  // which batches have a scaled line (null flags: every batch may)
    batch_flags.Init(ub.flags, args.scaled_lines != 0 ? flags : nullptr);
    AscendC::GlobalTensor<int32_t> gmeta;
    if (args.scaled_lines != 0) {
        gmeta.SetGlobalBuffer(meta);
    }

    tile::FillSplitBound(ub.bound, args.keep_below, kTile);  // the bound test's constants, once
    // Two stages, the parts in their own buffers: the load of one tile, the vector work on another and
    // the store of a third overlap.
    using Stages = tile::VectorStages<schedule::kSplitStages, tile::StageResults::kOwnBuffers>;
    const Stages stages;
    AscendC::SetFlag<AscendC::HardEvent::V_S>(0);    // factor tiles free for the scalar unit
    AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0); // meta staging free
    stages.Open();
    // Work order: the core's strips in turn, each tile by tile; with B's column factors, per batch, tile by
    // tile, the core's strips of that batch in turn (`group` strips together), so that a column factor tile
    // (one per batch and column tile) is built once for them all rather than once per strip.  Every tile is
    // split on its own, so the order changes no bit of the output.
    const bool per_column = args.scaled_lines == 2;
    uint32_t seq = 0;
    for (uint32_t first = core; first < s.strips;) {
        const uint32_t batch = first / s.strips_per_batch;
        const uint32_t batch_end = (batch + 1) * s.strips_per_batch;
        const uint32_t group = per_column ? (batch_end - 1 - first) / s.cores + 1 : 1;
        const bool scaled = args.scaled_lines != 0 && batch_flags.Any(batch, batch, schedule::kFlagScaled);
        for (uint32_t t = 0; t < s.tiles_per_strip; ++t) {
            for (uint32_t g = 0; g < group; ++g, ++seq) {
                const uint32_t strip = first + g * s.cores;
                const uint32_t st = Stages::Of(seq);
                const uint32_t w = schedule::split_tile_cols(s, t);
                const uint32_t count = schedule::kCube * w;
                // GM -> UB, row by row: the pieces of row r go to p * 256 + r * 16 (Zz order).
                stages.AwaitLoadable(st);
                const schedule::RowPieces rp = schedule::split_row_pieces(w);
                for (uint32_t r = 0; r < schedule::kCube; ++r) {
                    AscendC::DataCopy(v[st].x[schedule::split_ub_row_offset(r)],
                                      gx[schedule::split_in_offset(s, strip, t, r)],
                                      AscendC::DataCopyParams(uint16_t(rp.pieces), uint16_t(rp.piece_blocks), 0,
                                                              uint16_t(rp.ub_gap_blocks)));
                }
                // The factor tiles: per row, once per strip (A); per column, once per batch and tile (B).
                const bool builds = per_column ? g == 0 : t == 0;
                const bool last_reader = per_column ? g + 1 == group : t + 1 == s.tiles_per_strip;
                if (scaled && builds) {
                    BuildFactors(ub.f1, ub.f2, ub.meta, gmeta, s, strip, t, !per_column);
                }
                stages.Loaded(st);
                stages.AwaitLoaded(st);
                if (scaled) {  // x * 2^t1 * 2^t2 (see the file comment)
                    tile::ScaleByFactors(v[st], ub.f1, ub.f2, count);
                    if (last_reader) {
                        AscendC::SetFlag<AscendC::HardEvent::V_S>(0);  // the factors' last reader is done
                    }
                }
                tile::ZeroUnsplittable(v[st], ub.bound, count);  // |x| at or above the bound, NaN, Inf -> +0
                if (args.keep_from != 0) {  // a band: |x| below its window -> +0 (the file comment)
                    tile::ZeroBelow(v[st], ub.bound, args.keep_from, count);
                }
                stages.AwaitResultsStored(st);  // the stage's parts are stored: overwrite them
                tile::SplitToHalves(v[st], SocTag::kToHalf, args.scale, count);
                stages.InputRead(st);
                stages.Computed(st);
                // UB -> GM: the tile is one contiguous Zz range; one burst per part.
                const uint64_t out = schedule::split_out_offset(s, strip, t);
                tile::CopyOut(ghi[out], v[st].hi, count);
                tile::CopyOut(glo[out], v[st].lo, count);
                stages.Stored(st);
            }
        }
        first += group * s.cores;
    }
    stages.Close();
    AscendC::WaitFlag<AscendC::HardEvent::V_S>(0);
    AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(0);
    batch_flags.Finish();
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_SPLIT_KERNEL_HPP
