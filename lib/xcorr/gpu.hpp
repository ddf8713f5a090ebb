// Host-side GPU utilities shared by the tools: device checks and context, input generation,
// output poisoning and the L2 flush for cold-cache runs.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "xcorr/core.hpp"
#include "xcorr/device_buffer.hpp"

namespace xcorr {

struct GpuInfo {
    int device = 0;
    std::string name;
    int cc_major = 0, cc_minor = 0;
    int sm_count = 0;
    int sm_clock_mhz = 0;   // peak SM clock reported by the driver
    int mem_clock_mhz = 0;  // peak memory clock
    int64_t l2_bytes = 0;
    int64_t total_mem = 0;
    int driver_version = 0, runtime_version = 0, cufft_version = 0;
    int fp32_lanes_per_sm = 0;  // FP32 FMA units per SM for this compute capability
    double fp32_peak_flops() const { return 2.0 * sm_count * fp32_lanes_per_sm * sm_clock_mhz * 1e6; }
};

// The architectures this binary holds code for, as meson passed them ("90" or "80;90").
std::string built_archs();
// The architectures it also holds PTX for ("120" or ""), which the driver compiles for newer GPUs.
std::string built_ptx();
// Whether this binary holds SASS for compute capability cc (major * 10 + minor): sm_XY runs on X.Z, Z >= Y.
bool sass_for(int cc);
// Whether any of its code runs on cc: SASS for it, or PTX of cc or older.
bool runs_binary(int cc);
// How many CUDA devices are visible; throws NoGpuError, saying why (no driver, an old one), when none is.
int visible_gpu_count();
// Throws NoGpuError unless a CUDA GPU is present and this binary holds code for it.
// Selects device 0 (use CUDA_VISIBLE_DEVICES to choose another).
GpuInfo require_gpu();
// The same checks for the calling thread's current device, which stays current (the library's
// plans: a caller's cudaSetDevice is respected).
GpuInfo require_current_gpu();
// Checks that `bytes` of device memory can be allocated now; throws UsageError saying how much
// the problem needs and how much is free.
void require_free_memory(size_t bytes, const std::string& what);
// The same for host memory: a huge output must be refused, not OOM-killed or a std::bad_alloc.
// What is available is MemAvailable, or less where the process's limits on its address space
// (RLIMIT_AS, ulimit -v) or data (RLIMIT_DATA) leave less; `where` says which.
void require_host_memory(size_t bytes, const std::string& what);
size_t available_host_memory(std::string* where = nullptr);
// "Y GiB WHERE": what available_host_memory leaves, as the tools' out-of-memory errors say it.
std::string host_memory_left();
// require_host_memory's message: "not enough host memory: WHAT needs X GiB, Y GiB WHERE".
std::string host_memory_shortfall(size_t bytes, const std::string& what, size_t available, const std::string& where);

// Uniform values in [lo, hi) from a counter-based hash of (seed, index): the same inputs on any GPU.
// 24 random bits scaled by (hi - lo) in float, so hi itself can come out of the rounding when lo is
// large next to hi - lo; [0, 1) is exact. Throws UsageError unless lo < hi.
void fill_uniform(float* p, size_t n, uint64_t seed, cudaStream_t stream, float lo = 0.0f, float hi = 1.0f);
// Fills with NaN so that any element a variant fails to write shows up in validation.
void poison(float* p, size_t n, cudaStream_t stream);

// Launches an empty kernel: timed like a variant, it measures the launch floor that bounds every
// tiny problem (xcorr_bench --launch-floor).
void launch_empty_kernel(cudaStream_t stream);

// Evicts the L2 cache by writing a buffer of twice its size (cold-cache benchmarking).
class L2Flusher {
public:
    explicit L2Flusher(int64_t l2_bytes);
    void flush(cudaStream_t stream);

private:
    DeviceBuffer<char> buf_;
};

// The float64 GPU reference: the same obviously-correct loop as the CPU reference
// (reference.hpp), one thread per output element, accumulating in double, for any window and
// normalization (p.normalize; reference_element.hpp).
void reference_gpu(const Problem& p, const float* left, const float* right, double* out, cudaStream_t stream);
// The same values at n chosen output elements only (device array `positions` of flat indices into
// the output stack): out[j] is the reference at positions[j]. The same device function computes
// each element in both, so a sampled check is exactly the full one restricted to its positions.
void reference_gpu_at(const Problem& p, const float* left, const float* right, const int64_t* positions, size_t n,
                      double* out, cudaStream_t stream);
// zncc's matrix_variance (reference_element.hpp) of each of the nL matrices of lelems values at
// `left`, then of the nR of relems at `right` (device arrays), into var[0, nL + nR) (device): a
// block per matrix, a fixed order of sums (the same bits on every run, within rounding of the
// sequential loop's). The GPU references' matrix variances; xcorr_validate checks it against the
// CPU's loop.
void matrix_variances_gpu(const float* left, int nL, int64_t lelems, const float* right, int nR, int64_t relems,
                          double* var, cudaStream_t stream);
// dst[j] = src[positions[j]] for j < n (device arrays): a variant's output at the sampled positions.
void gather(const float* src, const int64_t* positions, size_t n, float* dst, cudaStream_t stream);

}  // namespace xcorr
