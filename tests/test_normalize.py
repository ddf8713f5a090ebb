"""Normalized outputs (CONVENTIONS.md, "Normalization"): zncc and zero-lag.

CPU (runs everywhere): the float64 reference (`xcorr run --algorithm reference --normalize ...`)
against an independent NumPy float64 implementation (box sums by correlation with ones, the
contract's formula) for every form and window, and against OpenCV's matchTemplate
(TM_CCOEFF_NORMED) on the valid window; bad inputs (constant matrices, C(0, 0) = 0) give 0s;
unknown names exit 2 with one line; and the cancellation the fast path is built to avoid, shown on
a NumPy emulation of it (float32 raw correlation of shifted data, double summed-area tables).
GPU (skipped without one): every variant of the build under --normalize, forms and windows, odd
shapes, 1000 + noise, output poisoned (xcorr run poisons it), against float64 at 1e-4; and
xcorr_validate --normalize all."""
import numpy as np
import pytest
from scipy.signal import correlate2d

from conftest import (binary, fixture_variant_names, one_line_error, package, plan_precision, precision_args,
                      require_variant, run, run_poisoned, save, seeded_rng, xrun)
from xcorr_np import (CONSTANT_OVERLAP, FORMS, TABLE_EPS, counts, crop, full_window, normalized, normalized_window, pairs,
                      same_window, shape_refusal, supports_window, table_zncc_factor, valid_window, zncc_full)

MODES = ["zncc", "zero-lag"]
BOUND = 1e-4             # the contract's absolute error bound for normalized outputs


def windows(shape):
    """(xcorr run options, rectangle) of the windows of a problem's sizes."""
    hL, wL, hR, wR = shape
    out = [([], full_window(*shape)), (["--mode", "same"], same_window(*shape)),
           (["--max-shift", "2,3"], (-2, 2, -3, 3)),
           (["--shifts", f"{-(hR + 1)}:{hL // 2},{wL // 3 - 1}:{wL + 1}"], (-(hR + 1), hL // 2, wL // 3 - 1, wL + 1))]
    if valid_window(*shape):
        out.append((["--mode", "valid"], valid_window(*shape)))
    return out


def inputs(kind, rng, shape):
    """unit: [0, 1); signed: normal; large: 1000 + [-8, 8) (the cancellation case)."""
    if kind == "unit":
        return rng.random(shape, dtype=np.float32)
    if kind == "signed":
        return rng.standard_normal(shape).astype(np.float32)
    return (1000 + rng.uniform(-8, 8, shape)).astype(np.float32)


def run_normalized(xcorr, tmp_path, algorithm, form, mode, left, right, window_args=(), extra=()):
    out = tmp_path / "out.npy"
    r = xrun(xcorr, "--algorithm", algorithm, "--form", form, "--normalize", mode, *window_args, *extra,
             save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right), "--out", out)
    assert r.returncode == 0, r.stderr
    return np.load(out), r


SHAPES = [(1, 7, 1, 3), (5, 1, 2, 1), (9, 13, 4, 11), (3, 5, 7, 2), (23, 31, 19, 7), (17, 16, 16, 17)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%d*%dx%d" % s)
def test_reference_matches_numpy(xcorr, tmp_path, mode, form, shape):
    rng = seeded_rng((mode, form, shape))
    hL, wL, hR, wR = shape
    nL, nR = counts(form, rng)
    # zero-lag on positive inputs (a signed C(0, 0) near 0 makes any ratio huge); zncc signed too.
    kinds = ("unit", "large") if mode == "zero-lag" else ("signed", "large")
    for kind in kinds:
        left = inputs(kind, rng, (nL, hL, wL))
        right = inputs("unit" if kind == "signed" else kind, rng, (nR, hR, wR))
        for args, rect in windows(shape):
            got, r = run_normalized(xcorr, tmp_path, "reference", form, mode, left, right, args, ["--validate"])
            # zncc is judged by its absolute error, zero-lag (C / C(0, 0), C(0, 0) exact) by the relative one
            assert ("absolute error" if mode == "zncc" else "relative error") in r.stdout and "ok" in r.stdout, r.stdout
            expected = normalized(mode, form, left, right, rect)
            assert got.shape == expected.shape
            assert np.isfinite(got).all()
            # float64 values rounded once to float32: the two float64 computations agree far below that.
            scale = max(1.0, float(np.abs(expected).max()))
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * scale, err_msg=f"{kind} {args}")
            if mode == "zncc":
                assert np.abs(got).max() <= 1 + 1e-6


@pytest.fixture(scope="module")
def cv2():
    return pytest.importorskip("cv2", reason="opencv-python-headless is not installed (requirements.txt)")


@pytest.mark.parametrize("shape", [(37, 41, 9, 13), (20, 17, 20, 5), (33, 8, 1, 8), (12, 29, 11, 3)],
                         ids=lambda s: "%dx%d*%dx%d" % s)
@pytest.mark.parametrize("form", ["one-to-one", "one-to-many"])
def test_reference_matches_opencv_valid(xcorr, tmp_path, cv2, shape, form):
    """OpenCV's TM_CCOEFF_NORMED (image L, template R) is the zncc of the valid window: its
    element (y, x) is shift (y, x)."""
    rng = seeded_rng(("opencv", form, shape))
    hL, wL, hR, wR = shape
    nR = 1 if form == "one-to-one" else 3
    left = rng.random((1, hL, wL), dtype=np.float32)
    right = rng.standard_normal((nR, hR, wR)).astype(np.float32)
    got, _ = run_normalized(xcorr, tmp_path, "reference", form, "zncc", left, right, ["--mode", "valid"])
    assert got.shape == (nR, hL - hR + 1, wL - wR + 1)
    for k in range(nR):
        expected = cv2.matchTemplate(left[0], right[k], cv2.TM_CCOEFF_NORMED)
        assert expected.shape == got[k].shape
        np.testing.assert_allclose(got[k], expected, rtol=0, atol=BOUND)


@pytest.mark.parametrize("form", FORMS)
def test_constant_matrices_give_zeros(xcorr, tmp_path, form):
    """zncc of a constant matrix (or an all-zero one) is 0 at every shift, on either side, never NaN."""
    rng = seeded_rng(("constant", form))
    nL, nR = counts(form, rng)
    varying_l, varying_r = rng.random((nL, 5, 7), dtype=np.float32), rng.random((nR, 3, 4), dtype=np.float32)
    for left, right in [(np.full((nL, 5, 7), 1000.25, np.float32), varying_r),
                        (varying_l, np.full((nR, 3, 4), -3.5, np.float32)),
                        (np.zeros((nL, 5, 7), np.float32), np.zeros((nR, 3, 4), np.float32))]:
        for args in ([], ["--mode", "valid"], ["--shifts", "-5:6,-6:9"]):
            got, r = run_normalized(xcorr, tmp_path, "reference", form, "zncc", left, right, args, ["--validate"])
            assert (got == 0).all(), (args, got)


def test_constant_overlaps_give_zeros_where_the_rest_does_not(xcorr, tmp_path):
    """A left constant in its top half: shifts whose overlap lies inside that half are 0, others not."""
    rng = seeded_rng("constant-part")
    left = rng.random((1, 12, 9), dtype=np.float32)
    left[0, :6] = 7.0
    right = rng.random((1, 3, 3), dtype=np.float32)
    got, _ = run_normalized(xcorr, tmp_path, "reference", "one-to-one", "zncc", left, right, ["--mode", "valid"])
    expected = normalized("zncc", "one-to-one", left, right, valid_window(12, 9, 3, 3))
    assert (got[0, :4] == 0).all() and (expected[0, :4] == 0).all()  # shifts 0..3: rows 0..5 only
    assert (got[0, 4:] != 0).all()
    np.testing.assert_allclose(got, expected, atol=1e-6)


@pytest.mark.parametrize("form", FORMS)
def test_zero_lag_with_zero_c00_gives_zeros(xcorr, tmp_path, form):
    """C(0, 0) = 0 (the overlap at shift (0, 0) holds only zeros of the left): the whole output of
    that pair is 0, this project's defined value, never NaN or Inf; the other pairs are normal."""
    rng = seeded_rng(("c00", form))
    nL, nR = counts(form, rng)
    left = rng.random((nL, 6, 7), dtype=np.float32)
    left[0, :4, :5] = 0  # shift (0, 0) overlaps rows < 4, columns < 5 of a 4 x 5 right
    right = rng.random((nR, 4, 5), dtype=np.float32) + 0.5
    for args in ([], ["--shifts", "1:3,-2:4"]):
        got, _ = run_normalized(xcorr, tmp_path, "reference", form, "zero-lag", left, right, args, ["--validate"])
        assert np.isfinite(got).all()
        for k, (i, _) in enumerate(pairs(form, nL, nR)):
            assert (got[k] == 0).all() if i == 0 else (got[k] != 0).any()
    got, _ = run_normalized(xcorr, tmp_path, "reference", form, "zero-lag", np.zeros_like(left), right)
    assert (got == 0).all()


def test_unknown_normalization_is_a_usage_error(xcorr, tmp_path):
    left, right = np.ones((3, 3), np.float32), np.ones((2, 2), np.float32)
    for name in ["ncc", "ZNCC", ""]:
        r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", "--normalize", name,
                 save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right), "--out", tmp_path / "o.npy")
        one_line_error(r, 2, "unknown normalization", "none", "zncc", "zero-lag")
        assert not (tmp_path / "o.npy").exists()
    r = run([binary("xcorr_validate"), "--normalize", "ncc"])
    one_line_error(r, 2, "unknown normalization", "zero-lag")
    r = run([binary("xcorr_bench"), "--case", "variant=overlap-wise form=one-to-one size=8 normalize=ncc",
             "--benchmark_list_tests"])
    one_line_error(r, 2, "normalize=", "unknown normalization")


def test_bench_case_names_gain_a_norm_segment_only_when_normalized(registry):
    v = registry[0]
    form = v["forms"][0]
    base = f"variant={v['name']} form={form} size=8 nL=2 nR=2" if form in ("n-to-mn", "n-to-m") \
        else f"variant={v['name']} form={form} size=8 nL=1 nR=1"
    r = run([binary("xcorr_bench"), "--case", base, "--case", base + " normalize=none", "--case",
             base + " normalize=zncc", "--case", base + " normalize=zero-lag", "--benchmark_list_tests"])
    assert r.returncode == 0, r.stderr
    names = [n.split("/min_time:")[0].removesuffix("/manual_time") for n in r.stdout.split()]
    assert len(names) == 4
    assert names[0] == names[1] and "/norm:" not in names[0]
    for name, mode in zip(names[2:], MODES):
        assert f"/nR:2/norm:{mode}" in name or f"/nR:1/norm:{mode}" in name, name
        assert name.replace(f"/norm:{mode}", "") == names[0]


def test_suite_reads_the_norm_segment_as_the_case_lines_normalize_key():
    """xcsuite: a normalized case's bench name and its case line give the same identity."""
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT))
    from xcsuite.benchjson import parse_bench_name
    from xcsuite.resultfile import identity_from_line, line_of
    line = "variant=fft form=one-to-many hL=64 wL=64 hR=16 wR=16 nL=1 nR=4 normalize=zncc"
    ident = identity_from_line(line)
    variant, dims, shifts, params = parse_bench_name(
        "fft/one-to-many/hL:64/wL:64/hR:16/wR:16/nL:1/nR:4/norm:zncc/manual_time")
    assert params == ident["params"] == {"normalize": "zncc"} and shifts == ""
    assert line_of({**ident, "params": params}) == line


def test_help_texts_document_normalize():
    assert "--normalize" in run([binary("xcorr"), "run", "--help"]).stdout
    assert "--normalize" in run([binary("xcorr_validate"), "--help"]).stdout
    assert "normalize=" in run([binary("xcorr_bench"), "--help"]).stdout


# --- the cancellation: why the fast path shifts the data -------------------------------------------

def span(s, m, n):
    """overlap_span: right indices i in [b, e) with i + s in [0, m), per shift (arrays)."""
    b = np.maximum(0, -s)
    e = np.minimum(n, m - s)
    return b, np.maximum(e, b)


def table(x):
    """(h+1) x (w+1) summed-area table in double, row 0 and column 0 zero (normalize.cu's)."""
    t = np.zeros((x.shape[0] + 1, x.shape[1] + 1))
    t[1:, 1:] = np.cumsum(np.cumsum(x.astype(np.float64), 0), 1)
    return t


def box(t, r0, r1, c0, c1):
    return t[r1, c1] - t[r0, c1] - t[r1, c0] + t[r0, c0]


def zncc_fast_emulated(L, R, table_rounding=True):
    """normalize.cu's zncc on the full window, in NumPy: global means in double, float32 shifted
    copies, the raw correlation in float32 (scipy on float32 arrays), tables of (X', X'^2) in
    double, the epilogue in double with the threshold relative to each matrix's variance and (unless
    table_rounding is False: the GPU's arithmetic before the tables' rounding bound) the factor above
    the tables' rounding (xcorr_np.table_zncc_factor)."""
    hL, wL = L.shape
    hR, wR = R.shape
    ml, mr = L.astype(np.float64).mean(), R.astype(np.float64).mean()
    Ls, Rs = (L - ml).astype(np.float32), (R - mr).astype(np.float32)
    c = correlate2d(Ls, Rs).astype(np.float64)  # float32 in, float32 arithmetic
    assert correlate2d(Ls, Rs).dtype == np.float32
    dy = np.arange(-(hR - 1), hL)[:, None]
    dx = np.arange(-(wR - 1), wL)[None, :]
    rb, re = span(dy, hL, hR)
    cb, ce = span(dx, wL, wR)
    rb, re, cb, ce = np.broadcast_arrays(rb, re, cb, ce)
    n = ((re - rb) * (ce - cb)).astype(np.float64)
    tl, tl2, tr, tr2 = table(Ls), table(Ls.astype(np.float64) ** 2), table(Rs), table(Rs.astype(np.float64) ** 2)
    sl, ql = box(tl, rb + dy, re + dy, cb + dx, ce + dx), box(tl2, rb + dy, re + dy, cb + dx, ce + dx)
    sr, qr = box(tr, rb, re, cb, ce), box(tr2, rb, re, cb, ce)
    vl, vr = L.astype(np.float64).var(), R.astype(np.float64).var()
    fl, okl = table_zncc_factor(sl, ql, tl2[re + dy, ce + dx], re + dy, ce + dx, n, vl)
    fr, okr = table_zncc_factor(sr, qr, tr2[re, ce], re, ce, n, vr)
    if not table_rounding:
        okl = fl > CONSTANT_OVERLAP * n * n * vl
        okr = fr > CONSTANT_OVERLAP * n * n * vr
    ok = (n > 0) & okl & okr
    out = np.zeros_like(n)
    out[ok] = np.clip((n * c - sl * sr)[ok] / np.sqrt(fl[ok] * fr[ok]), -1, 1)
    return out


def zncc_naive_float32(L, R):
    """The textbook formula with every sum and the formula itself in float32."""
    f = np.float32
    oL, oR = np.ones_like(L), np.ones_like(R)
    n = correlate2d(oL, oR)
    sl, sr = correlate2d(L, oR), correlate2d(oL, R)
    sll, srr = correlate2d(L * L, oR), correlate2d(oL, R * R)
    slr = correlate2d(L, R)
    assert slr.dtype == sll.dtype == f
    fl, fr = n * sll - sl * sl, n * srr - sr * sr
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (n * slr - sl * sr) / np.sqrt(fl * fr)
    return np.where((n > 0) & (fl > f(CONSTANT_OVERLAP) * n * sll) & (fr > f(CONSTANT_OVERLAP) * n * srr), out, f(0))


@pytest.mark.parametrize("shape", [(40, 37, 13, 11), (64, 64, 16, 16)], ids=lambda s: "%dx%d*%dx%d" % s)
def test_cancellation_naive_float32_fails_shifted_moments_pass(shape):
    """Images of 1000 + noise: the naive float32 formula misses 1e-4 by orders of magnitude (its
    n·ΣX² - (ΣX)² cancels ~6 of float32's 7 digits); the fast path's shifted-moment formula meets it
    at every shift of the full output, on unit-range inputs as well."""
    hL, wL, hR, wR = shape
    rng = seeded_rng(("cancellation", shape))
    L = (1000 + rng.uniform(-8, 8, (hL, wL))).astype(np.float32)
    R = (1000 + rng.uniform(-8, 8, (hR, wR))).astype(np.float32)
    exact = zncc_full(L, R)
    naive = zncc_naive_float32(L, R).astype(np.float64)
    naive_err = np.nanmax(np.abs(np.where(np.isfinite(naive), naive, 10) - exact))
    assert naive_err > 10 * BOUND, naive_err
    fast_err = np.abs(zncc_fast_emulated(L, R) - exact).max()
    assert fast_err <= BOUND, fast_err
    assert fast_err < naive_err / 1000
    Lu, Ru = rng.random((hL, wL), dtype=np.float32), rng.random((hR, wR), dtype=np.float32)
    assert np.abs(zncc_fast_emulated(Lu, Ru) - zncc_full(Lu, Ru)).max() <= BOUND


def sequential_float32_sum(terms):
    """A float32 sum in one running accumulator (np.cumsum keeps the order): the inner loop of
    overlap-wise, or of register-tiled without split-K."""
    return float(np.cumsum(terms.astype(np.float32).ravel(), dtype=np.float32)[-1])


# --- constant overlaps: zeros and constants inside data that varies ---------------------------------

def padded(rng, shape, value=0.0):
    """A left with bands of `value` (zero padding: 0): the first half of the rows and the first 15
    columns, uniform on [-1, 1) elsewhere."""
    L = rng.uniform(-1, 1, shape).astype(np.float32)
    L[:shape[0] // 2, :], L[:, :15] = value, value
    return L


@pytest.mark.parametrize("value", [0.0, 0.3], ids=["zeros", "constant"])
def test_fast_path_model_gives_zero_on_constant_overlaps(value):
    """zncc_fast_emulated (normalize.cu's arithmetic) on a left padded with a constant: the shifts
    whose overlap holds only the constant must be 0 (CONVENTIONS.md: an exactly constant overlap is 0
    whatever the rounding), and the rest within the bound. (Before the tables' rounding bound the threshold was
    relative to the overlap's ΣX², itself rounding noise there, and the factor's noise passed it for
    some of these seeds; the threshold relative to the matrix's variance is above such
    noise on crops this small, and the tables' rounding bound keeps exact constants 0 on large ones:
    test_table_rounding_bound_holds.)"""
    for seed in range(8):
        rng = np.random.default_rng(seed)
        L = padded(rng, (40, 37), value)
        R = rng.uniform(-1, 1, (13, 11)).astype(np.float32)
        expected = normalized("zncc", "one-to-one", L[None], R[None])[0]
        with np.errstate(all="ignore"):
            got = zncc_fast_emulated(L, R)
        assert np.abs(got - expected).max() <= BOUND, seed
        assert np.count_nonzero(expected == 0) > 100 and np.all(got[expected == 0] == 0), seed


def exact_box(x, r0, r1, c0, c1):
    """ΣX and ΣX² over a box of float32 x, exactly rounded (math.fsum; every square of a float is
    exact in double)."""
    import math
    v = x[r0:r1, c0:c1].astype(np.float64).ravel()
    return math.fsum(v), math.fsum(v * v)


@pytest.mark.parametrize("kind", ["padded", "unit", "large", "signal"])
def test_table_rounding_bound_holds(kind):
    """The bound behind table_zncc_factor (normalize.cu's zncc_factor): a box sum read from the
    double summed-area tables is within k·corner (ΣX'²) and k·sqrt(r1·c1·corner) (ΣX') of its
    exactly rounded value, with half the GPU's k (u, not 2u: the factor 2 there covers f's own
    rounding), for random boxes of crops of mean-shifted data of several kinds."""
    rng = seeded_rng(("table-rounding", kind))
    shape = {"padded": (40, 37), "unit": (61, 47), "large": (53, 64), "signal": (1, 5000)}[kind]
    if kind == "padded":
        x = padded(rng, shape)
    elif kind == "large":
        x = (1000 + rng.uniform(-8, 8, shape)).astype(np.float32)
    else:
        x = rng.standard_normal(shape).astype(np.float32)
    xs = (x - x.astype(np.float64).mean()).astype(np.float32)
    t, t2 = table(xs), table(xs.astype(np.float64) ** 2)
    h, w = shape
    worst = 0.0
    for _ in range(400):
        r0, r1 = sorted(rng.integers(0, h + 1, 2))
        c0, c1 = sorted(rng.integers(0, w + 1, 2))
        if r0 == r1 or c0 == c1:
            continue
        sx, sq = exact_box(xs, r0, r1, c0, c1)
        k = TABLE_EPS / 2 * 4.0 * (r1 + c1 + 3)
        corner = t2[r1, c1]
        ex, eq = abs(box(t, r0, r1, c0, c1) - sx), abs(box(t2, r0, r1, c0, c1) - sq)
        assert eq <= k * corner and ex <= k * np.sqrt(r1 * c1 * corner), (r0, r1, c0, c1, eq, ex)
        worst = max(worst, eq / (k * corner) if corner else 0.0)
    assert worst > 0, "no box showed any rounding: the check checks nothing"


def test_table_rounding_bound_keeps_every_varying_overlap():
    """The rounding test changes nothing where the data varies: unit, signed, 1000 + noise and a
    512 x 512 * 16 x 16 pair give the same output with and without it (it only zeroes factors
    indistinguishable from 0)."""
    rng = seeded_rng("table-rounding-keeps")
    cases = [(rng.random((40, 37)), rng.random((13, 11))),
             (rng.standard_normal((33, 29)), rng.standard_normal((7, 5))),
             (1000 + rng.uniform(-8, 8, (40, 37)), 1000 + rng.uniform(-8, 8, (13, 11))),
             (rng.standard_normal((512, 512)), rng.standard_normal((16, 16)))]
    for L, R in cases:
        L, R = L.astype(np.float32), R.astype(np.float32)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(zncc_fast_emulated(L, R), zncc_fast_emulated(L, R, table_rounding=False))


def test_zero_lag_shifted_sum_keeps_the_precision_the_raw_sum_loses():
    """zero-lag of 512 x 512 images of 1000 + noise near shift 0: C itself summed in float32 loses
    ~1e-6 of itself in one sequential accumulator (262144 terms of ~1e6; the GPU's long per-thread
    sums lost 1.1e-5, past the contract's 1e-5); the fast path's C = C' + mR·ΣL' + mL·ΣR' + n·mL·mR,
    with C' the same float32 sum of the shifted data and the rest in double, stays below 1e-8, a
    hundredth of it at least (normalize.hpp)."""
    rng = seeded_rng("zero-lag-shifted")
    L = (1000 + rng.uniform(-8, 8, (512, 512))).astype(np.float32)
    R = (1000 + rng.uniform(-8, 8, (512, 512))).astype(np.float32)
    ml, mr = L.astype(np.float64).mean(), R.astype(np.float64).mean()
    Ls, Rs = (L - ml).astype(np.float32), (R - mr).astype(np.float32)
    for dy, dx in [(0, 0), (1, -2), (-2, 3)]:
        l = L[max(0, dy):512 + min(0, dy), max(0, dx):512 + min(0, dx)]
        r = R[max(0, -dy):512 - max(0, dy), max(0, -dx):512 - max(0, dx)]
        ls = Ls[max(0, dy):512 + min(0, dy), max(0, dx):512 + min(0, dx)]
        rs = Rs[max(0, -dy):512 - max(0, dy), max(0, -dx):512 - max(0, dx)]
        exact = float((l.astype(np.float64) * r).sum())
        naive = sequential_float32_sum(l * r)
        shifted = (sequential_float32_sum(ls * rs) + mr * ls.astype(np.float64).sum() + ml * rs.astype(np.float64).sum()
                   + l.size * ml * mr)
        naive_err, shifted_err = abs(naive - exact) / exact, abs(shifted - exact) / exact
        assert naive_err > 1e-7, naive_err
        assert shifted_err < min(1e-8, naive_err / 100), (shifted_err, naive_err)


# --- GPU: every variant under the fast path ---------------------------------------------------------

GPU_SHAPES = [(17, 23, 9, 31), (33, 29, 7, 5), (1, 41, 1, 9), (64, 64, 64, 64)]


def gpu_variant_names():
    import json
    r = run([binary("xcorr"), "list", "--json"])
    return [v["name"] for v in json.loads(r.stdout)] if r.returncode == 0 else []


def plan_shifts(rect):
    """The package's window argument for a case of windows(): its rectangle as shifts=."""
    dy0, dy1, dx0, dx1 = rect
    return {"shifts": ((dy0, dy1), (dx0, dx1))}


@pytest.mark.parametrize("name", gpu_variant_names())
@pytest.mark.parametrize("mode", MODES)
def test_gpu_variants_normalized(gpu, xcorr, registry, tmp_path, name, mode):
    """Every form and window the variant computes, odd shapes, 1000 + noise and [0, 1): the output
    (a device buffer of NaN before the run: conftest.run_poisoned) within 1e-4 of NumPy's float64. The cases run in this
    process through the Python package's Plan (the C++ Plan that `xcorr run` uses: one CUDA
    context for ~160 cases, where one `xcorr run` process per case took ~100 s per test); the first
    case of each form also through `xcorr run --validate` (its own poisoning and GPU reference)."""
    pkg = package(name)
    v = next(v for v in registry if v["name"] == name)
    bound = max(BOUND, v["tolerance"])
    cases = 0
    for form in v["forms"]:
        cli_done = False
        for shape in GPU_SHAPES:
            rng = seeded_rng(("gpu", name, mode, form, shape))
            hL, wL, hR, wR = shape
            nL, nR = counts(form, rng)
            for kind in ("large", "unit"):
                left, right = inputs(kind, rng, (nL, hL, wL)), inputs(kind, rng, (nR, hR, wR))
                full = None  # the float64 full output, once per inputs: every window is a crop of it
                for args, rect in windows(shape):
                    if not supports_window(v["windows"], shape, rect) or shape_refusal(v, shape, rect):
                        continue
                    full = normalized(mode, form, left, right) if full is None else full
                    expected = crop(full, hR, wR, *rect)
                    plan = pkg.Plan(left.shape, right.shape, form=form, normalize=mode, algorithm=name,
                                    precision=plan_precision(v), **plan_shifts(rect))
                    got = run_poisoned(plan, left, right).reshape(expected.shape)
                    assert np.isfinite(got).all(), (form, shape, kind, args)
                    err = np.abs(got - expected).max()
                    assert err <= bound, (form, shape, kind, args, err)
                    cases += 1
                    if not cli_done:
                        got, r = run_normalized(xcorr, tmp_path, name, form, mode, left, right, args,
                                                ["--validate", *precision_args(v)])
                        assert np.abs(got - expected).max() <= bound, (form, shape, kind, args, "xcorr run")
                        cli_done = True
    assert cases, f"{name} computed no case of {mode}"


@pytest.mark.parametrize("name", gpu_variant_names())
def test_gpu_zncc_is_zero_on_constant_overlaps(gpu, registry, name):
    """Every algorithm's zncc on padded data, one-to-many (n-to-m of one left where that is all
    the algorithm computes), full window (small-window: shifts within 7): 2-D, a 70 x 90 left whose
    first 25 rows and 30 columns are 0 (then, a second left, 0.3) against three 9 x 11 rights; 1-D,
    a 4000-sample trace whose first 1500 samples are 0 against three 65-sample templates. Within
    1e-4 of float64, which is 0 on every overlap of the constant. On the H100 (before
    the tables' rounding bound) every algorithm missed it at 17% of the elements, by up to 1."""
    pkg = package(name)
    v = next(v for v in registry if v["name"] == name)
    bound = max(BOUND, v["tolerance"])
    rng = np.random.default_rng(3)
    cases = []
    for value in (0.0, 0.3):
        left, right = rng.uniform(-1, 1, (1, 70, 90)).astype(np.float32), rng.uniform(-1, 1, (3, 9, 11)).astype(np.float32)
        left[..., :25, :], left[..., :, :30] = value, value
        cases.append((left, right))
    left, right = rng.uniform(-1, 1, (1, 1, 4000)).astype(np.float32), rng.uniform(-1, 1, (3, 1, 65)).astype(np.float32)
    left[..., :1500] = 0
    cases.append((left, right))
    ran = 0
    for left, right in cases:
        shape = left.shape[1:] + right.shape[1:]
        # the full output, or where the algorithm computes fewer shifts (small-window), those within
        # 7 of 0 (every overlap there lies in the padding)
        rects = [full_window(*shape), (0, 0, -7, 7) if shape[0] == 1 else (-7, 7, -7, 7)]
        rect = next((r for r in rects if supports_window(v["windows"], shape, r) and not shape_refusal(v, shape, r)),
                    None)
        if rect is None:
            continue
        form = "one-to-many" if "one-to-many" in v["forms"] else "n-to-m"  # multi-matrix-both: one left
        expected = normalized("zncc", form, left, right, rect)
        plan = pkg.Plan(left.shape, right.shape, form=form, normalize="zncc", algorithm=name,
                        precision=plan_precision(v), **plan_shifts(rect))
        got = run_poisoned(plan, left, right).reshape(expected.shape)
        assert np.abs(got - expected).max() <= bound, (shape, float(left[0, 0, 0]))
        ran += 1
    assert ran, f"{name} computed none of the cases"


def test_gpu_zero_lag_large_mean_keeps_float64_precision(gpu, xcorr, registry, tmp_path):
    """The long sequential sums (overlap-wise; register-tiled without split-K) on 512 x 512 images
    of 1000 + noise, shifts within 2, 3 of 0: zero-lag within 1e-7 of float64 (the raw float32 sum
    alone misses it by ~1e-5; the fast path sums the shifted data)."""
    names = {v["name"] for v in registry}
    runs = [(n, extra) for n, extra in [("overlap-wise", []), ("register-tiled", ["--param", "waves=0"])] if n in names]
    if not runs:
        pytest.skip("neither overlap-wise nor register-tiled is in this build")
    rng = seeded_rng("zero-lag-large-gpu")
    left, right = inputs("large", rng, (1, 512, 512)), inputs("large", rng, (1, 512, 512))
    # direct sums over the 35 shifts (scipy's full 512 x 512 correlate2d took minutes of a device call)
    expected = normalized_window("zero-lag", "one-to-one", left, right, (-2, 2, -3, 3))
    for name, extra in runs:
        got, _ = run_normalized(xcorr, tmp_path, name, "one-to-one", "zero-lag", left, right,
                                ["--max-shift", "2,3"], extra)
        err = np.linalg.norm(got - expected) / np.linalg.norm(expected)
        assert err <= 1e-7, (name, err)


@pytest.mark.parametrize("mode", MODES)
def test_window_reference_equals_the_full_one_cropped(mode):
    """normalized_window (direct float64 sums per shift, for large matrices) against normalized (scipy
    correlations with ones, cropped), windows inside, across and beyond the full range, 1000 + noise."""
    rng = seeded_rng(("window-reference", mode))
    for (hL, wL, hR, wR), form, rect in [((13, 17, 5, 8), "one-to-many", (-6, 14, -9, 18)),
                                         ((6, 9, 11, 14), "n-to-m", (-12, 3, -2, 5)),
                                         ((9, 4, 9, 4), "one-to-one", (-2, 2, -3, 3))]:
        nL, nR = counts(form, rng)
        left, right = inputs("large", rng, (nL, hL, wL)), inputs("large", rng, (nR, hR, wR))
        want = normalized(mode, form, left, right, rect)
        assert np.abs(normalized_window(mode, form, left, right, rect) - want).max() <= 1e-9


# The prepass's paths for large crops (normalize.cu's prepass_of; `xcorr explain --json` prints which a
# problem takes): (shape, form, window rectangle or None for the full output, the paths it must take).
PREPASS_CASES = [  # (shape, form, nL, nR, window or None, the left stack's paths)
    # one left crop of 103 x 560 (a 0.93 MB table: whole, under kSampledMinBytes); the 3 rights sampled
    ((130, 600, 100, 520), "one-to-many", 1, 3, (-3, 3, -40, 40), {"chunked_rows": True, "sampled": False}),
    ((1300, 9, 1200, 7), "one-to-one", 1, 1, None, {"chunked_rows": False, "sampled": False}),   # banded columns
    ((1300, 9, 1200, 7), "n-to-m", 2, 2, (-2, 2, -3, 3), {"chunked_rows": False}),
    ((600, 700, 500, 650), "one-to-one", 1, 1, (-2, 2, -3, 3), {"chunked_rows": True, "sampled": True}),
    ((100, 90, 80, 70), "n-to-m", 70, 1, (-3, 3, -4, 4), {"strip": True, "sampled": True}),  # 70 crops of 83 x 74
    ((80, 70, 5, 6), "n-to-m", 64, 2, None, {"strip": True, "sampled": False}),
    ((100, 700, 80, 600), "n-to-m", 70, 1, (-2, 2, -3, 3), {"strip": True, "chunked_rows": False, "sampled": True}),
    # 64 crops of 65 x 66 (88 KB in the fused prepass, past kStripOverFusedBytes): the strip prepass
    ((80, 81, 60, 61), "n-to-m", 64, 1, (-5, 5, -5, 5), {"strip": True, "partials": 1}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["fft", "register-tiled"])
def test_gpu_prepass_paths_on_large_crops(gpu, registry, name, mode):
    """Chunked rows, banded columns, many partial sums, sampled tables and the strip prepass (the paths
    explain reports for these problems), through the package in this process, output poisoned,
    1000 + noise: within 1e-4 of float64 (direct sums per shift for windows, scipy for full outputs)."""
    import json
    require_variant(registry, name)
    v = next(v for v in registry if v["name"] == name)
    pkg = package(name)
    for shape, form, nL, nR, rect, paths in PREPASS_CASES:
        hL, wL, hR, wR = shape
        win = [] if rect is None else ["--shifts", f"{rect[0]}:{rect[1]},{rect[2]}:{rect[3]}"]
        r = run([binary("xcorr"), "explain", "--gpu", "none", "--json", "--form", form, "--left", f"{nL}:{hL}x{wL}",
                 "--right", f"{nR}:{hR}x{wR}", *win, "--normalize", mode])
        assert r.returncode == 0, r.stderr
        pp = json.loads(r.stdout)["normalization_crop"]["prepass"]
        assert not pp["left"]["fused"] and (pp["left"]["partials"] > 1 or pp["left"]["strip"])
        assert all(pp["left"][k] == want for k, want in paths.items()), (shape, pp)
        if pp["left"]["strip"]:  # a right stack of narrow tables rides along (kStripMaxWidth: 384)
            assert pp["right"]["strip"] == (pp["right"]["table_columns"] <= 384), (shape, pp)
        if hL > 1000:
            assert pp["left"]["col_bands"] > 1 and pp["right"]["col_bands"] > 1, pp
        rng = seeded_rng(("prepass-paths", name, mode, shape, form))
        left, right = inputs("large", rng, (nL, hL, wL)), inputs("large", rng, (nR, hR, wR))
        expected = (normalized(mode, form, left, right) if rect is None
                    else normalized_window(mode, form, left, right, rect))
        kw = {} if rect is None else plan_shifts(rect)
        plan = pkg.Plan(left.shape, right.shape, form=form, normalize=mode, algorithm=name,
                        precision=plan_precision(v), **kw)
        got = run_poisoned(plan, left, right).reshape(expected.shape)
        assert np.isfinite(got).all(), (shape, form)
        assert np.abs(got - expected).max() <= max(BOUND, v["tolerance"]), (shape, form, np.abs(got - expected).max())


@pytest.mark.parametrize("name", fixture_variant_names())
def test_gpu_validate_normalize_all(gpu, registry, name):
    """xcorr_validate --normalize all on the quick shapes, one variant per test (pytest -n spreads them;
    each run also checks the references on its cases)."""
    require_variant(registry, name)
    r = run([binary("xcorr_validate"), "--variant", name, "--normalize", "all", "--quick", "--params", "covering"],
            timeout=3000)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    assert f"{name}  " in r.stdout and "normalize zncc" in r.stdout and "normalize zero-lag" in r.stdout
    assert "inputs=1000+[-8,8)" in r.stdout


@pytest.mark.parametrize("mode", MODES)
def test_gpu_auto_normalized(gpu, xcorr, tmp_path, mode):
    """--algorithm auto goes through the plan, which wraps whatever it picks in the normalization."""
    rng = seeded_rng(("auto", mode))
    left, right = inputs("large", rng, (1, 200, 150)), inputs("large", rng, (5, 31, 17))
    for args, rect in [([], full_window(200, 150, 31, 17)), (["--mode", "valid"], valid_window(200, 150, 31, 17))]:
        got, r = run_normalized(xcorr, tmp_path, "auto", "one-to-many", mode, left, right, args, ["--validate"])
        assert "auto chose" in r.stderr
        assert np.abs(got - normalized(mode, "one-to-many", left, right, rect)).max() <= BOUND
