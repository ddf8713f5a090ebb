"""The vocabulary of the experiment definitions (experiments/<name>.py) and their expansion into
benchmark cases.

An experiment is declarative: a list of problem shapes (form, sizes, stack counts) and a list of
series (one algorithm variant with fixed parameters, optionally a grid of parameters to tune over,
shown as one line in a figure). `expand(experiment, registry)` turns it into concrete cases for
the `xcorr_bench` binary, checked against the registry that the build actually holds
(`xcorr list --json`): unknown variants, unsupported forms and parameter values that were not
instantiated are left out with a reason instead of making the binary refuse the whole run.

The suite's data model: the experiment definitions (experiments/) are written in it, and the
xcsuite package (the runner, the figures, the tables, the result files) and the tests read it.
Nothing here talks to a GPU or reads files, and it imports nothing of the suite but xcsuite.rules
(the library's counting rules).
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Mapping, Sequence, Union

from xcsuite import rules

FORMS = ("one-to-one", "one-to-many", "n-to-mn", "n-to-m")

# Sizes of the paper's figures (docs/EXPERIMENTS.md).
SIZES_ONE_TO_ONE = (16, 24, 32, 48, 64, 96, 128, 192, 256)
SIZES_MANY = (16, 32, 64, 128, 256)
SIZES_TABLE = (16, 32, 64, 128, 192, 256, 384, 512)  # Table 1 columns; 512 stands for "beyond"
SIZES_FFT_CROSSING = (384, 512)  # appended to comparison figures: fft+plan overtakes up there

# Cases whose one call needs more multiply-adds than this are not measured for the slow
# definition-based kernels (see each experiment for which series carry the cap). The baseline
# runs at ~1.3e12 FMA/s on the H200 (docs/ANCHORS.md): 2e12 FMAs is ~1.5 s per call, so 10
# repetitions stay under half a minute.
BASELINE_MAX_FMAS = 2e12
# The paper's kernels reach 2.5e12-1e13 FMA/s: 2e13 FMAs is 2-8 s per call. Above it fft+plan
# (a few ms) is faster by two to three orders of magnitude, so nothing is lost for Table 1.
DEFINITION_MAX_FMAS = 2e13
# This project's kernels: measured up to 32-to-32 at 384 (2.2e13); 32-to-32 at 512 (7e13 FMAs,
# seconds per call even at peak) is left to fft.
NEW_MAX_FMAS = 3e13
# Saturated micro-benchmarks (Fig. 15, 18, 21) run many copies of a problem in one grid; the
# paper used 4000 copies (128-to-128 for Fig. 21) at every size. Times per FMA only need the GPU
# saturated, so at the largest sizes we run fewer copies: at most this many FMAs per call,
# which still leaves >= 10^8 output elements per call (hundreds of waves on 132 SMs).
SATURATED_MAX_FMAS = 2e12

# tune="*" sweeps the full grid of a variant's instantiated values up to this many combinations;
# beyond, it varies one parameter at a time around the defaults.
MAX_FULL_GRID = 24

ParamValue = Union[str, int, Callable[["Shape"], Union[str, int, None]]]

# Output windows (docs/CONVENTIONS.md, "Output windows"), as lib/core.cpp parses and resolves
# them: a Shape's window is "full", "valid", "same", "max_shift=SY[,SX]" or "shifts=DY0:DY1,DX0:DX1"
# and resolves to a rectangle of shifts (dy0, dy1, dx0, dx1), inclusive.
WINDOW_MODES = ("full", "valid", "same")
MAX_SHIFT = (1 << 30) - 1  # core.cpp's kMaxShift: a shift 2^30 or more away from 0 is refused
MAX_OUT_ELEMS = 1 << 30  # one output matrix at most (Problem::check)
# Normalizations (docs/CONVENTIONS.md, "Normalization"; xcorr_bench's case key normalize=): any variant,
# form and window; "none" is the raw correlation (the key is then left out of the case line and name).
NORMALIZATIONS = ("none", "zncc", "zero-lag")
# The window kinds a variant declares (`xcorr list --json` "windows"); a registry without them
# (files written before windows existed) declares the full output only.
WINDOW_KINDS = ("full", "valid", "same", "max-shift", "shifts")
# Variants whose call computes the full output and crops it to the window, unless the window's
# rectangle is one of SciPy's modes (full, same, valid), which they compute as such: CuPy's
# correlate2d (xcsuite/peers.py, CupyCorrelate2d), called as a user calls it. Their work does not
# shrink with a max-shift window: Series.max_work_fmas, the quick suite's --max-fmas and the cost
# model count the full output's (Shape.work_fmas); their FLOPS count the window's (Shape.fmas), the
# useful work.
FULL_THEN_CROP = frozenset({"cupy-correlate2d"})


def _window_int(what: str, text: str, lo: int, hi: int) -> int:
    """core.cpp's parse_integer: an optional '-' and digits, within [lo, hi]."""
    if not re.fullmatch(r"-?[0-9]+", text) or not lo <= int(text) <= hi:
        raise ValueError(f"{what}: not an integer from {lo} to {hi}: {text!r}")
    return int(text)


def parse_window(window: str) -> tuple[str, tuple | None]:
    """'full' | 'valid' | 'same' | 'max_shift=SY[,SX]' | 'shifts=DY0:DY1,DX0:DX1' -> (kind, the
    given rectangle or None), kind one of WINDOW_KINDS; ValueError names what is wrong."""
    if window in WINDOW_MODES:
        return window, None
    key, eq, value = window.partition("=")
    if eq and key == "max_shift":
        sy, _, sx = value.partition(",")
        y = _window_int("max_shift=SY[,SX]", sy, 0, MAX_SHIFT)
        x = _window_int("max_shift=SY[,SX]", sx if "," in value else sy, 0, MAX_SHIFT)
        return "max-shift", (-y, y, -x, x)
    if eq and key == "shifts":
        m = re.fullmatch(r"([^:,]+):([^:,]+),([^:,]+):([^:,]+)", value)
        if not m:
            raise ValueError(f"shifts= takes DY0:DY1,DX0:DX1 (integers, e.g. -4:4,0:7), got {value!r}")
        w = tuple(_window_int("shifts=DY0:DY1,DX0:DX1", t, -MAX_SHIFT, MAX_SHIFT) for t in m.groups())
        if w[0] > w[1] or w[2] > w[3]:
            raise ValueError(f"empty window {value}: the first shift of a range comes after its last")
        return "shifts", w
    raise ValueError(f"unknown window {window!r}: full, valid, same, max_shift=SY[,SX] or shifts=DY0:DY1,DX0:DX1")


def full_shifts(hL: int, wL: int, hR: int, wR: int) -> tuple:
    return (-(hR - 1), hL - 1, -(wR - 1), wL - 1)


def valid_shifts(hL: int, wL: int, hR: int, wR: int) -> tuple | None:
    """The shifts where one matrix lies wholly inside the other (either may be the larger), or
    None where neither contains the other (scipy's mode='valid' refuses the same)."""
    dh, dw = hL - hR, wL - wR
    if (dh < 0 < dw) or (dh > 0 > dw):
        return None
    return (min(0, dh), max(0, dh), min(0, dw), max(0, dw))


def same_shifts(hL: int, wL: int, hR: int, wR: int) -> tuple:
    """scipy's mode='same': the hL x wL block of the full output centred on it, an even right one
    shift towards the positive side."""
    dy0, dx0 = -((hR - 1) // 2), -((wR - 1) // 2)
    return (dy0, dy0 + hL - 1, dx0, dx0 + wL - 1)


# Sum over shifts s0..s1 of one dimension's overlap length (core.cpp's overlap_total), in closed form.
overlap_total = rules.overlap_total


@dataclass(frozen=True)
class Shape:
    """One problem shape: sizes of a left and a right matrix, the stack counts (nL, nR as in
    docs/CONVENTIONS.md: for n-to-mn nR = N*M), the output window ("full", "valid", "same",
    "max_shift=SY[,SX]" or "shifts=DY0:DY1,DX0:DX1"; checked here, resolved by shifts()) and the
    normalization (NORMALIZATIONS: "none", the raw correlation, or "zncc" | "zero-lag", the case
    key normalize= and the benchmark name's /norm:MODE segment)."""

    form: str
    hL: int
    wL: int
    hR: int
    wR: int
    nL: int = 1
    nR: int = 1
    group: str = ""  # panel label; computed from the counts when empty
    window: str = "full"
    normalize: str = "none"

    def __post_init__(self):
        if self.normalize not in NORMALIZATIONS:
            raise ValueError(f"unknown normalization {self.normalize!r}: one of {', '.join(NORMALIZATIONS)}")
        if self.form not in FORMS:
            raise ValueError(f"unknown form {self.form!r}")
        if self.form == "one-to-one" and (self.nL, self.nR) != (1, 1):
            raise ValueError("one-to-one takes nL = nR = 1")
        if self.form == "one-to-many" and self.nL != 1:
            raise ValueError("one-to-many takes nL = 1")
        if self.form == "n-to-mn" and self.nR % self.nL:
            raise ValueError("n-to-mn needs nR = N*M, a multiple of nL")
        if self.window != "full":
            kind, _ = parse_window(self.window)  # a malformed window raises here
            if kind == "valid" and valid_shifts(self.hL, self.wL, self.hR, self.wR) is None:
                raise ValueError(f"no valid window: neither matrix is at least as large as the other in both "
                                 f"dimensions (left {self.hL}x{self.wL}, right {self.hR}x{self.wR})")
            dy0, dy1, dx0, dx1 = self.shifts()
            if (dy1 - dy0 + 1) * (dx1 - dx0 + 1) > MAX_OUT_ELEMS:
                raise ValueError(f"window {self.window}: one output matrix would exceed 2^30 elements")

    # --- constructors -----------------------------------------------------------------------
    @staticmethod
    def one_to_one(size: int, group: str = "", window: str = "full", normalize: str = "none") -> "Shape":
        return Shape("one-to-one", size, size, size, size, 1, 1, group, window, normalize)

    @staticmethod
    def one_to_many(size: int, rights: int, group: str = "", window: str = "full") -> "Shape":
        return Shape("one-to-many", size, size, size, size, 1, rights, group, window)

    @staticmethod
    def n_to_m(size: int, lefts: int, rights: int, group: str = "", window: str = "full") -> "Shape":
        return Shape("n-to-m", size, size, size, size, lefts, rights, group, window)

    @staticmethod
    def n_to_mn(size: int, lefts: int, rights_per_left: int, group: str = "", window: str = "full") -> "Shape":
        return Shape("n-to-mn", size, size, size, size, lefts, lefts * rights_per_left, group, window)

    # --- the window -------------------------------------------------------------------------
    def shifts(self) -> tuple:
        """The window's rectangle (dy0, dy1, dx0, dx1), inclusive, resolved for these sizes as
        lib/core.cpp's WindowRequest::resolve does."""
        sizes = (self.hL, self.wL, self.hR, self.wR)
        kind, given = parse_window(self.window)
        if kind == "full":
            return full_shifts(*sizes)
        if kind == "valid":
            w = valid_shifts(*sizes)
            if w is None:
                raise ValueError(f"no valid window for left {self.hL}x{self.wL}, right {self.hR}x{self.wR}")
            return w
        if kind == "same":
            return same_shifts(*sizes)
        return given

    @property
    def full(self) -> bool:
        """The window is the full output's rectangle, however it was named (xcorr_bench then runs
        and names the full case)."""
        return self.window == "full" or self.shifts() == full_shifts(self.hL, self.wL, self.hR, self.wR)

    @property
    def shifts_text(self) -> str:
        """'dy0:dy1,dx0:dx1' (Window::text, the benchmark name's /shifts: segment), '' when full."""
        if self.full:
            return ""
        dy0, dy1, dx0, dx1 = self.shifts()
        return f"{dy0}:{dy1},{dx0}:{dx1}"

    @property
    def out_shape(self) -> tuple:
        """(rows, columns) of one output matrix."""
        dy0, dy1, dx0, dx1 = self.shifts()
        return (dy1 - dy0 + 1, dx1 - dx0 + 1)

    @property
    def half_width(self) -> int:
        """The largest |shift| of the window (S for max_shift=S; hL - 1 for the full output of
        equal sizes): the x axis of the window sweeps."""
        return max(abs(v) for v in self.shifts())

    def window_line(self) -> str:
        """The case line's window key (xcorr_bench --case): '' for the full output."""
        if self.full:
            return ""
        return f"window={self.window}" if self.window in WINDOW_MODES else self.window

    def normalize_line(self) -> str:
        """The case line's normalize key: '' for the raw correlation (none)."""
        return "" if self.normalize == "none" else f"normalize={self.normalize}"

    # --- derived quantities -----------------------------------------------------------------
    @property
    def size(self) -> int | None:
        """N for N x N problems with equal left and right sizes, else None."""
        return self.hL if self.hL == self.wL == self.hR == self.wR else None

    @property
    def pairs(self) -> int:
        return rules.out_count(self.form, self.nL, self.nR)

    @property
    def fmas(self) -> float:
        """Multiply-adds of one call: per pair the sum of the overlap areas over the window's
        shifts (Window::fmas), hL*wL*hR*wR for the full output."""
        if self.window == "full":
            return self.full_fmas
        dy0, dy1, dx0, dx1 = self.shifts()
        return float(self.pairs) * float(overlap_total(dy0, dy1, self.hL, self.hR)
                                         * overlap_total(dx0, dx1, self.wL, self.wR))

    @property
    def full_fmas(self) -> float:
        """Multiply-adds of one call over the full output: hL*wL*hR*wR per pair."""
        return float(self.pairs) * self.hL * self.wL * self.hR * self.wR

    @property
    def scipy_mode(self) -> bool:
        """The window's rectangle is that of SciPy's full, same or valid mode."""
        sizes = (self.hL, self.wL, self.hR, self.wR)
        return self.shifts() in (full_shifts(*sizes), same_shifts(*sizes), valid_shifts(*sizes))

    def work_fmas(self, variant: str) -> float:
        """Multiply-adds one call of `variant` does: the window's (fmas), or the full output's for a
        variant of FULL_THEN_CROP on a window that is no SciPy mode. The caps count this."""
        return self.full_fmas if variant in FULL_THEN_CROP and not self.scipy_mode else self.fmas

    @property
    def rights_per_left(self) -> int:
        return self.nR // self.nL if self.form == "n-to-mn" else self.nR

    @property
    def count_label(self) -> str:
        return count_label(self.form, self.nL, self.nR)

    @property
    def panel(self) -> str:
        return self.group or self.count_label

    def dims(self) -> tuple:
        return (self.form, self.hL, self.wL, self.hR, self.wR, self.nL, self.nR)


def window_is(kind: str, shape: Shape) -> bool:
    """Whether `shape`'s shifts are the window of that kind for its sizes (core.cpp's window_is:
    max-shift means symmetric about (0, 0), shifts any rectangle)."""
    w = shape.shifts()
    sizes = (shape.hL, shape.wL, shape.hR, shape.wR)
    if kind == "full":
        return w == full_shifts(*sizes)
    if kind == "valid":
        return w == valid_shifts(*sizes)
    if kind == "same":
        return w == same_shifts(*sizes)
    if kind == "max-shift":
        return w[0] == -w[1] and w[2] == -w[3]
    return kind == "shifts"


def supports_window(kinds: Sequence[str], shape: Shape) -> bool:
    """Variant::supports_window: a declared kind gives exactly this rectangle (a window asked for
    by another name that is the same rectangle counts)."""
    return any(window_is(k, shape) for k in kinds)


def count_label(form: str, nL: int, nR: int) -> str:
    if form == "one-to-one":
        return "1-to-1"
    if form == "one-to-many":
        return f"1-to-{nR}"
    if form == "n-to-m":
        return f"{nL}-to-{nR}"
    return f"{nL} lefts x {nR // max(nL, 1)} rights each"


def saturated(make: Callable[[int, int], Shape], size: int, copies: int, max_fmas: float = SATURATED_MAX_FMAS,
              multiple: int = 1, square: bool = False, group: str = "saturated") -> Shape:
    """A saturated shape with `copies` problems per call, fewer where one call would exceed
    max_fmas. `make(size, copies)` builds it; `square` treats copies as n for n-to-n (so the
    pair count is copies^2); the count is rounded down to a multiple of `multiple`."""
    per = float(size) ** 4
    if square:
        cap = int(math.isqrt(int(max_fmas / per))) if max_fmas else copies
    else:
        cap = int(max_fmas / per) if max_fmas else copies
    n = max(multiple, min(copies, cap) // multiple * multiple)
    return replace(make(size, n), group=group)


class AtMostCount:
    """A parameter value that is at most the number of matrices on one side (the paper's
    "8 x 1 is in fact 2 x 1 in the 1-to-2 scenario"): the largest instantiated value that is
    <= min(value, count)."""

    def __init__(self, value: int, side: str = "right"):
        self.value, self.side = int(value), side

    def __call__(self, shape: "Shape", allowed: Sequence[str] = ()) -> str:
        if self.side == "left":
            count = shape.nL
        else:
            count = shape.rights_per_left if shape.form in ("n-to-mn", "one-to-many") else shape.nR
        limit = min(self.value, count)
        numeric = sorted(int(a) for a in allowed if str(a).isdigit())
        fits = [a for a in numeric if a <= limit]
        return str(fits[-1] if fits else limit)

    def __repr__(self):
        return f"min({self.value}, {self.side}s)"


def clamp_to_count(value: int, side: str = "right") -> AtMostCount:
    return AtMostCount(value, side)


@dataclass(frozen=True)
class Series:
    """One line of a figure: a variant with fixed parameters; `tune` names parameters to sweep
    (a list of values, or "*" for every value the build instantiates) and the line then shows the
    fastest setting per shape. `group` classifies the line for comparisons: "baseline", "paper"
    (the paper's kernels), "new" (this project's Hopper variants), "fft" or "peer" (another
    library: PyTorch, CuPy); by default it comes from the variant's family. `alt` is tried when the variant (or a value) is not in the build."""

    label: str
    variant: str
    params: Mapping[str, ParamValue] = field(default_factory=dict)
    tune: Union[str, Mapping[str, Union[str, Sequence]], Sequence[Mapping[str, ParamValue]]] = field(default_factory=dict)
    panel: str = ""
    group: str = ""
    max_fmas: float | None = None  # on the window's multiply-adds (Shape.fmas)
    # on the multiply-adds the variant does (Shape.work_fmas: a FULL_THEN_CROP variant's full output)
    max_work_fmas: float | None = None
    max_size: int | None = None
    max_shifts: int | None = None  # only windows of at most this many shifts per pair (small-window)
    forms: Sequence[str] = ()  # only these forms (default: every form the variant supports)
    # only shapes with these windows, as written in the Shape (e.g. ("full",)); default: every window
    # the variant declares. The signal experiments run a full-output companion of seed 004's case
    # for the variants that compute only the full output, and not for the others.
    windows: Sequence[str] = ()
    alt: "Series | None" = None
    note: str = ""


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    paper: str  # where the paper shows it
    shapes: Sequence[Shape]
    series: Sequence[Series]
    # time | time_per_fma | peak_pct | time_with_finish (time per call + the untimed finish_time,
    # fft's crop to the output layout: the window experiments compare every variant so)
    metric: str = "time"
    # lines | comparison | efficiency | none, and for the window experiments: windows (time against
    # the window's half-width, the direct/FFT crossover marked) | bars | grouped_bars, and for the
    # one-dimensional signals signal_bars (bars labelled with time and TFLOP/s, reference_tflops beside),
    # template_lines (time against the template side, a panel per image: zncc_match), paired_bars
    # (per series its raw and normalized time and their ratio, a panel per template: zncc_frames)
    plot: str = "lines"
    cold: bool = False
    notes: str = ""
    derived_from: Sequence[str] = ()  # an analysis of other experiments' results: no cases of its own
    # Its series call the library with algorithm "auto" (the reductions, through the Python package):
    # what it measures is auto's choice, which comes from tables compiled into the library
    # (lib/auto_tables/). scripts/reproduce runs it after the other experiments, once their results
    # have made the tables and the library and package are rebuilt with them (experiments.auto_order).
    measures_auto: bool = False
    xlabel: str = "matrix size N (N x N left and right)"
    # A published rate to draw beside the measured ones (plot "signal_bars"): TFLOP/s, and what it is
    # (e.g. seed 004's 53.56 TFLOP/s on an A100 in TF32); None: no reference.
    reference_tflops: float | None = None
    reference_label: str = ""


@dataclass(frozen=True)
class Case:
    """One benchmark configuration: a variant, its full (resolved) parameters and a shape."""

    variant: str
    shape: Shape
    params: tuple  # sorted ((name, value), ...), every parameter of the variant
    cold: bool = False

    @property
    def key(self) -> str:
        """The case's identity; a normalized case's mode is among its parameters as "normalize",
        as xcsuite.benchjson parses the name's /norm:MODE and resultfile the case line's key."""
        params = dict(self.params)
        if self.shape.normalize != "none":
            params["normalize"] = self.shape.normalize
        return case_key(self.variant, self.shape.dims(), params, self.cold, self.shape.shifts_text)

    def line(self) -> str:
        s = self.shape
        parts = [f"variant={self.variant}", f"form={s.form}", f"hL={s.hL}", f"wL={s.wL}", f"hR={s.hR}",
                 f"wR={s.wR}", f"nL={s.nL}", f"nR={s.nR}"]
        parts += [s.window_line()] if s.window_line() else []
        parts += [s.normalize_line()] if s.normalize_line() else []
        parts += [f"{k}={v}" for k, v in self.params]
        return " ".join(parts)

    @property
    def fmas(self) -> float:
        return self.shape.fmas

    @property
    def work_fmas(self) -> float:
        """What the caps and the cost model count (Shape.work_fmas)."""
        return self.shape.work_fmas(self.variant)


def within_cap(cases: list, max_fmas) -> list:
    """The cases of at most max_fmas multiply-adds per call, counted as the variant works
    (Case.work_fmas; all of them without a cap): the runner's --max-fmas (the quick suite's cap),
    and what a results file recorded under that cap is expected to hold."""
    return [c for c in cases if not max_fmas or c.work_fmas <= max_fmas]


def case_key(variant: str, dims: Iterable, params: Mapping[str, str], cold: bool = False, shifts: str = "") -> str:
    """The canonical identity of one configuration, identical whether built from a definition
    or parsed back from a benchmark's run_name (see xcsuite/benchjson.py). A window other than the
    full output adds a segment "shifts:DY0:DY1,DX0:DX1" after nR, as the benchmark name does (the
    resolved rectangle: two names of one rectangle are one case)."""
    form, hL, wL, hR, wR, nL, nR = dims
    p = ",".join(f"{k}={params[k]}" for k in sorted(params))
    w = f"shifts:{shifts}|" if shifts else ""
    return (f"{variant}|{form}|{int(hL)}x{int(wL)}|{int(hR)}x{int(wR)}|{int(nL)}|{int(nR)}|{w}{p}|"
            f"{'cold' if cold else 'warm'}")


@dataclass
class Member:
    """The cases behind one (panel, series, shape) point of a figure."""

    panel: str
    series: Series
    shape: Shape
    keys: list
    group: str


@dataclass
class Expansion:
    cases: list  # unique Case objects, in definition order
    members: list  # Member objects
    unavailable: list  # (series label, shape or None, reason)
    warnings: list


def _registry_map(registry: Sequence[Mapping]) -> dict:
    return {v["name"]: v for v in registry}


def default_group(variant: str, family: str | None) -> str:
    if family == "peer":  # other libraries (PyTorch, CuPy) measured by xcsuite.peerbench
        return "peer"
    if variant == "overlap-wise" or family == "baseline":
        return "baseline"
    if variant.startswith("fft") or family == "fft":
        return "fft"
    if family == "hopper":
        return "new"
    return "paper"


def _value(value: ParamValue, shape: Shape, allowed: Sequence[str] = ()) -> str | None:
    if isinstance(value, AtMostCount):
        value = value(shape, allowed)
    elif callable(value):
        value = value(shape)
    return None if value is None else str(value)


def _series_cases(exp: Experiment, s: Series, shape: Shape, info: Mapping) -> tuple[list, str | None]:
    """Cases of one series at one shape, or ([], reason)."""
    if shape.form not in info.get("forms", []):
        return [], f"{s.variant} does not support {shape.form}"
    kinds = info.get("windows", ["full"])
    if not supports_window(kinds, shape):
        return [], (f"{s.variant} does not compute the {shape.window} window (shifts {shape.shifts_text}), "
                    f"only: {', '.join(kinds)}")
    # The normalizations a variant computes: a peer's from `peerbench list --json` ("normalizations";
    # a peer that does not say computes none), every variant of xcorr all of them.
    modes = info.get("normalizations") or (("none",) if info.get("family") == "peer" else NORMALIZATIONS)
    if shape.normalize not in modes:
        return [], f"{s.variant} does not compute normalize={shape.normalize} (only: {', '.join(modes)})"
    allowed = {k: [str(x) for x in v] for k, v in info.get("params", {}).items()}
    fixed = {}
    for name, value in s.params.items():
        value = _value(value, shape, allowed.get(name, ()))
        if value is None:
            continue
        if name not in allowed:
            return [], f"{s.variant} has no parameter {name!r}"
        if value not in allowed[name]:
            return [], f"{s.variant}: {name}={value} not instantiated (built: {', '.join(allowed[name])})"
        fixed[name] = value
    combos: list[dict] = [{}]
    if s.tune == "*":
        axes = {k: v for k, v in allowed.items() if k not in fixed}
        if math.prod(len(v) for v in axes.values()) <= MAX_FULL_GRID:
            combos = [dict(zip(axes, c)) for c in itertools.product(*axes.values())]
        else:  # too many for a full grid: the defaults, and each parameter varied alone
            combos = [{}] + [{k: v} for k, vals in axes.items() for v in vals[1:]]
    elif isinstance(s.tune, Mapping):
        grids = []
        for name, values in s.tune.items():
            if name not in allowed:
                return [], f"{s.variant} has no parameter {name!r}"
            if values == "*":
                vals = allowed[name]
            else:
                vals = [v for v in (_value(x, shape, allowed[name]) for x in values) if v in allowed[name]]
            if not vals:
                return [], f"{s.variant}: none of {name}={list(values)} instantiated"
            grids.append([(name, v) for v in dict.fromkeys(vals)])
        combos = [dict(c) for c in itertools.product(*grids)]
    else:  # explicit combinations
        combos = []
        for combo in s.tune:
            c = {k: _value(v, shape, allowed.get(k, ())) for k, v in combo.items()}
            if all(k in allowed and v in allowed[k] for k, v in c.items()):
                combos.append(c)
        if not combos:
            return [], f"{s.variant}: no tuning combination is instantiated"
    cases = []
    for combo in combos:
        params = {k: v[0] for k, v in allowed.items() if v}  # registry defaults
        params.update(fixed)
        params.update(combo)
        cases.append(Case(s.variant, shape, tuple(sorted(params.items())), exp.cold))
    cases = list({c.key: c for c in cases}.values())
    return cases, None


def expand(exp: Experiment, registry: Sequence[Mapping]) -> Expansion:
    """Concrete cases of an experiment for the variants this build holds."""
    reg = _registry_map(registry)
    seen: dict = {}
    members, unavailable, warnings = [], [], []
    for s0 in exp.series:
        s = s0
        while s is not None and s.variant not in reg:
            unavailable.append((s0.label, None, f"variant {s.variant} is not in this build"))
            s = s.alt
        if s is None:
            warnings.append(f"{exp.name}: series '{s0.label}' skipped: {s0.variant} is not in this build")
            continue
        count = 0
        reasons = []
        for shape in exp.shapes:
            # the largest extent of either matrix: N for N x N, n for a 1 x n signal
            if s0.max_size is not None and max(shape.hL, shape.wL, shape.hR, shape.wR) > s0.max_size:
                continue
            if s0.forms and shape.form not in s0.forms:
                continue
            if s0.windows and shape.window not in s0.windows:
                continue
            if s0.max_shifts is not None:
                dy0, dy1, dx0, dx1 = shape.shifts()
                if (dy1 - dy0 + 1) * (dx1 - dx0 + 1) > s0.max_shifts:
                    continue
            if s0.max_fmas is not None and shape.fmas > s0.max_fmas:
                unavailable.append((s0.label, shape, f"capped: {shape.fmas:.3g} FMAs per call > {s0.max_fmas:.3g}"))
                continue
            work = shape.work_fmas(s.variant)
            if s0.max_work_fmas is not None and work > s0.max_work_fmas:
                what = " (the full output it computes, then crops)" if work > shape.fmas else ""
                unavailable.append((s0.label, shape, f"capped: {work:.3g} FMAs per call{what} > {s0.max_work_fmas:.3g}"))
                continue
            cur, cases, reason = s, [], None
            while cur is not None:
                info = reg.get(cur.variant)
                if info is None:
                    reason = f"variant {cur.variant} is not in this build"
                else:
                    cases, reason = _series_cases(exp, cur, shape, info)
                if cases:
                    break
                cur = cur.alt
            if not cases:
                unavailable.append((s0.label, shape, reason))
                reasons.append(reason)
                continue
            for c in cases:
                seen.setdefault(c.key, c)
            fam = reg[cur.variant].get("family")
            members.append(Member(s0.panel or "", s0, shape, [c.key for c in cases], s0.group or default_group(cur.variant, fam)))
            count += 1
        if count == 0:
            why = reasons[0] if reasons else "every shape capped"
            warnings.append(f"{exp.name}: series '{s0.label}' has no case: {why}")
    return Expansion(list(seen.values()), members, unavailable, warnings)


def grid(**axes: Sequence) -> list[dict]:
    """Cartesian product of parameter axes as a list of dicts (for building series lists)."""
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]
