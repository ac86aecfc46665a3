// Host launchers of the three SGEMM-cube kernels (implemented in launch.cpp
// with ACLRT_LAUNCH_KERNEL; the headers aclrtlaunch_<kernel>.h are generated
// by ascendc_library()).  Device pointers are raw GM addresses; every call
// is asynchronous on `stream` and returns the ACL error code (0 = success).
#ifndef SGEMM_CUBE_HOST_LAUNCH_H
#define SGEMM_CUBE_HOST_LAUNCH_H

#include <cstdint>

#include "acl/acl_base.h"

namespace sgemm_cube {
namespace host {

/// SoC the device code was built for: "910a" or "910b".
const char* built_soc();

/// Split kernel: x (batch*rows x cols FP32) -> hi, lo (FP16, Zz).  `blocks`
/// cores, `plan_cores` the count the split geometry was planned with.  With
/// `scaled_lines` 1 (rows) or 2 (columns), each line is first scaled by 2^t of
/// its packed integer in `meta`, except in batches whose word in `flags` says
/// no line is scaled (null: every batch is scaled); entries whose |x| bits
/// reach `keep_below` (and NaN/Inf) become +0, and with `keep_from` nonzero
/// (a band pass: the bits of the window's lower bound) so do those below it.
uint32_t launch_split(uint32_t blocks, aclrtStream stream, void* x, void* hi, void* lo, void* meta, void* flags,
                      uint32_t batch, uint32_t rows, uint32_t cols, uint32_t plan_cores, float scale,
                      uint32_t scaled_lines, uint32_t keep_below, uint32_t keep_from);

/// GEMM kernel: one FP32 term buffer per product term (c_ll unused with 3 terms), or C in c_hh
/// when the launch plan combines in the epilogue (then only c_hh is touched); there, with meta_a, meta_b
/// and flags not null (the device's integers and batch words), C is also unscaled with alpha for the
/// batches schedule::epilogue_unscales names (null: none).
uint32_t launch_gemm(uint32_t blocks, aclrtStream stream, void* a_hi, void* a_lo, void* b_hi, void* b_lo, void* c_hh,
                     void* c_lh, void* c_hl, void* c_ll, uint32_t batch, uint32_t m, uint32_t n, uint32_t k,
                     uint32_t bm, uint32_t bk, uint32_t bn, uint32_t n_fused, uint32_t per_term,
                     uint32_t l0c_stages, uint32_t plan_cores, uint32_t terms, float inv_scale, void* meta_a,
                     void* meta_b, void* flags, float alpha_mant, int32_t alpha_exp);

/// Combine kernel: out = termwise combination of the term buffers (out may be c_hh).  With `meta_a`
/// not null the unscale is folded in: c_hh (= out, shape (batch, mp, np)) = alpha_mant 2^alpha_exp
/// C 2^-(ta_i + tb_j), one rounding, batches whose word in `flags` says nothing is scaled (alpha 1) only
/// combined; `blocks` then from schedule::make_unscale_geometry.
uint32_t launch_combine(uint32_t blocks, aclrtStream stream, void* c_hh, void* c_lh, void* c_hl, void* c_ll,
                        void* out, uint64_t total, uint32_t plan_cores, uint32_t keep_lo_lo, float inv_scale,
                        void* meta_a, void* meta_b, void* flags, uint32_t batch, uint32_t mp, uint32_t np,
                        float alpha_mant, int32_t alpha_exp);

/// Line statistics (the guarantee's bookkeeping): per row (along_rows = 1) or column of the
/// (batch * rows) x cols FP32 x, three int32 arrays (guard/line_meta.hpp's LineStats).
uint32_t launch_line_stats(uint32_t blocks, aclrtStream stream, void* x, void* big, void* small_w, void* finite,
                           uint32_t batch, uint32_t rows, uint32_t cols, uint32_t along_rows, uint32_t plan_cores);

/// Line meta: one packed int32 per line (guard.pack_meta) from the statistics.  `subnormals`
/// (guard::Subnormals): 1 the split range safe whether or not FP16 subnormals flush, 0 the wider one
/// for hardware that keeps them (guard.line_range's `arithmetic`).  `flags`: the batches' words
/// (schedule::kFlagWords FP32 per batch, zeroed before A's launch; B's adds to the same).
uint32_t launch_line_meta(uint32_t blocks, aclrtStream stream, void* big, void* small_w, void* finite, void* meta,
                          void* flags, uint32_t batch, uint32_t lines, uint32_t sb, uint32_t scale, uint32_t fixup,
                          uint32_t plan_cores, uint32_t subnormals);

/// Unscale: c (batch, mp, np) FP32 *= alpha_mant * 2^(alpha_exp - ta_i - tb_j), one rounding, in place
/// (units of batches with no scaled line, alpha 1, untouched).  Launched only where no combine kernel runs.
/// epilogue 1: the GEMM's epilogue unscaled (it got the integers and words): batches with no wide line are
/// left alone.
uint32_t launch_unscale(uint32_t blocks, aclrtStream stream, void* c, void* meta_a, void* meta_b, void* flags,
                        uint32_t batch, uint32_t mp, uint32_t np, uint32_t plan_cores, float alpha_mant,
                        int32_t alpha_exp, uint32_t epilogue);

/// Fix-up: the fix-up rows of A (class >= fixup_min_class) of c recomputed in plain FP32 from a and b, unscaled
/// (batches whose word in `flags` says none is listed skipped; null `flags`: none skipped).
uint32_t launch_fixup_rows(uint32_t blocks, aclrtStream stream, void* a, void* b, void* meta_a, void* meta_b, void* c,
                           void* flags, uint32_t batch, uint32_t mp, uint32_t np, uint32_t kp, uint32_t k, uint32_t fixup_min_class,
                           uint32_t plan_cores, float alpha_mant, int32_t alpha_exp);

/// Fix-up: the fix-up columns of B (class >= fixup_min_class) of c likewise (after launch_fixup_rows).
uint32_t launch_fixup_cols(uint32_t blocks, aclrtStream stream, void* a, void* b, void* meta_a, void* meta_b, void* c,
                           void* flags, uint32_t batch, uint32_t mp, uint32_t np, uint32_t kp, uint32_t k, uint32_t fixup_min_class,
                           uint32_t plan_cores, float alpha_mant, int32_t alpha_exp);

}  // namespace host
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_HOST_LAUNCH_H
