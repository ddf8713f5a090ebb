"""The peers (xcsuite/peers.py) and their harness (xcsuite/peerbench.py) on the CPU: the window, pad
and crop arithmetic of torch-fft and torch-conv2d (as numpy, and through torch on the CPU where
torch is installed) against scipy.signal.correlate2d; the normalized peers' pieces (zncc, zero-lag)
run by numpy against the float64 references (tests/xcorr_np.py, python/xcorr/_reference.py), in
float64 for the arithmetic and in float32 for the contract's bounds; the case specs and benchmark
names, the JSON entries as the runner reads them, the command line without torch or a GPU, and the
runner's routing of peer cases to peerbench (with tests/fake_xcorr.py as both tools). The GPU runs
are the lead's (see the module's docstring)."""
import importlib.util
import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest
import xcorr_np
from scipy.signal import correlate2d
from suite_helpers import ROOT, clear_fake_env, log_lines, make_fake_build

from xcsuite.spec import Case, Experiment, Series, Shape, case_key
from xcsuite import peerbench as pb
from xcsuite import peers
from xcsuite import benchjson
from xcsuite.benchjson import entry_key, parse_run_name
from xcsuite.cli import run_experiments as rx

HAS_TORCH = importlib.util.find_spec("torch") is not None
COUNTS = {"one-to-one": (1, 1), "one-to-many": (1, 3), "n-to-mn": (2, 6), "n-to-m": (2, 3)}


def stacks(rng, form, hL, wL, hR, wR):
    nL, nR = COUNTS[form]
    return rng.uniform(-1, 1, (nL, hL, wL)), rng.uniform(-1, 1, (nR, hR, wR))


def windows(rng, hL, wL, hR, wR):
    """Named windows, and rectangles inside, across and wholly outside the full range."""
    out = [peers.full_window(hL, wL, hR, wR), peers.same_window(hL, wL, hR, wR), (0, 0, 0, 0),
           (-hR - 3, -hR, 0, 1), (hL, hL + 2, -wR - 2, wL + 2), (-hR - 2, hL + 1, -wR - 1, wL)]
    try:
        out.append(peers.valid_window(hL, wL, hR, wR))
    except pb.UsageError:
        pass
    for _ in range(3):
        a, b = sorted(rng.integers(-hR - 3, hL + 3, 2))
        c, d = sorted(rng.integers(-wR - 3, wL + 3, 2))
        out.append((int(a), int(b), int(c), int(d)))
    return out


SHAPES = [(8, 8, 8, 8), (7, 9, 4, 6), (5, 6, 8, 3), (1, 13, 1, 5), (6, 4, 6, 4), (3, 3, 9, 10), (10, 7, 2, 2)]


@pytest.mark.parametrize("form", peers.FORMS)
@pytest.mark.parametrize("shape", SHAPES)
def test_fft_and_conv_arithmetic_give_the_window_of_scipy(form, shape):
    rng = np.random.default_rng(sum(shape) + len(form))
    L, R = stacks(rng, form, *shape)
    for w in windows(rng, *shape):
        ref = peers.window_reference_np(form, L, R, w)
        assert ref.shape == (len(peers.pairs(form, len(L), len(R))), w[1] - w[0] + 1, w[3] - w[2] + 1)
        for f in (peers.fft_reference_np, peers.conv_reference_np):
            got = f(form, L, R, w)
            assert got.shape == ref.shape and np.allclose(got, ref, atol=1e-10), (f.__name__, w)


@pytest.mark.parametrize("shape", SHAPES)
def test_the_reference_and_the_named_windows_are_scipys_modes(shape):
    hL, wL, hR, wR = shape
    rng = np.random.default_rng(3)
    L, R = stacks(rng, "one-to-one", *shape)
    modes = {"full": peers.full_window(*shape), "same": peers.same_window(*shape)}
    try:
        modes["valid"] = peers.valid_window(*shape)
    except pb.UsageError:
        assert (hL - hR) * (wL - wR) < 0
    for mode, w in modes.items():
        # a same or valid window equal to full is named full (scipy_mode tries full first)
        assert peers.scipy_mode(w, *shape) == mode or (mode != "full" and w == peers.full_window(*shape))
        np.testing.assert_allclose(peers.window_reference_np("one-to-one", L, R, w)[0], correlate2d(L[0], R[0], mode=mode),
                                   atol=1e-12)


def test_fast_len_and_the_fft_size_avoid_aliasing():
    assert [peers.fast_len(n) for n in (1, 11, 13, 17, 97, 127, 511, 1023)] == [1, 12, 14, 18, 98, 128, 512, 1024]
    for n in range(1, 3000):
        m = peers.fast_len(n)
        assert m >= n and all(peers.fast_len(k) == m for k in (m,))
    # the full window needs the linear size; a narrow window much less
    assert peers.fft_axis(-63, 63, 64, 64).P == 128
    assert peers.fft_axis(-4, 4, 64, 64).P == peers.fast_len(68)
    assert peers.fft_axis(0, 32, 64, 32).P == 64  # valid: no padding at all
    ax = peers.fft_axis(-70, -60, 64, 64)  # partly beyond the full range: clamped, zeros before
    assert ax.clamped == (-63, -60) and ax.offset == 7 and ax.out_len == 11
    assert peers.fft_axis(64, 70, 64, 64).clamped is None


def test_conv_padding_is_symmetric_through_conv2d_and_only_the_rest_by_f_pad():
    full = peers.conv_axis(-31, 31, 32, 32)
    assert (full.conv_pad, full.extra_before, full.extra_after, full.crop0, full.crop1) == (31, 0, 0, 0, 32)
    same = peers.conv_axis(*peers.same_window(32, 32, 32, 32)[:2], 32, 32)  # even right: one more zero after
    assert (same.conv_pad, same.extra_before, same.extra_after) == (15, 0, 1)
    valid = peers.conv_axis(0, 32, 64, 32)
    assert (valid.conv_pad, valid.extra_before, valid.extra_after, valid.crop0, valid.crop1) == (0, 0, 0, 0, 64)
    inner = peers.conv_axis(10, 12, 64, 8)  # a narrow window reads only rows 10..19
    assert (inner.crop0, inner.crop1, inner.conv_pad) == (10, 20, 0)
    assert peers.conv_axis(64, 70, 64, 8).empty and peers.conv_axis(-20, -8, 64, 8).empty


@pytest.mark.peers
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (the peers' torch code runs on the GPU machine)")
@pytest.mark.parametrize("form", peers.FORMS)
def test_the_torch_peers_on_the_cpu(form):
    import torch
    torch.backends.cudnn.allow_tf32 = False
    rng = np.random.default_rng(7)
    for shape in SHAPES[:4]:
        L, R = stacks(rng, form, *shape)
        for w in windows(rng, *shape):
            c = peers.parse_case(f"variant=torch-fft form={form} hL={shape[0]} wL={shape[1]} hR={shape[2]} wR={shape[3]} "
                              f"nL={len(L)} nR={len(R)} shifts={peers.window_text(w)}")
            ref = peers.window_reference_np(form, L, R, w)
            for cls in (peers.TorchFft, peers.TorchConv2d):
                got = cls(c, torch)(torch.from_numpy(L), torch.from_numpy(R)).numpy()
                assert got.shape == ref.shape and np.allclose(got, ref, atol=1e-9), (cls.__name__, w)


def test_case_specs_names_and_windows():
    c = peers.parse_case("variant=torch-fft form=n-to-mn hL=64 wL=64 hR=32 wR=32 nL=3 nR=6")
    assert c.full and c.name() == "torch-fft/n-to-mn/hL:64/wL:64/hR:32/wR:32/nL:3/nR:6"
    assert c.fmas == 6 * 64 * 64 * 32 * 32 and c.out_shape == (6, 95, 95)
    v = peers.parse_case("variant=torch-conv2d form=one-to-one size=16 window=valid")
    assert v.window == (0, 0, 0, 0) and v.name().endswith("/nR:1/shifts:0:0,0:0") and v.fmas == 256
    s = peers.parse_case("variant=torch-fft form=one-to-many size=32 nR=4 max_shift=16")
    assert s.window == (-16, 16, -16, 16) and s.name().endswith("/nR:4/shifts:-16:16,-16:16")
    assert peers.parse_case("variant=torch-fft form=one-to-one size=8 max_shift=7,7").full  # = the full window
    assert peers.parse_case("variant=cupy-correlate2d form=one-to-one size=9 shifts=-2:3,0:0").window == (-2, 3, 0, 0)
    assert peers.parse_case("variant=torch-fft form=one-to-one size=8 window=same").window == (-3, 4, -3, 4)
    # the window's cost: the overlap areas (Window::fmas)
    assert peers.window_fmas((-7, 7, -7, 7), 8, 8, 8, 8) == 8 ** 4
    assert peers.window_fmas((20, 30, 0, 0), 8, 8, 8, 8) == 0
    for bad in ("variant=torch-fft form=one-to-one size=8 window=valid max_shift=2",
                "variant=torch-fft form=one-to-one size=8 shifts=3:2,0:0",
                "variant=torch-fft form=one-to-one size=8 window=middle",
                "variant=torch-fft form=one-to-one hL=8 wL=4 hR=4 wR=8 window=valid",
                "variant=torch-fft form=one-to-one size=8 rows=2",
                "variant=fft form=one-to-one size=8",
                "variant=torch-fft form=n-to-mn size=8 nL=2 nR=3",
                "variant=torch-fft size=8"):
        with pytest.raises(pb.UsageError):
            peers.parse_case(bad)


def test_one_case_line_syntax_for_the_peers_the_reductions_and_the_results_files():
    """xcorr_bench's case syntax is read in one place (xcsuite.benchjson.parse_case_line) by the
    peers, the reductions and the results files, and refused as xcorr_bench refuses it (a key given
    twice is refused, not last-wins; at most one window key)."""
    from xcsuite import reduce_peers, resultfile

    line = benchjson.parse_case_line("variant=torch-fft form=one-to-many size=8 nR=3 max_shift=2 normalize=zncc")
    assert line.keys == {"variant": "torch-fft", "form": "one-to-many", "size": "8", "nR": "3", "normalize": "zncc"}
    assert (line.window_key, line.window_value, line.window) == ("max_shift", "2", "max_shift=2")
    assert benchjson.parse_case_line("variant=v form=f").window == "full"
    for bad, needle in (("variant=torch-fft form=one-to-one size=8 size=9", "size= is given twice"),
                        ("variant=torch-fft form=one-to-one size=8 window=valid shifts=0:0,0:0", "at most one of"),
                        ("variant=torch-fft form=one-to-one size", "expected key=value, got size"),
                        ("form=one-to-one size=8", "needs variant= and form=")):
        for parse in (benchjson.parse_case_line, peers.parse_case, resultfile.identity_from_line):
            with pytest.raises((benchjson.UsageError, resultfile.FormatError), match=needle):
                parse(bad)
    with pytest.raises(benchjson.UsageError, match="size= is given twice"):
        reduce_peers.parse_rcase("variant=xcorr-reduce form=one-to-many size=8 size=9 nR=2 reduce=max")
    # the writer is the reader's inverse
    text = benchjson.case_line("fft", "n-to-m", (8, 9, 3, 4, 2, 5), "shifts=-1:1,0:2", {"normalize": "zncc"})
    assert text == "variant=fft form=n-to-m hL=8 wL=9 hR=3 wR=4 nL=2 nR=5 shifts=-1:1,0:2 normalize=zncc"
    assert resultfile.line_of({**resultfile.identity_from_line(text), "cold": False}) == text
    assert benchjson.case_line("fft", "one-to-one", (8, 8, 8, 8, 1, 1), "valid") == \
        "variant=fft form=one-to-one hL=8 wL=8 hR=8 wR=8 nL=1 nR=1 window=valid"


def test_entries_are_xcorr_bench_entries_the_runner_reads():
    opt = pb.Options(min_time=0.1, repetitions=3)
    c = peers.parse_case("variant=torch-fft form=n-to-m size=16 nL=2 nR=3")
    r = {"iterations": 40, "real_time": 2.5e-5, "total": 1e-3, "batch": 64, "err": 3e-7, "samples": 1000}
    e = pb.entry(c, opt, 0, 1, r, "family=peer;timed=x;precision=fp32")
    assert e["run_name"].startswith(c.name() + "/min_time:") and e["run_name"].endswith("/manual_time")
    for k in ("hL", "wL", "hR", "wR", "nL", "nR", "batch", "fmas", "FLOPS", "cold", "check_err", "check_samples"):
        assert k in e
    assert not {"dy0", "dy1", "dx0", "dx1"} & set(e)
    assert e["real_time"] == pytest.approx(25.0) and e["time_unit"] == "us" and e["repetition_index"] == 1
    assert e["FLOPS"] == pytest.approx(2 * c.fmas * 40 / 1e-3)
    assert entry_key(e) == case_key("torch-fft", ("n-to-m", 16, 16, 16, 16, 2, 3), {})
    w = pb.entry(peers.parse_case("variant=torch-fft form=one-to-one size=16 max_shift=2"), opt, 0, 0, r, "")
    assert (w["dy0"], w["dy1"], w["dx0"], w["dx1"]) == (-2, 2, -2, 2) and w["fmas"] == (14 + 15 + 16 + 15 + 14) ** 2
    assert "/nR:1/shifts:-2:2,-2:2/min_time:" in w["run_name"]
    assert parse_run_name(w["run_name"])[1] == ("one-to-one", 16, 16, 16, 16, 1, 1)
    err = pb.entry(c, opt, 0, 0, {"error": "validation failed: err=1e-3 > tol=1e-5 (all 10 outputs)"}, "")
    assert err["error_occurred"] and err["error_message"].startswith("validation failed") and "fmas" not in err
    aggs = benchjson.aggregates(e, [25.0, 26.0, 24.0], 3)
    assert [a["aggregate_name"] for a in aggs] == ["mean", "median", "stddev", "cv"]
    assert aggs[0]["real_time"] == pytest.approx(25.0) and all(a["run_type"] == "aggregate" for a in aggs)


def test_sample_positions_hold_the_corners():
    pos = peers.sample_positions((5, 30, 40), 100, np.random.default_rng(1))
    for k in (0, 4):
        for y in (0, 29):
            for x in (0, 39):
                assert k * 1200 + y * 40 + x in pos
    assert len(peers.sample_positions((1, 3, 3), 100, np.random.default_rng(1))) == 9


def peerbench(*args):
    return subprocess.run([sys.executable, "-m", "xcsuite.peerbench", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def peerbench_in_process(*args):
    """peerbench's main in this interpreter, captured as its process's exit status and output: for
    the cases beyond one process per exit status (each process imports NumPy and the peers again)."""
    from in_process import captured

    return captured(lambda: pb.main(list(args)), ["peerbench", *args])


def test_list_works_without_torch_and_a_gpu():
    r = peerbench("list", "--json")
    assert r.returncode == 0, r.stderr
    reg = json.loads(r.stdout)
    from xcsuite import reduce_peers  # the reductions' variants follow the correlation peers

    assert [v["name"] for v in reg[-len(reduce_peers.VARIANTS):]] == list(reduce_peers.VARIANTS)
    reg = reg[:-len(reduce_peers.VARIANTS)]
    assert [v["name"] for v in reg] == ["torch-conv2d", "torch-conv2d-tf32", "torch-fft", "cupy-correlate2d",
                                        "npp-normlevel"]
    for v in reg:
        tf32 = v["name"] == "torch-conv2d-tf32"  # TF32: its own precision and bound, raw sums only
        assert v["family"] == "peer" and v["params"] == {}
        assert (v["precision"], v["tolerance"]) == (("tf32", 2e-3) if tf32 else ("fp32", 1e-5))
        assert v["forms"] == list(peers.FORMS)
        assert v["windows"] == (["valid"] if v["name"] == "npp-normlevel" else
                                ["full", "valid", "same", "max-shift", "shifts"])
        assert v["available"] == (not v["unavailable_reason"])
    assert reg[2]["available"] == HAS_TORCH
    assert [v["normalizations"] for v in reg] == ([["none", "zncc", "zero-lag"], ["none"], ["none", "zncc", "zero-lag"],
                                                   ["none"], ["zncc"]])
    r = peerbench_in_process("list")  # (exit 0 as a process: list --json above)
    assert r.returncode == 0 and "torch-fft" in r.stdout


def test_usage_errors_exit_2_and_no_torch_or_gpu_exits_3(tmp_path):
    r = peerbench("--case", "variant=torch-fft form=one-to-one size=8 window=bogus")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "window=" in r.stderr
    # each exit status once as a process (2 above, 3 below; 0: test_list_works_without_torch_and_a_gpu),
    # the other cases in this interpreter
    r = peerbench_in_process("--case", "variant=torch-fft form=one-to-one size=8", "--benchmark_nonsense=1")
    assert r.returncode == 2 and "unrecognized" in r.stderr
    r = peerbench_in_process("--case", "variant=torch-fft form=one-to-one size=8", "--benchmark_list_tests=true")
    assert r.returncode == 0 and r.stdout.strip() == "torch-fft/one-to-one/hL:8/wL:8/hR:8/wR:8/nL:1/nR:1"
    assert peerbench_in_process("--help").returncode == 0
    if HAS_TORCH:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is present: the no-GPU exit is not reachable")
    out = tmp_path / "o.json"
    r = peerbench("--case", "variant=torch-fft form=one-to-one size=8", f"--benchmark_out={out}",
                  "--benchmark_out_format=json")
    assert r.returncode == 3 and r.stderr.startswith("peerbench: no GPU: ") and r.stderr.count("\n") == 1
    assert not out.exists()


# --- normalized peers ------------------------------------------------------------------------------

NORM_SHAPES = [(7, 9, 4, 6), (5, 6, 8, 3), (1, 13, 1, 5), (3, 3, 9, 10), (10, 7, 2, 2), (19, 17, 6, 7)]
PEER_VARIANTS = ("torch-fft", "torch-conv2d")


def norm_windows(rng, hL, wL, hR, wR):
    """The full, same and valid windows, a window wholly outside the overlaps, one across its edge,
    one around shift (0, 0) and a random one."""
    out = [peers.full_window(hL, wL, hR, wR), peers.same_window(hL, wL, hR, wR), (-hR - 3, -hR, 0, 1),
           (-hR - 2, hL + 1, -wR - 1, wL), (-1, 1, -2, 2)]
    try:
        out.append(peers.valid_window(hL, wL, hR, wR))
    except pb.UsageError:
        pass
    a, b = sorted(rng.integers(-hR - 2, hL + 2, 2))
    c, d = sorted(rng.integers(-wR - 2, wL + 2, 2))
    return out + [(int(a), int(b), int(c), int(d))]


def signed_stacks(rng, form, shape, lo, hi, dtype=np.float64):
    L, R = stacks(rng, form, *shape)
    return ((L + 1) / 2 * (hi - lo) + lo).astype(dtype), ((R + 1) / 2 * (hi - lo) + lo).astype(dtype)


@pytest.mark.parametrize("form", peers.FORMS)
@pytest.mark.parametrize("shape", NORM_SHAPES)
def test_the_normalized_peers_arithmetic_is_the_float64_reference(form, shape):
    """The torch peers' normalized pieces run by numpy in float64 (no float32 rounding) equal
    tests/xcorr_np.py's normalization (correlations with ones, independent of the peers' tables,
    pooling and padding), and so does peerbench's check reference (python/xcorr/_reference.py)."""
    rng = np.random.default_rng(sum(shape) + len(form))
    for lo, hi in ((-1, 1), (992, 1008), (3, 5)):
        L, R = signed_stacks(rng, form, shape, lo, hi)
        for w in norm_windows(rng, *shape):
            for mode in ("zncc", "zero-lag"):
                ref = xcorr_np.normalized(mode, form, L, R, w)
                got = peers.normalized_reference_np(mode, form, L, R, w)
                assert got.shape == ref.shape and np.allclose(got, ref, atol=1e-9), (mode, w, "reference")
                for v in PEER_VARIANTS:
                    got = peers.normalized_peer_np(v, mode, form, L, R, w, dtype=np.float64)
                    assert got.shape == ref.shape and np.allclose(got, ref, atol=1e-8), (v, mode, w, lo)


def overlap_counts(form, L, R, w):
    """Each output's overlap size n, broadcast to the pairs' output shape."""
    rb, re, _, _ = peers.overlap_spans(w[0], w[1], L.shape[1], R.shape[1])
    cb, ce, _, _ = peers.overlap_spans(w[2], w[3], L.shape[2], R.shape[2])
    n = (re - rb)[:, None] * (ce - cb)[None, :]
    return np.broadcast_to(n, (peers.pair_count(form, len(L), len(R)),) + n.shape)


def float32_zncc_exempt(form, L, R, w):
    """The zncc outputs a float32 peer need not hold to 1e-4: the contract's border, and overlaps of
    fewer than 16 elements, where a float32 FFT's or box sum's error (~1e-7 of the largest sum,
    spread evenly) divided by the small overlap's n·σ² passes 1e-4 (the old constant
    rule had zeroed them; on 1000 + noise numpy's own float32 FFT misses by 1.9e-4 there)."""
    return peers.zncc_border_np(form, L, R, w) | (overlap_counts(form, L, R, w) < 16)


@pytest.mark.parametrize("form", peers.FORMS)
def test_the_normalized_peers_in_float32_meet_the_contract_on_the_checks_data(form):
    """In float32 as the peers compute (numpy's float32 FFT for cuFFT): zncc within 1e-4 absolute
    on 1000 + [-8, 8) (the check's cancellation case: without the means subtracted it fails by
    far), zero-lag within 1e-5 relative on 4 + [-1, 1) and [-1, 1)."""
    rng = np.random.default_rng(11 + len(form))
    for shape in NORM_SHAPES + [(40, 33, 9, 12)]:
        for w in norm_windows(rng, *shape):
            L, R = signed_stacks(rng, form, shape, 992, 1008, np.float32)
            ref = xcorr_np.normalized("zncc", form, L.astype(np.float64), R.astype(np.float64), w)
            for v in PEER_VARIANTS:
                got = peers.normalized_peer_np(v, "zncc", form, L, R, w)
                assert got.dtype == np.float32 and np.all(np.isfinite(got))
                err, bad = peers.compare(got, ref, "zncc", float32_zncc_exempt(form, L, R, w))
                assert bad == 0 and err <= peers.ZNCC_TOLERANCE, (v, shape, w, err)
            for lo, hi in ((3, 5), (-1, 1)):
                L, R = signed_stacks(rng, form, shape, lo, hi, np.float32)
                ref = xcorr_np.normalized("zero-lag", form, L.astype(np.float64), R.astype(np.float64), w)
                for v in PEER_VARIANTS:
                    err, bad = peers.compare(peers.normalized_peer_np(v, "zero-lag", form, L, R, w), ref, "zero-lag")
                    assert bad == 0 and err <= peers.TOLERANCE, (v, shape, w, lo, err)


def test_zncc_without_the_means_subtracted_cancels_on_1000_plus_noise():
    """Why the peers subtract the means: the same formula on the raw float32 sums misses by O(1)."""
    rng = np.random.default_rng(5)
    shape, w = (24, 24, 8, 8), (-7, 23, -7, 23)
    L, R = signed_stacks(rng, "one-to-one", shape, 992, 1008, np.float32)
    ref = xcorr_np.normalized("zncc", "one-to-one", L.astype(np.float64), R.astype(np.float64), w)
    zero = np.zeros((1, 1, 1), np.float32)
    _, _, n, (sl, sll, _), (sr, srr, _) = peers.zncc_sums_conv_np(L, R, w)
    # the unshifted sums: the conv route's pieces with the means put back, in float32
    ml, mr = L.mean(dtype=np.float32), R.mean(dtype=np.float32)
    sl0, sr0 = sl + n * ml, sr + n * mr
    sll0, srr0 = sll + 2 * ml * sl + n * ml * ml, srr + 2 * mr * sr + n * mr * mr
    raw0 = peers.conv_reference_np("one-to-one", L, R, w).astype(np.float32)
    vl, vr = np.float32(L.var(dtype=np.float64)), np.float32(R.var(dtype=np.float64))
    naive = peers.zncc_coefficient(np, n, raw0, sl0, sll0, vl, sr0, srr0, vr)
    large = overlap_counts("one-to-one", L, R, w) >= 16
    assert peers.compare(naive, ref, "zncc", ~large)[0] > 1e-2
    assert peers.compare(peers.normalized_peer_np("torch-conv2d", "zncc", "one-to-one", L, R, w), ref, "zncc", ~large)[0] < 1e-4


def test_overlap_spans_box_sums_and_pair_layouts():
    rb, re, lb, le = peers.overlap_spans(-4, 6, 5, 3)  # shifts -4..6 of a length-5 left and a length-3 right
    for i, s in enumerate(range(-4, 7)):
        idx = [r for r in range(3) if 0 <= r + s < 5]
        assert re[i] - rb[i] == len(idx) and (not idx or (rb[i], re[i], lb[i], le[i]) == (
            idx[0], idx[-1] + 1, idx[0] + s, idx[-1] + s + 1))
    x = np.random.default_rng(1).uniform(-1, 1, (2, 5, 4))
    t = peers.sat_np(x)
    r0, r1, c0, c1 = np.array([0, 1, 2]), np.array([5, 3, 2]), np.array([0, 3]), np.array([4, 4])
    got = peers.box_sums(t, r0, r1, c0, c1)
    want = np.array([[[x[k, a:b, c:d].sum() for c, d in zip(c0, c1)] for a, b in zip(r0, r1)] for k in range(2)])
    np.testing.assert_allclose(got, want, atol=1e-12)
    rng = np.random.default_rng(2)
    for form, (nL, nR) in COUNTS.items():
        A, B = rng.uniform(size=(nL, 7)), rng.uniform(size=(nR, 7))
        np.testing.assert_allclose(peers.pair_dots(form, A, B), [A[i] @ B[j] for i, j in peers.pairs(form, nL, nR)])
        raw = rng.uniform(size=(peers.pair_count(form, nL, nR), 2, 3))
        raw4, (l4,), (r4,) = peers.by_pairs(form, nL, nR, raw, [A[:, :2, None]], [B[:, :2, None]])
        grid = np.broadcast_to(raw4 * 0 + l4 * 10 + r4, raw4.shape).reshape(raw.shape)
        for k, (i, j) in enumerate(peers.pairs(form, nL, nR)):
            np.testing.assert_allclose(grid[k, :, 0], A[i, :2] * 10 + B[j, :2])
    assert list(peers.zero_lag_scale(np, np.array([2.0, 0.0, -4.0]))) == [0.5, 0.0, -0.25]


def test_normalized_cases_names_keys_and_refusals():
    c = peers.parse_case("variant=torch-fft form=n-to-m hL=256 wL=256 hR=23 wR=21 nL=10 nR=1 max_shift=16 normalize=zncc")
    assert c.normalize == "zncc" and c.name() == ("torch-fft/n-to-m/hL:256/wL:256/hR:23/wR:21/nL:10/nR:1"
                                                  "/shifts:-16:16,-16:16/norm:zncc")
    assert c.fmas == 10 * peers.window_fmas(c.window, 256, 256, 23, 21)  # the raw window's, as xcorr_bench's
    # the identity the suite gives the same shape (xcsuite/spec.py Case.key), from the entry's name
    shape = Shape("n-to-m", 256, 256, 23, 21, 10, 1, window="max_shift=16", normalize="zncc")
    r = {"iterations": 4, "real_time": 1e-4, "total": 4e-4, "batch": 8, "err": 3e-7, "samples": 10890}
    e = pb.entry(c, pb.Options(), 0, 0, r, pb.label(c))
    assert entry_key(e) == Case("torch-fft", shape, ()).key
    assert "timed=normalize zncc: " in e["label"] and e["label"].startswith("family=peer;")
    z = peers.parse_case("variant=torch-conv2d form=one-to-one size=64 normalize=zero-lag")
    assert z.full and z.name() == "torch-conv2d/one-to-one/hL:64/wL:64/hR:64/wR:64/nL:1/nR:1/norm:zero-lag"
    assert peers.parse_case("variant=cupy-correlate2d form=one-to-one size=8 normalize=none").name().endswith("/nR:1")
    for bad, needle in (("variant=torch-fft form=one-to-one size=8 normalize=ncc", "normalize="),
                        ("variant=torch-fft form=one-to-one size=8 normalize=", "normalize="),
                        ("variant=cupy-correlate2d form=one-to-one size=8 normalize=zncc", "does not compute"),
                        ("variant=cupy-correlate2d form=one-to-one size=8 normalize=zero-lag", "does not compute")):
        with pytest.raises(pb.UsageError, match=needle):
            peers.parse_case(bad)
    assert peers.check_range("zncc") == (992.0, 1008.0) and peers.check_range("zero-lag") == (3.0, 5.0)
    assert peers.tolerance_for("zncc") == 1e-4 and peers.tolerance_for("zero-lag") == peers.tolerance_for("none") == 1e-5
    assert peers.tolerance_for("none", "torch-conv2d-tf32") == 2e-3 and peers.tolerance_for("none", "torch-fft") == 1e-5
    # the measurement's label carries the peer's precision (summary.csv and the signal table read it there)
    assert pb.label(peers.parse_case("variant=torch-conv2d-tf32 form=one-to-one size=16")).endswith(";precision=tf32")
    assert pb.label(peers.parse_case("variant=torch-conv2d form=one-to-one size=16")).endswith(";precision=fp32")
    with pytest.raises(pb.UsageError, match="zncc"):  # TF32 sums are no basis for ZNCC's 1e-4
        peers.parse_case("variant=torch-conv2d-tf32 form=one-to-one size=16 normalize=zncc")
    got, ref = np.array([0.5, -0.2, np.nan]), np.array([0.5, -0.2002, 0.0])
    assert peers.compare(got, ref, "zncc") == (pytest.approx(2e-4), 1)


def test_normalize_usage_errors_exit_2_with_one_line():
    for case, needle in (("variant=torch-fft form=one-to-one size=8 normalize=bogus", "normalize="),
                         ("variant=cupy-correlate2d form=one-to-one size=8 normalize=zncc", "does not compute")):
        # in this interpreter (usage errors as a process: test_usage_errors_exit_2_and_no_torch_or_gpu_exits_3)
        r = peerbench_in_process("--case", case)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr
        assert r.stderr.startswith("peerbench: error: ")
    r = peerbench_in_process("--case", "variant=torch-conv2d form=one-to-one size=8 window=valid normalize=zncc",
                             "--benchmark_list_tests=true")
    assert r.returncode == 0 and r.stdout.strip() == ("torch-conv2d/one-to-one/hL:8/wL:8/hR:8/wR:8/nL:1/nR:1"
                                                  "/shifts:0:0,0:0/norm:zncc")


@pytest.mark.peers
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (the peers' torch code runs on the GPU machine)")
@pytest.mark.parametrize("form", peers.FORMS)
def test_the_normalized_torch_peers_on_the_cpu(form):
    import torch
    rng = np.random.default_rng(9)
    checked = 0  # zncc outputs held to 1e-4 (the shapes whose largest overlap is under 16 have none)
    for shape in NORM_SHAPES[:4] + NORM_SHAPES[5:]:
        for w in norm_windows(rng, *shape):
            for mode, (lo, hi) in (("zncc", (992, 1008)), ("zero-lag", (3, 5))):
                L, R = signed_stacks(rng, form, shape, lo, hi, np.float32)
                ref = xcorr_np.normalized(mode, form, L.astype(np.float64), R.astype(np.float64), w)
                exempt = float32_zncc_exempt(form, L, R, w) if mode == "zncc" else None
                for v in PEER_VARIANTS:
                    c = peers.parse_case(f"variant={v} form={form} hL={shape[0]} wL={shape[1]} hR={shape[2]} "
                                      f"wR={shape[3]} nL={len(L)} nR={len(R)} shifts={peers.window_text(w)} normalize={mode}")
                    got = peers.make_peer(c, torch)(torch.from_numpy(L), torch.from_numpy(R)).numpy()
                    err, bad = peers.compare(got, ref, mode, exempt)
                    assert got.shape == ref.shape and bad == 0 and err <= peers.tolerance_for(mode), (v, mode, w, err)
                    checked += 0 if exempt is None else int(np.count_nonzero(~exempt))
    assert checked > 1000


# --- the runner ---------------------------------------------------------------------------------

PEER_EXP = Experiment(name="peers", title="peers beside a kernel", paper="(test)",
                      shapes=[Shape.one_to_one(16), Shape.n_to_m(32, 2, 3)],
                      series=[Series("overlap-wise", "overlap-wise"), Series("torch-fft", "torch-fft"),
                              Series("torch-conv2d", "torch-conv2d"), Series("cupy", "cupy-correlate2d")],
                      plot="none")


@pytest.fixture
def peer_env(tmp_path, monkeypatch):
    clear_fake_env(monkeypatch)
    build = make_fake_build(tmp_path / "build")
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "bench.log"))
    monkeypatch.setenv("FAKE_PEER_LOG", str(tmp_path / "peer.log"))
    monkeypatch.setenv("XCORR_PEERBENCH", str(build / "peerbench"))
    monkeypatch.setenv("FAKE_PEERS_UNAVAILABLE", "cupy-correlate2d")
    monkeypatch.setenv("XCORR_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(rx, "suite", types.SimpleNamespace(names=lambda: ["peers"], load=lambda n: PEER_EXP,
                                                            load_all=lambda: [PEER_EXP]))
    results = tmp_path / "results"

    def run(*args):
        return rx.main(["peers", *args, "--build", str(build), "--results", str(results), "--no-progress"])

    return run, results, tmp_path


def test_the_runner_sends_peer_cases_to_peerbench(peer_env):
    run, results, tmp = peer_env
    assert run() == 0
    kernel_lines = [l for chunk in log_lines(tmp / "bench.log") for l in chunk]
    peer_chunks = log_lines(tmp / "peer.log")
    peer_lines = [l for chunk in peer_chunks for l in chunk]
    assert kernel_lines and all(l.startswith("variant=overlap-wise ") for l in kernel_lines)
    assert sorted({l.split()[0] for l in peer_lines}) == ["variant=torch-conv2d", "variant=torch-fft"]
    assert len(peer_lines) == 4 and all(len({l.split()[0] for l in c} - {"variant=torch-fft", "variant=torch-conv2d"})
                                        == 0 for c in peer_chunks)
    data = json.loads((results / "fake-gpu-9000" / "peers.json").read_text())
    assert data["xcorr_meta"]["complete"] and len(data["cases"]) == 6
    assert all(c["status"] == "ok" for c in data["cases"].values())
    assert {k.split("|")[0] for k in data["cases"]} == {"overlap-wise", "torch-fft", "torch-conv2d"}
    names = {v["name"] for v in data["xcorr_meta"]["registry"]}
    assert {"torch-fft", "torch-conv2d", "overlap-wise"} <= names and "cupy-correlate2d" not in names
    assert any(u["series"] == "cupy" for u in data["xcorr_meta"]["unavailable"])  # left out with a reason
    assert run() == 0 and len(log_lines(tmp / "peer.log")) == len(peer_chunks)  # complete: nothing reruns


def test_a_peer_case_that_fails_is_recorded_and_the_chunks_keep_one_tool(peer_env, monkeypatch):
    run, results, tmp = peer_env
    monkeypatch.setenv("FAKE_ERROR_ON", "variant=torch-conv2d form=one-to-one")
    monkeypatch.setenv("FAKE_ERROR_MESSAGE", "validation failed: err=1.0e-03 > tol=1.0e-05 (all 961 outputs)")
    assert run() == 0
    cases = json.loads((results / "fake-gpu-9000" / "peers.json").read_text())["cases"]
    failed = {k: c for k, c in cases.items() if c["status"] != "ok"}
    assert list(failed) == [case_key("torch-conv2d", ("one-to-one", 16, 16, 16, 16, 1, 1), {})]
    assert next(iter(failed.values()))["message"].startswith("validation failed")
    runner = rx.Runner(types.SimpleNamespace(build=str(tmp / "build")),
                       [{"name": "overlap-wise", "family": "baseline"}, {"name": "torch-fft", "family": "peer"}],
                       rx.PROTOCOL, None, tmp)
    mixed = [types.SimpleNamespace(variant=v, cold=False) for v in ("overlap-wise", "torch-fft", "torch-fft",
                                                                     "overlap-wise")]
    parts = rx.chunks(mixed, lambda c: 1.0, 1e9, runner.tool)
    assert [[c.variant for c in p] for p in parts] == [["overlap-wise"], ["torch-fft", "torch-fft"], ["overlap-wise"]]
    assert runner.tool(mixed[1]) == [str(tmp / "build" / "peerbench")]


@pytest.mark.parametrize("args,needle", [
    (["--min-time", "0.1", "--min-time=0.2"], "--min-time is given twice"),
    (["--seed", "1", "--seed", "2"], "--seed is given twice"),
    (["--time-cap", "1", "--time-cap", "3"], "--time-cap is given twice"),
])
def test_a_one_value_option_given_twice_is_refused(args, needle):
    """As xcorr_bench (OptionSeen): the last used to win silently; --case and --cases add up."""
    with pytest.raises(pb.UsageError, match=needle):
        pb.parse_args(["--case", "variant=torch-fft form=one-to-one size=8", *args])
    opt, specs = pb.parse_args(["--case", "variant=torch-fft form=one-to-one size=8",
                                "--case", "variant=torch-fft form=one-to-one size=16", "--min-time", "0.2"])
    assert len(specs) == 2 and opt.min_time == 0.2


def test_the_time_cap_takes_an_earlier_run_s_verdicts(tmp_path, monkeypatch):
    """XCORR_PEER_VERDICTS (scripts/sweep-scaling's second run): the cap refuses exactly the
    cases the earlier run refused, with its words, and times every other case without the pilot,
    so that a case predicted near the cap ends alike in both runs; without the file the pilot
    decides; a file that is not one of verdicts is refused in one line."""
    near = peers.parse_case("variant=cupy-correlate2d form=n-to-mn hL=64 wL=64 hR=64 wR=64 nL=4096 nR=4096 shifts=-4:4,-4:4")
    other = peers.parse_case("variant=cupy-correlate2d form=one-to-one size=64")
    said = f"{pb.CAP_REFUSAL} predicted 2.05 s per call (4096 pairs, one correlate2d call each) > --time-cap 2 s"
    verdicts = tmp_path / "verdicts.json"
    verdicts.write_text(json.dumps({near.name(): said}))
    monkeypatch.setenv(pb.VERDICTS_ENV, str(verdicts))
    opt, _ = pb.parse_args(["--case", "variant=torch-fft form=one-to-one size=8"])
    assert opt.verdicts == {near.name(): said}
    bench = object.__new__(pb.Bench)
    bench.opt = opt

    def pilot(*a, **k):
        raise AssertionError("the pilot ran although the earlier run's verdicts decide")
    with pytest.raises(peers.CaseError, match=r"predicted 2.05 s .*> --time-cap 2 s \(the run compared with, XCORR_PEER_VERDICTS\)$"):
        bench.cap_cupy(near, pilot)
    assert bench.cap_cupy(other, pilot) is None  # measured in the earlier run: measured here, no pilot
    # Without the file the pilot decides: one pair timed, times the pairs, against the cap.
    monkeypatch.delenv(pb.VERDICTS_ENV)
    opt, _ = pb.parse_args(["--case", "variant=torch-fft form=one-to-one size=8"])
    assert opt.verdicts is None
    bench.opt = opt
    bench.inputs = lambda c, seed: (None, None)
    bench.torch = types.SimpleNamespace(cuda=types.SimpleNamespace(synchronize=lambda: None))
    bench.gpu = types.SimpleNamespace(seconds_per_call=lambda n, f: (f(), 0.6e-3)[1])
    with pytest.raises(peers.CaseError, match=r"too slow: predicted 2.46 s per call \(4096 pairs"):
        bench.cap_cupy(near, lambda L, R, limit: None)
    bench.cap_cupy(other, lambda L, R, limit: None)  # 0.6 ms for one pair: under the cap
    for text in ("{", "[1]", '{"a": ""}'):
        verdicts.write_text(text)
        monkeypatch.setenv(pb.VERDICTS_ENV, str(verdicts))
        with pytest.raises(pb.UsageError, match="not a file of earlier verdicts"):
            pb.parse_args(["--case", "variant=torch-fft form=one-to-one size=8"])
    monkeypatch.setenv(pb.VERDICTS_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(pb.UsageError, match="missing.json: not a file of earlier verdicts"):
        pb.parse_args([])


def test_a_failed_case_s_entries_say_why():
    """The error entry of a peer's case that failed (peerbench and reduce_peers alike): a refusal's
    own words, an out-of-memory error's first line, else the exception's type and first line; the
    allocator's cache freed after anything but a refusal."""
    from types import SimpleNamespace

    from xcsuite.peers import CaseError, case_error

    class OutOfMemory(Exception):
        pass

    freed = []
    torch = SimpleNamespace(cuda=SimpleNamespace(OutOfMemoryError=OutOfMemory, empty_cache=lambda: freed.append(1)))
    assert case_error(CaseError("validation failed: peak at (1, 2)"), torch) == "validation failed: peak at (1, 2)"
    assert not freed
    assert case_error(OutOfMemory("CUDA out of memory. Tried 2 GiB\nmore"), torch) == \
        "not enough GPU memory: CUDA out of memory. Tried 2 GiB"
    assert case_error(OutOfMemory(""), torch) == "not enough GPU memory: out of memory"
    assert case_error(ValueError("xcorr refuses\nthe rest"), torch) == "ValueError: xcorr refuses"
    assert len(freed) == 3


def test_the_log_says_where_a_peer_process_s_time_went(tmp_path, monkeypatch, capsys):
    """A peer process's log (its stdout) gives its start-up, and per case the whole time, the part
    until its first repetition (the set-up, autotuning and validation: notes/multi-gpu.md has what
    they cost) and of that the wait for the peers' turn (XCORR_PEER_TURN, held here by another
    process for 0.4 s), from the clock: a fake GPU, a bench whose set-up sleeps, the real turn."""
    import fcntl
    import time

    from xcsuite import peerturn

    class FakeBench:
        def __init__(self, gpu, opt):
            self.opt = opt

        def run(self, c):
            time.sleep(0.3)  # the set-up, warm-up and check, before the turn
            with peerturn.turn():
                for _ in range(self.opt.repetitions):
                    time.sleep(0.05)
                    yield {"iterations": 1, "real_time": 1e-4, "total": 1e-4, "batch": 1, "err": 0.0, "samples": 1}

    monkeypatch.setattr(pb, "Gpu", lambda: object())
    monkeypatch.setattr(pb, "context", lambda gpu, opt: {})
    monkeypatch.setattr(pb, "Bench", FakeBench)
    turn = tmp_path / "turn.lock"
    monkeypatch.setenv(peerturn.ENV, str(turn))
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(turn)!r}, os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(0.7)"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"  # the other GPU's peer is timed for ~0.7 s more
    spec = "variant=torch-fft form=one-to-one hL=8 wL=8 hR=4 wR=4"
    assert pb.main(["--case", spec, "--case", spec.replace("hR=4", "hR=3"), "--benchmark_repetitions=2",
                    f"--benchmark_out={tmp_path / 'o.json'}"]) == 0
    holder.wait()
    lines = capsys.readouterr().out.splitlines()
    assert sum(ln.startswith("# peerbench: ready in ") for ln in lines) == 1, lines
    cases = [ln for ln in lines if ln.startswith("# torch-fft/")]
    assert len(cases) == 2 and "hR:4" in cases[0] and "hR:3" in cases[1], lines
    numbers = [[float(w) for w in ln.rsplit(": ", 1)[1].replace("(", " ").split() if w[0].isdigit()] for ln in cases]
    (whole0, before0, waited0), (whole1, before1, waited1) = numbers
    assert 0.3 <= waited0 < 0.7 and waited1 < 0.05, numbers  # the first case waited for the holder
    assert before0 >= 0.6 and before1 >= 0.34 and whole0 >= before0 + 0.04 and whole1 >= before1 + 0.04, numbers
    fd = os.open(turn, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # and the turn is free again
    os.close(fd)
    # Each repetition's entry has the case's wall seconds so far (xcorr_bench's case_seconds): the
    # last the whole of the log's line, the first after the set-up and the wait.
    reps = [b for b in json.loads((tmp_path / "o.json").read_text())["benchmarks"] if b["run_type"] == "iteration"]
    got = [b["case_seconds"] for b in reps]
    assert len(got) == 4 and got[0] < got[1] and got[2] < got[3], got
    near = lambda a, b: abs(a - b) < 0.02  # noqa: E731 (the log rounds to 0.01 s)
    assert near(got[0], before0) and near(got[1], whole0) and near(got[2], before1) and near(got[3], whole1), (
        got, numbers)


def test_every_timed_call_holds_the_peers_turn(tmp_path, monkeypatch):
    """Bench.timed (peerbench's cases and reduce_peers' alike) holds the host's peers' turn around
    the pilot and every repetition, and gives it back when done: a fake GPU whose every timed call
    finds the turn file locked by this process (another descriptor's non-blocking flock fails)."""
    import fcntl

    from xcsuite import peerturn

    turn = tmp_path / "turn.lock"
    monkeypatch.setenv(peerturn.ENV, str(turn))

    def held() -> bool:
        fd = os.open(turn, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    seen = []

    class FakeGpu:
        torch = None

        def seconds_per_call(self, batch, call):
            seen.append(held())
            return 1e-3

    bench = pb.Bench(FakeGpu(), pb.Options(min_time=0.001, repetitions=3))
    c = peers.parse_case("variant=torch-fft form=one-to-one size=8")
    reps = list(bench.timed(c, object(), lambda: None))
    assert len(reps) == 3 and len(seen) >= 4 and all(seen), seen  # the pilot and each repetition
    assert not held()  # given back
