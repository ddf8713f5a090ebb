// Asynchronous copies global -> shared memory (cp.async, sm_80+), 4 bytes each, with zero fill:
// the staging of the shared-memory kernels (06, 20, 21, 22, 23); 8 and 16 bytes without (53). A copy
// with `valid` false reads nothing and writes a zero (src-size 0), which pads the staged tiles
// outside the matrices with no branch around the copy; callers then pass an address inside the
// matrix (its base), so that no address outside it is ever formed. `.ca`: cached in L1 too, since
// neighbouring blocks stage overlapping rows. Also an L2 prefetch (51's persistent blocks, their
// next matrix).
// Before sm_80 (Turing, sm_75: the wheel's oldest architecture) there is no cp.async: the copy is an
// ordinary load and store, complete when it returns, and commit and wait have nothing to do; the
// callers' barriers publish the stores as they publish the asynchronous copies'.
#pragma once

#include <cuda_runtime.h>

namespace xcorr {

__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    *dst = valid ? *src : 0.0f;
#else
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0) : "memory");
#endif
}
// 8 bytes (a complex float), always read: fft-large's row pass stages the next rights' coefficients.
__device__ __forceinline__ void cp_async8(float2* dst, const float2* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    *dst = *src;
#else
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src) : "memory");
#endif
}
// 16 bytes (two complex floats), always read, through the L2 alone (`.cg`): fft-large's row pass
// stages two rights' coefficients, interleaved, which no other block of the multiprocessor reads.
__device__ __forceinline__ void cp_async16(float4* dst, const float4* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
    *dst = *src;
#else
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
#endif
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
__device__ __forceinline__ void cp_async_commit() {}
template <int N>
__device__ __forceinline__ void cp_async_wait() {}
__device__ __forceinline__ void cp_async_wait_all() {}
#else
// Closes this thread's group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// Waits for all of this thread's copies (committed or not).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
#endif

// A hint: bring the bytes [p, p + n) of global memory into the L2, where a later read will find
// them (sm_90: one bulk prefetch by the calling thread, no registers or shared memory held; older
// GPUs: nothing). Only the 16-byte-aligned part inside the range is prefetched, so no address
// outside it is formed.
__device__ __forceinline__ void prefetch_l2(const void* p, size_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const size_t a = (size_t(p) + 15) & ~size_t(15), b = (size_t(p) + n) & ~size_t(15);
    if (b > a) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(a), "r"(unsigned(b - a)));
#endif
}

}  // namespace xcorr
