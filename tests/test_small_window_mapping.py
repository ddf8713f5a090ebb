"""small-window's mapping of work to threads (algorithms/27_small_window.cu), emulated on the CPU:
the same choice of shift block (SY x SX) and tile geometry (a port of geometry() and cost()), the
staged regions (zero outside L and past R's edge; the padding columns of each L row poisoned with
NaN, so that a read of an unstaged word shows), the blocks striding over the tiles, the slices
taking the segments round robin across tiles (carry), each thread's rotating window of SX L
registers per block row, the per-block sum over slices, and the reduce kernel's lane-strided sums
and xor-shuffle tree, in NumPy, against the float64 definition. It checks the index arithmetic of
the kernel's design (every product of every shift counted exactly once, no read outside the
staged data), not the CUDA code itself, which the GPU tests and xcorr_validate check on the
device."""
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import seeded_rng, source_constant
from xcorr_np import crop


SOURCE = (Path(__file__).resolve().parent.parent / "algorithms" / "27_small_window.cu").read_text()


def constant(name, **known):
    return source_constant(SOURCE, name, **known)


THREADS, WARP, SEGMENTS, MAX_SMEM, MAX_SHIFTS = 256, 32, 128, 200 * 1024, 1089
CONFIGS = [(3, 11), (1, 15), (5, 3), (15, 1)]  # (SY, SX), in kConfigs order


def cdiv(a, b):
    return -(-a // b)


def strip(sx):
    return cdiv(32, sx) * sx


def geometry(hR, wR, oh, ow, sy, sx):
    """geometry() of the kernel file: a dict, or None where the configuration does not fit."""
    S = strip(sx)
    nby, nbx = cdiv(oh, sy), cdiv(ow, sx)
    nb = nby * nbx
    if nb > THREADS:
        return None
    slices = THREADS // nb
    inv = next(i for i in range(1, 32) if (i * sy) % 32 == 1)
    nstrip = min(cdiv(wR, S), max(4, cdiv(SEGMENTS, hR)))
    tr = min(hR, max(1, cdiv(SEGMENTS, nstrip)))
    while True:
        tc = nstrip * S
        lh, lwv = tr + nby * sy - 1, tc + nbx * sx - 1
        target = tc % 32 if nb == 1 else (nbx * sx * inv) % 32
        lws = lwv + (target - lwv) % 32
        floats = max(lh * lws + tr * tc, slices * oh * ow)
        if floats * 4 <= MAX_SMEM:
            break
        if nstrip > 1 and (tc >= tr or tr == 1):
            nstrip = (nstrip + 1) // 2
        elif tr > 1:
            tr = (tr + 1) // 2
        else:
            return None
    tiles_x = cdiv(wR, tc)
    return dict(sy=sy, sx=sx, S=S, oh=oh, ow=ow, ns=oh * ow, nby=nby, nbx=nbx, nb=nb, slices=slices,
                threads=cdiv(slices * nb, WARP) * WARP, tr=tr, nstrip=nstrip, tc=tc, lh=lh, lwv=lwv, lws=lws,
                nseg=tr * nstrip, tiles_x=tiles_x, tiles=cdiv(hR, tr) * tiles_x, floats=floats)


def cost(g):
    fma, lds = g["sy"] * g["sx"], g["sy"] + 1
    return g["nb"] * max(fma / 4, lds, (fma + lds + 1) / 4) * (g["tiles"] * g["tr"] * g["tc"])


def choose(hR, wR, oh, ow):
    best = None
    for sy, sx in CONFIGS:
        g = geometry(hR, wR, oh, ow, sy, sx)
        if g is not None and (best is None or cost(g) < cost(best)):
            best = g
    return best


def emulate(L, R, rect, gx):
    """One pair through the tile kernel with gx blocks (blockIdx.x) and the reduce kernel."""
    hL, wL = L.shape
    hR, wR = R.shape
    dy0, dy1, dx0, dx1 = rect
    oh, ow = dy1 - dy0 + 1, dx1 - dx0 + 1
    g = choose(hR, wR, oh, ow)
    assert g is not None
    SY, SX, S, lws, nb, slices = g["sy"], g["sx"], g["S"], g["lws"], g["nb"], g["slices"]
    gx = min(gx, g["tiles"])
    b = np.arange(nb)
    by, bx = b // g["nbx"], b % g["nbx"]
    partial = np.zeros((gx, g["ns"]), np.float32)
    for x in range(gx):
        acc = np.zeros((slices, nb, SY, SX), np.float32)
        carry = 0
        for tile in range(x, g["tiles"], gx):
            r0, c0 = (tile // g["tiles_x"]) * g["tr"], (tile % g["tiles_x"]) * g["tc"]
            i, j = np.meshgrid(np.arange(g["lh"]), np.arange(lws), indexing="ij")
            gr, gc = r0 + dy0 + i, c0 + dx0 + j
            inside = (gr >= 0) & (gr < hL) & (gc >= 0) & (gc < wL)
            Ls = np.where(inside, L[np.clip(gr, 0, hL - 1), np.clip(gc, 0, wL - 1)], 0).astype(np.float32)
            Ls[:, g["lwv"]:] = np.nan  # row padding: never staged, never to be read
            Ls = Ls.ravel()
            i, j = np.meshgrid(np.arange(g["tr"]), np.arange(g["tc"]), indexing="ij")
            rr, cc = r0 + i, c0 + j
            Rs = np.where((rr < hR) & (cc < wR), R[np.minimum(rr, hR - 1), np.minimum(cc, wR - 1)], 0)
            Rs = Rs.astype(np.float32).ravel()
            # The slices run side by side: step k is every slice's k-th segment of the tile (slice sl
            # takes seg = first[sl] + k * slices), each thread's (slice, shift block's) own sums in
            # the kernel's order (segment, u, js), its SY x SX accumulators (iy, jj) independent.
            first = (np.arange(slices) + slices - carry) % slices
            for k in range(cdiv(g["nseg"], slices)):
                active = np.flatnonzero(first + k * slices < g["nseg"])
                seg = first[active] + k * slices
                rr, st = seg // g["nstrip"], seg % g["nstrip"]
                Lp = ((rr[:, None] + by * SY) * lws + st[:, None] * S + bx * SX)[:, :, None]  # per shift block
                Lp = Lp + np.arange(SY) * lws  # (slice, block, iy): the first word of each L register row
                Rp = rr * g["tc"] + st * S
                w = np.zeros((len(active), nb, SY, SX), np.float32)
                w[..., :SX - 1] = Ls[Lp[..., None] + np.arange(SX - 1)]
                a = acc[active]
                for u in range(S // SX):
                    for js in range(SX):
                        rv = Rs[Rp + u * SX + js][:, None, None, None]
                        w[..., (js + SX - 1) % SX] = Ls[Lp + u * SX + js + SX - 1]
                        a += w[..., (js + np.arange(SX)) % SX] * rv
                acc[active] = a
            carry = (carry + g["nseg"]) % slices
        red = np.full((slices, g["ns"]), np.nan, np.float32)
        for iy in range(SY):
            for jj in range(SX):
                y, xx = by * SY + iy, bx * SX + jj
                ok = (y < oh) & (xx < ow)
                red[:, (y * ow + xx)[ok]] = acc[:, ok, iy, jj]
        assert not np.isnan(red).any(), "a (slice, shift) left unwritten, or an unstaged word read"
        s = np.zeros(g["ns"], np.float32)
        for sl in range(slices):
            s += red[sl]
        partial[x] = s
    # The reduce kernel: 2^lg lanes per output, lane q adds x = q, q + 2^lg, ...; xor tree.
    lg = 0
    while (1 << lg) < min(gx, WARP):
        lg += 1
    tpo = 1 << lg
    lanes = np.zeros((tpo, g["ns"]), np.float32)
    for q in range(tpo):
        for x in range(q, gx, tpo):
            lanes[q] += partial[x]
    off = tpo // 2
    while off:
        lanes = lanes + lanes[np.arange(tpo) ^ off]
        off //= 2
    return lanes[0].astype(np.float64).reshape(oh, ow), g


_DEFINITIONS = {}  # the three gx of a case share its inputs (seeded by the case) and so its definition


def definition(L, R, rect):
    key = (L.shape, L.tobytes(), R.shape, R.tobytes(), rect)
    if key not in _DEFINITIONS:
        from scipy.signal import correlate2d
        full = correlate2d(L.astype(np.float64), R.astype(np.float64))
        _DEFINITIONS[key] = crop(full, R.shape[0], R.shape[1], *rect)
    return _DEFINITIONS[key].copy()


CASES = [
    ((40, 150, 37, 140), (-1, 1, -1, 1)),        # ±1: one 5 x 3 block, 256 slices, two tile rows
    ((33, 200, 20, 130), (-3, 3, -2, 2)),        # 7 x 5: four 5 x 3 blocks, 64 slices
    ((20, 20, 20, 20), (0, 0, 0, 0)),            # one shift (a 5 x 3 block)
    ((70, 300, 66, 290), (-4, 4, -4, 4)),        # ±4: three 3 x 11 blocks, 3 x 3 tiles (the carry at work)
    ((40, 280, 40, 264), (-16, 16, -16, 16)),    # ±16, 1089 shifts: 11 x 3 blocks of 3 x 11, 7 slices, 4 tiles
    ((17, 260, 17, 260), (-16, 16, -16, 16)),    # ±16 on a small R: 1 x 15 blocks (less padding of R)
    ((30, 90, 40, 70), (-8, 8, -8, 8)),          # ±8: padded blocks (18 x 22), several tiles
    ((50, 60, 9, 7), (3, 5, -40, 66)),           # a window partly beyond the full range
    ((12, 12, 5, 5), (20, 22, 0, 3)),            # wholly beyond: zeros
    ((5, 1030, 3, 200), (0, 0, -500, 523)),      # one row of 1024 shifts (a 1-D lag window)
    ((1, 3000, 1, 700), (0, 0, -30, 12)),       # 1-D signals: 1 x 15 blocks, a 1 x 2880 tile
    ((80, 9, 70, 3), (-40, 30, 0, 0)),           # tall and narrow: 15 x 1 blocks
]


@pytest.mark.parametrize("gx", [1, 3, 1000])
@pytest.mark.parametrize("shape,rect", CASES)
def test_mapping_counts_every_product_once(shape, rect, gx):
    hL, wL, hR, wR = shape
    rng = seeded_rng(("small-window", shape, rect))
    L = rng.uniform(-1, 1, (hL, wL)).astype(np.float32)
    R = rng.uniform(-1, 1, (hR, wR)).astype(np.float32)
    (got, g), want = emulate(L, R, rect, gx), definition(L, R, rect)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * max(1.0, np.abs(want).max()))


def test_constants_match_the_source():
    """Drift from kThreads, kSegments, kMaxSmem, kMaxShifts, kStrip or the kConfigs table."""
    assert (THREADS, SEGMENTS, MAX_SMEM, MAX_SHIFTS) == (constant("kThreads"), constant("kSegments"),
                                                        constant("kMaxSmem"), constant("kMaxShifts"))
    table = re.search(r"\bkConfigs\[\]\s*=\s*\{(.*?)\n\};", SOURCE, re.S).group(1)
    rows = re.findall(r"\{\s*(\d+),\s*(\d+),\s*kStrip<(\d+)>,\s*small_window_tiles_kernel<(\d+),\s*(\d+)>\s*\}", table)
    assert len(rows) == table.count("{"), table  # every row parsed
    assert all(sy == ky and sx == st == kx for sy, sx, st, ky, kx in rows), rows
    assert CONFIGS == [(int(sy), int(sx)) for sy, sx, *_ in rows]
    assert all(strip(sx) == constant("kStrip", SX=sx) for sx in range(1, 40))


def test_configuration_choices():
    """The windows the measurements name get the blocks the header describes."""
    assert (choose(2048, 2048, 33, 33)["sy"], choose(2048, 2048, 33, 33)["sx"]) == (3, 11)
    assert choose(2048, 2048, 33, 33)["nb"] == 33 and choose(2048, 2048, 33, 33)["slices"] == 7
    assert (choose(2048, 2048, 17, 17)["sy"], choose(2048, 2048, 17, 17)["sx"]) == (3, 11)
    assert (choose(2048, 2048, 9, 9)["sy"], choose(2048, 2048, 9, 9)["sx"]) == (3, 11)
    assert (choose(1, 100000, 1, 1089)["sy"], choose(1, 100000, 1, 1089)["sx"]) == (1, 15)
    g = choose(2048, 2048, 33, 33)
    assert (g["tr"], g["tc"]) == (32, 132) and g["floats"] * 4 <= 64 * 1024


@pytest.mark.parametrize("hR,wR", [(2048, 2048), (1, 1 << 20), (7, 5), (1, 3), (300, 1)])
def test_every_window_up_to_1089_shifts_fits(hR, wR):
    """Every window of at most MAX_SHIFTS (1089) shifts has a configuration (at most THREADS shift
    blocks, at most MAX_SMEM of shared memory), and its slices fit in the block."""
    for oh in range(1, MAX_SHIFTS + 1):
        for ow in {1, 2, 3, 15, 33, MAX_SHIFTS // oh} | set(range(max(1, MAX_SHIFTS // oh - 3), MAX_SHIFTS // oh + 1)):
            if ow < 1 or oh * ow > MAX_SHIFTS:
                continue
            g = choose(hR, wR, oh, ow)
            assert g is not None, (oh, ow)
            assert 1 <= g["slices"] and g["slices"] * g["nb"] <= g["threads"] <= THREADS
            assert g["floats"] * 4 <= MAX_SMEM


@pytest.mark.parametrize("oh,ow", [(33, 33), (17, 17), (9, 9), (1, 1089), (1, 100), (3, 3), (40, 2), (5, 200)])
def test_lanes_of_a_slice_read_distinct_banks(oh, ow):
    """The L words that the lanes of one warp and one slice read at the same step lie in distinct
    banks (LWS·SY ≡ NBX·SX mod 32; with one shift block, lanes are consecutive segments and
    LWS ≡ TC). R is one broadcast word per slice (or consecutive segments: S odd)."""
    g = choose(2048, 2048, oh, ow)
    SY, SX, S, lws, nb = g["sy"], g["sx"], g["S"], g["lws"], g["nb"]
    for w in range(g["threads"] // WARP):
        t = np.arange(w * WARP, (w + 1) * WARP)
        t = t[t < g["slices"] * nb]
        if nb == 1:  # lanes = slices = consecutive segments
            seg = t % g["nseg"]
            addr = (seg // g["nstrip"]) * lws + (seg % g["nstrip"]) * S
            assert len(set(addr % 32)) == len(addr), (w, addr % 32)
            continue
        for sl in set(t // nb):
            b = t[t // nb == sl] % nb
            addr = (b // g["nbx"]) * SY * lws + (b % g["nbx"]) * SX
            assert len(set(addr % 32)) == len(addr), (w, sl, addr % 32)
