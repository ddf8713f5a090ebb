"""scripts/device-check's options, checked before the build and the device's time are spent (a bad
-m, -r, -X or -B, or a stray argument, used to start a whole meson build first): one line, exit 2;
and scripts/test --help, answered before the set-up."""
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "device-check"


@pytest.mark.parametrize("args, needle", [
    (["-m", "-1"], "-m -1: a time above 0"),
    (["-m", "0"], "-m 0: a time above 0"),
    (["-m", "fast"], "-m fast: a time above 0"),
    (["-r", "0"], "-r 0: a number of repetitions, 1 or more"),
    (["-X", "3/2"], "-X 3/2: K/N with 1 <= K <= N"),
    (["-X", "half"], "-X half: K/N"),
    (["-Z", "3/2"], "-Z 3/2: K/N with 1 <= K <= N"),
    (["-s", "-Z", "1"], "-Z 1: K/N"),
    (["-B", "/nonexistent/cases.txt"], "-B /nonexistent/cases.txt: not a file of cases"),
    (["-B", "tests"], "-B tests: not a file of cases"),
    (["-L", "/nonexistent/ledger.txt"], "-L /nonexistent/ledger.txt: no such file"),
    (["-O", "quickest"], "-O quickest: longest or shortest"),
    (["stray"], "unexpected argument 'stray'"),
    (["-X", "1/2", "extra"], "unexpected argument 'extra'"),
])
def test_bad_options_are_refused_before_the_build(tmp_path, args, needle):
    r = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out")})
    assert r.returncode == 2 and r.stdout == "" and r.stderr.startswith(f"device-check: {needle}"), r.stderr
    assert r.stderr.count("\n") == 1 and not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.parametrize("args, status", [(["--help"], 0), (["-q"], 2)])
def test_help_and_an_unknown_option_print_the_whole_usage(args, status):
    """--help (exit 0) and a bad option (exit 2) print the whole header: both once printed a fixed
    line range, which cut the last options' lines off as options were added."""
    r = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == status and "-X  only part K of N" in r.stdout and "-L  the ledger of an earlier run" in r.stdout
    assert "OUT/sanitize-progress.txt gets a line as each process ends" in r.stdout
    assert r.stdout.rstrip().endswith("Logs and JSON go to $OUT (the device tool's output folder) or ./out-device.")


def test_the_test_commands_help_needs_no_set_up():
    """scripts/test --help answers at once (it set up Python and built the project first)."""
    r = subprocess.run([str(ROOT / "scripts" / "test"), "--help"], capture_output=True, text=True, cwd=ROOT,
                       timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 0 and "--gpu-only" in r.stdout and "--shard K/N" in r.stdout and r.stderr == ""


def test_gpu_only_without_a_usable_gpu_fails_rather_than_skips(gpu_info):
    """Under --gpu-only (device-check -x) a GPU that xcorr cannot use (a CUDA error, a build for
    another GPU) made every GPU test skip and pytest exit 0: a device run that tested nothing read
    as passed. Now the gpu fixture fails there, with the reason. Without --gpu-only it still skips."""
    import sys
    if gpu_info[0] is not None:
        pytest.skip("this machine has a usable GPU: the no-GPU path is what is tested")
    test = "tests/test_validate.py"
    asked = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                            "--gpu-only", "--shard", "1/40", test], capture_output=True, text=True, cwd=ROOT,
                           timeout=300)
    assert asked.returncode == 1 and "--gpu-only, but no usable GPU: " in asked.stdout, asked.stdout[-2000:]
    assert " skipped" not in asked.stdout.splitlines()[-1]
    plain = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                            "--shard", "1/40", test], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert plain.returncode == 0 and "failed" not in plain.stdout.splitlines()[-1], plain.stdout[-2000:]


def test_a_test_skipped_for_want_of_torch_must_be_one_the_gpu_machine_runs(tmp_path):
    """Four CPU tests that need PyTorch skipped in CI (no torch) and were deselected by --gpu-only on
    the GPU machine (no gpu fixture or marker): they ran nowhere. conftest now fails such a skip
    unless the test carries @pytest.mark.peers (or needs a GPU), which --gpu-only selects."""
    import shutil
    import sys
    import uuid
    scratch = ROOT / "tests" / f"_scratch_{uuid.uuid4().hex}"  # under tests/, for conftest's hooks
    scratch.mkdir()
    try:
        (scratch / "test_torchy.py").write_text(
            "import pytest\n"
            "def test_bare():\n    pytest.skip('torch is not installed here')\n"
            "@pytest.mark.peers\n"
            "def test_marked():\n    pytest.skip('PyTorch is not installed')\n"
            "def test_other_reason():\n    pytest.skip('Slurm is not installed')\n")
        def pytest_run(*extra):
            return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist",
                                   *extra, str(scratch)], capture_output=True, text=True, cwd=ROOT, timeout=120)
        r = pytest_run()
        assert r.returncode == 1, r.stdout[-2000:]
        assert "test_bare skips for want of the GPU machine" in r.stdout and "@pytest.mark.peers" in r.stdout
        assert "SKIPPED" in r.stdout and "1 failed, 2 skipped" in r.stdout.splitlines()[-1], r.stdout[-2000:]
        selected = pytest_run("--gpu-only", "--collect-only")
        assert "test_marked" in selected.stdout and "test_bare" not in selected.stdout, selected.stdout[-2000:]
    finally:
        shutil.rmtree(scratch)
