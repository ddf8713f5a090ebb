"""The one-dimensional signal experiments (signals_seed004, signals_matched,
signals_ambient) in the suite (CPU only): the shapes exactly as the issue gives them (counts,
lengths, windows), every series able to run its cases (form and window declared), the caps, the
device-time estimate their docstrings state, and the whole path (run, resume, aggregate, figure)
with tests/fake_xcorr.py."""
import importlib
import json
import random
import re
import subprocess

import pytest
from conftest import BUILD
from fake_xcorr import PEERS
from suite_helpers import log_lines, quick_suite_env, suite_registry

import experiments as suite
from experiments import _signals as sig
from xcsuite.spec import Experiment, Series, expand, overlap_total, supports_window
from xcsuite.cli import plot
from xcsuite.cli import run_experiments as rx
from xcsuite.cost import call_seconds, case_seconds
from xcsuite.summary import aggregate_dir, paper_experiments, paper_rows

REGISTRY = suite_registry()
WITH_PEERS = REGISTRY + PEERS  # the runner's registry: the build's and the peers' (peerbench list)
NAMES = ("signals_seed004", "signals_matched", "signals_ambient")
HANKEL = {"tensor-hankel", "tensor-hankel-tf32"}  # built for signals: in all three (their cap is 3e12)
PEER_NAMES = {p["name"] for p in PEERS}


def doc_of(name):
    return " ".join(importlib.import_module(f"experiments.{name}").__doc__.split())  # one line: no wrapping


def cases_of(name, registry=WITH_PEERS):
    return expand(suite.load(name), registry)


def test_overlap_total_in_closed_form_is_the_per_shift_sum():
    def brute(s0, s1, m, n):
        return sum(min(n, m - s) - max(0, -s) for s in range(max(s0, 1 - n), min(s1, m - 1) + 1))

    rng = random.Random(22)
    for _ in range(20000):
        m, n = rng.randint(1, 24), rng.randint(1, 24)
        s0 = rng.randint(-30, 30)
        s1 = rng.randint(s0 - 3, 40)
        assert overlap_total(s0, s1, m, n) == brute(s0, s1, m, n), (s0, s1, m, n)
    assert overlap_total(0, 8_640_000 - 600, 8_640_000, 600) == 600 * (8_640_000 - 599)  # valid: whole overlaps
    assert overlap_total(-2400, 2400, 144_000, 144_000) == 4801 * 144_000 - 2400 * 2401


def test_signal_experiments_are_listed_and_left_out_of_the_paper_pages(capsys):
    names = suite.names()
    assert [n for n in names if n in NAMES] == list(NAMES) and set(NAMES) <= set(suite.ORDER)
    assert suite.SIGNAL_EXPERIMENTS == NAMES and set(NAMES) <= set(suite.NOT_PAPER_EXPERIMENTS)
    assert rx.main(["--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert set(NAMES) <= set(listed)
    for n in NAMES:
        e = suite.load(n)
        assert e.metric == "time_with_finish" and e.plot == "signal_bars" and e.plot in plot.WINDOW_PLOTS


def test_seed004_is_seed_004s_case_exactly():
    e = suite.load("signals_seed004")
    valid, full = e.shapes
    assert (valid.form, valid.hL, valid.wL, valid.hR, valid.wR, valid.nL, valid.nR) == (
        "one-to-many", 1, 4_320_000 + 255, 1, 256, 1, 16)
    assert valid.window == "valid" and valid.out_shape == (1, 4_320_000) and valid.shifts() == (0, 0, 0, 4_319_999)
    assert valid.fmas == 16 * 256 * 4_320_000 and valid.normalize == "none"
    # the full-output companion: the same channel and templates, only for the full-output variants
    assert full.dims()[:7] == valid.dims()[:7] and full.window == "full" and full.out_shape == (1, 4_320_000 + 510)
    # seed 004's rate, in the docstring, the title and the figure's reference line
    assert e.reference_tflops == 53.56 and "53.56 TFLOP/s" in e.title and "A100" in e.title and "TF32" in e.title
    assert "53.56 TFLOP/s (A100, TF32)" in doc_of("signals_seed004")


def test_matched_filtering_is_the_issues_shape():
    e = suite.load("signals_matched")
    assert [s.normalize for s in e.shapes] == ["none", "zncc"]
    for s in e.shapes:
        assert (s.form, s.hL, s.wL, s.hR, s.wR, s.nL, s.nR) == ("one-to-many", 1, 8_640_000, 1, 600, 1, 300)
        assert s.window == "valid" and s.out_shape == (1, 8_640_000 - 599) and s.fmas == 300 * 600 * (8_640_000 - 599)
    ex = cases_of("signals_matched")
    raw = {c.variant for c in ex.cases if c.shape.normalize == "none"}
    zncc = {c.variant for c in ex.cases if c.shape.normalize == "zncc"}
    # torch-fft computes ZNCC (peerbench's normalize=); signal-tiled and tensor-hankel under the harness's Normalizer
    assert raw == zncc == {"fft", "fft+plan", "fft-segmented", "torch-fft", "signal-tiled"} | HANKEL


def test_ambient_noise_is_the_issues_shape():
    (s,) = suite.load("signals_ambient").shapes
    assert (s.form, s.hL, s.wL, s.hR, s.wR, s.nL, s.nR) == ("n-to-m", 1, 144_000, 1, 144_000, 64, 64)
    assert s.window == "shifts=0:0,-2400:2400" and s.shifts() == (0, 0, -2400, 2400) and s.out_shape == (1, 4801)
    assert s.pairs == 4096 and s.half_width == 2400 and s.window_line() == "shifts=0:0,-2400:2400"
    assert s.fmas == 4096 * (4801 * 144_000 - 2400 * 2401)


def test_every_series_runs_its_cases_with_a_declared_form_and_window():
    info = {v["name"]: v for v in WITH_PEERS}
    expected = {
        "signals_seed004": {"register-tiled", "signal-tiled", "tensor-wgmma", "tensor-tiled-tf32", "tensor-tiled",
                            "overlap-wise", "fft", "fft+plan", "fft-segmented", "torch-conv2d", "torch-conv2d-tf32", "torch-fft",
                            "cupy-correlate2d"} | HANKEL,
        "signals_matched": {"fft", "fft+plan", "fft-segmented", "torch-fft", "signal-tiled"} | HANKEL,
        "signals_ambient": {"fft", "fft+plan", "fft-segmented", "torch-fft", "signal-tiled"} | HANKEL,
    }
    for name in NAMES:
        exp = suite.load(name)
        ex = expand(exp, WITH_PEERS)
        assert not ex.warnings, ex.warnings  # every series has a case
        assert {m.series.label for m in ex.members} == {s.label for s in exp.series}
        assert {c.variant for c in ex.cases} == expected[name]
        for c in ex.cases:
            v = info[c.variant]
            assert c.shape.form in v["forms"] and supports_window(v.get("windows", ["full"]), c.shape), c.line()
            assert c.shape.hL == c.shape.hR == 1, c.line()  # signals: 1 x n matrices
            assert dict(c.params).keys() == v["params"].keys()
        assert not {c.variant for c in ex.cases} & set(sig.NEVER)
    # seed 004: the full-output companion holds the full-output-only tensor-core variants and fft
    seed = cases_of("signals_seed004")
    assert {c.variant for c in seed.cases if c.shape.window == "full"} == {"tensor-tiled-tf32", "tensor-tiled", "fft"}
    assert {c.variant for c in seed.cases if c.shape.window == "valid"} == expected["signals_seed004"] - {
        "tensor-tiled-tf32", "tensor-tiled"}


@pytest.mark.skipif(not (BUILD / "xcorr").exists(), reason=f"no build at {BUILD}")
def test_the_builds_registry_gives_the_same_cases():
    """The tests' registry stands for the build (tests/build_registry.py): against `xcorr list --json`
    itself (and the peers as the fake lists them) the signal experiments expand to the same cases,
    those of variants a subset build (-Dvariants=...) left out aside."""
    r = subprocess.run([str(BUILD / "xcorr"), "list", "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    built = json.loads(r.stdout) + PEERS
    names = {v["name"] for v in built}
    for name in NAMES:
        ours = sorted(c.key for c in cases_of(name).cases if c.variant in names)
        assert sorted(c.key for c in cases_of(name, built).cases) == ours


def test_direct_cases_are_within_their_caps_and_the_rest_are_left_out_with_a_reason():
    for name in NAMES:
        for c in cases_of(name).cases:
            if c.variant in sig.CAPS:
                assert c.fmas <= sig.CAPS[c.variant], c.line()
    # matched filtering and ambient noise are over every direct cap but those of the kernels built for
    # signals (signal-tiled, tensor-hankel): listing another direct series there would leave it without
    # a case; each docstring says why they are not listed
    for name in ("signals_matched", "signals_ambient"):
        exp = suite.load(name)
        assert all(c.fmas <= sig.HANKEL_MAX_FMAS for c in cases_of(name).cases if c.variant in HANKEL)
        probe = Experiment("probe", "t", "t", exp.shapes, [sig.series(v) for v in sig.CAPS if v not in HANKEL])
        ex = expand(probe, WITH_PEERS)
        assert {c.variant for c in ex.cases} == {"signal-tiled"}
        assert all("capped" in why or "does not" in why for _, _, why in ex.unavailable)
        doc = doc_of(name)
        assert "over its cap" in doc and "3e11" in doc and "fft-fused" in doc and "small-direct" in doc
    # fft-fused's and small-direct's size caps see a signal's length (max_size is the largest extent)
    probe = Experiment("probe", "t", "t", suite.load("signals_seed004").shapes,
                       [sig.series("fft"), Series("f", "fft-fused", max_size=512), Series("s", "small-direct", max_size=96)])
    assert {c.variant for c in expand(probe, WITH_PEERS).cases} == {"fft"}
    doc = doc_of("signals_seed004")
    assert "fft-fused" in doc and "small-direct" in doc and "3e11" in doc and "2e10" in doc


def test_device_time_is_within_the_budget_and_as_each_docstring_says():
    fam = {v["name"]: v.get("family") for v in WITH_PEERS}
    protocol = rx.PROTOCOL
    total = 0.0
    for name in NAMES:
        ex = cases_of(name)
        t = sum(case_seconds(c, protocol["repetitions"], protocol["min_time_s"], fam.get(c.variant)) for c in ex.cases)
        total += t
        doc = doc_of(name)
        m = re.search(r"about (\d+) s for (\d+) cases", doc)
        assert m, f"{name}: the docstring states its device time as 'about N s for K cases'"
        assert int(m.group(2)) == len(ex.cases) and abs(int(m.group(1)) - t) <= 0.15 * t + 2, (name, t, m.group(0))
        # the model's time per call: the FFTs milliseconds, a direct case at most a fraction of a second
        assert max(call_seconds(c, fam.get(c.variant)) for c in ex.cases) < 0.5
    assert total <= sig.DEVICE_BUDGET_S == 360.0


@pytest.fixture
def env(tmp_path, monkeypatch):
    return quick_suite_env(tmp_path, monkeypatch)


def test_signal_experiments_run_resume_aggregate_and_plot(env, monkeypatch):
    run, gpu, log, tmp = env
    assert run(",".join(NAMES)) == 0
    calls = len(log_lines(log)), len(log_lines(tmp / "peer.log"))
    lines = [l for call in log_lines(log) for l in call]
    assert all(" hL=1 " in l and " hR=1 " in l for l in lines)
    assert any(" wL=4320255 " in l and " window=valid" in l for l in lines)
    assert any(" wL=8640000 " in l and " normalize=zncc" in l for l in lines)
    assert any(" shifts=0:0,-2400:2400" in l and " nL=64 nR=64 " in l for l in lines)
    assert any(l.startswith("variant=tensor-tiled-tf32 ") and "window=" not in l for l in lines)  # the full output
    peer_lines = [l for call in log_lines(tmp / "peer.log") for l in call]
    assert {l.split()[0] for l in peer_lines} == {"variant=torch-conv2d", "variant=torch-conv2d-tf32", "variant=torch-fft",
                                                  "variant=cupy-correlate2d"}
    assert {l.split()[0] for l in peer_lines if "normalize=zncc" in l} == {"variant=torch-fft"}
    for name in NAMES:
        data = json.loads((gpu / f"{name}.json").read_text())
        assert data["xcorr_meta"]["complete"] and all(c["status"] == "ok" for c in data["cases"].values()), name
        assert len(data["cases"]) == len(cases_of(name).cases)
    assert run(",".join(NAMES)) == 0  # every case found again: resumed, nothing runs
    assert (len(log_lines(log)), len(log_lines(tmp / "peer.log"))) == calls
    df = aggregate_dir(gpu)
    amb = df[df["experiment"] == "signals_ambient"]
    assert set(amb["shifts"]) == {"0:0,-2400:2400"} and (amb["fmas"] == 4096 * (4801 * 144_000 - 2400 * 2401)).all()
    seed = df[df["experiment"] == "signals_seed004"]
    assert set(seed["shifts"]) == {"0:0,0:4319999", ""}
    assert paper_rows(df).empty and paper_experiments(gpu) == []  # claims and anchors read none of them

    seen = {}
    save = plot.save

    def recording_save(fig, out_dir, name):
        texts = [fig._suptitle.get_text() if fig._suptitle else ""]
        texts += [t for ax in fig.axes for t in (ax.get_xlabel(), ax.get_title())]
        texts += [t.get_text() for ax in fig.axes for t in ax.texts]
        seen[name] = " ".join(texts)
        return save(fig, out_dir, name)

    monkeypatch.setattr(plot, "save", recording_save)
    monkeypatch.setenv("XCORR_PLOT_STRICT", "1")
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png")
    files = plot.plot_gpu(gpu, only=list(NAMES), plots_root=tmp / "plots")
    assert sorted(f.name for f in files) == sorted(f"{n}.png" for n in NAMES)
    assert all(f.stat().st_size > 20_000 for f in files)
    assert "53.56 TFLOP/s (A100, TF32)" in " ".join(seen["signals_seed004"].split())
    assert "seed 004: 53.56 TFLOP/s (A100, TF32): 661 µs" in seen["signals_seed004"]  # the reference line
    for name in NAMES:
        assert re.search(r"µs, [0-9.e+]+ TFLOP/s", seen[name]) or re.search(r"ms, [0-9.e+]+ TFLOP/s", seen[name])
    assert "ZNCC: time per call" in seen["signals_matched"] and "raw correlation: time per call" in seen["signals_matched"]
    assert "seed 004" not in seen["signals_ambient"]
