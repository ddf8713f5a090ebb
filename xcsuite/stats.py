"""Per-configuration statistics under the paper's protocol: IQR outlier removal, then mean,
standard deviation and coefficient of variation of the kept repetitions."""
from __future__ import annotations

import numpy as np


def iqr_mask(values) -> np.ndarray:
    """True for the values kept by the IQR rule: Q1 - 1.5 IQR <= v <= Q3 + 1.5 IQR (quartiles
    by linear interpolation, as numpy and pandas compute them)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return np.zeros(0, dtype=bool)
    q1, q3 = np.percentile(v, [25, 75])
    iqr = q3 - q1
    return (v >= q1 - 1.5 * iqr) & (v <= q3 + 1.5 * iqr)


def describe(values) -> dict:
    v = np.asarray(values, dtype=float)
    kept = v[iqr_mask(v)]
    n = kept.size
    mean = float(kept.mean()) if n else float("nan")
    std = float(kept.std(ddof=1)) if n > 1 else 0.0 if n == 1 else float("nan")
    return {"n_reps": int(v.size), "n_kept": int(n), "n_outliers": int(v.size - n), "mean": mean, "std": std,
            "cv": std / mean if n and mean > 0 else float("nan"),
            "median": float(np.median(kept)) if n else float("nan"),
            "min": float(kept.min()) if n else float("nan")}
