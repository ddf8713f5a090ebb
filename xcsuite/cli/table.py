"""Table 1 from the tuning sweep (experiment table1): for every form (row) and size (column) the
fastest variant with its best parameters, its time, and its margin over the runner-up (the
fastest *different* variant). Four readings:

  fftplan-paper  the paper's: fft+plan (plan creation timed), the paper's kernels only
  fft-paper      fft with plans reused, the paper's kernels only
  fftplan-all    fft+plan, with this project's new kernels (family "hopper")
  fft-all        fft, with the new kernels

Writes results/<gpu>/table1.md (all readings, beside the paper's table), table1_<reading>.csv
and plots/<gpu>/table1_<reading>.png (--pdf: and .pdf). Missing cells are left empty with a warning.

The window table (experiment window_table): per size (row) and output window (column)
the fastest variant of this project by time per call + finish_time, its margin over the fastest
other one, and the fastest peer (PyTorch, CuPy) beside it: results/<gpu>/window_table.md,
window_table.csv and plots/<gpu>/window_table.png; nothing but a line when it is not measured yet.

The normalization table (zncc_frames, zncc_match, zncc_autocorr, signals_matched): per
problem, each algorithm's raw and normalized time and their ratio (the issue's target: at most
1.25), the fastest of each half and the fastest peer: results/<gpu>/normalization_table.md (+ .csv).
The signal table (signals_seed004, signals_matched, signals_ambient): per problem every
series by time, with its precision and direct-equivalent TFLOP/s, and its time over the fastest
peer's: results/<gpu>/signal_table.md (+ .csv).
The reduction table (reductions): each target with its measured ratio and
whether it holds, and per case the reduction against our map and the map then PyTorch's reduction:
results/<gpu>/reductions_table.md (+ .csv).

    python -m xcsuite table [GPU_DIR ...]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

import pandas as pd

from xcsuite import paths
from xcsuite.results import exit_2_on_bad_results, progress
from xcsuite.summary import gpu_name_of, load_summary
from xcsuite.tables import (CATEGORY_COLORS, COLUMNS, NORMALIZATION_TARGET, READINGS, ROWS, TF32_DENSE_PEAK_TFLOPS,
                            WINDOW_CELL_COLORS,
                            build_normalization_table, build_signal_table, build_table, build_window_table, fmt_time,
                            headline_cells, headline_markdown,
                            markdown, multigpu_markdown, normalization_markdown, paper_markdown, short_name,
                            signal_markdown,
                            window_columns, window_markdown)


def cell_grid(ax, columns: int, rows: int) -> None:
    """Axes of a table figure: one unit square per cell, the first row at the top."""
    ax.set_xlim(0, columns)
    ax.set_ylim(0, rows)
    ax.invert_yaxis()


def not_measured_cell(ax, i: int, j: int) -> None:
    import matplotlib.pyplot as plt  # figure() chose the backend

    ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor="white", edgecolor="0.7"))
    ax.text(j + 0.5, i + 0.5, "not measured", ha="center", va="center", fontsize=6, color="0.5")


def figure(table: pd.DataFrame, reading: str, gpu_name: str, out_dir: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2.0 * len(COLUMNS) + 1.2, 0.95 * len(ROWS) + 1.4))
    cell_grid(ax, len(COLUMNS), len(ROWS))
    for i, row in enumerate(ROWS):
        for j, size in enumerate(COLUMNS):
            r = table[(table["row"] == row) & (table["size"] == size)]
            if r.empty or pd.isna(r.iloc[0]["best_variant"]):
                not_measured_cell(ax, i, j)
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
          "Generated by python -m xcsuite table from the `table1` tuning sweep (experiments/table1.py): each cell is the "
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
        paths.write_csv_atomic(gpu_dir / f"table1_{reading}.csv", t)
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
    paths.write_text_atomic(gpu_dir / "table1.md", "\n".join(md))
    return tables


def window_figure(table: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    """The window table as a grid of coloured cells (the winner's colour), like Table 1's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = window_columns()
    sizes = sorted(int(x) for x in table["size"].unique())
    fig, ax = plt.subplots(figsize=(2.1 * len(cols) + 1.2, 0.95 * len(sizes) + 1.5))
    cell_grid(ax, len(cols), len(sizes))
    for i, size in enumerate(sizes):
        for j, (label, _) in enumerate(cols):
            r = table[(table["size"] == size) & (table["column"] == label)]
            if r.empty or pd.isna(r.iloc[0]["best_variant"]):
                not_measured_cell(ax, i, j)
                continue
            r = r.iloc[0]
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=WINDOW_CELL_COLORS.get(r["best_variant"], "#eeeeee"),
                                       edgecolor="white", lw=2))
            margin = f"  x{r['margin']:.2f}" if r["margin"] == r["margin"] else ""
            ax.text(j + 0.5, i + 0.22, short_name(r["best_variant"]), ha="center", va="center", fontsize=6.2,
                    weight="bold")
            ax.text(j + 0.5, i + 0.5, f"{fmt_time(r['best_time_us'])}{margin}", ha="center", va="center", fontsize=5.8)
            if isinstance(r["best_peer"], str):
                ax.text(j + 0.5, i + 0.78, f"peer {r['best_peer']}: x{r['peer_ratio']:.2f}", ha="center",
                        va="center", fontsize=4.8, color="0.25", style="italic")
    ax.set_xticks([j + 0.5 for j in range(len(cols))])
    ax.set_xticklabels([label for label, _ in cols], fontsize=8)
    ax.xaxis.tick_top()
    ax.set_yticks([i + 0.5 for i in range(len(sizes))])
    ax.set_yticklabels([f"{n} x {n}" for n in sizes], fontsize=8)
    ax.tick_params(length=0)
    for sp in ax.spines.values():
        sp.set_visible(False)
    ax.set_title(f"Best algorithm per size and output window on {title}\n(one-to-one; time per call + finish_time; "
                 "xN = margin over the fastest other variant; peer: the fastest other library's time over the "
                 "winner's)", fontsize=9, pad=24)
    files = paths.save_figure(fig, out_dir, "window_table", dpi=150, bbox_inches="tight")
    plt.close(fig)
    return files


def make_window_table(gpu_dir: Path, plots_root: Path | None = None) -> pd.DataFrame | None:
    """results/<gpu>/window_table.md (+ .csv, plots/<gpu>/window_table.png) from the window_table
    experiment; None, writing nothing, when it has no results yet."""
    gpu_dir = Path(gpu_dir)
    pts, summary, _ = experiment_points(gpu_dir, ["window_table"], warn_missing=False)
    if pts.empty:
        return None
    gpu_name = gpu_name_of(summary, gpu_dir)
    stopped = progress(gpu_dir, ["window_table"]).get("window_table")
    stopped = stopped.note() if stopped else ""
    t = build_window_table(pts)
    paths.write_csv_atomic(gpu_dir / "window_table.csv", t)
    md = [f"# Best algorithm per size and output window on {gpu_name}\n",
          "Generated by python -m xcsuite table from the `window_table` experiment (experiments/window_table.py): "
          "one-to-one N x N, each cell the fastest variant of this project by time per call + finish_time "
          "(fft's untimed crop to the window; 10 repetitions of >= 0.1 s, IQR outliers removed, default "
          "parameters), its margin over the fastest *different* variant, and the fastest peer (another "
          "library: PyTorch, CuPy) with its time over the winner's — listed, never the winner. Columns: "
          "max_shift S (±S), same, full, and valid with an N/4 x N/4 right (template matching). – : no "
          "measurement; direct kernels are not measured above 3e11 multiply-adds per call.\n"]
    if stopped:
        md.append(f"**The window_table experiment is {stopped}: cells may change when it is finished.**\n")
    md.append(window_markdown(t))
    paths.write_text_atomic(gpu_dir / "window_table.md", "\n".join(md))
    try:
        window_figure(t, gpu_name + (f" (window_table {stopped})" if stopped else ""),
                      paths.plots_dir_for(gpu_dir, plots_root))
    except Exception as e:  # noqa: BLE001
        warnings.warn(f"window_table figure skipped: {e}")
    return t


NORMALIZATION_EXPERIMENTS = ("zncc_frames", "zncc_match", "zncc_autocorr", "signals_matched")
SIGNAL_EXPERIMENTS = ("signals_seed004", "signals_matched", "signals_ambient")


def experiment_points(gpu_dir: Path, names,
                      warn_missing: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The figure points of the named experiments that have results (their notes warned), the
    summary, and the names measured; an experiment without results is left out, with a warning
    unless warn_missing is False."""
    import experiments as suite
    from xcsuite.figdata import points

    summary = load_summary(gpu_dir)
    frames, measured = [], []
    for name in names:
        if summary.empty or not (summary["experiment"] == name).any():
            if warn_missing:
                warnings.warn(f"{gpu_dir.name}: {name} not measured yet")
            continue
        pts, notes = points(suite.load(name), summary, gpu_dir)
        for n in notes:
            warnings.warn(n)
        if not pts.empty:
            frames.append(pts)
            measured.append(name)
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), summary, measured


def stopped_note(gpu_dir: Path, names) -> str:
    stopped = {n: s.note() for n, s in progress(gpu_dir, list(names)).items() if s and s.note()}
    return "".join(f"**{n} is {note}: rows may change when it is finished.**\n\n" for n, note in stopped.items())


def make_normalization_table(gpu_dir: Path) -> pd.DataFrame | None:
    """results/<gpu>/normalization_table.md (+ .csv); None, writing nothing, without results."""
    gpu_dir = Path(gpu_dir)
    pts, summary, measured = experiment_points(gpu_dir, NORMALIZATION_EXPERIMENTS)
    if pts.empty:
        return None
    t = build_normalization_table(pts)
    if t.empty:
        return None
    paths.write_csv_atomic(gpu_dir / "normalization_table.csv", t)
    met = t[t["meets_target"].notna()]
    md = [f"# Normalized correlation against the raw one on {gpu_name_of(summary, gpu_dir)}\n",
          "Generated by python -m xcsuite table from the experiments " + ", ".join(f"`{n}`" for n in measured) + ": for each "
          "problem, each algorithm's time per call + finish_time on the raw correlation and normalized (the "
          "normalization's prepass, the raw correlation on the cropped, mean-subtracted inputs, and the epilogue), "
          f"and their ratio; the normalization's target is at most x{NORMALIZATION_TARGET} for the same algorithm. Peers "
          "(PyTorch) compute the normalization as a PyTorch user writes it. – : not measured.\n",
          f"Within the target: {int(met['meets_target'].astype(bool).sum())} of {len(met)} algorithm-problem pairs "
          "measured both ways.\n", stopped_note(gpu_dir, measured), normalization_markdown(t, pts)]
    paths.write_text_atomic(gpu_dir / "normalization_table.md", "\n".join(md))
    return t


def make_signal_table(gpu_dir: Path) -> pd.DataFrame | None:
    """results/<gpu>/signal_table.md (+ .csv); None, writing nothing, without results."""
    gpu_dir = Path(gpu_dir)
    pts, summary, measured = experiment_points(gpu_dir, SIGNAL_EXPERIMENTS)
    if pts.empty:
        return None
    # A variant's precision as its measurements record it (older rows may lack it: the most common non-empty).
    known = summary[summary["precision"].fillna("") != ""]
    precision = known.groupby("variant")["precision"].agg(lambda x: x.mode().iloc[0]).to_dict()
    peak = summary["peak_flops"].dropna()
    t = build_signal_table(pts, precision, fp32_peak_tflops=float(peak.median()) / 1e12 if not peak.empty else float("nan"),
                           tf32_peak_tflops=TF32_DENSE_PEAK_TFLOPS.get(gpu_name_of(summary, gpu_dir), float("nan")))
    paths.write_csv_atomic(gpu_dir / "signal_table.csv", t)
    md = [f"# One-dimensional signals on {gpu_name_of(summary, gpu_dir)}\n",
          "Generated by python -m xcsuite table from the experiments " + ", ".join(f"`{n}`" for n in measured) + ": per "
          "problem, every series by time per call + finish_time, fastest first, with its precision (fp32: within "
          "1e-5 of float64 like 3xtf32; tf32: one TF32 pass, bound 2e-3), its direct-equivalent rate (2 x the "
          "window's multiply-adds per second, the FFTs' included), that rate as a % of its precision's peak (fp32 "
          "and 3xtf32: the FP32 FMA peak, which 3xTF32 on the tensor cores may pass; tf32: the dense TF32 tensor "
          "peak of NVIDIA's datasheet, – where not known) and its time over the fastest peer's (PyTorch, "
          "CuPy, as their users call them). Bold: the fastest of this project at its precision.\n",
          stopped_note(gpu_dir, measured), signal_markdown(t)]
    paths.write_text_atomic(gpu_dir / "signal_table.md", "\n".join(md))
    return t


def make_reduction_table(gpu_dir: Path) -> pd.DataFrame | None:
    """results/<gpu>/reductions_table.md (+ .csv): the reductions' targets, whether each holds, and per
    case where reducing pays (the reduction against the map and the map then PyTorch's reduction);
    None, writing nothing, without results of the experiment reductions."""
    from xcsuite.results import load_results
    from xcsuite.tables import build_reduction_table, reduction_markdown, reduction_measurements, reduction_pays

    gpu_dir = Path(gpu_dir)
    f = gpu_dir / "reductions.json"
    if not f.exists():
        return None
    times, mem = reduction_measurements(load_results(f))
    if not times:
        return None
    t, pays = build_reduction_table(times, mem), reduction_pays(times)
    paths.write_csv_atomic(gpu_dir / "reductions_table.csv", t)
    summary = load_summary(gpu_dir)
    held = t[t["holds"].notna()]
    md = [f"# Reductions on {gpu_name_of(summary, gpu_dir)}\n",
          "Generated by python -m xcsuite table from results/" + gpu_dir.name + "/reductions.json (experiment `reductions`): "
          "every time is the mean of the repetitions of one call from Python on PyTorch CUDA tensors, checked on "
          "planted answers first. Ours: xcorr.peaks2d / peaks1d / max_over_rights (algorithm auto); map: "
          "xcorr.correlate2d / correlate1d into a reused tensor; PyTorch as a competent user writes it: the FFT at a fast "
          "size once per input, broadcast product, irfft, then the reduction in torch on the window's view, no layout "
          "copies (ambient noise: chunks of 16 lefts; 2-D template matching: torch-2dtm's loop of 16 templates, padded "
          "to our window; circular: at the image's own size, as the tools run it). The targets are "
          "experiments/reductions.py's; 2-D template matching's rate is judged at the largest template count measured. "
          "– : not measured.\n",
          f"Targets holding: {int(held['holds'].astype(bool).sum())} of {len(held)} measured ({len(t)} in all).\n",
          stopped_note(gpu_dir, ["reductions"]), reduction_markdown(t, pays)]
    paths.write_text_atomic(gpu_dir / "reductions_table.md", "\n".join(md))
    return t


HEADLINE_NOTE = ("Generated by python -m xcsuite table from summary.csv: per problem (full output, raw correlation, warm "
                 "runs), the fastest run over every experiment that measured it and every tuning; new = this project's "
                 "definition-based kernels at FP32-class accuracy (3xTF32 included), with their % of the FP32 FMA peak; "
                 "PyTorch FFT = torch-fft, PyTorch's FFT correlation as a user writes it (rfft2 at a fast size, "
                 "broadcast product, irfft2, plans cached), measured in the same runs; bold: this project's fastest. "
                 "README.md and docs/results.md show this table (`python -m xcsuite table --readme` copies it there).")
def make_headline_table(gpu_dir: Path) -> pd.DataFrame | None:
    """results/<gpu>/headline.md, the README's results table (tables.headline_cells); None,
    writing nothing, where none of its problems is measured."""
    gpu_dir = Path(gpu_dir)
    summary = load_summary(gpu_dir)
    cells = headline_cells(summary) if not summary.empty else pd.DataFrame()
    if cells.empty:
        return None
    text = f"# Headline problems on {gpu_name_of(summary, gpu_dir)}\n\n{HEADLINE_NOTE}\n\n" + headline_markdown(cells)
    paths.write_text_atomic(gpu_dir / "headline.md", text)
    return cells


# The documents' copies of committed tables: name -> (first line, last line) of its block for a GPU
# (slug: its results folder), filled by readme_with_tables from that folder's files. README.md shows
# the headline table; docs/results.md every block, for every GPU it has blocks of.
DOC_FILES = ("README.md", "docs/results.md")
README_BLOCKS = {
    "headline": ("<!-- headline table: results/{slug}/headline.md, copied by python -m xcsuite table --readme -->",
                 "<!-- end of the headline table -->"),
    "window": ("<!-- window table: results/{slug}/window_table.csv, each cell's winner, copied by python -m xcsuite table "
               "--readme -->", "<!-- end of the window table -->"),
    "reductions": ("<!-- reductions table: results/{slug}/reductions_table.md, copied by python -m xcsuite table --readme -->",
                   "<!-- end of the reductions table -->"),
    "multigpu": ("<!-- multi-GPU table: results/{slug}/multi-gpu/, copied by python -m xcsuite table --readme -->",
                 "<!-- end of the multi-GPU table -->"),
}


def readme_block(name: str, gpu_dir: Path) -> str:
    """The rows of README block `name` from gpu_dir's committed files."""
    gpu_dir = Path(gpu_dir)
    if name in ("headline", "reductions"):  # the generated page's tables, without its prose
        blocks, rows = [], []
        for line in (gpu_dir / ("headline.md" if name == "headline" else "reductions_table.md")).read_text().splitlines(
                keepends=True):
            if line.startswith("|"):
                rows.append(line)
            elif rows:
                blocks.append("".join(rows))
                rows = []
        return "\n".join(blocks + ["".join(rows)] if rows else blocks)
    if name == "multigpu":  # the batch and the sweep over the host's GPUs, where measured
        found = [gpu_dir / "multi-gpu" / f for f in ("batch_scaling.json", "sweep_scaling.json", "tm_scaling.json")]
        return multigpu_markdown(*(json.loads(f.read_text()) if f.exists() else None for f in found))
    return window_markdown(pd.read_csv(gpu_dir / "window_table.csv"), winners_only=True)


def readme_with_tables(readme: str, gpu_dir: Path, names=tuple(README_BLOCKS)) -> str:
    """The README text with its blocks `names` for this GPU replaced by their tables from gpu_dir;
    ValueError naming a block the README lacks."""
    for name in names:
        begin, end = (m.format(slug=Path(gpu_dir).name) for m in README_BLOCKS[name])
        i = readme.find(begin)
        j = readme.find(end, i)
        if i < 0 or j < 0:
            raise ValueError(f"the README has no block '{begin}' ... '{end}'")
        readme = readme[:i + len(begin)] + "\n" + readme_block(name, gpu_dir) + readme[j:]
    return readme


@exit_2_on_bad_results("table")
def main(argv=None) -> int:
    # The whole docstring: its first paragraph ends on "Four readings:", before them.
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    paths.add_dirs_arguments(ap)
    ap.add_argument("--pdf", action="store_true", help="a PDF beside each PNG (not committed)")
    ap.add_argument("--readme", action="store_true",
                    help="also copy each GPU's headline, window, reductions and multi-GPU tables into README.md and "
                         "docs/results.md, "
                         "where each has that GPU's blocks")
    args = ap.parse_args(argv)
    if args.pdf:
        os.environ["XCORR_PLOT_FORMATS"] = "png,pdf"
    dirs = paths.selected_dirs(args.dirs, args.quick)
    for d in dirs:
        tables = make_tables(d)
        if tables:
            print(f"table: {d}/table1.md ({', '.join(tables)})")
        if make_window_table(d) is not None:
            print(f"table: {d}/window_table.md")
        else:
            print(f"table: {d.name}: window_table not measured yet")
        for name, make in (("normalization_table", make_normalization_table), ("signal_table", make_signal_table),
                           ("reductions_table", make_reduction_table),
                           ("headline", make_headline_table)):
            if make(d) is not None:
                print(f"table: {d}/{name}.md")
            else:
                print(f"table: {d.name}: {name}: nothing measured yet")
        ours = Path(d).resolve().parent == (paths.ROOT / "results").resolve()  # never a test's or a copy's folder
        for doc in (DOC_FILES if args.readme and ours else ()):
            text = (paths.ROOT / doc).read_text() if (paths.ROOT / doc).exists() else ""
            names = [n for n, (begin, _) in README_BLOCKS.items() if begin.format(slug=d.name) in text]
            if names:
                paths.write_text_atomic(paths.ROOT / doc, readme_with_tables(text, d, names))
                print(f"table: {doc}'s {' and '.join(names)} tables from {d}")
    return 0

