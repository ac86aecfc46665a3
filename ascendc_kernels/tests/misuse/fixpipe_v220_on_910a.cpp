// Planted misuse (tests/ascendc_kernels/test_ascend_kernel_sources.py): the 910B write-back,
// Fixpipe L0C -> GM with FixpipeParamsV220, in code that every chip's build
// compiles and instantiates.  include/basic_api/kernel_operator_fixpipe_intf.h
// declares that overload only for __NPU_ARCH__ 2201 (and later chips); on 1001
// the ungated definition in impl/basic_api/kernel_operator_fixpipe_intf_impl.h
// fails when instantiated (dav_c100 has no FixpipeL0C2GMImpl for it).  The
// struct itself exists on every chip.  So the 910A build (1001) must fail and
// the 910B build (2201) must pass.  Without SGEMM_CUBE_PLANT_MISUSE the file is
// the clean control and compiles on both.
#include "kernel_operator.h"

__aicore__ inline void StoreAccumulator(const AscendC::GlobalTensor<float>& dst, const AscendC::LocalTensor<float>& acc)
{
    AscendC::FixpipeParamsV220 p;
    p.nSize = 16;
    p.mSize = 16;
    p.srcStride = 16;
    p.dstStride = 16;
    p.quantPre = QuantMode_t::NoQuant;
#if defined(SGEMM_CUBE_PLANT_MISUSE)
    AscendC::Fixpipe<float, float, AscendC::CFG_ROW_MAJOR>(dst, acc, p);
#else
    (void)dst;
    (void)acc;
    (void)p;
#endif
}
