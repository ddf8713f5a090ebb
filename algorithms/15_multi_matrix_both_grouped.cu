// multi-matrix-both+grouped-overlap: l left x r right matrices and S vertically adjacent overlaps
// per thread, LR left rows per step, n-to-m only (paper 4.3.3, Fig. 13, 21 and 23; thesis 3.5.5
// "multirow_both_multimat_both").
//
// Work mapping. A warp computes the overlaps of S adjacent output rows y0 .. y0+S-1 at 32 adjacent
// output columns for every pair of a group of l lefts and a group of r rights: S*l*r sums per
// lane. The 4 warps of a block take 4 adjacent row groups; grid x covers the output columns, y the
// (left group, right group) pairs, z the row groups, centre rows first. The left rows that meet any of the S overlaps
// are walked in three phases (as in multi-matrix-right+grouped-overlap): init, one left row at a
// time while the later overlaps of the group have not started (their right rows load as zeros);
// main, every overlap active, LR rows of each left per band against S + LR - 1 rows of each right;
// final, one row at a time for the main rows left over and the rows where the earlier overlaps
// have ended. Per main step: l*LR left shuffles + (S+LR-1)*r broadcasts for S*LR*l*r FMAs
// (4/4/4/4: 16 + 28 shuffles for 256 FMAs). Counts that do not fill a group of l (or r) run their
// rest with groups of 1, the other instantiated size (no padding).
#include <memory>

#include "common/device.cuh"
#include "common/multi_matrix.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "common/multi_matrix_launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::multi_matrix_both_grouped {
namespace {

using namespace multi;

template <int NL, int NR, int S, int LR>
__global__ void __launch_bounds__(kWarp * kWarps, (kMinBlocks<NL, NR, S, LR>))
    multi_both_grouped_kernel(const float* __restrict__ left, const float* __restrict__ right,
                              float* __restrict__ out, Geometry g, int n_rights, int i_begin, int n_lgroups,
                              int j_begin, int n_rgroups, bool centre_first) {
    const int y0 = (row_block(centre_first) * kWarps + threadIdx.y) * S;
    if (y0 >= g.out_h) return;  // whole warps only
    const int x0 = blockIdx.x * kWarp;
    const int x = x0 + lane_id();
    const int dy0 = y0 - (g.hR - 1);  // row shift of overlap 0; overlap s has dy0 + s
    const WarpColumns cols = warp_columns(x0, g.wL, g.wR);
    const GroupRows rows = group_rows<S>(dy0, g.hL, g.hR);

    const int64_t jobs = int64_t(n_lgroups) * n_rgroups;
    for (int64_t z = blockIdx.y; z < jobs; z += gridDim.y) {
        const int i0 = i_begin + int(z / n_rgroups) * NL;
        const int j0 = j_begin + int(z % n_rgroups) * NR;
        const float* L = left + int64_t(i0) * g.left_size;
        const float* Rm = right + int64_t(j0) * g.right_size;
        float acc[S][NL][NR] = {};
        accumulate_group<NL, NR, S, LR>(acc, L, g.left_size, Rm, g.right_size, g, dy0, rows, cols);
        if (x < g.out_w) {
#pragma unroll
            for (int s = 0; s < S; ++s) {
                if (y0 + s >= g.out_h) break;
#pragma unroll
                for (int a = 0; a < NL; ++a)
#pragma unroll
                    for (int k = 0; k < NR; ++k) {
                        const int64_t o = int64_t(i0 + a) * n_rights + j0 + k;  // n-to-m: left-major
                        out[(o * g.out_h + y0 + s) * g.out_w + x] = acc[s][a][k];
                    }
            }
        }
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Lefts = Values<4, 1>;
using Rights = Values<4, 1>;
// left_rows takes the values of overlaps (the two must be equal).
using Overlaps = Values<4, 1, 2>;

class MultiBothGrouped final : public Instance {
public:
    MultiBothGrouped(const Problem& p, int lefts, int rights, int overlaps, int left_rows)
        : g_(geometry(p)), n_lefts_(p.nL), n_rights_(p.nR), lefts_(lefts), rights_(rights), overlaps_(overlaps) {
        if (overlaps != left_rows)
            throw UsageError("multi-matrix-both+grouped-overlap instantiates overlaps = left_rows only: "
                             "(overlaps, left_rows) in {(1,1), (2,2), (4,4)}, lefts and rights in {1, 4}; "
                             "got overlaps=" + std::to_string(overlaps) + ", left_rows=" + std::to_string(left_rows));
        require_grid(p, kWarps * overlaps);
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        Overlaps::dispatch(overlaps_, [&](auto sv) {
            constexpr int S = decltype(sv)::value;
            for (const Piece& lp : cut<Lefts>(n_lefts_, lefts_))
                for (const Piece& rp : cut<Rights>(n_rights_, rights_))
                    Lefts::dispatch(lp.size, [&](auto lv) {
                        Rights::dispatch(rp.size, [&](auto rv) {
                            constexpr int NL = decltype(lv)::value, NR = decltype(rv)::value;
                            const dim3 grid(ceil_div(g_.out_w, kWarp), grid_groups(int64_t(lp.groups) * rp.groups),
                                            ceil_div(g_.out_h, kWarps * S));
                            const bool centre = order_.centre_first(multi_both_grouped_kernel<NL, NR, S, S>, grid);
                            multi_both_grouped_kernel<NL, NR, S, S><<<grid, dim3(kWarp, kWarps), 0, stream>>>(
                                left, right, out, g_, n_rights_, lp.begin, lp.groups, rp.begin, rp.groups, centre);
                            XC_CHECK_LAUNCH();
                        }, "rights");
                    }, "lefts");
        }, "overlaps");
    }

private:
    Geometry g_;
    int n_lefts_, n_rights_, lefts_, rights_, overlaps_;
    BlockOrder order_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "multi-matrix-both+grouped-overlap",
    .family = "multi-matrix",
    .summary = "multi-matrix-both with S adjacent overlaps per thread and LR left rows per step (n-to-m)",
    .timed = "kernel (one launch per rectangle of equal group sizes)",
    .forms = {Form::NToM},
    .params = {Lefts::param("lefts", "left matrices per thread (l)"),
               Overlaps::param("overlaps", "vertically adjacent overlaps per thread (S); must equal left_rows"),
               Rights::param("rights", "right matrices per thread (r)"),
               Overlaps::param("left_rows", "left rows per main-phase step (LR); must equal overlaps")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<MultiBothGrouped>(p, param_int(ps, "lefts"), param_int(ps, "rights"),
                                                  param_int(ps, "overlaps"), param_int(ps, "left_rows"));
    },
});

}  // namespace
}  // namespace xcorr::multi_matrix_both_grouped
