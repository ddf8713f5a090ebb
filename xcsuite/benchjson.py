"""The benchmark binary's output: Google Benchmark JSON with xcorr_* context strings, one
"iteration" entry per repetition whose run_name is
    <variant>/<form>/hL:<n>/wL:<n>/hR:<n>/wR:<n>/nL:<n>/nR:<n>[/shifts:DY0:DY1,DX0:DX1][/<param>:<value>...][google suffixes]
(the shifts segment only for a window other than the full output: docs/CONVENTIONS.md).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from xcsuite.spec import FORMS, case_key

DIM_KEYS = ("hL", "wL", "hR", "wR", "nL", "nR")
# Google Benchmark appends these after the parameters (in this order: min_time, min_warmup_time,
# iterations, repeats, process_time, manual_time | real_time, threads). A variant parameter may be
# called "threads" too (block-per-overlap): "threads:" is Google's only after its other suffixes.
GOOGLE_KEYS = {"min_time", "min_warmup_time", "iterations", "repeats", "process_time", "manual_time", "real_time"}
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


class RunNameError(ValueError):
    pass


def parse_run_name(run_name: str) -> tuple[str, tuple, dict]:
    """-> (variant, (form, hL, wL, hR, wR, nL, nR), {param: value}); a windowed case's shifts are
    in params under "shifts" ("DY0:DY1,DX0:DX1"), as parse_bench_name separates them; a normalized
    case's /norm:MODE under "normalize", the key of its case line (so identities match)."""
    parts = run_name.split("/")
    if len(parts) < 8:
        raise RunNameError(f"not an xcorr run name: {run_name!r}")
    variant, form = parts[0], parts[1]
    if form not in FORMS:
        raise RunNameError(f"unknown form {form!r} in {run_name!r}")
    dims, params = {}, {}
    for p in parts[2:]:
        k, _, v = p.partition(":")
        if k in GOOGLE_KEYS or not _:
            break  # Google's suffixes from here on
        if k in DIM_KEYS:
            dims[k] = int(v)
        elif k == "norm":  # the name's /norm:MODE is the case line's normalize=MODE
            params["normalize"] = v
        else:
            params[k] = v
    missing = [k for k in DIM_KEYS if k not in dims]
    if missing:
        raise RunNameError(f"{run_name!r} lacks {', '.join(missing)}")
    return variant, (form,) + tuple(dims[k] for k in DIM_KEYS), params


def parse_bench_name(run_name: str) -> tuple[str, tuple, str, dict]:
    """-> (variant, dims, shifts, params): shifts 'DY0:DY1,DX0:DX1' for a windowed case, else ''."""
    variant, dims, params = parse_run_name(run_name)
    shifts = params.pop("shifts", "")
    return variant, dims, shifts, params


def entry_run_name(entry: dict) -> str:
    return entry.get("run_name") or entry.get("name", "")


def entry_key(entry: dict, cold: bool = False) -> str:
    """The case an entry belongs to. Google Benchmark drops every counter of an errored entry,
    `cold` included, so the caller passes the run's own setting (context xcorr_cold) as default."""
    variant, dims, shifts, params = parse_bench_name(entry_run_name(entry))
    return case_key(variant, dims, params, bool(entry.get("cold", cold)), shifts)


def is_iteration(entry: dict) -> bool:
    return entry.get("run_type", "iteration") == "iteration"


def seconds(entry: dict, field: str = "real_time") -> float:
    return float(entry[field]) * TIME_UNITS[entry.get("time_unit", "ns")]


def parse_label(label: str) -> dict:
    out = {}
    for part in (label or "").split(";"):
        if "=" in part:
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out


def load_bench_json(path: Path) -> dict:
    """Reads a benchmark output file; one cut short by a crash or a kill is repaired to its last
    complete entry (Google Benchmark streams entries as they finish)."""
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    m = re.search(r'"benchmarks"\s*:\s*\[', text)
    if not m:
        raise ValueError(f"{path}: no benchmark entries")
    head = text[: m.end()]
    body = text[m.end():]
    # cut after the last complete top-level entry: "}" followed by "," or whitespace
    cuts = [i for i in range(len(body)) if body[i] == "}"]
    for i in reversed(cuts):
        candidate = head + body[: i + 1] + "]}"
        try:
            data = json.loads(candidate)
            data["xcorr_repaired"] = True
            return data
        except json.JSONDecodeError:
            continue
    data = json.loads(head + "]}")
    data["xcorr_repaired"] = True
    return data
