// Tile layer: one copy or one Mmad, on both SoCs (the APIs below have the same
// contract on dav-c100 and dav-c220; where they differ, see accumulator_store.hpp).
//
// Layouts (see schedule.hpp): operands arrive in GM as Zz fractal matrices, so
//   GM -> L1   is one strided DataCopy of whole fractal rows (MTE2);
//   L1 -> L0A  is a contiguous LoadData of m*k/256 fractals, Zz stays Zz (MTE1);
//   L1 -> L0B  is the same with every fractal transposed: Zz -> Zn (MTE1);
//   Mmad       reads Zz (A) and Zn (B), accumulates FP32 in L0C in Nz (M).
#ifndef SGEMM_CUBE_TILE_COPY_HPP
#define SGEMM_CUBE_TILE_COPY_HPP

#include "kernel_operator.h"
#include "sgemm_cube/schedule/schedule.hpp"

namespace sgemm_cube {
namespace tile {

using AscendC::GlobalTensor;
using AscendC::LocalTensor;

/// GM -> L1 (MTE2): `r.runs` runs of `r.run_blocks` 32-byte blocks, `r.gap_blocks`
/// apart in GM, packed in L1.  Falls back to one copy per run when the gap or
/// the run count passes DataCopyParams' 16/12-bit fields (very wide K or N).
__aicore__ inline void CopyGmToL1(const LocalTensor<half>& dst, const GlobalTensor<half>& src,
                                  const schedule::FractalRuns& r)
{
    if (r.gap_blocks <= schedule::kMaxGap && r.runs <= schedule::kMaxBlockCount) {
        AscendC::DataCopy(dst, src,
                          AscendC::DataCopyParams(uint16_t(r.runs), uint16_t(r.run_blocks), uint16_t(r.gap_blocks), 0));
        return;
    }
    constexpr uint32_t kHalvesPerBlock = schedule::kBlockBytes / schedule::kHalfBytes;
    const uint64_t src_stride = uint64_t(r.run_blocks + r.gap_blocks) * kHalvesPerBlock;
    for (uint32_t i = 0; i < r.runs; ++i) {
        AscendC::DataCopy(dst[i * r.run_blocks * kHalvesPerBlock], src[i * src_stride],
                          AscendC::DataCopyParams(1, uint16_t(r.run_blocks), 0, 0));
    }
}

/// L1 -> L0A (MTE1): a compact Zz tile of rows x cols halves, fractal by fractal.
__aicore__ inline void CopyL1ToL0A(const LocalTensor<half>& dst, const LocalTensor<half>& src, uint32_t rows,
                                   uint32_t cols)
{
    AscendC::LoadData2DParams p;
    p.startIndex = 0;
    p.repeatTimes = uint8_t(rows * cols / schedule::kFractalElems);  // <= 255, checked by make_buffer_plan
    p.srcStride = 1;   // consecutive fractals
    p.sid = 0;
    p.dstGap = 0;
    p.ifTranspose = false;
    p.addrMode = 0;
    AscendC::LoadData(dst, src, p);
}

/// L1 -> L0B (MTE1): a compact Zz tile of rows (K) x cols (N) halves; each
/// fractal is transposed on the way, which is the Zn layout Mmad reads for B.
__aicore__ inline void CopyL1ToL0B(const LocalTensor<half>& dst, const LocalTensor<half>& src, uint32_t rows,
                                   uint32_t cols)
{
    AscendC::LoadData2DParams p;
    p.startIndex = 0;
    p.repeatTimes = uint8_t(rows * cols / schedule::kFractalElems);
    p.srcStride = 1;
    p.sid = 0;
    p.dstGap = 0;
    p.ifTranspose = true;
    p.addrMode = 0;
    AscendC::LoadData(dst, src, p);
}

/// C (+)= A B on the cube (M pipe): half x half -> float in L0C.
/// `init` starts the accumulator from zero (first K step of a C block in a group).
__aicore__ inline void TileMmad(const LocalTensor<float>& c, const LocalTensor<half>& a, const LocalTensor<half>& b,
                                uint32_t m, uint32_t n, uint32_t k, bool init)
{
    AscendC::MmadParams p;
    p.m = uint16_t(m);
    p.n = uint16_t(n);
    p.k = uint16_t(k);
    // Newer CANN reads cmatrixInitVal, older ones isBias ("accumulate into C");
    // the implementation uses cmatrixInitVal && !isBias, so set both.
    p.cmatrixInitVal = init;
    p.isBias = !init;
    p.cmatrixSource = false;  // the only value dav-c100 accepts
    p.unitFlag = 0;
    AscendC::Mmad(c, a, b, p);
    // Mmad docs: below (m/16)*(n/16) = 10 fractals the hardware does not
    // order two Mmads on the same L0C by itself.
    if ((m / schedule::kCube) * (n / schedule::kCube) < 10) {
        AscendC::PipeBarrier<PIPE_M>();
    }
}

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_COPY_HPP
