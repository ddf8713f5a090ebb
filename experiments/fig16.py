"""Fig. 16: split-row on one-to-one problems, rows per thread from 1 (finest) to n (no split, the
plain warp-shuffle kernel); absolute times. Blocks of 4 warps, triangle work distribution (the
paper's choice for its comparison; add a line with distribution=rectangle to compare)."""
from xcsuite.spec import SIZES_ONE_TO_ONE, Experiment, Series, Shape

ROWS = ["1", "2", "4", "8", "16", "n"]

EXPERIMENT = Experiment(
    name="fig16",
    title="Split-row, one-to-one: rows per thread",
    paper="Fig. 16",
    metric="time",
    shapes=[Shape.one_to_one(n) for n in SIZES_ONE_TO_ONE],
    series=[Series(f"{r} row{'s' if r != '1' else ''} per thread" if r != "n" else "n rows (no split)",
                   "split-row", {"rows": r, "distribution": "triangle"}) for r in ROWS],
)
