// Warp-wise buffers of the warp-shuffle algorithm (paper, section 4.1.1; thesis, section 3.4.1).
//
// A warp-wise buffer is spread over the registers of the 32 lanes of a warp: item i of the buffer
// lives in lane i mod 32. The warp-shuffle kernels keep one row of the left matrix in a 64-item
// window (two registers per lane: items 0..31 in `lo`, 32..63 in `hi`) and one row of the right
// matrix in a 32-item buffer (one register per lane). In step s (0..31) of a 32-step block, lane t
// needs left item t + s and right item s (the same for every lane: a broadcast). After the block,
// `hi` becomes `lo` and one coalesced 32-wide load refills `hi`; one more refills the right buffer.
// Values outside a matrix are loaded as zeros, so the loads hold the only boundary condition.
//
// Two ways to read the left window, chosen at compile time (both give identical results):
//   LeftMode::Index  (default): the window does not move. Lane t reads item t + s with ONE shuffle
//       from lane (t + s) mod 32, whose sender offers `lo` when it is at or right of s, else `hi`
//       (a select on the sending side). 1 shuffle + 1 select per step and left row; the select
//       predicate and the source lane are shared by all left rows of a step.
//   LeftMode::Rotate (the paper's code): the window is shifted left by one item after every step,
//       `lo <- shfl(lane != 0 ? lo : hi, lane + 1)`, `hi <- shfl_down(hi, 1)`, and each lane reads
//       its own `lo`. 2 shuffles + 1 select per step and left row.
// Shuffles issue at a quarter of the FMA rate on sm_80/sm_90, and the warp-shuffle kernels are
// bound by them, so the Index mode is the faster one; Rotate is kept to reproduce the paper.
//
// Every function must be called by all 32 lanes of a warp together (full-mask shuffles). `at` and
// `broadcast` expect the step index to be a compile-time constant after unrolling (inside
// `#pragma unroll` loops with constant bounds): then the broadcast takes an immediate lane and
// step 0 of the left window needs no shuffle; `at_any` serves partially unrolled loops.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/device.cuh"

namespace xcorr {

enum class LeftMode : int { Index = 0, Rotate = 1 };

// The lane index of the calling thread (threadIdx.x of a 32-wide block row).
__device__ __forceinline__ int lane_id() { return int(threadIdx.x) & (kWarp - 1); }

// The lane index re-read from the hardware register, opaque to the compiler. Pass it to `at` /
// `advance` from inside the loop over 32-step blocks: otherwise ptxas hoists the 31 source lanes
// lane + step of the Index mode out of the loop and keeps them in 31 registers for the kernel's
// lifetime; re-read per block, it computes each with one add per step.
__device__ __forceinline__ int lane_id_fresh() {
    int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

// Bounds-checked load of column c of one row (row already known to be inside the matrix):
// zero when c is outside [0, w). One comparison (unsigned) per load.
__device__ __forceinline__ float load_col_or_zero(const float* __restrict__ row, int w, int c) {
    return unsigned(c) < unsigned(w) ? __ldg(row + c) : 0.0f;
}

// Bounds-checked load of element (r, c) of one h x w matrix `m` (already offset to its place in
// the stack with int64 arithmetic). The offset within the matrix is int32 (one IMAD instead of
// a 64-bit multiply-add per load): callers ensure h * w < 2^31 (fits_int32_matrix).
__device__ __forceinline__ float load_rc_or_zero(const float* __restrict__ m, int h, int w, int r, int c) {
    return (unsigned(r) < unsigned(h) && unsigned(c) < unsigned(w)) ? __ldg(m + (r * w + c)) : 0.0f;
}

// The 64-item left window: items [0, 32) in `lo`, [32, 64) in `hi` (lane t holds items t, t + 32).
template <LeftMode MODE>
struct LeftWindow {
    float lo, hi;

    // Left item lane + step of the window as it was at step 0. For Rotate mode this is only right
    // when `advance(step)` was called after every earlier step of the block.
    __device__ __forceinline__ float at(int step, int lane) const {
        if constexpr (MODE == LeftMode::Index) {
            if (step == 0) return lo;  // own item, no shuffle
            const float offer = lane >= step ? lo : hi;
            return __shfl_sync(kFullMask, offer, lane + step);  // source lane taken mod 32
        } else {
            return lo;
        }
    }
    // The same for a step that is not a compile-time constant (partially unrolled loops): Index
    // mode only, and step 0 costs a shuffle too.
    __device__ __forceinline__ float at_any(int step, int lane) const {
        static_assert(MODE == LeftMode::Index, "Rotate mode reads lo and needs every advance()");
        const float offer = lane >= step ? lo : hi;
        return __shfl_sync(kFullMask, offer, lane + step);
    }
    // After the read of `step`: Rotate mode moves the window left by one item; Index mode no-op.
    __device__ __forceinline__ void advance(int /*step*/, int lane) {
        if constexpr (MODE == LeftMode::Rotate) {
            const float offer = lane != 0 ? lo : hi;  // lane 0 feeds lane 31 from the top half
            lo = __shfl_sync(kFullMask, offer, lane + 1);
            hi = __shfl_down_sync(kFullMask, hi, 1);
        }
    }
    // End of a 32-step block: the top half slides down and `next_hi` (items 64..95 of the old
    // window) is the new top half. In Rotate mode `lo` already holds the old `hi` after 32 moves.
    __device__ __forceinline__ void refill(float next_hi) {
        if constexpr (MODE == LeftMode::Index) lo = hi;
        hi = next_hi;
    }
};

// Right item `step` of a 32-item buffer, broadcast to every lane (one shuffle).
__device__ __forceinline__ float broadcast(float right, int step) {
    return __shfl_sync(kFullMask, right, step);
}

// The columns of the right matrix that a warp needs when its 32 lanes compute the 32 adjacent
// output columns x0 .. x0+31 of one output row: the union over the lanes of each lane's overlap
// columns, [begin, end), with dx0 = x0 - (wR - 1) the column shift of lane 0. Nonempty whenever
// lane 0 is inside the output (x0 < wL + wR - 1). Lanes whose own overlap is narrower read zeros
// from the left window outside the left matrix, which is why they need no condition.
struct WarpColumns {
    int begin, end, dx0;
    __device__ __forceinline__ int chunks() const { return ceil_div(end - begin, kWarp); }
};
__device__ __forceinline__ WarpColumns warp_columns(int x0, int wL, int wR) {
    const int dx0 = x0 - (wR - 1);
    const int b = -(dx0 + kWarp - 1);
    const int e = wL - dx0;
    return WarpColumns{b > 0 ? b : 0, e < wR ? e : wR, dx0};
}

// The warp-shuffle inner loop (02_warp_shuffle.cu, 03_split_row.cu): one lane's sum of products
// over the overlap rows [first, last) of the output row with row shift dy (last > first), for the
// warp's columns `cols`; lcol = cols.dx0 + lane, the lane's left column of step 0. It walks
// (row, 32-column chunk) steps with the next step's three loads in flight under the 32 FMAs of
// the current one. Must be called by all 32 lanes of the warp together.
template <LeftMode MODE>
__device__ __forceinline__ float warp_shuffle_rows(const float* L, int hL, int wL, const float* R, int hR, int wR,
                                                   int dy, int first, int last, const WarpColumns& cols, int lane,
                                                   int lcol) {
    const int steps = (last - first) * cols.chunks();
    int r = first, c = cols.begin;
    LeftWindow<MODE> win{load_rc_or_zero(L, hL, wL, r + dy, c + lcol),
                         load_rc_or_zero(L, hL, wL, r + dy, c + lcol + kWarp)};
    float rbuf = load_rc_or_zero(R, hR, wR, r, c + lane);
    float sum = 0.0f;
    for (int i = 0; i < steps; ++i) {
        int cn = c + kWarp, rn = r;
        if (cn >= cols.end) cn = cols.begin, ++rn;
        // Prefetch the next (row, chunk); after the last one row -1 makes the guards skip it.
        const int lrow = i + 1 < steps ? rn + dy : -1, rrow = i + 1 < steps ? rn : -1;
        const float next_lo = load_rc_or_zero(L, hL, wL, lrow, cn + lcol);
        const float next_hi = load_rc_or_zero(L, hL, wL, lrow, cn + lcol + kWarp);
        const float next_r = load_rc_or_zero(R, hR, wR, rrow, cn + lane);
        const int ln = lane_id_fresh();
#pragma unroll
        for (int s = 0; s < kWarp; ++s) {
            sum = fmaf(win.at(s, ln), broadcast(rbuf, s), sum);
            win.advance(s, ln);
        }
        win.lo = next_lo, win.hi = next_hi, rbuf = next_r;
        r = rn, c = cn;
    }
    return sum;
}

// The kernels that look pairs up with PairMap::pair32 (32-bit arithmetic) need fewer than 2^31
// outputs.
inline bool fits_int32_count(const Problem& p) { return p.out_count() < (int64_t(1) << 31); }
// Every single matrix (left, right, output) has fewer than 2^31 elements: int32 offsets inside one.
inline bool fits_int32_matrix(const Problem& p) {
    return int64_t(p.out_h()) * p.out_w() < (int64_t(1) << 31);
}

// Heaviest work first: maps launch position k of n (blockIdx) to the index n/2, n/2+1, n/2-1, ...
// The warp-shuffle kernels' tasks are heaviest in the middle of the output (the largest overlaps);
// issuing those blocks first lets the block scheduler pair a heavy block with a light one on each
// SM when the grid fits in about one wave, instead of stacking neighbouring heavy blocks.
__device__ __forceinline__ int middle_out(int k, int n) {
    const int mid = (n - 1) >> 1;
    return (k & 1) ? mid + ((k + 1) >> 1) : mid - (k >> 1);
}

}  // namespace xcorr
