// fft-large: the FFT-based cross-correlation for transforms beyond one block (fft-fused holds at
// most 1024 a side), fused at both ends: no padded slot is ever written, the right's forward
// transform touches only its nonzero rows, the product with the left's spectrum sits between the
// forward and the inverse column transforms of one kernel, and the last pass writes only the
// window's elements, or, for the maximum over the rights (2-D template matching), folds a batch
// of rights into the running maximum, index, sum and sum of squares without writing any map.
// Forms one-to-one and one-to-many; every window; transforms up to 11664 points a side: along rows
// twice block_fft.cuh's longest schedule (18^3 = 5832: the real rows' half), along columns 5832 in
// the fused column pass and up to 11664 in a pass of its own beyond it (column_long_kernel: an
// 8192 x 8192 image's 8640).
//
// Algorithm (the transform of fft, 50_fft.cu, whose header explains windows, crops and periods):
// the window's overlapping shifts [lo, hi] per axis need the cropped parts L' (ln rows from l0)
// and R' (rn rows from r0) and a period P >= need (fit_axis); P and Q are the smallest 7-smooth
// lengths >= the rows' and the columns' need (Q even) that the block FFT has a schedule for
// (scheduled_length). With F the unnormalised 2-D DFT,
//     C'(s) = F^-1( F(L') conj(F(R')) ) / (P Q),   shift s at circular position s + r0 - l0.
// Three passes, each a kernel over a run-time-length block FFT (common/block_fft.cuh):
//   1. rows (row_forward_kernel): each nonzero row of a cropped matrix, as a real sequence of Q
//      (zero beyond its columns, never stored), transformed as H = Q/2 complex points (even
//      samples real, odd imaginary) and untangled into its Q/2 + 1 Hermitian coefficients; written
//      column-major per matrix, [k][row], so that pass 2 reads a column as consecutive addresses.
//      Only the rows the window touches are transformed: 384 of 4320 for a 2DTM template; the
//      transform's stage 0 reads the row from DRAM and skips its zeros (block_fft_from: 192 nonzero
//      points of 2160, at most two a radix-15 butterfly).
//   2. columns (column_kernel), one block per spectral column k: the column's rn values, zero to
//      P, forward DFT of length P, its stage 0 read from DRAM and pruned like pass 1's; the left:
//      scaled by 1 / (P Q) and kept ([k][p], the left's spectrum, once per call, or once per plan
//      with left=fixed); a right: multiplied by the left's column times conj(.), the inverse DFT of
//      length P, and only the window's rows written, [k][row] per right, the two rights that pass
//      3 takes at a time side by side ([pair][k][row][2]). The inverse's radices are the forward's
//      reversed, so that the forward's last stage, the product and the inverse's first stage are
//      one step in registers, and the inverse's last stage writes the rows from registers
//      (block_fft_correlate): the spectrum is never stored. A batch of rights runs in one launch,
//      the block looping over them, so that the left's column, held in shared memory, serves each.
//      A column longer than block_fft's longest schedule (P > 5832: an 8192-row image) takes
//      column_long_kernel instead: the same steps unfused, its stages ping-ponging between two
//      buffers with several butterflies a thread (block_fft_pingpong), the left's column read
//      through the cache.
//   3. rows again (row_inverse_kernel), one block per output row: for each pair of rights of the
//      batch the row's Q/2 + 1 coefficients (a strided read, 16 bytes a coefficient: the
//      neighbouring rows' blocks take the rest of each 32-byte sector, in flight together; copied
//      asynchronously into shared memory while the block transforms and folds the pair before),
//      Hermitian-folded into H complex points by the inverse DFT's stage 0 as it reads them
//      (block_fft_from), inverse DFT of length H, whose real and imaginary parts are the even and
//      odd columns; the window's columns are read from it at their circular positions. Maps: the
//      row is written. Maximum over the rights: each thread keeps its columns' running maximum and
//      first index in registers and their sum and sum of squares (float64) in shared memory over
//      the batch, and touches the running maps once per batch. A thread's columns are pairs of
//      neighbours, so that a step's rights meet a pair's sums in one read and write each. 2-D
//      template matching's maximum (rows of at most kFoldChunk columns, two rights a step) takes
//      row_max_ws_kernel instead (sm_90a): 12 warps transform while 8 fold the step before.
// Shifts of the window without overlap are exact zeros (the map) or folded as zeros.
//
// Mapping: pass 1 a block per (matrix, row), pass 2 a block per (column, ...), pass 3 a block
// per output row (its first kFoldChunk columns in registers, the rest in shared memory; only where
// the maximum's state of a row does not fit one block, a block per column chunk of the row, each
// transforming it again: 8192 columns at H = 4320); the block FFT spreads a
// stage's butterflies over all the block's threads (block_fft.cuh).
//
// Memory: the left's spectrum (Q/2 + 1) x P complex; pass 1's output for a batch (rows x
// (Q/2 + 1) per matrix); pass 2's output for a batch (window rows x (Q/2 + 1) per right). The
// batch is as many rights as fit kBatchBytes of the latter (at least one, at most kMaxBatch): GPU
// memory does not grow with the number of rights.
//
// Measurements and the history of the design: notes/53_fft_large.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/block_fft.cuh"
#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/launch.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::fft_large {
namespace {

constexpr int kFoldThreads = 512;        // pass 3
constexpr int kFoldPerThread = 8;        // output columns per thread in pass 3, as pairs of neighbours
constexpr int kFoldPairs = kFoldPerThread / 2;
constexpr int kFoldChunk = kFoldThreads * kFoldPerThread;  // pass 3's columns held in registers
constexpr int kFoldSumBytes = kFoldChunk * int(sizeof(double2));  // pass 3's sums
// A column beyond the chunk folded in shared memory: its maximum, index and sums
constexpr int kFoldWideBytes = int(sizeof(float) + sizeof(int32_t) + sizeof(double2));
constexpr int kMaxBatch = 32;
constexpr int64_t kBatchBytes = int64_t(1) << 31;

// dst[i] = src[i] (i < count; src's zeros from `valid` on), the block's threads loading kStage
// elements each before storing any, so that a thread has kStage loads in flight rather than one
// (a loop that stores each value before the next load waits out the latency of every load).
constexpr int kStage = 8;
template <class Store>
__device__ __forceinline__ void staged_copy(const float2* __restrict__ src, int count, int valid, Store&& store) {
    for (int i0 = threadIdx.x; i0 < count; i0 += kStage * blockDim.x) {
        float2 t[kStage];
#pragma unroll
        for (int u = 0; u < kStage; ++u) {
            const int i = i0 + u * int(blockDim.x);
            t[u] = i < valid ? __ldg(src + i) : make_float2(0.f, 0.f);
        }
#pragma unroll
        for (int u = 0; u < kStage; ++u) {
            const int i = i0 + u * int(blockDim.x);
            if (i < count) store(i, t[u]);
        }
    }
}

// Pass 1. Matrix m of the stack at `src` (h x w floats each, `stride` elements apart), rows
// [row0, row0 + rows) x columns [col0, col0 + cols) as a real row of Q zero-padded samples:
// its Q/2 + 1 coefficients to dst[m][k][r] (k <= Q/2, r < rows).
struct RowForwardArgs {
    const float* src;
    int64_t stride;
    int w, row0, col0, rows, cols;
    float2* dst;
    BlockFftPlan half;       // H = Q/2 points
    const float2* untangle;  // W_Q^k = exp(-2 pi i k / Q), k <= H
};

__global__ void __launch_bounds__(kBlockFftMaxThreads) row_forward_kernel(RowForwardArgs a) {
    extern __shared__ float2 buf[];
    __shared__ BlockFftStage stages[kBlockFftMaxStages];
    block_fft_stages(a.half, stages);
    const int H = a.half.n;
    const int r = blockIdx.x, m = blockIdx.y;
    const float* row = a.src + int64_t(m) * a.stride + int64_t(a.row0 + r) * a.w + a.col0;
    __syncthreads();  // the stage table
    // Point t holds columns 2t and 2t + 1; the points from (cols + 1) / 2 on are zeros, never read
    // or stored (a 384-column template in H = 2160: stage 0 pruned, block_fft_from).
    block_fft_from<-1>(buf, a.half, stages, threadIdx.x, (a.cols + 1) / 2, [&](int t) {
        return make_float2(__ldg(row + 2 * t), 2 * t + 1 < a.cols ? __ldg(row + 2 * t + 1) : 0.f);
    });
    const float2* z = buf;
    // X[k] = E[k] + W_Q^k O[k]: E, O the spectra of the even and the odd samples, untangled from
    // Z = E + i O by the Hermitian symmetry of each (even_part, odd_part).
    float2* out = a.dst + int64_t(m) * (H + 1) * a.rows + r;
    for (int k = threadIdx.x; k <= H; k += blockDim.x) {
        const float2 zk = z[bf_pad(k % H, a.half.pad)], zc = z[bf_pad((H - k) % H, a.half.pad)];
        out[int64_t(k) * a.rows] = cadd(even_part(zk, zc), cmul(__ldg(a.untangle + k), odd_part(zk, zc)));
    }
}

// Pass 2's next right's column (rows_in values: 3 KB for a 384-row template; col + K rows_in) into
// the L2 while this one transforms (one thread's bulk prefetch): stage 0 reads it straight from
// global memory after the barrier that ends a right, every warp at once, and a batch's pass-1
// output (6.6 MB a 4320-point right) does not stay in the L2 until then.
__device__ __forceinline__ void prefetch_next_column(const float2* col, int K, int rows_in) {
    prefetch_l2(col + int64_t(K) * rows_in, size_t(rows_in) * sizeof(float2));
}

// Pass 2. Column k (blockIdx.x) of each matrix's pass-1 output: rows < rows_in, zero to P,
// forward DFT (stage 0 read from DRAM and pruned to the nonzero rows: block_fft_correlate). Left
// (spec == nullptr on entry: `left_out` set): scaled, written whole to left_out[k][p]. Rights:
// times the left's column, conj of the right's, inverse DFT, rows (first_pos + t) mod P for t <
// out_rows written to dst[b / I][k][t][b % I]: the I = `interleave` rights that pass 3 takes at a
// time side by side, so that its read of a row's coefficient k for them is one access of I
// complex values. The forward's last stage, the product and the inverse's first stage run as one
// step in registers, and the inverse's last stage writes the rows from registers
// (block_fft_correlate).
struct ColumnArgs {
    const float2* src;     // [m][k][r], r < rows_in
    int rows_in, matrices;
    BlockFftPlan fwd, inv;  // P points; inv: fwd's radices reversed (block_fft_host_pair)
    float scale;
    float2* left_out;    // left mode: [k][p]
    const float2* spec;  // right mode: the left's spectrum [k][p]
    float2* dst;         // right mode: [b / I][k][t][b % I]
    int first_pos, out_rows, interleave;
};

// 96 registers, so that two blocks of 288 threads (P = 4320: 18 warps) fit an SM: each of its four
// schedulers' 16K registers holds five warps of 96 registers a thread, four of 112 (and the compiler's
// own choice was 124). On Blackwell (sm_100, sm_120) the kernel takes the unfused route below, at
// most 128 registers (kBlockFftMaxThreads a block). __maxnreg__ excludes __launch_bounds__; no plan
// has more than kBlockFftMaxThreads threads.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define XCORR_FFT_LARGE_COLUMN_REGISTERS 128
#else
#define XCORR_FFT_LARGE_COLUMN_REGISTERS 96
#endif
__global__ void __maxnreg__(XCORR_FFT_LARGE_COLUMN_REGISTERS) column_kernel(ColumnArgs a) {
    extern __shared__ float2 buf[];
    __shared__ BlockFftStage fst[kBlockFftMaxStages], ist[kBlockFftMaxStages];
    block_fft_stages(a.fwd, fst);
    block_fft_stages(a.inv, ist);
    const int P = a.fwd.n, K = gridDim.x;
    const int k = blockIdx.x, j = threadIdx.x;
    // Rights: the left's column, kept in shared memory for every right of the batch.
    float2* lcol = buf + block_fft_slot(P);
    if (!a.left_out) staged_copy(a.spec + int64_t(k) * P, P, P, [&](int p, float2 v) { lcol[p] = v; });
    __syncthreads();  // the stage tables and the left's column
    for (int m = 0; m < a.matrices; ++m) {
        const float2* col = a.src + (int64_t(m) * K + k) * a.rows_in;
        if (threadIdx.x == 0 && m + 1 < a.matrices) prefetch_next_column(col, K, a.rows_in);
        const int I = a.interleave;
        float2* out = a.dst + (a.dst ? (int64_t(m / I) * K + k) * a.out_rows * I + m % I : 0);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
        // Blackwell: the transforms unfused (the column in, the forward, the product, the inverse, the
        // rows out, each a pass over the buffer). Its ptxas spills the fused pair at 128 registers,
        // the most a block of kBlockFftMaxThreads may take; not measured on a GPU.
        staged_copy(col, P, a.rows_in, [&](int p, float2 v) { buf[bf_pad(p, a.fwd.pad)] = v; });
        __syncthreads();
        block_fft<-1>(buf, a.fwd, fst, j);
        if (a.left_out) {
            for (int p = j; p < P; p += blockDim.x) {
                const float2 v = buf[bf_pad(p, a.fwd.pad)];
                a.left_out[int64_t(k) * P + p] = make_float2(v.x * a.scale, v.y * a.scale);
            }
            continue;  // one matrix: nothing refills buf
        }
        // The inverse in the forward plan's layout and order (its own stage tables are fst's).
        for (int p = j; p < P; p += blockDim.x)
            buf[bf_pad(p, a.fwd.pad)] = mul_conj(lcol[p], buf[bf_pad(p, a.fwd.pad)], 1.f);
        __syncthreads();
        block_fft<1>(buf, a.fwd, fst, j);
        for (int t = j; t < a.out_rows; t += blockDim.x) {
            int pos = a.first_pos + t;
            pos -= pos >= P ? P : 0;
            out[int64_t(t) * I] = buf[bf_pad(pos, a.fwd.pad)];
        }
        __syncthreads();  // buf is refilled for the next right
#else
        block_fft_correlate(
            buf, a.fwd, fst, a.inv, ist, j, a.rows_in, [&](int p) { return __ldg(col + p); },
            [&](int p, float2 v) {
                if (!a.left_out) return mul_conj(lcol[p], v, 1.f);
                a.left_out[int64_t(k) * P + p] = make_float2(v.x * a.scale, v.y * a.scale);
                return v;  // forward_only: not transformed further
            },
            [&](int pos, float2 v) {
                int t = pos - a.first_pos;
                t += t < 0 ? P : 0;
                // t I < P kMaxGroup, far below 2^31: a 32-bit offset, one IMAD.WIDE for the
                // address where a 64-bit product took ~3 more instructions an element of every right
                if (t < a.out_rows) out[t * I] = v;
            },
            a.left_out != nullptr);
#endif
    }
}

// Pass 2 for a column beyond block_fft's longest schedule (P > 5832: block_fft_pingpong, several
// butterflies a thread): column_kernel's work unfused, each step a pass over shared memory -- the
// column in (zero to P), the forward DFT, the left's column written (left) or the product with it
// (read through the cache: a block's column stays in L2 over the batch), the inverse DFT, the
// window's rows out -- in two buffers of P (198 KB at 11664), a block of kBlockFftMaxThreads an SM.
// Both DFTs use the forward plan (its twiddles conjugated for the inverse); ColumnArgs::inv unused.
__global__ void __launch_bounds__(kBlockFftMaxThreads, 1) column_long_kernel(ColumnArgs a) {
    extern __shared__ float2 buf[];
    __shared__ BlockFftStage fst[kBlockFftMaxStages];
    block_fft_stages(a.fwd, fst);
    const int P = a.fwd.n, K = gridDim.x, slot = block_fft_slot(P), pad = a.fwd.pad;
    const int k = blockIdx.x, t = threadIdx.x, T = blockDim.x;
    __syncthreads();  // the stage table
    for (int m = 0; m < a.matrices; ++m) {
        const float2* col = a.src + (int64_t(m) * K + k) * a.rows_in;
        if (threadIdx.x == 0 && m + 1 < a.matrices) prefetch_next_column(col, K, a.rows_in);
        const int I = a.interleave;
        float2* out = a.dst + (a.dst ? (int64_t(m / I) * K + k) * a.out_rows * I + m % I : 0);
        staged_copy(col, P, a.rows_in, [&](int p, float2 v) { buf[bf_pad(p, pad)] = v; });
        __syncthreads();
        float2* x = block_fft_pingpong<-1>(buf, buf + slot, a.fwd, fst, t, T);
        if (a.left_out) {
            for (int p = t; p < P; p += T) {
                const float2 v = x[bf_pad(p, pad)];
                a.left_out[int64_t(k) * P + p] = make_float2(v.x * a.scale, v.y * a.scale);
            }
            continue;  // one matrix: nothing refills buf
        }
        const float2* lcol = a.spec + int64_t(k) * P;
        for (int p = t; p < P; p += T) x[bf_pad(p, pad)] = mul_conj(__ldg(lcol + p), x[bf_pad(p, pad)], 1.f);
        __syncthreads();
        const float2* y = block_fft_pingpong<1>(x, x == buf ? buf + slot : buf, a.fwd, fst, t, T);
        for (int r = t; r < a.out_rows; r += T) {
            int pos = a.first_pos + r;
            pos -= pos >= P ? P : 0;
            out[int64_t(r) * I] = y[bf_pad(pos, pad)];
        }
        __syncthreads();  // buf is refilled for the next right
    }
}

// Pass 3. Output row i = blockIdx.x of every right b < batch, columns from j0 = blockIdx.y *
// kFoldChunk (held in registers), and where `wide` > 0 also columns kFoldChunk .. out_w - 1 (held in
// shared memory; grid.y = 1). Row i holds shift dy0 + i; it has overlap iff row_lo <= i <=
// row_hi, then its coefficients are src[b / G][k][i - row_lo][b % G] (G the rights a step takes,
// pass 2's interleave). Column j: shift dx0 + j, overlap iff col_lo <= j <= col_hi, circular
// position (col_pos + j - col_lo) mod Q.
struct RowInverseArgs {
    const float2* src;  // [b / G][k][t][b % G], t < rows_src
    int rows_src, batch;
    BlockFftPlan half;
    const float2* untangle;  // W_Q^k, k <= H (its conjugate is the W_Q^-j below)
    float2 half_turn[kBlockFftMaxRadix];  // exp(i pi r / R), R = half.st[0].r: W_Q^-(r m), m = H / R
    int row_lo, row_hi, col_lo, col_hi, col_pos;
    int out_h, out_w;
    // maps: out + (b) * out_h * out_w
    float* out;
    // maximum over the rights
    float* value;
    int32_t* index;
    double* sum;
    double* sumsq;
    int32_t first;  // index of right b = first + b
    bool fresh;     // no running maps yet: start from (NaN, -1, 0, 0)
    int group;      // G, the rights a step takes: 1 or kMaxGroup
    int wide;       // columns kFoldChunk .. out_w - 1, taken by this block too (grid.y = 1), or 0
};
constexpr int kMaxGroup = 2;

// The maximum's three steps for one output column, the same for the columns held in registers and
// those in shared memory. Its running maps' entry o: the fold's test needs NaN where no index yet.
__device__ __forceinline__ void load_running(const RowInverseArgs& a, int64_t o, float& cur, int32_t& idx, double2& s) {
    idx = a.index[o];
    cur = idx < 0 ? NAN : a.value[o];
    if (a.sum) s = make_double2(a.sum[o], a.sumsq[o]);
}
// Right `index`'s value x: it replaces the maximum where it is a number and greater, or the maximum
// is NaN (no number yet: index -1): x > cur or unordered; the smaller index wins a tie (rights come
// in order).
__device__ __forceinline__ void fold_value(float x, int32_t index, float& cur, int32_t& idx, double2& s) {
    if (x == x && !(x <= cur)) cur = x, idx = index;
    s.x += x, s.y += double(x) * x;
}
__device__ __forceinline__ void store_running(const RowInverseArgs& a, int64_t o, float cur, int32_t idx, double2 s) {
    a.value[o] = cur, a.index[o] = idx;
    if (a.sum) a.sum[o] = s.x, a.sumsq[o] = s.y;
}
// Z[k] = (X[k] + conj X[H-k]) + i (X[k] - conj X[H-k]) W_Q^-k of transform g from the step's
// coefficients raw[k G + g]: the inverse of pass 1's untangling, so that the H-point inverse DFT
// holds the even columns in its real parts and the odd ones in its imaginary parts. Stage 0 reads k
// = j + r m as element r of butterfly j: W_Q^-k = W_Q^-j (w_j, the thread's, in registers) times
// W_Q^-(r m) = exp(i pi r / R) (a.half_turn[r], a constant of the arguments for each r), no load.
__device__ __forceinline__ float2 untangled(const RowInverseArgs& a, const float2* raw, int G, int g, int H, int k,
                                           int r, float2 w_j) {
    const float2 xk = raw[k * G + g], xc = raw[(H - k) * G + g];
    const float2 w = cmul(w_j, a.half_turn[r]);
    const float2 e = make_float2(xk.x + xc.x, xk.y - xc.y);
    const float2 o = cmul(make_float2(xk.x - xc.x, xk.y + xc.y), w);
    return make_float2(e.x - o.y, e.y + o.x);
}
// Where the values of output columns j, j + 1 are, the same for every right: column j's is element
// q = col_pos + j - col_lo (mod Q) of the transform's Q real outputs where it has overlap, else 0;
// column j + 1's is element q + 1 (mod Q). (q + 1) * 4 + (column j has overlap) + 2 (column j + 1
// has), or 0 (neither: nothing is read; q >= -1 otherwise).
__device__ __forceinline__ int pair_where(const RowInverseArgs& a, bool row_on, int j, int Q) {
    const bool on0 = row_on && j >= a.col_lo && j <= a.col_hi && j < a.out_w;
    const bool on1 = row_on && j + 1 >= a.col_lo && j + 1 <= a.col_hi && j + 1 < a.out_w;
    int q = a.col_pos + (j - a.col_lo);
    q -= q >= Q ? Q : 0;
    return on0 || on1 ? (q + 1) * 4 + int(on0) + 2 * int(on1) : 0;
}
// The values of a pair's two columns (pair_where's `where`) in one transform's result `buf` (the
// real half of complex element q >> 1 where q is even, the imaginary half where odd) into v, whose
// halves without overlap are left as they are (zeros).
__device__ __forceinline__ void pair_values(float2& v, const float2* buf, int pad, int where, int Q) {
    auto at = [&](int q) {
        const float2 c = buf[bf_pad(q >> 1, pad)];
        return q & 1 ? c.y : c.x;
    };
    const int q = (where >> 2) - 1;
    if (where & 1) v.x = at(q);
    if (where & 2) v.y = at(q + 1 == Q ? 0 : q + 1);
}

// W_Q^-j for stage 0's butterfly j of the untangling (untangled's w_j; 1 where the thread has none).
__device__ __forceinline__ float2 untangle_twiddle(const RowInverseArgs& a, int j, int H) {
    float2 w_j = make_float2(1.f, 0.f);
    if (j >= 0 && j <= H) {
        const float2 t = __ldg(a.untangle + j);
        w_j = make_float2(t.x, -t.y);
    }
    return w_j;
}

// Folds a step's gn rights (v[g]: columns j, j + 1 of right first + g) into a thread's column pair e,
// its columns u = 2 e + c (c < 2): each column's maximum and first index in the rights' order
// (fold_value), then one read-modify-write of its sums (the thread's own: no barrier). cur, idx and
// sums give column u's state (registers or shared memory, as the kernel keeps it).
template <int G, typename Cur, typename Idx, typename Sums>
__device__ __forceinline__ void fold_pair(const float2 (&v)[G], int gn, int first, int e, Cur cur, Idx idx, Sums sums) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
        const int u = 2 * e + c;
        double2 s = sums(u);
#pragma unroll
        for (int g = 0; g < G; ++g) {
            if (g >= gn) break;
            fold_value(c ? v[g].y : v[g].x, first + g, cur(u), idx(u), s);
        }
        sums(u) = s;
    }
}

// kReduce: the maximum over the rights (else the maps). G is an argument, not a template
// parameter: each instance expands every radix of the block FFT with pass 3's loader inlined per
// element (seconds of nvcc each), and a run-time G costs pass 3 ~2%; a run-time kReduce cost it 5%
// (notes/53_fft_large.md).
// kWide: the columns beyond kFoldChunk too (a.wide of them). The maps always take it (it costs them
// nothing measurable); the maximum has an instance without it, since the code it adds to the loop
// cost the 4096-wide 2-D template matching 3% (notes/53_fft_large.md).
template <bool kReduce, bool kWide>
__global__ void __launch_bounds__(kFoldThreads) row_inverse_kernel(RowInverseArgs a) {
    // G rights at a time (G transforms side by side, threads [g T, (g + 1) T) doing transform g's
    // butterflies, T = half.threads): a right's row is a short chain of dependent steps (load,
    // fold, three stages, fold into the maximum), and one block holds a multiprocessor's registers,
    // so G chains in one block keep G times the work in flight.
    const int G = a.group;
    extern __shared__ double2 smem[];
    __shared__ BlockFftStage stages[kBlockFftMaxStages];
    const int H = a.half.n, Q = 2 * H, K = H + 1, slot = block_fft_slot(H);
    // The running sums first (maximum only; column c of pair e of this thread at sums[(2 e + c)
    // kFoldThreads + thread], its sum and sum of squares side by side: one 16-byte access each, a
    // warp's consecutive). Then per transform g its buffer buf + g slot, and its coefficient k at
    // raw[k G + g] (as pass 2 lays them out). The maximum and its index stay in registers: 128
    // registers a thread hold those and a radix-18 butterfly, not the sums too.
    double2* sums = smem;
    float2* buf = reinterpret_cast<float2*>(smem + (kReduce ? kFoldChunk : 0));
    float2* raw = buf + G * slot;
    // A row wider than kFoldChunk (a 5760-wide K3 micrograph) in one block, so that its transform
    // runs once, not once a chunk: the columns beyond the chunk, x = j - kFoldChunk < a.wide, a
    // thread's x = threadIdx.x + n kFoldThreads, with their maximum, index and sums (maximum only)
    // in shared memory after `raw` (16-byte aligned; kFoldWideBytes a column). Their addresses are
    // taken where they are used: kept across the transform, they cost registers pass 3 lacks.
    auto xsums = [&] {
        const int before = 2 * kFoldChunk + G * (slot + K);  // float2 elements
        return reinterpret_cast<double2*>(reinterpret_cast<float2*>(smem) + before + (before & 1));
    };
    auto xcur = [&] { return reinterpret_cast<float*>(xsums() + a.wide); };
    auto xidx = [&] { return reinterpret_cast<int32_t*>(xcur() + a.wide); };
    block_fft_stages(a.half, stages);
    const int i = blockIdx.x;
    const int j0 = blockIdx.y * kFoldChunk;
    const bool row_on = i >= a.row_lo && i <= a.row_hi;
    const int T = a.half.threads, g_me = int(threadIdx.x) / T;
    float2* my_buf = buf + (g_me < G ? g_me : 0) * slot;
    const int my_j = g_me < G ? int(threadIdx.x) - g_me * T : -1;
    const float2 w_j = untangle_twiddle(a, my_j, H);  // W_Q^-j for stage 0's butterfly j = my_j
    // This thread's columns: pairs of neighbours j, j + 1 with j = pair_column(e) (even), e <
    // kFoldPairs; element u = 2 e + c of cur, idx and (shared) sums is column j + c.
    auto pair_column = [&](int e) { return j0 + 2 * (int(threadIdx.x) + e * kFoldThreads); };
    auto column = [&](int u) { return pair_column(u / 2) + u % 2; };
    auto sums_of = [&](int u) -> double2& { return sums[u * kFoldThreads + threadIdx.x]; };
    // Where pair e's values are, the same for every right (pair_where).
    int where[kFoldPairs];
#pragma unroll
    for (int e = 0; e < kFoldPairs; ++e) where[e] = pair_where(a, row_on, pair_column(e), Q);
    float cur[kFoldPerThread];
    int32_t idx[kFoldPerThread];
    if constexpr (kReduce) {
#pragma unroll
        for (int u = 0; u < kFoldPerThread; ++u) {
            const int j = column(u);
            double2& s = sums_of(u);
            cur[u] = NAN, idx[u] = -1, s = make_double2(0, 0);
            if (!a.fresh && j < a.out_w) load_running(a, int64_t(i) * a.out_w + j, cur[u], idx[u], s);
        }
        for (int x = threadIdx.x; kWide && x < a.wide; x += kFoldThreads) {
            float c = NAN;
            int32_t id = -1;
            double2 s = make_double2(0, 0);
            if (!a.fresh) load_running(a, int64_t(i) * a.out_w + kFoldChunk + x, c, id, s);
            xcur()[x] = c, xidx()[x] = id, xsums()[x] = s;
        }
    }
    // The row's coefficients of the step from right bb into `raw` as asynchronous copies, one
    // group: a strided read, a coefficient's G values (one 16-byte copy for a pair) every rows_src
    // G elements. Issued once the step before has untangled its own out of `raw`, so that they
    // travel while that step transforms and folds (notes/53_fft_large.md).
    auto stage_coefficients = [&](int bb) {
        const float2* in = a.src + (int64_t(bb / G) * K * a.rows_src + (i - a.row_lo)) * G;
        const int64_t step = int64_t(a.rows_src) * G;
        if (G == 2 && bb + 1 < a.batch)
            for (int k = threadIdx.x; k < K; k += blockDim.x)
                cp_async16(reinterpret_cast<float4*>(raw) + k, reinterpret_cast<const float4*>(in + k * step));
        else  // one right: its half of each pair (the other is not written)
            for (int k = threadIdx.x; k < K; k += blockDim.x) cp_async8(raw + k * G, in + k * step);
        cp_async_commit();
    };
    if (row_on) stage_coefficients(0);
    for (int b = 0; b < a.batch; b += G) {
        const int gn = min(G, a.batch - b);  // rights in this step
        if (row_on) {
            cp_async_wait_all();  // this thread's copies of the step; the barrier: everyone's
            __syncthreads();      // (and the fold of the step before is done with the buffers)
            // Z[k] (untangled) read by the transform's stage 0 from `raw` (block_fft_from), and `raw`
            // refilled with the next step's coefficients once it is.
            const int g = g_me < gn ? g_me : 0;
            auto load = [&](int k, int r) { return untangled(a, raw, G, g, H, k, r, w_j); };
            // Its loads inlined per radix: hoisted (one loop guarded by the radix, as in pass 1)
            // they cost pass 3 4-5% (notes/53_fft_large.md).
            block_fft_from<1, BfLoad::PerRadix>(my_buf, a.half, stages, g_me < gn ? my_j : -1, H, load, [&] {
                if (b + G < a.batch) stage_coefficients(b + G);
            });
        }
#pragma unroll
        for (int e = 0; e < kFoldPairs; ++e) {
            const int j = pair_column(e);
            if (j >= a.out_w) continue;
            float2 v[kMaxGroup];  // columns j, j + 1 of the step's rights
#pragma unroll
            for (int g = 0; g < kMaxGroup; ++g) {
                v[g] = make_float2(0.f, 0.f);
                if (g < gn) pair_values(v[g], buf + g * slot, a.half.pad, where[e], Q);
            }
            if constexpr (kReduce) {
                fold_pair(v, gn, a.first + b, e, [&](int u) -> float& { return cur[u]; },
                          [&](int u) -> int32_t& { return idx[u]; }, sums_of);
            } else {
#pragma unroll
                for (int g = 0; g < kMaxGroup; ++g) {
                    if (g >= gn) break;
                    float* o = a.out + (int64_t(b + g) * a.out_h + i) * a.out_w + j;
                    o[0] = v[g].x;
                    if (j + 1 < a.out_w) o[1] = v[g].y;
                }
            }
        }
        // The columns beyond the chunk, one at a time: the same values, fold and writes as above
        // (each thread its own columns' state: no barrier; the next step's barrier comes before
        // its transform overwrites buf).
        for (int x = threadIdx.x; kWide && x < a.wide; x += kFoldThreads) {
            const int j = kFoldChunk + x;
            const bool on = row_on && j >= a.col_lo && j <= a.col_hi;
            int q = a.col_pos + (j - a.col_lo);
            q -= q >= Q ? Q : 0;
            float v[kMaxGroup];
#pragma unroll
            for (int g = 0; g < kMaxGroup; ++g) {
                v[g] = 0.f;
                if (g < gn && on) {
                    const float2 c = buf[g * slot + bf_pad(q >> 1, a.half.pad)];
                    v[g] = q & 1 ? c.y : c.x;
                }
            }
            if constexpr (kReduce) {
                float c = xcur()[x];
                int32_t id = xidx()[x];
                double2 s = xsums()[x];
#pragma unroll
                for (int g = 0; g < kMaxGroup; ++g) {
                    if (g >= gn) break;
                    fold_value(v[g], a.first + b + g, c, id, s);
                }
                xcur()[x] = c, xidx()[x] = id, xsums()[x] = s;
            } else {
#pragma unroll
                for (int g = 0; g < kMaxGroup; ++g)
                    if (g < gn) a.out[(int64_t(b + g) * a.out_h + i) * a.out_w + j] = v[g];
            }
        }
    }
    if constexpr (kReduce) {
#pragma unroll
        for (int u = 0; u < kFoldPerThread; ++u) {
            const int j = column(u);
            if (j >= a.out_w) continue;
            store_running(a, int64_t(i) * a.out_w + j, cur[u], idx[u], sums_of(u));
        }
        for (int x = threadIdx.x; kWide && x < a.wide; x += kFoldThreads) {
            store_running(a, int64_t(i) * a.out_w + kFoldChunk + x, xcur()[x], xidx()[x], xsums()[x]);
        }
    }
}

// Pass 3's maximum, warp-specialized: 2-D template matching's case (rows of at most kFoldChunk
// columns, two rights a step, transforms of at most kWsTransformThreads / 2 threads each: H = 2160's
// 192). In row_inverse_kernel every warp transforms and then every warp folds, so the fold (~29% of
// its instructions, no barrier) and the transforms' stages (two barriers each, 4 of the 16 warps
// idle in them) take turns. Here 12 warps transform step s's two rights into one pair of buffers
// while 8 warps fold step s - 1's from the other pair, so the fold's instructions issue in the
// cycles the stages' barriers and dependent steps leave idle; the transform warps are the longer
// side (notes/53_fft_large.md). The 20 warps fit an SM's registers only because the fold's warpgroups
// give registers to the transforms' (setmaxnreg, sm_90a: on any other target the kernel is a trap
// and the host never takes it, sm90a_missing).
// Mapping: threads [0, kWsTransformThreads) as row_inverse_kernel's transform threads (g T + j),
// with named barrier 1 between their stages (BfSyncNamed) and the coefficients staged as there;
// fold thread f = threadIdx.x - kWsTransformThreads holds columns 2 (f + e kWsFoldThreads) + c (e <
// kWsPairs, c < 2): their maximum in registers, their index and sums in shared memory (an index is
// written only where the maximum moves). Pair p of buffers is handed over by two named barriers of
// all kWsThreads threads: 2 + p "full" (the transform warps arrive once its rows are written, the
// fold warps wait) and 4 + p "empty" (the fold warps arrive once they have read it, the transform
// warps wait before writing it again, two steps later; the fold warps do not arrive where no such
// step follows, so that no barrier is left with arrivals at the block's exit).
constexpr int kWsTransformThreads = 384;
constexpr int kWsFoldThreads = 256;
constexpr int kWsThreads = kWsTransformThreads + kWsFoldThreads;  // 20 warps, five warpgroups
constexpr int kWsPairs = (kFoldChunk / 2 + kWsFoldThreads - 1) / kWsFoldThreads;  // 8 column pairs a fold thread
constexpr int kWsPerThread = 2 * kWsPairs;
constexpr int kWsColumns = kWsPerThread * kWsFoldThreads;  // the sums' and indices' slots, >= kFoldChunk
// Registers: 640 threads at the launch's 96 each (65536 / 640, rounded down to 8); the transform
// warpgroups take 112 (setmaxnreg.inc) from what the fold warpgroups give back (setmaxnreg.dec to
// 64): 384 x 112 + 256 x 64 = 59392 <= 640 x 96, no spill (120 and 56, or 128 and 48, spill).
constexpr int kWsTransformRegs = 112, kWsFoldRegs = 64;
__device__ __forceinline__ void named_arrive(int id, int count) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void named_sync(int id, int count) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

__global__ void __launch_bounds__(kWsThreads, 1) row_max_ws_kernel(RowInverseArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int G = kMaxGroup;
    extern __shared__ double2 smem[];
    __shared__ BlockFftStage stages[kBlockFftMaxStages];
    const int H = a.half.n, Q = 2 * H, K = H + 1, slot = block_fft_slot(H);
    // The sums (column u = 2 e + c of fold thread f at sums[u kWsFoldThreads + f]), then the two
    // pairs of transform buffers (pair p, transform g at bufs + (p G + g) slot), then the step's
    // coefficients (raw[k G + g], as pass 2 lays them out), then the indices (as the sums).
    double2* sums = smem;
    float2* bufs = reinterpret_cast<float2*>(smem + kWsColumns);
    float2* raw = bufs + 2 * G * slot;
    int32_t* idxs = reinterpret_cast<int32_t*>(raw + G * K);
    block_fft_stages(a.half, stages);
    __syncthreads();  // the stage table: the block's one barrier of all its threads
    const int i = blockIdx.x;
    const bool row_on = i >= a.row_lo && i <= a.row_hi;
    const int steps = (a.batch + G - 1) / G;
    if (threadIdx.x < kWsTransformThreads) {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kWsTransformRegs));
        const int T = a.half.threads, g_me = int(threadIdx.x) / T;
        const int my_j = g_me < G ? int(threadIdx.x) - g_me * T : -1;
        const float2 w_j = untangle_twiddle(a, my_j, H);  // W_Q^-j for stage 0's butterfly j = my_j
        auto stage_coefficients = [&](int bb) {  // as row_inverse_kernel's, over these threads
            const float2* in = a.src + (int64_t(bb / G) * K * a.rows_src + (i - a.row_lo)) * G;
            const int64_t step = int64_t(a.rows_src) * G;
            if (bb + 1 < a.batch)
                for (int k = threadIdx.x; k < K; k += kWsTransformThreads)
                    cp_async16(reinterpret_cast<float4*>(raw) + k, reinterpret_cast<const float4*>(in + k * step));
            else
                for (int k = threadIdx.x; k < K; k += kWsTransformThreads) cp_async8(raw + k * G, in + k * step);
            cp_async_commit();
        };
        if (row_on) stage_coefficients(0);
        for (int s = 0; s < steps; ++s) {
            const int b = s * G, gn = min(G, a.batch - b), p = s & 1;
            if (s >= 2) named_sync(4 + p, kWsThreads);  // the fold warps have read step s - 2's rows
            if (row_on) {
                cp_async_wait_all();
                named_sync(1, kWsTransformThreads);  // every transform thread's copies of the step
                const int g = g_me < gn ? g_me : 0;
                auto load = [&](int k, int r) { return untangled(a, raw, G, g, H, k, r, w_j); };
                float2* my_buf = bufs + (p * G + (g_me < G ? g_me : 0)) * slot;
                block_fft_from<1, BfLoad::PerRadix>(
                    my_buf, a.half, stages, g_me < gn ? my_j : -1, H, load,
                    [&] {
                        if (b + G < a.batch) stage_coefficients(b + G);
                    },
                    BfSyncNamed{1, kWsTransformThreads});
            }
            named_arrive(2 + p, kWsThreads);  // pair p holds step s's rows
        }
    } else {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kWsFoldRegs));
        const int f = int(threadIdx.x) - kWsTransformThreads;
        auto pair_column = [&](int e) { return 2 * (f + e * kWsFoldThreads); };
        auto sums_of = [&](int u) -> double2& { return sums[u * kWsFoldThreads + f]; };
        auto idx_of = [&](int u) -> int32_t& { return idxs[u * kWsFoldThreads + f]; };
        int where[kWsPairs];
#pragma unroll
        for (int e = 0; e < kWsPairs; ++e) where[e] = pair_where(a, row_on, pair_column(e), Q);
        float cur[kWsPerThread];
#pragma unroll
        for (int u = 0; u < kWsPerThread; ++u) {
            const int j = pair_column(u / 2) + u % 2;
            double2& sm = sums_of(u);
            int32_t id = -1;
            cur[u] = NAN, sm = make_double2(0, 0);
            if (!a.fresh && j < a.out_w) load_running(a, int64_t(i) * a.out_w + j, cur[u], id, sm);
            idx_of(u) = id;
        }
        for (int s = 0; s < steps; ++s) {
            const int b = s * G, gn = min(G, a.batch - b), p = s & 1;
            const float2* buf = bufs + p * G * slot;
            named_sync(2 + p, kWsThreads);  // step s's rows are in pair p
#pragma unroll
            for (int e = 0; e < kWsPairs; ++e) {
                const int j = pair_column(e);
                if (j >= a.out_w) continue;
                float2 v[G];  // columns j, j + 1 of the step's rights
#pragma unroll
                for (int g = 0; g < G; ++g) {
                    v[g] = make_float2(0.f, 0.f);
                    if (g < gn) pair_values(v[g], buf + g * slot, a.half.pad, where[e], Q);
                }
                fold_pair(v, gn, a.first + b, e, [&](int u) -> float& { return cur[u]; }, idx_of, sums_of);
            }
            if (s + 2 < steps) named_arrive(4 + p, kWsThreads);  // pair p is free for step s + 2
        }
#pragma unroll
        for (int u = 0; u < kWsPerThread; ++u) {
            const int j = pair_column(u / 2) + u % 2;
            if (j < a.out_w) store_running(a, int64_t(i) * a.out_w + j, cur[u], idx_of(u), sums_of(u));
        }
    }
#else
    __trap();  // never launched: the host takes it only with sm_90a code (sm90a_missing)
#endif
}

// Whether block_fft has a schedule for n (block_fft_radices: radices up to 18, at most 512
// butterflies a stage); a column of P points without one takes the long pass (column_long_kernel).
bool has_block_fft_schedule(int n) {
    try {
        block_fft_radices(n);
        return true;
    } catch (const std::invalid_argument&) {
        return false;
    }
}

// The transform length for `need` points: the smallest 7-smooth n >= need (even when asked) that
// the block FFT has a schedule for (for an even length, its half, which the row passes transform),
// at most 18^3 = 5832, the longest. Beyond it, for a column (not even): the smallest 7-smooth n >=
// need up to kBlockFftMaxLongN, every one of which has a long schedule (column_long_kernel's). 0
// where none is.
int scheduled_length(int need, bool even) {
    for (int n = std::max(need, even ? 2 : 1); n <= (even ? 2 : 1) * kBlockFftMaxN; ++n)
        if (is_7_smooth(n) && !(even && n % 2) && has_block_fft_schedule(even ? n / 2 : n)) return n;
    if (!even)
        for (int n = std::max(need, 1); n <= kBlockFftMaxLongN; ++n)
            if (is_7_smooth(n)) return n;
    return 0;
}

class FftLarge final : public Instance {
public:
    FftLarge(const Problem& p, bool left_fixed) : p_(p), left_fixed_(left_fixed) {
        if (p.form != Form::OneToOne && p.form != Form::OneToMany)
            throw UsageError("fft-large computes one-to-one and one-to-many only");
        w_ = p.shifts();
        fy_ = fit_axis(w_.dy0, w_.dy1, p.hL, p.hR);
        fx_ = fit_axis(w_.dx0, w_.dx1, p.wL, p.wR);
        empty_ = fy_.empty() || fx_.empty();
        if (empty_) {  // no transform: run writes zeros, run_max folds them (pass 3 alone)
            allow_fold();
            return;
        }
        P_ = scheduled_length(fy_.need, false);
        Q_ = scheduled_length(fx_.need, true);
        if (P_ == 0 || Q_ == 0)
            throw UsageError("fft-large: the window needs transforms of " + std::to_string(fy_.need) + " x " +
                             std::to_string(fx_.need) + " points; it holds at most " +
                             std::to_string(kBlockFftMaxLongN) + " a side: use fft");
        H_ = Q_ / 2;
        K_ = H_ + 1;
        long_cols_ = !has_block_fft_schedule(P_);
        if (long_cols_) {
            col_fwd_ = col_inv_ = make_plan(block_fft_host(P_, true), col_fwd_tw_);
        } else {
            BlockFftPair cols = block_fft_host_pair(P_);
            col_fwd_ = make_plan(cols.fwd, col_fwd_tw_);
            col_inv_ = make_plan(cols.inv, col_inv_tw_);
        }
        half_plan_ = make_plan(block_fft_host(H_), half_tw_);
        // W_Q^k = exp(-2 pi i k / Q) (k <= H), in double and rounded: the rows' untangling (passes 1
        // and 3).
        std::vector<float2> untangle(static_cast<size_t>(K_));
        for (int k = 0; k < K_; ++k) {
            const double t = -2.0 * 3.14159265358979323846 * double(k) / double(Q_);
            untangle[size_t(k)] = make_float2(float(std::cos(t)), float(std::sin(t)));
        }
        // exp(i pi r / R) (r < R, the half plan's first radix): pass 3's W_Q^-(r m), in double and rounded.
        const int r0 = half_plan_.stages > 0 ? half_plan_.st[0].r : 1;
        for (int r = 0; r < r0; ++r) {
            const double t = 3.14159265358979323846 * double(r) / double(r0);
            half_turn_[r] = make_float2(float(std::cos(t)), float(std::sin(t)));
        }
        untangle_ = DeviceBuffer<float2>(untangle.size());
        upload(untangle_, untangle.data(), untangle.size());  // in device memory before any stream's kernel
        // Output rows with overlap: shifts lo .. hi, rows lo - dy0 .. hi - dy0 of the window.
        row_lo_ = fy_.lo - w_.dy0, row_hi_ = fy_.hi - w_.dy0;
        col_lo_ = fx_.lo - w_.dx0, col_hi_ = fx_.hi - w_.dx0;
        out_rows_ = row_hi_ - row_lo_ + 1;
        first_pos_ = wrap(fy_.lo + fy_.r0 - fy_.l0, P_);
        col_pos_ = wrap(fx_.lo + fx_.r0 - fx_.l0, Q_);  // column col_lo's; the window's columns with
                                                          // overlap span at most Q: one wrap at most
        // The batch: as many rights as kBatchBytes of pass 2's output holds, fewer where the GPU's
        // free memory (less the left's spectrum) does not hold them; at least one, or a UsageError
        // naming the memory the problem needs.
        const int64_t per_right = int64_t(K_) * (out_rows_ + fy_.rn) * int64_t(sizeof(float2));
        const int64_t fixed = int64_t(K_) * (P_ + fy_.ln) * int64_t(sizeof(float2));
        size_t free_b = 0, total_b = 0;
        XC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        const int64_t room = int64_t(double(free_b) * 0.9) - fixed;
        if (room < per_right)
            throw UsageError("not enough GPU memory for fft-large: " + p.describe() + " needs " +
                             std::to_string((fixed + per_right) >> 20) + " MiB (the left's spectrum and one right's "
                             "passes), " + std::to_string(free_b >> 20) + " MiB free");
        batch_ = int(std::clamp<int64_t>(std::min(kBatchBytes, room) / per_right, 1, kMaxBatch));
        batch_ = std::min(batch_, p.nR);
        if (half_plan_.threads > kFoldThreads)
            throw UsageError("fft-large: no row schedule of " + std::to_string(H_) + " points within " +
                             std::to_string(kFoldThreads) + " threads");
        // Pass 3 takes two rights at a time where two transforms fit the block's threads; pass 2 then
        // lays each pair's columns side by side, and an odd batch's last right takes a pair's room.
        // An odd batch leaves pass 3's last step half idle: it stays odd only where it holds every
        // right and the room allows the extra half pair.
        pair_rights_ = kMaxGroup * half_plan_.threads <= kFoldThreads && batch_ > 1;
        if (pair_rights_ && batch_ % 2 && (batch_ < p.nR || int64_t(batch_ + 1) * per_right > room)) --batch_;
        const int slots = pair_rights_ ? batch_ + batch_ % 2 : batch_;
        // Dynamic shared memory per kernel (row_smem, column_smem, inverse_smem, below), before
        // anything is allocated: a GPU that allows less (sm_86/sm_89: 99 KB a block) refuses the
        // problem with a UsageError, which auto passes over (launch.cuh).
        allow_dynamic_smem(row_forward_kernel, size_t(row_smem()), "fft-large");
        if (long_cols_) allow_dynamic_smem(column_long_kernel, size_t(column_smem()), "fft-large");
        else allow_dynamic_smem(column_kernel, size_t(column_smem()), "fft-large");
        allow_dynamic_smem(inverse_kernel(false, true), size_t(inverse_smem(false)), "fft-large");
        allow_fold();
        spec_ = DeviceBuffer<float2>(size_t(K_) * P_);
        rows_ = DeviceBuffer<float2>(size_t(K_) * std::max<int64_t>(fy_.ln, int64_t(fy_.rn) * batch_));
        cols_ = DeviceBuffer<float2>(size_t(int64_t(K_) * out_rows_ * slots));
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        if (empty_) {
            XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(p_.out_elems()) * sizeof(float), stream));
            return;
        }
        left_spectrum(left, stream);
        for (int b0 = 0; b0 < p_.nR; b0 += batch_) {
            const int nb = std::min(batch_, p_.nR - b0);
            rights_columns(right, b0, nb, stream);
            RowInverseArgs a = inverse_args(nb);
            a.out = out + int64_t(b0) * p_.out_h() * p_.out_w();
            launch_inverse<false>(a, stream);
        }
    }

    bool takes_max_over_rights() const override { return folds_max_; }
    void run_max(const float* left, const float* right, const ReducedOutputs& out, int32_t first, bool fresh,
                 cudaStream_t stream) override {
        if (!empty_) left_spectrum(left, stream);
        for (int b0 = 0; b0 < p_.nR; b0 += batch_) {
            const int nb = std::min(batch_, p_.nR - b0);
            if (!empty_) rights_columns(right, b0, nb, stream);
            RowInverseArgs a = inverse_args(nb);
            a.value = out.value, a.index = out.index, a.sum = out.sum, a.sumsq = out.sumsq;
            a.first = first + b0;
            a.fresh = fresh && b0 == 0;
            launch_inverse<true>(a, stream);
        }
    }

private:
    static int wrap(int v, int n) { return ((v % n) + n) % n; }
    // The maximum's pass 3 where this GPU's shared memory holds it (its running sums take 64 KB
    // more than the maps'): a row wider than kFoldChunk in one block where its columns' state fits
    // too (fold_wide_), else in column chunks, each transforming the row again; where neither
    // fits, a reduced plan takes the maximum from maps instead (takes_max_over_rights false),
    // where the maps' passes fit.
    void allow_fold() {
        const int extra = std::max(0, int(p_.out_w()) - kFoldChunk);
        for (const int wide : {extra, 0}) {
            try {
                allow_dynamic_smem(inverse_kernel(true, wide > 0), size_t(inverse_smem(true, wide)), "fft-large");
                folds_max_ = true, fold_wide_ = wide;
                break;
            } catch (const UsageError&) {
            }
        }
        // The warp-specialized maximum (row_max_ws_kernel) where its case holds, the GPU runs its
        // sm_90a code and its second pair of buffers fits the GPU's shared memory.
        fold_ws_ = false;
        if (folds_max_ && fold_wide_ == 0 && extra == 0 && pair_rights_ &&
            kMaxGroup * half_plan_.threads <= kWsTransformThreads && sm90a_missing().empty()) {
            try {
                allow_dynamic_smem(row_max_ws_kernel, size_t(ws_smem()), "fft-large");
                fold_ws_ = true;
            } catch (const UsageError&) {
            }
        }
    }
    // The rights pass 3 takes at a time (its G), and so pass 2's interleave.
    int group() const { return pair_rights_ ? kMaxGroup : 1; }

    static BlockFftPlan make_plan(BlockFftHost h, DeviceBuffer<float2>& tw) {
        tw = DeviceBuffer<float2>(h.twiddles.size());
        // upload, not cudaMemcpy: the copy must be in device memory before the plan's kernels run on
        // the caller's stream, which need not wait for the default stream (device_buffer.hpp).
        upload(tw, h.twiddles.data(), h.twiddles.size());
        h.plan.tw = tw.get();
        return h.plan;
    }

    // Dynamic shared memory: pass 1 the row's transform; pass 2 the column's and the left's column;
    // pass 3 the row's transform, its coefficients and (maximum) the running sums.
    int row_smem() const { return block_fft_slot(H_) * int(sizeof(float2)); }
    int column_smem() const {
        return (long_cols_ ? 2 * block_fft_slot(P_) : block_fft_slot(P_) + P_) * int(sizeof(float2));
    }
    void launch_columns(const ColumnArgs& a, cudaStream_t stream) const {
        if (long_cols_) column_long_kernel<<<unsigned(K_), kBlockFftMaxThreads, column_smem(), stream>>>(a);
        else column_kernel<<<unsigned(K_), col_fwd_.threads, column_smem(), stream>>>(a);
        XC_CHECK_LAUNCH();
    }
    int ws_smem() const {
        return kWsColumns * int(sizeof(double2) + sizeof(int32_t)) +
               kMaxGroup * (2 * block_fft_slot(half_plan_.n) + half_plan_.n + 1) * int(sizeof(float2));
    }
    int inverse_smem(bool reduce, int wide = 0) const {
        return group() * (block_fft_slot(half_plan_.n) + half_plan_.n + 1) * int(sizeof(float2)) +
               (reduce ? kFoldSumBytes + wide * kFoldWideBytes + (wide ? 8 : 0) : 0);
    }

    void row_forward(const float* src, int64_t stride, int w, int row0, int col0, int rows, int cols, int matrices,
                     cudaStream_t stream) {
        RowForwardArgs a{src, stride, w, row0, col0, rows, cols, rows_.get(), half_plan_, untangle_.get()};
        row_forward_kernel<<<dim3(unsigned(rows), unsigned(matrices)), half_plan_.threads, row_smem(), stream>>>(a);
        XC_CHECK_LAUNCH();
    }

    void left_spectrum(const float* left, cudaStream_t stream) {
        if (left_fixed_ && spec_left_ == left) return;  // the caller said the left does not change
        row_forward(left, 0, p_.wL, fy_.l0, fx_.l0, fy_.ln, fx_.ln, 1, stream);
        ColumnArgs a{};
        a.src = rows_.get(), a.rows_in = fy_.ln, a.matrices = 1, a.fwd = col_fwd_, a.inv = col_inv_;
        a.scale = float(1.0 / (double(P_) * double(Q_)));
        a.left_out = spec_.get();
        launch_columns(a, stream);
        spec_left_ = left;
    }

    void rights_columns(const float* right, int b0, int nb, cudaStream_t stream) {
        const int64_t R = int64_t(p_.hR) * p_.wR;
        row_forward(right + int64_t(b0) * R, R, p_.wR, fy_.r0, fx_.r0, fy_.rn, fx_.rn, nb, stream);
        ColumnArgs a{};
        a.src = rows_.get(), a.rows_in = fy_.rn, a.matrices = nb, a.fwd = col_fwd_, a.inv = col_inv_;
        a.spec = spec_.get(), a.dst = cols_.get(), a.first_pos = first_pos_, a.out_rows = out_rows_;
        a.interleave = group();  // as pass 3 takes them
        launch_columns(a, stream);
    }

    RowInverseArgs inverse_args(int nb) const {
        RowInverseArgs a{};
        a.src = cols_.get(), a.rows_src = out_rows_, a.batch = nb, a.half = half_plan_, a.untangle = untangle_.get();
        std::copy(std::begin(half_turn_), std::end(half_turn_), a.half_turn);
        a.row_lo = empty_ ? 1 : row_lo_, a.row_hi = empty_ ? 0 : row_hi_;  // empty: no row has overlap
        a.col_lo = col_lo_, a.col_hi = col_hi_, a.col_pos = col_pos_;
        a.out_h = p_.out_h(), a.out_w = p_.out_w();
        a.group = group();
        return a;
    }

    // A row wider than kFoldChunk: one block takes it whole (its transform once) for the maps
    // always, and for the maximum where the extra columns' state fits (fold_wide_).
    static decltype(&row_inverse_kernel<true, true>) inverse_kernel(bool reduce, bool wide) {
        return reduce ? (wide ? row_inverse_kernel<true, true> : row_inverse_kernel<true, false>)
                      : row_inverse_kernel<false, true>;
    }
    template <bool kReduce>
    void launch_inverse(RowInverseArgs a, cudaStream_t stream) {
        a.wide = kReduce ? fold_wide_ : std::max(0, a.out_w - kFoldChunk);
        if (kReduce && fold_ws_) {  // out_w <= kFoldChunk: one block a row
            row_max_ws_kernel<<<unsigned(a.out_h), kWsThreads, ws_smem(), stream>>>(a);
            XC_CHECK_LAUNCH();
            return;
        }
        const dim3 grid(unsigned(a.out_h), a.wide > 0 ? 1u : unsigned(ceil_div(a.out_w, kFoldChunk)));
        inverse_kernel(kReduce, a.wide > 0)<<<grid, kFoldThreads, inverse_smem(kReduce, a.wide), stream>>>(a);
        XC_CHECK_LAUNCH();
    }

    Problem p_;
    bool left_fixed_ = false;
    Window w_{};
    AxisFit fy_{}, fx_{};
    bool empty_ = false;
    int P_ = 0, Q_ = 0, H_ = 0, K_ = 0;
    int row_lo_ = 0, row_hi_ = -1, col_lo_ = 0, col_hi_ = -1, out_rows_ = 0, first_pos_ = 0, col_pos_ = 0;
    int batch_ = 1;
    bool pair_rights_ = false;  // pass 3 takes two rights at a time
    bool long_cols_ = false;    // pass 2 is column_long_kernel (P beyond block_fft's schedules)
    bool folds_max_ = false;    // the maximum's pass 3 fits this GPU's shared memory
    int fold_wide_ = 0;         // the maximum's pass 3: columns beyond kFoldChunk a block takes (else chunks)
    bool fold_ws_ = false;      // the maximum's pass 3 is row_max_ws_kernel
    float2 half_turn_[kBlockFftMaxRadix] = {};
    BlockFftPlan col_fwd_, col_inv_, half_plan_;  // col_inv_: col_fwd_'s radices reversed (block_fft_correlate;
                                                  // long columns: col_fwd_ itself)
    DeviceBuffer<float2> col_fwd_tw_, col_inv_tw_, half_tw_, untangle_, spec_, rows_, cols_;
    const float* spec_left_ = nullptr;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "fft-large",
    .family = "hopper",
    .summary = "FFT beyond one block: pruned row transforms of the nonzero rows, a column pass with the "
               "product between its forward and inverse DFTs, a row pass that writes only the window (or "
               "folds the maximum over the rights); no padded slot in DRAM",
    .timed = "left spectrum + row, column and row passes (everything)",
    .precision = "fp32",
    .tolerance = 1e-5,
    .forms = {Form::OneToOne, Form::OneToMany},
    .params = {{"left",
                {"each-call", "fixed"},
                "the left's spectrum: computed in every call, or once (fixed: the caller promises that the left "
                "at the same address does not change between calls; 2-D template matching's image)"}},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<FftLarge>(p, ps.at("left") == "fixed");
    },
    .pilot_batch = true,
    .folds_max_over_rights = true,
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
});

}  // namespace
}  // namespace xcorr::fft_large
