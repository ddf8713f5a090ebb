// tensor-hankel: one-dimensional signals on tensor cores, seed 004's method (Kikuchi et al., TF32
// Hankel-matrix product) on mma.sync m16n8k8, in 3xTF32 (FP32-class accuracy, variant
// tensor-hankel) or plain TF32 (tensor-hankel-tf32, seed 004's arithmetic). Signals only
// (hL == hR == 1: the registry refuses other shapes before make()). Measurements and history:
// notes/28_tensor_hankel.md.
//
// Algorithm. C(d) = sum_k L[d + k] R[k], L zero outside [0, wL), k over the right signal (the
// template, K = wR). For the NB = 16 rights R_0 .. R_15 of one left and a block of consecutive
// lags d0 .. d0 + BM - 1, C[q][d0 + n] = sum_k A[q][k] B[k][n] with A[q][k] = R_q[k] (the
// templates: the MMA's 16 rows) and the Hankel matrix B[k][n] = L[d0 + n + k] (the lags: its
// columns): a 16 x K by K x BM GEMM, the transpose of seed 004's Hankel-times-templates product. The
// long signal is read once per block: the window Ls[x] = L[d0 + k0 + x], x < BM + KC (zero-filled
// outside L), and the B fragment element (k, n) of K chunk k0 is Ls[n + k] (no K x BM
// materialization). The templates are staged per K chunk of KC = 256 (32 k steps; a template is
// zero-padded to whole groups of 4 k steps past its end, so the padding multiplies zeros); a block
// keeps the staged chunk while its next work item needs the same one (templates of at most KC
// samples: staged once per block and pair group, as seed 004 keeps its templates resident).
//
// Why the templates are A. MMA fragments (common/mma_tf32.cuh), lane (g, t) = (lane / 4, lane % 4):
// b0 = B[t][g], b1 = B[t + 4][g], so the B fragment of n tile nt and k step s is the window pair
// P(nt + s) = (Ls[base + 8 (nt + s)], Ls[base + 8 (nt + s) + 4]), base = 8 NT w + g + t, the same
// register pair for every (nt, s) with the same sum: a group of 4 k steps reads NT + 3 pairs for
// 4 NT MMAs (x 3 in 3xTF32) and hands each MMA a pair as loaded. With the lags as A (the Hankel
// rows as the MMA's rows) the fragment {A[g][t], A[g + 8][t], A[g][t + 4], A[g + 8][t + 4]} mixes
// two shared pairs, and the compiler assembled every MMA's 4 consecutive A registers with moves
// (several per MMA: notes/28_tensor_hankel.md has the counts).
// A (templates): a0 = R_g[8s + t], a1 = R_{g+8}[8s + t], a2 = R_g[8s + t + 4], a3 = R_{g+8}[8s + t
// + 4], staged in fragment order, entry (s, lane): one 16-byte load per k step (3xTF32: big and
// small parts in two arrays, two loads), consecutive lanes on consecutive 16 bytes.
//
// Mapping. 128 threads = 4 warps side by side along the lags; warp w owns lags 8 NT w .. 8 NT w +
// 8 NT - 1 of the block's BM = 32 NT lags (NT n tiles of 8 lags) x the 16 rights (one m tile).
// The window is stored as pairs (slot x: L[x], L[x + 4]; 3xTF32: their big and small parts, one
// 16-byte load). C: c0 (right g, lag 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1): one
// store instruction (c0 and c1 as a float2 where the output allows 8-byte stores) writes 8
// consecutive lags of each of 8 rights, 8 full 32-byte sectors.
//
// Work items: (pair group, lag tile); a pair group is left i of PairMap::grid() with rights j0 ..
// j0 + 15 of its M (absent rights are zero templates whose outputs are not written), so all four
// forms run through the same stride table. A persistent grid (resident blocks, at most 2^31 - 1)
// strides over the items: group-major when the templates fit one chunk (consecutive items of a
// block reuse the staged templates), lag-tile-major otherwise (the blocks running together share
// the left window in L2). No grid dimension limit: 4.32e6 lags are 8438 tiles of 512.
//
// Windows (CONVENTIONS.md, "Output windows", "One-dimensional signals"). The output of a pair is
// out_h x out_w, row r = shift dy0 + r, column j = lag dx0 + j. Only dy = 0 overlaps (hL = hR = 1):
// the row r0 = -dy0, when the window holds it, gets C(dx0 + j); every other row is written with
// zeros. A lag tile's K range is the union of its lags' overlaps, k in [max(0, -d_last), min(wR,
// wL - d_first)); a tile with none (or a window without row 0) runs no chunk and writes zeros.
// Lags beyond the full range sum products with L's zero fill: exactly 0.
// Invariants: every (right, lag) of the tile sums each k of [0, wR) at most once (chunks
// partition the K range from its start; each chunk covers KC columns, its padded k steps are zero
// templates); a term left out (k outside the union) has L = 0; every element of every output is
// written by exactly one work item (rows, lags and rights beyond the output skipped, not wrapped).
// tests/test_tensor_hankel_mapping.py emulates this tiling and these smem indices in NumPy.
//
// Precision. 3xtf32 (tensor-hankel): x = big + small (common/mma_tf32.cuh's split), three MMAs
// big*big + big*small + small*big per product (<= ~1.2e-6 relative per product); the truncating
// MMA accumulator is flushed into a round-to-nearest FP32 total every 2 groups of 4 k steps (24
// accumulations, half of tensor-tiled's 48). Bound 1e-5. tf32 (tensor-hankel-tf32): one MMA of
// rna-rounded operands, accumulated in the MMA accumulator over the whole K range (registers go to
// a wider lag tile instead of a second accumulator); per product <= 9.8e-4 relative, plus the
// truncation bias of K / 8 accumulations (<= K / 16 ulp: 1e-6 at K = 256, ~5e-4 at K = 144000):
// declared bound 2e-3 as tensor-tiled-tf32 (rigorous for inputs of one sign; seed 004 reports an
// absolute error of 2.0e-4 on real data).
//
// Resources. 3xtf32: NT = 8 (BM = 256 lags per block), 32 + 32 accumulator registers, 11 pair
// slots of 4 registers per group, 2 x 4 template registers; tf32: NT = 16 (BM = 512), 64
// accumulators, 19 pair slots of 2, 4 template registers. __launch_bounds__(128, 4): at most 128
// registers, no spills, no stack frame (the build enforces it): 4 blocks (16 warps) per SM (3
// blocks, with more registers each, are slower: notes/28_tensor_hankel.md).
// Normalized (zncc, the template epilogue's problems: every lag keeps the template inside the trace,
// as matched filtering's valid window): the store writes the coefficient itself from per-lag and
// per-template terms the Normalizer computes before the run (xcorr/store_norm.hpp; kNorm), the
// same bits as the epilogue, which is then skipped; zero-lag keeps the epilogue.
// Dynamic shared memory: 3xtf32 (256 + 256) x 16 B + 2 x 1024 x 16 B = 40960 B; tf32
// (512 + 256) x 8 B + 1024 x 16 B = 22528 B.
// Expected bottleneck (seed 004's case, K = 256: 1.77e10 multiply-adds, 276 MB of output). Per
// group of 4 k steps a warp issues 4 NT MMAs (3x: 12 NT) against NT + 3 pair loads and 4 (3x: 8)
// template loads: the tensor pipe (mma.sync reaches ~60-70% of Hopper's dense TF32 peak) and the
// output stores (276 MB, ~70 us at 4 TB/s, overlapped across the 4 resident blocks) bound it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "common/device.cuh"
#include "common/mma_tf32.cuh"
#include "xcorr/cuda_check.hpp"
#include "common/launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::tensor_hankel {
namespace {

constexpr int kThreads = 128, kWarps = 4;
constexpr int kNB = 16;              // rights per pair group: the MMA's 16 rows (seed 004's 16 templates)
constexpr int kKC = 256;             // K chunk: template samples staged at once
constexpr int kGS = 4;               // k steps per unrolled group
constexpr int kAEnt = kKC / 8 * 32;  // template fragment entries per part: (k step, lane)
constexpr int kFlush = 2;            // groups of k steps per accumulator flush (3xtf32)
static_assert(kKC % (8 * kGS) == 0, "a chunk holds whole groups of k steps");

template <bool SPLIT>
struct Cfg {
    static constexpr int NT = SPLIT ? 8 : 16;        // n tiles (8 lags) per warp
    static constexpr int BM = kWarps * 8 * NT;       // lags per block: 256 or 512
    static constexpr int NP = NT + kGS - 1;          // pair slots a lane reads per group
    static constexpr int PARTS = SPLIT ? 2 : 1;      // template parts: big (or tf32), small
    using Pair = typename std::conditional<SPLIT, uint4, uint2>::type;  // (L[x], L[x+4][, small, small])
    static constexpr int LENT = BM + kKC;            // window slots
    static constexpr size_t SMEM = size_t(LENT) * sizeof(Pair) + size_t(PARTS) * kAEnt * sizeof(uint4);
};

// The geometry of one problem, as the kernel takes it.
struct Geo {
    int wL, wR;
    int out_h, out_w;     // the window's rows and lags
    int row0;             // the window's row of dy = 0, or -1 when it has none
    int dx0;              // the first lag
    int tiles;            // lag tiles of BM
    int jb;               // pair groups per left: ceil(M / 16)
    int64_t groups;       // N * jb
    int64_t items;        // groups * tiles
    bool tile_major;      // item order (see the header)
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
// A window slot: (L[x], L[x + 4]) as TF32 operands, or their big and small parts.
template <bool SPLIT>
__device__ __forceinline__ typename Cfg<SPLIT>::Pair make_pair(float lo, float hi) {
    if constexpr (SPLIT) {
        uint32_t b0, s0, b1, s1;
        split(lo, b0, s0);
        split(hi, b1, s1);
        return make_uint4(b0, b1, s0, s1);
    } else {
        return make_uint2(tf32(lo), tf32(hi));
    }
}
#endif

template <bool SPLIT, bool kNorm>
__global__ void __launch_bounds__(kThreads, 4)
    tensor_hankel_kernel(const float* __restrict__ left, const float* __restrict__ right, float* __restrict__ out,
                         PairGrid P, Geo G, bool vec, StoreNorm norm) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    using C = Cfg<SPLIT>;
    using E = typename C::Pair;
    constexpr int NT = C::NT, BM = C::BM, NP = C::NP;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    uint4* Ab = reinterpret_cast<uint4*>(smem_raw);  // template fragments (k step s, lane): big (or tf32)
    uint4* As = Ab + (SPLIT ? kAEnt : 0);             // small parts (3xtf32)
    E* Ls = reinterpret_cast<E*>(Ab + C::PARTS * kAEnt);  // window slots x: (L[x], L[x + 4]) of the chunk

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int nw = warp * 8 * NT;  // the warp's first lag in the tile

    // The chunk the template entries hold (block-uniform): pair group, first k and k steps.
    int64_t staged_z = -1;
    int64_t staged_k0 = -1;
    int staged_steps = 0;

    for (int64_t w = blockIdx.x; w < G.items; w += gridDim.x) {
        const int64_t z = G.tile_major ? w % G.groups : w / G.tiles;
        const int tile = int(G.tile_major ? w / G.groups : w % G.tiles);
        const int i = int(z / G.jb), j0 = int(z % G.jb) * kNB;
        const float* L = left + int64_t(i) * G.wL;

        // The tile's lags and its K range (the union of their overlaps), in 64 bits: a window's
        // lags may lie far outside the full range.
        const int64_t da = int64_t(G.dx0) + int64_t(tile) * BM;
        const int64_t db = std::min<int64_t>(da + BM - 1, int64_t(G.dx0) + G.out_w - 1);
        const int64_t kb = std::max<int64_t>(0, -db), ke = std::min<int64_t>(G.wR, int64_t(G.wL) - da);
        const bool any = G.row0 >= 0 && kb < ke;

        float acc[NT][4];
#pragma unroll
        for (int n = 0; n < NT; ++n)
#pragma unroll
            for (int v = 0; v < 4; ++v) acc[n][v] = 0.0f;

        if (any) {
            for (int64_t k0 = kb; k0 < ke; k0 += kKC) {
                // k steps of this chunk: whole groups, covering min(KC, ke - k0) columns.
                const int cols = int(std::min<int64_t>(kKC, ke - k0));
                const int steps = ceil_div(cols, 8 * kGS) * kGS;
                __syncthreads();  // the previous chunk's (or item's) readers are done
                if (z != staged_z || k0 != staged_k0 || steps != staged_steps) {
                    // Template fragment (s, lane (gg, tt)): R_{j0+gg}[k], R_{j0+gg+8}[k], R_{j0+gg}[k + 4],
                    // R_{j0+gg+8}[k + 4], k = k0 + 8s + tt; zero past wR or for an absent right.
                    for (int e = tid; e < steps * 32; e += kThreads) {
                        const int s = e >> 5, gg = (e >> 2) & 7, tt = e & 3;
                        const int64_t k = k0 + 8 * s + tt;
                        float v[4];
#pragma unroll
                        for (int q = 0; q < 4; ++q) {
                            const int j = j0 + gg + 8 * (q & 1);
                            const int64_t kk = k + 4 * (q >> 1);
                            v[q] = j < P.M && kk < G.wR ? __ldg(right + P.right(i, j) * int64_t(G.wR) + kk) : 0.0f;
                        }
                        if constexpr (SPLIT) {
                            uint32_t b[4], sm[4];
#pragma unroll
                            for (int q = 0; q < 4; ++q) split(v[q], b[q], sm[q]);
                            Ab[e] = make_uint4(b[0], b[1], b[2], b[3]);
                            As[e] = make_uint4(sm[0], sm[1], sm[2], sm[3]);
                        } else {
                            Ab[e] = make_uint4(tf32(v[0]), tf32(v[1]), tf32(v[2]), tf32(v[3]));
                        }
                    }
                    staged_z = z, staged_k0 = k0, staged_steps = steps;
                }
                // Window: slot x = (L[da + k0 + x], L[da + k0 + x + 4]), zero outside L; the lanes
                // read slots up to BM + 8 steps - 6 (header).
                {
                    const int64_t base = da + k0;
                    for (int x = tid; x < BM + 8 * steps; x += kThreads) {
                        const int64_t p = base + x;
                        const float lo = (p >= 0 && p < G.wL) ? __ldg(L + p) : 0.0f;
                        const float hi = (p + 4 >= 0 && p + 4 < G.wL) ? __ldg(L + p + 4) : 0.0f;
                        Ls[x] = make_pair<SPLIT>(lo, hi);
                    }
                }
                __syncthreads();

                // The MMA accumulator of the current flush period (3xtf32), or acc itself (tf32).
                float part_store[SPLIT ? NT : 1][4];
                if constexpr (SPLIT) {
#pragma unroll
                    for (int n = 0; n < NT; ++n)
#pragma unroll
                        for (int v = 0; v < 4; ++v) part_store[n][v] = 0.0f;
                }
                const E* lp = Ls + nw + g + t;
#pragma unroll 1
                for (int s0 = 0; s0 < steps; s0 += kGS) {
                    E pr[NP];  // pair slots P(s0 + q): the B fragments of this group
#pragma unroll
                    for (int q = 0; q < NP; ++q) pr[q] = lp[8 * (s0 + q)];
#pragma unroll
                    for (int ss = 0; ss < kGS; ++ss) {
                        const int s = s0 + ss;
                        const uint4 ab = Ab[32 * s + lane];
                        const uint32_t a[4] = {ab.x, ab.y, ab.z, ab.w};
                        if constexpr (SPLIT) {
                            const uint4 as = As[32 * s + lane];
                            const uint32_t a_small[4] = {as.x, as.y, as.z, as.w};
                            // the passes outermost, so that NT independent accumulators lie between the
                            // dependent MMAs of one (big*big, big*small, small*big)
#pragma unroll
                            for (int n = 0; n < NT; ++n) mma_tf32(part_store[n], a, pr[n + ss].x, pr[n + ss].y);
#pragma unroll
                            for (int n = 0; n < NT; ++n) mma_tf32(part_store[n], a, pr[n + ss].z, pr[n + ss].w);
#pragma unroll
                            for (int n = 0; n < NT; ++n) mma_tf32(part_store[n], a_small, pr[n + ss].x, pr[n + ss].y);
                        } else {
#pragma unroll
                            for (int n = 0; n < NT; ++n) mma_tf32(acc[n], a, pr[n + ss].x, pr[n + ss].y);
                        }
                    }
                    if constexpr (SPLIT) {
                        if (((s0 / kGS) % kFlush) == kFlush - 1) flush_partial(acc, part_store);
                    }
                }
                if constexpr (SPLIT) flush_partial(acc, part_store);
            }
        }

        // Store: row r0 gets the sums, the window's other rows zeros. Accumulator v of n tile nt:
        // right slot g + 8 (v >> 1), lag nw + 8 nt + 2t + (v & 1). kNorm: zncc's coefficient of the
        // sum instead (StoreNorm: the template epilogue's value, its per-output terms hoisted).
        const int64_t plane = int64_t(G.out_h) * G.out_w;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int j = j0 + g + 8 * h;
            if (j >= P.M) continue;
            const int64_t k = P.output(i, j);
            float* o = out + k * plane;
            double2 kt = make_double2(0, 0);
            double ml = 0, mr = 0;
            if constexpr (kNorm) kt = norm.kterm[k], ml = norm.lmean[i], mr = norm.rmean[P.right(i, j)];
#pragma unroll 1
            for (int r = 0; r < G.out_h; ++r) {
                const bool live = r == G.row0;
                float* orow = o + int64_t(r) * G.out_w;
#pragma unroll
                for (int n = 0; n < NT; ++n) {
                    const int64_t lag = int64_t(tile) * BM + nw + 8 * n + 2 * t;
                    float v0 = live ? acc[n][2 * h] : 0.0f, v1 = live ? acc[n][2 * h + 1] : 0.0f;
                    if constexpr (kNorm) {  // the template epilogue's problems: one row, every lag live
                        if (lag < G.out_w) v0 = norm.value<Normalize::Zncc>(v0, i, lag, kt, ml, mr);
                        if (lag + 1 < G.out_w) v1 = norm.value<Normalize::Zncc>(v1, i, lag + 1, kt, ml, mr);
                    }
                    if (vec) {  // out_w even, out 8-byte aligned: lag even, so lag + 1 < out_w too
                        if (lag < G.out_w) *reinterpret_cast<float2*>(orow + lag) = make_float2(v0, v1);
                    } else {
                        if (lag < G.out_w) orow[lag] = v0;
                        if (lag + 1 < G.out_w) orow[lag + 1] = v1;
                    }
                }
            }
        }
    }
#else
    __trap();  // never launched: the factory requires compute capability 8.0
#endif
}

class TensorHankel final : public Instance {
public:
    TensorHankel(const Problem& p, bool split) : p_(p), split_(split) {
        require_mma_tf32(split ? "tensor-hankel" : "tensor-hankel-tf32");
        // hL == hR == 1 (signals_only, refused before make()).
        const Window s = p.shifts();
        P_ = pair_map(p).grid();
        const int bm = split ? Cfg<true>::BM : Cfg<false>::BM;
        G_.wL = p.wL, G_.wR = p.wR;
        G_.out_h = int(s.out_h()), G_.out_w = int(s.out_w());
        G_.row0 = s.dy0 <= 0 && s.dy1 >= 0 ? -s.dy0 : -1;
        G_.dx0 = s.dx0;
        G_.tiles = ceil_div(G_.out_w, bm);
        G_.jb = ceil_div(P_.M, kNB);
        G_.groups = int64_t(P_.N) * G_.jb;
        G_.items = G_.groups * G_.tiles;
        G_.tile_major = p.wR > kKC;  // templates over one chunk: restaged per item anyway
        blocks_ = split ? configure(tensor_hankel_kernel<true, false>, Cfg<true>::SMEM)
                        : configure(tensor_hankel_kernel<false, false>, Cfg<false>::SMEM);
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        // float2 stores where every output row starts 8-byte aligned (out_w even, out aligned)
        const bool vec = G_.out_w % 2 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
        auto kernel = split_ ? (norm_.mode != Normalize::None ? tensor_hankel_kernel<true, true> : tensor_hankel_kernel<true, false>)
                             : (norm_.mode != Normalize::None ? tensor_hankel_kernel<false, true>
                                                              : tensor_hankel_kernel<false, false>);
        kernel<<<blocks_, kThreads, split_ ? Cfg<true>::SMEM : Cfg<false>::SMEM, stream>>>(left, right, out, P_, G_, vec,
                                                                                          norm_);
        XC_CHECK_LAUNCH();
    }

    // zncc's coefficient in the store (matched filtering: the template epilogue's pass over the
    // output, as large as the output itself, is gone); zero-lag keeps the epilogue (not instantiated).
    bool takes_store_norm(Normalize mode) const override { return mode == Normalize::Zncc; }
    void set_store_norm(const StoreNorm& s) override {
        norm_ = s;
        blocks_ = split_ ? configure(tensor_hankel_kernel<true, true>, Cfg<true>::SMEM)
                         : configure(tensor_hankel_kernel<false, true>, Cfg<false>::SMEM);
    }

private:
    // Opts the kernel into its shared memory and sizes the persistent grid: the resident blocks,
    // at most one per item (and at most 2^31 - 1).
    template <class K>
    unsigned configure(K kernel, size_t smem) {
        allow_dynamic_smem(kernel, size_t(smem), "tensor-hankel");
        int dev = 0, sms = 0, per_sm = 0;
        XC_CUDA_CHECK(cudaGetDevice(&dev));
        XC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        XC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem));
        const int64_t resident = int64_t(std::max(per_sm, 1)) * std::max(sms, 1);
        return unsigned(std::clamp<int64_t>(std::min(resident, G_.items), 1, 0x7fffffff));
    }

    Problem p_;
    bool split_;
    PairGrid P_{};
    Geo G_{};
    StoreNorm norm_{};  // mode None: raw sums
    unsigned blocks_ = 1;
};


XCORR_REGISTER_VARIANT(Variant{
    .name = "tensor-hankel",
    .family = "hopper",
    .summary = "signals: seed 004's Hankel-matrix product on tensor cores, mma.sync m16n8k8 3xTF32 (FP32-class), "
               "a left window read once per block of 256 lags x 16 templates (sm_80+)",
    .timed = "kernel",
    .precision = "3xtf32",
    .tolerance = 1e-5,
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {},
    .make = [](const Problem& p, const Params&) -> std::unique_ptr<Instance> {
        return std::make_unique<TensorHankel>(p, true);
    },
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    .signals_only = true,
    .min_cc = 80,  // mma.sync TF32
});

XCORR_REGISTER_VARIANT(Variant{
    .name = "tensor-hankel-tf32",
    .family = "hopper",
    .summary = "tensor-hankel with one TF32 MMA per product, as seed 004 (rna-rounded operands; reduced "
               "precision, sm_80+), 512 lags x 16 templates per block",
    .timed = "kernel",
    .precision = "tf32",
    .tolerance = 2e-3,
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {},
    .make = [](const Problem& p, const Params&) -> std::unique_ptr<Instance> {
        return std::make_unique<TensorHankel>(p, false);
    },
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    .signals_only = true,
    .min_cc = 80,  // mma.sync TF32
});

}  // namespace
}  // namespace xcorr::tensor_hankel
