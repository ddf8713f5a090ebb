"""Aggregates the merged results of every experiment of one GPU into results/<gpu>/summary.csv:
one row per configuration and experiment, with its parameters, the mean time per call after IQR
outlier removal (paper protocol), std, cv, time per FMA, FLOP/s and % of the FP32 peak;
experiment_complete is false for the rows of an experiment whose run stopped part-way.

    python -m xcsuite aggregate [GPU_DIR ...]      (default: every results/<gpu>/, quick runs excluded)
"""
from __future__ import annotations

import argparse
import sys

from xcsuite import paths
from xcsuite.results import exit_2_on_bad_results, incomplete_notes
from xcsuite.summary import aggregate_dir


@exit_2_on_bad_results("aggregate")
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    paths.add_dirs_arguments(ap)
    args = ap.parse_args(argv)
    dirs = paths.selected_dirs(args.dirs, args.quick)
    if not dirs:
        print("aggregate: no results found", file=sys.stderr)
        return 0
    for d in dirs:
        df = aggregate_dir(d)
        ok = (df["status"] == "ok").sum()
        print(f"aggregate: {d}/summary.csv: {ok} configurations measured, {len(df) - ok} failed; "
              f"mean cv {df['cv'].mean():.2%}" if ok else f"aggregate: {d}/summary.csv: nothing measured")
        for note in incomplete_notes(d):
            print(f"aggregate: {d.name}: {note}")
    return 0

