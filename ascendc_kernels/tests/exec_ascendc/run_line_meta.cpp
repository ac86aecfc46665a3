// Host harness of the guarantee's bookkeeping kernels (sgemm_cube_line_stats, sgemm_cube_line_meta of
// kernel/sgemm_cube_kernels.cpp) on the executable AscendC stand-in: the operand zero-padded to
// multiples of 16 (zeros are neutral in every statistic), the statistics kernel along its lines,
// then the meta kernel, as host/binding.cpp will launch them.
//
// Build like run_kernels.cpp (one binary per chip).  Usage: run_line_meta IN OUT
//   IN:  9 little-endian int64 (batch, rows, cols, along_rows, sb, scale, fixup, cores, subnormals),
//        then X (batch*rows*cols float32, row-major).  scale: guard::Scale (0 none, 1 auto, 2 rows,
//        3 matrix); subnormals: guard::Subnormals, the split range (0 gradual, 1 safe if FP16
//        subnormals flush).  Lines are the rows (along_rows = 1: A, reduced along its columns) or the
//        columns (0: B) of each batch's rows x cols matrix.
//   OUT: packed meta (batch*lines int32, guard.pack_meta), then big, small_w, finite (batch*lines
//        int32 each), of the unpadded lines; then the batches' words (batch * schedule::kFlagWords FP32,
//        kernel/batch_flags.hpp).
//   stdout: the checker's report; exit status as run_kernels (driver_io.h: 64 for a bad input).
#include "kernel_operator.h"

#include "sgemm_cube_kernels.cpp"  // the real device code, from -I .../kernel

#include "driver_io.h"

#include <cstdio>
#include <vector>

int main(int argc, char** argv)
{
    using namespace sgemm_cube;
    driver::expect_args(argc, argv, 2, "IN OUT");
    driver::Input in(argv[1]);
    int64_t h[9];
    for (int64_t& v : h) {
        v = in.param();
    }
    const uint32_t batch = uint32_t(h[0]), rows = uint32_t(h[1]), cols = uint32_t(h[2]);
    const bool along_rows = h[3] != 0;
    const uint32_t sb = uint32_t(h[4]), scale = uint32_t(h[5]), fixup = uint32_t(h[6]), cores = uint32_t(h[7]);
    const uint32_t subnormals = uint32_t(h[8]);
    const std::vector<float> x = in.values<float>(size_t(batch) * rows * cols);
    const uint32_t rp = schedule::round_up(rows, schedule::kCube), cp = schedule::round_up(cols, schedule::kCube);
    const uint32_t lines = along_rows ? rp : cp;
    const size_t n_lines = size_t(batch) * lines;
    float* xp = reinterpret_cast<float*>(driver::gm_buffer(size_t(batch) * rp * cp * 4));  // zeros: the padding
    for (uint32_t b = 0; b < batch; ++b) {
        for (uint32_t r = 0; r < rows; ++r) {
            for (uint32_t c = 0; c < cols; ++c) {
                xp[(size_t(b) * rp + r) * cp + c] = x[(size_t(b) * rows + r) * cols + c];
            }
        }
    }
    int32_t* stat[3];
    for (auto& s : stat) {
        s = reinterpret_cast<int32_t*>(driver::gm_buffer(n_lines * 4));
        for (size_t i = 0; i < n_lines; ++i) {
            s[i] = 0x5A5A5A5A;  // poison: a line the kernel does not write shows up
        }
    }
    int32_t* meta = reinterpret_cast<int32_t*>(driver::gm_buffer(n_lines * 4));
    // The batches' words, zeroed as host/binding.cpp zeroes them.
    float* flags = reinterpret_cast<float*>(driver::gm_buffer(size_t(batch) * schedule::kFlagWords * 4));
    auto gm = [](void* p) { return reinterpret_cast<GM_ADDR>(p); };
    const schedule::LineStatsGeometry g = schedule::make_line_stats_geometry(batch, rp, cp, along_rows, cores);
    ascend_exec::launch("line_stats", g.cores, [&] {
        sgemm_cube_line_stats(gm(xp), gm(stat[0]), gm(stat[1]), gm(stat[2]), batch, rp, cp, along_rows ? 1u : 0u,
                              cores);
    });
    const uint32_t chunks = uint32_t((n_lines + schedule::kMetaChunk - 1) / schedule::kMetaChunk);
    ascend_exec::launch("line_meta", schedule::min_u32(cores, chunks), [&] {
        sgemm_cube_line_meta(gm(stat[0]), gm(stat[1]), gm(stat[2]), gm(meta), gm(flags), batch, lines, sb, scale,
                             fixup, cores, subnormals);
    });
    driver::Output out(argv[2]);
    const uint32_t used = along_rows ? rows : cols;
    for (int32_t* arr : {meta, stat[0], stat[1], stat[2]}) {
        for (uint32_t b = 0; b < batch; ++b) {
            out.write(arr + size_t(b) * lines, size_t(used) * 4);
        }
    }
    out.write(flags, size_t(batch) * schedule::kFlagWords * 4);  // then the batches' words
    out.close();
    std::printf("GEOMETRY lines=%u work=%u cores=%u\n", lines, g.work, g.cores);
    return ascend_exec::report(stdout);
}
