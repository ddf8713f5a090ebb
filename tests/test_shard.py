"""--shard K/N (conftest.py): the parts of a selection, which a device run takes one call each when
the GPU suite outgrows one call, must hold every selected test exactly once."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

# Two files whose tests are cheap to collect (neither imports SciPy, whose import is ~2 s of each
# collection of a file that does), with parametrized families; --gpu-only keeps the GPU tests among
# them, so the parts are checked after that filter too.
FILES = ["tests/test_validate.py", "tests/test_bench.py"]
OPTIONS = ["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]


def collect(*args):
    """pytest --collect-only as a user runs it, a process of its own: (its CompletedProcess, the
    test ids it lists)."""
    r = subprocess.run([sys.executable, "-m", "pytest", *OPTIONS, *FILES, *args],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    return r, [line for line in r.stdout.splitlines() if "::" in line]


def collect_in_process(*args):
    """The same collection by pytest.main in this interpreter (a process costs ~1 s of pytest's,
    NumPy's and conftest's imports, most of this file's time): (its exit status, what it printed
    on stdout and stderr, the ids of the items it kept after conftest's filters). It collects from
    the repository root, as the process does, so that the ids are the same; the test modules it
    imports are dropped afterwards, so that this session's modules stay its own."""
    import contextlib
    import io

    kept = []

    class Kept:
        @staticmethod
        def pytest_collection_finish(session):
            kept.extend(item.nodeid for item in session.items)

    before, cwd, out = set(sys.modules), os.getcwd(), io.StringIO()
    try:
        os.chdir(ROOT)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = pytest.main([*OPTIONS, *FILES, *args], plugins=[Kept()])
    finally:
        os.chdir(cwd)
        for name in set(sys.modules) - before:
            if os.path.dirname(getattr(sys.modules[name], "__file__", None) or "") == str(ROOT / "tests"):
                del sys.modules[name]
    return int(status), out.getvalue(), kept


@pytest.mark.parametrize("extra", [[], ["--gpu-only"]], ids=["all", "gpu-only"])
@pytest.mark.parametrize("n", [3])
def test_parts_hold_every_test_once(extra, n):
    status, text, whole = collect_in_process(*extra)
    assert status == 0, text
    assert len(whole) >= 4, whole
    parts = []
    for k in range(1, n + 1):
        if k == n and not extra:  # once as a user runs it: a process of its own, its printed list
            rk, ids = collect(*extra, "--shard", f"{k}/{n}")
            assert rk.returncode == 0, rk.stdout + rk.stderr
        else:
            status, text, ids = collect_in_process(*extra, "--shard", f"{k}/{n}")
            assert status == 0, text
        parts.append(ids)
    merged = [t for part in parts for t in part]
    assert sorted(merged) == sorted(whole)  # nothing lost, nothing twice
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # dealt evenly
    # round-robin in collection order: a parametrized family is spread, not kept in one part
    assert all(part == whole[k::n] for k, part in enumerate(parts))


@pytest.mark.parametrize("bad", ["0/2", "3/2", "2", "a/b"])
def test_bad_shard_is_a_usage_error(bad):
    if bad == "0/2":  # once as a user runs it: a process of its own
        r, _ = collect("--shard", bad)
        status, text = r.returncode, r.stdout + r.stderr
    else:
        status, text, _ = collect_in_process("--shard", bad)
    assert status == 4, (status, text)
    assert "--shard takes K/N" in text
