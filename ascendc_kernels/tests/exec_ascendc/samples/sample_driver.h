// Host driver support for public AscendC samples run on the executable stand-in
// (../kernel_operator.h).  Used by ci/run_public_samples.sh, which extracts the sample's device code
// (its .asc file up to its host main) into SAMPLE_KERNEL_SRC and builds one driver per sample and
// scenario with g++ -D__NPU_ARCH__=2201 -DSGEMM_CUBE_SOC_910B.
//
// A driver reads the sample's inputs (as its own scripts/gen_data.py wrote them), places them in
// registered GM buffers (512-byte aligned), runs the kernel body once per block the way the sample's
// host main launches it (GetBlockIdx = 0 .. numBlocks-1, one core after the other), writes the output
// file and prints the flag/race checker's report.  Exit status: 0 clean, 1 checker errors, 2 fatal,
// 3 file errors.
#ifndef SGEMM_CUBE_EXEC_SAMPLE_DRIVER_H
#define SGEMM_CUBE_EXEC_SAMPLE_DRIVER_H

#include "kernel_operator.h"

#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

namespace sample_driver {

struct GmBuffer {
    uint8_t* p = nullptr;
    size_t n = 0;
};

/// A registered GM buffer of `bytes` bytes, filled with `fill` (0 by default).
inline GmBuffer gm_alloc(size_t bytes, uint8_t fill = 0)
{
    GmBuffer b;
    b.n = bytes;
    b.p = static_cast<uint8_t*>(::operator new(bytes + 512, std::align_val_t(512)));
    std::memset(b.p, fill, bytes + 512);
    ascend_exec::register_gm(b.p, bytes);
    return b;
}

inline void read_file(const std::string& path, const GmBuffer& b)
{
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
        std::fprintf(stderr, "cannot open %s\n", path.c_str());
        std::exit(3);
    }
    const size_t got = std::fread(b.p, 1, b.n, f);
    std::fclose(f);
    if (got != b.n) {
        std::fprintf(stderr, "%s: %zu bytes, expected %zu\n", path.c_str(), got, b.n);
        std::exit(3);
    }
}

inline void write_file(const std::string& path, const GmBuffer& b)
{
    FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(b.p, 1, b.n, f) != b.n) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        std::exit(3);
    }
    std::fclose(f);
}

using ascend_exec::launch;  // one core after another, as <<<blocks, ...>>> would

inline int finish() { return ascend_exec::report(stdout); }

}  // namespace sample_driver

#endif
