// Device entry points of SGEMM-cube (compiled by the CANN toolchain through
// ascendc_library(); ACLRT_LAUNCH_KERNEL(name) launches them from the host).
// Built for one SoC at a time: CMake defines SGEMM_CUBE_SOC_910A or _910B.
//
//   sgemm_cube_split    vector  FP32 -> FP16 hi/lo in Zz fractal layout (keep_from != 0: a band pass's
//                       band cutoff, kernel/split_kernel.hpp)
//   sgemm_cube_gemm     cube    one FP32 buffer per product term (910A, one K group: C, unscaled there
//                       too for the batches whose words allow the fast path: meta_a, meta_b, flags, alpha)
//   sgemm_cube_combine  vector  termwise combination into C (not launched when the GEMM wrote C); with the
//                       guarantee's integers (meta_a not null) the unscale folded in, C = alpha C 2^-(ta+tb)
//   sgemm_cube_line_stats  vector  per row of A / column of B: largest and smallest finite magnitude, NaN/Inf
//   sgemm_cube_line_meta   vector (scalar unit)  per line: scaling exponent and class (cpu_fallback/guard.py;
//                          `subnormals` picks the split range: 1 the one safe if FP16 subnormals flush)
//   sgemm_cube_unscale  vector  C *= alpha * 2^-(ta_i + tb_j), one rounding, in place (only where no
//                       combine kernel runs: the 910A's epilogue combine)
// The line-meta kernel also sets one word per batch (`flags`, kernel/batch_flags.hpp): whether a line
// is scaled, listed or wide (|t| beyond schedule::kFastLineExponent); the split's scaling, the unscale and the fix-up skip batches that need nothing.
//   sgemm_cube_fixup_rows  vector  the fix-up rows of C in plain FP32 (recursive summation), unscaled
//   sgemm_cube_fixup_cols  vector  the fix-up columns of C likewise
//
// Never compiled by bisheng nor run on an NPU (no CANN toolkit or NPU here).  In CI this file is
// compiled with g++ against the executable AscendC stand-in (tests/exec_ascendc/) and its kernels
// run there on both chips' buffers, under every hardware behaviour the docs leave open; see
// ascendc_kernels/README.md.
#include "kernel_operator.h"
#include "sgemm_cube/kernel/combine_kernel.hpp"
#include "sgemm_cube/kernel/fixup_cols_kernel.hpp"
#include "sgemm_cube/kernel/fixup_kernel.hpp"
#include "sgemm_cube/kernel/gemm_kernel.hpp"
#include "sgemm_cube/kernel/line_meta_kernel.hpp"
#include "sgemm_cube/kernel/line_stats_kernel.hpp"
#include "sgemm_cube/kernel/unscale_kernel.hpp"
#include "sgemm_cube/kernel/split_kernel.hpp"
#include "sgemm_cube/tile/soc.hpp"

using sgemm_cube::tile::Soc;

// Which cores run an entry point.  The 910B (dav-c220) has separate cube (AIC) and vector (AIV) cores:
// each entry point declares its kind (KERNEL_TASK_TYPE_DEFAULT) and returns at once on the other (the
// body would otherwise be compiled into both passes).  The 910A's AI cores do both: nothing to declare.
#if defined(SGEMM_CUBE_SOC_910B)
#define SGEMM_CUBE_ON_CORES_(kind, other)                   \
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_##kind##_ONLY);  \
    if ASCEND_IS_##other {                                  \
        return;                                             \
    }                                                       \
    static_assert(true, "")
#define SGEMM_CUBE_ON_VECTOR_CORES() SGEMM_CUBE_ON_CORES_(AIV, AIC)
#define SGEMM_CUBE_ON_CUBE_CORES() SGEMM_CUBE_ON_CORES_(AIC, AIV)
#else
#define SGEMM_CUBE_ON_VECTOR_CORES() static_assert(true, "")
#define SGEMM_CUBE_ON_CUBE_CORES() static_assert(true, "")
#endif

extern "C" __global__ __aicore__ void sgemm_cube_split(GM_ADDR x, GM_ADDR hi, GM_ADDR lo, GM_ADDR meta, GM_ADDR flags,
                                                       uint32_t batch, uint32_t rows, uint32_t cols,
                                                       uint32_t plan_cores, float scale, uint32_t scaled_lines,
                                                       uint32_t keep_below, uint32_t keep_from)
{
    SGEMM_CUBE_ON_VECTOR_CORES();
    sgemm_cube::kernel::RunSplit<Soc>(reinterpret_cast<__gm__ float*>(x), reinterpret_cast<__gm__ half*>(hi),
                                      reinterpret_cast<__gm__ half*>(lo), reinterpret_cast<__gm__ int32_t*>(meta),
                                      reinterpret_cast<__gm__ float*>(flags),
                                      sgemm_cube::kernel::SplitArgs{batch, rows, cols, plan_cores, scale, scaled_lines,
                                                                    keep_below, keep_from});
}

extern "C" __global__ __aicore__ void sgemm_cube_gemm(GM_ADDR a_hi, GM_ADDR a_lo, GM_ADDR b_hi, GM_ADDR b_lo,
                                                      GM_ADDR c_hh, GM_ADDR c_lh, GM_ADDR c_hl, GM_ADDR c_ll,
                                                      uint32_t batch, uint32_t m, uint32_t n, uint32_t k,
                                                      uint32_t bm, uint32_t bk, uint32_t bn, uint32_t n_fused,
                                                      uint32_t per_term, uint32_t l0c_stages, uint32_t plan_cores,
                                                      uint32_t terms, float inv_scale, GM_ADDR meta_a, GM_ADDR meta_b,
                                                      GM_ADDR flags, float alpha_mant, int32_t alpha_exp)
{
    SGEMM_CUBE_ON_CUBE_CORES();
    sgemm_cube::block::GemmOperands gm;
    gm.a[0] = reinterpret_cast<__gm__ half*>(a_hi);
    gm.a[1] = reinterpret_cast<__gm__ half*>(a_lo);
    gm.b[0] = reinterpret_cast<__gm__ half*>(b_hi);
    gm.b[1] = reinterpret_cast<__gm__ half*>(b_lo);
    gm.c[sgemm_cube::schedule::kHiHi] = reinterpret_cast<__gm__ float*>(c_hh);
    gm.c[sgemm_cube::schedule::kLoHi] = reinterpret_cast<__gm__ float*>(c_lh);
    gm.c[sgemm_cube::schedule::kHiLo] = reinterpret_cast<__gm__ float*>(c_hl);
    gm.c[sgemm_cube::schedule::kLoLo] = reinterpret_cast<__gm__ float*>(c_ll);  // unused unless terms == 4
    gm.inv_scale = inv_scale;
    gm.unscale = sgemm_cube::tile::EpilogueUnscale{reinterpret_cast<__gm__ int32_t*>(meta_a),
                                                   reinterpret_cast<__gm__ int32_t*>(meta_b),
                                                   reinterpret_cast<__gm__ float*>(flags), alpha_mant, alpha_exp};
    sgemm_cube::kernel::RunGemm<Soc>(gm, sgemm_cube::kernel::GemmArgs{batch, m, n, k, bm, bk, bn, n_fused,
                                                                       per_term, l0c_stages, plan_cores, terms});
}

extern "C" __global__ __aicore__ void sgemm_cube_combine(GM_ADDR c_hh, GM_ADDR c_lh, GM_ADDR c_hl, GM_ADDR c_ll,
                                                         GM_ADDR out, uint64_t total, uint32_t plan_cores,
                                                         uint32_t keep_lo_lo, float inv_scale, GM_ADDR meta_a,
                                                         GM_ADDR meta_b, GM_ADDR flags, uint32_t batch, uint32_t mp,
                                                         uint32_t np, float alpha_mant, int32_t alpha_exp)
{
    SGEMM_CUBE_ON_VECTOR_CORES();
    sgemm_cube::kernel::RunCombine<Soc>(
        reinterpret_cast<__gm__ float*>(c_hh), reinterpret_cast<__gm__ float*>(c_lh),
        reinterpret_cast<__gm__ float*>(c_hl), reinterpret_cast<__gm__ float*>(c_ll),
        reinterpret_cast<__gm__ float*>(out),
        sgemm_cube::kernel::CombineArgs{total, plan_cores, keep_lo_lo, inv_scale},
        sgemm_cube::kernel::CombineUnscale{reinterpret_cast<__gm__ int32_t*>(meta_a),
                                           reinterpret_cast<__gm__ int32_t*>(meta_b),
                                           reinterpret_cast<__gm__ float*>(flags), batch, mp, np, alpha_mant,
                                           alpha_exp});
}

extern "C" __global__ __aicore__ void sgemm_cube_line_stats(GM_ADDR x, GM_ADDR big, GM_ADDR small_w, GM_ADDR finite,
                                                            uint32_t batch, uint32_t rows, uint32_t cols,
                                                            uint32_t along_rows, uint32_t plan_cores)
{
    SGEMM_CUBE_ON_VECTOR_CORES();
    const sgemm_cube::kernel::LineStatsOut out{reinterpret_cast<__gm__ int32_t*>(big),
                                               reinterpret_cast<__gm__ int32_t*>(small_w),
                                               reinterpret_cast<__gm__ int32_t*>(finite)};
    sgemm_cube::kernel::RunLineStats<Soc>(reinterpret_cast<__gm__ float*>(x), out,
                                          sgemm_cube::kernel::LineStatsArgs{batch, rows, cols, along_rows, plan_cores});
}

extern "C" __global__ __aicore__ void sgemm_cube_line_meta(GM_ADDR big, GM_ADDR small_w, GM_ADDR finite, GM_ADDR meta,
                                                           GM_ADDR flags, uint32_t batch, uint32_t lines, uint32_t sb, uint32_t scale,
                                                           uint32_t fixup, uint32_t plan_cores, uint32_t subnormals)
{
    SGEMM_CUBE_ON_VECTOR_CORES();
    const sgemm_cube::kernel::LineStatsOut in{reinterpret_cast<__gm__ int32_t*>(big),
                                              reinterpret_cast<__gm__ int32_t*>(small_w),
                                              reinterpret_cast<__gm__ int32_t*>(finite)};
    sgemm_cube::kernel::RunLineMeta<Soc>(in, reinterpret_cast<__gm__ int32_t*>(meta), reinterpret_cast<__gm__ float*>(flags),
                                         sgemm_cube::kernel::LineMetaArgs{batch, lines, sb, scale, fixup, plan_cores,
                                                                          subnormals});
}

extern "C" __global__ __aicore__ void sgemm_cube_unscale(GM_ADDR c, GM_ADDR meta_a, GM_ADDR meta_b, GM_ADDR flags,
                                                         uint32_t batch, uint32_t mp, uint32_t np, uint32_t plan_cores,
                                                         float alpha_mant, int32_t alpha_exp, uint32_t epilogue)
{
    SGEMM_CUBE_ON_VECTOR_CORES();
    sgemm_cube::kernel::RunUnscale<Soc>(reinterpret_cast<__gm__ float*>(c), reinterpret_cast<__gm__ int32_t*>(meta_a),
                                        reinterpret_cast<__gm__ int32_t*>(meta_b), reinterpret_cast<__gm__ float*>(flags),
                                        sgemm_cube::kernel::UnscaleArgs{batch, mp, np, plan_cores, alpha_mant,
                                                                        alpha_exp, epilogue},
                                        sgemm_cube::kernel::UnscaleTerms{nullptr, nullptr, nullptr, 1.0f});
}

extern "C" __global__ __aicore__ void sgemm_cube_fixup_rows(GM_ADDR a, GM_ADDR b, GM_ADDR meta_a, GM_ADDR meta_b,
                                                            GM_ADDR c, GM_ADDR flags, uint32_t batch, uint32_t mp, uint32_t np,
                                                            uint32_t kp, uint32_t k, uint32_t fixup_min_class,
                                                            uint32_t plan_cores, float alpha_mant, int32_t alpha_exp)
{
    SGEMM_CUBE_ON_VECTOR_CORES();
    sgemm_cube::kernel::RunFixupRows<Soc>(
        reinterpret_cast<__gm__ float*>(a), reinterpret_cast<__gm__ float*>(b), reinterpret_cast<__gm__ int32_t*>(meta_a),
        reinterpret_cast<__gm__ int32_t*>(meta_b), reinterpret_cast<__gm__ float*>(c),
        reinterpret_cast<__gm__ float*>(flags), sgemm_cube::kernel::FixupArgs{batch, mp, np, kp, k, fixup_min_class, plan_cores, alpha_mant, alpha_exp});
}

extern "C" __global__ __aicore__ void sgemm_cube_fixup_cols(GM_ADDR a, GM_ADDR b, GM_ADDR meta_a, GM_ADDR meta_b,
                                                            GM_ADDR c, GM_ADDR flags, uint32_t batch, uint32_t mp, uint32_t np,
                                                            uint32_t kp, uint32_t k, uint32_t fixup_min_class,
                                                            uint32_t plan_cores, float alpha_mant, int32_t alpha_exp)
{
    SGEMM_CUBE_ON_VECTOR_CORES();
    sgemm_cube::kernel::RunFixupCols<Soc>(
        reinterpret_cast<__gm__ float*>(a), reinterpret_cast<__gm__ float*>(b), reinterpret_cast<__gm__ int32_t*>(meta_a),
        reinterpret_cast<__gm__ int32_t*>(meta_b), reinterpret_cast<__gm__ float*>(c),
        reinterpret_cast<__gm__ float*>(flags), sgemm_cube::kernel::FixupArgs{batch, mp, np, kp, k, fixup_min_class, plan_cores, alpha_mant, alpha_exp});
}
