"""The results file format (results/<gpu>/<experiment>.json), version 2: one record per case
holding every repetition, the provenance once per file. docs/result-files.md describes it for readers;
this module is its only reader and writer.

A record keeps the Google Benchmark entries of one case losslessly: the fields equal in all of
them once ("same"), the fields that differ as one list per field ("reps", None where an entry
lacks the field), and nothing that `entries_of` cannot re-derive from the case itself (the
entry's name, run type, repetition index, case key, and the counters that repeat the case's
dimensions). `encode` checks the round trip, so a field that does not follow these rules is
kept instead of lost."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from xcsuite import paths
from xcsuite.benchjson import UsageError, case_line, parse_case_line
from xcsuite.spec import Shape, case_key

FORMAT = "xcsuite-results/2"
DIM_KEYS = ("hL", "wL", "hR", "wR", "nL", "nR")


class FormatError(ValueError):
    pass


# ---- the case's identity -------------------------------------------------------------------

def identity_from_line(line: str) -> dict:
    """'variant=V form=F hL=.. wL=.. hR=.. wR=.. nL=.. nR=.. [window key] p=v ...' (a case line of
    xcorr_bench --cases) -> the identity fields of a record. A window other than the full output
    is kept as "shifts": its rectangle 'DY0:DY1,DX0:DX1', as the benchmark names the case. The
    syntax is xcorr_bench's (xcsuite.benchjson.parse_case_line)."""
    try:
        parsed = parse_case_line(line)
        kv = dict(parsed.keys)
        ident = {"variant": kv.pop("variant"), "form": kv.pop("form"), **{k: int(kv.pop(k)) for k in DIM_KEYS}}
        shifts = Shape(ident["form"], *(ident[k] for k in DIM_KEYS), window=parsed.window).shifts_text
    except (KeyError, ValueError, UsageError) as e:
        raise FormatError(f"not a case line: {line!r} ({e})") from e
    if shifts:
        ident["shifts"] = shifts
    ident["params"] = dict(sorted(kv.items()))
    return ident


def line_of(rec: dict) -> str:
    """The xcorr_bench case line of a record (the inverse of identity_from_line)."""
    return case_line(rec["variant"], rec["form"], [rec[k] for k in DIM_KEYS], window_of(rec), rec["params"])


def dims_of(rec: dict) -> tuple:
    return (rec["form"],) + tuple(rec[k] for k in DIM_KEYS)


def window_of(rec: dict) -> str:
    """The record's window as a Shape takes it: 'full', or 'shifts=DY0:DY1,DX0:DX1'."""
    return f"shifts={rec['shifts']}" if rec.get("shifts") else "full"


def key_of(rec: dict) -> str:
    return case_key(rec["variant"], dims_of(rec), rec["params"], rec["cold"], rec.get("shifts", ""))


STATUSES = ("ok", "failed", "rejected")  # the runner's verdicts (run_experiments: record)


def _positive(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 and math.isfinite(v)


def problem_of(rec: dict) -> str | None:
    """Why a case record holds values no measurement gives (a size or count below 1, an unknown
    status, a repetition's time or iterations not positive), or None. The readers took them as they
    were: a real_time of -1 became a mean time of -1 us in summary.csv, a status "weird" a failed
    case. Entries flagged error_occurred carry no time and are not checked."""
    for k in DIM_KEYS:
        if not (_positive(rec.get(k)) and isinstance(rec.get(k), int)):
            return f"{k} {rec.get(k)!r} is not a whole number of at least 1"
    if rec.get("status") not in STATUSES:
        return f"status {rec.get('status')!r} is not one of {', '.join(STATUSES)}"
    n = rec.get("n_reps", 0)
    if not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
        return f"n_reps {n!r} is not a count"
    same, reps = rec.get("same", {}), rec.get("reps", {})
    if not (isinstance(same, dict) and isinstance(reps, dict)):
        return "same or reps is no object"
    if any(not isinstance(v, list) or len(v) != n for v in reps.values()):
        return f"a field of reps does not hold n_reps ({n}) values"

    def each(field):
        return reps[field] if field in reps else [same.get(field)] * n

    errors = each("error_occurred")
    for field in ("real_time", "iterations"):
        for i, (v, err) in enumerate(zip(each(field), errors)):
            if not err and not _positive(v):
                return f"repetition {i}'s {field} {v!r} is not positive"
    return None


# ---- entries <-> record --------------------------------------------------------------------

def _derived(rec: dict, key: str, i: int, entry: dict) -> dict:
    """What entry i of a case carries that the case determines. Google Benchmark drops the
    counters of an errored entry, so those carry only the names."""
    d = {"name": entry.get("run_name"), "run_type": "iteration", "repetition_index": i, "xcorr_case": key}
    if not entry.get("error_occurred"):
        d.update({k: float(rec[k]) for k in DIM_KEYS}, cold=float(rec["cold"]))
        if rec.get("shifts"):  # a windowed case's counters dy0 dy1 dx0 dx1
            d.update(zip(SHIFT_KEYS, (float(v) for v in _shift_values(rec["shifts"]))))
    return d


SHIFT_KEYS = ("dy0", "dy1", "dx0", "dx1")


def _shift_values(text: str) -> list[int]:
    dy, dx = text.split(",")
    return [int(v) for part in (dy, dx) for v in part.split(":")]


def _same_json(a, b) -> bool:
    # exact: 16 and 16.0 differ, as they do in the file
    ta, tb = type(a), type(b)
    if ta is tb and (ta is str or ta is int or (ta is float and a == b and a != 0)):
        return a == b  # the same text exactly when equal (the runner asks ~100 times a case)
    if {ta, tb} == {int, float}:
        return False  # "16" is never "16.0" (a float's text has a point, an exponent, or is Infinity, NaN)
    return json.dumps(a) == json.dumps(b)


TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
RATE_TOLERANCE = 1e-9  # a derived rate's relative difference from the one the benchmark wrote


def _flops(e: dict) -> float | None:
    """The FLOPS counter as the entry's fmas and time per call give it (xcorr_bench and peerbench
    report 2 fmas per call over the mean time per call), or None where the entry lacks them."""
    try:
        t = float(e["real_time"]) * TIME_UNITS[e["time_unit"]]
        return 2.0 * float(e["fmas"]) / t if t > 0 else None
    except (KeyError, TypeError, ValueError):
        return None


def _flops_derivable(entries: list[dict]) -> bool:
    """Whether every entry's FLOPS is its fmas over its time (within RATE_TOLERANCE)."""
    def ok(e):
        f = _flops(e)
        return (f is not None and isinstance(e.get("FLOPS"), (int, float))
                and math.isclose(e["FLOPS"], f, rel_tol=RATE_TOLERANCE))
    return bool(entries) and all(ok(e) for e in entries)


def entries_of(rec: dict) -> list[dict]:
    """The Google Benchmark "iteration" entries of a record, as xcorr_bench wrote them (plus
    xcorr_case, the runner's tag); a FLOPS the record derives (its "derived") recomputed."""
    key = key_of(rec)
    same, reps = rec.get("same", {}), rec.get("reps", {})
    flops = "FLOPS" in rec.get("derived", ())
    out = []
    for i in range(rec.get("n_reps", 0)):
        e = dict(same)
        e.update({k: v[i] for k, v in reps.items() if v[i] is not None})
        if flops:
            e["FLOPS"] = _flops(e)
        out.append({**_derived(rec, key, i, e), **e})
    return out


def _rebuilt(a: dict, b: dict, rate_derived: bool) -> bool:
    """Entry a (rebuilt) is entry b (written): the same JSON, but for a derived FLOPS, which may
    differ from the benchmark's in its last bits."""
    if rate_derived:
        if not math.isclose(a.get("FLOPS", math.nan), b.get("FLOPS", math.nan), rel_tol=RATE_TOLERANCE):
            return False
        a, b = ({k: v for k, v in e.items() if k != "FLOPS"} for e in (a, b))
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _strip(entry: dict, derived: dict) -> dict:
    return {k: v for k, v in entry.items() if not (k in derived and _same_json(v, derived[k]))}


def encode(identity: dict, cold: bool, info: dict, entries: list[dict]) -> dict:
    """A record from the case's identity (identity_from_line), its cold flag, its status fields
    (status, message, time, revision, ...) and its iteration entries, in repetition order.
    Raises FormatError if the entries cannot be rebuilt exactly from the record (a FLOPS counter
    that is the entries' fmas over their time is not stored: "derived", rebuilt to 1e-9)."""
    rec = {**identity, "cold": bool(cold), **info, "n_reps": len(entries)}
    key = key_of(rec)
    stripped = [_strip(e, _derived(rec, key, i, e)) for i, e in enumerate(entries)]
    rate_derived = _flops_derivable(entries)
    if rate_derived:  # a third of the stored numbers, and nothing a reader could not recompute
        rec["derived"] = ["FLOPS"]
        stripped = [{k: v for k, v in e.items() if k != "FLOPS"} for e in stripped]
    fields = list(dict.fromkeys(k for e in stripped for k in e))
    if fields:
        same = {k: stripped[0][k] for k in fields
                if all(k in e and _same_json(e[k], stripped[0][k]) for e in stripped)}
        rec["same"] = same
        reps = {k: [e.get(k) for e in stripped] for k in fields if k not in same}
        if reps:
            rec["reps"] = reps
    rebuilt = entries_of(rec)
    bad = [i for i, (a, b) in enumerate(zip(rebuilt, entries)) if not _rebuilt(a, {**b, "xcorr_case": key}, rate_derived)]
    if bad or any(v is None for e in entries for v in e.values()):
        raise FormatError(f"{key}: entry {bad[0] if bad else '?'} cannot be stored losslessly")
    return rec


IDENTITY_KEYS = ("variant", "form", *DIM_KEYS, "shifts", "params")
STORAGE_KEYS = ("cold", "n_reps", "same", "reps", "derived")


def reencode(rec: dict) -> dict:
    """A record as this version's encode writes it (a FLOPS counter stored by an earlier one is
    derived now): the same entries, checked as encode checks them."""
    identity = {k: rec[k] for k in IDENTITY_KEYS if k in rec}
    info = {k: v for k, v in rec.items() if k not in IDENTITY_KEYS and k not in STORAGE_KEYS}
    entries = [{k: v for k, v in e.items() if k != "xcorr_case"} for e in entries_of(rec)]
    return encode(identity, rec["cold"], info, entries)


# ---- the figure plan: the experiment as the runner expanded it ----------------------------

@dataclass(frozen=True)
class Member:
    """One point of an experiment's figure: the cases measured for a series at one shape (more
    than one where the series tunes parameters; the figure takes the fastest)."""

    panel: str  # the series' panel ("" where the figure has one per shape panel only)
    series: str  # the series' label
    group: str  # baseline | paper | new | fft | peer
    shape: Shape
    keys: tuple  # case keys


def encode_members(members) -> list[dict]:
    """The "members" of a results file from the runner's expansion (xcsuite.spec.Member)."""
    return [{"panel": m.panel, "series": m.series.label, "group": m.group,
             "shape": {"form": m.shape.form, **{k: getattr(m.shape, k) for k in DIM_KEYS}, "group": m.shape.group,
                       **({"window": m.shape.window} if m.shape.window != "full" else {}),
                       **({"normalize": m.shape.normalize} if m.shape.normalize != "none" else {})},
             "keys": list(m.keys)} for m in members]


def decode_members(stored: list[dict]) -> list[Member]:
    return [Member(m["panel"], m["series"], m["group"], Shape(**m["shape"]), tuple(m["keys"])) for m in stored]


# ---- files ---------------------------------------------------------------------------------

def new_file() -> dict:
    return {"format": FORMAT, "context": {}, "xcorr_meta": {}, "cases": {}}


def from_google_merged(data: dict) -> dict:
    """Converts a results file of format 1 (the merged Google Benchmark entries of every chunk in
    "benchmarks", the cases' status in "cases") to format 2. Aggregate entries (Google's mean,
    median, stddev and cv of the repetitions) are dropped: they are computed from the
    repetitions kept, and the suite computes its own statistics (IQR rule)."""
    by_case: dict[str, list] = {}
    for e in data.get("benchmarks", []):
        if e.get("run_type", "iteration") == "iteration":
            by_case.setdefault(e["xcorr_case"], []).append(e)
    out = {"format": FORMAT, "context": data.get("context", {}), "xcorr_meta": data.get("xcorr_meta", {}),
           "cases": {}}
    statuses = data.get("cases", {})
    unknown = [k for k in by_case if k not in statuses]
    if unknown:
        raise FormatError(f"entries of {len(unknown)} case(s) without a status, e.g. {unknown[0]!r}")
    # In measurement order, as format 2 keeps them (format 1 moved a re-measured case's entries
    # to the end); cases that never produced an entry last, as the aggregate command listed them.
    for key in list(by_case) + [k for k in statuses if k not in by_case]:
        info = dict(statuses[key])
        ident = identity_from_line(info.pop("line"))
        cold = info.pop("cold")
        entries = [{k: v for k, v in e.items() if k != "xcorr_case"} for e in by_case.get(key, [])]
        rec = encode(ident, cold, info, entries)
        if key_of(rec) != key:
            raise FormatError(f"case {key!r} has the line of {key_of(rec)!r}")
        out["cases"][key] = rec
    return out


def dumps(data: dict) -> str:
    """Readable and compact: the provenance indented, then one figure member and one case per line."""
    parts = [f" {json.dumps(k)}: " + json.dumps(v, indent=1).replace("\n", "\n ") for k, v in data.items()
             if k not in ("members", "cases")]
    if "members" in data:
        lines = ",\n".join(f"  {json.dumps(m)}" for m in data["members"])
        parts.append(' "members": ' + ("[\n" + lines + "\n ]" if lines else "[]"))
    if "cases" in data:
        lines = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in data["cases"].items())
        parts.append(' "cases": ' + ("{\n" + lines + "\n }" if lines else "{}"))
    return "{\n" + ",\n".join(parts) + "\n}\n"


def write_atomic(path: Path, data: dict) -> None:
    """Replaces `path` with `data` at once: a reader (or a kill) sees the old file or the new one."""
    paths.write_text_atomic(path, dumps(data))
