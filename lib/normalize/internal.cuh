// What the normalization's passes share (lib/normalize/, one translation unit: normalizer.cu includes
// the passes, whose kernels use these internal-linkage helpers): the launch limits and the paths'
// thresholds, the host's choice of path per stack, the stacks as the kernels see them, block_sum
// and the crop cursor. Included by the pass headers only.
#pragma once

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
// (notes/probes.md: the zncc-frames-prepass probe).
constexpr size_t kFusedSmemBytes = 104 * 1024;
// But a stack the strip prepass would take (many crops, narrow tables) whose crops need more than
// kStripOverFusedBytes of the fused prepass's shared memory (three blocks per SM or fewer) takes the
// strip prepass, and the other stack the four-kernel path: zncc_frames' 1000 crops of 69 x 70
// (98.8 KB, two blocks per SM, 42% of issue slots busy) took 89.6 us in the fused prepass, and the
// whole ZNCC call 180.3 us against 173.1 this way; its 39 x 37 crops (34 KB, six blocks per SM) keep
// the fused prepass: 63.3 us against 99.0 through the strip (notes/probes.md: the strip-prepass
// probe).
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

}  // namespace
}  // namespace xcorr
