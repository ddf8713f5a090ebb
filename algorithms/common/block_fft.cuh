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
// kBlockFftMaxThreads: the schedule keeps n / R within it), in place: a stage reads its R elements, the block
// synchronises, and it writes its R results, so one buffer of n elements suffices (half the shared
// memory of a ping-pong, twice the blocks an SM). The twiddles come from a table in global memory
// computed in double on the host (block_fft_host), read through the read-only cache, laid out per
// stage as [r - 1][k], so that a warp's loads of one r are consecutive addresses.
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

// One stage of a schedule: radix r, ns = the product of the radices before it, m = n / r
// butterflies, where its twiddles start in the table, and magic = ceil(2^32 / ns) (ns > 1), so that j / ns is
// __umulhi(j, magic) for every j < n <= 2^13 (the error j / 2^32 < 2^-19 never crosses an integer:
// j / ns is at least 1 / ns >= 2^-13 below the next one).
struct BlockFftStage {
    int r = 1, ns = 1, m = 1, tw = 0;  // tw: the stage's twiddles' first entry in the plan's table
    unsigned magic = 0;
};
// One transform length's schedule: its stages and its twiddle table (device); `threads`, the most
// butterflies of a stage rounded up to whole warps: the threads one transform needs.
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

// One in-place stage of radix R, in two halves with the block's barrier between them (every
// element is read and written by exactly one butterfly, so one buffer suffices): bf_load, butterfly
// j's (j < st.m) R elements into v; bf_store, its twiddles, DFT and R results. The barriers stay
// outside the radix switch (block_fft), so that every thread meets the same two of each stage.
template <int R>
__device__ __forceinline__ void bf_load(const float2* buf, const BlockFftStage& st, int pad, int j,
                                        float2 (&v)[kBlockFftMaxRadix]) {
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = buf[bf_pad(j + r * st.m, pad)];
}
template <int R, int Sign>
__device__ __forceinline__ void bf_store(float2* buf, const BlockFftStage& st, int pad, const float2* __restrict__ tw,
                                         int j, float2 (&vin)[kBlockFftMaxRadix]) {
    float2 v[R];
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = vin[r];
    const int k = st.ns == 1 ? 0 : j - int(__umulhi(unsigned(j), st.magic)) * st.ns;
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
    dft<R, Sign>(v);
    const int base = (j - k) * R + k;
#pragma unroll
    for (int r = 0; r < R; ++r) buf[bf_pad(base + r * st.ns, pad)] = v[r];
}

#define XCORR_BLOCK_FFT_RADICES(X) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(12) X(14) X(15) X(16) X(18)

// The DFT (Sign -1: forward, +1: inverse, unnormalised) of the n elements in `buf` (the plan's layout),
// in place. Every thread of the block calls it (the barriers); the calling thread does butterfly j
// of each stage (j < 0 or j >= the stage's butterflies: none). `stages` is the plan's stage table
// copied to shared memory (block_fft_stages), which a run-time stage index reads without a stack
// copy of the parameter. The caller has synchronised the block after filling `buf`; on return the
// block is synchronised.
template <int Sign>
__device__ __forceinline__ void block_fft(float2* buf, const BlockFftPlan& p, const BlockFftStage* stages, int j) {
    for (int s = 0; s < p.stages; ++s) {
        const BlockFftStage st = stages[s];
        const bool on = j >= 0 && j < st.m;
        float2 v[kBlockFftMaxRadix];
        if (on) {
            switch (st.r) {
#define XCORR_BF_LOAD(R) \
    case R: bf_load<R>(buf, st, p.pad, j, v); break;
                XCORR_BLOCK_FFT_RADICES(XCORR_BF_LOAD)
#undef XCORR_BF_LOAD
            }
        }
        __syncthreads();
        if (on) {
            switch (st.r) {
#define XCORR_BF_STORE(R) \
    case R: bf_store<R, Sign>(buf, st, p.pad, p.tw, j, v); break;
                XCORR_BLOCK_FFT_RADICES(XCORR_BF_STORE)
#undef XCORR_BF_STORE
            }
        }
        __syncthreads();
    }
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
// needs). Throws for a length that is not 7-smooth or too long.
inline std::vector<int> block_fft_radices(int n) {
    static constexpr int kRadices[] = {18, 16, 15, 14, 12, 10, 9, 8, 7, 6, 5, 4, 3, 2};
    if (!is_7_smooth(n) || n > kBlockFftMaxN)
        throw std::invalid_argument("block_fft: length " + std::to_string(n) + " is not 7-smooth or above " +
                                    std::to_string(kBlockFftMaxN));
    // For each divisor d of n: the fewest stages, then the largest smallest radix (dynamic
    // programming; a radix r must leave n / r <= kBlockFftMaxThreads butterflies).
    constexpr int kNone = 1 << 20;
    std::vector<int> stages(size_t(n) + 1, kNone), minr(size_t(n) + 1, 0), first(size_t(n) + 1, 0);
    stages[1] = 0, minr[1] = kNone;
    for (int d = 2; d <= n; ++d) {
        if (n % d) continue;
        for (int r : kRadices) {
            if (d % r || stages[size_t(d / r)] == kNone || n / r > kBlockFftMaxThreads) continue;
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
// each warp instruction of a stage's loads and stores (bf_load, bf_store), per half-warp of 8-byte
// accesses, the most elements of the half-warp on one bank pair (padded index mod 16); the ideal
// is one a half-warp that has an active lane.
inline int64_t block_fft_wavefronts(int n, const std::vector<int>& radices, int pad, int64_t* ideal = nullptr) {
    int64_t total = 0, ones = 0;
    int ns = 1;
    for (int R : radices) {
        const int m = n / R;
        for (int j0 = 0; j0 < m; j0 += 16)
            for (int r = 0; r < R; ++r)
                for (int store = 0; store < 2; ++store) {
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

// The plan of length n: block_fft_radices's radices, in the order and the layout of the fewest
// shared-memory wavefronts (block_fft_wavefronts), block_fft_radices's own order first and a
// layout of kBlockFftPads, then every other order; another is taken only for strictly fewer. The
// order changes neither the threads nor the arithmetic.
inline BlockFftHost block_fft_host(int n) {
    const std::vector<int> first = block_fft_radices(n);
    std::vector<int> best_r = first;
    int best_pad = kBlockFftPads[0];
    int64_t best = -1;
    auto consider = [&](const std::vector<int>& r) {
        for (int pad : kBlockFftPads) {
            const int64_t w = block_fft_wavefronts(n, r, pad);
            if (best < 0 || w < best) best = w, best_r = r, best_pad = pad;
        }
    };
    consider(first);
    std::vector<int> r = first;
    std::sort(r.begin(), r.end());
    do {
        if (r != first) consider(r);
    } while (std::next_permutation(r.begin(), r.end()));
    return block_fft_host(n, best_r, best_pad);
}

}  // namespace xcorr
