"""The suite's Python layers, checked statically from the sources: the modules of the
xcsuite package import one another without a circle (every import counts, a function's too: a
circle hidden in a function still ties two modules together), the data model (xcsuite/spec.py)
imports nothing of the suite but the counting rules, and experiments/ holds experiment definitions
only, written in the model's terms, which no module of xcsuite's library takes from experiments/."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports (absolute names; `from a import b` counts a and a.b)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return found


def graph(folder: str) -> dict[str, list[str]]:
    modules = {module_name(p): p for p in (ROOT / folder).rglob("*.py")}
    return {m: sorted(d for d in imports_of(p) if d in modules and d != m) for m, p in modules.items()}


def circle(g: dict[str, list[str]]) -> list[str] | None:
    """A circle of imports in `g`, as the list of modules around it, or None."""
    state = {}  # 1: on the current path, 2: done

    def visit(m, path):
        state[m] = 1
        for d in g[m]:
            if state.get(d) == 1:
                return path[path.index(d):] + [d]
            if d not in state:
                found = visit(d, path + [d])
                if found:
                    return found
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state:
            found = visit(m, [m])
            if found:
                return found
    return None


def test_circle_finder():
    assert circle({"a": ["b"], "b": ["c"], "c": []}) is None
    assert circle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert circle({"a": ["a2"], "a2": [], "b": ["c"], "c": ["b"]}) == ["b", "c", "b"]


def test_imports_of_reads_nested_imports():
    assert {"xcsuite.peers", "xcsuite.benchjson", "xcsuite.benchjson.parse_case_line"} <= \
        imports_of(ROOT / "xcsuite" / "reduce_peers.py")


def test_xcsuite_modules_import_without_a_circle():
    g = graph("xcsuite")
    assert {"xcsuite.spec", "xcsuite.peerbench", "xcsuite.peers", "xcsuite.reduce_peers", "xcsuite.benchjson"} <= set(g)
    found = circle(g)
    assert found is None, "import circle: " + " -> ".join(found)


def test_peers_below_their_harness():
    """peerbench (the command line, protocol and JSON) runs the peers and the reductions; neither
    imports it back. xcorr_bench's case syntax and JSON writer are benchjson's."""
    g = graph("xcsuite")
    for low in ("xcsuite.peers", "xcsuite.reduce_peers", "xcsuite.benchjson", "xcsuite.resultfile"):
        assert "xcsuite.peerbench" not in g[low], f"{low} imports xcsuite.peerbench"
    for user in ("xcsuite.peers", "xcsuite.reduce_peers", "xcsuite.resultfile", "xcsuite.peerbench"):
        assert "xcsuite.benchjson" in g[user], f"{user} should read case lines or write JSON through xcsuite.benchjson"


def test_the_model_is_in_xcsuite_and_experiments_hold_definitions():
    spec = imports_of(ROOT / "xcsuite" / "spec.py")
    assert not {d for d in spec if d.startswith(("experiments", "xcsuite.")) and not d.startswith("xcsuite.rules")}, \
        f"xcsuite/spec.py, the data model, imports the suite: {sorted(spec)}"
    assert not (ROOT / "experiments" / "_spec.py").exists()
    for path in (ROOT / "experiments").glob("*.py"):
        if path.name == "__init__.py":
            continue
        text = path.read_text()
        if path.name.startswith("_"):  # series several definitions share
            assert "Series" in text, f"experiments/{path.name}: only definitions and their shared series here"
        else:
            assert "EXPERIMENT = Experiment(" in text or "EXPERIMENT=Experiment(" in text, \
                f"experiments/{path.name} defines no EXPERIMENT: the model's modules belong in xcsuite/"
    for path in (ROOT / "xcsuite").glob("*.py"):  # the library modules (the commands in cli/ read definitions)
        bad = {d for d in imports_of(path) if d.startswith("experiments._")}
        assert not bad, f"xcsuite/{path.name} imports {sorted(bad)}: the model is xcsuite's"
