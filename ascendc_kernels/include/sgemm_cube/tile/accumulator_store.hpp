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
//         so the next term's reorder overlaps this term's GM write.
#ifndef SGEMM_CUBE_TILE_ACCUMULATOR_STORE_HPP
#define SGEMM_CUBE_TILE_ACCUMULATOR_STORE_HPP

#include "kernel_operator.h"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"

namespace sgemm_cube {
namespace tile {

using AscendC::GlobalTensor;
using AscendC::LocalTensor;

template <class SocTag>
struct AccumulatorStore;

template <>
struct AccumulatorStore<Soc910B> {
    /// No UB on the cube core: nothing to set up.
    __aicore__ inline void Init(const LocalTensor<uint8_t>&, const schedule::BufferPlan&) {}

    /// `dst` is the tile's first element; `ld` the row length of the GM buffer.
    __aicore__ inline void operator()(const GlobalTensor<float>& dst, const LocalTensor<float>& acc, uint32_t m,
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
            AscendC::SetAtomicAdd<float>();  // L0C -> GM path supports FP32 atomic add on A2
        }
        AscendC::Fixpipe<float, float, AscendC::CFG_ROW_MAJOR>(dst, acc, p);
        if (accumulate) {
            AscendC::SetAtomicNone();  // DisableDmaAtomic in newer CANN; this name exists in all versions
        }
    }

    __aicore__ inline void Finish() {}
};

template <>
struct AccumulatorStore<Soc910A> {
    __aicore__ inline void Init(const LocalTensor<uint8_t>& ub, const schedule::BufferPlan& plan)
    {
        nz_ = ub[schedule::ub_nz_offset(plan)].ReinterpretCast<float>();
        nd_[0] = ub[schedule::ub_nd_offset(plan, 0)].ReinterpretCast<float>();
        nd_[1] = ub[schedule::ub_nd_offset(plan, 1)].ReinterpretCast<float>();
        slot_ = 0;
        // Both ND tiles start free.
        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(0);
        AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(1);
    }

    __aicore__ inline void operator()(const GlobalTensor<float>& dst, const LocalTensor<float>& acc, uint32_t m,
                                      uint32_t n, uint32_t ld, bool accumulate)
    {
        const uint32_t fractals = (m / schedule::kCube) * (n / schedule::kCube);
        // The previous reorder must be done reading nz_ (same pipe, ordered by the barrier).
        AscendC::PipeBarrier<PIPE_V>();
        AscendC::DataCopyEnhancedParams enhanced;
        enhanced.blockMode = AscendC::BlockMode::BLOCK_MODE_MATRIX;  // unit: one 16x16 FP32 fractal (1 KiB)
        AscendC::DataCopy(nz_, acc, AscendC::DataCopyParams(1, uint16_t(fractals), 0, 0), enhanced);
        AscendC::PipeBarrier<PIPE_V>();

        // NZ -> ND: column strip j is m rows of 16 floats (two 32-byte blocks),
        // going to columns [16 j, 16 j + 16) of every row of the ND tile.
        LocalTensor<float>& nd = nd_[slot_];
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(int32_t(slot_));
        const uint32_t row_blocks = n * schedule::kFloatBytes / schedule::kBlockBytes;
        for (uint32_t j = 0; j < n / schedule::kCube; ++j) {
            AscendC::DataCopy(nd[j * schedule::kCube], nz_[j * m * schedule::kCube],
                              AscendC::DataCopyParams(uint16_t(m), 2, 0, uint16_t(row_blocks - 2)));
        }
        AscendC::SetFlag<AscendC::HardEvent::V_MTE3>(int32_t(slot_));
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE3>(int32_t(slot_));

        if (accumulate) {
            AscendC::SetAtomicAdd<float>();  // training series: FP32 atomic add on the UB -> GM path
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
        slot_ ^= 1u;
    }

    /// Consume the last "free" flags so no event is left set at kernel end.
    __aicore__ inline void Finish()
    {
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(0);
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(1);
    }

private:
    LocalTensor<float> nz_;
    LocalTensor<float> nd_[2];
    uint32_t slot_ = 0;
};

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_ACCUMULATOR_STORE_HPP
