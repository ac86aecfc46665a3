// CI stand-in for the generated launch header (see aclrtlaunch_sgemm_cube_split.h).
#ifndef HEADER_ACLRTLAUNCH_SGEMM_CUBE_GEMM_H
#define HEADER_ACLRTLAUNCH_SGEMM_CUBE_GEMM_H
#include "acl/acl_base.h"

#ifndef ACLRT_LAUNCH_KERNEL
#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func
#endif

extern "C" uint32_t aclrtlaunch_sgemm_cube_gemm(uint32_t blockDim, aclrtStream stream, void* a_hi, void* a_lo,
                                                void* b_hi, void* b_lo, void* c_hh, void* c_lh, void* c_hl,
                                                void* c_ll, uint32_t batch, uint32_t m, uint32_t n, uint32_t k,
                                                uint32_t bm, uint32_t bk, uint32_t bn, uint32_t n_fused,
                                                uint32_t per_term, uint32_t l0c_stages, uint32_t plan_cores,
                                                uint32_t terms, float inv_scale, void* meta_a, void* meta_b,
                                                void* flags, float alpha_mant, int32_t alpha_exp);
#endif
