// One output element of the float64 reference, as CONVENTIONS.md defines it ("The computation",
// "Normalization"): shared by the CPU reference (reference_cpu.cpp) and the GPU reference
// (gpu.cu), so that the two compute the same terms in the same order and cannot disagree.
// Obviously correct first: direct sums over the overlap, in double, never the fast path.
#pragma once

#include <cmath>
#include <cstdint>

#include "xcorr/core.hpp"

namespace xcorr {

// A part of one matrix (its overlap at a shift) whose variance is at most this fraction of the
// variance of its whole matrix is constant: the zncc coefficient is 0 there (CONVENTIONS.md). Relative
// to the matrix's spread, never to its magnitude, so that adding an offset changes nothing.
inline constexpr double kConstantOverlap = 1e-6;

// The variance of a whole matrix of `elems` floats (the scale of the constant-part test), in double
// and in two passes (the mean, then the centred squares), so that an offset cancels nothing: the
// variance of 30000 + noise of amplitude 1 keeps all its digits. 0 for an empty or constant matrix.
// Over the values that are numbers: a NaN elsewhere in the matrix must not switch the test off for
// the overlaps that do not hold it (with a NaN scale no part would be constant, and an exactly
// constant one would give 0/0); the overlaps that hold it are NaN (zncc_at). Without NaN, the same
// sums in the same order as over every value.
XC_HD_INLINE double matrix_variance(const float* X, int64_t elems) {
    double s = 0;
    int64_t count = 0;
    for (int64_t i = 0; i < elems; ++i)
        if (X[i] == X[i]) s += double(X[i]), ++count;
    if (count == 0) return 0.0;
    const double m = s / double(count);
    double q = 0;
    for (int64_t i = 0; i < elems; ++i)
        if (X[i] == X[i]) q += (double(X[i]) - m) * (double(X[i]) - m);
    return q / double(count);
}

// C at shift (dy, dx) of one pair: sum over the overlap of L[r + dy][c + dx]·R[r][c], in double
// (each product of two floats is exact in double); 0 without overlap.
XC_HD_INLINE double raw_at(const float* L, const float* R, int hL, int wL, int hR, int wR, int dy, int dx) {
    const Span rows = overlap_span(dy, hL, hR), cols = overlap_span(dx, wL, wR);
    double sum = 0.0;
    for (int r = rows.begin; r < rows.end; ++r)
        for (int c = cols.begin; c < cols.end; ++c)
            sum += double(L[int64_t(r + dy) * wL + c + dx]) * double(R[int64_t(r) * wR + c]);
    return sum;
}

// The overlap's size n and its centred sums Σab, Σa², Σb² (a = L - mL, b = R - mR over the part)
// at shift (dy, dx): two passes (the overlap's means, then centred sums), so the reference has no
// cancellation of its own.
struct ZnccSums {
    double n, sab, saa, sbb;
};
XC_HD_INLINE ZnccSums zncc_sums_at(const float* L, const float* R, int hL, int wL, int hR, int wR, int dy, int dx) {
    const Span rows = overlap_span(dy, hL, hR), cols = overlap_span(dx, wL, wR);
    const double n = double(rows.end - rows.begin) * double(cols.end - cols.begin);
    if (n == 0) return ZnccSums{0, 0, 0, 0};
    double sl = 0, sr = 0;
    for (int r = rows.begin; r < rows.end; ++r)
        for (int c = cols.begin; c < cols.end; ++c) {
            sl += double(L[int64_t(r + dy) * wL + c + dx]);
            sr += double(R[int64_t(r) * wR + c]);
        }
    const double ml = sl / n, mr = sr / n;
    double sab = 0, saa = 0, sbb = 0;
    for (int r = rows.begin; r < rows.end; ++r)
        for (int c = cols.begin; c < cols.end; ++c) {
            const double a = L[int64_t(r + dy) * wL + c + dx] - ml, b = R[int64_t(r) * wR + c] - mr;
            sab += a * b;
            saa += a * a;
            sbb += b * b;
        }
    return ZnccSums{n, sab, saa, sbb};
}

// Pearson's coefficient of the two overlapping parts at shift (dy, dx), from zncc_sums_at:
// n·ΣLR - ΣL·ΣR = n·Σ(L - mL)(R - mR) and n·ΣL² - (ΣL)² = n·Σ(L - mL)², hence
// coefficient = Σab / sqrt(Σa²·Σb²), and the contract's constant-part test "the part's variance
// Σa²/n is at most 1e-6 of its whole matrix's variance vL" is Σa² <= 1e-6·n·vL (vL, vR:
// matrix_variance of the pair's whole matrices). 0 where n = 0 or either part is constant; an
// exactly constant part has Σa² = 0 exactly (its mean is exact), so it is 0.
XC_HD_INLINE double zncc_at(const float* L, const float* R, int hL, int wL, int hR, int wR, int dy, int dx,
                            double vL, double vR) {
    const ZnccSums s = zncc_sums_at(L, R, hL, wL, hR, wR, dy, dx);
    if (s.n == 0) return 0.0;
    if (s.saa <= kConstantOverlap * s.n * vL || s.sbb <= kConstantOverlap * s.n * vR) return 0.0;
    return s.sab / sqrt(s.saa * s.sbb);
}

// CONVENTIONS.md's accuracy clause: on parts near the constant rule's border, a standard deviation
// below 1e-2 of the whole matrix's (a variance at most kConstantBorder of its), either answer is
// right, 0 or the coefficient (an implementation's own scale for the rule, such as the GPU's crop,
// may put such a part on either side). zncc_other_at: the right answer zncc_at does not give at
// (dy, dx), or NaN where there is none (not on the border, or a part exactly constant: 0 only).
// Host only: the checks call it for the few elements that miss their bound.
inline constexpr double kConstantBorder = 1e-4;
inline double zncc_other_at(const float* L, const float* R, int hL, int wL, int hR, int wR, int dy, int dx,
                            double vL, double vR) {
    const ZnccSums s = zncc_sums_at(L, R, hL, wL, hR, wR, dy, dx);
    if (s.n == 0 || s.saa == 0 || s.sbb == 0) return std::nan("");
    if (!(s.saa <= kConstantBorder * s.n * vL || s.sbb <= kConstantBorder * s.n * vR)) return std::nan("");
    const bool constant = s.saa <= kConstantOverlap * s.n * vL || s.sbb <= kConstantOverlap * s.n * vR;
    return constant ? s.sab / std::sqrt(s.saa * s.sbb) : 0.0;
}

// C(dy, dx) / C(0, 0), 0 everywhere where C(0, 0) = 0 (this project's choice, CONVENTIONS.md).
XC_HD_INLINE double zero_lag_at(const float* L, const float* R, int hL, int wL, int hR, int wR, int dy, int dx) {
    const double c00 = raw_at(L, R, hL, wL, hR, wR, 0, 0);
    return c00 == 0 ? 0.0 : raw_at(L, R, hL, wL, hR, wR, dy, dx) / c00;
}

// The reference value of one pair's output at shift (dy, dx) under normalization `mode`; vL, vR:
// matrix_variance of L and R (read by zncc alone; the caller computes them once per matrix).
XC_HD_INLINE double reference_at(Normalize mode, const float* L, const float* R, int hL, int wL, int hR, int wR,
                                 int dy, int dx, double vL, double vR) {
    switch (mode) {
        case Normalize::Zncc: return zncc_at(L, R, hL, wL, hR, wR, dy, dx, vL, vR);
        case Normalize::ZeroLag: return zero_lag_at(L, R, hL, wL, hR, wR, dy, dx);
        default: return raw_at(L, R, hL, wL, hR, wR, dy, dx);
    }
}

}  // namespace xcorr
