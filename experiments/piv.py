"""PIV (particle image velocimetry), an output-window experiment: every interrogation window of one
frame against its search area in the next, only the shifts where the window lies inside the area.

n-to-mn with 3969 pairs (a 63 x 63 grid of interrogation windows): each left is a 64 x 64 search
area, its right a 32 x 32 interrogation window, window valid: 33 x 33 shifts per pair (dy, dx in
0..32). And the shape of the reductions' PIV case: 8192 pairs of 32 x 32 windows of one size (frame A's
window against frame B's at the same place), shifts within ±8 (17 x 17 per pair). Every variant that
declares the window (xcorr list) and the peers (PyTorch, CuPy); block-per-pair over its slice
counts, register-tiled and small-direct over their tile sizes (the application's shapes: tuning
matters), the others at their defaults. Metric: time per call + finish_time (fft's untimed crop). A
bar per series.
"""
from xcsuite.spec import Experiment, Shape
from experiments._windows import peer_series, series

PAIRS, SEARCH, INTERROGATION = 3969, 64, 32
WINDOW_PAIRS, MAX_SHIFT = 8192, 8  # the reductions' PIV case: window pairs of one size within ±8

EXPERIMENT = Experiment(
    name="piv",
    title=(f"PIV: {PAIRS} pairs, {SEARCH} x {SEARCH} search areas with {INTERROGATION} x {INTERROGATION} "
           f"interrogation windows, valid window ({SEARCH - INTERROGATION + 1} x {SEARCH - INTERROGATION + 1} shifts); "
           f"{WINDOW_PAIRS} pairs of {INTERROGATION} x {INTERROGATION} windows within ±{MAX_SHIFT}"),
    paper="Issue #20 (not in the paper)",
    metric="time_with_finish",
    plot="bars",
    shapes=[Shape("n-to-mn", SEARCH, SEARCH, INTERROGATION, INTERROGATION, PAIRS, PAIRS,
                  group=f"n-to-mn, {PAIRS} pairs, valid", window="valid"),
            Shape("n-to-mn", INTERROGATION, INTERROGATION, INTERROGATION, INTERROGATION, WINDOW_PAIRS, WINDOW_PAIRS,
                  group=f"n-to-mn, {WINDOW_PAIRS} pairs, max_shift {MAX_SHIFT}", window=f"max_shift={MAX_SHIFT}")],
    series=[
        series("block-per-pair", tune={"slices": "*"}),
        series("register-tiled", tune={"rows": "*"}),
        series("small-direct", tune={"warps": "*"}),
        series("tensor-wgmma"),
        series("overlap-wise"),
        series("fft"),
        series("fft+plan"),
        series("fft-fused"),
        *peer_series(),
    ],
)
