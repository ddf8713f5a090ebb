// warp-shuffle: the paper's base warp-shuffle algorithm (section 4.1; thesis section 3.4.1).
//
// Work mapping. A warp computes 32 adjacent output elements (overlaps) of one output row: lane t
// takes column x0 + t, x0 a multiple of 32; the WARPS warps of a block take consecutive output
// rows. Each lane loops over the whole rows of its overlap (no split); all lanes of a warp share
// the same overlap rows, and they walk the union of their overlap columns (the right matrix's
// columns that any lane needs) in 32-wide chunks. Per row and chunk, the left row sits in a 64-item
// warp-wise window (two registers per lane, see common/warp_buffer.cuh) and the right row in a
// 32-item buffer (one register per lane), both filled by coalesced, bounds-checked loads that put
// zeros outside the matrices; then 32 fully unrolled steps, each one FMA per lane fed by a
// shuffle of the left window and a broadcast of the right buffer (left_shuffle=index, default;
// left_shuffle=rotate shifts the window by two shuffles per step as the paper's code does, 3
// shuffles per FMA instead of 2; timings: notes/02_warp_shuffle.md). Lanes
// whose overlap is narrower than the warp's column range multiply zeros instead of branching. The
// next chunk's three loads are issued before the current chunk's 32 steps (prefetch across rows
// and chunks).
// Blocks are issued centre-out (heaviest overlaps first). The z grid dimension indexes the output
// matrices (PairMap picks each output's inputs), so every form is one launch per 65535 outputs.
#include <algorithm>
#include <string>

#include "common/device.cuh"
#include "common/warp_buffer.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::warp_shuffle {
namespace {

// 64 / WARPS blocks per SM = 64 warps: a cap of 32 registers, all the kernel needs (with an
// explicit cap ptxas schedules for it; left to its own heuristics it spills).
template <int WARPS, LeftMode MODE>
__global__ void __launch_bounds__(kWarp * WARPS, 64 / WARPS)
    warp_shuffle_kernel(const float* __restrict__ left, const float* __restrict__ right,
                        float* __restrict__ out, int hL, int wL, int hR, int wR, int k0,
                        PairMap pairs) {
    const int out_h = hL + hR - 1, out_w = wL + wR - 1;
    const int lane = lane_id();
    const int x0 = middle_out(blockIdx.x, gridDim.x) * kWarp;
    const int y = middle_out(blockIdx.y, gridDim.y) * WARPS + int(threadIdx.y);
    if (y >= out_h) return;  // a whole warp: shuffles below need all 32 lanes

    const int k = k0 + int(blockIdx.z);
    const PairMap::Pair pi = pairs.pair32(k);
    const float* L = opaque_ptr(left + int64_t(pi.left) * hL * wL);
    const float* R = opaque_ptr(right + int64_t(pi.right) * hR * wR);

    const int dy = y - (hR - 1);
    const Span rows = overlap_span(dy, hL, hR);
    const WarpColumns cols = warp_columns(x0, wL, wR);
    const int lcol = cols.dx0 + lane;  // left column of step 0, chunk 0
    const float sum = warp_shuffle_rows<MODE>(L, hL, wL, R, hR, wR, dy, rows.begin, rows.end, cols, lane, lcol);
    if (x0 + lane < out_w) out[(int64_t(k) * out_h + y) * out_w + x0 + lane] = sum;
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Warps = Values<4, 8>;
constexpr auto kLeftShuffles = choices<LeftMode>({{LeftMode::Index, "index"}, {LeftMode::Rotate, "rotate"}});

class WarpShuffle final : public Instance {
public:
    WarpShuffle(const Problem& p, int warps, LeftMode mode) : p_(p), warps_(warps), mode_(mode) {}

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        Warps::dispatch(warps_, [&](auto w) {
            constexpr int W = decltype(w)::value;
            decltype(&warp_shuffle_kernel<W, LeftMode::Index>) kernel = nullptr;
            dispatch_choice<kLeftShuffles>(mode_, [&](auto m) { kernel = warp_shuffle_kernel<W, decltype(m)::value>; });
            // One output matrix per grid-z index; more than 65535 outputs take several launches.
            const int count = int(p_.out_count());
            for (int k0 = 0; k0 < count; k0 += 65535) {
                const dim3 block(kWarp, W);
                const dim3 grid(ceil_div(p_.out_w(), kWarp), ceil_div(p_.out_h(), W),
                                unsigned(std::min(count - k0, 65535)));
                kernel<<<grid, block, 0, stream>>>(left, right, out, p_.hL, p_.wL, p_.hR, p_.wR, k0,
                                                   pair_map(p_));
                XC_CHECK_LAUNCH();
            }
        }, "warps");
    }

private:
    Problem p_;
    int warps_;
    LeftMode mode_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "warp-shuffle",
    .family = "warp-shuffle",
    .summary = "a warp computes 32 adjacent overlaps; left row in a 64-item shuffled window, right "
               "row broadcast by shuffles (paper 4.1)",
    .timed = "kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Warps::param("warps", "warps per block (block = 32 x warps threads)"),
               kLeftShuffles.param("left_shuffle",
                                   "how lanes read the left window: index = 1 shuffle per step (window stays, the "
                                   "source lane advances), rotate = the paper's 2 shuffles per step (window shifts)")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        const int warps = param_int(ps, "warps");
        if (!fits_int32_count(p)) throw UsageError("warp-shuffle: more than 2^31 - 1 output matrices");
        if (!fits_int32_matrix(p)) throw UsageError("warp-shuffle: a matrix of 2^31 or more elements");
        if (ceil_div(p.out_h(), warps) > 65535)
            throw UsageError("warp-shuffle: output height " + std::to_string(p.out_h()) +
                             " needs more than 65535 block rows");
        return std::make_unique<WarpShuffle>(p, warps, kLeftShuffles.parse(ps.at("left_shuffle"), "left_shuffle"));
    },
});

}  // namespace
}  // namespace xcorr::warp_shuffle
