#include <cufft.h>
#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/device.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/gpu.hpp"
#include "xcorr/reference_element.hpp"

#ifndef XCORR_CUDA_ARCHS
#error "XCORR_CUDA_ARCHS must be defined by the build (e.g. \"90\" or \"80;90\")"
#endif

namespace xcorr {

std::string built_archs() { return XCORR_CUDA_ARCHS; }

namespace {

#ifndef XCORR_CUDA_PTX
#define XCORR_CUDA_PTX ""
#endif

std::vector<int> arch_list(const char* list = XCORR_CUDA_ARCHS) {
    std::vector<int> out;
    std::stringstream s(list);
    std::string item;
    while (std::getline(s, item, ';'))
        if (!item.empty()) out.push_back(std::stoi(item));
    return out;
}

// "80;90" -> "8.0, 9.0", as -Dgpu_arch spells them.
std::string archs_text() {
    std::string out;
    for (int a : arch_list()) out += (out.empty() ? "" : ", ") + std::to_string(a / 10) + "." + std::to_string(a % 10);
    for (int a : arch_list(XCORR_CUDA_PTX)) out += ", PTX " + std::to_string(a / 10) + "." + std::to_string(a % 10) + "+";
    return out;
}

// The driver's CUDA version and the one this build needs, as cudaDriverGetVersion spells them (13000).
std::string cuda_version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The oldest Linux driver of each CUDA major version (NVIDIA's CUDA Toolkit release notes, table 3).
std::string min_driver(int cuda_major) {
    switch (cuda_major) {
        case 12: return "525.60.13";
        case 13: return "580.65.06";
        default: return "";
    }
}

int fp32_lanes(int major, int minor) {
    if (major == 8 && minor == 0) return 64;   // A100
    if (major >= 8) return 128;                // GA10x, AD10x, H100/H200, Blackwell
    return 64;                                 // Volta, Turing
}

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__global__ void fill_uniform_kernel(float* p, size_t n, uint64_t seed, float lo, float span) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const float u = float(splitmix64(seed * 0x100000001b3ull ^ i) >> 40) * (1.0f / 16777216.0f);  // 24 bits
        p[i] = lo + span * u;  // exactly u for [0, 1): the benchmark's inputs are unchanged
    }
}

// The float64 value of output element i of the stack (flat index: k * oh * ow + y * ow + x, the
// window's sizes): reference_at (reference_element.hpp), the very function of the CPU reference
// (same terms, same order; a shift without overlap gives 0). The full and the sampled reference
// kernels both call it, so they cannot disagree.
// var: zncc's matrix_variance of every left, then every right (variance_kernel); null otherwise.
__device__ double reference_element(const float* __restrict__ left, const float* __restrict__ right, int hL, int wL,
                                    int hR, int wR, Window win, PairMap pairs, Normalize mode,
                                    const double* __restrict__ var, int64_t i) {
    const int oh = int(win.out_h()), ow = int(win.out_w());
    const int64_t k = i / (int64_t(oh) * ow);
    const int y = int(i / ow % oh), x = int(i % ow);
    const int l = pairs.left_of(k), r = pairs.right_of(k);
    const float* L = left + int64_t(l) * hL * wL;
    const float* R = right + int64_t(r) * hR * wR;
    const double vl = var ? var[l] : 0.0, vr = var ? var[pairs.nL + r] : 0.0;
    return reference_at(mode, L, R, hL, wL, hR, wR, win.dy0 + y, win.dx0 + x, vl, vr);
}

// matrix_variance of every left, then every right, a block of kVarianceThreads per matrix: its two
// passes (the numbers' mean, then their centred squares), each thread summing the elements
// i = t, t + kVarianceThreads, ... and the block adding the threads' sums in a fixed order
// (block_total), so the same bits on every run. Not matrix_variance's sequential order: within
// rounding of it (the sequential sum's own error grows with the count; xcorr_validate holds the two
// within 2n·2^-53), which is all that its one use, zncc's constant-part threshold, can tell. The
// sequential loop itself, a thread per matrix, reads a large image one dependent load at a time:
// seconds for a 4096 x 4096 one, longer than the case it checks.
constexpr int kVarianceThreads = 256;

// The sum of v over the block, in every thread: warp_sum's butterfly, then the warps' sums in
// order. Called by every thread of a block of kVarianceThreads.
template <class T>
__device__ T block_total(T v) {
    __shared__ T warps[kVarianceThreads / kWarp];
    v = warp_sum(v);
    __syncthreads();  // warps[] is reused by consecutive calls
    if (threadIdx.x % kWarp == 0) warps[threadIdx.x / kWarp] = v;
    __syncthreads();
    T total = 0;
    for (int w = 0; w < kVarianceThreads / kWarp; ++w) total += warps[w];
    return total;
}

__global__ void __launch_bounds__(kVarianceThreads)
    variance_kernel(const float* __restrict__ left, const float* __restrict__ right, int nL, int nR, int64_t lelems,
                    int64_t relems, double* __restrict__ var) {
    for (int64_t m = blockIdx.x; m < int64_t(nL) + nR; m += gridDim.x) {
        const float* X = m < nL ? left + m * lelems : right + (m - nL) * relems;
        const int64_t elems = m < nL ? lelems : relems;
        double s = 0;
        long long count = 0;
        for (int64_t i = threadIdx.x; i < elems; i += kVarianceThreads) {
            const float x = X[i];
            if (x == x) s += double(x), ++count;  // the numbers only, as matrix_variance
        }
        s = block_total(s);
        count = block_total(count);
        if (count == 0) {  // block-uniform
            if (threadIdx.x == 0) var[m] = 0.0;
            continue;
        }
        const double mean = s / double(count);
        double q = 0;
        for (int64_t i = threadIdx.x; i < elems; i += kVarianceThreads) {
            const float x = X[i];
            if (x == x) q += (double(x) - mean) * (double(x) - mean);
        }
        q = block_total(q);
        if (threadIdx.x == 0) var[m] = q / double(count);
    }
}

__global__ void reference_kernel(const float* __restrict__ left, const float* __restrict__ right,
                                 double* __restrict__ out, int hL, int wL, int hR, int wR, Window win, int64_t total,
                                 PairMap pairs, Normalize mode, const double* __restrict__ var) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x)
        out[i] = reference_element(left, right, hL, wL, hR, wR, win, pairs, mode, var, i);
}

__global__ void reference_at_kernel(const float* __restrict__ left, const float* __restrict__ right,
                                    const int64_t* __restrict__ positions, size_t n, double* __restrict__ out,
                                    int hL, int wL, int hR, int wR, Window win, PairMap pairs, Normalize mode,
                                    const double* __restrict__ var) {
    for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < n; j += size_t(gridDim.x) * blockDim.x)
        out[j] = reference_element(left, right, hL, wL, hR, wR, win, pairs, mode, var, positions[j]);
}

__global__ void gather_kernel(const float* __restrict__ src, const int64_t* __restrict__ positions, size_t n,
                              float* __restrict__ dst) {
    for (size_t j = blockIdx.x * size_t(blockDim.x) + threadIdx.x; j < n; j += size_t(gridDim.x) * blockDim.x)
        dst[j] = src[positions[j]];
}

__global__ void empty_kernel() {}

// Why cudaGetDeviceCount found no GPU. Without any driver it says "CUDA driver version is
// insufficient for CUDA runtime version", as it does for an old one: the driver library tells
// the two apart.
std::string no_gpu_reason(cudaError_t err) {
    if (err == cudaSuccess) return "no usable CUDA GPU found";
    const std::string needs = "CUDA " + cuda_version_text(CUDART_VERSION) +
                              (min_driver(CUDART_VERSION / 1000).empty() ? std::string()
                                  : ", NVIDIA driver " + min_driver(CUDART_VERSION / 1000) + " or newer");
    if (err == cudaErrorInsufficientDriver) {
        void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (!driver) return "no NVIDIA driver / no GPU on this machine (libcuda.so.1 not found; xcorr needs " + needs + ")";
        dlclose(driver);
        int have = 0;
        cudaDriverGetVersion(&have);
        return "the NVIDIA driver is too old: it supports CUDA " + (have ? cuda_version_text(have) : std::string("?")) +
               ", xcorr is built with " + needs + " (" + cudaGetErrorString(err) + ")";
    }
    return std::string("no usable CUDA GPU found (") + cudaGetErrorString(err) + ")";
}

}  // namespace

bool sass_for(int cc) {
    for (int a : arch_list())
        if (a / 10 == cc / 10 && a % 10 <= cc % 10) return true;
    return false;
}

bool runs_binary(int cc) {
    if (sass_for(cc)) return true;
    for (int a : arch_list(XCORR_CUDA_PTX))
        if (a <= cc) return true;
    return false;
}

std::string built_ptx() { return XCORR_CUDA_PTX; }

namespace {
// The checks of require_gpu for `device` (the count already checked), which is left as it is.
GpuInfo check_device(int device) {
    GpuInfo g;
    g.device = device;
    cudaDeviceProp prop{};
    XC_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    g.name = prop.name;
    g.cc_major = prop.major;
    g.cc_minor = prop.minor;
    g.sm_count = prop.multiProcessorCount;
    g.l2_bytes = prop.l2CacheSize;
    g.total_mem = int64_t(prop.totalGlobalMem);
    int khz = 0;
    XC_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device));
    g.sm_clock_mhz = khz / 1000;
    XC_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device));
    g.mem_clock_mhz = khz / 1000;
    XC_CUDA_CHECK(cudaDriverGetVersion(&g.driver_version));
    XC_CUDA_CHECK(cudaRuntimeGetVersion(&g.runtime_version));
    XC_CUFFT_CHECK(cufftGetVersion(&g.cufft_version));
    g.fp32_lanes_per_sm = fp32_lanes(g.cc_major, g.cc_minor);

    // SASS for sm_XY runs on compute capability X.Z with Z >= Y (same major); PTX for compute_XY
    // on every X.Y and later (the driver compiles it); nothing else runs.
    const int cc = g.cc_major * 10 + g.cc_minor;
    if (!runs_binary(cc))
        throw NoGpuError("this binary was built for compute capability " + archs_text() + " but the GPU (" +
                         g.name + ") is " + std::to_string(cc / 10) + "." + std::to_string(cc % 10) +
                         "; rebuild with -Dgpu_arch=" + std::to_string(cc / 10) + "." + std::to_string(cc % 10));
    return g;
}

}  // namespace

int visible_gpu_count() {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        cudaGetLastError();
        throw NoGpuError(no_gpu_reason(err));
    }
    return count;
}

GpuInfo require_gpu() {
    visible_gpu_count();
    XC_CUDA_CHECK(cudaSetDevice(0));
    return check_device(0);
}

GpuInfo require_current_gpu() {
    visible_gpu_count();
    int device = 0;
    XC_CUDA_CHECK(cudaGetDevice(&device));
    return check_device(device);
}

void require_free_memory(size_t bytes, const std::string& what) {
    size_t free_b = 0, total_b = 0;
    XC_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (bytes + (size_t(64) << 20) > free_b) {  // keep 64 MiB for the context and workspaces
        std::ostringstream s;
        s.precision(3);
        s << "not enough GPU memory: " << what << " needs " << double(bytes) / (1 << 30) << " GiB, "
          << double(free_b) / (1 << 30) << " GiB free of " << double(total_b) / (1 << 30);
        throw UsageError(s.str());
    }
}

namespace {

// A line of /proc/self/status such as "VmData:  1234 kB", in bytes; 0 where absent.
size_t status_bytes(const std::string& key) {
    std::ifstream f("/proc/self/status");
    std::string k;
    size_t kb = 0;
    while (f >> k) {
        if (k == key) return f >> kb ? kb * 1024 : 0;
        f.ignore(4096, '\n');
    }
    return 0;
}

// What is left under one of the process's limits (RLIMIT_AS against its address space, RLIMIT_DATA
// against its data), or SIZE_MAX without one. MemAvailable ignores these; past them an
// allocation fails (std::bad_alloc) however much memory the machine has.
size_t below_limit(int resource, const char* used_key) {
    struct rlimit r{};
    if (getrlimit(resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
    const size_t used = status_bytes(used_key);
    return size_t(r.rlim_cur) > used ? size_t(r.rlim_cur) - used : 0;
}

}  // namespace

namespace {
std::string gib(size_t bytes) {
    std::ostringstream s;
    s.precision(3);
    s << double(bytes) / (1 << 30) << " GiB";
    return s.str();
}
}  // namespace

std::string host_memory_shortfall(size_t bytes, const std::string& what, size_t available, const std::string& where) {
    return "not enough host memory: " + what + " needs " + gib(bytes) + ", " + gib(available) + " " + where;
}

size_t available_host_memory(std::string* where) {
    size_t available = SIZE_MAX;
    std::string from = "available";
    std::ifstream f("/proc/meminfo");
    std::string key;
    size_t kb = 0;
    while (f >> key >> kb) {
        if (key == "MemAvailable:") {
            available = kb * 1024;
            break;
        }
        f.ignore(256, '\n');
    }
    if (const size_t as = below_limit(RLIMIT_AS, "VmSize:"); as < available)
        available = as, from = "left under the process's address-space limit (ulimit -v)";
    if (const size_t data = below_limit(RLIMIT_DATA, "VmData:"); data < available)
        available = data, from = "left under the process's data limit (ulimit -d)";
    if (where) *where = from;
    return available;
}

std::string host_memory_left() {
    std::string where;
    const size_t available = available_host_memory(&where);
    return gib(available) + " " + where;
}

void require_host_memory(size_t bytes, const std::string& what) {
    std::string where;
    const size_t available = available_host_memory(&where);
    if (bytes > available) throw UsageError(host_memory_shortfall(bytes, what, available, where));
}

void fill_uniform(float* p, size_t n, uint64_t seed, cudaStream_t stream, float lo, float hi) {
    if (!(lo < hi)) throw UsageError("fill_uniform: empty range [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    if (!n) return;
    fill_uniform_kernel<<<grid_stride_blocks(n, 256), 256, 0, stream>>>(p, n, seed, lo, hi - lo);
    XC_CHECK_LAUNCH();
}

void launch_empty_kernel(cudaStream_t stream) {
    empty_kernel<<<1, 32, 0, stream>>>();
    XC_CHECK_LAUNCH();
}

void poison(float* p, size_t n, cudaStream_t stream) {
    XC_CUDA_CHECK(cudaMemsetAsync(p, 0xff, n * sizeof(float), stream));  // 0xffffffff is a NaN
}

L2Flusher::L2Flusher(int64_t l2_bytes) : buf_(size_t(std::max<int64_t>(l2_bytes, 1 << 20)) * 2) {}

void L2Flusher::flush(cudaStream_t stream) {
    XC_CUDA_CHECK(cudaMemsetAsync(buf_.get(), 0, buf_.bytes(), stream));
}

void matrix_variances_gpu(const float* left, int nL, int64_t lelems, const float* right, int nR, int64_t relems,
                          double* var, cudaStream_t stream) {
    if (int64_t(nL) + nR == 0) return;
    variance_kernel<<<int(std::min<int64_t>(int64_t(nL) + nR, 65536)), kVarianceThreads, 0, stream>>>(
        left, right, nL, nR, lelems, relems, var);
    XC_CHECK_LAUNCH();
}

namespace {
// zncc's per-matrix variances (matrix_variances_gpu) in a buffer that lives until the stream has
// used it (the reference kernels are enqueued, not waited for: freeing synchronizes first); empty
// for the other normalizations.
DeviceBuffer<double> matrix_variances(const Problem& p, const float* left, const float* right, cudaStream_t stream) {
    if (p.normalize != Normalize::Zncc) return {};
    DeviceBuffer<double> var(size_t(p.nL) + p.nR);
    matrix_variances_gpu(left, p.nL, int64_t(p.hL) * p.wL, right, p.nR, int64_t(p.hR) * p.wR, var.get(), stream);
    return var;
}
}  // namespace

void reference_gpu(const Problem& p, const float* left, const float* right, double* out, cudaStream_t stream) {
    const DeviceBuffer<double> var = matrix_variances(p, left, right, stream);
    reference_kernel<<<grid_stride_blocks(p.out_elems(), 256), 256, 0, stream>>>(
        left, right, out, p.hL, p.wL, p.hR, p.wR, p.shifts(), p.out_elems(), pair_map(p), p.normalize, var.get());
    XC_CHECK_LAUNCH();
    if (var.get()) XC_CUDA_CHECK(cudaStreamSynchronize(stream));  // var is freed on return
}

void reference_gpu_at(const Problem& p, const float* left, const float* right, const int64_t* positions, size_t n,
                      double* out, cudaStream_t stream) {
    if (!n) return;
    const DeviceBuffer<double> var = matrix_variances(p, left, right, stream);
    reference_at_kernel<<<grid_stride_blocks(n, 128), 128, 0, stream>>>(left, right, positions, n, out, p.hL, p.wL, p.hR,
                                                               p.wR, p.shifts(), pair_map(p), p.normalize, var.get());
    XC_CHECK_LAUNCH();
    if (var.get()) XC_CUDA_CHECK(cudaStreamSynchronize(stream));  // var is freed on return
}

void gather(const float* src, const int64_t* positions, size_t n, float* dst, cudaStream_t stream) {
    if (!n) return;
    gather_kernel<<<grid_stride_blocks(n, 256), 256, 0, stream>>>(src, positions, n, dst);
    XC_CHECK_LAUNCH();
}

}  // namespace xcorr
