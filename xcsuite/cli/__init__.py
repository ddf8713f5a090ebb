"""The commands: one module each, with main(argv) -> exit status. A command imports library
modules of xcsuite, never another command."""
from __future__ import annotations

import ast
import importlib
import importlib.util
import sys

# In the order a full run uses them (scripts/reproduce).
COMMANDS = ("run_experiments", "aggregate", "plot", "table", "claims", "anchors", "application", "convert_results",
            "slurm_sweep")


def summary(command: str) -> str:
    """The first line of a command's docstring, read without importing it (plot and application
    load matplotlib and scipy, too slow for --help)."""
    origin = importlib.util.find_spec(f"{__name__}.{command}").origin
    with open(origin, encoding="utf-8") as f:
        doc = ast.get_docstring(ast.parse(f.read())) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def run(command: str, argv: list[str]) -> int:
    """Runs a command with its arguments; returns its exit status."""
    if command not in COMMANDS:
        print(f"xcsuite: unknown command {command!r} (known: {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    from xcsuite.paths import exit_status
    return exit_status(importlib.import_module(f"{__name__}.{command}").main, command, argv)
