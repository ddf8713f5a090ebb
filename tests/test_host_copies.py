"""Host (NumPy) arrays of one-GPU calls beyond the bounce threshold (lib/batch.cpp copy_to_device /
copy_to_host: pageable arrays of 8 MB or more travel through two pinned 16 MB parts, the host's side
copied by several threads): the answers equal the float64 reference and the planted template is
found, whether the output is a fresh array, a poisoned pageable out= or a page-locked one, and a
maximum over the rights continued through out= (its maps uploaded the same way) equals one call.
The sizes are odd, so that no array is a whole number of parts. GPU only (CI skips with the reason);
the CPU tests of the same calls' arguments are in test_python_package.py."""
import os

import numpy as np
import pytest
from conftest import seeded_rng

try:
    import xcorr
    from xcorr import _api
except ImportError as e:
    if os.environ.get("XCORR_NO_PYTHON_PACKAGE"):
        pytest.skip(f"the package xcorr is not installed (XCORR_NO_PYTHON_PACKAGE): {e}", allow_module_level=True)
    raise

BOUNCE_BYTES = 8 << 20  # lib/batch.cpp: 2 * kBounceFrom floats; smaller arrays are copied straight
PART_BYTES = 16 << 20  # kOneCopyPart floats


def planted(rng, shape, template, at, offset=0.0):
    """A field of both signs around `offset` with `template` (scaled up) planted at `at`."""
    left = (rng.random(shape, dtype=np.float32) - 0.5 + offset).astype(np.float32)
    y, x = at
    left[y:y + template.shape[0], x:x + template.shape[1]] += 4 * template
    return left


def close(got, want, rel=2e-5):
    scale = float(np.max(np.abs(want)))
    np.testing.assert_allclose(got, want, rtol=0, atol=rel * scale)


def test_gpu_a_large_map_through_the_parts_equals_the_reference(gpu):
    rng = seeded_rng("host-copies-map")
    right = rng.random((5, 7), dtype=np.float32) - 0.5
    left = planted(rng, (2301, 1903), right, (1234, 777))
    out_shape = (2305, 1909)
    assert left.nbytes > BOUNCE_BYTES and np.prod(out_shape) * 4 > PART_BYTES
    assert left.nbytes % PART_BYTES and (np.prod(out_shape) * 4) % PART_BYTES
    want = xcorr.correlate2d(left, right, algorithm="reference")
    got = xcorr.correlate2d(left, right)  # a fresh output: its first touch in the copy's threads
    assert got.shape == out_shape and np.isfinite(got).all()
    close(got, want)
    # the planted copy: full-window position (y + h - 1, x + w - 1) of the template's top left
    assert np.unravel_index(np.argmax(got), got.shape) == (1234 + 4, 777 + 6)
    poisoned = np.full(out_shape, np.nan, np.float32)  # pageable, touched, poisoned
    assert xcorr.correlate2d(left, right, out=poisoned) is poisoned
    np.testing.assert_array_equal(poisoned, got)
    locked = _api._page_locked(out_shape, np.float32)  # page-locked: downloaded straight
    locked[...] = np.nan
    xcorr.correlate2d(left, right, out=locked)
    np.testing.assert_array_equal(locked, got)


@pytest.mark.parametrize("devices", [None, [0]])
def test_gpu_large_running_maps_through_the_parts_equal_the_reference(gpu, devices):
    """max_over_rights with stats on a 1601 x 1397 image: value and index 8.9 MB, the sums 17.9 MB
    each; continued with out= (the maps uploaded through the parts) it equals one call."""
    rng = seeded_rng(("host-copies-max", str(devices)))
    rights = rng.random((5, 3, 5), dtype=np.float32) - 0.5
    left = planted(rng, (1601, 1397), rights[3], (901, 1203), offset=0.25)
    assert left.nbytes > BOUNCE_BYTES and left.size * 8 > PART_BYTES
    kw = dict(mode="same", stats=True)
    want = xcorr.max_over_rights(left, rights, algorithm="reference", **kw)
    got = xcorr.max_over_rights(left, rights, devices=devices, **kw)
    close(got.value, want.value)
    # the planted right, found where it was planted ("same": at the template's centre)
    best = np.unravel_index(np.argmax(got.value), got.value.shape)
    assert best == (901 + 1, 1203 + 2) and got.index[best] == 3 and want.index[best] == 3
    agree = np.isclose(got.value, want.value, rtol=0, atol=1e-6 * float(np.max(np.abs(want.value))))
    assert np.mean(got.index[agree] == want.index[agree]) > 0.999  # near-ties may differ in float32
    close(got.sum, want.sum, 1e-5)
    close(got.sumsq, want.sumsq, 1e-5)
    first = xcorr.max_over_rights(left, rights[:2], devices=devices, **kw)
    again = xcorr.max_over_rights(left, rights[2:], devices=devices, out=first, first_index=2, **kw)
    assert again is first
    np.testing.assert_array_equal(again.value, got.value)
    np.testing.assert_array_equal(again.index, got.index)
    close(again.sum, got.sum, 1e-9)
    close(again.sumsq, got.sumsq, 1e-9)
