// The AscendC types both host stand-ins use (the declarations-only mock_ascendc/ and the
// executable exec_ascendc/): qualifiers, compiler built-ins, core-type constants, enums and the
// parameter structs, each as the real headers declare it (none of these is gated by arch).
// Read from cannmirror/asc-devkit at 0da921b91aeb2abdc6e8d74423b0bbe7040c3fd1; the "// from:"
// comments name the headers.  Each includer checks __NPU_ARCH__ first and defines g_coreType.
#ifndef SGEMM_CUBE_TESTS_ASCENDC_TYPES_H
#define SGEMM_CUBE_TESTS_ASCENDC_TYPES_H

#include <cstdint>

// ------------------------------------------------------------ qualifiers
// from: impl/utils/sys_macros.h.  Device builds define __aicore__ as [aicore]
// and __host_aicore__ as [ host, aicore ]; a CPU build (ASCENDC_CPU_DEBUG, which
// this stand-in models) gets them from stub_def.h, where they expand to nothing.
#ifndef __aicore__
#define __aicore__
#endif
#ifndef __host_aicore__
#define __host_aicore__
#endif
#ifndef __global__
#define __global__  // compiler built-in (kernel entry)
#endif
#ifndef __gm__
#define __gm__  // compiler built-in (address space of global memory)
#endif
// from: impl/basic_api/utils/kernel_utils_macros.h (GM_ADDR)
#define GM_ADDR __gm__ uint8_t*

// ------------------------------------------------------- compiler built-ins
using half = _Float16;  // compiler built-in
// compiler built-in: pipes; kernel_event.h lists PIPE_FIX as a supported pipe only when
// __NPU_ARCH__ != 1001 (SUPPORTED_PIPE), but the enumerator itself exists on both.
enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_FIX };
// compiler built-in (used by kernel_struct_fixpipe.h, kernel_utils_struct_dma_params.h)
enum class QuantMode_t { NoQuant, F322F16, F322BF16, DEQF16, VDEQF16, QF322B8_PRE, VQF322B8_PRE, REQ8, VREQ8 };
// compiler built-in (used by kernel_struct_data_copy.h: DataCopyEnhancedParams::padMode)
enum class pad_t : uint8_t { PAD_NONE };

// ------------------------------------------------------ kernel type, core type
// from: impl/basic_api/utils/kernel_utils_macros.h (global scope, every arch)
enum KernelMetaType : uint8_t {
    KERNEL_TYPE_AIV_ONLY,
    KERNEL_TYPE_AIC_ONLY,
    KERNEL_TYPE_MIX_AIV_1_0,
    KERNEL_TYPE_MIX_AIC_1_0,
    KERNEL_TYPE_MIX_AIC_1_1,
    KERNEL_TYPE_MIX_AIC_1_2,
    KERNEL_TYPE_AICORE,
    KERNEL_TYPE_VECTORCORE,
    KERNEL_TYPE_MIX_AICORE,
    KERNEL_TYPE_MIX_VECTOR_CORE,
    KERNEL_TYPE_MAX,
};
// from: impl/basic_api/utils/kernel_utils_macros.h: KERNEL_TASK_TYPE_DEFAULT(value) is
// ENABLE_FEATURE_FOR_COMPILE(default, value) for 1001 and 2201 (empty only for 3003/3113);
// here it only type-checks its argument.
#define KERNEL_TASK_TYPE_DEFAULT(value) (void)(value)

namespace AscendC {
// from: impl/utils/sys_constants.h
constexpr int32_t MIX = 0;
constexpr int32_t AIC = 1;
constexpr int32_t AIV = 2;
}  // namespace AscendC

namespace AscendC {

// ------------------------------------------------------------------- enums
// from: impl/basic_api/common_types.h
enum class TPosition : uint8_t {
    GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC,
    LCM = VECCALC, SPM, SHM = SPM, TSCM, C2PIPE2GM, C2PIPE2LOCAL, MAX,
};
// from: impl/basic_api/kernel_event.h (FIX_V, V_FIX only for 5102 / 3003: not declared)
enum class HardEvent : uint8_t {
    MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_V, V_MTE2, MTE3_V, V_MTE3, M_V, V_M, V_V,
    MTE3_MTE1, MTE1_MTE3, MTE1_V, MTE2_M, M_MTE2, V_MTE1, M_FIX, FIX_M, MTE3_MTE2, MTE2_MTE3,
    S_V, V_S, S_MTE2, MTE2_S, S_MTE3, MTE3_S, MTE2_FIX, FIX_MTE2, FIX_S, M_S, FIX_MTE3,
    MTE1_FIX, FIX_MTE1, FIX_FIX, MAX,
};
// from: impl/basic_api/utils/kernel_utils_mode.h (CAST_HYBRID, CAST_EVEN, CAST_ZERO only for
// 3510 / 5102 / 3003: not declared)
enum class RoundMode : uint8_t {
    CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD, UNKNOWN = 0xFF,
};
// from: impl/basic_api/utils/kernel_utils_mode.h
enum class DeqScale : uint8_t { DEQ_NONE = 0, DEQ, VDEQ, DEQ8, VDEQ8, DEQ16, VDEQ16 };
// from: impl/basic_api/utils/kernel_utils_mode_cpu.h (included on every arch)
enum class BlockMode : uint8_t {
    BLOCK_MODE_NORMAL = 0, BLOCK_MODE_MATRIX, BLOCK_MODE_VECTOR, BLOCK_MODE_SMALL_CHANNEL, BLOCK_MODE_DEPTHWISE,
};

// ------------------------------------------------------ parameter structs
// from: include/basic_api/kernel_struct_data_copy.h (fixShiftVal only for 5102: not declared)
struct DataCopyParams {
    DataCopyParams() {}
    DataCopyParams(const uint16_t count, const uint16_t len, const uint16_t srcStrideIn, const uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
    uint16_t blockCount = 1;  // DEFAULT_DATA_COPY_NBURST (impl/basic_api/utils/kernel_utils_constants.h)
    uint16_t blockLen = 0;
    union {
        uint16_t srcGap = 0;
        uint16_t srcStride;  // "will be deprecated, use srcGap"
    };
    union {
        uint16_t dstGap = 0;
        uint16_t dstStride;  // "will be deprecated, use dstGap"
    };
};
// from: include/basic_api/kernel_struct_data_copy.h
struct DataCopyEnhancedParams {
    DataCopyEnhancedParams() {}
    DataCopyEnhancedParams(const BlockMode blockModeIn, const DeqScale deqScaleIn, const uint64_t deqValueIn,
                           const uint8_t sidStoreModeIn, const bool isReluIn, const pad_t padModeIn,
                           const uint64_t padValueIn)
        : blockMode(blockModeIn), deqScale(deqScaleIn), deqValue(deqValueIn), sidStoreMode(sidStoreModeIn),
          isRelu(isReluIn), padMode(padModeIn), padValue(padValueIn) {}
    BlockMode blockMode = BlockMode::BLOCK_MODE_NORMAL;
    DeqScale deqScale = DeqScale::DEQ_NONE;
    uint64_t deqValue = 0;
    uint8_t sidStoreMode = 0;
    bool isRelu = false;
    pad_t padMode = pad_t::PAD_NONE;
    uint64_t padValue = 0;
    uint64_t deqTensorAddr = 0;
};
// from: include/basic_api/kernel_struct_binary.h (strides in 32-byte blocks; defaults DEFAULT_BLK_NUM 8,
// DEFAULT_BLK_STRIDE 1, DEFAULT_REPEAT_STRIDE 8 of impl/basic_api/utils/kernel_utils_constants.h)
struct BinaryRepeatParams {
    BinaryRepeatParams() {}
    BinaryRepeatParams(const uint8_t dstBlkStrideIn, const uint8_t src0BlkStrideIn, const uint8_t src1BlkStrideIn,
                       const uint8_t dstRepStrideIn, const uint8_t src0RepStrideIn, const uint8_t src1RepStrideIn)
        : dstBlkStride(dstBlkStrideIn), src0BlkStride(src0BlkStrideIn), src1BlkStride(src1BlkStrideIn),
          dstRepStride(dstRepStrideIn), src0RepStride(src0RepStrideIn), src1RepStride(src1RepStrideIn) {}
    uint32_t blockNumber = 8;
    uint8_t dstBlkStride = 1;
    uint8_t src0BlkStride = 1;
    uint8_t src1BlkStride = 1;
    uint8_t dstRepStride = 8;
    uint8_t src0RepStride = 8;
    uint8_t src1RepStride = 8;
    bool repeatStrideMode = false;
    bool strideSizeMode = false;
};
// from: include/basic_api/kernel_struct_mm.h
struct LoadData2DParams {
    LoadData2DParams() {}
    LoadData2DParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn, const uint16_t srcStrideIn,
                     const uint8_t sidIn, const uint16_t dstGapIn, const bool ifTransposeIn, const uint8_t addrModeIn)
        : startIndex(startIndexIn), dstGap(dstGapIn), srcStride(srcStrideIn), ifTranspose(ifTransposeIn),
          repeatTimes(repeatTimesIn), sid(sidIn), addrMode(addrModeIn) {}
    uint16_t startIndex = 0;
    uint16_t dstGap = 0;
    uint16_t srcStride = 0;
    bool ifTranspose = 0;
    uint8_t repeatTimes = 0;
    uint8_t sid = 0;
    uint8_t addrMode = 0;
};
// from: include/basic_api/kernel_struct_mm.h (disableGemv only for 3510 / 5102, fixShiftVal
// only for 5102: not declared)
struct MmadParams {
    MmadParams() {}
    MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const bool isBiasIn,
               const int32_t fmOffsetIn, const bool enSsparseIn, const bool enWinogradAIn, const bool enWinogradBIn)
        : m(mIn), n(nIn), k(kIn), isBias(isBiasIn), fmOffset(fmOffsetIn), enSsparse(enSsparseIn),
          enWinogradA(enWinogradAIn), enWinogradB(enWinogradBIn) {}
    MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const uint8_t unitFlagIn,
               const bool cmatrixSourceIn, const bool cmatrixInitValIn)
        : m(mIn), n(nIn), k(kIn), unitFlag(unitFlagIn), cmatrixSource(cmatrixSourceIn),
          cmatrixInitVal(cmatrixInitValIn) {}
    uint16_t m = 0;
    uint16_t n = 0;
    uint16_t k = 0;
    bool isBias = false;
    int32_t fmOffset = 0;
    bool enSsparse = false;
    bool enWinogradA = false;
    bool enWinogradB = false;
    uint8_t unitFlag = 0;
    bool kDirectionAlign = false;
    bool cmatrixSource = false;
    bool cmatrixInitVal = true;
};
// from: include/basic_api/kernel_struct_fixpipe.h (every arch; isToUB only for 3510 / 5102)
enum class CO2Layout : uint8_t { NZ = 0, ROW_MAJOR, COLUMN_MAJOR };
struct FixpipeConfig {
    CO2Layout format;
    constexpr FixpipeConfig(CO2Layout format_) : format(format_) {}
    constexpr FixpipeConfig(CO2Layout format_, bool) : format(format_) {}
    constexpr FixpipeConfig(CO2Layout format_, bool, bool) : format(format_) {}
};
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};
constexpr FixpipeConfig CFG_COLUMN_MAJOR = {CO2Layout::COLUMN_MAJOR};
// from: include/basic_api/kernel_struct_fixpipe.h.  The struct is declared for every arch,
// 1001 included; only the Fixpipe overloads taking it are gated (see below).
struct FixpipeParamsV220 {
    FixpipeParamsV220() {}
    FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
                      const uint32_t dstStrideIn, const bool reluEnIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), reluEn(reluEnIn) {}
    FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
                      const uint32_t dstStrideIn, const bool reluEnIn, const QuantMode_t quantPreIn,
                      const int64_t deqScalarIn, const uint16_t ndNumIn, const uint16_t srcNdStrideIn,
                      const uint16_t dstNdStrideIn, const uint8_t unitFlagIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), quantPre(quantPreIn),
          deqScalar(deqScalarIn), ndNum(ndNumIn), srcNdStride(srcNdStrideIn), dstNdStride(dstNdStrideIn),
          reluEn(reluEnIn), unitFlag(unitFlagIn) {}
    FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
                      const uint32_t dstStrideIn, const bool reluEnIn, const QuantMode_t quantPreIn,
                      const int64_t deqScalarIn, const uint16_t ndNumIn, const uint16_t srcNdStrideIn,
                      const uint16_t dstNdStrideIn, const uint8_t unitFlagIn, const bool isChannelSplitIn)
        : nSize(nSizeIn), mSize(mSizeIn), srcStride(srcStrideIn), dstStride(dstStrideIn), quantPre(quantPreIn),
          deqScalar(deqScalarIn), ndNum(ndNumIn), srcNdStride(srcNdStrideIn), dstNdStride(dstNdStrideIn),
          reluEn(reluEnIn), unitFlag(unitFlagIn), isChannelSplit(isChannelSplitIn) {}
    uint16_t nSize = 0;
    uint16_t mSize = 0;
    uint16_t srcStride = 0;
    uint32_t dstStride = 0;
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    uint64_t deqScalar = 0;
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint16_t dstNdStride = 0;
    bool reluEn = false;
    uint8_t unitFlag = 0;
    bool isChannelSplit = false;
};

}  // namespace AscendC

#endif  // SGEMM_CUBE_TESTS_ASCENDC_TYPES_H
