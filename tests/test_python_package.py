"""The Python package xcorr (python/, installed by scripts/setup-env from the build directory).

CPU (CI): it imports, the float64 reference equals scipy.signal.correlate2d and the harness's C++
reference, forms are inferred as documented, every bad call raises the documented exception, and
without a GPU the GPU path raises NoGPUError; normalize="zncc"/"zero-lag" in the reference equal
the C++ reference (`xcorr run --algorithm reference --normalize`) and tests/xcorr_np.py's oracle.
GPU (skipped here with the reason): every algorithm through PyTorch and CuPy arrays against the
reference, zero-copy, streams, out=, strided input, NumPy round trip, repeated calls replayed as
graphs; normalized outputs of auto and of every algorithm within 1e-4 of the reference."""
import os
import re

import numpy as np
import pytest
from conftest import binary, run, save, seeded_rng, xrun
from xcorr_np import counts, crop, normalized

scipy_signal = pytest.importorskip("scipy.signal")

try:
    import xcorr
    from xcorr import _xcorr
except ImportError as e:
    if os.environ.get("XCORR_NO_PYTHON_PACKAGE"):
        pytest.skip(f"the package xcorr is not installed (XCORR_NO_PYTHON_PACKAGE): {e}", allow_module_level=True)
    raise ImportError(f"the package xcorr does not import ({e}): scripts/setup-env installs it") from e


def rand(rng, *shape):
    return rng.standard_normal(shape)  # both signs


def rel_err(got, ref):
    return float(np.linalg.norm(np.asarray(got, dtype=np.float64) - ref) / np.linalg.norm(ref))


# --- CPU: package, reference, forms ------------------------------------------------------------

def test_imports_without_a_gpu_and_has_its_version():
    # meson.build's project version: scripts/version's (a tag, or 0.1.0.devN+g<rev>)
    assert re.fullmatch(r"\d+(\.\d+)*(\.dev\d+)?(\+g[0-9a-f]+(\.dirty)?)?", xcorr.__version__), xcorr.__version__
    assert issubclass(xcorr.NoGPUError, RuntimeError) and issubclass(xcorr.CudaError, RuntimeError)
    names = [a["name"] for a in xcorr.algorithms()]
    assert names and names == sorted(names)
    for a in xcorr.algorithms():
        assert set(a) >= {"name", "family", "forms", "windows", "precision", "tolerance", "params"}
        assert "full" in a["windows"] and set(a["forms"]) <= set(xcorr._api.FORMS)
        for p in a["params"].values():
            assert p["default"] == p["values"][0]


SHAPES = [((7, 9), (3, 5)), ((3, 5), (7, 9)), ((11, 4), (5, 6)), ((1, 13), (1, 3)), ((6, 8), (6, 8))]


@pytest.mark.parametrize("mode", ["full", "valid", "same"])
@pytest.mark.parametrize("ls,rs", SHAPES)
def test_reference_equals_scipy_correlate2d(ls, rs, mode):
    rng = seeded_rng((ls, rs, mode))
    a, b = rand(rng, *ls), rand(rng, *rs)
    valid_ok = (ls[0] >= rs[0] and ls[1] >= rs[1]) or (ls[0] <= rs[0] and ls[1] <= rs[1])
    if mode == "valid" and not valid_ok:
        with pytest.raises(ValueError, match="no valid window"):
            xcorr.correlate2d(a, b, mode, algorithm="reference")
        return
    got = xcorr.correlate2d(a, b, mode, algorithm="reference")
    want = scipy_signal.correlate2d(a, b, mode)
    assert got.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("window", [dict(max_shift=2), dict(max_shift=(0, 5)), dict(max_shift=30),
                                    dict(shifts=((-9, -4), (3, 40))), dict(shifts=((50, 60), (0, 0)))])
def test_reference_windows_crop_the_full_output(window):
    rng = seeded_rng(repr(window))
    a, b = rand(rng, 9, 12), rand(rng, 5, 7)
    full = scipy_signal.correlate2d(a, b, "full")
    if "max_shift" in window:
        s = window["max_shift"]
        sy, sx = (s, s) if isinstance(s, int) else s
        dy0, dy1, dx0, dx1 = -sy, sy, -sx, sx
    else:
        (dy0, dy1), (dx0, dx1) = window["shifts"]
    got = xcorr.correlate2d(a, b, algorithm="reference", **window)
    np.testing.assert_allclose(got, crop(full, 5, 7, dy0, dy1, dx0, dx1), rtol=1e-12, atol=1e-12)


FORM_CASES = [  # left shape, right shape, form given, form inferred, result's leading dims
    ((5, 6), (3, 4), None, "one-to-one", ()),
    ((5, 6), (4, 3, 4), None, "one-to-many", (4,)),
    ((2, 5, 6), (3, 4), None, "n-to-m", (2,)),
    ((1, 5, 6), (4, 3, 4), None, "one-to-many", (1, 4)),
    ((3, 5, 6), (1, 3, 4), None, "n-to-m", (3, 1)),
    ((2, 5, 6), (3, 3, 4), "n-to-m", "n-to-m", (2, 3)),
    ((2, 5, 6), (6, 3, 4), "n-to-mn", "n-to-mn", (6,)),
    ((1, 5, 6), (1, 3, 4), "one-to-one", "one-to-one", (1, 1)),
]


@pytest.mark.parametrize("ls,rs,form,inferred,lead", FORM_CASES)
def test_forms_are_inferred_and_pair_as_conventions_md_says(ls, rs, form, inferred, lead):
    rng = seeded_rng((ls, rs, form))
    a, b = rand(rng, *ls), rand(rng, *rs)
    plan = xcorr.Plan(a.shape, b.shape, form=form, algorithm="reference")
    assert plan.form == inferred
    got = plan(a, b)
    assert got.shape == lead + (ls[-2] + rs[-2] - 1, ls[-1] + rs[-1] - 1)
    A, B = a.reshape((-1,) + ls[-2:]), b.reshape((-1,) + rs[-2:])
    flat = got.reshape((-1,) + got.shape[-2:])
    nL, nR = len(A), len(B)
    pairs = {"one-to-one": [(0, 0)], "one-to-many": [(0, k) for k in range(nR)],
             "n-to-mn": [(k % nL, k) for k in range(nR)],
             "n-to-m": [(i, j) for i in range(nL) for j in range(nR)]}[inferred]
    assert len(flat) == len(pairs)
    for k, (i, j) in enumerate(pairs):
        np.testing.assert_allclose(flat[k], scipy_signal.correlate2d(A[i], B[j]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("form", ["one-to-many", "n-to-mn", "n-to-m"])
@pytest.mark.parametrize("window", [dict(), dict(mode="same"), dict(shifts=((-3, 9), (-12, 2)))])
def test_numpy_reference_equals_the_harness_cpu_reference(form, window):
    """The package's NumPy reference and lib/reference_cpu.cpp (through the binding) agree."""
    rng = seeded_rng((form, repr(window)))
    nL = 1 if form == "one-to-many" else 2
    a, b = rand(rng, nL, 9, 13).astype(np.float32), rand(rng, 4, 6, 5).astype(np.float32)
    plan = xcorr.Plan(a.shape, b.shape, form=form, algorithm="reference", **window)
    got = plan(a, b)
    cpp = np.empty(got.shape, dtype=np.float64)
    _xcorr.reference_cpu(plan._spec, a, b, cpp)
    np.testing.assert_allclose(got, cpp, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("form", ["one-to-one", "one-to-many", "n-to-m"])
def test_numpy_zncc_of_zero_padded_data_equals_the_harness_cpu_reference(form, dims):
    """Zero-padded data: overlaps that hold only zeros are constant, so zncc is 0 there. The NumPy
    reference took its constant-overlap threshold from summed-area tables, rounding noise on an
    all-zero overlap that its factor, noise too, passed: it gave 1, -1 and NaN there."""
    rng = seeded_rng((form, dims, "zero-padded"))
    nL = 1 if form != "n-to-m" else 2
    nR = 1 if form == "one-to-one" else 3
    lshape, rshape = ((nL, 1, 41), (nR, 1, 7)) if dims == 1 else ((nL, 17, 19), (nR, 5, 6))
    a = rand(rng, *lshape).astype(np.float32)
    a[..., :, :lshape[-1] // 3] = 0  # a band of zeros wider than the right: all-zero overlaps
    if dims == 2:
        a[..., :lshape[-2] // 3, :] = 0
    b = rand(rng, *rshape).astype(np.float32)
    a_in, b_in = (a[:, 0], b[:, 0]) if dims == 1 else (a, b)  # the package's shapes: signals (count, n)
    a_in = a_in if form == "n-to-m" else a_in[0]  # one left: no stack dimension
    b_in = b_in[0] if form == "one-to-one" else b_in
    plan = xcorr.Plan(a_in.shape, b_in.shape, form=form, algorithm="reference", normalize="zncc", dims=dims)
    with np.errstate(all="raise"):  # a NaN from a negative factor raises here
        got = plan(a_in, b_in)
    cpp = np.empty(got.shape, dtype=np.float64)
    _xcorr.reference_cpu(plan._spec, a, b, cpp)
    np.testing.assert_allclose(got, cpp, rtol=0, atol=1e-9)


def test_reference_accepts_out_and_lists():
    a, b = [[1.0, 2.0], [3.0, 4.0]], [[1.0]]
    out = np.full((2, 2), np.nan)
    assert xcorr.correlate2d(a, b, algorithm="reference", out=out) is out
    np.testing.assert_array_equal(out, [[1, 2], [3, 4]])


def test_ambiguous_stacks_need_a_form():
    with pytest.raises(ValueError, match="form='n-to-m'.*form='n-to-mn'"):
        xcorr.Plan((2, 5, 5), (2, 3, 3), algorithm="reference")


def test_explain_names_an_algorithm_of_this_build_and_why():
    e = xcorr.explain((64, 64), (16, 16), mode="valid")
    names = {a["name"] for a in xcorr.algorithms()}
    assert e["algorithm"] in names and e["reason"] and e["candidates"][0]["algorithm"] == e["algorithm"]
    assert {c["algorithm"] for c in e["candidates"]} <= names
    e = xcorr.explain(np.zeros((4, 64, 64), np.float32), np.zeros((4, 16, 16), np.float32), form="n-to-m",
                      gpu="NVIDIA H200")
    assert e["algorithm"] in names and e["gpu"] == "NVIDIA H200"


# --- CPU: normalize ---------------------------------------------------------------------------

NORM_FORMS = {  # form -> (left shape, right shape): odd, unequal; the form inferred or said
    "one-to-one": ((13, 9), (5, 7)),
    "one-to-many": ((1, 13, 9), (3, 5, 7)),
    "n-to-mn": ((2, 11, 17), (4, 7, 3)),
    "n-to-m": ((3, 6, 5), (2, 9, 11)),  # the right larger than the left
}
NORM_WINDOWS = {"full": {}, "valid": dict(mode="valid"), "max_shift": dict(max_shift=(2, 3)),
                "shifts": dict(shifts=((-12, 4), (2, 14)))}  # partly beyond the full output


@pytest.fixture(scope="module")
def xcorr_cli():
    """The tool `xcorr` of $XCORR_BUILD (conftest's fixture of that name would hide the package)."""
    return binary("xcorr")


def norm_inputs(kind, rng, shape):
    """signed: normal (both signs); large: 1000 + U[-8, 8) (the cancellation case); unit: [0, 1)."""
    if kind == "signed":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "unit":
        return rng.random(shape, dtype=np.float32)
    return (1000 + rng.uniform(-8, 8, shape)).astype(np.float32)


def window_args(window):
    if "mode" in window:
        return ["--mode", window["mode"]]
    if "max_shift" in window:
        return ["--max-shift", "%d,%d" % window["max_shift"]]
    if "shifts" in window:
        (dy0, dy1), (dx0, dx1) = window["shifts"]
        return ["--shifts", f"{dy0}:{dy1},{dx0}:{dx1}"]
    return []


def stack(x):
    return x.reshape((-1,) + x.shape[-2:])


@pytest.mark.parametrize("kind", ["signed", "large"])
@pytest.mark.parametrize("wname", list(NORM_WINDOWS))
@pytest.mark.parametrize("form", list(NORM_FORMS))
@pytest.mark.parametrize("normalize", ["zncc", "zero-lag"])
def test_reference_normalize_equals_the_cpp_reference(xcorr_cli, tmp_path, normalize, form, wname, kind):
    """algorithm="reference" with normalize= against `xcorr run --algorithm reference --normalize`
    (lib/xcorr/reference_element.hpp: direct two-pass sums) and tests/xcorr_np.py (scipy sums with
    ones): three float64 computations, each different, agree far below the 1e-4 bound."""
    ls, rs = NORM_FORMS[form]
    window = NORM_WINDOWS[wname]
    rng = seeded_rng((normalize, form, wname, kind))
    left = norm_inputs(kind, rng, ls)
    # zero-lag on signed data: C(0, 0) near 0 makes any ratio huge (CONVENTIONS.md); a positive right
    # keeps it away from 0 while the left keeps both signs.
    right = norm_inputs("unit" if kind == "signed" and normalize == "zero-lag" else kind, rng, rs)
    got = xcorr.correlate2d(left, right, form=form if form in ("n-to-mn", "n-to-m") else None,
                            normalize=normalize, algorithm="reference", **window)
    assert got.dtype == np.float64 and np.isfinite(got).all()
    out = tmp_path / "out.npy"
    r = xrun(xcorr_cli, "--algorithm", "reference", "--form", form, "--normalize", normalize, *window_args(window),
             save(tmp_path / "l.npy", stack(left)), save(tmp_path / "r.npy", stack(right)), "--out", out)
    assert r.returncode == 0, r.stderr
    cpp = np.load(out)  # float32: the float64 reference rounded once
    flat = stack(got)
    assert flat.shape == cpp.shape, (flat.shape, cpp.shape)
    scale = max(1.0, float(np.abs(flat).max()))
    np.testing.assert_allclose(flat, cpp, rtol=0, atol=1e-6 * scale)
    plan = xcorr.Plan(left.shape, right.shape, form=form if form in ("n-to-mn", "n-to-m") else None,
                      normalize=normalize, algorithm="reference", **window)
    cpp64 = np.empty(plan.out_shape)
    _xcorr.reference_cpu(plan._spec, left, right, cpp64)  # the same C++ reference, unrounded
    np.testing.assert_allclose(got, cpp64, rtol=0, atol=1e-10 * scale)
    (dy0, dy1), (dx0, dx1) = plan.shifts
    oracle = normalized(normalize, form, stack(left), stack(right), (dy0, dy1, dx0, dx1))
    np.testing.assert_allclose(flat, oracle, rtol=0, atol=1e-9 * scale)
    if normalize == "zncc":
        assert np.abs(got).max() <= 1 and (got != 0).any()
    else:
        assert (got != 0).any()


def test_reference_zncc_is_opencv_tm_ccoeff_normed_in_the_valid_window():
    cv2 = pytest.importorskip("cv2", reason="opencv-python-headless is not installed (requirements.txt)")
    rng = seeded_rng("opencv")
    image, templ = norm_inputs("large", rng, (41, 37)), norm_inputs("signed", rng, (3, 9, 13))
    got = xcorr.correlate2d(image, templ, mode="valid", normalize="zncc", algorithm="reference")
    for k in range(3):
        np.testing.assert_allclose(got[k], cv2.matchTemplate(image, templ[k], cv2.TM_CCOEFF_NORMED), atol=1e-4)


@pytest.mark.parametrize("form", list(NORM_FORMS))
def test_reference_normalize_constant_and_zero_inputs_give_zeros_not_nan(form):
    ls, rs = NORM_FORMS[form]
    f = form if form in ("n-to-mn", "n-to-m") else None
    rng = seeded_rng(("constant", form))
    varying_l, varying_r = rng.random(ls), rng.random(rs)
    with np.errstate(all="raise"):  # no division by zero, no invalid value, anywhere
        for left, right in [(np.full(ls, 1000.25, np.float32), varying_r), (varying_l, np.full(rs, -3.5)),
                            (np.zeros(ls), np.zeros(rs))]:
            for window in NORM_WINDOWS.values():
                got = xcorr.correlate2d(left, right, form=f, normalize="zncc", algorithm="reference", **window)
                assert (got == 0).all(), window
        for window in NORM_WINDOWS.values():  # C(0, 0) = 0
            got = xcorr.correlate2d(np.zeros(ls), varying_r, form=f, normalize="zero-lag", algorithm="reference",
                                    **window)
            assert (got == 0).all(), window


def test_normalize_none_is_the_default_and_explain_says_what_normalization_adds():
    rng = seeded_rng("none")
    a, b = rng.random((9, 8)), rng.random((4, 3))
    np.testing.assert_array_equal(xcorr.correlate2d(a, b, normalize="none", algorithm="reference"),
                                  xcorr.correlate2d(a, b, algorithm="reference"))
    raw = xcorr.explain((64, 64), (16, 16), mode="valid", gpu="NVIDIA H200")
    assert raw["normalize"] == "none" and "epilogue" not in raw["reason"]
    for mode in ("zncc", "zero-lag"):
        e = xcorr.explain((64, 64), (16, 16), mode="valid", normalize=mode, gpu="NVIDIA H200")
        assert e["normalize"] == mode and f"normalize {mode}" in e["problem"]
        # Nothing normalized is measured near this problem: auto ranks the algorithms measured on the
        # raw problem as there, predicted from those measurements, and the normalization's epilogue
        # follows the pick (where a normalized problem is measured, auto takes that: tests/test_plan.py);
        # the others come from farther neighbours or the cost model, ranked among them.
        # Each measured algorithm's prediction scales its raw time by its own cost model (and
        # weighs in a farther neighbour), so two raw times within a few percent may swap (fft-fused
        # 7.09 and register-tiled 7.41 us became 7.72 and 7.53); times further apart keep their order.
        assert e["algorithm"] == raw["algorithm"]
        measured = {c["algorithm"]: c for c in raw["candidates"] if c["reason"].startswith("measured on")}
        assert len(measured) >= 3
        ranked = [c for c in e["candidates"] if c["algorithm"] in measured]
        assert sorted(c["algorithm"] for c in ranked) == sorted(measured)
        for c in ranked:  # predicted from this problem's raw time, as printed there
            raw_us = re.search(r" (\S+) us$", measured[c["algorithm"]]["reason"]).group(1)
            assert c["reason"].startswith("predicted for NVIDIA H200 from one-to-one 1x[64x64] * 1x[16x16]"), c
            assert f"({raw_us} us" in c["reason"], (c, raw_us)
        for a, b in zip(ranked, ranked[1:]):
            assert measured[a["algorithm"]]["predicted_us"] < 1.2 * measured[b["algorithm"]]["predicted_us"], (a, b)
        assert "predicted" in e["reason"] and f"({mode})" in e["reason"] and "epilogue" in e["reason"]
    p = xcorr.Plan((9, 8), (4, 3), normalize="zero-lag", algorithm="reference")
    assert p.normalize == "zero-lag" and "zero-lag" in p.explain()


def test_cli_explain_normalize(xcorr_cli):
    base = [xcorr_cli, "explain", "--form", "one-to-many", "--left", "256x256", "--right", "8:31x31", "--mode", "valid",
            "--gpu", "NVIDIA H200"]
    raw = run(base)
    assert raw.returncode == 0, raw.stderr
    for mode in ("zncc", "zero-lag"):
        r = run(base + ["--normalize", mode])
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[3] == raw.stdout.splitlines()[3]  # "auto runs: ..." unchanged
        assert f"normalized ({mode}): this algorithm's raw correlation" in r.stdout and "epilogue" in r.stdout
    r = run(base + ["--normalize", "ncc"])
    assert r.returncode == 2 and "unknown normalization" in r.stderr


# --- CPU: every error path --------------------------------------------------------------------

A, B = np.zeros((6, 7)), np.zeros((3, 3))
ERRORS = [  # kwargs of correlate2d with the reference (no GPU needed), exception, message
    (dict(left=np.zeros(5), right=B), ValueError, "2-D"),
    (dict(left=np.zeros((2, 2, 3, 3)), right=B), ValueError, "2-D"),
    (dict(left=np.zeros((0, 3)), right=B), ValueError, "empty"),
    (dict(left=np.zeros((2, 6, 7)), right=np.zeros((3, 3, 3)), form="n-to-mn"), ValueError, "multiple"),
    (dict(left=np.zeros((2, 6, 7)), right=np.zeros((2, 3, 3)), form="one-to-one"), ValueError, "one-to-one"),
    (dict(left=np.zeros((2, 6, 7)), right=B, form="one-to-many"), ValueError, "one left"),
    (dict(form="two-to-one"), ValueError, "form must be"),
    (dict(mode="fulll"), ValueError, "mode must be"),
    (dict(mode=3), ValueError, "mode must be"),
    (dict(max_shift=-1), ValueError, "max_shift"),
    (dict(max_shift=1.5), ValueError, "integers"),
    (dict(max_shift=(1, 2, 3)), ValueError, "pair"),
    (dict(max_shift=True), ValueError, "integers"),
    (dict(max_shift=2, mode="valid"), ValueError, "one window"),
    (dict(shifts=((3, 1), (0, 0))), ValueError, "empty window"),
    (dict(shifts=(1, 2)), ValueError, "shifts takes"),
    (dict(normalize="ncc"), ValueError, "'none', 'zncc', 'zero-lag'"),
    (dict(normalize="ZNCC"), ValueError, "normalize must be"),
    (dict(normalize=""), ValueError, "normalize must be"),
    (dict(normalize=1), ValueError, "normalize must be"),
    (dict(normalize=["zncc"]), ValueError, "normalize must be"),
    (dict(algorithm="no-such-algorithm"), ValueError, "unknown algorithm"),
    (dict(algorithm=None), ValueError, "algorithm must be"),
    (dict(precision="fp16"), ValueError, "precision"),
    (dict(params={"x": 1}), ValueError, "params"),
    (dict(params=[1, 2]), ValueError, "params must be a dict"),  # was AttributeError
    (dict(params="abc"), ValueError, "params must be a dict"),
    (dict(stream="x"), ValueError, "stream= takes"),  # was ignored by the reference
    (dict(max_shift=-1), ValueError, "max_shift must be integers from 0 to"),  # was "max_shift=SY[,SX]: ..."
    (dict(shifts=((0, 2**30), (0, 0))), ValueError, "a shift is 2.30 or more away from 0"),
    (dict(out=np.zeros((8, 8))), ValueError, "shape"),
    (dict(left=np.zeros((6, 7), dtype=np.int32)), ValueError, "float32 or float64"),
    (dict(left=np.zeros((6, 7), dtype=np.complex64)), ValueError, "float32 or float64"),
]


@pytest.mark.parametrize("kw,exc,match", ERRORS, ids=[f"{i}-{e[2]}" for i, e in enumerate(ERRORS)])
def test_bad_calls_raise_the_documented_exception(kw, exc, match):
    kw = dict(kw)
    left, right = kw.pop("left", A), kw.pop("right", B)
    kw.setdefault("algorithm", "reference")
    with pytest.raises(exc, match=match):
        xcorr.correlate2d(left, right, **kw)


def test_the_package_learns_an_array_library_from_a_plan_call_s_first_array_type(monkeypatch):
    """libraries_for, which Plan's call asks first: the first type of PyTorch's (here a stand-in
    module named torch) fills _arrays.TORCH in, so that very call can take the pointer path; a
    NumPy type leaves both libraries unknown and imports nothing."""
    import sys
    import types
    arrays = xcorr._arrays
    for name, value in (("TORCH", None), ("CUPY", None), ("_MET", set())):
        monkeypatch.setattr(arrays, name, value)
    fake = types.ModuleType("torch")
    fake.Tensor = type("Tensor", (), {"__module__": "torch"})
    fake.float32, fake.strided, fake.empty, fake.int32, fake.float64 = "f32", "strided", object(), "i32", "f64"
    fake._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    assert arrays.libraries_for(np.ndarray) == (None, None) and "cupy" not in sys.modules
    T, C = arrays.libraries_for(fake.Tensor)
    assert T is arrays.TORCH and T.Tensor is fake.Tensor and C is None
    assert arrays.libraries_for(fake.Tensor)[0] is T  # known: the same object, no second import


def test_plan_refuses_arrays_of_other_shapes():
    plan = xcorr.Plan((6, 7), (3, 3), algorithm="reference")
    with pytest.raises(ValueError, match="built for"):
        plan(np.zeros((7, 6)), B)
    with pytest.raises(ValueError, match="2-D .h, w. or a 3-D stack"):  # signals: correlate1d (test_onedim_package.py)
        xcorr.correlate2d(np.zeros(5), np.zeros(3), algorithm="reference")


def test_an_option_s_cache_key_keeps_each_number_s_type():
    """What the plan caches key options by (_hashable, in every call of correlate2d, peaks2d and
    the others): numbers of other types never share a key (1, True, 1.0 and numpy's 1 mean
    different things to the checks a cache hit skips), at any depth; a list keys as its tuple; a
    dict's order does not matter."""
    h = xcorr._api._hashable
    assert len({h(1), h(True), h(1.0), h(np.int64(1))}) == 4
    shifts = ((-8, 8), (-8, 8))
    assert h(shifts) == h([[-8, 8], [-8, 8]])
    assert h(shifts) != h(((-8.0, 8), (-8, 8))) and h(shifts) != h(((-8, 8), (-8, True)))
    assert h({"b": 1, "a": "x"}) == h({"a": "x", "b": 1}) != h({"a": "x", "b": 2})
    assert h(None) is None and h("auto") == "auto"


def test_correlate2d_cache_key_keeps_the_type_of_numbers():
    """The plan cache must not let max_shift=True or 1.0 find the plan of max_shift=1 (they are
    refused), nor fail on an unhashable option (a ValueError says what is wrong)."""
    xcorr.correlate2d(A, B, max_shift=1, algorithm="reference")
    for bad in (True, 1.0, (1, True)):
        with pytest.raises(ValueError, match="integers"):
            xcorr.correlate2d(A, B, max_shift=bad, algorithm="reference")
    with pytest.raises(ValueError, match="mode must be"):
        xcorr.correlate2d(A, B, ["full"], algorithm="reference")


class _Workspace:
    """A stand-in for a cached plan: counts how many are alive, as device workspaces would be."""
    alive = 0

    def __init__(self):
        _Workspace.alive += 1

    def __del__(self):
        _Workspace.alive -= 1


@pytest.mark.parametrize("message", [
    "not enough GPU memory for this problem (cudaMalloc at lib/plan.cpp:1)",
    "cuFFT error 5 (CUFFT_INTERNAL_ERROR) in cufftMakePlanMany (creating a plan; 100 of 81000 MiB of GPU memory free: "
    "a plan larger than that is reported this way too)",
])
def test_a_plan_short_of_gpu_memory_frees_the_cached_plans_and_is_made_again(monkeypatch, message):
    """The call cache keeps up to 16 plans with their device workspace (a reduced plan's scratch is
    gigabytes): a new device plan that does not fit beside them (a call's, or a Plan the user
    makes) must not fail. It is made again once after the cached plans are freed; an error of
    another kind, or one with no cached plans to free, is raised as it was."""
    from xcorr import _api
    cache = {("a",): _Workspace(), ("b",): _Workspace()}
    monkeypatch.setattr(_api, "_plans", cache)
    batch_bytes = [0]  # what devices=/chunk= calls keep: freed by clear_cache too
    monkeypatch.setattr(_api._xcorr, "batch_buffer_bytes", lambda: batch_bytes[0])
    monkeypatch.setattr(_api._xcorr, "release_batch_buffers", lambda: batch_bytes.__setitem__(0, 0))
    error = ValueError if "not enough" in message else RuntimeError
    seen = []

    def make():
        seen.append(_Workspace.alive)
        if len(seen) == 1:
            raise error(message)
        return "the plan"
    assert _api._freeing_the_cache_if_short(make) == "the plan"
    assert seen == [2, 0] and not cache, (seen, cache)  # freed before the second try
    # Nothing cached: the error is the call's.
    with pytest.raises(error, match="GPU memory"):
        _api._freeing_the_cache_if_short(lambda: (_ for _ in ()).throw(error(message)))
    # Only the batch's buffers held: they are released, then the plan is made.
    batch_bytes[0], seen[:] = 64 << 20, []
    assert _api._freeing_the_cache_if_short(make) == "the plan" and batch_bytes == [0] and len(seen) == 2
    # Another error is raised and frees nothing; a second failure is raised, not retried forever.
    cache[("a",)] = _Workspace()
    with pytest.raises(ValueError, match="mode must be"):
        _api._freeing_the_cache_if_short(lambda: (_ for _ in ()).throw(ValueError("mode must be full")))
    assert list(cache) == [("a",)]
    with pytest.raises(error, match="GPU memory"):
        _api._freeing_the_cache_if_short(lambda: (_ for _ in ()).throw(error(message)))
    assert not cache


@pytest.mark.parametrize("message, kind", [
    ("not enough GPU memory for fft-large: one-to-many 1 x [4096 x 4096] * 64 x [384 x 384] needs 2370 MiB (the "
     "left's spectrum and one right's passes), 1024 MiB free", "gpu"),
    ("not enough GPU memory for this problem (cudaMalloc at lib/plan.cpp:1)", "gpu"),
    ("not enough GPU memory for the cuFFT plan (cufftMakePlanMany at lib/fft.cpp:9)", "gpu"),
    ("mode must be 'full', 'valid' or 'same', got 'ful'", "value"),
    ("not enough host memory: shifts -16000:16000 needs 11.4 GiB", "value"),
])
def test_a_problem_the_gpu_s_memory_does_not_hold_is_a_memory_error(message, kind):
    """The library's refusal of a problem too large for the GPU's memory (a UsageError worded "not
    enough GPU memory ...", the plans' own naming what they need and what is free) reaches Python
    as xcorr.GPUMemoryError: a MemoryError (as CuPy's out-of-memory error is) and still the
    ValueError every usage error is; any other usage error stays a plain ValueError (translated by
    the binding itself, here without a GPU)."""
    assert issubclass(xcorr.GPUMemoryError, MemoryError) and issubclass(xcorr.GPUMemoryError, ValueError)
    assert "GPUMemoryError" in xcorr.__all__
    with pytest.raises(ValueError) as e:
        xcorr._api._xcorr._raise_usage_error(message)
    assert str(e.value) == message
    assert isinstance(e.value, xcorr.GPUMemoryError) == (kind == "gpu") == isinstance(e.value, MemoryError)


def test_every_device_plan_is_made_through_the_cache_freeing_retry(monkeypatch):
    """Plan() and the convenience calls' cached plans both build their device plan in _attach,
    which goes through _freeing_the_cache_if_short (without a GPU: the binding's Plan replaced by
    one that fails short of memory once)."""
    from xcorr import _api
    monkeypatch.setattr(_api, "_plans", {("cached",): _Workspace()})
    calls = []

    class Binding:
        device = 0

        def __init__(self, spec, device):
            calls.append(len(_api._plans))
            if len(calls) == 1:
                raise ValueError("not enough GPU memory for this problem (cudaMalloc at lib/plan.cpp:1)")
    monkeypatch.setattr(_api._xcorr, "Plan", Binding)
    plan = xcorr.Plan((64, 64), (8, 8), mode="valid")
    assert calls == [1, 0] and isinstance(plan._plan, Binding) and not _api._plans


def has_gpu():
    try:
        xcorr.gpu_info()
        return True
    except xcorr.NoGPUError:
        return False


def test_without_a_gpu_the_gpu_path_raises_no_gpu_error():
    """Every call that needs a GPU raises NoGPUError with one reason, and says what runs without
    one: algorithm="reference" (it said only "no usable CUDA GPU: ...", and a newcomer without a
    GPU did not learn that the package computes the same on the CPU)."""
    if has_gpu():
        pytest.skip("a GPU is present (this test checks the machine without one)")
    with pytest.raises(xcorr.NoGPUError) as e:
        xcorr.gpu_info()  # asks for the GPU itself: no way around it to name
    bare = str(e.value)
    assert len(bare) > 10 and "reference" not in bare, bare
    f32 = np.ones((5, 5), np.float32), np.ones((3, 3), np.float32)
    for call in (lambda: xcorr.correlate2d(*f32),
                 lambda: xcorr.correlate2d(*f32, algorithm="overlap-wise"),
                 lambda: xcorr.Plan((5, 5), (3, 3), algorithm="overlap-wise"),
                 lambda: xcorr.Plan((5, 5), (3, 3)),
                 lambda: xcorr.correlate2d(*f32, devices=[0]),
                 lambda: xcorr.correlate2d(*f32, chunk=1)):
        with pytest.raises(xcorr.NoGPUError) as e:
            call()
        # One reason for all: devices= said "--gpus 0: no CUDA device is visible" (a CLI flag) and
        # chunk= CUDA's bare "driver version is insufficient".
        assert isinstance(e.value, RuntimeError) and str(e.value) == (
            f'{bare}; algorithm="reference" computes the same on the CPU (float64 NumPy, without devices= or chunk=)')
    out = xcorr.correlate2d(*f32, algorithm="reference")  # what the message offers does run here
    assert out.dtype == np.float64 and out[2, 2] == 9


F32 = np.ones((6, 7), np.float32)
BEFORE_THE_GPU = [  # (call, message): refused the same with or without a GPU
    (lambda: xcorr.correlate2d(np.zeros((6, 7), np.int32), B), "left must be float32.*got int32"),
    (lambda: xcorr.correlate2d(F32, np.zeros((3, 3), bool)), "right must be float32.*got bool"),
    (lambda: xcorr.correlate1d(np.zeros(7, np.complex64), np.zeros(3)), "left must be float32.*got complex64"),
    (lambda: xcorr.correlate2d(F32, B, out=np.zeros((1, 1), np.float32)), r"out must have shape \(8, 9\)"),
    (lambda: xcorr.correlate2d(F32, B, out=np.zeros((8, 9))), "out must be float32, got float64"),
    (lambda: xcorr.correlate2d(F32, B, chunk=1, out=np.zeros((8, 9), ">f4")),
     r"out must be float32, got float32 \(big-endian\)"),  # was "must be float32, got float32"
    (lambda: xcorr.correlate2d(np.full((6, 7), -1e300), B, chunk=1), "element 0 .-1e.300. is outside float32's range"),
    (lambda: xcorr.Plan((6, 7), (3, 3), algorithm="overlap-wise", params=[1, 2]), "params must be a dict"),
    (lambda: xcorr.Plan((2**31, 5), (3, 3), algorithm="overlap-wise"), "dimension over 2.30"),
    (lambda: xcorr.Plan((2**31,), (5,), dims=1, algorithm="reference"), "dimension over 2.30"),
    (lambda: xcorr.explain((2**31, 5), (5, 5)), "dimension over 2.30"),  # were nanobind TypeErrors
    (lambda: xcorr.Plan(None, (3, 3)), "a shape is a tuple of integers, got None"),
    (lambda: xcorr.Plan(5, (3, 3)), "a shape is a tuple of integers, got 5"),
    (lambda: xcorr.explain((6, 7), (3, 3), gpu=5), "gpu must be a GPU's name"),
    (lambda: xcorr.Plan((6, 7), (3, 3), algorithm="reference", device="cuda:0"), "device must be"),
    (lambda: xcorr.correlate2d(F32, B, devices=[0, 0]), "devices= '0,0': device 0 is given twice"),  # said --gpus
]


@pytest.mark.parametrize("call,match", BEFORE_THE_GPU, ids=[m for _, m in BEFORE_THE_GPU])
def test_bad_arrays_and_arguments_are_value_errors_on_any_machine(call, match):
    """A call's arrays and arguments are checked before the device plan is built: without a GPU
    a bad dtype or out= was NoGPUError (with one, a plan and its workspace were made and cached
    first), and a non-dict params= or a 2^31 dimension a TypeError or AttributeError."""
    with pytest.raises(ValueError, match=match):
        call()


def test_the_size_check_does_not_overflow():
    """The harness's size check summed hL + hR - 1 in int: 2^31 - 1 rows wrapped to a negative
    size and passed (Python refuses such a shape first; the binding is asked directly)."""
    spec = xcorr._xcorr.spec("one-to-one", 1, 1, 2**31 - 1, 1, 2**31 - 1, 1, "mode", "full", "none", "fp32", "auto", {})
    with pytest.raises(ValueError, match="too large"):
        xcorr._xcorr.resolve(spec)


def test_a_bad_switch_raises_value_error_before_the_gpu(monkeypatch):
    """The library's environment switches (docs/cli.md, "Environment switches") are checked when a Plan
    is made, GPU or not: a value it would misread is a ValueError naming it, not NoGPUError, not a
    failure at the first launch that reads it."""
    monkeypatch.setenv("XCORR_NO_GRAPH", "yes")
    with pytest.raises(ValueError, match="XCORR_NO_GRAPH: not an integer from 0 to 1: 'yes'"):
        xcorr.Plan((5, 5), (3, 3), algorithm="overlap-wise")
    # the reference too (no C++ Plan behind it: it once ran, where `xcorr run --algorithm reference` exits 2);
    # correlate2d's plan cache may hold this shape's plan from an earlier test, made under a clean environment
    xcorr.clear_cache()
    for call in (lambda: xcorr.Plan((5, 5), (3, 3), algorithm="reference"),
                 lambda: xcorr.correlate2d(np.ones((5, 5), np.float32), np.ones((3, 3), np.float32), algorithm="reference")):
        with pytest.raises(ValueError, match="XCORR_NO_GRAPH: not an integer from 0 to 1: 'yes'"):
            call()
    monkeypatch.setenv("XCORR_NO_GRAPH", "1")
    if not has_gpu():
        with pytest.raises(xcorr.NoGPUError):  # accepted: on to the GPU, which is missing
            xcorr.Plan((5, 5), (3, 3), algorithm="overlap-wise")


# --- GPU ----------------------------------------------------------------------------------------

from array_libs import NoDLPack, cupy, gpu, host, lib_array, torch  # noqa: E402,F401 (fixtures)


GPU_CASES = {  # form -> (left shape, right shape): odd, unequal sizes
    "one-to-one": ((37, 29), (11, 13)),
    "one-to-many": ((37, 29), (3, 11, 13)),
    "n-to-mn": ((2, 37, 29), (4, 11, 13)),
    "n-to-m": ((2, 37, 29), (3, 11, 13)),
}
# The same forms as one-dimensional signals (1 x n matrices), for the algorithms that compute only
# those (fft-segmented): they refuse every case above, and run these instead.
GPU_CASES_1D = {
    "one-to-one": ((1, 301), (1, 47)),
    "one-to-many": ((1, 301), (3, 1, 47)),
    "n-to-mn": ((2, 1, 301), (4, 1, 47)),
    "n-to-m": ((2, 1, 301), (3, 1, 47)),
}
WINDOWS = {"full": {}, "valid": dict(mode="valid"), "same": dict(mode="same"), "max-shift": dict(max_shift=(3, 5)),
           "shifts": dict(shifts=((-4, 20), (-12, 1)))}
ALGORITHMS = [a["name"] for a in xcorr.algorithms()]


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_algorithm_through_torch_and_cupy_matches_the_reference(name, lib, request):
    module = request.getfixturevalue(lib)
    algo = next(a for a in xcorr.algorithms() if a["name"] == name)
    rng = seeded_rng((name, lib))
    ran, refused = 0, []
    for cases in (GPU_CASES, GPU_CASES_1D):  # the signals only where every matrix case is refused
        if ran:
            break
        for form in algo["forms"]:
            ls, rs = cases[form]
            a, b = rng.random(ls, dtype=np.float32), rng.random(rs, dtype=np.float32)
            for wname in algo["windows"]:
                window = WINDOWS[wname]
                try:
                    plan = xcorr.Plan(ls, rs, form=form, algorithm=name, precision=algo["precision"] if
                                      algo["precision"] == "tf32" else "fp32", **window)
                except ValueError as e:  # a size or parameter this variant does not take
                    refused.append(f"{form} {wname} {ls} * {rs}: {e}")
                    continue
                got = plan(lib_array(module, a), lib_array(module, b))
                assert type(got).__module__.split(".")[0] == lib
                ref = xcorr.correlate2d(a, b, form=form, algorithm="reference", **window)
                assert tuple(got.shape) == ref.shape
                assert rel_err(host(got), ref) <= algo["tolerance"], (form, wname, ls, rs)
                ran += 1
    if not ran:
        pytest.skip(f"{name} refused all {len(refused)} cases, matrices and signals; the first: {refused[0]}")


NORM_BOUND = 1e-4  # CONVENTIONS.md: normalized outputs within 1e-4 (absolute) of float64


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["torch", "cupy"])
@pytest.mark.parametrize("name", ["auto"] + ALGORITHMS)
def test_normalized_through_torch_and_cupy_matches_the_reference(name, lib, request):
    """normalize="zncc" (1000 + U[-8, 8) and both signs) and "zero-lag" (positive inputs: [0, 1) and
    1000 + U[-8, 8)) for every form and window the algorithm computes (auto: all of them), odd
    unequal shapes, the output poisoned with NaN first: within 1e-4 of the float64 reference
    (max(1e-4, its bound) for a TF32 algorithm, as tests/test_normalize.py)."""
    module = request.getfixturevalue(lib)
    algo = None if name == "auto" else next(a for a in xcorr.algorithms() if a["name"] == name)
    forms = list(GPU_CASES) if algo is None else algo["forms"]
    windows = list(WINDOWS) if algo is None else algo["windows"]
    precision = "tf32" if algo is not None and algo["precision"] == "tf32" else "fp32"
    bound = NORM_BOUND if algo is None else max(NORM_BOUND, algo["tolerance"])
    rng = seeded_rng(("normalized", name, lib))
    ran, refused = 0, []
    for cases, normalize, kinds in [(c, n, k) for c in (GPU_CASES, GPU_CASES_1D)
                                    for n, k in (("zncc", ("large", "signed")), ("zero-lag", ("unit", "large")))]:
        if ran and cases is GPU_CASES_1D:  # the signals only where every matrix case is refused
            break
        for form in forms:
            ls, rs = cases[form]
            for kind in kinds:
                a, b = norm_inputs(kind, rng, ls), norm_inputs(kind, rng, rs)
                for wname in windows:
                    window = WINDOWS[wname]
                    try:
                        plan = xcorr.Plan(ls, rs, form=form, algorithm=name, precision=precision,
                                          normalize=normalize, **window)
                    except ValueError as e:  # a size or parameter this variant does not take
                        refused.append(f"{normalize} {form} {wname} {ls} * {rs}: {e}")
                        continue
                    out = lib_array(module, np.full(plan.out_shape, np.nan, np.float32))
                    got = plan(lib_array(module, a), lib_array(module, b), out=out)
                    assert got is out
                    ref = xcorr.correlate2d(a, b, form=form, normalize=normalize, algorithm="reference", **window)
                    g = host(got)
                    assert g.shape == ref.shape and np.isfinite(g).all(), (normalize, form, wname, kind)
                    err = float(np.abs(g - ref).max())
                    assert err <= bound, (normalize, form, wname, kind, plan.algorithm, err)
                    ran += 1
    if not ran:
        pytest.skip(f"{name} refused all {len(refused)} normalized cases, matrices and signals; the first: "
                    f"{refused[0]}")


def test_normalized_auto_says_what_it_runs_and_correlate2d_caches_per_normalization(torch):
    a = torch.as_tensor(norm_inputs("large", seeded_rng("auto-norm"), (1, 200, 150)), device="cuda")
    b = torch.as_tensor(norm_inputs("large", seeded_rng("auto-norm-r"), (5, 31, 17)), device="cuda")
    results = {}
    for normalize in (None, "zncc", "zero-lag"):
        plan = xcorr.Plan(a.shape, b.shape, mode="valid", normalize=normalize)
        if normalize:
            assert f"normalized ({normalize})" in plan.explain() and "epilogue" in plan.explain()
        results[normalize] = xcorr.correlate2d(a, b, mode="valid", normalize=normalize).cpu().numpy()
    for normalize in ("zncc", "zero-lag"):
        ref = xcorr.correlate2d(a.cpu().numpy(), b.cpu().numpy(), mode="valid", normalize=normalize,
                                algorithm="reference")
        assert np.abs(results[normalize] - ref).max() <= NORM_BOUND
    assert np.abs(results[None]).max() > 1e6  # the raw sums: not served from a normalized plan


def test_zero_copy_torch(torch):
    a = torch.rand(3, 37, 29, device="cuda")
    b = torch.rand(4, 11, 13, device="cuda")
    plan = xcorr.Plan(a.shape, b.shape, form="n-to-m")
    out = torch.full(plan.out_shape, float("nan"), device="cuda")
    plan(a, b, out=out)  # warm: anything lazily created is created now
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    assert plan(a, b, out=out) is out
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before  # no copy of the inputs, the output in place
    got = plan(a, b)  # the only new allocation is the result
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - before == (got.numel() * 4 + 511) // 512 * 512
    ref = xcorr.correlate2d(a.cpu().numpy(), b.cpu().numpy(), form="n-to-m", algorithm="reference")
    assert rel_err(out.cpu().numpy(), ref) < 1e-5 and rel_err(got.cpu().numpy(), ref) < 1e-5


def test_fft_plans_of_one_shape_run_at_once_from_two_threads(torch):
    """Two plans of one shape (algorithm fft, plain stream launches) run at once, each from its
    own thread on its own stream. cuFFT plans came from a cache that lent one plan, with its one
    work area and stream setting, to both: one thread's cufftSetStream could send the other's
    transform to its stream. Each plan now holds a cuFFT plan of its own; every result is right."""
    import threading
    shapes = (300, 300), (8, 61, 61)
    plans = [xcorr.Plan(*shapes, algorithm="fft", params={"launch": "stream"}) for _ in range(2)]
    gen = torch.Generator(device="cpu").manual_seed(11)
    inputs = [(torch.rand(shapes[0], generator=gen) * 2 - 1, torch.rand(shapes[1], generator=gen) * 2 - 1)
              for _ in plans]
    refs = [xcorr.correlate2d(l.numpy(), r.numpy(), algorithm="reference") for l, r in inputs]
    results, errors = [[], []], []

    def work(i):
        try:
            stream = torch.cuda.Stream()
            l, r = (x.cuda() for x in inputs[i])
            with torch.cuda.stream(stream):
                for _ in range(40):
                    results[i].append(plans[i](l, r, stream=stream))
            stream.synchronize()
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(2):
        worst = max(rel_err(out.cpu().numpy(), refs[i]) for out in results[i])
        assert worst < 2e-6, (i, worst)


def test_zero_copy_cupy(cupy):
    pool = cupy.get_default_memory_pool()
    a = cupy.random.rand(37, 29, dtype=cupy.float32)
    b = cupy.random.rand(5, 11, 13, dtype=cupy.float32)
    plan = xcorr.Plan(a.shape, b.shape, mode="valid")
    out = cupy.full(plan.out_shape, cupy.nan, dtype=cupy.float32)
    plan(a, b, out=out)
    cupy.cuda.Device().synchronize()
    before = pool.used_bytes()
    assert plan(a, b, out=out) is out
    cupy.cuda.Device().synchronize()
    assert pool.used_bytes() == before
    ref = xcorr.correlate2d(a.get(), b.get(), mode="valid", algorithm="reference")
    assert rel_err(out.get(), ref) < 1e-5


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("lib", ["torch", "cupy"])
def test_arrays_as_the_kernels_read_them_take_the_pointer_path(lib, request, monkeypatch):
    """Float32 C-contiguous arrays of the plan's shapes on its device go to the binding
    as raw pointers (no DLPack per call), through Plan and correlate2d's cache, with and without
    out=; anything else (a strided view) still takes the general path, which copies it. From the
    process's first call with the library's arrays on (the package not knowing it yet: that call
    once took the general path, so this test failed where it ran first in its process)."""
    module = request.getfixturevalue(lib)
    for name, value in (("TORCH", None), ("CUPY", None), ("_MET", set())):
        monkeypatch.setattr(xcorr._arrays, name, value)
    rng = seeded_rng(("pointer path", lib))
    an, bn = rng.random((2, 37, 29), dtype=np.float32), rng.random((3, 11, 13), dtype=np.float32)
    a, b = lib_array(module, an), lib_array(module, bn)
    window = dict(form="n-to-m", max_shift=(3, 5))
    ref = xcorr.correlate2d(an, bn, algorithm="reference", **window)
    plan = xcorr.Plan(a.shape, b.shape, **window)
    plan._plan = NoDLPack(plan._plan)
    out = lib_array(module, np.full(plan.out_shape, np.nan, np.float32))
    assert plan(a, b, out=out) is out and rel_err(host(out), ref) < 1e-5
    got = plan(a, b)
    assert type(got) is type(a) and rel_err(host(got), ref) < 1e-5
    if lib == "torch":
        assert rel_err(host(plan(a.clone().requires_grad_(True), b)), ref) < 1e-5
    with pytest.raises(AssertionError, match="DLPack"):
        plan(module.swapaxes(lib_array(module, np.ascontiguousarray(an.transpose(0, 2, 1))), 1, 2), b)
    xcorr.clear_cache()
    xcorr.correlate2d(a, b, **window)  # the first call fills the cache
    for p in xcorr._api._plans.values():
        p._plan = NoDLPack(p._plan)
    assert rel_err(host(xcorr.correlate2d(a, b, **window)), ref) < 1e-5
    out[...] = float("nan")
    assert xcorr.correlate2d(a, b, out=out, **window) is out and rel_err(host(out), ref) < 1e-5
    xcorr.clear_cache()


def test_torch_streams_current_and_given(torch):
    """Work queued behind a sleep on a non-blocking stream: a result computed on any other stream
    would read the inputs before they are written."""
    src_a, src_b = torch.rand(64, 64, device="cuda"), torch.rand(9, 7, device="cuda")
    ref = xcorr.correlate2d(src_a.cpu().numpy(), src_b.cpu().numpy(), algorithm="reference")
    for given in (False, True):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)
            a, b = src_a * 1, src_b * 1  # written on s after the sleep
            if not given:
                out = xcorr.correlate2d(a, b)  # s is current
        if given:
            out = xcorr.correlate2d(a, b, stream=s)
        s.synchronize()
        assert rel_err(out.cpu().numpy(), ref) < 1e-5, given


@pytest.mark.parametrize("form, shapes", [("one-to-one", ((150, 141), (139, 150))),
                                           ("n-to-m", ((2, 70, 61), (3, 59, 66)))])
def test_repeated_calls_replay_a_graph_that_follows_data_streams_and_pointers(torch, form, shapes):
    """fft-fused replays a repeated call as a CUDA graph (GraphReplay, algorithms/common/launch.cuh;
    the staged path at these sizes): new data in the same buffers (direct, capture, replays),
    another output buffer, a stream held back by a sleep, and the caller's own graph capture all
    give the reference."""
    rng = seeded_rng(("graph replay", form))
    plan = xcorr.Plan(shapes[0], shapes[1], form=form, algorithm="fft-fused")
    a, b = torch.empty(shapes[0], device="cuda"), torch.empty(shapes[1], device="cuda")
    out = torch.empty(plan.out_shape, device="cuda")

    def fresh(sign=1.0):
        an, bn = rand(rng, *shapes[0]).astype(np.float32) * sign, rand(rng, *shapes[1]).astype(np.float32)
        a.copy_(torch.from_numpy(an)), b.copy_(torch.from_numpy(bn))
        return xcorr.correlate2d(an, bn, form=form, algorithm="reference")

    for k in range(4):  # direct, capture, replay, replay
        ref = fresh()
        out.fill_(float("nan"))
        plan(a, b, out=out)
        assert rel_err(out.cpu().numpy(), ref) < 1e-5, k
    other = torch.full_like(out, float("nan"))
    assert rel_err(plan(a, b, out=other).cpu().numpy(), ref) < 1e-5
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        a.neg_()  # written on s after the sleep: the replay must run behind it
        out.fill_(float("nan"))
        plan(a, b, out=out)
    s.synchronize()
    assert rel_err(out.cpu().numpy(), -ref) < 1e-5
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # the caller's capture: the launches go into its graph
        plan(a, b, out=out)
    ref = fresh(-1.0)
    out.fill_(float("nan"))
    g.replay()
    torch.cuda.synchronize()
    assert rel_err(out.cpu().numpy(), ref) < 1e-5


def test_cupy_stream(cupy):
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        # the inputs written on s as well: a non-blocking stream is not ordered after the default
        # stream's random kernels (made there, this test raced them under a loaded GPU: 0.13 error)
        a = cupy.random.rand(40, 33, dtype=cupy.float32)
        b = cupy.random.rand(3, 9, 7, dtype=cupy.float32)
        out = xcorr.correlate2d(a, b, max_shift=4)
    s.synchronize()
    ref = xcorr.correlate2d(a.get(), b.get(), max_shift=4, algorithm="reference")
    assert rel_err(out.get(), ref) < 1e-5


def test_non_contiguous_input_is_copied_first(torch, cupy):
    big = np.random.default_rng(5).random((41, 60), dtype=np.float32)
    ref = xcorr.correlate2d(big[:, ::2], big[3:10, 1:8].T, algorithm="reference")
    for lib in (torch, cupy):
        x = lib_array(lib, big)
        got = xcorr.correlate2d(x[:, ::2], x[3:10, 1:8].T)
        assert rel_err(host(got), ref) < 1e-5
    out = torch.empty(tuple(ref.shape) + (2,), device="cuda")[..., 0]
    with pytest.raises(ValueError, match="C-contiguous"):
        xcorr.correlate2d(lib_array(torch, big[:, ::2]), lib_array(torch, big[3:10, 1:8].T), out=out)


def test_numpy_round_trip_and_gpu_out_checks(gpu, torch):
    rng = np.random.default_rng(6)
    a, b = rng.random((2, 33, 31)), rng.random((2, 5, 9))  # float64: converted to float32
    got = xcorr.correlate2d(a, b, form="n-to-mn")
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    ref = xcorr.correlate2d(a, b, form="n-to-mn", algorithm="reference")
    assert rel_err(got, ref) < 1e-5
    out = np.empty(ref.shape, np.float32)
    assert xcorr.correlate2d(a.astype(np.float32), b, form="n-to-mn", out=out) is out
    assert rel_err(out, ref) < 1e-5
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    with pytest.raises(ValueError, match="float32"):
        xcorr.correlate2d(ta, tb, form="n-to-mn")  # float64 on the GPU is not converted silently
    ta, tb = ta.float(), tb.float()
    with pytest.raises(ValueError, match="shape"):
        xcorr.correlate2d(ta, tb, form="n-to-mn", out=torch.empty(3, device="cuda"))
    with pytest.raises(ValueError, match="float32"):
        xcorr.correlate2d(ta, tb, form="n-to-mn", out=torch.empty(ref.shape, device="cuda", dtype=torch.float64))


@pytest.mark.parametrize("example", ["piv.py", "template_matching.py", "cryoem_search.py", "ambient_noise.py"])
def test_examples_run_on_the_cpu_reference(example):
    import subprocess
    import sys
    from conftest import ROOT
    r = subprocess.run([sys.executable, str(ROOT / "examples" / example), "--small", "--reference"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "xcorr: reference" in r.stdout
    assert re.search(r"(found|displacements|true lag)[^\n]*: 100(\.0)?%", r.stdout), r.stdout  # every displacement / template / particle / lag found


@pytest.mark.gpu  # its torch or cupy fixture is taken by name at run time
@pytest.mark.parametrize("example", ["piv.py", "template_matching.py", "cryoem_search.py", "ambient_noise.py"])
def test_examples_run_on_the_gpu(example):
    """The examples as a user runs them (algorithm auto on the GPU), small sizes: every displacement,
    template, particle or lag found; with a GPU only (the CPU reference path is the test above)."""
    import subprocess
    import sys
    from conftest import ROOT
    if not has_gpu():
        pytest.skip("no usable GPU: the examples' GPU path is run on the device")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / example), "--small"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "xcorr: reference" not in r.stdout
    assert re.search(r"(found|displacements|true lag)[^\n]*: 100(\.0)?%", r.stdout), r.stdout
