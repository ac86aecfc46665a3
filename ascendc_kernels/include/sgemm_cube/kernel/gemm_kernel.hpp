// Kernel layer of the GEMM: which work items this core owns (the schedule
// header's round-robin over (batch, block row, column range)), the on-chip
// buffers, and the block main loop over them.
//
//   C_t[b] (+)= A_x[b] B_y[b] for every term t = (x, y) in
//   {(hi, hi), (lo, hi), (hi, lo)[, (lo, lo)]}, each C_t its own FP32 buffer.
//
// Inputs: A_hi, A_lo (batch, mp, kp) and B_hi, B_lo (batch, kp, np), FP16 in
// the Zz fractal layout the split kernel writes; outputs: term buffers
// (batch, mp, np), FP32 row-major, or with the combine in the epilogue
// (schedule::Geometry::combine_in_epilogue) C itself in the HH buffer.
// mp, np, kp are m, n, k rounded up to 16.
#ifndef SGEMM_CUBE_KERNEL_GEMM_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_GEMM_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/block/block_mmad_resident_a.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"

namespace sgemm_cube {
namespace kernel {

/// Scalar arguments of the GEMM launch (the host's launch plan computed the
/// same geometry from the same numbers; `plan_cores` is the core count it used).
struct GemmArgs {
    uint32_t batch, m, n, k;
    uint32_t bm, bk, bn, n_fused;
    uint32_t per_term;  ///< 1: one pass per term (schedule::Tiling::per_term)
    uint32_t l0c_stages;  ///< accumulator sets in L0C, 1 or 2 (schedule::Tiling::l0c_stages)
    uint32_t plan_cores;
    uint32_t terms;
};

template <class SocTag>
__aicore__ inline void RunGemm(const block::GemmOperands& gm, const GemmArgs& args)
{
    schedule::Geometry g;
    const schedule::Status status =
        schedule::make_geometry(args.batch, args.m, args.n, args.k,
                                schedule::Tiling{args.bm, args.bk, args.bn, args.n_fused, args.per_term, args.l0c_stages},
                                args.plan_cores,
                                args.terms, arch::capacity<typename SocTag::Arch>(), &g);
    const uint32_t core = uint32_t(AscendC::GetBlockIdx());
    if (status != schedule::Status::kOk || core >= g.cores) {
        return;  // the host validated the plan; extra cores have no item
    }

    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::A1> l1;
    AscendC::TBuf<AscendC::TPosition::A2> l0a;
    AscendC::TBuf<AscendC::TPosition::B2> l0b;
    AscendC::TBuf<AscendC::TPosition::CO1> l0c;
    pipe.InitBuffer(l1, g.plan.l1_bytes);
    pipe.InitBuffer(l0a, g.plan.l0a_bytes);
    pipe.InitBuffer(l0b, g.plan.l0b_bytes);
    pipe.InitBuffer(l0c, g.plan.l0c_bytes);
    AscendC::LocalTensor<uint8_t> ub_tensor;
    if (g.plan.ub_bytes > 0) {  // 910A: the epilogue stages C in UB
        AscendC::TBuf<AscendC::TPosition::VECCALC> ub;
        pipe.InitBuffer(ub, g.plan.ub_bytes);
        ub_tensor = ub.Get<uint8_t>();
    }

    block::BlockMmadResidentA<SocTag> mainloop;
    mainloop.Init(g, gm, l1.Get<uint8_t>(), l0a.Get<uint8_t>(), l0b.Get<uint8_t>(), l0c.Get<uint8_t>(),
                  ub_tensor);
    // TPipe inserts its own synchronisation around queues; this kernel uses
    // plain buffers and the schedule's flags only (as CATLASS does).
    pipe.Destroy();
    schedule::run_core(g, core, mainloop);
    mainloop.Finish();
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_GEMM_KERNEL_HPP
