// Tile layer, vector unit: the UB and the flags around a vector kernel's tiles, written once.  Every
// vector kernel takes its UB from VectorUb; the split, the line statistics, the unscale and the combine
// (kernel/split_kernel.hpp, line_stats_kernel.hpp, unscale_kernel.hpp, combine_kernel.hpp) cycle through
// their stages with VectorStages.  Each kernel keeps its schedule (which tile goes to which stage, when)
// and says with these calls where a pipe hands a stage to the next.
//
// A stage is a region of UB that a tile passes through MTE2 (the load) -> V (the element operations)
// -> MTE3 (the store).  The pipes run concurrently, so each hand-off is a flag, event id = the stage:
//
//   V_MTE2      the vector unit has read the stage's input: MTE2 may load the next tile into it
//   MTE2_V      the load has arrived: the vector unit may read it
//   V_MTE3      the results are computed: MTE3 may store them
//   MTE3_V      (results in their own buffers, the split) the results are stored: V may write them again
//   MTE3_MTE2   (results in place over the input, the unscale) the results are stored: MTE2 may load
//
// The "free" flags (V_MTE2 and the MTE3_ one) are set once per stage before the first tile and waited
// once after the last, so that no flag is left set when the kernel returns (the executable stand-in's
// checker reports one).  A kernel's other hand-offs (to and from the scalar unit) use Handoff.
#ifndef SGEMM_CUBE_TILE_VECTOR_STAGES_HPP
#define SGEMM_CUBE_TILE_VECTOR_STAGES_HPP

#include "kernel_operator.h"

namespace sgemm_cube {
namespace tile {

/// `bytes` of UB as one VECCALC buffer, for the kernel to carve into its tiles.  The TPipe only places
/// the buffer: it is destroyed here (as every vector kernel did right after carving; its destructor then
/// does nothing more), the tensors stay valid.
__aicore__ inline AscendC::LocalTensor<uint8_t> VectorUb(uint32_t bytes)
{
    AscendC::TPipe pipe;
    AscendC::TBuf<AscendC::TPosition::VECCALC> ub;
    pipe.InitBuffer(ub, bytes);
    const AscendC::LocalTensor<uint8_t> base = ub.Get<uint8_t>();
    pipe.Destroy();
    return base;
}

/// Event E's flag set and waited at once: the waiting pipe goes on only after the setting pipe's work so
/// far (a one-way hand-off with nothing to overlap in between).
template <AscendC::HardEvent E>
__aicore__ inline void Handoff(int32_t event)
{
    AscendC::SetFlag<E>(event);
    AscendC::WaitFlag<E>(event);
}

/// Where a stage's results are, for the flag that frees them after their store.
enum class StageResults {
    kNone,        ///< no vector results stored from the stage (the line statistics: the scalar unit reads it)
    kOwnBuffers,  ///< their own buffers beside the input: the vector unit waits before writing them (MTE3_V)
    kInPlace,     ///< over the stage's input: the next load into the stage waits (MTE3_MTE2)
};

/// The flags of N UB stages of one vector kernel (see the file comment); stage st uses event id st.
template <uint32_t N, StageResults R>
class VectorStages {
public:
    static constexpr uint32_t kStages = N;

    /// The stage of a core's n-th tile: the stages are used in turn.
    static __aicore__ inline uint32_t Of(uint32_t n) { return n % N; }

    /// Every stage free, before the first tile.
    __aicore__ inline void Open() const
    {
        for (uint32_t st = 0; st < N; ++st) {
            AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(int32_t(st));
            if (R == StageResults::kOwnBuffers) {
                AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(int32_t(st));
            } else if (R == StageResults::kInPlace) {
                AscendC::SetFlag<AscendC::HardEvent::MTE3_MTE2>(int32_t(st));
            }
        }
    }
    /// Before the loads into stage st: its input has been read (in place: and its results stored).
    __aicore__ inline void AwaitLoadable(uint32_t st) const
    {
        AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(int32_t(st));
        if (R == StageResults::kInPlace) {
            AscendC::WaitFlag<AscendC::HardEvent::MTE3_MTE2>(int32_t(st));
        }
    }
    /// After the loads into stage st are issued: the vector unit may read them once AwaitLoaded returns.
    __aicore__ inline void Loaded(uint32_t st) const { AscendC::SetFlag<AscendC::HardEvent::MTE2_V>(int32_t(st)); }
    __aicore__ inline void AwaitLoaded(uint32_t st) const { AscendC::WaitFlag<AscendC::HardEvent::MTE2_V>(int32_t(st)); }
    /// The vector unit has issued its last read of stage st's input: the next load may overwrite it.
    __aicore__ inline void InputRead(uint32_t st) const { AscendC::SetFlag<AscendC::HardEvent::V_MTE2>(int32_t(st)); }
    /// Results in their own buffers: before the vector unit writes stage st's, the previous ones are stored.
    __aicore__ inline void AwaitResultsStored(uint32_t st) const
    {
        static_assert(R == StageResults::kOwnBuffers, "only results in their own buffers wait on the vector unit");
        AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(int32_t(st));
    }
    /// Stage st's results are computed: MTE3 stores them next (its DataCopy calls follow this).
    __aicore__ inline void Computed(uint32_t st) const { Handoff<AscendC::HardEvent::V_MTE3>(int32_t(st)); }
    /// Stage st's stores are issued: its results' buffer may be written again once they are done.
    __aicore__ inline void Stored(uint32_t st) const
    {
        static_assert(R != StageResults::kNone, "no results stored from the stages");
        if (R == StageResults::kOwnBuffers) {
            AscendC::SetFlag<AscendC::HardEvent::MTE3_V>(int32_t(st));
        } else {
            AscendC::SetFlag<AscendC::HardEvent::MTE3_MTE2>(int32_t(st));
        }
    }
    /// After the last tile: every stage's free flags consumed (none left set at the kernel's end).
    __aicore__ inline void Close() const
    {
        for (uint32_t st = 0; st < N; ++st) {
            AscendC::WaitFlag<AscendC::HardEvent::V_MTE2>(int32_t(st));
            if (R == StageResults::kOwnBuffers) {
                AscendC::WaitFlag<AscendC::HardEvent::MTE3_V>(int32_t(st));
            } else if (R == StageResults::kInPlace) {
                AscendC::WaitFlag<AscendC::HardEvent::MTE3_MTE2>(int32_t(st));
            }
        }
    }
};

}  // namespace tile
}  // namespace sgemm_cube

#endif  // SGEMM_CUBE_TILE_VECTOR_STAGES_HPP
