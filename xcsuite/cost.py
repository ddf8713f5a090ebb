"""A rough model of the GPU time each case takes, to print the suite's cost, size the chunks and
drive the progress bar's ETA. Rates are sustained multiply-adds per second on an H200 taken from
ANCHORS.md (the paper's kernels measured there), discounted for unfavourable tunings; they err on
the slow side. The repetition protocol sets a floor: every repetition runs >= min_time."""
from __future__ import annotations

from xcsuite import rules
from xcsuite.spec import Case
from xcsuite.peers import CHECK_SAMPLES, FULL_CHECK_FMAS_CPU, cpu_reference_fmas  # the peers' check

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
# Variants that give each output one thread summing its overlap alone: a call lasts at least the
# largest overlap at this many products per second, however few the outputs (a window of a few
# shifts of a large image: nine threads of 2048 x 2048 products each, latency-bound, ~0.13 s on an
# H100 where the saturated rate says 0.03 ms). The rate errs slow (notes/multi-gpu.md, session 58).
SERIAL_RATES = {"overlap-wise": 3.5e7}
FAMILY_RATES = {"hopper": 12e12, "baseline": 1.3e12}
# Other libraries (family "peer", xcsuite.peerbench): cuDNN's direct convolution, CuPy's
# correlate2d (a generic direct kernel, one call per pair: PEER_PAIR_S each); torch-fft is an FFT.
# npp-normlevel (NPP's nppiCrossCorrValid_NormLevel, one call per pair): a rough guess, not measured
# yet; assumed a direct kernel at a third of cuDNN's rate, plus ~10 us per call (the ctypes loop).
PEER_RATES = {"torch-conv2d": 4.0e12, "torch-conv2d-tf32": 8.0e12, "cupy-correlate2d": 0.5e12, "npp-normlevel": 1.0e12}
PEER_PAIR_S = {"cupy-correlate2d": 2e-5, "npp-normlevel": 1e-5}
# The reductions' variants (xcsuite/reduce_peers.py, experiments/reductions.py): FFT maps and a pass
# over them, as torch-fft's rate; a few seconds of check (planted inputs) and pilot each.
REDUCTION_VARIANTS = ("xcorr-reduce", "xcorr-reduce-batched", "xcorr-map", "xcorr-map+torch", "torch-reduce",
                      "torch-2dtm-circular")
FFT_PEERS = ("torch-fft",) + REDUCTION_VARIANTS
# The reductions' calls move about twice torch-fft's bytes per padded point: the H200's 2-D template
# matching (4096 x 4096 image, 384 x 384 templates) takes 400-700 µs a template in every series,
# 1,400-2,600 templates/s; 100 bytes a point of (4096 + 384)^2 gives 500 µs.
REDUCTION_BYTES_PER_POINT = 100
# A peer's fixed cost per case beyond the protocol. torch-fft, CuPy and NPP: ~0.5 s (plans, pilot,
# the CPU check of a small case) and, past FULL_CHECK_FMAS_CPU, the float64 check of up to
# CHECK_SAMPLES outputs on the GPU, each summing its overlap (xcsuite/peerbench.py, "Protocol"):
# 2.8 s for 16641 outputs of 2048 x 2048 (7e10 products). Fitted on an H100's quick runs of the
# window and normalized groups (82 torch-fft cases: 62 s modelled, 52 s measured; session 59).
# The reductions' variants: a few seconds each (check with planted inputs, pilot), not fitted.
PEER_CASE_S = {"torch-fft": 0.5, "cupy-correlate2d": 0.5, "npp-normlevel": 0.5, **{v: 3.0 for v in REDUCTION_VARIANTS}}
CHECKED_PEERS = ("torch-fft", "cupy-correlate2d", "npp-normlevel")
CHECK_RATE = 2.5e10  # float64 products a second of the sampled check
# torch-conv2d's cudnn.benchmark tries each of cuDNN's algorithms once on a new shape, the slow
# ones included, so its set-up grows with the convolution's work: 0.5 s + FMAs / 1e10 (its check
# included) fits the H100's quick shapes (0.2-8 s from 6e5 to 7e10 FMAs, within 1.5x; session 59)
# and reaches the ~20-25 s that the H200's full-protocol shapes took, which bound it.
CUDNN_TUNE_S, CUDNN_TUNE_RATE, CUDNN_TUNE_MAX_S = 0.5, 1e10, 25.0
CUDNN_PEERS = ("torch-conv2d", "torch-conv2d-tf32")


def peer_case_seconds(case: Case) -> float:
    """A peer's fixed cost per case beyond the protocol (0 for ours)."""
    s = case.shape
    if case.variant in CUDNN_PEERS:
        return min(CUDNN_TUNE_MAX_S, CUDNN_TUNE_S + case.work_fmas / CUDNN_TUNE_RATE)
    fixed = PEER_CASE_S.get(case.variant, 0.0)
    if case.variant not in CHECKED_PEERS or cpu_reference_fmas(
            s.pairs, s.hL, s.wL, s.hR, s.wR, s.shifts(), s.normalize) <= FULL_CHECK_FMAS_CPU:
        return fixed  # ours, the reductions', or a check on the CPU: the fixed cost alone
    rows, cols = s.out_shape
    return fixed + min(CHECK_SAMPLES, s.pairs * rows * cols) * min(s.hL, s.hR) * min(s.wL, s.wR) / CHECK_RATE


PLAN_S = 0.025  # cuFFT plan creation, 1-33 ms (docs/ANCHORS.md)
PROCESS_S = 2.0  # start of one benchmark process (CUDA context, cuFFT load)


# One dimension of fft's transform for the shifts s0..s1 (registry.cpp's transform_need): m + n - 1
# for the full window, 0 when no shift overlaps.
fft_need = rules.transform_need


def fft_points(case: Case) -> float:
    """Points of a pair's padded transform: fft and fft+plan size it from the window."""
    s = case.shape
    if s.full or case.variant not in ("fft", "fft+plan"):
        return float((s.hL + s.hR) * (s.wL + s.wR))
    dy0, dy1, dx0, dx1 = s.shifts()
    return float(fft_need(dy0, dy1, s.hL, s.hR) * fft_need(dx0, dx1, s.wL, s.wR))


def call_seconds(case: Case, family: str | None = None) -> float:
    s = case.shape
    if case.variant.startswith("fft") or case.variant in FFT_PEERS:  # torch-fft: the same cuFFT passes
        padded = fft_points(case)
        per_point = REDUCTION_BYTES_PER_POINT if case.variant in REDUCTION_VARIANTS else 48
        t = 3e-5 + s.pairs * padded * per_point / 4e12  # a few memory passes over complex data
        return t + (PLAN_S if case.variant == "fft+plan" else 0.0)
    rate = RATES.get(case.variant) or PEER_RATES.get(case.variant) or FAMILY_RATES.get(family or "", DEFAULT_RATE)
    t = case.work_fmas / rate  # the FMAs it does
    if case.variant in SERIAL_RATES:
        t = max(t, min(s.hL, s.hR) * min(s.wL, s.wR) / SERIAL_RATES[case.variant])  # the largest overlap
    return LAUNCH_S + s.pairs * PEER_PAIR_S.get(case.variant, 0.0) + t


def case_seconds(case: Case, repetitions: int, min_time: float, family: str | None = None) -> float:
    """Wall time of one case under the protocol: every repetition runs max(min_time, one call),
    plus a warm-up call, input generation and allocation."""
    t = call_seconds(case, family)
    s = case.shape
    # the outputs allocated: every pair's map, but for the reductions' variants, which keep at most a
    # batch of maps (2-D template matching's thousands of 4096 x 4096 maps are never all made)
    outputs = min(s.pairs, 16) if case.variant in REDUCTION_VARIANTS else s.pairs
    setup = 0.05 + 4.0 * (s.nL * s.hL * s.wL + s.nR * s.hR * s.wR + outputs * (s.hL + s.hR) * (s.wL + s.wR)) / 2e9
    return setup + peer_case_seconds(case) + t + repetitions * max(min_time * 1.15, t * 1.05)


def format_seconds(s: float) -> str:
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"
