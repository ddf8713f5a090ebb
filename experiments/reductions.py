"""Reductions: peaks and the maximum over the rights, against the map they replace and
PyTorch, in the same run, everything called as a user calls it from Python (xcsuite/reduce_peers.py,
run by xcsuite.peerbench with its protocol: warm-up and a planted-answer check before timing).

Cases (the issue's "Experiments and targets"):
  PIV            8192 window pairs of 32 x 32 (n-to-mn, a right per left), max_shift 8, k = 1,
                 gaussian sub-pixel fit
  32-to-32       n-to-m 32 x 32 of 256 x 256, full window, k = 1 (parabolic)
  template match ZNCC of 64 templates of 31 x 31 in one 1024 x 1024 image (one-to-many), valid
                 window, top 5 with min_distance 15 (parabolic)
  2-D template matching  one 4096 x 4096 image, templates 384 x 384, the window "same" (a value per
                 image pixel, template centred: the cryo-EM tools' output grid, without their
                 circular wrap), running max, argmax, sum and sum of squares over 2000 templates,
                 and over 64 (the quick size, and the memory's independence of the count)
  ambient noise  signals_ambient's shape: 64 x 64 stations of 144000 samples, lags ±2400, k = 1
                 through peaks1d (parabolic)
Series: xcorr-reduce (our reduction, algorithm auto), xcorr-reduce-batched (2DTM only: the rights
fed in batches of 128 with out= and first_index=), xcorr-map (our map into a reused tensor, not on
2DTM: 2000 maps of 4096 x 4096 do not fit), xcorr-map+torch (our map, then the reduction in
PyTorch; 2DTM: batches of 16), torch-reduce (torch.fft map, then the reduction in PyTorch; 2DTM:
the torch-2dtm / Leopard-EM loop padded to our window) and torch-2dtm-circular (2DTM only: that
loop at the image's own size, circular, as the tools run it: other values within 384 of the edges).
Metric: time per call (for 2DTM one call is every template: templates/s = count / time). The
targets and whether they hold: python -m xcsuite table (results/<gpu>/reductions_table.md).
Quick (smoke) run: python -m xcsuite run-experiments reductions --quick --max-fmas 2e14 (every case but
the 2000-template one; --quick's default cap of 1e11 direct-equivalent FMAs would keep only PIV and
ZNCC).
"""
from xcsuite.spec import Experiment, Series, Shape

PIV_PAIRS, PIV_SIDE, PIV_SHIFT = 8192, 32, 8
NTOM, NTOM_SIDE = 32, 256
IMAGE, TEMPLATE, TEMPLATES, TOP, MIN_DISTANCE = 1024, 31, 64, 5, 15
TM_IMAGE, TM_TEMPLATE, TM_TEMPLATES, TM_QUICK = 4096, 384, 2000, 64
STATIONS, SAMPLES, MAX_LAG = 64, 144_000, 2400

PIV = f"PIV: {PIV_PAIRS} pairs of {PIV_SIDE} x {PIV_SIDE}, ±{PIV_SHIFT}, k = 1, gaussian fit"
NTOM_GROUP = f"{NTOM}-to-{NTOM} of {NTOM_SIDE} x {NTOM_SIDE}, full, k = 1"
ZNCC = (f"ZNCC template matching: {TEMPLATES} templates {TEMPLATE} x {TEMPLATE} in {IMAGE} x {IMAGE}, valid, "
        f"top {TOP}, min_distance {MIN_DISTANCE}")


def tm_group(n: int) -> str:
    return (f"2-D template matching: {TM_IMAGE} x {TM_IMAGE} image, {n} templates {TM_TEMPLATE} x {TM_TEMPLATE}, "
            "same window, max / argmax / sum / sum of squares")


AMBIENT = f"ambient noise: {STATIONS} x {STATIONS} stations, {SAMPLES} samples, lags ±{MAX_LAG}, k = 1"

# The reduction of each case (reduce_peers.REDUCTIONS), by its panel.
REDUCE = {PIV: "peaks-k1-gaussian", NTOM_GROUP: "peaks-k1-parabolic", ZNCC: f"peaks-k{TOP}-md{MIN_DISTANCE}-parabolic",
          tm_group(TM_TEMPLATES): "max-stats", tm_group(TM_QUICK): "max-stats", AMBIENT: "peaks-k1-parabolic"}

SHAPES = [
    Shape("n-to-mn", PIV_SIDE, PIV_SIDE, PIV_SIDE, PIV_SIDE, PIV_PAIRS, PIV_PAIRS, group=PIV, window=f"max_shift={PIV_SHIFT}"),
    Shape("n-to-m", NTOM_SIDE, NTOM_SIDE, NTOM_SIDE, NTOM_SIDE, NTOM, NTOM, group=NTOM_GROUP),
    Shape("one-to-many", IMAGE, IMAGE, TEMPLATE, TEMPLATE, 1, TEMPLATES, group=ZNCC, window="valid", normalize="zncc"),
    Shape("one-to-many", TM_IMAGE, TM_IMAGE, TM_TEMPLATE, TM_TEMPLATE, 1, TM_QUICK, group=tm_group(TM_QUICK), window="same"),
    Shape("one-to-many", TM_IMAGE, TM_IMAGE, TM_TEMPLATE, TM_TEMPLATE, 1, TM_TEMPLATES, group=tm_group(TM_TEMPLATES),
          window="same"),
    Shape("n-to-m", 1, SAMPLES, 1, SAMPLES, STATIONS, STATIONS, group=AMBIENT, window=f"shifts=0:0,{-MAX_LAG}:{MAX_LAG}"),
]
TM_WINDOW = "same"  # the 2DTM shapes only: the series that run on them alone, or never, say so by window
OTHER_WINDOWS = tuple(dict.fromkeys(s.window for s in SHAPES if s.window != TM_WINDOW))


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
    title="Reductions (issue #67): peaks and the maximum over the rights against the map and PyTorch",
    paper="Issue #67 (not in the paper)",
    metric="time",
    plot="reduction_bars",
    xlabel="time per call",
    measures_auto=True,  # xcorr-reduce and the maps are algorithm="auto"
    shapes=SHAPES,
    series=[
        series(LABELS["xcorr-reduce"], "xcorr-reduce", "new"),
        series(LABELS["xcorr-reduce-batched"], "xcorr-reduce-batched", "new", windows=(TM_WINDOW,)),
        series(LABELS["xcorr-map"], "xcorr-map", "fft", windows=OTHER_WINDOWS),
        series(LABELS["xcorr-map+torch"], "xcorr-map+torch", "fft"),
        series(LABELS["torch-reduce"], "torch-reduce", "peer"),
        series(LABELS["torch-2dtm-circular"], "torch-2dtm-circular", "peer", windows=(TM_WINDOW,)),
    ],
)
