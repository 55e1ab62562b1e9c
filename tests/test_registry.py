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


# -- files parsed lazily ---------------------------------------------------------------------------
PROBE = r"""
import json
import pricing.registry as R
import pricing.yaml_fast as Y

by_text = {}
for path in [*R.HERE.glob("*.yaml"), *R.HERE.glob("chips/*.yaml")]:
    by_text.setdefault(path.read_text(), []).append(path.relative_to(R.HERE).as_posix())
parsed, read = [], set()
parse, get, has = Y.load, R.Registry.__getitem__, R.Registry.__contains__
Y.load = lambda text: (parsed.extend(by_text.get(text, [])), parse(text))[1]
R.Registry.__getitem__ = lambda reg, name: (read.add(name), get(reg, name))[1]
R.Registry.__contains__ = lambda reg, name: (read.add(name), has(reg, name))[1]

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel
from pricing.step import chip_rates

chip = get_chip("h200")
kernel = Kernel.of(load_model("dsv4.1-flash"), Deployment(tensor_parallel_size=8), chip)
kernel.instance.max_concurrency(), kernel.provenance(), chip_rates(chip)
print(json.dumps({"parsed": parsed, "read": sorted(read)}))
"""


def _file_of(name: str) -> str:
    """The file a registry name lives in: its stem's, or its chip's (chips/README.md)."""
    parts = name.split(".")
    return f"chips/{parts[2]}.yaml" if parts[0] in ("chips", "chip_rates") else f"{parts[0]}.yaml"


def test_a_kernel_on_one_chip_parses_once_only_the_files_whose_values_it_reads():
    """The headline's path: naming a chip by its id parses that chip's file, not the catalogue, and
    the kernel parses the registry files it reads values from, each once (a fresh process, so that
    no other test's reads count)."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    probe = json.loads(out)
    parsed, needed = probe["parsed"], {_file_of(n) for n in probe["read"]}
    assert "chips/h200.yaml" in needed and "deepseek_v4.yaml" in needed  # the probe read what it should
    assert sorted(parsed) == sorted(set(parsed)), "a registry file parsed twice"
    assert set(parsed) == needed
    assert [p for p in parsed if p.startswith("chips/")] == ["chips/h200.yaml"]


def test_equal_content_is_an_equal_registry_and_an_overlay_that_changes_a_value_changes_the_key(tmp_path):
    """Memo keys hold the registry whole: derived from the files' texts and the overlay's values,
    without parsing the files."""
    import shutil

    from pricing.registry import HERE, DataFiles, Registry, shipped

    files = DataFiles(HERE)
    fresh = Registry(files)
    assert fresh == shipped() and hash(fresh) == hash(shipped())
    assert files.parsed == []  # hashing parsed nothing
    copy = tmp_path / "registry"
    shutil.copytree(HERE, copy, ignore=shutil.ignore_patterns("*.py", "__pycache__", "overlays"))
    assert Registry(DataFiles(copy)) == shipped() and hash(Registry(DataFiles(copy))) == hash(shipped())

    name = "cost_model_primitives.engine_workspace"
    same = fresh.with_overrides({name: fresh.value(name)})
    assert same == fresh and hash(same) == hash(fresh)  # the same value laid over: the same content
    changed = fresh.with_overrides({name: fresh.value(name) + 2**20})
    assert changed != fresh and hash(changed) != hash(fresh)
    assert changed == shipped().with_overrides({name: fresh.value(name) + 2**20})
    assert {p.name for p in files.parsed} == {"cost_model_primitives.yaml"}  # only the overlaid value's file

    h200 = copy / "chips" / "h200.yaml"
    h200.write_text(h200.read_text().replace("value: 4.54", "value: 4.55"))
    assert Registry(DataFiles(copy)) != shipped()


def test_names_under_a_prefix_are_those_of_the_whole_registry():
    from pricing.registry import HERE, DataFiles, Registry

    reg = Registry(DataFiles(HERE))
    every = reg.names()
    assert "chips.chips.h200.memory_bytes" in every and "chip_rates.unsourced.a10g" in every
    for prefix in ("vllm_eras.laws_until.", "cost_model", "chips.chips.h20", "chip_rates.unsourced.",
                   "chip_rates.chip_rates.h200.", "chips.chips.h200.memory_bytes", "chip", "nothing."):
        assert reg.names(prefix) == [n for n in every if n.startswith(prefix)], prefix


def test_a_chip_is_named_by_its_file_and_no_alias_is_another_chips_id():
    """get_chip reads only the named chip's file when the name is an id, so an alias must never be
    an id or another chip's alias; an id sits inside dotted names, so it has no dot."""
    import re

    from pricing.chips import chip_ids, get_chip
    from pricing.registry import shipped

    ids = chip_ids()
    aliases = [a.lower() for c in ids for a in shipped().chip_file(c)["chip"].get("aliases", [])]
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9-]*", c) for c in ids), ids
    assert len(aliases) == len(set(aliases)) and not set(aliases) & set(ids)
    assert get_chip("A100") == get_chip("a100-80gb") and get_chip(" H200 ") == get_chip("h200")
