"""The results file format 2 (xcsuite/resultfile.py, docs/result-files.md): the conversion
from format 1 keeps every repetition's time and counters float-exact, and the committed results
are format 2 and consistent with their case keys."""
import json
import os
import statistics
import subprocess
import sys

import pytest
from in_process import in_process
from suite_helpers import FIXTURES, ROOT

from xcsuite import resultfile as rf
from xcsuite.benchjson import entry_key, parse_run_name
from xcsuite.results import ResultsError, load_results

# a real committed file of format 1 (results/nvidia-h200/nmn.json at c54fa93, four of its cases:
# fft with finish_time, fft-fused, tensor-wgmma, multi-matrix-right) and the synthetic one with
# an errored case, a rejected case without entries and integer counters
FORMAT1 = [FIXTURES / "h200_nmn_excerpt_format1.json", FIXTURES / "merged_fig17.json"]


def iterations(old: dict) -> dict:
    by = {}
    for e in old["benchmarks"]:
        if e["run_type"] == "iteration":
            by.setdefault(e["xcorr_case"], []).append(e)
    return by


@pytest.mark.parametrize("path", FORMAT1, ids=lambda p: p.stem)
def test_conversion_keeps_every_repetition_exactly(path):
    old = json.loads(path.read_text())
    new = json.loads(rf.dumps(rf.from_google_merged(old)))  # through the file's text, as a reader gets it
    assert new["format"] == rf.FORMAT and new["context"] == old["context"] and new["xcorr_meta"] == old["xcorr_meta"]
    assert set(new["cases"]) == set(old["cases"])
    for key, entries in iterations(old).items():
        rebuilt = rf.entries_of(new["cases"][key])
        assert len(rebuilt) == len(entries)
        for a, b in zip(rebuilt, entries):
            assert set(a) == set(b)
            for field, value in b.items():  # every time and counter, the same float (and int stays int)
                if field == "FLOPS" and "FLOPS" in new["cases"][key].get("derived", ()):
                    assert a[field] == pytest.approx(value, rel=rf.RATE_TOLERANCE), key  # fmas over time
                    continue
                assert a[field] == value and type(a[field]) is type(value), (key, field)
    for key, info in old["cases"].items():
        rec = new["cases"][key]
        assert rf.line_of(rec) == info["line"] and rec["cold"] == info["cold"]
        assert {k: rec.get(k) for k in info if k not in ("line", "cold")} == {k: v for k, v in info.items()
                                                                             if k not in ("line", "cold")}


def test_the_aggregates_dropped_are_recomputed_from_the_repetitions():
    old = json.loads(FORMAT1[0].read_text())
    new = rf.from_google_merged(old)
    means = [e for e in old["benchmarks"] if e.get("aggregate_name") == "mean"]
    assert means
    for m in means:
        reps = [e["real_time"] for e in rf.entries_of(new["cases"][m["xcorr_case"]])]
        assert statistics.fmean(reps) == pytest.approx(m["real_time"], rel=1e-12)


def test_a_real_file_shrinks_and_stays_readable_json():
    text = FORMAT1[0].read_text()
    converted = rf.dumps(rf.from_google_merged(json.loads(text)))
    cases = json.loads(text)["cases"]
    body = converted[converted.index('"cases"'):]
    assert len(body.splitlines()) == len(cases) + 3  # one line per case, the braces
    old_body = text[text.index('"cases"'):]
    assert len(body) * 5 < len(old_body)


def test_what_cannot_be_rebuilt_is_refused():
    ident = rf.identity_from_line("variant=fft form=one-to-one hL=4 wL=4 hR=2 wR=2 nL=1 nR=1")
    name = "fft/one-to-one/hL:4/wL:4/hR:2/wR:2/nL:1/nR:1/manual_time"
    entry = {"name": name, "run_name": name, "run_type": "iteration", "repetition_index": 0, "real_time": 1.5,
             **{k: float(ident[k]) for k in rf.DIM_KEYS}, "cold": 0.0}
    rec = rf.encode(ident, False, {"status": "ok"}, [entry])
    assert rec["same"] == {"run_name": name, "real_time": 1.5}  # the rest is derived
    assert rf.entries_of(rec) == [{**entry, "xcorr_case": rf.key_of(rec)}]
    assert rf.encode(ident, False, {}, [{**entry, "hL": 5.0}])["same"]["hL"] == 5.0  # not derivable: kept
    lacking = dict(entry)
    del lacking["name"]
    with pytest.raises(rf.FormatError):  # rebuilding would invent a name
        rf.encode(ident, False, {"status": "ok"}, [lacking])
    with pytest.raises(rf.FormatError):  # null is how the format says "absent"
        rf.encode(ident, False, {"status": "ok"}, [{**entry, "batch": None}])


def test_a_file_of_an_unknown_format_is_one_clear_error(tmp_path):
    f = tmp_path / "fig22.json"
    f.write_text('{"format": "xcsuite-results/9", "cases": {}, "xcorr_meta": {}}')
    with pytest.raises(ResultsError, match="format 'xcsuite-results/9'"):
        load_results(f)


def damage(case: dict, how: str) -> None:
    """One case of a committed file made impossible, as an edit or a bad merge would."""
    if how == "time":  # every repetition's time per call -1 (aggregate gave a mean of -1 us)
        case["reps"]["real_time"] = [-1] * case["n_reps"]
    elif how == "iterations":
        case.setdefault("same", {})["iterations"] = 0
        case.get("reps", {}).pop("iterations", None)
    elif how == "size":
        case["hL"] = -16
    elif how == "count":
        case["nR"] = 0
    else:  # a status no runner writes (aggregate took it for failed)
        case["status"] = "weird"


HOWS = {"time": "real_time -1 is not positive", "iterations": "iterations 0 is not positive",
        "size": "hL -16 is not a whole number", "count": "nR 0 is not a whole number",
        "status": "status 'weird' is not one of ok, failed, rejected"}


@pytest.mark.parametrize("how", HOWS)
def test_a_case_no_measurement_gives_is_refused(tmp_path, how):
    """Values inside a results file were taken as they were: aggregate and table wrote a time of -1
    us, a size of -16 and a status "weird" into summary.csv and the tables, exit 0. The loader now
    refuses the file with one error naming it and the case."""
    data = json.loads((ROOT / "results" / "nvidia-h200" / "fig17.json").read_text())
    key, case = next((k, c) for k, c in data["cases"].items() if c["status"] == "ok" and "real_time" in c["reps"])
    damage(case, how)
    gpu = tmp_path / "nvidia-h200"
    gpu.mkdir()
    rf.write_atomic(gpu / "fig17.json", data)
    with pytest.raises(ResultsError) as e:
        load_results(gpu / "fig17.json")
    assert f"fig17.json: case {key}: " in str(e.value) and HOWS[how] in str(e.value), e.value
    env = {"XCORR_PLOTS": str(tmp_path / "plots")}
    for tool in ("aggregate", "table"):
        if how == "time":  # once as a user runs it: a process of its own
            r = subprocess.run([sys.executable, "-m", "xcsuite", tool, str(gpu)], capture_output=True,
                               text=True, cwd=ROOT, timeout=300, env={**os.environ, **env})
        else:  # the other damages in this interpreter, through the same dispatch
            r = in_process(tool, gpu, env=env)
        assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"{tool}: {e.value}"], (r.returncode, r.stderr)
    assert [p.name for p in gpu.iterdir()] == ["fig17.json"]  # no summary.csv, no table written


def test_convert_results_rewrites_in_place_and_only_once(tmp_path):
    f = tmp_path / "nmn.json"
    f.write_text(FORMAT1[0].read_text())
    expected = rf.dumps(rf.from_google_merged(json.loads(f.read_text())))
    cmd = [sys.executable, "-m", "xcsuite", "convert-results", str(f)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert f.read_text() == expected
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0 and "already" in r.stdout and f.read_text() == expected
    (tmp_path / "bad.json").write_text("[1]")
    r = subprocess.run(cmd[:-1] + [str(tmp_path / "bad.json")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_committed_results_are_format_2_and_match_their_keys():
    files = sorted((ROOT / "results").glob("*/*.json"))
    assert files
    for f in files:
        data = json.loads(f.read_text())
        assert data["format"] == rf.FORMAT, f
        for key, rec in data["cases"].items():
            assert rf.key_of(rec) == key
            assert rf.problem_of(rec) is None, (f, key, rf.problem_of(rec))
            # a record's repetitions share their run name: each distinct name (and cold flag, all
            # that entry_key reads) parsed once
            for name, cold in {(e["run_name"], e.get("cold", rec["cold"])) for e in rf.entries_of(rec)}:
                e = {"run_name": name, "cold": cold}
                assert entry_key(e, rec["cold"]) == key and parse_run_name(name)[0] == rec["variant"], (f, key, name)


def test_flops_is_derived_only_where_it_is_fmas_over_the_time():
    """The FLOPS counter (2 fmas per call over the time per call, a third of the stored numbers) is
    not stored where every repetition's FLOPS is that; a FLOPS that is not (a counter of another
    meaning, a time of zero) is stored as written."""
    ident = rf.identity_from_line("variant=fft form=one-to-one hL=8 wL=8 hR=8 wR=8 nL=1 nR=1")
    key = rf.key_of({**ident, "cold": False})

    def entry(t, flops):  # as xcorr_bench writes one (the repetition index set below)
        return {"name": "x", "run_name": "x", "run_type": "iteration", "iterations": 10, "time_unit": "us",
                "real_time": t, "cpu_time": 1.0, "fmas": 4096.0, "FLOPS": flops,
                **{k: float(ident[k]) for k in rf.DIM_KEYS}, "cold": 0.0}

    def numbered(entries):
        return [{**e, "repetition_index": i} for i, e in enumerate(entries)]
    times = [1.5, 1.7, 2.25]
    exact = numbered([entry(t, 2 * 4096.0 / (t * 1e-6) * (1 + 1e-13)) for t in times])  # Google's rounding
    rec = rf.encode(ident, False, {"status": "ok"}, exact)
    assert rec["derived"] == ["FLOPS"] and "FLOPS" not in rec.get("reps", {}) and "FLOPS" not in rec["same"]
    for a, b in zip(rf.entries_of(rec), exact):
        assert a["FLOPS"] == pytest.approx(b["FLOPS"], rel=1e-12) and a["real_time"] == b["real_time"]
    assert rf.reencode(json.loads(json.dumps(rec))) == rec  # written again: the same record
    for other in (numbered([entry(t, 1.0) for t in times]),
                  numbered([entry(0.0, 0.0)] + [entry(t, 2 * 4096.0 / (t * 1e-6)) for t in times])):
        rec = rf.encode(ident, False, {"status": "ok"}, other)
        assert "derived" not in rec and [e["FLOPS"] for e in rf.entries_of(rec)] == [e["FLOPS"] for e in other]
    assert all(e["xcorr_case"] == key for e in rf.entries_of(rec))
    stored = rf.encode(ident, False, {"status": "ok"}, numbered([entry(t, 1.0) for t in times]))
    stored["reps"]["FLOPS"] = [2 * 4096.0 / (t * 1e-6) for t in times]  # as an earlier version wrote it
    again = rf.reencode(stored)
    assert again["derived"] == ["FLOPS"] and "FLOPS" not in again["reps"]


def test_convert_results_rewrites_a_format2_file_only_where_it_stores_flops(tmp_path):
    """python -m xcsuite convert-results on a format-2 file whose records store FLOPS (an earlier writer):
    rewritten with FLOPS derived, every entry the same; a second run, and a file written by this
    version, are left as they are (a field order is no reason to rewrite)."""
    new = rf.from_google_merged(json.loads(FORMAT1[0].read_text()))
    derived = [k for k, rec in new["cases"].items() if "FLOPS" in rec.get("derived", ())]
    assert derived
    old = json.loads(json.dumps(new))
    for k in derived:  # as the writer before `derived` stored them
        rec = old["cases"][k]
        flops = [e["FLOPS"] for e in rf.entries_of(rec)]
        del rec["derived"]
        rec.setdefault("reps", {})["FLOPS"] = flops
    f = tmp_path / "old.json"
    f.write_text(rf.dumps(old))
    convert = [sys.executable, "-m", "xcsuite", "convert-results", str(f)]
    before = f.stat().st_size
    r = subprocess.run(convert, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    got = json.loads(f.read_text())
    assert f.stat().st_size < before and all("FLOPS" in got["cases"][k]["derived"] for k in derived)
    for k, rec in old["cases"].items():
        for a, b in zip(rf.entries_of(got["cases"][k]), rf.entries_of(rec)):
            assert a.keys() == b.keys() and a["real_time"] == b["real_time"]
            assert a.get("FLOPS") == pytest.approx(b.get("FLOPS"), rel=rf.RATE_TOLERANCE)
    text = f.read_text()
    r = subprocess.run(convert, capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and "already" in r.stdout and f.read_text() == text
