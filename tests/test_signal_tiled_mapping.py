"""signal-tiled's mapping of work to threads (algorithms/29_signal_tiled.cu), emulated on the CPU:
the same lag tiles (128 threads x TL lags), template groups of TT over the PairGrid of each form
(strided over a capped grid.y), chunks of KC = 256 t clipped per tile, the K split into pieces and
its ordered reduction, the zero-filled staging of L and of the templates, the window's rows (only
dy = 0 holds sums) and lags beyond the full range, in NumPy, against the float64 definition
(np.correlate). It checks the index arithmetic of the design (every product of every lag counted
exactly once, every output element written exactly once), not the CUDA code itself, which the GPU
tests and xcorr_validate check on the device."""
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import seeded_rng, source_constant


SOURCE = (Path(__file__).resolve().parent.parent / "algorithms" / "29_signal_tiled.cu").read_text()


def constant(name, **known):
    return source_constant(SOURCE, name, **known)


THREADS, KC = 128, 256
TILES = {8: 8, 1: 32}  # TT -> TL
GY_CAP = 65535  # grid.y: the groups stride over at most this many blocks


def ls_index(p, tl):
    return p ^ (((p >> 5) & (1 if tl == 8 else 7)) << 2)


def pair_grid(form, nL, nR):
    """PairGrid (lib/xcorr/core.hpp): N, M, rsi, rsj, osi, osj."""
    return {"one-to-one": (1, 1, 0, 1, 0, 1), "one-to-many": (1, nR, 0, 1, 0, 1),
            "n-to-mn": (nL, nR // nL, 1, nL, 1, nL), "n-to-m": (nL, nR, 0, 1, nR, 1)}[form]


def emulate(form, lefts, rights, rect, tt, pieces, gy_cap=GY_CAP):
    """The output stack (count, out_h, out_w) of one run, and how often each element was written."""
    tl = TILES[tt]
    bl, nl = THREADS * tl, THREADS * tl + KC
    wL, K = lefts.shape[1], rights.shape[1]
    N, M, rsi, rsj, osi, osj = pair_grid(form, len(lefts), len(rights))
    count = N * M
    dy0, dy1, dx0, dx1 = rect
    out_h, out_w = dy1 - dy0 + 1, dx1 - dx0 + 1
    row0 = -dy0 if dy0 <= 0 <= dy1 else -1
    gpl = -(-M // tt)
    n_groups = N * gpl
    tiles = -(-out_w // bl)
    out = np.full((count, out_h, out_w), np.nan)
    writes = np.zeros((count, out_h, out_w), int)
    partials = np.full((pieces, count, out_w), np.nan)
    pwrites = np.zeros((pieces, count, out_w), int)
    lb = np.arange(THREADS) * tl  # each thread's first lag in the tile
    gy = min(n_groups, gy_cap)
    for bx in range(tiles):
        x0 = bx * bl
        D = dx0 + x0
        d_last = dx0 + min(x0 + bl, out_w) - 1
        t_lo = max(0, -d_last)
        t_hi = 0 if row0 < 0 else min(K, wL - D)
        c_lo = t_lo // KC
        c_n = -(-t_hi // KC) - c_lo if t_hi > t_lo else 0
        for piece in range(pieces):
            c_a, c_b = c_lo + c_n * piece // pieces, c_lo + c_n * (piece + 1) // pieces
            for by in range(gy):
                for grp in range(by, n_groups, gy):
                    i, j0 = grp // gpl, (grp % gpl) * tt
                    L = lefts[i]
                    acc = np.zeros((bl, tt))  # lag in the tile x template
                    total = np.zeros((bl, tt))  # the running totals in shared memory (Ts)
                    multi = c_b - c_a > 1
                    for c in range(c_a, c_b):
                        t1 = c * KC
                        gl = D + t1 + np.arange(nl)
                        Ls = np.where((gl >= 0) & (gl < wL), L[np.clip(gl, 0, wL - 1)], 0.0)
                        padded = np.full(nl, np.nan)
                        padded[ls_index(np.arange(nl), tl)] = Ls
                        Rs = np.full(KC * tt, np.nan)
                        idx = np.arange(KC * tt)
                        kq, rem = idx // (4 * tt), idx % (4 * tt)
                        m, k = rem // 4, 4 * kq + rem % 4
                        t, j = t1 + k, j0 + m
                        ok = (t < K) & (j < M)
                        r = np.array([rights[i * rsi + jj * rsj][tk] if o else 0.0
                                      for jj, tk, o in zip(j, t, ok)])
                        Rs[k * tt + m] = r
                        assert not np.isnan(Rs).any(), "a template slot left unstaged"
                        Rs = Rs.reshape(KC, tt)
                        steps = -(-min(KC, K - t1) // 8) * 8
                        for k0 in range(0, steps, 8):
                            # a[q] for q < TL + 8: the float4 loads at ls_index(lb + k0 + 4 * (q // 4))
                            p = lb[:, None] + k0 + np.arange(tl + 8)[None, :]
                            assert p.max() <= nl - 1, "read past the staged L"
                            a = padded[ls_index(p, tl)]
                            assert not np.isnan(a).any(), "a slot read that holds no sample"
                            for kk in range(8):
                                # acc[thread lag j][m] += a[kk + j] * R_m[k0 + kk]
                                contrib = a[:, kk:kk + tl, None] * Rs[k0 + kk][None, None, :]
                                acc += contrib.reshape(bl, tt)
                        if multi:  # the chunk's sums join the totals, in chunk order
                            total = (0.0 if c == c_a else total) + acc
                            acc = np.zeros((bl, tt))
                    if multi:
                        acc = total
                    for mm in range(tt):
                        if j0 + mm >= M:
                            break
                        o = i * osi + (j0 + mm) * osj
                        xs = x0 + np.arange(bl)
                        keep = xs < out_w
                        if pieces > 1:
                            partials[piece, o, xs[keep]] = acc[keep, mm]
                            pwrites[piece, o, xs[keep]] += 1
                            continue
                        for row in range(out_h):
                            out[o, row, xs[keep]] = acc[keep, mm] if row == row0 else 0.0
                            writes[o, row, xs[keep]] += 1
    if pieces > 1:
        assert (pwrites == 1).all(), "a partial written twice or not at all"
        for k in range(count):
            for row in range(out_h):
                s = np.zeros(out_w)
                if row == row0:
                    for p in range(pieces):  # piece order
                        s = s + partials[p, k]
                out[k, row] = s
                writes[k, row] += 1
    return out, writes


def definition(form, lefts, rights, rect):
    N, M, rsi, rsj, osi, osj = pair_grid(form, len(lefts), len(rights))
    dy0, dy1, dx0, dx1 = rect
    K = rights.shape[1]
    want = np.zeros((N * M, dy1 - dy0 + 1, dx1 - dx0 + 1))
    for i in range(N):
        for j in range(M):
            full = np.correlate(lefts[i].astype(np.float64), rights[i * rsi + j * rsj].astype(np.float64), "full")
            if dy0 <= 0 <= dy1:
                for x, d in enumerate(range(dx0, dx1 + 1)):
                    if -(K - 1) <= d <= lefts.shape[1] - 1:
                        want[i * osi + j * osj, -dy0, x] = full[d + K - 1]
    return want


def valid(wL, K):
    return (0, 0, 0, wL - K) if wL >= K else (0, 0, wL - K, 0)


CASES = [
    # form, nL, nR, wL, K, rect, tt, pieces, grid.y cap
    ("one-to-many", 1, 16, 2100, 37, (0, 0, 0, 2100 - 37), 8, 1, 65535),        # seed 004 in small: valid
    ("one-to-many", 1, 11, 1501, 300, (0, 0, -299, 1500), 8, 1, 65535),        # full, 11 templates: last group 3 of 8
    ("one-to-one", 1, 1, 777, 613, (0, 0, -612, 776), 1, 5, 65535),           # full, split into 5 pieces
    ("one-to-one", 1, 1, 5000, 1100, (0, 0, -550, 4449), 1, 1, 65535),        # same (scipy's for even m), 2 tiles
    ("n-to-m", 3, 5, 1301, 1301, (0, 0, -40, 40), 8, 3, 65535),               # lag window ±40, long K, 6 chunks
    ("n-to-m", 2, 9, 600, 999, (-2, 1, -30, 30), 1, 2, 4),                     # max-shift rows: dy != 0 zeros; strided grid.y
    ("n-to-mn", 2, 6, 301, 257, (0, 0, 290, 1400), 8, 2, 2),                  # partly beyond the full range
    ("one-to-many", 1, 3, 260, 45, (1, 3, -10, 10), 1, 1, 65535),             # no row 0: all zeros
    ("one-to-many", 1, 2, 100, 33, (0, 0, 500, 600), 8, 7, 65535),             # wholly beyond: zeros (7 pieces > chunks)
    ("one-to-one", 1, 1, 33, 700, valid(33, 700), 1, 3, 65535),                # valid with the right longer
    ("n-to-m", 2, 3, 1200, 513, (0, 0, -3000, -100), 8, 1, 65535),             # window starting far below
]


@pytest.mark.parametrize("form,nL,nR,wL,K,rect,tt,pieces,gy", CASES)
def test_mapping_counts_every_product_once(form, nL, nR, wL, K, rect, tt, pieces, gy):
    rng = seeded_rng(("signal-tiled", form, wL, K, rect, tt, pieces))
    lefts = rng.uniform(-1, 1, (nL, wL))
    rights = rng.uniform(-1, 1, (nR, K))
    got, writes = emulate(form, lefts, rights, rect, tt, pieces, gy)
    want = definition(form, lefts, rights, rect)
    assert (writes == 1).all(), "an output element written twice or not at all"
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * max(1.0, np.abs(want).max()))


def test_constants_match_the_source():
    """Drift from Cfg's THREADS, KC, SWZ and TL per TT, the Templates list or the grid.y cap."""
    assert (THREADS, KC) == (constant("THREADS"), constant("KC"))
    tts = re.search(r"using Templates = Values<([\d, ]+)>;", SOURCE).group(1)
    tl = re.search(r"Cfg<TT == (\d+) \? (\d+) : (\d+), TT>", SOURCE)
    assert TILES == {int(tt): int(tl[2]) if int(tt) == int(tl[1]) else int(tl[3]) for tt in tts.split(",")}
    swz = re.search(r"constexpr int SWZ = TL == (\d+) \? (\d+) : (\d+);", SOURCE)
    p = np.arange(1 << 12)
    for t in TILES.values():
        mask = int(swz[2]) if t == int(swz[1]) else int(swz[3])
        np.testing.assert_array_equal(ls_index(p, t), p ^ (((p >> 5) & mask) << 2))
    assert GY_CAP == int(re.search(r"std::min\(g_\.n_groups, (\d+)\)", SOURCE).group(1))


@pytest.mark.parametrize("tt", [8, 1])
def test_staging_and_loads_are_bank_conflict_free(tt):
    """The staged L window: ls_index is a permutation of the NL slots that keeps float4s contiguous
    and aligned, and a quarter warp's LDS.128 (8 lanes at lag TL * lane + k0 + 4q) hits 8 different bank quads.
    The templates' staging: idx -> (k, m) is a bijection of KC x TT slots and a warp's 32 copies
    land in 32 different banks."""
    tl = TILES[tt]
    nl = THREADS * tl + KC
    p = np.arange(nl)
    assert sorted(ls_index(p, tl)) == list(range(nl))
    assert all(ls_index(q + 3, tl) == ls_index(q, tl) + 3 and ls_index(q, tl) % 4 == 0 for q in range(0, nl, 4))
    for k0 in range(0, KC, 8):
        for q in range(0, (tl + 8) // 4):
            for quarter in range(4):
                lanes = np.arange(8) + 8 * quarter
                quads = (ls_index(lanes * tl + k0 + 4 * q, tl) // 4) % 8
                assert len(set(quads)) == 8, (tt, k0, q, quarter)
    idx = np.arange(KC * tt)
    kq, rem = idx // (4 * tt), idx % (4 * tt)
    m, k = rem // 4, 4 * kq + rem % 4
    assert sorted(k * tt + m) == list(range(KC * tt))
    for w in range(0, KC * tt, 32):
        banks = (k[w:w + 32] * tt + m[w:w + 32]) % 32
        assert len(set(banks)) == 32
