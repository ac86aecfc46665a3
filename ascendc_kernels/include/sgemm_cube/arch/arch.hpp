// Per-SoC buffer table of the SGEMM-cube kernels: the one place in C++ where
// the on-chip capacities live.  Plain C++ (no AscendC types) so that the
// schedule header, the host code and the g++ tests can all use it.
//
// These numbers duplicate tuning/profiles/ascend.json (the tuner's table);
// tests/ascendc_kernels/test_ascend_schedule_header.py::test_arch_header_matches_tuning_profiles
// parses this file and fails when the two disagree.  Sources: the public
// AscendC/CANN platform descriptions, as cited in tuning/profiles/ascend.json
// (910A = DaVinci v100, dav-c100, __NPU_ARCH__ 1001;
// 910B = Atlas A2, dav-c220, __NPU_ARCH__ 2201).
#ifndef SGEMM_CUBE_ARCH_ARCH_HPP
#define SGEMM_CUBE_ARCH_ARCH_HPP

#include <cstdint>

#include "sgemm_cube/detail/macros.hpp"

namespace sgemm_cube {
namespace arch {

/// Buffer capacities of one AI core, in bytes, as the schedule sees them.
struct Capacity {
    uint32_t l1;           ///< L1 buffer: resident A group + two B buffers
    uint32_t l0a;          ///< L0A: left cube operand tiles
    uint32_t l0b;          ///< L0B: right cube operand tiles
    uint32_t l0c;          ///< L0C: FP32 accumulators, one per product term
    uint32_t ub;           ///< unified buffer of the vector unit
    uint32_t ub_reserved;  ///< UB bytes kept back (scalars, API scratch)
    bool c_through_ub;     ///< true when C leaves L0C through UB (no Fixpipe to GM)
};

/// Ascend 910A (DaVinci v100): 32 AI cores at 1 GHz, FP16-only cube.
/// C takes L0C -> UB -> GM, so the GEMM epilogue needs UB on the cube core.
struct Ascend910A {
    static constexpr const char* kName = "910a";
    static constexpr uint32_t kAiCores = 32;
    static constexpr uint32_t kClockMHz = 1000;
    static constexpr uint32_t kL1Bytes = 1048576;
    static constexpr uint32_t kL0ABytes = 65536;
    static constexpr uint32_t kL0BBytes = 65536;
    static constexpr uint32_t kL0CBytes = 262144;
    static constexpr uint32_t kUbBytes = 262144;
    static constexpr uint32_t kUbReservedBytes = 8192;
    static constexpr bool kCThroughUb = true;
};

/// Ascend 910B (Atlas A2, 910B3 figures): 20 cube cores at 1.8 GHz; the
/// vector units (and their UB) sit on separate AIV cores, and Fixpipe writes
/// L0C straight to GM.
struct Ascend910B {
    static constexpr const char* kName = "910b";
    static constexpr uint32_t kAiCores = 20;
    static constexpr uint32_t kClockMHz = 1800;
    static constexpr uint32_t kL1Bytes = 524288;
    static constexpr uint32_t kL0ABytes = 65536;
    static constexpr uint32_t kL0BBytes = 65536;
    static constexpr uint32_t kL0CBytes = 131072;
    static constexpr uint32_t kUbBytes = 196608;
    static constexpr uint32_t kUbReservedBytes = 0;
    static constexpr bool kCThroughUb = false;
};

/// The buffer table of `Soc` as the schedule reads it (host, tests and kernels).
template <class Soc>
SGEMM_CUBE_HOST_DEVICE constexpr Capacity capacity()
{
    return Capacity{Soc::kL1Bytes,  Soc::kL0ABytes, Soc::kL0BBytes,        Soc::kL0CBytes,
                    Soc::kUbBytes,  Soc::kUbReservedBytes, Soc::kCThroughUb};
}

// The kernels address L0A/L0B in 512-byte fractals and L0C in 1024-byte
// FP32 fractals; a capacity that is not a whole number of them is a typo.
template <class Soc>
struct CheckSoc {
    static_assert(Soc::kL0ABytes % 512 == 0 && Soc::kL0BBytes % 512 == 0, "L0A/L0B must hold whole fractals");
    static_assert(Soc::kL0CBytes % 1024 == 0, "L0C must hold whole FP32 fractals");
    static_assert(Soc::kL1Bytes % 32 == 0 && Soc::kUbBytes % 32 == 0, "L1/UB are addressed in 32-byte blocks");
    static_assert(Soc::kUbReservedBytes < Soc::kUbBytes, "UB reserve larger than UB");
    // Smallest useful tiling: one 16x16 fractal of A_hi, A_lo, B_hi, B_lo in
    // L1 (two B buffers) and L0, three FP32 accumulators in L0C.
    static_assert(Soc::kL1Bytes >= 6 * 512 && Soc::kL0ABytes >= 2 * 512 && Soc::kL0BBytes >= 2 * 512,
                  "buffers too small for one fractal of each operand");
    static_assert(Soc::kL0CBytes >= 4 * 1024, "L0C too small for four FP32 accumulators");
    static constexpr bool value = true;
};
static_assert(CheckSoc<Ascend910A>::value && CheckSoc<Ascend910B>::value, "SoC table");

}  // namespace arch
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_ARCH_ARCH_HPP
