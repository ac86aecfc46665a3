// Host harness: runs the real SGEMM-cube device code (kernel/sgemm_cube_kernels.cpp) on the
// executable AscendC stand-in of this directory, launched the way host/binding.cpp does:
// launch plan (host/launch_plan.hpp), zero padding, split A, split B, GEMM, combine in place
// over the HH buffer (unless the GEMM's epilogue combined), slice.
//
// Build (per chip, like tests/ascendc_kernels/test_ascend_kernel_sources.py):
//   g++ -std=c++17 -O1 -D__NPU_ARCH__=2201 -DSGEMM_CUBE_SOC_910B
//       -I ascendc_kernels/tests/exec_ascendc -I ascendc_kernels/include -I ascendc_kernels/host
//       -I ascendc_kernels/kernel ascendc_kernels/tests/exec_ascendc/run_kernels.cpp -o run_kernels
// Usage: run_kernels IN OUT
//   IN:  22 little-endian int64 (batch, m, n, k, sb, keep_lo_lo, bm, bk, bn, n_fused, per_term,
//        cube_cores, vector_cores, guard, scale, fixup, alpha as float32 bits, subnormals, l0c_stages, bands,
//        band_a, band_b), then A (batch*m*k float32), B (batch*k*n float32), row-major; with guard = 4 then
//        the packed integers of A's rows (batch*m int32) and of B's columns (batch*n int32).
//        guard = 1: the guarantee's integers are computed on the device first (line statistics and meta of A's rows and B's columns, with
//        guard::Scale `scale`, `fixup` and the split range of guard::Subnormals `subnormals`, as
//        host/binding.cpp passes them), the splits scale every line by them and zero entries the
//        split cannot hold, and the combine kernel, the unscale folded in (or, where the 910A's GEMM
//        epilogue combined, the unscale kernel after it), gives C = alpha * (AB) 2^-(ta+tb); the meta
//        kernels also set the batches' words (kernel/batch_flags.hpp) that the later kernels read.
//        bands = 1 (host/binding.cpp's options.bands): the fix-up kernels take class 2 only (the
//        banded lines' outputs are left as the ordinary pass wrote them).
//        guard = 2: host/binding.cpp's matmul_fp32 instead: every line's integers "class 0, t = 0",
//        every row through the fix-up kernel (fixup_min_class = 0), C = alpha * (AB) in plain FP32.
//        guard = 3: host/binding.cpp's split: the two split kernels alone (no GEMM; C is left as poisoned),
//        for the bring-up's probes of the conversion (ascendc_kernels/probes.py).
//        guard = 4: host/binding.cpp's band_pass: the given integers scale every line in the splits (no
//        batch words: every batch scaled), a side with band_a / band_b keeps only its band window
//        (guard::split_cutoff), the other the ordinary bound; GEMM, combine with the unscale folded in
//        (or the unscale kernel after the 910A's epilogue combine); no statistics, meta or fix-up.
//   OUT: C (batch*m*n float32), then A_hi, A_lo (batch*mp*kp FP16 bits, Zz), B_hi, B_lo
//        (batch*kp*np, Zz), as the split kernel wrote them; with guard = 1 then the packed
//        integers of A's rows (batch*m int32) and of B's columns (batch*n), then the batches' words
//        (batch * schedule::kFlagWords FP32), then the line statistics big, small_w, finite (int32) of
//        A's rows (three arrays of batch*m) and of B's columns (three of batch*n).
//   stdout: the checker's report (CHECK-ERROR lines, CHECK-SUMMARY); exit status 0 when clean,
//   1 when the checker found errors, 2 on a fatal error (out of bounds, bad parameters), 64 when the
//   input cannot be read (driver_io.h), 65 when the launch plan refuses the shape.
#include "kernel_operator.h"

#include "sgemm_cube_kernels.cpp"  // the real device code, from -I .../kernel

#include "launch_plan.hpp"

#include "driver_io.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <vector>

namespace {

using driver::GmVector;

template <typename T>
GmVector<T> padded(const std::vector<float>& x, uint32_t batch, uint32_t rows, uint32_t cols, uint32_t prow,
                      uint32_t pcol)
{
    GmVector<T> out(size_t(batch) * prow * pcol, T(0));
    for (uint32_t b = 0; b < batch; ++b) {
        for (uint32_t r = 0; r < rows; ++r) {
            for (uint32_t c = 0; c < cols; ++c) {
                out[(size_t(b) * prow + r) * pcol + c] = x[(size_t(b) * rows + r) * cols + c];
            }
        }
    }
    return out;
}

}  // namespace

int main(int argc, char** argv)
{
    using namespace sgemm_cube;
    driver::expect_args(argc, argv, 2, "IN OUT");
    driver::Input in(argv[1]);
    int64_t h[22];
    for (int64_t& v : h) {
        v = in.param();
    }
    const uint32_t batch = uint32_t(h[0]), m = uint32_t(h[1]), n = uint32_t(h[2]), k = uint32_t(h[3]);
    const int sb = int(h[4]);
    const bool keep_lo_lo = h[5] != 0;
    const schedule::Tiling tiling{uint32_t(h[6]), uint32_t(h[7]), uint32_t(h[8]), uint32_t(h[9]), uint32_t(h[10]),
                                  uint32_t(h[18])};
    const uint32_t cube_cores = uint32_t(h[11]), vector_cores = uint32_t(h[12]);
    const bool device_guard = h[13] == 1;
    const bool fp32_route = h[13] == 2;  // host/binding.cpp's matmul_fp32
    const bool split_only = h[13] == 3;  // host/binding.cpp's split: the split kernel alone (the probes)
    const bool band_pass = h[13] == 4;   // host/binding.cpp's band_pass: given integers, band cutoffs
    const bool scaled = device_guard || band_pass;  // the splits scale the lines, C is unscaled
    const bool bands = h[19] != 0, band_a = h[20] != 0, band_b = h[21] != 0;
    const uint32_t guard_scale = uint32_t(h[14]), guard_fixup = uint32_t(h[15]), guard_subnormals = uint32_t(h[17]);
    float alpha;
    {
        const uint32_t bits = uint32_t(h[16]);
        std::memcpy(&alpha, &bits, 4);
    }
    const std::vector<float> a = in.values<float>(size_t(batch) * m * k);
    const std::vector<float> b = in.values<float>(size_t(batch) * k * n);
    const std::vector<int32_t> given_a = band_pass ? in.values<int32_t>(size_t(batch) * m) : std::vector<int32_t>();
    const std::vector<int32_t> given_b = band_pass ? in.values<int32_t>(size_t(batch) * n) : std::vector<int32_t>();

#if __NPU_ARCH__ == 1001
    const arch::Capacity cap = arch::capacity<arch::Ascend910A>();
#else
    const arch::Capacity cap = arch::capacity<arch::Ascend910B>();
#endif
    host::LaunchPlan plan{};
    const schedule::Status status =
        host::make_launch_plan(cap, batch, m, n, k, tiling, cube_cores, vector_cores, keep_lo_lo, &plan);
    if (status != schedule::Status::kOk) {
        std::fprintf(stderr, "launch plan: %s\n", schedule::status_message(status));
        return 65;
    }
    const schedule::Geometry& g = plan.geometry;

    // binding.cpp: zero padding to multiples of 16, then the device buffers.
    GmVector<float> a_src = padded<float>(a, batch, m, k, g.mp, g.kp);
    GmVector<float> b_src = padded<float>(b, batch, k, n, g.kp, g.np);
    GmVector<half> a_parts(2 * plan.a_part_elems), b_parts(2 * plan.b_part_elems);
    GmVector<float> terms(size_t(plan.term_buffers) * plan.term_elems);
    // Poison the outputs: anything a kernel fails to write shows up.
    const half poison_h = half(-7.0f);
    for (auto& v : a_parts) v = poison_h;
    for (auto& v : b_parts) v = poison_h;
    for (auto& v : terms) v = std::nanf("");
    ascend_exec::register_gm(a_src.data(), a_src.size() * 4);
    ascend_exec::register_gm(b_src.data(), b_src.size() * 4);
    ascend_exec::register_gm(a_parts.data(), plan.a_part_elems * 2);
    ascend_exec::register_gm(a_parts.data() + plan.a_part_elems, plan.a_part_elems * 2);
    ascend_exec::register_gm(b_parts.data(), plan.b_part_elems * 2);
    ascend_exec::register_gm(b_parts.data() + plan.b_part_elems, plan.b_part_elems * 2);
    void* term_ptr[schedule::kMaxTerms] = {nullptr, nullptr, nullptr, nullptr};
    for (uint32_t t = 0; t < plan.term_buffers; ++t) {
        term_ptr[t] = terms.data() + size_t(t) * plan.term_elems;
        ascend_exec::register_gm(term_ptr[t], plan.term_elems * 4);
    }
    auto gm = [](void* p) { return reinterpret_cast<GM_ADDR>(p); };
    void* a_hi = a_parts.data();
    void* a_lo = a_parts.data() + plan.a_part_elems;
    void* b_hi = b_parts.data();
    void* b_lo = b_parts.data() + plan.b_part_elems;
    const float scale = std::ldexp(1.0f, sb);
    const float inv_scale = std::ldexp(1.0f, -sb);

    // The guarantee's integers on the device (what host/binding.cpp will launch first).
    GmVector<int32_t> stats_a(3 * size_t(batch) * g.mp), stats_b(3 * size_t(batch) * g.np);
    GmVector<int32_t> meta_a(size_t(batch) * g.mp), meta_b(size_t(batch) * g.np);
    GmVector<float> flags(size_t(batch) * schedule::kFlagWords, 0.0f);  // zeroed, as host/binding.cpp does
    // alpha = m 2^e with 1 <= |m| < 2 (or 0), as host/binding.cpp splits it.
    int alpha_e = 0;
    const float alpha_m = std::frexp(alpha, &alpha_e);
    const float alpha_mant = alpha == 0.0f ? 0.0f : 2.0f * alpha_m;
    const int32_t alpha_exp = alpha == 0.0f ? 0 : alpha_e - 1;
    if (fp32_route) {
        for (auto* v : {&meta_a, &meta_b}) {
            for (auto& x : *v) x = guard::pack(guard::LineMeta{0, 0});
            ascend_exec::register_gm(v->data(), v->size() * 4);
        }
        ascend_exec::launch("fp32", schedule::min_u32(vector_cores, batch * g.mp), [&] {
            sgemm_cube_fixup_rows(gm(a_src.data()), gm(b_src.data()), gm(meta_a.data()), gm(meta_b.data()),
                                  gm(term_ptr[0]), nullptr, batch, g.mp, g.np, g.kp, k, 0u, vector_cores, alpha_mant,
                                  alpha_exp);
        });
    }
    // What the splits zero besides NaN/Inf (guard::split_cutoff, as host/binding.cpp passes it).
    const guard::LineRange range = guard::fp16_line_range(uint32_t(sb), guard::Subnormals(guard_subnormals));
    guard::SplitCutoff cut_a{0x7F800000u, 0u}, cut_b{0x7F800000u, 0u};  // without the integers: NaN/Inf only
    if (scaled) {
        cut_a = guard::split_cutoff(range, band_pass && band_a);
        cut_b = guard::split_cutoff(range, band_pass && band_b);
    }
    if (band_pass) {  // the given integers, padded lines "class 0, t = 0", as host/binding.cpp pads them
        for (auto* v : {&meta_a, &meta_b}) {
            for (auto& x : *v) x = guard::pack(guard::LineMeta{0, 0});
            ascend_exec::register_gm(v->data(), v->size() * 4);
        }
        for (uint32_t bb = 0; bb < batch; ++bb) {
            std::memcpy(meta_a.data() + size_t(bb) * g.mp, given_a.data() + size_t(bb) * m, size_t(m) * 4);
            std::memcpy(meta_b.data() + size_t(bb) * g.np, given_b.data() + size_t(bb) * n, size_t(n) * 4);
        }
    }
    if (device_guard) {
        for (auto* v : {&stats_a, &stats_b, &meta_a, &meta_b}) {
            ascend_exec::register_gm(v->data(), v->size() * 4);
        }
        ascend_exec::register_gm(flags.data(), flags.size() * 4);
        const size_t la = size_t(batch) * g.mp, lb = size_t(batch) * g.np;
        const schedule::LineStatsGeometry ga = schedule::make_line_stats_geometry(batch, g.mp, g.kp, true, vector_cores);
        const schedule::LineStatsGeometry gb = schedule::make_line_stats_geometry(batch, g.kp, g.np, false, vector_cores);
        ascend_exec::launch("line_stats_a", ga.cores, [&] {
            sgemm_cube_line_stats(gm(a_src.data()), gm(stats_a.data()), gm(stats_a.data() + la),
                                  gm(stats_a.data() + 2 * la), batch, g.mp, g.kp, 1u, vector_cores);
        });
        ascend_exec::launch("line_stats_b", gb.cores, [&] {
            sgemm_cube_line_stats(gm(b_src.data()), gm(stats_b.data()), gm(stats_b.data() + lb),
                                  gm(stats_b.data() + 2 * lb), batch, g.kp, g.np, 0u, vector_cores);
        });
        auto meta_cores = [&](size_t lines) {
            return schedule::min_u32(vector_cores, uint32_t((lines + schedule::kMetaChunk - 1) / schedule::kMetaChunk));
        };
        ascend_exec::launch("line_meta_a", meta_cores(la), [&] {
            sgemm_cube_line_meta(gm(stats_a.data()), gm(stats_a.data() + la), gm(stats_a.data() + 2 * la),
                                 gm(meta_a.data()), gm(flags.data()), batch, g.mp, uint32_t(sb), guard_scale, guard_fixup, vector_cores,
                                 guard_subnormals);
        });
        ascend_exec::launch("line_meta_b", meta_cores(lb), [&] {
            sgemm_cube_line_meta(gm(stats_b.data()), gm(stats_b.data() + lb), gm(stats_b.data() + 2 * lb),
                                 gm(meta_b.data()), gm(flags.data()), batch, g.np, uint32_t(sb), guard_scale, guard_fixup, vector_cores,
                                 guard_subnormals);
        });
    }

    if (!fp32_route) {
        ascend_exec::launch("split_a", plan.split_a.cores, [&] {
            sgemm_cube_split(gm(a_src.data()), gm(a_hi), gm(a_lo), scaled ? gm(meta_a.data()) : nullptr,
                             device_guard ? gm(flags.data()) : nullptr, g.batch,
                             g.mp, g.kp, vector_cores, scale, scaled ? 1u : 0u, cut_a.keep_below, cut_a.keep_from);
        });
        ascend_exec::launch("split_b", plan.split_b.cores, [&] {
            sgemm_cube_split(gm(b_src.data()), gm(b_hi), gm(b_lo), scaled ? gm(meta_b.data()) : nullptr,
                             device_guard ? gm(flags.data()) : nullptr, g.batch,
                             g.kp, g.np, vector_cores, scale, scaled ? 2u : 0u, cut_b.keep_below, cut_b.keep_from);
        });
    }
    // The 910A's epilogue combines C and, with the device's words, unscales the batches they allow
    // (schedule::epilogue_unscales); the unscale pass then skips them.
    const bool epilogue_unscale = scaled && device_guard && !plan.launch_combine && !fp32_route && !split_only;
    if (epilogue_unscale) {
        std::printf("EPILOGUE_UNSCALE on\n");
    }
    if (!fp32_route && !split_only) {
        ascend_exec::launch("gemm", plan.gemm_blocks, [&] {
            sgemm_cube_gemm(gm(a_hi), gm(a_lo), gm(b_hi), gm(b_lo), gm(term_ptr[0]), gm(term_ptr[1]), gm(term_ptr[2]),
                            gm(term_ptr[3]), g.batch, g.m, g.n, g.k, g.bm, g.bk, g.bn, g.n_fused, tiling.per_term,
                            g.plan.l0c_stages, cube_cores, plan.terms, inv_scale,
                            epilogue_unscale ? gm(meta_a.data()) : nullptr, epilogue_unscale ? gm(meta_b.data()) : nullptr,
                            epilogue_unscale ? gm(flags.data()) : nullptr, alpha_mant, alpha_exp);
        });
        if (plan.launch_combine) {  // with the guarantee's integers, the unscale folded in (its units and cores)
            const uint32_t combine_cores =
                scaled ? schedule::make_unscale_geometry(batch, g.mp, g.np, vector_cores).cores : plan.combine.cores;
            ascend_exec::launch("combine", combine_cores, [&] {
                sgemm_cube_combine(gm(term_ptr[0]), gm(term_ptr[1]), gm(term_ptr[2]), gm(term_ptr[3]), gm(term_ptr[0]),
                                   plan.term_elems, vector_cores, keep_lo_lo ? 1u : 0u, inv_scale,
                                   scaled ? gm(meta_a.data()) : nullptr, scaled ? gm(meta_b.data()) : nullptr,
                                   device_guard ? gm(flags.data()) : nullptr, batch, g.mp, g.np, alpha_mant, alpha_exp);
            });
        }
    }

    if (scaled && !plan.launch_combine) {  // the 910A's epilogue combined: the unscale as its own pass
        const schedule::UnscaleGeometry ug = schedule::make_unscale_geometry(batch, g.mp, g.np, vector_cores);
        ascend_exec::launch("unscale", ug.cores, [&] {
            sgemm_cube_unscale(gm(term_ptr[0]), gm(meta_a.data()), gm(meta_b.data()),
                               device_guard ? gm(flags.data()) : nullptr, batch, g.mp, g.np, vector_cores, alpha_mant,
                               alpha_exp, epilogue_unscale ? 1u : 0u);
        });
    }
    if (device_guard) {
        // The fix-up rows of A in plain FP32 (1 with fixup and no bands, else 2: with bands the banded lines go
        // to the band passes).
        const uint32_t min_class = guard::fixup_min_class(guard_fixup != 0, bands);
        ascend_exec::launch("fixup_rows", schedule::min_u32(vector_cores, batch * g.mp), [&] {
            sgemm_cube_fixup_rows(gm(a_src.data()), gm(b_src.data()), gm(meta_a.data()), gm(meta_b.data()),
                                  gm(term_ptr[0]), gm(flags.data()), batch, g.mp, g.np, g.kp, k, min_class,
                                  vector_cores,
                                  alpha_mant, alpha_exp);
        });
        const uint32_t col_units = batch * schedule::ceil_div(g.mp, schedule::kFixupColRows);
        ascend_exec::launch("fixup_cols", schedule::min_u32(vector_cores, col_units), [&] {
            sgemm_cube_fixup_cols(gm(a_src.data()), gm(b_src.data()), gm(meta_a.data()), gm(meta_b.data()),
                                  gm(term_ptr[0]), gm(flags.data()), batch, g.mp, g.np, g.kp, k, min_class,
                                  vector_cores,
                                  alpha_mant, alpha_exp);
        });
    }

    driver::Output out(argv[2]);
    const float* c = terms.data();
    for (uint32_t bb = 0; bb < batch; ++bb) {
        for (uint32_t r = 0; r < m; ++r) {
            out.write(c + (size_t(bb) * g.mp + r) * g.np, size_t(n) * 4);
        }
    }
    out.write(a_parts.data(), a_parts.size() * 2);
    out.write(b_parts.data(), b_parts.size() * 2);
    if (device_guard) {
        for (uint32_t bb = 0; bb < batch; ++bb) {
            out.write(meta_a.data() + size_t(bb) * g.mp, size_t(m) * 4);
        }
        for (uint32_t bb = 0; bb < batch; ++bb) {
            out.write(meta_b.data() + size_t(bb) * g.np, size_t(n) * 4);
        }
        out.write(flags.data(), flags.size() * 4);
        // the statistics: big, small_w, finite of A's rows, then of B's columns, without the padding
        for (const auto& [stats, pad, used] : {std::make_tuple(&stats_a, g.mp, m), std::make_tuple(&stats_b, g.np, n)}) {
            for (uint32_t part = 0; part < 3; ++part) {
                for (uint32_t bb = 0; bb < batch; ++bb) {
                    out.write(stats->data() + (size_t(part) * batch + bb) * pad, size_t(used) * 4);
                }
            }
        }
    }
    out.close();
    std::printf("GEOMETRY mp=%u np=%u kp=%u mb=%u nb=%u kb=%u n_fused=%u groups=%u cores=%u l0_stages=%u passes=%u "
                "combine_in_epilogue=%d ub_tiles=%u l0c_stages=%u\n",
                g.mp, g.np, g.kp, g.mb, g.nb, g.kb, g.n_fused, g.groups, g.cores, g.plan.l0_stages, g.passes,
                int(g.combine_in_epilogue), g.plan.ub_tiles, g.plan.l0c_stages);
    return ascend_exec::report(stdout);
}
