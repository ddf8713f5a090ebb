// The normalized outputs' fast path (normalize.hpp explains the method): the kernels before and
// after a variant's raw correlation, and the Instance that puts them around it.
#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>

#include "common/device.cuh"
#include "xcorr/crop.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/normalize.hpp"
#include "xcorr/store_norm.hpp"
#include "xcorr/reference_element.hpp"

namespace xcorr {

namespace {

constexpr int kThreads = 256;
constexpr int kMaxGridY = 65535;  // gridDim.y and .z limit: kernels stride over the matrices beyond it
constexpr int64_t kMaxGridX = 2147483647;  // gridDim.x limit (2^31 - 1)
constexpr int64_t kMaxPartialBlocks = 1 << 20;  // partial_sums_kernel: blocks stride past it
constexpr int kMaxPartials = 1024;  // blocks per matrix of the mean reduction (a 2048 x 2048 crop: 1024)
constexpr int kColSegments = 8;   // row segments per column of the column pass (blockDim.y of col_scan_kernel)
constexpr int kMaxC00Parts = 1024;  // blocks per pair of zero-lag's C(0, 0) at most
// Long rows and columns of the four-kernel path (a 2048 x 2048 crop: one warp per row walks 64
// strips, a column segment 256 rows) issue several loads before adding them in order (the same
// sums): kRowStrips strips of a row, kColBatch rows of a column segment. Short ones (zncc_frames'
// 85 x 86 crops, the fused prepass) keep one load at a time: batching measured slower there.
constexpr int kRowStrips = 4;
constexpr int kLongRow = 16 * kWarp;
constexpr int kColBatch = 8, kLongColumn = 64 * kColSegments;
constexpr int kElemsPerPartial = kThreads * 16;  // crop elements per block of the two-level mean
// Tall tables of few columns (seed 002's sampled tables: 130 columns of 2049 rows, 10 blocks of
// col_scan_kernel on the GPU, each walking 256 rows twice) take the banded column pass: the rows
// cut into bands of kColSegments segments of about kBandSegRows rows, a block per band, enough
// bands for about kColBlocks blocks in all, at most kMaxColBands.
// Many crops past the fused prepass whose tables are narrow (zncc_frames' 1000 crops of 69 x 70 or
// 172 x 132 within ±16, 50 table columns each) take the strip prepass: row and column pass in one
// kernel, one block per matrix, kStripRows rows at a time through shared memory, so a table
// crosses DRAM once (written) instead of three times. Where: at least kStripMinCount matrices in
// the stack (one block per matrix must fill the GPU), tables of at most kStripMaxWidth columns, crops
// of at most kStripMaxHeight rows (a block walks its matrix's strips one after another: ~0.5 us
// each, so 1024 rows would cost what the four-kernel path's traffic does for 64 such matrices).
constexpr int kStripRows = kThreads / kWarp;
constexpr int kStripMinCount = 64;
constexpr int kStripMaxWidth = 384;
constexpr int kStripMaxHeight = 512;
constexpr int kBandSegRows = 16;
constexpr int kColBlocks = 1024;
constexpr int kMaxColBands = 64;
// Very long rows (a 1-D signal of millions of samples: one warp walking it strip by strip took
// 133 ms for 8.64 M columns on the H200) take the segmented row pass instead (seg_scan_kernel,
// seg_carry_kernel, seg_add_kernel): rows of more than kSegRow columns are cut into segments of
// kSegCols columns, one warp each. A function of the crop's width alone, so the sums' order is a
// function of the problem; rows up to kSegRow keep scan_row (their bits unchanged).
constexpr int kSegCols = 64 * kWarp;
constexpr int kSegRow = 4 * kSegCols;
constexpr int kSegBatch = 4;  // chunks of 32 segment totals loaded at once by seg_carry_kernel
// The most terms whose rounding a segmented row's table entry carries, for zncc_factor's bound:
// its segment's scan (at most kSegCols terms), the compensated carry of the segments before (its
// segment totals' own scans, a chunk's warp scan of 5 levels and the carry's rounding) and the
// last addition (seg_carry_kernel's comment).
constexpr int kSegRowDepth = kSegCols + 8;
static_assert(kSegCols % (kRowStrips * kWarp) == 0, "segments of whole batches of strips");
static_assert(kThreads / kWarp == kColSegments, "scan_columns: one warp per column segment");
// Dynamic shared memory of the fused prepass at most (a crop's table and its floats): crops that
// fit take fused_prepass_kernel, larger ones the four-kernel path. 104 KB: two blocks per SM at the
// limit (2 x (104 + 4 static + 1 reserved) of the SM's 228 KB); the 39 x 37 crop of zncc_frames
// (30 KB, 34 KB with the static 4 KB) runs six per SM, and its 69 x 70 crops (53 x 54 template,
// 98.8 KB) fit, which at 96 KB took the two-level mean and the strip prepass, slower
// (probes-archive:results/nvidia-h200/probes/zncc-frames-prepass-9957db0/).
constexpr size_t kFusedSmemBytes = 104 * 1024;
// But a stack the strip prepass would take (many crops, narrow tables) whose crops need more than
// kStripOverFusedBytes of the fused prepass's shared memory (three blocks per SM or fewer) takes the
// strip prepass, and the other stack the four-kernel path: zncc_frames' 1000 crops of 69 x 70
// (98.8 KB, two blocks per SM, 42% of issue slots busy) took 89.6 us in the fused prepass, and the
// whole ZNCC call 180.3 us against 173.1 this way; its 39 x 37 crops (34 KB, six blocks per SM) keep
// the fused prepass: 63.3 us against 99.0 through the strip (probes-archive:results/nvidia-h200/probes/
// strip-prepass-a38869d/).
constexpr size_t kStripOverFusedBytes = 64 * 1024;

// Partial sums per matrix of a crop of `elems` elements (a function of the crop's size alone, per
// stack: a crop's mean does not depend on the other stack's size).
int partials_for(int64_t elems) { return int(std::clamp<int64_t>(elems / kElemsPerPartial, 1, kMaxPartials)); }
// A ch x cw crop's whole summed-area table: (ch + 1) x (cw + 1) cells of (Σx', Σx'²).
size_t table_bytes(int ch, int cw) { return size_t(ch + 1) * size_t(cw + 1) * sizeof(double2); }
// Dynamic shared memory of fused_prepass_kernel for a ch x cw crop: the table, then the crop.
size_t fused_smem_bytes(int ch, int cw) { return table_bytes(ch, cw) + size_t(ch) * size_t(cw) * sizeof(float); }
bool fits_fused(int ch, int cw) { return fused_smem_bytes(ch, cw) <= kFusedSmemBytes; }
// The fused kernel's mean is the two-level path's with one partial (the same order, hence the
// same bits): every crop that fits it must be one for which partials_for gives 1.
static_assert(kFusedSmemBytes / (sizeof(double2) + sizeof(float)) < 2 * kElemsPerPartial,
              "a crop that fits the fused prepass would take more than one partial sum");
// The fused prepass and the segmented row pass never meet: the smallest crop with a row past kSegRow
// (1 x (kSegRow + 1)) does not fit the fused kernel, so its bits need not match a segmented row's.
static_assert(2 * size_t(kSegRow + 2) * sizeof(double2) > kFusedSmemBytes, "a segmented crop would fit the fused prepass");
// Segments per row of a stack's crop: 0 for rows that keep scan_row (fused or row_scan_kernel).
int segs_for(int cw, bool fused) { return !fused && cw > kSegRow ? ceil_div(cw, kSegCols) : 0; }
// Whether a stack's rows take the chunked row pass (scan_span_chunked): long rows, not segmented, of
// a crop that neither the fused prepass nor the strip prepass takes (the fused prepass keeps
// scan_span's order, the strip prepass takes its lane runs: scan_row_runs).
bool chunked_rows(int ch, int cw, bool strip) {
    return cw >= kLongRow && cw <= kSegRow && !fits_fused(ch, cw) && !strip;
}
// Whether a stack of the four-kernel path takes the strip prepass (above) for its row and column
// passes: count crops of ch x cw (more than one row, not segmented), tables `width` columns wide.
// `rides`: the other stack takes it, so that this one, of any count, rides along in its launch
// (its blocks beside the other's, instead of the row and column launches after them).
bool strip_prepass(int ch, int cw, int64_t count, int width, bool fused, bool rides = false) {
    return !fused && ch > 1 && ch <= kStripMaxHeight && segs_for(cw, fused) == 0 &&
           (count >= kStripMinCount || rides) && width <= kStripMaxWidth;
}
// Row bands of a stack's column pass (count crops of ch rows, tables of width columns): 1 (the
// kColSegments segments of col_scan_kernel, the fused prepass's order) for every crop that fits
// the fused prepass, so both paths keep the same bits; otherwise as many as fill about kColBlocks
// blocks, one per kBandSegRows·kColSegments rows at most. A function of the problem alone.
int col_bands_for(int ch, int cw, int64_t count, int width) {
    if (fits_fused(ch, cw)) return 1;
    const int64_t blocks = std::max<int64_t>(1, count * ceil_div(width, kWarp));
    const int64_t want = std::min<int64_t>(ceil_div(ch, kColSegments * kBandSegRows), ceil_div(kColBlocks, blocks));
    return int(std::clamp<int64_t>(want, 1, kMaxColBands));
}

// One stack as the preparing kernels see it; blockIdx.z picks the left (0) or the right (1) stack.
// Everything but x is over the crop of each matrix: rows r0 .. r0 + ch - 1, columns c0 .. c0 + cw - 1.
struct StackRef {
    const float* x;    // count x h x w inputs
    float* xs;         // count x ch x cw shifted copies x - mean of the crops
    double2* sat;      // count x (ch+1) x cols.width() tables of (Σx', Σx'²)
    double2* partial;  // count x partials partial sums of the crops: (Σx, Σ(x - x0)²), x0 = crop_first
    double* mean;      // count means of the crops
    double* var;       // count variances of the crops (zncc's constant-part scale: crop_variance)
    int count, h, w;   // the inputs' sizes (count 0: the stack is not this launch's, it does nothing)
    int r0, c0, ch, cw;  // the crop
    int partials;        // partial sums per matrix of the two-level mean (partials_for(ch·cw))
    TableColumns cols;   // the table's columns: all_columns(cw), or the epilogue's (sampled_table)
    int col_bands;       // row bands of the column pass (col_bands_for)
    // Row r of matrix m's crop, in the inputs.
    __device__ __forceinline__ const float* crop_row(int64_t m, int r) const {
        return x + (m * h + r0 + r) * int64_t(w) + c0;
    }
    // The crop's first element: the pivot x0 of the variance's partial sums (crop_variance).
    __device__ __forceinline__ double crop_first(int64_t m) const { return double(*crop_row(m, 0)); }
};
struct StackMatrix;
struct Stacks {
    StackRef left, right;
    // blockIdx.z's stack. A select, not st.s[blockIdx.z]: indexing a parameter array at run time
    // copies it to local memory.
    __device__ __forceinline__ StackRef pick() const { return blockIdx.z ? right : left; }
    // The matrices of both stacks in one sequence, lefts first (kernels with a block per matrix).
    __device__ __forceinline__ int64_t matrices() const { return int64_t(left.count) + right.count; }
    __device__ __forceinline__ StackMatrix matrix(int64_t g) const;
};
// Matrix m of stack s: the g-th of Stacks::matrices().
struct StackMatrix {
    StackRef s;
    int64_t m;
};
__device__ __forceinline__ StackMatrix Stacks::matrix(int64_t g) const {
    return g < left.count ? StackMatrix{left, g} : StackMatrix{right, g - left.count};
}

// (x - x0)² in double, the variance's term (crop_variance).
__device__ __forceinline__ double square_from(float x, double x0) {
    const double d = double(x) - x0;
    return d * d;
}

// Sum of v over the block, valid in thread 0. Called by every thread of a block of kThreads.
__device__ double block_sum(double v) {
    __shared__ double warp_sums[kThreads / kWarp];
    v = warp_sum(v);
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    __syncthreads();  // warp_sums is reused by consecutive calls
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    double total = 0;
    if (threadIdx.x == 0)
        for (int i = 0; i < kThreads / kWarp; ++i) total += warp_sums[i];
    return total;
}

// Crop row and column of element i = first, first + kThreads, ... of a crop cw columns wide (row-major
// element order): one division for the first, then kThreads / cw rows and kThreads % cw columns a
// step, with one carry. A division per element had made the kernels that walk crops this way
// issue-bound (partial_sums_kernel: 62 us for zncc_frames' 1000 crops of 188 x 148).
struct CropCursor {
    int row, col, step_r, step_c, cw;
    __device__ __forceinline__ CropCursor(int first, int cw_)
        : row(first / cw_), col(first - first / cw_ * cw_), step_r(kThreads / cw_),
          step_c(kThreads - kThreads / cw_ * cw_), cw(cw_) {}
    // The element's offset in an input whose rows are w apart (from the crop's first element).
    __device__ __forceinline__ int64_t at(int w) const { return int64_t(row) * w + col; }
    __device__ __forceinline__ void next() {
        col += step_c, row += step_r;
        if (col >= cw) col -= cw, ++row;
    }
};

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
        // that are not contiguous: probes-archive:results/nvidia-h200/probes/crop-cursor-ee6aeaf.)
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

// Inclusive warp scan of a pair of doubles (Hillis-Steele: lanes add the partial sums 1, 2, 4, 8, 16
// lanes back), explicit _rn adds in that order: the row pass (scan_span) and the segments' carries
// (seg_carry_kernel) both scan this way, as tests/test_normalize_fused.py models. All 32 lanes call it.
__device__ __forceinline__ void warp_scan_pair(double& a, double& q, int lane) {
#pragma unroll
    for (int o = 1; o < kWarp; o <<= 1) {
        const double pa = __shfl_up_sync(kFullMask, a, o), pq = __shfl_up_sync(kFullMask, q, o);
        if (lane >= o) {
            a = __dadd_rn(a, pa);
            q = __dadd_rn(q, pq);
        }
    }
}

// x' = float(x - mean), the shifted value every path writes and sums (in double, then rounded):
// its one spelling, since the paths' bits agree only while they compute it alike.
__device__ __forceinline__ float shifted(float x, double mean) { return float(__dsub_rn(double(x), mean)); }

// One crop row's shifted copy and row pass, by one warp (all 32 lanes call it): each lane takes
// one column of a 32-column strip, x' = float(x - mean) (written to xs: the raw correlation reads
// it, so the tables must hold exactly these float values), then an inclusive warp scan
// (Hillis-Steele: lanes add the partial sum 1, 2, 4, 8, 16 lanes back) of (x', x'²) in double plus
// the carry of the strips before gives store(c, Σ over columns <= c) for every c < n. Returns the
// sum of the whole span (the last carry, in every lane). Explicit _rn operations: no contraction
// into fma, so the sums are the ones tests/test_normalize_fused.py models. `x` and what `store`
// writes may be global or shared memory. scan_row (a whole row) and seg_scan_kernel (a segment of
// a long row) both use it.
template <int kStrips, class Store, bool kWriteShifted = true>
__device__ __forceinline__ double2 scan_span(const float* x, float* xs, Store store, int n, double mean, int lane) {
    double carry_a = 0, carry_q = 0;
    for (int b0 = 0; b0 < n; b0 += kStrips * kWarp) {
        // The batch's loads first (they do not depend on the carry), so that a long row's strips
        // wait for memory kStrips at a time rather than one after another.
        float raw[kStrips];
#pragma unroll
        for (int i = 0; i < kStrips; ++i) {
            const int c = b0 + i * kWarp + lane;
            raw[i] = c < n ? x[c] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < kStrips; ++i) {
            const int c = b0 + i * kWarp + lane;
            if (b0 + i * kWarp >= n) break;  // warp-uniform
            const float v = c < n ? shifted(raw[i], mean) : 0.0f;
            if constexpr (kWriteShifted)
                if (c < n) xs[c] = v;
            double a = v, q = __dmul_rn(double(v), double(v));
            warp_scan_pair(a, q, lane);
            a = __dadd_rn(a, carry_a);
            q = __dadd_rn(q, carry_q);
            if (c < n) store(c, make_double2(a, q));
            carry_a = __shfl_sync(kFullMask, a, kWarp - 1);
            carry_q = __shfl_sync(kFullMask, q, kWarp - 1);
        }
    }
    return make_double2(carry_a, carry_q);
}

// The chunked orders' prefix of a lane (scan_span_chunked, scan_row_runs): the Hillis-Steele
// inclusive scan of the lanes' totals (a, q) one lane back, +0 for lane 0, added to the carry of
// the chunks before. All 32 lanes call it.
__device__ __forceinline__ double2 lane_prefix(double a, double q, double carry_a, double carry_q, int lane) {
    warp_scan_pair(a, q, lane);
    double ea = __shfl_up_sync(kFullMask, a, 1), eq = __shfl_up_sync(kFullMask, q, 1);
    if (lane == 0) ea = 0, eq = 0;
    return make_double2(__dadd_rn(carry_a, ea), __dadd_rn(carry_q, eq));
}

// The chunked order (chunked_rows: long rows of crops past the fused and strip prepasses): chunks of
// kChunkCols = 32·kChunk columns; lane l owns the kChunk consecutive columns c = b0 + l·kChunk + j
// of a chunk and adds them in order in registers, s_j = ((+0 + v_0) + v_1) ... + v_j in double (v
// the float x', v² by __dmul_rn); one warp scan of the lanes' totals serves the chunk (scan_span
// scans every 32 columns, 8x the shuffles): E_l is the Hillis-Steele inclusive scan one lane back
// (+0 for lane 0), p = carry + E_l, entry c = p + s_j; the next chunk's carry is lane 31's
// p + s_{kChunk-1}. Global memory is read and written in scan_span's coalesced order (lane l:
// columns b0 + 32i + l) and transposed through the warp's ChunkStage in shared memory: lanes that
// load and store their own 8 columns directly sit 32 B (floats) and 128 B (double2) apart, which
// made a first version slower than scan_span (probes-archive:results/nvidia-h200/probes/chunked-rows-c6bd7c6/).
// Stage layouts, both conflict-free for the owner's accesses: x' of column k of the chunk at
// k + k / kChunk (owner lane l reads 9l + j: distinct banks), entry k at (k / kChunk)·(kChunk + 1)
// + k % kChunk (16-byte accesses, 8 lanes a phase: distinct bank quads both ways). Returns the
// span's total. tests/test_normalize_fused.py models the order.
constexpr int kChunk = 8;
constexpr int kChunkCols = kChunk * kWarp;
struct ChunkStage {
    float v[kChunkCols + kChunkCols / kChunk];
    double2 e[kWarp * (kChunk + 1)];
};
static_assert(sizeof(ChunkStage) * (kThreads / kWarp) <= 48 * 1024, "a block's stages fit static shared memory");
__device__ __forceinline__ int stage_v(int k) { return k + k / kChunk; }
__device__ __forceinline__ int stage_e(int k) { return (k / kChunk) * (kChunk + 1) + k % kChunk; }
template <class Store>
__device__ __forceinline__ double2 scan_span_chunked(const float* x, float* xs, Store store, int n, double mean,
                                                     int lane, ChunkStage& stage) {
    double carry_a = 0, carry_q = 0;
    for (int b0 = 0; b0 < n; b0 += kChunkCols) {
        float raw[kChunk];
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
            const int c = b0 + i * kWarp + lane;
            raw[i] = c < n ? x[c] : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
            const int c = b0 + i * kWarp + lane;
            const float v = c < n ? shifted(raw[i], mean) : 0.0f;
            if (c < n) xs[c] = v;
            stage.v[stage_v(i * kWarp + lane)] = v;
        }
        __syncwarp();
        double sa[kChunk], sq[kChunk];
        double a = 0, q = 0;
#pragma unroll
        for (int j = 0; j < kChunk; ++j) {
            const double v = double(stage.v[stage_v(lane * kChunk + j)]);
            a = __dadd_rn(a, v);
            q = __dadd_rn(q, __dmul_rn(v, v));
            sa[j] = a;
            sq[j] = q;
        }
        const double2 p = lane_prefix(a, q, carry_a, carry_q, lane);  // a, q: the lanes' totals
        const double pa = p.x, pq = p.y;
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            stage.e[lane * (kChunk + 1) + j] = make_double2(__dadd_rn(pa, sa[j]), __dadd_rn(pq, sq[j]));
        carry_a = __shfl_sync(kFullMask, __dadd_rn(pa, sa[kChunk - 1]), kWarp - 1);
        carry_q = __shfl_sync(kFullMask, __dadd_rn(pq, sq[kChunk - 1]), kWarp - 1);
        __syncwarp();
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
            const int c = b0 + i * kWarp + lane;
            if (c < n) store(c, stage.e[stage_e(i * kWarp + lane)]);
        }
        __syncwarp();  // the next chunk's writes to the stage wait for these reads
    }
    return make_double2(carry_a, carry_q);
}

// A whole crop row (scan_span over its cw columns): row[c + 1] = Σ over columns <= c, row[0] = 0.
// row_scan_kernel and fused_prepass_kernel: the same code, the same bits. kSampled: the table keeps
// only the columns of `cols` (sampled_table), entry cols.at(c) for column c; the same sums.
// kChunked: scan_span_chunked's order instead, through the warp's stage (chunked_rows).
// kWriteShifted false: xs is not written (the staged epilogue's rebuild of a wide crop's table from the
// shifted copy itself, with mean 0: float(x' - 0) is x', so the same values and sums).
template <int kStrips, bool kSampled = false, bool kChunked = false, bool kWriteShifted = true>
__device__ __forceinline__ void scan_row(const float* x, float* xs, double2* row, int cw, double mean, int lane,
                                         TableColumns cols = {}, ChunkStage* stage = nullptr) {
    static_assert(kWriteShifted || (!kSampled && !kChunked), "only scan_span's whole rows are rebuilt");
    auto span = [&](auto store) {
        if constexpr (kChunked) scan_span_chunked(x, xs, store, cw, mean, lane, *stage);
        else scan_span<kStrips, decltype(store), kWriteShifted>(x, xs, store, cw, mean, lane);
    };
    if constexpr (kSampled) {
        if (lane == 0 && cols.at(0) >= 0) row[cols.at(0)] = make_double2(0, 0);
        span([row, cols](int c, double2 v) {
            if (const int k = cols.at(c + 1); k >= 0) row[k] = v;
        });
    } else {
        if (lane == 0) row[0] = make_double2(0, 0);
        span([row](int c, double2 v) { row[c + 1] = v; });
    }
}

// Shifted copy and row pass of the tables (crops of rows up to kSegRow columns; longer ones take
// the segmented pass below): scan_row per crop row, one warp per row r of matrix m;
// the warp of row 0 also writes table row 0 (all 0). Invariant after it: table (r + 1, c + 1) =
// Σ over columns <= c of crop row r (kSampled: at table column cols.at(c + 1), for the columns
// kept; a stack whose cols are all_columns gets the same table as without). Mapping: warps stride
// over count·ch rows; kThreads threads, grid (blocks, 1, 2 stacks). Resources: registers only.
// kChunked: scan_row's chunked order, each warp with its ChunkStage (46 KB of static shared
// memory a block).
template <int kChunked>
__device__ __forceinline__ ChunkStage* warp_stage() {
    if constexpr (kChunked) {
        __shared__ ChunkStage stages[kThreads / kWarp];
        return stages + threadIdx.x / kWarp;
    } else {
        return nullptr;
    }
}
template <int kStrips, bool kSampled, bool kChunked = false>
__global__ void __launch_bounds__(kThreads) row_scan_kernel(Stacks st) {
    const StackRef s = st.pick();
    const int lane = threadIdx.x % kWarp;
    ChunkStage* const stage = warp_stage<kChunked>();
    const int64_t rows = int64_t(s.count) * s.ch, w1 = kSampled ? s.cols.width() : s.cw + 1;
    const int64_t warps = int64_t(gridDim.x) * (kThreads / kWarp);
    for (int64_t g = (blockIdx.x * int64_t(kThreads) + threadIdx.x) / kWarp; g < rows; g += warps) {
        const int64_t m = g / s.ch;
        const int r = int(g % s.ch);
        double2* table = s.sat + m * (s.ch + 1) * w1;
        if (r == 0)
            for (int c = lane; c < w1; c += kWarp) table[c] = make_double2(0, 0);
        scan_row<kStrips, kSampled, kChunked>(s.crop_row(m, r), s.xs + g * s.cw, table + (r + 1) * w1, s.cw,
                                              s.mean[m], lane, s.cols, stage);
    }
}

// The segmented row pass (rows of more than kSegRow columns; the same invariant as row_scan_kernel
// after its three kernels). Row g (matrix m = g / ch, crop row r = g % ch) of nseg = ceil(cw /
// kSegCols) segments, segment j its columns [j·kSegCols, min(cw, (j + 1)·kSegCols)):
//   (a) seg_scan_kernel: per segment, scan_span from 0 (the shifted copy written exactly as
//       scan_row writes it) into the table's entries of its columns, and its total T_j (the last
//       carry) into seg[g·nseg + j];
//   (b) seg_carry_kernel: per row, the exclusive scan E_j of T_0 .. T_{nseg-1} in place of them, in
//       chunks of 32 as scan_span scans strips (Hillis-Steele within the chunk, plus the chunk
//       carry), the carry compensated (two_sum: a double-double carry, E_j its sum with the chunk's
//       partial rounded once), so that E_j's error is a few u of the row's sums however many
//       segments precede it; a plain running carry erred by up to (segments)·u of them, and
//       zncc_factor's bound of the tables' rounding would have grown with the signal's length;
//   (c) seg_add_kernel: every entry of segment j >= 1 gets E_j added (segment 0's entries are final).
// So entry c of segment j = local inclusive sum of the segment up to c + E_j: a fixed order, a
// function of the problem alone (tests/test_normalize_fused.py models it and checks that every
// entry is written once per kernel and every segment counted once).
struct SegScratch {
    double2 *left, *right;  // count·ch·nseg segment totals (then carries) per stack
    __device__ __forceinline__ double2* pick() const { return blockIdx.z ? right : left; }
};
__device__ __forceinline__ int segs_of(int cw) { return (cw + kSegCols - 1) / kSegCols; }

// (a) Mapping: one warp per (row g, segment j), index g·nseg + j, warps striding over count·ch·nseg;
// kThreads threads, grid (blocks, 1, 2 stacks). The warp of crop row 0 also zeroes table row 0's
// cells [j·kSegCols, (j + 1)·kSegCols) (the last segment's through cw), the warp of segment 0 the
// row's cell 0. Resources: registers only.
__global__ void seg_scan_kernel(Stacks st, SegScratch scratch) {
    const StackRef s = st.pick();
    double2* const seg = scratch.pick();
    const int lane = threadIdx.x % kWarp;
    const int nseg = segs_of(s.cw);
    const int64_t total = int64_t(s.count) * s.ch * nseg, w1 = s.cw + 1;
    const int64_t warps = int64_t(gridDim.x) * (kThreads / kWarp);
    for (int64_t i = (blockIdx.x * int64_t(kThreads) + threadIdx.x) / kWarp; i < total; i += warps) {
        const int64_t g = i / nseg, m = g / s.ch;
        const int j = int(i % nseg), r = int(g % s.ch);
        const int c0 = j * kSegCols, n = min(kSegCols, s.cw - c0);
        double2* table = s.sat + m * (s.ch + 1) * w1;
        if (r == 0)
            for (int c = c0 + lane; c < (j == nseg - 1 ? s.cw + 1 : c0 + kSegCols); c += kWarp)
                table[c] = make_double2(0, 0);
        double2* row = table + (r + 1) * w1;
        if (j == 0 && lane == 0) row[0] = make_double2(0, 0);
        double2* const out = row + 1 + c0;
        const double2 t = scan_span<kRowStrips>(s.crop_row(m, r) + c0, s.xs + g * s.cw + c0,
                                                [out](int c, double2 v) { out[c] = v; }, n, s.mean[m], lane);
        if (lane == 0) seg[i] = t;
    }
}

// Knuth's two_sum: s + e = a + b exactly, s = a + b rounded (explicit _rn: no contraction).
__device__ __forceinline__ double two_sum(double a, double b, double& e) {
    const double s = __dadd_rn(a, b), bb = __dsub_rn(s, a);
    e = __dadd_rn(__dsub_rn(a, __dsub_rn(s, bb)), __dsub_rn(b, bb));
    return s;
}
// The double-double carry (hi, lo) plus x, rounded once to a double: s + (e + lo) with s + e =
// hi + x exactly (tests/test_normalize_fused.py models the same operations).
__device__ __forceinline__ double carry_add(double hi, double lo, double x) {
    double e;
    const double s = two_sum(hi, x, e);
    return __dadd_rn(s, __dadd_rn(e, lo));
}
// The carry (hi, lo) += x: hi the rounded sum, lo the exact rounding errors accumulated.
__device__ __forceinline__ void carry_step(double& hi, double& lo, double x) {
    double e;
    hi = two_sum(hi, x, e);
    lo = __dadd_rn(lo, e);
}

// (b) Mapping: one warp per row g, warps striding over count·ch rows; the warp loads kSegBatch
// chunks of 32 totals (lanes past nseg load 0: they come after every real one) before scanning them
// in order. Resources: registers only.
__global__ void seg_carry_kernel(Stacks st, SegScratch scratch) {
    const StackRef s = st.pick();
    double2* const seg = scratch.pick();
    const int lane = threadIdx.x % kWarp;
    const int nseg = segs_of(s.cw);
    const int64_t rows = int64_t(s.count) * s.ch;
    const int64_t warps = int64_t(gridDim.x) * (kThreads / kWarp);
    for (int64_t g = (blockIdx.x * int64_t(kThreads) + threadIdx.x) / kWarp; g < rows; g += warps) {
        double2* t = seg + g * nseg;
        double carry_a = 0, carry_q = 0, low_a = 0, low_q = 0;  // the carry: carry + low, double-double
        for (int b0 = 0; b0 < nseg; b0 += kSegBatch * kWarp) {
            double2 v[kSegBatch];
#pragma unroll
            for (int i = 0; i < kSegBatch; ++i) {
                const int j = b0 + i * kWarp + lane;
                v[i] = j < nseg ? t[j] : make_double2(0, 0);
            }
#pragma unroll
            for (int i = 0; i < kSegBatch; ++i) {
                const int j = b0 + i * kWarp + lane;
                if (b0 + i * kWarp >= nseg) break;  // warp-uniform
                double a = v[i].x, q = v[i].y;
                warp_scan_pair(a, q, lane);
                // Exclusive: segment j's carry is the chunk carry plus the chunk's inclusive sum
                // through j - 1 (nothing for lane 0), rounded once.
                double ea = __shfl_up_sync(kFullMask, a, 1), eq = __shfl_up_sync(kFullMask, q, 1);
                if (lane == 0) ea = 0, eq = 0;
                if (j < nseg) t[j] = make_double2(carry_add(carry_a, low_a, ea), carry_add(carry_q, low_q, eq));
                carry_step(carry_a, low_a, __shfl_sync(kFullMask, a, kWarp - 1));
                carry_step(carry_q, low_q, __shfl_sync(kFullMask, q, kWarp - 1));
            }
        }
    }
}

// (c) Mapping: one block per (row g, segment j >= 1), index g·(nseg - 1) + j - 1, blocks striding
// over count·ch·(nseg - 1); its threads stride over the segment's columns (coalesced double2).
// Resources: registers only.
__global__ void seg_add_kernel(Stacks st, SegScratch scratch) {
    const StackRef s = st.pick();
    const double2* const seg = scratch.pick();
    const int nseg = segs_of(s.cw);
    const int64_t total = int64_t(s.count) * s.ch * (nseg - 1), w1 = s.cw + 1;
    for (int64_t i = blockIdx.x; i < total; i += gridDim.x) {
        const int64_t g = i / (nseg - 1), m = g / s.ch;
        const int j = 1 + int(i % (nseg - 1)), r = int(g % s.ch);
        const double2 e = seg[g * nseg + j];
        double2* row = s.sat + m * (s.ch + 1) * w1 + (r + 1) * w1 + 1;
        for (int c = j * kSegCols + threadIdx.x; c < min(s.cw, (j + 1) * kSegCols); c += kThreads) {
            const double2 v = row[c];
            row[c] = make_double2(__dadd_rn(v.x, e.x), __dadd_rn(v.y, e.y));
        }
    }
}

// Column pass of 32 adjacent columns c (< w1 counts) of one table of ch + 1 rows (row stride w1),
// by kColSegments warps (all kThreads threads call it: it holds barriers). After the row pass
// table (r, c) holds row sums; adding them down each column makes table (r, c) = Σ over rows < r,
// columns < c (the summed-area table). Each column's rows 1..ch are cut into kColSegments segments
// of ceil(ch / kColSegments) rows, segment `seg` (the warp) of column c (the lane): pass 1 adds
// the segment's rows in order to 0, the segment totals before it (seg_total) are added in order
// to 0 to give its start, pass 2 adds the rows in order to it and writes the running sums. A warp
// reads 32 adjacent columns of one row (coalesced, or no bank conflicts in shared memory). Shared
// by col_scan_kernel (global tables) and fused_prepass_kernel (in shared memory): the same bits.
// Adds rows r0 .. r1 - 1 of column c to acc in order; kWrite: each entry becomes the running sum.
// kBatch rows are loaded before they are added (the same sums): a tall column's rows then wait for
// memory a batch at a time, not one after another.
template <int kBatch, bool kWrite>
__device__ __forceinline__ void add_down(double2* table, int r0, int r1, int w1, int c, double2& acc) {
    for (int b = r0; b < r1; b += kBatch) {
        double2 v[kBatch];
#pragma unroll
        for (int i = 0; i < kBatch; ++i)
            if (b + i < r1) v[i] = table[int64_t(b + i) * w1 + c];
#pragma unroll
        for (int i = 0; i < kBatch; ++i)
            if (b + i < r1) {
                acc.x = __dadd_rn(acc.x, v[i].x);
                acc.y = __dadd_rn(acc.y, v[i].y);
                if constexpr (kWrite) table[int64_t(b + i) * w1 + c] = acc;
            }
    }
}

template <int kBatch>
__device__ __forceinline__ void scan_columns(double2* table, int ch, int w1, int c, int seg,
                                             double2 (*seg_total)[kWarp]) {
    const int lane = threadIdx.x % kWarp;
    const int len = (ch + kColSegments - 1) / kColSegments;
    const int r0 = 1 + seg * len, r1 = min(ch + 1, r0 + len);
    double2 acc = make_double2(0, 0);
    if (c < w1) add_down<kBatch, false>(table, r0, r1, w1, c, acc);
    __syncthreads();  // seg_total is reused by the next call
    seg_total[seg][lane] = acc;
    __syncthreads();
    double2 run = make_double2(0, 0);
    for (int i = 0; i < seg; ++i) {
        run.x = __dadd_rn(run.x, seg_total[i][lane].x);
        run.y = __dadd_rn(run.y, seg_total[i][lane].y);
    }
    if (c < w1) add_down<kBatch, true>(table, r0, r1, w1, c, run);
}

// Column pass of the tables (scan_columns), of whichever columns they keep (cols.width(): cw + 1
// or the sampled ones; the same sums per column). Mapping: block (32 columns, kColSegments
// segments) flattened to kThreads threads, grid (ceil(width / 32), min(count, 65535), 2 stacks),
// blockIdx.y striding over the matrices. Resources: 32 x 8 x 16 bytes of shared memory.
template <int kBatch>
__global__ void col_scan_kernel(Stacks st) {
    const StackRef s = st.pick();
    __shared__ double2 seg_total[kColSegments][kWarp];
    const int c = blockIdx.x * kWarp + threadIdx.x % kWarp, seg = threadIdx.x / kWarp;
    const int w1 = s.cols.width();
    for (int m = blockIdx.y; m < s.count; m += gridDim.y)
        scan_columns<kBatch>(s.sat + int64_t(m) * (s.ch + 1) * w1, s.ch, w1, c, seg, seg_total);
}

// The banded column pass (col_bands_for > 1): the same sums as scan_columns with S = kColSegments ·
// bands segments of len = ceil(ch / S) rows instead of kColSegments: segment s of column c holds
// rows 1 + s·len .. min(ch, (s + 1)·len); its entries are (Σ_{i<s} T_i in order from 0) + its rows in
// order, T_i = segment i's rows added in order to 0. Two kernels, so a segment's start need not wait
// inside one block: col_totals_kernel writes every T_i (total[(m·S + s)·width + c]), then
// col_band_scan_kernel adds them up and writes the running sums. Mapping of both: block (32 columns,
// kColSegments warps), warp w of band b the segment s = b·kColSegments + w; grid (ceil(width / 32),
// min(count·bands, 65535), 2 stacks), blockIdx.y striding over (matrix m, band b) = divmod(i, bands).
// Resources: registers only.
struct ColScratch {
    double2 *left, *right;  // count·S·width segment totals per stack
    __device__ __forceinline__ double2* pick() const { return blockIdx.z ? right : left; }
};
struct ColSegment {
    int64_t m;   // the matrix
    int seg, S;  // the segment of this warp, of S
    int r0, r1;  // its rows [r0, r1) of the table (row 0 is the zero row)
};
__device__ __forceinline__ ColSegment col_segment(const StackRef& s, int64_t i) {
    const int S = s.col_bands * kColSegments, len = (s.ch + S - 1) / S;
    ColSegment g;
    g.m = i / s.col_bands;
    g.S = S;
    g.seg = int(i % s.col_bands) * kColSegments + int(threadIdx.x) / kWarp;
    g.r0 = min(s.ch + 1, 1 + g.seg * len);
    g.r1 = min(s.ch + 1, g.r0 + len);
    return g;
}

template <int kBatch>
__global__ void col_totals_kernel(Stacks st, ColScratch scratch) {
    const StackRef s = st.pick();
    double2* const total = scratch.pick();
    const int c = blockIdx.x * kWarp + threadIdx.x % kWarp, w1 = s.cols.width();
    if (c >= w1) return;  // no barriers here
    for (int64_t i = blockIdx.y; i < int64_t(s.count) * s.col_bands; i += gridDim.y) {
        const ColSegment g = col_segment(s, i);
        double2 acc = make_double2(0, 0);
        add_down<kBatch, false>(s.sat + g.m * (s.ch + 1) * w1, g.r0, g.r1, w1, c, acc);
        total[(g.m * g.S + g.seg) * w1 + c] = acc;
    }
}

template <int kBatch>
__global__ void col_band_scan_kernel(Stacks st, ColScratch scratch) {
    const StackRef s = st.pick();
    const double2* const total = scratch.pick();
    const int c = blockIdx.x * kWarp + threadIdx.x % kWarp, w1 = s.cols.width();
    if (c >= w1) return;
    for (int64_t i = blockIdx.y; i < int64_t(s.count) * s.col_bands; i += gridDim.y) {
        const ColSegment g = col_segment(s, i);
        // The totals before this segment, kBatch loads at a time, added in order to 0.
        const double2* t = total + g.m * g.S * w1 + c;
        double2 run = make_double2(0, 0);
        for (int j0 = 0; j0 < g.seg; j0 += kBatch) {
            double2 v[kBatch];
#pragma unroll
            for (int k = 0; k < kBatch; ++k)
                if (j0 + k < g.seg) v[k] = t[int64_t(j0 + k) * w1];
#pragma unroll
            for (int k = 0; k < kBatch; ++k)
                if (j0 + k < g.seg) {
                    run.x = __dadd_rn(run.x, v[k].x);
                    run.y = __dadd_rn(run.y, v[k].y);
                }
        }
        add_down<kBatch, true>(s.sat + g.m * (s.ch + 1) * w1, g.r0, g.r1, w1, c, run);
    }
}

// The strip prepass's row order (lane runs): scan_span_chunked's order with k = lane_run(cw) for
// kChunk, k a function of the crop's width: chunks of 32·k columns, lane l owning the k consecutive
// columns b0 + l·k + j, s_j = ((+0 + v_0) + v_1) ... + v_j in double, one warp scan of the lanes'
// totals per chunk, p = carry + (that scan one lane back, +0 for lane 0), entry p + s_j, the next
// carry lane 31's p + s_{k-1} (tests/test_normalize_fused.py models both with one function). Rows
// of up to 192 columns take one chunk: one warp scan a row where scan_span's order takes one per 32
// columns (its shuffles made the strip prepass issue-bound: probes-archive:results/nvidia-h200/probes/
// strip-prepass-a38869d/). kLaneRunMax = 6 keeps the kernel at 64 registers, 4 blocks per SM (8: 80
// registers, 3 blocks, slower). A lane reads and writes its run directly (k <= 6 floats 4·k bytes
// apart: the short rows of this kernel, the loads cached; its table row is in shared memory), and
// adds its run twice, for the total before the warp scan and for the entries after it: the same
// sums from +0, so the same bits as keeping them, in k float registers instead of 2k doubles.
// Columns past the span add nothing (+0 to a sum that is never -0 leaves it unchanged, as the
// model's zeros do).
constexpr int kLaneRunMax = 6;
__device__ __forceinline__ int lane_run(int cw) { return min((cw + kWarp - 1) / kWarp, kLaneRunMax); }
// One lane's run of a chunk, loaded (its k <= kLaneRunMax columns from b0 + lane·k, those < n).
struct RunChunk {
    float v[kLaneRunMax];
    __device__ __forceinline__ void load(const float* x, int b0, int n, int k, int lane) {
        const int c0 = b0 + lane * k, m = min(k, n - c0);
#pragma unroll
        for (int j = 0; j < kLaneRunMax; ++j)
            if (j < m) v[j] = x[c0 + j];
    }
};
// scan_row in the lane-run order: row[0] (or the sampled table's column 0) = 0, row[c + 1] = Σ over
// columns <= c (kSampled: entry cols.at(c + 1) where there is one, as scan_row keeps them).
template <bool kSampled>
__device__ __forceinline__ void scan_row_runs(const float* x, float* xs, double2* row, int cw, int k, double mean,
                                              int lane, TableColumns cols) {
    auto store = [row, cols](int c, double2 v) {  // column c's entry: table column c + 1
        if constexpr (kSampled) {
            if (const int t = cols.at(c + 1); t >= 0) row[t] = v;
        } else {
            row[c + 1] = v;
        }
    };
    if (lane == 0) {
        if constexpr (kSampled) {
            if (cols.at(0) >= 0) row[cols.at(0)] = make_double2(0, 0);
        } else {
            row[0] = make_double2(0, 0);
        }
    }
    double carry_a = 0, carry_q = 0;
    for (int b0 = 0; b0 < cw; b0 += k * kWarp) {
        RunChunk r;
        r.load(x, b0, cw, k, lane);
        const int c0 = b0 + lane * k, m = min(k, cw - c0);  // this lane's columns c0 .. c0 + m - 1
        double a = 0, q = 0;
#pragma unroll
        for (int j = 0; j < kLaneRunMax; ++j)
            if (j < m) {
                r.v[j] = shifted(r.v[j], mean);
                xs[c0 + j] = r.v[j];
                const double d = r.v[j];
                a = __dadd_rn(a, d);
                q = __dadd_rn(q, __dmul_rn(d, d));
            }
        const double2 p = lane_prefix(a, q, carry_a, carry_q, lane);
        const double pa = p.x, pq = p.y;
        double sa = 0, sq = 0;
#pragma unroll
        for (int j = 0; j < kLaneRunMax; ++j)
            if (j < m) {
                const double d = r.v[j];
                sa = __dadd_rn(sa, d);
                sq = __dadd_rn(sq, __dmul_rn(d, d));
                store(c0 + j, make_double2(__dadd_rn(pa, sa), __dadd_rn(pq, sq)));
            }
        carry_a = __shfl_sync(kFullMask, __dadd_rn(pa, a), kWarp - 1);
        carry_q = __shfl_sync(kFullMask, __dadd_rn(pq, q), kWarp - 1);
    }
}

// The strip prepass (strip_prepass): the row and column passes of one matrix's table in one block,
// kStripRows rows at a time. Per strip, warp w runs scan_row_runs over crop row r0 + w (the lane-run
// order above; the shifted copy written to xs) into row w of a shared strip buffer (kStripRows x
// width double2); then thread c of the table's width adds the strip's rows in order to its
// column's running sum (a shared carry, +0 at first) and writes each sum to the table: entry
// (r, c) = (((+0 + row 1) + row 2) ... + row r) down the column from the top, in double. So a table
// is written once, never read back here. Table row 0 is 0. The means come from
// partial_sums_kernel and means_kernel before it (the four-kernel path's bits).
// tests/test_normalize_fused.py models it. Mapping: blocks striding over the matrices of both
// stacks (lefts first; a stack of count 0 is not this launch's), kThreads threads. Resources:
// dynamic shared memory (kStripRows + 1) x width double2 (<= 9 x 384 x 16 = 54 KB; set by the
// Normalizer when past 48 KB).
template <bool kSampled>
__global__ void __launch_bounds__(kThreads) strip_prepass_kernel(Stacks st) {
    extern __shared__ double2 strip[];  // kStripRows rows of `width`, then the column carries
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    for (int64_t g = blockIdx.x; g < st.matrices(); g += gridDim.x) {
        const auto [s, m] = st.matrix(g);
        const int width = s.cols.width();
        double2* const carry = strip + kStripRows * width;
        double2* const table = s.sat + m * (s.ch + 1) * int64_t(width);
        const double mean = s.mean[m];
        for (int c = threadIdx.x; c < width; c += kThreads) {
            carry[c] = make_double2(0, 0);
            table[c] = make_double2(0, 0);
        }
        const int run = lane_run(s.cw);
        for (int r0 = 0; r0 < s.ch; r0 += kStripRows) {
            const int rows = min(kStripRows, s.ch - r0);
            __syncthreads();  // the previous strip's buffer is read (and the carries set)
            if (warp < rows)
                scan_row_runs<kSampled>(s.crop_row(m, r0 + warp), s.xs + (m * s.ch + r0 + warp) * s.cw,
                                        strip + warp * width, s.cw, run, mean, lane, s.cols);
            __syncthreads();  // the strip's rows are in shared memory
            for (int c = threadIdx.x; c < width; c += kThreads) {
                double2 acc = carry[c];
                for (int k = 0; k < rows; ++k) {
                    const double2 v = strip[k * width + c];
                    acc.x = __dadd_rn(acc.x, v.x);
                    acc.y = __dadd_rn(acc.y, v.y);
                    table[int64_t(r0 + k + 1) * width + c] = acc;
                }
                carry[c] = acc;
            }
        }
        __syncthreads();  // the next matrix's carries and strips overwrite these
    }
}
size_t strip_smem_bytes(int width) { return size_t(kStripRows + 1) * size_t(width) * sizeof(double2); }

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

// One table row from one crop row of the shifted copy, by one thread: row[0] = 0 and
// row[c + 1] = (Σ x', Σ x'²) over columns <= c, added in column order from +0 (x'² by __dmul_rn,
// exact for a float; no contraction). The staged epilogue's rebuild of narrow crops (at most
// kSeqRowCols columns): a fixed order of its own, not scan_row's (tests/test_normalize_fused.py:
// seq_row). The loads are batched ahead of the dependent adds.
constexpr int kSeqRowCols = 64;
__device__ __forceinline__ void seq_row(const float* x, double2* row, int cw) {
    double a = 0, q = 0;
    row[0] = make_double2(0, 0);
    int c = 0;
    for (; c + 4 <= cw; c += 4) {
        float v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = x[c + i];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const double d = v[i];
            a = __dadd_rn(a, d);
            q = __dadd_rn(q, __dmul_rn(d, d));
            row[c + i + 1] = make_double2(a, q);
        }
    }
    for (; c < cw; ++c) {
        const double d = x[c];
        a = __dadd_rn(a, d);
        q = __dadd_rn(q, __dmul_rn(d, d));
        row[c + 1] = make_double2(a, q);
    }
}

// The staged epilogue's copies into shared memory, by the whole block: several loads per thread in
// flight before their stores (one at a time, each thread waited on DRAM ~6 times per output for the
// left crop alone). kReadOnly: through the read-only cache (__ldg), for what the kernel never
// writes; not the raw outputs, which it overwrites.
template <class T, bool kReadOnly = true>
__device__ __forceinline__ void stage_copy(T* dst, const T* __restrict__ src, int n) {
    constexpr int kAhead = sizeof(T) <= 4 ? 4 : 2;  // 16 or 32 bytes a thread (64 registers at most)
    for (int i0 = threadIdx.x; i0 < n; i0 += kAhead * blockDim.x) {
        T v[kAhead];
#pragma unroll
        for (int u = 0; u < kAhead; ++u)
            if (const int i = i0 + u * blockDim.x; i < n) v[u] = kReadOnly ? __ldg(src + i) : src[i];
#pragma unroll
        for (int u = 0; u < kAhead; ++u)
            if (const int i = i0 + u * blockDim.x; i < n) dst[i] = v[u];
    }
}

// C' at shift (dy, dx) of two crops (L' of lh x lw, R' of rh x rw) whose overlap has at most
// kDirectOverlap elements, by a whole warp: lane t takes the overlap's elements t and t + 32 in
// row-major order (each product of two floats exact in double), then a butterfly over the lanes
// (__shfl_xor_sync: a + b and b + a are the same double, so every lane ends with the same total).
// A fixed order of its own (raw_at's sequential sum in one thread kept its block waiting on up to
// 64 dependent loads, a quarter of the staged epilogue's instructions on zncc_frames).
static_assert(kDirectOverlap <= 2 * kWarp, "warp_direct_sum: two elements per lane");
__device__ __forceinline__ double warp_direct_sum(const float* L, const float* R, int lh, int lw, int rh, int rw,
                                                  int dy, int dx, int lane) {
    const Span rows = overlap_span(dy, lh, rh), cols = overlap_span(dx, lw, rw);
    const int nc = cols.end - cols.begin, n = (rows.end - rows.begin) * nc;
    // t / nc as ⌊(t + 1/2)·(1/nc)⌋ in float: exact for t < 2·32 (the quotient is at least 1/(2·nc)
    // from an integer, the rounding error under 1e-5), where an integer division took ~25
    // instructions per element.
    const float rnc = 1.0f / float(nc);
    double s = 0;
    for (int t = lane; t < n; t += kWarp) {
        const int dr = int((float(t) + 0.5f) * rnc);
        const int r = rows.begin + dr, c = cols.begin + t - dr * nc;
        s = __dadd_rn(s, __dmul_rn(double(L[int64_t(r + dy) * lw + c + dx]), double(R[int64_t(r) * rw + c])));
    }
#pragma unroll
    for (int o = kWarp / 2; o > 0; o /= 2) s = __dadd_rn(s, __shfl_xor_sync(kFullMask, s, o));
    return s;
}

// (Σx', Σx'²) over rows [r0, r1), columns [c0, c1) of one matrix's table (row stride w1), and
// `corner`, the Σx'² entry of the box's far corner (r1, c1): the largest of the four entries read
// (Σx'² over rows < r1, columns < c1), which bounds their rounding (zncc_factor).
// From global memory through the read-only cache (__ldg): the epilogue writes `out` in place, so
// the compiler cannot prove by itself that the tables do not alias it; kShared: a table staged in
// shared memory (plain loads). The same four entries and the same arithmetic either way.
// Row 0 of a table is zero (the sums over no row), and where a box starts there (every box of a
// one-row crop) its two entries of that row are read at cell (0, 0), one address for the whole
// warp, instead of a line per warp each: half the table traffic of one-dimensional signals. (A
// select of zero in place of the loads cost the sampled instantiation spills at 64 registers.)
template <bool kShared>
__device__ __forceinline__ double2 box_sum(const double2* t, int64_t w1, int r0, int r1, int c0, int c1,
                                           double& corner) {
    auto ld = [](const double2* p) {
        if constexpr (kShared) return *p;
        else return __ldg(p);
    };
    const double2* t0 = t + r0 * w1;
    const double2* t1 = t + r1 * w1;
    const bool row0 = r0 == 0;
    const double2 a = ld(t1 + c1), b = ld(t0 + (row0 ? 0 : c1)), c = ld(t1 + c0), d = ld(t0 + (row0 ? 0 : c0));
    corner = a.y;
    return make_double2(a.x - b.x - c.x + d.x, a.y - b.y - c.y + d.y);
}

// The .y of a table entry, loaded where it is used (see the staged epilogue's corner).
__device__ __forceinline__ double reload_y(const double2* p) { return reinterpret_cast<const volatile double2*>(p)->y; }

// zncc's factor of one side of an overlap of n elements from its shifted sums s = (ΣX', ΣX'²),
// X' = X - m: f = n·ΣX'² - (ΣX')² (n² times the part's variance; the shift leaves it unchanged), and
// whether X varies there. The one spelling of that test on the GPU; two conditions:
// - the contract's constant-part test: the part's variance f / n² above kConstantOverlap times the
//   variance `var` of its crop (crop_variance; the crop is the whole matrix unless the window
//   touches less of it: docs/CONVENTIONS.md says what that reading changes), i.e. f > 1e-6·n²·var.
//   Relative to the spread, never to the magnitude: 1000 + noise varies as noise does;
// - f above the rounding of the tables it comes from. An exactly constant overlap (zeros: X' = -m,
//   the same float everywhere) has f = 0 and ΣX² = n·X², but both come out of the box sums as
//   rounding noise of the table's far larger entries, and the first test alone let about half of
//   such overlaps through with a noise coefficient up to ±1 (zero-padded data, session 35). A table
//   entry at (r, c) is a sum of r·c terms, each row's by the row pass, then the rows' by the column
//   pass: any such tree rounds by at most (r + c)·u·Σ|terms|, u = 2^-53 (first order); a segmented
//   row's entry (rows past kSegRow columns) by at most (r + kSegRowDepth)·u·Σ|terms|, its carry
//   being compensated (seg_carry_kernel), so the caller passes c1 capped at that depth. The box's
//   four entries and three additions: at most e2 = k·corner for ΣX'² (its terms are squares, so
//   Σ|terms| is the corner itself) and e1 = k·sqrt(r1·c1·corner) for ΣX' (Cauchy-Schwarz: Σ|x'| <=
//   sqrt(count·Σx'²)), k = 4(r1 + c1 + 3)·u. f's error from them is at most n·e2 + 2|ΣX'|·e1 (+ e1²
//   and f's own rounding, within the factor 2 of kTableEps = 2u). So X varies only where f - n·e2 >
//   2|ΣX'|·e1, squared to need no root (g² > 4·ΣX'²·e1²: every term is a float's square times counts,
//   inside double's range for any float data). What it costs: an overlap of local standard
//   deviation s in a crop of P elements of global standard deviation S is called constant only
//   where s²·n <~ 3k·P·S², k·P ~ 1.5e-5 for a 2048 x 2048 crop and for a signal of 8.64e6 samples
//   (s below 1.7e-3 of S for n = 16, 2.7e-4 for n = 600): far below what the float32 raw correlation of
//   the shifted data resolves there. tests/xcorr_np.py's table_zncc_factor is the same test in NumPy.
struct ZnccFactor {
    double f;
    bool varies;
};
constexpr double kTableEps = 0x1p-52;  // 2u: the factor 2 covers f's own rounding and e1²
__device__ __forceinline__ ZnccFactor zncc_factor(double2 s, double corner, int r1, int c1, double n, double var) {
    const double f = n * s.y - s.x * s.x;
    const double k = kTableEps * (4.0 * (r1 + c1 + 3)), e2 = k * corner;
    const double g = f - n * e2;
    return {f, f > kConstantOverlap * n * n * var && g > 0 && g * g > 4 * (s.x * s.x) * k * (double(r1) * c1) * e2};
}

// What the epilogue reads: the tables, means and shifted copies of the crops (count x h x w of
// each crop: lh x lw for the lefts, rh x rw for the rights), the crops' origins in the inputs, the
// inputs' sizes (the overlaps), C(0, 0) per output (zero-lag).
struct EpilogueArgs {
    float* out;
    const double2 *lsat, *rsat;
    const double *lmean, *rmean, *c00;
    const double *lvar, *rvar;  // the crops' variances (zncc_factor)
    const float *ls, *rs;
    int hL, wL, hR, wR;
    int lr0, lc0, lh, lw, rr0, rc0, rh, rw;
    TableColumns lcols, rcols;  // the tables' columns (kSampled; all_columns otherwise)
    int ldepth, rdepth;  // zncc_factor's row-pass depth cap: kSegRowDepth for segmented rows, else INT_MAX
    Window win;
    FastDiv out_w;  // division by the output's width: element -> row
    PairMap pairs;
    int64_t count;  // output matrices
    bool rebuild_left;  // kStaged: each left table built in shared memory from ls (Prepass::rebuild_left)
    bool stage_out;     // kStaged: each output's raw values staged in shared memory first (stage_outputs)
};

// The epilogue of both normalizations. Algorithm: for output element (y, x) of output k, shift
// (dy, dx) = (dy0 + y, dx0 + x), pair (left l, right q): the overlap's rows and columns (of the
// inputs), its n and its (ΣL', ΣL'²), (ΣR', ΣR'²) from four table entries each, at the overlap's
// place in the crops (it lies inside both: normalize_crop.hpp); C' = the raw output (or a direct
// double sum over the crops L', R' at the translated shift when n <= kDirectOverlap); then, in
// double,
//   zncc: the coefficient (n·C' - ΣL'·ΣR') / sqrt(fL·fR), f = n·ΣX'² - (ΣX')², clamped to [-1, 1]
//     (Pearson's range; rounding can step past it), or 0 where n = 0 or a factor is at most
//     1e-6·n·ΣX² of the original data, ΣX² = ΣX'² + 2m·ΣX' + n·m² (the contract; exact for any m);
//   zero-lag: C = C' + mR·ΣL' + mL·ΣR' + n·mL·mR (the raw sum of the original data, since
//     X = X' + m), divided by C(0, 0) of the pair; 0 where n = 0 or C(0, 0) = 0.
// In place: each thread reads and writes only its own element. Mapping: blockIdx.x strides over the
// outputs (l, q and the table bases uniform per block), the warps of blockIdx.y stride over the
// elements of one output, 32 consecutive ones a warp, every lane in every iteration (the direct
// sums take the whole warp), in 32-bit arithmetic (oh·ow <= 2^30 by Problem::check; a 64-bit division
// per element was most of the old one-dimensional mapping's index cost). The output is the fast
// grid index so that the blocks in flight together cover one stretch of elements of many outputs:
// where outputs share a table (one-to-many: every template against one trace), that stretch of it
// is read from DRAM once and from L2 by the rest, instead of the whole table streaming once per
// output (matched filtering: 300 passes over a 276 MB table of an 8.64 M-sample trace when the
// elements were the fast index). Resources: registers only; reads 8 double2 of the tables per
// element.
// kStaged (use_staged_epilogue: small tables, many outputs, each table entry read several times):
// gridDim.y = 1, and the block first copies its output's two tables (left then right, coalesced
// double2) and its two shifted crops (floats) into dynamic shared memory, staged_smem_bytes, and
// reads them there: each table crosses L2 once per output instead of once per block of 256
// elements and per L1 miss (zncc_frames: 32 KB per output against ~55 KB), the 8 reads per element
// are shared-memory loads, and so are the direct sums' (n <= kDirectOverlap: up to 2 x 64 dependent
// global loads per element in a few threads had kept their whole block waiting). The copies of
// the right table and crop are skipped when the block's previous output had the same right (n-to-m
// with one template: once per block). With a.stage_out (stage_outputs: outputs of at most
// kStagedOutBytes) the output's raw values are copied too, after the crops, so that their loads
// are in flight with the crop's. With a.rebuild_left (Prepass::rebuild_left: the left crops
// take the fused prepass) the left table is not copied but built in place from the staged left
// crop: crops of at most kSeqRowCols columns one thread per row (seq_row) and then one thread per
// column (add_down), wider ones a warp per row (scan_row with mean 0, the fused prepass's own code
// and bits) and then scan_columns; from a quarter of the table's bytes (float against double2), and
// the prepass writes none. Static shared
// memory: 4 KB of scan_columns' segment totals. The same entries and the same source arithmetic
// as unstaged (each path deterministic; across the two the bits agree where the tables do, unless
// the compiler contracts the two instantiations' double expressions differently, which nothing
// here relies on).
// kSampled (sampled_table: a window of a few shifts on large crops): the tables keep only the
// columns the epilogue reads (lcols, rcols), and a crop column c is table column cols.at(c); the
// same entries' values, so the same bits as the whole tables give. Never staged.
// Launch bounds: at most 64 registers, four blocks of kThreads per SM. Unbounded, the sampled
// instantiation took 96 (two blocks per SM, a quarter of the warps): too few in flight to hide the
// eight dependent table reads per element, so the kernel waited on latency, not on DRAM.
template <Normalize kMode, bool kStaged, bool kSampled = false>
__global__ void __launch_bounds__(kThreads, 4) epilogue_kernel(const EpilogueArgs a) {
    static_assert(!(kStaged && kSampled), "the sampled tables are read from global memory");
    extern __shared__ double2 staged[];  // kStaged: the left table, then the right one
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    const int ow = int(a.win.out_w()), per = int(a.win.out_h()) * ow;
    const int64_t lw1 = kSampled ? a.lcols.width() : a.lw + 1, rw1 = kSampled ? a.rcols.width() : a.rw + 1;
    auto lcol = [&a](int c) { return kSampled ? a.lcols.at(c) : c; };
    auto rcol = [&a](int c) { return kSampled ? a.rcols.at(c) : c; };
    const int ty = a.rr0 - a.lr0, tx = a.rc0 - a.lc0;  // shift on the crops = shift + (ty, tx)
    // kStaged: the tables' cells (they fit in shared memory, so int); unused (0) otherwise.
    const int lcells = kStaged ? (a.lh + 1) * int(lw1) : 0, rcells = kStaged ? (a.rh + 1) * int(rw1) : 0;
    int staged_right = -1;  // the right whose table is in staged[lcells..]
    for (int64_t k = blockIdx.x; k < a.count; k += gridDim.x) {
        // int: PairMap's own type (a sign-extended int64 copy of one, kept across the element loop,
        // was the staged zncc instantiation's one spill at 64 registers)
        const int l = a.pairs.left_of(k), q = a.pairs.right_of(k);
        const double2* lsat = a.lsat + int64_t(l) * (a.lh + 1) * lw1;
        const double2* rsat = a.rsat + int64_t(q) * (a.rh + 1) * rw1;
        // The shifted crops (the direct sums read them): in global memory, or (kStaged) staged as
        // floats after the tables, where the rebuild reads the left one too.
        const float* lx = a.ls + int64_t(l) * a.lh * a.lw;
        const float* rx = a.rs + int64_t(q) * a.rh * a.rw;
        float* out = a.out + k * per;
        // C' is read from out, or (kStaged with a.stage_out) from its copy staged beside the crops,
        // at staged_raw floats into the dynamic shared memory: an offset, not a second generic
        // pointer beside out (that one spilled in the staged zncc instantiation on sm_75-sm_89).
        int staged_raw = -1;
        if constexpr (kStaged) {
            __shared__ double2 seg_total[kColSegments][kWarp];  // scan_columns' segment totals
            float* lx_sh = reinterpret_cast<float*>(staged + lcells + rcells);
            float* rx_sh = lx_sh + a.lh * a.lw;
            float* raw_sh = rx_sh + a.rh * a.rw;
            __syncthreads();  // the previous output's reads of staged[] are done (q, l: uniform per block)
            stage_copy(lx_sh, lx, a.lh * a.lw);
            if (a.stage_out) {
                stage_copy<float, false>(raw_sh, out, per);
                staged_raw = int(raw_sh - reinterpret_cast<float*>(staged));
            }
            if (!a.rebuild_left) stage_copy(staged, lsat, lcells);
            if (q != staged_right) {
                stage_copy(staged + lcells, rsat, rcells);
                stage_copy(rx_sh, rx, a.rh * a.rw);
            }
            staged_right = q;
            __syncthreads();
            if (a.rebuild_left) {
                // The left table from the staged shifted crop: row 0 zero, the row pass, the column
                // pass. Narrow crops (at most kSeqRowCols columns, zncc_frames' 39 x 37) take one
                // thread per row adding its columns in order, then one thread per column adding its
                // rows in order from +0 (add_down): a warp's shuffle scan per 32 columns was 28% of
                // this kernel's instructions and its longest waits, and scan_columns' segments with
                // their barriers 17%. Wider rows keep scan_row (mean 0: float(x' - 0) is x') and
                // scan_columns, the fused prepass's own code and bits. Fixed orders
                // (tests/test_normalize_fused.py models them).
                for (int c = threadIdx.x; c < lw1; c += blockDim.x) staged[c] = make_double2(0, 0);
                if (a.lw <= kSeqRowCols) {
                    for (int r = threadIdx.x; r < a.lh; r += blockDim.x)
                        seq_row(lx_sh + r * a.lw, staged + (r + 1) * lw1, a.lw);
                    __syncthreads();
                    for (int c = threadIdx.x; c < lw1; c += blockDim.x) {
                        double2 acc = make_double2(0, 0);
                        add_down<2, true>(staged, 1, a.lh + 1, int(lw1), c, acc);
                    }
                } else {
                    for (int r = warp; r < a.lh; r += kThreads / kWarp)
                        scan_row<1, false, false, false>(lx_sh + r * a.lw, nullptr, staged + (r + 1) * lw1, a.lw, 0.0,
                                                         lane);
                    __syncthreads();
                    for (int c0 = 0; c0 < lw1; c0 += kWarp)
                        scan_columns<1>(staged, a.lh, int(lw1), c0 + lane, warp, seg_total);
                }
                __syncthreads();
            }
            lsat = staged, rsat = staged + lcells;
            lx = lx_sh, rx = rx_sh;
        }
        const double ml = a.lmean[l], mr = a.rmean[q];
        // Warp-uniform: every lane runs every iteration (j past the end: `in` false), so that the
        // warp can take its small overlaps' direct sums together.
        for (int j0 = blockIdx.y * blockDim.x + warp * kWarp; j0 < per; j0 += gridDim.y * blockDim.x) {
            const int j = j0 + lane;
            const bool in = j < per;
            const int y = int(a.out_w.div(unsigned(in ? j : j0)));
            const int dy = a.win.dy0 + y, dx = a.win.dx0 + ((in ? j : j0) - y * ow);
            const Span rows = overlap_span(dy, a.hL, a.hR), cols = overlap_span(dx, a.wL, a.wR);
            const int nr = rows.end - rows.begin, nc = cols.end - cols.begin;
            const bool direct = in && nr > 0 && nc > 0 && int64_t(nr) * nc <= kDirectOverlap;
            double c = 0;
            for (unsigned m = __ballot_sync(kFullMask, direct); m; m &= m - 1) {
                const int src = __ffs(m) - 1;
                const double sum = warp_direct_sum(lx, rx, a.lh, a.lw, a.rh, a.rw, __shfl_sync(kFullMask, dy + ty, src),
                                                   __shfl_sync(kFullMask, dx + tx, src), lane);
                if (lane == src) c = sum;
            }
            if (!in) continue;
            if (nr == 0 || nc == 0) {
                out[j] = 0.0f;
                continue;
            }
            const double n = double(nr) * nc;
            const int lr = rows.begin + dy - a.lr0, lc = cols.begin + dx - a.lc0;
            const int rr = rows.begin - a.rr0, rc = cols.begin - a.rc0;
            // Each side's factor as soon as its box is read: one corner live at a time. The staged
            // zncc instantiation reads its corner again from shared memory where the factor takes
            // it (a volatile load, which the compiler neither merges with the box's nor hoists):
            // keeping the box's for it spilled at 64 registers on sm_75-sm_89.
            constexpr bool kReload = kStaged && kMode == Normalize::Zncc;
            double corner;
            const double2 sl = box_sum<kStaged>(lsat, lw1, lr, lr + nr, lcol(lc), lcol(lc + nc), corner);
            if constexpr (kReload) corner = reload_y(lsat + (lr + nr) * lw1 + lc + nc);
            const ZnccFactor fl = zncc_factor(sl, corner, lr + nr, min(lc + nc, a.ldepth), n, a.lvar[l]);
            const double2 sr = box_sum<kStaged>(rsat, rw1, rr, rr + nr, rcol(rc), rcol(rc + nc), corner);
            if constexpr (kReload) corner = reload_y(rsat + (rr + nr) * rw1 + rc + nc);
            if (!direct) {
                if (kStaged && staged_raw >= 0) c = double(reinterpret_cast<const float*>(staged)[staged_raw + j]);
                else c = double(out[j]);
            }
            float v = 0.0f;
            if constexpr (kMode == Normalize::ZeroLag) {
                const double d = a.c00[k];
                if (d != 0) v = float((c + mr * sl.x + ml * sr.x + n * ml * mr) / d);
            } else {
                const ZnccFactor fr = zncc_factor(sr, corner, rr + nr, min(rc + nc, a.rdepth), n, a.rvar[q]);
                // rsqrt (within 1 ulp) and a product rather than sqrt and a division: two fewer
                // double-precision iterations with their slow-path branches per element. Clamped
                // after the rounding to float (the same value: rounding is monotonic and +-1 are
                // floats), one instruction a side where double fmin/fmax took six.
                if (fl.varies && fr.varies)
                    v = fminf(1.0f, fmaxf(-1.0f, float((n * c - sl.x * sr.x) * rsqrt(fl.f * fr.f))));
            }
            out[j] = v;
        }
    }
}

// The template epilogue (use_template_epilogue): where every shift of the window keeps the right
// wholly inside the left (template matching's valid window, matched filtering), each overlap is the
// whole right, so the right's terms are one constant per output (ΣR', its factor, mR, C(0, 0))
// rather than four table reads and their arithmetic per element, and outputs with the same left
// share the left's box sum at each shift. Mapping: blockIdx.x strides over groups of up to
// kTemplateGroup consecutive outputs of one left (one-to-many: every output; n-to-m: the row of
// left l; k = l·rights + q), whose constants the block puts in shared memory first; the threads
// of blockIdx.y stride over the elements, each reading the left box once (four entries, as
// box_sum) and then the group's outputs at that element. The same formulas as epilogue_kernel, but
// zncc's root is rsqrt(fL)·rsqrt(fR) and zero-lag's division a product by 1 / C(0, 0) (each within
// a few ulp of double, far below the contract's 1e-4). Resources: 3·kTemplateGroup doubles of
// shared memory; at most 64 registers (launch bounds as epilogue_kernel's).
constexpr int kTemplateGroup = 8;

// The template epilogue's per-output terms of output k (right q): (ΣR', zncc's 1 / sqrt(fR), 0
// where R' is constant; zero-lag's 1 / C(0, 0), 0 where C(0, 0) = 0). n = rh·rw, the whole right.
template <Normalize kMode, bool kSampled>
__device__ __forceinline__ double2 template_right_terms(const EpilogueArgs& a, int64_t q, int64_t k, double n) {
    const int64_t rw1 = kSampled ? a.rcols.width() : a.rw + 1;
    const double2* rsat = a.rsat + q * (a.rh + 1) * rw1;
    double corner;
    const double2 sr = box_sum<false>(rsat, rw1, 0, a.rh, kSampled ? a.rcols.at(0) : 0, kSampled ? a.rcols.at(a.rw) : a.rw,
                                      corner);
    double scale = 0;
    if constexpr (kMode == Normalize::ZeroLag) {
        const double d = a.c00[k];
        if (d != 0) scale = 1.0 / d;
    } else {
        const ZnccFactor fr = zncc_factor(sr, corner, a.rh, min(a.rw, a.rdepth), n, a.rvar[q]);
        if (fr.varies) scale = rsqrt(fr.f);
    }
    return make_double2(sr.x, scale);
}

// Its per-element terms of left l (table lsat, its crop's variance lvar) at output element j: (ΣL'
// over the whole right's overlap, zncc's 1 / sqrt(fL), 0 where L' is constant there; zero-lag: 0).
template <Normalize kMode, bool kSampled>
__device__ __forceinline__ double2 template_left_terms(const EpilogueArgs& a, const double2* lsat, int j, double n,
                                                       double lvar) {
    const int64_t lw1 = kSampled ? a.lcols.width() : a.lw + 1;
    auto lcol = [&a](int c) { return kSampled ? a.lcols.at(c) : c; };
    const int y = int(a.out_w.div(unsigned(j)));
    const int lr = a.win.dy0 + y - a.lr0, lc = a.win.dx0 + (j - y * int(a.win.out_w())) - a.lc0;
    double corner;
    const double2 sl = box_sum<false>(lsat, lw1, lr, lr + a.rh, lcol(lc), lcol(lc + a.rw), corner);
    double lscale = 0;
    if constexpr (kMode == Normalize::Zncc) {
        const ZnccFactor fl = zncc_factor(sl, corner, lr + a.rh, min(lc + a.rw, a.ldepth), n, lvar);
        if (fl.varies) lscale = rsqrt(fl.f);
    }
    return make_double2(sl.x, lscale);
}

template <Normalize kMode, bool kSampled>
__global__ void __launch_bounds__(kThreads, 4) template_epilogue_kernel(const EpilogueArgs a, int rights,
                                                                        int groups_per_left, int64_t groups) {
    // Per output of the group: template_right_terms and mR.
    __shared__ double r_sum[kTemplateGroup], r_scale[kTemplateGroup], r_mean[kTemplateGroup];
    const int per = int(a.win.out_h()) * int(a.win.out_w());
    const int64_t lw1 = kSampled ? a.lcols.width() : a.lw + 1;
    const double n = double(a.rh) * a.rw;  // the right's crop is the whole right
    for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
        const int l = int(g / groups_per_left), q0 = int(g % groups_per_left) * kTemplateGroup;
        const int nq = min(kTemplateGroup, rights - q0);
        const int64_t k0 = int64_t(l) * rights + q0;
        __syncthreads();  // the previous group's reads of the constants are done
        if (int(threadIdx.x) < nq) {
            const int i = threadIdx.x, q = q0 + i;
            const double2 rt = template_right_terms<kMode, kSampled>(a, q, k0 + i, n);
            r_sum[i] = rt.x, r_scale[i] = rt.y, r_mean[i] = a.rmean[q];
        }
        __syncthreads();
        const double ml = a.lmean[l];
        const double2* lsat = a.lsat + int64_t(l) * (a.lh + 1) * lw1;
        float* out = a.out + k0 * per;
        for (int j = blockIdx.y * blockDim.x + threadIdx.x; j < per; j += gridDim.y * blockDim.x) {
            const double2 lt = template_left_terms<kMode, kSampled>(a, lsat, j, n, a.lvar[l]);
            // The group's raw values first, then the results: a load after a store to the same
            // buffer cannot move above it, and one load in flight per thread at a time left DRAM
            // mostly idle (matched filtering's epilogue took 3x its traffic's time that way).
            float raw[kTemplateGroup];
#pragma unroll
            for (int i = 0; i < kTemplateGroup; ++i) raw[i] = i < nq ? out[int64_t(i) * per + j] : 0.0f;
#pragma unroll
            for (int i = 0; i < kTemplateGroup; ++i) {
                if (i >= nq) break;
                out[int64_t(i) * per + j] = float(template_value<kMode>(double(raw[i]), lt.x, lt.y, r_sum[i],
                                                                        r_scale[i], ml, r_mean[i], n));
            }
        }
    }
}

// The terms of StoreNorm (xcorr/store_norm.hpp) for a variant that writes the template epilogue's
// values itself: lterm[l][j] = template_left_terms for every left and output element, kterm[k] =
// template_right_terms for every output (the same code, so the same doubles, as the epilogue).
// Mapping: a grid-stride loop over nL·per + count items (lefts' elements, then outputs).
// Resources: registers only.
template <Normalize kMode, bool kSampled>
__global__ void __launch_bounds__(kThreads) store_terms_kernel(const EpilogueArgs a, int lefts, int rights,
                                                               double2* lterm, double2* kterm) {
    const int per = int(a.win.out_h()) * int(a.win.out_w());
    const int64_t lw1 = kSampled ? a.lcols.width() : a.lw + 1;
    const double n = double(a.rh) * a.rw;
    const int64_t litems = int64_t(lefts) * per, items = litems + a.count;
    for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < items; t += int64_t(gridDim.x) * blockDim.x) {
        if (t < litems) {
            const int64_t l = t / per;
            lterm[t] = template_left_terms<kMode, kSampled>(a, a.lsat + l * (a.lh + 1) * lw1, int(t - l * per), n,
                                                            a.lvar[l]);
        } else {
            const int64_t k = t - litems;
            kterm[k] = template_right_terms<kMode, kSampled>(a, k % rights, k, n);
        }
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

// C(0, 0)'s partial sums per pair (c00_partial_kernel): about 16 products per thread, at most
// kMaxC00Parts blocks per pair (a 2048 x 2048 pair: 1024 blocks of 2 rows, about 8 per SM of the
// H200: 64 left half of it idle, and 256 of 8 rows a quarter), and at most 16 Mi partials in all
// (many small pairs need no more than one each). Split over the rows first (as many row parts as
// rows allow), then over column chunks: a 1 x 2^20 pair takes 256 chunks of 4096 columns (a row
// split alone gave it one block).
struct C00Split {
    int row_parts = 1, col_parts = 1;
    int parts() const { return row_parts * col_parts; }
};
C00Split c00_split(const Problem& p) {
    const int64_t rows = std::min(p.hL, p.hR), cols = std::min(p.wL, p.wR), count = p.out_count();
    int64_t want = std::clamp<int64_t>(rows * cols / (kThreads * 16), 1, kMaxC00Parts);
    want = std::max<int64_t>(1, std::min<int64_t>(want, (int64_t(16) << 20) / count));
    C00Split s;
    s.row_parts = int(std::min(rows, want));
    s.col_parts = int(std::clamp<int64_t>(want / s.row_parts, 1, std::max<int64_t>(cols, 1)));
    return s;
}

// The segmented row pass's scratch (segment totals, then carries: double2 per row and segment of
// each segmented stack, lefts first) lives in partial_ after the partial sums, at an even offset in
// doubles (double2 alignment): the offset and the double2 entries.
size_t seg_scratch_offset(const Problem& p, bool lfused, bool rfused, int lpartials, int rpartials) {
    const size_t n = (lfused ? 0 : size_t(p.nL) * lpartials) + (rfused ? 0 : size_t(p.nR) * rpartials);
    return 2 * n;  // a double2 of partial sums each
}
size_t seg_scratch_entries(const Problem& p, const NormalizeCrop& c, bool lfused, bool rfused) {
    return size_t(p.nL) * c.left.h() * segs_for(c.left.w(), lfused) +
           size_t(p.nR) * c.right.h() * segs_for(c.right.w(), rfused);
}

int blocks_for(int64_t n, int threads) { return int(std::min<int64_t>((n + threads - 1) / threads, 65536)); }

// The staged epilogue (epilogue_kernel<, true>): dynamic shared memory for the two tables, the
// limit on it, and when it pays: the tables fit; every output reads its tables' entries at least
// twice over on average (8 per element against the cells staged), else staging would move more
// bytes than it saves (a window of a few shifts on large crops); and outputs enough to fill the
// GPU with one block per output (fewer run on fewer SMs than the unstaged kernel's blocks).
constexpr size_t kStagedEpilogueBytes = 64 * 1024;
constexpr int64_t kStagedMinOutputs = 256;
size_t staged_epilogue_bytes(const NormalizeCrop& c) {
    return table_bytes(c.left.h(), c.left.w()) + table_bytes(c.right.h(), c.right.w());
}
// Whether the staged epilogue stages each output's raw values too (EpilogueArgs::stage_out): outputs
// of at most kStagedOutBytes (zncc_frames' 33 x 33: 4.3 KB). Copied with the crop, the loads are
// in flight together, where each element's own load, late in its iteration, was the staged
// kernel's longest wait (17% of its stall samples on zncc_frames' 23 x 21 template).
constexpr size_t kStagedOutBytes = 16 * 1024;
bool stage_outputs(const Problem& p) { return size_t(p.out_h()) * p.out_w() * sizeof(float) <= kStagedOutBytes; }
// Its dynamic shared memory: the two tables, then the two shifted crops as floats, then (stage_outputs)
// an output's raw values.
size_t staged_smem_bytes(const Problem& p, const NormalizeCrop& c) {
    const size_t out = stage_outputs(p) ? size_t(p.out_h()) * p.out_w() : 0;
    return staged_epilogue_bytes(c) +
           (size_t(c.left.h()) * c.left.w() + size_t(c.right.h()) * c.right.w() + out) * sizeof(float);
}
bool use_staged_epilogue(const Problem& p, const NormalizeCrop& c) {
    const size_t bytes = staged_epilogue_bytes(c);
    const int64_t cells = int64_t(bytes / sizeof(double2)), per = int64_t(p.out_h()) * p.out_w();
    return bytes <= kStagedEpilogueBytes && 8 * per >= 2 * cells && p.out_count() >= kStagedMinOutputs;
}

// The template epilogue (template_epilogue_kernel) where the window keeps the right wholly inside
// the left at every shift (0 <= dy, dy + hR <= hL, and so for the columns): template matching's
// valid window, matched filtering. Not for n-to-mn (outputs of one left are not consecutive there)
// nor where n <= kDirectOverlap (epilogue_kernel sums those overlaps directly); the staged epilogue
// keeps the problems it takes.
// Outputs per left from which a variant's store takes the normalization (Normalizer::store_norm_possible):
// its per-left terms are 16 bytes an element against 4 per output element it spares re-reading
// and re-writing, so from 8 outputs per left they cost at most a quarter of what they save.
constexpr int64_t kStoreNormMinRights = 8;
// The lefts the template epilogue's outputs are grouped by: nL for n-to-m (output k = l·nR + q),
// 1 for the forms it takes with one left (one-to-one, one-to-many).
int template_lefts(const Problem& p) { return p.form == Form::NToM ? p.nL : 1; }
bool use_template_epilogue(const Problem& p) {
    const Window w = p.shifts();
    return p.form != Form::NToMn && w.dy0 >= 0 && w.dy1 <= p.hL - p.hR && w.dx0 >= 0 && w.dx1 <= p.wL - p.wR &&
           int64_t(p.hR) * p.wR > kDirectOverlap;
}

// Whether a stack's tables keep only the columns the epilogue reads (read_columns): where that
// leaves out at least an eighth of them, and the stack takes row_scan_kernel (the fused prepass
// keeps whole tables in shared memory, the segmented row pass whole rows of 1-D signals). The
// tables of the four-kernel path cross DRAM three times (row pass out, column pass in and out) at
// 16 bytes per cell, four times the input: zncc_frames' 156 x 116 template within ±16 reads 50 of
// the 133 columns of each 172 x 132 crop, 368 KB of table per frame otherwise (1000 frames: ~1.1
// GB of traffic, most of the 475 us its ZNCC cost beyond the raw correlation). Seed 002's ±64 on
// 2048 x 2048: 130 of 2049 columns, 4.3 MB of tables per input instead of 67 MB. Sampling costs
// only a column lookup per store and read: the staged epilogue, which needs whole tables, never
// applies where the four-kernel path runs (the stack past the fused prepass has a table of more
// than 4/5 of kFusedSmemBytes, past kStagedEpilogueBytes alone). Only a stack whose whole tables
// come to kSampledMinBytes or more: below that the traffic saved is a few microseconds, while
// one sampled stack puts every output element through the sampled epilogue's column lookups
// (zncc_match's 16 x 16 template, a 4.6 KB table, made the epilogue of a 4096 x 4096 image's valid
// window the sampled one: more registers, half the occupancy).
constexpr size_t kSampledMinBytes = 1024 * 1024;
bool sampled_table(const TableColumns& read, int ch, int cw, int count, bool fused) {
    return !fused && segs_for(cw, fused) == 0 && size_t(count) * table_bytes(ch, cw) >= kSampledMinBytes &&
           8 * int64_t(read.width()) <= 7 * (int64_t(cw) + 1);
}
static_assert(4 * kFusedSmemBytes > 5 * kStagedEpilogueBytes,
              "a crop past the fused prepass (table + floats, floats < table / 4) has a table past the staged epilogue's limit");

// The Instance of a normalized problem: the variant's instance of the (cropped) raw problem inside
// a Normalizer; no raw instance where the crop is empty (the output is 0).
class NormalizedInstance final : public Instance {
public:
    NormalizedInstance(std::unique_ptr<Instance> raw, Normalizer norm) : raw_(std::move(raw)), norm_(std::move(norm)) {
        if (raw_ && norm_.store_norm_possible() && raw_->takes_store_norm(norm_.problem().normalize))
            raw_->set_store_norm(norm_.fuse_store());
    }
    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        norm_.apply(left, right, out, stream, [&](const float* l, const float* r, float* o) {
            raw_->run(l, r, o, stream);
            if (raw_->has_finish()) raw_->finish(o, stream);
        });
    }

private:
    std::unique_ptr<Instance> raw_;
    Normalizer norm_;
};

}  // namespace

Prepass prepass_of(const Problem& p, const NormalizeCrop& crop) {
    if (crop.empty()) throw UsageError("prepass_of: the crop is empty (the output is 0: nothing is prepared)");
    const Region &cl = crop.left, &cr = crop.right;
    Prepass pp;
    // The fused prepass where both stacks' crops fit it; where one stack needs the four-kernel path,
    // the other rides along in those launches (a stack per blockIdx.z) rather than paying a fused
    // launch of its own, a few blocks' latency for a stack of a few matrices (zncc_frames' 53 x 54
    // template: 15 us on one block, after the frames' 85 x 86 crops took the four kernels). The two
    // paths give the same bits (tests/test_normalize_fused.py).
    const TableColumnsPair read = read_columns(p, crop);
    auto stack = [&](const Region& c, const TableColumns& reads, int count, bool fused, bool rides) {
        StackPrepass s;
        s.fused = fused;
        s.partials = partials_for(int64_t(c.h()) * c.w());
        s.row_segments = segs_for(c.w(), fused);
        s.cols = sampled_table(reads, c.h(), c.w(), count, fused) ? reads : all_columns(c.w());
        s.strip = strip_prepass(c.h(), c.w(), count, s.cols.width(), fused, rides);
        s.chunked_rows = chunked_rows(c.h(), c.w(), s.strip);
        // One-row crops skip the column pass (prepare), and the strip prepass has its own: no bands.
        s.col_bands = fused || s.strip || c.h() == 1 ? 1 : col_bands_for(c.h(), c.w(), count, s.cols.width());
        return s;
    };
    // A stack of crops past kStripOverFusedBytes that the strip prepass takes when not fused.
    auto strip_over_fused = [&](const Region& c, const TableColumns& reads, int count) {
        return fused_smem_bytes(c.h(), c.w()) > kStripOverFusedBytes && stack(c, reads, count, false, false).strip;
    };
    const bool fused = fits_fused(cl.h(), cl.w()) && fits_fused(cr.h(), cr.w()) &&
                       !strip_over_fused(cl, read.left, p.nL) && !strip_over_fused(cr, read.right, p.nR);
    pp.left = stack(cl, read.left, p.nL, fused, false);
    pp.right = stack(cr, read.right, p.nR, fused, false);
    // A stack of too few matrices for a strip launch of its own rides along in the other's:
    // zncc_frames' one template otherwise took partial sums' and means' launches with the frames,
    // then three small grids of its own (row pass, column totals and scan: 15 us at 156 x 116).
    // Only crops of at most the other stack's size: a block walks its matrix alone, so a larger one
    // would outlast the launch it rides in.
    auto elems = [](const Region& c) { return int64_t(c.h()) * c.w(); };
    if (pp.left.strip != pp.right.strip) {
        if (pp.right.strip && elems(cl) <= elems(cr)) pp.left = stack(cl, read.left, p.nL, fused, true);
        else if (pp.left.strip && elems(cr) <= elems(cl)) pp.right = stack(cr, read.right, p.nR, fused, true);
    }
    pp.staged_epilogue = !pp.left.sampled(cl.w()) && !pp.right.sampled(cr.w()) && use_staged_epilogue(p, crop);
    pp.template_epilogue = !pp.staged_epilogue && use_template_epilogue(p);
    pp.rebuild_left = pp.staged_epilogue && pp.left.fused;
    pp.c00_parts = p.normalize == Normalize::ZeroLag ? c00_split(p).parts() : 0;
    return pp;
}

Normalizer::Normalizer(const Problem& p, const NormalizeCrop& crop) : p_(p), crop_(crop) {
    if (p.normalize == Normalize::None) throw UsageError("Normalizer: the problem is not normalized (normalize none)");
    p.check();
    if (crop.empty()) return;  // the output is 0: nothing to prepare
    const Region &cl = crop.left, &cr = crop.right;
    prepass_ = prepass_of(p, crop);
    const StackPrepass &L = prepass_.left, &R = prepass_.right;
    if (p.normalize == Normalize::ZeroLag) {
        const int64_t count = p.out_count();
        c00_ = DeviceBuffer<double>(size_t(count));
        c00_partial_ = DeviceBuffer<double>(size_t(count) * prepass_.c00_parts);
    }
    fused_smem_ = std::max(L.fused ? fused_smem_bytes(cl.h(), cl.w()) : 0,
                           R.fused ? fused_smem_bytes(cr.h(), cr.w()) : 0);
    if (fused_smem_ > 48 * 1024)  // past the default limit of dynamic shared memory: opt in (per device)
        XC_CUDA_CHECK(cudaFuncSetAttribute(fused_prepass_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(fused_smem_)));
    sampled_ = L.sampled(cl.w()) || R.sampled(cr.w());
    if (prepass_.staged_epilogue && staged_smem_bytes(p, crop) > 48 * 1024) {
        const int bytes = int(staged_smem_bytes(p, crop));
        XC_CUDA_CHECK(cudaFuncSetAttribute(epilogue_kernel<Normalize::Zncc, true>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
        XC_CUDA_CHECK(cudaFuncSetAttribute(epilogue_kernel<Normalize::ZeroLag, true>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    }
    lshift_ = DeviceBuffer<float>(size_t(p.nL) * cl.h() * cl.w());
    rshift_ = DeviceBuffer<float>(size_t(p.nR) * cr.h() * cr.w());
    partial_ = DeviceBuffer<double>(seg_scratch_offset(p, L.fused, R.fused, L.partials, R.partials) +
                                    2 * seg_scratch_entries(p, crop, L.fused, R.fused));
    mean_ = DeviceBuffer<double>(2 * (size_t(p.nL) + p.nR));  // the means, then the variances
    if (!prepass_.rebuild_left) lsat_ = DeviceBuffer<double2>(size_t(p.nL) * (cl.h() + 1) * L.cols.width());
    rsat_ = DeviceBuffer<double2>(size_t(p.nR) * (cr.h() + 1) * R.cols.width());
    strip_smem_ = std::max(L.strip ? strip_smem_bytes(L.cols.width()) : 0,
                           R.strip ? strip_smem_bytes(R.cols.width()) : 0);
    if (strip_smem_ > 48 * 1024)  // past the default limit of dynamic shared memory: opt in
        for (auto kernel : {strip_prepass_kernel<false>, strip_prepass_kernel<true>})
            XC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(strip_smem_)));
    const size_t ltotals = L.col_bands > 1 ? size_t(p.nL) * L.col_bands * kColSegments * L.cols.width() : 0;
    const size_t rtotals = R.col_bands > 1 ? size_t(p.nR) * R.col_bands * kColSegments * R.cols.width() : 0;
    col_total_ = DeviceBuffer<double2>(ltotals + rtotals);
}

size_t Normalizer::workspace_bytes() const {
    return lshift_.bytes() + rshift_.bytes() + partial_.bytes() + mean_.bytes() + lsat_.bytes() + rsat_.bytes() +
           col_total_.bytes() + c00_.bytes() + c00_partial_.bytes() + lterm_.bytes() + kterm_.bytes();
}

void Normalizer::prepare(const float* left, const float* right, cudaStream_t stream) {
    if (crop_.empty()) return;
    const StackPrepass &L = prepass_.left, &R = prepass_.right;
    if (p_.normalize == Normalize::ZeroLag) {
        // C(0, 0) from the whole inputs: shift (0, 0) need not be in the window, nor its overlap in the crops.
        const int64_t count = p_.out_count();
        const C00Split split = c00_split(p_);
        c00_partial_kernel<<<dim3(split.parts(), unsigned(std::min<int64_t>(count, kMaxGridY))), kThreads, 0, stream>>>(
            left, right, p_.hL, p_.wL, p_.hR, p_.wR, pair_map(p_), count, split.row_parts, split.col_parts,
            c00_partial_.get());
        XC_CHECK_LAUNCH();
        c00_final_kernel<<<blocks_for(count, kThreads / kWarp), kThreads, 0, stream>>>(
            c00_partial_.get(), count, prepass_.c00_parts, c00_.get());
        XC_CHECK_LAUNCH();
    }
    const Region &cl = crop_.left, &cr = crop_.right;
    double2* const lpartial = reinterpret_cast<double2*>(partial_.get());  // (Σx, Σ(x - x0)²) pairs
    double2* const rpartial = lpartial + (L.fused ? 0 : int64_t(p_.nL) * L.partials);
    const StackRef l{left, lshift_.get(), lsat_.get(), lpartial, mean_.get(), lvar(), p_.nL, p_.hL, p_.wL,
                     cl.r0, cl.c0, cl.h(), cl.w(), L.partials, L.cols, L.col_bands};
    const StackRef r{right, rshift_.get(), rsat_.get(), rpartial, mean_.get() + p_.nL, rvar(), p_.nR, p_.hR, p_.wR,
                     cr.r0, cr.c0, cr.h(), cr.w(), R.partials, R.cols, R.col_bands};
    // Each stack in one of the two paths; in the other its count is 0 (it does nothing there).
    Stacks fused{l, r}, split{l, r};
    (L.fused ? split.left : fused.left).count = 0;
    (R.fused ? split.right : fused.right).count = 0;
    if (L.fused || R.fused) {
        const int64_t total = int64_t(fused.left.count) + fused.right.count;
        fused_prepass_kernel<<<blocks_for(total, 1), kThreads, fused_smem_, stream>>>(fused);
        XC_CHECK_LAUNCH();
    }
    if (L.fused && R.fused) return;
    const int most = std::max(split.left.count, split.right.count);
    const int gy = std::min(most, kMaxGridY);
    const int64_t slices = std::max(int64_t(split.left.count) * L.partials, int64_t(split.right.count) * R.partials);
    partial_sums_kernel<<<dim3(unsigned(std::min<int64_t>(slices, kMaxPartialBlocks)), 1, 2), kThreads, 0, stream>>>(split);
    XC_CHECK_LAUNCH();
    means_kernel<<<dim3(blocks_for(most, kThreads / kWarp), 1, 2), kThreads, 0, stream>>>(split);
    XC_CHECK_LAUNCH();
    // The strip prepass's stacks: row and column passes in one kernel; the passes below skip them.
    Stacks rest = split, strips = split;
    if (prepass_.left.strip) rest.left.count = 0;
    else strips.left.count = 0;
    if (prepass_.right.strip) rest.right.count = 0;
    else strips.right.count = 0;
    if (const int64_t matrices = int64_t(strips.left.count) + strips.right.count) {
        auto strip = sampled_ ? strip_prepass_kernel<true> : strip_prepass_kernel<false>;
        strip<<<blocks_for(matrices, 1), kThreads, strip_smem_, stream>>>(strips);
        XC_CHECK_LAUNCH();
    }
    // The row pass: row_scan_kernel for rows up to kSegRow columns, the segmented pass for longer
    // ones (per stack; the other stack's count is 0 in each).
    const int lsegs = prepass_.left.row_segments, rsegs = prepass_.right.row_segments;
    Stacks rowwise = rest, segmented = rest;
    (lsegs ? rowwise.left : segmented.left).count = 0;
    (rsegs ? rowwise.right : segmented.right).count = 0;
    // One launch per kind of row among the stacks: chunked (chunked_rows), else scan_span's, batched
    // where the crops are long (one kernel each way: a run-time choice inside one kernel gave the
    // short crops the batched code's registers and halved their occupancy).
    for (const bool chunk : {false, true}) {
        Stacks part = rowwise;
        if (prepass_.left.chunked_rows != chunk) part.left.count = 0;
        if (prepass_.right.chunked_rows != chunk) part.right.count = 0;
        const int64_t prows = std::max(int64_t(part.left.count) * cl.h(), int64_t(part.right.count) * cr.h());
        if (!prows) continue;
        const bool long_rows = std::max(part.left.count ? cl.w() : 0, part.right.count ? cr.w() : 0) >= kLongRow;
        auto row_scan = chunk ? (sampled_ ? row_scan_kernel<1, true, true> : row_scan_kernel<1, false, true>)
                      : sampled_ ? (long_rows ? row_scan_kernel<kRowStrips, true> : row_scan_kernel<1, true>)
                                 : (long_rows ? row_scan_kernel<kRowStrips, false> : row_scan_kernel<1, false>);
        row_scan<<<dim3(blocks_for(prows, kThreads / kWarp), 1, 2), kThreads, 0, stream>>>(part);
        XC_CHECK_LAUNCH();
    }
    if (lsegs || rsegs) {
        double2* const lseg = reinterpret_cast<double2*>(
            partial_.get() + seg_scratch_offset(p_, L.fused, R.fused, L.partials, R.partials));
        const SegScratch scratch{lseg, lseg + int64_t(segmented.left.count) * cl.h() * lsegs};
        const int64_t lrows = int64_t(segmented.left.count) * cl.h(), rrows = int64_t(segmented.right.count) * cr.h();
        const int64_t segs = std::max(lrows * lsegs, rrows * rsegs);
        const int64_t adds = std::max(lrows * std::max(lsegs - 1, 0), rrows * std::max(rsegs - 1, 0));
        seg_scan_kernel<<<dim3(blocks_for(segs, kThreads / kWarp), 1, 2), kThreads, 0, stream>>>(segmented, scratch);
        XC_CHECK_LAUNCH();
        seg_carry_kernel<<<dim3(blocks_for(std::max(lrows, rrows), kThreads / kWarp), 1, 2), kThreads, 0, stream>>>(
            segmented, scratch);
        XC_CHECK_LAUNCH();
        seg_add_kernel<<<dim3(blocks_for(adds, 1), 1, 2), kThreads, 0, stream>>>(segmented, scratch);
        XC_CHECK_LAUNCH();
    }
    // The column pass, but not of one-row crops: there it would write table (1, c) = +0 + table
    // (1, c), the same bits (no row entry is -0: each is a sum with a carry that starts at +0, and
    // round-to-nearest gives -0 only for -0 + -0), and a 1-D signal of 8.64 M samples would cost
    // 270 k blocks of which one warp in 8 has a row to add.
    Stacks colwise = rest;
    if (cl.h() == 1) colwise.left.count = 0;
    if (cr.h() == 1) colwise.right.count = 0;
    // A stack of one band takes col_scan_kernel, one of more the banded pair (the other's count 0 in each).
    Stacks plain = colwise, banded = colwise;
    (L.col_bands > 1 ? plain.left : banded.left).count = 0;
    (R.col_bands > 1 ? plain.right : banded.right).count = 0;
    auto width = [](const Stacks& s) { return std::max(s.left.count ? s.left.cols.width() : 0,
                                                       s.right.count ? s.right.cols.width() : 0); };
    if (plain.left.count || plain.right.count) {
        const bool long_cols = std::max(plain.left.count ? cl.h() : 0, plain.right.count ? cr.h() : 0) >= kLongColumn;
        auto col_scan = long_cols ? col_scan_kernel<kColBatch> : col_scan_kernel<1>;
        col_scan<<<dim3(ceil_div(width(plain), kWarp), gy, 2), kThreads, 0, stream>>>(plain);
        XC_CHECK_LAUNCH();
    }
    if (banded.left.count || banded.right.count) {
        const size_t ltotals = size_t(banded.left.count) * L.col_bands * kColSegments * L.cols.width();
        const ColScratch scratch{col_total_.get(), col_total_.get() + ltotals};
        const int64_t slices =
            std::max(int64_t(banded.left.count) * L.col_bands, int64_t(banded.right.count) * R.col_bands);
        const dim3 grid(ceil_div(width(banded), kWarp), unsigned(std::min<int64_t>(slices, kMaxGridY)), 2);
        col_totals_kernel<kColBatch><<<grid, kThreads, 0, stream>>>(banded, scratch);
        XC_CHECK_LAUNCH();
        col_band_scan_kernel<kColBatch><<<grid, kThreads, 0, stream>>>(banded, scratch);
        XC_CHECK_LAUNCH();
    }
}

void Normalizer::finish(float* out, cudaStream_t stream) { epilogue(out, stream, false); }
void Normalizer::store_terms(cudaStream_t stream) { epilogue(nullptr, stream, true); }

// The epilogue over `out`, or (terms) the StoreNorm terms of a variant that stores the template
// epilogue's values itself: the same arguments either way.
void Normalizer::epilogue(float* out, cudaStream_t stream, bool terms) {
    const int64_t total = p_.out_elems();
    if (!total) return;
    if (crop_.empty()) {
        XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(total) * sizeof(float), stream));  // 0.0f is all zero bits
        return;
    }
    const Region &cl = crop_.left, &cr = crop_.right;
    const StackPrepass &L = prepass_.left, &R = prepass_.right;
    EpilogueArgs a{};
    a.out = out;
    a.lsat = lsat_.get(), a.rsat = rsat_.get();
    a.lmean = mean_.get(), a.rmean = mean_.get() + p_.nL, a.c00 = c00_.get();
    a.lvar = lvar(), a.rvar = rvar();
    a.ls = lshift_.get(), a.rs = rshift_.get();
    a.hL = p_.hL, a.wL = p_.wL, a.hR = p_.hR, a.wR = p_.wR;
    a.lr0 = cl.r0, a.lc0 = cl.c0, a.lh = cl.h(), a.lw = cl.w();
    a.rr0 = cr.r0, a.rc0 = cr.c0, a.rh = cr.h(), a.rw = cr.w();
    a.lcols = L.cols, a.rcols = R.cols;
    a.ldepth = L.row_segments ? kSegRowDepth : INT_MAX, a.rdepth = R.row_segments ? kSegRowDepth : INT_MAX;
    a.win = p_.shifts();
    a.out_w = FastDiv(unsigned(p_.out_w()));
    a.pairs = pair_map(p_);
    a.count = p_.out_count();
    a.rebuild_left = prepass_.rebuild_left;
    a.stage_out = prepass_.staged_epilogue && stage_outputs(p_);
    const int64_t per = int64_t(p_.out_h()) * p_.out_w();
    const bool zl = p_.normalize == Normalize::ZeroLag;
    // The unstaged epilogues' blockIdx.y: the elements of an output, kThreads a block.
    const unsigned elem_blocks = unsigned(std::min<int64_t>(ceil_div(per, int64_t(kThreads)), kMaxGridY));
    if (terms) {  // fuse_store: the template epilogue's problems only
        auto kernel = sampled_ ? (zl ? store_terms_kernel<Normalize::ZeroLag, true> : store_terms_kernel<Normalize::Zncc, true>)
                               : (zl ? store_terms_kernel<Normalize::ZeroLag, false>
                                     : store_terms_kernel<Normalize::Zncc, false>);
        const int lefts = template_lefts(p_), rights = int(a.count / lefts);
        const int64_t items = int64_t(lefts) * per + a.count;
        kernel<<<blocks_for(items, kThreads), kThreads, 0, stream>>>(a, lefts, rights, lterm_.get(), kterm_.get());
    } else if (prepass_.staged_epilogue) {
        // At most 65535 blocks, as before the outputs moved to x: a block of several outputs keeps
        // the staged right table across those with the same right.
        auto epilogue = zl ? epilogue_kernel<Normalize::ZeroLag, true> : epilogue_kernel<Normalize::Zncc, true>;
        const unsigned gx = unsigned(std::min<int64_t>(a.count, kMaxGridY));
        epilogue<<<dim3(gx, 1), kThreads, staged_smem_bytes(p_, crop_), stream>>>(a);
    } else if (prepass_.template_epilogue) {
        auto epilogue = sampled_ ? (zl ? template_epilogue_kernel<Normalize::ZeroLag, true>
                                       : template_epilogue_kernel<Normalize::Zncc, true>)
                                 : (zl ? template_epilogue_kernel<Normalize::ZeroLag, false>
                                       : template_epilogue_kernel<Normalize::Zncc, false>);
        const int lefts = template_lefts(p_), rights = int(a.count / lefts);
        const int groups_per_left = ceil_div(rights, kTemplateGroup);
        const int64_t groups = int64_t(lefts) * groups_per_left;
        const unsigned gx = unsigned(std::min<int64_t>(groups, kMaxGridX));
        epilogue<<<dim3(gx, elem_blocks), kThreads, 0, stream>>>(a, rights, groups_per_left, groups);
    } else {
        auto epilogue = sampled_ ? (zl ? epilogue_kernel<Normalize::ZeroLag, false, true>
                                       : epilogue_kernel<Normalize::Zncc, false, true>)
                                 : (zl ? epilogue_kernel<Normalize::ZeroLag, false> : epilogue_kernel<Normalize::Zncc, false>);
        const unsigned gx = unsigned(std::min<int64_t>(a.count, kMaxGridX));
        epilogue<<<dim3(gx, elem_blocks), kThreads, 0, stream>>>(a);
    }
    XC_CHECK_LAUNCH();
}

bool Normalizer::store_norm_possible() const {
    if (crop_.empty() || !prepass_.template_epilogue || env_on("XCORR_NO_STORE_NORM")) return false;
    const int lefts = template_lefts(p_);
    return p_.out_count() / lefts >= kStoreNormMinRights;
}

const StoreNorm& Normalizer::fuse_store() {
    if (!store_norm_possible()) throw std::logic_error("Normalizer::fuse_store: not offered for this problem");
    const int lefts = template_lefts(p_);
    const int64_t per = int64_t(p_.out_h()) * p_.out_w();
    lterm_ = DeviceBuffer<double2>(size_t(lefts) * per);
    kterm_ = DeviceBuffer<double2>(size_t(p_.out_count()));
    store_norm_.mode = p_.normalize;
    store_norm_.lterm = lterm_.get(), store_norm_.kterm = kterm_.get();
    store_norm_.lmean = mean_.get(), store_norm_.rmean = mean_.get() + p_.nL;
    store_norm_.per = per;
    store_norm_.n = double(p_.hR) * p_.wR;
    store_fused_ = true;
    return store_norm_;
}

void Normalizer::apply(const float* left, const float* right, float* out, cudaStream_t stream,
                       const std::function<void(const float*, const float*, float*)>& raw) {
    if (!crop_.empty()) {
        prepare(left, right, stream);
        if (store_fused_) store_terms(stream);
        raw(raw_left(left), raw_right(right), out);
    }
    if (!store_fused_) finish(out, stream);
}

std::unique_ptr<Instance> make_instance(const Variant& variant, const Problem& p, const Params& params) {
    // The one place every instance is made: a shape the variant is not built for never reaches make().
    if (std::string why = variant.shape_refusal(p); !why.empty()) throw UsageError(why);
    if (p.normalize == Normalize::None) return make_raw_instance(variant, p, params);
    const NormalizeCrop touched = touched_crop(p);
    if (touched.empty()) return std::make_unique<NormalizedInstance>(nullptr, Normalizer(p, touched));
    // The cropped raw problem where the variant computes its (translated) window; else the whole
    // inputs, as before the crop.
    if (!touched.whole(p))
        if (std::unique_ptr<Instance> inst = make_on_crops(variant, touched.raw(p), params))
            return std::make_unique<NormalizedInstance>(std::move(inst), Normalizer(p, touched));
    std::unique_ptr<Instance> raw = variant.make(p.raw(), params);
    if (!raw) throw CudaError(variant.name + ": make() returned no instance");
    return std::make_unique<NormalizedInstance>(std::move(raw), Normalizer(p, whole_crop(p)));
}

}  // namespace xcorr
