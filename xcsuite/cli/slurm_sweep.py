"""Runs a sweep as a Slurm job array: one shard of the cases per task, then a merge.

    python -m xcsuite slurm-sweep [EXPERIMENT ...] --shards N --dir SWEEPDIR [--partition P] [--time HH:MM:SS]
                        [--gres gpu:1] [--no-submit] [-- RUNNER OPTIONS ...]

Writes SWEEPDIR/sweep.sbatch (an array of N tasks, each `--gres=gpu:1`, running
`python -m xcsuite run-experiments EXPERIMENTS --shard $SLURM_ARRAY_TASK_ID/N --results SWEEPDIR/shard-K`: every
task measures the cases whose cost-balanced shard is K, resumably, into a results root of its
own) and SWEEPDIR/merge.sbatch (`python -m xcsuite run-experiments --merge SWEEPDIR/shard-* --results RESULTS`),
then submits the array and the merge with --dependency=afterany on it (the merge takes whatever
finished; resubmitting the same command resumes the unfinished shards and merges again, which
is idempotent). --no-submit writes the scripts and prints the sbatch commands only."""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path

from xcsuite import paths

import experiments as suite


def parse_args(argv):
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    else:
        extra = []
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiments", nargs="*", help="experiments (default: all)")
    ap.add_argument("--shards", type=int, required=True, help="tasks of the job array (one GPU each)")
    ap.add_argument("--dir", required=True, help="the sweep's folder: scripts, logs, shard-K/ results")
    ap.add_argument("--results", default=str(paths.RESULTS), help="where the merge writes (default: results/)")
    ap.add_argument("--build", default=str(paths.ROOT / "build"))
    ap.add_argument("--partition", default=None)
    ap.add_argument("--time", default=None, help="each task's time limit (sbatch --time)")
    ap.add_argument("--gres", default="gpu:1", help="each task's GPUs (default gpu:1; '' for none)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter the tasks run")
    ap.add_argument("--no-submit", action="store_true", help="write the scripts, print the commands, submit nothing")
    args = ap.parse_args(argv)
    args.extra = extra
    if args.shards < 1:
        ap.error("--shards must be >= 1")
    try:  # here, not in every task of the array once it runs
        suite.selected(args.experiments)
    except ValueError as e:
        ap.error(str(e))
    for flag in ("--dir", "--results"):  # --results: here, not in the merge job after the sweep
        if why := paths.folder_problem(getattr(args, flag[2:])):
            ap.error(f"{flag}: {why}")
    return args


def header(args, name: str, log: str) -> list[str]:
    # append: a resubmitted sweep keeps the log of the attempt before (why a shard stopped)
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --output={log}", "#SBATCH --open-mode=append"]
    if args.partition:
        lines.append(f"#SBATCH --partition={args.partition}")
    if args.time:
        lines.append(f"#SBATCH --time={args.time}")
    return lines


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    d = Path(args.dir).resolve()
    build = Path(args.build).resolve()  # the tasks run from the repository root, not from here
    (d / "logs").mkdir(parents=True, exist_ok=True)
    runner = [args.python, "-m", "xcsuite", "run-experiments"]  # after the cd to the repository root
    q = shlex.join
    exps = [e for e in args.experiments]
    task = header(args, "xcorr-sweep", str(d / "logs" / "shard-%a.out")) + [
        f"#SBATCH --array=0-{args.shards - 1}", "#SBATCH --ntasks=1",
        *([f"#SBATCH --gres={args.gres}"] if args.gres else []),
        "set -u", f"cd {shlex.quote(str(paths.ROOT))}",
        f"exec {q(runner + exps)} --shard \"$SLURM_ARRAY_TASK_ID/{args.shards}\" "
        f"--results {shlex.quote(str(d))}/shard-\"$SLURM_ARRAY_TASK_ID\" --build {shlex.quote(str(build))} "
        f"--no-progress {q(args.extra)}".rstrip()]
    merge = header(args, "xcorr-sweep-merge", str(d / "logs" / "merge.out")) + [
        "#SBATCH --ntasks=1", "set -u", f"cd {shlex.quote(str(paths.ROOT))}",
        f"exec {q(runner)} --merge {shlex.quote(str(d))}/shard-* --results {shlex.quote(str(Path(args.results).resolve()))}"]
    paths.write_text_atomic(d / "sweep.sbatch", "\n".join(task) + "\n")
    paths.write_text_atomic(d / "merge.sbatch", "\n".join(merge) + "\n")
    first = ["sbatch", "--parsable", str(d / "sweep.sbatch")]
    if args.no_submit:
        print(q(first))
        print(q(["sbatch", "--dependency=afterany:JOBID", str(d / "merge.sbatch")]))
        return 0
    try:
        r = subprocess.run(first, capture_output=True, text=True, timeout=120)
    except OSError as e:
        print(f"slurm-sweep: cannot run sbatch: {e}", file=sys.stderr)
        return 2
    if r.returncode != 0:
        print(f"slurm-sweep: sbatch failed: {r.stderr.strip()}", file=sys.stderr)
        return 2
    job = r.stdout.strip().split(";")[0]
    r2 = subprocess.run(["sbatch", "--parsable", f"--dependency=afterany:{job}", str(d / "merge.sbatch")],
                        capture_output=True, text=True, timeout=120)
    if r2.returncode != 0:
        print(f"slurm-sweep: array job {job} submitted, the merge was not: {r2.stderr.strip()}", file=sys.stderr)
        return 2
    print(f"array job {job} ({args.shards} shards), merge job {r2.stdout.strip().split(';')[0]}; logs in {d / 'logs'}")
    return 0
