"""Fig. 21: grouped-overlap with multi-matrix on n-to-m, saturated (128-to-128), time per FMA.
Panels: no multi-matrix (1 x 1), multi-matrix-right (1 left x 4 rights per thread),
multi-matrix-both (4 x 4); lines: overlaps x left rows 1x1, 2x2, 4x4.
Claim: both over right ~1.75x at the highest grouping (4x4), at every size.
Deviation: the n-to-n count is capped at SATURATED_MAX_FMAS per call (a multiple of 4: 84-to-84
at 128, 20-to-20 at 256); the GPU stays saturated and time per FMA is unchanged."""
from xcsuite.spec import SIZES_MANY, Experiment, Series, Shape, saturated

MODES = [  # panel, variant, extra parameters
    ("none (1 x 1)", "grouped-overlap", {}),
    ("multi-matrix-right (1 x 4)", "multi-matrix-right+grouped-overlap", {"rights": 4}),
    ("multi-matrix-both (4 x 4)", "multi-matrix-both+grouped-overlap", {"lefts": 4, "rights": 4}),
]

EXPERIMENT = Experiment(
    name="fig21",
    title="Multi-matrix + grouped-overlap, n-to-m (128-to-128): time per FMA",
    paper="Fig. 21",
    metric="time_per_fma",
    shapes=[saturated(lambda n, c: Shape.n_to_m(n, c, c), n, copies=128, square=True, multiple=4) for n in SIZES_MANY],
    series=[
        Series(f"{g} x {g} (overlaps x left rows)", variant, {**extra, "overlaps": g, "left_rows": g}, panel=panel,
               alt=(Series("", "multi-matrix-both+grouped-overlap", {"lefts": 1, "rights": 1, "overlaps": g, "left_rows": g})
                    if variant == "grouped-overlap" else None))
        for panel, variant, extra in MODES for g in (1, 2, 4)
    ],
)
