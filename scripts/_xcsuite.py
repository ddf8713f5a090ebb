"""The whole of every scripts/<command>.py: runs that command of the xcsuite package, as
`python -m xcsuite <command>` does, from any working directory. The scripts stay Python files
(not bash calling python3 -m) because they are run as `$PY scripts/<command>.py`, with the
interpreter the caller chose (scripts/reproduce: the .venv's); the package is not installed, so
the repository root goes on the module path, here and nowhere else."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _on_path() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def run(command: str) -> None:
    _on_path()
    from xcsuite.cli import run as run_command

    sys.exit(run_command(command, sys.argv[1:]))


def explain_missing_requirements(script: str) -> None:
    """For the scripts that are not xcsuite commands (probes such as batch_scaling.py): an uncaught
    ModuleNotFoundError for a third-party module (one of requirements.txt's, the interpreter not
    the .venv's) ends the script with xcsuite.cli's one line instead of a traceback (exit status 1,
    as any uncaught exception); a module of our own still gives its traceback."""
    _on_path()

    def hook(kind, value, tb):
        from xcsuite.cli import missing_requirement
        message = missing_requirement(script, value) if issubclass(kind, ModuleNotFoundError) else None
        if message is None:
            return sys.__excepthook__(kind, value, tb)
        print(message, file=sys.stderr)

    sys.excepthook = hook
