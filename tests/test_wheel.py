"""The binary wheel (scripts/build-wheel): built for one architecture and one variant (a few
minutes on 2 cores; seconds where the main build has lib/'s objects: tests/reuse_objects.py),
installed into a fresh venv with NumPy and NVIDIA's cuFFT wheel from PyPI, and imported with the CUDA toolkit out of reach (no nvcc on PATH, no LD_LIBRARY_PATH or
CUDA_HOME): the CPU reference runs, a GPU call raises NoGPUError with its reason (where this
machine has no GPU: CI), cuFFT comes from the venv's nvidia package, and xcorr.__version__ is
the repository's (scripts/version).

Skipped, saying why, where nvcc is missing or PyPI cannot be reached."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

import reuse_objects
from conftest import BUILD

ROOT = Path(__file__).resolve().parent.parent
VERSION_RE = r"\d+(\.\d+)*(\.dev\d+)?(\+g[0-9a-f]+(\.dirty)?)?"


def find_nvcc():
    if shutil.which("nvcc"):
        return shutil.which("nvcc")
    for d in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if d and os.access(os.path.join(d, "bin", "nvcc"), os.X_OK):
            return os.path.join(d, "bin", "nvcc")
    return None


def stripped_env(tmp_path):
    """The environment without the toolkit: PATH of the system's bin directories only (no CUDA
    one), no LD_LIBRARY_PATH, CUDA_HOME or CUDA_PATH; pip's proxy and index settings kept."""
    keep = {k: v for k, v in os.environ.items()
            if k.lower() in ("http_proxy", "https_proxy", "no_proxy", "all_proxy") or k.startswith("PIP_")
            or k in ("LANG", "LC_ALL", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "TMPDIR")}
    path = [d for d in ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
            if os.path.isdir(d) and not os.path.exists(os.path.join(d, "nvcc"))]  # a wrapper may sit in /usr/local/bin
    # pip's cache stays the caller's (the wheels it downloaded: NumPy's and cuFFT's, hundreds of MB,
    # fetched again on every run otherwise); it holds no toolkit
    cache = os.environ.get("PIP_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "pip")
    return dict(keep, HOME=str(tmp_path / "home"), PATH=os.pathsep.join(path), PYTHONNOUSERSITE="1",
                PIP_CACHE_DIR=cache)


CUDA13_CODES = "sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_100 sm_110 sm_103 sm_120 sm_121"


@pytest.mark.parametrize("machine, want", [("x86_64", "7.5,8.0,9.0,10.0,12.0+PTX"),
                                           ("aarch64", "7.5,8.0,9.0,10.0,11.0,12.0+PTX")])
def test_the_default_architectures_are_one_per_major_that_the_platform_has(machine, want, monkeypatch):
    """CUDA 13's list (`nvcc --list-gpu-code`) gives the lowest minor of each major from 7.5 (the
    driver runs it on the later minors), Thor's 11.0 only in an Arm wheel, PTX of the newest."""
    from suite_helpers import load_script
    bw = load_script("build-wheel")
    out = "\n".join(CUDA13_CODES.split() + ["compute_75", "compute_121"]) + "\n"
    monkeypatch.setattr(bw.subprocess, "run",
                        lambda *a, **k: subprocess.CompletedProcess(a, 0, stdout=out, stderr=""))
    assert bw.default_archs("nvcc", machine) == want
    nvcc = find_nvcc()
    if nvcc:  # this machine's toolkit: every default architecture is one nvcc builds
        monkeypatch.undo()
        listed = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True).stdout.split()
        for arch in bw.default_archs(nvcc).replace("+PTX", "").split(","):
            assert f"sm_{arch.replace('.', '')}" in listed


def test_version_script_says_dev_with_the_revision():
    v = subprocess.run([str(ROOT / "scripts" / "version")], capture_output=True, text=True, check=True).stdout.strip()
    assert re.fullmatch(VERSION_RE, v), v
    rev = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    tagged = subprocess.run(["git", "describe", "--tags", "--exact-match", "--match", "v[0-9]*"], cwd=ROOT,
                            capture_output=True).returncode == 0
    if rev and not tagged:
        assert ".dev" in v and f"+g{rev}" in v, (v, rev)


PEP440_LOCAL_RE = r"\d+(\.\d+)*(\.dev\d+)?\+[0-9A-Za-z]+(\.[0-9A-Za-z]+)*"


# Revisions no commit here has, so that scripts/git-revision passes them through as given.
@pytest.mark.parametrize("given,local", [("1234abc", "+g1234abc"), ("1234abc+trace", "+g1234abc.trace"),
                                         ("abc/1 2_x", "+gabc.1.2.x"), ("1234abc-dirty", "+g1234abc.dirty")])
def test_version_of_a_copied_tree_is_pep440_whatever_revision_it_is_given(given, local):
    """A GPU machine's copy names its revision in XCORR_GIT_REVISION; whatever the caller writes
    there, the version stays a valid PEP 440 one (else meson-python refuses to build the package)."""
    env = dict(os.environ, XCORR_GIT_REVISION=given)
    v = subprocess.run([str(ROOT / "scripts" / "version")], env=env, capture_output=True, text=True,
                       check=True).stdout.strip()
    assert re.fullmatch(PEP440_LOCAL_RE, v) and v.endswith(local), (given, v)


def test_wheel_installs_and_runs_with_only_the_driver(tmp_path):
    nvcc = find_nvcc()
    if not nvcc:
        pytest.skip("nvcc (the CUDA toolkit) is not installed: the wheel cannot be built here")
    # PyPI itself, not a local wheel folder (PIP_FIND_LINKS, PIP_NO_INDEX left out): a small wheel (an
    # sdist's download builds its metadata, half a minute)
    probe = subprocess.run([sys.executable, "-m", "pip", "download", "--no-cache-dir", "--no-deps", "--only-binary",
                            ":all:", "-d", str(tmp_path / "probe"), "six==1.16.0"], capture_output=True, text=True, timeout=120,
                           env={k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_NO_INDEX")})
    if probe.returncode:
        pytest.skip(f"PyPI is unreachable (pip download: {probe.stderr.strip().splitlines()[-1:]}): the wheel's "
                    "dependencies (NumPy, nvidia-cufft) cannot be installed")

    out = tmp_path / "dist"
    env = dict(os.environ, PATH=os.path.dirname(nvcc) + os.pathsep + os.environ.get("PATH", ""))
    # A build folder of its own beside build/ (one level below the tree, as build/ is, so that the
    # compile commands are the same), seeded with the main build's objects (tests/reuse_objects.py):
    # ninja compiles again what differs; --strict, the main build's ptxas flags (no difference to the
    # code: warnings made errors, which sm_90a has none of), so that lib/'s CUDA objects are among them.
    build_dir = Path(tempfile.mkdtemp(prefix="build-test-wheel-", dir=ROOT))
    try:
        reuse_objects.seed(BUILD, build_dir)
        r = subprocess.run([sys.executable, str(ROOT / "scripts" / "build-wheel"), "--arch", "9.0", "--variants", "30",
                            "--strict", "--build-dir", str(build_dir), "--out", str(out)],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    wheels = list(out.glob("xcorr-*.whl"))
    assert len(wheels) == 1, list(out.iterdir())
    wheel = wheels[0]
    assert re.fullmatch(rf"xcorr-({VERSION_RE})-cp3\d+-cp3\d+-manylinux_\d+_\d+_\w+\.whl", wheel.name), wheel.name
    assert wheel.stat().st_size < 100e6
    version = wheel.name.split("-")[1]
    assert version == subprocess.run([str(ROOT / "scripts" / "version")], capture_output=True, text=True).stdout.strip()
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"xcorr-{version}.dist-info/METADATA").decode()
    assert re.search(r"^Requires-Dist: nvidia-cufft", meta, re.M), meta[:2000]
    sdists = list(out.glob("xcorr-*.tar.gz"))
    assert len(sdists) == 1 and sdists[0].name == f"xcorr-{version}.tar.gz", list(out.iterdir())

    # A fresh venv without the toolkit: only the driver would be needed (this machine may lack it too).
    # (The venv without pip of its own, installed into by this Python's pip, `--python`: ensurepip was
    # 7 of the test's CPU seconds. `--no-compile`: the check imports a few of NumPy's modules, and pip's
    # compiling of all of them was another 4.)
    clean = stripped_env(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=clean)
    vpy = str(venv / "bin" / "python")
    r = subprocess.run([sys.executable, "-m", "pip", "--python", vpy, "install", "-q", "--no-compile",
                        "--disable-pip-version-check", str(wheel)],
                       env=clean, capture_output=True, text=True, timeout=1200)
    if r.returncode and re.search(r"(?i)connection|resolve|network|timed out|proxy", r.stderr):
        pytest.skip(f"PyPI is unreachable from the fresh venv: {r.stderr.strip().splitlines()[-1:]}")
    assert r.returncode == 0, r.stderr[-4000:]

    check = f"""
import os, shutil, numpy as np, xcorr
assert shutil.which("nvcc") is None and "LD_LIBRARY_PATH" not in os.environ and "CUDA_HOME" not in os.environ
assert xcorr.__version__ == {version!r}, xcorr.__version__
# cuFFT is the venv's (NVIDIA's wheel), not a toolkit's
cufft = {{l.split()[-1] for l in open("/proc/self/maps") if "libcufft" in l}}
assert cufft and all(p.startswith({str(venv)!r}) for p in cufft), cufft
rng = np.random.default_rng(7)
a, b = rng.standard_normal((9, 12)), rng.standard_normal((4, 5))
got = xcorr.correlate2d(a.astype(np.float32), b.astype(np.float32), algorithm="reference")
a32, b32 = a.astype(np.float32).astype(np.float64), b.astype(np.float32).astype(np.float64)
ref = np.zeros((9 + 4 - 1, 12 + 5 - 1))
for dy in range(-3, 9):
    for dx in range(-4, 12):
        for y in range(4):
            for x in range(5):
                if 0 <= y + dy < 9 and 0 <= x + dx < 12:
                    ref[dy + 3, dx + 4] += a32[y + dy, x + dx] * b32[y, x]
assert got.shape == ref.shape and np.allclose(got, ref, rtol=1e-12, atol=1e-12), np.abs(got - ref).max()
names = [v["name"] for v in xcorr.algorithms()]
assert names == ["block-per-pair"], names
try:
    info = xcorr.gpu_info()
except xcorr.NoGPUError as e:
    reason = str(e)
    assert reason and ("no NVIDIA driver" in reason or "GPU" in reason), reason
    try:
        xcorr.correlate2d(a, b)
        raise AssertionError("a GPU call without a GPU returned")
    except xcorr.NoGPUError as e2:
        assert reason in str(e2) and 'algorithm="reference"' in str(e2), str(e2)
    assert all(not v["runs_here"] and v["not_here"] for v in xcorr.algorithms()), xcorr.algorithms()
    print("no GPU:", reason)
else:
    assert info["version"] == xcorr.__version__ and info["built_archs"] == "90", info
    print("GPU:", info["name"])
print("ok", xcorr.__version__)
"""
    r = subprocess.run([vpy, "-c", check], env=clean, cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith(f"ok {version}"), r.stdout
