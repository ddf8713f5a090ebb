// The float64 reference's constant rule and its border (lib/xcorr/reference_element.hpp: zncc_at,
// zncc_other_at) on the CPU: a 2-sample overlap whose part's variance is a chosen fraction of its
// whole matrix's. CONVENTIONS.md: 0 where a part's variance is at most 1e-6 of its matrix's, and
// either answer right where its standard deviation is below 1e-2 of the matrix's (variance 1e-4);
// an exactly constant part is 0 only. tests/test_reference_border.py runs it (no GPU needed).
// Prints one FAIL line per broken case and "N cases, N failed".
#include <cmath>
#include <cstdio>
#include <vector>

#include "xcorr/reference_element.hpp"

using namespace xcorr;

namespace {
int failed = 0, cases = 0;

void expect(bool ok, const char* what, double ratio, double got) {
    ++cases;
    if (!ok) {
        ++failed;
        std::printf("FAIL  %s at a part's variance %.3g of its matrix's: %.17g\n", what, ratio, got);
    }
}

// L = 0, 1, 0, 1, ..., then two samples 5 and 5 + d (the overlap at the last shift with overlap 2 of
// a 2-sample right R = 1, 3), d chosen so that the part's variance d²/4 is `ratio` of L's.
void check(double ratio, bool constant, bool border) {
    std::vector<float> L(40);
    for (size_t i = 0; i + 2 < L.size(); ++i) L[i] = float(i % 2);
    L[38] = 5.0f;
    // the variance of L with L[39] = 5 + d is v(d); solve d²/4 = ratio·v(d) by a few fixed-point steps
    double d = 0.1;
    for (int it = 0; it < 50; ++it) {
        L[39] = float(5.0 + d);
        d = std::sqrt(4 * ratio * matrix_variance(L.data(), int64_t(L.size())));
    }
    L[39] = float(5.0 + d);
    const std::vector<float> R = {1.0f, 3.0f};
    const int n = int(L.size()), dx = n - 2;
    const double vL = matrix_variance(L.data(), n), vR = matrix_variance(R.data(), 2);
    const double v = zncc_at(L.data(), R.data(), 1, n, 1, 2, 0, dx, vL, vR);
    const double other = zncc_other_at(L.data(), R.data(), 1, n, 1, 2, 0, dx, vL, vR);
    const double coefficient = L[39] > L[38] ? 1.0 : -1.0;  // two samples: the sign of their slope
    expect(constant ? v == 0 : std::fabs(v - coefficient) < 1e-12, "zncc_at", ratio, v);
    if (!border)
        expect(std::isnan(other), "no other answer off the border", ratio, other);
    else
        expect(constant ? std::fabs(other - coefficient) < 1e-12 : other == 0, "the other answer", ratio, other);
}
}  // namespace

int main() {
    check(1e-8, true, true);    // constant, on the border: 0, or the coefficient
    check(5e-7, true, true);
    check(2e-6, false, true);   // varying, on the border: the coefficient, or 0
    check(5e-5, false, true);
    check(4e-4, false, false);  // off the border: the coefficient only
    check(1e-1, false, false);
    // an exactly constant part: 0 only
    std::vector<float> L(40, 0.0f);
    for (size_t i = 0; i + 2 < L.size(); ++i) L[i] = float(i % 2);
    L[38] = L[39] = 5.0f;
    const std::vector<float> R = {1.0f, 3.0f};
    const double vL = matrix_variance(L.data(), 40), vR = matrix_variance(R.data(), 2);
    expect(zncc_at(L.data(), R.data(), 1, 40, 1, 2, 0, 38, vL, vR) == 0, "an exactly constant part", 0, 0);
    expect(std::isnan(zncc_other_at(L.data(), R.data(), 1, 40, 1, 2, 0, 38, vL, vR)), "its other answer", 0, 0);
    std::printf("%d cases, %d failed\n", cases, failed);
    return failed ? 1 : 0;
}
