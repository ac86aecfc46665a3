// Host launchers: thin wrappers over the ACLRT_LAUNCH_KERNEL entry points that
// ascendc_library() generates for kernel/sgemm_cube_kernels.cpp.
#include "launch.h"

#include "aclrtlaunch_sgemm_cube_combine.h"
#include "aclrtlaunch_sgemm_cube_fixup_cols.h"
#include "aclrtlaunch_sgemm_cube_fixup_rows.h"
#include "aclrtlaunch_sgemm_cube_gemm.h"
#include "aclrtlaunch_sgemm_cube_line_meta.h"
#include "aclrtlaunch_sgemm_cube_line_stats.h"
#include "aclrtlaunch_sgemm_cube_split.h"
#include "aclrtlaunch_sgemm_cube_unscale.h"

namespace sgemm_cube {
namespace host {

const char* built_soc()
{
#if defined(SGEMM_CUBE_SOC_910A)
    return "910a";
#elif defined(SGEMM_CUBE_SOC_910B)
    return "910b";
#else
#error "define SGEMM_CUBE_SOC_910A or SGEMM_CUBE_SOC_910B"
#endif
}

uint32_t launch_split(uint32_t blocks, aclrtStream stream, void* x, void* hi, void* lo, void* meta, void* flags,
                      uint32_t batch, uint32_t rows, uint32_t cols, uint32_t plan_cores, float scale,
                      uint32_t scaled_lines, uint32_t keep_below, uint32_t keep_from)
{
    return ACLRT_LAUNCH_KERNEL(sgemm_cube_split)(blocks, stream, x, hi, lo, meta, flags, batch, rows, cols, plan_cores, scale,
                                                 scaled_lines, keep_below, keep_from);
}

uint32_t launch_gemm(uint32_t blocks, aclrtStream stream, void* a_hi, void* a_lo, void* b_hi, void* b_lo, void* c_hh,
                     void* c_lh, void* c_hl, void* c_ll, uint32_t batch, uint32_t m, uint32_t n, uint32_t k,
                     uint32_t bm, uint32_t bk, uint32_t bn, uint32_t n_fused, uint32_t per_term,
                     uint32_t l0c_stages, uint32_t plan_cores, uint32_t terms, float inv_scale, void* meta_a,
                     void* meta_b, void* flags, float alpha_mant, int32_t alpha_exp)
{
    return ACLRT_LAUNCH_KERNEL(sgemm_cube_gemm)(blocks, stream, a_hi, a_lo, b_hi, b_lo, c_hh, c_lh, c_hl, c_ll, batch,
                                                m, n, k, bm, bk, bn, n_fused, per_term, l0c_stages, plan_cores, terms,
                                                inv_scale, meta_a, meta_b, flags, alpha_mant, alpha_exp);
}

uint32_t launch_combine(uint32_t blocks, aclrtStream stream, void* c_hh, void* c_lh, void* c_hl, void* c_ll,
                        void* out, uint64_t total, uint32_t plan_cores, uint32_t keep_lo_lo, float inv_scale,
                        void* meta_a, void* meta_b, void* flags, uint32_t batch, uint32_t mp, uint32_t np,
                        float alpha_mant, int32_t alpha_exp)
{
    return ACLRT_LAUNCH_KERNEL(sgemm_cube_combine)(blocks, stream, c_hh, c_lh, c_hl, c_ll, out, total, plan_cores,
                                                   keep_lo_lo, inv_scale, meta_a, meta_b, flags, batch, mp, np,
                                                   alpha_mant, alpha_exp);
}

uint32_t launch_line_stats(uint32_t blocks, aclrtStream stream, void* x, void* big, void* small_w, void* finite,
                           uint32_t batch, uint32_t rows, uint32_t cols, uint32_t along_rows, uint32_t plan_cores)
{
    return ACLRT_LAUNCH_KERNEL(sgemm_cube_line_stats)(blocks, stream, x, big, small_w, finite, batch, rows, cols,
                                                      along_rows, plan_cores);
}

uint32_t launch_line_meta(uint32_t blocks, aclrtStream stream, void* big, void* small_w, void* finite, void* meta,
                          void* flags, uint32_t batch, uint32_t lines, uint32_t sb, uint32_t scale, uint32_t fixup,
                          uint32_t plan_cores, uint32_t subnormals)
{
    return ACLRT_LAUNCH_KERNEL(sgemm_cube_line_meta)(blocks, stream, big, small_w, finite, meta, flags, batch, lines, sb,
                                                     scale, fixup, plan_cores, subnormals);
}

uint32_t launch_unscale(uint32_t blocks, aclrtStream stream, void* c, void* meta_a, void* meta_b, void* flags,
                        uint32_t batch, uint32_t mp, uint32_t np, uint32_t plan_cores, float alpha_mant,
                        int32_t alpha_exp, uint32_t epilogue)
{
    return ACLRT_LAUNCH_KERNEL(sgemm_cube_unscale)(blocks, stream, c, meta_a, meta_b, flags, batch, mp, np, plan_cores,
                                                   alpha_mant, alpha_exp, epilogue);
}

uint32_t launch_fixup_rows(uint32_t blocks, aclrtStream stream, void* a, void* b, void* meta_a, void* meta_b, void* c,
                           void* flags, uint32_t batch, uint32_t mp, uint32_t np, uint32_t kp, uint32_t k, uint32_t fixup_min_class,
                           uint32_t plan_cores, float alpha_mant, int32_t alpha_exp)
{
    return ACLRT_LAUNCH_KERNEL(sgemm_cube_fixup_rows)(blocks, stream, a, b, meta_a, meta_b, c, flags, batch, mp, np, kp, k,
                                                      fixup_min_class, plan_cores, alpha_mant, alpha_exp);
}

uint32_t launch_fixup_cols(uint32_t blocks, aclrtStream stream, void* a, void* b, void* meta_a, void* meta_b, void* c,
                           void* flags, uint32_t batch, uint32_t mp, uint32_t np, uint32_t kp, uint32_t k, uint32_t fixup_min_class,
                           uint32_t plan_cores, float alpha_mant, int32_t alpha_exp)
{
    return ACLRT_LAUNCH_KERNEL(sgemm_cube_fixup_cols)(blocks, stream, a, b, meta_a, meta_b, c, flags, batch, mp, np, kp, k,
                                                      fixup_min_class, plan_cores, alpha_mant, alpha_exp);
}

}  // namespace host
}  // namespace sgemm_cube
