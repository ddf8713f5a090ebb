"""The peers of xcorr (PyTorch, CuPy, NPP) as a user calls them, for python -m xcsuite.peerbench
(xcsuite/peerbench.py: xcorr_bench's command line, protocol and JSON around them): their registry
entries, the case parser (xcorr_bench's case syntax, xcsuite/benchjson.py, with what each peer
refuses), the window, pad and crop arithmetic, the peers themselves and the check's references.

Peers (family "peer", FP32, every form, every window but npp-normlevel's valid only):
  torch-conv2d      torch.nn.functional.conv2d (a cross-correlation), TF32 off, cudnn.benchmark on;
                    the left zero-padded so that the output is exactly the window's shifts (the
                    symmetric part through conv2d's padding=, the rest with F.pad); one-to-many: the
                    rights are out-channels; n-to-m: N images x M out-channels; n-to-mn: groups=N
                    (rights regrouped by left, the output back to the contract's order)
  torch-conv2d-tf32 torch-conv2d with cuDNN's TF32 allowed (torch.backends.cudnn.allow_tf32 = True,
                    PyTorch's default for convolutions): tensor cores at TF32 precision, checked to
                    TF32_TOLERANCE (2e-3 relative, as tensor-hankel-tf32); raw correlations only
  torch-fft         rfft2 of both stacks at a 2,3,5,7-smooth size P x Q that no shift of the window
                    aliases (P >= max(hL - s0, s1 + hR) over the window clamped to the overlapping
                    shifts), product with the conjugate right spectrum broadcast over the form, irfft2,
                    crop by indexing with the shifts mod P (zeros at shifts without overlap); cuFFT
                    plans cached by torch
  cupy-correlate2d  cupyx.scipy.signal.correlate2d, one call per pair (a user's loop), mode
                    full/valid/same when the window is one, else full and a crop; a case predicted
                    above --time-cap seconds per call (pilot of one pair) is reported as too slow,
                    unless XCORR_PEER_VERDICTS gives an earlier run's verdicts (below)
  npp-normlevel     NVIDIA NPP's nppiCrossCorrValid_NormLevel_32f_C1R_Ctx (its ZNCC in valid mode)
                    through ctypes on PyTorch's device pointers, one call per pair on the timed stream,
                    every matrix minus its mean first; computes ONLY window=valid (the right inside
                    the left) with normalize=zncc and refuses every other case (exit 2). NPP is looked
                    up as libnppist.so / .so.13 / .so.12 by the loader, then in XCORR_NPP_DIR,
                    build-npp/, the CUDA toolkit's lib64 and targets/x86_64-linux/lib, the nvidia-npp
                    wheel (nvidia/npp/lib, nvidia/cu13/lib); where it does not load the peer is listed
                    unavailable with the reason, as a peer whose package is missing

Normalized peers (torch-conv2d and torch-fft; cupy-correlate2d refuses normalize= other than none,
exit 2, as a peer refuses what it does not compute; npp-normlevel computes zncc of the valid window
only, by NPP, see above), timed whole, inputs to normalized window:
  zncc      every matrix minus its mean first (on 1000 + noise the raw factors cancel every float32
            digit), the raw correlation of the shifted copies by the peer's own route, the overlap's
            n (from the 1-D overlap counts), ΣX', ΣX'², and the contract's coefficient:
            torch-fft: means, copies and summed-area tables (cumsum) in float64, box sums gathered
            per shift, the coefficient in float64 (OpenCV's matchTemplate takes its sums from
            double integral images too; FFT correlations with ones would spread ~1e-7 of the
            largest sum over every shift and drown the small overlaps' tiny factors);
            torch-conv2d: the textbook formula in float32: avg_pool2d (divisor 1) over the padded
            (L', L'^2), conv2d of the padded ones with (R', R'^2) as weights.
            Neither treats small overlaps specially (xcorr's normalize.hpp sums n <= 64 directly):
            on zero-mean data a shift overlapping a few elements can miss 1e-4 (numpy emulation:
            ~7e-4 at n = 2); the check's 1000 + noise, as xcorr_bench's, does not show it.
  zero-lag  the raw peer output times 1 / C(0, 0) (0 where C(0, 0) = 0), C(0, 0) of every pair a
            float64 dot product of the overlapping corners (a matrix product over the form).

The window, pad and crop arithmetic is in pure functions (numpy), tested on the CPU against
scipy.signal.correlate2d (tests/test_peerbench.py); so are the normalized peers' pieces (spans, box
sums, pair layout, coefficient, C(0, 0)), which the torch code calls with torch tensors and
normalized_peer_np with numpy arrays. torch and cupy are imported only when a case runs, so `list`
works anywhere; `list --json` says which normalizations each peer computes ("normalizations").
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xcsuite import rules
from xcsuite.benchjson import UsageError, int_value, parse_case_line
# The forms, window kinds and normalizations (xcorr_bench's normalize=) are the model's.
from xcsuite.spec import (FORMS, NORMALIZATIONS, WINDOW_KINDS, WINDOW_MODES, full_shifts, overlap_total, parse_window,
                          same_shifts, valid_shifts)

TOLERANCE = 1e-5
ZNCC_TOLERANCE = 1e-4  # absolute, on values in [-1, 1] (reference.hpp's kNormalizedBound)
TF32_TOLERANCE = 2e-3  # relative: one TF32 pass (the bound of tensor-hankel-tf32 and tensor-tiled-tf32)
CONSTANT_OVERLAP = 1e-6  # the contract: a part whose variance is at most 1e-6 of its matrix's is constant
FULL_CHECK_FMAS_CPU = 3e8  # scipy on the CPU up to this; sampled definition on the GPU beyond
CHECK_SAMPLES = 65536
ROOT = Path(__file__).resolve().parents[1]

PEERS = [
    {"name": "torch-conv2d", "needs": ("torch",),
     "summary": "torch.nn.functional.conv2d (cuDNN, FP32, TF32 off, cudnn.benchmark), the left zero-padded to the "
                "window; rights as out-channels, N images x M out-channels, groups=N for n-to-mn",
     "timed": "F.pad + conv2d (+ the n-to-mn regrouping of rights and output)",
     "normalizations": NORMALIZATIONS,
     "normalized": {"zncc": "means subtracted (float32), conv2d of the shifted inputs, the overlap sums by "
                            "avg_pool2d (divisor 1) of the padded (L', L'^2) and conv2d of the padded ones with "
                            "(R', R'^2), n from the 1-D overlaps; the coefficient in float32",
                    "zero-lag": "the raw conv2d output times 1 / C(0, 0), C(0, 0) of every pair in float64 "
                                "(einsum of the overlapping corners)"}},
    {"name": "torch-conv2d-tf32", "needs": ("torch",),
     "summary": "torch-conv2d with cuDNN's TF32 allowed (torch.backends.cudnn.allow_tf32 = True, PyTorch's default "
                "for convolutions): its tensor-core algorithms at TF32 precision",
     "timed": "F.pad + conv2d (+ the n-to-mn regrouping of rights and output)",
     "precision": "tf32", "tolerance": TF32_TOLERANCE,
     "normalizations": ("none",)},  # a TF32 sum is no basis for ZNCC's 1e-4: refused
    {"name": "torch-fft", "needs": ("torch",),
     "summary": "torch.fft rfft2 at a 2,3,5,7-smooth size without aliasing in the window, conjugate product "
                "broadcast over the form, irfft2, crop by shift mod P",
     "timed": "rfft2 of both stacks, product, irfft2, crop to the window (plans cached by torch)",
     "normalizations": NORMALIZATIONS,
     "normalized": {"zncc": "means and mean-subtracted copies in float64, summed-area tables (cumsum) of "
                            "(L', L'^2, R', R'^2) in float64, the raw torch-fft correlation of the float32 "
                            "copies, box sums gathered per shift, the coefficient in float64",
                    "zero-lag": "the raw torch-fft output times 1 / C(0, 0), C(0, 0) of every pair in float64 "
                                "(einsum of the overlapping corners)"}},
    {"name": "cupy-correlate2d", "needs": ("cupy", "torch"),
     "summary": "cupyx.scipy.signal.correlate2d, one call per pair (a user's loop); full/valid/same mode or "
                "full + crop",
     "timed": "the loop of correlate2d calls into the output stack",
     "normalizations": ("none",)},  # cupyx.scipy.signal has no normalized correlation: refused
    {"name": "npp-normlevel", "needs": ("torch",), "libraries": "NPP (libnppc, libnppist)",
     "summary": "NVIDIA NPP's nppiCrossCorrValid_NormLevel_32f_C1R_Ctx through ctypes on PyTorch's device "
                "pointers, one call per pair (a user's loop), on the timed stream; ZNCC of the valid window only",
     "timed": "the means subtracted (torch, float32), then the loop of NPP calls into the output stack",
     "windows": ("valid",),  # NPP's Full/Same NormLevel pad and anchor differently from CONVENTIONS.md
     "normalizations": ("zncc",),
     "normalized": {"zncc": "every matrix minus its mean (torch, float32; the coefficient does not change), "
                            "then nppiCrossCorrValid_NormLevel_32f_C1R_Ctx per pair (NPP's own sums), scratch "
                            "buffer allocated once per case"},
     "smoke": "hL=32 wL=32 hR=8 wR=8 window=valid normalize=zncc"},
]
for _p in PEERS:  # FP32 at xcorr's FP32 bound unless an entry says otherwise (torch-conv2d-tf32)
    _p.setdefault("precision", "fp32")
    _p.setdefault("tolerance", TOLERANCE)
PEER_NAMES = [p["name"] for p in PEERS]
PEER_BY_NAME = {p["name"]: p for p in PEERS}


class CaseError(Exception):
    """A case that cannot be timed: its repetitions are error entries with this message."""


def case_error(e: Exception, torch) -> str:
    """The error entry's message of a case that failed (every repetition gets it): a CaseError's
    own words, the first line of an out-of-memory error, else the exception's type and first line.
    The cache of a failed allocation is released for the next case."""
    if isinstance(e, CaseError):
        return str(e)
    torch.cuda.empty_cache()
    if isinstance(e, torch.cuda.OutOfMemoryError):
        return f"not enough GPU memory: {str(e).splitlines()[0] if str(e) else 'out of memory'}"
    return f"{type(e).__name__}: {e}".splitlines()[0]


# --- the registry ------------------------------------------------------------------------------

def missing_packages(peer: dict) -> list[str]:
    return [m for m in peer["needs"] if importlib.util.find_spec(m) is None]


def unavailable_reason(peer: dict) -> str:
    """Why the peer cannot run here ("" if it can): a Python package that is not installed, or a
    shared library that does not load (npp-normlevel's NPP)."""
    missing = missing_packages(peer)
    if missing:
        return f"not installed: {', '.join(missing)}"
    if peer.get("libraries"):
        try:
            load_npp()
        except NppUnavailable as e:
            return f"not loadable: {peer['libraries']}: {e}"
    return ""


def registry() -> list[dict]:
    """The peers' `list --json` entries like `xcorr list --json`, plus whether the peer can run here (its
    Python packages are importable, its libraries load; the GPU is found only when a case runs)."""
    out = []
    for p in PEERS:
        why = unavailable_reason(p)
        out.append({"name": p["name"], "family": "peer", "summary": p["summary"], "timed": p["timed"],
                    "precision": p["precision"], "tolerance": p["tolerance"],
                    "forms": list(FORMS),
                    "windows": list(p.get("windows", WINDOW_KINDS)), "params": {},
                    "normalizations": list(p["normalizations"]), "available": not why, "unavailable_reason": why})
    return out


# --- windows: xcsuite/spec.py's parsing and named rectangles (lib/core.cpp's, in Python) --

full_window = full_shifts
same_window = same_shifts


def valid_window(hL, wL, hR, wR):
    w = valid_shifts(hL, wL, hR, wR)
    if w is None:
        raise UsageError(f"no valid window: neither matrix is at least as large as the other in both dimensions "
                         f"(left {hL}x{wL}, right {hR}x{wR})")
    return w



def resolve_window(key: str | None, value: str | None, hL, wL, hR, wR):
    """The rectangle (dy0, dy1, dx0, dx1) of a case's window key (None: full), parsed as a Shape's
    window is (xcorr_bench's keys and rules)."""
    if key is None:
        return full_window(hL, wL, hR, wR)
    if key == "window" and value not in WINDOW_MODES:
        raise UsageError(f"window= takes full, valid or same, got '{value}'")
    try:
        kind, given = parse_window(value if key == "window" else f"{key}={value}")
    except ValueError as e:
        raise UsageError(str(e)) from None
    named = {"full": full_window, "valid": valid_window, "same": same_window}
    return named[kind](hL, wL, hR, wR) if kind in named else given


def window_text(w) -> str:
    return f"{w[0]}:{w[1]},{w[2]}:{w[3]}"


def window_fmas(w, hL, wL, hR, wR) -> float:
    return float(overlap_total(w[0], w[1], hL, hR)) * float(overlap_total(w[2], w[3], wL, wR))


# (left, right) of every output in output order, and their count (CONVENTIONS.md; python/xcorr/_rules.py).
pairs = rules.pairs
pair_count = rules.out_count


def clamp_range(s0, s1, m, n):
    """The shifts of s0..s1 where a length-m left and a length-n right overlap, or None."""
    a, b = max(s0, -(n - 1)), min(s1, m - 1)
    return (a, b) if a <= b else None


# --- torch-conv2d's padding --------------------------------------------------------------------

@dataclass(frozen=True)
class ConvAxis:
    """One dimension of torch-conv2d's input: rows crop0..crop1 of the left (a view), then
    `extra_before`/`extra_after` zeros (F.pad), then `conv_pad` zeros on both sides (conv2d's
    padding=). Its cross-correlation with a length-n right has exactly the window's shifts s0..s1:
    output i is shift s0 + i. `empty`: no shift of the window overlaps (the output is zeros)."""

    crop0: int
    crop1: int
    extra_before: int
    extra_after: int
    conv_pad: int
    empty: bool


def conv_axis(s0: int, s1: int, m: int, n: int) -> ConvAxis:
    """The virtual input is left positions s0 .. s1 + n - 1 (zero outside 0..m-1): its valid
    correlation with the right has s1 - s0 + 1 outputs, output i at shift s0 + i."""
    lo, hi = s0, s1 + n  # half-open
    c0, c1 = max(0, lo), min(m, hi)
    if c0 >= c1:
        return ConvAxis(0, 0, 0, 0, 0, True)
    before, after = c0 - lo, hi - c1
    sym = min(before, after)
    return ConvAxis(c0, c1, before - sym, after - sym, sym, False)


def conv_reference_np(form, L, R, w):
    """torch-conv2d's arithmetic in numpy (float64): crop, pad, valid cross-correlation as
    conv2d computes it. For the CPU tests."""
    nL, hL, wL = L.shape
    nR, hR, wR = R.shape
    ay, ax = conv_axis(w[0], w[1], hL, hR), conv_axis(w[2], w[3], wL, wR)
    oh, ow = w[1] - w[0] + 1, w[3] - w[2] + 1
    out = np.zeros((pair_count(form, nL, nR), oh, ow))
    if ay.empty or ax.empty:
        return out
    x = L[:, ay.crop0:ay.crop1, ax.crop0:ax.crop1]
    x = np.pad(x, ((0, 0), (ay.extra_before + ay.conv_pad, ay.extra_after + ay.conv_pad),
                   (ax.extra_before + ax.conv_pad, ax.extra_after + ax.conv_pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, (hR, wR), axis=(1, 2))  # (nL, oh, ow, hR, wR)
    assert win.shape[1:3] == (oh, ow)
    for k, (i, j) in enumerate(pairs(form, nL, nR)):
        out[k] = np.einsum("yxrc,rc->yx", win[i], R[j])
    return out


# --- torch-fft's sizes and crop ----------------------------------------------------------------

def fast_len(n: int, primes=(2, 3, 5, 7)) -> int:
    """The smallest integer >= n whose prime factors are all in `primes` (the default: cuFFT's fast
    sizes, 2,3,5,7-smooth)."""
    n = max(1, int(n))
    while True:
        m = n
        for p in primes:
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


@dataclass(frozen=True)
class FftAxis:
    """One dimension of torch-fft: transform length P; the clamped shifts s0..s1 (None: no shift
    of the window overlaps) are read at circular indices (s mod P) and land at output offset
    `offset`; the window's other shifts are zeros."""

    P: int
    clamped: tuple | None
    offset: int
    out_len: int

    def indices(self) -> np.ndarray:
        if self.clamped is None:
            return np.zeros(0, dtype=np.int64)
        return np.arange(self.clamped[0], self.clamped[1] + 1, dtype=np.int64) % self.P


def fft_axis(s0: int, s1: int, m: int, n: int) -> FftAxis:
    """Circular correlation at length P equals the linear one at every shift s0..s1 when no term
    wraps: for s in [s0, s1] the right positions r in [0, n) read left (r + s) mod P, which must
    not alias into [0, m) unless r + s is itself in [0, m): P >= max(m - s0, s1 + n). rfft's
    trimming of inputs longer than P drops only terms that are zero in these shifts."""
    c = clamp_range(s0, s1, m, n)
    if c is None:
        return FftAxis(1, None, 0, s1 - s0 + 1)
    P = fast_len(max(m - c[0], c[1] + n))
    return FftAxis(P, c, c[0] - s0, s1 - s0 + 1)


def fft_reference_np(form, L, R, w):
    """torch-fft's arithmetic in numpy (float64): the same sizes, broadcast and crop. For the CPU
    tests."""
    nL, hL, wL = L.shape
    nR, hR, wR = R.shape
    ay, ax = fft_axis(w[0], w[1], hL, hR), fft_axis(w[2], w[3], wL, wR)
    out = np.zeros((pair_count(form, nL, nR), ay.out_len, ax.out_len))
    if ay.clamped is None or ax.clamped is None:
        return out
    s = (ay.P, ax.P)
    FL = np.fft.rfft2(_fit(L, s), s=s)
    FR = np.conj(np.fft.rfft2(_fit(R, s), s=s))
    prod = fft_product(form, FL, FR, nL, nR, np)
    C = np.fft.irfft2(prod, s=s)
    iy, ix = ay.indices(), ax.indices()
    out[:, ay.offset:ay.offset + len(iy), ax.offset:ax.offset + len(ix)] = C[:, iy[:, None], ix[None, :]]
    return out


def _fit(a, s):
    """numpy's rfft2 pads but, unlike torch's, also trims: kept explicit for the tests."""
    return a[:, :s[0], :s[1]]


def fft_product(form, FL, FR, nL, nR, xp):
    """The spectrum products of every pair in output order (FR already conjugated), by broadcast."""
    if form == "n-to-m":
        return (FL[:, None] * FR[None, :]).reshape((nL * nR,) + FL.shape[1:])
    if form == "n-to-mn":
        M = nR // nL
        return (FR.reshape((M, nL) + FR.shape[1:]) * FL[None]).reshape((nR,) + FL.shape[1:])
    return FL[0:1] * FR


def window_reference_np(form, L, R, w):
    """The float64 reference (independent of the peers): scipy's full correlation cropped,
    zero-extended, to the window."""
    from scipy.signal import correlate2d
    nL, hL, wL = L.shape
    nR, hR, wR = R.shape
    oh, ow = w[1] - w[0] + 1, w[3] - w[2] + 1
    out = np.zeros((pair_count(form, nL, nR), oh, ow))
    # full output row y is shift y - (hR - 1); window row i is shift w[0] + i
    fy0, fy1 = max(w[0], -(hR - 1)), min(w[1], hL - 1)
    fx0, fx1 = max(w[2], -(wR - 1)), min(w[3], wL - 1)
    if fy0 > fy1 or fx0 > fx1:
        return out
    for k, (i, j) in enumerate(pairs(form, nL, nR)):
        full = correlate2d(L[i].astype(np.float64), R[j].astype(np.float64), mode="full")
        out[k, fy0 - w[0]:fy1 - w[0] + 1, fx0 - w[2]:fx1 - w[2] + 1] = \
            full[fy0 + hR - 1:fy1 + hR, fx0 + wR - 1:fx1 + wR]
    return out


def scipy_mode(w, hL, wL, hR, wR) -> str | None:
    """The correlate2d mode whose output is exactly window w, or None (full + crop)."""
    if w == full_window(hL, wL, hR, wR):
        return "full"
    if w == same_window(hL, wL, hR, wR):
        return "same"
    try:
        if w == valid_window(hL, wL, hR, wR):
            return "valid"
    except UsageError:
        pass
    return None


# --- normalized outputs: the pieces shared by the torch peers and their numpy emulation ------------
#
# zncc (CONVENTIONS.md): per shift, (n·ΣLR - ΣL·ΣR) / sqrt((n·ΣL² - (ΣL)²)(n·ΣR² - (ΣR)²)) over the
# overlap, 0 where n = 0 or a part's variance is at most 1e-6 of its matrix's. As a competent user writes
# it: every matrix minus its own mean first (the coefficient does not change; on 1000 + noise the
# factors of the raw data cancel every float32 digit and ΣLR holds the signal in its 7th digit), then
# the raw correlation of the shifted inputs (the peer's own route: FFT or conv2d) and the overlap's
# n, ΣX', ΣX'² per shift:
#   torch-fft: box sums of summed-area tables (cumsum) in float64, as OpenCV's matchTemplate takes
#     them from integral images in double. Not FFT correlations with ones: an FFT's error is spread
#     evenly over the output (~1e-7 of the largest sum), and a small overlap's factor n·ΣX'² - (ΣX')²
#     is tiny, so its coefficient would be noise; a float32 table would lose the small boxes to the
#     large running sums. Tables are O(h·w) per matrix, so the sums cost nothing beside the FFT.
#   torch-conv2d: the textbook conv2d formula (examples/template_matching.py), float32: avg_pool2d
#     with divisor 1 (a box sum) over the padded (L', L'²), conv2d of the padded ones with (R', R'²)
#     as weights (the right's part under the overlap), n from the 1-D overlap counts (exact).
# zero-lag: the raw peer output times 1 / C(0, 0) (0 where C(0, 0) = 0), C(0, 0) of every pair
# accumulated in float64 from the inputs' overlapping corners (einsum / matmul), in the same call.
# The functions below take `xp` (numpy or torch) where the two spell an operation alike.

def overlap_spans(s0: int, s1: int, m: int, n: int):
    """For shifts s0..s1 along one axis (left length m, right length n): the right's overlapping
    index range [b, e) and the left's [b + s, e + s) per shift, all 0 where nothing overlaps
    (int64 numpy arrays)."""
    d = np.arange(s0, s1 + 1, dtype=np.int64)
    b, e = np.maximum(0, -d), np.minimum(n, m - d)
    ok = e > b
    b, e = np.where(ok, b, 0), np.where(ok, e, 0)
    return b, e, np.where(ok, b + d, 0), np.where(ok, e + d, 0)


def box_sums(t, r0, r1, c0, c1):
    """Sums over rows [r0, r1) x columns [c0, c1) (1-D index arrays: an outer product of boxes)
    from summed-area tables t (count, h + 1, w + 1): (count, len(r0), len(c0))."""
    r0, r1, c0, c1 = r0[:, None], r1[:, None], c0[None, :], c1[None, :]
    return t[:, r1, c1] - t[:, r0, c1] - t[:, r1, c0] + t[:, r0, c0]


def sat_np(x):
    """Summed-area tables of a stack in float64, row 0 and column 0 zero (numpy)."""
    t = np.zeros((x.shape[0], x.shape[1] + 1, x.shape[2] + 1))
    t[:, 1:, 1:] = np.asarray(x, dtype=np.float64).cumsum(1).cumsum(2)
    return t


def by_pairs(form, nL, nR, raw, left, right):
    """raw (pairs, ...) and per-left / per-right stacks (nL, ...), (nR, ...) as broadcastable views
    on a grid of the pairs: n-to-mn (M, N) with output k = j·N + i, every other form (nL, nR) with
    k = i·nR + j (one-to-one and one-to-many: nL = 1). Reshape the result to (pairs, ...)."""
    rest = tuple(raw.shape[1:])
    if form == "n-to-mn":
        M = nR // nL
        return raw.reshape((M, nL) + rest), [x[None] for x in left], [x.reshape((M, nL) + tuple(x.shape[1:]))
                                                                          for x in right]
    return raw.reshape((nL, nR) + rest), [x[:, None] for x in left], [x[None] for x in right]


def zncc_coefficient(xp, n, raw, sl, sll, vl, sr, srr, vr):
    """The contract's coefficient from the sums of the mean-shifted data: raw = ΣL'R', sl = ΣL',
    sll = ΣL'², likewise sr, srr; vl, vr the variances of the whole matrices (the constant-part test:
    a part's variance f / n² at most 1e-6 of its matrix's). All broadcastable; xp is numpy or torch."""
    fl, fr = n * sll - sl * sl, n * srr - sr * sr
    ok = (n > 0) & (fl > CONSTANT_OVERLAP * n * n * vl) & (fr > CONSTANT_OVERLAP * n * n * vr)
    # sqrt of each factor apart: their product overflows float32 for large overlaps of large values
    den = xp.sqrt(xp.where(ok, fl, 1.0)) * xp.sqrt(xp.where(ok, fr, 1.0))
    return xp.clip(xp.where(ok, (n * raw - sl * sr) / den, 0.0), -1.0, 1.0)


def pair_dots(form, A, B):
    """Per output pair (in output order) the dot product of its left row of A (nL, K) and its right
    row of B (nR, K): a matrix product, not the broadcast product of every pair."""
    nL, nR = A.shape[0], B.shape[0]
    if form == "n-to-mn":
        return (B.reshape(nR // nL, nL, -1) * A[None]).sum(-1).reshape(-1)
    return (A @ B.T).reshape(-1)


def c00_parts(L, R):
    """The parts of the inputs that overlap at shift (0, 0): the top-left min(hL, hR) x min(wL, wR)."""
    h, w = min(L.shape[1], R.shape[1]), min(L.shape[2], R.shape[2])
    return L[:, :h, :w].reshape(L.shape[0], -1), R[:, :h, :w].reshape(R.shape[0], -1)


def zero_lag_scale(xp, c00):
    """1 / C(0, 0) per pair, 0 where C(0, 0) = 0 (the contract: that pair's whole output is 0)."""
    nz = c00 != 0
    return xp.where(nz, 1.0 / xp.where(nz, c00, 1.0), 0.0)


def zncc_sums_fft_np(L, R, w, dtype=np.float32):
    """torch-fft's zncc pieces in numpy: means and shifted copies in float64, the sums from float64
    tables. -> (Ls, Rs as `dtype`, the FFT's input, n, (sl, sll, vl), (sr, srr, vr)), stats per
    left / per right (v: the matrix's variance)."""
    nL, hL, wL = L.shape
    nR, hR, wR = R.shape
    L64, R64 = np.asarray(L, np.float64), np.asarray(R, np.float64)
    ml, mr = L64.mean(axis=(1, 2), keepdims=True), R64.mean(axis=(1, 2), keepdims=True)
    Ls, Rs = L64 - ml, R64 - mr
    rb, re, lrb, lre = overlap_spans(w[0], w[1], hL, hR)
    cb, ce, lcb, lce = overlap_spans(w[2], w[3], wL, wR)
    n = ((re - rb)[:, None] * (ce - cb)[None, :]).astype(np.float64)
    vl, vr = (Ls * Ls).mean(axis=(1, 2), keepdims=True), (Rs * Rs).mean(axis=(1, 2), keepdims=True)
    left = (box_sums(sat_np(Ls), lrb, lre, lcb, lce), box_sums(sat_np(Ls * Ls), lrb, lre, lcb, lce), vl)
    right = (box_sums(sat_np(Rs), rb, re, cb, ce), box_sums(sat_np(Rs * Rs), rb, re, cb, ce), vr)
    return Ls.astype(dtype), Rs.astype(dtype), n, left, right


def _padded_np(x, ay, ax):
    """torch-conv2d's input (crop, F.pad, conv2d's padding) of a stack, all padding explicit."""
    x = x[:, ay.crop0:ay.crop1, ax.crop0:ax.crop1]
    return np.pad(x, ((0, 0), (ay.extra_before + ay.conv_pad, ay.extra_after + ay.conv_pad),
                      (ax.extra_before + ax.conv_pad, ax.extra_after + ax.conv_pad)))


def zncc_sums_conv_np(L, R, w, dtype=np.float32):
    """torch-conv2d's zncc pieces in numpy, float32 as the peer computes them: means, shifted
    copies, box sums of the padded (L', L'²) (avg_pool2d), the padded ones correlated with (R', R'²)
    (conv2d). -> as zncc_sums_fft_np (raw not included); None for an empty window."""
    nL, hL, wL = L.shape
    nR, hR, wR = R.shape
    L32, R32 = np.asarray(L, dtype), np.asarray(R, dtype)
    ml, mr = L32.mean(axis=(1, 2), keepdims=True, dtype=dtype), R32.mean(axis=(1, 2), keepdims=True, dtype=dtype)
    Ls, Rs = L32 - ml, R32 - mr
    ay, ax = conv_axis(w[0], w[1], hL, hR), conv_axis(w[2], w[3], wL, wR)
    if ay.empty or ax.empty:
        return None
    x = _padded_np(Ls, ay, ax)
    win = np.lib.stride_tricks.sliding_window_view(x, (hR, wR), axis=(1, 2))
    sl, sll = win.sum(axis=(3, 4), dtype=dtype), (win * win).sum(axis=(3, 4), dtype=dtype)
    mask = np.lib.stride_tricks.sliding_window_view(_padded_np(np.ones((1, hL, wL), dtype), ay, ax)[0], (hR, wR))
    sr = np.einsum("yxrc,krc->kyx", mask, Rs).astype(dtype)
    srr = np.einsum("yxrc,krc->kyx", mask, Rs * Rs).astype(dtype)
    rb, re, _, _ = overlap_spans(w[0], w[1], hL, hR)
    cb, ce, _, _ = overlap_spans(w[2], w[3], wL, wR)
    n = ((re - rb)[:, None] * (ce - cb)[None, :]).astype(dtype)
    vl, vr = (Ls * Ls).mean(axis=(1, 2), keepdims=True), (Rs * Rs).mean(axis=(1, 2), keepdims=True)
    return Ls, Rs, n, (sl, sll, vl), (sr, srr, vr)


def normalized_peer_np(variant, mode, form, L, R, w, dtype=np.float32):
    """A torch peer's normalized output computed by numpy with the same pieces and precisions
    (the raw part by fft_reference_np / conv_reference_np on float32 inputs, numpy's float32 FFT
    standing in for cuFFT): for the CPU tests. dtype=np.float64 runs the float32 steps in float64
    (the arithmetic alone, without float32's rounding)."""
    nL, nR = L.shape[0], R.shape[0]
    raw_np = fft_reference_np if variant == "torch-fft" else conv_reference_np
    if mode == "zero-lag":
        L32, R32 = np.asarray(L, dtype), np.asarray(R, dtype)
        raw = raw_np(form, L32, R32, w).astype(dtype)
        A, B = c00_parts(L32, R32)
        scale = zero_lag_scale(np, pair_dots(form, A.astype(np.float64), B.astype(np.float64)))
        return raw * scale.astype(dtype)[:, None, None]
    parts = (zncc_sums_fft_np if variant == "torch-fft" else zncc_sums_conv_np)(L, R, w, dtype)
    shape = (pair_count(form, nL, nR), w[1] - w[0] + 1, w[3] - w[2] + 1)
    if parts is None:
        return np.zeros(shape, dtype)
    Ls, Rs, n, left, right = parts
    raw = raw_np(form, Ls, Rs, w)
    raw = raw.astype(dtype) if variant == "torch-conv2d" else raw
    raw4, (sl, sll, vl), (sr, srr, vr) = by_pairs(form, nL, nR, raw, left, right)
    return zncc_coefficient(np, n, raw4, sl, sll, vl, sr, srr, vr).reshape(shape).astype(dtype)


_REFERENCE = None


def reference_module():
    """python/xcorr/_reference.py (the package's float64 reference, numpy only), loaded by path so
    that the compiled package is not needed."""
    global _REFERENCE
    if _REFERENCE is None:
        spec = importlib.util.spec_from_file_location("xcorr_reference_np", ROOT / "python" / "xcorr" / "_reference.py")
        _REFERENCE = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(_REFERENCE)
    return _REFERENCE


def normalized_reference_np(mode, form, L, R, w):
    """The float64 reference of a normalized output (python/xcorr/_reference.py: direct sums over
    the window and summed-area tables, independent of the peers' FFT and conv2d)."""
    return reference_module().normalized(mode, form, np.asarray(L, np.float64), np.asarray(R, np.float64), tuple(w))


def zncc_border_np(form, L, R, w):
    """_reference.zncc_border: the outputs near the constant rule's border (either answer right)."""
    return reference_module().zncc_border(form, np.asarray(L, np.float64), np.asarray(R, np.float64), tuple(w))


def cpu_reference_fmas(pairs, hL, wL, hR, wR, window, normalize) -> float:
    """The CPU reference's work for a case (Bench.check: scipy's up to FULL_CHECK_FMAS_CPU, else
    sampled on the GPU; xcsuite/cost.py weighs the check by it). window_reference_np crops scipy's
    full correlation, so the full output's (pairs x hL wL hR wR), not the window's, which a small
    window of large matrices hides; a normalized case's (_reference.py) loops over the smaller
    matrix per output: per pair the clamped window times the smaller matrix's area."""
    if normalize == "none":
        return float(pairs) * hL * wL * hR * wR
    fy, fx = clamp_range(window[0], window[1], hL, hR), clamp_range(window[2], window[3], wL, wR)
    if fy is None or fx is None:
        return 0.0
    return float(pairs) * (fy[1] - fy[0] + 1) * (fx[1] - fx[0] + 1) * min(hL * wL, hR * wR)


# --- cases -------------------------------------------------------------------------------------

@dataclass
class Case:
    variant: str
    form: str
    hL: int
    wL: int
    hR: int
    wR: int
    nL: int
    nR: int
    window: tuple
    full: bool
    batch: int = 0  # 0: from the pilot
    normalize: str = "none"  # none | zncc | zero-lag (xcorr_bench's normalize=)

    @property
    def pairs(self) -> int:
        return pair_count(self.form, self.nL, self.nR)

    @property
    def out_shape(self) -> tuple:
        return (self.pairs, self.window[1] - self.window[0] + 1, self.window[3] - self.window[2] + 1)

    @property
    def fmas(self) -> float:
        return self.pairs * window_fmas(self.window, self.hL, self.wL, self.hR, self.wR)

    def name(self) -> str:
        s = (f"{self.variant}/{self.form}/hL:{self.hL}/wL:{self.wL}/hR:{self.hR}/wR:{self.wR}"
             f"/nL:{self.nL}/nR:{self.nR}")
        s = s if self.full else s + "/shifts:" + window_text(self.window)
        # bench_main.cpp's name: /norm:MODE after the shifts, only for a normalization other than none
        return s if self.normalize == "none" else s + "/norm:" + self.normalize


def parse_case(spec: str, batch: int = 0) -> Case:
    """A case line (xcorr_bench's syntax: xcsuite.benchjson.parse_case_line) of a peer -> Case;
    UsageError for a bad line or one the peer refuses."""
    line = parse_case_line(spec)
    kv = line.keys
    if kv["variant"] not in PEER_NAMES:
        raise UsageError(f"case '{spec}': unknown peer '{kv['variant']}' (known: {', '.join(PEER_NAMES)})")
    if kv["form"] not in FORMS:
        raise UsageError(f"case '{spec}': unknown form '{kv['form']}' (expected one-to-one, one-to-many, n-to-mn or n-to-m)")
    d = {"hL": 0, "wL": 0, "hR": 0, "wR": 0, "nL": 1, "nR": 1}
    for k, v in kv.items():
        if k == "size":
            d["hL"] = d["wL"] = d["hR"] = d["wR"] = int_value(f"case '{spec}': size", v, 1, 2**31 - 1)
        elif k in d:
            d[k] = int_value(f"case '{spec}': {k}", v, 1, 2**31 - 1)
        elif k == "batch":
            batch = int_value(f"case '{spec}': batch", v, 1, 1 << 20)
        elif k == "normalize":
            if v not in NORMALIZATIONS:
                raise UsageError(f"case '{spec}': normalize=: unknown normalization '{v}' (expected none, zncc or "
                                 f"zero-lag)")
        elif k not in ("variant", "form"):
            raise UsageError(f"unknown parameter '{k}' for {kv['variant']} (it takes none)")
    if min(d["hL"], d["wL"], d["hR"], d["wR"]) <= 0:
        raise UsageError(f"case '{spec}': empty matrix")
    form, nL, nR = kv["form"], d["nL"], d["nR"]
    if form == "one-to-one" and (nL, nR) != (1, 1):
        raise UsageError(f"case '{spec}': one-to-one takes exactly one left and one right matrix")
    if form == "one-to-many" and nL != 1:
        raise UsageError(f"case '{spec}': one-to-many takes exactly one left matrix")
    if form == "n-to-mn" and nR % nL:
        raise UsageError(f"case '{spec}': n-to-mn needs a right count that is a multiple of the left count")
    w = resolve_window(line.window_key, line.window_value, d["hL"], d["wL"], d["hR"], d["wR"])
    if (w[1] - w[0] + 1) * (w[3] - w[2] + 1) > (1 << 30):
        raise UsageError(f"case '{spec}': window {window_text(w)} too large: one output matrix would exceed 2^30 elements")
    full = w == full_window(d["hL"], d["wL"], d["hR"], d["wR"])
    normalize = kv.get("normalize", "none")
    supported = PEER_BY_NAME[kv["variant"]]["normalizations"]
    if normalize not in supported:  # refused like a window a variant does not declare: nothing else computed
        raise UsageError(f"case '{spec}': {kv['variant']} does not compute normalize={normalize} "
                         f"(it computes: {', '.join(supported)})")
    if kv["variant"] == "npp-normlevel":
        why = npp_valid_refusal(w, d["hL"], d["wL"], d["hR"], d["wR"])
        if why:
            raise UsageError(f"case '{spec}': npp-normlevel: {why}")
    return Case(kv["variant"], form, d["hL"], d["wL"], d["hR"], d["wR"], nL, nR, w, full, batch, normalize)


# --- the peers (torch; cupy) -------------------------------------------------------------------

class TorchConv2d:
    def __init__(self, c: Case, torch):
        self.c, self.torch = c, torch
        self.F = torch.nn.functional
        self.ay = conv_axis(c.window[0], c.window[1], c.hL, c.hR)
        self.ax = conv_axis(c.window[2], c.window[3], c.wL, c.wR)
        self.extra = (self.ax.extra_before, self.ax.extra_after, self.ay.extra_before, self.ay.extra_after)

    def padded(self, L):
        """The left cropped to the rows and columns the window reads, and F.pad's zeros (conv2d's
        padding= adds conv_pad on both sides)."""
        x = L[:, self.ay.crop0:self.ay.crop1, self.ax.crop0:self.ax.crop1]
        if any(self.extra):
            x = self.F.pad(x, self.extra)  # zeros; only the asymmetric part (conv2d pads the rest)
        return x

    def __call__(self, L, R):
        c, F = self.c, self.F
        if self.ay.empty or self.ax.empty:
            return L.new_zeros(c.out_shape)
        x = self.padded(L)
        pad = (self.ay.conv_pad, self.ax.conv_pad)
        oh, ow = c.out_shape[1:]
        if c.form == "n-to-mn":
            N, M = c.nL, c.nR // c.nL
            # groups=N: out-channel g*M + j reads input channel g, so the rights go group-major
            # (k = i + N*j -> i*M + j) and the output back (views where N or M is 1)
            w = R.view(M, N, c.hR, c.wR).transpose(0, 1).reshape(N * M, 1, c.hR, c.wR)
            y = F.conv2d(x.unsqueeze(0), w, padding=pad, groups=N)
            return y.view(N, M, oh, ow).transpose(0, 1).reshape(c.out_shape)
        y = F.conv2d(x.unsqueeze(1), R.unsqueeze(1), padding=pad)  # (nL, nR, oh, ow): k = i*nR + j
        return y.reshape(c.out_shape)


class TorchConv2dTf32(TorchConv2d):
    """torch-conv2d with TF32 allowed for the call (the process default is off, as the FP32 peers
    need it; a user who leaves PyTorch's default on gets this)."""

    def __call__(self, L, R):
        backend = self.torch.backends.cudnn
        before, backend.allow_tf32 = backend.allow_tf32, True
        try:
            return super().__call__(L, R)
        finally:
            backend.allow_tf32 = before


class TorchFft:
    def __init__(self, c: Case, torch):
        self.c, self.torch = c, torch
        self.ay = fft_axis(c.window[0], c.window[1], c.hL, c.hR)
        self.ax = fft_axis(c.window[2], c.window[3], c.wL, c.wR)
        self.empty = self.ay.clamped is None or self.ax.clamped is None
        self.s = (self.ay.P, self.ax.P)
        self.iy = self.ix = None
        oh, ow = c.out_shape[1:]
        ny, nx = len(self.ay.indices()), len(self.ax.indices())
        # zeros around the clamped shifts (F.pad order: last dimension first)
        self.pad = (self.ax.offset, ow - self.ax.offset - nx, self.ay.offset, oh - self.ay.offset - ny)

    def __call__(self, L, R):
        torch, c = self.torch, self.c
        if self.empty:
            return L.new_zeros(c.out_shape)
        if self.iy is None:
            self.iy = torch.as_tensor(self.ay.indices(), device=L.device)[:, None]
            self.ix = torch.as_tensor(self.ax.indices(), device=L.device)[None, :]
        FL = torch.fft.rfft2(L, s=self.s)
        FR = torch.fft.rfft2(R, s=self.s).conj()
        C = torch.fft.irfft2(fft_product(c.form, FL, FR, c.nL, c.nR, torch), s=self.s)
        out = C[:, self.iy, self.ix]
        if any(self.pad):
            out = torch.nn.functional.pad(out, self.pad)
        return out


class CupyCorrelate2d:
    def __init__(self, c: Case, torch):
        import cupy
        from cupyx.scipy.signal import correlate2d
        self.c, self.torch, self.cupy, self.correlate2d = c, torch, cupy, correlate2d
        self.mode = scipy_mode(c.window, c.hL, c.wL, c.hR, c.wR)
        w = c.window
        fy0, fy1 = max(w[0], -(c.hR - 1)), min(w[1], c.hL - 1)
        fx0, fx1 = max(w[2], -(c.wR - 1)), min(w[3], c.wL - 1)
        self.empty = fy0 > fy1 or fx0 > fx1
        # full output rows/columns of the clamped window, and where they land in the window
        self.src = (slice(fy0 + c.hR - 1, fy1 + c.hR), slice(fx0 + c.wR - 1, fx1 + c.wR))
        self.dst = (slice(fy0 - w[0], fy1 - w[0] + 1), slice(fx0 - w[2], fx1 - w[2] + 1))
        self.pairs = pairs(c.form, c.nL, c.nR)

    def __call__(self, L, R, limit=None):
        cp = self.cupy
        Lc, Rc = cp.from_dlpack(L), cp.from_dlpack(R)
        if self.mode is not None:
            if self.empty:
                return self.torch.zeros(self.c.out_shape, device=L.device)
            out = cp.empty(self.c.out_shape, dtype=cp.float32)
            for k, (i, j) in enumerate(self.pairs[:limit]):
                out[k] = self.correlate2d(Lc[i], Rc[j], mode=self.mode)
        else:
            out = cp.zeros(self.c.out_shape, dtype=cp.float32)
            if not self.empty:
                for k, (i, j) in enumerate(self.pairs[:limit]):
                    out[k][self.dst] = self.correlate2d(Lc[i], Rc[j], mode="full")[self.src]
        return self.torch.from_dlpack(out)


# --- npp-normlevel: NVIDIA NPP through ctypes ------------------------------------------------------
#
# nppiCrossCorrValid_NormLevel_32f_C1R_Ctx (nppi_statistics_functions.h, "CrossCorrValid_NormLevel")
# is NPP's correlation coefficient in valid mode: the template wholly inside the source image,
# dst (Ws - Wt + 1) x (Hs - Ht + 1), dst(r, c) = the coefficient of the template and the source
# block whose top-left corner is (r, c). With source = left and template = right that is shift
# (dy, dx) = (r, c) of CONVENTIONS.md (C[dy][dx] = Σ L[r + dy][c + dx]·R[r][c]): our valid window
# (0..hL-hR, 0..wL-wR) in our layout, row-major, as the checker compares it. NPP's Full and Same
# modes anchor the template at its centre and zero-pad the source: other edges than our windows,
# so the peer computes the valid window only (a right larger than the left, our valid window's
# negative shifts, is refused: NPP's template must fit inside its image). The signatures and the
# NppStreamContext layout are the headers' of the nvidia-npp 13.2 wheel (nppdefs.h, nppcore.h,
# nppi_statistics_functions.h); CUDA 12's differ only in the last int's name (nReserved0, in 13 a
# union with the Npp32u hWorkspace, 0 = none).

NPP_STATUS_NAMES = {-1000: "NPP_NOT_SUPPORTED_MODE_ERROR", -1: "NPP_NOT_IMPLEMENTED_ERROR",
                    -2: "NPP_INVALID_HOST_POINTER_ERROR", -3: "NPP_INVALID_DEVICE_POINTER_ERROR",
                    -4: "NPP_LUT_PALETTE_BITSIZE_ERROR", -5: "NPP_ZC_MODE_NOT_SUPPORTED_ERROR",
                    -6: "NPP_NOT_SUFFICIENT_COMPUTE_CAPABILITY", -7: "NPP_TEXTURE_BIND_ERROR",
                    -8: "NPP_WRONG_INTERSECTION_ROI_ERROR", -9: "NPP_HAAR_CLASSIFIER_PIXEL_MATCH_ERROR",
                    -10: "NPP_MEMFREE_ERROR", -11: "NPP_MEMSET_ERROR", -12: "NPP_MEMCPY_ERROR",
                    -13: "NPP_ALIGNMENT_ERROR", -14: "NPP_CUDA_KERNEL_EXECUTION_ERROR",
                    -17: "NPP_STEP_ERROR", -19: "NPP_SIZE_ERROR", -20: "NPP_MEMORY_ALLOCATION_ERR",
                    -21: "NPP_NULL_POINTER_ERROR", -22: "NPP_RANGE_ERROR", -23: "NPP_BAD_ARGUMENT_ERROR",
                    -28: "NPP_DIVIDE_BY_ZERO_ERROR", -33: "NPP_NO_MEMORY_ERROR", -34: "NPP_RESIZE_FACTOR_ERROR",
                    -35: "NPP_INTERPOLATION_ERROR", -36: "NPP_MIRROR_FLIP_ERROR", -37: "NPP_DATA_TYPE_ERROR",
                    -38: "NPP_STRIDE_ERROR", -39: "NPP_CHANNEL_ORDER_ERROR", -40: "NPP_CHANNEL_ERROR",
                    -41: "NPP_ANCHOR_ERROR", -42: "NPP_MASK_SIZE_ERROR", -1002: "NPP_CUDA_KERNEL_EXECUTION_ERROR",
                    1: "NPP_NO_OPERATION_WARNING", 6: "NPP_DIVIDE_BY_ZERO_WARNING",
                    10000: "NPP_MISALIGNED_DST_ROI_WARNING"}


class NppiSize(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int), ("height", ctypes.c_int)]


class NppStreamContext(ctypes.Structure):
    """nppdefs.h's NppStreamContext (x86-64: 48 bytes; hStream at 0, nSharedMemPerBlock at 24,
    nStreamFlags at 40, nReserved0 / hWorkspace at 44)."""
    _fields_ = [("hStream", ctypes.c_void_p),  # cudaStream_t
                ("nCudaDeviceId", ctypes.c_int),
                ("nMultiProcessorCount", ctypes.c_int),
                ("nMaxThreadsPerMultiProcessor", ctypes.c_int),
                ("nMaxThreadsPerBlock", ctypes.c_int),
                ("nSharedMemPerBlock", ctypes.c_size_t),
                ("nCudaDevAttrComputeCapabilityMajor", ctypes.c_int),
                ("nCudaDevAttrComputeCapabilityMinor", ctypes.c_int),
                ("nStreamFlags", ctypes.c_uint),
                ("nReserved0", ctypes.c_uint)]  # 13.x: union { NppWorkspace hWorkspace; Npp32u nReserved0; }


class NppLibraryVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("build", ctypes.c_int)]


class NppUnavailable(Exception):
    """NPP's libraries cannot be loaded here: the peer is unavailable, with this reason."""


class NppError(Exception):
    """An NPP call returned an error status (negative NppStatus)."""


@dataclass
class NppLib:
    core: object  # ctypes.CDLL of libnppc
    ist: object  # libnppist (image statistics: the proximity functions)
    where: str

    def version(self) -> str:
        v = self.core.nppGetLibVersion()
        return f"{v.contents.major}.{v.contents.minor}.{v.contents.build}" if v else "unknown"


NPP_MAJORS = ("", ".13", ".12")  # libnppist.so, then the sonames of CUDA 13 and 12


def npp_dirs() -> list[str]:
    """Where NPP may live besides the loader's own path: XCORR_NPP_DIR (colon-separated; e.g. the
    two libraries copied from the nvidia-npp wheel into build-npp/ and carried to the GPU machine),
    the repository's build-npp/, the CUDA toolkit's library directories, and the nvidia-npp pip
    packages (cu12: nvidia/npp/lib, cu13: nvidia/cu13/lib)."""
    dirs = [d for d in os.environ.get("XCORR_NPP_DIR", "").split(":") if d]
    dirs += [str(ROOT / "build-npp")]
    cuda = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    for base in ([cuda] if cuda else []) + ["/usr/local/cuda"]:
        dirs += [f"{base}/lib64", f"{base}/targets/x86_64-linux/lib"]
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec else []:
        dirs += [os.path.join(loc, "npp", "lib"), os.path.join(loc, "cu13", "lib"), os.path.join(loc, "cu12", "lib")]
    return list(dict.fromkeys(dirs))


def npp_candidates() -> list[tuple[str, str]]:
    """(libnppc, libnppist) pairs to try, in order: the dynamic loader's search path by name, then
    each directory of npp_dirs(); the two of one pair come from one place and one major version."""
    out = [(f"libnppc.so{m}", f"libnppist.so{m}") for m in NPP_MAJORS]
    for d in npp_dirs():
        out += [(os.path.join(d, f"libnppc.so{m}"), os.path.join(d, f"libnppist.so{m}")) for m in NPP_MAJORS
                if os.path.exists(os.path.join(d, f"libnppist.so{m}"))]
    return out


_NPP: NppLib | NppUnavailable | None = None


def _bind(core, ist):
    """Declares the signatures used (ctypes checks the arguments; NppStatus is an int)."""
    core.nppGetLibVersion.restype = ctypes.POINTER(NppLibraryVersion)
    core.nppGetLibVersion.argtypes = []
    if hasattr(core, "nppGetStreamContext"):  # CUDA 12's nppcore.h; 13's library still exports it
        core.nppGetStreamContext.restype = ctypes.c_int
        core.nppGetStreamContext.argtypes = [ctypes.POINTER(NppStreamContext)]
    f = ist.nppiValidNormLevelGetBufferHostSize_32f_C1R_Ctx
    f.restype, f.argtypes = ctypes.c_int, [NppiSize, ctypes.POINTER(ctypes.c_size_t), NppStreamContext]
    f = ist.nppiCrossCorrValid_NormLevel_32f_C1R_Ctx
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_void_p, ctypes.c_int, NppiSize, ctypes.c_void_p, ctypes.c_int, NppiSize,
                  ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, NppStreamContext]


def load_npp() -> NppLib:
    """NPP's libnppc and libnppist (cached), or NppUnavailable saying what was tried."""
    global _NPP
    if _NPP is None:
        errors = []
        for core_path, ist_path in npp_candidates():
            try:
                core = ctypes.CDLL(core_path, mode=ctypes.RTLD_GLOBAL)  # libnppist needs libnppc's soname
                ist = ctypes.CDLL(ist_path)
                _bind(core, ist)
            except (OSError, AttributeError) as e:
                errors.append(str(e).splitlines()[0] if str(e) else f"{ist_path}: {type(e).__name__}")
                continue
            _NPP = NppLib(core, ist, ist_path)
            break
        else:
            tried = "; ".join(errors[:3]) + (f"; ... {len(errors) - 3} more" if len(errors) > 3 else "")
            _NPP = NppUnavailable(f"libnppist/libnppc not found (set XCORR_NPP_DIR, or install CUDA's NPP or "
                                  f"the nvidia-npp wheel): {tried}")
    if isinstance(_NPP, NppUnavailable):
        raise _NPP
    return _NPP


def npp_status(what: str, st: int, warnings: set | None = None) -> None:
    """Raises NppError for a negative NppStatus; a positive one (a warning) goes into `warnings`."""
    if st < 0:
        raise NppError(f"{what} returned NppStatus {st} ({NPP_STATUS_NAMES.get(st, 'unknown')})")
    if st > 0 and warnings is not None:
        warnings.add(st)


def npp_stream_context(npp: NppLib, torch, stream) -> NppStreamContext:
    """The context of `stream` on the current device: NPP's own (nppGetStreamContext, where the
    library exports it) or nppdefs.h's recipe from the device's properties, then hStream and
    nStreamFlags set to the stream the peer is timed on."""
    dev = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(dev)
    ctx = NppStreamContext()
    ok = False
    if hasattr(npp.core, "nppGetStreamContext"):
        # NPP's own answer where it gives one for PyTorch's device (13.x's header no longer declares
        # the function: an error or another device falls back to the header's recipe below)
        cc = (props.major, props.minor)
        ok = (npp.core.nppGetStreamContext(ctypes.byref(ctx)) == 0 and ctx.nCudaDeviceId == dev
              and (ctx.nCudaDevAttrComputeCapabilityMajor, ctx.nCudaDevAttrComputeCapabilityMinor) == cc
              and ctx.nMultiProcessorCount == props.multi_processor_count and ctx.nMaxThreadsPerBlock > 0)
    if not ok:
        ctx = NppStreamContext()
        ctx.nCudaDeviceId = dev
        ctx.nMultiProcessorCount = props.multi_processor_count
        ctx.nMaxThreadsPerMultiProcessor = int(getattr(props, "max_threads_per_multi_processor", 2048))
        ctx.nMaxThreadsPerBlock = int(getattr(props, "max_threads_per_block", 1024))
        ctx.nSharedMemPerBlock = int(getattr(props, "shared_memory_per_block", 48 << 10))
        ctx.nCudaDevAttrComputeCapabilityMajor, ctx.nCudaDevAttrComputeCapabilityMinor = props.major, props.minor
    ctx.hStream = stream.cuda_stream or None
    # PyTorch's default stream is the legacy stream 0 (flags 0); its other streams are created
    # cudaStreamNonBlocking (c10's CUDAStream.cpp)
    ctx.nStreamFlags = 0 if not stream.cuda_stream else 1
    ctx.nReserved0 = 0  # hWorkspace: none
    return ctx


def npp_valid_refusal(w, hL, wL, hR, wR) -> str:
    """"" if npp-normlevel computes window w (the valid window with the right inside the left),
    else why not."""
    if w[0] == 0 and w[2] == 0 and (w[1], w[3]) == (hL - hR, wL - wR) and hR <= hL and wR <= wL:
        return ""
    if hR > hL or wR > wL:
        vs = valid_shifts(hL, wL, hR, wR)
        if vs is not None and tuple(w) == vs:
            return (f"NPP's template (the right, {hR}x{wR}) must fit inside its image (the left, {hL}x{wL}): "
                    f"the valid window with a larger right is not computed")
    return (f"only the valid window is computed (window=valid, the right wholly inside the left: NPP's "
            f"nppiCrossCorrValid_NormLevel; NPP's Full and Same modes anchor and pad otherwise than "
            f"CONVENTIONS.md's windows), got shifts {window_text(w)}")


class NppNormLevel:
    """ZNCC of the valid window by NPP, one nppiCrossCorrValid_NormLevel_32f_C1R_Ctx call per pair
    on PyTorch's device pointers (steps in bytes: width·4; rows contiguous), on the stream the
    benchmark times; every matrix minus its mean first (torch, in the timed call), as the torch
    peers do: the coefficient does not change and NPP's sums do not cancel on 1000 + noise. The
    scratch buffer is allocated once per case (like a plan)."""

    def __init__(self, c: Case, torch):
        try:
            self.npp = load_npp()
        except NppUnavailable as e:
            raise CaseError(f"npp-normlevel unavailable: {e}") from None
        why = npp_valid_refusal(c.window, c.hL, c.wL, c.hR, c.wR)
        if why:
            raise CaseError(f"npp-normlevel: {why}")
        self.c, self.torch = c, torch
        self.fn = self.npp.ist.nppiCrossCorrValid_NormLevel_32f_C1R_Ctx
        self.src, self.tpl = NppiSize(c.wL, c.hL), NppiSize(c.wR, c.hR)
        self.oh, self.ow = c.hL - c.hR + 1, c.wL - c.wR + 1
        assert (self.oh, self.ow) == tuple(c.out_shape[1:])
        self.stream = torch.cuda.current_stream()
        self.ctx = npp_stream_context(self.npp, torch, self.stream)
        self.warnings: set = set()
        # The header names the size "oSizeROI" without saying whose: the larger of the source's and
        # the destination's answers (the source's, as NPP's samples pass it, where it is monotone)
        nbytes = 0
        for roi in (self.src, NppiSize(self.ow, self.oh)):
            size = ctypes.c_size_t(0)
            npp_status("nppiValidNormLevelGetBufferHostSize_32f_C1R_Ctx",
                       self.npp.ist.nppiValidNormLevelGetBufferHostSize_32f_C1R_Ctx(roi, ctypes.byref(size), self.ctx))
            nbytes = max(nbytes, size.value)
        self.buffer = torch.empty(max(1, nbytes), dtype=torch.uint8,
                                  device=torch.device("cuda", torch.cuda.current_device()))

    def __call__(self, L, R):
        torch, c = self.torch, self.c
        Ls = (L - L.mean(dim=(1, 2), keepdim=True)).contiguous()
        Rs = (R - R.mean(dim=(1, 2), keepdim=True)).contiguous()
        out = torch.empty(c.out_shape, dtype=torch.float32, device=L.device)
        buf, fn, ctx = self.buffer.data_ptr(), self.fn, self.ctx
        for sp, ss, tp, ts, dp, ds in npp_pair_calls(c, Ls.data_ptr(), Rs.data_ptr(), out.data_ptr()):
            st = fn(sp, ss, self.src, tp, ts, self.tpl, dp, ds, buf, ctx)
            if st:
                npp_status("nppiCrossCorrValid_NormLevel_32f_C1R_Ctx", st, self.warnings)
        return out


def npp_pair_calls(c: Case, lp: int, rp: int, op: int) -> list[tuple]:
    """Per output pair in output order: (pSrc, nSrcStep, pTpl, nTplStep, pDst, nDstStep) of its NPP
    call, pointers into contiguous float32 stacks (nL, hL, wL), (nR, hR, wR) and the output
    (pairs, hL - hR + 1, wL - wR + 1) at addresses lp, rp, op; steps in bytes. Pure: the CPU tests
    emulate NPP on a flat buffer with it."""
    oh, ow = c.hL - c.hR + 1, c.wL - c.wR + 1
    ls, rs, os_ = 4 * c.hL * c.wL, 4 * c.hR * c.wR, 4 * oh * ow
    return [(lp + i * ls, 4 * c.wL, rp + j * rs, 4 * c.wR, op + k * os_, 4 * ow)
            for k, (i, j) in enumerate(pairs(c.form, c.nL, c.nR))]


PEER_CLASSES = {"torch-conv2d": TorchConv2d, "torch-conv2d-tf32": TorchConv2dTf32, "torch-fft": TorchFft,
                "cupy-correlate2d": CupyCorrelate2d, "npp-normlevel": NppNormLevel}


class TorchZeroLag:
    """zero-lag: the raw peer's output times 1 / C(0, 0) of its pair, C(0, 0) accumulated in
    float64 (a matrix product of the overlapping corners), all in the one timed call."""

    def __init__(self, c: Case, torch):
        self.c, self.torch = c, torch
        self.raw = PEER_CLASSES[c.variant](c, torch)

    def __call__(self, L, R):
        torch = self.torch
        A, B = c00_parts(L, R)
        scale = zero_lag_scale(torch, pair_dots(self.c.form, A.double(), B.double()))
        return self.raw(L, R) * scale.float()[:, None, None]


class TorchZncc:
    """zncc by the peer's route (the comment above overlap_spans): torch-fft with float64
    summed-area tables, torch-conv2d with avg_pool2d and conv2d box sums in float32."""

    def __init__(self, c: Case, torch):
        self.c, self.torch, self.F = c, torch, torch.nn.functional
        self.raw = PEER_CLASSES[c.variant](c, torch)
        w = c.window
        self.spans = overlap_spans(w[0], w[1], c.hL, c.hR) + overlap_spans(w[2], w[3], c.wL, c.wR)
        self.idx = None

    def __call__(self, L, R):
        torch, F, c = self.torch, self.F, self.c
        if self.idx is None:  # index tensors on the inputs' device, made once (the warm-up)
            self.idx = [torch.as_tensor(a, device=L.device) for a in self.spans]
        rb, re, lrb, lre, cb, ce, lcb, lce = self.idx
        n = ((re - rb)[:, None] * (ce - cb)[None, :]).double()  # the overlap's element count
        if c.variant == "torch-fft":
            L64, R64 = L.double(), R.double()
            ml, mr = L64.mean(dim=(1, 2), keepdim=True), R64.mean(dim=(1, 2), keepdim=True)
            Ls, Rs = L64 - ml, R64 - mr

            def sat(x):
                return F.pad(x.cumsum(1).cumsum(2), (1, 0, 1, 0))
            vl, vr = (Ls * Ls).mean(dim=(1, 2), keepdim=True), (Rs * Rs).mean(dim=(1, 2), keepdim=True)
            left = (box_sums(sat(Ls), lrb, lre, lcb, lce), box_sums(sat(Ls * Ls), lrb, lre, lcb, lce), vl)
            right = (box_sums(sat(Rs), rb, re, cb, ce), box_sums(sat(Rs * Rs), rb, re, cb, ce), vr)
            raw = self.raw(Ls.float(), Rs.float())
        else:
            r = self.raw
            if r.ay.empty or r.ax.empty:
                return L.new_zeros(c.out_shape)
            ml, mr = L.mean(dim=(1, 2), keepdim=True), R.mean(dim=(1, 2), keepdim=True)
            Ls, Rs = L - ml, R - mr
            n = n.float()
            full = (r.ax.conv_pad, r.ax.conv_pad, r.ay.conv_pad, r.ay.conv_pad)
            x = F.pad(r.padded(Ls), full)  # (nL, H, W), every zero explicit
            s = F.avg_pool2d(torch.stack([x, x * x], 1), (c.hR, c.wR), stride=1, divisor_override=1)
            mask = F.pad(r.padded(torch.ones_like(L[:1])), full)  # (1, H, W): 1 where the left exists
            t = F.conv2d(mask[None], torch.cat([Rs, Rs * Rs])[:, None])[0]  # (2 nR, oh, ow)
            vl, vr = (Ls * Ls).mean(dim=(1, 2), keepdim=True), (Rs * Rs).mean(dim=(1, 2), keepdim=True)
            left, right = (s[:, 0], s[:, 1], vl), (t[:c.nR], t[c.nR:], vr)
            raw = r(Ls, Rs)
        raw4, (sl, sll, vl), (sr, srr, vr) = by_pairs(c.form, c.nL, c.nR, raw, left, right)
        return zncc_coefficient(torch, n, raw4, sl, sll, vl, sr, srr, vr).reshape(c.out_shape).float()


def make_peer(c: Case, torch):
    """The timed callable of a case: the raw peer, or its normalization around it."""
    if c.variant == "npp-normlevel":  # NPP normalizes itself (zncc only; parse_case refuses the rest)
        return NppNormLevel(c, torch)
    if c.normalize == "zncc":
        return TorchZncc(c, torch)
    if c.normalize == "zero-lag":
        return TorchZeroLag(c, torch)
    return PEER_CLASSES[c.variant](c, torch)


# --- the check ---------------------------------------------------------------------------------

def sample_positions(shape, n, rng) -> np.ndarray:
    """Flat output positions: the 4 corners of the first and the last matrix, then random ones."""
    K, oh, ow = shape
    total = K * oh * ow
    if total <= n:
        return np.arange(total, dtype=np.int64)
    fixed = [k * oh * ow + y * ow + x for k in {0, K - 1} for y in {0, oh - 1} for x in {0, ow - 1}]
    rand = rng.integers(0, total, size=n - len(fixed), dtype=np.int64)
    return np.unique(np.concatenate([np.array(fixed, dtype=np.int64), rand]))


def sampled_reference(torch, c: Case, L, R, positions: np.ndarray) -> np.ndarray:
    """The definition in float64 on the GPU at the given flat output positions: for each, the
    right's window of the zero-padded left, dotted with the right."""
    K, oh, ow = c.out_shape
    pl = pairs(c.form, c.nL, c.nR)
    k = positions // (oh * ow)
    y = positions // ow % oh
    x = positions % ow
    li = torch.as_tensor(np.array([pl[i][0] for i in k]), device=L.device)
    ri = torch.as_tensor(np.array([pl[i][1] for i in k]), device=L.device)
    dy = torch.as_tensor(c.window[0] + y, device=L.device)
    dx = torch.as_tensor(c.window[2] + x, device=L.device)
    # pad the left by a right's size on every side; shifts beyond reach read only zeros
    Lp = torch.nn.functional.pad(L.double(), (c.wR, c.wR, c.hR, c.hR))
    R64 = R.double()
    rr = torch.arange(c.hR, device=L.device)
    cc = torch.arange(c.wR, device=L.device)
    out = []
    step = max(1, int(2**27 // (c.hR * c.wR)))
    for a in range(0, len(positions), step):
        b = slice(a, a + step)
        rows = (dy[b, None] + rr[None, :] + c.hR).clamp(0, c.hL + 2 * c.hR - 1)
        cols = (dx[b, None] + cc[None, :] + c.wR).clamp(0, c.wL + 2 * c.wR - 1)
        # shifts wholly beyond the padding are clamped onto its zeros
        far = ((dy[b] <= -c.hR) | (dy[b] >= c.hL) | (dx[b] <= -c.wR) | (dx[b] >= c.wL))
        patch = Lp[li[b][:, None, None], rows[:, :, None], cols[:, None, :]]
        v = (patch * R64[ri[b]]).sum(dim=(1, 2))
        out.append(torch.where(far, torch.zeros_like(v), v))
    return torch.cat(out).cpu().numpy()


def compare(out: np.ndarray, ref: np.ndarray, normalize: str = "none", border=None) -> tuple[float, int]:
    """(the error over the finite outputs, number of non-finite outputs): relative
    ||out - ref|| / ||ref||, for zncc the largest absolute difference (reference.hpp's error_of)
    outside `border` (zncc_border: the outputs the contract lets be 0 or the coefficient)."""
    out = np.asarray(out, dtype=np.float64)
    bad = int(np.count_nonzero(~np.isfinite(out)))
    ok = np.isfinite(out)
    if border is not None:
        ok &= ~np.asarray(border, bool).reshape(ok.shape)
    if normalize == "zncc":
        return (float(np.abs(out[ok] - ref[ok]).max()) if ok.any() else 0.0), bad
    num = np.linalg.norm((out[ok] - ref[ok]).ravel())
    den = np.linalg.norm(ref.ravel())
    return (float(num / den) if den > 0 else float(num)), bad


def check_range(normalize: str) -> tuple[float, float]:
    """The check's input range (check.hpp's, as bench_main.cpp picks it): signed [-1, 1) for the
    raw sums, 1000 + [-8, 8) for zncc (the cancellation case), 4 + [-1, 1) for zero-lag (C(0, 0)
    away from 0)."""
    return {"none": (-1.0, 1.0), "zncc": (992.0, 1008.0), "zero-lag": (3.0, 5.0)}[normalize]


def tolerance_for(normalize: str, variant: str = "") -> float:
    """reference.hpp's bound_for(tolerance, mode): absolute 1e-4 for zncc, otherwise the peer's
    relative tolerance (1e-5; a TF32 peer's 2e-3)."""
    if normalize == "zncc":
        return ZNCC_TOLERANCE
    return PEER_BY_NAME[variant]["tolerance"] if variant in PEER_BY_NAME else TOLERANCE


def sampled_normalized_reference(torch, c: Case, L, R, positions: np.ndarray) -> np.ndarray:
    """The normalized definition in float64 on the GPU at the given flat output positions.
    zero-lag: sampled_reference over C(0, 0) of the pair (float64 dot products). zncc: per
    position the overlap's n, ΣL', ΣL'², ΣR', ΣR'², ΣL'R' as direct float64 sums over the right's
    window of the zero-padded left (and of a padded ones mask), the data minus its float64 mean;
    returned with the positions near the constant rule's border (_reference.zncc_border's test)."""
    K, oh, ow = c.out_shape
    pl = pairs(c.form, c.nL, c.nR)
    k = positions // (oh * ow)
    if c.normalize == "zero-lag":
        A, B = c00_parts(L.double(), R.double())
        c00 = pair_dots(c.form, A, B).cpu().numpy()
        scale = zero_lag_scale(np, c00)
        return sampled_reference(torch, c, L, R, positions) * scale[k]
    y, x = positions // ow % oh, positions % ow
    dev = L.device
    li = torch.as_tensor(np.array([pl[i][0] for i in k]), device=dev)
    ri = torch.as_tensor(np.array([pl[i][1] for i in k]), device=dev)
    dy, dx = torch.as_tensor(c.window[0] + y, device=dev), torch.as_tensor(c.window[2] + x, device=dev)
    L64, R64 = L.double(), R.double()
    ml, mr = L64.mean(dim=(1, 2)), R64.mean(dim=(1, 2))
    vl, vr = L64.var(dim=(1, 2), unbiased=False), R64.var(dim=(1, 2), unbiased=False)
    Lp = torch.nn.functional.pad(L64 - ml[:, None, None], (c.wR, c.wR, c.hR, c.hR))
    Mp = torch.nn.functional.pad(torch.ones((c.hL, c.wL), dtype=torch.float64, device=dev), (c.wR, c.wR, c.hR, c.hR))
    Rs = R64 - mr[:, None, None]
    rr, cc = torch.arange(c.hR, device=dev), torch.arange(c.wR, device=dev)
    out, near = [], []
    border = reference_module().BORDER
    step = max(1, int(2**25 // (c.hR * c.wR)))
    for a in range(0, len(positions), step):
        b = slice(a, a + step)
        # shifts beyond the padding clamp onto its zeros (mask 0: n = 0, coefficient 0)
        rows = (dy[b, None] + rr[None, :] + c.hR).clamp(0, c.hL + 2 * c.hR - 1)
        cols = (dx[b, None] + cc[None, :] + c.wR).clamp(0, c.wL + 2 * c.wR - 1)
        far = ((dy[b] <= -c.hR) | (dy[b] >= c.hL) | (dx[b] <= -c.wR) | (dx[b] >= c.wL))
        m = Mp[rows[:, :, None], cols[:, None, :]] * (~far).double()[:, None, None]
        p = Lp[li[b][:, None, None], rows[:, :, None], cols[:, None, :]] * m
        r = Rs[ri[b]] * m
        sums = [t.sum(dim=(1, 2)) for t in (m, p, p * p, r, r * r, p * r)]
        out.append(zncc_coefficient(torch, sums[0], sums[5], sums[1], sums[2], vl[li[b]], sums[3], sums[4], vr[ri[b]]))
        n = sums[0]
        near.append((n > 0) & ((n * sums[2] - sums[1] ** 2 < border * n * n * vl[li[b]]) |
                               (n * sums[4] - sums[3] ** 2 < border * n * n * vr[ri[b]])))
    return torch.cat(out).cpu().numpy(), torch.cat(near).cpu().numpy()
