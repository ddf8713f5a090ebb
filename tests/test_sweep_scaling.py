"""scripts/sweep-scaling (the quick sweep on one GPU against all of them), on the CPU
against the fake bench pretending to be two GPUs: which GPUs each run used, that both runs measured
the same cases, the JSON, and the refusals."""
import json
import os
import subprocess
from pathlib import Path

import experiments
import pytest
from in_process import captured
from suite_helpers import fake_bench_env, load_script, suite_registry
from test_run_experiments import cases_of

from xcsuite import gpus, peerbench, resultfile
from xcsuite.cli import run_experiments as rx

sweep = load_script("sweep-scaling")


@pytest.fixture
def env(tmp_path, monkeypatch):
    build = fake_bench_env(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_GPUS", "2")
    monkeypatch.setenv("FAKE_SLEEP", "0.02")  # per case: the two GPUs' halves overlap
    return build, tmp_path, monkeypatch


@pytest.fixture
def env_in_process(env, monkeypatch):
    """env, with run_sweep's runs (`python -m xcsuite run-experiments ...`) run in this interpreter
    (run_in_this_process): each process imported NumPy and the runner again, most of a fake run's
    cost. run_sweep itself (its command line, environment and verdicts file) is the real one; the
    tests on `env` run the runner as the process it is."""
    real = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: run_in_this_process(cmd, real, **kw))
    return env


def run_in_this_process(cmd, real, **kw):
    """subprocess.run(cmd, **kw) for run_sweep's command, as its process runs it: xcsuite's
    dispatch (python -m xcsuite, tests/in_process.py's captured) with the environment it was given
    as the whole of os.environ, its stdout captured where run_sweep pipes it and its stderr written
    to this process's fd 2 (where the child's went); any other command (the runner's own
    nvidia-smi, its benchmarks' processes) runs for real."""
    if list(map(str, cmd[1:4])) != ["-m", "xcsuite", "run-experiments"]:
        return real(cmd, **kw)
    from xcsuite.__main__ import main

    r = captured(lambda: main([str(a) for a in cmd[3:]]), cmd, kw.get("env"), replace_env=True)
    os.write(2, r.stderr.encode())
    piped = kw.get("stdout") == subprocess.PIPE
    if not piped:
        os.write(1, r.stdout.encode())
    return subprocess.CompletedProcess(cmd, r.returncode, r.stdout if piped else None)


def devices_of(folder):
    """{results file: the device UUIDs its cases were measured on}."""
    out = {}
    for f in Path(folder).glob("*/*.json"):
        data = json.loads(f.read_text())
        if isinstance(data, dict) and "cases" in data:
            out[f.name] = {c["device"]["uuid"] for c in data["cases"].values()}
    return out


def test_one_gpu_then_both_on_the_same_cases(env, capsys):
    build, tmp, _ = env
    out, keep = tmp / "sweep.json", tmp / "kept"
    assert sweep.main(["fig22", "fig15", "--build", str(build), "--out", str(out), "--keep", str(keep)]) == 0
    one, two = devices_of(keep / "gpus-1"), devices_of(keep / "gpus-2")
    assert set(one) == set(two) == {"fig22.json", "fig15.json"}
    assert all(d == {"GPU-fake-0"} for d in one.values())
    assert set().union(*two.values()) == {"GPU-fake-0", "GPU-fake-1"}
    data = json.loads(out.read_text())
    assert [r["gpus"] for r in data["runs"]] == [1, 2]
    assert data["runs"][1]["devices"] == [{"index": "0", "uuid": "GPU-fake-0"}, {"index": "1", "uuid": "GPU-fake-1"}]
    assert data["cases"] > 20 and data["files"] == 2 and data["target"] == 1.8
    assert data["speedup"] == pytest.approx(data["runs"][0]["seconds"] / data["runs"][1]["seconds"])
    assert data["holds"] == (data["speedup"] >= 1.8) and data["git_revision"]
    assert "1 GPU" in capsys.readouterr().out


def test_the_deal_is_there_for_an_ab_run_on_one_machine(env_in_process):
    """--assign deal (run_experiments' older way, kept so that pool and deal compare on one
    machine): the two-GPU run measures the same cases on both GPUs, each GPU exactly the share
    gpus.deal gives it before the run, and the JSON says how the cases were assigned."""
    build, tmp, _ = env_in_process
    out, keep = tmp / "sweep.json", tmp / "kept"
    assert sweep.main(["fig22", "--build", str(build), "--out", str(out), "--keep", str(keep), "--assign", "deal"]) == 0
    data = json.loads(out.read_text())
    assert data["assign"] == "deal" and data["cases"] > 20
    got = json.loads(next((keep / "gpus-2").glob("*/fig22.json")).read_text())["cases"]
    reg = suite_registry()
    su = rx.Setup([experiments.load("fig22")], reg, rx.QUICK_PROTOCOL, rx.QUICK_MAX_FMAS, frozenset())
    items = [("fig22", c) for c in cases_of("fig22") if c.key in got]
    cost = rx.case_cost(su, {v["name"]: v.get("family") for v in reg})
    bins = gpus.deal(items, 2, cost, lambda it: rx.point_of("fig22", it[1]))
    for i, b in enumerate(bins):
        assert {got[c.key]["device"]["uuid"] for _, c in b} == {f"GPU-fake-{i}"}


def test_one_gpu_is_refused_and_nothing_is_written(env, capsys):
    build, tmp, mp = env
    mp.setenv("FAKE_GPUS", "1")
    assert sweep.main(["fig22", "--build", str(build), "--out", str(tmp / "s.json")]) == 3
    assert "needs two GPUs or more, 1 selected" in capsys.readouterr().err
    assert not (tmp / "s.json").exists()


def test_a_missing_build_and_a_bad_selection_are_refused(env, capsys):
    build, tmp, _ = env
    assert sweep.main(["fig22", "--build", str(tmp / "nowhere")]) == 2
    assert "xcorr_bench is missing" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        sweep.main(["fig22", "--build", str(build), "--gpus", "0,7"])
    assert e.value.code == 2 and "no visible GPU '7'" in capsys.readouterr().err


def test_a_failed_run_voids_the_comparison(env, capsys):
    build, tmp, mp = env
    mp.setenv("FAKE_REJECT", "variant=")
    out = tmp / "s.json"
    out.write_text("the user's earlier file")
    assert sweep.main(["fig22", "--build", str(build), "--out", str(out)]) != 0
    assert out.read_text() == "the user's earlier file"


def test_the_two_runs_in_two_sittings_compare_as_one(env_in_process, capsys):
    """--part one, then --part all --with the first JSON: the same comparison as one sitting (a GPU
    machine lent for 10-minute commands); a JSON of another sweep (revision, experiments, GPUs) is
    refused."""
    build, tmp, mp = env_in_process
    mp.setenv("XCORR_GIT_REVISION", "abc1234")
    first, second = tmp / "one.json", tmp / "both.json"
    assert sweep.main(["fig22", "--build", str(build), "--part", "one", "--out", str(first)]) == 0
    part = json.loads(first.read_text())
    assert [r["gpus"] for r in part["runs"]] == [1] and part["speedup"] is None and part["holds"] is None
    assert "alone" in capsys.readouterr().out
    assert sweep.main(["fig22", "--build", str(build), "--part", "all", "--with", str(first), "--out", str(second)]) == 0
    both = json.loads(second.read_text())
    assert [r["gpus"] for r in both["runs"]] == [1, 2] and both["runs"][0] == part["runs"][0]
    assert both["speedup"] == pytest.approx(both["runs"][0]["seconds"] / both["runs"][1]["seconds"])
    assert both["runs"][0]["case_set"] == both["runs"][1]["case_set"] and both["cases"] == part["cases"] > 0
    for args, what in ((["fig15"], "experiments"), (["fig22", "--gpus", "1"], None)):
        r = sweep.main([*args, "--build", str(build), "--part", "all", "--with", str(first)])
        err = capsys.readouterr().err
        if what:
            assert r == 2 and f"was another sweep: {what}" in err, err
        else:  # one GPU selected: refused before anything runs
            assert r == 3
    mp.setenv("XCORR_GIT_REVISION", "def5678")
    assert sweep.main(["fig22", "--build", str(build), "--part", "all", "--with", str(first)]) == 2
    assert "revision 'abc1234', here 'def5678'" in capsys.readouterr().err


def test_runs_of_different_cases_are_not_compared(env_in_process, capsys):
    build, tmp, _ = env_in_process
    first = tmp / "one.json"
    assert sweep.main(["fig22", "--build", str(build), "--part", "one", "--out", str(first)]) == 0
    data = json.loads(first.read_text())
    data["runs"][0]["case_set"] = "0" * 64  # as if the first sitting had measured other cases
    first.write_text(json.dumps(data))
    out = tmp / "both.json"
    assert sweep.main(["fig22", "--build", str(build), "--part", "all", "--with", str(first), "--out", str(out)]) == 1
    assert "measured different cases" in capsys.readouterr().err and not out.exists()


def test_a_case_failing_alike_in_both_runs_leaves_the_comparison_standing(env_in_process, capsys):
    """A case every run records as failed (a peer failing its validation: PyTorch's conv2d at
    2048 x 2048 in zncc_autocorr) is the same work in both runs: the comparison stands and says so.
    A case failed in one run and ok in the other (a crash, a time limit) voids it."""
    build, tmp, mp = env_in_process
    mp.setenv("FAKE_ERROR_ON", "hL=32 wL=32")
    mp.setenv("FAKE_ERROR_MESSAGE", "validation failed: err=3.6e-05 > tol=1.0e-05")
    first, out = tmp / "one.json", tmp / "both.json"
    assert sweep.main(["fig22", "--build", str(build), "--part", "one", "--out", str(first)]) == 0
    assert sweep.main(["fig22", "--build", str(build), "--part", "all", "--with", str(first), "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    one, two = data["runs"]
    assert one["not_ok"] == two["not_ok"] > 0 and "32x32" in one["not_ok_first"][0] and "err=3.6e-05" in one["not_ok_first"][0]
    assert one["status_set"] == two["status_set"] and data["speedup"] > 0
    assert "ended not ok in both runs alike" in capsys.readouterr().out
    part = json.loads(first.read_text())
    part["runs"][0]["status_set"] = "0" * 64  # as if a case had crashed in the first run only
    first.write_text(json.dumps(part))
    out.unlink()
    assert sweep.main(["fig22", "--build", str(build), "--part", "all", "--with", str(first), "--out", str(out)]) == 1
    assert "ok in one, failed in the other" in capsys.readouterr().err and not out.exists()


def test_a_case_the_time_cap_refused_in_one_run_is_refused_in_the_other(env_in_process, capsys, monkeypatch):
    """The peers' time cap decides from a timed pilot, so a case predicted near it (CuPy's 4096
    pairs of 64 x 64: 2.05-2.5 s against 2 s on an H100) was refused in one run and measured in the
    other, and the window group's comparison came out void without saying which case.
    The run compared with now takes the first run's verdicts (run_sweep's `verdicts`, which
    peerbench reads from XCORR_PEER_VERDICTS: tests/test_peerbench.py), in --by-group and in --part
    alike; a case that still ends otherwise is named."""
    build, tmp, mp = env_in_process
    real, given = sweep.run_sweep, []
    pilot_says = {"near": "too slow"}  # what this run's pilot would say of the near case

    def run_sweep(selection, experiments, build_, results, max_minutes, force=True, assign="pool", verdicts=None):
        """The real run, and beside its cases a CuPy case as peerbench records it: refused by the
        earlier run's verdict where one is given, else by this run's pilot."""
        given.append(verdicts)
        seconds, r = real(selection, experiments, build_, results, max_minutes, force, assign, verdicts)
        f = next(Path(results).glob("*/fig22.json"))
        data = json.loads(f.read_text())
        rec = {**next(iter(data["cases"].values())), "variant": "cupy-correlate2d", "params": {}}
        name = sweep.capped_name({**rec, "status": "failed", "message": peerbench.CAP_REFUSAL})
        said = f"{peerbench.CAP_REFUSAL} predicted 2.05 s per call (4096 pairs) > --time-cap 2 s"
        refused = (name in verdicts) if verdicts is not None else pilot_says["near"] == "too slow"
        rec.update(status="failed" if refused else "ok", message=(verdicts or {}).get(name, said) if refused else "")
        data["cases"][resultfile.key_of(rec)] = rec
        f.write_text(json.dumps(data))
        return seconds, r

    monkeypatch.setattr(sweep, "run_sweep", run_sweep)
    out = tmp / "groups.json"
    assert sweep.main(["fig22", "--by-group", "--build", str(build), "--out", str(out)]) == 0
    name = next(iter(given[1]))
    assert given[0] is None and name.startswith("cupy-correlate2d/") and "2.05 s" in given[1][name]
    group = json.loads(out.read_text())["groups"][0]
    assert group["runs"][0]["capped"] == group["runs"][1]["capped"] == given[1]
    # --part one, then --part all --with it (another sitting, another pilot): the same verdicts.
    first, both = tmp / "one.json", tmp / "both.json"
    assert sweep.main(["fig22", "--build", str(build), "--part", "one", "--out", str(first)]) == 0
    pilot_says["near"] = "measured"
    assert sweep.main(["fig22", "--build", str(build), "--part", "all", "--with", str(first), "--out", str(both)]) == 0
    assert given[-1] == given[1] and json.loads(both.read_text())["speedup"] > 0
    # Without them (a JSON of an earlier revision has no "capped"), the flip voids the comparison,
    # which says which case ended otherwise and in which run.
    part = json.loads(first.read_text())
    del part["runs"][0]["capped"]
    first.write_text(json.dumps(part))
    both.unlink()
    capsys.readouterr()
    assert sweep.main(["fig22", "--build", str(build), "--part", "all", "--with", str(first), "--out", str(both)]) == 1
    err = capsys.readouterr().err
    assert given[-1] is None and not both.exists()
    assert "ok in one, failed in the other): fig22.json: cupy-correlate2d|" in err and "failed on 1 GPU(s) only" in err


def test_a_run_cut_by_the_budget_resumes_in_the_next_sitting(env_in_process, capsys, monkeypatch):
    """--resume DIR: a run that --max-minutes stops (exit 4, the comparison not made) continues in
    the next sitting from its pending cases (not --force again: what was measured stays), its wall
    time the sum of its sittings'; a finished run is not run again, so --part one then --part all
    give the comparison; DIR of another sweep is refused; --resume with --keep or --with is refused."""
    build, tmp, mp = env_in_process
    mp.setenv("XCORR_GIT_REVISION", "abc1234")
    resume, out = tmp / "resume", tmp / "sweep.json"
    calls, real = [], sweep.run_sweep

    def run_sweep(selection, experiments, build_, results, max_minutes, force=True, assign="pool", verdicts=None):
        calls.append((selection.count(",") + 1, force, max_minutes))
        if len(calls) == 1:  # the first sitting stops after one experiment, as the budget would stop it
            seconds, r = real(selection, experiments[:1], build_, results, max_minutes, force)
            assert r.returncode == 0
            r.returncode = 4
            return seconds, r
        return real(selection, experiments, build_, results, max_minutes, force)

    monkeypatch.setattr(sweep, "run_sweep", run_sweep)
    base = ["fig22", "fig15", "--build", str(build), "--resume", str(resume)]
    assert sweep.main([*base, "--part", "one", "--max-minutes", "5"]) == 4
    assert "give the same command again" in capsys.readouterr().err
    state = json.loads((resume / "state.json").read_text())
    assert state["runs"]["1"]["sittings"] == 1 and not state["runs"]["1"]["complete"]
    first = state["runs"]["1"]["seconds"]
    measured = json.loads((resume / "gpus-1" / "fake-gpu-9000-quick" / "fig22.json").read_text())["cases"]
    assert sweep.main([*base, "--part", "one", "--max-minutes", "5"]) == 0
    assert [c[:2] for c in calls] == [(1, True), (1, False)]  # the second sitting resumes, no --force
    assert all(4.9 < c[2] <= 5.0 for c in calls)  # each sitting's budget from its own start
    again = json.loads((resume / "gpus-1" / "fake-gpu-9000-quick" / "fig22.json").read_text())["cases"]
    assert again == measured  # the first sitting's measurements kept, not taken again
    assert sweep.main([*base, "--part", "one"]) == 0 and len(calls) == 2  # finished: not run again
    assert sweep.main([*base, "--part", "all", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert [(r["gpus"], r["sittings"]) for r in data["runs"]] == [(1, 2), (2, 1)]
    assert data["runs"][0]["seconds"] > first and data["runs"][0]["case_set"] == data["runs"][1]["case_set"]
    assert data["speedup"] == pytest.approx(data["runs"][0]["seconds"] / data["runs"][1]["seconds"])
    assert set(devices_of(resume / "gpus-2")) == {"fig22.json", "fig15.json"}
    mp.setenv("XCORR_GIT_REVISION", "def5678")
    assert sweep.main([*base, "--part", "all"]) == 2
    assert "holds another sweep: git_revision 'abc1234', here 'def5678'" in capsys.readouterr().err
    for extra in (["--keep", str(tmp / "k")], ["--with", str(out)]):
        with pytest.raises(SystemExit) as e:
            sweep.main([*base, *extra])
        assert e.value.code == 2


def test_max_minutes_bounds_the_sitting_not_each_run(env, capsys, monkeypatch):
    """--max-minutes is the sitting's budget (scripts/reproduce passes what is left of its own): the
    run on all GPUs gets what the one-GPU run left of it, and a sitting with nothing left stops
    before starting a run (exit 4), saying how to continue; by groups it was already so."""
    build, tmp, _ = env
    clock, given = [0.0], []

    def run_sweep(selection, experiments, build_, results, max_minutes, force=True, assign="pool", verdicts=None):
        given.append(max_minutes)
        clock[0] += 120.0  # each run takes two minutes of the sitting
        return 120.0, sweep.subprocess.CompletedProcess([], 4 if max_minutes < 2 else 0, "")

    monkeypatch.setattr(sweep.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(sweep, "run_sweep", run_sweep)
    monkeypatch.setattr(sweep, "run_record", lambda count, devices, seconds, results, **k: {"gpus": count, "cases": 1, "seconds": seconds})
    resume = tmp / "resume"
    base = ["fig22", "--build", str(build), "--resume", str(resume)]
    assert sweep.main([*base, "--max-minutes", "3"]) == 4
    assert given == [3.0, 1.0]  # the second run had one minute of the three left, and was cut
    assert "give the same command again to continue" in capsys.readouterr().err
    given.clear()
    assert sweep.main([*base, "--max-minutes", "1.99"]) == 4  # resumes the cut run, which still does not fit
    assert given == [1.99]
    given.clear()
    assert sweep.main(["fig22", "--build", str(build), "--max-minutes", "2"]) == 4
    assert given == [2.0]  # nothing left for the second run: not started
    assert "out of --max-minutes before the run on 2 GPU(s); with --resume DIR" in capsys.readouterr().err


def test_by_group_each_group_is_compared_in_one_sitting_and_survives_another_machine(env_in_process, capsys, monkeypatch):
    """--by-group --resume DIR: a group's two runs in one sitting (the sitting cut in a group's
    second run discards that group: it starts over, both runs again, in the next sitting); the
    finished groups kept in DIR/state.json count in a later sitting on another machine of the same
    GPU model; the suite's speedup is the ratio of the sums; another revision or GPU model, and
    --by-group with --part, are refused."""
    build, tmp, mp = env_in_process
    mp.setenv("XCORR_GIT_REVISION", "abc1234")
    resume, out = tmp / "resume", tmp / "sweep.json"
    calls, real = [], sweep.run_sweep

    def run_sweep(selection, experiments, build_, results, max_minutes, force=True, assign="pool", verdicts=None):
        calls.append((tuple(experiments), selection.count(",") + 1, force))
        seconds, r = real(selection, experiments, build_, results, max_minutes, force, assign, verdicts)
        if len(calls) == 4:  # the second group's run on both GPUs: as if --max-minutes stopped it
            r.returncode = 4
        return seconds, r

    monkeypatch.setattr(sweep, "run_sweep", run_sweep)
    base = ["fig22", "fig21,fig15", "--by-group", "--build", str(build), "--resume", str(resume)]
    assert sweep.main([*base, "--max-minutes", "5"]) == 4
    err = capsys.readouterr().err
    assert "group fig21,fig15 was cut by --max-minutes" in err and "starts over" in err
    assert calls == [(("fig22",), 1, True), (("fig22",), 2, True), (("fig21", "fig15"), 1, True),
                     (("fig21", "fig15"), 2, True)]
    state = json.loads((resume / "state.json").read_text())
    assert list(state["done"]) == ["fig22"] and state["groups"] == [["fig22"], ["fig21", "fig15"]]
    # The next sitting is another machine (other UUIDs) of the same model: fig22 counts as measured.
    state["done"]["fig22"]["uuids"] = ["GPU-other-0", "GPU-other-1"]
    (resume / "state.json").write_text(json.dumps(state))
    assert sweep.main([*base, "--out", str(out)]) == 0
    assert calls[4:] == [(("fig21", "fig15"), 1, True), (("fig21", "fig15"), 2, True)]  # the group again, whole
    data = json.loads(out.read_text())
    groups = data["groups"]
    assert [g["experiments"] for g in groups] == [["fig22"], ["fig21", "fig15"]]
    assert data["machines"] == [["GPU-other-0", "GPU-other-1"], ["GPU-fake-0", "GPU-fake-1"]]
    for g in groups:
        one, two = g["runs"]
        assert (one["gpus"], two["gpus"]) == (1, 2) and one["case_set"] == two["case_set"] and g["cases"] > 0
        assert {d["uuid"] for d in two["devices"]} == {"GPU-fake-0", "GPU-fake-1"}
    one, two = (sum(g["runs"][k]["seconds"] for g in groups) for k in (0, 1))
    assert data["seconds"] == {"1": pytest.approx(one), "2": pytest.approx(two)}
    assert data["speedup"] == pytest.approx(one / two) and data["holds"] == (data["speedup"] >= 1.8)
    assert data["cases"] == sum(g["cases"] for g in groups) and data["git_revision"] == "abc1234"
    assert "2 groups on 2 machine(s)" in capsys.readouterr().out
    assert sweep.main([*base]) == 0 and len(calls) == 6  # all done: nothing runs again
    mp.setenv("XCORR_GIT_REVISION", "def5678")
    assert sweep.main(base) == 2
    assert "holds another sweep: git_revision 'abc1234', here 'def5678'" in capsys.readouterr().err
    mp.setenv("XCORR_GIT_REVISION", "abc1234")
    mp.setenv("FAKE_GPU_NAME", "Fake GPU 9001")
    assert sweep.main(base) == 2
    assert "gpu_model 'Fake GPU 9000', here 'Fake GPU 9001'" in capsys.readouterr().err
    for extra in (["--part", "one"], ["--keep", str(tmp / "k")], ["fig22,fig15"]):
        with pytest.raises(SystemExit) as e:
            sweep.main([*base, *extra])
        assert e.value.code == 2
    assert "each experiment in one group" in capsys.readouterr().err


def test_the_default_groups_hold_every_experiment_once():
    groups = experiments.sweep_groups()
    flat = [n for g in groups for n in g]
    assert sorted(flat) == sorted(experiments.names()) and len(flat) == len(set(flat))
    assert all(g == [n for n in experiments.names() if n in g] for g in groups)  # run order within a group


def test_run_sweep_hands_the_verdicts_to_the_peers_and_no_stale_ones(tmp_path, monkeypatch):
    """run_sweep's verdicts reach run_experiments' processes (and so peerbench) as a file named by
    XCORR_PEER_VERDICTS, present while the run lasts; a run without verdicts does not inherit a
    caller's XCORR_PEER_VERDICTS (its pilots decide)."""
    seen = []

    def run(cmd, **kw):
        path = kw["env"].get(peerbench.VERDICTS_ENV)
        seen.append(json.loads(Path(path).read_text()) if path else None)
        return sweep.subprocess.CompletedProcess(cmd, 0, "")

    monkeypatch.setattr(sweep.subprocess, "run", run)
    monkeypatch.setenv(peerbench.VERDICTS_ENV, str(tmp_path / "stale.json"))
    sweep.run_sweep("0,1", ["fig22"], tmp_path, tmp_path / "r", None, verdicts={"cupy-correlate2d/x": "too slow: 3 s"})
    sweep.run_sweep("0", ["fig22"], tmp_path, tmp_path / "r", None)
    sweep.run_sweep("0,1", ["fig22"], tmp_path, tmp_path / "r", None, verdicts={})
    assert seen == [{"cupy-correlate2d/x": "too slow: 3 s"}, None, {}]
