"""Adding a variant is one file plus one build line (docs/contributing.md, "Adding a variant"): in a
scratch copy of the tree, tests/example_variant/99_example_scale.cu is added the way the guide tells
a user to (the file into algorithms/, its name into algorithms/meson.build), the copy is configured
with `-Dvariants=30,99` (block-per-pair, which the main build also compiles alone, and the new one)
and its programs and shared objects are built (checked_targets: a few minutes on 2 cores; under a
minute where the main build's objects of lib/ and block-per-pair stand, tests/reuse_objects.py), and
the new variant must appear everywhere the registry reaches without a GPU:

- `xcorr list --json` and `xcorr list`;
- xcorr_validate's selection, made on the CPU before it asks for a GPU: `--variant example-scale`
  is accepted (it then needs a GPU: exit 3 here, a validation where there is one), an unknown name
  is refused as nothing to validate (exit 2);
- xcorr_bench's case parser and its default cases: `--case "variant=example-scale ..."
  --benchmark_list_tests` names the case, and the listing without cases has its smoke cases;
- `xcorr.algorithms()` of the Python package built by that build (the pure-Python files beside the
  scratch build's extension on PYTHONPATH).

Slow (marked `slow`: `-m "not slow"` leaves it out) but part of CI; skipped, with the reason, where
nvcc or ninja is missing."""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import reuse_objects
from conftest import BUILD

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "example_variant" / "99_example_scale.cu"
NAME = "example-scale"
# Tracked data the build never reads: left out of the copy to keep it small.
NOT_COPIED = ("results", "plots", "notes", "build", ".venv")

pytestmark = pytest.mark.slow


def tree_files() -> list:
    """The tree's files as a user's checkout has them: tracked and new ones git does not ignore (the
    working tree's versions), or everything but builds where this is no git checkout."""
    r = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True)
    if r.returncode == 0:
        files = [Path(p) for p in r.stdout.decode().split("\0") if p]
    else:
        files = [p.relative_to(ROOT) for p in ROOT.rglob("*") if p.is_file()]
    return [f for f in files if f.parts[0] not in NOT_COPIED and not f.parts[0].startswith("build")
            and "__pycache__" not in f.parts and (ROOT / f).is_file()]


def add_variant(tree: Path) -> None:
    """docs/contributing.md's steps 1 and 2, literally."""
    shutil.copy(EXAMPLE, tree / "algorithms" / EXAMPLE.name)
    build_list = tree / "algorithms" / "meson.build"
    text = build_list.read_text()
    m = re.search(r"all_variant_files = \[\n(.*?)\n\]", text, re.S)
    assert m, "algorithms/meson.build has no all_variant_files = [...] list for a new file"
    build_list.write_text(text[:m.end(1)] + f"\n  '{EXAMPLE.name}'," + text[m.end(1):])


def run(args, **kw):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=kw.pop("timeout", 900), **kw)


def scratch_build(tmp_path_factory):
    for tool in ("nvcc", "ninja"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed: the example variant cannot be built (scripts/setup-env puts "
                        "the CUDA toolkit and ninja on PATH)")
    tree = tmp_path_factory.mktemp("example-variant") / "xcorr"
    for f in tree_files():
        (tree / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, tree / f)
    add_variant(tree)
    build = tree / "build"
    # The copy has no .git: it is given the main build's revision (or the caller's), so that its
    # version is the main build's and the objects that hold it stand (tests/reuse_objects.py)
    rev = os.environ.get("XCORR_GIT_REVISION") or reuse_objects.revision(BUILD) or "example"
    env = {**os.environ, "XCORR_GIT_REVISION": rev}
    r = run([sys.executable, "-m", "mesonbuild.mesonmain", "setup", build, tree, "-Dgpu_arch=9.0",
             "-Dvariants=30,99"], env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr
    # lib/'s objects, block-per-pair's and the host programs' from the main build where ninja finds
    # their commands and sources unchanged (tests/reuse_objects.py): the new variant, the registry's
    # programs and every link are this build's own
    reuse_objects.seed(BUILD, build)
    r = run([reuse_objects.NINJA, "-C", build, *checked_targets(build)], env=env, timeout=1500)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr
    return tree, build


def checked_targets(build):
    """The build's targets that hold the registry and that the checks below run: the three programs
    and the shared objects (the library, the Python extension). Not the host tests of device code
    (team_dft_host, reduce_chunks_host: a minute and more of host compiling on 2 cores), the C API's
    test program or the sanitizers' probe, which no variant list reaches."""
    text = (build / "build.ninja").read_text()
    shared = re.findall(r"^build (\S+\.so(?:\.[\d.]+)?): \w+_LINKER", text, re.M)
    assert any("_xcorr" in t for t in shared) or importlib.util.find_spec("nanobind") is None, shared
    return ["xcorr", "xcorr_validate", "xcorr_bench", *shared]


def test_the_example_is_not_in_the_projects_own_build():
    assert EXAMPLE.name not in (ROOT / "algorithms" / "meson.build").read_text()
    assert not (ROOT / "algorithms" / EXAMPLE.name).exists()


def check_xcorr_list(build):
    r = run([build / "xcorr", "list", "--json"])
    assert r.returncode == 0, r.stderr
    entries = {v["name"]: v for v in json.loads(r.stdout)}
    assert set(entries) == {NAME, "block-per-pair"}, sorted(entries)
    v = entries[NAME]
    assert v["family"] == "example" and v["timed"] == "kernel" and v["params"] == {}
    assert v["forms"] == ["one-to-one", "one-to-many", "n-to-mn", "n-to-m"] and v["windows"] == ["full"]
    r = run([build / "xcorr", "list"])
    assert r.returncode == 0 and NAME in r.stdout, r.stdout + r.stderr


def check_xcorr_validate(build):
    r = run([build / "xcorr_validate", "--variant", NAME, "--quick"], timeout=1500)
    # No GPU: the selection passed and only the GPU is missing (exit 3); with one: it validated.
    assert r.returncode in (0, 3), r.stdout[-4000:] + r.stderr
    if r.returncode == 0:
        assert f"{NAME}  " in r.stdout
    r = run([build / "xcorr_validate", "--variant", "no-such-variant"])
    assert r.returncode == 2, r.stdout + r.stderr


def check_xcorr_bench(build):
    r = run([build / "xcorr_bench", "--case", f"variant={NAME} form=n-to-m size=16 nL=2 nR=3",
             "--benchmark_list_tests"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines() and all(l.startswith(f"{NAME}/") for l in r.stdout.strip().splitlines()), r.stdout
    r = run([build / "xcorr_bench", "--benchmark_list_tests"])
    assert r.returncode == 0, r.stderr
    assert sum(l.startswith(f"{NAME}/") for l in r.stdout.splitlines()) == 4, r.stdout  # one per form
    r = run([build / "xcorr_bench", "--case", f"variant={NAME} form=one-to-one size=16 warps=4",
             "--benchmark_list_tests"])
    assert r.returncode == 2, "a parameter the variant does not declare is refused: " + r.stdout + r.stderr


def check_python_package(tree, build, tmp_path):
    ext = sorted((build / "python").glob("_xcorr*.so"))
    assert ext, "the scratch build has no Python extension (nanobind or the Python headers are missing)"
    pkg = tmp_path / "xcorr"
    shutil.copytree(tree / "python" / "xcorr", pkg)
    shutil.copy(ext[0], pkg / ext[0].name)
    r = run([sys.executable, "-c", "import json, xcorr; print(json.dumps([a['name'] for a in xcorr.algorithms()]))"],
            env={**os.environ, "PYTHONPATH": str(tmp_path)}, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert NAME in json.loads(r.stdout.strip().splitlines()[-1]), r.stdout


def test_a_variant_added_as_the_guide_says_is_everywhere(tmp_path_factory, tmp_path):
    """One test, one scratch build (pytest-xdist would build a module fixture once per worker)."""
    tree, build = scratch_build(tmp_path_factory)
    check_xcorr_list(build)
    check_xcorr_validate(build)
    check_xcorr_bench(build)
    if importlib.util.find_spec("nanobind") is None:
        pytest.skip("nanobind is not installed: the scratch build has no Python package to list it "
                    "(scripts/setup-env installs nanobind)")
    check_python_package(tree, build, tmp_path)
