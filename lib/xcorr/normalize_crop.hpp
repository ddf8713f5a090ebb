// The part of each input that a normalized problem's window touches (normalize.hpp): the prepass
// (means, shifted copies, summed-area tables) and the raw correlation run on these crops only.
// Host only, no CUDA: xcorr explain reports it without a GPU.
//
// Which elements a window touches. C(dy, dx) = Σ_r Σ_c L[r + dy][c + dx]·R[r][c] over the overlap,
// whose right rows are overlap_span(dy, hL, hR) = [max(0, -dy), min(hR, hL - dy)) and left rows
// those + dy = [max(0, dy), min(hL, hR + dy)). Both ends grow with dy, and consecutive non-empty
// intervals meet (the next begins at most one past this one's begin), so over dy0..dy1 they cover
//   left rows  [max(0, dy0), min(hL, dy1 + hR)),   right rows [max(0, -dy1), min(hR, hL - dy0)),
// exactly; columns likewise with dx, wL, wR. The left region is empty exactly when no dy of the
// window overlaps (dy1 <= -hR or dy0 >= hL), and so is the right one: an empty crop means every
// output is 0 (n = 0, the contract).
// The window on the crops. With L' = L cropped at (rL0, cL0) and R' = R at (rR0, cR0), writing
// r = r' + rR0, c = c' + cR0: L[r + dy][c + dx] = L'[r' + dy + rR0 - rL0][c' + dx + cR0 - cL0], so
// C(dy, dx) = C'(dy + rR0 - rL0, dx + cR0 - cL0), the crops' correlation at the translated shift:
// every product of the original overlap lies inside both crops (above), and the crops' overlap at
// the translated shift is the original overlap intersected with the crops, i.e. the same terms.
#pragma once

#include <algorithm>
#include <string>

#include "xcorr/core.hpp"

namespace xcorr {

// Rows [r0, r1) and columns [c0, c1) of a matrix.
struct Region {
    int r0 = 0, r1 = 0, c0 = 0, c1 = 0;
    int h() const { return r1 - r0; }
    int w() const { return c1 - c0; }
    bool empty() const { return r1 <= r0 || c1 <= c0; }
    bool operator==(const Region&) const = default;
};

struct NormalizeCrop {
    Region left, right;

    // No shift of the window overlaps: every output is 0 and nothing needs computing.
    bool empty() const { return left.empty() || right.empty(); }
    // The crops are the whole matrices (then the raw problem is p.raw() itself).
    bool whole(const Problem& p) const {
        return left == Region{0, p.hL, 0, p.wL} && right == Region{0, p.hR, 0, p.wR};
    }
    // The raw problem of the crops: their sizes, the window translated by (rR0 - rL0, cR0 - cL0) as a
    // rectangle of shifts. Not for an empty crop.
    Problem raw(const Problem& p) const {
        if (whole(p)) return p.raw();
        Problem q = p.raw();
        const Window w = p.shifts();
        const int ty = right.r0 - left.r0, tx = right.c0 - left.c0;
        q.hL = left.h(), q.wL = left.w(), q.hR = right.h(), q.wR = right.w();
        q.window = Window{w.dy0 + ty, w.dy1 + ty, w.dx0 + tx, w.dx1 + tx};
        return q;
    }
};

// The crops of the whole matrices (the prepass over everything).
inline NormalizeCrop whole_crop(const Problem& p) { return NormalizeCrop{{0, p.hL, 0, p.wL}, {0, p.hR, 0, p.wR}}; }

// The region each input's window touches (above).
inline NormalizeCrop touched_crop(const Problem& p) {
    const Window w = p.shifts();
    // In 64 bits: a window may reach 2^30 past the matrices (Window::check).
    auto clamp = [](int64_t v, int n) { return int(std::clamp<int64_t>(v, 0, n)); };
    NormalizeCrop c;
    c.left = Region{clamp(w.dy0, p.hL), clamp(int64_t(w.dy1) + p.hR, p.hL), clamp(w.dx0, p.wL),
                    clamp(int64_t(w.dx1) + p.wR, p.wL)};
    c.right = Region{clamp(-int64_t(w.dy1), p.hR), clamp(int64_t(p.hL) - w.dy0, p.hR), clamp(-int64_t(w.dx1), p.wR),
                     clamp(int64_t(p.wL) - w.dx0, p.wR)};
    return c;
}

// "left rows a..b, columns c..d of HxW, right ...": the regions of c (not empty) for explanations.
inline std::string describe_regions(const Problem& p, const NormalizeCrop& c) {
    auto region = [](const Region& r, int h, int w) {
        return "rows " + std::to_string(r.r0) + ".." + std::to_string(r.r1 - 1) + ", columns " + std::to_string(r.c0) +
               ".." + std::to_string(r.c1 - 1) + " of " + std::to_string(h) + "x" + std::to_string(w);
    };
    return "left " + region(c.left, p.hL, p.wL) + ", right " + region(c.right, p.hR, p.wR);
}

// The columns of a crop's summed-area table that the epilogue reads. Output (dy, dx) reads the
// table columns of its overlap's first and one-past-last columns (normalize.cu: box_sum), in crop
// coordinates: for the left, max(0, dx) - c0 and min(wL, wR + dx) - c0; for the right,
// max(0, -dx) - c0 and min(wR, wL - dx) - c0; over the window's dx that overlap at all
// (-(wR - 1) <= dx <= wL - 1; the others read nothing). Each of the two is a run of consecutive
// columns as dx steps (it moves by 0 or 1), the first never past the second, so the set is two
// runs, or one where they meet: [a0, a0 + n1) and [b0, b0 + n2). A window of a few shifts on
// large inputs (seed 002's ±64 on 2048 x 2048: 130 of 2049 columns) reads few of them, and a table
// of those columns alone (all rows) is what the prepass then writes (normalize.hpp).
struct TableColumns {
    int a0 = 0, n1 = 0, b0 = 0, n2 = 0;
    XC_HD_INLINE int width() const { return n1 + n2; }
    // The table column that holds crop column c (0 .. cw), -1 where none does.
    XC_HD_INLINE int at(int c) const {
        if (c >= a0 && c - a0 < n1) return c - a0;
        if (c >= b0 && c - b0 < n2) return n1 + c - b0;
        return -1;
    }
    bool operator==(const TableColumns&) const = default;
};
// Every column of a crop cw wide: the whole table, at(c) = c.
inline TableColumns all_columns(int cw) { return TableColumns{0, cw + 1, 0, 0}; }

struct TableColumnsPair {
    TableColumns left, right;
};

// The columns the epilogue reads of the left and right tables of crop c (not empty) (above).
inline TableColumnsPair read_columns(const Problem& p, const NormalizeCrop& c) {
    const Window w = p.shifts();
    const int lo = std::max(w.dx0, 1 - p.wR), hi = std::min(w.dx1, p.wL - 1);
    if (lo > hi) return {all_columns(c.left.w()), all_columns(c.right.w())};  // nothing overlaps
    // Two runs [b_lo, b_hi], [e_lo, e_hi] (b_lo <= e_lo, b_hi <= e_hi) as TableColumns.
    auto runs = [](int b_lo, int b_hi, int e_lo, int e_hi) {
        if (e_lo <= b_hi + 1) return TableColumns{b_lo, std::max(b_hi, e_hi) - b_lo + 1, 0, 0};
        return TableColumns{b_lo, b_hi - b_lo + 1, e_lo, e_hi - e_lo + 1};
    };
    const int lc0 = c.left.c0, rc0 = c.right.c0;
    return {runs(std::max(0, lo) - lc0, std::max(0, hi) - lc0, std::min(p.wL, p.wR + lo) - lc0,
                 std::min(p.wL, p.wR + hi) - lc0),
            runs(std::max(0, -hi) - rc0, std::max(0, -lo) - rc0, std::min(p.wR, p.wL - hi) - rc0,
                 std::min(p.wR, p.wL - lo) - rc0)};
}

// One line for explanations: where the prepass and the raw correlation of a normalized problem run.
inline std::string describe_crop(const Problem& p) {
    const NormalizeCrop c = touched_crop(p);
    if (c.empty()) return "no shift of the window overlaps: the output is 0 and nothing else runs";
    if (c.whole(p)) return "the window touches the whole inputs: the prepass covers them";
    return "the window touches " + describe_regions(p, c) + ": the prepass covers these and the raw correlation is " +
           c.raw(p).describe() + " (the whole inputs where the algorithm does not compute that window)";
}

}  // namespace xcorr
