// small-window: few shifts of large matrices (at most 1089 shifts: ±1 .. ±16 around any centre),
// where register-tiled pays whole 64 x 64 shift tiles and an FFT transforms the whole matrices.
//
// Algorithm. With L zero outside its extent, C(dy, dx) = sum over r < hR, c < wR of
// L[r + dy][c + dx] R[r][c]: a sum over the whole right matrix for every shift. The right matrix
// is cut into tiles of kTR x kTC elements; block (tile, pair) stages its R tile and the L region
// that every shift of the window reads against it ((kTR + OH - 1) x (kTC + OW - 1), zero-filled
// outside L, and R zero-filled past its edge), computes every shift's partial sum over the tile,
// and writes them to partial[pair][tile][shift]. A second kernel adds each shift's partials over the
// tiles in tile order (deterministic: no atomics) into the output.
// Mapping. 256 threads; with NS shifts, `slices` = max(1, 256 / NS) threads share each shift
// (thread t: slice t / group, shift t % group + i·group, group = 256 / slices), a slice taking the
// tile's elements e = slice, slice + slices, ... (r = e / kTC, c = e % kTC); the slices' sums meet
// in shared memory and are added in slice order. Lanes of a warp hold consecutive shifts: their L
// reads are consecutive words, their R read one broadcast word. grid (tiles, min(pairs, 65535)),
// blockIdx.y striding over the pairs; pairs in chunks so that the partials stay within kMaxPartial
// floats.
// Invariants. Every output element is the sum of all its tiles' partials; every partial is
// written by the first kernel before the second reads it (stream order); shifts without overlap
// sum zeros. The window may lie partly or wholly beyond the full range.
// Resources. Shared memory 4·((kTR + OH - 1)(kTC + OW - 1) + kTR·kTC + slices·NS) bytes, at most
// ~88 KB for 1089 shifts in one row, refused above 200 KB (a window tall and narrow beyond
// ~600 rows); partials: at most 64 Mi floats per chunk. Bottleneck by design: shared-memory loads
// (one L word and one broadcast R word per multiply-add), i.e. about 1/8 of the FP32 peak once
// the window fills the threads; it is meant for windows whose work is small, where a launch or
// two and one pass over both matrices is all it costs. Not yet run on a GPU: measurements and
// validation come with the next device session.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/device.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/registry.hpp"

namespace xcorr {
namespace {

constexpr int kThreads = 256;
constexpr int kTR = 16, kTC = 128;             // R tile: rows x columns
constexpr int kTile = kTR * kTC;
constexpr int kMaxShifts = 1089;  // 33 x 33: ±16, seed 002's smallest window
constexpr int64_t kMaxPartial = int64_t(64) << 20;  // floats of partial sums per chunk of pairs
constexpr size_t kMaxSmem = 200 * 1024;

struct Geometry {
    int oh, ow, ns;     // the window's rows, columns, shifts
    int lh, lw;         // staged L region
    int slices, group;  // threads per shift, threads per slice
    __host__ __device__ Geometry(int out_h, int out_w)
        : oh(out_h), ow(out_w), ns(out_h * out_w), lh(kTR + out_h - 1), lw(kTC + out_w - 1),
          slices(ns >= kThreads ? 1 : kThreads / ns), group(kThreads / slices) {}  // declared in this order
    __host__ __device__ int smem_floats() const { return lh * lw + kTile + slices * ns; }
};

// Partial sums of every shift over one R tile of one pair (see the header).
__global__ void __launch_bounds__(kThreads)
    small_window_tiles_kernel(const float* __restrict__ left, const float* __restrict__ right,
                              float* __restrict__ partial, int hL, int wL, int hR, int wR, Window win, int tiles_x,
                              int tiles, int64_t k0, int64_t count, PairMap pairs) {
    extern __shared__ float smem[];
    const Geometry g(int(win.out_h()), int(win.out_w()));
    float* Ls = smem;                 // Ls[i][j] = L[r0 + dy0 + i][c0 + dx0 + j], 0 outside L
    float* Rs = Ls + g.lh * g.lw;     // Rs[e] = R[r0 + e / kTC][c0 + e % kTC], 0 outside R
    float* red = Rs + kTile;          // red[slice][shift]
    const int tile = blockIdx.x;
    const int r0 = (tile / tiles_x) * kTR, c0 = (tile % tiles_x) * kTC;
    const int slice = threadIdx.x / g.group, lane = threadIdx.x % g.group;

    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        const int64_t pair = k0 + k;
        const float* L = left + int64_t(pairs.left_of(pair)) * hL * wL;
        const float* R = right + int64_t(pairs.right_of(pair)) * hR * wR;
        __syncthreads();  // the previous pair's readers of Ls, Rs and red are done
        for (int i = threadIdx.x; i < g.lh * g.lw; i += kThreads) {
            const int gr = r0 + win.dy0 + i / g.lw, gc = c0 + win.dx0 + i % g.lw;
            Ls[i] = (gr >= 0 && gr < hL && gc >= 0 && gc < wL) ? L[int64_t(gr) * wL + gc] : 0.0f;
        }
        for (int e = threadIdx.x; e < kTile; e += kThreads) {
            const int rr = r0 + e / kTC, cc = c0 + e % kTC;
            Rs[e] = (rr < hR && cc < wR) ? R[int64_t(rr) * wR + cc] : 0.0f;
        }
        __syncthreads();
        // Threads past slices x group (256 is not always a multiple of the group) sit this out.
        for (int s = lane; slice < g.slices && s < g.ns; s += g.group) {
            const float* Lsh = Ls + (s / g.ow) * g.lw + s % g.ow;  // the shift's origin in the region
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            int e = slice;
            for (; e + 3 * g.slices < kTile; e += 4 * g.slices) {
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const int eu = e + u * g.slices;
                    acc[u] = fmaf(Lsh[(eu / kTC) * g.lw + eu % kTC], Rs[eu], acc[u]);
                }
            }
            for (; e < kTile; e += g.slices) acc[0] = fmaf(Lsh[(e / kTC) * g.lw + e % kTC], Rs[e], acc[0]);
            red[slice * g.ns + s] = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        }
        __syncthreads();
        float* P = partial + (k * tiles + tile) * int64_t(g.ns);
        for (int s = threadIdx.x; s < g.ns; s += kThreads) {
            float sum = 0.0f;
            for (int i = 0; i < g.slices; ++i) sum += red[i * g.ns + s];
            P[s] = sum;
        }
    }
}

// out[k0 + k][s] = sum over tiles, in tile order, of partial[k][tile][s]. One thread per output
// element, grid-stride; reads coalesced across s.
__global__ void small_window_reduce_kernel(const float* __restrict__ partial, float* __restrict__ out, int ns,
                                           int tiles, int64_t k0, int64_t count) {
    const int64_t total = count * ns;
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t k = i / ns, s = i % ns;
        const float* P = partial + k * tiles * int64_t(ns) + s;
        float sum = 0.0f;
        for (int t = 0; t < tiles; ++t) sum += P[int64_t(t) * ns];
        out[(k0 + k) * ns + s] = sum;
    }
}

class SmallWindow final : public Instance {
public:
    explicit SmallWindow(const Problem& p) : p_(p), geo_(1, 1) {
        const Window w = p.shifts();
        // At most kMaxShifts shifts: the registry refuses more before make() (Variant::max_shifts).
        geo_ = Geometry(int(w.out_h()), int(w.out_w()));
        bytes_ = size_t(geo_.smem_floats()) * sizeof(float);
        if (bytes_ > kMaxSmem)
            throw UsageError("small-window: " + p.describe() + " needs " + std::to_string(bytes_ / 1024) +
                             " KB of shared memory per block (at most 200 KB: a window of at most ~600 rows)");
        tiles_x_ = ceil_div(p.wR, kTC);
        tiles_ = int64_t(ceil_div(p.hR, kTR)) * tiles_x_;
        if (tiles_ > int64_t(1) << 30) throw UsageError("small-window: " + p.describe() + ": too many tiles");
        chunk_ = std::max<int64_t>(1, std::min<int64_t>(p.out_count(), kMaxPartial / (tiles_ * geo_.ns)));
        partial_ = DeviceBuffer<float>(size_t(chunk_ * tiles_ * geo_.ns));
        XC_CUDA_CHECK(cudaFuncSetAttribute(small_window_tiles_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(bytes_)));
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        const int64_t count = p_.out_count();
        for (int64_t k0 = 0; k0 < count; k0 += chunk_) {
            const int64_t n = std::min(chunk_, count - k0);
            const dim3 grid(unsigned(tiles_), unsigned(std::min<int64_t>(n, 65535)));
            small_window_tiles_kernel<<<grid, kThreads, bytes_, stream>>>(left, right, partial_.get(), p_.hL, p_.wL,
                                                                          p_.hR, p_.wR, p_.shifts(), tiles_x_,
                                                                          int(tiles_), k0, n, pair_map(p_));
            XC_CHECK_LAUNCH();
            const int64_t elems = n * geo_.ns;
            const int blocks = int(std::min<int64_t>(ceil_div64(elems, kThreads), 65536));
            small_window_reduce_kernel<<<blocks, kThreads, 0, stream>>>(partial_.get(), out, geo_.ns, int(tiles_), k0,
                                                                       n);
            XC_CHECK_LAUNCH();
        }
    }

private:
    Problem p_;
    Geometry geo_;
    size_t bytes_ = 0;
    int tiles_x_ = 0;
    int64_t tiles_ = 0, chunk_ = 1;
    DeviceBuffer<float> partial_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "small-window",
    .family = "hopper",
    .summary = "few shifts of large matrices (at most 1089, ±16): a block per R tile of 16 x 128 computes every shift's "
               "partial sum, a second kernel adds them in order",
    .timed = "two kernels (tile partials, ordered reduction)",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {},
    .make = [](const Problem& p, const Params&) -> std::unique_ptr<Instance> {
        return std::make_unique<SmallWindow>(p);
    },
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
    .max_shifts = kMaxShifts,
});

}  // namespace
}  // namespace xcorr
