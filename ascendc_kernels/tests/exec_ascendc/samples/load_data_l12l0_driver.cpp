// Driver for asc-devkit examples/01_simd_cpp_api/03_basic_api/03_matrix_compute/load_data_l12l0
// (see sample_driver.h), one build per -DSCENARIO_NUM.  As the sample's host main: m 40, n 50, k 70,
// 1 block; ./input/x1_gm.bin (A), ./input/x2_gm.bin (B) -> ./output/output.bin (C, m x n).
// Element sizes by scenario as the host main: 1-5 int8 in / int32 out, 6-10 half / float, 11-14 float / float.
#include "sample_driver.h"

#include SAMPLE_KERNEL_SRC

int main()
{
    constexpr uint32_t m = 40, n = 50, k = 70;
    constexpr size_t in = SCENARIO_NUM <= 5 ? 1 : SCENARIO_NUM <= 10 ? 2 : 4;
    using namespace sample_driver;
    GmBuffer a = gm_alloc(m * k * in), b = gm_alloc(k * n * in), c = gm_alloc(m * n * 4, 0xFF);
    read_file("./input/x1_gm.bin", a);
    read_file("./input/x2_gm.bin", b);
    launch("KernelLoadDataL12L0", 1, [&] { KernelLoadDataL12L0<m, n, k>(a.p, b.p, c.p); });
    write_file("./output/output.bin", c);
    return finish();
}
