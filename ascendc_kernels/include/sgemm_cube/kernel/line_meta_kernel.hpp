// Kernel layer, scalar unit of a vector core: each line's scaling exponent and class from its
// statistics (line_stats_kernel.hpp), guard.meta_from_stats bit for bit (guard/line_meta.hpp),
// packed one int32 per line as guard.pack_meta.  A few integer operations per line: the lines
// go through UB in chunks of schedule::kMetaChunk, chunks to cores round-robin.  "matrix"
// scaling needs the largest `big` of the line's whole batch: each core scans it once per
// batch it meets.
//
// It also sets the batches' words (schedule::kFlagWords, batch_flags.hpp): for each chunk and batch it
// covers, 1 is added (FP32 atomic add, into a block the host zeroed) to the batch's kFlagScaled word
// when a line has t != 0, to its kFlagListed word when a line has class >= fixup_min_class, to its
// kFlagWide word when a line's |t| is beyond schedule::kFastLineExponent (the unscale's fast path then not
// guaranteed for the whole batch).  A's and B's launches add into the same blocks, so a word is +0
// exactly when no line of the batch needs it.
#ifndef SGEMM_CUBE_KERNEL_LINE_META_KERNEL_HPP
#define SGEMM_CUBE_KERNEL_LINE_META_KERNEL_HPP

#include "kernel_operator.h"
#include "sgemm_cube/guard/line_meta.hpp"
#include "sgemm_cube/kernel/line_stats_kernel.hpp"
#include "sgemm_cube/schedule/schedule.hpp"
#include "sgemm_cube/tile/soc.hpp"
#include "sgemm_cube/tile/vector_stages.hpp"

namespace sgemm_cube {
namespace kernel {

struct LineMetaArgs {
    uint32_t batch, lines;  ///< lines per batch (padded, a multiple of 16)
    uint32_t sb;            ///< residual exponent of the FP16 split
    uint32_t scale;         ///< guard::Scale
    uint32_t fixup;         ///< 1: class-1 lines are recomputed in FP32 too
    uint32_t plan_cores;
    uint32_t subnormals;    ///< guard::Subnormals: the split range's lower bound (1: safe if FP16 subnormals flush)
};

class LineMetaChunks {
public:
    __aicore__ inline void Init(const AscendC::LocalTensor<uint8_t>& base, const LineStatsOut& in,
                                __gm__ int32_t* meta, __gm__ float* flags)
    {
        constexpr uint32_t kBytes = schedule::kMetaChunk * 4;
        big_ = base[0].ReinterpretCast<int32_t>();
        small_ = base[kBytes].ReinterpretCast<int32_t>();
        finite_ = base[2 * kBytes].ReinterpretCast<int32_t>();
        out_ = base[3 * kBytes].ReinterpretCast<int32_t>();
        flag_ = base[4 * kBytes].ReinterpretCast<float>();
        gbig_.SetGlobalBuffer(in.big);
        gsmall_.SetGlobalBuffer(in.small_w);
        gfinite_.SetGlobalBuffer(in.finite);
        gmeta_.SetGlobalBuffer(meta);
        has_flags_ = flags != nullptr;
        if (has_flags_) {
            gflags_.SetGlobalBuffer(flags);
            for (uint32_t i = 0; i < schedule::kFlagWords; ++i) {
                flag_.SetValue(i, 0.0f);
            }
        }
        AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0);  // inputs free
        AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(0);  // output free
        AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(1);  // the batch block free
    }
    /// Adds 1 to batch `b`'s words that `scaled` / `listed` / `wide` say (nothing when none).
    __aicore__ inline void AddFlags(uint32_t b, bool scaled, bool listed, bool wide)
    {
        if (!has_flags_ || !(scaled || listed || wide)) {
            return;
        }
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(1);
        flag_.SetValue(schedule::kFlagScaled, scaled ? 1.0f : 0.0f);
        flag_.SetValue(schedule::kFlagListed, listed ? 1.0f : 0.0f);
        flag_.SetValue(schedule::kFlagWide, wide ? 1.0f : 0.0f);
        AscendC::SetFlag<AscendC::HardEvent::S_MTE3>(1);
        AscendC::WaitFlag<AscendC::HardEvent::S_MTE3>(1);
        AscendC::SetAtomicAdd<float>();
        AscendC::DataCopy(gflags_[uint64_t(b) * schedule::kFlagWords], flag_, AscendC::DataCopyParams(1, 1, 0, 0));
        AscendC::SetAtomicNone();
        AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(1);
    }
    /// `count` lines from `first` into UB (all three statistics, or `big` alone), ready for the scalar unit.
    __aicore__ inline void Load(uint64_t first, uint32_t count, bool all)
    {
        const AscendC::DataCopyParams run(1, uint16_t(count * 4 / schedule::kBlockBytes), 0, 0);
        AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(0);
        AscendC::DataCopy(big_, gbig_[first], run);
        if (all) {
            AscendC::DataCopy(small_, gsmall_[first], run);
            AscendC::DataCopy(finite_, gfinite_[first], run);
        }
        AscendC::SetFlag<AscendC::HardEvent::MTE2_S>(0);
        AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(0);
    }
    __aicore__ inline void Release() { AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(0); }
    __aicore__ inline void Finish()
    {
        AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(0);
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(0);
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(1);
    }

    AscendC::LocalTensor<int32_t> big_, small_, finite_, out_;
    AscendC::LocalTensor<float> flag_;
    AscendC::GlobalTensor<int32_t> gbig_, gsmall_, gfinite_, gmeta_;
    AscendC::GlobalTensor<float> gflags_;
    bool has_flags_ = false;
};

template <class SocTag>
__aicore__ inline void RunLineMeta(const LineStatsOut& in, __gm__ int32_t* meta, __gm__ float* flags,
                                   const LineMetaArgs& args)
{
    constexpr uint32_t kChunk = schedule::kMetaChunk;
    const uint64_t total = uint64_t(args.batch) * args.lines;
    const uint32_t chunks = uint32_t((total + kChunk - 1) / kChunk);
    const uint32_t cores = schedule::min_u32(args.plan_cores, chunks);
    const uint32_t core = uint32_t(AscendC::GetBlockIdx());
    if (core >= cores) {
        return;
    }
    const guard::LineRange range = guard::fp16_line_range(args.sb, guard::Subnormals(args.subnormals));
    const guard::Scale scale = guard::Scale(args.scale);
    LineMetaChunks io;
    io.Init(tile::VectorUb(schedule::kMetaUbBytes), in, meta, flags);
    const int32_t listed_from = args.fixup != 0 ? 1 : 2;  // guard.fixup_min_class

    uint32_t matrix_batch = ~0u;  // the batch whose "matrix" exponent t_matrix holds
    int32_t t_matrix = 0;
    for (uint32_t c = core; c < chunks; c += cores) {
        const uint64_t first = uint64_t(c) * kChunk;
        const uint32_t count = uint32_t(total - first < kChunk ? total - first : kChunk);
        const uint32_t first_batch = uint32_t(first / args.lines);
        const uint32_t last_batch = uint32_t((first + count - 1) / args.lines);
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_S>(0);
        for (uint32_t b = first_batch; b <= last_batch; ++b) {
            if (scale == guard::Scale::kMatrix && b != matrix_batch) {
                uint32_t big = 0;  // the batch's largest finite magnitude, scanned chunk by chunk
                for (uint64_t at = uint64_t(b) * args.lines; at < uint64_t(b + 1) * args.lines; at += kChunk) {
                    const uint64_t left = uint64_t(b + 1) * args.lines - at;
                    const uint32_t n = uint32_t(left < kChunk ? left : kChunk);
                    io.Load(at, n, false);
                    for (uint32_t i = 0; i < n; ++i) {
                        const uint32_t v = uint32_t(io.big_.GetValue(i));
                        big = v > big ? v : big;
                    }
                    io.Release();
                }
                matrix_batch = b;
                t_matrix = guard::matrix_t(big, range);
            }
            const uint64_t lo = b == first_batch ? first : uint64_t(b) * args.lines;
            const uint64_t hi = b == last_batch ? first + count : uint64_t(b + 1) * args.lines;
            io.Load(lo, uint32_t(hi - lo), true);
            bool scaled = false, listed = false, wide = false;
            for (uint32_t i = 0; i < uint32_t(hi - lo); ++i) {
                const guard::LineStats s{uint32_t(io.big_.GetValue(i)), uint32_t(io.small_.GetValue(i)),
                                         io.finite_.GetValue(i)};
                const guard::LineMeta m = guard::meta_from_stats(s, range, scale, t_matrix, args.fixup != 0);
                scaled = scaled || m.t != 0;
                listed = listed || m.cls >= listed_from;
                wide = wide || !schedule::fast_line_exponent(m.t);
                io.out_.SetValue(uint32_t(lo - first) + i, guard::pack(m));
            }
            io.Release();
            io.AddFlags(b, scaled, listed, wide);
        }
        AscendC::SetFlag<AscendC::HardEvent::S_MTE3>(0);
        AscendC::WaitFlag<AscendC::HardEvent::S_MTE3>(0);
        AscendC::DataCopy(io.gmeta_[first], io.out_, AscendC::DataCopyParams(1, uint16_t(count * 4 / schedule::kBlockBytes), 0, 0));
        AscendC::SetFlag<AscendC::HardEvent::MTE3_S>(0);
    }
    io.Finish();
}

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_LINE_META_KERNEL_HPP
