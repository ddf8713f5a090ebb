"""The `xcorr` tool on the CPU: .npy round trips, `xcorr list`, and every kind of bad input,
each with exit status 2 and one clear line on stderr (never a crash or a half-written file)."""

import ctypes
import json
import math
import os
import re
import resource
import signal
import stat
import threading
from pathlib import Path

import numpy as np
import pytest

from conftest import binary, one_line_error, reported_error, run, save, seeded_rng, xrun



@pytest.fixture
def pair(tmp_path):
    rng = seeded_rng(7)
    return (save(tmp_path / "l.npy", rng.random((5, 6), dtype=np.float32)),
            save(tmp_path / "r.npy", rng.random((3, 4), dtype=np.float32)))


# --- round trips -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, ">f4"])
@pytest.mark.parametrize("rank", [2, 3])
def test_npy_round_trip(xcorr, tmp_path, dtype, rank):
    rng = seeded_rng(3)
    left = rng.random((4, 5)).astype(dtype)
    right = rng.random((2, 3)).astype(dtype)
    if rank == 3:
        left, right = left[None], right[None]
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one",
             save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right), "--out", out)
    assert r.returncode == 0, r.stderr
    got = np.load(out)
    assert got.dtype == np.dtype("<f4") and got.shape == (1, 5, 7) and got.flags.c_contiguous
    from scipy.signal import correlate2d
    want = correlate2d(left.reshape(4, 5).astype(np.float32).astype(np.float64),
                       right.reshape(2, 3).astype(np.float32).astype(np.float64), mode="full")
    np.testing.assert_allclose(got[0], want, rtol=1e-6)


def test_a_long_cpu_reference_is_announced_not_left_to_look_like_a_hang(xcorr, tmp_path):
    """The float64 CPU reference runs ~1e9 multiply-adds a second on one core: a 1024 x 1024 left
    against a 128 x 128 right (1.7e10) says so, with the time to expect and what runs faster, before
    it starts (it ran hours in silence for larger ones). Killed once the line is read; nothing is
    written."""
    import subprocess
    rng = seeded_rng(11)
    left = save(tmp_path / "l.npy", rng.random((1024, 1024), dtype=np.float32))
    right = save(tmp_path / "r.npy", rng.random((128, 128), dtype=np.float32))
    out = tmp_path / "o.npy"
    p = subprocess.Popen([str(xcorr), "run", "--algorithm", "reference", "--form", "one-to-one", str(left), str(right),
                          "--out", str(out)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        line = p.stderr.readline()
    finally:
        p.kill()
        p.wait()
    assert re.search(r"float64 CPU reference, 1\.7e\+10 multiply-adds on one core: about 17 s", line), line
    assert "--algorithm auto" in line and not out.exists()


def temp_files(directory):
    return [p.name for p in directory.iterdir() if ".tmp." in p.name]


def test_output_overwrites_atomically(xcorr, tmp_path, pair):
    """The output goes to a temporary file renamed over the old one, so the old file's inode is
    never written: a second hard link to it keeps the old bytes. A writer that truncates and
    rewrites the file in place changes what the link sees."""
    out, link = tmp_path / "o.npy", tmp_path / "link.npy"
    out.write_bytes(b"old")
    os.link(out, link)
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", *pair, "--out", out)
    assert r.returncode == 0, r.stderr
    assert np.load(out).shape == (1, 7, 9)
    assert link.read_bytes() == b"old"
    assert temp_files(tmp_path) == []


# --- --validate and --tolerance on the CPU ---------------------------------------------------
# The reference validated is its own float32 output against its float64 sums: a real error (the
# float32 rounding, within 2^-24), measured and decided by the code a variant's --validate uses.

def test_validate_decision_is_strict(xcorr, tmp_path, pair):
    """err <= tolerance passes, err > tolerance fails (exit 1, one line, nothing written), the
    error printed exactly enough to be given back as the tolerance."""
    def validate(out, *tolerance):
        return xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", *pair, "--out", out,
                    "--validate", *tolerance)
    r = validate(tmp_path / "o.npy")
    assert r.returncode == 0, r.stderr
    err, bound, verdict = reported_error(r)
    assert 0 < err <= bound == 2.0 ** -24 and verdict == "ok"

    below = tmp_path / "below.npy"
    r = validate(below, "--tolerance", repr(math.nextafter(err, 0)))
    one_line_error(r, 1, "validation failed", "below.npy")
    assert reported_error(r)[2] == "FAILED" and not below.exists()

    for name, tol in [("equal.npy", err), ("above.npy", math.nextafter(err, 1))]:
        r = validate(tmp_path / name, "--tolerance", repr(tol))
        assert r.returncode == 0 and reported_error(r) == (err, tol, "ok"), (r.stdout, r.stderr)
        assert np.load(tmp_path / name).shape == (1, 7, 9)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_validate_names_non_finite_inputs_whatever_the_tolerance(xcorr, tmp_path, bad):
    """NaN or Inf in an input makes the output non-finite, which --validate cannot check: it said
    "reference is off the float64 reference" (exit 1, as if the algorithm were wrong); it says that
    the input holds non-finite values (exit 2, nothing written). Without --validate they are
    computed with, as scipy does."""
    left = np.ones((4, 4), np.float32)
    left[1, 1] = left[2, 2] = bad
    out = tmp_path / "o.npy"
    args = ["--algorithm", "reference", "--form", "one-to-one", save(tmp_path / "l.npy", left),
            save(tmp_path / "r.npy", np.ones((3, 3), np.float32)), "--out", out]
    r = xrun(xcorr, *args, "--validate", "--tolerance", "1e300")
    one_line_error(r, 2, "left input", "l.npy", "holds 2 non-finite values", "o.npy not written")
    assert "off the float64 reference" not in r.stderr
    assert reported_error(r)[2] == "FAILED" and not out.exists()
    r = xrun(xcorr, *args)
    assert r.returncode == 0, r.stderr
    assert not np.isfinite(np.load(out)).all()


def test_validate_of_finite_inputs_still_fails_as_before(xcorr, tmp_path, pair):
    """The non-finite note is for non-finite inputs only: a too tight bound is still exit 1."""
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", *pair, "--out", tmp_path / "o.npy",
             "--validate", "--tolerance", "1e-300")
    one_line_error(r, 1, "validation failed", "off the float64 reference")


@pytest.mark.parametrize("args,needle", [
    (["--validate", "--tolerance", "-1"], "--tolerance"),
    (["--validate", "--tolerance", "nan"], "--tolerance"),
    (["--validate", "--tolerance", "inf"], "--tolerance"),
    (["--validate", "--tolerance", "1e-5x"], "--tolerance"),
    (["--validate", "--tolerance"], "needs a value"),
    (["--tolerance", "1e-5"], "--validate"),
])
def test_bad_tolerance(xcorr, tmp_path, pair, args, needle):
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", *pair, "--out", out, *args)
    one_line_error(r, 2, needle)
    assert not out.exists()


# --- xcorr list ----------------------------------------------------------------------------

def test_list_json(registry, overlap_wise):
    names = [v["name"] for v in registry]
    assert "overlap-wise" in names and len(names) == len(set(names))
    for v in registry:
        assert v["forms"] and set(v["forms"]) <= {"one-to-one", "one-to-many", "n-to-mn", "n-to-m"}
        assert v["timed"] and v["family"] and v["precision"]
        assert 0 < v["tolerance"] < 1e-2
        for pname, values in v["params"].items():
            assert values and len(values) == len(set(values)), (v["name"], pname)


def test_the_tests_registry_is_the_builds(registry):
    """The tests that go over the variants (one GPU test per variant, the CPU suite tests through the
    fake bench) read the registry from the build (tests/build_registry.py): every variant of this
    build is there with its own entry, whatever tests/fixtures/registry.json holds, so a variant
    just added is never left out of them silently."""
    from build_registry import registry as tests_registry
    from conftest import fixture_variant_names

    ours = {v["name"]: v for v in tests_registry()}
    names = fixture_variant_names()
    for v in registry:
        assert ours.get(v["name"]) == v, f"{v['name']}: the tests' registry differs from `xcorr list --json`"
        assert v["name"] in names, f"{v['name']} is left out of the per-variant tests"


def test_list_text(xcorr, registry):
    r = run([xcorr, "list"])
    assert r.returncode == 0
    for v in registry:
        assert v["name"] in r.stdout


# --- help and info -------------------------------------------------------------------------

RUN_OPTIONS = ["--algorithm", "--form", "--param", "--out", "--validate", "--tolerance"]


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"], ["run", "--help"],
                                  ["run", "--algorithm", "reference", "--help"], ["list", "--help"], ["info", "--help"]])
def test_help(xcorr, args):
    r = run([xcorr, *args])
    assert r.returncode == 0 and r.stderr == "", (r.returncode, r.stderr)
    for word in ["usage", "list", "info", "run", *RUN_OPTIONS]:
        assert word in r.stdout, word


def test_info_reports_the_build_with_or_without_a_gpu(xcorr, registry):
    """`xcorr info` prints this build (and the GPU) as JSON; without a usable GPU it still prints
    the build, with the reason, and exits 3 with that reason as one line on stderr."""
    r = run([xcorr, "info"])
    info = json.loads(r.stdout)
    for key in ["xcorr_build_archs", "xcorr_nvcc_version", "xcorr_build_type", "xcorr_git_revision"]:
        assert info[key], key
    assert info["xcorr_variants"] == sorted(v["name"] for v in registry)
    if r.returncode == 0:
        assert info["xcorr_gpu_name"] and "xcorr_no_gpu_reason" not in info
    else:
        one_line_error(r, 3, info["xcorr_no_gpu_reason"])
        assert "xcorr_gpu_name" not in info


def test_no_driver_is_named_as_such(xcorr, gpu_info):
    """Without an NVIDIA driver, CUDA says "driver version is insufficient"; the tool and the GPU
    tests' skip reason say that there is no driver or GPU instead."""
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("an NVIDIA driver (libcuda.so.1) is installed here")
    except OSError:
        pass
    info, reason = gpu_info
    assert info is None and reason.startswith("no NVIDIA driver / no GPU on this machine"), reason
    one_line_error(run([xcorr, "info"]), 3, "no NVIDIA driver / no GPU on this machine")


# --- environment switches (docs/cli.md, "Environment switches") ------------------------------

def env_settings(xcorr):
    """{name: values} of the switches `xcorr help` lists (lib/core.cpp's env_settings())."""
    r = run([xcorr, "help"])
    assert r.returncode == 0, r.stderr
    tail = r.stdout.split("\nenvironment (", 1)[1]
    return dict(re.findall(r"^  (XCORR_[A-Z0-9_]+)=(\S+)$", tail, re.M))


def test_help_and_readme_list_the_same_switches(xcorr):
    listed = env_settings(xcorr)
    assert len(listed) >= 9 and "XCORR_NO_GRAPH" in listed and listed["XCORR_NO_GRAPH"] == "0|1"
    readme = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    table = readme.split("## Environment switches", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `(XCORR_[A-Z0-9_]+)` \| ([^|]+?) \|", table, re.M))
    assert rows == {k: ("0, 1" if v == "0|1" else v) for k, v in listed.items()}


BAD_SWITCHES = [("XCORR_NO_GRAPH", "yes"), ("XCORR_NO_GRAPH", "2"), ("XCORR_NO_PDL", "on"),
                ("XCORR_NO_STORE_NORM", "true"), ("XCORR_FFT_MERGE_ROWS", " 1"),
                ("XCORR_FFT_PAIR_GROUPS", "-1"), ("XCORR_FFT_MAX_CHUNK", "0"), ("XCORR_FFT_MAX_CHUNK", "3x"),
                ("XCORR_BATCH_TRACE", "2"), ("XCORR_FFT_PLAN_BATCH_LIMIT", "1e3")]


@pytest.mark.parametrize("name,value", BAD_SWITCHES)
def test_a_bad_switch_is_refused_before_any_work(xcorr, tmp_path, pair, name, value):
    """A switch the library would misread (a diagnostic "on" for any text, a junk number) stops
    every tool at start with exit 2 and one line naming it: the CPU reference run, which reads no
    switch, is refused too, and writes no output."""
    env = {**os.environ, name: value}
    out = tmp_path / "o.npy"
    r = run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one", *pair, "--out", str(out)], env=env)
    one_line_error(r, 2, name, repr(value))
    assert not out.exists()
    one_line_error(run([xcorr, "info"], env=env), 2, name)
    for tool, args in (("xcorr_validate", ["--help"]), ("xcorr_bench", ["--benchmark_list_tests"])):
        assert run([binary(tool), *args]).returncode == 0, tool  # the same call passes unset
        one_line_error(run([binary(tool), *args], env=env), 2, name, repr(value))


def test_switches_set_are_recorded_and_empty_ones_are_unset(xcorr):
    """`xcorr info` (the context every benchmark JSON carries) names the switches set, in the
    table's order; an empty value is the same as unset."""
    listed = env_settings(xcorr)
    low = {k: v.split("..")[0].split("|")[0] for k, v in listed.items()}
    env = {k: v for k, v in os.environ.items() if k not in listed}
    r = run([xcorr, "info"], env={**env, **low, "XCORR_NO_GRAPH": ""})
    assert r.returncode in (0, 3), r.stderr
    recorded = json.loads(r.stdout)["xcorr_environment"].split()
    assert recorded == [f"{k}={v}" for k, v in low.items() if k != "XCORR_NO_GRAPH"]
    r = run([xcorr, "info"], env=env)
    assert "xcorr_environment" not in json.loads(r.stdout)


# --- bad input -----------------------------------------------------------------------------

def test_missing_file(xcorr, tmp_path, pair):
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", tmp_path / "nope.npy", pair[1],
             "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "nope.npy", "cannot open")
    assert not (tmp_path / "o.npy").exists()


def test_unreadable_file(xcorr, tmp_path, pair):
    # A directory cannot be read as a file (chmod is no test when running as root).
    d = tmp_path / "dir.npy"
    d.mkdir()
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", d, pair[1], "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "dir.npy")


def test_not_npy(xcorr, tmp_path, pair):
    p = tmp_path / "text.npy"
    p.write_text("hello, world\n")
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", p, pair[1], "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "not a .npy")


def test_truncated_npy(xcorr, tmp_path, pair):
    p = tmp_path / "cut.npy"
    np.save(p, np.ones((40, 40), np.float32))
    p.write_bytes(p.read_bytes()[:500])
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", p, pair[1], "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "truncated")


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16, np.complex64, np.bool_])
def test_wrong_dtype(xcorr, tmp_path, pair, dtype):
    p = save(tmp_path / "bad.npy", np.ones((3, 3), dtype=dtype))
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", pair[0], p, "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "wrong dtype")


@pytest.mark.parametrize("shape", [(5,), (2, 2, 3, 3), ()])
def test_wrong_rank(xcorr, tmp_path, pair, shape):
    p = save(tmp_path / "bad.npy", np.ones(shape, np.float32))
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", p, pair[1], "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "rank")


def test_fortran_order(xcorr, tmp_path, pair):
    p = save(tmp_path / "f.npy", np.asfortranarray(np.ones((3, 4), np.float32)))
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", p, pair[1], "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "fortran")


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 3, 3)])
def test_empty_matrix(xcorr, tmp_path, pair, shape):
    p = save(tmp_path / "e.npy", np.ones(shape, np.float32))
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-many", p, pair[1], "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "empty")


@pytest.mark.parametrize("form,nl,nr,needle", [
    ("one-to-one", 1, 2, "exactly one"),
    ("one-to-one", 2, 1, "exactly one"),
    ("one-to-many", 2, 4, "exactly one left"),
    ("n-to-mn", 2, 3, "multiple of the left count"),
    ("n-to-mn", 4, 6, "multiple of the left count"),
])
def test_counts_that_do_not_fit_the_form(xcorr, tmp_path, form, nl, nr, needle):
    l = save(tmp_path / "l.npy", np.ones((nl, 3, 3), np.float32))
    r_ = save(tmp_path / "r.npy", np.ones((nr, 3, 3), np.float32))
    r = xrun(xcorr, "--algorithm", "reference", "--form", form, l, r_, "--out", tmp_path / "o.npy")
    one_line_error(r, 2, needle)


def test_unknown_variant(xcorr, tmp_path, pair, overlap_wise):
    r = xrun(xcorr, "--algorithm", "no-such-kernel", "--form", "one-to-one", *pair, "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "unknown algorithm", "overlap-wise")


def test_unknown_form(xcorr, tmp_path, pair):
    r = xrun(xcorr, "--algorithm", "reference", "--form", "many-to-one", *pair, "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "unknown form")


def test_unknown_parameter(xcorr, tmp_path, pair, overlap_wise):
    r = xrun(xcorr, "--algorithm", "overlap-wise", "--form", "one-to-one", "--param", "colour=red", *pair,
             "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "unknown parameter", "warps")


def test_parameter_value_outside_the_allowed_set(xcorr, tmp_path, pair, overlap_wise):
    r = xrun(xcorr, "--algorithm", "overlap-wise", "--form", "one-to-one", "--param", "warps=3", *pair,
             "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "warps=3", "4, 8")


def test_form_not_supported_by_variant(xcorr, registry, tmp_path, pair):
    partial = [v for v in registry if len(v["forms"]) < 4]
    if not partial:
        pytest.skip("every registered variant supports every form")
    v = partial[0]
    missing = next(f for f in ["one-to-one", "one-to-many", "n-to-mn", "n-to-m"] if f not in v["forms"])
    r = xrun(xcorr, "--algorithm", v["name"], "--form", missing, *pair, "--out", tmp_path / "o.npy")
    one_line_error(r, 2, "does not support")


@pytest.mark.parametrize("args,needle", [
    ([], "usage"),
    (["frobnicate"], "unknown command"),
    (["run", "--form", "one-to-one", "a.npy", "b.npy", "--out", "o.npy"], "missing --algorithm"),
    (["run", "--algorithm", "reference", "--form", "one-to-one", "a.npy", "--out", "o.npy"], "two input files"),
    (["run", "--algorithm", "reference", "--form", "one-to-one", "a.npy", "b.npy"], "missing --out"),
    (["run", "--algorithm", "reference", "--bogus"], "unknown option"),
    (["list", "--yaml"], "usage"),
])
def test_bad_usage(xcorr, args, needle):
    r = run([xcorr, *args])
    assert r.returncode == 2
    assert needle in (r.stderr + r.stdout).lower()


def test_help_is_an_option_not_a_value(xcorr, tmp_path, pair):
    """-h given as an option's value is that value (a file named -h), not a request for help that
    exits 0 having written nothing."""
    r = run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one", *map(str, pair), "--out", "-h"],
            cwd=tmp_path)
    assert r.returncode == 0 and "usage" not in r.stdout, (r.returncode, r.stdout, r.stderr)
    assert np.load(tmp_path / "-h").shape == (1, 7, 9)


@pytest.mark.parametrize("args", [["--out", "o1.npy", "--out", "o2.npy"], ["--form", "n-to-m", "--out", "o1.npy"],
                                  ["--algorithm=reference", "--out", "o1.npy"], ["--dims", "2", "--dims=2", "--out", "o1.npy"],
                                  ["--precision", "fp32", "--precision", "tf32", "--out", "o1.npy"]])
def test_an_option_given_twice_is_refused(xcorr, tmp_path, pair, args):
    """The second value of a one-value option silently won (--out o1 --out o2 wrote only o2):
    refused, as a second window option already was, and nothing is written."""
    r = run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one", *map(str, pair), *args], cwd=tmp_path)
    one_line_error(r, 2, "given twice")
    assert not list(tmp_path.glob("o*.npy"))


def test_a_parameter_or_explain_option_given_twice_is_refused(xcorr, tmp_path, pair, overlap_wise):
    r = xrun(xcorr, "--algorithm", "overlap-wise", "--form", "one-to-one", *pair, "--out", tmp_path / "o.npy",
             "--param", "warps=4", "--param", "warps=8")
    one_line_error(r, 2, "--param warps is given twice")
    r = run([xcorr, "explain", "--form", "one-to-one", "--left", "9x9", "--right", "3x3", "--right", "4x4"])
    one_line_error(r, 2, "--right is given twice")


def test_info_takes_no_arguments(xcorr):
    one_line_error(run([xcorr, "info", "extra"]), 2, "takes no arguments")


def test_sizes_whose_sum_overflows_int_are_refused(xcorr):
    """hL + hR - 1 was summed in int before the size check widened it: 2^31 - 1 rows on each side
    wrapped to a negative size, passed, and explain chose an algorithm for it."""
    for dims, left in ((2, "2147483647x1"), (1, "2147483647")):
        r = run([xcorr, "explain", "--dims", str(dims), "--form", "one-to-one", "--left", left, "--right", left])
        one_line_error(r, 2, "too large")


def test_a_chunk_that_cuts_the_batch_into_too_many_pieces_is_refused(xcorr):
    """--chunk 1 on 2^22 outputs: the piece list grew without bound (a 10^10-output batch allocated
    gigabytes, then bad_alloc, exit 1); past 2^20 pieces it is refused with what to change."""
    r = run([xcorr, "explain", "--form", "n-to-m", "--left", "2048:1x1", "--right", "2048:1x1", "--chunk", "1"],
            timeout=60)
    one_line_error(r, 2, "more than 2^20 pieces", "--chunk")
    r = run([xcorr, "explain", "--form", "n-to-m", "--left", "2048:1x1", "--right", "2048:1x1", "--chunk", "64"])
    assert r.returncode == 0 and "pieces" in r.stdout, r.stderr


def test_float64_beyond_float32_is_refused(xcorr, tmp_path, pair):
    """A finite float64 the float32 conversion turns into inf was correlated as inf (exit 0, an
    output of inf and nan): refused, naming the element. Infinite inputs are the user's data."""
    left = np.full((5, 6), 0.5)
    left[2, 3] = -1e300
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", save(tmp_path / "big.npy", left), pair[1],
             "--out", out)
    one_line_error(r, 2, "big.npy", "element 15", "float32")
    assert not out.exists()
    left[2, 3] = np.inf
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", save(tmp_path / "inf.npy", left), pair[1],
             "--out", out)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("mask", [0o077, 0o022])
def test_output_mode_follows_the_umask(xcorr, tmp_path, pair, mask):
    """The output's mode is 0666 less the umask, as np.save's (it was 0644 whatever the umask:
    world-readable under umask 077)."""
    out = tmp_path / "o.npy"
    r = run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one", *map(str, pair), "--out", str(out)],
            preexec_fn=lambda: os.umask(mask))
    assert r.returncode == 0, r.stderr
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask


def test_output_directory_missing(xcorr, tmp_path, pair):
    r = xrun(xcorr, "--algorithm", "reference", "--form", "one-to-one", *pair, "--out", tmp_path / "no" / "o.npy")
    one_line_error(r, 2, "cannot create output")


def test_failed_run_leaves_existing_output_untouched(xcorr, tmp_path, pair):
    """A write that fails half-way (the file size limit: write() returns EFBIG once 200 bytes are
    written, of the output's 380) leaves the old output byte for byte and no temporary file. A
    writer that truncates the output in place, or deletes it when a write fails, loses it."""
    out = tmp_path / "o.npy"
    old = b"precious" * 64
    out.write_bytes(old)

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of being killed

    r = run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one", *pair, "--out", str(out)],
            preexec_fn=small_files)
    one_line_error(r, 2, "o.npy", "write failed")
    assert out.read_bytes() == old
    assert temp_files(tmp_path) == []


def test_output_too_large_for_host_memory(xcorr, tmp_path):
    # 5000 x 5000 outputs of 63 x 63 floats: ~370 GiB from 40 MB of input. Refused up front
    # with a message, never attempted (which would end in the out-of-memory killer).
    stack = np.zeros((5000, 32, 32), np.float32)
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "reference", "--form", "n-to-m", save(tmp_path / "l.npy", stack),
             save(tmp_path / "r.npy", stack), "--out", out)
    one_line_error(r, 2, "not enough host memory")
    assert not out.exists()


def test_no_gpu_gives_exit_3(xcorr, gpu_info, tmp_path, pair, overlap_wise):
    info, _ = gpu_info
    if info is not None:
        pytest.skip("a GPU is present: the no-GPU path cannot be exercised here")
    out = tmp_path / "o.npy"
    r = xrun(xcorr, "--algorithm", "overlap-wise", "--form", "one-to-one", *pair, "--out", out)
    one_line_error(r, 3, "no gpu")
    assert not out.exists()
    one_line_error(run([xcorr, "info"]), 3, "gpu")


# --- a user's files are never replaced --------------------------------------------

@pytest.mark.parametrize("kind", ["fifo", "char device"])
def test_a_special_file_as_input_is_refused_without_blocking(xcorr, tmp_path, pair, kind):
    """A FIFO given as an input blocked forever (the check for a regular file came after an open
    that waits for a writer): refused at once, exit 2, one line saying what it is."""
    if kind == "fifo":
        special = tmp_path / "in.npy"
        os.mkfifo(special)
        needle = "FIFO"
    else:
        special, needle = Path("/dev/zero"), "character device"
    r = run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one", str(special), pair[1], "--out",
             str(tmp_path / "o.npy")], timeout=20)
    one_line_error(r, 2, str(special), needle)
    assert not (tmp_path / "o.npy").exists()


def run_ref(xcorr, pair, out, **kw):
    return run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one", *map(str, pair), "--out", str(out)],
               **kw)


def expected_output(xcorr, tmp_path, pair):
    """The bytes of the output as a regular file: what a device or a link's target must receive."""
    plain = tmp_path / "plain" / "o.npy"
    plain.parent.mkdir()
    assert run_ref(xcorr, pair, plain).returncode == 0
    return plain.read_bytes()


def test_output_to_a_fifo_is_written_in_place(xcorr, tmp_path, pair):
    """A FIFO given as --out was replaced by a regular file (the temporary renamed over it) and its
    reader got nothing: it is written in place, as np.save does, and stays a FIFO."""
    want = expected_output(xcorr, tmp_path, pair)
    fifo = tmp_path / "pipe.npy"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    r = run_ref(xcorr, pair, fifo, timeout=60)
    reader.join(10)
    if reader.is_alive():  # xcorr never opened the FIFO: release the reader before failing
        with open(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "wb"):
            pass
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got == [want]
    assert temp_files(tmp_path) == []


def test_output_to_a_fifo_whose_reader_leaves_is_a_failed_write(xcorr, tmp_path, pair):
    """A reader that closes early makes the write fail (EPIPE): exit 2 and one line, not a death by
    SIGPIPE without a word."""
    fifo = tmp_path / "pipe.npy"
    os.mkfifo(fifo)
    big = save(tmp_path / "big.npy", np.ones((300, 300), np.float32))  # a 1.4 MB output: beyond the pipe's buffer

    def read_a_little():
        with open(fifo, "rb") as f:
            f.read(16)
    reader = threading.Thread(target=read_a_little, daemon=True)
    reader.start()
    r = run_ref(xcorr, (big, pair[1]), fifo, timeout=60)
    reader.join(10)
    one_line_error(r, 2, "pipe.npy", "write failed")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_to_a_character_device_is_written_in_place(xcorr, tmp_path, pair):
    """`--out /dev/null` as root replaced /dev/null with a regular file. Tried on a node of the
    null device made in tmp_path (nothing of the system's at stake), then, where that node stayed
    a device, on /dev/null itself."""
    null = tmp_path / "null"
    try:
        os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except OSError as e:
        pytest.skip(f"cannot make a device node here ({e}): not root")
    r = run_ref(xcorr, pair, null)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.lstat(null).st_mode) and os.lstat(null).st_rdev == os.makedev(1, 3)
    assert temp_files(tmp_path) == []
    dev_null = os.stat("/dev/null")
    r = run_ref(xcorr, pair, "/dev/null")
    assert r.returncode == 0, r.stderr
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (dev_null.st_ino, dev_null.st_rdev)


def test_output_to_a_directory_is_refused(xcorr, tmp_path, pair):
    d = tmp_path / "d.npy"
    d.mkdir()
    one_line_error(run_ref(xcorr, pair, d), 2, "d.npy", "directory")
    assert d.is_dir() and not any(d.iterdir())


@pytest.mark.parametrize("relative", [True, False])
def test_output_through_a_symlink_writes_its_target(xcorr, tmp_path, pair, relative):
    """--out link.npy, a symbolic link, replaced the link by a file and never wrote its target;
    np.save writes through the link: the link stays, the target (in another directory, beside
    which the temporary goes) gets the output."""
    want = expected_output(xcorr, tmp_path, pair)
    (tmp_path / "data").mkdir()
    (tmp_path / "links").mkdir()
    target = tmp_path / "data" / "t.npy"
    target.write_bytes(b"old")
    link = tmp_path / "links" / "link.npy"
    link.symlink_to("../data/t.npy" if relative else target)
    r = run_ref(xcorr, pair, link)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == ("../data/t.npy" if relative else str(target))
    assert target.read_bytes() == want
    assert temp_files(tmp_path / "data") == [] and temp_files(tmp_path / "links") == []


def test_output_through_a_chain_of_links_and_a_dangling_link(xcorr, tmp_path, pair):
    """A link to a link is followed to the end; a dangling link gets its target created (np.save's
    open() does the same)."""
    want = expected_output(xcorr, tmp_path, pair)
    (tmp_path / "first.npy").symlink_to("second.npy")
    (tmp_path / "second.npy").symlink_to("new.npy")
    r = run_ref(xcorr, pair, tmp_path / "first.npy")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "first.npy").is_symlink() and (tmp_path / "second.npy").is_symlink()
    assert (tmp_path / "new.npy").read_bytes() == want
    assert temp_files(tmp_path) == []


def test_output_through_a_link_loop_is_refused(xcorr, tmp_path, pair):
    (tmp_path / "a.npy").symlink_to("b.npy")
    (tmp_path / "b.npy").symlink_to("a.npy")
    one_line_error(run_ref(xcorr, pair, tmp_path / "a.npy"), 2, "a.npy", "symbolic links")
    assert os.readlink(tmp_path / "a.npy") == "b.npy" and os.readlink(tmp_path / "b.npy") == "a.npy"


@pytest.mark.parametrize("how", ["same path", "another path", "hard link", "symlink"])
@pytest.mark.parametrize("side", [0, 1])
def test_output_over_an_input_is_refused(xcorr, tmp_path, pair, how, side):
    """--out equal to an input (also by another path, a hard link or a symbolic link: the same
    device and inode) silently replaced the input: refused, exit 2, one line naming both."""
    victim = Path(pair[side])
    before = victim.read_bytes()
    out = {"same path": victim, "another path": tmp_path / "." / ".." / tmp_path.name / victim.name,
           "hard link": tmp_path / "hard.npy", "symlink": tmp_path / "sym.npy"}[how]
    if how == "hard link":
        os.link(victim, out)
    if how == "symlink":
        out.symlink_to(victim.name)
    r = run_ref(xcorr, pair, out)
    one_line_error(r, 2, str(out), str(victim), "left" if side == 0 else "right", "same file")
    assert victim.read_bytes() == before
    assert temp_files(tmp_path) == []


def address_space_limit(gib):
    return lambda: resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))


def test_output_beyond_the_address_space_limit_is_refused(xcorr, tmp_path):
    """32 x 32 inputs with --max-shift 16000: a 4.1 GB output, and 12 GB at the peak with its float64
    reference. The memory check read MemAvailable alone; under a limit on the address space the
    allocation died with std::bad_alloc (exit 1). The limit now counts: refused up front, exit 2,
    saying what needs how much and which limit leaves how much."""
    ones = save(tmp_path / "l.npy", np.ones((32, 32), np.float32))
    out = tmp_path / "o.npy"
    r = run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one", ones, ones, "--max-shift", "16000",
             "--out", str(out)], preexec_fn=address_space_limit(3), timeout=60)
    one_line_error(r, 2, "not enough host memory", "shifts -16000:16000", "needs 11.4 GiB", "address-space limit")
    assert not out.exists() and temp_files(tmp_path) == []


def test_an_allocation_that_fails_anyway_is_exit_2(xcorr, tmp_path, pair):
    """Past the checks, an allocation refused under a limit on the process's data (here reading a
    256 MB input (a sparse file) under a 400 MB limit, of which the tool's own libraries take about
    270 MB) was std::bad_alloc, exit 1: exit 2, naming what was being done."""
    big = tmp_path / "big.npy"
    np.lib.format.open_memmap(big, mode="w+", dtype=np.float32, shape=(8192, 8192)).flush()
    out = tmp_path / "o.npy"

    def data_limit():
        resource.setrlimit(resource.RLIMIT_DATA, (400 << 20, 400 << 20))
    r = run([xcorr, "run", "--algorithm", "reference", "--form", "one-to-one", str(big), pair[1], "--out", str(out)],
            preexec_fn=data_limit, timeout=60)
    one_line_error(r, 2, "not enough host memory", "big.npy", "allocation failed", "data limit")
    assert not out.exists()


def test_explain_names_a_gpu_without_measurements_and_the_ones_there_are(xcorr):
    """`xcorr explain --gpu NAME` for a GPU no table holds answers from the cost model (a fair
    question about an unmeasured GPU) and says so on stderr with the GPUs that were measured, so
    that a typo shows (it answered in silence); a measured GPU's name gives no such line."""
    args = [xcorr, "explain", "--form", "one-to-one", "--left", "64x64", "--right", "16x16"]
    r = run([*args, "--gpu", "NVIDIA H2OO"])
    assert r.returncode == 0 and "cost model" in r.stdout
    assert r.stderr.startswith("xcorr explain: no measurements of 'NVIDIA H2OO' (results/nvidia-h2oo) in this build, "
                               "which has ") and "nvidia-h200" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    r = run([*args, "--gpu", "NVIDIA H200"])
    assert r.returncode == 0 and r.stderr == "" and "no measurements" not in r.stdout
