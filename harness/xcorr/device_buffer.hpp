// An owning device allocation (RAII), so that an exception thrown half-way through setting up a
// run frees what was already allocated.
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

}  // namespace xcorr
