"""The build's own guarantees, checked on the CPU from the compile commands Meson generated:
every CUDA translation unit is compiled with ptxas warnings for spills and local memory (stack
frames) turned into errors, so no kernel that spills or uses a stack frame can be built, and
with real machine code for the configured architectures."""
import json
import os
import re
import sys
from pathlib import Path

import pytest

from conftest import BUILD, ROOT


@pytest.fixture(scope="module")
def cuda_commands():
    path = BUILD / "compile_commands.json"
    if not path.exists():
        pytest.fail(f"{path} missing: configure the build first")
    cmds = [c for c in json.loads(path.read_text()) if c["file"].endswith(".cu")]
    assert cmds, "no CUDA translation unit in the build"
    return cmds


def sources(command):
    """The sources a compile command compiles, by file name: its file, or the files a generated unit of
    several files includes (meson.build's "translation units of several files", which BUILD/units.json
    lists)."""
    path = Path(command["directory"]) / command["file"]
    if path.parent.resolve() == BUILD.resolve() and path.name in units():
        return [f.rsplit("/", 1)[-1] for f in units()[path.name]]
    return [path.name]


def units():
    """BUILD/units.json: {a generated unit's file name: the sources it includes, root-relative}."""
    path = BUILD / "units.json"
    if not path.is_file():
        pytest.fail(f"{path} missing: the build was configured by an older meson.build (meson setup --reconfigure)")
    return json.loads(path.read_text())


def command_for(cuda_commands, name):
    """The compile command of the source NAME, compiling that file alone: a unit's command with the
    unit's file replaced by NAME's path (the same flags); None where the build compiles no NAME."""
    for c in cuda_commands:
        if name.rsplit("/", 1)[-1] in sources(c):
            if c["file"].endswith(name):
                return c
            own = os.path.relpath(ROOT / name, c["directory"])
            assert c["command"].endswith(" -c " + c["file"]), c["command"][-200:]
            return {**c, "file": own, "command": c["command"][:-len(c["file"])] + own}
    return None


def test_grouped_units_compile_each_file_once(cuda_commands):
    """Every listed CUDA source of lib/ and every variant is compiled exactly once, alone or in one unit."""
    names = [n for c in cuda_commands for n in sources(c)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert {"normalizer.cu", "gpu.cu", "crop.cu", "kernels.cu"} <= set(names)
    for unit, files in units().items():  # the list is what each unit includes, in order
        assert re.findall(r'^#include "([^"]+)"', (BUILD / unit).read_text(), re.M) == files, unit


def test_every_variant_file_is_compiled(cuda_commands):
    listed = re.findall(r"'(\d\d_\w+\.cu)'", (ROOT / "algorithms" / "meson.build").read_text())
    compiled = {n for c in cuda_commands for n in sources(c)}
    options = json.loads((BUILD / "meson-info" / "intro-buildoptions.json").read_text())
    subset = next((o["value"] for o in options if o["name"] == "variants"), "all")
    if subset != "all":
        pytest.skip(f"this build selects a subset of variants (-Dvariants={subset})")
    assert listed and set(listed) <= compiled, set(listed) - compiled


def test_ptxas_strict_flags(cuda_commands):
    for c in cuda_commands:
        cmd = c["command"]
        for flag in ("--warn-on-spills", "--warn-on-local-memory-usage", "--warning-as-error"):
            assert flag in cmd, (c["file"], flag)


def test_spills_stop_a_build_for_9_0_alone_and_warn_elsewhere(tmp_path):
    """A build for another GPU (an A100: -Dgpu_arch=8.0, what `pip install .` configures there) warns
    of spills instead of failing on them: a few kernels tuned for Hopper spill some bytes elsewhere
    (notes/53_fft_large.md), a matter of speed there. The configured build's own commands (9.0) are
    strict: test_ptxas_strict_flags. (-Dptxas_strict_all=true, errors everywhere, is one line of
    meson.build beside it; a second configure to check it would cost the suite ~8 s.)"""
    import subprocess
    from test_wheel import find_nvcc
    nvcc = find_nvcc()
    if not nvcc:
        pytest.skip("nvcc (the CUDA toolkit) is not installed: no CUDA build can be configured here")
    build = tmp_path / "b"
    env = dict(os.environ, PATH=os.path.dirname(nvcc) + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run([sys.executable, "-m", "mesonbuild.mesonmain", "setup", str(build), str(ROOT), "-Dgpu_arch=8.0",
                        "-Dvariants=01", "-Dtools=false", "-Dpython=disabled"], env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    commands = [c["command"] for c in json.loads((build / "compile_commands.json").read_text())
                if c["file"].endswith(".cu")]
    assert commands and all("compute_80" in c for c in commands)
    assert {("--warn-on-spills" in c, "--warning-as-error" in c) for c in commands} == {(True, False)}


def test_real_machine_code_for_the_configured_archs(cuda_commands):
    for c in cuda_commands:
        codes = re.findall(r"-gencode=arch=compute_(\d+a?),code=sm_(\d+a?)", c["command"])
        assert codes and all(a == b for a, b in codes), c["file"]
        # 9.0 is built as sm_90a (its wgmma variant needs the architecture-specific target), and
        # nothing else carries the suffix
        assert all(a.endswith("a") == (a == "90a") for a, _ in codes), (c["file"], codes)
        assert "90" not in [a for a, _ in codes], (c["file"], "9.0 must be built as sm_90a")


def test_git_revision_is_dirty_only_where_the_sources_changed(tmp_path):
    """scripts/git-revision (the revision every build and peer measurement records): a change to
    results or notes is not a change to what measures, so it leaves the revision clean; a change
    to the sources (lib, harness, tools, algorithms, the package, peerbench) makes it -dirty. It ran git
    describe --dirty over the whole tree, and the runner's own writes to results/ made every
    peer measurement -dirty."""
    import shutil
    import subprocess
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "git-revision", repo / "scripts" / "git-revision")
    for f in ("lib/core.cpp", "xcsuite/peerbench.py", "results/gpu/fig.json"):
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        (repo / f).write_text("0\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    for args in (["init", "-q"], ["add", "."], ["commit", "-qm", "x"]):
        subprocess.run(git + args, check=True)
    head = subprocess.run(git + ["rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()

    def revision():
        env = {k: v for k, v in os.environ.items() if k != "XCORR_GIT_REVISION"}
        return subprocess.run([str(repo / "scripts" / "git-revision")], capture_output=True, text=True,
                              env=env).stdout.strip()
    assert revision() == head
    (repo / "results/gpu/fig.json").write_text("1\n")
    assert revision() == head
    for f in ("lib/core.cpp", "xcsuite/peerbench.py"):
        (repo / f).write_text("1\n")
        assert revision() == head + "-dirty", f
        subprocess.run(git + ["checkout", "-q", f], check=True)


@pytest.mark.parametrize("arch", ["86", "100", "120"])
def test_normalization_builds_strict_for_other_architectures(cuda_commands, arch, tmp_path):
    """The normalization's kernels (one translation unit, lib/normalize/normalizer.cu) compile without
    a spill or a stack frame for GPUs other than the configured one, with the build's own command and
    strict ptxas flags: its epilogue spilled 24-88 bytes on sm_100 and sm_120 until its launch bounds
    gave Blackwell more registers. (Such spills are warnings in those GPUs' own builds now, which
    test_spills_stop_a_build_for_9_0_alone_and_warn_elsewhere checks; this keeps the normalization,
    every call's epilogue, free of them where the wheel's SASS runs. sm_75, clean and the oldest, was
    dropped for the ~9 CPU-s of the check above.)"""
    import subprocess
    c = command_for(cuda_commands, "lib/normalize/normalizer.cu")  # alone, also where a unit holds it
    if c is None:
        pytest.skip("this build has no lib/normalize/normalizer.cu")
    cmd = re.sub(r"-gencode=arch=compute_\w+,code=sm_\w+", f"-gencode=arch=compute_{arch},code=sm_{arch}",
                 c["command"])
    cmd = re.sub(r"-DXCORR_CUDA_ARCHS=\\?\"[\d;]+\\?\"", f'-DXCORR_CUDA_ARCHS="{arch}"', cmd)
    cmd = re.sub(r" -MD -MT \S+ -MF \S+", "", cmd)
    # device code alone (-cubin: the preprocessor, cicc and ptxas, which makes the spill and stack
    # frame errors): the host half (cudafe++, the host compiler) was half of each architecture's time
    # and no ptxas flag reaches it
    cmd = re.sub(r" -o \S+", f" -o {tmp_path / 'n.cubin'}", cmd)
    assert " -c " in cmd and "--warning-as-error" in cmd
    cmd = cmd.replace(" -c ", " -cubin ", 1)
    r = subprocess.run(cmd, shell=True, cwd=c["directory"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (arch, r.stderr[-2000:])
