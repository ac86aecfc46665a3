// SoC policy tags: the build picks one (CMake defines SGEMM_CUBE_SOC_910A or
// SGEMM_CUBE_SOC_910B from SOC_VERSION) and every chip difference of the
// kernels is a specialisation on the tag, not an #if in the kernel body.
// Chip-specific code is a partial specialisation (see accumulator_store.hpp)
// so that it is type-checked only in its own chip's build; the two tags
// themselves use only names the real headers declare for both chips.
//
//   Soc910A  DaVinci v100 (dav-c100): cube and vector in one AI core; C leaves
//            L0C through UB (no Fixpipe); float -> half Cast knows only
//            CAST_NONE / CAST_ODD, where CAST_NONE rounds to nearest even.
//   Soc910B  Atlas A2 (dav-c220): separate cube (AIC) and vector (AIV) cores;
//            Fixpipe writes L0C to GM; Cast supports CAST_RINT.
#ifndef SGEMM_CUBE_TILE_SOC_HPP
#define SGEMM_CUBE_TILE_SOC_HPP

#include "kernel_operator.h"
#include "sgemm_cube/arch/arch.hpp"

namespace sgemm_cube {
namespace tile {

struct Soc910A {
    using Arch = arch::Ascend910A;
    // Cast docs, "Atlas 训练系列产品" table: float -> half supports CAST_ODD and
    // CAST_NONE, and CAST_NONE "means CAST_RINT when the conversion loses precision".
    static constexpr AscendC::RoundMode kToHalf = AscendC::RoundMode::CAST_NONE;
    // L0C is drained by the vector pipe (L0C -> UB copy).
    static constexpr AscendC::HardEvent kMToOut = AscendC::HardEvent::M_V;
    static constexpr AscendC::HardEvent kOutToM = AscendC::HardEvent::V_M;
};

struct Soc910B {
    using Arch = arch::Ascend910B;
    static constexpr AscendC::RoundMode kToHalf = AscendC::RoundMode::CAST_RINT;
    // L0C is drained by Fixpipe.
    static constexpr AscendC::HardEvent kMToOut = AscendC::HardEvent::M_FIX;
    static constexpr AscendC::HardEvent kOutToM = AscendC::HardEvent::FIX_M;
};

#if defined(SGEMM_CUBE_SOC_910A) && !defined(SGEMM_CUBE_SOC_910B)
using Soc = Soc910A;
#elif defined(SGEMM_CUBE_SOC_910B) && !defined(SGEMM_CUBE_SOC_910A)
using Soc = Soc910B;
#else
#error "define exactly one of SGEMM_CUBE_SOC_910A, SGEMM_CUBE_SOC_910B (CMake derives it from SOC_VERSION)"
#endif

// Cross-check the tag against the compiler's architecture macro where it exists.
#if defined(__CCE_AICORE__)
#if defined(SGEMM_CUBE_SOC_910A) && (__CCE_AICORE__ != 100)
#error "SGEMM_CUBE_SOC_910A needs a dav-c100 (Ascend910A) build"
#endif
#if defined(SGEMM_CUBE_SOC_910B) && (__CCE_AICORE__ != 220)
#error "SGEMM_CUBE_SOC_910B needs a dav-c220 (Ascend910B*) build"
#endif
#endif
#if defined(__NPU_ARCH__)
#if defined(SGEMM_CUBE_SOC_910A) && (__NPU_ARCH__ != 1001)
#error "SGEMM_CUBE_SOC_910A needs __NPU_ARCH__ 1001 (dav-c100)"
#endif
#if defined(SGEMM_CUBE_SOC_910B) && (__NPU_ARCH__ != 2201)
#error "SGEMM_CUBE_SOC_910B needs __NPU_ARCH__ 2201 (dav-c220)"
#endif
#endif

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_SOC_HPP
