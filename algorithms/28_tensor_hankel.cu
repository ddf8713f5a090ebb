// tensor-hankel: one-dimensional signals on tensor cores, seed 004's method (Kikuchi et al., TF32
// Hankel-matrix product) on mma.sync m16n8k8, in 3xTF32 (FP32-class accuracy, variant
// tensor-hankel) or plain TF32 (tensor-hankel-tf32, seed 004's arithmetic). Signals only
// (hL == hR == 1: the registry refuses other shapes before make()). Drafted without a GPU.
//
// Algorithm. C(d) = sum_k L[d + k] R[k], L zero outside [0, wL), k over the right signal (the
// template, K = wR). For a block of M consecutive lags d0 .. d0 + M - 1 and the NB = 16 rights
// R_0 .. R_15 of one left, C[d0 + m][q] = sum_k A[m][k] B[k][q] with the Hankel matrix
// A[m][k] = L[d0 + m + k] and B[k][q] = R_q[k]: an M x K by K x 16 GEMM. The long signal is read
// once per block: the window Ls[x] = L[d0 + k0 + x], x < M + KC (zero-filled outside L), and the
// A fragment element (m, k) of K chunk k0 is Ls[m + k] (no M x K materialization). The templates
// are staged per K chunk of KC = 256 (32 k steps; a template is zero-padded to whole groups of 4 k
// steps past its end, so the padding multiplies zeros); a block keeps the staged chunk while its
// next work item needs the same one (templates of at most KC samples: staged once per block and
// pair group, as seed 004 keeps its templates resident).
//
// Mapping. 128 threads = 4 warps stacked along the lags; warp w owns lags 16 MT w .. 16 MT w +
// 16 MT - 1 of the block's BM = 64 MT lags (MT m tiles of 16 lags) x 2 n tiles of 8 rights.
// MMA fragments (common/mma_tf32.cuh), lane (g, t) = (lane / 4, lane % 4): a0 = A[g][t],
// a1 = A[g + 8][t], a2 = A[g][t + 4], a3 = A[g + 8][t + 4]; with A[m][k] = Ls[m + k], m tile mt and
// k step s read Ls[16 mt + 8 s + g + t + {0, 8, 4, 12}] = pair P(2 mt + s) and P(2 mt + s + 1),
// P(j) = (Ls[base + 8 j], Ls[base + 8 j + 4]), base = 16 MT w + g + t. The window is stored as those
// pairs (slot x: L[x], L[x + 4]; 3xTF32: their big and small parts, one 16-byte load), so a group
// of 4 k steps reads 2 MT + 3 slots per lane for 4 x MT x 2 MMAs (x 3 in 3xTF32). B: b0 = R_g[8 s
// + t], b1 = R_g[8 s + t + 4] of the n tile's right g: the templates are stored as (right slot,
// k step, t) entries (b0, b1[, small b0, small b1]), one 8- or 16-byte load per n tile and k step;
// the slot stride is 4 x 33 entries (33 odd: lanes g, g + 1 .. of one load phase hit distinct
// banks). C: c0 (lag g, right 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1): each store
// instruction writes 8 consecutive lags of 4 rights, 4 full 32-byte sectors.
//
// Work items: (pair group, lag tile); a pair group is left i of PairMap::grid() with rights j0 ..
// j0 + 15 of its M (absent rights are zero templates whose outputs are not written), so all four
// forms run through the same stride table. A persistent grid (resident blocks, at most 2^31 - 1)
// strides over the items: group-major when the templates fit one chunk (consecutive items of a
// block reuse the staged templates), lag-tile-major otherwise (the blocks running together share
// the left window in L2). No grid dimension limit: 4.32e6 lags are 16875 tiles of 256.
//
// Windows (CONVENTIONS.md, "Output windows", "One-dimensional signals"). The output of a pair is
// out_h x out_w, row r = shift dy0 + r, column j = lag dx0 + j. Only dy = 0 overlaps (hL = hR = 1):
// the row r0 = -dy0, when the window holds it, gets C(dx0 + j); every other row is written with
// zeros. A lag tile's K range is the union of its lags' overlaps, k in [max(0, -d_last), min(wR,
// wL - d_first)); a tile with none (or a window without row 0) runs no chunk and writes zeros.
// Lags beyond the full range sum products with L's zero fill: exactly 0.
// Invariants: every (lag, right) of the tile sums each k of [0, wR) at most once (chunks
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
// Resources. 3xtf32: MT = 4 (BM = 256 lags per block), 32 + 32 accumulator registers, 11 pair
// slots of 4 registers per group; tf32: MT = 8 (BM = 512), 64 accumulators, 19 pair slots of 2.
// __launch_bounds__(128, 3): at most 168 registers; ptxas -v (sm_90a, CUDA 13.0): 3xtf32 152, tf32
// 146 registers, no spills, no stack frame (the build enforces it): 3 blocks (12 warps) per SM. Dynamic
// shared memory: 3xtf32 (256 + 256) x 16 B + 16 x 132 x 16 B = 41984 B; tf32 (512 + 256) x 8 B +
// 16 x 132 x 8 B = 23040 B.
// Expected bottleneck (seed 004's case, K = 256: 1.77e10 multiply-adds, 276 MB of output). Per
// group of 4 k steps a warp issues 8 MT MMAs (3x: 24 MT) against 2 MT + 3 pair loads and 8 B
// loads: 3xtf32 96 MMAs per ~54 shared-memory wavefronts, tf32 64 per ~35, under the SM's one
// m16n8k8 per clock, so the tensor pipe (mma.sync reaches ~60-70% of Hopper's dense TF32 peak) and
// the output stores (276 MB, ~90 us at 4.8 TB/s, overlapped across the 3 resident blocks) bound
// it: expected ~70-100 TFLOP/s in 3xTF32 and ~150-250 in TF32. Not yet measured.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "common/device.cuh"
#include "common/mma_tf32.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr {
namespace {

constexpr int kThreads = 128, kWarps = 4;
constexpr int kNB = 16;              // rights per pair group: 2 n tiles of 8 (seed 004's 16 templates)
constexpr int kNT = kNB / 8;
constexpr int kKC = 256;             // K chunk: template samples staged at once
constexpr int kGS = 4;               // k steps per unrolled group
constexpr int kKSP = kKC / 8 + 1;    // k step entries per right slot: 33, odd (bank spread)
constexpr int kRStride = 4 * kKSP;   // entries per right slot (4 lanes t per k step)
constexpr int kFlush = 2;            // groups of k steps per accumulator flush (3xtf32)
static_assert(kKC % (8 * kGS) == 0, "a chunk holds whole groups of k steps");

template <bool SPLIT>
struct Cfg {
    static constexpr int MT = SPLIT ? 4 : 8;         // m tiles (16 lags) per warp
    static constexpr int BM = kWarps * 16 * MT;      // lags per block: 256 or 512
    static constexpr int NP = 2 * MT + kGS - 1;      // pair slots a lane reads per group
    using Entry = typename std::conditional<SPLIT, uint4, uint2>::type;  // (b, b+4[, small b, small b+4])
    static constexpr int LENT = BM + kKC;            // window slots
    static constexpr size_t SMEM = size_t(LENT + kNB * kRStride) * sizeof(Entry);
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
template <bool SPLIT>
__device__ __forceinline__ typename Cfg<SPLIT>::Entry make_entry(float lo, float hi) {
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

template <bool SPLIT>
__global__ void __launch_bounds__(kThreads, 3)
    tensor_hankel_kernel(const float* __restrict__ left, const float* __restrict__ right, float* __restrict__ out,
                         PairGrid P, Geo G) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    using C = Cfg<SPLIT>;
    using E = typename C::Entry;
    constexpr int MT = C::MT, BM = C::BM, NP = C::NP;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    E* Ls = reinterpret_cast<E*>(smem_raw);  // window slots x: (L[x], L[x + 4]) of the chunk
    E* Rs = Ls + C::LENT;                     // right slot n, k step s, lane t: n * kRStride + 4 s + t

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int mw = warp * 16 * MT;  // the warp's first lag in the tile

    // The chunk the template slots hold (block-uniform): pair group, first k and k steps.
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

        float acc[MT][kNT][4];
#pragma unroll
        for (int m = 0; m < MT; ++m)
#pragma unroll
            for (int n = 0; n < kNT; ++n)
#pragma unroll
                for (int v = 0; v < 4; ++v) acc[m][n][v] = 0.0f;

        if (any) {
            for (int64_t k0 = kb; k0 < ke; k0 += kKC) {
                // k steps of this chunk: whole groups, covering min(KC, ke - k0) columns.
                const int cols = int(std::min<int64_t>(kKC, ke - k0));
                const int steps = ceil_div(cols, 8 * kGS) * kGS;
                __syncthreads();  // the previous chunk's (or item's) readers are done
                if (z != staged_z || k0 != staged_k0 || steps != staged_steps) {
                    // Templates: entry (n, s, tt) = R_{j0+n}[k0 + 8s + tt], [.. + 4], zero past wR or
                    // for an absent right.
                    const int per = steps * 4;
                    for (int e = tid; e < kNB * per; e += kThreads) {
                        const int n = e / per, r = e - n * per, s = r >> 2, tt = r & 3;
                        const int j = j0 + n;
                        float lo = 0.0f, hi = 0.0f;
                        if (j < P.M) {
                            const float* R = right + P.right(i, j) * int64_t(G.wR);
                            const int64_t k = k0 + 8 * s + tt;
                            if (k < G.wR) lo = __ldg(R + k);
                            if (k + 4 < G.wR) hi = __ldg(R + k + 4);
                        }
                        Rs[n * kRStride + 4 * s + tt] = make_entry<SPLIT>(lo, hi);
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
                        Ls[x] = make_entry<SPLIT>(lo, hi);
                    }
                }
                __syncthreads();

                // The MMA accumulator of the current flush period (3xtf32), or acc itself (tf32).
                float part_store[SPLIT ? MT : 1][kNT][4];
                if constexpr (SPLIT) {
#pragma unroll
                    for (int m = 0; m < MT; ++m)
#pragma unroll
                        for (int n = 0; n < kNT; ++n)
#pragma unroll
                            for (int v = 0; v < 4; ++v) part_store[m][n][v] = 0.0f;
                }
                const E* lp = Ls + mw + g + t;
                const E* rp = Rs + g * kRStride + t;
#pragma unroll 1
                for (int s0 = 0; s0 < steps; s0 += kGS) {
                    E pr[NP];  // pair slots P(s0 + q)
#pragma unroll
                    for (int q = 0; q < NP; ++q) pr[q] = lp[8 * (s0 + q)];
#pragma unroll
                    for (int ss = 0; ss < kGS; ++ss) {
                        const int s = s0 + ss;
                        E b[kNT];
#pragma unroll
                        for (int n = 0; n < kNT; ++n) b[n] = rp[n * 8 * kRStride + 4 * s];
                        // 3xtf32: the passes outermost, so that 2 MT independent accumulators lie between
                        // the dependent MMAs of one (big*big, big*small, small*big).
#pragma unroll
                        for (int pass = 0; pass < (SPLIT ? 3 : 1); ++pass)
#pragma unroll
                            for (int m = 0; m < MT; ++m) {
                                const E& p0 = pr[2 * m + ss];
                                const E& p1 = pr[2 * m + ss + 1];
                                uint32_t a[4] = {p0.x, p1.x, p0.y, p1.y};  // big (or tf32) parts
                                if constexpr (SPLIT) {
                                    if (pass == 2) a[0] = p0.z, a[1] = p1.z, a[2] = p0.w, a[3] = p1.w;  // small
                                }
#pragma unroll
                                for (int n = 0; n < kNT; ++n) {
                                    if constexpr (SPLIT) {
                                        if (pass == 1)
                                            mma_tf32(part_store[m][n], a, b[n].z, b[n].w);  // big * small
                                        else
                                            mma_tf32(part_store[m][n], a, b[n].x, b[n].y);  // big*big, small*big
                                    } else {
                                        mma_tf32(acc[m][n], a, b[n].x, b[n].y);
                                    }
                                }
                            }
                    }
                    if constexpr (SPLIT) {
                        if (((s0 / kGS) % kFlush) == kFlush - 1) flush_partial(acc, part_store);
                    }
                }
                if constexpr (SPLIT) flush_partial(acc, part_store);
            }
        }

        // Store: row r0 gets the sums, the window's other rows zeros. Accumulator v of (m, n): lag
        // mw + 16 m + g (+8 for v >= 2), right slot 8 n + 2 t + (v & 1).
        const int64_t plane = int64_t(G.out_h) * G.out_w;
#pragma unroll
        for (int n = 0; n < kNT; ++n)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int j = j0 + 8 * n + 2 * t + h;
                if (j >= P.M) continue;
                float* o = out + P.output(i, j) * plane;
#pragma unroll 1
                for (int r = 0; r < G.out_h; ++r) {
                    const bool live = r == G.row0;
                    float* orow = o + int64_t(r) * G.out_w;
#pragma unroll
                    for (int m = 0; m < MT; ++m)
#pragma unroll
                        for (int hi = 0; hi < 2; ++hi) {
                            const int64_t lag = int64_t(tile) * BM + mw + 16 * m + g + 8 * hi;
                            if (lag < G.out_w) orow[lag] = live ? acc[m][n][2 * hi + h] : 0.0f;
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
        if (split)
            blocks_ = configure(tensor_hankel_kernel<true>, Cfg<true>::SMEM);
        else
            blocks_ = configure(tensor_hankel_kernel<false>, Cfg<false>::SMEM);
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        if (split_)
            tensor_hankel_kernel<true><<<blocks_, kThreads, Cfg<true>::SMEM, stream>>>(left, right, out, P_, G_);
        else
            tensor_hankel_kernel<false><<<blocks_, kThreads, Cfg<false>::SMEM, stream>>>(left, right, out, P_, G_);
        XC_CHECK_LAUNCH();
    }

private:
    // Opts the kernel into its shared memory and sizes the persistent grid: the resident blocks,
    // at most one per item (and at most 2^31 - 1).
    template <class K>
    unsigned configure(K kernel, size_t smem) {
        XC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
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
});

}  // namespace
}  // namespace xcorr
