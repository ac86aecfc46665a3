// Planted misuse (tests/ascendc_kernels/test_ascend_kernel_sources.py): a MmadParams field of
// another chip.  include/basic_api/kernel_struct_mm.h declares
// MmadParams::disableGemv only for __NPU_ARCH__ 3510 / 5102, so both the 910A
// (1001) and the 910B (2201) build must fail.  Without SGEMM_CUBE_PLANT_MISUSE
// the file is the clean control (fields of both chips) and compiles on both.
#include "kernel_operator.h"

__aicore__ inline void Multiply(const AscendC::LocalTensor<float>& c, const AscendC::LocalTensor<half>& a,
                                const AscendC::LocalTensor<half>& b)
{
    AscendC::MmadParams p;
    p.m = 16;
    p.n = 16;
    p.k = 16;
    p.cmatrixInitVal = true;
    p.cmatrixSource = false;
#if defined(SGEMM_CUBE_PLANT_MISUSE)
    p.disableGemv = true;
#endif
    AscendC::Mmad(c, a, b, p);
}
