// The multi-matrix warp-shuffle machinery shared by the six multi-matrix variants
// (algorithms/10_* .. 15_*; paper sections 3.4 and 4.3, thesis 3.4.4 and 3.5), device side: one
// register-blocked band step that all of them run, the grouped-overlap walk and the split-row
// worker -> job map. The host side (how a stack is cut into matrix groups, the split-row plans,
// the block order, the stream fan-out for n-to-mn) is algorithms/common/multi_matrix_launch.cuh.
//
// The band step generalises the warp-shuffle inner loop (common/warp_buffer.cuh) along the three
// reuse axes of the paper at once, all compile-time:
//   NL  left matrices   (multi-matrix-both)     each left value meets NR right matrices,
//   NR  right matrices  (multi-matrix-right)    each right value meets NL left matrices,
//   S   overlaps        (grouped-overlap)       S vertically adjacent output rows per thread,
//   LR  left rows       (grouped-overlap)       LR left rows per step, S + LR - 1 right rows.
// Per step (one of 32 right columns of a chunk) a lane does NL*LR left shuffles (one each, the
// window is indexed, not rotated: see warp_buffer.cuh), (S+LR-1)*NR right broadcasts and
// S*LR*NL*NR FMAs (those with 0 <= s < S). The paper's counts are the same with two shuffles per
// left value: 2 + r : r for multi-matrix-right, 2l + r : l*r for both, l + (s+l-1) : l*s grouped.
// All register arrays are indexed with compile-time constants only (fully unrolled loops).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/device.cuh"
#include "common/warp_buffer.cuh"
#include "xcorr/core.hpp"

namespace xcorr::multi {

// Warps per block in every multi-matrix kernel (the paper's experiments all use 4 warps); the
// warps of a block take adjacent output rows (or row groups, or split-row workers).
inline constexpr int kWarps = 4;

// Blocks per SM promised to ptxas (__launch_bounds__ min blocks), so that its register cap,
// 65536 / (128 * blocks), fits the band's live arrays (sums; per left row a window, a shuffled
// value and a 64-bit row address; right buffers) plus about 64 registers of loop state and of
// shuffled values of the next steps. Left to itself, ptxas picks its own occupancy target and
// spills a few cold values (a strict-build error) even at 72 registers; with a cap it spills only
// when the cap is really too small (the constant 64 is the smallest without spills here).
template <int NL, int NR, int S, int LR>
inline constexpr int kMinBlocks =
    std::clamp(65536 / (kWarp * kWarps * (S * NL * NR + 5 * NL * LR + (S + LR - 1) * NR + 64)), 1, 8);

struct Geometry {
    int hL, wL, hR, wR, out_h, out_w;
    int64_t left_size, right_size, out_size;  // elements of one matrix
};
inline Geometry geometry(const Problem& p) {
    return Geometry{p.hL, p.wL, p.hR, p.wR, p.out_h(), p.out_w(), int64_t(p.hL) * p.wL,
                    int64_t(p.hR) * p.wR, int64_t(p.out_h()) * p.out_w()};
}

// Row-block order of the non-split kernels: the grid's slowest index runs over the row blocks
// from the centre outwards (middle_out, common/warp_buffer.cuh). The overlaps are tallest at the
// centre rows, so the longest blocks start first and the last wave holds the shortest ones; in
// plain top-to-bottom order the tallest blocks of the last matrix group start last and leave most
// of the GPU idle at the end (a simulated 27% for 1-to-32 at 256 x 256 with 4 rows per warp).
//
// That pays only when the grid runs in several waves. When every block is resident at once (one
// wave: 1-to-32 at 64 x 64 is 512 blocks of 792 slots) the order only decides which blocks share
// an SM, and the block scheduler's round-robin then gives each SM blocks of similar height (all
// tall or all short); top-down order mixes heights better (a round-robin model of the shuffles per
// SM: busiest / average 1.65 centre-first against 1.375 top-down). So the kernels run centre-first
// only when the grid exceeds one wave of resident blocks (measured with both orders forced:
// notes/10_multi_matrix_right.md).
// Row block of this block: blockIdx.z, centre-first or top-down as the host chose (BlockOrder,
// algorithms/common/multi_matrix_launch.cuh).
__device__ __forceinline__ int row_block(bool centre_first) {
    return centre_first ? middle_out(int(blockIdx.z), int(gridDim.z)) : int(blockIdx.z);
}

// ---------------------------------------------------------------------------------------------
// The band step.
//
// Adds to acc[s][l][r] the products of left rows lrow .. lrow+LR-1 with right rows
// rrow .. rrow+S+LR-2 over the warp's right columns: left row lrow+a meets right row
// rrow + a - s + S-1 in overlap s. Left matrix l is `left + l*left_step`, right matrix r is
// `right + r*right_step`; lane t computes the overlap with column shift cols.dx0 + t. Right rows
// outside [0, hR) read as zeros (that is how the init and final phases of grouped-overlap drop
// the overlaps that are not active on a row); the left rows must lie inside the left matrix.
// Must be called by all 32 lanes of the warp together.
//
// The 32 steps of a chunk run as a rolled loop over blocks of U fully unrolled steps
// (kUnroll: U*instructions-per-step about 1K, i.e. a loop body that stays in the instruction
// cache; a fully unrolled chunk of the 4/4/4 band is 52 KB of code). Inside a block ptxas is free
// to issue the shuffles of the next steps under the FMAs of the current one; the step index is a
// register, which costs an add and a compare per step. The last, partial chunk stops after the
// block holding its last column (a 16 x 16 problem needs 16 of the 32 steps).
template <int NL, int NR, int S, int LR>
inline constexpr int kStepInstructions = S * LR * NL * NR + NL * LR + (S + LR - 1) * NR + NL * LR + 3;
template <int NL, int NR, int S, int LR>
inline constexpr int kUnroll = 16 * kStepInstructions<NL, NR, S, LR> <= 1024  ? 16
                               : 8 * kStepInstructions<NL, NR, S, LR> <= 1024 ? 8
                               : 4 * kStepInstructions<NL, NR, S, LR> <= 1024 ? 4
                                                                               : 2;

template <int NL, int NR, int S, int LR>
__device__ __forceinline__ void accumulate_band(float (&acc)[S][NL][NR], const float* __restrict__ left,
                                                int64_t left_step, const float* __restrict__ right,
                                                int64_t right_step, int wL, int hR, int wR, int lrow, int rrow,
                                                WarpColumns cols) {
    constexpr int RR = S + LR - 1;
    constexpr int U = kUnroll<NL, NR, S, LR>;
    const int lane = lane_id();
    // The 64-item left windows: lane t holds items t (lo) and t + 32 (hi) of each left row.
    float lo[NL][LR], hi[NL][LR];
#pragma unroll
    for (int l = 0; l < NL; ++l)
#pragma unroll
        for (int a = 0; a < LR; ++a) {
            const float* row = left + l * left_step + int64_t(lrow + a) * wL;
            lo[l][a] = load_col_or_zero(row, wL, cols.begin + cols.dx0 + lane);
            hi[l][a] = load_col_or_zero(row, wL, cols.begin + cols.dx0 + kWarp + lane);
        }
    for (int c0 = cols.begin;;) {
        float rbuf[RR][NR];
#pragma unroll
        for (int j = 0; j < RR; ++j)
#pragma unroll
            for (int r = 0; r < NR; ++r)
                rbuf[j][r] = load_rc_or_zero(right + r * right_step, hR, wR, rrow + j, c0 + lane);
        const int steps = min(kWarp, cols.end - c0);
#pragma unroll 1
        for (int i0 = 0; i0 < steps; i0 += U) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int i = i0 + u;
                // Lane t needs item t + i: lane (t + i) mod 32 offers lo when it is at or right of
                // i, else hi (one shuffle per left row, see common/warp_buffer.cuh, Index mode).
                const bool offer_lo = lane >= i;
                float lv[NL][LR];
#pragma unroll
                for (int l = 0; l < NL; ++l)
#pragma unroll
                    for (int a = 0; a < LR; ++a)
                        lv[l][a] = __shfl_sync(kFullMask, offer_lo ? lo[l][a] : hi[l][a], lane + i);
#pragma unroll
                for (int j = 0; j < RR; ++j)
#pragma unroll
                    for (int r = 0; r < NR; ++r) {
                        const float rv = broadcast(rbuf[j][r], i);
#pragma unroll
                        for (int a = 0; a < LR; ++a) {
                            const int s = a + S - 1 - j;  // the overlap in which left row a meets right row j
                            if (s >= 0 && s < S)
#pragma unroll
                                for (int l = 0; l < NL; ++l) acc[s][l][r] = fmaf(lv[l][a], rv, acc[s][l][r]);
                        }
                    }
            }
        }
        c0 += kWarp;
        if (c0 >= cols.end) break;
#pragma unroll
        for (int l = 0; l < NL; ++l)
#pragma unroll
            for (int a = 0; a < LR; ++a) {
                lo[l][a] = hi[l][a];
                hi[l][a] = load_col_or_zero(left + l * left_step + int64_t(lrow + a) * wL, wL,
                                            c0 + cols.dx0 + kWarp + lane);
            }
    }
}

// The grouped-overlap walk (the +grouped-overlap variants, 12_* and 15_*, after the paper's
// init / main / final phases): a warp's S vertically adjacent overlaps start at row shift dy0
// (overlap s has dy0 + s). Left rows meeting any of them: [lb, le); rows where all S are active
// (the main phase, LR left rows per band step): [mb, me); the init and final phases around it run
// one left row per step, the inactive overlaps reading zero right rows.
struct GroupRows {
    int lb, le, mb, me;
};
template <int S>
__device__ __forceinline__ GroupRows group_rows(int dy0, int hL, int hR) {
    GroupRows g{max(0, dy0), min(hL, dy0 + S - 1 + hR), 0, 0};
    g.mb = max(g.lb, dy0 + S - 1);
    g.me = min(g.le, dy0 + hR);
    if (g.mb >= g.me) g.mb = g.me = g.le;  // no row has every overlap active (hR < S or an edge group)
    return g;
}
// Adds the whole walk to acc (left matrix l is `left + l*left_step`, right r `right + r*right_step`).
// One call site per band shape keeps the code to two unrolled bodies.
template <int NL, int NR, int S, int LR>
__device__ __forceinline__ void accumulate_group(float (&acc)[S][NL][NR], const float* __restrict__ left,
                                                 int64_t left_step, const float* __restrict__ right,
                                                 int64_t right_step, const Geometry& g, int dy0, const GroupRows& rows,
                                                 const WarpColumns& cols) {
    for (int l = rows.lb; l < rows.le;) {
        if constexpr (LR > 1) {
            if (l >= rows.mb && l + LR <= rows.me) {
                accumulate_band<NL, NR, S, LR>(acc, left, left_step, right, right_step, g.wL, g.hR, g.wR, l,
                                               l - dy0 - (S - 1), cols);
                l += LR;
                continue;
            }
        }
        accumulate_band<NL, NR, S, 1>(acc, left, left_step, right, right_step, g.wL, g.hR, g.wR, l,
                                      l - dy0 - (S - 1), cols);
        ++l;
    }
}

// Writes (or, when several split-row workers share an output, atomically adds) one value.
__device__ __forceinline__ void emit(float* p, float v, bool atomic) {
    if (atomic) atomicAdd(p, v);
    else *p = v;
}

// ---------------------------------------------------------------------------------------------
// Split-row work distribution (paper 4.2.1, thesis 3.4.2). A worker is one warp-row of the grid;
// it takes one job: an output row y and a stripe of at most `rows` rows of that row's overlaps.
//   none       no split: worker y takes output row y whole (rows must be "n");
//   rectangle  m = ceil(min(hL, hR) / rows) workers per output row: row = w mod out_h,
//              job = w / out_h; workers whose job is past their row's overlap stop at once;
//   triangle   exactly one worker per job: a table built at set-up maps worker -> (row, job),
//              which is exact for unequal sizes too (the thesis' closed form with a square root
//              assumes equal heights; the table costs one broadcast load per warp).
enum class Distribution : int { None = 0, Rectangle = 1, Triangle = 2 };

struct SplitView {
    int dist, rows, out_h, hL, hR;
    int64_t workers;
    const int2* table;
    // Worker w -> output row y and the right rows [r_begin, r_end) of its stripe; false: idle.
    __device__ __forceinline__ bool job(int64_t w, int& y, int& r_begin, int& r_end) const {
        if (w >= workers) return false;
        int j = 0;
        if (dist == int(Distribution::Triangle)) {
            const int2 e = table[w];
            y = e.x, j = e.y;
        } else {
            y = int(w % out_h), j = int(w / out_h);
        }
        const Span span = overlap_span(y - (hR - 1), hL, hR);
        r_begin = span.begin + j * rows;
        r_end = min(span.end, r_begin + rows);
        return r_begin < r_end;
    }
};

}  // namespace xcorr::multi
