// multi-matrix-tiled: register-tiled many-matrix correlation for Hopper (beyond the paper).
//
// For one shift (dy, dx) many matrices make a GEMM: out[i][j][dy][dx] = sum_(r,c) L_i[r+dy][c+dx]
// * R_j[r][c], with M = shifts, N = pairs, K = (r, c). The paper's kernels are shuffle-bound; here
// a block stages tiles of the lefts and rights in shared memory (4-byte cp.async, zero-filled
// outside the matrices, a 2- or 4-deep ring) and every thread accumulates a register tile, so
// that FMAs issue back to back from shared-memory operands that each feed many FMAs.
//
// Work mapping (multi_tiled_kernel). A block is 4 warps (2 x 2) and owns a tile of 2*ROWS shift
// rows x 32 shift columns for one group of pairs; blockIdx.x walks the shift tiles sorted on the
// host by their work (union of overlaps), heaviest first, so in-order block dispatch is a
// longest-job-first schedule; blockIdx.z strides over the pair groups. Lane = 8 pair lanes x 4
// dx groups. A thread holds ROWS shift rows x 4 consecutive shift columns x its pairs and steps
// along the R columns four at a time: per step it reads one LDS.128 of R per right and two
// LDS.128 per (left, shift row) (the sliding window L[c+dx .. c+dx+7]) and issues 16 x rights x
// rows x lefts FMAs: 256 FFMA for 12 LDS.128 with rows=4, rights=4. The 8 pair lanes (`lanes`):
//   rights: 8 rights per lane group, RIGHTS of them per thread (lane + 8q), sharing LEFTS lefts
//           held in the thread; L reads are broadcasts. All forms (n-to-mn: rights of one left,
//           stride N). rights=7 (56 per block) fills the 50-rights-per-left real-data shape.
//   lefts:  8 lefts on the lanes, 4 rights per thread (n-to-mn: rights of the lane's own left;
//           n-to-m: 4 rights shared by the 8 lefts). 32 distinct L vectors per warp load.
// The K loop covers the union of the overlaps of the block's shifts in chunks of 4 R rows x 32 R
// columns; inside a chunk each warp restricts rows and 4-column steps to the union of its own
// ROWS x 16 shifts, so the zero corners of the full output cost little (the residual padding, from
// the 16-wide warp column tile and the 4-column steps, matters only for small matrices).
//
// Bottleneck. An SM scheduler issues one instruction per clock and its FP32 pipe takes one FFMA
// per clock, so every non-FFMA instruction costs an FMA slot: the register tile is sized so that
// FFMAs are all but a few of the inner loop's instructions (rows=4, rights=4: 256 FFMA, 12 LDS.128
// and a few others per step; rights=1, for small problems, has the smallest share). Shared memory: per step
// a warp needs <= 12 wavefronts (R vectors broadcast or conflict-free: slot stride 132 = 4 mod 8
// floats; 4 distinct contiguous L vectors) against the 64 clocks its 256 FFMA occupy a scheduler,
// so bandwidth is not the limit with lanes=rights; with lanes=lefts 8 lefts x 4 dx groups are 32
// distinct vectors (4 wavefronts each), which is why that mapping is slower.
// Measurements and history: notes/21_multi_matrix_tiled.md.
//
// Resource budget: no spills, no stack frame in any instantiation; 128 threads, 4 blocks per SM
// (at most 128 registers), or 2 (at most 255) where a thread holds more than 64 accumulators.
// Shared memory per block: 2 stages x (lefts x (3+2*rows) x 64 + 8*rights x 132) floats (4 stages
// when rights=1), e.g. 39 KB for rows=4, rights=4; 63 KB for rows=2, rights=7.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/shift_tiles.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"
#include "common/shift_tiles_launch.cuh"

namespace xcorr::multi_matrix_tiled {
namespace {

constexpr int kThreads = 128;
constexpr int kKR = 4, kKC = 32;          // chunk of the K loop: R rows x R columns
constexpr int kTDX = 32, kLC = kKC + kTDX;  // block shift columns; staged L columns (64)
constexpr int kSR = kKR * kKC + 4;        // R slot stride: 4 mod 8 floats -> conflict-free LDS.128

enum Mode : int { kLanesRights = 0, kLanesLefts = 1 };

template <int MODE, int AT, int DY, int BT, bool RPL>
struct Tile {
    static constexpr int TDY = 2 * DY;
    static constexpr int LR = kKR + TDY - 1;                       // staged L rows
    static constexpr int NL = MODE == kLanesRights ? AT : 8;       // left slots
    static constexpr int NS = MODE == kLanesRights || RPL ? 8 * BT : BT;  // right slots
    // With per-lane lefts 8 lanes read 8 lefts: stride 16 mod 32 spreads them over all banks.
    static constexpr int SL = LR * kLC + (MODE == kLanesLefts ? 16 : 0);
    static constexpr int STAGE = NL * SL + NS * kSR;               // floats per pipeline stage
    // Small tiles (one right per thread: the small-problem configuration) are latency-bound:
    // a deeper pipeline hides more global-load latency; large tiles keep 2 stages for occupancy.
    static constexpr int STAGES = BT == 1 ? 4 : 2;
    static constexpr size_t SMEM = size_t(STAGES) * STAGE * sizeof(float);
    static constexpr int ACC = AT * DY * 4 * BT;
};


template <int MODE, int AT, int DY, int BT, bool RPL>
__global__ void __launch_bounds__(kThreads, Tile<MODE, AT, DY, BT, RPL>::ACC > 64 ? 2 : 4)
    multi_tiled_kernel(const float* __restrict__ left, const float* __restrict__ right,
                       float* __restrict__ out, int hL, int wL, int hR, int wR, Pairs P,
                       const ShiftTileIndex* __restrict__ order) {
    using T = Tile<MODE, AT, DY, BT, RPL>;
    constexpr int TDY = T::TDY, LR = T::LR, NL = T::NL, NS = T::NS, SL = T::SL, ST = T::STAGES;
    extern __shared__ __align__(16) float smem[];
    __shared__ int64_t rslot[NS], lslot[NL];

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int pl = lane & 7;           // pair lane
    const int xs = lane >> 3;          // dx group of 4
    const int wy = warp >> 1, wx = warp & 1;
    const int dyl = wy * DY, dxl = wx * 16 + xs * 4;  // thread's first shift in the block tile

    const int out_h = hL + hR - 1, out_w = wL + wR - 1;
    // Shift tiles come heaviest first (host-sorted), so the hardware's in-order block dispatch is
    // a longest-job-first schedule and the last wave holds only small corner tiles.
    const ShiftTile tile = shift_tile(order, TDY, kTDX, hR, wR);
    const int y0 = tile.y0, x0 = tile.x0, dyb = tile.dyb, dxb = tile.dxb;  // dyb, dxb: first shift

    // Union of the overlaps over the block's valid shifts, and over this warp's.
    const int dy_last = min(dyb + TDY - 1, hL - 1), dx_last = min(dxb + kTDX - 1, wL - 1);
    const Span rB = union_span(dyb, dy_last, hL, hR), cB = union_span(dxb, dx_last, wL, wR);
    const int dyw = dyb + dyl, dxw = dxb + wx * 16;
    const Span rW = dyw <= hL - 1 ? union_span(dyw, min(dyw + DY - 1, hL - 1), hL, hR) : Span{0, 0};
    const Span cW = dxw <= wL - 1 ? union_span(dxw, min(dxw + 15, wL - 1), wL, wR) : Span{0, 0};
    const int nrc = ceil_div(rB.end - rB.begin, kKR), ncc = ceil_div(cB.end - cB.begin, kKC);
    const int nchunks = nrc * ncc;

    const int64_t lsize = int64_t(hL) * wL, rsize = int64_t(hR) * wR;
    const int64_t nz = int64_t(P.groupsI) * P.groupsJ;

    for (int64_t z = blockIdx.z; z < nz; z += gridDim.z) {
        const int gi = int(z / P.groupsJ), gj = int(z % P.groupsJ);
        // First left and right index of the block's pairs.
        const int i0 = MODE == kLanesRights ? gi * AT : gi * 8;
        const int j0 = MODE == kLanesRights ? gj * 8 * BT : gj * BT;

        // Element offsets of the block's left and right slots (-1: no such matrix). Kept in shared
        // memory so that the compiler does not hoist 32 64-bit pointers into registers.
        if (tid < NS) {
            const int s = tid;
            int i, j;
            if (MODE == kLanesRights) {
                i = i0, j = j0 + s;
            } else if (RPL) {
                i = i0 + (s & 7), j = j0 + (s >> 3);
            } else {
                i = 0, j = j0 + s;
            }
            rslot[s] = i < P.N && j < P.M ? P.right(i, j) * rsize : -1;
        } else if (tid >= 64 && tid < 64 + NL) {
            const int i = i0 + tid - 64;
            lslot[tid - 64] = i < P.N ? int64_t(i) * lsize : -1;
        }
        __syncthreads();

        // Stage chunk t into buffer buf. R: element (tid/32, tid%32) of every right slot; L: column
        // tid%64 of rows (tid/64) + 2k of every left slot.
        auto stage = [&](int t, int buf) {
            float* Ls = smem + buf * T::STAGE;
            float* Rs = Ls + NL * SL;
            const int r0 = rB.begin + (t / ncc) * kKR, c0 = cB.begin + (t % ncc) * kKC;
            {
                const int rr = tid / kKC, cc = tid % kKC;
                const int r = r0 + rr, c = c0 + cc;
                const bool in = r < hR && c < wR;
                const int64_t off = in ? int64_t(r) * wR + c : 0;
#pragma unroll
                for (int s = 0; s < NS; ++s) {
                    const int64_t base = rslot[s];
                    const bool ok = in && base >= 0;
                    cp_async4(Rs + s * kSR + rr * kKC + cc, right + (ok ? base + off : 0), ok);
                }
            }
            {
                // Rows h, h+2, ... of every left slot (h = tid/64): constant offsets, no division.
                const int lc = tid & (kLC - 1), h = tid / kLC, c = c0 + dxb + lc, rbase = r0 + dyb + h;
                const bool cin = c >= 0 && c < wL;
                float* dst = Ls + h * kLC + lc;
#pragma unroll
                for (int a = 0; a < NL; ++a) {
                    const int64_t base = lslot[a];
#pragma unroll
                    for (int k = 0; k < (LR + 1) / 2; ++k) {
                        if (LR % 2 == 0 || 2 * k + h < LR) {
                            const int r = rbase + 2 * k;
                            const bool ok = cin && r >= 0 && r < hL && base >= 0;
                            cp_async4(dst + a * SL + 2 * k * kLC, left + (ok ? base + int64_t(r) * wL + c : 0), ok);
                        }
                    }
                }
            }
        };

        float acc[AT][DY][4][BT];
#pragma unroll
        for (int a = 0; a < AT; ++a)
#pragma unroll
            for (int d = 0; d < DY; ++d)
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int q = 0; q < BT; ++q) acc[a][d][j][q] = 0.0f;

        // STAGES-deep cp.async ring: chunk t+STAGES-1 is in flight while chunk t is computed; one
        // barrier per chunk (it also tells that the buffer about to be refilled was consumed).
#pragma unroll
        for (int k = 0; k < ST - 1; ++k) {
            if (k < nchunks) stage(k, k);
            cp_async_commit();
        }
        for (int t = 0; t < nchunks; ++t) {
            cp_async_wait<ST - 2>();
            __syncthreads();
            if (t + ST - 1 < nchunks) stage(t + ST - 1, (t + ST - 1) & (ST - 1));
            cp_async_commit();

            const float* Ls = smem + (t & (ST - 1)) * T::STAGE;
            const float* Rs = Ls + NL * SL;
            const int r0 = rB.begin + (t / ncc) * kKR, c0 = cB.begin + (t % ncc) * kKC;
            // This warp's part of the chunk: rows and 4-column steps inside its own overlaps.
            const int rb = max(0, rW.begin - r0), re = min(kKR, rW.end - r0);
            const int cb4 = max(0, cW.begin - c0) >> 2, ce4 = (min(kKC, cW.end - c0) + 3) >> 2;
            const float* Lp = Ls + (MODE == kLanesLefts ? pl * SL : 0) + dyl * kLC + dxl;
            const float* Rp = Rs + (MODE == kLanesRights || RPL ? pl * kSR : 0);
            constexpr int QS = MODE == kLanesRights || RPL ? 8 * kSR : kSR;  // right slot step
            for (int rr = rb; rr < re; ++rr) {
                for (int c4 = cb4; c4 < ce4; ++c4) {
                    float4 rv[BT];
#pragma unroll
                    for (int q = 0; q < BT; ++q)
                        rv[q] = *reinterpret_cast<const float4*>(Rp + q * QS + rr * kKC + 4 * c4);
#pragma unroll
                    for (int a = 0; a < AT; ++a) {
#pragma unroll
                        for (int d = 0; d < DY; ++d) {
                            const float* lp = Lp + a * SL + (rr + d) * kLC + 4 * c4;
                            const float4 w0 = *reinterpret_cast<const float4*>(lp);
                            const float4 w1 = *reinterpret_cast<const float4*>(lp + 4);
                            const float w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
                            for (int q = 0; q < BT; ++q) {
                                const float rq[4] = {rv[q].x, rv[q].y, rv[q].z, rv[q].w};
#pragma unroll
                                for (int k = 0; k < 4; ++k)
#pragma unroll
                                    for (int j = 0; j < 4; ++j)
                                        acc[a][d][j][q] = fmaf(w[j + k], rq[k], acc[a][d][j][q]);
                            }
                        }
                    }
                }
            }
        }
        __syncthreads();  // the buffers and slot tables are refilled for the next pair group

        // Store: pair (i, j) of the thread's slot; rows and columns past the output are skipped.
#pragma unroll
        for (int a = 0; a < AT; ++a) {
#pragma unroll
            for (int q = 0; q < BT; ++q) {
                int i, j;
                if (MODE == kLanesRights) {
                    i = i0 + a, j = j0 + pl + 8 * q;
                } else {
                    i = i0 + pl, j = j0 + q;
                }
                if (i >= P.N || j >= P.M) continue;
                float* o = out + P.output(i, j) * out_h * out_w;
#pragma unroll
                for (int d = 0; d < DY; ++d) {
                    const int y = y0 + dyl + d;
                    if (y >= out_h) continue;
#pragma unroll
                    for (int jj = 0; jj < 4; ++jj) {
                        const int x = x0 + dxl + jj;
                        if (x < out_w) o[int64_t(y) * out_w + x] = acc[a][d][jj][q];
                    }
                }
            }
        }
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
// (lefts, rights) with lanes=rights: rights=7 fits the registers with lefts=1 only.
using Rows = Values<2, 4>;
using LeftsRights = Combos<Default<1, 4>, Row<1, 1>, Row<1, 7>, Row<2, 4>, Row<2, 1>>;
enum class Lanes { Auto, Rights, Lefts };
constexpr auto kLanes = choices<Lanes>({{Lanes::Auto, "auto"}, {Lanes::Rights, "rights"}, {Lanes::Lefts, "lefts"}});

class MultiTiled final : public Instance {
public:
    MultiTiled(const Problem& p, int mode, int lefts, int rows, int rights)
        : p_(p), mode_(mode), at_(lefts), dy_(rows), bt_(rights) {
        P_ = mode_ == kLanesRights ? pairs_of(p, at_, 8 * bt_) : pairs_of(p, 8, 4);
        select(p.form == Form::NToMn);
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        launch_.run(p_, P_, left, right, out, stream);
    }

private:

    // Picks the instantiation once, untimed, and raises its shared-memory limit.
    void select(bool rpl) {
        if (mode_ == kLanesRights) {
            LeftsRights::dispatch(std::array{at_, bt_}, [&](auto ab) {
                using AB = decltype(ab);
                Rows::dispatch(dy_, [&](auto d) {
                    use<kLanesRights, AB::at(0), decltype(d)::value, AB::at(1), false>();
                }, "rows");
            }, "lefts x rights");
        } else {
            Rows::dispatch(dy_, [&](auto d) {
                if (rpl)
                    use<kLanesLefts, 1, decltype(d)::value, 4, true>();
                else
                    use<kLanesLefts, 1, decltype(d)::value, 4, false>();
            }, "rows");
        }
    }
    template <int MODE, int AT, int DY, int BT, bool RPL>
    void use() {
        using T = Tile<MODE, AT, DY, BT, RPL>;
        launch_.set(p_, P_, multi_tiled_kernel<MODE, AT, DY, BT, RPL>, kThreads, T::SMEM, T::TDY, kTDX);
    }

    Problem p_;
    Pairs P_{};
    int mode_, at_, dy_, bt_;
    TileOrderedLaunch launch_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "multi-matrix-tiled",
    .family = "hopper",
    .summary = "shared-memory tiles + register tile over shifts x lefts x rights (FMA-bound SIMT)",
    .timed = "kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {kLanes.param("lanes", "what the 8 pair lanes of a warp take: 8 rights (x4 per thread, lefts "
                                     "shared) or 8 lefts (x4 rights per thread); auto picks by slot use"),
               Rows::param("rows", "shift rows per thread (block = 2*rows x 32 shifts)"),
               LeftsRights::param(0, "lefts", "lefts per thread with lanes=rights (2: n-to-m only)"),
               LeftsRights::param(1, "rights", "rights per thread with lanes=rights (block: 8 x rights)")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        const Lanes lanes = kLanes.parse(ps.at("lanes"), "lanes");
        const int lefts = param_int(ps, "lefts"), rows = param_int(ps, "rows"), rights = param_int(ps, "rights");
        int nL = p.nL, M = p.form == Form::NToMn ? p.nR / std::max(1, p.nL) : p.nR;
        if (p.form == Form::OneToOne || p.form == Form::OneToMany) nL = 1;
        if (lefts == 2 && p.form != Form::NToM)
            throw UsageError("multi-matrix-tiled: lefts=2 shares rights between two lefts: n-to-m only");
        if (lanes == Lanes::Lefts && nL == 1)
            throw UsageError("multi-matrix-tiled: lanes=lefts needs several lefts (n-to-mn or n-to-m)");
        if (lanes == Lanes::Lefts && lefts != 1)
            throw UsageError("multi-matrix-tiled: lefts=2 needs lanes=rights");
        if (!LeftsRights::has(std::array{lefts, rights}))
            throw UsageError("multi-matrix-tiled: rights=" + std::to_string(rights) + " with lefts=" +
                             std::to_string(lefts) + " does not fit the registers");
        if (lanes == Lanes::Lefts && rights != 4)
            throw UsageError("multi-matrix-tiled: lanes=lefts holds 4 rights per thread (rights=4)");
        int mode = lanes == Lanes::Lefts ? kLanesLefts : kLanesRights;
        if (lanes == Lanes::Auto && nL > 1 && lefts == 1 && rights == 4) {
            // Fraction of the pair slots that hold real pairs under each mapping. lanes=lefts reads
            // 32 distinct L values per warp load and is shared-memory bound, so it must win on slot
            // use by a clear margin (measured: notes/21_multi_matrix_tiled.md).
            auto use = [](int n, int g) { return double(n) / (ceil_div(n, g) * g); };
            const double by_rights = use(M, 32), by_lefts = use(nL, 8) * use(M, 4);
            if (by_lefts > 1.5 * by_rights) mode = kLanesLefts;
        }
        return std::make_unique<MultiTiled>(p, mode, lefts, rows, mode == kLanesLefts ? 4 : rights);
    },
});

}  // namespace
}  // namespace xcorr::multi_matrix_tiled
