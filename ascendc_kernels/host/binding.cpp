// pybind11 module `sgemm_cube.backends._npu_ext`: torch_npu tensors in, the
// three SGEMM-cube kernels launched on the current NPU stream.
//
//   MatmulOptions(*, sb, keep_lo_lo, bm, bk, bn, n_fused, per_term=False, guard=False, scale=1, fixup=True,
//                 alpha=1.0, subnormals=1, l0c_stages=1, bands=False, band_a=False, band_b=False)
//       matmul's options, keywords only, each a read-write attribute (npu.py's _matmul_options builds them;
//       npu.MatmulOptions mirrors the fields and defaults for the stand-in extensions).
//       sb: the residuals' scaling exponent, in [0, 24]; keep_lo_lo: the fourth product A_lo B_lo;
//       bm, bk, bn, n_fused, per_term, l0c_stages: the tiling (schedule::Tiling); scale (guard::Scale), fixup,
//       alpha: the guarantee's options, used with guard.  bands (with guard): the listed lines' exponent bands
//       (cpu_fallback/bands.py): the fix-up kernels take only the SPECIAL lines (class 2, NaN/Inf), the
//       outputs of the banded (LOSES_BITS) lines are left as the ordinary pass wrote them, for the host's
//       band passes (sgemm_cube/backends/npu_bands.py) to overwrite.  band_a, band_b: band_pass's sides.
//   matmul(a, b, out, options, lines=None) -> None
//       guard: the accuracy guarantee's bookkeeping on the device too (line statistics and integers,
//       scaled splits, unscaling with alpha, fix-up lines in FP32: cpu_fallback/guard.py's rules).  The
//       unscale runs in the combine kernel (or, where the 910A's GEMM epilogue combined, as its own
//       pass); a word per batch set by the meta kernel lets the later kernels skip batches with no
//       scaled (listed) line, with no host read-back.
//       subnormals (guard::Subnormals): the split range the lines are classified by; 1 (default) the
//       one that holds whether or not the chip flushes FP16 subnormals, 0 the wider one for a chip
//       recorded to keep them (sgemm_cube/backends/npu.py's arithmetic()).
//       a (B, M, K), b (B, K, N), out (B, M, N): float32, contiguous, same NPU.
//       lines (with guard): an int32 (4, B * (M + N)) contiguous tensor on that NPU; row 0 gets the packed
//       integers (guard.pack_meta) of A's rows (batch-major) then B's columns, rows 1-3 the line statistics
//       big, small_w, finite in the same order (guard/line_meta.hpp's encodings): device-to-device copies
//       after the meta kernel, no host synchronisation.
//       Every launch goes through torch_npu's task queue (OpCommand::RunOpApiV2)
//       so it is ordered with the framework's own operators on that stream.
//   band_pass(a, b, out, meta_a, meta_b, options) -> None
//       One pass of the band design: a (B, R, K), b (B, K, N) float32, unscaled; meta_a (B, R), meta_b
//       (B, N) int32 packed integers (guard.pack_meta; only t is read, in [-127, top + 150]); out (B, R, N).
//       Every line is scaled by its t in the split; a side flagged band_a / band_b keeps only its band
//       window [lower, 2^(top + 1)) (guard::split_cutoff: bands.band_values), the other the ordinary
//       bound (|x| < max_abs); then the GEMM in options' tiling and the combine with the unscale and
//       alpha: out = guard.unscale(product, ta, tb, alpha).  No line statistics, meta or fix-up.
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

/// What `matmul` computes, bound as `MatmulOptions` (keywords only; sgemm_cube/backends/npu.py builds it, and
/// its MatmulOptions mirrors these fields and defaults for the stand-ins).
struct MatmulOptions {
    int64_t sb;           // scaling exponent of the residuals, in [0, 24]
    bool keep_lo_lo;      // also the A_lo B_lo product (fp16x4)
    int64_t bm, bk, bn;   // the tiling (schedule::Tiling)
    int64_t n_fused;
    bool per_term = false;
    bool guard = false;   // the accuracy guarantee's bookkeeping on the device
    int64_t scale = 1;    // guard::Scale
    bool fixup = true;    // FP32 fix-up of the lines the split cannot hold
    double alpha = 1.0;   // out = alpha * (a @ b), with guard
    int64_t subnormals = 1;  // guard::Subnormals: the split range the lines are classified by
    int64_t l0c_stages = 1;  // accumulator sets in L0C, 1 or 2 (schedule::Tiling::l0c_stages)
    bool bands = false;   // with guard: banded (LOSES_BITS) lines left to the band passes, fix-up of SPECIAL only
    bool band_a = false;  // band_pass: A's lines are bands (the split's band cutoff)
    bool band_b = false;  // band_pass: B's columns are bands
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

/// (batch, m, k, n) of out = a @ b.
struct Dims {
    int64_t batch, m, k, n;
};

/// What may not launch: operands check_product refuses, sb or subnormals out of range, a device of
/// another SoC family than the build's.
Dims check_matmul(const at::Tensor& a, const at::Tensor& b, const at::Tensor& out, const MatmulOptions& options)
{
    const std::array<int64_t, 4> dims = check_product(a, b, out);
    TORCH_CHECK(options.sb >= 0 && options.sb <= 24, "sgemm_cube NPU kernel: sb must be in [0, 24], got ",
                options.sb);
    TORCH_CHECK(options.subnormals == 0 || options.subnormals == 1, "sgemm_cube NPU kernel: subnormals must be 0 "
                "(gradual) or 1 (flush), got ", options.subnormals);
    const int64_t device = a.device().index();
    TORCH_CHECK(soc_family(device_soc(device).c_str()) == built_soc(), "sgemm_cube NPU kernel was built for Ascend ",
                built_soc(), " but this device is ", device_soc(device), "; rebuild with the matching SOC_VERSION");
    return Dims{dims[0], dims[1], dims[2], dims[3]};
}

/// The launch plan of options' tiling for this product on these cores (raises where the tiling cannot run).
LaunchPlan plan_product(const Dims& d, const MatmulOptions& o, const Cores& cores)
{
    const schedule::Tiling tiling{checked_u32(o.bm, "bm"), checked_u32(o.bk, "bk"), checked_u32(o.bn, "bn"),
                                  checked_u32(o.n_fused, "n_fused"), o.per_term ? 1u : 0u,
                                  checked_u32(o.l0c_stages, "l0c_stages")};
    LaunchPlan plan{};
    const schedule::Status status =
        make_launch_plan(built_capacity(), checked_u32(d.batch, "batch"), checked_u32(d.m, "m"),
                         checked_u32(d.n, "n"), checked_u32(d.k, "k"), tiling, cores.cube, cores.vector,
                         o.keep_lo_lo, &plan);
    TORCH_CHECK(status == schedule::Status::kOk, "sgemm_cube NPU kernel cannot run tiling (", o.bm, ", ", o.bk,
                ", ", o.bn, ", ", o.n_fused, "): ", schedule::status_message(status));
    return plan;
}

/// One product's launches and what they share: the plan, the device, the operands as the kernels read them
/// and every buffer.  Each enqueued lambda holds a copy, so the tensors live until the launches ran.
struct Product {
    MatmulOptions options;
    LaunchPlan plan;
    Cores cores;
    aclrtStream stream;
    at::Tensor a_src, b_src;     // a and b zero-padded to multiples of 16 (zero products are exact zeros)
    at::Tensor a_parts, b_parts;  // [hi, lo] in FP16
    void* a_hi;
    void* a_lo;
    void* b_hi;
    void* b_lo;
    at::Tensor terms;             // the term buffers (the first is `out` itself where no padding is needed)
    void* term_ptr[schedule::kMaxTerms];
    bool direct;                  // the HH term (then C) accumulates straight into `out`
    // The guarantee's integers (guard): statistics and packed integers of A's rows and B's columns, and the
    // batches' words (kernel/batch_flags.hpp), zeroed on the stream; the meta kernel adds to them.
    at::Tensor stats, meta, flags;
    int64_t lines_a, lines_b;
    int32_t* meta_a;
    int32_t* meta_b;
    float* flags_p;
    float scale_sb, inv_scale;
    // What each split zeroes besides NaN/Inf (guard::split_cutoff): at or above keep_below, below keep_from.
    guard::SplitCutoff cut_a, cut_b;
    AlphaParts alpha;

    /// Whether the lines carry the guarantee's integers (scaled splits, the unscale): guard, or a band pass.
    bool scaled() const { return meta_a != nullptr; }
};

guard::LineRange line_range(const MatmulOptions& o)
{
    return guard::fp16_line_range(uint32_t(o.sb), guard::Subnormals(uint32_t(o.subnormals)));
}

/// The buffers of one product, allocated on a's device (nothing launched yet).
Product prepare_product(const at::Tensor& a, const at::Tensor& b, at::Tensor& out, const Dims& d,
                        const MatmulOptions& o)
{
    Product p{};
    p.options = o;
    p.cores = device_cores(int32_t(a.device().index()));
    p.plan = plan_product(d, o, p.cores);
    p.stream = c10_npu::getCurrentNPUStream().stream(false);
    const schedule::Geometry& g = p.plan.geometry;
    p.a_src = p.plan.padded_a
                  ? at::constant_pad_nd(a, {0, int64_t(g.kp) - d.k, 0, int64_t(g.mp) - d.m}, 0).contiguous()
                  : a;
    p.b_src = p.plan.padded_b
                  ? at::constant_pad_nd(b, {0, int64_t(g.np) - d.n, 0, int64_t(g.kp) - d.k}, 0).contiguous()
                  : b;
    const at::TensorOptions half_opts = a.options().dtype(at::kHalf);
    p.a_parts = at::empty({2, int64_t(p.plan.a_part_elems)}, half_opts);
    p.b_parts = at::empty({2, int64_t(p.plan.b_part_elems)}, half_opts);
    p.a_hi = p.a_parts[0].data_ptr();
    p.a_lo = p.a_parts[1].data_ptr();
    p.b_hi = p.b_parts[0].data_ptr();
    p.b_lo = p.b_parts[1].data_ptr();
    // The combine kernel (or the GEMM's epilogue) overwrites the HH term with C.
    p.direct = !p.plan.padded_c;
    const int64_t in_out = p.direct ? 1 : 0;
    p.terms = at::empty({int64_t(p.plan.term_buffers) - in_out, int64_t(p.plan.term_elems)}, a.options());
    for (uint32_t t = 0; t < p.plan.term_buffers; ++t) {  // the rest stay nullptr
        p.term_ptr[t] = (p.direct && t == 0) ? out.data_ptr() : p.terms[int64_t(t) - in_out].data_ptr();
    }
    const at::TensorOptions int_opts = a.options().dtype(at::kInt);
    p.lines_a = int64_t(g.batch) * g.mp;
    p.lines_b = int64_t(g.batch) * g.np;
    p.stats = at::empty({o.guard ? 3 * (p.lines_a + p.lines_b) : 0}, int_opts);
    p.meta = at::empty({o.guard ? p.lines_a + p.lines_b : 0}, int_opts);
    p.flags = at::zeros({o.guard ? int64_t(g.batch) * schedule::kFlagWords : 0}, a.options());
    p.meta_a = o.guard ? p.meta.data_ptr<int32_t>() : nullptr;
    p.meta_b = o.guard ? p.meta_a + p.lines_a : nullptr;
    p.flags_p = o.guard ? p.flags.data_ptr<float>() : nullptr;
    p.scale_sb = std::ldexp(1.0f, int(o.sb));
    p.inv_scale = std::ldexp(1.0f, -int(o.sb));
    p.cut_a = p.cut_b = o.guard ? guard::split_cutoff(line_range(o), false) : guard::SplitCutoff{kNonFiniteBits, 0u};
    p.alpha = split_alpha(o.alpha);
    return p;
}

/// guard: the line statistics of A's rows and B's columns, then their packed integers and the batch words.
void enqueue_line_meta(const Product& p)
{
    const schedule::Geometry& g = p.plan.geometry;
    const uint32_t vector = p.cores.vector;
    const uint32_t a_cores = schedule::make_line_stats_geometry(g.batch, g.mp, g.kp, true, vector).cores;
    const uint32_t b_cores = schedule::make_line_stats_geometry(g.batch, g.kp, g.np, false, vector).cores;
    int32_t* const sta = p.stats.data_ptr<int32_t>();
    int32_t* const stb = sta + 3 * p.lines_a;
    const int64_t la = p.lines_a, lb = p.lines_b;
    enqueue("SgemmCubeLineStatsA", [p, a_cores, sta, la]() -> int {
        const schedule::Geometry& g = p.plan.geometry;
        return int(launch_line_stats(a_cores, p.stream, p.a_src.data_ptr(), sta, sta + la, sta + 2 * la, g.batch,
                                     g.mp, g.kp, 1u, p.cores.vector));
    });
    enqueue("SgemmCubeLineStatsB", [p, b_cores, stb, lb]() -> int {
        const schedule::Geometry& g = p.plan.geometry;
        return int(launch_line_stats(b_cores, p.stream, p.b_src.data_ptr(), stb, stb + lb, stb + 2 * lb, g.batch,
                                     g.kp, g.np, 0u, p.cores.vector));
    });
    enqueue("SgemmCubeLineMeta", [p, sta, stb, la, lb]() -> int {
        const schedule::Geometry& g = p.plan.geometry;
        const MatmulOptions& o = p.options;
        const uint32_t scale = uint32_t(o.scale), fix = o.fixup ? 1u : 0u, sb = uint32_t(o.sb);
        const uint32_t sub = uint32_t(o.subnormals), vector = p.cores.vector;
        auto meta_cores = [vector](int64_t lines) {
            return schedule::min_u32(vector, uint32_t((lines + schedule::kMetaChunk - 1) / schedule::kMetaChunk));
        };
        const int ra = int(launch_line_meta(meta_cores(la), p.stream, sta, sta + la, sta + 2 * la, p.meta_a,
                                            p.flags_p, g.batch, g.mp, sb, scale, fix, vector, sub));
        return ra != 0 ? ra
                       : int(launch_line_meta(meta_cores(lb), p.stream, stb, stb + lb, stb + 2 * lb, p.meta_b,
                                              p.flags_p, g.batch, g.np, sb, scale, fix, vector, sub));
    });
}

/// The splits of A and B into FP16 hi/lo (with the integers, each line scaled by its power of two first).
void enqueue_splits(const Product& p)
{
    enqueue("SgemmCubeSplitA", [p]() -> int {
        const schedule::Geometry& g = p.plan.geometry;
        return int(launch_split(p.plan.split_a.cores, p.stream, p.a_src.data_ptr(), p.a_hi, p.a_lo, p.meta_a,
                                p.flags_p, g.batch, g.mp, g.kp, p.cores.vector, p.scale_sb,
                                p.scaled() ? 1u : 0u, p.cut_a.keep_below, p.cut_a.keep_from));
    });
    enqueue("SgemmCubeSplitB", [p]() -> int {
        const schedule::Geometry& g = p.plan.geometry;
        return int(launch_split(p.plan.split_b.cores, p.stream, p.b_src.data_ptr(), p.b_hi, p.b_lo, p.meta_b,
                                p.flags_p, g.batch, g.kp, g.np, p.cores.vector, p.scale_sb,
                                p.scaled() ? 2u : 0u, p.cut_b.keep_below, p.cut_b.keep_from));
    });
}

/// The cube GEMM of the products' terms (on 910A with one K group, combined in its epilogue).
/// Whether the 910A's GEMM epilogue combines C and unscales the batches the device's words allow
/// (schedule::epilogue_unscales): the guarantee's integers and words on the device, no combine kernel.
bool epilogue_unscale(const Product& p) { return p.scaled() && p.flags_p != nullptr && !p.plan.launch_combine; }

void enqueue_gemm(const Product& p)
{
    enqueue("SgemmCubeGemm", [p]() -> int {
        const schedule::Geometry& g = p.plan.geometry;
        return int(launch_gemm(p.plan.gemm_blocks, p.stream, p.a_hi, p.a_lo, p.b_hi, p.b_lo, p.term_ptr[0],
                               p.term_ptr[1], p.term_ptr[2], p.term_ptr[3], g.batch, g.m, g.n, g.k, g.bm, g.bk,
                               g.bn, g.n_fused, p.options.per_term ? 1u : 0u, g.plan.l0c_stages, p.cores.cube,
                               p.plan.terms, p.inv_scale, epilogue_unscale(p) ? p.meta_a : nullptr,
                               epilogue_unscale(p) ? p.meta_b : nullptr, epilogue_unscale(p) ? p.flags_p : nullptr,
                               p.alpha.mant, p.alpha.exp));
    });
}

/// The termwise combination into the first term buffer; with the integers, the unscale folded in (on its cores).
void enqueue_combine(const Product& p)
{
    const schedule::Geometry& g = p.plan.geometry;
    const uint32_t unscale_cores = schedule::make_unscale_geometry(g.batch, g.mp, g.np, p.cores.vector).cores;
    const uint32_t cores = p.scaled() ? unscale_cores : p.plan.combine.cores;
    enqueue("SgemmCubeCombine", [p, cores]() -> int {
        const schedule::Geometry& g = p.plan.geometry;
        return int(launch_combine(cores, p.stream, p.term_ptr[0], p.term_ptr[1], p.term_ptr[2], p.term_ptr[3],
                                  p.term_ptr[0], p.plan.term_elems, p.cores.vector, p.options.keep_lo_lo ? 1u : 0u,
                                  p.inv_scale, p.meta_a, p.meta_b, p.flags_p, g.batch, g.mp, g.np, p.alpha.mant,
                                  p.alpha.exp));
    });
}

/// The unscaling with alpha where the GEMM's epilogue combined (the combine kernel folds it in elsewhere).
void enqueue_unscale(const Product& p)
{
    const schedule::Geometry& g = p.plan.geometry;
    if (!p.plan.launch_combine) {
        const uint32_t cores = schedule::make_unscale_geometry(g.batch, g.mp, g.np, p.cores.vector).cores;
        enqueue("SgemmCubeUnscale", [p, cores]() -> int {
            const schedule::Geometry& g = p.plan.geometry;
            return int(launch_unscale(cores, p.stream, p.term_ptr[0], p.meta_a, p.meta_b, p.flags_p, g.batch, g.mp,
                                      g.np, p.cores.vector, p.alpha.mant, p.alpha.exp, epilogue_unscale(p) ? 1u : 0u));
        });
    }
}

/// guard: the fix-up lines in FP32 (after the unscale).
void enqueue_fixup(const Product& p)
{
    const schedule::Geometry& g = p.plan.geometry;
    const uint32_t vector = p.cores.vector;
    const uint32_t row_cores = schedule::min_u32(vector, g.batch * g.mp);
    const uint32_t col_cores = schedule::min_u32(vector, g.batch * schedule::ceil_div(g.mp, schedule::kFixupColRows));
    enqueue("SgemmCubeFixup", [p, row_cores, col_cores]() -> int {
        const schedule::Geometry& g = p.plan.geometry;
        const uint32_t min_class = guard::fixup_min_class(p.options.fixup, p.options.bands);
        void* const a = p.a_src.data_ptr();
        void* const b = p.b_src.data_ptr();
        const int rr = int(launch_fixup_rows(row_cores, p.stream, a, b, p.meta_a, p.meta_b, p.term_ptr[0], p.flags_p,
                                             g.batch, g.mp, g.np, g.kp, g.k, min_class, p.cores.vector, p.alpha.mant,
                                             p.alpha.exp));
        return rr != 0 ? rr
                       : int(launch_fixup_cols(col_cores, p.stream, a, b, p.meta_a, p.meta_b, p.term_ptr[0],
                                               p.flags_p, g.batch, g.mp, g.np, g.kp, g.k, min_class, p.cores.vector,
                                               p.alpha.mant, p.alpha.exp));
    });
}

/// `lines` as matmul takes it: int32 (4, batch * (m + n)), contiguous, on a's device (checked before any launch).
void check_lines(const at::Tensor& lines, const at::Tensor& a, const Dims& d, const MatmulOptions& o)
{
    TORCH_CHECK(o.guard, "sgemm_cube NPU kernel: lines needs options.guard (the line integers are computed then)");
    TORCH_CHECK(lines.device() == a.device() && lines.scalar_type() == at::kInt && lines.is_contiguous() &&
                    lines.dim() == 2 && lines.size(0) == 4 && lines.size(1) == d.batch * (d.m + d.n),
                "sgemm_cube NPU kernel: lines must be a contiguous int32 tensor of shape (4, ", d.batch * (d.m + d.n),
                ") on ", a.device(), ", got ", lines.scalar_type(), " ", lines.sizes(), " on ", lines.device());
}

/// lines[0]: the packed integers, lines[1..3]: the statistics big, small_w, finite, each over A's rows then
/// B's columns without the padding, copied on the device from the product's buffers (after the meta kernel).
void copy_lines(const Product& p, const Dims& d, at::Tensor& lines)
{
    const schedule::Geometry& g = p.plan.geometry;
    const int64_t la = p.lines_a, lb = p.lines_b, am = d.batch * d.m, bn = d.batch * d.n;
    // source row r: 0 the integers, 1-3 the statistics (A's three arrays, then B's, each of la / lb lines)
    auto side = [&](int64_t row, bool of_a) -> at::Tensor {
        const int64_t lines_ = of_a ? la : lb, pad = of_a ? g.mp : g.np, used = of_a ? d.m : d.n;
        const at::Tensor src = row == 0 ? p.meta.narrow(0, of_a ? 0 : la, lines_)
                                        : p.stats.narrow(0, (of_a ? 0 : 3 * la) + (row - 1) * lines_, lines_);
        return src.view({d.batch, pad}).narrow(1, 0, used);
    };
    for (int64_t row = 0; row < 4; ++row) {
        at::Tensor dst = lines.select(0, row);
        dst.narrow(0, 0, am).view({d.batch, d.m}).copy_(side(row, true));
        dst.narrow(0, am, bn).view({d.batch, d.n}).copy_(side(row, false));
    }
}

/// The lines of a product with K = 0 (no kernel runs): every line empty, class 0, t = 0 (guard.py's rules).
void fill_empty_lines(at::Tensor& lines)
{
    lines.select(0, 0).fill_(guard::pack(guard::LineMeta{0, 0}));
    lines.select(0, 1).fill_(0);                            // big: none
    lines.select(0, 2).fill_(int32_t(guard::kNoSmall));     // small_w: none
    lines.select(0, 3).fill_(-1);                           // finite
}

void matmul(const at::Tensor& a, const at::Tensor& b, at::Tensor& out, const MatmulOptions& options,
            c10::optional<at::Tensor> lines)
{
    const Dims d = check_matmul(a, b, out, options);
    if (lines.has_value()) {
        check_lines(*lines, a, d, options);
    }
    if (d.batch == 0 || d.m == 0 || d.n == 0) {
        return;
    }
    if (d.k == 0) {
        out.zero_();
        if (lines.has_value()) {
            fill_empty_lines(*lines);
        }
        return;
    }
    const Product p = prepare_product(a, b, out, d, options);
    if (options.guard) {
        enqueue_line_meta(p);
        if (lines.has_value()) {
            copy_lines(p, d, *lines);
        }
    }
    enqueue_splits(p);
    enqueue_gemm(p);
    if (p.plan.launch_combine) {
        enqueue_combine(p);
    }
    if (options.guard) {
        enqueue_unscale(p);
        enqueue_fixup(p);
    }
    if (!p.direct) {
        const schedule::Geometry& g = p.plan.geometry;
        const at::Tensor c = p.terms[0].view({d.batch, int64_t(g.mp), int64_t(g.np)});
        out.copy_(c.narrow(1, 0, d.m).narrow(2, 0, d.n));
    }
}

/// A band pass's packed integers: int32 (batch, lines) on a's device.
void check_meta(const at::Tensor& meta, const char* name, const at::Tensor& a, int64_t batch, int64_t lines)
{
    TORCH_CHECK(meta.device() == a.device() && meta.scalar_type() == at::kInt && meta.dim() == 2 &&
                    meta.size(0) == batch && meta.size(1) == lines,
                "sgemm_cube NPU band_pass: ", name, " must be an int32 tensor of shape (", batch, ", ", lines, ") on ",
                a.device(), ", got ", meta.scalar_type(), " ", meta.sizes(), " on ", meta.device());
}

void band_pass(const at::Tensor& a, const at::Tensor& b, at::Tensor& out, const at::Tensor& meta_a,
               const at::Tensor& meta_b, const MatmulOptions& options)
{
    const Dims d = check_matmul(a, b, out, options);
    check_meta(meta_a, "meta_a", a, d.batch, d.m);
    check_meta(meta_b, "meta_b", a, d.batch, d.n);
    if (d.batch == 0 || d.m == 0 || d.n == 0) {
        return;
    }
    if (d.k == 0) {
        out.zero_();
        return;
    }
    MatmulOptions o = options;
    o.guard = false;  // no statistics, meta or fix-up: the integers are given
    Product p = prepare_product(a, b, out, d, o);
    const schedule::Geometry& g = p.plan.geometry;
    // The given integers, padded lines "class 0, t = 0" (zero lines: x * 2^0 = 0), A's then B's in one buffer.
    const int64_t pad = guard::pack(guard::LineMeta{0, 0});
    p.meta = at::cat({at::constant_pad_nd(meta_a, {0, int64_t(g.mp) - d.m}, pad).reshape({-1}),
                      at::constant_pad_nd(meta_b, {0, int64_t(g.np) - d.n}, pad).reshape({-1})})
                 .contiguous();
    p.meta_a = p.meta.data_ptr<int32_t>();
    p.meta_b = p.meta_a + p.lines_a;
    p.flags_p = nullptr;  // no batch words: every batch is scaled (kernel/batch_flags.hpp)
    p.cut_a = guard::split_cutoff(line_range(options), options.band_a);
    p.cut_b = guard::split_cutoff(line_range(options), options.band_b);
    enqueue_splits(p);
    enqueue_gemm(p);
    if (p.plan.launch_combine) {
        enqueue_combine(p);  // the unscale folded in
    }
    enqueue_unscale(p);  // only where the 910A's epilogue combined
    if (!p.direct) {
        const at::Tensor c = p.terms[0].view({d.batch, int64_t(g.mp), int64_t(g.np)});
        out.copy_(c.narrow(1, 0, d.m).narrow(2, 0, d.n));
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
                                scale_sb, 0u, kNonFiniteBits, 0u));
    });
}

}  // namespace
}  // namespace host
}  // namespace sgemm_cube

PYBIND11_MODULE(_npu_ext, m)
{
    m.doc() = "SGEMM-cube AscendC kernels (split, cube GEMM, termwise combine) for torch_npu tensors";
    using sgemm_cube::host::MatmulOptions;
    namespace py = pybind11;
    py::class_<MatmulOptions>(m, "MatmulOptions", "matmul's options: the tiling, the scheme and the guarantee's")
        .def(py::init([](int64_t sb, bool keep_lo_lo, int64_t bm, int64_t bk, int64_t bn, int64_t n_fused,
                         bool per_term, bool guard, int64_t scale, bool fixup, double alpha, int64_t subnormals,
                         int64_t l0c_stages, bool bands, bool band_a, bool band_b) {
                 return MatmulOptions{sb,    keep_lo_lo, bm,    bk,         bn,         n_fused, per_term, guard,
                                      scale, fixup,      alpha, subnormals, l0c_stages, bands,   band_a,   band_b};
             }),
             py::kw_only(), py::arg("sb"), py::arg("keep_lo_lo"), py::arg("bm"), py::arg("bk"), py::arg("bn"),
             py::arg("n_fused"), py::arg("per_term") = false, py::arg("guard") = false, py::arg("scale") = 1,
             py::arg("fixup") = true, py::arg("alpha") = 1.0, py::arg("subnormals") = 1, py::arg("l0c_stages") = 1,
             py::arg("bands") = false, py::arg("band_a") = false, py::arg("band_b") = false)
        .def_readwrite("sb", &MatmulOptions::sb)
        .def_readwrite("keep_lo_lo", &MatmulOptions::keep_lo_lo)
        .def_readwrite("bm", &MatmulOptions::bm)
        .def_readwrite("bk", &MatmulOptions::bk)
        .def_readwrite("bn", &MatmulOptions::bn)
        .def_readwrite("n_fused", &MatmulOptions::n_fused)
        .def_readwrite("per_term", &MatmulOptions::per_term)
        .def_readwrite("guard", &MatmulOptions::guard)
        .def_readwrite("scale", &MatmulOptions::scale)
        .def_readwrite("fixup", &MatmulOptions::fixup)
        .def_readwrite("alpha", &MatmulOptions::alpha)
        .def_readwrite("subnormals", &MatmulOptions::subnormals)
        .def_readwrite("l0c_stages", &MatmulOptions::l0c_stages)
        .def_readwrite("bands", &MatmulOptions::bands)
        .def_readwrite("band_a", &MatmulOptions::band_a)
        .def_readwrite("band_b", &MatmulOptions::band_b);
    m.def("matmul", &sgemm_cube::host::matmul, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("options"),
          py::arg("lines") = py::none(),
          "out[b] = A[b] B[b] emulated in FP32 from FP16 cube products (all tensors float32, contiguous, on one NPU); "
          "with guard, `lines` (int32 (4, B*(M+N))) receives the lines' integers and statistics");
    m.def("band_pass", &sgemm_cube::host::band_pass, py::arg("a"), py::arg("b"), py::arg("out"), py::arg("meta_a"),
          py::arg("meta_b"), py::arg("options"),
          "one band pass: out = unscale(emulated product of the scaled lines (band sides: their window only))");
    m.def("matmul_fp32", &sgemm_cube::host::matmul_fp32, pybind11::arg("a"), pybind11::arg("b"),
          pybind11::arg("out"), pybind11::arg("alpha") = 1.0,
          "out[b] = alpha * A[b] B[b] in plain FP32 on the vector units (recursive summation in K order)");
    m.def("split", &sgemm_cube::host::split, pybind11::arg("x"), pybind11::arg("hi"), pybind11::arg("lo"),
          pybind11::arg("sb"), "the split kernel alone: hi, lo = FP16 parts of x in the Zz fractal layout (probes)");
    m.def("soc", &sgemm_cube::host::built_soc, "SoC family the device code was built for ('910a' or '910b')");
    m.def("device_soc", &sgemm_cube::host::device_soc, pybind11::arg("device") = 0,
          "SoC name the ACL runtime reports, e.g. 'Ascend910B3'");
}
