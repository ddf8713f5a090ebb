"""Each counting rule written once: the C++ (registry.cpp's transform_need, core.cpp's
overlap_total as Window::fmas, auto.cpp's work_units, Problem::out_count) and its one Python copy,
python/xcorr/_rules.py, which the build's fit (scripts/auto-tables-cpp), the suite (xcsuite.rules)
and the package's reference call. Held to the C++ here through the binding; CPU only.

The empty window: a window with no overlapping shift needs 0 transform points (fft writes its zeros
without a transform), and auto's cost model still counts one unit of work for it."""
import os
import random

import pytest
from suite_helpers import load_script
from xcorr_np import FORMS, pairs as oracle_pairs

from xcsuite import rules

try:
    from xcorr import _xcorr
except ImportError as e:  # a checkout without the package: the C++ half is skipped, the rest runs
    if not os.environ.get("XCORR_NO_PYTHON_PACKAGE"):
        raise ImportError(f"the package xcorr does not import ({e}): scripts/setup-env installs it") from e
    _xcorr = None

needs_binding = pytest.mark.skipif(_xcorr is None, reason="the package xcorr is not installed (XCORR_NO_PYTHON_PACKAGE)")


def shifts_grid(seed, count):
    rng = random.Random(seed)
    for _ in range(count):
        m, n = rng.randint(1, 12), rng.randint(1, 12)
        s0 = rng.randint(-16, 16)  # windows past the overlap included (-(n - 1)..m - 1)
        yield s0, s0 + rng.randint(0, 20), m, n


# --- the empty window, decided once --------------------------------------------------------------

def test_a_window_without_overlap_needs_no_transform_points():
    """Shifts 5..7 of a left of 3 and a right of 2 (overlap only for -1..2), and -9..-4 of the same:
    0 points (one rule for every copy, where copies had said 0 or 1); the full window m + n - 1."""
    assert rules.transform_need(5, 7, 3, 2) == 0
    assert rules.transform_need(-9, -4, 3, 2) == 0
    assert rules.transform_need(-1, 2, 3, 2) == 4  # the full window
    gen = load_script("auto-tables-cpp")
    assert gen.fft_need(5, 7, 3, 2) == 0
    key = (0, 3, 3, 2, 2, 1, 1, 5, 7, 0, 0)  # one-to-one, no overlap along y
    assert gen.work_units(key, True) == 1.0 and gen.work_units(key, False) == 1.0  # one call's unit


@needs_binding
def test_the_library_agrees_on_the_empty_window():
    assert _xcorr.transform_need(5, 7, 3, 2) == 0
    assert _xcorr.transform_need(-9, -4, 3, 2) == 0
    spec = _xcorr.spec("one-to-one", 1, 1, 3, 3, 2, 2, "shifts", "5:7,0:0", "none", "fp32", "auto", {})
    assert _xcorr.work_units(spec, True) == 1.0 and _xcorr.work_units(spec, False) == 1.0


# --- the Python copy against the C++ ---------------------------------------------------------------

@needs_binding
def test_transform_need_and_overlap_total_equal_the_cpp():
    for s0, s1, m, n in shifts_grid(103, 5000):
        assert rules.transform_need(s0, s1, m, n) == _xcorr.transform_need(s0, s1, m, n), (s0, s1, m, n)
        assert rules.overlap_total(s0, s1, m, n) == _xcorr.overlap_total(s0, s1, m, n), (s0, s1, m, n)


def test_overlap_total_is_the_sum_over_shifts():
    for s0, s1, m, n in shifts_grid(104, 5000):
        brute = sum(max(0, min(n, m - s) - max(0, -s)) for s in range(s0, s1 + 1))
        assert rules.overlap_total(s0, s1, m, n) == brute, (s0, s1, m, n)


def counts_of(form, rng):
    if form == "one-to-one":
        return 1, 1
    if form == "one-to-many":
        return 1, rng.randint(1, 5)
    n = rng.randint(1, 4)
    return (n, n * rng.randint(1, 3)) if form == "n-to-mn" else (n, rng.randint(1, 5))


@needs_binding
def test_the_builds_work_units_and_out_count_equal_the_cpp():
    """scripts/auto-tables-cpp fits auto's model before the library exists, so it keeps the one
    mirror of auto.cpp's work_units; it must count what the C++ predicts with."""
    gen = load_script("auto-tables-cpp")
    rng = random.Random(105)
    for _ in range(400):
        form = rng.choice(FORMS)
        nL, nR = counts_of(form, rng)
        hL, wL, hR, wR = (rng.randint(1, 40) for _ in range(4))
        dy0, dx0 = rng.randint(-45, 45), rng.randint(-45, 45)
        dy1, dx1 = dy0 + rng.randint(0, 30), dx0 + rng.randint(0, 30)
        spec = _xcorr.spec(form, nL, nR, hL, wL, hR, wR, "shifts", f"{dy0}:{dy1},{dx0}:{dx1}", "none", "fp32",
                           "auto", {})
        assert _xcorr.resolve(spec)[4] == rules.out_count(form, nL, nR)
        key = (gen.FORMS[form], hL, wL, hR, wR, nL, nR, dy0, dy1, dx0, dx1)
        tile = rng.choice([(1, 1), (32, 32), (16, 32)])
        for fft in (False, True):
            assert gen.work_units(key, fft, tile) == _xcorr.work_units(spec, fft, *tile), (key, fft, tile)


# --- the pairs of a form ----------------------------------------------------------------------------

def test_pairs_are_the_oracles():
    """The one rule of the forms' pairs against the tests' own (tests/xcorr_np.py, independent)."""
    rng = random.Random(106)
    for form in FORMS:
        for _ in range(20):
            nL, nR = counts_of(form, rng)
            assert rules.pairs(form, nL, nR) == oracle_pairs(form, nL, nR)
            assert rules.out_count(form, nL, nR) == len(oracle_pairs(form, nL, nR))


def test_the_copies_call_the_rules():
    """The build's generator and the suite use these functions, not copies of their own."""
    gen = load_script("auto-tables-cpp")
    for f in (gen.fft_need, gen.overlap_sum, rules.transform_need, rules.overlap_total, rules.pairs):
        assert f.__module__ == "xcorr_rules", f  # python/xcorr/_rules.py, loaded by path
    import importlib
    from xcsuite import cost, reduce_peers, spec
    assert spec.overlap_total is rules.overlap_total and cost.fft_need is rules.transform_need
    assert reduce_peers.pair_indices is rules.pairs
    for name in ("xcsuite.peers", "xcsuite.peerbench"):  # the peers' module, wherever it lives
        peers = importlib.import_module(name)
        if hasattr(peers, "pair_count"):
            assert peers.pairs is rules.pairs and peers.pair_count is rules.out_count
            break
    else:
        raise AssertionError("no xcsuite module defines the peers' pairs and pair_count")
