// grouped-overlap: the warp-shuffle algorithm with S vertically adjacent overlaps per thread
// (paper 4.2.2; thesis 3.4.5 "multirow_right" and 3.5.3 "multirow_both").
//
// Work mapping. A warp computes S x 32 outputs: output rows y0 .. y0+S-1 (y0 a multiple of S) of
// the 32 adjacent columns x0 .. x0+31, lane t taking column x0 + t and keeping S sums; the 4 warps
// of a block take consecutive row groups. The warp walks the left rows that meet any of its S
// overlaps in steps of L rows, and for each step the union of its lanes' overlap columns in
// 32-wide chunks. Per step and chunk it caches L left rows (L 64-item warp-wise windows) and the
// S + L - 1 right rows they pair with: left row l meets overlap o through right row slot
// l + S - 1 - o. Each of the 32 steps then costs L left shuffles + (S + L - 1) right broadcasts
// for S * L FMAs (Index mode, common/warp_buffer.cuh; the paper's rotating windows cost L more),
// e.g. 23 shuffles per 64 FMAs for S = L = 8, against 3 per FMA in the paper's base algorithm.
// Each left row is loaded once per warp; right rows S + L - 1 times per L rows.
//
// Init, main and final phases. The paper splits the row loop so that only its init and final
// phases, where the S overlaps do not all cover the current left rows, handle the partial sets
// of overlaps, keeping conditions out of the main loop. Here right rows outside the right matrix
// (and left rows past the last one) load as zeros, so the init and final groups run exactly the
// main loop's code and contribute zero products where an overlap does not reach: no phase needs
// a condition outside the loads, and only one copy of the step body exists. The price is up to
// S + L - 2 zero rows per task, about what the paper's one-row init/final steps cost in shuffles.
//
// Unrolling. The paper unrolls all 32 steps. A fully unrolled S8 L8 body is ~3100 instructions
// (50 KB), likely more than the instruction cache holds (not profiled), so U, the steps per
// unrolled iteration (U < 32: runtime broadcast and source lanes, one more shuffle per 32
// steps), is chosen per (S, L) in the table below (measurements:
// notes/04_grouped_overlap.md).
// Loads for the next (row group, chunk) are issued before the current 32 steps. Blocks are issued
// centre-out (heaviest first). The z grid dimension indexes the output matrices.
#include <algorithm>
#include <string>

#include "common/device.cuh"
#include "common/warp_buffer.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::grouped_overlap {
namespace {

constexpr int kWarps = 4;

// Register caps (via the minimum resident blocks): tight enough that ptxas does not spread the
// unrolled steps over registers it does not need, loose enough that it does not spill.
constexpr int min_blocks(int s, int l, int u) {
    return s * l == 1 ? 16 : s * l == 4 ? (u == 32 ? 10 : 8) : s == 4 ? 6 : s == 2 ? (u == 32 ? 5 : 4) : 4;
}

template <int S, int LR, int U>
__global__ void __launch_bounds__(kWarp * kWarps, min_blocks(S, LR, U))
    grouped_overlap_kernel(const float* __restrict__ left, const float* __restrict__ right,
                           float* __restrict__ out, int hL, int wL, int hR, int wR, int k0,
                           PairMap pairs) {
    constexpr int NR = S + LR - 1;  // right rows cached per step
    const int out_h = hL + hR - 1, out_w = wL + wR - 1;
    const int lane = lane_id();
    const int x0 = middle_out(blockIdx.x, gridDim.x) * kWarp;
    const int y0 = (middle_out(blockIdx.y, gridDim.y) * kWarps + int(threadIdx.y)) * S;
    if (y0 >= out_h) return;  // a whole warp

    const int k = k0 + int(blockIdx.z);
    const PairMap::Pair pi = pairs.pair32(k);
    const float* L = opaque_ptr(left + int64_t(pi.left) * hL * wL);
    const float* R = opaque_ptr(right + int64_t(pi.right) * hR * wR);

    const int dy0 = y0 - (hR - 1);  // row shift of the first overlap
    // Left rows that meet any of the S overlaps; the group at left row g pairs with right rows
    // g - dy0 - (S - 1) + j, j < NR.
    const int lbeg = max(0, dy0), lend = min(hL, hR + dy0 + S - 1);
    const WarpColumns cols = warp_columns(x0, wL, wR);
    const int steps = ceil_div(lend - lbeg, LR) * cols.chunks();
    const int lcol = cols.dx0 + lane;
    const int rshift = dy0 + S - 1;  // right row of slot j = g - rshift + j

    LeftWindow<LeftMode::Index> win[LR];
    float rbuf[NR];
    int g = lbeg, c = cols.begin;
#pragma unroll
    for (int l = 0; l < LR; ++l) {
        win[l].lo = load_rc_or_zero(L, hL, wL, g + l, c + lcol);
        win[l].hi = load_rc_or_zero(L, hL, wL, g + l, c + lcol + kWarp);
    }
#pragma unroll
    for (int j = 0; j < NR; ++j) rbuf[j] = load_rc_or_zero(R, hR, wR, g - rshift + j, c + lane);

    float sum[S];
#pragma unroll
    for (int o = 0; o < S; ++o) sum[o] = 0.0f;

    for (int i = 0; i < steps; ++i) {
        int cn = c + kWarp, gn = g;
        if (cn >= cols.end) cn = cols.begin, gn += LR;
        // Prefetch the next (row group, chunk); after the last one a far negative row makes the
        // guards skip every load.
        const int gl = i + 1 < steps ? gn : -(1 << 29);
        float next_lo[LR], next_hi[LR], next_r[NR];
#pragma unroll
        for (int l = 0; l < LR; ++l) {
            next_lo[l] = load_rc_or_zero(L, hL, wL, gl + l, cn + lcol);
            next_hi[l] = load_rc_or_zero(L, hL, wL, gl + l, cn + lcol + kWarp);
        }
#pragma unroll
        for (int j = 0; j < NR; ++j) next_r[j] = load_rc_or_zero(R, hR, wR, gl - rshift + j, cn + lane);

        const int ln = lane_id_fresh();
        // U steps unrolled per iteration; U = 32 is the paper's full unroll (constant lanes).
#pragma unroll 1
        for (int s0 = 0; s0 < kWarp; s0 += U) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int s = s0 + u;
                float a[LR], b[NR];
#pragma unroll
                for (int l = 0; l < LR; ++l) {
                    if constexpr (U == kWarp) a[l] = win[l].at(s, ln);
                    else a[l] = win[l].at_any(s, ln);
                }
#pragma unroll
                for (int j = 0; j < NR; ++j) b[j] = broadcast(rbuf[j], s);
#pragma unroll
                for (int l = 0; l < LR; ++l)
#pragma unroll
                    for (int o = 0; o < S; ++o) sum[o] = fmaf(a[l], b[l + S - 1 - o], sum[o]);
            }
        }
#pragma unroll
        for (int l = 0; l < LR; ++l) win[l].lo = next_lo[l], win[l].hi = next_hi[l];
#pragma unroll
        for (int j = 0; j < NR; ++j) rbuf[j] = next_r[j];
        g = gn, c = cn;
    }

    if (x0 + lane < out_w) {
        float* o = out + (int64_t(k) * out_h + y0) * out_w + x0 + lane;
#pragma unroll
        for (int r = 0; r < S; ++r)
            if (y0 + r < out_h) o[int64_t(r) * out_w] = sum[r];
    }
}

using Kernel = void (*)(const float*, const float*, float*, int, int, int, int, int, PairMap);

// The instantiated (S = overlaps, L = left rows, U = unroll) rows (xcorr/dispatch.hpp): Fig. 15
// (S = L) and Fig. 17 / ANCHORS (S2 L8), each with its measured best unroll (notes/04_grouped_overlap.md).
using Groupings = Combos<Row<1, 1, 32>, Row<2, 2, 32>, Row<4, 4, 32>, Default<8, 8, 8>, Row<2, 8, 16>>;

class GroupedOverlap final : public Instance {
public:
    GroupedOverlap(const Problem& p, int s, Kernel kernel) : p_(p), s_(s), kernel_(kernel) {}

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        const int count = int(p_.out_count());
        for (int k0 = 0; k0 < count; k0 += 65535) {
            const dim3 block(kWarp, kWarps);
            const dim3 grid(ceil_div(p_.out_w(), kWarp), ceil_div(ceil_div(p_.out_h(), s_), kWarps),
                            unsigned(std::min(count - k0, 65535)));
            kernel_<<<grid, block, 0, stream>>>(left, right, out, p_.hL, p_.wL, p_.hR, p_.wR, k0,
                                                pair_map(p_));
            XC_CHECK_LAUNCH();
        }
    }

private:
    Problem p_;
    int s_;
    Kernel kernel_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "grouped-overlap",
    .family = "warp-shuffle",
    .summary = "warp-shuffle with S vertically adjacent overlaps per thread, L left and S+L-1 right "
               "rows cached per step (paper 4.2.2)",
    .timed = "kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Groupings::param(0, "overlaps",
                                "S, overlaps per thread (vertically adjacent outputs). Instantiated (S, L) pairs: " +
                                    Groupings::listing(2, "(", ",", ")") + "; other pairs are rejected"),
               Groupings::param(1, "left_rows", "L, left rows per step (see overlaps for the pairs)"),
               Values<kWarps>::param("warps", "warps per block (fixed at 4, as in the paper's experiments)")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        const int s = param_int(ps, "overlaps"), l = param_int(ps, "left_rows");
        if (!Groupings::has(std::array{s, l}))
            throw UsageError("grouped-overlap: overlaps=" + std::to_string(s) + " left_rows=" + std::to_string(l) +
                             " is not instantiated; pairs: " + Groupings::listing(2, "", "/", ""));
        Kernel kernel = nullptr;
        Groupings::dispatch(std::array{s, l}, [&](auto row) {
            using G = decltype(row);
            kernel = grouped_overlap_kernel<G::at(0), G::at(1), G::at(2)>;
        });
        if (!fits_int32_count(p)) throw UsageError("grouped-overlap: more than 2^31 - 1 output matrices");
        if (!fits_int32_matrix(p)) throw UsageError("grouped-overlap: a matrix of 2^31 or more elements");
        return std::make_unique<GroupedOverlap>(p, s, kernel);
    },
});

}  // namespace
}  // namespace xcorr::grouped_overlap
