"""The xcsuite package and its command-line forms (CPU only): `python -m xcsuite`, the
one name per command, the scripts' missing requirements, and the package's own import rules."""
import ast
import subprocess
import sys

import pytest
from suite_helpers import ROOT

from xcsuite.cli import COMMANDS


def sh(*args, cwd=ROOT):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_help_lists_every_command_and_a_bad_one_is_one_line():
    r = sh("-m", "xcsuite", "--help")
    assert r.returncode == 0
    listed = [line.split()[0] for line in r.stdout.splitlines() if line.startswith("  ") and line[2] != " "]
    assert listed == list(COMMANDS)
    assert {p.stem for p in (ROOT / "xcsuite" / "cli").glob("[!_]*.py")} == {c.replace("-", "_") for c in COMMANDS}
    r = sh("-m", "xcsuite", "plots")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "unknown command 'plots'" in r.stderr
    assert sh("-m", "xcsuite").returncode == 2


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_runs_as_python_m_xcsuite_and_has_no_second_spelling(command):
    # One name per command, kebab-case (docs/commands.md), and no script in scripts/ forwarding to it.
    assert command == command.lower().replace("_", "-")
    r = sh("-m", "xcsuite", command, "--help")
    assert r.returncode == 0 and r.stdout.startswith(f"usage: python -m xcsuite {command}"), r.stderr
    assert not (ROOT / "scripts" / command).exists() and not (ROOT / "scripts" / f"{command.replace('-', '_')}.py").exists()
    if "-" in command:  # the module's spelling is refused, naming the command's
        r = sh("-m", "xcsuite", command.replace("-", "_"), "--help")
        assert r.returncode == 2 and f"it is spelled {command}" in r.stderr, r.stderr


def python_scripts() -> list:
    """The Python entry points of scripts/ and scripts/dev/ (no extension: told by the shebang)."""
    out = []
    for p in sorted([*(ROOT / "scripts").iterdir(), *(ROOT / "scripts" / "dev").iterdir()]):
        if p.is_file() and not p.name.startswith("_") and p.read_bytes().startswith(b"#!/usr/bin/env python3"):
            out.append(str(p.relative_to(ROOT / "scripts")))
    return out


@pytest.mark.parametrize("script", python_scripts())
def test_a_missing_requirement_is_one_line_that_says_what_to_run(script, tmp_path):
    # A new user's `python3 scripts/NAME` with an interpreter that lacks requirements.txt's
    # modules (not the one scripts/setup-env chose): the script's help where it needs none of
    # them, else no traceback but one line naming the module and the fix.
    path = ROOT / "scripts" / script
    code = ("import runpy, sys; sys.modules.update(dict.fromkeys(('numpy', 'pandas', 'scipy', 'matplotlib')));"
            f"sys.argv = [{str(path)!r}, '--help']; sys.path.insert(0, {str(path.parent)!r}); "
            f"runpy.run_path({str(path)!r}, run_name='__main__')")
    r = sh("-c", code, cwd=tmp_path)
    assert "Traceback" not in r.stderr, r.stderr
    if "is missing from" in r.stderr:
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "requirements.txt" in r.stderr, r.stderr


def test_a_missing_module_of_our_own_is_a_defect_and_a_peer_is_not_called_a_requirement():
    from xcsuite.cli import missing_requirement

    def missing(name):
        e = ModuleNotFoundError(f"No module named {name!r}")
        e.name = name
        return missing_requirement("cmd", e)

    assert missing("xcsuite.nothing") is None and missing("xcorr") is None and missing("auto_tables") is None
    assert "'numpy' is missing" in missing("numpy") and "(requirements.txt)" in missing("numpy")
    assert "'scipy' is missing" in missing("scipy.signal") and "'cv2' is missing" in missing("cv2")
    assert "not one of requirements.txt's" in missing("torch")

def imports_of(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield from ([node.module] if node.level == 0 else [])
            if node.module == "xcsuite.cli":
                yield from (f"xcsuite.cli.{a.name}" for a in node.names)


@pytest.mark.parametrize("path", sorted((ROOT / "xcsuite").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_package_edits_no_path_and_no_command_imports_another(path):
    assert "sys.path" not in path.read_text()
    commands = {f"xcsuite.cli.{c.replace('-', '_')}" for c in COMMANDS}
    assert not commands & set(imports_of(path)), "shared code belongs in a library module of xcsuite"
