// An owning device allocation, stream and event (RAII), so that an exception thrown half-way
// through setting up a run frees what was already allocated.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "xcorr/cuda_check.hpp"

namespace xcorr {

// Bytes of device memory that DeviceBuffers allocated minus those they freed, on the calling thread
// (a plan's workspace is the difference around Variant::make, so it is per thread: plans built
// concurrently on other threads do not count; a buffer freed on another thread than the one that
// allocated it skews both threads' totals, which no plan does).
int64_t& device_buffer_bytes();

template <typename T>
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    explicit DeviceBuffer(size_t count) : count_(count) {
        if (count) {
            XC_CUDA_CHECK(cudaMalloc(&ptr_, count * sizeof(T)));
            device_buffer_bytes() += int64_t(count * sizeof(T));
        }
    }
    ~DeviceBuffer() {
        if (ptr_) {
            cudaFree(ptr_);
            device_buffer_bytes() -= int64_t(count_ * sizeof(T));
        }
    }
    DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(o.count_) {}
    DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
        std::swap(ptr_, o.ptr_);
        std::swap(count_, o.count_);
        return *this;
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    T* get() const { return ptr_; }
    size_t size() const { return count_; }
    size_t bytes() const { return count_ * sizeof(T); }

private:
    T* ptr_ = nullptr;
    size_t count_ = 0;
};

// A non-blocking stream; destroyed only after its work is done, so that buffers declared before it
// (destroyed after it) are freed once nothing in flight touches them.
struct Stream {
    cudaStream_t s = nullptr;
    Stream() { XC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
    ~Stream() {
        cudaStreamSynchronize(s);
        cudaStreamDestroy(s);
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
};

// An event without timing (ordering between streams).
struct Event {
    cudaEvent_t e = nullptr;
    Event() { XC_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
    ~Event() { cudaEventDestroy(e); }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
};

// Copies `n` elements from host memory into the start of `dst` and returns only once they are in
// device memory: how a plan uploads its tables (work items, tile orders) when it is built. A plain
// cudaMemcpy from pageable memory does not do that: it returns once the data is staged, "but the
// DMA to final destination may not have completed" (CUDA, "API synchronization behavior"), and the
// copy is ordered only on the default stream, which a non-blocking stream does not wait for (the
// tools run on one; so may any caller). A kernel launched there right after could read the
// allocation's previous contents: the one explanation left (host emulation, no GPU repro yet) for
// register-tiled's wrong windows beside another process on the GPU. Synchronising the default stream (the per-thread one where the
// build makes it the default, as cudaMemcpy then uses it) waits for the copy itself.
template <typename T>
void upload(DeviceBuffer<T>& dst, const T* src, size_t n) {
    if (n == 0) return;
    XC_CUDA_CHECK(cudaMemcpy(dst.get(), src, n * sizeof(T), cudaMemcpyHostToDevice));
    XC_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

}  // namespace xcorr
