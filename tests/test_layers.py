"""The package's imports run one way: commands, features, engines, shared, base; lint and trace never meet; no cycles.

Every `import` and `from ... import` in `opscan/`, at module level or inside a
function (a lazy import is still a dependency), is read with `ast`, never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "opscan"

# Lowest first. A module may import its own layer and the layers below it.
LAYERS = (
    ("base", ("opscan._launcher", "opscan._path", "opscan._read", "opscan._plain", "opscan._hash", "opscan._rules_snapshot", "opscan._rules_index", "opscan._toml", "opscan._version", "opscan.fsutil", "opscan.findings", "opscan.config", "opscan.codes", "opscan.versions")),
    ("shared", ("opscan.rules", "opscan.output")),
    ("engine", ("opscan.lint", "opscan.trace")),
    ("feature", ("opscan.pytest_plugin", "opscan.bench", "opscan.compare", "opscan.report", "opscan.diff")),
    ("command", ("opscan.commands", "opscan.registry", "opscan.cli", "opscan.__main__")),
    ("api", ("opscan",)),
)
ENGINES = ("opscan.lint", "opscan.trace")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> int:
    best, index = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), i
    assert index is not None, f"{module} is in no layer; add it to LAYERS"
    return index


def _engine(module: str) -> str | None:
    return next((e for e in ENGINES if module == e or module.startswith(e + ".")), None)


def _imports(module: str, path: Path) -> set[str]:
    """The opscan modules `module` imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from pkg import mod` depends on pkg.mod when that is a module, else on pkg itself.
            names = [f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source for a in node.names]
        else:
            continue
        out.update(n for n in names if n == "opscan" or n.startswith("opscan."))
    out.discard(module)
    return out


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def test_every_module_has_a_layer():
    for module in MODULES:
        _layer(module)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_upward_edge(module):
    mine = _layer(module)
    upward = sorted(dep for dep in GRAPH[module] if _layer(dep) > mine)
    assert not upward, f"{module} ({LAYERS[mine][0]}) imports upward: {upward}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _engine(m)))
def test_lint_and_trace_never_import_each_other(module):
    mine = _engine(module)
    crossing = sorted(dep for dep in GRAPH[module] if _engine(dep) not in (None, mine))
    assert not crossing, f"{module} imports the other engine: {crossing}"


def _cycle() -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(GRAPH.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep) :] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(GRAPH):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycle():
    cycle = _cycle()
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_checker_sees_what_it_checks():
    # Guard against a test that cannot fail: known edges must be in the graph.
    assert "opscan.findings" in GRAPH["opscan.output"]
    assert "opscan.trace.runner" in GRAPH["opscan.trace.scan"]
    assert _layer("opscan.lint.engine") == _layer("opscan.trace.tracer") > _layer("opscan.rules") > _layer("opscan.findings")
