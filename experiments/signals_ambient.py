"""Ambient-noise interferometry: 64 stations, one-hour windows at 40 Hz (144000
samples), every pair n-to-m 64 x 64 (the 2016 distinct pairs, their mirror images and the 64
autocorrelations), lags within ±60 s (±2400 samples: window shifts=0:0,-2400:2400, 4801 lags).

2.8e12 multiply-adds per call (4096 pairs x ~6.9e8): 84 ms at the H200's FP32 peak (the issue's
target for the 2016 pairs: 5 ms), so every direct series is over its cap and left out but for
signal-tiled (FP32 register tiles, built for 1-D signals, capped at 3e12), tensor-hankel and tensor-hankel-tf32 (seed 004's method built for signals, capped at 3e12: K = 144000
in chunks of 256 against 16 rights per block; 40-80 ms per call expected): this
project's direct kernels (register-tiled, tensor-wgmma) and torch-conv2d stop at 3e11 per call,
overlap-wise and CuPy at 2e10 (experiments/_windows.py), and a 1 x n problem leaves most rows of
the 2-D kernels' shift tiles idle (experiments/_signals.py). The tensor-tiled variants compute
the full output only. Beside tensor-hankel, the FFT route the issue expects to win: fft and fft+plan
(cuFFT, the transform sized to the lag window: ~146400 points per pair, not 287999), fft-segmented
(1-D signals: transforms of N = 16384 points, the rights in 13 blocks, one left segment per block,
the 13 block spectra of a pair summed before one inverse per pair; ~1.3 GB of memory traffic,
0.4-0.6 ms expected) and the peer torch-fft, at their default parameters. Not here: fft-fused
(transforms up to 1024 points) and small-direct (a row in shared memory).
Metric: time per call + finish_time (fft's untimed crop), and the TFLOP/s beside each bar
(2 x the window's multiply-adds per second: a direct-equivalent rate for the FFTs).
Device time (xcsuite/cost.py's model, full protocol, H200): about 47 s for 7 cases (7-234 ms per
call, the tensor-hankel series at the model's hopper rate).
"""
from experiments._signals import long_signal_series, signal
from xcsuite.spec import Experiment

STATIONS = 64
SAMPLES = 144_000  # one hour at 40 Hz
MAX_LAG = 2400  # ±60 s
WINDOW = f"shifts=0:0,{-MAX_LAG}:{MAX_LAG}"

EXPERIMENT = Experiment(
    name="signals_ambient",
    title=(f"Ambient-noise interferometry: {STATIONS} stations, one-hour windows at 40 Hz ({SAMPLES} samples), "
           f"every pair ({STATIONS} x {STATIONS}), lags within ±{MAX_LAG}"),
    paper="Issue #22 (not in the paper)",
    metric="time_with_finish",
    plot="signal_bars",
    xlabel="signals as 1 x n matrices",
    shapes=[signal("n-to-m", SAMPLES, SAMPLES, STATIONS, STATIONS, window=WINDOW,
                   group=f"n-to-m {STATIONS} x {STATIONS}, {SAMPLES} samples, lags ±{MAX_LAG} ({2 * MAX_LAG + 1})")],
    series=long_signal_series(),
)
