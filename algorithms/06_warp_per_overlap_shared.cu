// warp-per-overlap-shared: warp per overlap with the inputs staged in shared memory (thesis,
// sections 3.6.3-3.6.6: "shared memory", strided loading, "single column group per block").
//
// The paper mentions this variant and drops it as impractical (section 4.4); the thesis describes it.
// Warps of a block take consecutive shifts along y (same dx, so the same columns of the overlap),
// the block stages the union of their overlapping areas in shared memory once and every warp
// reads it, instead of each warp reading global memory on its own.
#include <algorithm>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/launch.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::warp_per_overlap_shared {
namespace {

// Position of one thread in a staged tile of row stride P, and the constant step of THREADS
// elements, so the staging loop walks the tile with no division.
struct TileWalk {
    int r, c;        // this thread's first element
    int step_r, step_c;
};

// Strided loading (thesis 3.6.4): element i of the staged rows goes to thread i mod THREADS.
// Copies global rows [lo, hi) of columns [col0, col0 + nc) of M (row length w) into buf, whose
// row 0 is global row `base`, at row stride P >= nc; the padding columns [nc, P) get zeros, so
// that a padded product is 0 * 0. The rows lo..hi are contiguous in buf, so element i lands at
// buf[(lo - base) * P + i] and only the global address needs the row/column walk. The copies are
// asynchronous: a thread issues all of its copies back to back (one memory latency per chunk, not
// one per element) and cp_async_wait_all() before the barrier completes them.
template <int THREADS>
__device__ __forceinline__ void stage_rows(float* __restrict__ buf, const float* __restrict__ M, int w,
                                           int lo, int hi, int base, int col0, int nc, int P,
                                           const TileWalk& walk) {
    const int n = (hi - lo) * P;
    if (n <= 0) return;
    float* dst = buf + (lo - base) * P;
    const float* src = M + lo * w + col0;
    const int step = walk.step_r * w + walk.step_c, wrap = w - P;
    const int to_base = -(lo * w + col0);  // src + to_base == M
    int off = walk.r * w + walk.c, c = walk.c;
#pragma unroll 1  // the copies are asynchronous: unrolling buys no overlap, only registers
    for (int i = threadIdx.x; i < n; i += THREADS) {
        const bool valid = c < nc;
        cp_async4(dst + i, src + (valid ? off : to_base), valid);
        off += step;
        c += walk.step_c;
        if (c >= P) {
            c -= P;
            off += wrap;
        }
    }
}

// One warp's share of a staged chunk: n4 float4 pairs, contiguous in both buffers, dealt out
// round-robin to the lanes. Consecutive lanes read consecutive 16-byte words: no bank conflicts.
__device__ __forceinline__ void dot_staged(const float* a, const float* b, int n4, int lane, float4& acc) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
#pragma unroll 1  // 2 x 16 B in flight per lane: unrolling by 2 spills under the 64-register budget
    for (int k = lane; k < n4; k += kWarp) {
        const float4 p = a4[k], q = b4[k];
        acc.x = fmaf(p.x, q.x, acc.x);
        acc.y = fmaf(p.y, q.y, acc.y);
        acc.z = fmaf(p.z, q.z, acc.z);
        acc.w = fmaf(p.w, q.w, acc.w);
    }
}

// Work mapping. A block of WARPS warps computes the WARPS vertically adjacent output elements
// (y0 + w, x) of one output column x, warp w taking shift (dy0 + w, dx): all warps share the
// overlap's columns and differ only in their row ranges (thesis Fig. 3.31). blockIdx.x enumerates
// (x, y-block, column group) with x fastest; blockIdx.y strides over the output matrices.
// The overlap's columns are cut into column groups of group_cols columns; for each group the block
// walks the union of its warps' R rows in chunks of buf_rows rows. Per chunk it stages buf_rows rows
// of R and the buf_rows rows of L that follow the ones already held: L is a two-half ring buffer
// (bottom, top), since warp w pairs chunk row i with L window row i + w < 2 * buf_rows. The staged
// rows are packed at a stride P = nc rounded up to 4 with zero padding, so a warp's rows of one half
// form one contiguous run in both buffers and its products are a plain float4 dot product split
// round-robin over its lanes (at most two runs per chunk: bottom half, then top half). A shuffle
// reduction ends each warp. With one column group per block (thesis 3.6.6), blockIdx.x also picks
// the group, blocks past a shift's last group exit, and the partial sums of a shift with several
// groups are added atomically onto the zeroed output.
// 64 registers per thread (32 warps per SM at any WARPS), stated so that ptxas's own choice,
// which may exceed it (and spill), cannot change the occupancy.
template <int WARPS>
__global__ void __launch_bounds__(kWarp * WARPS, 32 / WARPS)
    warp_per_overlap_shared_kernel(const float* __restrict__ left, const float* __restrict__ right,
                                   float* __restrict__ out, int hL, int wL, int hR, int wR,
                                   int64_t count, PairMap pairs, int group_cols, int buf_rows,
                                   int buf_stride, int y_blocks, bool group_per_block) {
    constexpr int THREADS = kWarp * WARPS;
    extern __shared__ float4 smem4[];
    float* const Rs = reinterpret_cast<float*>(smem4);
    float* Lbot = Rs + buf_rows * buf_stride;
    float* Ltop = Lbot + buf_rows * buf_stride;

    const int out_h = hL + hR - 1, out_w = wL + wR - 1;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int x = blockIdx.x % out_w;
    const int rest = blockIdx.x / out_w;
    const int y0 = (rest % y_blocks) * WARPS;
    const int g_first = rest / y_blocks;  // 0 unless group_per_block

    const int dx = x - (wR - 1);
    const Span cols = overlap_span(dx, wL, wR);
    const int ngroups = ceil_div(cols.end - cols.begin, group_cols);
    if (g_first >= ngroups) return;  // whole block, before any barrier
    const int g_end = group_per_block ? g_first + 1 : ngroups;
    const bool atomic = group_per_block && ngroups > 1;

    const int nvalid = min(WARPS, out_h - y0);  // warps past the last output row only stage data
    const bool active = warp < nvalid;
    const int dy0 = y0 - (hR - 1);
    const Span mine = overlap_span(dy0 + warp, hL, hR);
    // Union of the warps' R rows (spans shift down by at most one row per warp: no gaps), and the
    // L rows any warp reads; L rows outside them are never staged.
    const int rb = overlap_span(dy0 + nvalid - 1, hL, hR).begin;
    const int re = overlap_span(dy0, hL, hR).end;
    const int l_lo = max(0, dy0), l_hi = min(hL, hR + dy0 + nvalid - 1);

    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        const float* __restrict__ L = left + int64_t(pairs.left_of(k)) * hL * wL;
        const float* __restrict__ R = right + int64_t(pairs.right_of(k)) * hR * wR;
        float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int g = g_first; g < g_end; ++g) {
            const int c0 = cols.begin + g * group_cols;
            const int nc = min(group_cols, cols.end - c0);
            const int P = (nc + 3) & ~3;
            TileWalk walk;
            walk.r = threadIdx.x / P;
            walk.c = threadIdx.x - walk.r * P;
            walk.step_r = THREADS / P;
            walk.step_c = THREADS - walk.step_r * P;

            // Preload the bottom half: the L rows paired with the first chunk's rows at w = 0.
            const int first = rb + dy0;
            stage_rows<THREADS>(Lbot, L, wL, max(l_lo, first), min(l_hi, first + buf_rows), first,
                                c0 + dx, nc, P, walk);
#pragma unroll 1
            for (int r0 = rb; r0 < re; r0 += buf_rows) {
                const int top = r0 + dy0 + buf_rows;
                stage_rows<THREADS>(Ltop, L, wL, max(l_lo, top), min(l_hi, top + buf_rows), top,
                                    c0 + dx, nc, P, walk);
                stage_rows<THREADS>(Rs, R, wR, r0, min(re, r0 + buf_rows), r0, c0, nc, P, walk);
                cp_async_wait_all();
                __syncthreads();
                if (active) {
                    const int ib = max(mine.begin, r0) - r0, ie = min(mine.end, r0 + buf_rows) - r0;
                    const int split = buf_rows - warp;  // chunk rows from here on pair with the top half
                    const int i1 = min(ie, split), i2 = max(ib, split);
                    if (i1 > ib) dot_staged(Rs + ib * P, Lbot + (ib + warp) * P, (i1 - ib) * P / 4, lane, acc);
                    if (ie > i2)
                        dot_staged(Rs + i2 * P, Ltop + (i2 + warp - buf_rows) * P, (ie - i2) * P / 4, lane, acc);
                }
                __syncthreads();  // the next chunk overwrites Rs and the (old) bottom half
                float* t = Lbot;
                Lbot = Ltop;
                Ltop = t;
            }
        }
        if (active) {
            const float sum = warp_sum((acc.x + acc.y) + (acc.z + acc.w));
            if (lane == 0) {
                float* dst = out + (k * out_h + y0 + warp) * out_w + x;
                if (atomic)
                    atomicAdd(dst, sum);
                else
                    *dst = sum;
            }
        }
    }
}

// Largest staging buffers of the instantiated values: 3 buffers x 64 rows x 128 columns.
constexpr size_t kMaxSmemBytes = size_t(3) * 64 * 128 * sizeof(float);

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Warps = Values<16, 8, 4>;
constexpr auto kGroupPerBlock = choices<bool>({{false, "no"}, {true, "yes"}});

class WarpPerOverlapShared final : public Instance {
public:
    WarpPerOverlapShared(const Problem& p, int warps, int group_cols, int buf_rows, bool group_per_block)
        : p_(p), warps_(warps), group_cols_(group_cols), buf_rows_(buf_rows), group_per_block_(group_per_block) {
        if (buf_rows < warps)
            throw UsageError("warp-per-overlap-shared: rows (" + std::to_string(buf_rows) +
                             ") must be at least warps (" + std::to_string(warps) + ")");
        // Buffers only as wide as the widest column group that can occur.
        const int narrow = std::min(p.wL, p.wR);
        buf_stride_ = std::min(group_cols, (narrow + 3) & ~3);
        smem_bytes_ = size_t(3) * buf_rows * buf_stride_ * sizeof(float);
        max_groups_ = ceil_div(narrow, group_cols);
        zero_first_ = group_per_block && max_groups_ > 1;
        // The opt-in limit is per kernel and process-wide: set it to what the largest configuration
        // needs, so that instances that coexist cannot lower it under one another.
        Warps::dispatch(warps_, [&](auto w) {
            allow_dynamic_smem(warp_per_overlap_shared_kernel<decltype(w)::value>, size_t(kMaxSmemBytes), "warp-per-overlap-shared");
        }, "warps");
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        if (zero_first_)
            XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(p_.out_elems()) * sizeof(float), stream));
        Warps::dispatch(warps_, [&](auto w) {
            constexpr int W = decltype(w)::value;
            const int y_blocks = ceil_div(p_.out_h(), W);
            const int64_t blocks = int64_t(p_.out_w()) * y_blocks * (group_per_block_ ? max_groups_ : 1);
            const dim3 grid(unsigned(blocks), unsigned(std::min<int64_t>(p_.out_count(), 65535)));
            warp_per_overlap_shared_kernel<W><<<grid, kWarp * W, smem_bytes_, stream>>>(
                left, right, out, p_.hL, p_.wL, p_.hR, p_.wR, p_.out_count(), pair_map(p_), group_cols_,
                buf_rows_, buf_stride_, y_blocks, group_per_block_);
            XC_CHECK_LAUNCH();
        }, "warps");
    }

private:
    Problem p_;
    int warps_, group_cols_, buf_rows_;
    bool group_per_block_;
    int buf_stride_ = 0, max_groups_ = 1;
    size_t smem_bytes_ = 0;
    bool zero_first_ = false;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "warp-per-overlap-shared",
    .family = "warp-per-overlap",
    .summary = "warp per output element, a block's vertically adjacent overlaps staged in shared memory",
    .timed = "kernel (group_per_block=yes with several column groups: zero output + kernel)",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Warps::param("warps", "warps per block = vertically adjacent overlaps sharing one staging"),
               {"col_group", {"64", "32", "128"}, "columns per column group (thesis: shared_mem_row_size)"},
               {"rows", {"64", "32"}, "rows per staged chunk, >= warps (thesis: shared_mem_rows)"},
               kGroupPerBlock.param("group_per_block",
                                    "one column group per block, partial sums added atomically (thesis 3.6.6)")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        const bool gpb = kGroupPerBlock.parse(ps.at("group_per_block"), "group_per_block");
        return std::make_unique<WarpPerOverlapShared>(p, param_int(ps, "warps"), param_int(ps, "col_group"),
                                                      param_int(ps, "rows"), gpb);
    },
});

}  // namespace
}  // namespace xcorr::warp_per_overlap_shared
