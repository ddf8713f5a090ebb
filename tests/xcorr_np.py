"""The definition of CONVENTIONS.md in NumPy/SciPy terms: the independent implementation the
C++ reference is tested against.

The tests' one independent float64 oracle: it shares no code with the library, whose
own references are lib/reference_cpu.cpp (with lib/reduce.cpp's reductions) and the package's
python/xcorr/_reference.py, so its pairs(), windows and overlap sums are written here again on
purpose; every other copy of those rules calls python/xcorr/_rules.py (or the C++)."""
import numpy as np
from scipy.signal import correlate2d

FORMS = ["one-to-one", "one-to-many", "n-to-mn", "n-to-m"]


def pairs(form, n_left, n_right):
    """(left index, right index) of every output, in output order."""
    if form == "one-to-one":
        return [(0, 0)]
    if form == "one-to-many":
        return [(0, k) for k in range(n_right)]
    if form == "n-to-mn":
        return [(k % n_left, k) for k in range(n_right)]
    if form == "n-to-m":
        return [(i, j) for i in range(n_left) for j in range(n_right)]
    raise ValueError(form)


def correlate(form, left, right, mode="full"):
    """Cross-correlation of float64 stacks, scipy's `mode` (full: shape (count, hL+hR-1, wL+wR-1))."""
    return np.stack([correlate2d(left[i], right[j], mode=mode) for i, j in pairs(form, len(left), len(right))])


def counts(form, rng):
    """Random stack counts that fit the form."""
    if form == "one-to-one":
        return 1, 1
    if form == "one-to-many":
        return 1, int(rng.integers(2, 6))
    n = int(rng.integers(2, 4))
    if form == "n-to-mn":
        return n, n * int(rng.integers(1, 4))
    return n, int(rng.integers(2, 5))


def rel_error(out, ref):
    return float(np.linalg.norm((out.astype(np.float64) - ref).ravel()) / np.linalg.norm(ref.ravel()))


# Output windows (CONVENTIONS.md, "Output windows"): rectangles of shifts (dy0, dy1, dx0, dx1),
# inclusive, for a problem of sizes (hL, wL, hR, wR); computed here independently of the harness.

def full_window(hL, wL, hR, wR):
    return (-(hR - 1), hL - 1, -(wR - 1), wL - 1)


def valid_window(hL, wL, hR, wR):
    """None where neither matrix is at least as large as the other in both dimensions."""
    dh, dw = hL - hR, wL - wR
    if (dh < 0 < dw) or (dw < 0 < dh):
        return None
    return (min(0, dh), max(0, dh), min(0, dw), max(0, dw))


def same_window(hL, wL, hR, wR):
    dy0, dx0 = -((hR - 1) // 2), -((wR - 1) // 2)
    return (dy0, dy0 + hL - 1, dx0, dx0 + wL - 1)


def supports_window(declared, shape, rect):
    """Variant::supports_window: whether a variant declaring the window kinds `declared` (as
    `xcorr list --json` names them) computes rectangle `rect` of a problem of sizes `shape`."""
    dy0, dy1, dx0, dx1 = rect
    return ("shifts" in declared or rect == full_window(*shape)
            or ("valid" in declared and rect == valid_window(*shape))
            or ("same" in declared and rect == same_window(*shape))
            or ("max-shift" in declared and dy0 == -dy1 and dx0 == -dx1))


def shape_refusal(variant, shape, rect):
    """Variant::shape_refusal: the words of the refusal when the `xcorr list --json` entry
    `variant` is not built for a problem of sizes `shape` and window `rect`, else None."""
    hL, wL, hR, wR = shape
    dy0, dy1, dx0, dx1 = rect
    if variant.get("signals_only") and (hL != 1 or hR != 1):
        return "one-dimensional signals only"
    if variant.get("max_shifts") and (dy1 - dy0 + 1) * (dx1 - dx0 + 1) > variant["max_shifts"]:
        return "shifts per pair"
    if variant.get("max_transform"):
        # The library's own rule (a refusal is the library's to state, not the contract's to define).
        from xcsuite.rules import transform_need  # registry.cpp's, 0 where nothing overlaps
        if max(transform_need(dy0, dy1, hL, hR), transform_need(dx0, dx1, wL, wR)) > variant["max_transform"]:
            return "needs a transform of"
    return None


def crop(full, hR, wR, dy0, dy1, dx0, dx1):
    """Shifts dy0..dy1, dx0..dx1 of full outputs (count, hL+hR-1, wL+wR-1), or of one (hL+hR-1,
    wL+wR-1), 0 beyond them."""
    if full.ndim == 2:
        return crop(full[None], hR, wR, dy0, dy1, dx0, dx1)[0]
    count, oh, ow = full.shape
    out = np.zeros((count, dy1 - dy0 + 1, dx1 - dx0 + 1), full.dtype)
    ys = [(i, dy + hR - 1) for i, dy in enumerate(range(dy0, dy1 + 1)) if 0 <= dy + hR - 1 < oh]
    xs = [(j, dx + wR - 1) for j, dx in enumerate(range(dx0, dx1 + 1)) if 0 <= dx + wR - 1 < ow]
    for i, y in ys:
        for j, x in xs:
            out[:, i, j] = full[:, y, x]
    return out


def window_fmas(shape, rect):
    """Multiply-adds of one pair's windowed output: the overlap areas summed over the shifts."""
    hL, wL, hR, wR = shape
    dy0, dy1, dx0, dx1 = rect

    def total(s0, s1, m, n):
        return sum(max(0, min(n, m - s) - max(0, -s)) for s in range(s0, s1 + 1))
    return total(dy0, dy1, hL, hR) * total(dx0, dx1, wL, wR)


# Normalization (CONVENTIONS.md, "Normalization"): the contract's formula with every overlap sum
# a correlation with ones (scipy), so independent of the package's summed-area tables
# (python/xcorr/_reference.py) and of the C++ reference's two-pass direct sums.

CONSTANT_OVERLAP = 1e-6  # the contract's threshold: a part's variance at most this fraction of its matrix's


# normalize.cu's kTableEps: 2u, the unit roundoff of double doubled (zncc_factor says why).
TABLE_EPS = 2.0 ** -52


def table_zncc_factor(s, q, corner, r1, c1, n, var):
    """normalize.cu's zncc_factor (arrays): one side's factor f = n·ΣX'² - (ΣX')² of each overlap from
    its box sums s = ΣX', q = ΣX'² in a summed-area table of X' = X - m, and whether X varies there:
    the contract's test, the part's variance f / n² above 1e-6 of its crop's variance `var`, and f above the table's
    rounding, bounded from `corner` (the table's ΣX'² entry at the box's far corner (r1, c1), in the
    crop's coordinates): f - n·e2 > 2|ΣX'|·e1 with e2 = k·corner, e1 = k·sqrt(r1·c1·corner),
    k = 4(r1 + c1 + 3)·TABLE_EPS, squared as on the GPU (whose segmented rows, past 8192 columns,
    pass c1 capped at their compensated depth, kSegRowDepth; NumPy's cumsum tables have none).
    Returns (f, varies)."""
    f = n * q - s * s
    k = TABLE_EPS * 4.0 * (np.asarray(r1, np.float64) + c1 + 3)
    e2 = k * corner
    g = f - n * e2
    area = np.asarray(r1, np.float64) * c1
    varies = (f > CONSTANT_OVERLAP * n * n * var) & (g > 0) & (g * g > 4 * (s * s) * k * area * e2)
    return f, varies


def centred(X):
    """X - mean(X) in float64 and var(X): the coefficient is the same for any offset, so the model
    sums centred data (raw sums of 30000 + noise would cancel 9 of double's digits) and scales the
    constant-part test by the whole matrix's variance (the contract)."""
    X = X.astype(np.float64)
    return X - X.mean(), X.var()


def zncc_of(n, sl, sr, sll, srr, slr, vl, vr):
    """The contract's coefficient from each overlap's n, ΣL, ΣR, ΣL², ΣR², ΣLR (arrays, float64, of
    centred matrices) and the two whole matrices' variances vl, vr: 0 where n = 0 or a part's
    variance (n·ΣX² - (ΣX)²) / n² is at most 1e-6 of its matrix's."""
    fl, fr = n * sll - sl * sl, n * srr - sr * sr
    ok = (n > 0) & (fl > CONSTANT_OVERLAP * n * n * vl) & (fr > CONSTANT_OVERLAP * n * n * vr)
    out = np.zeros_like(n)
    out[ok] = (n * slr - sl * sr)[ok] / np.sqrt(fl[ok] * fr[ok])
    return out


def zncc_full(L, R):
    """Full zncc output of one pair in float64: every overlap's sums as correlations with ones."""
    (L, vl), (R, vr) = centred(L), centred(R)
    oL, oR = np.ones_like(L), np.ones_like(R)
    return zncc_of(correlate2d(oL, oR), correlate2d(L, oR), correlate2d(oL, R), correlate2d(L * L, oR),
                   correlate2d(oL, R * R), correlate2d(L, R), vl, vr)


def normalized_window(mode, form, left, right, rect):
    """normalized(mode, form, left, right, rect) from direct float64 sums over each shift's overlap
    (cheap for a window of few shifts on large matrices, where the full output is not)."""
    dy0, dy1, dx0, dx1 = rect
    _, hL, wL = left.shape
    _, hR, wR = right.shape
    out = []
    for i, j in pairs(form, len(left), len(right)):
        L, R = left[i].astype(np.float64), right[j].astype(np.float64)
        h, w = min(hL, hR), min(wL, wR)
        c00 = float((L[:h, :w] * R[:h, :w]).sum())
        if mode == "zncc":
            (L, vl), (R, vr) = centred(L), centred(R)
        sums = np.zeros((6, dy1 - dy0 + 1, dx1 - dx0 + 1))
        for a, dy in enumerate(range(dy0, dy1 + 1)):
            r0, r1 = max(0, -dy), min(hR, hL - dy)
            for b, dx in enumerate(range(dx0, dx1 + 1)):
                c0, c1 = max(0, -dx), min(wR, wL - dx)
                if r1 <= r0 or c1 <= c0:
                    continue
                lo, ro = L[r0 + dy:r1 + dy, c0 + dx:c1 + dx], R[r0:r1, c0:c1]
                sums[:, a, b] = [lo.size, lo.sum(), ro.sum(), (lo * lo).sum(), (ro * ro).sum(), (lo * ro).sum()]
        if mode == "zncc":
            out.append(zncc_of(*sums, vl, vr))
        else:
            out.append(np.zeros_like(sums[5]) if c00 == 0 else sums[5] / c00)
    return np.stack(out)


def zero_lag_full(L, R):
    c = correlate2d(L.astype(np.float64), R.astype(np.float64))
    c00 = c[R.shape[0] - 1, R.shape[1] - 1]  # shift (0, 0)
    return np.zeros_like(c) if c00 == 0 else c / c00


def normalized(mode, form, left, right, rect=None):
    """The normalized output stack of the pairs of `form`, cropped to shifts `rect` (0 beyond)."""
    f = zncc_full if mode == "zncc" else zero_lag_full
    full = np.stack([f(left[i], right[j]) for i, j in pairs(form, len(left), len(right))])
    if rect is None:
        return full
    return crop(full, right.shape[1], right.shape[2], *rect)
