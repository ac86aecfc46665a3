// Driver for asc-devkit examples/01_simd_cpp_api/03_basic_api/03_matrix_compute/fixpipe_l0c2gm
// (see sample_driver.h), one build per -DSCENARIO_NUM.  As the sample's host main: M 128, K 128, N 256,
// 1 block; ./input/x1_gm.bin, ./input/x2_gm.bin (half), ./input/quant_pre.bin (scenario 5) ->
// ./output/output.bin (M x N float, or int8 for scenarios 4 and 5).
#include "sample_driver.h"

#include SAMPLE_KERNEL_SRC

int main()
{
    constexpr uint32_t M = 128, K = 128, N = 256;
    constexpr size_t out = (SCENARIO_NUM == 4 || SCENARIO_NUM == 5) ? 1 : 4;
    using namespace sample_driver;
    GmBuffer a = gm_alloc(M * K * 2), b = gm_alloc(K * N * 2), c = gm_alloc(M * N * out, 0xFF),
             q = gm_alloc(N * 8);
    read_file("./input/x1_gm.bin", a);
    read_file("./input/x2_gm.bin", b);
    if (SCENARIO_NUM == 5) {
        read_file("./input/quant_pre.bin", q);
    }
    launch("fixpipe_l0c2gm", 1, [&] { fixpipe_l0c2gm<M, K, N>(a.p, b.p, c.p, q.p); });
    write_file("./output/output.bin", c);
    return finish();
}
