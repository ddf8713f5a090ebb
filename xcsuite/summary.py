"""A GPU folder's results as one table, summary.csv (written by the aggregate command): one row
per configuration and experiment, with its parameters, the mean time per call after IQR outlier
removal (paper protocol), std, cv, time per FMA, FLOP/s and % of the FP32 peak;
experiment_complete is false for the rows of an experiment whose run stopped part-way. Where a
folder holds a windowed case (docs/CONVENTIONS.md, "Output windows"), a last column `shifts` gives
each row's window ('DY0:DY1,DX0:DX1', empty for the full output; fmas and everything derived from
it are the window's): folders without one keep the columns above only."""
from __future__ import annotations

from pathlib import Path

from xcsuite.spec import Shape, count_label
from xcsuite import paths
from xcsuite.benchjson import parse_label, seconds
from xcsuite.resultfile import STATUSES, dims_of, entries_of, window_of
from xcsuite.results import ResultsError, load_results, progress_of_data

# pandas, and NumPy through xcsuite.stats, are imported by the functions that use them: the scripts
# that import this module (auto-tables, auto-report) refuse a bad command line or a missing build
# before they read any summary, and their import was ~1 s of CPU of each such process.

COLUMNS = ["gpu", "gpu_name", "experiment", "case", "variant", "family", "form", "counts", "size", "hL", "wL",
           "hR", "wR", "nL", "nR", "pairs", "params", "cold", "status", "message", "n_reps", "n_kept",
           "n_outliers", "time_us", "std_us", "cv", "median_us", "min_us", "finish_time_us", "batch", "fmas",
           "time_per_fma_ps", "flops", "peak_flops", "peak_pct", "timed", "precision", "experiment_complete",
           "shifts"]  # empty: the full output


def _float(x, default=float("nan")):
    try:
        return float(x)
    except (TypeError, ValueError):
        return default


def rows_of(path: Path) -> list[dict]:
    from xcsuite.stats import describe

    data = load_results(path)
    ctx = data.get("context", {})
    meta = data.get("xcorr_meta", {})
    experiment = meta.get("experiment", Path(path).stem)
    families = {v["name"]: v.get("family", "") for v in meta.get("registry", [])}
    peak = _float(ctx.get("xcorr_fp32_peak_flops"))
    complete = progress_of_data(data, Path(path).stem).complete  # the runner's verdict, and no case of the definition pending
    rows = []
    for key, info in data.get("cases", {}).items():
        entries = entries_of(info)
        ok = [e for e in entries if not e.get("error_occurred")]
        errs = [e for e in entries if e.get("error_occurred")]
        variant, dims, params = info["variant"], dims_of(info), info["params"]
        form, hL, wL, hR, wR, nL, nR = dims
        try:
            shape = Shape(form, hL, wL, hR, wR, nL, nR, window=window_of(info))
            pairs, fmas_default = shape.pairs, shape.fmas
        except ValueError:
            pairs, fmas_default = float("nan"), float("nan")
        label = parse_label((ok or entries or [{}])[0].get("label", ""))
        row = {"gpu": Path(path).parent.name, "gpu_name": ctx.get("xcorr_gpu_name", ""), "experiment": experiment,
               "case": key, "variant": variant, "family": label.get("family") or families.get(variant, ""),
               "form": form, "counts": count_label(form, nL, nR) if form != "?" else "",
               "size": hL if hL == wL == hR == wR else float("nan"), "hL": hL, "wL": wL, "hR": hR, "wR": wR,
               "nL": nL, "nR": nR, "pairs": pairs,
               "params": ",".join(f"{k}={params[k]}" for k in sorted(params)),
               "cold": info["cold"],
               "timed": label.get("timed", ""), "precision": label.get("precision", ""), "peak_flops": peak,
               "experiment_complete": complete, "shifts": info.get("shifts", "")}
        # The runner's verdict first: a case it recorded as failed (a bench that died, or exited 0
        # with fewer repetitions than asked) may hold repetitions without an error flag.
        if ok and not errs and info.get("status", "ok") == "ok":
            st = describe([seconds(e) for e in ok])
            fmas = _float(ok[0].get("fmas"), fmas_default)
            fin = [_float(e.get("finish_time")) for e in ok if "finish_time" in e]  # seconds
            row.update(status="ok", message="", n_reps=st["n_reps"], n_kept=st["n_kept"],
                       n_outliers=st["n_outliers"], time_us=st["mean"] * 1e6, std_us=st["std"] * 1e6, cv=st["cv"],
                       median_us=st["median"] * 1e6, min_us=st["min"] * 1e6,
                       finish_time_us=(sum(fin) / len(fin) * 1e6) if fin else float("nan"),
                       batch=_float(ok[0].get("batch")), fmas=fmas,
                       time_per_fma_ps=st["mean"] / fmas * 1e12 if fmas else float("nan"),
                       flops=2 * fmas / st["mean"] if st["mean"] > 0 else float("nan"))
            row["peak_pct"] = 100 * row["flops"] / peak if peak == peak and peak > 0 else float("nan")
        else:
            msg = (errs[0].get("error_message") if errs else "") or info.get("message", "") or "no result"
            row.update(status=info.get("status", "failed") if info.get("status") != "ok" else "failed",
                       message=msg, n_reps=len(ok), fmas=fmas_default)
        rows.append(row)
    return rows


def summarize(gpu_dir: Path) -> pd.DataFrame:
    """The summary of a GPU folder's results, computed (nothing is written)."""
    import pandas as pd

    rows = []
    for f in sorted(Path(gpu_dir).glob("*.json")):
        try:
            rows += rows_of(f)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            # A case of an unexpected form (a null time, fewer repetitions than n_reps): the whole
            # experiment's rows were dropped with a warning (exit 0, "nothing measured"); stopped
            # instead, as a damaged file is (exit 2 from the tools).
            raise ResultsError(f"{f}: a case it cannot read ({type(e).__name__}: {e}); nothing was aggregated") from e
    return pd.DataFrame(rows, columns=COLUMNS)


def aggregate_dir(gpu_dir: Path) -> pd.DataFrame:
    """Writes results/<gpu>/summary.csv."""
    df = summarize(gpu_dir)
    paths.write_csv_atomic(Path(gpu_dir) / "summary.csv", df)
    return df


def paper_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows of the paper's evaluation: full, raw outputs, measured by an experiment that is not
    one of the output-window or normalized experiments (a window's time is another problem's, a
    normalized case's another quantity's)."""
    from experiments import NOT_PAPER_EXPERIMENTS
    keep = ~summary["experiment"].isin(NOT_PAPER_EXPERIMENTS) & (summary["shifts"] == "")
    if "params" in summary.columns:  # a normalized case carries normalize=MODE among its parameters
        keep &= ~summary["params"].astype(str).str.contains("normalize=", regex=False)
    return summary[keep]


def paper_experiments(gpu_dir: Path) -> list[str]:
    """The experiments with a results file in gpu_dir that belong to the paper's evaluation."""
    from experiments import NOT_PAPER_EXPERIMENTS
    return [f.stem for f in sorted(Path(gpu_dir).glob("*.json")) if f.stem not in NOT_PAPER_EXPERIMENTS]


def gpu_name_of(summary: pd.DataFrame, gpu_dir: Path) -> str:
    """The GPU a result folder was measured on: the first recorded name, else the folder's name."""
    import pandas as pd

    names = [n for n in summary.get("gpu_name", pd.Series(dtype=str)).dropna().unique() if n]
    return names[0] if names else Path(gpu_dir).name


# What a reader of summary.csv may rely on, column by column (the aggregator writes all of COLUMNS):
# text (empty where none), whole numbers in every row, numbers or empty, True/False. A damaged or
# hand-edited file (hL "abc", a column missing) read as it was made claims and anchors count the
# rows it spoiled as "not measured" and exit 0, and other readers stop with a traceback.
TEXT_COLUMNS = ("gpu", "gpu_name", "experiment", "case", "variant", "family", "form", "counts", "params", "status",
                "message", "timed", "precision", "shifts")
WHOLE_COLUMNS = ("hL", "wL", "hR", "wR", "nL", "nR", "n_reps")
BOOL_COLUMNS = ("cold", "experiment_complete")
NUMBER_COLUMNS = tuple(c for c in COLUMNS if c not in TEXT_COLUMNS + WHOLE_COLUMNS + BOOL_COLUMNS)
OPTIONAL_COLUMNS = ("shifts",)  # written only since windows existed: every row is then the full output


def read_summary_csv(csv: Path, columns=COLUMNS) -> pd.DataFrame:
    """A summary.csv checked against the schema above for `columns` (those its reader uses; the
    others are read as they are): text filled with "", whole numbers as int64, numbers as numbers
    (NaN where empty), booleans as bool. Anything else raises ResultsError naming the file, the column and the row,
    which the report commands print as one line and exit 2 (exit_2_on_bad_results)."""
    import pandas as pd

    csv = Path(csv)
    redo = "regenerate it from the results files with python -m xcsuite aggregate"
    try:
        df = pd.read_csv(csv, dtype={c: str for c in TEXT_COLUMNS}, keep_default_na=True)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as e:
        raise ResultsError(f"{csv}: not a summary.csv ({' '.join(str(e).split())}); {redo}") from e
    missing = [c for c in columns if c not in df.columns and c not in OPTIONAL_COLUMNS]
    if missing:
        named = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ResultsError(f"{csv}: no column {named} (not a summary.csv, or a damaged one); {redo}")

    def bad(c, rows, what):  # rows: a mask of the rows in error; the first is named
        i = int(rows.to_numpy().nonzero()[0][0])
        raise ResultsError(f"{csv}: column {c}, line {i + 2}: {df[c].iloc[i]!r} is not {what}; {redo}")

    df = df.reset_index(drop=True)
    for c in (c for c in columns if c in df.columns):
        if c in TEXT_COLUMNS:
            df[c] = df[c].fillna("")
        elif c in BOOL_COLUMNS:
            v = df[c].astype(str)
            if not v.isin(["True", "False"]).all():
                bad(c, ~v.isin(["True", "False"]), "True or False")
            df[c] = v.eq("True")
        else:
            v = pd.to_numeric(df[c], errors="coerce")
            if (v.isna() & df[c].notna()).any():
                bad(c, v.isna() & df[c].notna(), "a number")
            if c in WHOLE_COLUMNS:
                wrong = v.isna() | (v != v.round()) | (v < (0 if c == "n_reps" else 1))
                if wrong.any():
                    bad(c, wrong, "a whole number" + ("" if c == "n_reps" else " of at least 1"))
                v = v.astype("int64")
            df[c] = v
    if "status" in columns:
        if not df["status"].isin(STATUSES).all():
            bad("status", ~df["status"].isin(STATUSES), f"one of {', '.join(STATUSES)}")
        if "time_us" in columns:  # a measured row without a time would be left out of every table
            if not (df["time_us"] > 0)[df["status"] == "ok"].all():
                bad("time_us", (df["status"] == "ok") & ~(df["time_us"] > 0), "a positive time (its row is ok)")
    return df


def load_summary(gpu_dir: Path) -> pd.DataFrame:
    """summary.csv of a GPU folder (read_summary_csv: checked); computed afresh, not written, when it
    is missing or older than a results file (reading never writes: python -m xcsuite aggregate does)."""
    import pandas as pd

    gpu_dir = Path(gpu_dir)
    csv = gpu_dir / "summary.csv"
    jsons = list(gpu_dir.glob("*.json"))
    if jsons and (not csv.exists() or max(j.stat().st_mtime for j in jsons) > csv.stat().st_mtime):
        df = summarize(gpu_dir)
    elif not csv.exists():
        df = pd.DataFrame(columns=COLUMNS)
    else:
        df = read_summary_csv(csv)
    if "shifts" not in df.columns:  # written before windows existed: every row is the full output
        df["shifts"] = ""
    return df
