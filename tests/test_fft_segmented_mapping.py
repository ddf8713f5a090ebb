"""fft-segmented's segmentation (algorithms/52_fft_segmented.cu), emulated on the CPU in float64:
the lag window clamped to the full range, the right cropped to the samples those lags read, lag
pieces of Wp lags and right blocks of B samples for a transform size N (geometry), the pieces in
chunks of npc (memory), the pads' slot -> (matrix, piece, block) decomposition with their offsets
and zero fill, the accumulation's warp work items (subtiles of TL x TR pairs of the PairGrid,
frequency chunks of 32, pieces) summing the blocks in order, one inverse per (pair, piece), and the
crop (first chunk writes everything, later chunks their lags), against np.correlate. It checks the
index arithmetic of the design (every product counted once, every output element written), not
the CUDA code, which xcorr_validate checks on the device."""
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import seeded_rng, source_constant
from xcorr_np import FORMS, pairs


SOURCE = (Path(__file__).resolve().parent.parent / "algorithms" / "52_fft_segmented.cu").read_text()


def constant(name, **known):
    return source_constant(SOURCE, name, **known)


KMAX_N, MIN_N = 1 << 22, 256  # transform sizes: auto tries the powers of 2 from MIN_N to KMAX_N
TWO_PASS_N, BYTES_PER_S, FMAS_PER_S = 16384, 3.5e12, 25e12  # cost(): sizes above TWO_PASS_N count twice
SUBTILES = {True: (4, 8), False: (1, 8)}  # wide -> (TL, TR) of accumulate_kernel


def pair_grid(form, nL, nR):
    """PairGrid (lib/xcorr/core.hpp): N, M, rsi, rsj, osi, osj."""
    return {"one-to-one": (1, 1, 0, 1, 0, 1), "one-to-many": (1, nR, 0, 1, 0, 1),
            "n-to-mn": (nL, nR // nL, 1, nL, 1, nL), "n-to-m": (nL, nR, 0, 1, nR, 1)}[form]


def ceil_div(a, b):
    return -(-a // b)


def geometries(N, W, rn):
    """The (Wp, B, NP, NB) that for_each_geometry() tries."""
    if rn + W - 1 <= N:
        splits = [(W, rn)]
    else:
        splits = ([(W, N + 1 - W)] if W < N else []) + ([(N + 1 - rn, rn)] if rn < N else []) + \
                 [(N // 2, N + 1 - N // 2)]
    return [(Wp, B, ceil_div(W, Wp), ceil_div(rn, B)) for Wp, B in splits]


def smooth_even(need):
    n = max(need, 2)
    while True:
        m = n
        for f in (2, 3, 5, 7):
            while m % f == 0:
                m //= f
        if m == 1 and n % 2 == 0:
            return n
        n += 1


def cost(N, geo, nL, nR, count):
    Wp, B, NP, NB = geo
    passes = 2.0 if N > TWO_PASS_N else 1.0
    segs, prods = nL * NP * NB + nR * NB, count * NP
    nbytes = 4.0 * N * (segs * (2 + 2 * passes) + prods * (1 + 2 * passes))
    cmacs = count * NP * NB * (N / 2 + 1)
    return nbytes / BYTES_PER_S + 4 * cmacs / FMAS_PER_S


def choose(W, rn, nL, nR, count, N=None):
    """(N, geometry) as choose_geometry(): the cheapest, the first of equal costs."""
    if N is not None:
        cands = [N]
    else:
        cands = ([smooth_even(rn + W - 1)] if rn + W - 1 <= KMAX_N else []) + \
                [MIN_N << k for k in range((KMAX_N // MIN_N).bit_length())]
    best = None
    for n in cands:
        for g in geometries(n, W, rn):
            c = cost(n, g, nL, nR, count)
            if best is None or c < best[2]:
                best = (n, g, c)
    return best[0], best[1]


def emulate(form, lefts, rights, rect, N, npc_cap=None, split=None):
    """The output stack of one run, and how often each element was written (last chunk's value wins)."""
    nL, n = lefts.shape
    nR, m = rights.shape
    dy0, dy1, dx0, dx1 = rect
    out_h, out_w = dy1 - dy0 + 1, dx1 - dx0 + 1
    Ng, Mg, rsi, rsj, osi, osj = pair_grid(form, nL, nR)
    count = Ng * Mg
    out = np.full((count, out_h, out_w), np.nan)
    writes = np.zeros((count, out_h, out_w), int)
    lo, hi = max(dx0, -(m - 1)), min(dx1, n - 1)
    row0 = -dy0 if dy0 <= 0 <= dy1 else -1
    if lo > hi or row0 < 0:  # cudaMemsetAsync
        return np.zeros_like(out), writes + 1
    r0 = max(0, -hi)
    rn = min(m, n - lo) - r0
    assert rn >= 1
    W = hi - lo + 1
    N, (Wp, B, NP, NB) = choose(W, rn, nL, nR, count, N)
    if split is not None:  # force one of the splits for_each_geometry() tries
        Wp, B, NP, NB = geometries(N, W, rn)[split]
    assert B + Wp - 1 <= N and B >= 1 and Wp >= 1
    E = N // 2 + 1
    npc_full = NP if npc_cap is None else min(NP, npc_cap)
    chunks = ceil_div(NP, npc_full)

    def pad(src, src_len, slots, per_matrix, base, piece_step, block_step, take, limit):
        dst = np.full((slots, N), np.nan)
        for s in range(slots):
            mtx, rem = divmod(s, per_matrix)
            pc, b = divmod(rem, NB)
            off = base + pc * piece_step + b * block_step
            idx = off + np.arange(N)
            ok = (np.arange(N) < take) & (idx >= 0) & (idx < limit)
            row = np.zeros(N)
            row[ok] = src[mtx][idx[ok]]
            dst[s] = row
        return dst

    rslots = pad(rights, m, nR * NB, NB, r0, 0, B, B, r0 + rn)
    rspec = np.fft.rfft(rslots, axis=1)
    for c in range(chunks):
        p0 = c * npc_full
        npc = npc_full if c + 1 < chunks else NP - (chunks - 1) * npc_full
        lslots = pad(lefts, n, nL * npc * NB, npc * NB, r0 + lo + p0 * Wp, Wp, B, N, n)
        lspec = np.fft.rfft(lslots, axis=1)
        # Accumulation: the warp work items of accumulate_kernel.
        wide = rsi == 0 and Ng >= 2
        TL, TR = SUBTILES[wide]
        tiles_l, tiles_r, fchunks = ceil_div(Ng, TL), ceil_div(Mg, TR), ceil_div(E, 32)
        items = tiles_l * tiles_r * fchunks * npc
        prod = np.full((count * npc, E), np.nan, complex)
        pw = np.zeros((count * npc, E), int)
        subtiles = tiles_l * tiles_r
        for w in range(items):
            rest, st = divmod(w, subtiles)
            pc, fc = divmod(rest, fchunks)
            ti, tj = st % tiles_l, st // tiles_l
            i0, j0 = ti * TL, tj * TR
            f = fc * 32 + np.arange(32)
            f = f[f < E]
            nl, nr = min(TL, Ng - i0), min(TR, Mg - j0)
            acc = np.zeros((TL, TR, len(f)), complex)
            for b in range(NB):  # in order
                for u in range(nl):
                    lrow = lspec[((i0 + u) * npc + pc) * NB + b, f]
                    for v in range(nr):
                        # right(i0, j0 + v): the subtile's first left; exact when TL == 1 or rsi == 0
                        rr = i0 * rsi + (j0 + v) * rsj
                        assert rr == (i0 + u) * rsi + (j0 + v) * rsj
                        acc[u, v] += lrow * np.conj(rspec[rr * NB + b, f])
            for u in range(nl):
                for v in range(nr):
                    k = (i0 + u) * osi + (j0 + v) * osj
                    prod[k * npc + pc, f] = acc[u, v]
                    pw[k * npc + pc, f] += 1
        assert (pw == 1).all(), "every (pair, piece, frequency) accumulated exactly once"
        res = np.fft.irfft(prod, n=N, axis=1) * N  # cuFFT's C2R is unnormalised
        # Crop.
        lag_a, lag_b = lo + p0 * Wp, min(hi, lo + p0 * Wp + npc * Wp - 1)
        xa, xb, xlo = lag_a - dx0, lag_b - dx0 + 1, lo - dx0
        for k in range(count):
            for y in range(out_h):
                data = y == row0
                if not data and c != 0:
                    continue
                xs = range(out_w) if c == 0 else range(xa, xb)
                for x in xs:
                    v = 0.0
                    if data and xa <= x < xb:
                        q = x - xlo
                        p, t = divmod(q, Wp)
                        assert 0 <= p - p0 < npc and t < Wp
                        v = res[k * npc + (p - p0), t] / N
                    out[k, y, x] = v
                    writes[k, y, x] += 1
    return out, writes


def reference(form, lefts, rights, rect):
    n, m = lefts.shape[1], rights.shape[1]
    dy0, dy1, dx0, dx1 = rect
    ps = pairs(form, len(lefts), len(rights))
    out = np.zeros((len(ps), dy1 - dy0 + 1, dx1 - dx0 + 1))
    if dy0 <= 0 <= dy1:
        for k, (i, j) in enumerate(ps):
            full = np.correlate(lefts[i], rights[j], mode="full")  # lags -(m-1) .. n-1
            for x in range(dx1 - dx0 + 1):
                d = dx0 + x
                if -(m - 1) <= d <= n - 1:
                    out[k, -dy0, x] = full[d + m - 1]
    return out


def stacks(form, n, m, rng):
    nL, nR = {"one-to-one": (1, 1), "one-to-many": (1, 3), "n-to-mn": (2, 6), "n-to-m": (5, 9)}[form]
    return rng.random((nL, n)) - 0.5, rng.random((nR, m)) - 0.5


# (n, m, window rect (dy0, dy1, dx0, dx1) or a named window, N, npc cap)
CASES = [
    (37, 11, "full", 16, None),            # rn + W - 1 > N: blocks over R (m=11 > 8) and pieces
    (37, 11, "full", 16, 2),               # the same in chunks of 2 pieces (tail chunk)
    (53, 5, "full", 16, 3),                # short R: one block, overlap-save over the lags
    (29, 41, "full", 32, None),            # right longer than left
    (61, 23, "valid", 16, None),
    (23, 61, "valid", 16, 1),              # valid with the right the longer one: negative lags
    (45, 17, "same", 16, None),
    (101, 33, (0, 0, -7, 7), 16, None),    # max-lag: W <= N/2, blocks only
    (101, 33, (-2, 1, -40, 150), 32, 2),   # rows without overlap, lags past both ends
    (31, 9, (0, 0, 40, 60), 16, None),     # wholly beyond the full range: zeros
    (31, 9, (1, 3, -5, 5), 16, None),      # no dy = 0 row: zeros
    (40, 40, (0, 0, -39, -30), 16, None),  # the lowest lags only (r0 > 0 crop)
    (17, 9, "full", None, None),           # auto: one segment
    (300, 7, (0, 0, -3, 250), None, 4),
]


def rect_of(name, n, m):
    if name == "full":
        return (0, 0, -(m - 1), n - 1)
    if name == "valid":
        return (0, 0, 0, n - m) if n >= m else (0, 0, n - m, 0)
    if name == "same":
        s = -(m // 2)
        return (0, 0, s, s + n - 1)
    return name


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_segmentation_matches_correlate(form, case):
    n, m, window, N, cap = CASES[case]
    rng = seeded_rng(700 + case)
    lefts, rights = stacks(form, n, m, rng)
    rect = rect_of(window, n, m)
    out, writes = emulate(form, lefts, rights, rect, N, cap)
    assert (writes >= 1).all(), "every output element written"
    ref = reference(form, lefts, rights, rect)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-10)


@pytest.mark.parametrize("form", ["one-to-many", "n-to-m"])
def test_every_split(form):
    """Each split (one piece, one block, halves) on a problem where all three apply."""
    rng = seeded_rng(31)
    lefts, rights = stacks(form, 29, 13, rng)
    rect = (0, 0, -9, 20)  # W = 30 < 32, rn = 13 < 32, rn + W - 1 = 42 > 32
    assert len(geometries(32, 30, 13)) == 3
    ref = reference(form, lefts, rights, rect)
    for split in range(3):
        out, writes = emulate(form, lefts, rights, rect, 32, 2, split)
        assert (writes >= 1).all()
        np.testing.assert_allclose(out, ref, rtol=0, atol=1e-10)


def test_single_chunk_writes_each_element_once():
    rng = seeded_rng(5)
    lefts, rights = stacks("n-to-m", 45, 13, rng)
    out, writes = emulate("n-to-m", lefts, rights, (-1, 1, -20, 60), 16)
    assert (writes == 1).all()


def test_constants_match_the_source():
    """Drift from kMaxN, the auto sizes' loop, cost()'s constants or accumulate_kernel's (TL, TR)."""
    assert KMAX_N == constant("kMaxN")
    assert MIN_N == int(re.search(r"for \(int64_t N = (\d+); N <= kMaxN; N \*= 2\)", SOURCE).group(1))
    assert TWO_PASS_N == int(re.search(r"passes = g\.N > (\d+) \? 2\.0 : 1\.0;", SOURCE).group(1))
    rates = re.search(r"return bytes / ([\d.e]+) \+ 4\.0 \* cmacs / ([\d.e]+);", SOURCE)
    assert (BYTES_PER_S, FMAS_PER_S) == (float(rates[1]), float(rates[2]))
    launch = re.search(r"if \(wide_ && deep_\) accumulate_kernel<(\d+), (\d+), \d+><<<.*?"
                       r"else if \(wide_\) accumulate_kernel<(\d+), (\d+), \d+><<<.*?"
                       r"else accumulate_kernel<(\d+), (\d+), \d+><<<", SOURCE, re.S)
    items = re.search(r"ceil_div\(pairs_\.N, wide_ \? (\d+) : (\d+)\)\) \* ceil_div\(pairs_\.M, (\d+)\)", SOURCE)
    wide, narrow = tuple(map(int, launch.groups()[:2])), tuple(map(int, launch.groups()[4:]))
    assert wide == tuple(map(int, launch.groups()[2:4]))  # both stage counts, one subtile
    assert SUBTILES == {True: wide, False: narrow}
    assert (wide[0], narrow[0], wide[1]) == tuple(map(int, items.groups())) and wide[1] == narrow[1]  # the work items


def test_geometry_of_the_experiments():
    """The header's numbers: ambient noise (64 x 144000, lags ±2400) and seed 004's case."""
    W, rn = 4801, 144000
    assert choose(W, rn, 64, 64, 4096, 8192) == (8192, (4801, 3392, 1, 43))
    assert choose(W, rn, 64, 64, 4096, 16384) == (16384, (4801, 11584, 1, 13))
    n_auto, g_auto = choose(W, rn, 64, 64, 4096)
    print("ambient auto:", n_auto, g_auto, cost(n_auto, g_auto, 64, 64, 4096))
    for N, g in ((8192, (4801, 3392, 1, 43)), (16384, (4801, 11584, 1, 13)), (4096, geometries(4096, W, rn)[-1])):
        print("ambient", N, g, cost(N, g, 64, 64, 4096))
    # seed 004: one 256-sample block, overlap-save over 4.32e6 lags.
    N4, (Wp, B, NP, NB) = choose(4_320_000, 256, 1, 16, 16, 8192)
    assert (B, NB, Wp) == (256, 1, 7937) and NP == ceil_div(4_320_000, 7937)
    print("seed004 auto:", choose(4_320_000, 256, 1, 16, 16))
    print("matched auto:", choose(8_639_401, 600, 1, 300, 300))
    # Every geometry keeps B + Wp - 1 <= N, and the pieces and blocks cover W and rn.
    for N in (16, 256, 8192):
        for W in (1, 5, N // 2, N // 2 + 1, N, 3 * N + 1):
            for rn in (1, 7, N // 2, N // 2 + 1, N, 5 * N + 3):
                for Wp, B, NP, NB in geometries(N, W, rn):
                    assert B + Wp - 1 <= N and B >= 1 and Wp >= 1
                    assert NP * Wp >= W and NB * B >= rn and (NP - 1) * Wp < W and (NB - 1) * B < rn
