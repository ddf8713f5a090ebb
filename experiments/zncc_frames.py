"""Seed 003's case: ZNCC of 1000 frames against a template, within ±16 shifts, set
beside the raw correlation of the same case (the cost of the normalization).

n-to-m, 1000 lefts (the frames, 256 x 256: seed 003 does not fix the frame size, this experiment
chooses 256 x 256) against one right (a template: 23 x 21, 53 x 54 or 156 x 116; three shapes, as
a stack holds one size), window max_shift=16 (33 x 33 shifts per pair), normalize=zncc and the raw
correlation (none). Series: every variant of this project that declares the max-shift window
(register-tiled, tensor-wgmma, overlap-wise, fft, fft+plan, fft-fused) at its default parameters,
the same in both halves; small-direct stops at ~100 x 100 lefts (not 256 x 256 frames). Peers
(xcsuite.peerbench normalize=zncc, as a PyTorch user writes it): torch-fft (FFT of the
mean-subtracted frames, float64 summed-area tables for the overlap sums) and torch-conv2d (conv2d,
avg_pool2d / conv2d box sums), in both halves too; cupy-correlate2d computes no ZNCC.
Metric: time per call + finish_time; a panel per template, per series its raw and ZNCC bars and
their ratio.
"""
from xcsuite.spec import Experiment, Shape
from experiments._windows import normalized_series

FRAMES, FRAME = 1000, 256  # FRAME: this experiment's choice (seed 003 gives none)
TEMPLATES = ((23, 21), (53, 54), (156, 116))
MAX_SHIFT = 16


def shape(h: int, w: int, normalize: str) -> Shape:
    label = "ZNCC" if normalize == "zncc" else "raw correlation"
    return Shape("n-to-m", FRAME, FRAME, h, w, FRAMES, 1, group=f"template {h} x {w}, {label}",
                 window=f"max_shift={MAX_SHIFT}", normalize=normalize)


EXPERIMENT = Experiment(
    name="zncc_frames",
    title=(f"Seed 003: ZNCC of {FRAMES} frames ({FRAME} x {FRAME}) against a template, max_shift={MAX_SHIFT} "
           f"({2 * MAX_SHIFT + 1} x {2 * MAX_SHIFT + 1} shifts), beside the raw correlation"),
    paper="Issue #21, seed 003 (not in the paper)",
    metric="time_with_finish",
    plot="paired_bars",
    shapes=[shape(h, w, n) for h, w in TEMPLATES for n in ("zncc", "none")],
    series=normalized_series("register-tiled", "tensor-wgmma", "overlap-wise", "fft", "fft+plan", "fft-fused",
                             "torch-fft", "torch-conv2d"),
)
