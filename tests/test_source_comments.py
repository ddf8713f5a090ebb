"""Comments and docs describe what is, not its history.

A comment in algorithms/**/*.cu|cuh states the algorithm, the mapping of work to threads, the
invariants, the resource budget and the reason for each choice; revisions, work-period numbers, A/B
percentages and profiler logs belong in notes/NN_name.md. This test catches the kinds of history
that are mechanical to spot:
- in the C++/CUDA comments of algorithms/, lib/, harness/ and tools/: a revision-like hex token (7-40
  hex digits, word-bounded, with at least one digit and one letter a-f, so that plain numbers and
  words such as "decade" do not count) and "session N";
- in every source file's comments (C, C++, CUDA, Python comments and docstrings, shell comments; the
  folders in ISSUE_DIRS): an issue number ("issue #N", "issue N", a bare "#N"). The repository has no
  issue tracker, so such a number tells a reader nothing: a comment says what the thing is;
- in docs/*.md and notes/*.md: a work period ("session N", "sessions N-M") or an issue number. The
  notes date their entries instead (the commit dates), and the docs describe the present.
It reads comments only (// and /* */ outside string and character literals; Python's # comments and
docstrings; a shell line's # comment), so code such as a hex constant or a string is not its
business. CPU only."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CPP_SUFFIXES = (".cu", ".cuh", ".cpp", ".hpp", ".h", ".c")
SOURCES = sorted(p for d in ("algorithms", "lib", "harness", "tools") for p in (ROOT / d).rglob("*")
                 if p.suffix in CPP_SUFFIXES)
# Where a comment names no issue number: every folder of sources, tests and scripts included.
ISSUE_DIRS = ("algorithms", "lib", "harness", "tools", "python", "xcsuite", "experiments", "scripts", "tests",
              "examples")
SKIP_PARTS = {"__pycache__", "fixtures", "subprojects", "build"}

REVISION = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", re.I)
SESSION = re.compile(r"\bsession \d+", re.I)
# A work period in prose: "session 62", "Sessions 39-59", "sessions 38 and 61".
WORK_PERIOD = re.compile(r"\bsessions? \d+", re.I)
# An issue number: the word "issue" and a number, with or without "#"; "issues" and "#" with a number
# (not the verb: "a warp issues 4 MMAs"); or a bare "#" with digits (not an HTML entity, not a markdown
# heading's "#", not "#include", not a hex colour).
ISSUE = re.compile(r"\bissue #?\d+\b|\bissues #\d+\b|(?<![\w&#/])#\d+(?![\w.])", re.I)

# (path relative to the repository root, the offending token) pairs that are not history. Empty:
# no comment needs one today. Add an entry only for a token that is genuinely not a revision (a
# named constant or a quoted bit pattern a comment must spell out), with a comment saying why.
ALLOWED: set[tuple[str, str]] = set()

# (path, token) pairs of issue numbers left in comments of files this change did not edit: the FFT
# engine's files (algorithms/50_fft.cu, 51_fft_fused.cu, 52_fft_segmented.cu, algorithms/common/,
# lib/reduce/, lib/plan.cpp, lib/xcorr/plan.hpp) were being rewritten by their owner at the time.
# Remove an entry when its comment is reworded; a new one needs the same reason.
ISSUE_ALLOWED: set[tuple[str, str]] = {
    ("algorithms/52_fft_segmented.cu", "issue #22"),
}


def comment_lines(text: str):
    """(line number, text) of every comment line: each // comment, and each line of a /* */ comment.
    String and character literals are skipped so that a "//" inside one is not taken for a comment
    (a digit separator, as in 1'000, is not a character literal)."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            yield line, text[i:j]
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k, part in enumerate(text[i:j].split("\n")):
                yield line + k, part
            line += text.count("\n", i, j)
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


def offending(text: str, rel: str):
    """(line number, token, comment) for every revision-like token or session number in a comment."""
    for number, comment in comment_lines(text):
        for pattern in (REVISION, SESSION):
            for m in pattern.finditer(comment):
                if (rel, m.group(0)) not in ALLOWED:
                    yield number, m.group(0), comment.strip()


def test_sources_found():
    assert any(p.name == "51_fft_fused.cu" for p in SOURCES)
    assert any(p.parent.name == "common" and p.suffix == ".cuh" for p in SOURCES)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_history_in_comments(path):
    rel = str(path.relative_to(ROOT))
    bad = [f"{rel}:{number}: {token}: {comment}" for number, token, comment in offending(path.read_text(), rel)]
    assert not bad, ("revision hashes or session numbers in comments (measurement history goes to "
                     "notes/NN_name.md):\n" + "\n".join(bad))


@pytest.mark.parametrize("text, hits", [
    ("// measured at 3756218's copies, fbc44b2 and d301b14\n", ["d301b14", "fbc44b2"]),
    ("// (notes, session 29)\n", ["session 29"]),
    ("/* first line\n   revision 7edf07b */\n", ["7edf07b"]),
    # not revisions: plain numbers, words of hex letters, too short, hex constants in code, strings
    ("// 1234567 outputs, a decade of 0xffffe000u masks, beef, 2.75e11 FLOP\n", []),
    ("x = 0xffffe000u; s = \"// 7edf07b\"; c = '/'; // fine\n", []),
])
def test_detector(text, hits):
    assert sorted(token for _, token, _ in offending(text, "t.cu")) == sorted(hits)


# --- issue numbers in every source file's comments; work periods and issue numbers in docs/notes ---

def python_comment_lines(text: str):
    """(line number, text) of every comment and docstring line of Python source: # comments by
    tokenize, docstrings (module, class, function) by ast. Source that does not parse (a file being
    edited) falls back to every line's text from an unquoted #, and to nothing for docstrings."""
    import ast
    import io
    import tokenize
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        tree = ast.parse(text)
    except (SyntaxError, tokenize.TokenError, IndentationError, ValueError):
        yield from shell_comment_lines(text)
        return
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                for k, part in enumerate(first.value.value.split("\n")):
                    yield first.lineno + k, part


def shell_comment_lines(text: str):
    """(line number, text) of each line's # comment outside quotes (shell, meson, a rough reading of
    anything else that comments with #)."""
    for number, line in enumerate(text.split("\n"), 1):
        quote = None
        for i, c in enumerate(line):
            if quote:
                if c == quote:
                    quote = None
            elif c in "'\"":
                quote = c
            elif c == "#" and (i == 0 or line[i - 1].isspace()):
                yield number, line[i:]
                break


def source_kind(path: Path) -> str | None:
    if path.suffix in CPP_SUFFIXES:
        return "cpp"
    if path.suffix == ".py":
        return "python"
    if path.suffix in (".sh", ".bash") or path.name == "meson.build":
        return "shell"
    if path.suffix == "" and path.is_file():
        try:
            first = path.read_text(errors="replace").split("\n", 1)[0]
        except OSError:
            return None
        if first.startswith("#!"):
            return "python" if "python" in first else "shell"
    return None


def issue_sources():
    out = []
    for d in ISSUE_DIRS:
        for p in sorted((ROOT / d).rglob("*")):
            if p.is_file() and not SKIP_PARTS & set(p.relative_to(ROOT).parts) and source_kind(p):
                out.append(p)
    return out


ISSUE_SOURCES = issue_sources()


def issue_numbers_in_comments(text: str, kind: str, rel: str):
    """(line number, token, comment) for every issue number in a comment of `text`."""
    if not ISSUE.search(text):  # most files: nothing to parse
        return
    lines = {"cpp": comment_lines, "python": python_comment_lines, "shell": shell_comment_lines}[kind](text)
    for number, comment in lines:
        for m in ISSUE.finditer(comment):
            if (rel, m.group(0)) not in ISSUE_ALLOWED:
                yield number, m.group(0), comment.strip()


def test_issue_sources_found():
    rels = {str(p.relative_to(ROOT)) for p in ISSUE_SOURCES}
    assert {"xcsuite/tables.py", "scripts/reproduce", "experiments/windows.py", "tests/capi_test.c"} <= rels
    assert source_kind(ROOT / "scripts" / "reproduce") in ("python", "shell")


@pytest.mark.parametrize("path", ISSUE_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_issue_numbers_in_comments(path):
    rel = str(path.relative_to(ROOT))
    bad = [f"{rel}:{number}: {token}: {comment}" for number, token, comment in
           issue_numbers_in_comments(path.read_text(errors="replace"), source_kind(path), rel)]
    assert not bad, ("issue numbers in comments (the repository has no issue tracker: say what it is "
                     "in words):\n" + "\n".join(bad))


def test_issue_allow_list_is_still_needed():
    """An allow-list entry whose comment was reworded is dropped, so the list only shrinks."""
    for rel, token in ISSUE_ALLOWED:
        path = ROOT / rel
        hits = {t for _, t, _ in issue_numbers_in_comments(path.read_text(), source_kind(path), "")} \
            if path.exists() else set()
        assert token in hits, f"{rel} no longer has {token!r} in a comment: remove it from ISSUE_ALLOWED"


DOCS = sorted([*(ROOT / "docs").glob("*.md"), *(ROOT / "notes").glob("*.md")])


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_and_notes_name_no_work_period_or_issue(path):
    """docs/ describe the present and notes/ date their entries: neither names a numbered work
    period (the word session with a number) or an issue number."""
    rel = str(path.relative_to(ROOT))
    bad = [f"{rel}:{number}: {m.group(0)}: {line.strip()}"
           for number, line in enumerate(path.read_text().split("\n"), 1)
           for pattern in (WORK_PERIOD, ISSUE) for m in pattern.finditer(line)]
    assert not bad, ("work periods or issue numbers (date a note's entry by its commit date; say what an "
                     "issue was in words):\n" + "\n".join(bad))


@pytest.mark.parametrize("kind, text, hits", [
    ("python", '"""Reductions (issue #67): peaks."""\nx = "issue #3"  # see #69\n', ["issue #67", "#69"]),
    ("python", 'def f():\n    """Issue 103: what."""\n    return "#5"\n', ["Issue 103"]),
    ("shell", 'echo "#12" # issue #65: zncc\ncolor="#1f77b4"  # &#8212; #include\n', ["issue #65"]),
    ("cpp", '// (issue #22) signals\nint a = 1; /* #24 */ s = "#25";\n', ["issue #22", "#24"]),
    # not issue numbers: a heading, an HTML entity, a colour, a count in words, a check's index inside words
    ("cpp", "// ## Windows, &#8212;, #1f77b4, 3 issues, reissue 5\n", []),
    ("cpp", "// Per 8 t a warp issues 512 FFMA; issues #21 and issue 7's\n", ["issues #21", "issue 7"]),
])
def test_issue_detector(kind, text, hits):
    assert sorted(t for _, t, _ in issue_numbers_in_comments(text, kind, "t")) == sorted(hits)


@pytest.mark.parametrize("text, hits", [
    ("On 2026-11-28 (session 62) and sessions 39-59; Sessions 38 and 61\n", ["session 62", "sessions 39", "Sessions 38"]),
    ("the session's first call, 2026-11-27: clean\n", []),
])
def test_work_period_detector(text, hits):
    assert [m.group(0) for m in WORK_PERIOD.finditer(text)] == hits
