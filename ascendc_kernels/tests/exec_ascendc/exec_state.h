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
//     core's program, races, and breaches of what the docs require of every
//     call: operand start addresses aligned as their buffer needs
//     (check_align), PipeBarrier<PIPE_M> between an Mmad of fewer than 10
//     fractals and the next Mmad into the same L0C (mmad_barrier_rule), no
//     NaN/Inf on the cube.  They are counted and reported (report());
//     out-of-bounds accesses and unsupported parameters abort at once.
//   * Arithmetic: the hardware behaviours the docs leave open
//     (cpu_fallback/arithmetic.py, same field names and values) are chosen at
//     start-up by the environment variable SGEMM_CUBE_EXEC_ARITHMETIC
//     ("field=value,..."; unset or empty: the defaults), so that one build runs
//     every alternative; report() prints the choice in force.
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

// ------------------------------------------------------------- arithmetic
/// Environment variable naming the arithmetic (read once, before main).
constexpr const char* kArithmeticEnv = "SGEMM_CUBE_EXEC_ARITHMETIC";

/// One open behaviour: its name and values, the default first (cpu_fallback/arithmetic.py's CHOICES).
struct ArithmeticField {
    const char* name;
    const char* values[3];
    int count;
};
enum ArithmeticFieldIndex : int { kCastField = 0, kOverflowField, kSubnormalsField, kAccumulateField, kAtomicField,
                                  kL0cToUbField, kArithmeticFields };
inline const ArithmeticField* arithmetic_fields()
{
    static const ArithmeticField f[kArithmeticFields] = {
        {"cast", {"rint", "trunc", nullptr}, 2},
        {"overflow", {"inf", "saturate", nullptr}, 2},
        {"subnormals", {"gradual", "flush", nullptr}, 2},
        {"accumulate", {"cube16", "sequential", "truncate"}, 3},
        {"atomic", {"rne", "trunc", nullptr}, 2},
        {"l0c_to_ub", {"block", "unsupported", nullptr}, 2},
    };
    return f;
}
enum class Accumulate : int { kCube16 = 0, kSequential = 1, kTruncate = 2 };

/// The choice for every open behaviour, as indices into arithmetic_fields() (0 = default).
struct Arithmetic {
    int v[kArithmeticFields] = {0, 0, 0, 0, 0, 0};
    /// Cast FP32 -> FP16 with CAST_NONE, when lossy: toward zero (else nearest even).
    bool cast_trunc() const { return v[kCastField] == 1; }
    /// FP32 -> FP16 Cast beyond FP16's range: +-65504 in every round mode (else as the mode rounds).
    bool saturate() const { return v[kOverflowField] == 1; }
    /// FP16 subnormals read and written as zero of the same sign (Cast both ways, Mmad's half operands).
    bool flush() const { return v[kSubnormalsField] == 1; }
    Accumulate accumulate() const { return Accumulate(v[kAccumulateField]); }
    /// FP32 atomic add into GM rounds toward zero (else nearest even).
    bool atomic_trunc() const { return v[kAtomicField] == 1; }
    /// 910A's L0C -> UB block copy fails.
    bool l0c_to_ub_unsupported() const { return v[kL0cToUbField] == 1; }
    /// The fields that differ from the default as "field=value,..." ("default" when none), like Arithmetic.__str__.
    std::string text() const
    {
        std::string out;
        for (int i = 0; i < kArithmeticFields; ++i) {
            if (v[i] != 0) {
                out += (out.empty() ? "" : ",") + std::string(arithmetic_fields()[i].name) + "=" +
                       arithmetic_fields()[i].values[v[i]];
            }
        }
        return out.empty() ? "default" : out;
    }
};

/// Arithmetic.parse of cpu_fallback/arithmetic.py: comma-separated field=value, blanks ignored, fields
/// left out at their default, a repeated field's last value wins; anything else is a fatal error naming
/// the valid fields or values.
inline Arithmetic parse_arithmetic(const char* text)
{
    Arithmetic a;
    std::string s;
    for (const char* c = text ? text : ""; *c; ++c) {
        if (*c != ' ') {
            s += *c;
        }
    }
    const ArithmeticField* f = arithmetic_fields();
    size_t at = 0;
    while (at <= s.size()) {
        size_t end = s.find(',', at);
        if (end == std::string::npos) {
            end = s.size();
        }
        const std::string item = s.substr(at, end - at);
        at = end + 1;
        if (item.empty()) {
            continue;
        }
        const size_t eq = item.find('=');
        const std::string field = item.substr(0, eq), value = eq == std::string::npos ? "" : item.substr(eq + 1);
        int fi = -1;
        for (int i = 0; i < kArithmeticFields; ++i) {
            if (field == f[i].name) {
                fi = i;
            }
        }
        if (eq == std::string::npos || fi < 0) {
            std::string names;
            for (int i = 0; i < kArithmeticFields; ++i) {
                names += (i ? ", " : "") + std::string(f[i].name);
            }
            fatal("%s: bad item '%s': write field=value with a field of %s", kArithmeticEnv, item.c_str(),
                  names.c_str());
        }
        int vi = -1;
        std::string values;
        for (int j = 0; j < f[fi].count; ++j) {
            values += (j ? ", " : "") + std::string(f[fi].values[j]);
            if (value == f[fi].values[j]) {
                vi = j;
            }
        }
        if (vi < 0) {
            fatal("%s: unknown %s='%s'; choose one of %s", kArithmeticEnv, f[fi].name, value.c_str(), values.c_str());
        }
        a.v[fi] = vi;
    }
    return a;
}

// ------------------------------------------------------------- alignment
/// Start-address alignment of an operand in each buffer (docs: 通用说明和约束.md, table 2 "通用地址对齐约束";
/// 矩阵计算的搬入/矩阵计算输入搬运约束.md).  GM: none.  L0C: 64 bytes in general (Fixpipe.md says the same for
/// its source); Mmad.md asks 1024 for its C, checked in Mmad.
inline uint32_t required_alignment(int mem)
{
    static const uint32_t a[] = {1, 32, 512, 512, 64, 32};  // GM, L1, L0A, L0B, L0C, UB
    return a[mem];
}

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

/// An Mmad of fewer than 10 fractals ((m/16)*(n/16) < 10): the next Mmad into its L0C region needs a
/// PipeBarrier<PIPE_M> in between (Mmad.md, 同步优化说明).
struct SmallMmad {
    uint64_t begin, end;  // L0C bytes written
    uint32_t bepoch;      // PIPE_M barrier epoch when it was issued
};

struct State {
    // chip-dependent capacities (bytes), filled by kernel_operator.h
    uint32_t cap[kMems] = {0, 0, 0, 0, 0, 0};
    // the open behaviours in force (SGEMM_CUBE_EXEC_ARITHMETIC, parsed before main)
    Arithmetic arith;
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
    std::vector<SmallMmad> small_mmads;  // since the last PIPE_M barrier
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

inline const Arithmetic& arith() { return st().arith; }

/// Reads SGEMM_CUBE_EXEC_ARITHMETIC once, at start-up (a bad value stops the program before main).
struct ArithmeticInit {
    ArithmeticInit() { st().arith = parse_arithmetic(std::getenv(kArithmeticEnv)); }
};
inline ArithmeticInit g_arithmetic_init;

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
    s.small_mmads.clear();
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

/// An operand of `what` starting at byte `addr` of local memory `mem` must be `need`-byte aligned
/// (default: the buffer's own requirement, required_alignment); a breach is a checker error.
inline void check_align(int mem, uint64_t addr, const char* what, uint32_t need = 0, const char* rule = nullptr)
{
    if (need == 0) {
        need = required_alignment(mem);
    }
    if (addr % need == 0) {
        return;
    }
    char buf[200], detail[160];
    std::snprintf(buf, sizeof buf, "misaligned operand: %s start address not %u-byte aligned (%s)", mem_name(mem),
                  need, rule ? rule : "docs: 通用说明和约束.md, 通用地址对齐约束");
    std::snprintf(detail, sizeof detail, " first in %s at byte %llu", what, (unsigned long long)addr);
    error(buf, detail);
}

/// Mmad.md (同步优化说明): after an Mmad with (m/16)*(n/16) < 10 the cube does not order the next Mmad on
/// the same L0C by itself; a PipeBarrier<PIPE_M> must come between.  Called by every Mmad with the L0C
/// bytes it writes; `small` says whether it is itself below the threshold.
inline void mmad_barrier_rule(uint64_t begin, uint64_t end, bool small)
{
    State& s = st();
    bool missing = false;
    size_t keep = 0;
    for (const SmallMmad& e : s.small_mmads) {
        if (e.bepoch != s.bep[kM]) {
            continue;  // a PIPE_M (or PIPE_ALL) barrier came after it: ordered, forget it
        }
        missing = missing || (begin < e.end && e.begin < end);
        s.small_mmads[keep++] = e;
    }
    s.small_mmads.resize(keep);
    if (missing) {
        char detail[96];
        std::snprintf(detail, sizeof detail, " first at L0C byte %llu", (unsigned long long)begin);
        error("Mmad into the L0C of an Mmad with (m/16)*(n/16) < 10 without PipeBarrier<PIPE_M> in between "
              "(Mmad.md)",
              detail);
    }
    if (small && end > begin) {
        s.small_mmads.push_back(SmallMmad{begin, end, s.bep[kM]});
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
    std::fprintf(f, "ARITHMETIC %s\n", s.arith.text().c_str());
    std::fprintf(f, "CHECK-SUMMARY errors=%llu distinct=%zu ops=%llu setflags=%llu waitflags=%llu barriers=%llu\n",
                 (unsigned long long)total, s.errors.size(), (unsigned long long)s.ops, (unsigned long long)s.sets,
                 (unsigned long long)s.waits, (unsigned long long)s.barriers);
    return total == 0 ? 0 : 1;
}

}  // namespace ascend_exec

#endif  // SGEMM_CUBE_EXEC_ASCENDC_EXEC_STATE_H
