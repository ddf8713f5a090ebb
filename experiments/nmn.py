"""n-to-mn (section 5.3.4; the paper omitted the figure, its replication package has the data):
n lefts, each correlated with its own m rights.

Shapes: the package's 2 x 8, 4 x 16 and 8 x 32, read as (left count) x (right count in total),
i.e. nL = 2, 4, 8 and nR = 8, 16, 32 (4 rights per left); the saturated 100 x 4000 (40 rights
per left); and the real-data shape of section 5.6 (86 lefts, 50 x 86 rights, 96 x 96), for
which the paper reports 79 ms on an A100 with multi-matrix-right + grouped-overlap.
Lines: multi-matrix-right launched as one grid with an extra index, or as one-to-many kernels on
1 or 20 streams (the paper's question), the tuned mm-right variants, fft, and the new kernels.
Peer: torch-fft, PyTorch's FFT correlation as a user writes it (xcsuite.peerbench), in
the same runs.
"""
from xcsuite.spec import SIZES_MANY, Experiment, Series, Shape, clamp_to_count
from experiments._windows import series as peer

PACKAGE_SHAPES = [(2, 8), (4, 16), (8, 32), (100, 4000)]  # (nL, nR)

shapes = [Shape.n_to_mn(n, nl, nr // nl, group=f"{nl} x {nr} (n-to-mn)") for nl, nr in PACKAGE_SHAPES for n in SIZES_MANY]
shapes.append(Shape.n_to_mn(96, 86, 50, group="real-data shape 86 x (50 x 86), 96 x 96"))

EXPERIMENT = Experiment(
    name="nmn",
    title="n-to-mn: one grid vs one-to-many kernels on streams",
    paper="Section 5.3.4 (no figure), section 5.6",
    metric="time",
    shapes=shapes,
    series=[
        Series("mm-right, one grid", "multi-matrix-right", {"launch": "grid"}),
        Series("mm-right, 1 stream", "multi-matrix-right", {"launch": "streams1"}),
        Series("mm-right, 20 streams", "multi-matrix-right", {"launch": "streams20"}),
        Series("mm-right + split-row (8 rights, 1 row)", "multi-matrix-right+split-row",
               {"rights": clamp_to_count(8), "rows": 1, "distribution": "triangle"}),
        Series("mm-right + grouped-overlap (4/4/4)", "multi-matrix-right+grouped-overlap",
               {"rights": clamp_to_count(4), "overlaps": 4, "left_rows": 4}),
        Series("mm-right + grouped-overlap (4/4/4), 20 streams", "multi-matrix-right+grouped-overlap",
               {"rights": clamp_to_count(4), "overlaps": 4, "left_rows": 4, "launch": "streams20"}),
        Series("fft", "fft"),
        Series("fft-fused (new, fused FFT)", "fft-fused",
               note="one block per matrix in shared memory up to 96 x 96 (at 96 x 96 from 33 outputs on), staged through global memory beyond"),
        peer("torch-fft"),
        Series("multi-matrix-tiled (new)", "multi-matrix-tiled"),
        Series("register-tiled (new)", "register-tiled"),
        Series("tensor-tiled (new, 3xTF32 tensor cores)", "tensor-tiled"),
        Series("tensor-presplit (new, 3xTF32 tensor cores, operands split once)", "tensor-presplit"),
        Series("tensor-rowpair (new, 3xTF32 tensor cores, 2 R rows x 8 rights per MMA)", "tensor-rowpair"),
        Series("tensor-wgmma (new, 3xTF32 on Hopper's warpgroup MMA, sm_90a)", "tensor-wgmma"),
        Series("multi-matrix-tiled (new, 7 rights per thread)", "multi-matrix-tiled",
               {"lanes": "rights", "rows": 2, "rights": 7}),
    ],
)
