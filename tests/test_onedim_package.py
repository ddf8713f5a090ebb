"""xcorr.correlate1d and xcorr.Plan(..., dims=1): 1-D signals (host side).

A signal is a 1 x n matrix (CONVENTIONS.md, "One-dimensional signals") and each output pair equals
scipy.signal.correlate(L, R, mode), left = in1, nothing flipped.
CPU: algorithm="reference" against scipy.signal.correlate for every mode, odd and even unequal
lengths in both size orders, both signs; max_lag and lags against the cropped full output; forms
inferred as correlate2d's; the C++ reference on the same spec and `xcorr run --dims 1` agree;
zncc and zero-lag against tests/xcorr_np.py's oracle with h = 1; every bad call a ValueError; the
GPU path without a GPU NoGPUError.
GPU (skipped here with the reason): auto and every algorithm through PyTorch and CuPy against the
reference, for each form and each window it computes, normalized outputs, zero-copy and the pointer
path, strided inputs, NumPy round trip."""
import os

import numpy as np
import pytest
from conftest import binary, save, seeded_rng, xrun
from xcorr_np import FORMS, counts, normalized, pairs

scipy_signal = pytest.importorskip("scipy.signal")

try:
    import xcorr
    from xcorr import _xcorr
except ImportError as e:
    if os.environ.get("XCORR_NO_PYTHON_PACKAGE"):
        pytest.skip(f"the package xcorr is not installed (XCORR_NO_PYTHON_PACKAGE): {e}", allow_module_level=True)
    raise ImportError(f"the package xcorr does not import ({e}): scripts/setup-env installs it") from e

correlate = scipy_signal.correlate

# (len(left), len(right)): odd unequal both ways, even rights both ways ('same' differs from
# correlate2d's there), equal, length 1 on either side.
LENGTHS = [(13, 5), (5, 13), (12, 6), (6, 12), (9, 4), (9, 9), (1, 7), (7, 1)]


def rand(rng, *shape):
    return rng.standard_normal(shape)  # both signs


def rel_err(got, ref):
    return float(np.linalg.norm(np.asarray(got, dtype=np.float64) - ref) / np.linalg.norm(ref))


def crop(full, m, d0, d1):
    """Lags d0..d1 of full 1-D outputs (..., n + m - 1) of a right of length m, 0 beyond them."""
    d = np.arange(d0, d1 + 1)
    idx = d + m - 1
    ok = (idx >= 0) & (idx < full.shape[-1])
    return np.where(ok, full[..., np.clip(idx, 0, full.shape[-1] - 1)], 0.0)


def per_pair(form, left, right, mode="full"):
    return np.stack([correlate(left[i], right[j], mode) for i, j in pairs(form, len(left), len(right))])


# --- CPU: the reference against scipy.signal.correlate -------------------------------------------

@pytest.mark.parametrize("mode", ["full", "valid", "same"])
@pytest.mark.parametrize("n,m", LENGTHS)
def test_reference_equals_scipy_signal_correlate(n, m, mode):
    rng = seeded_rng(("1d", n, m, mode))
    a, b = rand(rng, n), rand(rng, m)
    got = xcorr.correlate1d(a, b, mode, algorithm="reference")
    want = correlate(a, b, mode)
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # lists, and the definition: lag d = sum over t of a[t + d] * b[t]
    full = xcorr.correlate1d(list(a), list(b), algorithm="reference")
    for k, d in enumerate(range(-(m - 1), n)):
        assert full[k] == pytest.approx(sum(a[t + d] * b[t] for t in range(m) if 0 <= t + d < n), abs=1e-12)


def test_same_is_scipy_signal_correlate_s_not_correlate2d_s_for_an_even_right():
    a, b = np.arange(1.0, 10.0), np.array([1.0, 0.0, 0.0, 0.0])  # C(d) = a[d]
    got = xcorr.correlate1d(a, b, "same", algorithm="reference")
    np.testing.assert_array_equal(got, [0, 0, 1, 2, 3, 4, 5, 6, 7])  # lags -2..6
    np.testing.assert_array_equal(got, correlate(a, b, "same"))
    assert not np.array_equal(got, scipy_signal.correlate2d(a[None], b[None], "same")[0])  # lags -1..7
    assert xcorr.Plan((9,), (4,), "same", dims=1, algorithm="reference").lags == (-2, 6)
    assert xcorr.Plan((9,), (5,), "same", dims=1, algorithm="reference").lags == (-2, 6)  # odd: the 2-D same


@pytest.mark.parametrize("n,m", [(13, 5), (5, 13), (12, 6)])
@pytest.mark.parametrize("window,lags", [
    (dict(max_lag=3), (-3, 3)), (dict(max_lag=0), (0, 0)), (dict(max_lag=30), (-30, 30)),
    (dict(lags=(-9, -2)), (-9, -2)), (dict(lags=(2, 40)), (2, 40)), (dict(lags=(50, 60)), (50, 60)),
    (dict(lags=(-60, -50)), (-60, -50))])
def test_reference_lag_windows_crop_the_full_output(n, m, window, lags):
    rng = seeded_rng(("1d lags", n, m, repr(window)))
    a, b = rand(rng, n), rand(rng, m)
    got = xcorr.correlate1d(a, b, algorithm="reference", **window)
    want = crop(correlate(a, b), m, *lags)
    assert got.shape == (lags[1] - lags[0] + 1,)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    if "max_lag" in window and window["max_lag"] < min(n, m):
        assert got[window["max_lag"]] == pytest.approx(a[:min(n, m)] @ b[:min(n, m)])  # lag 0 in the middle


FORM_CASES = [  # left shape, right shape, form given, form inferred, result's leading dims
    ((11,), (5,), None, "one-to-one", ()),
    ((11,), (4, 5), None, "one-to-many", (4,)),
    ((2, 11), (5,), None, "n-to-m", (2,)),
    ((1, 11), (4, 5), None, "one-to-many", (1, 4)),
    ((3, 11), (1, 5), None, "n-to-m", (3, 1)),
    ((2, 11), (3, 5), "n-to-m", "n-to-m", (2, 3)),
    ((2, 5), (6, 11), "n-to-mn", "n-to-mn", (6,)),
    ((1, 11), (1, 5), "one-to-one", "one-to-one", (1, 1)),
]


@pytest.mark.parametrize("ls,rs,form,inferred,lead", FORM_CASES)
def test_forms_are_inferred_as_correlate2d_s_and_pair_as_conventions_md_says(ls, rs, form, inferred, lead):
    rng = seeded_rng(("1d forms", ls, rs, form))
    a, b = rand(rng, *ls), rand(rng, *rs)
    plan = xcorr.Plan(a.shape, b.shape, form=form, dims=1, algorithm="reference")
    assert plan.form == inferred and plan.left_shape == ls and plan.right_shape == rs
    got = plan(a, b)
    assert got.shape == plan.out_shape == lead + (ls[-1] + rs[-1] - 1,)
    np.testing.assert_allclose(xcorr.correlate1d(a, b, form=form, algorithm="reference"), got, rtol=0, atol=0)
    flat = got.reshape(-1, got.shape[-1])
    A, B = a.reshape(-1, ls[-1]), b.reshape(-1, rs[-1])
    want = per_pair(inferred, A, B)
    np.testing.assert_allclose(flat, want, rtol=1e-12, atol=1e-12)


CPP_WINDOWS = [dict(), dict(mode="valid"), dict(mode="same"), dict(max_lag=4), dict(lags=(-20, 3))]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("window", CPP_WINDOWS, ids=repr)
@pytest.mark.parametrize("n,m", [(13, 6), (6, 13)])
def test_reference_equals_the_cpp_reference_and_xcorr_run_dims_1(tmp_path, form, window, n, m):
    """The NumPy reference, lib/reference_cpu.cpp on the plan's spec and `xcorr run --dims 1
    --algorithm reference` (which resolves the window itself, 'same' included) agree."""
    rng = seeded_rng(("1d cpp", form, repr(window), n, m))
    nL, nR = counts(form, rng)
    a, b = rand(rng, nL, n).astype(np.float32), rand(rng, nR, m).astype(np.float32)
    got = xcorr.correlate1d(a, b, form=form, algorithm="reference", **window)
    plan = xcorr.Plan(a.shape, b.shape, form=form, dims=1, algorithm="reference", **window)
    cpp = np.empty(got.shape, dtype=np.float64)
    _xcorr.reference_cpu(plan._spec, a, b, cpp)
    np.testing.assert_allclose(got, cpp, rtol=1e-12, atol=1e-12)
    args = (["--mode", window["mode"]] if "mode" in window else ["--max-lag", str(window["max_lag"])]
            if "max_lag" in window else ["--lags", "%d:%d" % window["lags"]] if "lags" in window else [])
    out = tmp_path / "o.npy"
    r = xrun(binary("xcorr"), "--dims", "1", "--algorithm", "reference", "--form", form, save(tmp_path / "l.npy", a),
             save(tmp_path / "r.npy", b), "--out", out, *args)
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(out), got.reshape(-1, got.shape[-1]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("normalize", ["zncc", "zero-lag"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("window", [dict(), dict(mode="valid"), dict(max_lag=5), dict(lags=(-14, 2))], ids=repr)
def test_reference_normalized_equals_the_oracle_with_h_1(normalize, form, window):
    rng = seeded_rng(("1d norm", normalize, form, repr(window)))
    n, m = 19, 8
    nL, nR = counts(form, rng)
    if normalize == "zncc":
        a, b = rand(rng, nL, n), rand(rng, nR, m)
    else:
        a, b = rng.random((nL, n)), rng.random((nR, m))
    got = xcorr.correlate1d(a, b, form=form, normalize=normalize, algorithm="reference", **window)
    lags = (window.get("lags") or ((-window["max_lag"], window["max_lag"]) if "max_lag" in window else
                                   (0, n - m) if window else None))
    want = normalized(normalize, form, a[:, None, :], b[:, None, :], None if lags is None else (0, 0) + lags)[:, 0, :]
    assert got.reshape(want.shape).shape == want.shape
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=0, atol=1e-10)
    assert np.abs(want).max() > 0.3
    if normalize == "zncc":
        assert np.abs(got).max() <= 1.0


def test_zncc_of_a_signal_with_a_shifted_copy_of_itself_is_1_at_that_lag():
    rng = seeded_rng("1d zncc peak")
    x = rand(rng, 200)
    template = 3.0 * x[57:57 + 31] + 10.0  # scaled and offset: zncc ignores both
    got = xcorr.correlate1d(x, template, "valid", normalize="zncc", algorithm="reference")
    assert got.shape == (170,) and int(np.argmax(got)) == 57 and got[57] == pytest.approx(1.0, abs=1e-12)
    assert np.sort(got)[-2] < 0.9


def test_plan_dims_1_attributes_reuse_out_and_explain():
    rng = seeded_rng("1d plan")
    a, b = rand(rng, 3, 40), rand(rng, 7)
    plan = xcorr.Plan(a.shape, b.shape, dims=1, max_lag=5, algorithm="reference")
    assert (plan.dims, plan.form, plan.out_shape, plan.lags, plan.shifts) == (1, "n-to-m", (3, 11), (-5, 5),
                                                                              ((0, 0), (-5, 5)))
    assert "3x[1x40] * 1x[1x7]" in repr(plan)
    want = np.stack([crop(correlate(x, b), 7, -5, 5) for x in a])
    np.testing.assert_allclose(plan(a, b), want, rtol=1e-12, atol=1e-12)
    out = np.full((3, 11), np.nan)
    assert plan(a, b, out=out) is out
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    assert xcorr.correlate1d(a, b, max_lag=5, algorithm="reference", out=out) is out
    with pytest.raises(ValueError, match="built for"):
        plan(rand(rng, 3, 41), b)
    e = xcorr.explain((1000,), (4, 65), dims=1, max_lag=20, gpu="NVIDIA H200")
    names = {x["name"] for x in xcorr.algorithms()}
    assert e["algorithm"] in names and e["reason"] and e["problem"] == "one-to-many 1x[1x1000] * 4x[1x65] shifts 0:0,-20:20"


def test_correlate1d_and_correlate2d_never_share_a_cached_plan():
    """A stack of signals (3, 9) has the shape of a matrix: the cache keys must tell them apart."""
    rng = seeded_rng("1d cache")
    a, b = rand(rng, 3, 9), rand(rng, 2, 4)
    for _ in range(2):  # the second round from the cache
        m = xcorr.correlate2d(a, b, algorithm="reference")
        s = xcorr.correlate1d(a, b, form="n-to-m", algorithm="reference")
        assert m.shape == (4, 12) and s.shape == (3, 2, 12)
        np.testing.assert_allclose(m, scipy_signal.correlate2d(a, b), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(s[2, 1], correlate(a[2], b[1]), rtol=1e-12, atol=1e-12)


A1, B1 = np.zeros(9), np.zeros(4)

ERRORS = [
    (dict(left=np.zeros((2, 3, 9))), "1-D signal .n,. or a 2-D stack.*correlate2d"),
    (dict(right=np.zeros(())), "1-D signal"),
    (dict(left=np.zeros(0)), "empty dimension"),
    (dict(left=np.zeros((3, 0))), "empty dimension"),
    (dict(left=np.zeros((2, 9)), right=np.zeros((2, 4))), "form='n-to-m'.*form='n-to-mn'"),
    (dict(left=np.zeros((2, 9)), right=np.zeros((3, 4)), form="n-to-mn"), "multiple"),
    (dict(left=np.zeros((2, 9)), form="one-to-one"), "one-to-one"),
    (dict(form="two-to-one"), "form must be"),
    (dict(mode="fulll"), "mode must be"),
    (dict(mode=None), "mode must be"),
    (dict(max_lag=-1), "max_lag must be an integer from 0"),
    (dict(max_lag=1 << 30), "max_lag must be an integer from 0"),
    (dict(max_lag=1.5), "max_lag takes integers"),
    (dict(max_lag=True), "max_lag takes integers"),
    (dict(max_lag=(1, 2)), "max_lag takes integers"),
    (dict(max_lag=2, mode="valid"), "one window"),
    (dict(max_lag=2, lags=(0, 1)), "one window"),
    (dict(lags=(3, 1)), "empty window"),
    (dict(lags=3), "lags takes a pair"),
    (dict(lags=(1, 2, 3)), "lags takes a pair"),
    (dict(lags=(0, 2.0)), "lags takes integers"),
    (dict(lags=(-(1 << 30), 0)), "2\\^30"),
    (dict(max_shift=2), "unexpected keyword"),       # a matrix window: not an argument of correlate1d
    (dict(normalize="ncc"), "normalize must be"),
    (dict(algorithm="no-such-algorithm"), "unknown algorithm"),
    (dict(precision="fp16"), "precision"),
    (dict(params={"x": 1}), "params"),
    (dict(out=np.zeros(13)), "out for the reference must be .* shape \\(12,\\)"),
    (dict(out=np.zeros((1, 12))), "shape \\(12,\\)"),
    (dict(left=np.zeros(9, dtype=np.int32)), "float32 or float64"),
    (dict(left=np.zeros(9, dtype=np.complex64)), "float32 or float64"),
]


@pytest.mark.parametrize("kw,match", ERRORS, ids=[f"{i}-{e[1][:20]}" for i, e in enumerate(ERRORS)])
def test_bad_calls_raise_value_error(kw, match):
    kw = dict(kw)
    left, right = kw.pop("left", A1), kw.pop("right", B1)
    kw.setdefault("algorithm", "reference")
    exc = TypeError if "unexpected keyword" in match else ValueError
    with pytest.raises(exc, match=match):
        xcorr.correlate1d(left, right, **kw)


@pytest.mark.parametrize("kw,match", [
    (dict(dims=3), "dims must be 1"), (dict(dims=True), "dims must be 1"), (dict(dims="1"), "dims must be 1"),
    (dict(dims=1, max_shift=2), "max_lag= and lags="), (dict(dims=1, shifts=((0, 0), (0, 1))), "max_lag= and lags="),
    (dict(max_lag=2), "dims=1"), (dict(lags=(0, 1)), "dims=1"),
])
def test_plan_dims_errors(kw, match):
    shapes = ((9,), (4,)) if kw.get("dims") == 1 else ((9, 9), (4, 4))
    with pytest.raises(ValueError, match=match):
        xcorr.Plan(*shapes, algorithm="reference", **kw)
    with pytest.raises(ValueError, match="1-D signal"):
        xcorr.Plan((9, 9, 9), (4,), dims=1, algorithm="reference")


def has_gpu():
    try:
        xcorr.gpu_info()
        return True
    except xcorr.NoGPUError:
        return False


def test_without_a_gpu_correlate1d_raises_no_gpu_error():
    if has_gpu():
        pytest.skip("a GPU is present (this test checks the machine without one)")
    for call in (lambda: xcorr.correlate1d(np.ones(9, np.float32), np.ones(4, np.float32)),
                 lambda: xcorr.Plan((9,), (4,), dims=1, algorithm="overlap-wise")):
        with pytest.raises(xcorr.NoGPUError, match='algorithm="reference" computes the same on the CPU'):
            call()


# --- GPU ----------------------------------------------------------------------------------------

from array_libs import NoDLPack, cupy, gpu, host, lib_array, torch  # noqa: E402,F401 (fixtures)


GPU_CASES = {  # form -> [(left shape, right shape)]: odd unequal lengths, and a left shorter than an even right
    "one-to-one": [((1001,), (45,)), ((44,), (257,))],
    "one-to-many": [((1001,), (3, 45)), ((44,), (3, 256))],
    "n-to-mn": [((2, 1001), (4, 45)), ((2, 44), (6, 257))],
    "n-to-m": [((2, 1001), (3, 45)), ((3, 44), (2, 256))],
}
GPU_WINDOWS = {"full": {}, "valid": dict(mode="valid"), "same": dict(mode="same"), "max-shift": dict(max_lag=7),
               "shifts": dict(lags=(-30, 12))}
ALGORITHMS = [a["name"] for a in xcorr.algorithms()]


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("name", ["auto"] + ALGORITHMS)
def test_every_algorithm_through_torch_and_cupy_matches_the_reference(name, lib, request):
    """Each form the algorithm takes, each window it declares (auto: all), both size orders:
    within its tolerance of the float64 reference (auto: 1e-5, fp32). A size or window an
    algorithm refuses (a 1-D 'same' of an even right is a lag window) is skipped with the reason
    when nothing ran."""
    module = request.getfixturevalue(lib)
    algo = None if name == "auto" else next(a for a in xcorr.algorithms() if a["name"] == name)
    forms = list(GPU_CASES) if algo is None else algo["forms"]
    windows = list(GPU_WINDOWS) if algo is None else algo["windows"]
    precision = "tf32" if algo is not None and algo["precision"] == "tf32" else "fp32"
    bound = 1e-5 if algo is None else algo["tolerance"]
    rng = seeded_rng(("1d gpu", name, lib))
    ran, refused = 0, []
    for form in forms:
        for ls, rs in GPU_CASES[form]:
            a, b = rand(rng, *ls).astype(np.float32), rand(rng, *rs).astype(np.float32)
            for wname in windows:
                window = GPU_WINDOWS[wname]
                try:
                    plan = xcorr.Plan(ls, rs, form=form, dims=1, algorithm=name, precision=precision, **window)
                except ValueError as e:
                    refused.append(f"{form} {ls}x{rs} {wname}: {e}")
                    continue
                out = lib_array(module, np.full(plan.out_shape, np.nan, np.float32))
                got = plan(lib_array(module, a), lib_array(module, b), out=out)
                assert got is out
                ref = xcorr.correlate1d(a, b, form=form, algorithm="reference", **window)
                assert tuple(got.shape) == ref.shape
                g = host(got)
                assert np.isfinite(g).all() and rel_err(g, ref) <= bound, (form, ls, rs, wname, plan.algorithm)
                if name == "auto":
                    got2 = xcorr.correlate1d(lib_array(module, a), lib_array(module, b), form=form, **window)
                    assert type(got2).__module__.split(".")[0] == lib and rel_err(host(got2), ref) <= bound
                ran += 1
    if not ran:
        pytest.skip(f"{name} refused every 1-D case: {refused}")


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("normalize", ["zncc", "zero-lag"])
def test_normalized_auto_through_torch_and_cupy(lib, normalize, request):
    module = request.getfixturevalue(lib)
    rng = seeded_rng(("1d gpu norm", lib, normalize))
    for form in FORMS:
        ls, rs = GPU_CASES[form][0]
        a = (1000 + rng.uniform(-8, 8, ls)).astype(np.float32)  # the cancellation case
        b = (1000 + rng.uniform(-8, 8, rs)).astype(np.float32)
        for window in GPU_WINDOWS.values():
            got = xcorr.correlate1d(lib_array(module, a), lib_array(module, b), form=form, normalize=normalize,
                                    **window)
            ref = xcorr.correlate1d(a, b, form=form, normalize=normalize, algorithm="reference", **window)
            assert np.abs(host(got) - ref).max() <= 1e-4, (form, window)


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_signals_take_the_pointer_path_without_copies(lib, request):
    """1-D arrays are already what the kernels read (1 x n rows): no reshape copy, no DLPack per
    call, out= written in place; a strided view is copied by the general path."""
    module = request.getfixturevalue(lib)
    rng = seeded_rng(("1d pointer", lib))
    an, bn = rand(rng, 2, 1001).astype(np.float32), rand(rng, 3, 45).astype(np.float32)
    a, b = lib_array(module, an), lib_array(module, bn)
    ref = xcorr.correlate1d(an, bn, form="n-to-m", max_lag=9, algorithm="reference")
    plan = xcorr.Plan(a.shape, b.shape, form="n-to-m", max_lag=9, dims=1)
    plan._plan = NoDLPack(plan._plan)
    out = lib_array(module, np.full(plan.out_shape, np.nan, np.float32))
    assert plan(a, b, out=out) is out and rel_err(host(out), ref) < 1e-5
    if lib == "torch":
        module.cuda.synchronize()
        before = module.cuda.memory_allocated()
        assert plan(a, b, out=out) is out
        module.cuda.synchronize()
        assert module.cuda.memory_allocated() == before
    with pytest.raises(AssertionError, match="DLPack"):
        plan(lib_array(module, rand(rng, 2, 2002).astype(np.float32))[:, ::2], b)
    xcorr.clear_cache()
    xcorr.correlate1d(a, b, form="n-to-m", max_lag=9)
    for p in xcorr._api._plans.values():
        p._plan = NoDLPack(p._plan)
    assert rel_err(host(xcorr.correlate1d(a, b, form="n-to-m", max_lag=9)), ref) < 1e-5
    xcorr.clear_cache()


def test_strided_numpy_and_gpu_out_checks(torch):
    rng = seeded_rng("1d strided")
    big = rand(rng, 2002)
    a, b = big[::2], big[5:40]  # float64 NumPy, strided: converted and copied
    ref = xcorr.correlate1d(a, b, "valid", algorithm="reference")
    got = xcorr.correlate1d(a, b, "valid")
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and rel_err(got, ref) < 1e-5
    t = torch.as_tensor(big.astype(np.float32), device="cuda")
    assert rel_err(xcorr.correlate1d(t[::2], t[5:40], "valid").cpu().numpy(), ref) < 1e-5
    with pytest.raises(ValueError, match="shape"):
        xcorr.correlate1d(t[::2], t[5:40], "valid", out=torch.empty(1, ref.shape[0], device="cuda"))
    with pytest.raises(ValueError, match="C-contiguous"):
        xcorr.correlate1d(t[::2], t[5:40], "valid", out=torch.empty(2 * ref.shape[0], device="cuda")[::2])
    with pytest.raises(ValueError, match="float32"):
        xcorr.correlate1d(t.double(), t[5:40])
