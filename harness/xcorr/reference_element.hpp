// One output element of the float64 reference, as CONVENTIONS.md defines it ("The computation",
// "Normalization"): shared by the CPU reference (reference_cpu.cpp) and the GPU reference
// (gpu.cu), so that the two compute the same terms in the same order and cannot disagree.
// Obviously correct first: direct sums over the overlap, in double, never the fast path.
#pragma once

#include <cmath>
#include <cstdint>

#include "xcorr/core.hpp"

namespace xcorr {

// A factor under the root of the zncc coefficient at most this fraction of n·ΣX² (X the overlap of
// one matrix) marks a constant overlap: the coefficient is 0 there (CONVENTIONS.md).
inline constexpr double kConstantOverlap = 1e-6;

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

// Pearson's coefficient of the two overlapping parts at shift (dy, dx). Two passes (the overlap's
// means, then centred sums), so the reference has no cancellation of its own:
// n·ΣLR - ΣL·ΣR = n·Σ(L - mL)(R - mR) and n·ΣL² - (ΣL)² = n·Σ(L - mL)², hence
// coefficient = Σab / sqrt(Σa²·Σb²) with a = L - mL, b = R - mR, and the contract's constant-overlap
// test "n·ΣL² - (ΣL)² <= 1e-6·n·ΣL²" is Σa² <= 1e-6·ΣL². 0 where n = 0 or either part is constant.
XC_HD_INLINE double zncc_at(const float* L, const float* R, int hL, int wL, int hR, int wR, int dy, int dx) {
    const Span rows = overlap_span(dy, hL, hR), cols = overlap_span(dx, wL, wR);
    const double n = double(rows.end - rows.begin) * double(cols.end - cols.begin);
    if (n == 0) return 0.0;
    double sl = 0, sr = 0;
    for (int r = rows.begin; r < rows.end; ++r)
        for (int c = cols.begin; c < cols.end; ++c) {
            sl += double(L[int64_t(r + dy) * wL + c + dx]);
            sr += double(R[int64_t(r) * wR + c]);
        }
    const double ml = sl / n, mr = sr / n;
    double sab = 0, saa = 0, sbb = 0, ql = 0, qr = 0;
    for (int r = rows.begin; r < rows.end; ++r)
        for (int c = cols.begin; c < cols.end; ++c) {
            const double l = L[int64_t(r + dy) * wL + c + dx], x = R[int64_t(r) * wR + c];
            const double a = l - ml, b = x - mr;
            sab += a * b;
            saa += a * a;
            sbb += b * b;
            ql += l * l;
            qr += x * x;
        }
    if (saa <= kConstantOverlap * ql || sbb <= kConstantOverlap * qr) return 0.0;
    return sab / sqrt(saa * sbb);
}

// C(dy, dx) / C(0, 0), 0 everywhere where C(0, 0) = 0 (this project's choice, CONVENTIONS.md).
XC_HD_INLINE double zero_lag_at(const float* L, const float* R, int hL, int wL, int hR, int wR, int dy, int dx) {
    const double c00 = raw_at(L, R, hL, wL, hR, wR, 0, 0);
    return c00 == 0 ? 0.0 : raw_at(L, R, hL, wL, hR, wR, dy, dx) / c00;
}

// The reference value of one pair's output at shift (dy, dx) under normalization `mode`.
XC_HD_INLINE double reference_at(Normalize mode, const float* L, const float* R, int hL, int wL, int hR, int wR,
                                 int dy, int dx) {
    switch (mode) {
        case Normalize::Zncc: return zncc_at(L, R, hL, wL, hR, wR, dy, dx);
        case Normalize::ZeroLag: return zero_lag_at(L, R, hL, wL, hR, wR, dy, dx);
        default: return raw_at(L, R, hL, wL, hR, wR, dy, dx);
    }
}

}  // namespace xcorr
