"""Output windows in the experiment suite (CPU only): Shape.window parsed and resolved as
lib/core.cpp does (checked against scipy.signal.correlate2d), its multiply-adds against a
brute-force count, the case line and key of a windowed case against the benchmark's name, the
registry's declared windows at expansion, the window experiments' definitions, and the whole path
(run, resume, aggregate, figures, window table) with tests/fake_xcorr.py."""
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import signal
from fake_xcorr import PEERS
from suite_helpers import log_lines, quick_suite_env, suite_registry
from xcorr_np import crop

import experiments as suite
from xcsuite.spec import (Case, Experiment, Series, Shape, case_key, expand, full_shifts, supports_window,
                               window_is)
from xcsuite import resultfile as rf
from xcsuite.benchjson import entry_key, parse_bench_name
from xcsuite.cli import plot, table
from xcsuite.cost import call_seconds, case_seconds, peer_case_seconds
from xcsuite.summary import aggregate_dir, load_summary

REGISTRY = suite_registry()
WITH_PEERS = REGISTRY + PEERS  # the runner's registry: the build's and the peers' (peerbench list)

# (hL, wL, hR, wR) as tests/test_windows.py: valid needs one matrix inside the other
VALID_SHAPES = [(9, 13, 4, 11), (4, 11, 9, 13), (7, 5, 7, 2), (3, 3, 8, 3), (1, 1, 5, 6), (6, 6, 6, 6)]
SAME_SHAPES = [(8, 6, 4, 2), (7, 9, 4, 6), (6, 8, 5, 3), (4, 6, 9, 7), (3, 5, 8, 10), (5, 4, 6, 9), (1, 1, 2, 2)]


def scipy_pair(hL, wL, hR, wR):
    rng = np.random.default_rng(hL * 1000 + wL * 100 + hR * 10 + wR)
    left, right = rng.standard_normal((hL, wL)), rng.standard_normal((hR, wR))
    return left, right, signal.correlate2d(left, right, mode="full")


@pytest.mark.parametrize("mode,sizes", [("valid", s) for s in VALID_SHAPES] + [("same", s) for s in SAME_SHAPES],
                         ids=lambda x: "%dx%d*%dx%d" % x if isinstance(x, tuple) else x)
def test_shifts_are_scipys_window(mode, sizes):
    hL, wL, hR, wR = sizes
    left, right, full = scipy_pair(*sizes)
    want = signal.correlate2d(left, right, mode=mode)
    shape = Shape("one-to-one", *sizes, window=mode)
    assert shape.out_shape == want.shape
    np.testing.assert_allclose(crop(full, hR, wR, *shape.shifts()), want, rtol=1e-12, atol=1e-12)


def test_full_and_max_shift_and_general_rectangles():
    left, right, full = scipy_pair(5, 7, 3, 4)
    s = Shape("one-to-one", 5, 7, 3, 4)
    assert s.shifts() == (-2, 4, -3, 6) == full_shifts(5, 7, 3, 4) and s.out_shape == full.shape and s.full
    m = Shape("one-to-one", 5, 7, 3, 4, window="max_shift=3,1")
    assert m.shifts() == (-3, 3, -1, 1) and m.half_width == 3
    assert Shape("one-to-one", 5, 7, 3, 4, window="max_shift=2").shifts() == (-2, 2, -2, 2)
    g = Shape("one-to-one", 5, 7, 3, 4, window="shifts=-9:-1,2:30")  # partly beyond the full range
    assert g.shifts() == (-9, -1, 2, 30) and g.shifts_text == "-9:-1,2:30" and not g.full
    assert crop(full, 3, 4, *g.shifts())[:6].sum() == 0  # dy < -2: no overlap, zeros
    # the full output's rectangle, however named, is the full case
    assert Shape.one_to_one(8, window="max_shift=7").full and Shape.one_to_one(8, window="max_shift=7").shifts_text == ""
    assert Shape("one-to-one", 8, 8, 1, 1, window="valid").full  # valid with a 1 x 1 right
    assert not Shape.one_to_one(8, window="max_shift=8").full  # beyond the full range: a larger window


@pytest.mark.parametrize("window,why", [
    ("max_shift=-1", "not an integer"), ("max_shift=a", "not an integer"), ("max_shift=3,", "not an integer"),
    ("max_shift= 3", "not an integer"), ("max_shift=+3", "not an integer"), ("shifts=1:0,0:0", "empty window"),
    ("shifts=1:2", "DY0:DY1,DX0:DX1"), ("shifts=0:1,2:3,4", "DY0:DY1,DX0:DX1"), ("window=valid", "unknown window"),
    ("Valid", "unknown window"), ("max_shift=1073741824", "not an integer"), ("shifts=0:40000,0:40000", "2^30"),
])
def test_a_bad_window_is_refused_at_construction(window, why):
    with pytest.raises(ValueError, match=why.replace("^", r"\^")):
        Shape.one_to_one(16, window=window)


def test_valid_needs_one_matrix_inside_the_other():
    with pytest.raises(ValueError, match="no valid window"):
        Shape("one-to-one", 4, 11, 9, 3, window="valid")
    Shape("one-to-one", 4, 11, 9, 11, window="valid")  # the right contains the left: negative shifts
    assert Shape("one-to-one", 4, 11, 9, 11, window="valid").shifts() == (-5, 0, 0, 0)


def brute_force_fmas(hL, wL, hR, wR, window):
    dy0, dy1, dx0, dx1 = window
    n = 0
    for dy in range(dy0, dy1 + 1):
        rows = sum(1 for r in range(hR) if 0 <= r + dy < hL)
        for dx in range(dx0, dx1 + 1):
            n += rows * sum(1 for c in range(wR) if 0 <= c + dx < wL)
    return n


@pytest.mark.parametrize("sizes,window", [
    ((9, 13, 4, 11), "full"), ((9, 13, 4, 11), "valid"), ((4, 6, 9, 7), "same"), ((8, 8, 8, 8), "max_shift=3"),
    ((8, 8, 8, 8), "max_shift=20,1"), ((5, 7, 3, 4), "shifts=-9:-1,2:30"), ((5, 7, 3, 4), "shifts=10:12,0:0"),
    ((1, 9, 1, 4), "max_shift=0,2"),
])
def test_fmas_are_the_sum_of_the_overlap_areas(sizes, window):
    shape = Shape("one-to-one", *sizes, window=window)
    assert shape.fmas == brute_force_fmas(*sizes, shape.shifts())
    stack = Shape("n-to-m", *sizes, 2, 3, window=window)
    assert stack.fmas == 6 * shape.fmas


def test_declared_windows_follow_core_cpps_window_is():
    same = Shape.one_to_one(8, window="same")
    assert window_is("same", same) and window_is("shifts", same) and not window_is("max-shift", same)
    sym = Shape.one_to_one(8, window="shifts=-2:2,-5:5")
    assert window_is("max-shift", sym) and not window_is("same", sym)
    one = Shape("one-to-one", 8, 8, 1, 1, window="valid")
    assert supports_window(["full"], one)  # that valid is the full output
    assert not supports_window(["full", "valid"], Shape.one_to_one(8, window="max_shift=2"))
    assert supports_window(["full", "max-shift"], Shape.one_to_one(8, window="max_shift=2"))


def test_case_line_key_and_benchmark_name_agree():
    shape = Shape("n-to-mn", 64, 64, 32, 32, 3, 6, window="valid")
    case = Case("register-tiled", shape, (("rows", "4"), ("waves", "auto")))
    assert case.line() == ("variant=register-tiled form=n-to-mn hL=64 wL=64 hR=32 wR=32 nL=3 nR=6 window=valid "
                           "rows=4 waves=auto")
    name = "register-tiled/n-to-mn/hL:64/wL:64/hR:32/wR:32/nL:3/nR:6/shifts:0:32,0:32/rows:4/waves:auto"
    assert parse_bench_name(name + "/min_time:0.100/repeats:10/manual_time") == (
        "register-tiled", ("n-to-mn", 64, 64, 32, 32, 3, 6), "0:32,0:32", {"rows": "4", "waves": "auto"})
    assert entry_key({"run_name": name}) == case.key == (
        "register-tiled|n-to-mn|64x64|32x32|3|6|shifts:0:32,0:32|rows=4,waves=auto|warm")
    ident = rf.identity_from_line(case.line())
    assert ident["shifts"] == "0:32,0:32" and "window" not in ident["params"]
    rec = {**ident, "cold": False}
    assert rf.key_of(rec) == case.key and rf.key_of({**rf.identity_from_line(rf.line_of(rec)), "cold": False}) == case.key
    assert Case("fft", Shape.one_to_one(16, window="max_shift=4"), ()).line().endswith("nR=1 max_shift=4")
    # the full output's rectangle: the full case's line and key, unchanged
    full = Case("fft", Shape.one_to_one(16), (("launch", "graph"),))
    named = Case("fft", Shape.one_to_one(16, window="max_shift=15"), (("launch", "graph"),))
    assert named.line() == full.line() and named.key == full.key == case_key(
        "fft", ("one-to-one", 16, 16, 16, 16, 1, 1), {"launch": "graph"})


def test_a_windowed_record_round_trips_with_its_shift_counters():
    line = "variant=fft form=one-to-one hL=8 wL=8 hR=8 wR=8 nL=1 nR=1 max_shift=2 launch=graph"
    ident = rf.identity_from_line(line)
    name = "fft/one-to-one/hL:8/wL:8/hR:8/wR:8/nL:1/nR:1/shifts:-2:2,-2:2/launch:graph"
    entries = [{"name": name, "run_name": name, "run_type": "iteration", "repetition_index": i, "real_time": 1.5 + i,
                "time_unit": "us", "fmas": 1600.0, "finish_time": 1e-6, "dy0": -2.0, "dy1": 2.0, "dx0": -2.0,
                "dx1": 2.0, **{k: 8.0 for k in ("hL", "wL", "hR", "wR")}, "nL": 1.0, "nR": 1.0, "cold": 0.0}
               for i in range(3)]
    rec = rf.encode(ident, False, {"status": "ok"}, entries)
    assert "dy0" not in rec["same"]  # derived from the case, not stored
    assert rf.entries_of(rec) == [{**e, "xcorr_case": rf.key_of(rec)} for e in entries]
    assert entry_key(entries[0]) == rf.key_of(rec)


def test_expansion_leaves_out_an_undeclared_window_with_a_reason():
    exp = Experiment("t", "t", "t", [Shape.one_to_one(32, window="same"), Shape.one_to_one(32)],
                     [Series("a", "split-row"), Series("b", "fft-fused"), Series("c", "register-tiled")])
    ex = expand(exp, REGISTRY)
    by = {(c.variant, c.shape.window) for c in ex.cases}
    assert ("split-row", "full") in by and ("split-row", "same") not in by  # declares the full output only
    assert ("fft-fused", "same") in by and ("register-tiled", "same") in by
    assert any("split-row does not compute the same window" in r for _, _, r in ex.unavailable)
    reg = [{**v, "windows": ["full"]} if v["name"] == "fft-fused" else v for v in REGISTRY]
    reg = [{k: x for k, x in v.items() if k != "windows"} if v["name"] == "register-tiled" else v for v in reg]
    ex = expand(exp, reg)  # no "windows" (a registry of an older build): the full output only
    assert {(c.variant, c.shape.window) for c in ex.cases} == {("split-row", "full"), ("fft-fused", "full"),
                                                                ("register-tiled", "full")}


def test_window_experiments_are_defined_as_issue_20_asks():
    names = suite.names()
    for n in ("windows", "piv", "autocorr", "window_table"):
        assert n in names and suite.load(n).metric == "time_with_finish"
    piv = suite.load("piv").shapes
    assert [(s.out_shape, s.pairs, s.form, s.window) for s in piv] == [
        ((33, 33), 3969, "n-to-mn", "valid"), ((17, 17), 8192, "n-to-mn", "max_shift=8")]  # PIV's valid window, the reductions' PIV shape
    assert "block-per-pair" in {c.variant for c in expand(suite.load("piv"), WITH_PEERS).cases}
    w = expand(suite.load("windows"), WITH_PEERS)
    assert {c.variant for c in w.cases} == {"register-tiled", "small-window", "block-per-pair", "small-direct", "tensor-wgmma",
                                            "overlap-wise", "fft",
                                            "fft-fused", "torch-conv2d", "torch-fft", "cupy-correlate2d"}
    sweep = sorted(s.half_width for s in suite.load("windows").shapes if s.hL == 256)
    assert sweep == [1, 2, 4, 8, 16, 32, 64, 128, 255]
    assert max(c.fmas for c in w.cases if c.variant == "register-tiled") <= 3e11
    auto = suite.load("autocorr").shapes
    assert [s.half_width for s in auto] == [16, 64, 128] and all(s.hL == s.hR == 2048 for s in auto)
    t = expand(suite.load("window_table"), WITH_PEERS)
    assert {(c.shape.hL, c.shape.hR) for c in t.cases if c.shape.window == "valid"} == {
        (n, n // 4) for n in (64, 128, 256, 512, 1024, 2048)}
    assert call_seconds(next(c for c in t.cases if c.variant == "torch-fft")) < 0.01  # an FFT, not direct


def test_cupys_cap_counts_the_full_output_it_crops_a_max_shift_window_from():
    # CuPy's correlate2d computes SciPy's full output and the peer crops it (a window of no SciPy
    # mode): a 2048 x 2048 pair within +-1 is 1.76e13 multiply-adds of its time (~38 s on an H100),
    # not the window's 3.8e7. Counted as the window, such cases entered the suite and spent minutes
    # in CuPy's one-call pilot before its time cap refused them.
    big, small = Shape.one_to_one(2048, window="max_shift=1"), Shape.one_to_one(256, window="max_shift=1")
    assert big.fmas < 1e8 and big.work_fmas("cupy-correlate2d") == 2048.0 ** 4
    assert big.work_fmas("register-tiled") == big.fmas  # our direct kernels do the window's work
    valid = Shape("one-to-many", 256, 256, 31, 31, 1, 4, window="valid")  # a SciPy mode: computed as such
    assert valid.scipy_mode and valid.work_fmas("cupy-correlate2d") == valid.fmas
    exp = Experiment("t", "t", "t", [big, small, valid], [Series("cupy", "cupy-correlate2d", max_work_fmas=2e10)])
    ex = expand(exp, WITH_PEERS)
    assert {c.shape for c in ex.cases} == {small, valid}
    (reason,) = [r for _, sh, r in ex.unavailable if sh == big]
    assert "the full output it computes, then crops" in reason and "1.76e+13" in reason
    case = Case("cupy-correlate2d", big, ())
    assert call_seconds(case) > 10 and case.work_fmas > case.fmas  # the cost model counts what it does
    w = expand(suite.load("windows"), WITH_PEERS)  # CuPy stays on the 256 panel and the batch of 64s
    assert {c.shape.hL for c in w.cases if c.variant == "cupy-correlate2d"} == {64, 256}
    assert not [c for c in expand(suite.load("autocorr"), WITH_PEERS).cases if c.variant == "cupy-correlate2d"]


def test_overlap_wises_few_shifts_of_a_large_image_cost_a_whole_overlap_per_thread():
    # One thread per output: nine shifts of 2048 x 2048 are nine threads of 4.2e6 products each,
    # 0.128 s a call on an H100 (854e829) where the saturated rate alone says 3e-5 s. The model
    # counts the largest overlap at the serial rate; many outputs stay at the saturated rate.
    few = Case("overlap-wise", Shape.one_to_one(2048, window="max_shift=1"), ())
    assert 0.1 < call_seconds(few) < 0.15
    assert call_seconds(Case("register-tiled", few.shape, ())) < 1e-3  # its tiles split the overlap
    full = Case("overlap-wise", Shape.one_to_one(256), ())
    assert call_seconds(full) == pytest.approx(256.0 ** 4 / 1.3e12, rel=0.01)  # 2.2 ms measured


def test_cudnns_autotuning_grows_with_the_convolution_and_is_bounded():
    # cudnn.benchmark times each algorithm once on a new shape, the slow ones too. Measured on an
    # H100 (quick protocol): a 4096 x 4096 image against 64 x 64 (6.7e10 FMAs) 6.6 s,
    # 1024 x 1024 against 256 x 256 (3.9e10) 4.7 s, 256 x 256 within ±1 (5.9e5) 0.9 s; the H200's
    # full-protocol shapes ~20-25 s. A constant 25 s made the normalized group's estimate 8.4 min
    # for a run of 1.9 min and sent the peers first in the pool.
    def conv(shape):
        return Case("torch-conv2d", shape, ())

    big = conv(Shape("one-to-one", 4096, 4096, 64, 64, 1, 1, window="valid"))
    assert 4.5 < peer_case_seconds(big) < 10
    assert 0.3 < peer_case_seconds(conv(Shape.one_to_one(256, window="max_shift=1"))) < 1.5
    huge = conv(Shape("one-to-one", 4096, 4096, 1024, 1024, 1, 1, window="valid"))
    assert peer_case_seconds(huge) == pytest.approx(25.0)  # bounded: the largest the H200 took
    assert peer_case_seconds(Case("register-tiled", big.shape, ())) == 0.0  # ours have none
    assert case_seconds(big, 3, 0.01) > peer_case_seconds(big) + 3 * 0.01  # the case counts it and the protocol


def test_a_peers_float64_check_counts_its_sampled_overlaps():
    # Past 3e8 FMAs the peers' check sums up to 65536 sampled outputs' overlaps in float64 on the
    # GPU: torch-fft at 2048 x 2048 within ±64 (16641 outputs of 4.2e6 products) 2.8-3.2 s on an
    # H100, at ±16 (1089 outputs) 0.3 s, where a constant 3 s a case made the window group's peers
    # 0.14x of the model.
    wide = Case("torch-fft", Shape.one_to_one(2048, window="max_shift=64"), ())
    narrow = Case("torch-fft", Shape.one_to_one(2048, window="max_shift=16"), ())
    assert 2.0 < peer_case_seconds(wide) < 4.0 and 0.3 < peer_case_seconds(narrow) < 1.0
    small = Case("cupy-correlate2d", Shape.one_to_one(64, window="max_shift=4"), ())  # checked by scipy
    assert peer_case_seconds(small) == pytest.approx(0.5)
    frames = Case("npp-normlevel", Shape("one-to-many", 256, 256, 53, 54, 1, 1000, window="max_shift=16"), ())
    assert peer_case_seconds(frames) == pytest.approx(0.5 + 65536 * 53 * 54 / 2.5e10)  # samples capped


def test_crossover_is_where_the_best_direct_becomes_slower_than_the_best_fft():
    rows = [("register-tiled", "new", s, 2.0 * s) for s in (1, 2, 4, 8, 16)]
    rows += [("overlap-wise", "baseline", s, 50.0 * s) for s in (1, 2, 4, 8, 16)]
    rows += [("fft", "fft", s, 10.0) for s in (1, 2, 4, 8, 16)]
    rows += [("torch-conv2d", "peer", s, 0.1) for s in (1, 2, 4, 8, 16)]  # a peer never counts
    pts = pd.DataFrame(rows, columns=["variant", "group", "half_width", "total_us"])
    x, text = plot.crossover(pts, "total_us")
    assert x == pytest.approx(5.0) and "crossover S" in text  # 2S = 10 between S = 4 and 8, on log axes
    x, text = plot.crossover(pts[pts["variant"] != "fft"], "total_us")
    assert x is None and text == ""


@pytest.fixture
def env(tmp_path, monkeypatch):
    return quick_suite_env(tmp_path, monkeypatch)


def test_window_experiments_run_resume_aggregate_plot_and_table(env, monkeypatch):
    run, gpu, log, tmp = env
    assert run("piv,autocorr") == 0
    calls = len(log_lines(log)), len(log_lines(tmp / "peer.log"))
    lines = [l for call in log_lines(log) for l in call]
    assert any(" window=valid " in l for l in lines) and any(" max_shift=128 " in l for l in lines)
    peer_lines = [l for call in log_lines(tmp / "peer.log") for l in call]  # windowed peer cases: peerbench
    assert any(l.startswith("variant=torch-fft ") and l.endswith(" window=valid") for l in peer_lines)
    data = json.loads((gpu / "piv.json").read_text())
    assert data["xcorr_meta"]["complete"] and all(c["status"] == "ok" for c in data["cases"].values())
    assert all((c["shifts"], f"|shifts:{c['shifts']}|" in k) in {("0:32,0:32", True), ("-8:8,-8:8", True)}
               for k, c in data["cases"].items())
    assert {"torch-conv2d", "torch-fft", "cupy-correlate2d"} <= {c["variant"] for c in data["cases"].values()}
    assert {m["shape"]["window"] for m in data["members"]} == {"valid", "max_shift=8"}
    assert run("piv,autocorr") == 0  # every windowed case found again: resumed, nothing runs
    assert (len(log_lines(log)), len(log_lines(tmp / "peer.log"))) == calls
    df = aggregate_dir(gpu)
    assert list(df.columns)[-1] == "shifts" and set(df["shifts"]) >= {"0:32,0:32", "-16:16,-16:16"}
    piv = df[df["experiment"] == "piv"]
    valid = piv[piv["shifts"] == "0:32,0:32"]
    assert len(valid) and (valid["fmas"] == 3969 * 33 * 33 * 32 * 32).all()  # the window's multiply-adds
    pm8 = piv[piv["shifts"] == "-8:8,-8:8"]  # overlaps of 32 - |d| rows and columns: (sum over d)^2 per pair
    assert len(pm8) and (pm8["fmas"] == 8192 * sum(32 - abs(d) for d in range(-8, 9)) ** 2).all()
    fft = valid[valid["variant"] == "fft"].iloc[0]
    assert fft["finish_time_us"] > 0
    assert (load_summary(gpu)["shifts"] != "").all()
    monkeypatch.setenv("XCORR_PLOT_STRICT", "1")
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png")
    with pytest.warns(UserWarning, match=r"^windows: no results for windows \(not measured yet\)$"):
        files = plot.plot_gpu(gpu, only=["piv", "autocorr", "windows"], plots_root=tmp / "plots")
    assert sorted(f.name for f in files) == ["autocorr.png", "piv.png"]  # windows: not measured, no figure
    again = plot.plot_gpu(gpu, only=["piv"], plots_root=tmp / "again")
    assert again[0].read_bytes() == (tmp / "plots" / gpu.name / "piv.png").read_bytes()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert table.make_window_table(gpu, plots_root=tmp / "plots") is None  # not measured yet
    assert not (gpu / "window_table.md").exists()


def test_window_sweep_and_table_from_the_fake_bench(env, monkeypatch):
    run, gpu, log, tmp = env
    assert run("windows,window_table") == 0
    monkeypatch.setenv("XCORR_PLOT_STRICT", "1")
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png")
    files = plot.plot_gpu(gpu, only=["windows"], plots_root=tmp / "plots")
    assert [f.name for f in files] == ["windows.png"] and files[0].stat().st_size > 20_000
    t = table.make_window_table(gpu, plots_root=tmp / "plots")
    assert len(t) == 36 and t["best_variant"].notna().all()
    assert not t["best_variant"].isin(["torch-conv2d", "torch-fft", "cupy-correlate2d"]).any()  # peers: beside
    md = (gpu / "window_table.md").read_text()
    assert "| 2048 |" in md and "peer: " in md and (tmp / "plots" / gpu.name / "window_table.png").exists()
    # max_shift=64 at 64 is a larger window than the full output (a ring of zeros): a case of its own
    row = t[t["size"] == 64].set_index("column")
    assert row.loc["±64", "shifts"] == "-64:64,-64:64" and row.loc["full", "shifts"] == ""
    # max_shift=63 at 64, the sweep's last point, is the full output: its case has the full key
    members = json.loads((gpu / "windows.json").read_text())["members"]
    last = [m for m in members if m["shape"]["hL"] == 64 and m["shape"]["window"] == "max_shift=63"]
    assert last and all("|shifts:" not in k for m in last for k in m["keys"])


def test_paper_pages_read_only_the_papers_full_outputs():
    """claims.md and anchors.md set our results beside the paper's: a windowed case (another
    problem) or a row of a window experiment must never stand for a paper case."""
    import pandas as pd
    from xcsuite.summary import paper_rows
    df = pd.DataFrame({"experiment": ["fig17", "fig17", "windows", "piv", "table1"],
                       "shifts": ["", "-4:4,-4:4", "", "0:32,0:32", ""],
                       "time_us": [1.0, 2.0, 3.0, 4.0, 5.0]})
    assert paper_rows(df)["time_us"].tolist() == [1.0, 5.0]
