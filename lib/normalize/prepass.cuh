// The normalization's prepass before the tables: each crop's mean and variance (partial_sums_kernel,
// means_kernel), the fused prepass of small crops (means, shifted copies and tables in one kernel),
// and zero-lag's C(0, 0) per pair. Part of normalizer.cu's translation unit (internal.cuh).
#pragma once

#include "normalize/internal.cuh"
#include "normalize/tables.cuh"

namespace xcorr {
namespace {

// Mean and variance, first level. Algorithm: block b of matrix m sums the b-th of `partials` equal
// slices of the crop (row-major element order) in double, in a fixed order (no atomics: the means,
// hence the outputs, are the same on every run): thread t adds elements begin + t, begin + t + 256,
// ... in turn to 0, then block_sum; beside Σx the same loop sums (x - x0)² for the crop's variance
// (crop_variance: x0 is its first element, so an offset cancels nothing). A crop of whole rows is contiguous in the input; otherwise element i
// is at crop row i / cw, column i % cw (32-bit: ch·cw <= 2^30 by Problem::check). Mapping: grid
// (min(max over the stacks of count·partials, kMaxPartialBlocks), 1, 2 stacks), kThreads threads;
// blockIdx.x strides over the stack's (matrix m, slice b) = divmod(i, partials), so a stack of one
// long signal (1024 slices) beside one of 300 short templates (1 slice each) launches ~1024 blocks,
// not the 614 k of a (max partials, max count) grid, nearly all of which returned at once (0.85 ms
// of matched filtering's prepass).
// The loop bound is uniform per block: block_sum's barriers stay uniform. Writes
// partial[m * partials + b]. Resources: 64 bytes of shared memory (block_sum).
constexpr int kPartialAhead = 4;
__global__ void partial_sums_kernel(Stacks st) {
    const StackRef s = st.pick();
    // 32-bit index arithmetic (ch·cw <= 2^30, partials <= kMaxPartials): each thread of a block
    // worked out the block's slice with three 64-bit divisions, most of its instructions on short
    // slices. Slice b is elements [⌊elems·b / P⌋, ⌊elems·(b + 1) / P⌋) with P = partials, written
    // q·b + ⌊r·b / P⌋ for elems = q·P + r (the same integers).
    const int elems = s.ch * s.cw, P = s.partials, q = elems / P, r = elems - q * P;
    const int64_t slices = int64_t(s.count) * P;
    for (int64_t i = blockIdx.x; i < slices; i += gridDim.x) {
        const int m = i <= INT_MAX ? int(i) / P : int(i / P), b = int(i - int64_t(m) * P);
        const int begin = q * b + r * b / P, end = q * (b + 1) + r * (b + 1) / P;
        const float* x = s.crop_row(m, 0);
        // Crops of whole rows (cw == w) are contiguous in the input; others walk a CropCursor. (The
        // cursor's offset is i there too, but without the test the kernel measured slower on crops
        // that are not contiguous: notes/probes.md, the crop-cursor probe.)
        const int first = begin + int(threadIdx.x);
        CropCursor cur(first, s.cw);
        // kPartialAhead loads in flight, then added in order: thread t's elements and order as one
        // at a time (the same sum), without waiting on each load in turn.
        const double x0 = s.crop_first(m);
        double v = 0, q = 0;
        for (int i0 = first; i0 < end; i0 += kPartialAhead * kThreads) {
            float e[kPartialAhead];
#pragma unroll
            for (int u = 0; u < kPartialAhead; ++u) {
                if (const int i = i0 + u * kThreads; i < end) e[u] = s.cw == s.w ? x[i] : x[cur.at(s.w)];
                cur.next();
            }
#pragma unroll
            for (int u = 0; u < kPartialAhead; ++u)
                if (i0 + u * kThreads < end) {
                    v += double(e[u]);
                    q += square_from(e[u], x0);
                }
        }
        v = block_sum(v);
        q = block_sum(q);
        if (threadIdx.x == 0) s.partial[i] = make_double2(v, q);  // i = m * partials + b
    }
}

// The mean of a crop from its partial sums: added in order to 0, divided by ch·cw. Shared by
// means_kernel and fused_prepass_kernel (one partial there), so both give the same bits.
__device__ __forceinline__ double mean_of(const double2* partial, int partials, int ch, int cw) {
    double v = 0;
    for (int b = 0; b < partials; ++b) v += partial[b].x;
    return v / (double(ch) * cw);
}

// The crop's variance from q = Σ(x - x0)² over its P = ch·cw elements and its mean m:
// Σ(x - m)² = Σ(x - x0)² - P·(m - x0)², so var = q / P - (m - x0)², at least 0. Pivoting on an
// element of the crop keeps the two terms of the order of the spread, whatever the offset: on
// 30000 + noise of amplitude 1, Σx² - P·m² would have cancelled 9 of double's 16 digits. zncc calls
// a part of a crop constant where its variance is at most kConstantOverlap of this (zncc_factor).
__device__ __forceinline__ double crop_variance(double q, double m, double x0, int ch, int cw) {
    const double d = m - x0;
    return fmax(0.0, q / (double(ch) * cw) - d * d);
}

// Mean, second level. One partial (every crop the fused prepass could take, and small ones):
// mean_of, the fused kernel's own sum. More: a warp per matrix, lane i adding partials i, i + 32,
// ... in order to 0, then warp_sum's xor butterfly (block_sum's), divided by ch·cw (one thread walking a
// 2048 x 2048 crop's partials was a chain of dependent loads; the order is still fixed, the same
// bits on every run). Mapping: warps striding over the matrices (one matrix per warp), grid (blocks, 1,
// 2 stacks), kThreads threads.
__global__ void means_kernel(Stacks st) {
    const StackRef s = st.pick();
    const int lane = threadIdx.x % kWarp;
    const int64_t warps = int64_t(gridDim.x) * (kThreads / kWarp);
    for (int64_t m = (blockIdx.x * int64_t(kThreads) + threadIdx.x) / kWarp; m < s.count; m += warps) {
        const double2* partial = s.partial + m * s.partials;
        if (s.partials == 1) {  // uniform per stack
            if (lane == 0) {
                s.mean[m] = mean_of(partial, 1, s.ch, s.cw);
                s.var[m] = crop_variance(partial[0].y, s.mean[m], s.crop_first(m), s.ch, s.cw);
            }
            continue;
        }
        double v = 0, q = 0;
        for (int b = lane; b < s.partials; b += kWarp) v += partial[b].x, q += partial[b].y;
        v = warp_sum(v);
        q = warp_sum(q);
        if (lane == 0) {
            s.mean[m] = v / (double(s.ch) * s.cw);
            s.var[m] = crop_variance(q, s.mean[m], s.crop_first(m), s.ch, s.cw);
        }
    }
}

// The whole prepass of one small crop in one kernel (fits_fused: its table and floats in shared
// memory), for the fixed cost of many small crops (zncc_frames: 1000 crops of 39 x 37), where the
// four kernels above are mostly launches, tails and table round trips through L2. Algorithm, per
// matrix: load the crop into shared memory while each thread adds its elements i = t, t + 256, ...
// to 0 in double, block_sum, mean_of one partial: exactly partial_sums_kernel's and means_kernel's
// order with one partial (static_assert above), so the mean has the same bits; then scan_row per
// crop row (a warp per row, warps striding over the rows) into the table in shared memory, row 0
// zero; scan_columns over the table's column chunks; then the table is written out (coalesced
// double2). A stack without tables (sat null: Prepass::rebuild_left, the staged epilogue builds
// them from the shifted copies) writes only the shifted copy, element by element, with shifted()
// as scan_row does: the same floats. Otherwise scan_row writes it, from the same floats the table sums.
// So means, shifted copies and tables are bit-identical to the four-kernel path's (tests/
// test_normalize_fused.py models both). Mapping: one block of kThreads per matrix, blocks
// striding over the matrices of both stacks (lefts first; a stack of count 0 is not this
// kernel's); the stack is a per-matrix select. Resources: dynamic shared memory
// fused_smem_bytes(ch, cw) of the larger fused crop (<= kFusedSmemBytes, set by
// cudaFuncSetAttribute in the Normalizer), static 4 KB seg_total + 64 B block_sum + 8 B mean; 47 registers.
constexpr int kPrepassAhead = 4;
__global__ void __launch_bounds__(kThreads) fused_prepass_kernel(Stacks st) {
    extern __shared__ double2 smem[];
    __shared__ double2 seg_total[kColSegments][kWarp];
    __shared__ double mean_sh;
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    for (int64_t g = blockIdx.x; g < st.matrices(); g += gridDim.x) {
        const auto [s, m] = st.matrix(g);
        const int ch = s.ch, cw = s.cw, w1 = cw + 1, elems = ch * cw, cells = (ch + 1) * w1;
        double2* table = smem;                                   // (ch + 1) x w1
        float* crop = reinterpret_cast<float*>(smem + cells);   // ch x cw, row-major
        const float* x = s.crop_row(m, 0);
        // kPrepassAhead loads in flight before they are added: the same elements in the same order
        // per thread as one at a time (so the same sum), without waiting on each load in turn
        const double x0 = s.crop_first(m);
        double v = 0, q = 0;
        CropCursor cur(threadIdx.x, cw);
        for (int i0 = threadIdx.x; i0 < elems; i0 += kPrepassAhead * kThreads) {
            float e[kPrepassAhead];
#pragma unroll
            for (int u = 0; u < kPrepassAhead; ++u) {
                if (const int i = i0 + u * kThreads; i < elems) e[u] = x[cur.at(s.w)];
                cur.next();
            }
#pragma unroll
            for (int u = 0; u < kPrepassAhead; ++u)
                if (const int i = i0 + u * kThreads; i < elems) {
                    crop[i] = e[u];
                    v += double(e[u]);
                    q += square_from(e[u], x0);
                }
        }
        v = block_sum(v);  // its barriers also publish crop[]
        q = block_sum(q);
        if (threadIdx.x == 0) {
            const double2 total = make_double2(v, q);
            mean_sh = mean_of(&total, 1, ch, cw);
            s.mean[m] = mean_sh;
            s.var[m] = crop_variance(q, mean_sh, x0, ch, cw);
        }
        __syncthreads();
        const double mean = mean_sh;
        if (!s.sat) {  // uniform per matrix. No table (Prepass::rebuild_left: the staged epilogue
            // builds it): the shifted copy alone, element by element
            float* xs = s.xs + m * elems;
            for (int i = threadIdx.x; i < elems; i += kThreads) xs[i] = shifted(crop[i], mean);
            __syncthreads();  // the next matrix's crop and mean overwrite this one's shared memory
            continue;
        }
        for (int c = threadIdx.x; c < w1; c += kThreads) table[c] = make_double2(0, 0);
        for (int r = warp; r < ch; r += kThreads / kWarp)
            scan_row<1>(crop + r * cw, s.xs + (m * ch + r) * cw, table + (r + 1) * w1, cw, mean, lane);
        __syncthreads();  // rows before columns
        for (int c0 = 0; c0 < w1; c0 += kWarp) scan_columns<1>(table, ch, w1, c0 + lane, warp, seg_total);
        __syncthreads();
        double2* out = s.sat + m * cells;
        for (int i = threadIdx.x; i < cells; i += kThreads) out[i] = table[i];
        __syncthreads();  // the next matrix's crop and mean overwrite this one's shared memory
    }
}

// zero-lag, C(0, 0) of every output's pair: the sum over r < min(hL, hR), c < min(wL, wR) of
// L[r][c]·R[r][c] in double (the overlap at shift (0, 0); the same terms as raw_at), in two levels
// so that one pair's millions of products are spread over the GPU (one block per pair took 8.9 ms
// for a 2048 x 2048 pair on the H200) and the sum is the same on every run (no atomics).
// First level: parts = row_parts·col_parts blocks per pair (c00_split); block b = rb·col_parts + cb
// of pair k sums rows rb, rb + row_parts, ... over the columns [w·cb / col_parts, w·(cb + 1) /
// col_parts) (a row's columns over the threads: no 64-bit division per element) and writes
// partial[k * parts + b]. The column chunks let a pair of few long rows (two 1-D signals of 2^20
// samples) take many blocks; with col_parts 1 this is the row split alone (the sums of pairs with
// enough rows unchanged). Mapping: grid (parts, min(count, 65535)), blockIdx.y striding over the
// pairs; block_sum. Resources: 64 bytes of shared memory.
__global__ void c00_partial_kernel(const float* __restrict__ left, const float* __restrict__ right, int hL, int wL,
                                   int hR, int wR, PairMap pairs, int64_t count, int row_parts, int col_parts,
                                   double* __restrict__ partial) {
    const int h = min(hL, hR), w = min(wL, wR), parts = row_parts * col_parts;
    const int rb = int(blockIdx.x) / col_parts, cb = int(blockIdx.x) % col_parts;
    const int c0 = int(int64_t(w) * cb / col_parts), c1 = int(int64_t(w) * (cb + 1) / col_parts);
    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        const float* L = left + int64_t(pairs.left_of(k)) * hL * wL;
        const float* R = right + int64_t(pairs.right_of(k)) * hR * wR;
        double v = 0;
        for (int r = rb; r < h; r += row_parts)
            for (int c = c0 + threadIdx.x; c < c1; c += kThreads)
                v += double(L[int64_t(r) * wL + c]) * double(R[int64_t(r) * wR + c]);
        v = block_sum(v);
        if (threadIdx.x == 0) partial[k * parts + blockIdx.x] = v;
    }
}

// Second level: one warp per pair; lane i adds partials i, i + 32, ... in order to 0 (coalesced
// loads, 32 at a time: one thread walking a pair's 256 partials was 21 us of dependent loads on
// the H200), then warp_sum's xor butterfly (block_sum's); a fixed order, so the same bits on every run.
// Mapping: warps striding over the pairs, kThreads threads.
__global__ void c00_final_kernel(const double* __restrict__ partial, int64_t count, int parts,
                                 double* __restrict__ c00) {
    const int lane = threadIdx.x % kWarp;
    const int64_t warps = int64_t(gridDim.x) * (kThreads / kWarp);
    for (int64_t k = (blockIdx.x * int64_t(kThreads) + threadIdx.x) / kWarp; k < count; k += warps) {
        double v = 0;
        for (int b = lane; b < parts; b += kWarp) v += partial[k * parts + b];
        v = warp_sum(v);
        if (lane == 0) c00[k] = v;
    }
}

}  // namespace
}  // namespace xcorr
