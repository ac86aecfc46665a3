// g++ test driver for the plain C++ scheduling header (no AscendC needed).
//
//   g++ -std=c++17 -O1 -Wall -Wextra -Werror -I ascendc_kernels/include
//       -I ascendc_kernels/host ascendc_kernels/tests/test_schedule.cpp -o test_schedule
//   ./test_schedule              # run every check, exit status 0 on success
//   ./test_schedule --dump SOC BATCH M N K BM BK BN NFUSED CORES TERMS [PER_TERM]
//                                # print the step sequence of every core (the
//                                # Python schedule model is compared with it)
//
// What is checked, for a table of problems x tilings x core counts x SoCs:
//   * every element of every C block is written by exactly one core, every
//     (pass, C block, K block) is computed exactly once, K blocks of a group
//     run in order and the groups of a C block are written back in order;
//   * every buffer offset of every step lies inside the plan, and the plan
//     inside the SoC's L1/L0A/L0B/L0C/UB, with the AscendC alignments;
//   * GM tile addresses stay inside the padded operand buffers;
//   * the flag protocol of run_core never deadlocks, never sets a flag twice
//     without a wait in between, and never lets a buffer be read while it is
//     being (re)filled or refilled before its reader is done - replayed on a
//     model of the MTE2/MTE1/M/Out pipes with random operation times;
//   * the split and combine kernels' tiles cover their outputs exactly once;
//   * the host launch plan (host/launch_plan.hpp) sizes match the geometry.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "launch_plan.hpp"
#include "soc_name.hpp"
#include "sgemm_cube/arch/arch.hpp"
#include "sgemm_cube/schedule/schedule.hpp"

using namespace sgemm_cube;
using namespace sgemm_cube::schedule;

namespace {

int g_failures = 0;
int g_checks = 0;
bool g_quiet = false;  // mutants are expected to fail

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        ++g_checks;                                                        \
        if (!(cond)) {                                                     \
            ++g_failures;                                                  \
            if (g_failures <= 30 && !g_quiet) {                                        \
                std::fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
                std::fprintf(stderr, __VA_ARGS__);                         \
                std::fprintf(stderr, "\n");                                \
            }                                                              \
        }                                                                  \
    } while (0)

struct Case {
    const char* soc;
    uint32_t batch, m, n, k;
    Tiling tiling;
    uint32_t cores;
    uint32_t terms;
};

arch::Capacity capacity_of(const std::string& soc)
{
    return soc == "910a" ? arch::capacity<arch::Ascend910A>() : arch::capacity<arch::Ascend910B>();
}

// ------------------------------------------------------------- coverage
void check_coverage(const Case& c, const Geometry& g)
{
    const arch::Capacity cap = capacity_of(c.soc);
    const BufferPlan& p = g.plan;
    // Plan inside the SoC.
    CHECK(p.l1_bytes <= cap.l1, "l1 %u > %u", p.l1_bytes, cap.l1);
    CHECK(p.l0a_bytes <= cap.l0a && p.l0b_bytes <= cap.l0b, "L0A/L0B plan");
    CHECK(p.l0c_bytes <= cap.l0c, "L0C plan");
    CHECK(p.ub_bytes <= cap.ub - cap.ub_reserved, "UB plan");
    CHECK(cap.c_through_ub == (p.ub_bytes > 0), "UB used exactly when C goes through UB");
    CHECK(p.planes == (c.tiling.per_term ? 1u : kParts) && p.accumulators == (c.tiling.per_term ? 1u : g.terms) &&
              g.passes == (c.tiling.per_term ? g.terms : 1u),
          "planes, accumulators and passes of the mode");
    CHECK(!g.combine_in_epilogue || (cap.c_through_ub && g.groups == 1 && g.passes == 1 && p.ub_tiles == 3),
          "the epilogue combines only with one K group, fused passes and three UB tiles");

    std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t>, int> computed;  // (pass, b, i, j, kblock)
    std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>, std::vector<uint32_t>> stores;  // (pass, b, i, j)
    std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> owner;           // (b, i, j) -> core
    const uint64_t a_elems = uint64_t(g.batch) * g.mp * g.kp;
    const uint64_t b_elems = uint64_t(g.batch) * g.kp * g.np;
    const uint64_t c_elems = uint64_t(g.batch) * g.mp * g.np;
    for (uint32_t core = 0; core < c.cores + 1; ++core) {
        CoreSchedule it(g, core);
        if (core >= g.cores) {
            CHECK(it.done(), "core %u beyond %u cores has work", core, g.cores);
            continue;
        }
        uint32_t expect_index = 0;
        int64_t last_kblock = -1;
        std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, uint32_t> block_key{~0u, ~0u, ~0u, ~0u, ~0u};
        uint32_t last_pass = 0;
        for (; !it.done(); it.next()) {
            const Step& s = it.step();
            CHECK(s.index == expect_index++, "step index");
            CHECK(s.pass_index < g.passes && s.pass_index >= last_pass, "passes in order");
            last_pass = s.pass_index;
            CHECK(s.item % g.cores == core, "item %u on core %u", s.item, core);
            CHECK(s.b_slot == s.index % 2, "ping-pong slot");
            CHECK(s.l0_stage < p.l0_stages, "l0 stage");
            CHECK(s.l0c_stage < p.l0c_stages && p.l0c_stages == c.tiling.l0c_stages, "L0C stage");
            CHECK(s.k_in_group < p.n_fused, "A tile index %u >= n_fused %u", s.k_in_group, p.n_fused);
            CHECK(s.k_block == s.group * g.n_fused + s.k_in_group, "k block");
            CHECK(s.m_act % kCube == 0 && s.n_act % kCube == 0 && s.k_act % kCube == 0, "extents aligned");
            CHECK(s.m_act > 0 && s.m_act <= g.bm && s.n_act > 0 && s.n_act <= g.bn && s.k_act > 0 &&
                      s.k_act <= g.bk,
                  "extents in block");
            CHECK(s.m_act * s.k_act / kFractalElems <= kMaxRepeat && s.k_act * s.n_act / kFractalElems <= kMaxRepeat,
                  "LoadData repeat");
            // Buffer offsets inside the plan, with the AscendC alignments.
            for (uint32_t part = 0; part < p.planes; ++part) {
                const uint32_t a = l1_a_offset(p, part, s.k_in_group);
                CHECK(a % 32 == 0 && a + s.m_act * s.k_act * kHalfBytes <= p.l1_b, "L1 A tile");
                const uint32_t b = l1_b_offset(p, s.b_slot, part);
                CHECK(b % 32 == 0 && b >= p.l1_b && b + s.k_act * s.n_act * kHalfBytes <= p.l1_bytes, "L1 B tile");
                const uint32_t a0 = l0a_offset(p, s.l0_stage, part);
                CHECK(a0 % 512 == 0 && a0 + s.m_act * s.k_act * kHalfBytes <= p.l0a_bytes, "L0A tile");
                const uint32_t b0 = l0b_offset(p, s.l0_stage, part);
                CHECK(b0 % 512 == 0 && b0 + s.k_act * s.n_act * kHalfBytes <= p.l0b_bytes, "L0B tile");
            }
            uint32_t term_seen = 0;
            for (uint32_t acc = 0; acc < p.accumulators; ++acc) {
                const uint32_t o = l0c_offset(p, s.l0c_stage, acc);
                CHECK(o % 1024 == 0 && o + s.m_act * s.n_act * kFloatBytes <= p.l0c_bytes, "L0C accumulator");
                for (uint32_t other = 0; other < p.l0c_stages; ++other) {  // the sets never overlap
                    for (uint32_t acc2 = 0; acc2 < p.accumulators; ++acc2) {
                        const uint32_t o2 = l0c_offset(p, other, acc2);
                        CHECK((other == s.l0c_stage && acc2 == acc) || o2 + p.c_tile <= o || o + p.c_tile <= o2,
                              "L0C accumulators (%u, %u) and (%u, %u) overlap", s.l0c_stage, acc, other, acc2);
                    }
                }
                const uint32_t t = pass_term(g, s.pass_index, acc);
                CHECK(t < g.terms && !(term_seen & (1u << t)), "one accumulator per term");
                term_seen |= 1u << t;
                CHECK(term_a_pos(g, t) < p.planes && term_b_pos(g, t) < p.planes, "term reads a resident plane");
                CHECK(a_plane(g, s.pass_index, term_a_pos(g, t)) == term_a_part(t) &&
                          b_plane(g, s.pass_index, term_b_pos(g, t)) == term_b_part(t),
                      "term %u reads the planes it multiplies", t);
            }
            if (cap.c_through_ub) {
                for (uint32_t i = 0; i < p.ub_tiles; ++i) {
                    CHECK(ub_tile_offset(p, i) % 32 == 0 &&
                              ub_tile_offset(p, i) + s.m_act * s.n_act * kFloatBytes <= p.ub_bytes,
                          "UB tile %u", i);
                }
            }
            // GM addresses inside the buffers.
            const FractalRuns ar = a_tile_runs(g, s.m_act, s.k_act);
            const uint64_t a_end = gm_a_tile(g, s.batch, s.row_block, s.k_block) +
                                   uint64_t(ar.runs - 1) * (ar.run_blocks + ar.gap_blocks) * kCube +
                                   uint64_t(ar.run_blocks) * kCube;
            CHECK(a_end <= a_elems, "A tile past the buffer");
            CHECK(ar.run_blocks + ar.gap_blocks == g.kp, "A run stride is one fractal row");
            const FractalRuns br = b_tile_runs(g, s.k_act, s.n_act);
            const uint64_t b_end = gm_b_tile(g, s.batch, s.k_block, s.col_block) +
                                   uint64_t(br.runs - 1) * (br.run_blocks + br.gap_blocks) * kCube +
                                   uint64_t(br.run_blocks) * kCube;
            CHECK(b_end <= b_elems, "B tile past the buffer");
            const uint64_t c_end = gm_c_tile(g, s.batch, s.row_block, s.col_block) + uint64_t(s.m_act - 1) * g.np +
                                   s.n_act;
            CHECK(c_end <= c_elems, "C tile past the buffer");
            // Loop structure.
            const auto key = std::make_tuple(s.pass_index, s.batch, s.row_block, s.col_block, s.group);
            if (s.first_k) {
                CHECK(key != block_key, "C block restarted");
                block_key = key;
                last_kblock = int64_t(s.group) * g.n_fused - 1;
            } else {
                CHECK(key == block_key, "K steps of a C block are not consecutive");
            }
            CHECK(int64_t(s.k_block) == last_kblock + 1, "K blocks out of order");
            last_kblock = s.k_block;
            CHECK(s.last_k == (s.k_in_group + 1 == group_k_blocks(g, s.group)), "last_k");
            CHECK(s.first_group == (s.group == 0) && s.last_group == (s.group + 1 == g.groups), "group flags");
            computed[std::make_tuple(s.pass_index, s.batch, s.row_block, s.col_block, s.k_block)] += 1;
            const auto cblock = std::make_tuple(s.batch, s.row_block, s.col_block);
            auto own = owner.find(cblock);
            if (own == owner.end()) {
                owner[cblock] = core;
            } else {
                CHECK(own->second == core, "C block on two cores");
            }
            if (s.last_k) {
                stores[std::make_tuple(s.pass_index, s.batch, s.row_block, s.col_block)].push_back(s.group);
            }
        }
    }
    // Every (C block, K block) exactly once; every C block stored once per group, in order.
    CHECK(computed.size() == size_t(g.passes) * g.batch * g.mb * g.nb * g.kb, "missing (C block, K block) pairs");
    for (const auto& kv : computed) {
        CHECK(kv.second == 1, "(C block, K block) computed %d times", kv.second);
    }
    CHECK(stores.size() == size_t(g.passes) * g.batch * g.mb * g.nb, "C blocks never stored");
    for (const auto& kv : stores) {
        CHECK(kv.second.size() == g.groups, "C block stored %zu times for %u groups", kv.second.size(), g.groups);
        for (uint32_t i = 0; i < kv.second.size(); ++i) {
            CHECK(kv.second[i] == i, "groups stored out of order");
        }
    }
    // Every C element inside exactly one block (small problems only).
    if (c_elems <= (1u << 22)) {
        std::vector<uint8_t> hits(c_elems, 0);
        for (const auto& kv : stores) {
            if (std::get<0>(kv.first) != 0) {
                continue;  // every pass covers the same elements
            }
            const uint32_t b = std::get<1>(kv.first), i = std::get<2>(kv.first), j = std::get<3>(kv.first);
            const uint32_t mm = block_extent(g.mp, g.bm, i), nn = block_extent(g.np, g.bn, j);
            const uint64_t base = gm_c_tile(g, b, i, j);
            for (uint32_t r = 0; r < mm; ++r) {
                for (uint32_t cc = 0; cc < nn; ++cc) {
                    hits[base + uint64_t(r) * g.np + cc] += 1;
                }
            }
        }
        size_t bad = 0;
        for (uint8_t h : hits) {
            bad += h != 1;
        }
        CHECK(bad == 0, "%zu C elements not covered exactly once", bad);
    }
}

// ------------------------------------------------------- pipe simulation
enum class Pipe { kMte2, kMte1, kM, kOut, kCount };
enum class Kind { kSet, kWait, kLoadA, kLoadB, kLoadL0, kMmad, kStore };

struct Op {
    Kind kind;
    Sync sync;
    int32_t id;
    Step step;
};

Pipe src_pipe(Sync s)
{
    switch (s) {
        case Sync::kMte2ToMte1: return Pipe::kMte2;
        case Sync::kMte1ToMte2: return Pipe::kMte1;
        case Sync::kMte1ToM: return Pipe::kMte1;
        case Sync::kMToMte1: return Pipe::kM;
        case Sync::kMToOut: return Pipe::kM;
        case Sync::kOutToM: return Pipe::kOut;
    }
    return Pipe::kCount;
}
Pipe dst_pipe(Sync s)
{
    switch (s) {
        case Sync::kMte2ToMte1: return Pipe::kMte1;
        case Sync::kMte1ToMte2: return Pipe::kMte2;
        case Sync::kMte1ToM: return Pipe::kM;
        case Sync::kMToMte1: return Pipe::kMte1;
        case Sync::kMToOut: return Pipe::kOut;
        case Sync::kOutToM: return Pipe::kM;
    }
    return Pipe::kCount;
}
Pipe pipe_of(const Op& op)
{
    switch (op.kind) {
        case Kind::kSet: return src_pipe(op.sync);
        case Kind::kWait: return dst_pipe(op.sync);
        case Kind::kLoadA:
        case Kind::kLoadB: return Pipe::kMte2;
        case Kind::kLoadL0: return Pipe::kMte1;
        case Kind::kMmad: return Pipe::kM;
        case Kind::kStore: return Pipe::kOut;
    }
    return Pipe::kCount;
}

struct Recorder {
    std::vector<Op> ops;
    void set(Sync s, int32_t id) { ops.push_back(Op{Kind::kSet, s, id, Step{}}); }
    void wait(Sync s, int32_t id) { ops.push_back(Op{Kind::kWait, s, id, Step{}}); }
    void load_a_group(const Step& st) { ops.push_back(Op{Kind::kLoadA, Sync::kMte2ToMte1, 0, st}); }
    void load_b(const Step& st) { ops.push_back(Op{Kind::kLoadB, Sync::kMte2ToMte1, 0, st}); }
    void load_l0(const Step& st) { ops.push_back(Op{Kind::kLoadL0, Sync::kMte2ToMte1, 0, st}); }
    void mmad(const Step& st) { ops.push_back(Op{Kind::kMmad, Sync::kMte2ToMte1, 0, st}); }
    void store_c(const Step& st) { ops.push_back(Op{Kind::kStore, Sync::kMte2ToMte1, 0, st}); }
};

// Buffer regions and the identity of the data a writer puts there.
enum Region { kRegA = 0, kRegB0, kRegB1, kRegL0s0, kRegL0s1, kRegL0C0, kRegL0C1, kRegCount };

struct Access {
    int region;
    bool write;
    uint64_t data;  // which data: the step/group/block that produced or needs it
};

uint64_t group_key(const Step& s) { return (uint64_t(s.pass_index) << 56) | (uint64_t(s.item) << 32) | s.group; }
uint64_t cblock_key(const Step& s)
{
    return (uint64_t(s.pass_index) << 60) | (uint64_t(s.item) << 40) | (uint64_t(s.group) << 20) | s.col_block;
}

std::vector<Access> accesses(const Op& op)
{
    const Step& s = op.step;
    const int l0c = int(kRegL0C0 + s.l0c_stage);  // the step's accumulator set
    switch (op.kind) {
        case Kind::kLoadA: return {{kRegA, true, group_key(s)}};
        case Kind::kLoadB: return {{int(kRegB0 + s.b_slot), true, s.index}};
        case Kind::kLoadL0:
            return {{kRegA, false, group_key(s)},
                    {int(kRegB0 + s.b_slot), false, s.index},
                    {int(kRegL0s0 + s.l0_stage), true, s.index}};
        case Kind::kMmad:
            // Reads the accumulators too unless it starts them from zero.
            if (s.first_k) {
                return {{int(kRegL0s0 + s.l0_stage), false, s.index}, {l0c, true, cblock_key(s)}};
            }
            return {{int(kRegL0s0 + s.l0_stage), false, s.index},
                    {l0c, false, cblock_key(s)},
                    {l0c, true, cblock_key(s)}};
        case Kind::kStore: return {{l0c, false, cblock_key(s)}};
        default: return {};
    }
}

// Replays the program with random operation times; returns false on deadlock.
bool simulate(const std::vector<Op>& ops, uint32_t seed, const char* label)
{
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> dur(1, 100);
    const int npipes = int(Pipe::kCount);
    std::vector<std::vector<size_t>> queue(npipes);
    for (size_t i = 0; i < ops.size(); ++i) {
        queue[int(pipe_of(ops[i]))].push_back(i);
    }
    std::vector<size_t> head(npipes, 0);
    std::vector<int64_t> pipe_time(npipes, 0);
    std::vector<int64_t> start(ops.size(), -1), end(ops.size(), -1);
    std::map<std::pair<int, int>, std::vector<int64_t>> tokens;   // (sync, id) -> set times, FIFO
    std::map<std::pair<int, int>, size_t> consumed;
    std::map<std::pair<int, int>, std::vector<int64_t>> set_times, wait_times;
    size_t done = 0;
    while (done < ops.size()) {
        bool progress = false;
        for (int p = 0; p < npipes; ++p) {
            while (head[p] < queue[p].size()) {
                const size_t i = queue[p][head[p]];
                const Op& op = ops[i];
                const auto key = std::make_pair(int(op.sync), int(op.id));
                int64_t t0 = pipe_time[p];
                int64_t d = 0;
                if (op.kind == Kind::kWait) {
                    auto& tk = tokens[key];
                    size_t& c = consumed[key];
                    if (c >= tk.size()) {
                        break;  // blocked until the matching set runs
                    }
                    t0 = std::max(t0, tk[c]);
                    ++c;
                    wait_times[key].push_back(t0);
                } else if (op.kind == Kind::kSet) {
                    tokens[key].push_back(t0);
                    set_times[key].push_back(t0);
                } else {
                    d = dur(rng);
                }
                start[i] = t0;
                end[i] = t0 + d;
                pipe_time[p] = end[i];
                ++head[p];
                ++done;
                progress = true;
            }
        }
        if (!progress) {
            CHECK(false, "%s: deadlock with %zu of %zu operations done", label, done, ops.size());
            return false;
        }
    }
    // Binary flags: a flag is never set again before its previous set was waited on.
    for (const auto& kv : set_times) {
        const auto& sets = kv.second;
        const auto& waits = wait_times[kv.first];
        CHECK(sets.size() == waits.size(), "%s: flag (%d,%d) set %zu times, waited %zu times", label, kv.first.first,
              kv.first.second, sets.size(), waits.size());
        for (size_t i = 0; i + 1 < sets.size() && i < waits.size(); ++i) {
            CHECK(sets[i + 1] >= waits[i], "%s: flag (%d,%d) set twice without a wait", label, kv.first.first,
                  kv.first.second);
        }
    }
    // Data hazards, region by region in program order.
    struct State {
        int64_t writer = -1;           // last writer (op index)
        uint64_t data = 0;             // what it wrote
        int64_t reads_end = 0;         // latest end of reads since that write
    };
    std::vector<State> st(kRegCount);
    for (size_t i = 0; i < ops.size(); ++i) {
        const std::vector<Access> acc = accesses(ops[i]);
        // Check every access against the state before this operation (an
        // accumulating Mmad reads and writes L0C in one operation) ...
        for (const Access& a : acc) {
            const State& r = st[a.region];
            if (!a.write) {
                CHECK(r.writer >= 0, "%s: region %d read before any write", label, a.region);
                if (r.writer < 0) {
                    continue;
                }
                CHECK(r.data == a.data, "%s: op %zu reads the wrong data from region %d", label, i, a.region);
                CHECK(start[i] >= end[r.writer], "%s: op %zu reads region %d while it is being filled", label, i,
                      a.region);
            } else if (r.writer >= 0) {
                CHECK(start[i] >= r.reads_end, "%s: op %zu refills region %d before its readers finished", label, i,
                      a.region);
                CHECK(start[i] >= end[r.writer], "%s: op %zu overlaps the previous write of region %d", label, i,
                      a.region);
            }
        }
        // ... then record it.
        for (const Access& a : acc) {
            State& r = st[a.region];
            if (a.write) {
                r.writer = int64_t(i);
                r.data = a.data;
                r.reads_end = end[i];
            } else {
                r.reads_end = std::max(r.reads_end, end[i]);
            }
        }
    }
    return true;
}

void check_program(const Case& c, const Geometry& g)
{
    for (uint32_t core = 0; core < g.cores; ++core) {
        Recorder rec;
        run_core(g, core, rec);
        char label[160];
        std::snprintf(label, sizeof(label), "%s %ux%ux%ux%u tiling %u/%u/%u/%u/%u/%u core %u", c.soc, c.batch, c.m,
                      c.n, c.k, c.tiling.bm, c.tiling.bk, c.tiling.bn, c.tiling.n_fused, c.tiling.per_term,
                      c.tiling.l0c_stages, core);
        // Same number of data operations as steps.
        size_t mmads = 0;
        for (const Op& op : rec.ops) {
            mmads += op.kind == Kind::kMmad;
        }
        size_t steps = 0;
        for (CoreSchedule it(g, core); !it.done(); it.next()) {
            ++steps;
        }
        CHECK(mmads == steps, "%s: %zu Mmad for %zu steps", label, mmads, steps);
        for (uint32_t seed = 1; seed <= 4; ++seed) {
            if (!simulate(rec.ops, seed * 7919 + core, label)) {
                break;
            }
        }
    }
}

// The replay must catch a broken protocol: drop the flags that guard one
// kind of buffer and expect hazards to be reported.
void check_detects_hazards()
{
    const arch::Capacity cap = arch::capacity<arch::Ascend910B>();
    Geometry g{};
    make_geometry(1, 64, 64, 256, Tiling{32, 32, 32, 2}, 1, 3, cap, &g);
    Recorder rec;
    run_core(g, 0, rec);
    const Sync dropped[] = {Sync::kMte1ToMte2, Sync::kMte2ToMte1, Sync::kMToMte1, Sync::kOutToM, Sync::kMToOut};
    for (Sync drop : dropped) {
        std::vector<Op> ops;
        for (const Op& op : rec.ops) {
            if (!((op.kind == Kind::kSet || op.kind == Kind::kWait) && op.sync == drop)) {
                ops.push_back(op);
            }
        }
        const int before = g_failures, checks = g_checks;
        g_quiet = true;
        for (uint32_t seed = 1; seed <= 8; ++seed) {
            simulate(ops, seed, "mutant");
        }
        g_quiet = false;
        const int found = g_failures - before;
        g_failures = before;  // the mutant is supposed to fail
        g_checks = checks + 1;
        if (found == 0) {
            ++g_failures;
            std::fprintf(stderr, "dropping the flags of sync %u went unnoticed\n", uint32_t(drop));
        }
    }
}

// ------------------------------------------------------- vector kernels
void check_split(uint32_t batch, uint32_t rows, uint32_t cols, uint32_t cores)
{
    // Follows every element through the kernel's two copies: row r of a tile
    // is read from split_in_offset and its pieces land in UB as the row
    // pieces say; the tile leaves UB as one contiguous burst at
    // split_out_offset.  Each element must reach its Zz address, once.
    const SplitGeometry s = make_split_geometry(batch, rows, cols, cores);
    const uint64_t total = uint64_t(batch) * rows * cols;
    std::vector<uint8_t> in_hits(total, 0), out_hits(total, 0);
    const uint32_t halves_per_block = kBlockBytes / kHalfBytes, floats_per_block = kBlockBytes / kFloatBytes;
    for (uint32_t core = 0; core < s.cores; ++core) {
        for (uint32_t strip = core; strip < s.strips; strip += s.cores) {
            for (uint32_t tile = 0; tile < s.tiles_per_strip; ++tile) {
                const uint32_t w = split_tile_cols(s, tile);
                CHECK(w % kCube == 0 && w > 0 && w <= kSplitTileCols, "split tile width");
                const RowPieces rp = split_row_pieces(w);
                CHECK(rp.pieces * rp.piece_blocks * floats_per_block == w, "row pieces cover the row");
                std::vector<int64_t> ub(size_t(kCube) * w, -1);  // UB slot -> input element it holds
                for (uint32_t r = 0; r < kCube; ++r) {
                    const uint64_t in0 = split_in_offset(s, strip, tile, r);
                    uint32_t slot = split_ub_row_offset(r), src = 0;
                    for (uint32_t p = 0; p < rp.pieces; ++p) {
                        for (uint32_t e = 0; e < rp.piece_blocks * floats_per_block; ++e, ++src, ++slot) {
                            CHECK(in0 + src < total && slot < ub.size(), "split copy out of range");
                            if (in0 + src >= total || slot >= ub.size()) {
                                continue;
                            }
                            in_hits[in0 + src] += 1;
                            CHECK(ub[slot] < 0, "two elements in UB slot %u", slot);
                            ub[slot] = int64_t(in0 + src);
                        }
                        slot += rp.ub_gap_blocks * floats_per_block;
                    }
                }
                // One burst of 16 w halves; UB slot i goes to out0 + i.
                const uint64_t out0 = split_out_offset(s, strip, tile);
                CHECK((kCube * w) % halves_per_block == 0, "burst of whole blocks");
                for (uint32_t i = 0; i < ub.size(); ++i) {
                    CHECK(ub[i] >= 0, "UB slot %u never loaded", i);
                    const uint64_t dst = out0 + i;
                    if (ub[i] < 0 || dst >= total) {
                        CHECK(dst < total, "split write past the output");
                        continue;
                    }
                    out_hits[dst] += 1;
                    const uint64_t grow = uint64_t(ub[i]) / cols, gcol = uint64_t(ub[i]) % cols;
                    const uint64_t zz = (grow / kCube) * (uint64_t(cols) * kCube) + (gcol / kCube) * kFractalElems +
                                        (grow % kCube) * kCube + gcol % kCube;
                    CHECK(dst == zz, "split writes element (%llu,%llu) to the wrong Zz slot", (unsigned long long)grow,
                          (unsigned long long)gcol);
                }
            }
        }
    }
    size_t bad_in = 0, bad_out = 0;
    for (uint64_t i = 0; i < total; ++i) {
        bad_in += in_hits[i] != 1;
        bad_out += out_hits[i] != 1;
    }
    CHECK(bad_in == 0 && bad_out == 0, "split %ux%ux%u: %zu inputs / %zu outputs not covered once", batch, rows, cols,
          bad_in, bad_out);
}

void check_combine(uint64_t total, uint32_t cores)
{
    const CombineGeometry c = make_combine_geometry(total, cores);
    std::vector<uint8_t> hits(total, 0);
    for (uint32_t core = 0; core < c.cores; ++core) {
        for (uint32_t t = core; t < c.tiles; t += c.cores) {
            const uint32_t len = combine_tile_len(c, t);
            CHECK(len > 0 && len <= kCombineTile && len % kFractalElems == 0, "combine tile length %u", len);
            for (uint32_t e = 0; e < len; ++e) {
                hits[uint64_t(t) * kCombineTile + e] += 1;
            }
        }
    }
    size_t bad = 0;
    for (uint8_t h : hits) {
        bad += h != 1;
    }
    CHECK(bad == 0, "combine of %llu: %zu elements not covered once", (unsigned long long)total, bad);
}

void check_launch_plan(const Case& c, const Geometry& g)
{
    host::LaunchPlan lp{};
    const Status st = host::make_launch_plan(capacity_of(c.soc), c.batch, c.m, c.n, c.k, c.tiling, c.cores,
                                             c.cores * 2, c.terms == 4, &lp);
    CHECK(st == Status::kOk, "launch plan: %s", status_message(st));
    CHECK(lp.geometry.items == g.items && lp.gemm_blocks == g.cores, "launch plan gemm blocks");
    CHECK(lp.padded_a == (c.m % 16 != 0 || c.k % 16 != 0), "A padding");
    CHECK(lp.padded_b == (c.k % 16 != 0 || c.n % 16 != 0), "B padding");
    CHECK(lp.padded_c == (c.m % 16 != 0 || c.n % 16 != 0), "C padding");
    CHECK(lp.term_elems == uint64_t(c.batch) * g.mp * g.np, "term buffer size");
    CHECK(lp.split_a.strips == c.batch * g.mp / 16 && lp.split_b.strips == c.batch * g.kp / 16, "split strips");
    CHECK(lp.combine.total == lp.term_elems, "combine size");
    CHECK(lp.launch_combine == !g.combine_in_epilogue && lp.term_buffers == (g.combine_in_epilogue ? 1u : g.terms),
          "term buffers and the combine launch follow the epilogue");
}

void run_case(const Case& c)
{
    Geometry g{};
    const Status st = make_geometry(c.batch, c.m, c.n, c.k, c.tiling, c.cores, c.terms, capacity_of(c.soc), &g);
    CHECK(st == Status::kOk, "%s %ux%ux%ux%u tiling %u/%u/%u/%u: %s", c.soc, c.batch, c.m, c.n, c.k, c.tiling.bm,
          c.tiling.bk, c.tiling.bn, c.tiling.n_fused, status_message(st));
    if (st != Status::kOk) {
        return;
    }
    check_coverage(c, g);
    check_program(c, g);
    check_launch_plan(c, g);
}

void check_plan_limits()
{
    const arch::Capacity a = arch::capacity<arch::Ascend910A>();
    const arch::Capacity b = arch::capacity<arch::Ascend910B>();
    BufferPlan p{};
    // The paper's 910A tiling, one operand per term at a time, does not fit
    // this kernel's fused plan (three FP32 accumulators of 176 x 176).
    CHECK(make_buffer_plan(a, 176, 64, 176, 44, 3, &p) == Status::kL1, "paper tiling with fused terms: L1");
    CHECK(make_buffer_plan(a, 176, 64, 176, 1, 3, &p) == Status::kL0C, "paper blocks with fused terms: L0C");
    // ... and runs with one pass per term: one plane and one accumulator resident,
    // both L0 stages, NZ copy + one ND tile in UB.
    CHECK(make_buffer_plan(a, 176, 64, 176, 44, 3, &p, 1) == Status::kOk && p.l0_stages == 2 && p.ub_tiles == 2 &&
              p.l1_bytes == 44 * 176 * 64 * 2 + 2 * 64 * 176 * 2,
          "paper tiling per term");
    CHECK(max_n_fused(a, 176, 64, 176, 1) == 44, "Eq. 8 gives the paper's N_fused = 44");
    CHECK(make_buffer_plan(a, 176, 64, 176, 45, 3, &p, 1) == Status::kL1, "N_fused = 45 overflows L1");
    CHECK(make_buffer_plan(a, 16, 16, 16, 1, 3, &p, 2) == Status::kBadMode, "per_term = 2");
    CHECK(make_buffer_plan(a, 16, 16, 16, 1, 3, &p, 0, 0) == Status::kBadMode, "l0c_stages = 0");
    CHECK(make_buffer_plan(a, 16, 16, 16, 1, 3, &p, 0, 3) == Status::kBadMode, "l0c_stages = 3");
    // Two L0C stages: both accumulator sets must fit.
    CHECK(make_buffer_plan(a, 128, 64, 128, 1, 3, &p, 0, 2) == Status::kL0C, "two sets of three 128x128 on 910A");
    CHECK(make_buffer_plan(a, 128, 64, 64, 16, 3, &p, 0, 2) == Status::kOk && p.l0c_stages == 2 &&
              p.l0c_bytes == 2 * 3 * 128 * 64 * 4 && l0c_offset(p, 1, 0) == 3 * 128 * 64 * 4,
          "two sets of three 128x64 on 910A");
    CHECK(make_buffer_plan(a, 176, 64, 176, 44, 3, &p, 1, 2) == Status::kOk && p.l0c_bytes == 2 * 176 * 176 * 4,
          "paper tiling per term, two sets");
    CHECK(make_buffer_plan(b, 96, 64, 96, 1, 3, &p, 0, 2) == Status::kL0C, "two sets of three 96x96 on 910B");
    CHECK(make_buffer_plan(b, 64, 64, 64, 1, 3, &p, 0, 2) == Status::kOk, "two sets of three 64x64 on 910B");
    Geometry g2{};
    CHECK(make_geometry(1, 64, 64, 64, Tiling{16, 16, 16, 1, 0, 3}, 4, 3, b, &g2) == Status::kBadMode,
          "geometry: l0c_stages = 3");
    CHECK(make_buffer_plan(a, 128, 64, 128, 1, 3, &p) == Status::kOk, "128x64x128 on 910A");
    CHECK(p.l0_stages == 2, "two L0 stages for 128x64");
    CHECK(make_buffer_plan(b, 128, 64, 128, 1, 3, &p) == Status::kL0C, "three 128x128 accumulators exceed 910B L0C");
    CHECK(make_buffer_plan(b, 96, 64, 96, 1, 3, &p) == Status::kOk, "96x64x96 on 910B");
    CHECK(make_buffer_plan(b, 64, 64, 128, 1, 4, &p) == Status::kOk, "four 64x128 accumulators on 910B");
    CHECK(make_buffer_plan(b, 64, 256, 64, 1, 3, &p) == Status::kOk && p.l0_stages == 1, "one L0 stage for 64x256");
    CHECK(make_buffer_plan(b, 16, 24, 16, 1, 3, &p) == Status::kNotAligned, "unaligned bk");
    CHECK(make_buffer_plan(b, 16, 16, 16, 1, 5, &p) == Status::kBadTerms, "five terms");
    const uint32_t nf = max_n_fused(b, 96, 64, 96);
    CHECK(nf > 0 && make_buffer_plan(b, 96, 64, 96, nf, 3, &p) == Status::kOk, "max_n_fused fits");
    CHECK(make_buffer_plan(b, 96, 64, 96, nf + 1, 3, &p) == Status::kL1, "max_n_fused + 1 overflows L1");
    CHECK(make_buffer_plan(a, 128, 64, 128, max_n_fused(a, 128, 64, 128) + 1, 3, &p) == Status::kL1, "910A L1 bound");
    Geometry g{};
    CHECK(make_geometry(1, 0, 5, 5, Tiling{16, 16, 16, 1}, 4, 3, b, &g) == Status::kEmpty, "empty");
    CHECK(make_geometry(1, 5, 5, 5, Tiling{16, 16, 16, 1}, 0, 3, b, &g) == Status::kNoCores, "no cores");
    // The epilogue combine: 910A, one K group, fused passes.
    CHECK(make_geometry(1, 256, 256, 512, Tiling{128, 64, 128, 8}, 32, 3, a, &g) == Status::kOk &&
              g.combine_in_epilogue,
          "910A one group combines in the epilogue");
    CHECK(make_geometry(1, 256, 256, 512, Tiling{128, 64, 128, 4}, 32, 3, a, &g) == Status::kOk &&
              !g.combine_in_epilogue,
          "910A two groups do not");
    CHECK(make_geometry(1, 256, 256, 512, Tiling{128, 64, 128, 8, 1}, 32, 3, a, &g) == Status::kOk &&
              !g.combine_in_epilogue && g.passes == 3,
          "per-term passes do not");
    CHECK(make_geometry(1, 256, 256, 512, Tiling{96, 64, 96, 8}, 20, 3, b, &g) == Status::kOk &&
              !g.combine_in_epilogue,
          "910B never (no vector unit on the cube core)");
    // n_split: one block row on 20 cores spreads the columns.
    CHECK(make_geometry(1, 16, 1000, 64, Tiling{16, 16, 64, 4}, 20, 3, b, &g) == Status::kOk && g.n_split == 16 &&
              g.cores == 16,
          "n_split for a single block row (got %u)", g.n_split);
}

void check_soc_names()
{
    const char* const table[][2] = {
        {"Ascend910B1", "910b"}, {"Ascend910B2", "910b"}, {"Ascend910B2C", "910b"}, {"Ascend910B3", "910b"},
        {"Ascend910B4", "910b"}, {"Ascend910_9391", "910b"}, {"Ascend910A", "910a"}, {"Ascend910ProA", "910a"},
        {"Ascend910B", "910a"}, {"Ascend910ProB", "910a"}, {"Ascend910PremiumA", "910a"}, {"Ascend310P3", ""},
        {"Ascend910", ""}, {"", ""},
    };
    for (const auto& row : table) {
        CHECK(std::strcmp(host::soc_family(row[0]), row[1]) == 0, "soc_family(%s) = %s, want %s", row[0],
              host::soc_family(row[0]), row[1]);
    }
    CHECK(std::strcmp(host::soc_family(nullptr), "") == 0, "soc_family(nullptr)");
}

const Case kCases[] = {
    // soc   batch  m    n    k    {bm, bk, bn, n_fused}  cores terms
    {"910b", 1, 1, 2, 3, {16, 16, 16, 1}, 20, 3},
    {"910b", 1, 16, 16, 16, {16, 16, 16, 1}, 1, 3},
    {"910b", 2, 33, 17, 65, {16, 32, 16, 2}, 3, 3},
    {"910b", 1, 100, 90, 130, {32, 32, 32, 2}, 4, 3},
    {"910b", 1, 100, 90, 130, {32, 32, 32, 8}, 4, 4},
    {"910b", 3, 50, 70, 300, {48, 64, 32, 3}, 7, 3},
    {"910b", 1, 257, 129, 1000, {96, 64, 96, 4}, 20, 3},
    {"910b", 1, 1024, 1024, 2048, {96, 64, 96, 16}, 20, 3},
    {"910b", 1, 512, 512, 4096, {64, 64, 128, 12}, 20, 4},
    {"910b", 1, 16, 4096, 256, {16, 64, 128, 4}, 20, 3},
    {"910b", 4, 31, 47, 63, {16, 16, 16, 1}, 20, 4},
    {"910a", 1, 1, 2, 3, {16, 16, 16, 1}, 32, 3},
    {"910a", 1, 100, 90, 130, {32, 32, 32, 2}, 5, 3},
    {"910a", 2, 300, 200, 700, {128, 64, 128, 4}, 32, 3},
    {"910a", 1, 2048, 2048, 4096, {128, 64, 128, 30}, 32, 3},
    {"910a", 1, 777, 333, 5000, {112, 64, 112, 20}, 32, 4},
    {"910a", 1, 64, 64, 64, {64, 64, 64, 1}, 1, 3},
    // One pass per term (the paper's design).
    {"910a", 1, 2048, 2048, 4096, {176, 64, 176, 44, 1}, 32, 3},
    {"910a", 2, 300, 200, 700, {128, 64, 128, 4, 1}, 32, 4},
    {"910a", 1, 100, 90, 130, {32, 32, 32, 2, 1}, 5, 3},
    {"910b", 1, 257, 129, 1000, {128, 64, 128, 4, 1}, 20, 3},
    {"910b", 3, 50, 70, 300, {48, 64, 32, 3, 1}, 7, 4},
    // Two L0C stages (accumulator sets alternate per write-back).
    {"910a", 1, 2048, 2048, 4096, {128, 64, 64, 16, 0, 2}, 32, 3},
    {"910a", 1, 100, 90, 130, {32, 32, 32, 2, 0, 2}, 5, 3},
    {"910a", 1, 100, 200, 130, {32, 32, 32, 8, 0, 2}, 2, 4},
    {"910a", 1, 2048, 2048, 4096, {176, 64, 176, 44, 1, 2}, 32, 3},
    {"910b", 1, 257, 129, 1000, {64, 64, 64, 16, 0, 2}, 20, 3},
    {"910b", 3, 50, 70, 300, {48, 64, 32, 3, 1, 2}, 7, 4},
    {"910b", 1, 16, 1000, 64, {16, 16, 64, 4, 0, 2}, 3, 3},
};

int dump(int argc, char** argv)
{
    if (argc < 13 || argc > 15) {
        std::fprintf(stderr, "usage: %s --dump SOC BATCH M N K BM BK BN NFUSED CORES TERMS [PER_TERM [L0C_STAGES]]\n",
                     argv[0]);
        return 2;
    }
    const uint32_t per_term = argc >= 14 ? uint32_t(std::strtoul(argv[13], nullptr, 10)) : 0u;
    const uint32_t l0c_stages = argc == 15 ? uint32_t(std::strtoul(argv[14], nullptr, 10)) : 1u;
    const std::string soc = argv[2];
    uint32_t v[10];
    for (int i = 0; i < 10; ++i) {
        v[i] = uint32_t(std::strtoul(argv[3 + i], nullptr, 10));
    }
    Geometry g{};
    const Status st = make_geometry(v[0], v[1], v[2], v[3], Tiling{v[4], v[5], v[6], v[7], per_term, l0c_stages}, v[8], v[9],
                                    capacity_of(soc), &g);
    if (st != Status::kOk) {
        std::printf("status %u %s\n", uint32_t(st), status_message(st));
        return 0;
    }
    std::printf("geometry mp=%u np=%u kp=%u mb=%u nb=%u kb=%u n_fused=%u groups=%u n_split=%u items=%u cores=%u "
                "l0_stages=%u l0c_stages=%u l1=%u l0a=%u l0b=%u l0c=%u ub=%u passes=%u combine_in_epilogue=%d\n",
                g.mp, g.np, g.kp, g.mb, g.nb, g.kb, g.n_fused, g.groups, g.n_split, g.items, g.cores,
                g.plan.l0_stages, g.plan.l0c_stages, g.plan.l1_bytes, g.plan.l0a_bytes, g.plan.l0b_bytes, g.plan.l0c_bytes,
                g.plan.ub_bytes, g.passes, int(g.combine_in_epilogue));
    for (uint32_t core = 0; core < g.cores; ++core) {
        for (CoreSchedule it(g, core); !it.done(); it.next()) {
            const Step& s = it.step();
            std::printf("step %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %u %d%d%d%d%d%d\n", core, s.index, s.pass_index,
                        s.item, s.batch, s.row_block, s.col_block, s.group, s.k_in_group, s.k_block, s.m_act, s.n_act,
                        s.k_act,
                        s.b_slot, s.l0_stage, s.l0c_stage, s.group_start, s.group_end, s.first_k, s.last_k, s.first_group,
                        s.last_group);
        }
    }
    // run_core's calls on its visitor: kind (0 set, 1 wait, 2 load_a_group,
    // 3 load_b, 4 load_l0, 5 mmad, 6 store_c), sync and event of flags, step index of data operations.
    for (uint32_t core = 0; core < g.cores; ++core) {
        Recorder rec;
        run_core(g, core, rec);
        for (const Op& op : rec.ops) {
            const bool flag = op.kind == Kind::kSet || op.kind == Kind::kWait;
            std::printf("op %u %d %d %d %u\n", core, int(op.kind), flag ? int(op.sync) : -1, flag ? op.id : -1,
                        flag ? 0u : op.step.index);
        }
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv)
{
    if (argc > 1 && std::strcmp(argv[1], "--dump") == 0) {
        return dump(argc, argv);
    }
    check_plan_limits();
    check_detects_hazards();
    check_soc_names();
    for (const Case& c : kCases) {
        run_case(c);
    }
    check_split(1, 16, 16, 4);
    check_split(2, 48, 1040, 3);
    check_split(3, 32, 512, 40);
    check_split(1, 160, 96, 7);
    check_combine(256, 40);
    check_combine(uint64_t(3) * 48 * 1040, 40);
    check_combine(uint64_t(kCombineTile) * 5, 2);
    std::printf("%d checks, %d failures\n", g_checks, g_failures);
    return g_failures == 0 ? 0 : 1;
}
