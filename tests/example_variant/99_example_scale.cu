// example-scale: AN EXAMPLE, not a measured variant. A scale model of overlap-wise
// (algorithms/01_overlap_wise.cu) with nothing left but the variant contract, shipped in the tests:
// tests/test_example_variant.py adds this file to a scratch copy of the tree exactly as
// docs/contributing.md ("Adding a variant") tells a user to, builds it, and checks that the new
// variant appears in `xcorr list`, xcorr_validate, xcorr_bench and xcorr.algorithms(). It is
// never part of the project's own build (algorithms/meson.build does not list it).
//
// Work mapping. One thread computes one output element (one shift (dy, dx) of one output matrix),
// reading both inputs from global memory. A block is 32 x 4 threads: the lanes take 32 consecutive
// columns of one output row, the 4 warps 4 consecutive rows. Grid z strides over the output
// matrices; PairMap::pair32 picks the left and right matrix of output k in 32-bit arithmetic (the
// factory refuses 2^31 or more outputs). Grid y is at most 65535 blocks: a taller output takes
// several launches, each from output row y0. Only the full output (no `windows` declared).
#include <algorithm>

#include "common/device.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::example_scale {
namespace {

constexpr int kRows = 4;  // warps per block

__global__ void __launch_bounds__(kWarp * kRows)
    example_scale_kernel(const float* __restrict__ left, const float* __restrict__ right, float* __restrict__ out,
                         int hL, int wL, int hR, int wR, int y0, int count, PairMap pairs) {
    const int out_h = hL + hR - 1, out_w = wL + wR - 1;
    const int x = int(blockIdx.x) * kWarp + int(threadIdx.x);
    const int y = y0 + int(blockIdx.y) * kRows + int(threadIdx.y);
    if (x >= out_w || y >= out_h) return;
    const int dy = y - (hR - 1), dx = x - (wR - 1);  // the full output's shift of this element
    const Span rows = overlap_span(dy, hL, hR);
    const Span cols = overlap_span(dx, wL, wR);
    for (int k = blockIdx.z; k < count; k += gridDim.z) {
        const PairMap::Pair pk = pairs.pair32(k);
        const float* L = left + int64_t(pk.left) * hL * wL;
        const float* R = right + int64_t(pk.right) * hR * wR;
        float sum = 0.0f;
        for (int r = rows.begin; r < rows.end; ++r)
            for (int c = cols.begin; c < cols.end; ++c)
                sum = fmaf(L[int64_t(r + dy) * wL + dx + c], R[int64_t(r) * wR + c], sum);
        out[(int64_t(k) * out_h + y) * out_w + x] = sum;
    }
}

class ExampleScale final : public Instance {
public:
    explicit ExampleScale(const Problem& p) : p_(p) {}

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        const int rows = p_.out_h(), rows_per_launch = 65535 * kRows;
        for (int y0 = 0; y0 < rows; y0 += rows_per_launch) {
            const dim3 grid(ceil_div(p_.out_w(), kWarp), ceil_div(std::min(rows - y0, rows_per_launch), kRows),
                            unsigned(std::min<int64_t>(p_.out_count(), 65535)));
            example_scale_kernel<<<grid, dim3(kWarp, kRows), 0, stream>>>(left, right, out, p_.hL, p_.wL, p_.hR,
                                                                          p_.wR, y0, int(p_.out_count()),
                                                                          pair_map(p_));
            XC_CHECK_LAUNCH();
        }
    }

private:
    Problem p_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "example-scale",
    .family = "example",  // no family of the project's: default cost-model rate, the "paper" group
    .summary = "an example variant from tests/example_variant (overlap-wise, scaled down to the contract)",
    .timed = "kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {},
    .make = [](const Problem& p, const Params&) -> std::unique_ptr<Instance> {
        if (p.out_count() >= (int64_t(1) << 31)) throw UsageError("example-scale: more than 2^31 - 1 output matrices");
        return std::make_unique<ExampleScale>(p);
    },
});

}  // namespace
}  // namespace xcorr::example_scale
