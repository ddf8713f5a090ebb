"""The benchmark binary: registration from the registry (CPU), bad cases and options (CPU), a smoke
run whose JSON has what the experiment scripts parse (GPU), and the check of every case before it
is timed (GPU): its counters on cases the validator does not cover, and a tolerance override
that fails a case."""
import json
import math
import re

import pytest

from conftest import binary, run

NAME = re.compile(r"^(?P<variant>[^/]+)/(?P<form>[^/]+)/hL:\d+/wL:\d+/hR:\d+/wR:\d+/nL:\d+/nR:\d+(/[\w+-]+:[\w.+,:-]+)*$")


def test_list_registers_every_variant_and_form(registry):
    r = run([binary("xcorr_bench"), "--benchmark_list_tests"])
    assert r.returncode == 0, r.stderr
    names = r.stdout.split()
    for v in registry:
        for form in v["forms"]:
            assert any(n.startswith(f"{v['name']}/{form}/") for n in names), (v["name"], form)
    for n in names:
        base = n.split("/min_time:")[0].removesuffix("/manual_time")
        assert NAME.match(base), n


@pytest.mark.parametrize("case,needle", [
    ("variant=nope form=one-to-one size=8", "unknown algorithm"),
    ("variant=overlap-wise form=sideways size=8", "unknown form"),
    ("variant=overlap-wise form=one-to-one size=8 warps=5", "not available"),
    ("variant=overlap-wise form=one-to-one size=0", "empty"),
    ("variant=overlap-wise form=n-to-mn size=8 nL=3 nR=4", "multiple"),
    ("variant=overlap-wise form=one-to-one size=eight", "not an integer"),
    ("variant=overlap-wise form=one-to-one size=8x", "not an integer"),
    ("variant=overlap-wise form=one-to-one size=99999999999", "not an integer"),
    ("variant=overlap-wise form=one-to-one size=8 batch=0", "batch: not an integer"),  # was the heuristic batch
    ("variant=overlap-wise form=one-to-one size=8 size=9", "size= is given twice"),  # was last-wins
    ("variant=nope variant=overlap-wise form=one-to-one size=8", "variant= is given twice"),
    ("variant=overlap-wise form=n-to-m hL=1 wL=1 hR=1 wR=1 nL=4194304 nR=4194304 shifts=0:1023,0:1023",
     "output too large"),  # 2^44 outputs of 2^20 elements: the int64 count wrapped to 0
])
def test_bad_case(case, needle, overlap_wise):
    r = run([binary("xcorr_bench"), "--case", case, "--benchmark_list_tests"])
    assert r.returncode == 2 and needle in r.stderr, r.stderr


def test_help_lists_its_own_options_then_google_benchmarks():
    r = run([binary("xcorr_bench"), "--help"])
    assert r.returncode == 0, r.stderr
    ours = [r.stdout.find(o) for o in ["--case", "--cases", "--min-time", "--batch", "--cold", "--launch-floor",
                                       "--seed", "--check-tolerance"]]
    assert -1 not in ours, r.stdout
    assert max(ours) < r.stdout.find("--benchmark_filter"), r.stdout


def test_smoke_json(gpu, tmp_path, overlap_wise):
    out = tmp_path / "b.json"
    r = run([binary("xcorr_bench"), "--case", "variant=overlap-wise form=one-to-many size=17 nL=1 nR=3",
             "--case", "variant=overlap-wise form=n-to-m hL=9 wL=20 hR=5 wR=7 nL=2 nR=3 warps=8",
             "--min-time", "0.002", "--benchmark_repetitions=2", f"--benchmark_out={out}",
             "--benchmark_out_format=json"])
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    ctx = data["context"]
    assert ctx["xcorr_gpu_name"] and ctx["xcorr_git_revision"]
    reps = [b for b in data["benchmarks"] if b["run_type"] == "iteration"]
    assert len(reps) == 4 and not any(b.get("error_occurred") for b in reps)
    for b in reps:
        assert NAME.match(b["run_name"].split("/min_time:")[0].removesuffix("/manual_time"))
        assert b["time_unit"] == "us" and b["real_time"] > 0
        assert b["batch"] >= 1 and b["FLOPS"] > 0
        assert 0 < b["enqueue_time"] < 0.1  # the host's seconds per call issuing the timed calls
        assert b["label"].startswith("family=baseline;timed=kernel")
        assert 0 < b["case_seconds"] < 60  # the case's wall seconds so far (the cost model's unit)
    for a, b in zip(reps[0::2], reps[1::2]):  # a case's repetitions, in order: its time only grows
        assert a["run_name"] == b["run_name"] and a["case_seconds"] < b["case_seconds"]
    first = reps[0]
    assert (first["hL"], first["nR"], first["fmas"]) == (17, 3, 3 * 17 ** 4)
    # FLOPS is 2 * fmas / time per call.
    assert first["FLOPS"] == pytest.approx(2 * first["fmas"] / (first["real_time"] * 1e-6), rel=0.05)


def test_batch_shrinks_for_a_call_far_below_peak_speed(gpu, tmp_path, overlap_wise):
    """The FMA heuristic gives both cases 256 calls per iteration. The first (overlap-wise with
    nine shifts of 256 x 256: a few threads each summing 65536 products, ~1.5 ms a call on an
    H100) would then run ~0.4 s per repetition where the protocol says --min-time (0.01 s): its
    batch shrinks to about --min-time of calls. The second (17 x 17, microseconds a call) and a
    batch given in the case keep theirs."""
    slow = "variant=overlap-wise form=one-to-one size=256 shifts=-1:1,-1:1"
    out = tmp_path / "b.json"
    r = run([binary("xcorr_bench"), "--case", slow, "--case", "variant=overlap-wise form=one-to-one size=17",
             "--case", slow + " batch=12", "--min-time", "0.01", "--benchmark_repetitions=2",
             f"--benchmark_out={out}", "--benchmark_out_format=json"])
    assert r.returncode == 0, r.stderr
    reps = [b for b in json.loads(out.read_text())["benchmarks"] if b["run_type"] == "iteration"]
    assert len(reps) == 6 and not any(b.get("error_occurred") for b in reps)
    capped, fast, given = reps[0:2], reps[2:4], reps[4:6]
    for b in capped:
        assert b["fmas"] == (256 + 2 * 255) ** 2 and 1 <= b["batch"] < 256
        gpu_seconds = b["iterations"] * b["batch"] * b["real_time"] * 1e-6  # one repetition's timed calls
        assert 0.005 < gpu_seconds < 0.1, (b["iterations"], b["batch"], b["real_time"])
    assert [b["batch"] for b in fast] == [256, 256]
    assert [b["batch"] for b in given] == [12, 12]


# Cases outside xcorr_validate's coverage (at most 15 rights, 3 lefts; 512 only one-to-one): the
# benchmark's own check is all that looks at them. The last is large enough to be sampled.
CHECKED_CASES = [
    ("one-to-many", "size=64 nL=1 nR=33"),
    ("n-to-m", "hL=37 wL=45 hR=29 wR=23 nL=5 nR=7"),
    ("n-to-mn", "size=96 nL=4 nR=48"),
    ("one-to-many", "size=256 nL=1 nR=33"),  # 1.4e11 FMAs: 65536 sampled outputs
]
# The same for the kernels of signals only (Variant::signals_only): 1 x n, the last one sampled.
SIGNAL_CHECKED_CASES = [
    ("one-to-many", "hL=1 wL=4099 hR=1 wR=256 nL=1 nR=33"),
    ("n-to-m", "hL=1 wL=1001 hR=1 wR=777 nL=5 nR=7"),
    ("n-to-mn", "hL=1 wL=3000 hR=1 wR=300 nL=4 nR=48"),
    ("one-to-many", "hL=1 wL=1000000 hR=1 wR=600 nL=1 nR=33"),  # 2e10 FMAs: sampled
]
FULL_CHECK_FMAS = 1e10  # harness/check.hpp, kFullCheckFmas


def bench_json(args, out):
    r = run([binary("xcorr_bench"), *args, "--min-time", "0.002", "--benchmark_repetitions=2",
             f"--benchmark_out={out}", "--benchmark_out_format=json"], timeout=1200)
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(out.read_text())
    return data, [b for b in data["benchmarks"] if b["run_type"] == "iteration"]


def out_elems(b):
    count = {"one-to-one": 1, "one-to-many": b["nR"], "n-to-mn": b["nR"], "n-to-m": b["nL"] * b["nR"]}
    form = b["run_name"].split("/")[1]
    if "dy0" in b:  # a windowed entry: its rectangle
        return count[form] * (b["dy1"] - b["dy0"] + 1) * (b["dx1"] - b["dx0"] + 1)
    return count[form] * (b["hL"] + b["hR"] - 1) * (b["wL"] + b["wR"] - 1)


def bounded(v):
    """The window key that keeps a case within the variant's declared shifts: the widest square
    max_shift (±16 for small-window's 1089), or nothing for a variant that computes the full output."""
    if not v.get("max_shifts"):
        return ""
    s = (math.isqrt(v["max_shifts"]) - 1) // 2
    return f" max_shift={s}"


def variant_names():
    r = run([binary("xcorr"), "list", "--json"])
    return [v["name"] for v in json.loads(r.stdout)]


@pytest.mark.parametrize("name", variant_names())
def test_every_timed_case_was_checked(gpu, registry, tmp_path, name):
    """Every timed entry carries check_err (within the variant's tolerance) and check_samples
    (every output up to 1e10 FMAs, a sample beyond); a failed check would be an error entry with
    "validation failed". A case the variant's factory refuses (a limit of its own, its reason as
    the message) is allowed, but not every case, and a CUDA or cuFFT error is not."""
    v = next(v for v in registry if v["name"] == name)
    cases = [f"variant={name} form={form} {dims}{bounded(v)}"
             for form, dims in (SIGNAL_CHECKED_CASES if v.get("signals_only") else CHECKED_CASES) if form in v["forms"]]
    assert cases, v["forms"]
    data, reps = bench_json([a for c in cases for a in ("--case", c)], tmp_path / "b.json")
    assert "-1,1" in data["context"]["xcorr_check"], data["context"]["xcorr_check"]
    checked = set()
    for b in reps:
        if b.get("error_occurred"):
            msg = b["error_message"]
            assert not msg.startswith(("validation failed", "cudaError", "cuFFT error")), msg
            continue
        assert b["real_time"] > 0 and b["check_samples"] >= 1, b
        assert 0 <= b["check_err"] <= v["tolerance"], b
        if b["fmas"] <= FULL_CHECK_FMAS:
            assert b["check_samples"] == out_elems(b), b  # the full reference
        else:
            assert 10000 < b["check_samples"] <= 65536 < out_elems(b), b
        checked.add(b["run_name"].split("/min_time:")[0])
    assert checked, "every case was refused: nothing was checked"
    # Reps of one case share the one check (made before the first repetition).
    for case in checked:
        errs = {b["check_err"] for b in reps if b["run_name"].startswith(case + "/") and not b.get("error_occurred")}
        assert len(errs) == 1, (case, errs)


def test_check_tolerance_below_the_error_fails_the_case_untimed(gpu, tmp_path, overlap_wise):
    """--check-tolerance just below a case's measured check_err makes every repetition an error
    entry "validation failed: err=... > tol=..." with no time; just above, it is timed. A check
    that looked only for NaN would time it both ways. Both the full and the sampled path."""
    for spec, what in [("variant=overlap-wise form=n-to-m hL=37 wL=45 hR=29 wR=23 nL=5 nR=7", "all"),
                       ("variant=overlap-wise form=one-to-many size=256 nL=1 nR=33", "sampled")]:
        _, reps = bench_json(["--case", spec], tmp_path / "first.json")
        assert len(reps) == 2 and not any(b.get("error_occurred") for b in reps), reps
        err = reps[0]["check_err"]
        assert err > 0, "an exact result: the test needs rounding error"
        _, below = bench_json(["--case", spec, "--check-tolerance", f"{err * 0.99:.9e}"], tmp_path / "below.json")
        assert below, "no entry for the failed case"
        for b in below:
            assert b.get("error_occurred"), b
            assert b["error_message"].startswith("validation failed: err="), b["error_message"]
            assert f"({what} " in b["error_message"] or f"{what} outputs)" in b["error_message"], b["error_message"]
            assert "check_err" not in b and not b.get("real_time"), b  # nothing timed
        _, above = bench_json(["--case", spec, "--check-tolerance", f"{err * 1.01:.9e}"], tmp_path / "above.json")
        assert len(above) == 2 and not any(b.get("error_occurred") for b in above), above
        assert all(b["real_time"] > 0 and b["check_err"] == pytest.approx(err, rel=1e-6) for b in above)


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1e-5x"])
def test_bad_check_tolerance_is_refused(value):
    r = run([binary("xcorr_bench"), "--check-tolerance", value, "--benchmark_list_tests"])
    assert r.returncode == 2 and "--check-tolerance needs a positive number" in r.stderr, r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--min-time", "abc"], "--min-time needs a positive number"),
    (["--min-time", "0"], "--min-time needs a positive number"),
    (["--min-time", "inf"], "--min-time needs a positive number"),
    (["--batch", "1x"], "--batch: not an integer"),
    (["--batch", "0"], "--batch: not an integer"),
    (["--seed", "-1"], "--seed: not an integer"),
    (["--seed", "99999999999999999999"], "--seed: not an integer"),
    (["--min-time", "5e-324", "--batch", "2"], "--min-time must be from"),  # Google Benchmark aborted (134)
    (["--min-time", "0.1", "--min-time=0.2"], "--min-time is given twice"),  # the last silently won
    (["--seed", "1", "--seed", "2"], "--seed is given twice"),
    (["--batch", "2", "--batch", "2"], "--batch is given twice"),
    (["--check-tolerance", "1e-3", "--check-tolerance", "1e-2"], "--check-tolerance is given twice"),
])
def test_bad_numbers_are_usage_errors(args, needle):
    """Before, std::stod/stoi/stoull read '1x' as 1, and threw for 'abc' past the usage handler
    (exit 1, "failed")."""
    r = run([binary("xcorr_bench"), *args, "--benchmark_list_tests"])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr


def test_what_would_measure_nothing_is_refused(tmp_path, overlap_wise):
    """An empty cases file or a folder ran the smoke set; a filter matching no case, or an invalid
    one, exited 0 having measured nothing; --benchmark_list_tests=false skipped the GPU check and
    'ran' every case as an error with exit 0. Each is exit 2 now."""
    bench = binary("xcorr_bench")
    case = ["--case", "variant=overlap-wise form=one-to-one size=8"]
    (tmp_path / "empty.txt").write_text("# only a comment\n\n")
    for cases in (tmp_path / "empty.txt", tmp_path):
        r = run([bench, "--cases", str(cases), "--benchmark_list_tests"])
        assert r.returncode == 2 and "holds no case" in r.stderr, (cases, r.returncode, r.stdout[-500:], r.stderr)
    for flt in ("nomatch", "["):
        r = run([bench, *case, "--benchmark_filter=" + flt, "--benchmark_list_tests"])
        assert r.returncode == 2 and "nothing measured" in r.stderr, (flt, r.returncode, r.stderr)
    r = run([bench, *case, "--benchmark_list_tests=false"])
    assert r.returncode == 2 and "--benchmark_list_tests alone" in r.stderr, (r.returncode, r.stderr)
    r = run([bench, *case, "--benchmark_list_tests"])
    assert r.returncode == 0 and r.stdout.startswith("overlap-wise/one-to-one/"), r.stderr


def test_list_tests_with_check_tolerance_needs_no_gpu(overlap_wise):
    r = run([binary("xcorr_bench"), "--check-tolerance", "1e-3", "--benchmark_list_tests",
             "--case", "variant=overlap-wise form=one-to-many size=256 nL=1 nR=33"])
    names = r.stdout.split()
    assert r.returncode == 0 and len(names) == 1, r.stdout + r.stderr
    assert names[0].startswith("overlap-wise/one-to-many/hL:256/wL:256/hR:256/wR:256/nL:1/nR:33/"), names


# Output windows (docs/CONVENTIONS.md "Output windows"; the case keys and the name of the lead's
# conventions): window=full|valid|same, max_shift=SY[,SX], shifts=DY0:DY1,DX0:DX1.
WINDOWED_NAME = re.compile(r"^(?P<head>[^/]+/[^/]+/hL:\d+/wL:\d+/hR:\d+/wR:\d+/nL:\d+/nR:\d+)"
                           r"/shifts:(?P<dy0>-?\d+):(?P<dy1>-?\d+),(?P<dx0>-?\d+):(?P<dx1>-?\d+)"
                           r"(?P<params>(/[\w+-]+:[\w.+-]+)*)$")
SHAPE = (9, 7, 5, 6)  # hL, wL, hR, wR: every named window is a different rectangle, none the full one
DIMS = "hL=9 wL=7 hR=5 wR=6"
SIGNAL_SHAPE = (1, 17, 1, 6)  # the same for a kernel built for signals (Variant::signals_only)


def dims_text(shape):
    return "hL=%d wL=%d hR=%d wR=%d" % shape


def registry_now():
    r = run([binary("xcorr"), "list", "--json"])
    return json.loads(r.stdout)


def windowed_variants():
    """Variants that declare windows beyond full (collected from the build's registry, so that
    kernels gaining windows are covered without touching this file)."""
    return [v["name"] for v in registry_now() if set(v["windows"]) - {"full"}]


def window_key_cases(shape):
    """(window kind, case key, rectangle) for every kind, on `shape`."""
    from xcorr_np import full_window, same_window, valid_window
    hL, wL, hR, wR = shape
    out = [("same", "window=same", same_window(*shape)),
           ("max-shift", "max_shift=2,3", (-2, 2, -3, 3)),
           ("shifts", f"shifts={-(hR + 1)}:{hL // 2},{wL // 3 - 1}:{wL + 1}", (-(hR + 1), hL // 2, wL // 3 - 1, wL + 1))]
    if valid_window(*shape):
        out.insert(0, ("valid", "window=valid", valid_window(*shape)))
    assert all(rect != full_window(*shape) for *_, rect in out)
    return out


def list_names(*cases):
    r = run([binary("xcorr_bench"), *[a for c in cases for a in ("--case", c)], "--benchmark_list_tests"])
    assert r.returncode == 0, r.stderr
    return [n.split("/min_time:")[0].removesuffix("/manual_time") for n in r.stdout.split()]


@pytest.mark.parametrize("window,needle", [
    ("window=same max_shift=2", "window= and max_shift= both choose the window"),
    ("shifts=0:1,0:1 window=valid", "shifts= and window= both choose the window"),
    ("max_shift=1 max_shift=2", "max_shift= and max_shift= both choose the window"),
    ("window=full shifts=0:0,0:0", "give one of window=, max_shift=, shifts="),
    ("shifts=1:2", "shifts= takes DY0:DY1,DX0:DX1"),
    ("shifts=1:2,3", "shifts= takes DY0:DY1,DX0:DX1"),
    ("shifts=", "shifts= takes DY0:DY1,DX0:DX1"),
    ("shifts=a:1,0:0", "shifts=DY0:DY1,DX0:DX1: not an integer"),
    ("shifts=1:2,3:4,5:6", "shifts=DY0:DY1,DX0:DX1: not an integer"),
    ("shifts=0:0,0:1073741824", "shifts=DY0:DY1,DX0:DX1: not an integer"),
    ("shifts=3:1,0:0", "empty window 3:1,0:0"),
    ("shifts=-1073741823:1073741823,0:9", "too large"),
    ("max_shift=-1", "max_shift=SY[,SX]: not an integer"),
    ("max_shift=1,", "max_shift=SY[,SX]: not an integer"),
    ("max_shift=x", "max_shift=SY[,SX]: not an integer"),
    ("window=Valid", "window= takes full, valid or same"),
    ("window=", "window= takes full, valid or same"),
])
def test_bad_window_case(window, needle, overlap_wise):
    """Refused with exit 2 and one line naming the case, also in a timing run (no
    --benchmark_list_tests): before the GPU is needed, so without one too (not exit 3)."""
    case = f"variant=overlap-wise form=one-to-one {DIMS} {window}"
    for extra in (["--benchmark_list_tests"], ["--min-time", "0.001"]):
        r = run([binary("xcorr_bench"), "--case", case, *extra])
        assert r.returncode == 2, (extra, r.returncode, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and f"case '{case}'" in lines[0] and needle in lines[0], r.stderr


@pytest.mark.parametrize("dims", ["hL=5 wL=6 hR=3 wR=7", "hL=3 wL=7 hR=5 wR=6"])
def test_valid_window_case_needs_one_matrix_inside_the_other(dims, overlap_wise):
    for extra in (["--benchmark_list_tests"], []):
        r = run([binary("xcorr_bench"), "--case", f"variant=overlap-wise form=one-to-one {dims} window=valid", *extra])
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert "no valid window" in r.stderr and "neither matrix" in r.stderr, r.stderr


def test_window_the_variant_does_not_declare_is_refused_before_the_gpu(registry):
    """Every variant x every window kind it does not declare (on a shape where each kind names a
    rectangle of its own): exit 2, one line, "does not compute", the declared kinds listed; in a
    timing run too, so before the GPU is needed."""
    tried = 0
    for v in registry:
        form = v["forms"][0]
        counts = {"one-to-one": "", "one-to-many": "nR=2", "n-to-mn": "nL=2 nR=4", "n-to-m": "nL=2 nR=3"}[form]
        for kind, key, _ in window_key_cases(SHAPE):
            if kind in v["windows"] or "shifts" in v["windows"]:
                continue
            case = f"variant={v['name']} form={form} {DIMS} {counts} {key}"
            for extra in (["--benchmark_list_tests"], ["--min-time", "0.001"]):
                r = run([binary("xcorr_bench"), "--case", case, *extra])
                assert r.returncode == 2, (case, extra, r.returncode, r.stderr)
                lines = r.stderr.strip().splitlines()
                assert len(lines) == 1 and "does not compute the" in lines[0], r.stderr
                assert "only: " + ", ".join(v["windows"]) in lines[0], lines[0]
            tried += 1
    if not tried:
        pytest.skip("every variant in this build computes every window")


def test_a_window_that_is_the_full_output_is_the_full_case(overlap_wise):
    """window=full, valid with a 1 x 1 right, shifts= and max_shift= naming exactly the full range:
    the full case, name unchanged (no /shifts:), for any variant (support is by rectangle)."""
    base = "variant=overlap-wise form=n-to-m nL=2 nR=3 warps=8"
    names = list_names(f"{base} {DIMS}", f"{base} {DIMS} window=full", f"{base} {DIMS} shifts=-4:8,-5:6",
                       f"{base} hL=9 wL=7 hR=1 wR=1", f"{base} hL=9 wL=7 hR=1 wR=1 window=valid",
                       f"{base} size=5 max_shift=4")
    assert names[0] == names[1] == names[2] == "overlap-wise/n-to-m/hL:9/wL:7/hR:5/wR:6/nL:2/nR:3/warps:8", names
    assert names[3] == names[4], names
    assert names[5] == "overlap-wise/n-to-m/hL:5/wL:5/hR:5/wR:5/nL:2/nR:3/warps:8", names


@pytest.mark.parametrize("name", windowed_variants())
def test_windowed_case_names(registry, name):
    """A windowed case's name inserts /shifts:DY0:DY1,DX0:DX1 (the resolved rectangle) right after
    /nR:.., before the parameters; every window kind the variant declares, every form."""
    v = next(v for v in registry if v["name"] == name)
    counts = {"one-to-one": "", "one-to-many": "nR=2", "n-to-mn": "nL=2 nR=4", "n-to-m": "nL=2 nR=3"}
    shape = SIGNAL_SHAPE if v.get("signals_only") else SHAPE
    dims = dims_text(shape)
    for form in v["forms"]:
        for kind, key, rect in window_key_cases(shape):
            if kind not in v["windows"] and "shifts" not in v["windows"]:
                continue
            plain, = list_names(f"variant={name} form={form} {dims} {counts[form]}")
            named, = list_names(f"variant={name} form={form} {dims} {counts[form]} {key}")
            m = WINDOWED_NAME.match(named)
            assert m, named
            assert tuple(int(m.group(k)) for k in ("dy0", "dy1", "dx0", "dx1")) == rect, (key, named)
            assert m.group("head") + m.group("params") == plain, (named, plain)


def test_help_documents_the_window_keys():
    r = run([binary("xcorr_bench"), "--help"])
    assert r.returncode == 0, r.stderr
    for key in ["window=full|valid|same", "max_shift=SY[,SX]", "shifts=DY0:DY1,DX0:DX1", "/shifts:DY0:DY1,DX0:DX1"]:
        assert key in r.stdout, key
    assert r.stdout.find("shifts=DY0") < r.stdout.find("--benchmark_filter")


@pytest.mark.parametrize("name", windowed_variants())
def test_windowed_case_json(gpu, registry, tmp_path, name):
    """One windowed case per declared kind, timed: the name of the conventions, counters dy0 dy1
    dx0 dx1 (the rectangle), fmas the window's (not the full output's), the check on every output
    of the window within the variant's tolerance; a full case in the same run has none of the
    window counters."""
    from xcorr_np import full_window, shape_refusal, window_fmas
    v = next(v for v in registry if v["name"] == name)
    form = "n-to-m" if "n-to-m" in v["forms"] else v["forms"][0]
    counts = {"one-to-one": (1, 1), "one-to-many": (1, 3), "n-to-mn": (2, 4), "n-to-m": (2, 3)}[form]
    shape = (1, 45, 1, 23) if v.get("signals_only") else (37, 45, 29, 23)
    dims = dims_text(shape) + " nL=%d nR=%d" % counts
    hL, wL, hR, wR = shape
    wanted = [(key, rect) for kind, key, rect in window_key_cases(shape)
              if (kind in v["windows"] or "shifts" in v["windows"]) and shape_refusal(v, shape, rect) is None]
    assert wanted, v["windows"]
    full = shape_refusal(v, shape, full_window(*shape)) is None  # small-window: at most 1089 shifts
    cases = [f"variant={name} form={form} {dims}"] * full + [f"variant={name} form={form} {dims} {key}" for key, _ in wanted]
    _, reps = bench_json([a for c in cases for a in ("--case", c)], tmp_path / "w.json")
    count = counts[1] * (counts[0] if form == "n-to-m" else 1)
    seen = set()
    for b in reps:
        base = b["run_name"].split("/min_time:")[0].removesuffix("/manual_time")
        assert not b.get("error_occurred"), (base, b.get("error_message"))
        m = WINDOWED_NAME.match(base)
        if not m:
            assert NAME.match(base) and not {"dy0", "dy1", "dx0", "dx1"} & set(b), b
            assert b["fmas"] == count * window_fmas(shape, (1 - hR, hL - 1, 1 - wR, wL - 1))
            continue
        rect = tuple(int(m.group(k)) for k in ("dy0", "dy1", "dx0", "dx1"))
        assert rect in [r for _, r in wanted], base
        assert tuple(b[k] for k in ("dy0", "dy1", "dx0", "dx1")) == rect, b
        assert (b["hL"], b["wL"], b["hR"], b["wR"], b["nL"], b["nR"]) == shape + counts, b
        assert b["fmas"] == count * window_fmas(shape, rect), b
        oh, ow = rect[1] - rect[0] + 1, rect[3] - rect[2] + 1
        assert b["check_samples"] == count * oh * ow, b  # every output of the window
        assert 0 <= b["check_err"] <= v["tolerance"] and b["real_time"] > 0, b
        seen.add(rect)
    assert seen == {r for _, r in wanted}, (seen, wanted)
