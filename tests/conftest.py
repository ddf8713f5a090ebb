"""Shared fixtures: where the built binaries are, and whether a usable GPU is present.

The binaries come from the Meson build directory named by $XCORR_BUILD (default: build/);
scripts/test builds it before running pytest."""
import ctypes
import fcntl
import json
import os
import re
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD = Path(os.environ.get("XCORR_BUILD", ROOT / "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD


def pytest_addoption(parser):
    parser.addoption("--gpu-only", action="store_true",
                     help="run only the tests that need a GPU (those using the gpu fixture or marked gpu): "
                          "what a device run is for; the CPU tests run in CI")
    parser.addoption("--shard", default=None, metavar="K/N",
                     help="run only part K of N of the selected tests (after --gpu-only), dealt round-robin in "
                          "collection order, so that a suite longer than one device call runs as N calls; the "
                          "N parts of one build and one set of options hold every selected test exactly once")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: the test needs a usable GPU (for --gpu-only; the gpu fixture implies it)")
    config.addinivalue_line("markers", "slow: minutes, not seconds (tests/test_example_variant.py builds a scratch copy "
                                       "of the tree); part of CI, `-m 'not slow'` leaves it out")
    config.addinivalue_line("markers", "peers: the test needs a peer library that the GPU machine has and CI does "
                                       "not (PyTorch), though no GPU: --gpu-only selects it, so that it runs there")
    config.addinivalue_line("markers", "gpu_exclusive: the test takes the GPU's whole memory: no other GPU test of "
                                       "any pytest-xdist worker runs beside it (gpu_lock)")


def needs_gpu(item):
    """A test for the GPU machine (--gpu-only): it uses a `gpu` fixture (conftest's, array_libs'),
    directly or through another fixture, or carries the gpu or the peers marker."""
    return ("gpu" in getattr(item, "fixturenames", ()) or item.get_closest_marker("gpu") is not None
            or item.get_closest_marker("peers") is not None)


# Skip reasons of a test that the GPU machine could run but CI cannot: a missing GPU, or PyTorch
WANTS_THE_GPU_MACHINE = re.compile(r"no usable GPU|\b(py)?torch is not installed", re.I)


def parse_shard(text):
    """'K/N' -> (K, N) with 1 <= K <= N; a pytest.UsageError (exit status 4) for anything else."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise pytest.UsageError(f"--shard takes K/N with 1 <= K <= N (e.g. 2/3), not {text!r}")
    return int(m[1]), int(m[2])


def keep_only(config, items, keep):
    """Deselect (reported as such) every item that `keep` refuses."""
    verdicts = [bool(keep(i)) for i in items]
    dropped = [i for i, v in zip(items, verdicts) if not v]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i, v in zip(items, verdicts) if v]


def pytest_collection_modifyitems(config, items):
    if config.getoption("--gpu-only"):
        keep_only(config, items, needs_gpu)
    shard = config.getoption("--shard")
    if shard is not None:
        # Round-robin in collection order: a parametrized family of long tests (the validator per
        # variant) is spread over the parts instead of landing in one. Every xdist worker computes
        # the same parts, as it collects the same items.
        k, n = parse_shard(shard)
        position = {id(item): i for i, item in enumerate(items)}
        keep_only(config, items, lambda item: position[id(item)] % n == k - 1)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test skipped for want of a GPU, or of PyTorch (which the GPU machine has), must be one
    --gpu-only selects (fixture or marker): else the device runs would leave it out unseen and it would
    run nowhere (four torch tests once did). Such a test fails here, on the machine without a
    GPU (CI), saying what to add."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and isinstance(report.longrepr, tuple) and WANTS_THE_GPU_MACHINE.search(str(report.longrepr[-1])):
        if not needs_gpu(item):
            report.outcome = "failed"
            report.longrepr = (f"{item.nodeid} skips for want of the GPU machine ({report.longrepr[-1]}) but "
                               "--gpu-only would not select it: give it the gpu fixture, @pytest.mark.gpu or, for "
                               "a CPU test that needs PyTorch, @pytest.mark.peers")


@pytest.fixture(autouse=True)
def gpu_lock(request):
    """A lock across pytest-xdist's workers on one machine (a file beside the build): every GPU test
    holds it shared, a gpu_exclusive test alone. Such a test fills the GPU's free memory to provoke
    an out-of-memory refusal; beside it, another worker's test failed its own allocations (eight
    workers on one H200: notes/reductions.md). A gate lock, held only while a lock is being taken,
    keeps new shared holders from starving a waiting exclusive one."""
    if not needs_gpu(request.node):
        yield
        return
    exclusive = request.node.get_closest_marker("gpu_exclusive") is not None
    path = BUILD if BUILD.is_dir() else Path("/tmp")
    with open(path / ".gpu-tests.lock", "a") as main, open(path / ".gpu-tests.gate", "a") as gate:
        fcntl.flock(gate, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            fcntl.flock(main, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            if not exclusive:
                fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(main, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


def binary(name):
    path = BUILD / name
    if not path.exists():
        pytest.exit(f"{path} is missing: build first (scripts/test does: meson setup build && ninja -C build)", 2)
    return str(path)


def run_host_test(name):
    """One of the host test programs meson builds (team_dft_host, reduce_chunks_host, ...): its
    completed run, asserted to have exited 0; the test skips, naming the path, where it was not
    built."""
    path = BUILD / name
    if not path.exists():
        pytest.skip(f"{path} not built")
    r = run([str(path)])
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=kw.pop("timeout", 600), **kw)


def xrun(xcorr, *args):
    """`xcorr run ARGS`."""
    return run([xcorr, "run", *map(str, args)])


def one_line_error(r, status, *needles):
    """The run failed with `status` and exactly one line on stderr holding every needle."""
    assert r.returncode == status, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]


@pytest.fixture(scope="session")
def xcorr():
    return binary("xcorr")


@pytest.fixture(scope="session")
def gpu_info():
    """The GPU context from `xcorr info`, or None (with the reason) when there is no usable GPU."""
    r = run([binary("xcorr"), "info"])
    if r.returncode == 0:
        return json.loads(r.stdout), ""
    lines = r.stderr.strip().splitlines() or [f"xcorr info exited with status {r.returncode}"]
    return None, lines[-1].removeprefix("xcorr: no GPU: ")


@pytest.fixture(scope="session")
def gpu(gpu_info, request):
    info, reason = gpu_info
    if info is None:
        # Under --gpu-only (device-check -x, scripts/test --gpu-only) the GPU tests are what was asked
        # for: a GPU that xcorr cannot use there (a CUDA error, a build for another GPU) is an error,
        # not a run whose every test skipped and which exited 0
        if request.config.getoption("--gpu-only"):
            pytest.fail(f"--gpu-only, but no usable GPU: {reason}", pytrace=False)
        pytest.skip(f"no usable GPU: {reason}")
    return info


@pytest.fixture(scope="session")
def registry(xcorr):
    r = run([xcorr, "list", "--json"])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def precision_args(variant):
    """The --precision a run of `variant` (its registry entry) needs: a reduced-precision variant
    (TF32) is refused without --precision tf32, which allows it."""
    return ["--precision", "tf32"] if variant["precision"] == "tf32" else []


def fixture_variant_names():
    """Every variant's name, for one test per variant, parametrized at collection: the build's
    `xcorr list --json` (a variant just added is in it, so no GPU test leaves it out), plus the
    variants a subset build (-Dvariants=...) lacks, from tests/fixtures/registry.json, which such
    tests skip with the reason through require_variant (tests/build_registry.py)."""
    from build_registry import registry as tests_registry

    return [v["name"] for v in tests_registry()]


def require_variant(registry, name):
    """Skips the test, with the reason, when a build configured with -Dvariants=... left `name` out."""
    if not any(v["name"] == name for v in registry):
        pytest.skip(f"{name} is not in this build (meson -Dvariants=...)")


@pytest.fixture(scope="session")
def overlap_wise(registry):
    """Tests that run overlap-wise (the baseline) need it in the build."""
    require_variant(registry, "overlap-wise")


def reported_error(r):
    """(error, bound, "ok" or "FAILED") from the line `xcorr run --validate` prints."""
    m = re.search(r"relative error (\S+) \(bound (\S+)\), (\d+) non-finite elements: (ok|FAILED)", r.stdout)
    assert m, (r.stdout, r.stderr)
    return float(m.group(1)), float(m.group(2)), m.group(4)


def source_constant(source, name, **known):
    """The value of `constexpr int|int64_t|size_t NAME = EXPR` in a kernel's source text (any
    declarator of the line), EXPR an integer expression of integers and the `known` names: what a
    test's port of a kernel mapping checks its constants against, so that they cannot drift."""
    exprs = re.findall(r"constexpr\s+(?:int|int64_t|size_t)\s+(?:\w+\s*=\s*[^,;]+,\s*)*\b" + name
                       + r"\s*=\s*([^,;]+)[,;]", source)
    exprs = [e for e in exprs if re.fullmatch(r"[\w\s*+/()<-]+", e)]  # not `C::KC`, `SPLIT ? 8 : 16`
    assert len(exprs) == 1, (name, exprs)
    return int(eval(exprs[0].replace("/", "//"), {"__builtins__": {}, "int64_t": int}, known))  # noqa: S307


def seeded_rng(seed):
    """A numpy Generator with a fixed seed: an int, or one derived from a key such as a test's
    parameters (crc32 of its repr, the same in every process, unlike hash()). The seed is printed,
    so that a failing test shows it."""
    if not isinstance(seed, int):
        seed = zlib.crc32(repr(seed).encode())
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)


def save(path, array):
    np.save(path, array)
    return str(path)


# --- In-process GPU cases through the Python package (tests/test_gpu.py, tests/test_normalize.py) --------

PACKAGE_MISSING = "the Python package xcorr is not installed (scripts/setup-env installs it)"


def package(*names):
    """The package xcorr (the test skips, with the reason, where it is not installed), checked to
    know the variants `names` of this build: an installed package older than the build would
    otherwise fail every case with "unknown algorithm" (scripts/setup-env reinstalls it)."""
    pkg = pytest.importorskip("xcorr", reason=PACKAGE_MISSING)
    known = {a["name"] for a in pkg.algorithms()}
    missing = [n for n in names if n not in known]
    assert not missing, (f"the installed package xcorr ({pkg.__file__}) does not know {', '.join(missing)} "
                         "of this build: reinstall it from the build (scripts/setup-env)")
    return pkg


def plan_precision(v):
    """The Plan's precision= for variant v (its registry entry): "tf32" admits a TF32 variant, as
    --precision tf32 does (precision_args)."""
    return "tf32" if v["precision"] == "tf32" else "fp32"


_CUDART = []


def cudart():
    """The CUDA runtime library the package's binding is linked with, through ctypes (the one
    already loaded in this process, so that its allocations are the binding's: same runtime, same
    context), or None where it cannot be found."""
    if not _CUDART:
        import xcorr._xcorr  # noqa: F401  (loads the binding and its libcudart)
        path = None
        with open("/proc/self/maps") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 6 and "/libcudart.so" in fields[-1]:
                    path = fields[-1]
                    break
        lib = None
        if path:
            lib = ctypes.CDLL(path)
            vp, size, i32 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
            for fn, args in (("cudaMalloc", [ctypes.POINTER(vp), size]), ("cudaFree", [vp]),
                             ("cudaMemset", [vp, i32, size]), ("cudaMemcpy", [vp, vp, size, i32]),
                             ("cudaSetDevice", [i32]), ("cudaDeviceSynchronize", []), ("cudaGetErrorString", [i32])):
                getattr(lib, fn).argtypes = args
                getattr(lib, fn).restype = ctypes.c_char_p if fn == "cudaGetErrorString" else i32
        _CUDART.append(lib)
    return _CUDART[0]


def run_poisoned(plan, left, right):
    """plan(left, right) as a float32 NumPy array, computed into a device output whose every byte
    was 0xff (a NaN, as xcorr run's poison()) beforehand: an element the kernels leave unwritten
    comes back NaN. A NumPy out= filled with NaN would not do that: the binding then runs into a
    fresh device buffer (whatever it held: zeros, a previous case's results) and copies all of it
    back over the NaN. The reference plan (a CPU check of the same loops) writes into a NaN out=."""
    out = np.full(plan.out_shape, np.nan, np.float32)
    if plan.reference:
        return plan(left, right, out=out)
    rt = cudart()
    # Without the runtime the output could not be poisoned, and an unwritten element would pass:
    # a failure, not a quieter test.
    assert rt is not None, "libcudart is not loaded in this process: cannot poison the device output"
    left = np.ascontiguousarray(left, np.float32)
    right = np.ascontiguousarray(right, np.float32)

    def check(status, what):
        assert status == 0, f"{what}: {rt.cudaGetErrorString(status).decode()}"

    check(rt.cudaSetDevice(plan.device), "cudaSetDevice")
    ptrs = []
    try:
        for n in (left.nbytes, right.nbytes, out.nbytes):
            p = ctypes.c_void_p()
            check(rt.cudaMalloc(ctypes.byref(p), n), "cudaMalloc")
            ptrs.append(p.value)
        dl, dr, do = ptrs
        check(rt.cudaMemcpy(dl, left.ctypes.data, left.nbytes, 1), "cudaMemcpy to the device")
        check(rt.cudaMemcpy(dr, right.ctypes.data, right.nbytes, 1), "cudaMemcpy to the device")
        check(rt.cudaMemset(do, 0xff, out.nbytes), "cudaMemset")
        check(rt.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        plan._plan.execute_ptr(dl, dr, do, 0)
        check(rt.cudaDeviceSynchronize(), "the plan's kernels")
        check(rt.cudaMemcpy(out.ctypes.data, do, out.nbytes, 2), "cudaMemcpy to the host")
    finally:
        for p in ptrs:
            rt.cudaFree(p)
    return out
