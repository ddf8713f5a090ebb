"""`xcorr run --dims 1` and `xcorr explain --dims 1` on the CPU: 1-D signals are 1 x n
matrices (CONVENTIONS.md, "One-dimensional signals"), so the reference computes them through the
2-D path; every output pair must equal scipy.signal.correlate(L, R, mode) of its pair, for every
form, window (full, valid, same, --max-lag, --lags, --shifts 0:0,...), odd and even unequal lengths
in both size orders and inputs of both signs; normalized outputs equal tests/xcorr_np.py's oracle
with h = 1. Every bad input: exit 2, one line, no output file."""
import json

import numpy as np
import pytest
from scipy.signal import correlate

from conftest import (fixture_variant_names, one_line_error, precision_args, require_variant, run, save,
                      seeded_rng, xrun)
from xcorr_np import FORMS, counts, normalized, pairs

# (left length, right length): odd unequal both ways, even rights both ways (where 1-D 'same'
# differs from correlate2d's), equal, and a length 1.
LENGTHS = [(13, 5), (5, 13), (12, 6), (6, 12), (9, 9), (1, 7), (7, 1)]


def signals(rng, form, n, m):
    nL, nR = counts(form, rng)
    return rng.standard_normal((nL, n)), rng.standard_normal((nR, m))  # both signs


def per_pair(form, left, right, mode, lags=None):
    """scipy.signal.correlate of every pair of the form, cropped to lags (d0, d1) when given."""
    outs = []
    for i, j in pairs(form, len(left), len(right)):
        full = correlate(left[i], right[j], mode)
        if lags is not None:
            m = len(right[j])
            d = np.arange(lags[0], lags[1] + 1)
            idx = d + m - 1
            ok = (idx >= 0) & (idx < len(full))
            full = np.where(ok, full[np.clip(idx, 0, len(full) - 1)], 0.0)
        outs.append(full)
    return np.stack(outs)


def run1d(xcorr, tmp_path, form, left, right, *window, normalize=None, algorithm="reference"):
    out = tmp_path / "o.npy"
    extra = ["--normalize", normalize] if normalize else []
    r = xrun(xcorr, "--dims", "1", "--algorithm", algorithm, "--form", form, save(tmp_path / "l.npy", left),
             save(tmp_path / "r.npy", right), "--out", out, *window, *extra)
    assert r.returncode == 0, r.stderr
    return np.load(out)


@pytest.mark.parametrize("n,m", LENGTHS)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mode", ["full", "valid", "same"])
def test_modes_equal_scipy_signal_correlate(xcorr, tmp_path, form, n, m, mode):
    rng = seeded_rng(("cli1d", form, n, m, mode))
    left, right = signals(rng, form, n, m)
    got = run1d(xcorr, tmp_path, form, left, right, "--mode", mode)
    want = per_pair(form, left.astype(np.float32).astype(np.float64), right.astype(np.float32).astype(np.float64),
                    mode)
    assert got.dtype == np.float32 and got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,m", [(13, 5), (5, 13), (12, 6)])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("window,lags", [
    (("--max-lag", "3"), (-3, 3)),
    (("--max-lag", "40"), (-40, 40)),          # beyond the full output: zeros
    (("--max-lag=0",), (0, 0)),
    (("--lags", "-9:-2"), (-9, -2)),
    (("--lags=2:30",), (2, 30)),
    (("--lags", "50:60"), (50, 60)),           # no overlap at all: zeros
    (("--shifts", "0:0,-4:7"), (-4, 7)),       # the 2-D spelling of the same window
])
def test_lag_windows_crop_the_full_output(xcorr, tmp_path, form, n, m, window, lags):
    rng = seeded_rng(("cli1d-lags", form, n, m, window))
    left, right = signals(rng, form, n, m)
    got = run1d(xcorr, tmp_path, form, left, right, *window)
    want = per_pair(form, left.astype(np.float32).astype(np.float64), right.astype(np.float32).astype(np.float64),
                    "full", lags)
    assert got.shape == want.shape == (len(want), lags[1] - lags[0] + 1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if lags[0] > n - 1 or lags[1] < -(m - 1):
        assert not got.any()


def test_one_signal_in_gives_a_stack_of_one_out(xcorr, tmp_path):
    """A 1-D file is one signal; the output is always a stack (count, n_out), as 2-D outputs are
    always (count, h, w): out[0] is scipy's result. float64 and (1, n) inputs read the same."""
    left = np.array([1.0, -2.0, 3.0, 0.5, 4.0])
    right = np.array([2.0, -1.0, 0.25])
    want = correlate(left, right)
    # by hand, C(d) = sum_t left[t + d] * right[t] for d = -2..4: C(-1) = 1*-1 + -2*0.25, C(0) = 2 + 2 + 0.75
    np.testing.assert_allclose(want, [0.25, -1.5, 4.75, -6.875, 6.5, -3.0, 8.0])
    for l, r in ((left, right), (left[None], right), (left.astype(np.float32), right[None])):
        got = run1d(xcorr, tmp_path, "one-to-one", l, r)
        assert got.shape == (1, 7)
        np.testing.assert_allclose(got[0], want, rtol=1e-6)
    # lag 0 of the valid window is the dot product of the overlap, lag d reads left[t + d]
    got = run1d(xcorr, tmp_path, "one-to-one", left, right, "--mode", "valid")
    np.testing.assert_allclose(got[0], [left[d:d + 3] @ right for d in range(3)], rtol=1e-6)


def test_same_follows_scipy_signal_correlate_for_an_even_right(xcorr, tmp_path):
    """scipy.signal.correlate's 'same' starts at lag -(m // 2): for an even right one lag below the
    2-D 'same' (correlate2d's, lag -((m - 1) // 2)). Signals take scipy.signal.correlate's."""
    left = np.arange(1.0, 10.0)           # n = 9
    right = np.array([1.0, 0.0, 0.0, 0.0])  # m = 4: C(d) = left[d]
    got = run1d(xcorr, tmp_path, "one-to-one", left, right, "--mode", "same")[0]
    np.testing.assert_array_equal(got, [0, 0, 1, 2, 3, 4, 5, 6, 7])  # lags -2..6
    np.testing.assert_array_equal(got, correlate(left, right, "same"))
    r = run([xcorr, "explain", "--dims", "1", "--form", "one-to-one", "--left", "9", "--right", "4",
             "--mode", "same", "--gpu", "none"])
    assert r.returncode == 0, r.stderr
    assert "problem: one-to-one 1x[1x9] * 1x[1x4] shifts 0:0,-2:6\n" in r.stdout


@pytest.mark.parametrize("normalize", ["zncc", "zero-lag"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("window,rect", [((), None), (("--mode", "valid"), "valid"), (("--max-lag", "4"), (-4, 4)),
                                         (("--lags", "-20:3"), (-20, 3))])
def test_normalized_equal_the_oracle_with_h_1(xcorr, tmp_path, normalize, form, window, rect):
    rng = seeded_rng(("cli1d-norm", normalize, form, window))
    n, m = 17, 7
    nL, nR = counts(form, rng)
    if normalize == "zncc":  # both signs
        left, right = rng.standard_normal((nL, n)), rng.standard_normal((nR, m))
    else:  # zero-lag needs C(0) away from 0
        left, right = rng.random((nL, n)), rng.random((nR, m))
    left, right = left.astype(np.float32), right.astype(np.float32)
    got = run1d(xcorr, tmp_path, form, left, right, *window, normalize=normalize)
    if rect == "valid":
        rect = (0, n - m)
    want = normalized(normalize, form, left[:, None, :], right[:, None, :],
                      None if rect is None else (0, 0) + tuple(rect))[:, 0, :]
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-5
    assert np.abs(want).max() > 0.3  # real values, not a field of zeros


def test_validate_works_on_signals(xcorr, tmp_path):
    rng = seeded_rng("cli1d-validate")
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--dims", "1", "--algorithm", "reference", "--form", "one-to-many",
             save(tmp_path / "l.npy", rng.standard_normal(31)), save(tmp_path / "r.npy", rng.standard_normal((3, 8))),
             "--out", out, "--validate", "--max-lag", "5")
    assert r.returncode == 0 and "ok" in r.stdout, (r.stdout, r.stderr)
    assert np.load(out).shape == (3, 11)


def test_explain_takes_signal_lengths(xcorr):
    r = run([xcorr, "explain", "--dims", "1", "--form", "n-to-m", "--left", "4:1000", "--right", "3:65",
             "--max-lag", "20", "--gpu", "none", "--json"])
    assert r.returncode == 0, r.stderr
    e = json.loads(r.stdout)
    assert e["problem"] == "n-to-m 4x[1x1000] * 3x[1x65] shifts 0:0,-20:20"
    assert e["candidates"] and e["candidates"][0]["algorithm"] and e["candidates"][0]["reason"]


# --- bad input: exit 2, one line, nothing written ----------------------------------------------

@pytest.fixture
def files(tmp_path):
    rng = seeded_rng(11)
    return {
        "sig": save(tmp_path / "sig.npy", rng.standard_normal(9).astype(np.float32)),
        "short": save(tmp_path / "short.npy", rng.standard_normal(4).astype(np.float32)),
        "stack3": save(tmp_path / "stack3.npy", rng.standard_normal((3, 9)).astype(np.float32)),
        "stack2": save(tmp_path / "stack2.npy", rng.standard_normal((2, 4)).astype(np.float32)),
        "cube": save(tmp_path / "cube.npy", rng.standard_normal((2, 1, 9)).astype(np.float32)),
        "scalar": save(tmp_path / "scalar.npy", np.float32(3)),
        "empty": save(tmp_path / "empty.npy", np.zeros(0, np.float32)),
        "ints": save(tmp_path / "ints.npy", np.arange(9, dtype=np.int32)),
    }


BAD = [  # (dims and window args, left, right, form, needles)
    (["--dims", "1"], "cube", "short", "one-to-one", ["cube.npy", "wrong rank 3", "--dims 1", "(count, n)"]),
    (["--dims", "1"], "scalar", "short", "one-to-one", ["scalar.npy", "wrong rank 0"]),
    (["--dims", "1"], "empty", "short", "one-to-one", ["empty.npy", "empty"]),
    (["--dims", "1"], "ints", "short", "one-to-one", ["ints.npy", "dtype"]),
    ([], "sig", "short", "one-to-one", ["sig.npy", "wrong rank 1", "give --dims 1"]),
    (["--dims", "3"], "sig", "short", "one-to-one", ["--dims takes 1", "'3'"]),
    (["--dims"], "sig", "short", "one-to-one", ["--dims needs a value"]),
    (["--dims", "1"], "stack3", "short", "one-to-one", ["one-to-one"]),          # 3 lefts for one-to-one
    (["--dims", "1"], "stack3", "stack2", "n-to-mn", ["multiple"]),              # 2 rights for 3 lefts
    (["--dims", "1"], "stack3", "short", "one-to-many", ["one left"]),
    (["--max-lag", "3"], "sig", "short", "one-to-one", ["--max-lag", "--dims 1"]),
    (["--lags", "0:3"], "sig", "short", "one-to-one", ["--lags", "--dims 1"]),
    (["--dims", "1", "--max-shift", "3"], "sig", "short", "one-to-one", ["--max-shift", "--max-lag"]),
    (["--dims", "1", "--shifts", "-1:1,0:3"], "sig", "short", "one-to-one", ["0:0", "--lags"]),
    (["--dims", "1", "--max-lag", "-1"], "sig", "short", "one-to-one", ["--max-lag S", "'-1'"]),
    (["--dims", "1", "--max-lag", "2x"], "sig", "short", "one-to-one", ["--max-lag S", "'2x'"]),
    (["--dims", "1", "--max-lag", "1073741824"], "sig", "short", "one-to-one", ["--max-lag S"]),
    (["--dims", "1", "--lags", "5:2"], "sig", "short", "one-to-one", ["--lags 5:2", "empty"]),
    (["--dims", "1", "--lags", "5"], "sig", "short", "one-to-one", ["--lags takes D0:D1", "'5'"]),
    (["--dims", "1", "--lags", "a:2"], "sig", "short", "one-to-one", ["--lags D0:D1", "'a'"]),
    (["--dims", "1", "--lags", "0:3", "--max-lag", "2"], "sig", "short", "one-to-one", ["both choose the window"]),
    (["--dims", "1", "--mode", "same", "--lags", "0:3"], "sig", "short", "one-to-one", ["both choose the window"]),
    (["--dims", "1", "--mode", "middle"], "sig", "short", "one-to-one", ["--mode takes full, valid or same"]),
]


@pytest.mark.parametrize("args,left,right,form,needles", BAD, ids=[f"{i}" for i in range(len(BAD))])
def test_bad_input_is_one_line_and_exit_2(xcorr, tmp_path, files, args, left, right, form, needles):
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", form, files[left], files[right], "--out", out, *args)
    one_line_error(r, 2, *needles)
    assert not out.exists()


@pytest.mark.parametrize("args,needle", [
    (["--max-lag", "2"], "split-row does not compute the max-lag 2 window (lags -2:2) of this problem, only: full"),
    (["--lags", "-3:4"], "split-row does not compute the lags -3:4 window of this problem, only: full"),
    (["--mode", "valid"], "split-row does not compute the valid window (lags 0:5) of this problem, only: full"),
])
def test_a_refused_lag_window_is_named_in_lags(xcorr, registry, tmp_path, files, args, needle):
    """A window a variant does not compute, asked for in signals' terms, is refused in them (it was
    "the max-shift 0,2 window (shifts 0:0,-2:2)"), before any GPU is needed; a matrix's in its own."""
    require_variant(registry, "split-row")  # a subset build (-Dvariants=01,50) lacks it
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "split-row", "--form", "one-to-one", "--dims", "1", files["sig"], files["short"],
             "--out", out, *args)
    one_line_error(r, 2, needle)
    assert not out.exists()
    square = save(tmp_path / "sq.npy", np.ones((5, 6), np.float32))
    one_line_error(xrun(xcorr, "--algorithm", "split-row", "--form", "one-to-one", square, square, "--out", out,
                        "--max-shift", "2"), 2, "the max-shift 2,2 window (shifts -2:2,-2:2) of this problem")


@pytest.mark.parametrize("args,needles", [
    (["--left", "9x3", "--right", "4"], ["--left takes [N:]n", "--dims 1"]),
    (["--left", "0", "--right", "4"], ["--left length"]),
    (["--left", "2:", "--right", "4"], ["--left length"]),
    (["--left", "9"], ["missing --left or --right ([N:]n)"]),
    (["--left", "9", "--right", "4", "--max-shift", "2"], ["--max-lag"]),
])
def test_explain_bad_signal_sizes(xcorr, args, needles):
    r = run([xcorr, "explain", "--dims", "1", "--form", "one-to-one", "--gpu", "none", *args])
    one_line_error(r, 2, *needles)


def test_explain_lag_windows_need_dims_1(xcorr):
    r = run([xcorr, "explain", "--form", "one-to-one", "--left", "9x9", "--right", "4x4", "--lags", "0:2"])
    one_line_error(r, 2, "--lags", "--dims 1")


# --- GPU (skipped without one, with the reason) -------------------------------------------------

# One test per variant, so that pytest -n spreads their few hundred CLI runs.
@pytest.mark.parametrize("name", ["auto"] + fixture_variant_names())
def test_every_variant_and_auto_run_signals_on_the_gpu(xcorr, tmp_path, gpu, registry, name):
    """`xcorr run --dims 1 --validate` for auto and each variant on each form it takes (odd unequal
    lengths, the full window and a lag window): the output equals scipy.signal.correlate per pair
    within the variant's bound; a variant's refusal (exit 2, one line) is allowed, a failure is not,
    and auto runs every form and window."""
    if name != "auto":
        require_variant(registry, name)
    v = None if name == "auto" else next(v for v in registry if v["name"] == name)
    forms = FORMS if v is None else v["forms"]
    tol = 1e-5 if v is None else v["tolerance"]
    precision = [] if v is None else precision_args(v)
    rng = seeded_rng(("cli1d-gpu", name))
    refused, ran = [], 0
    for form in forms:
        left, right = signals(rng, form, 1001, 45)
        left, right = left.astype(np.float32), right.astype(np.float32)
        for window, lags in (((), None), (("--lags", "-30:12"), (-30, 12))):
            out = tmp_path / "o.npy"
            r = xrun(xcorr, "--dims", "1", "--algorithm", name, "--form", form, save(tmp_path / "l.npy", left),
                     save(tmp_path / "r.npy", right), "--out", out, "--validate", *window, *precision)
            if r.returncode == 2 and v is not None:
                one_line_error(r, 2)
                refused.append(f"{name} {form} {window}: {r.stderr.strip()}")
                continue
            assert r.returncode == 0, (name, form, window, r.stdout, r.stderr)
            want = per_pair(form, left.astype(np.float64), right.astype(np.float64), "full", lags)
            got = np.load(out)
            assert got.shape == want.shape
            assert np.linalg.norm(got - want) / np.linalg.norm(want) <= max(tol, 1e-5), (name, form, window)
            ran += 1
    if v is None:
        assert ran == 2 * len(FORMS), refused
    elif not ran:  # a variant that refused every case was validated on none: say so, never pass
        pytest.skip(f"{name} refused every signal case here ({len(refused)}): {refused[0]}")


def test_tiled_kernels_take_outputs_of_more_than_65535_shift_tiles(xcorr, tmp_path, gpu, registry):
    """The shared-memory tiled kernels (shift tiles of 32 columns, algorithms/common/shift_tiles_launch.cuh)
    on a 1-D output of 2.2 M lags, i.e. more than 65535 tiles along x (seed 004's case, refused when
    each tile was packed as ty << 16 | tx): every variant runs it and matches scipy per pair."""
    rng = seeded_rng("cli1d-long-tiles")
    left = rng.standard_normal((1, 2_200_001)).astype(np.float32)
    right = rng.standard_normal((3, 256)).astype(np.float32)
    want = {mode: np.stack([correlate(left[0].astype(np.float64), r.astype(np.float64), mode, method="fft")
                            for r in right]) for mode in ("valid", "full")}
    names = ["multi-matrix-tiled", "tensor-tiled", "tensor-tiled-tf32", "tensor-presplit", "tensor-rowpair",
             "tensor-wgmma"]
    ran = 0
    for v in registry:
        if v["name"] not in names or "one-to-many" not in v["forms"]:
            continue
        out = tmp_path / "o.npy"
        mode = "valid" if "valid" in v["windows"] else "full"  # multi-matrix-tiled computes the full output only
        r = xrun(xcorr, "--dims", "1", "--algorithm", v["name"], "--form", "one-to-many",
                 save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right), "--out", out, "--mode", mode,
                 *precision_args(v))
        if r.returncode == 2 and "compute capability" in r.stderr:  # tensor-wgmma off sm_90
            continue
        assert r.returncode == 0, (v["name"], r.stderr)
        got = np.load(out)
        assert got.shape == want[mode].shape, (v["name"], got.shape)
        assert np.linalg.norm(got - want[mode]) / np.linalg.norm(want[mode]) <= max(v["tolerance"], 1e-5), v["name"]
        ran += 1
    assert ran > 0
