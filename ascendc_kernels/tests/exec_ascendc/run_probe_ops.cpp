// Test-only driver: one stand-in operation on given inputs, so that tests/ascendc_kernels/
// test_exec_arithmetic.py can check each SGEMM_CUBE_EXEC_ARITHMETIC choice and each documented rule
// of kernel_operator.h / exec_state.h against values computed independently in Python.  Not the
// bring-up's probes (ascendc_kernels/probes.py runs the real kernels); nothing else uses this file.
//
// Build like run_kernels.cpp (one binary per chip, -I ascendc_kernels/tests/exec_ascendc
// -I ascendc_kernels/include).  Usage: run_probe_ops OP IN OUT; IN starts with little-endian int64
// parameters, then the data:
//   cast_f32_f16  mode (AscendC::RoundMode as int), count (multiple of 16), ub_off (bytes); count
//                 float32 -> OUT: count FP16 bit patterns.  GM -> UB, Cast, UB -> GM.
//   cast_f16_f32  count (multiple of 16); count FP16 bit patterns -> OUT: count float32.
//   mmad          m, n (multiple of 16), k, reps, barrier, l0a_off, l0b_off, l0c_off (bytes); A (m x k FP16 bits,
//                 row-major), B (k x n FP16 bits, row-major), C0 (m x n float32) -> OUT: C0 + reps * (A B)
//                 (m x n float32).  A goes to L0A in Zz, B to L0B in Zn (GM -> L1 -> L0 without transposes:
//                 the driver lays them out), `reps` Mmads into one L0C accumulator (the first starts from
//                 zero), PipeBarrier<PIPE_M> after each when `barrier`; then C is added atomically into GM
//                 holding C0: 910B by Fixpipe (NZ2ND), 910A by the L0C -> UB block copy and UB -> GM.
//   atomic        count (multiple of 8), ub_off (bytes); dst (count float32), src (count float32) ->
//                 OUT: dst + src, src going GM -> UB (at ub_off) -> GM with the atomic add on.
// Stages are ordered by PipeBarrier<PIPE_ALL> (no overlap to model).  stdout: the checker's report
// (with its ARITHMETIC line); exit status as run_kernels: 0 clean, 1 checker errors, 2 fatal, 64 bad input.
#include "kernel_operator.h"

#include "driver_io.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

using AscendC::LocalTensor;

driver::Input* g_input = nullptr;  // main's input: each operation takes its parameters and data from it

int64_t param() { return g_input->param(); }

/// A registered, 512-byte aligned GM buffer holding the next `bytes` bytes of the input (or zeros).
uint8_t* gm(size_t bytes, bool from_input)
{
    uint8_t* p = driver::gm_buffer(bytes);
    if (from_input) {
        g_input->take(p, bytes, "probe: short input data");
    }
    return p;
}

template <typename T>
AscendC::GlobalTensor<T> global(uint8_t* p)
{
    AscendC::GlobalTensor<T> g;
    g.SetGlobalBuffer(reinterpret_cast<T*>(p));
    return g;
}

void all() { AscendC::PipeBarrier<PIPE_ALL>(); }

void cast_f32_f16(std::vector<uint8_t>& out)
{
    const auto mode = AscendC::RoundMode(param());
    const uint32_t count = uint32_t(param()), ub_off = uint32_t(param());
    uint8_t* src = gm(size_t(count) * 4, true);
    uint8_t* dst = gm(size_t(count) * 2, false);
    ascend_exec::launch("cast_f32_f16", 1, [&] {
        AscendC::TPipe pipe;
        AscendC::TBuf<AscendC::TPosition::VECCALC> ub;
        pipe.InitBuffer(ub, count * 6 + ub_off);
        const LocalTensor<uint8_t> base = ub.Get<uint8_t>();
        const LocalTensor<float> x = base[ub_off].ReinterpretCast<float>();
        const LocalTensor<half> h = base[ub_off + count * 4].ReinterpretCast<half>();
        AscendC::DataCopy(x, global<float>(src), count);
        all();
        AscendC::Cast(h, x, mode, count);
        all();
        AscendC::DataCopy(global<half>(dst), h, count);
        all();
    });
    out.assign(dst, dst + size_t(count) * 2);
}

void cast_f16_f32(std::vector<uint8_t>& out)
{
    const uint32_t count = uint32_t(param());
    uint8_t* src = gm(size_t(count) * 2, true);
    uint8_t* dst = gm(size_t(count) * 4, false);
    ascend_exec::launch("cast_f16_f32", 1, [&] {
        AscendC::TPipe pipe;
        AscendC::TBuf<AscendC::TPosition::VECCALC> ub;
        pipe.InitBuffer(ub, count * 6);
        const LocalTensor<uint8_t> base = ub.Get<uint8_t>();
        const LocalTensor<half> h = base.ReinterpretCast<half>();
        const LocalTensor<float> x = base[count * 2].ReinterpretCast<float>();
        AscendC::DataCopy(h, global<half>(src), count);
        all();
        AscendC::Cast(x, h, AscendC::RoundMode::CAST_NONE, count);
        all();
        AscendC::DataCopy(global<float>(dst), x, count);
        all();
    });
    out.assign(dst, dst + size_t(count) * 4);
}

void mmad(std::vector<uint8_t>& out)
{
    const uint32_t m = uint32_t(param()), n = uint32_t(param()), k = uint32_t(param());
    const uint32_t reps = uint32_t(param());
    const bool barrier = param() != 0;
    const uint32_t l0a_off = uint32_t(param()), l0b_off = uint32_t(param()), l0c_off = uint32_t(param());
    if (m == 0 || n == 0 || k == 0 || n % 16 != 0) {
        ascend_exec::fatal("probe mmad: m, k >= 1, n a positive multiple of 16");
    }
    const uint32_t m1 = (m + 15) / 16, n1 = n / 16, k1 = (k + 15) / 16;
    std::vector<uint16_t> a(size_t(m) * k), b(size_t(k) * n);
    std::vector<float> c0(size_t(m) * n);
    g_input->take(a.data(), a.size() * 2, "probe: short input data");
    g_input->take(b.data(), b.size() * 2, "probe: short input data");
    g_input->take(c0.data(), c0.size() * 4, "probe: short input data");
    // Zz (A) and Zn (B) layouts of the zero-padded operands, as LoadData 2D leaves them in L0 (kernel_operator.h).
    uint16_t* az = reinterpret_cast<uint16_t*>(gm(size_t(m1) * k1 * 512, false));
    uint16_t* bz = reinterpret_cast<uint16_t*>(gm(size_t(k1) * n1 * 512, false));
    for (uint32_t i = 0; i < m; ++i) {
        for (uint32_t kk = 0; kk < k; ++kk) {
            az[((i / 16) * k1 + kk / 16) * 256 + (i % 16) * 16 + kk % 16] = a[size_t(i) * k + kk];
        }
    }
    for (uint32_t kk = 0; kk < k; ++kk) {
        for (uint32_t j = 0; j < n; ++j) {
            bz[((kk / 16) * n1 + j / 16) * 256 + (j % 16) * 16 + kk % 16] = b[size_t(kk) * n + j];
        }
    }
    const uint32_t a_elems = m1 * k1 * 256, b_elems = k1 * n1 * 256, c_elems = m1 * n1 * 256;
#if __NPU_ARCH__ == 1001
    // C goes out in Nz order (L0C -> UB -> GM): C0 in that order too.
    float* cg = reinterpret_cast<float*>(gm(size_t(c_elems) * 4, false));
    auto nz = [&](uint32_t i, uint32_t j) { return size_t((j / 16) * m1 + i / 16) * 256 + (i % 16) * 16 + j % 16; };
#else
    float* cg = reinterpret_cast<float*>(gm(size_t(m) * n * 4, false));
    auto nz = [&](uint32_t i, uint32_t j) { return size_t(i) * n + j; };
#endif
    for (uint32_t i = 0; i < m; ++i) {
        for (uint32_t j = 0; j < n; ++j) {
            cg[nz(i, j)] = c0[size_t(i) * n + j];
        }
    }
    ascend_exec::launch("mmad", 1, [&] {
        AscendC::TPipe pipe;
        AscendC::TBuf<AscendC::TPosition::A1> l1;
        AscendC::TBuf<AscendC::TPosition::A2> l0a;
        AscendC::TBuf<AscendC::TPosition::B2> l0b;
        AscendC::TBuf<AscendC::TPosition::CO1> l0c;
        pipe.InitBuffer(l1, (a_elems + b_elems) * 2);
        pipe.InitBuffer(l0a, a_elems * 2 + l0a_off);
        pipe.InitBuffer(l0b, b_elems * 2 + l0b_off);
        pipe.InitBuffer(l0c, c_elems * 4 + l0c_off);
        const LocalTensor<half> la = l1.Get<half>(), lb = la[a_elems];
        const LocalTensor<half> xa = l0a.Get<uint8_t>()[l0a_off].ReinterpretCast<half>();
        const LocalTensor<half> xb = l0b.Get<uint8_t>()[l0b_off].ReinterpretCast<half>();
        const LocalTensor<float> xc = l0c.Get<uint8_t>()[l0c_off].ReinterpretCast<float>();
        AscendC::DataCopy(la, global<half>(reinterpret_cast<uint8_t*>(az)), a_elems);
        AscendC::DataCopy(lb, global<half>(reinterpret_cast<uint8_t*>(bz)), b_elems);
        all();
        AscendC::LoadData2DParams lp;
        lp.repeatTimes = uint8_t(m1 * k1);
        lp.srcStride = 1;
        AscendC::LoadData(xa, la, lp);
        lp.repeatTimes = uint8_t(k1 * n1);
        AscendC::LoadData(xb, lb, lp);
        all();
        for (uint32_t r = 0; r < reps; ++r) {
            AscendC::MmadParams p;
            p.m = uint16_t(m);
            p.n = uint16_t(n);
            p.k = uint16_t(k);
            p.cmatrixInitVal = r == 0;
            p.isBias = r != 0;
            AscendC::Mmad(xc, xa, xb, p);
            if (barrier) {
                AscendC::PipeBarrier<PIPE_M>();
            }
        }
        all();
        AscendC::SetAtomicAdd<float>();
#if __NPU_ARCH__ == 1001
        AscendC::TBuf<AscendC::TPosition::VECCALC> ub;
        pipe.InitBuffer(ub, c_elems * 4);
        const LocalTensor<float> u = ub.Get<float>();
        AscendC::DataCopyEnhancedParams e;
        e.blockMode = AscendC::BlockMode::BLOCK_MODE_MATRIX;
        AscendC::DataCopy(u, xc, AscendC::DataCopyParams(1, uint16_t(m1 * n1), 0, 0), e);
        all();
        AscendC::DataCopy(global<float>(reinterpret_cast<uint8_t*>(cg)), u, c_elems);
#else
        AscendC::FixpipeParamsV220 f;
        f.nSize = uint16_t(n);
        f.mSize = uint16_t(m);
        f.srcStride = uint16_t(m1 * 16);
        f.dstStride = n;
        f.ndNum = 1;
        AscendC::Fixpipe<float, float, AscendC::CFG_ROW_MAJOR>(global<float>(reinterpret_cast<uint8_t*>(cg)), xc, f);
#endif
        all();
        AscendC::SetAtomicNone();
    });
    std::vector<float> c(size_t(m) * n);
    for (uint32_t i = 0; i < m; ++i) {
        for (uint32_t j = 0; j < n; ++j) {
            c[size_t(i) * n + j] = cg[nz(i, j)];
        }
    }
    out.resize(c.size() * 4);
    std::memcpy(out.data(), c.data(), out.size());
}

void atomic(std::vector<uint8_t>& out)
{
    const uint32_t count = uint32_t(param()), ub_off = uint32_t(param());
    uint8_t* dst = gm(size_t(count) * 4, true);
    uint8_t* src = gm(size_t(count) * 4, true);
    ascend_exec::launch("atomic", 1, [&] {
        AscendC::TPipe pipe;
        AscendC::TBuf<AscendC::TPosition::VECCALC> ub;
        pipe.InitBuffer(ub, count * 4 + ub_off);
        const LocalTensor<float> u = ub.Get<uint8_t>()[ub_off].ReinterpretCast<float>();
        AscendC::DataCopy(u, global<float>(src), count);
        all();
        AscendC::SetAtomicAdd<float>();
        AscendC::DataCopy(global<float>(dst), u, count);
        all();
        AscendC::SetAtomicNone();
    });
    out.assign(dst, dst + size_t(count) * 4);
}

}  // namespace

int main(int argc, char** argv)
{
    driver::expect_args(argc, argv, 3, "cast_f32_f16|cast_f16_f32|mmad|atomic IN OUT");
    driver::Input in(argv[2]);
    g_input = &in;
    const std::string op = argv[1];
    std::vector<uint8_t> out;
    if (op == "cast_f32_f16") {
        cast_f32_f16(out);
    } else if (op == "cast_f16_f32") {
        cast_f16_f32(out);
    } else if (op == "mmad") {
        mmad(out);
    } else if (op == "atomic") {
        atomic(out);
    } else {
        std::fprintf(stderr, "unknown op %s\n", op.c_str());
        return driver::kBadInput;
    }
    driver::Output(argv[3]).write(out.data(), out.size());
    return ascend_exec::report(stdout);
}
