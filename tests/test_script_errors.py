"""The scripts' refusals of bad input, run as a user runs them (a subprocess, this interpreter): one
clear line on stderr (argparse's usage and error line for a bad argument) and a non-zero exit, 2
for bad usage, never a traceback, a silent success or a file written (CPU only)."""
import ast
import json
import os
import shutil
import sys

import pytest
from conftest import ROOT, one_line_error, run
from in_process import in_process, in_process_script
from suite_helpers import make_fake_build

from xcsuite.cli import COMMANDS

SCRIPTS = ROOT / "scripts"
REPORTS = ("aggregate", "claims", "anchors", "table", "plot")


def script(name, *args, env=None, timeout=300):
    """scripts/NAME (dev/NAME: scripts/dev/), or the xcsuite command NAME as python -m xcsuite NAME."""
    cmd = ["-m", "xcsuite", name] if name in COMMANDS else [str(SCRIPTS / name)]
    return run([sys.executable, *cmd, *map(str, args)], cwd=ROOT, timeout=timeout,
               env={**os.environ, **(env or {})})


def usage_error(r, *needles):
    """argparse's refusal: exit 2, its usage, then one error line holding every needle."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and r.stderr.startswith("usage: "), r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert ": error: " in last and all(n in last for n in needles), last


def paragraphs(text):
    return [" ".join(p.split()) for p in text.split("\n\n") if p.strip()]


# --- auto-tables: a --results without measured tables emptied auto's tables ---------------------

def scripts_tree(tmp_path):
    """A tree of auto-tables and auto-tables-cpp copied, with an empty lib/ for what they
    write (so that a test cannot damage the committed tables) and the packages they import linked."""
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    (tree / "lib").mkdir()
    for name in ("auto-tables", "auto-tables-cpp", "_xcsuite.py"):  # _xcsuite: its missing-module line
        shutil.copy(SCRIPTS / name, tree / "scripts")
    for package in ("xcsuite", "experiments", "python"):  # the atomic write, summary.csv's reader, _rules.py
        os.symlink(ROOT / package, tree / package)
    return tree


@pytest.mark.parametrize("results", ["missing", "gpu-folder"])
def test_make_auto_table_refuses_results_without_tables_and_writes_nothing(tmp_path, results):
    """`--results /nonexistent` (or one GPU's folder, not the folder of them) printed "wrote
    harness/auto_table.cpp", exited 0 and left it with every table deleted. Run on a copy of the
    scripts in a tree of its own, so that this test cannot damage the committed tables."""
    tree = scripts_tree(tmp_path)
    given = tmp_path / "nonexistent" if results == "missing" else ROOT / "results" / "nvidia-h200"
    args = ["--results", given, "--list", ROOT / "lib" / "auto_tables" / "variants.json"]
    if results == "missing":  # once as a user runs it: a process of its own
        r = run([sys.executable, str(tree / "scripts" / "auto-tables"), *map(str, args)])
    else:  # the same copy of the script, run in this interpreter (in_process_script)
        r = in_process_script("auto-tables", *args, path=tree / "scripts" / "auto-tables")
    one_line_error(r, 2, f"auto-tables: {given}: ", "nothing written",
                   "no such folder" if results == "missing" else "summary.csv")
    assert not r.stdout
    assert not list((tree / "lib").iterdir())


@pytest.mark.parametrize("check", [[], ["--check"]])
@pytest.mark.parametrize("content, needle", [({"variants": 5}, "not a list of variants"), ([5], "not a list of variants"),
                                             ([], "a variant list without variants")])
def test_make_auto_table_refuses_a_list_that_is_no_variant_list(content, needle, check, tmp_path):
    """{"variants": 5} was an AttributeError traceback. On a copy of the scripts, as above."""
    tree = scripts_tree(tmp_path)
    f = tmp_path / "list.json"
    f.write_text(json.dumps(content))
    args = [*check, "--results", ROOT / "results", "--list", f]
    # in this interpreter: its one line and exit 2 as a process (the same return from main) is
    # test_make_auto_table_refuses_results_without_tables_and_writes_nothing's
    r = in_process_script("auto-tables", *args, path=tree / "scripts" / "auto-tables")
    one_line_error(r, 2, f"auto-tables: {f}: ", needle, "; nothing written")
    assert not r.stdout and not list((tree / "lib").iterdir())


# --- the report commands on a folder that is not a GPU's results ----------------------------------------

@pytest.mark.parametrize("folder", ["missing", "empty"])
@pytest.mark.parametrize("tool", REPORTS)
def test_a_report_refuses_a_folder_without_results(tool, folder, tmp_path):
    """aggregate and claims raised a traceback on a missing folder; anchors, table and plot said
    nothing or "nothing measured" and exited 0 (plot after making an empty plots/<name>/)."""
    d = tmp_path / "nonexistent"
    if folder == "empty":
        d.mkdir()
    env = {"XCORR_PLOTS": str(tmp_path / "plots")}
    # each command once as a user runs it (a process of its own), the other folder in this interpreter;
    # that process is also the one of their exit 2 for a damaged summary.csv (the same
    # exit_2_on_bad_results), whose matrix below runs in this interpreter
    r = script(tool, d, env=env) if folder == "missing" else in_process(tool, d, env=env)
    one_line_error(r, 2, f"{tool}: {d}: ", "no such folder" if folder == "missing" else "not a GPU's results folder")
    assert not (tmp_path / "plots").exists()
    assert folder == "missing" or not list(d.iterdir())


def test_plot_refuses_an_unknown_experiment(tmp_path):
    r = script("plot", "--only", "fig17,nosuch", env={"XCORR_PLOTS": str(tmp_path / "plots")})
    usage_error(r, "--only", "unknown experiment 'nosuch'", "fig17, ")
    assert not (tmp_path / "plots").exists()


@pytest.mark.parametrize("only", ["", " , "])
def test_plot_refuses_an_empty_only(only, tmp_path):
    """`--only ''` (an unset shell variable) drew every figure of every GPU. In this interpreter
    (in_process): plot's usage error as a process is test_plot_refuses_an_unknown_experiment's."""
    r = in_process("plot", "--only", only, env={"XCORR_PLOTS": str(tmp_path / "plots")})
    usage_error(r, "--only: no experiment named")
    assert not r.stdout and not (tmp_path / "plots").exists()


@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_ncu_account_refuses_a_folder_without_profiles(folder, tmp_path):
    d = tmp_path / "nonexistent"
    if folder == "empty":
        d.mkdir()
    # once as a user runs it (a process of its own), the empty folder in this interpreter
    r = script("dev/ncu-fft-report", d) if folder == "missing" else in_process_script("dev/ncu-fft-report", d)
    one_line_error(r, 2, f"ncu-fft-report: {d}: ", "no such folder" if folder == "missing" else "no ncu-*.csv")
    assert not r.stdout


@pytest.mark.parametrize("content, needle", [("", "an empty file"), ("a,b\n1,2\n", "no Kernel Name column (nor 8 more)"),
                                             ('"ID","Kernel Name"\n"",""\n1,x\n', "no gpu__time_duration.sum column")])
def test_ncu_account_refuses_a_csv_that_is_no_profile_and_prints_nothing(content, needle, tmp_path):
    """An empty ncu-*.csv (ncu failed) was pandas' EmptyDataError, one without the metrics a KeyError;
    after the folder's good profiles had been printed (and --reduced's copies written)."""
    d = tmp_path / "probe"
    shutil.copytree(ROOT / "tests" / "fixtures" / "ncu-fft-6a5b521", d)
    (d / "ncu-zz.csv").write_text(content)
    args = [d, "--reduced", tmp_path / "reduced"]
    # in this interpreter: its one line and exit 2 as a process (the same return from main) is
    # test_ncu_account_refuses_a_folder_without_profiles's
    r = in_process_script("dev/ncu-fft-report", *args)
    one_line_error(r, 2, f"ncu-fft-report: {d / 'ncu-zz.csv'}: ", needle)
    assert not r.stdout and not (tmp_path / "reduced").exists()


# --- tracebacks instead of one line ---------------------------------------------------------------------

def test_auto_report_without_a_build_or_a_summary(tmp_path):
    out = tmp_path / "report.md"
    r = script("auto-report", "--build", tmp_path / "no-build", "--out", out)
    one_line_error(r, 2, f"{tmp_path / 'no-build' / 'xcorr'} is missing", "build first")
    build = make_fake_build(tmp_path / "build")
    r = in_process_script("auto-report", "--build", build, "--gpu-dir", tmp_path, "--out", out)  # (a process above)
    one_line_error(r, 2, f"{tmp_path / 'summary.csv'} is missing", "xcsuite aggregate")
    assert not out.exists()


def test_auto_report_leaves_the_committed_report_to_a_build_of_every_variant(tmp_path):
    """A -Dvariants=01,50 build (what developers build on a shared machine) picks among its two
    variants: `scripts/reproduce` rewrote results/<gpu>/auto_report.md with that report, still
    titled "build: all variants". It is left as it is, with one line saying why."""
    build = make_fake_build(tmp_path / "build")
    (build / "meson-info").mkdir(exist_ok=True)
    (build / "meson-info" / "intro-buildoptions.json").write_text(
        json.dumps([{"name": "gpu_arch", "value": "9.0"}, {"name": "variants", "value": "01,50"}]))
    gpu = tmp_path / "nvidia-h200"
    gpu.mkdir()
    shutil.copy(ROOT / "results" / "nvidia-h200" / "summary.csv", gpu)
    (gpu / "auto_report.md").write_text("the committed report\n")
    r = script("auto-report", "--build", build, "--gpu-dir", gpu)
    assert r.returncode == 0 and not r.stdout, (r.stdout, r.stderr)
    one_line_error(r, 0, "builds only the variants 01,50 (-Dvariants)", f"{gpu / 'auto_report.md'} is left as it is")
    assert (gpu / "auto_report.md").read_text() == "the committed report\n"


@pytest.mark.parametrize("patterns", ["0", "-3"])
def test_application_refuses_fewer_than_one_pattern(patterns, tmp_path):
    """-3 raised a traceback; 0 quietly ran the default 50 patterns (`args.patterns or 50`)."""
    r = script("application", "--algorithm", "scipy", "--patterns", patterns, "--out", tmp_path / "out")
    usage_error(r, f"--patterns must be at least 1, not {patterns}")
    assert not r.stdout and not (tmp_path / "out").exists()


def test_bench_summary_help_and_unreadable_files(tmp_path):
    r = script("dev/bench-summary", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: bench-summary") and "Google Benchmark JSON" in r.stdout
    missing = tmp_path / "missing.json"
    one_line_error(script("dev/bench-summary", missing), 2, f"bench-summary: {missing}: No such file")
    (tmp_path / "bad.json").write_text("{ not json")
    one_line_error(script("dev/bench-summary", tmp_path / "bad.json"), 2, "not a benchmark JSON file")


@pytest.mark.parametrize("content, needle", [
    ({"benchmarks": "x"}, 'no "benchmarks" list'), ([5], "no object at the top"), ({"benchmarks": [5]}, "benchmark 0 has no run_name"),
    ({"benchmarks": [{"name": "c_mean", "run_type": "aggregate", "aggregate_name": "mean", "real_time": 1.0,
                      "time_unit": "us"}]}, "benchmark 0 has no run_name"),
    ({"benchmarks": [{"run_name": "c", "run_type": "iteration"}]}, "benchmark 0, c: no real_time and time_unit"),
    ({"context": {}, "benchmarks": []}, "holds no benchmarks"),
    ({"benchmarks": [{"run_name": "c", "run_type": "aggregate", "aggregate_name": "median", "real_time": 1.0,
                      "time_unit": "us"}]}, "holds no repetitions or mean aggregates"),
    ("results", "a results file of this suite (xcsuite-results/2), not a Google Benchmark JSON")])
def test_bench_summary_refuses_what_is_no_google_benchmark_json(content, needle, tmp_path):
    """An AttributeError ({"benchmarks": "x"}) or KeyError (an entry without run_name) traceback; a
    results file of this suite (no "benchmarks") printed an empty table and exited 0."""
    f = ROOT / "results" / "nvidia-h200" / "fig17.json" if content == "results" else tmp_path / "f.json"
    if content != "results":
        f.write_text(json.dumps(content))
    r = script("dev/bench-summary", f)
    one_line_error(r, 2, f"bench-summary: {f}: ", needle)
    assert not r.stdout


@pytest.mark.parametrize("args", [["BASELINE"], ["--mix", "kernel"]])
def test_sass_diff_without_cuobjdump(args, tmp_path):
    """cuobjdump not on PATH: one line saying where it comes from (it was a FileNotFoundError)."""
    build = tmp_path / "build" / "libxcorr_harness.a.p"
    build.mkdir(parents=True)
    (build / "x.o").write_bytes(b"")
    (tmp_path / "BASELINE").mkdir()
    (tmp_path / "bin").mkdir()  # a PATH without cuobjdump
    args = [str(tmp_path / a) if a == "BASELINE" else a for a in args]
    r = script("dev/sass-diff", *args, "--build", tmp_path / "build", env={"PATH": str(tmp_path / "bin")})
    one_line_error(r, 2, "sass-diff: cuobjdump is not on PATH", "CUDA toolkit")


def test_python_overhead_without_torch(tmp_path):
    """Without PyTorch (a torch that cannot be imported shadows any installed one): one line."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text('raise ImportError("No module named \'torch\' (hidden by the test)")\n')
    r = script("dev/python-overhead", env={"PYTHONPATH": str(tmp_path)})
    one_line_error(r, 2, "python-overhead: needs PyTorch", "hidden by the test")
    assert not r.stdout


# --- silent success on bad input ------------------------------------------------------------------------

def test_slurm_sweep_refuses_an_unknown_experiment(tmp_path):
    r = script("slurm-sweep", "fig17", "nosuch", "--shards", "2", "--dir", tmp_path / "sweep", "--no-submit")
    usage_error(r, "unknown experiment 'nosuch'", "fig17, ")
    assert not r.stdout and not (tmp_path / "sweep").exists()


def test_run_experiments_exits_2_for_an_unknown_experiment(tmp_path):
    """A usage error like the others (it exited 1)."""
    r = script("run-experiments", "fig17,fig99", "--build", make_fake_build(tmp_path / "build"),
               "--results", tmp_path / "results")
    one_line_error(r, 2, "run-experiments: unknown experiment 'fig99' (known: fig15, ")
    assert not (tmp_path / "results").exists()


def test_run_experiments_merge_of_folders_without_results(tmp_path):
    """It exited 0 and said nothing (python -m xcsuite slurm-sweep's merge job after shards that all failed)."""
    for k in (0, 1):
        (tmp_path / f"shard-{k}").mkdir()
    r = script("run-experiments", "--merge", tmp_path / "shard-0", tmp_path / "shard-1", "--results", tmp_path / "results")
    one_line_error(r, 2, f"run-experiments: --merge: no results files in {tmp_path / 'shard-0'}, {tmp_path / 'shard-1'}",
                   "nothing to merge")
    assert not r.stdout and not (tmp_path / "results").exists()


@pytest.mark.parametrize("content, needle", [("not json", "not JSON"), ('{"cases": {}}', "neither a registry"),
                                             ("[1, 2]", "neither a registry"), (None, "No such file")])
def test_run_experiments_estimate_refuses_a_file_that_is_no_registry(content, needle, tmp_path):
    """--registry with a results file ended in a TypeError traceback (a dict indexed as the list)."""
    f = tmp_path / "registry.json"
    if content is not None:
        f.write_text(content)
    r = script("run-experiments", "fig17", "--estimate", "--registry", f)
    one_line_error(r, 2, f"run-experiments: --registry {f}: ", needle)


def test_run_experiments_estimate_takes_the_registry_a_results_file_recorded(tmp_path):
    r = script("run-experiments", "windows", "--quick", "--estimate", "--registry",
               ROOT / "results" / "nvidia-h200" / "windows.json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert [l for l in r.stdout.splitlines() if l.startswith("windows ")], r.stdout


@pytest.mark.parametrize("option", ["--max-minutes", "--chunk-seconds", "--max-fmas"])
@pytest.mark.parametrize("value, needle", [("-1", "must be above 0, not -1"), ("0", "must be above 0, not 0"),
                                           ("abc", "not a number: 'abc'")])
def test_run_experiments_refuses_a_limit_of_zero_or_less(option, value, needle, tmp_path):
    """--max-minutes 0 (and --max-fmas 0) meant no limit, -1 stopped at once or selected nothing."""
    args = ["fig17", option, value, "--build", make_fake_build(tmp_path / "build"), "--results", tmp_path / "results"]
    # once as a user runs it (a process of its own), the rest of the matrix in this interpreter
    r = script("run-experiments", *args) if (option, value) == ("--max-minutes", "0") else in_process("run-experiments", *args)
    usage_error(r, f"argument {option}: ", needle)
    assert not r.stdout and not (tmp_path / "results").exists()


# --- --help ---------------------------------------------------------------------------------------------

def test_ncu_fft_account_help_and_a_missing_cases_file_come_before_the_build(tmp_path):
    """--help was taken for a cases file, after a whole configure and build. (A fake build here,
    so that the old script did not build either.)"""
    env = {"OUT": str(tmp_path / "out"), "XCORR_BUILD": str(make_fake_build(tmp_path / "build"))}
    for flag in ("--help", "-h"):
        r = run([str(SCRIPTS / "dev" / "ncu-fft-profile"), flag], cwd=tmp_path, env={**os.environ, **env}, timeout=60)
        assert r.returncode == 0 and r.stdout.startswith("usage: scripts/dev/ncu-fft-profile [CASES_FILE]"), r
        assert "Nsight Compute" in r.stdout and not r.stderr
    r = run([str(SCRIPTS / "dev" / "ncu-fft-profile"), "no-cases.txt"], cwd=tmp_path, env={**os.environ, **env}, timeout=60)
    one_line_error(r, 2, "ncu-fft-profile: no-cases.txt: no such cases file")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name,doc_of", [("dev/ab-bench", "scripts/dev/ab-bench"), ("batch-scaling", "scripts/batch-scaling"),
                                         ("table", "xcsuite/cli/table.py"),
                                         ("sweep-scaling", "scripts/sweep-scaling"), ("tm-scaling", "scripts/tm-scaling")])
def test_help_holds_the_whole_description(name, doc_of):
    """Their --help stopped mid-sentence (the docstring's first line, or its first paragraph, which
    ends on "Four readings:" in table): every paragraph of the docstring is in it now."""
    r = script(name, "--help")
    assert r.returncode == 0, r.stderr
    doc = ast.get_docstring(ast.parse((ROOT / doc_of).read_text()))
    text = " ".join(r.stdout.split())
    for p in paragraphs(doc):
        assert p in text, p


@pytest.mark.parametrize("name", ["dev/emulate-tensor-tiled", "git-revision"])
def test_help_of_a_script_without_options(name):
    """They ignored --help: emulate-tensor-tiled ran its minute-long check, git-revision printed
    the revision. Any other argument is refused."""
    cmd = [sys.executable, str(SCRIPTS / name)] if name.endswith(".py") else [str(SCRIPTS / name)]
    for flag in ("--help", "-h"):
        r = run(cmd + [flag], cwd=ROOT, timeout=120)
        assert r.returncode == 0 and r.stdout.startswith("usage: ") and len(r.stdout.splitlines()) == 1, r
        assert not r.stderr
    r = run(cmd + ["--frobnicate"], cwd=ROOT, timeout=120)
    assert r.returncode == 2 and not r.stdout and len(r.stderr.strip().splitlines()) == 1, r


# --- bad values and paths: tracebacks, or a refusal after the work -------------------------------------

def test_application_refuses_a_negative_seed(tmp_path):
    """NumPy's generator raised a ValueError traceback."""
    r = script("application", "--algorithm", "scipy", "--seed", "-1", "--out", tmp_path / "out")
    usage_error(r, "--seed must be 0 or more, not -1")
    assert not r.stdout and not (tmp_path / "out").exists()


@pytest.mark.parametrize("name, needle", [("bogus", "--algorithm bogus: no such variant in "),
                                           ("signal-tiled", "--algorithm signal-tiled does not compute this application's n-to-mn matrices")])
def test_application_refuses_an_unknown_algorithm_before_asking_for_a_gpu(xcorr, name, needle, tmp_path):
    """A typo said "bogus needs a GPU", exit 3 (and on a GPU failed in xcorr run after the set-up)."""
    r = script("application", "--algorithm", name, "--build", os.path.dirname(xcorr), "--out", tmp_path / "out")
    usage_error(r, needle)
    assert not r.stdout and not (tmp_path / "out").exists()


@pytest.mark.parametrize("under", [False, True])
def test_application_refuses_a_file_for_its_plots_folder(under, tmp_path):
    """--out is a folder: a file there was a FileExistsError traceback once the correlations were done."""
    f = tmp_path / "taken"
    f.write_text("a user's file\n")
    r = script("application", "--algorithm", "scipy", "--patterns", "1", "--out", f / "sub" if under else f)
    usage_error(r, "--out is the plots folder", f"{f} is a file, not a folder")
    assert not r.stdout and f.read_text() == "a user's file\n"


@pytest.mark.parametrize("mode", [["--plot-only"], []])
def test_zncc_offsets_refuses_a_file_for_its_plots_folder(mode, tmp_path):
    """A NotADirectoryError traceback (--plot-only: after reading the results). Without a GPU the
    measuring mode refuses it too, before saying that it measures only on one."""
    f = tmp_path / "taken"
    f.write_text("a user's file\n")
    r = script("zncc-offsets", *mode, "--results", ROOT / "results", "--plots", f, env={"CUDA_VISIBLE_DEVICES": ""})
    usage_error(r, "--plots: ", f"{f} is a file, not a folder")
    assert not r.stdout and f.read_text() == "a user's file\n"


@pytest.mark.parametrize("flag", ["--dir", "--results"])
def test_slurm_sweep_refuses_a_file_for_a_folder(flag, tmp_path):
    """--dir: a NotADirectoryError traceback; --results: the merge job's failure, after the sweep."""
    f = tmp_path / "taken"
    f.write_text("a user's file\n")
    given = {"--dir": tmp_path / "sweep", "--results": tmp_path / "results", flag: f / "sub"}
    r = script("slurm-sweep", "fig17", "--shards", "2", "--no-submit", *(x for kv in given.items() for x in kv))
    usage_error(r, f"{flag}: ", f"{f} is a file, not a folder")
    assert not r.stdout and not (tmp_path / "sweep").exists() and f.read_text() == "a user's file\n"


@pytest.mark.parametrize("tool, flag", [("auto-report", "--out")])
@pytest.mark.parametrize("where", ["missing", "folder"])
def test_an_output_file_in_a_missing_folder_or_a_folder(tool, flag, where, tmp_path):
    """A FileNotFoundError traceback (auto-report's after its whole report); a folder given for
    the file an IsADirectoryError. Refused before the work; nothing written. (auto-tables-cpp is the
    build's generator, its paths meson's: left as it was, so that the build needs no xcsuite/.)"""
    given = tmp_path / "nodir" / "x.out" if where == "missing" else tmp_path
    r = script(tool, flag, given) if where == "missing" else in_process_script(tool, flag, given)
    usage_error(r, f"{flag}: ", "no such folder " + str(tmp_path / "nodir") if where == "missing" else f"{tmp_path} is a folder")
    assert not r.stdout and not list(tmp_path.iterdir())


# --- a damaged summary.csv: every reader stops with one line naming the file and the column ----------------

def damaged_summary(gpu, damage):
    """A copy of the H200's summary.csv, damaged as `damage` says; (file, what the error names)."""
    import csv
    gpu.mkdir(parents=True)
    f = gpu / "summary.csv"
    if damage == "not-a-summary":
        f.write_text("a,b\n1,2\n")
        return f, "no column gpu"
    rows = list(csv.reader(open(ROOT / "results" / "nvidia-h200" / "summary.csv", newline="")))
    column, value = {"hL": ("hL", "abc"), "status": ("status", "weird"), "time": ("time_us", "-1"),
                     "cold": ("cold", "maybe"), "missing": ("time_us", None)}[damage]
    i = rows[0].index(column)
    ok = next(n for n, r in enumerate(rows) if n and r[rows[0].index("status")] == "ok" and r[rows[0].index("variant")] == "fft")
    if value is None:
        rows = [r[:i] + r[i + 1:] for r in rows]
    else:
        rows[ok][i] = value
    with open(f, "w", newline="") as out:
        csv.writer(out).writerows(rows)
    return f, f"column {column}" + ("" if value is None else f", line {ok + 1}")


@pytest.mark.parametrize("damage", ["hL", "status", "time", "cold", "missing", "not-a-summary"])
@pytest.mark.parametrize("tool", ["claims", "anchors", "table", "plot", "auto-tables", "auto-report"])
def test_a_damaged_summary_is_one_line_and_exit_2(tool, damage, tmp_path):
    """summary.csv with hL "abc" (one row): claims reported "8 confirmed, 6 not confirmed" or
    fewer, anchors "54 not measured", table wrote its tables, all with exit 0; auto-report
    and auto-tables --check stopped with a ValueError traceback; a CSV of `a,b` was a KeyError
    in claims and a silent exit 0 in anchors. Now one line naming the file and the column (and
    the line), exit 2, and nothing written."""
    results = tmp_path / "results"
    gpu = results / "nvidia-h200"
    f, where = damaged_summary(gpu, damage)
    before = sorted(p.name for p in gpu.iterdir())
    env = {"XCORR_PLOTS": str(tmp_path / "plots")}
    if tool == "auto-tables":
        args = ["--check", "--results", results, "--list", ROOT / "lib" / "auto_tables" / "variants.json"]
    elif tool == "auto-report":
        args = ["--build", make_fake_build(tmp_path / "build"), "--gpu-dir", gpu, "--out", tmp_path / "report.md"]
    else:
        args = [gpu]
    # In this interpreter: each command's and script's one line and exit 2 as a user runs it (a
    # process, the same return from main) is another test's here: the reports' missing folder,
    # auto-tables' missing --results, auto-report's missing build.
    if tool in COMMANDS:
        r = in_process(tool, *args, env=env)
    else:  # scripts/auto-tables, scripts/auto-report
        r = in_process_script(tool, *args, env=env)
    one_line_error(r, 2, f"{tool}: {f}: ", where, "xcsuite aggregate")
    assert "Traceback" not in r.stderr
    assert sorted(p.name for p in gpu.iterdir()) == before and not (tmp_path / "report.md").exists()
    assert not list((tmp_path / "plots").glob("*/*")) if (tmp_path / "plots").exists() else True
