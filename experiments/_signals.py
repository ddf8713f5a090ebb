"""What the one-dimensional signal experiments (signals_seed004.py, signals_matched.py,
signals_ambient.py) share: signals as 1 x n matrices, their series and caps, and the device-time
budget they are sized to.

A signal of length n is a 1 x n matrix (docs/CONVENTIONS.md, "One-dimensional signals"): every
variant runs it as it is, and xcorr_bench takes it as hL=1 wL=n hR=1 wR=m; `xcorr run --dims 1`
and `xcorr.correlate1d` compute the same. 'valid' and a lag window (shifts=0:0,D0:D1) are the
same rectangles for 1-D signals and for 1 x n matrices, so the case lines need no 1-D key.

Caps (the window experiments', experiments/_windows.py): this project's direct kernels and
torch-conv2d at most 3e11 multiply-adds per call, the baseline and CuPy 2e10. They matter more
here than for squares: a 1 x n problem has one shift row, and the 2-D kernels tile shift rows
(register-tiled 64, tensor-wgmma 16, tensor-tiled 8 per block), so the idle rows may make a direct
kernel up to that many times slower than xcsuite/cost.py's rates, which were measured on squares.
Within the caps even 64x slower is under 2 s per call.

Not in any signal experiment (their docstrings repeat it where it applies):
- fft-fused: transforms up to 1024 points per dimension (outputs up to 1023 x 1023); a signal's
  output row has 4801 to 8.6e6 lags: the variant refuses them (its window series' max_size, 512,
  now compares a signal's length and would leave it out too).
- small-direct: one block per output row with the row's inputs staged in shared memory (at most
  200 KB, ~100 x 100): a row of 1e5-1e7 samples does not fit.
- the paper's kernels (warp-shuffle ... multi-matrix) and multi-matrix-tiled, tensor-presplit,
  tensor-rowpair: full output only and 2-D paper reproductions; seed 004's case has the full-output
  companion for the tensor-core variants that the issue names (tensor-tiled-tf32 and tensor-tiled).
"""
from dataclasses import replace

from xcsuite.spec import Series, Shape
from experiments._windows import DIRECT_MAX_FMAS, LABELS as WINDOW_LABELS, SLOW_MAX_FMAS, series as window_series

# The three experiments together are sized to at most 6 minutes of device time on an H200, about
# 4.0 now (xcsuite/cost.py's model with the full protocol, 10 repetitions of >= 0.1 s; each
# experiment's docstring gives its own estimate; tests/test_signal_suite.py checks the sum).
DEVICE_BUDGET_S = 360.0
# Seed 004 (Kikuchi et al.): 16 templates x 256 samples against one channel, 4.32e6 shifts, TF32
# tensor cores on an A100: 53.56 TFLOP/s (34% of the A100's TF32 peak, 6x cuBLAS).
SEED004_TFLOPS = 53.56
SEED004_LABEL = "seed 004: 53.56 TFLOP/s (A100, TF32)"

LABELS = {**WINDOW_LABELS,
          "tensor-tiled": "tensor-tiled (new, 3xTF32 mma.sync; full output)",
          "tensor-tiled-tf32": "tensor-tiled-tf32 (new, TF32 mma.sync as seed 004; full output)",
          "tensor-hankel": "tensor-hankel (new, signals: seed 004's Hankel GEMM, 3xTF32)",
          "tensor-hankel-tf32": "tensor-hankel-tf32 (new, signals: seed 004's Hankel GEMM, TF32)",
          "signal-tiled": "signal-tiled (new, FP32 register tiles of lags x templates, 1-D only)",
          "fft-segmented": "fft-segmented (new, signals: cuFFT in segments, lag window cropped per segment)"}


def signal(form: str, left: int, right: int, nL: int = 1, nR: int = 1, group: str = "", window: str = "valid",
           normalize: str = "none") -> Shape:
    """A stack of nL signals of `left` samples against nR of `right` samples: 1 x n matrices."""
    return Shape(form, 1, left, 1, right, nL, nR, group=group, window=window, normalize=normalize)


def series(variant: str, **kw) -> Series:
    """The series of `variant` with the window experiments' caps (see _windows.series) and this
    suite's label; keyword arguments override them."""
    base = window_series(variant) if variant in WINDOW_LABELS else Series(LABELS[variant], variant,
                                                                            max_fmas=CAPS.get(variant))
    return replace(base, label=LABELS[variant], **kw)


def long_signal_series() -> list[Series]:
    """The series of the long-signal experiments (matched filtering, ambient noise), where every
    2-D direct kernel is over its cap: the FFTs, PyTorch's FFT and the kernels built for signals."""
    return [series(v) for v in ("fft", "fft-segmented", "fft+plan", "torch-fft", "tensor-hankel", "tensor-hankel-tf32",
                                "signal-tiled")]


# tensor-hankel and tensor-hankel-tf32 (algorithms/28_tensor_hankel.cu) are built for signals (a
# left window per block of 256/512 lags x 16 templates, no idle shift rows): expected 70-250
# TFLOP/s, so matched filtering (1.56e12 multiply-adds) and ambient noise (2.8e12) take 20-80 ms per
# call; xcsuite/cost.py's hopper rate (12e12 FMA/s) models them at 130-235 ms.
HANKEL_MAX_FMAS = 3e12
# The caps of the signal experiments' direct series (multiply-adds per call; the FFTs have none).
# tests/test_signal_suite.py checks every case against them.
# signal-tiled is built for signals (tiles of lags x templates, no idle shift rows: ~2e13 FMA/s
# by design): 3e12, so that matched filtering (1.56e12) and ambient noise (2.8e12) run it, ~0.15 s
# per call at most.
SIGNAL_TILED_MAX_FMAS = 3e12
CAPS = {"signal-tiled": SIGNAL_TILED_MAX_FMAS, "register-tiled": DIRECT_MAX_FMAS, "tensor-wgmma": DIRECT_MAX_FMAS, "tensor-tiled": DIRECT_MAX_FMAS,
        "tensor-tiled-tf32": DIRECT_MAX_FMAS, "torch-conv2d": DIRECT_MAX_FMAS,
        "torch-conv2d-tf32": DIRECT_MAX_FMAS, "overlap-wise": SLOW_MAX_FMAS,
        "cupy-correlate2d": SLOW_MAX_FMAS, "tensor-hankel": HANKEL_MAX_FMAS, "tensor-hankel-tf32": HANKEL_MAX_FMAS}
NEVER = ("fft-fused", "small-direct")  # see the module's docstring
