// CI stand-in for the header ascendc_library() generates from
// kernel/sgemm_cube_kernels.cpp (same declaration format: block count, stream,
// then the kernel's parameters with GM_ADDR as void*).  Used only to
// syntax-check host/launch.cpp where no CANN toolkit exists.
#ifndef HEADER_ACLRTLAUNCH_SGEMM_CUBE_SPLIT_H
#define HEADER_ACLRTLAUNCH_SGEMM_CUBE_SPLIT_H
#include "acl/acl_base.h"

#ifndef ACLRT_LAUNCH_KERNEL
#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func
#endif

extern "C" uint32_t aclrtlaunch_sgemm_cube_split(uint32_t blockDim, aclrtStream stream, void* x, void* hi, void* lo,
                                                 void* meta, void* flags, uint32_t batch, uint32_t rows, uint32_t cols,
                                                 uint32_t plan_cores, float scale, uint32_t scaled_lines,
                                                 uint32_t keep_below, uint32_t keep_from);
#endif
