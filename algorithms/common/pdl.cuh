// Programmatic dependent launch (sm_90 and later), shared by the variants that split their work
// into two kernels. A kernel launched with launch_dependent() may be scheduled before the kernel
// ahead of it on the stream has finished: it overlaps its launch latency and whatever work does
// not need the first kernel's results, and must call pdl_wait() before it reads them (the wait
// returns once the first grid has completed and its writes are visible). The first kernel calls
// pdl_launch_dependents() to let the second be scheduled as early as its resources allow. On
// older GPUs both are no-ops and the launch attribute only orders the kernels as usual. The host
// side, launch_dependent(), is algorithms/common/launch.cuh.
#pragma once

#include <cuda_runtime.h>

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

}  // namespace xcorr
