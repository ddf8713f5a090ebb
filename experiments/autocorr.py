"""Seed 002's case: a 2048 x 2048 image correlated over a small range of shifts (max_shift 16, 64
and 128), as the normalized autocorrelation of a texture is computed.

The benchmark correlates two different random images of the same size (the left and the right of
xcorr_bench's inputs): the same cost as an autocorrelation, which only reuses one operand.
Series: this project's direct kernel (register-tiled), the baseline (capped at 2e10 FMAs per call:
S = 128 is left out), fft, fft+plan and PyTorch's peers, at their default parameters. CuPy's
correlate2d is not among them: it computes the full 4095 x 4095 output whatever the window (1.8e13
multiply-adds, ~38 s a call on an H100), far beyond its cap.
fft-fused stops at 512 x 512 and small-direct at ~100: not here. Metric: time per call +
finish_time (fft's untimed crop). A grouped bar chart: one group per S.
"""
from xcsuite.spec import Experiment, Shape
from experiments._windows import series

SIZE = 2048
HALF_WIDTHS = (16, 64, 128)

EXPERIMENT = Experiment(
    name="autocorr",
    title=(f"Seed 002: one-to-one {SIZE} x {SIZE}, max-shift windows (left and right two different random "
           "images: the cost of an autocorrelation)"),
    paper="Issue #20, seed 002 (not in the paper)",
    metric="time_with_finish",
    plot="grouped_bars",
    xlabel="window half-width S (max_shift=S)",
    shapes=[Shape.one_to_one(SIZE, group=f"one-to-one, {SIZE} x {SIZE}", window=f"max_shift={s}")
            for s in HALF_WIDTHS],
    series=[
        series("register-tiled"),
        series("small-window"),
        series("overlap-wise"),
        series("fft"),
        series("fft+plan"),
        series("torch-conv2d"),
        series("torch-fft"),
    ],
)
