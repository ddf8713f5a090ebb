"""--shard K/N (conftest.py): the parts of a selection, which a device run takes one call each when
the GPU suite outgrows one call, must hold every selected test exactly once."""
import subprocess
import sys

import pytest

from conftest import ROOT

# Two files whose tests are cheap to collect (neither imports SciPy, whose import is ~2 s of each
# collection of a file that does), with parametrized families; --gpu-only keeps the GPU tests among
# them, so the parts are checked after that filter too.
FILES = ["tests/test_validate.py", "tests/test_bench.py"]


def collect(*args):
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "-p", "no:randomly", *FILES, *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    return r, [line for line in r.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize("extra", [[], ["--gpu-only"]], ids=["all", "gpu-only"])
@pytest.mark.parametrize("n", [3])
def test_parts_hold_every_test_once(extra, n):
    r, whole = collect(*extra)
    assert r.returncode == 0, r.stdout + r.stderr
    assert len(whole) >= 4, whole
    parts = []
    for k in range(1, n + 1):
        rk, ids = collect(*extra, "--shard", f"{k}/{n}")
        assert rk.returncode == 0, rk.stdout + rk.stderr
        parts.append(ids)
    merged = [t for part in parts for t in part]
    assert sorted(merged) == sorted(whole)  # nothing lost, nothing twice
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # dealt evenly
    # round-robin in collection order: a parametrized family is spread, not kept in one part
    assert all(part == whole[k::n] for k, part in enumerate(parts))


@pytest.mark.parametrize("bad", ["0/2", "3/2", "2", "a/b"])
def test_bad_shard_is_a_usage_error(bad):
    r, _ = collect("--shard", bad)
    assert r.returncode == 4, (r.returncode, r.stdout, r.stderr)
    assert "--shard takes K/N" in r.stdout + r.stderr
