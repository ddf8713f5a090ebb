"""docs/commands.md, the one list of commands, holds every runnable file of the tree once
and nothing else (CPU only, no build): every script of scripts/ and scripts/dev/, every example,
.ci/run, every xcsuite command, every module or test file run as a program, every file with the run
bit and every executable target of meson.build; each script named by the one rule (kebab-case, no
extension), with its run bit and a #! line, and none a forwarding wrapper."""
import ast
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

from suite_helpers import ROOT

TABLE = Path("docs") / "commands.md"
SKIP_DIRS = {".git", ".venv", "subprojects", "__pycache__", ".pytest_cache", "dist", "node_modules"}
KEBAB = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
MAIN = re.compile(r"^if __name__ == [\"']__main__[\"']:", re.M)


def table_rows(root: Path) -> list[str]:
    """The first cell of every row of the tables of docs/commands.md, without its backticks."""
    return [m.group(1) for m in re.finditer(r"^\| `([^`]+)` \|", (root / TABLE).read_text(), re.M)]


def tree_files(root: Path) -> list[str]:
    """The files of the tree (relative paths): git's tracked and untracked-not-ignored ones in a
    checkout, else every file outside the build and tool folders."""
    if (root / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=root, capture_output=True,
                             text=True, check=True).stdout.splitlines()
        return [f for f in out if (root / f).is_file()]
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not (Path(d) == root and x.startswith("build"))]
        files += [str((Path(d) / n).relative_to(root)) for n in names]
    return files


def commands(root: Path) -> list[str]:
    """xcsuite.cli.COMMANDS, read from the source (the tree under test may be a copy)."""
    tree = ast.parse((root / "xcsuite" / "cli" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "COMMANDS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError("xcsuite/cli/__init__.py has no COMMANDS")


def meson_targets(root: Path) -> list[str]:
    names = []
    for f in ["meson.build", *(str(p.relative_to(root)) for p in root.glob("*/meson.build"))]:
        if (root / f).exists() and not f.startswith("subprojects"):
            names += re.findall(r"\bexecutable\(\s*'([^']+)'", (root / f).read_text())
    return names


def is_script(f: str) -> bool:
    """A file of scripts/ or scripts/dev/ that is an entry point (not the helper _xcsuite.py)."""
    p = Path(f)
    return str(p.parent) in ("scripts", "scripts/dev") and not p.name.startswith("_")


def runnable(root: Path) -> dict:
    """{name as the table writes it: why it counts} for everything in the tree that runs."""
    found = {}
    for f in tree_files(root):
        p, path = Path(f), root / f
        if is_script(f):
            found[f] = "a script"
        elif str(p.parent) == "examples" and p.suffix == ".py" and not p.name.startswith("_"):
            found[f] = "an example"
        elif str(p.parent) == ".ci":
            found[f] = "CI's script"
        elif p.suffix == ".py" and p.parts[0] in ("xcsuite", "tests") and MAIN.search(path.read_text()):
            if p.parts[0] == "tests":
                found[f] = "a test file run as a program"
            elif p.parts[:2] == ("xcsuite", "cli"):
                continue  # a command: below, by its name
            else:
                module = ".".join(p.with_suffix("").parts).removesuffix(".__main__")
                found[f"python -m {module}"] = f"{f} runs as a program"
        if os.access(path, os.X_OK) and f not in found and not p.name.startswith("_"):
            found[f] = "it has the run bit"
    for c in commands(root):
        found[f"python -m xcsuite {c}"] = "an xcsuite command"
    for t in meson_targets(root):
        found[f"build/{t}"] = "an executable target of meson.build"
    return found


def problems(root: Path) -> list[str]:
    rows, found = table_rows(root), runnable(root)
    out = [f"{r}: listed twice in {TABLE}" for r in sorted({r for r in rows if rows.count(r) > 1})]
    out += [f"{name} ({why}) has no row in {TABLE}" for name, why in sorted(found.items()) if name not in rows]
    out += [f"{r}: a row of {TABLE} for nothing in the tree" for r in sorted(set(rows) - set(found))]
    for f in tree_files(root):
        if not (is_script(f) or f in found and (f.startswith(("examples/", ".ci/")))):
            continue
        path = root / f
        if is_script(f) and not KEBAB.fullmatch(Path(f).name):
            out.append(f"{f}: not kebab-case without an extension (docs/commands.md, 'Names and folders')")
        if not os.access(path, os.X_OK):
            out.append(f"{f}: no run bit (chmod +x)")
        text = path.read_text(errors="replace")
        if not text.startswith("#!"):
            out.append(f"{f}: no #! line")
        code = [line for line in text.splitlines()[1:] if line.strip() and not line.lstrip().startswith("#")]
        if "_xcsuite.run(" in text or len(code) < 8 and re.search(r"-m xcsuite|exec .*scripts/", text):
            out.append(f"{f}: forwards to another command (call that one instead)")
    for f in tree_files(root):  # a second spelling of a script: the same name but for - and _ and .py
        p = Path(f)
        if is_script(f) and p.name != p.stem.replace("_", "-"):
            twin = p.parent / p.stem.replace("_", "-")
            if (root / twin).exists():
                out.append(f"{f}: a second spelling of {twin}")
    return out


def test_the_table_lists_every_runnable_file_once_and_nothing_else():
    assert problems(ROOT) == []


def test_the_users_commands_come_first():
    # The README's two commands, the built tools and the examples open the table.
    first = table_rows(ROOT)[:9]
    assert first[:2] == ["scripts/reproduce", "scripts/test"]
    assert {"build/xcorr", "build/xcorr_bench", "build/xcorr_validate"} <= set(first)
    assert sum(r.startswith("examples/") for r in first) == 4


def copy_of_the_tree(tmp_path: Path) -> Path:
    """What the checks read, copied (so that a test can add and remove files): no .git, so the
    files are found by walking."""
    tree = tmp_path / "tree"
    for d in ("scripts", "examples", ".ci", "xcsuite", "tests", "algorithms", "python"):
        shutil.copytree(ROOT / d, tree / d, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.npy", "*.npz", "fixtures"))
    (tree / "docs").mkdir()
    shutil.copy(ROOT / TABLE, tree / TABLE)
    shutil.copy(ROOT / "meson.build", tree / "meson.build")
    return tree


def test_it_fails_for_a_script_without_a_row_a_row_without_a_file_and_a_misnamed_script(tmp_path):
    tree = copy_of_the_tree(tmp_path)
    before = set(problems(tree))  # none in a committed tree; a new file someone is writing may add one

    def problems_now():  # what the step below added
        return [p for p in problems(tree) if p not in before]
    new = tree / "scripts" / "dev" / "new-probe"
    new.write_text("#!/usr/bin/env bash\necho a probe\n")
    new.chmod(new.stat().st_mode | stat.S_IXUSR)
    assert problems_now() == [f"scripts/dev/new-probe (a script) has no row in {TABLE}"]
    new.unlink()
    (tree / "scripts" / "git-revision").unlink()
    assert problems_now() == [f"scripts/git-revision: a row of {TABLE} for nothing in the tree"]
    shutil.copy(ROOT / "scripts" / "git-revision", tree / "scripts" / "git-revision")
    wrapper = tree / "scripts" / "auto_tables.py"  # a second spelling, a wrapper, and no row
    wrapper.write_text("#!/usr/bin/env python3\nimport _xcsuite\n\n_xcsuite.run('auto-tables')\n")
    found = problems_now()
    assert f"scripts/auto_tables.py (a script) has no row in {TABLE}" in found
    assert any("not kebab-case" in p for p in found) and any("no run bit" in p for p in found)
    assert any("forwards to another command" in p for p in found) and any("second spelling" in p for p in found)
    wrapper.unlink()
    example = tree / "examples" / "new_example.py"  # an example: a row and the run bit
    example.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    assert problems_now() == [f"examples/new_example.py (an example) has no row in {TABLE}",
                              "examples/new_example.py: no run bit (chmod +x)"]
    example.unlink()
    text = (tree / "meson.build").read_text()  # a new build target
    (tree / "meson.build").write_text(text + "\nexecutable('xcorr_new', 'tools/new.cpp')\n")
    assert problems_now() == [f"build/xcorr_new (an executable target of meson.build) has no row in {TABLE}"]
