#!/usr/bin/env python3
"""What the Python call adds to the kernel time (issue #23's target: at most 5 us).

For a few cases, on one stream, CUDA events around `calls` back-to-back calls of:
  bare        Plan.execute from C++ (the binding's time_execute_ptr loop: no Python per call)
  plan        xcorr.Plan.__call__(left, right, out=out, stream=s)  (PyTorch tensors: the fast path,
              raw pointers to execute_ptr)
  plan_current xcorr.Plan.__call__(left, right, out=out)           (the current stream looked up)
  dlpack      the plan's general path (Plan._call: DLPack export and import of the three arrays),
              what every call took before the fast path
  correlate2d xcorr.correlate2d(left, right, out=out)               (plan cache, current stream)
  alloc       xcorr.correlate2d(left, right)                        (a new result each call)
and the host time per call (time.perf_counter) of each. Added time = (mode - bare) / calls on
the GPU's clock (*_added_us), and host time per call less the bare loop's GPU time per call
(*_host_added_us: issue #23's measure, since a launch-bound caller waits on the host).
Small cases are launch-bound, so there the host time is what the caller sees. Prints JSON.
Usage: python scripts/python_overhead.py [--calls N] [--out FILE]; needs a GPU (exit 3 without one)
and PyTorch (exit 2 without it)."""
import argparse
import json
import sys
import time

CASES = [  # (left shape, right shape, form, window kwargs)
    ((64, 64), (8, 8), None, {}),
    ((256, 256), (32, 32), None, {"mode": "valid"}),
    ((16, 64, 64), (16, 16, 16), "n-to-m", {"max_shift": 8}),
    ((512, 512), (64, 64), None, {}),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args()
    try:
        import torch

        import xcorr
    except ImportError as e:  # one line, not a traceback: what is missing and where it comes from
        print(f"python_overhead: needs PyTorch and the xcorr package ({e}; pip install torch, "
              "and scripts/setup-env installs xcorr)", file=sys.stderr)
        return 2
    try:
        gpu = xcorr.gpu_info()["name"]
    except xcorr.NoGPUError as e:
        print(f"python_overhead: no GPU: {e}", file=sys.stderr)
        return 3
    results = {"gpu": gpu, "calls": args.calls, "cases": []}
    stream = torch.cuda.Stream()
    for ls, rs, form, window in CASES:
        a = torch.rand(ls, device="cuda")
        b = torch.rand(rs, device="cuda")
        plan = xcorr.Plan(ls, rs, form=form, **window)
        out = torch.empty(plan.out_shape, device="cuda")
        h = stream.cuda_stream
        plan(a, b, out=out, stream=h)  # warm
        torch.cuda.synchronize()
        n = args.calls
        bare_ms = plan._plan.time_execute_ptr(a.data_ptr(), b.data_ptr(), out.data_ptr(), h, n) / n

        def timed(call):
            call()
            torch.cuda.synchronize()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(stream):
                t0 = time.perf_counter()
                start.record()
                for _ in range(n):
                    call()
                stop.record()
                host = (time.perf_counter() - t0) / n
            stop.synchronize()
            return start.elapsed_time(stop) / n, host

        modes = {
            "plan": lambda: plan(a, b, out=out, stream=h),
            "plan_current": lambda: plan(a, b, out=out),
            "dlpack": lambda: plan._call(a, b, out, h),
            "correlate2d": lambda: xcorr.correlate2d(a, b, form=form, out=out, **window),
            "alloc": lambda: xcorr.correlate2d(a, b, form=form, **window),
        }
        case = {"case": plan.description, "algorithm": plan.algorithm, "bare_us": bare_ms * 1e3}
        for name, call in modes.items():
            gpu_ms, host_s = timed(call)
            case[f"{name}_us"] = gpu_ms * 1e3
            case[f"{name}_host_us"] = host_s * 1e6
            case[f"{name}_added_us"] = gpu_ms * 1e3 - bare_ms * 1e3
            case[f"{name}_host_added_us"] = host_s * 1e6 - bare_ms * 1e3
        results["cases"].append(case)
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
