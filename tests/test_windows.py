"""Output windows (CONVENTIONS.md, "Output windows") on the CPU: the reference through
`xcorr run --algorithm reference` with --mode valid/same against scipy.signal.correlate2d, and
--max-shift/--shifts against the full output cropped with zero extension; every bad window is
refused (exit 2, one line); a GPU variant asked for a window it does not declare is refused
before the GPU is needed. The GPU reference's windows are checked by xcorr_validate
(test_validate.py)."""
import numpy as np
import pytest

from conftest import one_line_error, run, save, seeded_rng, xrun
from xcorr_np import FORMS, correlate, counts, crop, rel_error



def signed_stacks(rng, form, shape):
    hL, wL, hR, wR = shape
    nL, nR = counts(form, rng)
    return (rng.standard_normal((nL, hL, wL)).astype(np.float32),
            rng.standard_normal((nR, hR, wR)).astype(np.float32))


def reference(xcorr, tmp_path, form, left, right, *window):
    """The reference's float32 output for a window (none: full), validated against its own sums."""
    out = tmp_path / "o.npy"
    out.unlink(missing_ok=True)
    r = xrun(xcorr, "--algorithm", "reference", "--form", form, save(tmp_path / "l.npy", left),
             save(tmp_path / "r.npy", right), "--out", out, *window, "--validate")
    assert r.returncode == 0, (window, r.stdout, r.stderr)
    got = np.load(out)
    assert got.dtype == np.float32
    return got


# (hL, wL, hR, wR): odd and unequal, left larger and right larger, equal in one dimension.
VALID_SHAPES = [(9, 13, 4, 11), (4, 11, 9, 13), (7, 5, 7, 2), (3, 3, 8, 3), (1, 1, 5, 6), (6, 6, 6, 6)]
# same: even and odd sizes on both sides, the right larger than the left too.
SAME_SHAPES = [(8, 6, 4, 2), (7, 9, 4, 6), (6, 8, 5, 3), (4, 6, 9, 7), (3, 5, 8, 10), (5, 4, 6, 9), (1, 1, 2, 2)]
SHAPE_ID = lambda s: "%dx%d*%dx%d" % s  # noqa: E731


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mode,shape", [("valid", s) for s in VALID_SHAPES] + [("same", s) for s in SAME_SHAPES],
                         ids=lambda x: SHAPE_ID(x) if isinstance(x, tuple) else x)
def test_modes_match_scipy(xcorr, tmp_path, form, mode, shape):
    rng = seeded_rng((form, mode, shape))
    left, right = signed_stacks(rng, form, shape)
    got = reference(xcorr, tmp_path, form, left, right, "--mode", mode)
    want = correlate(form, left.astype(np.float64), right.astype(np.float64), mode)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert rel_error(got, want) < 1e-7
    # Every element is the full output's at its shift: a window offset by one shift fails here
    # even where neighbouring values are close.
    full = reference(xcorr, tmp_path, form, left, right)
    hL, wL, hR, wR = shape
    if mode == "same":
        dy0, dx0 = -((hR - 1) // 2), -((wR - 1) // 2)  # CONVENTIONS.md: scipy's centring
        window = (dy0, dy0 + hL - 1, dx0, dx0 + wL - 1)
    else:
        window = (min(0, hL - hR), max(0, hL - hR), min(0, wL - wR), max(0, wL - wR))
    np.testing.assert_array_equal(got, crop(full, hR, wR, *window))


def test_mode_full_is_the_default(xcorr, tmp_path):
    rng = seeded_rng(11)
    left, right = signed_stacks(rng, "n-to-m", (5, 7, 3, 4))
    np.testing.assert_array_equal(reference(xcorr, tmp_path, "n-to-m", left, right, "--mode", "full"),
                                  reference(xcorr, tmp_path, "n-to-m", left, right))


# (hL, wL, hR, wR), window option, the rectangle (dy0, dy1, dx0, dx1) it names.
CROPS = [
    ((9, 7, 5, 6), ["--max-shift", "2"], (-2, 2, -2, 2)),  # inside the full range
    ((9, 7, 5, 6), ["--max-shift", "1,9"], (-1, 1, -9, 9)),  # dx partly beyond on both sides
    ((6, 5, 8, 3), ["--max-shift", "20,0"], (-20, 20, 0, 0)),  # beyond every edge of dy
    ((9, 7, 5, 6), ["--shifts", "-7:2,4:9"], (-7, 2, 4, 9)),  # partly beyond: rows before, columns after
    ((9, 7, 5, 6), ["--shifts=9:11,-9:-6"], (9, 11, -9, -6)),  # wholly beyond: all 0
    ((9, 7, 5, 6), ["--shifts", "0:0,0:0"], (0, 0, 0, 0)),  # the single shift (0, 0)
    ((4, 3, 7, 8), ["--shifts", "-6:3,-7:2"], (-6, 3, -7, 2)),  # exactly the full range
]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("shape,option,window", CROPS, ids=lambda x: " ".join(x) if isinstance(x, list) else None)
def test_shift_windows_crop_the_full_output(xcorr, tmp_path, form, shape, option, window):
    rng = seeded_rng((form, shape, option))
    left, right = signed_stacks(rng, form, shape)
    got = reference(xcorr, tmp_path, form, left, right, *option)
    full = reference(xcorr, tmp_path, form, left, right)
    want = crop(full, shape[2], shape[3], *window)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    # And against scipy, independently of the tool's full output.
    scipy_full = correlate(form, left.astype(np.float64), right.astype(np.float64))
    np.testing.assert_allclose(got, crop(scipy_full, shape[2], shape[3], *window), rtol=1e-6, atol=1e-5)


def test_one_window_in_four_spellings(xcorr, tmp_path):
    """Equal sizes: valid is the single shift (0, 0), which --max-shift 0 and --shifts 0:0,0:0 name too."""
    rng = seeded_rng(5)
    left, right = signed_stacks(rng, "one-to-many", (6, 5, 6, 5))
    outs = [reference(xcorr, tmp_path, "one-to-many", left, right, *opt)
            for opt in (["--mode", "valid"], ["--max-shift", "0"], ["--max-shift", "0,0"], ["--shifts", "0:0,0:0"])]
    want = np.array([(left[0].astype(np.float64) * r).sum() for r in right.astype(np.float64)]).reshape(-1, 1, 1)
    for o in outs:
        np.testing.assert_array_equal(o, outs[0])
    np.testing.assert_allclose(outs[0], want, rtol=1e-6)


SHIFTS_NUMBER = "--shifts DY0:DY1,DX0:DX1: not an integer from -1073741823 to 1073741823"
MAX_SHIFT_NUMBER = "--max-shift SY[,SX]: not an integer from 0 to 1073741823"


@pytest.mark.parametrize("args,needle", [
    (["--shifts", "3:1,0:0"], "empty window 3:1,0:0"),
    (["--shifts", "0:0,2:1"], "empty window 0:0,2:1"),
    (["--shifts", "1:2"], "--shifts takes DY0:DY1,DX0:DX1"),
    (["--shifts", "1:2,3"], "--shifts takes DY0:DY1,DX0:DX1"),
    (["--shifts", ""], "--shifts takes DY0:DY1,DX0:DX1"),
    (["--shifts", "1:2,3:4,5:6"], SHIFTS_NUMBER),
    (["--shifts", "a:1,0:0"], SHIFTS_NUMBER),
    (["--shifts", "+1:2,0:0"], SHIFTS_NUMBER),
    (["--shifts", " 1:2,0:0"], SHIFTS_NUMBER),
    (["--shifts", "1.0:2,0:0"], SHIFTS_NUMBER),
    (["--shifts", "0:0,0:1073741824"], SHIFTS_NUMBER),
    (["--shifts", "0:0,0:99999999999999999999"], SHIFTS_NUMBER),
    (["--shifts", "-1073741823:1073741823,0:9"], "too large"),
    (["--max-shift", "-1"], MAX_SHIFT_NUMBER),
    (["--max-shift", "1,-2"], MAX_SHIFT_NUMBER),
    (["--max-shift", "1,"], MAX_SHIFT_NUMBER),
    (["--max-shift", "1,2,3"], MAX_SHIFT_NUMBER),
    (["--max-shift", "x"], MAX_SHIFT_NUMBER),
    (["--max-shift", ""], MAX_SHIFT_NUMBER),
    (["--mode", "bogus"], "--mode takes full, valid or same"),
    (["--mode", "Valid"], "--mode takes full, valid or same"),
    (["--mode"], "needs a value"),
    (["--mode", "same", "--shifts", "0:0,0:0"], "give one of"),
    (["--max-shift", "1", "--max-shift", "2"], "give one of"),
])
def test_bad_window(xcorr, tmp_path, args, needle):
    rng = seeded_rng(2)
    left, right = signed_stacks(rng, "one-to-one", (5, 6, 3, 4))
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", save(tmp_path / "l.npy", left),
             save(tmp_path / "r.npy", right), "--out", out, *args)
    one_line_error(r, 2, needle)
    assert not out.exists()


@pytest.mark.parametrize("shape", [(5, 6, 3, 7), (3, 7, 5, 6)], ids=SHAPE_ID)
def test_valid_needs_one_matrix_inside_the_other(xcorr, tmp_path, shape):
    rng = seeded_rng(shape)
    left, right = signed_stacks(rng, "one-to-one", shape)
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", save(tmp_path / "l.npy", left),
             save(tmp_path / "r.npy", right), "--out", out, "--mode", "valid")
    one_line_error(r, 2, "no valid window", "neither matrix")
    assert not out.exists()


def test_list_shows_every_variants_windows(xcorr, registry):
    kinds = {"full", "valid", "same", "max-shift", "shifts"}
    text = run([xcorr, "list"]).stdout
    for v in registry:
        assert "full" in v["windows"] and set(v["windows"]) <= kinds, v
        assert f"windows: {' '.join(v['windows'])}" in text


def test_help_documents_the_window_options(xcorr):
    r = run([xcorr, "run", "--help"])
    assert r.returncode == 0
    for option in ["--mode full|valid|same", "--max-shift SY[,SX]", "--shifts DY0:DY1,DX0:DX1"]:
        assert option in r.stdout, option


def full_only_variant(registry):
    names = [v["name"] for v in registry if v["windows"] == ["full"]]
    if not names:
        pytest.skip("every variant in this build computes some window besides full")
    return names[0]


@pytest.mark.parametrize("option", [["--mode", "same"], ["--mode", "valid"], ["--max-shift", "1"],
                                    ["--shifts", "0:2,0:3"]])
def test_variant_refuses_a_window_it_does_not_compute(xcorr, registry, tmp_path, option):
    """Refused with exit 2 before the GPU is needed (so also here without one), nothing written."""
    name = full_only_variant(registry)
    rng = seeded_rng(option)
    left, right = signed_stacks(rng, "one-to-one", (6, 7, 3, 4))
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", name, "--form", "one-to-one", save(tmp_path / "l.npy", left),
             save(tmp_path / "r.npy", right), "--out", out, *option)
    one_line_error(r, 2, f"{name} does not compute the", "only: full")
    assert not out.exists()


@pytest.mark.gpu  # its GPU branch runs only where --gpu-only selects it (the device suite)
def test_variant_takes_a_window_that_is_its_full_output(xcorr, registry, gpu_info, tmp_path):
    """Support is decided on the rectangle, not the name: with a 1 x 1 right the valid window is the
    full output, which a full-only variant computes (exit 0 with a GPU, exit 3 without: past the
    window check either way)."""
    name = full_only_variant(registry)
    rng = seeded_rng(9)
    left, right = signed_stacks(rng, "one-to-one", (6, 7, 1, 1))
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", name, "--form", "one-to-one", save(tmp_path / "l.npy", left),
             save(tmp_path / "r.npy", right), "--out", out, "--mode", "valid", "--validate")
    if gpu_info[0] is None:
        one_line_error(r, 3, "no gpu")
    else:
        assert r.returncode == 0, r.stderr
        np.testing.assert_allclose(np.load(out), left * right[0, 0, 0], rtol=1e-6)


def test_variant_refuses_a_shape_it_is_not_built_for(xcorr, registry, tmp_path):
    """Variant::shape_refusal, before the GPU is needed: a small-window kernel asked for more shifts
    than its max_shifts, a signals-only kernel asked for a matrix; exit 2, nothing written. The
    same limits reach `xcorr list --json`, from which the tests and the experiments read them."""
    limited = [v for v in registry if v.get("max_shifts")]
    signals = [v for v in registry if v.get("signals_only")]
    bounded = [v for v in registry if v.get("max_transform")]
    assert all(v["max_shifts"] >= 9 for v in limited)  # a window of ±1 at least
    if not limited and not signals and not bounded:
        pytest.skip("no variant in this build declares a max_shifts, signals_only or max_transform limit")
    rng = seeded_rng("shape-refusal")
    left, right = signed_stacks(rng, "one-to-one", (6, 70, 3, 40))
    out = tmp_path / "o.npy"
    l, r_ = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
    for v in limited:
        side = int(v["max_shifts"] ** 0.5) // 2 + 1  # (2·side + 1)² > max_shifts
        r = xrun(xcorr, "--algorithm", v["name"], "--form", "one-to-one", l, r_, "--out", out,
                 "--max-shift", str(side))
        one_line_error(r, 2, f"has {(2 * side + 1) ** 2} shifts per pair", f"at most {v['max_shifts']}")
        assert not out.exists()
    for v in signals:
        r = xrun(xcorr, "--algorithm", v["name"], "--form", "one-to-one", l, r_, "--out", out)
        one_line_error(r, 2, "one-dimensional signals only")
        assert not out.exists()
    for v in bounded:
        # m / 2 + 1 rows and 3 columns each: the full output needs m + 1 points down, one more than
        # the limit m; the valid window of the same pair needs only 1 (and is not refused here).
        m = v["max_transform"]
        left, right = signed_stacks(rng, "one-to-one", (m // 2 + 1, 3, m // 2 + 1, 3))
        l2, r2 = save(tmp_path / "l2.npy", left), save(tmp_path / "r2.npy", right)
        r = xrun(xcorr, "--algorithm", v["name"], "--form", "one-to-one", l2, r2, "--out", out)
        one_line_error(r, 2, f"needs a transform of {m + 1} points", f"at most {m}")
        assert not out.exists()
