// Tile layer, chip-specific: write one FP32 accumulator (an m x n Nz tile in
// L0C) to a row-major GM term buffer, either storing it (group 0) or adding
// it to what is there (later K groups: FP32 atomic add, round to nearest).
//
//   910B: Fixpipe L0C -> GM with the NZ -> ND conversion done on the way
//         (FixpipeParamsV220, CFG_ROW_MAJOR, no quantisation keeps FP32).
//   910A: no Fixpipe and no L0C -> GM path: L0C -> UB (DataCopy with
//         BLOCK_MODE_MATRIX, whole 16x16 FP32 fractals, on the vector pipe),
//         NZ -> ND reorder in UB on the vector pipe (one strided UB -> UB copy
//         per 16-column strip), then UB -> GM (MTE3).  Two ND tiles alternate
//         so the next term's reorder overlaps this term's GM write (one when
//         only two tiles fit in UB).  With one K group the 910A can also
//         combine the terms right there (StoreCombined): every accumulator is
//         final, and C is already passing through the vector unit's UB.  Then
//         the guarantee's unscale too, where the batch's words allow its fast
//         path (EpilogueUnscale, issue 32): C *= alpha 2^s on the ND tile, so
//         the unscale pass need not read and write C again for that batch.
//
// Each chip's variant is a partial specialisation on (SocTag, Element), after
// CATLASS's arch-tag tiles (`CopyL0CToGm<AtlasA2, ...>`): its body depends on
// Element, so it is only type-checked when the kernel instantiates it, i.e.
// in that chip's build.  The real headers also gate the APIs themselves
// (`Fixpipe(GlobalTensor, LocalTensor, FixpipeParamsV220)` is declared in
// include/basic_api/kernel_operator_fixpipe_intf.h only for __NPU_ARCH__ 2201
// and later; dav_c100 has only the FixpipeParams<U> form), so each variant is
// also compiled only where its chip's __NPU_ARCH__ is (or no __NPU_ARCH__ is
// defined: the g++ stand-in check, which compiles both).
#ifndef SGEMM_CUBE_TILE_ACCUMULATOR_STORE_HPP
#define SGEMM_CUBE_TILE_ACCUMULATOR_STORE_HPP

#include "kernel_operator.h"
#include "sgemm_cube/guard/line_meta.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"
#include "sgemm_cube/tile/vector_stages.hpp"

namespace sgemm_cube {
namespace tile {

using AscendC::GlobalTensor;
using AscendC::LocalTensor;

/// The guarantee's unscale in the 910A's epilogue: the lines' packed integers (guard.pack_meta, batch *
/// mp rows of A, batch * np columns of B), the batches' words (kernel/batch_flags.hpp) and alpha =
/// alpha_mant 2^alpha_exp.  `meta_a` null: the epilogue does not unscale (the pass does all of it).
struct EpilogueUnscale {
    __gm__ int32_t* meta_a = nullptr;
    __gm__ int32_t* meta_b = nullptr;
    __gm__ float* flags = nullptr;
    float alpha_mant = 1.0f;
    int32_t alpha_exp = 0;
};

/// Where one tile's lines are in EpilogueUnscale's arrays: its batch, and the offsets of its first row
/// (batch * mp + row) and first column (batch * np + column).
struct TileLines {
    uint32_t batch;
    uint64_t row0, col0;
};

/// Writes FP32 accumulators of type `Element` from L0C to GM (see above).
template <class SocTag, class Element = float>
struct AccumulatorStore;

#if !defined(__NPU_ARCH__) || (__NPU_ARCH__ == 2201)
template <class Element>
struct AccumulatorStore<Soc910B, Element> {
    /// No UB on the cube core: nothing to set up.
    __aicore__ inline void Init(const LocalTensor<uint8_t>&, const schedule::Geometry&) {}

    /// `dst` is the tile's first element; `ld` the row length of the GM buffer.
    __aicore__ inline void operator()(const GlobalTensor<Element>& dst, const LocalTensor<Element>& acc, uint32_t m,
                                      uint32_t n, uint32_t ld, bool accumulate)
    {
        AscendC::FixpipeParamsV220 p;
        p.nSize = uint16_t(n);      // multiple of 16 (Fixpipe requirement)
        p.mSize = uint16_t(m);
        p.srcStride = uint16_t(m);  // distance between Nz column strips, in 16-element rows: m rounded to 16
        p.dstStride = ld;           // NZ2ND: elements per destination row
        p.reluEn = false;
        p.quantPre = QuantMode_t::NoQuant;
        p.ndNum = 1;
        p.srcNdStride = 0;
        p.dstNdStride = 0;
        p.unitFlag = 0;
        if (accumulate) {
            AscendC::SetAtomicAdd<Element>();  // L0C -> GM path supports FP32 atomic add on A2
        }
        AscendC::Fixpipe<Element, Element, AscendC::CFG_ROW_MAJOR>(dst, acc, p);
        if (accumulate) {
            AscendC::SetAtomicNone();  // DisableDmaAtomic in newer CANN; this name exists in all versions
        }
    }

    __aicore__ inline void Finish() {}
};
#endif  // 910B

#if !defined(__NPU_ARCH__) || (__NPU_ARCH__ == 1001)
template <class Element>
struct AccumulatorStore<Soc910A, Element> {
    /// UB tiles (schedule::ub_tile_offset): 0 the NZ copy of an accumulator, then
    /// the ND tiles; with the combine, tile 1 is a second NZ tile and 2 the ND tile.
    __aicore__ inline void Init(const LocalTensor<uint8_t>& ub, const schedule::Geometry& g)
    {
        const schedule::BufferPlan& plan = g.plan;
        nz_ = tile(ub, plan, 0);
        const uint32_t first_nd = g.combine_in_epilogue ? 2u : 1u;
        if (g.combine_in_epilogue) {
            nz2_ = tile(ub, plan, 1);
        }
        nd_slots_ = plan.ub_tiles - first_nd;
        for (uint32_t i = 0; i < nd_slots_; ++i) {
            nd_[i] = tile(ub, plan, first_nd + i);
            AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(int32_t(i));  // every ND tile starts free
        }
        slot_ = 0;
    }

    /// One accumulator to GM: store, or add (`accumulate`) to what is there.
    __aicore__ inline void operator()(const GlobalTensor<Element>& dst, const LocalTensor<Element>& acc, uint32_t m,
                                      uint32_t n, uint32_t ld, bool accumulate)
    {
        // The previous reorder must be done reading nz_ (same pipe, ordered by the barrier).
        AscendC::PipeBarrier<PIPE_V>();
        ToUb(nz_, acc, m, n);
        AscendC::PipeBarrier<PIPE_V>();
        WriteNd(dst, m, n, ld, accumulate);
    }

    /// The guarantee's integers and alpha for StoreCombined's unscale (Init leaves it off).
    __aicore__ inline void SetUnscale(const EpilogueUnscale& u)
    {
        unscale_ = u.meta_a != nullptr && u.flags != nullptr;
        if (unscale_) {
            meta_a_.SetGlobalBuffer(u.meta_a);
            meta_b_.SetGlobalBuffer(u.meta_b);
            flags_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(u.flags));
            alpha_mant_ = u.alpha_mant;
            alpha_exp_ = u.alpha_exp;
        }
    }

    /// C = ((LL 2^-sb + LH) + HL) 2^-sb + HH from the accumulators `acc[term]`
    /// (LL only when terms == 4), every operation one FP32 rounding, in the
    /// combine kernel's order; then, where schedule::epilogue_unscales says so
    /// for the tile's batch, C *= alpha 2^s (Unscale); then C to GM.  On the
    /// vector pipe throughout.
    __aicore__ inline void StoreCombined(const GlobalTensor<Element>& dst, const LocalTensor<Element>* acc,
                                         uint32_t terms, Element inv_scale, uint32_t m, uint32_t n, uint32_t ld,
                                         const TileLines& lines)
    {
        const int32_t count = int32_t(m * n);
        AscendC::PipeBarrier<PIPE_V>();  // the previous reorder is done reading nz_
        if (terms == schedule::kMaxTerms) {
            ToUb(nz_, acc[schedule::kLoLo], m, n);
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Muls(nz_, nz_, inv_scale, count);  // the smallest term first
            AscendC::PipeBarrier<PIPE_V>();
            ToUb(nz2_, acc[schedule::kLoHi], m, n);
            AscendC::PipeBarrier<PIPE_V>();
            AscendC::Add(nz_, nz_, nz2_, count);
        } else {
            ToUb(nz_, acc[schedule::kLoHi], m, n);
        }
        AscendC::PipeBarrier<PIPE_V>();
        ToUb(nz2_, acc[schedule::kHiLo], m, n);
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Add(nz_, nz_, nz2_, count);           // corr + HL
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Muls(nz_, nz_, inv_scale, count);     // corr * 2^-sb
        AscendC::PipeBarrier<PIPE_V>();
        ToUb(nz2_, acc[schedule::kHiHi], m, n);
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Add(nz_, nz_, nz2_, count);           // + HH
        AscendC::PipeBarrier<PIPE_V>();
        Reorder(m, n);
        if (unscale_ && BatchUnscaled(lines.batch)) {
            Unscale(lines, m, n);
        }
        Emit(dst, m, n, ld, false);
    }

    /// Consume the last "free" flags so no event is left set at kernel end.
    __aicore__ inline void Finish()
    {
        for (uint32_t i = 0; i < nd_slots_; ++i) {
            AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(int32_t(i));
        }
    }

private:
    static __aicore__ inline LocalTensor<Element> tile(const LocalTensor<uint8_t>& ub, const schedule::BufferPlan& p,
                                                       uint32_t i)
    {
        return ub[schedule::ub_tile_offset(p, i)].template ReinterpretCast<Element>();
    }

    /// L0C -> UB, whole 16x16 FP32 fractals in their Nz order (vector pipe).
    __aicore__ inline void ToUb(const LocalTensor<Element>& nz, const LocalTensor<Element>& acc, uint32_t m,
                                uint32_t n)
    {
        static_assert(sizeof(Element) == schedule::kFloatBytes, "the UB staging is sized for FP32 accumulators");
        const uint32_t fractals = (m / schedule::kCube) * (n / schedule::kCube);
        AscendC::DataCopyEnhancedParams enhanced;
        enhanced.blockMode = AscendC::BlockMode::BLOCK_MODE_MATRIX;  // unit: one 16x16 FP32 fractal (1 KiB)
        AscendC::DataCopy(nz, acc, AscendC::DataCopyParams(1, uint16_t(fractals), 0, 0), enhanced);
    }

    /// Whether the epilogue unscales batch `batch` (schedule::epilogue_unscales from its words); the scalar
    /// unit reads the batch's block of words into nz_ (free once reordered), once per batch met.
    __aicore__ inline bool BatchUnscaled(uint32_t batch)
    {
        if (batch == words_batch_) {
            return words_answer_;
        }
        const LocalTensor<int32_t> words = nz_.template ReinterpretCast<int32_t>();
        Handoff<AscendC::HardEvent::V_MTE2>(kUnscaleEvent);  // the reorder has read nz_
        AscendC::DataCopy(words, flags_[uint64_t(batch) * schedule::kFlagWords], AscendC::DataCopyParams(1, 1, 0, 0));
        Handoff<AscendC::HardEvent::MTE2_S>(kUnscaleEvent);
        const bool alpha_one = alpha_mant_ == 1.0f && alpha_exp_ == 0;
        words_answer_ = schedule::epilogue_unscales(words.GetValue(schedule::kFlagScaled) != 0,
                                                    words.GetValue(schedule::kFlagWide) != 0, alpha_one, alpha_exp_);
        words_batch_ = batch;
        Handoff<AscendC::HardEvent::S_MTE2>(kUnscaleEvent);  // read: the next load may overwrite it
        Handoff<AscendC::HardEvent::S_V>(kUnscaleEvent);     // and the next tile's vector work
        return words_answer_;
    }

    /// The ND tile of C (m x n) *= alpha 2^s, s = alpha_exp - ta_i - tb_j: RunUnscale's fast path
    /// (kernel/unscale_kernel.hpp) with the same bits, C * alpha_mant first (where alpha_mant != 1), then one
    /// Mul by the exact FP32 power of two 2^s.  Its batch has no wide line, so |ta|, |tb| <= kFastLineExponent
    /// and s + 127 lies in [1, 254]: the bits of 2^s are (s + 127) 2^23 = (alpha_exp - ta_i + 127) 2^23 +
    /// (-tb_j 2^23), both parts and the sum well inside int32.  The lines' integers go into nz_ and the
    /// factors into nz2_, both free once C is in the ND tile: no UB beyond the epilogue's three tiles.
    __aicore__ inline void Unscale(const TileLines& lines, uint32_t m, uint32_t n)
    {
        const int32_t count = int32_t(m * n);
        const LocalTensor<int32_t> ints = nz_.template ReinterpretCast<int32_t>();
        const LocalTensor<int32_t> rows = ints, cols = ints[m], low = ints[m + n];  // m, n multiples of 16
        const LocalTensor<int32_t> factor = nz2_.template ReinterpretCast<int32_t>();
        Handoff<AscendC::HardEvent::V_MTE2>(kUnscaleEvent);  // the reorder has read nz_
        AscendC::DataCopy(rows, meta_a_[lines.row0], AscendC::DataCopyParams(1, uint16_t(m * 4 / schedule::kBlockBytes), 0, 0));
        AscendC::DataCopy(cols, meta_b_[lines.col0], AscendC::DataCopyParams(1, uint16_t(n * 4 / schedule::kBlockBytes), 0, 0));
        Handoff<AscendC::HardEvent::MTE2_V>(kUnscaleEvent);
        Handoff<AscendC::HardEvent::MTE2_S>(kUnscaleEvent);
        // -tb_j 2^23 from packed = cls + 4 (tb + 1024), cls < 4 (no shifts on the 910A: And on halfwords).
        const LocalTensor<uint16_t> cu = cols.template ReinterpretCast<uint16_t>(), lu = low.template ReinterpretCast<uint16_t>();
        AscendC::Duplicate<int32_t>(low, int32_t(3), int32_t(n));
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::And(lu, cu, lu, int32_t(2 * n));  // cls (the high halfword of 3 is 0)
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Sub(cols, cols, low, int32_t(n));  // 4 (tb + 1024)
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Adds(cols, cols, int32_t(-4096), int32_t(n));  // 4 tb
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::Muls(cols, cols, int32_t(-(1 << 21)), int32_t(n));  // -tb 2^23
        AscendC::PipeBarrier<PIPE_V>();
        for (uint32_t i = 0; i < m; ++i) {  // row i's factors: its part plus the columns'
            const int32_t ta = guard::unpack(rows.GetValue(i)).t;
            AscendC::Adds(factor[i * n], cols, (alpha_exp_ - ta + 127) * (1 << 23), int32_t(n));
        }
        Handoff<AscendC::HardEvent::S_MTE2>(kUnscaleEvent);  // the rows' integers were read: the next load
        Handoff<AscendC::HardEvent::S_V>(kUnscaleEvent);     // and the next tile's vector work may overwrite them
        AscendC::PipeBarrier<PIPE_V>();
        const LocalTensor<Element>& nd = nd_[slot_];
        if (alpha_mant_ != 1.0f) {
            AscendC::Muls(nd, nd, Element(alpha_mant_), count);
            AscendC::PipeBarrier<PIPE_V>();
        }
        AscendC::Mul(nd, nd, factor.template ReinterpretCast<Element>(), count);  // the one rounding
        AscendC::PipeBarrier<PIPE_V>();
    }

    /// nz_ (m x n, Nz) -> ND tile (vector pipe) -> GM (MTE3), storing or adding.
    __aicore__ inline void WriteNd(const GlobalTensor<Element>& dst, uint32_t m, uint32_t n, uint32_t ld,
                                   bool accumulate)
    {
        Reorder(m, n);
        Emit(dst, m, n, ld, accumulate);
    }

    /// nz_ (m x n, Nz) -> the current ND tile (vector pipe), once its previous GM write is done.
    __aicore__ inline void Reorder(uint32_t m, uint32_t n)
    {
        // NZ -> ND: column strip j is m rows of 16 floats (two 32-byte blocks),
        // going to columns [16 j, 16 j + 16) of every row of the ND tile.
        LocalTensor<Element>& nd = nd_[slot_];
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(int32_t(slot_));
        const uint32_t row_blocks = n * schedule::kFloatBytes / schedule::kBlockBytes;
        for (uint32_t j = 0; j < n / schedule::kCube; ++j) {
            AscendC::DataCopy(nd[j * schedule::kCube], nz_[j * m * schedule::kCube],
                              AscendC::DataCopyParams(uint16_t(m), 2, 0, uint16_t(row_blocks - 2)));
        }
    }

    /// The current ND tile (m x n) -> GM (MTE3), storing or adding; the next tile takes the next ND slot.
    __aicore__ inline void Emit(const GlobalTensor<Element>& dst, uint32_t m, uint32_t n, uint32_t ld,
                                bool accumulate)
    {
        LocalTensor<Element>& nd = nd_[slot_];
        const uint32_t row_blocks = n * schedule::kFloatBytes / schedule::kBlockBytes;
        AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(int32_t(slot_));
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(int32_t(slot_));

        if (accumulate) {
            AscendC::SetAtomicAdd<Element>();  // training series: FP32 atomic add on the UB -> GM path
        }
        const uint32_t gap = (ld - n) * schedule::kFloatBytes / schedule::kBlockBytes;
        if (gap <= schedule::kMaxGap) {
            AscendC::DataCopy(dst, nd, AscendC::DataCopyParams(uint16_t(m), uint16_t(row_blocks), 0, uint16_t(gap)));
        } else {
            for (uint32_t r = 0; r < m; ++r) {
                AscendC::DataCopy(dst[uint64_t(r) * ld], nd[r * n], AscendC::DataCopyParams(1, uint16_t(row_blocks), 0, 0));
            }
        }
        if (accumulate) {
            AscendC::SetAtomicNone();
        }
        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(int32_t(slot_));
        slot_ = (slot_ + 1) % nd_slots_;
    }

    static constexpr int32_t kUnscaleEvent = 0;  ///< the unscale's hand-offs (no other V/S <-> MTE2 flags here)

    LocalTensor<Element> nz_, nz2_;
    LocalTensor<Element> nd_[2];
    uint32_t nd_slots_ = 0;
    uint32_t slot_ = 0;
    bool unscale_ = false;
    GlobalTensor<int32_t> meta_a_, meta_b_, flags_;
    float alpha_mant_ = 1.0f;
    int32_t alpha_exp_ = 0;
    uint32_t words_batch_ = ~0u;  ///< the batch whose answer words_answer_ holds
    bool words_answer_ = false;
};
#endif  // 910A

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_ACCUMULATOR_STORE_HPP
