// small-direct: a tiny-problem specialisation (one-to-one 16 x 16 .. 64 x 64, and stacks of such).
//
// Small problems cannot fill 132 SMs with register tiles and are bound by launch and load
// latency, so this kernel spends as few dependent steps as possible: one launch, one staging
// pass, a short FMA loop, one shared-memory reduction. A block of `warps` warps (8 or 4) owns
// one output row y of one output matrix (grid.x = rows, grid.y = output matrices via PairMap, any form, strided
// beyond 65535). It stages the hR rows of L that row y touches, zero padded by wR - 1 columns
// on each side (so the loop has no conditions), and the whole R. Warp w sums the R rows r = w,
// w + warps, ...; lane l owns 4 consecutive output columns x0 = 4 l (+ 128 per pass) and slides a
// window along the R columns: per 4 columns one float4 broadcast of R and two float4 loads of
// L feed 16 FMAs. The per-warp partial sums of each output go through shared memory and the
// block adds them in a fixed order (deterministic) and writes the row.
//
// Windows (CONVENTIONS.md, "Output windows"). Rows and columns are those of the window: block y
// computes shift dy = dy0 + y and output column x shift dx = dx0 + x, so the staged L rows are
// dy .. dy + hR - 1 and staged column v holds L column v + dx0 (the full output is dy0 = -(hR - 1),
// dx0 = -(wR - 1)). Staging zero-fills everything outside L, so a shift beyond the full range
// sums only zeros and is written as 0 with no special case.
//
// Staging is 4-byte cp.async with zero fill, every copy in flight at once.
//
// Resources: no spills, no stack frame, under 64 registers a thread at either block size (the
// counts: notes/22_small_direct.md). Shared memory is dynamic:
// 4 * (hR * (ow4 + wR4 + 4) + hR * wR4 + warps * ow4) bytes (ow4 = the window's out_w rounded up
// to 128, wR4 = wR rounded up to 4), independent of the window's height; problems needing more
// than 200 KB (about 100 x 100 with the full window) are refused.
// Bottleneck: latency (launch, one global round trip, two barriers; timings:
// notes/22_small_direct.md); from 64 x 64 on, the 2 LDS.128 + 1 broadcast per
// 16 FMAs with 2 warps per SMSP and a 4-deep FMA chain per accumulator make it slower than
// register-tiled beyond about 80 x 80.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/cp_async.cuh"
#include "common/device.cuh"
#include "common/launch.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::small_direct {
namespace {

constexpr int kXT = 4;                   // output columns per lane
constexpr int kPass = kWarp * kXT;       // output columns per pass of a warp

__host__ __device__ constexpr int round4(int v) { return (v + 3) & ~3; }

struct Layout {
    int wR4;    // R columns rounded up to 4 (zero padded)
    int ow4;    // output columns rounded up to a whole number of passes
    int pl;     // pitch of the staged L rows: ow4 + wR4 + 4 (window over-read), multiple of 4
    int l_floats, r_floats, red_floats;
    __host__ __device__ Layout(int hR, int wR, int out_w, int warps)
        : wR4(round4(wR)), ow4(ceil_div(out_w, kPass) * kPass), pl(ow4 + wR4 + 4),
          l_floats(hR * pl), r_floats(hR * wR4), red_floats(warps * ow4) {}
    size_t bytes() const { return size_t(l_floats + r_floats + red_floats) * sizeof(float); }
};

template <int kWarps>
__global__ void __launch_bounds__(kWarp * kWarps)
    small_direct_kernel(const float* __restrict__ left, const float* __restrict__ right,
                        float* __restrict__ out, int hL, int wL, int hR, int wR, Window win,
                        int64_t count, PairMap pairs) {
    extern __shared__ __align__(16) float smem[];
    const int out_h = int(win.out_h()), out_w = int(win.out_w());
    const Layout lay(hR, wR, out_w, kWarps);
    float* Ls = smem;                  // Ls[r][v] = L[dy0 + y + r][v + dx0]
    float* Rs = Ls + lay.l_floats;     // Rs[r][c] = R[r][c], zero for c >= wR
    float* red = Rs + lay.r_floats;    // red[w][x]: warp w's partial sum of output x
    const int y = blockIdx.x;
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int row0 = win.dy0 + y;      // the shift of this row

    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        const float* L = left + int64_t(pairs.left_of(k)) * hL * wL;
        const float* R = right + int64_t(pairs.right_of(k)) * hR * wR;
        __syncthreads();  // the previous matrix's readers are done
        // Every copy in flight at once (cp.async): latency, not issue, is what small problems pay.
        // Columns past out_w + wR4 - 1 are read only for outputs x >= out_w and stay unwritten.
        const int lc = out_w + lay.wR4 - 1;
        for (int r = warp; r < hR; r += kWarps) {
            const int gr = row0 + r;
            const bool row_in = gr >= 0 && gr < hL;
            for (int v = lane; v < lc; v += kWarp) {
                const int gc = v + win.dx0;
                const bool in = row_in && gc >= 0 && gc < wL;
                cp_async4(Ls + r * lay.pl + v, in ? L + int64_t(gr) * wL + gc : L, in);
            }
            for (int c = lane; c < lay.wR4; c += kWarp)
                cp_async4(Rs + r * lay.wR4 + c, c < wR ? R + int64_t(r) * wR + c : R, c < wR);
        }
        cp_async_wait_all();
        __syncthreads();

        for (int xp = 0; xp < lay.ow4; xp += kPass) {
            const int x0 = xp + kXT * lane;
            float acc[kXT] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int r = warp; r < hR; r += kWarps) {
                const float* Lrow = Ls + r * lay.pl + x0;
                const float* Rrow = Rs + r * lay.wR4;
#pragma unroll 2
                for (int c = 0; c < lay.wR4; c += 4) {
                    const float4 b = *reinterpret_cast<const float4*>(Rrow + c);
                    const float4 a0 = *reinterpret_cast<const float4*>(Lrow + c);
                    const float4 a1 = *reinterpret_cast<const float4*>(Lrow + c + 4);
                    const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                    const float bb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
                    for (int dc = 0; dc < 4; ++dc)
#pragma unroll
                        for (int t = 0; t < kXT; ++t) acc[t] = fmaf(bb[dc], a[dc + t], acc[t]);
                }
            }
            *reinterpret_cast<float4*>(red + warp * lay.ow4 + x0) = make_float4(acc[0], acc[1], acc[2], acc[3]);
        }
        __syncthreads();
        float* O = out + k * (int64_t(out_h) * out_w) + int64_t(y) * out_w;
        for (int x = threadIdx.x; x < out_w; x += kWarp * kWarps) {
            float sum = 0.0f;
#pragma unroll
            for (int w = 0; w < kWarps; ++w) sum += red[w * lay.ow4 + x];
            O[x] = sum;
        }
    }
}

constexpr size_t kMaxSmem = 200 * 1024;

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Warps = Values<8, 4>;

// Layout::bytes in 64 bits, so that a tall right matrix or a wide window is refused, not wrapped
// around in Layout's int fields.
int64_t smem_bytes(const Problem& p, int warps) {
    const int64_t wR4 = round4(p.wR), ow4 = ceil_div64(p.out_w(), kPass) * kPass;
    return int64_t(sizeof(float)) * (p.hR * (ow4 + wR4 + 4) + p.hR * wR4 + warps * ow4);
}

class SmallDirect final : public Instance {
public:
    SmallDirect(const Problem& p, int warps) : p_(p), warps_(warps) {
        const int64_t bytes = smem_bytes(p, warps);
        if (bytes > int64_t(kMaxSmem))
            throw UsageError("small-direct: " + p.describe() + " needs " + std::to_string(bytes / 1024) +
                             " KB of shared memory per block (at most 200 KB; meant for sizes up to ~100)");
        bytes_ = Layout(p.hR, p.wR, p.out_w(), warps).bytes();  // the same number, now known to fit
        Warps::dispatch(warps_, [&](auto w) {
            allow_dynamic_smem(small_direct_kernel<decltype(w)::value>, size_t(bytes_), "small-direct");
        }, "warps");
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        const dim3 grid(unsigned(p_.out_h()), unsigned(std::min<int64_t>(p_.out_count(), 65535)));
        Warps::dispatch(warps_, [&](auto w) {
            constexpr int W = decltype(w)::value;
            small_direct_kernel<W><<<grid, kWarp * W, bytes_, stream>>>(
                left, right, out, p_.hL, p_.wL, p_.hR, p_.wR, p_.shifts(), p_.out_count(), pair_map(p_));
            XC_CHECK_LAUNCH();
        }, "warps");
    }

private:
    Problem p_;
    int warps_;
    size_t bytes_ = 0;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "small-direct",
    .family = "hopper",
    .summary = "tiny problems: a block per output row, staged zero-padded inputs, 4 outputs per lane",
    .timed = "kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Warps::param("warps", "warps per block; warp w sums the R rows r = w (mod warps)")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<SmallDirect>(p, param_int(ps, "warps"));
    },
    .windows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift, WindowKind::Shifts},
});

}  // namespace
}  // namespace xcorr::small_direct
