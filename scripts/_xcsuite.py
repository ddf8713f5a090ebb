"""The whole of every scripts/<command>.py: runs that command of the xcsuite package, as
`python -m xcsuite <command>` does, from any working directory. The scripts stay Python files
(not bash calling python3 -m) because they are run as `$PY scripts/<command>.py`, with the
interpreter the caller chose (scripts/reproduce: the .venv's); the package is not installed, so
the repository root goes on the module path, here and nowhere else."""
import sys
from pathlib import Path


def run(command: str) -> None:
    root = str(Path(__file__).resolve().parent.parent)
    if root not in sys.path:
        sys.path.insert(0, root)
    from xcsuite.cli import run as run_command

    sys.exit(run_command(command, sys.argv[1:]))
