"""Draws every figure from the aggregated results: one per paper figure (Fig. 15-23, with the
paper's choice of metric: time per FMA for 15/18/21, absolute time for 16/19/22, a comparison
for 17/20/23), n-to-mn, efficiency (% of FP32 peak), the output-window experiments (windows:
time against the window's half-width with the direct/FFT crossover; piv: bars; autocorr: grouped
bars), the one-dimensional signals (bars with TFLOP/s, seed 004's rate beside them), and a cross-GPU
figure when results/ holds more than one GPU. PNG in plots/<gpu>/ (--pdf: a PDF beside each, not
committed).

    python -m xcsuite plot [GPU_DIR ...] [--only fig17,fig20] [--quick]

Missing experiments, series or points are skipped with a warning; nothing here needs a GPU.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import textwrap
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import pandas as pd

from xcsuite.summary import gpu_name_of as gpu_title, load_summary
from xcsuite.tables import fmt_time
from xcsuite import paths
from xcsuite.figdata import points, refused_line
from xcsuite.results import exit_2_on_bad_results, progress

import experiments as suite

METRICS = {
    "time": ("time_us", "time per call [µs]"),
    "time_per_fma_ps": ("time_per_fma_ps", "time per FMA [ps] (saturated GPU)"),
    "time_per_fma": ("time_per_fma_ps", "time per FMA [ps] (saturated GPU)"),
    "peak_pct": ("peak_pct", "% of FP32 FMA peak"),
    "time_with_finish": ("total_us", "time per call + finish_time [µs]"),
}
GROUP_STYLE = {"baseline": dict(color="0.35", ls=":", marker="x"), "fft": dict(ls="--", marker="s"),
               "new": dict(ls="-", marker="D", lw=2.2), "paper": dict(ls="-", marker="o"),
               "peer": dict(ls="-.", marker="v", lw=1.2, mfc="none")}
# The window experiments' colour per algorithm, the same in all of their figures; the peers
# (other libraries) also drawn dash-dotted with hollow markers (lines) or hatched (bars).
VARIANT_COLORS = {"register-tiled": "C3", "small-direct": "C4", "tensor-wgmma": "C5", "overlap-wise": "0.35",
                  "fft": "C0", "fft+plan": "C9", "fft-fused": "C1", "torch-conv2d": "olive", "torch-conv2d-tf32": "yellowgreen", "torch-fft": "teal",
                  "cupy-correlate2d": "purple", "tensor-tiled": "C2", "tensor-tiled-tf32": "C6",
                  "signal-tiled": "firebrick", "tensor-hankel": "navy", "tensor-hankel-tf32": "goldenrod",
                  "fft-segmented": "black", "npp-normlevel": "saddlebrown",
                  "xcorr-reduce": "C3", "xcorr-reduce-batched": "C1", "xcorr-map": "C0", "xcorr-map+torch": "C9",
                  "torch-reduce": "teal", "torch-2dtm-circular": "olive"}
FINISH_NOTE = "time per call + finish_time (fft's untimed crop to the window), mean of the repetitions (IQR outliers removed)"
SHARED_LEGEND_FROM = 6  # more series than this: one figure legend, so no panel's data is covered


def suptitle(fig, text: str, fontsize: float = 10) -> None:
    """Figure title wrapped to the figure's width (about 13 characters per inch at 10 pt), so
    that a long experiment title is never cut off at the edges of a one-panel figure."""
    width = max(30, int(fig.get_figwidth() * 130 / fontsize))
    lines = [w for line in text.split("\n") for w in (textwrap.wrap(line, width) or [""])]
    fig.suptitle("\n".join(lines), fontsize=fontsize)


def _strict() -> bool:
    return os.environ.get("XCORR_PLOT_STRICT") == "1"


def save(fig, out_dir: Path, name: str) -> list[Path]:
    files = paths.save_figure(fig, out_dir, name, dpi=130)  # the layout is tight already
    plt.close(fig)
    return files


def size_axis(ax, sizes) -> None:
    sizes = sorted({int(s) for s in sizes if s == s})
    ax.set_xscale("log", base=2)
    if sizes:
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(s) for s in sizes], fontsize=7, rotation=45 if len(sizes) > 6 else 0)
        ax.minorticks_off()


def value_axis(ax, values, metric: str) -> None:
    v = np.asarray([x for x in values if x == x and x > 0])
    if metric == "time" or (v.size and v.max() / v.min() > 30):
        ax.set_yscale("log")
    elif metric == "peak_pct":
        ax.set_ylim(bottom=0)


def grid_of(n: int, ncols: int = 3, w: float = 4.6, h: float = 3.4):
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


# Beyond the 10 default colours: dark ones that no default colour resembles (a figure with 11 or
# more series would otherwise repeat C0, C1, ... with only the marker to tell them apart).
EXTRA_COLORS = ["navy", "maroon", "darkgoldenrod", "darkslategray", "magenta", "lime"]


def series_color(i: int) -> str:
    return f"C{i}" if i < 10 else EXTRA_COLORS[(i - 10) % len(EXTRA_COLORS)]


def style_for(group: str, i: int) -> dict:
    st = dict(GROUP_STYLE.get(group, GROUP_STYLE["paper"]))
    st.setdefault("color", series_color(i))
    return st


def series_label(label: str, s: pd.DataFrame) -> str:
    return label + (" (best tuning)" if s["tuned"].any() else "")


def bar_panel(ax, sub: pd.DataFrame, series_order: list, col: str, label: str, metric: str) -> None:
    """Horizontal bars, one per series, fastest at the top, each with its value: a panel of a
    single problem size, where lines would collapse to a column of overlapping markers."""
    rows = []
    for i, name in enumerate(series_order):
        s = sub[sub["series"] == name]
        if not s.empty:
            rows.append((series_label(name, s), float(s[col].iloc[0]),
                         style_for(s["group"].iloc[0], i).get("color")))
    rows.sort(key=lambda r: r[1], reverse=metric == "peak_pct")
    y = np.arange(len(rows))[::-1]
    ax.barh(y, [r[1] for r in rows], color=[r[2] for r in rows], alpha=0.85)
    ax.set_yticks(y, [r[0] for r in rows], fontsize=6.5)
    if metric != "peak_pct":
        ax.set_xscale("log")
    for yi, (_, v, _) in zip(y, rows):
        ax.text(v, yi, f" {v:.3g}", va="center", fontsize=6)
    ax.set_xlabel(f"{label} (N = {int(sub['size'].iloc[0])})", fontsize=8)
    ax.grid(True, axis="x", which="major", alpha=0.3)


def plot_lines(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    col, ylabel = METRICS[exp.metric]
    series_panels = list(dict.fromkeys(pts["panel"]))
    shape_panels = list(dict.fromkeys(pts["shape_panel"]))
    cells = [(sp, hp) for hp in shape_panels for sp in series_panels]
    if len(series_panels) > 1 and len(shape_panels) > 1:  # rows: shapes (counts), columns: series panels
        fig, axes = plt.subplots(len(shape_panels), len(series_panels),
                                 figsize=(4.6 * len(series_panels), 3.4 * len(shape_panels)), squeeze=False)
        axes = list(axes.flat)
    else:
        fig, axes = grid_of(len(cells))
    series_order = list(dict.fromkeys(s.label for s in exp.series))
    for ax, (sp, hp) in zip(axes, cells):
        sub = pts[(pts["panel"] == sp) & (pts["shape_panel"] == hp)]
        if sub.empty:
            ax.set_visible(False)
            continue
        ax.set_title(" / ".join(x for x in (sp, hp) if x) if len(cells) > 1 else hp, fontsize=9)
        if sub["size"].nunique() == 1:  # one size (the real-data shape): a bar per series reads better
            bar_panel(ax, sub, series_order, col, ylabel, exp.metric)
            continue
        for i, label in enumerate(series_order):
            s = sub[sub["series"] == label].sort_values("size")
            if s.empty:
                continue
            ax.plot(s["size"], s[col], label=series_label(label, s), markersize=4, **style_for(s["group"].iloc[0], i))
        size_axis(ax, sub["size"])
        value_axis(ax, sub[col], exp.metric)
        ax.set_xlabel(exp.xlabel, fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
        if len(series_order) <= SHARED_LEGEND_FROM:
            ax.legend(fontsize=6.5, loc="best")
    suptitle(fig, f"{exp.paper}: {exp.title}\n{title}")
    if len(series_order) > SHARED_LEGEND_FROM:  # one legend below the panels instead of one over each
        shared_legend(fig, axes)
    else:
        fig.tight_layout()
    return save(fig, out_dir, exp.name)


def shared_legend(fig, axes) -> None:
    handles = {}
    for ax in axes:
        if ax.get_visible():
            for h, lab in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(lab, h)
    ncol = min(4, len(handles))
    rows = math.ceil(len(handles) / ncol)
    bottom = (0.25 + 0.2 * rows) / fig.get_figheight()  # inches -> figure fraction
    fig.tight_layout(rect=(0, bottom, 1, 1))
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=ncol, fontsize=7.5, frameon=False)


def best_by_group(sub: pd.DataFrame, col: str) -> dict:
    """Per group: the fastest point per size (the best kernel of the paper, of this project,
    the baseline); fft, fft+plan, fft-fused and the peers (other libraries: torch-fft) stay
    separate lines."""
    lines = {}
    for (group, variant), g in sub.groupby(["group", "variant"]):
        if group in ("fft", "peer"):  # named by its series label ("fft-fused (new, fused FFT)")
            lines[str(g["series"].iloc[0])] = g.sort_values("size")
    for group, name in (("baseline", "overlap-wise (baseline)"), ("paper", "best of the paper's kernels"),
                        ("new", "best new kernel")):
        g = sub[sub["group"] == group]
        if g.empty:
            continue
        idx = g.groupby("size")["time_us"].idxmin()
        lines[name] = g.loc[idx].sort_values("size")
    return lines


# The right panel of a comparison figure: its best-of lines in colours no FFT series or peer uses,
# the FFT series and peers in their colour of every figure (VARIANT_COLORS).
BEST_COLORS = {"baseline": "0.35", "paper": "C2", "new": "C3"}


def comparison_style(s: pd.DataFrame, i: int) -> dict:
    group, variant = s["group"].iloc[0], s["variant"].iloc[0]
    if group in ("fft", "peer"):
        return window_style(variant, group, i)
    st = style_for(group, i)
    st["color"] = BEST_COLORS.get(group, st["color"])
    return st


def plot_comparison(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    col, ylabel = METRICS[exp.metric]
    panels = list(dict.fromkeys(pts["shape_panel"]))
    fig, axes = plt.subplots(len(panels), 2, figsize=(11, 3.8 * len(panels)), squeeze=False)
    order = [s.label for s in exp.series]
    for row, pk in enumerate(panels):
        sub = pts[pts["shape_panel"] == pk]
        ax = axes[row][0]
        for i, label in enumerate(order):
            s = sub[(sub["series"] == label) & ~sub["group"].isin(["fft", "peer"])].sort_values("size")
            if s.empty:
                continue
            ax.plot(s["size"], s[col], label=label, markersize=4, **style_for(s["group"].iloc[0], i))
        ax.set_title(f"{pk}: definition-based algorithms", fontsize=9)
        ax2 = axes[row][1]
        for i, (name, s) in enumerate(best_by_group(sub, col).items()):
            ax2.plot(s["size"], s[col], label=name, markersize=4, **comparison_style(s, i))
            if name.startswith("best"):  # name the winner at the largest size
                for _, r in s.iloc[[-1]].iterrows():
                    ax2.annotate(r["variant"], (r["size"], r[col]), fontsize=5, alpha=0.7,
                                 xytext=(2, 2), textcoords="offset points")
        ax2.set_title(f"{pk}: best definition-based vs FFT", fontsize=9)
        for a in (ax, ax2):
            size_axis(a, sub["size"])
            value_axis(a, sub[col], exp.metric)
            a.set_xlabel(exp.xlabel, fontsize=8)
            a.set_ylabel(ylabel, fontsize=8)
            a.grid(True, which="major", alpha=0.3)
            a.legend(fontsize=6.5, loc="best")
    suptitle(fig, f"{exp.paper}: {exp.title}\n{title}")
    fig.tight_layout()
    return save(fig, out_dir, exp.name)


def warn_gaps(name: str, notes: list, stopped: str = "") -> None:
    """Warns the notes of experiment `name`'s points not measured; for one stopped part-way
    (`stopped`: its progress note, which its figure's title shows) its gaps are expected until it
    is finished: one warning for them all, not one per series."""
    gaps = [n for n in notes if n.endswith("not measured yet")]
    if stopped and gaps:
        labels = [n.split("'")[1] if n.count("'") >= 2 else n for n in gaps]  # "<exp>: '<series>': N point(s) ..."
        some = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
        warnings.warn(f"{name}: {stopped}: {len(gaps)} series lack points until it is finished ({some}; "
                      "rerun the same command to resume)")
        notes = [n for n in notes if n not in gaps]
    for n in notes:
        warnings.warn(n)


def plot_efficiency(exp, summary: pd.DataFrame, gpu_dir: Path, title: str, out_dir: Path,
                    refused: dict | None = None, stopped: dict | None = None) -> list[Path]:
    frames = []
    for src in exp.derived_from:
        try:
            pts, notes = points(suite.load(src), summary, gpu_dir, refused)
        except Exception as e:  # noqa: BLE001
            if _strict():
                raise
            warnings.warn(f"efficiency: {src}: {e}")
            continue
        warn_gaps(src, notes, (stopped or {}).get(src, ""))
        frames.append(pts)
    pts = pd.concat([f for f in frames if not f.empty], ignore_index=True) if any(not f.empty for f in frames) else None
    if pts is None:
        warnings.warn("efficiency: no results of " + ", ".join(exp.derived_from))
        return []
    pts = pts[pts["group"].isin(["paper", "baseline", "new"]) & pts["peak_pct"].notna()]
    panels = list(dict.fromkeys(pts["shape_panel"]))
    fig, axes = grid_of(len(panels), ncols=4, w=3.8, h=3.0)
    for ax, pk in zip(axes, panels):
        sub = pts[pts["shape_panel"] == pk]
        for i, (name, groups, st) in enumerate([("best of the paper's kernels", ["paper", "baseline"], GROUP_STYLE["paper"]),
                                                  ("best new kernel", ["new"], GROUP_STYLE["new"])]):
            g = sub[sub["group"].isin(groups)]
            if g.empty:
                continue
            best = g.loc[g.groupby("size")["time_us"].idxmin()].sort_values("size")
            ax.plot(best["size"], best["peak_pct"], label=name, color=series_color(i), markersize=4,
                    **{k: v for k, v in st.items() if k != "color"})
            r = best.iloc[-1]
            ax.annotate(f"{r['peak_pct']:.0f}% {r['variant']}", (r["size"], r["peak_pct"]), fontsize=5,
                        xytext=(-40, 4), textcoords="offset points")
        size_axis(ax, sub["size"])
        top = max(5, sub["peak_pct"].max() * 1.25)
        ax.set_ylim(0, top)
        if top > 100:  # the tensor-core kernels do FP32-accurate work past the FP32 FMA peak
            ax.axhline(100, color="0.5", linestyle=":", linewidth=0.8)
            ax.annotate("FP32 FMA peak", (0.02, 100), xycoords=("axes fraction", "data"), fontsize=5,
                        color="0.4", xytext=(0, 2), textcoords="offset points")
        ax.set_title(pk, fontsize=8)
        ax.set_xlabel("matrix size N", fontsize=7)
        ax.set_ylabel("% of FP32 FMA peak", fontsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    suptitle(fig, f"{exp.title} (2 x FMAs / time / peak)\n{title}")
    fig.tight_layout()
    return save(fig, out_dir, exp.name)


# ---- the output-window experiments ------------------------------------------------------------

def window_style(variant: str, group: str, i: int) -> dict:
    st = style_for(group, i)
    st["color"] = VARIANT_COLORS.get(variant, st["color"])
    return st


def crossover(sub: pd.DataFrame, col: str) -> tuple[float | None, str]:
    """Where the best direct series of this project becomes slower than its best FFT series (peers
    not counted): the half-width S, interpolated on log axes between the measured S around the
    change, and a phrase for the figure."""
    from experiments._windows import method

    own = sub[sub["group"] != "peer"]
    kinds = own.assign(kind=own["variant"].map(method))
    best = {k: g.groupby("half_width")[col].min() for k, g in kinds.groupby("kind")}
    if "direct" not in best or "fft" not in best:
        return None, ""
    both = pd.concat({"direct": best["direct"], "fft": best["fft"]}, axis=1).dropna().sort_index()
    if both.empty:
        return None, ""
    ratio = np.log(both["direct"] / both["fft"])  # < 0: direct faster
    if (ratio < 0).all():
        return None, f"direct faster at every measured S (to {int(both.index[-1])})"
    if (ratio >= 0).all():
        return None, "FFT faster at every measured S"
    for (s0, r0), (s1, r1) in zip(ratio.items(), list(ratio.items())[1:]):
        if r0 < 0 <= r1:  # the first change from direct to FFT
            x = math.exp(math.log(s0) + (math.log(s1) - math.log(s0)) * (-r0) / (r1 - r0))
            return x, f"crossover S ≈ {x:.3g}"
    return None, "direct and FFT alternate"


def window_lines(ax, sub: pd.DataFrame, series_order: list, x: str, col: str) -> None:
    """One line per series of `sub` (in series_order), `col` against column `x`, in the window
    experiments' styles (a colour per algorithm, the peers dash-dotted)."""
    for i, label in enumerate(series_order):
        s = sub[sub["series"] == label].sort_values(x)
        if s.empty:
            continue
        ax.plot(s[x], s[col], label=series_label(label, s), markersize=4,
                **window_style(s["variant"].iloc[0], s["group"].iloc[0], i))


def plot_windows(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    """Time against the half-width S, a panel per shape; per panel the S where the best direct
    series of this project becomes slower than its best FFT series."""
    col, ylabel = METRICS[exp.metric]
    panels = list(dict.fromkeys(pts["shape_panel"]))
    fig, axes = grid_of(len(panels), ncols=2, w=5.6, h=3.8)
    series_order = list(dict.fromkeys(s.label for s in exp.series))
    for ax, pk in zip(axes, panels):
        sub = pts[pts["shape_panel"] == pk]
        window_lines(ax, sub, series_order, "half_width", col)
        x, text = crossover(sub, col)
        if x is not None:
            ax.axvline(x, color="0.3", ls=":", lw=1)
        if text:
            ax.annotate(text, (0.02, 0.97), xycoords="axes fraction", va="top", fontsize=7,
                        bbox=dict(boxstyle="round", fc="white", ec="0.7", alpha=0.9))
        size_axis(ax, sub["half_width"])
        full = {int(v) for v in sub.loc[sub["shifts"] == "", "half_width"]}  # the full output's S
        ax.set_xticklabels([f"{int(t)}" + (" (full)" if int(t) in full else "") for t in ax.get_xticks()],
                           fontsize=7, rotation=45)
        value_axis(ax, sub[col], "time")
        ax.set_title(pk, fontsize=9)
        ax.set_xlabel(exp.xlabel, fontsize=7)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
    suptitle(fig, f"{exp.title}\n{title}; {FINISH_NOTE}; dotted line: the best direct kernel of this project "
                  "becomes slower than its best FFT (peers, dash-dotted, not counted)")
    shared_legend(fig, axes)
    return save(fig, out_dir, exp.name)


def tight_under_title(fig) -> None:
    """tight_layout below the figure's title (suptitle): its lines' height kept free at the top, so
    the first panel's title never runs into it."""
    lines = fig._suptitle.get_text().count("\n") + 1 if fig._suptitle else 0
    fig.tight_layout(rect=(0, 0, 1, 1 - (0.02 * lines) / fig.get_figheight()))


def plot_paired_bars(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    """The normalization's cost (zncc_frames, zncc_autocorr): a panel per shape, per series a pair of bars, the
    raw correlation (light) and the normalized one (dark) of the same case, labelled with both times
    and their ratio (the normalization's target: at most x1.25 for the same algorithm); fastest normalized at
    the top, log time axis."""
    col, ylabel = METRICS[exp.metric]
    shapes = list(dict.fromkeys(zip(pts["hR"], pts["wR"])))
    series_order = list(dict.fromkeys(s.label for s in exp.series))
    n_series = max(1, pts["series"].nunique())
    norm_name = NORM_NAMES[next((m for m in pts["normalize"] if m != "none"), "zncc")]
    # Per panel a bar pair per series; a lone panel also carries the title's lines.
    fig, axes = grid_of(len(shapes), ncols=1, w=9.0, h=0.42 * n_series + 1.3 + (1.3 if len(shapes) == 1 else 0))
    for ax, (h, w) in zip(axes, shapes):
        sub = pts[(pts["hR"] == h) & (pts["wR"] == w)]
        rows = []
        for i, name in enumerate(series_order):
            s = sub[sub["series"] == name]
            raw, norm = s[s["normalize"] == "none"], s[s["normalize"] != "none"]
            if norm.empty and raw.empty:
                continue
            r0 = (norm if not norm.empty else raw).iloc[0]
            rows.append((series_label(name, s), float(raw[col].iloc[0]) if not raw.empty else float("nan"),
                         float(norm[col].iloc[0]) if not norm.empty else float("nan"),
                         window_style(r0["variant"], r0["group"], i)["color"], r0["group"] == "peer"))
        rows.sort(key=lambda r: (r[2] != r[2], r[2]))
        y = np.arange(len(rows))[::-1]
        for yi, (_, raw, norm, color, peer) in zip(y, rows):
            hatch = "//" if peer else None
            if raw == raw:
                ax.barh(yi + 0.2, raw, height=0.38, color=color, alpha=0.35, hatch=hatch, edgecolor="white")
            if norm == norm:
                ax.barh(yi - 0.2, norm, height=0.38, color=color, alpha=0.9, hatch=hatch, edgecolor="white")
            ratio = f"  x{norm / raw:.2f}" if raw == raw and norm == norm else ""
            label = " " + " / ".join(fmt_us(v) for v in (raw, norm) if v == v) + ratio
            ax.text(max(v for v in (raw, norm) if v == v), yi, label, va="center", fontsize=6.5)
        ax.set_yticks(y, [r[0] for r in rows], fontsize=7)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.margins(x=0.25)
        ax.grid(True, axis="x", which="major", alpha=0.3)
        hl, wl = int(sub["hL"].iloc[0]), int(sub["wL"].iloc[0])
        ax.set_title(f"{hl} x {wl}" if (hl, wl) == (int(h), int(w)) else f"template {int(h)} x {int(w)}", fontsize=9)
        ax.set_xlabel(f"raw correlation (light) and {norm_name} (dark): {ylabel}, log scale", fontsize=8)
    suptitle(fig, f"{exp.title}\n{title}; {FINISH_NOTE}\nper algorithm: raw correlation (light, upper) and "
                  f"{norm_name} (dark, lower), both times and their ratio (target: at most x1.25); hatched: other "
                  "libraries")
    tight_under_title(fig)
    return save(fig, out_dir, exp.name)


def plot_template_lines(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    """Time against the template's side, a panel per image size, a line per series (log-log): where
    the direct kernels stop keeping up with the FFTs as the template grows, and each peer's
    distance, read at a glance (a bar panel per image and template took ten panels)."""
    col, ylabel = METRICS[exp.metric]
    images = sorted(pts["hL"].unique())
    fig, axes = grid_of(len(images), ncols=2, w=5.6, h=4.0)
    series_order = list(dict.fromkeys(s.label for s in exp.series))
    for ax, n in zip(axes, images):
        sub = pts[pts["hL"] == n]
        window_lines(ax, sub, series_order, "hR", col)
        size_axis(ax, sub["hR"])
        value_axis(ax, sub[col], "time")
        ax.set_title(f"image {int(n)} x {int(n)}", fontsize=9)
        ax.set_xlabel(exp.xlabel, fontsize=8)
        ax.set_ylabel(quantity_label(sub, ylabel, pts), fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
    suptitle(fig, f"{exp.title}\n{title}; {FINISH_NOTE}; peers dash-dotted")
    shared_legend(fig, axes)
    return save(fig, out_dir, exp.name)


def window_bars(ax, sub: pd.DataFrame, series_order: list, col: str, text=None) -> None:
    """Horizontal bars, fastest at the top, coloured per algorithm, the peers hatched; beside each
    its time, or text(point) where given."""
    rows = []
    for i, name in enumerate(series_order):
        s = sub[sub["series"] == name]
        if not s.empty:
            r = s.iloc[0]
            rows.append((series_label(name, s), float(r[col]), window_style(r["variant"], r["group"], i)["color"],
                         r["group"] == "peer", r))
    rows.sort(key=lambda r: r[1])
    y = np.arange(len(rows))[::-1]
    for yi, (_, v, color, peer, r) in zip(y, rows):
        ax.barh(yi, v, color=color, alpha=0.85, hatch="//" if peer else None, edgecolor="white" if peer else None)
        ax.text(v, yi, f" {text(r) if text else fmt_us(v)}", va="center", fontsize=6.5)
    ax.set_yticks(y, [r[0] for r in rows], fontsize=7)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # labels at powers of ten only
    ax.margins(x=0.12)  # room for the value beside the longest bar
    ax.grid(True, axis="x", which="major", alpha=0.3)


NORM_NAMES = {"zncc": "ZNCC", "zero-lag": "zero-lag normalized", "none": "raw correlation"}


def quantity_label(pts: pd.DataFrame, ylabel: str, everything: pd.DataFrame | None = None) -> str:
    """The time axis' label of `pts` (a panel's points, of the figure's `everything`), naming what
    is timed where a normalized case is in the figure ("ZNCC: time per call + finish_time [µs]",
    "raw correlation: ..." beside it); the plain label where all are raw."""
    def modes(df):
        return list(dict.fromkeys(df["normalize"])) if df is not None and "normalize" in df.columns else []
    if all(m == "none" for m in modes(pts) + modes(everything)):
        return ylabel
    return f"{' / '.join(NORM_NAMES.get(m, m) for m in modes(pts))}: {ylabel}"


def fmt_us(us: float) -> str:
    return fmt_time(us)


def plot_bars(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    col, ylabel = METRICS[exp.metric]
    panels = list(dict.fromkeys(pts["shape_panel"]))
    fig, axes = grid_of(len(panels), ncols=1, w=8.0, h=0.32 * pts["series"].nunique() + 1.6)
    series_order = list(dict.fromkeys(s.label for s in exp.series))
    for ax, pk in zip(axes, panels):
        window_bars(ax, pts[pts["shape_panel"] == pk], series_order, col)
        ax.set_title(pk, fontsize=9)
        ax.set_xlabel(f"{quantity_label(pts[pts['shape_panel'] == pk], ylabel, pts)}, log scale; hatched: other libraries",
                      fontsize=8)
    suptitle(fig, f"{exp.title}\n{title}; {FINISH_NOTE}")
    tight_under_title(fig)
    return save(fig, out_dir, exp.name)


def plot_grouped_bars(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    """A group of bars per window (half-width S), a bar per series; log time axis."""
    col, ylabel = METRICS[exp.metric]
    groups = sorted(pts["half_width"].unique())
    series_order = [s for s in dict.fromkeys(s.label for s in exp.series) if (pts["series"] == s).any()]
    width = 0.8 / max(1, len(series_order))
    fig, ax = plt.subplots(figsize=(max(7.0, 2.0 + 0.32 * len(groups) * len(series_order)), 4.4))
    for i, label in enumerate(series_order):
        s = pts[pts["series"] == label]
        r0 = s.iloc[0]
        st = window_style(r0["variant"], r0["group"], i)
        xs = [groups.index(g) + (i - (len(series_order) - 1) / 2) * width for g in s["half_width"]]
        peer = r0["group"] == "peer"
        ax.bar(xs, s[col], width=width, color=st["color"], alpha=0.85, label=series_label(label, s),
               hatch="//" if peer else None, edgecolor="white" if peer else None)
        for x, v in zip(xs, s[col]):
            ax.text(x, v, fmt_us(v), ha="center", va="bottom", fontsize=5, rotation=90)
    ax.set_xticks(range(len(groups)), [f"S = {int(g)}" for g in groups], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(f"{quantity_label(pts, ylabel)}; hatched: other libraries", fontsize=8)
    ax.set_xlabel(exp.xlabel, fontsize=8)
    ax.grid(True, axis="y", which="major", alpha=0.3)
    ax.margins(y=0.15)
    suptitle(fig, f"{exp.title}\n{title}; {FINISH_NOTE}")
    shared_legend(fig, [ax])
    return save(fig, out_dir, exp.name)


def tflops_of(row) -> float:
    """TFLOP/s of a point at its drawn time (time per call + finish_time): 2 x the window's
    multiply-adds per second, from the summary's rate over the timed part alone."""
    total, timed, flops = float(row["total_us"]), float(row["time_us"]), float(row["flops"])
    return flops * timed / total / 1e12 if total > 0 and flops == flops else float("nan")


def plot_signal_bars(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    """The one-dimensional signal experiments: a panel per shape, a bar per series
    (time per call + finish_time, log scale), each labelled with its time and TFLOP/s; where the
    experiment gives a published rate (exp.reference_tflops: seed 004's), a dashed line at the
    time that rate takes for the panel's multiply-adds."""
    col, ylabel = METRICS[exp.metric]
    panels = list(dict.fromkeys(pts["shape_panel"]))
    # 11 inches: the series' labels take about half of the width, the bars and their values the rest
    fig, axes = grid_of(len(panels), ncols=1, w=11, h=0.34 * pts["series"].nunique() + 2.0)
    series_order = list(dict.fromkeys(s.label for s in exp.series))
    for ax, pk in zip(axes, panels):
        sub = pts[pts["shape_panel"] == pk]
        window_bars(ax, sub, series_order, col, text=lambda r: f"{fmt_us(float(r[col]))}, {tflops_of(r):.3g} TFLOP/s")
        # from a third of the shortest bar (bars of similar times stay apart) to room for the time
        # and rate beside the longest: the last quarter of the axis's width, whatever the decades
        # it spans (a fixed factor clipped the text of wide panels or wasted narrow ones); the
        # published rate's line inside it, wherever it falls
        lo, top = float(sub[col].min()) / 3, float(sub[col].max())
        ref_us = None
        if exp.reference_tflops:
            r = sub.iloc[0]
            fmas = float(r["flops"]) * float(r["time_us"]) * 1e-6 / 2  # the window's, as measured
            if fmas == fmas and fmas > 0:
                ref_us = 2 * fmas / (exp.reference_tflops * 1e12) * 1e6
                lo, top = min(lo, ref_us / 2), max(top, ref_us)
        text_share = 0.25
        hi = 10 ** ((np.log10(top) - text_share * np.log10(lo)) / (1 - text_share))
        ax.set_xlim(lo, hi)
        if ref_us is not None:
            ax.axvline(ref_us, color="k", ls="--", lw=1)
            ax.text(ref_us, ax.get_ylim()[1], f" {exp.reference_label}: {fmt_us(ref_us)}", fontsize=6.5,
                    va="bottom", ha="left")
        ax.set_title("\n".join(textwrap.wrap(pk, 72)), fontsize=9, pad=12 if exp.reference_tflops else 6)
        # wrapped: a line wider than the axes ran past the figure's right edge
        ax.set_xlabel(textwrap.fill(f"{quantity_label(sub, ylabel, pts)}, log scale; hatched: other libraries. "
                                    "TFLOP/s = 2 x the window's multiply-adds per second (for the FFTs a "
                                    "direct-equivalent rate)", 90), fontsize=7.5)
    suptitle(fig, f"{exp.title}\n{title}; {FINISH_NOTE}")
    fig.tight_layout()
    return save(fig, out_dir, exp.name)


def plot_reduction_bars(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    """The reductions: a panel per case, a bar per series (ours: the reduction, the map
    alone, the map then PyTorch's reduction; PyTorch's whole route hatched), log time axis, each bar
    labelled with its time and PyTorch's time over it; 2-D template matching, a series over the
    template count, in a figure of its own (plot_template_rates: <name>_templates)."""
    from experiments import reductions as red

    files = []
    col, ylabel = METRICS[exp.metric]
    tm = pts[pts["shape_panel"].isin(red.TM_GROUPS)]
    if not tm.empty:
        files += plot_template_rates(exp, tm, title, out_dir)
    pts = pts[~pts["shape_panel"].isin(red.TM_GROUPS)]
    if pts.empty:
        return files
    panels = list(dict.fromkeys(pts["shape_panel"]))
    series_order = list(dict.fromkeys(s.label for s in exp.series))
    fig, axes = grid_of(len(panels), ncols=1, w=12.0, h=0.34 * pts["series"].nunique() + 1.5)
    for ax, pk in zip(axes, panels):
        sub = pts[pts["shape_panel"] == pk]
        peer = sub[sub["variant"] == "torch-reduce"][col]
        peer_us = float(peer.iloc[0]) if not peer.empty else float("nan")

        def text(r, peer_us=peer_us):
            t = fmt_us(float(r[col]))
            if peer_us == peer_us and r["variant"] != "torch-reduce":
                t += f"  (PyTorch / this: x{peer_us / float(r[col]):.2g})"
            return t
        window_bars(ax, sub, series_order, col, text=text)
        lo, hi = float(sub[col].min()), float(sub[col].max())
        ax.set_xlim(lo / 1.5, hi * 12)  # room on the right for each bar's label (log scale)
        ax.set_title("\n".join(textwrap.wrap(pk, 70)), fontsize=9)
        ax.set_xlabel(f"{ylabel}, log scale; hatched: PyTorch", fontsize=8)
    suptitle(fig, f"{exp.title}\n{title}; mean of the repetitions (IQR outliers removed)\neverything called from "
                  "Python on PyTorch CUDA tensors, checked on planted answers before timing")
    # tight_under_title keeps 0.02 inch a title line, too little for this tall figure's three
    lines = fig._suptitle.get_text().count("\n") + 1
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.22 * lines / fig.get_figheight()))
    return save(fig, out_dir, exp.name) + files


# 2-D template matching's lines: ours solid, PyTorch's dashed, as experiments/reductions.py's series
TEMPLATE_STYLES = {"xcorr-reduce": ("#d62728", "-", "o"), "xcorr-reduce-batched": ("#ff7f0e", "-", "s"),
                   "xcorr-map+torch": ("#9467bd", "-", "^"), "torch-reduce": ("#1f77b4", "--", "D"),
                   "torch-2dtm-circular": ("#17becf", ":", "v")}
TEMPLATE_LABELS = {"xcorr-reduce": "ours: max_over_rights, every template in one call",
                   "xcorr-reduce-batched": "ours: max_over_rights, 128 templates a call (out=, first_index=)",
                   "xcorr-map+torch": "ours: correlate2d maps of 16 templates, then the maximum in PyTorch",
                   "torch-reduce": "PyTorch: torch-2dtm / Leopard-EM loop (16 a batch), padded to the window",
                   "torch-2dtm-circular": "PyTorch: the same loop, circular at the image's size, as the tools run it"}


def plot_template_rates(exp, pts: pd.DataFrame, title: str, out_dir: Path) -> list[Path]:
    """2-D template matching (experiments/reductions.py's TM_COUNTS): the time per template
    against the template count, a line per series, log-log, templates/s on the right axis; the
    floor of a template on this GPU (reductions.tm_floor at the GPU's peaks, GPU_PEAKS by the
    results folder's name) a grey band, the target rate a dashed line. -> <name>_templates."""
    from experiments import reductions as red

    col = METRICS[exp.metric][0]
    fig, ax = plt.subplots(figsize=(8.5, 7.0))
    counts = sorted({int(n) for n in pts["nR"]} | set(red.TM_COUNTS))  # the axis of every count, measured or not
    for variant, (color, ls, marker) in TEMPLATE_STYLES.items():
        sub = pts[pts["variant"] == variant].sort_values("nR")
        if sub.empty:
            continue
        per = sub[col].astype(float) / sub["nR"].astype(float)
        ax.plot(sub["nR"], per, color=color, ls=ls, marker=marker, ms=5, lw=1.6, label=TEMPLATE_LABELS[variant])
    peaks = red.GPU_PEAKS.get(Path(out_dir).name)
    if peaks:
        f = red.tm_floor(red.tm_shape(counts[-1]), *peaks)
        ax.axhspan(f["low_us"], f["high_us"], color="0.6", alpha=0.45, lw=0,
                   label=f"floor: {f['low_us']:.0f}-{f['high_us']:.0f} µs a template")
        caption = (f"Floor (grey): a template's {f['P']} x {f['Q'] // 2 + 1} complex product spectrum written and read "
                   f"once at {peaks[0] / 1e12:.3g} TB/s plus its two transforms (5 N log2 N FLOP) at {peaks[1] / 1e12:.3g} "
                   "TFLOP/s FP32, the GPU's peaks, not overlapped; transforms pruned to the nonzero rows (low) or not "
                   "(high). experiments/reductions.py, tm_floor.")
    else:
        caption = (f"Floor not drawn: the peak bandwidth and FP32 rate of this GPU ({Path(out_dir).name}) are not in "
                   "experiments/reductions.py's GPU_PEAKS.")
    rate = next((t.bound for t in red.TARGETS if t.kind == "templates_per_s"), None)
    if rate:
        ax.axhline(1e6 / rate, color="k", ls="--", lw=1, label=f"target: {rate:,.0f} templates/s ({1e6 / rate:.0f} µs)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(counts[0] / 1.4, counts[-1] * 1.4)
    ax.set_xticks(counts)
    ax.set_xticklabels([f"{n:,}" for n in counts], fontsize=8)
    ax.minorticks_off()
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("templates per call (one 4096 x 4096 image, 384 x 384 templates, \"same\" window)", fontsize=9)
    ax.set_ylabel("time per template (µs): the call's time / templates, log scale", fontsize=9)
    right = ax.secondary_yaxis("right", functions=(lambda us: 1e6 / np.maximum(us, 1e-9),
                                                   lambda r: 1e6 / np.maximum(r, 1e-9)))
    right.set_ylabel("templates per second", fontsize=9)
    right.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=1, frameon=False)
    ax.set_title("2-D template matching: max / argmax / sum / sum of squares over the templates\n"
                 f"{title}; mean of the repetitions, checked on planted answers before timing", fontsize=9)
    fig.text(0.01, 0.01, "\n".join(textwrap.wrap(caption, 150)), fontsize=7, va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return save(fig, out_dir, f"{exp.name}_templates")


WINDOW_PLOTS = {"reduction_bars": plot_reduction_bars, "windows": plot_windows, "bars": plot_bars, "grouped_bars": plot_grouped_bars,
                "signal_bars": plot_signal_bars, "template_lines": plot_template_lines,
                "paired_bars": plot_paired_bars}


def not_drawn_note(summary: pd.DataFrame, exp_name: str) -> str:
    """'not drawn: overlap-wise (13 cases: failed the check before timing), ...': the cases of an
    experiment that were measured but have no time, so a missing bar or point is explained."""
    rows = summary[(summary["experiment"] == exp_name) & (summary["status"] != "ok")]
    parts = []
    for variant, g in rows.groupby("variant", sort=True):
        msgs = g["message"].astype(str)
        why = ("failed the check before timing" if msgs.str.contains("validation failed").all()
               else "too slow to time" if msgs.str.contains("too slow").all() else "failed")
        parts.append(f"{variant} ({len(g)} case{'s' if len(g) > 1 else ''}: {why})")
    return "not drawn: " + ", ".join(parts) if parts else ""


def plot_gpu(gpu_dir: Path, only: list | None = None, plots_root: Path | None = None,
             refused: dict | None = None) -> list[Path]:
    """The figures of one GPU's results. A point missing for want of a measurement warns; one whose
    cases are recorded as failed (figdata.points) goes into `refused` where given, to be counted once."""
    gpu_dir = Path(gpu_dir)
    summary = load_summary(gpu_dir)
    out_dir = paths.plots_dir_for(gpu_dir, plots_root)
    gpu_name = gpu_title(summary, gpu_dir)
    states = progress(gpu_dir)
    files = []
    for exp in suite.load_all():
        if only and exp.name not in only:
            continue
        # an experiment stopped part-way says so on its figure
        notes_of = {s: states[s].note() for s in (exp.derived_from or [exp.name]) if s in states and states[s].note()}
        stopped = [f"{s}: {note}" for s, note in notes_of.items()]
        title = gpu_name + (f"; {', '.join(stopped)}" if stopped else "")
        try:
            if exp.plot == "none":
                continue
            if exp.plot == "efficiency":
                files += plot_efficiency(exp, summary, gpu_dir, title, out_dir, refused, notes_of)
                continue
            pts, notes = points(exp, summary, gpu_dir, refused)
            warn_gaps(exp.name, notes, notes_of.get(exp.name, ""))
            if pts.empty:
                continue
            if exp.plot == "comparison":
                files += plot_comparison(exp, pts, title, out_dir)
            elif exp.plot in WINDOW_PLOTS:
                note = not_drawn_note(summary, exp.name)
                files += WINDOW_PLOTS[exp.plot](exp, pts, title + (f"\n{note}" if note else ""), out_dir)
            else:
                files += plot_lines(exp, pts, title, out_dir)
        except Exception as e:  # noqa: BLE001  (a broken figure must not stop the others)
            if _strict():
                raise
            warnings.warn(f"{exp.name}: figure skipped: {type(e).__name__}: {e}")
    return files


def plot_cross_gpu(gpu_dirs: list, plots_root: Path | None = None) -> list[Path]:
    """One-to-one comparison (Fig. 17) and % of peak across GPUs; only with two or more GPUs."""
    if len(gpu_dirs) < 2:
        return []
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    fig17 = suite.load("fig17")
    any_data = False
    for i, d in enumerate(gpu_dirs):
        summary = load_summary(d)
        name = gpu_title(summary, d)
        try:
            pts, _ = points(fig17, summary, d)
        except Exception as e:  # noqa: BLE001
            warnings.warn(f"cross-gpu: {d}: {e}")
            continue
        if pts.empty:
            continue
        any_data = True
        lines = best_by_group(pts, "time_us")
        for key, ls in (("best of the paper's kernels", "-"), ("best new kernel", "--"), ("fft+plan", ":")):
            if key in lines:
                s = lines[key]
                axes[0].plot(s["size"], s["time_us"], ls=ls, color=series_color(i), marker="o", markersize=3,
                             label=f"{name}: {key}")
        if "overlap-wise (baseline)" in lines and "best of the paper's kernels" in lines:
            b = lines["overlap-wise (baseline)"].set_index("size")["time_us"]
            p = lines["best of the paper's kernels"].set_index("size")["time_us"]
            sp = (b / p).dropna()
            axes[1].plot(sp.index, sp.values, color=series_color(i), marker="o", markersize=3, label=name)
        for key, ls in (("best of the paper's kernels", "-"), ("best new kernel", "--")):
            if key in lines:
                s = lines[key]
                axes[2].plot(s["size"], s["peak_pct"], ls=ls, color=series_color(i), marker="o", markersize=3,
                             label=f"{name}: {key}")
    if not any_data:
        plt.close(fig)
        warnings.warn("cross-gpu: no GPU has fig17 results")
        return []
    titles = ["one-to-one: time per call [µs]", "one-to-one: speedup of the paper's best over the baseline",
              "one-to-one: % of FP32 FMA peak"]
    for ax, t in zip(axes, titles):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("matrix size N", fontsize=8)
        ax.set_title(t, fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=6)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("µs")
    axes[1].set_ylabel("x")
    axes[2].set_ylabel("%")
    fig.suptitle("Across GPUs (Fig. 17 experiment)", fontsize=10)
    fig.tight_layout()
    root = Path(plots_root or paths.PLOTS)
    return save(fig, root, "cross-gpu")


@exit_2_on_bad_results("plot")
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    paths.add_dirs_arguments(ap)
    ap.add_argument("--only", default=None, help="comma-separated experiments (default: all)")
    ap.add_argument("--pdf", action="store_true", help="a PDF beside each PNG (not committed)")
    args = ap.parse_args(argv)
    if args.pdf:
        os.environ["XCORR_PLOT_FORMATS"] = "png,pdf"
    try:  # a misspelt name drew nothing and exited 0
        only = suite.selected([args.only]) if args.only is not None else None
    except ValueError as e:
        ap.error(f"--only: {e}")
    if only == []:  # `--only ''` (an empty shell variable) drew every figure
        ap.error("--only: no experiment named (leave --only out for every one)")
    dirs = paths.selected_dirs(args.dirs, args.quick)
    if not dirs:
        print("plot: no results found", file=sys.stderr)
        return 0
    for d in dirs:
        refused = {}
        before = paths.FIGURES_WRITTEN
        files = plot_gpu(d, only, refused=refused)
        print(f"plot: {d.name}: {len({f.stem for f in files})} figure(s) in {paths.plots_dir_for(d)}, "
              f"{paths.FIGURES_WRITTEN - before} file(s) rewritten (the others unchanged)")
        if refused:  # results, not gaps: one line, not a warning per series
            print(f"plot: {d.name}: {refused_line(refused)}")
    if not args.dirs and not args.quick:
        files = plot_cross_gpu(dirs)
        if files:
            print(f"plot: cross-GPU figure {files[0]}")
    return 0

