// The normalization's summed-area tables: the row pass with the shifted copy (scan_span, scan_row,
// the chunked order), the segmented row pass of very long rows, the column passes (plain and
// banded) and the strip prepass. Part of normalizer.cu's translation unit (internal.cuh).
#pragma once

#include "normalize/internal.cuh"

namespace xcorr {
namespace {

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
// made a first version slower than scan_span (notes/probes.md: the chunked-rows probe).
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
// columns (its shuffles made the strip prepass issue-bound: notes/probes.md, the strip-prepass
// probe). kLaneRunMax = 6 keeps the kernel at 64 registers, 4 blocks per SM (8: 80
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

}  // namespace
}  // namespace xcorr
