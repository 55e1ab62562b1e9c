"""No ambient registry: a command's `--registry` overlay is read once and handed down (the use cases'
`registry`, a ResolvedService's, a candidate table's, a kernel's), never set aside in a context
variable for code below to find (issue 40)."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import pytest

import planner
import pricing.registry
from planner.candidates.service import ResolvedService
from planner.request import PoolLimits, ServiceSpec
from pricing.registry import overlay_from, shipped

ROOT = Path(__file__).resolve().parents[1]
MARGIN = {"cost_model_memory": {"kv_pool_margin": {"value": 0.25, "source": "test", "how": "test"}}}


def test_the_registry_module_keeps_no_registry_in_use():
    from contextvars import ContextVar

    assert not hasattr(pricing.registry, "load") and not hasattr(pricing.registry, "using")
    assert not [name for name, v in vars(pricing.registry).items() if isinstance(v, ContextVar)]


def _registry_imports(path: Path) -> list[str]:
    """What a module imports from pricing.registry by name, and every `pricing.registry.X` it reads."""
    tree = ast.parse(path.read_text(), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "pricing.registry":
            out += [a.name for a in node.names]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "registry" and isinstance(node.value.value, ast.Name) \
                and node.value.value.id == "pricing":
            out.append(node.attr)
    return out


def test_no_module_asks_for_a_registry_in_use():
    files = [p for folder in ("pricing", "planner", "scripts", "bench", "tests") for p in (ROOT / folder).rglob("*.py")]
    assert len(files) > 100
    asking = {str(p.relative_to(ROOT)): names for p in files
              if (names := [n for n in _registry_imports(p) if n in ("load", "using", "_IN_USE")])}
    assert asking == {}


def test_an_overlay_given_to_a_use_case_reaches_the_plan():
    overlay = overlay_from(MARGIN)
    fields = {"model": "llama-3.1-8b", "chip": "h100", "concurrency": 64, "context_length": 8192}
    plain, laid = planner.plan(**fields), planner.plan(**fields, registry=overlay)
    assert plain.margin.fraction == shipped().value("cost_model_memory.kv_pool_margin") != 0.25
    assert laid.margin.fraction == 0.25  # the plan's stated margin, and the rows it was held back from:
    assert laid.best.held < plain.best.held * (1 - 0.25) / (1 - plain.margin.fraction) + 1
    assert {p["name"]: p["value"] for p in laid.provenance}.get("cost_model_memory.kv_pool_margin", 0.25) == 0.25


def test_a_command_overlay_reaches_its_plan(tmp_path, capsys):
    import json

    import yaml

    from planner.cli import main

    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(MARGIN))
    argv = ["--model", "llama-3.1-8b", "--chip", "h100", "--concurrency", "64", "--context-length", "8192", "--json"]
    assert main([*argv, "--registry", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["margin"]["fraction"] == 0.25
    assert main(argv) == 0  # the next command, without it: the shipped registry's
    shipped_margin = shipped().value("cost_model_memory.kv_pool_margin")
    assert json.loads(capsys.readouterr().out)["margin"]["fraction"] == shipped_margin


@pytest.mark.parametrize("registry", [None, overlay_from(MARGIN)], ids=["shipped", "overlay"])
def test_a_service_sent_to_a_worker_keeps_its_registry(registry):
    service = ResolvedService.of(ServiceSpec(model="llama-3.1-8b", concurrency=8, context_length=4096),
                                 PoolLimits(chips=("h100",)), registry=registry)
    back = pickle.loads(pickle.dumps(service))
    assert back.registry == service.registry
    if registry is None:
        assert back.registry is shipped()  # the worker's own, never a copy of the files
    else:
        assert back.registry.value("cost_model_memory.kv_pool_margin") == 0.25
