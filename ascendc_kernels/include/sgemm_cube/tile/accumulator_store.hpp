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
//         final, and C is already passing through the vector unit's UB.
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
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"

namespace sgemm_cube {
namespace tile {

using AscendC::GlobalTensor;
using AscendC::LocalTensor;

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

    /// C = ((LL 2^-sb + LH) + HL) 2^-sb + HH from the accumulators `acc[term]`
    /// (LL only when terms == 4), every operation one FP32 rounding, in the
    /// combine kernel's order; then C to GM.  On the vector pipe throughout.
    __aicore__ inline void StoreCombined(const GlobalTensor<Element>& dst, const LocalTensor<Element>* acc,
                                         uint32_t terms, Element inv_scale, uint32_t m, uint32_t n, uint32_t ld)
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
        WriteNd(dst, m, n, ld, false);
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

    /// nz_ (m x n, Nz) -> ND tile (vector pipe) -> GM (MTE3), storing or adding.
    __aicore__ inline void WriteNd(const GlobalTensor<Element>& dst, uint32_t m, uint32_t n, uint32_t ld,
                                   bool accumulate)
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

    LocalTensor<Element> nz_, nz2_;
    LocalTensor<Element> nd_[2];
    uint32_t nd_slots_ = 0;
    uint32_t slot_ = 0;
};
#endif  // 910A

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_ACCUMULATOR_STORE_HPP
