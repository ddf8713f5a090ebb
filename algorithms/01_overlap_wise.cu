// overlap-wise: the paper's naive baseline (section 3.1.1; "baseline" in Fig. 17, 20 and 23).
//
// Work mapping. One thread computes one output element, i.e. one overlap (one relative shift
// (dy, dx)) of one output matrix, reading both inputs straight from global memory with no reuse
// beyond what the L1 and L2 caches give. A block is 32 x WARPS threads: the 32 lanes of a warp take
// 32 consecutive columns of one output row and the warps take consecutive rows, as in the paper's
// warp-shuffle kernels, so that the baseline differs from them only in data reuse. The z grid
// dimension strides over the output matrices of the stack, so every form is a single launch and
// PairMap picks the left and right matrix of each output. Each thread loops exactly over its own
// overlap (no zero padding), which is the load imbalance the paper describes: a corner output
// costs one multiply-add, the centre one min(hL,hR) * min(wL,wR).
//
// Windows (CONVENTIONS.md, "Output windows"). The grid covers the window's out_h x out_w
// elements, and thread (y, x) computes shift (dy0 + y, dx0 + x); the full output is the window
// dy0 = -(hR - 1), dx0 = -(wR - 1). A shift beyond the full range has an empty overlap span, so
// its thread writes the 0 the contract asks for without a special case.
//
// Index widths and grid limits (what a copy of this file must keep). The output index k is an int
// and PairMap::pair32 finds its matrices in 32-bit arithmetic: a 64-bit division is a subroutine
// call in SASS whose register saves ptxas reports as spills, which the strict build
// (-Dptxas_strict) refuses in a kernel with more registers in use than this one. The factory
// refuses 2^31 or more outputs so that k fits; element offsets (k * out_elems, matrix strides)
// stay 64-bit, as a stack can hold more than 2^31 floats. gridDim.y is at most 65535 (x is 2^31 -
// 1, z 65535): output rows beyond 65535 x WARPS are taken by further launches, each starting at
// output row y0, and the z dimension strides over the output matrices.
//
// This file is the model for every variant: kernel(s), launch wrapper, parameter space and
// registration, depending only on the harness API (xcorr/*.hpp) and common/device.cuh.
#include <algorithm>

#include "common/device.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::overlap_wise {
namespace {

template <int WARPS>
__global__ void __launch_bounds__(kWarp * WARPS)
    overlap_wise_kernel(const float* __restrict__ left, const float* __restrict__ right,
                        float* __restrict__ out, int hL, int wL, int hR, int wR, Window win,
                        int y0, int count, PairMap pairs) {
    const int out_h = int(win.out_h()), out_w = int(win.out_w());
    const int x = blockIdx.x * kWarp + threadIdx.x;
    const int y = y0 + int(blockIdx.y) * WARPS + int(threadIdx.y);  // y0: this launch's first row
    if (x >= out_w || y >= out_h) return;

    // Shift of this output element, and the rows/columns of R that overlap L under it (none
    // beyond the full range: the loops are empty and the element is 0).
    const int dy = win.dy0 + y, dx = win.dx0 + x;
    // Where the element lies in every output matrix (hoisted: in the loop ptxas spilled at warps=4).
    const int yx = y * out_w + x;
    const int64_t out_elems = int64_t(out_h) * out_w;
    const Span rows = overlap_span(dy, hL, hR);
    const Span cols = overlap_span(dx, wL, wR);

    for (int k = blockIdx.z; k < count; k += gridDim.z) {  // 32-bit: count < 2^31 (the factory)
        const PairMap::Pair pk = pairs.pair32(k);
        const float* L = left + int64_t(pk.left) * hL * wL;
        const float* R = right + int64_t(pk.right) * hR * wR;
        // Each row of the overlap into a sum of its own, then the rows' sums: one running sum of a
        // 1024 x 1024 overlap's million products drifts ~2e-5 from float64, past the 1e-5 that
        // fp32 promises; a row's sum then the sum of rows stays within it (blocked summation, the
        // same loads and multiply-adds plus one add per row).
        float sum = 0.0f;
        for (int r = rows.begin; r < rows.end; ++r) {
            const float* Lrow = L + int64_t(r + dy) * wL + dx;
            const float* Rrow = R + int64_t(r) * wR;
            float row = 0.0f;
            for (int c = cols.begin; c < cols.end; ++c) row = fmaf(Lrow[c], Rrow[c], row);
            sum += row;
        }
        out[int64_t(k) * out_elems + yx] = sum;
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Warps = Values<4, 8>;

class OverlapWise final : public Instance {
public:
    OverlapWise(const Problem& p, int warps) : p_(p), warps_(warps) {}

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        Warps::dispatch(warps_, [&](auto w) {
            constexpr int W = decltype(w)::value;
            const dim3 block(kWarp, W);
            // gridDim.y is at most 65535 blocks: a taller output takes one launch per 65535 * W
            // rows (one launch for any output up to 262140 rows at warps=4).
            const int rows = int(p_.out_h()), rows_per_launch = 65535 * W;
            for (int y0 = 0; y0 < rows; y0 += rows_per_launch) {
                const dim3 grid(ceil_div(p_.out_w(), kWarp), ceil_div(std::min(rows - y0, rows_per_launch), W),
                                unsigned(std::min<int64_t>(p_.out_count(), 65535)));
                overlap_wise_kernel<W><<<grid, block, 0, stream>>>(left, right, out, p_.hL, p_.wL, p_.hR, p_.wR,
                                                                   p_.shifts(), y0, int(p_.out_count()),
                                                                   pair_map(p_));
                XC_CHECK_LAUNCH();
            }
        }, "warps");
    }

private:
    Problem p_;
    int warps_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "overlap-wise",
    .family = "baseline",
    .summary = "one thread per output element, no data reuse (the paper's baseline)",
    .timed = "kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Warps::param("warps", "warps per block (block = 32 x warps threads)")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        // The kernel's output index k is 32-bit (pair32, see the header).
        if (p.out_count() >= (int64_t(1) << 31))
            throw UsageError("overlap-wise: more than 2^31 - 1 output matrices");
        return std::make_unique<OverlapWise>(p, param_int(ps, "warps"));
    },
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
});

}  // namespace
}  // namespace xcorr::overlap_wise
