"""npp-normlevel (xcsuite/peers.py, run by xcsuite/peerbench.py): NVIDIA NPP's
nppiCrossCorrValid_NormLevel_32f_C1R_Ctx as a peer (the normalized correlation's target: faster than
NPP's NormLevel). On the CPU: the cases it refuses (every window but valid, every normalization but
zncc) and their messages, its report as unavailable with a reason where NPP does not load, the
ctypes NppStreamContext against nppdefs.h's layout, the per-pair call arguments emulated on a flat
buffer against the float64 reference in every form, and the zncc_match series. On a GPU with NPP:
the peer against the reference, and one case through the command line; those skip with the reason
otherwise."""
import ctypes
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_xcorr import PEERS
from suite_helpers import ROOT, suite_registry

import experiments as suite
from xcsuite.spec import expand
from experiments._windows import LABELS
from xcsuite import peerbench as pb
from xcsuite import peers
from xcsuite.cli.plot import VARIANT_COLORS

NPP = peers.PEER_BY_NAME["npp-normlevel"]
VALID = "variant=npp-normlevel form=one-to-one hL=64 wL=48 hR=8 wR=5"
# An unpacked nvidia-npp wheel's library folder, where one is at hand (tests only read it: NPP loads
# on a machine without a GPU): XCORR_TEST_NPP_WHEEL_LIB, e.g. after `pip download --no-deps
# nvidia-npp -d w && unzip -q w/*.whl -d w/x`, w/x/nvidia/cu13/lib.
WHEEL_LIB = Path(os.environ.get("XCORR_TEST_NPP_WHEEL_LIB", "/nonexistent/nvidia-npp-wheel"))


def peerbench(*args, env=None):
    return subprocess.run([sys.executable, "-m", "xcsuite.peerbench", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, **(env or {})})


# --- what it computes and refuses ----------------------------------------------------------------

def test_the_valid_window_with_zncc_is_a_case_with_the_contract_layout():
    c = peers.parse_case(VALID + " window=valid normalize=zncc")
    assert c.window == (0, 56, 0, 43) and c.out_shape == (1, 57, 44) and c.normalize == "zncc" and not c.full
    assert c.name() == "npp-normlevel/one-to-one/hL:64/wL:48/hR:8/wR:5/nL:1/nR:1/shifts:0:56,0:43/norm:zncc"
    # the same rectangle asked for by shifts= is the valid window (Variant::supports_window's rule)
    assert peers.parse_case(VALID + " shifts=0:56,0:43 normalize=zncc").window == c.window
    for form, counts in (("one-to-many", "nR=3"), ("n-to-mn", "nL=2 nR=4"), ("n-to-m", "nL=2 nR=3")):
        c = peers.parse_case(f"variant=npp-normlevel form={form} hL=20 wL=20 hR=4 wR=4 {counts} window=valid "
                          f"normalize=zncc")
        assert c.out_shape == (c.pairs, 17, 17)
    # equal sizes: one shift
    one = peers.parse_case("variant=npp-normlevel form=one-to-one size=16 window=valid normalize=zncc")
    assert one.out_shape == (1, 1, 1)


@pytest.mark.parametrize("window", ["", "window=full", "window=same", "max_shift=3", "shifts=0:55,0:43",
                                    "shifts=-1:56,0:43"])
def test_every_other_window_is_refused_with_the_reason(window):
    with pytest.raises(pb.UsageError, match=r"npp-normlevel: only the valid window is computed \(window=valid"):
        peers.parse_case(f"{VALID} {window} normalize=zncc")


def test_a_right_larger_than_the_left_is_refused():
    with pytest.raises(pb.UsageError, match=r"NPP's template \(the right, 16x16\) must fit inside its image"):
        peers.parse_case("variant=npp-normlevel form=one-to-one hL=8 wL=8 hR=16 wR=16 window=valid normalize=zncc")
    with pytest.raises(pb.UsageError, match="no valid window"):
        peers.parse_case("variant=npp-normlevel form=one-to-one hL=8 wL=32 hR=16 wR=16 window=valid normalize=zncc")


@pytest.mark.parametrize("mode", ["none", "zero-lag"])
def test_every_other_normalization_is_refused_with_the_reason(mode):
    with pytest.raises(pb.UsageError, match=rf"npp-normlevel does not compute normalize={mode} \(it computes: zncc\)"):
        peers.parse_case(f"{VALID} window=valid normalize={mode}")
    with pytest.raises(pb.UsageError, match="does not compute normalize=none"):
        peers.parse_case(f"{VALID} window=valid")  # the default is none


def test_the_command_line_refuses_before_looking_for_a_gpu():
    r = peerbench("--case", VALID + " window=full normalize=zncc")
    assert r.returncode == 2 and "only the valid window is computed" in r.stderr, r.stderr
    r = peerbench("--case", VALID + " window=valid normalize=zero-lag")
    assert r.returncode == 2 and "does not compute normalize=zero-lag" in r.stderr, r.stderr
    r = peerbench("--case", VALID + " window=valid normalize=zncc", "--benchmark_list_tests")
    assert r.returncode == 0 and r.stdout.strip() == peers.parse_case(VALID + " window=valid normalize=zncc").name()
    # the smoke run (no --case) holds npp-normlevel in every form at a case it computes
    r = peerbench("--benchmark_list_tests")
    npp = [ln for ln in r.stdout.splitlines() if ln.startswith("npp-normlevel/")]
    assert r.returncode == 0 and len(npp) == 4 and all("/shifts:0:24,0:24/norm:zncc" in ln for ln in npp), r.stdout


def test_the_registry_entry_declares_valid_and_zncc_only():
    e = next(v for v in pb.registry() if v["name"] == "npp-normlevel")
    assert e["windows"] == ["valid"] and e["normalizations"] == ["zncc"] and e["forms"] == list(peers.FORMS)
    assert e["family"] == "peer" and e["available"] == (not e["unavailable_reason"])
    assert "zncc" in NPP["normalized"] and pb.label(peers.parse_case(VALID + " window=valid normalize=zncc")).startswith(
        "family=peer;timed=normalize zncc: every matrix minus its mean")


# --- NPP not loadable: unavailable, with the reason -------------------------------------------------

@pytest.fixture
def no_npp(monkeypatch):
    """A machine where NPP does not load: every candidate a missing file; torch counted as installed."""
    monkeypatch.setattr(peers, "_NPP", None)
    monkeypatch.setattr(peers, "npp_candidates", lambda: [("/nonexistent/libnppc.so.13", "/nonexistent/libnppist.so.13")])
    monkeypatch.setattr(peers, "missing_packages", lambda peer: [])
    yield
    monkeypatch.setattr(peers, "_NPP", None)


def test_without_npp_the_peer_is_unavailable_with_a_reason(no_npp):
    with pytest.raises(peers.NppUnavailable, match="libnppist/libnppc not found .*XCORR_NPP_DIR.*nonexistent"):
        peers.load_npp()
    why = peers.unavailable_reason(NPP)
    assert why.startswith("not loadable: NPP (libnppc, libnppist): libnppist/libnppc not found"), why
    e = {v["name"]: v for v in pb.registry()}
    assert not e["npp-normlevel"]["available"] and e["npp-normlevel"]["unavailable_reason"] == why
    assert e["torch-fft"]["available"]  # the other peers do not depend on it
    # a case that reaches it anyway is an error entry, not a crash
    with pytest.raises(peers.CaseError, match="npp-normlevel unavailable: libnppist/libnppc not found"):
        peers.NppNormLevel(peers.parse_case(VALID + " window=valid normalize=zncc"), torch=None)


def test_a_missing_package_comes_first_as_for_every_peer(monkeypatch):
    monkeypatch.setattr(peers, "missing_packages", lambda peer: ["torch"])
    assert peers.unavailable_reason(NPP) == "not installed: torch"


def test_the_runner_leaves_an_unavailable_npp_out_with_a_reason():
    reg = suite_registry()
    peers = [p for p in PEERS if p["name"] != "npp-normlevel"]  # as load_peer_registry drops unavailable peers
    ex = expand(suite.load("zncc_match"), reg + peers)
    assert "npp-normlevel" not in {c.variant for c in ex.cases}
    assert any("npp-normlevel" in w for w in ex.warnings), ex.warnings


def test_the_candidates_cover_the_sonames_the_toolkit_and_the_wheels(monkeypatch, tmp_path):
    (tmp_path / "libnppist.so.12").write_bytes(b"")
    monkeypatch.setenv("XCORR_NPP_DIR", str(tmp_path))
    dirs = peers.npp_dirs()
    assert dirs[0] == str(tmp_path) and str(ROOT / "build-npp") in dirs
    assert "/usr/local/cuda/lib64" in dirs and "/usr/local/cuda/targets/x86_64-linux/lib" in dirs
    cands = peers.npp_candidates()
    assert cands[:3] == [("libnppc.so", "libnppist.so"), ("libnppc.so.13", "libnppist.so.13"),
                         ("libnppc.so.12", "libnppist.so.12")]
    assert (str(tmp_path / "libnppc.so.12"), str(tmp_path / "libnppist.so.12")) in cands


@pytest.mark.skipif(not (WHEEL_LIB / "libnppist.so.13").exists(), reason="no unpacked nvidia-npp wheel (XCORR_TEST_NPP_WHEEL_LIB: its nvidia/cu13/lib folder)")
def test_the_wheel_loads_without_a_gpu(monkeypatch):
    monkeypatch.setattr(peers, "_NPP", None)
    monkeypatch.setenv("XCORR_NPP_DIR", str(WHEEL_LIB))
    monkeypatch.setattr(peers, "npp_candidates", lambda: [(str(WHEEL_LIB / "libnppc.so.13"),
                                                        str(WHEEL_LIB / "libnppist.so.13"))])
    try:
        npp = peers.load_npp()
        assert npp.version().startswith("13.") and npp.where.endswith("libnppist.so.13")
        assert npp.ist.nppiCrossCorrValid_NormLevel_32f_C1R_Ctx.argtypes[-1] is peers.NppStreamContext
    finally:
        monkeypatch.setattr(peers, "_NPP", None)


# --- the ctypes structures against the headers ---------------------------------------------------

def test_the_stream_context_has_nppdefs_layout():
    """nppdefs.h (nvidia-npp 13.2), compiled with gcc on x86-64: size 48, alignment 8; hStream 0,
    nCudaDeviceId 8, nMultiProcessorCount 12, nMaxThreadsPerMultiProcessor 16, nMaxThreadsPerBlock
    20, nSharedMemPerBlock 24 (size_t), nCudaDevAttrComputeCapabilityMajor 32, ...Minor 36,
    nStreamFlags 40, nReserved0 / hWorkspace (a union of Npp32u) 44."""
    S = peers.NppStreamContext
    assert ctypes.sizeof(S) == 48 and ctypes.alignment(S) == 8
    expected = {"hStream": (0, 8), "nCudaDeviceId": (8, 4), "nMultiProcessorCount": (12, 4),
                "nMaxThreadsPerMultiProcessor": (16, 4), "nMaxThreadsPerBlock": (20, 4), "nSharedMemPerBlock": (24, 8),
                "nCudaDevAttrComputeCapabilityMajor": (32, 4), "nCudaDevAttrComputeCapabilityMinor": (36, 4),
                "nStreamFlags": (40, 4), "nReserved0": (44, 4)}
    assert [f for f, _ in S._fields_] == list(expected)
    for name, (offset, size) in expected.items():
        assert (getattr(S, name).offset, getattr(S, name).size) == (offset, size), name
    assert ctypes.sizeof(peers.NppiSize) == 8 and peers.NppiSize.width.offset == 0 and peers.NppiSize.height.offset == 4
    assert ctypes.sizeof(peers.NppLibraryVersion) == 12


def test_a_negative_status_raises_with_its_code_and_a_positive_one_is_noted():
    with pytest.raises(peers.NppError, match=r"f returned NppStatus -19 \(NPP_SIZE_ERROR\)"):
        peers.npp_status("f", -19)
    with pytest.raises(peers.NppError, match=r"NppStatus -4242 \(unknown\)"):
        peers.npp_status("f", -4242)
    seen = set()
    peers.npp_status("f", 0, seen)
    peers.npp_status("f", 10000, seen)
    assert seen == {10000}


# --- the call arguments: NPP emulated on a flat buffer ---------------------------------------------

def npp_valid_normlevel_np(src: np.ndarray, tpl: np.ndarray) -> np.ndarray:
    """NPP's valid-mode correlation coefficient (nppi_statistics_functions.h): dst(r, c) over the
    source block with its top-left corner at (r, c), each minus its mean, float64."""
    h, w = tpl.shape
    t = tpl - tpl.mean()
    win = np.lib.stride_tricks.sliding_window_view(src, (h, w))
    b = win - win.mean(axis=(2, 3), keepdims=True)
    return (b * t).sum(axis=(2, 3)) / np.sqrt((b * b).sum(axis=(2, 3)) * (t * t).sum())


@pytest.mark.parametrize("form,nL,nR", [("one-to-one", 1, 1), ("one-to-many", 1, 3), ("n-to-mn", 2, 6),
                                         ("n-to-m", 2, 3)])
def test_the_calls_fill_the_output_stack_the_checker_compares(form, nL, nR):
    """Every pair's pointers and byte steps, read back from one flat float32 buffer as NPP reads
    them, give the contract's valid-window ZNCC in the contract's layout (the checker's float64
    reference), every output element written exactly once."""
    hL, wL, hR, wR = 13, 11, 4, 3
    c = peers.parse_case(f"variant=npp-normlevel form={form} hL={hL} wL={wL} hR={hR} wR={wR} nL={nL} nR={nR} "
                      f"window=valid normalize=zncc")
    rng = np.random.default_rng(3)
    L, R = rng.uniform(992, 1008, (nL, hL, wL)), rng.uniform(992, 1008, (nR, hR, wR))
    nout = int(np.prod(c.out_shape))
    mem = np.full(L.size + R.size + nout, np.nan)
    lp, rp, op = 0, 4 * L.size, 4 * (L.size + R.size)  # byte addresses into mem (float32 elements)
    mem[:L.size], mem[L.size:L.size + R.size] = L.ravel(), R.ravel()
    written = np.zeros(nout, dtype=int)
    calls = peers.npp_pair_calls(c, lp, rp, op)
    assert len(calls) == c.pairs

    def view(addr, step, h, w):
        assert addr % 4 == 0 and step % 4 == 0
        return np.lib.stride_tricks.as_strided(mem[addr // 4:], (h, w), (step // 4 * 8, 8))

    for sp, ss, tp, ts, dp, ds in calls:
        oh, ow = hL - hR + 1, wL - wR + 1
        dst = view(dp, ds, oh, ow)
        dst[...] = npp_valid_normlevel_np(view(sp, ss, hL, wL).copy(), view(tp, ts, hR, wR).copy())
        idx = (dp - op) // 4 + (np.arange(oh)[:, None] * (ds // 4) + np.arange(ow)[None, :])
        np.add.at(written, idx.ravel(), 1)
    assert (written == 1).all()
    got = mem[L.size + R.size:].reshape(c.out_shape)
    ref = peers.normalized_reference_np("zncc", form, L, R, c.window)
    err, bad = peers.compare(got, ref, "zncc")
    assert bad == 0 and err < 1e-9, err


# --- the experiment ---------------------------------------------------------------------------------

def test_zncc_match_measures_npp_beside_the_kernels_under_the_direct_cap():
    reg = suite_registry()
    ex = expand(suite.load("zncc_match"), reg + PEERS)
    npp = [c for c in ex.cases if c.variant == "npp-normlevel"]
    assert npp and all(c.shape.window == "valid" and c.shape.normalize == "zncc" and c.shape.form == "one-to-one"
                       for c in npp)
    # under the direct kernels' 3e11 cap: every size but the 4096 image with the 256 template
    assert {(c.shape.hL, c.shape.hR) for c in npp} == {(n, t) for n in (1024, 4096) for t in (16, 32, 64, 128, 256)
                                                      if (n - t + 1) ** 2 * t * t <= 3e11}
    assert all(" window=valid normalize=zncc" in c.line() for c in npp)
    label = next(s.label for s in suite.load("zncc_match").series if s.variant == "npp-normlevel")
    assert label == LABELS["npp-normlevel"] == "npp-normlevel (NPP)"
    colors = [v for k, v in VARIANT_COLORS.items()]
    assert VARIANT_COLORS["npp-normlevel"] and colors.count(VARIANT_COLORS["npp-normlevel"]) == 1


def test_the_cost_model_knows_npp():
    from xcsuite import cost
    assert {"npp-normlevel"} <= set(cost.PEER_CASE_S) & set(cost.PEER_RATES) & set(cost.PEER_PAIR_S)
    reg = suite_registry()
    ex = expand(suite.load("zncc_match"), reg + PEERS)
    c = next(c for c in ex.cases if c.variant == "npp-normlevel" and c.shape.hL == 4096 and c.shape.hR == 128)
    assert 0.1 < cost.call_seconds(c, "peer") < 1.0  # 2.6e11 FMAs at the guessed 1e12 FMA/s


# --- on a GPU with NPP ----------------------------------------------------------------------------

def _gpu_npp_reason() -> str:
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    import torch
    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is False)"
    try:
        peers.load_npp()
    except peers.NppUnavailable as e:
        return f"NPP does not load: {e}"
    return ""


GPU_REASON = _gpu_npp_reason()


def gpu(test):
    """Skipped with the reason where NPP cannot run on a GPU; marked gpu (--gpu-only keeps it)."""
    return pytest.mark.gpu(pytest.mark.skipif(bool(GPU_REASON), reason=f"npp-normlevel on the GPU: {GPU_REASON}")(test))


@gpu
@pytest.mark.parametrize("form,nL,nR,hL,wL,hR,wR", [
    ("one-to-one", 1, 1, 64, 48, 8, 5), ("one-to-one", 1, 1, 37, 37, 37, 37), ("one-to-many", 1, 3, 40, 33, 7, 9),
    ("n-to-mn", 2, 4, 30, 30, 5, 5), ("n-to-m", 2, 3, 29, 31, 6, 4)])
def test_npp_matches_the_reference_on_the_gpu(form, nL, nR, hL, wL, hR, wR):
    import torch
    c = peers.parse_case(f"variant=npp-normlevel form={form} hL={hL} wL={wL} hR={hR} wR={wR} nL={nL} nR={nR} "
                      f"window=valid normalize=zncc")
    g = torch.Generator(device="cuda")
    g.manual_seed(7)
    L = torch.rand((nL, hL, wL), generator=g, device="cuda") * 16 + 992  # the check's 1000 + [-8, 8)
    R = torch.rand((nR, hR, wR), generator=g, device="cuda") * 16 + 992
    peer = peers.make_peer(c, torch)
    assert isinstance(peer, peers.NppNormLevel)
    out = peer(L, R)
    torch.cuda.synchronize()
    assert tuple(out.shape) == c.out_shape and out.dtype == torch.float32
    ref = peers.normalized_reference_np("zncc", form, L.double().cpu().numpy(), R.double().cpu().numpy(), c.window)
    err, bad = peers.compare(out.cpu().numpy(), ref, "zncc")
    assert bad == 0 and err <= peers.ZNCC_TOLERANCE, (err, peer.warnings)


@gpu
def test_npp_runs_through_the_command_line(tmp_path):
    out = tmp_path / "npp.json"
    one = "variant=npp-normlevel form=one-to-one hL=256 wL=256 hR=16 wR=16 window=valid normalize=zncc"
    many = "variant=npp-normlevel form=one-to-many hL=128 wL=128 hR=16 wR=16 nR=4 window=valid normalize=zncc"
    r = peerbench("--case", one, "--case", many, "--min-time", "0.01", f"--benchmark_out={out}")
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    runs = [b for b in data["benchmarks"] if b["run_type"] == "iteration"]
    assert len(runs) == 2 and not any(b.get("error_occurred") for b in runs), runs
    assert all(b["check_err"] <= peers.ZNCC_TOLERANCE and b["real_time"] > 0 for b in runs)
    assert "npp=" in data["context"]["xcorr_peer_versions"]
    # the log's account of the process's time: its start-up, and each case's whole and set-up
    assert r.stdout.count("# peerbench: ready in ") == 1, r.stdout
    assert r.stdout.count(" of it until the first repetition was measured") == 2, r.stdout


# --- the stream context, with stand-ins for torch and libnppc ---------------------------------------

class _Props:
    major, minor, multi_processor_count = 9, 0, 132
    max_threads_per_multi_processor, shared_memory_per_block = 2048, 49152


class _Stream:
    def __init__(self, handle):
        self.cuda_stream = handle


def _torch():
    import types
    cuda = types.SimpleNamespace(current_device=lambda: 0, get_device_properties=lambda d: _Props())
    return types.SimpleNamespace(cuda=cuda)


def _core(status, sms=132):
    import types

    def get(p):
        ctx = ctypes.cast(p, ctypes.POINTER(peers.NppStreamContext)).contents
        ctx.nCudaDeviceId, ctx.nMultiProcessorCount, ctx.nMaxThreadsPerBlock = 0, sms, 1024
        ctx.nCudaDevAttrComputeCapabilityMajor, ctx.nCudaDevAttrComputeCapabilityMinor = 9, 0
        ctx.nMaxThreadsPerMultiProcessor, ctx.nSharedMemPerBlock, ctx.nStreamFlags = 2048, 12345, 7
        return status
    return peers.NppLib(types.SimpleNamespace(nppGetStreamContext=get), None, "fake")


def test_the_context_is_npps_own_on_the_timed_stream():
    ctx = peers.npp_stream_context(_core(0), _torch(), _Stream(0xABC0))
    assert ctx.nSharedMemPerBlock == 12345  # NPP's answer kept
    assert ctx.hStream == 0xABC0 and ctx.nStreamFlags == 1 and ctx.nReserved0 == 0  # PyTorch's stream: non-blocking
    ctx = peers.npp_stream_context(_core(0), _torch(), _Stream(0))
    assert ctx.hStream is None and ctx.nStreamFlags == 0  # the legacy default stream


@pytest.mark.parametrize("status,sms", [(-1, 132), (0, 114)])
def test_an_error_or_another_device_falls_back_to_the_headers_recipe(status, sms):
    ctx = peers.npp_stream_context(_core(status, sms), _torch(), _Stream(0))
    assert (ctx.nMultiProcessorCount, ctx.nMaxThreadsPerMultiProcessor, ctx.nMaxThreadsPerBlock) == (132, 2048, 1024)
    assert ctx.nSharedMemPerBlock == 49152 and ctx.nStreamFlags == 0 and ctx.nReserved0 == 0
    assert (ctx.nCudaDevAttrComputeCapabilityMajor, ctx.nCudaDevAttrComputeCapabilityMinor) == (9, 0)
