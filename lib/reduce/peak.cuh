// The device half of a peak search that more than one kernel runs (kernels.cu's select_kernel on a
// map in device scratch, block-per-pair's fused k = 1 peak on the maps in its block's shared memory,
// fft-fused's peaks and tile maxima taken in its last pass): the candidate order, the warp's and
// the block's best, the candidate as an atomically mergeable key, the contract's three-point
// sub-pixel fit and the peak's record (docs/CONVENTIONS.md, "Reductions: peaks and maxima").
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "xcorr/reduce.hpp"

namespace xcorr::reduce {

// A candidate peak: its value and flat index in the map; "none" is (-inf, INT_MAX), which any value,
// even -inf, beats by its index. NaN is never a candidate (the callers skip it).
struct Cand {
    float v;
    int i;
};
__device__ __forceinline__ Cand none() { return Cand{-INFINITY, INT_MAX}; }
// The larger value; of equal values the smaller index (the contract's tie rule).
__device__ __forceinline__ Cand better(Cand a, Cand b) {
    return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a;
}
__device__ __forceinline__ Cand warp_best(Cand c) {
    for (int o = 16; o > 0; o >>= 1) {
        Cand d{__shfl_xor_sync(0xffffffffu, c.v, o), __shfl_xor_sync(0xffffffffu, c.i, o)};
        c = better(c, d);
    }
    return c;
}
// The block's best (blockDim.x a multiple of 32); every thread gets it. `sh` holds 32 candidates;
// every thread of the block must call it.
__device__ inline Cand block_best(Cand c, Cand* sh) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    c = warp_best(c);
    if (lane == 0) sh[warp] = c;
    __syncthreads();
    if (warp == 0) {
        c = lane < int(blockDim.x >> 5) ? sh[lane] : none();
        c = warp_best(c);
        if (lane == 0) sh[0] = c;
    }
    __syncthreads();
    const Cand r = sh[0];
    __syncthreads();  // sh is reused by the next call
    return r;
}

// A candidate as one 64-bit key whose unsigned order is the contract's (a maximum of keys is the
// best candidate, so atomicMax merges the partial answers of many blocks): the value's bits made
// monotone in the high word (-0 taken as +0, which compares equal to it), the index complemented in
// the low word. 0, below every value's key, is "no number yet" (NaN is never a candidate).
__device__ __forceinline__ unsigned long long peak_key(float v, int i) {
    unsigned u = __float_as_uint(v + 0.0f);  // -0 + 0 = +0
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (static_cast<unsigned long long>(u) << 32) | ~unsigned(i);
}
// The candidate of a key; none() for 0.
__device__ __forceinline__ Cand peak_of_key(unsigned long long key) {
    if (key == 0) return none();
    const unsigned u = unsigned(key >> 32);
    return Cand{__uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u), int(~unsigned(key))};
}
// The warp's largest key, every lane of the warp calling it (all 32). Two redux instructions from
// sm_80 (the high words' maximum, then the low words of the lanes that hold it), else shuffles.
__device__ __forceinline__ unsigned long long warp_max_key(unsigned long long k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned hi = __reduce_max_sync(0xffffffffu, unsigned(k >> 32));
    const unsigned lo = __reduce_max_sync(0xffffffffu, unsigned(k >> 32) == hi ? unsigned(k) : 0u);
    return (static_cast<unsigned long long>(hi) << 32) | lo;
#else
    for (int o = 16; o > 0; o >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, o));
    return k;
#endif
}

// The contract's three-point fit, in double (one thread per peak: its cost is nothing).
__device__ inline double fit(double cm, double c0, double cp, int s) {
    if (s == int(Subpixel::None)) return 0;
    if (s == int(Subpixel::Gaussian) && cm > 0 && c0 > 0 && cp > 0) cm = log(cm), c0 = log(c0), cp = log(cp);
    const double den = 2 * (cm - 2 * c0 + cp);
    if (den == 0 || !isfinite(den)) return 0;
    const double d = (cm - cp) / den;
    if (!isfinite(d)) return 0;
    return fmin(fmax(d, -0.5), 0.5);
}

// Peak a of one h x w map, candidate c (not none): value[a], shift[2a..] = (dy0 + y, dx0 + x),
// subpixel[2a..] = the shift plus the fit along each axis through at(y', x'), 0 on the map's edge.
// value[a] and shift[2a..] alone (select's rounds: the fits wait for the end, off the rounds' path).
__device__ __forceinline__ void write_shift(float* value, int32_t* shift, int a, Cand c, int w, int dy0, int dx0) {
    const int y = c.i / w, x = c.i - y * w;
    value[a] = c.v;
    shift[2 * a] = dy0 + y, shift[2 * a + 1] = dx0 + x;
}
// subpixel[2a..] alone (select's fits, after its rounds wrote value[a] and shift[2a..]).
template <class At>
__device__ void write_fit(float* subpixel, int a, Cand c, int h, int w, int dy0, int dx0, int method, At at) {
    const int y = c.i / w, x = c.i - y * w;
    const double dy = (y == 0 || y == h - 1) ? 0 : fit(at(y - 1, x), c.v, at(y + 1, x), method);
    const double dx = (x == 0 || x == w - 1) ? 0 : fit(at(y, x - 1), c.v, at(y, x + 1), method);
    subpixel[2 * a] = float(dy0 + y + dy), subpixel[2 * a + 1] = float(dx0 + x + dx);
}
template <class At>
__device__ void write_peak(float* value, int32_t* shift, float* subpixel, int a, Cand c, int h, int w, int dy0,
                           int dx0, int method, At at) {
    write_shift(value, shift, a, c, w, dy0, dx0);
    write_fit(subpixel, a, c, h, w, dy0, dx0, method, at);
}
// Peak a absent (the map holds fewer values than k that are numbers).
__device__ __forceinline__ void write_absent(float* value, int32_t* shift, float* subpixel, int a) {
    value[a] = NAN;
    shift[2 * a] = 0, shift[2 * a + 1] = 0;
    subpixel[2 * a] = NAN, subpixel[2 * a + 1] = NAN;
}

}  // namespace xcorr::reduce
