// Driver for asc-devkit examples/01_simd_cpp_api/00_introduction/02_matrix/matmul_basic_api
// (see sample_driver.h).  Shapes and launch as the sample's host main: M 256, K 64, N 256,
// singleCoreM 128, base 128 x 64 x 256, 2 blocks; inputs ./input/x1_gm.bin (A, M x K half),
// ./input/x2_gm.bin (B, K x N half); output ./output/output.bin (C, M x N half).
#include "sample_driver.h"

#include SAMPLE_KERNEL_SRC

int main()
{
    constexpr uint32_t M = 256, K = 64, N = 256, singleCoreM = 128, baseM = 128, baseK = 64, baseN = 256;
    using namespace sample_driver;
    GmBuffer a = gm_alloc(M * K * 2), b = gm_alloc(K * N * 2), c = gm_alloc(M * N * 2, 0xFF);
    read_file("./input/x1_gm.bin", a);
    read_file("./input/x2_gm.bin", b);
    launch("mmad_custom", 2, [&] { mmad_custom<M, K, N, singleCoreM, baseM, baseK, baseN>(a.p, b.p, c.p); });
    write_file("./output/output.bin", c);
    return finish();
}
