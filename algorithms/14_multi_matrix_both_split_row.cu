// multi-matrix-both+split-row: multi-matrix-both with each overlap split into stripes of rows,
// n-to-m only (paper 4.3.3, Fig. 22 and 23; thesis 3.4.2 with 3.5.2,
// "multimat_both_work_distribution").
//
// Work mapping. As multi-matrix-both (a warp = 32 adjacent overlaps of one output row for every
// pair of a group of l lefts and a group of r rights, l*r sums per lane, l + r shuffles per l*r
// FMAs), but the job of a warp is a stripe of at most `rows` right rows of those overlaps. Each
// warp-row of the grid is one worker: grid x counts workers (4 per block), y the output column
// blocks, z the (left group, right group) pairs. The worker -> (output row, stripe) map is the
// `distribution` (common/multi_matrix.cuh: none, rectangle, triangle). Stripes of one overlap add
// their partial sums with atomicAdd into an output zeroed first (cudaMemsetAsync, timed); with no
// split (rows=n, or rows >= the tallest overlap) the sums are stored and nothing is zeroed.
// Counts that do not fill a group run their rest with groups of 1 (no padding).
#include <memory>

#include "common/device.cuh"
#include "common/multi_matrix.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "common/multi_matrix_launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::multi_matrix_both_split_row {
namespace {

using namespace multi;

template <int NL, int NR>
__global__ void __launch_bounds__(kWarp * kWarps, (kMinBlocks<NL, NR, 1, 1>))
    multi_both_split_kernel(const float* __restrict__ left, const float* __restrict__ right,
                            float* __restrict__ out, Geometry g, SplitView split, bool atomic, int n_rights,
                            int i_begin, int n_lgroups, int j_begin, int n_rgroups) {
    int y, r_begin, r_end;
    if (!split.job(int64_t(blockIdx.x) * kWarps + threadIdx.y, y, r_begin, r_end)) return;  // whole warps
    const int x0 = blockIdx.y * kWarp;
    const int x = x0 + lane_id();
    const int dy = y - (g.hR - 1);
    const WarpColumns cols = warp_columns(x0, g.wL, g.wR);

    const int64_t jobs = int64_t(n_lgroups) * n_rgroups;
    for (int64_t z = blockIdx.z; z < jobs; z += gridDim.z) {
        const int i0 = i_begin + int(z / n_rgroups) * NL;
        const int j0 = j_begin + int(z % n_rgroups) * NR;
        const float* L = left + int64_t(i0) * g.left_size;
        const float* Rm = right + int64_t(j0) * g.right_size;
        float acc[1][NL][NR] = {};
        for (int r = r_begin; r < r_end; ++r)
            accumulate_band<NL, NR, 1, 1>(acc, L, g.left_size, Rm, g.right_size, g.wL, g.hR, g.wR, r + dy, r, cols);
        if (x < g.out_w) {
#pragma unroll
            for (int l = 0; l < NL; ++l)
#pragma unroll
                for (int k = 0; k < NR; ++k) {
                    const int64_t o = int64_t(i0 + l) * n_rights + j0 + k;  // n-to-m: left-major
                    emit(out + (o * g.out_h + y) * g.out_w + x, acc[0][l][k], atomic);
                }
        }
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Lefts = Values<4, 1>;
using Rights = Values<4, 1>;

class MultiBothSplit final : public Instance {
public:
    MultiBothSplit(const Problem& p, int lefts, int rights, const Params& ps)
        : g_(geometry(p)), n_lefts_(p.nL), n_rights_(p.nR), lefts_(lefts), rights_(rights),
          split_(p, ps.at("distribution"), ps.at("rows")), out_elems_(p.out_elems()) {
        require_grid(p, kWarps);
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        if (split_.atomic()) XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(out_elems_) * sizeof(float), stream));
        for (const Piece& lp : cut<Lefts>(n_lefts_, lefts_))
            for (const Piece& rp : cut<Rights>(n_rights_, rights_))
                Lefts::dispatch(lp.size, [&](auto lv) {
                    Rights::dispatch(rp.size, [&](auto rv) {
                        constexpr int NL = decltype(lv)::value, NR = decltype(rv)::value;
                        const dim3 grid(split_.worker_blocks(), ceil_div(g_.out_w, kWarp),
                                        grid_groups(int64_t(lp.groups) * rp.groups));
                        multi_both_split_kernel<NL, NR><<<grid, dim3(kWarp, kWarps), 0, stream>>>(
                            left, right, out, g_, split_.view(), split_.atomic(), n_rights_, lp.begin, lp.groups,
                            rp.begin, rp.groups);
                        XC_CHECK_LAUNCH();
                    }, "rights");
                }, "lefts");
    }

private:
    Geometry g_;
    int n_lefts_, n_rights_, lefts_, rights_;
    SplitPlan split_;
    int64_t out_elems_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "multi-matrix-both+split-row",
    .family = "multi-matrix",
    .summary = "multi-matrix-both with overlaps split into stripes of rows, one stripe per warp (n-to-m)",
    .timed = "zero output (cudaMemsetAsync, only when a stripe is shorter than an overlap) + kernel(s)",
    .forms = {Form::NToM},
    .params = {Lefts::param("lefts", "left matrices per thread (l)"),
               Rights::param("rights", "right matrices per thread (r)"),
               kSplitRowsParam, kDistributionParam},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<MultiBothSplit>(p, param_int(ps, "lefts"), param_int(ps, "rights"), ps);
    },
});

}  // namespace
}  // namespace xcorr::multi_matrix_both_split_row
