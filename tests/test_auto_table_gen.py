"""auto's tables as generated code: the build makes the C++ source from the committed data
of lib/auto_tables/ (scripts/auto-tables-cpp, a custom_target of meson.build), no generated
source is committed, and scripts/auto-tables takes the variants' facts from `xcorr list
--json`, never from the algorithm sources (CPU only)."""
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, ROOT, one_line_error, run
from in_process import in_process_script

TABLES = ROOT / "lib" / "auto_tables"
SCRIPTS = ROOT / "scripts"


def scripts_module(name):
    from suite_helpers import load_script
    return load_script(name)


# --- (a) the build generates the table -----------------------------------------------------------

def test_the_build_compiles_the_table_it_generated_from_the_committed_data(tmp_path, xcorr):
    """<build>/auto_table.cpp is the generator's output of the committed tables (what the library
    compiled), and the source tree holds none."""
    built = BUILD / "auto_table.cpp"
    assert built.is_file(), "the build has no generated auto_table.cpp (meson.build: custom_target auto_table)"
    out = tmp_path / "auto_table.cpp"
    r = run([sys.executable, str(SCRIPTS / "auto-tables-cpp"), "--out", str(out)])
    assert r.returncode == 0, r.stderr
    assert built.read_text() == out.read_text(), "the build's auto_table.cpp is stale: rebuild"
    assert not (ROOT / "lib" / "auto_table.cpp").exists()
    text = out.read_text()
    assert text.startswith("// GENERATED at build time by scripts/auto-tables-cpp")
    # Every committed table is compiled in.
    for tsv in TABLES.glob("*.tsv"):
        assert f'{{"{tsv.stem}", ' in text, tsv.stem


FORM_NAMES = ("one-to-one", "one-to-many", "n-to-mn", "n-to-m")  # core.hpp's Form, the tables' first column


def committed_tables():
    """{GPU name: {problem key (the first 12 columns): {variant: time_us}}} of lib/auto_tables/."""
    out = {}
    for path in sorted(TABLES.glob("*.tsv")):
        lines = path.read_text().splitlines()
        name = lines[0][2:].split(":", 1)[0]  # "# NVIDIA H200: fastest parameters of ..."
        rows = [line.split("\t") for line in lines[1:] if line and not line.startswith(("#", "form\t"))]
        problems = out[name] = {}
        for r in rows:
            problems.setdefault(tuple(r[:12]), {})[r[12]] = float(r[14])
    return out


def explain_args(key):
    """`xcorr explain`'s problem options for a table's problem key (form .. dx1)."""
    form, hL, wL, hR, wR, nL, nR, dy0, dy1, dx0, dx1 = key[:11]
    return ["--form", FORM_NAMES[int(form)], "--left", f"{nL}:{hL}x{wL}", "--right", f"{nR}:{hR}x{wR}",
            "--shifts", f"{dy0}:{dy1},{dx0}:{dx1}"]


@pytest.mark.parametrize("tsv", sorted(p.name for p in TABLES.glob("*.tsv")))
def test_explain_chooses_from_every_committed_table(xcorr, registry, tsv):
    """`xcorr explain` on each GPU of lib/auto_tables/ answers from its measurements: the first
    measured problem of the table, with its fastest variant first."""
    lines = (TABLES / tsv).read_text().splitlines()
    gpu = lines[0][2:].split(":", 1)[0]
    row = lines[2].split("\t")
    key, variant = row[:12], row[12]
    assert key[11] == "0"
    r = run([xcorr, "explain", "--json", *explain_args(key), "--gpu", gpu])
    assert r.returncode == 0, r.stderr
    e = json.loads(r.stdout)
    assert e["table"] == Path(tsv).stem
    top = e["candidates"][0]
    assert f"measured on {gpu}" in top["reason"], top
    if variant in {v["name"] for v in registry}:  # built (a build of some variants may lack it)
        assert top["algorithm"] == variant or abs(top["predicted_us"] - float(row[14])) < 1e-3, top


def test_the_generator_refuses_a_folder_without_the_facts(tmp_path):
    (tmp_path / "t").mkdir()
    shutil.copy(TABLES / "nvidia-h200.tsv", tmp_path / "t")
    r = run([sys.executable, str(SCRIPTS / "auto-tables-cpp"), "--tables", str(tmp_path / "t"),
             "--out", str(tmp_path / "x.cpp")])
    one_line_error(r, 2, "auto-tables-cpp: ", "no variants.json", "auto-tables")
    assert not (tmp_path / "x.cpp").exists()


def test_overlap_sum_in_closed_form_is_the_sum_over_shifts():
    """The generator sums a window's overlaps in closed form (a signal's millions of shifts one by
    one took the build minutes): the same integers as the sum shift by shift."""
    gen = scripts_module("auto-tables-cpp")
    rng = random.Random(66)
    for _ in range(20000):
        m, n = rng.randint(1, 9), rng.randint(1, 9)
        s0, s1 = rng.randint(-12, 12), rng.randint(-12, 12)
        brute = sum(max(0, min(n, m - s) - max(0, -s)) for s in range(s0, s1 + 1))
        assert gen.overlap_sum(s0, s1, m, n) == brute, (s0, s1, m, n)


# --- (b) the facts come from `xcorr list --json`, never from algorithms/*.cu -----------------------

def tree_without_sources(tmp_path):
    """A copy of the scripts with the committed results and an empty lib/auto_tables/, and no
    algorithms/: whatever auto-tables reads, it is not an algorithm source."""
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    (tree / "lib" / "auto_tables").mkdir(parents=True)
    for name in ("auto-tables", "auto-tables-cpp", "_xcsuite.py"):  # _xcsuite: its missing-module line
        shutil.copy(SCRIPTS / name, tree / "scripts")
    os.symlink(ROOT / "results", tree / "results")
    for package in ("xcsuite", "experiments", "python"):  # the atomic write, summary.csv's reader, _rules.py
        os.symlink(ROOT / package, tree / package)
    return tree


def fake_build(tmp_path, registry, variants="all"):
    """A build directory whose xcorr prints `registry` for `list --json`, configured with -Dvariants."""
    build = tmp_path / "build"
    (build / "meson-info").mkdir(parents=True)
    (build / "list.json").write_text(json.dumps(registry))
    exe = build / "xcorr"
    exe.write_text(f'#!/bin/sh\n[ "$*" = "list --json" ] || exit 9\ncat "{build / "list.json"}"\n')
    exe.chmod(0o755)
    (build / "meson-info" / "intro-buildoptions.json").write_text(json.dumps([{"name": "variants", "value": variants}]))
    return build


def committed_registry():
    """The committed facts as a registry (`xcorr list --json` has more keys, which variants.json drops)."""
    return [dict(v, summary="", forms=[], params={}) for v in json.loads((TABLES / "variants.json").read_text())]


def test_make_auto_table_remakes_the_committed_data_from_a_build_without_any_source(tmp_path):
    tree = tree_without_sources(tmp_path)
    build = fake_build(tmp_path, committed_registry())
    r = run([sys.executable, str(tree / "scripts" / "auto-tables"), "--build", str(build)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    made = sorted(p.name for p in (tree / "lib" / "auto_tables").iterdir())
    assert made == sorted(p.name for p in TABLES.iterdir())
    for name in made:
        assert (tree / "lib" / "auto_tables" / name).read_text() == (TABLES / name).read_text(), name
    assert not (tree / "lib" / "auto_table.cpp").exists()  # the build makes the source
    r = run([sys.executable, str(tree / "scripts" / "auto-tables"), "--check", "--build", str(build)])
    assert r.returncode == 0, r.stderr


def test_make_auto_table_opens_no_algorithm_source(tmp_path, monkeypatch):
    """In this process, with every open of a file under algorithms/ made to fail."""
    mat = scripts_module("auto-tables")
    real_open = open

    def guarded(path, *a, **kw):
        assert "algorithms" not in Path(str(path)).parts, f"opened {path}"
        return real_open(path, *a, **kw)

    monkeypatch.setattr("builtins.open", guarded)
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **kw: guarded(self, *a, **kw).read())
    monkeypatch.setattr(mat, "TABLES", tmp_path / "auto_tables")
    facts = mat.variant_facts(mat.registry_of_file(TABLES / "variants.json"))
    files = mat.generate(ROOT / "results", tmp_path / "auto_tables", facts)
    assert {p.name for p in files} == {p.name for p in TABLES.iterdir()}


def test_make_auto_table_leaves_out_the_variants_the_list_lacks(tmp_path):
    """The variants are the list's: a variant it lacks (a peer, such as torch-fft) has no rows. In
    this interpreter (its run as a process, exit 0 and every table written: the test above)."""
    tree = tree_without_sources(tmp_path)
    reg = [v for v in committed_registry() if v["name"] != "fft-fused"]
    build = fake_build(tmp_path, reg)
    r = in_process_script("auto-tables", "--build", build, path=tree / "scripts" / "auto-tables")
    assert r.returncode == 0, r.stderr
    for tsv in (tree / "lib" / "auto_tables").glob("*.tsv"):
        assert "\tfft-fused\t" not in tsv.read_text()
    names = [v["name"] for v in json.loads((tree / "lib" / "auto_tables" / "variants.json").read_text())]
    assert "fft-fused" not in names and names == sorted(names)


def test_make_auto_table_refuses_a_build_of_some_variants(tmp_path):
    """In this interpreter (its one line and exit 2 as a process, the same return from main: the
    test below)."""
    tree = tree_without_sources(tmp_path)
    build = fake_build(tmp_path, committed_registry(), variants="01,50")
    r = in_process_script("auto-tables", "--build", build, path=tree / "scripts" / "auto-tables")
    one_line_error(r, 2, "-Dvariants=01,50", "-Dvariants=all", "nothing written")
    assert not list((tree / "lib" / "auto_tables").iterdir())


def test_make_auto_table_refuses_a_missing_build(tmp_path):
    tree = tree_without_sources(tmp_path)
    r = run([sys.executable, str(tree / "scripts" / "auto-tables"), "--build", str(tmp_path / "nobuild")])
    one_line_error(r, 2, "no xcorr built there", "nothing written")
    assert not list((tree / "lib" / "auto_tables").iterdir())


def test_make_auto_table_removes_a_table_of_no_results_folder(tmp_path):
    """The build compiles every .tsv of the folder: one whose results folder is gone is removed."""
    tree = tree_without_sources(tmp_path)
    stale = tree / "lib" / "auto_tables" / "old-gpu.tsv"
    shutil.copy(TABLES / "nvidia-h200.tsv", stale)
    script = [sys.executable, str(tree / "scripts" / "auto-tables"), "--list", str(TABLES / "variants.json")]
    r = run(script + ["--check"])
    assert r.returncode == 1 and "of no results folder: lib/auto_tables/old-gpu.tsv" in r.stderr, r.stderr
    # the write in this interpreter (as a process: test_make_auto_table_remakes_the_committed_data_...)
    r = in_process_script("auto-tables", *script[2:], path=script[1])
    assert r.returncode == 0, r.stderr
    assert "removed lib/auto_tables/old-gpu.tsv" in r.stdout and not stale.exists()


def test_the_committed_facts_are_the_registry_s(registry):
    """lib/auto_tables/variants.json holds what `xcorr list --json` says of every variant this
    build has (a subset build has fewer), and nothing the registry no longer says."""
    committed = {v["name"]: v for v in json.loads((TABLES / "variants.json").read_text())}
    for v in registry:
        assert v["name"] in committed, f"{v['name']} is not in variants.json: run scripts/auto-tables"
        assert committed[v["name"]] == {k: v[k] for k in ("name", "family", "work_tile")}, v["name"]


# --- (c) no generated source is committed ---------------------------------------------------------

def test_no_generated_source_is_tracked():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    r = run(["git", "-C", str(ROOT), "ls-files", "-z"])
    assert r.returncode == 0, r.stderr
    tracked = [f for f in r.stdout.split("\0") if f]
    assert "lib/auto_table.cpp" not in tracked
    generated = []
    for f in tracked:
        if Path(f).suffix in (".cpp", ".hpp", ".cu", ".cuh", ".h", ".c"):
            with open(ROOT / f, errors="replace") as fh:
                if "GENERATED" in fh.readline():
                    generated.append(f)
    assert not generated, generated


def test_no_signal_model_predicts_less_than_a_launch(xcorr):
    """A small signal problem (16 templates of 256 against 1e5 samples within ±50 lags) was
    predicted at 0.0117 us ("floor 0 us"): the signals-only variants had no launch floor of their own.
    Every candidate's prediction is now at least the GPU's fastest measured launch (about 3 us)."""
    r = run([xcorr, "explain", "--json", "--dims", "1", "--form", "one-to-many", "--left", "100000",
             "--right", "16:256", "--max-lag", "50"])
    assert r.returncode == 0, r.stderr
    cands = json.loads(r.stdout)["candidates"]
    predicted = [c for c in cands if c["predicted_us"] >= 0]  # -1: a variant nobody measured yet, tried last
    assert predicted and all(c["predicted_us"] >= 1.0 for c in predicted), [(c["algorithm"], c["predicted_us"]) for c in cands]
    assert cands[:len(predicted)] == predicted and all("no measurement" in c["reason"] for c in cands[len(predicted):])


def test_a_variant_measured_only_on_a_sibling_gpu_is_predicted_from_its_measurement_there(xcorr, registry):
    """A variant that one GPU of a sibling pair (the H100 and the H200: their ~1300 common
    measurements agree up to one factor) measured for a problem, and the other did not, is
    predicted on the other from that very measurement times the two GPUs' median ratio, not from
    its neighbours or the cost model. Each such (problem, variant) of the committed tables, raw 2-D
    problems: the candidate's reason names the sibling's measurement, its prediction is that time
    times a ratio near 1, and the problem's own measurements stay measured. (The reductions' PIV shape
    was one, on the H100 alone, until it was measured on the H200.)"""
    tables = committed_tables()
    built = {v["name"] for v in registry}  # a build of some variants may lack one
    cases = [(here, other, key, variant, us)
             for here, mine in tables.items() for other, theirs in tables.items() if other != here
             for key, times in theirs.items() if key in mine and key[11] == "0" and key[1] != "1"
             for variant, us in times.items() if variant not in mine[key] and variant in built]
    if not cases:
        pytest.skip("no variant in the committed tables is measured on one sibling GPU alone for a problem both measured")
    for here, other, key, variant, us in cases[:4]:
        r = run([xcorr, "explain", "--json", "--gpu", here, *explain_args(key)])
        assert r.returncode == 0, r.stderr
        cands = {c["algorithm"]: c for c in json.loads(r.stdout)["candidates"]}
        c = cands[variant]
        assert f"from {other}'s measurement of this problem" in c["reason"], (here, key, c)
        ratio = float(c["reason"].split(" us x ")[1].split(" ")[0])
        assert 0.8 < ratio < 1.25 and c["predicted_us"] == pytest.approx(us * ratio, rel=1e-2), (here, key, us, c)
        for measured in set(tables[here][key]) & built:
            assert cands[measured]["reason"].startswith(f"measured on {here}"), cands[measured]
