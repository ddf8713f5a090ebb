#!/usr/bin/env python3
"""zncc on offset data (issue #65): where OpenCV loses its digits and where xcorr does not.

For offsets 0, 10, 100, 1e3, 4e3 and 3e4: a 256 x 256 float32 image of offset + uniform(-1, 1)
noise (a fixed seed) and a 31 x 31 template cut from it at (100, 60); the valid window's zncc by
  reference           xcorr's float64 CPU reference (what the others are measured against)
  xcorr auto / fft-fused / overlap-wise   xcorr on the GPU
  opencv              cv2.matchTemplate(image, template, cv2.TM_CCOEFF_NORMED), float32 in
  torch-conv2d, torch-fft                 the PyTorch peers' zncc route (xcsuite/peerbench.py)
and for each the largest absolute error against the reference over the whole output, the peak's
value and place, and whether the place is the template's. What cannot run (no GPU, no cv2, no
torch) is recorded with the reason.

Writes results/<gpu>/accuracy/zncc_offsets.json (atomically; keys sorted, errors to 4 significant
digits: a rerun with the same numbers leaves it byte-identical) and draws plots/<gpu>/zncc_offsets.png.
It measures only on a GPU: without one it says so and exits 0, writing nothing.

  scripts/zncc_offsets.py               measure (GPU), write the results file, draw the figure
  scripts/zncc_offsets.py --cpu-only    the reference and OpenCV only, a table printed, nothing written
  scripts/zncc_offsets.py --plot-only   redraw every GPU's figure from results/*/accuracy/ (no GPU)

Exit status: 0 done (or nothing to do); 1 a measurement failed; 2 bad usage."""
from __future__ import annotations

if __name__ == "__main__":  # a missing requirement: one line, not a traceback
    import _xcsuite
    _xcsuite.explain_missing_requirements("zncc_offsets.py")

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from xcsuite import paths  # noqa: E402
from xcsuite import zncc_offsets as zo  # noqa: E402

GPU_ALGORITHMS = ("auto", "fft-fused", "overlap-wise")
TORCH_PEERS = ("torch-conv2d", "torch-fft")


def git_revision() -> str:
    try:
        r = subprocess.run([str(ROOT / "scripts" / "git-revision")], capture_output=True, text=True, timeout=30)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def smi_fixed() -> dict:
    """The GPU's facts from nvidia-smi that do not change from run to run (no current clocks,
    temperatures or power), or {} where it cannot say."""
    fields = ["name", "driver_version", "clocks.max.sm", "clocks.max.mem", "clocks.applications.graphics",
              "clocks.applications.memory"]
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader", "-i", "0"],
                           capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if r.returncode != 0 or not r.stdout.strip():
        return {}
    return {f"smi_{k.replace('.', '_')}": v.strip()
            for k, v in zip(fields, r.stdout.strip().splitlines()[0].split(","))}


def cv2_or_reason():
    try:
        import cv2
    except ImportError as e:
        return None, f"OpenCV (cv2) is not installed ({e})"
    return cv2, None


def torch_or_reason():
    try:
        import torch
    except ImportError as e:
        return None, f"PyTorch is not installed ({e})"
    if not torch.cuda.is_available():
        return None, "PyTorch sees no CUDA GPU"
    return torch, None


def torch_peer(torch, name: str):
    """The peer's zncc callable, as peerbench builds it for a valid-window case (FP32, TF32 off)."""
    from xcsuite import peerbench

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    h, w = zo.IMAGE
    th, tw = zo.TEMPLATE
    case = peerbench.parse_case(f"variant={name} form=one-to-one hL={h} wL={w} hR={th} wR={tw} "
                                "window=valid normalize=zncc")
    peer = peerbench.make_peer(case, torch)

    def run(image, template):
        L = torch.as_tensor(image, device="cuda")[None]
        R = torch.as_tensor(template, device="cuda")[None]
        out = peer(L, R)
        torch.cuda.synchronize()
        return out[0].cpu().numpy()
    return run


def measure(cpu_only: bool):
    """{implementation: {"what", "by_offset" | "skipped"}}, and the GPU's facts (None without one)."""
    import xcorr

    impls, runners = {}, {}
    gpu = None
    if not cpu_only:
        try:
            gpu = xcorr.gpu_info()
        except xcorr.NoGPUError as e:
            gpu, why = None, f"no GPU ({e})"
        if gpu is None:
            for a in GPU_ALGORITHMS:
                impls[f"xcorr {a}"] = {"skipped": why}
        else:
            for a in GPU_ALGORITHMS:
                runners[f"xcorr {a}"] = (lambda a: lambda I, T: xcorr.correlate2d(
                    I, T, mode="valid", normalize="zncc", algorithm=a))(a)
                impls[f"xcorr {a}"] = {"what": f'xcorr.correlate2d(image, template, mode="valid", '
                                               f'normalize="zncc", algorithm="{a}")'}
            impls["xcorr auto"]["picks"] = xcorr.explain(np.empty(zo.IMAGE, np.float32),
                                                         np.empty(zo.TEMPLATE, np.float32), "valid",
                                                         normalize="zncc")["algorithm"]
    cv2, why = cv2_or_reason()
    if cv2 is None:
        impls["opencv"] = {"skipped": why}
    else:
        runners["opencv"] = lambda I, T: cv2.matchTemplate(I, T, cv2.TM_CCOEFF_NORMED)
        impls["opencv"] = {"what": "cv2.matchTemplate(image, template, cv2.TM_CCOEFF_NORMED), float32 in"}
    if not cpu_only:
        torch, why = torch_or_reason()
        for name in TORCH_PEERS:
            if torch is None:
                impls[name] = {"skipped": why}
                continue
            try:
                runners[name] = torch_peer(torch, name)
            except Exception as e:  # noqa: BLE001  (recorded, the rest measured)
                impls[name] = {"skipped": f"{type(e).__name__}: {e}"}
                continue
            from xcsuite import peerbench
            impls[name] = {"what": f"xcsuite/peerbench.py's {name} zncc: "
                                   + peerbench.PEER_BY_NAME[name]["normalized"]["zncc"]}
    failed = False
    for name in runners:
        impls[name]["by_offset"] = {}
    for offset in zo.OFFSETS:
        image, template = zo.inputs(offset)
        ref = np.asarray(xcorr.correlate2d(image, template, mode="valid", normalize="zncc", algorithm="reference"))
        for name, fn in runners.items():
            try:
                rec = zo.compare(fn(image, template), ref)
            except Exception as e:  # noqa: BLE001  (one line in the file, the rest measured)
                rec, failed = {"error": f"{type(e).__name__}: {e}"}, True
            impls[name]["by_offset"][zo.offset_key(offset)] = rec
    return impls, gpu, failed


def versions() -> dict:
    import xcorr

    v = {"numpy": np.__version__, "xcorr": getattr(xcorr, "__version__", "?"), "python": sys.version.split()[0]}
    try:
        import cv2
        v["cv2"] = cv2.__version__
    except ImportError:
        v["cv2"] = None
    try:
        import torch
        v["torch"] = torch.__version__
        v["torch_cuda"] = torch.version.cuda
    except ImportError:
        v["torch"] = None
    return v


def table(impls: dict) -> str:
    names = [n for n in impls if "by_offset" in impls[n]]
    lines = [f"{'offset':>8}  " + "  ".join(f"{n:>34}" for n in names)]
    for o in zo.OFFSETS:
        cells = []
        for n in names:
            r = impls[n]["by_offset"][zo.offset_key(o)]
            if "error" in r:
                cells.append(f"{'failed':>34}")
                continue
            err = "non-finite" if r["max_abs_error"] is None else f"{r['max_abs_error']:.2e}"
            peak = "?" if r["peak_value"] is None else f"{r['peak_value']:.4f}"
            where = "right" if r["peak_right"] else f"WRONG {tuple(r['peak_at'] or ())}"
            cells.append(f"{f'err {err}, peak {peak} {where}':>34}")
        lines.append(f"{o:>8g}  " + "  ".join(cells))
    for n, i in impls.items():
        if "skipped" in i:
            lines.append(f"skipped {n}: {i['skipped']}")
    return "\n".join(lines)


def plot_all(results_root: Path, plots_root: Path) -> int:
    files = zo.results_files(results_root)
    if not files:
        print(f"zncc_offsets: no {zo.SUBDIR}/{zo.NAME}.json under {results_root}: nothing to draw")
        return 0
    import json
    for f in files:
        gpu_dir = f.parent.parent
        try:
            data = json.loads(f.read_text())
            out = zo.figure(data, Path(plots_root) / gpu_dir.name)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            print(f"zncc_offsets: {f}: not a zncc_offsets results file ({type(e).__name__}: {e})", file=sys.stderr)
            return 2
        for p in out:
            print(f"   {p}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--cpu-only", action="store_true",
                      help="the float64 reference and OpenCV only: print the table, write nothing")
    mode.add_argument("--plot-only", action="store_true",
                      help="redraw the figures from the results files, measure nothing (no GPU needed)")
    ap.add_argument("--results", default=str(paths.RESULTS), help="the results folder (default: %(default)s)")
    ap.add_argument("--plots", default=str(paths.PLOTS), help="the plots folder (default: %(default)s)")
    args = ap.parse_args(argv)
    results_root, plots_root = Path(args.results), Path(args.plots)
    # Checked before the work: a file in the way was a NotADirectoryError traceback after it.
    written = [] if args.cpu_only else [("--plots", plots_root)] + ([] if args.plot_only else [("--results", results_root)])
    for flag, d in written:
        if why := paths.folder_problem(d):
            ap.error(f"{flag}: {why}")
    if args.plot_only:
        if not results_root.is_dir():
            ap.error(f"--results {results_root}: no such folder")
        return plot_all(results_root, plots_root)

    import xcorr
    if not args.cpu_only:
        try:
            xcorr.gpu_info()
        except xcorr.NoGPUError as e:
            print(f"zncc_offsets: measures only on a GPU, and there is none ({e}); nothing written "
                  "(--cpu-only: the reference and OpenCV, printed; --plot-only: the figures from results/)")
            return 0
    impls, gpu, failed = measure(args.cpu_only)
    print(table(impls))
    if args.cpu_only:
        return 1 if failed else 0
    data = {
        "experiment": zo.NAME,
        "issue": 65,
        "setup": {"image": list(zo.IMAGE), "template": list(zo.TEMPLATE), "template_at": list(zo.TEMPLATE_AT),
                  "noise": f"uniform(-{zo.NOISE:g}, {zo.NOISE:g})", "seed": zo.SEED, "window": "valid",
                  "dtype": "float32", "reference": 'xcorr.correlate2d(..., algorithm="reference") (float64, CPU)',
                  "tolerance": zo.TOLERANCE},
        "offsets": [float(o) for o in zo.OFFSETS],
        "implementations": impls,
        "gpu": {"name": gpu["name"], "compute_capability": ".".join(map(str, gpu["compute_capability"])),
                "driver_version": gpu["driver_version"], "cuda_runtime_version": gpu["runtime_version"],
                "cufft_version": gpu["cufft_version"], "sm_clock_mhz": gpu["sm_clock_mhz"], **smi_fixed()},
        "git_revision": os.environ.get("XCORR_GIT_REVISION") or git_revision(),
        "versions": versions(),
    }
    slug = paths.gpu_slug(gpu["name"])
    target = zo.results_file(results_root, slug)
    paths.write_text_atomic(target, zo.dumps(data))
    print(f"   {target}")
    for p in zo.figure(data, plots_root / slug):
        print(f"   {p}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(paths.exit_status(main, "zncc_offsets"))
