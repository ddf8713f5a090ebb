#!/usr/bin/env python3
"""Where an FFT case's time goes, from Nsight Compute: reads the CSVs that scripts/ncu-fft-account
writes (one per case, `ncu --csv --page raw`), keeps one call's kernels (the last full repetition of
the launch sequence), and prints per kernel its duration, DRAM bytes, DRAM throughput and issue
use, with the call's sum beside the benchmark's time per call (results/<gpu>/summary.csv) and the
output's write time at the memory floor. Cases (DIR/cases.txt: `NAME variant=... form=...`) give
`size=` or hL, wL, hR, wR, and may give nL, nR, max_shift, normalize and launch.

    scripts/ncu_account.py DIR [--summary results/nvidia-h200/summary.csv] [--reduced OUTDIR]

--reduced writes the columns used here (one small CSV per case) for committing beside the notes.

Floors (where the CSV has the instruction count, scripts/ncu-fft-account since session 29): per
kernel, its DRAM traffic at the DRAM peak (duration x DRAM % of peak) and its warp instructions at
the SMs' peak issue (4 a cycle an SM, at the clock ncu saw); a kernel cannot beat the larger, and
the call, its kernels back to back, cannot beat their sum ("bound"). What binds a case is then
read off: the bytes, or the instructions, of kernels as they are.
ncu runs each kernel alone with a flushed L2 (--cache-control all): kernels of small cases are
slower there than back to back in the benchmark, so their sum can exceed the time per call.
"""
import argparse
import io
import re
import sys
from pathlib import Path

import pandas as pd

COLS = ["Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__inst_issued.avg.pct_of_peak_sustained_active",
        "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__grid_size", "launch__registers_per_thread"]
# For the floors; CSVs from before session 29 lack them (then no floors are printed).
ISSUE_COLS = ["smsp__inst_executed.sum", "sm__cycles_elapsed.avg.per_second", "device__attribute_multiprocessor_count"]
ISSUE_PER_SM_CYCLE = 4  # warp instructions an SM can issue a cycle (four schedulers, sm_70 on)
# The harness's own kernels (inputs, poisoning, the check against the float64 reference and its
# gather of sampled outputs). Not the window crop's gather_flat_kernel: a cropped call times it.
HARNESS = re.compile(r"fill|poison|reference|(?<![a-z_])gather_kernel|flush|empty|compare", re.I)
FLOOR_TBS = 4.3  # sustained DRAM write bandwidth taken as the floor (TB/s, H200)


def read(path: Path) -> pd.DataFrame:
    text = path.read_text()
    if '"ID"' in text:  # ncu's own CSV: the program's output comes first, then a units row
        d = pd.read_csv(io.StringIO(text[text.index('"ID"'):])).iloc[1:]
    else:  # a reduced CSV
        d = pd.read_csv(path)
    cols = COLS + [c for c in ISSUE_COLS if c in d.columns]
    d = d[~d["Kernel Name"].str.contains(HARNESS)][cols].reset_index(drop=True)
    for c in cols[1:]:
        d[c] = pd.to_numeric(d[c].astype(str).str.replace(",", ""), errors="coerce")
    return d


def one_call(d: pd.DataFrame) -> pd.DataFrame:
    names = list(d["Kernel Name"])
    for p in range(1, len(names) // 2 + 1):
        if names[-p:] == names[-2 * p:-p]:
            return d.iloc[-p:]
    raise ValueError("no repeated launch sequence: profile more launches (--launch-count)")


def floors(d: pd.DataFrame) -> pd.DataFrame | None:
    """Per kernel (µs): `dram`, its DRAM bytes at the DRAM peak; `issue`, its warp instructions at
    the peak issue; `bound`, the larger. None when the CSV has no instruction count."""
    if not set(ISSUE_COLS) <= set(d.columns):
        return None
    t = d["gpu__time_duration.sum"] / 1e3
    dram = t * d["dram__throughput.avg.pct_of_peak_sustained_elapsed"] / 100
    peak = ISSUE_PER_SM_CYCLE * d["device__attribute_multiprocessor_count"] * d["sm__cycles_elapsed.avg.per_second"]
    issue = d["smsp__inst_executed.sum"] / peak * 1e6
    return pd.DataFrame({"dram": dram, "issue": issue, "bound": pd.concat([dram, issue], axis=1).max(axis=1)})


def case_of(err: Path) -> dict:
    """The benchmark's name line of the profiled run (its .err file holds the program's output)."""
    for line in err.read_text().splitlines() if err.exists() else []:
        if "/manual_time" in line:
            return {"name": line.split()[0]}
    return {}


def dims(spec: dict) -> tuple:
    """(hL, wL, hR, wR) of a case spec: `size=` (square, equal) or the four sizes."""
    if "size" in spec:
        return (int(spec["size"]),) * 4
    return tuple(int(spec[k]) for k in ("hL", "wL", "hR", "wR"))


def out_elems(spec: dict) -> int:
    """Elements of one output: (2m + 1)^2 within max_shift m, else the full (hL + hR - 1) x (wL + wR - 1)."""
    if "max_shift" in spec:
        return (2 * int(spec["max_shift"]) + 1) ** 2
    hL, wL, hR, wR = dims(spec)
    return (hL + hR - 1) * (wL + wR - 1)


def matches(summ: pd.DataFrame, spec: dict) -> pd.Series:
    """The summary rows of a case spec: variant, form, sizes, counts, window, normalization, launch."""
    hL, wL, hR, wR = dims(spec)
    m = ((summ.variant == spec["variant"]) & (summ.form == spec["form"]) & (summ.hL == hL) & (summ.wL == wL)
         & (summ.hR == hR) & (summ.wR == wR) & (summ.nL == int(spec.get("nL", 1)))
         & (summ.nR == int(spec.get("nR", 1))) & (summ.status == "ok"))
    if "max_shift" in spec:
        k = int(spec["max_shift"])
        m &= summ.shifts.astype(str) == f"-{k}:{k},-{k}:{k}"
    else:
        m &= summ.shifts.isna()
    params = summ.params.astype(str)
    m &= params.str.contains(f"normalize={spec['normalize']}") if "normalize" in spec else ~params.str.contains("normalize=")
    if "launch" in spec:
        m &= params.str.contains(f"launch={spec['launch']}")
    return m


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--summary", type=Path, default=Path("results/nvidia-h200/summary.csv"))
    ap.add_argument("--reduced", type=Path)
    a = ap.parse_args(argv)
    summ = pd.read_csv(a.summary) if a.summary.exists() else None
    cases = (a.dir / "cases.txt").read_text().splitlines() if (a.dir / "cases.txt").exists() else []
    specs = dict(line.split(None, 1) for line in cases if line.strip())
    for f in sorted(a.dir.glob("ncu-*.csv")):
        key = f.stem[4:]
        d = read(f)
        if a.reduced:
            a.reduced.mkdir(parents=True, exist_ok=True)
            d.to_csv(a.reduced / f.name, index=False)
        call = one_call(d)
        t = call["gpu__time_duration.sum"].sum() / 1e3
        rd, wr = call["dram__bytes_read.sum"].sum(), call["dram__bytes_write.sum"].sum()
        spec = dict(kv.split("=", 1) for kv in specs.get(key, "").split())
        line = f"### {key}: `{specs.get(key, '?')}`\n"
        per_call = None
        if summ is not None and spec:
            s = summ[matches(summ, spec)]
            if len(s):
                r = s.sort_values("time_us").iloc[0]
                per_call = r.time_us + (0 if pd.isna(r.finish_time_us) else r.finish_time_us)
                out = int(r.pairs) * out_elems(spec) * 4
                line += (f"benchmark: {per_call:.1f} µs per call (+ finish); output {out / 1e6:.1f} MB, "
                         f"{out / FLOOR_TBS / 1e6:.1f} µs to write at {FLOOR_TBS} TB/s\n")
        line += (f"ncu: {len(call)} kernels, {t:.1f} µs; DRAM {rd / 1e6:.1f} MB read + {wr / 1e6:.1f} MB written "
                 f"({(rd + wr) / t / 1e6:.2f} TB/s over the kernels)\n")
        fl = floors(call)
        if fl is not None:
            line += (f"floors of these kernels: DRAM {fl.dram.sum():.1f} µs, issue {fl.issue.sum():.1f} µs, "
                     f"bound {fl.bound.sum():.1f} µs (each kernel's larger, summed)\n")
        line += "\n| kernel | µs | DRAM read MB | DRAM write MB | DRAM % peak | issue % | grid |"
        line += " DRAM floor µs | issue floor µs |\n|---|---|---|---|---|---|---|---|---|\n" if fl is not None else "\n|---|---|---|---|---|---|---|\n"
        for i, r in call.iterrows():
            n = re.sub(r"\(.*", "", r["Kernel Name"]).replace("void ", "").replace("xcorr::<unnamed>::", "")
            n = n.replace("<unnamed>::", "")[:44]
            line += (f"| `{n}` | {r['gpu__time_duration.sum'] / 1e3:.1f} | {r['dram__bytes_read.sum'] / 1e6:.1f} | "
                     f"{r['dram__bytes_write.sum'] / 1e6:.1f} | {r['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.0f} | "
                     f"{r['sm__inst_issued.avg.pct_of_peak_sustained_active']:.0f} | {int(r['launch__grid_size'])} |")
            line += f" {fl.dram[i]:.1f} | {fl.issue[i]:.1f} |\n" if fl is not None else "\n"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
