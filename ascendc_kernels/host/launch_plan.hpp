// Host-side launch plan: which buffers to allocate and how many blocks each
// of the three kernels gets.  Plain C++ (g++ tests include it); the pybind11
// binding (binding.cpp) turns it into tensors and launches.
//
// The three launches of one product C = A B (all on the current stream):
//   1. split  (vector): A -> A_hi, A_lo and B -> B_hi, B_lo, FP16, Zz fractal
//      layout, padded to multiples of 16 (the binding zero-pads unaligned
//      inputs first: zero rows/columns add exact zero products);
//   2. gemm   (cube):   one FP32 buffer per product term (batch, mp, np);
//   3. combine (vector): C = ((LL 2^-sb + LH) + HL) 2^-sb + HH, in place
//      over the HH buffer, which is `out` itself when no padding is needed.
// When the geometry combines in the GEMM's epilogue (910A, one K group, fused
// passes) the GEMM writes C into the HH buffer, no other term buffer exists
// and the combine is not launched.  With the guarantee's bookkeeping
// (binding.cpp, guard) the combine also unscales (its units then come from
// schedule::make_unscale_geometry), and the unscale kernel runs only where
// the epilogue combined.
#ifndef SGEMM_CUBE_HOST_LAUNCH_PLAN_HPP
#define SGEMM_CUBE_HOST_LAUNCH_PLAN_HPP

#include <cstdint>

#include "sgemm_cube/arch/arch.hpp"
#include "sgemm_cube/schedule/schedule.hpp"

namespace sgemm_cube {
namespace host {

struct LaunchPlan {
    schedule::Geometry geometry;
    bool padded_a;             ///< A needs zero padding to (mp, kp)
    bool padded_b;             ///< B needs zero padding to (kp, np)
    bool padded_c;             ///< C is computed in (mp, np) and sliced into `out`
    uint32_t terms;            ///< 3, or 4 with A_lo B_lo
    uint64_t a_part_elems;     ///< FP16 elements of A_hi (= of A_lo): batch * mp * kp
    uint64_t b_part_elems;     ///< FP16 elements of B_hi (= of B_lo): batch * kp * np
    uint64_t term_elems;       ///< FP32 elements of one term buffer: batch * mp * np
    uint32_t term_buffers;     ///< term buffers the GEMM writes: terms, or 1 (C) with the epilogue combine
    bool launch_combine;       ///< false when the GEMM's epilogue combined the terms
    schedule::SplitGeometry split_a;
    schedule::SplitGeometry split_b;
    schedule::CombineGeometry combine;
    uint32_t gemm_blocks;      ///< cube cores launched
};

/// Plans one batched product.  `cube_cores` / `vector_cores` are the
/// device's counts (on 910A both are the AI cores, which carry both units).
inline schedule::Status make_launch_plan(const arch::Capacity& cap, uint32_t batch, uint32_t m, uint32_t n,
                                         uint32_t k, const schedule::Tiling& tiling, uint32_t cube_cores,
                                         uint32_t vector_cores, bool keep_lo_lo, LaunchPlan* out)
{
    LaunchPlan p{};
    p.terms = keep_lo_lo ? 4 : 3;
    const schedule::Status st =
        schedule::make_geometry(batch, m, n, k, tiling, cube_cores, p.terms, cap, &p.geometry);
    if (st != schedule::Status::kOk) {
        return st;
    }
    const schedule::Geometry& g = p.geometry;
    if (vector_cores == 0) {
        return schedule::Status::kNoCores;
    }
    p.padded_a = g.mp != m || g.kp != k;
    p.padded_b = g.kp != k || g.np != n;
    p.padded_c = g.mp != m || g.np != n;
    p.a_part_elems = uint64_t(batch) * g.mp * g.kp;
    p.b_part_elems = uint64_t(batch) * g.kp * g.np;
    p.term_elems = uint64_t(batch) * g.mp * g.np;
    p.term_buffers = g.combine_in_epilogue ? 1u : p.terms;
    p.launch_combine = !g.combine_in_epilogue;
    p.split_a = schedule::make_split_geometry(batch, g.mp, g.kp, vector_cores);
    p.split_b = schedule::make_split_geometry(batch, g.kp, g.np, vector_cores);
    p.combine = schedule::make_combine_geometry(p.term_elems, vector_cores);
    p.gemm_blocks = g.cores;
    *out = p;
    return schedule::Status::kOk;
}

}  // namespace host
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_HOST_LAUNCH_PLAN_HPP
