"""python -m xcsuite run-experiments against a fake bench binary: protocol, merged files, resume logic,
failures, the time budget, the no-GPU refusal, signals, the GPU lock, damaged results files and
the atomic write."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from suite_helpers import ROOT, clear_fake_env, fake_bench_env, log_lines, make_fake_build, no_peers_env, suite_registry

from xcsuite import gpulock
from xcsuite.cli import run_experiments as rx
from xcsuite.resultfile import entries_of, line_of, write_atomic
from xcsuite.spec import expand
import experiments as suite


@pytest.fixture
def env(tmp_path, monkeypatch):
    build = fake_bench_env(tmp_path, monkeypatch)
    log = tmp_path / "bench.log"
    results = tmp_path / "results"

    def run(*args):
        return rx.main([*args, "--build", str(build), "--results", str(results), "--no-progress"])

    return run, results, log, monkeypatch


def load(results, exp, quick=False):
    return json.loads((results / ("fake-gpu-9000" + ("-quick" if quick else "")) / f"{exp}.json").read_text())


def times(record):
    """The measured repetitions of a case (Google Benchmark's real_time of each)."""
    return [e["real_time"] for e in entries_of(record) if not e.get("error_occurred")]


def cases_of(name):
    reg = suite_registry()
    return expand(suite.load(name), reg).cases


def quick_cases_of(name):
    """The cases a --quick run measures (the largest left out: rx.QUICK_MAX_FMAS), in its order."""
    return rx.expand_capped(suite.load(name), suite_registry(), rx.QUICK_MAX_FMAS).cases


def test_full_protocol_merged_file_and_skip(env):
    run, results, log, _ = env
    assert run("fig22") == 0
    data = load(results, "fig22")
    n = len(cases_of("fig22"))
    meta = data["xcorr_meta"]
    assert meta["complete"] and meta["protocol"]["repetitions"] == 10 and meta["protocol"]["min_time_s"] == 0.1
    assert meta["started"] and meta["finished"] and meta["git_revision"] == "fake123" and meta["registry"]
    assert "nvidia_smi" in meta and len(meta["runs"]) == 1
    assert data["context"]["xcorr_gpu_name"] == "Fake GPU 9000"
    assert len(data["cases"]) == n and all(c["status"] == "ok" for c in data["cases"].values())
    assert all(len(times(c)) == 10 for c in data["cases"].values())  # every repetition kept
    calls = len(log_lines(log))
    assert run("fig22") == 0  # complete: skipped, nothing runs
    assert len(log_lines(log)) == calls
    assert run("fig22", "--force") == 0
    assert len(log_lines(log)) > calls and (results / "fake-gpu-9000" / "fig22.json.bak").exists()


def test_remeasure_reruns_only_the_changed_variant_at_the_new_revision(env, capsys):
    run, results, log, monkeypatch = env
    assert run("fig22") == 0
    before = load(results, "fig22")
    assert {c["revision"] for c in before["cases"].values()} == {"fake123"}
    changed = {k for k in before["cases"] if k.startswith("multi-matrix-both|")}
    assert changed and len(changed) < len(before["cases"])
    monkeypatch.setenv("FAKE_REVISION", "new456")
    capsys.readouterr()
    assert run("fig22", "--estimate", "--remeasure", "multi-matrix-both") == 0
    row = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("fig22"))
    assert int(row.split()[2]) == len(changed)  # the estimate counts the same pending cases
    calls = len(log_lines(log))
    assert run("fig22", "--remeasure", "multi-matrix-both") == 0
    rerun = [l for call in log_lines(log)[calls:] for l in call]
    assert len(rerun) == len(changed) and all("variant=multi-matrix-both " in l for l in rerun)
    after = load(results, "fig22")
    for k, c in after["cases"].items():
        assert c["revision"] == ("new456" if k in changed else "fake123")
        assert c["status"] == "ok"
    # the old repetitions of a re-measured case are replaced, and it moves to the end (measurement order)
    assert all(len(times(c)) == 10 for c in after["cases"].values())
    assert set(list(after["cases"])[-len(changed):]) == changed
    assert after["xcorr_meta"]["git_revisions"] == ["fake123", "new456"]
    calls = len(log_lines(log))
    assert run("fig22", "--remeasure", "multi-matrix-both") == 0  # measured at this revision: nothing to do
    assert len(log_lines(log)) == calls


def test_remeasure_cases_narrows_it_to_the_matching_keys(env, capsys):
    """--remeasure-cases REGEX: of the named variant's cases at another revision, only those whose
    key matches run again (a change that touches one code path: fft-fused's N = 192 with few
    outputs); the others keep their measurement and revision, in the estimate as in the run."""
    run, results, log, monkeypatch = env
    assert run("fig22") == 0
    before = load(results, "fig22")
    mine = [k for k in before["cases"] if k.startswith("multi-matrix-both|")]
    sizes = sorted({k.split("|")[2] for k in mine})
    assert len(sizes) > 1
    pattern = r"\|" + sizes[0] + r"\|"
    changed = {k for k in mine if f"|{sizes[0]}|" in k}
    assert changed and len(changed) < len(mine)
    monkeypatch.setenv("FAKE_REVISION", "new456")
    capsys.readouterr()
    assert run("fig22", "--estimate", "--remeasure", "multi-matrix-both", "--remeasure-cases", pattern) == 0
    row = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("fig22"))
    assert int(row.split()[2]) == len(changed)
    calls = len(log_lines(log))
    assert run("fig22", "--remeasure", "multi-matrix-both", "--remeasure-cases", pattern) == 0
    rerun = [l for call in log_lines(log)[calls:] for l in call]
    assert len(rerun) == len(changed)
    after = load(results, "fig22")
    for k, c in after["cases"].items():
        assert c["revision"] == ("new456" if k in changed else "fake123"), k
        if k not in changed:
            assert c == before["cases"][k]


@pytest.mark.parametrize("args,why", [
    (["--remeasure-cases", "x"], "name the variants"),
    (["--remeasure", "multi-matrix-both", "--remeasure-cases", "(unclosed"], "--remeasure-cases"),
])
def test_remeasure_cases_bad_usage_exits_2(env, capsys, args, why):
    run, *_ = env
    assert run("fig22", *args) == 2
    assert why in capsys.readouterr().err


def test_remeasure_refuses_an_unknown_variant(env, capsys):
    run, *_ = env
    assert run("fig22", "--remeasure", "no-such-variant") == 2
    assert "no-such-variant" in capsys.readouterr().err


def test_quick_goes_to_its_own_folder(env):
    run, results, _, _ = env
    assert run("fig22", "--quick") == 0
    data = load(results, "fig22", quick=True)
    assert data["xcorr_meta"]["protocol"] == {**rx.QUICK_PROTOCOL, "quick": True,
                                              "outliers": "IQR rule (1.5 IQR), at aggregation", "repetitions_kept": "all"}
    assert not (results / "fake-gpu-9000").exists()
    assert all(len(times(c)) == 3 for c in data["cases"].values())


def test_crash_marks_the_culprit_and_resumes_the_rest(env):
    run, results, log, mp = env
    culprit = "variant=multi-matrix-both form=n-to-m hL=64 wL=64 hR=64 wR=64 nL=2 nR=2"
    mp.setenv("FAKE_CRASH_ON", culprit)
    assert run("fig22") == 0
    data = load(results, "fig22")
    failed = {k: v for k, v in data["cases"].items() if v["status"] != "ok"}
    assert len(failed) == 1
    (only,) = failed.values()
    assert line_of(only).startswith(culprit) and "exit status 134" in only["message"]
    assert len(data["cases"]) == len(cases_of("fig22"))  # the cases after the crash ran in a new process
    assert len(log_lines(log)) == 2
    mp.delenv("FAKE_CRASH_ON")
    assert run("fig22") == 0 and len(log_lines(log)) == 2  # failed cases are not retried by default
    assert run("fig22", "--retry-failed") == 0
    assert log_lines(log)[-1] == [line_of(only)]
    assert all(c["status"] == "ok" for c in load(results, "fig22")["cases"].values())


def test_rejected_case_is_isolated(env):
    run, results, log, mp = env
    bad = "variant=multi-matrix-both+split-row form=n-to-m hL=32 wL=32 hR=32 wR=32 nL=8 nR=8 distribution=triangle lefts=4"
    mp.setenv("FAKE_REJECT", bad)
    # chunks of six cases (the offender the third of its chunk), not one of all 30: the isolation
    # runs each case of the refused chunk in a process of its own
    assert run("fig22", "--chunk-seconds", "8") == 0
    data = load(results, "fig22")
    rejected = [c for c in data["cases"].values() if c["status"] == "rejected"]
    assert len(rejected) == 1 and line_of(rejected[0]).startswith(bad)
    assert sum(c["status"] == "ok" for c in data["cases"].values()) == len(data["cases"]) - 1
    refused = [call for call in log_lines(log) if any(l.startswith(bad) for l in call)]
    assert len(refused[0]) > 2 and refused[1:] == [[l] for l in refused[0] if l.startswith(bad)]  # then alone


def test_error_entries_are_recorded_as_failed(env):
    run, results, _, mp = env
    mp.setenv("FAKE_ERROR_ON", "hL=256 wL=256 hR=256 wR=256 nL=8 nR=8")
    assert run("fig22") == 0
    failed = [c for c in load(results, "fig22")["cases"].values() if c["status"] == "failed"]
    assert failed and all("too little GPU memory" in c["message"] for c in failed)


def test_a_case_that_fails_its_check_is_recorded_with_the_message(env):
    """xcorr_bench skips a case whose output fails its check (SkipWithError in every repetition,
    no counters, no timing): the case is recorded as failed with the bench's message."""
    run, results, _, mp = env
    message = "validation failed: err=3.100e-04 > tol=1.000e-05 (65536 sampled outputs)"
    culprit = "hL=256 wL=256 hR=256 wR=256 nL=8 nR=8"
    mp.setenv("FAKE_ERROR_ON", culprit)
    mp.setenv("FAKE_ERROR_MESSAGE", message)
    assert run("fig22") == 0
    cases = load(results, "fig22")["cases"].values()
    failed = [c for c in cases if c["status"] == "failed"]
    assert failed and all(c["message"] == message and culprit in line_of(c) for c in failed)
    assert any(c["status"] == "ok" for c in cases)


def test_budget_stops_cleanly_and_resume_finishes(env):
    run, results, log, mp = env
    mp.setenv("FAKE_SLEEP", "1.0")
    # --quick (the budget logic is the protocol's either way): ~0.1 s estimated per case and 2 s a
    # process, so a budget of 3.6 s fits the whole experiment in one chunk, which runs 1 s a case:
    # the budget kills it mid-way (with the full protocol's 1.2 s a case it took a 6-s budget)
    assert run("fig22", "--quick", "--max-minutes", "0.06") == rx.EXIT_BUDGET
    data = load(results, "fig22", quick=True)
    assert not data["xcorr_meta"]["complete"]
    done = {k for k, c in data["cases"].items() if c["status"] == "ok"}
    assert 1 <= len(done) < len(quick_cases_of("fig22"))  # salvaged from the killed process's output
    assert not [c for c in data["cases"].values() if c["status"] != "ok"]  # nothing blamed for the budget
    mp.delenv("FAKE_SLEEP")
    assert run("fig22", "--quick") == 0
    data = load(results, "fig22", quick=True)
    assert data["xcorr_meta"]["complete"] and len(data["xcorr_meta"]["runs"]) == 2
    ran_again = {l for call in log_lines(log)[1:] for l in call}
    assert not {line_of(c) for k, c in data["cases"].items() if k in done} & ran_again


def test_a_stopped_force_run_resumes_and_keeps_the_complete_file(env):
    """--force copies the complete file to .bak and starts afresh; stopped by the budget, it says
    'rerun the same command to resume'. That rerun copied the partial file over .bak (the only
    complete copy, lost) and started afresh again; it now resumes, and .bak keeps the old file."""
    run, results, log, mp = env
    # --quick throughout (the folder fake-gpu-9000-quick; --force and the budget act alike): its
    # ~0.1 s a case lets a 3.6-s budget start the experiment, where the full protocol's needed 6 s
    assert run("fig22", "--quick") == 0
    n = len(quick_cases_of("fig22"))
    mp.setenv("FAKE_SLEEP", "1.0")
    assert run("fig22", "--quick", "--force", "--max-minutes", "0.06") == rx.EXIT_BUDGET
    first = {k for k, c in load(results, "fig22", quick=True)["cases"].items() if c["status"] == "ok"}
    assert 1 <= len(first) < n
    assert run("fig22", "--quick", "--force", "--max-minutes", "0.06") == rx.EXIT_BUDGET
    bak = json.loads((results / "fake-gpu-9000-quick" / "fig22.json.bak").read_text())
    assert bak["xcorr_meta"]["complete"] and len(bak["cases"]) == n
    second = {k for k, c in load(results, "fig22", quick=True)["cases"].items() if c["status"] == "ok"}
    assert first < second  # resumed: the first run's cases kept, more added
    mp.delenv("FAKE_SLEEP")
    assert run("fig22", "--quick", "--force") == 0  # finishes the stopped run
    data = load(results, "fig22", quick=True)
    assert data["xcorr_meta"]["complete"] and "force_started" not in data["xcorr_meta"] and len(data["cases"]) == n
    calls = len(log_lines(log))
    assert run("fig22", "--quick", "--force") == 0  # complete: --force starts afresh again
    assert len(log_lines(log)) > calls


def test_a_hang_is_blamed_over_runs_stopped_by_the_budget(env, monkeypatch):
    """A hung case under a --max-minutes shorter than its chunk's limit: every run stopped on it
    first and nothing was ever blamed (each run exit 4 with the same cases, for good). Its
    seconds now add up over such runs and it is blamed once they pass its limit (made 5 s here
    instead of the ~2 minutes of a real one); the next run goes on past it."""
    run, results, log, mp = env
    # (a limit of 5 s and runs of 3.6: the same arithmetic as 20 and 12; --quick, whose ~0.1 s a
    # case lets a 3.6-s budget start a chunk, where the full protocol's 1.2 s needed 6)
    limit = 5.0
    monkeypatch.setattr(rx.Runner, "case_limit", lambda self, c: limit)
    hung = quick_cases_of("fig22")[2]
    assert hung.key == cases_of("fig22")[2].key
    mp.setenv("FAKE_HANG_ON", hung.line())
    # Run 1: the two cases before it are filed; it was not running from the chunk's start (not
    # counted). Run 2: it is the first case, and ran the whole 3.6 s. Run 3: 7.2 s, past the limit.
    assert run("fig22", "--quick", "--max-minutes", "0.06") == rx.EXIT_BUDGET
    assert hung.key not in load(results, "fig22", quick=True)["xcorr_meta"].get("stalled_s", {})
    assert run("fig22", "--quick", "--max-minutes", "0.06") == rx.EXIT_BUDGET
    before = load(results, "fig22", quick=True)
    assert hung.key not in before["cases"] and 0 < before["xcorr_meta"]["stalled_s"][hung.key] < limit
    assert run("fig22", "--quick", "--max-minutes", "0.06") == rx.EXIT_BUDGET
    data = load(results, "fig22", quick=True)
    c = data["cases"][hung.key]
    assert c["status"] == "failed" and "exceeding its time limit" in c["message"], c
    assert hung.key not in data["xcorr_meta"].get("stalled_s", {})
    mp.delenv("FAKE_HANG_ON")
    assert run("fig22", "--quick") == 0  # past it: the rest runs, the hung case stays failed
    data = load(results, "fig22", quick=True)
    assert data["cases"][hung.key]["status"] == "failed"
    assert all(v["status"] == "ok" for k, v in data["cases"].items() if k != hung.key)


def test_budget_too_small_for_one_case_runs_nothing(env):
    run, results, log, _ = env
    assert run("fig22", "--max-minutes", "0.01") == rx.EXIT_BUDGET
    assert log_lines(log) == []


def test_no_gpu_is_refused_with_exit_3(env, capsys):
    run, results, log, mp = env
    mp.setenv("FAKE_NO_GPU", "1")
    assert run("fig22") == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("run-experiments: no GPU")
    assert log_lines(log) == [] and not results.exists()


def test_unknown_experiment_and_estimate(env, capsys):
    run, results, log, _ = env
    # a usage error: exit 2 and one line, as for the other bad arguments (it exited 1)
    assert run("fig17,fig99") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("run-experiments: unknown experiment 'fig99' (known: fig15, "), err
    assert log_lines(log) == [] and not results.exists()
    assert run("--estimate", "fig16,fig17") == 0
    out = capsys.readouterr().out
    assert "fig16" in out and "fig17" in out and "total" in out


def test_quick_skips_the_largest_cases(env):
    run, results, _, _ = env
    assert run("fig22", "--quick") == 0
    data = load(results, "fig22", quick=True)
    n_all = len(cases_of("fig22"))
    big = [c for c in cases_of("fig22") if c.fmas > rx.QUICK_MAX_FMAS]
    assert big and len(data["cases"]) == n_all - len(big) and data["xcorr_meta"]["max_fmas"] == rx.QUICK_MAX_FMAS


def test_a_binary_that_refuses_everything_stops_the_run(env):
    run, results, _, mp = env
    mp.setenv("FAKE_REJECT", "variant=")
    with pytest.raises(SystemExit, match="refuses every case"):
        run("fig22")
    data = load(results, "fig22")
    assert not [c for c in data["cases"].values() if c["status"] == "rejected"]  # still pending


@pytest.mark.parametrize("revision", ["abc123-dirty", "unknown"])
def test_an_untraceable_revision_is_refused_unless_allowed(env, capsys, revision):
    run, results, log, monkeypatch = env
    monkeypatch.setenv("FAKE_REVISION", revision)
    assert run("fig22") == 2
    assert revision in capsys.readouterr().err and not log_lines(log)
    assert run("fig22", "--quick") == 0  # smoke runs are not results
    assert run("fig22", "--allow-dirty") == 0
    assert load(results, "fig22")["xcorr_meta"]["git_revision"] == revision


def test_a_build_under_a_library_switch_is_refused(env, capsys):
    """A switch (XCORR_NO_GRAPH=1, ...) forces one of the library's rules: its timings must not be
    filed as the library's. The real binaries name the switches set in their context; smoke runs pass."""
    run, results, log, monkeypatch = env
    monkeypatch.setenv("FAKE_ENVIRONMENT", "XCORR_NO_GRAPH=1")
    assert run("fig22") == 2
    assert "XCORR_NO_GRAPH=1" in capsys.readouterr().err and not log_lines(log)
    assert not (results / "fake-gpu-9000" / "fig22.json").exists()
    assert run("fig22", "--quick") == 0


# --- signals and the GPU lock: the runner as a process of its own, its benchmark hung on a case ---

def alive(pid: int) -> bool:
    """True while pid runs (a zombie has ended: it holds no GPU and no file)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def wait_for(predicate, what: str, limit_s: float = 120.0) -> None:
    """Polls until predicate() holds; the limit only turns a hang into a failure, it asserts no timing."""
    end = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < end, f"gave up waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def hung_runner(tmp_path, monkeypatch):
    """start() launches python -m xcsuite run-experiments fig22 whose xcorr_bench hangs on the third case
    (after two finished ones) and returns (runner process, bench pid)."""
    clear_fake_env(monkeypatch)
    build = make_fake_build(tmp_path / "build")
    results = tmp_path / "results"
    pidfile = tmp_path / "bench.pid"
    hang = cases_of("fig22")[2].line()
    env = {**os.environ, "FAKE_HANG_ON": hang, "FAKE_PIDFILE": str(pidfile), "FAKE_LOG": str(tmp_path / "bench.log"),
           "XCORR_LOCK_DIR": str(tmp_path / "locks"), **no_peers_env(build)}
    monkeypatch.setenv("XCORR_LOCK_DIR", env["XCORR_LOCK_DIR"])
    monkeypatch.setenv("FAKE_LOG", env["FAKE_LOG"])
    for k, v in no_peers_env(build).items():
        monkeypatch.setenv(k, v)
    started = []

    def start():
        proc = subprocess.Popen([sys.executable, "-m", "xcsuite", "run-experiments", "fig22", "--build",
                                 str(build), "--results", str(results), "--no-progress"],
                                cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        wait_for(lambda: pidfile.exists() or proc.poll() is not None, "the benchmark to hang")
        assert proc.poll() is None, proc.communicate()
        pid = int(pidfile.read_text())
        started.append(pid)
        return proc, pid

    start.build, start.results, start.hang = build, results, hang
    yield start
    for x in started:  # whatever the test's outcome, leave no process behind
        if isinstance(x, int):
            if alive(x):
                os.kill(x, signal.SIGKILL)
        elif x.poll() is None:
            x.kill()
            x.communicate()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT],
                         ids=lambda s: signal.Signals(s).name)
def test_a_signal_stops_the_benchmark_and_keeps_the_finished_cases(hung_runner, sig):
    proc, bench = hung_runner()
    assert alive(bench)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert not alive(bench)  # no orphan left measuring on the GPU
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines()[-1].startswith(f"run-experiments: stopped by {signal.Signals(sig).name}")
    data = load(hung_runner.results, "fig22")  # valid JSON
    assert not data["xcorr_meta"]["complete"]
    cases = cases_of("fig22")
    assert {k for k, c in data["cases"].items() if c["status"] == "ok"} == {c.key for c in cases[:2]}
    assert cases[2].key not in data["cases"]  # the hung case is pending, not blamed
    # a rerun measures the rest only
    log = Path(os.environ["FAKE_LOG"])
    calls = len(log_lines(log))
    assert rx.main(["fig22", "--build", str(hung_runner.build), "--results", str(hung_runner.results),
                    "--no-progress"]) == 0
    rerun = {l for call in log_lines(log)[calls:] for l in call}
    assert cases[2].line() in rerun and not {c.line() for c in cases[:2]} & rerun
    assert load(hung_runner.results, "fig22")["xcorr_meta"]["complete"]


def test_a_second_runner_on_the_gpu_is_refused_and_a_dead_ones_lock_is_taken_over(hung_runner, capsys):
    proc, bench = hung_runner()

    def second():
        capsys.readouterr()
        rc = rx.main(["fig22", "--build", str(hung_runner.build), "--results", str(hung_runner.results),
                      "--no-progress"])
        return rc, capsys.readouterr().err.strip().splitlines()

    rc, err = second()
    assert rc == 2 and len(err) == 1
    assert f"in use by runner pid {proc.pid}, started 20" in err[0] and "Fake GPU 9000" in err[0]
    proc.kill()  # SIGKILL: no handler runs, the benchmark it started lives on and still holds the GPU
    proc.communicate()
    assert alive(bench)
    rc, err = second()
    assert rc == 2 and f"an xcorr_bench left running by runner pid {proc.pid}" in err[0]
    os.kill(bench, signal.SIGKILL)  # the orphan ends: the kernel drops the lock, nothing stale remains
    wait_for(lambda: not alive(bench), "the benchmark to end")
    rc, err = second()
    assert rc == 0, err
    assert load(hung_runner.results, "fig22")["xcorr_meta"]["complete"]


def test_gpu_key_prefers_a_uuid():
    smi = [{"index": "0", "name": "H200", "uuid": "GPU-aaa"}, {"index": "1", "name": "H200", "uuid": "GPU-bbb"}]
    ctx = {"xcorr_gpu_name": "H200"}
    assert gpulock.gpu_key(ctx, smi, {}) == "GPU-aaa"
    assert gpulock.gpu_key(ctx, smi, {"CUDA_VISIBLE_DEVICES": "1,0"}) == "GPU-bbb"
    assert gpulock.gpu_key(ctx, smi, {"CUDA_VISIBLE_DEVICES": "GPU-ccc"}) == "GPU-ccc"
    mixed = [{"name": "A100", "uuid": "GPU-aaa"}, {"name": "H200", "uuid": "GPU-bbb"}]
    # CUDA numbers a mixed machine fastest first, nvidia-smi by bus: the index says nothing
    assert gpulock.gpu_key(ctx, mixed, {"CUDA_VISIBLE_DEVICES": "1"}) == "H200 cuda-visible=1"
    assert gpulock.gpu_key(ctx, mixed, {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == "GPU-bbb"
    assert gpulock.gpu_key(ctx, [], {}) == "H200 cuda-visible=all"


# --- a damaged results file ---

def test_a_damaged_results_file_is_named_and_left_alone(env, capsys):
    run, results, log, _ = env
    assert run("fig22", "--max-minutes", "0.02") in (0, rx.EXIT_BUDGET)
    f = results / "fake-gpu-9000" / "fig22.json"
    f.write_text(f.read_text()[:-200])  # cut short, as by a full disk under a plain write
    damaged = f.read_bytes()
    for args in (("fig22",), ("fig22", "--estimate")):
        capsys.readouterr()
        assert run(*args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(f) in err[0] and "not valid JSON" in err[0] and "--force" in err[0], err
    assert f.read_bytes() == damaged
    assert run("fig22", "--force") == 0  # the way out the message names
    assert load(results, "fig22")["xcorr_meta"]["complete"]
    assert (results / "fake-gpu-9000" / "fig22.json.bak").read_bytes() == damaged


# --- the atomic results write ---

def test_write_atomic_leaves_the_old_file_when_serialisation_fails(tmp_path):
    f = tmp_path / "fig22.json"
    write_atomic(f, {"cases": {"a": 1}})
    old = f.read_bytes()
    with pytest.raises(TypeError):
        write_atomic(f, {"cases": {"a": 2}, "benchmarks": ["x" * 100_000, object()]})  # fails mid-way
    assert f.read_bytes() == old and os.listdir(tmp_path) == ["fig22.json"]  # no temporary left


def test_write_atomic_leaves_the_old_file_when_the_disk_fills(tmp_path):
    """A write that fails part-way (here: RLIMIT_FSIZE, as a full disk or quota would) must not
    touch the file: a plain write would have truncated it first."""
    f = tmp_path / "fig22.json"
    write_atomic(f, {"cases": {"a": 1}})
    old = f.read_bytes()
    code = ("import resource, signal, sys; sys.path.insert(0, sys.argv[2])\n"
            "from xcsuite.resultfile import write_atomic\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
            "try:\n    write_atomic(__import__('pathlib').Path(sys.argv[1]), {'cases': {'b': 'x' * 100000}})\n"
            "except OSError as e:\n    print(e.errno); sys.exit(0)\nsys.exit(1)\n")
    r = subprocess.run([sys.executable, "-c", code, str(f), str(ROOT)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr  # the write failed, as intended
    assert f.read_bytes() == old and os.listdir(tmp_path) == ["fig22.json"]


def test_write_atomic_replaces_the_entry_not_the_contents(tmp_path):
    """A reader that opened the old file (here: a hard link to it) keeps reading the old version
    whole: the new file is a new inode renamed over the name."""
    f = tmp_path / "fig22.json"
    write_atomic(f, {"cases": {"a": 1}})
    os.link(f, tmp_path / "reader")
    write_atomic(f, {"cases": {"a": 2}})
    assert json.loads((tmp_path / "reader").read_text()) == {"cases": {"a": 1}}
    assert json.loads(f.read_text()) == {"cases": {"a": 2}}
    assert f.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600: results are shared files


def test_an_errored_entry_of_a_cold_run_keeps_its_case():
    """Google Benchmark drops every counter of an errored entry, `cold` included: the runner takes
    the run's own setting (context xcorr_cold), or a cold case's failure would land on a warm key
    and the case would read "gave 0 of 10 repetitions" instead of its message."""
    from xcsuite.benchjson import entry_key
    entry = {"run_name": "overlap-wise/one-to-one/hL:4/wL:5/hR:3/wR:2/nL:1/nR:1/manual_time",
             "run_type": "iteration", "error_occurred": True, "error_message": "validation failed"}
    assert entry_key(entry, cold=True).endswith("|cold")
    assert entry_key(entry).endswith("|warm")
    assert entry_key({**entry, "cold": 1}).endswith("|cold")


def test_estimate_reports_this_gpus_recorded_pace(env, capsys):
    """--estimate on a GPU with results: beside the model, what the recorded runs took against it,
    chunk by chunk (a chunk timed from its run's start or the previous chunk's filing; a chunk cut
    by --max-minutes left out), and the pending cases at that pace."""
    import datetime as dt
    from xcsuite.cost import PROCESS_S, case_seconds
    run, results, _, _ = env
    assert run("fig22") == 0
    path = results / "fake-gpu-9000" / "fig22.json"
    data = json.loads(path.read_text())
    keys = list(data["cases"])
    first, second, pending = keys[:len(keys) // 2], keys[len(keys) // 2:-1], keys[-1]
    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    at = lambda s: (t0 + dt.timedelta(seconds=s)).isoformat(timespec="seconds")  # noqa: E731
    for k in first:
        data["cases"][k]["time"] = at(40)   # a chunk of 40 s
    for k in second:
        data["cases"][k]["time"] = at(260)  # cut at its run's 1-minute budget: not counted
    del data["cases"][pending]
    data["xcorr_meta"]["runs"] = [{"started": at(0), "ended": at(100), "budget_min": 5.0},
                                  {"started": at(200), "ended": at(260), "budget_min": 1.0}]
    data["xcorr_meta"]["complete"] = False
    path.write_text(json.dumps(data))
    reg = suite_registry()
    fam = {v["name"]: v.get("family") for v in reg}
    by_key = {c.key: c for c in cases_of("fig22")}
    model = PROCESS_S + sum(case_seconds(by_key[k], 10, 0.1, fam.get(by_key[k].variant)) for k in first)
    capsys.readouterr()
    assert run("fig22", "--estimate") == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("This GPU's recorded runs"))
    assert f"took {40 / model:.2f}x the model (1 chunks" in line, line
    want = case_seconds(by_key[pending], 10, 0.1, fam.get(by_key[pending].variant)) * 40 / model
    assert line.rstrip(".").endswith(rx.format_seconds(want)), line


def test_estimate_shows_where_the_model_errs_by_the_benchs_case_seconds(env, capsys):
    """--estimate on a GPU whose results hold the bench's case_seconds (each case's wall time, the
    last repetition's): per experiment and variant, the measured seconds against the model's, the
    largest gap first. The window group's two-GPU tail was one take whose cases ran 4x their
    estimate (notes/multi-gpu.md): this is the table that shows such a variant."""
    from xcsuite.cost import case_seconds
    run, results, _, _ = env
    assert run("fig22") == 0
    path = results / "fake-gpu-9000" / "fig22.json"
    data = json.loads(path.read_text())
    fam = {v["name"]: v.get("family") for v in suite_registry()}
    by_key = {c.key: c for c in cases_of("fig22")}
    variants = sorted({by_key[k].variant for k in data["cases"]})
    slow = variants[0]
    model = {k: case_seconds(by_key[k], 10, 0.1, fam.get(by_key[k].variant)) for k in data["cases"]}
    for k, v in data["cases"].items():
        assert v["reps"]["case_seconds"][-1] > 0  # the fake bench records it, as xcorr_bench does
        n = v["n_reps"]
        v["reps"]["case_seconds"] = [(10.0 if by_key[k].variant == slow else 1.0) * model[k] * (i + 1) / n
                                     for i in range(n)]
    path.write_text(json.dumps(data))
    capsys.readouterr()
    assert run("fig22", "--estimate") == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:3] == ["experiment", "variant", "cases"])
    first = lines[head + 1].split()
    n_slow = sum(by_key[k].variant == slow for k in data["cases"])
    assert first[:3] == ["fig22", slow, str(n_slow)] and first[-1] == "10.00x", lines[head:]
    assert all(ln.split()[-1] == "1.00x" for ln in lines[head + 2:] if ln.startswith("fig22 ")), lines[head:]


def test_the_progress_bar_ends_at_its_total():
    """Each chunk's estimate was rounded before it was added: 0.6 s chunks summed to more than the
    rounded total, tqdm dropped the total it was past, and the end of a run read "0% est. 89/? s"
    (seen in the sweeps). The running sum is rounded instead."""
    bar = rx.progress_bar(10 * 0.6, disable=False)  # a disabled tqdm counts nothing
    assert bar is not None and bar.total == 6
    for _ in range(10):
        rx.advance(bar, 0.6)
    assert bar.n == 6 == bar.total
    rx.advance(bar, 0.6)  # an estimate past the total (a case re-queued): the bar stays at its end
    assert bar.n == 6
    bar.close()
