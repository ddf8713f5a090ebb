"""The benchmark binary's output: Google Benchmark JSON with xcorr_* context strings, one
"iteration" entry per repetition whose run_name is
    <variant>/<form>/hL:<n>/wL:<n>/hR:<n>/wR:<n>/nL:<n>/nR:<n>[/shifts:DY0:DY1,DX0:DX1][/<param>:<value>...][google suffixes]
(the shifts segment only for a window other than the full output: docs/CONVENTIONS.md).

Its input and output for every program that takes its place (python -m xcsuite.peerbench) or reads
its cases (xcsuite/resultfile.py): the case lines' syntax (parse_case_line, case_line), and the
JSON, read (load_bench_json, parse_run_name) and written as Google Benchmark streams it (JsonOut,
iteration_entry, aggregates, base_context).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import socket
from dataclasses import dataclass, field
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


# ---- case lines (xcorr_bench --case / --cases: harness/bench_main.cpp, parse_case) ---------------

WINDOW_KEYS = ("window", "max_shift", "shifts")  # at most one per case line


class UsageError(Exception):
    """Bad usage or a bad case: exit status 2."""


def int_value(what, text, lo, hi) -> int:
    """`text` as an integer from lo to hi (xcorr_bench's parse_integer); UsageError naming `what`."""
    if not re.fullmatch(r"[+-]?\d+", text.strip() if isinstance(text, str) else str(text)):
        raise UsageError(f"{what}: not an integer from {lo} to {hi}: '{text}'")
    v = int(text)
    if not lo <= v <= hi:
        raise UsageError(f"{what}: not an integer from {lo} to {hi}: '{text}'")
    return v


@dataclass
class CaseLine:
    """A case line's keys: `keys` every key=value but the window's, in the order given (variant=
    and form= among them); the window key and its value, if one is given."""
    keys: dict = field(default_factory=dict)
    window_key: str | None = None
    window_value: str | None = None

    @property
    def window(self) -> str:
        """The window as a Shape spells it: 'full', 'valid', 'same', 'max_shift=..' or 'shifts=..'."""
        if self.window_key is None:
            return "full"
        return self.window_value if self.window_key == "window" else f"{self.window_key}={self.window_value}"


def parse_case_line(line: str) -> CaseLine:
    """'variant=V form=F size=N | hL= wL= hR= wR=, nL= nR=, [one window key], key=value ...' (the
    syntax of xcorr_bench --case) -> CaseLine; UsageError for a token that is no key=value, a key
    given twice, more than one window key, or a line without variant= and form=. What the keys
    mean is the reader's (xcorr_bench's parse_case, xcsuite.peers.parse_case)."""
    out = CaseLine()
    for tok in line.split():
        k, eq, v = tok.partition("=")
        if not eq or not k:
            raise UsageError(f"case '{line}': expected key=value, got {tok}")
        if k in WINDOW_KEYS:
            if out.window_key is not None:
                raise UsageError(f"case '{line}': at most one of window=, max_shift=, shifts=")
            out.window_key, out.window_value = k, v
        elif k in out.keys:
            raise UsageError(f"case '{line}': {k}= is given twice")  # xcorr_bench's: not last-wins
        else:
            out.keys[k] = v
    if "variant" not in out.keys or "form" not in out.keys:
        raise UsageError(f"case '{line}': needs variant= and form=")
    return out


def case_line(variant: str, form: str, dims, window: str = "full", params=()) -> str:
    """The case line of a case: dims (hL, wL, hR, wR, nL, nR), a window as a Shape spells it
    ('full': no key), then the other keys (a mapping or pairs) in the order given."""
    keys = [f"variant={variant}", f"form={form}", *(f"{k}={v}" for k, v in zip(DIM_KEYS, dims))]
    if window != "full":
        keys.append(window if "=" in window else f"window={window}")
    items = params.items() if hasattr(params, "items") else params
    return " ".join(keys + [f"{k}={v}" for k, v in items])


# ---- writing the JSON (python -m xcsuite.peerbench: Google Benchmark's, as xcorr_bench writes it) -------

def iteration_entry(run_name: str, index: int, rep: int, repetitions: int, error: str | None = None) -> dict:
    """The fields of an "iteration" entry that every case has (an errored one: these and the error);
    the caller adds the times, counters and label."""
    e = {"name": run_name, "family_index": index, "per_family_instance_index": 0, "run_name": run_name,
         "run_type": "iteration", "repetitions": repetitions, "repetition_index": rep, "threads": 1}
    if error is not None:
        e.update({"error_occurred": True, "error_message": error})
    return e


def aggregates(base: dict, times: list[float], reps: int) -> list[dict]:
    """Google Benchmark's mean/median/stddev/cv over the repetitions (the runner recomputes them)."""
    if not times:
        return []
    import numpy as np  # here, not at the top: the readers of this module (the runner, its fake tools) need none

    a = np.array(times)
    vals = {"mean": a.mean(), "median": float(np.median(a)), "stddev": a.std(ddof=1) if len(a) > 1 else 0.0}
    vals["cv"] = vals["stddev"] / vals["mean"] if vals["mean"] else 0.0
    out = []
    for k, v in vals.items():
        out.append({"name": f"{base['run_name']}_{k}", "family_index": base["family_index"],
                    "per_family_instance_index": 0, "run_name": base["run_name"], "run_type": "aggregate",
                    "repetitions": reps, "threads": 1, "aggregate_name": k,
                    "aggregate_unit": "percentage" if k == "cv" else "time", "iterations": reps,
                    "real_time": float(v), "cpu_time": 0.0, "time_unit": "us" if k != "cv" else ""})
    return out


def base_context(executable: str) -> dict:
    """Google Benchmark's own context keys (the xcorr_* ones are the program's)."""
    return {"date": dt.datetime.now(dt.timezone.utc).astimezone().isoformat(timespec="seconds"),
            "host_name": socket.gethostname(), "executable": executable,
            "num_cpus": os.cpu_count(), "mhz_per_cpu": 0, "cpu_scaling_enabled": False, "caches": [],
            "load_avg": list(os.getloadavg()), "library_build_type": "release"}


class JsonOut:
    """Google Benchmark's JSON, streamed: a killed process leaves complete entries behind
    (load_bench_json repairs the end)."""

    def __init__(self, path, ctx: dict):
        self.f = open(path, "w") if path else None
        self.first = True
        if self.f:
            head = json.dumps({"context": ctx}, indent=2)[:-2]
            self.f.write(head + ',\n  "benchmarks": [\n')
            self.f.flush()

    def add(self, e: dict):
        if self.f:
            self.f.write(("" if self.first else ",\n") + "    " + json.dumps(e))
            self.f.flush()
            self.first = False

    def close(self):
        if self.f:
            self.f.write("\n  ]\n}\n")
            self.f.close()
