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

// One line for explanations: where the prepass and the raw correlation of a normalized problem run.
inline std::string describe_crop(const Problem& p) {
    const NormalizeCrop c = touched_crop(p);
    if (c.empty()) return "no shift of the window overlaps: the output is 0 and nothing else runs";
    if (c.whole(p)) return "the window touches the whole inputs: the prepass covers them";
    return "the window touches " + describe_regions(p, c) + ": the prepass covers these and the raw correlation is " +
           c.raw(p).describe() + " (the whole inputs where the algorithm does not compute that window)";
}

}  // namespace xcorr
