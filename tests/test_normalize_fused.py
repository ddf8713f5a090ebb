"""The normalization prepass's two paths (lib/normalize/), emulated on the CPU:
fused_prepass_kernel (one block per small crop, its table in shared memory) against the
four-kernel path (partial_sums_kernel, means_kernel, row_scan_kernel or the segmented row pass,
col_scan_kernel), each
modelled with its own mapping of work to threads and the exact order of its double additions
(Python floats are IEEE doubles; NumPy float64 adds element-wise in the same rounding). Proves:

- the mean, the shifted float32 copy and the (h+1) x (w+1) tables of (x', x'^2) are bit-identical
  between the paths for every crop the fused kernel takes (odd sizes, 1 x n, n x 1, both sides of
  the shared-memory threshold), and deterministic (a fixed order, no atomics);
- the fused mapping writes every crop element, every shifted-copy element and every table cell
  exactly once, and reads no table cell before it is written;
- every crop that fits the fused kernel takes one partial sum in the four-kernel path (the
  static_assert), and the tables of both paths, for any crop, equal float64 summed-area tables of
  the same float32 x' to rounding (tests/test_normalize_crop.py's model builds those);
- rows past kSegRow columns take the segmented row pass (seg_scan_kernel, seg_carry_kernel,
  seg_add_kernel; a 1-D signal of millions of samples): its mapping writes every cell once, counts
  every segment once (a model with a segment's carry skipped or doubled fails the same check), its
  order is fixed, and rows up to kSegRow keep scan_row's bits;
- zero-lag's C(0, 0) partial sums (c00_split, c00_partial_kernel) cover the overlap once, over
  rows and column chunks;
- long rows of crops past the fused and strip prepasses take the chunked row pass
  (scan_span_chunked: one warp scan per 256 columns, the columns transposed through a shared-memory
  stage whose layouts are bijective and bank-conflict-free); every crop the fused kernel takes
  keeps scan_span's order;
- many crops past the fused prepass with narrow tables take the strip prepass (row and column passes
  in one kernel, the rows in the lane-run order: the chunked order with lane_run(cw) columns a lane,
  one warp scan per row up to 32·kLaneRunMax columns; the columns summed from the top in order),
  every cell written once;
- tall tables of few columns take the banded column pass (col_totals_kernel, col_band_scan_kernel):
  the same sums as col_scan_kernel's over more, shorter segments, every cell written once, one band
  (so the fused prepass's bits) for every crop the fused kernel takes.

It checks the design (orders and index arithmetic), not the CUDA code itself: the GPU tests
(tests/test_normalize.py, xcorr_validate --normalize all) run that. The constants are read from
normalize.cu, so a change there is modelled here."""
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import package, run_poisoned, seeded_rng, source_constant

# The normalization's one translation unit (lib/normalize/: normalizer.cu and the passes it includes).
SOURCE = "\n".join((Path(__file__).resolve().parent.parent / "lib" / "normalize" / name).read_text()
                    for name in ("internal.cuh", "tables.cuh", "prepass.cuh", "epilogue.cuh", "normalizer.cu"))


def constant(name, **known):
    """A constexpr of the normalization's sources (conftest.source_constant)."""
    return source_constant(SOURCE, name, **known)


THREADS = constant("kThreads")
WARP = 32
WARPS = THREADS // WARP
SEGMENTS = constant("kColSegments")
ELEMS_PER_PARTIAL = constant("kElemsPerPartial", kThreads=THREADS)
MAX_PARTIALS = constant("kMaxPartials")
FUSED_SMEM = constant("kFusedSmemBytes")
STRIP_OVER_FUSED = constant("kStripOverFusedBytes")
SEG_COLS = constant("kSegCols", kWarp=WARP)
SEG_ROW = constant("kSegRow", kSegCols=SEG_COLS)
MAX_C00_PARTS = constant("kMaxC00Parts")
BAND_SEG_ROWS = constant("kBandSegRows")
STRIP_ROWS = THREADS // WARP
STRIP_MIN_COUNT = constant("kStripMinCount")
STRIP_MAX_WIDTH = constant("kStripMaxWidth")
STRIP_MAX_HEIGHT = constant("kStripMaxHeight")
LANE_RUN_MAX = constant("kLaneRunMax")
CHUNK = constant("kChunk")
LONG_ROW = constant("kLongRow", kWarp=WARP)
COL_BLOCKS = constant("kColBlocks")
MAX_COL_BANDS = constant("kMaxColBands")
SAMPLED_MIN_BYTES = constant("kSampledMinBytes")


def partials_for(elems):
    return int(min(max(elems // ELEMS_PER_PARTIAL, 1), MAX_PARTIALS))


def fused_smem_bytes(ch, cw):
    return (ch + 1) * (cw + 1) * 16 + ch * cw * 4


def fits_fused(ch, cw):
    return fused_smem_bytes(ch, cw) <= FUSED_SMEM


# ---- shared device functions (the same code in both paths) -----------------------------------

def block_sum(v):
    """block_sum: v[t] per thread (THREADS doubles); xor-butterfly per warp, then thread 0 adds
    the warp sums in order to 0."""
    v = np.array(v, dtype=np.float64).reshape(WARPS, WARP)
    lanes = np.arange(WARP)
    o = WARP // 2
    while o:
        v = v + v[:, lanes ^ o]  # every lane: own + partner (IEEE addition commutes)
        o //= 2
    total = 0.0
    for w in range(WARPS):
        total += float(v[w, 0])
    return total


def mean_of(partials, ch, cw):
    """The crop's mean from its partial sums: one (mean_of, shared by the fused kernel and
    means_kernel) added to 0; more (means_kernel's warp) lane i adding partials i, i + 32, ... in
    order to 0, then the xor butterfly; over ch·cw."""
    if len(partials) == 1:
        return (0.0 + partials[0]) / (float(ch) * cw)
    v = np.zeros(WARP)
    for i, p in enumerate(partials):
        v[i % WARP] += p
    lanes = np.arange(WARP)
    o = WARP // 2
    while o:
        v = v + v[lanes ^ o]
        o //= 2
    return float(v[0]) / (float(ch) * cw)


def warp_inclusive(a, q):
    """The Hillis-Steele inclusive scan of one strip (32 lanes, the last axis; leading axes: independent
    warps, vectorized) of (a, q) in double: lanes add the partial sum 1, 2, 4, 8, 16 lanes back
    (scan_span, seg_carry_kernel)."""
    o = 1
    while o < WARP:
        # __shfl_up_sync: lane l >= o adds lane l - o's value before this step; lanes < o keep theirs
        na, nq = a.copy(), q.copy()
        na[..., o:] = a[..., o:] + a[..., :-o]
        nq[..., o:] = q[..., o:] + q[..., :-o]
        a, q = na, nq
        o <<= 1
    return a, q


def sequential_sums(terms, axis=-1):
    """The running sums of `terms` along `axis`, each added in order to the previous one from +0
    (out[..., 0] = 0 + terms[..., 0]): np.add.accumulate, which adds strictly in sequence (unlike
    np.sum's pairwise reduction), i.e. a carry that one thread carries from step to step."""
    terms = np.moveaxis(np.asarray(terms, np.float64), axis, -1)
    zero = np.zeros(terms.shape[:-1] + (1,))
    return np.moveaxis(np.add.accumulate(np.concatenate([zero, terms], -1), -1)[..., 1:], -1, axis)


def scan_span(x, mean, n):
    """scan_span over n columns of x (float32; x may be (rows, n): independent warps, one row each,
    vectorized) from carry 0: (x' float32, out (n, 2): the inclusive sums, total (a, q): the last
    carry). The warp walks the span in strips of 32 columns, each strip's scan added to the
    carry, the carry then lane 31's entry: the carries a chain of sequential additions, so the
    strips' own scans are computed for all strips at once and the chain as sequential_sums."""
    x = np.asarray(x)
    one = x.ndim == 1
    x = x.reshape(-1, x.shape[-1])[:, :n]
    rows = x.shape[0]
    strips = -(-n // WARP)
    c = np.arange(strips * WARP).reshape(strips, WARP)  # (strip, lane): column c0 + lane
    valid = c < n
    v = np.zeros((rows, strips, WARP), np.float32)  # lanes past n hold 0
    v[:, valid] = (x.astype(np.float64) - mean).astype(np.float32)
    a = v.astype(np.float64)
    a, q = warp_inclusive(a, a * a)  # every strip's scan from 0
    # carry before strip k: ((0 + strip 0's lane 31) + strip 1's lane 31) + ... (lane 31 of a + carry)
    ca = np.concatenate([np.zeros((rows, 1)), sequential_sums(a[:, :, -1])], 1)
    cq = np.concatenate([np.zeros((rows, 1)), sequential_sums(q[:, :, -1])], 1)
    a = a + ca[:, :strips, None]
    q = q + cq[:, :strips, None]
    xs = v[:, valid]
    out = np.stack([a[:, valid], q[:, valid]], -1)
    total = np.stack([ca[:, strips], cq[:, strips]], -1)
    if one:
        return xs[0], out[0], (float(total[0, 0]), float(total[0, 1]))
    return xs, out, total


def scan_span_chunked(x, mean, n, chunk=CHUNK):
    """scan_span_chunked over n columns of x (as scan_span: (rows, n) vectorized over independent
    warps): lane l adds columns b0 + l·chunk + j in order from +0 (s_j), one warp scan of the lanes'
    totals per chunk of 32·chunk columns, p = carry + (that scan one lane back, +0 for lane 0), entry
    p + s_j; the next carry lane 31's p + s_last. The same returns as scan_span. chunk: kChunk
    (chunked rows), or lane_run(n) (the strip prepass's scan_row_runs: the same order). All chunks
    are computed at once; the carry is the chain ((carry + scan of lane 30) + s_last of lane 31)
    from chunk to chunk, added in that order (sequential_sums over the interleaved terms)."""
    x = np.asarray(x)
    one = x.ndim == 1
    x = x.reshape(-1, x.shape[-1])[:, :n]
    rows = x.shape[0]
    blocks = -(-n // (chunk * WARP))
    c = (np.arange(blocks)[:, None, None] * (chunk * WARP) + np.arange(WARP)[None, :, None] * chunk
         + np.arange(chunk)[None, None, :])  # (block, lane, j)
    valid = c < n
    v = np.zeros((rows, blocks, WARP, chunk), np.float32)
    v[:, valid] = (x[:, c[valid]].astype(np.float64) - mean).astype(np.float32)
    sa, sq = np.zeros(v.shape), np.zeros(v.shape)
    a, q = np.zeros(v.shape[:-1]), np.zeros(v.shape[:-1])
    for j in range(chunk):  # each lane's columns in order, from +0
        vd = v[..., j].astype(np.float64)
        a = a + vd
        q = q + vd * vd
        sa[..., j], sq[..., j] = a, q
    ta, tq = warp_inclusive(a, q)
    ea, eq = np.zeros_like(ta), np.zeros_like(tq)  # the scan one lane back, +0 for lane 0
    ea[..., 1:], eq[..., 1:] = ta[..., :-1], tq[..., :-1]
    # carry chain: carry, carry + ea[31] (lane 31's p), + sa[31, last] (the next carry), ...
    ra = sequential_sums(np.stack([ea[..., -1], sa[..., -1, -1]], -1).reshape(rows, 2 * blocks))
    rq = sequential_sums(np.stack([eq[..., -1], sq[..., -1, -1]], -1).reshape(rows, 2 * blocks))
    carry_a = np.concatenate([np.zeros((rows, 1)), ra[:, 1::2]], 1)  # before block k; [:, blocks]: the total
    carry_q = np.concatenate([np.zeros((rows, 1)), rq[:, 1::2]], 1)
    pa, pq = carry_a[:, :blocks, None] + ea, carry_q[:, :blocks, None] + eq
    ent_a, ent_q = pa[..., None] + sa, pq[..., None] + sq
    xs = np.zeros((rows, n), np.float32)
    out = np.zeros((rows, n, 2))
    xs[:, c[valid]] = v[:, valid]
    out[:, c[valid], 0] = ent_a[:, valid]
    out[:, c[valid], 1] = ent_q[:, valid]
    total = np.stack([carry_a[:, blocks], carry_q[:, blocks]], -1)
    if one:
        return xs[0], out[0], (float(total[0, 0]), float(total[0, 1]))
    return xs, out, total


def chunked_rows(ch, cw, strip=False):
    """normalize.cu's chunked_rows: long rows, not segmented, of a crop that neither the fused prepass
    nor the strip prepass takes."""
    return LONG_ROW <= cw <= SEG_ROW and not fits_fused(ch, cw) and not strip


def lane_run(cw):
    """normalize.cu's lane_run: columns a lane owns in the strip prepass's row order."""
    return min(-(-cw // WARP), LANE_RUN_MAX)


def scan_row(x, mean, cw, chunked=False, runs=False):
    """scan_row of one crop row x (float32, cw): (x' float32, row of cw + 1 (a, q) pairs); x may be
    (rows, cw), rows of independent warps, vectorized. runs: the strip prepass's scan_row_runs (the
    chunked order with lane_run(cw) columns a lane)."""
    x = np.asarray(x)
    row = np.zeros(x.shape[:-1] + (cw + 1, 2))
    if runs:
        xs, row[..., 1:, :], _ = scan_span_chunked(x, mean, cw, lane_run(cw))
    else:
        xs, row[..., 1:, :], _ = (scan_span_chunked if chunked else scan_span)(x, mean, cw)
    return xs, row


def count_writes(counts, written):
    """Adds one to counts at every (row, column) of written (k x 2: one row a write)."""
    np.add.at(counts, (written[:, 0], written[:, 1]), 1)


def segs_for(cw, fused=False):
    """normalize.cu's segs_for: segments per row of the segmented row pass, 0 for scan_row's rows."""
    return -(-cw // SEG_COLS) if not fused and cw > SEG_ROW else 0


def two_sum(a, b):
    """normalize.cu's two_sum (float64, round to nearest): s + e = a + b exactly."""
    s = np.float64(a) + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def segment_carries(t, compensated=True):
    """seg_carry_kernel on one row's segment totals t (nseg x 2): the exclusive scan, in chunks of 32
    (lanes past nseg hold 0), each chunk's Hillis-Steele inclusive scan added to the chunk carry, a
    double-double (carry_add, carry_step); compensated=False: the plain running carry it replaced."""
    nseg = len(t)
    out = np.empty_like(t)
    carry = np.zeros(2)
    low = np.zeros(2)
    for b0 in range(0, nseg, WARP):
        j = b0 + np.arange(WARP)
        valid = j < nseg
        a = np.zeros(WARP)
        q = np.zeros(WARP)
        a[valid], q[valid] = t[j[valid], 0], t[j[valid], 1]
        a, q = warp_inclusive(a, q)
        for k, v in ((0, a), (1, q)):
            e = np.roll(v, 1)  # __shfl_up_sync by 1; lane 0 adds nothing
            e[0] = 0.0
            if compensated:
                s, err = two_sum(carry[k], e)
                out[j[valid], k] = (s + (err + low[k]))[valid]
                carry[k], err = two_sum(carry[k], v[-1])
                low[k] = low[k] + err
            else:
                out[j[valid], k] = (carry[k] + e)[valid]
                carry[k] = carry[k] + v[-1]
    return out


def segmented_rows(x, mean, mutate=None):
    """seg_scan_kernel, seg_carry_kernel, seg_add_kernel on one crop x (ch x cw float32, cw > SEG_ROW):
    (x' float32, table (ch+1) x (cw+1) x 2), each modelled with its mapping (a warp per (row,
    segment), a warp per row, a block per (row, segment >= 1)) and checking that every table cell
    and shifted-copy element is written once by (a), every scratch entry once by (a) and once by (b),
    every entry of a segment >= 1 once by (c), none of segment 0. `mutate`: a deliberate fault
    ("skip": the last segment's carry not added; "double": segment 1's added twice), to show that the
    checks of the tests catch it."""
    ch, cw = x.shape
    nseg = segs_for(cw)
    assert nseg > 1
    w1 = cw + 1
    table = np.full((ch + 1, w1, 2), np.nan)  # poisoned: a cell (a) misses stays NaN
    xs = np.full((ch, cw), np.nan, np.float32)
    cell_writes = np.zeros((ch + 1, w1), int)
    xs_writes = np.zeros((ch, cw), int)
    seg = np.full((ch * nseg, 2), np.nan)
    seg_writes = np.zeros(ch * nseg, int)
    # (a)'s warps: warp i scans row g % ch, columns [j·kSegCols, + n) (g, j = divmod(i, nseg)); the
    # warps are independent, so their scan_spans run together, batched by span length.
    spans = []
    for i in range(ch * nseg):
        g, j = divmod(i, nseg)
        spans.append((g % ch, j * SEG_COLS, min(SEG_COLS, cw - j * SEG_COLS)))
    scanned = {}
    for n in sorted({n for _, _, n in spans}):
        ws = [i for i, s in enumerate(spans) if s[2] == n]
        res = scan_span(np.stack([x[r, c0:c0 + n] for r, c0, _ in (spans[i] for i in ws)]), mean, n)
        for k, i in enumerate(ws):
            scanned[i] = res[0][k], res[1][k], res[2][k]
    for i in range(ch * nseg):  # (a): warp i (any order: the warps are independent)
        g, j = divmod(i, nseg)
        r, c0, n = spans[i]
        if r == 0:
            hi = cw + 1 if j == nseg - 1 else c0 + SEG_COLS
            table[0, c0:hi] = 0
            cell_writes[0, c0:hi] += 1
        if j == 0:
            table[r + 1, 0] = 0
            cell_writes[r + 1, 0] += 1
        xs_seg, out, total = scanned[i]
        xs[r, c0:c0 + n] = xs_seg
        xs_writes[r, c0:c0 + n] += 1
        table[r + 1, 1 + c0:1 + c0 + n] = out
        cell_writes[r + 1, 1 + c0:1 + c0 + n] += 1
        seg[i] = total
        seg_writes[i] += 1
    assert (cell_writes == 1).all() and (xs_writes == 1).all() and (seg_writes == 1).all()
    assert not np.isnan(table).any() and not np.isnan(xs).any()
    for g in range(ch):  # (b): the warp of row g
        seg[g * nseg:(g + 1) * nseg] = segment_carries(seg[g * nseg:(g + 1) * nseg])
        seg_writes[g * nseg:(g + 1) * nseg] += 1
    assert (seg_writes == 2).all()
    add_writes = np.zeros((ch, cw), int)
    for i in range(ch * (nseg - 1)):  # (c): block i, its threads over the segment's columns
        g, k = divmod(i, nseg - 1)
        j = 1 + k
        r = g % ch
        if mutate == "skip" and j == nseg - 1:
            continue
        e = seg[g * nseg + j]
        cols = np.arange(j * SEG_COLS, min(cw, (j + 1) * SEG_COLS))
        for _ in range(2 if mutate == "double" and j == 1 else 1):
            table[r + 1, 1 + cols] = table[r + 1, 1 + cols] + e
        add_writes[r, cols] += 1
    if mutate is None:
        assert (add_writes[:, :SEG_COLS] == 0).all() and (add_writes[:, SEG_COLS:] == 1).all()
    return xs, table


def col_bands_for(ch, cw, count, width):
    """normalize.cu's col_bands_for: row bands of the column pass (1: col_scan_kernel's order)."""
    if fits_fused(ch, cw):
        return 1
    blocks = max(1, count * -(-width // WARP))
    want = min(-(-ch // (SEGMENTS * BAND_SEG_ROWS)), -(-COL_BLOCKS // blocks))
    return min(max(want, 1), MAX_COL_BANDS)


def scan_columns(table, ch, c, segments=SEGMENTS, skip=None):
    """scan_columns of the columns c (one per lane; < w1 counts; c may hold several blocks' lanes:
    the blocks, like the lanes, are independent, so they run together) of table ((ch+1) x w1 x 2),
    in place; returns the cells it wrote (k x 2: row, column; one row a write). All SEGMENTS warps:
    segment = warp. With segments = SEGMENTS · bands, the banded pass (col_totals_kernel, then
    col_band_scan_kernel): the same sums over more, shorter segments. skip: a segment whose total
    the starts leave out (a fault the tests must catch). Each lane adds its segment's rows in order
    (from +0 for the total; from the start for the entries), and a segment's start is the totals of
    the segments above it added in order from +0: chains of sequential additions, sequential_sums
    along the rows."""
    w1 = table.shape[1]
    length = -(-ch // segments)
    c = np.asarray(c).reshape(-1)
    valid = c < w1
    cv = c[valid]
    seg_total = np.zeros((segments, len(cv), 2))
    bounds = []
    for seg in range(segments):
        r0 = min(ch + 1, 1 + seg * length)
        r1 = min(ch + 1, r0 + length)
        bounds.append((r0, r1))
        if r1 > r0:
            seg_total[seg] = sequential_sums(table[r0:r1, cv], axis=0)[-1]
    # run: the totals of the segments above (all but skip), in order from +0
    kept = [i for i in range(segments) if i != skip]
    chain = sequential_sums(seg_total[kept], axis=0) if kept else np.zeros((0, len(cv), 2))
    written = []
    for seg, (r0, r1) in enumerate(bounds):
        above = sum(1 for i in kept if i < seg)
        run = chain[above - 1] if above else np.zeros((len(cv), 2))
        if r1 > r0:
            rows = np.concatenate([run[None], table[r0:r1, cv]], 0)
            table[r0:r1, cv] = np.add.accumulate(rows, 0)[1:]  # run + row r0, then + row r0 + 1, ...
            rr, cc = np.meshgrid(np.arange(r0, r1), cv, indexing="ij")
            written.append(np.stack([rr.reshape(-1), cc.reshape(-1)], 1))
    return np.concatenate(written) if written else np.zeros((0, 2), int)


# ---- the four-kernel path ----------------------------------------------------------------------

def strip_prepass(ch, cw, count, width, fused=False, rides=False):
    """normalize.cu's strip_prepass: row and column passes in one kernel for many narrow tables;
    rides: the other stack takes it, and this one (of any count) rides along in its launch."""
    return (not fused and 1 < ch <= STRIP_MAX_HEIGHT and segs_for(cw, fused) == 0
            and (count >= STRIP_MIN_COUNT or rides) and width <= STRIP_MAX_WIDTH)


def sampled_table(read_width, ch, cw, count, fused=False):
    """normalize.cu's sampled_table: a stack's tables keep only the columns the epilogue reads where
    that leaves out an eighth or more and the whole tables (16 bytes a cell) come to at least
    kSampledMinBytes."""
    whole = count * (ch + 1) * (cw + 1) * 16
    return (not fused and segs_for(cw, fused) == 0 and whole >= SAMPLED_MIN_BYTES
            and 8 * read_width <= 7 * (cw + 1))


@pytest.mark.parametrize("args,want", [
    (["--left", "254x254", "--right", "254x254", "--max-shift", 1], (False, False)),  # 255 x 255 x 16 B < 1 MiB
    (["--left", "255x255", "--right", "255x255", "--max-shift", 1], (True, True)),    # 256 x 256 x 16 B = 1 MiB
    (["--form", "n-to-m", "--left", "16:100x100", "--right", "100x100", "--max-shift", 1], (True, False)),  # 16 tables of 163 KB, one
    (["--left", "4096x4096", "--right", "16x16", "--mode", "valid"], (False, False)),  # reads most left columns
])
def test_sampled_tables_where(xcorr, args, want):
    """Which stacks keep only the columns the epilogue reads (`xcorr explain`): the C++ choice equals
    this file's model on each stack, from the crop and the columns read that explain reports, and
    the threshold falls where the model puts it (a stack of tables under kSampledMinBytes stays
    whole: sampling it saves little traffic and sends every element through the sampled epilogue)."""
    import json
    import subprocess
    from conftest import binary
    form = [] if "--form" in args else ["--form", "one-to-one"]
    r = subprocess.run([binary("xcorr"), "explain", "--gpu", "none", "--json", *form, *map(str, args),
                        "--normalize", "zncc"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)["normalization_crop"]
    counts = {"left": 16 if "16:100x100" in args else 1, "right": 1}
    got = []
    for side in ("left", "right"):
        r0, r1, c0, c1 = c[side]
        s = c["prepass"][side]
        read = sum(n for _, n in c["table_columns"][side])
        assert s["sampled"] == sampled_table(read, r1 - r0, c1 - c0, counts[side], s["fused"]), (side, c)
        assert s["table_columns"] == (read if s["sampled"] else c1 - c0 + 1)
        got.append(s["sampled"])
    assert tuple(got) == want


def strip_columns(table, ch, skip=None):
    """strip_prepass_kernel's column sums over a table of row sums ((ch+1) x width x 2), in place:
    strips of STRIP_ROWS rows; thread c adds the strip's rows in order to its column's carry (+0 at
    first) and writes each sum (the threads, one a column, vectorized). Returns the cells written
    (k x 2: row, column). skip: a strip whose carry is dropped (a fault the tests must catch)."""
    width = table.shape[1]
    carry = np.zeros((width, 2))
    written = []
    for strip, r0 in enumerate(range(0, ch, STRIP_ROWS)):
        rows = min(STRIP_ROWS, ch - r0)
        buf = table[r0 + 1:r0 + 1 + rows].copy()  # the strip's row sums, in shared memory
        acc = np.zeros((width, 2)) if strip == skip else carry
        for k in range(rows):
            acc = acc + buf[k]
            table[r0 + k + 1] = acc
            written.append(np.stack([np.full(width, r0 + k + 1), np.arange(width)], 1))
        carry = acc
    return np.concatenate(written) if written else np.zeros((0, 2), int)


def split_path(x, count=1, skip=None):
    """partial_sums_kernel, means_kernel, row_scan_kernel, col_scan_kernel (or the banded column
    pass, for a stack of `count` such crops) on one crop x (ch x cw float32): (mean, x' float32,
    table (ch+1) x (cw+1) x 2). Independent threads (of a block, of a row's warps, of the column
    blocks) are vectorized; each thread's own additions stay in its order."""
    ch, cw = x.shape
    flat = x.reshape(-1)
    elems = ch * cw
    P = partials_for(elems)
    partial = []
    for b in range(P):
        begin, end = elems * b // P, elems * (b + 1) // P
        v = np.zeros(THREADS)  # thread t adds elements begin + t, begin + t + THREADS, ... in order from +0
        for k0 in range(begin, end, THREADS):
            e = flat[k0:min(end, k0 + THREADS)].astype(np.float64)  # thread t's element k0 + t
            v[:len(e)] = v[:len(e)] + e
        partial.append(block_sum(v))
    mean = mean_of(partial, ch, cw)
    if segs_for(cw):  # rows past kSegRow: the segmented row pass
        xs, table = segmented_rows(x, mean)
    else:
        table = np.zeros((ch + 1, cw + 1, 2))
        # one warp per row (any order: rows are independent; all rows' warps at once)
        strip = strip_prepass(ch, cw, count, cw + 1)
        xs, table[1:] = scan_row(x, mean, cw, chunked_rows(ch, cw, strip), runs=strip)
    before = table.copy()
    cells = np.zeros((ch + 1, cw + 1), int)  # writes per table cell
    if strip_prepass(ch, cw, count, cw + 1):  # strip_prepass_kernel: the column sums in the same kernel
        count_writes(cells, strip_columns(table, ch, skip))
    else:
        bands = col_bands_for(ch, cw, count, cw + 1)
        blocks = -(-(cw + 1) // WARP)  # col_scan_kernel's blocks of 32 columns (lane = column), together
        count_writes(cells, scan_columns(table, ch, np.arange(blocks)[:, None] * WARP + np.arange(WARP),
                                         SEGMENTS * bands, skip))
    assert (cells[0] == 0).all() and (cells[1:] == 1).all()  # every cell of rows 1..ch once, row 0 never
    if ch == 1:  # the host skips the column pass of one-row crops: it must change no bit
        assert np.array_equal(before.view(np.uint64), table.view(np.uint64))
    return mean, xs, table


# ---- fused_prepass_kernel ------------------------------------------------------------------------

def fused_path(x, stride_w=None):
    """fused_prepass_kernel on one crop x (ch x cw float32) of an input of width stride_w (the crop
    at column 0): (mean, x', table), checking its mapping's coverage. The block's threads (and its
    warps' rows) are vectorized; each thread's own additions stay in its order."""
    ch, cw = x.shape
    assert fits_fused(ch, cw)
    w = stride_w or cw
    src = np.zeros((ch, w), np.float32)
    src[:, :cw] = x
    src_flat = src.reshape(-1)
    elems, w1 = ch * cw, cw + 1
    crop = np.full(elems, np.nan, np.float32)  # shared memory, poisoned
    loads = np.zeros(elems, int)
    v = np.zeros(THREADS)
    for k0 in range(0, elems, THREADS):  # thread t's load of element i = k0 + t, added in order from +0
        i = k0 + np.arange(THREADS)
        on = i < elems
        i = i[on]
        r = i // cw
        e = src_flat[r * w + (i - r * cw)]
        crop[i] = e
        np.add.at(loads, i, 1)
        v[on] = v[on] + e.astype(np.float64)
    assert (loads == 1).all()
    mean = mean_of([block_sum(v)], ch, cw)
    table = np.full((ch + 1, w1, 2), np.nan)  # shared memory, poisoned: a read before a write shows
    xs = np.full((ch, cw), np.nan, np.float32)
    table[0, :] = 0  # threads over row 0
    rows_done = np.zeros(ch, int)
    for warp in range(WARPS):
        rows = np.arange(warp, ch, WARPS)  # the warp's rows (independent: scanned together)
        if len(rows):
            xs[rows], table[rows + 1] = scan_row(crop.reshape(ch, cw)[rows], mean, cw)
            np.add.at(rows_done, rows, 1)
    assert (rows_done == 1).all()
    assert not np.isnan(table).any() and not np.isnan(xs).any()
    cells = np.zeros((ch + 1, w1), int)  # writes per table cell; the blocks of 32 columns together
    count_writes(cells, scan_columns(table, ch, np.arange(0, w1, WARP)[:, None] + np.arange(WARP)))
    assert (cells[0] == 0).all() and (cells[1:] == 1).all()
    out = np.full(((ch + 1) * w1, 2), np.nan)  # the copy-out, threads striding over the cells
    flat = table.reshape(-1, 2)
    written = np.zeros(len(out), int)
    # thread t copies cells t, t + THREADS, ... (all threads together)
    i = (np.arange(-(-len(out) // THREADS))[:, None] * THREADS + np.arange(THREADS)).reshape(-1)
    i = i[i < len(out)]
    out[i] = flat[i]
    np.add.at(written, i, 1)
    assert (written == 1).all()
    return mean, xs, out.reshape(ch + 1, w1, 2)


def long_tables(xs):
    """Summed-area tables of the float32 x', summed in extended precision (x86's 64-bit-mantissa long
    double): a float64 cumsum down 9000 rows is itself off by 1.4e-13 of the total, more than the
    kernels' orders are (3e-15)."""
    assert np.finfo(np.longdouble).nmant >= 63, "needs an extended-precision long double"
    x = xs.astype(np.longdouble)
    t = np.zeros((x.shape[0] + 1, x.shape[1] + 1, 2), np.longdouble)
    t[1:, 1:, 0] = np.cumsum(np.cumsum(x, 0), 1)
    t[1:, 1:, 1] = np.cumsum(np.cumsum(x * x, 0), 1)
    return t


def exact_tables(xs):
    """long_tables rounded to float64."""
    return long_tables(xs).astype(np.float64)


def largest(fits):
    """The largest n with fits(n) (fits monotone)."""
    n = 1
    while fits(n + 1):
        n += 1
    return n


EDGE_1XN = largest(lambda n: fits_fused(1, n))
EDGE_NX1 = largest(lambda n: fits_fused(n, 1))
EDGE_SQ = largest(lambda n: fits_fused(n, n))
FUSED_SHAPES = [(1, 1), (1, 2), (2, 1), (1, 31), (1, 32), (1, 33), (1, 97), (5, 1), (64, 1), (65, 1), (3, 5),
                (7, 8), (8, 7), (9, 9), (17, 31), (23, 21), (39, 37), (33, 64), (40, 95),
                (1, EDGE_1XN), (EDGE_NX1, 1), (EDGE_SQ, EDGE_SQ), (EDGE_SQ - 1, EDGE_SQ + 1)]


def test_threshold_edges_and_one_partial():
    """The edges the shapes below sit on, and the static_assert: no crop that fits the fused
    kernel takes more than one partial sum in the four-kernel path (so its mean is the same sum)."""
    assert fits_fused(39, 37) and fits_fused(1, EDGE_1XN) and not fits_fused(1, EDGE_1XN + 1)
    assert fits_fused(EDGE_NX1, 1) and not fits_fused(EDGE_NX1 + 1, 1)
    assert fits_fused(EDGE_SQ, EDGE_SQ) and not fits_fused(EDGE_SQ + 1, EDGE_SQ + 1)
    for ch in range(1, EDGE_NX1 + 1):
        cw = largest(lambda n: fits_fused(ch, n)) if fits_fused(ch, 1) else 0
        if cw:
            assert partials_for(ch * cw) == 1, (ch, cw)
            assert not fits_fused(ch, cw + 1)
    assert FUSED_SMEM // 20 < 2 * ELEMS_PER_PARTIAL


def crop_values(rng, shape, kind):
    if kind == "large":  # 1000 + noise: the cancellation case
        return (1000 + rng.uniform(-8, 8, shape)).astype(np.float32)
    if kind == "wide":  # magnitudes 1e-15 .. 1e15: double sums of these round, so the order shows
        return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-15, 15, shape)).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", FUSED_SHAPES, ids=lambda s: "%dx%d" % s)
def test_fused_prepass_equals_the_four_kernel_path(shape):
    rng = seeded_rng(("fused-prepass", shape))
    for kind in ("signed", "large", "wide"):
        x = crop_values(rng, shape, kind)
        m1, xs1, t1 = split_path(x)
        m2, xs2, t2 = fused_path(x, stride_w=shape[1] + 3)
        assert m1 == m2 or (np.isnan(m1) and np.isnan(m2)), (kind, m1, m2)
        assert np.array_equal(xs1.view(np.uint32), xs2.view(np.uint32)), kind
        assert np.array_equal(t1.view(np.uint64), t2.view(np.uint64)), kind  # bit-identical, signs of 0 too
        if kind == "wide":
            continue  # rounding relative to the largest terms: the bounds below are for data of one scale
        # Against float64 summed-area tables of the same x' (rounding only).
        want = exact_tables(xs1)
        scale = np.abs(xs1.astype(np.float64)).sum() + 1e-300
        assert np.abs(t1[..., 0] - want[..., 0]).max() <= 1e-13 * scale, kind
        scale2 = (xs1.astype(np.float64) ** 2).sum() + 1e-300
        assert np.abs(t1[..., 1] - want[..., 1]).max() <= 1e-13 * scale2, kind
        assert abs(m1 - x.astype(np.float64).mean()) <= 1e-13 * max(1.0, abs(m1)), kind


SEQ_ROW_COLS = constant("kSeqRowCols")


def seq_row(x):
    """normalize.cu's seq_row: one thread writes its table row, entry 0 zero and then the crop row's
    x' added in column order from +0, x'² exact (a float's square fits a double), no contraction.
    x may be (rows, cw): a thread per row, the threads vectorized."""
    x = np.asarray(x).astype(np.float64)
    a = q = np.zeros(x.shape[:-1])
    out = np.full(x.shape[:-1] + (x.shape[-1] + 1, 2), np.nan)
    out[..., 0, :] = 0
    for c in range(x.shape[-1]):
        v = x[..., c]
        a = a + v
        q = q + v * v
        out[..., c + 1, 0], out[..., c + 1, 1] = a, q
    return out


def rebuilt_table(xs):
    """The staged epilogue's left table with rebuild_left (normalize.cu, epilogue_kernel): from the
    staged shifted copy xs itself, row 0 zero; crops of at most kSeqRowCols columns: seq_row per
    row, then one thread per column adding the rows in order from +0 (add_down); wider ones:
    scan_row with mean 0 per row, then scan_columns. The shifted copy is not written again.
    (The rows' threads or warps, and the columns' threads, are independent: vectorized.)"""
    ch, cw = xs.shape
    table = np.full((ch + 1, cw + 1, 2), np.nan)  # shared memory, poisoned
    table[0, :] = 0
    if cw <= SEQ_ROW_COLS:
        table[1:] = seq_row(xs)  # a thread per row
    else:
        again, table[1:] = scan_row(xs, 0.0, cw)  # a warp per row
        assert np.array_equal(again.view(np.uint32), xs.view(np.uint32))  # float(x' - 0) is x'
    if cw <= SEQ_ROW_COLS:
        table[1:] = sequential_sums(table[1:], axis=0)  # add_down: thread c, rows in order from +0
    else:
        scan_columns(table, ch, np.arange(0, cw + 1, WARP)[:, None] + np.arange(WARP))
    return table


@pytest.mark.parametrize("shape", FUSED_SHAPES, ids=lambda s: "%dx%d" % s)
def test_epilogue_rebuilds_the_left_tables(shape):
    """Prepass::rebuild_left's premise: the table the staged epilogue builds from the shifted copy
    is a float64 summed-area table of it to rounding, in a fixed order (the same bits twice), on
    signed data, 1000 + noise and magnitudes 1e-15 .. 1e15; for crops wider than kSeqRowCols (scan_row
    with mean 0) it is the fused prepass's table bit for bit (signs of zero too), and for narrower
    ones (seq_row) a model that skips a column's addition fails the check. And the prepass's
    element-by-element shifted copy is the one its row pass writes."""
    rng = seeded_rng(("rebuild-left", shape))
    for kind in ("signed", "large", "wide"):
        x = crop_values(rng, shape, kind)
        mean, xs, table = fused_path(x, stride_w=shape[1] + 3)
        rebuilt = rebuilt_table(xs)
        assert check_tables(x, mean, xs, rebuilt), kind
        assert np.array_equal(rebuilt.view(np.uint64), rebuilt_table(xs).view(np.uint64)), kind
        if shape[1] > SEQ_ROW_COLS:
            assert np.array_equal(rebuilt.view(np.uint64), table.view(np.uint64)), kind
        elif shape[1] > 1 and kind == "signed":  # the check can fail: one column's term left out
            broken = rebuilt.copy()
            col = xs[:, 1].astype(np.float64)
            broken[1:, 2:, 0] -= np.cumsum(col)[:, None]
            broken[1:, 2:, 1] -= np.cumsum(col * col)[:, None]
            assert not check_tables(x, mean, xs, broken), kind
        # and the prepass's shifted copy without a table (element by element) is scan_row's
        alone = (x.astype(np.float64) - mean).astype(np.float32)
        assert np.array_equal(alone.view(np.uint32), xs.view(np.uint32)), kind


@pytest.mark.parametrize("shape", [(91, 91), (100, 100), (1, 9000), (9000, 1), (130, 257)], ids=lambda s: "%dx%d" % s)
def test_four_kernel_path_on_large_crops(shape):
    """Crops past the threshold (one or more partial sums): the four-kernel path alone, against
    float64 (its order is still fixed: the same input gives the same bits)."""
    assert not fits_fused(*shape)
    rng = seeded_rng(("split-prepass", shape))
    x = crop_values(rng, shape, "large")
    m, xs, t = split_path(x)
    assert partials_for(x.size) == max(1, min(x.size // ELEMS_PER_PARTIAL, MAX_PARTIALS))
    assert abs(m - x.astype(np.float64).mean()) <= 1e-13 * abs(m)
    assert check_tables(x, m, xs, t)
    m2, xs2, t2 = split_path(x)
    assert m == m2 and np.array_equal(t.view(np.uint64), t2.view(np.uint64))


def test_model_constants_match_the_source():
    """The model's constants are the kernel file's, and its C++ threshold is the one modelled."""
    assert (THREADS, SEGMENTS, ELEMS_PER_PARTIAL) == (256, 8, 4096)
    assert "fused_smem_bytes(ch, cw) <= kFusedSmemBytes" in SOURCE
    assert "table_bytes(int ch, int cw) { return size_t(ch + 1) * size_t(cw + 1) * sizeof(double2); }" in SOURCE
    assert "fused_smem_bytes(int ch, int cw) { return table_bytes(ch, cw) + size_t(ch) * size_t(cw) * sizeof(float); }" \
        in SOURCE


STAGED_BYTES = constant("kStagedEpilogueBytes")
STAGED_MIN_OUTPUTS = constant("kStagedMinOutputs")


def use_staged_epilogue(crop_l, crop_r, out_hw, count):
    """normalize.cu's use_staged_epilogue: (h, w) of the crops and of one output, outputs."""
    cells = (crop_l[0] + 1) * (crop_l[1] + 1) + (crop_r[0] + 1) * (crop_r[1] + 1)
    per = out_hw[0] * out_hw[1]
    return cells * 16 <= STAGED_BYTES and 8 * per >= 2 * cells and count >= STAGED_MIN_OUTPUTS


def strip_over_fused(ch, cw, count, width):
    """normalize.cu's strip_over_fused: a stack of crops past kStripOverFusedBytes of the fused
    prepass's shared memory that the strip prepass takes when not fused (tables `width` wide)."""
    return fused_smem_bytes(ch, cw) > STRIP_OVER_FUSED and strip_prepass(ch, cw, count, width)


def prepass_paths(crop_l, crop_r, counts=(1, 1), widths=None):
    """(left fused, right fused) as the Normalizer chooses (normalize.cu): both or neither, and
    neither where a stack would rather take the strip prepass. widths: the tables' when not fused."""
    widths = widths or (crop_l[1] + 1, crop_r[1] + 1)
    both = (fits_fused(*crop_l) and fits_fused(*crop_r) and
            not any(strip_over_fused(*c, n, w) for c, n, w in zip((crop_l, crop_r), counts, widths)))
    return both, both


def test_path_choices_on_zncc_frames_and_neighbours():
    """zncc_frames (1000 frames of 256 x 256, a 23 x 21 template within ±16: crops 39 x 37 and
    23 x 21): both stacks take the fused prepass (the frames' 30 KB, no opt-in past 48 KB needed) and
    the epilogue stages its 32 KB of tables; a window of one shift, a handful of outputs, or tables
    past the limit keep the unstaged epilogue."""
    assert fits_fused(39, 37) and fits_fused(23, 21) and fused_smem_bytes(39, 37) <= 48 * 1024
    assert use_staged_epilogue((39, 37), (23, 21), (33, 33), 1000)
    assert not use_staged_epilogue((23, 21), (23, 21), (1, 1), 1000)  # max_shift 0: 8 reads of 1056 cells
    assert not use_staged_epilogue((39, 37), (23, 21), (33, 33), 8)
    assert not use_staged_epilogue((70, 70), (40, 40), (31, 31), 1000)  # 113 KB of tables
    assert not fits_fused(256, 256)  # the whole frames (full window): the four-kernel path
    assert prepass_paths((39, 37), (23, 21)) == (True, True)
    # its 1000 frames too: 39 x 37 crops need 34 KB of the fused prepass (six blocks per SM)
    assert prepass_paths((39, 37), (23, 21), (1000, 1), (38, 22)) == (True, True)
    assert fused_smem_bytes(39, 37) <= STRIP_OVER_FUSED < fused_smem_bytes(69, 70)
    # the 53 x 54 template's frames (85 x 86 crops, 149 KB) take the four kernels: the template rides along
    assert not fits_fused(85, 86) and fits_fused(53, 54) and prepass_paths((85, 86), (53, 54)) == (False, False)


def test_staged_copy_covers_both_tables_once():
    """The staged epilogue's copy: threads striding over the left cells, then the right ones, each
    cell of staged[] written exactly once, from the same offset of its table (the n-to-m reuse of
    the right table skips the second copy only: the cells stay where the first put them)."""
    for lh, lw, rh, rw in [(39, 37, 23, 21), (1, 100, 1, 20), (60, 1, 9, 1), (3, 4, 5, 6)]:
        lcells, rcells = (lh + 1) * (lw + 1), (rh + 1) * (rw + 1)
        src = np.concatenate([np.arange(lcells), 10**6 + np.arange(rcells)])
        staged = np.full(lcells + rcells, -1)
        writes = np.zeros(lcells + rcells, int)
        for t in range(THREADS):
            for i in range(t, lcells, THREADS):
                staged[i] = src[i]
                writes[i] += 1
            for i in range(t, rcells, THREADS):
                staged[lcells + i] = src[lcells + i]
                writes[lcells + i] += 1
        assert (writes == 1).all() and (staged == src).all()


# ---- the segmented row pass (rows past kSegRow columns) --------------------------------------------

def check_tables(x, mean, xs, t):
    """x' is exactly float(x - mean) (as scan_row writes it), and the tables of x' are float64
    summed-area tables of it to rounding: a segment skipped or counted twice is off by a whole
    segment's sum, far past the bound."""
    assert np.array_equal(xs.view(np.uint32), (x.astype(np.float64) - mean).astype(np.float32).view(np.uint32))
    # The reference in long double: float64's own cumsum of a long row rounds n times in sequence,
    # past the bound below, which the scans' short chains meet.
    want = long_tables(xs)
    err_a = float(np.abs(t[..., 0] - want[..., 0]).max())
    err_q = float(np.abs(t[..., 1] - want[..., 1]).max())
    return bool(err_a <= 1e-13 * np.abs(xs.astype(np.float64)).sum() and
                err_q <= 1e-13 * (xs.astype(np.float64) ** 2).sum())


SEGMENTED_SHAPES = [
    (1, SEG_ROW + 1),                     # just past the threshold: the last segment one column
    (1, 5 * SEG_COLS),                    # a segment boundary exactly at the row's end
    (1, 5 * SEG_COLS + 1),
    (1, 7 * SEG_COLS - 33),               # odd, the last segment ending mid-strip
    (3, SEG_ROW + 2 * SEG_COLS + 777),    # several rows (row 0's zero cells per segment)
    (2, 33 * SEG_COLS + 5),               # 34 segments: the carry scan crosses a chunk of 32
]


@pytest.mark.parametrize("shape", SEGMENTED_SHAPES, ids=lambda s: "%dx%d" % s)
def test_segmented_row_pass(shape):
    """Long rows: the segmented row pass's mapping writes everything once (segmented_rows' asserts),
    its tables are float64 summed-area tables of x' to rounding, its shifted copy is exactly
    float(x - mean) (as scan_row writes it), and the order is fixed (the same bits twice)."""
    ch, cw = shape
    assert segs_for(cw) == -(-cw // SEG_COLS) > SEG_ROW // SEG_COLS and not fits_fused(ch, cw)
    rng = seeded_rng(("segmented-rows", shape))
    for kind in ("signed", "large"):
        x = crop_values(rng, shape, kind)
        m, xs, t = split_path(x)
        assert check_tables(x, m, xs, t), kind
        # The entries of segment 0 are scan_row's own (the same strips from carry 0).
        xs0, row0 = scan_row(x[0], m, cw)
        assert np.array_equal(row0[:SEG_COLS + 1].view(np.uint64), t[1, :SEG_COLS + 1].view(np.uint64))
        assert np.array_equal(xs0.view(np.uint32), xs[0].view(np.uint32))
        m2, xs2, t2 = split_path(x)
        assert m == m2 and np.array_equal(t.view(np.uint64), t2.view(np.uint64))


SEG_ROW_DEPTH = constant("kSegRowDepth", kSegCols=SEG_COLS)


def test_segment_carries_are_compensated():
    """seg_carry_kernel's carries on a zero-padded signal's segment totals (20000 segments, the
    first 50 of data, the rest all -m: every total the same): each carry within 2u of its exact
    value, where the plain running carry it replaced is off by ~100u (the same rounding repeated:
    zero padding is exactly the case where such errors add up instead of cancelling). zncc_factor's
    bound caps a segmented row's depth at kSegRowDepth on the strength of this."""
    rng = seeded_rng("segment-carries")
    n = 20000
    m = float(np.float32(0.2 + 0.1 * rng.random()))
    t = np.stack([np.full(n, -SEG_COLS * m), np.full(n, SEG_COLS * m * m)], 1)
    t[:50, 0] += rng.standard_normal(50) * 45
    t[:50, 1] += rng.random(50) * SEG_COLS
    exact = np.zeros((n, 2), np.longdouble)
    exact[1:] = np.cumsum(t.astype(np.longdouble), 0)[:-1]
    u = 2.0 ** -53

    def worst(out):
        return float((np.abs(out[1:, 1] - exact[1:, 1]) / (u * exact[1:, 1])).max())
    assert worst(segment_carries(t)) <= 2.0
    assert worst(segment_carries(t, compensated=False)) > 20.0


def test_segmented_entries_meet_the_capped_rounding_bound():
    """A zero-padded signal of 100 segments (data in its first 3000 samples, with an offset; then
    zeros, so x' = -m): every table entry of the segmented row pass within (kSegRowDepth + 1)·u of
    its Σ|terms| (zncc_factor's bound with the column term capped; the column pass of one row adds
    nothing), and the source's cap is the depth that bound is derived with."""
    cw = 100 * SEG_COLS + 77
    x = np.zeros((1, cw), np.float32)
    x[0, :3000] = 2.0 + seeded_rng("capped-bound").uniform(-1, 1, 3000).astype(np.float32)
    mean = float(x.astype(np.float64).mean())
    xs, t = segmented_rows(x, mean)
    exact = long_tables(xs)[1]
    absq = np.cumsum(xs[0].astype(np.float64) ** 2)
    absa = np.cumsum(np.abs(xs[0].astype(np.float64)))
    u = 2.0 ** -53
    assert (np.abs(t[1, 1:, 1] - exact[1:, 1]).astype(np.float64) <= (SEG_ROW_DEPTH + 1) * u * absq).all()
    assert (np.abs(t[1, 1:, 0] - exact[1:, 0]).astype(np.float64) <= (SEG_ROW_DEPTH + 1) * u * absa).all()
    assert SEG_ROW_DEPTH == SEG_COLS + 8 and "min(lc + nc, a.ldepth)" in SOURCE and "kSegRowDepth : INT_MAX" in SOURCE


@pytest.mark.parametrize("mutate", ["skip", "double"])
def test_segmented_faults_are_caught(mutate):
    """The check above fails on a segmented pass that skips a segment's carry or adds one twice."""
    shape = (2, SEG_ROW + 2 * SEG_COLS + 5)
    x = crop_values(seeded_rng(("segmented-fault", mutate)), shape, "signed")
    m = split_path(x)[0]
    for fault in (None, mutate):  # the same pass without the fault passes
        xs, t = segmented_rows(x, m, mutate=fault)
        blocks = -(-(shape[1] + 1) // WARP)  # col_scan_kernel's blocks of 32 columns (together)
        scan_columns(t, shape[0], np.arange(blocks)[:, None] * WARP + np.arange(WARP))
        assert check_tables(x, m, xs, t) == (fault is None)


def test_rows_up_to_the_threshold_keep_scan_row():
    """A row of exactly kSegRow columns is not segmented (row_scan_kernel's bits: scan_row, chunked
    as such a long row of a crop past the fused prepass is), one more column is; no crop the fused prepass takes has a segmented row; the host picks the path per
    stack by this width test."""
    assert segs_for(SEG_ROW) == 0 and segs_for(SEG_ROW + 1) == SEG_ROW // SEG_COLS + 1
    assert not fits_fused(1, SEG_ROW + 1) and segs_for(SEG_ROW + 1, fused=True) == 0
    assert SEG_COLS % (4 * WARP) == 0
    assert "!fused && cw > kSegRow ? ceil_div(cw, kSegCols) : 0" in SOURCE
    x = crop_values(seeded_rng("seg-threshold"), (1, SEG_ROW), "signed")
    m, xs, t = split_path(x)
    assert chunked_rows(1, SEG_ROW)
    xs1, row = scan_row(x[0], m, SEG_ROW, chunked=True)
    assert np.array_equal(row.view(np.uint64), t[1].view(np.uint64))


# ---- zero-lag's C(0, 0): partial sums over rows and column chunks ----------------------------------

def c00_split(rows, cols, count):
    """normalize.cu's c00_split: (row_parts, col_parts)."""
    want = min(max(rows * cols // (THREADS * 16), 1), MAX_C00_PARTS)
    want = max(1, min(want, (16 << 20) // count))
    row_parts = min(rows, want)
    col_parts = min(max(want // row_parts, 1), max(cols, 1))
    return row_parts, col_parts


def c00_parts_before(rows, cols, count):
    """The row split alone (before the column chunks)."""
    parts = min(max(min(rows, rows * cols // (THREADS * 16)), 1), MAX_C00_PARTS)
    return max(1, min(parts, (16 << 20) // count))


@pytest.mark.parametrize("h,w,count", [(1, 1 << 20, 1), (1, 1 << 23, 1), (1, 8640000, 4), (3, 100000, 1), (64, 8192, 2),
                                        (2048, 2048, 1), (1, 5000, 1), (7, 4097, 3), (1, 600, 300),
                                        (1, 1 << 20, 1 << 17), (5, 3, 1)])
def test_c00_partials_cover_the_overlap_once(h, w, count):
    """c00_partial_kernel's mapping: block b = rb·col_parts + cb sums rows rb, rb + row_parts, ...
    over columns [w·cb / col_parts, w·(cb + 1) / col_parts), its threads striding over them: every
    product of the h x w overlap in exactly one block and one thread; at most kMaxC00Parts blocks per
    pair and 16 Mi partials; a long 1-row pair gets many blocks; with one column chunk the split is
    the rows' alone (the sums of pairs with rows enough unchanged)."""
    rp, cp = c00_split(h, w, count)
    parts = rp * cp
    assert 1 <= parts <= MAX_C00_PARTS and (parts == 1 or parts * count <= 16 << 20)
    if cp == 1:
        assert rp == c00_parts_before(h, w, count)
    if h == 1 and w >= MAX_C00_PARTS * THREADS * 16 and count == 1:
        assert parts == MAX_C00_PARTS
    # Each column of [c0, c1) is thread (c - c0) % THREADS's, once: the block's union is the chunk.
    cover = np.zeros((h, w), int)
    for b in range(parts):
        rb, cb = divmod(b, cp)
        c0, c1 = w * cb // cp, w * (cb + 1) // cp
        cover[rb::rp, c0:c1] += 1
    assert (cover == 1).all()
    assert "c00_partial_kernel<<<dim3(split.parts()" in SOURCE


@pytest.mark.parametrize("cw", [40, 5000, SEG_ROW + SEG_COLS + 3])
def test_one_row_column_pass_changes_nothing(cw):
    """The host skips the column pass of one-row crops (split_path asserts it would write the same
    bits): here on rows of signed zeros, exact means (x' = +0) and -0.0 inputs, where a -0 entry
    would show (0 + -0 = +0)."""
    rng = seeded_rng(("one-row", cw))
    for x in (np.full((1, cw), -0.0, np.float32), np.full((1, cw), 3.0, np.float32),
              np.where(rng.random((1, cw)) < 0.5, np.float32(-0.0), crop_values(rng, (1, cw), "signed"))):
        split_path(x)
    assert "if (cl.h() == 1) colwise.left.count = 0;" in SOURCE and "if (cr.h() == 1) colwise.right.count = 0;" in SOURCE


# ---- the banded column pass (tall tables of few columns) -------------------------------------------

def test_band_counts():
    """col_bands_for: one band (col_scan_kernel's order, so the fused prepass's bits) for every crop
    the fused prepass takes, whatever the stack; seed 002's sampled tables (2048 rows, 130 columns,
    one matrix) 16 bands of 8 segments of 16 rows, 160 blocks per stack where col_scan_kernel had
    5; zncc_frames' 85 x 86 crops of 1000 frames keep one band; never more than kMaxColBands."""
    for ch, cw in FUSED_SHAPES:
        assert col_bands_for(ch, cw, 1, cw + 1) == 1
    assert col_bands_for(2048, 2048, 1, 130) == 16
    assert col_bands_for(85, 86, 1000, 87) == 1
    assert col_bands_for(300, 300, 1000, 301) == 1  # many matrices fill the GPU already
    assert col_bands_for(1 << 20, 3, 1, 4) == MAX_COL_BANDS
    assert "if (fits_fused(ch, cw)) return 1;" in SOURCE


@pytest.mark.parametrize("shape,count", [((1500, 9), 1), ((2049, 3), 1), ((1000, 40), 2), ((333, 70), 3)],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_banded_column_pass(shape, count):
    """Crops that take the banded column pass: every cell written once (split_path checks), the
    tables equal float64 summed-area tables of the same x' to rounding, the order fixed (the same
    bits twice); and a model whose starts leave one segment's total out fails that comparison."""
    ch, cw = shape
    bands = col_bands_for(ch, cw, count, cw + 1)
    assert bands > 1
    x = crop_values(seeded_rng(("banded", shape)), shape, "large")
    m, xs, t = split_path(x, count)
    assert check_tables(x, m, xs, t)
    want = exact_tables(xs)
    _, _, t2 = split_path(x, count)
    assert np.array_equal(t.view(np.uint64), t2.view(np.uint64))
    _, _, bad = split_path(x, count, skip=SEGMENTS * bands // 2)
    assert np.abs(bad[..., 1] - want[..., 1]).max() > 1e-6 * (xs.astype(np.float64) ** 2).sum()


# ---- the chunked row pass (long rows of crops past the fused prepass) -------------------------------

def test_chunked_rows_where():
    """Rows of 512 to kSegRow columns of a crop the fused and strip prepasses do not take; seed 002's
    2048 x 2048 crops; not zncc_frames' 85 x 86, not a 1 x 2000 signal that fits the fused kernel,
    not past kSegRow, not a strip crop (70 crops of 84 x 606 with narrow sampled tables)."""
    assert chunked_rows(2048, 2048) and chunked_rows(2, 4096) and chunked_rows(91, 600)
    assert not chunked_rows(85, 86) and not chunked_rows(1, 2000) and fits_fused(1, 2000)
    assert not chunked_rows(3, SEG_ROW + 1) and chunked_rows(3, SEG_ROW)
    assert not any(chunked_rows(ch, cw) for ch, cw in FUSED_SHAPES)
    assert strip_prepass(84, 606, 70, 11) and not chunked_rows(84, 606, strip_prepass(84, 606, 70, 11))
    assert "cw >= kLongRow && cw <= kSegRow && !fits_fused(ch, cw) && !strip" in SOURCE


def stage_v(k):
    return k + k // CHUNK


def stage_e(k):
    return (k // CHUNK) * (CHUNK + 1) + k % CHUNK


def test_chunk_stage_layouts():
    """scan_span_chunked's shared-memory stage (ChunkStage): each layout puts the chunk's 256 columns
    in distinct slots within its array; the owner lane's reads of x' (lane l, column 8l + j) hit 32
    distinct banks for each j, and the coalesced writes at most 2 lanes per bank; the entries
    (double2: 16-byte accesses, served 8 lanes a phase) hit distinct 16-byte bank quads within
    each phase, written by owners and read in the coalesced order. A layout without the padding
    (k for x', k for entries) fails the bank checks."""
    assert "return k + k / kChunk;" in SOURCE and "return (k / kChunk) * (kChunk + 1) + k % kChunk;" in SOURCE
    assert "float v[kChunkCols + kChunkCols / kChunk];" in SOURCE and "double2 e[kWarp * (kChunk + 1)];" in SOURCE
    cols = CHUNK * WARP

    def check(fv, fe):
        ok = len({fv(k) for k in range(cols)}) == cols and max(fv(k) for k in range(cols)) < cols + cols // CHUNK
        ok &= len({fe(k) for k in range(cols)}) == cols and max(fe(k) for k in range(cols)) < WARP * (CHUNK + 1)
        lanes = np.arange(WARP)
        for j in range(CHUNK):  # owner reads of x': one bank per lane
            ok &= len({fv(l * CHUNK + j) % 32 for l in lanes}) == WARP
        for i in range(CHUNK):  # coalesced writes of x': at most 2-way
            banks = [fv(i * WARP + l) % 32 for l in lanes]
            ok &= max(banks.count(b) for b in banks) <= 2
        for phase in range(4):  # 16-byte entries: 8 lanes a phase, 8 bank quads
            ph = lanes[phase * 8:(phase + 1) * 8]
            for j in range(CHUNK):  # owner writes
                ok &= len({fe(l * CHUNK + j) % 8 for l in ph}) == 8
            for i in range(CHUNK):  # coalesced reads
                ok &= len({fe(i * WARP + l) % 8 for l in ph}) == 8
        return bool(ok)

    assert check(stage_v, stage_e)
    assert not check(lambda k: k, stage_e) and not check(stage_v, lambda k: k)


@pytest.mark.parametrize("n", [1, 7, 255, 256, 257, 511, 2048, 2049, 3001])
def test_chunked_span_against_extended_precision(n):
    """scan_span_chunked: every column stored once, x' as scan_span writes it, the sums within 1e-14
    of the extended-precision ones (seed-independent order: the same bits twice), and the total its
    last entry; a model that drops a lane's prefix fails the comparison."""
    rng = seeded_rng(("chunked", n))
    x = (1000 + rng.uniform(-8, 8, n)).astype(np.float32)
    mean = float(x.astype(np.float64).mean())
    xs, out, total = scan_span_chunked(x, mean, n)
    xs0, out0, total0 = scan_span(x, mean, n)
    assert np.array_equal(xs.view(np.uint32), xs0.view(np.uint32))
    want = np.cumsum(xs.astype(np.longdouble)), np.cumsum(xs.astype(np.longdouble) ** 2)
    for k in (0, 1):
        scale = float(np.abs(want[k]).max()) + 1e-300
        assert np.abs(out[:, k] - want[k].astype(np.float64)).max() <= 1e-14 * max(scale, float(want[1][-1])), k
    assert total == (out[-1, 0], out[-1, 1])
    assert np.array_equal(out.view(np.uint64), scan_span_chunked(x, mean, n)[1].view(np.uint64))
    if n > CHUNK:  # the same span with lane 1's prefix lost
        bad = out.copy()
        bad[CHUNK:2 * CHUNK] -= out[CHUNK - 1]
        assert np.abs(bad[:, 1] - want[1].astype(np.float64)).max() > 1e-6 * float(want[1][-1])


@pytest.mark.parametrize("n", [1, 5, 31, 32, 33, 132, 191, 192, 193, 224, 385])
def test_lane_run_rows_against_extended_precision(n):
    """The strip prepass's row order (scan_row_runs: lane_run(n) columns a lane, one warp scan a
    chunk): one chunk for rows up to 32·kLaneRunMax columns, more past it; every column stored once,
    x' as scan_span writes it, the sums within 1e-14 of the extended-precision ones, the same bits
    twice; a model that drops a lane's prefix fails the comparison."""
    k = lane_run(n)
    assert k == min(-(-n // WARP), LANE_RUN_MAX) and (k * WARP >= n) == (n <= LANE_RUN_MAX * WARP)
    rng = seeded_rng(("lane-run", n))
    x = (1000 + rng.uniform(-8, 8, n)).astype(np.float32)
    mean = float(x.astype(np.float64).mean())
    xs, row = scan_row(x, mean, n, runs=True)
    xs0, _ = scan_row(x, mean, n)
    assert np.array_equal(xs.view(np.uint32), xs0.view(np.uint32)) and (row[0] == 0).all()
    want = np.cumsum(xs.astype(np.longdouble)), np.cumsum(xs.astype(np.longdouble) ** 2)
    for i in (0, 1):
        scale = float(np.abs(want[i]).max()) + 1e-300
        assert np.abs(row[1:, i] - want[i].astype(np.float64)).max() <= 1e-14 * max(scale, float(want[1][-1])), i
    assert np.array_equal(row.view(np.uint64), scan_row(x, mean, n, runs=True)[1].view(np.uint64))
    if n > k:  # lane 1's prefix lost
        bad = row[1:].copy()
        bad[k:2 * k] -= row[k]
        assert np.abs(bad[:, 1] - want[1].astype(np.float64)).max() > 1e-6 * float(want[1][-1])


@pytest.mark.parametrize("shape", [(91, 600), (2, 4096), (130, 1030)], ids=lambda s: "%dx%d" % s)
def test_four_kernel_path_with_chunked_rows(shape):
    """Crops whose rows are chunked, through the whole four-kernel path: tables within rounding of
    extended-precision ones, the same bits twice."""
    assert chunked_rows(*shape)
    x = crop_values(seeded_rng(("chunked-crop", shape)), shape, "large")
    m, xs, t = split_path(x)
    assert check_tables(x, m, xs, t)
    assert np.array_equal(t.view(np.uint64), split_path(x)[2].view(np.uint64))


def test_means_of_large_crops_take_many_partials():
    """A 2048 x 2048 crop takes 1024 partial sums (1024 blocks of partial_sums_kernel, not 64), and
    means_kernel's warp adds them (lanes in order, then the butterfly): within rounding of the exact
    mean of the partials, and a one-partial mean is mean_of's (the fused kernel's) exactly."""
    import math
    assert partials_for(2048 * 2048) == 1024 == MAX_PARTIALS
    rng = seeded_rng("many-partials")
    parts = list(rng.uniform(4e6, 4.2e6, 1024))
    assert abs(mean_of(parts, 2048, 2048) - math.fsum(parts) / 2048**2) <= 1e-15 * (math.fsum(parts) / 2048**2)
    assert mean_of([-0.0], 3, 5) == 0.0 and math.copysign(1, mean_of([-0.0], 3, 5)) == 1  # 0 + -0 = +0, as in C++
    assert "if (s.partials == 1) {" in SOURCE


# ---- the C++ choice of paths, through `xcorr explain --json` ----------------------------------------

def explain_prepass(*args):
    import json
    import subprocess
    from conftest import binary
    r = subprocess.run([binary("xcorr"), "explain", "--gpu", "none", "--json", *map(str, args)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["normalization_crop"]["prepass"]


@pytest.mark.parametrize("left,right,window,mode", [
    ("2048x2048", "2048x2048", ["--max-shift", 64], "zero-lag"),   # seed 002: chunked, banded, sampled, 1024 partials
    ("1000:256x256", "23x21", ["--max-shift", 16], "zncc"),        # zncc_frames: the fused prepass, staged epilogue
    ("1000:256x256", "53x54", ["--max-shift", 16], "zncc"),        # 69 x 70 crops: the strip prepass over the fused
    ("1000:256x256", "156x116", ["--max-shift", 16], "zncc"),      # 172 x 132 crops: 50 of 133 columns kept
    ("1300x9", "1200x7", [], "zncc"),                              # tall: banded columns
    ("130x600", "3:100x520", [], "zero-lag"),                      # long rows: chunked
    ("1x20000", "5:1x300", ["--mode", "valid"], "zncc"),           # a 1-D signal: segmented rows
    ("600x700", "500x650", ["--max-shift", "2,3"], "zncc"),        # sampled tables of a few columns
    ("4096x4096", "16x16", ["--mode", "valid"], "zncc"),           # zncc_match: a tiny template stays whole
])
def test_explain_reports_the_modelled_prepass(left, right, window, mode):
    """The C++ choice (normalize.cu's prepass_of, which the Normalizer runs) agrees with this file's
    model of it on every stack: fused or not, partial sums, segmented rows, chunked rows, column bands
    of the table's width, and zero-lag's C(0, 0) blocks; zncc_frames keeps the fused prepass and the
    staged epilogue, seed 002 takes every new path."""
    pp = explain_prepass("--form", "one-to-one" if ":" not in left + right else
                         ("n-to-m" if ":" in left else "one-to-many"),
                         "--left", left, "--right", right, *window, "--normalize", mode)
    crops = [pp["left"], pp["right"]]
    assert crops[0]["fused"] == crops[1]["fused"]  # both stacks or neither
    for s in crops:
        assert 1 <= s["col_bands"] <= MAX_COL_BANDS and 1 <= s["partials"] <= MAX_PARTIALS
        if s["fused"]:
            assert s["col_bands"] == 1 and not s["chunked_rows"] and s["row_segments"] == 0
    if left == "2048x2048":
        for s in crops:
            assert s == {"fused": False, "partials": 1024, "row_segments": 0, "chunked_rows": True, "col_bands": 16,
                         "strip": False, "table_columns": 130, "sampled": True}
        assert pp["c00_parts"] == 1024 and not pp["staged_epilogue"]
    # the staged epilogue builds the left tables itself exactly where those are the fused prepass's
    assert pp["rebuild_left"] == (pp["staged_epilogue"] and crops[0]["fused"])
    if right == "23x21":
        assert crops[0]["fused"] and pp["staged_epilogue"] and pp["c00_parts"] == 0 and pp["rebuild_left"]
    if right == "53x54":  # 69 x 70 crops (98.8 KB with their table: two fused blocks per SM) take the
        # strip prepass (sampled tables, 50 columns), the template the four-kernel path, the unstaged epilogue
        assert fits_fused(69, 70) and strip_over_fused(69, 70, 1000, 50) and not crops[0]["fused"]
        assert prepass_paths((69, 70), (53, 54), (1000, 1), (50, 55)) == (False, False)
        assert crops[0]["col_bands"] == 1 == partials_for(69 * 70) == crops[0]["partials"]
        assert [s["table_columns"] for s in crops] == [50, 55] and [s["sampled"] for s in crops] == [True, False]
        # the template rides along in the frames' strip launch
        assert crops[0]["strip"] and crops[1]["strip"] and not pp["staged_epilogue"]
        assert not strip_prepass(53, 54, 1, 55) and strip_prepass(53, 54, 1, 55, rides=True)
    if right == "156x116":  # the frames' tables: 50 of 133 columns (368 KB a frame otherwise); the template's whole
        assert [s["table_columns"] for s in crops] == [50, 117] and [s["sampled"] for s in crops] == [True, False]
        assert crops[0]["strip"] and crops[1]["strip"]  # 1000 frames; one template, riding along
        assert crops[0]["strip"] == strip_prepass(172, 132, 1000, 50) and crops[0]["col_bands"] == 1
        assert not pp["staged_epilogue"]
    if left == "1300x9":
        assert crops[0]["col_bands"] == col_bands_for(1300, 9, 1, 10) == 11
        assert crops[1]["col_bands"] == col_bands_for(1200, 7, 1, 8) == 10
        assert not crops[0]["chunked_rows"] and crops[0]["partials"] == partials_for(1300 * 9)
    if left == "130x600":
        assert crops[0]["chunked_rows"] and crops[1]["chunked_rows"] == chunked_rows(100, 520)
        assert crops[0]["col_bands"] == col_bands_for(130, 600, 1, 601)
        assert crops[1]["col_bands"] == col_bands_for(100, 520, 3, 521)
        assert pp["c00_parts"] >= 1
    if left == "1x20000":
        assert crops[0]["row_segments"] == segs_for(20000) and not crops[0]["chunked_rows"]
        assert crops[0]["col_bands"] == 1  # one-row crops skip the column pass
    if left == "600x700":
        for s in crops:
            assert s["sampled"] and s["table_columns"] < 20 and s["chunked_rows"]
    if left == "4096x4096":  # the template's valid window reads 2 of its 17 columns; sampling its 4.6 KB
        # table would put all 16 M outputs through the sampled epilogue, for nothing
        assert [(s["sampled"], s["table_columns"]) for s in crops] == [(False, 4097), (False, 17)]


# ---- the strip prepass (many narrow tables) ----------------------------------------------------------

def test_strip_prepass_where():
    """zncc_frames' 69 x 70 and 172 x 132 crops (1000 frames, 50 table columns) take it; one matrix,
    a wide table, a one-row crop or a crop of the fused prepass do not; kStripRows is a block's warps."""
    assert strip_prepass(69, 70, 1000, 50) and strip_prepass(172, 132, 1000, 50)
    assert not strip_prepass(172, 132, 1, 50) and not strip_prepass(172, 132, 1000, STRIP_MAX_WIDTH + 1)
    # a stack of one crop rides along in the other stack's launch, within the same shape limits
    assert strip_prepass(156, 116, 1, 117, rides=True) and not strip_prepass(1, 600, 1, 601, rides=True)
    assert not strip_prepass(156, 116, 1, 117, fused=True, rides=True)
    assert not strip_prepass(1, 600, 1000, 601) and not strip_prepass(39, 37, 1000, 38, fused=True)
    assert strip_prepass(STRIP_MAX_HEIGHT, 9, 64, 10) and not strip_prepass(STRIP_MAX_HEIGHT + 1, 9, 64, 10)
    assert "constexpr int kStripRows = kThreads / kWarp;" in SOURCE


@pytest.mark.parametrize("shape", [(69, 70), (172, 132), (9, 100), (17, 300)], ids=lambda s: "%dx%d" % s)
def test_strip_prepass_tables(shape):
    """The strip prepass's tables (a stack of 1000 such crops): every cell written once, within rounding
    of extended-precision tables, the same bits twice, the shifted copy as the row pass writes it; a
    model that drops one strip's carry fails the comparison."""
    ch, cw = shape
    assert strip_prepass(ch, cw, 1000, cw + 1)
    x = crop_values(seeded_rng(("strip", shape)), shape, "large")
    m, xs, t = split_path(x, 1000)
    assert check_tables(x, m, xs, t)
    want = exact_tables(xs)
    m2, xs2, t2 = split_path(x, 1000)
    assert m == m2 and np.array_equal(t.view(np.uint64), t2.view(np.uint64))
    assert np.array_equal(xs.view(np.uint32), split_path(x, 1)[1].view(np.uint32))  # the row pass's x'
    _, _, bad = split_path(x, 1000, skip=1)
    assert np.abs(bad[..., 1] - want[..., 1]).max() > 1e-6 * (xs.astype(np.float64) ** 2).sum()


def use_template_epilogue(form, shape, window):
    """normalize.cu's use_template_epilogue: every shift of the window (dy0, dy1, dx0, dx1) keeps the
    right wholly inside the left, not n-to-mn, and the overlap (the whole right) past kDirectOverlap."""
    hL, wL, hR, wR = shape
    dy0, dy1, dx0, dx1 = window
    return (form != "n-to-mn" and dy0 >= 0 and dy1 <= hL - hR and dx0 >= 0 and dx1 <= wL - wR
            and hR * wR > KDIRECT_OVERLAP)


KDIRECT_OVERLAP = 64  # xcorr/normalize.hpp's kDirectOverlap


@pytest.mark.parametrize("form,shape,window,staged", [
    ("one-to-many", (1, 8640000, 1, 600), (0, 0, 0, 8639400), False),   # signals_matched: valid
    ("one-to-one", (4096, 4096, 16, 16), (0, 4080, 0, 4080), False),    # zncc_match: valid
    ("one-to-one", (4096, 4096, 8, 8), (0, 4088, 0, 4088), False),      # n = 64: the direct sums
    ("n-to-m", (37, 53, 29, 41), (0, 8, 0, 12), False),                 # valid, unequal
    ("n-to-m", (37, 53, 29, 41), (1, 5, 2, 12), False),                 # shifts inside valid
    ("n-to-m", (37, 53, 29, 41), (-1, 5, 2, 12), False),                # one row of shifts past it
    ("n-to-m", (37, 53, 29, 41), (0, 9, 0, 12), False),                 # dy 9: the right pokes out
    ("n-to-mn", (37, 53, 29, 41), (0, 8, 0, 12), False),                # outputs of a left not consecutive
    ("n-to-m", (256, 256, 23, 21), (-16, 16, -16, 16), True),          # zncc_frames: staged
])
def test_template_epilogue_where_the_right_stays_inside(form, shape, window, staged):
    """explain reports the template epilogue exactly where the window keeps the right wholly inside the
    left (the model above), never together with the staged one."""
    hL, wL, hR, wR = shape
    counts = {"one-to-one": (1, 1), "one-to-many": (1, 3), "n-to-m": (1000 if staged else 2, 1 if staged else 3),
              "n-to-mn": (2, 4)}[form]
    args = ["--form", form, "--left", f"{counts[0]}:{hL}x{wL}", "--right", f"{counts[1]}:{hR}x{wR}",
            "--shifts", f"{window[0]}:{window[1]},{window[2]}:{window[3]}", "--normalize", "zncc"]
    pp = explain_prepass(*args)
    assert pp["staged_epilogue"] == staged
    assert pp["template_epilogue"] == (use_template_epilogue(form, shape, window) and not staged), pp


NORMALIZE_PATHS = Path(__file__).resolve().parent.parent / "scripts" / "normalize-paths"


def test_normalize_paths_cases_take_the_paths_they_name():
    """scripts/normalize-paths (device-check -s runs it under each sanitizer) exists to run the
    staged and template epilogues, sampled tables, chunked and segmented rows and C(0, 0): each of
    its cases must still take the path it names, whatever the thresholds become."""
    import json
    import subprocess
    from conftest import binary
    r = subprocess.run(["bash", str(NORMALIZE_PATHS), "explain", binary("xcorr")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    pp = {}
    for line in r.stdout.splitlines():
        if line.strip():
            name, text = line.split(" ", 1)
            pp[name] = json.loads(text)["normalization_crop"]["prepass"]
    assert set(pp) == {"staged", "staged-wide", "signals", "sampled", "zero-lag", "fused-large", "strip", "store"}
    for name in ("staged", "staged-wide"):
        assert pp[name]["staged_epilogue"] and not pp[name]["template_epilogue"] and pp[name]["rebuild_left"], name
    # the rebuild's two row passes: seq_row for crops of at most kSeqRowCols columns, scan_row past it
    assert pp["staged"]["left"]["table_columns"] - 1 <= SEQ_ROW_COLS < pp["staged-wide"]["left"]["table_columns"] - 1
    assert pp["signals"]["template_epilogue"] and pp["signals"]["left"]["row_segments"] > 0
    assert pp["sampled"]["left"]["sampled"] and pp["sampled"]["right"]["sampled"]
    assert pp["sampled"]["left"]["chunked_rows"] and not pp["sampled"]["template_epilogue"]
    assert pp["zero-lag"]["c00_parts"] > 0
    # the fused prepass near its shared-memory limit, its tables read by the unstaged epilogue
    big = pp["fused-large"]
    assert big["left"]["fused"] and not big["staged_epilogue"] and not big["template_epilogue"]
    assert big["left"]["table_columns"] == 71 and FUSED_SMEM - 8 * 1024 < fused_smem_bytes(69, 70) <= FUSED_SMEM
    # the strip prepass on rows of two lane-run chunks (83 x 224 crops: past 32·kLaneRunMax columns)
    assert pp["strip"]["left"]["strip"] and pp["strip"]["left"]["sampled"] and pp["strip"]["right"]["strip"]
    assert strip_prepass(83, 224, 70, pp["strip"]["left"]["table_columns"]) and 224 > LANE_RUN_MAX * WARP
    # the template epilogue's problem with enough templates for a variant's store to take it
    assert pp["store"]["template_epilogue"] and 12 >= constant("kStoreNormMinRights")


def test_normalize_paths_runs_its_cases_end_to_end():
    """The script's own plumbing (inputs written, every case run and validated, the summary line
    device-check sums, the exit status), with the CPU reference in place of a GPU variant; a case
    that fails must fail the script."""
    import subprocess
    from conftest import binary
    r = subprocess.run(["env", f"PYTHON={sys.executable}", "bash", str(NORMALIZE_PATHS), "none", binary("xcorr"), "reference"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [l.split()[1] for l in r.stdout.splitlines() if l.startswith("ok ")] == ["staged", "staged-wide", "signals",
                                                                                    "sampled", "zero-lag",
                                                                                    "fused-large", "strip", "store"]
    assert r.stdout.rstrip().splitlines()[-1] == "8 passed, 0 failed, 0 skipped"
    bad = subprocess.run(["env", f"PYTHON={sys.executable}", "bash", str(NORMALIZE_PATHS), "none", binary("xcorr"), "no-such-variant"],
                         capture_output=True, text=True, timeout=300)
    # every case of the unknown variant fails (the store case runs by its own variant, fft-fused)
    counts = re.fullmatch(r"(\d+) passed, (\d+) failed, 0 skipped", bad.stdout.rstrip().splitlines()[-1])
    assert bad.returncode == 1 and counts and int(counts[2]) >= 7 and int(counts[1]) + int(counts[2]) == 8, bad.stdout
    assert "FAIL staged " in bad.stdout


@pytest.mark.parametrize("variant", ["register-tiled", "fft-fused"])
def test_gpu_normalize_paths_validate(gpu, variant):
    """The paths only scripts/normalize-paths' problems take (the staged epilogue with its rebuilt
    left tables needs >= 256 outputs; the validator's shapes have fewer), validated against the
    float64 reference on the GPU, not only under the sanitizers: a left table row missing its zero
    entry passed every other GPU test and failed here. register-tiled runs every case (the store
    case by fft-fused, its own); fft-fused (zncc_frames' fastest) the two staged ones, which it is
    for (not every case is a problem it takes), and the store case."""
    import subprocess
    from conftest import binary
    r = subprocess.run(["env", f"PYTHON={sys.executable}", "bash", str(NORMALIZE_PATHS), "none", binary("xcorr"), variant], capture_output=True,
                       text=True, timeout=600)
    if variant == "register-tiled":
        assert r.returncode == 0 and r.stdout.rstrip().splitlines()[-1] == "8 passed, 0 failed, 0 skipped", \
            r.stdout + r.stderr
    else:
        lines = r.stdout.splitlines()
        assert "ok   staged" in lines and "ok   staged-wide" in lines and "ok   store" in lines, r.stdout + r.stderr


@pytest.mark.parametrize("variant", ["tensor-hankel-tf32", "tensor-hankel"])
@pytest.mark.parametrize("form,counts", [("one-to-many", (1, 12)), ("n-to-m", (2, 9))])
def test_gpu_store_norm_writes_the_template_epilogues_bits(gpu, tmp_path, variant, form, counts):
    """Matched filtering's ZNCC in tensor-hankel's store (xcorr/store_norm.hpp, offered where the
    template epilogue would run with >= 8 outputs per left): validated against the float64
    reference, and bit for bit the output of the same variant with the epilogue
    (XCORR_NO_STORE_NORM), on signed data with a large mean and a zero-padded start."""
    import os
    import subprocess
    from conftest import binary
    rng = np.random.default_rng(20261124)
    nl, nr = counts
    # the store is offered here (else both runs would be the epilogue's and the bitwise check empty):
    # the template epilogue's problem, with enough outputs per left
    assert nr >= constant("kStoreNormMinRights")
    assert explain_prepass("--dims", 1, "--form", form, "--left", f"{nl}:3001" if nl > 1 else "3001", "--right",
                           f"{nr}:117", "--mode", "valid", "--normalize", "zncc")["template_epilogue"]
    left = (5.0 + rng.uniform(-1, 1, (nl, 3001))).astype(np.float32)
    right = rng.uniform(-1, 1, (nr, 117)).astype(np.float32)
    right[3] = 0.25  # a constant template: its coefficients are 0 (the contract)
    left[:, :1000] = 0  # zero padding: the windows wholly inside it are 0 too (zncc_factor's rounding bound)
    if nl == 1:
        left = left[0]
    np.save(tmp_path / "l.npy", left)
    np.save(tmp_path / "r.npy", right)
    outs = []
    for env in ({}, {"XCORR_NO_STORE_NORM": "1"}):
        out = tmp_path / f"out{len(outs)}.npy"
        r = subprocess.run([binary("xcorr"), "run", "--algorithm", variant, "--validate", "--form", form, "--dims", "1",
                            str(tmp_path / "l.npy"), str(tmp_path / "r.npy"), "--out", str(out), "--mode", "valid",
                            "--normalize", "zncc", "--precision", "tf32" if variant.endswith("tf32") else "fp32"],
                           capture_output=True, text=True, timeout=300,
                           env={**os.environ, **env})
        assert r.returncode == 0, r.stdout + r.stderr
        outs.append(np.load(out))
    assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    per_pair = outs[0].reshape(nl, nr, -1)  # output k = l·nr + q (one-to-many: l = 0)
    assert np.all(per_pair[:, 3] == 0) and np.any(per_pair[:, 4] != 0)


def valid_zncc_float64(L, R):
    """The contract's zncc over the valid window of one 2-D pair, in float64: xcorr_np's formula
    (zncc_of) on box sums of the centred matrices (cumulative sums; the cross term by scipy's FFT
    convolution), for images too large for xcorr_np's direct correlations."""
    from scipy.signal import fftconvolve
    from xcorr_np import centred, zncc_of
    (L, vl), (R, vr) = centred(L), centred(R)
    h, w = R.shape

    def box(X):
        c = np.zeros((X.shape[0] + 1, X.shape[1] + 1))
        c[1:, 1:] = X.cumsum(0).cumsum(1)
        return c[h:, w:] - c[:-h, w:] - c[h:, :-w] + c[:-h, :-w]
    sl, sll = box(L), box(L * L)
    return zncc_of(np.full_like(sl, h * w), sl, R.sum(), sll, (R * R).sum(), fftconvolve(L, R[::-1, ::-1], mode="valid"),
                   vl, vr)


@pytest.mark.parametrize("form,images,image,templates,template", [
    ("one-to-many", 1, (237, 251), 12, (21, 17)),  # transform 256
    ("n-to-m", 2, (301, 280), 9, (30, 25)),        # 384 (mixed radix: 18 outputs)
    ("one-to-many", 1, (1000, 990), 8, (31, 29)),  # 1024: template matching's size in the reductions experiment
])
def test_gpu_fft_fused_writes_zncc_in_its_store(gpu, monkeypatch, form, images, image, templates, template):
    """Template matching's ZNCC in fft-fused's last pass (FftFused::takes_store_norm: its staged
    path, the template epilogue's valid window, >= kStoreNormMinRights templates an image): the
    plan says so, every planted copy is found at its position with coefficient 1, a constant
    template gives 0s, the output (poisoned beforehand) is within the contract's 1e-4 of float64,
    and bit for bit the epilogue's (XCORR_NO_STORE_NORM=1, whose plan does not say so)."""
    pkg = package("fft-fused")
    assert templates >= constant("kStoreNormMinRights")
    rng = seeded_rng(("fft-fused-store-norm", form, image))
    th, tw = template
    right = rng.standard_normal((templates, th, tw)).astype(np.float32)
    right[3] = 0.25  # a constant template: its coefficients are 0 (the contract)
    left = (40.0 + rng.uniform(-1, 1, (images, *image))).astype(np.float32)  # a large offset
    planted = []  # (image, template, row, column)
    for i in range(images):
        for j, (y, x) in ((0, (7, 11)), (templates - 1, (image[0] - th - 5, image[1] - tw - 2))):
            left[i, y:y + th, x:x + tw] = 40.0 + 0.5 * right[j]  # an affine copy: coefficient 1
            planted.append((i, j, y, x))
    kw = dict(form=form, normalize="zncc", algorithm="fft-fused", mode="valid")
    plan = pkg.Plan(left.shape, right.shape, **kw)
    assert "fft-fused's own store" in plan.explain(), plan.explain()
    got = run_poisoned(plan, left, right).reshape(images, templates, image[0] - th + 1, image[1] - tw + 1)
    for i, j, y, x in planted:
        assert np.unravel_index(np.argmax(got[i, j]), got[i, j].shape) == (y, x)
        assert got[i, j, y, x] >= 1 - 1e-4
    assert np.all(got[:, 3] == 0) and np.any(got[:, 4] != 0)
    for i in range(images):
        for j in range(templates):
            err = np.abs(got[i, j] - valid_zncc_float64(left[i], right[j])).max()
            assert err <= 1e-4, (i, j, err)
    monkeypatch.setenv("XCORR_NO_STORE_NORM", "1")
    epilogue = pkg.Plan(left.shape, right.shape, **kw)
    assert "own store" not in epilogue.explain()
    again = run_poisoned(epilogue, left, right).reshape(got.shape)
    assert np.array_equal(got.view(np.uint32), again.view(np.uint32))


@pytest.mark.parametrize("window", [
    dict(mode="valid"),
    # windows inside the valid one (the raw problem on the image's crop, its window translated), whose
    # crops keep the transform at 1024 (at 768 a warp's span of 96 columns crosses the tiles of 128,
    # and the reduce kernels take the tile maxima)
    dict(shifts=((3, 900), (5, 800))),
    dict(shifts=((1, 900), (2, 94))),  # 93 wide: tiles of the whole width, 11 rows (row pairs straddle two)
])
def test_gpu_fft_fused_takes_zncc_peaks_tile_maxima_in_its_store(gpu, monkeypatch, window):
    """Template matching's top 5 (min_distance 15) where fft-fused stores the zncc coefficient
    (transform 1024: norm_rows_kernel<1024, true>): the store also takes each tile's maximum (Instance::set_tile_sink; the plan
    says so), so no pass over the maps precedes the selection. Every planted copy is found at its
    shift with coefficient 1, the five values are the float64 reference's to 1e-4, and the answer is
    bit for bit the reduce kernels' own tile pass's (XCORR_NO_FUSED_TILES=1, whose plan says
    nothing of it)."""
    from xcorr import _reference
    pkg = package("fft-fused")
    rng = seeded_rng(("fft-fused-tile-maxima", str(window)))
    image, (th, tw), templates = (1000, 990), (31, 29), 8
    right = rng.standard_normal((templates, th, tw)).astype(np.float32)
    left = (-30.0 + rng.uniform(-1, 1, image)).astype(np.float32)  # a large offset, negative
    (dy0, dy1), (dx0, dx1) = window.get("shifts", ((0, image[0] - th), (0, image[1] - tw)))
    planted = {0: [(dy0 + 4, dx0 + 6), (dy1 - 3, dx1 - 1)], templates - 1: [((dy0 + dy1) // 2, dx1)]}
    for j, places in planted.items():
        for y, x in places:
            left[y:y + th, x:x + tw] = -30.0 + 0.5 * right[j]  # an affine copy: coefficient 1
    kw = dict(form="one-to-many", normalize="zncc", algorithm="fft-fused", reduce="peaks", k=5, min_distance=15,
              subpixel="gaussian", **window)
    plan = pkg.Plan(left.shape, right.shape, **kw)
    assert "tile maxima taken in its store" in plan.explain() and "own store" in plan.explain(), plan.explain()
    got = plan(left, right)
    for j, places in planted.items():  # the planted templates' maps in float64, cut to the window
        ref = valid_zncc_float64(left, right[j])[dy0:dy1 + 1, dx0:dx1 + 1]
        want = _reference.peaks(ref, 5, 15, "gaussian", dy0, dx0)
        found = {tuple(s) for s in got.shift[j][:len(places)].tolist()}
        assert found == set(places), (j, got.shift[j], places)
        assert np.all(got.value[j][:len(places)] >= 1 - 1e-4), got.value[j]
        assert np.abs(got.value[j] - want[0]).max() <= 1e-4, (got.value[j], want[0])
    monkeypatch.setenv("XCORR_NO_FUSED_TILES", "1")
    plain = pkg.Plan(left.shape, right.shape, **kw)
    assert "tile maxima" not in plain.explain() and "own store" in plain.explain(), plain.explain()
    again = plain(left, right)
    for a, b in zip(got, again):
        assert np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


@pytest.mark.parametrize("left,right,rides", [
    ("1000:256x256", "1:156x116", True),   # zncc_frames: the template (156 x 116 crop) rides with the frames
    ("1:80x80", "100:80x80", True),        # one-to-many, ±4: the image and the templates, 80 x 80 crops each
    ("1:90x90", "100:80x80", False),       # the image's 84 x 84 crop, larger than the templates' 80 x 80
])
def test_a_stack_rides_along_only_with_crops_no_larger(left, right, rides):
    """A stack of too few matrices for a strip launch of its own takes the other stack's, but only
    with crops of at most that stack's elements: one block walks each matrix, so a larger crop
    would outlast the launch (it takes the four-kernel path instead)."""
    form = "n-to-m" if left.startswith("1000:") else "one-to-many"
    window = ["--max-shift", 16 if form == "n-to-m" else 4]
    pp = explain_prepass("--form", form, "--left", left, "--right", right, *window, "--normalize", "zncc")
    many, few = ("left", "right") if form == "n-to-m" else ("right", "left")
    assert pp[many]["strip"] and not pp[many]["fused"]
    assert pp[few]["strip"] == rides, pp
