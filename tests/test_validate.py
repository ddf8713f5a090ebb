"""xcorr_validate's verdict is a bound, not a NaN check: --tolerance just below the error it
measured fails, just above passes (GPU); its inputs rotate over three distributions (GPU); bad
options are refused without a GPU (CPU)."""
import re

import pytest

from conftest import binary, require_variant, run

LINE = re.compile(r"^(PASS|FAIL)  overlap-wise  (?P<case>.+?)  inputs=(?P<inputs>\S+)  err=(?P<err>\S+)")
# A shape with errors well above zero in every form, quick to run: --quick is the small tier.
ARGS = ["--variant", "overlap-wise", "--quick", "--seed", "2024"]
# The maps alone: a reduction's bound is the tolerance times its peak's value, and a reduction case
# sums more terms than the maps whose worst error sets --tolerance here (the 159 x 159 peak cases:
# relative 1.8e-7 against the maps' 1.3e-7), so it may fail just above the maps' worst by design.
MAPS = ["--reductions", "none"]


def results(stdout):
    """(verdict, case, inputs, err) of every overlap-wise line."""
    out = []
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            out.append((m.group(1), m.group("case"), m.group("inputs"), float(m.group("err"))))
    return out


def test_tolerance_just_below_the_error_fails_and_just_above_passes(gpu, overlap_wise):
    r = run([binary("xcorr_validate"), *ARGS, *MAPS, "--form", "n-to-m"])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    lines = results(r.stdout)
    assert lines and all(v == "PASS" for v, *_ in lines), r.stdout[-2000:]
    worst = max(err for *_, err in lines)
    assert worst > 0, "every error is 0: the test needs a case with rounding error"
    # err is printed with 3 digits (%.2e): 3% either side is clear of that rounding.
    below = run([binary("xcorr_validate"), *ARGS, *MAPS, "--form", "n-to-m", "--tolerance", f"{worst * 0.97:.6e}"])
    assert below.returncode == 1, below.stdout[-2000:]
    failed = [l for l in results(below.stdout) if l[0] == "FAIL"]
    assert failed and all(err >= worst * 0.97 * 0.99 for *_, err in failed), below.stdout[-2000:]  # printed rounded
    # a failing line names where its largest error is: an output, a shift of its window, the two values
    for line in (l for l in below.stdout.splitlines() if l.startswith("FAIL  overlap-wise")):
        m = re.search(r"  worst: output (\d+), shift \((-?\d+), (-?\d+)\), (\S+) against (\S+)$", line)
        assert m and float(m[4]) != float(m[5]), line
    assert re.search(r"^\d+ passed, [1-9]\d* failed", below.stdout.splitlines()[-1])
    above = run([binary("xcorr_validate"), *ARGS, *MAPS, "--form", "n-to-m", "--tolerance", f"{worst * 1.03:.6e}"])
    assert above.returncode == 0, above.stdout[-2000:]
    assert all(v == "PASS" for v, *_ in results(above.stdout)) and re.search(r" 0 failed", above.stdout.splitlines()[-1])


def test_a_form_filter_keeps_each_cases_inputs(gpu, overlap_wise):
    """--form runs the cases of that form on the inputs the whole run gives them (the seeds advance
    over the forms left out), so that a failure of the whole run is reproduced by its form alone:
    each n-to-m case's error is the same, digit for digit."""
    def errors(*extra):
        r = run([binary("xcorr_validate"), *ARGS, *MAPS, "--windows", "none", *extra])
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr
        return {case: err for _, case, _, err in results(r.stdout) if case.startswith("n-to-m ")}
    alone, whole = errors("--form", "n-to-m"), errors()
    assert alone and alone == whole and len(set(alone.values())) > 1, (alone, whole)


def test_inputs_rotate_over_three_distributions_in_every_form(gpu, overlap_wise):
    r = run([binary("xcorr_validate"), *ARGS])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    by_form = {}
    for _, case, inputs, _ in results(r.stdout):
        by_form.setdefault(case.split()[0], set()).add(inputs)
    assert set(by_form) == {"one-to-one", "one-to-many", "n-to-mn", "n-to-m"}, by_form
    for form, seen in by_form.items():
        assert seen == {"[0,1)", "[-1,1)", "4+[-1,1)"}, (form, seen)


@pytest.mark.parametrize("value", ["0", "-1e-5", "abc", "1e-5x", ""])
def test_bad_tolerance_is_refused(value):
    r = run([binary("xcorr_validate"), "--tolerance", value])
    assert r.returncode == 2 and "--tolerance needs a positive number" in r.stderr, (r.returncode, r.stderr)


def test_help_documents_tolerance():
    r = run([binary("xcorr_validate"), "--help"])
    assert r.returncode == 0 and "--tolerance X" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["--seed", "abc"], "--seed: not an integer"),
    (["--seed", "1e3"], "--seed: not an integer"),
    (["--shape", "3x4"], "--shape '3x4'"),
    (["--shape", "3x4,0x2"], "--shape '3x4,0x2'"),
    (["--params", "some"], "--params"),
    (["--shape", "4294967333x4294967333,1x1"], "not an integer"),  # sscanf's %d read 37x37
    (["--shape", " 3x+4,5x 6"], "--shape ' 3x+4,5x 6'"),
    (["--shape", "40000x40000,1x1"], "matrix too large"),  # was a FAIL after the GPU set-up, exit 1
    (["--variant", "multi-matrix-both", "--form", "one-to-one"], "nothing to validate"),  # was 0 passed, exit 0
    (["--variant", "multi-matrix-both", "--windows", "only", "--form", "n-to-m"], "--windows only"),
    (["--seed", "1", "--seed", "2"], "--seed is given twice"),  # the last silently won
    (["--params", "all", "--params", "covering"], "--params is given twice"),
    (["--windows", "only", "--windows", "none"], "--windows is given twice"),
    (["--normalize", "zncc", "--normalize", "all"], "--normalize is given twice"),
    (["--tolerance", "1e-3", "--tolerance", "1e-2"], "--tolerance is given twice"),
    (["--shard", "3/2"], "--shard '3/2': expected K/N with 1 <= K <= N"),
    (["--shard", "0/2"], "--shard: not an integer from 1"),
    (["--shard", "2"], "--shard '2': expected K/N"),
    (["--shard", "1/x"], "--shard: not an integer"),
    (["--shard", "1/2", "--shard", "2/2"], "--shard is given twice"),
])
def test_bad_arguments_are_usage_errors(args, needle):
    """--seed abc threw std::invalid_argument past the usage handler (terminate, a crash)."""
    r = run([binary("xcorr_validate"), *args])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, (r.returncode, r.stderr)


def test_gpu_reference_computes_windows_as_the_cpu_reference_does(gpu, overlap_wise):
    """xcorr_validate checks reference_gpu and reference_gpu_at on four windows of every quick case
    against the CPU reference (which test_windows.py checks against scipy), and Problem::fmas
    against a count of the overlaps: every such line is there and passes."""
    r = run([binary("xcorr_validate"), "--variant", "overlap-wise", "--quick", "--form", "n-to-m", "--seed", "7"])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    lines = [l for l in r.stdout.splitlines() if l.split()[1:2] == ["reference-gpu"] and "window=" in l]
    assert {re.search(r"window=(\S+)", l).group(1) for l in lines} == {"valid", "same", "partly-beyond", "wholly-beyond"}
    assert all(l.startswith("PASS") for l in lines), "\n".join(l for l in lines if not l.startswith("PASS"))


def test_gpu_reference_matrix_variances_are_the_cpu_loops(gpu, overlap_wise):
    """zncc's GPU reference computes each matrix's variance with a block per matrix (the CPU's
    sequential loop on one thread took seconds for a 4096 x 4096 image); xcorr_validate checks it
    against the loop on noise with large offsets, constant and NaN-holding matrices and a 2048 x
    2048 image, under --normalize zncc with the built-in shapes, and not without zncc."""
    args = [binary("xcorr_validate"), "--variant", "overlap-wise", "--quick", "--form", "one-to-one",
            "--windows", "none", "--reductions", "none"]
    r = run([*args, "--normalize", "zncc"], timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    lines = [l for l in r.stdout.splitlines() if l.split()[1:2] == ["matrix-variance-gpu"]]
    assert len(lines) == 4 and all(l.startswith("PASS") for l in lines), lines
    assert any("1 x 2048x2048" in l for l in lines), lines
    plain = run(args, timeout=600)
    assert plain.returncode == 0 and "matrix-variance-gpu" not in plain.stdout, plain.stdout[-2000:]


def windowed_variants():
    """Variants that declare windows beyond full, from the build's registry."""
    import json
    r = run([binary("xcorr"), "list", "--json"])
    return [v for v in json.loads(r.stdout) if set(v["windows"]) - {"full"}]


# The windows xcorr_validate runs a windowed variant on (its header), by the kind they are.
WINDOW_KINDS = {"valid": "valid", "same": "same", "partly-beyond": "shifts", "wholly-beyond": "shifts"}


def window_kind(name):
    return "max-shift" if name.startswith("max-shift-") else WINDOW_KINDS[name]


@pytest.mark.parametrize("v", windowed_variants(), ids=lambda v: v["name"])
def test_variant_windows_are_checked(gpu, v):
    """--windows only: the variant itself on windows of every quick case, every form it supports,
    no line FAIL; every window kind it declares is there (in the shapes of --quick, each kind
    names a rectangle of its own somewhere), the rectangles beyond the full range only if it
    declares shifts; --windows none runs the variant on no window, also (the default) on both."""
    name = v["name"]
    line = re.compile(rf"^(PASS|FAIL|SKIP)  {re.escape(name)}  (?P<form>\S+) .*?  window=(?P<window>\S+)  ")
    r = run([binary("xcorr_validate"), "--variant", name, "--quick", "--windows", "only", "--reductions", "none"],
                timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    lines = [(m.group(1), m.group("form"), m.group("window")) for m in map(line.match, r.stdout.splitlines()) if m]
    assert lines and all(verdict != "FAIL" for verdict, *_ in lines), r.stdout[-3000:]
    assert {form for verdict, form, _ in lines if verdict == "PASS"} == set(v["forms"]), lines
    kinds = {window_kind(w) for verdict, _, w in lines if verdict == "PASS"}
    declared = set(v["windows"]) - {"full"}
    # A window of another kind may be run where its rectangle is one the variant declares (same is
    # a max-shift for equal odd sizes), but the rectangles beyond the full range are shifts only.
    assert declared <= kinds, (declared, kinds)
    assert ("shifts" in kinds) == ("shifts" in declared), (declared, kinds)
    # The variant's full-output lines are not there; the reference's window checks are.
    assert not [l for l in r.stdout.splitlines() if l.startswith(("PASS  " + name, "FAIL  " + name))
                and "window=" not in l]
    assert any(l.split()[1:2] == ["reference-gpu"] and "window=" in l for l in r.stdout.splitlines())
    none = run([binary("xcorr_validate"), "--variant", name, "--quick", "--form", v["forms"][0], "--windows", "none",
                "--reductions", "none"])  # a reduction's line names its window (full too)
    assert none.returncode == 0 and not any(map(line.match, none.stdout.splitlines())), none.stdout[-2000:]
    also = run([binary("xcorr_validate"), "--variant", name, "--quick", "--form", v["forms"][0]], timeout=1800)
    assert also.returncode == 0 and any(map(line.match, also.stdout.splitlines())), also.stdout[-2000:]
    assert re.match(r"\d+ passed, 0 failed", also.stdout.splitlines()[-1])


def test_shape_whose_full_output_is_refused_passes_on_its_windows(gpu, registry):
    """--shape 130x600,100x520: fft-fused refuses the 229 x 1119 full output at run time (transforms
    of at most 1024 a side) but computes its windows. That is a SKIP naming the window passes, not
    "no case passed"; with --windows none nothing of it was validated, and that stays a failure."""
    require_variant(registry, "fft-fused")
    args = [binary("xcorr_validate"), "--variant", "fft-fused", "--shape", "130x600,100x520", "--form", "one-to-one",
            "--params", "covering"]
    r = run([*args, "--windows", "also"], timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert re.search(r"^SKIP  fft-fused  one-to-one  every full output of the --shape list refused .* [1-9]\d* window "
                     r"cases passed$", r.stdout, re.M), r.stdout[-3000:]
    none = run([*args, "--windows", "none"], timeout=600)
    assert none.returncode == 1 and "FAIL  fft-fused  one-to-one  no case passed" in none.stdout, none.stdout[-3000:]
    # The guard holds each normalization apart (its cases passing plain once stood for all three)
    modes = run([*args, "--windows", "none", "--normalize", "all"], timeout=600)
    assert modes.returncode == 1, modes.stdout[-3000:]
    for what in ("one-to-one", "one-to-one normalize zncc", "one-to-one normalize zero-lag"):
        assert f"FAIL  fft-fused  {what}  no case passed" in modes.stdout, modes.stdout[-3000:]


def test_a_large_shape_is_validated_in_the_forms_asked_for(gpu, overlap_wise):
    """A --shape of 512 or more was dropped in every form but one-to-one (a rule for the default
    tiers' reference cost), and the variant then reported a SKIP whose reason was not the reason."""
    r = run([binary("xcorr_validate"), "--variant", "overlap-wise", "--shape", "600x600,3x3", "--form", "n-to-m",
             "--params", "covering", "--windows", "none"], timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert re.search(r"^PASS  overlap-wise  n-to-m ", r.stdout, re.M) and "SKIP  overlap-wise" not in r.stdout


@pytest.mark.parametrize("value", ["", "some", "ONLY"])
def test_bad_windows_option_is_refused(value):
    r = run([binary("xcorr_validate"), "--windows", value])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)
    assert "--windows: expected only, also or none" in r.stderr


def test_help_documents_windows():
    r = run([binary("xcorr_validate"), "--help"])
    assert r.returncode == 0
    for text in ["--windows only|also|none", "valid", "same", "max-shift", "partly-beyond", "wholly-beyond"]:
        assert text in r.stdout, text


def test_shards_run_every_check_once(gpu, registry):
    """--shard K/N (scripts/sanitize splits racecheck's long processes so): the N shards' case lines
    are the whole run's, each once, maps, windows, reference checks and reductions alike; a shard
    leaves out the "no case passed" guards, which need the whole run, and says so."""
    require_variant(registry, "block-per-pair")
    args = [binary("xcorr_validate"), "--variant", "block-per-pair", "--form", "n-to-m", "--params", "covering",
            "--shape", "5x7,3x2", "--shape", "1x17,1x9"]
    whole = run(args, timeout=600)
    assert whole.returncode == 0, whole.stdout[-3000:] + whole.stderr

    def checks(stdout):
        return [line for line in stdout.splitlines() if re.match(r"(PASS|FAIL|SKIP)  ", line)]
    everything = checks(whole.stdout)
    assert any("reduce=" in line for line in everything) and any("window=" in line for line in everything)
    assert any("reference-gpu" in line for line in everything)
    parts = [run([*args, "--shard", f"{k}/3"], timeout=600) for k in (1, 2, 3)]
    for r in parts:
        assert r.returncode == 0 and ", shard " in r.stdout.splitlines()[0], r.stdout[-3000:] + r.stderr
    together = [line for r in parts for line in checks(r.stdout)]
    assert sorted(together) == sorted(everything)
    # dealt, not lumped; near a third each, not exactly: a case's reference check is one check that
    # prints a line per window (on an H100 at 90e5e44 the shares held 53, 49 and 52 of 154 lines)
    assert all(len(checks(r.stdout)) >= len(everything) // 6 for r in parts)
