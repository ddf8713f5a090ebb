"""Shared fixtures: where the built binaries are, and whether a usable GPU is present.

The binaries come from the Meson build directory named by $XCORR_BUILD (default: build/);
scripts/test builds it before running pytest."""
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


def binary(name):
    path = BUILD / name
    if not path.exists():
        pytest.exit(f"{path} is missing: build first (scripts/test does: meson setup build && ninja -C build)", 2)
    return str(path)


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
def gpu(gpu_info):
    info, reason = gpu_info
    if info is None:
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
