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

bool out_of_memory(const std::exception& e) {
    const std::string w = e.what();
    return w.find("out of memory") != std::string::npos || w.find("not enough GPU memory") != std::string::npos ||
           w.find("ALLOC_FAILED") != std::string::npos;
}

namespace {
// cufftResult's names (cufft.h), so that a failure says which one without the header at hand.
const char* cufft_result_name(int result) {
    static const char* const names[] = {"CUFFT_SUCCESS",        "CUFFT_INVALID_PLAN",    "CUFFT_ALLOC_FAILED",
                                        "CUFFT_INVALID_TYPE",   "CUFFT_INVALID_VALUE",   "CUFFT_INTERNAL_ERROR",
                                        "CUFFT_EXEC_FAILED",    "CUFFT_SETUP_FAILED",    "CUFFT_INVALID_SIZE",
                                        "CUFFT_UNALIGNED_DATA", "CUFFT_INCOMPLETE_PARAMETER_LIST",
                                        "CUFFT_INVALID_DEVICE", "CUFFT_PARSE_ERROR",     "CUFFT_NO_WORKSPACE",
                                        "CUFFT_NOT_IMPLEMENTED", "CUFFT_LICENSE_ERROR",  "CUFFT_NOT_SUPPORTED"};
    return result >= 0 && result < int(sizeof(names) / sizeof(names[0])) ? names[result] : "an unknown cufftResult";
}
}  // namespace

void throw_cufft_error(int result, const char* what, const char* file, int line) {
    std::string where = std::string(what) + " at " + file + ":" + std::to_string(line);
    if (result == 2 /* CUFFT_ALLOC_FAILED */)
        throw UsageError("not enough GPU memory for the cuFFT plan (" + where + ")");
    std::string msg = "cuFFT error " + std::to_string(result) + " (" + cufft_result_name(result) + ") in " + where;
    // Seen on an 80 GB H100 for 300 transforms of an 8.64 M-sample signal, which the 141 GB H200
    // plans: cuFFT can report a plan too large for the free memory as an internal error.
    if (result == 5 && std::string(what).find("Plan") != std::string::npos) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
            msg += " (creating a plan; " + std::to_string(free_b >> 20) + " of " + std::to_string(total_b >> 20) +
                   " MiB of GPU memory free: a plan larger than that is reported this way too)";
        else
            cudaGetLastError();
    }
    throw CudaError(msg);
}

}  // namespace xcorr
