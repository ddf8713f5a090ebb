#!/usr/bin/env python3
"""Sets every number of ../shared/ANCHORS.md (the paper's own kernels, built for sm_90 and run on the
H200) beside our counterpart measured in results/<gpu>/: results/<gpu>/anchors.md.

    scripts/anchors.py [GPU_DIR ...]

Each anchor names a variant, a form, a size, the counts and the parameters that make a kernel the
paper's counterpart. Every experiment that measured that configuration contributes a row, so the
page shows the spread between separate runs of the same case (at a few microseconds, launch
latency and clocks move a case by 10-20% between processes; the time per call of an empty
kernel, `xcorr_bench --launch-floor`, was 3.05 us on the H200). Verdict: "faster" when our best
run is at most the anchor, else "slower by x%". The anchors were measured on an H200 only; on
another GPU the page still sets them side by side but says so.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aggregate import gpu_name_of, load_summary  # noqa: E402
from table import fmt_time  # noqa: E402
from xcsuite import paths  # noqa: E402
from xcsuite.results import exit_2_on_bad_results, incomplete_notes  # noqa: E402


@dataclass(frozen=True)
class Anchor:
    section: str
    variant: str
    form: str
    size: int
    nL: int
    nR: int
    params: dict = field(default_factory=dict)  # must all match; other parameters are free
    paper_us: float = float("nan")
    paper_label: str = ""


def _one(variant, size, us, label, **params):
    return Anchor("one-to-one", variant, "one-to-one", size, 1, 1, params, us, label)


def _many(variant, size, us, label, **params):
    return Anchor("one-to-many 1 x 32", variant, "one-to-many", size, 1, 32, params, us, label)


# ANCHORS.md, "The paper's own implementation, built for sm_90 and run on the H200".
ANCHORS = [
    *[_one("overlap-wise", n, us, "overlap-wise") for n, us in
      ((16, 17.0), (32, 48.9), (64, 159), (128, 569), (256, 3164))],
    *[_one("split-row", n, us, "split-row (rows 1)", rows="1") for n, us in
      ((16, 5.05), (32, 7.35), (64, 15.7), (128, 137), (256, 1838))],
    *[_one("grouped-overlap", n, us, "grouped-overlap (S8 L8)", overlaps="8", left_rows="8") for n, us in
      ((32, 28.4), (64, 83.4), (128, 287), (256, 1079))],
    *[_one("grouped-overlap", n, us, "grouped-overlap (S2 L8)", overlaps="2", left_rows="8") for n, us in
      ((16, 11.0), (32, 18.0), (64, 56.4), (128, 199), (256, 1423))],
    *[_one("warp-per-overlap", n, us, "warp-per-overlap (4)", overlaps_per_block="4") for n, us in
      ((16, 3.45), (32, 5.61), (64, 26.7), (128, 293), (256, 4416))],
    *[_one("warp-per-overlap-shared", n, us, "warp-per-overlap shared-mem") for n, us in
      ((16, 3.90), (32, 5.13), (64, 17.6), (128, 129), (256, 1625))],
    *[_one("fft", n, us, "fft (no plan)") for n, us in
      ((16, 17.4), (32, 17.3), (64, 18.4), (128, 16.2), (256, 20.8))],
    *[_many("overlap-wise", n, us, "overlap-wise") for n, us in ((16, 408), (64, 3966), (256, 107849))],
    *[_many("multi-matrix-right+split-row", n, us, "mm-right + split-row (R8, rows 1)", rights="8", rows="1")
      for n, us in ((16, 6.96), (64, 145), (256, 25172))],
    *[_many("multi-matrix-right+grouped-overlap", n, us, "mm-right + grouped (4/4/4)", rights="4",
            overlaps="4", left_rows="4") for n, us in ((16, 23.2), (64, 152), (256, 13028))],
    *[_many("multi-matrix-right", n, us, "multi-matrix-right (R8)", rights="8")
      for n, us in ((16, 23.9), (64, 229), (256, 25471))],
    *[_many("fft", n, us, "fft (no plan)") for n, us in ((16, 21.2), (64, 23.6), (256, 115))],
    Anchor("n-to-m 32-to-32", "multi-matrix-right+split-row", "n-to-m", 256, 32, 32, {"rights": "8"}, 788e3,
           "mm-right + split-row (R8)"),
    Anchor("n-to-m 32-to-32", "fft", "n-to-m", 256, 32, 32, {}, 1.97e3, "fft (no plan)"),
    Anchor("n-to-mn real-data shape (86 x 50*86, 96 x 96)", "multi-matrix-right+split-row", "n-to-mn", 96, 86,
           4300, {"rights": "8"}, 84.0e3, "mm-right + split-row (R8)"),
    Anchor("n-to-mn real-data shape (86 x 50*86, 96 x 96)", "multi-matrix-right+grouped-overlap", "n-to-mn", 96,
           86, 4300, {"rights": "4", "overlaps": "4", "left_rows": "4"}, 48.8e3, "mm-right + grouped (4/4/4)"),
    Anchor("n-to-mn real-data shape (86 x 50*86, 96 x 96)", "fft", "n-to-mn", 96, 86, 4300, {}, 1.91e3,
           "fft (no plan)"),
]


def fmt_us(us: float) -> str:
    return fmt_time(us) or "–"


def parse_params(text: str) -> dict:
    return dict(kv.split("=", 1) for kv in text.split(",") if "=" in kv) if text else {}


def matches(summary, a: Anchor):
    """Rows of summary.csv that measured anchor a (warm runs only), best first."""
    s = summary
    sel = s[(s["variant"] == a.variant) & (s["form"] == a.form) & (s["hL"] == a.size) & (s["wL"] == a.size)
            & (s["hR"] == a.size) & (s["wR"] == a.size) & (s["nL"] == a.nL) & (s["nR"] == a.nR)
            & (s["status"] == "ok") & (~s["cold"].astype(bool))]
    keep = sel["params"].map(lambda p: all(parse_params(p).get(k) == v for k, v in a.params.items()))
    return sel[keep.astype(bool)].sort_values("time_us")


def verdict(times: list[float], paper: float) -> str:
    """'faster' only when every run of the configuration is; the best run alone decides 'slower'."""
    if not times:
        return "not measured"
    wins = sum(t <= paper for t in times)
    if wins == len(times):
        return "**faster**"
    if wins:
        return f"faster in {wins} of {len(times)} runs"
    return f"slower by {100 * (min(times) / paper - 1):.0f}%"


# This project's fused FFT (algorithms/51_fft_fused.cu), set beside the paper's fft. Not an anchor of
# the same algorithm (hand-written DFTs, not cuFFT): shown, not counted.
FUSED_FFT = "fft-fused"


def fused_fft_section(summary) -> list[str]:
    rows = []
    for a in ANCHORS:
        if a.variant != "fft":
            continue
        m = matches(summary, Anchor(a.section, FUSED_FFT, a.form, a.size, a.nL, a.nR))
        if len(m):
            t = float(m["time_us"].iloc[0])
            rows.append(f"| {a.section} | {a.size} | {fmt_us(a.paper_us)} | {fmt_us(t)} ({m['experiment'].iloc[0]}) | "
                        f"{a.paper_us / t:.2f}x |")
    if not rows:
        return []
    return ["", f"## Beyond the paper: the paper's fft beside {FUSED_FFT}", "",
            f"{FUSED_FFT} is this project's FFT with hand-written DFTs, fused so that each matrix is read and "
            "each output written once (one block's shared memory up to 191 x 191 outputs, staged through global "
            "memory beyond; everything timed, the output layout included). Not the paper's algorithm (which "
            "uses cuFFT), so not counted above.", "", "| case | size | paper's fft | ours (best run) | speedup |", "|---|---|---|---|---|",
            *rows]


def build_page(summary, gpu_name: str, stopped: list = ()) -> tuple[str, dict]:
    """The page, and its verdict counts; `stopped`: notes of experiments stopped part-way."""
    lines = [f"# Our kernels beside the paper's on {gpu_name}", "",
             "Generated by scripts/anchors.py from summary.csv. *Paper* is the paper's own implementation built "
             "for sm_90 and measured on an H200 with the paper's protocol (../shared/ANCHORS.md); *ours* is the "
             "same algorithm and tuning in this project, each experiment that measured it shown separately "
             "(best run, then the other runs), each with the paper's protocol. Kernel time per call.", ""]
    if "H200" not in gpu_name:
        lines += [f"**The anchors were measured on an H200, these results on {gpu_name}: a comparison across "
                  "GPUs, not a verdict.**", ""]
    counts = {"faster": 0, "mixed": 0, "slower": 0, "not measured": 0}
    section = None
    for a in ANCHORS:
        if a.section != section:
            section = a.section
            lines += ["", f"## {section}", "", "| size | kernel (paper's tuning) | paper | ours (best run) | "
                      "other runs | our parameters | verdict |", "|---|---|---|---|---|---|---|"]
        rows = matches(summary, a)
        if len(rows):  # the best tuning, and the other runs of that same tuning
            rows = rows[rows["params"] == rows["params"].iloc[0]]
        ours = float(rows["time_us"].iloc[0]) if len(rows) else float("nan")
        others = ", ".join(f"{fmt_us(t)} ({e})" for t, e in zip(rows["time_us"].iloc[1:], rows["experiment"].iloc[1:]))
        params = f"{rows['params'].iloc[0]} ({rows['experiment'].iloc[0]})" if len(rows) else ""
        v = verdict(list(rows["time_us"]), a.paper_us)
        counts["faster" if v.startswith("**") else "not measured" if v == "not measured"
               else "mixed" if v.startswith("faster in") else "slower"] += 1
        lines.append(f"| {a.size} | {a.paper_label} | {fmt_us(a.paper_us)} | {fmt_us(ours)} | {others or '–'} | "
                     f"{params} | {v} |")
    lines += fused_fft_section(summary)
    lines[5:5] = [f"**{counts['faster']} of {len(ANCHORS)} anchors matched or beaten in every run, {counts['mixed']} "
                  f"in some runs only, {counts['slower']} slower, {counts['not measured']} not measured.** Below "
                  "about 10 µs a case moves by 10-20% between processes (launch latency, clocks), so a "
                  "single run decides little there.", "",
                  *([f"**Incomplete results: {', '.join(stopped)}; rows from them may change.**", ""] if stopped else [])]
    return "\n".join(lines) + "\n", counts


@exit_2_on_bad_results("anchors")
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", help="result folders (default: every GPU under results/)")
    ap.add_argument("--quick", action="store_true", help="the quick-run folders instead")
    args = ap.parse_args(argv)
    for d in paths.selected_dirs(args.dirs, args.quick):
        summary = load_summary(d)
        if summary.empty:
            continue
        gpu = gpu_name_of(summary, d)
        page, counts = build_page(summary, gpu, incomplete_notes(d))
        out = Path(d) / "anchors.md"
        tmp = out.with_suffix(".md.tmp")
        tmp.write_text(page)
        tmp.replace(out)
        print(f"anchors: {out}: {counts['faster']} matched or beaten, {counts['mixed']} in some runs, "
              f"{counts['slower']} slower, "
              f"{counts['not measured']} not measured")
    return 0


if __name__ == "__main__":
    sys.exit(main())
