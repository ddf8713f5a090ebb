"""Output windows: time per call against the window's half-width S, direct against FFT.

A direct kernel's work shrinks with the window ((2S+1)^2 shifts, each an overlap of up to N x N
multiply-adds), an FFT's does not (it transforms the padded pair whatever the window, then crops):
below some S direct wins. Windows max_shift=S,S with S = 1, 2, 4, ... and the full output
(S = N - 1), for one-to-one 256, 1024 and 2048 and for a batch of small pairs: n-to-mn, 4096
lefts each with its own right, 64 x 64 (a PIV-like stack of independent pairs).
Series: this project's direct kernels (register-tiled; small-direct, block-per-pair and tensor-wgmma
where they apply: the batch of small pairs), the baseline, fft, fft-fused and the peers (PyTorch, CuPy), each
at its default parameters; torch-conv2d on the 256 panel only (see the series). The metric is time per call + finish_time (fft's untimed crop to the
window). The figure marks, per panel, the S where the best direct series of this project becomes
slower than its best FFT series (the peers are drawn, not counted).
Caps: direct kernels at most 3e11 FMAs per call (~30 ms, one to two orders of magnitude past the
crossover), the baseline and CuPy 2e10, CuPy also 1e11 counted as the full output it computes and
crops (the 256 panel and the batch, not 1024 and 2048); fft-fused up to N = 512, small-direct up to 96.
"""
from xcsuite.spec import Experiment, Shape
from experiments._windows import series

ONE_TO_ONE_SIZES = (256, 1024, 2048)
BATCH = (64, 4096)  # (size, pairs)


def half_widths(n: int) -> list:
    """1, 2, 4, ... below the full half-width n - 1, then n - 1 itself (the full output)."""
    out, s = [], 1
    while s < n - 1:
        out.append(s)
        s *= 2
    return out + [n - 1]


shapes = [Shape.one_to_one(n, group=f"one-to-one, {n} x {n}", window=f"max_shift={s}")
          for n in ONE_TO_ONE_SIZES for s in half_widths(n)]
n, pairs = BATCH
shapes += [Shape("n-to-mn", n, n, n, n, pairs, pairs, group=f"n-to-mn: {pairs} pairs of {n} x {n}",
                 window=f"max_shift={s}") for s in half_widths(n)]

EXPERIMENT = Experiment(
    name="windows",
    title="Output windows: time against the half-width S of a max-shift window, direct vs FFT",
    paper="Issue #20 (not in the paper)",
    metric="time_with_finish",
    plot="windows",
    xlabel="window half-width S (max_shift=S: (2S+1)^2 shifts; the last point is the full output)",
    shapes=shapes,
    series=[
        series("register-tiled"),
        series("small-window"),
        series("block-per-pair"),
        series("small-direct"),
        series("tensor-wgmma"),
        series("overlap-wise"),
        series("fft"),
        series("fft-fused"),
        # torch-conv2d autotunes every new shape (cudnn.benchmark, ~20 s a case with a large
        # kernel) and fails the 1e-5 check beyond 512 (one FP32 sum over the whole overlap, as the
        # baseline): measured on the 256 panel only (the piv experiment has it on a batch).
        series("torch-conv2d", max_size=256, forms=("one-to-one",)),
        series("torch-fft"),
        series("cupy-correlate2d"),
    ],
)
