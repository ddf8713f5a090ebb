"""Table 1 from the tuning sweep (experiment table1): per form (row) and size (column) the fastest
variant with its best parameters, its time and its margin over the runner-up, in four readings
(READINGS); the table command writes them, claims and anchors read them."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from xcsuite.spec import SIZES_TABLE

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
    # Each cell's rows in the summary's order, as a boolean selection per cell would give them (so
    # that sort_values breaks ties alike), in one pass instead of 56 selections.
    cells = {key: g for key, g in df.groupby(["counts", "size"], sort=False)}
    empty = df.iloc[:0]
    out = []
    for row in ROWS:
        for j, size in enumerate(COLUMNS):
            cell = cells.get((row, size), empty)
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
    # The unit that holds the value's three digits once rounded: 999.7 µs is "1 ms", not "1e+03 µs".
    if float(f"{us:.3g}") < 1000:
        return f"{us:.3g} µs"
    if float(f"{us / 1000:.3g}") < 1000:
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


# ---- the window table (experiment window_table): the best algorithm per size and window ---------

WINDOW_TABLE_COLUMNS = ["size", "column", "window", "shifts", "best_variant", "best_params", "best_time_us",
                        "best_cv", "runner_up_variant", "runner_up_time_us", "margin", "best_peer",
                        "best_peer_time_us", "peer_ratio", "candidates"]
# A light colour per winning algorithm (the figure's cells).
WINDOW_CELL_COLORS = {"register-tiled": "#fdb462", "small-direct": "#bebada", "tensor-wgmma": "#fb8072",
                      "overlap-wise": "#d9d9d9", "fft": "#80b1d3", "fft+plan": "#b3de69", "fft-fused": "#8dd3c7",
                      "signal-tiled": "#fccde5", "tensor-hankel": "#ccebc5", "tensor-hankel-tf32": "#ffffb3",
                      "fft-segmented": "#bc80bd"}


def window_columns() -> list[tuple[str, str]]:
    """(label, window) of the window table's columns, from its definition."""
    from experiments.window_table import WINDOWS

    return list(WINDOWS)


def build_window_table(pts: pd.DataFrame) -> pd.DataFrame:
    """One row per (size, window column) from the window_table experiment's points (figdata):
    the fastest variant of this project (time per call + finish_time), the fastest different one
    with the margin, and the fastest peer (another library) with its time over the winner's: the
    peers are listed, never the winner."""
    out = []
    for size in sorted({int(x) for x in pts["hL"]}):
        for label, window in window_columns():
            cell = pts[(pts["hL"] == size) & (pts["window"] == window)]
            rec = {"size": size, "column": label, "window": window,
                   "shifts": cell["shifts"].iloc[0] if not cell.empty else "", "candidates": len(cell)}
            own = cell[cell["group"] != "peer"].sort_values("total_us")
            peers = cell[cell["group"] == "peer"].sort_values("total_us")
            if not own.empty:
                best = own.iloc[0]
                rec.update(best_variant=best["variant"], best_params=best["params"], best_time_us=best["total_us"],
                           best_cv=best["cv"])
                other = own[own["variant"] != best["variant"]]
                if not other.empty:
                    rec.update(runner_up_variant=other.iloc[0]["variant"], runner_up_time_us=other.iloc[0]["total_us"],
                               margin=other.iloc[0]["total_us"] / best["total_us"])
            if not peers.empty:
                rec.update(best_peer=peers.iloc[0]["variant"], best_peer_time_us=peers.iloc[0]["total_us"])
                if not own.empty:
                    rec["peer_ratio"] = peers.iloc[0]["total_us"] / own.iloc[0]["total_us"]
            out.append(rec)
    return pd.DataFrame(out).reindex(columns=WINDOW_TABLE_COLUMNS)


def window_markdown(table: pd.DataFrame, winners_only: bool = False) -> str:
    """window_table.md's table; winners_only: each cell its winner and time alone (docs/results.md's)."""
    cols = window_columns()
    head = "| N x N | " + " | ".join(label for label, _ in cols) + " |\n" + "|---" * (len(cols) + 1) + "|\n"
    lines = []
    for size in sorted(table["size"].unique()):
        cells = []
        for label, _ in cols:
            r = table[(table["size"] == size) & (table["column"] == label)]
            if r.empty or pd.isna(r.iloc[0]["best_variant"]):
                cells.append("–")
                continue
            r = r.iloc[0]
            if winners_only:
                cells.append(f"{r['best_variant']} {fmt_time(r['best_time_us'])}")
                continue
            text = f"**{r['best_variant']}** {fmt_time(r['best_time_us'])}"
            if r["margin"] == r["margin"]:
                text += f"<br>x{r['margin']:.2f} over {r['runner_up_variant']}"
            if isinstance(r["best_peer"], str):
                faster = " **faster**" if r["peer_ratio"] < 1 else ""
                text += f"<br>peer: {r['best_peer']} {fmt_time(r['best_peer_time_us'])} (x{r['peer_ratio']:.2f}){faster}"
            cells.append(text)
        lines.append(f"| {int(size)} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"


# The normalization table: per experiment with normalized cases and per problem, each
# algorithm's raw time, its normalized time and their ratio (the target: the normalized
# call at most 1.25 x the raw one of the same algorithm), then the best of each half and the
# fastest peer. Times are time per call + finish_time (figdata's total_us).
NORMALIZATION_TARGET = 1.25
NORMALIZATION_TABLE_COLUMNS = ["experiment", "problem", "normalize", "variant", "peer", "raw_us", "normalized_us",
                               "ratio", "meets_target"]


def problem_key(p: pd.Series) -> str:
    """The problem a point computes, normalization aside, as xcorr explain writes it: form, stacks,
    sizes and the window's shifts."""
    window = f"shifts {p['shifts']}" if p["shifts"] else (p["window"] or "full")
    return (f"{p['form']} {int(p['nL'])}x[{int(p['hL'])}x{int(p['wL'])}] * "
            f"{int(p['nR'])}x[{int(p['hR'])}x{int(p['wR'])}] {window}")


def build_normalization_table(pts: pd.DataFrame) -> pd.DataFrame:
    """One row per (experiment, problem, normalization, variant) measured normalized, from the
    points (figdata) of the experiments with normalized cases; raw_us is the same variant's time on
    the same problem unnormalized where that is measured (else NaN), ratio = normalized / raw."""
    out = []
    if pts.empty:
        return pd.DataFrame(columns=NORMALIZATION_TABLE_COLUMNS)
    pts = pts.assign(problem=[problem_key(p) for _, p in pts.iterrows()])
    raw = {(r["experiment"], r["problem"], r["variant"]): r["total_us"]
           for _, r in pts[pts["normalize"].isin(["none", ""])].iterrows()}
    for _, r in pts[~pts["normalize"].isin(["none", ""])].iterrows():
        base = raw.get((r["experiment"], r["problem"], r["variant"]), float("nan"))
        ratio = r["total_us"] / base if base == base else float("nan")
        out.append({"experiment": r["experiment"], "problem": r["problem"], "normalize": r["normalize"],
                    "variant": r["variant"], "peer": r["group"] == "peer", "raw_us": base,
                    "normalized_us": r["total_us"], "ratio": ratio,
                    "meets_target": (ratio <= NORMALIZATION_TARGET) if ratio == ratio else None})
    return pd.DataFrame(out, columns=NORMALIZATION_TABLE_COLUMNS)


def normalization_markdown(table: pd.DataFrame, pts: pd.DataFrame) -> str:
    """Per problem: a row per algorithm (ours first, fastest normalized first), then the best
    normalized against the best raw of ours and the fastest peer against our best."""
    lines = []
    pts = pts.assign(problem=[problem_key(p) for _, p in pts.iterrows()]) if not pts.empty else pts
    for (exp, problem, mode), t in table.groupby(["experiment", "problem", "normalize"], sort=False):
        t = t.sort_values(["peer", "normalized_us"])
        lines.append(f"### {exp}: {problem}, {mode}\n")
        lines.append("| algorithm | raw | normalized | normalized / raw |\n|---|---|---|---|")
        for _, r in t.iterrows():
            name = f"{r['variant']} (peer)" if r["peer"] else r["variant"]
            if r["ratio"] == r["ratio"]:
                ratio = f"x{r['ratio']:.2f}" + ("" if r["meets_target"] else f" (> {NORMALIZATION_TARGET})")
            else:
                ratio = "–"
            lines.append(f"| {name} | {fmt_time(r['raw_us']) or '–'} | {fmt_time(r['normalized_us'])} | {ratio} |")
        own = t[~t["peer"]]
        raw_own = pts[(pts["experiment"] == exp) & (pts["problem"] == problem) & pts["normalize"].isin(["none", ""])
                      & (pts["group"] != "peer")].sort_values("total_us")
        peers = t[t["peer"]]
        notes = []
        if not own.empty:
            best = own.iloc[0]
            text = f"Fastest normalized: **{best['variant']}** {fmt_time(best['normalized_us'])}"
            if not raw_own.empty:
                b = raw_own.iloc[0]
                text += (f"; fastest raw: {b['variant']} {fmt_time(b['total_us'])} "
                         f"(x{best['normalized_us'] / b['total_us']:.2f})")
            notes.append(text)
            if not peers.empty:
                p = peers.iloc[0]
                notes.append(f"fastest peer: {p['variant']} {fmt_time(p['normalized_us'])}, "
                             f"x{p['normalized_us'] / best['normalized_us']:.1f} our fastest's time")
        lines.append("\n" + "; ".join(notes) + ".\n" if notes else "")
    return "\n".join(lines) + "\n"


# The signal table: per signal experiment and problem, every series by time per call +
# finish_time, with its precision class and its direct-equivalent rate (2 x the window's
# multiply-adds per second, an FFT's included), and each time over the fastest peer's.
SIGNAL_TABLE_COLUMNS = ["experiment", "problem", "normalize", "variant", "peer", "precision", "total_us", "tflops",
                        "peak_pct", "vs_best_peer"]
# Dense TF32 tensor-core peaks (TFLOP/s, NVIDIA's datasheets: 989 with sparsity on the H100 SXM and
# the H200), the peak a one-pass TF32 rate is measured against; a GPU not listed gets no percentage
# for its TF32 rows. FP32-class rows (fp32, 3xtf32) are measured against the FP32 FMA peak of the
# measurement itself (summary.csv's peak_flops): 3xTF32 does FP32-class work on the tensor cores
# and may pass 100%.
TF32_DENSE_PEAK_TFLOPS = {"NVIDIA H200": 494.7, "NVIDIA H100 80GB HBM3": 494.7}


def build_signal_table(pts: pd.DataFrame, precision: dict, fp32_peak_tflops: float = float("nan"),
                       tf32_peak_tflops: float = float("nan")) -> pd.DataFrame:
    """Per problem, every series fastest first: precision, time, direct-equivalent rate, % of the
    peak of its precision (FP32 FMA for fp32 and 3xtf32, dense TF32 for tf32; NaN where unknown)
    and time over the fastest peer's."""
    peaks = {"fp32": fp32_peak_tflops, "3xtf32": fp32_peak_tflops, "tf32": tf32_peak_tflops}
    out = []
    if pts.empty:
        return pd.DataFrame(columns=SIGNAL_TABLE_COLUMNS)
    pts = pts.assign(problem=[problem_key(p) for _, p in pts.iterrows()])
    for (exp, problem, mode), t in pts.groupby(["experiment", "problem", "normalize"], sort=False):
        peers = t[t["group"] == "peer"]
        best_peer = peers["total_us"].min() if not peers.empty else float("nan")
        for _, r in t.sort_values("total_us").iterrows():
            tflops = r["flops"] / 1e12 if r["flops"] == r["flops"] else float("nan")
            out.append({"experiment": exp, "problem": problem, "normalize": mode, "variant": r["variant"],
                        "peer": r["group"] == "peer", "precision": precision.get(r["variant"], ""),
                        "total_us": r["total_us"], "tflops": tflops,
                        "peak_pct": 100 * tflops / peaks.get(precision.get(r["variant"], ""), float("nan")),
                        "vs_best_peer": r["total_us"] / best_peer if best_peer == best_peer else float("nan")})
    return pd.DataFrame(out, columns=SIGNAL_TABLE_COLUMNS)


def signal_markdown(table: pd.DataFrame) -> str:
    lines = []
    for (exp, problem, mode), t in table.groupby(["experiment", "problem", "normalize"], sort=False):
        lines.append(f"### {exp}: {problem}" + ("" if mode in ("none", "") else f", {mode}") + "\n")
        lines.append("| algorithm | precision | time per call | TFLOP/s (direct-equivalent) | % of its precision's peak "
                     "| time / fastest peer's |\n|---|---|---|---|---|---|")
        own = t[~t["peer"]]
        fastest = {c: own[own["precision"] == c]["total_us"].min() for c in own["precision"].unique()}
        for _, r in t.iterrows():
            name = f"{r['variant']} (peer)" if r["peer"] else r["variant"]
            if not r["peer"] and r["total_us"] == fastest.get(r["precision"]):
                name = f"**{name}**"  # the fastest of ours at its precision
            rate = f"{r['tflops']:.3g}" if r["tflops"] == r["tflops"] else "–"
            vs = f"x{r['vs_best_peer']:.2f}" if r["vs_best_peer"] == r["vs_best_peer"] else "–"
            pct = f"{r['peak_pct']:.3g}%" if r["peak_pct"] == r["peak_pct"] else "–"
            lines.append(f"| {name} | {r['precision'] or '–'} | {fmt_time(r['total_us'])} | {rate} | {pct} | {vs} |")
        lines.append("")
    return "\n".join(lines) + "\n"


# --- the headline table (README "Results on ..."; its PyTorch column) ---------------------
#
# Per headline problem (full output, raw, warm runs): the baseline, the best of the paper's
# kernels, the best of this project's definition-based kernels (FP32-class precision), the FFT
# series, PyTorch's FFT correlation as a user writes it (torch-fft, measured in the same runs),
# and how many times slower that peer is than this project's fastest series. Each cell is the
# fastest run over every experiment that measured the problem and every tuning it measured.

HEADLINE_ROWS = [("1-to-1", s) for s in (16, 64, 128, 256, 512)] + [("1-to-32", s) for s in (16, 64, 256)] + \
    [("32-to-32", s) for s in (64, 256)] + [("86 lefts x 50 rights each", 96)]
HEADLINE_ROW_LABELS = {"86 lefts x 50 rights each": "real-data n-to-mn: 86 lefts x 50 rights each"}
PAPER_FAMILIES = ("warp-per-overlap", "warp-shuffle", "multi-matrix")
HEADLINE_FFT = ("fft", "fft+plan", "fft-fused")


def headline_cells(summary: pd.DataFrame) -> pd.DataFrame:
    """One row per HEADLINE_ROWS problem measured: the time (µs) and variant of each column, the
    best new kernel's % of the FP32 peak, and torch-fft's time over this project's fastest."""
    s = summary[(summary["status"] == "ok") & (~summary["cold"].astype(bool)) & summary["time_us"].notna()]
    s = s[s["shifts"].fillna("").astype(str).eq("") & ~s["params"].fillna("").astype(str).str.contains("normalize=")
          & ~s["params"].fillna("").astype(str).str.contains("reduce=")]  # a reduction is another problem
    rows = []
    for counts, size in HEADLINE_ROWS:
        p = s[(s["counts"] == counts) & (s["size"] == size)]
        if p.empty:
            continue
        fp32 = p["precision"].fillna("fp32").isin(["fp32", "3xtf32"])  # FP32-class: within 1e-5 of float64

        def best(mask) -> pd.Series:
            """The fastest run among `mask`'s (time_us NaN, variant "" where there is none)."""
            q = p[mask]
            return q.loc[q["time_us"].idxmin()] if not q.empty else pd.Series({"time_us": float("nan"), "variant": "",
                                                                               "peak_pct": float("nan")})

        row = {"counts": counts, "size": int(size)}
        row["overlap-wise"] = best(p["variant"] == "overlap-wise")["time_us"]
        paper = best(p["family"].isin(PAPER_FAMILIES))
        row["paper"], row["paper_variant"] = paper["time_us"], paper["variant"]
        new = best((p["family"] == "hopper") & ~p["variant"].isin(HEADLINE_FFT) & fp32)
        row["new"], row["new_variant"], row["new_peak_pct"] = new["time_us"], new["variant"], new["peak_pct"]
        for v in HEADLINE_FFT + ("torch-fft",):
            row[v] = best(p["variant"] == v)["time_us"]
        ours = [row[k] for k in ("overlap-wise", "paper", "new") + HEADLINE_FFT if row[k] == row[k]]
        row["ours_best"] = min(ours) if ours else float("nan")
        row["torch_over_ours"] = row["torch-fft"] / row["ours_best"] if ours else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def headline_markdown(cells: pd.DataFrame) -> str:
    head = ("| case | size | overlap-wise | best paper kernel | best new kernel | % of FP32 peak (new) | fft | fft+plan "
            "| fft-fused (new) | PyTorch FFT (torch-fft) | PyTorch FFT / our best |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n")
    out = []
    for _, r in cells.iterrows():
        def t(col, variant_col=None):
            if r[col] != r[col]:
                return "–"
            cell = fmt_time(r[col])
            if variant_col and r[variant_col]:
                cell += f" ({r[variant_col]})"
            return f"**{cell}**" if r[col] == r["ours_best"] else cell
        v = r["new_peak_pct"]
        pct = "–" if v != v else f"{v:.2g}%" if v < 10 else f"{v:.0f}%"
        ratio = f"{r['torch_over_ours']:.3g}x" if r["torch_over_ours"] == r["torch_over_ours"] else "–"
        out.append(f"| {HEADLINE_ROW_LABELS.get(r['counts'], r['counts'])} | {r['size']} | {t('overlap-wise')} | "
                   f"{t('paper', 'paper_variant')} | {t('new', 'new_variant')} | {pct} | {t('fft')} | {t('fft+plan')} | "
                   f"{t('fft-fused')} | {t('torch-fft')} | {ratio} |")
    return head + "\n".join(out) + "\n"


# ---- the reductions (experiments/reductions.py) ----------------------------------------

# The targets live in experiments/reductions.py (TARGETS); here they are judged. "ours" is
# xcorr-reduce (2DTM's rate: the faster of xcorr-reduce and xcorr-reduce-batched), "map" xcorr-map,
# "PyTorch" torch-reduce.
REDUCTION_VARIANTS = ("xcorr-reduce", "xcorr-reduce-batched", "xcorr-map", "xcorr-map+torch", "torch-reduce",
                      "torch-2dtm-circular")


def reduction_measurements(data: dict) -> tuple[dict, dict]:
    """From a reductions results file (the dict load_results returns): {(shape group, variant): mean
    time per call in µs over the repetitions, IQR outliers removed (xcsuite.stats.describe: the
    protocol's statistic, as summary.csv and the figures take it)} and {(shape group, variant): GPU
    memory the first call took beyond its inputs, bytes (the counter mem_bytes)}, ok cases only.
    Cases of shapes the experiment no longer defines (an older results file's) are left out."""
    from experiments import reductions as exp
    from xcsuite import resultfile
    from xcsuite.benchjson import seconds
    from xcsuite.stats import describe

    groups = {(s.dims(), s.shifts_text): s.group for s in exp.SHAPES}
    times, mem = {}, {}
    for rec in data.get("cases", {}).values():
        if rec.get("status") != "ok":
            continue
        group = groups.get((resultfile.dims_of(rec), rec.get("shifts", "")))
        ok = [e for e in resultfile.entries_of(rec) if not e.get("error_occurred") and "real_time" in e]
        if group is None or not ok:
            continue
        times[(group, rec["variant"])] = describe([seconds(e) for e in ok])["mean"] * 1e6
        if "mem_bytes" in ok[0]:
            mem[(group, rec["variant"])] = float(ok[0]["mem_bytes"])
    return times, mem


def tm_rates(times: dict) -> pd.DataFrame:
    """2-D template matching per template count: each series' time per template (µs) and ours (the
    faster of the one call and the batched loop), rows by count; NaN where not measured."""
    from experiments import reductions as exp

    rows = []
    for n, g in zip(exp.TM_COUNTS, exp.TM_GROUPS):
        row = {"templates": n, "group": g}
        for v in REDUCTION_VARIANTS:
            row[v] = times.get((g, v), float("nan")) / n
        row["ours"] = np.fmin(row["xcorr-reduce"], row["xcorr-reduce-batched"])
        row["ours_variant"] = "xcorr-reduce-batched" if row["xcorr-reduce-batched"] < row["xcorr-reduce"] \
            else "xcorr-reduce"
        rows.append(row)
    return pd.DataFrame(rows)


def build_reduction_table(times: dict, mem: dict) -> pd.DataFrame:
    """One row per target of experiments/reductions.py's TARGETS: the measured value, the bound and
    whether it holds (None: not measured). 2-D template matching is judged at the largest template
    count measured (its rate) and between the smallest and the largest (its memory)."""
    from experiments import reductions as exp

    def t(group, variant):
        return times.get((group, variant), float("nan"))

    rows = []

    def add(case, target, value, bound, at_least, ours="xcorr-reduce", note=""):
        holds = None if value != value else (value >= bound if at_least else value <= bound)
        rows.append({"case": case, "target": target, "measured": value, "bound": bound,
                     "at_least": at_least, "holds": holds, "ours": ours, "note": note})

    rates = tm_rates(times)
    measured = rates[rates["xcorr-reduce"] == rates["xcorr-reduce"]]
    big = measured.iloc[-1] if len(measured) else rates.iloc[-1]  # the largest count measured
    for tg in exp.TARGETS:
        g, b = tg.group, tg.bound
        if tg.kind == "speedup":
            add(g, f">= {b:g}x PyTorch (PyTorch's time / ours)", t(g, "torch-reduce") / t(g, "xcorr-reduce"), b, True)
        elif tg.kind == "over_map":
            add(g, f"time <= {b:g}x our map's", t(g, "xcorr-reduce") / t(g, "xcorr-map"), b, False)
        elif tg.kind == "map_us":
            add(g, f"our map itself <= {b:g} µs", t(g, "xcorr-map"), b, False, "xcorr-map")
        elif tg.kind == "templates_per_s":
            circ = big["torch-2dtm-circular"]
            others = ", ".join(f"{r['templates']}: {1e6 / r['ours']:,.0f}/s" for _, r in measured.iterrows()
                               if r["templates"] != big["templates"] and r["ours"] == r["ours"])
            note = (f"PyTorch {1e6 / big['torch-reduce']:,.0f}/s padded, {1e6 / circ:,.0f}/s circular"
                    if big["torch-reduce"] == big["torch-reduce"] else "PyTorch not measured")
            note += f"; ours at {others}" if others else ""
            add(big["group"], f">= {b:,.0f} templates/s (ours, at the largest count measured)", 1e6 / big["ours"], b,
                True, big["ours_variant"], note=note)
        elif tg.kind == "memory_mib":
            # Judged on the one call over every template (xcorr-reduce), whichever series was faster:
            # the batched loop's own growth stands in the note.
            small_g = exp.tm_group(exp.TM_QUICK)

            def mem_pair(v):
                hi, lo = mem.get((big["group"], v), float("nan")), mem.get((small_g, v), float("nan"))
                one = big["templates"] == exp.TM_QUICK  # one count measured: no growth to judge
                return hi, lo, (hi - lo) if hi == hi and lo == lo and not one else float("nan")
            m_big, m_small, grown = mem_pair("xcorr-reduce")
            n = big["templates"]
            note = (f"{m_small / 2**20:.0f} MiB at {exp.TM_QUICK}, {m_big / 2**20:.0f} MiB at {n} (sampled GPU memory "
                    "beyond the inputs)" if grown == grown else "not measured")
            # the batched loop runs up to TM_SIDE_SERIES_MAX templates: its growth to its own largest count
            bm = [(r["templates"], mem.get((r["group"], "xcorr-reduce-batched"))) for _, r in rates.iterrows()]
            bm = [(c, v) for c, v in bm if v is not None]
            if len(bm) > 1 and bm[0][0] == exp.TM_QUICK:
                note += f"; batched: {bm[0][1] / 2**20:.0f} MiB at {bm[0][0]}, {bm[-1][1] / 2**20:.0f} MiB at {bm[-1][0]}"
            upto = f"{n} templates" if n != exp.TM_QUICK else "the largest count measured"
            add(big["group"], f"GPU memory independent of the template count: growth from {exp.TM_QUICK} to {upto} "
                f"<= {b:g} MiB", grown / 2**20, b, False, "xcorr-reduce", note=note)
        else:
            raise ValueError(f"unknown target kind {tg.kind!r}")
    return pd.DataFrame(rows, columns=["case", "target", "measured", "bound", "at_least", "holds", "ours", "note"])


def reduction_pays(times: dict) -> pd.DataFrame:
    """Per case: our reduction's time, the map's, the map then PyTorch's reduction, PyTorch's, and
    the reduction over the map (below 1: reducing pays beyond the map itself)."""
    from experiments import reductions as exp

    rows = []
    for s in exp.SHAPES:
        g = s.group
        row = {"case": g, **{v: times.get((g, v), float("nan")) for v in REDUCTION_VARIANTS}}
        row["reduce_over_map"] = row["xcorr-reduce"] / row["xcorr-map"]
        row["reduce_over_map_torch"] = row["xcorr-reduce"] / row["xcorr-map+torch"]
        rows.append(row)
    return pd.DataFrame(rows)


def reduction_markdown(targets: pd.DataFrame, pays: pd.DataFrame) -> str:
    def f(v, unit=""):
        if v != v:
            return "–"
        if unit == " µs":
            return fmt_time(v)
        return f"{v:,.0f}{unit}" if unit.endswith("/s") else f"{v:.3g}{unit}"
    lines = ["| case | target | measured | holds | note |", "|---|---|---|---|---|"]
    for _, r in targets.iterrows():
        holds = {True: "**holds**", False: "misses", None: "not measured"}[r["holds"] if r["holds"] is not None
                                                                          and r["holds"] == r["holds"] else None]
        unit = (" MiB" if "MiB" in r["target"] else " templates/s" if "templates/s" in r["target"]
                else " µs" if "µs" in r["target"] else "x")
        lines.append(f"| {r['case']} | {r['target']} | {f(r['measured'], unit)} | {holds} | {r['note']} |")
    lines += ["", "| case | ours: reduction | ours: batched | ours: map | ours: map + PyTorch reduction | PyTorch "
              "| PyTorch circular | reduction / map | reduction / (map + PyTorch reduction) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for _, r in pays.iterrows():
        cells = [fmt_time(r[v]) if r[v] == r[v] else "–" for v in REDUCTION_VARIANTS]
        lines.append(f"| {r['case']} | " + " | ".join(cells) + f" | {f(r['reduce_over_map'], 'x')} | "
                     f"{f(r['reduce_over_map_torch'], 'x')} |")
    return "\n".join(lines) + "\n"


# A batch over the GPUs of one host and the quick sweep over them: the README's and
# docs/results.md's multi-GPU table, from results/<gpu>/multi-gpu/{batch,sweep}_scaling.json.
MULTIGPU_ROWS = (("fresh result array per call", "seconds", "floor_fresh"),
                 ("out= reused, pageable", "seconds_out_reused", "floor_out_reused"),
                 ("out= reused, page-locked", "seconds_out_pinned", "floor_out_pinned"),
                 ("the GPUs' work alone (results left on them)", "compute_seconds", None))


def _gpus(n: int) -> str:
    return f"{n} GPU{'s' if n > 1 else ''}"


def _driver(smi) -> str:
    """The driver named in a JSON's nvidia-smi record, or "": gpus.nvidia_smi()'s {"gpus":
    [{"driver_version": ...}]}, or the lines of fields (a field such as 580.159.04) that
    batch-scaling and sweep-scaling wrote before they used it (results/*/multi-gpu/ of then)."""
    if isinstance(smi, dict):
        fields = [g.get("driver_version", "") for g in smi.get("gpus") or [] if isinstance(g, dict)]
    else:
        fields = [f for s in smi or [] if isinstance(s, str) for f in s.split(", ")]
    drivers = sorted({f for f in fields if re.fullmatch(r"\d+\.\d+(\.\d+)?", f)})
    return f", driver {', '.join(drivers)}" if drivers else ""


def tm_markdown(tm: dict) -> str:
    """2-D template matching on one GPU and on all (scripts/tm-scaling's JSON): per template count
    the time of a call, the templates a second and the speed-up, and whether the largest count's
    meets the target (experiments/reductions.py: TM_GPUS_SPEEDUP on two GPUs or more)."""
    from experiments.reductions import TM_GPUS_SPEEDUP

    last = tm["counts"][-1]["runs"]
    n = len(last[-1]["devices"])
    (h, w), (th, tw) = tm["image"], tm["template"]
    out = [f"2-D template matching, a {h} x {w} image against {th} x {tw} templates, \"{tm['mode']}\" window, "
           f"max / argmax / sum / sum of squares (`scripts/tm-scaling`: `xcorr.max_over_rights(..., "
           f"devices=...)` on NumPy arrays, uploads and merge included, each answer checked) on 1 GPU and on "
           f"{n} x {tm['gpu']}{_driver(tm.get('nvidia_smi'))}, revision {str(tm['git_revision'])[:7]}, "
           f"best of {tm['repeat']}:\n",
           f"| templates | 1 GPU | {_gpus(n)} | templates/s, 1 GPU | templates/s, {_gpus(n)} | speed-up |",
           "|---|---|---|---|---|---|"]
    for c in tm["counts"]:
        one, many = c["runs"][0], c["runs"][-1]
        out.append(f"| {c['templates']} | {one['seconds']:.3g} s | {many['seconds']:.3g} s | "
                   f"{one['templates_per_s']:,.0f} | {many['templates_per_s']:,.0f} | {one['seconds'] / many['seconds']:.2f}x |")
    if n >= 2:
        speedup = last[0]["seconds"] / last[-1]["seconds"]
        verdict = "**holds**" if speedup >= TM_GPUS_SPEEDUP else "misses"
        out.append(f"\nTarget: at least {TM_GPUS_SPEEDUP}x one GPU's rate on {_gpus(n)} at the largest count "
                   f"({tm['counts'][-1]['templates']}): {speedup:.2f}x, {verdict}.")
    out.append("")
    return "\n".join(out)


def multigpu_markdown(batch: dict | None, sweep: dict | None, tm: dict | None = None) -> str:
    """The batch's time per result array on one GPU and on all (the first and last of its runs)
    beside the host link's floors of each, and the speed-up those floors allow (one GPU's time over
    the floor of all: what no division of the work can beat); then the quick sweep's wall time per
    group; then 2-D template matching over the GPUs (tm_markdown). A part is left out where its
    JSON is None; ValueError where all are."""
    if batch is None and sweep is None and tm is None:
        raise ValueError("neither batch_scaling.json nor sweep_scaling.json nor tm_scaling.json")
    out = []
    if batch is not None:
        one, many = batch["runs"][0], batch["runs"][-1]
        n = len(many["devices"])
        left, right = batch["left"], batch["right"]
        shift = (batch.get("window") or {}).get("max_shift")
        out.append(f"{batch['form']} batch of {left[0]} x {right[0]} of {left[1]} x {left[2]}"
                   + (f" within ±{shift}" if shift is not None else "")
                   + f" ({one['output_gb']:.3g} GB of results) on {n} x {batch['gpu']}"
                   f"{_driver(batch.get('nvidia_smi'))}, "
                   f"revision {str(batch['git_revision'])[:7]}, best of {batch['repeat']} "
                   "(`scripts/batch-scaling`; floors: the GPUs copying the same bytes with nothing else running, "
                   "xcsuite/copy_ceiling.py):\n")
        out += [f"| result array | 1 GPU | {_gpus(n)} | speed-up | floor, 1 GPU | floor, {_gpus(n)} | "
                "speed-up the floors allow |", "|---|---|---|---|---|---|---|"]
        for label, key, floor in MULTIGPU_ROWS:
            a, b = one.get(key), many.get(key)
            if a is None or b is None:
                continue
            fa, fb = (one.get(floor), many.get(floor)) if floor else (None, None)
            cell = [fmt_time(a * 1e6), fmt_time(b * 1e6), f"{a / b:.2f}x",
                    fmt_time(fa * 1e6) if fa else "", fmt_time(fb * 1e6) if fb else "", f"{a / fb:.2f}x" if fb else ""]
            out.append(f"| {label} | " + " | ".join(cell) + " |")
        out.append("")
    if sweep is not None:
        n = len(sweep["gpus"])
        machines = len(sweep.get("machines") or [1])
        smi = sweep.get("nvidia_smi") or (sweep.get("groups") or [{}])[0].get("nvidia_smi")  # whole, or by group
        out.append(f"The quick suite (`python -m xcsuite run-experiments --quick --force`) on 1 GPU and on {n} x "
                   f"{sweep['gpus'][0]}{_driver(smi)}, revision "
                   f"{str(sweep['git_revision'])[:7]}, wall time (`scripts/sweep-scaling`"
                   + (f", group by group, both runs of a group on one machine; {machines} machine(s)"
                      if sweep.get("by_group") else "") + "):\n")
        out += [f"| experiments | cases | 1 GPU | {_gpus(n)} | speed-up |", "|---|---|---|---|---|"]
        for g in sweep.get("groups") or []:
            a, b = g["runs"][0]["seconds"], g["runs"][-1]["seconds"]
            out.append(f"| {', '.join(g['experiments'])} | {g['cases']} | {a:.1f} s | {b:.1f} s | {a / b:.2f}x |")
        # by group: the sums of the groups' runs; the whole suite in one sweep (the main job's): its two runs
        a, b = ((sweep["seconds"]["1"], sweep["seconds"][str(n)]) if "seconds" in sweep
                else (sweep["runs"][0]["seconds"], sweep["runs"][-1]["seconds"]))
        out.append(f"| **the quick suite** | {sweep['cases']} | {a:.1f} s | {b:.1f} s | **{a / b:.2f}x** |")
        out.append("")
    if tm is not None:
        out.append(tm_markdown(tm))
    return "\n".join(out)
