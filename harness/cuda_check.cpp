#include "xcorr/cuda_check.hpp"

#include "xcorr/device_buffer.hpp"

#include <string>

namespace xcorr {

int64_t& device_buffer_bytes() {
    static thread_local int64_t bytes = 0;
    return bytes;
}

void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
    cudaGetLastError();  // clear a sticky-free error so that later calls are not blamed for it
    std::string where = std::string(what) + " at " + file + ":" + std::to_string(line);
    std::string msg = std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
    if (err == cudaErrorMemoryAllocation)
        throw UsageError("not enough GPU memory for this problem (" + where + ")");
    if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver)
        throw NoGpuError("no usable CUDA GPU: " + msg);
    if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorUnsupportedPtxVersion)
        throw NoGpuError("this binary was not built for the GPU found (" + msg +
                         "); rebuild with -Dgpu_arch=<its compute capability>");
    throw CudaError(msg + " in " + where);
}

void throw_cufft_error(int result, const char* what, const char* file, int line) {
    std::string where = std::string(what) + " at " + file + ":" + std::to_string(line);
    if (result == 2 /* CUFFT_ALLOC_FAILED */)
        throw UsageError("not enough GPU memory for the cuFFT plan (" + where + ")");
    throw CudaError("cuFFT error " + std::to_string(result) + " in " + where);
}

}  // namespace xcorr
