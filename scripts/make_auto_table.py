#!/usr/bin/env python3
"""The tables of "auto" (harness/auto.cpp): from every results/<gpu>/summary.csv, a compact table of
the measured problems and their variants (harness/auto_tables/<gpu>.tsv, committed, readable in a
diff) and the C++ source compiled into the library (harness/auto_table.cpp, generated from the
.tsv files), with the cost model fitted on all of them.

    scripts/make_auto_table.py            regenerate both
    scripts/make_auto_table.py --check    exit 1 when the committed files differ from a regeneration

The generated source is committed (and tests/test_plan.py checks it is up to date) rather than made
by a meson custom_target: building the C++ library then needs no Python, and a change of the
tables shows in review.
"""
from __future__ import annotations

import argparse
import csv
import math
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORMS = {"one-to-one": 0, "one-to-many": 1, "n-to-mn": 2, "n-to-m": 3}
# Never candidates of auto (auto.cpp): fft+plan times plan creation, which a plan does once.
NOT_CANDIDATES = {"fft+plan"}
TSV_HEADER = ["form", "hL", "wL", "hR", "wR", "nL", "nR", "dy0", "dy1", "dx0", "dx1", "normalize", "variant", "params",
              "time_us"]
NORMALIZE = {"none": 0, "zncc": 1, "zero-lag": 2}  # xcorr::Normalize


def registered_variants() -> dict[str, str]:
    """name -> family of every variant in algorithms/*.cu (peers such as torch-fft are not ours)."""
    out = {}
    for f in sorted((ROOT / "algorithms").glob("*.cu")):
        text = f.read_text()
        for m in re.finditer(r'\.name\s*=\s*"([^"]+)",\s*\.family\s*=\s*"([^"]+)"', text):
            out[m.group(1)] = m.group(2)
    return out


def work_tiles() -> dict[str, tuple[int, int]]:
    """name -> (dy, dx) of every variant that declares a work tile (registry.hpp: Variant::work_tile,
    a literal `.work_tile = {dy, dx}` in its registration); the others compute their window's
    shifts exactly, (1, 1)."""
    out = {}
    for f in sorted((ROOT / "algorithms").glob("*.cu")):
        text = f.read_text()
        for reg in re.finditer(r"XCORR_REGISTER_VARIANT\(Variant\{(.*?)\n\}\);", text, re.S):
            name = re.search(r'\.name\s*=\s*"([^"]+)"', reg.group(1))
            tile = re.search(r"\.work_tile\s*=\s*\{\s*(\d+)\s*,\s*(\d+)\s*\}", reg.group(1))
            if name and tile:
                out[name.group(1)] = (int(tile.group(1)), int(tile.group(2)))
    return out


def gpu_slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return s or "unknown-gpu"


def full_window(hL, wL, hR, wR):
    return (-(hR - 1), hL - 1, -(wR - 1), wL - 1)


def parse_shifts(text: str, hL, wL, hR, wR):
    if not text:
        return full_window(hL, wL, hR, wR)
    ys, xs = text.split(",")  # "DY0:DY1,DX0:DX1"
    (y0, y1), (x0, x1) = ys.split(":"), xs.split(":")
    return (int(y0), int(y1), int(x0), int(x1))


def shifts_of(row: dict) -> str:
    """A summary.csv row's window, "DY0:DY1,DX0:DX1", or "" for the full output, which is also what a
    summary.csv without the shifts column holds (written before windows existed, or by hand)."""
    return row.get("shifts") or ""


def split_normalize(params: str) -> tuple[str, str]:
    """A summary row's parameters "normalize=zncc,rows=4" -> ("zncc", "rows=4"): the normalization
    ("none" without one) and the variant's own parameters."""
    kvs = [kv for kv in params.split(",") if kv]
    norm = next((kv.split("=", 1)[1] for kv in kvs if kv.startswith("normalize=")), "none")
    return norm, ",".join(kv for kv in kvs if not kv.startswith("normalize="))


def read_summary(path: Path, ours: dict) -> tuple[str, dict]:
    """gpu_name, {problem: {variant: (time_us, params)}}: per problem the fastest parameters of each
    variant, time = run + finish (what Plan::execute costs)."""
    problems: dict = defaultdict(dict)
    gpu_name = ""
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            # A normalized row is a problem of its own (the normalize column): it times the normalization
            # around the variant, on cropped inputs, so it can beat the same variant's raw row, and it is
            # not that problem's raw time. Its parameters are the variant's, without normalize=.
            if r["status"] != "ok" or r["variant"] not in ours or r.get("cold", "False") == "True":
                continue
            norm, params = split_normalize(r["params"])
            gpu_name = gpu_name or r["gpu_name"]
            hL, wL, hR, wR = (int(r[k]) for k in ("hL", "wL", "hR", "wR"))
            key = (FORMS[r["form"]], hL, wL, hR, wR, int(r["nL"]), int(r["nR"])) \
                + parse_shifts(shifts_of(r), hL, wL, hR, wR) + (NORMALIZE[norm],)
            t = float(r["time_us"]) + (float(r["finish_time_us"]) if r.get("finish_time_us") else 0.0)
            best = problems[key].get(r["variant"])
            if best is None or t < best[0]:
                problems[key][r["variant"]] = (t, params)
    return gpu_name, problems


def write_tsv(path: Path, gpu_name: str, problems: dict) -> str:
    lines = [f"# {gpu_name}: fastest parameters of every measured variant per problem (ok rows of summary.csv, "
             "time = run + finish in us), fastest first. Generated by scripts/make_auto_table.py.",
             "\t".join(TSV_HEADER)]
    for key in sorted(problems):
        for v, (t, params) in sorted(problems[key].items(), key=lambda kv: (kv[1][0], kv[0])):
            lines.append("\t".join(str(x) for x in key) + f"\t{v}\t{params}\t{t:.6g}")
    return "\n".join(lines) + "\n"


# --- the cost model (auto.cpp: work_units, model_us) ------------------------------------------

def fft_need(s0, s1, hl, hr):
    lo, hi = max(s0, -(hr - 1)), min(s1, hl - 1)
    if lo > hi:
        return 1
    l0 = max(0, lo)
    ln = min(hl, hi + hr) - l0
    r0 = max(0, -hi)
    rn = min(hr, hl - lo) - r0
    return max(l0 + ln - r0 - lo, hi + r0 + rn - l0)


def overlap_sum(s0, s1, m, n):
    """Sum over shifts s in [s0, s1] of the overlap length of i + s in [0, m), i in [0, n)."""
    tot = 0
    for s in range(s0, s1 + 1):
        b, e = max(0, -s), min(n, m - s)
        tot += max(0, e - b)
    return tot


def out_count(form, nL, nR):
    return nL * nR if form == FORMS["n-to-m"] else nR


def work_units(key, fft: bool, tile=(1, 1)) -> float:
    form, hL, wL, hR, wR, nL, nR, dy0, dy1, dx0, dx1 = key[:11]
    if not fft:
        # The window rounded up to whole work tiles from its first shift (auto.cpp: work_units).
        dy1 = dy0 + -(-(dy1 - dy0 + 1) // tile[0]) * tile[0] - 1
        dx1 = dx0 + -(-(dx1 - dx0 + 1) // tile[1]) * tile[1] - 1
        return max(1.0, float(out_count(form, nL, nR)) * overlap_sum(dy0, dy1, hL, hR) * overlap_sum(dx0, dx1, wL, wR))
    slot = fft_need(dy0, dy1, hL, hR) * fft_need(dx0, dx1, wL, wR)
    return float(nL + nR + out_count(form, nL, nR)) * slot


def fit(points, floor):
    """(floor_us, us_per_unit) of time = floor + units * cost over (units, time) points: the floor is
    the variant's fastest time on any problem (its launch floor), the cost the median of the excess
    per unit where the work shows."""
    excess = [(t - floor) / u for u, t in points if t > 2 * floor]
    if not excess:
        excess = [t / u for u, t in points]
        floor = 0.0
    return floor, statistics.median(excess)


def fit_floor(points):
    """fit() with the floor chosen among 0 and the points' times up to their lower quartile: the one whose
    model is closest to the points (mean |log(model / time)|: the median let fft-fused's n-to-m
    model take an 11.5 us floor once its few-rights cases at 256 got faster, far above its 5 us at
    16 x 16, and the cost model alone then sent small n-to-m to register-tiled, up to 4.6x slower:
    Table 1 97.9% -> 91.7% within 10%, three picks past 2x). For the fft family's per-form
    models, whose time is a chain of launches up to large sizes: a form's model scales one
    measured time to a neighbouring problem (auto.cpp), and fft-fused one-to-one takes 14-25 us
    from 128 x 128 to 512 x 512, where its fastest time anywhere (5.5 us at 16 x 16) as the floor
    scaled 256 x 256 to 512 x 512 by 3x instead of 1.4x (auto_report.md: leave-one-out on the
    window experiments 85.5% -> 95.1% within 10%; the cost model alone on them 78.9% -> 93.0%).
    Candidates up to the median instead took Table 1's small one-to-many cells from fft-fused
    (the cost model alone: 3 picks over 2x). The direct variants keep their fastest time: this
    fit moved their cost-model-alone picks to unmeasured kernels on small problems."""
    times = sorted(t for _, t in points)
    best = None
    for floor in [0.0] + times[: len(times) // 4 + 1]:
        f, cost = fit(points, floor)
        err = statistics.fmean(abs(math.log((f + u * cost) / t)) for u, t in points)
        if best is None or err < best[0]:
            best = (err, f, cost)
    return best[1], best[2]


def is_fft(name: str) -> bool:
    return name.startswith("fft")  # fft, fft-fused: their time follows the transform sizes


SIGNALS = -2  # the form code of a model of one-dimensional problems (hL == hR == 1), all forms (auto.cpp)


def is_signal(key) -> bool:
    return key[1] == 1 and key[3] == 1


def fit_models(tables: list, families: dict, tiles: dict | None = None) -> list:
    """Per variant: a model over all forms (-1) and one per form with at least 3 rows, fitted on every
    problem (as before signals had models of their own: fitted on the 2-D rows alone, the all-forms
    models picked worse on Table 1, 38 of 50 within 10% instead of 44); and one for signals (SIGNALS)
    fitted on the one-dimensional rows alone, whose costs the 2-D rows do not predict
    (register-tiled's 64 x 64 shift tiles keep one row of 64 busy on a signal: seed 004's case
    242 ms, where its 2-D rate predicted 1.3 ms), with the variant's floor (0 for a variant measured
    on signals only: its rows are all far above a launch)."""
    by_vf: dict = defaultdict(list)
    floor_2d: dict = {}  # per variant, its fastest time on a 2-D problem
    for _, problems in tables:
        for key, vs in problems.items():
            if key[11]:
                continue  # the cost model is the raw correlation's
            for v, (t, _) in vs.items():
                if v in NOT_CANDIDATES:
                    continue
                u = work_units(key, is_fft(v), (tiles or {}).get(v, (1, 1)))
                if is_signal(key):
                    by_vf[(v, SIGNALS)].append((u, t))
                else:
                    floor_2d[v] = min(t, floor_2d.get(v, t))
                by_vf[(v, key[0])].append((u, t))
                by_vf[(v, -1)].append((u, t))
    models = []
    for (v, form), pts in sorted(by_vf.items()):
        if form >= 0 and len(pts) < 3:
            continue
        if form >= 0 and is_fft(v):
            floor, cost = fit_floor(pts)
        else:
            floor = floor_2d.get(v, 0.0) if form == SIGNALS else min(t for _, t in by_vf[(v, -1)])
            floor, cost = fit(pts, floor)
        models.append((v, form, int(is_fft(v)), floor, cost, len(pts)))
    return models


def cpp_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_cpp(tables: list, models: list) -> str:
    out = ["// GENERATED by scripts/make_auto_table.py from harness/auto_tables/*.tsv: do not edit.",
           "// The measured tables and the cost model of \"auto\" (auto.hpp, auto.cpp).",
           '#include "xcorr/auto.hpp"', "", "namespace xcorr::autotab {", "namespace {"]
    table_entries = []
    for i, (key, (gpu_name, problems)) in enumerate(tables):
        rows, cases = [], []
        for pk in sorted(problems):
            ranked = sorted(problems[pk].items(), key=lambda kv: (kv[1][0], kv[0]))
            cases.append("    {" + ", ".join(str(x) for x in pk) + f", {len(rows)}, {len(ranked)}" + "},")
            for v, (t, params) in ranked:
                rows.append(f"    {{{cpp_string(v)}, {cpp_string(params)}, {t:.6g}}},")
        out += [f"// {gpu_name}", f"const Row rows_{i}[] = {{"] + rows + ["};", f"const Case cases_{i}[] = {{"] + cases + ["};"]
        table_entries.append(f"    {{{cpp_string(key)}, {cpp_string(gpu_name)}, cases_{i}, {len(cases)}, rows_{i}}},")
    out += ["}  // namespace", ""]
    out += ["const Table kTables[] = {"] + (table_entries or ['    {"", "", nullptr, 0, nullptr},']) + ["};"]
    out += [f"const int kNumTables = {len(table_entries)};", ""]
    out += ["// variant, form (-1: all), fft family, floor us, us per unit, rows fitted on"]
    out += ["const Model kModels[] = {"]
    out += [f"    {{{cpp_string(v)}, {form}, {fft}, {floor:.6g}, {cost:.6g}, {n}}}," for v, form, fft, floor, cost, n in models]
    if not models:
        out.append('    {"", -1, 0, 0, 0, 0},')
    out += ["};", f"const int kNumModels = {len(models)};", "", "}  // namespace xcorr::autotab", ""]
    return "\n".join(out)


def generate(results: Path, tsv_dir: Path) -> dict[Path, str]:
    """Every file this script writes, path -> text."""
    ours = registered_variants()
    files = {}
    tables = []
    for summary in sorted(results.glob("*/summary.csv")):
        if summary.parent.name.endswith("-quick"):
            continue  # quick runs are smoke tests, not measurements
        gpu_name, problems = read_summary(summary, ours)
        if not problems:
            continue
        tsv = tsv_dir / f"{summary.parent.name}.tsv"
        files[tsv] = write_tsv(tsv, gpu_name, problems)
        tables.append((summary.parent.name, (gpu_name, problems)))
    # The C++ source is made from the .tsv text (what is committed), parsed back.
    parsed = []
    for key, _ in tables:
        gpu_name, problems = _parse_tsv_text(files[tsv_dir / f"{key}.tsv"])
        parsed.append((key, (gpu_name, problems)))
    models = fit_models([t for _, t in parsed], ours, work_tiles())
    files[ROOT / "harness" / "auto_table.cpp"] = write_cpp(parsed, models)
    return files


def _parse_tsv_text(text: str):
    lines = text.splitlines()
    gpu_name = lines[0][2:].split(":", 1)[0]
    problems: dict = defaultdict(dict)
    for line in lines[2:]:
        f = line.split("\t")
        problems[tuple(int(x) for x in f[:12])][f[12]] = (float(f[14]), f[13])
    return gpu_name, problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    ap.add_argument("--results", type=Path, default=ROOT / "results")
    args = ap.parse_args(argv)
    files = generate(args.results, ROOT / "harness" / "auto_tables")
    if not any(p.suffix == ".tsv" for p in files):
        # No measured table (a wrong --results): writing would empty auto's tables in auto_table.cpp.
        why = "no such folder" if not args.results.is_dir() else \
            "no <gpu>/summary.csv in it with a measured row of our variants (--results names the folder of the GPU folders)"
        print(f"make_auto_table: {args.results}: {why}; nothing written", file=sys.stderr)
        return 2
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"out of date: {p.relative_to(ROOT)} (run scripts/make_auto_table.py)", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(files[p])
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
