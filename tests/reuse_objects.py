"""The main build's compiled objects for the tests' second builds of the same tree (tests/test_wheel.py's
wheel, tests/test_example_variant.py's scratch build), which compile lib/ and the host programs with the
same commands as the main build (and the same relative paths: a build folder one level below its tree):
some four minutes of 2 cores each, for objects that build/ already has.

seed(MAIN, NEW) copies MAIN's object files and ninja's two logs (.ninja_log: each output's command hash
and time; .ninja_deps: the headers each object read) into NEW, times kept, before NEW's first ninja
run, before or after its configure (Meson's configure runs `ninja -t restat`, which records NEW's own
files' times in the log; seed runs it where NEW is configured already). Ninja itself then decides, as
it does in any build folder, which of them stand: an object is compiled again unless its command in NEW is byte for byte the one MAIN ran (flags, defines,
architectures, paths), its deps are recorded, and no source or header it read is newer than it (a file
edited since MAIN was built, a file generated anew in NEW: auto_table.cpp). The generated sources that
include several files as one translation unit (meson.build's units, which MAIN's units.json names;
their paths relative to the tree, so the same bytes in NEW) and the generated headers
(GENERATED_HEADERS) are copied too, times kept, where NEW has none or the same bytes: Meson writes
such a file only where its bytes change, so that what compiles or includes them stands as well. What NEW adds
or changes (a new variant, other flags) is compiled; every link is done in NEW. Without MAIN's logs, or with NEW already built, nothing is copied (a whole build, as
before)."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

LOGS = (".ninja_log", ".ninja_deps")
# Headers the build generates (meson.build): build_info.hpp at configure time, version.hpp (vcs_tag)
# at each build; both are written only where their bytes change, so that a copy of MAIN's, where
# NEW's would be the same, keeps the objects that include them (harness/context.cpp's) standing.
# Where NEW's differ (another revision, other options), NEW's own replace them and those compile.
GENERATED_HEADERS = ("build_info.hpp", "version.hpp")


def revision(main) -> str | None:
    """The git revision MAIN was built from (its version.hpp), or None: a second build of the same
    tree given it (XCORR_GIT_REVISION) has MAIN's version, so the objects whose commands hold the
    version (the Python extension's) stand too."""
    import re

    f = Path(main) / "version.hpp"
    m = re.search(r'#define XCORR_GIT_REVISION "([^"]+)"', f.read_text()) if f.is_file() else None
    return m[1] if m else None


def python_ninja():
    """The ninja of this Python's environment before PATH's (None where there is none): the one
    scripts/setup-env and meson-python build build/ with. Its log format is its own (.ninja_log v7
    from ninja 1.12 on); an older ninja on PATH (Debian's 1.11) finds that log too new, drops it and
    compiles everything again."""
    return shutil.which("ninja", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))


NINJA = python_ninja() or "ninja"


def seed(main, new) -> int:
    """Copies MAIN's *.o and ninja logs into NEW (made where missing); returns how many objects."""
    main, new = Path(main), Path(new)
    if not all((main / f).is_file() for f in LOGS) or any((new / f).exists() for f in LOGS):
        return 0
    objects = [p for p in main.rglob("*.o") if p.is_file() and not p.is_symlink()]
    for p in objects:
        dst = new / p.relative_to(main)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, dst)
    # the generated translation units and headers (above): where NEW has none or the same bytes,
    # times kept, so that what compiles or includes them stands
    units = main / "units.json"
    for name in [*(json.loads(units.read_text()) if units.is_file() else {}), *GENERATED_HEADERS]:
        src, dst = main / name, new / name
        if src.is_file() and (not dst.exists() or dst.read_bytes() == src.read_bytes()):
            shutil.copy2(src, dst)
    for f in LOGS:
        shutil.copy2(main / f, new / f)
    if (new / "build.ninja").is_file():  # configured already: the log's times of NEW's own files (its
        # build.ninja, newer than MAIN's, which would otherwise have ninja run Meson again first)
        subprocess.run([NINJA, "-C", str(new), "-t", "restat"], capture_output=True, check=True)
    return len(objects)
