// tensor-rowpair: tensor-presplit (24) with the MMA's M made of 2 R rows x 8 rights instead of 16
// rights, warps that split the shift columns, and the blocks' work ordered heaviest first across
// all pair groups.
//
// Why. On the real-data shape (50 rights per left, 96 x 96) 24 does 1.72x the useful products (a
// model of its loops): 50 rights fill 4 groups of 16 M slots (64 slots, 1.28x), and a warp's 32
// shift columns share one k range, the union of their overlaps, up to 31 columns longer than a
// shift's own overlap at the edges of a 96-wide problem (1.35x). Here:
//   * M = (q, b): R row r + q (q = 0, 1) of right b (8 rights). With the L row l = r + D as the
//     Toeplitz B, row q accumulates shift row dy = D - q:
//       C[(q, b)][dx] += sum_c R_b[r + q][c] * L[r + D][c + dx].
//     As the warp walks r, shift row D gets every R row through q = 0 and D - 1 through q = 1, so
//     one MMA serves 2 shift rows x 8 rights; 50 rights need 7 groups of 8 (56 slots, 1.12x), and
//     8 rights fill an MMA (24 fills half of it). K permutation and B pairs are 24's (k = t <->
//     column 2t, k = t + 4 <-> 2t + 1); lane (g, t)'s A quad is R_g[r][2t], R_g[r+1][2t],
//     R_g[r][2t+1], R_g[r+1][2t+1], so staging splits each R value once and stores it in 2 quads.
//   * A warp owns 8 shift rows (4 row pairs D) x 16 shift columns (2 n tiles) and skips, with a
//     warp-uniform branch, the k steps outside the union of its own 16 columns' overlaps. Per R
//     row and warp: 96 MMAs (4 pairs x 2 n tiles x 4 k steps x 3 passes) from 8 A loads and 20 B
//     loads (5 pairs of each L row serve 4 k steps x 2 n tiles; 24: 96 from 22). In all, 1.43x
//     the useful products on the real-data shape (24: 1.72x). The time falls less than the MMA
//     count: the chunk barrier makes a block wait for its busiest warp, so a warp's skipped k
//     steps only free the tensor pipe for the other blocks on its SM.
//   * Work item = (shift tile, pair group), ordered tile-major inside windows of pair groups whose
//     inputs fit in half the L2: with blockIdx.x over tiles and blockIdx.z over groups (24), the
//     heaviest tiles of the last groups start late and the SMs idle (notes/25_tensor_rowpair.md;
//     TileSchedule in common/shift_tiles_launch.cuh, which 24 uses too).
// Block: 4 warps, 2 along dy x 2 along dx; block tile 16 dy x 32 dx x 8 rights of one left. The K
// loop walks the union of the block's overlaps in chunks of 4 row pairs x 32 columns,
// double-buffered as in 24: the next chunk's global loads are issued into registers before the
// MMAs of this one (one load per left value, its neighbour by shuffle) and split and stored after
// them, one barrier per chunk. Each warp clips its rows to the union of its own 8 shift rows.
//
// Precision: as 24 (common/mma_tf32.cuh): 3xTF32, small parts fed unrounded, the truncating
// accumulator flushed every chunk (48 products) into an FP32 round-to-nearest total. Bound 1e-5.
//
// Forms: one-to-many, n-to-mn, n-to-m (8 rights per block; one-to-one would use 1/8 of each MMA).
//
// Resource budget: __launch_bounds__(128, 3), at most 168 registers, no spills; 69632 B of dynamic
// shared memory (2 stages); 3 blocks (12 warps) per SM. Holding all 20 B pairs of a row does not
// fit that budget (it spills), so k step s loads pairs s + 1 and carries them to step s + 1.
// Measurements and history: notes/25_tensor_rowpair.md.
#include <cstdint>
#include <memory>

#include "common/device.cuh"
#include "common/mma_tf32.cuh"
#include "common/shift_tiles.cuh"
#include "xcorr/cuda_check.hpp"
#include "common/launch.cuh"
#include "xcorr/registry.hpp"
#include "common/shift_tiles_launch.cuh"

namespace xcorr::tensor_rowpair {
namespace {

constexpr int kPairs = 4;                          // row pairs D per warp: 8 shift rows
constexpr int kNN = 2;                             // n tiles of 8 shifts per warp
constexpr int kWarpsY = 2, kWarpsX = 2;            // warps along dy and along dx
constexpr int kWarps = kWarpsY * kWarpsX, kThreads = 32 * kWarps;
constexpr int kWDY = 2 * kPairs, kWDX = 8 * kNN;   // warp tile: 8 shift rows x 16 shift columns
constexpr int kTDY = kWarpsY * kWDY, kTDX = kWarpsX * kWDX;  // block tile: 16 x 32
constexpr int kSlots = 8;                          // rights per block (x 2 R rows: the MMA's M)
constexpr int kKR = 4, kKS = 4, kKC = 8 * kKS;     // chunk: 4 row pairs x 32 columns (4 k steps)
constexpr int kLRows = kKR + kTDY - 2;             // left rows of a chunk (18)
constexpr int kLCols = kKC + kTDX;                 // left pair slots per row (64; x <= 61 is read)
constexpr int kLIters = ceil_div(kLRows, kWarps);  // window rows per warp
static_assert(kLCols == 64, "a lane stages columns lane and lane + 32 of a window row");
static_assert(kKS == kWarps, "warp w stages k step w of the right quads");
static_assert(kNN == 2, "the k loop carries one B pair per row pair from n tile 1 to n tile 0");

struct Stage {
    uint4 l[kLRows][kLCols];   // (big L[x], big L[x+1], small L[x], small L[x+1])
    uint4 ab[kKR][kKS][32];    // A fragment per lane, big parts
    uint4 as[kKR][kKS][32];    // small parts
};
constexpr size_t kSmem = 2 * sizeof(Stage);  // 69632 B: 3 blocks per SM fit

// Raw values of one chunk, fetched before the MMAs of the previous chunk and stored after them.
struct Raw {
    float l[kLIters][2];  // window row warp + kWarps i, column lane + 32 h
    float a[kKR + 1][2];  // R_g rows r0 .. r0 + kKR, columns 2t, 2t + 1 of the warp's k step
};

__global__ void __launch_bounds__(kThreads, 3)
    tensor_rowpair_kernel(const float* __restrict__ left, const float* __restrict__ right,
                          float* __restrict__ out, int hL, int wL, int hR, int wR, Pairs P,
                          WorkItems W) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Stage* stages = reinterpret_cast<Stage*>(smem_raw);
    __shared__ int64_t rslot[kSlots], lslot;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wy = warp / kWarpsX, wx = warp % kWarpsX;

    const int out_h = hL + hR - 1, out_w = wL + wR - 1;
    const int64_t lsize = int64_t(hL) * wL, rsize = int64_t(hR) * wR;
    // Work items (shift tile, pair group) heaviest tile first across the groups (common/shift_tiles.cuh).
    for (int64_t w = blockIdx.x; w < int64_t(W.ntiles) * W.ngroups; w += gridDim.x) {
        int64_t z;
        const ShiftTile tile = work_item(W, w, kTDY, kTDX, hR, wR, z);
        const int y0 = tile.y0, x0 = tile.x0, dyb = tile.dyb, dxb = tile.dxb;  // dyb, dxb: first shift

        // K range: the R rows and columns in the union of the block's overlaps. A row pair r holds
        // R rows r and r + 1, so the row pairs of a union [a, b) of rows are [a - 1, b).
        const Span rB = union_span(dyb, min(dyb + kTDY - 1, hL - 1), hL, hR);
        const Span cB = union_span(dxb, min(dxb + kTDX - 1, wL - 1), wL, wR);
        const int dyw = dyb + kWDY * wy, dxw = dxb + kWDX * wx;
        const Span rW = dyw > hL - 1 ? Span{0, 0} : union_span(dyw, min(dyw + kWDY - 1, hL - 1), hL, hR);
        const Span cW = dxw > wL - 1 ? Span{0, 0} : union_span(dxw, min(dxw + kWDX - 1, wL - 1), wL, wR);
        const Span rWp = rW.end > rW.begin ? Span{rW.begin - 1, rW.end} : Span{0, 0};  // the warp's row pairs
        const int rbegin = rB.begin - 1;
        const int ncc = ceil_div(cB.end - cB.begin, kKC);
        const int nchunks = rB.end > rB.begin ? ceil_div(rB.end - rbegin, kKR) * ncc : 0;

        const auto [i0, j0] = fill_slots(P, z, lsize, rsize, rslot, lslot);

        // Global -> registers, zero outside the matrices and for absent rights. Left: warp w
        // fetches rows w, w + kWarps, ... of the chunk's window (row 0: L row r0 + dyb + 1),
        // columns lane and lane + 32 (the right neighbours come by shuffle in commit: one load per
        // value keeps the prefetch within the register budget). Right: warp w fetches k step w
        // (columns 2t, 2t + 1) of right g's kKR + 1 R rows.
        auto fetch = [&](int k, Raw& raw) {
            const int r0 = rbegin + (k / ncc) * kKR, c0 = cB.begin + (k % ncc) * kKC;
#pragma unroll
            for (int i = 0; i < kLIters; ++i) {
                const int wrow = warp + kWarps * i, r = r0 + dyb + 1 + wrow;
                const bool rin = (kLRows % kWarps == 0 || wrow < kLRows) && r >= 0 && r < hL;
                const float* row = left + lslot + (rin ? int64_t(r) * wL : 0);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int c = c0 + dxb + lane + 32 * h;
                    raw.l[i][h] = rin && c >= 0 && c < wL ? __ldg(row + c) : 0.0f;
                }
            }
            const int64_t base = rslot[g];
            const int c = c0 + 8 * warp + 2 * t;  // >= 0: the union starts inside R
#pragma unroll
            for (int rr = 0; rr <= kKR; ++rr) {
                const int r = r0 + rr;
                const bool ok = base >= 0 && r >= 0 && r < hR;
                const float* row = right + (ok ? base + int64_t(r) * wR : 0);
                raw.a[rr][0] = ok && c < wR ? __ldg(row + c) : 0.0f;
                raw.a[rr][1] = ok && c + 1 < wR ? __ldg(row + c + 1) : 0.0f;
            }
        };
        // Registers -> shared, split into big and small in the fragment layouts.
        auto commit = [&](const Raw& raw, Stage& st) {
#pragma unroll
            for (int i = 0; i < kLIters; ++i) {
                const int wrow = warp + kWarps * i;
                if (kLRows % kWarps != 0 && wrow >= kLRows) continue;  // warp-uniform
                store_split_pairs(raw.l[i], st.l[wrow]);  // slot 63 is never read (x <= 61)
            }
            uint32_t big[kKR + 1][2], small[kKR + 1][2];
#pragma unroll
            for (int rr = 0; rr <= kKR; ++rr) {
                split(raw.a[rr][0], big[rr][0], small[rr][0]);
                split(raw.a[rr][1], big[rr][1], small[rr][1]);
            }
            // Row pair rr: a0..a3 = (row rr, col 2t), (rr + 1, 2t), (rr, 2t + 1), (rr + 1, 2t + 1).
#pragma unroll
            for (int rr = 0; rr < kKR; ++rr) {
                st.ab[rr][warp][lane] = make_uint4(big[rr][0], big[rr + 1][0], big[rr][1], big[rr + 1][1]);
                st.as[rr][warp][lane] = make_uint4(small[rr][0], small[rr + 1][0], small[rr][1], small[rr + 1][1]);
            }
        };

        // acc: the FP32 (round-to-nearest) total; part: the MMA accumulator of the current chunk.
        float acc[kPairs][kNN][4], part[kPairs][kNN][4];
#pragma unroll
        for (int d = 0; d < kPairs; ++d)
#pragma unroll
            for (int n = 0; n < kNN; ++n)
#pragma unroll
                for (int v = 0; v < 4; ++v) acc[d][n][v] = part[d][n][v] = 0.0f;

        register_pipelined_chunks<Raw>(nchunks, stages, fetch, commit, [&](int k, const Stage& st) {
            const int r0 = rbegin + (k / ncc) * kKR, c0 = cB.begin + (k % ncc) * kKC;
            // The warp's k steps: [c0 + 8s, c0 + 8s + 8) meeting its columns cW.
            const int slo = cW.begin > c0 ? (cW.begin - c0) / 8 : 0;
            const int shi = cW.end > c0 ? min(kKS, ceil_div(cW.end - c0, 8)) : 0;
            const int rb = max(0, rWp.begin - r0), re = min(kKR, rWp.end - r0);
#pragma unroll 1
            for (int rr = rb; rr < re; ++rr) {
                // B pair p of row pair d: x = 8p + 2t + g (+ kWDX per warp along dx) in window
                // row rr + 2d + kWDY wy, i.e. L row r0 + rr + D with D = dyw + 2d + 1. K step s
                // uses pairs s (n tile 0) and s + 1 (n tile 1); each is loaded once, outside the
                // branch, and carried to the next step (holding all 5 x 4 pairs would spill).
                const uint4* lrow = &st.l[rr + kWDY * wy][2 * t + g + kWDX * wx];
                uint4 b0[kPairs], b1[kPairs];
#pragma unroll
                for (int d = 0; d < kPairs; ++d) b0[d] = lrow[2 * d * kLCols];
#pragma unroll
                for (int s = 0; s < kKS; ++s) {
#pragma unroll
                    for (int d = 0; d < kPairs; ++d) b1[d] = lrow[2 * d * kLCols + 8 * (s + 1)];
                    if (s >= slo && s < shi) {  // a warp-uniform branch around 24 MMAs
                        const uint4 ab = st.ab[rr][s][lane], as = st.as[rr][s][lane];
                        const uint32_t abig[4] = {ab.x, ab.y, ab.z, ab.w}, asmall[4] = {as.x, as.y, as.z, as.w};
                        // Passes outermost: 2 kPairs independent accumulators between dependent MMAs.
#pragma unroll
                        for (int pass = 0; pass < 3; ++pass)
#pragma unroll
                            for (int d = 0; d < kPairs; ++d)
#pragma unroll
                                for (int n = 0; n < kNN; ++n) {
                                    const uint4 b = n == 0 ? b0[d] : b1[d];
                                    if (pass == 0) mma_tf32(part[d][n], abig, b.x, b.y);    // big * big
                                    if (pass == 1) mma_tf32(part[d][n], abig, b.z, b.w);    // big * small
                                    if (pass == 2) mma_tf32(part[d][n], asmall, b.x, b.y);  // small * big
                                }
                    }
#pragma unroll
                    for (int d = 0; d < kPairs; ++d) b0[d] = b1[d];
                }
            }
            flush_partial(acc, part);
        });

        // Accumulator v of (d, n): right slot g, R row q = (v >= 2), i.e. shift row D - q =
        // dyw + 2d + 1 - q; shift column kWDX wx + 8n + 2t + (v & 1).
#pragma unroll
        for (int d = 0; d < kPairs; ++d)
#pragma unroll
            for (int n = 0; n < kNN; ++n)
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    const int j = j0 + g;
                    const int y = y0 + kWDY * wy + 2 * d + 1 - (v >= 2 ? 1 : 0);
                    const int x = x0 + kWDX * wx + 8 * n + 2 * t + (v & 1);
                    if (j < P.M && y < out_h && x < out_w)
                        out[P.output(i0, j) * out_h * out_w + int64_t(y) * out_w + x] =
                            acc[d][n][v];
                }
        __syncthreads();  // the slot table is refilled for the next work item
    }
#else
    __trap();  // never launched: the factory requires compute capability 8.0
#endif
}

XCORR_REGISTER_VARIANT(Variant{
    .name = "tensor-rowpair",
    .family = "hopper",
    .summary = "Toeplitz GEMM on tensor cores, 3xTF32 (FP32-class accuracy): operands split once into "
               "shared memory, M = 2 R rows x 8 rights (2 shift rows per MMA), warps split the shift "
               "columns (sm_80+)",
    .timed = "kernel",
    .precision = "3xtf32",
    .tolerance = 1e-5,
    .forms = {Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {},
    .make = [](const Problem& p, const Params&) -> std::unique_ptr<Instance> {
        require_mma_tf32("tensor-rowpair");
        return std::make_unique<GroupTiled>(p, tensor_rowpair_kernel, kThreads, kSmem, kTDY, kTDX, kSlots);
    },
    .min_cc = 80,  // mma.sync TF32
});

}  // namespace
}  // namespace xcorr::tensor_rowpair
