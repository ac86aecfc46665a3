// Driver for asc-devkit examples/01_simd_cpp_api/03_basic_api/03_matrix_compute/mmad (see
// sample_driver.h), scenario 2 only: the sample's 16-bit case, bfloat16 A [m, k] and B [n, k] (B given
// transposed), ND -> Nz copies, LoadData 2D, two Mmads (the second accumulates: C = 2 A B), Fixpipe
// NZ2ND to float.  As the sample's host main: M 30, N 40, K 70, 1 block; ./input/x1_gm.bin,
// ./input/x2_gm.bin (bfloat16) -> ./output/output.bin (M x N float).  Scenarios 1, 3, 4 (int8 with a
// bias table, float with a bias tensor, int4) are not modelled.
#include "sample_driver.h"

#include SAMPLE_KERNEL_SRC

static_assert(SCENARIO_NUM == 2, "the mmad sample is modelled for its bfloat16 scenario (2) only");

int main()
{
    constexpr uint32_t M = 30, N = 40, K = 70;
    using namespace sample_driver;
    GmBuffer a = gm_alloc(M * K * 2), b = gm_alloc(K * N * 2), bias = gm_alloc(N * 4), c = gm_alloc(M * N * 4, 0xFF);
    read_file("./input/x1_gm.bin", a);
    read_file("./input/x2_gm.bin", b);
    launch("mmad", 1, [&] { mmad_custom<M, N, K>(a.p, b.p, bias.p, c.p); });
    write_file("./output/output.bin", c);
    return finish();
}
