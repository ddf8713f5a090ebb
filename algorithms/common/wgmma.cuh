// Hopper warpgroup MMA (wgmma, sm_90a) helpers for algorithms/26_tensor_wgmma.cu: the
// shared-memory matrix descriptor of a K-major operand without swizzling, and the m64n64k8 TF32
// MMA with A from registers. The host-side check that the GPU and the binary have it,
// require_wgmma(), is algorithms/common/launch.cuh.
// The device functions exist only where the compiler targets sm_90a (__CUDA_ARCH_FEAT_SM90_ALL);
// callers guard their kernels the same way and trap elsewhere.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace xcorr {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Descriptor of a K-major operand in shared memory without swizzling (PTX ISA, "Matrix Descriptor
// Format"): core matrices of 8 rows x 16 bytes stored contiguously (128 B); `lbo` bytes between
// the core matrices along K, `sbo` bytes between those along M or N (the next 8 rows).
__device__ __forceinline__ uint64_t smem_desc(const void* p, uint32_t lbo, uint32_t sbo) {
    const uint32_t a = uint32_t(__cvta_generic_to_shared(p));
    return uint64_t((a & 0x3ffff) >> 4) | uint64_t((lbo & 0x3ffff) >> 4) << 16 | uint64_t((sbo & 0x3ffff) >> 4) << 32;
}

// Orders this thread's register and shared-memory writes before the warpgroup's next wgmma.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Wait until at most N committed groups of this warpgroup are still in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Ordinary shared-memory stores made visible to the tensor cores' (async proxy) reads: each
// writing thread, before the barrier that publishes them.
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// D(64 x 64) += A(64 x 8) * B(8 x 64), TF32 in, FP32 accumulate, issued by the 4 warps of a
// warpgroup. A from registers: warp w holds rows 16w .. 16w + 15 in mma.sync's m16n8k8 layout
// (a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4); g = lane / 4, t = lane % 4). B: K-major
// in shared memory (descriptor b). D: per n tile j of 8 columns, d[4j .. 4j+3] = (g, 8j+2t),
// (g, 8j+2t+1), (g+8, 8j+2t), (g+8, 8j+2t+1) of the warp's 16 rows.
__device__ __forceinline__ void wgmma_m64n64k8_tf32(float (&d)[32], const uint32_t (&a)[4], uint64_t b) {
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, 1, 1, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));
}
#endif

}  // namespace xcorr
