"""The normalization's crop (lib/xcorr/normalize_crop.hpp, lib/normalize/):
the prepass and the raw correlation of a normalized problem run only on the part of each input
that the window touches, with the window translated onto the crops.

CPU (runs everywhere):
- the crop formula against brute force: the union over the window's shifts of the overlaps'
  left and right rows and columns is exactly the crop (tight, contiguous), empty exactly when no
  shift overlaps;
- a NumPy emulation of normalize.cu on the crops (crop means in double, shifted float32 crops,
  summed-area tables over the crops, the raw correlation of the crops over the translated window,
  the epilogue's table lookups in crop coordinates and its direct sums over the crops at the
  translated shift, C(0, 0) from the whole inputs) against the float64 definition (xcorr_np's
  normalized()) for all four forms, every kind of window, windows partly and wholly beyond the
  full range, 1 x n signals, and inputs of 1000 + noise;
- `xcorr explain --json` reports the same crop and the cropped raw problem (the zncc_frames case:
  a 39 x 37 corner of each 256 x 256 frame).
The GPU side (tests/test_normalize.py's GPU tests, xcorr_validate --normalize all) runs the code."""
import json

import numpy as np
import pytest
from scipy.signal import correlate2d

from conftest import run, seeded_rng
from xcorr_np import FORMS, counts, crop, full_window, normalized, pairs, same_window, table_zncc_factor, valid_window

DIRECT_OVERLAP = 64  # normalize.hpp's kDirectOverlap


def span(s, m, n):
    """overlap_span (core.hpp): right indices [b, e) with index + s in [0, m); arrays allowed."""
    b = np.maximum(0, -s)
    e = np.minimum(n, m - s)
    return b, np.maximum(e, b)


def touched_crop(shape, rect):
    """normalize_crop.hpp's touched_crop: ((rL0, rL1, cL0, cL1), (rR0, rR1, cR0, cR1))."""
    hL, wL, hR, wR = shape
    dy0, dy1, dx0, dx1 = rect
    c = lambda v, n: int(min(max(v, 0), n))  # noqa: E731
    left = (c(dy0, hL), c(dy1 + hR, hL), c(dx0, wL), c(dx1 + wR, wL))
    right = (c(-dy1, hR), c(hL - dy0, hR), c(-dx1, wR), c(wL - dx0, wR))
    return left, right


def empty(region):
    r0, r1, c0, c1 = region
    return r1 <= r0 or c1 <= c0


def brute_force_touched(shape, rect):
    """The sets of left and right (row, column) that some shift of the window multiplies."""
    hL, wL, hR, wR = shape
    dy0, dy1, dx0, dx1 = rect
    lrows, rrows, lcols, rcols = set(), set(), set(), set()
    for dy in range(dy0, dy1 + 1):
        b, e = span(dy, hL, hR)
        if e > b:
            rrows.update(range(b, e))
            lrows.update(range(b + dy, e + dy))
    for dx in range(dx0, dx1 + 1):
        b, e = span(dx, wL, wR)
        if e > b:
            rcols.update(range(b, e))
            lcols.update(range(b + dx, e + dx))
    return lrows, lcols, rrows, rcols


def windows_of(shape):
    """(name, rectangle) of every kind of window, partly and wholly beyond the full range."""
    hL, wL, hR, wR = shape
    fy0, fy1, fx0, fx1 = full_window(*shape)
    out = [("full", full_window(*shape)), ("same", same_window(*shape)), ("max-shift 2,3", (-2, 2, -3, 3)),
           ("max-shift 0,1", (0, 0, -1, 1)),
           ("inside", (min(1, fy1), min(1, fy1) + hL // 3, fx0 + wR // 2, fx0 + wR // 2 + wL // 2)),
           ("partly beyond", (fy0 - 3, fy0 + hR // 2, fx1 - 1, fx1 + 4)),
           ("around everything", (fy0 - 2, fy1 + 3, fx0 - 1, fx1 + 2)),
           ("beyond below", (fy0 - 5, fy0 - 1, -1, 1)), ("beyond above", (fy1 + 1, fy1 + 3, fx0, fx1)),
           ("beyond left", (0, 0, fx0 - 7, fx0 - 1)), ("beyond right", (fy0, fy1, fx1 + 1, fx1 + 2))]
    if valid_window(*shape):
        out.append(("valid", valid_window(*shape)))
    return out


SHAPES = [(1, 7, 1, 3), (1, 40, 1, 9), (1, 5, 1, 12), (5, 1, 2, 1), (9, 13, 4, 11), (3, 5, 7, 2), (23, 31, 19, 7),
          (17, 16, 16, 17), (40, 37, 5, 4)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%d*%dx%d" % s)
def test_crop_is_exactly_what_the_window_touches(shape):
    hL, wL, hR, wR = shape
    rects = [r for _, r in windows_of(shape)]
    rng = seeded_rng(("crop-brute", shape))
    fy0, fy1, fx0, fx1 = full_window(*shape)
    for _ in range(40):
        y = sorted(rng.integers(fy0 - 4, fy1 + 5, 2))
        x = sorted(rng.integers(fx0 - 4, fx1 + 5, 2))
        rects.append((int(y[0]), int(y[1]), int(x[0]), int(x[1])))
    for rect in rects:
        (l, r) = touched_crop(shape, rect)
        lrows, lcols, rrows, rcols = brute_force_touched(shape, rect)
        if not lrows or not lcols:  # no shift overlaps
            assert empty(l) and empty(r), (rect, l, r)
            continue
        assert not empty(l) and not empty(r), (rect, l, r)
        assert lrows == set(range(l[0], l[1])) and lcols == set(range(l[2], l[3])), (rect, l)
        assert rrows == set(range(r[0], r[1])) and rcols == set(range(r[2], r[3])), (rect, r)


def tables(x):
    """Summed-area tables (h+1) x (w+1) of x and x^2 in double, row and column 0 zero."""
    x = x.astype(np.float64)
    t, t2 = np.zeros((x.shape[0] + 1, x.shape[1] + 1)), np.zeros((x.shape[0] + 1, x.shape[1] + 1))
    t[1:, 1:] = np.cumsum(np.cumsum(x, 0), 1)
    t2[1:, 1:] = np.cumsum(np.cumsum(x * x, 0), 1)
    return t, t2


def box(t, r0, r1, c0, c1):
    """box_sum; the indices must lie inside the table (no wrap-around of negative indices)."""
    for a, n in ((r0, t.shape[0]), (r1, t.shape[0]), (c0, t.shape[1]), (c1, t.shape[1])):
        a = np.asarray(a)
        assert a.size == 0 or (a.min() >= 0 and a.max() < n), "a table read outside the crop's table"
    return t[r1, c1] - t[r0, c1] - t[r1, c0] + t[r0, c0]


def raw_at(L, R, dy, dx):
    """reference_element.hpp's raw_at in double."""
    hL, wL = L.shape
    hR, wR = R.shape
    rb, re = span(dy, hL, hR)
    cb, ce = span(dx, wL, wR)
    if re <= rb or ce <= cb:
        return 0.0
    return float((L[rb + dy:re + dy, cb + dx:ce + dx].astype(np.float64) * R[rb:re, cb:ce]).sum())


def raw_at_many(L, R, dy, dx):
    """raw_at at each shift (dy[k], dx[k]) at once: the same overlap (span) of each shift, its
    products in double summed per shift (0 where the overlap is empty)."""
    hL, wL = L.shape
    hR, wR = R.shape
    dy, dx = np.asarray(dy, int), np.asarray(dx, int)
    rb, re = span(dy, hL, hR)
    cb, ce = span(dx, wL, wR)
    nc = ce - cb
    cnt = (re - rb) * nc
    k = np.repeat(np.arange(len(dy)), cnt)  # the shift of each product
    e = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)  # its index within that overlap
    r, c = rb[k] + e // nc[k], cb[k] + e % nc[k]
    prod = L[r + dy[k], c + dx[k]].astype(np.float64) * R[r, c]
    return np.bincount(k, weights=prod, minlength=len(dy)).astype(np.float64)


def emulate(mode, form, left, right, rect, raw_dtype):
    """normalize.cu on the crops, in NumPy; `raw_dtype`: the shifted copies' and the raw
    correlation's type (float32 on the GPU)."""
    nL, hL, wL = left.shape
    nR, hR, wR = right.shape
    shape = (hL, wL, hR, wR)
    dy0, dy1, dx0, dx1 = rect
    (lr0, lr1, lc0, lc1), (rr0, rr1, rc0, rc1) = touched_crop(shape, rect)
    ps = pairs(form, nL, nR)
    if lr1 <= lr0 or lc1 <= lc0:
        return np.zeros((len(ps), dy1 - dy0 + 1, dx1 - dx0 + 1))  # empty crop: memset 0
    ty, tx = rr0 - lr0, rc0 - lc0
    # Prepass over the crops.
    lcrop, rcrop = left[:, lr0:lr1, lc0:lc1], right[:, rr0:rr1, rc0:rc1]
    lmean = lcrop.astype(np.float64).mean(axis=(1, 2))
    rmean = rcrop.astype(np.float64).mean(axis=(1, 2))
    lvar, rvar = lcrop.astype(np.float64).var(axis=(1, 2)), rcrop.astype(np.float64).var(axis=(1, 2))
    # float32 shifted copies as on the GPU; in double with a double raw correlation (the index
    # arithmetic checked to rounding, without float32's rounding of x - m).
    ls = (lcrop - lmean[:, None, None]).astype(raw_dtype)
    rs = (rcrop - rmean[:, None, None]).astype(raw_dtype)
    lt = [tables(x) for x in ls]
    rt = [tables(x) for x in rs]
    # The raw problem: the crops' correlation over the translated window.
    lh, lw, rh, rw = ls.shape[1], ls.shape[2], rs.shape[1], rs.shape[2]
    raw = crop(np.stack([correlate2d(ls[i].astype(raw_dtype), rs[j].astype(raw_dtype)).astype(np.float64)
                         for i, j in ps]), rh, rw, dy0 + ty, dy1 + ty, dx0 + tx, dx1 + tx)
    # The epilogue: overlaps of the inputs, table lookups in crop coordinates.
    dy = np.arange(dy0, dy1 + 1)[:, None]
    dx = np.arange(dx0, dx1 + 1)[None, :]
    rb, re = span(dy, hL, hR)
    cb, ce = span(dx, wL, wR)
    rb, re, cb, ce = np.broadcast_arrays(rb, re, cb, ce)
    nr, nc = re - rb, ce - cb
    n = (nr * nc).astype(np.float64)
    ok = n > 0
    out = np.zeros((len(ps),) + n.shape)
    for k, (i, j) in enumerate(ps):
        lrb, lre, lcb, lce = (rb + dy - lr0)[ok], (re + dy - lr0)[ok], (cb + dx - lc0)[ok], (ce + dx - lc0)[ok]
        sl, ql = box(lt[i][0], lrb, lre, lcb, lce), box(lt[i][1], lrb, lre, lcb, lce)
        rrb, rre, rcb, rce = (rb - rr0)[ok], (re - rr0)[ok], (cb - rc0)[ok], (ce - rc0)[ok]
        sr, qr = box(rt[j][0], rrb, rre, rcb, rce), box(rt[j][1], rrb, rre, rcb, rce)
        c = raw[k][ok]
        small = n[ok] <= DIRECT_OVERLAP
        ys, xs = np.nonzero(ok)
        s = np.nonzero(small)[0]  # the direct sums, at the translated shifts
        c[s] = raw_at_many(ls[i], rs[j], dy0 + ys[s] + ty, dx0 + xs[s] + tx)
        m = n[ok]
        ml, mr = lmean[i], rmean[j]
        if mode == "zero-lag":
            c00 = raw_at(left[i], right[j], 0, 0)  # the whole inputs (c00_kernel)
            v = np.zeros_like(m) if c00 == 0 else (c + mr * sl + ml * sr + m * ml * mr) / c00
        else:
            fl, gl = table_zncc_factor(sl, ql, lt[i][1][lre, lce], lre, lce, m, lvar[i])
            fr, gr = table_zncc_factor(sr, qr, rt[j][1][rre, rce], rre, rce, m, rvar[j])
            good = gl & gr
            v = np.zeros_like(m)
            v[good] = np.clip((m * c - sl * sr)[good] / np.sqrt(fl[good] * fr[good]), -1, 1)
        out[k][ok] = v
    return out


def stacks(kind, form, rng, shape):
    hL, wL, hR, wR = shape
    nl, nr = counts(form, rng)
    if kind == "large":
        return ((1000 + rng.uniform(-8, 8, (nl, hL, wL))).astype(np.float32),
                (1000 + rng.uniform(-8, 8, (nr, hR, wR))).astype(np.float32))
    left = rng.standard_normal((nl, hL, wL)).astype(np.float32)
    right = rng.standard_normal((nr, hR, wR)).astype(np.float32)
    return left, right


def defined(mode, form, left, right):
    """normalized(mode, form, left, right, rect) for any rect: the same full float64 output (computed
    once for these inputs, not once per window) cropped to rect as normalized() crops it."""
    full = normalized(mode, form, left, right)
    return lambda rect: crop(full, right.shape[1], right.shape[2], *rect)


@pytest.mark.parametrize("mode", ["zncc", "zero-lag"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%d*%dx%d" % s)
def test_cropped_fast_path_equals_the_definition(mode, form, shape):
    """Raw correlation in double: the crop's index arithmetic exact to rounding (1e-7: small overlaps
    are ill-conditioned; a misplaced index costs ~0.1); in float32
    (as on the GPU) on 1000 + noise: within the contract's 1e-4."""
    rng = seeded_rng(("crop-emulation", mode, form, shape))
    left, right = stacks("signed", form, rng, shape)
    if mode == "zero-lag":
        left += 1  # C(0, 0) away from 0
    definition = defined(mode, form, left, right)
    for name, rect in windows_of(shape):
        want = definition(rect)
        got = emulate(mode, form, left, right, rect, np.float64)
        assert got.shape == want.shape, name
        assert np.abs(got - want).max() <= 1e-7, (name, rect, np.abs(got - want).max())
    left, right = stacks("large", form, rng, shape)
    definition = defined(mode, form, left, right)
    for name, rect in windows_of(shape):
        want = definition(rect)
        got = emulate(mode, form, left, right, rect, np.float32)
        assert np.abs(got - want).max() <= 1e-4, (name, rect, np.abs(got - want).max())


def test_cropped_fast_path_on_a_frame_corner():
    """The zncc_frames geometry scaled down: a small template within ±4 of a large frame; the crop
    is a corner, the raw problem the crops over the same (untranslated) window."""
    rng = seeded_rng("crop-corner")
    left = (1000 + rng.uniform(-8, 8, (3, 64, 48))).astype(np.float32)
    right = (1000 + rng.uniform(-8, 8, (2, 7, 5))).astype(np.float32)
    rect = (-4, 4, -4, 4)
    assert touched_crop((64, 48, 7, 5), rect) == ((0, 11, 0, 9), (0, 7, 0, 5))
    for mode in ("zncc", "zero-lag"):
        want = normalized(mode, "n-to-m", left, right, rect)
        assert np.abs(emulate(mode, "n-to-m", left, right, rect, np.float32) - want).max() <= 1e-4


def explain_crop(xcorr, *args):
    r = run([xcorr, "explain", "--gpu", "none", "--json", *map(str, args)])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_explain_reports_the_zncc_frames_crop(xcorr):
    """1000 frames of 256 x 256 against a 23 x 21 template within ±16: the prepass and the raw
    correlation run on a 39 x 37 corner of each frame and the whole template."""
    e = explain_crop(xcorr, "--form", "n-to-m", "--left", "1000:256x256", "--right", "1:23x21", "--max-shift", 16,
                     "--normalize", "zncc")
    c = e["normalization_crop"]
    assert c["left"] == [0, 39, 0, 37] and c["right"] == [0, 23, 0, 21]
    assert not c["empty"] and not c["whole"]
    assert c["raw"] == "n-to-m 1000x[39x37] * 1x[23x21] shifts -16:16,-16:16"
    r = run([xcorr, "explain", "--gpu", "none", "--form", "n-to-m", "--left", "1000:256x256", "--right", "1:23x21",
             "--max-shift", "16", "--normalize", "zncc"])
    assert r.returncode == 0 and "rows 0..38, columns 0..36 of 256x256" in r.stdout, r.stdout
    plain = explain_crop(xcorr, "--form", "n-to-m", "--left", "2:256x256", "--right", "1:23x21", "--max-shift", 16)
    assert "normalization_crop" not in plain


@pytest.mark.parametrize("shape", [(9, 13, 4, 11), (3, 5, 7, 2), (1, 40, 1, 9), (17, 16, 16, 17)],
                         ids=lambda s: "%dx%d*%dx%d" % s)
def test_explain_crop_matches_the_emulation(xcorr, shape):
    """The C++ crop (normalize_crop.hpp through xcorr explain) equals touched_crop here for every
    kind of window, and the raw problem is the crops over the translated window."""
    hL, wL, hR, wR = shape
    for name, rect in windows_of(shape):
        dy0, dy1, dx0, dx1 = rect
        e = explain_crop(xcorr, "--form", "one-to-one", "--left", f"{hL}x{wL}", "--right", f"{hR}x{wR}",
                         "--shifts", f"{dy0}:{dy1},{dx0}:{dx1}", "--normalize", "zncc")
        c = e["normalization_crop"]
        l, r = touched_crop(shape, rect)
        if empty(l):
            assert c["empty"] and c["raw"] == "", (name, c)
            continue
        assert (tuple(c["left"]), tuple(c["right"])) == (l, r), (name, rect, c)
        whole = l == (0, hL, 0, wL) and r == (0, hR, 0, wR)
        assert c["whole"] == whole, (name, c)
        if whole:
            assert c["raw"] == e["problem"].removesuffix(" normalize zncc"), (name, c)
        else:
            ty, tx = r[0] - l[0], r[2] - l[2]
            assert c["raw"] == (f"one-to-one 1x[{l[1] - l[0]}x{l[3] - l[2]}] * 1x[{r[1] - r[0]}x{r[3] - r[2]}] "
                                f"shifts {dy0 + ty}:{dy1 + ty},{dx0 + tx}:{dx1 + tx}"), (name, c)


def test_explain_reports_the_raw_crop_of_a_variant_that_asks_for_it(xcorr):
    """A raw problem whose window touches part of the inputs: every candidate of explain that
    declares crop_windows (`xcorr list --json`) says it runs on the touched parts (the crops and the
    translated window of touched_crop); the others, and every candidate where the window touches the
    whole inputs, say nothing of it."""
    crops = {v["name"]: v["crop_windows"] for v in json.loads(run([xcorr, "list", "--json"]).stdout)}
    if not any(crops.values()):
        pytest.skip("no variant of this build declares crop_windows")
    seen = 0
    for left, right, window in [("256x256", "23x21", ["--max-shift", "4"]), ("300x280", "16x16", ["--shifts", "100:104,50:57"]),
                                ("64x64", "64x64", ["--max-shift", "4"])]:
        e = explain_crop(xcorr, "--form", "one-to-one", "--left", left, "--right", right, *window)
        hL, wL = map(int, left.split("x"))
        hR, wR = map(int, right.split("x"))
        dy0, dy1, dx0, dx1 = ((-4, 4, -4, 4) if window[0] == "--max-shift" else (100, 104, 50, 57))
        l, r = touched_crop((hL, wL, hR, wR), (dy0, dy1, dx0, dx1))
        whole = l == (0, hL, 0, wL) and r == (0, hR, 0, wR)
        ty, tx = r[0] - l[0], r[2] - l[2]
        raw = (f"one-to-one 1x[{l[1] - l[0]}x{l[3] - l[2]}] * 1x[{r[1] - r[0]}x{r[3] - r[2]}] "
               f"shifts {dy0 + ty}:{dy1 + ty},{dx0 + tx}:{dx1 + tx}")
        for c in e["candidates"]:
            if crops[c["algorithm"]] and not whole:
                assert f"{c['algorithm']} runs on these (copied first, timed) as {raw}" in c["raw_crop"], c
                seen += 1
            else:
                assert "raw_crop" not in c, (left, right, window, c)
    assert seen == 2 * sum(crops.values()), "a variant that crops is missing from the candidates"


def table_column_at(runs, c):
    """TableColumns::at (normalize_crop.hpp): the table column of crop column c, -1 if none."""
    (a0, n1), (b0, n2) = runs
    if a0 <= c < a0 + n1:
        return c - a0
    if b0 <= c < b0 + n2:
        return n1 + c - b0
    return -1


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "%dx%d*%dx%d" % s)
def test_sampled_table_columns_are_exactly_what_the_epilogue_reads(xcorr, shape):
    """The columns of the summed-area tables that the epilogue reads (read_columns, through xcorr
    explain): every column a shift of the window reads is kept, none other, in increasing order; and
    the box sums through the sampled tables (TableColumns::at) equal the whole tables' on random
    crops. normalize.cu keeps only these columns where that leaves out at least an eighth of them."""
    hL, wL, hR, wR = shape
    rng = seeded_rng(("sampled-columns", shape))
    fy0, fy1, fx0, fx1 = full_window(*shape)
    rects = [r for _, r in windows_of(shape)]
    for _ in range(6):
        x = sorted(rng.integers(fx0 - 3, fx1 + 4, 2))
        rects.append((0, 0, int(x[0]), int(x[1])))
    for rect in rects:
        dy0, dy1, dx0, dx1 = rect
        e = explain_crop(xcorr, "--form", "one-to-one", "--left", f"{hL}x{wL}", "--right", f"{hR}x{wR}",
                         "--shifts", f"{dy0}:{dy1},{dx0}:{dx1}", "--normalize", "zncc")
        c = e["normalization_crop"]
        if c["empty"]:
            continue
        cols = c["table_columns"]
        l, r = touched_crop(shape, rect)
        for side, region, width in (("left", l, wL), ("right", r, wR)):
            (a0, n1), (b0, n2) = cols[side]
            kept = list(range(a0, a0 + n1)) + list(range(b0, b0 + n2))
            assert kept == sorted(set(kept)), (rect, side, cols[side])
            read = set()
            for dx in range(dx0, dx1 + 1):
                b, en = span(dx, wL, wR)
                if en <= b:
                    continue
                first, last = (b + dx, en + dx) if side == "left" else (b, en)
                read.update((first - region[2], last - region[2]))
            assert set(kept) == read, (rect, side, sorted(read), cols[side])
            crop_w = region[3] - region[2]
            assert all(0 <= k <= crop_w for k in kept), (rect, side)
            # Box sums through the sampled table equal the whole table's.
            x = rng.standard_normal((3, crop_w)).astype(np.float32)
            t, _ = tables(x)
            sampled = t[:, kept]
            for c0 in read:
                for c1 in read:
                    if c0 <= c1:
                        assert box(sampled, 0, 3, table_column_at(cols[side], c0), table_column_at(cols[side], c1)) \
                            == box(t, 0, 3, c0, c1)


def test_seed_002_reads_130_of_2049_table_columns(xcorr):
    """Normalized autocorrelation of 2048 x 2048 within ±64: the tables need the 65 columns where an
    overlap starts and the 65 where one ends, 130 of 2049 (normalize.cu then writes 4.3 MB of
    tables per input instead of 67 MB)."""
    e = explain_crop(xcorr, "--form", "one-to-one", "--left", "2048x2048", "--right", "2048x2048", "--max-shift", 64,
                     "--normalize", "zero-lag")
    cols = e["normalization_crop"]["table_columns"]
    assert cols["left"] == [[0, 65], [1984, 65]] and cols["right"] == [[0, 65], [1984, 65]]
