"""xcorr: GPU cross-correlation of 2-D arrays, 1-D signals and stacks of them (NumPy, CuPy, PyTorch).

    import xcorr
    out = xcorr.correlate2d(left, right, mode="valid")   # as scipy.signal.correlate2d, on the GPU
    out = xcorr.correlate1d(x, y, max_lag=50)              # as scipy.signal.correlate, lags -50..50
    plan = xcorr.Plan(left.shape, right.shape, max_shift=8)
    out = plan(left, right)                                # repeated calls on the same shapes
    xcorr.explain(left, right)                             # which algorithm "auto" picks, and why
    value, shift, sub = xcorr.peaks2d(left, right, k=3)    # the maps' peaks, without the maps
    best = xcorr.max_over_rights(image, templates)         # per shift the best template and its score

The definition, forms and windows are docs/CONVENTIONS.md of the repository.
"""


def _load_extension():
    """Imports xcorr._xcorr. A binary wheel finds cuFFT in NVIDIA's wheel beside the package (its
    RPATH: nvidia/cu13/lib, nvidia/cufft/lib); where that wheel sits in another site directory
    (pip install --user, --target, a layered environment), the library the loader names is loaded
    from there first and the import tried again."""
    try:
        from . import _xcorr
        return _xcorr
    except ImportError as e:
        import re
        m = re.search(r"libcufft\.so\.\d+", str(e))
        if not m:
            raise
        lib = _nvidia_library(m.group(0))
        if lib is None:
            raise ImportError(f"{e}; xcorr needs cuFFT ({m.group(0)}): pip install nvidia-cufft (CUDA 13; "
                              "nvidia-cufft-cu12 for CUDA 12), or put the CUDA toolkit's lib64 on LD_LIBRARY_PATH") from None
        import ctypes
        ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
        from . import _xcorr
        return _xcorr


def _nvidia_library(name):
    import importlib.util
    import os
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        for sub in ("cu13/lib", "cufft/lib"):
            path = os.path.join(base, sub, name)
            if os.path.isfile(path):
                return path
    return None


__version__ = getattr(_load_extension(), "__version__", "unknown")  # the build's: scripts/version

from ._api import (CudaError, GPUMemoryError, MaxOverRights, MaxOverRightsStats, NoGPUError, Peaks, Plan,  # noqa: E402
                   algorithms, clear_cache, correlate1d, correlate2d, empty_pinned, explain, gpu_info, max_over_rights,
                   peaks1d, peaks2d)

__all__ = ["CudaError", "GPUMemoryError", "MaxOverRights", "MaxOverRightsStats", "NoGPUError", "Peaks", "Plan",
           "algorithms", "clear_cache", "correlate1d", "correlate2d", "empty_pinned", "explain", "gpu_info",
           "max_over_rights", "peaks1d", "peaks2d", "__version__"]
