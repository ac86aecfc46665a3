// Test-only driver: one level-0 vector instruction of the stand-in (mask, repeatTime, BinaryRepeatParams)
// on a UB region given byte for byte, so that tests/ascendc_kernels/test_exec_vector_ops.py can check it
// against values worked out by hand.  Nothing else uses this file.
//
// Build like run_kernels.cpp.  Usage: run_vector_ops IN OUT; IN holds little-endian int64 parameters
//   op (0 And, 1 Or: uint16; 2 Max, 3 Min: int32), mask, repeatTime, dstBlkStride, src0BlkStride,
//   src1BlkStride, dstRepStride, src0RepStride, src1RepStride, dst, src0, src1 (byte offsets in the
//   region), bytes (the region's size, a multiple of 32)
// then `bytes` bytes: the region's contents.  OUT: the region after the instruction.  The region goes
// GM -> UB, the instruction runs, UB -> GM, each stage ordered by PipeBarrier<PIPE_ALL>.  stdout: the
// checker's report; exit status as run_kernels (0 clean, 1 checker errors, 2 fatal, 64 bad input).
#include "kernel_operator.h"

#include "driver_io.h"

#include <cstdio>
#include <cstring>

namespace {

template <typename T>
void apply(int op, const AscendC::LocalTensor<uint8_t>& ub, const int64_t* p)
{
    const AscendC::LocalTensor<T> d = ub[uint32_t(p[9])].ReinterpretCast<T>();
    const AscendC::LocalTensor<T> a = ub[uint32_t(p[10])].ReinterpretCast<T>();
    const AscendC::LocalTensor<T> b = ub[uint32_t(p[11])].ReinterpretCast<T>();
    const AscendC::BinaryRepeatParams r{uint8_t(p[3]), uint8_t(p[4]), uint8_t(p[5]),
                                        uint8_t(p[6]), uint8_t(p[7]), uint8_t(p[8])};
    const uint64_t mask = uint64_t(p[1]);
    const uint8_t repeat = uint8_t(p[2]);
    if constexpr (sizeof(T) == 2) {
        if (op == 0) {
            AscendC::And(d, a, b, mask, repeat, r);
        } else {
            AscendC::Or(d, a, b, mask, repeat, r);
        }
    } else {
        if (op == 2) {
            AscendC::Max(d, a, b, mask, repeat, r);
        } else {
            AscendC::Min(d, a, b, mask, repeat, r);
        }
    }
}

}  // namespace

int main(int argc, char** argv)
{
    driver::expect_args(argc, argv, 2, "IN OUT");
    driver::Input in(argv[1]);
    int64_t p[13];
    for (int64_t& v : p) {
        v = in.param();
    }
    const uint32_t bytes = uint32_t(p[12]);
    if (bytes % 32 != 0) {
        ascend_exec::fatal("vector ops: region of %u bytes", bytes);
    }
    uint8_t* gm = driver::gm_buffer(bytes);
    in.take(gm, bytes, "vector ops: short region");
    ascend_exec::launch("vector_ops", 1, [&] {
        AscendC::TPipe pipe;
        AscendC::TBuf<AscendC::TPosition::VECCALC> buf;
        pipe.InitBuffer(buf, bytes);
        const AscendC::LocalTensor<uint8_t> ub = buf.Get<uint8_t>();
        AscendC::GlobalTensor<uint8_t> g;
        g.SetGlobalBuffer(gm);
        AscendC::DataCopy(ub, g, bytes);
        AscendC::PipeBarrier<PIPE_ALL>();
        if (p[0] <= 1) {
            apply<uint16_t>(int(p[0]), ub, p);
        } else {
            apply<int32_t>(int(p[0]), ub, p);
        }
        AscendC::PipeBarrier<PIPE_ALL>();
        AscendC::DataCopy(g, ub, bytes);
        AscendC::PipeBarrier<PIPE_ALL>();
    });
    driver::Output(argv[2]).write(gm, bytes);
    return ascend_exec::report(stdout);
}
