// multi-matrix-both: warp-shuffle with l left x r right matrices per thread, n-to-m only (paper
// 4.3.2, Fig. 12 and 21; thesis 3.5.2 "multimat_both").
//
// Work mapping. A warp computes 32 adjacent overlaps (output columns x0 .. x0+31) of one output
// row y for every pair of a group of l left matrices and a group of r right matrices: l*r sums
// per lane. Per step the lane receives one value of each left row (l shuffles from the 64-item
// windows) and one broadcast value of each right row (r shuffles) and does all l*r FMAs with
// them: l + r shuffles per l*r FMAs (4x4: 8 for 16; the paper's rotated windows take 2l + r).
// The 4 warps of a block take 4 adjacent output rows; grid x covers the output columns, y the
// (left group, right group) pairs, strided past 65535, z the row blocks, centre rows first. Counts that do not fill
// a group of l (or r) run their rest with groups of 1, the other instantiated size: nothing is
// padded, every launch is one rectangle of full groups.
#include <memory>

#include "common/device.cuh"
#include "common/multi_matrix.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "common/multi_matrix_launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::multi_matrix_both {
namespace {

using namespace multi;

template <int NL, int NR>
__global__ void __launch_bounds__(kWarp * kWarps, (kMinBlocks<NL, NR, 1, 1>))
    multi_both_kernel(const float* __restrict__ left, const float* __restrict__ right, float* __restrict__ out,
                      Geometry g, int n_rights, int i_begin, int n_lgroups, int j_begin, int n_rgroups,
                      bool centre_first) {
    const int y = row_block(centre_first) * kWarps + threadIdx.y;
    if (y >= g.out_h) return;  // whole warps only
    const int x0 = blockIdx.x * kWarp;
    const int x = x0 + lane_id();
    const int dy = y - (g.hR - 1);
    const Span rows = overlap_span(dy, g.hL, g.hR);
    const WarpColumns cols = warp_columns(x0, g.wL, g.wR);

    const int64_t jobs = int64_t(n_lgroups) * n_rgroups;
    for (int64_t z = blockIdx.y; z < jobs; z += gridDim.y) {
        const int i0 = i_begin + int(z / n_rgroups) * NL;
        const int j0 = j_begin + int(z % n_rgroups) * NR;
        const float* L = left + int64_t(i0) * g.left_size;
        const float* Rm = right + int64_t(j0) * g.right_size;
        float acc[1][NL][NR] = {};
        for (int r = rows.begin; r < rows.end; ++r)
            accumulate_band<NL, NR, 1, 1>(acc, L, g.left_size, Rm, g.right_size, g.wL, g.hR, g.wR, r + dy, r, cols);
        if (x < g.out_w) {
#pragma unroll
            for (int l = 0; l < NL; ++l)
#pragma unroll
                for (int k = 0; k < NR; ++k) {
                    const int64_t o = int64_t(i0 + l) * n_rights + j0 + k;  // n-to-m: left-major
                    out[(o * g.out_h + y) * g.out_w + x] = acc[0][l][k];
                }
        }
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Lefts = Values<4, 1>;
using Rights = Values<4, 1>;

class MultiBoth final : public Instance {
public:
    MultiBoth(const Problem& p, int lefts, int rights)
        : g_(geometry(p)), n_lefts_(p.nL), n_rights_(p.nR), lefts_(lefts), rights_(rights) {
        require_grid(p, kWarps);
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        for (const Piece& lp : cut<Lefts>(n_lefts_, lefts_))
            for (const Piece& rp : cut<Rights>(n_rights_, rights_))
                Lefts::dispatch(lp.size, [&](auto lv) {
                    Rights::dispatch(rp.size, [&](auto rv) {
                        constexpr int NL = decltype(lv)::value, NR = decltype(rv)::value;
                        const dim3 grid(ceil_div(g_.out_w, kWarp), grid_groups(int64_t(lp.groups) * rp.groups),
                                        ceil_div(g_.out_h, kWarps));
                        const bool centre = order_.centre_first(multi_both_kernel<NL, NR>, grid);
                        multi_both_kernel<NL, NR><<<grid, dim3(kWarp, kWarps), 0, stream>>>(
                            left, right, out, g_, n_rights_, lp.begin, lp.groups, rp.begin, rp.groups, centre);
                        XC_CHECK_LAUNCH();
                    }, "rights");
                }, "lefts");
    }

private:
    Geometry g_;
    int n_lefts_, n_rights_, lefts_, rights_;
    BlockOrder order_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "multi-matrix-both",
    .family = "multi-matrix",
    .summary = "warp-shuffle, each thread one overlap of l left x r right matrices (n-to-m)",
    .timed = "kernel (one launch per rectangle of equal group sizes)",
    .forms = {Form::NToM},
    .params = {Lefts::param("lefts", "left matrices per thread (l)"),
               Rights::param("rights", "right matrices per thread (r)")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<MultiBoth>(p, param_int(ps, "lefts"), param_int(ps, "rights"));
    },
});

}  // namespace
}  // namespace xcorr::multi_matrix_both
