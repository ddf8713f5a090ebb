"""The normalized experiments (zncc_frames, zncc_match, zncc_autocorr) in the suite
(CPU only): a Shape's normalization in the case line, the key and the benchmark name
(/norm:MODE), the definitions as the issue asks, the torch peers beside the kernels (cupy left
out: it computes no normalization), and the whole path (run, resume,
aggregate, figures) with tests/fake_xcorr.py taking normalize=."""
import json

import pytest
from fake_xcorr import PEERS
from suite_helpers import log_lines, quick_suite_env, suite_registry

import experiments as suite
from xcsuite.spec import Case, Experiment, Series, Shape, expand
from xcsuite import resultfile as rf
from xcsuite.benchjson import entry_key, parse_bench_name
from xcsuite.cli import plot
from xcsuite.summary import aggregate_dir, paper_experiments, paper_rows

REGISTRY = suite_registry()
WITH_PEERS = REGISTRY + PEERS


def test_normalization_is_in_the_case_line_key_and_name():
    shape = Shape("n-to-m", 256, 256, 23, 21, 1000, 1, window="max_shift=16", normalize="zncc")
    case = Case("register-tiled", shape, (("rows", "4"), ("waves", "auto")))
    assert case.line() == ("variant=register-tiled form=n-to-m hL=256 wL=256 hR=23 wR=21 nL=1000 nR=1 max_shift=16 "
                           "normalize=zncc rows=4 waves=auto")
    name = ("register-tiled/n-to-m/hL:256/wL:256/hR:23/wR:21/nL:1000/nR:1/shifts:-16:16,-16:16/norm:zncc"
            "/rows:4/waves:auto")  # bench_main.cpp's name: /norm: after the shifts, before the parameters
    assert parse_bench_name(name + "/min_time:0.100/repeats:10/manual_time")[3] == {
        "normalize": "zncc", "rows": "4", "waves": "auto"}
    assert entry_key({"run_name": name}) == case.key == (
        "register-tiled|n-to-m|256x256|23x21|1000|1|shifts:-16:16,-16:16|normalize=zncc,rows=4,waves=auto|warm")
    ident = rf.identity_from_line(case.line())
    assert rf.key_of({**ident, "cold": False}) == case.key
    raw = Case("register-tiled", Shape("n-to-m", 256, 256, 23, 21, 1000, 1, window="max_shift=16"), case.params)
    assert "normalize" not in raw.line() and raw.key != case.key  # none: plain line and key, unchanged
    with pytest.raises(ValueError, match="unknown normalization"):
        Shape.one_to_one(16, normalize="ncc")


def test_a_peer_normalizes_only_as_its_registry_says():
    exp = Experiment("t", "t", "t", [Shape.one_to_one(32, window="valid", normalize="zncc"), Shape.one_to_one(32),
                                     Shape.one_to_one(32, normalize="zero-lag")],
                     [Series("p", "torch-fft"), Series("c", "cupy-correlate2d"), Series("f", "fft")])
    ex = expand(exp, WITH_PEERS)
    assert {(c.variant, c.shape.normalize) for c in ex.cases} == {
        (v, m) for v in ("torch-fft", "fft") for m in ("zncc", "none", "zero-lag")} | {("cupy-correlate2d", "none")}
    why = [r for label, _, r in ex.unavailable if label == "c"]
    assert len(why) == 2 and all("does not compute normalize=" in r for r in why)
    # a peer whose entry predates "normalizations" computes the raw correlation only
    old = [{k: v for k, v in p.items() if k != "normalizations"} for p in PEERS]
    ex = expand(exp, REGISTRY + old)
    assert {c.variant for c in ex.cases if c.shape.normalize != "none"} == {"fft"}
    with_key = expand(suite.load("zncc_match"), WITH_PEERS)
    keys = {c.key for c in with_key.cases if c.variant == "torch-fft"}
    assert all("|normalize=zncc|" in k for k in keys) and keys


def test_normalized_experiments_are_defined_as_issue_21_asks():
    for n in suite.NORMALIZED_EXPERIMENTS:
        assert n in suite.names() and n in suite.NOT_PAPER_EXPERIMENTS
    frames = expand(suite.load("zncc_frames"), WITH_PEERS)
    assert {(c.shape.hR, c.shape.wR) for c in frames.cases} == {(23, 21), (53, 54), (156, 116)}
    assert all(c.shape.form == "n-to-m" and (c.shape.nL, c.shape.nR) == (1000, 1) and c.shape.out_shape == (33, 33)
               for c in frames.cases)
    by_mode = {m: {(c.variant, c.shape.hR) for c in frames.cases if c.shape.normalize == m} for m in ("zncc", "none")}
    assert by_mode["zncc"] == by_mode["none"] and by_mode["zncc"]  # the raw beside, same variants
    assert {c.variant for c in frames.cases} >= {"register-tiled", "fft", "fft-fused"}
    match = expand(suite.load("zncc_match"), WITH_PEERS)
    assert all(c.shape.normalize == "zncc" and c.shape.window == "valid" for c in match.cases)
    assert {(c.shape.hL, c.shape.hR) for c in match.cases if c.variant == "fft"} == {
        (n, t) for n in (1024, 4096) for t in (16, 32, 64, 128, 256)}
    auto = expand(suite.load("zncc_autocorr"), WITH_PEERS)
    assert {c.shape.normalize for c in auto.cases} == {"zero-lag", "none"}
    assert all(c.shape.hL == 2048 and c.shape.half_width == 64 for c in auto.cases)
    for ex in (frames, match, auto):  # the torch peers beside the kernels, in every panel they can run
        npp = {"npp-normlevel"} if ex is match else set()  # NPP: valid-window ZNCC, template matching only
        assert {c.variant for c in ex.cases} & {p["name"] for p in PEERS} == {"torch-fft", "torch-conv2d"} | npp
        assert {c.shape.normalize for c in ex.cases if c.variant == "torch-fft"} == {
            c.shape.normalize for c in ex.cases}
    assert by_mode["zncc"] >= {("torch-fft", h) for h in (23, 53, 156)} | {("torch-conv2d", h) for h in (23, 53, 156)}


@pytest.fixture
def env(tmp_path, monkeypatch):
    return quick_suite_env(tmp_path, monkeypatch)


def test_normalized_experiments_run_resume_aggregate_and_plot(env, monkeypatch):
    run, gpu, log, tmp = env
    assert run("zncc_frames,zncc_match,zncc_autocorr") == 0
    calls = len(log_lines(log))
    lines = [l for call in log_lines(log) for l in call]
    assert any(" normalize=zncc " in l for l in lines) and any(" normalize=zero-lag " in l for l in lines)
    peer_lines = [l for call in log_lines(tmp / "peer.log") for l in call]  # the torch peers, normalized too
    assert {l.split()[0] for l in peer_lines} == {"variant=torch-fft", "variant=torch-conv2d", "variant=npp-normlevel"}
    assert all(" window=valid normalize=zncc" in l for l in peer_lines if l.startswith("variant=npp-normlevel "))
    assert any(" normalize=zncc" in l for l in peer_lines) and any(" normalize=zero-lag" in l for l in peer_lines)
    data = json.loads((gpu / "zncc_frames.json").read_text())
    assert data["xcorr_meta"]["complete"] and all(c["status"] == "ok" for c in data["cases"].values())
    modes = {c["params"].get("normalize", "none") for c in data["cases"].values()}
    assert modes == {"zncc", "none"}
    assert {m["shape"].get("normalize", "none") for m in data["members"]} == {"zncc", "none"}
    assert run("zncc_frames,zncc_match,zncc_autocorr") == 0  # every case found again: nothing runs
    assert len(log_lines(log)) == calls
    df = aggregate_dir(gpu)
    frames = df[df["experiment"] == "zncc_frames"]
    zncc = frames[frames["params"].str.contains("normalize=zncc")]
    raw = frames[~frames["params"].str.contains("normalize=")]
    assert len(zncc) == len(raw) > 0
    assert paper_rows(df).empty and paper_experiments(gpu) == []  # claims and anchors read none of them

    seen = {}
    save = plot.save

    def recording_save(fig, out_dir, name):
        texts = [fig._suptitle.get_text() if fig._suptitle else ""]
        texts += [t for ax in fig.axes for t in (ax.get_xlabel(), ax.get_ylabel(), ax.get_title())]
        seen[name] = " ".join(texts)
        return save(fig, out_dir, name)

    monkeypatch.setattr(plot, "save", recording_save)
    monkeypatch.setenv("XCORR_PLOT_STRICT", "1")
    monkeypatch.setenv("XCORR_PLOT_FORMATS", "png")
    files = plot.plot_gpu(gpu, only=list(suite.NORMALIZED_EXPERIMENTS), plots_root=tmp / "plots")
    assert sorted(f.name for f in files) == ["zncc_autocorr.png", "zncc_frames.png", "zncc_match.png"]
    assert all(f.stat().st_size > 20_000 for f in files)
    assert "ZNCC" in seen["zncc_match"] and "ZNCC: time per call + finish_time [µs]" in seen["zncc_match"]
    # zncc_frames pairs each algorithm's raw and ZNCC bars, with their ratio beside them.
    assert "raw correlation (light) and ZNCC (dark): time per call" in seen["zncc_frames"]
    assert "ratio" in seen["zncc_frames"]
    assert "raw correlation (light) and zero-lag normalized (dark): time per call" in seen["zncc_autocorr"]
