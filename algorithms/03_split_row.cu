// split-row: the warp-shuffle algorithm with each overlap's rows split into stripes (paper 4.2.1;
// thesis 3.4.2, "work distribution"), for sizes too small to fill the GPU with whole overlaps.
//
// Work mapping. A job is one stripe of at most `rows` consecutive rows of one overlap; an overlap
// with n rows has ceil(n / rows) jobs. A warp (a worker) computes one job for 32 adjacent overlaps
// of one output row, with the base algorithm's buffers: lane t takes output column x0 + t, the
// 64-item left window and the 32-item right buffer are refilled by coalesced zero-guarded loads,
// and each 32-step block costs 2 shuffles per FMA (common/warp_buffer.cuh, Index mode). Workers
// add their partial sums to the zeroed output with atomicAdd. The block is 32 x 4 threads; grid x
// takes the 32-column groups of the output, and the worker id blockIdx.y * 4 + threadIdx.y (the
// same for a whole warp, so idle workers are whole warps) is mapped to (output row, job) by the
// distribution:
//   none       one job per overlap (no split; `rows` is ignored): worker id = output row.
//   rectangle  every output row gets as many workers as the largest overlap has jobs:
//              output row = id % out_h, job = id / out_h; workers beyond a row's jobs exit.
//   triangle   exactly one worker per job. The overlap heights rise 1, 2, .. m-1, stay at
//              m = min(hL, hR) for the middle max(hL, hR) - m + 1 output rows, then fall, so the
//              id is inverted in closed form: a square root for the rising part, a division for
//              the plateau, and the mirror image for the falling part. Unlike the thesis' formula
//              this holds for unequal left and right heights too.
// When every overlap is a single job (rows = n, distribution none, or rows >= m) the output is
// stored directly and not zeroed. The z grid dimension indexes the output matrices.
#include <algorithm>
#include <string>

#include "common/device.cuh"
#include "common/warp_buffer.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::split_row {
namespace {

constexpr int kWarps = 4;

enum Distribution : int { kNone = 0, kRectangle = 1, kTriangle = 2 };
// Its names (the `distribution` parameter, xcorr/dispatch.hpp), the first the default.
constexpr auto kDistributions = choices<Distribution>({{kTriangle, "triangle"}, {kRectangle, "rectangle"}, {kNone, "none"}});

// How worker ids map onto (output row, job); computed on the host.
struct Jobs {
    int dist;      // Distribution; kNone whenever every overlap is one job
    int shift;     // rows per job = 1 << shift (30 for "no split")
    int m;         // min(hL, hR): rows of the largest overlaps
    int per_row;   // jobs of a largest overlap = ceil(m / rows)
    int rising;    // triangle: workers of the rising output rows [0, m - 1)
    int plateau;   // triangle: workers of the plateau rows [m - 1, max(hL, hR))
    int workers;   // total worker ids
};

// Triangle, rising part: output row y < m - 1 has overlap height y + 1 and so (y >> shift) + 1
// jobs; the rows of block q = y >> shift (2^shift rows of q + 1 jobs each) start at worker
// 2^shift * q (q + 1) / 2. Solve for q with a square root, fix rounding, then divide.
__device__ __forceinline__ void rising_job(int id, int shift, int& y, int& job) {
    const unsigned u = unsigned(id) >> shift;  // need q (q + 1) / 2 <= u < (q + 1) (q + 2) / 2
    unsigned q = unsigned((sqrtf(8.0f * float(u) + 1.0f) - 1.0f) * 0.5f);
    while ((q + 1) * (q + 2) / 2 <= u) ++q;
    while (q * (q + 1) / 2 > u) --q;
    if (shift == 0) {  // one row per block: no division
        y = int(q), job = id - int(q * (q + 1) / 2);
        return;
    }
    const int off = id - int((q * (q + 1) / 2) << shift);
    y = int(q << shift) + off / int(q + 1);
    job = off % int(q + 1);
}

// Worker id -> (output row, job); false for an idle rectangle worker.
__device__ __forceinline__ bool map_worker(const Jobs& J, int id, int out_h, int& y, int& job) {
    if (J.dist == kNone) {
        y = id, job = 0;
        return true;
    }
    if (J.dist == kRectangle) {
        y = id % out_h, job = id / out_h;
        const int height = min(min(y + 1, J.m), out_h - y);
        return job < ((height + (1 << J.shift) - 1) >> J.shift);
    }
    if (id < J.rising) {
        rising_job(id, J.shift, y, job);
    } else if (id < J.rising + J.plateau) {
        const int off = id - J.rising;
        y = J.m - 1 + off / J.per_row, job = off % J.per_row;
    } else {  // falling part: the mirror image of the rising part
        rising_job(J.workers - 1 - id, J.shift, y, job);
        y = out_h - 1 - y;
    }
    return true;
}

// 64 warps per SM: a cap of 32 registers (see 02_warp_shuffle.cu).
template <int WARPS>
__global__ void __launch_bounds__(kWarp * WARPS, 64 / WARPS)
    split_row_kernel(const float* __restrict__ left, const float* __restrict__ right,
                     float* __restrict__ out, int hL, int wL, int hR, int wR, int k0, PairMap pairs,
                     Jobs J) {
    const int out_h = hL + hR - 1, out_w = wL + wR - 1;
    const int lane = lane_id();
    const int x0 = int(blockIdx.x) * kWarp;
    const int k = k0 + int(blockIdx.z);
    const PairMap::Pair pi = pairs.pair32(k);
    const float* L = opaque_ptr(left + int64_t(pi.left) * hL * wL);
    const float* R = opaque_ptr(right + int64_t(pi.right) * hR * wR);
    const WarpColumns cols = warp_columns(x0, wL, wR);
    const int lcol = cols.dx0 + lane;
    const bool atomic = J.dist != kNone;

    // Workers beyond 65535 * WARPS (gridDim.y limit) are taken in further rounds.
    for (int id = int(blockIdx.y) * WARPS + int(threadIdx.y); id < J.workers; id += int(gridDim.y) * WARPS) {
        int y, job;
        if (!map_worker(J, id, out_h, y, job)) continue;  // warp-uniform
        const int dy = y - (hR - 1);
        const Span span = overlap_span(dy, hL, hR);
        const int first = span.begin + (job << J.shift);
        const int last = min(span.end, first + (1 << J.shift));
        const float sum = warp_shuffle_rows<LeftMode::Index>(L, hL, wL, R, hR, wR, dy, first, last, cols, lane, lcol);
        if (x0 + lane < out_w) {
            float* o = out + (int64_t(k) * out_h + y) * out_w + x0 + lane;
            if (atomic) atomicAdd(o, sum);
            else *o = sum;
        }
    }
}

class SplitRow final : public Instance {
public:
    SplitRow(const Problem& p, Jobs jobs) : p_(p), jobs_(jobs) {}

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        if (jobs_.dist != kNone)
            XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(p_.out_elems()) * sizeof(float), stream));
        const int count = int(p_.out_count());
        for (int k0 = 0; k0 < count; k0 += 65535) {
            const dim3 block(kWarp, kWarps);
            const dim3 grid(ceil_div(p_.out_w(), kWarp), std::min(ceil_div(jobs_.workers, kWarps), 65535),
                            unsigned(std::min(count - k0, 65535)));
            split_row_kernel<kWarps><<<grid, block, 0, stream>>>(left, right, out, p_.hL, p_.wL, p_.hR,
                                                                 p_.wR, k0, pair_map(p_), jobs_);
            XC_CHECK_LAUNCH();
        }
    }

private:
    Problem p_;
    Jobs jobs_;
};

// Rising part of the triangle: sum over heights 1 .. a of ceil(height / 2^shift).
int64_t rising_workers(int64_t a, int shift) {
    const int64_t q = a >> shift, rem = a & ((int64_t(1) << shift) - 1);
    return (q * (q + 1) / 2 << shift) + rem * (q + 1);
}

Jobs plan_jobs(const Problem& p, const std::string& rows, const std::string& dist) {
    Jobs J{};
    J.m = std::min(p.hL, p.hR);
    const int M = std::max(p.hL, p.hR), out_h = p.out_h();
    J.dist = kDistributions.parse(dist, "distribution");
    J.shift = 30;
    if (rows != "n") {
        const int r = std::stoi(rows);
        J.shift = 0;
        while ((1 << J.shift) < r) ++J.shift;
        if ((1 << J.shift) != r) throw UsageError("split-row: rows must be a power of two or n");
    }
    if ((int64_t(1) << J.shift) >= J.m) J.dist = kNone;  // every overlap is a single job
    if (J.dist == kNone) J.shift = 30;
    J.per_row = int((int64_t(J.m) + (int64_t(1) << J.shift) - 1) >> J.shift);
    int64_t workers = out_h;
    if (J.dist == kRectangle) workers = int64_t(out_h) * J.per_row;
    if (J.dist == kTriangle) {
        const int64_t rising = rising_workers(J.m - 1, J.shift);
        const int64_t plateau = int64_t(M - J.m + 1) * J.per_row;
        workers = 2 * rising + plateau;
        J.rising = int(std::min<int64_t>(rising, 1 << 30));
        J.plateau = int(std::min<int64_t>(plateau, 1 << 30));
    }
    if (workers > (int64_t(1) << 30))
        throw UsageError("split-row: " + std::to_string(workers) + " workers exceed 2^30");
    J.workers = int(workers);
    return J;
}

XCORR_REGISTER_VARIANT(Variant{
    .name = "split-row",
    .family = "warp-shuffle",
    .summary = "warp-shuffle with each overlap's rows split into stripes, partial sums by atomicAdd "
               "(paper 4.2.1)",
    .timed = "zero output (cudaMemsetAsync, skipped when no overlap is split) + kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {{"rows", {"1", "2", "4", "8", "16", "n"},
                "overlap rows per job (stripe height); n = no split"},
               kDistributions.param("distribution",
                                    "worker-to-job mapping: triangle = one worker per job, rectangle = max jobs "
                                    "workers per output row (idle ones exit), none = one job per overlap (rows ignored)"),
               Values<kWarps>::param("warps", "warps per block (fixed at 4, as in the paper's experiments)")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        if (!fits_int32_count(p)) throw UsageError("split-row: more than 2^31 - 1 output matrices");
        if (!fits_int32_matrix(p)) throw UsageError("split-row: a matrix of 2^31 or more elements");
        return std::make_unique<SplitRow>(p, plan_jobs(p, ps.at("rows"), ps.at("distribution")));
    },
});

}  // namespace
}  // namespace xcorr::split_row
