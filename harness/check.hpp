// Checking a variant's output against the float64 reference: the one path that xcorr_validate
// (every output element) and xcorr_bench (every element of a small case, a sample of a large one)
// both take, so that the two cannot drift apart.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "xcorr/core.hpp"
#include "xcorr/device_buffer.hpp"
#include "xcorr/reference.hpp"
#include "xcorr/registry.hpp"

namespace xcorr {

// A distribution of input values: uniform in [lo, hi) (fill_uniform).
struct InputRange {
    const char* name;
    float lo, hi;
};
// The contract's inputs (CONVENTIONS.md, "Accuracy") and the benchmark's timed inputs.
inline constexpr InputRange kUnitRange{"[0,1)", 0.0f, 1.0f};
// Zero mean: products of both signs cancel, so a kernel that loses or flips a sign (an abs, an
// unsigned conversion, a clamp at 0) is off by O(1), not hidden under a positive DC term.
inline constexpr InputRange kSignedRange{"[-1,1)", -1.0f, 1.0f};
// A mean 4 times the half-width (4 x [0, 1)'s ratio), values up to 5. Not 1000 + [-0.5, 0.5): the
// relative error is dominated by the DC term, and the part of ||ref|| that the fluctuations carry
// is about 0.2 / sqrt(overlap) here (4e-4 at 512 x 512, 40x the 1e-5 bound: a kernel that got them
// wrong still fails) but 4e-4 / sqrt(overlap) with an offset of 1000 (8e-7 at 512: invisible).
inline constexpr InputRange kOffsetRange{"4+[-1,1)", 3.0f, 5.0f};
// Images of 1000 + noise: the normalized outputs' hard case, where n·ΣX² - (ΣX)² cancels ~6
// digits (normalize.hpp). The noise is wide enough (variance 21, 2e-5 of the mean square) that no
// overlap but a tiny one comes near the contract's constant-overlap threshold of 1e-6.
inline constexpr InputRange kLargeMeanRange{"1000+[-8,8)", 992.0f, 1008.0f};

// Fills a problem's left stack from `seed` and its right stack from `seed + 1`.
void fill_inputs(const Problem& p, float* left, float* right, uint64_t seed, InputRange range, cudaStream_t stream);

// Flat index `flat` of a problem's output stack (k·oh·ow + y·ow + x over its window): output k and
// the shift (dy, dx) of its element (y, x).
struct OutputElement {
    int64_t k;
    int dy, dx;
};
inline OutputElement element_of(const Problem& p, int64_t flat) {
    const int64_t per = int64_t(p.out_h()) * p.out_w(), e = flat % per;
    const Window w = p.shifts();
    return OutputElement{flat / per, w.dy0 + int(e / p.out_w()), w.dx0 + int(e % p.out_w())};
}

// The float64 reference of a problem at a set of output positions, values on the host.
struct Reference {
    Problem problem;                  // whose output it is
    size_t out_elems = 0;             // of the whole output stack
    DeviceBuffer<int64_t> positions;  // flat indices into the output stack; empty: every element, in order
    std::vector<double> values;       // the reference at those positions
    bool full() const { return positions.size() == 0; }
};

// Every element (reference_gpu).
Reference full_reference(const Problem& p, const float* left, const float* right, cudaStream_t stream);
// At the given flat output indices (reference_gpu_at).
Reference sampled_reference(const Problem& p, const float* left, const float* right,
                            const std::vector<int64_t>& positions, cudaStream_t stream);

// Output positions for a sampled check, sorted and distinct, at most max_samples: every element
// when the output has no more; else the structured points of each output matrix (its corners,
// whose overlap is one element in the full output, the rows and columns where the overlap stops
// growing or shrinking, where the window holds them, and the centre; only the corners when there are too many matrices, and only evenly spaced
// matrices, first and last included, when even that is too many), using up to half the budget,
// and the rest uniformly random positions over the whole stack from `seed` (for a window partly
// beyond the full range of shifts, half of them within that range, where the outputs are not 0).
// Positions are those of p's window: a window wholly beyond the full range gets them too (its
// outputs must all be 0).
std::vector<int64_t> sample_positions(const Problem& p, size_t max_samples, uint64_t seed);

// What xcorr_bench checks a case against: the full reference where it costs at most
// kFullCheckFmas multiply-adds (and the output at most kFullCheckElems elements), else the
// reference at sample_positions(p, kCheckSamples, seed). A sample costs one overlap's
// multiply-adds (up to hR x wR), so 65536 of them cost at most 1.7e10 at 512 x 512.
inline constexpr double kFullCheckFmas = 1e10;
inline constexpr int64_t kFullCheckElems = int64_t(1) << 24;
inline constexpr size_t kCheckSamples = 65536;
Reference check_reference(const Problem& p, const float* left, const float* right, uint64_t seed,
                          cudaStream_t stream);

// One checked run: poisons `out` (NaN), runs `inst` (make_instance's, for a normalized problem) on
// (left, right) with finish() after it
// when the variant has one (the complete result, as a caller sees it), reads the output at ref's
// positions and compares it with ref (compare_to_reference).
Comparison run_and_compare(Instance& inst, const float* left, const float* right, float* out, const Reference& ref,
                           cudaStream_t stream);

}  // namespace xcorr
