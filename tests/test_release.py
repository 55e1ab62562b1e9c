"""The release as one unit, and memo keys derived from whole objects (issue 9 parts 2-3).

- `pricing.rules` (the rules packs) and `pricing.specs` (the cache spec classes) import nothing
  from the kernel: importing them in a fresh interpreter works and leaves pricing.kernel unloaded.
- `Kernel.of(..., release=...)` takes a Release; an unknown one is bad input.
- The kernel's memo cannot serve a stale answer: changing any Deployment field (every field the
  Deployment model has, new ones included) gives the answer a fresh computation gives.
"""

from __future__ import annotations

import re
import subprocess
import sys
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.cli import cli
from pricing.chips import get_chip
from pricing.errors import InputError
from pricing.graph import load_model
from pricing.kernel import Capacity, Deployment, Kernel, Startup
from pricing.kernel import kernel as kernel_module
from pricing.kernel.deployment import resolve_engine
from pricing.registry import shipped
from pricing.rules import RELEASES, Release, get
from pricing.rules.release import RulesPack


@pytest.mark.parametrize("module", ["pricing.rules", "pricing.specs", "pricing.rules.shared",
                                    *(f"pricing.rules.{r.namespace}" for r in RELEASES.values())])
def test_rules_and_specs_import_alone_and_not_the_kernel(module):
    code = f"import sys, {module}; assert 'pricing.kernel' not in sys.modules, sorted(sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_release_carries_its_pack_namespace_and_enumerations():
    r = get()
    assert isinstance(r, Release) and r.version == "0.33" and r.full_version == "0.33.0"
    assert get("vllm-0.33") is r and get("0.33.0") is r and list(RELEASES) == ["0.10", "0.11", "0.19", "0.21", "0.26",
                                                                          "0.33"]
    assert r.rules.RELEASE is r
    assert "fp8" in r.kv_cache_dtypes and "FULL_AND_PIECEWISE" in r.cudagraph_modes
    assert r.in_flight_batches(True) == 2 and r.in_flight_batches(False) == 1
    assert r.key("block_size") == "vllm_0_33.block_size"
    with pytest.raises(InputError, match="^vllm_version: unknown vLLM release"):
        get("0.34")


ROOT = Path(__file__).resolve().parents[1]
RELEASE_NAME = re.compile(r"vllm_\d+_\d+")


@pytest.mark.parametrize("release", list(RELEASES.values()), ids=str)
def test_a_pack_is_one_rules_module_and_one_registry_file(release):
    """The rules module provides what RulesPack lists and builds its own Release, whose namespace
    is the stem of its registry file and of the module itself."""
    module = release.rules
    assert isinstance(module, RulesPack) and module.RELEASE is release
    assert module.__name__ == f"pricing.rules.{release.namespace}"
    assert (ROOT / "pricing" / "registry" / f"{release.namespace}.yaml").is_file()


def test_no_code_outside_the_rules_packs_names_a_release():
    """Outside pricing/rules/ a release is read through Release (its facts, its rules), never by
    name; a release-named registry file belongs to exactly one pack."""
    rules = ROOT / "pricing" / "rules"
    named = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
             for folder in ("pricing", "planner") for path in sorted((ROOT / folder).rglob("*"))
             if path.suffix in (".py", ".yaml", ".md") and rules not in path.parents
             for i, line in enumerate(path.read_text().splitlines(), 1) if RELEASE_NAME.search(line)]
    assert named == []
    files = {p.stem for p in (ROOT / "pricing" / "registry").glob("*.yaml") if RELEASE_NAME.fullmatch(p.stem)}
    assert files == {r.namespace for r in RELEASES.values()}


def test_kernel_of_takes_the_release():
    model, chip = load_model("llama-3.1-8b"), get_chip("h200")
    k = Kernel.of(model, Deployment(), chip, release=get("0.33"))
    assert k.release is get() and k.engine.release is get()
    assert k.instance.kv_cache_tokens() == Kernel.of(model, Deployment(), chip).instance.kv_cache_tokens()
    with pytest.raises(InputError, match="unknown vLLM release"):
        Kernel.of(model, Deployment(), chip, release="0.1")


def test_vllm_version_option_shows_the_seam():
    ok = CliRunner().invoke(cli, ["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--vllm-version", "0.33",
                                  "--json"])
    assert ok.exit_code == 0, ok.output
    assert '"vllm_version": "0.33.0"' in ok.output
    from planner.cli import main

    assert main(["memory", "--model", "llama-3.1-8b", "--chip", "h200", "--vllm-version", "0.34"]) == 2


# -- the memo ----------------------------------------------------------------------------------------

def test_memo_keys_on_the_fields_a_result_read():
    """A result read field `a` only: changing `b` serves it; changing `a` recomputes."""

    @dataclass(frozen=True)
    class Probe:
        a: int
        b: int

        @property
        def twice_a(self) -> int:
            return 2 * self.a

    calls = []

    def compute(view, reg):
        calls.append(1)
        return view.twice_a

    memo, reg = kernel_module.Memo(), shipped()
    assert memo.get("probe", Probe(1, 1), reg, compute)[0] == 2
    assert memo.get("probe", Probe(1, 5), reg, compute)[0] == 2 and len(calls) == 1
    assert memo.get("probe", Probe(3, 1), reg, compute)[0] == 6 and len(calls) == 2


MODELS = ["llama-3.1-8b", "gpt-oss-20b", "qwen3-next-80b-a3b", "qwen3-30b-a3b"]
CHOICES = {  # values each field may take; a field not listed takes values from its type
    "tensor_parallel_size": [1, 2, 4],
    "pipeline_parallel_size": [1, 2],
    "pp_layer_partition": [None, (2, 2)],
    "data_parallel_size": [1, 2],
    "decode_context_parallel_size": [1, 2],
    "prefill_context_parallel_size": [1, 2],
    "gpu_memory_utilization": [None, 0.8, 0.9],
    "max_num_batched_tokens": [None, 2048, 8192],
    "max_num_seqs": [None, 64, 256],
    "max_model_len": [None, 4096, 32768],
    "kv_cache_dtype": ["auto", "fp8"],
    "block_size": [None, 16, 32],
    "num_speculative_tokens": [0, 1],
    "speculative_method": [None, "mtp"],
    "num_redundant_experts": [0, 16],
    "cudagraph_mode": [None, "PIECEWISE", "NONE"],
    "kv_cache_memory_bytes": [None, 20 << 30],
    "mamba_cache_mode": [None, "none", "align"],
    "mega_attention": [None, False],
    "kv_role": [None, "kv_producer", "kv_consumer"],
    "kv_buffer_device": ["cuda", "cpu"],
}


def _values(name: str) -> list:
    if name in CHOICES:
        return CHOICES[name]
    annotation = typing.get_type_hints(Deployment)[name]
    args = set(typing.get_args(annotation)) or {annotation}
    if bool in args:
        return [False, True]
    if int in args:
        return [1, 2]
    if float in args:
        return [None, 0.5] if type(None) in args else [0.5, 0.9]
    raise AssertionError(f"Deployment.{name}: give test_release.CHOICES values for this field")


FIELDS = sorted(Deployment.model_fields)


def answers(graph, deployment: Deployment):
    """Every figure the kernel answers for one deployment, and the step model's linear work (which
    the kernel memoises, Kernel.derived), or the refusal of its input."""
    from pricing.step.work import linear_groups

    try:
        k = Kernel.of(graph, deployment, get_chip("h200"))
        layout = k.layout()
        drafter = k.engine.speculative_method
        return (k.fixed_bytes(), k.pre_snapshot_bytes(), layout.bytes_per_block,
                [(g.vllm_class, g.layers, g.block_tokens, g.page_bytes) for g in layout.groups],
                k.blocks_per_request(), k.instance.num_blocks(), k.instance.kv_cache_tokens(),
                Capacity(k).requests_held(),
                k.sequence_fixed_bytes(), k.sequence_admission_bytes(), k.sequence_variable_bytes(4096),
                Startup(k).message,
                linear_groups(k), linear_groups(k, drafter) if drafter else None, k.connector())
    except InputError as err:
        return str(err)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(MODELS), st.sampled_from(FIELDS), st.data())
def test_changing_any_deployment_field_is_never_served_stale(model, field, data):
    value = data.draw(st.sampled_from(_values(field)))
    base = Deployment(max_model_len=32768)
    graph = load_model(model)
    answers(graph, base)  # warm the graph's memo with the base deployment
    try:
        changed = base.model_copy(update={field: value})
        changed = Deployment(**changed.model_dump())  # validated like a user's flags
    except ValueError:
        return
    served = answers(graph, changed)
    assert served == answers(load_model(model), changed), f"{field}={value!r} was served stale"  # a cold memo


def test_every_deployment_field_has_test_values():
    for name in FIELDS:
        assert _values(name), name


def test_scenario_services_name_their_release(tmp_path):
    import yaml

    from planner.scenario import load_scenario

    data = {"services": [{"name": "chat", "model": "llama-3.1-8b", "concurrency": 8, "context_length": 8192,
                          "chips": ["h200"], "vllm_version": "0.33"}]}
    (tmp_path / "ok.yaml").write_text(yaml.safe_dump(data))
    scenario = load_scenario(tmp_path / "ok.yaml")
    assert scenario.service_spec(scenario.services[0]).vllm_version == "0.33"
    data["services"][0]["vllm_version"] = "0.34"
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match=r"services\.chat\.vllm_version: unknown vLLM release '0.34'"):
        load_scenario(tmp_path / "bad.yaml")


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MODELS), st.data())
def test_an_engine_round_trips_through_its_flags(model, data):
    """Engine.as_deployment() pins every resolved setting: resolving it again gives the same
    engine, whatever the flags (the start-up estimates re-plan a deployment through it, so a field
    it left out would silently fall back to its default)."""
    flags = {name: data.draw(st.sampled_from(_values(name)), label=name) for name in FIELDS}
    try:
        d = Deployment(**flags)
        engine = Kernel.of(load_model(model), d, get_chip("h200")).engine
    except (InputError, ValueError):
        return
    assert resolve_engine(engine.as_deployment(), load_model(model), get_chip("h200"), release=engine.release) == engine
