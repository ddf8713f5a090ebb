// multi-matrix-right: warp-shuffle with R right matrices per thread (paper 4.3.1, thesis 3.4.4;
// "multi-matrix-right (R8)" in ANCHORS.md).
//
// Work mapping. A warp computes 32 adjacent overlaps (output columns x0 .. x0+31) of one output row
// y, for a group of R right matrices that share one left matrix: each lane keeps R sums, and every
// left value it receives is used R times. The warps of a 4-warp block take 4 adjacent output rows;
// grid x covers the output columns, y the (left, right group) pairs (strided past 65535), z the row
// blocks, centre rows first when the grid runs in several waves (common/multi_matrix.cuh says
// why). Per right row of the overlap the warp walks the right columns it needs in chunks of
// 32: the left row sits in a 64-item warp-wise window (2 registers per lane), read with one shuffle
// per step, the R right rows in 32-item buffers read by broadcast shuffles, values outside the
// matrices loaded as zeros (common/warp_buffer.cuh, common/multi_matrix.cuh). Per step: 1 + R
// shuffles, R FMAs (the paper's rotated window: 2 + R). Matrices of the right stack that do not
// fill a group of R run as a second launch (or more) with a smaller R: the group sizes R, R/2, ...,
// 1 are all instantiated, nothing is padded. n-to-mn and n-to-m run as one one-to-many per left
// matrix, either folded into grid y (launch=grid) or as separate launches on K streams
// (launch=streamsK).
#include <memory>
#include <optional>

#include "common/device.cuh"
#include "common/multi_matrix.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "common/multi_matrix_launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::multi_matrix_right {
namespace {

using namespace multi;

template <int R>
__global__ void __launch_bounds__(kWarp * kWarps, (kMinBlocks<1, R, 1, 1>))
    multi_right_kernel(const float* __restrict__ left, const float* __restrict__ right, float* __restrict__ out,
                       Geometry g, PairGrid pairs, int i_begin, int n_lefts, int j_begin, int n_groups, bool centre_first) {
    const int y = row_block(centre_first) * kWarps + threadIdx.y;
    if (y >= g.out_h) return;  // whole warps only
    const int x0 = blockIdx.x * kWarp;
    const int x = x0 + lane_id();
    const int dy = y - (g.hR - 1);
    const Span rows = overlap_span(dy, g.hL, g.hR);
    const WarpColumns cols = warp_columns(x0, g.wL, g.wR);

    const int64_t jobs = int64_t(n_lefts) * n_groups;
    for (int64_t z = blockIdx.y; z < jobs; z += gridDim.y) {
        const int i = i_begin + int(z / n_groups);
        const int j0 = j_begin + int(z % n_groups) * R;
        const float* L = opaque_ptr(left + int64_t(i) * g.left_size);
        const float* Rm = opaque_ptr(right + pairs.right(i, j0) * g.right_size);
        int64_t rstep = int64_t(pairs.rsj) * g.right_size;
        asm("" : "+l"(rstep));  // kept in a register, not rebuilt from the parameters per load (see opaque_ptr)
        float acc[1][1][R] = {};
        for (int r = rows.begin; r < rows.end; ++r)
            accumulate_band<1, R, 1, 1>(acc, L, 0, Rm, rstep, g.wL, g.hR, g.wR, r + dy, r, cols);
        if (x < g.out_w) {
#pragma unroll
            for (int k = 0; k < R; ++k) {
                const int64_t o = pairs.output(i, j0 + k);
                out[(o * g.out_h + y) * g.out_w + x] = acc[0][0][k];
            }
        }
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Rights = Values<8, 1, 2, 4>;

class MultiRight final : public Instance {
public:
    MultiRight(const Problem& p, int rights, int streams)
        : g_(geometry(p)), pairs_(pair_map(p).grid()), rights_(rights) {
        require_grid(p, kWarps);
        if (streams > 0) fan_.emplace(streams);
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        for_lefts(fan_, stream, pairs_.N,
                  [&](int i_begin, int n_lefts, cudaStream_t s) { launch(left, right, out, i_begin, n_lefts, s); });
    }

private:
    void launch(const float* left, const float* right, float* out, int i_begin, int n_lefts, cudaStream_t s) {
        for (const Piece& pc : cut<Rights>(pairs_.M, rights_)) {
            Rights::dispatch(pc.size, [&](auto r) {
                constexpr int R = decltype(r)::value;
                const dim3 grid(ceil_div(g_.out_w, kWarp), grid_groups(int64_t(n_lefts) * pc.groups),
                                ceil_div(g_.out_h, kWarps));
                const bool centre = order_.centre_first(multi_right_kernel<R>, grid);
                multi_right_kernel<R><<<grid, dim3(kWarp, kWarps), 0, s>>>(left, right, out, g_, pairs_, i_begin,
                                                                            n_lefts, pc.begin, pc.groups, centre);
                XC_CHECK_LAUNCH();
            }, "rights");
        }
    }

    Geometry g_;
    PairGrid pairs_;
    int rights_;
    BlockOrder order_;
    std::optional<StreamFan> fan_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "multi-matrix-right",
    .family = "multi-matrix",
    .summary = "warp-shuffle, each thread one overlap of R right matrices sharing its left values",
    .timed = "kernel (one launch per group size; launch=streamsK: one per left matrix, K streams)",
    .forms = {Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Rights::param("rights", "right matrices per thread (R)"),
               kLaunchParam},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<MultiRight>(p, param_int(ps, "rights"), parse_launch(ps.at("launch")));
    },
});

}  // namespace
}  // namespace xcorr::multi_matrix_right
