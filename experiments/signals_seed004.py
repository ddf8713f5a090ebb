"""Seed 004's case: one channel against 16 templates of 256 samples, the valid window,
4.32e6 shifts, so the channel has 4.32e6 + 255 samples: one-to-many, signals as 1 x n matrices.

Seed 004 (Kikuchi et al.) computes it as a Hankel-matrix product on tensor cores: 53.56 TFLOP/s
(A100, TF32), 34% of the A100's TF32 peak; the case is 1.77e10 multiply-adds, 3.54e10 FLOP, so
0.661 ms per call at that rate. The figure's title and a dashed line in each panel give it for
comparison (the issue's H200 targets: 150 TFLOP/s in TF32, 67 in 3xTF32).

Panels: the valid window (seed 004's case exactly), and its full-output companion (the same channel
and templates, 4.32e6 + 510 shifts, 0.006% more multiply-adds) for the tensor-core variants that
compute only the full output: tensor-tiled-tf32 (TF32, seed 004's arithmetic; tolerance 2e-3) and
tensor-tiled (3xTF32), with fft beside them.
Series (valid): this project's register-tiled, signal-tiled (FP32 tiles of 8 lags x 8 templates,
built for 1-D signals) and tensor-wgmma (3xTF32 warpgroup MMA: one-to-many
with any window), tensor-hankel and tensor-hankel-tf32 (seed 004's method for signals: a left window
read once per block of 256 or 512 lags x 16 templates, 3xTF32 and TF32 mma.sync), the baseline
overlap-wise, fft and fft+plan (cuFFT), fft-segmented (overlap-save for signals: 268 lag pieces of
16129 lags against the 256-sample templates, transforms of 16384 points), and the peers
torch-conv2d (cuDNN, FP32), torch-conv2d-tf32 (cuDNN with TF32 allowed, PyTorch's default for
convolutions; beside tensor-hankel-tf32), torch-fft and cupy-correlate2d, each at its default parameters.
Caps: direct kernels and torch-conv2d 3e11 multiply-adds per call, overlap-wise and CuPy 2e10;
the case's 1.77e10 is within all of them. Not here: fft-fused (transforms up to 1024 points, the
output row has 4.32e6 lags) and small-direct (a row of the input in shared memory), see
experiments/_signals.py.
Metric: time per call + finish_time (fft's untimed crop), and beside each bar the TFLOP/s it gives
(2 x the window's multiply-adds per second; for the FFTs a direct-equivalent rate).
Device time (xcsuite/cost.py's model, full protocol, H200): about 29 s for 16 cases, of which
~4.5 s is the two torch-conv2d peers' cuDNN autotuning (the model's per-case cost: 0.5 s + the
case's FMAs / 1e10); the model's square-matrix rates put the direct kernels at 1.5-14 ms per call,
and one that runs the single shift row at 1/64 of its rate (register-tiled: ~94 ms per call) adds
about 1 s.
"""
from experiments._signals import SEED004_LABEL, SEED004_TFLOPS, series, signal
from xcsuite.spec import Experiment

TEMPLATES, TEMPLATE = 16, 256
SHIFTS = 4_320_000
CHANNEL = SHIFTS + TEMPLATE - 1  # the valid window of a 1 x CHANNEL left and 1 x TEMPLATE rights: SHIFTS lags
VALID = f"valid: {TEMPLATES} templates x {TEMPLATE} samples, 1 channel, 4.32e6 shifts (seed 004's case)"
FULL = (f"full output: 4.32e6 + {2 * (TEMPLATE - 1)} shifts (the variants that compute only the full output, "
        "fft beside them)")
VALID_ONLY = ("valid",)

EXPERIMENT = Experiment(
    name="signals_seed004",
    title=(f"Seed 004's case: 1 channel of {CHANNEL} samples against {TEMPLATES} templates of {TEMPLATE}, "
           f"valid window (4.32e6 shifts); {SEED004_LABEL}"),
    paper="Issue #22, seed 004 (not in the paper)",
    metric="time_with_finish",
    plot="signal_bars",
    xlabel="signals as 1 x n matrices",
    reference_tflops=SEED004_TFLOPS,
    reference_label=SEED004_LABEL,
    shapes=[signal("one-to-many", CHANNEL, TEMPLATE, 1, TEMPLATES, group=VALID, window="valid"),
            signal("one-to-many", CHANNEL, TEMPLATE, 1, TEMPLATES, group=FULL, window="full")],
    series=[
        series("register-tiled", windows=VALID_ONLY),
        series("signal-tiled", windows=VALID_ONLY),
        series("tensor-wgmma", windows=VALID_ONLY),
        series("tensor-hankel", windows=VALID_ONLY),
        series("tensor-hankel-tf32", windows=VALID_ONLY),
        series("tensor-tiled-tf32", windows=("full",)),
        series("tensor-tiled", windows=("full",)),
        series("overlap-wise", windows=VALID_ONLY),
        series("fft"),  # both panels: the reference beside the full-output-only variants
        series("fft+plan", windows=VALID_ONLY),
        series("fft-segmented", windows=VALID_ONLY),
        series("torch-conv2d", windows=VALID_ONLY),
        series("torch-conv2d-tf32", windows=VALID_ONLY),
        series("torch-fft", windows=VALID_ONLY),
        series("cupy-correlate2d", windows=VALID_ONLY),
    ],
)
