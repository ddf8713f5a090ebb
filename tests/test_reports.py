"""Table 1, the claims page, the figures and the application, from fake results (CPU only)."""
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import reuse_objects
from conftest import seeded_rng
from suite_helpers import FIXTURES, ROOT, make_fake_build, no_peers_env

from xcsuite import summary
from xcsuite.tables import READINGS, build_table
from xcsuite import cli
from xcsuite.cli import anchors, claims, plot, table
from xcsuite.cli import run_experiments as rx


def measure_fake_suite(tmp):
    """The whole suite, quick protocol, measured by the fake bench in tmp; its GPU folder, aggregated."""
    build = make_fake_build(tmp / "build")
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("FAKE_") or k == "XCORR_LOCK_DIR"}
    os.environ["XCORR_LOCK_DIR"] = str(tmp / "locks")  # not the machine's: tests run side by side
    os.environ.update(no_peers_env(build))
    try:
        assert rx.main(["--quick", "--max-fmas", "1e20", "--build", str(build), "--results", str(tmp / "results"),
                        "--no-progress"]) == 0
    finally:
        for k in ["XCORR_LOCK_DIR", *no_peers_env(build)]:
            os.environ.pop(k, None)
        os.environ.update(saved)
    gpu = tmp / "results" / "fake-gpu-9000-quick"
    summary.aggregate_dir(gpu)
    return gpu


@pytest.fixture(scope="session")
def fake_results(tmp_path_factory):
    """The whole suite, quick protocol, measured by the fake bench: once a session, not once a
    pytest-xdist worker (the first worker to ask measures it in the session's folder, under a lock;
    each worker then works on a copy of its own, as tests write pages into it)."""
    import fcntl

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return measure_fake_suite(tmp_path_factory.mktemp("suite"))
    shared = tmp_path_factory.getbasetemp().parent  # the session's folder, above each worker's
    with open(shared / "fake-suite.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "fake-suite" / "measured"
        if not done.exists():
            gpu = measure_fake_suite(shared / "fake-suite")
            done.write_text(str(gpu))
        gpu = Path(done.read_text())
    mine = tmp_path_factory.mktemp("suite") / "results" / gpu.name
    shutil.copytree(gpu, mine)
    return mine


def summary_rows(rows):
    """A summary.csv-like frame for table1 from (counts, size, variant, family, params, time_us)."""
    out = []
    for counts, size, variant, family, params, t in rows:
        out.append({"experiment": "table1", "status": "ok", "counts": counts, "hL": size, "hR": size, "size": size,
                    "variant": variant, "family": family, "params": params, "time_us": t, "cv": 0.001,
                    "peak_pct": 1.0, "gpu_name": "Test GPU"})
    return pd.DataFrame(out)


SYNTH = summary_rows([
    ("1-to-1", 16, "warp-per-overlap", "warp-per-overlap", "overlaps_per_block=4", 3.0),
    ("1-to-1", 16, "split-row", "warp-shuffle", "rows=1", 4.0),
    ("1-to-1", 16, "split-row", "warp-shuffle", "rows=2", 3.5),  # second fastest, but the same variant as...
    ("1-to-1", 16, "warp-per-overlap", "warp-per-overlap", "overlaps_per_block=8", 3.2),  # ...this one's
    ("1-to-1", 16, "fft", "fft", "launch=graph", 20.0),
    ("1-to-1", 16, "fft+plan", "fft", "", 5000.0),
    ("1-to-1", 16, "register-tiled", "hopper", "rows=8", 2.0),
    ("1-to-1", 512, "grouped-overlap", "warp-shuffle", "left_rows=8,overlaps=8", 9000.0),
    ("1-to-1", 512, "fft", "fft", "launch=graph", 30.0),
    ("1-to-1", 512, "fft+plan", "fft", "", 6000.0),
])


def cell(t, row, size):
    return t[(t["row"] == row) & (t["size"] == size)].iloc[0]


def test_table_best_runner_up_and_margin():
    t = build_table(SYNTH, "fftplan-paper")
    c = cell(t, "1-to-1", 16)
    assert c["best_variant"] == "warp-per-overlap" and c["best_params"] == "overlaps_per_block=4"
    assert c["runner_up_variant"] == "split-row" and c["runner_up_params"] == "rows=2"
    assert c["margin"] == pytest.approx(3.5 / 3.0)
    assert c["agrees_with_paper"]  # the paper: warp-overlap at 16
    c = cell(t, "1-to-1", 512)
    assert c["best_variant"] == "fft+plan" and c["margin"] == pytest.approx(9000 / 6000)
    assert pd.isna(cell(t, "1-to-2", 16)["best_variant"])  # not measured: empty, no crash
    assert len(t) == 7 * 8


def test_table_readings_split_fft_and_new_kernels():
    t = build_table(SYNTH, "fft-paper")
    c = cell(t, "1-to-1", 512)
    assert c["best_variant"] == "fft" and c["margin"] == pytest.approx(9000 / 30)
    assert "fft+plan" not in set(t["best_variant"].dropna()) | set(t["runner_up_variant"].dropna())
    t = build_table(SYNTH, "fftplan-all")
    c = cell(t, "1-to-1", 16)
    assert c["best_variant"] == "register-tiled" and c["runner_up_variant"] == "warp-per-overlap"
    assert c["margin"] == pytest.approx(1.5) and not c["agrees_with_paper"]
    assert "fft" not in set(build_table(SYNTH, "fftplan-all")["best_variant"].dropna())
    assert "register-tiled" not in set(build_table(SYNTH, "fft-paper")["runner_up_variant"].dropna())


PAGES = ["summary.csv", "table1.md", *(f"table1_{r}.csv" for r in READINGS), "claims.md", "anchors.md"]


def regenerate_pages(d, plots_root):
    """Every page of the results folder d made again from its results files (aggregate, table,
    claims, anchors): (Table 1's tables, {page: its bytes})."""
    summary.aggregate_dir(d)
    tables = table.make_tables(d, plots_root=plots_root)
    claims.write_page(d, claims.evaluate(d))
    assert anchors.main([str(d)]) == 0
    return tables, {p: (d / p).read_bytes() for p in PAGES}


@pytest.fixture(scope="module")
def regenerated(fake_results, tmp_path_factory):
    """A copy of the fake results written on a fixed day (copy_results), its pages regenerated
    once with Table 1's figures (PNG): test_table_files_from_fake_results reads its tables, pages
    and figures; test_regenerated_pages_are_byte_identical regenerates the pages once more and
    compares (each regenerated them on its own before)."""
    root = tmp_path_factory.mktemp("regenerated")
    d = copy_results(fake_results, root / "fake-gpu-9000")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XCORR_PLOT_FORMATS", "png")
        tables, pages = regenerate_pages(d, root / "plots")
    return SimpleNamespace(dir=d, plots_root=root / "plots", tables=tables, pages=pages)


def test_table_files_from_fake_results(regenerated):
    d, tables = regenerated.dir, regenerated.tables
    assert set(tables) == set(READINGS)
    md = (d / "table1.md").read_text()
    assert md.count("| 1-to-1 |") == 5  # four readings and the paper's table
    for reading in READINGS:
        csv = pd.read_csv(d / f"table1_{reading}.csv")
        assert len(csv) == 56 and csv["best_variant"].notna().all()
        png = regenerated.plots_root / d.name / f"table1_{reading}.png"
        assert png.stat().st_size > 10_000
    t = tables["fftplan-paper"]
    assert not (t["best_variant"] == "fft").any() and (t["best_variant"] == "fft+plan").any()
    s = summary.load_summary(d)
    rows = s[(s["experiment"] == "table1") & (s["counts"] == "8-to-8") & (s["size"] == 64) & (s["family"] != "hopper")
             & (s["variant"] != "fft")]
    assert cell(t, "8-to-8", 64)["best_time_us"] == pytest.approx(rows["time_us"].min())


def test_turning_claim_falls_back_to_the_figure_until_the_sweep_has_fft_plan():
    """A Table 1 sweep resumed over several runs measures the direct kernels first: until it has
    fft+plan for a row, that row's turning point comes from its comparison figure (a partial sweep
    turned the H100's verdicts from the figures into 'not measured'); once it has both, from the sweep."""
    data = object.__new__(claims.Data)
    direct = [("1-to-2", n, "multi-matrix-right", "multi-matrix-right", "rights=2", 10.0 * n) for n in (128, 256, 384, 512)]
    fig = pd.DataFrame([{"group": g, "series": v, "size": n, "time_us": t, "shape_panel": "1-to-2", "panel": "1-to-2",
                         "variant": v, "params": ""}
                        for n in (128, 256, 384, 512)
                        for g, v, t in (("paper", "multi-matrix-right", 10.0 * n), ("fft", "fft+plan", 3000.0))])
    data._pts = {"fig20": fig}
    text = "1-to-2: fft+plan overtakes slightly beyond 256x256"
    data.summary = summary_rows(direct)
    r = claims.table_turning_claim(data, "1-to-2", [384, 512], "beyond 256", text)
    assert (r.source, r.measured, r.verdict) == ("Fig. 20", "384x384", "confirmed")
    data.summary = summary_rows(direct + [("1-to-2", n, "fft+plan", "fft", "", 2000.0) for n in (128, 256, 384, 512)])
    r = claims.table_turning_claim(data, "1-to-2", [384, 512], "beyond 256", text)
    assert (r.source, r.measured, r.verdict) == ("Table 1", "256x256", "not confirmed")


def test_crossing():
    f = pd.Series({16: 20.0, 32: 21.0, 64: 22.0, 128: 25.0})
    d = pd.Series({16: 3.0, 32: 30.0, 64: 15.0, 128: 200.0})
    assert claims.crossing(f, d) == 128  # 32 wins alone, but 64 does not: the crossing is for good
    assert claims.crossing(f, pd.Series({16: 1.0, 32: 1.0, 64: 1.0, 128: 1.0})) is None
    assert claims.crossing(f, pd.Series({16: 1.0, 32: 100.0})) == 32  # capped sizes are not held against fft


def test_ratio_verdict():
    assert claims.ratio_verdict(5.3 * 1.24, 5.3) == "confirmed"
    assert claims.ratio_verdict(5.3 * 0.76, 5.3) == "confirmed"
    assert claims.ratio_verdict(5.3 * 1.3, 5.3) == "not confirmed (higher)"
    assert claims.ratio_verdict(2.0, 5.3) == "not confirmed (lower)"
    assert claims.ratio_verdict(float("nan"), 5.3) == "not measured"


def test_claims_page(fake_results):
    res = claims.evaluate(fake_results)
    assert len(res) == 14 and not [r for r in res if r.verdict == "not measured"]
    s = summary.load_summary(fake_results)
    f17 = s[(s["experiment"] == "fig17") & (s["size"] == 256) & (s["status"] == "ok")]
    base = f17[f17["variant"] == "overlap-wise"]["time_us"].min()
    paper = f17[~f17["variant"].isin(["overlap-wise", "fft", "fft+plan"]) & (f17["family"] != "hopper")]["time_us"].min()
    r = next(x for x in res if x.claim.startswith("one-to-one 256x256"))
    assert r.measured == f"{base / paper:.2f}x"
    real = next(x for x in res if x.claim.startswith("real-data"))
    assert real.verdict == "confirmed"  # the fake's mm-right + grouped takes ~40 ms
    page = claims.write_page(fake_results, res).read_text()
    assert "±25%" in page and page.count("| ") > 14 * 6


def test_anchor_verdicts():
    assert anchors.verdict([], 5.0) == "not measured"
    assert anchors.verdict([4.0, 5.0], 5.0) == "**faster**"
    assert anchors.verdict([4.0, 6.0, 7.0], 5.0) == "faster in 1 of 3 runs"
    assert anchors.verdict([5.5, 6.0], 5.0) == "slower by 10%"


def test_anchor_matching_keeps_only_the_papers_configuration():
    a = anchors.Anchor("one-to-one", "split-row", "one-to-one", 64, 1, 1, {"rows": "1"}, 15.7, "split-row (rows 1)")
    base = {"variant": "split-row", "form": "one-to-one", "hL": 64, "wL": 64, "hR": 64, "wR": 64, "nL": 1, "nR": 1,
            "status": "ok", "cold": False}
    s = pd.DataFrame([
        {**base, "experiment": "fig16", "params": "distribution=triangle,rows=1,warps=4", "time_us": 17.0},
        {**base, "experiment": "table1", "params": "distribution=triangle,rows=1,warps=4", "time_us": 16.0},
        {**base, "experiment": "table1", "params": "distribution=triangle,rows=4,warps=4", "time_us": 9.0},  # other tuning
        {**base, "experiment": "fig17", "params": "distribution=triangle,rows=1,warps=4", "time_us": 1.0,
         "cold": True},  # cold runs are another protocol
        {**base, "experiment": "fig16", "params": "distribution=triangle,rows=1,warps=4", "time_us": 2.0,
         "nR": 2},  # another shape
    ])
    m = anchors.matches(s, a)
    assert list(m["time_us"]) == [16.0, 17.0]
    page, counts = anchors.build_page(s, "NVIDIA H200")
    assert "| 64 | split-row (rows 1) | 15.7 µs | 16 µs | 17 µs (fig16) |" in page
    assert counts["slower"] == 1 and counts["not measured"] == len(anchors.ANCHORS) - 1
    other, _ = anchors.build_page(s, "NVIDIA A100")
    assert "not a verdict" in other and "not a verdict" not in page


def test_claims_with_missing_results(tmp_path):
    d = tmp_path / "empty-gpu"
    d.mkdir()
    res = claims.evaluate(d)
    assert all(r.verdict == "not measured" for r in res)


def test_every_figure_is_drawn(fake_results, tmp_path, monkeypatch):
    monkeypatch.setenv("XCORR_PLOT_STRICT", "1")
    monkeypatch.delenv("XCORR_PLOT_FORMATS", raising=False)  # the default: PNG only (PDF: below, on one figure)
    # The fake suite runs no peers, and every route of the experiment `reductions` is one (Python calls
    # timed by xcsuite/reduce_peers.py): its figure is not drawn here, and says so
    # (tests/test_reductions.py draws it from results of its own).
    with pytest.warns(UserWarning, match="reductions: no results"):
        files = plot.plot_gpu(fake_results, plots_root=tmp_path)
    assert len(files) == 20 and all(f.suffix == ".png" for f in files), files
    names = {f.stem for f in files}
    assert names == {"fig15", "fig16", "fig17", "fig18", "fig19", "fig20", "fig21", "fig22", "fig23", "nmn",
                     "efficiency", "windows", "piv", "autocorr", "zncc_frames", "zncc_match", "zncc_autocorr",
                     "signals_seed004", "signals_matched", "signals_ambient"}
    assert all(f.stat().st_size > 5_000 for f in files)
    # Drawn again, with what --pdf asks for: the PNG is the same bytes for the same data, a PDF beside it
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png,pdf")
    files = plot.plot_gpu(fake_results, only=["fig16"], plots_root=tmp_path / "again")
    assert [f.name for f in files] == ["fig16.png", "fig16.pdf"] and files[1].stat().st_size > 5_000
    assert files[0].read_bytes() == (tmp_path / fake_results.name / "fig16.png").read_bytes()


def test_figures_with_partial_results(fake_results, tmp_path, monkeypatch):
    part = tmp_path / "partial-gpu"
    part.mkdir()
    for name in ("fig17", "fig21", "nmn"):
        shutil.copy(fake_results / f"{name}.json", part / f"{name}.json")
    data = json.loads((part / "fig17.json").read_text())  # drop a variant
    data["cases"] = {k: v for k, v in data["cases"].items() if not k.startswith("split-row|")}
    (part / "fig17.json").write_text(json.dumps(data))
    monkeypatch.delenv("XCORR_PLOT_STRICT", raising=False)
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        files = plot.plot_gpu(part, plots_root=tmp_path / "plots")
        tables = table.make_tables(part, plots_root=tmp_path / "plots")
    assert {f.stem for f in files} == {"fig17", "fig21", "nmn", "efficiency"}
    assert tables == {}
    text = " ".join(str(x.message) for x in w)
    assert "split-row" in text and "no results for fig15" in text


def test_points_recorded_as_failed_are_one_line_and_a_gap_still_warns(tmp_path, capsys, monkeypatch):
    """The H200's autocorr holds 5 points whose cases ran and are recorded as failed (a peer too
    slow to time, peers that failed the check): `scripts/reproduce` printed a UserWarning of two
    lines for each series (~30 lines), read as errors. They are results: one line for all. A point
    with no case measured at all (a run stopped part-way) is a gap and still warns."""
    monkeypatch.setattr(plot.paths, "PLOTS", tmp_path / "plots")
    d = tmp_path / "nvidia-h200"
    d.mkdir()
    for f in ("autocorr.json", "summary.csv"):
        shutil.copy(ROOT / "results" / "nvidia-h200" / f, d / f)
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning fails the test
        assert plot.main([str(d), "--only", "autocorr"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [l for l in out if "without a time" in l] == [
        "plot: nvidia-h200: 5 figure point(s) without a time, as measured: 4 failed the check before timing, 1 too "
        "slow to time (each case's reason: the message column of summary.csv)"], out
    s = pd.read_csv(d / "summary.csv")
    gone = s[(s["experiment"] == "autocorr") & (s["status"] != "ok")]["case"].iloc[0]
    s[s["case"] != gone].to_csv(d / "summary.csv", index=False)  # that case never ran
    with pytest.warns(UserWarning, match=r"autocorr: '.*': 1 point\(s\) not measured yet"):
        assert plot.main([str(d), "--only", "autocorr"]) == 0
    assert "4 figure point(s) without a time" in capsys.readouterr().out


def test_cross_gpu_figure_needs_two_gpus(fake_results, tmp_path):
    other = tmp_path / "other-gpu"
    other.mkdir()
    shutil.copy(fake_results / "fig17.json", other / "fig17.json")
    assert plot.plot_cross_gpu([fake_results], plots_root=tmp_path) == []
    files = plot.plot_cross_gpu([fake_results, other], plots_root=tmp_path)
    assert [f.name for f in files] == ["cross-gpu.png"] and files[0].stat().st_size > 10_000


SCIPY_APPLICATION = ["--algorithm", "scipy", "--patterns", "1"]  # the application check on the CPU, one pattern


@pytest.fixture(scope="module")
def scipy_application(tmp_path_factory):
    """One run of the application check on the CPU (`SCIPY_APPLICATION`), its exit status asserted:
    its folder, which test_application_convention_and_recovery reads and with which
    test_the_application_check_writes_the_same_bytes_every_run compares a second run (each ran its
    own, the same run)."""
    from xcsuite.cli import application as app

    out = tmp_path_factory.mktemp("application") / "run0"
    assert app.main([*SCIPY_APPLICATION, "--out", str(out)]) == 0
    return out


def test_application_convention_and_recovery(scipy_application):
    from xcsuite.cli import application as app
    from scipy import signal

    rng = seeded_rng(0)
    L = rng.random((1, 96, 96)).astype(np.float32)
    R = np.roll(L[0], shift=(-2, 3), axis=(0, 1))[None]  # R[r][c] = L[r+2][c-3]
    C, _ = app.correlate(L, R, "scipy", None)
    assert np.allclose(C[0], signal.correlate2d(L[0], R[0], mode="full"), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(app.peaks(C)[0], [2, -3], atol=0.3)
    stats = json.loads((scipy_application / "application.json").read_text())
    assert stats["pass"] and stats["tiles"] == 86 and stats["correlations"] == 86
    assert stats["rms_error_px"] < app.MAX_RMS_PX and stats["max_true_shift_px"] > 2
    assert (scipy_application / "application.png").stat().st_size > 10_000


def png_text_chunks(data: bytes) -> list[bytes]:
    """The tEXt/iTXt/zTXt/tIME chunks of a PNG (where matplotlib's version and a date would go)."""
    import struct

    found, i = [], 8
    while i < len(data):
        n, = struct.unpack(">I", data[i:i + 4])
        if data[i + 4:i + 8] in (b"tEXt", b"iTXt", b"zTXt", b"tIME"):
            found.append(data[i + 4:i + 8 + min(n, 40)])
        i += 12 + n
    return found


def test_the_application_check_writes_the_same_bytes_every_run(scipy_application, tmp_path, capsys):
    """Every `scripts/reproduce` without a GPU rewrote the committed plots/cpu-reference/: its
    application.json held the run's wall time and its PNG matplotlib's version stamp. What is
    committed is what was recovered, the same every run; the wall time goes beside it, to a file
    git ignores."""
    from xcsuite.cli import application as app

    runs = []
    for k in range(2):  # the first run: the fixture's (the same command), the second: this one
        out = scipy_application if k == 0 else tmp_path / f"run{k}"
        if k:
            assert app.main([*SCIPY_APPLICATION, "--out", str(out)]) == 0
        runs.append({f: (out / f).read_bytes() for f in ("application.json", "application.png")})
        assert json.loads((out / "application.timing.json").read_text())["wall_s_including_io"] > 0
    assert runs[0] == runs[1]
    stats = json.loads(runs[0]["application.json"])
    assert stats["pass"] and set(stats) == {"algorithm", "gpu", "tiles", "patterns", "correlations", "rms_error_px",
                                            "mean_abs_error_px", "max_error_px", "integer_peak_matches",
                                            "max_true_shift_px", "pass"}, stats  # no wall_s_including_io
    assert png_text_chunks(runs[0]["application.png"]) == []
    ignored = subprocess.run(["git", "check-ignore", "-q", "plots/cpu-reference/application.timing.json"], cwd=ROOT)
    assert ignored.returncode == 0, "git must ignore the wall time's file"


def test_committed_figures_and_application_results_hold_nothing_a_rerun_changes():
    """A committed file that carries a version stamp or a time is rewritten by every regeneration
    (the application PNGs kept matplotlib's Software chunk, their JSON the wall time)."""
    tracked = subprocess.run(["git", "ls-files", "plots"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    pngs = [f for f in tracked if f.endswith(".png")]
    assert pngs and {f: png_text_chunks((ROOT / f).read_bytes()) for f in pngs if png_text_chunks((ROOT / f).read_bytes())} == {}
    for f in (f for f in tracked if f.endswith("application.json")):
        assert "wall_s_including_io" not in json.loads((ROOT / f).read_text()), f


@pytest.mark.parametrize("tool", ["aggregate", "plot", "table", "claims", "anchors"])
def test_a_damaged_results_file_stops_every_report_with_one_line(tool, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plot.paths, "PLOTS", tmp_path / "plots")
    d = tmp_path / "nvidia-h200"
    d.mkdir()
    shutil.copy(FIXTURES / "merged_fig17.json", d / "fig17.json")
    (d / "fig22.json").write_text('{"xcorr_meta": {"experiment": "fig22"}, "benchmarks": [{"name": ')
    capsys.readouterr()
    assert cli.run(tool, [str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{tool}: {d / 'fig22.json'}: not valid JSON"), err
    assert "restore it from git" in err[0]


def copy_results(src, dst, stop=(), keep=12, updated="2020-01-02T03:04:05+00:00"):
    """A copy of the fake results written on a fixed day, with the experiments in `stop` cut to
    their first `keep` cases and marked incomplete, as a run stopped part-way leaves them."""
    dst.mkdir()
    for f in sorted(src.glob("*.json")):
        data = json.loads(f.read_text())
        data["xcorr_meta"]["updated"] = updated
        if f.stem in stop:
            kept = list(data["cases"])[:keep]
            data["cases"] = {k: data["cases"][k] for k in kept}
            data["xcorr_meta"]["complete"] = False
        (dst / f.name).write_text(json.dumps(data))
    return dst


def test_an_incomplete_experiment_says_so_wherever_its_numbers_appear(fake_results, tmp_path, monkeypatch):
    d = copy_results(fake_results, tmp_path / "fake-gpu-9000", stop=("fig17", "table1"))
    planned = {n: json.loads((fake_results / f"{n}.json").read_text())["xcorr_meta"]["cases_planned"]
               for n in ("fig17", "table1")}
    assert planned["fig17"] > 12 and planned["table1"] > 12
    note17 = f"fig17 (incomplete: 12 of {planned['fig17']} cases)"
    s = summary.aggregate_dir(d)
    assert not s[s["experiment"].isin(["fig17", "table1"])]["experiment_complete"].any()
    assert s[~s["experiment"].isin(["fig17", "table1"])]["experiment_complete"].all()
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png")
    titles = {}
    monkeypatch.setattr(plot, "save", lambda fig, out_dir, name: titles.setdefault(name, fig._suptitle.get_text()) and [])
    # The cases not yet measured: one warning per experiment stopped part-way, not one per series
    # (a run stopped by --max-minutes printed ~30); pytest.warns re-emits any that does not match.
    with pytest.warns(UserWarning, match=r"^(fig17|table1): incomplete: 12 of \d+ cases: \d+ series lack points "
                      r"until it is finished \(.+ and \d+ more; rerun the same command to resume\)$") as caught:
        plot.plot_gpu(d, only=["fig17", "fig16", "efficiency"], plots_root=tmp_path / "plots")
    assert sorted(str(w.message).split(":")[0] for w in caught) == ["fig17", "table1"]
    assert f"fig17: incomplete: 12 of {planned['fig17']} cases" in titles["fig17"].replace("\n", " ")
    assert "incomplete" in titles["efficiency"] and "incomplete" not in titles["fig16"]
    # Table 1's figures are drawn (their titles taken where save_figure renders them: the pixels are
    # test_table_files_from_fake_results's)
    table_titles = {}
    monkeypatch.setattr(table.paths, "save_figure",
                        lambda fig, out_dir, name, **kw: table_titles.setdefault(name, fig.axes[0].get_title()) and [])
    with pytest.warns(UserWarning, match=r"^fake-gpu-9000: table1 \(fft(plan)?-paper\): \d+ cell\(s\) without measurements$"):
        tables = table.make_tables(d, plots_root=tmp_path / "plots")
    assert f"incomplete: 12 of {planned['table1']} cases" in (d / "table1.md").read_text()
    assert set(table_titles) == {f"table1_{r}" for r in tables} and tables
    assert all(f"(table1 incomplete: 12 of {planned['table1']} cases)" in t for t in table_titles.values()), table_titles
    claims.write_page(d, claims.evaluate(d))
    page = (d / "claims.md").read_text()
    assert note17 in page and f"table1 (incomplete: 12 of {planned['table1']} cases)" in page
    assert anchors.main([str(d)]) == 0 and note17 in (d / "anchors.md").read_text()


def test_the_planned_count_comes_from_the_definition_for_older_files(fake_results, tmp_path):
    from xcsuite.results import progress

    d = copy_results(fake_results, tmp_path / "old", stop=("fig17",))
    data = json.loads((d / "fig17.json").read_text())
    planned = data["xcorr_meta"].pop("cases_planned")
    (d / "fig17.json").write_text(json.dumps(data))
    assert progress(d)["fig17"].note() == f"incomplete: 12 of {planned} cases"


def test_regenerated_pages_are_byte_identical(regenerated, monkeypatch):
    """Regenerating from unchanged results leaves a clean tree clean: no page carries the day it
    was made (claims.md carried today's date), and nothing else varies between runs."""
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png")
    # The first regeneration: the fixture's, of a fresh copy; this one, over its pages. The pages
    # alone: Table 1's figures (four a regeneration) are none of them, and
    # test_table_files_from_fake_results checks the fixture's (save_figure's own test: a figure
    # redrawn from the same data is the same bytes, test_every_figure_is_drawn)
    monkeypatch.setattr(table, "figure", lambda *a, **k: None)
    first = regenerated.pages
    assert regenerate_pages(regenerated.dir, regenerated.plots_root)[1] == first
    import datetime as dt

    claims_page = first["claims.md"].decode()
    assert "(last written 2020-01-02)" in claims_page and dt.date.today().isoformat() not in claims_page


def test_anchors_are_read_from_the_committed_copy(tmp_path):
    assert anchors.ANCHORS_MD == anchors.paths.ROOT / "docs" / "ANCHORS.md"
    got = {(a.form, a.variant, a.size, tuple(sorted(a.params.items()))): a.paper_us for a in anchors.ANCHORS}
    assert len(anchors.ANCHORS) == len(got) == 54
    assert got[("one-to-one", "split-row", 64, (("rows", "1"),))] == 15.7
    assert got[("n-to-mn", "multi-matrix-right+grouped-overlap", 96,
                (("left_rows", "4"), ("overlaps", "4"), ("rights", "4")))] == pytest.approx(48.8e3)
    assert ("one-to-one", "grouped-overlap", 16, (("left_rows", "8"), ("overlaps", "8"))) not in got  # "-"
    changed = tmp_path / "ANCHORS.md"
    changed.write_text(anchors.ANCHORS_MD.read_text().replace("| fft (no plan) |\n", "| fft (plan) |\n", 1))
    with pytest.raises(ValueError, match="unknown anchor column"):
        anchors.read_anchors(changed)


# --- scripts/reproduce and scripts/setup-env for a newcomer (no GPU needed) ---

def sh(*args, env=None):
    import subprocess

    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def reproduce_step(first: str, last: str) -> str:
    """Lines of scripts/reproduce from the line `first` to the line `last` after it, after the
    budget's clock and its function (budget_left)."""
    lines = (ROOT / "scripts" / "reproduce").read_text().splitlines()
    clock = lines.index("started=$SECONDS")
    start = lines.index(first)
    end = lines.index(last, start)
    return "\n".join(lines[clock:lines.index("}", clock) + 1] + lines[start:end + 1]) + "\n"


def reproduce_experiment_step(tmp_path, quick="", exps="", maxmin="", rc=0):
    """scripts/reproduce's experiment step (from `if [ -z "$only" ] ...` to its `fi`), run in a
    folder whose commands are stubs that log their arguments: (status, [logged calls])."""
    tmp_path.mkdir()
    (tmp_path / "step.sh").write_text(reproduce_step('  if [ -z "$only" ] || [ -n "$exps" ]; then', "  fi"))
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    (tmp_path / "xcsuite").symlink_to(ROOT / "xcsuite")  # experiments/ imports xcsuite.spec
    (tmp_path / "scripts").mkdir()
    log = tmp_path / "calls"
    (tmp_path / "scripts" / "setup-env").write_text(f"echo setup-env >> {log}\n")
    py = tmp_path / "py"
    py.write_text(f'#!/bin/bash\nif [ "$1" = -c ]; then exec {sys.executable} "$@"; fi\necho "$*" >> {log}\n'
                  f'[ "$3" != run-experiments ] || exit {rc}\n')
    py.chmod(0o755)
    script = (f'PY={py} build=build status=0 quick="{quick}" only="{exps}" exps="{exps}" maxmin="{maxmin}"\n'
              'set -euo pipefail\nsource step.sh\necho "status=$status"\n')
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip().splitlines()[-1].split("=")[1]), log.read_text().splitlines() if log.exists() else []


def test_reproduce_measures_auto_after_making_and_building_its_tables(tmp_path):
    # The reductions time algorithm="auto", whose choice is compiled in from lib/auto_tables/: on a
    # GPU measured for the first time they must run after the other experiments' results have made
    # the tables and the library is rebuilt, or they time another GPU's choice for good (a complete
    # experiment is not run again).
    import experiments as suite

    early, late = suite.auto_order(suite.names())
    assert late == ["reductions"] and "table1" in early and "window_table" in early
    status, calls = reproduce_experiment_step(tmp_path / "all")
    assert status == 0 and calls == [f"-m xcsuite run-experiments --build build {','.join(early)}",
                                     "-m xcsuite aggregate", "scripts/auto-tables --build build",
                                     "setup-env", "-m xcsuite run-experiments --build build reductions"]
    status, calls = reproduce_experiment_step(tmp_path / "budget", exps="piv,reductions", maxmin="5")
    assert status == 0 and calls[0] == "-m xcsuite run-experiments --build build --max-minutes 5 piv"
    *_, flag, left, exp = calls[-1].split()
    assert calls[1:4] == ["-m xcsuite aggregate", "scripts/auto-tables --build build", "setup-env"]
    assert (flag, exp) == ("--max-minutes", "reductions") and 4.5 < float(left) <= 5  # what is left of it
    # one run where nothing measures auto, in quick mode (no tables from quick results), or when the
    # budget ran out first (rerun: the others are complete, the tables made, then the reductions)
    assert reproduce_experiment_step(tmp_path / "piv", exps="piv")[1] == ["-m xcsuite run-experiments --build build piv"]
    assert reproduce_experiment_step(tmp_path / "q", quick="--quick")[1] == [
        "-m xcsuite run-experiments --quick --build build"]
    status, calls = reproduce_experiment_step(tmp_path / "out", maxmin="3", rc=4)
    assert status == 4 and calls == [f"-m xcsuite run-experiments --build build --max-minutes 3 {','.join(early)}"]


def reproduce_tail_step(tmp_path, status=0, maxmin="", gpus=2, sweep_rc=0, tm_rc=0):
    """scripts/reproduce's measurements after the experiments (zncc on offset data; on two GPUs or
    more the batch, 2-D template matching and the quick sweep over them), run in `tmp_path` with
    stubs for python, nvidia-smi and git: (status, [logged calls], stdout)."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "step.sh").write_text(reproduce_step('  if [ -z "$only" ] && [ -z "$quick" ] && [ $status = 4 ]; then',
                                                     "  fi"))
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    log = tmp_path / "calls"
    log.unlink(missing_ok=True)
    (bin_ / "nvidia-smi").write_text("#!/bin/bash\n" + "".join(f"echo 'GPU {i}: Fake GPU (UUID: GPU-{i})'\n"
                                                                for i in range(gpus)))
    (bin_ / "git").write_text("#!/bin/bash\necho abc1234\n")
    (bin_ / "py").write_text(
        '#!/bin/bash\nif [ "$1" = -c ]; then echo fake-gpu; exit 0; fi\n'
        f'echo "$*" >> {log}\n'
        'if [ "$1" = scripts/sweep-scaling ]; then\n'
        '  while [ $# -gt 0 ]; do [ "$1" != --resume ] || mkdir -p "$2"; shift; done\n'
        f'  exit {sweep_rc}\nfi\n'
        f'if [ "$1" = scripts/tm-scaling ]; then exit {tm_rc}; fi\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    script = (f'unset XCORR_GIT_REVISION; PATH={bin_}:$PATH PY={bin_}/py build=build status={status} quick="" only="" maxmin="{maxmin}"\n'
              'set -euo pipefail\nsource step.sh\necho "status=$status"\n')
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    return (int(r.stdout.strip().splitlines()[-1].split("=")[1]), log.read_text().splitlines() if log.exists() else [],
            r.stdout)


def test_reproduce_keeps_its_budget_through_the_measurements_over_several_gpus(tmp_path):
    """After the experiments the main job measures zncc on offset data and, on a host of two GPUs
    or more, a batch, 2-D template matching and the quick sweep over them (~15 minutes on two
    H100s). They used to run whatever --max-minutes said, even once the experiments had run out of it. Now: none once the
    budget ran out (exit 4, the rerun comes back to them); the sweep gets what is left and continues
    in the next run from .sweep-scaling/<gpu>-<revision> (an earlier revision's state removed, the
    finished one too); a sweep measured before is kept, as a complete experiment is."""
    sweep = "scripts/sweep-scaling --build build --resume .sweep-scaling/fake-gpu-abc1234"
    out = "--out results/fake-gpu/multi-gpu/sweep_scaling.json"
    stale, other = tmp_path / ".sweep-scaling" / "fake-gpu-0ld0000", tmp_path / ".sweep-scaling" / "other-gpu-abc1234"
    stale.mkdir(parents=True)
    other.mkdir()
    status, calls, _ = reproduce_tail_step(tmp_path)
    assert status == 0 and calls == ["scripts/zncc-offsets",
                                     "scripts/batch-scaling --repeat 5 --out results/fake-gpu/multi-gpu/batch_scaling.json",
                                     "scripts/tm-scaling --out results/fake-gpu/multi-gpu/tm_scaling.json",
                                     f"{sweep} {out}"]
    assert not stale.exists() and other.exists() and not (tmp_path / ".sweep-scaling" / "fake-gpu-abc1234").exists()
    status, calls, said = reproduce_tail_step(tmp_path, maxmin="30", sweep_rc=4)
    *_, flag, left, o, path = calls[-1].split()
    assert status == 4 and calls[-1].startswith(sweep) and flag == "--max-minutes" and 29.9 < float(left) <= 30
    assert (tmp_path / ".sweep-scaling" / "fake-gpu-abc1234").is_dir() and "the budget ran out in the quick sweep" in said
    status, calls, said = reproduce_tail_step(tmp_path, status=4)
    assert status == 4 and calls == [] and "the budget ran out before zncc on offset data" in said
    status, calls, said = reproduce_tail_step(tmp_path, maxmin="0.04")
    assert status == 4 and calls == [] and "the budget ran out before zncc on offset data" in said
    (tmp_path / "results" / "fake-gpu" / "multi-gpu" / "sweep_scaling.json").write_text("{}")
    status, calls, said = reproduce_tail_step(tmp_path)
    assert status == 0 and len(calls) == 3 and "sweep_scaling.json is there, skipped" in said
    status, calls, _ = reproduce_tail_step(tmp_path, tm_rc=1)  # a wrong answer over the GPUs fails the main job
    assert status == 1 and calls[-1].startswith("scripts/tm-scaling")
    status, calls, _ = reproduce_tail_step(tmp_path, gpus=1, sweep_rc=1)
    assert status == 0 and calls == ["scripts/zncc-offsets"]
    (tmp_path / "results" / "fake-gpu" / "multi-gpu" / "sweep_scaling.json").unlink()
    status, calls, _ = reproduce_tail_step(tmp_path, sweep_rc=1)
    assert status == 1 and calls[-1] == f"{sweep} {out}"  # a void comparison fails the main job


def test_reproduce_s_application_check_waits_for_the_rerun_once_the_budget_ran_out(tmp_path):
    """The application check (~30 s on the GPU) ran after the budget had run out; now, as the
    measurements after the experiments, it waits for the rerun (exit 4 kept)."""
    step = reproduce_step('if [ $norun = 0 ] && wants application && [ -z "$quick" ] && [ $status = 4 ]; then', "fi")
    (tmp_path / "step.sh").write_text(step)
    for status, ran in ((4, False), (0, True)):
        script = (f'PY=echo build=build status={status} quick="" norun=0 gpu=1 maxmin=""\n'
                  'wants() { true; }\nset -euo pipefail\nsource step.sh\necho "status=$status"\n')
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60)
        assert r.returncode == 0, r.stderr
        assert ("-m xcsuite application --build build" in r.stdout) == ran and r.stdout.endswith(f"status={status}\n")
        assert ("the budget ran out before the application check" in r.stdout) != ran


def test_reproduce_help_is_a_usage_text():
    r = sh("scripts/reproduce", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: scripts/reproduce")
    assert not [l for l in r.stdout.splitlines() if l.startswith("#") or "set -e" in l or "cd \"$(" in l]
    for opt in ("--only", "--quick", "--no-run", "--max-minutes", "--build"):
        assert opt in r.stdout


def test_reproduce_refuses_an_unknown_experiment():
    r = sh("scripts/reproduce", "--only", "fig17,fig99", "--no-run")
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and "fig99" in err[0] and "fig17, " in err[0] and "application" in err[0]
    assert not r.stdout  # refused before anything was set up or regenerated


@pytest.mark.parametrize("args, needle", [
    (["--max-minutes", "abc"], "--max-minutes must be a number of minutes above 0, not 'abc'"),
    (["--max-minutes", "-1"], "--max-minutes must be a number of minutes above 0, not '-1'"),
    (["--max-minutes", "0"], "--max-minutes must be a number of minutes above 0, not '0'"),  # it meant no limit
    (["--max-minutes="], "--max-minutes needs a value"),  # it meant no limit
    (["--only", ","], "--only: an empty experiment name in ','"),  # it ran nothing and plotted everything
    (["--only", "fig17,,fig18"], "--only: an empty experiment name"),
    (["--only="], "--only needs a value"),  # it meant every experiment
    (["--build="], "--build needs a value"),
    (["--only", "fig17", "--only=fig18"], "--only is given twice"),  # the last silently won
    (["--max-minutes", "5", "--max-minutes", "10"], "--max-minutes is given twice"),
    (["fig17"], "unexpected argument 'fig17' (experiments go in --only"),
])
def test_reproduce_refuses_a_bad_value_with_one_line(args, needle):
    """Refused before anything is set up, run or regenerated (--no-run, so that an accepted one
    would only regenerate: the test cannot start a measurement)."""
    r = sh("scripts/reproduce", *args, "--no-run")
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and err[0].startswith("reproduce: ") and needle in err[0], r.stderr
    assert not r.stdout


def test_reproduce_takes_a_fraction_of_a_minute():
    """The check above refuses no valid budget: these reach the next check (--only's names)."""
    for budget in ("0.5", "5", "2.", ".25"):
        r = sh("scripts/reproduce", "--max-minutes", budget, "--only", "nosuch", "--no-run")
        assert r.returncode == 2 and "unknown experiment 'nosuch'" in r.stderr, (budget, r.stderr)


def test_regenerating_needs_no_cuda_toolkit(tmp_path):
    """setup-env as `scripts/reproduce --no-run` sources it, on a PATH without nvcc."""
    bindir = tmp_path / "bin"  # python and ninja only
    bindir.mkdir()
    # python3 is this interpreter (it has the suite's packages: setup-env must not go on to make a
    # .venv/ in this checkout); a wrapper, since a symlink to a venv's python loses its venv.
    (bindir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bindir / "python3").chmod(0o755)
    ninja = reuse_objects.python_ninja()
    if ninja:
        os.symlink(ninja, bindir / "ninja")
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "CUDA_HOME": str(tmp_path / "no-cuda"), "XCORR_SKIP_BUILD": "1"}
    assert not sh("bash", "-c", "command -v nvcc", env=env).stdout, "this machine has nvcc in /usr/bin"
    r = sh("bash", "-c", 'source scripts/setup-env && echo "PY=$PY"', env=env)
    assert r.returncode == 0 and "PY=" in r.stdout, r.stderr
    r = sh("bash", "-c", "source scripts/setup-env", env={**env, "XCORR_SKIP_BUILD": ""})
    assert r.returncode == 2 and "nvcc" in r.stderr  # a build does need it


def test_application_without_a_build_says_which_fallback_it_uses(tmp_path, capsys):
    from xcsuite.cli import application as app

    assert app.main(["--build", str(tmp_path / "no-build"), "--patterns", "1", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "using scipy instead of the float64 CPU reference of xcorr" in out
    assert json.loads((tmp_path / "application.json").read_text())["algorithm"] == "scipy"
    assert app.main(["--algorithm", "reference", "--build", str(tmp_path / "no-build")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs" in err[0] and "no-build" in err[0]


# --- the figure plan stored with the results (docs/result-files.md, "members") ---

def test_figures_are_drawn_from_the_members_the_runner_stored(fake_results, tmp_path):
    """The runner stores the expansion once; the reader takes it from the file, and derives the
    same for a file written before it was stored (without writing anything)."""
    from xcsuite import figdata, resultfile
    from xcsuite.results import load_results
    import experiments as suite

    s = summary.load_summary(fake_results)
    fig16 = suite.load("fig16")
    stored = load_results(fake_results / "fig16.json")["members"]
    assert stored and all(m["keys"] for m in stored)
    d = tmp_path / "gpu"
    shutil.copytree(fake_results, d)
    data = load_results(d / "fig16.json")
    del data["members"]  # an older file
    resultfile.write_atomic(d / "fig16.json", data)
    before = (d / "fig16.json").read_bytes()
    assert figdata.members(fig16, s, d) == resultfile.decode_members(stored)
    assert (d / "fig16.json").read_bytes() == before
    full, _ = figdata.points(fig16, s, fake_results)
    # a file whose runner planned fewer points: the figure follows the file, not the definition
    data["members"] = stored[1:]
    resultfile.write_atomic(d / "fig16.json", data)
    fewer, _ = figdata.points(fig16, s, d)
    assert len(fewer) == len(full) - 1 and len(full) > 1
    data["members"] = "not a list"
    (d / "fig16.json").write_text(json.dumps(data))
    with pytest.raises(Exception, match="members is no list"):
        figdata.points(fig16, s, d)


def test_setup_env_gives_the_caller_its_shell_options_back():
    """scripts/setup-env runs under set -euo pipefail and is sourced: a caller that handles a
    non-zero status itself (a device script copying results after run_experiments' exit 4 at its
    time budget) must keep running after it, with its own options."""
    import subprocess
    script = ('set +e +o pipefail; XCORR_SKIP_BUILD=1 source scripts/setup-env >/dev/null; '
              'false; false | true; echo "survived $(set -o | grep -E "^(errexit|pipefail|nounset)" | tr -s " \\t" " ")"')
    r = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "survived" in r.stdout
    assert "errexit off" in r.stdout and "pipefail off" in r.stdout and "nounset off" in r.stdout


def test_bench_summary_reads_aggregates_only_files():
    """scripts/dev/bench-summary of a file written with --benchmark_report_aggregates_only (the probes'):
    each case's mean, with its cv from the stddev row; before, such a file printed an empty table."""
    import subprocess
    src = ROOT / "tests" / "fixtures" / "bench-aggregates-only-d5197a9.json"  # a probe (revision fbc44b2, notes/probes.md)
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "dev" / "bench-summary"), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = [l.split() for l in r.stdout.splitlines()[2:]]
    data = json.loads(src.read_text())  # json.load(open(src)) left the file open (a ResourceWarning)
    means = {b["run_name"]: b for b in data["benchmarks"] if b.get("aggregate_name") == "mean"}
    assert len(rows) == len(means) == 8
    one = next(row for row in rows if row[0] == "fft-fused/n-to-m/hL:256/wL:256/hR:256/wR:256/nL:32/nR:32")
    mean = means[next(n for n in means if n.startswith(one[0] + "/"))]
    assert float(one[1]) == pytest.approx(mean["real_time"] / 1e3, abs=1e-3) and one[2] == "ms"
    assert float(one[3].rstrip("%")) > 0


def test_comparison_figure_draws_a_peer_beside_the_fft_series_not_among_the_direct_kernels(tmp_path, monkeypatch):
    """torch-fft, a peer computing by FFT, belongs in the right panel (best definition-
    based vs FFT), in its colour of every figure, and not in the left one (definition-based)."""
    rows = []
    for size in (64, 128):
        for series, group, variant, t in (("split-row", "paper", "split-row", 50.0),
                                          ("register-tiled (new)", "new", "register-tiled", 20.0),
                                          ("fft", "fft", "fft", 15.0),
                                          ("torch-fft (PyTorch FFT)", "peer", "torch-fft", 120.0)):
            rows.append(dict(shape_panel="one-to-one", series=series, group=group, variant=variant, size=size,
                             time_us=t * size / 64, tuned=False))
    pts = pd.DataFrame(rows)
    exp = type("Exp", (), dict(name="figx", metric="time", paper="Fig. X", title="t", xlabel="N",
                               series=[type("S", (), dict(label=r))() for r in
                                       ("split-row", "register-tiled (new)", "fft", "torch-fft (PyTorch FFT)")]))()
    drawn = {}
    monkeypatch.setattr(plot, "save", lambda fig, out_dir, name: drawn.setdefault(name, fig) and [])
    plot.plot_comparison(exp, pts, "GPU", tmp_path)
    left, right = drawn["figx"].axes[:2]
    left_labels = [ln.get_label() for ln in left.get_lines()]
    right_lines = {ln.get_label(): ln for ln in right.get_lines()}
    assert "torch-fft (PyTorch FFT)" not in left_labels and "split-row" in left_labels
    assert "torch-fft (PyTorch FFT)" in right_lines and "fft" in right_lines
    assert right_lines["torch-fft (PyTorch FFT)"].get_color() == plot.VARIANT_COLORS["torch-fft"]
    assert right_lines["fft"].get_color() == plot.VARIANT_COLORS["fft"]


def test_a_series_added_after_the_run_makes_a_complete_experiment_pending(fake_results, tmp_path):
    """The runner marked fig17 complete; then the definition gained a series (the FFT comparison added
    torch-fft to fig17 after the H100 had measured it). Its cases are pending, and every page
    must say so: the recorded "complete" described the old definition."""
    from xcsuite.results import progress

    d = copy_results(fake_results, tmp_path / "fake-gpu-9000")
    assert progress(d)["fig17"].note() == ""
    data = json.loads((d / "fig17.json").read_text())
    dropped = [k for k in data["cases"] if k.startswith("split-row|")]  # as if split-row were added later
    assert dropped
    data["cases"] = {k: v for k, v in data["cases"].items() if k not in dropped}
    planned = data["xcorr_meta"]["cases_planned"] = len(data["cases"])  # the count of the run
    (d / "fig17.json").write_text(json.dumps(data))
    assert data["xcorr_meta"]["complete"] is True
    assert progress(d)["fig17"].note() == f"incomplete: {planned} of {planned + len(dropped)} cases"


def test_a_stopped_remeasure_is_named_so_not_counted_as_missing_cases():
    """A file whose every case has a result but whose last run stopped (complete false: a
    --remeasure cut short by a time limit) says so, instead of 'incomplete: 1385 of 1385 cases'."""
    from xcsuite.results import Progress

    assert Progress("table1", True, 1385, 1385, None).note() == ""
    assert Progress("table1", False, 12, 1385, None).note() == "incomplete: 12 of 1385 cases"
    assert Progress("table1", False, 12, None, None).note() == "incomplete: 12 of ? cases"
    assert Progress("table1", False, 1385, 1385, None).note() == \
        "incomplete: its last run stopped (1385 of 1385 cases recorded)"
