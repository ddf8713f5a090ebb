"""A rough model of the GPU time each case takes, to print the suite's cost, size the chunks and
drive the progress bar's ETA. Rates are sustained multiply-adds per second on an H200 taken from
ANCHORS.md (the paper's kernels measured there), discounted for unfavourable tunings; they err on
the slow side. The repetition protocol sets a floor: every repetition runs >= min_time."""
from __future__ import annotations

from experiments._spec import Case

LAUNCH_S = 5e-6
# FMA/s when the GPU is saturated (docs/ANCHORS.md: one-to-one 256 and 1-to-32 256, 32-to-32 256).
RATES = {
    "overlap-wise": 1.3e12,
    "warp-per-overlap": 0.9e12,
    "warp-per-overlap-shared": 2.0e12,
    "block-per-overlap": 0.9e12,
    "warp-shuffle": 1.8e12,
    "split-row": 1.8e12,
    "grouped-overlap": 3.0e12,
    "multi-matrix-right": 4.0e12,
    "multi-matrix-right+split-row": 4.0e12,
    "multi-matrix-right+grouped-overlap": 6.0e12,
    "multi-matrix-both": 4.5e12,
    "multi-matrix-both+split-row": 4.5e12,
    "multi-matrix-both+grouped-overlap": 7.0e12,
}
DEFAULT_RATE = 3.0e12  # unknown and new variants: assume no better than the paper's
FAMILY_RATES = {"hopper": 12e12, "baseline": 1.3e12}
# Other libraries (family "peer", xcsuite.peerbench): cuDNN's direct convolution, CuPy's
# correlate2d (a generic direct kernel, one call per pair: PEER_PAIR_S each); torch-fft is an FFT.
PEER_RATES = {"torch-conv2d": 4.0e12, "cupy-correlate2d": 0.5e12}
PEER_PAIR_S = {"cupy-correlate2d": 2e-5}
FFT_PEERS = ("torch-fft",)
PLAN_S = 0.025  # cuFFT plan creation, 1-33 ms (docs/ANCHORS.md)
PROCESS_S = 2.0  # start of one benchmark process (CUDA context, cuFFT load)


def call_seconds(case: Case, family: str | None = None) -> float:
    s = case.shape
    if case.variant.startswith("fft") or case.variant in FFT_PEERS:
        padded = float((s.hL + s.hR) * (s.wL + s.wR))  # the full output's, whatever the window
        t = 3e-5 + s.pairs * padded * 48 / 4e12  # a few memory passes over complex data
        return t + (PLAN_S if case.variant == "fft+plan" else 0.0)
    rate = RATES.get(case.variant) or PEER_RATES.get(case.variant) or FAMILY_RATES.get(family or "", DEFAULT_RATE)
    return LAUNCH_S + s.pairs * PEER_PAIR_S.get(case.variant, 0.0) + case.fmas / rate  # the window's FMAs


def case_seconds(case: Case, repetitions: int, min_time: float, family: str | None = None) -> float:
    """Wall time of one case under the protocol: every repetition runs max(min_time, one call),
    plus a warm-up call, input generation and allocation."""
    t = call_seconds(case, family)
    s = case.shape
    setup = 0.05 + 4.0 * (s.nL * s.hL * s.wL + s.nR * s.hR * s.wR + s.pairs * (s.hL + s.hR) * (s.wL + s.wR)) / 2e9
    return setup + t + repetitions * max(min_time * 1.15, t * 1.05)


def format_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"
