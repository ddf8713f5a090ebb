#!/usr/bin/env python3
"""A stand-in for build/xcorr and build/xcorr_bench, for the CPU tests of the experiment scripts.

    fake_xcorr.py xcorr list --json | info
    fake_xcorr.py xcorr_bench --cases FILE --min-time S --benchmark_repetitions=N ... --benchmark_out=F
    fake_xcorr.py peerbench list --json | --cases FILE ...   (python -m xcsuite.peerbench: the peers)

It writes Google Benchmark JSON in the format of the real binary (context with xcorr_* strings,
one "iteration" entry per repetition, then mean/median/stddev/cv aggregates), with times from a
simple deterministic model (one repetition per case is a slow outlier). Environment:
FAKE_REGISTRY (registry JSON; default: tests/build_registry.py's), FAKE_NO_GPU=1 (info exits 3), FAKE_LOG (appends one line per
bench invocation: the case lines), FAKE_CRASH_ON=substring (the bench aborts when it reaches a
matching case, leaving a truncated output file as a killed process would), FAKE_REJECT=substring
(exits 2 before running anything, like an unknown parameter), FAKE_ERROR_ON=substring (every
repetition of that case reports error_occurred with FAKE_ERROR_MESSAGE, default: too little GPU
memory), FAKE_SLEEP=seconds (per case),
FAKE_HANG_ON=substring (on reaching a matching case, writes its pid to FAKE_PIDFILE and sleeps for
an hour, like a hung kernel: everything before it is in the output file), FAKE_GPU_NAME,
FAKE_REVISION (the git revision the binary reports; default fake123), FAKE_TIME_SCALE=x (every
time x times the model's: a slower build, for scripts/dev/ab-bench's tests), FAKE_PEERS_FILE (the
peers' list as JSON, written by suite_helpers.make_fake_build for its peerbench: not computed again).
Several GPUs: FAKE_GPUS=N (default 1, or as many as FAKE_GPU_NAMES names) and FAKE_GPU_NAMES=A,B,...
(each device's name; default FAKE_GPU_NAME for all); the device a process uses is the first entry
of CUDA_VISIBLE_DEVICES (an index or the fake UUID GPU-fake-<i>, default 0); the nvidia-smi role
(`fake_xcorr.py nvidia-smi --query-gpu=F,... --format=csv,noheader` or `-L`) lists them. With
FAKE_ONLY_DEVICE=i, FAKE_CRASH_ON and FAKE_HANG_ON act on device i only; FAKE_SLOW_DEVICE=i sleeps
FAKE_SLOW_FACTOR times FAKE_SLEEP per case on device i (a GPU slower than the estimates). The peerbench role lists
PEERS (FAKE_PEERS_UNAVAILABLE=name,... marks those unavailable) and logs to FAKE_PEER_LOG instead;
it sleeps FAKE_PEER_SETUP seconds per case (the set-up) and then FAKE_SLEEP holding the peers' turn
(xcsuite/peerturn.py), appending "start end device turn-file" to FAKE_PEER_TURN_LOG.
Windows (window=, max_shift=, shifts=) as xcorr_bench takes them: a window the variant does not
declare is refused (exit 2); a windowed case is named with /shifts:DY0:DY1,DX0:DX1 after nR and
carries the counters dy0 dy1 dx0 dx1, its fmas the window's (resolved by xcsuite.spec.Shape).
normalize=none|zncc|zero-lag as xcorr_bench takes it (any variant, form and window; another value
exits 2): a normalized case is named with /norm:MODE after the shifts segment and takes longer
(the normalization's means, sums and epilogue around the raw run); the peerbench role takes the
modes of each peer's "normalizations" (cupy-correlate2d: none; npp-normlevel: zncc, and only the
valid window) and refuses the others.
"""
from __future__ import annotations  # (Path in annotations, imported where used)

import os
import sys
import time

# json and pathlib are imported by the functions that use them: the nvidia-smi role, 40% of the
# processes a test run starts, needs neither, and their imports (re among them) were half of its
# ~60 ms of CPU.
HERE = os.path.dirname(os.path.realpath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def _numpy_on_first_use():
    """NumPy only once something of it is used: xcsuite.benchjson imports it at its top for its
    aggregates, which no role here computes, and its import was most of a fake process's start (0.2
    of 0.3 s of CPU; the suite's tests start hundreds of them). A stand-in module in sys.modules
    imports the real one at its first attribute (`import numpy` alone reads only __spec__, which it has)."""
    import importlib
    import importlib.util
    import types

    spec = importlib.util.find_spec("numpy") if "numpy" not in sys.modules else None
    if spec is None:
        return

    class NumpyOnFirstUse(types.ModuleType):
        def __getattr__(self, name):
            if sys.modules.get("numpy") is self:
                del sys.modules["numpy"]
            real = importlib.import_module("numpy")
            self.__dict__.update(real.__dict__)
            return getattr(real, name)

    stand_in = NumpyOnFirstUse("numpy")
    stand_in.__spec__ = spec
    sys.modules["numpy"] = stand_in


# xcsuite's modules (the case syntax, the shapes, the peers' turn) and the registry's file are
# loaded by the roles that use them, not by every process: `nvidia-smi`, `xcorr info` and the
# lists, most of the processes a run starts, need none of them (start-up is most of their cost).
def _xcsuite():
    """xcsuite's spec, benchjson and peerturn, imported at first use (the repository root is not installed)."""
    if __name__ == "__main__":  # (imported by a test, the test's own NumPy)
        _numpy_on_first_use()
    from xcsuite import benchjson, peerturn, spec
    return spec, benchjson, peerturn


def registry_file() -> Path:
    """The variants: the build's `xcorr list --json` with the fixture's for those it lacks, the list
    the tests expand experiments with (tests/build_registry.py); FAKE_REGISTRY: another file."""
    from pathlib import Path
    if "FAKE_REGISTRY" in os.environ:
        return Path(os.environ["FAKE_REGISTRY"])
    from build_registry import registry_path  # (tests/, the script's own folder)

    return registry_path()


_PEERS = [{"name": n, "family": "peer", "summary": "a peer", "timed": "everything", "precision": "fp32",
          "tolerance": 1e-05, "forms": ["one-to-one", "one-to-many", "n-to-mn", "n-to-m"],
          "windows": ["full", "valid", "same", "max-shift", "shifts"], "params": {},
          "normalizations": ["none"] if n == "cupy-correlate2d" else ["none", "zncc", "zero-lag"]}
         for n in ("torch-conv2d", "torch-fft", "cupy-correlate2d")]
# npp-normlevel: NPP's valid-mode ZNCC, the valid window and zncc only (xcsuite/peers.py)
_PEERS.append({**_PEERS[0], "name": "npp-normlevel", "windows": ["valid"], "normalizations": ["zncc"]})
# torch-conv2d-tf32: cuDNN with TF32 allowed, raw sums only, its own precision and bound
_PEERS.append({**_PEERS[0], "name": "torch-conv2d-tf32", "precision": "tf32", "tolerance": 2e-3, "normalizations": ["none"]})


def all_peers():
    """PEERS: the peers above and the reductions' variants (xcsuite/reduce_peers.py: the case key
    reduce=), read when first asked for (the peerbench role, a test's import of PEERS), not by every
    process: reduce_peers imports the peers' module and NumPy. A fake build's peerbench
    (suite_helpers.make_fake_build) names in FAKE_PEERS_FILE this list as the test's process computed
    it, the same code's, so that its processes skip that import."""
    import json
    from pathlib import Path
    if "PEERS" not in globals() and os.environ.get("FAKE_PEERS_FILE"):
        try:
            globals()["PEERS"] = json.loads(Path(os.environ["FAKE_PEERS_FILE"]).read_text())
        except (OSError, ValueError):
            pass  # computed below
    if "PEERS" not in globals():
        from xcsuite.reduce_peers import registry as reduce_registry
        _PEERS.extend({k: v for k, v in p.items() if k not in ("available", "unavailable_reason")}
                      for p in reduce_registry())
        globals()["PEERS"] = _PEERS
    return globals()["PEERS"]


def __getattr__(name):  # `fake_xcorr.PEERS`, `from fake_xcorr import PEERS`
    if name == "PEERS":
        return all_peers()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def peers():
    off = set(os.environ.get("FAKE_PEERS_UNAVAILABLE", "").split(","))
    return [{**p, "available": p["name"] not in off, "unavailable_reason": "not installed" if p["name"] in off else ""}
            for p in all_peers()]


def gpu_names():
    default = os.environ.get("FAKE_GPU_NAME", "Fake GPU 9000")
    names = [n for n in os.environ.get("FAKE_GPU_NAMES", "").split(",") if n]
    n = int(os.environ.get("FAKE_GPUS") or len(names) or 1)
    return [names[i] if i < len(names) else default for i in range(n)]


def uuid(i: int) -> str:
    return f"GPU-fake-{i}"


def device_index() -> int:
    """The device this process measures: CUDA's device 0 of CUDA_VISIBLE_DEVICES."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    if first.startswith("GPU-fake-"):
        first = first[len("GPU-fake-"):]
    i = int(first) if first.isdigit() else -1
    if not 0 <= i < len(gpu_names()):
        print(f"fake: no such device {first!r}", file=sys.stderr)
        sys.exit(3)
    return i


def nvidia_smi(args):
    names = gpu_names()
    if args[:1] == ["-L"]:
        for i, n in enumerate(names):
            print(f"GPU {i}: {n} (UUID: {uuid(i)})")
        return 0
    fields = next(a.split("=", 1)[1] for a in args if a.startswith("--query-gpu=")).split(",")
    for i, n in enumerate(names):
        known = {"index": str(i), "name": n, "uuid": uuid(i), "pci.bus_id": f"00000000:{i + 1:02X}:00.0"}
        print(", ".join(known.get(f, "[N/A]") for f in fields))
    return 0


def on_this_device() -> bool:
    only = os.environ.get("FAKE_ONLY_DEVICE")
    return not only or int(only) == device_index()


GPU = gpu_names()[0]
PEAK = 66.9e12
RATES = {"overlap-wise": 1.3e12, "warp-per-overlap": 1.0e12, "split-row": 2.5e12, "grouped-overlap": 4e12,
         "multi-matrix-right+split-row": 5e12, "multi-matrix-right+grouped-overlap": 9e12,
         "multi-matrix-both+grouped-overlap": 12e12, "register-tiled": 30e12, "multi-matrix-tiled": 30e12}


def context():
    return {"xcorr_gpu_name": GPU, "xcorr_compute_capability": "9.0", "xcorr_sm_count": "132",
            "xcorr_sm_clock_mhz": "1980", "xcorr_mem_clock_mhz": "3201", "xcorr_l2_bytes": "62914560",
            "xcorr_total_mem_bytes": "150000000000", "xcorr_fp32_peak_flops": str(PEAK),
            "xcorr_driver_version": "13.0", "xcorr_cuda_runtime_version": "13.0", "xcorr_cufft_version": "12000",
            "xcorr_git_revision": os.environ.get("FAKE_REVISION", "fake123"), "xcorr_build_archs": "9.0", "xcorr_build_type": "release",
            "xcorr_nvcc_version": "13.0", "xcorr_cuda_flags": "-O3",
            # the real binaries' record of the library's switches set (harness/context.cpp)
            **({"xcorr_environment": os.environ["FAKE_ENVIRONMENT"]} if os.environ.get("FAKE_ENVIRONMENT") else {})}


def shape_of(kv, window="full"):
    Shape = _xcsuite()[0].Shape
    return Shape(kv["form"], *(int(kv[k]) for k in ("hL", "wL", "hR", "wR", "nL", "nR")), window=window,
                 normalize=kv.get("normalize", "none"))


def call_time(kv, shape):
    h = {k: int(kv[k]) for k in ("hL", "wL", "hR", "wR", "nL", "nR")}
    pairs = shape.pairs
    fmas = shape.fmas  # the window's
    v = kv["variant"]
    if v.startswith("fft") or v == "torch-fft":
        t = 2e-5 + pairs * (h["hL"] + h["hR"]) * (h["wL"] + h["wR"]) * 8e-12
        if v == "fft+plan":
            t += 5e-3
        return t * norm_factor(shape), fmas
    rate = RATES.get(v, 2e12)
    for p in ("overlaps", "rights", "lefts"):  # bigger groupings are faster in this model
        if p in kv and kv[p].isdigit():
            rate *= 1 + 0.1 * int(kv[p])
    if kv.get("rows") == "1":
        rate *= 1.2
    return (3e-6 + fmas / rate) * norm_factor(shape), fmas


def norm_factor(shape):
    """The normalized computation around the raw run costs more in this model."""
    return {"none": 1.0, "zncc": 1.5, "zero-lag": 1.1}[shape.normalize]


def run_name(kv, params, shape):
    dims = "/".join(f"{k}:{kv[k]}" for k in ("hL", "wL", "hR", "wR", "nL", "nR"))
    w = f"/shifts:{shape.shifts_text}" if shape.shifts_text else ""
    w += f"/norm:{shape.normalize}" if shape.normalize != "none" else ""
    ps = "".join(f"/{k}:{params[k]}" for k in sorted(params))
    return f"{kv['variant']}/{kv['form']}/{dims}{w}{ps}"


def bench(args, role="xcorr_bench"):
    import json
    from pathlib import Path
    import hashlib

    spec, benchjson, peerturn = _xcsuite()
    NORMALIZATIONS, supports_window = spec.NORMALIZATIONS, spec.supports_window
    UsageError, parse_case_line = benchjson.UsageError, benchjson.parse_case_line  # xcorr_bench's case syntax
    opts = {}
    for a in args:
        if a.startswith("--") and "=" in a:
            k, v = a[2:].split("=", 1)
            opts[k] = v
    it = iter(args)
    cases_file, min_time, cold = None, 0.1, False
    for a in it:
        if a == "--cases":
            cases_file = next(it)
        elif a == "--min-time":
            min_time = float(next(it))
        elif a == "--cold":
            cold = True
    reps = int(opts.get("benchmark_repetitions", 1))
    out = opts["benchmark_out"]
    lines = [l.strip() for l in Path(cases_file).read_text().splitlines() if l.strip() and not l.startswith("#")]
    log = os.environ.get("FAKE_PEER_LOG" if role == "peerbench" else "FAKE_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps(lines) + "\n")
    registry = {v["name"]: v for v in (peers() if role == "peerbench" else json.loads(registry_file().read_text()))}
    cases = []
    for line in lines:
        try:
            parsed = parse_case_line(line)
        except UsageError as e:
            print(f"xcorr_bench: error: {e}", file=sys.stderr)
            return 2
        kv = {**parsed.keys, **({parsed.window_key: parsed.window_value} if parsed.window_key else {})}
        var = registry.get(kv["variant"])
        if var is None or (os.environ.get("FAKE_REJECT") and os.environ["FAKE_REJECT"] in line):
            print(f"xcorr_bench: error: unknown or bad case '{line}'", file=sys.stderr)
            return 2
        if kv.get("normalize", "none") not in var.get("normalizations", NORMALIZATIONS):
            print(f"xcorr_bench: error: case '{line}': normalize=: unknown or unsupported mode", file=sys.stderr)
            return 2
        window = parsed.window
        try:
            shape = shape_of(kv, window)
        except ValueError as e:
            print(f"xcorr_bench: error: case '{line}': {e}", file=sys.stderr)
            return 2
        if not supports_window(var.get("windows", ["full"]), shape):
            print(f"xcorr_bench: error: case '{line}': {kv['variant']} does not compute the {window} window",
                  file=sys.stderr)
            return 2
        params = {k: v[0] for k, v in var["params"].items()}
        for k in list(kv):
            if k in var["params"]:
                params[k] = kv.pop(k)
        cases.append((line, kv, params, shape))
    f = open(out, "w")
    f.write(json.dumps({"context": {"date": "2026-11-21T03:00:00+00:00", "host_name": "fake",
                                    "executable": role, "num_cpus": 16, "library_build_type": "release",
                                    **context(), "xcorr_cold": "1" if cold else "0"}}, indent=2)[:-2] + ',\n  "benchmarks": [\n')
    first = True
    for i, (line, kv, params, shape) in enumerate(cases):
        if os.environ.get("FAKE_CRASH_ON") and os.environ["FAKE_CRASH_ON"] in line and on_this_device():
            f.close()
            print("xcorr_bench: CUDA error: an illegal memory access was encountered", file=sys.stderr)
            os._exit(134)
        if os.environ.get("FAKE_HANG_ON") and os.environ["FAKE_HANG_ON"] in line and on_this_device():
            if os.environ.get("FAKE_PIDFILE"):
                tmp = os.environ["FAKE_PIDFILE"] + ".tmp"
                Path(tmp).write_text(str(os.getpid()))
                os.replace(tmp, os.environ["FAKE_PIDFILE"])  # whole or absent for the test that polls it
            time.sleep(3600)
        case_began = time.monotonic()
        sleep = float(os.environ.get("FAKE_SLEEP", "0")) * (float(os.environ.get("FAKE_SLOW_FACTOR", "1"))
                                                            if str(device_index()) == os.environ.get("FAKE_SLOW_DEVICE")
                                                            else 1.0)
        if role == "peerbench":  # as peerbench: the set-up outside the peers' turn, the timing inside it
            time.sleep(float(os.environ.get("FAKE_PEER_SETUP", "0")))
            with peerturn.turn():
                began = time.time()
                time.sleep(sleep)
                if os.environ.get("FAKE_PEER_TURN_LOG"):
                    with open(os.environ["FAKE_PEER_TURN_LOG"], "a") as log:
                        log.write(f"{began} {time.time()} {device_index()} {os.environ.get(peerturn.ENV, '')}\n")
        else:
            time.sleep(sleep)
        name = run_name(kv, params, shape) + f"/min_time:{min_time:.3f}/repeats:{reps}/manual_time"
        base = {"name": name, "family_index": i, "per_family_instance_index": 0, "run_name": name,
                "run_type": "iteration", "repetitions": reps, "threads": 1}
        entries = []
        if os.environ.get("FAKE_ERROR_ON") and os.environ["FAKE_ERROR_ON"] in line:
            # Google Benchmark drops the counters of an errored run: name and message only.
            message = os.environ.get("FAKE_ERROR_MESSAGE", "too little GPU memory for this problem")
            entries += [{**base, "repetition_index": r, "error_occurred": True, "error_message": message}
                        for r in range(reps)]
        else:
            t, fmas = call_time(kv, shape)
            t *= float(os.environ.get("FAKE_TIME_SCALE", "1"))
            seed = int(hashlib.sha256(line.encode()).hexdigest()[:8], 16)
            times = []
            for r in range(reps):
                noise = 1 + 0.004 * (((seed >> (r % 24)) & 7) - 3.5) / 3.5
                tr = t * noise * (1.6 if r == reps - 1 and reps >= 5 else 1.0)
                times.append(tr)
                e = {**base, "repetition_index": r, "iterations": max(1, int(min_time / t)), "real_time": tr * 1e6,
                     "cpu_time": 1.0, "time_unit": "us", "FLOPS": 2 * fmas / tr, "batch": 1, "cold": int(cold),
                     "fmas": float(fmas), **{k: int(kv[k]) for k in ("hL", "wL", "hR", "wR", "nL", "nR")},
                     "label": f"family={registry[kv['variant']]['family']};timed=kernel;precision=fp32"}
                if shape.shifts_text:
                    e.update(zip(("dy0", "dy1", "dx0", "dx1"), map(int, shape.shifts())))
                if kv["variant"].startswith("fft"):
                    e["finish_time"] = 1e-6
                # the bench's wall seconds of the case so far: its sleep, else the repetitions' times
                e["case_seconds"] = time.monotonic() - case_began + sum(times) * 3
                entries.append(e)
            mean = sum(times) / len(times)
            for agg in ("mean", "median", "stddev", "cv"):
                entries.append({**base, "name": name + "_" + agg, "run_type": "aggregate", "aggregate_name": agg,
                                "aggregate_unit": "time" if agg != "cv" else "percentage", "iterations": reps,
                                "real_time": mean * 1e6, "cpu_time": 1.0, "time_unit": "us"})
        for e in entries:
            f.write(("" if first else ",\n") + "    " + json.dumps(e))
            first = False
        f.flush()
    f.write("\n  ]\n}\n")
    f.close()
    return 0


def main():
    import json
    global GPU
    role, args = sys.argv[1], sys.argv[2:]
    if role == "nvidia-smi":
        return nvidia_smi(args)
    if role in ("xcorr", "xcorr_bench", "peerbench"):
        GPU = gpu_names()[device_index()]
    if role == "xcorr":
        if args[:1] == ["list"]:
            print(registry_file().read_text())
            return 0
        if args[:1] == ["info"]:
            if os.environ.get("FAKE_NO_GPU"):
                print("xcorr: no GPU: no usable CUDA GPU found (fake)", file=sys.stderr)
                return 3
            print(json.dumps(context()))
            return 0
        return 2
    if role == "peerbench" and args[:1] == ["list"]:
        print(json.dumps(peers()))
        return 0
    return bench(args, role)


if __name__ == "__main__":
    sys.exit(main())
