"""xcorr: GPU cross-correlation of 2-D arrays, 1-D signals and stacks of them (NumPy, CuPy, PyTorch).

    import xcorr
    out = xcorr.correlate2d(left, right, mode="valid")   # as scipy.signal.correlate2d, on the GPU
    out = xcorr.correlate1d(x, y, max_lag=50)              # as scipy.signal.correlate, lags -50..50
    plan = xcorr.Plan(left.shape, right.shape, max_shift=8)
    out = plan(left, right)                                # repeated calls on the same shapes
    xcorr.explain(left, right)                             # which algorithm "auto" picks, and why

The definition, forms and windows are docs/CONVENTIONS.md of the repository.
"""
from ._api import (CudaError, NoGPUError, Plan, algorithms, clear_cache, correlate1d, correlate2d, empty_pinned,
                   explain, gpu_info)

try:
    from importlib.metadata import PackageNotFoundError, version
    __version__ = version("xcorr")
except PackageNotFoundError:  # imported from a build directory, not installed
    __version__ = "unknown"

__all__ = ["CudaError", "NoGPUError", "Plan", "algorithms", "clear_cache", "correlate1d", "correlate2d", "empty_pinned", "explain",
           "gpu_info", "__version__"]
