// Function qualifiers shared by every layer.
//
// The AscendC compiler (bisheng, which defines __CCE__) treats a function
// without a qualifier as host code: a helper that __aicore__ code calls must
// be declared for the AI core as well.  CATLASS does the same with
// CATLASS_HOST_DEVICE / CATLASS_DEVICE (include/catlass/detail/macros.hpp);
// the attribute spelling `[host, aicore]` is the one asc-devkit's
// impl/utils/sys_macros.h uses for __host_aicore__.
//
//   SGEMM_CUBE_HOST_DEVICE  plain functions of the schedule and the SoC table:
//                           called by the host launcher, the g++ tests and
//                           the kernels alike.
//   SGEMM_CUBE_DEVICE       templates that call AscendC code on the device
//                           (schedule::run_core, whose visitor is __aicore__).
//
// Everywhere else (g++ tests, the host glue, AscendC's CPU-debug mode) both
// are plain `inline`.
#ifndef SGEMM_CUBE_DETAIL_MACROS_HPP
#define SGEMM_CUBE_DETAIL_MACROS_HPP

#if defined(__CCE__)
#define SGEMM_CUBE_HOST_DEVICE __forceinline__[host, aicore]
#define SGEMM_CUBE_DEVICE __forceinline__[aicore]
#else
#define SGEMM_CUBE_HOST_DEVICE inline
#define SGEMM_CUBE_DEVICE inline
#endif

#endif  // SGEMM_CUBE_DETAIL_MACROS_HPP
