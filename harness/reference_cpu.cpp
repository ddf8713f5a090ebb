#include "xcorr/reference.hpp"

#include <cmath>

#include "xcorr/reference_element.hpp"

namespace xcorr {

void reference_cpu(const Problem& p, const float* left, const float* right, double* out) {
    const PairMap pairs = pair_map(p);
    const Window win = p.shifts();
    const int oh = p.out_h(), ow = p.out_w();
    for (int64_t k = 0; k < p.out_count(); ++k) {
        const float* L = left + int64_t(pairs.left_of(k)) * p.hL * p.wL;
        const float* R = right + int64_t(pairs.right_of(k)) * p.hR * p.wR;
        for (int y = 0; y < oh; ++y)
            for (int x = 0; x < ow; ++x)  // a shift beyond the full range has no overlap: 0
                out[(k * oh + y) * ow + x] =
                    reference_at(p.normalize, L, R, p.hL, p.wL, p.hR, p.wR, win.dy0 + y, win.dx0 + x);
    }
}

namespace {
template <typename T>
Comparison compare(const T* out, const double* ref, size_t n) {
    double num = 0, den = 0;
    size_t nonfinite = 0;
    double abs_error = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(out[i])) {
            ++nonfinite;
            continue;
        }
        const double d = double(out[i]) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        if (!(std::fabs(d) <= abs_error)) abs_error = std::fabs(d);  // a NaN reference makes it NaN
    }
    return {den > 0 ? std::sqrt(num / den) : std::sqrt(num), nonfinite, abs_error};
}
}  // namespace

Comparison compare_to_reference(const float* out, const double* ref, size_t n) { return compare(out, ref, n); }
Comparison compare_to_reference(const double* out, const double* ref, size_t n) { return compare(out, ref, n); }

}  // namespace xcorr
