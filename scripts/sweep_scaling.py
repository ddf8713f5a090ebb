#!/usr/bin/env python3
"""How the experiment sweep scales over the GPUs of a host (issue #69): the quick suite
(`run_experiments.py --quick --force`) run as a user runs it, once on the first GPU of --gpus and
once on all of them (`--gpus all`: each GPU takes figure points from a shared pool, or with --assign
deal its share dealt by estimated cost before the run; one bench process per GPU
at a time), each into a results folder of its own under a temporary directory, timed by the wall
clock from the command's start to its exit. Both runs must complete every case of the same set
(checked: the same case keys, every one measured), else the comparison is void and the script fails
naming the cases that ended otherwise. A case every run records as failed (a peer failing its
validation) is the same work in both. The run compared with a finished one takes that run's
verdicts of the peers' time cap (CuPy's cases predicted above 2 s a call from one timed pair,
refused): it refuses exactly those and times the rest, since a pilot near the cap would otherwise
refuse a case in one run only (XCORR_PEER_VERDICTS, xcsuite/peerbench.py).

    python scripts/sweep_scaling.py [EXPERIMENT ...] [--gpus all] [--build build] [--out F]
                                    [--max-minutes M] [--keep DIR] [--part one|all|both] [--with F]
                                    [--resume DIR]

Prints one line per GPU count and writes JSON (--out): the GPUs (nvidia-smi's index, name, UUID,
driver, clocks), the git revision, the experiments, the number of cases, the wall seconds per GPU
count, the speedup over one GPU and the issue's target (1.8x with two). Needs two GPUs or more
(exit 3 with the reason otherwise: one GPU has nothing to compare). EXPERIMENT: names or comma lists
as run_experiments takes them (default: the whole quick suite). --max-minutes bounds the sitting,
both runs together (an incomplete run voids the comparison: exit 4; with --resume the same command
continues it).

Where the two runs do not fit one sitting (a GPU machine lent for 10-minute commands), `--part one
--out A.json` runs the one-GPU sweep alone and `--part all --with A.json --out B.json` the other,
then compares: A's run must be of the same experiments, revision and GPUs (their UUIDs: the same
machine), and the two runs' case sets are compared by a digest of their results files' case keys.

Where one run alone does not fit a sitting (the whole quick suite on one GPU is ~9 minutes on an
H100), `--resume DIR` keeps each run's results folder in DIR (gpus-1, gpus-N) with DIR/state.json:
a run stopped by --max-minutes (exit 4) continues where it stopped when the same command is given
again (the first sitting with --force, later ones resuming the pending cases), its wall time the sum
of its sittings' (each sitting's start-up counted: slightly against the run cut into more sittings;
the JSON gives the sittings). A finished run is not run again; `--part all --resume DIR` after
`--part one --resume DIR` compares the two. DIR's state must be of the same experiments, revision
and GPUs.

Where the machine may not last from one sitting to the next (a lent machine given back when idle,
its /tmp gone), `--by-group` compares group by group instead: each group of experiments (each
EXPERIMENT argument a group, a name or comma list; default: the whole quick suite in the groups of
experiments.SWEEP_GROUPS, each a few minutes on one GPU) runs on one GPU, then on all, in one
sitting, so that both runs of a group are one machine's. With `--resume DIR` the finished groups are
kept in DIR/state.json (a few kilobytes: carry it to the next machine) and the next sitting runs
the groups left; a group cut by --max-minutes (the whole sitting's budget here) starts over in the
next sitting. Every group must be measured on GPUs of one model at one revision; the JSON gives each
group's machine (its UUIDs), runs and speedup, and the suite's: the sums of the groups' wall times
on one GPU and on all. The GPUs share out the points of one group at a time (a GPU idle in a group's
tail, where the whole suite's pool would give it the next group's points), so the speedup by groups
tends to be below that of the whole suite in one go."""
if __name__ == "__main__":  # a missing requirement: one line, not a traceback
    import _xcsuite
    _xcsuite.explain_missing_requirements("sweep_scaling.py")

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import experiments  # noqa: E402
from xcsuite import gpus, paths, peerbench, resultfile  # noqa: E402

TARGET = 1.8  # issue #69: the sweep over two GPUs at least 1.8x one GPU in wall time


def git_revision():
    rev = os.environ.get("XCORR_GIT_REVISION")
    if rev:
        return rev
    r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return r.stdout.strip() if r.returncode == 0 else "unknown"


def smi_details(devices):
    """nvidia-smi's driver and clocks per selected device (index order), or what went wrong."""
    try:
        r = subprocess.run([*gpus.smi_command(), "--query-gpu=index,name,uuid,driver_version,clocks.sm,clocks.mem",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [f"nvidia-smi not run: {e}"]
    wanted = {d.uuid for d in devices}
    return [line.strip() for line in r.stdout.strip().splitlines() if any(u in line for u in wanted)]


def capped_name(rec: dict) -> str | None:
    """The peer case name (peerbench's Case.name()) of a record the time cap refused, else None."""
    if rec.get("status") == "ok" or not str(rec.get("message", "")).startswith(peerbench.CAP_REFUSAL):
        return None
    try:
        return peerbench.parse_case(resultfile.line_of(rec)).name()
    except (KeyError, ValueError, peerbench.UsageError):
        return None


def cases_of(results: Path):
    """What one run measured: {"cases", "files", "case_set" (a digest of every results file's case
    keys), "status_set" (of the keys with their status), "not_ok" (cases whose status is not ok, such
    as a peer failing its validation, which every run of the same code records alike),
    "not_ok_first" (at most 5 of them), "not_ok_cases" (every one as file, key and status: which
    cases two runs ended otherwise) and "capped" (the cases the peers' time cap refused, by
    peerbench's name, with the message: the verdicts the run compared with takes, run_sweep)}."""
    keys, statuses, bad, bad_keys, capped, files = [], [], [], [], {}, 0
    for f in sorted(results.glob("*/*.json")):
        data = json.loads(f.read_text())
        if not isinstance(data, dict) or "cases" not in data:
            continue
        files += 1
        for k, c in sorted(data["cases"].items()):
            keys.append(f"{f.name}\t{k}")
            statuses.append(f"{f.name}\t{k}\t{c.get('status')}")
            if c.get("status") != "ok":
                bad.append(f"{f.name}: {k}: {c.get('status')}: {str(c.get('message', ''))[:120]}")
                bad_keys.append(f"{f.name}\t{k}\t{c.get('status')}")
                name = capped_name(c)
                if name:
                    capped[name] = str(c["message"])
    digest = lambda lines: hashlib.sha256("\n".join(lines).encode()).hexdigest()  # noqa: E731
    return {"cases": len(keys), "files": files, "case_set": digest(keys), "status_set": digest(statuses),
            "not_ok": len(bad), "not_ok_first": bad[:5], "not_ok_cases": bad_keys, "capped": capped}


def different_work(runs) -> str | None:
    """Why these runs did not do the same work (other cases, or a case ok in one and not in the
    other: a crash, a time limit), or None where they did."""
    if len({r["case_set"] for r in runs}) > 1:
        return "the runs measured different cases"
    if len({r.get("status_set") for r in runs}) > 1:
        why = "a case ended otherwise in one run than in the other (ok in one, failed in the other)"
        if all("not_ok_cases" in r for r in runs):  # which (a JSON of an older revision has only digests)
            ended = {r["gpus"]: set(r["not_ok_cases"]) for r in runs}
            odd = sorted(set.union(*ended.values()) - set.intersection(*ended.values()))
            said = [f"{f}: {k}: {st} on {', '.join(str(n) for n, e in ended.items() if line in e)} GPU(s) only"
                    for line in odd[:3] for f, k, st in [line.split("\t")]]
            why += f": {'; '.join(said)}" + (f"; {len(odd) - 3} more" if len(odd) > 3 else "")
        return why
    return None


def sitting_left(max_minutes, t0):
    """Minutes of the sitting's --max-minutes that the runs since `t0` (perf_counter) left, None
    without a bound; below 0.05 no run starts (the caller says so and exits 4)."""
    return None if not max_minutes else max_minutes - (time.perf_counter() - t0) / 60


def run_sweep(selection, experiments, build, results, max_minutes, force=True, assign="pool", verdicts=None):
    """Wall seconds of one quick-suite run on the GPUs of `selection` (a --gpus value), and its exit;
    force=False: a later sitting of a run that stopped, resuming its pending cases. verdicts: the
    "capped" of the finished run this one is compared with, where there is one: the peers refuse
    exactly those cases and time the rest without the cap's pilot (peerbench.earlier_verdicts), so
    that a case predicted near the cap cannot end otherwise in the two runs and void the comparison."""
    cmd = [sys.executable, str(ROOT / "scripts" / "run_experiments.py"), *experiments, "--quick",
           *(["--force"] if force else []), "--gpus", selection, "--build", str(build), "--results", str(results),
           "--assign", assign]
    if max_minutes:
        cmd += ["--max-minutes", str(max_minutes)]
    env = dict(os.environ)
    env.pop(peerbench.VERDICTS_ENV, None)
    with tempfile.TemporaryDirectory(prefix="sweep-verdicts-") as tmp:
        if verdicts is not None:
            env[peerbench.VERDICTS_ENV] = str(Path(tmp) / "verdicts.json")
            write_json(Path(env[peerbench.VERDICTS_ENV]), verdicts)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)  # its progress bar (stderr) shows
        seconds = time.perf_counter() - t0
    return seconds, r


def write_json(path: Path, data) -> None:
    """`data` to `path` at once (paths.write_text_atomic): never a half-written file."""
    paths.write_text_atomic(path, json.dumps(data, indent=1) + "\n")


def read_state(resume: Path, ident: dict, what: str):
    """DIR/state.json of an earlier sitting, checked to be of this sweep (every value of `ident` the
    same; `what` names the kind of sweep): (state, None), ({}, None) where there is none yet, or
    (None, 2) after saying in one line why it is not this sweep's."""
    resume.mkdir(parents=True, exist_ok=True)
    state_path = resume / "state.json"
    if not state_path.exists():
        return {}, None
    try:
        state = json.loads(state_path.read_text())
        why = [f"{k} {state[k]!r}, here {v!r}" for k, v in ident.items() if state[k] != v]
    except (ValueError, KeyError, TypeError) as e:
        print(f"sweep_scaling: --resume {resume}: {state_path.name} is not {what} state ({e})", file=sys.stderr)
        return None, 2
    if why:
        print(f"sweep_scaling: --resume {resume} holds another sweep: {'; '.join(why)} (start another DIR)",
              file=sys.stderr)
        return None, 2
    return state, None


def run_failed(count, seconds, r) -> str:
    """What a run that did not complete says (its exit status, time and last lines)."""
    return f"the run on {count} GPU(s) exited {r.returncode} after {seconds:.0f} s; its last lines:\n{r.stdout[-1500:]}"


def run_record(count, devices, seconds, results, **extra) -> dict:
    """A completed run as the JSON records it: its GPUs, wall time and what it measured (cases_of)."""
    return {"gpus": count, "devices": [d.record() for d in devices[:count]], "seconds": seconds, **extra,
            **cases_of(results)}


def not_ok(run, what) -> None:
    """Say which cases both runs recorded as not ok (the comparison stands: the same work)."""
    if run["not_ok"]:
        print(f"sweep_scaling: {what}: {run['not_ok']} case(s) ended not ok in both runs alike, e.g. "
              f"{run['not_ok_first'][0]}")


def one_run(count, devices, group, build, results, max_minutes, assign, verdicts=None):
    """A complete run of `group` on the first `count` devices into `results` (from scratch), or
    (exit status, message) where it did not complete; verdicts as run_sweep takes them."""
    seconds, r = run_sweep(",".join(d.uuid for d in devices[:count]), group, build, results, max_minutes,
                           assign=assign, verdicts=verdicts)
    if r.returncode != 0:
        return None, (4 if r.returncode == 4 else 1, run_failed(count, seconds, r))
    return run_record(count, devices, seconds, results), None


def by_group(args, groups, devices, revision, out_path) -> int:
    """--by-group: each group's run on one GPU, then on all, in one sitting; the suite's speedup
    from the sums of the groups' wall times (see the module's text)."""
    n = len(devices)
    ident = {"by_group": True, "git_revision": revision, "groups": groups, "gpu_model": devices[0].name,
             "gpu_count": n, "assign": args.assign}
    resume = Path(args.resume) if args.resume else None
    done = {}
    if resume is not None:
        state, status = read_state(resume, ident, "a --by-group sweep's")
        if status:
            return status
        done = state.get("done") if state else {}  # the finished groups: an earlier sitting's, or none yet
        if not isinstance(done, dict):
            print(f"sweep_scaling: --resume {resume}: state.json is not a --by-group sweep's state (no object "
                  "of finished groups)", file=sys.stderr)
            return 2
        state_path = resume / "state.json"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sweep-scaling-") as tmp:
        for i, group in enumerate(groups):
            key = ",".join(group)
            if key in done:
                print(f"sweep_scaling: group {i + 1}/{len(groups)} ({key}) finished in an earlier sitting")
                continue
            print(f"sweep_scaling: group {i + 1}/{len(groups)} ({key}) on 1 GPU, then on {n} ...", flush=True)
            runs = []
            for count in (1, n):
                left = sitting_left(args.max_minutes, t0)
                if left is not None and left < 0.05:
                    print(f"sweep_scaling: out of --max-minutes before group {key} was compared; give the same "
                          f"command again{f' ({resume})' if resume else ''}: it starts over there",
                          file=sys.stderr)
                    return 4
                run, failed = one_run(count, devices, group, args.build, Path(tmp) / f"group-{i}-gpus-{count}",
                                      left, args.assign, runs[0]["capped"] if runs else None)
                if failed:
                    status, why = failed
                    print(f"sweep_scaling: group {key}: {why}", file=sys.stderr)
                    if status == 4:
                        print(f"sweep_scaling: group {key} was cut by --max-minutes; give the same command again"
                              f"{f' ({resume})' if resume else ''}: the group starts over there (both of its runs "
                              f"on one machine)", file=sys.stderr)
                    return status
                runs.append(run)
            why = different_work(runs)
            if why:
                print(f"sweep_scaling: group {key}: {why}: no comparison", file=sys.stderr)
                return 1
            not_ok(runs[0], f"group {key}")
            done[key] = {"experiments": group, "uuids": [d.uuid for d in devices], "nvidia_smi": smi_details(devices),
                         "cases": runs[0]["cases"], "files": runs[0]["files"], "runs": runs,
                         "speedup": runs[0]["seconds"] / runs[1]["seconds"]}
            if resume is not None:
                write_json(state_path, {**ident, "done": done})
            print(f"   {key}: {runs[0]['cases']} cases; 1 GPU {runs[0]['seconds']:.1f} s, {n} GPUs "
                  f"{runs[1]['seconds']:.1f} s: {done[key]['speedup']:.2f}x", flush=True)
    entries = [done[",".join(g)] for g in groups]
    one = sum(e["runs"][0]["seconds"] for e in entries)
    many = sum(e["runs"][1]["seconds"] for e in entries)
    speedup, two = one / many, n == 2
    machines = [list(u) for u in dict.fromkeys(tuple(e["uuids"]) for e in entries)]
    result = {"by_group": True, "gpus": [devices[0].name] * n, "git_revision": revision,
              "experiments": "all" if not args.experiments else [x for g in groups for x in g],
              "protocol": "quick (run_experiments --quick --force), group by group", "assign": args.assign,
              "cases": sum(e["cases"] for e in entries), "files": sum(e["files"] for e in entries),
              "machines": machines, "groups": entries, "seconds": {"1": one, str(n): many}, "speedup": speedup,
              "target": TARGET if two else None, "holds": speedup >= TARGET if two else None}
    print(f"sweep_scaling: {result['cases']} cases in {len(groups)} groups on {len(machines)} machine(s); "
          f"1 GPU {one:.1f} s, {n} GPUs {many:.1f} s: {speedup:.2f}x"
          + (f" (target {TARGET}x: {'holds' if result['holds'] else 'missed'})" if two else ""))
    if out_path is not None:
        write_json(out_path, result)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog="\n\n".join(__doc__.split("\n\n")[1:]),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiments", nargs="*", help="experiments (default: the whole quick suite)")
    ap.add_argument("--gpus", default="all", help="'all' or nvidia-smi indices/UUIDs, at least two (default: all)")
    ap.add_argument("--build", default=str(ROOT / "build"), help="build directory (default: build/)")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--max-minutes", type=float, help="bound on this sitting (the runs it makes share it)")
    ap.add_argument("--assign", choices=["pool", "deal"], default="pool",
                    help="how the run on several GPUs shares the cases out (run_experiments --assign)")
    ap.add_argument("--keep", help="keep both runs' results folders under this directory (default: removed)")
    ap.add_argument("--part", choices=["one", "all", "both"], default="both",
                    help="which sweep to run: on the first GPU, on all, or both (default)")
    ap.add_argument("--with", dest="earlier", metavar="JSON",
                    help="an earlier --part's JSON whose run is compared with this one's")
    ap.add_argument("--resume", metavar="DIR",
                    help="keep the runs in DIR and continue a run that --max-minutes stopped (see below)")
    ap.add_argument("--by-group", action="store_true",
                    help="compare group by group, each in one sitting (each EXPERIMENT argument a group; see below)")
    args = ap.parse_intermixed_args(argv)  # experiments before and after options alike
    if args.by_group and (args.keep or args.earlier or args.part != "both"):
        ap.error("--by-group runs both parts of each group itself: not with --part, --with or --keep")
    if args.resume and (args.keep or args.earlier):
        ap.error("--resume keeps the runs itself and holds the earlier part: not with --keep or --with")
    if args.max_minutes is not None and args.max_minutes <= 0:
        ap.error("--max-minutes must be above 0")
    listed = gpus.list_devices()
    if listed is None:
        print("sweep_scaling: no GPU: nvidia-smi lists none", file=sys.stderr)
        return 3
    visible = gpus.visible(listed)
    if visible is None:
        print("sweep_scaling: CUDA_VISIBLE_DEVICES names devices nvidia-smi does not list", file=sys.stderr)
        return 3
    try:
        devices = gpus.select(args.gpus, visible)
    except gpus.GpuSelectionError as e:
        ap.error(str(e))
    if len(devices) < 2:
        print(f"sweep_scaling: needs two GPUs or more, {len(devices)} selected "
              f"({', '.join(d.label() for d in devices)}): one GPU has nothing to compare", file=sys.stderr)
        return 3
    if not (Path(args.build) / "xcorr_bench").exists():
        print(f"sweep_scaling: {args.build}/xcorr_bench is missing: build first (meson setup build && ninja -C build)",
              file=sys.stderr)
        return 2
    out_path = Path(args.out) if args.out else None
    if out_path is not None and not out_path.parent.is_dir():
        ap.error(f"--out: no directory {out_path.parent}")
    revision = git_revision()
    if args.by_group:
        try:
            groups = ([experiments.selected([g]) for g in args.experiments] if args.experiments
                      else experiments.sweep_groups())
        except ValueError as e:
            ap.error(str(e))
        if len({n for g in groups for n in g}) < sum(len(g) for g in groups) or not all(groups):
            ap.error("--by-group: each experiment in one group, and no group empty")
        return by_group(args, groups, devices, revision, out_path)
    keep = Path(args.keep) if args.keep else None
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    experiments_ = args.experiments or "all"
    counts = {"one": [1], "all": [len(devices)], "both": [1, len(devices)]}[args.part]
    runs = []
    if args.earlier:
        try:
            earlier = json.loads(Path(args.earlier).read_text())
            earlier_runs = earlier["runs"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            ap.error(f"--with {args.earlier}: not a sweep_scaling JSON ({e})")
        why = [f"{what} {earlier.get(key)!r}, here {here!r}" for what, key, here in (
            ("revision", "git_revision", revision), ("experiments", "experiments", experiments_),
            ("GPUs", "uuids", [d.uuid for d in devices])) if earlier.get(key) != here]
        if why:
            print(f"sweep_scaling: --with {args.earlier} was another sweep: {'; '.join(why)}", file=sys.stderr)
            return 2
        runs = [r for r in earlier_runs if r["gpus"] not in counts]
    resume = Path(args.resume) if args.resume else None
    state = {}
    if resume is not None:
        state_path = resume / "state.json"
        sweep_id = {"git_revision": revision, "experiments": experiments_, "uuids": [d.uuid for d in devices]}
        state, status = read_state(resume, sweep_id, "a sweep's")
        if status:
            return status
        state = {**sweep_id, "runs": state.get("runs", {})}

        def save_state():
            write_json(state_path, state)
        # The finished runs of the other part(s), as --with takes them.
        runs = [r for c, r in sorted(state["runs"].items()) if r.get("complete") and int(c) not in counts]

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="sweep-scaling-", dir=keep) as tmp:
        for count in counts:
            results = (resume or Path(tmp)) / f"gpus-{count}"
            done = state["runs"].get(str(count), {}) if resume else {}
            if done.get("complete"):
                print(f"sweep_scaling: the run on {count} GPU(s) finished in an earlier sitting ({done['seconds']:.1f} s)")
                runs.append({k: v for k, v in done.items() if k != "complete"})
                continue
            left = sitting_left(args.max_minutes, t0)  # what the runs before this one left of the sitting
            if left is not None and left < 0.05:
                print(f"sweep_scaling: out of --max-minutes before the run on {count} GPU(s); "
                      + (f"give the same command again to continue ({resume})" if resume else
                         "with --resume DIR a later sitting would continue it"), file=sys.stderr)
                return 4
            print(f"sweep_scaling: the quick suite on {count} GPU(s) ...", flush=True)
            compared = next((r for r in runs if "capped" in r), None)  # a finished run: its verdicts
            seconds, r = run_sweep(",".join(d.uuid for d in devices[:count]), args.experiments, args.build, results,
                                   left, force=not done, assign=args.assign,
                                   verdicts=compared["capped"] if compared else None)
            if resume is not None:
                done = {"gpus": count, "seconds": done.get("seconds", 0.0) + seconds,
                        "sittings": done.get("sittings", 0) + 1, "complete": r.returncode == 0}
                state["runs"][str(count)] = done
                save_state()
                seconds = done["seconds"]
            if r.returncode != 0:
                print(f"sweep_scaling: {run_failed(count, seconds, r)}", file=sys.stderr)
                if resume is not None and r.returncode == 4:
                    print(f"sweep_scaling: give the same command again to continue it ({resume})", file=sys.stderr)
                return 4 if r.returncode == 4 else 1
            run = run_record(count, devices, seconds, results,
                             **({"sittings": done["sittings"]} if resume is not None else {}))
            if resume is not None:
                state["runs"][str(count)] = {**run, "complete": True}
                save_state()
            runs.append(run)
            print(f"   {count} GPU(s): {seconds:.1f} s, {run['cases']} cases", flush=True)
            if keep is not None:  # the temporary directory goes; its results stay under --keep
                results.rename(keep / results.name)
    runs.sort(key=lambda r: r["gpus"])
    why = different_work(runs)
    if why:
        print(f"sweep_scaling: {why}: no comparison", file=sys.stderr)
        return 1
    not_ok(runs[0], "the sweep")
    one = next((r for r in runs if r["gpus"] == 1), None)
    many = next((r for r in runs if r["gpus"] == len(devices)), None)
    speedup = one["seconds"] / many["seconds"] if one and many else None
    two = len(devices) == 2
    result = {"gpus": [d.name for d in devices], "uuids": [d.uuid for d in devices], "nvidia_smi": smi_details(devices),
              "git_revision": revision, "experiments": experiments_,
              "protocol": "quick (run_experiments --quick --force)", "assign": args.assign, "cases": runs[0]["cases"],
              "files": runs[0]["files"], "runs": runs, "speedup": speedup,
              "target": TARGET if two else None, "holds": speedup >= TARGET if two and speedup else None}
    if speedup:
        print(f"sweep_scaling: {result['cases']} cases in {result['files']} files; 1 GPU {one['seconds']:.1f} s, "
              f"{many['gpus']} GPUs {many['seconds']:.1f} s: {speedup:.2f}x"
              + (f" (target {TARGET}x: {'holds' if result['holds'] else 'missed'})" if two else ""))
    else:
        print(f"sweep_scaling: the run on {runs[0]['gpus']} GPU(s) alone; the other with --with this JSON")
    if out_path is not None:
        write_json(out_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(paths.exit_status(main, "sweep_scaling"))
