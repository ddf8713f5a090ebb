// tensor-wgmma: the Toeplitz GEMM of tensor-rowpair (25) on Hopper's warpgroup MMA (wgmma,
// sm_90a), 3xTF32. mma.sync issues one m16n8k8 per warp every few cycles and leaves 25's tensor
// pipe about half idle (issue-bound on the HMMA spacing); one wgmma m64n64k8 does 32x the
// work of an m16n8k8 from a single instruction of the whole warpgroup, with B read by the tensor
// cores straight from shared memory.
//
// Mapping. The MMA's M is the shift columns (the Toeplitz of an L row, from registers), its N =
// 8 R rows x 8 rights (from shared memory), K = 8 R columns:
//     D[dx][(q, b)] += sum_c L[r + D][c + dx] * R_b[r + q][c]   accumulates shift row dy = D - q,
// so as the block walks r, accumulator (q, b) sums every R row r + q of shift row D - q. One
// wgmma serves 8 shift rows x 16 shift columns per warp x 8 rights; B for step r + 1 is B for r
// moved by one R row, so B is staged once per R row (not per shift row) and addressed by a
// descriptor. Warp w of the block (one warpgroup) owns shift columns 16 (w % 2) .. + 15 (its 16
// rows of A) and shift rows 8 (w / 2) .. + 7 (its L row r + D_{w/2}); block tile 16 dy x 32 dx x
// 8 rights of one left, work items as 24 and 25 (TileSchedule, common/shift_tiles_launch.cuh).
// K loop: the union of the block's overlaps, from 7 R rows before it (row q = 7 of the first
// step), in chunks of 8 steps r x 32 columns (4 k steps), double-buffered: the next chunk's global
// loads are issued into registers before this chunk's MMAs and split and stored after them.
// Staged per chunk: the left window (16 L rows x 64 column pairs, (big x, big x+1, small x, small
// x+1) as in 24 and 25: one 16-byte load gives a thread its A fragment's big and small parts,
// with 24's K permutation k = t <-> column 2t, k = t + 4 <-> 2t + 1), and B as K-major core
// matrices (8 rights x 4 permuted columns) per R row, k step and half of the k step, big and
// small parts apart. Per step: 2 shared loads per thread, 3 wgmmas (big*big, big*small,
// small*big) on one accumulator, then a commit; the chunk ends with a wait for all of them.
//
// Windows (CONVENTIONS.md, "Output windows"): any rectangle of shifts. The block tiles cut the
// window's out_h x out_w outputs from its first shift (WorkItems::shifts, TileSchedule), so tile
// (ty, tx) holds shifts dy0 + 16 ty .., dx0 + 32 tx ..; its K loop is the union of the overlaps of
// its shifts up to the window's last (and L's last), the same clipping as the full output's, and a
// tile without overlap runs no chunk and writes its accumulators' zeros (a shift without overlap
// only sums products with a zero factor: exactly 0). Only the window's elements are written. A
// small window of large matrices has too few (tile, pair group) items to fill the GPU: k_slices
// then cuts each item's chunks into ksplit slices, one block each, that add their partial sums
// into the output, zeroed first (GroupTiled; the order of the adds varies from run to run in the
// last bits).
// The full output has its own instantiation (kWindow = false), without slices and without the
// window's bounds.
//
// Precision: 3xTF32 as 24 (common/mma_tf32.cuh), the truncating accumulator flushed every chunk
// into an FP32 round-to-nearest total. Bound 1e-5.
//
// Forms: one-to-many, n-to-mn, n-to-m (8 rights per block), each with any window. Needs compute
// capability 9.0 and a binary built for it (meson.build builds 9.0 as sm_90a); elsewhere the
// factory refuses.
//
// Resource budget: __launch_bounds__(128, 2) (up to 255 registers), no spills; 98304 B of dynamic
// shared memory (2 stages of 48 KB); 2 blocks (2 warpgroups) per SM.
// The wgmmas of a step chain on one accumulator; the A registers of the 4 unrolled k steps are
// distinct, but the next R row of the chunk rewrites them, and PTX leaves a wgmma's A registers
// undefined until a wait on its group (ptxas inserts none: it even reuses them as scratch at the
// top of the row loop). So before step s loads its A, the kernel waits for step s of the previous
// row (wgmma.wait_group ke - 1: the 3 later steps stay in flight). One wait per chunk is not
// enough: it passes by timing alone, and warps running apart (under compute-sanitizer) then give
// errors of 1e-5 (notes/26_tensor_wgmma.md).
// Measurements and history: notes/26_tensor_wgmma.md.
#include <algorithm>
#include <cstdint>
#include <memory>

#include "common/device.cuh"
#include "common/mma_tf32.cuh"
#include "common/shift_tiles.cuh"
#include "common/wgmma.cuh"
#include "xcorr/cuda_check.hpp"
#include "common/launch.cuh"
#include "xcorr/registry.hpp"
#include "common/shift_tiles_launch.cuh"

namespace xcorr::tensor_wgmma {
namespace {

constexpr int kQ = 8;                               // R rows per MMA: N = kQ x 8 rights = 64
constexpr int kWarpsX = 2, kWarpsY = 2;             // warp w: columns 16 (w % 2), row group w / 2
constexpr int kThreads = 128;                       // one warpgroup
constexpr int kTDY = kWarpsY * kQ, kTDX = kWarpsX * 16;  // block tile: 16 x 32
constexpr int kSlots = 8;                           // rights per block
constexpr int kKR = 8, kKS = 4, kKC = 8 * kKS;      // chunk: 8 steps r x 32 columns (4 k steps)
constexpr int kLRows = kKR + (kWarpsY - 1) * kQ;    // left window rows (16)
constexpr int kLCols = kKC + kTDX;                  // left pair slots per row (64; x <= 61 is read)
constexpr int kLIters = kLRows / 4;                 // window rows per warp
constexpr int kBRows = kKR + kQ;                    // R rows staged (15 read)
constexpr int kBQuads = kBRows * kKS * 2 * kSlots;  // core-matrix rows of 16 bytes
constexpr int kBIters = kBQuads / kThreads;
static_assert(kLCols == 64 && kLRows % 4 == 0, "a lane stages columns lane and lane + 32 of window rows");
static_assert(kBQuads % kThreads == 0 && kThreads == 128 && kSlots == 8, "thread -> (right, half, k step) of B");

struct Stage {
    uint4 l[kLRows][kLCols];  // (big L[x], big L[x+1], small L[x], small L[x+1])
    uint4 bb[kBQuads];        // B big parts: ((row * kKS + k step) * 2 + half) * 8 + right
    uint4 bs[kBQuads];        // small parts
};
constexpr size_t kSmem = 2 * sizeof(Stage);  // 98304 B: 2 blocks per SM
constexpr uint32_t kLBO = 8 * 16, kSBO = kKS * 2 * 8 * 16;  // bytes: next half k step, next R row

// Raw values of one chunk, fetched before the MMAs of the previous chunk and stored after them.
struct Raw {
    float l[kLIters][2];  // window row warp + 4 i, columns lane + 32 h
    float b[kBIters][4];  // B quad tid + 128 i
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Wait until fewer than n (1 .. kKS, block-uniform) committed wgmma groups are in flight.
static_assert(kKS == 4, "wait_groups_below covers 1 .. 4 groups");
__device__ __forceinline__ void wait_groups_below(int n) {
    if (n >= 4)
        wgmma_wait<3>();
    else if (n == 3)
        wgmma_wait<2>();
    else if (n == 2)
        wgmma_wait<1>();
    else
        wgmma_wait<0>();
}
#endif

template <bool kWindow>
__global__ void __launch_bounds__(kThreads, 2)
    tensor_wgmma_kernel(const float* __restrict__ left, const float* __restrict__ right, float* __restrict__ out,
                        int hL, int wL, int hR, int wR, Pairs P, WorkItems W) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(128) unsigned char smem_raw[];
    Stage* stages = reinterpret_cast<Stage*>(smem_raw);
    __shared__ int64_t rslot[kSlots], lslot;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wx = warp % kWarpsX, wy = warp / kWarpsX;

    // The output's rows and columns, and its last shifts (past them a tile computes nothing).
    const int out_h = kWindow ? int(W.shifts.out_h()) : hL + hR - 1;
    const int out_w = kWindow ? int(W.shifts.out_w()) : wL + wR - 1;
    const int dylast = kWindow ? min(W.shifts.dy1, hL - 1) : hL - 1;
    const int dxlast = kWindow ? min(W.shifts.dx1, wL - 1) : wL - 1;
    const int64_t lsize = int64_t(hL) * wL, rsize = int64_t(hR) * wR;
    // A window's block w is slice w % ksplit of item w / ksplit (GroupTiled); the full output's, item w.
    for (int64_t w = blockIdx.x; w < int64_t(W.ntiles) * W.ngroups * (kWindow ? W.ksplit : 1); w += gridDim.x) {
        int64_t z;
        const int slice = kWindow ? int(w % W.ksplit) : 0;
        const ShiftTile tile =
            kWindow ? window_work_item(W, w / W.ksplit, kTDY, kTDX, z) : work_item(W, w, kTDY, kTDX, hR, wR, z);
        const int y0 = tile.y0, x0 = tile.x0, dyb = tile.dyb, dxb = tile.dxb;

        // Row group j holds shift rows dyb + 8j .. + 7; its MMA row q is dy = D_j - q with
        // D_j = dyb + 8j + 7, and its L row at step r is r + D_j. Steps r: from 7 before the union
        // of the block's overlaps (row q = 7 reaches its first R row) to its end. The union is that
        // of the tile's shifts up to the output's last; a window's tile may have none (no chunk:
        // its outputs are written as 0), in the full output every tile has some.
        const Span rB = union_span(dyb, min(dyb + kTDY - 1, dylast), hL, hR);
        const Span cB = union_span(dxb, min(dxb + kTDX - 1, dxlast), wL, wR);
        const int rbegin = rB.begin - (kQ - 1);
        const int ncc = ceil_div(cB.end - cB.begin, kKC);
        const bool overlaps = kWindow ? rB.end > rB.begin && cB.end > cB.begin : rB.end > rB.begin;
        const int nchunks = overlaps ? ceil_div(rB.end - rbegin, kKR) * ncc : 0;
        // This block's chunks kb .. ke - 1 (its slice; all of them without a split).
        const int per = kWindow ? ceil_div(nchunks, W.ksplit) : nchunks;
        const int kb = kWindow ? min(nchunks, slice * per) : 0, ke = kWindow ? min(nchunks, kb + per) : nchunks;
        const bool adds = kWindow && W.ksplit > 1;  // partial sums into the zeroed output

        const auto [i0, j0] = fill_slots(P, z, lsize, rsize, rslot, lslot);

        // Global -> registers, zero outside the matrices and for absent rights. Left: warp w
        // fetches window rows w + 4i (row 0: L row r0 + D_0), columns lane and lane + 32 (the right
        // neighbours come by shuffle in commit). B: thread tid fetches quads tid + 128 i: right
        // tid % 8, half (tid / 8) % 2, k step (tid / 16) % 4, R row r0 + tid / 64 + 2i.
        const int qb = tid & 7, qh = (tid >> 3) & 1, qs = (tid >> 4) & 3, qr = tid >> 6;
        auto fetch = [&](int n, Raw& raw) {
            const int k = kb + n;
            const int r0 = rbegin + (k / ncc) * kKR, c0 = cB.begin + (k % ncc) * kKC;
#pragma unroll
            for (int i = 0; i < kLIters; ++i) {
                const int r = r0 + dyb + kQ - 1 + warp + 4 * i;
                const bool rin = r >= 0 && r < hL;
                const float* row = left + lslot + (rin ? int64_t(r) * wL : 0);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int c = c0 + dxb + lane + 32 * h;
                    raw.l[i][h] = rin && c >= 0 && c < wL ? __ldg(row + c) : 0.0f;
                }
            }
            const int64_t base = rslot[qb];
#pragma unroll
            for (int i = 0; i < kBIters; ++i) {
                const int r = r0 + qr + 2 * i;
                const bool ok = base >= 0 && r >= 0 && r < hR;
                const float* row = right + (ok ? base + int64_t(r) * wR : 0);
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) {
                    const int c = c0 + 8 * qs + qh + 2 * kk;  // >= 0: the union starts inside R
                    raw.b[i][kk] = ok && c < wR ? __ldg(row + c) : 0.0f;
                }
            }
        };
        // Registers -> shared, split into big and small, then made visible to the tensor cores.
        auto commit = [&](const Raw& raw, Stage& st) {
#pragma unroll
            for (int i = 0; i < kLIters; ++i) store_split_pairs(raw.l[i], st.l[warp + 4 * i]);  // x <= 61 read
#pragma unroll
            for (int i = 0; i < kBIters; ++i) {
                uint32_t big[4], small[4];
#pragma unroll
                for (int kk = 0; kk < 4; ++kk) split(raw.b[i][kk], big[kk], small[kk]);
                st.bb[tid + kThreads * i] = make_uint4(big[0], big[1], big[2], big[3]);
                st.bs[tid + kThreads * i] = make_uint4(small[0], small[1], small[2], small[3]);
            }
            fence_proxy_async_smem();
        };

        float acc[32], part[32];
#pragma unroll
        for (int v = 0; v < 32; ++v) acc[v] = part[v] = 0.0f;

        register_pipelined_chunks<Raw>(ke - kb, stages, fetch, commit, [&](int n, Stage& st) {
            const int k = kb + n;
            const int r0 = rbegin + (k / ncc) * kKR, c0 = cB.begin + (k % ncc) * kKC;
            const int re = min(kKR, rB.end - r0), ke = min(kKS, ceil_div(cB.end - c0, 8));
#pragma unroll 1
            for (int rr = 0; rr < re; ++rr) {
                const uint4* lrow = &st.l[rr + kQ * wy][2 * t + g + 16 * wx];
#pragma unroll
                for (int s = 0; s < kKS; ++s) {
                    if (s >= ke) break;  // block-uniform
                    // The A registers of step s are rewritten here, row after row: the wgmmas of
                    // step s of the previous row must have read them (PTX: a wgmma's A registers
                    // may not be written before a wait on its group). ke - 1 groups were committed
                    // after that one. Without this wait the full output passed only by timing (a
                    // warp running ahead under compute-sanitizer gave 1e-5 errors).
                    wait_groups_below(ke);
                    const uint4 p = lrow[8 * s], q = lrow[8 * s + 8];
                    const uint32_t abig[4] = {p.x, q.x, p.y, q.y}, asmall[4] = {p.z, q.z, p.w, q.w};
                    const int off = (rr * kKS + s) * 2 * 8;
                    const uint64_t db = smem_desc(&st.bb[off], kLBO, kSBO), ds = smem_desc(&st.bs[off], kLBO, kSBO);
                    wgmma_fence();
                    wgmma_m64n64k8_tf32(part, abig, db);    // big * big
                    wgmma_m64n64k8_tf32(part, abig, ds);    // big * small
                    wgmma_m64n64k8_tf32(part, asmall, db);  // small * big
                    wgmma_commit();
                }
            }
            wgmma_wait<0>();
            flush_partial(acc, part);
        });

        // Accumulator 4q + v: R row q, right slot 2t + (v & 1), A row g + 8 (v >> 1) of the warp,
        // i.e. shift row D_wy - q and shift column dxb + 16 wx + g + 8 (v >> 1): output row y0 + 8 wy
        // + 7 - q and column x0 + 16 wx + g + 8 (v >> 1). A shift without overlap sums products of
        // zeros only (fetch reads 0 outside the matrices), so it is written as 0.
        // A slice adds its partial sums (an empty one adds nothing).
        if (!adds || ke > kb) {
#pragma unroll
            for (int q = 0; q < kQ; ++q)
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    const int j = j0 + 2 * t + (v & 1);
                    const int y = y0 + kQ * wy + kQ - 1 - q;
                    const int x = x0 + 16 * wx + g + 8 * (v >> 1);
                    if (j < P.M && y < out_h && x < out_w) {
                        float* o = out + P.output(i0, j) * out_h * out_w + int64_t(y) * out_w + x;
                        if (adds)
                            atomicAdd(o, acc[4 * q + v]);
                        else
                            *o = acc[4 * q + v];
                    }
                }
        }
        __syncthreads();  // the slot table is refilled for the next work item
    }
#else
    __trap();  // never launched: the factory requires compute capability 9.0 and sm_90a code
#endif
}

// K slices per work item of a window (GroupTiled's ksplit). A small window of large matrices has
// few tiles (max-shift 16: 3 x 2 per pair group), each with a long K loop: fewer blocks than one
// wave (2 per SM) leave SMs idle. Then each item's K loop is cut into ks slices, ks minimising the
// modelled time waves(ks) x (1 / ks + kSliceOverhead / chunks) in units of an item's time (waves:
// ceil(items x ks / wave); the overhead per block, its first chunk's load and its atomic adds, is
// counted as kSliceOverhead chunks of the heaviest tile's), and at most chunks / kMinSliceChunks.
// The full output, and a window with a wave of items, are not split.
constexpr int kMinSliceChunks = 8;
constexpr double kSliceOverhead = 2.0;
int k_slices(const Problem& p) {
    if (p.full()) return 1;
    int dev = 0, sms = 0;
    XC_CUDA_CHECK(cudaGetDevice(&dev));
    XC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const Pairs P = pairs_of(p, 1, kSlots);
    const int64_t wave = 2 * int64_t(sms);
    const int64_t items =
        int64_t(ceil_div(p.out_h(), kTDY)) * ceil_div(p.out_w(), kTDX) * int64_t(P.groupsI) * P.groupsJ;
    if (items >= wave) return 1;
    // A tile's union of overlaps has at most min(hR, hL + kTDY - 1) R rows (walked from kQ - 1
    // rows before it) and min(wR, wL + kTDX - 1) columns.
    const int64_t chunks = int64_t(ceil_div(std::min(p.hR, p.hL + kTDY - 1) + kQ - 1, kKR)) *
                           ceil_div(std::min(p.wR, p.wL + kTDX - 1), kKC);
    const int64_t most = std::max<int64_t>(1, chunks / kMinSliceChunks);
    int best = 1;
    double best_time = 0;
    for (int64_t ks = 1; ks <= most; ++ks) {
        const double waves = double(ceil_div64(items * ks, wave));
        const double time = waves * (1.0 / double(ks) + kSliceOverhead / double(chunks));
        if (ks == 1 || time < best_time) best = int(ks), best_time = time;
    }
    return best;
}

// The slices of p: k_slices' choice for a window; the full output is never split.
int slices_of(const Problem& p) { return p.full() ? 1 : k_slices(p); }

static_assert(kTDY == 16 && kTDX == 32, "the registration's work_tile is the block tile");

XCORR_REGISTER_VARIANT(Variant{
    .name = "tensor-wgmma",
    .family = "hopper",
    .summary = "Toeplitz GEMM on Hopper's warpgroup MMA (wgmma m64n64k8), 3xTF32 (FP32-class accuracy): A = "
               "the Toeplitz of an L row from registers, B = 8 R rows x 8 rights from shared memory (sm_90a)",
    .timed = "kernel (a window cut into K slices: zero output + kernel)",
    .precision = "3xtf32",
    .tolerance = 1e-5,
    .forms = {Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {},
    .make = [](const Problem& p, const Params&) -> std::unique_ptr<Instance> {
        require_wgmma("tensor-wgmma");
        // The full output keeps its own instantiation (its code is the one measured before windows).
        return std::make_unique<GroupTiled>(p, p.full() ? tensor_wgmma_kernel<false> : tensor_wgmma_kernel<true>,
                                            kThreads, kSmem, kTDY, kTDX, kSlots, slices_of(p));
    },
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    .work_tile = {16, 32},  // the block tile, kTDY x kTDX (static_assert above)
    .arch_cc = 90,  // wgmma: sm_90a only
});

}  // namespace
}  // namespace xcorr::tensor_wgmma
