"""Fig. 19: multi-matrix-right + split-row on 1-to-2, 1-to-8 and 1-to-32; absolute times.
Lines: right matrices per thread x rows per thread in {1 x 1, 8 x 1, 1 x n, 8 x n} (n = no split).
As in the paper, "8" means at most the number of rights (2 in the 1-to-2 panel)."""
from xcsuite.spec import SIZES_MANY, Experiment, Series, Shape, clamp_to_count

CONFIGS = [(1, "1"), (8, "1"), (1, "n"), (8, "n")]  # (rights per thread, rows per thread)

EXPERIMENT = Experiment(
    name="fig19",
    title="Multi-matrix-right + split-row, one-to-many",
    paper="Fig. 19",
    metric="time",
    shapes=[Shape.one_to_many(n, m) for m in (2, 8, 32) for n in SIZES_MANY],
    series=[
        Series(f"{r} right{'s' if r > 1 else ''}/thread, {'no split' if rows == 'n' else rows + ' row/thread'}",
               "multi-matrix-right+split-row",
               {"rights": clamp_to_count(r), "rows": rows, "distribution": "triangle"})
        for r, rows in CONFIGS
    ],
)
