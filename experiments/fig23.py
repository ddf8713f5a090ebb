"""Fig. 23: comparison of the n-to-m algorithms on 2-to-2, 8-to-8 and 32-to-32 (the paper's
tunings) with fft and fft+plan, plus this project's new kernels. Sizes: the paper's plus 384 and
512. Claim: fft+plan overtakes at 64x64 for 32-to-32.
Caps: definition-based kernels skip calls above DEFINITION_MAX_FMAS (32-to-32 at 384 and 512:
2.2e13 and 7e13 FMAs, seconds per call, where fft+plan takes milliseconds); the baseline (not
in the paper's figure, added for the speedups) stops at BASELINE_MAX_FMAS.
Peer: torch-fft, PyTorch's FFT correlation as a user writes it (xcsuite.peerbench), in
the same runs; the comparison figure draws it beside fft, fft+plan and fft-fused.
"""
from xcsuite.spec import (BASELINE_MAX_FMAS, DEFINITION_MAX_FMAS, NEW_MAX_FMAS, SIZES_FFT_CROSSING, SIZES_MANY,
                               Experiment, Series, Shape, clamp_to_count)
from experiments._windows import series as peer

EXPERIMENT = Experiment(
    name="fig23",
    title="n-to-m: comparison of algorithms",
    paper="Fig. 23",
    metric="time",
    plot="comparison",
    shapes=[Shape.n_to_m(n, c, c) for c in (2, 8, 32) for n in SIZES_MANY + SIZES_FFT_CROSSING],
    series=[
        Series("overlap-wise (baseline)", "overlap-wise", {"warps": 4}, max_fmas=BASELINE_MAX_FMAS),
        Series("mm-both + split-row (4 x 4, 1 row)", "multi-matrix-both+split-row",
               {"lefts": clamp_to_count(4, "left"), "rights": clamp_to_count(4), "rows": 1, "distribution": "triangle"},
               max_fmas=DEFINITION_MAX_FMAS),
        Series("mm-both + grouped-overlap (4 x 4, 4 overlaps, 4 left rows)", "multi-matrix-both+grouped-overlap",
               {"lefts": clamp_to_count(4, "left"), "rights": clamp_to_count(4), "overlaps": 4, "left_rows": 4},
               max_fmas=DEFINITION_MAX_FMAS),
        Series("fft", "fft"),
        Series("fft+plan", "fft+plan"),
        Series("fft-fused (new, fused FFT)", "fft-fused",
               note="one block per matrix in shared memory up to 96 x 96 (at 96 x 96 from 33 outputs on), staged through global memory beyond"),
        peer("torch-fft"),
        Series("multi-matrix-tiled (new)", "multi-matrix-tiled", max_fmas=NEW_MAX_FMAS),
        Series("tensor-tiled (new, 3xTF32 tensor cores)", "tensor-tiled", max_fmas=NEW_MAX_FMAS),
        Series("tensor-presplit (new, 3xTF32 tensor cores, operands split once)", "tensor-presplit", max_fmas=NEW_MAX_FMAS),
        Series("tensor-rowpair (new, 3xTF32 tensor cores, 2 R rows x 8 rights per MMA)", "tensor-rowpair", max_fmas=NEW_MAX_FMAS),
        Series("tensor-wgmma (new, 3xTF32 on Hopper's warpgroup MMA, sm_90a)", "tensor-wgmma", max_fmas=NEW_MAX_FMAS),
        Series("register-tiled (new)", "register-tiled", max_fmas=NEW_MAX_FMAS),
        Series("small-direct (new)", "small-direct", max_fmas=NEW_MAX_FMAS, max_size=96,
               note="one block per output row in shared memory: sizes up to ~100 only"),
    ],
)
