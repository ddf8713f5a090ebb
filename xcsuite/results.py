"""Reading the merged results files (results/<gpu>/<experiment>.json) that python -m xcsuite
run-experiments writes: one loader that turns a damaged file into a clear error, and each experiment's state
(complete or stopped part-way) for the pages and figures that show its numbers."""
from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from xcsuite.spec import expand, within_cap
from xcsuite import paths, resultfile


class ResultsError(Exception):
    """A results file that cannot be read; the message names it and says what to do."""


def load_results(path: Path) -> dict:
    """A results file in format 2 (xcsuite/resultfile.py); a file of format 1 (merged Google
    Benchmark entries) is converted in memory, and the runner writes it back in format 2."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        why = f"not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})"
    except UnicodeDecodeError:
        why = "not valid JSON (not UTF-8 text)"
    else:
        why = _check(data)
        if why is None and "benchmarks" in data:
            try:
                data = resultfile.from_google_merged(data)
            except (resultfile.FormatError, KeyError, TypeError, ValueError) as e:
                why = f"a format-1 file that cannot be converted ({e})"
        if why is None:
            why = _check_cases(data)
        if why is None:
            return data
    bak = path.with_suffix(".json.bak")
    keep = f"restore it from {bak.name} (the copy --force kept)" if bak.exists() else "restore it from git"
    raise ResultsError(f"{path}: {why}; {keep}, or move it aside and rerun python -m xcsuite run-experiments "
                       f"{path.stem} --force to measure the experiment afresh")


def _check(data) -> str | None:
    """Why `data` is not a results file, or None."""
    if not (isinstance(data, dict) and isinstance(data.get("cases"), dict)
            and isinstance(data.get("xcorr_meta", {}), dict)):
        return "not a results file (no cases and xcorr_meta objects)"
    if "benchmarks" in data:
        return None if isinstance(data["benchmarks"], list) else "not a results file (benchmarks is no list)"
    if data.get("format") != resultfile.FORMAT:
        return f"format {data.get('format')!r}, not {resultfile.FORMAT!r}"
    if not all(isinstance(r, dict) for r in data["cases"].values()):
        return "not a results file (a case is no object)"
    if not isinstance(data.get("members", []), list):
        return "not a results file (members is no list)"
    return None


def _check_cases(data: dict) -> str | None:
    """Why a case of `data` (format 2) cannot be a measurement (resultfile.problem_of), naming its key."""
    for key, rec in data["cases"].items():
        why = resultfile.problem_of(rec)
        if why:
            return f"case {key}: {why}"
    return None


@dataclass(frozen=True)
class Progress:
    experiment: str
    complete: bool
    recorded: int  # cases with a result (measured, failed or rejected)
    planned: int | None  # cases the experiment has (None: unknown)
    updated: str | None  # last write of the file (ISO 8601, UTC)

    def note(self) -> str:
        """'' for a complete experiment, else 'incomplete: 12 of 105 cases', or, where every case
        has a result but the last run stopped before its end (a --remeasure cut short), 'incomplete:
        its last run stopped (105 of 105 cases recorded)'."""
        if self.complete:
            return ""
        if self.planned is not None and self.recorded >= self.planned:
            return f"incomplete: its last run stopped ({self.recorded} of {self.planned} cases recorded)"
        return f"incomplete: {self.recorded} of {self.planned if self.planned is not None else '?'} cases"


def _expected_keys(meta: dict) -> set | None:
    """The case keys of the experiment as it is defined now, expanded with the registry the file
    carries (the variants and peers of the GPU that ran it) and its cap; None where that cannot be
    done (an unknown experiment, no registry)."""
    try:
        import experiments as suite

        ex = expand(suite.load(meta["experiment"]), meta["registry"])
        return {c.key for c in within_cap(ex.cases, meta.get("max_fmas"))}
    except Exception:  # noqa: BLE001  (the count stays unknown)
        return None


def _planned(meta: dict, expected: set | None) -> int | None:
    """Cases of the experiment: as the runner recorded them, else from its definition and the
    registry the file carries (files written before the runner recorded the count)."""
    if isinstance(meta.get("cases_planned"), int):
        return meta["cases_planned"]
    return len(expected) if expected is not None else None


@functools.lru_cache(maxsize=64)
def _progress(path: str, mtime_ns: int, size: int) -> Progress:
    return progress_of_data(load_results(Path(path)), Path(path).stem)


def progress_of_data(data: dict, stem: str) -> Progress:
    """Progress of a loaded results file (`stem`: its name, for a file without an experiment)."""
    meta = data.get("xcorr_meta", {})
    cases = data.get("cases", {})
    expected = _expected_keys(meta)
    planned, complete = _planned(meta, expected), bool(meta.get("complete"))
    # A series added to the definition after the run finished (fig17's torch-fft):
    # the runner's "complete" and count describe the old definition, the cases it lacks are pending.
    missing = len(expected - set(cases)) if expected is not None else 0
    if missing:
        complete = False
        planned = max(planned or 0, len(cases) + missing)
    return Progress(meta.get("experiment", stem), complete, len(cases), planned, meta.get("updated"))


def progress(gpu_dir: Path, names=None) -> dict[str, Progress]:
    """Progress of every experiment with a results file in gpu_dir (or of those in `names`)."""
    out = {}
    for f in sorted(Path(gpu_dir).glob("*.json")):
        if names is not None and f.stem not in names:
            continue
        out[f.stem] = progress_of(f)
    return out


def progress_of(path: Path) -> Progress:
    """Progress of one results file (see progress)."""
    st = Path(path).stat()
    return _progress(str(path), st.st_mtime_ns, st.st_size)


def incomplete_notes(gpu_dir: Path, names=None) -> list[str]:
    """'fig17 (incomplete: 12 of 105 cases)' for each stopped experiment."""
    return [f"{n} ({p.note()})" for n, p in progress(gpu_dir, names).items() if p.note()]


def results_date(gpu_dir: Path, names=None) -> str | None:
    """The day of the latest write of any results file: a date for generated pages that changes
    only when the results do (regenerating leaves them byte-identical)."""
    days = [p.updated[:10] for p in progress(gpu_dir, names).values() if p.updated]
    return max(days) if days else None


def exit_2_on_bad_results(tool: str):
    """Decorates a script's main(): a damaged results file, or a named folder that holds no
    results (paths.selected_dirs), ends it with one line on stderr and exit status 2, not a
    traceback."""
    def wrap(main):
        @functools.wraps(main)
        def run(*args, **kw):
            try:
                return main(*args, **kw)
            except (ResultsError, paths.NotAResultsFolder) as e:
                print(f"{tool}: {e}", file=sys.stderr)
                return 2
        return run
    return wrap
