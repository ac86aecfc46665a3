// Driver for asc-devkit examples/01_simd_cpp_api/03_basic_api/03_matrix_compute/mmad_gemv (see
// sample_driver.h), -DDISABLE_GEMV=0 (the only setting for dav-2201): one Mmad with M = 1, i.e. GEMV mode
// (A read from L0A as ND).  The stand-in refuses GEMV mode by design (fatal, exit 2: the SGEMM-cube kernels
// never issue it), so this case shows the refusal, not a match.  As the sample's host main: N 32, K 256,
// 1 block; ./input/x1_gm.bin (A, 1 x K half), ./input/x2_gm.bin (B given as [N, K] half)
// -> ./output/output.bin (C, 1 x N float).
#include "sample_driver.h"

#include SAMPLE_KERNEL_SRC

int main()
{
    constexpr uint32_t N = 32, K = 256;
    using namespace sample_driver;
    GmBuffer a = gm_alloc(K * 2), b = gm_alloc(K * N * 2), c = gm_alloc(N * 4, 0xFF);
    read_file("./input/x1_gm.bin", a);
    read_file("./input/x2_gm.bin", b);
    launch("mmad_gemv", 1, [&] { mmad_custom<N, K>(a.p, b.p, c.p); });
    write_file("./output/output.bin", c);
    return finish();
}
