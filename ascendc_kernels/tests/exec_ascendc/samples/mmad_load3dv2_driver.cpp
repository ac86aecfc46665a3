// Driver for asc-devkit examples/01_simd_cpp_api/03_basic_api/03_matrix_compute/mmad_load3dv2 (see
// sample_driver.h), one build per -DSCENARIO_NUM, the half scenarios: 1 (A [m, k] through Load3D v2 into
// L0A, B [k, n] transposed into L0B by Load3D v2) and 2 (A given as [k, m], Load3D v2 with enTranspose into
// L0A).  As the sample's host main: M 30, N 70, K 40, 1 block; ./input/x1_gm.bin (A), ./input/x2_gm.bin (B)
// -> ./output/output.bin (C, M x N float).  Scenarios 3, 4 (float Mmad, kDirectionAlign) and 5 (int8) are
// not modelled.
#include "sample_driver.h"

#include SAMPLE_KERNEL_SRC

static_assert(SCENARIO_NUM == 1 || SCENARIO_NUM == 2, "mmad_load3dv2 is modelled for its half scenarios (1, 2)");

int main()
{
    constexpr uint32_t M = 30, N = 70, K = 40;
    using namespace sample_driver;
    GmBuffer a = gm_alloc(M * K * 2), b = gm_alloc(K * N * 2), c = gm_alloc(M * N * 4, 0xFF);
    read_file("./input/x1_gm.bin", a);
    read_file("./input/x2_gm.bin", b);
    launch("mmad_load3dv2", 1, [&] { mmad_custom<M, N, K>(a.p, b.p, c.p); });
    write_file("./output/output.bin", c);
    return finish();
}
