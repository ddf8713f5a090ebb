// fft-segmented: FFT cross-correlation of one-dimensional signals in segments, the lag window
// cropped per segment and the spectra of all segments of a pair accumulated before one inverse
// (issue #22: ambient-noise interferometry, every pair of 64 x 144000 samples within ±2400 lags).
// `fft` transforms each whole signal at a size >= n + the window and writes one full-length
// product and inverse per pair; here every transform has N points, N set by the window and a cost
// rule, not by the signal length.
//
// Algebra (CONVENTIONS.md, "One-dimensional signals"): C(d) = sum_t L[t + d] R[t], L of n samples,
// R of m, zero outside. Only lags d in [lo, hi] = [dx0, dx1] n [-(m-1), n-1] can be non-zero, and
// they read only R[r0, r0 + rn) with r0 = max(0, -hi), r0 + rn = min(m, n - lo) (as fft's AxisFit).
//  - Lag pieces: [lo, hi] is cut into NP pieces of Wp lags, piece p = lags lo + p Wp + [0, Wp)
//    (the last one may be shorter).
//  - Blocks: R[r0, r0 + rn) is cut into NB blocks of B samples, block b = R[r0 + bB, r0 + bB + B)
//    (the last one zero-filled past r0 + rn).
//  - Segments: for piece p and block b only S_pb[u] = L[r0 + bB + lo + p Wp + u], u in
//    [0, B + Wp - 1), meets block b (zero outside [0, n)). With B + Wp - 1 <= N, the circular
//    correlation of period N of S_pb with block b (zero-padded to N) holds lag lo + p Wp + k at
//    position k < Wp without wrap-around (u + k <= B - 1 + Wp - 1 < N). The segment's positions
//    from B + Wp - 1 to N - 1 are never read by those k, so the pad fills all N with L (no zeroing
//    needed); a block's positions from B on must be zero, and are.
//  - Linearity: C(lo + p Wp + k) = IFFT( sum_b FFT(S_pb) conj(FFT(R_b)) )[k] / N, one inverse per
//    (pair, piece), not per block. For a stack, per frequency f the accumulation is a small complex
//    matrix product over the blocks: P[i][j](f) = sum_b A[i][p][b](f) conj(Bm[right(i,j)][b](f)),
//    so every left segment spectrum and every right block spectrum is computed once.
//  - Geometry for a transform size N (for_each_geometry): B + Wp = N + 1, or one piece and one
//    block if rn + W - 1 <= N. The candidate splits: one piece (Wp = W, B = N + 1 - W) if W < N (ambient
//    noise: N = 8192, B = 3392, 43 blocks); one block (B = rn) if rn < N (seed 004: 256-sample
//    templates, 4.32e6 lags: classic overlap-save over the lag range); halves (Wp = N/2); the
//    cheapest by cost() wins. N <= 2^22 always suffices, so no window is refused for its width;
//    memory is bounded by processing the pieces in chunks (below).
//  - N (parameter n): auto takes the cheapest of the powers of two 2^8 .. 2^22 and of the single-
//    segment size (smallest even 7-smooth >= rn + W - 1, as fft's) by a bandwidth model in cost():
//    bytes = 16 N (left segments + right blocks) [pad write, R2C read + write, accumulation read]
//    + 12 N (pairs x pieces) [accumulation write, C2R read + write], transforms above 16384 points
//    counted twice (two passes), plus 4 FMA per complex multiply-add at 25e12 FMA/s, bytes at 3.5e12
//    B/s. Ambient case: N = 8192 (one piece, B = 3392, NB = 43) 0.44 ms, N = 16384 (B = 11584,
//    NB = 13) 0.42 ms by the model, 4096 (3 pieces, 71 blocks) 0.8 ms: auto picks 16384; n=8192 and
//    n=16384 measure both. Seed 004's case and matched filtering: auto takes 16384 with one block
//    (268 and 548 lag pieces). n=256 is for the validator: many pieces and blocks on its signals.
//
// Work per run (all timed, one stream; no finish step):
//   1. seg_pad_kernel: the NB blocks of every right into in-place real slots (N floats of 2E, E =
//      N/2 + 1 complex), then one batched in-place R2C (nR * NB transforms of N points).
//   Per chunk of npc pieces (one chunk unless memory is short):
//   2. seg_pad_kernel: the segments of every left for the chunk's pieces, slot (i npc + pc) NB + b,
//      then one batched in-place R2C;
//   3. accumulate_kernel: P[(k npc + pc)](f) for output k = PairGrid output (i, j), into in-place
//      product slots;
//   4. one batched in-place C2R over the out_count * npc product slots;
//   5. crop_kernel: output (k, y, x), lag d = dx0 + x, from position (d - lo) mod Wp of slot
//      (k npc + (d - lo) div Wp - p0), scaled 1/N; zero in rows dy != 0 and for lags outside
//      [lo, hi]. The first chunk's crop writes every element of the output (zeros outside its own
//      lags), later chunks overwrite their lags, so the poisoned output is entirely written.
//   A window without dy = 0 or without any overlapping lag is one cudaMemsetAsync.
//   Fused k = 1 peaks (run_peak1, what a reduced plan's peaks take where k = 1,
//   lib/reduce/reducer.cpp) replace step 5 with two passes that read the C2R results where the crop
//   would, so that no map is written: peak_tiles_kernel, a block per tile of kPeakTile lags of a
//   pair (its largest value, NaN skipped, ties to the smaller lag: lib/reduce/peak.cuh's order), and
//   peak_pick_kernel, a warp per pair, the best of its tiles and the contract's three-point fit from
//   the C2R results. Taken only where every element of the map is a lag of [lo, hi] in row dy = 0 (no
//   zero of the window can be a candidate) and the pieces are one chunk (the fit's neighbours are
//   all in the product slots when the tiles are read).
//   The pad and the crop copy bytes and nothing else: a thread takes kPerThread elements, kThreads
//   apart, and issues all their loads before its stores, so that enough loads are in flight to
//   reach the bandwidth (one a thread leaves each pass at the latency of a lone load).
//
// accumulate_kernel mapping: a warp owns 32 consecutive frequencies (lane = f) of a subtile of TL
// lefts x TR right slots of the PairGrid and one piece, TL x TR complex accumulators per thread,
// and walks b = 0 .. NB-1 in order (deterministic, no atomics): per b it loads TL left and TR right
// float2 (each a 256-byte coalesced row per warp) for TL * TR complex multiply-adds. (TL, TR) =
// (4, 8) when the right of pair (i, j) does not depend on i (rsi == 0: n-to-m) and there are at
// least 2 lefts (so that the validator's n-to-m stacks of 2 and 3 lefts run it, with partial
// subtiles), else (1, 8) (right(i0, j) is then exact). Warp work items are
// flattened subtile-fastest (the 8 warps of a block share a frequency range and mostly their right
// rows, in L1; blocks in flight share frequency ranges in L2), then frequency chunk, then piece.
// The loads go through shared memory: each warp copies its rows of block b + S - 1 (cp.async) while
// it multiplies block b's (accumulate_kernel's comment says why).
// Resources: no spills; the (4, 8) subtile's registers (<= 128) and its stages (96 KB a block at
// S = 4, 48 KB at S = 2) allow 2 blocks of 8 warps per SM (the counts: notes/52_fft_segmented.md).
//
// Invariants: every (pair, lag) of [lo, hi] sums every block b < NB exactly once, in b order;
// rows of a subtile past the last left or right are never written (their loads read the last
// row again); every output
// element is written by the first chunk's crop. Not shared with fft: its plan cache (plans here
// are owned per instance, created at factory time) and its 2-D create_plan (here a 1-D in-place
// plan, a few lines, kept local rather than moving fft's); the lengths are common/device.cuh's.
//
// Workspace (one allocation, in-place slots of 2E floats): nR NB right slots, nL npc NB left
// segment slots, out_count npc product slots (the C2R writes real results over them); npc is the
// number of pieces that fits in 45% of the free GPU memory (as fft), XCORR_FFT_MAX_CHUNK caps it
// (tests force chunks with it). cuFFT's work areas come on top (external_device_bytes()). Where the
// fused peaks are taken, 8 bytes more a pair and tile of kPeakTile lags (ambient noise: 96 KB).
// Ambient case, N = 16384 (E = 8193, 65.5 KB a slot): 64 * 13 right + 64 * 13 left + 4096 product
// slots, 378 MB; N = 8192: 64 * 43 * 2 + 4096 slots, 315 MB.
// Traffic estimate, ambient (N = 8192): pad 90 + 90 MB written (L read ~2.4x from L2: segments
// overlap), R2C 180 MB read and written, accumulation 180 MB read from DRAM (repeated reads among
// subtiles from L2: about 0.9 GB) and 134 MB written, C2R 134 + 134 MB, crop 79 MB read and
// written: about 1.3 GB of DRAM traffic (0.3-0.4 ms at 3.5-4.8 TB/s) and 7.2e8 complex
// multiply-adds (2.9e9 FMA, ~0.1 ms): expected 0.4-0.6 ms against 125 ms direct (2.8e12 FMA).
//
// Accuracy: float32 transforms of N points (error ~ eps log N of the correlation's norm) and sums
// of NB complex products per frequency; the tolerance (5e-6) is fft's (2e-6, measured below 3e-7)
// with room for the block sums.
#include <cufft.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/launch.cuh"
#include "lib/reduce/peak.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/cufft_plan.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::fft_segmented {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

// Slot s of a pad holds N floats of matrix s / per_matrix, read from offset
// base + pc * piece_step + b * block_step (rem = s % per_matrix, pc = rem / NB, b = rem % NB):
// element u < take with source index in [0, limit), else 0. Lefts: per_matrix = npc NB,
// take = N, limit = n. Rights: per_matrix = NB, piece_step = 0, take = B, limit = r0 + rn.
// The slot's two floats past N (its pitch is 2E = N + 2, for the in-place spectrum) are written 0
// too: cuFFT's in-place R2C kernels for small N load them (compute-sanitizer initcheck reports
// those loads as reads of uninitialized memory), though no spectrum depends on them.
struct SegPadArgs {
    const float* src;
    int64_t src_len;  // floats per matrix in the stack
    float* dst;
    int64_t slots;
    int per_matrix, NB;
    int64_t base, piece_step, block_step;
    int take;
    int64_t limit;
    int N;
    int64_t pitch;  // floats per slot: 2E
};

// blockIdx.y strides over the slots, x over the slot's N elements: coalesced writes and reads.
// A thread takes kPerThread elements kThreads apart, their loads issued before any store: with one
// 4-byte load a thread in flight the pass ran at ~1 TB/s (the latency of each load alone), four
// bring it to the bandwidth.
constexpr int kPerThread = 4;

__global__ void __launch_bounds__(kThreads) seg_pad_kernel(SegPadArgs a) {
    for (int64_t s = blockIdx.y; s < a.slots; s += gridDim.y) {
        const int64_t mtx = s / a.per_matrix;
        const int rem = int(s - mtx * a.per_matrix);
        const int pc = rem / a.NB, b = rem - pc * a.NB;
        const int64_t off = a.base + pc * a.piece_step + b * a.block_step;
        const float* src = a.src + mtx * a.src_len;
        float* dst = a.dst + s * a.pitch;
        for (int u0 = blockIdx.x * kThreads * kPerThread + threadIdx.x; u0 < int(a.pitch);
             u0 += gridDim.x * kThreads * kPerThread) {
            float v[kPerThread];
#pragma unroll
            for (int e = 0; e < kPerThread; ++e) {
                const int u = u0 + e * kThreads;
                const int64_t idx = off + u;
                v[e] = (u < a.take && idx >= 0 && idx < a.limit) ? __ldg(src + idx) : 0.0f;
            }
#pragma unroll
            for (int e = 0; e < kPerThread; ++e)
                if (u0 + e * kThreads < int(a.pitch)) dst[u0 + e * kThreads] = v[e];
        }
    }
}

struct AccArgs {
    const float2* lspec;  // left segment spectra, slot (i npc + pc) NB + b, E complex each
    const float2* rspec;  // right block spectra, slot r NB + b
    float2* prod;         // product slots k npc + pc
    int E, NB, npc;
    PairGrid grid;
    int tiles_l, tiles_r, fchunks;
    int64_t items;  // tiles_l * tiles_r * fchunks * npc warp work items
};

// The header's "accumulate_kernel mapping". Only valid with TL == 1 or grid.rsi == 0 (the rights of
// a subtile are taken at its first left i0).
// 32-bit work decomposition (the host keeps items below 2^31): a 64-bit division is a subroutine
// whose register saves ptxas reports as spills. (TL, TR) = (4, 8) holds 64 accumulator registers,
// 12 row addresses and 12 values.
// What binds this loop is the latency of its loads (ncu, ambient noise: 6.4 of 9.7 cycles between
// a warp's instructions waiting on them, L2 at 37% of its throughput, 16 warps an SM), and a
// register a value is what it cannot spare for a second block's loads (179 registers, one block an
// SM: slower). So each warp copies its rows into S stages of shared memory of its own
// (cp.async, [stage][row][lane]), S - 1 blocks ahead of the one it multiplies: every lane copies
// and then reads only its own 8 bytes, so no barrier is needed, and the copies cost no registers.
// A row past the last left or right copies the last one again (never stored, no predicates), and
// a subtile's outputs are one base address plus u osi' + v osj' (PairGrid::output is linear).
template <int TL, int TR, int S>
__global__ void __launch_bounds__(kThreads, 2) accumulate_kernel(AccArgs a) {
    extern __shared__ float2 stages[];
    constexpr int kRows = TL + TR;
    const int lane = threadIdx.x % kWarp;
    float2* const mine = stages + (threadIdx.x / kWarp) * (S * kRows * kWarp) + lane;
    const unsigned subtiles = unsigned(a.tiles_l) * unsigned(a.tiles_r);
    const unsigned stride = gridDim.x * kWarpsPerBlock;
    for (unsigned w = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarp; w < unsigned(a.items); w += stride) {
        const unsigned rest = w / subtiles, st = w - rest * subtiles;
        const unsigned pc = rest / unsigned(a.fchunks), fc = rest - pc * unsigned(a.fchunks);
        const unsigned ti = st % unsigned(a.tiles_l), tj = st / unsigned(a.tiles_l);
        const int i0 = int(ti) * TL, j0 = int(tj) * TR;
        const int f = int(fc) * kWarp + lane;
        if (f >= a.E) continue;  // no warp-wide operations below
        const int nl = min(TL, a.grid.N - i0), nr = min(TR, a.grid.M - j0);
        const int64_t bstride = int64_t(a.NB) * a.E;  // float2 from one matrix's first slot to the next's
        // Left i0 + u, piece pc: slot ((i0 + u) npc + pc) NB; right (i0, j0 + v): slot right(i0, j0 + v) NB.
        // Each address moves on by E as its row's next block is copied.
        const float2* row[kRows];
#pragma unroll
        for (int u = 0; u < TL; ++u)
            row[u] = a.lspec + ((int64_t(i0) + min(u, nl - 1)) * a.npc + pc) * bstride + f;
#pragma unroll
        for (int v = 0; v < TR; ++v) row[TL + v] = a.rspec + a.grid.right(i0, j0 + min(v, nr - 1)) * bstride + f;
        const auto copy_next = [&](int b) {  // block b's rows into stage b mod S, one commit group
            float2* dst = mine + (b % S) * (kRows * kWarp);
#pragma unroll
            for (int q = 0; q < kRows; ++q) {
                cp_async8(dst + q * kWarp, row[q]);
                row[q] += a.E;
            }
        };
#pragma unroll
        for (int b = 0; b < S - 1; ++b) {
            if (b < a.NB) copy_next(b);
            cp_async_commit();
        }
        float2 acc[TL][TR];
#pragma unroll
        for (int u = 0; u < TL; ++u)
#pragma unroll
            for (int v = 0; v < TR; ++v) acc[u][v] = make_float2(0.0f, 0.0f);
        for (int b = 0; b < a.NB; ++b) {
            // Stage (b + S - 1) mod S was read in the previous iteration, whose products (issued
            // before this copy) consumed every value read from it.
            if (b + S - 1 < a.NB) copy_next(b + S - 1);
            cp_async_commit();
            cp_async_wait<S - 1>();  // block b's group (every group committed before the last S - 1)
            const float2* src = mine + (b % S) * (kRows * kWarp);
            float2 l[TL], r[TR];
#pragma unroll
            for (int u = 0; u < TL; ++u) l[u] = src[u * kWarp];
#pragma unroll
            for (int v = 0; v < TR; ++v) r[v] = src[(TL + v) * kWarp];
#pragma unroll
            for (int u = 0; u < TL; ++u)
#pragma unroll
                for (int v = 0; v < TR; ++v) {  // l * conj(r)
                    acc[u][v].x = fmaf(l[u].x, r[v].x, fmaf(l[u].y, r[v].y, acc[u][v].x));
                    acc[u][v].y = fmaf(l[u].y, r[v].x, fmaf(-l[u].x, r[v].y, acc[u][v].y));
                }
        }
        const int64_t slot = int64_t(a.npc) * a.E;  // float2 from one output's product slots to the next's
        float2* out = a.prod + (a.grid.output(i0, j0) * a.npc + pc) * int64_t(a.E) + f;
        const int64_t du = a.grid.osi * slot, dv = a.grid.osj * slot;
#pragma unroll
        for (int u = 0; u < TL; ++u, out += du) {
            float2* o = out;
#pragma unroll
            for (int v = 0; v < TR; ++v, o += dv)
                if (u < nl && v < nr) *o = acc[u][v];
        }
    }
}

// Shared memory of accumulate_kernel<TL, TR, S>: S stages of TL + TR rows of 32 float2 a warp.
constexpr size_t stage_bytes(int TL, int TR, int S) { return size_t(kWarpsPerBlock) * S * (TL + TR) * kWarp * sizeof(float2); }

struct CropArgs {
    const float* res;  // C2R results, slot k npc + (p - p0), pitch floats each
    float* out;
    int64_t rows;  // out_count * out_h
    int out_h, out_w, row0;
    int xa, xb;    // columns filled from this chunk's results: [xa, xb)
    int xlo;       // column of lag lo
    int Wp, p0, npc;
    int64_t pitch;
    float scale;   // 1 / N
    int all;       // first chunk: write every element of every row (zeros outside [xa, xb))
    FastDiv by_wp; // q / Wp (q >= 0): a multiply and a shift, not a division's ~20 instructions a lag
};

// blockIdx.y strides over the output rows (k, y), x over the columns: coalesced writes, and reads
// of consecutive positions of one slot within a piece; kPerThread columns a thread, loads first
// (as seg_pad_kernel).
__global__ void __launch_bounds__(kThreads) crop_kernel(CropArgs a) {
    for (int64_t r = blockIdx.y; r < a.rows; r += gridDim.y) {
        const int64_t k = r / a.out_h;
        const int y = int(r - k * a.out_h);
        float* drow = a.out + r * a.out_w;
        const bool data = y == a.row0;
        if (!data && !a.all) continue;
        const int x_begin = a.all ? 0 : a.xa, x_end = a.all ? a.out_w : a.xb;
        const float* res = a.res + k * a.npc * a.pitch;  // slot (k npc + p - p0)
        for (int x0 = x_begin + blockIdx.x * kThreads * kPerThread + threadIdx.x; x0 < x_end;
             x0 += gridDim.x * kThreads * kPerThread) {
            float v[kPerThread];
#pragma unroll
            for (int e = 0; e < kPerThread; ++e) {
                const int x = x0 + e * kThreads;
                v[e] = 0.0f;
                if (data && x >= a.xa && x < a.xb && x < x_end) {
                    const int q = x - a.xlo, p = int(a.by_wp.div(unsigned(q))), t = q - p * a.Wp;
                    v[e] = __ldg(res + (p - a.p0) * a.pitch + t) * a.scale;
                }
            }
#pragma unroll
            for (int e = 0; e < kPerThread; ++e)
                if (x0 + e * kThreads < x_end) drow[x0 + e * kThreads] = v[e];
        }
    }
}

// Fused k = 1 peaks (header). The map is one row of `w` lags per output k, lag dx0 + x at position
// (x mod Wp) of product slot k npc + x div Wp (one chunk: p0 = 0, and lo = dx0), scaled 1/N exactly
// as crop_kernel scales it, so that a peak is the map's value to the bit.
struct PeakArgs {
    const float* res;
    int64_t count;  // outputs
    int w, Wp, npc, tiles;
    int64_t pitch;
    float scale;
    reduce::Cand* cand;  // count * tiles
};
__device__ __forceinline__ float lag_value(const PeakArgs& a, int64_t k, int x) {
    const int p = x / a.Wp;
    return __ldg(a.res + (k * a.npc + p) * a.pitch + (x - p * a.Wp)) * a.scale;
}

constexpr int kPeakPerThread = 8;
constexpr int kPeakTile = kThreads * kPeakPerThread;

// blockIdx.x: the tile of lags [x0, x0 + kPeakTile); blockIdx.y strides over the outputs. A thread
// takes kPeakPerThread lags kThreads apart, loads first (as crop_kernel); its lags' piece and
// position are stepped, not divided, from the first one's.
__global__ void __launch_bounds__(kThreads) peak_tiles_kernel(PeakArgs a) {
    __shared__ reduce::Cand sh[kWarp];
    const int x0 = blockIdx.x * kPeakTile + threadIdx.x;
    const int p0 = x0 / a.Wp;
    for (int64_t k = blockIdx.y; k < a.count; k += gridDim.y) {
        const float* slot = a.res + (k * a.npc + p0) * a.pitch;
        int t = x0 - p0 * a.Wp;
        float v[kPeakPerThread];
#pragma unroll
        for (int e = 0; e < kPeakPerThread; ++e) {
            v[e] = x0 + e * kThreads < a.w ? __ldg(slot + t) * a.scale : NAN;
            for (t += kThreads; t >= a.Wp; t -= a.Wp) slot += a.pitch;
        }
        reduce::Cand c = reduce::none();
#pragma unroll
        for (int e = 0; e < kPeakPerThread; ++e)
            if (!isnan(v[e])) c = reduce::better(c, reduce::Cand{v[e], x0 + e * kThreads});
        c = reduce::block_best(c, sh);
        if (threadIdx.x == 0) a.cand[k * a.tiles + blockIdx.x] = c;
    }
}

// A warp per output: the best of its tiles, then lane 0 writes the peak (or its absence: every lag
// NaN) with the fit from the lags on either side.
__global__ void __launch_bounds__(kThreads) peak_pick_kernel(PeakArgs a, PeakSink sink) {
    const int64_t k = (int64_t(blockIdx.x) * kThreads + threadIdx.x) / kWarp;
    const int lane = threadIdx.x % kWarp;
    if (k >= a.count) return;  // whole warps leave together
    reduce::Cand c = reduce::none();
    for (int t = lane; t < a.tiles; t += kWarp) c = reduce::better(c, a.cand[k * a.tiles + t]);
    c = reduce::warp_best(c);
    if (lane != 0) return;
    float* const value = sink.value + k;
    int32_t* const shift = sink.shift + 2 * k;
    float* const sub = sink.subpixel + 2 * k;
    if (c.i == INT_MAX)
        reduce::write_absent(value, shift, sub, 0);
    else
        reduce::write_peak(value, shift, sub, 0, c, 1, a.w, sink.dy0, sink.dx0, int(sink.method),
                           [&](int, int x) { return lag_value(a, k, x); });
}

// ---------------------------------------------------------------------------------------------
// Sizes and plans
// ---------------------------------------------------------------------------------------------


constexpr int64_t kMaxN = int64_t(1) << 22;
constexpr int64_t kInt32Max = 0x7fffffff;

// Pieces and blocks for transform size N (header, "Geometry").
struct Geometry {
    int64_t N = 0, Wp = 0, B = 0, NP = 0, NB = 0;
};
Geometry make_geometry(int64_t N, int64_t Wp, int64_t B, int64_t W, int64_t rn) {
    return Geometry{N, Wp, B, ceil_div64(W, Wp), ceil_div64(rn, B)};
}
// Calls f with every split of N + 1 = B + Wp that the header lists.
template <typename F>
void for_each_geometry(int64_t N, int64_t W, int64_t rn, F&& f) {
    if (rn + W - 1 <= N) {
        f(make_geometry(N, W, rn, W, rn));
        return;
    }
    if (W < N) f(make_geometry(N, W, N + 1 - W, W, rn));     // one piece
    if (rn < N) f(make_geometry(N, N + 1 - rn, rn, W, rn));  // one block
    f(make_geometry(N, N / 2, N + 1 - N / 2, W, rn));
}

// Modelled seconds of a run (header, "N"): bandwidth of the passes plus the accumulation's FMAs.
double cost(const Geometry& g, double nL, double nR, double pairs) {
    const double N = double(g.N), passes = g.N > 16384 ? 2.0 : 1.0;
    const double segs = nL * double(g.NP) * double(g.NB) + nR * double(g.NB), prods = pairs * double(g.NP);
    const double bytes = 4.0 * N * (segs * (2.0 + 2.0 * passes) + prods * (1.0 + 2.0 * passes));
    const double cmacs = pairs * double(g.NP) * double(g.NB) * (N / 2 + 1);
    return bytes / 3.5e12 + 4.0 * cmacs / 25e12;
}

// The cheapest geometry of transform size n_param, or (n_param = 0, auto) of any candidate size.
Geometry choose_geometry(int64_t n_param, int64_t W, int64_t rn, const Problem& p) {
    const double nL = p.nL, nR = p.nR, pairs = double(p.out_count());
    Geometry best;
    double best_cost = 0;
    const auto consider = [&](int64_t N) {
        for_each_geometry(N, W, rn, [&](const Geometry& g) {
            const double c = cost(g, nL, nR, pairs);
            if (best.N == 0 || c < best_cost) {
                best = g;
                best_cost = c;
            }
        });
    };
    if (n_param > 0) {
        consider(n_param);
        return best;
    }
    if (rn + W - 1 <= kMaxN) consider(fft_length(rn + W - 1, true));
    for (int64_t N = 256; N <= kMaxN; N *= 2) consider(N);
    return best;
}

enum PlanKind : int { kR2C = 0, kC2R = 1 };

// A batched in-place 1-D plan: real slots of 2E floats (N used), complex slots of E. Throws
// PlanTooLarge (xcorr/cufft_plan.hpp) where cuFFT has too little memory for it.
cufftHandle create_plan(int64_t N, int64_t batch, PlanKind kind) {
    long long n[1] = {N}, real_embed[1] = {2 * (N / 2 + 1)}, cplx_embed[1] = {N / 2 + 1};
    return kind == kR2C ? make_plan_many(1, n, real_embed, real_embed[0], cplx_embed, cplx_embed[0], CUFFT_R2C, batch)
                        : make_plan_many(1, n, cplx_embed, cplx_embed[0], real_embed, real_embed[0], CUFFT_C2R, batch);
}

// Grid for "blockIdx.y over slots or rows, x over `per` elements of one".
dim3 slot_grid(int64_t per, int64_t slots, int64_t max_x) {
    const int64_t bx = std::clamp<int64_t>(ceil_div64(per, kThreads), 1, max_x);
    return dim3(unsigned(bx), unsigned(std::min<int64_t>(slots, 65535)));
}

// ---------------------------------------------------------------------------------------------
// The instance
// ---------------------------------------------------------------------------------------------

class FftSegmented final : public Instance {
public:
    FftSegmented(const Problem& p, int64_t n_param) : p_(p) {
        const Window w = p.shifts();
        const int n = p.wL, m = p.wR;
        lo_ = std::max(w.dx0, -(m - 1));
        hi_ = std::min(w.dx1, n - 1);
        row0_ = (w.dy0 <= 0 && 0 <= w.dy1) ? -w.dy0 : -1;
        if (lo_ > hi_ || row0_ < 0) {
            empty_ = true;
            return;
        }
        r0_ = std::max(0, -hi_);
        rn_ = std::min(m, n - lo_) - r0_;  // >= 1: lo <= n - 1 and hi >= -(m - 1)
        const int64_t W = int64_t(hi_) - lo_ + 1;
        g_ = choose_geometry(n_param, W, rn_, p);
        E_ = g_.N / 2 + 1;
        pitch_ = 2 * E_;
        pairs_ = pair_map(p).grid();
        out_count_ = p.out_count();

        // Pieces per chunk: the most that fit in 45% of the free memory (fft's budget).
        size_t free_b = 0, total_b = 0;
        XC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        const double slot_bytes = double(pitch_) * sizeof(float);
        const double fixed = double(p.nR) * double(g_.NB) * slot_bytes;
        const double per_piece = (double(p.nL) * double(g_.NB) + double(out_count_)) * slot_bytes;
        const double usable = 0.45 * double(free_b);
        const double fit = (usable - fixed) / per_piece;
        if (fit < 1)
            throw UsageError("not enough GPU memory for fft-segmented: " + p.describe() + " with N = " +
                             std::to_string(g_.N) + " needs " + std::to_string((fixed + per_piece) / double(1 << 30)) +
                             " GiB of workspace for one lag piece, 45% of the free " +
                             std::to_string(double(free_b) / double(1 << 30)) + " GiB is usable");
        int64_t k = std::min<int64_t>(int64_t(std::min(fit, 1e9)), g_.NP);
        if (const int cap = fft_max_chunk_from_env()) k = std::min<int64_t>(k, cap);
        // The wide subtile's four stages where the GPU allows them (accumulate()).
        wide_ = pairs_.rsi == 0 && pairs_.N >= 2;
        deep_ = wide_ && dynamic_smem_optin() >= stage_bytes(4, 8, 4);
        if (deep_) raise_dynamic_smem_limit(accumulate_kernel<4, 8, 4>, stage_bytes(4, 8, 4));
        // 32-bit indices in the kernels: accumulation work items, and a left's slots (npc NB).
        const int64_t per_piece_items =
            int64_t(ceil_div(pairs_.N, wide_ ? 4 : 1)) * ceil_div(pairs_.M, 8) * ceil_div64(E_, kWarp);
        k = std::min<int64_t>(k, std::min(kInt32Max / per_piece_items, kInt32Max / g_.NB));
        if (k < 1)
            throw UsageError("fft-segmented: " + p.describe() + " has too many pairs or blocks for one lag piece");
        // cuFFT's work areas are outside the 45% estimate: a plan cuFFT cannot make for want of
        // memory halves the pieces per chunk and plans again, down to one (as fft does with its rights).
        for (;;) {
            npc_ = k;
            chunks_ = ceil_div64(g_.NP, npc_);
            tail_ = g_.NP - (chunks_ - 1) * npc_;

            r_slots_ = int64_t(p.nR) * g_.NB;
            l_slots_ = int64_t(p.nL) * npc_ * g_.NB;
            p_slots_ = out_count_ * npc_;
            ws_ = DeviceBuffer<float>(size_t((r_slots_ + l_slots_ + p_slots_) * pitch_));

            try {
                make_plan(kRight, r_slots_, kR2C);
                make_plan(kLeft, l_slots_, kR2C);
                make_plan(kProd, p_slots_, kC2R);
                if (tail_ != npc_) {
                    make_plan(kLeftTail, int64_t(p.nL) * tail_ * g_.NB, kR2C);
                    make_plan(kProdTail, out_count_ * tail_, kC2R);
                }
                break;
            } catch (const PlanTooLarge& e) {
                destroy_plans();
                ws_ = DeviceBuffer<float>();
                if (npc_ <= 1) plan_error(e);
                k = (npc_ + 1) / 2;
            } catch (...) {
                destroy_plans();  // the destructor does not run for a throwing constructor
                throw;
            }
        }
        // Fused k = 1 peaks (header): where every element of the map is a lag of [lo, hi] in row 0
        // and one chunk holds every piece.
        if (p.out_h() == 1 && lo_ == w.dx0 && hi_ == w.dx1 && chunks_ == 1)
            peak_cand_ = DeviceBuffer<reduce::Cand>(size_t(out_count_ * peak_tiles()));
    }

    ~FftSegmented() override { destroy_plans(); }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        if (empty_) {
            XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(p_.out_elems()) * sizeof(float), stream));
            return;
        }
        transform(left, right, stream, [&](int64_t c, int64_t p0, int npc) {
            // 5. Crop this chunk's lags; the first chunk writes the rest of the output too.
            const int64_t lag_a = lo_ + p0 * g_.Wp, lag_b = std::min<int64_t>(hi_, lag_a + int64_t(npc) * g_.Wp - 1);
            const Window w = p_.shifts();
            const CropArgs a{prod_slot(0),
                             out,
                             out_count_ * p_.out_h(),
                             p_.out_h(),
                             p_.out_w(),
                             row0_,
                             int(lag_a - w.dx0),
                             int(lag_b - w.dx0 + 1),
                             lo_ - w.dx0,
                             int(g_.Wp),
                             int(p0),
                             npc,
                             pitch_,
                             float(1.0 / double(g_.N)),
                             c == 0 ? 1 : 0,
                             FastDiv(unsigned(g_.Wp))};
            const int64_t cols = c == 0 ? p_.out_w() : a.xb - a.xa;
            crop_kernel<<<slot_grid(ceil_div64(cols, kPerThread), a.rows, 1024), kThreads, 0, stream>>>(a);
            XC_CHECK_LAUNCH();
        });
    }

    // Fused k = 1 peaks (header): every element of the map a lag in row 0, one chunk.
    bool takes_peak1() const override { return peak_cand_.size() > 0; }
    void run_peak1(const float* left, const float* right, const PeakSink& sink, cudaStream_t stream) override {
        if (!takes_peak1()) throw UsageError("fft-segmented: no fused peaks for " + p_.describe());
        transform(left, right, stream, [&](int64_t, int64_t, int npc) {
            const PeakArgs a{prod_slot(0), out_count_, p_.out_w(), int(g_.Wp), npc, peak_tiles(),
                             pitch_,       float(1.0 / double(g_.N)), peak_cand_.get()};
            peak_tiles_kernel<<<dim3(unsigned(a.tiles), unsigned(std::min<int64_t>(a.count, 65535))), kThreads, 0,
                                stream>>>(a);
            XC_CHECK_LAUNCH();
            peak_pick_kernel<<<unsigned(ceil_div64(a.count * kWarp, kThreads)), kThreads, 0, stream>>>(a, sink);
            XC_CHECK_LAUNCH();
        });
    }

    // cuFFT's work areas (cuFFT allocates them itself).
    size_t external_device_bytes() const override {
        size_t total = 0;
        for (int i = 0; i < kPlans; ++i) {
            size_t work = 0;
            if (live_[i] && cufftGetSize(plans_[i], &work) == CUFFT_SUCCESS) total += work;
        }
        return total;
    }

private:
    enum { kRight = 0, kLeft, kProd, kLeftTail, kProdTail, kPlans };

    int peak_tiles() const { return int(ceil_div64(p_.out_w(), kPeakTile)); }

    // Steps 1-4 of the header; `inverse(c, p0, npc)` enqueues what reads chunk c's C2R results
    // (pieces p0 .. p0 + npc - 1) before the next chunk overwrites them.
    template <class F>
    void transform(const float* left, const float* right, cudaStream_t stream, F&& inverse) {
        // 1. Right blocks: R[r0 + bB + u], u < B, zero past r0 + rn.
        pad(SegPadArgs{right, int64_t(p_.wR), right_slot(0), r_slots_, int(g_.NB), int(g_.NB), r0_, 0, g_.B,
                       int(g_.B), int64_t(r0_) + rn_, int(g_.N), pitch_},
            stream);
        r2c(plans_[kRight], right_slot(0), stream);
        for (int64_t c = 0; c < chunks_; ++c) {
            const int64_t p0 = c * npc_;
            const int npc = int(c + 1 < chunks_ ? npc_ : tail_);
            const bool tail = npc != npc_;
            // 2. Left segments of pieces p0 .. p0 + npc - 1.
            pad(SegPadArgs{left, int64_t(p_.wL), left_slot(0), int64_t(p_.nL) * npc * g_.NB, int(npc * g_.NB),
                           int(g_.NB), int64_t(r0_) + lo_ + p0 * g_.Wp, g_.Wp, g_.B, int(g_.N), int64_t(p_.wL),
                           int(g_.N), pitch_},
                stream);
            r2c(plans_[tail ? kLeftTail : kLeft], left_slot(0), stream);
            // 3. Accumulation over the blocks.
            accumulate(npc, stream);
            // 4. One inverse per (pair, piece), in place.
            XC_CUFFT_CHECK(cufftSetStream(plans_[tail ? kProdTail : kProd], stream));
            XC_CUFFT_CHECK(cufftExecC2R(plans_[tail ? kProdTail : kProd],
                                        reinterpret_cast<cufftComplex*>(prod_slot(0)), prod_slot(0)));
            inverse(c, p0, npc);
        }
    }

    void make_plan(int i, int64_t batch, PlanKind kind) {
        plans_[i] = create_plan(g_.N, batch, kind);
        live_[i] = true;
    }
    void destroy_plans() noexcept {
        for (int i = 0; i < kPlans; ++i)
            if (live_[i]) {
                cufftDestroy(plans_[i]);
                live_[i] = false;
            }
    }

    // Slot areas: rights, then left segments, then products (each slot 2E floats).
    float* right_slot(int64_t s) const { return ws_.get() + s * pitch_; }
    float* left_slot(int64_t s) const { return ws_.get() + (r_slots_ + s) * pitch_; }
    float* prod_slot(int64_t s) const { return ws_.get() + (r_slots_ + l_slots_ + s) * pitch_; }

    void pad(const SegPadArgs& a, cudaStream_t stream) {
        seg_pad_kernel<<<slot_grid(ceil_div64(a.pitch, kPerThread), a.slots, 64), kThreads, 0, stream>>>(a);
        XC_CHECK_LAUNCH();
    }
    void r2c(cufftHandle h, float* slots, cudaStream_t stream) {
        XC_CUFFT_CHECK(cufftSetStream(h, stream));
        XC_CUFFT_CHECK(cufftExecR2C(h, slots, reinterpret_cast<cufftComplex*>(slots)));
    }
    void accumulate(int npc, cudaStream_t stream) {
        const int tl = wide_ ? 4 : 1, tr = 8;
        AccArgs a{reinterpret_cast<const float2*>(left_slot(0)),
                  reinterpret_cast<const float2*>(right_slot(0)),
                  reinterpret_cast<float2*>(prod_slot(0)),
                  int(E_),
                  int(g_.NB),
                  npc,
                  pairs_,
                  ceil_div(pairs_.N, tl),
                  ceil_div(pairs_.M, tr),
                  int(ceil_div64(E_, kWarp)),
                  0};
        a.items = int64_t(a.tiles_l) * a.tiles_r * a.fchunks * npc;
        const unsigned blocks = unsigned(std::min<int64_t>(ceil_div64(a.items, kWarpsPerBlock), int64_t(1) << 30));
        // (4, 8): four stages where the GPU allows a block 96 KB (sm_80 and on but sm_75), else two,
        // within the 48 KB every GPU allows (H200, ambient noise: 588 us either way). (1, 8): two
        // (seed 004's case, one block a right: 528 us, 538 with four).
        if (wide_ && deep_) accumulate_kernel<4, 8, 4><<<blocks, kThreads, stage_bytes(4, 8, 4), stream>>>(a);
        else if (wide_) accumulate_kernel<4, 8, 2><<<blocks, kThreads, stage_bytes(4, 8, 2), stream>>>(a);
        else accumulate_kernel<1, 8, 2><<<blocks, kThreads, stage_bytes(1, 8, 2), stream>>>(a);
        XC_CHECK_LAUNCH();
    }

    Problem p_;
    bool empty_ = false, wide_ = false, deep_ = false;  // deep_: four accumulation stages
    int lo_ = 0, hi_ = -1, row0_ = -1, r0_ = 0, rn_ = 0;
    Geometry g_;
    int64_t E_ = 0, pitch_ = 0, out_count_ = 0;
    int64_t npc_ = 0, chunks_ = 0, tail_ = 0, r_slots_ = 0, l_slots_ = 0, p_slots_ = 0;
    PairGrid pairs_{};
    DeviceBuffer<float> ws_;
    DeviceBuffer<reduce::Cand> peak_cand_;  // fused peaks: each output's tile maxima (empty: not taken)
    std::array<cufftHandle, kPlans> plans_{};
    std::array<bool, kPlans> live_{};  // a cufftHandle has no invalid value
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "fft-segmented",
    .family = "fft",
    .summary = "1-D signals: cuFFT over segments of N points, lag window cropped per segment, block spectra "
               "accumulated per pair (tiled over pairs) before one inverse per pair and lag piece",
    .timed = "pad + R2C of right blocks and left segments + accumulation + C2R + crop (everything)",
    .precision = "fp32",
    .tolerance = 5e-6,
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {{"n",
                {"auto", "8192", "16384", "256"},
                "transform size N (auto: the cheapest by the header's cost model; 256: many pieces and blocks, "
                "for tests)"}},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        const std::string& v = ps.at("n");
        return std::make_unique<FftSegmented>(p, v == "auto" ? 0 : int64_t(std::stoll(v)));
    },
    .pilot_batch = true,  // microseconds where the definition's FMA count says milliseconds
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    .signals_only = true,
});

}  // namespace
}  // namespace xcorr::fft_segmented
