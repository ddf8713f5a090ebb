// A raw windowed problem on the parts of the inputs its window touches (xcorr/crop.hpp).
#include <algorithm>
#include <utility>

#include "common/device.cuh"
#include "xcorr/crop.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"

namespace xcorr {

namespace {

// y[m][r][c] = x[m][r0 + r][c0 + c] for the count matrices of a stack (h x w each) and a crop of
// ch x cw at (r0, c0).
// gather_flat_kernel (crops of fewer than 2^31 elements: all but inputs of many GB): the crop's
// elements in row-major order, blockIdx.y striding over slices of kGatherAhead x 256 elements of
// matrix blockIdx.x (striding over the count); each thread keeps kGatherAhead loads in flight
// before its stores, the row of an element by FastDiv. Why: the old mapping below gave every
// (32-column, 8-row) tile of every crop a block of one element per thread, so zncc_frames' 1000
// crops of 39 x 37 took 10,000 blocks, half their lanes idle (37 columns in two 32-column tiles),
// and several times the memory floor of their few megabytes (the measurements: notes/probes.md,
// ncu-zncc-frames and crop-gather-store-norm).
// gather_kernel (any crop): block (32, 8): a warp copies 32 adjacent columns of one row
// (coalesced reads and writes); grid (columns, rows, matrices), each dimension striding (a
// signal's one row of millions of columns, stacks beyond 65535). Resources: registers only.
__global__ void gather_kernel(const float* __restrict__ x, int64_t count, int h, int w, int r0, int c0, int ch,
                              int cw, float* __restrict__ y) {
    for (int64_t m = blockIdx.z; m < count; m += gridDim.z)
        for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < ch; r += gridDim.y * blockDim.y) {
            const float* src = x + (m * h + r0 + r) * int64_t(w) + c0;
            float* dst = y + (m * ch + r) * int64_t(cw);
            for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < cw; c += gridDim.x * blockDim.x) dst[c] = src[c];
        }
}

constexpr int kGatherThreads = 256;
constexpr int kGatherAhead = 4;
constexpr unsigned kGatherSlice = kGatherAhead * kGatherThreads;  // elements per block per step
__global__ void __launch_bounds__(kGatherThreads) gather_flat_kernel(const float* __restrict__ x, int64_t count,
                                                                     int h, int w, int r0, int c0, int cw,
                                                                     unsigned n, FastDiv by_cw,
                                                                     float* __restrict__ y) {
    for (int64_t m = blockIdx.x; m < count; m += gridDim.x) {
        const float* src = x + (m * h + r0) * int64_t(w) + c0;
        float* dst = y + m * int64_t(n);
        for (unsigned i0 = blockIdx.y * kGatherSlice + threadIdx.x; i0 < n; i0 += gridDim.y * kGatherSlice) {
            float v[kGatherAhead];
#pragma unroll
            for (int u = 0; u < kGatherAhead; ++u) {
                const unsigned i = i0 + u * kGatherThreads;
                if (i < n) {
                    const unsigned r = by_cw.div(i);
                    v[u] = src[int64_t(r) * w + (i - r * unsigned(cw))];
                }
            }
#pragma unroll
            for (int u = 0; u < kGatherAhead; ++u)
                if (const unsigned i = i0 + u * kGatherThreads; i < n) dst[i] = v[u];
        }
    }
}

void gather(const float* x, int count, int h, int w, const Region& r, float* y, cudaStream_t stream) {
    const int64_t n = int64_t(r.h()) * r.w();
    if (n == 0 || count == 0) return;  // nothing to copy (and no empty grid to launch)
    if (n < (int64_t(1) << 31)) {
        const dim3 grid(unsigned(std::min(count, 65535)),
                        unsigned(std::min<int64_t>(ceil_div(n, int64_t(kGatherSlice)), 65535)));
        gather_flat_kernel<<<grid, kGatherThreads, 0, stream>>>(x, count, h, w, r.r0, r.c0, r.w(), unsigned(n),
                                                                FastDiv(unsigned(r.w())), y);
    } else {
        const dim3 block(32, 8);
        const dim3 grid(unsigned(std::min(ceil_div(r.w(), 32), 1024)), unsigned(std::min(ceil_div(r.h(), 8), 65535)),
                        unsigned(std::min(count, 65535)));
        gather_kernel<<<grid, block, 0, stream>>>(x, count, h, w, r.r0, r.c0, r.h(), r.w(), y);
    }
    XC_CHECK_LAUNCH();
}

// The variant's instance of the cropped problem behind the copies of the crops. A stack whose crop
// is the whole matrices is passed through without a copy.
class CroppedInstance final : public Instance {
public:
    CroppedInstance(std::unique_ptr<Instance> inner, const Problem& p, const NormalizeCrop& crop)
        : inner_(std::move(inner)), p_(p), crop_(crop),
          lwhole_(crop.left == Region{0, p.hL, 0, p.wL}), rwhole_(crop.right == Region{0, p.hR, 0, p.wR}) {
        if (!lwhole_) left_ = DeviceBuffer<float>(size_t(p.nL) * crop.left.h() * crop.left.w());
        if (!rwhole_) right_ = DeviceBuffer<float>(size_t(p.nR) * crop.right.h() * crop.right.w());
    }
    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        const auto [l, r] = crops(left, right, stream);
        inner_->run(l, r, out, stream);
    }
    bool has_finish() const override { return inner_->has_finish(); }
    void finish(float* out, cudaStream_t stream) override { inner_->finish(out, stream); }
    size_t external_device_bytes() const override { return inner_->external_device_bytes(); }
    // The cropped problem's window is the same outputs in the same layout: its peaks are the
    // window's, the shifts counted from the caller's sink.
    bool takes_peak1() const override { return inner_->takes_peak1(); }
    void run_peak1(const float* left, const float* right, const PeakSink& sink, cudaStream_t stream) override {
        const auto [l, r] = crops(left, right, stream);
        inner_->run_peak1(l, r, sink, stream);
    }

private:
    // What the inner instance reads: the crops, copied (enqueued on `stream`), or the caller's
    // stacks where a crop is the whole matrices.
    std::pair<const float*, const float*> crops(const float* left, const float* right, cudaStream_t stream) {
        if (!lwhole_) gather(left, p_.nL, p_.hL, p_.wL, crop_.left, left_.get(), stream);
        if (!rwhole_) gather(right, p_.nR, p_.hR, p_.wR, crop_.right, right_.get(), stream);
        return {lwhole_ ? left : left_.get(), rwhole_ ? right : right_.get()};
    }

    std::unique_ptr<Instance> inner_;
    Problem p_;
    NormalizeCrop crop_;
    bool lwhole_, rwhole_;
    DeviceBuffer<float> left_, right_;
};

}  // namespace

std::unique_ptr<Instance> make_on_crops(const Variant& variant, const Problem& cropped, const Params& params) {
    // A refusal is no error here: the whole inputs are what the variant was asked for.
    try {
        cropped.check();
        if (!variant.supports_problem(cropped)) return nullptr;
        return variant.make(cropped, params);
    } catch (const UsageError&) {
        return nullptr;
    }
}

bool tries_raw_crop(const Variant& variant, const Problem& p) {
    if (!variant.crop_windows || p.normalize != Normalize::None) return false;
    const NormalizeCrop c = touched_crop(p);
    return !c.empty() && !c.whole(p);
}

std::unique_ptr<Instance> make_raw_instance(const Variant& variant, const Problem& p, const Params& params) {
    if (tries_raw_crop(variant, p)) {
        const NormalizeCrop c = touched_crop(p);
        if (std::unique_ptr<Instance> inner = make_on_crops(variant, c.raw(p), params))
            return std::make_unique<CroppedInstance>(std::move(inner), p, c);
    }
    return variant.make(p, params);
}

}  // namespace xcorr
