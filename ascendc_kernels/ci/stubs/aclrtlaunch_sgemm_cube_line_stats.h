// CI stand-in for the generated launch header (see aclrtlaunch_sgemm_cube_split.h).
#ifndef HEADER_ACLRTLAUNCH_SGEMM_CUBE_LINE_STATS_H
#define HEADER_ACLRTLAUNCH_SGEMM_CUBE_LINE_STATS_H
#include "acl/acl_base.h"

#ifndef ACLRT_LAUNCH_KERNEL
#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func
#endif

extern "C" uint32_t aclrtlaunch_sgemm_cube_line_stats(uint32_t blockDim, aclrtStream stream, void* x, void* big,
                                                      void* small_w, void* finite, uint32_t batch, uint32_t rows,
                                                      uint32_t cols, uint32_t along_rows, uint32_t plan_cores);
#endif
