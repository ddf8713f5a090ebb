#!/usr/bin/env python3
"""Table 1 from the tuning sweep (experiment table1): for every form (row) and size (column) the
fastest variant with its best parameters, its time, and its margin over the runner-up (the
fastest *different* variant). Four readings:

  fftplan-paper  the paper's: fft+plan (plan creation timed), the paper's kernels only
  fft-paper      fft with plans reused, the paper's kernels only
  fftplan-all    fft+plan, with this project's new kernels (family "hopper")
  fft-all        fft, with the new kernels

Writes results/<gpu>/table1.md (all readings, beside the paper's table), table1_<reading>.csv
and plots/<gpu>/table1_<reading>.png (--pdf: and .pdf). Missing cells are left empty with a warning.

    scripts/table.py [GPU_DIR ...]
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from aggregate import gpu_name_of, load_summary  # noqa: E402
from xcsuite import paths  # noqa: E402
from xcsuite.results import exit_2_on_bad_results, progress  # noqa: E402

from experiments._spec import SIZES_TABLE  # noqa: E402

ROWS = ["1-to-1", "1-to-2", "1-to-8", "1-to-32", "2-to-2", "8-to-8", "32-to-32"]
COLUMNS = list(SIZES_TABLE)
COLUMN_LABELS = {512: "512 (beyond)"}
READINGS = {
    "fftplan-paper": dict(fft="fft+plan", new=False, title="with fft+plan, the paper's kernels (the paper's reading)"),
    "fft-paper": dict(fft="fft", new=False, title="with fft (plans reused), the paper's kernels"),
    "fftplan-all": dict(fft="fft+plan", new=True, title="with fft+plan, including this project's new kernels"),
    "fft-all": dict(fft="fft", new=True, title="with fft (plans reused), including this project's new kernels"),
}
# The paper's Table 1 (A100), as extracted from its text: cell spans were lost, each entry is
# taken to span two columns (16-32, 64-128, 192-256, 384-beyond), 32-to-32's "grouped" four.
PAPER_TABLE = {
    "1-to-1": ["warp-overlap"] * 2 + ["split"] * 2 + ["grouped"] * 2 + ["fft+p"] * 2,
    "1-to-2": ["split"] * 2 + ["grouped"] * 4 + ["fft+p"] * 2,
    "1-to-8": ["split"] * 2 + ["grouped"] * 4 + ["fft+p"] * 2,
    "1-to-32": ["split"] * 2 + ["grouped"] * 2 + ["fft+p"] * 4,
    "2-to-2": ["split"] * 2 + ["grouped"] * 4 + ["fft+p"] * 2,
    "8-to-8": ["split"] * 2 + ["grouped"] * 4 + ["fft+p"] * 2,
    "32-to-32": ["grouped"] * 4 + ["fft+p"] * 4,
}
CATEGORY_COLORS = {"warp-overlap": "#fdd49e", "split": "#a6cee3", "grouped": "#b2df8a", "multi-matrix": "#cab2d6",
                   "warp-shuffle": "#ffffb3", "fft+p": "#fb9a99", "fft": "#fccde5", "new": "#ff7f00",
                   "baseline": "#d9d9d9"}


def category(variant: str, family: str = "") -> str:
    """The paper's name for the kind of algorithm a variant is."""
    if family == "hopper":
        return "new"
    if variant == "fft+plan":
        return "fft+p"
    if variant == "fft":
        return "fft"
    if variant == "overlap-wise":
        return "baseline"
    if "split-row" in variant:
        return "split"
    if "grouped-overlap" in variant:
        return "grouped"
    if variant.startswith(("warp-per-overlap", "block-per-overlap")):
        return "warp-overlap"
    if variant.startswith("multi-matrix"):
        return "multi-matrix"
    return variant


def short_name(variant: str) -> str:
    return (variant.replace("multi-matrix-", "mm-").replace("+grouped-overlap", " + grouped")
            .replace("+split-row", " + split-row"))


def candidates(summary: pd.DataFrame, reading: str, experiment: str = "table1") -> pd.DataFrame:
    r = READINGS[reading]
    df = summary[(summary["experiment"] == experiment) & (summary["status"] == "ok")].copy()
    drop_fft = "fft" if r["fft"] == "fft+plan" else "fft+plan"
    df = df[df["variant"] != drop_fft]
    if not r["new"]:
        df = df[df["family"] != "hopper"]
    df = df[df["hL"] == df["hR"]]
    df["size"] = df["hL"].astype(int)
    return df


def build_table(summary: pd.DataFrame, reading: str, experiment: str = "table1") -> pd.DataFrame:
    """One row per (form row, size): best and runner-up (a different variant) with the margin."""
    df = candidates(summary, reading, experiment)
    out = []
    for row in ROWS:
        for j, size in enumerate(COLUMNS):
            cell = df[(df["counts"] == row) & (df["size"] == size)]
            rec = {"row": row, "size": size, "paper": PAPER_TABLE[row][j], "candidates": len(cell)}
            if cell.empty:
                out.append(rec)
                continue
            cell = cell.sort_values("time_us")
            best = cell.iloc[0]
            other = cell[cell["variant"] != best["variant"]]
            rec.update(best_variant=best["variant"], best_category=category(best["variant"], best["family"]),
                       best_params=best["params"], best_time_us=best["time_us"], best_cv=best["cv"],
                       best_peak_pct=best["peak_pct"])
            if not other.empty:
                ru = other.iloc[0]
                rec.update(runner_up_variant=ru["variant"], runner_up_params=ru["params"],
                           runner_up_time_us=ru["time_us"], margin=ru["time_us"] / best["time_us"])
            # the paper's "fft+p" column is fft's, whichever way plans are counted
            rec["agrees_with_paper"] = rec["best_category"] == rec["paper"] or (
                rec["best_category"] == "fft" and rec["paper"] == "fft+p")
            out.append(rec)
    cols = ["row", "size", "best_variant", "best_category", "best_params", "best_time_us", "best_cv", "best_peak_pct",
            "runner_up_variant", "runner_up_params", "runner_up_time_us", "margin", "paper", "agrees_with_paper",
            "candidates"]
    return pd.DataFrame(out).reindex(columns=cols)


def fmt_time(us: float) -> str:
    if us != us:
        return ""
    if us < 1000:
        return f"{us:.3g} µs"
    if us < 1e6:
        return f"{us / 1000:.3g} ms"
    return f"{us / 1e6:.3g} s"


def markdown(table: pd.DataFrame) -> str:
    head = "| | " + " | ".join(f"{COLUMN_LABELS.get(c, c)}" for c in COLUMNS) + " |\n"
    head += "|---" * (len(COLUMNS) + 1) + "|\n"
    lines = []
    for row in ROWS:
        cells = []
        for size in COLUMNS:
            r = table[(table["row"] == row) & (table["size"] == size)]
            if r.empty or pd.isna(r.iloc[0]["best_variant"]):
                cells.append("–")
                continue
            r = r.iloc[0]
            params = f" ({r['best_params']})" if r["best_params"] else ""
            margin = f", x{r['margin']:.2f} over {r['runner_up_variant']}" if r["margin"] == r["margin"] else ""
            mark = "" if r["agrees_with_paper"] else " ≠"
            cells.append(f"**{r['best_variant']}**{params}<br>{fmt_time(r['best_time_us'])}{margin}{mark}")
        lines.append(f"| {row} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


def paper_markdown() -> str:
    head = "| | " + " | ".join(f"{COLUMN_LABELS.get(c, c)}" for c in COLUMNS) + " |\n"
    head += "|---" * (len(COLUMNS) + 1) + "|\n"
    return head + "\n".join(f"| {r} | " + " | ".join(PAPER_TABLE[r]) + " |" for r in ROWS) + "\n"


def figure(table: pd.DataFrame, reading: str, gpu_name: str, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2.0 * len(COLUMNS) + 1.2, 0.95 * len(ROWS) + 1.4))
    ax.set_xlim(0, len(COLUMNS))
    ax.set_ylim(0, len(ROWS))
    ax.invert_yaxis()
    for i, row in enumerate(ROWS):
        for j, size in enumerate(COLUMNS):
            r = table[(table["row"] == row) & (table["size"] == size)]
            if r.empty or pd.isna(r.iloc[0]["best_variant"]):
                ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="white", edgecolor="0.7"))
                ax.text(j + 0.5, i + 0.5, "not measured", ha="center", va="center", fontsize=6, color="0.5")
                continue
            r = r.iloc[0]
            color = CATEGORY_COLORS.get(r["best_category"], "#eeeeee")
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=color, edgecolor="white", lw=2))
            margin = f"x{r['margin']:.2f}" if r["margin"] == r["margin"] else ""
            params = str(r["best_params"]).replace(",", "\n") if r["best_params"] else ""
            ax.text(j + 0.5, i + 0.2, short_name(r["best_variant"]), ha="center", va="center", fontsize=5.6, weight="bold")
            ax.text(j + 0.5, i + 0.5, params, ha="center", va="center", fontsize=4.6)
            ax.text(j + 0.5, i + 0.82, f"{fmt_time(r['best_time_us'])}  {margin}", ha="center", va="center",
                    fontsize=5.6)
            if not r["agrees_with_paper"]:
                ax.text(j + 0.96, i + 0.1, f"paper: {r['paper']}", ha="right", va="center", fontsize=4.2, color="0.3")
    ax.set_xticks([j + 0.5 for j in range(len(COLUMNS))])
    ax.set_xticklabels([f"{c}²" if c != 512 else "512² (beyond)" for c in COLUMNS], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(ROWS))])
    ax.set_yticklabels(ROWS, fontsize=8)
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    ax.set_title(f"Table 1 on {gpu_name}: best algorithm per form and size, {READINGS[reading]['title']}\n"
                 "(time per call; xN = margin over the fastest other variant; corner note where the paper chose "
                 "differently)", fontsize=9, pad=24)
    files = paths.save_figure(fig, out_dir, f"table1_{reading}", dpi=150, bbox_inches="tight")
    plt.close(fig)
    return files


def make_tables(gpu_dir: Path, plots_root: Path | None = None) -> dict:
    gpu_dir = Path(gpu_dir)
    summary = load_summary(gpu_dir)
    if summary.empty or not (summary["experiment"] == "table1").any():
        warnings.warn(f"{gpu_dir.name}: no table1 results: Table 1 not built")
        return {}
    gpu_name = gpu_name_of(summary, gpu_dir)
    stopped = progress(gpu_dir, ["table1"]).get("table1")
    stopped = stopped.note() if stopped else ""
    has_new = (summary[summary["experiment"] == "table1"]["family"] == "hopper").any()
    tables = {}
    md = [f"# Table 1 on {gpu_name}\n",
          "Generated by scripts/table.py from the `table1` tuning sweep (experiments/table1.py): each cell is the "
          "fastest variant with its best parameters and its mean time per call (10 repetitions of >= 0.1 s, IQR "
          "outliers removed), then its margin over the fastest *different* variant. ≠ marks a cell where the "
          "paper's Table 1 chose another kind of algorithm; – a cell without measurements.\n"]
    if stopped:
        md.append(f"**The table1 sweep is {stopped}: cells may change when it is finished.**\n")
    for reading in READINGS:
        if READINGS[reading]["new"] and not has_new:
            continue
        t = build_table(summary, reading)
        tables[reading] = t
        missing = t["best_variant"].isna().sum()
        if missing:
            warnings.warn(f"{gpu_dir.name}: table1 ({reading}): {missing} cell(s) without measurements")
        t.to_csv(gpu_dir / f"table1_{reading}.csv", index=False, float_format="%.6g")
        agree = int(t["agrees_with_paper"].fillna(False).astype(bool).sum())
        md.append(f"## {READINGS[reading]['title'].capitalize()} (`{reading}`)\n")
        md.append(markdown(t))
        md.append(f"\nSame kind of algorithm as the paper's table in {agree} of {len(t) - missing} measured cells.\n")
        try:
            figure(t, reading, gpu_name + (f" (table1 {stopped})" if stopped else ""),
                   paths.plots_dir_for(gpu_dir, plots_root))
        except Exception as e:  # noqa: BLE001
            warnings.warn(f"table1 figure ({reading}) skipped: {e}")
    md.append("## The paper's Table 1 (A100)\n")
    md.append("As extracted from the paper's text (cell spans lost: each entry is taken to span two columns). "
              "warp-overlap = warp-per-overlap, split = split-row, grouped = grouped-overlap (with multi-matrix-right "
              "for one-to-many and multi-matrix-both for n-to-m), fft+p = fft+plan.\n")
    md.append(paper_markdown())
    (gpu_dir / "table1.md").write_text("\n".join(md))
    return tables


@exit_2_on_bad_results("table")
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", help="result folders (default: every GPU under results/)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--pdf", action="store_true", help="a PDF beside each PNG (not committed)")
    args = ap.parse_args(argv)
    if args.pdf:
        os.environ["XCORR_PLOT_FORMATS"] = "png,pdf"
    dirs = paths.selected_dirs(args.dirs, args.quick)
    for d in dirs:
        tables = make_tables(d)
        if tables:
            print(f"table: {d}/table1.md ({', '.join(tables)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
