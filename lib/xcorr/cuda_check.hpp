// Checking every CUDA and cuFFT call and every launch. A failed call throws, with the call's text
// and location, so no error is silently dropped: the tools turn the exception into one line on
// stderr and a non-zero exit status, the benchmark into a skipped benchmark with the message.
#pragma once

#include <cuda_runtime.h>

#include <exception>
#include <string>

#include "xcorr/core.hpp"

namespace xcorr {

// Throws: UsageError for cudaErrorMemoryAllocation (the problem is too large for this GPU),
// NoGpuError for "no device" and "no kernel image for this device", CudaError otherwise.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line);
[[noreturn]] void throw_cufft_error(int result, const char* what, const char* file, int line);

// Whether e says the GPU's memory ran out: the UsageErrors above ("not enough GPU memory ..."), the
// FFT variants' own budget refusals (worded the same), and the runtime's or cuFFT's text.
bool out_of_memory(const std::exception& e);

}  // namespace xcorr

#define XC_CUDA_CHECK(call)                                                          \
    do {                                                                             \
        cudaError_t xc_err_ = (call);                                                \
        if (xc_err_ != cudaSuccess)                                                  \
            ::xcorr::throw_cuda_error(xc_err_, #call, __FILE__, __LINE__);           \
    } while (0)

// After every kernel launch: catches bad launch configurations at once (asynchronous faults
// surface at the next synchronising call, which is checked too).
#define XC_CHECK_LAUNCH()                                                            \
    do {                                                                             \
        cudaError_t xc_err_ = cudaGetLastError();                                    \
        if (xc_err_ != cudaSuccess)                                                  \
            ::xcorr::throw_cuda_error(xc_err_, "kernel launch", __FILE__, __LINE__); \
    } while (0)

#define XC_CUFFT_CHECK(call)                                                         \
    do {                                                                             \
        int xc_res_ = int(call);                                                     \
        if (xc_res_ != 0) ::xcorr::throw_cufft_error(xc_res_, #call, __FILE__, __LINE__); \
    } while (0)

namespace xcorr {

// Raises `kernel`'s limit of dynamic shared memory a block to `bytes`, never lowers it: the limit is
// the kernel's, not a plan's, so a plan that needs less must not take it from one made before it
// (whose launches would then fail).
template <typename K>
void raise_dynamic_smem_limit(K kernel, size_t bytes) {
    cudaFuncAttributes now{};
    XC_CUDA_CHECK(cudaFuncGetAttributes(&now, kernel));
    if (bytes > size_t(now.maxDynamicSharedSizeBytes))
        XC_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

}  // namespace xcorr
