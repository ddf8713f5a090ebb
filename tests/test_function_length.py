"""No function of the tools' and the harness's mains runs over MAX_LINES lines: a
long main is split into named steps (parse the options, run the cases, the closing checks), each
readable on a screen. Checked on the CPU from the sources alone by a brace-matching line counter:
comments, string and character literals and preprocessor lines are blanked first, then every brace
at namespace or class level whose header ends like a function's (`) {`, `) const {`, `) : init {`)
opens a function that runs to its matching brace; lambdas and blocks inside it count as its lines."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 100
MAINS = ["harness/validate_main.cpp", "harness/bench_main.cpp", "tools/xcorr_main.cpp"]


def blank(text: str) -> str:
    """`text` with comments, string and character literals (raw strings too) and preprocessor lines
    blanked, every newline kept (so that line numbers stay)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 40])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = ")" + raw.group(1) + '"'
            j = text.find(end, i + raw.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        c = text[i]
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                out.append(c)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        if c == "#" and (i == 0 or text[i - 1] == "\n"):  # a preprocessor line and its continuations
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0 or text[k - 1] != "\\":
                    k = n if k < 0 else k
                    break
                j = k + 1
            out.append("\n" * text.count("\n", i, k))
            i = k
            continue
        out.append(c)
        i += 1
    return "".join(out)


FUNCTION_HEAD = re.compile(r"\)\s*(?:const|noexcept(?:\([^)]*\))?|override|final|mutable|&&?|->\s*[\w:<>,\s*&]+|\s)*$")
CONSTRUCTOR_HEAD = re.compile(r"\)\s*(?:noexcept\s*)?:\s*[\w:]+\s*[({]")
SCOPE_HEAD = re.compile(r'\s*(?:inline\s+)?namespace\b|\s*extern\s*""')


def functions(text: str) -> list[tuple[str, int, int]]:
    """(name, first line, last line) of every function body that is not inside another function."""
    s = blank(text)
    stack, found, last = [], [], 0  # last: just after the previous ; { or }
    for k, ch in enumerate(s):
        if ch == ";":
            last = k + 1
        elif ch == "{":
            head = s[last:k]
            if any(kind != "scope" for kind, _, _ in stack):
                kind = "inner"
            elif SCOPE_HEAD.match(head) or (re.search(r"\b(class|struct|union|enum)\b", head) and "(" not in head):
                kind = "scope"
            elif FUNCTION_HEAD.search(head) or CONSTRUCTOR_HEAD.search(head):
                kind = "function"
            else:
                kind = "other"  # an initializer list, an array's values
            first = s.count("\n", 0, last + len(head) - len(head.lstrip())) + 1
            name = re.search(r"([~\w]+|operator\s*\S+?)\s*\(", head)
            stack.append((kind, first, name.group(1) if name else "?"))
            last = k + 1
        elif ch == "}":
            if stack:
                kind, first, name = stack.pop()
                if kind == "function":
                    found.append((name, first, s.count("\n", 0, k) + 1))
            last = k + 1
    return found


def test_counter():
    text = '''namespace {
struct S {
    int f() const { return 1; }
};
// a comment with { braces
const int table[] = {1, 2, 3};
int g(int a) {
    auto h = [&](int b) {
        if (b) { return "}"; }
        return "{";
    };
    return h(a) ? 1 : 2;
}
}  // namespace
int main(int argc, char** argv) {
    return g(argc);
}
'''
    assert functions(text) == [("f", 3, 3), ("g", 7, 13), ("main", 15, 17)]


@pytest.mark.parametrize("path", MAINS)
def test_no_long_function(path):
    found = functions((ROOT / path).read_text())
    assert any(name == "main" for name, _, _ in found), f"{path}: no main found: the counter lost its way"
    long = [f"{name} (line {a}, {b - a + 1} lines)" for name, a, b in found if b - a + 1 > MAX_LINES]
    assert not long, f"{path}: functions over {MAX_LINES} lines; split them into named steps: {', '.join(long)}"
