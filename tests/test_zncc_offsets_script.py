"""scripts/zncc-offsets (the zncc-offsets accuracy figure), as a user runs it, on the CPU: the figure is
redrawn from a results file byte for byte the same twice, bad arguments are refused with exit 2, and
without a GPU it says that it measures only on one and exits 0, writing nothing. Needs neither
OpenCV nor PyTorch nor a GPU."""
import json
import os
import sys

import pytest

from conftest import ROOT, run

SCRIPT = ROOT / "scripts" / "zncc-offsets"
sys.path.insert(0, str(ROOT))
from xcsuite import zncc_offsets as zo  # noqa: E402


def script(*args, env=None):
    # no GPU for the package even where the machine has one: the no-GPU path is what is tested
    return run([sys.executable, str(SCRIPT), *map(str, args)], cwd=ROOT, timeout=300,
               env={**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})})


def fixture_data() -> dict:
    """A small results file: two implementations, one losing its peak at the large offsets, one
    skipped."""
    def rec(err, right):
        return {"max_abs_error": err, "nonfinite": 0, "peak_value": 1.0 if right else 0.8,
                "peak_at": list(zo.TEMPLATE_AT) if right else [3, 4], "peak_right": right}
    errs = {"xcorr auto": [0.0, 1e-7, 1e-7, 2e-7, 2e-7, 3e-7], "opencv": [6e-8, 1e-4, 1e-2, 0.9, 1.1, 1.07]}
    return {
        "experiment": "zncc_offsets", "offsets": list(zo.OFFSETS), "gpu": {"name": "Test GPU"},
        "implementations": {
            name: {"what": name, "by_offset": {zo.offset_key(o): rec(e, name != "opencv" or o < 4e3)
                                               for o, e in zip(zo.OFFSETS, es)}}
            for name, es in errs.items()} | {"torch-fft": {"skipped": "PyTorch is not installed"}},
    }


def test_figure_is_redrawn_byte_identical(tmp_path):
    results = tmp_path / "results"
    f = zo.results_file(results, "test-gpu")
    f.parent.mkdir(parents=True)
    f.write_text(zo.dumps(fixture_data()))
    png = tmp_path / "plots" / "test-gpu" / "zncc_offsets.png"
    blobs = []
    for _ in range(2):
        r = script("--plot-only", "--results", results, "--plots", tmp_path / "plots")
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert str(png) in r.stdout
        blobs.append(png.read_bytes())
        png.unlink()
    assert blobs[0] == blobs[1] and blobs[0].startswith(b"\x89PNG")


def test_results_text_is_stable():
    data = fixture_data()
    text = zo.dumps(data)
    assert text == zo.dumps(json.loads(text)) and text.endswith("}\n")


def test_plot_only_without_results_files_draws_nothing(tmp_path):
    r = script("--plot-only", "--results", tmp_path, "--plots", tmp_path / "plots")
    assert r.returncode == 0 and "nothing to draw" in r.stdout, (r.stdout, r.stderr)
    assert not (tmp_path / "plots").exists()


@pytest.mark.parametrize("args", [["--bogus"], ["--cpu-only", "--plot-only"], ["--results"],
                                  ["--plot-only", "--results", "/nonexistent/results"]])
def test_bad_arguments_exit_2(args, tmp_path):
    r = script(*args, "--plots", tmp_path / "plots")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.startswith("usage: "), r.stderr
    assert not (tmp_path / "plots").exists()


def test_without_a_gpu_it_says_so_and_writes_nothing(tmp_path):
    r = script("--results", tmp_path / "results", "--plots", tmp_path / "plots")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "measures only on a GPU" in r.stdout
    assert not (tmp_path / "results").exists() and not (tmp_path / "plots").exists()


def test_compare_finds_the_peak_and_the_error():
    import numpy as np

    ref = np.zeros((226, 226))
    ref[zo.TEMPLATE_AT] = 1.0
    out = ref.astype(np.float32)
    out[0, 0] = 2e-4
    rec = zo.compare(out, ref)
    assert rec["peak_right"] and rec["peak_at"] == list(zo.TEMPLATE_AT) and rec["max_abs_error"] == 2e-4
    out[5, 5] = np.nan
    assert zo.compare(out, ref)["nonfinite"] == 1 and zo.compare(out, ref)["max_abs_error"] is None


def test_a_figure_that_cannot_be_written_is_one_line_and_exit_1(tmp_path):
    """A full disk or a quota (here a file-size limit) while the figure is written: one line naming
    the file and exit 1 (paths.exit_status, as the xcsuite commands end), not an OSError's
    traceback; no part of a figure is left behind."""
    import resource
    results = tmp_path / "results"
    f = zo.results_file(results, "test-gpu")
    f.parent.mkdir(parents=True)
    f.write_text(zo.dumps(fixture_data()))

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    r = run([sys.executable, str(SCRIPT), "--plot-only", "--results", str(results), "--plots", str(tmp_path / "plots")],
            cwd=ROOT, timeout=300, preexec_fn=small_files, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    png = tmp_path / "plots" / "test-gpu" / "zncc_offsets.png"
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr == f"zncc-offsets: could not write {png} (File too large); nothing written\n"
    assert not png.exists() and not list(png.parent.glob(".*tmp"))
