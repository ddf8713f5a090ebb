"""The kernels' comments describe the design, not its history (issue #66).

A comment in algorithms/**/*.cu|cuh states the algorithm, the mapping of work to threads, the
invariants, the resource budget and the reason for each choice; revisions, session numbers, A/B
percentages and profiler logs belong in notes/NN_name.md. This test catches the two kinds of history
that are mechanical to spot: a revision-like hex token (7-40 hex digits, word-bounded, with at least
one digit and one letter a-f, so that plain numbers and words such as "decade" do not count) and
"session N". It reads comments only (// and /* */, outside string and character literals), so code
such as a hex constant is not its business. CPU only."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for d in ("algorithms", "lib", "harness", "tools") for p in (ROOT / d).rglob("*")
                 if p.suffix in (".cu", ".cuh", ".cpp", ".hpp", ".h"))

REVISION = re.compile(r"\b(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", re.I)
SESSION = re.compile(r"\bsession \d+", re.I)

# (path relative to the repository root, the offending token) pairs that are not history. Empty:
# no comment needs one today. Add an entry only for a token that is genuinely not a revision (a
# named constant or a quoted bit pattern a comment must spell out), with a comment saying why.
ALLOWED: set[tuple[str, str]] = set()


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
