"""Fig. 15: grouped-overlap, one-to-one problems with the GPU saturated, time per FMA.

The paper ran 4000 copies of the one-to-one problem in one grid; here that is the n-to-mn form
with N = 4000 lefts, each paired with its own right (nL = nR = 4000). Grouping = overlaps per
thread x left rows per iteration, blocks of 4 warps.
Deviation: at 192 and 256 a call of 4000 copies would take seconds, so the copy count is capped
at SATURATED_MAX_FMAS per call (1564 copies at 192, 465 at 256); the GPU stays saturated and the
metric (time per FMA) is unchanged. Set max_fmas=None in `saturated` for the paper's exact runs.
"""
from xcsuite.spec import SIZES_ONE_TO_ONE, Experiment, Series, Shape, saturated

GROUPINGS = [(1, 1), (2, 2), (4, 4), (8, 8)]  # (overlaps, left rows)

EXPERIMENT = Experiment(
    name="fig15",
    title="Grouped-overlap, saturated (4000 one-to-one copies): time per FMA",
    paper="Fig. 15",
    metric="time_per_fma",
    shapes=[saturated(lambda n, c: Shape.n_to_mn(n, c, 1), n, copies=4000) for n in SIZES_ONE_TO_ONE],
    series=[
        Series(f"{s} x {l} (overlaps x left rows)", "grouped-overlap", {"overlaps": s, "left_rows": l},
               alt=Series("", "multi-matrix-right+grouped-overlap", {"overlaps": s, "left_rows": l, "rights": 1}))
        for s, l in GROUPINGS
    ],
)
