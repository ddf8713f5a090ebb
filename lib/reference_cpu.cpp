#include "xcorr/reference.hpp"

#include <cmath>
#include <vector>

#include "xcorr/reference_element.hpp"

namespace xcorr {

void reference_cpu(const Problem& p, const float* left, const float* right, double* out) {
    reference_cpu(p, left, right, out, nullptr);
}

void reference_cpu(const Problem& p, const float* left, const float* right, double* out,
                   const std::function<void(int64_t done, int64_t rows)>& progress) {
    const PairMap pairs = pair_map(p);
    const Window win = p.shifts();
    const int oh = p.out_h(), ow = p.out_w();
    // zncc's constant-part test is relative to each whole matrix's variance: once per matrix.
    const bool zncc = p.normalize == Normalize::Zncc;
    const int64_t lelems = int64_t(p.hL) * p.wL, relems = int64_t(p.hR) * p.wR;
    std::vector<double> lvar(zncc ? p.nL : 0), rvar(zncc ? p.nR : 0);
    for (size_t i = 0; i < lvar.size(); ++i) lvar[i] = matrix_variance(left + int64_t(i) * lelems, lelems);
    for (size_t i = 0; i < rvar.size(); ++i) rvar[i] = matrix_variance(right + int64_t(i) * relems, relems);
    for (int64_t k = 0; k < p.out_count(); ++k) {
        const int l = pairs.left_of(k), r = pairs.right_of(k);
        const float* L = left + l * lelems;
        const float* R = right + r * relems;
        const double vl = zncc ? lvar[l] : 0.0, vr = zncc ? rvar[r] : 0.0;
        for (int y = 0; y < oh; ++y) {
            for (int x = 0; x < ow; ++x)  // a shift beyond the full range has no overlap: 0
                out[(k * oh + y) * ow + x] =
                    reference_at(p.normalize, L, R, p.hL, p.wL, p.hR, p.wR, win.dy0 + y, win.dx0 + x, vl, vr);
            if (progress) progress(k * oh + y + 1, p.out_count() * oh);
        }
    }
}

namespace {
template <typename T>
Comparison compare(const T* out, const double* ref, size_t n) {
    double num = 0, den = 0;
    size_t nonfinite = 0;
    double abs_error = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(out[i])) {
            ++nonfinite;
            continue;
        }
        const double d = double(out[i]) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
        if (!(std::fabs(d) <= abs_error) && !std::isnan(abs_error)) {  // a NaN reference makes it NaN
            abs_error = std::fabs(d);
            worst = i;
        }
    }
    const double wo = n ? double(out[worst]) : 0, wr = n ? ref[worst] : 0;
    return {den > 0 ? std::sqrt(num / den) : std::sqrt(num), nonfinite, abs_error, worst, wo, wr};
}
}  // namespace

Comparison compare_to_reference(const float* out, const double* ref, size_t n) { return compare(out, ref, n); }
Comparison compare_to_reference(const double* out, const double* ref, size_t n) { return compare(out, ref, n); }

}  // namespace xcorr
