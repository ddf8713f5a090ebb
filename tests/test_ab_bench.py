"""scripts/dev/ab-bench (CPU only): the alternation, the summary's medians and ratios, the files it
writes, bad usage and failed runs, and the copied tree B builds from, with the fake bench."""
import json

import pytest
from suite_helpers import ROOT, load_script, make_fake_build

CASE = "variant=overlap-wise form=one-to-one hL=32 wL=32 hR=32 wR=32 nL=1 nR=1"


ab = load_script("dev/ab-bench")


@pytest.fixture
def builds(tmp_path, monkeypatch):
    for k in ("FAKE_TIME_SCALE", "FAKE_REJECT", "XCORR_GIT_REVISION", "OUT"):
        monkeypatch.delenv(k, raising=False)
    a, b = make_fake_build(tmp_path / "a"), make_fake_build(tmp_path / "b")
    return a, b


def test_b_twice_as_slow_reads_as_half(builds, tmp_path, capsys):
    """B's times are twice A's (FAKE_TIME_SCALE=2 on B's runs): A / B is 0.5 for every case; the
    rounds alternate (A first in odd rounds, B first in even ones); 2 rounds write 4 JSON and the
    summary, no more (the device's 8 files)."""
    a, b = builds
    out = tmp_path / "out"
    rc = ab.main(["--build-a", str(a), "--build-b", str(b), "--env-b", "FAKE_TIME_SCALE=2", "-b", CASE,
                  "-b", "variant=overlap-wise form=one-to-one hL=64 wL=64 hR=64 wR=64 nL=1 nR=1", "-n", "2", "-r", "3", "--out", str(out)])
    assert rc == 0
    captured = capsys.readouterr()
    printed = captured.out
    assert printed.index("round 1: A") < printed.index("round 1: B")
    assert printed.index("round 2: B") < printed.index("round 2: A")
    assert sorted(p.name for p in out.iterdir()) == ["ab-a-1.json", "ab-a-2.json", "ab-b-1.json", "ab-b-2.json",
                                                     "ab-summary.txt"]
    rows, missing, failed = ab.summarize([out / "ab-a-1.json", out / "ab-a-2.json"],
                                         [out / "ab-b-1.json", out / "ab-b-2.json"])
    assert len(rows) == 2 and not missing and not failed
    for name, ma, mb, ratio, sa, sb in rows:
        assert ratio == pytest.approx(0.5, rel=1e-9) and mb == pytest.approx(2 * ma) and sa == sb == 0
    summary = (out / "ab-summary.txt").read_text()
    assert "Fake GPU 9000" in summary and "0.500" in summary and "FAKE_TIME_SCALE" in summary
    # without XCORR_GIT_REVISION the recorded revision is whatever the copy's git says: it warns
    assert "XCORR_GIT_REVISION is not set" in captured.err


def test_no_revision_warning_when_it_is_given(builds, tmp_path, capsys, monkeypatch):
    a, b = builds
    monkeypatch.setenv("XCORR_GIT_REVISION", "abc123")
    assert ab.main(["--build-a", str(a), "--build-b", str(b), "--env-b", "FAKE_TIME_SCALE=2", "-b", CASE,
                    "-n", "1", "-r", "1", "--out", str(tmp_path / "out")]) == 0
    assert "XCORR_GIT_REVISION" not in capsys.readouterr().err


def test_summary_takes_medians_over_rounds_and_reports_one_sided_cases(tmp_path):
    """The summary's numbers: per side the median over rounds of each run's median aggregate (or of
    its repetitions where it has no aggregates), the spread (max - min) / median, cases seen on
    one side only listed apart, errored cases left out."""
    def run(path, cases):
        bench = []
        for name, times, agg in cases:
            if agg:
                bench.append({"name": name + "_median", "run_name": name, "run_type": "aggregate",
                              "aggregate_name": "median", "real_time": times, "time_unit": "ms"})
            else:
                bench += [{"name": name, "run_name": name, "run_type": "iteration", "real_time": t,
                           "time_unit": "us"} for t in times]
        bench.append({"name": "broken", "run_name": "broken", "run_type": "iteration", "error_occurred": True,
                      "real_time": 0.0, "time_unit": "us"})
        path.write_text(json.dumps({"context": {}, "benchmarks": bench}))
        return path
    a = [run(tmp_path / f"a{i}.json", [("x", t, True), ("y", [1.0, 9.0, 2.0], False)]) for i, t in enumerate((1.0, 1.2, 1.1))]
    b = [run(tmp_path / f"b{i}.json", [("x", t, True), ("z", [5.0], False)]) for i, t in enumerate((2.0, 2.0, 2.2))]
    rows, missing, failed = ab.summarize(a, b)
    assert [r[0] for r in rows] == ["x"] and set(missing) == {"y", "z"}
    assert failed == [("broken", "A and B", "error")]  # errored on both sides: said, not dropped
    name, ma, mb, ratio, sa, sb = rows[0]
    assert (ma, mb) == (pytest.approx(1100.0), pytest.approx(2000.0))  # ms -> us, median of 3 rounds
    assert ratio == pytest.approx(0.55) and sa == pytest.approx(0.2 / 1.1) and sb == pytest.approx(0.1)
    assert ab.medians(a[0])["y"] == 2.0 and "broken" not in ab.medians(a[0])


@pytest.mark.parametrize("argv,why", [
    (["-b", CASE, "--env-b", "K=V", "-n", "0"], "positive"),
    (["--env-b", "K=V"], "no cases"),
    (["-b", CASE], "would be the same"),
    (["-b", CASE, "--env-b", "KV"], "expected A=B"),
    (["-b", CASE, "-s", "lib/normalize/epilogue.cuh=/nonexistent/old.cuh"], "no such file"),
    (["-b", CASE, "-s", f"lib/nothing.cu={ROOT / 'meson.build'}"], "no such file in the repository"),
    (["-b", CASE, "--build-a", "x"], "go together"),
    (["-b", CASE, "-p", "/nonexistent/b.patch"], "-p /nonexistent/b.patch: no such file"),
])
def test_bad_usage_exits_2_with_one_line(argv, why, capsys, tmp_path):
    assert ab.main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert why in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("bad", ["cases-missing", "cases-folder", "out-file", "out-under-file", "build-empty"])
def test_bad_paths_exit_2_with_one_line_before_anything_is_made(bad, builds, tmp_path, capsys):
    """-B missing or a folder, --out a file (or under one): tracebacks (-B's after the builds, had
    there been any to make); a --build-a without xcorr_bench one when its first run started."""
    a, b = builds
    user = tmp_path / "taken"
    user.write_text("a user's file\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    given = {"cases-missing": ["-B", tmp_path / "nonexistent.txt"], "cases-folder": ["-B", tmp_path],
             "out-file": ["--out", user], "out-under-file": ["--out", user / "sub"], "build-empty": ["--build-a", empty]}[bad]
    why = {"cases-missing": f"-B {tmp_path / 'nonexistent.txt'}: No such file", "cases-folder": f"-B {tmp_path}: Is a directory",
           "out-file": f"--out {user}: {user} is a file, not a folder",
           "out-under-file": f"--out {user / 'sub'}: {user} is a file, not a folder",
           "build-empty": f"--build-a {empty}: no xcorr_bench in it"}[bad]
    argv = ["--build-a", str(a), "--build-b", str(b), "--env-b", "K=V", "-b", CASE, "--out", str(tmp_path / "out"),
            *map(str, given)]
    assert ab.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("ab-bench: ") and why in captured.err and len(captured.err.strip().splitlines()) == 1
    assert not captured.out and not (tmp_path / "out").exists() and user.read_text() == "a user's file\n"


def test_a_failed_run_exits_1_with_its_output(builds, tmp_path, capsys):
    """B's binary refuses the case (FAKE_REJECT on B's runs only): exit 1, B's error printed, no summary."""
    a, b = builds
    out = tmp_path / "out"
    rc = ab.main(["--build-a", str(a), "--build-b", str(b), "--env-b", "FAKE_REJECT=overlap-wise", "-b", CASE,
                  "--out", str(out)])
    assert rc == 1
    err = capsys.readouterr().err
    assert "B's run 1 failed" in err and "unknown or bad case" in err
    assert not (out / "ab-summary.txt").exists()


def test_b_tree_is_a_copy_with_the_swapped_files(tmp_path):
    """B builds from a copy of the sources with -s's files swapped in: the working tree keeps its
    file, builds, results and VCS are not copied, and a second copy refreshes the first."""
    old = tmp_path / "old.cu"
    old.write_text("// the old version\n")
    dest = tmp_path / "tree"
    ab.copy_tree(dest, [("lib/normalize/epilogue.cuh", str(old))])
    assert (dest / "lib" / "normalize" / "epilogue.cuh").read_text() == "// the old version\n"
    assert (ROOT / "lib" / "normalize" / "epilogue.cuh").read_text() != "// the old version\n"
    assert (dest / "meson.build").read_text() == (ROOT / "meson.build").read_text()
    for absent in (".git", "results", "plots", "build"):
        assert not (dest / absent).exists(), absent
    (dest / "build").mkdir()
    (dest / "build" / "kept").write_text("incremental")
    ab.copy_tree(dest, [])
    assert (dest / "lib" / "normalize" / "epilogue.cuh").read_text() == (ROOT / "lib" / "normalize" / "epilogue.cuh").read_text()
    assert (dest / "build" / "kept").read_text() == "incremental"
    with pytest.raises(SystemExit, match="no such file in the repository"):
        ab.copy_tree(tmp_path / "t2", [("lib/nothing.cu", str(old))])


def _patch(tmp_path, first_line_of_epilogue):
    """A unified diff that adds a line at the top of lib/normalize/epilogue.cuh and creates a file."""
    p = tmp_path / "b.patch"
    p.write_text("--- a/lib/normalize/epilogue.cuh\n+++ b/lib/normalize/epilogue.cuh\n@@ -1 +1,2 @@\n"
                 f"+// B's line\n {first_line_of_epilogue}\n"
                 "--- /dev/null\n+++ b/algorithms/ab_probe_new.txt\n@@ -0,0 +1 @@\n+new\n")
    return p


@pytest.mark.skipif(not ab.shutil.which("patch"), reason="no `patch` program on this machine")
def test_b_tree_is_a_copy_with_the_patches_applied(tmp_path):
    """-p: B's copy has the patch applied (a changed file and a created one), the working tree not;
    a second copy over the first (a refreshed build-ab-b/) applies it again instead of refusing the
    file it already created; a patch that does not apply is one line naming it."""
    epi = ROOT / "lib" / "normalize" / "epilogue.cuh"
    original = epi.read_text()
    patch = _patch(tmp_path, original.splitlines()[0])
    dest = tmp_path / "tree"
    for _ in range(2):
        ab.copy_tree(dest, [], [str(patch)])
        assert (dest / "lib" / "normalize" / "epilogue.cuh").read_text() == "// B's line\n" + original
        assert (dest / "algorithms" / "ab_probe_new.txt").read_text() == "new\n"
    assert epi.read_text() == original and not (ROOT / "algorithms" / "ab_probe_new.txt").exists()
    bad = tmp_path / "bad.patch"
    bad.write_text("--- a/meson.build\n+++ b/meson.build\n@@ -1 +1 @@\n-no such first line\n+x\n")
    with pytest.raises(SystemExit, match=f"-p {bad}: does not apply to this tree"):
        ab.copy_tree(tmp_path / "t3", [], [str(bad)])
    assert not list((tmp_path / "t3").rglob("*.rej")) and not list((tmp_path / "t3").rglob("*.orig"))


def test_sides_whose_batching_differs_are_one_case(tmp_path):
    """xcorr_bench divides min_time by the calls it batches per iteration, picked by a pilot run in
    each process: A can be named .../min_time:0.050/... where B is .../min_time:0.100/...; the
    summary still pairs them (it listed both as one-sided before)."""
    def run(path, name, t):
        path.write_text(json.dumps({"context": {}, "benchmarks": [
            {"name": name + "_median", "run_name": name, "run_type": "aggregate", "aggregate_name": "median",
             "real_time": t, "time_unit": "us"}]}))
        return path
    a = run(tmp_path / "a.json", "fft-fused/one-to-many/nR:32/min_time:0.050/manual_time", 90.0)
    b = run(tmp_path / "b.json", "fft-fused/one-to-many/nR:32/min_time:0.100/manual_time", 100.0)
    rows, missing, _ = ab.summarize([a], [b])
    assert missing == [] and [r[0] for r in rows] == ["fft-fused/one-to-many/nR:32/manual_time"]
    assert rows[0][3] == pytest.approx(0.9)


def test_a_case_that_fails_on_b_fails_the_run_and_is_named(builds, tmp_path, capsys, monkeypatch):
    """xcorr_bench records a failed case (a wrong result, a refusal) and goes on; ab-bench left such
    a case out of the summary (or called it "measured on one side only") and exited 0, so an A/B
    could read "B is faster" over a B that computes a case wrong."""
    a, b = builds
    monkeypatch.setenv("XCORR_GIT_REVISION", "abc123")
    monkeypatch.delenv("FAKE_ERROR_ON", raising=False)
    out = tmp_path / "out"
    big = "variant=overlap-wise form=one-to-one hL=64 wL=64 hR=64 wR=64 nL=1 nR=1"
    rc = ab.main(["--build-a", str(a), "--build-b", str(b), "--env-b", "FAKE_ERROR_ON=hL=64",
                  "--env-b", "FAKE_ERROR_MESSAGE=validation failed: err 3e-2", "-b", CASE, "-b", big,
                  "-n", "2", "-r", "2", "--out", str(out)])
    assert rc == 1
    summary = (out / "ab-summary.txt").read_text()
    assert "FAILED on B: validation failed: err 3e-2" in summary and "one side only" not in summary
    assert "1 case(s) failed" in capsys.readouterr().err
