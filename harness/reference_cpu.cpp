#include "xcorr/reference.hpp"

#include <cmath>

namespace xcorr {

void reference_cpu(const Problem& p, const float* left, const float* right, double* out) {
    const PairMap pairs = pair_map(p);
    const Window win = p.shifts();
    const int oh = p.out_h(), ow = p.out_w();
    for (int64_t k = 0; k < p.out_count(); ++k) {
        const float* L = left + int64_t(pairs.left_of(k)) * p.hL * p.wL;
        const float* R = right + int64_t(pairs.right_of(k)) * p.hR * p.wR;
        for (int y = 0; y < oh; ++y)
            for (int x = 0; x < ow; ++x) {
                // A shift beyond the full range finds no (r, c) in both matrices: 0.
                const int dy = win.dy0 + y, dx = win.dx0 + x;
                double sum = 0.0;
                for (int r = 0; r < p.hR; ++r)
                    for (int c = 0; c < p.wR; ++c) {
                        const int lr = r + dy, lc = c + dx;
                        if (lr < 0 || lr >= p.hL || lc < 0 || lc >= p.wL) continue;
                        sum += double(L[int64_t(lr) * p.wL + lc]) * double(R[int64_t(r) * p.wR + c]);
                    }
                out[(k * oh + y) * ow + x] = sum;
            }
    }
}

namespace {
template <typename T>
Comparison compare(const T* out, const double* ref, size_t n) {
    double num = 0, den = 0;
    size_t nonfinite = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(out[i])) {
            ++nonfinite;
            continue;
        }
        num += (out[i] - ref[i]) * (out[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return {den > 0 ? std::sqrt(num / den) : std::sqrt(num), nonfinite};
}
}  // namespace

Comparison compare_to_reference(const float* out, const double* ref, size_t n) { return compare(out, ref, n); }
Comparison compare_to_reference(const double* out, const double* ref, size_t n) { return compare(out, ref, n); }

}  // namespace xcorr
