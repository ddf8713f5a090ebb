"""Efficiency: the best of the paper's kernels vs the best of this project's new kernels per form
and size, as a percentage of the GPU's FP32 (non-tensor) FMA peak, 2 x FMAs / time / peak.

Derived from the measurements of table1 (one-to-one, one-to-many, n-to-m, sizes 16-512) and nmn
(n-to-mn, including the real-data shape): it runs nothing of its own. fft is left out (it does
not perform the FMAs the metric counts)."""
from xcsuite.spec import Experiment

EXPERIMENT = Experiment(
    name="efficiency",
    title="Best paper kernel vs best new kernel: % of FP32 peak",
    paper="(beyond the paper)",
    metric="peak_pct",
    plot="efficiency",
    shapes=[],
    series=[],
    derived_from=("table1", "nmn"),
)
