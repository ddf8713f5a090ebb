// block-per-overlap: one thread block per output element (thesis, section 3.6.8 "block per shift").
//
// The thesis's last occupancy step: the worker grows from a warp to a whole block, so even tiny
// problems start many threads. The paper dropped it (no data reuse, most threads idle on the
// small corner overlaps); it is kept here for the comparison.
#include <algorithm>

#include "common/device.cuh"
#include "xcorr/cuda_check.hpp"
#include "xcorr/dispatch.hpp"
#include "xcorr/registry.hpp"

namespace xcorr::block_per_overlap {
namespace {

constexpr int kUnroll = 4;  // loads in flight per thread and loop trip

// Work mapping. Block blockIdx.x computes output element blockIdx.x (row-major), i.e. one shift.
// Its THREADS threads take the overlap's nr x nc products round-robin in row-major order (a
// block-stride loop: thread t takes products t, t + THREADS, ...), walked with a precomputed step
// (THREADS = q * nc + s) so that the loop holds no division. Each warp reduces its partial sums with
// shuffles, warp 0 reduces the per-warp sums from shared memory and writes the element.
// blockIdx.y strides over the output matrices of the stack (PairMap picks the pair).
template <int THREADS>
__global__ void __launch_bounds__(THREADS)
    block_per_overlap_kernel(const float* __restrict__ left, const float* __restrict__ right,
                             float* __restrict__ out, int hL, int wL, int hR, int wR, int64_t count,
                             PairMap pairs) {
    constexpr int kWarps = THREADS / kWarp;
    __shared__ float partial[kWarps];
    const int out_w = wL + wR - 1, out_h = hL + hR - 1;
    const int tid = threadIdx.x;
    const int y = blockIdx.x / out_w, x = blockIdx.x - y * out_w;
    const int dy = y - (hR - 1), dx = x - (wR - 1);
    const Span rows = overlap_span(dy, hL, hR), cols = overlap_span(dx, wL, wR);
    const int nc = cols.end - cols.begin;
    const int total = (rows.end - rows.begin) * nc;
    const int trips = total > tid ? (total - tid + THREADS - 1) / THREADS : 0;

    const int r0 = tid / nc, c0 = tid - r0 * nc;
    const int step_r = THREADS / nc, step_c = THREADS - step_r * nc;
    const int start_l = (rows.begin + r0 + dy) * wL + cols.begin + c0 + dx;
    const int start_r = (rows.begin + r0) * wR + cols.begin + c0;
    const int step_l = step_r * wL + step_c, step_rr = step_r * wR + step_c;
    const int wrap_l = wL - nc, wrap_r = wR - nc;

    for (int64_t k = blockIdx.y; k < count; k += gridDim.y) {
        const float* __restrict__ L = left + int64_t(pairs.left_of(k)) * hL * wL;
        const float* __restrict__ R = right + int64_t(pairs.right_of(k)) * hR * wR;
        int ol = start_l, orr = start_r, c = c0;
        float acc[kUnroll] = {};
        for (int t = 0; t < trips; t += kUnroll) {
            float a[kUnroll], b[kUnroll];
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) {
                a[u] = t + u < trips ? __ldg(L + ol) : 0.0f;  // offsets past the end are never read
                b[u] = t + u < trips ? __ldg(R + orr) : 0.0f;
                ol += step_l;
                orr += step_rr;
                c += step_c;
                if (c >= nc) {
                    c -= nc;
                    ol += wrap_l;
                    orr += wrap_r;
                }
            }
#pragma unroll
            for (int u = 0; u < kUnroll; ++u) acc[u] = fmaf(a[u], b[u], acc[u]);
        }
        float sum = 0.0f;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) sum += acc[u];
        sum = warp_sum(sum);
        if (tid % kWarp == 0) partial[tid / kWarp] = sum;
        __syncthreads();
        if (tid < kWarp) {
            float v = tid < kWarps ? partial[tid] : 0.0f;
            v = warp_sum(v);
            if (tid == 0) out[(k * out_h + y) * out_w + x] = v;
        }
        __syncthreads();  // partial[] is rewritten by the next output matrix
    }
}

// The instantiated values of the tuning parameters (xcorr/dispatch.hpp), the first the default.
using Threads = Values<256, 128>;

class BlockPerOverlap final : public Instance {
public:
    BlockPerOverlap(const Problem& p, int threads) : p_(p), threads_(threads) {}

    void run(const float* left, const float* right, float* out, cudaStream_t stream) override {
        Threads::dispatch(threads_, [&](auto t) {
            constexpr int T = decltype(t)::value;
            const dim3 grid(unsigned(int64_t(p_.out_h()) * p_.out_w()),
                            unsigned(std::min<int64_t>(p_.out_count(), 65535)));
            block_per_overlap_kernel<T><<<grid, T, 0, stream>>>(left, right, out, p_.hL, p_.wL, p_.hR,
                                                                p_.wR, p_.out_count(), pair_map(p_));
            XC_CHECK_LAUNCH();
        }, "threads");
    }

private:
    Problem p_;
    int threads_;
};

XCORR_REGISTER_VARIANT(Variant{
    .name = "block-per-overlap",
    .family = "warp-per-overlap",
    .summary = "one thread block per output element, block-stride loop, block-wide reduction",
    .timed = "kernel",
    .forms = {Form::OneToOne, Form::OneToMany, Form::NToMn, Form::NToM},
    .params = {Threads::param("threads", "threads per block (one block per output element)")},
    .make = [](const Problem& p, const Params& ps) -> std::unique_ptr<Instance> {
        return std::make_unique<BlockPerOverlap>(p, param_int(ps, "threads"));
    },
});

}  // namespace
}  // namespace xcorr::block_per_overlap
