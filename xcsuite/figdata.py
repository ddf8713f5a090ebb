"""From an experiment's results and a GPU's summary.csv to the points of its figure: for every
(panel, series, shape) the runner planned (the "members" it stores with the results) the measured
configuration (the fastest one where the series tunes parameters). Missing measurements are
reported, never fatal."""
from __future__ import annotations

import collections
import math
import warnings
from pathlib import Path

import pandas as pd

from xcsuite.spec import WINDOW_KINDS, Experiment, expand
from xcsuite import resultfile
from xcsuite.results import load_results

POINT_COLUMNS = ["experiment", "panel", "shape_panel", "series", "group", "variant", "params", "form", "counts",
                 "size", "hL", "wL", "hR", "wR", "nL", "nR", "time_us", "std_us", "cv", "time_per_fma_ps", "flops",
                 "peak_pct", "tuned", "n_candidates", "window", "shifts", "half_width", "finish_time_us", "total_us",
                 "normalize"]  # none | zncc | zero-lag (docs/CONVENTIONS.md, "Normalization")
# The experiment's metric that picks a tuned series' best configuration (and is drawn): time per
# call, or for the window experiments time per call + finish_time (fft's untimed crop).
RANK_COLUMN = {"time_with_finish": "total_us"}


def registry_from_summary(summary: pd.DataFrame, name: str) -> list:
    """A registry good enough to expand an experiment when its results file carries none:
    the variants and parameter values that were measured."""
    rows = summary[summary["experiment"] == name]
    reg = {}
    for _, r in rows.iterrows():
        v = reg.setdefault(r["variant"], {"name": r["variant"], "family": r.get("family", ""), "forms": set(),
                                          "params": {}, "windows": list(WINDOW_KINDS)})  # measured: computed
        v["forms"].add(r["form"])
        for kv in filter(None, str(r["params"]).split(",")):
            k, val = kv.split("=", 1)
            v["params"].setdefault(k, [])
            if val not in v["params"][k]:
                v["params"][k].append(val)
    for v in reg.values():
        v["forms"] = sorted(v["forms"])
    return list(reg.values())


def members(exp: Experiment, summary: pd.DataFrame, gpu_dir: Path) -> list[resultfile.Member]:
    """The figure's members as the runner stored them with the results. A file written before it
    stored them gets them here, in memory, as the runner would have: from the definition and the
    registry the file carries (else the variants and parameters the summary shows)."""
    f = Path(gpu_dir) / f"{exp.name}.json"
    data = load_results(f) if f.exists() else {}
    if "members" in data:
        return resultfile.decode_members(data["members"])
    registry = data.get("xcorr_meta", {}).get("registry") or registry_from_summary(summary, exp.name)
    return resultfile.decode_members(resultfile.encode_members(expand(exp, registry).members))


def why_failed(messages) -> str:
    """A few words for the recorded failures of one point's cases (summary.csv's message column)."""
    msgs = pd.Series(list(messages), dtype=str)
    if msgs.str.contains("too slow").all():
        return "too slow to time"
    if msgs.str.contains("validation failed").all():
        return "failed the check before timing"
    if msgs.str.contains("out of memory").all():
        return "out of GPU memory"
    return "failed"


def fastest(keys: list, records: dict, rank: str):
    """The key of the smallest `rank` among `keys` (the first on ties; NaN never smallest, as
    pandas' idxmin skips it; the first key where every value is NaN)."""
    best, low = keys[0], math.inf
    for k in keys:
        v = float(records[k][rank])
        if v < low:
            best, low = k, v
    return best


def points(exp: Experiment, summary: pd.DataFrame, gpu_dir: Path,
           refused: dict | None = None) -> tuple[pd.DataFrame, list]:
    """The points of `exp`'s figure, from its results alone (the definition gives only its name),
    and notes on the points missing for want of a measurement (not measured yet: a run stopped
    part-way, or results older than the definition). A point whose every case was run and recorded
    as failed (a peer refused as too slow, out of memory, a failed check) is a result, not a gap:
    it is no note, but goes into `refused`, {(experiment, panel, series, case keys): why}, where
    given, for the caller to count once."""
    notes = []
    rows = summary[(summary["experiment"] == exp.name)]
    if rows.empty:
        return pd.DataFrame(columns=POINT_COLUMNS), [f"{exp.name}: no results for {exp.name} (not measured yet)"]
    failed = rows[rows["status"] != "ok"].groupby("case")["message"].first()
    ok = rows[rows["status"] == "ok"].drop_duplicates("case").set_index("case")
    fin = ok["finish_time_us"].astype(float) if "finish_time_us" in ok else pd.Series(float("nan"), index=ok.index)
    ok = ok.assign(total_us=ok["time_us"].astype(float) + fin.fillna(0.0))
    rank = RANK_COLUMN.get(exp.metric, "time_us")
    # The cases as plain rows, looked up by key: a member's few candidates by pandas' .loc were
    # most of a figure's time (thousands of members a figure)
    records = ok.to_dict("index")
    out = []
    missing = {}
    for m in members(exp, summary, gpu_dir):
        have = [k for k in m.keys if k in records]
        if not have:
            if all(k in failed.index for k in m.keys):
                if refused is not None:
                    refused[(exp.name, m.panel, m.series, tuple(m.keys))] = why_failed(failed[list(m.keys)])
            else:
                missing.setdefault(m.series, []).append(m.shape)
            continue
        best = records[fastest(have, records, rank)]
        s = m.shape
        out.append({"experiment": exp.name, "panel": m.panel, "shape_panel": s.panel, "series": m.series,
                    "group": m.group, "variant": best["variant"], "params": best["params"], "form": s.form,
                    "counts": s.count_label, "size": s.size if s.size else s.hL, "hL": s.hL, "wL": s.wL, "hR": s.hR,
                    "wR": s.wR, "nL": s.nL, "nR": s.nR, "time_us": best["time_us"], "std_us": best["std_us"],
                    "cv": best["cv"], "time_per_fma_ps": best["time_per_fma_ps"], "flops": best["flops"],
                    "peak_pct": best["peak_pct"], "tuned": len(m.keys) > 1, "n_candidates": len(have),
                    "window": s.window, "shifts": s.shifts_text, "half_width": s.half_width,
                    "finish_time_us": best["finish_time_us"], "total_us": best["total_us"],
                    "normalize": s.normalize})
    for label, shapes in missing.items():
        notes.append(f"{exp.name}: '{label}': {len(shapes)} point(s) not measured yet")
    if not out:
        notes.append(f"{exp.name}: nothing measured")
    return pd.DataFrame(out, columns=POINT_COLUMNS), notes


def refused_line(refused: dict, what: str = "figure point") -> str:
    """One line for the points `points` set aside as recorded failures ("" for none): how many, and why."""
    if not refused:
        return ""
    whys = sorted(collections.Counter(refused.values()).items(), key=lambda kv: (-kv[1], kv[0]))
    return (f"{len(refused)} {what}(s) without a time, as measured: " + ", ".join(f"{n} {why}" for why, n in whys)
            + " (each case's reason: the message column of summary.csv)")


def warn_all(notes: list) -> None:
    for n in notes:
        warnings.warn(n, stacklevel=2)
