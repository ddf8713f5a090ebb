// signal-tiled: a register-tiled FP32 kernel for one-dimensional signals. The 2-D
// register-tiled kernel tiles 64 x 64 shifts, and a 1 x n problem has one shift row: 63 of every
// 64 rows of its tiles are idle. Here the tile is lags x templates instead.
//
// Algebra (CONVENTIONS.md, "One-dimensional signals"): for a left signal L of wL samples and a
// right (template) R of K = wR samples, C(d) = sum_{t in [0, K)} L[t + d] * R[t], L zero outside
// [0, wL). A thread owns TL consecutive lags d0 + j (j < TL) of TT templates m (one left), so
//     acc[j][m] = sum_t L[t + d0 + j] * R_m[t]:
// for one t an outer product of the L window L[t + d0 .. t + d0 + TL - 1] (sliding by one sample
// per t) and the template column R_0..TT-1[t] (the same for every thread of the block: a shared-
// memory broadcast). Per 8 steps of t a thread loads its L window once, (TL + 8) / 4 LDS.128, and
// the templates' 8 columns, 8 * TT / 4 broadcast LDS.128, for 8 * TL * TT FMAs with compile-time
// register indices: (TL, TT) = (8, 8): 20 LDS per 512 FFMA; (32, 1): 12 LDS per 256 FFMA.
//
// Work mapping. A block of 128 threads owns BL = 128 * TL consecutive lags (thread x: lags
// x * TL .. x * TL + TL - 1 of the tile) of TT templates of one left: a "group" is (left i,
// templates j0 .. j0 + TT - 1) of the problem's PairGrid (core.hpp, any form), templates past M
// zero-filled and not written. grid.x = lag tiles (4.32e6 / 1024 = 4219 for seed 004's case: x,
// whose limit is 2^31 - 1), grid.y strides over the groups (65535 at most), grid.z = the K split.
// The block walks t in chunks of KC = 256: it stages L[D + t1 .. D + t1 + BL + KC - 1] (D the
// tile's first lag, t1 the chunk's first t) and R_m[t1 .. t1 + KC - 1] in shared memory, zero
// outside the signals (4-byte cp.async with zero fill), then runs ceil8(chunk length) steps; the
// zero fill makes every step past K or outside L add exact zeros. The chunks a tile visits are
// clipped (block-uniform) to the t with a possibly non-zero term for the tile's lags up to the
// window's last: t >= -d_last and t < wL - D, so a full window's triangular ends and lags outside
// the full range cost (almost) nothing.
//
// Few groups (one-to-one, a short output): fewer blocks than two rounds of resident blocks split
// each tile's clipped chunk range into S pieces (grid.z; piece z takes chunks lo + n*z/S ..
// lo + n*(z+1)/S); each piece writes its partial tile to a workspace and reduce_kernel, a
// programmatic dependent launch, adds the S partials in piece order: no atomics, no memset, the
// same bits every run. Param split=1 never splits (the validator exercises both paths).
//
// Windows (CONVENTIONS.md, "Output windows"): the lags are the window's dx0 .. dx1 (tile x starts
// at lag dx0 + x * BL); the window's rows dy0 .. dy1 hold one row with overlap, dy = 0 (row0 =
// -dy0) when the window has it; every other row is written as zeros (by the main kernel without a
// split, by reduce_kernel with one). Lags outside the full range sum staged zeros, and a tile
// whose clipped t range is empty (or a window without row 0) writes zeros without a chunk.
// Invariants: every (lag, template) of the window is written exactly once per run (the last
// tile's lags past out_w and templates past M are not written), and each output element is the
// sum over all t in [0, K) of the staged products, in one fixed order (t ascending within a chunk,
// chunk sums ascending, see "Accuracy"; with a split, partial sums added in piece order).
//
// Shared-memory layout: the staged L window is read as LDS.128 at word TL * lane + 4q (q any, since
// k0 is a multiple of 8). Its float4 slots are swizzled within each 32-word row (ls_index: slot XOR
// row & SWZ): for TL = 8 a quarter warp's 8 lanes span 15 slots over up to three rows, the middle
// row of the other parity, and XOR 1 on odd rows puts them in 8 different bank quads; for TL = 32
// each lane is in its own row at the same slot, and XOR (row & 7) spreads the 8 rows over the 8
// quads (tests/test_signal_tiled_mapping.py checks both for every k0 and q). The templates are
// staged t-major, Rs[k * TT + m], so one LDS.128 gives 4 templates at one t; the staging copies
// walk (m, k) with 4 consecutive k per template per lane group (32 different banks, 16-byte
// segments of global memory).
//
// Accuracy: a thread's sums run in two levels, at most KC = 256 products per chunk in registers,
// then the chunk sums added in order into the thread's own running totals in shared memory (Ts):
// one float32 chain over K = 144000 products (ambient noise) drifts by 7e-6 relative (rms) on
// [0, 1) inputs, too close to the 1e-5 bound; chunked, 2.6e-7 (both in NumPy, sequential sums).
//
// Resource budget (0 spills, 0 stack frame): templates=8: 64 accumulators + 16 L + 8 R registers
// and addresses under the cap of 128 from __launch_bounds__(128, 4), 46080 B static shared memory
// ((1024 + 256) * 4 L + 256 * 8 * 4 R + 8192 * 4 totals) -> 4 blocks = 16 warps per SM.
// templates=1: 34816 B -> 5 blocks. The staging loops are unrolled only twice: at 4 the 8 x 8
// kernel spills (its 64 accumulators are live across the staging).
// Expected bottleneck: the FFMA pipe. Per 8 t a warp of templates=8 issues 512 FFMA and 20 LDS
// (4%); its shared-memory wavefronts, 4 x 4 for the L window and 16 broadcasts, are 32 per 512
// FFMA cycles of its SMSP, 25% of the SM's 1 wavefront per cycle with four SMSPs busy. The
// staging between two __syncthreads per chunk (256 t, 16384 FFMA per thread) is hidden by the
// other resident blocks; the output (4 bytes per K FMAs per thread) costs a few % at K = 256
// (seed 004's case: 276 MB of output against 1.77e10 FMAs). Losses by shape: the last lag tile's
// round-off (ambient noise: 4801 lags in 5 x 1024, 94% useful), templates past M in the last group
// (auto takes templates=1 where fewer than 70% of 8-template slots would be used), and for
// templates=1 the L window loads: 40 wavefronts per 256 FFMA cycles, about 2/3 of shared-memory
// bandwidth with four SMSPs busy, so expect it below the 8 x 8 tile's rate.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/pdl.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/dispatch.hpp"
#include "common/launch.cuh"
#include "xcorr/registry.hpp"

namespace xcorr::signal_tiled {
namespace {

template <int TL_, int TT_>
struct Cfg {
    static constexpr int TL = TL_, TT = TT_;  // lags x templates per thread
    static constexpr int THREADS = 128, MINB = 4;
    static constexpr int BL = THREADS * TL;  // lags per block tile
    static constexpr int KC = 256;           // t per staged chunk
    static constexpr int NL = BL + KC;       // staged L samples (the last one is never read)
    static constexpr int SWZ = TL == 8 ? 1 : 7;  // ls_index's row mask (see the header)
    static_assert(TL % 8 == 0 && NL % 32 == 0 && KC % 8 == 0 && (TT == 1 || TT % 4 == 0), "aligned float4 slots");
};

// Position of staged L sample p: its float4 slot within its 32-word row XOR (row & SWZ). Only bits
// 2-4 change, so a float4-aligned group of 4 samples stays one aligned float4.
template <class C>
__device__ __forceinline__ int ls_index(int p) { return p ^ (((p >> 5) & C::SWZ) << 2); }

__host__ __device__ constexpr int ceil8(int v) { return (v + 7) & ~7; }

// Everything a launch needs beyond the pointers.
struct Geometry {
    PairGrid grid;
    int wL, K;
    int lag0;         // the window's first lag, dx0
    int out_h, out_w;
    int row0;         // output row of dy = 0, or -1 when the window has none
    int groups_per_left, n_groups;  // ceil(M / TT), N * that
    int pieces;       // K split (grid.z); 1: the main kernel writes the output
    int64_t count;    // output matrices
};

template <class C>
__global__ void __launch_bounds__(C::THREADS, C::MINB)
    signal_tiled_kernel(const float* __restrict__ left, const float* __restrict__ right, float* __restrict__ out,
                        float* __restrict__ partials, Geometry g) {
    constexpr int TL = C::TL, TT = C::TT, BL = C::BL, KC = C::KC;
    __shared__ __align__(16) float Ls[C::NL];
    __shared__ __align__(16) float Rs[KC * TT];
    // Running totals over chunks, element e of thread x at Ts[e * THREADS + x] (conflict-free).
    __shared__ float Ts[TL * TT * C::THREADS];

    pdl_launch_dependents();  // reduce_kernel (when split) may be scheduled; it waits for this grid
    const int lb = threadIdx.x * TL;                 // the thread's first lag inside the tile
    const int x0 = blockIdx.x * BL;                  // the tile's first output column
    const int D = g.lag0 + x0;                       // the tile's first lag
    const int d_last = g.lag0 + min(x0 + BL, g.out_w) - 1;  // its last lag inside the window
    // t with a possibly non-zero term for some lag of the tile: t + d in [0, wL), t in [0, K).
    const int t_lo = max(0, -d_last);
    const int t_hi = g.row0 < 0 ? 0 : int(min(int64_t(g.K), int64_t(g.wL) - D));  // no row 0: only zeros
    const int c_lo = t_lo / KC, c_n = t_hi > t_lo ? ceil_div(t_hi, KC) - c_lo : 0;
    const int piece = blockIdx.z;
    const int c_a = c_lo + int(int64_t(c_n) * piece / g.pieces), c_b = c_lo + int(int64_t(c_n) * (piece + 1) / g.pieces);
    const bool multi = c_b - c_a > 1;  // sums in two levels (see the header, "Accuracy")

    for (int grp = blockIdx.y; grp < g.n_groups; grp += gridDim.y) {
        const int i = grp / g.groups_per_left, j0 = (grp - i * g.groups_per_left) * TT;
        const float* L = left + int64_t(i) * g.wL;
        float acc[TL][TT];
#pragma unroll
        for (int j = 0; j < TL; ++j)
#pragma unroll
            for (int m = 0; m < TT; ++m) acc[j][m] = 0.0f;

        for (int c = c_a; c < c_b; ++c) {
            const int t1 = c * KC;
            __syncthreads();  // the previous chunk's (or group's) readers are done
            // L[D + t1 + p], p < NL, zero outside [0, wL); 64-bit: D + t1 may pass 2^31.
            const int64_t l0 = int64_t(D) + t1;
#pragma unroll 2
            for (int p = threadIdx.x; p < C::NL; p += C::THREADS) {
                const int64_t gl = l0 + p;
                const bool in = gl >= 0 && gl < g.wL;
                cp_async4(Ls + ls_index<C>(p), in ? L + gl : L, in);
            }
            // R_m[t1 + k] at Rs[k * TT + m]; lanes take 4 consecutive k of each of 8 templates
            // (TT = 8): banks 8 * (k % 4) + m, all different.
#pragma unroll 2
            for (int idx = threadIdx.x; idx < KC * TT; idx += C::THREADS) {
                const int kq = idx / (4 * TT), rem = idx % (4 * TT);
                const int m = rem / 4, k = 4 * kq + rem % 4, t = t1 + k, j = j0 + m;
                const bool in = t < g.K && j < g.grid.M;
                const float* src = in ? right + g.grid.right(i, j) * g.K + t : right;
                cp_async4(Rs + k * TT + m, src, in);
            }
            cp_async_wait_all();
            __syncthreads();

            const int steps = ceil8(min(KC, g.K - t1));  // past K: staged zeros
            for (int k0 = 0; k0 < steps; k0 += 8) {
                float a[TL + 8];
#pragma unroll
                for (int q = 0; q < (TL + 8) / 4; ++q) {
                    const float4 v = *reinterpret_cast<const float4*>(Ls + ls_index<C>(lb + k0 + 4 * q));
                    a[4 * q + 0] = v.x;
                    a[4 * q + 1] = v.y;
                    a[4 * q + 2] = v.z;
                    a[4 * q + 3] = v.w;
                }
                if constexpr (TT == 1) {
                    const float4 r0 = *reinterpret_cast<const float4*>(Rs + k0);
                    const float4 r1 = *reinterpret_cast<const float4*>(Rs + k0 + 4);
                    const float r[8] = {r0.x, r0.y, r0.z, r0.w, r1.x, r1.y, r1.z, r1.w};
#pragma unroll
                    for (int kk = 0; kk < 8; ++kk)
#pragma unroll
                        for (int j = 0; j < TL; ++j) acc[j][0] = fmaf(a[kk + j], r[kk], acc[j][0]);
                } else {
#pragma unroll
                    for (int kk = 0; kk < 8; ++kk) {
                        float r[TT];
#pragma unroll
                        for (int q = 0; q < TT / 4; ++q) {
                            const float4 v = *reinterpret_cast<const float4*>(Rs + (k0 + kk) * TT + 4 * q);
                            r[4 * q + 0] = v.x;
                            r[4 * q + 1] = v.y;
                            r[4 * q + 2] = v.z;
                            r[4 * q + 3] = v.w;
                        }
#pragma unroll
                        for (int j = 0; j < TL; ++j)
#pragma unroll
                            for (int m = 0; m < TT; ++m) acc[j][m] = fmaf(a[kk + j], r[m], acc[j][m]);
                    }
                }
            }
            if (multi) {
                // The chunk's sums join the thread's running totals (its own slots: no barrier).
#pragma unroll
                for (int j = 0; j < TL; ++j)
#pragma unroll
                    for (int m = 0; m < TT; ++m) {
                        float& total = Ts[(j * TT + m) * C::THREADS + threadIdx.x];
                        total = (c == c_a ? 0.0f : total) + acc[j][m];
                        acc[j][m] = 0.0f;
                    }
            }
        }
        if (multi)
#pragma unroll
            for (int j = 0; j < TL; ++j)
#pragma unroll
                for (int m = 0; m < TT; ++m) acc[j][m] = Ts[(j * TT + m) * C::THREADS + threadIdx.x];

        const int xb = x0 + lb;  // the thread's first output column
#pragma unroll
        for (int m = 0; m < TT; ++m) {
            if (j0 + m >= g.grid.M) break;
            const int64_t o = g.grid.output(i, j0 + m);
            if (g.pieces > 1) {
                // The partial of this piece: reduce_kernel writes the output, its zero rows included.
                float* P = partials + (int64_t(piece) * g.count + o) * g.out_w;
#pragma unroll
                for (int j = 0; j < TL; ++j)
                    if (xb + j < g.out_w) P[xb + j] = acc[j][m];
                continue;
            }
            float* O = out + o * g.out_h * g.out_w;
            for (int row = 0; row < g.out_h; ++row) {
                const bool hit = row == g.row0;
                float* Orow = O + int64_t(row) * g.out_w;
#pragma unroll
                for (int j = 0; j < TL; ++j)
                    if (xb + j < g.out_w) Orow[xb + j] = hit ? acc[j][m] : 0.0f;
            }
        }
    }
}

// The output of a split run: row row0 of every output matrix is the sum of the pieces' partials in
// piece order, every other row zeros. blockIdx.y strides over (matrix, row), threads over columns.
constexpr int kReduceThreads = 256;

__global__ void __launch_bounds__(kReduceThreads)
    reduce_kernel(const float* __restrict__ partials, float* __restrict__ out, Geometry g) {
    pdl_wait();  // the main kernel's partials are complete
    const int64_t rows = g.count * g.out_h;
    for (int64_t kr = blockIdx.y; kr < rows; kr += gridDim.y) {
        const int64_t k = kr / g.out_h;
        const int row = int(kr - k * g.out_h);
        float* O = out + kr * g.out_w;
        for (int x = blockIdx.x * kReduceThreads + threadIdx.x; x < g.out_w; x += gridDim.x * kReduceThreads) {
            float s = 0.0f;
            if (row == g.row0)
                for (int p = 0; p < g.pieces; ++p) s += __ldg(partials + (int64_t(p) * g.count + k) * g.out_w + x);
            O[x] = s;
        }
    }
}

template <class C>
class SignalTiled final : public Instance {
public:
    SignalTiled(const Problem& p, bool may_split) {
        const Window w = p.shifts();
        g_.grid = pair_map(p).grid();
        g_.wL = p.wL, g_.K = p.wR;
        g_.lag0 = w.dx0;
        g_.out_h = p.out_h(), g_.out_w = p.out_w();
        g_.row0 = w.dy0 <= 0 && 0 <= w.dy1 ? -w.dy0 : -1;
        g_.groups_per_left = ceil_div(g_.grid.M, C::TT);
        const int64_t groups = int64_t(g_.grid.N) * g_.groups_per_left;
        if (groups >= (int64_t(1) << 31)) throw UsageError("signal-tiled: too many template groups");
        g_.n_groups = int(groups);
        g_.count = p.out_count();
        tiles_ = ceil_div(g_.out_w, C::BL);

        // Split K when the tiles x groups give fewer than two rounds of resident blocks.
        g_.pieces = 1;
        if (may_split) {
            int dev = 0, sms = 0, per_sm = 0;
            XC_CUDA_CHECK(cudaGetDevice(&dev));
            XC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
            XC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, signal_tiled_kernel<C>, C::THREADS, 0));
            const int64_t wanted = 2 * int64_t(sms) * std::max(per_sm, 1);
            const int64_t blocks = int64_t(tiles_) * g_.n_groups;
            const int chunks = ceil_div(g_.K, C::KC);
            if (blocks < wanted && chunks > 1)
                g_.pieces = int(std::min<int64_t>({ceil_div64(wanted, blocks), chunks, 64}));
        }
        if (g_.pieces > 1) partials_ = DeviceBuffer<float>(size_t(g_.pieces) * size_t(g_.count) * size_t(g_.out_w));
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        const dim3 grid(unsigned(tiles_), unsigned(std::min(g_.n_groups, 65535)), unsigned(g_.pieces));
        signal_tiled_kernel<C><<<grid, C::THREADS, 0, stream>>>(left, right, out, partials_.get(), g_);
        XC_CHECK_LAUNCH();
        if (g_.pieces > 1) {
            const unsigned gx = unsigned(std::min(ceil_div(g_.out_w, kReduceThreads), 64));
            const unsigned gy = unsigned(std::min<int64_t>(g_.count * g_.out_h, 65535));
            launch_dependent(reduce_kernel, dim3(gx, gy), dim3(kReduceThreads), 0, stream,
                             static_cast<const float*>(partials_.get()), out, g_);
        }
    }

private:
    Geometry g_{};
    int tiles_ = 0;
    DeviceBuffer<float> partials_;  // pieces x count x out_w (split only)
};

// (TL, TT): 8 lags x 8 templates per thread, or 32 lags x 1 template where the groups of 8 would
// leave most slots empty (one-to-one, n-to-mn with few rights per left).
using Templates = Values<8, 1>;

std::unique_ptr<Instance> make_signal_tiled(const Problem& p, const Params& ps) {
    if (p.hL != 1 || p.hR != 1) throw UsageError("signal-tiled: signals only (1 x n matrices)");
    const int M = pair_map(p).grid().M;
    int tt = 0;
    if (ps.at("templates") == "auto")
        tt = double(M) / (8.0 * ceil_div(M, 8)) >= 0.7 ? 8 : 1;  // share of 8-template slots used
    else
        tt = param_int(ps, "templates");
    const bool may_split = ps.at("split") == "auto";
    std::unique_ptr<Instance> inst;
    Templates::dispatch(tt, [&](auto v) {
        constexpr int TT = decltype(v)::value;
        inst = std::make_unique<SignalTiled<Cfg<TT == 8 ? 8 : 32, TT>>>(p, may_split);
    }, "templates");
    return inst;
}

XCORR_REGISTER_VARIANT(Variant{
    .name = "signal-tiled",
    .family = "hopper",
    .summary = "1-D signals: register tiles of 8 lags x 8 templates (or 32 x 1) over a staged, zero-padded "
               "L segment, K in chunks, split-K with an ordered reduction when the tiles are few",
    .timed = "kernel + split-K reduction kernel (only when split)",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Templates::param("templates", "templates per thread (8: 8 lags x 8 templates; 1: 32 lags; "
                                             "auto: 8 unless fewer than 70% of the 8-template slots are used)",
                                "auto"),
               {"split", {"auto", "1"}, "split K over blocks when the tiles fill fewer than two rounds (1: never)"}},
    .make = make_signal_tiled,
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    .signals_only = true,
});

}  // namespace
}  // namespace xcorr::signal_tiled
