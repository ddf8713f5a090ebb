"""The commands: one module each, with main(argv) -> exit status. A command imports library
modules of xcsuite, never another command."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from pathlib import Path

# In the order a full run uses them (scripts/reproduce). A command's name is kebab-case, like every
# entry point's (docs/commands.md); its module is the name with underscores (run-experiments:
# run_experiments.py).
COMMANDS = ("run-experiments", "aggregate", "plot", "table", "claims", "anchors", "application", "convert-results",
            "slurm-sweep")


def module_of(command: str) -> str:
    return f"{__name__}.{command.replace('-', '_')}"


def summary(command: str) -> str:
    """The first line of a command's docstring, read without importing it (plot and application
    load matplotlib and scipy, too slow for --help)."""
    origin = importlib.util.find_spec(module_of(command)).origin
    with open(origin, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def run(command: str, argv: list[str]) -> int:
    """Runs a command with its arguments; returns its exit status."""
    if command not in COMMANDS:
        spelled = f"; it is spelled {command.replace('_', '-')}" if command.replace("_", "-") in COMMANDS else ""
        print(f"xcsuite: unknown command {command!r}{spelled} (known: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    try:
        from xcsuite.paths import exit_status
        return exit_status(importlib.import_module(module_of(command)).main, command, argv)
    except ModuleNotFoundError as e:
        message = missing_requirement(command, e)
        if message is None:
            raise  # a module of our own: a defect, with its traceback
        print(message, file=sys.stderr)
        return 1


# requirements.txt's distributions whose module has another name.
IMPORT_NAMES = {"opencv_python_headless": "cv2", "pytest_xdist": "xdist", "meson_python": "mesonpy"}


def missing_requirement(command: str, error: ModuleNotFoundError) -> str | None:
    """What to do when the interpreter running a command or script lacks one of requirements.txt's
    modules (a new user's `python3 -m xcsuite plot` on a machine where scripts/setup-env made
    .venv/); None where the missing module is one of the repository's own."""
    from xcsuite.paths import ROOT as root
    top = (error.name or "").split(".")[0]
    ours = (root / top, root / "python" / top, root / "scripts" / top.replace("_", "-"))  # xcsuite, xcorr, a script
    if not top or any(p.exists() for p in ours):
        return None
    distributions = (line.split("#")[0].split(">")[0].split("=")[0].strip().lower().replace("-", "_")
                     for line in (root / "requirements.txt").read_text().splitlines())
    if top not in {IMPORT_NAMES.get(d, d) for d in distributions}:
        return (f"{command}: the Python module {top!r} is missing from {sys.executable}; it is not one of "
                f"requirements.txt's (a peer library such as torch or cupy): install it to use this")
    venv = root / ".venv" / "bin" / "python"
    fix = (f"run it with {venv} (made by scripts/setup-env)" if venv.exists() and Path(sys.executable) != venv
           else f"run scripts/test or scripts/reproduce once (they set up .venv/), or "
                f"`{Path(sys.executable).name} -m pip install -r {root / 'requirements.txt'}`")
    return (f"{command}: the Python module {top!r} is missing from {sys.executable} "
            f"(requirements.txt); {fix}")
