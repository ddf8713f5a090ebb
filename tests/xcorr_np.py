"""The definition of CONVENTIONS.md in NumPy/SciPy terms: the independent implementation the
C++ reference is tested against."""
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
