"""The reductions (peaks, the maximum over the rights) measured as a user calls them,
for experiments/reductions.py: run by xcsuite.peerbench (the runner's peer tool), with its command
line, protocol and JSON; this module holds the variants, the planted-answer checks and the helpers
(on xcsuite/peers.py's cases and torch-fft; it imports nothing of peerbench, which imports it).

Variants (every one takes the case key reduce=SPEC, SPEC one of REDUCTIONS):
  xcorr-reduce          xcorr.peaks2d / peaks1d / max_over_rights (algorithm "auto") on PyTorch
                        CUDA tensors, all rights in one call: the map is never written
  xcorr-reduce-batched  max-* only: xcorr.max_over_rights fed the rights in batches of
                        BATCHED_RIGHTS (out= the running maps, first_index= the batch's first right)
  xcorr-map             xcorr.correlate2d / correlate1d into a reused device tensor, nothing after:
                        the map's time (what the reduction saves is measured against it)
  xcorr-map+torch       xcorr.correlate2d / correlate1d into a reused tensor, then the PyTorch
                        reduction below (what a user does today); max-*: the rights in batches of
                        PEER_BATCH into one reused tensor, each folded into the running maps
  torch-reduce          PyTorch as a competent user writes it: the FFT at a fast size once per
                        input (the left cropped or zero-padded in front so that the window is the
                        transform's leading corner), broadcast product, irfft, the window as a slice
                        (a view, no layout copy), then the PyTorch reduction on it (TorchPeaks; 1-D
                        n-to-m in chunks of CHUNK_LEFTS lefts; ZNCC: templates normalized to zero
                        mean and unit norm, the image's local sums from float64 summed-area tables,
                        one scale per shift: TorchZnccPeaks); max-*: the torch-2dtm / Leopard-EM way
                        (the image's rfft2 once, per batch of PEER_BATCH templates rfft2 padded to
                        the same size, product, irfft2, the window's slice, running max / argmax /
                        sum / sum of squares by torch.max / where / sum), the transform padded as
                        the window needs so that it computes our outputs
  torch-2dtm-circular   max-* only: torch-2dtm exactly, circular correlation at the image's own size
                        (no padding); equal to ours where no template wraps around the image's edge
                        and different near the edges (the window's shifts are read mod the size)

The PyTorch reduction (peaks_torch): per map the greedy contract (CONVENTIONS.md, "Reductions"):
torch.max along the rows, then over the rows' maxima, each peak's neighbourhood of radius
min_distance set to -inf and restored after the k rounds (k = 1: one pass); the three-point
sub-pixel fits (subpixel_offsets) on the map's values. fold_max: the running maximum, the index of
the right and the sums over a batch of maps.

Checks (before timing; a failure makes the case's entries errors "validation failed: ..."): inputs
with a planted answer (plant_*): crops of one noise base at known offsets (a pair's peak is at the
offsets' difference, its value the box sum of the base's squares there), templates pasted into a
noise image at known positions (ZNCC: 1 at each; max-*: the template's index and its sum of
squares there, the sums over the rights at those positions from a matrix-vector product).
"""
from __future__ import annotations

import math
import re
import threading

import numpy as np

from xcsuite import peers
from xcsuite.benchjson import UsageError, parse_case_line

from xcsuite import rules

VARIANTS = ("xcorr-reduce", "xcorr-reduce-batched", "xcorr-map", "xcorr-map+torch", "torch-reduce",
            "torch-2dtm-circular")
MAX_ONLY = ("xcorr-reduce-batched", "torch-2dtm-circular")
# The reductions the experiment asks for (the case key reduce=): peaks-k<K>[-md<R>]-<fit>, max[-stats]
REDUCTIONS = ("peaks-k1-gaussian", "peaks-k1-parabolic", "peaks-k5-md15-parabolic", "max-stats", "max")
PEER_BATCH = 16  # templates per batch: torch-2dtm's and Leopard-EM's usual
CHUNK_LEFTS = 16  # torch-reduce on 1-D n-to-m (ambient noise): lefts per product and inverse transform
BATCHED_RIGHTS = 128  # xcorr-reduce-batched: rights per max_over_rights call
SUBPIXEL_METHODS = ("none", "parabolic", "gaussian")

SUMMARIES = {
    "xcorr-reduce": "xcorr.peaks2d/peaks1d/max_over_rights (algorithm auto), PyTorch CUDA tensors, one call",
    "xcorr-reduce-batched": f"xcorr.max_over_rights in batches of {BATCHED_RIGHTS} rights (out=, first_index=)",
    "xcorr-map": "xcorr.correlate2d/correlate1d into a reused device tensor: the map alone",
    "xcorr-map+torch": "xcorr.correlate2d/correlate1d into a reused tensor, then the reduction in PyTorch",
    "torch-reduce": "torch.fft correlation as a competent user writes it (the window a slice of the inverse "
                    "transform; max: torch-2dtm's batches of 16, padded), then the reduction in PyTorch",
    "torch-2dtm-circular": "torch-2dtm / Leopard-EM exactly: circular correlation at the image's size, batches of 16",
}


class ReduceUsage(ValueError):
    """A bad reduce= spec."""


def parse_reduce(spec: str) -> dict:
    """'peaks-k5-md15-gaussian' -> {kind: peaks, k: 5, min_distance: 15, subpixel: gaussian, stats: False};
    'max-stats' -> {kind: max, stats: True}."""
    m = re.fullmatch(r"peaks-k([0-9]+)(?:-md([0-9]+))?-(none|parabolic|gaussian)", spec)
    if m:
        k = int(m.group(1))
        if k < 1:
            raise ReduceUsage(f"reduce={spec}: k must be at least 1")
        return {"kind": "peaks", "k": k, "min_distance": int(m.group(2) or 0), "subpixel": m.group(3), "stats": False}
    if spec in ("max", "max-stats"):
        return {"kind": "max", "k": 0, "min_distance": 0, "subpixel": "none", "stats": spec == "max-stats"}
    raise ReduceUsage(f"reduce={spec}: expected peaks-k<K>[-md<R>]-<none|parabolic|gaussian>, max or max-stats")


def registry() -> list[dict]:
    """The variants as peers (peerbench list --json entries): measured by a Python program."""
    import importlib.util

    out = []
    for name in VARIANTS:
        needs = ["torch"] + (["xcorr"] if name.startswith("xcorr") else [])
        missing = [m for m in needs if importlib.util.find_spec(m) is None]
        why = f"not installed: {', '.join(missing)}" if missing else ""
        out.append({"name": name, "family": "peer", "summary": SUMMARIES[name], "timed": SUMMARIES[name],
                    "precision": "fp32", "tolerance": 1e-3,
                    "forms": ["one-to-many"] if name in MAX_ONLY else ["one-to-one", "one-to-many", "n-to-mn", "n-to-m"],
                    "windows": ["full", "valid", "same", "max-shift", "shifts"],
                    "params": {"reduce": list(REDUCTIONS)},
                    "normalizations": ["none", "zncc", "zero-lag"], "available": not why, "unavailable_reason": why})
    return out


# --- the PyTorch reduction, and its numpy reference (tests/test_reductions.py) ----------------

def subpixel_offsets(cm, c0, cp, method: str, xp):
    """The contract's three-point fit through c- c0 c+ (arrays of xp, numpy or torch): parabolic
    (c- - c+) / (2 (c- - 2 c0 + c+)); gaussian the same on ln c where all three are positive, else
    parabolic; 0 where the denominator is 0; clamped to [-0.5, 0.5]. method "none": zeros."""
    if method == "none":
        return c0 * 0
    def fit(a, b, c):
        den = a - 2 * b + c
        safe = xp.where(den != 0, den, xp.ones_like(den))
        return xp.where(den != 0, (a - c) / (2 * safe), xp.zeros_like(den))
    d = fit(cm, c0, cp)
    if method == "gaussian":
        pos = (cm > 0) & (c0 > 0) & (cp > 0)
        one = xp.ones_like(c0)
        lg = fit(xp.log(xp.where(pos, cm, one)), xp.log(xp.where(pos, c0, one)), xp.log(xp.where(pos, cp, one)))
        d = xp.where(pos, lg, d)
    d = xp.where(d == d, d, xp.zeros_like(d))  # NaN (a NaN neighbour): no offset
    return xp.clip(d, -0.5, 0.5) if xp is np else d.clamp(-0.5, 0.5)


def peaks_np(maps: np.ndarray, k: int, min_distance: int, subpixel: str, dy0: int = 0, dx0: int = 0):
    """The contract's peaks of each map (B, H, W), in float64: (value (B, k), shift (B, k, 2) int,
    subpixel (B, k, 2)); NaN values are skipped; ties to the smaller row-major index. The package's
    reference (python/xcorr/_reference.py's peaks_of_maps, loaded by path), not a copy of it."""
    return peers.reference_module().peaks_of_maps(maps, k, min_distance, subpixel, dy0, dx0)


def fit3_torch(c, method: str, torch):
    """subpixel_offsets on the three values c (..., 3) in a few torch operations: the parabolic
    and, for gaussian, the logarithms' fit evaluated together (stacked), the gaussian one taken
    where all three values are positive; 0 where the denominator is 0 or the fit is NaN; clamped
    to [-0.5, 0.5]."""
    if method == "none":
        return torch.zeros_like(c[..., 0])
    if method == "gaussian":
        pos = (c > 0).all(-1)
        c = torch.stack([c, c.clamp_min(1e-30).log()])
    a, b, cc = c.unbind(-1)
    den = (a + cc).sub_(b, alpha=2)
    d = torch.where(den != 0, (a - cc) / (2 * den), 0.0)
    if method == "gaussian":
        d = torch.where(pos, d[1], d[0])
    return d.nan_to_num_(0.0).clamp_(-0.5, 0.5)


_CROSS = {}  # device -> the (2 axes, 3) row and column offsets of the three-point fits' neighbours


def _cross(torch, dev):
    if dev not in _CROSS:
        step = torch.arange(-1, 2, device=dev)
        zero = torch.zeros_like(step)
        _CROSS[dev] = (torch.stack([step, zero]), torch.stack([zero, step]))
    return _CROSS[dev]


def peaks_torch(maps, k: int, min_distance: int, subpixel: str, dy0: int = 0, dx0: int = 0):
    """peaks_np in PyTorch, as a competent user writes it, on maps (B, H, W) float32 on any device,
    a view as well (the window's slice of a larger transform: nothing is copied): k rounds of
    torch.max, along the rows then over the rows' maxima (the first largest in row-major order),
    each taken peak's neighbourhood (Chebyshev radius min_distance) set to -inf by one indexed
    write of its (2 min_distance + 1)^2 elements per map, kept and written back after the k rounds
    (the maps are left as they were); the fits on the map's own values, the peak's row and column
    neighbours in one gather, both axes' fits in one evaluation. Few operations: on many small maps
    (PIV) the host's launches, not the GPU, take the time. Maps without NaN (the contract skips
    NaN; the timed and planted maps hold none).
    -> (value (B, k) float32, shift (B, k, 2) int32, subpixel (B, k, 2) float32); absent peaks
    (k beyond the map): NaN, (0, 0), NaN."""
    import torch

    B, H, W = maps.shape
    dev = maps.device
    bb = torch.arange(B, device=dev)[:, None, None]
    if k == 1:
        rowmax, col = maps.max(dim=2)  # (B, H): each row's largest and its first column
        value, y = rowmax.max(dim=1, keepdim=True)  # the first row holding the largest
        x = col.gather(1, y)
    else:
        near = torch.arange(-min_distance, min_distance + 1, device=dev)
        vals, ys, xs, kept = [], [], [], []
        for i in range(k):
            rowmax, col = maps.max(dim=2)
            v, y = rowmax.max(dim=1, keepdim=True)
            x = col.gather(1, y)
            vals.append(v)
            ys.append(y)
            xs.append(x)
            if i + 1 < k:
                yy = (y + near).clamp_(0, H - 1)[:, :, None]
                xx = (x + near).clamp_(0, W - 1)[:, None, :]
                kept.append((yy, xx, maps[bb, yy, xx]))
                maps[bb, yy, xx] = -math.inf
        for yy, xx, old in reversed(kept):  # in reverse: overlapping neighbourhoods get their first values back
            maps[bb, yy, xx] = old
        value, y, x = torch.cat(vals, 1), torch.cat(ys, 1), torch.cat(xs, 1)
    # the peak's column (axis 0) and row (axis 1) neighbours: (B, k, 2, 3); clamped at the edges,
    # where a neighbour repeats the peak and the fit is 0
    oy, ox = _cross(torch, dev)
    iy = (y[..., None, None] + oy).clamp_(0, H - 1)
    ix = (x[..., None, None] + ox).clamp_(0, W - 1)
    c = maps[bb[..., None], iy, ix]
    along = iy + ix  # per axis, the one index that moves: a clamped neighbour repeats the peak's
    inner = (along[..., 0] != along[..., 1]) & (along[..., 2] != along[..., 1])
    off = torch.where(inner, fit3_torch(c, subpixel, torch), 0.0)
    shift = torch.stack([y + dy0, x + dx0], -1).to(torch.int32)
    sub = shift + off
    if k == 1:  # a map has at least one element: never absent
        return value.float(), shift, sub.float()
    absent = value == -math.inf
    shift = shift.masked_fill(absent[..., None], 0)
    sub = sub.masked_fill(absent[..., None], math.nan)
    return value.masked_fill(absent, math.nan).float(), shift, sub.float()


def fold_max(state, maps, first: int):
    """Folds a batch of maps (n, H, W) of rights first..first+n-1 into the running (value, index,
    sum, sumsq) (None: the first batch), torch-2dtm's way: the batch's max and argmax, then
    torch.where where it beats the running value (equal values keep the earlier right)."""
    import torch

    bmax, barg = maps.max(dim=0)
    barg = barg.to(torch.int32) + first
    if state is None:
        return [bmax, barg, maps.sum(0), (maps * maps).sum(0)]
    better = bmax > state[0]
    state[0] = torch.maximum(state[0], bmax)
    state[1] = torch.where(better, barg, state[1])
    state[2] += maps.sum(0)
    state[3] += (maps * maps).sum(0)
    return state


def max_np(maps: np.ndarray):
    """fold_max's reference: (value, index, sum, sumsq) over axis 0 in float64 (first index on ties)."""
    m = maps.astype(np.float64)
    return m.max(0), m.argmax(0), m.sum(0), (m * m).sum(0)


# --- planted answers -----------------------------------------------------------------------------

def crop_offsets(count: int, spread: int, rng) -> np.ndarray:
    return rng.integers(0, spread + 1, size=(count, 2))


def planted_peak_np(base_sq_sat: np.ndarray, u, t, h: int, w: int) -> tuple:
    """For L = base[u:u+h, u':u'+w] and R = base[t:..]: the peak's shift (t - u) and its value, the
    box sum of base^2 over the rows max(u, t) .. min(u, t) + h - 1 (columns alike), from the
    summed-area table of base^2 (padded with a zero row and column)."""
    (uy, ux), (ty, tx) = u, t
    r0, r1 = max(uy, ty), min(uy, ty) + h
    c0, c1 = max(ux, tx), min(ux, tx) + w
    s = base_sq_sat
    return (ty - uy, tx - ux), s[r1, c1] - s[r0, c1] - s[r1, c0] + s[r0, c0]


def sat_np(x: np.ndarray) -> np.ndarray:
    out = np.zeros((x.shape[0] + 1, x.shape[1] + 1))
    out[1:, 1:] = x.cumsum(0).cumsum(1)
    return out


pair_indices = rules.pairs  # (left, right) of each output matrix in the contract's order


# --- the timed callables -------------------------------------------------------------------------

class Variant:
    """One case's callable: __call__(L, R) -> a tuple of output tensors (peaks: value (P, k),
    shift (P, k, 2), subpixel (P, k, 2) with P the output matrices; max: value, index, sum, sumsq
    (H, W) each). L, R: the contract's stacks (nL, h, w), (nR, h, w) on the GPU."""

    def __init__(self, rc, torch):
        self.rc, self.torch, self.c = rc, torch, rc.pc
        c = self.c
        self.red = rc.red
        self.oned = c.hL == 1 and c.hR == 1
        dy0, dy1, dx0, dx1 = c.window
        self.win = {"lags": (dx0, dx1)} if self.oned else {"shifts": ((dy0, dy1), (dx0, dx1))}
        self.norm = None if c.normalize == "none" else c.normalize
        self.buf = None
        self.state = None

    def answer(self, outs):
        """The reduced answer of a call's outputs (what the planted check reads): the outputs
        themselves, but for the map alone, which is reduced here, untimed."""
        return outs

    # the package's arguments
    def args(self, L, R):
        c = self.c
        if self.oned:
            L, R = L[:, 0, :], R[:, 0, :]
        if c.form == "one-to-many":
            return L[0], R, {}
        if c.form == "one-to-one":
            return L[0], R[0], {}
        return L, R, {"form": c.form}

    def flat_peaks(self, value, shift, sub):
        k = self.red["k"]
        if self.oned:  # peaks1d: lags (..., k); as (dy, dx) = (0, lag)
            shift = self.torch.stack([self.torch.zeros_like(shift), shift], -1)
            sub = self.torch.stack([self.torch.zeros_like(sub), sub], -1)
        return value.reshape(-1, k), shift.reshape(-1, k, 2), sub.reshape(-1, k, 2)

    def torch_peaks(self, maps):
        c, r = self.c, self.red
        oh, ow = c.out_shape[1:]
        return peaks_torch(maps.reshape(-1, oh, ow), r["k"], r["min_distance"], r["subpixel"], c.window[0], c.window[2])


class XcorrReduce(Variant):
    def __call__(self, L, R):
        import xcorr

        left, right, form = self.args(L, R)
        r = self.red
        if r["kind"] == "peaks":
            f = xcorr.peaks1d if self.oned else xcorr.peaks2d
            return tuple(f(left, right, k=r["k"], min_distance=r["min_distance"], subpixel=r["subpixel"],
                           normalize=self.norm, algorithm="auto", **form, **self.win))
        return tuple(xcorr.max_over_rights(left, right, normalize=self.norm, stats=r["stats"], algorithm="auto",
                                           **form, **self.win))

    def answer(self, outs):
        """The peaks in the check's layout, untimed: the call returns what a user gets (lags for
        signals), and stacking (0, lag) pairs is the check's work, not the user's."""
        return self.flat_peaks(*outs[:3]) if self.red["kind"] == "peaks" else outs


class XcorrReduceBatched(Variant):
    def __call__(self, L, R):
        import xcorr

        left, right, form = self.args(L, R)
        state = None
        for b0 in range(0, right.shape[0], BATCHED_RIGHTS):
            state = xcorr.max_over_rights(left, right[b0:b0 + BATCHED_RIGHTS], normalize=self.norm,
                                          stats=self.red["stats"], algorithm="auto", out=state, first_index=b0,
                                          **form, **self.win)
        return tuple(state)


class XcorrMap(Variant):
    def map(self, left, right, form):
        """The map into a device tensor reused from call to call (one per count of rights)."""
        import xcorr

        f = xcorr.correlate1d if self.oned else xcorr.correlate2d
        if self.buf is None:
            self.buf = {}
        out = self.buf.get(right.shape[0])
        if out is None:  # the first call allocates it
            out = self.buf[right.shape[0]] = f(left, right, normalize=self.norm, algorithm="auto", **form, **self.win)
            return out
        return f(left, right, normalize=self.norm, algorithm="auto", out=out, **form, **self.win)

    def __call__(self, L, R):
        return (self.map(*self.args(L, R)),)

    def answer(self, outs):
        return self.torch_peaks(outs[0])


class XcorrMapTorch(XcorrMap):
    def answer(self, outs):
        return outs

    def __call__(self, L, R):
        left, right, form = self.args(L, R)
        if self.red["kind"] == "peaks":
            return self.torch_peaks(self.map(left, right, form))
        state = None
        for b0 in range(0, right.shape[0], PEER_BATCH):
            part = right[b0:b0 + PEER_BATCH]
            maps = self.map(left, part, form)
            state = fold_max(state, maps.reshape(part.shape[0], *self.c.out_shape[1:]), b0)
        return tuple(state)


class TorchReduce(Variant):
    """The fallback of torch-reduce's peaks where the routes below do not apply (a window reaching
    beyond the full output, zero-lag, a ZNCC window other than within "valid"): peerbench's torch-fft
    (or its normalization) whole, then peaks_torch. No case of the experiment takes it."""

    def __init__(self, rc, torch):
        super().__init__(rc, torch)
        self.mapper = peers.make_peer(rc.fft_case(), torch)

    def __call__(self, L, R):
        return self.torch_peaks(self.mapper(L, R))


def front_axis(s0: int, s1: int, m: int, n: int):
    """One axis of a window s0..s1 (left length m, right length n) computed so that the window is
    the transform's leading s1 - s0 + 1 outputs, a slice, not a gather: the left cropped by
    max(s0, 0) in front or zero-padded by max(-s0, 0) in front, then the circular correlation at
    P = the smallest 2,3,5-smooth size >= max(m - s0, s1 + n), as scipy.fft.next_fast_len(n, real=True)
    picks it (a 7 in the size slows cuFFT: 147000 = 2^3 3 5^3 7^2 for ambient noise's 146400, where
    this gives 147456 = 2^14 3^2; no shift of the window aliases at P >= max(m - s0, s1 + n),
    torch-fft's bound) gives shift s0 + j at output j. -> (P, crop, pad), or None for a window
    reaching beyond the full output (-(n - 1) .. m - 1)."""
    if not -(n - 1) <= s0 <= s1 <= m - 1:
        return None
    return peers.fast_len(max(m - s0, s1 + n), primes=(2, 3, 5)), max(s0, 0), max(-s0, 0)


class FrontWindow:
    """The left's crop and padding and the transform size of front_axis on both axes (1-D: the
    last axis only)."""

    def __init__(self, c, oned: bool):
        dy0, dy1, dx0, dx1 = c.window
        ay = (1, 0, 0) if oned else front_axis(dy0, dy1, c.hL, c.hR)
        ax = front_axis(dx0, dx1, c.wL, c.wR)
        self.ok = ay is not None and ax is not None
        if self.ok:
            self.s, self.crop, self.pad = (ay[0], ax[0]), (ay[1], ax[1]), (ax[2], 0, ay[2], 0)

    def left(self, torch, L):
        """L (..., h, w) cropped and padded in front (one copy of the left, once per call)."""
        L = L[..., self.crop[0]:, self.crop[1]:]
        return torch.nn.functional.pad(L, self.pad) if any(self.pad) else L


class TorchPeaks(Variant):
    """torch-reduce's peaks as a competent user writes them: the left's and the rights' rfft at a
    fast size once per input (the left cropped or padded in front so that the window is the
    transform's leading corner: FrontWindow), the broadcast product, irfft, the window taken as a
    slice of it (a view: no layout copy), peaks_torch on that view. 1-D (signals): rfft / irfft
    along the samples, n-to-m in chunks of CHUNK_LEFTS lefts (the product of every pair at once
    is gigabytes)."""

    def __init__(self, rc, torch, front: FrontWindow):
        super().__init__(rc, torch)
        self.front = front
        self.oh, self.ow = rc.pc.out_shape[1:]

    def peaks(self, maps):
        r, c = self.red, self.c
        return peaks_torch(maps, r["k"], r["min_distance"], r["subpixel"], c.window[0], c.window[2])

    def __call__(self, L, R):
        torch, c, fw = self.torch, self.c, self.front
        if self.oned:
            P = fw.s[1]
            FL = torch.fft.rfft(fw.left(torch, L)[:, 0], n=P)
            FR = torch.fft.rfft(R[:, 0], n=P).conj()
            if c.form != "n-to-m":
                maps = torch.fft.irfft(peers.fft_product(c.form, FL, FR, c.nL, c.nR, torch), n=P)[:, :self.ow]
                return self.peaks(maps[:, None, :])
            outs = []
            for i0 in range(0, c.nL, CHUNK_LEFTS):
                part = FL[i0:i0 + CHUNK_LEFTS]
                maps = torch.fft.irfft((part[:, None] * FR[None]).reshape(-1, FR.shape[-1]), n=P)[:, :self.ow]
                outs.append(self.peaks(maps[:, None, :]))
            return tuple(torch.cat(x) for x in zip(*outs))
        FL = torch.fft.rfft2(fw.left(torch, L), s=fw.s)
        FR = torch.fft.rfft2(R, s=fw.s).conj()
        maps = torch.fft.irfft2(peers.fft_product(c.form, FL, FR, c.nL, c.nR, torch), s=fw.s)
        return self.peaks(maps[:, :self.oh, :self.ow])


class TorchZnccPeaks(TorchPeaks):
    """torch-reduce's ZNCC peaks, one left, a window inside "valid" (every shift overlaps the whole
    right), as template matching is written (Lewis's fast normalized cross-correlation, OpenCV's
    route): the image minus its mean; each template minus its mean and divided by its norm (a
    constant template: zeros); the image's sum and sum of squares under each shift's template from
    float64 summed-area tables (4 slices each); the raw correlation of the two by TorchPeaks' FFT
    route; the coefficient raw x sqrt(n / (n ΣL'² - (ΣL')²)) (0 where that part of the image is
    constant: its variance at most 1e-6 of the image's) and clipped to [-1, 1], in place; then
    peaks_torch. The same coefficient as the contract's: a whole template's ΣR' is 0."""

    def __call__(self, L, R):
        torch, c, fw = self.torch, self.c, self.front
        F = torch.nn.functional
        dy0, dx0 = c.window[0], c.window[2]
        oh, ow, n = self.oh, self.ow, float(c.hR * c.wR)
        L64 = L[0].double()
        Ls = L64 - L64.mean()
        R64 = R.double()
        Rs = R64 - R64.mean(dim=(1, 2), keepdim=True)
        norm = (Rs * Rs).sum(dim=(1, 2), keepdim=True).sqrt()
        Rhat = torch.where(norm > 0, Rs / torch.where(norm > 0, norm, 1.0), 0.0).float()
        t = F.pad(torch.stack([Ls, Ls * Ls]).cumsum(1).cumsum(2), (1, 0, 1, 0))  # (2, h + 1, w + 1)
        y0, y1, x0, x1 = dy0, dy0 + c.hR, dx0, dx0 + c.wR
        box = t[:, y1:y1 + oh, x1:x1 + ow] - t[:, y0:y0 + oh, x1:x1 + ow] - t[:, y1:y1 + oh, x0:x0 + ow] \
            + t[:, y0:y0 + oh, x0:x0 + ow]
        fl = n * box[1] - box[0] * box[0]
        ok = fl > peers.CONSTANT_OVERLAP * n * n * (Ls * Ls).mean()
        scale = torch.where(ok, (n / torch.where(ok, fl, 1.0)).sqrt(), 0.0).float()  # (oh, ow)
        FL = torch.fft.rfft2(fw.left(torch, Ls.float()), s=fw.s)
        FR = torch.fft.rfft2(Rhat, s=fw.s).conj()
        raw = torch.fft.irfft2(FL[None] * FR, s=fw.s)[:, :oh, :ow]
        return self.peaks(torch.mul(raw, scale).clamp_(-1.0, 1.0))


def torch_peaks_variant(rc, torch):
    """torch-reduce's route for a peaks case: TorchPeaks (raw), TorchZnccPeaks (zncc, one left, a
    window within valid), else the fallback TorchReduce."""
    c = rc.pc
    oned = c.hL == 1 and c.hR == 1
    front = FrontWindow(c, oned)
    if not front.ok:
        return TorchReduce(rc, torch)
    if c.normalize == "none":
        return TorchPeaks(rc, torch, front)
    dy0, dy1, dx0, dx1 = c.window
    if c.normalize == "zncc" and not oned and c.nL == 1 and c.form in ("one-to-one", "one-to-many") and \
            0 <= dy0 and dy1 <= c.hL - c.hR and 0 <= dx0 and dx1 <= c.wL - c.wR:
        return TorchZnccPeaks(rc, torch, front)
    return TorchReduce(rc, torch)


class Torch2dtm(Variant):
    """torch-2dtm / Leopard-EM: the image's rfft2 once per call, per batch of PEER_BATCH templates
    rfft2 at the same size, product with the conjugate, irfft2, the window taken as a slice (a
    view), folded into the running maps (fold_max, the tools' own way). circular: the image's own
    size (torch-2dtm exactly), the image rolled once per call by the window's first shift so that
    the window starts at output 0 (the tools centre their templates instead: the same maps);
    else padded and cropped in front as TorchPeaks (FrontWindow), so that no shift of the window
    aliases."""

    circular = False

    def __init__(self, rc, torch):
        super().__init__(rc, torch)
        c = self.c
        dy0, dy1, dx0, dx1 = c.window
        self.oh, self.ow = c.out_shape[1:]
        if self.circular:
            self.s = (c.hL, c.wL)
            if self.oh > c.hL or self.ow > c.wL:
                raise ValueError("torch-2dtm-circular: a window larger than the image (not implemented)")
            self.front = None
        else:
            self.front = FrontWindow(c, False)
            if not self.front.ok:
                raise ValueError("torch-2dtm: the window has shifts without overlap (not implemented)")
            self.s = self.front.s

    def image(self, L):
        if self.circular:
            return self.torch.roll(L[0], shifts=(-self.c.window[0], -self.c.window[2]), dims=(0, 1))
        return self.front.left(self.torch, L[0])

    def __call__(self, L, R):
        torch = self.torch
        FL = torch.fft.rfft2(self.image(L), s=self.s)
        state = None
        for b0 in range(0, R.shape[0], PEER_BATCH):
            FR = torch.fft.rfft2(R[b0:b0 + PEER_BATCH], s=self.s).conj()
            maps = torch.fft.irfft2(FL[None] * FR, s=self.s)[:, :self.oh, :self.ow]
            state = fold_max(state, maps, b0)
        return tuple(state)


class Torch2dtmCircular(Torch2dtm):
    circular = True


CLASSES = {"xcorr-reduce": XcorrReduce, "xcorr-reduce-batched": XcorrReduceBatched, "xcorr-map": XcorrMap,
           "xcorr-map+torch": XcorrMapTorch, "torch-2dtm-circular": Torch2dtmCircular}


def make_variant(rc, torch):
    if rc.red["kind"] == "max" and rc.variant == "torch-reduce":
        return Torch2dtm(rc, torch)
    if rc.red["kind"] == "peaks" and rc.variant in MAX_ONLY:
        raise ReduceUsage(f"{rc.variant} computes the maximum over the rights only (reduce=max...)")
    if rc.variant == "torch-reduce":
        return torch_peaks_variant(rc, torch)
    return CLASSES[rc.variant](rc, torch)


# --- cases ---------------------------------------------------------------------------------------

class RCase:
    """A reduction case: xcsuite.peers' Case (parsed as torch-fft's: sizes, form, window,
    normalization) with the variant and the reduction."""

    def __init__(self, variant: str, reduce: str, pc):
        self.variant, self.spec, self.pc = variant, reduce, pc
        self.red = parse_reduce(reduce)
        self.batch = pc.batch

    def fft_case(self):
        from dataclasses import replace

        return replace(self.pc, variant="torch-fft")

    def name(self) -> str:
        base = self.pc.name()
        return self.variant + base[len(self.pc.variant):] + f"/reduce:{self.spec}"

    @property
    def fmas(self) -> float:
        return self.pc.fmas


def parse_rcase(spec: str, batch: int = 0):
    """A case line with variant= one of VARIANTS and reduce=SPEC -> RCase; UsageError as a peer's
    (its other keys are torch-fft's: xcsuite.peers.parse_case)."""
    kv = parse_case_line(spec).keys  # xcorr_bench's syntax
    variant = kv["variant"]
    if "reduce" not in kv:
        raise UsageError(f"case '{spec}': {variant} needs reduce= ({', '.join(REDUCTIONS)})")
    rest = " ".join(t for t in spec.split() if not t.startswith(("variant=", "reduce=")))
    pc = peers.parse_case(f"variant=torch-fft {rest}", batch)
    try:
        rc = RCase(variant, kv["reduce"], pc)
    except ReduceUsage as e:
        raise UsageError(f"case '{spec}': {e}") from None
    if rc.red["kind"] == "max" and pc.form != "one-to-many":
        raise UsageError(f"case '{spec}': reduce={rc.spec} is measured one-to-many only here")
    if rc.red["kind"] == "peaks" and variant in MAX_ONLY:
        raise UsageError(f"case '{spec}': {variant} computes reduce=max... only")
    return rc


def is_reduce_spec(spec: str) -> bool:
    return any(t in (f"variant={v}" for v in VARIANTS) for t in spec.split())


# --- planted inputs and the check ----------------------------------------------------------------

SPREAD = 6  # largest offset of a crop within its base (2-D); signals: SPREAD_1D
SPREAD_1D = 1000


class Planted:
    """Check inputs with a known answer and the test of a variant's outputs against it."""

    def __init__(self, rc, gpu, seed: int):
        self.rc, self.c, self.torch = rc, rc.pc, gpu.torch
        self.gpu, self.seed = gpu, seed
        self.rng = np.random.default_rng(seed)

    def inputs(self):
        c, red = self.c, self.rc.red
        if red["kind"] == "max":
            return self.templates_in_image()
        if c.normalize == "zncc":
            return self.zncc_plants()
        return self.crops()

    # peaks of raw correlations: crops of noise bases; pair (i, j) peaks at t_j - u_i
    def crops(self):
        torch, c = self.torch, self.c
        spread = SPREAD_1D if c.hL == 1 else SPREAD
        sy = 0 if c.hL == 1 else spread
        nb = c.nR if c.form == "n-to-mn" else 1  # n-to-mn: a base per pair; else one for all
        if c.form == "n-to-mn" and c.nL != c.nR:
            raise ValueError("check: n-to-mn with one right per left only")
        bases = self.rng.uniform(-1, 1, size=(nb, c.hL + sy, c.wL + spread))
        u = self.rng.integers(0, [sy + 1, spread + 1], size=(c.nL if nb == 1 else c.nR, 2))
        t = self.rng.integers(0, [sy + 1, spread + 1], size=(c.nR, 2))
        L = np.stack([bases[0 if nb == 1 else k][u[k, 0]:u[k, 0] + c.hL, u[k, 1]:u[k, 1] + c.wL]
                      for k in range(c.nL)])
        R = np.stack([bases[0 if nb == 1 else k][t[k, 0]:t[k, 0] + c.hR, t[k, 1]:t[k, 1] + c.wR]
                      for k in range(c.nR)])
        sats = [sat_np(b * b) for b in bases]
        expect = []
        for k, (i, j) in enumerate(pair_indices(c.form, c.nL, c.nR)):
            b = 0 if nb == 1 else j
            expect.append(planted_peak_np(sats[b], u[j if nb > 1 else i], t[j], c.hL, c.wL))
        self.expect = expect
        dev = self.gpu.device
        return (torch.as_tensor(L, dtype=torch.float32, device=dev), torch.as_tensor(R, dtype=torch.float32, device=dev))

    # ZNCC (one-to-many, valid): each template pasted at k positions on a grid of cells
    def zncc_plants(self):
        torch, c, k = self.torch, self.c, self.rc.red["k"]
        img = self.rng.uniform(-1, 1, size=(c.hL, c.wL))
        tpl = self.rng.uniform(-1, 1, size=(c.nR, c.hR, c.wR))
        cell = max(c.hR, c.wR, self.rc.red["min_distance"]) + 1
        cells = [(y, x) for y in range(0, c.hL - c.hR + 1, cell) for x in range(0, c.wL - c.wR + 1, cell)]
        if len(cells) < k * c.nR:
            raise ValueError(f"check: {len(cells)} cells for {k * c.nR} plants")
        pick = self.rng.permutation(len(cells))[:k * c.nR]
        self.expect = []
        for j in range(c.nR):
            where = [cells[p] for p in pick[j * k:(j + 1) * k]]
            for (y, x) in where:
                img[y:y + c.hR, x:x + c.wR] = tpl[j]
            self.expect.append(sorted(where))  # template j at (y, x): its peak at the shift (dy, dx) = (y, x)
        dev = self.gpu.device
        return (torch.as_tensor(img[None], dtype=torch.float32, device=dev),
                torch.as_tensor(tpl, dtype=torch.float32, device=dev))

    # the maximum over the rights: a few templates pasted into a noise image
    def templates_in_image(self):
        torch, c = self.torch, self.c
        dev = self.gpu.device
        g = torch.Generator(device=dev)
        g.manual_seed(self.seed)
        img = torch.rand((c.hL, c.wL), generator=g, device=dev) * 2 - 1
        R = torch.rand((c.nR, c.hR, c.wR), generator=g, device=dev) * 2 - 1
        dy0, dy1, dx0, dx1 = c.window
        # interior positions: every shift there reads the template inside the image (no wrap for the circular peer)
        lo_y, hi_y = max(0, dy0), min(dy1, c.hL - c.hR)
        lo_x, hi_x = max(0, dx0), min(dx1, c.wL - c.wR)
        n = min(4, c.nR)
        js = self.rng.choice(c.nR, size=n, replace=False)
        self.plants = []
        for q, j in enumerate(js):  # the positions in a row of cells so that no two overlap
            y = int(lo_y + (hi_y - lo_y) * (q + 0.5) / (n + 1))
            x = int(lo_x + (hi_x - lo_x) * (q + 0.5) / n * 0.9)
            img[y:y + c.hR, x:x + c.wR] = R[j]
            self.plants.append((int(j), y, x))
        return img[None].contiguous(), R

    def verify(self, outs, L, R) -> str:
        """'' or what is wrong."""
        torch, c, red = self.torch, self.c, self.rc.red
        torch.cuda.synchronize()
        if red["kind"] == "max":
            return self.verify_max(outs, L, R)
        value, shift, sub = (o.float().cpu().numpy() if o.dtype.is_floating_point else o.cpu().numpy() for o in outs)
        if value.shape[0] != c.pairs:
            return f"{value.shape[0]} output matrices, expected {c.pairs}"
        if not np.all(np.abs(sub - shift) <= 0.5 + 1e-4):
            return "a sub-pixel shift more than 0.5 from its integer shift"
        if c.normalize == "zncc":
            for j in range(c.pairs):
                got = sorted(map(tuple, shift[j].tolist()))
                want = [tuple(map(int, w)) for w in self.expect[j]]
                if got != want:
                    return f"template {j}: peaks at {got}, planted at {want}"
            if np.nanmin(value) < 0.999:
                return f"a planted ZNCC peak of {np.nanmin(value):.6f}, expected 1"
            return ""
        for p, ((sy, sx), v) in enumerate(self.expect):
            if tuple(shift[p, 0]) != (sy, sx):
                return f"pair {p}: peak at {tuple(shift[p, 0])}, planted at {(sy, sx)}"
            if abs(value[p, 0] - v) > 1e-3 * abs(v):
                return f"pair {p}: peak value {value[p, 0]:.7g}, expected {v:.7g}"
        return ""

    def verify_max(self, outs, L, R) -> str:
        torch, c, red = self.torch, self.c, self.rc.red
        if len(outs) < (4 if red["stats"] else 2):
            return f"{len(outs)} outputs, expected {'value, index, sum, sumsq' if red['stats'] else 'value, index'}"
        oh, ow = c.out_shape[1:]
        for o in outs:
            if tuple(o.shape[-2:]) != (oh, ow):
                return f"an output of shape {tuple(o.shape)}, expected {oh} x {ow}"
        value, index = outs[0].reshape(oh, ow), outs[1].reshape(oh, ow)
        flat = R.reshape(c.nR, -1)
        for (j, y, x) in self.plants:
            oy, ox = y - c.window[0], x - c.window[2]
            patch = L[0, y:y + c.hR, x:x + c.wR].reshape(-1)
            col = (flat.double() @ patch.double())  # every right's value at this shift, float64
            want = float(col[j])
            if int(index[oy, ox]) != j:
                return f"template {j} planted at ({y}, {x}): index {int(index[oy, ox])} there"
            if abs(float(value[oy, ox]) - want) > 1e-3 * abs(want):
                return f"template {j} at ({y}, {x}): value {float(value[oy, ox]):.7g}, expected {want:.7g}"
            if red["stats"]:
                s, q = float(col.sum()), float((col * col).sum())
                gs, gq = float(outs[2].reshape(oh, ow)[oy, ox]), float(outs[3].reshape(oh, ow)[oy, ox])
                scale = float(col.abs().sum())
                if abs(gs - s) > 1e-3 * scale or abs(gq - q) > 1e-3 * q:
                    return f"at ({y}, {x}): sum {gs:.7g}, sumsq {gq:.7g}, expected {s:.7g}, {q:.7g}"
        return ""


class MemorySampler:
    """The GPU's used memory (torch.cuda.mem_get_info), sampled by a thread while `fn` runs: the
    largest rise over the memory used before (bytes). The library's own allocations count too."""

    def __init__(self, torch):
        self.torch = torch

    def __call__(self, fn):
        torch = self.torch
        torch.cuda.synchronize()
        free0, total = torch.cuda.mem_get_info()
        low = [free0]
        done = threading.Event()

        def sample():
            while not done.is_set():
                low[0] = min(low[0], torch.cuda.mem_get_info()[0])
                done.wait(0.0005)
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        try:
            out = fn()
            torch.cuda.synchronize()
        finally:
            done.set()
            th.join()
        low[0] = min(low[0], torch.cuda.mem_get_info()[0])
        return out, free0 - low[0]


# --- the benchmark (peerbench's protocol: `bench` is its Bench) ---------------------------------

def run_case(bench, rc):
    """Yields one entry dict per repetition as peerbench.Bench.run does (plus "mem": the GPU memory
    the first call took beyond the inputs, sampled)."""
    import gc

    from xcsuite.peers import CaseError, case_error

    torch, opt, gpu = bench.torch, bench.opt, bench.gpu
    try:
        gc.collect()
        torch.cuda.empty_cache()
        v = make_variant(rc, torch)
        planted = Planted(rc, gpu, opt.seed + 2)
        L, R = planted.inputs()
        outs, mem = MemorySampler(torch)(lambda: v(L, R))  # the first call: plans, autotuning, and the check
        why = planted.verify(v.answer(outs), L, R)
        if why:
            raise CaseError(f"validation failed: {why}")
        del outs
        outs = None
        L, R = bench.inputs(rc.pc, opt.seed)
        torch.cuda.synchronize()
        call = lambda: v(L, R)  # noqa: E731
        for r in bench.timed(rc, v, call):  # holding the peers' turn
            yield {**r, "err": 0.0, "samples": 0, "mem": mem}
    except Exception as e:  # noqa: BLE001  (a refusal or a missing function: an error entry)
        yield from ({"error": case_error(e, torch)} for _ in range(opt.repetitions))


def label(rc) -> str:
    return f"family=peer;timed={SUMMARIES[rc.variant]};precision=fp32;reduce={rc.spec}"
