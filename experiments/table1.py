"""Table 1: the best algorithm (with its best tuning) per form and size, from a tuning sweep.

Rows 1-to-1, 1-to-2, 1-to-8, 1-to-32, 2-to-2, 8-to-8, 32-to-32; columns 16 ... 384 and 512 (the
paper's "beyond"). Candidates are the paper's algorithms for each form (one-to-many: the
multi-matrix-right variants; n-to-m: multi-matrix-both, as the paper's table assumes), each over
a tuning grid around the paper's parameter ranges (Fig. 15-22), fft and fft+plan, and this
project's new kernels (family "hopper") with their default parameters (they pick their own
tiling by problem size; tune="*" here would sweep their grids, at ~25 min each).
python -m xcsuite table reads it four ways: with fft+plan (the paper's) or fft, with or without the new
kernels.
Caps, to keep the sweep to about half an hour of GPU time:
- definition-based kernels of the paper skip calls above DEFINITION_MAX_FMAS (only 32-to-32 at
  384 and 512, seconds per call where fft+plan needs milliseconds);
- the small-size kernels (warp-per-overlap, block-per-overlap) stop at 256 (on the H200 they are
  already 4x slower than grouped-overlap at 256, docs/ANCHORS.md).
"""
from xcsuite.spec import (DEFINITION_MAX_FMAS, NEW_MAX_FMAS, SIZES_TABLE, Experiment, Series, Shape,
                               clamp_to_count)

ROWS = [("one-to-one", 1, 1), ("one-to-many", 1, 2), ("one-to-many", 1, 8), ("one-to-many", 1, 32),
        ("n-to-m", 2, 2), ("n-to-m", 8, 8), ("n-to-m", 32, 32)]


def _shape(form, nl, nr, n):
    if form == "one-to-one":
        return Shape.one_to_one(n)
    if form == "one-to-many":
        return Shape.one_to_many(n, nr)
    return Shape.n_to_m(n, nl, nr)


ONE = ("one-to-one",)
MANY = ("one-to-many",)
BOTH = ("n-to-m",)
GROUPINGS = [(1, 1), (2, 2), (4, 4), (8, 8), (2, 8)]  # (overlaps, left rows)
CAP = DEFINITION_MAX_FMAS
R = clamp_to_count  # "k rights per thread" is at most the number of rights


def mm(k, side="right"):
    return clamp_to_count(k, side)



EXPERIMENT = Experiment(
    name="table1",
    title="Best algorithm per form and size (tuning sweep)",
    paper="Table 1",
    metric="time",
    plot="none",
    shapes=[_shape(f, nl, nr, n) for f, nl, nr in ROWS for n in SIZES_TABLE],
    series=[
        # one-to-one
        Series("warp-per-overlap", "warp-per-overlap", tune="*", forms=ONE, max_size=256),
        Series("warp-per-overlap-shared", "warp-per-overlap-shared", tune={"warps": "*", "col_group": "*"},
               forms=ONE, max_size=256),
        Series("block-per-overlap", "block-per-overlap", tune="*", forms=ONE, max_size=256),
        Series("split-row", "split-row", {"distribution": "triangle"}, tune={"rows": "*"}, forms=ONE),
        Series("warp-shuffle", "warp-shuffle", tune="*", forms=ONE),
        Series("grouped-overlap", "grouped-overlap",
               tune=[{"overlaps": s, "left_rows": l} for s, l in GROUPINGS], forms=ONE),
        # one-to-many: multi-matrix-right
        Series("multi-matrix-right", "multi-matrix-right", {"launch": "grid"}, tune={"rights": [R(1), R(2), R(4), R(8)]},
               forms=MANY, max_fmas=CAP),
        Series("mm-right + split-row", "multi-matrix-right+split-row", {"distribution": "triangle"},
               tune={"rights": [R(1), R(4), R(8)], "rows": ["1", "4", "n"]}, forms=MANY, max_fmas=CAP),
        Series("mm-right + grouped-overlap", "multi-matrix-right+grouped-overlap",
               tune=[{"rights": R(r), "overlaps": g, "left_rows": g} for r in (1, 2, 4) for g in (1, 2, 4)],
               forms=MANY, max_fmas=CAP),
        # n-to-m: multi-matrix-both
        Series("multi-matrix-both", "multi-matrix-both",
               tune=[{"lefts": mm(k, "left"), "rights": mm(k)} for k in (1, 2, 4)], forms=BOTH, max_fmas=CAP),
        Series("mm-both + split-row", "multi-matrix-both+split-row", {"distribution": "triangle"},
               tune=[{"lefts": mm(k, "left"), "rights": mm(k), "rows": r} for k in (1, 2, 4) for r in ("1", "n")],
               forms=BOTH, max_fmas=CAP),
        Series("mm-both + grouped-overlap", "multi-matrix-both+grouped-overlap",
               tune=[{"lefts": mm(k, "left"), "rights": mm(k), "overlaps": g, "left_rows": g}
                     for k in (1, 2, 4) for g in (1, 2, 4)], forms=BOTH, max_fmas=CAP),
        # every form
        Series("fft", "fft"),
        Series("fft+plan", "fft+plan"),
        Series("fft-fused (new, fused FFT)", "fft-fused",
               note="one block per matrix in shared memory up to 96 x 96 (at 96 x 96 from 33 outputs on), staged through global memory beyond"),
        Series("register-tiled (new)", "register-tiled", max_fmas=NEW_MAX_FMAS),
        Series("multi-matrix-tiled (new)", "multi-matrix-tiled", max_fmas=NEW_MAX_FMAS),
        Series("tensor-tiled (new, 3xTF32 tensor cores)", "tensor-tiled", max_fmas=NEW_MAX_FMAS),
        Series("tensor-presplit (new, 3xTF32 tensor cores, operands split once)", "tensor-presplit", max_fmas=NEW_MAX_FMAS),
        Series("tensor-rowpair (new, 3xTF32 tensor cores, 2 R rows x 8 rights per MMA)", "tensor-rowpair", max_fmas=NEW_MAX_FMAS),
        Series("tensor-wgmma (new, 3xTF32 on Hopper's warpgroup MMA, sm_90a)", "tensor-wgmma", max_fmas=NEW_MAX_FMAS),
        Series("small-direct (new)", "small-direct", max_fmas=NEW_MAX_FMAS, max_size=96,
               note="one block per output row in shared memory: sizes up to ~100 only"),
    ],
)
