"""The float64 CPU reference (`xcorr run --algorithm reference`) against scipy.signal.correlate2d,
on random odd and unequal sizes, for all four forms. Runs everywhere: no GPU needed."""
import numpy as np
import pytest

from conftest import run, save, seeded_rng
from xcorr_np import FORMS, correlate, counts, rel_error

SHAPES = [(1, 1, 1, 1), (1, 7, 1, 3), (5, 1, 2, 1), (3, 5, 7, 2), (9, 13, 4, 11), (17, 16, 16, 17), (23, 31, 19, 7)]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%d*%dx%d" % s)
def test_reference_matches_scipy(xcorr, tmp_path, form, shape):
    rng = seeded_rng((form, shape))
    hL, wL, hR, wR = shape
    nL, nR = counts(form, rng)
    left = rng.random((nL, hL, wL), dtype=np.float32)
    right = rng.standard_normal((nR, hR, wR)).astype(np.float32)  # signed values too
    out = tmp_path / "out.npy"
    r = run([xcorr, "run", "--algorithm", "reference", "--form", form,
             save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right), "--out", str(out)])
    assert r.returncode == 0, r.stderr
    got = np.load(out)
    expected = correlate(form, left.astype(np.float64), right.astype(np.float64))
    assert got.dtype == np.float32
    assert got.shape == expected.shape == (len(expected), hL + hR - 1, wL + wR - 1)
    # float64 sums rounded once to float32: agreement to float32 precision.
    assert rel_error(got, expected) < 1e-7
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * np.abs(expected).max())


def test_shift_convention(xcorr, tmp_path):
    """A single 1 in L at (2, 3) and in R at (0, 0): the peak sits at shift (dy, dx) = (2, 3),
    i.e. at output (2 + hR - 1, 3 + wR - 1), as CONVENTIONS.md defines."""
    left = np.zeros((5, 6), np.float32)
    left[2, 3] = 1
    right = np.zeros((3, 4), np.float32)
    right[0, 0] = 1
    out = tmp_path / "o.npy"
    r = run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one",
             save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right), "--out", str(out)])
    assert r.returncode == 0, r.stderr
    got = np.load(out)[0]
    assert got.shape == (7, 9)
    assert np.argwhere(got == 1).tolist() == [[2 + 2, 3 + 3]]
    assert got.sum() == 1
