// Reductions (reduce.hpp): their names and checks, the float64 reference of peaks and of the
// maximum over the rights, and the checks of a GPU answer against reference maps. The device side
// (chunked maps, the reduction kernels) is lib/reduce/.
#include "xcorr/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace xcorr {

const char* subpixel_name(Subpixel s) {
    switch (s) {
        case Subpixel::None: return "none";
        case Subpixel::Parabolic: return "parabolic";
        case Subpixel::Gaussian: return "gaussian";
    }
    return "?";
}

Subpixel parse_subpixel(const std::string& name) {
    for (Subpixel s : {Subpixel::None, Subpixel::Parabolic, Subpixel::Gaussian})
        if (name == subpixel_name(s)) return s;
    throw UsageError("unknown sub-pixel fit '" + name + "' (known: parabolic, gaussian, none)");
}

const char* reduction_name(ReductionKind k) {
    switch (k) {
        case ReductionKind::Map: return "map";
        case ReductionKind::Peaks: return "peaks";
        case ReductionKind::MaxOverRights: return "max-over-rights";
    }
    return "?";
}

int64_t reduced_lefts(const Problem& p) {
    switch (p.form) {
        case Form::NToMn:
        case Form::NToM: return p.nL;
        default: return 1;
    }
}

int64_t rights_per_left(const Problem& p) {
    switch (p.form) {
        case Form::OneToOne: return 1;
        case Form::NToMn: return p.nR / p.nL;
        default: return p.nR;
    }
}

void Reduction::check(const Problem& p) const {
    if (kind == ReductionKind::Map) return;
    if (kind == ReductionKind::Peaks) {
        if (k < 1) throw UsageError("peaks: k must be at least 1, got " + std::to_string(k));
        if (min_distance < 0)
            throw UsageError("peaks: min_distance must be at least 0, got " + std::to_string(min_distance));
    }
    if (kind == ReductionKind::MaxOverRights && p.form == Form::OneToOne)
        throw UsageError("the maximum over the rights needs a stack of rights: one-to-one has one right per left "
                         "(use one-to-many, n-to-m or n-to-mn)");
    if (scratch_bytes < 0) throw UsageError("reduction scratch_bytes must be at least 0");
}

std::string Reduction::describe() const {
    switch (kind) {
        case ReductionKind::Peaks:
            return "peaks k=" + std::to_string(k) +
                   (min_distance ? " min-distance " + std::to_string(min_distance) : std::string()) + " " +
                   subpixel_name(subpixel);
        case ReductionKind::MaxOverRights: return stats ? "max-over-rights stats" : "max-over-rights";
        default: return "map";
    }
}

double subpixel_offset(double cm, double c0, double cp, Subpixel s) {
    if (s == Subpixel::None) return 0;
    if (s == Subpixel::Gaussian && cm > 0 && c0 > 0 && cp > 0) {
        cm = std::log(cm), c0 = std::log(c0), cp = std::log(cp);
    }
    const double den = 2 * (cm - 2 * c0 + cp);
    if (den == 0 || !std::isfinite(den)) return 0;
    const double d = (cm - cp) / den;
    if (!std::isfinite(d)) return 0;
    return std::clamp(d, -0.5, 0.5);
}

namespace {
// The fit at flat index `i` of an h x w map, per axis (0 on the window's edge).
void fit_at(const double* map, int h, int w, int64_t i, Subpixel s, double& ddy, double& ddx) {
    const int y = int(i / w), x = int(i % w);
    ddy = (y == 0 || y == h - 1) ? 0 : subpixel_offset(map[i - w], map[i], map[i + w], s);
    ddx = (x == 0 || x == w - 1) ? 0 : subpixel_offset(map[i - 1], map[i], map[i + 1], s);
}

// Marks (or counts) the elements within Chebyshev distance r of element i.
template <typename F>
void for_square(int h, int w, int64_t i, int r, F&& f) {
    const int y = int(i / w), x = int(i % w);
    for (int yy = std::max(0, y - r); yy <= std::min(h - 1, y + r); ++yy)
        for (int xx = std::max(0, x - r); xx <= std::min(w - 1, x + r); ++xx) f(int64_t(yy) * w + xx);
}
}  // namespace

std::vector<Peak> reference_peaks(const double* map, int h, int w, int dy0, int dx0, const Reduction& r) {
    const int64_t n = int64_t(h) * w;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<Peak> out(size_t(r.k), Peak{nan, -1, nan, nan});
    std::vector<char> suppressed(size_t(n), 0);
    for (int round = 0; round < r.k; ++round) {
        int64_t best = -1;
        for (int64_t i = 0; i < n; ++i)
            if (!suppressed[i] && !std::isnan(map[i]) && (best < 0 || map[i] > map[best])) best = i;  // ties: smaller i
        if (best < 0) break;
        double ddy, ddx;
        fit_at(map, h, w, best, r.subpixel, ddy, ddx);
        out[size_t(round)] = Peak{map[best], best, dy0 + int(best / w) + ddy, dx0 + int(best % w) + ddx};
        for_square(h, w, best, r.min_distance, [&](int64_t j) { suppressed[j] = 1; });
    }
    return out;
}

void reference_max_over_rights(const Problem& p, const double* maps, double* value, int32_t* index, double* sum,
                               double* sumsq) {
    const int64_t n = int64_t(p.out_h()) * p.out_w(), lefts = reduced_lefts(p);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::fill(value, value + lefts * n, nan);
    std::fill(index, index + lefts * n, -1);
    if (sum) std::fill(sum, sum + lefts * n, 0.0), std::fill(sumsq, sumsq + lefts * n, 0.0);
    const PairMap pm = pair_map(p);
    // Output k in increasing order visits each left's rights in increasing order (one-to-many: k;
    // n-to-m: k mod nR; n-to-mn: k div nL), so a strict > keeps the smallest index among ties.
    for (int64_t k = 0; k < p.out_count(); ++k) {
        const int64_t i = p.form == Form::OneToMany ? 0 : pm.left_of(k);
        const int32_t j = int32_t(p.form == Form::NToMn ? k / p.nL : p.form == Form::NToM ? k % p.nR : k);
        const double* m = maps + k * n;
        for (int64_t e = 0; e < n; ++e) {
            const int64_t o = i * n + e;
            if (!std::isnan(m[e]) && (index[o] < 0 || m[e] > value[o])) value[o] = m[e], index[o] = j;
            if (sum) sum[o] += m[e], sumsq[o] += m[e] * m[e];
        }
    }
}

namespace {
void fail(PeakCheck& out, int max_lines, const std::string& what, const std::string& line) {
    ++out.failed;
    if (int(out.failures.size()) < max_lines) out.failures.push_back(what + ": " + line);
}
std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.9g", v);
    return b;
}
}  // namespace

void check_peaks(const double* ref, int h, int w, int dy0, int dx0, const Reduction& r, const float* value,
                 const int32_t* shift, const float* subpixel, double bound, PeakCheck& out, const std::string& what,
                 int max_lines, bool coverage) {
    const int64_t n = int64_t(h) * w;
    std::vector<char> covered(size_t(n), 0);
    std::vector<int64_t> taken;
    bool absent_seen = false;
    double last = std::numeric_limits<double>::infinity();
    for (int q = 0; q < r.k; ++q) {
        const double v = value[q];
        const int sy = shift[2 * q], sx = shift[2 * q + 1];
        if (std::isnan(v)) {
            absent_seen = true;
            if (sy != 0 || sx != 0) fail(out, max_lines, what, "absent peak " + std::to_string(q) + " has a shift");
            if (!std::isnan(subpixel[2 * q]) || !std::isnan(subpixel[2 * q + 1]))
                fail(out, max_lines, what, "absent peak " + std::to_string(q) + " has a sub-pixel shift");
            continue;
        }
        const std::string tag = "peak " + std::to_string(q) + " at (" + std::to_string(sy) + ", " + std::to_string(sx) + ")";
        if (absent_seen) fail(out, max_lines, what, tag + " follows an absent one");
        const int y = sy - dy0, x = sx - dx0;
        if (y < 0 || y >= h || x < 0 || x >= w) {
            fail(out, max_lines, what, tag + " is outside the window");
            continue;
        }
        const int64_t i = int64_t(y) * w + x;
        if (!(std::fabs(v - ref[i]) <= bound))
            fail(out, max_lines, what, tag + ": value " + num(v) + ", the reference " + num(ref[i]) + " (bound " + num(bound) + ")");
        if (v > last) fail(out, max_lines, what, tag + " is larger than the peak before it");
        last = v;
        for (int64_t t : taken)
            if (std::max(std::abs(int(t / w) - y), std::abs(int(t % w) - x)) <= r.min_distance)
                fail(out, max_lines, what, tag + " is within min_distance of an earlier peak");
        taken.push_back(i);
        for_square(h, w, i, r.min_distance, [&](int64_t j) { covered[j] = 1; });
        // The fit on the reference's values at this shift. A fit through three almost level values
        // moves by about bound / |denominator| under the map's own error: that much is allowed
        // beside the contract's 0.01, and where a value is within the bound of 0 a gaussian fit
        // may fall back to the parabola on either side.
        for (int axis = 0; axis < 2; ++axis) {
            const bool edge = axis == 0 ? (y == 0 || y == h - 1) : (x == 0 || x == w - 1);
            const int64_t step = axis == 0 ? w : 1;
            const double base = axis == 0 ? sy : sx;
            double want = base, slack = 0.01;
            double alt = want;
            if (!edge && r.subpixel != Subpixel::None) {
                const double cm = ref[i - step], c0 = ref[i], cp = ref[i + step];
                want = base + subpixel_offset(cm, c0, cp, r.subpixel);
                alt = r.subpixel == Subpixel::Gaussian ? base + subpixel_offset(cm, c0, cp, Subpixel::Parabolic) : want;
                double den = std::fabs(cm - 2 * c0 + cp), scale = bound;
                if (r.subpixel == Subpixel::Gaussian && cm > bound && c0 > bound && cp > bound) {
                    den = std::fabs(std::log(cm) - 2 * std::log(c0) + std::log(cp));
                    scale = bound / std::min({cm, c0, cp});
                }
                slack += den > 0 ? std::min(1.0, 3 * scale / den) : 1.0;
            }
            // The position is stored in float32 (docs/CONVENTIONS.md): beyond 2^17 lags its rounding,
            // up to half a float's spacing (|position| 2^-24), passes 0.01 and is allowed.
            slack += std::fabs(want) * 0x1p-24;
            const double got = subpixel[2 * q + axis];
            const bool near_zero = r.subpixel == Subpixel::Gaussian && !edge &&
                                   (std::fabs(ref[i - step]) <= bound || std::fabs(ref[i + step]) <= bound ||
                                    std::fabs(ref[i]) <= bound);
            // Inputs holding NaN (coverage false): the variant's neighbours may be NaN where the
            // reference's are not, and a fit through a NaN is 0: the integer shift is accepted too.
            if (!(std::fabs(got - want) <= slack || (near_zero && std::fabs(got - alt) <= slack) ||
                  (!coverage && got == base)))
                fail(out, max_lines, what,
                     tag + ": sub-pixel " + (axis ? "dx " : "dy ") + num(got) + ", the reference's fit " + num(want));
        }
    }
    // Nothing left out: every reference value outside the taken peaks' squares is at most the k-th
    // value (plus the bound); with fewer than k peaks there must be none left at all.
    if (!coverage) return;
    const double kth = absent_seen ? -std::numeric_limits<double>::infinity() : last;
    int64_t worst = -1;
    for (int64_t e = 0; e < n; ++e)
        if (!covered[e] && !std::isnan(ref[e]) && ref[e] > kth + bound && (worst < 0 || ref[e] > ref[worst])) worst = e;
    if (worst >= 0)
        fail(out, max_lines, what,
             "the reference's " + num(ref[worst]) + " at (" + std::to_string(dy0 + worst / w) + ", " +
                 std::to_string(dx0 + worst % w) + ") is larger than the " +
                 (absent_seen ? std::string("last peak, and peaks are missing") : "k-th peak's " + num(kth)) +
                 " and was not taken");
}

void check_max_over_rights(const std::vector<const double*>& maps, int64_t n, const float* value, const int32_t* index,
                           const double* sum, const double* sumsq, double bound, PeakCheck& out,
                           const std::string& what, int max_lines, bool coverage) {
    const int64_t m = int64_t(maps.size());
    for (int64_t e = 0; e < n; ++e) {
        double best = std::numeric_limits<double>::quiet_NaN(), s = 0, s2 = 0, amax = 0;
        for (int64_t j = 0; j < m; ++j) {
            const double v = maps[size_t(j)][e];
            if (!std::isnan(v) && (std::isnan(best) || v > best)) best = v;
            s += v, s2 += v * v;
            amax = std::max(amax, std::fabs(v));
        }
        const std::string at = "element " + std::to_string(e);
        if (!coverage) {
            if (std::isnan(value[e]) ? index[e] != -1 : index[e] < 0 || index[e] >= m)
                fail(out, max_lines, what, at + ": " + num(value[e]) + " from right " + std::to_string(index[e]));
            else if (!std::isnan(value[e]) && !(std::fabs(maps[size_t(index[e])][e] - value[e]) <= bound))
                fail(out, max_lines, what, at + ": right " + std::to_string(index[e]) + " holds " +
                                               num(maps[size_t(index[e])][e]) + " there, not " + num(value[e]));
            continue;
        }
        if (std::isnan(best)) {
            if (!std::isnan(value[e]) || index[e] != -1)
                fail(out, max_lines, what, at + ": every right's value is NaN, got " + num(value[e]) + " from right " +
                                               std::to_string(index[e]));
            continue;
        }
        if (!(std::fabs(value[e] - best) <= bound))
            fail(out, max_lines, what, at + ": maximum " + num(value[e]) + ", the reference " + num(best));
        if (index[e] < 0 || index[e] >= m)
            fail(out, max_lines, what, at + ": index " + std::to_string(index[e]) + " is not a right");
        else if (!(std::fabs(maps[size_t(index[e])][e] - value[e]) <= bound))
            fail(out, max_lines, what, at + ": right " + std::to_string(index[e]) + " holds " +
                                           num(maps[size_t(index[e])][e]) + " there, not " + num(value[e]));
        if (sum) {
            // Each map value is within `bound`: the sum within m bounds, the sum of squares within
            // 2 |v| bound + bound^2 per right (with rounding in double beside it).
            // A NaN in any right's map makes both sums NaN (they propagate it): that agrees.
            const bool nan_sums = std::isnan(s) && std::isnan(sum[e]) && std::isnan(s2) && std::isnan(sumsq[e]);
            if (nan_sums) continue;
            if (!(std::fabs(sum[e] - s) <= m * bound * 1.01 + 1e-12 * std::fabs(s)))
                fail(out, max_lines, what, at + ": sum " + num(sum[e]) + ", the reference " + num(s));
            if (!(std::fabs(sumsq[e] - s2) <= m * (2 * amax + bound) * bound * 1.01 + 1e-12 * s2))
                fail(out, max_lines, what, at + ": sum of squares " + num(sumsq[e]) + ", the reference " + num(s2));
        }
    }
}

}  // namespace xcorr
