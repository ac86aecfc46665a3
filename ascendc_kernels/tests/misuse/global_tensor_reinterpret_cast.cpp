// Planted misuse (tests/ascendc_kernels/test_ascend_kernel_sources.py): reinterpreting a GM
// tensor.  include/basic_api/kernel_tensor.h gives LocalTensor a
// ReinterpretCast on every chip but GlobalTensor only for __NPU_ARCH__ 3510 /
// 5102, so both the 910A (1001) and the 910B (2201) build must fail.  Without
// SGEMM_CUBE_PLANT_MISUSE the file is the clean control (the LocalTensor form)
// and compiles on both.
#include "kernel_operator.h"

__aicore__ inline void View(const AscendC::GlobalTensor<float>& gm, const AscendC::LocalTensor<float>& ub)
{
    AscendC::LocalTensor<uint8_t> bytes = ub.ReinterpretCast<uint8_t>();
    (void)bytes;
#if defined(SGEMM_CUBE_PLANT_MISUSE)
    AscendC::GlobalTensor<uint8_t> gm_bytes = gm.ReinterpretCast<uint8_t>();
    (void)gm_bytes;
#else
    (void)gm;
#endif
}
