"""Fig. 20: comparison of the one-to-many algorithms on 1-to-2, 1-to-8 and 1-to-32 (the paper's
tunings, docs/EXPERIMENTS.md) with fft and fft+plan, plus this project's new kernels.
Sizes: the paper's plus 384 and 512 (fft+plan overtakes "slightly beyond 256" with 2 rights).
The baseline is capped at BASELINE_MAX_FMAS per call: it skips 512 with 32 rights (2.2e12).
Peer: torch-fft, PyTorch's FFT correlation as a user writes it (xcsuite.peerbench), in
the same runs; the comparison figure draws it beside fft, fft+plan and fft-fused.
"""
from xcsuite.spec import (BASELINE_MAX_FMAS, DEFINITION_MAX_FMAS, NEW_MAX_FMAS, SIZES_FFT_CROSSING, SIZES_MANY,
                               Experiment, Series, Shape, clamp_to_count)
from experiments._windows import series as peer

EXPERIMENT = Experiment(
    name="fig20",
    title="One-to-many: comparison of algorithms",
    paper="Fig. 20",
    metric="time",
    plot="comparison",
    shapes=[Shape.one_to_many(n, m) for m in (2, 8, 32) for n in SIZES_MANY + SIZES_FFT_CROSSING],
    series=[
        Series("overlap-wise (baseline)", "overlap-wise", {"warps": 4}, max_fmas=BASELINE_MAX_FMAS),
        Series("mm-right + split-row (8 rights, 1 row)", "multi-matrix-right+split-row",
               {"rights": clamp_to_count(8), "rows": 1, "distribution": "triangle"}, max_fmas=DEFINITION_MAX_FMAS),
        Series("mm-right + grouped-overlap (4 rights, 4 overlaps, 4 left rows)", "multi-matrix-right+grouped-overlap",
               {"rights": clamp_to_count(4), "overlaps": 4, "left_rows": 4}, max_fmas=DEFINITION_MAX_FMAS),
        Series("fft", "fft"),
        Series("fft+plan", "fft+plan"),
        Series("fft-fused (new, fused FFT)", "fft-fused",
               note="one block per matrix in shared memory up to 96 x 96 (at 96 x 96 from 33 outputs on), staged through global memory beyond"),
        peer("torch-fft"),
        Series("multi-matrix-tiled (new)", "multi-matrix-tiled", max_fmas=NEW_MAX_FMAS),
        Series("register-tiled (new)", "register-tiled", max_fmas=NEW_MAX_FMAS),
        Series("tensor-tiled (new, 3xTF32 tensor cores)", "tensor-tiled", max_fmas=NEW_MAX_FMAS),
        Series("tensor-presplit (new, 3xTF32 tensor cores, operands split once)", "tensor-presplit", max_fmas=NEW_MAX_FMAS),
        Series("tensor-rowpair (new, 3xTF32 tensor cores, 2 R rows x 8 rights per MMA)", "tensor-rowpair", max_fmas=NEW_MAX_FMAS),
        Series("tensor-wgmma (new, 3xTF32 on Hopper's warpgroup MMA, sm_90a)", "tensor-wgmma", max_fmas=NEW_MAX_FMAS),
        Series("small-direct (new)", "small-direct", max_fmas=NEW_MAX_FMAS, max_size=96,
               note="one block per output row in shared memory: sizes up to ~100 only"),
    ],
)
