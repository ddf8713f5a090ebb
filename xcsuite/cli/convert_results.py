"""Rewrites results files of format 1 (merged Google Benchmark JSON) in format 2 (one record per
case with every repetition; docs/result-files.md), in place and atomically. Lossless: each case's
entries are rebuilt from its record and compared before anything is written. Files already in
format 2 are written again only where this version stores less (a FLOPS counter derived from the
entry's fmas and time instead of stored). Reading needs no conversion (the scripts read format 1 too); this
shrinks the files (results/nvidia-h200: 34 MB to 4 MB).

    python -m xcsuite convert-results FILE.json ...
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from xcsuite import resultfile
from xcsuite.results import ResultsError, load_results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", type=Path)
    args = ap.parse_args(argv)
    for f in args.files:
        try:
            data = json.loads(f.read_text())
            if data.get("format") == resultfile.FORMAT:  # written again only where encode stores less now
                cases = data.get("cases", {})
                again = {k: resultfile.reencode(rec) for k, rec in cases.items()}
                data["cases"] = again
                if again == cases:  # the same records (a field order may differ: not worth a rewrite)
                    print(f"{f}: already {resultfile.FORMAT}, as this version writes it")
                    continue
            else:
                data = load_results(f)  # converts, checking every case's round trip
        except (OSError, ValueError, AttributeError, ResultsError) as e:
            print(f"convert-results: {e if isinstance(e, ResultsError) else f'{f}: {e}'}", file=sys.stderr)
            return 2
        before = f.stat().st_size
        resultfile.write_atomic(f, data)
        print(f"{f}: {len(data['cases'])} cases, {before / 1e6:.1f} MB -> {f.stat().st_size / 1e6:.1f} MB")
    return 0

