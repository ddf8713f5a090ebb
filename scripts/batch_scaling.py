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
`compute_seconds`: the GPUs' work alone, each device correlating its share from and into its own
memory (PyTorch tensors), all at once: with the copy floors below, what a row costs beyond both
is the pipeline's schedule. `first_touch_seconds`: a fresh NumPy array of the result's size written once by one host thread (the
page-fault cost the fresh calls pay, spread over the devices' threads). Then `ceilings`: the host
link's floors for the same bytes (xcsuite/copy_ceiling.py: each GPU alone and all at once copying to
page-locked, pageable and fresh memory, page-locked in the batch's pieces and blocks, and host
memcpy on 1, 2, 4, ... threads up to the most the batch drains with: probe_threads), and each
row's `floor_*`:
the fastest its results can reach the host memory it writes (pinned: the GPUs' copies into
page-locked memory; reused pageable: the better of the driver's pageable copy and pinned staging
drained by host threads, both halves at once (`staged`); fresh: the same into a fresh array). --no-ceilings leaves them out. Prints and writes JSON with the GPUs, the driver, the
package's build and the git revision; --plot F.json [--png P] draws the figure from such a JSON.

    python scripts/batch_scaling.py [--form n-to-m] [--left 64:96x96] [--right 4096:96x96]
                                    [--max-shift 16] [--algorithm auto] [--gpus all] [--chunk N]
                                    [--split auto|lefts|blocks] [--repeat 3] [--out F]
Needs a GPU (exit 3 without one, with the reason)."""
if __name__ == "__main__":  # a missing requirement: one line, not a traceback
    import _xcsuite
    _xcsuite.explain_missing_requirements("batch_scaling.py")

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

# The repository root, for xcsuite (not installed): the copy floors and the figure's paths.
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


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
    ap.add_argument("--no-ceilings", action="store_true", help="skip the host link's floors (xcsuite/copy_ceiling.py)")
    ap.add_argument("--plot", metavar="JSON", help="only draw the figure of a written JSON (no GPU needed)")
    ap.add_argument("--png", help="with --plot: the figure's path (default: beside the JSON's plots folder)")
    args = ap.parse_args(argv)
    if args.plot:
        return plot(args.plot, args.png)
    try:
        ls, rs = stack(args.left, "--left"), stack(args.right, "--right")
    except ValueError as e:
        ap.error(str(e))
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.chunk is not None and args.chunk < 1:
        ap.error(f"--chunk must be at least 1 output matrix, not {args.chunk}")
    if args.max_shift < -1:
        ap.error(f"--max-shift must be 0 or more (-1: the full output), not {args.max_shift}")
    import xcorr
    try:  # parse_devices judges the text before asking for GPUs: a typo is bad usage (exit 2) on any machine
        devices = xcorr._xcorr.parse_devices(args.gpus)
        info = xcorr.gpu_info()
    except ValueError as e:
        ap.error(str(e))
    except xcorr.NoGPUError as e:
        print(f"batch_scaling: no GPU: {e}", file=sys.stderr)
        return 3
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

    def compute_only(k):
        """(seconds of the GPUs' work alone: each of the first k devices correlating its share of
        the batch (the lefts of n-to-m, the rights of one-to-many, in equal contiguous runs as the
        batch deals them) from and into its own memory, all at once; None and the reason where it
        cannot be measured). What a row costs beyond max(this, its copy floor) is the schedule's."""
        shares = share_bounds(args.form, ls[0], rs[0], k)
        if shares is None:
            return None, f"the compute floor is measured for n-to-m and one-to-many, not {args.form}"
        try:
            import torch
        except ImportError:
            return None, "no PyTorch here to hold the device arrays"
        if not hasattr(xcorr, "Plan"):
            return None, "this package has no Plan"
        from xcsuite.copy_ceiling import concurrently
        def make_job(d, which, a, b):
            """Device d's share: its plan, inputs and output on the device, one call and a sync."""
            lh, rh = (left[a:b], right) if which == "lefts" else (left, right[a:b])
            plan = xcorr.Plan(lh.shape, rh.shape, form=args.form, algorithm=args.algorithm, device=d, **window)
            dev = torch.device("cuda", d)
            l, r = (torch.from_numpy(np.ascontiguousarray(x)).to(dev) for x in (lh, rh))
            o = torch.empty(plan.out_shape, dtype=torch.float32, device=dev)

            def job():
                plan(l, r, out=o)
                torch.cuda.synchronize(dev)
            return job

        jobs = [make_job(d, *share) for d, share in zip(devices[:k], shares)]
        concurrently(jobs)  # warm-up: plans' first calls
        best = min(concurrently(jobs) for _ in range(args.repeat))
        jobs.clear()
        torch.cuda.empty_cache()  # the batch runs and the copy floors after this allocate with cudaMalloc
        return best, None

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
        run["compute_seconds"], why = compute_only(k)
        if why:
            run["compute_not_measured"] = why
        result["runs"].append(run)
        if k == 1:
            print(f"fresh {run['output_gb']:.2f} GB array written once (one thread): "
                  f"{result['first_touch_seconds'] * 1e3:.1f} ms", flush=True)
        print(f"{k} GPU(s) {devices[:k]}: {best * 1e3:9.1f} ms (out= reused: {best_reused * 1e3:9.1f} ms), speed-up "
              f"{run['speedup']:.2f}x ({run['speedup_out_reused']:.2f}x), difference to one GPU {err:.1e}", flush=True)
        if best_pinned is not None:
            print(f"    out= page-locked, reused: {best_pinned * 1e3:9.1f} ms, speed-up {run['speedup_out_pinned']:.2f}x",
                  flush=True)
        print("    the GPUs' work alone (results kept on them): "
              + (f"{run['compute_seconds'] * 1e3:9.1f} ms" if run["compute_seconds"] else run["compute_not_measured"]),
              flush=True)
        for label, ph in (("fresh", phases_fresh), ("out= reused", phases_reused), ("out= pinned", phases_pinned)):
            for d in ph or []:  # with the split the device ran, where the package reports it
                print(f"    {label:11s} GPU {d['device']}: setup {d['setup'] * 1e3:7.1f} ms, pipeline "
                      f"{d['pipeline'] * 1e3:7.1f} ms, teardown {d['teardown'] * 1e3:7.1f} ms"
                      + (f", split {d['split']}" if "split" in d else ""), flush=True)
        if err > 1e-5:
            print("batch_scaling: the split result differs from the one-GPU result", file=sys.stderr)
            return 1
    if not args.no_ceilings:
        from xcsuite import copy_ceiling
        c = copy_ceiling.measure(devices, one.nbytes, repeat=args.repeat, threads=probe_threads(len(devices)),
                                 rows=ls[0] if args.form == "n-to-m" else None)  # block pieces' rows: the lefts
        result["ceilings"] = c
        for run in result["runs"]:
            k = len(run["devices"])
            run.update(floors(c, k))
            print(f"{k} GPU(s): floors pinned {run['floor_out_pinned'] * 1e3:.1f} ms, pageable reused "
                  f"{run['floor_out_reused'] * 1e3:.1f} ms, fresh {run['floor_fresh'] * 1e3:.1f} ms", flush=True)
        for cp in c["copies"]:
            print(f"    ceiling {cp['kind']:15s} gpus {cp['gpus']} threads {cp.get('threads', '-')}: "
                  f"{cp['seconds'] * 1e3:8.2f} ms ({cp['gb_per_s']:6.1f} GB/s)", flush=True)
    text = json.dumps(result, indent=1)
    print(text)
    if args.out:
        from xcsuite import paths

        paths.write_text_atomic(args.out, text + "\n")
    return 0


def share_bounds(form, n_left, n_right, k):
    """Each of k devices' share of the batch as the batch deals it for the compute floor: ("lefts" or
    "rights", first, end), contiguous runs as equal as whole matrices allow; None for n-to-mn."""
    if form == "n-to-mn":
        return None
    which, n = ("lefts", n_left) if form == "n-to-m" else ("rights", n_right)
    edges = [n * j // k for j in range(k + 1)]
    return [(which, a, b) for a, b in zip(edges, edges[1:])]


def probe_threads(gpus: int, cores: int | None = None) -> tuple[int, ...]:
    """The host-copy thread counts the copy probe tries: powers of two up to the most the batch
    drains with on `gpus` GPUs at once (lib/batch.cpp's copy_threads per GPU: 1.5 x its share of
    the cores, within the cores and 32), and that most, so that a staged floor is never measured
    with fewer threads than the batch uses."""
    cores = max(1, cores if cores is not None else (os.cpu_count() or 1))
    gpus = max(gpus, 1)
    most = gpus * min(cores, 32, max(1, 3 * cores // (2 * gpus)))
    ts, t = [], 1
    while t < most:
        ts.append(t)
        t *= 2
    return tuple(ts + [most])


def floors(c, k):
    """A row's floors from the ceilings (the module docstring says which)."""
    from xcsuite.copy_ceiling import floor_of
    pinned = floor_of(c, k, "pinned")
    staged = min(x["seconds"] for x in c["copies"] if x["kind"] == "staged" and x["gpus"] == k)
    staged_fresh = min(x["seconds"] for x in c["copies"] if x["kind"] == "staged_fresh" and x["gpus"] == k)
    return {"floor_out_pinned": pinned,
            "floor_out_reused": min(floor_of(c, k, "pageable"), staged),
            "floor_fresh": min(floor_of(c, k, "pageable_fresh"), staged_fresh)}


def plot_problem(r):
    """What in a batch_scaling JSON the figure cannot draw, or None: a time that is no number (the
    times are absent where not measured; the floors and the GPUs' work alone may be null)."""
    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if not (isinstance(r["left"], list) and len(r["left"]) >= 3 and isinstance(r["right"], list) and r["right"]):
        return "left and right are not [N, H, W] lists"
    for i, run in enumerate(r["runs"]):
        if not isinstance(run, dict):
            return f"run {i} is not an object"
        for key in ("seconds", "seconds_out_reused", "seconds_out_pinned", "output_gb"):
            if key in run and not number(run[key]):
                return f"run {i}'s {key} is {json.dumps(run[key])}, not a number"
        for key in ("floor_fresh", "floor_out_reused", "floor_out_pinned", "compute_seconds"):
            if run.get(key) is not None and not number(run[key]):
                return f"run {i}'s {key} is {json.dumps(run[key])}, not a number or null"
    return None


def plot(path, png=None):
    """The figure of a batch_scaling JSON: per result array, the time on 1 and 2 GPUs beside the
    host link's floor of each and, where measured, the GPUs' work alone."""
    try:
        with open(path) as f:
            r = json.load(f)
        if not (isinstance(r, dict) and r["runs"] and all(run["devices"] for run in r["runs"])
                and {"form", "left", "right", "gpu"} <= r.keys() and "output_gb" in r["runs"][0]):
            raise ValueError("no runs")
    except OSError as e:
        print(f"batch_scaling: --plot {path}: {e.strerror or e}", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError, IndexError):
        print(f"batch_scaling: --plot {path}: not a batch_scaling JSON (scripts/batch_scaling.py --out)", file=sys.stderr)
        return 2
    if why := plot_problem(r):  # what the figure reads: a null seconds_* was a TypeError traceback
        print(f"batch_scaling: --plot {path}: {why}", file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [("fresh result array", "seconds", "floor_fresh"), ("out= reused, pageable", "seconds_out_reused",
            "floor_out_reused"), ("out= reused, page-locked", "seconds_out_pinned", "floor_out_pinned")]
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.8 / max(1, len(r["runs"]))
    for j, run in enumerate(r["runs"]):
        k = len(run["devices"])
        xs = [i + (j - (len(r["runs"]) - 1) / 2) * width for i in range(len(rows))]
        ts = [run.get(key, float("nan")) * 1e3 for _, key, _ in rows]
        ax.bar(xs, ts, width * 0.9, label=f"{k} GPU{'s' if k > 1 else ''}")
        for x, (_, _, fk) in zip(xs, rows):
            if run.get(fk):
                ax.hlines(run[fk] * 1e3, x - width * 0.45, x + width * 0.45, colors="k", linestyles="dashed")
            if run.get("compute_seconds"):
                ax.hlines(run["compute_seconds"] * 1e3, x - width * 0.45, x + width * 0.45, colors="k",
                          linestyles="dotted")
    ax.plot([], [], "k--", label="floor: moving the results to host memory (alone)")
    if any(run.get("compute_seconds") for run in r["runs"]):
        ax.plot([], [], "k:", label="the GPUs' work alone (results kept on them)")
    ax.set_xticks(range(len(rows)), [label for label, _, _ in rows])
    ax.set_ylabel("ms per call (best of the repeats)")
    gb = r["runs"][0]["output_gb"]
    ax.set_title(f"{r['form']} batch {r['left'][0]} x {r['right'][0]} of {r['left'][1]} x {r['left'][2]}, "
                 f"{gb:.2f} GB of results, on {r['gpu']} (revision {str(r.get('git_revision', '?'))[:7]})",
                 fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    if png is None:  # plots/<gpu>/ for results/<gpu>/[multi-gpu/]batch_scaling.json
        d = os.path.dirname(os.path.abspath(path))
        while os.path.basename(os.path.dirname(d)) not in ("results", "") and os.path.dirname(d) != d:
            d = os.path.dirname(d)
        png = os.path.join(ROOT, "plots", os.path.basename(d), "batch_scaling.png")
    os.makedirs(os.path.dirname(png), exist_ok=True)
    from xcsuite import paths
    base = os.path.splitext(png)[0]
    for f in paths.save_figure(fig, os.path.dirname(base), os.path.basename(base), dpi=130):
        print(f)
    return 0


if __name__ == "__main__":
    from xcsuite import paths
    sys.exit(paths.exit_status(main, "batch_scaling"))
