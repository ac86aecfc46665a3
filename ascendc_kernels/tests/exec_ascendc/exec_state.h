// Executable AscendC stand-in, part 1: the state of the simulated AI cores
// and the flag/race checker.  See kernel_operator.h for the API itself.
//
// Model
//   * GM is host memory; the harness registers every GM allocation
//     (register_gm) and every GM access must lie inside one of them.
//   * Each core has byte arrays L1, L0A, L0B, L0C and UB sized from
//     sgemm_cube/arch/arch.hpp for the chip of the build (__NPU_ARCH__); every
//     access is bounds-checked against the physical buffer and against the
//     TBuf region the tensor came from.  Buffers start filled with 0xFF
//     (NaN in FP16 and FP32), so reading what was never written shows.
//   * Cores run one after the other (GetBlockIdx = 0, 1, ...); inside a core
//     every call executes at once, in program order.
//   * Checker: every data operation runs on one pipe (S, V, M, MTE1, MTE2,
//     MTE3, FIX) and gets a timestamp on that pipe.  Vector clocks: pipe p
//     knows that pipe q finished its ops up to vc[p][q].  SetFlag<SRC_DST>
//     snapshots vc[SRC]; WaitFlag<SRC_DST> merges the oldest pending snapshot of
//     the same (event, id) into vc[DST]; PipeBarrier<PIPE_ALL> merges all.
//     Shadow state per 32-byte block of every buffer (last writer, last
//     reader per pipe) finds accesses of two pipes that no flag orders
//     (RAW, WAR, WAW), and accesses of one V (or M) pipe that no
//     PipeBarrier of that pipe orders (the vector unit and, below 10 fractals,
//     the cube do not order dependent instructions themselves: Mmad.md),
//     unless a flag round trip did: another pipe waited for the earlier
//     access to finish and then signalled this pipe (self_done).
//     GM blocks also remember the core that wrote them in the current
//     kernel: another core reading or writing them (atomic adds excepted)
//     is a cross-core race.
//   * Errors: a WaitFlag with no earlier SetFlag, a SetFlag on a flag that is
//     still set, an event id outside 0..7, flags left set at the end of a
//     core's program, and races.  They are counted and reported (report());
//     out-of-bounds accesses and unsupported parameters abort at once.
#ifndef SGEMM_CUBE_EXEC_ASCENDC_EXEC_STATE_H
#define SGEMM_CUBE_EXEC_ASCENDC_EXEC_STATE_H

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace ascend_exec {

enum Mem : int { kGM = 0, kL1, kL0A, kL0B, kL0C, kUB, kMems };
inline const char* mem_name(int m)
{
    static const char* names[] = {"GM", "L1", "L0A", "L0B", "L0C", "UB"};
    return names[m];
}
enum Pipe : int { kS = 0, kV, kM, kMTE1, kMTE2, kMTE3, kFIX, kPipes };
inline const char* pipe_name(int p)
{
    static const char* names[] = {"S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX"};
    return names[p];
}

[[noreturn]] inline void fatal(const char* fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "EXEC-ASCENDC FATAL: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
    std::fflush(stderr);
    std::exit(2);
}

constexpr uint32_t kShadowBlock = 32;

struct Access {
    uint32_t clk = 0;     // 0: none
    uint32_t bepoch = 0;  // barrier epoch of the pipe at the access
    uint64_t op = 0;      // global op serial (same op never conflicts with itself)
    bool ordered = false; // self-ordering op (Mmad of >= 10 fractals)
};
struct Shadow {
    int8_t wpipe = -1;
    Access w;
    Access r[kPipes];
    int32_t wcore = -1;   // GM only: core that wrote it in this kernel
    bool watomic = false; // GM only: that write was an atomic add
    int32_t rcore = -1;   // GM only: a core that read it in this kernel
};

struct FlagSnapshot {
    uint32_t vc[kPipes];
};

struct State {
    // chip-dependent capacities (bytes), filled by kernel_operator.h
    uint32_t cap[kMems] = {0, 0, 0, 0, 0, 0};
    // per-core
    std::vector<uint8_t> mem[kMems];
    std::vector<Shadow> shadow[kMems];
    uint32_t alloc[kMems] = {};
    uint32_t vc[kPipes][kPipes] = {};
    uint32_t bep[kPipes] = {};
    uint32_t self_done[kPipes] = {};  // own ops known finished through a flag round trip
    std::map<std::pair<int, int>, std::deque<FlagSnapshot>> flags;  // (event, id) -> pending sets
    bool atomic_add = false;
    int atomic_bytes = 0;
    int64_t block_idx = 0, block_num = 1;
    uint64_t op_serial = 0;
    bool cur_ordered = false;
    // GM
    std::vector<std::pair<uintptr_t, size_t>> gm_allocs;
    std::unordered_map<uintptr_t, Shadow> gm_shadow;
    // reporting
    std::string kernel;
    std::map<std::string, uint64_t> errors;  // message -> count
    std::vector<std::string> first_errors;
    uint64_t ops = 0, sets = 0, waits = 0, barriers = 0;
};

inline State& st()
{
    static State s;
    return s;
}

/// Count an error; `msg` is its kind (the report groups by it), `detail` is shown for the first one.
inline void error(const std::string& msg, const std::string& detail = std::string())
{
    State& s = st();
    std::string key = s.kernel + ": " + msg;
    if (s.errors[key]++ == 0 && s.first_errors.size() < 50) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " [core %lld]", (long long)s.block_idx);
        s.first_errors.push_back(key + buf + detail);
    }
}

inline void register_gm(const void* p, size_t bytes)
{
    st().gm_allocs.emplace_back(reinterpret_cast<uintptr_t>(p), bytes);
}

inline void check_gm(const void* p, uint64_t bytes, const char* what)
{
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    for (const auto& r : st().gm_allocs) {
        if (a >= r.first && a + bytes <= r.first + r.second) {
            return;
        }
    }
    fatal("%s: GM access [%p, +%llu) outside every registered GM buffer (kernel %s, core %lld)", what, p,
          (unsigned long long)bytes, st().kernel.c_str(), (long long)st().block_idx);
}

/// Start of one core's program.
inline void begin_core(int64_t idx, int64_t num)
{
    State& s = st();
    s.block_idx = idx;
    s.block_num = num;
    for (int m = kL1; m < kMems; ++m) {
        s.mem[m].assign(s.cap[m], 0xFF);
        s.shadow[m].assign((s.cap[m] + kShadowBlock - 1) / kShadowBlock, Shadow{});
        s.alloc[m] = 0;
    }
    std::memset(s.vc, 0, sizeof s.vc);
    std::memset(s.bep, 0, sizeof s.bep);
    std::memset(s.self_done, 0, sizeof s.self_done);
    s.flags.clear();
    s.atomic_add = false;
}

/// End of one core's program: every flag must have been consumed.
inline void end_core()
{
    State& s = st();
    for (const auto& f : s.flags) {
        if (!f.second.empty()) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "flag (event %d, id %d) left set %zu time(s) at the end of the core's program",
                          f.first.first, f.first.second, f.second.size());
            error(buf);
        }
    }
    if (s.atomic_add) {
        error("atomic add still enabled at the end of the core's program");
    }
}

inline void begin_kernel(const char* name)
{
    State& s = st();
    s.kernel = name;
    s.gm_shadow.clear();
}

/// Run ``body`` (one core's program) once per block, cores in turn, as a launch on ``blocks`` cores would.
template <typename F>
void launch(const char* name, uint32_t blocks, F body)
{
    begin_kernel(name);
    for (uint32_t core = 0; core < blocks; ++core) {
        begin_core(core, blocks);
        body();
        end_core();
    }
}

/// One data operation on pipe p starts: its timestamp.
inline void begin_op(int p, bool ordered = false)
{
    State& s = st();
    ++s.vc[p][p];
    ++s.op_serial;
    ++s.ops;
    s.cur_ordered = ordered;
}

inline bool same_pipe_needs_barrier(int p) { return p == kV || p == kM; }

inline void conflict(const char* kind, int mem, uint64_t byte, int earlier, int later)
{
    char buf[200], detail[64];
    std::snprintf(buf, sizeof buf, "race %s on %s: %s access not ordered after %s access", kind, mem_name(mem),
                  pipe_name(later), pipe_name(earlier));
    std::snprintf(detail, sizeof detail, " first at byte %llu", (unsigned long long)byte);
    error(buf, detail);
}

inline void check_one(const Access& a, int apipe, int p, const char* kind, int mem, uint64_t byte)
{
    State& s = st();
    if (a.clk == 0 || a.op == s.op_serial) {
        return;
    }
    if (apipe != p) {
        if (s.vc[p][apipe] < a.clk) {
            conflict(kind, mem, byte, apipe, p);
        }
    } else if (same_pipe_needs_barrier(p)) {
        if (a.bepoch == s.bep[p] && !(p == kM && s.cur_ordered) && a.clk > s.self_done[p]) {
            conflict(kind, mem, byte, apipe, p);
        }
    }
}

inline void track(Shadow& sh, int p, bool write, int mem, uint64_t byte, bool atomic)
{
    State& s = st();
    if (sh.wpipe >= 0) {
        check_one(sh.w, sh.wpipe, p, write ? "WAW" : "RAW", mem, byte);
    }
    if (write) {
        for (int q = 0; q < kPipes; ++q) {
            check_one(sh.r[q], q, p, "WAR", mem, byte);
        }
    }
    Access a;
    a.clk = s.vc[p][p];
    a.bepoch = s.bep[p];
    a.op = s.op_serial;
    a.ordered = s.cur_ordered;
    if (mem == kGM) {
        const int32_t core = int32_t(s.block_idx);
        if (sh.wcore >= 0 && sh.wcore != core && !(write && atomic && sh.watomic)) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "cross-core race on GM: core %d %s a block core %d wrote", core,
                          write ? "writes" : "reads", sh.wcore);
            error(buf);
        }
        if (write && sh.rcore >= 0 && sh.rcore != core) {
            char buf[160];
            std::snprintf(buf, sizeof buf, "cross-core race on GM: core %d writes a block core %d read", core, sh.rcore);
            error(buf);
        }
        if (write) {
            sh.wcore = core;
            sh.watomic = atomic;
        } else {
            sh.rcore = core;
        }
    }
    if (write) {
        sh.wpipe = int8_t(p);
        sh.w = a;
        for (int q = 0; q < kPipes; ++q) {
            sh.r[q] = Access{};
        }
    } else {
        sh.r[p] = a;
    }
}

/// Record an access of `bytes` bytes at byte offset `off` of local memory `mem`.
inline void access_local(int mem, uint64_t off, uint64_t bytes, int p, bool write)
{
    State& s = st();
    if (bytes == 0) {
        return;
    }
    for (uint64_t b = off / kShadowBlock; b <= (off + bytes - 1) / kShadowBlock; ++b) {
        track(s.shadow[mem][b], p, write, mem, b * kShadowBlock, false);
    }
}

inline void access_gm(const void* ptr, uint64_t bytes, int p, bool write, bool atomic = false)
{
    State& s = st();
    if (bytes == 0) {
        return;
    }
    const uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
    for (uintptr_t b = a / kShadowBlock; b <= (a + bytes - 1) / kShadowBlock; ++b) {
        track(s.gm_shadow[b], p, write, kGM, b * kShadowBlock, atomic);
    }
}

inline void set_flag(int event, int src, int id)
{
    State& s = st();
    ++s.sets;
    if (id < 0 || id > 7) {
        error("SetFlag with event id outside 0..7");
    }
    // SetFlag is issued on the source pipe after its earlier work.
    ++s.vc[src][src];
    auto& q = s.flags[{event, id}];
    if (!q.empty()) {
        char buf[120];
        std::snprintf(buf, sizeof buf, "SetFlag (event %d, id %d) while the flag is still set", event, id);
        error(buf);
    }
    FlagSnapshot snap;
    std::memcpy(snap.vc, s.vc[src], sizeof snap.vc);
    q.push_back(snap);
}

inline void wait_flag(int event, int dst, int id)
{
    State& s = st();
    ++s.waits;
    auto& q = s.flags[{event, id}];
    if (q.empty()) {
        char buf[120];
        std::snprintf(buf, sizeof buf, "WaitFlag (event %d, id %d) with no earlier matching SetFlag", event, id);
        error(buf);
        return;
    }
    const FlagSnapshot snap = q.front();
    q.pop_front();
    for (int i = 0; i < kPipes; ++i) {
        if (snap.vc[i] > s.vc[dst][i]) {
            s.vc[dst][i] = snap.vc[i];
        }
    }
    // The source pipe knew the destination's own ops up to snap.vc[dst] had finished.
    if (snap.vc[dst] > s.self_done[dst]) {
        s.self_done[dst] = snap.vc[dst];
    }
}

inline void barrier(int p, bool all)
{
    State& s = st();
    ++s.barriers;
    if (!all) {
        ++s.bep[p];
        return;
    }
    uint32_t mx[kPipes] = {};
    for (int a = 0; a < kPipes; ++a) {
        for (int b = 0; b < kPipes; ++b) {
            if (s.vc[a][b] > mx[b]) {
                mx[b] = s.vc[a][b];
            }
        }
    }
    for (int a = 0; a < kPipes; ++a) {
        std::memcpy(s.vc[a], mx, sizeof mx);
        ++s.bep[a];
    }
}

/// Text report of the checker (one line per distinct error, then totals).
inline int report(FILE* f)
{
    State& s = st();
    uint64_t total = 0;
    for (const auto& e : s.errors) {
        total += e.second;
    }
    for (const auto& e : s.first_errors) {
        std::fprintf(f, "CHECK-ERROR %s (x%llu)\n", e.c_str(),
                     (unsigned long long)s.errors[e.substr(0, e.find(" [core "))]);
    }
    std::fprintf(f, "CHECK-SUMMARY errors=%llu distinct=%zu ops=%llu setflags=%llu waitflags=%llu barriers=%llu\n",
                 (unsigned long long)total, s.errors.size(), (unsigned long long)s.ops, (unsigned long long)s.sets,
                 (unsigned long long)s.waits, (unsigned long long)s.barriers);
    return total == 0 ? 0 : 1;
}

}  // namespace ascend_exec

#endif  // SGEMM_CUBE_EXEC_ASCENDC_EXEC_STATE_H
