"""Reductions in the Python package: xcorr.peaks2d, xcorr.peaks1d, xcorr.max_over_rights
and Plan(reduce=...), against docs/CONVENTIONS.md, "Reductions: peaks and maxima".

CPU (algorithm="reference", the float64 NumPy reference): what a user reads from them. A template
planted at a known shift in noise is peak 0 at that shift (every form, several windows, raw and
zncc); a PIV pair displaced by a fraction of a pixel gives that displacement by the gaussian fit;
a trace's lag is found; ties go to the smaller shift; min_distance suppresses greedily; k beyond
the window gives absent tails; NaN values are never taken; max_over_rights names the planted
template and its sums are numpy's over correlate2d's maps; batches with out=/first_index give one
call's answer; every bad argument is a ValueError.
GPU (skipped here with the reason): every algorithm's peaks and maxima through PyTorch, CuPy and
NumPy against the reference maps, by the contract's "correct when" clauses (check_peaks and
check_max below, which the CPU tests also try on the reference's own answer and on wrong ones)."""
import os

import numpy as np
import pytest
from conftest import seeded_rng

try:
    import xcorr
    from xcorr import _reference
except ImportError as e:
    if os.environ.get("XCORR_NO_PYTHON_PACKAGE"):
        pytest.skip(f"the package xcorr is not installed (XCORR_NO_PYTHON_PACKAGE): {e}", allow_module_level=True)
    raise ImportError(f"the package xcorr does not import ({e}): scripts/setup-env installs it") from None

REF = dict(algorithm="reference")


def plant(form, lshape, rshape, rng, slots, noise=1.0):
    """Lefts of noise with every output pair's right planted in its left at a known place: returns
    (left, right, where) with where[k] the (dy, dx) of output k (CONVENTIONS.md's order), the shift
    at which output k's map peaks."""
    left = noise * rng.standard_normal(lshape)
    right = rng.standard_normal(rshape)
    L = left.reshape((-1,) + lshape[-2:])
    R = right.reshape((-1,) + rshape[-2:])
    li, ri = _reference.pair_indices(form, L.shape[0], R.shape[0])
    used, where = {}, []
    h, w = R.shape[1:]
    for i, j in zip(li, ri):
        n = used.get(i, 0)
        used[i] = n + 1
        y, x = slots[(n + i) % len(slots)]  # each left fills its slots in another order
        L[i, y:y + h, x:x + w] = R[j]
        where.append((y, x))
    return left, right, np.array(where)


# Three places that do not overlap for 7 x 9 rights in 48 x 52 lefts, inside every window below.
SLOTS = [(3, 1), (12, 13), (2, 24)]
PLANT_FORMS = {
    "one-to-one": ((48, 52), (7, 9)),
    "one-to-many": ((48, 52), (3, 7, 9)),
    "n-to-mn": ((2, 48, 52), (4, 7, 9)),
    "n-to-m": ((2, 48, 52), (3, 7, 9)),
}
PLANT_WINDOWS = {"full": {}, "valid": dict(mode="valid"), "same": dict(mode="same"),
                 "max-shift": dict(max_shift=(20, 25)), "shifts": dict(shifts=((2, 30), (0, 40)))}
# zncc only where every shift overlaps the whole right: an overlap of two elements has a coefficient
# of +-1, so the full window's corners would win.
PLANT_CASES = [(w, None) for w in PLANT_WINDOWS] + [("valid", "zncc"), ("shifts", "zncc")]


@pytest.mark.parametrize("wname,normalize", PLANT_CASES)
@pytest.mark.parametrize("form", list(PLANT_FORMS))
def test_a_planted_template_is_peak_0_at_its_shift(form, wname, normalize):
    ls, rs = PLANT_FORMS[form]
    rng = seeded_rng(("plant", form, wname, normalize))
    left, right, where = plant(form, ls, rs, rng, SLOTS)
    window = PLANT_WINDOWS[wname]
    p = xcorr.peaks2d(left, right, k=2, form=form, normalize=normalize, **window, **REF)
    lead = xcorr.correlate2d(left, right, form=form, **window, **REF).shape[:-2]
    assert isinstance(p, xcorr.Peaks) and p.value.shape == lead + (2,) and p.shift.shape == lead + (2, 2)
    assert p.subpixel.shape == lead + (2, 2) and p.shift.dtype == np.int32
    np.testing.assert_array_equal(p.shift.reshape(-1, 2, 2)[:, 0], where)
    value = p.value.reshape(-1, 2)
    assert (value[:, 0] > value[:, 1]).all()  # descending
    if normalize == "zncc":
        np.testing.assert_allclose(value[:, 0], 1.0, atol=1e-12)
    # the fit: an exact match is a sharp peak; within half a pixel of the shift, never NaN
    assert (np.abs(p.subpixel.reshape(-1, 2, 2)[:, 0] - where) <= 0.5).all()


def gaussian_particles(shape, centres, sigma=1.3):
    y, x = np.mgrid[:shape[0], :shape[1]]
    return sum(np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * sigma ** 2)) for cy, cx in centres)


def piv_frames(rng, d, n):
    """n window pairs of 32 x 32 particle images (frame A's, frame B's), B's particles A's moved by d.
    Particles inside the window (none leaves it) and at least 8 px apart (the correlation of two
    different particles lies 8 px or more from the peak, outside its fit): a jittered grid."""
    frames_a, frames_b = [], []
    for _ in range(n):
        centres = np.array([(8, 8), (8, 20), (20, 8), (20, 20)]) + rng.uniform(-2, 2, size=(4, 2))
        frames_a.append(gaussian_particles((32, 32), centres))
        frames_b.append(gaussian_particles((32, 32), centres + d))
    return np.array(frames_a), np.array(frames_b)


@pytest.mark.parametrize("d", [(0.3, 0.0), (-0.2, 0.4), (2.35, -1.3)])
def test_piv_sub_pixel_displacement_by_the_gaussian_fit(d):
    """Window pairs (n-to-mn, one frame's window with the other's) of particle images displaced by
    d: the gaussian fit of peak 0 gives d within 0.05 px; parabolic is off by more (the reason
    PIV uses gaussian), "none" gives the integer shift."""
    a, b = piv_frames(seeded_rng(("piv", d)), d, 4)
    # C(dy, dx) = sum b[r + dy, c + dx] a[r, c]: b holds a's particles moved by d, so the peak is at d.
    g = xcorr.peaks2d(b, a, form="n-to-mn", max_shift=8, subpixel="gaussian", **REF)
    assert g.value.shape == (4, 1) and g.subpixel.shape == (4, 1, 2)
    np.testing.assert_allclose(g.subpixel[:, 0], np.broadcast_to(d, (4, 2)), atol=0.05)
    np.testing.assert_array_equal(g.shift[:, 0], np.broadcast_to(np.round(d), (4, 2)))
    none = xcorr.peaks2d(b, a, form="n-to-mn", max_shift=8, subpixel="none", **REF)
    np.testing.assert_array_equal(none.subpixel, g.shift)


def test_a_single_blob_shifted_by_0_3_px():
    a = gaussian_particles((31, 31), [(15, 15)], sigma=2.0)
    b = gaussian_particles((31, 31), [(15.3, 15)], sigma=2.0)
    p = xcorr.peaks2d(b, a, subpixel="gaussian", mode="same", **REF)
    assert p.shift[0].tolist() == [0, 0]
    assert abs(p.subpixel[0, 0] - 0.3) < 0.05 and abs(p.subpixel[0, 1]) < 1e-9


@pytest.mark.parametrize("window", [{}, dict(mode="same"), dict(max_lag=120), dict(lags=(-10, 200))])
def test_a_trace_lag_is_found(window):
    rng = seeded_rng(("lag", str(window)))
    x = rng.standard_normal(400)
    lags = [37, 113, 5]
    y = np.stack([x[t:t + 60] + 0.3 * rng.standard_normal(60) for t in lags])
    p = xcorr.peaks1d(x, y, k=2, min_distance=3, **window, **REF)  # one-to-many: one row per trace
    assert p.value.shape == (3, 2) and p.shift.shape == (3, 2) and p.subpixel.shape == (3, 2)
    np.testing.assert_array_equal(p.shift[:, 0], lags)
    assert (np.abs(p.subpixel[:, 0] - lags) <= 0.5).all()
    # against the maps correlate1d gives
    out = xcorr.correlate1d(x, y, **window, **REF)
    d0 = xcorr.Plan(x.shape, y.shape, dims=1, **window, **REF).lags[0]
    np.testing.assert_array_equal(p.value[:, 0], out.max(axis=1))
    np.testing.assert_array_equal(p.shift[:, 0], out.argmax(axis=1) + d0)


def test_one_dimensional_same_is_correlate1d_s():
    """An even right: scipy's "same" (lags -m/2 ..), one lag below correlate2d's: peaks1d follows
    correlate1d."""
    a, b = np.arange(1.0, 10.0), np.array([1.0, 0.0, 0.0, 0.0])  # C(d) = a[d], lags -2..6
    p = xcorr.peaks1d(a, b, k=2, mode="same", **REF)
    np.testing.assert_array_equal(p.shift, [6, 5])
    np.testing.assert_array_equal(p.value, [7, 6])


def as_map(m):
    """peaks2d of a map m itself: m correlated with the 1 x 1 right [[1]] is m, at shift (i, j) for
    element (i, j) (full window)."""
    return np.asarray(m, dtype=np.float64), np.ones((1, 1))


def test_ties_go_to_the_smaller_shift_in_row_major_order():
    m = np.zeros((6, 7))
    m[4, 1] = m[2, 5] = m[2, 6] = 3.0
    p = xcorr.peaks2d(*as_map(m), k=3, subpixel="none", **REF)
    assert p.shift.tolist() == [[2, 5], [2, 6], [4, 1]]
    # ties over the whole map (zeros): the smallest shifts first, negative ones before positive
    p = xcorr.peaks2d(*as_map(np.zeros((3, 3))), k=4, shifts=((-1, 1), (-1, 1)), **REF)
    assert p.shift.tolist() == [[-1, -1], [-1, 0], [-1, 1], [0, -1]]
    # and in 1-D
    p = xcorr.peaks1d(np.array([0.0, 2, 1, 2, 2]), np.ones(1), k=3, **REF)
    assert p.shift.tolist() == [1, 3, 4]


def test_min_distance_suppresses_greedily():
    m = np.zeros((12, 14))
    A, B, E, C, D = (5, 5), (5, 7), (5, 9), (9, 9), (6, 12)
    for at, v in ((A, 10), (B, 9), (E, 8.5), (C, 8), (D, 7)):
        m[at] = v
    shifts = lambda r, k: [tuple(s) for s in xcorr.peaks2d(*as_map(m), k=k, min_distance=r, **REF).shift]  # noqa: E731
    assert shifts(0, 5) == [A, B, E, C, D]
    # r = 2: B is within 2 of A and dropped; E is 2 from the dropped B but 4 from A: a dropped value
    # suppresses nothing, so E is taken; C (4 from A and E); D is 3 from E and from C: taken.
    assert shifts(2, 5)[:4] == [A, E, C, D]
    assert shifts(2, 5)[4] == (0, 0)  # then the zeros, the smallest shift first (not near a peak)
    # r = 3: B within 3 of A, E at 4 (Chebyshev: max(|dy|, |dx|)); C 4 from A and from E
    assert shifts(3, 3) == [A, E, C]
    # r = 4: B, E and C within 4 of A; D at 7; then the zeros from (0, 0), 5 from A
    assert shifts(4, 3) == [A, D, (0, 0)]
    # r = 20 covers the map: one peak, the rest absent
    p = xcorr.peaks2d(*as_map(m), k=3, min_distance=20, **REF)
    assert p.shift.tolist() == [[5, 5], [0, 0], [0, 0]] and np.isnan(p.value[1:]).all()


def test_k_beyond_the_window_gives_absent_tails():
    rng = seeded_rng("k-beyond")
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((2, 2))
    p = xcorr.peaks2d(a, b, k=30, max_shift=1, **REF)  # 9 shifts
    assert p.value.shape == (30,)
    assert np.isfinite(p.value[:9]).all() and np.isnan(p.value[9:]).all()
    assert (p.shift[9:] == 0).all() and np.isnan(p.subpixel[9:]).all() and np.isfinite(p.subpixel[:9]).all()
    full = xcorr.correlate2d(a, b, max_shift=1, **REF).ravel()
    np.testing.assert_array_equal(p.value[:9], np.sort(full)[::-1])
    one = xcorr.peaks1d(np.ones(3), np.ones(2), k=5, mode="valid", **REF)  # 2 lags
    assert one.shift.tolist() == [0, 1, 0, 0, 0] and np.isnan(one.value[2:]).all() and np.isnan(one.subpixel[2:]).all()


def test_nan_is_never_taken():
    m = np.arange(12.0).reshape(3, 4)
    m[2, 3] = m[1, 1] = np.nan  # the largest element, and another
    p = xcorr.peaks2d(*as_map(m), k=11, **REF)
    assert p.shift[0].tolist() == [2, 2] and p.value[0] == 10
    assert np.isfinite(p.value[:10]).all() and np.isnan(p.value[10])
    assert not {(1, 1), (2, 3)} & {tuple(s) for s in p.shift[:10]}
    # a NaN input spreads over every shift that overlaps it: those are never taken either
    a = np.random.default_rng(3).standard_normal((9, 9))
    a[4, 4] = np.nan
    t = a[6:9, 0:3].copy()
    p = xcorr.peaks2d(a, t, k=200, **REF)
    c = xcorr.correlate2d(a, t, **REF)
    assert np.isfinite(p.value).sum() == np.isfinite(c).sum() == c.size - 9
    assert p.value[0] == np.nanmax(c)
    # all NaN: every peak absent
    p = xcorr.peaks2d(np.full((3, 3), np.nan), np.ones((2, 2)), k=2, **REF)
    assert np.isnan(p.value).all() and (p.shift == 0).all() and np.isnan(p.subpixel).all()


def test_a_nan_reaches_only_the_shifts_whose_overlap_holds_it():
    """The reference map of an input holding NaN (or inf) is NaN only where the overlap holds it, as
    lib/reference_cpu.cpp's: the NumPy loop multiplied the padding's zeros by the NaN, so every
    shift of the right's row and column was NaN, and a maximum over the rights skipped rights whose
    values there were numbers."""
    a = np.arange(30.0).reshape(5, 6)
    for t in (np.ones((3, 2)), np.ones((7, 8))):  # the NaN in the smaller matrix, and in the larger one
        t[1, 1] = np.nan
        c = xcorr.correlate2d(a, t, **REF)  # full: shift (dy, dx) = (i - (hR - 1), j - (wR - 1))
        hR, wR = t.shape
        dy, dx = np.mgrid[:c.shape[0], :c.shape[1]]
        dy, dx = dy - (hR - 1), dx - (wR - 1)
        overlaps = (0 <= 1 + dy) & (1 + dy < 5) & (0 <= 1 + dx) & (1 + dx < 6)  # L[1 + dy][1 + dx] exists
        np.testing.assert_array_equal(np.isnan(c), overlaps)
        t[1, 1] = np.inf
        with np.errstate(invalid="ignore"):  # inf * a[0, 0] = inf * 0 inside the overlap: NaN there
            assert not np.isnan(xcorr.correlate2d(a, t, **REF)[~overlaps]).any()

def test_the_sub_pixel_fits():
    """The contract's formulas: exact on a parabola (parabolic) and on a Gaussian (gaussian);
    gaussian falls back to parabolic where a value is not positive; 0 on the window's edge and for a
    zero denominator; clamped to 0.5."""
    x = np.arange(-3, 4)
    for method, f in (("parabolic", lambda t: 5 - (t - 0.3) ** 2), ("gaussian", lambda t: np.exp(-(t - 0.3) ** 2 / 3))):
        # the peak at (0.4, 0.1) from the centre: a sum of parabolas, a product of Gaussians
        m = f(x[:, None] - 0.1) + f(x[None, :] + 0.2) if method == "parabolic" else f(x[:, None] - 0.1) * f(x[None, :] + 0.2)
        p = xcorr.peaks2d(*as_map(m), subpixel=method, **REF)
        assert p.shift[0].tolist() == [3, 3]
        np.testing.assert_allclose(p.subpixel[0], [3 + 0.4, 3 + 0.1], atol=1e-12)
    fit = _reference.subpixel_offset
    assert fit(-1.0, 2.0, 1.0, "gaussian") == fit(-1.0, 2.0, 1.0, "parabolic") == pytest.approx(-0.5 * 2 / -4)
    assert fit(1.0, 2.0, 3.0, "parabolic") == 0.0  # zero denominator
    assert fit(10.0, 9.0, 1.0, "parabolic") == -0.5  # clamped
    assert fit(np.nan, 2.0, 1.0, "parabolic") == 0.0 and fit(1.0, 2.0, 1.0, "none") == 0.0
    # in maps: the second peak beside the first (clamped), a linear slope (zero denominator), the edge
    p = xcorr.peaks1d(np.array([0.0, 10, 9, 1, 0]), np.ones(1), k=2, **REF)
    np.testing.assert_allclose(p.subpixel, [1 + 9 / 22, 2 - 0.5])  # 10: (0 - 9) / (2 (0 - 20 + 9))
    p = xcorr.peaks1d(np.array([0.0, 1, 2, 3, 0]), np.ones(1), k=2, **REF)
    assert p.subpixel.tolist() == [3 + fit(2, 3, 0, "parabolic"), 2.0]
    p = xcorr.peaks2d(*as_map(np.diag([5.0, 1, 0])), k=1, **REF)
    assert p.subpixel[0].tolist() == [0.0, 0.0]  # a corner: no neighbours
    p = xcorr.peaks2d(*as_map(np.array([[0.0, 0, 0], [4, 5, 6.5]])), k=2, **REF)
    assert p.subpixel.tolist()[1] == [1.0, 1 + fit(4, 5, 6.5, "parabolic")]  # edge row: dy offset 0


# --- max_over_rights ------------------------------------------------------------------------------

def templates_in_noise(rng, n_lefts=1, m=5, planted=((3, (20, 30)), (1, (5, 40)))):
    lefts = rng.standard_normal((n_lefts, 60, 70))
    rights = rng.standard_normal((m, 9, 9))
    for i in range(n_lefts):
        for j, (y, x) in planted:
            lefts[i, y + 3 * i:y + 3 * i + 9, x:x + 9] = rights[j]
    return lefts, rights


@pytest.mark.parametrize("normalize", [None, "zncc"])
def test_max_over_rights_names_the_planted_template(normalize):
    rng = seeded_rng(("mor", normalize))
    lefts, rights = templates_in_noise(rng)
    r = xcorr.max_over_rights(lefts[0], rights, mode="valid", normalize=normalize, **REF)
    assert isinstance(r, xcorr.MaxOverRights) and r.value.shape == r.index.shape == (52, 62)
    assert r.index.dtype == np.int32
    assert r.index[20, 30] == 3 and r.index[5, 40] == 1
    maps = xcorr.correlate2d(lefts[0], rights, mode="valid", normalize=normalize, **REF)
    assert (r.value[20, 30], r.value[5, 40]) == (maps[3].max(), maps[1].max())
    np.testing.assert_array_equal(r.value, maps.max(axis=0))
    np.testing.assert_array_equal(r.index, maps.argmax(axis=0))  # argmax: the first (smallest) among equal


@pytest.mark.parametrize("form", ["one-to-many-stack", "n-to-m", "n-to-mn"])
def test_max_over_rights_of_each_form_and_its_sums(form):
    rng = seeded_rng(("mor-forms", form))
    n = 1 if form == "one-to-many-stack" else 2
    lefts, rights = templates_in_noise(rng, n_lefts=n, m=6)
    kw = dict(form="n-to-mn") if form == "n-to-mn" else {}
    window = ((0, 30), (25, 45))  # holds the planted shifts: (20, 30) at [20, 5], (5, 40) at [5, 15]
    r = xcorr.max_over_rights(lefts, rights, shifts=window, stats=True, **kw, **REF)
    assert isinstance(r, xcorr.MaxOverRightsStats) and r.value.shape == (n, 31, 21)
    assert r.sum.dtype == r.sumsq.dtype == np.float64 and r.index.dtype == np.int32
    maps = xcorr.correlate2d(lefts, rights, shifts=window, form="n-to-mn" if form == "n-to-mn" else "n-to-m", **REF)
    # per left, its rights' maps in order: n-to-m (n, M, ...); n-to-mn: output k = i + n*j
    per_left = maps.reshape(6 // n, n, 31, 21).swapaxes(0, 1) if form == "n-to-mn" else maps.reshape(n, 6, 31, 21)
    np.testing.assert_array_equal(r.value, per_left.max(axis=1))
    np.testing.assert_array_equal(r.index, per_left.argmax(axis=1))
    np.testing.assert_allclose(r.sum, per_left.sum(axis=1), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(r.sumsq, (per_left ** 2).sum(axis=1), rtol=1e-12)
    if form == "n-to-mn":  # left 1's group 1 is right 1 + 2*1 = 3, planted at (20 + 3, 30)
        # left 1's rights are 1, 3, 5 (groups 0, 1, 2), planted 3 rows lower than in left 0
        assert r.index[1, 23, 5] == 1 and r.index[1, 8, 15] == 0
    else:
        assert r.index[0, 20, 5] == 3 and r.index[0, 5, 15] == 1


def test_max_over_rights_ties_nan_and_a_stack_of_one():
    rng = seeded_rng("mor-ties")
    a = rng.standard_normal((20, 21))
    t = rng.standard_normal((4, 5))
    r = xcorr.max_over_rights(a, np.stack([-t, t, t, -t]), **REF)
    assert (r.index[np.isfinite(r.value)] != 2).all()  # t twice: the smaller index wins every tie
    assert set(np.unique(r.index)) <= {0, 1, 3}
    # a right of NaN: its values are skipped; all NaN: value NaN, index -1, the sums NaN
    nan_t = np.full_like(t, np.nan)
    r = xcorr.max_over_rights(a, np.stack([nan_t, t]), stats=True, **REF)
    assert (r.index == 1).all() and np.isnan(r.sum).all()
    r = xcorr.max_over_rights(a, nan_t[None], **REF)
    assert np.isnan(r.value).all() and (r.index == -1).all()
    one = xcorr.max_over_rights(a, t[None], mode="same", **REF)  # (1, h, w): M = 1
    np.testing.assert_array_equal(one.value, xcorr.correlate2d(a, t, mode="same", **REF))
    assert (one.index == 0).all()


@pytest.mark.parametrize("stats", [False, True])
def test_batches_with_out_and_first_index_equal_one_call(stats):
    rng = seeded_rng(("batches", stats))
    lefts, rights = templates_in_noise(rng, n_lefts=2, m=7)
    kw = dict(mode="valid", normalize="zncc", stats=stats, **REF)
    whole = xcorr.max_over_rights(lefts, rights, **kw)
    best = None
    for j0, j1 in ((0, 3), (3, 5), (5, 7)):
        out = xcorr.max_over_rights(lefts, rights[j0:j1], out=best, first_index=j0, **kw)
        assert best is None or out is best  # continued in place
        best = out
    np.testing.assert_array_equal(best.value, whole.value)
    np.testing.assert_array_equal(best.index, whole.index)
    if stats:
        np.testing.assert_allclose(best.sum, whole.sum, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(best.sumsq, whole.sumsq, rtol=1e-12)
    # first_index numbers the rights; a batch given out of order still keeps the smallest index on ties
    late = xcorr.max_over_rights(lefts, rights[:1], first_index=10, **REF)
    assert set(np.unique(late.index)) == {10}
    tied = xcorr.max_over_rights(lefts, rights[:1], **REF)
    xcorr.max_over_rights(lefts, rights[:1], first_index=0, out=late, **REF)  # the same values, index 0 first
    assert (late.index == 0).all()
    np.testing.assert_array_equal(late.value, tied.value)


def test_plans_with_reduce_return_the_same():
    rng = seeded_rng("plan-reduce")
    a, t = rng.standard_normal((30, 31)), rng.standard_normal((3, 5, 6))
    plan = xcorr.Plan(a.shape, t.shape, "valid", reduce="peaks", k=4, min_distance=2, subpixel="gaussian", **REF)
    assert plan.result_shape == xcorr.Peaks((3, 4), (3, 4, 2), (3, 4, 2)) and plan.out_shape == (3, 26, 26)
    got = plan(a, t)
    want = xcorr.peaks2d(a, t, 4, min_distance=2, subpixel="gaussian", mode="valid", **REF)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    plan = xcorr.Plan(a.shape, t.shape, reduce="max_over_rights", stats=True, **REF)
    assert plan.result_shape.value == (34, 36)
    got = plan(a, t)
    again = plan(a, t, out=plan(a, t))  # continued over the same rights again: the same maxima, the same indices
    np.testing.assert_array_equal(again.index, got.index)
    np.testing.assert_array_equal(again.value, got.value)
    np.testing.assert_allclose(again.sum, 2 * got.sum)
    plan1 = xcorr.Plan((300,), (3, 40), dims=1, max_lag=30, reduce="peaks", k=2, **REF)
    assert plan1.result_shape == xcorr.Peaks((3, 2), (3, 2), (3, 2))


B = np.ones((3, 3))
A = np.ones((6, 7))
BAD = [  # (call, message): ValueError with one line, with or without a GPU, reference or not
    (lambda **kw: xcorr.peaks2d(A, B, 0, **kw), "k must be at least 1"),
    (lambda **kw: xcorr.peaks2d(A, B, -2, **kw), "k must be at least 1"),
    (lambda **kw: xcorr.peaks2d(A, B, 1.5, **kw), "k takes integers"),
    (lambda **kw: xcorr.peaks2d(A, B, True, **kw), "k takes integers"),
    (lambda **kw: xcorr.peaks1d(A[0], B[0], min_distance=-1, **kw), "min_distance must be"),
    (lambda **kw: xcorr.peaks2d(A, B, subpixel="cubic", **kw), "subpixel must be one of 'none', 'parabolic', 'gaussian'"),
    (lambda **kw: xcorr.peaks2d(A, B, subpixel=None, **kw), "subpixel must be"),
    (lambda **kw: xcorr.peaks2d(A, B, mode="nope", **kw), "mode must be"),
    (lambda **kw: xcorr.max_over_rights(A, B, **kw), "single right .* pass a stack"),
    (lambda **kw: xcorr.max_over_rights(A[None], B, **kw), "single right .* pass a stack"),
    (lambda **kw: xcorr.max_over_rights(A, B[None], form="one-to-one", **kw), "one-to-one"),
    (lambda **kw: xcorr.max_over_rights(A, B[None], stats="yes", **kw), "stats must be True or False"),
    (lambda **kw: xcorr.max_over_rights(A, B[None], first_index=-1, **kw), "first_index must be"),
    (lambda **kw: xcorr.max_over_rights(A, B[None], out=(np.zeros((8, 9)),), **kw), "earlier max_over_rights result"),
    (lambda **kw: xcorr.max_over_rights(A, B[None], out=(np.zeros((8, 8)), np.zeros((8, 9), np.int32)), **kw),
     r"out.value must have shape \(8, 9\)"),
    (lambda **kw: xcorr.max_over_rights(A, B[None], stats=True, out=(np.zeros((8, 9), np.float32),
                                                                   np.zeros((8, 9), np.int32)), **kw),
     "value, index, sum, sumsq"),
    (lambda **kw: xcorr.Plan(A.shape, B.shape, reduce="peak", **kw), "reduce must be None, 'peaks' or 'max_over_rights'"),
    (lambda **kw: xcorr.Plan(A.shape, B.shape, k=3, **kw), "k=, min_distance=, subpixel= and stats= are for a reduced"),
    (lambda **kw: xcorr.Plan(A.shape, B.shape, reduce="peaks", stats=True, **kw), "stats= .* is for max_over_rights"),
    (lambda **kw: xcorr.Plan(A.shape, (2, 3, 3), reduce="max_over_rights", k=2, **kw), "are for peaks"),
    (lambda **kw: xcorr.max_over_rights(A, B[None], first_index=1.0, **kw), "first_index takes integers"),
]


@pytest.mark.parametrize("algorithm", ["reference", "auto"])
@pytest.mark.parametrize("call,match", BAD, ids=[f"{i}-{m[:30]}" for i, (_, m) in enumerate(BAD)])
def test_bad_arguments_are_value_errors_with_one_line(call, match, algorithm):
    with pytest.raises(ValueError, match=match) as e:
        call(algorithm=algorithm)
    assert "\n" not in str(e.value)


def test_peaks_calls_refuse_out_and_first_index():
    plan = xcorr.Plan(A.shape, B.shape, reduce="peaks", **REF)
    with pytest.raises(ValueError, match="peaks return new arrays"):
        plan(A, B, out=(np.zeros(1), np.zeros(1), np.zeros(1)))
    with pytest.raises(ValueError, match="first_index= numbers the rights of max_over_rights"):
        plan(A, B, first_index=2)
    with pytest.raises(ValueError, match="first_index= numbers the rights"):
        xcorr.Plan(A.shape, B.shape, **REF)(A, B, first_index=2)


def test_without_a_gpu_reductions_raise_no_gpu_error_saying_what_runs():
    try:
        xcorr.gpu_info()
        pytest.skip("a GPU is present (this test checks the machine without one)")
    except xcorr.NoGPUError:
        pass
    for call in (lambda: xcorr.peaks2d(A, B), lambda: xcorr.peaks1d(A[0], B[0]),
                 lambda: xcorr.max_over_rights(A, B[None], stats=True)):
        with pytest.raises(xcorr.NoGPUError, match='algorithm="reference" computes the same on the CPU'):
            call()


# --- the NumPy reference against the C++ one (lib/reduce.cpp through `xcorr run --algorithm reference`)

def cli_reduce(xcorr_cli, tmp_path, form, left, right, args, dims=2):
    from conftest import save, xrun
    out = tmp_path / "z.npz"
    r = xrun(xcorr_cli, "--algorithm", "reference", "--form", form, "--dims", dims, save(tmp_path / "l.npy", left),
             save(tmp_path / "r.npy", right), "--out", out, *args)
    assert r.returncode == 0, r.stdout + r.stderr
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


CROSS = [  # (form, left shape, right shape, xcorr run's window and reduction, the same as keywords)
    ("one-to-many", (13, 14), (3, 3, 4), ["--peaks", "9", "--min-distance", "1", "--subpixel", "gaussian"],
     dict(k=9, min_distance=1, subpixel="gaussian")),
    ("n-to-mn", (2, 12, 11), (4, 5, 3), ["--peaks", "200", "--mode", "same"], dict(k=200, mode="same")),
    ("n-to-m", (2, 10, 13), (2, 4, 4), ["--peaks", "4", "--min-distance", "3", "--shifts", "-5:2,-1:9",
                                         "--subpixel", "none"],
     dict(k=4, min_distance=3, shifts=((-5, 2), (-1, 9)), subpixel="none")),
    ("one-to-one", (9, 8), (3, 3), ["--peaks", "5", "--normalize", "zncc", "--mode", "valid"],
     dict(k=5, normalize="zncc", mode="valid")),
]


@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("case", range(len(CROSS)))
def test_the_numpy_reference_equals_the_cpp_reference(case, nan, tmp_path):
    """Small integers: the maps are exact in both references and full of ties, which each must break
    the same way (and suppress the same way); with NaN inputs too."""
    from conftest import binary
    form, ls, rs, args, kw = CROSS[case]
    rng = seeded_rng(("cross", case, nan))
    left = rng.integers(-2, 3, ls).astype(np.float32)
    right = rng.integers(-1, 2, rs).astype(np.float32)
    if nan:
        left.reshape(-1)[rng.integers(0, left.size, 2)] = np.nan
    z = cli_reduce(binary("xcorr"), tmp_path, form, left, right, args)
    p = xcorr.peaks2d(left, right, form=form, **kw, **REF)
    np.testing.assert_array_equal(p.shift.reshape(z["shift"].shape), z["shift"])
    np.testing.assert_array_equal(p.value.astype(np.float32).reshape(z["value"].shape), z["value"])
    np.testing.assert_allclose(p.subpixel.reshape(z["subpixel"].shape), z["subpixel"], rtol=0, atol=1e-5)


@pytest.mark.parametrize("form,ls,rs", [("one-to-many", (13, 14), (5, 3, 4)), ("n-to-m", (2, 12, 11), (3, 5, 3)),
                                        ("n-to-mn", (2, 10, 13), (6, 4, 4))])
def test_the_numpy_maximum_over_the_rights_equals_the_cpp_one(form, ls, rs, tmp_path):
    from conftest import binary
    rng = seeded_rng(("cross-max", form))
    left = rng.integers(-2, 3, ls).astype(np.float32)
    right = rng.integers(-1, 2, rs).astype(np.float32)
    right[2, 0, 0] = np.nan
    z = cli_reduce(binary("xcorr"), tmp_path, form, left, right, ["--max-over-rights", "--stats", "--mode", "same"])
    r = xcorr.max_over_rights(left, right, form=form, stats=True, mode="same", **REF)
    np.testing.assert_array_equal(r.index.reshape(z["index"].shape), z["index"])
    np.testing.assert_array_equal(r.value.astype(np.float32).reshape(z["value"].shape), z["value"])
    for name in ("sum", "sumsq"):
        np.testing.assert_array_equal(getattr(r, name).reshape(z[name].shape), z[name])


# --- the contract's "correct when", written out (the GPU tests' checks) --------------------------

def check_peaks(ref, window, k, r, subpixel, value, shift, sub, bound):
    """Failures (a list of lines) of one map's peaks against its float64 reference map `ref`
    (H, W) of the window ((dy0, dy1), (dx0, dx1)): each value within `bound` of the map at its
    shift; the order descending (within the bound); no value outside the taken peaks and their
    suppressed neighbourhoods above the k-th value by more than the bound (nothing left where
    peaks are absent); the sub-pixel shift within 0.01 of the fit on the reference at that shift
    (of the fits on values within the bound of the reference's, where those differ: fit_range);
    absent peaks NaN, (0, 0), NaN."""
    (dy0, dy1), (dx0, dx1) = window
    H, W = ref.shape
    value, shift, sub = (np.asarray(x, np.float64) for x in (value, shift, sub))
    shift = np.asarray(shift, np.int64)
    bad, free = [], ~np.isnan(ref)
    present = ~np.isnan(value)
    n = int(present.sum())
    if not present[:n].all():
        bad.append(f"absent peaks before present ones: {value}")
    for i in range(k):
        if not present[i]:
            if shift[i].tolist() != [0, 0] or not np.isnan(sub[i]).all():
                bad.append(f"absent peak {i}: shift {shift[i]}, subpixel {sub[i]} (want (0, 0), NaN)")
            continue
        dy, dx = shift[i]
        y, x = dy - dy0, dx - dx0
        if not (0 <= y < H and 0 <= x < W):
            bad.append(f"peak {i} at {(dy, dx)}: outside the window {window}")
            continue
        if not abs(value[i] - ref[y, x]) <= bound:
            bad.append(f"peak {i} at {(dy, dx)}: value {value[i]}, the map {ref[y, x]} (bound {bound:.3g})")
        if not free[y, x]:
            bad.append(f"peak {i} at {(dy, dx)}: within {r} of an earlier peak (or NaN)")
        if i and value[i] > value[i - 1] + bound:
            bad.append(f"peak {i}: {value[i]} above peak {i - 1}'s {value[i - 1]}")
        along = ((ref[y - 1, x], ref[y, x], ref[y + 1, x]) if 0 < y < H - 1 else None,
                 (ref[y, x - 1], ref[y, x], ref[y, x + 1]) if 0 < x < W - 1 else None)
        for axis, c in enumerate(along):
            lo, hi = fit_range(c, subpixel, bound)
            got = float(sub[i, axis]) - float(shift[i, axis])
            slack = 0.01 + abs(float(sub[i, axis])) * 2.0 ** -24  # the float32 position's rounding
            if not lo - slack <= got <= hi + slack:
                bad.append(f"peak {i} at {(dy, dx)}: sub-pixel offset {got} along axis {axis}, the fit on the "
                           f"reference {lo}..{hi}")
        free[max(0, y - r):y + r + 1, max(0, x - r):x + r + 1] = False
    rest = ref[free]
    if n < k and rest.size:
        bad.append(f"{k - n} peaks absent, but {rest.size} values are left (largest {rest.max()})")
    elif n == k and rest.size and rest.max() > value[k - 1] + bound:
        bad.append(f"a value {rest.max()} left above the k-th peak {value[k - 1]} (bound {bound:.3g})")
    return bad


def fit_range(c, method, bound):
    """The range of the fit's offset through three reference values c (None: the window's edge,
    offset 0): the fit on c itself, and where a value known within `bound` could move it (an
    ill-conditioned fit: a denominator near 0), the fits on every corner of c +- bound."""
    if c is None:
        return 0.0, 0.0
    d = _reference.subpixel_offset(*c, method)
    if bound <= 0:
        return d, d
    corners = [_reference.subpixel_offset(c[0] + a, c[1] + b, c[2] + e, method)
               for a in (-bound, bound) for b in (-bound, bound) for e in (-bound, bound)]
    return min(corners + [d]), max(corners + [d])


def check_max(per_left, value, index, sums, bound, first_index=0):
    """Failures of a maximum over the rights against the float64 reference maps per_left (lefts,
    rights, H, W): each value within `bound` of the largest reference value at its shift, the indexed
    right's reference value within `bound` of it; the sums within the bounds the values allow."""
    value, index = np.asarray(value, np.float64), np.asarray(index, np.int64)
    bad = []
    with np.errstate(all="ignore"):
        want = np.fmax.reduce(per_left, axis=1)
    nan = np.isnan(want)
    if not (np.isnan(value[nan]).all() and (index[nan] == -1).all()):
        bad.append("an all-NaN position has a value or an index")
    ok = ~nan
    err = np.abs(value - want)[ok]
    if err.size and not err.max() <= bound:
        bad.append(f"value off the largest reference value by {err.max():.3g} (bound {bound:.3g})")
    j = index[ok] - first_index
    if ((j < 0) | (j >= per_left.shape[1])).any():
        bad.append(f"an index outside {first_index}..{first_index + per_left.shape[1] - 1}")
    else:
        chosen = np.take_along_axis(np.moveaxis(per_left, 1, -1)[ok], j[:, None], axis=1)[:, 0]
        e = np.abs(chosen - value[ok])
        if e.size and not e.max() <= bound:
            bad.append(f"the indexed right's reference value is off by {e.max():.3g} (bound {bound:.3g})")
    if sums is not None:
        s, q = (np.asarray(x, np.float64) for x in sums)
        m = per_left.shape[1]
        ws, wq = per_left.sum(axis=1), (per_left ** 2).sum(axis=1)
        if not np.allclose(s, ws, rtol=0, atol=m * bound, equal_nan=True):
            bad.append(f"sum off by {np.nanmax(np.abs(s - ws)):.3g} (bound {m * bound:.3g})")
        qb = (2 * np.abs(per_left) + bound).sum(axis=1) * bound
        if not ((np.abs(q - wq) <= qb) | (np.isnan(q) & np.isnan(wq))).all():
            bad.append(f"sumsq off by {np.nanmax(np.abs(q - wq)):.3g}")
    return bad


def test_the_checks_accept_the_reference_and_refuse_wrong_answers():
    rng = seeded_rng("checks")
    a, t = rng.standard_normal((20, 23)), rng.standard_normal((5, 4))
    window = ((-3, 10), (-2, 12))
    ref = xcorr.correlate2d(a, t, shifts=window, **REF)
    p = xcorr.peaks2d(a, t, k=20, min_distance=2, subpixel="gaussian", shifts=window, **REF)
    assert check_peaks(ref, window, 20, 2, "gaussian", *p, 1e-9) == []
    v, s, sp = (x.copy() for x in p)
    v[3] += 1e-3
    assert check_peaks(ref, window, 20, 2, "gaussian", v, s, sp, 1e-9)
    assert check_peaks(ref, window, 20, 2, "gaussian", v, s, sp, 1e-2) == []  # within a looser bound
    v, s, sp = (x.copy() for x in p)
    s[19], sp[19] = s[19] + [1, 0], sp[19] + [1, 0]
    v[19] = ref[s[19][0] + 3, s[19][1] + 2]  # another value of the map, but not the 20th largest left
    assert check_peaks(ref, window, 20, 2, "gaussian", v, s, sp, 1e-9)
    v, s, sp = (x.copy() for x in p)
    sp[5, 1] += 0.02
    assert check_peaks(ref, window, 20, 2, "gaussian", v, s, sp, 1e-9)
    p2 = xcorr.peaks2d(a, t, k=20, min_distance=2, subpixel="parabolic", shifts=window, **REF)
    assert check_peaks(ref, window, 20, 2, "gaussian", *p2, 1e-9)  # the other fit
    assert check_peaks(ref, window, 19, 2, "gaussian", p.value[1:], p.shift[1:], p.subpixel[1:], 1e-9)  # one missed
    # absent tails
    small = xcorr.correlate2d(a, t, max_shift=1, **REF)
    p = xcorr.peaks2d(a, t, k=12, max_shift=1, **REF)
    assert check_peaks(small, ((-1, 1), (-1, 1)), 12, 0, "parabolic", *p, 1e-9) == []
    v = p.value.copy()
    v[8] = np.nan
    assert check_peaks(small, ((-1, 1), (-1, 1)), 12, 0, "parabolic", v, p.shift, p.subpixel, 1e-9)
    # max over rights
    rights = rng.standard_normal((4, 5, 4))
    maps = xcorr.correlate2d(a, rights, **REF)[None]
    r = xcorr.max_over_rights(a, rights, stats=True, first_index=3, **REF)
    assert check_max(maps, r.value[None], r.index[None], (r.sum[None], r.sumsq[None]), 1e-9, 3) == []
    wrong = r.index.copy()
    wrong[4, 4] = 3 + (wrong[4, 4] - 3 + 1) % 4
    assert check_max(maps, r.value[None], wrong[None], None, 1e-9, 3)
    assert check_max(maps, r.value[None] + 1e-3, r.index[None], None, 1e-9, 3)
    assert check_max(maps, r.value[None], r.index[None], (r.sum[None] + 1e-3, r.sumsq[None]), 1e-9, 3)


# --- GPU -----------------------------------------------------------------------------------------

from array_libs import cupy, gpu, host, lib_array, torch  # noqa: E402,F401 (fixtures)

ALGORITHMS = [a["name"] for a in xcorr.algorithms()]
GPU_CASES = {  # form -> (left shape, right shape): odd, unequal sizes, both size orders
    "one-to-one": ((37, 29), (11, 13)),
    "one-to-many": ((13, 11), (3, 29, 37)),
    "n-to-mn": ((2, 37, 29), (4, 11, 13)),
    "n-to-m": ((2, 37, 29), (3, 11, 13)),
}
GPU_CASES_1D = {
    "one-to-one": ((301,), (47,)),
    "one-to-many": ((301,), (3, 47)),
    "n-to-mn": ((2, 301), (4, 47)),
    "n-to-m": ((2, 301), (3, 47)),
}
GPU_WINDOWS = {"full": {}, "valid": dict(mode="valid"), "same": dict(mode="same"), "max-shift": dict(max_shift=(3, 5)),
               "shifts": dict(shifts=((-4, 20), (-12, 1)))}
GPU_WINDOWS_1D = {"full": {}, "valid": dict(mode="valid"), "same": dict(mode="same"), "max-shift": dict(max_lag=4),
                  "shifts": dict(lags=(-40, 12))}
# (normalize, data, k, min_distance, subpixel): raw data of both signs and with an offset, zncc
REDUCE_CASES = [(None, "signed", 3, 0, "parabolic"), (None, "offset", 2, 2, "gaussian"),
                ("zncc", "signed", 4, 1, "gaussian"), (None, "signed", 40, 0, "none")]


def gpu_data(rng, shape, data):
    x = rng.standard_normal(shape).astype(np.float32)
    return x + np.float32(10) if data == "offset" else x


def bound_of(algo, normalize, ref):
    """The map's accuracy bound as an absolute error: the variant's tolerance relative to the map's
    largest |value| (raw), max(1e-4, it) absolute (normalized: CONVENTIONS.md)."""
    tol = 1e-5 if algo is None else algo["tolerance"]  # auto at precision fp32: FP32-class algorithms only
    if normalize:
        return max(1e-4, tol)
    return tol * float(np.nanmax(np.abs(ref))) if np.isfinite(ref).any() else 0.0


def reduce_cases(algo, dims):
    """(form, left shape, right shape, window name, window) the algorithm computes: the matrices,
    or where it takes none of them, the signals (algorithms that compute only 1 x n matrices)."""
    forms = algo["forms"] if algo else list(GPU_CASES)
    windows = algo["windows"] if algo else list(GPU_WINDOWS)
    cases, shapes = (GPU_CASES, GPU_WINDOWS) if dims == 2 else (GPU_CASES_1D, GPU_WINDOWS_1D)
    return [(f, *cases[f], w, shapes[w]) for f in forms for w in windows]


def run_peaks_case(name, lib, module, dims, rng, algo=None):
    """peaks of one algorithm on every form and window it takes (a few normalizations, k,
    min_distance and fits in turn; k beyond the window in the max-shift window), each checked
    against the reference maps; returns the number of cases run and the refusals. algo: the
    registry entry (default: the build's; "auto": every form and window)."""
    if algo is None and name != "auto":
        algo = next(a for a in xcorr.algorithms() if a["name"] == name)
    precision = "tf32" if algo and algo["precision"] == "tf32" else "fp32"
    ran, refused = 0, []
    for n, (form, ls, rs, wname, window) in enumerate(reduce_cases(algo, dims)):
        normalize, data, k, r, subpixel = REDUCE_CASES[n % len(REDUCE_CASES)]
        refplan = xcorr.Plan(ls, rs, form=form, algorithm="reference", normalize=normalize, dims=dims, **window)
        if wname == "max-shift":  # more peaks than the window holds: absent tails
            k = int(np.prod(refplan.out_shape[-dims:])) + 3
        a, b = gpu_data(rng, ls, data), gpu_data(rng, rs, data)
        try:
            plan = xcorr.Plan(ls, rs, form=form, algorithm=name, precision=precision, normalize=normalize, dims=dims,
                              reduce="peaks", k=k, min_distance=r, subpixel=subpixel, **window)
        except ValueError as e:  # a size, form or window this variant does not take
            refused.append(f"{form} {wname}: {e}")
            continue
        got = plan(a, b) if lib == "numpy" else plan(lib_array(module, a), lib_array(module, b))
        assert type(got) is xcorr.Peaks
        got = [host(x) if lib != "numpy" else x for x in got]
        if name != "reference":
            assert got[0].dtype == np.float32 and got[1].dtype == np.int32 and got[2].dtype == np.float32
        assert tuple(x.shape for x in got) == plan.result_shape
        maps = refplan(a, b).reshape((-1,) + (1,) * (dims == 1) + refplan.out_shape[-dims:])
        value, shift, sub = (x.reshape(maps.shape[0], k, -1) for x in got)
        if dims == 1:  # the lags as (0, lag) pairs
            shift = np.concatenate([np.zeros_like(shift), shift], axis=-1)
            sub = np.concatenate([np.where(np.isnan(sub), np.nan, 0.0), sub], axis=-1)
        for m in range(maps.shape[0]):
            bad = check_peaks(maps[m], refplan.shifts, k, r, subpixel, value[m, :, 0], shift[m], sub[m],
                              bound_of(algo, normalize, maps[m]))
            assert not bad, (form, wname, normalize, data, f"map {m}", bad)
        ran += 1
    return ran, refused


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["numpy", "torch", "cupy"])
@pytest.mark.parametrize("name", ["auto"] + ALGORITHMS)
def test_every_algorithm_s_peaks_are_correct_by_the_contract(name, lib, request, gpu):
    module = None if lib == "numpy" else request.getfixturevalue(lib)
    rng = seeded_rng(("gpu-peaks", name, lib))
    ran, refused = run_peaks_case(name, lib, module, 2, rng)
    if not ran:  # an algorithm of signals only
        ran, refused = run_peaks_case(name, lib, module, 1, rng)
    if not ran:
        pytest.skip(f"{name} refused all {len(refused)} cases; the first: {refused[0]}")


@pytest.mark.gpu
@pytest.mark.parametrize("lib", ["numpy", "torch"])
def test_peaks1d_on_the_gpu_is_correct_by_the_contract(lib, request, gpu):
    module = None if lib == "numpy" else request.getfixturevalue(lib)
    ran, refused = run_peaks_case("auto", lib, module, 1, seeded_rng(("gpu-peaks1d", lib)))
    assert ran == 20, refused


@pytest.mark.parametrize("dims", [1, 2])
def test_the_gpu_tests_runner_passes_the_reference(dims):
    """run_peaks_case's bookkeeping (shapes, 1-D lags as pairs, k beyond the window, the checks) on
    the CPU, with the reference in the place of a GPU algorithm."""
    algo = {"name": "reference", "forms": list(GPU_CASES), "windows": list(GPU_WINDOWS), "precision": "fp32",
            "tolerance": 1e-9}
    ran, refused = run_peaks_case("reference", "numpy", None, dims, seeded_rng(("runner", dims)), algo)
    assert ran == 20 and not refused


@pytest.mark.parametrize("dims", [1, 2])
def test_the_checks_pass_an_answer_within_the_bound(dims):
    """The GPU tests' checks are not stricter than the contract: peaks taken from the reference
    maps moved by up to half the bound (float32 rounding and noise, as a GPU's maps differ) pass
    against the unmoved maps, in every case the GPU tests run (near-ties taken in another order,
    ill-conditioned fits on zncc's flat overlaps of two elements, the offset data's large values)."""
    rng = seeded_rng(("within", dims))
    algo = {"forms": list(GPU_CASES), "windows": list(GPU_WINDOWS), "precision": "fp32", "tolerance": 1e-5}
    for n, (form, ls, rs, wname, window) in enumerate(reduce_cases(algo, dims)):
        normalize, data, k, r, subpixel = REDUCE_CASES[n % len(REDUCE_CASES)]
        refplan = xcorr.Plan(ls, rs, form=form, algorithm="reference", normalize=normalize, dims=dims, **window)
        a, b = gpu_data(rng, ls, data), gpu_data(rng, rs, data)
        maps = refplan(a, b).reshape((-1,) + (1,) * (dims == 1) + refplan.out_shape[-dims:])
        for m in maps:
            bound = bound_of(algo, normalize, m)
            moved = m.astype(np.float32).astype(np.float64) + rng.uniform(-bound / 2, bound / 2, m.shape)
            (dy0, _), (dx0, _) = refplan.shifts
            got = _reference.peaks(moved, k, r, subpixel, dy0, dx0)
            bad = check_peaks(m, refplan.shifts, k, r, subpixel, *got, bound)
            assert not bad, (form, wname, normalize, data, bad)


MAX_CASES = {  # form -> (left shape, rights shape)
    "one-to-many": ((37, 29), (5, 11, 13)),
    "n-to-m": ((2, 37, 29), (3, 11, 13)),
    "n-to-mn": ((2, 37, 29), (6, 11, 13)),
}


def test_the_max_checks_pass_an_answer_within_the_bound():
    rng = seeded_rng("max-within")
    for form, (ls, rs) in MAX_CASES.items():
        a, b = gpu_data(rng, ls, "offset"), gpu_data(rng, rs, "offset")
        b[1] = b[0]
        maps = xcorr.correlate2d(a, b, form=form, algorithm="reference")
        per_left = _reference.right_maps(form, ls[0] if len(ls) == 3 else 1, rs[0], maps.reshape((-1,) + maps.shape[-2:]))
        bound = bound_of(None, None, per_left)
        moved = per_left.astype(np.float32) + rng.uniform(-bound / 2, bound / 2, per_left.shape)
        got = _reference.max_over_rights(moved, stats=True)
        assert not check_max(per_left, *got[:2], got[2:], bound), form

@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["numpy", "torch", "cupy"])
@pytest.mark.parametrize("name", ["auto"] + ALGORITHMS)
def test_every_algorithm_s_max_over_rights_is_correct_by_the_contract(name, lib, request, gpu):
    module = None if lib == "numpy" else request.getfixturevalue(lib)
    algo = None if name == "auto" else next(a for a in xcorr.algorithms() if a["name"] == name)
    precision = "tf32" if algo and algo["precision"] == "tf32" else "fp32"
    rng = seeded_rng(("gpu-max", name, lib))
    ran, refused = 0, []
    forms = [f for f in (algo["forms"] if algo else MAX_CASES) if f in MAX_CASES]
    windows = algo["windows"] if algo else list(GPU_WINDOWS)
    for n, (form, wname) in enumerate((f, w) for f in forms for w in windows):
        ls, rs = MAX_CASES[form]
        normalize, data = [(None, "signed"), ("zncc", "offset"), (None, "offset")][n % 3]
        stats = n % 2 == 0
        a, b = gpu_data(rng, ls, data), gpu_data(rng, rs, data)
        b[1] = b[0]  # equal values: either index is within the bound
        window = GPU_WINDOWS[wname]
        try:
            plan = xcorr.Plan(ls, rs, form=form, algorithm=name, precision=precision, normalize=normalize,
                              reduce="max_over_rights", stats=stats, **window)
        except ValueError as e:
            refused.append(f"{form} {wname}: {e}")
            continue
        got = plan(a, b) if lib == "numpy" else plan(lib_array(module, a), lib_array(module, b))
        assert type(got) is (xcorr.MaxOverRightsStats if stats else xcorr.MaxOverRights)
        got = [x if lib == "numpy" else host(x) for x in got]
        assert [x.dtype for x in got] == [np.float32, np.int32, np.float64, np.float64][:len(got)]
        assert tuple(x.shape for x in got) == plan.result_shape
        maps = xcorr.correlate2d(a, b, form=form, algorithm="reference", normalize=normalize, **window)
        per_left = _reference.right_maps(form, ls[0] if len(ls) == 3 else 1, rs[0], maps.reshape((-1,) + maps.shape[-2:]))
        lefts = per_left.shape[0]
        bound = bound_of(algo, normalize, per_left)
        bad = check_max(per_left, got[0].reshape(lefts, *maps.shape[-2:]), got[1].reshape(lefts, *maps.shape[-2:]),
                        [x.reshape(lefts, *maps.shape[-2:]) for x in got[2:]] if stats else None, bound)
        assert not bad, (form, wname, normalize, data, bad)
        ran += 1
    if not ran:
        pytest.skip(f"{name} refused all {len(refused)} cases; the first: {refused[0] if refused else 'no form with rights'}")


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["numpy", "torch", "cupy"])
def test_templates_streamed_in_batches_on_the_gpu(lib, request, gpu):
    """out= continued through the batches (device arrays in place; NumPy ones uploaded and
    downloaded around each call), rights numbered by first_index: correct over all the rights."""
    module = None if lib == "numpy" else request.getfixturevalue(lib)
    rng = seeded_rng(("gpu-batches", lib))
    image = rng.standard_normal((61, 67)).astype(np.float32)
    templates = rng.standard_normal((7, 9, 9)).astype(np.float32)
    image[20:29, 30:39] = templates[5]
    best = None
    for j0, j1 in ((0, 3), (3, 6), (6, 7)):
        t = templates[j0:j1] if lib == "numpy" else lib_array(module, templates[j0:j1])
        im = image if lib == "numpy" else lib_array(module, image)
        out = xcorr.max_over_rights(im, t, mode="valid", normalize="zncc", stats=True, out=best, first_index=j0)
        assert best is None or out is best
        best = out
    got = [x if lib == "numpy" else host(x) for x in best]
    assert got[1][20, 30] == 5
    maps = xcorr.correlate2d(image, templates, mode="valid", normalize="zncc", algorithm="reference")
    assert not check_max(maps[None], got[0][None], got[1][None], (got[2][None], got[3][None]), 1e-4)
    if lib == "torch":  # a NumPy out= continued by a device call: the binding uploads it first
        host_best = xcorr.max_over_rights(image, templates[:3], mode="valid", normalize="zncc")
        xcorr.max_over_rights(lib_array(module, image), lib_array(module, templates[3:]), mode="valid",
                              normalize="zncc", out=host_best, first_index=3)
        assert not check_max(maps[None], host_best.value[None], host_best.index[None], None, 1e-4)


@pytest.mark.gpu
def test_gpu_reductions_return_the_caller_s_kind_and_refuse_bad_out(torch, gpu):
    a = torch.randn(40, 41, device="cuda")
    t = torch.randn(4, 7, 5, device="cuda")
    p = xcorr.peaks2d(a, t, k=2)
    assert all(type(x) is torch.Tensor and x.is_cuda for x in p)
    assert (p.value.dtype, p.shift.dtype, p.subpixel.dtype) == (torch.float32, torch.int32, torch.float32)
    assert p.shift.shape == (4, 2, 2)
    s = xcorr.peaks1d(a[0], t[:, 0], k=3)
    assert s.shift.shape == (4, 3) and s.subpixel.shape == (4, 3)
    m = xcorr.max_over_rights(a, t, stats=True)
    assert (m.index.dtype, m.sum.dtype) == (torch.int32, torch.float64) and m.value.shape == (46, 45)
    with pytest.raises(ValueError, match="out.index must be int32"):
        xcorr.max_over_rights(a, t, stats=True, out=(m.value, m.index.float(), m.sum, m.sumsq))
    with pytest.raises(ValueError, match="out.sum must be float64"):
        xcorr.max_over_rights(a, t, stats=True, out=(m.value, m.index, m.sum.float(), m.sumsq))
    with pytest.raises(ValueError, match="left must be float32"):
        xcorr.peaks2d(a.double(), t)


class _Calls:
    """A plan's binding that records which of its calls a Python call made."""

    def __init__(self, plan):
        self._plan, self.names = plan, []

    def __getattr__(self, name):
        self.names.append(name)
        return getattr(self._plan, name)


@pytest.mark.parametrize("lshape, rshape, dims, k, form", [((40, 41), (4, 7, 5), 2, 2, None),
                                                            ((40, 41), (3, 7, 5), 2, 1, None),
                                                            ((97,), (7, 33), 1, 3, None),
                                                            ((8192, 32, 32), (8192, 32, 32), 2, 1, "n-to-mn")])
def test_the_tensor_path_s_one_allocation_holds_each_result_apart_and_aligned(lshape, rshape, dims, k, form):
    """A peaks call on PyTorch tensors allocates its three results as one buffer (_torch_reduced:
    the host time before the launch is the call's, one torch.empty instead of three): the values,
    the (dy, dx) shifts and the sub-pixel shifts each start on a 256-byte boundary (as an allocation
    of their own would; the kernels store pairs) and do not overlap, odd counts included."""
    from xcorr import _api
    plan = _api.Plan.__new__(_api.Plan)
    plan._setup(lshape, rshape, "full", None, None, None, form, "auto", "fp32", None, dims, None, None, reduce="peaks",
                k=k)
    n, a, b, total = plan._peaks_parts
    assert n == int(np.prod(plan._device_shape.value)) and 2 * n == int(np.prod(plan._device_shape.shift))
    assert a % 64 == 0 and b % 64 == 0 and n <= a and a + 2 * n <= b  # float32 elements: 64 are 256 bytes
    assert total == b + 2 * n


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_contiguous_arrays_take_the_raw_pointer_path_and_others_the_general_one(lib, request, gpu):
    """PyTorch tensors and CuPy arrays that are what the kernels read go to execute_reduced_ptr (no
    DLPack), a continued out= of that library's arrays too; a strided input and a NumPy out= take
    the general path; all give the same answer, peaks1d's lags included. The peaks' three results
    are views of one allocation (_peaks_parts) that do not overlap: each holds its own values."""
    module = request.getfixturevalue(lib)
    rng = seeded_rng(("fast-path", lib))
    a, t = rng.standard_normal((40, 41)).astype(np.float32), rng.standard_normal((4, 7, 5)).astype(np.float32)
    ta, tt = lib_array(module, a), lib_array(module, t)
    for reduce, extra in (("peaks", {"k": 2}), ("max_over_rights", {"stats": True})):
        plan = xcorr.Plan(a.shape, t.shape, reduce=reduce, **extra)
        plan._plan = calls = _Calls(plan._plan)
        got = plan(ta, tt)
        assert all(type(x) is type(ta) for x in got)
        fast = [host(x) for x in got]
        assert calls.names == ["execute_reduced_ptr"], calls.names
        calls.names.clear()
        wide = lib_array(module, np.pad(a, ((0, 0), (0, 3))))[:, :41]  # strided: copied first
        general = [host(x) for x in plan(wide, tt)]
        assert "execute_reduced" in calls.names and "execute_reduced_ptr" not in calls.names
        for x, y in zip(fast, general):
            assert np.array_equal(x, y), reduce
    planted = a.copy()
    planted[10:17, 20:25] += 8 * t[1]  # template 1 at shift (10, 20): its map's peak there
    found = xcorr.peaks2d(lib_array(module, planted), tt, k=2)
    shift = host(found.shift)
    assert shift.dtype == np.int32 and shift.shape == (4, 2, 2) and tuple(shift[1, 0]) == (10, 20), shift[1]
    assert np.isfinite(host(found.value)).all() and np.isfinite(host(found.subpixel)).all()
    sig, traces = a[0].copy(), t[:, 0].copy()
    sig[17:22] += 8 * traces[2]  # trace 2 at lag 17
    lags = xcorr.peaks1d(lib_array(module, sig), lib_array(module, traces), k=2, max_lag=20)
    assert host(lags.shift).shape == (4, 2) and host(lags.shift)[2, 0] == 17, host(lags.shift)
    np.testing.assert_array_equal(host(lags.shift), xcorr.peaks1d(sig, traces, k=2, max_lag=20).shift)
    plan = xcorr.Plan(a.shape, (2, 7, 5), reduce="max_over_rights", stats=True)
    plan._plan = calls = _Calls(plan._plan)
    best = plan(ta, tt[:2])
    assert plan(ta, tt[2:], out=best, first_index=2) is best
    assert calls.names == ["execute_reduced_ptr"] * 2
    one = xcorr.max_over_rights(a, t, stats=True)
    assert np.array_equal(host(best.index), one.index) and np.allclose(host(best.value), one.value)
    assert np.allclose(host(best.sum), one.sum)


@pytest.mark.gpu
def test_a_repeated_call_finds_its_plan_without_the_checks_and_no_other_option_s(torch, gpu, monkeypatch):
    """peaks2d, peaks1d and max_over_rights on PyTorch tensors find the cached plan of an earlier
    call with the same arrays and options before the general path's conversions and checks (as
    correlate2d does: a PIV loop's call costs what the kernel does); a plan of another k,
    min_distance, subpixel, stats or stream is never taken for it, nor one of k=2 for k=2.0 or
    True, which stay errors; first_index is checked on either path."""
    from xcorr import _api
    a, t = torch.randn(40, 41, device="cuda"), torch.randn(4, 7, 5, device="cuda")
    xcorr.clear_cache()
    first = [host(x) for x in xcorr.peaks2d(a, t, k=2, max_shift=6)]
    general = []
    real = _api._as_arrays
    monkeypatch.setattr(_api, "_as_arrays", lambda *x: general.append(1) or real(*x))
    again = [host(x) for x in xcorr.peaks2d(a, t, k=2, max_shift=6)]
    assert not general and len(_api._plans) == 1  # the fast path, the same plan
    for x, y in zip(first, again):
        np.testing.assert_array_equal(x, y)
    for kw in (dict(k=3, min_distance=1, subpixel="none"), dict(k=2, subpixel="gaussian")):
        p = xcorr.peaks2d(a, t, max_shift=6, **kw)
        own = xcorr.Plan(tuple(a.shape), tuple(t.shape), max_shift=6, reduce="peaks", **kw)(a, t)
        assert p.value.shape == (4, kw["k"])
        for x, y in zip(p, own):  # that option's plan, not the cached one
            np.testing.assert_array_equal(host(x), host(y))
    assert len(_api._plans) == 3 and len(general) == 2  # each new option: the general path, a new plan
    for bad, match in ((dict(k=2.0), "k takes integers"), (dict(k=True), "k takes integers")):
        with pytest.raises(ValueError, match=match):
            xcorr.peaks2d(a, t, max_shift=6, **bad)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # a and t are written on the current one
    with torch.cuda.stream(side):
        p = xcorr.peaks2d(a, t, k=2, max_shift=6)
    side.synchronize()
    assert len(_api._plans) == 4  # one plan per stream
    np.testing.assert_array_equal(host(p.shift), first[1])
    m1 = xcorr.max_over_rights(a, t, stats=True)
    general.clear()
    m2 = xcorr.max_over_rights(a, t[:2], stats=True)
    m3 = xcorr.max_over_rights(a, t[:2], stats=True, out=m2)
    assert len(general) == 1  # the second call of t[:2]'s shapes found its plan
    with pytest.raises(ValueError, match="first_index must be"):
        xcorr.max_over_rights(a, t[:2], stats=True, first_index=-1)
    m4 = xcorr.max_over_rights(a, t[2:], stats=True, out=xcorr.max_over_rights(a, t[:2], stats=True), first_index=2)
    np.testing.assert_array_equal(host(m4.index), host(m1.index))
    np.testing.assert_allclose(host(m4.sum), host(m1.sum), rtol=1e-6, atol=1e-6)
    assert m3 is m2
    traces = t[:, 0].contiguous()  # a strided input goes the general way, copied
    s1 = xcorr.peaks1d(a[0], traces, k=2, max_lag=9)
    general.clear()
    s2 = xcorr.peaks1d(a[0], traces, k=2, max_lag=9)
    assert not general and torch.equal(s1.shift, s2.shift) and s2.shift.shape == (4, 2)


@pytest.mark.gpu
def test_the_binding_checks_the_reduced_outputs(gpu):
    """execute_reduced (python/_xcorr.cpp) refuses what would be written out of bounds or misread:
    dtypes, sizes, outputs the reduction does not write or needs; NumPy outputs are staged."""
    plan = xcorr.Plan((20, 21), (3, 4, 5), reduce="peaks", k=2)
    a, b = np.ones((20, 21), np.float32), np.ones((3, 4, 5), np.float32)
    v, s, sp = np.empty((3, 2), np.float32), np.empty((3, 2, 2), np.int32), np.empty((3, 2, 2), np.float32)
    p = plan._plan
    assert p.reduced_elems == 6
    p.execute_reduced(a, b, v, s, sp, None, None, None)
    assert np.isfinite(v).all() and (np.abs(sp - s) <= 0.5).all()
    for args, match in (((v, s.astype(np.float32), sp, None, None, None), "shift must be int32"),
                        ((v.astype(np.float64), s, sp, None, None, None), "value must be float32"),
                        ((v[:2], s, sp, None, None, None), "value has 4 elements, the plan needs 6"),
                        ((v, s, None, None, None, None), "peaks write value, shift and subpixel"),
                        ((v, s, sp, np.empty((3, 2), np.int32), None, None), "peaks write value, shift and subpixel")):
        with pytest.raises(ValueError, match=match):
            p.execute_reduced(a, b, *args)
    with pytest.raises(ValueError, match="accumulate continues a maximum over the rights"):
        p.execute_reduced(a, b, v, s, sp, None, None, None, 0, True)
    m = xcorr.Plan((20, 21), (3, 4, 5), reduce="max_over_rights", stats=False)._plan
    value, index = np.empty((23, 25), np.float32), np.empty((23, 25), np.int32)
    m.execute_reduced(a, b, value, None, None, index, None, None)
    assert (index >= 0).all() and (index < 3).all()
    with pytest.raises(ValueError, match="sum and sumsq are written only with stats"):
        m.execute_reduced(a, b, value, None, None, index, np.empty((23, 25)), None)
    with pytest.raises(ValueError, match="index must be int32"):
        m.execute_reduced(a, b, value, None, None, index.astype(np.int64), None, None)
    with pytest.raises(ValueError, match="first_right must not be negative"):
        m.execute_reduced(a, b, value, None, None, index, None, None, 0, False, -1)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [(0.3, 0.0), (2.35, -1.3)])
def test_block_per_pair_takes_k1_peaks_in_its_own_pass(d, monkeypatch, gpu):
    """PIV window pairs on the GPU by block-per-pair: at k = 1 the plan takes the peaks in the
    variant's own pass (its explain says so, no map written) and finds the displacement d by the
    gaussian fit, as the route through the map and the reduce kernels (XCORR_NO_FUSED_PEAKS=1)
    does, to the bit; at k = 2 the route is the map's."""
    a, b = (x.astype(np.float32) for x in piv_frames(seeded_rng(("piv-fused", d)), d, 40))
    args = dict(form="n-to-mn", max_shift=8, reduce="peaks", subpixel="gaussian", algorithm="block-per-pair")
    fused = xcorr.Plan(b.shape, a.shape, **args)
    assert "own pass" in fused.explain()
    got = fused(b, a)
    np.testing.assert_allclose(got.subpixel[:, 0], np.broadcast_to(d, (40, 2)), atol=0.05)
    np.testing.assert_array_equal(got.shift[:, 0], np.broadcast_to(np.round(d), (40, 2)))
    assert "own pass" not in xcorr.Plan(b.shape, a.shape, k=2, **args).explain()
    monkeypatch.setenv("XCORR_NO_FUSED_PEAKS", "1")
    chunked = xcorr.Plan(b.shape, a.shape, **args)
    assert "own pass" not in chunked.explain()
    for x, y in zip(got, chunked(b, a)):
        np.testing.assert_array_equal(x, y)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [(0.3, 0.0), (-2.6, 1.45)])
def test_fft_fused_window_pairs_in_one_kernel(d, gpu):
    """n-to-mn with one right a left (PIV's window pairs) by fft-fused, which transforms both
    matrices of a pair in one block up to transforms of 64 (paired_kernel): the gaussian fit gives
    the planted displacement d within 0.05 px in every one of 40 pairs (transform 48); and on odd,
    unequal pairs with an offset (a window off the centre: 48; a full output: 64) the maps match
    float64 within the variant's bound, written over a poisoned output."""
    a, b = (x.astype(np.float32) for x in piv_frames(seeded_rng(("piv-paired", d)), d, 40))
    got = xcorr.peaks2d(b, a, form="n-to-mn", max_shift=8, subpixel="gaussian", algorithm="fft-fused")
    np.testing.assert_allclose(got.subpixel[:, 0], np.broadcast_to(d, (40, 2)), atol=0.05)
    np.testing.assert_array_equal(got.shift[:, 0], np.broadcast_to(np.round(d), (40, 2)))
    rng = seeded_rng(("paired-maps", d))
    left = (rng.uniform(-1, 1, (7, 29, 31)) + 40).astype(np.float32)
    right = (rng.uniform(-1, 1, (7, 23, 27)) - 3).astype(np.float32)
    for shifts, shape in ((((-9, 6), (-4, 11)), (16, 16)), (((-22, 28), (-26, 30)), (51, 57))):  # 48, 64
        out = np.full((7,) + shape, np.nan, np.float32)
        xcorr.correlate2d(left, right, form="n-to-mn", shifts=shifts, algorithm="fft-fused", out=out)
        want = fft_reference_maps("n-to-mn", left, right, shifts)
        assert np.isfinite(out).all()
        assert np.linalg.norm(out - want) <= 2e-6 * np.linalg.norm(want)  # fft-fused's bound (relative)


# fft-fused's window pairs (n-to-mn, one right a left): (transform, lefts, rights, window, fit, data).
# From PAIRED_PEAK_MIN points on paired_kernel takes the k = 1 peak itself, the map held in shared
# memory; below it the map and the reduce kernels are faster (51_fft_fused.cu, kPairedPeakMin).
PAIRED_PEAK_MIN = 64
FFT_FUSED_PAIRED = [
    (32, (5, 13, 11), (5, 9, 14), {}, "parabolic", "signed"),                           # full 21 x 24
    (48, (7, 29, 31), (7, 23, 27), {"shifts": ((-9, 6), (-4, 11))}, "gaussian", "offset"),  # off the centre
    (48, (6, 32, 32), (6, 32, 32), {"max_shift": 8}, "gaussian", "signed"),             # PIV's
    (48, (4, 40, 33), (4, 17, 30), {"mode": "valid"}, "parabolic", "offset"),           # 24 x 4
    (64, (3, 30, 33), (3, 25, 20), {}, "gaussian", "signed"),                           # full 54 x 52
    (64, (5, 64, 64), (5, 32, 32), {"mode": "valid"}, "gaussian", "offset"),            # 33 x 33
]


def fft_fused_k1_peaks_checked(form, a, b, window, subpixel, case, monkeypatch, own_pass=True):
    """fft-fused's k = 1 peaks of (a, b) from the variant's own pass (its explain says so, no map
    written; own_pass=False: from the map and the reduce kernels), each correct by the contract
    against the float64 reference map; returns that plan, its peaks and those of the route through
    the map and the reduce kernels (XCORR_NO_FUSED_PEAKS=1)."""
    args = dict(form=form, reduce="peaks", k=1, subpixel=subpixel, algorithm="fft-fused", **window)
    fused = xcorr.Plan(a.shape, b.shape, **args)
    assert ("own pass" in fused.explain()) == own_pass, fused.explain()
    got = fused(a, b)
    refplan = xcorr.Plan(a.shape, b.shape, form=form, algorithm="reference", **window)
    maps = fft_reference_maps(form, a, b, refplan.shifts)
    assert maps.shape[1:] == refplan.out_shape[-2:]
    algo = next(x for x in xcorr.algorithms() if x["name"] == "fft-fused")
    value, shift, sub = (x.reshape(maps.shape[0], 1, -1) for x in got)
    for m in range(maps.shape[0]):
        bad = check_peaks(maps[m], refplan.shifts, 1, 0, subpixel, value[m, :, 0], shift[m], sub[m],
                          bound_of(algo, None, maps[m]))
        assert not bad, (case, f"map {m}", bad)
    with monkeypatch.context() as mp:
        mp.setenv("XCORR_NO_FUSED_PEAKS", "1")
        chunked = xcorr.Plan(a.shape, b.shape, **args)
        assert "own pass" not in chunked.explain()
        return fused, got, chunked(a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("case", FFT_FUSED_PAIRED, ids=lambda c: f"{c[1]}x{c[2]}-{c[3]}")
def test_fft_fused_k1_peaks_of_window_pairs(case, monkeypatch, gpu):
    """fft-fused's window pairs at k = 1: at 64-point transforms the plan takes the peaks in the
    variant's own pass (its explain says so, no map written), below it from the map by the reduce
    kernels (peak1_kernel, a thread a map); correct by the contract against the float64 reference
    map, to the bit the peaks of the route through the map and the reduce kernels
    (XCORR_NO_FUSED_PEAKS=1: the same row DFTs and the same fit); a pair whose left holds a NaN has no
    peak, and its neighbours keep theirs."""
    n, ls, rs, window, subpixel, data = case
    rng = seeded_rng(("fft-fused-paired-peaks", ls, rs, str(window)))
    a, b = gpu_data(rng, ls, data), gpu_data(rng, rs, data)
    fused, got, want = fft_fused_k1_peaks_checked("n-to-mn", a, b, window, subpixel, case, monkeypatch,
                                                  own_pass=n >= PAIRED_PEAK_MIN)
    for x, y in zip(got, want):
        np.testing.assert_array_equal(x, y)
    a[1, ls[1] // 2, ls[2] // 2] = np.nan
    nan = fused(a, b)
    assert np.isnan(nan.value[1]).all() and (nan.shift[1] == 0).all() and np.isnan(nan.subpixel[1]).all()
    keep = [0] + list(range(2, ls[0]))
    for x, y in zip(nan, got):
        np.testing.assert_array_equal(x[keep], y[keep])


@pytest.mark.gpu
def test_fft_fused_window_pairs_decline_fused_peaks_where_the_window_has_shifts_without_overlap(gpu):
    """Window pairs whose window reaches beyond the full range: the zeros there are candidates too,
    so the plan takes the map and the reduce kernels (and the zeros win over a negative map)."""
    ls, rs = (3, 20, 24), (3, 12, 10)
    window = dict(shifts=((-15, 5), (-3, 2)))  # rows beyond -(hR - 1) = -11
    plan = xcorr.Plan(ls, rs, form="n-to-mn", reduce="peaks", k=1, algorithm="fft-fused", **window)
    assert "own pass" not in plan.explain()
    a = np.abs(seeded_rng("paired-decline").standard_normal(ls)).astype(np.float32) + 1
    b = -np.abs(seeded_rng("paired-decline-r").standard_normal(rs)).astype(np.float32) - 1
    got = plan(a, b)
    assert (got.value == 0).all() and (got.shift[:, 0, 0] == -15).all() and (got.shift[:, 0, 1] == -3).all()


# fft-fused's staged path (transforms of 256 to 1024 points a side): its k = 1 peaks come from its
# last pass. Shapes whose window takes each transform size (form, left, right, window, fit, data).
FFT_FUSED_STAGED = [
    ("n-to-m", (3, 130, 121), (4, 97, 110), {}, "parabolic", "signed"),                 # full 226 x 230: 256
    ("one-to-many", (250, 260), (20, 101, 99), {}, "gaussian", "offset"),               # 350 x 358: 384
    ("one-to-one", (260, 301), (240, 199), {}, "parabolic", "offset"),                  # 499 x 499: 512
    ("n-to-mn", (2, 500, 420), (6, 220, 300), {}, "gaussian", "signed"),                # 719 x 719: 768
    ("one-to-many", (600, 520), (2, 300, 501), {}, "parabolic", "signed"),              # 899 x 1020: 1024
    ("one-to-many", (400, 390), (8, 61, 57), {"mode": "valid"}, "gaussian", "offset"),  # 340 x 334 of 512
    ("one-to-many", (333, 345), (5, 64, 70), {"mode": "same"}, "parabolic", "signed"),
    ("n-to-m", (2, 300, 280), (3, 290, 270), {"max_shift": 60}, "gaussian", "signed"),
]


def fft_reference_maps(form, a, b, shifts):
    """The float64 maps of these sizes by NumPy's FFT (the reference's direct sums would take
    minutes): xcsuite.peers.fft_reference_np, which tests/test_peerbench.py holds to SciPy's
    correlate2d on every form and window, on float64 stacks; shifts ((dy0, dy1), (dx0, dx1))."""
    from xcsuite import peers
    A = np.asarray(a, np.float64).reshape((-1,) + a.shape[-2:])
    B = np.asarray(b, np.float64).reshape((-1,) + b.shape[-2:])
    (dy0, dy1), (dx0, dx1) = shifts
    return peers.fft_reference_np(form, A, B, (dy0, dy1, dx0, dx1))


@pytest.mark.gpu
@pytest.mark.parametrize("case", FFT_FUSED_STAGED, ids=lambda c: f"{c[0]}-{c[1]}x{c[2]}-{c[3]}")
def test_fft_fused_takes_k1_peaks_in_its_staged_pass(case, monkeypatch, gpu):
    """fft-fused beyond one block: at k = 1 the plan takes the peaks in the variant's own pass (its
    explain says so, no map written), correct by the contract against the float64 reference map,
    and the same peaks as the route through the map and the reduce kernels (XCORR_NO_FUSED_PEAKS=1):
    the same shifts, the values to the map's rounding, the fits within 1e-4."""
    form, ls, rs, window, subpixel, data = case
    rng = seeded_rng(("fft-fused-peaks", form, ls, rs, tuple(window)))
    a, b = gpu_data(rng, ls, data), gpu_data(rng, rs, data)
    _, got, want = fft_fused_k1_peaks_checked(form, a, b, window, subpixel, case, monkeypatch)
    np.testing.assert_array_equal(got.shift, want.shift)
    np.testing.assert_allclose(got.value, want.value, rtol=1e-6, atol=0)
    np.testing.assert_allclose(got.subpixel, want.subpixel, rtol=0, atol=1e-4)


@pytest.mark.gpu
def test_fft_fused_fused_peaks_find_planted_crops_and_skip_nan(gpu):
    """32-to-32 in small: 4 lefts of 256 x 256 and, as rights, crops of 200 x 210 from each at known
    offsets: every left's peak with its own crop is at the crop's offset, its value the crop's sum
    of squares; a left holding a NaN has no peak at all (NaN, (0, 0), NaN), as the contract says."""
    rng = seeded_rng("fft-fused-planted")
    lefts = rng.standard_normal((4, 256, 256)).astype(np.float32)
    offsets = [(0, 0), (17, 40), (56, 3), (31, 46)]
    rights = np.stack([lefts[j, y:y + 200, x:x + 210] for j, (y, x) in enumerate(offsets)])
    plan = xcorr.Plan(lefts.shape, rights.shape, form="n-to-m", reduce="peaks", k=1, algorithm="fft-fused")
    assert "own pass" in plan.explain()
    got = plan(lefts, rights)
    shift = got.shift.reshape(4, 4, 2)
    value = got.value.reshape(4, 4)
    for j, off in enumerate(offsets):
        assert tuple(shift[j, j]) == off, (j, shift[j, j])
        np.testing.assert_allclose(value[j, j], np.sum(rights[j].astype(np.float64) ** 2), rtol=1e-5)
    lefts[2, 100, 100] = np.nan
    got = plan(lefts, rights)
    value, shift, sub = got.value.reshape(4, 4), got.shift.reshape(4, 4, 2), got.subpixel.reshape(4, 4, 2)
    assert np.isnan(value[2]).all() and (shift[2] == 0).all() and np.isnan(sub[2]).all()
    assert np.isfinite(value[[0, 1, 3]]).all()
    assert tuple(shift[3, 3]) == offsets[3]


@pytest.mark.gpu
def test_fft_fused_declines_fused_peaks_where_the_window_has_shifts_without_overlap(gpu):
    """A window reaching beyond the full range holds exact zeros that are candidates too: the plan
    takes the map and the reduce kernels there (and is still right: the zeros win over a negative map)."""
    ls, rs = (230, 240), (3, 50, 60)
    window = dict(shifts=((-300, 100), (-80, 10)))  # rows beyond -(hR - 1) = -49
    plan = xcorr.Plan(ls, rs, reduce="peaks", k=1, algorithm="fft-fused", **window)
    assert "own pass" not in plan.explain()
    a = np.abs(seeded_rng("decline").standard_normal(ls)).astype(np.float32) + 1
    b = -np.abs(seeded_rng("decline-r").standard_normal(rs)).astype(np.float32) - 1  # every overlap negative
    got = plan(a, b)
    assert (got.value == 0).all() and (got.shift[:, 0, 0] == -300).all() and (got.shift[:, 0, 1] == -80).all()


@pytest.mark.gpu
@pytest.mark.parametrize("n", ["auto", "256"])
def test_fft_segmented_takes_k1_peaks_in_its_own_pass(n, monkeypatch, gpu):
    """Ambient noise in small: 5 stations of 20011 samples, each right a left delayed by a known lag
    (of both signs) under noise. At k = 1 fft-segmented takes the peaks where it reads its inverse
    transforms (its explain says so, no map written): every station's own pair peaks at its lag, the
    value its energy; the peaks are those of the route through the map and the reduce kernels
    (XCORR_NO_FUSED_PEAKS=1) to the bit, one piece (auto) or many (n=256) alike. A NaN in a left
    leaves its pairs without a peak."""
    rng = seeded_rng(("fft-segmented-peaks", n))
    lags = [0, 37, -211, 880, -1199]
    base = rng.standard_normal((5, 23000)).astype(np.float32)
    lefts = base[:, 1500:1500 + 20011].copy()  # right j's sample t is left j's t + lag: C peaks at lag
    rights = np.stack([base[j, 1500 + lag:1500 + lag + 20011] for j, lag in enumerate(lags)])
    rights += 0.3 * rng.standard_normal(rights.shape).astype(np.float32)
    args = dict(form="n-to-m", dims=1, max_lag=1300, reduce="peaks", k=1, subpixel="parabolic",
                algorithm="fft-segmented", params={"n": n})
    fused = xcorr.Plan(lefts.shape, rights.shape, **args)
    assert "own pass" in fused.explain(), fused.explain()
    got = fused(lefts, rights)
    shift, value = got.shift.reshape(5, 5), got.value.reshape(5, 5)
    for j, lag in enumerate(lags):
        assert shift[j, j] == lag, (j, shift[j, j])
        assert np.argmax(value[j]) == j
        overlap = lefts[j, max(0, lag):20011 + min(0, lag)].astype(np.float64)
        np.testing.assert_allclose(value[j, j], np.sum(overlap ** 2), rtol=0.02)
    monkeypatch.setenv("XCORR_NO_FUSED_PEAKS", "1")
    chunked = xcorr.Plan(lefts.shape, rights.shape, **args)
    assert "own pass" not in chunked.explain()
    for x, y in zip(got, chunked(lefts, rights)):
        np.testing.assert_array_equal(x, y)
    monkeypatch.delenv("XCORR_NO_FUSED_PEAKS")
    lefts[3, 9000] = np.nan
    got = fused(lefts, rights)
    value, shift, sub = got.value.reshape(5, 5), got.shift.reshape(5, 5), got.subpixel.reshape(5, 5)
    assert np.isnan(value[3]).all() and (shift[3] == 0).all() and np.isnan(sub[3]).all()
    assert shift[4, 4] == lags[4] and np.isfinite(value[[0, 1, 2, 4]]).all()


@pytest.mark.gpu
def test_fft_segmented_declines_fused_peaks_where_the_map_holds_zeros_or_chunks(monkeypatch, gpu):
    """Lags beyond the full range are exact zeros, candidates too: the plan takes the map and the
    reduce kernels there (and the zeros win over a negative correlation); so it does where the lag
    pieces run in chunks (XCORR_FFT_MAX_CHUNK), whose inverse transforms are not all there at once."""
    a = np.abs(seeded_rng("seg-decline").standard_normal((2, 3001))).astype(np.float32) + 1
    b = -np.abs(seeded_rng("seg-decline-r").standard_normal((3, 501))).astype(np.float32) - 1
    args = dict(form="n-to-m", dims=1, reduce="peaks", k=1, algorithm="fft-segmented")
    plan = xcorr.Plan(a.shape, b.shape, lags=(-700, 100), **args)  # lags below -(501 - 1)
    assert "own pass" not in plan.explain()
    got = plan(a, b)
    assert (got.value == 0).all() and (got.shift == -700).all()
    assert "own pass" in xcorr.Plan(a.shape, b.shape, lags=(-500, 100), **args).explain()
    monkeypatch.setenv("XCORR_FFT_MAX_CHUNK", "2")
    plan = xcorr.Plan(a.shape, b.shape, lags=(-500, 100), params={"n": "256"}, **args)
    assert "own pass" not in plan.explain()
    assert (plan(a, b).value < 0).all()


def test_the_check_allows_a_float32_position_s_rounding_and_no_more():
    """A peak at lag 300,000 whose fit is -0.0142: in float32, whose spacing there is 1/32, the
    position rounds to the lag itself, 0.0142 from the fit: more than the contract's 0.01, within the
    rounding docs/CONVENTIONS.md allows beside it (|position| / 2^24), so check_peaks passes it; the
    next float32 above (0.045 from the fit) fails."""
    W, x = 300_100, 300_000
    c = (0.5, 1.0, 0.4708)
    ref = np.zeros((1, W))
    ref[0, x - 1:x + 2] = c
    delta = _reference.subpixel_offset(*c, "parabolic")
    assert 0.01 < -delta < 1 / 64
    pos = np.float32(x + delta)
    assert pos == x  # the nearest float32

    def bad(position):
        sub = np.array([[0.0, position]], np.float64)
        return check_peaks(ref, ((0, 0), (0, W - 1)), 1, 0, "parabolic", [1.0], [[0, x]], sub, 1e-6)
    assert not bad(float(pos))
    assert bad(float(np.nextafter(pos, np.float32(np.inf))))
