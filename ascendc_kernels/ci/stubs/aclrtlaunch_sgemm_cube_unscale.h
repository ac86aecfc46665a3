// CI stand-in for the generated launch header (see aclrtlaunch_sgemm_cube_split.h).
#ifndef HEADER_ACLRTLAUNCH_SGEMM_CUBE_UNSCALE_H
#define HEADER_ACLRTLAUNCH_SGEMM_CUBE_UNSCALE_H
#include "acl/acl_base.h"

#ifndef ACLRT_LAUNCH_KERNEL
#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func
#endif

extern "C" uint32_t aclrtlaunch_sgemm_cube_unscale(uint32_t blockDim, aclrtStream stream, void* c, void* meta_a,
                                                   void* meta_b, void* flags, uint32_t batch, uint32_t mp, uint32_t np,
                                                   uint32_t plan_cores, float alpha_mant, int32_t alpha_exp,
                                                   uint32_t epilogue);
#endif
