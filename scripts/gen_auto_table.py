#!/usr/bin/env python3
"""The C++ tables of "auto" (auto.hpp, auto.cpp), made at build time: Meson's custom_target runs
this (meson.build) and compiles its output, <build>/auto_table.cpp, which is never committed.

It reads committed data only: every lib/auto_tables/<gpu>.tsv (the measured problems and their
variants) and lib/auto_tables/variants.json (the registry's facts the cost model needs, each
variant's work tile), both written by scripts/make_auto_table.py from results/<gpu>/summary.csv and
`xcorr list --json`. From them it fits the cost model on every table and writes the source.
Python's standard library alone (the build has nothing else).

    scripts/gen_auto_table.py [--tables lib/auto_tables] --out FILE [--depfile FILE]

--depfile writes a Make-style dependency file: the tables read and their folder (a table added or
removed changes the folder's time), so that Ninja regenerates the source when one of them changes.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "lib" / "auto_tables"
FACTS = "variants.json"  # in the tables' folder
FORMS = {"one-to-one": 0, "one-to-many": 1, "n-to-mn": 2, "n-to-m": 3}
# Never candidates of auto (auto.cpp): fft+plan times plan creation, which a plan does once.
NOT_CANDIDATES = {"fft+plan"}
HEADER = "// GENERATED at build time by scripts/gen_auto_table.py from lib/auto_tables/: do not edit."


# --- the committed data ------------------------------------------------------------------------

def parse_tsv_text(text: str):
    """gpu_name, {problem key (12 ints): {variant: (time_us, params)}} of one <gpu>.tsv's text."""
    lines = text.splitlines()
    gpu_name = lines[0][2:].split(":", 1)[0]
    problems: dict = defaultdict(dict)
    for line in lines[2:]:
        f = line.split("\t")
        problems[tuple(int(x) for x in f[:12])][f[12]] = (float(f[14]), f[13])
    return gpu_name, problems


def table_files(tables: Path) -> list[Path]:
    """The <gpu>.tsv files of the folder, in the order of their keys (the results folders' names)."""
    return sorted(tables.glob("*.tsv"), key=lambda p: p.stem)


def read_facts(path: Path) -> list[dict]:
    """variants.json: [{"name", "family", "work_tile": [dy, dx]}, ...] (`xcorr list --json`'s own keys)."""
    return json.loads(path.read_text())


def work_tiles(facts: list[dict]) -> dict[str, tuple[int, int]]:
    """name -> (dy, dx) of every variant that declares a work tile other than 1 x 1 (registry.hpp:
    Variant::work_tile, `xcorr list --json`'s work_tile); the others compute their window's shifts
    exactly, (1, 1)."""
    return {v["name"]: tuple(v["work_tile"]) for v in facts if tuple(v["work_tile"]) != (1, 1)}


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
    """Sum over shifts s in [s0, s1] of the overlap length of i + s in [0, m), i in [0, n):
    max(0, min(m, n, n + s, m - s)), rising by one a shift up to s = min(m, n) - n, flat to
    m - min(m, n), falling after; summed in closed form, exactly (a signal's millions of shifts
    summed one by one took the build minutes)."""
    lo, hi = max(s0, 1 - n), min(s1, m - 1)  # the shifts that overlap
    if lo > hi:
        return 0
    k = min(m, n)
    tot = 0
    a, b = lo, min(hi, k - n - 1)  # rising: n + s
    if a <= b:
        tot += (b - a + 1) * n + (a + b) * (b - a + 1) // 2
    a, b = max(lo, k - n), min(hi, m - k)  # flat: k
    if a <= b:
        tot += (b - a + 1) * k
    a, b = max(lo, m - k + 1), hi  # falling: m - s
    if a <= b:
        tot += (b - a + 1) * m - (a + b) * (b - a + 1) // 2
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


def fit(points, floor, fallback=0.0):
    """(floor_us, us_per_unit) of time = floor + units * cost over (units, time) points: the floor is
    the variant's fastest time on any problem (its launch floor), the cost the median of the excess
    per unit where the work shows. Where no point is twice the floor (a variant measured on a few
    large problems only), the floor is `fallback` (fit_models: the GPU's launch floor) and the cost
    the median excess over it: with 0 there, block-per-pair, measured on two PIV shapes of
    180-330 us, was predicted at 0.05 us for 3 pairs of 16 x 16, and auto sent every small problem
    it had not measured to it."""
    excess = [(t - floor) / u for u, t in points if t > 2 * floor]
    if not excess:
        floor = min(fallback, min(t for _, t in points))
        excess = [(t - floor) / u for u, t in points]
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
    on signals only: the GPU's launch floor, the fastest 2-D time of any variant)."""
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
    # A variant measured on signals only (tensor-hankel, signal-tiled, fft-segmented) has no launch
    # floor of its own in the tables, whose signal rows are all far above a launch: it takes the
    # GPU's, the fastest 2-D time of any variant. With 0 its model predicted 0.0117 us for 16
    # templates of 256 against 1e5 samples within +-50 lags (issue #65).
    launch_floor = min(floor_2d.values(), default=0.0)
    models = []
    for (v, form), pts in sorted(by_vf.items()):
        if form >= 0 and len(pts) < 3:
            continue
        if form >= 0 and is_fft(v):
            floor, cost = fit_floor(pts)
        else:
            floor = floor_2d.get(v, launch_floor) if form == SIGNALS else min(t for _, t in by_vf[(v, -1)])
            floor, cost = fit(pts, floor, launch_floor)
        models.append((v, form, int(is_fft(v)), floor, cost, len(pts)))
    return models


# --- the C++ source ----------------------------------------------------------------------------

def cpp_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_cpp(tables: list, models: list) -> str:
    out = [HEADER,
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


def source_from_texts(tsv_texts: list[tuple[str, str]], facts: list[dict]) -> str:
    """The C++ source of [(table key, its .tsv text), ...] (in that order) and the variants' facts."""
    parsed = [(key, parse_tsv_text(text)) for key, text in tsv_texts]
    families = {v["name"]: v["family"] for v in facts}
    models = fit_models([t for _, t in parsed], families, work_tiles(facts))
    return write_cpp(parsed, models)


def generate(tables: Path) -> tuple[str, list[Path]]:
    """The C++ source of the tables' folder, and every file it was made from."""
    files = table_files(tables)
    facts_path = tables / FACTS
    text = source_from_texts([(p.stem, p.read_text()) for p in files], read_facts(facts_path))
    return text, files + [facts_path]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=Path, default=TABLES, help="the folder of <gpu>.tsv and variants.json")
    ap.add_argument("--out", type=Path, required=True, help="the C++ source to write")
    ap.add_argument("--depfile", type=Path, help="a Make-style dependency file of --out to write")
    args = ap.parse_args(argv)
    if not (args.tables / FACTS).is_file():
        print(f"gen_auto_table: {args.tables}: no {FACTS} (scripts/make_auto_table.py writes it)", file=sys.stderr)
        return 2
    text, inputs = generate(args.tables)
    args.out.write_text(text)
    if args.depfile:
        deps = [args.tables.resolve()] + [p.resolve() for p in inputs]
        esc = [str(p).replace("\\", "\\\\").replace(" ", "\\ ") for p in deps]
        args.depfile.write_text(f"{args.out}: " + " ".join(esc) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
