"""Table 1 from the tuning sweep (experiment table1): per form (row) and size (column) the fastest
variant with its best parameters, its time and its margin over the runner-up, in four readings
(READINGS); the table command writes them, claims and anchors read them."""
from __future__ import annotations

import pandas as pd

from experiments._spec import SIZES_TABLE

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


def window_markdown(table: pd.DataFrame) -> str:
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
            text = f"**{r['best_variant']}** {fmt_time(r['best_time_us'])}"
            if r["margin"] == r["margin"]:
                text += f"<br>x{r['margin']:.2f} over {r['runner_up_variant']}"
            if isinstance(r["best_peer"], str):
                faster = " **faster**" if r["peer_ratio"] < 1 else ""
                text += f"<br>peer: {r['best_peer']} {fmt_time(r['best_peer_time_us'])} (x{r['peer_ratio']:.2f}){faster}"
            cells.append(text)
        lines.append(f"| {int(size)} | " + " | ".join(cells) + " |")
    return head + "\n".join(lines) + "\n"
