// One complex DFT of run-time length n (7-smooth, up to kBlockFftMaxN) by a whole thread block in
// shared memory: the building block of fft-large (53_fft_large.cu), whose transforms are longer
// than a team of one warp holds in registers (team_dft.cuh, fft-fused) and whose lengths (4320 for
// a 4096 x 4096 image and a 384 x 384 template) are fixed only when the problem is.
//
// Algorithm: Stockham's autosort FFT, mixed radix (Govindaraju et al., SC 2008, "FftIteration").
// n = R_1 R_2 ... R_s; stage t (ns = R_1 ... R_{t-1}, radix R = R_t) takes n / R butterflies: for
// butterfly j, with k = j mod ns,
//     v[r] = in[j + r n/R] * W_{ns R}^{k r}        (r < R; W_m = exp(Sign 2 pi i / m))
//     v    = DFT_R(v)                               (team_dft.cuh's in-register dft<R, Sign>)
//     out[(j - k) R + k + r ns] = v[r]
// which leaves the transform in natural order after the last stage (no bit reversal). The
// stages run in place in one shared buffer; each stage is one read and one write of the sequence
// in shared memory, so the host picks the fewest stages the radix set allows (block_fft_radices:
// radices up to 18).
//
// Mapping: butterfly j of a stage is thread j of the transform's threads (plan.threads, at most
// kBlockFftMaxThreads: the schedule keeps n / R within it), in place: a stage reads its R elements and
// multiplies them by their twiddles, the block synchronises, and it takes their DFT and writes its R
// results, so one buffer of n elements suffices (half the shared memory of a ping-pong, twice the
// blocks an SM). The twiddles come before the barrier, not after it: their loads' latency then
// passes while the block waits there, where after it every warp of the block would wait on them at
// once. The twiddles come from a table in global memory computed in double on the host
// (block_fft_host), read through the read-only cache, laid out per stage as [r - 1][k], so that a
// warp's loads of one r are consecutive addresses.
//
// Long lengths (block_fft_pingpong): where a stage has more butterflies than a block has threads
// (n beyond 18^3 = 5832), a thread takes butterflies j, j + T, ... of each stage, and the stages
// ping-pong between two buffers instead (out of place: a stage reads one whole and writes the
// other, so no butterfly's write can clobber another's input), at the registers of one butterfly.
// Their schedules (block_fft_host(n, true)) allow any number of butterflies a stage: the fewest
// stages of radices up to 18, up to kBlockFftMaxLongN.
//
// Fused ends (block_fft_core): stage 0 may read its inputs through a loader (a row in DRAM, or a
// spectrum to untangle) instead of the buffer, skipping the zeros of a padded input (with at most
// two nonzero inputs a butterfly, dft_two); the last stage may hand its results out from registers;
// and a correlation's forward and inverse transforms (block_fft_correlate) meet in one step, the
// inverse's radices being the forward's reversed, with the product between them in registers.
//
// Shared-memory layout: element i at bf_pad(i, pad) = i + (i >> pad), the plan's `pad` one of 4
// (an element of padding after every 16), 5 (every 32) or kBlockFftNoPad (none). A half-warp's 8-byte
// accesses are one wavefront when their elements fall in 16 different bank pairs (padded index
// mod 16); a stage's stores are R apart between lanes while ns < 32, so which layout is free of
// conflicts depends on the radices and their order: radix 16 first needs the pad, radix 15 first
// (2160 = 15 x 12 x 12) is odd and needs none, and with the pad every 16 it would put 15 of 16
// lanes on one bank pair. The host (block_fft_host) therefore counts the wavefronts of every
// stage's loads and stores for each order of the radices and each layout, and takes the fewest
// (block_fft_wavefronts). A buffer of n elements holds block_fft_slot(n) float2 in every layout.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/team_dft.cuh"

namespace xcorr {

inline constexpr int kBlockFftMaxStages = 8;
inline constexpr int kBlockFftMaxN = 8192;
// Threads of one transform at most: one butterfly each. Lengths whose radices (at most
// kBlockFftMaxRadix, whose registers every stage holds) cannot keep n / R at or below it have no
// schedule (8192 = 2^13 would need radix 32).
inline constexpr int kBlockFftMaxThreads = 512;
// The longest length of block_fft_pingpong (two buffers of it in shared memory: 198 KB), twice the
// longest of block_fft (18^3).
inline constexpr int kBlockFftMaxLongN = 2 * 5832;

// One stage of a schedule: radix r, ns = the product of the radices before it, m = n / r
// butterflies, where its twiddles start in the table, and magic = ceil(2^32 / ns) (ns > 1), so that j / ns is
// __umulhi(j, magic) for every j < n <= 2^14 (the error j / 2^32 < 2^-18 never crosses an integer:
// j / ns is at least 1 / ns >= 2^-14 below the next one).
struct BlockFftStage {
    int r = 1, ns = 1, m = 1, tw = 0;  // tw: the stage's twiddles' first entry in the plan's table
    unsigned magic = 0;
};
// One transform length's schedule: its stages and its twiddle table (device); `threads`, the most
// butterflies of a stage rounded up to whole warps: the threads one transform needs (a long
// schedule's may exceed a block's; block_fft_pingpong loops).
struct BlockFftPlan {
    int n = 1;
    int stages = 0;
    int threads = 32;
    int pad = 4;  // the layout: element i at bf_pad(i, pad)
    BlockFftStage st[kBlockFftMaxStages];
    const float2* tw = nullptr;  // the stages' twiddles (block_fft_host)
};

// Layouts (BlockFftPlan::pad): an element of padding after every 2^pad; kBlockFftNoPad, none (i >> 31 is 0
// for every index). The slot is the densest layout's size.
inline constexpr int kBlockFftNoPad = 31;
__host__ __device__ constexpr int block_fft_slot(int n) { return n + n / 16 + 1; }
__host__ __device__ __forceinline__ int bf_pad(int i, int pad) { return i + (i >> pad); }

inline constexpr int kBlockFftMaxRadix = 18;

// One stage of radix R, in two halves (block_fft_core puts the block's barrier between them):
// bf_load, butterfly j's (j < st.m) R elements into v; then its twiddles and DFT (bf_butterfly) and
// its R results written back (bf_write).
template <int R>
__device__ __forceinline__ void bf_load(const float2* buf, const BlockFftStage& st, int pad, int j,
                                        float2 (&v)[kBlockFftMaxRadix]) {
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = buf[bf_pad(j + r * st.m, pad)];
}
// k = j mod ns, butterfly j's place among the ns of its group (the stage's magic multiplier).
__device__ __forceinline__ int bf_k(const BlockFftStage& st, int j) {
    return st.ns == 1 ? 0 : j - int(__umulhi(unsigned(j), st.magic)) * st.ns;
}
// Butterfly j's twiddles W_{ns R}^{k r} on its R inputs v[0 .. R) (none where k = 0, which is every
// butterfly of stage 0: ns = 1).
template <int R, int Sign, int M>
__device__ __forceinline__ void bf_twiddle(const BlockFftStage& st, const float2* __restrict__ tw, int j,
                                           float2 (&v)[M]) {
    static_assert(R <= M, "a butterfly's inputs fit its array");
    const int k = bf_k(st, j);
    if (k != 0) {
        // W_{ns R}^{k r} at tw[st.tw + (r - 1) ns + k]: for each r the lanes' k are consecutive,
        // so a warp's twiddle loads are one or two cache lines (a table of W_n^t indexed by k r n /
        // (ns R) scatters them over up to 32).
        const float2* __restrict__ w_r = tw + st.tw + k;
#pragma unroll
        for (int r = 1; r < R; ++r) {
            float2 w = __ldg(w_r + (r - 1) * st.ns);
            if (Sign > 0) w.y = -w.y;
            v[r] = cmul(v[r], w);
        }
    }
}
// Butterfly j's twiddles and its DFT, in registers.
template <int R, int Sign>
__device__ __forceinline__ void bf_butterfly(const BlockFftStage& st, const float2* __restrict__ tw, int j,
                                             float2 (&v)[R]) {
    bf_twiddle<R, Sign>(st, tw, j, v);
    dft<R, Sign>(v);
}
// Butterfly j's results to their places, (j - k) R + k + r ns.
template <int R>
__device__ __forceinline__ void bf_write(float2* buf, const BlockFftStage& st, int pad, int j, const float2 (&v)[R]) {
    const int k = bf_k(st, j);
    const int base = (j - k) * R + k;
#pragma unroll
    for (int r = 0; r < R; ++r) buf[bf_pad(base + r * st.ns, pad)] = v[r];
}
// v[q] = a + b W_R^q (W_R = exp(Sign 2 pi i / R)): the DFT of (a, b, 0, ..., 0), a stage-0 butterfly
// of a transform whose nonzero inputs are at most its first 2 m (block_fft_core's pruning).
template <int R, int Sign>
__device__ __forceinline__ void dft_two(float2 (&v)[R], float2 a, float2 b) {
    unroll<R>([&](auto q) {
        using W = Twiddle<decltype(q)::value, R, Sign>;
        v[decltype(q)::value] = make_float2(a.x + W::c * b.x - W::s * b.y, a.y + W::c * b.y + W::s * b.x);
    });
}

#define XCORR_BLOCK_FFT_RADICES(X) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(12) X(14) X(15) X(16) X(18)

// What the last stage of block_fft_core does with its results.
enum class BfLast {
    Buffer,  // writes them back to the buffer (in place, like every stage)
    Store,   // hands them to store(i, v) from registers: element i = j + r m (the last stage's ns = m)
    Pivot,   // mid(i, v) on each; then, unless forward_only, the inverse plan's first stage (the same
             // radix, ns = 1: its inputs are these same elements) in registers, written in that
             // plan's layout (or to store where that plan has one stage)
};
// How stage 0 reads its loader (block_fft_core's FromLoad).
enum class BfLoad {
    PerRadix,  // inside each radix's case: R loads scheduled together with the butterfly, the fewest
               // live registers (fft-large's column pass, held to 96, and its pass 3), but the
               // loader's code inlined once per element of every radix (129 times: compile time)
    Hoisted,   // one loop over the largest radix, each load guarded by the stage's radix: the loader
               // inlined 18 times (fft-large's pass 1, whose loads are DRAM reads; a shared-memory
               // loader with arithmetic ran 4% slower this way, notes/53_fft_large.md)
};
// The ends of a transform, for block_fft_core: where stage 0's inputs come from (load(i), i < live;
// zeros beyond, never read), and what the last stage's results go to.
template <class Load, class Mid, class Store>
struct BfEnds {
    int live;
    Load& load;
    Mid& mid;
    Store& store;
    const BlockFftStage* inv;  // Pivot: the inverse plan's stage table and layout
    int inv_pad;
    bool forward_only;
};
// Stage 0's element i = j + r m (r < R, its place in butterfly j) from the loader: load(i, r) where
// the loader takes both (r is a constant once the loop is unrolled: pass 3 builds its untangling
// twiddle from it), load(i) otherwise.
template <class Load>
__device__ __forceinline__ float2 bf_load_input(Load& load, int i, int r) {
    if constexpr (std::is_invocable_v<Load&, int, int>) return load(i, r);
    else return load(i);
}

// Butterfly j of stage `st`, its inputs in vin with their twiddles applied (block_fft_core): its DFT
// (just dft_two where `pruned`), then its results written back or, in the last stage, as `Last` says.
template <int R, int Sign, BfLast Last, class Ends>
__device__ __forceinline__ void bf_stage_out(float2* buf, const BlockFftStage& st, int pad, int j,
                                             float2 (&vin)[kBlockFftMaxRadix], bool pruned, bool last, Ends& e) {
    float2 v[R];
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = vin[r];
    if (pruned) dft_two<R, Sign>(v, v[0], v[1]);
    else dft<R, Sign>(v);
    if (Last == BfLast::Buffer || !last) {
        bf_write<R>(buf, st, pad, j, v);
    } else if constexpr (Last == BfLast::Store) {
#pragma unroll
        for (int r = 0; r < R; ++r) e.store(j + r * st.m, v[r]);
    } else if constexpr (Last == BfLast::Pivot) {
#pragma unroll
        for (int r = 0; r < R; ++r) v[r] = e.mid(j + r * st.m, v[r]);
        if (e.forward_only) return;
        dft<R, -Sign>(v);
        if (st.m == 1) {  // a plan of one stage: the inverse is done
#pragma unroll
            for (int r = 0; r < R; ++r) e.store(r, v[r]);
        } else {
            bf_write<R>(buf, e.inv[0], e.inv_pad, j, v);
        }
    }
}

// The barrier between a stage's halves: the whole block's (BfSyncBlock), or a named barrier over the
// `count` threads (whole warps) that run the transform while the block's other warps do other work
// (BfSyncNamed: fft-large's warp-specialized pass 3).
struct BfSyncBlock {
    __device__ __forceinline__ void operator()() const { __syncthreads(); }
};
struct BfSyncNamed {
    int id, count;
    __device__ __forceinline__ void operator()() const {
#ifdef __CUDA_ARCH__
        asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
#else
        __syncthreads();  // the CPU model (tests/block_fft_host.cpp): every thread takes part
#endif
    }
};

// Stages [s0, p.stages) of the DFT (Sign -1: forward, +1: inverse, unnormalised) of the n elements
// in `buf` (the plan's layout), in place, one read and one write of the buffer a stage with the
// block's barrier between them (every element is read and written by exactly one butterfly, so
// one buffer suffices). FromLoad (s0 = 0): stage 0 reads load(i) instead of the buffer (How says
// where its loads are inlined; bf_load_input passes r to a loader that takes it), and with
// live <= 2 m (a zero-padded input: 2-D template matching's 384 rows of 4320) its butterflies have
// at most two nonzero inputs and their DFT is dft_two's R multiply-adds; after_first() runs once
// stage 0 is written and the block synchronised (its inputs are read no more). The last stage's
// results go where Last says. Every thread that `sync` waits for (the block's, BfSyncBlock) calls it; the calling
// thread does butterfly j of each stage (j < 0 or j >= the stage's butterflies: none). `stages` is
// the plan's stage table copied to shared memory (block_fft_stages), which a run-time stage index
// reads without a stack copy of the parameter. The caller has synchronised the block after filling
// `buf` (FromLoad: after its last read of it); on return the block is synchronised. The radix
// switches stay outside the stage's halves, so that every thread meets the same barriers, and one
// expansion of each radix's DFT serves every stage.
template <int Sign, bool FromLoad, BfLast Last, BfLoad How = BfLoad::PerRadix, class Ends, class AfterFirst,
          class Sync = BfSyncBlock>
__device__ __forceinline__ void block_fft_core(float2* buf, const BlockFftPlan& p, const BlockFftStage* stages, int j,
                                               int s0, Ends& e, AfterFirst&& after_first, Sync sync = {}) {
    for (int s = s0; s < p.stages; ++s) {
        const BlockFftStage st = stages[s];
        const bool on = j >= 0 && j < st.m;
        const bool from_load = FromLoad && s == 0;
        float2 v[kBlockFftMaxRadix];
        if (on && from_load && How == BfLoad::Hoisted) {
#pragma unroll
            for (int r = 0; r < kBlockFftMaxRadix; ++r) {
                const int i = j + r * st.m;
                if (r < st.r) v[r] = i < e.live ? bf_load_input(e.load, i, r) : make_float2(0.f, 0.f);
            }
        } else if (on) {
            switch (st.r) {
#define XCORR_BF_LOAD(R)                                                                               \
    case R:                                                                                            \
        if (How == BfLoad::PerRadix && from_load) {                                                    \
            _Pragma("unroll") for (int r = 0; r < R; ++r) {                                            \
                const int i = j + r * st.m;                                                            \
                v[r] = i < e.live ? bf_load_input(e.load, i, r) : make_float2(0.f, 0.f);               \
            }                                                                                          \
        } else {                                                                                       \
            bf_load<R>(buf, st, p.pad, j, v);                                                          \
            bf_twiddle<R, Sign>(st, p.tw, j, v);                                                       \
        }                                                                                              \
        break;
                XCORR_BLOCK_FFT_RADICES(XCORR_BF_LOAD)
#undef XCORR_BF_LOAD
            }
        }
        if (!from_load) sync();
        if (on) {
            const bool pruned = from_load && e.live <= 2 * st.m;
            switch (st.r) {
#define XCORR_BF_STORE(R) \
    case R: bf_stage_out<R, Sign, Last>(buf, st, p.pad, j, v, pruned, s + 1 == p.stages, e); break;
                XCORR_BLOCK_FFT_RADICES(XCORR_BF_STORE)
#undef XCORR_BF_STORE
            }
        }
        sync();
        if (from_load) after_first();
    }
}

struct BfNothing {
    __device__ __forceinline__ void operator()() const {}
};
struct BfNoLoad {
    __device__ __forceinline__ float2 operator()(int) const { return make_float2(0.f, 0.f); }
};
struct BfNoMid {
    __device__ __forceinline__ float2 operator()(int, float2 v) const { return v; }
};
struct BfNoStore {
    __device__ __forceinline__ void operator()(int, float2) const {}
};

// The DFT of the n elements in `buf`, in place (block_fft_core's terms: the caller synchronises
// after filling `buf`; on return the block is synchronised).
template <int Sign>
__device__ __forceinline__ void block_fft(float2* buf, const BlockFftPlan& p, const BlockFftStage* stages, int j) {
    BfNoLoad load;
    BfNoMid mid;
    BfNoStore store;
    BfEnds<BfNoLoad, BfNoMid, BfNoStore> e{0, load, mid, store, nullptr, 0, false};
    block_fft_core<Sign, false, BfLast::Buffer>(buf, p, stages, j, 0, e, BfNothing{});
}

// The DFT of the n inputs load(i) (i < live; zeros beyond, never read; or load(i, r):
// bf_load_input) into `buf`: stage 0 reads load instead of the buffer (pruned where live <= 2 m;
// the loader inlined once, BfLoad::Hoisted); after_first() once its inputs are read no more. The
// caller has finished every read of `buf`; on return the block is synchronised.
template <int Sign, BfLoad How = BfLoad::Hoisted, class Load, class AfterFirst = BfNothing, class Sync = BfSyncBlock>
__device__ __forceinline__ void block_fft_from(float2* buf, const BlockFftPlan& p, const BlockFftStage* stages, int j,
                                               int live, Load&& load, AfterFirst&& after_first = {}, Sync sync = {}) {
    BfNoMid mid;
    BfNoStore store;
    BfEnds<std::remove_reference_t<Load>, BfNoMid, BfNoStore> e{live, load, mid, store, nullptr, 0, false};
    if (p.stages == 0) {  // n = 1: no stage reads the input
        if (j == 0) buf[0] = live > 0 ? bf_load_input(load, 0, 0) : make_float2(0.f, 0.f);
        sync();
        after_first();
        return;
    }
    block_fft_core<Sign, true, BfLast::Buffer, How>(buf, p, stages, j, 0, e, after_first, sync);
}

// A correlation's transform pair: the forward DFT of load(i) (i < live, zeros beyond: pruned as
// block_fft_from), mid(i, X_i) on each coefficient X_i, the inverse DFT of what mid returns handed to
// store(i, v) (each i < n once) from the inverse's last stage's registers. `inv` holds `fwd`'s
// radices in reverse order (block_fft_host_pair), so that the forward's last stage and the
// inverse's first take the same elements in the same butterfly: they run as one step in registers
// (BfLast::Pivot), the spectrum never stored, and mid (the product with the left's spectrum) costs
// no pass over the buffer of its own. forward_only: the forward DFT and mid alone (mid's side
// effects: the left's spectrum written). `fst` and `ist` are the plans' stage tables in shared
// memory. The caller has finished every read of `buf`; on return the block is synchronised.
template <class Load, class Mid, class Store>
__device__ __forceinline__ void block_fft_correlate(float2* buf, const BlockFftPlan& fwd, const BlockFftStage* fst,
                                                    const BlockFftPlan& inv, const BlockFftStage* ist, int j, int live,
                                                    Load&& load, Mid&& mid, Store&& store, bool forward_only) {
    BfEnds<std::remove_reference_t<Load>, std::remove_reference_t<Mid>, std::remove_reference_t<Store>> e{
        live, load, mid, store, ist, inv.pad, forward_only};
    if (fwd.stages == 0) {  // n = 1
        if (j == 0) {
            const float2 v = mid(0, live > 0 ? bf_load_input(load, 0, 0) : make_float2(0.f, 0.f));
            if (!forward_only) store(0, v);
        }
        __syncthreads();
        return;
    }
    block_fft_core<-1, true, BfLast::Pivot>(buf, fwd, fst, j, 0, e, BfNothing{});
    if (!forward_only) block_fft_core<1, false, BfLast::Store>(buf, inv, ist, j, 1, e, BfNothing{});
}

// The DFT (Sign as block_fft) of the n elements in `a` (the plan's layout), the stages ping-ponging
// between `a` and `b` (each block_fft_slot(n) float2): stage s reads one buffer and writes the
// other, so thread t of the T calling threads takes butterflies t, t + T, ... of each, at the
// registers of one (the long lengths, whose stages have more butterflies than a block has threads;
// any plan works). Returns the buffer that holds the result: `a` after an even number of stages.
// Every thread of the block calls it; the caller has synchronised after filling `a`, and on return
// the block is synchronised.
template <int Sign>
__device__ __forceinline__ float2* block_fft_pingpong(float2* a, float2* b, const BlockFftPlan& p,
                                                      const BlockFftStage* stages, int t, int T) {
    for (int s = 0; s < p.stages; ++s) {
        const BlockFftStage st = stages[s];
        switch (st.r) {
#define XCORR_BF_PINGPONG(R)                                                                         \
    case R:                                                                                          \
        for (int j = t; j < st.m; j += T) {                                                          \
            float2 v[R];                                                                             \
            _Pragma("unroll") for (int r = 0; r < R; ++r) v[r] = a[bf_pad(j + r * st.m, p.pad)];     \
            bf_butterfly<R, Sign>(st, p.tw, j, v);                                                   \
            bf_write<R>(b, st, p.pad, j, v);                                                         \
        }                                                                                            \
        break;
            XCORR_BLOCK_FFT_RADICES(XCORR_BF_PINGPONG)
#undef XCORR_BF_PINGPONG
        }
        __syncthreads();
        float2* const c = a;
        a = b, b = c;
    }
    return a;
}

// The plan's stage table into shared memory (`dst`, kBlockFftMaxStages entries); the caller
// synchronises before block_fft reads it.
__device__ __forceinline__ void block_fft_stages(const BlockFftPlan& p, BlockFftStage* dst) {
#pragma unroll
    for (int s = 0; s < kBlockFftMaxStages; ++s)
        if (s == int(threadIdx.x)) dst[s] = p.st[s];
}

// ---------------------------------------------------------------------------------------------
// Host side
// ---------------------------------------------------------------------------------------------

// The radices of n (block_fft_host chooses their order): the fewest stages from {2, ..., 10, 12, 14, 15, 16, 18}
// (those dft<R> builds and bf_stage instantiates) whose butterflies per stage, n / R, are at most
// kBlockFftMaxThreads (one a thread); among those, the largest smallest radix (the fewest threads a transform
// needs). Throws for a length that is not 7-smooth or too long. `long_schedule`: any number of
// butterflies a stage, up to kBlockFftMaxLongN (block_fft_pingpong's).
inline std::vector<int> block_fft_radices(int n, bool long_schedule = false) {
    static constexpr int kRadices[] = {18, 16, 15, 14, 12, 10, 9, 8, 7, 6, 5, 4, 3, 2};
    const int max_n = long_schedule ? kBlockFftMaxLongN : kBlockFftMaxN;
    const int max_butterflies = long_schedule ? max_n : kBlockFftMaxThreads;
    if (!is_7_smooth(n) || n > max_n)
        throw std::invalid_argument("block_fft: length " + std::to_string(n) + " is not 7-smooth or above " +
                                    std::to_string(max_n));
    // For each divisor d of n: the fewest stages, then the largest smallest radix (dynamic
    // programming; a radix r must leave n / r <= max_butterflies butterflies).
    constexpr int kNone = 1 << 20;
    std::vector<int> stages(size_t(n) + 1, kNone), minr(size_t(n) + 1, 0), first(size_t(n) + 1, 0);
    stages[1] = 0, minr[1] = kNone;
    for (int d = 2; d <= n; ++d) {
        if (n % d) continue;
        for (int r : kRadices) {
            if (d % r || stages[size_t(d / r)] == kNone || n / r > max_butterflies) continue;
            const int st = stages[size_t(d / r)] + 1, mr = std::min(r, minr[size_t(d / r)]);
            if (st < stages[size_t(d)] || (st == stages[size_t(d)] && mr > minr[size_t(d)]))
                stages[size_t(d)] = st, minr[size_t(d)] = mr, first[size_t(d)] = r;
        }
    }
    if (stages[size_t(n)] == kNone || stages[size_t(n)] > kBlockFftMaxStages)
        throw std::invalid_argument("block_fft: no schedule for length " + std::to_string(n));
    std::vector<int> out;
    for (int d = n; d > 1; d /= first[size_t(d)]) out.push_back(first[size_t(d)]);
    return out;
}

// Shared-memory wavefronts of a schedule's stages (radices in stage order) in layout `pad`: for
// each warp instruction of a stage's loads and stores (bf_load, bf_write), per half-warp of 8-byte
// accesses, the most elements of the half-warp on one bank pair (padded index mod 16); the ideal
// is one a half-warp that has an active lane. `ends`: the first stage's loads and the last stage's
// stores are not in shared memory (block_fft_correlate) and are not counted.
inline int64_t block_fft_wavefronts(int n, const std::vector<int>& radices, int pad, int64_t* ideal = nullptr,
                                    bool ends = false) {
    int64_t total = 0, ones = 0;
    int ns = 1;
    for (size_t s = 0; s < radices.size(); ++s) {
        const int R = radices[s], m = n / R;
        for (int j0 = 0; j0 < m; j0 += 16)
            for (int r = 0; r < R; ++r)
                for (int store = 0; store < 2; ++store) {
                    if (ends && (store ? s + 1 == radices.size() : s == 0)) continue;
                    int on[16] = {};
                    int most = 0;
                    for (int j = j0; j < std::min(j0 + 16, m); ++j) {
                        const int k = j % ns;
                        const int i = store ? (j - k) * R + k + r * ns : j + r * m;
                        most = std::max(most, ++on[bf_pad(i, pad) % 16]);
                    }
                    total += most, ones += 1;
                }
        ns *= R;
    }
    if (ideal) *ideal = ones;
    return total;
}

// The plan of length n in stage order `radices` and layout `pad`, and its twiddle table: stage s's
// W_{ns R}^{k r} (0 < k < ns, 0 < r < R) at entry tw + (r - 1) ns + k, computed in double and
// rounded. The caller copies the table to the device and sets plan.tw to it.
struct BlockFftHost {
    BlockFftPlan plan;
    std::vector<float2> twiddles;
};
inline BlockFftHost block_fft_host(int n, const std::vector<int>& r, int pad) {
    BlockFftHost h;
    BlockFftPlan& p = h.plan;
    p.n = n;
    p.pad = pad;
    p.stages = int(r.size());
    int ns = 1, most = 1;
    for (int s = 0; s < p.stages; ++s) {
        BlockFftStage& st = p.st[s];
        st.r = r[size_t(s)], st.ns = ns, st.m = n / st.r, st.tw = int(h.twiddles.size());
        st.magic = unsigned(((uint64_t(1) << 32) + uint64_t(ns) - 1) / uint64_t(ns));
        if (ns > 1)
            for (int q = 1; q < st.r; ++q)
                for (int k = 0; k < ns; ++k) {
                    const double a = -2.0 * 3.14159265358979323846 * double(k) * double(q) / double(ns * st.r);
                    h.twiddles.push_back(make_float2(float(std::cos(a)), float(std::sin(a))));
                }
        most = std::max(most, st.m);
        ns *= st.r;
    }
    if (h.twiddles.empty()) h.twiddles.push_back(make_float2(1.f, 0.f));  // never read; a non-empty buffer
    p.threads = (most + 31) / 32 * 32;
    return h;
}

// The layouts the host chooses from, the densest first.
inline constexpr int kBlockFftPads[] = {4, 5, kBlockFftNoPad};

// The layout (kBlockFftPads, the densest first on ties) of the fewest wavefronts of the order r
// (block_fft_wavefronts, `ends` as there), and that count.
struct BlockFftLayout {
    int pad;
    int64_t wavefronts;
};
inline BlockFftLayout block_fft_best_layout(int n, const std::vector<int>& r, bool ends) {
    BlockFftLayout best{kBlockFftPads[0], -1};
    for (int q : kBlockFftPads) {
        const int64_t c = block_fft_wavefronts(n, r, q, nullptr, ends);
        if (best.wavefronts < 0 || c < best.wavefronts) best = {q, c};
    }
    return best;
}

// The order of n's radices of the lowest cost(order): block_fft_radices's own order first, then
// every other; another is taken only for a strictly lower cost.
template <class Cost>
std::vector<int> block_fft_best_order(int n, Cost&& cost, bool long_schedule = false) {
    const std::vector<int> first = block_fft_radices(n, long_schedule);
    std::vector<int> best_r = first;
    int64_t best = cost(first);
    std::vector<int> r = first;
    std::sort(r.begin(), r.end());
    do {
        if (r == first) continue;
        const int64_t c = cost(r);
        if (c < best) best = c, best_r = r;
    } while (std::next_permutation(r.begin(), r.end()));
    return best_r;
}

// The plan of length n: block_fft_radices's radices, in the order and the layout of the fewest
// shared-memory wavefronts (block_fft_wavefronts). The order changes neither the threads nor the
// arithmetic. `long_schedule`: block_fft_pingpong's (any number of butterflies a stage).
inline BlockFftHost block_fft_host(int n, bool long_schedule = false) {
    const std::vector<int> r = block_fft_best_order(
        n, [&](const std::vector<int>& o) { return block_fft_best_layout(n, o, false).wavefronts; }, long_schedule);
    return block_fft_host(n, r, block_fft_best_layout(n, r, false).pad);
}

// The forward and the inverse plan of length n for block_fft_correlate: the inverse holds the
// forward's radices in reverse order, each plan in its own layout; the order (and the layouts) of the
// fewest shared-memory wavefronts of the two together, the first stage's loads and the last
// stage's stores not counted (they are in registers).
struct BlockFftPair {
    BlockFftHost fwd, inv;
};
inline BlockFftPair block_fft_host_pair(int n) {
    auto reversed = [](const std::vector<int>& o) { return std::vector<int>(o.rbegin(), o.rend()); };
    const std::vector<int> r = block_fft_best_order(n, [&](const std::vector<int>& o) {
        return block_fft_best_layout(n, o, true).wavefronts + block_fft_best_layout(n, reversed(o), true).wavefronts;
    });
    const std::vector<int> rev = reversed(r);
    return {block_fft_host(n, r, block_fft_best_layout(n, r, true).pad),
            block_fft_host(n, rev, block_fft_best_layout(n, rev, true).pad)};
}

}  // namespace xcorr
