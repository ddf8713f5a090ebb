"""GPU tests: every registered variant x every form it supports x its parameter combinations x
random sizes (1x1 up to 512x512, odd and unequal), against the float64 reference, with poisoned
output (xcorr_validate); plus end-to-end checks against scipy of every form and of the windows of every
variant that declares some. Those run their cases in this process through the Python package's
Plan (the C++ Plan that `xcorr run` uses: one CUDA context and cuFFT initialisation per test
instead of one per case, which made one test take 50-110 s), each into a device output filled with
NaN beforehand (run_poisoned), and one case per test (per variant) also through `xcorr run
--validate` on .npy files (its own poisoning and GPU-reference check). Skipped, with the reason,
where there is no usable GPU (but for test_reference_windows_end_to_end, which checks the window
test's own helper on the CPU reference)."""
import json
import math
import re

import numpy as np
import pytest

from conftest import (binary, package, plan_precision, precision_args, reported_error, require_variant, run,
                      run_poisoned, save, seeded_rng)
from xcorr_np import FORMS, correlate, counts, rel_error


def variant_names():
    r = run([binary("xcorr"), "list", "--json"])
    return [v["name"] for v in json.loads(r.stdout)]


def plan_window(option):
    """The Plan's window arguments for an `xcorr run` window option (window_options), of the same
    kind (a refusal names the kind asked for)."""
    if not option:
        return {}
    flag, text = option
    if flag == "--mode":
        return {"mode": text}
    if flag == "--max-shift":
        sy, sx = (int(t) for t in text.split(","))
        return {"max_shift": (sy, sx)}
    assert flag == "--shifts", option
    (dy0, dy1), (dx0, dx1) = (tuple(int(t) for t in part.split(":")) for part in text.split(","))
    return {"shifts": ((dy0, dy1), (dx0, dx1))}


def plan_output(plan, left, right, want, what):
    """The plan's result into a poisoned device output (run_poisoned), every element written
    (finite), as xcorr run's output stack (count, oh, ow): a Plan's leading dimensions are the
    form's (e.g. (nL, nR, oh, ow)), checked to hold as many matrices of want's shape."""
    got = run_poisoned(plan, left, right)
    assert np.isfinite(got).all(), (what, "Plan: not every element written")
    assert got.shape[-2:] == want.shape[-2:] and got.size == want.size, (what, got.shape, want.shape)
    return got.reshape(want.shape)


def assert_validator_passed(r):
    """xcorr_validate exited 0, printed no FAIL line and closed with "N passed, 0 failed", N > 0
    (lines of compute-sanitizer, which start with '=====', may follow)."""
    lines = [l for l in r.stdout.splitlines() if l.strip() and not l.startswith("=====")]
    tail = lines[-1] if lines else ""
    failures = [l for l in lines if l.startswith("FAIL")]
    assert r.returncode == 0 and not failures, "\n".join(failures[:20]) or r.stdout[-3000:] + r.stderr
    m = re.match(r"(\d+) passed, (\d+) failed", tail)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) == 0, tail


@pytest.mark.parametrize("name", variant_names())
def test_validator(gpu, name):
    r = run([binary("xcorr_validate"), "--variant", name], timeout=1800)
    assert_validator_passed(r)


@pytest.mark.parametrize("name", variant_names())
def test_run_validate_end_to_end(gpu, registry, tmp_path, name):
    """Every form the variant computes, on random odd sizes, against scipy in float64: in this
    process through the package's Plan (into a NaN-poisoned device output), and the first form
    also through `xcorr run --validate` (.npy files in and out, its own poisoning and GPU reference)."""
    pkg = package(name)
    v = next(v for v in registry if v["name"] == name)
    rng = seeded_rng(name)
    cli_done = False
    for form in v["forms"]:
        hL, wL, hR, wR = (int(x) for x in rng.integers(3, 40, size=4))
        if v.get("signals_only"):  # a kernel built for signals: 1 x n (its refusal is tested elsewhere)
            hL, hR = 1, 1
        if v.get("max_shifts"):  # a kernel for small windows: a full output within its shift count
            side = int(v["max_shifts"] ** 0.5)
            hL, hR, wL, wR = (max(1, min(x, (side + 1) // 2)) for x in (hL, hR, wL, wR))
        nL, nR = counts(form, rng)
        left = rng.random((nL, hL, wL), dtype=np.float32)
        right = rng.random((nR, hR, wR), dtype=np.float32)
        want = correlate(form, left.astype(np.float64), right.astype(np.float64))
        plan = pkg.Plan(left.shape, right.shape, form=form, algorithm=name, precision=plan_precision(v))
        got = plan_output(plan, left, right, want, form)
        assert rel_error(got, want) <= v["tolerance"], form
        if cli_done:
            continue
        out = tmp_path / f"{form}.npy"
        r = run([binary("xcorr"), "run", "--algorithm", name, "--form", form, "--validate", *precision_args(v),
                 save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right), "--out", str(out)])
        assert r.returncode == 0, (form, r.stdout, r.stderr)
        assert "ok" in r.stdout
        got = np.load(out)
        assert got.shape == want.shape
        assert rel_error(got, want) <= v["tolerance"], (form, "xcorr run")
        cli_done = True


def test_validate_catches_a_wrong_result(gpu, tmp_path, overlap_wise):
    """--validate must be able to fail, and say why: a NaN in the input makes the output
    non-finite, which the validation reports (exit 2: the data, not the algorithm, naming the input
    and its count of non-finite values) instead of writing the file."""
    left = np.ones((4, 4), np.float32)
    left[1, 1] = np.nan
    right = np.ones((3, 3), np.float32)
    out = tmp_path / "o.npy"
    r = run([binary("xcorr"), "run", "--algorithm", "overlap-wise", "--form", "one-to-one", "--validate",
             save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right), "--out", str(out)])
    assert r.returncode == 2 and "FAILED" in r.stdout
    assert "holds 1 non-finite value" in r.stderr and "l.npy" in r.stderr
    assert not out.exists()


def test_validate_tolerance_just_below_and_above_the_error(gpu, tmp_path, overlap_wise):
    """--validate holds a variant to --tolerance when given: a tolerance one step below the error
    the run reports fails (exit 1, one line, nothing written), one step above passes. overlap-wise
    sums each output in a fixed order, so every run reports the same error."""
    rng = seeded_rng(2025)
    l = save(tmp_path / "l.npy", rng.random((40, 40), dtype=np.float32))
    r_ = save(tmp_path / "r.npy", rng.random((24, 24), dtype=np.float32))

    def validate(out, *tolerance):
        return run([binary("xcorr"), "run", "--algorithm", "overlap-wise", "--form", "one-to-one", "--validate",
                    l, r_, "--out", str(out), *tolerance])
    r = validate(tmp_path / "o.npy")
    assert r.returncode == 0, (r.stdout, r.stderr)
    err, bound, _ = reported_error(r)
    assert 0 < err <= bound

    below = tmp_path / "below.npy"
    r = validate(below, "--tolerance", repr(math.nextafter(err, 0)))
    assert r.returncode == 1 and reported_error(r)[2] == "FAILED", (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "validation failed" in r.stderr
    assert not below.exists()

    above = tmp_path / "above.npy"
    r = validate(above, "--tolerance", repr(math.nextafter(err, 1)))
    assert r.returncode == 0 and reported_error(r)[0] == err, (r.stdout, r.stderr)
    assert np.load(above).shape == (1, 63, 63)


def test_overlap_wise_holds_fp32_on_a_million_products_per_output(gpu, tmp_path, overlap_wise):
    """Every output of two 1024 x 1024 matrices within +-2 sums about a million products: one running
    float sum drifted ~2e-5 from float64 there (the windows experiment's checks failed on 1024 and
    2048), past the 1e-5 fp32 promises (xcorr list); the kernel sums each row first. Inputs of both
    signs with an offset, as the experiments' checks take them."""
    rng = seeded_rng(1024)
    l = save(tmp_path / "l.npy", (rng.random((1024, 1024), dtype=np.float32) * 2 - 1) + 4)
    r_ = save(tmp_path / "r.npy", rng.random((1024, 1024), dtype=np.float32) * 2 - 1)
    out = tmp_path / "o.npy"
    r = run([binary("xcorr"), "run", "--algorithm", "overlap-wise", "--form", "one-to-one", "--validate",
             "--max-shift", "2", l, r_, "--out", str(out)], timeout=600)
    assert r.returncode == 0, (r.stdout, r.stderr)
    err, bound, _ = reported_error(r)
    assert 0 < err <= bound <= 1e-5
    assert np.load(out).shape == (1, 5, 5)


def test_problem_too_large_for_gpu_memory(gpu, tmp_path, overlap_wise):
    # 5000 x 5000 outputs of 63 x 63: ~400 GB of output from 40 MB of input.
    stack = np.zeros((5000, 32, 32), np.float32)
    l = save(tmp_path / "l.npy", stack)
    r_ = save(tmp_path / "r.npy", stack)
    r = run([binary("xcorr"), "run", "--algorithm", "overlap-wise", "--form", "n-to-m", l, r_,
             "--out", str(tmp_path / "o.npy")])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "not enough GPU memory" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.npy").exists()


def test_gpu_context(gpu):
    for key in ["xcorr_gpu_name", "xcorr_compute_capability", "xcorr_sm_count", "xcorr_sm_clock_mhz",
                "xcorr_driver_version", "xcorr_cuda_runtime_version", "xcorr_cufft_version", "xcorr_git_revision"]:
        assert gpu[key] and gpu[key] != "unknown" or key == "xcorr_git_revision", key
    assert float(gpu["xcorr_fp32_peak_flops"]) > 1e12


def test_binary_not_built_for_this_gpu(gpu, tmp_path):
    """A binary holding code only for another architecture refuses with exit 3 and names the
    -Dgpu_arch to rebuild with (instead of failing at the first launch)."""
    import shutil
    import subprocess
    import sys
    from conftest import ROOT
    cc = gpu["xcorr_compute_capability"]
    other = "8.0" if cc != "8.0" else "9.0"
    build = tmp_path / "other-arch"
    setup = subprocess.run([sys.executable, "-m", "mesonbuild.mesonmain", "setup", str(build), str(ROOT),
                            f"-Dgpu_arch={other}", "-Dvariants=01"], capture_output=True, text=True)
    if setup.returncode != 0:
        pytest.skip("cannot configure a second build here: " + setup.stdout[-300:])
    assert subprocess.run([shutil.which("ninja") or "ninja", "-C", str(build), "xcorr"],
                          capture_output=True).returncode == 0
    left = np.ones((4, 5), np.float32)
    r = run([str(build / "xcorr"), "run", "--algorithm", "overlap-wise", "--form", "one-to-one",
             save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", left), "--out", str(tmp_path / "o.npy")])
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert f"-Dgpu_arch={cc}" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.parametrize("name", ["fft", "fft-fused", "fft-segmented"])
def test_fft_memory_chunks(gpu, registry, name):
    """The FFT variants' memory-bounded path (rights in chunks; fft: each chunk's crop timed;
    fft-fused: its staged path; fft-segmented: lag pieces in chunks, the first chunk's crop writing
    the zeros) is taken only when the workspace does not fit in GPU memory; XCORR_FFT_MAX_CHUNK
    forces it, with tail chunks, on the validator's shapes, each parameter value once (test_validator
    runs every combination unchunked; every combination again in chunks was 116 s of the H200's GPU
    suite for fft alone)."""
    import os
    require_variant(registry, name)
    r = run([binary("xcorr_validate"), "--variant", name, "--params", "covering"],
            env={**os.environ, "XCORR_FFT_MAX_CHUNK": "2"}, timeout=900)
    assert_validator_passed(r)


# fft-fused's launcher rules that the validator's shapes do not take both ways, each forced by its
# switch: the value the validator runs it at (the way its rule does not go on those shapes), the
# forms it concerns, and the left and right shapes of the 19 x 5 n-to-m run.
FFT_FUSED_SWITCHES = {
    # the staged n-to-m pair pass in groups of eight lefts (chunk_pair_of) where the chunk's spectra
    # outgrow the L2: never on these sizes (N = 384 for the run: a mixed-radix plan)
    "XCORR_FFT_PAIR_GROUPS": ("1", ["n-to-m"], (151, 171), (141, 163)),
    # the first chunk's rights' rows in the lefts' row launch where they hold at most 512 row pairs:
    # always on the validator's given shapes (3 or 4 rights of at most 125 pairs); only sizes
    # without a mixed radix take it (rows_take_two: N = 256 for the run, whose rights hold 106
    # pairs each: five apart, three in a chunk merged)
    "XCORR_FFT_MERGE_ROWS": ("0", ["one-to-many", "n-to-mn", "n-to-m"], (41, 151), (211, 101)),
}


@pytest.mark.parametrize("switch", sorted(FFT_FUSED_SWITCHES))
def test_fft_fused_switches(gpu, registry, tmp_path, switch):
    """Each of fft-fused's forced launcher rules (FFT_FUSED_SWITCHES) the other way from the rule:
    the validator's staged shapes in the forms it concerns, with windows and every normalization;
    then 19 lefts x 5 rights n-to-m (pair groups: two whole groups of eight and a partial one;
    merged rows: five rights, which the rule leaves apart, three in a chunk, which it merges)
    through `xcorr run --validate`, forced on whole and in chunks of 3 rights (a partial last
    chunk), forced off in chunks, all against the same float64 reference; a value other than 0 or
    1 is a usage error (exit 2) naming the variable, with no output written."""
    import os
    require_variant(registry, "fft-fused")
    value, forms, left_shape, right_shape = FFT_FUSED_SWITCHES[switch]
    shapes = ["--shape", "151x171,141x163", "--shape", "129x127,120x131", "--shape", "9x300,250x20"]
    for form in forms:
        r = run([binary("xcorr_validate"), "--variant", "fft-fused", "--form", form, *shapes, "--windows", "also",
                 "--normalize", "all"], env={**os.environ, switch: value}, timeout=600)
        assert_validator_passed(r)
    rng = seeded_rng(f"fft-fused {switch}")
    left = (rng.random((19, *left_shape)) - 0.5).astype(np.float32)
    right = (rng.random((5, *right_shape)) - 0.5).astype(np.float32)
    lp, rp = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
    xc = binary("xcorr")
    ref = tmp_path / "ref.npy"
    assert run([xc, "run", "--algorithm", "reference", "--form", "n-to-m", lp, rp, "--out", str(ref)]).returncode == 0
    want = np.load(ref).astype(np.float64)
    for forced, chunk in (("1", None), ("1", "3"), ("0", "3")):
        out = tmp_path / f"o{forced}{chunk}.npy"
        e = {**os.environ, switch: forced, **({"XCORR_FFT_MAX_CHUNK": chunk} if chunk else {})}
        r = run([xc, "run", "--algorithm", "fft-fused", "--form", "n-to-m", lp, rp, "--out", str(out), "--validate"], env=e)
        assert r.returncode == 0, (forced, chunk, r.stdout, r.stderr)
        got = np.load(out)
        assert got.shape == want.shape
        assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want), (forced, chunk)
    r = run([xc, "run", "--algorithm", "fft-fused", "--form", "n-to-m", lp, rp, "--out", str(tmp_path / "bad.npy")],
            env={**os.environ, switch: "2"})
    assert r.returncode == 2 and switch in r.stderr, (r.returncode, r.stderr)
    assert not (tmp_path / "bad.npy").exists()


@pytest.mark.parametrize("form,counts,limit,params", [
    ("one-to-many", (1, 9), 4, "launch=graph,layout=outofplace"),
    ("n-to-m", (3, 5), 6, "launch=stream,layout=inplace"),
])
def test_fft_plan_too_large_runs_in_chunks(gpu, registry, tmp_path, form, counts, limit, params):
    """A cuFFT plan that does not fit the GPU's memory (cuFFT says CUFFT_ALLOC_FAILED, or
    CUFFT_INTERNAL_ERROR as for 300 transforms of 8.64 M samples on an 80 GB H100) makes fft halve
    its chunk of rights and plan again, so the batch runs in chunks rather than failing.
    XCORR_FFT_PLAN_BATCH_LIMIT simulates such a GPU (plans of more transforms fail): the output
    still matches the float64 reference. fft+plan, which makes its plans inside the timed call,
    has no retry: the same limit is a clean out-of-memory error (exit 2, one line, no output)."""
    import os
    require_variant(registry, "fft")
    v = next(v for v in registry if v["name"] == "fft")
    rng = seeded_rng(7)
    nl, nr = counts
    left = rng.uniform(-1, 1, (nl, 37, 29)).astype(np.float32)
    right = rng.uniform(-1, 1, (nr, 11, 14)).astype(np.float32)
    want = correlate(form, left.astype(np.float64), right.astype(np.float64))
    env = {**os.environ, "XCORR_FFT_PLAN_BATCH_LIMIT": str(limit)}
    args = ["--form", form, save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)]
    out = tmp_path / "o.npy"
    r = run([binary("xcorr"), "run", "--algorithm", "fft", *args, "--out", str(out), "--validate",
             *[a for kv in params.split(",") for a in ("--param", kv)]], env=env)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert rel_error(np.load(out), want) <= v["tolerance"]
    out2 = tmp_path / "o2.npy"
    r = run([binary("xcorr"), "run", "--algorithm", "fft+plan", *args, "--out", str(out2)], env=env)
    assert r.returncode == 2 and "not enough GPU memory for the cuFFT plan" in r.stderr, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and not out2.exists()


def test_fft_segmented_plan_too_large_runs_in_smaller_chunks(gpu, registry, tmp_path):
    """fft-segmented retries a plan cuFFT cannot make for want of memory as fft does, with half as
    many lag pieces per chunk: under XCORR_FFT_PLAN_BATCH_LIMIT=64 (a simulated small GPU) a trace of
    20000 samples against 6 templates of 300 (valid, N = 256: about 150 pieces of the lag window)
    still matches float64. Where even the rights' plan (one per template block, no chunking) is
    too large, the error is the clean out-of-memory one (exit 2, one line, no output)."""
    import os
    import scipy.signal
    require_variant(registry, "fft-segmented")
    v = next(v for v in registry if v["name"] == "fft-segmented")
    rng = seeded_rng(11)
    left = rng.uniform(-1, 1, 20000).astype(np.float32)
    right = rng.uniform(-1, 1, (6, 300)).astype(np.float32)
    want = np.stack([scipy.signal.correlate(left.astype(np.float64), r.astype(np.float64), mode="valid") for r in right])
    args = ["--algorithm", "fft-segmented", "--dims", "1", "--form", "one-to-many", "--mode", "valid", "--param",
            "n=256", save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)]
    out = tmp_path / "o.npy"
    r = run([binary("xcorr"), "run", *args, "--out", str(out), "--validate"],
            env={**os.environ, "XCORR_FFT_PLAN_BATCH_LIMIT": "64"})
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert rel_error(np.load(out).reshape(want.shape), want) <= v["tolerance"]
    out2 = tmp_path / "o2.npy"
    r = run([binary("xcorr"), "run", *args, "--out", str(out2)], env={**os.environ, "XCORR_FFT_PLAN_BATCH_LIMIT": "2"})
    assert r.returncode == 2 and "not enough GPU memory for the cuFFT plan" in r.stderr, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and not out2.exists()


def test_fft_fused_size_limit(gpu, registry, tmp_path):
    """fft-fused holds a whole transform in one block's shared memory up to outputs of 191 x 191
    (transform 192), and stages larger ones through global memory up to 1023 x 1023 (transform
    1024). 96 x 96 pairs (the largest one-block case) and 97 x 97 pairs (the smallest staged case)
    match the float64 reference in every form (through the package's Plan; the first also through
    `xcorr run --validate`); a 1025-row output is refused with a pointer to fft: by the Plan
    (ValueError), and by xcorr run with exit 2 and no output file written."""
    require_variant(registry, "fft-fused")
    pkg = package("fft-fused")
    v = next(v for v in registry if v["name"] == "fft-fused")
    rng = seeded_rng(96)
    cli_done = False
    for n in (96, 97):
        for form in v["forms"]:
            nL, nR = {"one-to-one": (1, 1), "one-to-many": (1, 3), "n-to-mn": (2, 4), "n-to-m": (2, 3)}[form]
            left = rng.random((nL, n, n), dtype=np.float32)
            right = rng.random((nR, n, n), dtype=np.float32)
            want = correlate(form, left.astype(np.float64), right.astype(np.float64))
            plan = pkg.Plan(left.shape, right.shape, form=form, algorithm="fft-fused")
            got = plan_output(plan, left, right, want, (n, form))
            assert rel_error(got, want) <= v["tolerance"], (n, form)
            if cli_done:
                continue
            out = tmp_path / "o.npy"
            r = run([binary("xcorr"), "run", "--algorithm", "fft-fused", "--form", form, "--validate",
                     save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right), "--out", str(out)])
            assert r.returncode == 0, (n, form, r.stdout, r.stderr)
            assert rel_error(np.load(out), want) <= v["tolerance"], (n, form, "xcorr run")
            cli_done = True
    big = rng.random((1, 513, 8), dtype=np.float32)
    with pytest.raises(ValueError, match="1025 x 15 output") as e:
        pkg.Plan(big.shape, big.shape, form="one-to-one", algorithm="fft-fused")
    assert "use fft" in str(e.value)
    out = tmp_path / "big.npy"
    r = run([binary("xcorr"), "run", "--algorithm", "fft-fused", "--form", "one-to-one",
             save(tmp_path / "l.npy", big), save(tmp_path / "r.npy", big), "--out", str(out)])
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "1025 x 15 output" in r.stderr and "use fft" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("n_out,shapes,counts", [
    (384, [(131, 140, 130, 121), (192, 170, 192, 190)], {"one-to-many": (1, 16), "n-to-mn": (2, 16), "n-to-m": (4, 4)}),
    (768, [(262, 301, 255, 250)], {"one-to-many": (1, 4), "n-to-mn": (2, 4), "n-to-m": (2, 2)}),
])
def test_fft_fused_mixed_radix_sizes(gpu, registry, n_out, shapes, counts):
    """fft-fused's transform sizes 384 and 768 (the mixed-radix team DFT of team_dft.cuh) serve
    outputs of 257..383 and 513..767 from 16 and 4 outputs on (fewer take 512 and 1024): each batched
    form at the fewest outputs that choose them, odd and unequal shapes up to the largest output the
    size holds (383 rows), inputs of both signs, against a float64 reference, into a poisoned
    output."""
    import scipy.signal
    from xcorr_np import pairs
    require_variant(registry, "fft-fused")
    pkg = package("fft-fused")
    v = next(v for v in registry if v["name"] == "fft-fused")
    rng = seeded_rng(n_out)
    for hL, wL, hR, wR in shapes:
        assert max(hL + hR, wL + wR) - 1 <= n_out and max(hL + hR, wL + wR) - 1 > n_out * 2 // 3
        for form, (nL, nR) in counts.items():
            left = rng.uniform(-1, 1, (nL, hL, wL)).astype(np.float32)
            right = rng.uniform(-1, 1, (nR, hR, wR)).astype(np.float32)
            want = np.stack([scipy.signal.correlate(left[i].astype(np.float64), right[j].astype(np.float64),
                                                    method="fft") for i, j in pairs(form, nL, nR)])
            plan = pkg.Plan(left.shape, right.shape, form=form, algorithm="fft-fused")
            got = plan_output(plan, left, right, want, (n_out, form))
            assert rel_error(got, want) <= v["tolerance"], (n_out, (hL, wL, hR, wR), form, rel_error(got, want))


def compute_sanitizer():
    import shutil
    from pathlib import Path
    found = shutil.which("compute-sanitizer")
    for p in [found, "/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer"]:
        if p and Path(p).exists():
            return p
    pytest.skip("compute-sanitizer is not installed (it ships with the CUDA toolkit)")


SANITIZER_SHARDS = 8


@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
@pytest.mark.parametrize("shard", range(1, SANITIZER_SHARDS + 1))
def test_sanitizer_finds_nothing(gpu, tool, shard):
    """compute-sanitizer reports nothing for any variant on odd, unequal shapes, one-to-one and n-to-m,
    each instantiated parameter value once. racecheck once found a shared-memory hazard in fft-fused
    at transform size 96 (these shapes) that no comparison of outputs had shown; scripts/device-check
    -s runs all four tools on more shapes and forms. The checks are dealt over SANITIZER_SHARDS tests
    (xcorr_validate --shard: together exactly one process's checks), so that pytest-xdist's workers
    share racecheck's minutes; one process over every variant outlasted a device call."""
    for shape, form in [("37x53,29x41", "one-to-one"), ("33x35,31x33", "n-to-m")]:
        r = run([compute_sanitizer(), "--tool", tool, "--error-exitcode", "99", "--print-limit", "20",
                 binary("xcorr_validate"), "--params", "covering", "--shape", shape, "--form", form,
                 "--shard", f"{shard}/{SANITIZER_SHARDS}"], timeout=1800)
        findings = [l for l in r.stdout.splitlines() if l.startswith("=====") and "SUMMARY" not in l]
        assert r.returncode != 99, "\n".join(findings[:40])
        assert re.search(r"(ERROR|RACECHECK) SUMMARY: 0 ", r.stdout), r.stdout[-2000:]
        assert_validator_passed(r)


@pytest.mark.parametrize("tool, mode, options", [
    ("racecheck", "race", ["--kernel-name", "kns=xcorr"]),  # scripts/sanitize's filter: ours alone
    ("racecheck", "race", []),
    ("memcheck", "oob", []),
    ("initcheck", "uninit", []),
])
def test_the_sanitizers_report_the_defects_planted_for_them(gpu, tool, mode, options):
    """scripts/sanitize's positive control (tests/sanitizer_probe.cu): each tool reports the defect
    planted for it, racecheck with the kernel filter the sanitizer runs use too, and nothing on the
    same kernels without the defects; else "clean" over the variants would prove nothing."""
    def sanitized(what):
        return run([compute_sanitizer(), "--tool", tool, *options, "--error-exitcode", "99", "--print-limit", "5",
                    binary("xcorr_sanitizer_probe"), what], timeout=300)
    found = sanitized(mode)
    # a report line (scripts/sanitize's finding pattern); racecheck may grade a hazard a warning,
    # which sets no exit status, the others exit 99
    assert re.search(r"^========= +(Invalid|Race|Uninit|Error|Warning)", found.stdout, re.M), found.stdout[-2000:]
    assert found.returncode == 99 or tool == "racecheck", found.stdout[-2000:] + found.stderr[-2000:]
    clean = sanitized("clean")
    assert clean.returncode == 0 and re.search(r"(ERROR|RACECHECK) SUMMARY: 0 ", clean.stdout), clean.stdout[-2000:]


def windowed_variants():
    """Variants that declare windows beyond full, from the build's registry: kernels that gain
    windows are covered here without a change to this file."""
    r = run([binary("xcorr"), "list", "--json"])
    return [v["name"] for v in json.loads(r.stdout) if set(v["windows"]) - {"full"}]


# Odd, unequal shapes (hL, wL, hR, wR): the left larger in both dimensions, the right larger in
# both (valid at negative shifts), and neither (no valid window).
WINDOW_SHAPES = [(13, 17, 5, 8), (6, 9, 11, 14), (7, 12, 10, 5), (1, 29, 1, 11)]  # the last: signals


def window_options(shape):
    """(option, rectangle) of every window tried: valid (where it exists), same, max-shift 2,3
    (inside), a max-shift beyond every edge, a rectangle partly and one wholly beyond the full range."""
    from xcorr_np import same_window, valid_window
    hL, wL, hR, wR = shape
    sy, sx = max(hL, hR) + 1, max(wL, wR) + 2
    out = [(["--mode", "same"], same_window(*shape)),
           (["--max-shift", "2,3"], (-2, 2, -3, 3)),
           (["--max-shift", f"{sy},{sx}"], (-sy, sy, -sx, sx)),
           (["--shifts", f"{-(hR + 1)}:{hL // 2},{wL // 3 - 1}:{wL + 1}"], (-(hR + 1), hL // 2, wL // 3 - 1, wL + 1)),
           (["--shifts", f"{hL}:{hL + 2},{-(wR + 3)}:{-wR}"], (hL, hL + 2, -(wR + 3), -wR))]
    if valid_window(*shape):
        out.insert(0, (["--mode", "valid"], valid_window(*shape)))
    return out


def check_windows_end_to_end(tmp_path, v, pkg=None, cli_every_case=False):
    """Every window of window_options in every form against scipy (see test_run_windows_end_to_end),
    v being the variant's `xcorr list --json` entry: through the package's Plan (pkg, the module
    xcorr; None: not at all) into a NaN-poisoned device output, and through `xcorr run --algorithm
    NAME --validate` for the first case computed (every case: cli_every_case). A window it does not
    declare, or a shape it refuses (shape_refusal): the Plan raises ValueError with the reason, and
    xcorr run (where run) exits 2 with it, nothing written. Returns the cases computed."""
    from xcorr_np import crop, shape_refusal, supports_window
    name, forms, declared, tolerance = v["name"], v["forms"], v["windows"], v["tolerance"]
    precision = plan_precision(v)
    ran = 0
    cli_done = False
    for form in forms:
        for shape in WINDOW_SHAPES:
            rng = seeded_rng((name, form, shape))
            hL, wL, hR, wR = shape
            nL, nR = counts(form, rng)
            left = rng.random((nL, hL, wL), dtype=np.float32)
            right = rng.random((nR, hR, wR), dtype=np.float32)
            l, r_ = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
            left64, right64 = left.astype(np.float64), right.astype(np.float64)
            full = correlate(form, left64, right64)
            for option, rect in window_options(shape):
                what = (form, shape, option)
                refused = ("does not compute the" if not supports_window(declared, shape, rect)
                           else shape_refusal(v, shape, rect))
                plan = None
                if pkg is not None:
                    make = lambda: pkg.Plan(left.shape, right.shape, form=form, algorithm=name,  # noqa: E731
                                            precision=precision, **plan_window(option))
                    if refused:
                        with pytest.raises(ValueError, match=re.escape(refused)):
                            make()
                    else:
                        plan = make()
                cli = cli_every_case or (not cli_done and not refused)
                if cli:
                    out = tmp_path / "o.npy"
                    out.unlink(missing_ok=True)
                    r = run([binary("xcorr"), "run", "--algorithm", name, "--form", form, "--validate", l, r_,
                             "--out", str(out), *option, *precision_args(v)])
                if refused:
                    if cli:
                        assert r.returncode == 2 and refused in r.stderr, (what, r.stderr)
                        assert not out.exists()
                    continue
                if option[0] == "--mode":
                    want = correlate(form, left64, right64, option[1])
                    np.testing.assert_allclose(want, crop(full, hR, wR, *rect), rtol=1e-12, atol=1e-12)
                else:
                    want = crop(full, hR, wR, *rect)
                results = []
                if plan is not None:
                    results.append((plan_output(plan, left, right, want, what), "Plan"))
                if cli:
                    assert r.returncode == 0, (what, r.stdout, r.stderr)
                    results.append((np.load(out), "xcorr run"))
                    cli_done = True
                for got, source in results:
                    assert got.shape == want.shape, (what, source, got.shape, want.shape)
                    if not want.any():
                        assert not got.any(), (what, source)  # wholly beyond: every element exactly 0
                    else:
                        assert rel_error(got, want) <= tolerance, (what, source)
                        np.testing.assert_array_equal(got[want == 0], 0)  # rows/columns without overlap
                ran += 1
    assert cli_done, f"{name}: no case went through xcorr run"
    return ran


@pytest.mark.parametrize("name", windowed_variants())
def test_run_windows_end_to_end(gpu, registry, tmp_path, name):
    """Every window the variant declares (and a refusal of every one it does not), on odd unequal
    shapes in every form it supports, the output compared with scipy.signal.correlate2d in float64:
    mode valid/same directly, the shift rectangles as the full output cropped with zero extension
    (a window wholly beyond the full range: exactly 0). The cases run through the package's Plan
    (one process), the first computed one also through `xcorr run --validate`."""
    pkg = package(name)
    v = next(v for v in registry if v["name"] == name)
    assert check_windows_end_to_end(tmp_path, v, pkg), "no window of this variant was run"


def test_reference_windows_end_to_end(xcorr, tmp_path):
    """The same on the CPU reference (every window), so that the check above is itself checked
    where there is no GPU: its windows, crops and comparisons agree with the reference's output,
    `xcorr run --algorithm reference` in every case and, where the package is installed, the
    package's float64 reference through the same Plan calls."""
    every = ["full", "valid", "same", "max-shift", "shifts"]
    reference = {"name": "reference", "forms": FORMS, "windows": every, "tolerance": 1e-7, "precision": "fp32"}
    try:
        import xcorr as pkg
    except ImportError:
        pkg = None
    assert check_windows_end_to_end(tmp_path, reference, pkg, cli_every_case=True) == 4 * (17 + 6)


def test_raw_windows_on_touched_parts(gpu, registry, tmp_path):
    """Variants that declare crop_windows run a raw window on the parts of the inputs it touches
    (lib/crop.cu): a template searched within ±4 in 200 x 190 images, a rectangle of shifts in
    the middle of the images, and one at their far corner, in every form, equal scipy's full output
    cropped; explain names the cropped problem (tests/test_normalize_crop.py checks its regions).
    Through the package's Plan, and the first case of each variant also through xcorr run --validate."""
    from xcorr_np import crop
    names = [v for v in registry if v.get("crop_windows")]
    if not names:
        pytest.skip("no variant of this build declares crop_windows")
    pkg = package(*(v["name"] for v in names))
    hL, wL, hR, wR = 200, 190, 23, 21
    rects = [(-4, 4, -4, 4), (100, 104, 50, 57), (hL - 3, hL - 1, wL - 5, wL - 1)]
    for v in names:
        cli_done = False
        for form in v["forms"]:
            rng = seeded_rng(("raw-crop", v["name"], form))
            nL, nR = counts(form, rng)
            left = rng.random((nL, hL, wL), dtype=np.float32) * 2 - 1
            right = rng.random((nR, hR, wR), dtype=np.float32) * 2 - 1
            full = correlate(form, left.astype(np.float64), right.astype(np.float64))
            for dy0, dy1, dx0, dx1 in rects:
                what = (v["name"], form, (dy0, dy1, dx0, dx1))
                want = crop(full, hR, wR, dy0, dy1, dx0, dx1)
                plan = pkg.Plan(left.shape, right.shape, form=form, algorithm=v["name"],
                                precision=plan_precision(v), shifts=((dy0, dy1), (dx0, dx1)))
                got = plan_output(plan, left, right, want, what)
                assert rel_error(got, want) <= v["tolerance"], what
                if cli_done:
                    continue
                l, r_ = save(tmp_path / "l.npy", left), save(tmp_path / "r.npy", right)
                out = tmp_path / "o.npy"
                out.unlink(missing_ok=True)
                r = run([binary("xcorr"), "run", "--algorithm", v["name"], "--form", form, "--validate", l, r_,
                         "--out", str(out), "--shifts", f"{dy0}:{dy1},{dx0}:{dx1}", *precision_args(v)])
                assert r.returncode == 0, (*what, r.stdout, r.stderr)
                got = np.load(out)
                assert got.shape == want.shape and rel_error(got, want) <= v["tolerance"], (*what, "xcorr run")
                cli_done = True
