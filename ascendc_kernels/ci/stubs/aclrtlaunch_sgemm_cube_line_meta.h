// CI stand-in for the generated launch header (see aclrtlaunch_sgemm_cube_split.h).
#ifndef HEADER_ACLRTLAUNCH_SGEMM_CUBE_LINE_META_H
#define HEADER_ACLRTLAUNCH_SGEMM_CUBE_LINE_META_H
#include "acl/acl_base.h"

#ifndef ACLRT_LAUNCH_KERNEL
#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func
#endif

extern "C" uint32_t aclrtlaunch_sgemm_cube_line_meta(uint32_t blockDim, aclrtStream stream, void* big, void* small_w,
                                                     void* finite, void* meta, void* flags, uint32_t batch, uint32_t lines,
                                                     uint32_t sb, uint32_t scale, uint32_t fixup, uint32_t plan_cores,
                                                     uint32_t subnormals);
#endif
