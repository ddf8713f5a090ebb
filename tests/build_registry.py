"""The registry the tests use: the build's `xcorr list --json`, so that a variant added to the
build is in every test that goes over the variants without anyone copying anything by hand.

    registry()        the build's entries, and for a variant the build left out (-Dvariants=...)
                      the entry of tests/fixtures/registry.json; the fixture alone where there is
                      no build (XCORR_BUILD, default build/, has no xcorr)
    python tests/build_registry.py --refresh
                      rewrites tests/fixtures/registry.json from a build of every variant
                      (-Dvariants=all); scripts/test runs it after building

tests/fixtures/registry.json is only the fallback of a checkout without a build, and the entries
of variants a subset build leaves out; it is refreshed from every full build, so nobody edits it.
The merged list is cached beside the build (registry-for-tests.json, rewritten when the xcorr
binary or the fixture is newer), so that tests/fake_xcorr.py, which answers `xcorr list --json`
for the CPU suite tests, reads the same registry in every process it is started as."""
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURE = HERE / "fixtures" / "registry.json"


def build_dir() -> Path:
    b = Path(os.environ.get("XCORR_BUILD", ROOT / "build"))
    return b if b.is_absolute() else ROOT / b


def real_xcorr(build: Path) -> Path | None:
    """The build's xcorr, None where there is none or it is tests/fake_xcorr.py's stand-in (a fake
    build: XCORR_BUILD pointed at one must not ask the fake, which would ask itself)."""
    exe = build / "xcorr"
    if not exe.is_file() or (exe.stat().st_size < 4096 and b"fake_xcorr.py" in exe.read_bytes()):
        return None
    return exe


def build_list(build: Path) -> list | None:
    """`xcorr list --json` of the build, or None where it has no xcorr (a checkout never built)."""
    exe = real_xcorr(build)
    if exe is None:
        return None
    r = subprocess.run([str(exe), "list", "--json"], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} list --json exited with status {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def merge(built: list, fixture: list) -> list:
    """The build's entries, plus the fixture's for the variants the build lacks; sorted by name as
    `xcorr list --json` is."""
    names = {v["name"] for v in built}
    return sorted(built + [v for v in fixture if v["name"] not in names], key=lambda v: v["name"])


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)  # pytest-xdist workers and fake binaries may write it at once


def registry() -> list:
    fixture = json.loads(FIXTURE.read_text())
    build = build_dir()
    exe = real_xcorr(build)
    if exe is None:
        return fixture
    cache = build / "registry-for-tests.json"
    try:
        if cache.stat().st_mtime >= max(exe.stat().st_mtime, FIXTURE.stat().st_mtime):
            return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    merged = merge(build_list(build), fixture)
    try:
        _atomic_write(cache, json.dumps(merged, indent=1) + "\n")
    except OSError:
        pass  # a read-only build: every call asks the binary
    return merged


def registry_path() -> Path:
    """A file holding registry() (the cache beside the build, or the fixture without a build)."""
    registry()
    cache = build_dir() / "registry-for-tests.json"
    return cache if real_xcorr(build_dir()) and cache.exists() else FIXTURE


def built_variants_option(build: Path) -> str | None:
    """The build's -Dvariants value (Meson's introspection), None where it cannot be read."""
    try:
        opts = json.loads((build / "meson-info" / "intro-buildoptions.json").read_text())
    except (OSError, ValueError):
        return None
    return next((o["value"] for o in opts if o["name"] == "variants"), None)


def refresh() -> int:
    """Rewrite the fixture from a build of every variant; says what it did (nothing otherwise)."""
    build = build_dir()
    if built_variants_option(build) != "all":
        return 0  # a subset build cannot say which variants exist
    built = build_list(build)
    if built is None:
        return 0
    text = json.dumps(built, indent=1) + "\n"
    if FIXTURE.read_text() != text:
        FIXTURE.write_text(text)
        print(f"== {FIXTURE.relative_to(ROOT)} refreshed from {build}/xcorr list --json (commit it with the variant)")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--refresh"]:
        sys.exit(refresh())
    json.dump(registry(), sys.stdout, indent=1)
    print()
