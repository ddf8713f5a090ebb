"""The one helper of the Python scripts in scripts/ and scripts/dev/ (not an entry point: no run
bit, and docs/commands.md lists the entry points): the repository root on the module path (the
package xcsuite is run in place, never installed), one line instead of a traceback for a missing
requirement, and a sibling script loaded as a module (a script's name has no .py: `import` cannot
find it)."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _on_path() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def explain_missing_requirements(script: str) -> None:
    """For the scripts that are not xcsuite commands (such as scripts/batch-scaling): an uncaught
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


def load_script(name: str, folder: Path = None):
    """scripts/<name> (or folder/<name>), a Python script without .py, as a module (once per
    process: sys.modules holds it under the name with underscores, auto-tables-cpp as
    auto_tables_cpp)."""
    import importlib.machinery
    import importlib.util
    module_name = name.replace("-", "_")
    if module_name in sys.modules:
        return sys.modules[module_name]
    path = Path(folder or Path(__file__).resolve().parent) / name
    loader = importlib.machinery.SourceFileLoader(module_name, str(path))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(module_name, loader))
    sys.modules[module_name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module
