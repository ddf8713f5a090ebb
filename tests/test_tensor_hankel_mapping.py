"""tensor-hankel's mapping of work to threads (algorithms/28_tensor_hankel.cu), emulated on the CPU:
the same work items (pair groups of 16 rights of one left through PairMap::grid(), lag tiles of
BM lags, group- or tile-major order over a persistent grid that strides), the K range of a tile
(the union of its lags' overlaps) cut into chunks of 256 padded to whole groups of 4 k steps, the
staged template entries and left window slots (zero outside the signals), the shared-memory slot
that each lane reads for each element (m, k) of its A fragment and each (k, n) of its B fragment,
the staged-template reuse between items, and the stores (the window's row of dy = 0, zeros in the
others, lags and rights past the output skipped), in NumPy, against np.correlate in float64. It
checks the index arithmetic of the kernel's design (every product counted exactly once, every
output element written exactly once), not the CUDA code itself (MMA numerics are float64 here),
which xcorr_validate checks on the device."""
import re
from pathlib import Path

import numpy as np
import pytest

from conftest import seeded_rng, source_constant
from xcorr_np import crop, pairs


SOURCE = (Path(__file__).resolve().parent.parent / "algorithms" / "28_tensor_hankel.cu").read_text()


def constant(name, **known):
    return source_constant(SOURCE, name, **known)


WARPS, NB, KC, GS = 4, 16, 256, 4
AENT = KC // 8 * 32  # template fragment entries per part: (k step, lane)


def cfg(split):
    nt = 8 if split else 16
    return nt, WARPS * 8 * nt  # n tiles (8 lags) per warp, lags per block


def grid(form, nL, nR):
    """PairMap::grid() (lib/xcorr/core.hpp): N, M, rsi, rsj, osi, osj."""
    return {"one-to-one": (1, 1, 0, 1, 0, 1), "one-to-many": (1, nR, 0, 1, 0, 1),
            "n-to-mn": (nL, nR // nL, 1, nL, 1, nL), "n-to-m": (nL, nR, 0, 1, nR, 1)}[form]


def fragment_reads(nt, steps):
    """For every k step and lane of a chunk: the A element (right, k) that each of its 4 registers
    holds and the template entry (32 s + lane) and component it reads; and for every warp, n tile,
    k step and lane: the B element (k, lag) of each of its 2 registers with the window slot and half
    it reads (pair P(nt + s) of the group's register array, slot base + 8 (s0 + q), half 0: L[x],
    1: L[x + 4])."""
    s, g, t = (a.ravel() for a in np.meshgrid(np.arange(steps), np.arange(8), np.arange(4), indexing="ij"))
    entry = 32 * s + 4 * g + t
    A = (np.concatenate([g, g + 8, g, g + 8]), np.concatenate([8 * s + t] * 2 + [8 * s + t + 4] * 2),
         np.concatenate([entry] * 4), np.concatenate([np.full_like(g, q) for q in range(4)]))
    w, n, s, g, t = np.meshgrid(np.arange(WARPS), np.arange(nt), np.arange(steps), np.arange(8), np.arange(4),
                                indexing="ij")
    w, n, s, g, t = (a.ravel() for a in (w, n, s, g, t))
    nw = w * 8 * nt
    s0, ss = (s // GS) * GS, s % GS
    q = n + ss  # index into pr[NP], the group's pair registers
    assert q.max() < nt + GS - 1
    slot = nw + g + t + 8 * (s0 + q)
    B = (np.concatenate([8 * s + t, 8 * s + t + 4]), np.concatenate([nw + 8 * n + g] * 2), np.concatenate([slot] * 2),
         np.concatenate([np.zeros_like(t), np.ones_like(t)]))
    return A, B


def emulate(form, lefts, rights, rect, split, blocks):
    """The kernel over stacks of signals (count, n) and a shift rectangle, blocks persistent blocks."""
    nt, bm = cfg(split)
    nL, wL = lefts.shape
    nR, wR = rights.shape
    dy0, dy1, dx0, dx1 = rect
    out_h, out_w = dy1 - dy0 + 1, dx1 - dx0 + 1
    N, M, rsi, rsj, osi, osj = grid(form, nL, nR)
    count = {"one-to-one": 1, "one-to-many": nR, "n-to-mn": nR, "n-to-m": nL * nR}[form]
    out = np.full((count, out_h, out_w), np.nan)
    writes = np.zeros(out.shape, int)
    row0 = -dy0 if dy0 <= 0 <= dy1 else -1
    tiles, jb = -(-out_w // bm), -(-M // NB)
    groups = N * jb
    items = groups * tiles
    tile_major = wR > KC
    for b in range(min(blocks, items)):
        staged = None  # (z, k0, steps) of the template entries held
        Ab = np.full((AENT, 4), np.nan)
        for w in range(b, items, min(blocks, items)):
            z, tile = (w % groups, w // groups) if tile_major else (w // tiles, w % tiles)
            i, j0 = z // jb, (z % jb) * NB
            da = dx0 + tile * bm
            db = min(da + bm - 1, dx1)
            kb, ke = max(0, -db), min(wR, wL - da)
            acc = np.zeros((NB, bm))
            if row0 >= 0 and kb < ke:
                for k0 in range(kb, ke, KC):
                    cols = min(KC, ke - k0)
                    steps = -(-cols // (8 * GS)) * GS
                    assert 8 * steps <= KC  # chunks never overlap: each covers [k0, k0 + KC) at most
                    if staged != (z, k0, steps):
                        Ab[:] = np.nan
                        for e in range(steps * 32):
                            s, gg, tt = e >> 5, (e >> 2) & 7, e & 3
                            for q in range(4):
                                j, k = j0 + gg + 8 * (q & 1), k0 + 8 * s + tt + 4 * (q >> 1)
                                Ab[e, q] = rights[i * rsi + j * rsj][k] if j < M and k < wR else 0.0
                        staged = (z, k0, steps)
                    # window slots x < BM + 8 steps: (L[da + k0 + x], L[da + k0 + x + 4]), 0 outside L
                    x = np.arange(bm + 8 * steps)
                    assert len(x) <= bm + KC  # the slots the shared memory holds
                    Ls = np.zeros((len(x), 2))
                    for h in range(2):
                        p = da + k0 + x + 4 * h
                        ok = (p >= 0) & (p < wL)
                        Ls[ok, h] = lefts[i][p[ok]]
                    (ar, ac, ae, aq), (bk, bn, bsl, bh) = fragment_reads(nt, steps)
                    assert bsl.max() < len(Ls), "a lane reads a window slot that was not staged"
                    # the Hankel structure: element (k, lag) of B is window position lag + k
                    np.testing.assert_array_equal(bsl + 4 * bh, bn + bk)
                    A = np.full((NB, 8 * steps), np.nan)
                    hits = np.zeros(A.shape, int)
                    np.add.at(hits, (ar, ac), 1)
                    assert (hits == 1).all(), "an element of A is held by no lane or by two"
                    A[ar, ac] = Ab[ae, aq]
                    Bm = np.full((8 * steps, bm), np.nan)
                    hits = np.zeros(Bm.shape, int)
                    np.add.at(hits, (bk, bn), 1)
                    assert (hits == 1).all(), "an element of B is held by no lane or by two"
                    Bm[bk, bn] = Ls[bsl, bh]
                    assert not np.isnan(A).any() and not np.isnan(Bm).any(), "a fragment reads an unstaged entry"
                    acc += A @ Bm
            # stores: accumulator (right slot, lag), rows r: row0 holds the sums
            for n in range(NB):
                j = j0 + n
                if j >= M:
                    continue
                o = i * osi + j * osj
                for r in range(out_h):
                    lag = tile * bm + np.arange(bm)
                    keep = lag < out_w
                    out[o, r, lag[keep]] = acc[n, keep] if r == row0 else 0.0
                    writes[o, r, lag[keep]] += 1
    assert (writes == 1).all(), "an output element written never or twice"
    return out


def definition(form, lefts, rights, rect):
    wR = rights.shape[1]
    res = []
    for a, b in pairs(form, len(lefts), len(rights)):
        full = np.correlate(lefts[a].astype(np.float64), rights[b].astype(np.float64), "full")[None]
        res.append(crop(full, 1, wR, *rect))
    return np.stack(res)


def stacks(form, nL, nR, wL, wR, key):
    rng = seeded_rng(("tensor-hankel", form, nL, nR, wL, wR, key))
    return (rng.uniform(-1, 1, (nL, wL)).astype(np.float32), rng.uniform(-1, 1, (nR, wR)).astype(np.float32))


def full_rect(wL, wR):
    return (0, 0, -(wR - 1), wL - 1)


CASES = [
    # form, nL, nR, wL, wR, rect (None: full), blocks
    ("one-to-many", 1, 16, 1301, 256, "valid", 3),       # seed 004's shape, small: one chunk, templates kept
    ("one-to-many", 1, 20, 777, 61, None, 2),            # 2 groups, the second of 4 rights; odd lengths
    ("one-to-one", 1, 1, 1000, 333, None, 5),            # 2 chunks (333 > 256): tile-major order
    ("n-to-m", 3, 5, 419, 600, (0, 0, -250, 250), 4),    # unequal, a lag window, 3 chunks, longer right
    ("n-to-mn", 2, 6, 530, 47, (-2, 1, -60, 600), 3),    # rows dy != 0 (zeros), lags partly beyond
    ("n-to-m", 2, 3, 300, 17, (0, 0, 400, 900), 2),      # wholly beyond the full range: zeros
    ("one-to-many", 1, 3, 50, 700, "valid", 1),          # valid with the right longer than the left
    ("one-to-one", 1, 1, 1, 1, None, 1),                 # one sample each
    ("n-to-m", 2, 17, 2100, 300, (3, 4, -10, 10), 7),    # no row 0 in the window: all zeros
]


@pytest.mark.parametrize("split", [True, False], ids=["3xtf32", "tf32"])
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[3]}x{c[4]}" for c in CASES])
def test_mapping_counts_every_product_once(case, split):
    form, nL, nR, wL, wR, rect, blocks = case
    lefts, rights = stacks(form, nL, nR, wL, wR, rect)
    if rect is None:
        rect = full_rect(wL, wR)
    elif rect == "valid":
        lo, hi = sorted((0, wL - wR))
        rect = (0, 0, lo, hi)
    got, want = emulate(form, lefts, rights, rect, split, blocks), definition(form, lefts, rights, rect)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * max(1.0, np.abs(want).max()))


def test_constants_match_the_source():
    """Drift from kWarps, kThreads, kNB, kKC, kGS, kAEnt or Cfg<SPLIT>'s NT, BM, NP and LENT."""
    assert (WARPS, NB, KC, GS) == (constant("kWarps"), constant("kNB"), constant("kKC"), constant("kGS"))
    assert 32 * WARPS == constant("kThreads") and AENT == constant("kAEnt", kKC=KC)
    nt = re.search(r"constexpr int NT = SPLIT \? (\d+) : (\d+);", SOURCE)
    assert (cfg(True)[0], cfg(False)[0]) == (int(nt[1]), int(nt[2]))
    for split in (True, False):
        n_tiles, bm = cfg(split)
        assert bm == constant("BM", kWarps=WARPS, NT=n_tiles)
        assert n_tiles + GS - 1 == constant("NP", NT=n_tiles, kGS=GS)  # the pair slots fragment_reads() bounds
        assert bm + KC == constant("LENT", BM=bm, kKC=KC)  # the window slots emulate() bounds


def test_seed004_case_geometry():
    """Seed 004's case: 16875 (3xtf32) / 8438 (tf32) lag tiles of one pair group, one chunk of 32 k
    steps per tile, templates staged once per block."""
    out_w, wR = 4_320_000, 256
    for split, tiles in ((True, 16875), (False, 8438)):
        _, bm = cfg(split)
        assert -(-out_w // bm) == tiles
        assert -(-wR // (8 * GS)) * GS == KC // 8 and wR <= KC  # group-major: the templates stay
    # shared memory of the two instantiations (the header's figures)
    assert (256 + KC) * 16 + 2 * AENT * 16 == 40960 and (512 + KC) * 8 + AENT * 16 == 22528


def test_shared_memory_loads_take_the_fewest_wavefronts():
    """A template load: 32 lanes on 32 consecutive 16-byte entries (4 wavefronts of 128 bytes, the
    least a 512-byte warp load takes). A pair load: the lanes read slots base + g + t, 11 distinct
    consecutive entries (8 or 16 bytes), the rest broadcasts: within 128 bytes (tf32) or 2
    wavefronts (3xtf32), never a bank conflict."""
    for s in range(KC // 8):
        byte = [(32 * s + lane) * 16 for lane in range(32)]
        assert sorted(byte) == list(range(byte[0], byte[0] + 512, 16))
    for size in (8, 16):
        slots = {g + t for g in range(8) for t in range(4)}
        assert slots == set(range(11)) and len(slots) * size <= 2 * 128
