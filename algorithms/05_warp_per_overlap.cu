// warp-per-overlap: one warp per output element (paper, section 4.4; thesis 3.6.1 "warp per shift").
//
// Aimed at small matrices, where one thread per overlap leaves the GPU mostly idle: a whole warp
// computes one overlap and the overlap's products are dealt out round-robin to the 32 lanes in
// row-major order of the overlapping area (the thesis's "basic indexing"), so that every lane gets
// within one product of the same work whatever the overlap's width; a shuffle reduction at the end
// sums the 32 partial sums.
#include <algorithm>

#include "common/device.cuh"
#include "common/warp_buffer.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::warp_per_overlap {
namespace {

// Loads in flight per lane and loop trip. 4, not 8: with 8 the loop needs 40 registers, which caps
// residency at 48 of 64 warps per SM, and from 64 x 64 up this kernel hides its load latency by
// occupancy, not by loads in flight (with 4 it fits 32 registers, no spill: 64 warps per SM).
constexpr int kUnroll = 4;

// Work mapping. A block is 32 x OVERLAPS threads; warp threadIdx.y of block b takes output element
// e = b * OVERLAPS + threadIdx.y in row-major order of the output matrix, so the warps of a block
// take neighbouring shifts and share most of their input in L1. Lane l takes products l, l + 32,
// l + 64, ... of the overlap's nr x nc products, in row-major order. The lane walks them with a
// precomputed step (32 = q * nc + s: q rows and s columns, with at most one row wrap per step), so
// the loop holds no division, and the index of product i is never formed. blockIdx.y strides over
// the output matrices of the stack (PairMap picks each one's left and right matrix), reusing the
// geometry computed once per warp.
//
// Windows (CONVENTIONS.md, "Output windows"): e runs over the window's out_h x out_w elements and
// element (y, x) is shift (dy0 + y, dx0 + x) (the full output: dy0 = -(hR - 1), dx0 = -(wR - 1)).
// A shift beyond the full range has no products: its warp takes the geometry of an empty overlap
// at shift (0, 0) (no division by a zero width, no overflowing offsets), runs no trip and writes
// the 0 the contract asks for.
template <int OVERLAPS>
__global__ void __launch_bounds__(kWarp * OVERLAPS)
    warp_per_overlap_kernel(const float* __restrict__ left, const float* __restrict__ right,
                            float* __restrict__ out, int hL, int wL, int hR, int wR, Window win,
                            int64_t count, PairMap pairs) {
    const int out_h = int(win.out_h()), out_w = int(win.out_w());
    const int e = blockIdx.x * OVERLAPS + threadIdx.y;
    if (e >= out_h * out_w) return;  // uniform per warp: the shuffles below see full warps
    const int lane = threadIdx.x;
    const int y = e / out_w, x = e - y * out_w;
    const int64_t out_elems = int64_t(out_h) * out_w;  // hoisted: keeps the kernel within 32 registers
    int dy = win.dy0 + y, dx = win.dx0 + x;
    Span rows = overlap_span(dy, hL, hR), cols = overlap_span(dx, wL, wR);
    if (rows.begin == rows.end || cols.begin == cols.end)  // beyond the full range
        dy = dx = 0, rows = Span{0, 0}, cols = Span{0, 1};
    const int nc = cols.end - cols.begin;
    const int total = (rows.end - rows.begin) * nc;
    const int trips = total > lane ? (total - lane + kWarp - 1) / kWarp : 0;

    // First product of this lane and the constant step of 32 products, as offsets into L and R.
    const int r0 = lane / nc, c0 = lane - r0 * nc;
    const int step_r = kWarp / nc, step_c = kWarp - step_r * nc;
    const int start_l = (rows.begin + r0 + dy) * wL + cols.begin + c0 + dx;
    const int start_r = (rows.begin + r0) * wR + cols.begin + c0;
    const int step_l = step_r * wL + step_c, step_rr = step_r * wR + step_c;
    const int wrap_l = wL - nc, wrap_r = wR - nc;  // extra advance when a step crosses a row end

    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        // opaque_ptr: otherwise ptxas rebuilds every unrolled load's address from the kernel
        // parameter (LDC.64 + 64-bit add + LEA pair per load, +8 instructions per product).
        const float* __restrict__ L = opaque_ptr(left + int64_t(pairs.left_of(k)) * hL * wL);
        const float* __restrict__ R = opaque_ptr(right + int64_t(pairs.right_of(k)) * hR * wR);
        int ol = start_l, orr = start_r, c = c0;
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int t = 0; t < trips; t += kUnroll) {
            float a[kUnroll], b[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                // Offsets past the last product are formed but never dereferenced.
                a[u] = t + u < trips ? __ldg(L + ol) : 0.0f;
                b[u] = t + u < trips ? __ldg(R + orr) : 0.0f;
                ol += step_l;
                orr += step_rr;
                c += step_c;
                if (c >= nc) {
                    c -= nc;
                    ol += wrap_l;
                    orr += wrap_r;
                }
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) acc[u % 4] = fmaf(a[u], b[u], acc[u % 4]);
        }
        const float sum = warp_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));
        if (lane == 0) out[k * out_elems + e] = sum;
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using OverlapsPerBlock = Values<4, 8, 16, 32>;

class WarpPerOverlap final : public Instance {
public:
    WarpPerOverlap(const Problem& p, int overlaps) : p_(p), overlaps_(overlaps) {}

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        OverlapsPerBlock::dispatch(overlaps_, [&](auto o) {
            constexpr int O = decltype(o)::value;
            const int64_t elems = int64_t(p_.out_h()) * p_.out_w();
            const dim3 block(kWarp, O);
            const dim3 grid(unsigned(ceil_div64(elems, O)),
                            unsigned(std::min<int64_t>(p_.out_count(), 65535)));
            warp_per_overlap_kernel<O><<<grid, block, 0, stream>>>(
                left, right, out, p_.hL, p_.wL, p_.hR, p_.wR, p_.shifts(), p_.out_count(), pair_map(p_));
            XC_CHECK_LAUNCH();
        }, "overlaps_per_block");
    }

private:
    Problem p_;
    int overlaps_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "warp-per-overlap",
    .family = "warp-per-overlap",
    .summary = "one warp per output element, products round-robin over the lanes, shuffle reduction",
    .timed = "kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {OverlapsPerBlock::param("overlaps_per_block", "warps (= overlaps) per block")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<WarpPerOverlap>(p, param_int(ps, "overlaps_per_block"));
    },
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
});

}  // namespace
}  // namespace xcorr::warp_per_overlap
