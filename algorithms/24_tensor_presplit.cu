// tensor-presplit: the many-matrix correlation on tensor cores in 3xTF32 (FP32-class accuracy),
// with every operand split once, into shared memory, and the Toeplitz structure in the MMA's B.
//
// Why a second tensor-core kernel. tensor-tiled (23) puts the Toeplitz matrix of a left row in the
// MMA's A operand. An A fragment holds 4 values, and neighbouring k steps and m tiles share them,
// so tensor-tiled loads each left value once and builds the fragments from registers; but the
// sharing puts one value in two fragment positions, and an HMMA reads its A from 4 consecutive
// registers, so ptxas copies (more than one move per MMA), and each value is split into big +
// small by every warp that uses it, once per use: several instructions per MMA, and the tensor
// pipe about half idle on the real-data shape. Here:
//   * The MMA's M = 16 rights, N = 8 shifts dx, K = 8 columns c of one R row r, one shift row dy:
//       C[j][dx] += sum_c R_j[r][c] * L[r + dy][c + dx]      (A = right rows, B = Toeplitz of L).
//     With the K permutation k = t <-> column 2t, k = t + 4 <-> column 2t + 1 (K is a summation
//     index: any bijection shared by A and B is free), lane (g, t) needs b0, b1 = L[x], L[x + 1]
//     with x = 8p + 2t + g (p = k step + n tile), and a0..a3 = R_g[2t], R_g+8[2t], R_g[2t+1],
//     R_g+8[2t+1]: neither fragment shares a register with another, so no moves.
//   * Staging splits every value once per block and stores the fragments as they are consumed:
//     left row pairs as uint4 (big x, big x+1, small x, small x+1) at x, right quads as two uint4
//     (big, small) per lane. The inner loop is LDS.128 and HMMA only: per R row and warp, 96 MMAs
//     (2 shift rows x 4 n tiles x 4 k steps x 3 passes), 8 A loads and 14 B loads (the 7 pairs
//     of each shift row serve 4 k steps x 4 n tiles along their anti-diagonals).
//   * K steps outside the union of the block's overlaps are skipped with a block-uniform branch
//     around their 24 MMAs. Skipping per (k step, n tile of 8 shifts) instead would drop 1/5 of
//     the real-data shape's MMAs, but ptxas predicates each HMMA and puts a WARPSYNC with a
//     5-cycle stall before it, and per pair of n tiles it drains the pipe at every branch (an
//     HMMA result is waited for 24 cycles): neither is faster (notes/24_tensor_presplit.md), so
//     the simplest stays.
// Block: 4 warps stacked along dy, each 2 shift rows x 32 shifts x 16 rights; block tile 8 dy x
// 32 dx x 16 rights of one left. Blocks stride over the work items (shift tile, left and group of
// 16 rights), heaviest tile first across the groups (TileSchedule, common/shift_tiles_launch.cuh). The K
// loop walks the union of the block's overlaps in chunks of 4 R rows x 32 columns,
// double-buffered: the next chunk's global loads are issued into registers before the MMAs of this
// one and split and stored after them, one barrier per chunk. Each warp clips its R rows to the
// union of its own two shift rows.
//
// Precision: as tensor-tiled's 3xTF32 (common/mma_tf32.cuh): big = rna-rounded TF32, small = the
// exact rest, fed unrounded (the MMA truncates it); three MMAs big*big + big*small + small*big; the
// truncating tensor-core accumulation is flushed every chunk (4 rows x 4 k steps x 3 = 48 products
// per accumulator) into an FP32 round-to-nearest total. Bound 1e-5 as every FP32 variant.
//
// Forms: one-to-many, n-to-mn, n-to-m (16 rights per block; one-to-one would use 1/16 of each MMA).
//
// Resource budget: __launch_bounds__(128, 3), at most 168 registers, no spills, no stack; 55296 B
// of dynamic shared memory (2 stages); 3 blocks (12 warps) per SM. At 128 registers (4 blocks) it
// spills.
// Measurements and history: notes/24_tensor_presplit.md.
#include <cstdint>
#include <memory>

#include "common/device.cuh"
#include "common/mma_tf32.cuh"
#include "common/shift_tiles.cuh"
#include "xcorr/cuda_check.hpp"
#include "common/launch.cuh"
#include "xcorr/registry.hpp"
#include "common/shift_tiles_launch.cuh"

namespace xcorr::tensor_presplit {
namespace {

constexpr int kThreads = 128, kWarps = 4;
constexpr int kDY = 2;                           // shift rows per warp
constexpr int kNN = 4;                           // n tiles of 8 shifts per warp
constexpr int kTDY = kWarps * kDY, kTDX = 8 * kNN;  // block tile: 8 shift rows x 32 shift columns
constexpr int kSlots = 16;                       // rights per block: the MMA's M
constexpr int kKR = 4, kKS = 4, kKC = 8 * kKS;   // chunk: 4 R rows x 32 columns (4 k steps)
constexpr int kLRows = kKR + kTDY - 1;           // left rows of a chunk (11)
constexpr int kLCols = kKC + kTDX;               // left pair slots per row (64; x <= 61 is read)
constexpr int kLElems = kLRows * kLCols;
constexpr int kLIters = ceil_div(kLElems, kThreads);
constexpr int kNP = kKS + kNN - 1;               // B pairs per shift row and R row (7)
static_assert(kKS == kWarps, "warp w stages k step w of the right quads");

struct Stage {
    uint4 l[kLRows][kLCols];   // (big L[x], big L[x+1], small L[x], small L[x+1])
    uint4 ab[kKR][kKS][32];    // A fragment per lane, big parts
    uint4 as[kKR][kKS][32];    // small parts
};
constexpr size_t kSmem = 2 * sizeof(Stage);  // 55296 B: 3 blocks per SM fit

// Raw values of one chunk, fetched before the MMAs of the previous chunk and stored after them.
struct Raw {
    float l[kLIters][2];
    float a[kKR][4];
};

__device__ __forceinline__ uint4 split4(float x0, float x1, float x2, float x3, uint4& small) {
    uint4 big;
    split(x0, big.x, small.x);
    split(x1, big.y, small.y);
    split(x2, big.z, small.z);
    split(x3, big.w, small.w);
    return big;
}

__global__ void __launch_bounds__(kThreads, 3)
    tensor_presplit_kernel(const float* __restrict__ left, const float* __restrict__ right,
                           float* __restrict__ out, int hL, int wL, int hR, int wR, Pairs P,
                           WorkItems W) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
    extern __shared__ __align__(16) unsigned char smem_raw[];
    Stage* stages = reinterpret_cast<Stage*>(smem_raw);
    __shared__ int64_t rslot[kSlots], lslot;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int dyl = warp * kDY;  // the warp's first shift row in the block tile

    const int out_h = hL + hR - 1, out_w = wL + wR - 1;
    const int64_t lsize = int64_t(hL) * wL, rsize = int64_t(hR) * wR;
    // Work items (shift tile, pair group) heaviest tile first across the groups (common/shift_tiles.cuh).
    for (int64_t w = blockIdx.x; w < int64_t(W.ntiles) * W.ngroups; w += gridDim.x) {
        int64_t z;
        const ShiftTile tile = work_item(W, w, kTDY, kTDX, hR, wR, z);
        const int y0 = tile.y0, x0 = tile.x0, dyb = tile.dyb, dxb = tile.dxb;  // dyb, dxb: first shift

        // K range: the R rows and columns in the union of the block's overlaps.
        const Span rB = union_span(dyb, min(dyb + kTDY - 1, hL - 1), hL, hR);
        const Span cB = union_span(dxb, min(dxb + kTDX - 1, wL - 1), wL, wR);
        const int dyw = dyb + dyl;
        const Span rW = dyw > hL - 1 ? Span{0, 0} : union_span(dyw, min(dyw + kDY - 1, hL - 1), hL, hR);
        const int ncc = ceil_div(cB.end - cB.begin, kKC);
        const int nchunks = ceil_div(rB.end - rB.begin, kKR) * ncc;

        const auto [i0, j0] = fill_slots(P, z, lsize, rsize, rslot, lslot);

        // Global -> registers, zero outside the matrices and for absent rights. Left: element e
        // of the chunk's 11 x 64 window and its right neighbour. Right: warp w fetches k step w
        // of the 4 R rows for its own lane's A fragment (slots g, g + 8; columns 2t, 2t + 1).
        auto fetch = [&](int k, Raw& raw) {
            const int r0 = rB.begin + (k / ncc) * kKR, c0 = cB.begin + (k % ncc) * kKC;
#pragma unroll
            for (int i = 0; i < kLIters; ++i) {
                const int e = tid + kThreads * i;
                const int r = r0 + dyb + e / kLCols, c = c0 + dxb + e % kLCols;
                const bool rin = (kLElems % kThreads == 0 || e < kLElems) && r >= 0 && r < hL;
                const float* row = left + lslot + (rin ? int64_t(r) * wL : 0);
                raw.l[i][0] = rin && c >= 0 && c < wL ? __ldg(row + c) : 0.0f;
                raw.l[i][1] = rin && c + 1 >= 0 && c + 1 < wL ? __ldg(row + c + 1) : 0.0f;
            }
            const int c = c0 + 8 * warp + 2 * t;  // >= 0: the union starts inside R
#pragma unroll
            for (int rr = 0; rr < kKR; ++rr) {
                const int r = r0 + rr;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int64_t base = rslot[g + 8 * h];
                    const bool ok = base >= 0 && r < hR;
                    const float* row = right + (ok ? base + int64_t(r) * wR : 0);
                    raw.a[rr][h] = ok && c < wR ? __ldg(row + c) : 0.0f;
                    raw.a[rr][2 + h] = ok && c + 1 < wR ? __ldg(row + c + 1) : 0.0f;
                }
            }
        };
        // Registers -> shared, split into big and small in the fragment layouts.
        auto commit = [&](const Raw& raw, Stage& st) {
#pragma unroll
            for (int i = 0; i < kLIters; ++i) {
                const int e = tid + kThreads * i;
                if (kLElems % kThreads == 0 || e < kLElems) {
                    uint32_t b0, s0, b1, s1;
                    split(raw.l[i][0], b0, s0);
                    split(raw.l[i][1], b1, s1);
                    st.l[e / kLCols][e % kLCols] = make_uint4(b0, b1, s0, s1);
                }
            }
#pragma unroll
            for (int rr = 0; rr < kKR; ++rr) {
                uint4 small;
                st.ab[rr][warp][lane] = split4(raw.a[rr][0], raw.a[rr][1], raw.a[rr][2], raw.a[rr][3], small);
                st.as[rr][warp][lane] = small;
            }
        };

        // acc: the FP32 (round-to-nearest) total; part: the MMA accumulator of the current chunk.
        float acc[kDY][kNN][4], part[kDY][kNN][4];
#pragma unroll
        for (int d = 0; d < kDY; ++d)
#pragma unroll
            for (int n = 0; n < kNN; ++n)
#pragma unroll
                for (int v = 0; v < 4; ++v) acc[d][n][v] = part[d][n][v] = 0.0f;

        register_pipelined_chunks<Raw>(nchunks, stages, fetch, commit, [&](int k, const Stage& st) {
            const int r0 = rB.begin + (k / ncc) * kKR, c0 = cB.begin + (k % ncc) * kKC;
            const int live = min(kKS, ceil_div(cB.end - c0, 8));  // k steps inside the union
            const int rb = max(0, rW.begin - r0), re = min(kKR, rW.end - r0);
#pragma unroll 1
            for (int rr = rb; rr < re; ++rr) {
                // B pair p of shift row d: x = 8p + 2t + g in the left row r0 + rr + dy.
                uint4 bp[kDY][kNP];
#pragma unroll
                for (int d = 0; d < kDY; ++d)
#pragma unroll
                    for (int p = 0; p < kNP; ++p) bp[d][p] = st.l[rr + dyl + d][8 * p + 2 * t + g];
#pragma unroll
                for (int s = 0; s < kKS; ++s) {
                    if (s >= live) continue;  // a block-uniform branch around 24 MMAs
                    const uint4 ab = st.ab[rr][s][lane], as = st.as[rr][s][lane];
                    const uint32_t abig[4] = {ab.x, ab.y, ab.z, ab.w}, asmall[4] = {as.x, as.y, as.z, as.w};
                    // Passes outermost: 8 independent accumulators between dependent MMAs.
#pragma unroll
                    for (int pass = 0; pass < 3; ++pass)
#pragma unroll
                        for (int d = 0; d < kDY; ++d)
#pragma unroll
                            for (int n = 0; n < kNN; ++n) {
                                const uint4 b = bp[d][s + n];
                                if (pass == 0) mma_tf32(part[d][n], abig, b.x, b.y);    // big * big
                                if (pass == 1) mma_tf32(part[d][n], abig, b.z, b.w);    // big * small
                                if (pass == 2) mma_tf32(part[d][n], asmall, b.x, b.y);  // small * big
                            }
                }
            }
            flush_partial(acc, part);
        });

        // Accumulator v of (d, n): right slot g (+8 for v >= 2), shift column 8n + 2t + (v & 1).
#pragma unroll
        for (int d = 0; d < kDY; ++d)
#pragma unroll
            for (int n = 0; n < kNN; ++n)
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    const int j = j0 + g + (v >= 2 ? 8 : 0);
                    const int y = y0 + dyl + d, x = x0 + 8 * n + 2 * t + (v & 1);
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
    .name = "tensor-presplit",
    .family = "hopper",
    .summary = "Toeplitz GEMM on tensor cores, 3xTF32 (FP32-class accuracy): operands split once into "
               "shared memory in fragment layout, Toeplitz in B, 16 rights x 8 shifts per MMA (sm_80+)",
    .timed = "kernel",
    .precision = "3xtf32",
    .tolerance = 1e-5,
    .forms = {Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {},
    .make = [](const Problem& p, const Params&) -> std::unique_ptr<Instance> {
        require_mma_tf32("tensor-presplit");
        return std::make_unique<GroupTiled>(p, tensor_presplit_kernel, kThreads, kSmem, kTDY, kTDX, kSlots);
    },
    .min_cc = 80,  // mma.sync TF32
});

}  // namespace
}  // namespace xcorr::tensor_presplit
