// multi-matrix-right+grouped-overlap: multi-matrix-right with S vertically adjacent overlaps per
// thread and LR left rows per step (paper 4.2.2 and 4.3.3, Fig. 18 and 20; thesis 3.4.5, 3.5.3,
// 3.5.5 "multirow_both_multimat_right"; the real-data run of section 5.6).
//
// Work mapping. A warp computes the overlaps of S adjacent output rows y0 .. y0+S-1 at 32 adjacent
// output columns, each for a group of R right matrices sharing one left: S*R sums per lane. The
// 4 warps of a block take 4 adjacent row groups; grid x covers the output columns, y the (left,
// right group) pairs, z the row groups, centre rows first (the tallest overlaps start first). The
// warp walks the left rows that meet any of its S overlaps in three phases: init (the first rows,
// where the later overlaps of the group have not started yet), main (every overlap active: LR
// left rows per band with S + LR - 1 right rows per right matrix, so each left value feeds S*R
// FMAs and each right value min(S, LR)), and final
// (the last rows, where the earlier overlaps have ended, plus the main rows left over when their
// count is not a multiple of LR). Init and final go one left row at a time, with the right rows of
// inactive overlaps loaded as zeros: the main phase has no boundary condition at all. Per main
// step: LR + (S+LR-1)*R shuffles for S*LR*R FMAs (4/4/4: 32 for 64). The rest of the right stack
// that does not fill a group of R runs with smaller R (4, 2, 1 are all instantiated).
#include <memory>
#include <optional>

#include "common/device.cuh"
#include "common/multi_matrix.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "common/multi_matrix_launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::multi_matrix_right_grouped {
namespace {

using namespace multi;

template <int R, int S, int LR>
__global__ void __launch_bounds__(kWarp * kWarps, (kMinBlocks<1, R, S, LR>))
    multi_right_grouped_kernel(const float* __restrict__ left, const float* __restrict__ right,
                               float* __restrict__ out, Geometry g, PairGrid pairs, int i_begin, int n_lefts,
                               int j_begin, int n_groups, bool centre_first) {
    const int y0 = (row_block(centre_first) * kWarps + threadIdx.y) * S;
    if (y0 >= g.out_h) return;  // whole warps only
    const int x0 = blockIdx.x * kWarp;
    const int x = x0 + lane_id();
    const int dy0 = y0 - (g.hR - 1);  // row shift of overlap 0; overlap s has dy0 + s
    const WarpColumns cols = warp_columns(x0, g.wL, g.wR);
    const GroupRows rows = group_rows<S>(dy0, g.hL, g.hR);

    const int64_t jobs = int64_t(n_lefts) * n_groups;
    for (int64_t z = blockIdx.y; z < jobs; z += gridDim.y) {
        const int i = i_begin + int(z / n_groups);
        const int j0 = j_begin + int(z % n_groups) * R;
        const float* L = opaque_ptr(left + int64_t(i) * g.left_size);
        const float* Rm = opaque_ptr(right + pairs.right(i, j0) * g.right_size);
        int64_t rstep = int64_t(pairs.rsj) * g.right_size;
        asm("" : "+l"(rstep));  // kept in a register, not rebuilt from the parameters per load (see opaque_ptr)
        float acc[S][1][R] = {};
        accumulate_group<1, R, S, LR>(acc, L, 0, Rm, rstep, g, dy0, rows, cols);
        if (x < g.out_w) {
#pragma unroll
            for (int s = 0; s < S; ++s) {
                if (y0 + s >= g.out_h) break;
#pragma unroll
                for (int k = 0; k < R; ++k) {
                    const int64_t o = pairs.output(i, j0 + k);
                    out[(o * g.out_h + y0 + s) * g.out_w + x] = acc[s][0][k];
                }
            }
        }
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
// left_rows takes the values of overlaps (the two must be equal).
using Overlaps = Values<4, 1, 2>;
using Rights = Values<4, 1, 2>;

class MultiRightGrouped final : public Instance {
public:
    MultiRightGrouped(const Problem& p, int rights, int overlaps, int left_rows, int streams)
        : g_(geometry(p)), pairs_(pair_map(p).grid()), rights_(rights), overlaps_(overlaps) {
        if (overlaps != left_rows)
            throw UsageError("multi-matrix-right+grouped-overlap instantiates overlaps = left_rows only: "
                             "(overlaps, left_rows) in {(1,1), (2,2), (4,4)}, rights in {1, 2, 4}; got overlaps=" +
                             std::to_string(overlaps) + ", left_rows=" + std::to_string(left_rows));
        require_grid(p, kWarps * overlaps);
        if (streams > 0) fan_.emplace(streams);
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        for_lefts(fan_, stream, pairs_.N,
                  [&](int i_begin, int n_lefts, cudaStream_t s) { launch(left, right, out, i_begin, n_lefts, s); });
    }

private:
    void launch(const float* left, const float* right, float* out, int i_begin, int n_lefts, cudaStream_t s) {
        Overlaps::dispatch(overlaps_, [&](auto sv) {
            constexpr int S = decltype(sv)::value;
            for (const Piece& pc : cut<Rights>(pairs_.M, rights_)) {
                Rights::dispatch(pc.size, [&](auto r) {
                    constexpr int R = decltype(r)::value;
                    const dim3 grid(ceil_div(g_.out_w, kWarp), grid_groups(int64_t(n_lefts) * pc.groups),
                                    ceil_div(g_.out_h, kWarps * S));
                    const bool centre = order_.centre_first(multi_right_grouped_kernel<R, S, S>, grid);
                    multi_right_grouped_kernel<R, S, S><<<grid, dim3(kWarp, kWarps), 0, s>>>(
                        left, right, out, g_, pairs_, i_begin, n_lefts, pc.begin, pc.groups, centre);
                    XC_CHECK_LAUNCH();
                }, "rights");
            }
        }, "overlaps");
    }

    Geometry g_;
    PairGrid pairs_;
    int rights_, overlaps_;
    BlockOrder order_;
    std::optional<StreamFan> fan_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "multi-matrix-right+grouped-overlap",
    .family = "multi-matrix",
    .summary = "multi-matrix-right with S adjacent overlaps per thread and LR left rows per step",
    .timed = "kernel (one launch per group size; launch=streamsK: one per left matrix, K streams)",
    .forms = {Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Overlaps::param("overlaps", "vertically adjacent overlaps per thread (S); must equal left_rows"),
               Rights::param("rights", "right matrices per thread (R)"),
               Overlaps::param("left_rows", "left rows per main-phase step (LR); must equal overlaps"),
               kLaunchParam},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<MultiRightGrouped>(p, param_int(ps, "rights"), param_int(ps, "overlaps"),
                                                   param_int(ps, "left_rows"), parse_launch(ps.at("launch")));
    },
});

}  // namespace
}  // namespace xcorr::multi_matrix_right_grouped
