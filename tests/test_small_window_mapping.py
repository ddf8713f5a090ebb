"""small-window's mapping of work to threads (algorithms/27_small_window.cu), emulated on the CPU:
the same tiles, staged regions (zero outside L and past R's edge), slices and groups of 256
threads (with the threads past slices x group left out), the per-slice element order and the
ordered reductions, in NumPy, against the float64 definition. It checks the index arithmetic of
the kernel's design (every product of every shift counted exactly once), not the CUDA code itself,
which the GPU tests and xcorr_validate check on the device."""
import numpy as np
import pytest

from conftest import seeded_rng
from xcorr_np import crop

THREADS, TR, TC = 256, 16, 128
TILE = TR * TC


def geometry(oh, ow):
    ns = oh * ow
    slices = 1 if ns >= THREADS else THREADS // ns
    return ns, slices, THREADS // slices


def emulate(L, R, rect):
    """One pair through the tile kernel and the reduce kernel."""
    hL, wL = L.shape
    hR, wR = R.shape
    dy0, dy1, dx0, dx1 = rect
    oh, ow = dy1 - dy0 + 1, dx1 - dx0 + 1
    ns, slices, group = geometry(oh, ow)
    lh, lw = TR + oh - 1, TC + ow - 1
    tiles_x = -(-wR // TC)
    tiles = -(-hR // TR) * tiles_x
    partial = np.zeros((tiles, ns), np.float32)
    e = np.arange(TILE)
    for tile in range(tiles):
        r0, c0 = (tile // tiles_x) * TR, (tile % tiles_x) * TC
        i = np.arange(lh * lw)
        gr, gc = r0 + dy0 + i // lw, c0 + dx0 + i % lw
        inside = (gr >= 0) & (gr < hL) & (gc >= 0) & (gc < wL)
        Ls = np.where(inside, L[np.clip(gr, 0, hL - 1), np.clip(gc, 0, wL - 1)], 0).astype(np.float32)
        rr, cc = r0 + e // TC, c0 + e % TC
        Rs = np.where((rr < hR) & (cc < wR), R[np.minimum(rr, hR - 1), np.minimum(cc, wR - 1)], 0).astype(np.float32)
        red = np.full((slices, ns), np.nan, np.float32)
        for t in range(THREADS):
            sl, lane = t // group, t % group
            if sl >= slices:
                continue
            for s in range(lane, ns, group):
                origin = (s // ow) * lw + s % ow
                es = np.arange(sl, TILE, slices)
                red[sl, s] = np.dot(Ls[origin + (es // TC) * lw + es % TC].astype(np.float64), Rs[es])
        assert not np.isnan(red).any(), "a (slice, shift) left unwritten"
        partial[tile] = red.sum(axis=0)
    return partial.astype(np.float64).sum(axis=0).reshape(oh, ow)


def definition(L, R, rect):
    from scipy.signal import correlate2d
    full = correlate2d(L.astype(np.float64), R.astype(np.float64))
    return crop(full, R.shape[0], R.shape[1], *rect)


@pytest.mark.parametrize("shape,rect", [
    ((40, 150, 37, 140), (-1, 1, -1, 1)),       # ±1: 9 shifts, 28 slices, 4 threads idle
    ((33, 200, 20, 130), (-3, 3, -2, 2)),       # 35 shifts: 7 slices, 11 threads idle
    ((20, 20, 20, 20), (0, 0, 0, 0)),           # one shift: 256 slices
    ((17, 260, 17, 260), (-16, 16, -16, 16)),   # ±16, 1089 shifts (the most): one slice, five passes
    ((50, 60, 9, 7), (3, 5, -40, 66)),          # a window partly beyond the full range
    ((12, 12, 5, 5), (20, 22, 0, 3)),           # wholly beyond: zeros
    ((5, 1030, 3, 200), (0, 0, -500, 523)),     # one row of 1024 shifts (a 1-D lag window)
])
def test_mapping_counts_every_product_once(shape, rect):
    hL, wL, hR, wR = shape
    rng = seeded_rng(("small-window", shape, rect))
    L = rng.uniform(-1, 1, (hL, wL)).astype(np.float32)
    R = rng.uniform(-1, 1, (hR, wR)).astype(np.float32)
    got, want = emulate(L, R, rect), definition(L, R, rect)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * max(1.0, np.abs(want).max()))


def test_slices_and_groups_cover_the_threads():
    """Every shift has a thread in every slice, and the slices fit in the block."""
    for ns in range(1, 1090):
        _, slices, group = geometry(1, ns)
        assert group >= min(ns, THREADS) and slices * group <= THREADS
        assert slices == 1 or slices * ns <= THREADS  # red[] holds slices x ns floats
