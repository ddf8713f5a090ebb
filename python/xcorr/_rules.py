"""The library's counting rules in Python, once: each mirrors one C++ function, and
tests/test_rules.py checks every one against that function through the binding (_xcorr).

Standard library only, and loadable by path: the build's generator of auto's tables
(scripts/auto-tables-cpp, run before the library exists) and the experiment suite (xcsuite, which
must work without the compiled package) load this file directly; the package imports it. Every other
Python copy of these rules calls these. (tests/xcorr_np.py keeps its own pairs(): it is the tests'
independent oracle of CONVENTIONS.md, which must not share code with what it checks.)

    transform_need(s0, s1, m, n)   registry.cpp's transform_need (fit_axis's need)
    overlap_total(s0, s1, m, n)    core.cpp's overlap_total (Window::fmas per dimension)
    out_count(form, nL, nR)        Problem::out_count
    pair_of(form, nL, nR, k)       PairMap's left_of(k), right_of(k) (CONVENTIONS.md's form table)
    pairs(form, nL, nR)            every output's (left, right), in output order
"""
from __future__ import annotations

FORMS = ("one-to-one", "one-to-many", "n-to-mn", "n-to-m")  # in the C++ enum's order (Form)


def transform_need(s0: int, s1: int, m: int, n: int) -> int:
    """Points of one dimension of fft's transform for the shifts s0..s1 of a left of length m and a
    right of length n (algorithms/50_fft.cu, "Windows"): the least period that holds the shifts that
    overlap without aliasing once both inputs are cropped to the parts the window reads; m + n - 1
    for the full window.

    0 where no shift of s0..s1 overlaps (one rule for every copy, where copies had said 0 or 1): such
    a window's output is all zeros, and fft writes them without making any transform (50_fft.cu:
    fy_.empty()), so it needs no points; a transform limit (Variant::max_transform) never refuses
    it, and auto's cost model counts at least one unit of work (work_units) as it does for the
    direct variants."""
    lo, hi = max(s0, 1 - n), min(s1, m - 1)
    if lo > hi:
        return 0
    l0, r0 = max(0, lo), max(0, -hi)
    ln, rn = min(m, hi + n) - l0, min(n, m - lo) - r0
    # max(ln - lo', hi' + rn) for the cropped parts' shifts lo' = lo + r0 - l0, hi' = hi + r0 - l0.
    return max(l0 + ln - r0 - lo, hi + r0 + rn - l0)


def _range_sum(lo: int, hi: int) -> int:
    """lo + (lo + 1) + ... + hi, 0 when the range is empty."""
    return (lo + hi) * (hi - lo + 1) // 2 if lo <= hi else 0


def overlap_total(s0: int, s1: int, m: int, n: int) -> int:
    """Sum over the shifts s0..s1 of one dimension's overlap length, left length m, right n:
    min(n, m - s) - max(0, -s) where positive (only shifts in [-(n - 1), m - 1] overlap). In closed
    form (linear in s on at most three pieces), so that a window of millions of shifts (a 1 x n
    signal) costs no more than a small one. Window::fmas is the product of two."""
    a, b = max(s0, 1 - n), min(s1, m - 1)
    if a > b:
        return 0
    c = min(b, m - n - 1)  # shifts a..c: min(n, m - s) = n; shifts max(a, m - n)..b: m - s
    head = n * (c - a + 1) if a <= c else 0
    lo = max(a, m - n)
    tail = m * (b - lo + 1) - _range_sum(lo, b) if lo <= b else 0
    return head + tail + _range_sum(a, min(b, -1))  # minus max(0, -s): adds the negative shifts


def out_count(form: str, nL: int, nR: int) -> int:
    """Output matrices of a call: N*M for n-to-m, else one per right (one-to-one has one)."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    return nL * nR if form == "n-to-m" else nR


def pair_of(form: str, nL: int, nR: int, k):
    """(left index, right index) of output k (CONVENTIONS.md): n-to-m left-major (k = i*M + j),
    n-to-mn left k mod N, else left 0 and right k. k may be an int or a NumPy integer array
    (then both indices are arrays of k's shape)."""
    if form == "n-to-m":
        return k // nR, k % nR
    if form == "n-to-mn":
        return k % nL, k
    if form not in FORMS:
        raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
    return k * 0, k  # one-to-one, one-to-many


def pairs(form: str, nL: int, nR: int) -> list[tuple[int, int]]:
    """Every output's (left, right), in output order."""
    return [pair_of(form, nL, nR, k) for k in range(out_count(form, nL, nR))]
