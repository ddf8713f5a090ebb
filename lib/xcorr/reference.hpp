// The float64 reference on the CPU: a direct transcription of the definition in CONVENTIONS.md,
// for all four forms, any window and every normalization (reference_element.hpp). Obviously correct first, fast never; tests check it against
// scipy.signal.correlate2d, and the GPU reference (gpu.hpp) against it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "xcorr/core.hpp"

namespace xcorr {

// left: nL x hL x wL, right: nR x hR x wR, out: out_count x out_h x out_w (all row-major), the
// shifts of p.shifts().
void reference_cpu(const Problem& p, const float* left, const float* right, double* out);
// The same, calling progress(rows done, rows) after each output row (rows: out_count x out_h), for
// a caller that shows how far a long run is (xcorr run's progress line).
void reference_cpu(const Problem& p, const float* left, const float* right, double* out,
                   const std::function<void(int64_t done, int64_t rows)>& progress);

// How far a result is from the reference: ||out - ref|| / ||ref|| over the finite elements of
// `out`, the largest |out - ref| over them, and how many elements of `out` are not finite (an
// unwritten, NaN-poisoned element, or a NaN the inputs produced). A result passes only with
// nonfinite == 0 and its error (error_of) within bound.
// `worst` is the index of the element with the largest |out - ref| (its values beside it), which
// a failing check names.
struct Comparison {
    double rel_error;
    size_t nonfinite;
    double abs_error = 0;
    size_t worst = 0;
    double worst_out = 0, worst_ref = 0;
};
Comparison compare_to_reference(const float* out, const double* ref, size_t n);
Comparison compare_to_reference(const double* out, const double* ref, size_t n);

// The verdict of every check (xcorr run --validate, xcorr_validate, xcorr_bench): every element
// finite and the relative error at most the bound. An error above the bound fails, and so does
// a NaN error (a non-finite reference).
inline bool passes(const Comparison& c, double bound) { return c.nonfinite == 0 && c.rel_error <= bound; }

// zncc outputs (values in [-1, 1]) are held to an absolute error (CONVENTIONS.md, "Accuracy for
// normalized outputs"); plain sums and zero-lag outputs to a relative one: zero-lag is the raw
// output divided by C(0, 0), which is computed in double, so the raw output's relative error carries
// over unchanged (an absolute bound would instead grow with max |C| / C(0, 0), unbounded off the
// autocorrelation). The error that decides for `mode`, its name in messages, and the verdict.
inline bool absolute_error_for(Normalize mode) { return mode == Normalize::Zncc; }
inline double error_of(const Comparison& c, Normalize mode) { return absolute_error_for(mode) ? c.abs_error : c.rel_error; }
inline const char* error_name(Normalize mode) { return absolute_error_for(mode) ? "absolute error" : "relative error"; }
inline bool passes(const Comparison& c, double bound, Normalize mode) {
    const double e = error_of(c, mode);
    return c.nonfinite == 0 && e <= bound;
}
// The contract's bound on a normalized output's absolute error against float64.
inline constexpr double kNormalizedBound = 1e-4;
// The bound of a variant with relative-error bound `tolerance` on a problem normalized by `mode`:
// the tolerance itself for plain sums and zero-lag; for zncc kNormalizedBound, or the tolerance
// where it is looser (a TF32 variant's 2e-3 relative error moves a coefficient by about as much).
inline double bound_for(double tolerance, Normalize mode) {
    return !absolute_error_for(mode) ? tolerance : (tolerance > kNormalizedBound ? tolerance : kNormalizedBound);
}

// The bound of the reference's own float32 output against its float64 sums (xcorr run
// --algorithm reference --validate): rounding to the nearest float32 moves each element by at
// most 2^-24 of itself, outside float32's subnormal and overflow ranges.
inline constexpr double kReferenceFloat32Bound = 0x1p-24;

}  // namespace xcorr
