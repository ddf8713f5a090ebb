"""Template matching with ZNCC: one image, one template (one-to-one), the valid
window (every placement of the template inside the image), normalize=zncc, as OpenCV's
TM_CCOEFF_NORMED and MATLAB's normxcorr2 (valid part) compute it.

Images 1024 x 1024 and 4096 x 4096; templates 16, 32, 64, 128 and 256 square. Series: this
project's direct kernels that declare the valid window and run one-to-one at these sizes
(register-tiled; the baseline overlap-wise where its cap allows) against fft and fft+plan.
Not here: fft-fused (outputs up to 1023 x 1023, pairs up to 512), small-direct (up to ~100) and
tensor-wgmma (no one-to-one). The direct kernels skip calls above 3e11 raw multiply-adds
(the baseline above 2e10): the 4096 image with the largest templates is FFT only. Peers
(xcsuite.peerbench normalize=zncc): torch-fft (FFT of the mean-subtracted inputs, float64
summed-area tables) and torch-conv2d (the textbook formula: conv2d for the numerator, avg_pool2d /
conv2d box sums, as examples/template_matching.py's torch formula), the latter under the direct
kernels' 3e11 cap; cupy-correlate2d computes no ZNCC. npp-normlevel: NVIDIA NPP's
nppiCrossCorrValid_NormLevel_32f_C1R_Ctx (its ZNCC in valid mode, exactly this window; one call per
image through ctypes, the means subtracted first), under the same 3e11 cap (its kernel is direct as
far as is known); left out with a reason where NPP does not load. Metric: time per call +
finish_time against the template's side, a line per series, a panel per image.
"""
from xcsuite.spec import Experiment, Shape
from experiments._windows import DIRECT_MAX_FMAS, normalized_series, series

IMAGES = (1024, 4096)
TEMPLATES = (16, 32, 64, 128, 256)

EXPERIMENT = Experiment(
    name="zncc_match",
    title="Template matching: ZNCC of one image and one template, valid window",
    paper="Issue #21 (not in the paper)",
    metric="time_with_finish",
    plot="template_lines",
    xlabel="template side (square, pixels)",
    shapes=[Shape("one-to-one", n, n, t, t, group=f"image {n} x {n}, template {t} x {t}, ZNCC",
                  window="valid", normalize="zncc") for n in IMAGES for t in TEMPLATES],
    series=normalized_series("register-tiled", "overlap-wise", "fft", "fft+plan", "torch-fft", "torch-conv2d")
    + [series("npp-normlevel", max_fmas=DIRECT_MAX_FMAS)],
)
