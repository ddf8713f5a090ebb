"""Fig. 22: multi-matrix-both without and with split-row (1 row per thread), 2-to-2 and 8-to-8;
absolute times. Lines: left x right matrices per thread 1x1 and 4x4 (at most the counts).
Claim: split-row ~5x faster at 16x16 (the best case), negligible for large sizes."""
from xcsuite.spec import SIZES_MANY, Experiment, Series, Shape, clamp_to_count

MM = [1, 4]  # the instantiated lefts/rights values (at most the counts)

series = []
for k in MM:
    series.append(Series(f"{k} x {k} matrices per thread", "multi-matrix-both",
                         {"lefts": clamp_to_count(k, "left"), "rights": clamp_to_count(k)}, panel="multi-matrix-both"))
for k in MM:
    series.append(Series(f"{k} x {k} matrices per thread", "multi-matrix-both+split-row",
                         {"lefts": clamp_to_count(k, "left"), "rights": clamp_to_count(k), "rows": 1,
                          "distribution": "triangle"}, panel="multi-matrix-both + split-row (1 row)"))

EXPERIMENT = Experiment(
    name="fig22",
    title="Multi-matrix-both with and without split-row, n-to-m",
    paper="Fig. 22",
    metric="time",
    shapes=[Shape.n_to_m(n, c, c) for c in (2, 8) for n in SIZES_MANY],
    series=series,
)
