// Asynchronous copies global -> shared memory (cp.async, sm_80+), 4 bytes each, with zero fill:
// the staging of the shared-memory kernels (06, 20, 21, 22, 23). A copy with `valid` false reads
// nothing and writes a zero (src-size 0), which pads the staged tiles outside the matrices with no
// branch around the copy; callers then pass an address inside the matrix (its base), so that no
// address outside it is ever formed. `.ca`: cached in L1 too, since neighbouring blocks stage
// overlapping rows.
#pragma once

#include <cuda_runtime.h>

namespace xcorr {

__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
// Closes this thread's group of copies issued since the last commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// Waits for all of this thread's copies (committed or not).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

}  // namespace xcorr
