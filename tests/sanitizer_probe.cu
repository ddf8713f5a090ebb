// xcorr_sanitizer_probe MODE: one planted defect per compute-sanitizer tool, the positive control of
// scripts/sanitize. A tool whose clean verdict on the variants is to mean anything must first report
// the defect planted here, under the same options (racecheck's kernel filter among them): a tool
// that sees nothing here (a filter matching none of our kernels, a tool that did not attach) would
// call every variant clean.
//
//   race    a shared-memory race between two warps (racecheck): each thread writes its slot and,
//           with no barrier between, reads the slot of the thread 32 places on, in the other warp
//   oob     a global write one element past the end of an allocation (memcheck)
//   uninit  a read of device memory that nothing wrote (initcheck)
//   clean   the same three kernels without their defects: every tool reports nothing
//
// The kernels live in namespace xcorr, as every kernel of the library does, so that racecheck's
// filter (--kernel-name kns=xcorr, scripts/sanitize) selects them as it selects ours. Exit 0 once
// the kernels have run (the tool's report and exit code are the result), 2 on bad usage, 3
// without a GPU.
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

namespace xcorr {
namespace probe {

constexpr int kThreads = 64;  // two warps

__global__ void shared_race_kernel(float* out, bool race) {
    __shared__ float slot[kThreads];
    const int t = threadIdx.x;
    slot[t] = float(t) + 1.0f;
    if (!race) __syncthreads();
    out[t] = slot[(t + 32) % kThreads];  // the other warp's slot
}

__global__ void write_kernel(float* out, int n, bool past_end) {
    const int t = threadIdx.x;
    if (t < n) out[t] = 1.0f;
    if (past_end && t == 0) out[n] = 2.0f;  // one element past the allocation
}

__global__ void sum_kernel(const float* in, int n, float* out) {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += in[i];
    *out = s;
}

}  // namespace probe
}  // namespace xcorr

int main(int argc, char** argv) {
    using namespace xcorr::probe;
    const char* mode = argc == 2 ? argv[1] : "";
    const bool clean = !std::strcmp(mode, "clean");
    if (!clean && std::strcmp(mode, "race") && std::strcmp(mode, "oob") && std::strcmp(mode, "uninit")) {
        std::fprintf(stderr, "usage: xcorr_sanitizer_probe race|oob|uninit|clean\n");
        return 2;
    }
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::fprintf(stderr, "xcorr_sanitizer_probe: no GPU\n");
        return 3;
    }
    float *a = nullptr, *b = nullptr;
    cudaMalloc(&a, kThreads * sizeof(float));
    cudaMalloc(&b, kThreads * sizeof(float));
    cudaMemset(b, 0, kThreads * sizeof(float));
    shared_race_kernel<<<1, kThreads>>>(b, !std::strcmp(mode, "race"));
    write_kernel<<<1, kThreads>>>(b, kThreads, !std::strcmp(mode, "oob"));  // b holds kThreads floats
    if (clean) cudaMemset(a, 0, kThreads * sizeof(float));
    if (clean || !std::strcmp(mode, "uninit")) sum_kernel<<<1, 1>>>(a, kThreads, b);
    const cudaError_t e = cudaDeviceSynchronize();
    std::printf("xcorr_sanitizer_probe %s: kernels ran (%s)\n", mode, cudaGetErrorString(e));
    cudaFree(a);
    cudaFree(b);
    return 0;
}
