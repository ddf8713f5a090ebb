"""zncc ignores offsets and gains (CONVENTIONS.md, "Normalization": zncc(a·L + b, c·R + d) = zncc(L, R)
for a, c > 0 and any offset float32 still resolves; "constant" is relative to the matrix's own
spread, never to its magnitude).

With a constant rule relative to the magnitude, every path called constant any part whose
coefficient of variation was below 1e-3: a 31 x 31 template cut from an image of 1000 + noise of amplitude 1 gave 0 at every shift. These
tests assert what a user sees: the template is found where it was cut, with value 1; a lag is found
on a trace with a DC level; and the whole output does not move when inputs are scaled and offset
(exactly representable affine maps, so that both inputs are the same data)."""
import json

import numpy as np
import pytest

from conftest import binary, package, plan_precision, run, save, seeded_rng, xrun
from xcorr_np import counts, crop, normalized, shape_refusal, supports_window

OFFSETS = [0.0, 1e3, 3e4]
GAINS = [1e-3, 1.0, 1e3]
BOUND = 1e-4  # the contract's absolute error bound for normalized outputs


def image_and_template(offset, gain, template_gain, seed):
    """A 96 x 80 image gain·(offset + uniform(-1, 1)) in float32 and a 17 x 13 template cut from it at
    (41, 29), scaled by template_gain and offset by 7·offset (another camera's gain and dark level)."""
    rng = seeded_rng(("zncc-offsets", offset, gain, template_gain, seed))
    image = (gain * (offset + rng.uniform(-1, 1, (96, 80)))).astype(np.float32)
    template = (template_gain * (image[41:58, 29:42].astype(np.float64) + 7 * offset * gain)).astype(np.float32)
    return image, template


def found(out):
    """(value, (row, column)) of the largest element of a 2-D output."""
    at = np.unravel_index(int(np.argmax(out)), out.shape)
    return float(out[at]), tuple(int(i) for i in at)


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("gain", GAINS)
def test_cpu_reference_finds_the_template_on_offset_data(xcorr, tmp_path, offset, gain):
    """xcorr run --algorithm reference (the C++ float64 reference), valid window: the peak is 1 at
    the place the template was cut, whatever the image's offset and gain and the template's."""
    image, template = image_and_template(offset, gain, 3.0, 0)
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", "--mode", "valid", "--normalize", "zncc",
             save(tmp_path / "i.npy", image), save(tmp_path / "t.npy", template), "--out", out)
    assert r.returncode == 0, r.stderr
    value, at = found(np.load(out)[0])
    assert at == (41, 29) and abs(value - 1) <= BOUND, (value, at)


@pytest.mark.parametrize("offset", OFFSETS)
@pytest.mark.parametrize("gain", GAINS)
def test_python_reference_finds_the_template_on_offset_data(offset, gain):
    """xcorr.correlate2d(..., normalize="zncc", algorithm="reference") (the package's NumPy reference,
    which runs anywhere): the same."""
    xc = package()
    image, template = image_and_template(offset, gain, 0.25, 1)
    out = xc.correlate2d(image, template, mode="valid", normalize="zncc", algorithm="reference")
    value, at = found(np.asarray(out))
    assert at == (41, 29) and abs(value - 1) <= BOUND, (value, at)


def exact_affine(x, gain, offset):
    """gain·x + offset in float32, asserted exact (x small integers, gain a power of two): the same
    data as x, so any implementation's zncc must give the same output for both."""
    y = (gain * x.astype(np.float64) + offset).astype(np.float32)
    assert np.array_equal(y.astype(np.float64), gain * x.astype(np.float64) + offset)
    return y


# (gain, offset) pairs exactly representable over integers in [-60, 60]: gains 2^-8..2^10 (about
# 4e-3..1e3), offsets up to 3e4.
AFFINE = [(2.0 ** -8, 30000.0), (2.0 ** -3, 1000.0), (1.0, 30000.0), (2.0 ** 10, -4096.0), (2.0 ** 4, 1e3)]
FORMS_SHAPES = [("one-to-one", (23, 19, 7, 9)), ("one-to-many", (17, 31, 5, 4)), ("n-to-m", (9, 12, 11, 6)),
                ("n-to-mn", (30, 7, 13, 3))]


def integer_stacks(form, shape, rng):
    hL, wL, hR, wR = shape
    nL, nR = counts(form, rng)
    return (rng.integers(-60, 61, (nL, hL, wL)).astype(np.float32),
            rng.integers(-60, 61, (nR, hR, wR)).astype(np.float32))


def windows_of(shape):
    """(xcorr run options, rectangle): full, valid where it exists, a max-shift window and a general
    one reaching past the full range."""
    hL, wL, hR, wR = shape
    out = [([], (-(hR - 1), hL - 1, -(wR - 1), wL - 1)), (["--max-shift", "3,2"], (-3, 3, -2, 2)),
           (["--shifts", f"{-hR}:{hL // 2},1:{wL + 2}"], (-hR, hL // 2, 1, wL + 2))]
    if hL >= hR and wL >= wR:
        out.append((["--mode", "valid"], (0, hL - hR, 0, wL - wR)))
    return out


@pytest.mark.parametrize("form,shape", FORMS_SHAPES, ids=[f for f, _ in FORMS_SHAPES])
def test_cpu_references_are_invariant_to_gain_and_offset(xcorr, tmp_path, form, shape):
    """Both references, every window: the output for (a·L + b, c·R + d) equals the one for (L, R)
    (the C++ reference within 1e-9, the package's within 1e-6), and it is not all zeros (the
    defect's answer)."""
    xc = package()
    rng = seeded_rng(("affine", form, shape))
    left, right = integer_stacks(form, shape, rng)
    for k, (args, rect) in enumerate(windows_of(shape)):
        (a, b), (c, d) = AFFINE[k % len(AFFINE)], AFFINE[(k + 2) % len(AFFINE)]
        moved = exact_affine(left, a, b), exact_affine(right, c, d)
        outs = []
        for L, R in [(left, right), moved]:
            o = tmp_path / "o.npy"
            r = xrun(xcorr, "--algorithm", "reference", "--form", form, "--normalize", "zncc", *args,
                     save(tmp_path / "l.npy", L), save(tmp_path / "r.npy", R), "--out", o)
            assert r.returncode == 0, r.stderr
            dy0, dy1, dx0, dx1 = rect
            py = np.asarray(xc.correlate2d(L, R, form=form, normalize="zncc", shifts=((dy0, dy1), (dx0, dx1)),
                                           algorithm="reference"))
            outs.append((np.load(o), py.reshape(np.load(o).shape)))
        (cpp0, py0), (cpp1, py1) = outs
        assert np.abs(cpp0).max() > 0.05, (args, "all zeros")
        assert np.abs(cpp1 - cpp0).max() <= 1e-9, (args, (a, b), (c, d))
        # the package's reference takes its sums from summed-area tables (cumsum): a few 1e-8 off
        assert np.abs(py1 - py0).max() <= 1e-6, (args, (a, b), (c, d))
        assert np.abs(py0 - cpp0).max() <= 1e-6, args


def test_python_reference_finds_a_lag_on_a_trace_with_a_dc_level():
    """correlate1d with zncc, valid: a 300-sample event cut from a 20000-sample trace of 5000 + noise
    (a seismic trace's DC level), searched with another DC level and gain, is found at its lag."""
    xc = package()
    rng = seeded_rng("dc-trace")
    trace = (5000 + rng.standard_normal(20000)).astype(np.float32)
    event = (0.01 * (trace[12345:12645].astype(np.float64) - 900)).astype(np.float32)
    out = np.asarray(xc.correlate1d(trace, event, mode="valid", normalize="zncc", algorithm="reference"))
    assert int(np.argmax(out)) == 12345 and abs(float(out.max()) - 1) <= BOUND


@pytest.mark.parametrize("offset", [0.0, 1e3])
@pytest.mark.parametrize("step,constant", [(2.0 ** -14, True), (2.0 ** -5, False)])
def test_constant_is_relative_to_the_spread_not_the_magnitude(offset, step, constant):
    """The contract's rule, through the package's reference: a 2 x 40 left whose row 0 is noise of
    amplitude 100 and row 1 a ramp of `step` per column (both exact in float32 at the offset); the
    shift that overlaps only row 1 gives 0 where the ramp's variance is at most 1e-6 of the whole
    left's (step 2^-14: 3e-10 of it) and the coefficient where it is above (2^-5: 8e-5), at offsets
    0 and 1e3 alike. Under the old rule (1e-6·n·ΣX²) the ramp at offset 1e3 was constant either way."""
    xc = package()
    rng = seeded_rng("border")
    noise = np.round(rng.uniform(-100, 100, 40) * 16) / 16
    left = (np.stack([noise, step * (np.arange(40) - 20)]) + offset).astype(np.float32)
    assert np.array_equal(left.astype(np.float64), np.stack([noise, step * (np.arange(40) - 20)]) + offset)
    ratio = left[1].astype(np.float64).var() / left.astype(np.float64).var()
    assert (ratio <= 1e-6) == constant
    right = rng.uniform(-1, 1, (1, 40)).astype(np.float32)
    out = np.asarray(xc.correlate2d(left, right, normalize="zncc", shifts=((1, 1), (0, 0)), algorithm="reference"))
    if constant:
        assert out.item() == 0
    else:
        ramp, r = left[1].astype(np.float64), right[0].astype(np.float64)
        assert abs(out.item() - np.corrcoef(ramp, r)[0, 1]) <= 1e-6


# --- GPU: every algorithm ------------------------------------------------------------------------------


def gpu_variants():
    r = run([binary("xcorr"), "list", "--json"])
    return json.loads(r.stdout) if r.returncode == 0 else []


def variant_ids(v):
    return v["name"]


def bound_of(v):
    return max(BOUND, v["tolerance"])


@pytest.mark.parametrize("v", [v for v in gpu_variants() if not v.get("signals_only")], ids=variant_ids)
def test_gpu_every_algorithm_finds_the_template_on_offset_data(gpu, v):
    """Every 2-D algorithm, one-to-one, valid window where it computes one (else full, the valid
    part read): the template is found where it was cut, with value 1 within the bound, at offsets
    0, 1e3 and 3e4 and gains 1e-3..1e3; the output, poisoned first, is finite."""
    from conftest import run_poisoned
    pkg = package(v["name"])
    for offset in OFFSETS:
        for gain in GAINS:
            image, template = image_and_template(offset, gain, 1 / gain, 2)
            valid = "valid" in v["windows"]
            rect = (0, 96 - 17, 0, 80 - 13) if valid else (-16, 95, -12, 79)
            if shape_refusal(v, (96, 80, 17, 13), rect):
                pytest.skip(f"{v['name']} refuses this shape")
            form = "one-to-one" if "one-to-one" in v["forms"] else v["forms"][0]
            stacked = form != "one-to-one"  # a stack of one on each side, the form named
            plan = pkg.Plan((1, 96, 80) if stacked else (96, 80), (1, 17, 13) if stacked else (17, 13),
                            form=form, normalize="zncc", algorithm=v["name"], precision=plan_precision(v),
                            shifts=((rect[0], rect[1]), (rect[2], rect[3])))
            out = run_poisoned(plan, image[None] if stacked else image, template[None] if stacked else template)
            out = out.reshape(rect[1] - rect[0] + 1, rect[3] - rect[2] + 1)
            assert np.isfinite(out).all()
            # the valid part (a full output's overlaps of two elements are ±1 whatever the data)
            out = out[-rect[0]:-rect[0] + 96 - 17 + 1, -rect[2]:-rect[2] + 80 - 13 + 1]
            rect = (0, 0, 0, 0)
            value, (y, x) = found(out)
            assert (y + rect[0], x + rect[2]) == (41, 29), (offset, gain, value, (y, x))
            assert abs(value - 1) <= bound_of(v), (offset, gain, value)


@pytest.mark.parametrize("v", gpu_variants(), ids=variant_ids)
def test_gpu_every_algorithm_is_invariant_to_gain_and_offset(gpu, v):
    """Every algorithm, every form and window it computes: the output for exactly scaled and offset
    inputs (the same data) is within the bound of the float64 reference of the plain ones, and that
    reference is not all zeros. Signals-only algorithms take 1-row matrices."""
    from conftest import run_poisoned
    pkg = package(v["name"])
    cases = 0
    for form, shape in FORMS_SHAPES:
        if form not in v["forms"]:
            continue
        if v.get("signals_only"):
            shape = (1, shape[0] * shape[1], 1, shape[2] * shape[3] // 2 + 1)
        rng = seeded_rng(("gpu-affine", v["name"], form))
        left, right = integer_stacks(form, shape, rng)
        hR, wR = shape[2], shape[3]
        expected_full = normalized("zncc", form, left, right)
        for k, (_, rect) in enumerate(windows_of(shape)):
            if not supports_window(v["windows"], shape, rect) or shape_refusal(v, shape, rect):
                continue
            (a, b), (c, d) = AFFINE[k % len(AFFINE)], AFFINE[(k + 1) % len(AFFINE)]
            L, R = exact_affine(left, a, b), exact_affine(right, c, d)
            expected = crop(expected_full, hR, wR, *rect)
            assert np.abs(expected).max() > 0.05
            plan = pkg.Plan(L.shape, R.shape, form=form, normalize="zncc", algorithm=v["name"],
                            precision=plan_precision(v), shifts=((rect[0], rect[1]), (rect[2], rect[3])))
            got = run_poisoned(plan, L, R).reshape(expected.shape)
            err = np.abs(got - expected).max()
            assert err <= bound_of(v), (form, shape, rect, (a, b), (c, d), err)
            cases += 1
    assert cases, f"{v['name']} computed no case"


@pytest.mark.parametrize("v", gpu_variants(), ids=variant_ids)
def test_gpu_every_algorithm_finds_a_lag_on_a_trace_with_a_dc_level(gpu, v):
    """Every algorithm that computes signals' valid window (else full, its valid part read), one-to-many
    (else n-to-m of one trace): three events cut from a 6000-sample trace of 5000 + noise, with other
    DC levels and gains, found at their lags."""
    pkg = package(v["name"])
    form = "one-to-many" if "one-to-many" in v["forms"] else ("n-to-m" if "n-to-m" in v["forms"] else None)
    if form is None:
        pytest.skip(f"{v['name']} computes neither one-to-many nor n-to-m")
    rng = seeded_rng("gpu-dc-trace")
    trace = (5000 + rng.standard_normal(6000)).astype(np.float32)
    lags = [4321, 17, 5700 - 200]
    events = np.stack([(g * (trace[t:t + 200].astype(np.float64) - d)).astype(np.float32)
                       for t, g, d in zip(lags, (0.01, 3.0, 250.0), (900, -4e3, 4990))])
    mode = "valid" if "valid" in v["windows"] else "full"
    try:
        out = np.asarray(pkg.correlate1d(trace[None] if form == "n-to-m" else trace, events, mode=mode,
                                         normalize="zncc", algorithm=v["name"], precision=plan_precision(v),
                                         form=form))
    except ValueError as e:  # the algorithm's own refusal (e.g. shared memory for this length)
        pytest.skip(f"{v['name']} refuses the case: {e}")
    out = out.reshape(3, -1)
    if mode == "full":
        out = out[:, 199:199 + 5801]
    for i, t in enumerate(lags):
        assert int(np.argmax(out[i])) == t, (i, t)
        assert abs(float(out[i].max()) - 1) <= bound_of(v)


@pytest.mark.parametrize("form,shape", FORMS_SHAPES, ids=[f for f, _ in FORMS_SHAPES])
def test_a_nan_spoils_only_the_overlaps_that_hold_it(xcorr, tmp_path, form, shape):
    """A dead pixel (NaN) in the first left and another in the last right: both references give NaN
    exactly at the shifts whose overlap holds one (unless the other part is constant, which makes
    the coefficient 0: a corner overlap of one element), and everywhere else the coefficient of the
    inputs without the NaN (the overlap does not see it; only the constant rule's scale, the
    matrix's variance over its numbers, moved). Once the package's reference gave 0 at
    every shift (its matrix mean was NaN) and a NaN elsewhere in a matrix switched the C++
    reference's constant rule off."""
    xc = package()
    from xcorr import _reference
    rng = seeded_rng(("nan-overlaps", form, shape))
    left, right = integer_stacks(form, shape, rng)
    hL, wL, hR, wR = shape
    spoiled_left, spoiled_right = left.copy(), right.copy()
    spoiled_left[0, hL // 3, wL // 2] = np.nan
    spoiled_right[-1, hR - 1, 0] = np.nan
    li, ri = _reference.pair_indices(form, left.shape[0], right.shape[0])
    shifts = [(dy, dx) for dy in range(-(hR - 1), hL) for dx in range(-(wR - 1), wL)]
    want_nan = np.zeros((len(li), len(shifts)), bool)
    for k, (l, r) in enumerate(zip(li, ri)):  # by the definition: the overlap's two parts, element by element
        for j, (dy, dx) in enumerate(shifts):
            y0, y1, x0, x1 = max(0, -dy), min(hR, hL - dy), max(0, -dx), min(wR, wL - dx)
            a = spoiled_left[l, y0 + dy:y1 + dy, x0 + dx:x1 + dx]
            b = spoiled_right[r, y0:y1, x0:x1]
            constant = [not np.isnan(p).any() and (p == p.flat[0]).all() for p in (a, b)]
            want_nan[k, j] = (np.isnan(a).any() or np.isnan(b).any()) and not any(constant)
    want_nan = want_nan.reshape(len(li), hL + hR - 1, wL + wR - 1)
    assert want_nan.any() and not want_nan.all()
    outs = {}
    for name, (L, R) in (("clean", (left, right)), ("nan", (spoiled_left, spoiled_right))):
        o = tmp_path / f"{name}.npy"
        r = xrun(xcorr, "--algorithm", "reference", "--form", form, "--normalize", "zncc",
                 save(tmp_path / "l.npy", L), save(tmp_path / "r.npy", R), "--out", o)
        assert r.returncode == 0, r.stderr
        cpp = np.load(o).reshape(want_nan.shape)
        py = np.asarray(xc.correlate2d(L, R, form=form, normalize="zncc", algorithm="reference")).reshape(cpp.shape)
        outs[name] = cpp, py
    (cpp0, py0), (cpp1, py1) = outs["clean"], outs["nan"]
    for got, tol in ((cpp1, 1e-9), (py1, 1e-6)):
        assert np.array_equal(np.isnan(got), want_nan)
        assert np.abs(got[~want_nan] - cpp0[~want_nan]).max() <= tol
    assert np.abs(cpp0[~want_nan]).max() > 0.05  # not the defect's zeros
    assert np.abs(py1[~want_nan] - cpp1[~want_nan]).max() <= 1e-6
