"""Entry points run in the test's interpreter as their processes run them, for the tests of many
cases of one command (its refusals, its exit statuses), where a process per case imported pandas,
matplotlib or NumPy again for each. A test that uses these still runs each command once per exit
path as a user runs it, a process of its own, so that the entry point itself stays tested."""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"


def in_process(name, *args, env=None):
    """The xcsuite command NAME run in this interpreter as `python -m xcsuite NAME` runs it (its
    dispatch, xcsuite.cli.run): a CompletedProcess with its exit status and what it printed; every
    warning it raised is printed to its stderr, as a process's would be, and an exception it lets
    out fails the test with its traceback."""
    from xcsuite.__main__ import main

    return captured(lambda: main([name, *map(str, args)]), [name, *args], env)


def in_process_script(name, *args, env=None, path=None):
    """scripts/NAME (or the script at `path`, a copy of it) run in this interpreter as its process
    runs it: the whole file as __main__ (runpy) with sys.argv its path and ARGS, so its own `if
    __name__ == "__main__"` tail (paths.exit_status, sys.exit) gives the exit status; captured as
    in_process does. What it sets for its process (sys.path, sys.excepthook, the sibling scripts it
    loads into sys.modules) is undone afterwards, so that it cannot leak into other tests."""
    import runpy

    path = Path(path or SCRIPTS / name)
    argv = [str(path), *map(str, args)]
    saved_path, saved_hook, saved_argv = list(sys.path), sys.excepthook, list(sys.argv)
    before = set(sys.modules)
    sys.argv[:] = argv
    sys.path.insert(0, str(path.parent))  # as `python SCRIPT` starts: the script's folder first
    try:
        def as_main():
            runpy.run_path(str(path), run_name="__main__")
            return 0  # (its end reached without sys.exit: exit status 0, as a process's)

        return captured(as_main, argv, env)
    finally:
        sys.path[:], sys.excepthook, sys.argv[:] = saved_path, saved_hook, saved_argv
        for m in set(sys.modules) - before:  # the scripts' modules (a copy's among them), not pandas'
            f = getattr(sys.modules[m], "__file__", None) or ""
            if Path(f).parent.name in ("scripts", "dev") and "site-packages" not in f:
                del sys.modules[m]


def captured(call, cmd, env=None, replace_env=False):
    """call() -> exit status (or its SystemExit's, as the interpreter turns it into one) with env
    added to os.environ (or, replace_env, as the whole of it: a process given env=) and stdout,
    stderr and every warning captured: a CompletedProcess."""
    import contextlib
    import io
    import subprocess
    import warnings

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_argv0 = dict(os.environ), sys.argv[0]
    if replace_env and env is not None:
        os.environ.clear()
    os.environ.update({k: str(v) for k, v in (env or {}).items()})
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                status = call()
            except SystemExit as e:  # argparse's refusals, a script's sys.exit: as the interpreter ends
                status = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
                if not isinstance(e.code, (int, type(None))):
                    print(e.code, file=sys.stderr)  # sys.exit("message"): the message, exit status 1
        for w in caught:
            err.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno))
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv[0] = saved_argv0
    return subprocess.CompletedProcess(list(cmd), status, out.getvalue(), err.getvalue())
