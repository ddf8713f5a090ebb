// block-per-pair: many small pairs with a small window (PIV's interrogation windows within ±8,
// patches against patches), where a block holds a few pairs' whole problems: their staged inputs
// and every shift of their windows.
//
// Why. fft-fused transforms each pair at a power of two that holds the window (32 x 32 within ±8:
// 64 x 64 where 48 would do); small-direct gives a block an output row of up to 128 columns, so a
// 17-column window leaves most lanes idle; small-window spreads one pair over many blocks and adds
// their partials. Here a block stages its pairs once and every thread works on one of them.
//
// Algorithm. With L zero outside its extent, C(dy, dx) = sum over r < hR, c < wR of
// L[r + dy][c + dx] R[r][c]. The block stages, per pair, Ls[y][x] = L[dy0 + y][dx0 + x] (zero
// outside L) for the rows and columns every shift of the window reads, and Rs[r][c] = R[r][c]
// (zero for c >= wR, up to wRp, wR rounded up to SX). The window's shifts are cut into row
// segments of SX consecutive columns (dx) of one row (dy). A thread owns one segment and one slice
// of the right's rows (r = s, s + S, ...); along each such row it keeps the SX values Ls[y + r]
// [x0 + c .. x0 + c + SX - 1] in a rotating register window, and at each column c loads one new Ls
// word and one Rs word and does SX multiply-adds (2 shared loads per SX FMAs; SX = 17 for a ±8
// window). The S threads of a segment are S consecutive lanes: their partial sums meet by xor
// shuffles (a fixed tree: deterministic, no atomics), and lane s writes the segment's outputs
// t ≡ s (mod S).
// Mapping. Block b takes the pairs (output matrices) k = b·P .. b·P + P - 1 (PairMap picks each
// one's matrices); thread t: pair q = t / TPP of them, then segment v = (t % TPP) / S (row y =
// v / NSEG, columns x0 = SX·(v % NSEG)) and slice s = t % S, TPP = OH·NSEG·S threads per pair.
// (SX, S, P) are chosen per problem on the host (choose()): SX from 17, 11, 9 to cover the window's
// columns with the least padding, P so that the block's threads fill whole warps, and S (a power of
// two: S | 32 keeps a segment's lanes in one warp) by a cost model of issue slots, staging and the
// GPU's waves of blocks.
// Banks. A warp's lanes read Ls rows y + r and Rs rows r for a few consecutive y and S distinct
// slices: a repeated row is the same word (a broadcast), and distinct rows fall in distinct banks
// (both strides odd) except where a warp straddles two pairs.
// Invariants. Every product L·R of every shift is added exactly once: each shift belongs to one
// segment, each right row to one slice, each column to one step of the slice's loop. Columns
// x >= OW of a padded segment are computed on zeros or stray Ls words and never written; Ls
// covers them (NSEG·SX + wRp - 1 columns), so no read leaves the staged arrays. Every output of
// the window is written once, by one lane. Shifts beyond the full range read only zeros and are
// written as 0. Threads past P·TPP help stage and compute nothing; the last block's pairs past the
// count are neither staged nor computed; every thread meets each barrier.
// Fused k = 1 peaks (run_peak1, what a reduced plan's peaks take where k = 1, lib/reduce/reducer.cpp):
// the same kernel with the maps written to shared memory after the staged pairs, then a warp per pair
// takes its largest value and the three-point fit (lib/reduce/peak.cuh), so no map reaches DRAM and
// no reduce kernel runs.
// Resources. Registers: 2·SX (accumulators and window) + addresses, held to kMaxRegisters (no
// spills) so that two blocks of up to 17 warps share an SM. Shared memory 4·P·(Ls + Rs) bytes, P held
// to 100 KB (two blocks an SM): 14 KB a pair for 32 x 32 within ±8 (P = 7 at S = 4, 476 threads);
// the fused peak adds the P maps (4·P·OH·OW bytes) and is declined where that passes 200 KB.
// Problems whose staged pair needs more than 200 KB, or whose window needs more than 1024 threads
// at S = 1, are refused (max_shifts keeps auto to small windows).
// Expected bottleneck: issue (SX FMAs per 2 shared loads and the loop's few integer
// instructions), then the FMA pipe; the staging (one global round trip per block) overlaps the
// other resident blocks' work. Measurements: notes/30_block_per_pair.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <string>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/launch.cuh"
#include "lib/reduce/peak.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::block_per_pair {
namespace {

constexpr int kMaxThreads = 1024;
constexpr int kMaxRegisters = 56;                // two blocks of up to 544 threads per SM
constexpr size_t kMaxSmem = 200 * 1024;          // one block
constexpr size_t kPreferredSmem = 100 * 1024;    // P is held to this: two blocks per SM
constexpr int kSxChoices[] = {17, 11, 9};        // the instantiated segment widths (dispatch_sx)

// The geometry of one problem (host-built, passed by value; see the header).
struct Geometry {
    int oh, ow;          // the window's rows and columns
    int sx, s;           // segment columns, slices per segment
    int nseg, tpp;       // segments per row (ceil(ow / sx)); threads per pair (oh·nseg·s)
    int pairs, threads;  // P pairs per block; block size (P·tpp rounded up to a warp)
    int wrp;             // wR rounded up to sx (Rs's columns, zero padded)
    int lh, lw;          // staged Ls rows and columns
    int ls, rs;          // Ls and Rs row strides (odd)
    int pair_floats;     // one pair's Ls and Rs
    FastDiv div_lw, div_wrp;  // a staged element's row from its index in Ls, Rs
    __host__ __device__ int ls_floats() const { return lh * ls; }
    size_t bytes() const { return sizeof(float) * size_t(pairs) * size_t(pair_floats); }
};

// One pair's staged extents (the header: Ls holds OH + hR - 1 rows of NSEG·SX + wRp - 1 columns, Rs
// hR rows of wRp, both row strides odd), in 64 bits so that a large problem is refused, not wrapped
// around; make_geometry narrows them once choose() has found that they fit.
struct Staging {
    int64_t nseg, wrp, lh, lw, ls, rs, floats;
};

Staging staging(const Problem& p, int sx) {
    Staging st{};
    st.nseg = ceil_div64(p.out_w(), sx);
    st.wrp = ceil_div64(p.wR, sx) * sx;
    st.lh = p.out_h() + p.hR - 1;
    st.lw = st.nseg * sx + st.wrp - 1;
    st.ls = st.lw | 1;
    st.rs = st.wrp | 1;
    st.floats = st.lh * st.ls + int64_t(p.hR) * st.rs;
    return st;
}

Geometry make_geometry(const Problem& p, const Staging& st, int sx, int s, int pairs) {
    Geometry g{};
    g.oh = int(p.out_h());
    g.ow = int(p.out_w());
    g.sx = sx;
    g.s = s;
    g.nseg = int(st.nseg);
    g.tpp = g.oh * g.nseg * s;
    g.pairs = pairs;
    g.threads = ceil_div(pairs * g.tpp, kWarp) * kWarp;
    g.wrp = int(st.wrp);
    g.lh = int(st.lh);
    g.lw = int(st.lw);
    g.ls = int(st.ls);
    g.rs = int(st.rs);
    g.pair_floats = int(st.floats);
    g.div_lw = FastDiv(unsigned(g.lw));
    g.div_wrp = FastDiv(unsigned(g.wrp));
    return g;
}

// The most pairs per block within the thread and shared-memory bounds whose threads fill their
// warps best (at least 4 warps where the pairs allow), 0 when not even one pair fits.
int choose_pairs(const Problem& p, int tpp, int64_t pair_floats) {
    int best = 0;
    double best_fill = 0.0;
    for (int P = 1; int64_t(P) * tpp <= kMaxThreads && P <= p.out_count(); ++P) {
        const int64_t bytes = int64_t(sizeof(float)) * P * pair_floats;
        if (bytes > int64_t(P == 1 ? kMaxSmem : kPreferredSmem)) break;
        const int threads = ceil_div(P * tpp, kWarp) * kWarp;
        const double fill = double(P * tpp) / threads - (threads < 4 * kWarp ? 0.1 : 0.0);
        if (best == 0 || fill > best_fill + 1e-9) best = P, best_fill = fill;
    }
    return best;
}

// Issue slots of the whole problem (warp instructions), counted per block and multiplied by the
// blocks of the busiest SM (whole waves of resident blocks): the segment loop (SX FMAs and two
// loads per column, SX - 1 loads to start each row), the shuffle tree and the writes, the staging.
double cost(const Problem& p, const Geometry& g, int sms) {
    const int log2s = __builtin_ctz(unsigned(g.s));
    const double thread = double(ceil_div(p.hR, g.s)) * (double(g.wrp) * (g.sx + 2) + g.sx - 1) +
                          2.0 * g.sx * log2s + g.sx;
    const double stage = 12.0 * g.pairs * (double(g.lh) * g.lw + double(p.hR) * g.wrp) / kWarp;
    const double block = double(g.threads / kWarp) * thread + stage;
    const int by_threads = 2048 / g.threads;
    const int by_regs = 65536 / (kMaxRegisters * g.threads);
    const int by_smem = int((228 * 1024) / (g.bytes() + 1024));
    const int resident = std::max(1, std::min({by_threads, by_regs, by_smem, 32}));
    // Waves of resident blocks: whole ones while there are few (the last one's idle SMs cost as much
    // as its busy ones), a fraction beyond two (blocks finish at different times, the tail is short).
    const double waves = double(ceil_div64(p.out_count(), g.pairs)) / (double(sms) * resident);
    return (waves < 2.0 ? std::ceil(waves) : waves) * resident * block;
}

// The cheapest geometry by cost(), over the given segment width and slice count (0: every one).
Geometry choose(const Problem& p, int sms, int only_sx, int only_s) {
    Geometry best{};
    double best_cost = 0.0;
    for (int sx : kSxChoices) {
        if (only_sx && sx != only_sx) continue;
        const Staging st = staging(p, sx);
        for (int s = 1; s <= kWarp; s *= 2) {
            if (only_s && s != only_s) continue;
            if (!only_s && s > 1 && s / 2 >= p.hR) break;  // slices without a right row
            const int64_t tpp = p.out_h() * st.nseg * s;
            if (tpp > kMaxThreads) break;
            const int P = choose_pairs(p, int(tpp), st.floats);
            if (P == 0) continue;
            const Geometry g = make_geometry(p, st, sx, s, P);
            const double c = cost(p, g, sms);
            if (best.sx == 0 || c < best_cost) best = g, best_cost = c;
        }
    }
    return best;
}

// Thread (q, segment, slice)'s part of the kernel below: its right rows' products over its segment,
// the segment's slices added, and its outputs written (to `out`, or to the block's maps).
template <int SX, bool PEAK>
__device__ __forceinline__ void segment(const float* smem, float* __restrict__ out, float* maps, int hR,
                                        const Geometry& g, int k0, int q, int lane) {
    const int v = (threadIdx.x - q * g.tpp) / g.s, s = lane & (g.s - 1);
    const int y = v / g.nseg, x0 = (v - y * g.nseg) * SX;
    const float* Ls = smem + q * g.pair_floats;
    const float* Rs = Ls + g.ls_floats();

    float acc[SX];
#pragma unroll
    for (int t = 0; t < SX; ++t) acc[t] = 0.0f;
    for (int r = s; r < hR; r += g.s) {
        const float* Lrow = Ls + (y + r) * g.ls + x0;
        const float* Rrow = Rs + r * g.rs;
        // wv[(c + t) % SX] holds Lrow[c + t] at column c (c0 is a multiple of SX).
        float wv[SX];
#pragma unroll
        for (int t = 0; t < SX - 1; ++t) wv[t] = Lrow[t];
        for (int c0 = 0; c0 < g.wrp; c0 += SX) {
#pragma unroll
            for (int u = 0; u < SX; ++u) {
                wv[(u + SX - 1) % SX] = Lrow[c0 + u + SX - 1];
                const float rv = Rrow[c0 + u];
#pragma unroll
                for (int t = 0; t < SX; ++t) acc[t] = fmaf(wv[(u + t) % SX], rv, acc[t]);
            }
        }
    }
    // The S slices of this segment are lanes (lane & ~(S - 1)) + 0 .. S - 1 of this warp.
    const unsigned group = (g.s == kWarp) ? 0xffffffffu : (((1u << g.s) - 1u) << (lane & ~(g.s - 1)));
    for (int off = g.s / 2; off > 0; off /= 2)
#pragma unroll
        for (int t = 0; t < SX; ++t) acc[t] += __shfl_xor_sync(group, acc[t], off);
    float* O = PEAK ? maps + (q * g.oh + y) * g.ow + x0
                    : out + int64_t(k0 + q) * (int64_t(g.oh) * g.ow) + int64_t(y) * g.ow + x0;
#pragma unroll
    for (int t = 0; t < SX; ++t)
        if ((t & (g.s - 1)) == s && x0 + t < g.ow) O[t] = acc[t];
}

// PEAK: the k = 1 peak of each map instead of the map (Instance::run_peak1): the block's maps go to
// shared memory after its pairs' staged inputs, and a warp per pair takes the largest value (of equal
// ones the first in row-major order; NaN never), with the contract's three-point sub-pixel fit
// (lib/reduce/peak.cuh, the same code as the reduce kernels'), into `sink`.
template <int SX, bool PEAK>
__global__ void __maxnreg__(kMaxRegisters)
    block_per_pair_kernel(const float* __restrict__ left, const float* __restrict__ right,
                          float* __restrict__ out, int hL, int wL, int hR, int wR, Window win, Geometry g,
                          int count, PairMap pairs, PeakSink sink) {
    extern __shared__ __align__(16) float smem[];
    const int lane = threadIdx.x % kWarp;
    const int k0 = blockIdx.x * g.pairs;  // 32-bit: the factory refuses 2^31 output matrices
    const int npairs = min(g.pairs, count - k0);

    // Stage, pair by pair: the block's threads walk the pair's Ls elements and then its Rs elements
    // in row-major order, a thread an element (a row found by FastDiv, not a division), so that
    // every lane has an element; every copy in flight at once, zero-filled outside L and past R's
    // columns.
    const int T = blockDim.x;
    for (int q = 0; q < npairs; ++q) {
        const PairMap::Pair pk = pairs.pair32(k0 + q);
        const float* L = left + int64_t(pk.left) * hL * wL;
        const float* R = right + int64_t(pk.right) * hR * wR;
        float* Ls = smem + q * g.pair_floats;
        float* Rs = Ls + g.ls_floats();
        for (int e = threadIdx.x; e < g.lh * g.lw; e += T) {
            const int y = int(g.div_lw.div(unsigned(e))), x = e - y * g.lw;
            const int gy = win.dy0 + y, gx = win.dx0 + x;
            const bool in = unsigned(gy) < unsigned(hL) && unsigned(gx) < unsigned(wL);
            cp_async4(Ls + y * g.ls + x, L + (in ? int64_t(gy) * wL + gx : 0), in);
        }
        for (int e = threadIdx.x; e < hR * g.wrp; e += T) {
            const int r = int(g.div_wrp.div(unsigned(e))), c = e - r * g.wrp;
            cp_async4(Rs + r * g.rs + c, R + (c < wR ? r * wR + c : 0), c < wR);
        }
    }
    cp_async_wait_all();
    __syncthreads();

    const int q = threadIdx.x / g.tpp;
    float* maps = smem + g.pairs * g.pair_floats;  // PEAK: the block's maps, oh x ow each
    if (q < npairs)  // past the block's pairs: whole groups of S lanes, idle
        segment<SX, PEAK>(smem, out, maps, hR, g, k0, q, lane);
    if constexpr (PEAK) {
        __syncthreads();
        const int warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp, n = g.oh * g.ow;
        for (int qq = warp; qq < npairs; qq += warps) {
            const float* map = maps + qq * n;
            reduce::Cand c = reduce::none();
            for (int i = lane; i < n; i += kWarp)
                if (!isnan(map[i])) c = reduce::better(c, reduce::Cand{map[i], i});
            c = reduce::warp_best(c);
            if (lane == 0) {
                if (c.i == INT_MAX)
                    reduce::write_absent(sink.value, sink.shift, sink.subpixel, k0 + qq);
                else
                    reduce::write_peak(sink.value, sink.shift, sink.subpixel, k0 + qq, c, g.oh, g.ow, sink.dy0,
                                       sink.dx0, int(sink.method), [&](int y, int x) { return map[y * g.ow + x]; });
            }
        }
    }
}

template <class F>
void dispatch_sx(int sx, F&& f) {
    switch (sx) {
        case 17: f(std::integral_constant<int, 17>{}); break;
        case 11: f(std::integral_constant<int, 11>{}); break;
        case 9: f(std::integral_constant<int, 9>{}); break;
        default: throw UsageError("block-per-pair: no kernel for segments of " + std::to_string(sx) + " columns");
    }
}

int sm_count() {
    int dev = 0, sms = 0;
    XC_CUDA_CHECK(cudaGetDevice(&dev));
    XC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

class BlockPerPair final : public Instance {
public:
    BlockPerPair(const Problem& p, int only_sx, int only_s) : p_(p) {
        g_ = choose(p, sm_count(), only_sx, only_s);
        if (g_.sx == 0)
            throw UsageError("block-per-pair: " + p.describe() +
                             " does not fit a block (a pair's staged inputs within 200 KB of shared memory and "
                             "its window's rows x segments within 1024 threads; meant for small pairs and windows)");
        // The fused peak's blocks hold their maps too (run_peak1), where that still fits.
        peak_bytes_ = g_.bytes() + sizeof(float) * size_t(g_.pairs) * size_t(g_.oh) * size_t(g_.ow);
        dispatch_sx(g_.sx, [&](auto sx) {
            constexpr int SX = decltype(sx)::value;
            allow_dynamic_smem(block_per_pair_kernel<SX, false>, g_.bytes(), "block-per-pair");
            if (takes_peak1()) allow_dynamic_smem(block_per_pair_kernel<SX, true>, peak_bytes_, "block-per-pair");
        });
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        launch<false>(left, right, out, PeakSink{}, g_.bytes(), stream);
    }
    bool takes_peak1() const override { return peak_bytes_ <= kMaxSmem; }
    void run_peak1(const float* left, const float* right, const PeakSink& sink, cudaStream_t stream) override {
        launch<true>(left, right, nullptr, sink, peak_bytes_, stream);
    }

private:
    template <bool PEAK>
    void launch(const float* left, const float* right, float* out, const PeakSink& sink, size_t bytes,
                cudaStream_t stream) {
        const int count = int(p_.out_count());
        dispatch_sx(g_.sx, [&](auto sx) {
            block_per_pair_kernel<decltype(sx)::value, PEAK>
                <<<unsigned(ceil_div(count, g_.pairs)), unsigned(g_.threads), bytes, stream>>>(
                    left, right, out, p_.hL, p_.wL, p_.hR, p_.wR, p_.shifts(), g_, count, pair_map(p_), sink);
            XC_CHECK_LAUNCH();
        });
    }

    Problem p_;
    Geometry g_{};
    size_t peak_bytes_ = 0;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "block-per-pair",
    .family = "hopper",
    .summary = "many small pairs, small windows: a block stages a few pairs and computes their whole windows "
               "(k = 1 peaks taken in the block)",
    .timed = "kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {{"width", {"auto", "17", "11", "9"},
                "SX: the shifts (columns) of a thread's row segment (auto: the cheapest by the cost model)"},
               {"slices", {"auto", "1", "2", "4", "8", "16", "32"},
                "S: the threads (lanes) that share a segment, each taking every S-th right row"}},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        // The output matrix index is 32-bit (PairMap::pair32, the kernel's k0 + q).
        if (p.out_count() >= (int64_t(1) << 31))
            throw UsageError("block-per-pair: more than 2^31 - 1 output matrices");
        const auto pick = [&](const char* name) { return ps.at(name) == "auto" ? 0 : param_int(ps, name); };
        return std::make_unique<BlockPerPair>(p, pick("width"), pick("slices"));
    },
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    .max_shifts = 4096,
});

}  // namespace
}  // namespace xcorr::block_per_pair
