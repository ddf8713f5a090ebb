"""Seed 002's normalized autocorrelation: a 2048 x 2048 image within ±64 shifts,
normalize=zero-lag (C(dy, dx) / C(0, 0)), beside the raw correlation of the same case.

One-to-one; the benchmark's left and right are two different random images (the cost of an
autocorrelation, as in experiments/autocorr.py). Series: this project's variants that declare the
max-shift window and run one-to-one 2048 x 2048, at their defaults: register-tiled, fft, fft+plan
(small-direct and fft-fused stop below 2048, tensor-wgmma has no one-to-one, the baseline's
6.8e10 multiply-adds are over its 2e10 cap). Peers
(xcsuite.peerbench normalize=zero-lag, and raw): torch-fft and torch-conv2d, their raw output times
1 / C(0, 0) (a float64 dot product of the two images); cupy-correlate2d is capped (CuPy's direct
kernel) and computes no normalization. Metric: time per call + finish_time; per series its raw and
zero-lag bars and their ratio.
"""
from xcsuite.spec import Experiment, Shape
from experiments._windows import normalized_series

SIZE, MAX_SHIFT = 2048, 64

EXPERIMENT = Experiment(
    name="zncc_autocorr",
    title=(f"Seed 002: normalized autocorrelation (zero-lag) of a {SIZE} x {SIZE} image, max_shift={MAX_SHIFT}, "
           "beside the raw correlation"),
    paper="Issue #21, seed 002 (not in the paper)",
    metric="time_with_finish",
    plot="paired_bars",
    shapes=[Shape.one_to_one(SIZE, group=f"{SIZE} x {SIZE}, {label}", window=f"max_shift={MAX_SHIFT}", normalize=n)
            for n, label in (("zero-lag", "zero-lag normalized"), ("none", "raw correlation"))],
    series=normalized_series("register-tiled", "fft", "fft+plan", "torch-fft", "torch-conv2d"),
)
