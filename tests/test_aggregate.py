"""Aggregation: IQR outlier removal, per-configuration statistics and the summary CSV."""
import json
import shutil

import numpy as np
import pytest
from suite_helpers import FIXTURES

from xcsuite.benchjson import load_bench_json
from xcsuite.stats import describe, iqr_mask
from xcsuite.summary import aggregate_dir, load_summary


def test_iqr_mask_removes_points_beyond_one_and_a_half_iqr():
    v = [10.0, 10.2, 9.8, 10.1, 9.9, 10.0, 10.05, 9.95, 10.0, 25.0]
    m = iqr_mask(v)
    assert m.tolist() == [True] * 9 + [False]
    q1, q3 = np.percentile([1, 2, 3, 4], [25, 75])  # 1.75, 3.25: fences -0.5 and 5.5
    assert iqr_mask([1, 2, 3, 4, 5.5]).all()  # on the fence: kept
    assert not iqr_mask([1, 2, 3, 4, 100])[-1] and iqr_mask([1, 2, 3, 4, 100])[:4].all()
    assert iqr_mask([-50, 10, 10, 10, 10]).tolist() == [False, True, True, True, True]
    assert iqr_mask([]).size == 0


def test_describe():
    d = describe([10.0, 10.2, 9.8, 10.1, 9.9, 10.0, 10.05, 9.95, 10.0, 25.0])
    assert d["n_reps"] == 10 and d["n_kept"] == 9 and d["n_outliers"] == 1
    assert d["mean"] == pytest.approx(10.0)
    assert d["std"] == pytest.approx(np.std([10.0, 10.2, 9.8, 10.1, 9.9, 10.0, 10.05, 9.95, 10.0], ddof=1))
    assert d["cv"] == pytest.approx(d["std"] / 10.0)
    one = describe([3.0])
    assert one["mean"] == 3.0 and one["std"] == 0.0


@pytest.fixture
def summary(tmp_path):
    gpu = tmp_path / "nvidia-h200"
    gpu.mkdir()
    shutil.copy(FIXTURES / "merged_fig17.json", gpu / "fig17.json")
    return aggregate_dir(gpu), gpu


def test_summary_rows(summary):
    df, gpu = summary
    assert (gpu / "summary.csv").exists()
    assert len(df) == 6
    by = {(r.variant, r.hL): r for r in df.itertuples()}
    a = by[("split-row", 64)]
    assert a.status == "ok" and a.n_reps == 10 and a.n_outliers == 1
    assert a.time_us == pytest.approx(10.0)
    assert a.params == "distribution=triangle,rows=1,warps=4"
    assert a.fmas == 64 ** 4
    assert a.time_per_fma_ps == pytest.approx(10e-6 / 64 ** 4 * 1e12)
    assert a.flops == pytest.approx(2 * 64 ** 4 / 10e-6)
    assert a.peak_pct == pytest.approx(100 * a.flops / 66908160000000)
    assert a.family == "warp-shuffle" and a.counts == "1-to-1" and a.size == 64
    b = by[("overlap-wise", 256)]
    assert b.time_us == pytest.approx(3100.0)  # time_unit ms
    c = by[("fft+plan", 512)]
    assert c.status == "failed" and "too little GPU memory" in c.message and np.isnan(c.time_us)
    d = by[("block-per-overlap", 16)]
    assert d.params == "threads=128" and d.counts == "1-to-32" and d.pairs == 32
    e = by[("fft", 64)]
    assert e.finish_time_us == pytest.approx(2.5)
    r = by[("split-row", 128)]
    assert r.status == "rejected" and "not available" in r.message
    # The shifts column is written even where no case has a window (empty: the full output), so
    # every reader of summary.csv meets one schema (make_auto_table and auto_report once failed on
    # the H100's fig17-and-fig20-only folder).
    header = (gpu / "summary.csv").read_text().splitlines()[0].split(",")
    assert header[-1] == "shifts" and (df["shifts"] == "").all()


def test_a_case_the_runner_recorded_as_failed_is_failed_in_the_summary(tmp_path):
    """A bench that died 4 repetitions into a case (or exited 0 with 7 of 10) leaves repetitions
    with no error flag; the runner records the case as failed. The summary read only the flags and
    listed it as measured (status ok, a time), and figures and auto's tables used that time."""
    gpu = tmp_path / "nvidia-h200"
    gpu.mkdir()
    data = json.loads((FIXTURES / "merged_fig17.json").read_text())
    key = next(k for k, c in data["cases"].items() if c["status"] == "ok")
    data["cases"][key].update(status="failed", message="exit status 139")
    (gpu / "fig17.json").write_text(json.dumps(data))
    row = aggregate_dir(gpu).set_index("case").loc[key]
    assert row.status == "failed" and row.message == "exit status 139" and np.isnan(row.time_us), row


def test_a_case_it_cannot_read_stops_aggregate_with_one_line(tmp_path):
    """One repetition's real_time of null (in a results file of format 2, the runner's) dropped
    every row of the experiment with a warning and exit 0 ("nothing measured"); aggregate now
    stops with exit 2 and one line naming the file."""
    import subprocess
    import sys
    from suite_helpers import ROOT
    gpu = tmp_path / "nvidia-h200"
    gpu.mkdir()
    data = json.loads((ROOT / "results" / "nvidia-h200" / "fig22.json").read_text())  # format 2, as measured
    case = next(iter(data["cases"].values()))
    case["reps"]["real_time"][3] = None
    (gpu / "fig22.json").write_text(json.dumps(data))
    r = subprocess.run([sys.executable, "-m", "xcsuite", "aggregate", str(gpu)], capture_output=True,
                       text=True, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, (r.returncode, r.stderr)
    assert "fig22.json" in r.stderr and "Traceback" not in r.stderr and not (gpu / "summary.csv").exists()


def test_load_summary_recomputes_without_writing_when_results_are_newer(summary):
    df, gpu = summary
    again = load_summary(gpu)
    assert len(again) == len(df) and again["params"].map(type).eq(str).all()
    data = json.loads((gpu / "fig17.json").read_text())
    data["benchmarks"] = [b for b in data["benchmarks"] if not b["run_name"].startswith("fft/")]
    data["cases"] = {k: v for k, v in data["cases"].items() if not k.startswith("fft|")}
    import os
    import time

    (gpu / "fig17.json").write_text(json.dumps(data))
    t = time.time() + 5
    os.utime(gpu / "fig17.json", (t, t))
    csv = (gpu / "summary.csv").read_bytes()
    assert len(load_summary(gpu)) == len(df) - 1
    assert (gpu / "summary.csv").read_bytes() == csv  # reading never writes


def test_truncated_bench_output_is_repaired(tmp_path):
    text = (FIXTURES / "bench_raw.json").read_text()
    full = load_bench_json(FIXTURES / "bench_raw.json")
    assert "xcorr_repaired" not in full
    cut = text[: text.index('"block-per-overlap') + 10]  # killed while writing the 4th case
    f = tmp_path / "cut.json"
    f.write_text(cut)
    data = load_bench_json(f)
    assert data["xcorr_repaired"] and data["context"]["xcorr_gpu_name"] == "NVIDIA H200"
    names = {b["run_name"].split("/")[0] for b in data["benchmarks"]}
    assert names == {"split-row", "overlap-wise", "fft+plan"}
    assert len(data["benchmarks"]) < len(full["benchmarks"])


def test_a_failed_write_leaves_the_old_summary_whole(tmp_path):
    """`(ulimit -f 100; python -m xcsuite aggregate DIR)` (a full disk, a quota) left summary.csv cut at
    100 KB: DataFrame.to_csv wrote into the file itself, and the next reader took the part for the
    whole. Every generated file now replaces the old one at once (paths.write_bytes_atomic)."""
    import resource
    import subprocess
    import sys
    from suite_helpers import ROOT
    gpu = tmp_path / "nvidia-h200"
    gpu.mkdir()
    shutil.copy(FIXTURES / "merged_fig17.json", gpu / "fig17.json")
    aggregate_dir(gpu)
    whole = (gpu / "summary.csv").read_bytes()
    (gpu / "fig17.json").touch()  # newer than the summary: aggregate writes it again

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(whole) // 2, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    r = subprocess.run([sys.executable, "-m", "xcsuite", "aggregate", str(gpu)], capture_output=True,
                       text=True, cwd=ROOT, preexec_fn=small_files, timeout=300)
    assert r.returncode == 1 and r.stderr == f"aggregate: could not write {gpu / 'summary.csv'} (File too large); " \
        "the file before is kept\n", r.stderr  # one line, not an OSError traceback
    assert (gpu / "summary.csv").read_bytes() == whole
    assert sorted(p.name for p in gpu.iterdir()) == ["fig17.json", "summary.csv"]  # no temporary left


def test_a_figure_that_fails_to_save_leaves_the_old_one(tmp_path, monkeypatch):
    """savefig into the file itself left a truncated PNG where rendering or writing failed part-way;
    the figure is rendered in memory and then replaces the old file at once."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from xcsuite import paths
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png")
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3])
    (f,) = paths.save_figure(fig, tmp_path, "fig17", dpi=50)
    old = f.read_bytes()
    assert old.startswith(b"\x89PNG")
    real = paths.os.replace

    def fail(*a):
        raise OSError("disk full")

    monkeypatch.setattr(paths.os, "replace", fail)
    ax.plot([3, 2, 1])
    with pytest.raises(OSError, match="disk full"):
        paths.save_figure(fig, tmp_path, "fig17", dpi=50)
    monkeypatch.setattr(paths.os, "replace", real)
    plt.close(fig)
    assert f.read_bytes() == old and [p.name for p in tmp_path.iterdir()] == ["fig17.png"]
