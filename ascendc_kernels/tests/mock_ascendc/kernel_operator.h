// Declarations-only stand-in for the AscendC basic API, for a g++ syntax and
// type check of the device sources where no CANN toolkit exists
// (tests/test_ascend_kernel_sources.py).  It declares only what the kernels
// use, with the parameter types of the public interface headers
// (cannmirror/asc-devkit include/basic_api/*_intf.h, kernel_struct_*.h) and
// the field names of the parameter structs.  Nothing here executes: passing
// this check means "well-formed C++ against the documented signatures", not
// "compiles with bisheng" - the README says so.
#ifndef SGEMM_CUBE_TESTS_MOCK_KERNEL_OPERATOR_H
#define SGEMM_CUBE_TESTS_MOCK_KERNEL_OPERATOR_H

#include <cstdint>

#define __aicore__
#define __global__
#define __gm__
#define GM_ADDR __gm__ uint8_t*
#define KERNEL_TASK_TYPE_DEFAULT(value) (void)(value)
#define ASCEND_IS_AIV constexpr(false)
#define ASCEND_IS_AIC constexpr(false)

using half = _Float16;

enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_ALL, PIPE_FIX };
enum class QuantMode_t { NoQuant, F322F16, F322BF16, DEQF16, VDEQF16, QF322B8_PRE, VQF322B8_PRE, REQ8, VREQ8 };
enum KernelMetaType { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIC_1_1, KERNEL_TYPE_AICORE };

namespace AscendC {

enum class TPosition : uint8_t { GM, A1, A2, B1, B2, C1, C2, CO1, CO2, VECIN, VECOUT, VECCALC };
enum class HardEvent : uint8_t {
    MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_V, V_MTE2, MTE3_V, V_MTE3, M_V, V_M, M_FIX, FIX_M, MTE3_MTE2,
};
enum class RoundMode { CAST_NONE = 0, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };
enum class BlockMode : uint8_t { BLOCK_MODE_NORMAL, BLOCK_MODE_MATRIX, BLOCK_MODE_VECTOR };
enum class DeqScale : uint8_t { DEQ_NONE, DEQ, VDEQ, DEQ8, VDEQ8, DEQ16, VDEQ16 };
enum class pad_t : uint8_t { PAD_NONE };
enum class CO2Layout : uint8_t { NZ = 0, ROW_MAJOR };

struct DataCopyParams {
    DataCopyParams() {}
    DataCopyParams(const uint16_t count, const uint16_t len, const uint16_t srcStrideIn, const uint16_t dstStrideIn)
        : blockCount(count), blockLen(len), srcStride(srcStrideIn), dstStride(dstStrideIn) {}
    uint16_t blockCount = 1;
    uint16_t blockLen = 0;
    uint16_t srcStride = 0;
    uint16_t dstStride = 0;
};
struct DataCopyEnhancedParams {
    BlockMode blockMode = BlockMode::BLOCK_MODE_NORMAL;
    DeqScale deqScale = DeqScale::DEQ_NONE;
    uint64_t deqValue = 0;
    uint8_t sidStoreMode = 0;
    bool isRelu = false;
    pad_t padMode = pad_t::PAD_NONE;
    uint64_t padValue = 0;
    uint64_t deqTensorAddr = 0;
};
struct LoadData2DParams {
    uint16_t startIndex = 0;
    uint16_t dstGap = 0;
    uint16_t srcStride = 0;
    bool ifTranspose = 0;
    uint8_t repeatTimes = 0;
    uint8_t sid = 0;
    uint8_t addrMode = 0;
};
struct MmadParams {
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
struct FixpipeParamsV220 {
    uint16_t nSize = 0;
    uint16_t mSize = 0;
    uint16_t srcStride = 0;
    uint32_t dstStride = 0;
    bool reluEn = false;
    QuantMode_t quantPre = QuantMode_t::NoQuant;
    int64_t deqScalar;
    uint16_t ndNum = 1;
    uint16_t srcNdStride = 0;
    uint16_t dstNdStride = 0;
    uint8_t unitFlag = 0;
};
struct FixpipeConfig {
    CO2Layout format;
};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};

template <typename T>
class LocalTensor {
public:
    LocalTensor operator[](const uint32_t offset) const;
    template <typename U>
    LocalTensor<U> ReinterpretCast() const;
};
template <typename T>
class GlobalTensor {
public:
    void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize);
    void SetGlobalBuffer(__gm__ T* buffer);
    GlobalTensor operator[](const uint64_t offset) const;
};
template <TPosition pos>
class TBuf {
public:
    template <typename T>
    LocalTensor<T> Get();
};
class TPipe {
public:
    template <TPosition pos>
    bool InitBuffer(TBuf<pos>& buf, uint32_t len);
    void Destroy();
};

int64_t GetBlockIdx();
int64_t GetBlockNum();
template <HardEvent event>
void SetFlag(int32_t eventID);
template <HardEvent event>
void WaitFlag(int32_t eventID);
template <pipe_t pipe>
void PipeBarrier();
template <typename T>
void SetAtomicAdd();
void SetAtomicNone();

// Data movement
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count);
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& intriParams,
              const DataCopyEnhancedParams& enhancedParams);
template <typename T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& loadDataParams);
template <typename T, typename U, typename S>
void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
          const MmadParams& mmadParams);
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& intriParams);

// Vector unit (count modes)
template <typename T>
void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count);
template <typename T>
void And(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
template <typename T>
void Not(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
template <typename T>
void Add(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
template <typename T>
void Sub(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
template <typename T, bool isSetMask = true>
void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count);
template <typename T, typename U>
void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint32_t count);

}  // namespace AscendC

#endif  // SGEMM_CUBE_TESTS_MOCK_KERNEL_OPERATOR_H
