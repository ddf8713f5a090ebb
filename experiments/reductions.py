"""Reductions: peaks and the maximum over the rights, against the map they replace and
PyTorch, in the same run, everything called as a user calls it from Python (xcsuite/reduce_peers.py,
run by xcsuite.peerbench with its protocol: warm-up and a planted-answer check before timing).

Cases:
  PIV            8192 window pairs of 32 x 32 (n-to-mn, a right per left), max_shift 8, k = 1,
                 gaussian sub-pixel fit
  32-to-32       n-to-m 32 x 32 of 256 x 256, full window, k = 1 (parabolic)
  template match ZNCC of 64 templates of 31 x 31 in one 1024 x 1024 image (one-to-many), valid
                 window, top 5 with min_distance 15 (parabolic)
  2-D template matching  one 4096 x 4096 image, templates 384 x 384, the window "same" (a value per
                 image pixel, template centred: the cryo-EM tools' output grid, without their
                 circular wrap), running max, argmax, sum and sum of squares over TM_COUNTS templates
                 (64 to 10^4: the time per template as the count grows, and the memory's
                 independence of the count); and one K3 micrograph, 5760 x 4092 (width x height: the
                 detector's frame, as cryo-EM data sets store it), with TM_K3_COUNT templates, the same
                 search at the size its users run it
  ambient noise  signals_ambient's shape: 64 x 64 stations of 144000 samples, lags ±2400, k = 1
                 through peaks1d (parabolic)
Series: xcorr-reduce (our reduction, algorithm auto), xcorr-reduce-batched (2DTM only: the rights
fed in batches of 128 with out= and first_index=), xcorr-map (our map into a reused tensor, not on
2DTM: thousands of maps of 4096 x 4096 do not fit), xcorr-map+torch (our map, then the reduction in
PyTorch; 2DTM: batches of 16), torch-reduce (PyTorch as a competent user writes it: torch.fft map,
then the reduction in PyTorch; 2DTM: the torch-2dtm / Leopard-EM loop padded to our window) and
torch-2dtm-circular (2DTM only: that loop at the image's own size, circular, as the tools run it:
other values within 384 of the edges). The batched loop and our map then PyTorch's reduction run on
2DTM up to TM_SIDE_SERIES_MAX templates: beyond it they add minutes and say nothing the smaller
counts do not.
Metric: time per call (for 2DTM one call is every template: templates/s = count / time). The
targets (TARGETS, below: the one place they are written) and whether they hold: python -m xcsuite
table (results/<gpu>/reductions_table.md). The 2DTM figure draws the time per template against the
count with its floor (tm_floor_us) as a band.
Quick (smoke) run: python -m xcsuite run-experiments reductions --quick --max-fmas 2e14 (every case but
the 2DTM counts above 64; --quick's default cap of 1e11 direct-equivalent FMAs would keep only PIV
and ZNCC).
"""
import math
from dataclasses import dataclass

from xcsuite.spec import Experiment, Series, Shape

PIV_PAIRS, PIV_SIDE, PIV_SHIFT = 8192, 32, 8
NTOM, NTOM_SIDE = 32, 256
IMAGE, TEMPLATE, TEMPLATES, TOP, MIN_DISTANCE = 1024, 31, 64, 5, 15
TM_IMAGE, TM_TEMPLATE = 4096, 384
TM_COUNTS = (64, 256, 1000, 4000, 10_000)  # template counts of 2-D template matching
TM_QUICK = TM_COUNTS[0]  # the smallest: the quick run's, and the memory target's baseline
TM_SIDE_SERIES_MAX = 1000  # xcorr-reduce-batched and xcorr-map+torch on 2DTM: up to this many templates
TM_K3_H, TM_K3_W, TM_K3_COUNT = 4092, 5760, 256  # a K3 micrograph (height x width) and its templates
STATIONS, SAMPLES, MAX_LAG = 64, 144_000, 2400

PIV = f"PIV: {PIV_PAIRS} pairs of {PIV_SIDE} x {PIV_SIDE}, ±{PIV_SHIFT}, k = 1, gaussian fit"
NTOM_GROUP = f"{NTOM}-to-{NTOM} of {NTOM_SIDE} x {NTOM_SIDE}, full, k = 1"
ZNCC = (f"ZNCC template matching: {TEMPLATES} templates {TEMPLATE} x {TEMPLATE} in {IMAGE} x {IMAGE}, valid, "
        f"top {TOP}, min_distance {MIN_DISTANCE}")


def tm_group(n: int) -> str:
    return (f"2-D template matching: {TM_IMAGE} x {TM_IMAGE} image, {n} templates {TM_TEMPLATE} x {TM_TEMPLATE}, "
            "same window, max / argmax / sum / sum of squares")


TM_GROUPS = tuple(tm_group(n) for n in TM_COUNTS)
# The K3 micrograph's case: not among TM_GROUPS (the 4096 x 4096 counts, which the 2DTM targets and the
# per-template figure are judged on); a panel of the bar figure and a row of the table.
TM_K3 = (f"2-D template matching, a K3 micrograph: {TM_K3_W} x {TM_K3_H} image (width x height), {TM_K3_COUNT} "
         f"templates {TM_TEMPLATE} x {TM_TEMPLATE}, same window, max / argmax / sum / sum of squares")
AMBIENT = f"ambient noise: {STATIONS} x {STATIONS} stations, {SAMPLES} samples, lags ±{MAX_LAG}, k = 1"

# The reduction of each case (reduce_peers.REDUCTIONS), by its panel.
REDUCE = {PIV: "peaks-k1-gaussian", NTOM_GROUP: "peaks-k1-parabolic", ZNCC: f"peaks-k{TOP}-md{MIN_DISTANCE}-parabolic",
          AMBIENT: "peaks-k1-parabolic", **{g: "max-stats" for g in TM_GROUPS + (TM_K3,)}}


def tm_shape(n: int) -> Shape:
    return Shape("one-to-many", TM_IMAGE, TM_IMAGE, TM_TEMPLATE, TM_TEMPLATE, 1, n, group=tm_group(n), window="same")


SHAPES = [
    Shape("n-to-mn", PIV_SIDE, PIV_SIDE, PIV_SIDE, PIV_SIDE, PIV_PAIRS, PIV_PAIRS, group=PIV, window=f"max_shift={PIV_SHIFT}"),
    Shape("n-to-m", NTOM_SIDE, NTOM_SIDE, NTOM_SIDE, NTOM_SIDE, NTOM, NTOM, group=NTOM_GROUP),
    Shape("one-to-many", IMAGE, IMAGE, TEMPLATE, TEMPLATE, 1, TEMPLATES, group=ZNCC, window="valid", normalize="zncc"),
    *(tm_shape(n) for n in TM_COUNTS),
    Shape("one-to-many", TM_K3_H, TM_K3_W, TM_TEMPLATE, TM_TEMPLATE, 1, TM_K3_COUNT, group=TM_K3, window="same"),
    Shape("n-to-m", 1, SAMPLES, 1, SAMPLES, STATIONS, STATIONS, group=AMBIENT, window=f"shifts=0:0,{-MAX_LAG}:{MAX_LAG}"),
]
TM_WINDOW = "same"  # the 2DTM shapes only: the series that run on them alone, or never, say so by window
OTHER_WINDOWS = tuple(dict.fromkeys(s.window for s in SHAPES if s.window != TM_WINDOW))
# The side series' cap, on the window's multiply-adds: every other case lies below it (the K3 case's
# 256 templates ~8.9e14; 32-to-32 and ambient noise ~4e12 in all), so only 2DTM's larger counts meet it.
SIDE_SERIES_MAX_FMAS = tm_shape(TM_SIDE_SERIES_MAX).fmas * 1.001
assert all(s.fmas < SIDE_SERIES_MAX_FMAS for s in SHAPES if s.group not in TM_GROUPS)


# --- the targets (the one place they are written: xcsuite.tables judges them on the results) -------

@dataclass(frozen=True)
class Target:
    """One target of a case. kind: "speedup" (PyTorch's time / ours >= bound), "over_map" (ours /
    our map's time <= bound), "map_us" (our map's own time <= bound µs), "templates_per_s" (2DTM: ours
    >= bound templates/s at the largest count measured), "memory_mib" (2DTM: the GPU memory our
    call takes beyond its inputs grows by at most bound MiB from the smallest count to the largest
    measured)."""

    group: str
    kind: str
    bound: float

    @property
    def at_least(self) -> bool:
        return self.kind in ("speedup", "templates_per_s")


TM = "2-D template matching"  # the 2DTM targets' group: judged on the counts measured (TM_GROUPS)
TARGETS = (
    Target(PIV, "speedup", 8.0),
    Target(NTOM_GROUP, "over_map", 0.5), Target(NTOM_GROUP, "speedup", 6.0), Target(NTOM_GROUP, "map_us", 700.0),
    Target(ZNCC, "over_map", 0.6), Target(ZNCC, "speedup", 12.0),
    Target(AMBIENT, "speedup", 15.0),
    Target(TM, "templates_per_s", 9000.0), Target(TM, "memory_mib", 64.0),
)
# 2-D template matching over two GPUs or more: at least this times one GPU's rate at the largest count,
# judged on results/<gpu>/multi-gpu/tm_scaling.json (scripts/tm-scaling; the multi-GPU table).
TM_GPUS_SPEEDUP = 1.9


# --- the floor of 2-D template matching, per template ---------------------------------------------

# Peak rates by GPU (the results folder's name): bytes/s of DRAM and FP32 FLOP/s (dense, boost clock).
# H200: 4.8 TB/s HBM3e, 132 SMs x 128 FP32 lanes x 2 x 1.98 GHz = 66.9 TFLOP/s; the H100 SXM: 3.35 TB/s,
# the same SMs and clock.
GPU_PEAKS = {"nvidia-h200": (4.8e12, 66.9e12), "nvidia-h100-80gb-hbm3": (3.35e12, 66.9e12)}


def fft_flops(n: int) -> float:
    """A complex transform of n points: 5 n log2 n FLOP (the usual count; a real one: half)."""
    return 5.0 * n * math.log2(n) if n > 1 else 0.0


def tm_floor(shape: Shape, bandwidth: float, fp32_flops: float) -> dict:
    """The least time a template of `shape` (one image, its "same" window) can take on a GPU of
    peak DRAM `bandwidth` (bytes/s) and FP32 `fp32_flops` (FLOP/s), in µs, as a band:

    - the slot: the product spectrum of one template with the image, P x (Q/2 + 1) complex float32
      at the transform size P x Q that computes the window without wrap (the smallest 2,3,5,7-smooth
      size >= image + half a template); a transform this large takes two passes over DRAM, so the
      slot is written once and read once (the image's spectrum, the template and the running maps
      are taken as amortized over the templates: not counted);
    - the transforms: the template's forward real transform (rows: only its nonzero rows; then every
      column of the half spectrum) and the inverse (every column, then the rows of the window only),
      5 n log2 n FLOP per complex transform of n points, half for a real one; the product and the
      reduction's few FLOP per point are left out;
    - memory and transforms each at their peak and not overlapped: low = the pruned transforms
      above, high = the same with the transforms unpruned (every row both ways).
    -> {"low_us", "high_us", "bytes", "flops_low", "flops_high", "P", "Q"}."""
    from xcsuite.peers import fft_axis

    dy0, dy1, dx0, dx1 = shape.shifts()
    P = fft_axis(dy0, dy1, shape.hL, shape.hR).P
    Q = fft_axis(dx0, dx1, shape.wL, shape.wR).P
    half = Q // 2 + 1
    slot = P * half * 8  # complex64
    nbytes = 2.0 * slot
    rows = fft_flops(Q) / 2  # a real row transform of Q points
    cols = half * fft_flops(P)  # every column of the half spectrum
    out_rows = dy1 - dy0 + 1
    low = shape.hR * rows + cols + cols + out_rows * rows
    high = P * rows + cols + cols + P * rows
    mem_us = nbytes / bandwidth * 1e6
    return {"low_us": mem_us + low / fp32_flops * 1e6, "high_us": mem_us + high / fp32_flops * 1e6,
            "bytes": nbytes, "flops_low": low, "flops_high": high, "P": P, "Q": Q}


def reduce_of(shape: Shape) -> str:
    return REDUCE[shape.group]


def series(label: str, variant: str, group: str, **kw) -> Series:
    return Series(label, variant, {"reduce": reduce_of}, group=group, **kw)


LABELS = {
    "xcorr-reduce": "ours: the reduction (peaks2d / peaks1d / max_over_rights)",
    "xcorr-reduce-batched": "ours: max_over_rights in batches of 128 (out=, first_index=)",
    "xcorr-map": "ours: the map alone (correlate2d / correlate1d)",
    "xcorr-map+torch": "ours: the map, then the reduction in PyTorch",
    "torch-reduce": "PyTorch: torch.fft map, then the reduction (2DTM: torch-2dtm's loop, padded)",
    "torch-2dtm-circular": "PyTorch: torch-2dtm / Leopard-EM, circular at the image's size",
}

EXPERIMENT = Experiment(
    name="reductions",
    title="Reductions: peaks and the maximum over the rights against the map and PyTorch",
    paper="not in the paper",
    metric="time",
    plot="reduction_bars",
    xlabel="time per call",
    measures_auto=True,  # xcorr-reduce and the maps are algorithm="auto"
    shapes=SHAPES,
    series=[
        series(LABELS["xcorr-reduce"], "xcorr-reduce", "new"),
        series(LABELS["xcorr-reduce-batched"], "xcorr-reduce-batched", "new", windows=(TM_WINDOW,),
               max_fmas=SIDE_SERIES_MAX_FMAS),
        series(LABELS["xcorr-map"], "xcorr-map", "fft", windows=OTHER_WINDOWS),
        series(LABELS["xcorr-map+torch"], "xcorr-map+torch", "fft", max_fmas=SIDE_SERIES_MAX_FMAS),
        series(LABELS["torch-reduce"], "torch-reduce", "peer"),
        series(LABELS["torch-2dtm-circular"], "torch-2dtm-circular", "peer", windows=(TM_WINDOW,)),
    ],
)
