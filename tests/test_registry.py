"""Every registry magnitude carries its provenance: a value, where it came from, how it was obtained."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "pricing" / "registry"
FILES = [*sorted(REGISTRY.glob("*.yaml")), *sorted(REGISTRY.glob("chips/*.yaml")), ROOT / "planner" / "defaults.yaml"]


def leaves(node, path=""):
    if isinstance(node, dict):
        if "value" in node:
            yield path, node
            return
        for key, child in node.items():
            yield from leaves(child, f"{path}.{key}" if path else str(key))


def test_every_value_has_source_and_how():
    count = 0
    for file in FILES:
        for path, leaf in leaves(yaml.safe_load(file.read_text())):
            count += 1
            assert str(leaf.get("source", "")).strip(), f"{file.name}: {path} has no source"
            assert str(leaf.get("how", "")).strip(), f"{file.name}: {path} has no how"
    assert count > 50


def test_numbers_in_registry_files_sit_inside_sourced_values():
    """No bare magnitude: outside `{value, source, how}` only names, aliases and enums appear."""
    allowed = {"name", "aliases", "vendor", "generation"}

    def bare(node, path=""):
        if isinstance(node, dict):
            if "value" in node:
                return
            for key, child in node.items():
                if key in allowed:
                    continue
                yield from bare(child, f"{path}.{key}")
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            yield path

    for file in FILES:
        assert list(bare(yaml.safe_load(file.read_text()))) == [], file.name


def test_the_spec_defaults_are_in_the_spec_overlay():
    from pricing.registry import read_overlay

    reg = read_overlay(Path(__file__).resolve().parents[1] / "pricing/registry/overlays/spec-reference.yaml")
    assert reg.value("cost_model_memory.activation_buffers.moe") == {1: 22, 2: 13, 4: 10, 8: 10}
    assert reg.value("cost_model_memory.activation_buffers.dense") == {1: 10, 2: 6, 4: 5, 8: 5}
    assert reg.value("cost_model_memory.activation_buffers.llama") == {1: 11, 2: 6.5, 4: 5, 8: 5}
    assert reg.value("cost_model_memory.activation_floor_bytes") == 70 * 2**20
    assert reg.value("cost_model_memory.cuda_graph_flat.FULL_AND_PIECEWISE") == int(0.8 * 2**30)
    assert reg.value("cost_model_primitives.communicator_reservation") == {1: 0, 2: 342 * 2**20, 4: 392 * 2**20,
                                                                           8: 392 * 2**20}
    assert reg.value("cost_model_primitives.engine_workspace") == int(3.5 * 2**30)
