// register-tiled: beyond the paper on Hopper. Shift tiles held in registers, as in a
// register-tiled SGEMM, so that FMAs and not warp shuffles bound the inner loop.
//
// Algebra. A thread owns TY x TX output shifts: rows dy0 + i (i < TY) and columns dx0 + j
// (j < TX). Writing s = r + i for the right-matrix row r, its accumulators are
//     acc[i][j] = sum_{s,c} L[s + dy0][c + dx0 + j] * R[s - i][c],
// so for one (s, c) the update is an outer product of the column vector R[s-i][c] (i < TY, the
// same for every thread: a shared-memory broadcast) and the row vector L[s+dy0][c+dx0+j] (j < TX).
// One loop iteration covers a 4 x 4 block of (s, c): 4 x (TX+4)/4 float4 loads of L (the 4
// column steps slide along one 12-wide window), TY+3 float4 broadcast loads of R (the 4 row
// steps slide down one (TY+3)-row window), and 16 * TY * TX FMAs (1024 for 8 x 8), all with
// compile-time register indices. Zero padding of the staged inputs removes every condition
// from that loop; a sum over any set of (s, c) that covers the non-zero terms is exact.
//
// Work mapping. A warp is 4 x 8 lanes (x by y), a block WX x WY warps, so a block owns a
// BY x BX tile of shifts of one output matrix. The (s, c) plane a tile needs is the product of
// two ranges (the union of its shifts' overlaps), and each warp further clips its own loops to
// the union of its own 8*TY x 4*TX shifts: the zero regions of the full output are skipped at
// warp granularity. Work items (tile, s range, c range) are planned on the host in the
// constructor from the problem size, the SM count and the occupancy: the tiles' (s, c) ranges are
// split (split-K) into the smallest pieces whose count still fits `waves` rounds of resident
// blocks (a bisection on the piece size over the realised piece counts), and the items are
// ordered heaviest first. A split tile's pieces write their partial tiles to a workspace and
// reduce_kernel, launched right after as a programmatic dependent launch, adds them up in a fixed
// order: no memset, no atomics, and the same bits on every run. grid.x walks the items, grid.y
// the output matrices of the stack (PairMap, any form), strided beyond 65535. A block walks its
// item in chunks of KS x KC (s, c), staging the L rows/columns the chunk needs (halo included)
// and the R rows s-TY+1 .. s+KS-1 in shared memory, zero outside the matrices.
//
// Windows (CONVENTIONS.md, "Output windows"). The tiles cover the window's out_h x out_w shifts,
// tile (ty, tx) starting at shift (dy0 + ty * BY, dx0 + tx * BX); the full output is the window
// whose origin is (-(hR - 1), -(wR - 1)). Tile and warp unions are taken over the thread origins
// and columns up to the window's last shift, and a warp with no shift of the window skips its
// loops. Invariants that make every element of the window come out right: (a) every shift
// without overlap sums only staged zeros, so an element beyond the full range is 0 whatever
// (s, c) its warp visits; (b) every tile is at least one item, also when its union is empty, and
// every item writes its whole tile (the output part clipped to the window, or the whole partial
// tile for the reduction), so every element is written once per run. The full window runs its
// own kernel instantiation (WINDOW = false), the code and the plan as before windows existed.
//
// Measurements and history: notes/20_register_tiled.md.
//
// Staging uses 4-byte cp.async with zero fill, every copy of a chunk in flight at once.
//
// Resource budget (no spills, no stack frame; the windowed instantiations within the same bounds):
//   rows=4 (4 x 8 per thread, 4 warps, KS=32): at most 128 registers (__launch_bounds__(128, 4)),
//          41280 B static shared memory -> 4 blocks = 16 warps per SM (register limited).
//   rows=8 (8 x 8 per thread, 2 warps, KS=24): at most 168 registers (__launch_bounds__(64, 6)),
//          35968 B static shared memory -> 6 blocks = 12 warps per SM.
//   reduce_kernel (256 threads): 4096 B static shared memory.
// What bounds it. Per 16 * TY * TX FMAs a thread issues 4 * (TX+4)/4 = 12 LDS.128 of L and TY+3
// broadcast LDS.128 of R (a few percent of the issue slots). The L loads are conflict-free: for TY = 4 the
// row pitch is 4 mod 8 words, for TY = 8 the float4 slots are swizzled (ls_index). That is
// 4 * 12 + TY + 3 shared-memory wavefronts per 16 * TY * TX FFMA cycles of one SMSP, 59 of a
// budget of 256 (rows=8) or 55 of 128 (rows=4): shared-memory bandwidth is not the limit. What
// remains beside the FFMA pipe: the zero work inside each warp's union (large for small
// problems, shrinking as they grow; rows=8 pays more of it than rows=4), the staging between the
// two __syncthreads of each chunk (hidden only by other resident blocks), the piece-size round-off
// of the last round, and for split tiles the reduction kernel. A window pays for whole
// 64 x 64 tiles: a window narrower than a tile (or a few shifts past a multiple of 64) computes
// every shift of the tiles it touches, less only the warps that hold none of its shifts.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/pdl.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/dispatch.hpp"
#include "common/launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::register_tiled {
namespace {

// One block's work: tile (ty, tx) of the output, s in [s0, s1), c in [c0, c1) (all multiples of
// 4 except where a range is empty). `part` >= 0 when other items share the tile: the block then
// writes its whole BY x BX partial sum to partial slot `part` (of every output matrix) instead of
// the output, and reduce_kernel adds the slots up.
struct WorkItem {
    int ty, tx, s0, s1, c0, c1, part, pad;
};

// A tile split into pieces: its partial slots are [part0, part0 + n).
struct SplitTile {
    int ty, tx, part0, n;
};

template <int TY_, int TX_, int WX_, int WY_>
struct Cfg {
    static constexpr int TY = TY_, TX = TX_, WX = WX_, WY = WY_;
    static constexpr int LX = 4, LY = 8;  // lanes of a warp along x and y
    static constexpr int WARPS = WX * WY, THREADS = kWarp * WARPS;
    static constexpr int BX = WX * LX * TX, BY = WY * LY * TY;  // block tile of shifts
    static constexpr int KS = TY == 8 ? 24 : 32, KC = 32;      // chunk of (s, c) staged at once
    // Resident blocks per SM asked of ptxas: 12-16 warps per SM, registers <= 170 / 128.
    static constexpr int MINB = THREADS == 64 ? 6 : 4;
    static constexpr int NLR = KS + BY - TY;                    // staged L rows
    static constexpr int NLC = KC + BX;                         // staged L columns
    static constexpr int PL = NLC % 8 == 4 ? NLC : NLC + 4;     // pitch = 4 mod 8 words
    static constexpr int NRR = KS + TY - 1, PR = KC;            // staged R rows, pitch
    static constexpr bool SWIZZLE = TY % 8 == 0;
    static_assert(TX % 4 == 0 && NLC % 8 == 0 && PL % 4 == 0, "aligned float4 slots, in pairs");
};

template <int D>
__device__ __forceinline__ float comp(const float4& v) {
    if constexpr (D == 0) return v.x;
    else if constexpr (D == 1) return v.y;
    else if constexpr (D == 2) return v.z;
    else return v.w;
}

__host__ __device__ constexpr int floor4(int v) { return v >= 0 ? v & ~3 : -((-v + 3) & ~3); }
__host__ __device__ constexpr int ceil4(int v) { return -floor4(-v); }

// Union over a run of thread origins dy0 in [dyA, dyB] (rows i < TY each) of the s with a
// non-zero term: L row s + dy0 in [0, hL) and R row s - i in [0, hR). Rounded out to 4.
__host__ __device__ inline Span s_union(int dyA, int dyB, int TY, int hL, int hR) {
    int lo = floor4(max(0, -dyB)), hi = ceil4(min(hR + TY - 1, hL - dyA));
    return Span{lo, hi > lo ? hi : lo};
}
// The same for columns: shifts dx in [dxA, dxB], c in [0, wR) with c + dx in [0, wL).
__host__ __device__ inline Span c_union(int dxA, int dxB, int wL, int wR) {
    int lo = floor4(max(0, -dxB)), hi = ceil4(min(wR, wL - dxA));
    return Span{lo, hi > lo ? hi : lo};
}

// Where staged L element (row r, column q) lives. For TY = 8 every thread origin is a multiple of
// 8 words, so the float4 slots of rows with bit 3 set are swapped in pairs (XOR 1): the two
// lane rows of a quarter warp then hit different bank quads (conflict-free LDS.128).
template <class C>
__device__ __forceinline__ int ls_index(int r, int q) {
    if constexpr (C::SWIZZLE) return r * C::PL + ((((q >> 2) ^ ((r >> 3) & 1)) << 2) | (q & 3));
    else return r * C::PL + q;
}

// One 4 x 4 block of (s, c) steps: Lrow points at the staged L row of (s, thread origin), q0 is
// the float4 slot of column c of the thread's window, x the row's swizzle; Rp points at the R row
// s - TY + 1, column c.
template <class C>
__device__ __forceinline__ void step4x4(const float* __restrict__ Lrow, int q0, int x,
                                        const float* __restrict__ Rp, float (&acc)[C::TY][C::TX]) {
    constexpr int TY = C::TY, TX = C::TX;
    float4 rv[TY + 3];
#pragma unroll
    for (int q = 0; q < TY + 3; ++q) rv[q] = *reinterpret_cast<const float4*>(Rp + q * C::PR);
#pragma unroll
    for (int ds = 0; ds < 4; ++ds) {
        float a[TX + 4];
#pragma unroll
        for (int m = 0; m < (TX + 4) / 4; ++m) {
            const int slot = C::SWIZZLE ? (q0 + m) ^ x : q0 + m;
            const float4 v = *reinterpret_cast<const float4*>(Lrow + ds * C::PL + 4 * slot);
            a[4 * m + 0] = v.x;
            a[4 * m + 1] = v.y;
            a[4 * m + 2] = v.z;
            a[4 * m + 3] = v.w;
        }
        auto col = [&](auto dcv) {
            constexpr int dc = decltype(dcv)::value;
#pragma unroll
            for (int i = 0; i < TY; ++i) {
                // R[s + ds - i][c + dc] sits in window row ds - i + TY - 1.
                const float b = comp<dc>(rv[ds - i + TY - 1]);
#pragma unroll
                for (int j = 0; j < TX; ++j) acc[i][j] = fmaf(b, a[dc + j], acc[i][j]);
            }
        };
        col(std::integral_constant<int, 0>{});
        col(std::integral_constant<int, 1>{});
        col(std::integral_constant<int, 2>{});
        col(std::integral_constant<int, 3>{});
    }
}

// WINDOW: the output is the window `win` (any rectangle of shifts). Without it the output is the
// full one, whose origin and size come from the matrix sizes and `win` is not read: that
// instantiation is the kernel as it was before windows existed, instruction for instruction.
template <class C, bool WINDOW>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
    register_tiled_kernel(const float* __restrict__ left, const float* __restrict__ right,
                          float* __restrict__ out, int hL, int wL, int hR, int wR, int64_t count,
                          PairMap pairs, const WorkItem* __restrict__ items, float* __restrict__ partials,
                          int n_parts, Window win) {
    constexpr int TY = C::TY, TX = C::TX, BY = C::BY, BX = C::BX;
    __shared__ __align__(16) float Ls[C::NLR * C::PL];
    __shared__ __align__(16) float Rs[C::NRR * C::PR];

    // Programmatic dependent launch: reduce_kernel (launch_dependent, when split) may be
    // scheduled now; it waits in pdl_wait() until this grid has finished.
    pdl_launch_dependents();
    const WorkItem it = items[blockIdx.x];
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int wx = warp % C::WX, wy = warp / C::WX;
    const int oy = (wy * C::LY + lane / C::LX) * TY;  // thread origin inside the block tile
    const int ox = (wx * C::LX + lane % C::LX) * TX;
    int DY, DX, out_h, out_w;  // block's first shift; output size
    if constexpr (WINDOW) {
        DY = it.ty * BY + win.dy0, DX = it.tx * BX + win.dx0;
        out_h = int(win.out_h()), out_w = int(win.out_w());
    } else {
        DY = it.ty * BY - (hR - 1), DX = it.tx * BX - (wR - 1);
        out_h = hL + hR - 1, out_w = wL + wR - 1;
    }

    // This warp's own (s, c) ranges; warp-uniform, so clipping costs no divergence.
    const int wdy = DY + wy * C::LY * TY, wdx = DX + wx * C::LX * TX;
    int wdyB = wdy + (C::LY - 1) * TY, wdxB = wdx + C::LX * TX - 1;  // last thread origin, column
    if constexpr (WINDOW) {
        // Thread origins and columns past the window's last shift are never written: leave them out
        // of the union (its clipping is conservative for any bound above the origins kept), and
        // skip a warp that holds no shift of the window at all (it writes its zeros or nothing).
        wdyB = min(wdyB, win.dy1), wdxB = min(wdxB, win.dx1);
    }
    Span ws = s_union(wdy, wdyB, TY, hL, hR);
    const Span wc = c_union(wdx, wdxB, wL, wR);
    if constexpr (WINDOW)
        if (wdy > win.dy1 || wdx > win.dx1) ws.end = ws.begin;

    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        const float* L = left + int64_t(pairs.left_of(k)) * hL * wL;
        const float* R = right + int64_t(pairs.right_of(k)) * hR * wR;
        float acc[TY][TX];
#pragma unroll
        for (int i = 0; i < TY; ++i)
#pragma unroll
            for (int j = 0; j < TX; ++j) acc[i][j] = 0.0f;

        for (int s1 = it.s0; s1 < it.s1; s1 += C::KS) {
            const int s2 = min(s1 + C::KS, it.s1);
            for (int c1 = it.c0; c1 < it.c1; c1 += C::KC) {
                const int c2 = min(c1 + C::KC, it.c1);
                __syncthreads();  // the previous chunk's readers are done
                // Stage L[s1 + DY + r][c1 + DX + q] and R[s1 - TY + 1 + r][c1 + q], zero outside the
                // matrices: whole compile-time chunks, every copy in flight at once (cp.async).
                const int lr0 = s1 + DY, lc0 = c1 + DX, rr0 = s1 - TY + 1;
#pragma unroll 4
                for (int idx = threadIdx.x; idx < C::NLR * C::NLC; idx += C::THREADS) {
                    const int r = idx / C::NLC, q = idx % C::NLC, gr = lr0 + r, gc = lc0 + q;
                    const bool in = unsigned(gr) < unsigned(hL) && unsigned(gc) < unsigned(wL);
                    cp_async4(Ls + ls_index<C>(r, q), in ? L + int64_t(gr) * wL + gc : L, in);
                }
#pragma unroll 2
                for (int idx = threadIdx.x; idx < C::NRR * C::KC; idx += C::THREADS) {
                    const int r = idx / C::KC, q = idx % C::KC, gr = rr0 + r, gc = c1 + q;
                    const bool in = unsigned(gr) < unsigned(hR) && gc < wR;
                    cp_async4(Rs + r * C::PR + q, in ? R + int64_t(gr) * wR + gc : R, in);
                }
                cp_async_wait_all();
                __syncthreads();

                const int sa = max(s1, ws.begin), sb = min(s2, ws.end);
                const int ca = max(c1, wc.begin), cb = min(c2, wc.end);
                for (int s = sa; s < sb; s += 4) {
                    const int lrow = s - s1 + oy;  // a multiple of 4: rows lrow .. lrow+3 share bit 3
                    const float* Lrow = Ls + lrow * C::PL;
                    const float* Rrow = Rs + (s - s1) * C::PR;
                    const int x = (lrow >> 3) & 1;
                    for (int c = ca; c < cb; c += 4)
                        step4x4<C>(Lrow, (c - c1 + ox) >> 2, x, Rrow + (c - c1), acc);
                }
            }
        }

        if (it.part >= 0) {
            // The whole tile, unconditionally (reduce_kernel clips): two float4 per row of 8.
            float* Pt = partials + (k * n_parts + it.part) * (BY * BX);
#pragma unroll
            for (int i = 0; i < TY; ++i)
#pragma unroll
                for (int j = 0; j < TX; j += 4)
                    *reinterpret_cast<float4*>(Pt + (oy + i) * BX + ox + j) =
                        make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            continue;
        }
        float* O = out + k * out_h * out_w;
        const int y0 = it.ty * BY + oy, x0 = it.tx * BX + ox;
#pragma unroll
        for (int i = 0; i < TY; ++i) {
            if (y0 + i >= out_h) break;
            float* Orow = O + int64_t(y0 + i) * out_w;
#pragma unroll
            for (int j = 0; j < TX; ++j)
                if (x0 + j < out_w) Orow[x0 + j] = acc[i][j];
        }
    }
}

// reduce_kernel: the output of every split tile as the sum of its pieces' partial tiles, in a fixed
// order (so the result does not depend on the order in which blocks ran: no atomics, no memset of
// the output). A block takes 32 float4 of one split tile (blockIdx.x walks tile x 32nd of the
// tile) and its 8 warps take every 8th piece (pieces g, g+8, ...; 4 loads in flight per
// thread, since a tile can have 100+ pieces and a serial chain of L2 loads per thread took
// longer than the main kernel's tail), then add the 8 group sums through shared memory.
// blockIdx.y strides over the output matrices. Launched as a programmatic dependent launch
// (sm_90): its launch and block scheduling overlap the main kernel's tail, and
// griddepcontrol.wait holds it until the main kernel's partials are written.
constexpr int kReduceThreads = 256, kReduceGroups = 8, kReduceVec = kReduceThreads / kReduceGroups;

template <int BY, int BX>
__global__ void __launch_bounds__(kReduceThreads) reduce_kernel(const float* __restrict__ partials, int n_parts,
                                                                const SplitTile* __restrict__ tiles,
                                                                float* __restrict__ out, int out_h, int out_w,
                                                                int64_t count) {
    constexpr int V = BY * BX / 4, kBlocksPerTile = V / kReduceVec;  // float4 per tile
    static_assert(V % kReduceVec == 0, "whole float4 groups per block");
    __shared__ float4 group_sum[kReduceGroups][kReduceVec];
    const SplitTile t = tiles[blockIdx.x / kBlocksPerTile];
    const int g = threadIdx.x / kReduceVec, v = threadIdx.x % kReduceVec;
    const int e = (blockIdx.x % kBlocksPerTile) * kReduceVec + v;  // float4 index in the tile
    const int y = t.ty * BY + e / (BX / 4), x = t.tx * BX + 4 * (e % (BX / 4));
    pdl_wait();  // the partials of the main kernel are complete
    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        const float4* P = reinterpret_cast<const float4*>(partials + (k * n_parts + t.part0) * (BY * BX)) + e;
        float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
        for (int q = g; q < t.n; q += kReduceGroups) {
            const float4 w = __ldg(P + int64_t(q) * V);
            sum.x += w.x;
            sum.y += w.y;
            sum.z += w.z;
            sum.w += w.w;
        }
        group_sum[g][v] = sum;
        __syncthreads();
        if (g == 0 && y < out_h) {
            float4 a = group_sum[0][v];
#pragma unroll
            for (int h = 1; h < kReduceGroups; ++h) {
                const float4 b = group_sum[h][v];
                a.x += b.x;
                a.y += b.y;
                a.z += b.z;
                a.w += b.w;
            }
            float* O = out + k * out_h * out_w + int64_t(y) * out_w;
            const float vals[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (x + j < out_w) O[x + j] = vals[j];
        }
        __syncthreads();  // group_sum is reused by the next matrix
    }
}

// Splits [lo, hi) into n pieces at multiples of 4 (lo, hi multiples of 4).
std::vector<int> cut(int lo, int hi, int n) {
    std::vector<int> b;
    const int quads = (hi - lo) / 4;
    n = std::max(1, std::min(n, std::max(quads, 1)));
    for (int k = 0; k <= n; ++k) b.push_back(lo + 4 * int(int64_t(quads) * k / n));
    return b;
}

template <class C>
class RegisterTiled final : public Instance {
public:
    RegisterTiled(const Problem& p, int waves) : p_(p), win_(p.shifts()), windowed_(!p.full()) {
        // Tiles cover the window from its first shift; tile (ty, tx) starts at shift
        // (dy0 + ty * BY, dx0 + tx * BX). A windowed tile's union leaves out the thread origins and
        // columns past the window's last shift (as the kernel's warps do); a tile whose union is
        // empty (no shift with an overlap) is still one item, whose block writes its zeros. The full
        // window keeps exactly the plan it always had.
        const int ny = ceil_div(p.out_h(), C::BY), nx = ceil_div(p.out_w(), C::BX);
        struct Tile {
            int ty, tx;
            Span s, c;
            double work;
        };
        std::vector<Tile> tiles;
        for (int ty = 0; ty < ny; ++ty)
            for (int tx = 0; tx < nx; ++tx) {
                const int DY = ty * C::BY + win_.dy0, DX = tx * C::BX + win_.dx0;
                int dyB = DY + C::BY - C::TY, dxB = DX + C::BX - 1;
                if (windowed_) dyB = std::min(dyB, win_.dy1), dxB = std::min(dxB, win_.dx1);
                Tile t{ty, tx, s_union(DY, dyB, C::TY, p.hL, p.hR), c_union(DX, dxB, p.wL, p.wR), 0};
                t.work = double(t.s.end - t.s.begin) * (t.c.end - t.c.begin);
                tiles.push_back(t);
            }

        // Blocks wanted: `waves` full waves of resident blocks, shared by the output matrices.
        int dev = 0, sms = 0, per_sm = 0;
        XC_CUDA_CHECK(cudaGetDevice(&dev));
        XC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        XC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &per_sm, windowed_ ? register_tiled_kernel<C, true> : register_tiled_kernel<C, false>, C::THREADS, 0));
        // Items per output matrix: `waves` rounds of resident blocks, shared by the output matrices,
        // but at least one per tile.
        const double wanted = double(waves) * sms * std::max(per_sm, 1);
        const int64_t budget = std::max<int64_t>(int64_t(tiles.size()), int64_t(wanted / double(p.out_count())));

        // Pieces of a tile whose (s, c) area is at most about x: split s first into pieces of at least
        // one chunk, then c, then s down to 4 rows; never more than ceil(work / x) pieces.
        const auto split_of = [](const Tile& t, double x) {
            const int n = std::max(1, int(std::ceil(t.work / x)));
            const int s_len = t.s.end - t.s.begin, c_len = t.c.end - t.c.begin;
            int ns = std::min(n, std::max(1, s_len / C::KS));
            const int nc = std::min(std::max(1, n / ns), std::max(1, c_len / C::KC));
            if (ns * nc < n) ns = std::max(ns, std::min(std::max(1, n / nc), std::max(1, s_len / 4)));
            return std::make_pair(cut(t.s.begin, t.s.end, ns), cut(t.c.begin, t.c.end, nc));
        };
        const auto count_at = [&](double x) {
            int64_t n = 0;
            for (const Tile& t : tiles) {
                const auto [sb, cb] = split_of(t, x);
                n += int64_t(sb.size() - 1) * int64_t(cb.size() - 1);
            }
            return n;
        };
        // The smallest piece size whose realised item count fits the budget (bisection; the count
        // falls as x grows, and x = the largest tile's work gives one item per tile). The items then
        // fill at most `waves` rounds, and the largest piece, not the round-off of a piece count,
        // sets the kernel's length: 548 items for 528 block slots made 1-to-1 at 128 take two rounds.
        double hi = 1.0;
        for (const Tile& t : tiles) hi = std::max(hi, t.work);
        if (waves > 0 && budget > int64_t(tiles.size())) {
            double lo = hi / double(budget) / 4.0;
            for (int it = 0; it < 48; ++it) {
                const double mid = 0.5 * (lo + hi);
                (count_at(mid) <= budget ? hi : lo) = mid;
            }
        }

        std::vector<WorkItem> items;
        std::vector<SplitTile> split;
        for (const Tile& t : tiles) {
            const auto [sb, cb] = split_of(t, hi);
            const int pieces = int(sb.size() - 1) * int(cb.size() - 1);
            if (pieces > 1) split.push_back(SplitTile{t.ty, t.tx, n_parts_, pieces});
            for (size_t a = 0; a + 1 < sb.size(); ++a)
                for (size_t b = 0; b + 1 < cb.size(); ++b)
                    items.push_back(WorkItem{t.ty, t.tx, sb[a], sb[a + 1], cb[b], cb[b + 1],
                                             pieces > 1 ? n_parts_++ : -1, 0});
        }
        // Heaviest items first: blocks are dispatched in order, so the light ones fill the tail.
        std::stable_sort(items.begin(), items.end(), [](const WorkItem& a, const WorkItem& b) {
            return double(a.s1 - a.s0) * (a.c1 - a.c0) > double(b.s1 - b.s0) * (b.c1 - b.c0);
        });
        n_items_ = int(items.size());
        n_split_ = int(split.size());
        if (n_split_) {
            partials_ = DeviceBuffer<float>(size_t(n_parts_) * size_t(p.out_count()) * C::BY * C::BX);
            split_tiles_ = DeviceBuffer<SplitTile>(split.size());
            upload(split_tiles_, split.data(), split.size());
        }
        // Uploaded before the constructor returns (upload(), xcorr/device_buffer.hpp): run() launches
        // on the caller's stream, which need not wait for a cudaMemcpy's DMA. With a plain cudaMemcpy
        // the kernels could read a previous allocation's items and split tiles (partial slots left
        // unwritten or summed twice): the likely cause of the wrong windows seen beside another
        // process on the GPU, whose copies can hold this one's DMA back.
        items_ = DeviceBuffer<WorkItem>(items.size());
        upload(items_, items.data(), items.size());
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        const unsigned gy = unsigned(std::min<int64_t>(p_.out_count(), 65535));
        (windowed_ ? register_tiled_kernel<C, true> : register_tiled_kernel<C, false>)
            <<<dim3(unsigned(n_items_), gy), C::THREADS, 0, stream>>>(left, right, out, p_.hL, p_.wL, p_.hR,
                                                                       p_.wR, p_.out_count(), pair_map(p_),
                                                                       items_.get(), partials_.get(), n_parts_, win_);
        XC_CHECK_LAUNCH();
        if (n_split_) {
            constexpr int kBlocksPerTile = C::BY * C::BX / 4 / kReduceVec;
            launch_dependent(reduce_kernel<C::BY, C::BX>, dim3(unsigned(n_split_ * kBlocksPerTile), gy),
                             dim3(kReduceThreads), 0, stream, static_cast<const float*>(partials_.get()), n_parts_,
                             static_cast<const SplitTile*>(split_tiles_.get()), out, p_.out_h(), p_.out_w(),
                             p_.out_count());
        }
    }

private:
    Problem p_;
    Window win_;     // p_.shifts()
    bool windowed_;  // not the full window: the kernel instantiation that reads win_
    DeviceBuffer<WorkItem> items_;
    DeviceBuffer<SplitTile> split_tiles_;
    DeviceBuffer<float> partials_;  // n_parts x out_count partial tiles (split-K only)
    int n_items_ = 0, n_split_ = 0, n_parts_ = 0;
};

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Rows = Values<4, 8>;

std::unique_ptr<Instance> make_register_tiled(const Problem& p, const Params& ps) {
    const int rows = param_int(ps, "rows");
    // auto: more rounds (finer split-K, better balance, a larger reduction) pay only when the
    // problem is large (thresholds measured: notes/20_register_tiled.md).
    const double f = p.fmas();
    const int waves = ps.at("waves") == "auto" ? (f < 1e9 ? 1 : f < 3e9 ? 2 : 4) : param_int(ps, "waves");
    if (p.out_h() > (1 << 30) / std::max(p.out_w(), 1))
        throw UsageError("register-tiled: output matrix too large for 32-bit tile indices");
    std::unique_ptr<Instance> inst;
    Rows::dispatch(rows, [&](auto r) {
        constexpr int TY = decltype(r)::value;
        // 64 x 64 shift tiles: 8 x 8 per thread in 2 warps, or 4 x 8 per thread in 4 warps.
        using C = Cfg<TY, 8, 2, 8 / TY>;
        inst = std::make_unique<RegisterTiled<C>>(p, waves);
    }, "rows");
    return inst;
}

XCORR_REGISTER_VARIANT(Variant{
    .name = "register-tiled",
    .family = "hopper",
    .summary = "register tiles of shifts (outer products over staged, zero-padded inputs), "
               "zero regions skipped per warp, split-K with a deterministic reduction for small problems",
    .timed = "kernel + split-K reduction kernel (only when split)",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Rows::param("rows", "shift rows per thread (8 columns each)"),
               {"waves", {"auto", "1", "2", "4", "0"},
                "split-K until about this many full waves of blocks (0: never split; "
                "auto: 1 below 1e9 FMAs, 2 below 3e9, else 4)"}},
    .make = make_register_tiled,
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    .work_tile = {32, 32},  // a warp's shifts (rows=4: 32 x 32; rows=8 holds 64 x 32)
});

}  // namespace
}  // namespace xcorr::register_tiled
