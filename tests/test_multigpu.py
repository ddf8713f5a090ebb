"""Several GPUs (--gpus), shards (--shard K/N), merging (--merge) and the Slurm route
(python -m xcsuite slurm-sweep), against the fake bench pretending to be several GPUs (FAKE_GPUS,
FAKE_GPU_NAMES), on the CPU."""
import collections
import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from suite_helpers import ROOT, fake_bench_env, log_lines, suite_registry
from test_run_experiments import alive, cases_of, wait_for

from xcsuite import gpus
from xcsuite import resultfile as rf
from xcsuite.cli import run_experiments as rx


@pytest.fixture
def env(tmp_path, monkeypatch):
    build = fake_bench_env(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_GPUS", "2")
    results = tmp_path / "results"

    def run(*args, results=results):
        return rx.main([*args, "--build", str(build), "--results", str(results), "--no-progress"])

    run.build, run.results, run.log, run.mp, run.tmp = build, results, tmp_path / "bench.log", monkeypatch, tmp_path
    return run


@pytest.fixture(scope="module")
def fig22_one_gpu(tmp_path_factory):
    """A results folder of fig22 measured on one fake GPU, as `env("fig22")` with FAKE_GPUS=1
    makes it (the same fake world, fake_bench_env), run once for the merge tests that start from
    one: each takes a copy of its own (copy_of), so that no test sees another's changes."""
    tmp = tmp_path_factory.mktemp("fig22-one-gpu")
    with pytest.MonkeyPatch.context() as mp:
        build = fake_bench_env(tmp, mp)
        mp.setenv("FAKE_GPUS", "1")
        assert rx.main(["fig22", "--build", str(build), "--results", str(tmp / "results"), "--no-progress"]) == 0
    return tmp / "results"


def copy_of(results: Path, to: Path) -> Path:
    shutil.copytree(results, to)
    return to


def load(path):
    return json.loads(Path(path).read_text())


def check_complete(data, exp):
    keys = {c.key for c in cases_of(exp)}
    assert set(data["cases"]) == keys and data["xcorr_meta"]["complete"]
    assert all(c["status"] == "ok" for c in data["cases"].values())


def test_two_gpus_of_one_model_fill_one_file_each_case_once(env):
    """Both GPUs measure (an experiment may go whole to one of them: a take is at least a few
    process starts' worth), into one file per experiment, each case once, each with its device."""
    assert env("fig22", "fig16") == 0
    used = set()
    for exp in ("fig22", "fig16"):
        data = load(env.results / "fake-gpu-9000" / f"{exp}.json")
        check_complete(data, exp)
        used |= {c["device"]["uuid"] for c in data["cases"].values()}
        assert data["xcorr_meta"]["runs"][-1]["devices"] == [{"index": "0", "uuid": "GPU-fake-0"},
                                                            {"index": "1", "uuid": "GPU-fake-1"}]
    assert used == {"GPU-fake-0", "GPU-fake-1"}
    ran = [l for call in log_lines(env.log) for l in call]
    assert len(ran) == len(set(ran)) == len(cases_of("fig22")) + len(cases_of("fig16"))
    assert env("fig22") == 0 and len([l for c in log_lines(env.log) for l in c]) == len(ran)  # complete: skipped


def test_the_variants_of_one_shape_go_to_one_gpu(env):
    assert env("fig22") == 0
    by_point = collections.defaultdict(set)
    cases = {c.key: c for c in cases_of("fig22")}
    for k, rec in load(env.results / "fake-gpu-9000" / "fig22.json")["cases"].items():
        by_point[rx.point_of("fig22", cases[k])].add(rec["device"]["index"])
    assert all(len(v) == 1 for v in by_point.values())


def test_two_models_get_two_folders(env):
    env.mp.setenv("FAKE_GPU_NAMES", "Fake GPU 9000,Fake GPU 7000")
    assert env("fig22") == 0
    for slug, dev in (("fake-gpu-9000", "0"), ("fake-gpu-7000", "1")):
        data = load(env.results / slug / "fig22.json")
        check_complete(data, "fig22")
        assert {c["device"]["index"] for c in data["cases"].values()} == {dev}


def test_gpus_selects_one_of_several(env):
    assert env("fig22", "--gpus", "1") == 0
    data = load(env.results / "fake-gpu-9000" / "fig22.json")
    check_complete(data, "fig22")
    assert {c["device"]["uuid"] for c in data["cases"].values()} == {"GPU-fake-1"}
    assert env("fig22", "--gpus", "7") == 2


def test_a_crashing_gpu_loses_nothing_of_the_other(env):
    env.mp.setenv("FAKE_CRASH_ON", "variant=")  # every case, on device 1 only
    env.mp.setenv("FAKE_ONLY_DEVICE", "1")
    assert env("fig22") in (0, 1)  # each crash blames one case (as on one GPU), or three in a row stop GPU 1
    data = load(env.results / "fake-gpu-9000" / "fig22.json")
    on0 = [c for c in data["cases"].values() if c["device"]["index"] == "0"]
    assert on0 and all(c["status"] == "ok" for c in on0)
    on1 = [c for c in data["cases"].values() if c["device"]["index"] == "1"]
    assert on1 and all(c["status"] == "failed" and "134" in c["message"] for c in on1)
    env.mp.delenv("FAKE_CRASH_ON")
    assert env("fig22", "--retry-failed") == 0
    check_complete(load(env.results / "fake-gpu-9000" / "fig22.json"), "fig22")


def test_sigterm_keeps_the_finished_cases_and_a_rerun_completes(env):
    hang = cases_of("fig22")[-1].line()
    pidfile = env.tmp / "bench.pid"
    e = {**os.environ, "FAKE_HANG_ON": hang, "FAKE_PIDFILE": str(pidfile)}
    proc = subprocess.Popen([sys.executable, "-m", "xcsuite", "run-experiments", "fig22", "--build",
                             str(env.build), "--results", str(env.results), "--no-progress"],
                            cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bench = None
    try:
        wait_for(lambda: pidfile.exists() or proc.poll() is not None, "the benchmark to hang")
        bench = int(pidfile.read_text())
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert not alive(bench)
    finally:
        if proc.poll() is None:
            proc.kill()
        if bench and alive(bench):
            os.kill(bench, signal.SIGKILL)
    data = load(env.results / "fake-gpu-9000" / "fig22.json")
    assert data["cases"] and all(c["status"] == "ok" for c in data["cases"].values())
    assert cases_of("fig22")[-1].key not in data["cases"] and not data["xcorr_meta"]["complete"]
    done = {rec_line for rec_line in data["cases"]}
    calls = len(log_lines(env.log))
    assert env("fig22") == 0
    check_complete(load(env.results / "fake-gpu-9000" / "fig22.json"), "fig22")
    rerun = {l for call in log_lines(env.log)[calls:] for l in call}
    keys = {c.line(): c.key for c in cases_of("fig22")}
    assert hang in rerun and not {keys[l] for l in rerun} & done


def test_dealing_balances_the_estimated_cost():
    costs = [float(c) for c in (90, 70, 50, 40, 35, 30, 20, 10, 5, 5, 3, 1)]
    items = list(range(len(costs)))
    for n in (1, 2, 3, 4):
        bins = gpus.deal(items, n, lambda i: costs[i])
        assert sorted(i for b in bins for i in b) == items  # each once
        loads = [sum(costs[i] for i in b) for b in bins]
        assert max(loads) <= sum(costs) / n + max(costs)  # LPT's bound
        assert all(b == sorted(b) for b in bins)  # definition order within a bin
        assert gpus.deal(items, n, lambda i: costs[i]) == bins  # deterministic
    assert [sum(costs[i] for i in b) for b in gpus.deal(items, 2, lambda i: costs[i])] == [180, 179]


def test_the_pool_hands_out_every_unit_once_large_takes_first():
    """gpus.Pool: every item once, a figure point's items in one take, in deal's order (decreasing
    cost); each take within the cost left over 2n (or one unit) and `most`, so the takes shrink
    toward the end; safe from several threads."""
    costs = [float(c) for c in (90, 70, 50, 40, 35, 30, 20, 10, 5, 5, 3, 1)]
    items = list(range(len(costs)))
    group = lambda i: i // 2 if i >= 8 else i  # items 8, 9 and 10, 11 are two points of two
    pool = gpus.Pool(items, 2, lambda i: costs[i], group, most=100)
    takes, left = [], sum(costs)
    while got := pool.take():
        cost = sum(costs[i] for i in got)
        assert cost <= max(min(100, left / 4), max(costs[i] for i in got) * 2), (got, left)
        left -= cost
        takes.append(got)
    assert sorted(i for t in takes for i in t) == items and pool.left() == 0 and pool.take() == []
    assert all({8, 9} <= set(t) or not {8, 9} & set(t) for t in takes)  # a point's items together
    assert [sum(costs[i] for i in t) for t in takes] == sorted([sum(costs[i] for i in t) for t in takes], reverse=True)
    shared = gpus.Pool(list(range(1000)), 4, lambda i: 1.0)
    got = []
    threads = [threading.Thread(target=lambda: [got.extend(t) for t in iter(shared.take, [])]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1000))


def test_the_pool_keeps_a_take_to_one_bucket_and_no_smaller_than_least():
    """gpus.Pool with `bucket` (run_experiments': the experiment) and `least`: a take holds units
    of one bucket only (each bucket is a benchmark process of its own), the other buckets' units
    stay for later takes in their order; no take is smaller than `least` while its bucket has
    that much left; every item once. With takes shrinking to one unit the three-experiment
    sweep started five times the processes of a deal (notes/multi-gpu.md)."""
    costs = [float(c) for c in (40, 30, 20, 12, 9, 8, 6, 5, 4, 3, 2, 2, 1, 1, 1, 1)]
    items = list(range(len(costs)))
    bucket = lambda i: "ab"[i % 2]
    pool = gpus.Pool(items, 2, lambda i: costs[i], most=50, least=10, bucket=bucket)
    takes = list(iter(pool.take, []))
    assert sorted(i for t in takes for i in t) == items and pool.left() == 0
    assert all(len({bucket(i) for i in t}) == 1 for t in takes)
    for k, t in enumerate(takes):
        later = sum(costs[i] for u in takes[k + 1:] for i in u if bucket(i) == bucket(t[0]))
        assert sum(costs[i] for i in t) >= 10 or later == 0, (t, later)
    small = gpus.Pool(items, 2, lambda i: costs[i], most=50)  # no least: the last takes are single units
    assert len(list(iter(small.take, []))) > len(takes)


def test_a_slower_gpu_takes_fewer_cases(env):
    """Two GPUs take the figure points from one pool as they run short (gpus.Pool), not a share
    dealt by estimate in advance: a GPU four times slower than the estimates measures fewer cases
    than the other, every case is measured once and the files complete."""
    # 0.04 s a case: at 0.01 a take's fixed cost (a process of the stand-in) outweighed its cases
    # on a loaded machine, and the slow GPU's share came out 36 to 48
    env.mp.setenv("FAKE_SLEEP", "0.04")
    env.mp.setenv("FAKE_SLOW_DEVICE", "1")
    env.mp.setenv("FAKE_SLOW_FACTOR", "8")
    assert env("fig16", "fig22", "--chunk-seconds", "5") == 0
    per = collections.Counter()
    for exp in ("fig16", "fig22"):
        data = load(env.results / "fake-gpu-9000" / f"{exp}.json")
        check_complete(data, exp)
        per.update(c["device"]["index"] for c in data["cases"].values())
    assert set(per) == {"0", "1"} and per["0"] > 1.5 * per["1"], per
    ran = [l for call in log_lines(env.log) for l in call]
    assert len(ran) == len(set(ran))  # each case measured once


def test_two_gpus_balance_a_real_sweep(env):
    """The wall time of two GPUs is about half of one's: the deal of fig16+fig22's cases has its
    busiest GPU within one figure point of half the estimated total."""
    reg = suite_registry()
    su = rx.Setup([__import__("experiments").load(n) for n in ("fig16", "fig22")], reg, rx.PROTOCOL, None,
                  frozenset())
    items = [(e, c) for e in ("fig16", "fig22") for c in cases_of(e)]
    cost = rx.case_cost(su, {v["name"]: v.get("family") for v in reg})
    bins = gpus.deal(items, 2, cost, lambda it: rx.point_of(*it))
    loads = sorted(sum(cost(i) for i in b) for b in bins)
    total = sum(loads)
    biggest_point = max(sum(cost(i) for i in items if rx.point_of(*i) == p) for p in {rx.point_of(*i) for i in items})
    assert loads[1] <= total / 2 + biggest_point and loads[1] < 0.75 * total


# --- shards and merging ---

def test_shards_cover_every_case_once_and_merge_idempotently(env, capsys):
    env.mp.setenv("FAKE_GPUS", "1")
    n = 3
    for k in range(n):
        assert env("fig22", "fig16", "--shard", f"{k}/{n}", results=env.tmp / f"shard-{k}") == 0
    seen = collections.Counter()
    for k in range(n):
        for exp in ("fig22", "fig16"):
            data = load(env.tmp / f"shard-{k}" / "fake-gpu-9000" / f"{exp}.json")
            assert data["xcorr_meta"]["shard"]["index"] == k
            seen.update((exp, key) for key in data["cases"])
    assert set(seen) == {(e, c.key) for e in ("fig22", "fig16") for c in cases_of(e)}
    assert set(seen.values()) == {1}
    shards = [str(env.tmp / f"shard-{k}") for k in range(n)]
    assert rx.main(["--merge", *shards, "--results", str(env.results)]) == 0
    for exp in ("fig22", "fig16"):
        check_complete(load(env.results / "fake-gpu-9000" / f"{exp}.json"), exp)
    before = {f.name: f.read_bytes() for f in (env.results / "fake-gpu-9000").glob("*.json")}
    assert rx.main(["--merge", *shards, "--results", str(env.results)]) == 0  # again: nothing changes
    assert {f.name: f.read_bytes() for f in (env.results / "fake-gpu-9000").glob("*.json")} == before
    # a shard's folder itself is a source as well
    assert rx.main(["--merge", str(env.tmp / "shard-0" / "fake-gpu-9000"), "--results", str(env.results)]) == 0


def test_merge_names_a_shard_that_measured_nothing_and_merges_the_others(env, capsys):
    """A shard folder without results files (its task failed before measuring) was passed over in
    silence: it is named on stderr, the others merged (exit 0); with nothing anywhere, exit 2."""
    env.mp.setenv("FAKE_GPUS", "1")
    assert env("fig22", "--shard", "0/2", results=env.tmp / "shard-0") == 0
    (env.tmp / "shard-1").mkdir()
    capsys.readouterr()
    assert rx.main(["--merge", str(env.tmp / "shard-0"), str(env.tmp / "shard-1"), "--results", str(env.results)]) == 0
    captured = capsys.readouterr()
    assert captured.err == f"run-experiments: --merge {env.tmp / 'shard-1'}: no results files in it; merging the others\n"
    assert "fig22.json: +" in captured.out and (env.results / "fake-gpu-9000" / "fig22.json").exists()
    assert rx.main(["--merge", str(env.tmp / "shard-1"), "--results", str(env.tmp / "other")]) == 2
    assert capsys.readouterr().err == (f"run-experiments: --merge: no results files in {env.tmp / 'shard-1'}: "
                                       "nothing to merge\n")
    assert not (env.tmp / "other").exists()


def test_merge_refuses_conflicting_measurements(env, capsys, fig22_one_gpu):
    env.mp.setenv("FAKE_GPUS", "1")
    copy_of(fig22_one_gpu, env.tmp / "a")  # fig22 measured on one GPU at revision fake123
    env.mp.setenv("FAKE_REVISION", "other99")
    assert env("fig22", "--force", results=env.tmp / "b") == 0
    assert rx.main(["--merge", str(env.tmp / "a"), "--results", str(env.results)]) == 0
    target = env.results / "fake-gpu-9000" / "fig22.json"
    before = target.read_bytes()
    capsys.readouterr()
    assert rx.main(["--merge", str(env.tmp / "b"), "--results", str(env.results)]) == 2
    err = capsys.readouterr().err
    assert "conflict" in err and "nothing written" in err
    assert target.read_bytes() == before
    assert rx.main(["--merge", str(env.tmp / "b"), "--results", str(env.results), "--on-conflict", "keep"]) == 0
    assert {c["revision"] for c in load(target)["cases"].values()} == {"fake123"}
    assert rx.main(["--merge", str(env.tmp / "b"), "--results", str(env.results), "--on-conflict", "replace"]) == 0
    assert {c["revision"] for c in load(target)["cases"].values()} == {"other99"}


def test_merge_takes_a_record_stored_by_an_earlier_writer_as_the_same(env, capsys, fig22_one_gpu):
    """A shard written before FLOPS was derived (stored per repetition) holds the same measurement
    as the target's record that derives it: no conflict, the target unchanged."""
    copy_of(fig22_one_gpu, env.tmp / "a")  # fig22 measured on one GPU
    shutil.copytree(env.tmp / "a", env.tmp / "old")
    src = env.tmp / "old" / "fake-gpu-9000" / "fig22.json"
    data = load(src)
    changed = 0
    for rec in data["cases"].values():
        if "FLOPS" in rec.get("derived", ()):
            flops = [e["FLOPS"] for e in rf.entries_of(rec)]
            del rec["derived"]
            rec.setdefault("reps", {})["FLOPS"] = flops
            changed += 1
    assert changed
    src.write_text(json.dumps(data))
    assert rx.main(["--merge", str(env.tmp / "a"), "--results", str(env.results)]) == 0
    target = env.results / "fake-gpu-9000" / "fig22.json"
    before = load(target)["cases"]
    capsys.readouterr()
    assert rx.main(["--merge", str(env.tmp / "old"), "--results", str(env.results)]) == 0
    assert "conflict" not in capsys.readouterr().err and load(target)["cases"] == before


def test_merge_refuses_another_gpu(env, capsys, fig22_one_gpu):
    copy_of(fig22_one_gpu, env.tmp / "a")  # fig22 measured on one GPU, then its GPU's name changed
    src = env.tmp / "a" / "fake-gpu-9000" / "fig22.json"
    data = load(src)
    data["context"]["xcorr_gpu_name"] = "Other GPU"
    src.write_text(json.dumps(data))
    copy_of(fig22_one_gpu, env.results)  # the target: the same measurement, Fake GPU 9000's
    assert load(env.results / "fake-gpu-9000" / "fig22.json")["context"]["xcorr_gpu_name"] == "Fake GPU 9000"
    capsys.readouterr()
    assert rx.main(["--merge", str(env.tmp / "a"), "--results", str(env.results)]) == 2
    assert "Other GPU" in capsys.readouterr().err


def test_a_failure_is_replaced_by_a_measurement_not_the_reverse(env):
    env.mp.setenv("FAKE_GPUS", "1")
    env.mp.setenv("FAKE_ERROR_ON", "hL=256 wL=256 hR=256 wR=256 nL=8 nR=8")
    assert env("fig22", results=env.tmp / "bad") == 0
    env.mp.delenv("FAKE_ERROR_ON")
    shutil.copytree(env.tmp / "bad", env.tmp / "good")
    assert env("fig22", "--retry-failed", results=env.tmp / "good") == 0  # the failures measured, the rest as they were
    for order in (("bad", "good"), ("good", "bad")):
        out = env.tmp / ("merged-" + "-".join(order))
        assert rx.main(["--merge", *(str(env.tmp / o) for o in order), "--results", str(out)]) == 0
        check_complete(load(out / "fake-gpu-9000" / "fig22.json"), "fig22")


# --- Slurm ---

def test_slurm_sweep_writes_an_array_and_a_merge(tmp_path, capsys, monkeypatch):
    from xcsuite.cli import slurm_sweep
    monkeypatch.chdir(tmp_path)
    assert slurm_sweep.main(["fig22", "--shards", "4", "--dir", "sw", "--build", "mybuild", "--no-submit",
                             "--", "--quick"]) == 0
    task = (tmp_path / "sw" / "sweep.sbatch").read_text()
    assert "#SBATCH --array=0-3" in task and "#SBATCH --gres=gpu:1" in task
    # the task runs from the repository root: a relative --build is the caller's, made absolute
    assert f"--build {tmp_path / 'mybuild'} " in task and f"--results {tmp_path / 'sw'}/shard-" in task
    assert "#SBATCH --open-mode=append" in task  # a resubmission keeps the log of the attempt before
    assert '--shard "$SLURM_ARRAY_TASK_ID/4"' in task and "--quick" in task and " fig22 " in task
    assert "--merge" in (tmp_path / "sw" / "merge.sbatch").read_text()
    assert "afterany" in capsys.readouterr().out


SLURM_TOOLS = ("slurmctld", "slurmd", "sbatch", "scontrol", "squeue", "scancel", "sinfo")


def find_tool(name):
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def controller_answers(env=None) -> bool:
    try:
        r = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and "UP" in r.stdout


@pytest.fixture(scope="session")
def slurm():
    """A Slurm to submit to: as root, a single-node one of its own (scripts/slurm-local on free
    ports, in a fresh folder, with two fake GPUs; stopped at the end of the session); otherwise a
    controller that already answers (SLURM_CONF as set), asked for no GPUs. Skips, with the reason,
    where Slurm is not installed or neither works. Yields {"env": what the submitting process needs,
    "own": whether it is ours, "gres": the --gres to ask for}."""
    missing = [t for t in SLURM_TOOLS if not find_tool(t)]
    if missing:
        pytest.skip(f"Slurm is not installed here ({', '.join(missing)} not found; Debian: apt-get install "
                    "slurm-wlm munge)")
    if os.geteuid() != 0:
        if controller_answers():
            yield {"env": {}, "own": False, "gres": ""}
            return
        pytest.skip("no Slurm controller answers and scripts/slurm-local needs root to start one (slurmd "
                    "starts each job as its user)")
    d = Path(tempfile.mkdtemp(prefix="xcorr-slurm-"))  # short: munged's socket is there (at most 107 bytes)
    script = ROOT / "scripts" / "slurm-local"
    ports = {free_port() for _ in range(5)}
    env = {**os.environ, "XCORR_SLURMCTLD_PORT": str(ports.pop()), "XCORR_SLURMD_PORT": str(ports.pop()),
           "XCORR_SLURM_GPUS": "2", "XCORR_SLURM_WAIT": "60"}
    try:
        r = subprocess.run([str(script), "start", str(d)], capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired as e:
        r = subprocess.CompletedProcess(e.cmd, 124, "", f"timed out after 120 s: {e.stderr or ''}")
    try:
        if r.returncode != 0:
            pytest.skip(f"scripts/slurm-local could not start a Slurm here: {r.stderr.strip()[-400:]}")
        conf = {"SLURM_CONF": str(d / "slurm.conf")}
        assert controller_answers({**os.environ, **conf}), "the local Slurm started but its controller does not answer"
        yield {"env": conf, "own": True, "gres": "gpu:1", "dir": d}
    finally:
        subprocess.run([str(script), "stop", str(d)], capture_output=True, text=True, timeout=120, env=env)
        shutil.rmtree(d, ignore_errors=True)


def test_slurm_local_refuses_a_bad_gpu_setting_and_leaves_nothing_running(tmp_path):
    """XCORR_SLURM_GPUS is a number of fake GPUs or `real` (this machine's /dev/nvidiaN): anything
    else, or `real` where there is no GPU, ends with a clear error before a daemon is started."""
    missing = [t for t in SLURM_TOOLS if not find_tool(t)]
    if missing or os.geteuid() != 0:
        pytest.skip("scripts/slurm-local checks its GPU setting only as root with Slurm installed "
                    f"({'not root' if os.geteuid() != 0 else ', '.join(missing) + ' not found'})")
    settings = ["two", "-1"] + ([] if glob.glob("/dev/nvidia[0-9]*") else ["real"])
    for value in settings:
        d = tmp_path / f"s-{value}"
        env = {**os.environ, "XCORR_SLURM_GPUS": value, "XCORR_SLURMCTLD_PORT": str(free_port()),
               "XCORR_SLURMD_PORT": str(free_port())}
        r = subprocess.run([str(ROOT / "scripts" / "slurm-local"), "start", str(d)], capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode == 1 and "XCORR_SLURM_GPUS" in r.stderr, (value, r.returncode, r.stderr)
        assert r.stdout == "", r.stdout  # no SLURM_CONF to use
        assert not (d / "munge" / "munged.pid").exists() and not (d / "slurmctld.pid").exists(), value


def submit(capsys, *argv) -> list:
    """slurm-sweep ARGV; the ids of the array job and the merge job it printed."""
    from xcsuite.cli import slurm_sweep

    capsys.readouterr()
    assert slurm_sweep.main(list(argv)) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    m = re.search(r"array job (\d+) .*merge job (\d+)", out)
    assert m, out
    return [m.group(1), m.group(2)]


def job_states(jobs) -> dict:
    """{job id (array tasks as ID_K): (state, exit code)} of the jobs Slurm still knows."""
    states = {}
    for job in jobs:
        r = subprocess.run(["scontrol", "-o", "show", "job", job], capture_output=True, text=True, timeout=30)
        for line in r.stdout.splitlines():
            f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
            name = f"{f['ArrayJobId']}_{f['ArrayTaskId']}" if f.get("ArrayTaskId") else f["JobId"]
            states[name] = (f.get("JobState"), f.get("ExitCode"))
    return states


def wait_for_jobs(jobs, sweep_dir, limit_s=300.0) -> dict:
    """Waits until every job (and array task) has ended; fails after limit_s with the queue and the logs."""
    end = time.monotonic() + limit_s
    running = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")
    while True:
        states = job_states(jobs)
        if states and not any(s in running for s, _ in states.values()):
            return states
        if time.monotonic() > end:
            q = subprocess.run(["squeue"], capture_output=True, text=True, timeout=30).stdout
            logs = {p.name: p.read_text()[-500:] for p in (Path(sweep_dir) / "logs").glob("*")}
            pytest.fail(f"the sweep's jobs did not end within {limit_s:.0f} s: {states}\n{q}\n{logs}")
        time.sleep(0.5)


def test_a_sweep_on_a_real_slurm(env, slurm, capsys):
    """A real Slurm (scripts/slurm-local's, see the fixture): the array's two tasks run the fake
    bench, each on the GPU Slurm gave it, into a shard of their own; the merge job after them fills
    results/ with every case once, each with its device; submitting the same sweep again resumes
    (nothing to measure) and merges again without changing a byte."""
    for k, v in slurm["env"].items():
        env.mp.setenv(k, v)
    env.mp.setenv("FAKE_GPUS", "2")
    sw = env.tmp / "sweep"
    argv = ["fig22", "--shards", "2", "--dir", str(sw), "--gres", slurm["gres"], "--time", "00:10:00",
            "--results", str(env.results), "--build", str(env.build)]
    jobs = submit(capsys, *argv)
    try:
        states = wait_for_jobs(jobs, sw)
    finally:
        subprocess.run(["scancel", *jobs], capture_output=True, timeout=30)
    logs = {p.name: p.read_text() for p in (sw / "logs").glob("*.out")}
    assert set(states) == {f"{jobs[0]}_0", f"{jobs[0]}_1", jobs[1]}, states
    assert all(s == ("COMPLETED", "0:0") for s in states.values()), (states, logs)

    keys = {c.key for c in cases_of("fig22")}
    shard_cases = {}
    for k in (0, 1):
        data = load(sw / f"shard-{k}" / "fake-gpu-9000" / "fig22.json")
        assert data["xcorr_meta"]["shard"] == {"index": k, "count": 2, "cases": len(data["cases"])}
        assert data["xcorr_meta"]["complete"] and all(c["status"] == "ok" for c in data["cases"].values())
        devices = {c["device"]["uuid"] for c in data["cases"].values()}
        assert devices <= {"GPU-fake-0", "GPU-fake-1"}
        if slurm["own"]:  # --gres=gpu:1: the task sees the one GPU Slurm gave it (CUDA_VISIBLE_DEVICES)
            assert len(devices) == 1, devices
        shard_cases[k] = data["cases"]
    assert not set(shard_cases[0]) & set(shard_cases[1]) and set(shard_cases[0]) | set(shard_cases[1]) == keys

    target = env.results / "fake-gpu-9000" / "fig22.json"
    merged = load(target)
    check_complete(merged, "fig22")
    for k, cases in shard_cases.items():
        for key, rec in cases.items():
            assert merged["cases"][key] == rec  # each case as its shard measured it, device included
    assert sorted(merged["xcorr_meta"]["merged_from"]) == [str(sw / f"shard-{k}" / "fake-gpu-9000" / "fig22.json")
                                                          for k in (0, 1)]
    ran = [l for call in log_lines(env.log) for l in call]
    assert len(ran) == len(set(ran)) == len(keys)  # each case measured once
    leftovers = [p for p in [*env.results.rglob("*"), *sw.rglob("*")] if p.name.endswith(".tmp")]
    assert not leftovers, leftovers  # nothing half-written
    assert "complete" in logs["merge.out"], logs

    before = target.read_bytes()
    jobs = submit(capsys, *argv)  # again: the shards are complete, the merge changes nothing
    try:
        states = wait_for_jobs(jobs, sw)
    finally:
        subprocess.run(["scancel", *jobs], capture_output=True, timeout=30)
    assert all(s == ("COMPLETED", "0:0") for s in states.values()), states
    assert len([l for call in log_lines(env.log) for l in call]) == len(keys)
    assert target.read_bytes() == before
    merge_log = (sw / "logs" / "merge.out").read_text().splitlines()
    assert [l.split(": ", 1)[1] for l in merge_log] == [f"+{len(keys)} case(s), complete",
                                                           "no new case, complete (unchanged)"]


def test_two_gpus_time_the_peers_one_at_a_time_and_ready_them_side_by_side(env, monkeypatch):
    """Both GPUs' peer processes run, but their timing holds the peers' turn (xcsuite/peerturn.py:
    one flock for the host, beside the GPU locks): Python peers bound by host work slowed each other
    when two GPUs timed them at once (on two H200s, torch-fft's one-to-one calls up to 2.1x), while
    a peer process is mostly set-up, first calls and validation (the normalization group on one
    H100: 72 s of peer processes for ~2 s of timing), which needs no turn. So: every peer's timing
    holds the one turn file, no two timings overlap, and both GPUs measure peers."""
    env.mp.delenv("FAKE_PEERS_UNAVAILABLE", raising=False)
    log = env.tmp / "turns.log"
    env.mp.setenv("FAKE_PEER_TURN_LOG", str(log))
    env.mp.setenv("FAKE_PEER_SETUP", "0.02")
    env.mp.setenv("FAKE_SLEEP", "0.01")
    assert env("fig17", "fig20") == 0
    for exp in ("fig17", "fig20"):
        data = load(env.results / "fake-gpu-9000" / f"{exp}.json")
        assert data["xcorr_meta"]["complete"] and all(c["status"] == "ok" for c in data["cases"].values())
        assert any(k.startswith("torch-fft|") for k in data["cases"])
    timings = [ln.split() for ln in log.read_text().splitlines()]
    assert {t[2] for t in timings} == {"0", "1"}, timings  # both GPUs timed peers
    assert {t[3] for t in timings} == {str(env.tmp / "locks" / "peer-turn.lock")}  # one turn, the host's
    spans = sorted((float(t[0]), float(t[1])) for t in timings)
    assert all(end <= nxt for (_, end), (nxt, _) in zip(spans, spans[1:])), spans  # never two at once


def test_the_peers_turn_is_the_timing_not_the_process(tmp_path, monkeypatch):
    """Two peer processes started together on two GPUs (each case: 0.3 s of set-up, then 0.2 s
    timed) overlap in everything but their timing: the second waits for the turn only while the
    first is timed, not for the first process to end; a holder killed by SIGKILL frees the turn."""
    fake_bench_env(tmp_path, monkeypatch)
    cases = tmp_path / "cases.txt"
    cases.write_text("".join(f"variant=torch-fft form=one-to-one hL={n} wL={n} hR={n} wR={n} nL=1 nR=1\n" for n in (16, 24)))
    log, turn = tmp_path / "turns.log", tmp_path / "turn.lock"
    env = {**os.environ, "FAKE_GPUS": "2", "FAKE_PEER_SETUP": "0.3", "FAKE_SLEEP": "0.2",
           "FAKE_PEER_TURN_LOG": str(log), "XCORR_PEER_TURN": str(turn)}
    cmd = [sys.executable, str(ROOT / "tests" / "fake_xcorr.py"), "peerbench", "--cases", str(cases)]
    procs = [subprocess.Popen([*cmd, f"--benchmark_out={tmp_path / f'out{i}.json'}"],
                              env={**env, "CUDA_VISIBLE_DEVICES": str(i)}) for i in (0, 1)]
    assert [p.wait(60) for p in procs] == [0, 0]
    spans = sorted((float(a), float(b), d) for a, b, d, _ in (ln.split() for ln in log.read_text().splitlines()))
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), spans  # the timings one at a time
    # side by side: while one process readies its second case the other times its first, so the
    # devices alternate (a turn held for whole processes gives 0 0 1 1)
    devices = [d for *_, d in spans]
    assert devices in (["0", "1", "0", "1"], ["1", "0", "1", "0"]), spans
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom xcsuite import peerturn\n"
                               "with peerturn.turn():\n    print('held', flush=True); time.sleep(60)"],
                              env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    from xcsuite import peerturn

    with peerturn.turn({"XCORR_PEER_TURN": str(turn)}):  # not held by the dead process
        pass
    with peerturn.turn({"XCORR_PEER_TURN": str(tmp_path / "not-yet" / "turn.lock")}):  # its folder made
        assert (tmp_path / "not-yet" / "turn.lock").exists()


def test_two_gpus_measure_the_peers_in_as_many_processes_as_one(env, monkeypatch):
    """The peers' cases of an experiment are one unit of the pool, taken whole by one GPU: each
    piece would start a process of its own, seconds of start-up (by figure point, the two-GPU
    sweep of fig20, nmn and fig23 ran its peers in 9 processes against one GPU's 3; by peer, the
    normalized group's in 12 against 6). Our cases are still divided: both GPUs measure them."""
    env.mp.delenv("FAKE_PEERS_UNAVAILABLE", raising=False)
    calls = collections.Counter()
    real = rx.Runner.invoke

    def invoke(self, cases, exp_name, timeout):
        if cases[0].variant in self.peers:
            calls[os.environ.get("FAKE_GPUS")] += 1
        return real(self, cases, exp_name, timeout)

    monkeypatch.setattr(rx.Runner, "invoke", invoke)
    exps = ("fig20", "nmn", "fig23", "zncc_match")
    for n in ("1", "2"):
        env.mp.setenv("FAKE_GPUS", n)
        # --quick, as the scaling sweep runs on several GPUs (scripts/sweep-scaling): each experiment
        # still has peer cases of several figure points (and zncc_match of several peers), in half
        # the processes of the whole protocol
        assert env(*exps, "--quick", results=env.tmp / f"gpus-{n}") == 0
    assert calls["1"] >= len(exps) and calls["2"] == calls["1"], calls
    ours = set()
    for exp in exps:
        data = load(env.tmp / "gpus-2" / "fake-gpu-9000-quick" / f"{exp}.json")
        assert data["xcorr_meta"]["complete"] and all(c["status"] == "ok" for c in data["cases"].values())
        by_peer = collections.defaultdict(set)
        for k, c in data["cases"].items():
            (by_peer[k.split("|", 1)[0]] if k.startswith(("torch-", "cupy-")) else ours).add(c["device"]["index"])
        assert by_peer and len(set().union(*by_peer.values())) == 1, (exp, dict(by_peer))  # one GPU
        assert exp != "zncc_match" or len(by_peer) >= 2, dict(by_peer)  # of several peers
    assert ours == {"0", "1"}


def test_a_run_on_several_gpus_shows_its_progress(env, capsys):
    """run_experiments --gpus all (and so the sweep over a host's GPUs, ~15 minutes on two H100s,
    and a whole suite for hours) ran without a progress bar: the single-GPU path had one, the
    GPUs' threads none. One bar now counts every GPU's finished cases, by estimated GPU time,
    and ends at its total."""
    assert rx.main(["fig22", "fig16", "--gpus", "all", "--build", str(env.build), "--results", str(env.results)]) == 0
    err = capsys.readouterr().err
    states = re.findall(r"(\d+)%\|[^|]*\| est\. (\d+)/(\S+) s", err)
    assert states and states[-1][0] == "100" and states[-1][1] == states[-1][2]  # at its end, the total kept
    assert any(re.search(r"fig(22|16) \(GPU [01]\)", line) for line in err.splitlines())
