"""Sets every number of docs/ANCHORS.md (the paper's own kernels, built for sm_90 and run on the
H200; read from that file) beside our counterpart measured in results/<gpu>/: results/<gpu>/anchors.md.

    python -m xcsuite anchors [GPU_DIR ...]

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
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from xcsuite.summary import gpu_name_of, load_summary, paper_experiments, paper_rows
from xcsuite.tables import fmt_time
from xcsuite import paths
from xcsuite.results import exit_2_on_bad_results, incomplete_notes


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


ANCHORS_MD = paths.ROOT / "docs" / "ANCHORS.md"
ANCHORS_SECTION = "## The paper's own implementation, built for sm_90 and run on the H200"
# Each column of that section's tables as this project names it: variant, the parameters that
# make it the paper's tuning (others are free), and the label on our page.
ANCHOR_COLUMNS = {
    "overlap-wise": ("overlap-wise", {}, "overlap-wise"),
    "split-row (rows 1)": ("split-row", {"rows": "1"}, "split-row (rows 1)"),
    "grouped-overlap (S8 L8)": ("grouped-overlap", {"overlaps": "8", "left_rows": "8"}, "grouped-overlap (S8 L8)"),
    "grouped (S2 L8)": ("grouped-overlap", {"overlaps": "2", "left_rows": "8"}, "grouped-overlap (S2 L8)"),
    "warp-per-overlap (4)": ("warp-per-overlap", {"overlaps_per_block": "4"}, "warp-per-overlap (4)"),
    "warp-per-overlap shared-mem": ("warp-per-overlap-shared", {}, "warp-per-overlap shared-mem"),
    "fft (no plan)": ("fft", {}, "fft (no plan)"),
    "fft": ("fft", {}, "fft (no plan)"),
    "multi-matrix-right + split-row (R8, rows 1)": ("multi-matrix-right+split-row", {"rights": "8", "rows": "1"},
                                                    "mm-right + split-row (R8, rows 1)"),
    "multi-matrix-right + split-row (R8)": ("multi-matrix-right+split-row", {"rights": "8"}, "mm-right + split-row (R8)"),
    "multi-matrix-right + grouped (4/4/4)": ("multi-matrix-right+grouped-overlap",
                                             {"rights": "4", "overlaps": "4", "left_rows": "4"},
                                             "mm-right + grouped (4/4/4)"),
    "multi-matrix-right + grouped (4/4/4, 20 streams)": ("multi-matrix-right+grouped-overlap",
                                                         {"rights": "4", "overlaps": "4", "left_rows": "4"},
                                                         "mm-right + grouped (4/4/4)"),
    "multi-matrix-right (R8)": ("multi-matrix-right", {"rights": "8"}, "multi-matrix-right (R8)"),
}
# The tables by the sentence above them: (section on our page, form, nL, nR, microseconds per unit)
ANCHOR_TABLES = {"One-to-one": ("one-to-one", "one-to-one", 1, 1, 1.0),
                 "One-to-many, 1 left x 32 right": ("one-to-many 1 x 32", "one-to-many", 1, 32, 1.0)}
# Rows of the table in milliseconds, one case each
ANCHOR_CASES = {
    "n-to-m 32-to-32, 256 x 256": ("n-to-m 32-to-32", "n-to-m", 256, 32, 32),
    "n-to-mn real-data shape: 86 left tiles, 50 x 86 right tiles, 96 x 96":
        ("n-to-mn real-data shape (86 x 50*86, 96 x 96)", "n-to-mn", 96, 86, 4300),
}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _time(cell: str) -> float | None:
    m = re.match(r"\**([0-9.]+)", cell)  # "**48.8** (15.0 TFLOP/s)" -> 48.8; "-": not measured
    return float(m.group(1)) if m else None


def read_anchors(path: Path = ANCHORS_MD) -> list[Anchor]:
    """The anchors of docs/ANCHORS.md's section on the paper's implementation run on the H200,
    in the order of its tables (per size for the first two, per case for the last). A column or
    case this script does not know is an error: a changed document must be mapped, not skipped."""
    text = Path(path).read_text()
    if ANCHORS_SECTION not in text:
        raise ValueError(f"{path}: no section '{ANCHORS_SECTION}'")
    lines = text.split(ANCHORS_SECTION, 1)[1].split("\n## ", 1)[0].splitlines()
    out, i, caption = [], 0, ""
    while i < len(lines):
        if not lines[i].startswith("|"):
            caption = lines[i].strip() or caption
            i += 1
            continue
        head = _cells(lines[i])
        rows = []
        i += 2  # the header and its |---| line
        while i < len(lines) and lines[i].startswith("|"):
            rows.append(_cells(lines[i]))
            i += 1
        unknown = [c for c in head[1:] if c not in ANCHOR_COLUMNS]
        if unknown:
            raise ValueError(f"{path}: unknown anchor column(s) {unknown}: add them to ANCHOR_COLUMNS")
        if head[0] == "size":
            table = next((v for k, v in ANCHOR_TABLES.items() if caption.startswith(k)), None)
            if table is None:
                raise ValueError(f"{path}: a table after '{caption}' that ANCHOR_TABLES does not know")
            section, form, nL, nR, unit = table
            for j, col in enumerate(head[1:], 1):
                variant, params, label = ANCHOR_COLUMNS[col]
                for r in rows:
                    t = _time(r[j])
                    if t is not None:
                        out.append(Anchor(section, variant, form, int(r[0]), nL, nR, params, t * unit, label))
        else:  # one case per row, milliseconds
            for r in rows:
                if r[0] not in ANCHOR_CASES:
                    raise ValueError(f"{path}: unknown anchor case '{r[0]}': add it to ANCHOR_CASES")
                section, form, size, nL, nR = ANCHOR_CASES[r[0]]
                for col, cell in zip(head[1:], r[1:]):
                    variant, params, label = ANCHOR_COLUMNS[col]
                    t = _time(cell)
                    if t is not None:
                        out.append(Anchor(section, variant, form, size, nL, nR, params, t * 1e3, label))
    return out


ANCHORS = read_anchors()


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
             "Generated by python -m xcsuite anchors from summary.csv. *Paper* is the paper's own implementation built "
             "for sm_90 and measured on an H200 with the paper's protocol (docs/ANCHORS.md); *ours* is the "
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
    paths.add_dirs_arguments(ap)
    args = ap.parse_args(argv)
    for d in paths.selected_dirs(args.dirs, args.quick):
        summary = load_summary(d)
        if summary.empty:
            continue
        gpu = gpu_name_of(summary, d)
        page, counts = build_page(paper_rows(summary), gpu, incomplete_notes(d, paper_experiments(d)))
        out = Path(d) / "anchors.md"
        paths.write_text_atomic(out, page)
        print(f"anchors: {out}: {counts['faster']} matched or beaten, {counts['mixed']} in some runs, "
              f"{counts['slower']} slower, "
              f"{counts['not measured']} not measured")
    return 0

