"""The house rules of harness/, checked on the source: packages follow an episode's flow and import
only those before them, no module circle (Python or the in-sandbox JavaScript), no private name
taken across a package boundary, and no comment that cites a file a clone does not have
(docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Bottom to top: a package may import its own modules and those of packages on a lower floor.
FLOORS = {
    "base": 0,
    "session": 1,
    "sandbox": 2,
    "grading": 3,
    "tools": 4,
    "agents": 5,
    "suites": 6,
    "runs": 7,
    "authoring": 8,
    "cli": 9,
}
PRODUCT = ("harness", "finetune", "suites", "reports", "scripts", "bench")


def _modules(top: str) -> dict[str, Path]:
    """Every Python file under ``top``: modules, and scripts named without .py (by their #! line)."""
    found = {}
    for p in (ROOT / top).rglob("*"):
        if p.suffix != ".py" and not (p.is_file() and not p.suffix and _is_python_script(p)):
            continue
        parts = p.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return found


def _is_python_script(p: Path) -> bool:
    with p.open("rb") as f:
        first = f.readline()
    return first.startswith(b"#!") and b"python" in first


def _imports(name: str, path: Path) -> list[tuple[str, int]]:
    """(imported dotted name, line) for every import in the file, at any depth (inside functions
    too: a deferred import is still an arrow)."""
    is_pkg = path.name == "__init__.py"
    pkg = name if is_pkg else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            out += [(f"{base}.{a.name}", node.lineno) for a in node.names]
    return out


def _resolve(dotted: str, known: dict[str, Path]) -> str | None:
    while dotted and dotted not in known:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def _graph(*tops: str) -> dict[str, set[str]]:
    known = {m: p for top in tops or ("harness",) for m, p in _modules(top).items()}
    graph: dict[str, set[str]] = {m: set() for m in known}
    for m, p in known.items():
        for dotted, _ in _imports(m, p):
            target = _resolve(dotted, known)
            if target and target != m:
                graph[m].add(target)
    return graph


def _floor(module: str) -> int:
    parts = module.split(".")
    return FLOORS[parts[1]] if len(parts) > 1 else max(FLOORS.values()) + 1


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_harness_package_has_a_floor():
    packages = {p.name for p in (ROOT / "harness").iterdir() if (p / "__init__.py").exists()}
    assert packages == set(FLOORS), "a new package of harness/ needs its floor in FLOORS"
    loose = [p.name for p in (ROOT / "harness").glob("*.py") if p.name != "__init__.py"]
    assert loose == [], f"modules belong in a package: {loose}"


def test_no_arrow_runs_back_up():
    up = [
        f"{a} -> {b}"
        for a, targets in _graph().items()
        for b in targets
        if a.split(".")[:2] != b.split(".")[:2] and _floor(b) >= _floor(a)
    ]
    assert up == []


def test_no_module_circle():
    assert _circles(_graph(*PRODUCT)) == []


def test_the_circle_finder_finds_one():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _js_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for p in (ROOT / "harness").rglob("*.js"):
        if "node_modules" in p.parts:
            continue
        deps = re.findall(r"require\(\s*'(\.{1,2}/[^']+)'\s*\)", p.read_text())
        graph[str(p)] = {str((p.parent / d).with_suffix(".js").resolve()) for d in deps}
    return graph


def test_no_javascript_circle():
    graph = _js_graph()
    assert sum(len(v) for v in graph.values()) > 3, "the require finder found nothing"
    assert _circles(graph) == []


def _private(dotted: str) -> str | None:
    """The package that owns the first private part of ``dotted`` (``a.b._c.d`` -> ``a.b``)."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


@pytest.mark.parametrize("top", PRODUCT)
def test_no_private_name_across_a_package_boundary(top):
    crossings = []
    for m, p in _modules(top).items():
        own = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for dotted, line in _imports(m, p):
            owner = _private(dotted)
            if (
                owner
                and not dotted.startswith(("__future__",))
                and not (own + ".").startswith(owner + ".")
            ):
                if owner.split(".")[0] in PRODUCT:  # other projects' privates are their business
                    crossings.append(f"{p.relative_to(ROOT)}:{line} imports {dotted}")
    assert crossings == []


def test_private_finder():
    assert _private("harness.agents._model_common.Generation") == "harness.agents"
    assert _private("harness.agents.etai_format._dumps") == "harness.agents.etai_format"
    assert _private("harness.sandbox.provider") is None


CITES_OUTSIDE = re.compile(r"DESIGN\.md|\bresearch/[\w-]+\.md|shared/research")


def test_no_comment_cites_a_file_outside_the_repository():
    cited = []
    for top in (*PRODUCT, "tests", "docs", "examples"):
        for p in (ROOT / top).rglob("*"):
            if p.suffix not in (".py", ".js", ".md", ".yaml", ".sh") or "node_modules" in p.parts:
                continue
            if p == Path(__file__).resolve():
                continue
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
                if CITES_OUTSIDE.search(line):
                    cited.append(f"{p.relative_to(ROOT)}:{n}")
    readme = (ROOT / "README.md").read_text()
    cited += ["README.md"] if CITES_OUTSIDE.search(readme) else []
    assert cited == []
