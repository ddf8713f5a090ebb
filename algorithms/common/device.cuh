// Small device helpers shared by the algorithm variants. Only what several variants need lives
// here; everything specific to one algorithm stays in its own file.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "xcorr/core.hpp"

namespace xcorr {

inline constexpr int kWarp = 32;
inline constexpr unsigned kFullMask = 0xffffffffu;

// The sum of v over the 32 lanes of the warp, in every lane (butterfly of xor shuffles: a fixed
// order, the same bits in every lane and on every run). Called by all 32 lanes together.
template <class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}

// Bounds-checked load: a value outside the h x w matrix reads as zero, so that the loading step
// holds the only boundary condition of a kernel (paper, section 4.1.2).
__device__ __forceinline__ float load_or_zero(const float* __restrict__ m, int h, int w, int r, int c) {
    return (r >= 0 && r < h && c >= 0 && c < w) ? __ldg(m + int64_t(r) * w + c) : 0.0f;
}

// overlap_span (one overlap's range of right indices) is in xcorr/core.hpp: the host uses it too.

// The pointer as an opaque register value. Without it the compiler keeps a matrix's start as the
// kernel parameter plus a 64-bit element offset and rebuilds each load or store address from both
// (about 9 instructions, the parameter reloaded from the constant bank each time); with it an
// address is one IMAD plus one IMAD.WIDE from this base. It hides the state space too: loads
// through __ldg stay global (LDG), plain loads and stores through it become generic (LD, ST).
template <class T>
__device__ __forceinline__ T* opaque_ptr(T* p) {
    asm("" : "+l"(p));
    return p;
}

// l * conj(r) * scale: the spectrum product of the FFT variants (correlation, not convolution).
__device__ __forceinline__ float2 mul_conj(float2 l, float2 r, float scale) {
    return make_float2((l.x * r.x + l.y * r.y) * scale, (l.y * r.x - l.x * r.y) * scale);
}

// Two real sequences a, b packed as z = a + i b, from its DFT Z (z = Z[k], zm = Z[n - k]):
// A[k] = (Z[k] + conj Z[n - k]) / 2 (even_part) and B[k] = (Z[k] - conj Z[n - k]) / 2i (odd_part).
// The FFT variants transform two real rows (or columns) as one complex sequence and split them so.
__device__ __forceinline__ float2 even_part(float2 z, float2 zm) {
    return make_float2(0.5f * (z.x + zm.x), 0.5f * (z.y - zm.y));
}
__device__ __forceinline__ float2 odd_part(float2 z, float2 zm) {
    return make_float2(0.5f * (z.y + zm.y), 0.5f * (zm.x - z.x));
}

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Blocks of `threads` for a grid-stride loop over n items: one item a thread, at most 65536 blocks
// (the loop covers the rest).
constexpr int grid_stride_blocks(int64_t n, int threads) {
    const int64_t blocks = ceil_div64(n, threads);
    return int(blocks < 65536 ? blocks : 65536);
}

// The FFT lengths: n whose only prime factors are 2, 3, 5 and 7 (those cuFFT and block_fft.cuh have
// fast kernels for), and the smallest such n >= need and >= 2 (cuFFT rejects a dimension of 1 in some
// layouts), even when asked (an even last dimension lets R2C run as a half-length complex FFT).
inline bool is_7_smooth(int64_t n) {
    if (n < 1) return false;
    for (int f : {2, 3, 5, 7})
        while (n % f == 0) n /= f;
    return n == 1;
}
inline int64_t fft_length(int64_t need, bool even) {
    int64_t n = need > 2 ? need : 2;
    while (!is_7_smooth(n) || (even && n % 2)) ++n;
    return n;
}

}  // namespace xcorr
