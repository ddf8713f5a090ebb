"""scripts/sanitize-keys on a small Meson project of the same layout (a validator and an xcorr of
lib/ and harness/ sources, two variant files in algorithms/): the files in a process's ledger key are
the ones its binary's objects were compiled from, by ninja's own records, so that an edit asks again
for exactly the processes that run what changed (scripts/sanitize, notes/sanitizers.md)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KEYS = ROOT / "scripts" / "sanitize-keys"

MESON = """project('keys', 'cpp')
inc = include_directories('lib', 'algorithms', '.')
variants = static_library('variants', 'algorithms/01_a.cpp', 'algorithms/02_b.cpp', include_directories: inc)
executable('xcorr_validate', 'harness/validate_main.cpp', link_whole: variants, include_directories: inc)
executable('xcorr', 'tools/xcorr_main.cpp', link_whole: variants, include_directories: inc)
executable('xcorr_bench', 'harness/bench_main.cpp', include_directories: inc)
"""
FILES = {
    "lib/core.hpp": "inline int core() { return 1; }\n",
    "algorithms/common/only_a.hpp": "inline int only_a() { return 2; }\n",
    "algorithms/01_a.cpp": '#include "core.hpp"\n#include "common/only_a.hpp"\nint a() { return core() + only_a(); }\n',
    "algorithms/02_b.cpp": '#include "core.hpp"\nint b() { return core(); }\n',
    "harness/validate_main.cpp": '#include "core.hpp"\n#include "tests/extra.hpp"\nint main() { return core() - extra(); }\n',
    "tests/extra.hpp": "inline int extra() { return 1; }\n",
    "tools/xcorr_main.cpp": "int main() { return 0; }\n",
    "harness/bench_main.cpp": "int main() { return 0; }\n",
}


@pytest.fixture
def project(tmp_path):
    missing = [t for t in ("ninja", "c++") if not shutil.which(t)]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH: no Meson project can be built here")
    tree = tmp_path / "tree"
    for name, text in {**FILES, "meson.build": MESON}.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text)

    def build(where=tree):
        b = where / "build"
        if not b.exists():
            r = subprocess.run([sys.executable, "-m", "mesonbuild.mesonmain", "setup", str(b), str(where)],
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, r.stdout + r.stderr
        r = subprocess.run(["ninja", "-C", str(b)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        return b

    def keys(where=tree, b=None):
        r = subprocess.run([str(KEYS), str(b or where / "build"), str(where)], capture_output=True, text=True,
                           timeout=120)
        return r if r.returncode else dict(line.split() for line in r.stdout.splitlines())
    return tree, build, keys


def test_an_edit_changes_the_keys_of_what_includes_it_alone(project):
    tree, build, keys = project
    build()
    first = keys()
    assert set(first) == {"shared", "algorithms/01_a.cpp", "algorithms/02_b.cpp"}
    assert keys() == first  # the same build, the same keys

    def edit(name, text):
        (tree / name).write_text((tree / name).read_text() + text)
        build()
        return keys()
    # a header only the first variant reads: its key alone
    after = edit("algorithms/common/only_a.hpp", "// changed\n")
    assert after["algorithms/01_a.cpp"] != first["algorithms/01_a.cpp"]
    assert after["algorithms/02_b.cpp"] == first["algorithms/02_b.cpp"] and after["shared"] == first["shared"]
    # a header the validator reads from outside lib/ and harness/ (tests/): the shared key
    again = edit("tests/extra.hpp", "// changed\n")
    assert again["shared"] != after["shared"]
    assert {k: v for k, v in again.items() if k != "shared"} == {k: v for k, v in after.items() if k != "shared"}
    # the benchmark's main, which neither binary links: no key
    assert edit("harness/bench_main.cpp", "// changed\n") == again
    # the same sources built in another checkout: the same keys (paths are not what ran)
    other = tree.parent / "elsewhere"
    shutil.copytree(tree, other, ignore=shutil.ignore_patterns("build"))
    build(other)
    assert keys(other) == again


def test_a_stale_build_is_brought_up_to_date_and_another_trees_build_is_refused(project):
    tree, build, keys = project
    b = build()
    before = keys()
    (tree / "lib" / "core.hpp").write_text("inline int core() { return 3; }\n")
    after = keys()  # not rebuilt by hand: the keys are still of the edited sources
    assert all(after[k] != before[k] for k in before), (before, after)
    (tree / "lib" / "core.hpp").write_text("inline int core() { return }\n")
    r = keys()
    assert r.returncode == 2 and "failed" in r.stderr, r
    (tree / "lib" / "core.hpp").write_text("inline int core() { return 3; }\n")
    other = tree.parent / "other"
    shutil.copytree(tree, other, ignore=shutil.ignore_patterns("build"))
    r = keys(other, b)
    assert r.returncode == 2 and "was configured from" in r.stderr, r
    r = keys(b=tree / "lib")
    assert r.returncode == 2 and "not a Meson build" in r.stderr, r


def test_the_variants_of_one_unit_share_its_key_and_an_edit_of_one_asks_again_for_all(project):
    """A unit of several files (meson.build: variants_0_unit0.cu, made in the build) is keyed by the
    variant files it includes, each with the whole object's key: one file's edit can change the
    machine code of the others in its unit. A variant compiled alone keeps a key of its own."""
    tree, build, keys = project
    (tree / "algorithms" / "unit.in").write_text("@INCLUDES@\n")
    (tree / "algorithms" / "units.json.in").write_text("{@UNITS@}\n")
    (tree / "lib" / "core.hpp").write_text("#pragma once\n" + FILES["lib/core.hpp"])  # read twice by the unit
    (tree / "algorithms" / "03_c.cpp").write_text('#include "core.hpp"\nint c() { return core(); }\n')
    (tree / "meson.build").write_text(MESON.replace(
        "variants = static_library('variants', 'algorithms/01_a.cpp', 'algorithms/02_b.cpp',",
        "unit = configure_file(input: 'algorithms/unit.in', output: 'variants_0_unit0.cpp', configuration:\n"
        "  {'INCLUDES': '#include \"algorithms/01_a.cpp\"\\n#include \"algorithms/02_b.cpp\"'})\n"
        "configure_file(input: 'algorithms/units.json.in', output: 'units.json', configuration:\n"
        "  {'UNITS': '\"variants_0_unit0.cpp\": [\"algorithms/01_a.cpp\", \"algorithms/02_b.cpp\"]'})\n"
        "variants = static_library('variants', unit, 'algorithms/03_c.cpp',"))
    build()
    first = keys()
    assert set(first) == {"shared", "algorithms/01_a.cpp", "algorithms/02_b.cpp", "algorithms/03_c.cpp"}, first
    assert first["algorithms/01_a.cpp"] == first["algorithms/02_b.cpp"] != first["algorithms/03_c.cpp"]
    (tree / "algorithms/common/only_a.hpp").write_text("inline int only_a() { return 4; }\n")  # read by 01_a alone
    build()
    after = keys()
    assert after["algorithms/01_a.cpp"] != first["algorithms/01_a.cpp"]
    assert after["algorithms/02_b.cpp"] == after["algorithms/01_a.cpp"]
    assert after["algorithms/03_c.cpp"] == first["algorithms/03_c.cpp"] and after["shared"] == first["shared"]
