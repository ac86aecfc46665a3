// Tile layer, vector unit: GM <-> UB copies of row blocks, the one shape the vector kernels move
// besides the split's Zz rows (kernel/split_kernel.hpp): `rows` rows of `cols` elements, the rows
// `gm_row` elements apart in GM (a tile of a wider matrix) and `ub_row` apart in UB (a tile padded
// to its full width).  DataCopy counts in 32-byte blocks: `cols`, `gm_row` and `ub_row` must each be
// whole blocks of T (the host pads every matrix to multiples of 16 elements; tiles are multiples of 8
// FP32).  The gaps between rows are skipped, neither read nor written: a padded tile's tail columns
// keep what UB held (the line statistics zero them first).
#ifndef SGEMM_CUBE_TILE_VECTOR_COPY_HPP
#define SGEMM_CUBE_TILE_VECTOR_COPY_HPP

#include "kernel_operator.h"
#include "sgemm_cube/schedule/schedule.hpp"

namespace sgemm_cube {
namespace tile {

/// DataCopy's parameters for `rows` rows of `cols` elements of T, source rows `src_row` and destination
/// rows `dst_row` elements apart.
template <typename T>
__aicore__ inline AscendC::DataCopyParams RowBlocks(uint32_t rows, uint32_t cols, uint32_t src_row, uint32_t dst_row)
{
    constexpr uint32_t kPerBlock = schedule::kBlockBytes / sizeof(T);
    return AscendC::DataCopyParams(uint16_t(rows), uint16_t(cols / kPerBlock), uint16_t((src_row - cols) / kPerBlock),
                                   uint16_t((dst_row - cols) / kPerBlock));
}

/// GM -> UB (MTE2): `rows` rows of `cols` elements, `gm_row` apart in GM, `ub_row` apart in UB.
template <typename T>
__aicore__ inline void CopyRowsIn(const AscendC::LocalTensor<T>& ub, const AscendC::GlobalTensor<T>& gm, uint32_t rows,
                                  uint32_t cols, uint32_t gm_row, uint32_t ub_row)
{
    AscendC::DataCopy(ub, gm, RowBlocks<T>(rows, cols, gm_row, ub_row));
}

/// UB -> GM (MTE3): `rows` rows of `cols` elements, `ub_row` apart in UB, `gm_row` apart in GM.
template <typename T>
__aicore__ inline void CopyRowsOut(const AscendC::GlobalTensor<T>& gm, const AscendC::LocalTensor<T>& ub, uint32_t rows,
                                   uint32_t cols, uint32_t ub_row, uint32_t gm_row)
{
    AscendC::DataCopy(gm, ub, RowBlocks<T>(rows, cols, ub_row, gm_row));
}

/// GM -> UB, `count` contiguous elements (whole blocks) in one burst.
template <typename T>
__aicore__ inline void CopyIn(const AscendC::LocalTensor<T>& ub, const AscendC::GlobalTensor<T>& gm, uint32_t count)
{
    CopyRowsIn(ub, gm, 1, count, count, count);
}

/// UB -> GM, `count` contiguous elements (whole blocks) in one burst.
template <typename T>
__aicore__ inline void CopyOut(const AscendC::GlobalTensor<T>& gm, const AscendC::LocalTensor<T>& ub, uint32_t count)
{
    CopyRowsOut(gm, ub, 1, count, count, count);
}

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_VECTOR_COPY_HPP
