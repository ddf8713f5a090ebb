// Programmatic dependent launch (sm_90 and later), shared by the variants that split their work
// into two kernels. A kernel launched with launch_dependent() may be scheduled before the kernel
// ahead of it on the stream has finished: it overlaps its launch latency and whatever work does
// not need the first kernel's results, and must call pdl_wait() before it reads them (the wait
// returns once the first grid has completed and its writes are visible). The first kernel calls
// pdl_launch_dependents() to let the second be scheduled as early as its resources allow. On
// older GPUs both are no-ops and the launch attribute only orders the kernels as usual.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "xcorr/cuda_check.hpp"

namespace xcorr {

__device__ __forceinline__ void pdl_launch_dependents() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent launch.
template <class... Params, class... Args>
void launch_dependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      Args&&... args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    XC_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
    XC_CHECK_LAUNCH();
}

}  // namespace xcorr
