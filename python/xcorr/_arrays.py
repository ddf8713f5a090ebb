"""Which kind of array the caller gave (NumPy, PyTorch, CuPy), where it lives, which stream is
current for it, and how to allocate a result of the same kind. PyTorch and CuPy are never
imported here unless the caller's arrays come from them."""

import numpy as np

# DLPack device types (dlpack.h).
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13

# What the fast call path (Plan.__call__, correlate2d) needs of PyTorch and CuPy: filled in by
# kind_of when it first meets one of their arrays (the library is imported by then), so that
# afterwards `type(x) is TORCH.Tensor` recognizes a tensor without importing anything.
TORCH = None
CUPY = None


class _Torch:
    def __init__(self, torch):
        self.Tensor, self.float32, self.strided, self.empty = torch.Tensor, torch.float32, torch.strided, torch.empty
        self.int32, self.float64 = torch.int32, torch.float64  # a reduced plan's index/shift and sums
        # The current stream's handle without building a torch.cuda.Stream (what
        # torch.cuda.current_stream(device).cuda_stream returns; inductor's generated code calls it).
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.stream = raw if raw is not None else (lambda device: torch.cuda.current_stream(device).cuda_stream)
        self._devices = {}
        self._torch = torch

    def device(self, index):
        d = self._devices.get(index)
        if d is None:
            d = self._devices[index] = self._torch.device("cuda", index)
        return d


class _Cupy:
    def __init__(self, cupy):
        self.ndarray, self.float32, self.empty = cupy.ndarray, np.dtype(np.float32), cupy.empty
        self.int32, self.float64 = np.dtype(np.int32), np.dtype(np.float64)  # a reduced plan's index/shift and sums
        self.current_stream, self.get_device = cupy.cuda.get_current_stream, cupy.cuda.runtime.getDevice


def _meet(module):
    """Fills TORCH or CUPY in when `module` (an array type's top module) is that library."""
    global TORCH, CUPY
    if module == "torch" and TORCH is None:
        import torch
        TORCH = _Torch(torch)
    elif module == "cupy" and CUPY is None:
        import cupy
        CUPY = _Cupy(cupy)


def kind_of(x):
    """'torch', 'cupy', 'numpy', or 'dlpack' (another array with __dlpack__)."""
    module = type(x).__module__.split(".")[0]
    if module in ("torch", "cupy"):
        _meet(module)
        return module
    if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack_device__"):
        return "numpy"
    return "dlpack"


_MET = set()  # the array types libraries_for has seen


def libraries_for(t):
    """(TORCH, CUPY), one of them filled in first where `t` is its array type and it is not known
    yet: a plan's first call with PyTorch or CuPy arrays takes the fast path too (a set lookup
    after a type's first call)."""
    if t not in _MET:
        _meet(t.__module__.split(".")[0])
        _MET.add(t)
    return TORCH, CUPY


def device_of(x, kind):
    """The CUDA device index of a GPU array, or None for host memory."""
    if kind == "numpy":
        return None
    dev_type, dev_id = x.__dlpack_device__()
    if int(dev_type) in (DL_CUDA, DL_CUDA_MANAGED):
        return int(dev_id)
    if int(dev_type) in (DL_CPU, DL_CUDA_HOST):
        return None
    raise ValueError(f"arrays on DLPack device type {int(dev_type)} are not supported (CUDA or host memory only)")


def dtype_name(x, kind):
    if kind == "torch":
        return str(x.dtype).removeprefix("torch.")
    if not hasattr(x, "dtype"):
        return type(x).__name__
    d = np.dtype(x.dtype)
    return d.name if d.isnative else f"{d.name} ({'big' if d.byteorder == '>' else 'little'}-endian)"


def is_float32(x, kind):
    if kind == "torch":
        import torch
        return x.dtype == torch.float32
    return np.dtype(x.dtype) == np.float32


def is_contiguous(x, kind):
    if kind == "torch":
        return x.is_contiguous()
    if kind in ("numpy", "cupy"):
        return x.flags.c_contiguous
    return True  # nanobind checks the strides of other DLPack arrays (ValueError when not dense)


def contiguous(x, kind):
    """A C-contiguous copy of a strided GPU array (the kernels read dense row-major stacks)."""
    if kind == "torch":
        return x.contiguous()
    if kind == "cupy":
        import cupy
        return cupy.ascontiguousarray(x)
    raise ValueError("a non-contiguous array of this kind cannot be copied here: pass a C-contiguous one")


def stream_handle(stream, kind, device):
    """The cudaStream_t as an integer: `stream` as given (an int, a torch.cuda.Stream, a
    cupy.cuda.Stream), else the caller's current stream for its arrays' library, else 0 (the
    legacy default stream)."""
    if stream is not None:
        if isinstance(stream, bool):
            raise ValueError("stream= takes an integer handle, a torch.cuda.Stream or a cupy.cuda.Stream")
        if isinstance(stream, int):
            if stream < 0:
                raise ValueError(f"stream= must be a non-negative handle, got {stream}")
            return stream
        for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        raise ValueError(f"stream= takes an integer handle, a torch.cuda.Stream or a cupy.cuda.Stream, "
                         f"got {type(stream).__name__}")
    if kind == "torch" and device is not None:
        return TORCH.stream(device)
    if kind == "cupy" and device is not None:
        return CUPY.current_stream().ptr
    return 0


def empty_like_kind(kind, shape, device, like, dtype=np.float32):
    """An array of `shape` and `dtype` (float32, or the int32 and float64 of the reductions) of the
    caller's kind on `device` (NumPy for host inputs)."""
    if kind == "torch" and device is not None:
        import torch
        return torch.empty(shape, dtype=getattr(torch, np.dtype(dtype).name), device=like.device)
    if kind == "cupy" and device is not None:
        import cupy
        with cupy.cuda.Device(device):
            return cupy.empty(shape, dtype=dtype)
    if device is not None:
        raise ValueError("a result for this kind of GPU array cannot be allocated here: pass out=")
    return np.empty(shape, dtype=dtype)


def to_numpy(x, kind):
    """A host copy of any array (the reference runs on the CPU)."""
    if kind == "torch":
        return x.detach().cpu().numpy()
    if kind == "cupy":
        return x.get()
    if kind == "dlpack":
        return np.from_dlpack(x)
    return np.asarray(x)
