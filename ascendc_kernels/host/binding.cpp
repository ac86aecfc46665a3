// pybind11 module `sgemm_cube.backends._npu_ext`: torch_npu tensors in, the
// three SGEMM-cube kernels launched on the current NPU stream.
//
//   matmul(a, b, out, sb, keep_lo_lo, bm, bk, bn, n_fused, per_term=False, guard=False, scale=1,
//          fixup=True, alpha=1.0, subnormals=1) -> None
//       guard: the accuracy guarantee's bookkeeping on the device too (line statistics and integers,
//       scaled splits, unscaling with alpha, fix-up lines in FP32: cpu_fallback/guard.py's rules).  The
//       unscale runs in the combine kernel (or, where the 910A's GEMM epilogue combined, as its own
//       pass); a word per batch set by the meta kernel lets the later kernels skip batches with no
//       scaled (listed) line, with no host read-back.
//       subnormals (guard::Subnormals): the split range the lines are classified by; 1 (default) the
//       one that holds whether or not the chip flushes FP16 subnormals, 0 the wider one for a chip
//       recorded to keep them (sgemm_cube/backends/npu.py's arithmetic()).
//       a (B, M, K), b (B, K, N), out (B, M, N): float32, contiguous, same NPU.
//       Every launch goes through torch_npu's task queue (OpCommand::RunOpApiV2)
//       so it is ordered with the framework's own operators on that stream.
//   matmul_fp32(a, b, out, alpha=1.0) -> None
//       out = alpha * (a @ b) in plain FP32 on the vector units (the fix-up kernel over every row:
//       recursive summation in K order, IEEE NaN/Inf): the FP32 product where no FP32 cube path is
//       trusted (the 910A has none; torch's matmul follows CANN's precision mode).
//   split(x, hi, lo, sb) -> None
//       The split kernel alone (no line scaling; NaN/Inf as +0): hi = fp16(x), lo = fp16((x - hi) 2^sb)
//       as the chip's Cast rounds them, in the 16x16 Zz fractal layout the GEMM loads.  x (B, R, C)
//       float32, hi and lo (B, R, C) float16, R and C multiples of 16, all contiguous on one NPU.  For the
//       bring-up's probes of the conversion (ascendc_kernels/probes.py); the products never call it.
//   soc() -> str              SoC family the device code was built for
//   device_soc(device) -> str SoC name the runtime reports (aclrtGetSocName)
//
// Validation of values (ranges, NaN/Inf patching, the tiling choice) is the
// Python side's job (sgemm_cube/backends/npu.py); this file checks only what
// would make a launch unsafe.
#include <pybind11/pybind11.h>
#include <torch/extension.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "acl/acl.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/framework/OpCommand.h"

#include "launch.h"
#include "sgemm_cube/guard/line_meta.hpp"
#include "launch_plan.hpp"
#include "soc_name.hpp"

namespace sgemm_cube {
namespace host {
namespace {

bool built_for_910a() { return std::strcmp(built_soc(), "910a") == 0; }

/// The split's bound when the operands come scaled already: only NaN and infinities become +0.
constexpr uint32_t kNonFiniteBits = 0x7F800000u;

arch::Capacity built_capacity()
{
    return built_for_910a() ? arch::capacity<arch::Ascend910A>() : arch::capacity<arch::Ascend910B>();
}

struct Cores {
    uint32_t cube;
    uint32_t vector;
};

/// Cube and vector core counts of a device.  On 910A the vector units are
/// inside the AI cores, so both counts are the AI cores.
Cores device_cores(int32_t device)
{
    int64_t aic = 0;
    if (aclGetDeviceCapability(uint32_t(device), ACL_DEVICE_INFO_AI_CORE_NUM, &aic) != ACL_SUCCESS || aic <= 0) {
        aic = built_for_910a() ? arch::Ascend910A::kAiCores : arch::Ascend910B::kAiCores;
    }
    if (built_for_910a()) {
        return Cores{uint32_t(aic), uint32_t(aic)};
    }
    int64_t aiv = 0;
    if (aclGetDeviceCapability(uint32_t(device), ACL_DEVICE_INFO_VECTOR_CORE_NUM, &aiv) != ACL_SUCCESS || aiv <= 0) {
        aiv = 2 * aic;  // Atlas A2: two vector cores per cube core
    }
    return Cores{uint32_t(aic), uint32_t(aiv)};
}

void check_operand(const at::Tensor& t, const char* name, const at::Device& device)
{
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "sgemm_cube NPU kernel: ", name,
                " must be an NPU tensor, got ", t.device());
    TORCH_CHECK(t.device() == device, "sgemm_cube NPU kernel: ", name, " is on ", t.device(), ", a on ", device);
    TORCH_CHECK(t.scalar_type() == at::kFloat, "sgemm_cube NPU kernel: ", name, " must be float32, got ",
                t.scalar_type());
    TORCH_CHECK(t.dim() == 3, "sgemm_cube NPU kernel: ", name, " must be 3-D (batch, rows, cols), got ", t.dim(),
                "-D");
    TORCH_CHECK(t.is_contiguous(), "sgemm_cube NPU kernel: ", name, " must be contiguous");
}

/// The operands of out = a @ b (3-D, contiguous float32 on one NPU, shapes that multiply): (batch, m, k, n).
std::array<int64_t, 4> check_product(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out)
{
    const at::Device device = a.device();
    check_operand(a, "a", device);
    check_operand(b, "b", device);
    check_operand(out, "out", device);
    const int64_t batch = a.size(0), m = a.size(1), k = a.size(2), n = b.size(2);
    TORCH_CHECK(b.size(0) == batch && b.size(1) == k, "sgemm_cube NPU kernel: shapes ", a.sizes(), " and ",
                b.sizes(), " do not multiply");
    TORCH_CHECK(out.size(0) == batch && out.size(1) == m && out.size(2) == n, "sgemm_cube NPU kernel: out has shape ",
                out.sizes(), ", expected (", batch, ", ", m, ", ", n, ")");
    return {batch, m, k, n};
}

/// alpha as the kernels take it: alpha = mant * 2^exp with 1 <= |mant| < 2 (both 0 for alpha = 0), in float32.
struct AlphaParts {
    float mant;
    int32_t exp;
};

AlphaParts split_alpha(double alpha)
{
    int e = 0;
    const float alpha32 = float(alpha);
    const float m = std::frexp(alpha32, &e);
    return alpha32 == 0.0f ? AlphaParts{0.0f, 0} : AlphaParts{2.0f * m, e - 1};
}

uint32_t checked_u32(int64_t v, const char* what)
{
    TORCH_CHECK(v >= 0 && v <= int64_t(0xFFFF0000u), "sgemm_cube NPU kernel: ", what, " = ", v, " out of range");
    return uint32_t(v);
}

void enqueue(const char* name, const std::function<int()>& launch)
{
    at_npu::native::OpCommand::RunOpApiV2(name, launch);
}

std::string device_soc(int64_t device)
{
    (void)device;  // the runtime reports the SoC of the current device's chip
    const char* name = aclrtGetSocName();
    return name == nullptr ? std::string() : std::string(name);
}

void matmul(const at::Tensor& a, const at::Tensor& b, at::Tensor& out, int64_t sb, bool keep_lo_lo, int64_t bm,
            int64_t bk, int64_t bn, int64_t n_fused, bool per_term, bool guard, int64_t scale, bool fixup,
            double alpha, int64_t subnormals)
{
    const at::Device device = a.device();
    const std::array<int64_t, 4> dims = check_product(a, b, out);  // (batch, m, k, n)
    const int64_t batch = dims[0], m = dims[1], k = dims[2], n = dims[3];
    TORCH_CHECK(sb >= 0 && sb <= 24, "sgemm_cube NPU kernel: sb must be in [0, 24], got ", sb);
    TORCH_CHECK(subnormals == 0 || subnormals == 1, "sgemm_cube NPU kernel: subnormals must be 0 (gradual) or 1 "
                "(flush), got ", subnormals);
    const std::string family = soc_family(device_soc(device.index()).c_str());
    TORCH_CHECK(family == built_soc(), "sgemm_cube NPU kernel was built for Ascend ", built_soc(),
                " but this device is ", device_soc(device.index()), "; rebuild with the matching SOC_VERSION");
    if (batch == 0 || m == 0 || n == 0) {
        return;
    }
    if (k == 0) {
        out.zero_();
        return;
    }

    const Cores cores = device_cores(int32_t(device.index()));
    LaunchPlan plan{};
    const schedule::Tiling tiling{checked_u32(bm, "bm"), checked_u32(bk, "bk"), checked_u32(bn, "bn"),
                                  checked_u32(n_fused, "n_fused"), per_term ? 1u : 0u};
    const schedule::Status status =
        make_launch_plan(built_capacity(), checked_u32(batch, "batch"), checked_u32(m, "m"), checked_u32(n, "n"),
                         checked_u32(k, "k"), tiling, cores.cube, cores.vector, keep_lo_lo, &plan);
    TORCH_CHECK(status == schedule::Status::kOk, "sgemm_cube NPU kernel cannot run tiling (", bm, ", ", bk, ", ", bn,
                ", ", n_fused, "): ", schedule::status_message(status));
    const schedule::Geometry& g = plan.geometry;

    // Zero padding to multiples of 16: zero rows and columns add exact zero products.
    const at::Tensor a_src =
        plan.padded_a ? at::constant_pad_nd(a, {0, int64_t(g.kp) - k, 0, int64_t(g.mp) - m}, 0).contiguous() : a;
    const at::Tensor b_src =
        plan.padded_b ? at::constant_pad_nd(b, {0, int64_t(g.np) - n, 0, int64_t(g.kp) - k}, 0).contiguous() : b;
    const at::TensorOptions half_opts = a.options().dtype(at::kHalf);
    const at::Tensor a_parts = at::empty({2, int64_t(plan.a_part_elems)}, half_opts);  // [hi, lo]
    const at::Tensor b_parts = at::empty({2, int64_t(plan.b_part_elems)}, half_opts);
    // The HH term accumulates straight into `out` when no padding is needed;
    // the combine kernel (or the GEMM's epilogue) then overwrites it with C.
    const bool direct = !plan.padded_c;
    const int64_t extra_terms = int64_t(plan.term_buffers) - (direct ? 1 : 0);
    const at::Tensor terms = at::empty({extra_terms, int64_t(plan.term_elems)}, a.options());
    void* term_ptr[schedule::kMaxTerms] = {nullptr, nullptr, nullptr, nullptr};
    for (uint32_t t = 0; t < plan.term_buffers; ++t) {
        term_ptr[t] = (direct && t == 0) ? out.data_ptr() : terms[int64_t(t) - (direct ? 1 : 0)].data_ptr();
    }
    void* a_hi = a_parts[0].data_ptr();
    void* a_lo = a_parts[1].data_ptr();
    void* b_hi = b_parts[0].data_ptr();
    void* b_lo = b_parts[1].data_ptr();
    const float scale_sb = std::ldexp(1.0f, int(sb));
    const float inv_scale = std::ldexp(1.0f, -int(sb));
    const aclrtStream stream = c10_npu::getCurrentNPUStream().stream(false);
    // The guarantee's integers (guard): statistics and packed integers of A's rows and B's columns.
    const at::TensorOptions int_opts = a.options().dtype(at::kInt);
    const int64_t lines_a = int64_t(g.batch) * g.mp, lines_b = int64_t(g.batch) * g.np;
    const at::Tensor stats = at::empty({guard ? 3 * (lines_a + lines_b) : 0}, int_opts);
    const at::Tensor meta = at::empty({guard ? lines_a + lines_b : 0}, int_opts);
    // The batches' words (kernel/batch_flags.hpp): zeroed here, on the stream; the meta kernel adds to them.
    const at::Tensor flags = at::zeros({guard ? int64_t(g.batch) * schedule::kFlagWords : 0}, a.options());
    int32_t* const st = guard ? stats.data_ptr<int32_t>() : nullptr;
    int32_t* const meta_a = guard ? meta.data_ptr<int32_t>() : nullptr;
    int32_t* const meta_b = guard ? meta_a + lines_a : nullptr;
    float* const flags_p = guard ? flags.data_ptr<float>() : nullptr;
    uint32_t keep_below = kNonFiniteBits;
    if (guard) {
        const float max_abs = std::fmin(65520.0f, std::ldexp(1.0f, 27 - int(sb)));  // split_limits(sb).max_abs
        std::memcpy(&keep_below, &max_abs, sizeof keep_below);
        const schedule::LineStatsGeometry sa = schedule::make_line_stats_geometry(g.batch, g.mp, g.kp, true,
                                                                                  cores.vector);
        const schedule::LineStatsGeometry sb_ = schedule::make_line_stats_geometry(g.batch, g.kp, g.np, false,
                                                                                   cores.vector);
        int32_t* const sta = st;
        int32_t* const stb = st + 3 * lines_a;
        auto meta_cores = [&](int64_t lines) {
            return schedule::min_u32(cores.vector, uint32_t((lines + schedule::kMetaChunk - 1) / schedule::kMetaChunk));
        };
        const uint32_t scale_code = uint32_t(scale), fix = fixup ? 1u : 0u, sbu = uint32_t(sb);
        const uint32_t sub = uint32_t(subnormals);
        enqueue("SgemmCubeLineStatsA", [=]() -> int {
            (void)stats;
            return int(launch_line_stats(sa.cores, stream, a_src.data_ptr(), sta, sta + lines_a, sta + 2 * lines_a,
                                         g.batch, g.mp, g.kp, 1u, cores.vector));
        });
        enqueue("SgemmCubeLineStatsB", [=]() -> int {
            return int(launch_line_stats(sb_.cores, stream, b_src.data_ptr(), stb, stb + lines_b, stb + 2 * lines_b,
                                         g.batch, g.kp, g.np, 0u, cores.vector));
        });
        enqueue("SgemmCubeLineMeta", [=]() -> int {
            (void)meta;
            (void)flags;
            const int ra = int(launch_line_meta(meta_cores(lines_a), stream, sta, sta + lines_a, sta + 2 * lines_a,
                                                meta_a, flags_p, g.batch, g.mp, sbu, scale_code, fix, cores.vector,
                                                sub));
            return ra != 0 ? ra
                           : int(launch_line_meta(meta_cores(lines_b), stream, stb, stb + lines_b, stb + 2 * lines_b,
                                                  meta_b, flags_p, g.batch, g.np, sbu, scale_code, fix, cores.vector,
                                                  sub));
        });
    }
    // Each lambda holds the tensors it touches, so they live until it ran.
    enqueue("SgemmCubeSplitA", [=]() -> int {
        return int(launch_split(plan.split_a.cores, stream, a_src.data_ptr(), a_hi, a_lo, meta_a, flags_p, g.batch, g.mp,
                                g.kp, cores.vector, scale_sb, guard ? 1u : 0u, keep_below));
    });
    enqueue("SgemmCubeSplitB", [=]() -> int {
        return int(launch_split(plan.split_b.cores, stream, b_src.data_ptr(), b_hi, b_lo, meta_b, flags_p, g.batch, g.kp,
                                g.np, cores.vector, scale_sb, guard ? 2u : 0u, keep_below));
    });
    enqueue("SgemmCubeGemm", [=]() -> int {
        (void)a_parts;
        (void)b_parts;
        (void)terms;
        return int(launch_gemm(plan.gemm_blocks, stream, a_hi, a_lo, b_hi, b_lo, term_ptr[0], term_ptr[1],
                               term_ptr[2], term_ptr[3], g.batch, g.m, g.n, g.k, g.bm, g.bk, g.bn, g.n_fused,
                               tiling.per_term, cores.cube, plan.terms, inv_scale));
    });
    const AlphaParts alpha_parts = split_alpha(alpha);
    const float alpha_mant = alpha_parts.mant;
    const int32_t alpha_exp = alpha_parts.exp;
    const schedule::UnscaleGeometry ug = schedule::make_unscale_geometry(g.batch, g.mp, g.np, cores.vector);
    if (plan.launch_combine) {  // with guard, the unscale folded in (the unscale's units and cores)
        enqueue("SgemmCubeCombine", [=]() -> int {
            (void)terms;
            (void)meta;
            (void)flags;
            return int(launch_combine(guard ? ug.cores : plan.combine.cores, stream, term_ptr[0], term_ptr[1],
                                      term_ptr[2], term_ptr[3], term_ptr[0], plan.term_elems, cores.vector,
                                      keep_lo_lo ? 1u : 0u, inv_scale, meta_a, meta_b, flags_p, g.batch, g.mp, g.np,
                                      alpha_mant, alpha_exp));
        });
    }
    if (guard) {  // the unscaling with alpha where the GEMM's epilogue combined, then the fix-up lines in FP32
        const uint32_t fixup_min_class = fixup ? 1u : 2u, k32 = g.k;
        const uint32_t row_cores = schedule::min_u32(cores.vector, g.batch * g.mp);
        const uint32_t col_cores =
            schedule::min_u32(cores.vector, g.batch * schedule::ceil_div(g.mp, schedule::kFixupColRows));
        if (!plan.launch_combine) {
            enqueue("SgemmCubeUnscale", [=]() -> int {
                (void)meta;
                (void)terms;
                (void)flags;
                return int(launch_unscale(ug.cores, stream, term_ptr[0], meta_a, meta_b, flags_p, g.batch, g.mp, g.np,
                                          cores.vector, alpha_mant, alpha_exp));
            });
        }
        enqueue("SgemmCubeFixup", [=]() -> int {
            (void)flags;
            const int rr = int(launch_fixup_rows(row_cores, stream, a_src.data_ptr(), b_src.data_ptr(), meta_a, meta_b,
                                                 term_ptr[0], flags_p, g.batch, g.mp, g.np, g.kp, k32, fixup_min_class,
                                                 cores.vector, alpha_mant, alpha_exp));
            return rr != 0 ? rr
                           : int(launch_fixup_cols(col_cores, stream, a_src.data_ptr(), b_src.data_ptr(), meta_a,
                                                   meta_b, term_ptr[0], flags_p, g.batch, g.mp, g.np, g.kp, k32,
                                                   fixup_min_class, cores.vector, alpha_mant, alpha_exp));
        });
    }
    if (!direct) {
        const at::Tensor c = terms[0].view({batch, int64_t(g.mp), int64_t(g.np)});
        out.copy_(c.narrow(1, 0, m).narrow(2, 0, n));
    }
}

void matmul_fp32(const at::Tensor& a, const at::Tensor& b, at::Tensor& out, double alpha)
{
    const at::Device device = a.device();
    const std::array<int64_t, 4> dims = check_product(a, b, out);  // (batch, m, k, n)
    const int64_t batch = dims[0], m = dims[1], k = dims[2], n = dims[3];
    if (batch == 0 || m == 0 || n == 0) {
        return;
    }
    if (k == 0) {
        out.zero_();
        return;
    }
    const Cores cores = device_cores(int32_t(device.index()));
    // The fix-up kernel's layout: rows padded to whole 16-element groups, as the emulation's launch pads them.
    const uint32_t b32 = checked_u32(batch, "batch"), k32 = checked_u32(k, "k");
    const uint32_t mp = schedule::round_up(checked_u32(m, "m"), schedule::kCube);
    const uint32_t np = schedule::round_up(checked_u32(n, "n"), schedule::kCube);
    const uint32_t kp = schedule::round_up(k32, schedule::kCube);
    const at::Tensor a_src = (mp != m || kp != k) ? at::constant_pad_nd(a, {0, kp - k, 0, mp - m}, 0).contiguous() : a;
    const at::Tensor b_src = (kp != k || np != n) ? at::constant_pad_nd(b, {0, np - n, 0, kp - k}, 0).contiguous() : b;
    const bool direct = mp == m && np == n;
    const at::Tensor c = direct ? out : at::empty({batch, int64_t(mp), int64_t(np)}, a.options());
    // Every line's integers "class 0, t = 0" (guard::pack): every row listed from class 0, nothing scaled.
    const at::Tensor meta =
        at::full({int64_t(b32) * (mp + np)}, guard::pack(guard::LineMeta{0, 0}), a.options().dtype(at::kInt));
    const AlphaParts alpha_parts = split_alpha(alpha);
    const float alpha_mant = alpha_parts.mant;
    const int32_t alpha_exp = alpha_parts.exp;
    const uint32_t row_cores = schedule::min_u32(cores.vector, b32 * mp);
    const aclrtStream stream = c10_npu::getCurrentNPUStream().stream(false);
    enqueue("SgemmCubeFp32", [=]() -> int {
        int32_t* const meta_a = meta.data_ptr<int32_t>();
        return int(launch_fixup_rows(row_cores, stream, a_src.data_ptr(), b_src.data_ptr(), meta_a,
                                     meta_a + int64_t(b32) * mp, c.data_ptr(), /*flags=*/nullptr, b32, mp, np, kp, k32,
                                     /*fixup_min_class=*/0u, cores.vector, alpha_mant, alpha_exp));
    });
    if (!direct) {
        out.copy_(c.narrow(1, 0, m).narrow(2, 0, n));
    }
}

void split(const at::Tensor& x, at::Tensor& hi, at::Tensor& lo, int64_t sb)
{
    const at::Device device = x.device();
    check_operand(x, "x", device);
    for (const at::Tensor* part : {&hi, &lo}) {
        TORCH_CHECK(part->device() == device && part->scalar_type() == at::kHalf && part->is_contiguous() &&
                        part->sizes() == x.sizes(),
                    "sgemm_cube NPU split: hi and lo must be contiguous float16 tensors of x's shape on its device");
    }
    TORCH_CHECK(sb >= 0 && sb <= 24, "sgemm_cube NPU split: sb must be in [0, 24], got ", sb);
    const uint32_t batch = checked_u32(x.size(0), "batch"), rows = checked_u32(x.size(1), "rows"),
                   cols = checked_u32(x.size(2), "cols");
    TORCH_CHECK(rows % schedule::kCube == 0 && cols % schedule::kCube == 0,
                "sgemm_cube NPU split: rows and cols must be multiples of 16, got ", x.sizes());
    if (batch == 0 || rows == 0 || cols == 0) {
        return;
    }
    const Cores cores = device_cores(int32_t(device.index()));
    const uint32_t split_cores = schedule::make_split_geometry(batch, rows, cols, cores.vector).cores;
    const float scale_sb = std::ldexp(1.0f, int(sb));
    const aclrtStream stream = c10_npu::getCurrentNPUStream().stream(false);
    void* const hp = hi.data_ptr();
    void* const lp = lo.data_ptr();
    enqueue("SgemmCubeSplit", [=]() -> int {
        (void)hi;  // held until the launch ran
        (void)lo;
        return int(launch_split(split_cores, stream, x.data_ptr(), hp, lp, nullptr, nullptr, batch, rows, cols, cores.vector,
                                scale_sb, 0u, kNonFiniteBits));
    });
}

}  // namespace
}  // namespace host
}  // namespace sgemm_cube

PYBIND11_MODULE(_npu_ext, m)
{
    m.doc() = "SGEMM-cube AscendC kernels (split, cube GEMM, termwise combine) for torch_npu tensors";
    m.def("matmul", &sgemm_cube::host::matmul, pybind11::arg("a"), pybind11::arg("b"), pybind11::arg("out"),
          pybind11::arg("sb"), pybind11::arg("keep_lo_lo"), pybind11::arg("bm"), pybind11::arg("bk"),
          pybind11::arg("bn"), pybind11::arg("n_fused"), pybind11::arg("per_term") = false,
          pybind11::arg("guard") = false, pybind11::arg("scale") = 1, pybind11::arg("fixup") = true,
          pybind11::arg("alpha") = 1.0, pybind11::arg("subnormals") = 1,
          "out[b] = A[b] B[b] emulated in FP32 from FP16 cube products (all tensors float32, contiguous, on one NPU)");
    m.def("matmul_fp32", &sgemm_cube::host::matmul_fp32, pybind11::arg("a"), pybind11::arg("b"),
          pybind11::arg("out"), pybind11::arg("alpha") = 1.0,
          "out[b] = alpha * A[b] B[b] in plain FP32 on the vector units (recursive summation in K order)");
    m.def("split", &sgemm_cube::host::split, pybind11::arg("x"), pybind11::arg("hi"), pybind11::arg("lo"),
          pybind11::arg("sb"), "the split kernel alone: hi, lo = FP16 parts of x in the Zz fractal layout (probes)");
    m.def("soc", &sgemm_cube::host::built_soc, "SoC family the device code was built for ('910a' or '910b')");
    m.def("device_soc", &sgemm_cube::host::device_soc, pybind11::arg("device") = 0,
          "SoC name the ACL runtime reports, e.g. 'Ascend910B3'");
}
