// fft and fft+plan: the FFT-based cross-correlation with cuFFT, the paper's asymptotically better
// comparison point (section 2.3 and 5.1.1; "fft" and "fft+plan" in Fig. 17, 20 and 23, Table 1).
//
// Algorithm. Both matrices of a pair are zero-padded to one P x Q transform size, so that the
// circular correlation holds the shifts of the output window without wrap-around (sizes: "Windows"
// below; the full window needs P >= hL + hR - 1 and Q >= wL + wR - 1). P is the smallest integer
// >= the size needed whose only prime factors are 2, 3, 5 and 7 (the sizes cuFFT has fast kernels
// for; 31 -> 32, 127 -> 128, 191 -> 192, 511 -> 512, 63 -> 63), Q the smallest even such integer
// (an even last dimension lets R2C run as a half-length complex FFT). Both matrices sit at the top
// left of their padded slots. With F the unnormalised DFT,
//     C = F^-1( F(L) * conj(F(R)) ) / (P Q)        (correlation, not convolution)
// holds shift (dy, dx) at (dy mod P, dx mod Q), and the crop reads output (i, j), shift
// (dy0 + i, dx0 + j), from there: the quadrant swap, untimed as in the paper. (The right could
// instead be stored circularly shifted by (hR-1, wR-1), making the result the top-left window; that
// is how this variant started, but the shift costs the pad its 16-byte alignment.)
//
// Windows (CONVENTIONS.md, "Output windows"; any rectangle of shifts dy0..dy1, dx0..dx1). Per
// dimension (rows shown; columns alike, AxisFit/fit_axis in xcorr/registry.hpp):
//  - Clamp: only shifts s in [lo, hi] = [dy0, dy1] n [-(hR-1), hL-1] overlap; the rest of the
//    output is 0. If [lo, hi] is empty in either dimension the whole output is 0: run() is one
//    cudaMemsetAsync, with no workspace, plan or transform (and no finish).
//  - Crop the inputs: C(s) = sum_r L[r+s] R[r] for s in [lo, hi] reads only left rows
//    [l0, l0 + ln) = [max(0, lo), min(hL, hi + hR)) and right rows [r0, r0 + rn) =
//    [max(0, -hi), min(hR, hL - lo)); the pad copies just these parts to the top left of the slots
//    (for the full window, valid, and same with the left at least as large: the whole matrices).
//    With L' and R' the parts, C(s) = C'(s + r0 - l0), C' the correlation of L' and R'.
//  - Period. The circular correlation of period P of L' and R' (each in [0, P) and zero-padded) is
//    c[t] = sum_k C'(t + kP), and C'(s') != 0 only for s' in [-(rn-1), ln-1]. Shift s' of
//    [lo', hi'] = [lo, hi] + r0 - l0 is read without aliasing iff no alias s' + kP, k != 0,
//    overlaps: s' + P > ln - 1 for every s' >= lo' and s' - P < -(rn-1) for every s' <= hi'
//    (|k| = 1 is the closest alias), i.e.
//        P >= max(ln - lo', hi' + rn) = max(l0 + ln - r0 - lo, hi + r0 + rn - l0) =: need,
//    and necessary for generic data since lo' and hi' lie in [-(rn-1), ln-1] (the crop keeps the
//    window's end shifts overlapping). need >= max(ln, rn), so the parts fit; need <= max(hL - lo,
//    hi + hR) (the bound without the crop) <= hL + hR - 1. Full window: nothing cropped, need =
//    hL + hR - 1, P as before windows. Valid with L >= R (shifts [0, hL - hR]): need = hL, no
//    padding beyond the left. Max-shift S < hR with hL >= hR + S: left rows [0, hR + S), need =
//    hR + 2S (the crop matters: without it hL + S).
//  - P = fft_length(need) and Q = fft_length(need_x, even) (common/device.cuh) as above; the
//    workspace, plans, chunks and the graph all follow from P and Q. The product scale stays 1 / (P Q).
//  - Crop (crop_kernel): output (i, j) with dy0 + i in [lo, hi] and dx0 + j in [lo_x, hi_x] is read
//    at ((dy0 + i + r0 - l0) mod P, ...), wrapped once (the argument lies in (-P, P)); every other
//    element is written 0.
//  - A pruned inverse (computing only the window's (hi - lo + 1) x (hi_x - lo_x + 1) outputs of the
//    C2R) is not worth it: P >= max(ln, rn) already, so a tiny window does not shrink the transforms
//    below the cropped inputs, the two forward transforms of every pair remain, and cuFFT has no
//    pruned C2R (a hand-written one would lose cuFFT's bandwidth: notes/50_fft.md). For a few
//    shifts the direct variants, O(shifts x hR x wR), win by far anyway.
//
// Every transform is a batched 2-D R2C / C2R over "slots": a real slot of P x Q floats and a
// complex slot of P x (Q/2+1) (layout=outofplace), or one real slot of P x 2(Q/2+1) floats that
// the spectrum overwrites (layout=inplace: half the workspace).
//
// Work per run, whole batch at once (the default):
//   1. pad: all lefts and all rights into consecutive real slots, one launch (the paper pads on
//      the host, untimed; here it is timed). Out of place only the data windows (the parts the
//      output window uses) are written (pad_window_kernel; the zeros around them are written once
//      at factory time and nothing else writes these slots); in place the R2C overwrites the
//      slots, so pad_kernel writes all of every slot;
//   2. one batched R2C over the nL + nR slots (lefts and rights share the transform size);
//   3. product_kernel: spectrum products, indexed by PairMap, so every left and every right
//      spectrum is computed once and reused for all its pairs (one-to-many: 1 left spectrum for
//      all M; n-to-mn: N left spectra for all M groups; n-to-m: N + M spectra for N*M products).
//      Forms whose right k serves only output k write the product over the right spectrum
//      (in place); n-to-m writes N*M product slots, ordered right-major (slot j*N + i), with
//      product_tile_kernel (4 x 4 pairs per thread, each spectrum element loaded once per tile);
//   4. one batched C2R over the product slots into real result slots of their own (in place: back
//      into the rights' slots, except n-to-m's, which has its own product slots either way);
//   5. crop_kernel (Instance::finish, untimed, reported as finish_time): the output window of every
//      result slot into `out` (zeros where no shift overlaps), the paper's untimed quadrant-swap step.
// In `fft` with launch=graph, steps 1-4 are captured once at factory time into a CUDA graph
// (cuFFT supports stream capture) and run() is one cudaGraphLaunch; only the pad node's input
// pointers are patched when the caller's buffers change. launch=stream issues the same work as
// plain stream launches, the way the paper's implementation does.
//
// Chunks. When the workspace of the whole batch does not fit in 45% of the GPU memory free at
// factory time (cudaMemGetInfo; the rest is left for cuFFT's work areas and the caller), the
// right stack is processed in chunks of K matrices: the lefts are padded and transformed once,
// then per chunk pad -> R2C -> product -> C2R -> crop, with workspaces sized for K (tail chunk
// with its own plans). The crop of each chunk is then inside run() and TIMED, since the results
// of the batch are not kept. The environment variable XCORR_FFT_MAX_CHUNK=K (read by the
// factory) caps K, which forces this path in tests. cuFFT's own work areas are outside that
// estimate: where it cannot make a plan for want of memory (PlanTooLarge), the factory halves K
// and plans again, down to one right per chunk (launch=graph then runs as plain launches).
//
// Measurements, probes and history: notes/50_fft.md.
//
// Plans. `fft` takes its plans from a process-wide cache keyed by (P, Q, batch, direction, device),
// so a later instance of the same shape on the same GPU creates none. The cache is guarded by a
// mutex (instances may be created from several threads) and lends a plan to one instance at a
// time: a cuFFT plan holds one work area and one stream setting, so two live instances (two
// library plans, run concurrently on two streams or threads) never share one; an instance's own
// plans of equal keys run in order on its stream and are one. Plans no instance holds stay cached
// up to 32 plans / 2 GiB of cuFFT work area, least recently used evicted first; the cache is never destroyed (destroying plans after
// the CUDA runtime shut down at exit is unsafe). `fft+plan` bypasses the cache: it creates its
// plans (cufftCreate + cufftMakePlanMany64) and destroys them inside the timed run().
//
#include <cufft.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "common/device.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/cufft_plan.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::fft {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kWarp;

// ---------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------

// The part of one matrix that the pad copies to the top left of its slot: rows [y0, y0 + h) and
// columns [x0, x0 + w) of a matrix of `pitch` columns (the whole matrix for the full window).
struct PadPart {
    int y0, x0, h, w, pitch;
};

struct PadArgs {
    const float* left;   // left stack (all nL matrices)
    const float* right;  // right stack
    float* dst;          // first real slot written
    int n_left;          // slots [0, n_left) take left s
    int n_right;         // slots [n_left, n_left + n_right) take right r0 + s - n_left
    int r0;
    int64_t left_floats, right_floats;  // hL*wL, hR*wR: matrix strides in the stacks
    PadPart lpart, rpart;
    int P;
    int pitch;            // floats per padded row: Q (out-of-place) or 2(Q/2+1) (in-place)
    int64_t slot_floats;  // P * pitch
    int vec4;             // pad_window_kernel: float4 accesses (see vec4_ok())
};

// Slot s of a pad: the first element copied from its source matrix (left s, or right
// r0 + s - n_left), the size and row pitch of the part copied, and its real slot.
struct PadSlot {
    const float* src;
    float* dst;
    int h, w, spitch;
};
__device__ __forceinline__ PadSlot pad_slot(const PadArgs& a, int s) {
    const bool is_left = s < a.n_left;
    const PadPart& p = is_left ? a.lpart : a.rpart;
    const float* m = is_left ? a.left + int64_t(s) * a.left_floats
                             : a.right + (int64_t(a.r0) + s - a.n_left) * a.right_floats;
    return PadSlot{m + int64_t(p.y0) * p.pitch + p.x0, a.dst + int64_t(s) * a.slot_floats, p.h, p.w, p.pitch};
}

// pad_kernel (layout=inplace): the part of every matrix that the window uses (PadPart; the whole
// matrix for the full window) zero-padded into the top left of its real slot.
// blockIdx.y strides over the slots; each warp takes one padded row at
// a time (rows strided over the x dimension of the grid and the block's warps), its lanes 64
// consecutive floats of the row as float2 pairs (the pitch is even, so every row is 8-byte
// aligned), so the writes are fully coalesced and the reads are row segments of the source. The
// whole slot is written, in-place pitch padding included, so no memset is needed.
__global__ void __launch_bounds__(kThreads) pad_kernel(PadArgs a) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int half = a.pitch / 2;
    const int nslots = a.n_left + a.n_right;
    for (int s = blockIdx.y; s < nslots; s += gridDim.y) {
        const PadSlot t = pad_slot(a, s);
        for (int y = blockIdx.x * kWarpsPerBlock + warp; y < a.P; y += gridDim.x * kWarpsPerBlock) {
            const int w = t.w;
            const float* row = t.src + int64_t(y) * t.spitch;
            float2* drow = reinterpret_cast<float2*>(t.dst) + int64_t(y) * half;
            for (int xp = lane; xp < half; xp += kWarp) {
                const int x = 2 * xp;
                float2 v = make_float2(0.0f, 0.0f);
                if (y < t.h) {
                    if (x < w) v.x = __ldg(row + x);
                    if (x + 1 < w) v.y = __ldg(row + x + 1);
                }
                drow[xp] = v;
            }
        }
    }
}

// pad_window_kernel (layout=outofplace): writes only the data window of every slot (its top-left
// h x w: the part of the matrix that the output window uses). Out of place nothing else writes the
// left and right real slots (the R2C reads them, the C2R writes its own result slots), so the
// zeros around the window, written once when the workspace is allocated, persist from call to
// call: the pass moves h*w floats per matrix each way instead of writing all P*pitch (real-data
// shape: 324 MB instead of 809 MB). blockIdx.y strides over the slots, the x dimension of the
// grid over the window's elements, as float4 when a.vec4 (set per call: every row copied, in both
// stacks and in the slots, starts 16-byte aligned and is a whole number of float4).
template <class V>
__device__ __forceinline__ void copy_window(const float* src_f, float* dst_f, int h, int w, int spitch, int pitch) {
    constexpr int VEC = sizeof(V) / sizeof(float);
    const int wv = w / VEC, spv = spitch / VEC, pv = pitch / VEC;
    const V* src = reinterpret_cast<const V*>(src_f);
    V* dst = reinterpret_cast<V*>(dst_f);
    for (int e = blockIdx.x * kThreads + threadIdx.x; e < h * wv; e += gridDim.x * kThreads) {
        const int r = e / wv, c = e - r * wv;
        dst[r * pv + c] = __ldg(src + r * spv + c);
    }
}

__global__ void __launch_bounds__(kThreads) pad_window_kernel(PadArgs a) {
    const int nslots = a.n_left + a.n_right;
    for (int s = blockIdx.y; s < nslots; s += gridDim.y) {
        const PadSlot t = pad_slot(a, s);
        if (a.vec4) copy_window<float4>(t.src, t.dst, t.h, t.w, t.spitch, a.pitch);
        else copy_window<float>(t.src, t.dst, t.h, t.w, t.spitch, a.pitch);
    }
}

struct ProductArgs {
    const float2* lspec;  // left spectra, slot i = left i
    const float2* rspec;  // right spectra of this chunk, slot j - j0 = right j
    float2* res;          // product slots of this chunk; may alias rspec (then res slot == right slot)
    int64_t E;            // complex elements per slot
    int64_t slots;        // product slots in this launch
    int64_t rho0;         // global index of the first product slot
    int j0;               // first right of this chunk
    PairMap pairs;
    float scale;          // 1 / (P Q): the inverse DFT is unnormalised
};

// Product slot rho -> output index k: n-to-m stores right-major (rho = j*nL + i) so that a chunk of
// rights owns a contiguous range of slots; in the other forms right k serves output k only.
__host__ __device__ __forceinline__ int64_t output_of_slot(const PairMap& pm, int64_t rho) {
    return pm.form == int(Form::NToM) ? (rho % pm.nL) * pm.nR + rho / pm.nL : rho;
}

// mul_conj of two complex numbers packed in a float4 (one 16-byte access).
__device__ __forceinline__ float4 mul_conj2(float4 l, float4 r, float scale) {
    const float2 lo = mul_conj(make_float2(l.x, l.y), make_float2(r.x, r.y), scale);
    const float2 hi = mul_conj(make_float2(l.z, l.w), make_float2(r.z, r.w), scale);
    return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// product_kernel: res = F(L_i) * conj(F(R_j)) / (P Q) for every product slot. blockIdx.y strides
// over the product slots (the pair (i, j) of a slot comes from PairMap, once per slot), the x
// dimension of the grid over the slot's complex elements, a few per thread; with PAIRS each thread
// moves two complex numbers per 16-byte access (when the slots are 16-byte aligned), else one per
// 8-byte access. rspec and res alias for the in-place forms: each element is read before it is
// written by the same thread, hence no __restrict__ on them.
template <bool PAIRS>
__global__ void __launch_bounds__(kThreads) product_kernel(ProductArgs a) {
    for (int64_t s = blockIdx.y; s < a.slots; s += gridDim.y) {
        const int64_t k = output_of_slot(a.pairs, a.rho0 + s);
        const float2* L = a.lspec + int64_t(a.pairs.left_of(k)) * a.E;
        const float2* R = a.rspec + int64_t(a.pairs.right_of(k) - a.j0) * a.E;
        float2* C = a.res + s * a.E;
        if constexpr (PAIRS) {
            const float4* L4 = reinterpret_cast<const float4*>(L);
            const float4* R4 = reinterpret_cast<const float4*>(R);
            float4* C4 = reinterpret_cast<float4*>(C);
            for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < a.E / 2;
                 e += int64_t(gridDim.x) * blockDim.x) {
                C4[e] = mul_conj2(__ldg(L4 + e), R4[e], a.scale);
            }
        } else {
            for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < a.E;
                 e += int64_t(gridDim.x) * blockDim.x)
                C[e] = mul_conj(__ldg(L + e), R[e], a.scale);
        }
    }
}

// product_tile_kernel (n-to-m): the N*M products of N left and M right spectra, in TL x TR tiles of
// pairs. A thread owns one 16-byte element pair of every slot of one tile: it loads TL left and
// TR right float4 once and writes TL * TR products, so a product costs 16 bytes of writes and
// (TL + TR) / (TL * TR) x 16 bytes of reads instead of 32 (product_kernel reads both spectra per
// product; its share of the time: notes/50_fft.md). blockIdx.y walks the tiles,
// left tiles fastest (strided beyond 65535); the x dimension of the grid walks the elements.
// Product slot of left i and chunk right jj: jj * nL + i (right-major, as output_of_slot expects).
constexpr int kTileL = 4, kTileR = 4;

__global__ void __launch_bounds__(kThreads) product_tile_kernel(ProductArgs a, int n_right) {
    const int nL = a.pairs.nL;
    const int tiles_l = (nL + kTileL - 1) / kTileL;
    const int64_t tiles = int64_t(tiles_l) * ((n_right + kTileR - 1) / kTileR);
    const int64_t E4 = a.E / 2;
    for (int64_t t = blockIdx.y; t < tiles; t += gridDim.y) {
        const int i0 = int(t % tiles_l) * kTileL, j0 = int(t / tiles_l) * kTileR;
        const int nl = min(kTileL, nL - i0), nr = min(kTileR, n_right - j0);
        const float4* L = reinterpret_cast<const float4*>(a.lspec) + int64_t(i0) * E4;
        const float4* R = reinterpret_cast<const float4*>(a.rspec) + int64_t(j0) * E4;
        float4* C = reinterpret_cast<float4*>(a.res);
        for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < E4; e += int64_t(gridDim.x) * blockDim.x) {
            float4 l[kTileL], r[kTileR];
#pragma unroll
            for (int u = 0; u < kTileL; ++u)
                if (u < nl) l[u] = __ldg(L + u * E4 + e);
#pragma unroll
            for (int v = 0; v < kTileR; ++v)
                if (v < nr) r[v] = __ldg(R + v * E4 + e);
#pragma unroll
            for (int v = 0; v < kTileR; ++v)
#pragma unroll
                for (int u = 0; u < kTileL; ++u)
                    if (u < nl && v < nr) C[(int64_t(j0 + v) * nL + i0 + u) * E4 + e] = mul_conj2(l[u], r[v], a.scale);
        }
    }
}

struct CropArgs {
    const float* res;  // result real slots (row pitch `pitch`)
    float* out;
    int64_t slots;
    int64_t rho0;
    PairMap pairs;
    int oh, ow, pitch;
    // Output (y, x) with y in [y0, y1] and x in [x0, x1] (the shifts that overlap) is read at
    // circular position (y - sy, x - sx), which lies in (-P, P) x (-Q, Q), wrapped once; every
    // other output element is 0. Full window: y0 = x0 = 0, y1 = oh - 1, x1 = ow - 1.
    int y0, y1, x0, x1;
    int sy, sx, P, Q;
    int64_t slot_floats;
};

// crop_kernel: output (y, x) of every result slot from circular position ((y - sy) mod P,
// (x - sx) mod Q), the quadrant swap; 0 outside the overlapping shifts. blockIdx.y strides over the
// slots; each warp takes one segment of kCropSegment columns of one output row at a time (segments
// strided over the grid's x dimension and the block's warps), its lanes consecutive columns:
// coalesced row segments on both sides, split once where the row wraps (rows and columns without
// overlap: coalesced zero writes, no reads). Segments rather than whole rows, so that a signal's
// single row of millions of lags is spread over the GPU instead of one warp per slot.
constexpr int kCropSegment = 64 * kWarp;
__global__ void __launch_bounds__(kThreads) crop_kernel(CropArgs a) {
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const int segments = (a.ow + kCropSegment - 1) / kCropSegment;
    const int64_t items = int64_t(a.oh) * segments;
    for (int64_t s = blockIdx.y; s < a.slots; s += gridDim.y) {
        const float* src = a.res + s * a.slot_floats;
        float* dst = a.out + output_of_slot(a.pairs, a.rho0 + s) * a.oh * a.ow;
        for (int64_t it = int64_t(blockIdx.x) * kWarpsPerBlock + warp; it < items;
             it += int64_t(gridDim.x) * kWarpsPerBlock) {
            const int y = int(it / segments), xb = int(it % segments) * kCropSegment;
            const int xe = min(a.ow, xb + kCropSegment);
            float* drow = dst + int64_t(y) * a.ow;
            if (y < a.y0 || y > a.y1) {
                for (int x = xb + lane; x < xe; x += kWarp) drow[x] = 0.0f;
                continue;
            }
            const int ry = y < a.sy ? y - a.sy + a.P : y - a.sy;
            const float* srow = src + int64_t(ry) * a.pitch;
            for (int x = xb + lane; x < xe; x += kWarp)
                drow[x] = x < a.x0 || x > a.x1 ? 0.0f : __ldg(srow + (x < a.sx ? x - a.sx + a.Q : x - a.sx));
        }
    }
}

// Grid for "blockIdx.y over slots, x over rows of a slot (one warp per row)".
dim3 row_grid(int rows, int64_t slots) {
    return dim3(unsigned(std::min(ceil_div(rows, kWarpsPerBlock), 64)), unsigned(std::min<int64_t>(slots, 65535)));
}

// Grid for crop_kernel: x over the row segments of a slot (one warp per segment), at most 1024 blocks.
dim3 segment_grid(int rows, int cols, int64_t slots) {
    const int64_t items = int64_t(rows) * ceil_div(cols, kCropSegment);
    return dim3(unsigned(std::clamp<int64_t>(ceil_div64(items, kWarpsPerBlock), 1, 1024)),
                unsigned(std::min<int64_t>(slots, 65535)));
}

// Grid for "blockIdx.y over slots, x over the elements of a slot", about 4 elements per thread.
dim3 element_grid(int64_t per_slot, int64_t slots) {
    const int64_t bx = std::clamp<int64_t>(ceil_div64(per_slot, 4 * kThreads), 1, 1024);
    return dim3(unsigned(bx), unsigned(std::min<int64_t>(slots, 65535)));
}

// ---------------------------------------------------------------------------------------------
// Transform sizes and plans
// ---------------------------------------------------------------------------------------------


enum PlanKind : int { kR2C = 0, kC2R = 1 };

struct PlanKey {
    int P = 0, Q = 0;
    long long batch = 0;  // 0: plan not used
    int kind = kR2C;
    int inplace = 0;      // real slots of P x 2(Q/2+1) floats shared with the spectrum, else P x Q
    int device = 0;       // the CUDA device the plan lives on (run_batch builds plans on several at once)
    auto operator<=>(const PlanKey&) const = default;
};

// A batched 2-D plan: real slots of P x pitch floats, complex slots of P x (Q/2+1). Signals (P = 1)
// get a 1-D plan of the same slots: a 2-D plan with a dimension of 1 is not promised cuFFT's 1-D kernels.
// Throws PlanTooLarge (xcorr/cufft_plan.hpp) where cuFFT has too little memory for it.
cufftHandle create_plan(const PlanKey& k) {
    long long n[2] = {k.P, k.Q};
    long long real_embed[2] = {k.P, k.inplace ? 2LL * (k.Q / 2 + 1) : k.Q}, cplx_embed[2] = {k.P, k.Q / 2 + 1};
    const long long real_dist = real_embed[0] * real_embed[1], cplx_dist = cplx_embed[0] * cplx_embed[1];
    const int rank = k.P == 1 ? 1 : 2, first = 2 - rank;  // the dimensions n[first..1]
    return k.kind == kR2C ? make_plan_many(rank, n + first, real_embed + first, real_dist, cplx_embed + first,
                                           cplx_dist, CUFFT_R2C, k.batch)
                          : make_plan_many(rank, n + first, cplx_embed + first, cplx_dist, real_embed + first,
                                           real_dist, CUFFT_C2R, k.batch);
}

// The process-wide plan cache of `fft` (thread-safety and eviction: see the header comment).
class PlanCache {
public:
    // An idle plan of key k, else a new one; lent until release (one instance at a time).
    cufftHandle acquire(const PlanKey& k) {
        std::lock_guard<std::mutex> lock(m_);
        auto [first, last] = plans_.equal_range(k);
        auto it = std::find_if(first, last, [](const auto& e) { return !e.second.lent; });
        if (it == last) {
            const cufftHandle h = create_plan(k);
            size_t work = 0;
            if (cufftGetSize(h, &work) != CUFFT_SUCCESS) work = 0;
            it = plans_.emplace(k, Entry{h, work, false, 0});
        }
        it->second.lent = true;
        it->second.last_use = ++tick_;
        return it->second.handle;
    }
    void release(const PlanKey& k, cufftHandle h) noexcept {
        std::lock_guard<std::mutex> lock(m_);
        auto [first, last] = plans_.equal_range(k);
        auto it = std::find_if(first, last, [h](const auto& e) { return e.second.handle == h; });
        if (it == last) return;
        it->second.lent = false;
        for (;;) {
            size_t idle_bytes = 0;
            int idle = 0;
            auto oldest = plans_.end();
            for (auto e = plans_.begin(); e != plans_.end(); ++e) {
                if (e->second.lent) continue;
                idle_bytes += e->second.work;
                ++idle;
                if (oldest == plans_.end() || e->second.last_use < oldest->second.last_use) oldest = e;
            }
            if (oldest == plans_.end() || (idle <= kMaxIdle && idle_bytes <= kMaxIdleBytes)) break;
            cufftDestroy(oldest->second.handle);
            plans_.erase(oldest);
        }
    }

private:
    struct Entry {
        cufftHandle handle;
        size_t work;
        bool lent;
        uint64_t last_use;
    };
    static constexpr int kMaxIdle = 32;
    static constexpr size_t kMaxIdleBytes = size_t(2) << 30;
    std::mutex m_;
    std::multimap<PlanKey, Entry> plans_;  // several plans of one key where instances run at once
    uint64_t tick_ = 0;
};

PlanCache& plan_cache() {
    static PlanCache* cache = new PlanCache;  // never destroyed: see the header comment
    return *cache;
}

// ---------------------------------------------------------------------------------------------
// The instance
// ---------------------------------------------------------------------------------------------

class Fft final : public Instance {
public:
    Fft(const Problem& p, bool cached_plans, bool use_graph, bool inplace)
        : p_(p), cached_(cached_plans), inplace_(inplace) {
        const Window w = p.shifts();
        fy_ = fit_axis(w.dy0, w.dy1, p.hL, p.hR);
        fx_ = fit_axis(w.dx0, w.dx1, p.wL, p.wR);
        if (fy_.empty() || fx_.empty()) {  // no shift overlaps: run() writes zeros, no transform
            empty_ = true;
            return;
        }
        // The full window gives today's sizes: need = hL + hR - 1 (wL + wR - 1), nothing cropped.
        P_ = int(fft_length(fy_.need, false));
        Q_ = int(fft_length(fx_.need, true));
        pitch_ = inplace_ ? 2 * (Q_ / 2 + 1) : Q_;
        real_floats_ = int64_t(P_) * pitch_;
        E_ = int64_t(P_) * (Q_ / 2 + 1);
        G_ = p.form == Form::NToM ? p.nL : 1;
        pairs_ = pair_map(p);
        int device = 0;
        XC_CUDA_CHECK(cudaGetDevice(&device));
        // A plan cuFFT cannot make for want of memory (its work areas are not in the 45% estimate
        // of plan_layout) halves the chunk and tries again, down to one right per chunk: the batch
        // runs in chunks rather than being refused.
        for (int64_t cap = 0;;) {
            plan_layout(cap);
            for (PlanKey& k : keys_) k.device = device;
            // Real slots [0, n_real), then (out of place) complex slots [0, spec_slots(K)). Zeroed once: out
            // of place the pad writes only the data windows (pad_window_kernel) and relies on the zeros.
            ws_ = DeviceBuffer<float>(size_t(workspace_floats(K_)));
            XC_CUDA_CHECK(cudaMemset(ws_.get(), 0, ws_.bytes()));
            XC_CUDA_CHECK(cudaDeviceSynchronize());
            if (!cached_) break;
            try {
                for (int i = 0; i < kPlans; ++i)
                    if (keys_[i].batch) {
                        // Plans of one key within this instance run in order on its stream: one plan.
                        const int same = int(std::find(keys_.begin(), keys_.begin() + i, keys_[i]) - keys_.begin());
                        if (same < i) {
                            handles_[i] = handles_[same];
                        } else {
                            handles_[i] = plan_cache().acquire(keys_[i]);
                            acquired_[i] = true;
                        }
                    }
                if (use_graph && !chunked_) use_graph_ = capture_graph();
                break;
            } catch (const PlanTooLarge& e) {
                release_plans();  // idle plans this large leave the cache at once (kMaxIdleBytes)
                ws_ = DeviceBuffer<float>();
                if (K_ <= 1) plan_error(e);
                cap = (K_ + 1) / 2;
            } catch (...) {
                release_plans();  // the destructor does not run for a throwing constructor
                throw;
            }
        }
    }

    ~Fft() override {
        if (exec_) cudaGraphExecDestroy(exec_);
        if (graph_) cudaGraphDestroy(graph_);
        release_plans();
    }

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        if (empty_) {
            XC_CUDA_CHECK(cudaMemsetAsync(out, 0, size_t(p_.out_elems()) * sizeof(float), stream));
            return;
        }
        if (use_graph_) {
            if (!graph_bound_ || left != pad_args_.left || right != pad_args_.right) {
                pad_args_.left = left;
                pad_args_.right = right;
                pad_args_.vec4 = vec4_ok(left, right) ? 1 : 0;
                void* args[] = {&pad_args_};
                cudaKernelNodeParams kp = pad_params_;
                kp.kernelParams = args;
                kp.extra = nullptr;
                XC_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec_, pad_node_, &kp));
                graph_bound_ = true;
            }
            XC_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
            return;
        }
        if (cached_) {
            enqueue(left, right, out, handles_, stream);
            return;
        }
        // fft+plan: plan creation and destruction are part of the timed work.
        struct Owned {
            std::array<cufftHandle, kPlans> h{};
            std::array<bool, kPlans> live{};
            ~Owned() {
                for (int i = 0; i < kPlans; ++i)
                    if (live[i]) cufftDestroy(h[i]);
            }
        } owned;
        try {
            for (int i = 0; i < kPlans; ++i)
                if (keys_[i].batch) {
                    owned.h[i] = create_plan(keys_[i]);
                    owned.live[i] = true;
                }
        } catch (const PlanTooLarge& e) {
            plan_error(e);
        }
        enqueue(left, right, out, owned.h, stream);
        for (int i = 0; i < kPlans; ++i)
            if (owned.live[i]) {
                owned.live[i] = false;
                XC_CUFFT_CHECK(cufftDestroy(owned.h[i]));
            }
    }

    bool has_finish() const override { return !chunked_ && !empty_; }

    // The work areas of the cached cuFFT plans it holds (cuFFT allocates them itself; each is lent
    // to this instance alone, and counted once where two of its keys share one). fft+plan creates
    // its plans inside run(): nothing held between runs.
    size_t external_device_bytes() const override {
        size_t total = 0;
        for (int i = 0; i < kPlans; ++i) {
            size_t work = 0;
            if (acquired_[i] && cufftGetSize(handles_[i], &work) == CUFFT_SUCCESS) total += work;
        }
        return total;
    }

    // Untimed crop of the whole batch (whole-batch mode only).
    void finish(float* out, cudaStream_t stream) override {
        launch_crop(real_slot(res_base_), out, p_.out_count(), 0, stream);
    }

private:
    void release_plans() noexcept {
        for (int i = 0; i < kPlans; ++i)
            if (acquired_[i]) {
                plan_cache().release(keys_[i], handles_[i]);
                acquired_[i] = false;
            }
    }

    enum { kR2cAll = 0, kC2rAll, kR2cLeft, kR2cChunk, kC2rChunk, kR2cTail, kC2rTail, kPlans };

    // Whole batch or chunks of K rights; slot counts and plan keys. Slots: [0, nL) lefts,
    // [nL, nL + K) rights, then the K*G results. n-to-m has K*nL product slots there (spectra and
    // results); the product of the other forms overwrites the right spectrum, and the C2R writes
    // its own K real result slots out of place (so the padded rights keep their zeros), or back
    // into the right slots in place.
    int64_t real_slots(int64_t k) const {
        return p_.nL + k + (p_.form == Form::NToM || !inplace_ ? k * G_ : 0);
    }
    int64_t spec_slots(int64_t k) const {
        return inplace_ ? 0 : p_.nL + k + (p_.form == Form::NToM ? k * G_ : 0);
    }
    int64_t workspace_floats(int64_t k) const { return real_slots(k) * real_floats_ + spec_slots(k) * 2 * E_; }
    double workspace_bytes(int64_t k) const { return double(workspace_floats(k)) * sizeof(float); }
    // cap > 0: at most cap rights per chunk (the retry after a plan too large for the memory).
    void plan_layout(int64_t cap) {
        const int64_t nL = p_.nL, nR = p_.nR;
        size_t free_b = 0, total_b = 0;
        XC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
        const double usable = 0.45 * double(free_b);
        int64_t env_k = fft_max_chunk_from_env();
        if (cap > 0) env_k = env_k > 0 ? std::min(env_k, cap) : cap;
        keys_ = {};  // a retry's layout keeps none of the last one's plans
        const int ip = inplace_ ? 1 : 0;
        if (workspace_bytes(nR) <= usable && (env_k == 0 || env_k >= nR)) {
            chunked_ = false;
            K_ = p_.nR;
            keys_[kR2cAll] = PlanKey{P_, Q_, nL + nR, kR2C, ip};
            keys_[kC2rAll] = PlanKey{P_, Q_, p_.out_count(), kC2R, ip};
        } else {
            const double per_right = workspace_bytes(1) - workspace_bytes(0);
            const double k_mem = (usable - workspace_bytes(0)) / per_right;
            if (k_mem < 1)
                throw UsageError("not enough GPU memory for fft: one chunk of " + p_.describe() + " needs " +
                                 std::to_string(workspace_bytes(1) / double(1 << 30)) +
                                 " GiB of workspace, 45% of the free " +
                                 std::to_string(double(free_b) / double(1 << 30)) + " GiB is usable");
            int64_t k = std::min<int64_t>(int64_t(std::min(k_mem, 1e9)), nR);
            if (env_k > 0) k = std::min<int64_t>(k, env_k);
            chunked_ = true;
            K_ = int(k);
            keys_[kR2cLeft] = PlanKey{P_, Q_, nL, kR2C, ip};
            keys_[kR2cChunk] = PlanKey{P_, Q_, k, kR2C, ip};
            keys_[kC2rChunk] = PlanKey{P_, Q_, k * G_, kC2R, ip};
            if (const int64_t tail = nR % k) {
                keys_[kR2cTail] = PlanKey{P_, Q_, tail, kR2C, ip};
                keys_[kC2rTail] = PlanKey{P_, Q_, tail * G_, kC2R, ip};
            }
        }
        n_real_ = real_slots(K_);
        prod_base_ = p_.form == Form::NToM ? nL + K_ : nL;
        res_base_ = inplace_ ? prod_base_ : nL + K_;
    }

    float* real_slot(int64_t i) const { return ws_.get() + i * real_floats_; }
    // In place the spectrum occupies its real slot; out of place the spectra follow the real slots.
    float2* spec_slot(int64_t i) const {
        float* base = inplace_ ? ws_.get() : ws_.get() + n_real_ * real_floats_;
        return reinterpret_cast<float2*>(base) + i * E_;
    }

    // The parts of the left and the right matrices the window uses (the whole matrices when full).
    PadPart left_part() const { return PadPart{fy_.l0, fx_.l0, fy_.ln, fx_.ln, p_.wL}; }
    PadPart right_part() const { return PadPart{fy_.r0, fx_.r0, fy_.rn, fx_.rn, p_.wR}; }
    PadArgs pad_args(const float* left, const float* right, float* dst, int n_left, int n_right, int r0) const {
        return PadArgs{left,         right,        dst, n_left, n_right,      r0, int64_t(p_.hL) * p_.wL,
                       int64_t(p_.hR) * p_.wR, left_part(), right_part(), P_, pitch_, real_floats_,
                       vec4_ok(left, right) ? 1 : 0};
    }
    // pad_window_kernel may move float4: every row copied starts 16-byte aligned in both stacks and
    // in the slots, and is a whole number of float4.
    bool vec4_ok(const float* left, const float* right) const {
        const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
        const auto part4 = [](const PadPart& t) { return t.pitch % 4 == 0 && t.x0 % 4 == 0 && t.w % 4 == 0; };
        return part4(left_part()) && part4(right_part()) && pitch_ % 4 == 0 && a16(ws_.get()) && a16(left) &&
               a16(right);
    }
    void launch_pad(const PadArgs& a, cudaStream_t stream) {
        const int slots = a.n_left + a.n_right;
        if (inplace_) {
            pad_kernel<<<row_grid(P_, slots), kThreads, 0, stream>>>(a);
        } else {
            const int64_t window = std::max(int64_t(fy_.ln) * fx_.ln, int64_t(fy_.rn) * fx_.rn);
            pad_window_kernel<<<element_grid(a.vec4 ? window / 4 : window, slots), kThreads, 0, stream>>>(a);
        }
        XC_CHECK_LAUNCH();
    }
    void launch_product(int64_t slots, int64_t rho0, int j0, cudaStream_t stream) {
        const ProductArgs a{spec_slot(0), spec_slot(p_.nL), spec_slot(prod_base_), E_, slots, rho0, j0, pairs_,
                            float(1.0 / (double(P_) * double(Q_)))};
        // 16-byte accesses when every slot start is 16-byte aligned.
        const bool pairs = E_ % 2 == 0 && (reinterpret_cast<uintptr_t>(spec_slot(0)) % 16) == 0;
        if (pairs && p_.form == Form::NToM) {
            const int n_right = int(slots / p_.nL);
            const int64_t tiles = int64_t(ceil_div(p_.nL, kTileL)) * ceil_div(n_right, kTileR);
            product_tile_kernel<<<element_grid(E_ / 2, tiles), kThreads, 0, stream>>>(a, n_right);
        } else if (pairs) product_kernel<true><<<element_grid(E_ / 2, slots), kThreads, 0, stream>>>(a);
        else product_kernel<false><<<element_grid(E_, slots), kThreads, 0, stream>>>(a);
        XC_CHECK_LAUNCH();
    }
    // Output (y, x) is shift (dy0 + y, dx0 + x), i.e. shift dy0 + y + r0 - l0 of the cropped parts,
    // at row (y - sy) mod P with sy = l0 - r0 - dy0 (full window: hR - 1), likewise for columns.
    void launch_crop(const float* res, float* out, int64_t slots, int64_t rho0, cudaStream_t stream) {
        const Window w = p_.shifts();
        const CropArgs a{res,
                         out,
                         slots,
                         rho0,
                         pairs_,
                         p_.out_h(),
                         p_.out_w(),
                         pitch_,
                         fy_.lo - w.dy0,
                         fy_.hi - w.dy0,
                         fx_.lo - w.dx0,
                         fx_.hi - w.dx0,
                         fy_.l0 - fy_.r0 - w.dy0,
                         fx_.l0 - fx_.r0 - w.dx0,
                         P_,
                         Q_,
                         real_floats_};
        crop_kernel<<<segment_grid(p_.out_h(), p_.out_w(), slots), kThreads, 0, stream>>>(a);
        XC_CHECK_LAUNCH();
    }
    void r2c(cufftHandle h, int64_t slot, cudaStream_t stream) {
        XC_CUFFT_CHECK(cufftSetStream(h, stream));
        XC_CUFFT_CHECK(cufftExecR2C(h, real_slot(slot), reinterpret_cast<cufftComplex*>(spec_slot(slot))));
    }
    // The products (complex slots from prod_base_) into the result real slots (from res_base_).
    void c2r(cufftHandle h, cudaStream_t stream) {
        XC_CUFFT_CHECK(cufftSetStream(h, stream));
        XC_CUFFT_CHECK(cufftExecC2R(h, reinterpret_cast<cufftComplex*>(spec_slot(prod_base_)), real_slot(res_base_)));
    }

    // Steps 2-4 of the whole-batch mode (everything after the pad).
    void enqueue_transforms(const std::array<cufftHandle, kPlans>& h, cudaStream_t stream) {
        r2c(h[kR2cAll], 0, stream);
        launch_product(p_.out_count(), 0, 0, stream);
        c2r(h[kC2rAll], stream);
    }

    void enqueue(const float* left, const float* right, float* out, const std::array<cufftHandle, kPlans>& h,
                 cudaStream_t stream) {
        if (!chunked_) {
            launch_pad(pad_args(left, right, real_slot(0), p_.nL, p_.nR, 0), stream);
            enqueue_transforms(h, stream);
            return;
        }
        launch_pad(pad_args(left, right, real_slot(0), p_.nL, 0, 0), stream);
        r2c(h[kR2cLeft], 0, stream);
        for (int j0 = 0; j0 < p_.nR; j0 += K_) {
            const int kc = std::min(K_, p_.nR - j0);
            const bool tail = kc < K_;
            launch_pad(pad_args(left, right, real_slot(p_.nL), 0, kc, j0), stream);
            r2c(h[tail ? kR2cTail : kR2cChunk], p_.nL, stream);
            launch_product(int64_t(kc) * G_, int64_t(j0) * G_, j0, stream);
            c2r(h[tail ? kC2rTail : kC2rChunk], stream);
            launch_crop(real_slot(res_base_), out, int64_t(kc) * G_, int64_t(j0) * G_, stream);
        }
    }

    // Captures pad + R2C + product + C2R into a graph on a private stream. The pad kernel is the
    // only root node; run() patches its input pointers. Returns false (stream launches are used
    // instead, with a warning) if capture fails.
    bool capture_graph() {
        cudaStream_t cs = nullptr;
        XC_CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
        bool capturing = false;
        try {
            // Warm-up outside the capture: lazy module loading of cuFFT's kernels and ours.
            XC_CUDA_CHECK(cudaMemsetAsync(ws_.get(), 0, ws_.bytes(), cs));
            enqueue_transforms(handles_, cs);
            cudaFuncAttributes attr;
            XC_CUDA_CHECK(cudaFuncGetAttributes(&attr, pad_kernel));
            XC_CUDA_CHECK(cudaFuncGetAttributes(&attr, pad_window_kernel));
            XC_CUDA_CHECK(cudaFuncGetAttributes(&attr, crop_kernel));
            XC_CUDA_CHECK(cudaStreamSynchronize(cs));

            XC_CUDA_CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal));
            capturing = true;
            pad_args_ = pad_args(nullptr, nullptr, real_slot(0), p_.nL, p_.nR, 0);
            launch_pad(pad_args_, cs);
            enqueue_transforms(handles_, cs);
            capturing = false;
            XC_CUDA_CHECK(cudaStreamEndCapture(cs, &graph_));

            size_t roots = 0;
            XC_CUDA_CHECK(cudaGraphGetRootNodes(graph_, nullptr, &roots));
            if (roots != 1) throw CudaError("captured graph has " + std::to_string(roots) + " root nodes, expected 1");
            XC_CUDA_CHECK(cudaGraphGetRootNodes(graph_, &pad_node_, &roots));
            cudaGraphNodeType type;
            XC_CUDA_CHECK(cudaGraphNodeGetType(pad_node_, &type));
            if (type != cudaGraphNodeTypeKernel) throw CudaError("captured graph's root is not the pad kernel");
            XC_CUDA_CHECK(cudaGraphKernelNodeGetParams(pad_node_, &pad_params_));
            XC_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
        } catch (const CudaError& e) {
            if (capturing) {
                cudaGraph_t g = nullptr;
                cudaStreamEndCapture(cs, &g);
                if (g) cudaGraphDestroy(g);
            }
            cudaGetLastError();
            if (exec_) cudaGraphExecDestroy(exec_);
            if (graph_) cudaGraphDestroy(graph_);
            exec_ = nullptr;
            graph_ = nullptr;
            cudaStreamDestroy(cs);
            std::fprintf(stderr, "fft: CUDA graph capture failed (%s); using stream launches\n", e.what());
            return false;
        }
        XC_CUDA_CHECK(cudaStreamDestroy(cs));
        return true;
    }

    Problem p_;
    AxisFit fy_, fx_;  // rows and columns of the window (header comment, "Windows")
    bool empty_ = false;
    bool cached_;
    bool inplace_;
    bool use_graph_ = false;
    bool chunked_ = false;
    int P_ = 0, Q_ = 0, pitch_ = 0, G_ = 1, K_ = 0;
    int64_t real_floats_ = 0, E_ = 0, n_real_ = 0, prod_base_ = 0, res_base_ = 0;
    PairMap pairs_{};
    DeviceBuffer<float> ws_;
    std::array<PlanKey, kPlans> keys_{};
    std::array<cufftHandle, kPlans> handles_{};
    std::array<bool, kPlans> acquired_{};
    // Graph mode.
    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t exec_ = nullptr;
    cudaGraphNode_t pad_node_ = nullptr;
    cudaKernelNodeParams pad_params_{};
    PadArgs pad_args_{};
    bool graph_bound_ = false;
};

// Measured relative errors stay below 3e-7 up to 512 x 512 (notes/50_fft.md); the bound leaves a
// factor of ~7 for other seeds, shapes and sizes.
constexpr double kTolerance = 2e-6;

// Defaults from the H200 measurements (notes/50_fft.md): with cached plans
// out-of-place is as fast or faster on large batches; creating the plans of the in-place layout
// costs less at small sizes, which dominates fft+plan there.
// Any rectangle of shifts (header comment, "Windows"); the named kinds are listed as well so that
// `xcorr list` shows them.
const std::vector<WindowKind> kWindows = {WindowKind::Full, WindowKind::Valid, WindowKind::Same, WindowKind::MaxShift,
                                          WindowKind::Shifts};

enum class Launch { Graph, Stream };
constexpr auto kLaunches = choices<Launch>({{Launch::Graph, "graph"}, {Launch::Stream, "stream"}});
enum class Layout { OutOfPlace, InPlace };
constexpr auto kLayouts = choices<Layout>({{Layout::OutOfPlace, "outofplace"}, {Layout::InPlace, "inplace"}});
const char* const kLayoutHelp =
    "outofplace: separate real and complex slots; inplace: the spectrum overwrites its padded real slot "
    "(half the workspace)";

XCORR_REGISTER_VARIANT(Variant{
    .name = "fft",
    .family = "fft",
    .summary = "cuFFT: batched R2C, spectrum product, C2R; plans cached and reused (the paper's fft)",
    .timed = "pad + R2C + product + C2R (launch=graph: one CUDA graph launch); the crop to the output "
             "layout is untimed (finish_time), except in memory-bounded chunks where each chunk's crop is timed",
    .precision = "fp32",
    .tolerance = kTolerance,
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {kLaunches.param("launch",
                               "graph: steps captured once into a CUDA graph at factory time; stream: plain launches"),
               kLayouts.param("layout", kLayoutHelp)},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<Fft>(p, true, kLaunches.parse(ps.at("launch"), "launch") == Launch::Graph,
                                     kLayouts.parse(ps.at("layout"), "layout") == Layout::InPlace);
    },
    .pilot_batch = true,  // microseconds where the definition's FMA count says milliseconds
    .replays_repeated_calls = true,
    .windows = kWindows,
});

XCORR_REGISTER_VARIANT(Variant{
    .name = "fft+plan",
    .family = "fft",
    .summary = "cuFFT with plan creation and destruction inside the timed run (the paper's fft+plan)",
    .timed = "cuFFT plan creation + pad + R2C + product + C2R + plan destruction; the crop to the output "
             "layout is untimed (finish_time), except in memory-bounded chunks where each chunk's crop is timed",
    .precision = "fp32",
    .tolerance = kTolerance,
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {kLayouts.param("layout", kLayoutHelp, Layout::InPlace)},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<Fft>(p, false, false, kLayouts.parse(ps.at("layout"), "layout") == Layout::InPlace);
    },
    .max_batch = 1,  // a call is dominated by host-side plan creation
    .windows = kWindows,
});

}  // namespace
}  // namespace xcorr::fft
