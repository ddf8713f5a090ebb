"""Matched filtering: 300 templates of 600 samples (6 s at 100 Hz) against one day of a
100 Hz trace (8.64e6 samples), the valid window (8639401 lags): one-to-many, signals as 1 x n
matrices. Raw correlation, and as a second group ZNCC (normalize=zncc: what matched-filter
detectors threshold), the same variants.

1.56e12 multiply-adds per call: 46 ms at the H200's FP32 peak, so every direct series is over its
cap and left out, but for signal-tiled (FP32 register tiles for 1-D signals, capped at 3e12), tensor-hankel and tensor-hankel-tf32 (seed 004's method built for signals,
capped at 3e12: 20-80 ms per call expected, experiments/_signals.py): this project's direct kernels
(register-tiled, tensor-wgmma) and torch-conv2d stop at 3e11 per call, overlap-wise and CuPy at 2e10
(experiments/_windows.py); on a 1 x n problem the 2-D kernels also leave most rows of their shift
tiles idle (experiments/_signals.py), so a direct call could take seconds. The tensor-tiled variants
compute the full output only. Beside the two tensor-hankel series, FFT: fft and fft+plan (cuFFT, the
transform sized to the window), fft-segmented (overlap-save for signals: the day in 548 lag pieces of
15785 lags, transforms of 16384 points, one inverse per template and piece), and the peer torch-fft
in both groups (its ZNCC: float64 means, summed-area tables and coefficient around the raw
torch-fft correlation, xcsuite.peerbench; cupy-correlate2d computes no ZNCC and is capped anyway).
Not here either: fft-fused (transforms up to 1024 points) and small-direct (a row in shared
memory). Seed 004's case (signals_seed004) measures the direct kernels on signals: its rate says
what a direct series would cost here (at 20 TFLOP/s, 160 ms per call) before a later session
raises a cap for one.
Memory: the output stack alone is 300 x 8639401 floats, 10.4 GB (fft chunks its spectra to fit;
fft-segmented's workspace is 10.8 GB, in chunks of lag pieces where it does not fit);
torch-fft's ZNCC holds the coefficient in float64 (another 20.7 GB) beside its spectra: an H200's
141 GB hold it, a smaller GPU may record it as failed for memory.
Metric: time per call + finish_time (fft's untimed crop of 10 GB), and the TFLOP/s beside each bar
(2 x the window's multiply-adds per second: a direct-equivalent rate for the FFTs).
Device time (xcsuite/cost.py's model, full protocol, H200): about 166 s for 14 cases (31-130 ms per
call, the tensor-hankel series at the model's hopper rate; most of it the model's setup of the
inputs and the 10 GB output, ~10 s a case).
"""
from experiments._signals import long_signal_series, signal
from xcsuite.spec import Experiment

TEMPLATES, TEMPLATE = 300, 600  # 6 s at 100 Hz
TRACE = 8_640_000  # one day at 100 Hz
LAGS = TRACE - TEMPLATE + 1
GROUPS = (("none", "raw correlation"), ("zncc", "ZNCC"))

EXPERIMENT = Experiment(
    name="signals_matched",
    title=(f"Matched filtering: {TEMPLATES} templates of {TEMPLATE} samples against a 8.64e6-sample day "
           f"(100 Hz), valid window ({LAGS} lags)"),
    paper="Issue #22 (not in the paper)",
    metric="time_with_finish",
    plot="signal_bars",
    xlabel="signals as 1 x n matrices",
    shapes=[signal("one-to-many", TRACE, TEMPLATE, 1, TEMPLATES, window="valid", normalize=mode,
                   group=f"{what}: {TEMPLATES} templates x {TEMPLATE} samples, 1 trace of 8.64e6, valid")
            for mode, what in GROUPS],
    series=long_signal_series(),
)
