"""Shared by the examples: which way to run xcorr here, a timer, and results back to NumPy."""
import time

import numpy as np

import xcorr


def xcorr_setup(force_reference):
    """(algorithm, array module or None): auto on the GPU when there is one (PyTorch tensors when
    PyTorch has CUDA, else NumPy copied to the GPU), else the float64 CPU reference."""
    if not force_reference:
        try:
            xcorr.gpu_info()
        except xcorr.NoGPUError as e:
            print(f"no GPU ({e}): running algorithm='reference' on the CPU")
        else:
            try:
                import torch
                if torch.cuda.is_available():
                    return "auto", torch
            except ImportError:
                pass
            return "auto", None
    return "reference", None


def timed(fn, repeat=3):
    """(result, best seconds of `repeat` runs); synchronises PyTorch's GPU work."""
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        try:
            import torch
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except ImportError:
            pass
        best = min(best, time.perf_counter() - t0)
    return result, best


def torch_or_none(label):
    """(torch, "cuda" or "cpu") for the PyTorch comparison, or None after printing `label` with
    the reason (PyTorch is not installed)."""
    try:
        import torch
    except ImportError:
        print(f"{label:<21} (PyTorch is not installed)")
        return None
    return torch, "cuda" if torch.cuda.is_available() else "cpu"


def to_numpy(x):
    """A PyTorch tensor (on any device) or an array NumPy reads, as NumPy."""
    return x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x)
