#!/usr/bin/env python3
"""Where an FFT case's time goes, from Nsight Compute: reads the CSVs that scripts/ncu-fft-account
writes (one per case, `ncu --csv --page raw`), keeps one call's kernels (the last full repetition of
the launch sequence), and prints per kernel its duration, DRAM bytes, DRAM throughput and issue
use, with the call's sum beside the benchmark's time per call (results/<gpu>/summary.csv) and the
output's write time at the memory floor. Cases (DIR/cases.txt: `NAME variant=... form=...`) give
`size=` or hL, wL, hR, wR, and may give nL, nR, max_shift, normalize and launch.

    scripts/ncu_account.py DIR [--summary results/nvidia-h200/summary.csv] [--reduced OUTDIR]

--reduced writes the columns used here (one small CSV per case) for committing beside the notes.

Floors (where the CSV has the instruction count, which scripts/ncu-fft-account collects): per
kernel, its DRAM traffic at the DRAM peak (duration x DRAM % of peak) and its warp instructions at
the SMs' peak issue (4 a cycle an SM, at the clock ncu saw); a kernel cannot beat the larger, and
the call, its kernels back to back, cannot beat their sum ("bound"). What binds a case is then
read off: the bytes, or the instructions, of kernels as they are. The call's instructions are also
given at the best issue rate any of its kernels reached. Where the CSV has WarpStateStats' stall
reasons (which scripts/ncu-fft-account also collects), each kernel also gets its warps an SM, its
instructions and the reasons most warps wait on ("top stalls", warps per issued instruction).
ncu runs each kernel alone with a flushed L2 (--cache-control all): kernels of small cases are
slower there than back to back in the benchmark, so their sum can exceed the time per call.
"""
if __name__ == "__main__":  # a missing requirement: one line, not a traceback
    import _xcsuite
    _xcsuite.explain_missing_requirements("ncu_account.py")

import argparse
import io
import re
import sys
from pathlib import Path

import pandas as pd

COLS = ["Kernel Name", "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "sm__inst_issued.avg.pct_of_peak_sustained_active",
        "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__grid_size", "launch__registers_per_thread"]
# For the floors; CSVs from older versions of scripts/ncu-fft-account lack them (then no floors are printed).
ISSUE_COLS = ["smsp__inst_executed.sum", "sm__cycles_elapsed.avg.per_second", "device__attribute_multiprocessor_count"]
ISSUE_PER_SM_CYCLE = 4  # warp instructions an SM can issue a cycle (four schedulers, sm_70 on)
# The harness's own kernels (inputs, poisoning, the check against the float64 reference and its
# gather of sampled outputs). Not the window crop's gather_flat_kernel: a cropped call times it.
# Where the warps wait (ncu's WarpStateStats section, collected by scripts/ncu-fft-account): per
# reason, the warps in that state per issued instruction; with the occupancy they say what latency
# the issue rate is bound by (the "top stalls" column). Optional, as the issue columns are.
STALL_PREFIX, STALL_SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
OCCUPANCY_COLS = ["sm__warps_active.avg.per_cycle_active"]
HARNESS = re.compile(r"fill|poison|reference|(?<![a-z_])gather_kernel|flush|empty|compare", re.I)
FLOOR_TBS = 4.3  # sustained DRAM write bandwidth taken as the floor (TB/s, H200)


class NotAProfile(ValueError):
    """A CSV that is not ncu's raw page of a profiled case (the message says what it lacks)."""


def read(path: Path) -> pd.DataFrame:
    try:
        text = path.read_text()
        if not text.strip():
            raise NotAProfile("an empty file (ncu wrote nothing: see its .err beside it)")
        if '"ID"' in text:  # ncu's own CSV: the program's output comes first, then a units row
            d = pd.read_csv(io.StringIO(text[text.index('"ID"'):])).iloc[1:]
        else:  # a reduced CSV
            d = pd.read_csv(path)
    except (UnicodeDecodeError, pd.errors.EmptyDataError, pd.errors.ParserError) as e:
        raise NotAProfile(f"not a CSV of ncu's ({str(e).splitlines()[0]})") from None
    missing = [c for c in COLS if c not in d.columns]
    if missing:  # a KeyError traceback
        raise NotAProfile(f"no {missing[0]} column{f' (nor {len(missing) - 1} more)' if len(missing) > 1 else ''}: "
                          "not ncu's raw page (scripts/ncu-fft-account writes it with --csv --page raw)")
    stalls = [c for c in d.columns if c.startswith(STALL_PREFIX) and c.endswith(STALL_SUFFIX)]
    cols = COLS + [c for c in ISSUE_COLS + OCCUPANCY_COLS if c in d.columns] + stalls
    d = d[~d["Kernel Name"].astype(str).str.contains(HARNESS)][cols].reset_index(drop=True)
    for c in cols[1:]:
        d[c] = pd.to_numeric(d[c].astype(str).str.replace(",", ""), errors="coerce")
    return d


def one_call(d: pd.DataFrame) -> pd.DataFrame:
    """One call's kernels. The launch sequence's period P is the p at which the most kernels equal
    the kernel p before them (ties: the smaller p; at least half of them must): the whole sequence
    decides, so that a profile cut after a call's two row passes (two equal kernels in a row) does
    not make a call of one. The call is then the last p kernels for the shortest p >= P whose last
    two runs agree (a call that ends in a finishing kernel, as fft's crop, is longer than the
    calls before it), else, where the profile stops inside a call, the last P kernels that repeat
    the P before them."""
    names = list(d["Kernel Name"])
    n = len(names)

    def agree(p: int) -> float:
        return sum(names[i] == names[i - p] for i in range(p, n)) / (n - p)

    period = max(range(1, n // 2 + 1), key=lambda p: (agree(p), -p), default=0)
    if period and agree(period) >= 0.5:
        for p in range(period, n // 2 + 1):
            if names[n - p:] == names[n - 2 * p:n - p]:
                return d.iloc[n - p:]
        for end in range(n - 1, 2 * period - 1, -1):
            if names[end - period:end] == names[end - 2 * period:end - period]:
                return d.iloc[end - period:end]
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


def top_stalls(row: pd.Series, n: int = 3) -> str:
    """The n reasons with the most warps waiting per issued instruction, e.g. "long_scoreboard 1.6,
    mio_throttle 1.0" ("selected", the issuing warp itself, left out); "" without the columns."""
    v = {c[len(STALL_PREFIX):-len(STALL_SUFFIX)]: row[c] for c in row.index
         if c.startswith(STALL_PREFIX) and c.endswith(STALL_SUFFIX) and not pd.isna(row[c])}
    v.pop("selected", None)
    return ", ".join(f"{k} {x:.1f}" for k, x in sorted(v.items(), key=lambda kv: -kv[1])[:n])


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
    found = sorted(a.dir.glob("ncu-*.csv"))
    if not found:  # a wrong folder printed nothing and exited 0
        why = "no such folder" if not a.dir.is_dir() else "no ncu-*.csv in it (scripts/ncu-fft-account writes them)"
        print(f"ncu_account: {a.dir}: {why}", file=sys.stderr)
        return 2
    summ = pd.read_csv(a.summary) if a.summary.exists() else None
    cases = (a.dir / "cases.txt").read_text().splitlines() if (a.dir / "cases.txt").exists() else []
    specs = dict(line.split(None, 1) for line in cases if line.strip())
    profiles = {}
    for f in found:  # every file read before anything is printed or written
        try:
            d = read(f)
            profiles[f] = d, one_call(d)
        except ValueError as e:  # NotAProfile, or no repeated launch sequence: tracebacks
            print(f"ncu_account: {f}: {e}", file=sys.stderr)
            return 2
    for f, (d, call) in profiles.items():
        key = f.stem[4:]
        if a.reduced:
            a.reduced.mkdir(parents=True, exist_ok=True)
            d.to_csv(a.reduced / f.name, index=False)
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
        stalls = fl is not None and OCCUPANCY_COLS[0] in call.columns and any(c.startswith(STALL_PREFIX) for c in call.columns)
        if fl is not None:
            best = call["sm__inst_issued.avg.pct_of_peak_sustained_active"].max()
            line += (f"floors of these kernels: DRAM {fl.dram.sum():.1f} µs, issue {fl.issue.sum():.1f} µs, "
                     f"bound {fl.bound.sum():.1f} µs (each kernel's larger, summed)\n"
                     f"instructions: {call['smsp__inst_executed.sum'].sum() / 1e6:.2f} M warp instructions, "
                     f"{fl.issue.sum() / (best / 100):.1f} µs at the best issue rate of these kernels ({best:.0f}%)\n")
        head = ["kernel", "µs", "DRAM read MB", "DRAM write MB", "DRAM % peak", "issue %", "grid"]
        head += ["DRAM floor µs", "issue floor µs"] if fl is not None else []
        head += ["warps an SM", "M instructions", "top stalls (warps per issue)"] if stalls else []
        line += "\n| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
        for i, r in call.iterrows():
            n = re.sub(r"\(.*", "", r["Kernel Name"]).replace("void ", "").replace("xcorr::<unnamed>::", "")
            n = n.replace("<unnamed>::", "")[:44]
            line += (f"| `{n}` | {r['gpu__time_duration.sum'] / 1e3:.1f} | {r['dram__bytes_read.sum'] / 1e6:.1f} | "
                     f"{r['dram__bytes_write.sum'] / 1e6:.1f} | {r['dram__throughput.avg.pct_of_peak_sustained_elapsed']:.0f} | "
                     f"{r['sm__inst_issued.avg.pct_of_peak_sustained_active']:.0f} | {int(r['launch__grid_size'])} |")
            line += f" {fl.dram[i]:.1f} | {fl.issue[i]:.1f} |" if fl is not None else ""
            if stalls:
                line += (f" {r[OCCUPANCY_COLS[0]]:.1f} | {r['smsp__inst_executed.sum'] / 1e6:.2f} |"
                         f" {top_stalls(r)} |")
            line += "\n"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
