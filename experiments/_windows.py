"""What the window experiments (windows.py, piv.py, autocorr.py, window_table.py) share: their
series, with one label per algorithm in all four, and the caps that keep them to minutes.

A series runs a windowed shape only where the build's registry declares that window for its
variant (`xcorr list --json` "windows"; the peers' from `python -m xcsuite.peerbench list --json`):
the others are left out with a reason, as an unsupported form is. The figures and tables of these
experiments compare time per call + finish_time (fft's untimed crop to the output layout, 0 for
the variants that time everything): metric "time_with_finish".
"""
from xcsuite.spec import Series

# This project's direct kernels (~1e13 FMA/s): at most ~30 ms per call. The crossover with FFT lies
# one to two orders of magnitude below (an FFT of a 2048 x 2048 pair takes well under 1 ms), so
# the curves still show where direct stops paying off.
DIRECT_MAX_FMAS = 3e11
# The baseline (overlap-wise, ~1.3e12 FMA/s) and CuPy's generic direct kernel: ~20 ms per call.
SLOW_MAX_FMAS = 2e10
# CuPy's correlate2d (SLOW_MAX_FMAS on the window too) counted as the work it does: the full output
# where the window is no SciPy mode (it computes that, the peer crops it: Shape.work_fmas). 1e11 keeps
# the batch of 4096 64 x 64 pairs (6.9e10, one call per pair: 1-3 s a call, which the peer's 2 s time
# cap decides per GPU) and the 256 panel (4.3e9), and leaves out 1024 and 2048 (1.1e12 and 1.8e13:
# 2.4 and 38 s a call on an H100, each refused by the time cap only after a pilot of two such calls).
CUPY_MAX_WORK_FMAS = 1e11
# fft-fused holds a pair's padded spectra in shared memory or in a global staging buffer: outputs
# up to 1023 x 1023, i.e. N x N pairs up to 512.
FFT_FUSED_MAX_SIZE = 512
# small-direct keeps an output row of a pair in one block: sizes up to ~100.
SMALL_DIRECT_MAX_SIZE = 96
# small-window computes windows of at most 1089 shifts per pair (±16) (its make() refuses more).
SMALL_WINDOW_MAX_SHIFTS = 1089
# block-per-pair holds a few pairs' staged inputs and whole windows in one block: windows of at most
# 4096 shifts (its registry entry), pairs up to 64 x 64 (larger ones need more shared memory than it
# is meant for).
BLOCK_PER_PAIR_MAX_SHIFTS = 4096
BLOCK_PER_PAIR_MAX_SIZE = 64

LABELS = {
    "overlap-wise": "overlap-wise (baseline)",
    "register-tiled": "register-tiled (new)",
    "small-direct": "small-direct (new)",
    "small-window": "small-window (new, few shifts)",
    "block-per-pair": "block-per-pair (new, many small pairs)",
    "tensor-wgmma": "tensor-wgmma (new, 3xTF32 warpgroup MMA)",
    "fft": "fft (cuFFT, plans reused)",
    "fft+plan": "fft+plan (cuFFT, plan timed)",
    "fft-fused": "fft-fused (new, fused FFT)",
    "torch-conv2d": "torch-conv2d (PyTorch, cuDNN)",
    "torch-conv2d-tf32": "torch-conv2d-tf32 (PyTorch, cuDNN, TF32)",
    "torch-fft": "torch-fft (PyTorch FFT)",
    "cupy-correlate2d": "cupy-correlate2d (CuPy)",
    "npp-normlevel": "npp-normlevel (NPP)",
}
# How each variant computes: direct (over the window's shifts) or by FFT (the full output, then
# the window): the figures' crossover compares the best of each kind among this project's series.
FFT_VARIANTS = ("fft", "fft+plan", "fft-fused", "torch-fft")


def method(variant: str) -> str:
    return "fft" if variant in FFT_VARIANTS else "direct"


def series(variant: str, **kw) -> Series:
    """The series of `variant` with its label and caps (keyword arguments override them)."""
    caps = {"overlap-wise": dict(params={"warps": 4}, max_fmas=SLOW_MAX_FMAS),
            "register-tiled": dict(max_fmas=DIRECT_MAX_FMAS),
            "small-direct": dict(max_fmas=DIRECT_MAX_FMAS, max_size=SMALL_DIRECT_MAX_SIZE),
            "small-window": dict(max_fmas=DIRECT_MAX_FMAS, max_shifts=SMALL_WINDOW_MAX_SHIFTS),
            "block-per-pair": dict(max_fmas=DIRECT_MAX_FMAS, max_shifts=BLOCK_PER_PAIR_MAX_SHIFTS,
                                   max_size=BLOCK_PER_PAIR_MAX_SIZE),
            "tensor-wgmma": dict(max_fmas=DIRECT_MAX_FMAS),
            "fft-fused": dict(max_size=FFT_FUSED_MAX_SIZE),
            "torch-conv2d": dict(max_fmas=DIRECT_MAX_FMAS),
            "torch-conv2d-tf32": dict(max_fmas=DIRECT_MAX_FMAS),
            "cupy-correlate2d": dict(max_fmas=SLOW_MAX_FMAS, max_work_fmas=CUPY_MAX_WORK_FMAS)}.get(variant, {})
    return Series(LABELS[variant], variant, **{**caps, **kw})


PEERS = ("torch-conv2d", "torch-fft", "cupy-correlate2d")


def peer_series() -> list:
    return [series(v) for v in PEERS]


# The normalized experiments (zncc_frames, zncc_match, zncc_autocorr): this project's
# variants that declare windows, each at its defaults with its caps (the caps count the raw run's
# multiply-adds; the normalization adds O(output + input) work). A shape whose window a variant
# does not declare is left out at expansion with a reason. The peers that normalize
# (xcsuite.peerbench normalize=: torch-fft with float64 summed-area tables, torch-conv2d with
# avg_pool2d / conv2d box sums) stand beside them; cupy-correlate2d computes no normalization (its
# registry entry says so and expansion leaves it out with a reason).
OWN_WINDOWED = ("register-tiled", "small-direct", "tensor-wgmma", "overlap-wise", "fft", "fft+plan", "fft-fused")
NORMALIZED_PEERS = ("torch-conv2d", "torch-fft")


def normalized_series(*variants: str) -> list:
    """The series of `variants` (default: all of OWN_WINDOWED and NORMALIZED_PEERS); an experiment
    names those that can run its shapes, as the suite's definitions expand without a series left
    empty."""
    assert set(variants) <= set(OWN_WINDOWED + NORMALIZED_PEERS), variants
    return [series(v) for v in (variants or OWN_WINDOWED + NORMALIZED_PEERS)]
