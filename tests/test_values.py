"""Values, not identities: an answer is kept by what it depends on, never by which object asked.

- The model graph keeps what is worked out from it (its walk, its tensors, a stage's part, the
  kernel's memo) and drops it with every edit: an lm_head added to a loaded graph is priced at once.
- No module holds state that changes while the tool runs: every module-level mutable container is
  the same before and after pricing and planning, and no module keeps a memo (functools cache):
  what is kept lives on the object it is worked out from, keyed by values.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import is_dataclass, replace
from pathlib import Path

import pytest

import planner
import pricing
from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Capacity, Deployment, Kernel, Startup
from pricing.registry import Registry, shipped

LLAMA_8B_WEIGHTS = 16_094_076_928  # Llama-3.1-8B at bf16, tp 1 (the spec's worked figure)
VOCAB, HIDDEN = 128_256, 4_096  # meta-llama/Llama-3.1-8B config.json


def _head(graph):
    return next(t for _, d in graph.g.nodes(data=True) if d["kind"] == "lm_head" for t in d["tensors"])


def test_an_lm_head_added_to_a_loaded_graph_is_priced_without_any_reset():
    graph, chip = load_model("llama-3.1-8b"), get_chip("h200")
    assert Kernel.of(graph, Deployment(), chip).weight_bytes().weights == LLAMA_8B_WEIGHTS
    head = _head(graph)
    assert (head.rows, head.cols) == (VOCAB, HIDDEN)
    graph.add("lm_head.extra", "lm_head", tensors=[replace(head, name="lm_head.extra")])
    more = LLAMA_8B_WEIGHTS + VOCAB * HIDDEN * 2  # one more bf16 vocab × hidden matrix (128,256 % 64 == 0)
    assert more == 17_144_750_080
    assert Kernel.of(graph, Deployment(), chip).weight_bytes().weights == more
    assert Kernel.of(load_model("llama-3.1-8b"), Deployment(), chip).weight_bytes().weights == LLAMA_8B_WEIGHTS


def test_a_pipeline_stage_sees_an_edit_of_its_model():
    """A node added to the model is on the stage that holds it (the LM head: the last, pipeline.holds)."""
    graph, chip, pp2 = load_model("llama-3.1-8b"), get_chip("h200"), Deployment(pipeline_parallel_size=2)
    assert "lm_head.extra" not in Kernel.of(graph, pp2, chip, stage=1).graph.g
    before = Kernel.of(graph, pp2, chip, stage=1).weight_bytes().weights
    graph.add("lm_head.extra", "lm_head", tensors=[replace(_head(graph), name="lm_head.extra")])
    last = Kernel.of(graph, pp2, chip, stage=1)
    assert "lm_head.extra" in last.graph.g
    assert last.weight_bytes().weights - before == VOCAB * HIDDEN * 2


def test_a_graph_is_never_a_key():
    with pytest.raises(TypeError):
        hash(load_model("llama-3.1-8b"))
    assert load_model("llama-3.1-8b") is not load_model("llama-3.1-8b")  # each caller edits its own


# -- no module-level state ------------------------------------------------------------------------

def _modules():
    out = []
    for package in (pricing, planner):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            out.append(importlib.import_module(info.name))
    return [pricing, planner, *out]


MUTABLE = (dict, list, set, bytearray)


def _state(modules) -> dict:
    """Every module-level mutable container, by module and name: its identity and its content (not
    the interpreter's builtins every module refers to, which a library imported on first use, such as
    OR-Tools' numpy, may add to)."""
    return {(m.__name__, name): (id(value), repr(value)) for m in modules for name, value in vars(m).items()
            if isinstance(value, MUTABLE) and name != "__builtins__"}


def _work() -> None:
    from click.testing import CliRunner

    from planner.cli import cli

    overlay_file = Path(__file__).resolve().parents[1] / "pricing/registry/overlays/spec-reference.yaml"
    for args in (["--model", "llama-3.1-8b", "--chip", "h200", "--concurrency", "16", "--context-length", "8192",
                  "--json"],
                 ["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--registry", str(overlay_file), "--json"]):
        done = CliRunner().invoke(cli, args)
        assert done.exit_code == 0, done.output
    reg = shipped()
    overlay = reg.with_overrides({"cost_model_memory.kv_pool_margin": 0.02})
    for model, flags in (("llama-3.1-8b", {}), ("llama-3.1-8b", {"pipeline_parallel_size": 2}),
                         ("dsv4.1-flash", {"kv_cache_dtype": "fp8"}), ("qwen3-next-80b-a3b", {}),
                         ("gemma-3-27b", {"tensor_parallel_size": 2})):
        for registry in (reg, overlay):
            k = Kernel.of(load_model(model), Deployment(**flags), get_chip("h200"), registry)
            Capacity(k).requests_held(0.01)
            k.provenance()
            Startup(k).refusal()


def test_pricing_changes_no_module_level_state():
    modules = _modules()
    before = _state(modules)
    _work()
    after = _state(modules)
    changed = sorted(f"{m}.{n}" for m, n in before if before[(m, n)] != after.get((m, n)))
    assert changed == []
    from planner.candidates.store import TableStore
    assert TableStore._made == {}  # a command's tables end with it (its overlay is never set aside: no ambient state)
    assert shipped() is shipped()


def _memos(modules):
    """Every functools cache of a module (a function wrapped by cache or lru_cache), and every
    functools cache on a class's method, by name."""
    for m in modules:
        for name, f in vars(m).items():
            if getattr(f, "__module__", None) != m.__name__:
                continue
            if callable(f) and hasattr(f, "cache_info"):
                yield f"{m.__name__}.{name}"
            if isinstance(f, type):  # a cached method keeps its answers in the class, for every instance
                yield from (f"{m.__name__}.{name}.{k}" for k, v in vars(f).items()
                            if hasattr(getattr(v, "__func__", v), "cache_info"))


def _is_value(key) -> bool:
    if isinstance(key, (tuple, frozenset)):
        return all(_is_value(k) for k in key)
    return isinstance(key, (str, int, float, bool, type(None), Path, Registry)) or (
        is_dataclass(key) and key.__dataclass_params__.frozen and key.__dataclass_params__.eq)


def test_no_module_level_memo():
    """No module keeps answers in a functools cache: what is kept lives on the object it is worked
    out from, keyed by values (the model graph's `derived`, the kernel's `once`, a release's cached
    properties, the registry's `derived`: the shipped registry owns what is read from the package's
    own data files, the cards, the length histograms, the planner's defaults, the chips)."""
    assert list(_memos(_modules())) == []
    _work()
    assert shipped().derived(("chips.chip", "h200"), lambda: None) == get_chip("h200")  # kept on the registry
    assert all(_is_value(key) for key in shipped()._derived), "a registry keeps by values"


def test_the_identity_memos_are_gone():
    from pricing.graph import load_model as loader
    from pricing.kernel import kernel

    assert not hasattr(loader, "cache_info")
    assert not any(hasattr(kernel, n) for n in ("_MEMO", "_BY_IDENTITY", "clear_memo"))


# -- provenance records itself --------------------------------------------------------------------

def _cards() -> list[str]:
    from pricing.config import list_cards

    return sorted(c["name"] for c in list_cards())


@pytest.mark.parametrize("card", _cards())
def test_a_kernels_registry_reads_are_its_provenance(card, monkeypatch):
    """Every registry value read while a kernel is built and asked everything (on any registry,
    the global one included) is listed in its provenance, and the provenance lists nothing unread.
    The release's enumerations (names its flags accept, read once per process to validate a flag)
    shape no figure."""
    chip = get_chip("h200")
    graph = load_model(card)
    read: set[str] = set()
    lookup = Registry.__getitem__

    def spy(self, name):
        read.add(name)
        return lookup(self, name)

    monkeypatch.setattr(Registry, "__getitem__", spy)
    reg = Registry(shipped()._files)  # a registry of its own: nothing derived from it yet
    k = Kernel.of(graph, Deployment(pipeline_parallel_size=2 if card == "llama-3.1-8b" else 1), chip, reg)
    Capacity(k).requests_held(0.01)
    Startup(k).refusal()
    for stage in k.instance.ranks:
        stage.fixed_bytes()
        stage.pre_snapshot_bytes()
    listed = {p.name for p in k.provenance()}
    read = {n for n in read if ".enumerations." not in n}
    assert read - listed == set(), "read, not listed"
    registry_names = {n for n in listed if n in reg and not n.startswith(("chips.", "quantization.scheme."))}
    assert registry_names - read == set(), "listed, not read"
