// Block layer: the main loop of one core - resident A group, ping-pong B -
// as the visitor that schedule::run_core drives.  The loop order, the buffer
// indices and every SetFlag/WaitFlag come from the schedule header (tested
// with g++); this class only maps them onto AscendC tensors and calls.
//
// Buffers (offsets from schedule::BufferPlan), fused passes:
//   L1   [A_hi tiles 0..n_fused) [A_lo tiles 0..n_fused) [B slot 0: hi, lo] [B slot 1: hi, lo]
//   L0A  per stage: [A_hi tile] [A_lo tile]        L0B per stage: [B_hi tile] [B_lo tile]
//   L0C  per L0C stage: one FP32 accumulator per term: HH, LH, HL[, LL]
//        (Tiling::l0c_stages = 2: two such sets; a step uses set Step::l0c_stage)
// Per-term passes hold one plane of each (the one the pass's term reads) and
// one accumulator: L1 [A tiles] [B slot 0] [B slot 1], L0A/L0B one tile per stage.
#ifndef SGEMM_CUBE_BLOCK_BLOCK_MMAD_RESIDENT_A_HPP
#define SGEMM_CUBE_BLOCK_BLOCK_MMAD_RESIDENT_A_HPP

#include "kernel_operator.h"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/accumulator_store.hpp"
#include "sgemm_cube/tile/copy.hpp"
#include "sgemm_cube/tile/soc.hpp"

namespace sgemm_cube {
namespace block {

using AscendC::GlobalTensor;
using AscendC::LocalTensor;
using schedule::Step;
using schedule::Sync;

/// GM operands of one launch: hi/lo parts of A and B (FP16, Zz) and one FP32
/// row-major buffer per product term (with the combine in the epilogue only
/// c[kHiHi] is written, with C).  `inv_scale` is 2^-sb, for that combine;
/// `unscale` the guarantee's integers and alpha for the unscale that combine
/// then applies where the batch's words allow it (910A; meta_a null: none).
struct GemmOperands {
    __gm__ half* a[schedule::kParts];
    __gm__ half* b[schedule::kParts];
    __gm__ float* c[schedule::kMaxTerms];
    float inv_scale;
    tile::EpilogueUnscale unscale;
};

template <class SocTag>
class BlockMmadResidentA {
public:
    __aicore__ inline void Init(const schedule::Geometry& g, const GemmOperands& gm, const LocalTensor<uint8_t>& l1,
                                const LocalTensor<uint8_t>& l0a, const LocalTensor<uint8_t>& l0b,
                                const LocalTensor<uint8_t>& l0c, const LocalTensor<uint8_t>& ub)
    {
        g_ = g;
        for (uint32_t p = 0; p < schedule::kParts; ++p) {
            a_[p].SetGlobalBuffer(gm.a[p]);
            b_[p].SetGlobalBuffer(gm.b[p]);
        }
        for (uint32_t t = 0; t < (g.combine_in_epilogue ? 1u : g.terms); ++t) {
            c_[t].SetGlobalBuffer(gm.c[t]);
        }
        inv_scale_ = gm.inv_scale;
        l1_ = l1;
        l0a_ = l0a;
        l0b_ = l0b;
        l0c_ = l0c;
        store_.Init(ub, g);
        if constexpr (SocTag::Arch::kCThroughUb) {
            if (g.combine_in_epilogue) {
                store_.SetUnscale(gm.unscale);
            }
        }
    }

    __aicore__ inline void Finish() { store_.Finish(); }

    // ---- flags: the schedule's Sync directions as AscendC hardware events
    __aicore__ inline void set(Sync s, int32_t id) { flag<true>(s, id); }
    __aicore__ inline void wait(Sync s, int32_t id) { flag<false>(s, id); }

    // ---- data operations, in the order run_core issues them
    /// MTE2: every A tile of the step's group (the resident group), each resident plane.
    __aicore__ inline void load_a_group(const Step& s)
    {
        const uint32_t count = schedule::group_k_blocks(g_, s.group);
        for (uint32_t kk = 0; kk < count; ++kk) {
            const uint32_t k_block = s.group * g_.n_fused + kk;
            const uint32_t k_act = schedule::block_extent(g_.kp, g_.bk, k_block);
            const schedule::FractalRuns runs = schedule::a_tile_runs(g_, s.m_act, k_act);
            const uint64_t src = schedule::gm_a_tile(g_, s.batch, s.row_block, k_block);
            for (uint32_t pos = 0; pos < g_.plan.planes; ++pos) {
                tile::CopyGmToL1(l1_half(schedule::l1_a_offset(g_.plan, pos, kk)),
                                 a_[schedule::a_plane(g_, s.pass_index, pos)][src], runs);
            }
        }
    }
    /// MTE2: the step's B tile, each resident plane, into its ping-pong slot.
    __aicore__ inline void load_b(const Step& s)
    {
        const schedule::FractalRuns runs = schedule::b_tile_runs(g_, s.k_act, s.n_act);
        const uint64_t src = schedule::gm_b_tile(g_, s.batch, s.k_block, s.col_block);
        for (uint32_t pos = 0; pos < g_.plan.planes; ++pos) {
            tile::CopyGmToL1(l1_half(schedule::l1_b_offset(g_.plan, s.b_slot, pos)),
                             b_[schedule::b_plane(g_, s.pass_index, pos)][src], runs);
        }
    }
    /// MTE1: A tile k_in_group -> L0A, B slot -> L0B (each resident plane).
    __aicore__ inline void load_l0(const Step& s)
    {
        for (uint32_t pos = 0; pos < g_.plan.planes; ++pos) {
            tile::CopyL1ToL0A(l0a_half(s.l0_stage, pos),
                              l1_half(schedule::l1_a_offset(g_.plan, pos, s.k_in_group)), s.m_act, s.k_act);
            tile::CopyL1ToL0B(l0b_half(s.l0_stage, pos), l1_half(schedule::l1_b_offset(g_.plan, s.b_slot, pos)),
                              s.k_act, s.n_act);
        }
    }
    /// M: every term of the pass into its own accumulator (termwise order).
    __aicore__ inline void mmad(const Step& s)
    {
        for (uint32_t acc = 0; acc < g_.plan.accumulators; ++acc) {
            const uint32_t t = schedule::pass_term(g_, s.pass_index, acc);
            tile::TileMmad(accumulator(s, acc), l0a_half(s.l0_stage, schedule::term_a_pos(g_, t)),
                           l0b_half(s.l0_stage, schedule::term_b_pos(g_, t)), s.m_act, s.n_act, s.k_act, s.first_k);
        }
    }
    /// Out: accumulators -> GM term buffers (store in group 0, add afterwards),
    /// or, with the combine in the epilogue, C -> the HH buffer.
    __aicore__ inline void store_c(const Step& s)
    {
        const uint64_t dst = schedule::gm_c_tile(g_, s.batch, s.row_block, s.col_block);
        if constexpr (SocTag::Arch::kCThroughUb) {  // only where C passes through UB (910A)
            if (g_.combine_in_epilogue) {
                LocalTensor<float> acc[schedule::kMaxTerms];
                for (uint32_t t = 0; t < g_.terms; ++t) {
                    acc[t] = accumulator(s, t);
                }
                const tile::TileLines lines{s.batch, uint64_t(s.batch) * g_.mp + uint64_t(s.row_block) * g_.bm,
                                            uint64_t(s.batch) * g_.np + uint64_t(s.col_block) * g_.bn};
                store_.StoreCombined(c_[schedule::kHiHi][dst], acc, g_.terms, inv_scale_, s.m_act, s.n_act, g_.np,
                                     lines);
                return;
            }
        }
        for (uint32_t acc = 0; acc < g_.plan.accumulators; ++acc) {
            const uint32_t t = schedule::pass_term(g_, s.pass_index, acc);
            store_(c_[t][dst], accumulator(s, acc), s.m_act, s.n_act, g_.np, !s.first_group);
        }
    }

private:
    template <bool kSet, AscendC::HardEvent kEvent>
    __aicore__ inline void flag(int32_t id)
    {
        if constexpr (kSet) {
            AscendC::SetFlag<kEvent>(id);
        } else {
            AscendC::WaitFlag<kEvent>(id);
        }
    }
    template <bool kSet>
    __aicore__ inline void flag(Sync s, int32_t id)
    {
        switch (s) {
            case Sync::kMte2ToMte1: flag<kSet, AscendC::HardEvent::MTE2_MTE1>(id); break;
            case Sync::kMte1ToMte2: flag<kSet, AscendC::HardEvent::MTE1_MTE2>(id); break;
            case Sync::kMte1ToM: flag<kSet, AscendC::HardEvent::MTE1_M>(id); break;
            case Sync::kMToMte1: flag<kSet, AscendC::HardEvent::M_MTE1>(id); break;
            case Sync::kMToOut: flag<kSet, SocTag::kMToOut>(id); break;
            case Sync::kOutToM: flag<kSet, SocTag::kOutToM>(id); break;
        }
    }

    __aicore__ inline LocalTensor<half> l1_half(uint32_t byte_offset)
    {
        return l1_[byte_offset].ReinterpretCast<half>();
    }
    __aicore__ inline LocalTensor<half> l0a_half(uint32_t stage, uint32_t pos)
    {
        return l0a_[schedule::l0a_offset(g_.plan, stage, pos)].ReinterpretCast<half>();
    }
    __aicore__ inline LocalTensor<half> l0b_half(uint32_t stage, uint32_t pos)
    {
        return l0b_[schedule::l0b_offset(g_.plan, stage, pos)].ReinterpretCast<half>();
    }
    /// Accumulator `acc` of the step's L0C stage.
    __aicore__ inline LocalTensor<float> accumulator(const Step& s, uint32_t acc)
    {
        return l0c_[schedule::l0c_offset(g_.plan, s.l0c_stage, acc)].ReinterpretCast<float>();
    }

    schedule::Geometry g_;
    GlobalTensor<half> a_[schedule::kParts];
    GlobalTensor<half> b_[schedule::kParts];
    GlobalTensor<float> c_[schedule::kMaxTerms];
    float inv_scale_ = 1.0f;
    LocalTensor<uint8_t> l1_, l0a_, l0b_, l0c_;
    tile::AccumulatorStore<SocTag> store_;
};

}  // namespace block
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_BLOCK_BLOCK_MMAD_RESIDENT_A_HPP
