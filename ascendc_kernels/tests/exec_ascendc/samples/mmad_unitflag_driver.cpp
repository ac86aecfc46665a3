// Driver for asc-devkit examples/01_simd_cpp_api/03_basic_api/03_matrix_compute/mmad_unitflag (see
// sample_driver.h), one build per -DENABLE_UNITFLAG (1, the sample's default, or 0).  Half A and B, K split
// into kRound Mmads on one accumulator (unitFlag 2, then 3 on the last; Fixpipe unitFlag 3; then
// SetFixPipeConfig(.., true)), Fixpipe NZ2ND to float.  As the sample's host main: M 128, N 256, K 512,
// kRound 8, 1 block; ./input/x1_gm.bin (A as [kRound, M, K / kRound]), ./input/x2_gm.bin (B [K, N])
// -> ./output/output.bin (C, M x N float).
#include "sample_driver.h"

#include SAMPLE_KERNEL_SRC

int main()
{
    constexpr uint32_t M = 128, N = 256, K = 512, kRound = 8;
    using namespace sample_driver;
    GmBuffer a = gm_alloc(M * K * 2), b = gm_alloc(K * N * 2), c = gm_alloc(M * N * 4, 0xFF);
    read_file("./input/x1_gm.bin", a);
    read_file("./input/x2_gm.bin", b);
    launch("mmad_unitflag", 1, [&] { mmad_with_unitflag_custom<M, N, K, kRound>(a.p, b.p, c.p); });
    write_file("./output/output.bin", c);
    return finish();
}
