"""Fig. 18: multi-matrix-right + grouped-overlap, one-to-many saturated with 4000 rights, time
per FMA. Panels: right matrices per thread 1, 2, 4; lines: overlaps x left rows 1x1, 2x2, 4x4.
Deviation: at 256 the right count is capped at SATURATED_MAX_FMAS per call (465 rights)."""
from xcsuite.spec import SIZES_MANY, Experiment, Series, Shape, saturated

EXPERIMENT = Experiment(
    name="fig18",
    title="Multi-matrix-right + grouped-overlap, one-to-many with 4000 rights: time per FMA",
    paper="Fig. 18",
    metric="time_per_fma",
    shapes=[saturated(lambda n, c: Shape.one_to_many(n, c), n, copies=4000) for n in SIZES_MANY],
    series=[
        Series(f"{g} x {g} (overlaps x left rows)", "multi-matrix-right+grouped-overlap",
               {"rights": r, "overlaps": g, "left_rows": g}, panel=f"{r} right{'s' if r > 1 else ''} per thread")
        for r in (1, 2, 4) for g in (1, 2, 4)
    ],
)
