// Kernel layer, any vector kernel: the per-batch words of the guarantee's bookkeeping
// (schedule::kFlagWords per batch, set by line_meta_kernel.hpp): whether any line of a batch is
// scaled (word schedule::kFlagScaled), listed for the fix-up (schedule::kFlagListed) or wide (|t| beyond
// schedule::kFlagWide's bound, kFastLineExponent: the unscale's fast path not guaranteed).  The split's
// line scaling, the unscale (alone or in the combine) and the fix-up kernels ask before their work and
// skip it for a batch whose word is +0: data that needs no scaling pays no scaling pass, with no host
// synchronisation (the word never leaves the device).
//
// The scalar unit reads the words (MTE2 brings at most kFlagReadBatches blocks into UB, then MTE2_S;
// S_MTE2 before the next load), as integers: a word is the FP32 sum of 1s the meta kernel added, so
// its bits are 0 exactly when nothing was added.  A null `flags` pointer means "not known" (the
// FP32 route's fix-up, which lists every row): every batch then does the work.  The last answer is
// kept, so a core walking the lines of one batch reads its block once.
#ifndef SGEMM_CUBE_KERNEL_BATCH_FLAGS_HPP
#define SGEMM_CUBE_KERNEL_BATCH_FLAGS_HPP

#include "kernel_operator.h"
#include "sgemm_cube/schedule/schedule.hpp"

namespace sgemm_cube {
namespace kernel {

class BatchFlags {
public:
    static constexpr int32_t kEvent = 2;  ///< event id of its MTE2_S / S_MTE2 flags (0 and 1 are the kernels')

    /// `ub`: schedule::kFlagUbBytes of UB, 32-byte aligned; `flags`: the words, or nullptr (unknown).
    __aicore__ inline void Init(const AscendC::LocalTensor<uint8_t>& ub, __gm__ float* flags)
    {
        known_ = flags != nullptr;
        if (known_) {
            words_ = ub.ReinterpretCast<int32_t>();
            g_.SetGlobalBuffer(reinterpret_cast<__gm__ int32_t*>(flags));
        }
        AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(kEvent);  // the staging is free
    }

    /// Whether word `word` (schedule::kFlagScaled, kFlagListed or kFlagWide) is set for any batch in [first, last].
    __aicore__ inline bool Any(uint32_t first, uint32_t last, uint32_t word)
    {
        if (!known_) {
            return true;
        }
        if (cached_ && first == first_ && last == last_ && word == word_) {
            return answer_;
        }
        bool any = false;
        for (uint32_t b0 = first; b0 <= last && !any; b0 += schedule::kFlagReadBatches) {
            const uint32_t n = schedule::min_u32(schedule::kFlagReadBatches, last - b0 + 1);
            AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(kEvent);
            AscendC::DataCopy(words_, g_[uint64_t(b0) * schedule::kFlagWords], AscendC::DataCopyParams(1, uint16_t(n), 0, 0));
            AscendC::SetFlag<AscendC::HardEvent::MTE2_S>(kEvent);
            AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(kEvent);
            for (uint32_t i = 0; i < n; ++i) {
                any = any || words_.GetValue(i * schedule::kFlagWords + word) != 0;
            }
            AscendC::SetFlag<AscendC::HardEvent::S_MTE2>(kEvent);
        }
        cached_ = true;
        first_ = first;
        last_ = last;
        word_ = word;
        answer_ = any;
        return any;
    }

    /// Consume the "free" flag so none is left set at kernel end.
    __aicore__ inline void Finish() { AscendC::WaitFlag<AscendC::HardEvent::S_MTE2>(kEvent); }

private:
    AscendC::LocalTensor<int32_t> words_;
    AscendC::GlobalTensor<int32_t> g_;
    bool known_ = false;
    bool cached_ = false;
    bool answer_ = false;
    uint32_t first_ = 0, last_ = 0, word_ = 0;
};

}  // namespace kernel
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_KERNEL_BATCH_FLAGS_HPP
