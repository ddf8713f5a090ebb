"""The float64 reference on the CPU in NumPy: the definition of docs/CONVENTIONS.md,
C(dy, dx) = sum_{r,c} L[r+dy][c+dx] * R[r][c], for every form and any window, and its two
normalizations (zncc, zero-lag; CONVENTIONS.md, "Normalization"), as lib/reference_cpu.cpp
computes them (the tests check the two against each other, against scipy.signal.correlate2d and
against tests/xcorr_np.py's independent normalization). Vectorised over the pairs and the shifts;
it loops over the smaller matrix's elements, so it is meant for tests and small examples, not for
speed.

The library's reference in Python: lib/reference_cpu.cpp (with lib/reduce.cpp's reductions) is the
same in C++, held equal to this by tests/test_python_package.py. Both stay for now: this one takes
float64 inputs as they are (the C++ one float32) and the suite loads it by path without the compiled
package (xcsuite/peers.py). The tests' independent oracle is tests/xcorr_np.py; the counting rules
(pairs, overlaps) are python/xcorr/_rules.py's."""
import importlib.util
import os
import sys

import numpy as np

try:
    from . import _rules
except ImportError:  # loaded by path (xcsuite.peerbench.reference_module): the module beside this file
    _rules = sys.modules.get("xcorr_rules")
    if _rules is None:
        _spec = importlib.util.spec_from_file_location("xcorr_rules", os.path.join(os.path.dirname(__file__), "_rules.py"))
        _rules = importlib.util.module_from_spec(_spec)
        _spec.loader.exec_module(_rules)
        sys.modules["xcorr_rules"] = _rules


def pair_indices(form, nL, nR):
    """(left index, right index) of every output k, as CONVENTIONS.md's form table maps them
    (_rules.pair_of on every k, as int64 arrays)."""
    return _rules.pair_of(form, nL, nR, np.arange(_rules.out_count(form, nL, nR), dtype=np.int64))


def correlate(form, left, right, window):
    """left (nL, hL, wL), right (nR, hR, wR), window (dy0, dy1, dx0, dx1) inclusive: the
    (out_count, dy1 - dy0 + 1, dx1 - dx0 + 1) float64 result."""
    left = np.asarray(left, dtype=np.float64)
    right = np.asarray(right, dtype=np.float64)
    li, ri = pair_indices(form, left.shape[0], right.shape[0])
    return correlate_pairs(left, right, li, ri, window)


def correlate_pairs(left, right, li, ri, window):
    """correlate() for explicit pair indices (output k: left li[k] with right ri[k])."""
    if left.shape[1] * left.shape[2] < right.shape[1] * right.shape[2]:
        # Loop over the smaller matrix: C_LR(dy, dx) = C_RL(-dy, -dx).
        dy0, dy1, dx0, dx1 = window
        return _pairs(right[ri], left[li], (-dy1, -dy0, -dx1, -dx0))[:, ::-1, ::-1].copy()
    return _pairs(left[li], right[ri], window)


def _pairs(lsel, rsel, window):
    """C of lsel[k] with rsel[k] for every k over the window (loops over rsel's elements)."""
    count, hL, wL = lsel.shape
    _, hR, wR = rsel.shape
    dy0, dy1, dx0, dx1 = window
    out = np.zeros((count, dy1 - dy0 + 1, dx1 - dx0 + 1))
    # Only shifts with an overlap contribute: dy in [-(hR-1), hL-1], dx in [-(wR-1), wL-1].
    ay0, ay1 = max(dy0, -(hR - 1)), min(dy1, hL - 1)
    ax0, ax1 = max(dx0, -(wR - 1)), min(dx1, wL - 1)
    if ay0 > ay1 or ax0 > ax1 or count == 0:
        return out
    ny, nx = ay1 - ay0 + 1, ax1 - ax0 + 1
    # The left padded with zeros so that L[r+dy][c+dx] exists for every (r, c) and kept shift:
    # padded row index = r + dy + (hR - 1).
    pad = np.zeros((count, hL + 2 * (hR - 1), wL + 2 * (wR - 1)))
    pad[:, hR - 1:hR - 1 + hL, wR - 1:wR - 1 + wL] = lsel
    acc = out[:, ay0 - dy0:ay0 - dy0 + ny, ax0 - dx0:ax0 - dx0 + nx]  # a view: written in place
    # A NaN or inf of rsel times the padding's 0 is NaN, but the padding is outside the overlap: where
    # rsel holds one, only the products of elements that overlap are added (CONVENTIONS.md: a map is
    # NaN only where an overlap holds a NaN, as lib/reference_cpu.cpp computes it).
    inside = None
    if not np.isfinite(rsel).all():
        inside = np.zeros(pad.shape[1:], bool)
        inside[hR - 1:hR - 1 + hL, wR - 1:wR - 1 + wL] = True
    for r in range(hR):
        y = r + ay0 + hR - 1
        for c in range(wR):
            x = c + ax0 + wR - 1
            if inside is None:
                term = rsel[:, r, c, None, None] * pad[:, y:y + ny, x:x + nx]
            else:
                with np.errstate(invalid="ignore"):  # inf * 0 outside the overlap, dropped
                    term = np.where(inside[y:y + ny, x:x + nx], rsel[:, r, c, None, None] * pad[:, y:y + ny, x:x + nx], 0.0)
            acc += term
    return out


NORMALIZATIONS = ("none", "zncc", "zero-lag")
CONSTANT_OVERLAP = 1e-6  # CONVENTIONS.md: a part whose variance is at most 1e-6 of its matrix's is constant


def normalized(normalize, form, left, right, window):
    """correlate()'s result under `normalize` ("none", "zncc" or "zero-lag"), float64."""
    if normalize == "none":
        return correlate(form, left, right, window)
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {', '.join(NORMALIZATIONS)}, got {normalize!r}")
    left = np.asarray(left, dtype=np.float64)
    right = np.asarray(right, dtype=np.float64)
    li, ri = pair_indices(form, left.shape[0], right.shape[0])
    if normalize == "zero-lag":
        return _zero_lag(left, right, li, ri, window)
    return _zncc(left, right, li, ri, window)


def _zero_lag(left, right, li, ri, window):
    """C / C(0, 0) per pair; C(0, 0) is the sum over the overlap at shift (0, 0), whether or not
    the window holds it; the whole output of a pair with C(0, 0) = 0 is 0."""
    raw = correlate_pairs(left, right, li, ri, window)
    h, w = min(left.shape[1], right.shape[1]), min(left.shape[2], right.shape[2])
    c00 = np.einsum("kij,kij->k", left[:, :h, :w][li], right[:, :h, :w][ri])
    out = np.zeros_like(raw)
    nz = c00 != 0
    out[nz] = raw[nz] / c00[nz, None, None]
    return out


def _spans(d0, d1, m, n):
    """For shifts d0..d1 along one axis of a left of size m and a right of size n: the right's
    overlapping index range [b, e) and the left's [b + d, e + d), all 0 where nothing overlaps."""
    d = np.arange(d0, d1 + 1)
    b, e = np.maximum(0, -d), np.minimum(n, m - d)
    ok = e > b
    b, e = np.where(ok, b, 0), np.where(ok, e, 0)
    return b, e, np.where(ok, b + d, 0), np.where(ok, e + d, 0)


def _tables(x):
    """Summed-area tables (count, h + 1, w + 1) of a float64 stack, row 0 and column 0 zero."""
    t = np.zeros((x.shape[0], x.shape[1] + 1, x.shape[2] + 1))
    t[:, 1:, 1:] = x.cumsum(1).cumsum(2)
    return t


def _box(t, r0, r1, c0, c1):
    """Sums of boxes rows [r0, r1) x columns [c0, c1) (1-D index arrays, outer product) of tables t."""
    r0, r1, c0, c1 = r0[:, None], r1[:, None], c0[None, :], c1[None, :]
    return t[:, r1, c1] - t[:, r0, c1] - t[:, r1, c0] + t[:, r0, c0]


def _changes(x):
    """Summed-area tables (int64) of where each matrix of a stack changes from one element to the
    next, along rows (h + 1, w) and down columns (h, w + 1): a box holds one value exactly when it
    holds no change, counted exactly in integers, whatever the values' magnitude."""
    across = np.zeros((x.shape[0], x.shape[1] + 1, x.shape[2]), np.int64)
    across[:, 1:, 1:] = (x[:, :, 1:] != x[:, :, :-1]).cumsum(1).cumsum(2)
    down = np.zeros((x.shape[0], x.shape[1], x.shape[2] + 1), np.int64)
    down[:, 1:, 1:] = (x[:, 1:, :] != x[:, :-1, :]).cumsum(1).cumsum(2)
    return across, down


def _varies(x, r0, r1, c0, c1):
    """Whether each box rows [r0, r1) x columns [c0, c1) (outer product) of each matrix of x holds
    two different values (empty boxes: False): its changes along rows within columns [c0, c1 - 1)
    and down columns within rows [r0, r1 - 1), from _changes."""
    across, down = _changes(x)
    c1m, r1m = np.maximum(c1 - 1, c0), np.maximum(r1 - 1, r0)
    return (_box(across, r0, r1, c0, c1m) > 0) | (_box(down, r0, r1m, c0, c1) > 0)


BORDER = 1e-4  # CONVENTIONS.md's accuracy line: parts with a variance below 1e-4 of their matrix's (a
# standard deviation below 1e-2 of it) are near the constant rule's border, where either answer is right


def zncc_border(form, left, right, window):
    """Where the contract lets a zncc output be either 0 or the coefficient (bool, the shape of
    normalized()'s output): either overlapping part has a variance below BORDER of its whole matrix's
    (n > 0). What a check of another implementation exempts; the reference itself follows the rule."""
    left, right = np.asarray(left, np.float64), np.asarray(right, np.float64)
    li, ri = pair_indices(form, left.shape[0], right.shape[0])
    dy0, dy1, dx0, dx1 = window
    (_, hL, wL), (_, hR, wR) = left.shape, right.shape
    rb, re, lrb, lre = _spans(dy0, dy1, hL, hR)
    cb, ce, lcb, lce = _spans(dx0, dx1, wL, wR)
    n = ((re - rb)[:, None] * (ce - cb)[None, :]).astype(np.float64)
    near = np.zeros((len(li),) + n.shape, bool)
    for x, idx, r0, r1, c0, c1 in ((left, li, lrb, lre, lcb, lce), (right, ri, rb, re, cb, ce)):
        xs, v = _centred(x)
        s, q = _box(_tables(xs), r0, r1, c0, c1)[idx], _box(_tables(xs * xs), r0, r1, c0, c1)[idx]
        near |= (n > 0) & (n * q - s * s < BORDER * n * n * v[idx, None, None])
    return near


def _zncc(left, right, li, ri, window):
    """Pearson's coefficient of the two overlapping parts per shift: (n·ΣLR - ΣL·ΣR) /
    sqrt((n·ΣL² - (ΣL)²)(n·ΣR² - (ΣR)²)), 0 where n = 0 or either part is constant.

    The coefficient does not change when a constant is added to a matrix or it is scaled by a
    positive factor, and neither does this computation: every matrix is first shifted by its own
    mean (L' = L - mean(L)), so the sums are of the fluctuations, and the two factors
    f = n·ΣX'² - (ΣX')², which equal the original ones exactly, cancel nothing on data such as
    30000 + noise. ΣLR' comes from the direct correlation of L' with R'; the overlap sums ΣX', ΣX'²
    from summed-area tables. A part is constant (CONVENTIONS.md) where its variance f / n² is at most
    1e-6 of its whole matrix's variance (relative to the spread, never to the magnitude), or where
    it holds a single value (exactly constant: zero padding, a saturated patch), which integer
    tables of the matrix's changes tell exactly: the factor from the tables is rounding noise there."""
    dy0, dy1, dx0, dx1 = window
    (_, hL, wL), (_, hR, wR) = left.shape, right.shape
    ls, vl = _centred(left)
    rs, vr = _centred(right)
    raw = correlate_pairs(ls, rs, li, ri, window)
    rb, re, lrb, lre = _spans(dy0, dy1, hL, hR)
    cb, ce, lcb, lce = _spans(dx0, dx1, wL, wR)
    n = ((re - rb)[:, None] * (ce - cb)[None, :]).astype(np.float64)
    # The tables of the values that are numbers, and where an overlap holds a NaN (the C++
    # reference's coefficient is NaN there unless the other part is constant; a NaN in a
    # summed-area table would spoil every box past it instead).
    nl, nr = np.isnan(ls), np.isnan(rs)
    ls0, rs0 = np.where(nl, 0.0, ls), np.where(nr, 0.0, rs)
    sl, ql = _box(_tables(ls0), lrb, lre, lcb, lce)[li], _box(_tables(ls0 * ls0), lrb, lre, lcb, lce)[li]
    sr, qr = _box(_tables(rs0), rb, re, cb, ce)[ri], _box(_tables(rs0 * rs0), rb, re, cb, ce)[ri]
    nan_l = _box(_tables(nl.astype(np.float64)), lrb, lre, lcb, lce)[li] > 0
    nan_r = _box(_tables(nr.astype(np.float64)), rb, re, cb, ce)[ri] > 0
    fl, fr = n * ql - sl * sl, n * qr - sr * sr
    # A part holding a NaN is never constant (as in C++, where its sum of squares is NaN and fails
    # the test); the other part still can be, and a constant part makes the coefficient 0.
    var_l = nan_l | (_varies(left, lrb, lre, lcb, lce)[li] & (fl > CONSTANT_OVERLAP * n * n * vl[li, None, None]))
    var_r = nan_r | (_varies(right, rb, re, cb, ce)[ri] & (fr > CONSTANT_OVERLAP * n * n * vr[ri, None, None]))
    ok = (n > 0) & var_l & var_r
    out = np.zeros_like(raw)
    out[ok] = (n * raw - sl * sr)[ok] / np.sqrt(fl[ok] * fr[ok])
    out[ok & (nan_l | nan_r)] = np.nan
    return np.clip(out, -1.0, 1.0, out=out)  # a coefficient; rounding may step past ±1 by an ulp


def _centred(x):
    """A float64 stack shifted by each matrix's mean, and each matrix's variance, both over the
    values that are numbers (lib/xcorr/reference_element.hpp's matrix_variance): a NaN keeps its
    place and spoils no other value; an all-NaN matrix has mean and variance 0."""
    nan = np.isnan(x)
    count = (~nan).sum(axis=(1, 2))
    mean = np.where(nan, 0.0, x).sum(axis=(1, 2)) / np.maximum(count, 1)
    xs = x - mean[:, None, None]
    var = np.where(nan, 0.0, xs * xs).sum(axis=(1, 2)) / np.maximum(count, 1)
    return xs, var


# --- Reductions: peaks and the maximum over the rights (CONVENTIONS.md, "Reductions: peaks and
# maxima"; lib/xcorr/reduce.hpp's reference_peaks and reference_max_over_rights) ------------------

SUBPIXELS = ("none", "parabolic", "gaussian")


def subpixel_offset(cm, c0, cp, method):
    """The fit's offset along one axis through c0 and its neighbours cm (at -1) and cp (at +1):
    parabolic d = (cm - cp) / (2 (cm - 2 c0 + cp)); gaussian the same on ln c where all three are
    positive, else parabolic; "none" 0. d = 0 where the denominator is 0 or the result is not
    finite; |d| clamped to 0.5. (The window's edge, where a neighbour is missing, is the caller's.)"""
    if method == "none":
        return 0.0
    cm, c0, cp = float(cm), float(c0), float(cp)
    if method == "gaussian" and cm > 0 and c0 > 0 and cp > 0:
        cm, c0, cp = np.log(cm), np.log(c0), np.log(cp)
    den = 2.0 * (cm - 2.0 * c0 + cp)
    if den == 0 or not np.isfinite(den):
        return 0.0
    with np.errstate(all="ignore"):
        d = (cm - cp) / den
    if not np.isfinite(d):
        return 0.0
    return float(min(0.5, max(-0.5, d)))


def peaks(m, k, min_distance=0, subpixel="parabolic", dy0=0, dx0=0):
    """The peaks of one map m (h, w), element (i, j) at shift (dy0 + i, dx0 + j), exactly as the
    contract takes them: repeatedly the largest value that is not NaN and not suppressed (equal
    values: the smaller row-major index), then every value within Chebyshev distance min_distance
    of it suppressed (0: only itself). Returns (value (k,) float64, shift (k, 2) int64 (dy, dx),
    subpixel (k, 2) float64 = shift + the fit's offsets); fewer than k peaks: the rest absent,
    value NaN, shift (0, 0), subpixel NaN."""
    m = np.asarray(m, dtype=np.float64)
    h, w = m.shape
    flat = m.ravel()
    finite = np.flatnonzero(~np.isnan(flat))
    # Descending by value, a stable sort: equal values stay in row-major order (smaller index first).
    order = finite[np.argsort(-flat[finite], kind="stable")]
    if min_distance == 0:
        taken = order[:k].tolist()
    else:
        taken, suppressed, r = [], np.zeros((h, w), bool), min_distance
        for i in order.tolist():
            y, x = divmod(i, w)
            if suppressed[y, x]:
                continue
            taken.append(i)
            if len(taken) == k:
                break
            suppressed[max(0, y - r):y + r + 1, max(0, x - r):x + r + 1] = True
    value = np.full(k, np.nan)
    shift = np.zeros((k, 2), np.int64)
    sub = np.full((k, 2), np.nan)
    for n, i in enumerate(taken):
        y, x = divmod(i, w)
        value[n] = flat[i]
        shift[n] = dy0 + y, dx0 + x
        oy = subpixel_offset(m[y - 1, x], m[y, x], m[y + 1, x], subpixel) if 0 < y < h - 1 else 0.0
        ox = subpixel_offset(m[y, x - 1], m[y, x], m[y, x + 1], subpixel) if 0 < x < w - 1 else 0.0
        sub[n] = dy0 + y + oy, dx0 + x + ox
    return value, shift, sub


def peaks_of_maps(maps, k, min_distance=0, subpixel="parabolic", dy0=0, dx0=0):
    """peaks() of every map of a stack (count, h, w): value (count, k), shift (count, k, 2),
    subpixel (count, k, 2)."""
    maps = np.asarray(maps, dtype=np.float64)
    count = maps.shape[0]
    value, shift, sub = np.full((count, k), np.nan), np.zeros((count, k, 2), np.int64), np.full((count, k, 2), np.nan)
    for c in range(count):
        value[c], shift[c], sub[c] = peaks(maps[c], k, min_distance, subpixel, dy0, dx0)
    return value, shift, sub


def reduced_lefts(form, nL, nR):
    """(lefts, rights per left) of a maximum over the rights (reduce.hpp's reduced_lefts and
    rights_per_left); ValueError for one-to-one, which has no rights to reduce over."""
    if form == "one-to-one":
        raise ValueError("max_over_rights needs rights to reduce over: one-to-one has one right per left "
                         "(pass the rights as a stack (M, h, w))")
    if form == "one-to-many":
        return 1, nR
    if form == "n-to-m":
        return nL, nR
    return nL, nR // nL  # n-to-mn: group j is rights i + nL*j


def right_maps(form, nL, nR, maps):
    """The maps (out_count, h, w) of a form's outputs regrouped per left and per right index:
    (lefts, rights per left, h, w); right j of left i is right j (one-to-many, n-to-m) or right
    i + nL*j (n-to-mn, output k = i + nL*j)."""
    lefts, per = reduced_lefts(form, nL, nR)
    maps = np.asarray(maps)
    h, w = maps.shape[-2:]
    if form == "n-to-mn":
        return maps.reshape(per, lefts, h, w).swapaxes(0, 1)
    return maps.reshape(lefts, per, h, w)


def max_over_rights(grouped, stats=False, first_index=0, previous=None):
    """The maximum over the rights of maps grouped (lefts, rights, h, w) (right_maps): per left and
    element the largest value (NaN skipped; all NaN: NaN) and the index of the right that gives it
    (the smallest among equal values; none: -1), rights numbered from first_index; with stats also
    the sum and the sum of squares over the rights (float64, NaN-propagating). previous: an earlier
    result (value, index[, sum, sumsq]) over other rights to continue. Returns a tuple of float64
    value, int32 index[, float64 sum, sumsq]."""
    g = np.asarray(grouped, dtype=np.float64)
    lefts, count, h, w = g.shape
    value = np.full((lefts, h, w), np.nan)
    index = np.full((lefts, h, w), -1, np.int64)
    if previous is not None:
        value[...] = previous[0]
        index[...] = previous[1]
    for j in range(count):
        v, r = g[:, j], first_index + j
        better = ~np.isnan(v) & (np.isnan(value) | (v > value) | ((v == value) & (r < index)))
        value[better] = v[better]
        index[better] = r
    index = index.astype(np.int32)
    if not stats:
        return value, index
    s, q = g.sum(axis=1), (g * g).sum(axis=1)
    if previous is not None:
        s, q = s + np.asarray(previous[2], np.float64), q + np.asarray(previous[3], np.float64)
    return value, index, s, q
