// small-window: few shifts of large matrices (at most 1089 shifts: ±16 around any centre), where
// register-tiled pays whole 64 x 64 shift tiles and an FFT transforms the whole matrices.
//
// Algorithm. With L zero outside its extent, C(dy, dx) = sum over r < hR, c < wR of
// L[r + dy][c + dx] R[r][c]: a sum over the whole right matrix for every shift. The window's
// OH x OW shifts are cut into shift blocks of SY rows x SX consecutive columns (the window padded
// up to whole blocks; a padded shift is computed against zeros or stray L values and never
// written), the right matrix into tiles of TR x TC elements and each tile into segments of one row
// and S = KU·SX columns (TC = NSTRIP·S). A thread owns one shift block and slides along a segment:
// at column c it loads R[c] once (a broadcast word, held in a register) and, per block row, one new
// L word into a rotating window of SX registers (L[c .. c + SX - 1] of that row), and does SY·SX
// multiply-adds: SY + 1 shared loads per SY·SX FMAs (3 x 11: 4 per 33) instead of 2 per FMA.
// A block stages a tile (its R and the L region that every shift of the window reads against it,
// (TR + OHp - 1) x (TC + OWp - 1), zero-filled outside L and past R's edge, with cp.async), all
// its threads work on it, and strides on to the next tile of the same pair (tile += gridDim.x)
// with its accumulators kept in registers; after its last tile it adds its threads' sums over
// the slices in slice order and writes one partial per (pair, block, shift). A second kernel
// adds the gridDim.x partials of each output in a fixed order (lane-strided, then a xor-shuffle
// tree): deterministic, no atomics.
// Mapping. Thread t: shift block b = t % NB (by = b / NBX, bx = b % NBX), slice t / NB (slices =
// 256 / NB, blockDim = slices·NB rounded up to a warp; the threads past slices·NB only stage).
// The slices take the segments of the block's tiles round robin, continuing across tiles (carry),
// so their counts differ by at most one. (SY, SX) is chosen per problem from 3 x 11 (2-D windows
// of ±4 and more; ±16 is exactly 11 x 3 blocks), 1 x 15 (1-D lag windows), 5 x 3 (±1, ±2) and
// 15 x 1 (tall, narrow windows) by a cost model (cost(): FMA, shared-load and issue bounds per
// block of shifts, times R's area padded to whole tiles; NB <= 256). Banks: lanes of one slice hold
// consecutive b; the L row stride LWS is chosen with LWS·SY ≡ NBX·SX (mod 32), so lane b reads
// word SX·b + const: distinct banks for 32 consecutive b, as SX is odd; R is one broadcast word.
// Grid (blocks per pair gx, min(pairs, 65535)): gx fills the GPU once (SMs x resident blocks,
// divided among the pairs, at most the tiles); blockIdx.y strides over the pairs; pairs in chunks
// so that the partials stay within kMaxPartial floats.
// Invariants. Each tile of each pair is staged by exactly one block (tile ≡ blockIdx.x mod gx),
// each segment of it taken by exactly one slice, each shift by exactly one block of shifts: every
// product L·R of every shift is added once (tests/test_small_window_mapping.py emulates this
// mapping). Every (slice, shift) entry and every partial is written before it is read (barriers,
// stream order); every output element is written by the reduce kernel. Shifts without overlap sum
// zeros. The window may lie partly or wholly beyond the full range.
// Resources. Registers: SY·SX accumulators + SY·SX window (3 x 11: 66) + addresses, under
// __launch_bounds__(256, 2) (at most 128 registers, no spills: 2 blocks per SM). Shared memory 4·max((TR + OHp - 1)·LWS + TR·TC, slices·NS) bytes:
// ±16 with TR x TC = 32 x 132 about 60 KB; tall windows shrink the tile (down to one segment) to
// stay within 200 KB, which every window of at most 1089 shifts then does (1089 x 1: 170 KB). Partials: gx·NS floats per pair (gx <= tiles). Expected
// bottleneck: the FMA pipe for 2-D windows of ±4 and more (33 FMAs per 4 shared loads); the pass
// over both matrices for ±1. Measurements and history: notes/27_small_window.md.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/launch.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::small_window {
namespace {

constexpr int kThreads = 256;
constexpr int kSegments = 128;                      // segments per tile, aimed at (TR x NSTRIP)
constexpr int kMaxShifts = 1089;                    // 33 x 33: ±16, seed 002's smallest window
constexpr int64_t kMaxPartial = int64_t(64) << 20;  // floats of partial sums per chunk of pairs
constexpr size_t kMaxSmem = 200 * 1024;

// A segment is KU·SX columns (at least 32, so that the window's first SX - 1 loads are amortized).
template <int SX>
constexpr int kStrip = ((32 + SX - 1) / SX) * SX;

// The tile geometry of one problem and shift block (host-built, passed by value; see the header).
struct Geometry {
    int oh, ow, ns;          // the window's rows, columns, shifts
    int nby, nbx, nb;        // shift blocks: rows, columns, all
    int slices, threads;     // threads per shift block; block size
    int tr, nstrip, tc;      // tile rows, segments per tile row, tile columns (nstrip·S)
    int lh, lwv, lws;        // staged L rows, columns, row stride
    int nseg;                // segments per tile (tr·nstrip)
    int tiles_x, tiles;      // tiles along R's columns, in all
    int smem_floats() const { return std::max(lh * lws + tr * tc, slices * ns); }
};

// Partial sums over this block's tiles of one pair, for every shift (see the header).
template <int SY, int SX>
__global__ void __launch_bounds__(kThreads, 2)
    small_window_tiles_kernel(const float* __restrict__ left, const float* __restrict__ right,
                              float* __restrict__ partial, int hL, int wL, int hR, int wR, Window win, Geometry g,
                              int64_t k0, int64_t count, PairMap pairs) {
    constexpr int S = kStrip<SX>, KU = S / SX;
    extern __shared__ __align__(16) float smem[];
    float* Ls = smem;                 // Ls[i][j] = L[r0 + dy0 + i][c0 + dx0 + j] (row stride lws), 0 outside L
    float* Rs = Ls + g.lh * g.lws;    // Rs[i][j] = R[r0 + i][c0 + j] (row stride tc), 0 outside R
    float* red = smem;                // red[slice][shift], after the last tile (aliases Ls and Rs)
    const int t = threadIdx.x, warp = t / kWarp, lane = t % kWarp, nwarps = int(blockDim.x) / kWarp;
    const int b = t % g.nb, slice = t / g.nb;
    const int by = b / g.nbx, bx = b % g.nbx;
    const bool active = slice < g.slices;

    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        const int64_t pair = k0 + k;
        const float* L = left + int64_t(pairs.left_of(pair)) * hL * wL;
        const float* R = right + int64_t(pairs.right_of(pair)) * hR * wR;
        float acc[SY][SX];
#pragma unroll
        for (int iy = 0; iy < SY; ++iy)
#pragma unroll
            for (int j = 0; j < SX; ++j) acc[iy][j] = 0.0f;
        int carry = 0;  // segments of this block's earlier tiles of this pair, mod slices
        for (int tile = blockIdx.x; tile < g.tiles; tile += gridDim.x) {
            const int r0 = (tile / g.tiles_x) * g.tr, c0 = (tile % g.tiles_x) * g.tc;
            __syncthreads();  // the readers of the previous tile (or of red) are done
            for (int i = warp; i < g.lh; i += nwarps) {
                const int gr = r0 + win.dy0 + i;
                const bool row_in = gr >= 0 && gr < hL;
                for (int j = lane; j < g.lwv; j += kWarp) {
                    const int gc = c0 + win.dx0 + j;
                    const bool in = row_in && gc >= 0 && gc < wL;
                    cp_async4(Ls + i * g.lws + j, in ? L + int64_t(gr) * wL + gc : L, in);
                }
            }
            for (int i = warp; i < g.tr; i += nwarps) {
                const bool row_in = r0 + i < hR;
                for (int j = lane; j < g.tc; j += kWarp) {
                    const bool in = row_in && c0 + j < wR;
                    cp_async4(Rs + i * g.tc + j, in ? R + int64_t(r0 + i) * wR + c0 + j : R, in);
                }
            }
            cp_async_commit();
            cp_async_wait_all();
            __syncthreads();
            if (active) {
                for (int seg = (slice + g.slices - carry) % g.slices; seg < g.nseg; seg += g.slices) {
                    const int rr = seg / g.nstrip, st = seg % g.nstrip;
                    const float* Lp = Ls + (rr + by * SY) * g.lws + st * S + bx * SX;  // L[.][c + j]: Lp[c + j]
                    const float* Rp = Rs + rr * g.tc + st * S;
                    // w[iy][k % SX] holds Lp[iy·lws + k] for the SX columns k = c .. c + SX - 1.
                    float w[SY][SX];
#pragma unroll
                    for (int iy = 0; iy < SY; ++iy)
#pragma unroll
                        for (int j = 0; j < SX - 1; ++j) w[iy][j] = Lp[iy * g.lws + j];
#pragma unroll 1
                    for (int u = 0; u < KU; ++u) {  // columns u·SX .. u·SX + SX - 1: slots by js alone
                        const float* Lu = Lp + u * SX;
                        const float* Ru = Rp + u * SX;
#pragma unroll
                        for (int js = 0; js < SX; ++js) {
                            const float rv = Ru[js];
#pragma unroll
                            for (int iy = 0; iy < SY; ++iy) w[iy][(js + SX - 1) % SX] = Lu[iy * g.lws + js + SX - 1];
#pragma unroll
                            for (int iy = 0; iy < SY; ++iy)
#pragma unroll
                                for (int j = 0; j < SX; ++j) acc[iy][j] = fmaf(w[iy][(js + j) % SX], rv, acc[iy][j]);
                        }
                    }
                }
            }
            carry = (carry + g.nseg) % g.slices;
        }
        __syncthreads();  // every thread is done with Ls and Rs: red overwrites them
        if (active) {
#pragma unroll
            for (int iy = 0; iy < SY; ++iy)
#pragma unroll
                for (int j = 0; j < SX; ++j) {
                    const int y = by * SY + iy, x = bx * SX + j;
                    if (y < g.oh && x < g.ow) red[slice * g.ns + y * g.ow + x] = acc[iy][j];
                }
        }
        __syncthreads();
        float* P = partial + (k * gridDim.x + blockIdx.x) * int64_t(g.ns);
        for (int s = t; s < g.ns; s += blockDim.x) {
            float sum = 0.0f;
            for (int i = 0; i < g.slices; ++i) sum += red[i * g.ns + s];
            P[s] = sum;
        }
    }
}

// out[k0 + k][s] = sum over x < gx of partial[k][x][s], in a fixed order: 2^lg consecutive lanes
// per output, lane q adding x = q, q + 2^lg, ... in turn, then a xor-shuffle tree over those
// lanes, whose first writes. Each warp takes 32 >> lg consecutive outputs; the loop bound is
// warp-uniform so that every lane reaches the shuffles.
__global__ void small_window_reduce_kernel(const float* __restrict__ partial, float* __restrict__ out, int ns, int gx,
                                           int lg, int64_t k0, int64_t count) {
    const int lane = threadIdx.x % kWarp, tpo = 1 << lg, q = lane & (tpo - 1);
    const int64_t total = count * ns, per_warp = kWarp >> lg;
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
    for (int64_t base = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp * per_warp; base < total;
         base += warps * per_warp) {
        const int64_t i = base + (lane >> lg);
        float sum = 0.0f;
        if (i < total) {
            const float* P = partial + (i / ns) * gx * int64_t(ns) + i % ns;
            for (int x = q; x < gx; x += tpo) sum += P[int64_t(x) * ns];
        }
        for (int off = tpo / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(kFullMask, sum, off);
        if (q == 0 && i < total) out[k0 * ns + i] = sum;
    }
}

using TilesKernel = void (*)(const float*, const float*, float*, int, int, int, int, Window, Geometry, int64_t,
                             int64_t, PairMap);
struct Config {
    int sy, sx, strip;
    TilesKernel kernel;
};
const Config kConfigs[] = {
    {3, 11, kStrip<11>, small_window_tiles_kernel<3, 11>},
    {1, 15, kStrip<15>, small_window_tiles_kernel<1, 15>},
    {5, 3, kStrip<3>, small_window_tiles_kernel<5, 3>},
    {15, 1, kStrip<1>, small_window_tiles_kernel<15, 1>},
};

// The geometry of `c` for problem p, or nb = 0 where it does not fit (more than 256 shift blocks,
// or more than kMaxSmem even with the smallest tile).
Geometry geometry(const Problem& p, const Config& c) {
    Geometry g{};
    const Window w = p.shifts();
    g.oh = int(w.out_h()), g.ow = int(w.out_w()), g.ns = g.oh * g.ow;
    g.nby = ceil_div(g.oh, c.sy), g.nbx = ceil_div(g.ow, c.sx), g.nb = g.nby * g.nbx;
    if (g.nb > kThreads) return Geometry{};
    g.slices = kThreads / g.nb;
    g.threads = ceil_div(g.slices * g.nb, kWarp) * kWarp;
    int inv = 1;  // SY^-1 mod 32 (SY odd)
    while ((inv * c.sy) % 32 != 1) ++inv;
    g.nstrip = std::min(ceil_div(p.wR, c.strip), std::max(4, ceil_div(kSegments, p.hR)));
    g.tr = std::min(p.hR, std::max(1, ceil_div(kSegments, g.nstrip)));
    for (;;) {
        g.tc = g.nstrip * c.strip;
        g.lh = g.tr + g.nby * c.sy - 1;
        g.lwv = g.tc + g.nbx * c.sx - 1;
        // Lanes of one slice differ in the shift block: word SX·b + const (see the header). With a
        // single block the lanes differ in the segment instead (rr·lws + st·S): lws ≡ TC makes that g·S.
        const int target = g.nb == 1 ? g.tc % 32 : (g.nbx * c.sx * inv) % 32;
        g.lws = g.lwv + ((target - g.lwv) % 32 + 32) % 32;
        if (size_t(g.smem_floats()) * sizeof(float) <= kMaxSmem) break;
        if (g.nstrip > 1 && (g.tc >= g.tr || g.tr == 1)) g.nstrip = (g.nstrip + 1) / 2;
        else if (g.tr > 1) g.tr = (g.tr + 1) / 2;
        else return Geometry{};
    }
    g.nseg = g.tr * g.nstrip;
    g.tiles_x = ceil_div(p.wR, g.tc);
    g.tiles = int(std::min<int64_t>(int64_t(ceil_div(p.hR, g.tr)) * g.tiles_x, int64_t(1) << 30));  // see make()
    return g;
}

// Cost of a pair: per R element and block of shifts, warp instructions per SM and clock of the
// FMA pipe (4 per clock), the shared-load pipe (1) and issue (4), the largest of the three, times
// the blocks and the tiles' area (R padded to whole tiles: a narrow R wastes most of a segment).
double cost(const Geometry& g, const Config& c) {
    const double fma = c.sy * c.sx, lds = c.sy + 1;
    return g.nb * std::max({fma / 4, lds, (fma + lds + 1) / 4}) * (double(g.tiles) * g.tr * g.tc);
}

class SmallWindow final : public Instance {
public:
    explicit SmallWindow(const Problem& p) : p_(p) {
        // At most kMaxShifts shifts: the registry refuses more before make() (Variant::max_shifts).
        double best = 0;
        for (const Config& c : kConfigs) {
            const Geometry g = geometry(p, c);
            if (g.nb > 0 && (!cfg_ || cost(g, c) < best)) cfg_ = &c, geo_ = g, best = cost(g, c);
        }
        if (!cfg_)
            throw UsageError("small-window: " + p.describe() + " needs more than 200 KB of shared memory per block");
        if (int64_t(ceil_div(p.hR, geo_.tr)) * geo_.tiles_x >= int64_t(1) << 30)
            throw UsageError("small-window: " + p.describe() + ": too many tiles");
        bytes_ = size_t(geo_.smem_floats()) * sizeof(float);
        allow_dynamic_smem(cfg_->kernel, size_t(bytes_), "small-window");
        int dev = 0, sms = 0, per_sm = 0;
        XC_CUDA_CHECK(cudaGetDevice(&dev));
        XC_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        XC_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cfg_->kernel, geo_.threads, bytes_));
        const int64_t resident = int64_t(sms) * std::max(per_sm, 1);
        const int64_t pairs = std::min<int64_t>(p.out_count(), 65535);
        gx_ = int(std::clamp<int64_t>(ceil_div64(resident, std::max<int64_t>(pairs, 1)), 1, geo_.tiles));
        chunk_ = std::max<int64_t>(1, std::min<int64_t>(p.out_count(), kMaxPartial / (int64_t(gx_) * geo_.ns)));
        partial_ = DeviceBuffer<float>(size_t(chunk_ * gx_ * geo_.ns));
        while ((1 << lg_) < std::min(gx_, kWarp)) ++lg_;
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        const int64_t count = p_.out_count();
        for (int64_t k0 = 0; k0 < count; k0 += chunk_) {
            const int64_t n = std::min(chunk_, count - k0);
            const dim3 grid(unsigned(gx_), unsigned(std::min<int64_t>(n, 65535)));
            cfg_->kernel<<<grid, geo_.threads, bytes_, stream>>>(left, right, partial_.get(), p_.hL, p_.wL, p_.hR,
                                                                 p_.wR, p_.shifts(), geo_, k0, n, pair_map(p_));
            XC_CHECK_LAUNCH();
            const int64_t warps = ceil_div64(n * geo_.ns, kWarp >> lg_);
            const int blocks = int(std::clamp<int64_t>(ceil_div64(warps, kThreads / kWarp), 1, 65536));
            small_window_reduce_kernel<<<blocks, kThreads, 0, stream>>>(partial_.get(), out, geo_.ns, gx_, lg_, k0,
                                                                       n);
            XC_CHECK_LAUNCH();
        }
    }

private:
    Problem p_;
    const Config* cfg_ = nullptr;
    Geometry geo_{};
    size_t bytes_ = 0;
    int gx_ = 1, lg_ = 0;
    int64_t chunk_ = 1;
    DeviceBuffer<float> partial_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "small-window",
    .family = "hopper",
    .summary = "few shifts of large matrices (at most 1089, ±16): each thread slides a block of 3 x 11 shifts along "
               "rows of R tiles, accumulating in registers over a block's tiles; a second kernel adds the blocks' "
               "partials in order",
    .timed = "two kernels (block partials, ordered reduction)",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {},
    .make = [](const Problem& p, const Params&) -> std::unique_ptr<Instance> {
        return std::make_unique<SmallWindow>(p);
    },
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    .max_shifts = kMaxShifts,
});

}  // namespace
}  // namespace xcorr::small_window
