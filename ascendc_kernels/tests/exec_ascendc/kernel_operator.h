// Executable, host-side stand-in for the AscendC basic API calls of the
// SGEMM-cube kernels: the same names, types and chip gates as the
// declarations-only stand-in (../mock_ascendc/kernel_operator.h), with bodies
// that execute on host memory and feed the flag/race checker (exec_state.h).
//
// Semantics follow the asc-devkit documentation (cannmirror/asc-devkit,
// docs/zh/api/SIMD-API/基础API/, abbreviated "docs:" below) and, for the 910A
// L0C -> UB copy, the behaviour of impl/basic_api/dav_c100/
// kernel_operator_data_copy_impl.h (copy_matrix_cc_to_ubuf on the V pipe).
// What is NOT modelled: timing, 910A float saturation mode beyond what
// SGEMM_CUBE_EXEC_ARITHMETIC selects, denormal flushing of the vector unit's
// arithmetic, round modes other than the ones listed in Cast, bank conflicts,
// the TPipe queue machinery (the kernels use plain TBufs).
//
// What the docs leave open is chosen at run time by SGEMM_CUBE_EXEC_ARITHMETIC
// (exec_state.h; field names and values of cpu_fallback/arithmetic.py):
//   cast        Cast FP32 -> FP16 with CAST_NONE when lossy: rint (nearest even)
//               or trunc (then CAST_NONE is CAST_TRUNC in every respect);
//   overflow    Cast FP32 -> FP16 of a finite value beyond FP16's range: inf (as
//               the round mode gives it: +-inf for the nearest modes) or saturate
//               (+-65504 in every mode); Inf and NaN inputs stay what they are;
//   subnormals  gradual, or flush: Cast FP32 -> FP16 results below 2^-14 become
//               zero of the same sign, Cast FP16 -> FP32 and Mmad read FP16
//               subnormals as zero of the same sign;
//   accumulate  Mmad inside one call, chunks in K order: cube16 (each 16-long K
//               chunk summed exactly, rounded once to FP32 nearest even, added to
//               the accumulator with one FP32 nearest-even add;
//               cpu_fallback/accumulate.py "cube16"), sequential (one FP32 add
//               per product), truncate (cube16 with both roundings toward zero);
//   atomic      FP32 atomic add into GM: rne or trunc (toward zero);
//   l0c_to_ub   910A's L0C -> UB block copy: block (works) or unsupported (fatal).
#ifndef SGEMM_CUBE_EXEC_ASCENDC_KERNEL_OPERATOR_H
#define SGEMM_CUBE_EXEC_ASCENDC_KERNEL_OPERATOR_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "exec_state.h"
#include "sgemm_cube/arch/arch.hpp"

#if !defined(__NPU_ARCH__)
#error "exec AscendC: define __NPU_ARCH__ as bisheng does: 1001 (Ascend910A, dav-c100) or 2201 (Ascend910B*, dav-c220)"
#elif (__NPU_ARCH__ != 1001) && (__NPU_ARCH__ != 2201)
#error "exec AscendC: only __NPU_ARCH__ 1001 (Ascend910A) and 2201 (Ascend910B*) are modelled"
#endif

#ifdef SGEMM_CUBE_EXEC_MMAD_ACCUMULATE
#error "SGEMM_CUBE_EXEC_MMAD_ACCUMULATE is gone: set SGEMM_CUBE_EXEC_ARITHMETIC=accumulate=sequential at run time"
#endif

#include "../ascendc_types.h"  // qualifiers, built-ins, enums, parameter structs (shared with mock_ascendc/)

/// bfloat16 (a built-in type of the real toolchain): storage and its exact value as float.  Only the
/// public samples use it (the mmad sample's scenario 2); the SGEMM-cube kernels never do.
struct bfloat16_t {
    uint16_t bits;
    explicit operator float() const
    {
        const uint32_t u = uint32_t(bits) << 16;
        float f;
        std::memcpy(&f, &u, sizeof f);
        return f;
    }
};

// For public samples (tests/exec_ascendc/samples): the cube-core kernel attribute, erased like __aicore__.
#ifndef __cube__
#define __cube__
#endif
// docs: 同步控制/核内同步/SetFlag-WaitFlag(ISASI).md (event ids; global names as in the real headers)
enum event_t : int32_t { EVENT_ID0 = 0, EVENT_ID1, EVENT_ID2, EVENT_ID3, EVENT_ID4, EVENT_ID5, EVENT_ID6, EVENT_ID7 };

// The harness runs every kernel body on every core it launches (as a MIX build).
constexpr int32_t g_coreType = AscendC::MIX;
#define ASCEND_IS_AIV constexpr(g_coreType == AscendC::AIV)
#define ASCEND_IS_AIC constexpr(g_coreType == AscendC::AIC)

namespace ascend_exec {
#if __NPU_ARCH__ == 1001
using ExecArch = sgemm_cube::arch::Ascend910A;
#else
using ExecArch = sgemm_cube::arch::Ascend910B;
#endif
/// Capacities of the build's chip (arch.hpp), set before main runs.
struct CapacityInit {
    CapacityInit()
    {
        State& s = st();
        s.cap[kL1] = ExecArch::kL1Bytes;
        s.cap[kL0A] = ExecArch::kL0ABytes;
        s.cap[kL0B] = ExecArch::kL0BBytes;
        s.cap[kL0C] = ExecArch::kL0CBytes;
        s.cap[kUB] = ExecArch::kUbBytes;
    }
};
inline CapacityInit g_capacity_init;
}  // namespace ascend_exec

namespace AscendC {

// ----------------------------------------------------------------- tensors
constexpr int mem_of(TPosition p);
/// A local tensor: (buffer, byte offset, end of the TBuf region it came from).
template <typename T>
class LocalTensor {
public:
    LocalTensor() {}
    LocalTensor(int mem, uint32_t off, uint32_t lim) : mem_(mem), off_(off), lim_(lim) {}
    // docs: 资源管理/内存管理/LocalMemAllocator (LocalTensor(pos, addr, tileSize) as kernel_tensor_impl.h's
    // LocalMemAllocator::Alloc builds it): addr in bytes from the buffer's start, tileSize in elements.
    // A position without a modelled buffer (C2: bias table, ...) gives a tensor that aborts when used.
    LocalTensor(TPosition pos, uint32_t addr, uint32_t tileSize)
        : mem_(mem_of(pos) > 0 ? mem_of(pos) : -1), off_(addr), lim_(addr + tileSize * uint32_t(sizeof(T))) {}
    template <typename U>
    LocalTensor<U> ReinterpretCast() const
    {
        return LocalTensor<U>(mem_, off_, lim_);
    }
    LocalTensor operator[](const uint32_t offset) const
    {
        return LocalTensor(mem_, off_ + uint32_t(offset * sizeof(T)), lim_);
    }
    // docs: 数据结构/LocalTensor (GetValue / SetValue): one element, by the scalar unit (PIPE_S); a vector
    // or MTE result must be ordered before it by a flag (V_S, MTE2_S), and its writes before their readers
    // (S_V, S_MTE3).
    T GetValue(const uint32_t index) const
    {
        ascend_exec::begin_op(ascend_exec::kS);
        touch(uint64_t(index) * sizeof(T), sizeof(T), ascend_exec::kS, false, "GetValue");
        T v;
        std::memcpy(&v, bytes(uint64_t(index) * sizeof(T), sizeof(T), "GetValue"), sizeof(T));
        return v;
    }
    void SetValue(const uint32_t index, const T value) const
    {
        ascend_exec::begin_op(ascend_exec::kS);
        touch(uint64_t(index) * sizeof(T), sizeof(T), ascend_exec::kS, true, "SetValue");
        std::memcpy(bytes(uint64_t(index) * sizeof(T), sizeof(T), "SetValue"), &value, sizeof(T));
    }
    // ---- stand-in internals
    int mem_ = -1;
    uint32_t off_ = 0;
    uint32_t lim_ = 0;
    /// Bounds-checked host pointer to `bytes` bytes from `byte_off` past this tensor's start.
    uint8_t* bytes(uint64_t byte_off, uint64_t n, const char* what) const
    {
        using namespace ascend_exec;
        if (mem_ < 0) {
            fatal("%s: uninitialised LocalTensor", what);
        }
        const uint64_t a = uint64_t(off_) + byte_off;
        if (a + n > lim_ || a + n > st().cap[mem_]) {
            fatal("%s: %s access [%llu, %llu) outside the buffer region [.., %u) (capacity %u) (kernel %s, core %lld)",
                  what, mem_name(mem_), (unsigned long long)a, (unsigned long long)(a + n), lim_, st().cap[mem_],
                  st().kernel.c_str(), (long long)st().block_idx);
        }
        return st().mem[mem_].data() + a;
    }
    /// Every access of an operation (all but the scalar unit's single elements, GetValue / SetValue) starts
    /// where the buffer's alignment allows: the operand's start and, for repeated blocks, each block's start
    /// (whole 32-byte blocks or 512-byte fractals apart, so aligned when the start is).
    void touch(uint64_t byte_off, uint64_t n, int pipe, bool write, const char* what) const
    {
        bytes(byte_off, n, what);
        if (pipe != ascend_exec::kS) {
            ascend_exec::check_align(mem_, uint64_t(off_) + byte_off, what);
        }
        ascend_exec::access_local(mem_, uint64_t(off_) + byte_off, n, pipe, write);
    }
};

template <typename T>
class GlobalTensor {
public:
    GlobalTensor() {}
    void SetGlobalBuffer(__gm__ T* buffer, uint64_t bufferSize)
    {
        ptr_ = buffer;
        (void)bufferSize;
    }
    void SetGlobalBuffer(__gm__ T* buffer) { ptr_ = buffer; }
    GlobalTensor operator[](const uint64_t offset) const
    {
        GlobalTensor g;
        g.ptr_ = ptr_ + offset;
        return g;
    }
    T* ptr_ = nullptr;
    uint8_t* bytes(uint64_t byte_off, uint64_t n, const char* what) const
    {
        uint8_t* p = reinterpret_cast<uint8_t*>(ptr_) + byte_off;
        ascend_exec::check_gm(p, n, what);
        return p;
    }
};

// ------------------------------------------------------------ TPipe, TBuf
template <TPosition pos = TPosition::LCM>
class TBuf {
public:
    TBuf() = default;
    template <typename T>
    LocalTensor<T> Get()
    {
        return LocalTensor<T>(mem_, off_, off_ + len_);
    }
    template <typename T>
    LocalTensor<T> Get(uint32_t len)
    {
        return LocalTensor<T>(mem_, off_, off_ + len * uint32_t(sizeof(T)));
    }
    int mem_ = -1;
    uint32_t off_ = 0, len_ = 0;
};

constexpr int mem_of(TPosition p)
{
    switch (p) {
        case TPosition::A1: case TPosition::B1: case TPosition::C1: return ascend_exec::kL1;
        case TPosition::A2: return ascend_exec::kL0A;
        case TPosition::B2: return ascend_exec::kL0B;
        case TPosition::CO1: return ascend_exec::kL0C;
        case TPosition::VECIN: case TPosition::VECOUT: case TPosition::VECCALC: case TPosition::CO2:
            return ascend_exec::kUB;
        default: return -1;
    }
}

// docs (path not verified): TPipe InitBuffer (buffers allocated one after the other, 32-byte aligned)
class TPipe {
public:
    TPipe()
    {
        for (int m = 0; m < ascend_exec::kMems; ++m) {
            ascend_exec::st().alloc[m] = 0;
        }
    }
    ~TPipe() {}
    template <TPosition pos>
    bool InitBuffer(TBuf<pos>& buf, uint32_t len)
    {
        using namespace ascend_exec;
        constexpr int m = mem_of(pos);
        static_assert(m > 0, "TBuf position not modelled");
        State& s = st();
        const uint32_t off = (s.alloc[m] + 31u) / 32u * 32u;
        if (uint64_t(off) + len > s.cap[m]) {
            fatal("InitBuffer: %u bytes at %u exceed %s (%u bytes)", len, off, mem_name(m), s.cap[m]);
        }
        buf.mem_ = m;
        buf.off_ = off;
        buf.len_ = len;
        s.alloc[m] = off + len;
        return true;
    }
    void Destroy() {}
};

// ------------------------------------------------------- system variables
// docs (path not verified): GetBlockNum, GetBlockIdx
inline int64_t GetBlockNum() { return ascend_exec::st().block_num; }
inline int64_t GetBlockIdx() { return ascend_exec::st().block_idx; }

// ------------------------------------------------------------------- sync
// docs: 同步控制/核内同步/SetFlag-WaitFlag(ISASI).md (PipeBarrier: same folder, path not verified)
constexpr int event_src(HardEvent e)
{
    using namespace ascend_exec;
    switch (e) {
        case HardEvent::MTE2_MTE1: case HardEvent::MTE2_V: case HardEvent::MTE2_M: case HardEvent::MTE2_MTE3:
        case HardEvent::MTE2_S: case HardEvent::MTE2_FIX: return kMTE2;
        case HardEvent::MTE1_MTE2: case HardEvent::MTE1_M: case HardEvent::MTE1_V: case HardEvent::MTE1_MTE3:
        case HardEvent::MTE1_FIX: return kMTE1;
        case HardEvent::M_MTE1: case HardEvent::M_V: case HardEvent::M_MTE2: case HardEvent::M_FIX:
        case HardEvent::M_S: return kM;
        case HardEvent::V_MTE2: case HardEvent::V_MTE3: case HardEvent::V_M: case HardEvent::V_V:
        case HardEvent::V_MTE1: case HardEvent::V_S: return kV;
        case HardEvent::MTE3_V: case HardEvent::MTE3_MTE1: case HardEvent::MTE3_MTE2: case HardEvent::MTE3_S:
            return kMTE3;
        case HardEvent::FIX_M: case HardEvent::FIX_MTE2: case HardEvent::FIX_S: case HardEvent::FIX_MTE3:
        case HardEvent::FIX_MTE1: case HardEvent::FIX_FIX: return kFIX;
        case HardEvent::S_V: case HardEvent::S_MTE2: case HardEvent::S_MTE3: return kS;
        default: return -1;
    }
}
constexpr int event_dst(HardEvent e)
{
    using namespace ascend_exec;
    switch (e) {
        case HardEvent::MTE1_MTE2: case HardEvent::V_MTE2: case HardEvent::M_MTE2: case HardEvent::MTE3_MTE2:
        case HardEvent::S_MTE2: case HardEvent::FIX_MTE2: return kMTE2;
        case HardEvent::MTE2_MTE1: case HardEvent::M_MTE1: case HardEvent::MTE3_MTE1: case HardEvent::V_MTE1:
        case HardEvent::FIX_MTE1: return kMTE1;
        case HardEvent::MTE1_M: case HardEvent::V_M: case HardEvent::MTE2_M: case HardEvent::FIX_M: return kM;
        case HardEvent::MTE2_V: case HardEvent::MTE3_V: case HardEvent::M_V: case HardEvent::V_V:
        case HardEvent::MTE1_V: case HardEvent::S_V: return kV;
        case HardEvent::V_MTE3: case HardEvent::MTE1_MTE3: case HardEvent::MTE2_MTE3: case HardEvent::S_MTE3:
        case HardEvent::FIX_MTE3: return kMTE3;
        case HardEvent::M_FIX: case HardEvent::MTE2_FIX: case HardEvent::MTE1_FIX: case HardEvent::FIX_FIX:
            return kFIX;
        case HardEvent::V_S: case HardEvent::MTE2_S: case HardEvent::MTE3_S: case HardEvent::FIX_S:
        case HardEvent::M_S: return kS;
        default: return -1;
    }
}

template <HardEvent event>
inline void SetFlag(int32_t eventID)
{
    static_assert(event_src(event) >= 0 && event_dst(event) >= 0, "event not modelled");
#if __NPU_ARCH__ == 1001
    static_assert(event_src(event) != ascend_exec::kFIX && event_dst(event) != ascend_exec::kFIX,
                  "910A (dav-c100) has no FIX pipe");
#endif
    ascend_exec::set_flag(int(event), event_src(event), eventID);
}
template <HardEvent event>
inline void WaitFlag(int32_t eventID)
{
    static_assert(event_src(event) >= 0 && event_dst(event) >= 0, "event not modelled");
    ascend_exec::wait_flag(int(event), event_dst(event), eventID);
}
constexpr int pipe_index(pipe_t p)
{
    using namespace ascend_exec;
    return p == PIPE_S ? kS : p == PIPE_V ? kV : p == PIPE_M ? kM : p == PIPE_MTE1 ? kMTE1
         : p == PIPE_MTE2 ? kMTE2 : p == PIPE_MTE3 ? kMTE3 : p == PIPE_FIX ? kFIX : -1;
}
template <pipe_t pipe>
inline void PipeBarrier()
{
    ascend_exec::barrier(pipe_index(pipe), pipe == PIPE_ALL);
}

// ----------------------------------------------------------------- atomics
// docs (path not verified): SetAtomicAdd, SetAtomicNone (MTE3 UB -> GM and FIX L0C -> GM add into GM)
template <typename T>
inline void SetAtomicAdd()
{
    static_assert(std::is_same<T, float>::value, "atomic add modelled for float only");
    ascend_exec::st().atomic_add = true;
    ascend_exec::st().atomic_bytes = sizeof(T);
}
inline void DisableDmaAtomic() { ascend_exec::st().atomic_add = false; }
inline void SetAtomicNone() { ascend_exec::st().atomic_add = false; }

// ----------------------------------------------------------- data movement
namespace exec_detail {
/// fl(a + b) rounded toward zero, for any two FP32 values: the exact sum is s + e (TwoSum in double, exact
/// barring overflow, which FP32 inputs cannot reach), and rounding s + e toward zero to FP32 is rounding s
/// toward zero unless s is itself an FP32 value and e points toward zero (a float boundary lies at least one
/// double ulp from any s that is not one, and |e| is at most half of it).
inline float add_toward_zero(float a, float b)
{
    const double x = a, y = b, s = x + y;
    if (!std::isfinite(s) || s == 0.0) {
        return float(s);  // Inf/NaN operands as IEEE; an exact zero keeps IEEE's sign
    }
    const double bv = s - x;
    const double e = (x - (s - bv)) + (y - bv);
    if (std::fabs(s) > double(std::numeric_limits<float>::max())) {
        return std::copysign(std::numeric_limits<float>::max(), float(s > 0 ? 1 : -1));  // never overflows
    }
    float t = float(s);  // nearest
    if (std::fabs(double(t)) > std::fabs(s)) {
        t = std::nextafter(t, 0.0f);
    } else if (double(t) == s && e != 0.0 && (e < 0) != (s < 0)) {
        t = std::nextafter(t, 0.0f);
    }
    return t;
}

inline void check_params(const DataCopyParams& p, const char* what)
{
    if (p.blockCount == 0 || p.blockCount > 4095 || p.blockLen == 0) {
        ascend_exec::fatal("%s: DataCopyParams blockCount %u (1..4095) blockLen %u (>= 1)", what, p.blockCount,
                           p.blockLen);
    }
}
/// Store `n` bytes into GM, honouring the atomic-add mode (float add, rounded as SGEMM_CUBE_EXEC_ARITHMETIC's
/// `atomic` says: nearest even or toward zero).
inline void gm_store(uint8_t* dst, const uint8_t* src, uint64_t n, int pipe)
{
    ascend_exec::State& s = ascend_exec::st();
    ascend_exec::access_gm(dst, n, pipe, true, s.atomic_add);
    if (!s.atomic_add) {
        std::memcpy(dst, src, n);
        return;
    }
    const bool trunc = s.arith.atomic_trunc();
    for (uint64_t i = 0; i < n; i += 4) {
        float a, b;
        std::memcpy(&a, dst + i, 4);
        std::memcpy(&b, src + i, 4);
        a = trunc ? add_toward_zero(a, b) : a + b;
        std::memcpy(dst + i, &a, 4);
    }
}
}  // namespace exec_detail

// docs: Memory矢量计算/数据搬运/GM与UB数据搬运/GM与UB高维切分数据搬运(DataCopy).md; 矩阵计算（ISASI）/数据搬运/
// L1-Buffer/GMToL1高维切分数据搬运（DataCopy）.md.  GM -> L1 / UB on MTE2.
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& p)
{
    exec_detail::check_params(p, "DataCopy GM->local");
    if (dst.mem_ != ascend_exec::kL1 && dst.mem_ != ascend_exec::kUB) {
        ascend_exec::fatal("DataCopy GM->%s not modelled", ascend_exec::mem_name(dst.mem_));
    }
    ascend_exec::begin_op(ascend_exec::kMTE2);
    const uint64_t len = uint64_t(p.blockLen) * 32;
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        const uint64_t so = i * (len + uint64_t(p.srcStride) * 32), d = i * (len + uint64_t(p.dstStride) * 32);
        const uint8_t* sp = src.bytes(so, len, "DataCopy GM->local (src)");
        ascend_exec::access_gm(sp, len, ascend_exec::kMTE2, false);
        dst.touch(d, len, ascend_exec::kMTE2, true, "DataCopy GM->local (dst)");
        std::memcpy(dst.bytes(d, len, "DataCopy"), sp, len);
    }
}
// docs: Memory矢量计算/数据搬运/GM与UB数据搬运/GM与UB高维切分数据搬运(DataCopy).md.  UB -> GM on MTE3
// (atomic add when enabled).
template <typename T>
inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p)
{
    exec_detail::check_params(p, "DataCopy local->GM");
    if (src.mem_ != ascend_exec::kUB) {
        ascend_exec::fatal("DataCopy %s->GM not modelled", ascend_exec::mem_name(src.mem_));
    }
    ascend_exec::begin_op(ascend_exec::kMTE3);
    const uint64_t len = uint64_t(p.blockLen) * 32;
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        const uint64_t so = i * (len + uint64_t(p.srcStride) * 32), d = i * (len + uint64_t(p.dstStride) * 32);
        src.touch(so, len, ascend_exec::kMTE3, false, "DataCopy local->GM (src)");
        uint8_t* dp = dst.bytes(d, len, "DataCopy local->GM (dst)");
        exec_detail::gm_store(dp, src.bytes(so, len, "DataCopy"), len, ascend_exec::kMTE3);
    }
}
// docs: Memory矢量计算/数据搬运/UB与UB数据搬运/UBToUB高维切分数据搬运(DataCopy).md.  UB -> UB on the vector
// pipe (32-byte units as above).
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p)
{
    exec_detail::check_params(p, "DataCopy local->local");
    if (src.mem_ != ascend_exec::kUB || dst.mem_ != ascend_exec::kUB) {
        ascend_exec::fatal("DataCopy %s->%s not modelled", ascend_exec::mem_name(src.mem_),
                           ascend_exec::mem_name(dst.mem_));
    }
    ascend_exec::begin_op(ascend_exec::kV);
    const uint64_t len = uint64_t(p.blockLen) * 32;
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        const uint64_t so = i * (len + uint64_t(p.srcStride) * 32), d = i * (len + uint64_t(p.dstStride) * 32);
        src.touch(so, len, ascend_exec::kV, false, "DataCopy UB->UB (src)");
        dst.touch(d, len, ascend_exec::kV, true, "DataCopy UB->UB (dst)");
        std::memmove(dst.bytes(d, len, "DataCopy"), src.bytes(so, len, "DataCopy"), len);
    }
}
// docs: Memory矢量计算/数据搬运/GM与UB数据搬运/GM与UB连续数据搬运(DataCopy).md (count form: count * sizeof(T) must be 32-byte aligned)
template <typename T>
inline DataCopyParams count_params(uint32_t count)
{
    if ((uint64_t(count) * sizeof(T)) % 32 != 0) {
        ascend_exec::fatal("DataCopy: %u elements of %zu bytes is not a whole number of 32-byte blocks", count,
                           sizeof(T));
    }
    return DataCopyParams(1, uint16_t(uint64_t(count) * sizeof(T) / 32), 0, 0);
}
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count)
{
    DataCopy(dst, src, count_params<T>(count));
}
template <typename T>
inline void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count)
{
    DataCopy(dst, src, count_params<T>(count));
}
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count)
{
    DataCopy(dst, src, count_params<T>(count));
}
// docs: 矩阵计算（ISASI）/矩阵计算的搬出/L0C到UB数据搬运（DataCopy）.md table 4, as
// impl/basic_api/dav_c100/kernel_operator_data_copy_impl.h issues it (copy_matrix_cc_to_ubuf,
// V pipe): BLOCK_MODE_MATRIX, float: blockLen and srcStride in 1024-byte fractals, dstStride in
// 32-byte blocks.  910A only.
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& p,
                     const DataCopyEnhancedParams& e)
{
#if __NPU_ARCH__ != 1001
    ascend_exec::fatal("DataCopy with DataCopyEnhancedParams (L0C -> UB) is modelled for 910A only");
#endif
    if (src.mem_ != ascend_exec::kL0C || dst.mem_ != ascend_exec::kUB || e.blockMode != BlockMode::BLOCK_MODE_MATRIX) {
        ascend_exec::fatal("enhanced DataCopy: only L0C -> UB with BLOCK_MODE_MATRIX is modelled");
    }
    static_assert(sizeof(T) == 4, "L0C -> UB block mode modelled for 32-bit data");
    if (ascend_exec::arith().l0c_to_ub_unsupported()) {
        // The doc page lists only other products for this copy; dav_c100's header implements it.  Which one
        // the 910A follows is open (cpu_fallback/arithmetic.py, l0c_to_ub).
        ascend_exec::fatal("L0C -> UB block copy unsupported on this chip (SGEMM_CUBE_EXEC_ARITHMETIC "
                           "l0c_to_ub=unsupported)");
    }
    exec_detail::check_params(p, "DataCopy L0C->UB");
    ascend_exec::begin_op(ascend_exec::kV);
    const uint64_t len = uint64_t(p.blockLen) * 1024;
    for (uint32_t i = 0; i < p.blockCount; ++i) {
        const uint64_t so = i * (len + uint64_t(p.srcStride) * 1024), d = i * (len + uint64_t(p.dstStride) * 32);
        src.touch(so, len, ascend_exec::kV, false, "DataCopy L0C->UB (src)");
        dst.touch(d, len, ascend_exec::kV, true, "DataCopy L0C->UB (dst)");
        std::memcpy(dst.bytes(d, len, "DataCopy"), src.bytes(so, len, "DataCopy"), len);
    }
}

// docs: 矩阵计算（ISASI）/数据搬运/L0-Buffer/LoadData_2D.md.  L1 -> L0A/L0B on MTE1: repeatTimes
// fractals of 512 B; source fractal i at startIndex + i * srcStride (head to head, 512 B units),
// destination fractal i at i * (1 + dstGap) (dstGap: tail to head); ifTranspose transposes each
// 16x16 fractal (16-bit types only).  Layouts: docs 矩阵计算分形介绍/关键分形格式详解.md.
template <typename T>
inline void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& p)
{
    if (src.mem_ != ascend_exec::kL1 || (dst.mem_ != ascend_exec::kL0A && dst.mem_ != ascend_exec::kL0B)) {
        ascend_exec::fatal("LoadData %s -> %s not modelled", ascend_exec::mem_name(src.mem_),
                           ascend_exec::mem_name(dst.mem_));
    }
    if (p.ifTranspose && sizeof(T) != 2) {
        ascend_exec::fatal("LoadData: ifTranspose is for 16-bit types only");
    }
    if (p.addrMode != 0) {
        ascend_exec::fatal("LoadData: addrMode %u not modelled", p.addrMode);
    }
    ascend_exec::begin_op(ascend_exec::kMTE1);
    for (uint32_t i = 0; i < p.repeatTimes; ++i) {
        const uint64_t so = (uint64_t(p.startIndex) + uint64_t(i) * p.srcStride) * 512;
        const uint64_t d = uint64_t(i) * (1 + uint64_t(p.dstGap)) * 512;
        src.touch(so, 512, ascend_exec::kMTE1, false, "LoadData (src)");
        dst.touch(d, 512, ascend_exec::kMTE1, true, "LoadData (dst)");
        const uint8_t* sp = src.bytes(so, 512, "LoadData");
        uint8_t* dp = dst.bytes(d, 512, "LoadData");
        if (!p.ifTranspose) {
            std::memmove(dp, sp, 512);
        } else {
            uint16_t tmp[256];
            std::memcpy(tmp, sp, 512);
            uint16_t out[256];
            for (int r = 0; r < 16; ++r) {
                for (int c = 0; c < 16; ++c) {
                    out[c * 16 + r] = tmp[r * 16 + c];
                }
            }
            std::memcpy(dp, out, 512);
        }
    }
}

namespace exec_detail {
/// Round v * 2^exp (v exact) to FP32, nearest even (or toward zero with `trunc`); the result must be 0 or a
/// normal FP32 number.
inline float round_scaled_i128(__int128 v, int exp = -48, bool trunc = false)
{
    if (v == 0) {
        return 0.0f;
    }
    const bool neg = v < 0;
    unsigned __int128 mag = neg ? (unsigned __int128)(-v) : (unsigned __int128)v;
    int len = 0;
    for (unsigned __int128 t = mag; t != 0; t >>= 1) {
        ++len;
    }
    double r;
    if (len <= 24) {
        r = std::ldexp(double(uint64_t(mag)), exp);
    } else {
        const int shift = len - 24;
        uint64_t q = uint64_t(mag >> shift);
        const unsigned __int128 rem = mag & ((((unsigned __int128)1) << shift) - 1);
        const unsigned __int128 halfway = ((unsigned __int128)1) << (shift - 1);
        if (!trunc && (rem > halfway || (rem == halfway && (q & 1)))) {
            ++q;
        }
        r = std::ldexp(double(q), shift + exp);
    }
    if (r != 0.0 && std::fabs(r) < 0x1p-126) {
        ascend_exec::fatal("Mmad: an FP32 subnormal chunk sum is not modelled");
    }
    return float(neg ? -r : r);
}

/// The value Mmad reads from one L0A/L0B element (half, or bfloat16_t for the public samples): exact, or,
/// with subnormals=flush, a half subnormal as zero of its sign.
inline double operand_value(half h, bool flush)
{
    const double v = double(h);
    return flush && v != 0.0 && std::fabs(v) < 0x1p-14 ? std::copysign(0.0, v) : v;
}
template <typename T>
inline double operand_value(const T& x, bool) { return double(float(x)); }

/// The chunk of up to 16 products p[0..n) (each exact in double) summed exactly and rounded once to FP32
/// (nearest even, or toward zero with `trunc`).  FP16 products are integer multiples of 2^-48; bfloat16
/// products are scaled by their smallest exponent, which must leave the sum within 126 bits (the public
/// samples' data does).
inline float exact_chunk_sum(const double* p, uint32_t n, bool fp16, bool trunc = false)
{
    if (fp16) {
        __int128 sum = 0;
        for (uint32_t i = 0; i < n; ++i) {
            sum += (__int128)std::ldexp(p[i], 48);
        }
        return round_scaled_i128(sum, -48, trunc);
    }
    int lo = 1 << 20, hi = -(1 << 20);
    for (uint32_t i = 0; i < n; ++i) {
        if (p[i] != 0.0) {
            int e;
            std::frexp(p[i], &e);
            lo = std::min(lo, e - 53);
            hi = std::max(hi, e);
        }
    }
    if (lo > hi) {
        return 0.0f;
    }
    if (hi - lo > 120) {
        ascend_exec::fatal("Mmad: bfloat16 products spanning more than 67 binades are not modelled");
    }
    __int128 sum = 0;
    for (uint32_t i = 0; i < n; ++i) {
        sum += (__int128)std::ldexp(p[i], -lo);
    }
    return round_scaled_i128(sum, lo, trunc);
}
}  // namespace exec_detail

// docs: 矩阵计算（ISASI）/Mmad计算/Mmad.md.  On the M pipe: C (m x n, FP32, Nz in L0C) = (init ? 0 : C)
// + A (m x k, FP16, Zz in L0A) * B (k x n, FP16, Zn in L0B), init = cmatrixInitVal && !isBias.
// bfloat16_t x bfloat16_t -> float (same 16x16 fractals of 2-byte elements) only for the public
// samples (the mmad sample's scenario 2), with the same in-fractal model.  Accumulation inside the call:
// SGEMM_CUBE_EXEC_ARITHMETIC's `accumulate` (file comment).  What Mmad.md requires is checked: C, A, B
// 1024-, 512-, 512-byte aligned; m = 1 (GEMV: A read as ND) is refused, the kernels never issue it; after an
// Mmad of (m/16)*(n/16) < 10 fractals a PipeBarrier<PIPE_M> before the next Mmad into that L0C; no NaN/Inf
// operand (the 910A's saturation mode turns them into +-MAX and 0; the split zeroes them before the cube).
namespace exec_detail {
/// MmadParams::unitFlag (public samples; defined in the samples section at the end of this file).
inline void mmad_unit_flag(uint64_t begin, uint64_t end, uint8_t flag);
}  // namespace exec_detail
template <typename T, typename U, typename S>
inline void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
                 const MmadParams& p)
{
    static_assert(std::is_same<T, float>::value && std::is_same<U, S>::value && sizeof(U) == 2 &&
                      (std::is_same<U, half>::value || std::is_same<U, ::bfloat16_t>::value),
                  "Mmad modelled for half x half -> float (and bfloat16_t x bfloat16_t -> float for the samples)");
    constexpr bool kFp16 = std::is_same<U, half>::value;  // the cube16 chunk sum's scale; flush applies to half
    if (dst.mem_ != ascend_exec::kL0C || fm.mem_ != ascend_exec::kL0A || filter.mem_ != ascend_exec::kL0B) {
        ascend_exec::fatal("Mmad operands must be L0C, L0A, L0B");
    }
#if __NPU_ARCH__ == 1001
    if (p.cmatrixSource) {
        ascend_exec::fatal("Mmad: cmatrixSource must be false on 910A");
    }
#endif
    if (p.m > 4095 || p.n > 4095 || p.k > 4095) {
        ascend_exec::fatal("Mmad: m/n/k above 4095");
    }
    if (p.m == 1) {
        ascend_exec::fatal("Mmad: m = 1: GEMV mode not modelled; the kernels never issue it (Mmad.md: with M = 1 "
                           "A is read from L0A in ND layout) (kernel %s, core %lld)",
                           ascend_exec::st().kernel.c_str(), (long long)ascend_exec::st().block_idx);
    }
    ascend_exec::check_align(ascend_exec::kL0C, dst.off_, "Mmad (C)", 1024, "Mmad.md: C 1024-byte aligned");
    const uint32_t m1 = (p.m + 15) / 16, n1 = (p.n + 15) / 16, k1 = (p.k + 15) / 16;
    const bool init = p.cmatrixInitVal && !p.isBias;
    // Mmad.md's threshold, as written there: (m / 16) * (n / 16) in integers.
    const bool small = (p.m / 16u) * (p.n / 16u) < 10;
    ascend_exec::begin_op(ascend_exec::kM, !small);
    ascend_exec::mmad_barrier_rule(dst.off_, dst.off_ + uint64_t(m1) * n1 * 1024, small);
    if (p.unitFlag != 0) {
        exec_detail::mmad_unit_flag(dst.off_, dst.off_ + uint64_t(m1) * n1 * 1024, p.unitFlag);  // samples section
    }
    fm.touch(0, uint64_t(m1) * k1 * 512, ascend_exec::kM, false, "Mmad (A)");
    filter.touch(0, uint64_t(k1) * n1 * 512, ascend_exec::kM, false, "Mmad (B)");
    if (!init) {
        dst.touch(0, uint64_t(m1) * n1 * 1024, ascend_exec::kM, false, "Mmad (C in)");
    }
    dst.touch(0, uint64_t(m1) * n1 * 1024, ascend_exec::kM, true, "Mmad (C out)");
    const U* a = reinterpret_cast<const U*>(fm.bytes(0, uint64_t(m1) * k1 * 512, "Mmad"));
    const U* b = reinterpret_cast<const U*>(filter.bytes(0, uint64_t(k1) * n1 * 512, "Mmad"));
    float* c = reinterpret_cast<float*>(dst.bytes(0, uint64_t(m1) * n1 * 1024, "Mmad"));
    const ascend_exec::Arithmetic& ar = ascend_exec::arith();
    const bool flush = kFp16 && ar.flush();
    const ascend_exec::Accumulate mode = ar.accumulate();
    // The operands as the cube reads them, row-major (A: m x k, B: k x n), once per call.
    std::vector<double> av(size_t(p.m) * p.k), bv(size_t(p.k) * p.n);
    bool special = false;
    for (uint32_t i = 0; i < p.m; ++i) {
        for (uint32_t kk = 0; kk < p.k; ++kk) {
            const U& e = a[((i / 16) * k1 + kk / 16) * 256 + (i % 16) * 16 + kk % 16];  // Zz
            const double x = exec_detail::operand_value(e, flush);
            special = special || !std::isfinite(x);
            av[size_t(i) * p.k + kk] = x;
        }
    }
    for (uint32_t kk = 0; kk < p.k; ++kk) {
        for (uint32_t j = 0; j < p.n; ++j) {
            const U& e = b[((kk / 16) * n1 + j / 16) * 256 + (j % 16) * 16 + kk % 16];  // Zn
            const double y = exec_detail::operand_value(e, flush);
            special = special || !std::isfinite(y);
            bv[size_t(kk) * p.n + j] = y;
        }
    }
    if (special) {
        // The stand-in then writes NaN to all of C; what the cube gives depends on its saturation mode.
        ascend_exec::error("Mmad reads a NaN or Inf operand: special values must stay off the cube (Mmad.md: the "
                           "910A's saturation mode makes Inf +-MAX and NaN 0)");
    }
    for (uint32_t i = 0; i < p.m; ++i) {
        for (uint32_t j = 0; j < p.n; ++j) {
            float& acc = c[((j / 16) * m1 + i / 16) * 256 + (i % 16) * 16 + j % 16];
            if (init) {
                acc = 0.0f;
            }
            if (special) {
                acc = std::numeric_limits<float>::quiet_NaN();
                continue;
            }
            for (uint32_t kc = 0; kc < k1; ++kc) {
                double prod[16];
                uint32_t count = 0;
                for (uint32_t kk = kc * 16; kk < (kc + 1) * 16 && kk < p.k; ++kk) {
                    // the product of two 16-bit floats is exact in double (and in FP32)
                    prod[count++] = av[size_t(i) * p.k + kk] * bv[size_t(kk) * p.n + j];
                }
                switch (mode) {
                    case ascend_exec::Accumulate::kCube16:  // one rounding per chunk, one per add
                        acc = acc + exec_detail::exact_chunk_sum(prod, count, kFp16);
                        break;
                    case ascend_exec::Accumulate::kSequential:  // one rounding per product
                        for (uint32_t q = 0; q < count; ++q) {
                            acc = acc + float(prod[q]);
                        }
                        break;
                    case ascend_exec::Accumulate::kTruncate:  // cube16 with both roundings toward zero
                        acc = exec_detail::add_toward_zero(acc, exec_detail::exact_chunk_sum(prod, count, kFp16, true));
                        break;
                }
            }
        }
    }
}

// docs: 矩阵计算（ISASI）/矩阵计算的搬出/L0C到GM数据搬运（Fixpipe）.md and 关键特性说明/NZ2ND.md.
// 910B only (declared for __NPU_ARCH__ 2201).  On the FIX pipe, CFG_ROW_MAJOR = NZ2ND:
// dst[r * dstStride + c] = src[(c / 16) * srcStride * 16 + r * 16 + c % 16]; NoQuant keeps FP32;
// atomic add into GM when enabled.
#if __NPU_ARCH__ == 2201
namespace exec_detail {
template <typename T, typename U, const FixpipeConfig& config>
void fixpipe_v220_samples(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& p);
}  // namespace exec_detail
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
inline void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& p)
{
    // Public samples (samples/): other output types, layouts and parameters go to fixpipe_v220_samples
    // (end of this file); what the SGEMM-cube kernels call takes the path below, unchanged.
    if constexpr (!std::is_same<T, float>::value || !std::is_same<U, float>::value ||
                  config.format != CO2Layout::ROW_MAJOR) {
        exec_detail::fixpipe_v220_samples<T, U, config>(dst, src, p);
    } else {
    if ((p.nSize % 16 != 0 || p.reluEn || p.unitFlag != 0) && p.nSize != 0 && p.quantPre == QuantMode_t::NoQuant &&
        p.ndNum == 1) {
        exec_detail::fixpipe_v220_samples<T, U, config>(dst, src, p);
        return;
    }
    static_assert(std::is_same<T, float>::value && std::is_same<U, float>::value, "Fixpipe modelled for float");
    static_assert(config.format == CO2Layout::ROW_MAJOR, "Fixpipe modelled for CFG_ROW_MAJOR (NZ2ND) only");
    if (src.mem_ != ascend_exec::kL0C) {
        ascend_exec::fatal("Fixpipe source must be L0C");
    }
    if (p.nSize % 16 != 0 || p.nSize == 0 || p.mSize == 0 || p.quantPre != QuantMode_t::NoQuant || p.ndNum != 1 ||
        p.reluEn || p.srcStride < p.mSize || p.srcStride % 16 != 0) {
        ascend_exec::fatal("Fixpipe: nSize %u mSize %u srcStride %u ndNum %u quant %d relu %d not modelled/invalid",
                           p.nSize, p.mSize, p.srcStride, p.ndNum, int(p.quantPre), int(p.reluEn));
    }
    ascend_exec::begin_op(ascend_exec::kFIX);
    const uint64_t src_bytes = uint64_t(p.nSize / 16) * p.srcStride * 16 * 4;
    src.touch(0, src_bytes, ascend_exec::kFIX, false, "Fixpipe (src)");
    const float* s = reinterpret_cast<const float*>(src.bytes(0, src_bytes, "Fixpipe"));
    for (uint32_t r = 0; r < p.mSize; ++r) {
        float row[4096];
        for (uint32_t c = 0; c < p.nSize; ++c) {
            row[c] = s[(c / 16) * uint64_t(p.srcStride) * 16 + r * 16 + c % 16];
        }
        uint8_t* dp = dst.bytes(uint64_t(r) * p.dstStride * 4, uint64_t(p.nSize) * 4, "Fixpipe (dst)");
        exec_detail::gm_store(dp, reinterpret_cast<const uint8_t*>(row), uint64_t(p.nSize) * 4, ascend_exec::kFIX);
    }
    }
}
#else
template <typename T>
struct FixpipeV220OnDavC100 {
    static constexpr bool kDeclared = false;
};
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const GlobalTensor<T>&, const LocalTensor<U>&, const FixpipeParamsV220&)
{
    static_assert(FixpipeV220OnDavC100<T>::kDeclared,
                  "Fixpipe(GlobalTensor, LocalTensor, FixpipeParamsV220) is not available on __NPU_ARCH__ 1001");
}
#endif

// ------------------------------------------------------ vector (count mode)
namespace exec_detail {
template <typename D, typename F>
inline void vec_unary(const LocalTensor<D>& dst, int32_t count, const char* what, F f)
{
    if (count <= 0 || dst.mem_ != ascend_exec::kUB) {
        ascend_exec::fatal("%s: count %d must be positive, destination in UB", what, count);
    }
    ascend_exec::begin_op(ascend_exec::kV);
    f();
}
template <typename T>
inline T* vptr(const LocalTensor<T>& t, int32_t count, bool write, const char* what)
{
    if (t.mem_ != ascend_exec::kUB) {
        ascend_exec::fatal("%s: operand not in UB", what);
    }
    t.touch(0, uint64_t(count) * sizeof(T), ascend_exec::kV, write, what);
    return reinterpret_cast<T*>(t.bytes(0, uint64_t(count) * sizeof(T), what));
}
template <typename T, typename F>
inline void binary(const LocalTensor<T>& dst, const LocalTensor<T>& a, const LocalTensor<T>& b, int32_t count,
                   const char* what, F f)
{
    vec_unary(dst, count, what, [&] {
        // read both sources, then write (in-place operands allowed)
        T* pa = vptr(a, count, false, what);
        T* pb = vptr(b, count, false, what);
        T* pd = vptr(dst, count, true, what);
        for (int32_t i = 0; i < count; ++i) {
            pd[i] = f(pa[i], pb[i]);
        }
    });
}

/// FP32 -> FP16 with an AscendC round mode.  `saturate`: a finite value beyond FP16's range gives +-65504
/// whatever the mode; `flush`: a result below 2^-14 in magnitude gives zero of x's sign.  Inf and NaN stay.
inline uint16_t f32_to_f16_bits(float x, RoundMode mode, bool saturate = false, bool flush = false)
{
    uint32_t b;
    std::memcpy(&b, &x, 4);
    const uint16_t sign = uint16_t((b >> 16) & 0x8000u);
    const uint32_t e = (b >> 23) & 0xFF, man = b & 0x7FFFFF;
    if (e == 0xFF) {
        return uint16_t(sign | (man ? 0x7E00u : 0x7C00u));
    }
    if (e == 0 && man == 0) {
        return sign;
    }
    // |x| = M * 2^E
    uint64_t M = e ? (man | 0x800000u) : man;
    int E = (e ? int(e) : 1) - 150;
    int len = 64 - __builtin_clzll(M);
    int flog = len - 1 + E;
    int Q = flog - 10 < -24 ? -24 : flog - 10;  // quantum of the FP16 result
    uint64_t q;
    bool inexact = false, above_half = false, at_half = false;
    if (Q <= E) {
        q = M << (E - Q);
    } else {
        const int sh = Q - E;
        if (sh >= 64) {
            q = 0;
            inexact = true;
        } else {
            q = M >> sh;
            const uint64_t rem = M & ((uint64_t(1) << sh) - 1);
            const uint64_t halfway = uint64_t(1) << (sh - 1);
            inexact = rem != 0;
            above_half = rem > halfway;
            at_half = rem == halfway;
        }
    }
    const bool neg = sign != 0;
    bool up = false;
    switch (mode) {
        case RoundMode::CAST_NONE:  // "CAST_RINT when the conversion loses precision" (Cast.md)
        case RoundMode::CAST_RINT: up = above_half || (at_half && (q & 1)); break;
        case RoundMode::CAST_ROUND: up = above_half || at_half; break;
        case RoundMode::CAST_FLOOR: up = inexact && neg; break;
        case RoundMode::CAST_CEIL: up = inexact && !neg; break;
        case RoundMode::CAST_TRUNC: up = false; break;
        case RoundMode::CAST_ODD:
            if (inexact) {
                q |= 1;
            }
            break;
        default: ascend_exec::fatal("Cast: round mode %d not modelled", int(mode));
    }
    if (up) {
        ++q;
    }
    while (q >= 2048) {
        q >>= 1;
        ++Q;
    }
    if (q == 0) {
        return sign;
    }
    const bool to_inf = mode == RoundMode::CAST_NONE || mode == RoundMode::CAST_RINT || mode == RoundMode::CAST_ROUND ||
                        (mode == RoundMode::CAST_FLOOR && neg) || (mode == RoundMode::CAST_CEIL && !neg);
    if (q < 1024) {
        return uint16_t(flush ? sign : sign | q);  // subnormal (Q == -24)
    }
    const int biased = Q + 10 + 15;
    if (biased >= 31) {
        return uint16_t(sign | (to_inf && !saturate ? 0x7C00u : 0x7BFFu));
    }
    return uint16_t(sign | (uint32_t(biased) << 10) | uint32_t(q - 1024));
}
}  // namespace exec_detail

// docs (path not verified): Duplicate
template <typename T>
inline void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count)
{
    exec_detail::vec_unary(dst, count, "Duplicate", [&] {
        T* d = exec_detail::vptr(dst, count, true, "Duplicate");
        for (int32_t i = 0; i < count; ++i) {
            d[i] = scalarValue;
        }
    });
}
// docs: Memory矢量计算/基础算术/Add.md
template <typename T>
inline void Add(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count)
{
    exec_detail::binary(dst, src0, src1, count, "Add", [](T x, T y) {
        if constexpr (std::is_integral<T>::value) {  // two's complement wrap
            return T(typename std::make_unsigned<T>::type(x) + typename std::make_unsigned<T>::type(y));
        } else {
            return T(x + y);
        }
    });
}
// docs: Memory矢量计算/基础算术/Sub.md (int32: two's complement wrap)
template <typename T>
inline void Sub(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count)
{
    exec_detail::binary(dst, src0, src1, count, "Sub", [](T x, T y) {
        if constexpr (std::is_integral<T>::value) {
            return T(typename std::make_unsigned<T>::type(x) - typename std::make_unsigned<T>::type(y));
        } else {
            return T(x - y);
        }
    });
}
// docs: Memory矢量计算/逻辑计算/And.md (16-bit integer types)
template <typename T>
inline void And(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count)
{
    static_assert(std::is_integral<T>::value && sizeof(T) == 2, "And takes int16/uint16");
    exec_detail::binary(dst, src0, src1, count, "And", [](T x, T y) { return T(x & y); });
}
// docs: Memory矢量计算/基础算术/Max.md
template <typename T>
inline void Max(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count)
{
    exec_detail::binary(dst, src0, src1, count, "Max", [](T x, T y) { return x > y ? x : y; });
}
// docs: Memory矢量计算/基础算术/Min.md
template <typename T>
inline void Min(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count)
{
    exec_detail::binary(dst, src0, src1, count, "Min", [](T x, T y) { return x < y ? x : y; });
}

// ------------------------------------------------ vector (level 0: mask, repeats, strides)
// docs: 基础API通用说明 / 高维切分API (Repeat times, Block stride, Repeat stride, Mask): each repeat takes eight
// 32-byte blocks of every operand, block j of repeat i at (i * repStride + j * blkStride) * 32 bytes from the
// operand's start (strides in blocks; repeatStride 0 reads the same eight blocks again in every repeat);
// repeatTime at most 255; continuous mask mode: the first `mask` elements of each repeat (1 .. 256 /
// sizeof(T)) take part, the other elements of dst are left as they are.  A repeat reads its sources before
// it writes (in-place operands allowed).  Not modelled: the bit-wise mask (mask[2]) and counter mode.
namespace exec_detail {
template <typename T, typename F>
inline void binary_repeat(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,
                          uint64_t mask, uint8_t repeat, const BinaryRepeatParams& p, const char* what, F f)
{
    constexpr uint32_t kPerBlock = 32 / sizeof(T), kPerRepeat = 8 * kPerBlock;
    if (mask == 0 || mask > kPerRepeat || repeat == 0) {
        ascend_exec::fatal("%s: mask %llu (1..%u) and repeatTime %u (1..255)", what, (unsigned long long)mask,
                           kPerRepeat, unsigned(repeat));
    }
    if (src0.mem_ != ascend_exec::kUB || src1.mem_ != ascend_exec::kUB) {
        ascend_exec::fatal("%s: operand not in UB", what);
    }
    vec_unary(dst, int32_t(mask), what, [&] {
        const uint32_t blocks = uint32_t((mask + kPerBlock - 1) / kPerBlock);
        T a[kPerRepeat], b[kPerRepeat];
        for (uint32_t i = 0; i < repeat; ++i) {
            for (uint32_t j = 0; j < blocks; ++j) {
                const uint64_t o0 = (uint64_t(i) * p.src0RepStride + uint64_t(j) * p.src0BlkStride) * 32;
                const uint64_t o1 = (uint64_t(i) * p.src1RepStride + uint64_t(j) * p.src1BlkStride) * 32;
                src0.touch(o0, 32, ascend_exec::kV, false, what);
                src1.touch(o1, 32, ascend_exec::kV, false, what);
                std::memcpy(a + j * kPerBlock, src0.bytes(o0, 32, what), 32);
                std::memcpy(b + j * kPerBlock, src1.bytes(o1, 32, what), 32);
            }
            for (uint32_t j = 0; j < blocks; ++j) {
                const uint32_t n = std::min<uint32_t>(kPerBlock, uint32_t(mask) - j * kPerBlock);
                const uint64_t od = (uint64_t(i) * p.dstRepStride + uint64_t(j) * p.dstBlkStride) * 32;
                dst.touch(od, n * sizeof(T), ascend_exec::kV, true, what);
                T* d = reinterpret_cast<T*>(dst.bytes(od, n * sizeof(T), what));
                for (uint32_t k = 0; k < n; ++k) {
                    d[k] = f(a[j * kPerBlock + k], b[j * kPerBlock + k]);
                }
            }
        }
    });
}
}  // namespace exec_detail

// docs: Memory矢量计算/逻辑计算/And.md, level 0 (16-bit integer types)
template <typename T, bool isSetMask = true>
inline void And(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask,
                const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)
{
    static_assert(std::is_integral<T>::value && sizeof(T) == 2, "And takes int16/uint16");
    exec_detail::binary_repeat(dst, src0, src1, mask, repeatTime, repeatParams, "And (level 0)",
                               [](T x, T y) { return T(x & y); });
}
// docs: Memory矢量计算/逻辑计算/Or.md, level 0 (16-bit integer types)
template <typename T, bool isSetMask = true>
inline void Or(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask,
               const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)
{
    static_assert(std::is_integral<T>::value && sizeof(T) == 2, "Or takes int16/uint16");
    exec_detail::binary_repeat(dst, src0, src1, mask, repeatTime, repeatParams, "Or (level 0)",
                               [](T x, T y) { return T(x | y); });
}
// docs: Memory矢量计算/基础算术/Max.md, level 0
template <typename T, bool isSetMask = true>
inline void Max(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask,
                const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)
{
    exec_detail::binary_repeat(dst, src0, src1, mask, repeatTime, repeatParams, "Max (level 0)",
                               [](T x, T y) { return x > y ? x : y; });
}
// docs: Memory矢量计算/基础算术/Min.md, level 0
template <typename T, bool isSetMask = true>
inline void Min(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, uint64_t mask,
                const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)
{
    exec_detail::binary_repeat(dst, src0, src1, mask, repeatTime, repeatParams, "Min (level 0)",
                               [](T x, T y) { return x < y ? x : y; });
}
// docs: Memory矢量计算/基础算术/Mul.md (float: IEEE round to nearest even; the vector unit's subnormal
// handling is not modelled: the host's FPU decides, and the tests run with FTZ/DAZ off)
template <typename T>
inline void Mul(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, const int32_t& count)
{
    static_assert(std::is_same<T, float>::value, "Mul modelled for float");
    exec_detail::binary(dst, src0, src1, count, "Mul", [](T x, T y) { return T(x * y); });
}
// docs: Memory矢量计算/基础算术/Adds.md (int32: two's complement wrap)
template <typename T, bool isSetMask = true>
inline void Adds(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count)
{
    exec_detail::vec_unary(dst, count, "Adds", [&] {
        T* s = exec_detail::vptr(src, count, false, "Adds");
        T* d = exec_detail::vptr(dst, count, true, "Adds");
        for (int32_t i = 0; i < count; ++i) {
            if constexpr (std::is_integral<T>::value) {
                d[i] = T(uint32_t(s[i]) + uint32_t(scalarValue));
            } else {
                d[i] = s[i] + scalarValue;
            }
        }
    });
}
// docs: Memory矢量计算/基础算术/Maxs.md
template <typename T, bool isSetMask = true>
inline void Maxs(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count)
{
    exec_detail::vec_unary(dst, count, "Maxs", [&] {
        T* s = exec_detail::vptr(src, count, false, "Maxs");
        T* d = exec_detail::vptr(dst, count, true, "Maxs");
        for (int32_t i = 0; i < count; ++i) {
            d[i] = s[i] > scalarValue ? s[i] : scalarValue;
        }
    });
}
// docs: Memory矢量计算/基础算术/Mins.md
template <typename T, bool isSetMask = true>
inline void Mins(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count)
{
    exec_detail::vec_unary(dst, count, "Mins", [&] {
        T* s = exec_detail::vptr(src, count, false, "Mins");
        T* d = exec_detail::vptr(dst, count, true, "Mins");
        for (int32_t i = 0; i < count; ++i) {
            d[i] = s[i] < scalarValue ? s[i] : scalarValue;
        }
    });
}
// docs: Memory矢量计算/基础算术/Muls.md
template <typename T, bool isSetMask = true>
inline void Muls(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, const int32_t& count)
{
    static_assert(std::is_same<T, float>::value || std::is_same<T, int32_t>::value, "Muls modelled for float, int32");
    exec_detail::vec_unary(dst, count, "Muls", [&] {
        T* s = exec_detail::vptr(src, count, false, "Muls");
        T* d = exec_detail::vptr(dst, count, true, "Muls");
        for (int32_t i = 0; i < count; ++i) {
            if constexpr (std::is_integral<T>::value) {  // the callers stay in range; wrap otherwise
                d[i] = T(uint32_t(s[i]) * uint32_t(scalarValue));
            } else {
                d[i] = s[i] * scalarValue;
            }
        }
    });
}
// docs: Memory矢量计算/类型转换/Cast.md (float -> half with the round modes above; half -> float exact,
// CAST_NONE)
template <typename T, typename U>
inline void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint32_t count)
{
    exec_detail::vec_unary(dst, int32_t(count), "Cast", [&] {
        U* s = exec_detail::vptr(src, int32_t(count), false, "Cast");
        T* d = exec_detail::vptr(dst, int32_t(count), true, "Cast");
        if constexpr (std::is_same<T, half>::value && std::is_same<U, float>::value) {
#if __NPU_ARCH__ == 1001
            if (roundMode != RoundMode::CAST_NONE && roundMode != RoundMode::CAST_ODD) {
                ascend_exec::fatal("Cast float->half on 910A supports CAST_NONE and CAST_ODD only (Cast.md)");
            }
#endif
            const ascend_exec::Arithmetic& ar = ascend_exec::arith();
            // CAST_NONE "means CAST_RINT when lossy" (Cast.md), or truncates (cast=trunc: open on the 910A)
            const RoundMode mode =
                roundMode == RoundMode::CAST_NONE && ar.cast_trunc() ? RoundMode::CAST_TRUNC : roundMode;
            for (uint32_t i = 0; i < count; ++i) {
                const uint16_t h = exec_detail::f32_to_f16_bits(s[i], mode, ar.saturate(), ar.flush());
                std::memcpy(&d[i], &h, 2);
            }
        } else if constexpr (std::is_same<T, float>::value && std::is_same<U, half>::value) {
            if (roundMode != RoundMode::CAST_NONE) {
                ascend_exec::fatal("Cast half->float: only CAST_NONE modelled");
            }
            const bool flush = ascend_exec::arith().flush();
            for (uint32_t i = 0; i < count; ++i) {
                const float v = float(s[i]);
                d[i] = flush && v != 0.0f && std::fabs(v) < 0x1p-14f ? std::copysign(0.0f, v) : v;
            }
        } else if constexpr (std::is_same<T, float>::value && std::is_same<U, int32_t>::value) {
            // int32 -> float: CAST_NONE only on 910A (dav_c100 vconv_s322f32); round to nearest even
            if (roundMode != RoundMode::CAST_NONE) {
                ascend_exec::fatal("Cast int32->float: only CAST_NONE modelled");
            }
            for (uint32_t i = 0; i < count; ++i) {
                d[i] = float(s[i]);
            }
        } else if constexpr (std::is_same<T, int32_t>::value && std::is_same<U, float>::value) {
            // float -> int32: CAST_RINT (dav_c100 vconv_f322s32r; CAST_NONE is refused there)
            if (roundMode != RoundMode::CAST_RINT) {
                ascend_exec::fatal("Cast float->int32: only CAST_RINT modelled");
            }
            for (uint32_t i = 0; i < count; ++i) {
                if (!(std::fabs(s[i]) < 2147483648.0f)) {
                    ascend_exec::fatal("Cast float->int32: out of range (saturation not modelled)");
                }
                d[i] = int32_t(std::nearbyint(s[i]));
            }
        } else {
            static_assert(std::is_same<T, void>::value, "Cast modelled for float <-> half and int32 <-> float only");
        }
    });
}


// ===================================================================================================
// Calls of public AscendC samples (asc-devkit examples/01_simd_cpp_api, run by
// ci/run_public_samples.sh through tests/exec_ascendc/samples/), not made by the SGEMM-cube kernels.
// Paths "docs:" as above, i.e. docs/zh/api/SIMD-API/基础API/ of asc-devkit.
// ===================================================================================================

// docs: 工具接口/系统初始化/InitSocState.md (resets global state; nothing to do on the host)
inline void InitSocState() {}
constexpr uint32_t ONE_BLK_SIZE = 32;
template <typename T, typename U>
struct IsSameType {
    static constexpr bool value = std::is_same<T, U>::value;
};
/// 4-bit integer type (declared only: no call with it is modelled).
struct int4b_t {
    uint8_t storage;
};

// docs: 资源管理/内存管理/LocalMemAllocator/LocalMemAllocator.md (impl/basic_api/kernel_tensor_impl.h:
// Alloc<pos, T>(tileSize) places tensors one after the other from address 0 of the buffer, no alignment).
enum class Hardware : uint8_t { GM, UB, L1, L0A, L0B, L0C, BIAS, FIXBUF, MAX };
template <Hardware hard = Hardware::UB>
class LocalMemAllocator {
public:
    LocalMemAllocator() {}
    uint32_t GetCurAddr() const { return head_; }
    template <TPosition pos, class DataType>
    LocalTensor<DataType> Alloc(uint32_t tileSize)
    {
        LocalTensor<DataType> t(pos, head_, tileSize);
        head_ += uint32_t(sizeof(DataType)) * tileSize;
        return t;
    }

private:
    uint32_t head_ = 0;
};

// docs: 矩阵计算（ISASI）/矩阵计算的搬入/矩阵数据搬入至L1-Buffer/GMToL1随路转换-ND2NZ搬运（DataCopy）.md
struct Nd2NzParams {
    Nd2NzParams() {}
    Nd2NzParams(const uint16_t ndNumIn, const uint16_t nValueIn, const uint16_t dValueIn,
                const uint16_t srcNdMatrixStrideIn, const uint16_t srcDValueIn, const uint16_t dstNzC0StrideIn,
                const uint16_t dstNzNStrideIn, const uint16_t dstNzMatrixStrideIn)
        : ndNum(ndNumIn), nValue(nValueIn), dValue(dValueIn), srcNdMatrixStride(srcNdMatrixStrideIn),
          srcDValue(srcDValueIn), dstNzC0Stride(dstNzC0StrideIn), dstNzNStride(dstNzNStrideIn),
          dstNzMatrixStride(dstNzMatrixStrideIn) {}
    uint16_t ndNum = 0;
    uint16_t nValue = 0;
    uint16_t dValue = 0;
    uint16_t srcNdMatrixStride = 0;
    uint16_t srcDValue = 0;
    uint16_t dstNzC0Stride = 0;
    uint16_t dstNzNStride = 0;
    uint16_t dstNzMatrixStride = 0;
};
/// GM -> L1 on MTE2, ND -> NZ: element (nd, r, c) of the source (at nd * srcNdMatrixStride + r * srcDValue + c)
/// goes to nd * dstNzMatrixStride + (c / C0) * dstNzC0Stride * C0 + r * dstNzNStride * C0 + c % C0 (elements,
/// C0 = 32 / sizeof(T)); columns dValue .. ceil(dValue, C0) - 1 of each written row are zero; rows are not
/// padded.  Any of ndNum, nValue, dValue zero: no operation.
template <typename T>
inline void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& p)
{
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4, "Nd2Nz modelled for 8/16/32-bit types");
    if (dst.mem_ != ascend_exec::kL1) {
        ascend_exec::fatal("DataCopy Nd2Nz: destination must be L1 (A1/B1)");
    }
    if (p.ndNum == 0 || p.nValue == 0 || p.dValue == 0) {
        return;
    }
    if (p.ndNum > 4095 || p.nValue > 16384 || p.srcDValue == 0 || p.dstNzC0Stride == 0 || p.dstNzNStride == 0 ||
        p.dstNzC0Stride > 16384 || p.dstNzNStride > 16384 || p.dstNzMatrixStride > 16384) {
        ascend_exec::fatal("DataCopy Nd2Nz: parameters outside the documented ranges");
    }
    ascend_exec::begin_op(ascend_exec::kMTE2);
    const uint32_t c0 = 32 / sizeof(T);
    const uint32_t dpad = (p.dValue + c0 - 1) / c0 * c0;
    for (uint32_t nd = 0; nd < p.ndNum; ++nd) {
        for (uint32_t r = 0; r < p.nValue; ++r) {
            const uint64_t so = (uint64_t(nd) * p.srcNdMatrixStride + uint64_t(r) * p.srcDValue) * sizeof(T);
            const uint8_t* sp = src.bytes(so, uint64_t(p.dValue) * sizeof(T), "DataCopy Nd2Nz (src)");
            ascend_exec::access_gm(sp, uint64_t(p.dValue) * sizeof(T), ascend_exec::kMTE2, false);
            for (uint32_t cb = 0; cb < dpad / c0; ++cb) {
                const uint64_t d = (uint64_t(nd) * p.dstNzMatrixStride + uint64_t(cb) * p.dstNzC0Stride * c0 +
                                    uint64_t(r) * p.dstNzNStride * c0) * sizeof(T);
                dst.touch(d, 32, ascend_exec::kMTE2, true, "DataCopy Nd2Nz (dst)");
                uint8_t* dp = dst.bytes(d, 32, "DataCopy Nd2Nz");
                const uint32_t n = std::min<uint32_t>(c0, p.dValue - cb * c0);
                std::memset(dp, 0, 32);
                std::memcpy(dp, sp + uint64_t(cb) * 32, uint64_t(n) * sizeof(T));
            }
        }
    }
}

// docs: 矩阵计算（ISASI）/矩阵计算的搬入/矩阵数据搬入至L0-Buffer/LoadDataWithTranspose.md
struct LoadData2dTransposeParams {
    LoadData2dTransposeParams() {}
    LoadData2dTransposeParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn, const uint16_t srcStrideIn,
                              const uint16_t dstGapIn, const uint16_t dstfracGapIn, const uint8_t addrModeIn = 0)
        : startIndex(startIndexIn), repeatTimes(repeatTimesIn), srcStride(srcStrideIn), dstGap(dstGapIn),
          dstFracGap(dstfracGapIn), addrMode(addrModeIn) {}
    uint16_t startIndex = 0;
    uint8_t repeatTimes = 0;
    uint16_t srcStride = 0;
    uint16_t dstGap = 0;
    uint16_t dstFracGap = 0;
    uint8_t addrMode = 0;
};
/// 16-bit types only (one 16x16 fractal per iteration, dstFracGap without effect): iteration i transposes the
/// source fractal at (startIndex + i * srcStride) * 512 B into i * (1 + dstGap) * 512 B.  L1 -> L0A/L0B, MTE1.
template <typename T>
inline void LoadDataWithTranspose(const LocalTensor<T>& dst, const LocalTensor<T>& src,
                                  const LoadData2dTransposeParams& p)
{
    static_assert(sizeof(T) == 2, "LoadDataWithTranspose modelled for 16-bit types only");
    if (p.addrMode != 0) {
        ascend_exec::fatal("LoadDataWithTranspose: addrMode %u not modelled", p.addrMode);
    }
    LoadData2DParams q;
    q.startIndex = p.startIndex;
    q.repeatTimes = p.repeatTimes;
    q.srcStride = p.srcStride;
    q.dstGap = p.dstGap;
    q.ifTranspose = true;
    LoadData(dst, src, q);  // the same per-fractal movement (LoadData_2D.md, ifTranspose)
}
/// Declared for samples' unmodelled branches (LoadData 2D v2); no call is modelled.
struct LoadData2DParamsV2;

// docs: 矩阵计算（ISASI）/矩阵计算的搬入/矩阵数据搬入至L0-Buffer/LoadData_3D.md (v2 interface, table 4;
// the sample load_data_l12l0's scripts/load3d.py is its reference pseudo-code).  Defaults as documented.
template <typename T>
struct LoadData3DParamsV2 {
    uint8_t padList[4] = {0, 0, 0, 0};  ///< left, right, top, bottom
    uint16_t l1H = 0;
    uint16_t l1W = 0;
    uint16_t channelSize = 0;
    uint16_t kExtension = 0;
    uint16_t mExtension = 0;
    uint16_t kStartPt = 0;
    uint16_t mStartPt = 0;
    uint8_t strideW = 1;
    uint8_t strideH = 1;
    uint8_t filterW = 1;
    uint8_t filterH = 1;
    uint8_t dilationFilterW = 1;
    uint8_t dilationFilterH = 1;
    bool enTranspose = false;
    bool enSmallK = false;
    T padValue = T(0);
    bool filterSizeW = false;
    bool filterSizeH = false;
    bool fMatrixCtrl = false;
};

// Load3D v2, L1 -> L0A / L0B on MTE1, for 16-bit types (C0 = 16) only (the samples' half scenarios;
// the SGEMM-cube kernels never call it).  The source is an NC1HWC0 feature map (N = 1): element
// (c1, h, w, c0) at ((c1 * l1H + h) * l1W + w) * 16 + c0.  Its img2col matrix has one row per output
// position (ho, wo) and one column per (c1, kh, kw, c0), columns ordered c1, then kh * filterW + kw,
// then c0; padded positions read padValue.  The window [mStartPt, +mExtension) x [kStartPt,
// +kExtension) of it is written:
//   L0A:              Zz,  fractal (m / 16, k / 16) row-major, element (m % 16, k % 16) row-major;
//   L0A, enTranspose: its transpose in Zz: fractal (k / 16, m / 16), element (k % 16, m % 16);
//   L0B (always "transposed", enTranspose ignored): fractal (m / 16, k / 16), element (k % 16, m % 16).
template <typename T, typename U>
inline void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData3DParamsV2<U>& p)
{
    static_assert(sizeof(T) == 2 && std::is_same<T, U>::value, "Load3D v2 modelled for 16-bit types only");
    const bool to_l0a = dst.mem_ == ascend_exec::kL0A;
    if ((!to_l0a && dst.mem_ != ascend_exec::kL0B) || src.mem_ != ascend_exec::kL1) {
        ascend_exec::fatal("Load3D v2: L1 -> L0A / L0B only");
    }
    if (p.l1H == 0 || p.l1W == 0 || p.channelSize == 0 || p.kExtension == 0 || p.mExtension == 0) {
        return;  // documented as a no-op
    }
    if (p.fMatrixCtrl || p.enSmallK || p.channelSize % 16 || p.kExtension % 16 || p.kStartPt % 16 ||
        p.mExtension % 16 || p.strideW == 0 || p.strideH == 0 || p.dilationFilterW == 0 || p.dilationFilterH == 0) {
        ascend_exec::fatal("Load3D v2: parameters not modelled (fMatrixCtrl, enSmallK, unaligned channels or "
                           "extensions, zero strides)");
    }
    const uint32_t fw = p.filterW + (p.filterSizeW ? 256u : 0u), fh = p.filterH + (p.filterSizeH ? 256u : 0u);
    const int64_t hp = int64_t(p.l1H) + p.padList[2] + p.padList[3];
    const int64_t wp = int64_t(p.l1W) + p.padList[0] + p.padList[1];
    const int64_t kh_span = int64_t(fh - 1) * p.dilationFilterH + 1, kw_span = int64_t(fw - 1) * p.dilationFilterW + 1;
    const int64_t h_out = (hp - kh_span) / p.strideH + 1, w_out = (wp - kw_span) / p.strideW + 1;
    const uint32_t c1 = p.channelSize / 16, kpos = fh * fw;
    if (h_out <= 0 || w_out <= 0 || uint64_t(p.mStartPt) + p.mExtension > uint64_t(h_out * w_out) ||
        uint64_t(p.kStartPt) + p.kExtension > uint64_t(c1) * kpos * 16) {
        ascend_exec::fatal("Load3D v2: window outside the img2col matrix");
    }
    ascend_exec::begin_op(ascend_exec::kMTE1);
    const uint64_t src_bytes = uint64_t(c1) * p.l1H * p.l1W * 32;
    src.touch(0, src_bytes, ascend_exec::kMTE1, false, "Load3D v2 (src)");
    const uint32_t m1 = p.mExtension / 16, k1 = p.kExtension / 16;
    dst.touch(0, uint64_t(m1) * k1 * 512, ascend_exec::kMTE1, true, "Load3D v2 (dst)");
    const uint16_t* in = reinterpret_cast<const uint16_t*>(src.bytes(0, src_bytes, "Load3D v2"));
    uint16_t* out = reinterpret_cast<uint16_t*>(dst.bytes(0, uint64_t(m1) * k1 * 512, "Load3D v2"));
    uint16_t pad;
    std::memcpy(&pad, &p.padValue, 2);
    for (uint32_t m = 0; m < p.mExtension; ++m) {
        const int64_t row = int64_t(p.mStartPt) + m, ho = row / w_out, wo = row % w_out;
        for (uint32_t k = 0; k < p.kExtension; ++k) {
            const uint32_t col = p.kStartPt + k, k16 = col / 16, c = k16 / kpos, pos = k16 % kpos;
            const int64_t h = ho * p.strideH + int64_t(pos / fw) * p.dilationFilterH - p.padList[2];
            const int64_t w = wo * p.strideW + int64_t(pos % fw) * p.dilationFilterW - p.padList[0];
            const bool inside = h >= 0 && h < p.l1H && w >= 0 && w < p.l1W;
            const uint16_t v = inside ? in[((uint64_t(c) * p.l1H + h) * p.l1W + w) * 16 + col % 16] : pad;
            uint64_t at;
            if (to_l0a && !p.enTranspose) {
                at = (uint64_t(m / 16) * k1 + k / 16) * 256 + (m % 16) * 16 + k % 16;
            } else if (to_l0a) {
                at = (uint64_t(k / 16) * m1 + m / 16) * 256 + (k % 16) * 16 + m % 16;
            } else {
                at = (uint64_t(m / 16) * k1 + k / 16) * 256 + (k % 16) * 16 + m % 16;
            }
            out[at] = v;
        }
    }
}

// docs: 矩阵计算（ISASI）/Mmad计算/关键特性说明/UnitFlag.md; Mmad.md and L0C到GM数据搬运（Fixpipe）.md
// (MmadParams::unitFlag, FixpipeParamsV220::unitFlag); the sample mmad_unitflag.  One unit flag per 512-byte
// block of L0C, 0 at the start of a core's program.  unitFlag 0: off; 2: on, the flag is left as it is;
// 3: on, the flag is flipped after the instruction (Mmad: to 1, "readable"; Fixpipe: to 0, "writable");
// 1 is not a documented value (fatal).  Mmad with 2/3 on a block whose flag is 1 waits for a Fixpipe to
// read it, Fixpipe with 2/3 on a block whose flag is 0 waits for an Mmad with 3: the stand-in runs the
// program in order, so such a wait, which in program order nothing before it releases, is reported as an
// error (a stall or hang on the chip).  Not modelled: the ordering the flags give M and FIX in the race
// checker (a program that relies on unit flags alone is reported as racing; mmad_unitflag also sets
// M_FIX).  Only on 910B (A2/A3) and 950: fatal on 910A.
namespace exec_detail {
inline std::vector<uint8_t>& unit_flags()
{
    // reset when another kernel or core starts (the drivers launch each kernel once)
    static std::string kernel;
    static int64_t core = -1;
    static std::vector<uint8_t> bits;
    const ascend_exec::State& s = ascend_exec::st();
    if (kernel != s.kernel || core != s.block_idx || bits.size() != s.cap[ascend_exec::kL0C] / 512) {
        kernel = s.kernel;
        core = s.block_idx;
        bits.assign(s.cap[ascend_exec::kL0C] / 512, 0);
    }
    return bits;
}
/// Mmad or Fixpipe with unitFlag `flag` on L0C bytes [begin, end).
inline void apply_unit_flag(uint64_t begin, uint64_t end, uint8_t flag, bool is_mmad)
{
    const char* who = is_mmad ? "Mmad" : "Fixpipe";
#if __NPU_ARCH__ == 1001
    ascend_exec::fatal("%s: unitFlag %u: not available on 910A (UnitFlag.md: 910B, A3, 950)", who, flag);
#endif
    if (flag != 0 && flag != 2 && flag != 3) {
        ascend_exec::fatal("%s: unitFlag %u is not a documented value (0, 2 or 3)", who, flag);
    }
    if (flag == 0 || end <= begin) {
        return;
    }
    std::vector<uint8_t>& bits = unit_flags();
    const uint8_t wait_for = is_mmad ? 0 : 1;  // the flag value the instruction proceeds on
    bool stalls = false;
    for (uint64_t b = begin / 512; b <= (end - 1) / 512 && b < bits.size(); ++b) {
        stalls = stalls || bits[b] != wait_for;
        if (flag == 3) {
            bits[b] = is_mmad ? 1 : 0;
        }
    }
    if (stalls) {
        char detail[96];
        std::snprintf(detail, sizeof detail, " first at L0C byte %llu", (unsigned long long)begin);
        ascend_exec::error(is_mmad ? "Mmad with unitFlag writes an L0C block whose unit flag is 1 (an Mmad with unitFlag 3 "
                                     "marked it, no Fixpipe with unitFlag read it): the Mmad waits (UnitFlag.md)"
                                   : "Fixpipe with unitFlag reads an L0C block whose unit flag is 0 (no Mmad with "
                                     "unitFlag 3 marked it): the Fixpipe waits (UnitFlag.md)",
                           detail);
    }
}
inline void mmad_unit_flag(uint64_t begin, uint64_t end, uint8_t flag) { apply_unit_flag(begin, end, flag, true); }
}  // namespace exec_detail

// docs: 矩阵计算（ISASI）/矩阵计算的搬出/寄存器配置说明/SetFixPipeConfig.md.  Sets the quantPre tensor (in the
// Fixpipe Buffer, C2PIPE2GM) of later quantising copies and, with isUnitFlag, sets every unit flag of L0C to
// 0.  Quantisation is not modelled (a quantising Fixpipe is fatal), so only isUnitFlag has an effect.
template <typename T, bool setRelu = false>
inline void SetFixPipeConfig(const LocalTensor<T>& preData, bool isUnitFlag = false)
{
    static_assert(!setRelu, "SetFixPipeConfig: setRelu must be false (SetFixPipeConfig.md)");
    (void)preData;
    if (isUnitFlag) {
        std::vector<uint8_t>& bits = exec_detail::unit_flags();
        std::fill(bits.begin(), bits.end(), uint8_t(0));
    }
}
template <typename T>
inline void SetFixPipeConfig(const LocalTensor<T>& reluPre, const LocalTensor<T>& quantPre, bool isUnitFlag = false)
{
    (void)reluPre;
    SetFixPipeConfig<T>(quantPre, isUnitFlag);
}

namespace exec_detail {
// docs: 矩阵计算（ISASI）/矩阵计算的搬出/L0C到GM数据搬运（Fixpipe）.md (FixpipeParamsV220, 910B).
// From L0C (FP32, NZ: fractal column j at j * srcStride * 16 elements) to GM on FIX:
//   CFG_ROW_MAJOR (NZ2ND): dst[r * dstStride + c]                       (dstStride in elements),
//   CFG_NZ:                dst[(c / 16) * dstStride * 32 / sizeof(T) + r * 16 + c % 16]  (dstStride in 32 B);
// r < mSize, c < nSize; reluEn: max(x, 0); quantPre NoQuant (float out) or F322F16 (half out, round to nearest
// even); unitFlag (above).  ndNum 1 only.
template <typename T, typename U, const FixpipeConfig& config>
void fixpipe_v220_samples(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& p)
{
    static_assert(std::is_same<U, float>::value, "Fixpipe (samples): L0C data modelled as float");
    static_assert((std::is_same<T, float>::value || std::is_same<T, half>::value) &&
                      (config.format == CO2Layout::ROW_MAJOR || config.format == CO2Layout::NZ),
                  "Fixpipe (samples): float or half output, CFG_ROW_MAJOR or CFG_NZ");
    if (src.mem_ != ascend_exec::kL0C) {
        ascend_exec::fatal("Fixpipe source must be L0C");
    }
    const bool quant_ok = std::is_same<T, float>::value ? p.quantPre == QuantMode_t::NoQuant
                                                        : p.quantPre == QuantMode_t::F322F16;
    if (!quant_ok || p.nSize == 0 || p.mSize == 0 || p.ndNum != 1 || p.srcStride < p.mSize || p.srcStride % 16 != 0 ||
        p.isChannelSplit || (config.format == CO2Layout::NZ && p.nSize % 16 != 0)) {
        ascend_exec::fatal("Fixpipe (samples): nSize %u mSize %u srcStride %u ndNum %u quant %d not modelled/invalid",
                           p.nSize, p.mSize, p.srcStride, p.ndNum, int(p.quantPre));
    }
    ascend_exec::begin_op(ascend_exec::kFIX);
    const uint32_t n1 = (p.nSize + 15) / 16;
    const uint64_t src_bytes = uint64_t(n1 - 1) * p.srcStride * 64 + uint64_t(p.mSize) * 64;
    src.touch(0, src_bytes, ascend_exec::kFIX, false, "Fixpipe (src)");
    apply_unit_flag(src.off_, src.off_ + src_bytes, p.unitFlag, false);
    const float* s = reinterpret_cast<const float*>(src.bytes(0, src_bytes, "Fixpipe"));
    for (uint32_t r = 0; r < p.mSize; ++r) {
        for (uint32_t c = 0; c < p.nSize; ++c) {
            float x = s[(c / 16) * uint64_t(p.srcStride) * 16 + r * 16 + c % 16];
            if (p.reluEn && x < 0.0f) {
                x = 0.0f;
            }
            T y;
            if constexpr (std::is_same<T, half>::value) {
                const uint16_t h = f32_to_f16_bits(x, RoundMode::CAST_RINT);
                std::memcpy(&y, &h, 2);
            } else {
                y = x;
            }
            const uint64_t di = config.format == CO2Layout::ROW_MAJOR
                                    ? uint64_t(r) * p.dstStride + c
                                    : uint64_t(c / 16) * p.dstStride * 32 / sizeof(T) + r * 16 + c % 16;
            uint8_t* dp = dst.bytes(di * sizeof(T), sizeof(T), "Fixpipe (dst)");
            if (std::is_same<T, float>::value) {
                gm_store(dp, reinterpret_cast<const uint8_t*>(&y), sizeof(T), ascend_exec::kFIX);
            } else {
                if (ascend_exec::st().atomic_add) {
                    ascend_exec::fatal("Fixpipe (samples): atomic add with half output not modelled");
                }
                ascend_exec::access_gm(dp, sizeof(T), ascend_exec::kFIX, true, false);
                std::memcpy(dp, &y, sizeof(T));
            }
        }
    }
}
}  // namespace exec_detail

}  // namespace AscendC

#endif  // SGEMM_CUBE_EXEC_ASCENDC_KERNEL_OPERATOR_H
