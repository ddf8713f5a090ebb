"""The build's own guarantees, checked on the CPU from the compile commands Meson generated:
every CUDA translation unit is compiled with ptxas warnings for spills and local memory (stack
frames) turned into errors, so no kernel that spills or uses a stack frame can be built, and
with real machine code for the configured architectures."""
import json
import re

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


def test_every_variant_file_is_compiled(cuda_commands):
    listed = re.findall(r"'(\d\d_\w+\.cu)'", (ROOT / "algorithms" / "meson.build").read_text())
    compiled = {c["file"].rsplit("/", 1)[-1] for c in cuda_commands}
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


def test_real_machine_code_for_the_configured_archs(cuda_commands):
    for c in cuda_commands:
        codes = re.findall(r"-gencode=arch=compute_(\d+a?),code=sm_(\d+a?)", c["command"])
        assert codes and all(a == b for a, b in codes), c["file"]
        # 9.0 is built as sm_90a (its wgmma variant needs the architecture-specific target), and
        # nothing else carries the suffix
        assert all(a.endswith("a") == (a == "90a") for a, _ in codes), (c["file"], codes)
        assert "90" not in [a for a, _ in codes], (c["file"], "9.0 must be built as sm_90a")
