"""xcorr_validate's verdict is a bound, not a NaN check: --tolerance just below the error it
measured fails, just above passes (GPU); its inputs rotate over three distributions (GPU); bad
options are refused without a GPU (CPU)."""
import re

import pytest

from conftest import binary, run

LINE = re.compile(r"^(PASS|FAIL)  overlap-wise  (?P<case>.+?)  inputs=(?P<inputs>\S+)  err=(?P<err>\S+)")
# A shape with errors well above zero in every form, quick to run: --quick is the small tier.
ARGS = ["--variant", "overlap-wise", "--quick", "--seed", "2024"]


def results(stdout):
    """(verdict, case, inputs, err) of every overlap-wise line."""
    out = []
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            out.append((m.group(1), m.group("case"), m.group("inputs"), float(m.group("err"))))
    return out


def test_tolerance_just_below_the_error_fails_and_just_above_passes(gpu, overlap_wise):
    r = run([binary("xcorr_validate"), *ARGS, "--form", "n-to-m"])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr
    lines = results(r.stdout)
    assert lines and all(v == "PASS" for v, *_ in lines), r.stdout[-2000:]
    worst = max(err for *_, err in lines)
    assert worst > 0, "every error is 0: the test needs a case with rounding error"
    # err is printed with 3 digits (%.2e): 3% either side is clear of that rounding.
    below = run([binary("xcorr_validate"), *ARGS, "--form", "n-to-m", "--tolerance", f"{worst * 0.97:.6e}"])
    assert below.returncode == 1, below.stdout[-2000:]
    failed = [l for l in results(below.stdout) if l[0] == "FAIL"]
    assert failed and all(err >= worst * 0.97 * 0.99 for *_, err in failed), below.stdout[-2000:]  # printed rounded
    assert re.search(r"^\d+ passed, [1-9]\d* failed", below.stdout.splitlines()[-1])
    above = run([binary("xcorr_validate"), *ARGS, "--form", "n-to-m", "--tolerance", f"{worst * 1.03:.6e}"])
    assert above.returncode == 0, above.stdout[-2000:]
    assert all(v == "PASS" for v, *_ in results(above.stdout)) and re.search(r" 0 failed", above.stdout.splitlines()[-1])


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
