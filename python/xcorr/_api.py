"""correlate2d, Plan, explain: shapes, forms and windows in Python; the work in xcorr._xcorr.

Shapes. A left is (h, w) or a stack (nL, h, w); a right (h, w) or (nR, h, w). The form:
  left 2-D, right 2-D          one-to-one     result (oh, ow)
  left 2-D, right (nR, h, w)   one-to-many    result (nR, oh, ow)
  left (nL, h, w), right 2-D   n-to-m, M = 1  result (nL, oh, ow)
  left (1, h, w), right 3-D    one-to-many    result (1, nR, oh, ow)
  left (nL, h, w), right (nR, h, w), both counts above 1: ambiguous, form= must say which:
      form="n-to-m"   every left with every right   result (nL, nR, oh, ow), out[i, j] = corr(L[i], R[j])
      form="n-to-mn"  right k with left k mod nL    result (nR, oh, ow) (nR a multiple of nL)
The result's leading dimensions are the left's stack dimension then the right's (an outer product),
except for n-to-mn, whose outputs pair with the rights; in memory this is CONVENTIONS.md's output
stack in every case (n-to-m: k = i*nR + j).

1-D signals (correlate1d, Plan(..., dims=1); CONVENTIONS.md, "One-dimensional signals"): a signal
(n,) is the matrix (1, n) and a stack (count, n) the stack (count, 1, n), so the table above holds
with (n,) for (h, w) and (count, n) for (count, h, w), and the result drops the row dimension:
(nL, nR, n_out) for n-to-m and so on. The memory is the same, so 1-D arrays go to the GPU as they
are (no copy); only the plan's spec and the reference see the 1 x n matrices.
"""
import contextlib
import functools
import math
import os
import threading
from collections import namedtuple
from collections.abc import Mapping

import numpy as np

from . import _arrays, _reference, _rules, _xcorr
from ._xcorr import CudaError, GPUMemoryError, NoGPUError

FORMS = _rules.FORMS  # ("one-to-one", "one-to-many", "n-to-mn", "n-to-m")
MODES = ("full", "valid", "same")
PRECISIONS = ("fp32", "tf32")
NORMALIZATIONS = _reference.NORMALIZATIONS  # ("none", "zncc", "zero-lag"); None means "none"


# Reductions (docs/CONVENTIONS.md, "Reductions: peaks and maxima"; lib/xcorr/reduce.hpp).
REDUCTIONS = ("peaks", "max_over_rights")
SUBPIXELS = _reference.SUBPIXELS  # ("none", "parabolic", "gaussian")
# What peaks2d/peaks1d and a Plan(reduce="peaks") return: value (..., k), shift (..., k, 2) as (dy, dx)
# (1-D: (..., k) lags), subpixel the shift plus the fit's offsets; absent peaks NaN, (0, 0), NaN.
Peaks = namedtuple("Peaks", "value shift subpixel")
# What max_over_rights returns: per left and shift the largest value over the rights and the index of
# the right that gives it (-1: every value NaN); with stats also the sum and the sum of squares.
MaxOverRights = namedtuple("MaxOverRights", "value index")
MaxOverRightsStats = namedtuple("MaxOverRightsStats", "value index sum sumsq")
INT_MAX = (1 << 31) - 1


def _reduction(reduce, k, min_distance, subpixel, stats):
    """The reduction's arguments, checked: (reduce, k, min_distance, subpixel, stats)."""
    def given(v, default):
        return isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v != default
    defaults = not given(k, 1), not given(min_distance, 0)
    if reduce is None:
        if not all(defaults) or not (isinstance(subpixel, str) and subpixel == "parabolic") or stats is not False:
            raise ValueError("k=, min_distance=, subpixel= and stats= are for a reduced plan: give reduce='peaks' or "
                             "reduce='max_over_rights'")
        return None, 1, 0, "parabolic", False
    if not isinstance(reduce, str) or reduce not in REDUCTIONS:
        raise ValueError(f"reduce must be None, 'peaks' or 'max_over_rights', got {reduce!r}")
    if reduce == "max_over_rights":
        if not all(defaults) or not (isinstance(subpixel, str) and subpixel == "parabolic"):
            raise ValueError("k=, min_distance= and subpixel= are for peaks, not max_over_rights")
        if not isinstance(stats, (bool, np.bool_)):
            raise ValueError(f"stats must be True or False, got {stats!r}")
        return reduce, 1, 0, "parabolic", bool(stats)
    if stats is not False:
        raise ValueError("stats= (the sums over the rights) is for max_over_rights, not peaks")
    k, min_distance = _integer(k, "k"), _integer(min_distance, "min_distance")
    if not 1 <= k <= MAX_DIM:
        raise ValueError(f"k must be at least 1 (and at most 2^30), got {k}")
    if not 0 <= min_distance <= INT_MAX:
        raise ValueError(f"min_distance must be an integer from 0 to 2^31 - 1, got {min_distance}")
    if not isinstance(subpixel, str) or subpixel not in SUBPIXELS:
        raise ValueError(f"subpixel must be one of {', '.join(repr(x) for x in SUBPIXELS)}, got {subpixel!r}")
    return reduce, k, min_distance, subpixel, False


MAX_DIM = 1 << 30  # as the npy reader's: no output matrix holds more than 2^30 elements anyway


def _dims(x, what, ndims, expected, hints={}):
    """x's shape (an array's, or x itself as integers), checked: `ndims` dimensions, each from 1 to
    2^30; `expected` says what they are, hints[ndim] what to use instead."""
    try:
        shape = tuple(x.shape) if hasattr(x, "shape") else tuple(x)
    except TypeError:
        raise ValueError(f"{what}: a shape is a tuple of integers, got {x!r}") from None
    if not all(isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        raise ValueError(f"{what}: a shape is a tuple of integers, got {shape!r}")
    shape = tuple(int(d) for d in shape)
    if len(shape) not in ndims:
        raise ValueError(f"{what} must be {expected}, got shape {shape}{hints.get(len(shape), '')}")
    if any(d <= 0 for d in shape):
        raise ValueError(f"{what} has an empty dimension: shape {shape}")
    if any(d > MAX_DIM for d in shape):
        raise ValueError(f"{what} has a dimension over 2^30: shape {shape}")
    return shape


def _shape_of(x, what):
    return _dims(x, what, (2, 3), "2-D (h, w) or a 3-D stack (count, h, w)")


MAX_SHIFT = (1 << 30) - 1  # lib/core.cpp's kMaxShift: a shift is less than 2^30 away from 0


def _signal_shape(x, what):
    """The shape of a signal (n,) or a stack of signals (count, n), checked."""
    return _dims(x, what, (1, 2), "a 1-D signal (n,) or a 2-D stack of signals (count, n)",
                 {3: " (matrices: correlate2d)"})


def _as_matrices(shape):
    """A signal shape as CONVENTIONS.md's matrix shape: (n,) -> (1, n), (count, n) -> (count, 1, n)."""
    return shape[:-1] + (1, shape[-1])


def _integer(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"{what} takes integers, got {v!r}")
    return int(v)


def _lag_window(mode, max_lag, lags, n, m):
    """_window for signals of lengths n (left) and m (right): (kind, text) of the 1 x n window,
    dy = 0 (max_lag S: lags -S..S; lags (d0, d1): d0..d1 inclusive). mode="same" is
    scipy.signal.correlate's, lags -(m // 2) .. -(m // 2) + n - 1: for an even m one lag below
    correlate2d's "same" (lib/core.cpp, signal_same), so it goes as explicit lags."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    given = [n for n, v in (("mode", None if mode == "full" else mode), ("max_lag", max_lag), ("lags", lags))
             if v is not None]
    if len(given) > 1:
        raise ValueError(f"give one window: {' and '.join(given)} were both given")
    if max_lag is not None:
        s = _integer(max_lag, "max_lag")
        if not 0 <= s <= MAX_SHIFT:
            raise ValueError(f"max_lag must be an integer from 0 to {MAX_SHIFT}, got {s}")
        return "max_shift", f"0,{s}"
    if lags is not None:
        try:
            d0, d1 = lags
        except (TypeError, ValueError):
            raise ValueError(f"lags takes a pair (d0, d1), got {lags!r}") from None
        d0, d1 = _integer(d0, "lags"), _integer(d1, "lags")
        if not (-MAX_SHIFT <= d0 <= MAX_SHIFT and -MAX_SHIFT <= d1 <= MAX_SHIFT):
            raise ValueError(f"lags {d0}:{d1}: a lag is 2^30 or more away from 0")
        if d0 > d1:
            raise ValueError(f"empty window: lags ({d0}, {d1}) has its first lag after its last")
        return "shifts", f"0:0,{d0}:{d1}"
    if mode == "same" and m % 2 == 0:
        return "shifts", f"0:0,{-(m // 2)}:{-(m // 2) + n - 1}"
    return "mode", mode


def _window(mode, max_shift, shifts):
    """(kind, text) of the window as xcorr run's parsers take it; they check the values."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    given = [n for n, v in (("mode", None if mode == "full" else mode), ("max_shift", max_shift),
                             ("shifts", shifts)) if v is not None]
    if len(given) > 1:
        raise ValueError(f"give one window: {' and '.join(given)} were both given")

    # Ranges checked here, in Python's terms (the text parsers' messages name the CLI's syntax).
    if max_shift is not None:
        if isinstance(max_shift, (tuple, list)):
            if len(max_shift) != 2:
                raise ValueError(f"max_shift takes an integer or a pair (sy, sx), got {max_shift!r}")
            sy, sx = max_shift
        else:
            sy = sx = max_shift
        sy, sx = _integer(sy, "max_shift"), _integer(sx, "max_shift")
        if not (0 <= sy <= MAX_SHIFT and 0 <= sx <= MAX_SHIFT):
            raise ValueError(f"max_shift must be integers from 0 to {MAX_SHIFT}, got {max_shift!r}")
        return "max_shift", f"{sy},{sx}"
    if shifts is not None:
        try:
            (dy0, dy1), (dx0, dx1) = shifts
        except (TypeError, ValueError):
            raise ValueError(f"shifts takes ((dy0, dy1), (dx0, dx1)), got {shifts!r}") from None
        dy0, dy1, dx0, dx1 = (_integer(v, "shifts") for v in (dy0, dy1, dx0, dx1))
        if not all(-MAX_SHIFT <= v <= MAX_SHIFT for v in (dy0, dy1, dx0, dx1)):
            raise ValueError(f"shifts {shifts!r}: a shift is 2^30 or more away from 0")
        return "shifts", f"{dy0}:{dy1},{dx0}:{dx1}"
    return "mode", mode


def _form(form, lshape, rshape):
    nL = lshape[0] if len(lshape) == 3 else 1
    nR = rshape[0] if len(rshape) == 3 else 1
    if form is not None:
        if form not in FORMS:
            raise ValueError(f"form must be one of {', '.join(FORMS)}, got {form!r}")
        return form
    if len(lshape) == 2:
        return "one-to-one" if len(rshape) == 2 else "one-to-many"
    if len(rshape) == 2 or nR == 1:
        return "n-to-m"
    if nL == 1:
        return "one-to-many"
    raise ValueError(f"a stack of {nL} lefts and a stack of {nR} rights: say form='n-to-m' (every left with "
                     f"every right) or form='n-to-mn' (right k with left k mod {nL})")


def _lead(form, lshape, rshape):
    """The result's leading (stack) dimensions (module docstring)."""
    if form == "n-to-mn":
        return (rshape[0],) if len(rshape) == 3 else ()
    return lshape[:-2] + rshape[:-2]


def _normalize(normalize):
    if normalize is None:
        return "none"
    if not isinstance(normalize, str) or normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be None or one of {', '.join(repr(n) for n in NORMALIZATIONS)}, "
                         f"got {normalize!r}")
    return normalize


def _float32(x, kind, what):
    """True for float32, False for a NumPy float of another width (converted); else ValueError."""
    if _arrays.is_float32(x, kind):
        return True
    if kind == "numpy" and np.issubdtype(x.dtype, np.floating) and x.dtype.itemsize <= 8:
        return False
    raise ValueError(f"{what} must be float32{' (float64 NumPy is converted)' if kind == 'numpy' else ''}, "
                     f"got {_arrays.dtype_name(x, kind)}")


class Plan:
    """A correlation built once for given shapes and executed many times.

        plan = xcorr.Plan(left.shape, right.shape, mode="valid")
        out = plan(left, right)               # or plan(left, right, out=buf, stream=s)

    dims=1: 1-D signals, shapes (n,) or (count, n), windows mode, max_lag= or lags= (correlate1d's
    arguments); the plan's shapes and out_shape are then the 1-D ones, and lags its (d0, d1).

    Arguments as correlate2d's (normalize: None/"none", "zncc" or "zero-lag"). algorithm="auto"
    chooses from this GPU's measured results (see explain()); precision="fp32" admits only
    algorithms with FP32-class error (1e-5), "tf32" also single-pass TF32 tensor cores. device: the CUDA device (default: the current one). The plan
    holds its device workspace (workspace_bytes) until it is deleted. One plan must not run on two
    streams at once (its workspace is one).

    reduce="peaks" (with k, min_distance, subpixel) or "max_over_rights" (with stats): the plan returns
    what peaks2d/peaks1d or max_over_rights return (a Peaks or MaxOverRights named tuple; shapes in
    result_shape) instead of the maps, which are never written (out_shape stays the maps' shape). A
    max_over_rights plan's call takes out= (an earlier result, continued) and first_index= (the number
    of this call's first right), as max_over_rights does.
    """

    def __init__(self, left_shape, right_shape, mode="full", *, max_shift=None, shifts=None, normalize=None,
                 form=None, algorithm="auto", precision="fp32", params=None, device=None, dims=2, max_lag=None,
                 lags=None, reduce=None, k=1, min_distance=0, subpixel="parabolic", stats=False):
        self._setup(left_shape, right_shape, mode, max_shift, shifts, normalize, form, algorithm, precision, params,
                    dims, max_lag, lags, reduce, k, min_distance, subpixel, stats)
        self._attach(device)

    def _attach(self, device):
        """The device plan (all the GPU work of building one; none for the reference)."""
        if device is not None and (isinstance(device, bool) or not isinstance(device, (int, np.integer))
                                   or device < 0):
            raise ValueError(f"device must be a CUDA device index, got {device!r}")
        if self.reference:
            self._plan = None
        else:
            with _gpu_work():
                self._plan = _freeing_the_cache_if_short(
                    lambda: _xcorr.Plan(self._spec, -1 if device is None else int(device)))
        self._device = None if self.reference else self._plan.device  # the fast paths compare with it

    def _setup(self, left_shape, right_shape, mode, max_shift, shifts, normalize, form, algorithm, precision, params,
               dims, max_lag, lags, reduce=None, k=1, min_distance=0, subpixel="parabolic", stats=False):
        """Everything but the device plan: the checked spec, shapes, form, window and out_shape (and
        for a reduced plan result_shape)."""
        if isinstance(dims, bool) or dims not in (1, 2):
            raise ValueError(f"dims must be 1 (signals) or 2 (matrices), got {dims!r}")
        self.dims = dims
        if dims == 2:
            if max_lag is not None or lags is not None:
                raise ValueError("max_lag= and lags= are windows of 1-D signals (dims=1); matrices take max_shift= "
                                 "and shifts=")
            self.left_shape = lshape = _shape_of(left_shape, "left")
            self.right_shape = rshape = _shape_of(right_shape, "right")
        else:
            if max_shift is not None or shifts is not None:
                raise ValueError("max_shift= and shifts= are windows of matrices: 1-D signals take max_lag= and lags=")
            self.left_shape = _signal_shape(left_shape, "left")
            self.right_shape = _signal_shape(right_shape, "right")
            lshape, rshape = _as_matrices(self.left_shape), _as_matrices(self.right_shape)
        self._matrix_shapes = (lshape, rshape)  # what the reference computes on: (..., h, w)
        self.reduce, self.k, self.min_distance, self.subpixel, self.stats = _reduction(reduce, k, min_distance,
                                                                                       subpixel, stats)
        if self.reduce == "max_over_rights":
            if len(rshape) == 2:
                raise ValueError(f"max_over_rights reduces over a stack of rights: a single right "
                                 f"{self.right_shape} is one-to-one, nothing to reduce over; pass a stack "
                                 f"{'(M, n)' if dims == 1 else '(M, h, w)'} ((1, ...) for one right)")
            if form is None and len(lshape) == 3:
                form = "n-to-m"  # every left with every right: the maximum per left over all the rights
        self.form = _form(form, lshape, rshape)
        if self.reduce == "max_over_rights" and self.form == "one-to-one":
            raise ValueError("max_over_rights needs rights to reduce over: form one-to-one has one right per left "
                             "(one-to-many, n-to-m or n-to-mn)")
        if not isinstance(algorithm, str):
            raise ValueError(f"algorithm must be a name (xcorr.algorithms()), 'auto' or 'reference', got {algorithm!r}")
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if params is not None and not isinstance(params, Mapping):
            raise ValueError(f"params must be a dict of parameter names to values, got {params!r}")
        params = {str(k): str(v) for k, v in (params or {}).items()}
        if params and algorithm in ("auto", "reference"):
            raise ValueError(f"params= are for a named algorithm, not {algorithm!r}")
        if algorithm not in ("auto", "reference") and algorithm not in _names():
            raise ValueError(f"unknown algorithm {algorithm!r}: 'auto', 'reference' or one of {', '.join(_names())}")
        kind, text = _window(mode, max_shift, shifts) if dims == 2 else _lag_window(mode, max_lag, lags, lshape[-1], rshape[-1])
        self.normalize = _normalize(normalize)
        nL = lshape[0] if len(lshape) == 3 else 1
        nR = rshape[0] if len(rshape) == 3 else 1
        # The reduction goes to the spec only where there is one (a map plan's spec is as before).
        reduction = {} if self.reduce is None else dict(
            reduce="peaks" if self.reduce == "peaks" else "max-over-rights", k=self.k, min_distance=self.min_distance,
            subpixel=self.subpixel, stats=self.stats)
        self._spec = _xcorr.spec(self.form, nL, nR, *lshape[-2:], *rshape[-2:], kind, text,
                                 self.normalize, precision,
                                 "auto" if algorithm == "reference" else algorithm, params, **reduction)
        dy0, dy1, dx0, dx1, count, self.description = _xcorr.resolve(self._spec)
        self.shifts = ((dy0, dy1), (dx0, dx1))
        # Signals: every 1-D window has the one row dy = 0, which the result drops.
        self.out_shape = _lead(self.form, lshape, rshape) + (
            (dy1 - dy0 + 1, dx1 - dx0 + 1) if dims == 2 else (dx1 - dx0 + 1,))
        if dims == 1:
            assert dy0 == dy1 == 0, self.shifts
            self.lags = (dx0, dx1)
        assert int(np.prod(self.out_shape[:-dims], dtype=np.int64)) == count, (self.out_shape, count)
        self.reference = algorithm == "reference"
        # A reduced plan's results: the shapes the caller gets (result_shape) and those the library
        # writes (reduce.hpp: peaks' shift and subpixel are (dy, dx) pairs, also for signals, whose
        # result keeps the lag alone).
        self.result_shape = self._device_shape = None
        if self.reduce == "peaks":
            lead, kk = self.out_shape[:-dims], (self.k,)
            self._device_shape = Peaks(lead + kk, lead + kk + (2,), lead + kk + (2,))
            # the fast paths' one allocation (_launch_peaks): the values' count, where the shifts and the
            # sub-pixel shifts start in it and its length (float32 elements; 64 are 256 bytes)
            n = math.prod(lead + kk)
            a = -(-n // 64) * 64
            b = a + -(-2 * n // 64) * 64
            self._peaks_parts = (n, a, b, b + 2 * n)  # the last: the allocation's length
            self.result_shape = self._device_shape if dims == 2 else Peaks(lead + kk, lead + kk, lead + kk)
        elif self.reduce == "max_over_rights":
            shape = self.left_shape[:-dims] + self.out_shape[-dims:]
            self._device_shape = self.result_shape = (MaxOverRightsStats(shape, shape, shape, shape) if self.stats
                                                      else MaxOverRights(shape, shape))

    @property
    def algorithm(self):
        return "reference" if self.reference else self._plan.algorithm

    @property
    def params(self):
        return {} if self.reference else dict(self._plan.params)

    @property
    def workspace_bytes(self):
        return 0 if self.reference else self._plan.workspace_bytes

    @property
    def device(self):
        return None if self.reference else self._plan.device

    def explain(self):
        """Why this algorithm: auto's reason, or 'asked for by name'; for a normalized plan, what runs
        around the algorithm's raw correlation."""
        if self.reference:
            why = "the float64 CPU reference, asked for by name"
            return why if self.normalize == "none" else f"{why}, normalize={self.normalize!r} in float64"
        return self._plan.explain()  # the C++ plan's, which says what a normalization adds

    def __repr__(self):
        reduced = "" if self.reduce is None else (
            f", reduce='peaks', k={self.k}, min_distance={self.min_distance}, subpixel={self.subpixel!r}"
            if self.reduce == "peaks" else f", reduce='max_over_rights', stats={self.stats}")
        return f"xcorr.Plan({self.description}{reduced}, algorithm={self.algorithm!r})"

    def __call__(self, left, right, out=None, stream=None, *, first_index=0):
        """The correlation of `left` with `right` (the plan's shapes), written into `out` when
        given, else into a new array of the inputs' kind; enqueued on `stream` (default: the
        current stream of the inputs' library; 0 for NumPy). With CuPy or PyTorch arrays the call
        returns without waiting for the GPU; with NumPy arrays it waits and returns NumPy.

        A reduced plan (reduce=) returns its named tuple; for max_over_rights, out= is an earlier
        result that this call continues (in place; returned) and first_index the number of this
        call's first right (the index its maxima report)."""
        if self.reduce is not None:
            return self._reduced_call(left, right, out, stream, first_index)
        if first_index != 0:
            raise ValueError("first_index= numbers the rights of a max_over_rights plan (reduce='max_over_rights')")
        t = type(left)
        if t is type(right):
            T, C = _arrays.libraries_for(t)
            if T is not None and t is T.Tensor:
                result = self._torch(T, left, right, out, stream)
                if result is not None:
                    return result
            elif C is not None and t is C.ndarray:
                result = self._cupy(C, left, right, out, stream)
                if result is not None:
                    return result
        return self._call(left, right, out, stream)

    execute = __call__

    # The fast paths: PyTorch or CuPy arrays on the plan's device that are already what the kernels
    # read (float32, the plan's shapes, C-contiguous) go to the binding as raw device pointers, the
    # caller's own memory (zero-copy), with no DLPack export and import per call. Any check that
    # fails returns None and the general path (_call) handles the call: it copies a strided input,
    # converts NumPy, and raises the ValueError that says what is wrong.

    def _torch_ready(self, T, x, shape, dtype):
        """Whether a tensor is what the kernels read or write: dtype, shape, on the plan's device,
        dense and C-contiguous."""
        return (type(x) is T.Tensor and x.dtype is dtype and x.is_cuda and x.get_device() == self._device
                and x.shape == shape and x.layout is T.strided and x.is_contiguous())

    def _torch_stream(self, T, stream):
        if stream is None:
            return T.stream(self._device)  # the caller's current stream on the plan's device
        if type(stream) is not int or stream < 0:
            return _arrays.stream_handle(stream, "torch", self._device)
        return stream

    def _torch(self, T, left, right, out, stream):
        f32 = T.float32
        if not (self._torch_ready(T, left, self.left_shape, f32) and self._torch_ready(T, right, self.right_shape, f32)):
            return None
        if out is None:
            out = T.empty(self.out_shape, dtype=f32, device=T.device(self._device))
        elif not self._torch_ready(T, out, self.out_shape, f32):
            return None
        self._plan.execute_ptr(left.data_ptr(), right.data_ptr(), out.data_ptr(), self._torch_stream(T, stream))
        return out

    def _cupy_ready(self, C, x, shape, dtype):
        """_torch_ready for CuPy arrays: dtype, shape, on the plan's device, C-contiguous."""
        return (type(x) is C.ndarray and x.dtype is dtype and x.data.device_id == self._device and x.shape == shape
                and x.flags.c_contiguous)

    def _cupy_stream(self, C, stream):
        if stream is None:
            return C.current_stream().ptr  # CuPy's current stream, as the general path takes it
        if type(stream) is not int or stream < 0:
            return _arrays.stream_handle(stream, "cupy", self._device)
        return stream

    def _cupy_empty(self, C, shape, dtype, like):
        """A CuPy result on the plan's device (cupy.empty allocates on the current one)."""
        dev = self._device
        return C.empty(shape, dtype=dtype) if C.get_device() == dev else _arrays.empty_like_kind(
            "cupy", shape, dev, like, dtype)

    def _cupy(self, C, left, right, out, stream):
        f32 = C.float32
        if not (self._cupy_ready(C, left, self.left_shape, f32) and self._cupy_ready(C, right, self.right_shape, f32)):
            return None
        if out is None:
            out = self._cupy_empty(C, self.out_shape, f32, left)
        elif not self._cupy_ready(C, out, self.out_shape, f32):
            return None
        self._plan.execute_ptr(left.data.ptr, right.data.ptr, out.data.ptr, self._cupy_stream(C, stream))
        return out

    def _call(self, left, right, out, stream):
        """The general path: any kinds of arrays (NumPy, PyTorch, CuPy, DLPack), through DLPack."""
        left, right, kl, kr = _as_arrays(left, right)
        for x, what, want in ((left, "left", self.left_shape), (right, "right", self.right_shape)):
            if tuple(x.shape) != want:
                raise ValueError(f"{what} has shape {tuple(x.shape)}, the plan was built for {want}")
        if self.reference:
            return self._reference(left, kl, right, kr, out)
        dl, dr = _arrays.device_of(left, kl), _arrays.device_of(right, kr)
        left, right = self._input(left, kl, dl, "left"), self._input(right, kr, dr, "right")
        # The result is of the first GPU input's kind, else NumPy.
        kind, device, like = next(((k, d, x) for k, d, x in ((kl, dl, left), (kr, dr, right)) if d is not None),
                                  ("numpy", None, left))
        if out is None:
            out = _arrays.empty_like_kind(kind, self.out_shape, device, like)
        else:
            self._check_out(out)
        self._plan.execute(left, right, out, _arrays.stream_handle(stream, kind, device))
        return out

    def _check_arrays(self, left, kl, right, kr, out):
        """What a call refuses of its arrays' dtypes and of out=, on any machine: a new plan for a
        call checks them before it builds the device plan (shapes are the caller's)."""
        if not self.reference:  # the reference takes any floating dtype and checks its own out=
            _float32(left, kl, "left")
            _float32(right, kr, "right")
            if out is not None:
                self._check_reduced_out(out) if self.reduce is not None else self._check_out(out)

    def _input(self, x, kind, device, what):
        if not _float32(x, kind, what):
            with np.errstate(over="ignore"):
                y = np.ascontiguousarray(x, dtype=np.float32)
            # A finite value beyond float32's range would become inf: refused, as the CLI does.
            if x.dtype.itemsize > 4 and not np.isfinite(y).all():
                beyond = np.flatnonzero(np.isinf(y) & np.isfinite(x))
                if beyond.size:
                    raise ValueError(f"{what}: element {beyond[0]} ({float(x.flat[beyond[0]])!r}) is outside float32's "
                                     "range (about 3.4e38): the data is correlated in float32")
            return y
        if kind == "numpy":
            return np.ascontiguousarray(x)
        if kind == "torch" and x.requires_grad:
            x = x.detach()  # DLPack refuses tensors that require grad; no gradient flows through xcorr
        # A strided GPU view is copied to a dense one (the kernels read dense stacks).
        return x if _arrays.is_contiguous(x, kind) else _arrays.contiguous(x, kind)

    def _check_out(self, out):
        kind = _arrays.kind_of(out)
        if not hasattr(out, "shape") or tuple(out.shape) != self.out_shape:
            raise ValueError(f"out must have shape {self.out_shape}, got {getattr(out, 'shape', type(out).__name__)}")
        if not _arrays.is_float32(out, kind):
            raise ValueError(f"out must be float32, got {_arrays.dtype_name(out, kind)}")
        if not _arrays.is_contiguous(out, kind):
            raise ValueError("out must be C-contiguous (the result is written in place)")
        if kind == "numpy" and not out.flags.writeable:
            raise ValueError("out is read-only")

    def _reference_maps(self, left, kl, right, kr):
        """The float64 maps (out_count, H, W) of the reference (signals: H = 1)."""
        def host(x, kind, what, shape):
            x = _arrays.to_numpy(x, kind)
            if not np.issubdtype(x.dtype, np.floating) or x.dtype.itemsize > 8:
                raise ValueError(f"{what} must be float32 or float64, got {x.dtype}")
            return x.reshape((-1,) + shape[-2:])  # a stack of matrices (signals: of 1 x n ones)
        (dy0, dy1), (dx0, dx1) = self.shifts
        lshape, rshape = self._matrix_shapes
        return _reference.normalized(self.normalize, self.form, host(left, kl, "left", lshape),
                                     host(right, kr, "right", rshape), (dy0, dy1, dx0, dx1))

    def _reference(self, left, kl, right, kr, out):
        result = self._reference_maps(left, kl, right, kr).reshape(self.out_shape)
        if out is None:
            return result
        if not isinstance(out, np.ndarray) or out.shape != self.out_shape or not np.issubdtype(out.dtype, np.floating):
            raise ValueError(f"out for the reference must be a floating NumPy array of shape {self.out_shape}")
        np.copyto(out, result)
        return out


    # --- reduced plans (reduce="peaks" or "max_over_rights") ------------------------------------

    def _reduced_call(self, left, right, out, stream, first_index):
        """A reduced plan's call: any kinds of arrays, through DLPack; the results of the first GPU
        input's kind (else NumPy), or out= continued."""
        first_index = _first_index(first_index)
        if self.reduce == "peaks" and first_index != 0:
            raise ValueError("first_index= numbers the rights of max_over_rights, not peaks")
        T, C = _arrays.libraries_for(type(left))
        if T is not None and type(left) is T.Tensor and type(right) is T.Tensor:
            result = self._torch_reduced(T, left, right, out, stream, first_index)
            if result is not None:
                return result
        elif C is not None and type(left) is C.ndarray and type(right) is C.ndarray:
            result = self._cupy_reduced(C, left, right, out, stream, first_index)
            if result is not None:
                return result
        left, right, kl, kr = _as_arrays(left, right)
        for x, what, want in ((left, "left", self.left_shape), (right, "right", self.right_shape)):
            if tuple(x.shape) != want:
                raise ValueError(f"{what} has shape {tuple(x.shape)}, the plan was built for {want}")
        if out is not None:
            self._check_reduced_out(out)
        if self.reference:
            return self._reduced_reference(left, kl, right, kr, out, first_index)
        dl, dr = _arrays.device_of(left, kl), _arrays.device_of(right, kr)
        left, right = self._input(left, kl, dl, "left"), self._input(right, kr, dr, "right")
        kind, device, like = next(((k, d, x) for k, d, x in ((kl, dl, left), (kr, dr, right)) if d is not None),
                                  ("numpy", None, left))
        handle = _arrays.stream_handle(stream, kind, device)
        shapes = self._device_shape
        if self.reduce == "peaks":
            value, shift, sub = (_arrays.empty_like_kind(kind, shape, device, like, dtype)
                                 for shape, dtype in zip(shapes, (np.float32, np.int32, np.float32)))
            self._plan.execute_reduced(left, right, value, shift, sub, None, None, None, handle, False, 0)
            if self.dims == 1:  # the lag, without the dy = 0 beside it
                shift, sub = shift[..., 1], sub[..., 1]
                if kind == "numpy":
                    shift, sub = np.ascontiguousarray(shift), np.ascontiguousarray(sub)
            return Peaks(value, shift, sub)
        result = out
        if result is None:
            dtypes = (np.float32, np.int32, np.float64, np.float64)
            arrays = [_arrays.empty_like_kind(kind, shape, device, like, dtype) for shape, dtype in zip(shapes, dtypes)]
            result = (MaxOverRightsStats if self.stats else MaxOverRights)(*arrays)
        sums = (result[2], result[3]) if self.stats else (None, None)
        self._plan.execute_reduced(left, right, result[0], None, None, result[1], *sums, handle, out is not None,
                                   first_index)
        return result

    def _torch_reduced(self, T, left, right, out, stream, first_index):
        """The fast path of a reduced call on PyTorch tensors that are already what the kernels read
        (as _torch is the maps'): outputs from torch.empty, or an earlier max_over_rights result of
        tensors continued, and raw pointers to the binding; no DLPack export and import of up to six
        arrays per call. None: the general path handles the call and says what is wrong."""
        f32, i32, f64 = T.float32, T.int32, T.float64
        if self.reference or not (self._torch_ready(T, left, self.left_shape, f32)
                                  and self._torch_ready(T, right, self.right_shape, f32)):
            return None
        if self.reduce == "peaks":
            if out is not None:
                return None
            buf = T.empty((self._peaks_parts[-1],), dtype=f32, device=T.device(self._device))
            self._launch_peaks(left.data_ptr(), right.data_ptr(), buf.data_ptr(), self._torch_stream(T, stream))
            return self._peaks_views(buf, i32)
        device = T.device(self._device)
        arrays = self._max_arrays(out, (f32, i32, f64, f64), functools.partial(self._torch_ready, T),
                                  lambda shape, dtype: T.empty(shape, dtype=dtype, device=device))
        if arrays is None:
            return None
        self._launch_max(left.data_ptr(), right.data_ptr(), [a.data_ptr() for a in arrays],
                         self._torch_stream(T, stream), out is not None, first_index)
        return out if out is not None else (MaxOverRightsStats if self.stats else MaxOverRights)(*arrays)

    def _cupy_reduced(self, C, left, right, out, stream, first_index):
        """_torch_reduced for CuPy arrays (as _cupy is _torch's): outputs from cupy.empty on the
        plan's device, or an earlier max_over_rights result of CuPy arrays continued; raw pointers
        to the binding. None: the general path handles the call and says what is wrong."""
        f32, i32, f64 = C.float32, C.int32, C.float64
        if self.reference or not (self._cupy_ready(C, left, self.left_shape, f32)
                                  and self._cupy_ready(C, right, self.right_shape, f32)):
            return None
        if self.reduce == "peaks":
            if out is not None:
                return None
            buf = self._cupy_empty(C, (self._peaks_parts[-1],), f32, left)
            self._launch_peaks(left.data.ptr, right.data.ptr, buf.data.ptr, self._cupy_stream(C, stream))
            return self._peaks_views(buf, i32)
        arrays = self._max_arrays(out, (f32, i32, f64, f64), functools.partial(self._cupy_ready, C),
                                  lambda shape, dtype: self._cupy_empty(C, shape, dtype, left))
        if arrays is None:
            return None
        self._launch_max(left.data.ptr, right.data.ptr, [a.data.ptr for a in arrays], self._cupy_stream(C, stream),
                         out is not None, first_index)
        return out if out is not None else (MaxOverRightsStats if self.stats else MaxOverRights)(*arrays)

    # The fast paths' shared halves. A peaks call's three results are one allocation (_peaks_parts:
    # n values, 2n shifts, 2n sub-pixel shifts, 4 bytes each, every part on a 256-byte boundary as an
    # allocation of its own would be), launched on by pointer and cut into views after the launch: a
    # call's time from Python is its host time before the first launch plus the GPU's, and three
    # allocations were ~11 us of PIV's where one is ~4 (notes/reductions.md).

    def _launch_peaks(self, left, right, base, stream):
        _, a, b, _ = self._peaks_parts
        self._plan.execute_reduced_ptr(left, right, base, base + 4 * a, base + 4 * b, 0, 0, 0, stream, False, 0)

    def _peaks_views(self, buf, i32):
        """Peaks of views into one allocation (PyTorch tensor or CuPy array: both slice, view a dtype
        of the same size and reshape without a copy); signals keep the lag alone."""
        n, a, b, _ = self._peaks_parts
        shapes = self._device_shape
        value = buf[:n].reshape(shapes[0])
        shift = buf[a:a + 2 * n].view(i32).reshape(shapes[1])
        sub = buf[b:].reshape(shapes[2])
        if self.dims == 1:  # the lag, without the dy = 0 beside it
            shift, sub = shift[..., 1], sub[..., 1]
        return Peaks(value, shift, sub)

    def _max_arrays(self, out, dtypes, ready, empty):
        """The arrays a maximum over the rights writes (value, index and, with stats, sum and sumsq):
        new ones from empty(shape, dtype), or out= continued where each is ready(x, shape, dtype);
        None where out= is not that (the general path says what is wrong with it)."""
        shapes = self._device_shape
        if out is None:
            return [empty(shape, dtype) for shape, dtype in zip(shapes, dtypes)]
        if (not isinstance(out, tuple) or len(out) != len(shapes)
                or not all(ready(x, shape, dtype) for x, shape, dtype in zip(out, shapes, dtypes))):
            return None
        return list(out)

    def _launch_max(self, left, right, ptrs, stream, accumulate, first_index):
        """A maximum over the rights by pointer: ptrs value, index and, with stats, sum and sumsq."""
        value, index, *sums = ptrs
        self._plan.execute_reduced_ptr(left, right, value, 0, 0, index, *(sums or (0, 0)), stream, accumulate,
                                       first_index)

    def _check_reduced_out(self, out):
        """out= of a reduced call: an earlier max_over_rights result of this plan's shapes (GPU: as
        the library writes them, float32 value, int32 index, float64 sums; reference: NumPy, any
        floating value and sums, integer index)."""
        if self.reduce == "peaks":
            raise ValueError("out= continues an earlier max_over_rights; peaks return new arrays (give no out=)")
        names = ("value", "index", "sum", "sumsq") if self.stats else ("value", "index")
        if not isinstance(out, tuple) or len(out) != len(names):
            raise ValueError(f"out must be an earlier max_over_rights result ({', '.join(names)}) to continue, got "
                             f"{type(out).__name__}{f' of {len(out)}' if isinstance(out, tuple) else ''}")
        for x, name, shape, dtype in zip(out, names, self.result_shape, (np.float32, np.int32, np.float64, np.float64)):
            kind = _arrays.kind_of(x)
            if not hasattr(x, "shape") or tuple(x.shape) != shape:
                raise ValueError(f"out.{name} must have shape {shape}, got {getattr(x, 'shape', type(x).__name__)}")
            if self.reference:
                if kind != "numpy":
                    raise ValueError(f"out.{name} for the reference must be a NumPy array, got {kind}")
                if not np.issubdtype(x.dtype, np.integer if name == "index" else np.floating):
                    raise ValueError(f"out.{name} must be {'an integer' if name == 'index' else 'a floating'} "
                                     f"array, got {x.dtype}")
            else:
                if _arrays.dtype_name(x, kind) != np.dtype(dtype).name:
                    raise ValueError(f"out.{name} must be {np.dtype(dtype).name}, got {_arrays.dtype_name(x, kind)}")
                if not _arrays.is_contiguous(x, kind):
                    raise ValueError(f"out.{name} must be C-contiguous (the result is written in place)")
            if kind == "numpy" and not x.flags.writeable:
                raise ValueError(f"out.{name} is read-only")

    def _reduced_reference(self, left, kl, right, kr, out, first_index):
        """The reduction of the float64 reference maps (_reference.peaks_of_maps, max_over_rights):
        float64 values and sums, int32 shifts and indices, NumPy."""
        maps = self._reference_maps(left, kl, right, kr)
        (dy0, _), (dx0, _) = self.shifts
        if self.reduce == "peaks":
            value, shift, sub = _reference.peaks_of_maps(maps, self.k, self.min_distance, self.subpixel, dy0, dx0)
            if self.dims == 1:
                shift, sub = shift[..., 1], sub[..., 1]
            shapes = self.result_shape
            return Peaks(value.reshape(shapes.value), np.ascontiguousarray(shift, np.int32).reshape(shapes.shift),
                         np.ascontiguousarray(sub).reshape(shapes.subpixel))
        lshape, rshape = self._matrix_shapes
        nL = lshape[0] if len(lshape) == 3 else 1
        grouped = _reference.right_maps(self.form, nL, rshape[0], maps)
        previous = None if out is None else [np.asarray(x).reshape((grouped.shape[0],) + grouped.shape[2:]) for x in out]
        got = _reference.max_over_rights(grouped, self.stats, first_index, previous)
        got = [x.reshape(shape) for x, shape in zip(got, self.result_shape)]
        if out is None:
            return (MaxOverRightsStats if self.stats else MaxOverRights)(*got)
        for x, y in zip(out, got):
            np.copyto(x, y, casting="unsafe")
        return out


_algorithm_names = []


REFERENCE_HINT = 'algorithm="reference" computes the same on the CPU (float64 NumPy, without devices= or chunk=)'


@contextlib.contextmanager
def _gpu_work():
    """Around the calls that need a GPU: NoGPUError says what runs without one (the reference)."""
    try:
        yield
    except NoGPUError as e:
        raise NoGPUError(f"{e}; {REFERENCE_HINT}") from None


def _names():
    if not _algorithm_names:
        _algorithm_names.extend(v["name"] for v in _xcorr.algorithms())
    return _algorithm_names


_plans = {}
_PLAN_CACHE = 16
_plans_lock = threading.Lock()  # around _plans in _cached_plan: max_over_rights(devices=)'s threads fill it together


def empty_pinned(shape, dtype=np.float32):
    """An uninitialised float32 NumPy array in page-locked (pinned) host memory, freed with the array.
    As out= of a devices=/chunk= call, each GPU downloads its pieces straight into it, without the
    host copy out of the staging that a pageable out= costs: for a loop of batches, allocate the
    result once with this (or cupyx.empty_pinned, or a PyTorch tensor made with pin_memory=True
    passed as its NumPy view, tensor.numpy()) and pass it as out=.
    Pinning is slow (about a second per 10 GB) and takes memory from the system: reuse it."""
    if np.dtype(dtype) != np.float32:
        raise ValueError(f"empty_pinned holds float32 (what the GPUs write), got {np.dtype(dtype)}")
    try:
        dims = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
    except (TypeError, ValueError):
        raise ValueError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if any(n < 0 for n in dims):
        raise ValueError(f"shape must not be negative, got {shape!r}")
    return _xcorr.empty_pinned(int(np.prod(dims, dtype=np.int64))).reshape(dims)


def clear_cache():
    """Frees the plans correlate2d keeps for repeated calls (and their device workspace), and what
    calls with devices= or chunk= keep per GPU for the next call on the same problem: its plans,
    device buffers and pinned host staging (two pieces of ~64 MB, two 4 MB upload buffers; for
    max_over_rights(devices=), each GPU after the first its result's arrays)."""
    _plans.clear()
    _spare_parts.clear()
    _xcorr.release_batch_buffers()


def correlate2d(left, right, mode="full", *, max_shift=None, shifts=None, normalize=None, form=None,
                algorithm="auto", precision="fp32", params=None, out=None, stream=None, devices=None, chunk=None,
                split=None):
    """Cross-correlation of 2-D arrays or stacks of them, as scipy.signal.correlate2d(left, right, mode):

        C[y, x] = sum_{r,c} left[r + dy, c + dx] * right[r, c],  dy = y - (hR - 1), dx = x - (wR - 1)

    i.e. correlate2d(a, b) == scipy.signal.correlate2d(a, b) for 2-D a, b (mode full, valid or same).
    max_shift=s or (sy, sx): only the shifts |dy| <= sy, |dx| <= sx (the full output cropped,
    zero-extended); shifts=((dy0, dy1), (dx0, dx1)): any rectangle of shifts. Stacks as leading
    dimensions; the form and the result's shape as the module docstring says.

    normalize (docs/CONVENTIONS.md, "Normalization"): None or "none", the sums above; "zncc", per
    shift the Pearson correlation coefficient of the two overlapping parts (in [-1, 1]; 0 where
    the overlap is empty or either part is constant; in the valid window, OpenCV's
    TM_CCOEFF_NORMED); "zero-lag", C / C(0, 0) per pair (0 everywhere where C(0, 0) = 0). Any
    algorithm computes them: its raw correlation, then the normalization's epilogue on the GPU;
    within 1e-4 (absolute) of float64.

    Arrays: CuPy and PyTorch CUDA float32 arrays are used in place (non-contiguous ones are copied
    first) and the result is the same kind of array, computed on the current stream unless stream=
    names another; NumPy arrays (float32 or float64) are copied to the GPU and the float32 result
    back. out= is a preallocated result (shape, float32, C-contiguous; it is returned).
    algorithm: "auto" (xcorr.explain says what it picks), a name from xcorr.algorithms(), or
    "reference": the float64 CPU reference, on any machine, returning float64 NumPy.

    devices= "all" or a list of CUDA device indices, and/or chunk=N: a batch in host (NumPy) arrays
    split across those GPUs (equal runs of output matrices, one thread per GPU) and into pieces of
    at most N output matrices (default: about 64 MB of output each, fewer where two in flight do not
    fit; a GPU's copies of one piece overlap the kernels of the next), so batches larger than one
    GPU's memory run piece by piece; returns float32 NumPy (out= a NumPy array, or None). An out=
    in page-locked memory (xcorr.empty_pinned) is written by the GPUs directly, no host copy. A
    chunk below one left's outputs (n-to-m: M) uploads the rights again for every piece: slow.
    split= (with devices= or chunk=, n-to-m), where a GPU's whole lefts take more than one piece:
    "lefts" cuts its run into pieces of whole lefts with every right; "blocks" into blocks of all
    its lefts and a run of the rights (each right uploaded and transformed once; the first piece
    needs part of them: faster where the host memory is page-locked); "auto" (default, None)
    blocks where out= or right is page-locked (xcorr.empty_pinned) or where several GPUs divide the
    rights (n-to-m whose right stack holds more data than its lefts: each GPU takes every left and
    its run of the rights), lefts otherwise.

    Raises ValueError for bad shapes, dtypes, windows or names, xcorr.GPUMemoryError (a MemoryError
    and a ValueError) where the problem does not fit the GPU's free memory, xcorr.NoGPUError without
    a usable GPU (its message says that algorithm="reference" computes the same on the CPU),
    xcorr.CudaError when CUDA fails.
    """
    if devices is not None or chunk is not None or split is not None:
        return _batched(left, right, out, stream, devices, chunk, split, mode=mode, max_shift=max_shift, shifts=shifts,
                        normalize=normalize, form=form, algorithm=algorithm, precision=precision, params=params,
                        dims=2, max_lag=None, lags=None)
    fast = None if algorithm == "reference" else _gpu_arrays(left, right, stream)
    if fast is not None:
        # The fast path: a plan of the cache for the same arrays' shapes, device and stream and
        # the same options, found without the general path's checks (the plan's call checks the
        # arrays; a miss goes the general way, which checks everything and fills the cache).
        lib, dev, handle = fast
        try:
            plan = _plans.get((mode, normalize, form, algorithm, precision, left.shape, right.shape, dev, handle)
                              if max_shift is None and shifts is None and params is None else  # _key, inlined
                              _key(mode, max_shift, shifts, normalize, form, algorithm, precision, params,
                                   left.shape, right.shape, dev, handle))
        except TypeError:  # an unhashable option: the general path says what is wrong with it
            plan = None
        if plan is not None:
            result = plan._torch(lib, left, right, out, handle) if lib is _arrays.TORCH else \
                plan._cupy(lib, left, right, out, handle)
            # None: an array the fast path does not take as it is; the plan's general path
            # copies it or says what is wrong.
            return result if result is not None else plan._call(left, right, out, handle)
    left, right, kl, kr = _as_arrays(left, right)
    lshape, rshape = _shape_of(left, "left"), _shape_of(right, "right")
    device, handle = _device_and_stream(left, right, kl, kr, algorithm, stream)
    # The arrays' own shape objects (torch.Size, tuples) as the fast path looks them up.
    key = _key(mode, max_shift, shifts, normalize, form, algorithm, precision, params, left.shape, right.shape,
               device, handle)
    plan = _cached_plan(key, lambda: _plan_for(left, kl, right, kr, out, device, lshape, rshape, mode=mode,
                                               max_shift=max_shift, shifts=shifts, normalize=normalize, form=form,
                                               algorithm=algorithm, precision=precision, params=params, dims=2,
                                               max_lag=None, lags=None))
    return plan(left, right, out=out, stream=handle)


def _gpu_arrays(left, right, stream):
    """The fast paths' first step (correlate2d's, the reductions'): (library, device, stream handle)
    for two arrays of one GPU library on one device, PyTorch CUDA tensors or CuPy arrays, the
    stream being the caller's current one there unless given; None for anything else, which the
    general path converts, checks and explains. The library is _arrays.TORCH or _arrays.CUPY."""
    t = type(left)
    if t is not type(right):
        return None
    T, C = _arrays.TORCH, _arrays.CUPY
    if T is not None and t is T.Tensor:
        dev = left.get_device()
        if dev < 0 or right.get_device() != dev:
            return None
        if stream is None:
            stream = T.stream(dev)  # the caller's current stream, as stream_handle takes it
        elif type(stream) is not int or stream < 0:
            stream = _arrays.stream_handle(stream, "torch", dev)
        return T, dev, stream
    if C is not None and t is C.ndarray:
        dev = left.data.device_id
        if right.data.device_id != dev:
            return None
        if stream is None:
            stream = C.current_stream().ptr
        elif type(stream) is not int or stream < 0:
            stream = _arrays.stream_handle(stream, "cupy", dev)
        return C, dev, stream
    return None


def _plan_for(left, kl, right, kr, out, device, lshape, rshape, **setup):
    """A new plan for a call's arrays: its spec, then the arrays' dtypes and out= against it, then
    the device plan, so that a bad array is a ValueError on any machine (not NoGPUError) and no
    workspace is allocated for a call that is refused. `setup`: Plan._setup's keywords."""
    plan = Plan.__new__(Plan)
    plan._setup(lshape, rshape, **setup)
    plan._check_arrays(left, kl, right, kr, out)
    plan._attach(device)
    return plan


def _as_arrays(left, right):
    """The two arrays with their kinds ("numpy", "torch", "cupy", ...); anything NumPy reads as
    an array becomes one."""
    kl, kr = _arrays.kind_of(left), _arrays.kind_of(right)
    if kl == "numpy":
        left = np.asarray(left)
    if kr == "numpy":
        right = np.asarray(right)
    return left, right, kl, kr


def _device_and_stream(left, right, kl, kr, algorithm, stream):
    """The device the call runs on (the first GPU array's; None for the reference) and the stream
    handle (`stream`, or that array library's current stream)."""
    dl, dr = _arrays.device_of(left, kl), _arrays.device_of(right, kr)
    if algorithm == "reference":
        if stream is not None:
            _arrays.stream_handle(stream, kl, None)  # a bad stream= is refused here too
        return None, None
    device = dl if dl is not None else dr
    return device, _arrays.stream_handle(stream, kl if dl is not None else kr, device)


def _cached_plan(key, make):
    """The plan cached under `key`, else make() (cached unless the key is unhashable: an option no
    valid plan has, and make() says what is wrong with it). One plan per stream: a plan must not
    run on two streams at once (the stream is in the key)."""
    try:
        with _plans_lock:
            plan = _plans.get(key)
    except TypeError:
        key = plan = None
    if plan is None:
        plan = make()  # short of GPU memory, it frees this cache first (_freeing_the_cache_if_short)
        if key is not None:
            with _plans_lock:  # the lock around the cache alone: threads make their plans at once
                if len(_plans) >= _PLAN_CACHE:
                    _plans.pop(next(iter(_plans)))
                _plans[key] = plan
    return plan


def _freeing_the_cache_if_short(make):
    """make() (a device plan); if it finds too little GPU memory while the caches hold some (the
    calls' plans, up to 16 with their device workspace, a reduced plan's scratch gigabytes; what
    devices=/chunk= calls keep per GPU), made once more after clear_cache(): the caches must not be
    what makes a call or a new Plan fail. Another error, or a second failure, is raised."""
    try:
        return make()
    except (ValueError, RuntimeError) as e:
        if not _out_of_gpu_memory(e) or not (_plans or _xcorr.batch_buffer_bytes()):
            raise
    clear_cache()  # the plans' destructors free their device workspace
    return make()


def _out_of_gpu_memory(error):
    """Whether a plan's error says the GPU's memory was short (cuda_check.cpp: "not enough GPU
    memory" for a failed allocation; cuFFT's internal error creating a plan larger than the free
    memory, which it reports so, says how much was free; the driver's "out of memory")."""
    text = str(error)
    return any(s in text for s in ("not enough GPU memory", "MiB of GPU memory free", "out of memory"))


def _key(mode, max_shift, shifts, normalize, form, algorithm, precision, params, lshape, rshape, device, handle):
    """correlate2d's plan cache key: the options, the arrays' shapes (their own shape objects,
    torch.Size or tuples), the device and the stream. Equal only for options that mean the same
    plan: strings and None as they are (nothing else equals a string; an unhashable option raises
    TypeError when looked up), a number with its type, so that max_shift=True or 1.0 never finds
    the plan of a valid 1 and skips the check that refuses it."""
    if max_shift is None and shifts is None and params is None:  # the fast path inlines this case
        return (mode, normalize, form, algorithm, precision, lshape, rshape, device, handle)
    return (mode, normalize, form, algorithm, precision, lshape, rshape, device, handle, _hashable(max_shift),
            _hashable(shifts), _hashable(params))


def _hashable(v):
    """An option as a cache key's part (_key says why numbers keep their type). Every call of a
    cached plan keys its options again, so the common types are tested first."""
    t = type(v)
    if v is None or t is str:
        return v
    if t is int:
        return (int, v)
    if isinstance(v, (list, tuple)):
        return tuple(map(_hashable, v))
    if isinstance(v, dict):
        return tuple(sorted((str(k), str(x)) for k, x in v.items()))
    return (t, v)


def correlate1d(left, right, mode="full", *, max_lag=None, lags=None, normalize=None, form=None, algorithm="auto",
                precision="fp32", params=None, out=None, stream=None, devices=None, chunk=None, split=None):
    """Cross-correlation of 1-D signals or stacks of them, as scipy.signal.correlate(left, right, mode):

        C[k] = sum_t left[t + d] * right[t],  d = k - (len(right) - 1)

    i.e. correlate1d(a, b) == scipy.signal.correlate(a, b) for 1-D a, b (left is in1, nothing is
    flipped; mode "full", "valid" or "same"). "same" is len(left) long and scipy.signal.correlate's:
    lags -(m // 2) .. -(m // 2) + n - 1 (n, m = len(left), len(right)), which for an even m is one
    lag below correlate2d's "same" of the 1 x n matrices.
    max_lag=s: only the lags -s..s (the full output cropped, zero-extended: 2s + 1 values, lag 0 in
    the middle); lags=(d0, d1): the lags d0..d1 inclusive. A signal is a 1 x n matrix
    (CONVENTIONS.md, "One-dimensional signals"), so every form, window and normalization is
    correlate2d's: stacks (count, n) as leading dimensions, with the same form inference (1-D x
    (nR, n) one-to-many, result (nR, n_out); (nL, n) x 1-D n-to-m, result (nL, n_out); two stacks
    need form="n-to-m", result (nL, nR, n_out), or form="n-to-mn", result (nR, n_out)).

    normalize None, "zncc" (Pearson's coefficient per lag of the overlapping parts) or "zero-lag"
    (C / C(0) per pair), algorithm, precision, params, out, stream, devices, chunk and split as
    correlate2d's. CuPy and
    PyTorch arrays are used in place (a 1-D array needs no reshaping copy); algorithm="reference"
    is the float64 NumPy reference on any machine. Raises ValueError for bad shapes (a 3-D array:
    use correlate2d), dtypes, windows or names, xcorr.NoGPUError, xcorr.CudaError.
    """
    if devices is not None or chunk is not None or split is not None:
        return _batched(left, right, out, stream, devices, chunk, split, mode=mode, max_shift=None, shifts=None,
                        normalize=normalize, form=form, algorithm=algorithm, precision=precision, params=params,
                        dims=1, max_lag=max_lag, lags=lags)
    left, right, kl, kr = _as_arrays(left, right)
    lshape, rshape = _signal_shape(left, "left"), _signal_shape(right, "right")
    device, handle = _device_and_stream(left, right, kl, kr, algorithm, stream)
    # Its own keys in correlate2d's cache: a (count, n) stack has the shape of a matrix.
    key = ("correlate1d",) + _key(mode, max_lag, lags, normalize, form, algorithm, precision, params, left.shape,
                                  right.shape, device, handle)
    plan = _cached_plan(key, lambda: _plan_for(left, kl, right, kr, out, device, lshape, rshape, mode=mode,
                                               max_shift=None, shifts=None, normalize=normalize, form=form,
                                               algorithm=algorithm, precision=precision, params=params, dims=1,
                                               max_lag=max_lag, lags=lags))
    return plan(left, right, out=out, stream=handle)


def peaks2d(left, right, k=1, *, min_distance=0, subpixel="parabolic", mode="full", max_shift=None, shifts=None,
            normalize=None, form=None, algorithm="auto", precision="fp32", params=None, stream=None):
    """The k largest values of each correlation map of correlate2d(left, right, ...) and where they
    are, without the maps (docs/CONVENTIONS.md, "Reductions: peaks and maxima"):

        value, shift, subpixel = xcorr.peaks2d(frame_a, frame_b, max_shift=8, subpixel="gaussian")

    Returns Peaks(value, shift, subpixel): value (..., k) float32, descending (equal values: the
    smaller shift in the window's row-major order); shift (..., k, 2) int32 (dy, dx), the shift of
    correlate2d's definition; subpixel (..., k, 2) float32, the shift plus a three-point fit along
    each axis through the peak and its neighbours ("parabolic"; "gaussian": on ln c where all three
    are positive, else parabolic; "none": the integer shift), 0 on the window's edge, |offset| <= 0.5.
    "..." is correlate2d's leading dimensions for the same inputs (one-to-one: none).
    min_distance r: after each peak every value within Chebyshev distance r of it is dropped (0: the
    plain k largest). NaN values are never taken; where fewer than k remain, the rest are absent:
    value NaN, shift (0, 0), subpixel NaN (k larger than the window is allowed).

    mode, max_shift, shifts, normalize, form, algorithm, precision, params and stream as
    correlate2d's (the window and normalization are those of the maps searched). Arrays: NumPy in,
    NumPy out; CuPy and PyTorch CUDA arrays in, arrays of that library on the device out.
    algorithm="reference": the float64 reference on the CPU (float64 values and sub-pixel shifts).
    Raises ValueError for k < 1, min_distance < 0, an unknown subpixel and whatever correlate2d
    refuses; xcorr.NoGPUError, xcorr.CudaError.
    """
    return _reduced_entry(left, right, None, stream, 0, dims=2, mode=mode, max_shift=max_shift, shifts=shifts,
                          normalize=normalize, form=form, algorithm=algorithm, precision=precision, params=params,
                          max_lag=None, lags=None, reduce="peaks", k=k, min_distance=min_distance, subpixel=subpixel,
                          stats=False)


def peaks1d(left, right, k=1, *, min_distance=0, subpixel="parabolic", mode="full", max_lag=None, lags=None,
            normalize=None, form=None, algorithm="auto", precision="fp32", params=None, stream=None):
    """peaks2d for 1-D signals: the k largest values of each output of correlate1d(left, right, ...)
    and their lags, without the outputs. Returns Peaks(value (..., k) float32, shift (..., k) int32
    lags, subpixel (..., k) float32 lags with the fit's offset), "..." being correlate1d's leading
    dimensions; windows (mode, including scipy's "same", max_lag, lags) and every other argument as
    correlate1d's and peaks2d's. min_distance is in lags. (With CuPy or PyTorch arrays, shift and
    subpixel are views of the lag column of the (..., k, 2) arrays the library writes.)

        value, lag, sub = xcorr.peaks1d(trace_a, trace_b, max_lag=200)
    """
    return _reduced_entry(left, right, None, stream, 0, dims=1, mode=mode, max_shift=None, shifts=None,
                          normalize=normalize, form=form, algorithm=algorithm, precision=precision, params=params,
                          max_lag=max_lag, lags=lags, reduce="peaks", k=k, min_distance=min_distance,
                          subpixel=subpixel, stats=False)


def max_over_rights(left, rights, *, mode="full", max_shift=None, shifts=None, normalize=None, form=None,
                    stats=False, algorithm="auto", precision="fp32", params=None, out=None, first_index=0,
                    stream=None, devices=None):
    """Per shift, the largest correlation over a stack of rights and which right gives it, without
    one map per right (2-D template matching's "maximum intensity projection"):

        best = xcorr.max_over_rights(image, templates, mode="valid", normalize="zncc")
        best.value[y, x], best.index[y, x]   # the best score at (y, x) and its template

    left (h, w) with rights (M, h', w'): value and index (H, W), the maps' shape (correlate2d's
    window); lefts (N, h, w): (N, H, W), each left over all the rights (n-to-m; form="n-to-mn"
    pairs right k with left k mod N, and left i's rights are then i, i + N, ...). value float32
    (NaN where every right's value is NaN), index int32 (the right's position in `rights` plus
    first_index; the smallest among equal values; -1 where none). stats=True also returns the sum
    and the sum of squares over the rights (float64, NaN-propagating), for per-position z-scores:
    MaxOverRightsStats(value, index, sum, sumsq).

    Streaming the rights in batches: pass the previous result as out= (it is continued in place and
    returned) and first_index= the number of the batch's first right; the batches give the answer
    of one call over all of them:

        best = None
        for j in range(0, M, 16):
            best = xcorr.max_over_rights(image, templates[j:j + 16], out=best, first_index=j)

    The rights must be a stack ((1, h', w') for one); one-to-one has nothing to reduce over
    (ValueError). Other arguments and the kinds of arrays as peaks2d's; algorithm="reference": the
    float64 reference (float64 values, NumPy out= only).

    devices="all" or a list of CUDA device indices: host (NumPy) arrays, the rights split across
    those GPUs in the list's order (a run of them each, one thread per GPU; "all" on a one-GPU
    machine is that one GPU), each GPU streaming its run through in batches (the left uploaded once,
    the running maps kept on it, the next batch's upload overlapping the current one's work: its
    memory is the left, the maps, two batches of about 64 MB and its plans, whatever the count of
    rights); their results come to the host and are merged in the runs' order: the largest value,
    the smallest index among equal ones, sums added. The answer is one call's over all the rights:
    the same values and indices, the sums up to float64 summation order. The runs are cut where one
    call cuts its chunks of rights (as many maps as fit 1 GiB: 16 of 4096 x 4096), so that each
    chunk is computed as one call computes it: rights whose maps fit one chunk run on one GPU.
    out= (NumPy arrays) and first_index= continue an earlier result as above; returns NumPy.
    ValueError for devices= with algorithm="reference", a stream= or params left=fixed, an empty
    list, a device that does not exist, or GPU arrays.
    """
    if devices is not None:
        return _max_over_rights_devices(left, rights, out, stream, first_index, devices, dims=2, mode=mode,
                                        max_shift=max_shift, shifts=shifts, normalize=normalize, form=form,
                                        algorithm=algorithm, precision=precision, params=params, max_lag=None,
                                        lags=None, reduce="max_over_rights", k=1, min_distance=0,
                                        subpixel="parabolic", stats=stats)
    return _reduced_entry(left, rights, out, stream, first_index, dims=2, mode=mode, max_shift=max_shift,
                          shifts=shifts, normalize=normalize, form=form, algorithm=algorithm, precision=precision,
                          params=params, max_lag=None, lags=None, reduce="max_over_rights", k=1, min_distance=0,
                          subpixel="parabolic", stats=stats)


def _first_index(v):
    v = _integer(v, "first_index")
    if not 0 <= v <= INT_MAX:
        raise ValueError(f"first_index must be an integer from 0 to 2^31 - 1, got {v}")
    return v


def _reduced_entry(left, right, out, stream, first_index, **setup):
    """peaks2d, peaks1d, max_over_rights: a cached reduced plan for the arrays, then its call.
    `setup`: Plan._setup's keywords."""
    first_index = _first_index(first_index)  # before a new plan's GPU work
    fast = None if setup["algorithm"] == "reference" else _gpu_arrays(left, right, stream)
    if fast is not None:  # as correlate2d's: a cached plan for these arrays, found without the checks
        lib, dev, handle = fast
        try:
            plan = _plans.get(_reduced_key(setup, left.shape, right.shape, dev, handle))
        except TypeError:  # an unhashable option: the general path says what is wrong with it
            plan = None
        if plan is not None:
            # straight to the plan's fast path for the arrays' library (first_index is checked above)
            fast_path = plan._torch_reduced if lib is _arrays.TORCH else plan._cupy_reduced
            result = fast_path(lib, left, right, out, handle, first_index)
            if result is not None:
                return result
            return plan(left, right, out=out, stream=handle, first_index=first_index)
    left, right, kl, kr = _as_arrays(left, right)
    shape_of = _shape_of if setup["dims"] == 2 else _signal_shape
    lshape, rshape = shape_of(left, "left"), shape_of(right, "right")
    device, handle = _device_and_stream(left, right, kl, kr, setup["algorithm"], stream)
    key = _reduced_key(setup, left.shape, right.shape, device, handle)
    plan = _cached_plan(key, lambda: _plan_for(left, kl, right, kr, out, device, lshape, rshape, **setup))
    return plan(left, right, out=out, stream=handle, first_index=first_index)


def _reduced_key(s, lshape, rshape, device, handle):
    """A reduced call's plan cache key (`s`: Plan._setup's keywords): the reduction's options, then
    correlate2d's key of the window, the arrays' shapes, the device and the stream."""
    dims = s["dims"]
    return (("reduce", dims, s["reduce"], _hashable(s["k"]), _hashable(s["min_distance"]), _hashable(s["subpixel"]),
             _hashable(s["stats"]))
            + _key(s["mode"], s["max_shift"] if dims == 2 else s["max_lag"], s["shifts"] if dims == 2 else s["lags"],
                   s["normalize"], s["form"], s["algorithm"], s["precision"], s["params"], lshape, rshape, device,
                   handle))


def _devices_text(devices):
    """devices= ("all" or a list of CUDA device indices) as run_batch and parse_devices take it
    ("all", "0,1"), checked without a GPU (parse_devices checks that they exist)."""
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices must be 'all' or a list of CUDA device indices, got {devices!r}")
        return "all"
    try:
        devs = list(devices)
    except TypeError:
        raise ValueError(f"devices must be 'all' or a list of CUDA device indices, got {devices!r}") from None
    if not devs or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0 for d in devs):
        raise ValueError(f"devices must be 'all' or a non-empty list of CUDA device indices, got {devices!r}")
    return ",".join(str(int(d)) for d in devs)


def _batched(left, right, out, stream, devices, chunk, split, **setup):
    """correlate2d/correlate1d with devices= or chunk=: host arrays through run_batch (batch.hpp);
    `setup` is Plan._setup's keywords."""
    if split is not None and split not in ("auto", "lefts", "blocks"):
        raise ValueError(f"split must be 'auto', 'lefts' or 'blocks', got {split!r}")
    if split is not None and devices is None and chunk is None:
        raise ValueError("split= cuts a batch run with devices= or chunk=: give one of them")
    if setup["algorithm"] == "reference":
        raise ValueError("devices= and chunk= split a GPU run; the reference runs on the CPU (leave them out)")
    if stream is not None:
        raise ValueError("devices= and chunk= run from host arrays on streams of their own: give no stream=")
    left, right, kl, kr = _as_arrays(left, right)
    if kl != "numpy" or kr != "numpy":
        raise ValueError(f"devices= and chunk= take host (NumPy) arrays, got {kl} and {kr}: a batch on one GPU "
                         "already is one call without them")
    text = "" if devices is None else _devices_text(devices)
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1):
        raise ValueError(f"chunk must be a positive number of output matrices, got {chunk!r}")
    plan = Plan.__new__(Plan)  # the spec and shapes only: run_batch builds the plans on each GPU
    shape_of = _shape_of if setup["dims"] == 2 else _signal_shape
    plan._setup(shape_of(left, "left"), shape_of(right, "right"), **setup)
    left, right = plan._input(left, "numpy", None, "left"), plan._input(right, "numpy", None, "right")
    if out is None:
        out = np.empty(plan.out_shape, np.float32)
    elif _arrays.kind_of(out) != "numpy":
        raise ValueError(f"out= with devices= or chunk= must be a NumPy array, got {_arrays.kind_of(out)}"
                         + (" (a PyTorch CPU tensor's .numpy() is a NumPy view of the same memory, page-locked "
                            "where the tensor is)" if _arrays.kind_of(out) == "torch" else ""))
    else:
        plan._check_out(out)
    global last_batch
    with _gpu_work():
        pieces, seconds = _xcorr.run_batch(plan._spec, left.reshape(-1), right.reshape(-1), out.reshape(-1), text,
                                           0 if chunk is None else int(chunk), split or "auto")
    last_batch = {"pieces": pieces, "seconds": seconds}
    return out


# The last devices=/chunk= call's pieces [(device, first output, outputs, algorithm)] and each
# device's phases in seconds [{device, start, setup, pipeline, teardown, finish}, with direct, reused
# and split] (scripts/batch-scaling records them); None before the first. Module state: with calls from
# several threads, one of theirs.
last_batch = None


# --- max_over_rights(devices=): the rights split across GPUs, the results merged on the host -----

# lib/reduce/reducer.cpp's budget for one chunk's maps (its default: at most 1 GiB, and a quarter of
# the free device memory): one call over M rights computes them in chunks of this many maps; the
# GPUs' runs and batches are cut at the same chunk boundaries, so that every chunk is the inner
# problem one call computes (the same algorithm, the same rounding). Where a GPU has less than
# 4 GiB free, its chunks are smaller and values may differ from one call's in their last bits.
REDUCE_CHUNK_BYTES = 1 << 30
# The rights one device call uploads at once (about; whole chunks, at least one): two in flight,
# the first one's upload before any work (64 MB: ~5 ms), each call the left's transform again.
RIGHTS_BATCH_BYTES = 64 << 20
# The last max_over_rights(devices=) call's runs [(device, first right, rights)] (per left; n-to-mn:
# groups); None before the first. Module state, as last_batch.
last_devices_run = None


def _chunk_units(form, nL, units, map_elems, budget=None):
    """The rights per left of one chunk of a reduced max_over_rights plan over `units` rights per
    left (n-to-mn: groups of nL rights) whose maps hold map_elems values each, as
    reduce::chunks_of cuts it (its cap: budget / the bytes of one map, at least 1)."""
    cap = max((REDUCE_CHUNK_BYTES if budget is None else budget) // (map_elems * 4), 1)
    if form == "one-to-many":
        return min(units, cap)
    return min(max(cap // nL, 1), units)  # n-to-m: every left, runs of rights; n-to-mn: runs of groups


def _device_runs(units, chunk, count):
    """Runs [(first, end)] of `units` rights for at most `count` devices, in order: whole chunks of
    `chunk` (the last one may be shorter), as even as the chunks allow; fewer runs where there are
    fewer chunks than devices."""
    chunks = -(-units // chunk)
    runs = []
    for d in range(count):
        a, b = chunks * d // count, chunks * (d + 1) // count
        if a < b:
            runs.append((a * chunk, min(b * chunk, units)))
    return runs


def _merge_max_over_rights(acc, parts, workers=1, block=1 << 20):
    """Merges the maxima over later runs of rights into `acc` (value, index[, sum, sumsq]: C-contiguous
    NumPy arrays, changed in place and returned): `parts`, each of the same arrays, in the rights'
    order, each over rights after acc's and the earlier parts'. Per element a part's value is taken
    where it has one (index >= 0) and acc has none (index -1) or a smaller value, so that equal
    values keep the smaller index, as one call's fold does; sums and sums of squares are added.
    `workers` threads each merge a run of the elements (at least `block`; NumPy releases the GIL)."""
    if any(not isinstance(x, np.ndarray) or not x.flags.c_contiguous for x in acc):
        raise ValueError("the merged result must be C-contiguous NumPy arrays (changed in place)")
    flat = [x.reshape(-1) for x in acc]
    pflat = [[np.asarray(x).reshape(-1) for x in p] for p in parts]
    n = flat[0].size
    if any(len(p) != len(flat) or any(x.size != n for x in p) for p in pflat):
        raise ValueError("every part must hold the result's arrays, of its size")

    def merge(a, b):
        v, i = flat[0][a:b], flat[1][a:b]
        take = np.empty(b - a, bool)
        for p in pflat:
            pv, pi = p[0][a:b], p[1][a:b]
            np.greater(pv, v, out=take)
            take |= i < 0
            take &= pi >= 0
            np.copyto(v, pv, where=take)
            np.copyto(i, pi, where=take)
            for acc_sum, part_sum in zip(flat[2:], p[2:]):
                acc_sum[a:b] += part_sum[a:b]

    step = max(block, -(-n // max(workers, 1)))
    bounds = [(a, min(a + step, n)) for a in range(0, n, step)]
    if len(bounds) <= 1:
        for a, b in bounds:
            merge(a, b)
    else:
        from concurrent.futures import ThreadPoolExecutor  # here: an import the package's import skips
        with ThreadPoolExecutor(len(bounds)) as pool:
            for f in [pool.submit(merge, a, b) for a, b in bounds]:
                f.result()
    return acc


def _max_over_rights_devices(left, rights, out, stream, first_index, devices, **setup):
    """max_over_rights with devices=: the rights cut into runs of whole chunks (_device_runs), one
    thread per GPU streaming its run through its plans (PyPlan.max_over_rights_slice), the first
    GPU continuing out= where given, then the others' results merged into it in order."""
    if setup["algorithm"] == "reference":
        raise ValueError("devices= splits a GPU run; the reference runs on the CPU (leave it out)")
    if stream is not None:
        raise ValueError("devices= runs from host arrays on streams of its own: give no stream=")
    if isinstance(setup["params"], Mapping) and str(setup["params"].get("left", "")) == "fixed":
        raise ValueError("devices= uploads the left to each GPU every call: params left=fixed would trust a "
                         "transform of another call's left at the same address")
    text = _devices_text(devices)
    first_index = _first_index(first_index)
    left, rights, kl, kr = _as_arrays(left, rights)
    if kl != "numpy" or kr != "numpy":
        raise ValueError(f"devices= takes host (NumPy) arrays, got {kl} and {kr}: on one GPU, one call without "
                         "it takes them")
    plan = Plan.__new__(Plan)  # the spec and shapes only: each GPU builds its plans
    plan._setup(_shape_of(left, "left"), _shape_of(rights, "right"), **setup)
    plan._check_arrays(left, kl, rights, kr, out)
    if out is not None and any(_arrays.kind_of(x) != "numpy" for x in out):
        raise ValueError("out= with devices= must be NumPy arrays (an earlier result of devices=, or of host arrays)")
    left, rights = plan._input(left, "numpy", None, "left"), plan._input(rights, "numpy", None, "right")
    lshape, rshape = plan._matrix_shapes
    nL = lshape[0] if len(lshape) == 3 else 1
    group = nL if plan.form == "n-to-mn" else 1  # rights of the stack per right index
    units = rshape[0] // group
    if first_index + units > INT_MAX:
        raise ValueError(f"first_index {first_index} + {units} rights: an index beyond int32")
    map_elems = int(np.prod(plan.out_shape[-2:], dtype=np.int64))
    chunk = _chunk_units(plan.form, nL, units, map_elems)
    unit_bytes = group * rshape[1] * rshape[2] * 4
    batch = chunk * max(1, RIGHTS_BATCH_BYTES // (chunk * unit_bytes))
    with _gpu_work():
        devs = list(_xcorr.parse_devices(text, "devices="))
    runs = _device_runs(units, chunk, len(devs))
    dtypes = (np.float32, np.int32, np.float64, np.float64)
    names = MaxOverRightsStats if plan.stats else MaxOverRights
    result = out if out is not None else names(*(np.empty(shape, dt) for shape, dt in zip(plan.result_shape, dtypes)))
    spare_key = (plan.result_shape, plan.stats)
    with _plans_lock:
        spare = _spare_parts.pop(spare_key, [])[:len(runs) - 1]
    parts = [result] + spare + [names(*(_page_locked(shape, dt) for shape, dt in zip(plan.result_shape, dtypes)))
                                for _ in range(len(runs) - 1 - len(spare))]

    def device_plan(device, count):
        """The device's plan for batches of `count` rights per left, from the call cache (shared by
        the threads: _cached_plan locks the cache alone, so that the GPUs build their plans at once)."""
        rs = (count * group,) + tuple(rshape[1:])
        key = ("max_over_rights devices",) + _reduced_key(setup, tuple(left.shape), rs, device, None)
        return _cached_plan(key, lambda: _plan_for(left, "numpy", rights[:count * group], "numpy", None, device,
                                                   _shape_of(left, "left"), rs, **setup))

    def run(i):
        device, (u0, u1) = devs[i], runs[i]
        n = u1 - u0
        full = n if n <= batch else batch
        rest = 0 if n <= batch else n % batch
        p, q = device_plan(device, full), device_plan(device, rest) if rest else None
        arrays = parts[i] if plan.stats else tuple(parts[i]) + (None, None)
        with _gpu_work():
            p._plan.max_over_rights_slice(None if q is None else q._plan, left, rights[u0 * group:u1 * group],
                                          *arrays, i == 0 and out is not None, first_index + u0)

    global last_devices_run
    last_devices_run = [(devs[i], first_index + a, b - a) for i, (a, b) in enumerate(runs)]
    if len(runs) == 1:
        run(0)
    else:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(len(runs)) as pool:
            futures = [pool.submit(run, i) for i in range(len(runs))]
        for f in futures:
            f.result()  # the first GPU's error, in the devices' order
        _merge_max_over_rights(result, parts[1:], workers=min(os.cpu_count() or 1, 16))
        with _plans_lock:  # for the next call of these shapes (the last shapes' only)
            _spare_parts.clear()
            _spare_parts[spare_key] = parts[1:]
    return result


# The GPUs after the first's results of the last max_over_rights(devices=) call, page-locked (their
# downloads at the copy engines' speed, no pages to fault in), kept for the next call of the same
# shapes: {(result_shape, stats): [results]}; clear_cache() frees them.
_spare_parts = {}


def _page_locked(shape, dtype):
    """An uninitialised NumPy array in page-locked host memory (else pageable, where pinning fails)."""
    n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize // 4
    try:
        return _xcorr.empty_pinned(n).view(dtype).reshape(shape)
    except (RuntimeError, MemoryError):
        return np.empty(shape, dtype)


def algorithms():
    """Every algorithm of this build: name, family, summary, forms, windows, precision, tolerance
    and its tuning parameters (values, default, help); runs_here: whether it runs on the current
    GPU with the architectures this build holds (gpu_info()["built_archs"]), and not_here why not
    ("" where it runs; without a GPU, NoGPUError's reason). auto never picks one that does not."""
    return _xcorr.algorithms()


def gpu_info():
    """The GPU the plans run on (device 0 as the harness sees it); NoGPUError without one."""
    return _xcorr.gpu_info()


def explain(left, right, mode="full", *, max_shift=None, shifts=None, normalize=None, form=None, precision="fp32",
            gpu=None, dims=2, max_lag=None, lags=None):
    """What algorithm="auto" picks for these arrays (or shapes) and why, without running anything:
    {"algorithm", "params", "reason", "predicted_us", "gpu", "problem", "normalize", "candidates"}.
    gpu: the GPU name to decide for (default: this machine's; with no GPU, the cost model for an
    unmeasured one). Normalized (normalize="zncc" or "zero-lag"): auto picks the raw algorithm from
    the GPU's normalized measurements of the problem (else predicts it from the nearest ones, raw
    measurements counting farther), and the reason says that the normalization's epilogue runs
    after it. dims=1: 1-D signals (correlate1d's shapes and
    windows, max_lag= or lags=)."""
    p = Plan(left if not hasattr(left, "shape") else left.shape, right if not hasattr(right, "shape") else right.shape,
             mode, max_shift=max_shift, shifts=shifts, normalize=normalize, form=form, algorithm="reference",
             precision=precision, dims=dims, max_lag=max_lag, lags=lags)
    if gpu is not None and not isinstance(gpu, str):
        raise ValueError(f"gpu must be a GPU's name (as xcorr.gpu_info()['name'] gives it), got {gpu!r}")
    own_gpu = False
    if gpu is None:
        try:
            gpu = _xcorr.gpu_info()["name"]
            own_gpu = True
        except NoGPUError:
            gpu = ""
    candidates = _xcorr.auto_candidates(p._spec, gpu)
    if own_gpu:  # as auto on this GPU: those that do not run here are never picked
        here = {v["name"] for v in _xcorr.algorithms() if v["runs_here"]}
        candidates = [c for c in candidates if c["algorithm"] in here]
    if not candidates:
        raise ValueError(f"no algorithm of this build computes {p.description} at precision {precision}")
    best = dict(candidates[0])
    note = _xcorr.normalization_note(p.normalize)
    if note:
        best["reason"] = f"{best['reason']}; {note}"
    return dict(best, gpu=gpu or None, problem=p.description, normalize=p.normalize, candidates=candidates)


__all__ = ["CudaError", "MaxOverRights", "MaxOverRightsStats", "NoGPUError", "Peaks", "Plan", "algorithms", "clear_cache",
           "correlate1d", "correlate2d", "empty_pinned", "explain", "gpu_info", "max_over_rights", "peaks1d", "peaks2d"]
