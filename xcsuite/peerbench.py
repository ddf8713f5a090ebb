"""peerbench: the peers of xcorr (PyTorch, CuPy, NPP: xcsuite/peers.py; the reductions, peaks and the
maximum over the rights: xcsuite/reduce_peers.py) measured as a user would call them, with
xcorr_bench's command line and Google Benchmark JSON (the case syntax and the JSON writer shared
through xcsuite/benchjson.py), so that the runner measures them in the same runs as the kernels.

    python -m xcsuite.peerbench list [--json]
    python -m xcsuite.peerbench [--case SPEC]... [--cases FILE] [--min-time S] [--batch N] [--cold]
                                [--seed N] [--check-tolerance X] [--time-cap S]
                                [--benchmark_repetitions=N] [--benchmark_out=F] [--benchmark_out_format=json]
                                [--benchmark_filter=RE]

The peers and what each computes and times: xcsuite/peers.py.

A case SPEC is xcorr_bench's: variant= form= size= | hL= wL= hR= wR=, nL= nR=, batch=, at most
one window key: window=full|valid|same, max_shift=SY[,SX], shifts=DY0:DY1,DX0:DX1, and
normalize=none|zncc|zero-lag (CONVENTIONS.md, "Normalization").

Protocol (xcorr_bench's, harness/bench_main.cpp): inputs uniform [0, 1) from the seed (torch
generator on the GPU, seeds N and N + 1); one warm-up call (cuDNN autotuning, plan creation, kernel
compilation stay out of the numbers); the check: the case run once on inputs uniform [-1, 1)
(seeds N + 2, N + 3) against a float64 reference (scipy on the CPU up to 3e8 multiply-adds, else
65536 sampled outputs computed by the definition in float64 on the GPU, every 4 corners of the
first and last output matrix included), relative error ||out - ref|| / ||ref|| above the
tolerance (1e-5) or a non-finite output fails the case: "validation failed: ...", nothing timed.
A normalized case is checked as xcorr_bench checks it: zncc on inputs 1000 + [-8, 8), by the largest
absolute error against 1e-4; zero-lag on 4 + [-1, 1), by the relative error against 1e-5; the
float64 reference is python/xcorr/_reference.py on the CPU up to 3e8 of its multiply-adds, else the
sampled outputs' sums in float64 on the GPU.
Then each repetition is Google Benchmark's: iterations of `batch` back-to-back calls between two
CUDA events, until the repetition holds --min-time seconds of GPU time; the time per call is the
manual time. The batch comes from a pilot (3 timed calls: enough calls for 100 us per iteration,
at most 256). Every call takes the stacks in the contract's layout and returns the windowed
output stack in the contract's layout; everything between is timed.

The time cap decides from one timed call, so a case predicted near it is refused in one run and
timed in another. XCORR_PEER_VERDICTS=FILE (set by scripts/sweep-scaling for the run it compares
with a finished one; a JSON object {case name: message}) replaces the cap's pilot: a case named
there is refused with the earlier message, every other case is timed.

Names and counters are xcorr_bench's: <variant>/<form>/hL:../wL:../hR:../wR:../nL:../nR:..
[/shifts:DY0:DY1,DX0:DX1 unless full][/norm:MODE unless none]; counters hL wL hR wR nL nR batch fmas FLOPS cold check_err
check_samples case_seconds (+ dy0 dy1 dx0 dx1 when windowed); the context has the xcorr_* keys and
xcorr_peer_versions. Exit status: 0 done (failed cases are error entries), 2 bad usage,
3 no torch or no usable GPU.
"""
from __future__ import annotations

import gc
import importlib.util
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from xcsuite import gpus, paths, peers, peerturn, reduce_peers
from xcsuite.benchjson import JsonOut, UsageError, aggregates, base_context, int_value, iteration_entry
from xcsuite.peers import (CHECK_SAMPLES, Case, CaseError, CupyCorrelate2d, FORMS, FULL_CHECK_FMAS_CPU,
                            NPP_STATUS_NAMES, NppUnavailable, PEERS, PEER_BY_NAME, ZNCC_TOLERANCE, case_error,
                            check_range, compare, cpu_reference_fmas, load_npp, make_peer, normalized_reference_np,
                            parse_case, sample_positions, sampled_normalized_reference, sampled_reference,
                            tolerance_for, window_reference_np, zncc_border_np)

STARTED = time.monotonic()  # the process's clock start, for the "ready" line (main)

MIN_ITERATION_S = 1e-4  # xcorr_bench's kMinIterationSeconds
MAX_BATCH = 256
DEFAULT_TIME_CAP_S = 2.0
# scripts/sweep-scaling's second run takes the first run's time-cap verdicts from this file (see
# earlier_verdicts): a pilot near the cap says "too slow" in one run and not in the other.
VERDICTS_ENV = "XCORR_PEER_VERDICTS"
CAP_REFUSAL = "too slow:"  # how the time cap's refusal opens (sweep_scaling finds the verdicts by it)


def registry() -> list[dict]:
    """`list --json`: entries like `xcorr list --json`, plus whether the peer can run here (its
    Python packages are importable, its libraries load; the GPU is found only when a case runs):
    the peers' (xcsuite/peers.py) and the reductions' (xcsuite/reduce_peers.py)."""
    return peers.registry() + reduce_peers.registry()


class NoGpuError(Exception):
    """No torch, no CUDA, no GPU: exit status 3."""


# --- the benchmark -----------------------------------------------------------------------------

@dataclass
class Options:
    min_time: float = 0.1
    batch: int = 0
    cold: bool = False
    seed: int = 42
    check_tolerance: float = 0.0
    time_cap: float = DEFAULT_TIME_CAP_S
    repetitions: int = 1
    out: str | None = None
    out_format: str = "json"
    filter: str | None = None
    list_tests: bool = False
    verdicts: dict | None = None  # earlier_verdicts(): {case name: refusal} replacing the time cap


def earlier_verdicts(path: str | None) -> dict | None:
    """The time cap's verdicts of the run this one is compared with, from the JSON file `path`
    ({case name as Case.name(): the message it was refused with}), or None where no file is given.
    The cap decides from one timed pilot call, so a case predicted near it (CuPy's 4096 pairs of
    64 x 64 at 2.05-2.5 s against 2 s) is refused in one run and measured in another: two runs that
    a wall-clock comparison (scripts/sweep-scaling) needs doing the same work would not. With
    the verdicts, a case named in them is refused with the earlier message and every other case is
    measured without a pilot, whatever the time cap would say this time."""
    if not path:
        return None
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{VERDICTS_ENV}={path}: not a file of earlier verdicts ({e})") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in data.items()):
        raise UsageError(f"{VERDICTS_ENV}={path}: not a file of earlier verdicts (an object of case name: message)")
    return data


class Gpu:
    """torch (and cupy where a case needs it) on device 0, with xcorr_bench's timing primitive."""

    def __init__(self):
        if importlib.util.find_spec("torch") is None:
            raise NoGpuError("torch is not installed (the peers need PyTorch with CUDA)")
        import torch
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            raise NoGpuError("no usable CUDA GPU found (torch.cuda.is_available() is False)")
        self.torch = torch
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        torch.cuda.set_device(0)
        self.device = torch.device("cuda", 0)
        self.props = torch.cuda.get_device_properties(0)
        self.stream = torch.cuda.current_stream()
        self.start = torch.cuda.Event(enable_timing=True)
        self.stop = torch.cuda.Event(enable_timing=True)
        self.flush_buf = None

    def seconds_per_call(self, calls: int, work) -> float:
        self.start.record()
        for _ in range(calls):
            work()
        self.stop.record()
        self.stop.synchronize()
        return self.start.elapsed_time(self.stop) * 1e-3 / calls

    def flush_l2(self):
        if self.flush_buf is None:
            l2 = int(getattr(self.props, "L2_cache_size", 0) or 64 << 20)
            self.flush_buf = self.torch.empty(2 * l2, dtype=self.torch.uint8, device=self.device)
        self.flush_buf.fill_(1)

    def uniform(self, shape, seed, lo=0.0, hi=1.0):
        g = self.torch.Generator(device=self.device)
        g.manual_seed(int(seed))
        t = self.torch.rand(shape, generator=g, device=self.device, dtype=self.torch.float32)
        return t if (lo, hi) == (0.0, 1.0) else t.mul_(hi - lo).add_(lo)


def _max_clocks_mhz() -> tuple[int, int]:
    """The first GPU's largest SM and memory clocks in MHz by nvidia-smi ("1980 MHz"), 0 where it
    cannot say."""
    first = (gpus.nvidia_smi(("clocks.max.sm", "clocks.max.mem")).get("gpus") or [{}])[0]
    def mhz(field):
        try:
            return int(float(first.get(field, "").split()[0]))
        except (IndexError, ValueError):
            return 0
    return mhz("clocks.max.sm"), mhz("clocks.max.mem")


def _kernel_driver_version() -> str:
    try:
        line = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
    except (OSError, IndexError):
        return "unknown"
    for word in line.split():
        if re.fullmatch(r"\d+(\.\d+)+", word):
            return word
    return "unknown"


def fp32_lanes(major: int, minor: int) -> int:
    """lib/gpu.cu's table: FP32 FMA units per SM."""
    if (major, minor) == (8, 0):
        return 64
    return 128 if major >= 8 else 64


def context(gpu: Gpu, opt: Options) -> dict:
    """xcorr_bench's context keys, from torch, cupy and nvidia-smi."""
    torch, p = gpu.torch, gpu.props
    sm_mhz = mem_mhz = 0
    versions = {"torch": torch.__version__, "torch_cuda": str(torch.version.cuda),
                "cudnn": str(torch.backends.cudnn.version())}
    driver_api = runtime = cufft = "unknown"
    try:
        import cupy
        rt = cupy.cuda.runtime
        sm_mhz = rt.deviceGetAttribute(13, 0) // 1000  # cudaDevAttrClockRate (kHz)
        mem_mhz = rt.deviceGetAttribute(36, 0) // 1000  # cudaDevAttrMemoryClockRate (kHz)
        ver = lambda v: f"{v // 1000}.{v % 1000 // 10}"
        driver_api, runtime = ver(rt.driverGetVersion()), ver(rt.runtimeGetVersion())
        cufft = str(cupy.cuda.cufft.getVersion())
        versions["cupy"] = cupy.__version__
    except Exception:  # cupy missing or partial: nvidia-smi and torch instead
        sm_mhz, mem_mhz = _max_clocks_mhz()
        runtime = str(torch.version.cuda)
    try:
        npp = load_npp()
        versions["npp"] = f"{npp.version()} ({npp.where})"
    except NppUnavailable:
        pass
    peak = 2.0 * p.multi_processor_count * fp32_lanes(p.major, p.minor) * sm_mhz * 1e6
    return {
        "xcorr_gpu_name": p.name,
        "xcorr_compute_capability": f"{p.major}.{p.minor}",
        "xcorr_sm_count": str(p.multi_processor_count),
        "xcorr_sm_clock_mhz": str(sm_mhz),
        "xcorr_mem_clock_mhz": str(mem_mhz),
        "xcorr_l2_bytes": str(int(getattr(p, "L2_cache_size", 0))),
        "xcorr_total_mem_bytes": str(int(p.total_memory)),
        "xcorr_fp32_peak_flops": f"{peak:.6f}",
        "xcorr_driver_version": _kernel_driver_version(),
        "xcorr_cuda_driver_api_version": driver_api,
        "xcorr_cuda_runtime_version": runtime,
        "xcorr_cufft_version": cufft,
        "xcorr_git_revision": paths.git_revision(),
        "xcorr_build_archs": " ".join(torch.cuda.get_arch_list()),
        "xcorr_build_type": "python",
        "xcorr_nvcc_version": "none (python -m xcsuite.peerbench)",
        "xcorr_cuda_flags": "none",
        "xcorr_peer_versions": "; ".join(f"{k}={v}" for k, v in versions.items()),
        "xcorr_min_time_s": f"{opt.min_time:.6f}",
        "xcorr_cold": "1" if opt.cold else "0",
        "xcorr_check": (f"inputs uniform [-1, 1) seeds {opt.seed + 2}, {opt.seed + 3}; full float64 reference "
                        f"(scipy, CPU) up to {int(FULL_CHECK_FMAS_CPU)} FMAs, else {CHECK_SAMPLES} sampled outputs "
                        f"(seed {opt.seed + 4}); normalize=zncc on 1000 + [-8, 8), absolute error <= "
                        f"{ZNCC_TOLERANCE:g}, zero-lag on 4 + [-1, 1), relative error (python/xcorr/_reference.py "
                        f"on the CPU, else sampled float64 sums on the GPU)"),
        **({"xcorr_check_tolerance": f"{opt.check_tolerance:.6e}"} if opt.check_tolerance > 0 else {}),
    }


class Bench:
    def __init__(self, gpu: Gpu, opt: Options):
        self.gpu, self.opt, self.torch = gpu, opt, gpu.torch

    def inputs(self, c: Case, seed: int, lo=0.0, hi=1.0):
        return (self.gpu.uniform((c.nL, c.hL, c.wL), seed, lo, hi),
                self.gpu.uniform((c.nR, c.hR, c.wR), seed + 1, lo, hi))

    def check(self, c: Case, peer):
        """(error, samples) or CaseError("validation failed: ..."): the relative error, for zncc
        the largest absolute error."""
        torch, opt = self.torch, self.opt
        L, R = self.inputs(c, opt.seed + 2, *check_range(c.normalize))
        out = peer(L, R)
        torch.cuda.synchronize()
        if tuple(out.shape) != c.out_shape:
            raise CaseError(f"validation failed: output shape {tuple(out.shape)}, expected {c.out_shape}")
        cpu_fmas = cpu_reference_fmas(c.pairs, c.hL, c.wL, c.hR, c.wR, c.window, c.normalize)
        if cpu_fmas <= FULL_CHECK_FMAS_CPU:
            Lh, Rh = L.cpu().double().numpy(), R.cpu().double().numpy()
            ref = (window_reference_np(c.form, Lh, Rh, c.window) if c.normalize == "none"
                   else normalized_reference_np(c.normalize, c.form, Lh, Rh, c.window))
            got = out.float().cpu().numpy()
            what = f"all {ref.size} outputs"
            border = zncc_border_np(c.form, Lh, Rh, c.window) if c.normalize == "zncc" else None
        else:
            pos = sample_positions(c.out_shape, CHECK_SAMPLES, np.random.default_rng(opt.seed + 4))
            ref = (sampled_reference(torch, c, L, R, pos) if c.normalize == "none"
                   else sampled_normalized_reference(torch, c, L, R, pos))
            border = None
            if c.normalize == "zncc":
                ref, border = ref
            got = out.reshape(-1)[torch.as_tensor(pos, device=out.device)].float().cpu().numpy()
            what = f"{len(pos)} sampled outputs"
        err, bad = compare(got, ref, c.normalize, border)
        tol = opt.check_tolerance if opt.check_tolerance > 0 else tolerance_for(c.normalize, c.variant)
        kind = "" if c.normalize == "none" else (", absolute error" if c.normalize == "zncc" else ", relative error")
        if bad:
            raise CaseError(f"validation failed: {bad} non-finite of {what} (err={err:.3e} over the rest, tol={tol:.3e})")
        if not err <= tol:
            raise CaseError(f"validation failed: err={err:.3e} > tol={tol:.3e} ({what}){kind}")
        return err, int(ref.size)

    def pilot_batch(self, c: Case, call) -> int:
        if self.opt.cold:
            return 1
        if c.batch:
            return c.batch
        t = self.gpu.seconds_per_call(3, call)
        return int(min(MAX_BATCH, max(1, math.ceil(MIN_ITERATION_S / t)))) if t > 0 else 1

    def run(self, c: Case):
        """Yields one entry dict per repetition (counters and times, or an error message)."""
        torch, opt = self.torch, self.opt
        try:
            if c.variant == "cupy-correlate2d" and importlib.util.find_spec("cupy") is None:
                raise CaseError("cupy is not installed")
            out_bytes = 4 * (c.nL * c.hL * c.wL + c.nR * c.hR * c.wR + c.pairs * c.out_shape[1] * c.out_shape[2])
            # The previous case's tensors sit in PyTorch's cache: free them, or they count as used
            # here and in the case's own allocations (a 19 GiB ZNCC once found 3.9 of 140 GiB free).
            gc.collect()
            torch.cuda.empty_cache()
            free, total = torch.cuda.mem_get_info()
            if out_bytes + (64 << 20) > free:
                raise CaseError(f"not enough GPU memory: this case needs {out_bytes / 2**30:.3g} GiB, "
                                f"{free / 2**30:.3g} GiB free of {total / 2**30:.3g}")
            peer = make_peer(c, torch)
            if isinstance(peer, CupyCorrelate2d):
                self.cap_cupy(c, peer)
            L, R = self.inputs(c, opt.seed)
            peer(L, R)  # warm-up: cuDNN autotuning, plans, kernel compilation
            torch.cuda.synchronize()
            err, samples = self.check(c, peer)
            L, R = self.inputs(c, opt.seed)
            torch.cuda.synchronize()
            call = lambda: peer(L, R)  # noqa: E731
            for r in self.timed(c, peer, call):
                yield {**r, "err": err, "samples": samples}
        except Exception as e:  # a library refusing the case: an error entry, like SkipWithError
            yield from ({"error": case_error(e, torch)} for _ in range(opt.repetitions))

    def timed(self, c, peer, call):
        """The pilot and the repetitions of `call` (peer's, or a reduction's for reduce_peers): one
        dict per repetition, Google Benchmark's iteration growth within each, all of it holding the
        peers' turn (several GPUs: no other peer timed meanwhile; xcsuite/peerturn.py)."""
        with peerturn.turn():
            yield from self._timed(c, peer, call)

    def _timed(self, c, peer, call):
        opt = self.opt
        batch = self.pilot_batch(c, call)
        target = opt.min_time / batch  # per-call time summed over iterations (manual time)
        iters = None
        noted: set = set()
        for _ in range(opt.repetitions):
            n = iters or 1
            while True:
                per_calls = []
                for _ in range(n):
                    if opt.cold:
                        self.gpu.flush_l2()
                    per_calls.append(self.gpu.seconds_per_call(batch, call))
                s = sum(per_calls)
                if iters is not None or s >= target or n >= 10**9:
                    break
                # Google Benchmark's growth: aim 40% over, at most 10x per round
                n = int(min(10 * n, max(n + 1, math.ceil(n * 1.4 * target / max(s, 1e-12)))))
            iters = n
            # NPP's positive NppStatus (e.g. a misaligned destination's slower path): noted once per case
            for st in sorted(set(getattr(peer, "warnings", ())) - noted):
                noted.add(st)
                print(f"peerbench: {c.name()}: NPP warning NppStatus {st} ({NPP_STATUS_NAMES.get(st, 'unknown')})",
                      file=sys.stderr)
            yield {"iterations": n, "real_time": s / n, "total": s, "batch": batch}

    def cap_cupy(self, c: Case, peer):
        """Refuses a case whose loop is predicted above the time cap per call (one pair, timed), or
        exactly the cases an earlier run refused where its verdicts are given (earlier_verdicts)."""
        if self.opt.verdicts is not None:
            if c.name() in self.opt.verdicts:
                said, whose = self.opt.verdicts[c.name()], f" (the run compared with, {VERDICTS_ENV})"
                raise CaseError(said if said.endswith(whose) else said + whose)
            return
        L, R = self.inputs(c, self.opt.seed)
        one = lambda: peer(L, R, limit=1)  # noqa: E731
        one()
        self.torch.cuda.synchronize()
        with peerturn.turn():  # a timing that decides: taken as the repetitions are
            t = self.gpu.seconds_per_call(1, one) * c.pairs
        if t > self.opt.time_cap:
            raise CaseError(f"{CAP_REFUSAL} predicted {t:.3g} s per call ({c.pairs} pairs, one correlate2d call each) "
                            f"> --time-cap {self.opt.time_cap:g} s")


def label(c: Case) -> str:
    """family, timed, precision; a normalized case's timed names the whole normalized computation."""
    p = PEER_BY_NAME[c.variant]
    timed = p["timed"] if c.normalize == "none" else f"normalize {c.normalize}: {p['normalized'][c.normalize]}"
    return f"family=peer;timed={timed};precision={p['precision']}"


def entry(c: Case, opt: Options, index: int, rep: int, r: dict, label: str) -> dict:
    run_name = f"{c.name()}/min_time:{opt.min_time / max(1, r.get('batch', 1)):.3f}/manual_time"
    e = iteration_entry(run_name, index, rep, opt.repetitions, r.get("error"))
    if "error" in r:
        return e
    e.update({"iterations": r["iterations"], "real_time": r["real_time"] * 1e6, "cpu_time": r.get("cpu", 0.0) * 1e6,
              "time_unit": "us", "hL": c.hL, "wL": c.wL, "hR": c.hR, "wR": c.wR, "nL": c.nL, "nR": c.nR,
              "batch": r["batch"], "cold": 1 if opt.cold else 0, "fmas": c.fmas,
              "FLOPS": 2.0 * c.fmas * r["iterations"] / r["total"] if r["total"] > 0 else 0.0,
              "check_err": r["err"], "check_samples": r["samples"]})
    if not c.full:
        e.update(dict(zip(("dy0", "dy1", "dx0", "dx1"), c.window)))
    e["label"] = label
    return e


def reduction_entry(rc, opt: Options, index: int, rep: int, r: dict) -> dict:
    """entry()'s fields for a reduction case (xcsuite/reduce_peers.py, RCase): named with
    /reduce:SPEC, with the counter mem_bytes."""
    e = entry(rc.pc, opt, index, rep, r, reduce_peers.label(rc))
    name = f"{rc.name()}/min_time:{opt.min_time / max(1, r.get('batch', 1)):.3f}/manual_time"
    e["name"] = e["run_name"] = name
    if "error" not in r:
        e["mem_bytes"] = float(r.get("mem", 0))
    return e


USAGE = """usage: python -m xcsuite.peerbench list [--json]
       python -m xcsuite.peerbench [--case SPEC]... [--cases FILE] [--min-time SECONDS] [--batch N] [--cold]
                                   [--seed N] [--check-tolerance X] [--time-cap S] [--benchmark_repetitions=N]
                                   [--benchmark_out=FILE] [--benchmark_out_format=json] [--benchmark_filter=RE]
  --case SPEC      variant= form= size= (or hL= wL= hR= wR=) nL= nR= batch=, at most one of window=,
                   max_shift=, shifts=, and normalize=none|zncc|zero-lag (torch peers; the name gains
                   /norm:MODE); without cases, every peer x form at 32 x 32
  --cases FILE     one SPEC per line (# starts a comment)
  --min-time S     GPU time per repetition in seconds (default 0.1)
  --batch N        calls per timed iteration (default: from a pilot)
  --cold           flush the L2 cache before every iteration (batch 1)
  --seed N         seed of the generated inputs (default 42)
  --check-tolerance X  hold every check to relative error X instead of 1e-5
  --time-cap S     cupy-correlate2d: a case predicted above S seconds per call is not run (default 2)
Reductions (peaks, the maximum over the rights; xcsuite/reduce_peers.py): xcorr-reduce, xcorr-reduce-batched, xcorr-map,
xcorr-map+torch, torch-reduce, torch-2dtm-circular, each with the case key reduce=SPEC.
Peers: torch-conv2d, torch-fft, cupy-correlate2d, npp-normlevel (window=valid normalize=zncc only; NPP from
XCORR_NPP_DIR, build-npp/, the CUDA toolkit or the nvidia-npp wheel) (the module's docstring says what each
computes and times).
"""


def parse_args(argv: list[str]) -> tuple[Options, list[str]]:
    opt, specs = Options(), []
    seen = set()  # the one-value options given: a second is refused, as xcorr_bench does (OptionSeen)
    i = 0
    while i < len(argv):
        a = argv[i]

        def value(flag):
            nonlocal i
            if a.startswith(flag + "="):
                return a[len(flag) + 1:]
            if i + 1 >= len(argv):
                raise UsageError(f"{flag} needs a value")
            i += 1
            return argv[i]

        def is_(flag, once=True):
            if not (a == flag or a.startswith(flag + "=")):
                return False
            if once and flag in seen:
                raise UsageError(f"{flag} is given twice")
            seen.add(flag)
            return True

        def positive(flag, text):
            try:
                v = float(text)
            except ValueError:
                v = float("nan")
            if not (v > 0 and math.isfinite(v)):
                raise UsageError(f"{flag} needs a positive number, got '{text}'")
            return v

        if is_("--case", once=False):
            specs.append(value("--case"))
        elif is_("--cases", once=False):
            path = value("--cases")
            try:
                text = Path(path).read_text()
            except OSError:
                raise UsageError(f"cannot read cases file {path}") from None
            specs += [ln.split("#", 1)[0] for ln in text.splitlines() if ln.split("#", 1)[0].strip()]
        elif is_("--min-time"):
            opt.min_time = positive("--min-time", value("--min-time"))
        elif is_("--batch"):
            opt.batch = int_value("--batch", value("--batch"), 1, 1 << 20)
        elif is_("--seed"):
            opt.seed = int_value("--seed", value("--seed"), 0, 2**63 - 1)
        elif is_("--check-tolerance"):
            opt.check_tolerance = positive("--check-tolerance", value("--check-tolerance"))
        elif is_("--time-cap"):
            opt.time_cap = positive("--time-cap", value("--time-cap"))
        elif a == "--cold":
            opt.cold = True
        elif a.startswith("--benchmark_repetitions="):
            opt.repetitions = int_value("--benchmark_repetitions", a.split("=", 1)[1], 1, 10**6)
        elif a.startswith("--benchmark_out="):
            opt.out = a.split("=", 1)[1]
        elif a.startswith("--benchmark_out_format="):
            opt.out_format = a.split("=", 1)[1]
            if opt.out_format != "json":
                raise UsageError("--benchmark_out_format: only json is written")
        elif a.startswith("--benchmark_filter="):
            opt.filter = a.split("=", 1)[1]
        elif a.startswith("--benchmark_list_tests"):
            opt.list_tests = a in ("--benchmark_list_tests", "--benchmark_list_tests=true", "--benchmark_list_tests=1")
        elif a.startswith(("--benchmark_report_aggregates_only", "--benchmark_display_aggregates_only")):
            pass  # every repetition and the aggregates go to the file; the console shows them all
        else:
            raise UsageError(f"unrecognized argument '{a}'")
        i += 1
    opt.verdicts = earlier_verdicts(os.environ.get(VERDICTS_ENV))
    return opt, specs


def smoke_specs() -> list[str]:
    counts = {"one-to-one": (1, 1), "one-to-many": (1, 4), "n-to-mn": (2, 4), "n-to-m": (2, 2)}
    return [f"variant={p['name']} form={f} {p.get('smoke', 'size=32')} nL={counts[f][0]} nR={counts[f][1]}"
            for p in PEERS for f in FORMS]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["list"]:
        if argv[1:] == ["--json"]:
            print(json.dumps(registry(), indent=1))
        elif not argv[1:]:
            for v in registry():
                state = "available" if v["available"] else v["unavailable_reason"]
                print(f"{v['name']}  [peer, fp32, {state}]\n    {v['summary']}\n    forms: {' '.join(v['forms'])}\n"
                      f"    windows: {' '.join(v['windows'])}\n    normalize: {' '.join(v['normalizations'])}\n"
                      f"    timed: {v['timed']}")
        else:
            print("peerbench: error: list takes only --json", file=sys.stderr)
            return 2
        return 0
    if any(a in ("-h", "--help") for a in argv):
        print(USAGE, end="")
        return 0
    try:
        opt, specs = parse_args(argv)
        cases = [reduce_peers.parse_rcase(s, opt.batch) if reduce_peers.is_reduce_spec(s) else parse_case(s, opt.batch)
                 for s in (specs or smoke_specs())]
        if opt.filter:
            try:
                rx = re.compile(opt.filter)
            except re.error as e:
                raise UsageError(f"--benchmark_filter: {e}") from None
            cases = [c for c in cases if rx.search(c.name())]
        if opt.list_tests:
            for c in cases:
                print(c.name())
            return 0
        gpu = Gpu()
    except UsageError as e:
        print(f"peerbench: error: {e}", file=sys.stderr)
        return 2
    except NoGpuError as e:
        print(f"peerbench: no GPU: {e}", file=sys.stderr)
        return 3
    ctx = {**base_context("python -m xcsuite.peerbench"), **context(gpu, opt)}
    bench = Bench(gpu, opt)
    out = JsonOut(opt.out, ctx)
    # Where a process's time goes, in its log (stdout): the start-up, and per case the part until
    # its first repetition (the peer's set-up, its first call with cuDNN's autotuning and plans, the
    # validation against the float64 reference, on several GPUs the wait for the peers' turn, the
    # pilot) against the whole (notes/multi-gpu.md).
    print(f"# peerbench: ready in {time.monotonic() - STARTED:.2f} s (the imports and the CUDA context)")
    print(f"{'Benchmark':<90} {'Time':>14} {'Iterations':>10}")
    try:
        for idx, c in enumerate(cases):
            times = []
            base = None
            reduction = isinstance(c, reduce_peers.RCase)
            began, first, waited = time.monotonic(), None, peerturn.waited()
            for rep, r in enumerate(reduce_peers.run_case(bench, c) if reduction else bench.run(c)):
                first = time.monotonic() if first is None else first
                e = reduction_entry(c, opt, idx, rep, r) if reduction else entry(c, opt, idx, rep, r, label(c))
                if "error" not in r:  # xcorr_bench's counter: the case's wall seconds so far
                    e["case_seconds"] = time.monotonic() - began
                base = e
                out.add(e)
                if "error" in r:
                    print(f"{e['name']:<90} ERROR OCCURRED: '{r['error']}'", flush=True)
                else:
                    times.append(e["real_time"])
                    print(f"{e['name']:<90} {e['real_time']:>11.3f} us {e['iterations']:>10}", flush=True)
            for a in aggregates(base, times, opt.repetitions) if base and times else []:
                out.add(a)
            if first is not None:
                waited = peerturn.waited() - waited
                print(f"# {c.name()}: {time.monotonic() - began:.2f} s, {first - began:.2f} s of it "
                      "until the first repetition was measured"
                      + (f" ({waited:.2f} s of that waiting for the peers' turn)" if os.environ.get(peerturn.ENV) else ""),
                      flush=True)
    finally:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
