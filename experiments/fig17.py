"""Fig. 17: comparison of the one-to-one algorithms (the paper's tunings, docs/EXPERIMENTS.md), with
fft (plans reused) and fft+plan (plan creation timed), plus this project's new kernels.

Sizes: the paper's one-to-one sizes plus 384 and 512, where fft+plan overtakes ("near 384").
The baseline is capped at BASELINE_MAX_FMAS per call (it never is: 512 needs 6.9e10).
Left panel: every algorithm; right panel: best definition-based (paper / new) vs fft, fft+plan.
Peer: torch-fft, PyTorch's FFT correlation as a user writes it (xcsuite.peerbench), in
the same runs; the comparison figure draws it beside fft, fft+plan and fft-fused.
"""
from xcsuite.spec import (BASELINE_MAX_FMAS, NEW_MAX_FMAS, SIZES_FFT_CROSSING, SIZES_ONE_TO_ONE, Experiment,
                               Series, Shape)
from experiments._windows import series as peer

EXPERIMENT = Experiment(
    name="fig17",
    title="One-to-one: comparison of algorithms",
    paper="Fig. 17",
    metric="time",
    plot="comparison",
    shapes=[Shape.one_to_one(n) for n in SIZES_ONE_TO_ONE + SIZES_FFT_CROSSING],
    series=[
        Series("overlap-wise (baseline)", "overlap-wise", {"warps": 4}, max_fmas=BASELINE_MAX_FMAS),
        Series("split-row (1 row, triangle)", "split-row", {"rows": 1, "distribution": "triangle"}),
        Series("grouped-overlap (8 overlaps, 8 left rows)", "grouped-overlap", {"overlaps": 8, "left_rows": 8}),
        Series("warp-per-overlap (4 per block)", "warp-per-overlap", {"overlaps_per_block": 4}),
        Series("warp-per-overlap, shared memory", "warp-per-overlap-shared"),
        Series("fft", "fft"),
        Series("fft+plan", "fft+plan"),
        Series("fft-fused (new, fused FFT)", "fft-fused",
               note="one block per matrix in shared memory up to 96 x 96 (at 96 x 96 from 33 outputs on), staged through global memory beyond"),
        peer("torch-fft"),
        Series("register-tiled (new)", "register-tiled", max_fmas=NEW_MAX_FMAS),
        Series("small-direct (new)", "small-direct", max_fmas=NEW_MAX_FMAS, max_size=96,
               note="one block per output row in shared memory: sizes up to ~100 only"),
    ],
)
