"""The best algorithm by size and window, as Table 1 is by form and size.

Rows: one-to-one N x N, N = 64, 128, 256, 512, 1024, 2048. Columns: max_shift 4, 16 and 64, same,
full, and template matching: valid with a right of N/4 x N/4 (the template inside the image).
Candidates: every variant that declares the window (xcorr list) at its default parameters
(register-tiled, small-direct up to 96, fft, fft-fused up to 512) and the peer torch-fft (PyTorch's FFT: the fastest peer in the windows,
autocorr and piv experiments), which the table lists beside the winner but never as it. Not here: the baseline (never the
fastest), tensor-wgmma (no one-to-one), fft+plan (plans reused, as an application would).
Metric: time per call + finish_time (fft's untimed crop). Direct kernels skip calls above 3e11
FMAs (full and same from 1024, valid at 2048: FFT is faster there by far more than 10x).
python -m xcsuite table writes results/<gpu>/window_table.md and plots/<gpu>/window_table.png.
"""
from xcsuite.spec import Experiment, Shape
from experiments._windows import series

SIZES = (64, 128, 256, 512, 1024, 2048)
# (column label, window); the template column's right is N/4 x N/4 (TEMPLATE_DIVISOR)
WINDOWS = (("±4", "max_shift=4"), ("±16", "max_shift=16"), ("±64", "max_shift=64"), ("same", "same"),
           ("full", "full"), ("valid, N/4 template", "valid"))
TEMPLATE_DIVISOR = 4


def shape(n: int, window: str) -> Shape:
    if window == "valid":
        t = n // TEMPLATE_DIVISOR
        return Shape("one-to-one", n, n, t, t, group=f"{n} x {n}", window="valid")
    return Shape.one_to_one(n, group=f"{n} x {n}", window=window)


EXPERIMENT = Experiment(
    name="window_table",
    title="Best algorithm per size and output window",
    paper="Issue #20 (not in the paper)",
    metric="time_with_finish",
    plot="none",
    shapes=[shape(n, w) for n in SIZES for _, w in WINDOWS],
    series=[
        series("register-tiled"),
        series("small-window"),
        series("block-per-pair"),
        series("small-direct"),
        series("fft"),
        series("fft-fused"),
        # The peer beside each cell: PyTorch's FFT, the fastest peer wherever the peers were all
        # measured (windows, autocorr, piv); conv2d's per-shape autotuning costs ~20 s a case.
        series("torch-fft"),
    ],
)
