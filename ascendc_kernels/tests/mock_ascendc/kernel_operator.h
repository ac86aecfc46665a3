// Declarations-only, chip-faithful stand-in for the AscendC basic API, for a
// g++ syntax and type check of the device sources where no CANN toolkit
// exists (tests/test_ascend_kernel_sources.py).
//
// Chip-faithful: the build names the chip the way bisheng does, through
// __NPU_ARCH__ (1001 = Ascend910A / dav-c100, 2201 = Ascend910B / dav-c220),
// and every function, overload, template and parameter struct below is
// declared only for the __NPU_ARCH__ values for which the real headers
// declare it, with the real parameter types and struct fields.  So a 910A
// build that reaches a 910B-only overload (Fixpipe with FixpipeParamsV220)
// fails here as it would under bisheng.  (Fixpipe is the one case where the
// real headers do declare the name on 910A, through an ungated definition,
// and fail only when it is instantiated: modelled the same way, below.)  ascendc_kernels/tests/misuse/ holds
// planted misuses that CI must see fail.
//
// Source of every declaration: cannmirror/asc-devkit at commit
// 0da921b91aeb2abdc6e8d74423b0bbe7040c3fd1 (2026-07-23); the "// from:" comment
// beside each one names the header it was read from and, where the header
// gates it, the __NPU_ARCH__ condition there.  "compiler built-in" marks
// names the bisheng compiler itself provides (its CPU-debug stand-in,
// stub_def.h, is not public).
//
// Only what the kernels use is declared (and a few siblings of the same
// declaration group): a kernel that starts using another API must add it
// here, read from the real header, with its gate.
// Nothing here executes; passing this check means "well-formed C++ against the
// real declarations of that chip", not "compiles with bisheng".  Things the
// real headers check only inside their implementations (data types and round
// modes accepted per chip, runtime ASSERTs) are not modelled.
#ifndef SGEMM_CUBE_TESTS_MOCK_KERNEL_OPERATOR_H
#define SGEMM_CUBE_TESTS_MOCK_KERNEL_OPERATOR_H

#include <cstdint>

#if !defined(__NPU_ARCH__)
#error "mock AscendC: define __NPU_ARCH__ as bisheng does: 1001 (Ascend910A, dav-c100) or 2201 (Ascend910B*, dav-c220)"
#elif (__NPU_ARCH__ != 1001) && (__NPU_ARCH__ != 2201)
#error "mock AscendC: only __NPU_ARCH__ 1001 (Ascend910A) and 2201 (Ascend910B*) are modelled"
#endif

#include "../ascendc_types.h"  // qualifiers, built-ins, enums, parameter structs (shared with exec_ascendc/)


// from: impl/utils/sys_macros.h: g_coreType is AIC / AIV only in the split cube / vector
// compiles of 2201 (__DAV_CUBE__ / __DAV_VEC__), MIX otherwise (always on 1001).
#if defined(__DAV_CUBE__) && (__NPU_ARCH__ == 2201)
constexpr int32_t g_coreType = AscendC::AIC;
#elif defined(__DAV_VEC__) && (__NPU_ARCH__ == 2201)
constexpr int32_t g_coreType = AscendC::AIV;
#else
constexpr int32_t g_coreType = AscendC::MIX;
#endif
#define ASCEND_IS_AIV constexpr(g_coreType == AscendC::AIV)
#define ASCEND_IS_AIC constexpr(g_coreType == AscendC::AIC)

namespace AscendC {

// ----------------------------------------------------------------- tensors
// from: include/basic_api/kernel_tensor.h
template <typename T>
class LocalTensor {
public:
    LocalTensor() {}
    template <typename U>
    LocalTensor<U> ReinterpretCast() const;
    LocalTensor operator[](const uint32_t offset) const;
    // include/basic_api/kernel_tensor.h: scalar access (PIPE_S)
    T GetValue(const uint32_t index) const;
    void SetValue(const uint32_t index, const T value) const;
};
// from: include/basic_api/kernel_tensor.h (ReinterpretCast only for 3510 / 5102: not declared)
template <typename T>
class GlobalTensor {
public:
    GlobalTensor();
    void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize);
    void SetGlobalBuffer(__gm__ T* buffer);
    GlobalTensor operator[](const uint64_t offset) const;
};

// ------------------------------------------------------------ TPipe, TBuf
// from: include/basic_api/kernel_tpipe.h
template <TPosition pos = TPosition::LCM>
class TBuf {
public:
    TBuf() = default;
    template <typename T>
    LocalTensor<T> Get();
    template <typename T>
    LocalTensor<T> Get(uint32_t len);
};
// from: include/basic_api/kernel_tpipe.h
class TPipe {
public:
    TPipe();
    ~TPipe();
    template <TPosition pos>
    bool InitBuffer(TBuf<pos>& buf, uint32_t len);
    void Destroy();
};

// ------------------------------------------------------- system variables
// from: include/basic_api/kernel_operator_sys_var_intf.h
int64_t GetBlockNum();
int64_t GetBlockIdx();

// ------------------------------------------------------------------- sync
// from: include/basic_api/kernel_operator_block_sync_intf.h
template <HardEvent event>
void SetFlag(int32_t eventID);
template <HardEvent event>
void WaitFlag(int32_t eventID);
template <pipe_t pipe>
void PipeBarrier();

// ----------------------------------------------------------------- atomics
// from: include/basic_api/kernel_operator_set_atomic_intf.h (per-type support is checked in
// impl/basic_api/dav_c100|dav_c220/kernel_operator_set_atomic_impl.h at run time: 1001 float only)
template <typename T>
void SetAtomicAdd();
void DisableDmaAtomic();
void SetAtomicNone();  // "has been updated, please use DisableDmaAtomic instead"

// ----------------------------------------------------------- data movement
// from: include/basic_api/kernel_operator_data_copy_intf.h (Level 0: GM -> local, local -> GM,
// local -> local)
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams);
// from: include/basic_api/kernel_operator_data_copy_intf.h (Level 2: count)
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count);
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count);
// from: include/basic_api/kernel_operator_data_copy_intf.h ("DataCopy Enhanced", local -> local;
// the L0C -> UB copy of dav-c100: impl/basic_api/dav_c100/kernel_operator_data_copy_impl.h)
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& intriParams,
              const DataCopyEnhancedParams& enhancedParams);

// from: include/basic_api/kernel_operator_mm_intf.h
template <typename T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& loadDataParams);
// from: include/basic_api/kernel_operator_mm_intf.h
template <typename T, typename U, typename S>
void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
          const MmadParams& mmadParams);

// from: include/basic_api/kernel_operator_fixpipe_intf.h, declared only
// `#if defined(__NPU_ARCH__) && (__NPU_ARCH__ == 2201 || __NPU_ARCH__ == 3003 || __NPU_ARCH__ == 3113 ||
//  __NPU_ARCH__ == 3510 || __NPU_ARCH__ == 5102)`.
#if __NPU_ARCH__ == 2201
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& intriParams);
#else
// from: impl/basic_api/kernel_operator_fixpipe_intf_impl.h, which every arch includes, DEFINES this
// overload without a gate, so on 1001 the name exists; its body calls FixpipeL0C2GMImpl, which
// impl/basic_api/dav_c100/kernel_operator_fixpipe_impl.h has only for FixpipeParams<U> (all of
// dav_c100's Fixpipe overloads are [[deprecated]] "unsupported API on current device").  So on 910A
// any instantiation fails ("no matching function for call to FixpipeL0C2GMImpl" in the real
// headers); code that names it only in an uninstantiated template passes, as with bisheng.
template <typename T>
struct FixpipeV220OnDavC100 {
    static constexpr bool kDeclared = false;
};
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const GlobalTensor<T>&, const LocalTensor<U>&, const FixpipeParamsV220&)
{
    static_assert(FixpipeV220OnDavC100<T>::kDeclared,
                  "Fixpipe(GlobalTensor, LocalTensor, FixpipeParamsV220) is not available on __NPU_ARCH__ 1001 "
                  "(dav-c100 has no FixpipeL0C2GMImpl for FixpipeParamsV220)");
}
#endif

// ------------------------------------------------------ vector (count mode)
// from: include/basic_api/kernel_operator_vec_duplicate_intf.h
template <typename T>
void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_intf.h
template <typename T>
void Add(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_intf.h
template <typename T>
void Sub(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_intf.h
template <typename T>
void And(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_intf.h (level 0: continuous mask, repeats, strides)
template <typename T, bool isSetMask = true>
void And(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask,
         const uint8_t repeatTime, const BinaryRepeatParams& repeatParams);
// from: include/basic_api/kernel_operator_vec_binary_intf.h (level 0)
template <typename T, bool isSetMask = true>
void Or(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask,
        const uint8_t repeatTime, const BinaryRepeatParams& repeatParams);
// from: include/basic_api/kernel_operator_vec_binary_intf.h (level 0)
template <typename T, bool isSetMask = true>
void Max(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask,
         const uint8_t repeatTime, const BinaryRepeatParams& repeatParams);
// from: include/basic_api/kernel_operator_vec_binary_intf.h (level 0)
template <typename T, bool isSetMask = true>
void Min(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask,
         const uint8_t repeatTime, const BinaryRepeatParams& repeatParams);
// from: include/basic_api/kernel_operator_vec_binary_intf.h
template <typename T>
void Max(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_intf.h
template <typename T>
void Min(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_scalar_intf.h
template <typename T, bool isSetMask = true>
void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_scalar_intf.h
template <typename T, bool isSetMask = true>
void Adds(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_scalar_intf.h
template <typename T, bool isSetMask = true>
void Maxs(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_scalar_intf.h
template <typename T, bool isSetMask = true>
void Mins(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_binary_intf.h
template <typename T>
void Mul(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count);
// from: include/basic_api/kernel_operator_vec_vconv_intf.h (round modes per chip and type pair:
// impl/basic_api/dav_c100|dav_c220/kernel_operator_vec_vconv_impl.h, not modelled)
template <typename T, typename U>
void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint32_t count);

}  // namespace AscendC

#endif  // SGEMM_CUBE_TESTS_MOCK_KERNEL_OPERATOR_H
