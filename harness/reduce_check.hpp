// The tools' side of the reductions (reduce.hpp): host and device copies of a reduced plan's
// outputs, the float64 reference's answer made from reference maps, and the check of an answer
// against those maps (reduce.hpp's check_peaks and check_max_over_rights, the contract's "correct
// when", applied to every map of a problem). xcorr run (--algorithm reference, --validate),
// xcorr_validate and xcorr_bench share it, so that their verdicts cannot drift apart. Header-only.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "xcorr/core.hpp"
#include "xcorr/cuda_check.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/reduce.hpp"

namespace xcorr {

// The elements of each reduced output: peaks out_count*k (value; shift and subpixel twice that);
// max over rights reduced_lefts*out_h*out_w (each array).
inline int64_t reduced_count(const Problem& p, const Reduction& r) {
    return r.kind == ReductionKind::Peaks ? p.out_count() * r.k : reduced_lefts(p) * int64_t(p.out_h()) * p.out_w();
}
// Bytes of all the outputs of a reduction.
inline size_t reduced_bytes(const Problem& p, const Reduction& r) {
    const size_t n = size_t(reduced_count(p, r));
    if (r.kind == ReductionKind::Peaks) return n * (sizeof(float) * 3 + sizeof(int32_t) * 2);
    return n * (sizeof(float) + sizeof(int32_t) + (r.stats ? 2 * sizeof(double) : 0));
}

// A reduced plan's outputs on the host.
struct HostReduced {
    std::vector<float> value, subpixel;
    std::vector<int32_t> shift, index;
    std::vector<double> sum, sumsq;
    HostReduced() = default;
    HostReduced(const Problem& p, const Reduction& r) {
        const size_t n = size_t(reduced_count(p, r));
        value.resize(n);
        if (r.kind == ReductionKind::Peaks) {
            shift.resize(2 * n), subpixel.resize(2 * n);
        } else {
            index.resize(n);
            if (r.stats) sum.resize(n), sumsq.resize(n);
        }
    }
};

// The same on the device, every byte set before each run (poison(): 0xff makes NaN floats and
// doubles, index and shift -1; 0x7f makes 3.4e38 and indices far out of range), so that an element
// left unwritten is seen.
struct DeviceReduced {
    DeviceBuffer<float> value, subpixel;
    DeviceBuffer<int32_t> shift, index;
    DeviceBuffer<double> sum, sumsq;
    DeviceReduced(const Problem& p, const Reduction& r, size_t extra = 0) {
        const size_t n = size_t(reduced_count(p, r));
        value = DeviceBuffer<float>(n + extra);
        if (r.kind == ReductionKind::Peaks) {
            shift = DeviceBuffer<int32_t>(2 * n + extra), subpixel = DeviceBuffer<float>(2 * n + extra);
        } else {
            index = DeviceBuffer<int32_t>(n + extra);
            if (r.stats) sum = DeviceBuffer<double>(n + extra), sumsq = DeviceBuffer<double>(n + extra);
        }
    }
    // The pointers a plan writes, `offset` elements into each buffer (a misaligned run).
    ReducedOutputs outputs(size_t offset = 0) const {
        auto at = [offset](auto& b) { return b.size() ? b.get() + offset : nullptr; };
        return ReducedOutputs{at(value), at(shift), at(subpixel), at(index), at(sum), at(sumsq)};
    }
    void poison(cudaStream_t stream, int byte = 0xff) const {
        auto fill = [stream, byte](auto& b) {
            if (b.size()) XC_CUDA_CHECK(cudaMemsetAsync(b.get(), byte, b.bytes(), stream));
        };
        fill(value), fill(subpixel), fill(shift), fill(index), fill(sum), fill(sumsq);
    }
    // Copies the outputs written at `offset` into `h` (sized by HostReduced(p, r)); synchronises.
    void copy_to(HostReduced& h, size_t offset, cudaStream_t stream) const {
        auto get = [&](auto& dst, auto& src) {
            if (!dst.empty())
                XC_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.get() + offset, dst.size() * sizeof(dst[0]),
                                              cudaMemcpyDeviceToHost, stream));
        };
        get(h.value, value), get(h.shift, shift), get(h.subpixel, subpixel), get(h.index, index), get(h.sum, sum),
            get(h.sumsq, sumsq);
        XC_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
};

// The float64 reference's answer from the reference maps (reference_cpu's layout: out_count maps
// of out_h*out_w values), rounded to the outputs' types as a reduced plan writes them.
inline void reference_answer(const Problem& p, const Reduction& r, const double* maps, HostReduced& out) {
    const int h = p.out_h(), w = p.out_w();
    const Window win = p.shifts();
    const size_t n = size_t(h) * size_t(w);
    if (r.kind == ReductionKind::Peaks) {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        for (int64_t m = 0; m < p.out_count(); ++m) {
            const std::vector<Peak> peaks = reference_peaks(maps + size_t(m) * n, h, w, win.dy0, win.dx0, r);
            for (int i = 0; i < r.k; ++i) {
                const size_t e = size_t(m) * size_t(r.k) + size_t(i);
                const Peak& q = peaks[size_t(i)];
                const bool absent = q.index < 0;
                out.value[e] = absent ? nan : float(q.value);
                out.shift[2 * e] = absent ? 0 : win.dy0 + int32_t(q.index / w);
                out.shift[2 * e + 1] = absent ? 0 : win.dx0 + int32_t(q.index % w);
                out.subpixel[2 * e] = absent ? nan : float(q.sub_dy);
                out.subpixel[2 * e + 1] = absent ? nan : float(q.sub_dx);
            }
        }
        return;
    }
    const size_t count = out.value.size();
    std::vector<double> value(count);
    reference_max_over_rights(p, maps, value.data(), out.index.data(), r.stats ? out.sum.data() : nullptr,
                              r.stats ? out.sumsq.data() : nullptr);
    for (size_t i = 0; i < count; ++i) out.value[i] = float(value[i]);
}

// The largest finite |value| of n values (0 if none).
inline double largest_magnitude(const double* v, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i)
        if (std::isfinite(v[i])) m = std::max(m, std::fabs(v[i]));
    return m;
}

// Checks `got` against the reference maps of the whole problem. `bound` is absolute where
// `absolute` (zncc's), else relative: times the largest finite |value| of each map (peaks) or of
// a left's maps (max over rights), the contract's accuracy bound as an absolute error.
// `coverage` false (inputs holding NaN: docs/CONVENTIONS.md's reading) leaves out check_peaks'
// clause that nothing outside the taken peaks exceeds the k-th.
inline PeakCheck check_answer(const Problem& p, const Reduction& r, const double* maps, const HostReduced& got,
                              double bound, bool absolute, int max_lines = 8, bool coverage = true) {
    PeakCheck out;
    const int h = p.out_h(), w = p.out_w();
    const Window win = p.shifts();
    const size_t n = size_t(h) * size_t(w);
    if (r.kind == ReductionKind::Peaks) {
        for (int64_t m = 0; m < p.out_count(); ++m) {
            const double* map = maps + size_t(m) * n;
            const size_t e = size_t(m) * size_t(r.k);
            check_peaks(map, h, w, win.dy0, win.dx0, r, got.value.data() + e, got.shift.data() + 2 * e,
                        got.subpixel.data() + 2 * e, absolute ? bound : bound * largest_magnitude(map, n), out,
                        "map " + std::to_string(m), max_lines, coverage);
        }
        return out;
    }
    const PairGrid g = pair_map(p).grid();
    const int64_t lefts = reduced_lefts(p), rights = rights_per_left(p);
    for (int64_t l = 0; l < lefts; ++l) {
        std::vector<const double*> mine;
        double largest = 0;
        for (int64_t j = 0; j < rights; ++j) {
            mine.push_back(maps + size_t(g.output(int(l), int(j))) * n);
            largest = std::max(largest, largest_magnitude(mine.back(), n));
        }
        const size_t e = size_t(l) * n;
        check_max_over_rights(mine, int64_t(n), got.value.data() + e, got.index.data() + e,
                              got.sum.empty() ? nullptr : got.sum.data() + e,
                              got.sumsq.empty() ? nullptr : got.sumsq.data() + e, absolute ? bound : bound * largest,
                              out, "left " + std::to_string(l), max_lines, coverage);
    }
    return out;
}

}  // namespace xcorr
