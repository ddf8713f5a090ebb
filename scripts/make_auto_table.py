#!/usr/bin/env python3
"""The tables of "auto" (lib/auto.cpp): from every results/<gpu>/summary.csv, a compact table of
the measured problems and their variants (lib/auto_tables/<gpu>.tsv), and from the registry
(`xcorr list --json`) the facts of the variants that the cost model needs
(lib/auto_tables/variants.json: name, family, work tile). Both are committed, readable in a
diff, and are all the build reads: it makes the C++ source of auto's tables from them
(scripts/gen_auto_table.py, a custom_target of meson.build that also fits the cost model), and
that source is never committed.

    scripts/make_auto_table.py [--build DIR]   regenerate the .tsv files and variants.json
    scripts/make_auto_table.py --check         exit 1 when the committed files differ from a regeneration
    scripts/make_auto_table.py --list lib/auto_tables/variants.json
                                               the tables of new results with the committed facts

The variants are those of a build's `xcorr list --json` (--build, default $XCORR_BUILD, else
build/; one of every variant, -Dvariants=all, or the others' rows would be left out; no GPU
needed), or of a saved copy of that output (--list FILE). No algorithm source is read.
After regenerating, rebuild (scripts/setup-env, or ninja -C build) for `--algorithm auto`, `xcorr
explain` and the Python package to choose from the new tables.
"""
from __future__ import annotations

if __name__ == "__main__":  # a missing requirement: one line, not a traceback
    import _xcsuite
    _xcsuite.explain_missing_requirements("make_auto_table.py")

import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

# The cost model and the C++ source belong to the build's generator (scripts/gen_auto_table.py,
# beside this file); its names are kept here for this module's callers (tests/test_plan.py).
from gen_auto_table import (FACTS, FORMS, NOT_CANDIDATES, SIGNALS, fft_need, fit, fit_floor,  # noqa: F401
                            fit_models, is_fft, is_signal, out_count, overlap_sum, parse_tsv_text,
                            work_tiles, work_units)

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # xcsuite (not installed): its atomic write and summary.csv's reader
    sys.path.insert(0, str(ROOT))
from xcsuite import paths  # noqa: E402
from xcsuite.results import ResultsError  # noqa: E402
from xcsuite.summary import read_summary_csv  # noqa: E402

TABLES = ROOT / "lib" / "auto_tables"
TSV_HEADER = ["form", "hL", "wL", "hR", "wR", "nL", "nR", "dy0", "dy1", "dx0", "dx1", "normalize", "variant", "params",
              "time_us"]
NORMALIZE = {"none": 0, "zncc": 1, "zero-lag": 2}  # xcorr::Normalize
FACT_KEYS = ("name", "family", "work_tile")  # of `xcorr list --json`: what variants.json keeps


# --- the variants' facts: `xcorr list --json` ---------------------------------------------------

class FactsError(Exception):
    """The variants' facts could not be had (one line for the user)."""


def default_build() -> Path:
    b = Path(os.environ.get("XCORR_BUILD", ROOT / "build"))
    return b if b.is_absolute() else ROOT / b


def registry_of_build(build: Path) -> list[dict]:
    """`xcorr list --json` of a build (no GPU needed), refused for a build of some variants only."""
    exe = build / "xcorr"
    if not exe.is_file():
        raise FactsError(f"{build}: no xcorr built there (scripts/setup-env builds it; or --list FILE)")
    opts = build / "meson-info" / "intro-buildoptions.json"
    if opts.is_file():
        chosen = next((o["value"] for o in json.loads(opts.read_text()) if o["name"] == "variants"), "all")
        if chosen != "all":
            raise FactsError(f"{build}: built with -Dvariants={chosen} only: the other variants' rows would be left "
                             "out of the tables (a build with -Dvariants=all, or --list FILE)")
    r = subprocess.run([str(exe), "list", "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise FactsError(f"{exe} list --json failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def registry_of_file(path: Path) -> list[dict]:
    try:
        registry = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise FactsError(f"{path}: not a saved `xcorr list --json` ({e})")
    # variant_facts reads a list of objects: anything else was an AttributeError traceback
    if not isinstance(registry, list) or not all(isinstance(v, dict) for v in registry):
        raise FactsError(f"{path}: not a saved `xcorr list --json` (not a list of variants)")
    if not registry:
        raise FactsError(f"{path}: a variant list without variants")
    return registry


def variant_facts(registry: list[dict]) -> list[dict]:
    """What variants.json keeps of each variant (FACT_KEYS), in the order of their names."""
    for v in registry:
        for k in FACT_KEYS:
            if k not in v:
                raise FactsError(f"the variant list has no {k!r} for {v.get('name', v)} (an older xcorr?)")
    return [{k: v[k] for k in FACT_KEYS} for v in sorted(registry, key=lambda v: v["name"])]


def facts_text(facts: list[dict]) -> str:
    """variants.json's text: one variant a line, readable in a diff."""
    return "[\n" + ",\n".join("  " + json.dumps(v) for v in facts) + "\n]\n"


# --- the measured tables: results/<gpu>/summary.csv ---------------------------------------------

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


# The columns of summary.csv read here (xcsuite/summary.py checks them); shifts may be absent.
SUMMARY_COLUMNS = ("gpu_name", "status", "variant", "cold", "form", "hL", "wL", "hR", "wR", "nL", "nR", "shifts",
                   "time_us", "finish_time_us", "params")


def read_summary(path: Path, ours: dict) -> tuple[str, dict]:
    """gpu_name, {problem: {variant: (time_us, params)}}: per problem the fastest parameters of each
    variant, time = run + finish (what Plan::execute costs)."""
    problems: dict = defaultdict(dict)
    gpu_name = ""
    # Checked (ResultsError naming the file, column and line): a damaged row was a traceback here.
    for r in read_summary_csv(path, SUMMARY_COLUMNS).to_dict("records"):
        # A normalized row is a problem of its own (the normalize column): it times the normalization
        # around the variant, on cropped inputs, so it can beat the same variant's raw row, and it is
        # not that problem's raw time. Its parameters are the variant's, without normalize=.
        if r["status"] != "ok" or r["variant"] not in ours or r["cold"]:
            continue
        norm, params = split_normalize(r["params"])
        gpu_name = gpu_name or r["gpu_name"]
        hL, wL, hR, wR = (int(r[k]) for k in ("hL", "wL", "hR", "wR"))
        key = (FORMS[r["form"]], hL, wL, hR, wR, int(r["nL"]), int(r["nR"])) \
            + parse_shifts(shifts_of(r), hL, wL, hR, wR) + (NORMALIZE[norm],)
        t = time_of(r)
        best = problems[key].get(r["variant"])
        if best is None or t < best[0]:
            problems[key][r["variant"]] = (t, params)
    return gpu_name, problems


def time_of(row: dict) -> float:
    """A checked summary row's time, run + finish (what Plan::execute costs; no finish step: NaN)."""
    fin = row["finish_time_us"]
    return float(row["time_us"]) + (float(fin) if fin == fin else 0.0)


def write_tsv(path: Path, gpu_name: str, problems: dict) -> str:
    lines = [f"# {gpu_name}: fastest parameters of every measured variant per problem (ok rows of summary.csv, "
             "time = run + finish in us), fastest first. Generated by scripts/make_auto_table.py.",
             "\t".join(TSV_HEADER)]
    for key in sorted(problems):
        for v, (t, params) in sorted(problems[key].items(), key=lambda kv: (kv[1][0], kv[0])):
            lines.append("\t".join(str(x) for x in key) + f"\t{v}\t{params}\t{t:.6g}")
    return "\n".join(lines) + "\n"


def generate(results: Path, tsv_dir: Path, facts: list[dict]) -> dict[Path, str | None]:
    """Every file this script writes, path -> text; None for a .tsv of no results folder, to be
    removed (the build compiles every .tsv of the folder). Nothing without a measured table."""
    ours = {v["name"]: v["family"] for v in facts}
    files: dict[Path, str | None] = {}
    for summary in sorted(results.glob("*/summary.csv"), key=lambda p: p.parent.name):
        if summary.parent.name.endswith("-quick"):
            continue  # quick runs are smoke tests, not measurements
        gpu_name, problems = read_summary(summary, ours)
        if not problems:
            continue
        tsv = tsv_dir / f"{summary.parent.name}.tsv"
        files[tsv] = write_tsv(tsv, gpu_name, problems)
    if files:
        for old in sorted(tsv_dir.glob("*.tsv")):
            files.setdefault(old, None)
        files[tsv_dir / FACTS] = facts_text(facts)
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    ap.add_argument("--results", type=Path, default=ROOT / "results")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--build", type=Path, help="the build whose `xcorr list --json` gives the variants "
                     "(default: $XCORR_BUILD, else build/; built with -Dvariants=all)")
    src.add_argument("--list", type=Path, metavar="FILE", help="a saved `xcorr list --json` (or variants.json) "
                     "instead of a build")
    args = ap.parse_args(argv)
    try:
        facts = variant_facts(registry_of_file(args.list) if args.list else registry_of_build(args.build or default_build()))
    except FactsError as e:
        print(f"make_auto_table: {e}; nothing written", file=sys.stderr)
        return 2
    try:
        files = generate(args.results, TABLES, facts)
    except ResultsError as e:  # a damaged summary.csv: one line, nothing written
        print(f"make_auto_table: {e}; nothing written", file=sys.stderr)
        return 2
    if not files:
        # No measured table (a wrong --results): writing would empty auto's tables.
        why = "no such folder" if not args.results.is_dir() else \
            "no <gpu>/summary.csv in it with a measured row of our variants (--results names the folder of the GPU folders)"
        print(f"make_auto_table: {args.results}: {why}; nothing written", file=sys.stderr)
        return 2
    stale = [p for p, text in files.items() if (p.exists() if text is None else not p.exists() or p.read_text() != text)]
    if args.check:
        for p in stale:
            what = "out of date" if files[p] is not None else "of no results folder"
            print(f"{what}: {p.relative_to(ROOT)} (run scripts/make_auto_table.py)", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        if files[p] is None:
            p.unlink()
            print(f"removed {p.relative_to(ROOT)}")
            continue
        paths.write_text_atomic(p, files[p])  # auto's tables: never a half-written one for the build to compile
        print(f"wrote {p.relative_to(ROOT)}")
    if stale:
        print("make_auto_table: the build makes auto's C++ tables of these: rebuild (scripts/setup-env)")
    return 0


if __name__ == "__main__":
    sys.exit(paths.exit_status(main, "make_auto_table"))
