// multi-matrix-right+split-row: multi-matrix-right with each overlap split into stripes of rows
// (paper 4.2.1 and 4.3.3, Fig. 19 and 20; thesis 3.4.2 "work distribution" with 3.4.4).
//
// Work mapping. As multi-matrix-right (a warp = 32 adjacent overlaps of one output row for a group
// of R right matrices sharing a left, R sums per lane, 1 + R shuffles per R FMAs), but the job of
// a warp is a stripe of at most `rows` right rows of those overlaps, so a small problem still
// gives enough warps to fill the GPU. Each warp-row of the grid is one worker: grid x counts
// workers (4 per block), y the output column blocks, z the (left, right group) pairs. The worker
// -> (output row, stripe) map is the `distribution` (common/multi_matrix.cuh: none, rectangle,
// triangle). Stripes of one overlap add their partial sums with atomicAdd into an output that is
// zeroed first (cudaMemsetAsync, inside the timed region); when no overlap is split (rows=n, or
// rows >= the tallest overlap) the sums are stored and nothing is zeroed. The rest of the right
// stack that does not fill a group of R runs with smaller R (all of 8, 4, 2, 1 are instantiated).
#include <memory>
#include <optional>

#include "common/device.cuh"
#include "common/multi_matrix.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "common/multi_matrix_launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::multi_matrix_right_split_row {
namespace {

using namespace multi;

template <int R>
__global__ void __launch_bounds__(kWarp * kWarps, (kMinBlocks<1, R, 1, 1>))
    multi_right_split_kernel(const float* __restrict__ left, const float* __restrict__ right,
                             float* __restrict__ out, Geometry g, PairGrid pairs, SplitView split, bool atomic,
                             int i_begin, int n_lefts, int j_begin, int n_groups) {
    int y, r_begin, r_end;
    if (!split.job(int64_t(blockIdx.x) * kWarps + threadIdx.y, y, r_begin, r_end)) return;  // whole warps
    const int x0 = blockIdx.y * kWarp;
    const int x = x0 + lane_id();
    const int dy = y - (g.hR - 1);
    const WarpColumns cols = warp_columns(x0, g.wL, g.wR);

    const int64_t jobs = int64_t(n_lefts) * n_groups;
    for (int64_t z = blockIdx.z; z < jobs; z += gridDim.z) {
        const int i = i_begin + int(z / n_groups);
        const int j0 = j_begin + int(z % n_groups) * R;
        const float* L = left + int64_t(i) * g.left_size;
        const float* Rm = right + pairs.right(i, j0) * g.right_size;
        float acc[1][1][R] = {};
        for (int r = r_begin; r < r_end; ++r)
            accumulate_band<1, R, 1, 1>(acc, L, 0, Rm, int64_t(pairs.rsj) * g.right_size, g.wL, g.hR, g.wR, r + dy, r,
                                        cols);
        if (x < g.out_w) {
#pragma unroll
            for (int k = 0; k < R; ++k) {
                const int64_t o = pairs.output(i, j0 + k);
                emit(out + (o * g.out_h + y) * g.out_w + x, acc[0][0][k], atomic);
            }
        }
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Rights = Values<8, 1, 2, 4>;

class MultiRightSplit final : public Instance {
public:
    MultiRightSplit(const Problem& p, int rights, const Params& ps)
        : g_(geometry(p)), pairs_(pair_map(p).grid()), rights_(rights), split_(p, ps.at("distribution"), ps.at("rows")),
          out_elems_(p.out_elems()) {
        require_grid(p, kWarps);
        if (const int k = parse_launch(ps.at("launch")); k > 0) fan_.emplace(k);
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        if (split_.atomic()) XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(out_elems_) * sizeof(float), stream));
        for_lefts(fan_, stream, pairs_.N,
                  [&](int i_begin, int n_lefts, cudaStream_t s) { launch(left, right, out, i_begin, n_lefts, s); });
    }

private:
    void launch(const float* left, const float* right, float* out, int i_begin, int n_lefts, cudaStream_t s) {
        for (const Piece& pc : cut<Rights>(pairs_.M, rights_)) {
            Rights::dispatch(pc.size, [&](auto r) {
                constexpr int R = decltype(r)::value;
                const dim3 grid(split_.worker_blocks(), ceil_div(g_.out_w, kWarp),
                                grid_groups(int64_t(n_lefts) * pc.groups));
                multi_right_split_kernel<R><<<grid, dim3(kWarp, kWarps), 0, s>>>(
                    left, right, out, g_, pairs_, split_.view(), split_.atomic(), i_begin, n_lefts, pc.begin,
                    pc.groups);
                XC_CHECK_LAUNCH();
            }, "rights");
        }
    }

    Geometry g_;
    PairGrid pairs_;
    int rights_;
    SplitPlan split_;
    int64_t out_elems_;
    std::optional<StreamFan> fan_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "multi-matrix-right+split-row",
    .family = "multi-matrix",
    .summary = "multi-matrix-right with overlaps split into stripes of rows, one stripe per warp",
    .timed = "zero output (cudaMemsetAsync, only when a stripe is shorter than an overlap) + kernel(s)",
    .forms = {Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Rights::param("rights", "right matrices per thread (R)"),
               kSplitRowsParam, kDistributionParam,
               kLaunchParam},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<MultiRightSplit>(p, param_int(ps, "rights"), ps);
    },
});

}  // namespace
}  // namespace xcorr::multi_matrix_right_split_row
