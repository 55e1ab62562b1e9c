"""The stages import one way. Every import of `pricing` and `planner` (module-level, function-level
and type-checking ones alike, read from the source's syntax tree) is an edge; the stages are ordered
below, as a request flows through them (README, "How it is built"), and a module may import only its
own stage or the stages before it. No cycle anywhere, and pricing never imports the planner."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]

# pricing's stages, in the order a request flows through them (the README's table)
PRICING_STAGES = (
    ("pricing.errors", "pricing.units", "pricing.yaml_fast", "pricing.files"),  # what every stage shares
    ("pricing.registry", "pricing.chips"),  # the registry and the chips it describes
    ("pricing.config",),
    ("pricing.graph",),
    ("pricing.specs",),
    ("pricing.rules",),
    ("pricing.kernel",),
    ("pricing.step",),
    ("pricing.serving",),
    ("pricing.calibration",),
)
# the planner's stages, after pricing's
PLANNER_STAGES = (
    # inputs, and the one number formatter every later stage prints its figures with
    ("planner.defaults", "planner.limits", "planner.request", "planner.scenario", "planner.heap", "planner.numbers",
     "planner.kinds", "planner.progress",  # progress: the stages a long search names, for a command to show
     "planner.applies",  # what options and fields can apply to a model
     "planner.traffic.intervals", "planner.traffic.profile", "planner.traffic.spec",
     "planner.traffic.trace", "planner.traffic.prometheus", "planner.traffic.lengths"),  # a scenario's traffic: input
    ("planner.candidates", "planner.traffic"),  # the schedule: a candidate shape's replicas per interval
    ("planner.search",),
    ("planner.app",),  # the use cases: the Python API (`import planner` re-exports planner.app.api)
    ("planner.report",),
    ("planner.commands", "planner.cli"),
)
STAGES = PRICING_STAGES + PLANNER_STAGES


def _modules() -> dict[str, Path]:
    found = {}
    for package in ("pricing", "planner"):
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _known(name: str) -> str | None:
    """The project module an import names: the longest prefix that is one."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(path: Path) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(m, node.lineno) for a in node.names if (m := _known(a.name))]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from a.b import c` imports the module a.b.c when there is one, else a.b
            out += [(m, node.lineno) for a in node.names if (m := _known(f"{node.module}.{a.name}"))]
    return out


def _graph() -> nx.DiGraph:
    g = nx.DiGraph()
    for name, path in MODULES.items():
        g.add_node(name)
        for target, line in _imports(path):
            if target != name:
                g.add_edge(name, target, line=line)
    return g


GRAPH = _graph()


def _stage(module: str) -> int | None:
    if module == "pricing":
        return 0  # the package itself (empty)
    if module == "planner":
        return _stage("planner.app")  # the package is the API's face (its names resolve lazily to planner.app.api)
    for i, prefixes in enumerate(STAGES):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return i
    return None


def test_every_module_has_a_stage():
    assert [m for m in MODULES if _stage(m) is None] == []


def test_no_stage_imports_a_later_one():
    upward = [f"{a} (line {d['line']}) imports {b}" for a, b, d in GRAPH.edges(data=True)
              if _stage(a) is not None and _stage(b) is not None and _stage(b) > _stage(a)]
    assert upward == []


def test_pricing_never_imports_the_planner():
    assert [(a, b) for a, b in GRAPH.edges if a.startswith("pricing") and b.startswith("planner")] == []


@pytest.mark.parametrize("package", ["planner", "pricing"])
def test_no_import_cycles(package):
    inside = GRAPH.subgraph(m for m in MODULES if m == package or m.startswith(package + "."))
    cycles = {frozenset(c) for c in nx.strongly_connected_components(inside) if len(c) > 1}
    assert cycles == set()


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_report_only_renders():
    """planner/report renders result models: it runs no search and builds no candidates (the use
    cases in planner/app do, and hand it their results)."""
    reaching = [f"{a} (line {d['line']}) imports {b}" for a, b, d in GRAPH.edges(data=True)
                if _inside(a, "planner.report") and (_inside(b, "planner.search") or _inside(b, "planner.candidates"))]
    assert reaching == []


def test_the_commands_call_only_the_api_and_the_renderers():
    """The click commands parse options into typed inputs, call planner/app/api.py and render: of
    the application they import the API alone, and nothing of the candidates or the search."""
    beyond = [f"{a} (line {d['line']}) imports {b}" for a, b, d in GRAPH.edges(data=True)
              if (_inside(a, "planner.commands") or a == "planner.cli")
              and (_inside(b, "planner.search") or _inside(b, "planner.candidates")
                   or (_inside(b, "planner.app") and b != "planner.app.api"))]
    assert beyond == []


def test_the_walk_sees_function_level_imports():
    """The walk reads imports inside functions: the planner's CLI imports its commands there."""
    assert GRAPH.has_edge("planner.commands.plan", "planner.app.api")
    assert GRAPH.has_edge("pricing.kernel.report", "pricing.kernel.checkpoint_check")  # inside memory_report


def test_no_docstring_cites_the_tracker():
    """Docstrings state the law and its source, not the history of the work (no "issue 14")."""
    import re

    cited = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node) or ""
                if re.search(r"\bissues? \d+", doc):
                    cited.append(f"{name}: {getattr(node, 'name', '(module)')}")
    assert cited == []


def test_the_api_never_prints():
    """planner/app (the Python API) returns results and raises errors: it imports no terminal,
    command-line or chart library, and calls no print."""
    found = []
    for name, path in MODULES.items():
        if not (name == "planner.app" or name.startswith("planner.app.")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                found += [f"{name} imports {n}" for n in names if n.split(".")[0] in ("click", "rich", "matplotlib")]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                found.append(f"{name} calls print (line {node.lineno})")
    assert found == []
