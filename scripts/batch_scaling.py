#!/usr/bin/env python3
"""How a host batch scales over the GPUs of a host (issue #24's second target: a 2-GPU n-to-m batch
at least 1.8x one GPU's throughput): xcorr.correlate2d(left, right, devices=[...]) on NumPy arrays,
timed as a user calls it (host in, host out: the copies are part of it), on the first 1, 2, ...
GPUs of --gpus; the best of --repeat calls after one warm-up call each, and the result checked
against the one-GPU result (they must agree to 1e-5). Twice per GPU count: a fresh result array per
call (what a plain call costs, first-touch page faults of the new array included) and out= a
result array reused from call to call (what a loop over batches costs: the GPUs' throughput with the
copies, no page faults); their difference per GPU count is `fresh_overhead_seconds`; and out= in
page-locked memory reused (xcorr.empty_pinned: the GPUs download into it directly, no host copy;
`seconds_out_pinned`, where the package has empty_pinned); each best call's phases per device
(setup, pipeline, teardown: xcorr._api.last_batch) as `phases_*`. Beside them,
`first_touch_seconds`: a fresh NumPy array of the result's size written once by one host thread (the
page-fault cost the fresh calls pay, spread over the devices' threads). Prints and writes JSON with
the GPUs, the driver, the package's build and the git revision.

    python scripts/batch_scaling.py [--form n-to-m] [--left 64:96x96] [--right 4096:96x96]
                                    [--max-shift 16] [--algorithm auto] [--gpus all] [--chunk N]
                                    [--split auto|lefts|blocks] [--repeat 3] [--out F]
Needs a GPU (exit 3 without one, with the reason)."""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def stack(text, what):
    """"N:HxW" -> (N, H, W)."""
    try:
        n, hw = text.split(":") if ":" in text else ("1", text)
        h, w = hw.lower().split("x")
        shape = (int(n), int(h), int(w))
    except ValueError:
        raise ValueError(f"{what} {text!r}: expected N:HxW, e.g. 64:96x96") from None
    if min(shape) < 1:
        raise ValueError(f"{what} {text!r}: every size must be positive")
    return shape


def git_revision():
    rev = os.environ.get("XCORR_GIT_REVISION")
    if rev:
        return rev
    r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                       cwd=os.path.dirname(os.path.abspath(__file__)))
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--form", default="n-to-m", choices=["one-to-many", "n-to-m", "n-to-mn"])
    ap.add_argument("--left", default="64:96x96")
    ap.add_argument("--right", default="4096:96x96")
    ap.add_argument("--max-shift", type=int, default=16, help="the window (-1: the full output)")
    ap.add_argument("--algorithm", default="auto", help="what each GPU runs (auto: what it picks)")
    ap.add_argument("--gpus", default="all", help="'all' or device indices, e.g. 0,1")
    ap.add_argument("--chunk", type=int, default=None, help="at most this many output matrices per piece")
    ap.add_argument("--split", choices=["auto", "lefts", "blocks"], default=None,
                    help="how n-to-m runs are cut (the package's default: auto)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args(argv)
    try:
        ls, rs = stack(args.left, "--left"), stack(args.right, "--right")
    except ValueError as e:
        ap.error(str(e))
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    import xcorr
    try:
        info = xcorr.gpu_info()
    except xcorr.NoGPUError as e:
        print(f"batch_scaling: no GPU: {e}", file=sys.stderr)
        return 3
    try:
        devices = xcorr._xcorr.parse_devices(args.gpus)
    except ValueError as e:
        ap.error(str(e))
    rng = np.random.default_rng(0)
    left = rng.random(ls, dtype=np.float32)
    right = rng.random(rs, dtype=np.float32)
    window = {} if args.max_shift < 0 else {"max_shift": args.max_shift}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,clocks.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip().splitlines()
    except OSError as e:  # a container without the tool: the JSON says so instead of the run failing
        smi = [f"nvidia-smi not run: {e}"]
    result = {"gpu": info["name"], "nvidia_smi": smi, "git_revision": git_revision(),
              "form": args.form, "left": list(ls), "right": list(rs), "window": window, "chunk": args.chunk,
              "algorithm": args.algorithm, "split": args.split,
              "repeat": args.repeat, "runs": []}
    def phases():
        """each device's setup/pipeline/teardown seconds of the package's last batch call (None where
        the package does not record them)"""
        api = getattr(xcorr, "_api", None)
        last = getattr(api, "last_batch", None) if api is not None else None
        return last["seconds"] if last else None

    def best_of(fn):
        """(the best of --repeat timed calls after a warm-up call: plans, cuFFT, contexts, the last
        result, the best call's phases per device)"""
        res = fn()
        best, best_phases = float("inf"), None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = fn()
            took = time.perf_counter() - t0
            if took < best:
                best, best_phases = took, phases()
        return best, res, best_phases

    def first_touch(shape):
        """(seconds to allocate and write a fresh float32 array of `shape` once, one thread)"""
        t0 = time.perf_counter()
        np.empty(shape, np.float32).fill(0)
        return time.perf_counter() - t0

    one = None
    reused = None  # the out= array of the reused-output timing
    pinned = None  # the page-locked out= array (xcorr.empty_pinned), where the package has it
    for k in range(1, len(devices) + 1):
        def call(out=None):
            return xcorr.correlate2d(left, right, form=args.form, devices=devices[:k], chunk=args.chunk, out=out,
                                     algorithm=args.algorithm, split=args.split,
                                     **window)
        best, out, phases_fresh = best_of(call)
        if reused is None:
            reused = np.empty_like(out)
            result["first_touch_seconds"] = min(first_touch(out.shape) for _ in range(args.repeat))
        best_reused, got, phases_reused = best_of(lambda: call(reused))
        if pinned is None and hasattr(xcorr, "empty_pinned"):
            pinned = xcorr.empty_pinned(out.shape)
        best_pinned, got_pinned, phases_pinned = best_of(lambda: call(pinned)) if pinned is not None else (None, None, None)
        if one is None:
            one = out.copy()
        err = max(float(np.linalg.norm(r - one) / np.linalg.norm(one)) for r in (out, got, got_pinned) if r is not None)
        first = result["runs"][0] if result["runs"] else None
        pairs = out.size // (out.shape[-2] * out.shape[-1])
        run = {"devices": devices[:k], "seconds": best, "speedup": first["seconds"] / best if first else 1.0,
               "seconds_out_reused": best_reused,
               "speedup_out_reused": first["seconds_out_reused"] / best_reused if first else 1.0,
               "fresh_overhead_seconds": best - best_reused,
               "pairs_per_second": pairs / best, "pairs_per_second_out_reused": pairs / best_reused,
               "difference_to_one_gpu": err, "output_gb": out.nbytes / 1e9,
               "phases_fresh": phases_fresh, "phases_out_reused": phases_reused}
        last = getattr(getattr(xcorr, "_api", None), "last_batch", None)
        if last and last.get("pieces"):  # what the GPUs ran (auto's pick per piece shape)
            run["algorithms_run"] = sorted({piece[3] for piece in last["pieces"]})
        if best_pinned is not None:
            run.update({"seconds_out_pinned": best_pinned,
                        "speedup_out_pinned": first["seconds_out_pinned"] / best_pinned if first else 1.0,
                        "pairs_per_second_out_pinned": pairs / best_pinned, "phases_out_pinned": phases_pinned})
        result["runs"].append(run)
        if k == 1:
            print(f"fresh {run['output_gb']:.2f} GB array written once (one thread): "
                  f"{result['first_touch_seconds'] * 1e3:.1f} ms", flush=True)
        print(f"{k} GPU(s) {devices[:k]}: {best * 1e3:9.1f} ms (out= reused: {best_reused * 1e3:9.1f} ms), speed-up "
              f"{run['speedup']:.2f}x ({run['speedup_out_reused']:.2f}x), difference to one GPU {err:.1e}", flush=True)
        if best_pinned is not None:
            print(f"    out= page-locked, reused: {best_pinned * 1e3:9.1f} ms, speed-up {run['speedup_out_pinned']:.2f}x",
                  flush=True)
        for label, ph in (("fresh", phases_fresh), ("out= reused", phases_reused), ("out= pinned", phases_pinned)):
            for d in ph or []:  # with the split the device ran, where the package reports it
                print(f"    {label:11s} GPU {d['device']}: setup {d['setup'] * 1e3:7.1f} ms, pipeline "
                      f"{d['pipeline'] * 1e3:7.1f} ms, teardown {d['teardown'] * 1e3:7.1f} ms"
                      + (f", split {d['split']}" if "split" in d else ""), flush=True)
        if err > 1e-5:
            print("batch_scaling: the split result differs from the one-GPU result", file=sys.stderr)
            return 1
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
