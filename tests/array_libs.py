"""The Python package's GPU tests' fixtures and helpers, shared by test_python_package.py and
test_onedim_package.py: a usable GPU through the package, PyTorch and CuPy where installed, and
moving arrays between them and NumPy."""
import pytest

import xcorr


@pytest.fixture(scope="module")
def gpu():
    try:
        return xcorr.gpu_info()
    except xcorr.NoGPUError as e:
        pytest.skip(f"no usable GPU: {e}")


@pytest.fixture(scope="module")
def torch(gpu):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA")
    return torch


@pytest.fixture(scope="module")
def cupy(gpu):
    return pytest.importorskip("cupy", reason="CuPy is not installed")


def lib_array(lib, x):
    return lib.asarray(x) if lib.__name__ == "cupy" else lib.as_tensor(x, device="cuda")


def host(x):
    return x.get() if type(x).__module__.startswith("cupy") else x.cpu().numpy()


class NoDLPack:
    """A plan's binding object whose DLPack entry (execute) fails: a call that still works took
    the pointer path (execute_ptr)."""

    def __init__(self, plan):
        self._plan = plan

    def execute(self, *args):
        raise AssertionError("the DLPack path was taken")

    def __getattr__(self, name):
        return getattr(self._plan, name)
