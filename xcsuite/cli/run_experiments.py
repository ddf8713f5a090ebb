"""Runs the experiment suite (experiments/*.py) with build/xcorr_bench under the paper's protocol
and merges the results into results/<gpu>/<experiment>.json.

    python -m xcsuite run-experiments [EXPERIMENT ...] [--quick] [--force] [--remeasure VARIANTS]
                               [--max-minutes M] [--build DIR] [--estimate] [--list]

Protocol: 10 repetitions per case, each running back-to-back calls for >= 0.1 s of GPU time,
every repetition kept (outliers are removed later, by python -m xcsuite aggregate). --quick: 3
repetitions of 0.01 s and no case above 1e11 FMAs per call (--max-fmas), written to
results/<gpu>-quick/ so that smoke tests never mix with real results.

Peers: the registry that experiments are expanded with is `xcorr list --json` plus the peers that
can run here (`python -m xcsuite.peerbench list --json`: PyTorch, CuPy); a peer's cases run in
chunks of their own through `python -m xcsuite.peerbench`, with the flags xcorr_bench gets.

Resumable: the cases run in chunks (one xcorr_bench process each, a few minutes at most); after
every chunk the experiment's file is rewritten atomically, and a later run skips the cases it
already holds. A complete experiment is skipped unless --force (which starts it afresh, keeping
the old file as .bak; the same --force command after a stop resumes that run). --max-minutes stops cleanly before a chunk would overrun the budget, so a
lent GPU can be used in slices. A case the binary rejects or that crashes it is recorded as
failed and not retried (--retry-failed retries them). Every case records the git revision of the
binary that measured it; --remeasure V1,V2 runs again the cases of those variants measured at
another revision (after a change to their code), without rerunning the rest of the experiment;
--remeasure-cases REGEX narrows it to the case keys the expression matches (a change to one path).

One runner per GPU: a second one on the same GPU is refused (exit 2, naming the holder; see
xcsuite/gpulock.py). SIGINT, SIGTERM, SIGHUP and SIGQUIT stop the running xcorr_bench (its whole
process group), keep every case it finished and exit with 128 + the signal's number; rerun to resume.

Exit status: 0 all selected experiments complete; 4 stopped by --max-minutes with work left;
3 no GPU (one line on stderr); 2 bad usage, no build, an unreadable results file or the GPU in use
by another runner; 128 + N stopped by signal N; 1 other failure.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from xcsuite import paths
from xcsuite.benchjson import entry_key, is_iteration, load_bench_json
from xcsuite.cost import PROCESS_S, case_seconds, format_seconds
from xcsuite import gpus, merge
from xcsuite.gpulock import FolderLock, GpuBusy, GpuLock, gpu_key, lock_dir
from xcsuite import peerturn
from xcsuite.registry import NoGpu, gpu_info, is_peer, load_registry, peer_command, with_peers
from xcsuite.results import ResultsError, load_results
from xcsuite import resultfile

import experiments as suite
from experiments import selected as selected_experiments  # not through suite: tests replace it with a fake suite
from xcsuite.spec import expand, within_cap

PROTOCOL = {"repetitions": 10, "min_time_s": 0.1}
QUICK_PROTOCOL = {"repetitions": 3, "min_time_s": 0.01}
QUICK_MAX_FMAS = 1e11
MAX_CASES_PER_CHUNK = 200
EXIT_BUDGET = 4
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
ISOLATE = object()  # Runner.file_chunk: the binary refused the chunk before running it


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class State:
    """The merged results file of one experiment."""

    def __init__(self, path: Path, exp, protocol: dict, quick: bool, registry: list):
        self.path = path
        if path.exists():
            self.data = load_results(path)
        else:
            self.data = resultfile.new_file()
        meta = self.data.setdefault("xcorr_meta", {})
        meta.update({"experiment": exp.name, "title": exp.title, "paper": exp.paper,
                     "protocol": {**protocol, "quick": quick, "outliers": "IQR rule (1.5 IQR), at aggregation",
                                  "repetitions_kept": "all"},
                     "registry": registry})
        meta.setdefault("started", None)
        self.revision = None  # git revision of the binary measuring now (from its benchmark context)
        meta.setdefault("runs", [])

    @property
    def meta(self) -> dict:
        return self.data["xcorr_meta"]

    def done_keys(self, repetitions: int, retry_failed: bool, remeasure: "Remeasure | None" = None,
                  revision: str | None = None) -> set:
        """Cases that need no run. A case `remeasure` asks for counts only when it was measured at
        `revision` (its code changed since the older measurement)."""
        done = set()
        for key, c in self.data["cases"].items():
            if remeasure and remeasure.asks(key, c, revision):
                continue
            reps = sum(1 for e in resultfile.entries_of(c) if not e.get("error_occurred"))
            if c.get("status") == "ok" and reps >= repetitions:
                done.add(key)
            elif c.get("status") in ("failed", "rejected") and not retry_failed:
                done.add(key)
        return done

    def record(self, case, status: str, entries: list, message: str = "", device: dict | None = None) -> None:
        """Files the case's result (its repetitions, status, the revision that measured it and,
        where known, the device: nvidia-smi's index and UUID) in place of any older one, at the
        end: the file lists cases in the order they were measured."""
        self.data["cases"].pop(case.key, None)
        self.meta.get("stalled_s", {}).pop(case.key, None)  # filed: its budget-stopped seconds are moot
        info = {"status": status, "message": message, "time": now(), "revision": self.revision,
                **({"device": device} if device else {})}
        reps = [e for e in entries if is_iteration(e)]  # Google's aggregates are recomputed from these
        self.data["cases"][case.key] = resultfile.encode(resultfile.identity_from_line(case.line()), case.cold,
                                                         info, reps)

    def save(self) -> None:
        self.meta["updated"] = now()
        resultfile.write_atomic(self.path, self.data)


class Runner:
    def __init__(self, args, registry: list, protocol: dict, deadline: float | None, log_dir: Path):
        self.args = args
        self.bench = Path(args.build) / "xcorr_bench"
        self.registry = registry
        self.families = {v["name"]: v.get("family") for v in registry}
        self.peers = frozenset(v["name"] for v in registry if is_peer(v))
        self.protocol = protocol
        self.deadline = deadline
        self.log_dir = log_dir
        self.stopped_for_budget = False
        self.proc = None
        self.crashes = 0
        self.signal = None  # the stop signal received, if any
        self.pass_fds = ()  # the GPU lock: each benchmark holds it too (xcsuite/gpulock.py)
        self.device = None  # {"index", "uuid"} recorded with each case, where known
        self.env = None  # the benchmarks' environment (None: this process's)
        self.state_lock = contextlib.nullcontext()  # held while a chunk's results go into the shared State
        self.log_suffix = ""  # several GPUs: each its own log of an experiment (logs/fig22.gpu1.log)
        self.failure = None  # several GPUs: why this GPU's worker stopped early (its message)
        # The peers' turn (xcsuite/peerturn.py): one file for the host, beside the GPU locks, so that
        # no two peers are timed at once by this run's GPUs or by another runner's (XCORR_PEER_TURN
        # in the environment names another file)
        self.peer_turn = str(lock_dir() / "peer-turn.lock")

    def stop(self, signum, _frame=None) -> None:
        """Signal handler: no new chunk starts, and the running benchmark is killed (it runs in
        a session of its own, so nothing else would reach it)."""
        self.signal = self.signal or signum
        self.kill_child()

    def kill_child(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def est(self, case) -> float:
        return case_seconds(case, self.protocol["repetitions"], self.protocol["min_time_s"],
                            self.families.get(case.variant))

    def time_left(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.time()

    def tool(self, case) -> list[str]:
        """The benchmark command of a case: xcorr_bench, or for a peer (PyTorch, CuPy) the Python
        program with its interface (xcsuite/peerbench.py). A chunk holds cases of one tool."""
        return peer_command() if case.variant in self.peers else [str(self.bench)]

    def invoke(self, cases: list, exp_name: str, timeout: float) -> tuple[int, dict | None, str, bool]:
        """Runs one xcorr_bench (or peerbench) process on `cases`: (rc, json or None, stderr tail,
        timed out). A peer's process times each case holding the host's peers' turn (XCORR_PEER_TURN
        in its environment: xcsuite/peerturn.py)."""
        with tempfile.TemporaryDirectory(prefix="xcorr-chunk-") as tmp:
            cases_file = Path(tmp) / "cases.txt"
            cases_file.write_text("".join(c.line() + "\n" for c in cases))
            out = Path(tmp) / "out.json"
            tool = self.tool(cases[0])
            cmd = [*tool, "--cases", str(cases_file), "--min-time", str(self.protocol["min_time_s"]),
                   f"--benchmark_repetitions={self.protocol['repetitions']}",
                   "--benchmark_report_aggregates_only=false", "--benchmark_display_aggregates_only=true",
                   f"--benchmark_out={out}",
                   "--benchmark_out_format=json"]
            if cases[0].cold:
                cmd.insert(len(tool) + 2, "--cold")
            log = self.log_dir / f"{exp_name}{self.log_suffix}.log"
            with open(log, "a") as lf:
                lf.write(f"\n== {now()} {' '.join(cmd)}\n" + "".join("   " + c.line() + "\n" for c in cases))
                lf.flush()
                timed_out = False
                began = time.monotonic()
                peer = cases[0].variant in self.peers
                env = {peerturn.ENV: self.peer_turn, **(self.env or os.environ)} if peer else self.env
                self.proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.PIPE, text=True, start_new_session=True,
                                             pass_fds=self.pass_fds, env=env, cwd=paths.ROOT if peer else None)
                if self.signal is not None:  # arrived while the process was being started
                    self.kill_child()
                try:
                    _, err = self.proc.communicate(timeout=timeout)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    self.kill_child()
                    _, err = self.proc.communicate()
                rc = self.proc.returncode
                self.proc = None
                lf.write(err or "")
                lf.write(f"== rc={rc}{' (killed: time limit)' if timed_out else ''} after "
                         f"{time.monotonic() - began:.2f} s\n")
            data = None
            if out.exists() and out.stat().st_size:
                try:
                    data = load_bench_json(out)
                except (ValueError, json.JSONDecodeError):
                    data = None
        tail = " | ".join((err or "").strip().splitlines()[-3:])
        return rc, data, tail, timed_out

    def run_chunk(self, cases: list, state: State, exp_name: str) -> list:
        """Runs `cases`, records what finished; returns the cases still to run (after a crash)."""
        est = sum(self.est(c) for c in cases) + PROCESS_S
        own_limit = est * 4 + 120
        budget_bound = self.time_left() < own_limit
        timeout = min(self.time_left(), own_limit)
        rc, data, tail, timed_out = self.invoke(cases, exp_name, timeout)
        with self.state_lock:  # several GPUs' runners file into one State: one at a time
            rest = self.file_chunk(cases, state, exp_name, rc, data, tail, timed_out, budget_bound, timeout)
        if rest is ISOLATE:  # refused before running: isolate the offender(s) one by one
            return self.isolate(list(cases), state, exp_name)
        return rest

    def case_limit(self, c) -> float:
        """The time limit of a chunk of case c alone (run_chunk's own_limit)."""
        return (self.est(c) + PROCESS_S) * 4 + 120

    def file_chunk(self, cases, state, exp_name, rc, data, tail, timed_out, budget_bound, timeout) -> list:
        if self.signal is not None:
            pass  # killed by the runner's stop: not the binary's failure
        elif rc != 0 and data is None and rc != 2:
            self.crashes += 1
            if self.crashes >= 3:
                raise SystemExit(f"run-experiments: xcorr_bench failed three times in a row without a result "
                                 f"(last: exit status {rc}: {tail}); see {self.log_dir}")
        else:
            self.crashes = 0
        by_key = collections.defaultdict(list)
        if data is not None:
            ctx = data.get("context", {})
            self.merge_context(state, ctx)
            for e in data.get("benchmarks", []):
                try:
                    by_key[entry_key(e, ctx.get("xcorr_cold") == "1")].append(e)
                except ValueError as err:
                    print(f"warning: {exp_name}: unexpected benchmark entry: {err}", file=sys.stderr)
        reps = self.protocol["repetitions"]
        rest = []
        culprit_found = False
        for c in cases:
            entries = by_key.get(c.key, [])
            errors = [e for e in entries if e.get("error_occurred")]
            iters = [e for e in entries if is_iteration(e) and not e.get("error_occurred")]
            if errors:
                state.record(c, "failed", entries, errors[0].get("error_message", "error"), self.device)
            elif len(iters) >= reps:
                state.record(c, "ok", entries, device=self.device)
            elif self.signal is not None:
                rest.append(c)  # stopped by a signal: still pending
            elif rc == 2 and data is None:
                if len(cases) > 1:
                    return ISOLATE
                state.record(c, "rejected", [], tail or "xcorr_bench exit status 2", self.device)
            elif timed_out and budget_bound:
                # Killed by the --max-minutes budget: left pending. A case that was running alone
                # from the chunk's start had the whole chunk; its seconds add up over such runs, so
                # that a hang is blamed once they pass its own limit (else a budget shorter than
                # that limit stopped every run on it, and none ever got past it).
                if c is cases[0] and not culprit_found:
                    stalled = state.meta.setdefault("stalled_s", {})
                    stalled[c.key] = stalled.get(c.key, 0.0) + timeout
                    if stalled[c.key] >= self.case_limit(c):
                        culprit_found = True
                        state.record(c, "failed", entries, f"killed after exceeding its time limit "
                                     f"({stalled.pop(c.key):.0f} s over runs stopped by --max-minutes)", self.device)
                        self.stopped_for_budget = True
                        continue
                rest.append(c)
                self.stopped_for_budget = True
            elif not culprit_found and rc != 0:
                culprit_found = True
                why = "killed after exceeding its time limit" if timed_out else f"xcorr_bench exit status {rc}"
                state.record(c, "failed", entries, f"{why}: {tail}".strip(": "), self.device)
            elif rc != 0:
                rest.append(c)  # never started: the process died on an earlier case
            else:
                state.record(c, "failed", entries, f"xcorr_bench gave {len(iters)} of {reps} repetitions", self.device)
        state.save()
        return rest

    def isolate(self, cases: list, state: State, exp_name: str) -> list:
        """The binary refused a chunk (exit 2): run its cases one by one to find the offenders."""
        for i, c in enumerate(cases):
            if self.signal is not None:
                return cases[i:]
            if self.time_left() < self.est(c) + PROCESS_S:
                self.stopped_for_budget = True
                return cases[i:]
            self.run_chunk([c], state, exp_name)
            with self.state_lock:
                if i == 2 and all(state.data["cases"].get(x.key, {}).get("status") == "rejected" for x in cases[:3]):
                    # three refusals in a row: the command line, not the cases (keep them pending)
                    msg = state.data["cases"][cases[0].key]["message"]
                    for x in cases[:3]:
                        state.data["cases"].pop(x.key, None)
                    state.save()
                    raise SystemExit(f"run-experiments: xcorr_bench refuses every case: {msg}")
        return []

    @staticmethod
    def merge_context(state: State, ctx: dict) -> None:
        if not ctx:
            return
        old = state.data.get("context") or {}
        if old.get("xcorr_gpu_name") and ctx.get("xcorr_gpu_name") and old["xcorr_gpu_name"] != ctx["xcorr_gpu_name"]:
            raise SystemExit(f"run-experiments: {state.path} holds results of {old['xcorr_gpu_name']}, "
                             f"this GPU is {ctx['xcorr_gpu_name']}")
        if not old:
            state.data["context"] = ctx
        revs = state.meta.setdefault("git_revisions", [])
        rev = ctx.get("xcorr_git_revision")
        state.revision = rev
        if rev and rev not in revs:
            revs.append(rev)


def chunks(cases: list, est, limit_s: float, tool=lambda c: None) -> list:
    """Consecutive cases in chunks of about limit_s estimated seconds; a chunk holds cases of one
    tool (`tool(case)`: the benchmark command) and one cold setting."""
    out, cur, acc = [], [], 0.0
    for c in cases:
        t = est(c)
        if cur and (acc + t > limit_s or len(cur) >= MAX_CASES_PER_CHUNK or c.cold != cur[0].cold
                    or tool(c) != tool(cur[0])):
            out.append(cur)
            cur, acc = [], 0.0
        cur.append(c)
        acc += t
    if cur:
        out.append(cur)
    return out


def select(names: list[str]) -> list:
    known = suite.names()
    try:
        picked = selected_experiments(names, known) if names else known
    except ValueError as e:
        raise Stop(2, str(e)) from None  # a usage error (exit 2), like every other refusal of the arguments
    return [suite.load(n) for n in picked]


def expand_capped(e, registry, max_fmas):
    ex = expand(e, registry)
    ex.cases = within_cap(ex.cases, max_fmas)
    return ex


def recorded_pace(st: dict, cases: list, fam: dict) -> tuple[float, float, int]:
    """What one results file's recorded runs took against the model: (seconds, modelled seconds,
    chunks) over the chunks that ran to their end; `cases` the experiment's cases (every one of the
    file is among them, whatever cap it was measured under). A chunk is the cases of one device
    filed at one moment (their `time` stamps within 2 s of each other), timed from its run's start
    or that device's previous chunk; a run's last chunk is left out where the run ended at its
    --max-minutes budget (cut short), and a file the model cannot read counts nothing. The model of
    a chunk: its cases under the file's protocol plus one process start, as the runner sizes chunks."""
    stamp = dt.datetime.fromisoformat
    by_key = {c.key: c for c in cases}
    try:
        meta = st["xcorr_meta"]
        reps, min_time = meta["protocol"]["repetitions"], meta["protocol"]["min_time_s"]
        filed = collections.defaultdict(lambda: collections.defaultdict(list))  # device -> moment -> cases
        for k, v in st.get("cases", {}).items():
            if k in by_key and v.get("time"):
                filed[str((v.get("device") or {}).get("index", ""))][stamp(v["time"])].append(by_key[k])
        runs = [(stamp(r["started"]), stamp(r["ended"]), r.get("budget_min")) for r in meta.get("runs", [])
                if r.get("started") and r.get("ended")]
    except (KeyError, TypeError, ValueError):
        return 0.0, 0.0, 0
    actual = modelled = 0.0
    n = 0
    for start, end, budget in runs:
        for stamps in filed.values():  # per device: the GPUs of a --gpus run work through their chunks at once
            chunks = []
            for t in sorted(t for t in stamps if start < t <= end):
                if chunks and (t - chunks[-1][-1]).total_seconds() <= 2:
                    chunks[-1].append(t)
                else:
                    chunks.append([t])
            prev = start
            for c in chunks:
                took, prev = (c[-1] - prev).total_seconds(), c[-1]
                if budget and abs((c[-1] - start).total_seconds() - 60 * budget) <= 2:
                    continue  # cut by the budget
                actual += took
                modelled += PROCESS_S + sum(case_seconds(x, reps, min_time, fam.get(x.variant))
                                            for t in c for x in stamps[t])
                n += 1
    return actual, modelled, n


def measured_case_seconds(st: dict) -> dict:
    """The recorded cases' own wall seconds (key -> s): their last repetition's case_seconds, the
    bench's counter from the case's first entry (buffers, inputs, plan, warm-up, check and timing),
    for the cases measured by a bench that records it."""
    out = {}
    for k, v in st.get("cases", {}).items():
        reps = (v.get("reps") or {}).get("case_seconds")  # one per repetition where they differ
        got = reps[-1] if reps else (v.get("same") or {}).get("case_seconds")
        if isinstance(got, (int, float)) and got > 0:
            out[k] = float(got)
    return out


def estimate(exps, registry, protocol, results_dir: Path | None, max_fmas=None,
             remeasure: "Remeasure | None" = None, revision: str | None = None) -> float:
    fam = {v["name"]: v.get("family") for v in registry}
    total = total_pending = 0.0
    took = modelled = 0.0  # the recorded chunks' wall time and model (recorded_pace)
    chunks = 0
    by_variant = collections.defaultdict(lambda: [0, 0.0, 0.0])  # (experiment, variant) -> cases, measured, model
    print(f"{'experiment':<12} {'cases':>6} {'pending':>8} {'estimate':>10} {'pending':>10}")
    for e in exps:
        if e.derived_from:
            print(f"{e.name:<12} {'derived from ' + ', '.join(e.derived_from):>38}")
            continue
        cases = expand(e, registry).cases  # every case: the recorded ones, whatever cap they ran under
        secs = [(c, case_seconds(c, protocol["repetitions"], protocol["min_time_s"], fam.get(c.variant)))
                for c in within_cap(cases, max_fmas)]
        done = set()
        if results_dir is not None and (results_dir / f"{e.name}.json").exists():
            st = load_results(results_dir / f"{e.name}.json")
            done = {k for k, v in st.get("cases", {}).items()
                    if v.get("status") and not (remeasure and remeasure.asks(k, v, revision))}
            a, m, n = recorded_pace(st, cases, fam)
            took, modelled, chunks = took + a, modelled + m, chunks + n
            measured = measured_case_seconds(st)
            for c, model in secs:
                if c.key in measured:
                    b = by_variant[(e.name, c.variant)]
                    b[0], b[1], b[2] = b[0] + 1, b[1] + measured[c.key], b[2] + model
        t = sum(x for _, x in secs)
        tp = sum(x for c, x in secs if c.key not in done)
        npend = sum(1 for c, _ in secs if c.key not in done)
        total += t
        total_pending += tp
        print(f"{e.name:<12} {len(secs):>6} {npend:>8} {format_seconds(t):>10} {format_seconds(tp):>10}")
    print(f"{'total':<12} {'':>6} {'':>8} {format_seconds(total):>10} {format_seconds(total_pending):>10}"
          f"   (GPU time, {protocol['repetitions']} x {protocol['min_time_s']} s protocol; a model, not a measurement)")
    if chunks and modelled > 0 and total_pending > 0:
        pace = took / modelled
        print(f"This GPU's recorded runs of these experiments took {pace:.2f}x the model ({chunks} chunks, "
              f"{format_seconds(took)} against {format_seconds(modelled)}): the pending cases at that pace, "
              f"about {format_seconds(total_pending * pace)}.")
    if by_variant:
        # Where the model errs most, case by case (the bench's case_seconds against case_seconds
        # of xcsuite/cost.py): what a pool's takes and a chunk's size are only as good as.
        print(f"\n{'experiment':<14} {'variant':<28} {'cases':>6} {'measured':>10} {'model':>10} {'ratio':>7}")
        rows = sorted(by_variant.items(), key=lambda kv: -abs(kv[1][1] - kv[1][2]))
        for (exp, variant), (n, got, mod) in rows[:12]:
            print(f"{exp:<14} {variant:<28} {n:>6} {format_seconds(got):>10} {format_seconds(mod):>10} "
                  f"{got / mod if mod > 0 else float('inf'):>6.2f}x")
        if len(rows) > 12:
            print(f"({len(rows) - 12} more pairs of experiment and variant, closer to the model)")
    return total_pending


class Stop(Exception):
    """Ends the command with one line on stderr and the given exit status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Remeasure:
    """--remeasure: the variants whose code changed, narrowed by --remeasure-cases to the case keys
    a pattern matches (a change to one code path)."""

    variants: frozenset = frozenset()
    only: re.Pattern | None = None

    def asks(self, key: str, case: dict, revision: str | None) -> bool:
        """Whether this recorded case runs again: its variant is named, its key matches, and
        another revision measured it."""
        return (key.split("|", 1)[0] in self.variants and case.get("revision") != revision
                and (self.only is None or self.only.search(key) is not None))


@dataclass
class Setup:
    """What the command line selects, checked against the build's registry."""

    exps: list
    registry: list
    protocol: dict
    max_fmas: float | None
    remeasure: Remeasure
    shard: tuple | None = None  # (K, N): --shard K/N
    shard_keys: frozenset | None = None  # (experiment, case key) of the shard's cases


@dataclass
class Plan:
    """One experiment's work left: its results file and the cases to run, in definition order."""

    exp: object
    state: State
    pending: list


def positive(text: str) -> float:
    """An option's number that must be above 0 (argparse type): 0 would read as "no limit" and a
    negative one selected nothing or stopped at once, both silently."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:  # NaN too
        raise argparse.ArgumentTypeError(f"must be above 0, not {text} (leave the option out for no limit)")
    return value


def parse_args(argv) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("experiments", nargs="*", help="experiments to run (names or comma lists; default: all)")
    ap.add_argument("--build", default=str(paths.ROOT / "build"), help="build directory (default: build/)")
    ap.add_argument("--results", default=str(paths.RESULTS), help="results root (default: results/)")
    ap.add_argument("--quick", action="store_true", help="smoke test: 3 repetitions of 0.01 s, to results/<gpu>-quick/")
    ap.add_argument("--force", action="store_true", help="rerun selected experiments from scratch")
    ap.add_argument("--retry-failed", action="store_true", help="run again the cases recorded as failed")
    ap.add_argument("--remeasure", default="", metavar="VARIANTS",
                    help="comma-separated variants whose code changed: their cases measured at another git "
                         "revision are run again (resumable; the old measurement stays until replaced)")
    ap.add_argument("--remeasure-cases", default=None, metavar="REGEX",
                    help="with --remeasure: only the cases whose key matches (a regular expression, searched), "
                         "e.g. the problems whose code path changed: '\\|96x96\\|' (keys as in the results files)")
    ap.add_argument("--max-minutes", type=positive, default=None,
                    help="stop cleanly before this budget (minutes, above 0) is exceeded; default: no limit")
    ap.add_argument("--chunk-seconds", type=positive, default=150.0, help="estimated GPU seconds per bench process")
    ap.add_argument("--max-fmas", type=positive, default=None,
                    help="skip cases above this many FMAs per call (default: none; --quick: 1e11)")
    ap.add_argument("--estimate", action="store_true", help="print the cost of the selected experiments and exit")
    ap.add_argument("--registry", default=None, help="registry JSON for --estimate without a build")
    ap.add_argument("--list", action="store_true", help="list the experiments and exit")
    ap.add_argument("--allow-dirty", action="store_true",
                    help="record measurements of a build whose git revision is '-dirty' or unknown")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--gpus", default="all", metavar="all|I,J,...",
                    help="the GPUs to measure on at once, one benchmark process each: 'all' visible (default; "
                         "CUDA_VISIBLE_DEVICES limits them) or nvidia-smi indices or UUIDs; each GPU takes the "
                         "next cases from a shared pool (largest estimated first) as it runs short, the variants "
                         "of one shape to one GPU")
    ap.add_argument("--assign", choices=["pool", "deal"], default="pool",
                    help="several GPUs: 'pool' (default) each GPU takes the next figure points as it runs short; "
                         "'deal' each GPU its share dealt by estimated cost before the run (the older way, kept "
                         "for A/B runs on one machine: scripts/sweep-scaling --assign)")
    ap.add_argument("--shard", default=None, metavar="K/N",
                    help="only shard K of N (0 <= K < N) of the selected cases, dealt by estimated cost "
                         "(python -m xcsuite slurm-sweep: one per task of a job array)")
    ap.add_argument("--merge", nargs="+", default=None, metavar="DIR",
                    help="merge the results under DIR... (results roots or <gpu> folders, e.g. a sweep's shards) "
                         "into --results, and exit")
    ap.add_argument("--on-conflict", choices=("error", "keep", "replace"), default="error",
                    help="--merge: two different measurements of a case: refuse the merge (default), keep the "
                         "target's, or take the source's")
    return ap.parse_args(argv)


def setup(args) -> Setup:
    exps = select(args.experiments)
    try:
        registry = load_registry(args.build, args.registry)
        if args.registry is None:
            registry = with_peers(registry)  # the peers run in the same runs (xcsuite/peerbench.py)
    except (FileNotFoundError, RuntimeError, ValueError) as e:
        raise Stop(2, str(e)) from None
    variants = frozenset(v.strip() for v in args.remeasure.split(",") if v.strip())
    unknown = sorted(variants - {v["name"] for v in registry})
    if unknown:
        raise Stop(2, f"--remeasure: unknown variant(s) {', '.join(unknown)}")
    only = None
    if args.remeasure_cases is not None:
        if not variants:
            raise Stop(2, "--remeasure-cases narrows --remeasure: name the variants too")
        try:
            only = re.compile(args.remeasure_cases)
        except re.error as e:
            raise Stop(2, f"--remeasure-cases {args.remeasure_cases!r}: {e}") from None
    max_fmas = args.max_fmas if args.max_fmas is not None else (QUICK_MAX_FMAS if args.quick else None)
    su = Setup(exps, registry, QUICK_PROTOCOL if args.quick else PROTOCOL, max_fmas, Remeasure(variants, only))
    if args.shard:
        try:
            su.shard = gpus.parse_shard(args.shard)
        except gpus.GpuSelectionError as e:
            raise Stop(2, str(e)) from None
        su.shard_keys = shard_keys(su, *su.shard)
    return su


def point_of(exp_name: str, case) -> tuple:
    """The figure point a case belongs to: the variants compared at one shape, dealt whole to
    one GPU or shard where the balance allows (xcsuite/gpus.py deal)."""
    return exp_name, case.shape.form, tuple(case.shape.dims()), case.shape.window, case.shape.normalize, case.cold


def case_cost(su: Setup, families: dict):
    return lambda item: case_seconds(item[1], su.protocol["repetitions"], su.protocol["min_time_s"],
                                     families.get(item[1].variant))


def shard_keys(su: Setup, k: int, n: int) -> frozenset:
    """The (experiment, case key) pairs of shard k of n: every selected case (measured or not, so
    that a shard is the same whenever it runs) dealt into n shards of about equal estimated cost."""
    items = []
    for e in su.exps:
        if e.derived_from or not e.shapes:
            continue
        items += [(e.name, c) for c in expand_capped(e, su.registry, su.max_fmas).cases]
    fam = {v["name"]: v.get("family") for v in su.registry}
    bins = gpus.deal(items, n, case_cost(su, fam), lambda it: point_of(*it))
    return frozenset((name, c.key) for name, c in bins[k])


def print_estimate(args, su: Setup) -> None:
    """--estimate: the cost of every selected experiment, and of what its results file lacks
    where a GPU tells which results folder is meant."""
    results_dir = None
    ctx = {}
    try:
        ctx = gpu_info(args.build)
        results_dir = Path(args.results) / (paths.gpu_slug(ctx["xcorr_gpu_name"]) + (paths.QUICK_SUFFIX if args.quick else ""))
    except (NoGpu, FileNotFoundError, RuntimeError, KeyError):
        pass
    estimate(su.exps, su.registry, su.protocol, results_dir, su.max_fmas, su.remeasure, ctx.get("xcorr_git_revision"))


def measuring_gpu(args, env: dict | None = None) -> dict:
    """The benchmark context of the GPU the build will measure (under `env`); refused where there
    is none or where its measurements could not be traced to a commit."""
    try:
        ctx = gpu_info(args.build, env)
    except NoGpu as e:
        raise Stop(3, f"no GPU: {e}") from None
    except (FileNotFoundError, RuntimeError) as e:
        raise Stop(2, str(e)) from None
    if not (Path(args.build) / "xcorr_bench").exists():
        raise Stop(2, f"{args.build}/xcorr_bench not found: build first")
    rev = str(ctx.get("xcorr_git_revision", "unknown"))
    if not args.quick and not args.allow_dirty and (rev.endswith("-dirty") or rev == "unknown"):
        # Results name the revision they measured; "-dirty" or "unknown" names no code anyone can
        # check out (scripts/git-revision says how the revision is found on a copied tree).
        raise Stop(2, f"the binary in {args.build} reports git revision '{rev}': its sources are not a "
                      "commit, so its measurements could not be traced. Commit and rebuild (on a copied tree, set "
                      "XCORR_GIT_REVISION to the copied commit's hash before building), or pass --allow-dirty")
    if not args.quick and ctx.get("xcorr_environment"):
        # A switch (xcorr help, "environment") forces one of the library's rules: its timings are
        # an A/B's, not the library's, and would be filed as if they were.
        raise Stop(2, f"the library's switches are set ({ctx['xcorr_environment']}): the suite measures the "
                      "library as it chooses; unset them (scripts/dev/ab-bench compares a switch with the default)")
    return ctx


@contextlib.contextmanager
def gpu_lock(ctx: dict, smi: dict, env=None):
    """Holds the GPU's lock (xcsuite/gpulock.py) for the measuring run."""
    lock = GpuLock(gpu_key(ctx, smi.get("gpus", []), os.environ if env is None else env), ctx.get("xcorr_gpu_name", ""))
    try:
        lock.acquire()
    except GpuBusy as e:
        raise Stop(2, f"{e}: wait until it ends, or stop it") from None
    except OSError as e:
        raise Stop(2, f"cannot take the GPU lock {lock.path}: {e} (set XCORR_LOCK_DIR to a writable "
                      "folder shared by every runner of this machine)") from None
    try:
        yield lock
    finally:
        lock.release()


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        for e in suite.load_all():
            print(f"{e.name:<12} {e.paper:<28} {e.title}")
        return 0
    try:
        if args.merge:
            return merge_results(args)
        su = setup(args)
        if args.estimate:
            print_estimate(args, su)
            return 0
        devices, env = choose_devices(args)
        if len(devices) > 1:
            return measure_multi(args, su, devices)
        ctx = measuring_gpu(args, env)
        smi = gpus.nvidia_smi()
        with gpu_lock(ctx, smi, env) as lock:
            return measure(args, su, ctx, smi, lock, devices[0] if devices else None, env)
    except (Stop, ResultsError, merge.MergeError) as e:
        print(f"run-experiments: {e}", file=sys.stderr)
        return e.status if isinstance(e, Stop) else 2


def choose_devices(args) -> tuple[list, dict | None]:
    """The GPUs --gpus selects among those visible (nvidia-smi's list, CUDA_VISIBLE_DEVICES), and
    the benchmarks' environment where one of several is selected. ([], None): nvidia-smi cannot
    tell, so the run measures CUDA's device 0 as it always did."""
    listed = gpus.list_devices()
    shown = gpus.visible(listed) if listed else None
    if shown is None:
        if args.gpus != "all":
            why = ("nvidia-smi lists no GPU here" if not listed else
                   f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')} names GPUs nvidia-smi does not list")
            raise Stop(2, f"--gpus {args.gpus}: {why}; leave --gpus out to measure CUDA's device 0")
        return [], None
    try:
        chosen = gpus.select(args.gpus, shown)
    except gpus.GpuSelectionError as e:
        raise Stop(2, str(e)) from None
    if len(chosen) == 1 and len(shown) > 1:  # one of several: its benchmarks see that one only
        return chosen, {**os.environ, "CUDA_VISIBLE_DEVICES": chosen[0].uuid}
    return chosen, None


def measure(args, su: Setup, ctx: dict, smi: dict, lock, device=None, env=None) -> int:
    """The measuring run, under the GPU lock: plans the pending cases, runs them, reports."""
    out_dir = results_folder(args, ctx)
    log_dir = out_dir / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    start = time.time()
    deadline = start + args.max_minutes * 60 if args.max_minutes else None
    runner = Runner(args, su.registry, su.protocol, deadline, log_dir)
    runner.pass_fds = (lock.fd,)
    runner.device = device.record() if device else None
    runner.env = env
    saved_handlers = {s: signal.signal(s, runner.stop) for s in STOP_SIGNALS}
    folder_lock = FolderLock(out_dir)
    try:
        take_folder_lock(folder_lock)
        plans = plan(args, su, ctx, out_dir)
        total_est = sum(runner.est(c) for p in plans for c in p.pending)
        print(f"GPU: {ctx.get('xcorr_gpu_name')} -> {out_dir}; {sum(len(p.pending) for p in plans)} cases pending in "
              f"{len(plans)} experiment(s), estimated {format_seconds(total_est)}"
              + (f"; budget {args.max_minutes:g} min" if args.max_minutes else ""))
        if not plans:
            return 0
        run_all(plans, runner, args, ctx, smi, total_est)
        return report(plans, runner, args, start)
    finally:
        runner.kill_child()
        for s, h in saved_handlers.items():
            signal.signal(s, h)
        folder_lock.release()


def results_folder(args, ctx: dict) -> Path:
    return Path(args.results) / (paths.gpu_slug(ctx.get("xcorr_gpu_name", "unknown"))
                                 + (paths.QUICK_SUFFIX if args.quick else ""))


def take_folder_lock(lock: FolderLock) -> None:
    try:
        lock.acquire()
    except GpuBusy as e:
        raise Stop(2, f"{e}: one writer per results folder; to measure on several GPUs of one model, "
                      "run one runner with --gpus") from None
    except OSError as e:
        raise Stop(2, f"cannot take the lock {lock.path}: {e} (set XCORR_LOCK_DIR to a writable folder)") from None


def mark_complete(meta: dict) -> None:
    """An experiment's file complete: a later --force starts it afresh (not a resume)."""
    meta["complete"] = True
    meta.pop("force_started", None)


def plan(args, su: Setup, ctx: dict, out_dir: Path) -> list[Plan]:
    """Each experiment's cases not yet measured; records the plan in its results file, and marks
    an experiment with nothing left complete."""
    plans = []
    for e in su.exps:
        if e.derived_from or not e.shapes:
            print(f"{e.name}: derived from {', '.join(e.derived_from)}: nothing to run")
            continue
        ex = expand_capped(e, su.registry, su.max_fmas)
        for w in ex.warnings:
            print(f"warning: {w}", file=sys.stderr)
        path = out_dir / f"{e.name}.json"
        if args.force and path.exists():
            # A --force run that stopped (budget, signal) left a partial file marked force_started:
            # the same command resumes it, and .bak keeps the complete file from before it (copied
            # again, the partial replaced it and the run began afresh once more).
            try:
                meta = load_results(path).get("xcorr_meta", {})
            except ResultsError:  # a damaged file: --force is the way out its message names
                meta = {}
            if meta.get("force_started") and not meta.get("complete"):
                print(f"{e.name}: resuming the --force run that stopped ({path.name}.bak holds the file before it)")
            else:
                shutil.copy2(path, path.with_suffix(".json.bak"))
                path.unlink()
        state = State(path, e, su.protocol, args.quick, su.registry)
        if args.force:
            state.meta["force_started"] = True
        state.meta["cases_planned"] = len(ex.cases)  # for "incomplete: 12 of 105 cases" on the pages
        old = state.data.get("context", {}).get("xcorr_gpu_name")
        if old and old != ctx.get("xcorr_gpu_name"):
            raise Stop(2, f"{path} holds results of {old}, not {ctx.get('xcorr_gpu_name')}")
        state.meta["max_fmas"] = su.max_fmas
        state.meta["unavailable"] = [{"series": s, "shape": (list(sh.dims()) if sh else None), "reason": r}
                                     for s, sh, r in ex.unavailable]
        state.data["members"] = resultfile.encode_members(ex.members)  # what the figures draw: no reader expands
        done = state.done_keys(su.protocol["repetitions"], args.retry_failed, su.remeasure,
                               ctx.get("xcorr_git_revision"))
        pending = [c for c in ex.cases if c.key not in done]
        if su.shard_keys is not None:
            mine = [c for c in ex.cases if (e.name, c.key) in su.shard_keys]
            state.meta["shard"] = {"index": su.shard[0], "count": su.shard[1], "cases": len(mine)}
            pending = [c for c in mine if c.key not in done]
        if not pending:
            if not state.meta.get("complete"):
                mark_complete(state.meta)
                state.meta["finished"] = state.meta.get("finished") or now()
                state.save()
            print(f"{e.name}: complete ({len(ex.cases)} cases), skipped; --force reruns it")
            continue
        plans.append(Plan(e, state, pending))
    return plans


def progress_bar(total_est: float, disable: bool):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return None
    return tqdm(total=round(total_est), unit="s", disable=disable, dynamic_ncols=True,
                bar_format="{desc} {percentage:3.0f}%|{bar}| est. {n_fmt}/{total_fmt} s [{elapsed}<{remaining}]")


def advance(bar, seconds: float) -> None:
    """Moves the bar by `seconds` of estimated work: the running sum rounded, not each step (the
    rounded steps summed past the rounded total, and tqdm then drops a total it is past: the end
    of a run read "0% est. 89/? s")."""
    bar.est_done = getattr(bar, "est_done", 0.0) + seconds
    bar.update(max(0, min(bar.total, round(bar.est_done)) - bar.n))


def run_all(plans: list[Plan], runner: Runner, args, ctx: dict, smi: dict, total_est: float) -> None:
    """Runs the plans one experiment after another, until done, a stop signal or the budget."""
    bar = progress_bar(total_est, args.no_progress)
    revision = paths.git_revision()
    try:
        for p in plans:
            if runner.signal is not None:
                break
            run_experiment(p, runner, args, ctx.get("xcorr_git_revision") or revision, smi, bar)
            if runner.stopped_for_budget:
                break
    finally:
        if bar is not None:
            bar.close()


def next_chunk(queue, runner: Runner, chunk_seconds: float) -> list | None:
    """The cases of the next benchmark process: as many as fit the chunk size and the time left
    (None: not even one fits the budget)."""
    chunk = chunks(list(queue), runner.est, chunk_seconds, runner.tool)[0]
    if runner.time_left() >= sum(runner.est(c) for c in chunk) + PROCESS_S:
        return chunk
    fit, acc = [], PROCESS_S
    for c in chunk:
        if acc + runner.est(c) > runner.time_left():
            break
        fit.append(c)
        acc += runner.est(c)
    return fit or None


def run_experiment(p: Plan, runner: Runner, args, git_rev: str, smi: dict, bar) -> None:
    """Runs one experiment's pending cases chunk by chunk, recording the run in its file."""
    meta = p.state.meta
    meta["started"] = meta.get("started") or now()
    meta["complete"] = False
    meta["finished"] = None
    meta["git_revision"] = git_rev
    meta.setdefault("nvidia_smi", {}).setdefault("first", smi)
    run = {"started": now(), "nvidia_smi_start": smi, "cases_pending": len(p.pending), "chunks": 0,
           "budget_min": args.max_minutes}
    meta["runs"].append(run)
    p.state.save()
    queue = collections.deque(p.pending)
    while queue and runner.signal is None:
        chunk = next_chunk(queue, runner, args.chunk_seconds)
        if chunk is None:
            runner.stopped_for_budget = True
            break
        for _ in chunk:
            queue.popleft()
        if bar is not None:
            bar.set_description_str(f"{p.exp.name} ({len(queue) + len(chunk)} left)")
        rest = runner.run_chunk(chunk, p.state, p.exp.name)
        run["chunks"] += 1
        for c in reversed(rest):
            queue.appendleft(c)
        if bar is not None:
            advance(bar, sum(runner.est(c) for c in chunk if c not in rest))
        if runner.stopped_for_budget or runner.signal is not None:
            break
    run["ended"] = now()
    run["nvidia_smi_end"] = gpus.nvidia_smi()
    meta["nvidia_smi"]["last"] = run["nvidia_smi_end"]
    if not queue and not runner.stopped_for_budget:  # (a signal leaves a queue)
        mark_complete(meta)
        meta["finished"] = now()
    p.state.save()


def report(plans: list[Plan], runner: Runner, args, start: float) -> int:
    """The run's last line and exit status: stopped by a signal, by the budget, or done."""
    if runner.signal is not None:
        print(f"run-experiments: stopped by {signal.Signals(runner.signal).name}; the finished cases are saved, "
              "rerun to resume", file=sys.stderr)
        return 128 + runner.signal
    failed = sum(1 for p in plans for c in p.state.data["cases"].values() if c["status"] != "ok")
    elapsed = time.time() - start
    if runner.stopped_for_budget:
        print(f"run-experiments: stopped after {format_seconds(elapsed)} (--max-minutes {args.max_minutes:g}); "
              f"rerun the same command to resume")
        return EXIT_BUDGET
    print(f"run-experiments: done in {format_seconds(elapsed)}" + (f"; {failed} case(s) failed (see the files' "
                                                                   "\"cases\" and logs/)" if failed else ""))
    return 0


# ---- several GPUs at once (--gpus) --------------------------------------------------------------

# The smallest take from the pool, in process starts' worth of estimated GPU time: a take is a
# benchmark process or more (one per tool), so smaller takes at the end would spend more on
# starting processes than an even finish saves (notes/multi-gpu.md: with takes shrinking to one
# figure point, the two-GPU sweep of fig20, nmn and fig23 ran 37 processes against the deal's 7).
POOL_LEAST_PROCESSES = 8


@dataclass
class Worker:
    """One GPU's part in the run: its runner (benchmarks with CUDA_VISIBLE_DEVICES=<its UUID>),
    the experiments of its results folder, and the pool of their cases it takes work from as it
    runs short (gpus.Pool: the GPUs of one folder share one; with --assign deal, each GPU a pool of
    its own dealt share)."""

    device: object
    runner: Runner
    plans: list  # [Plan, ...], in definition order
    pool: gpus.Pool
    thread: threading.Thread | None = None
    bar: object = None  # the run's progress bar, shared by the GPUs' threads (moved under the state lock)


def measure_multi(args, su: Setup, devices: list) -> int:
    """Measures on several GPUs at once: one thread per GPU drives that GPU's benchmark processes
    (one at a time, as a single-GPU run does), and every result is filed by this process into
    the State of its experiment under one lock, so the results files have a single writer; the
    peers' processes take turns for their timing (Runner.peer_turn). GPUs
    of one model share their results folder (each case records its device); another model gets
    its own folder."""
    smi = gpus.nvidia_smi()
    with contextlib.ExitStack() as stack:
        groups: dict[Path, list] = {}
        for d in devices:
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": d.uuid}
            ctx = measuring_gpu(args, env)
            try:
                lock = stack.enter_context(gpu_lock(ctx, smi, env))
            except Stop as e:
                print(f"warning: {d.label()}: {e}; measuring on the others", file=sys.stderr)
                continue
            groups.setdefault(results_folder(args, ctx), []).append((d, env, ctx, lock))
        if not groups:
            raise Stop(2, "every selected GPU is in use by another runner")
        start = time.time()
        deadline = start + args.max_minutes * 60 if args.max_minutes else None
        state_lock = threading.Lock()
        families = {v["name"]: v.get("family") for v in su.registry}
        workers, all_plans, runs, grand = [], [], {}, 0.0
        for out_dir, members in groups.items():
            take_folder_lock(_entered_folder_lock(stack, out_dir))
            log_dir = out_dir / "logs"
            log_dir.mkdir(parents=True, exist_ok=True)
            plans = plan(args, su, members[0][2], out_dir)
            all_plans += plans
            items = [(p, c) for p in plans for c in p.pending]
            cost = case_cost(su, families)
            point, experiment = (lambda it: point_of(it[0].exp.name, it[1])), (lambda it: it[0].exp.name)
            if args.assign == "pool":
                # One pool per folder: each GPU takes the next figure points (a point's variants on
                # one GPU) of one experiment as it runs short, at most a chunk's worth at a time and
                # no less than POOL_LEAST_PROCESSES process starts' worth (gpus.Pool). The peers'
                # cases of an experiment are one unit instead (peer_unit).
                unit = peer_unit(su, point)
                shared = gpus.Pool(items, len(members), cost, unit, most=args.chunk_seconds,
                                   least=POOL_LEAST_PROCESSES * PROCESS_S, bucket=experiment,
                                   whole=lambda key: isinstance(key, PeerUnit))
                pools = [shared] * len(members)
            else:  # each GPU its dealt share, an experiment's part of it a take
                pools = [gpus.Pool(b, 1, cost, point, least=float("inf"), bucket=experiment)
                         for b in gpus.deal(items, len(members), cost, point)]
            for (d, env, ctx, lock), pool in zip(members, pools):
                r = Runner(args, su.registry, su.protocol, deadline, log_dir)
                r.pass_fds, r.device, r.env, r.state_lock = (lock.fd,), d.record(), env, state_lock
                r.log_suffix = f".gpu{d.index}"
                workers.append(Worker(d, r, plans, pool))
            total = sum(cost(it) for it in items)
            grand += total
            print(f"GPUs: {', '.join(d.index for d, *_ in members)} ({members[0][2].get('xcorr_gpu_name')}) -> "
                  f"{out_dir}; {len(items)} cases pending in {len(plans)} experiment(s), estimated "
                  f"{format_seconds(total)} of GPU time, about {format_seconds(total / len(members))} on each GPU "
                  + ("(taken as each runs short)" if args.assign == "pool" else "(dealt before the run)")
                  + (f"; budget {args.max_minutes:g} min" if args.max_minutes else ""))
            for p in plans:
                runs[id(p)] = start_run(p, args, members[0][2], smi, [d.record() for d, *_ in members])
        if not all_plans:
            return 0
        return run_workers(workers, all_plans, runs, state_lock, args, su, start, grand)


@dataclass(frozen=True)
class PeerUnit:
    """The unit key of the peers' cases in one experiment (peer_unit)."""

    experiment: str


def peer_unit(su: Setup, point):
    """The pool's unit of an item: its figure point for our cases; for the peers' (PyTorch, CuPy,
    NPP), all of the experiment's peer cases, taken whole by one GPU and run in as few processes as
    the chunk size allows: each process is 3-6 s of start-up (PyTorch's import, the CUDA context,
    the first cuFFT plan and kernels), and a unit per peer gave the normalized group twelve peer
    processes on two GPUs against one GPU's six (notes/multi-gpu.md, session 56), while the pool
    balances the GPUs with our cases."""
    peers = frozenset(v["name"] for v in su.registry if is_peer(v))
    return lambda it: PeerUnit(it[0].exp.name) if it[1].variant in peers else point(it)


def _entered_folder_lock(stack: contextlib.ExitStack, out_dir: Path) -> FolderLock:
    lock = FolderLock(out_dir)
    stack.callback(lock.release)
    return lock


def start_run(p: Plan, args, ctx: dict, smi: dict, devices: list) -> dict:
    """Marks the experiment started and records this run in its file (as run_experiment does)."""
    meta = p.state.meta
    meta["started"] = meta.get("started") or now()
    meta["complete"] = False
    meta["finished"] = None
    meta["git_revision"] = ctx.get("xcorr_git_revision") or paths.git_revision()
    meta.setdefault("nvidia_smi", {}).setdefault("first", smi)
    run = {"started": now(), "nvidia_smi_start": smi, "cases_pending": len(p.pending), "chunks": 0,
           "budget_min": args.max_minutes, "devices": devices}
    meta["runs"].append(run)
    p.state.save()
    return run


def pick(queues: list) -> int | None:
    """Which experiment's queue gives a GPU's next chunk: the first with cases left (None: none)."""
    return next((i for i, q in enumerate(queues) if q), None)


def work(w: Worker, runs: dict, state_lock, args) -> None:
    """A GPU's thread: cases taken from the pool as it runs short, chunk by chunk (in their
    experiments' definition order) until done, a stop signal, the budget or three crashes in a row
    (then w.runner.failure says why; the other GPUs go on)."""
    r = w.runner
    index = {id(p): i for i, p in enumerate(w.plans)}
    where = [{id(c): j for j, c in enumerate(p.pending)} for p in w.plans]  # definition order
    queues = [collections.deque() for _ in w.plans]

    def refill() -> bool:
        got = w.pool.take()
        for i in sorted({index[id(p)] for p, _ in got}):
            merged = list(queues[i]) + [c for p, c in got if index[id(p)] == i]
            queues[i] = collections.deque(sorted(merged, key=lambda c: where[i][id(c)]))
        return bool(got)

    try:
        while r.signal is None and not r.stopped_for_budget:
            i = pick(queues)
            if i is None and refill():
                continue
            if i is None:
                break
            p, queue = w.plans[i], queues[i]
            chunk = next_chunk(queue, r, args.chunk_seconds)
            if chunk is None:
                r.stopped_for_budget = True
                break
            for _ in chunk:
                queue.popleft()
            rest = r.run_chunk(chunk, p.state, p.exp.name)
            with state_lock:
                runs[id(p)]["chunks"] += 1
                if w.bar is not None:
                    w.bar.set_description_str(f"{p.exp.name} (GPU {w.device.index})", refresh=False)
                    advance(w.bar, sum(r.est(c) for c in chunk if c not in rest))
            queue.extendleft(reversed(rest))
    except SystemExit as e:
        r.failure = f"{w.device.label()}: {e.code}"
    except Exception as e:  # noqa: BLE001  (reported with the others' results saved)
        r.failure = f"{w.device.label()}: {type(e).__name__}: {e}"


def run_workers(workers: list, plans: list, runs: dict, state_lock, args, su: Setup, start: float,
                total_est: float) -> int:
    def stop(signum, _frame=None):
        for w in workers:
            w.runner.stop(signum)

    saved = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    bar = progress_bar(total_est, args.no_progress)  # estimated GPU-seconds of every GPU's cases
    try:
        for w in workers:
            w.bar = bar
            w.thread = threading.Thread(target=work, args=(w, runs, state_lock, args), name=f"gpu{w.device.index}",
                                        daemon=True)
            w.thread.start()
        for w in workers:
            while w.thread.is_alive():
                w.thread.join(0.2)  # wakes for signals, which Python runs in this thread
    finally:
        for w in workers:
            w.runner.kill_child()
        for s, h in saved.items():
            signal.signal(s, h)
        if bar is not None:
            bar.close()
    smi_end = gpus.nvidia_smi()
    sig = next((w.runner.signal for w in workers if w.runner.signal is not None), None)
    budget = any(w.runner.stopped_for_budget for w in workers)
    failures = [w.runner.failure for w in workers if w.runner.failure]
    with state_lock:
        for p in plans:
            run, meta = runs[id(p)], p.state.meta
            run["ended"] = now()
            run["nvidia_smi_end"] = smi_end
            meta["nvidia_smi"]["last"] = smi_end
            done = p.state.done_keys(su.protocol["repetitions"], False, su.remeasure, p.state.revision)
            if all(c.key in done for c in p.pending):
                mark_complete(meta)
                meta["finished"] = now()
            p.state.save()
    if sig is not None:
        print(f"run-experiments: stopped by {signal.Signals(sig).name}; the finished cases are saved, "
              "rerun to resume", file=sys.stderr)
        return 128 + sig
    for f in failures:
        print(f"run-experiments: {f}", file=sys.stderr)
    if failures:
        print("run-experiments: the other GPUs' cases are saved; rerun to resume", file=sys.stderr)
        return 1
    elapsed = time.time() - start
    if budget:
        print(f"run-experiments: stopped after {format_seconds(elapsed)} (--max-minutes {args.max_minutes:g}); "
              f"rerun the same command to resume")
        return EXIT_BUDGET
    failed = sum(1 for p in plans for c in p.state.data["cases"].values() if c["status"] != "ok")
    print(f"run-experiments: done in {format_seconds(elapsed)} on {len(workers)} GPUs"
          + (f"; {failed} case(s) failed (see the files' \"cases\" and logs/)" if failed else ""))
    return 0


# ---- merging (--merge) -----------------------------------------------------------------------------

def merge_results(args) -> int:
    """--merge DIR...: the results under each DIR into --results (xcsuite/merge.py); nothing is
    written if any source is refused or two measurements of a case conflict (--on-conflict)."""
    root = Path(args.results).resolve()
    # A source without results files is a shard that measured nothing (its task failed early): the
    # others are merged and it is named; with nothing anywhere, a wrong path or a sweep that
    # measured nothing, the merge fails (it exited 0 saying nothing).
    found = {s: merge.source_folders(s) for s in args.merge}
    if not any(found.values()):
        raise Stop(2, f"--merge: no results files in {', '.join(map(str, args.merge))}: nothing to merge")
    for s, folders in found.items():
        if not folders:
            print(f"run-experiments: --merge {s}: no results files in it; merging the others", file=sys.stderr)
    locks = []
    try:
        for name in sorted({f.name for folders in found.values() for f in folders}):
            lock = FolderLock(root / name)  # read, merged and written by this process alone
            take_folder_lock(lock)
            locks.append(lock)
        merges = merge.plan_merge(args.merge, root, args.on_conflict)
        conflicts = [c for fm in merges for c in fm.conflicts]
        if conflicts:
            for c in conflicts[:5]:
                print(f"run-experiments: conflict: {c}", file=sys.stderr)
            raise Stop(2, f"--merge: {len(conflicts)} case(s) measured differently in two places; nothing written "
                          "(--on-conflict keep keeps the target's, --on-conflict replace takes the source's)")
        for fm in merges:
            if fm.changed:
                merge.write(fm)
            print(f"{fm.target}: {'+' + str(fm.added) + ' case(s)' if fm.added else 'no new case'}"
                  + (f", {fm.replaced} replaced" if fm.replaced else "")
                  + (", complete" if fm.data['xcorr_meta'].get('complete') else ", incomplete")
                  + ("" if fm.changed else " (unchanged)"))
    finally:
        for lock in locks:
            lock.release()
    return 0
