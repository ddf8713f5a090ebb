"""scripts/build-wheel on a fresh clone (README, "Python quickstart"): the system python3 it starts
under lacks meson-python, which exited 1 after `scripts/test` had put everything in .venv/. It runs
itself again with the project's Python, the one scripts/setup-env finds or makes for scripts/test and
scripts/reproduce. On the CPU, without building anything."""
import subprocess
import sys

import pytest

from suite_helpers import ROOT, load_script


def test_the_project_python_is_the_one_setup_env_gives_and_it_can_build_the_wheel():
    """project_python() sources scripts/setup-env with XCORR_SKIP_BUILD=1 (no build): the Python it
    names has meson-python and nanobind, what the wheel's build needs."""
    bw = load_script("build-wheel")
    py = bw.project_python()
    assert subprocess.run([py, "-c", "import mesonpy, nanobind"], capture_output=True).returncode == 0, py


def test_a_python_without_meson_python_hands_over_to_the_project_python(monkeypatch):
    """Started by a Python without meson-python, the script execs itself, with the same arguments,
    under the project's Python, marked so that it does not hand over again; with meson-python it
    stays where it is."""
    bw = load_script("build-wheel")
    has = {"/usr/bin/python3": False, "/repo/.venv/bin/python": True}

    def fake_run(cmd, **kw):
        assert cmd[1:] == ["-c", "import mesonpy, nanobind"], cmd
        return subprocess.CompletedProcess(cmd, 0 if has[cmd[0]] else 1)

    class Exec(Exception):
        pass

    def fake_execv(path, argv):
        raise Exec(path, argv)

    monkeypatch.setattr(bw.subprocess, "run", fake_run)
    monkeypatch.setattr(bw, "project_python", lambda: "/repo/.venv/bin/python")
    monkeypatch.setattr(bw.os, "execv", fake_execv)
    monkeypatch.setattr(bw.os, "environ", {})  # the script's environment, not this process's
    monkeypatch.setattr(bw.sys, "argv", ["scripts/build-wheel", "--arch", "8.6"])
    monkeypatch.setattr(bw.sys, "executable", "/usr/bin/python3")
    with pytest.raises(Exec) as e:
        bw.use_project_python()
    path, argv = e.value.args
    assert path == "/repo/.venv/bin/python"
    assert argv == [path, str(ROOT / "scripts" / "build-wheel"), "--arch", "8.6"]
    assert bw.os.environ["XCORR_BUILD_WHEEL_PYTHON"] == path
    monkeypatch.setattr(bw.sys, "executable", "/repo/.venv/bin/python")
    bw.use_project_python()  # has meson-python: returns, no exec


def test_build_wheel_help_needs_no_meson_python():
    """--help answers under any Python (the usage is read before the environment is looked at)."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "build-wheel"), "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "--arch" in r.stdout and "five" in r.stdout, r.stderr
