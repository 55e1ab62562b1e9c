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
from planner.defaults import load
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


# Reads that once took the shipped registry on a command's path (issue 40's merge review): each
# now takes the command's overlay, or refuses an overlay of a value its reader cannot take.

OWN_WORDS = "an overlay's own words"
UNSOURCED = {"chip_rates": {"unsourced": {"a10g": {"value": ["bf16_flops"], "source": "test", "how": OWN_WORDS}}}}


@pytest.mark.parametrize("name", [
    "quantization.vision_mlp_alignment",  # pricing/graph/vision.py: read while the graph is built
    "quantization.vision_mlp_always_quantized",
    "quantization.methods.fp8",  # pricing/config/methods.py, under a refused table
    "kv_transfer.nixl.connector",  # planner/app/disagg_launch.py kv_transfer_config
    "kv_transfer.nixl.side_channel_port",  # planner/app/disagg_launch.py side_channel_base
    "vllm_0_33.enumerations.kv_cache_dtypes",  # pricing/rules/release.py enumeration
    "input_limits.file_bytes",  # bounds the reading of the overlay itself
])
def test_an_overlay_of_a_value_read_as_shipped_is_refused_naming_its_key(tmp_path, name):
    """An overlay of a value whose reader takes no registry is refused in one line naming the key
    (it used to be accepted and silently left unread)."""
    from pricing.errors import InputError
    from pricing.registry import read_overlay

    stem, *path = name.split(".")
    leaf = {"value": shipped().value(name), "source": "test", "how": "test"}
    for part in reversed(path):
        leaf = {part: leaf}
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(__import__("yaml").safe_dump({stem: leaf}))
    with pytest.raises(InputError) as err:
        read_overlay(overlay)
    assert err.value.field.endswith(f": {name}") and "read as the package ships it" in err.value.problem


def test_an_overlay_of_a_value_read_as_shipped_is_one_line_and_exit_2(tmp_path, capsys):
    from planner.cli import main

    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("kv_transfer:\n  nixl:\n    side_channel_port: {value: 6000, source: test, how: test}\n")
    assert main(["memory", "--registry", str(overlay), "--model", "llama-3.1-8b", "--chip", "h200"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"plan: error: {overlay}:3: kv_transfer.nixl.side_channel_port: is read as the package ships it, never "
        "from an overlay (kv_transfer.nixl.side_channel_port: registry input_limits.read_as_shipped) "
        "(remove it from the overlay)"]


def test_an_overlay_of_why_a_chip_has_no_rates_reaches_the_speed_line():
    from planner.report.render import speed_lines

    fields = {"model": "llama-3.1-8b", "chip": "a10g", "concurrency": 4, "context_length": 4096}
    plain, laid = planner.plan(**fields), planner.plan(**fields, registry=overlay_from(UNSOURCED))
    assert plain.best.step is None and laid.best.step is None
    assert speed_lines(laid.best) == [f"speed: unknown (a10g: no vendor-sourced bf16_flops; {OWN_WORDS})"]
    assert OWN_WORDS not in speed_lines(plain.best)[0]


def test_an_overlay_giving_a_chip_rates_reaches_plan_memory_speed():
    """`plan memory`'s speed figures ask the command's registry whether the chip has rates: an
    overlay giving the A10G the A10's (the same 24 GB at 600 GB/s) prices its step."""
    a10 = {n.rsplit(".", 1)[1]: {"value": shipped().value(n), "source": "test", "how": "the A10's"}
           for n in shipped().names("chip_rates.chip_rates.a10.")}
    overlay = overlay_from({"chip_rates": {"chip_rates": {"a10g": a10}}})
    fields = {"model": "qwen2.5-7b", "chip": "a10g", "max_model_len": 4096, "isl": 1000, "osl": 100}
    assert planner.memory(**fields).step is None
    assert planner.memory(**fields, registry=overlay).step["requests_per_second"] > 0


def test_a_scenario_file_is_checked_against_the_command_overlay(tmp_path):
    """The scenario's models are read against the command's registry when the file is checked:
    config field ranges narrowed by an overlay refuse a model there, in the file's own words."""
    from planner.scenario import ScenarioErrors

    path = tmp_path / "s.yaml"
    path.write_text("services:\n  - {name: chat, model: llama-3.1-8b, chips: [h100], concurrency: 8,\n"
                    "     context_length: 4096}\n")
    layers = {"input_limits": {"config_fields": {"num_hidden_layers": {"value": [1, 16], "source": "test",
                                                                       "how": "test"}}}}
    from planner.app.api import scenario_of

    assert scenario_of(path).services[0].model == "llama-3.1-8b"
    with pytest.raises(ScenarioErrors) as err:
        planner.review(path, registry=overlay_from(layers))
    line = err.value.lines[0]
    assert line.startswith(f"{path}:2: services.chat.model: ") and "num_hidden_layers: 32 is outside 1 … 16" in line


def test_an_overlay_of_the_default_max_num_seqs_reaches_what_binds():
    """The binds phrase compares a rank's requests with vLLM's default max_num_seqs as the plan's
    registry states it: an overlay capping H100-class chips at 32 requests binds the pool there."""
    rows = [{"min_memory_gib": 160, "max_num_batched_tokens": 16384, "max_num_seqs": 1024},
            {"min_memory_gib": 70, "max_num_batched_tokens": 8192, "max_num_seqs": 32},
            {"min_memory_gib": 0, "max_num_batched_tokens": 2048, "max_num_seqs": 256}]
    capped = overlay_from({"vllm_0_33": {"scheduler_defaults": {"value": rows, "source": "test", "how": "test"}}})
    laid = planner.plan(model="llama-3.1-8b", chip="h100", concurrency=256, context_length=4096, registry=capped)
    assert laid.best.max_num_seqs == 32
    assert laid.best.binds == "max_num_seqs: vLLM's default cap of 32 requests per rank"


def test_the_default_max_num_seqs_that_binds_is_the_services_release(tmp_path):
    """The binds phrase reads vLLM's default max_num_seqs from the service's release, not 0.33's:
    an overlay of vllm_0_19.yaml scheduler_defaults whose 70 GiB row (an H100's 80 GiB, sm90, meets
    it) caps requests at 32 binds a 0.19 plan there, while vllm_0_33.yaml keeps that row's 1024
    (its 160 GiB row an H100 does not meet), so read under 0.33 the cap would bind nowhere."""
    rows = [{"min_memory_gib": 70, "exclude_generations": ["sm80"], "max_num_batched_tokens": 8192, "max_num_seqs": 32},
            {"min_memory_gib": 0, "max_num_batched_tokens": 2048, "max_num_seqs": 256}]
    capped = overlay_from({"vllm_0_19": {"scheduler_defaults": {"value": rows, "source": "test", "how": "test"}}})
    laid = planner.plan(model="llama-3.1-8b", chip="h100", concurrency=256, context_length=4096, vllm_version="0.19",
                        registry=capped)
    assert laid.best.max_num_seqs == 32
    assert laid.best.binds == "max_num_seqs: vLLM's default cap of 32 requests per rank"
    path = tmp_path / "s.yaml"  # a scenario's service (the fleet's binds) reads its own release too
    path.write_text("services:\n  - {name: chat, model: llama-3.1-8b, chips: [h100], concurrency: 256,\n"
                    "     context_length: 4096, vllm_version: '0.19'}\n")
    (pool,) = planner.review(path, registry=capped).base.services
    assert (pool.max_num_seqs, pool.binds) == (32, "max_num_seqs: vLLM's default cap of 32 requests per rank")


def test_an_overlay_of_the_link_efficiency_reaches_the_kv_hand_over():
    """P/D prices the KV hand-over at the link's rate × kv_transfer.link_efficiency as the service's
    registry states it: 125 blocks of 2 MiB over an H100 node's NVLink, 450 GB/s × 0.425, take
    262,144,000 / 191.25e9 = 1.371 ms (twice the shipped 0.85's 0.685 ms)."""
    from planner.app.disagg_plan import plan_disagg
    from planner.request import WorkloadSpec

    half = overlay_from({"kv_transfer": {"link_efficiency": {"value": 0.425, "source": "test", "how": "test"}}})
    service = ServiceSpec(model="llama-3.1-8b", concurrency=1, context_length=8192, ttft_ms=1500.0, tpot_ms=30.0,
                          workload=WorkloadSpec(isl=2000, osl=200, requests_per_second=5.0), serving="disagg",
                          tp=(1, 2))
    plan = plan_disagg(ResolvedService.of(service, PoolLimits(chips=("h100",)), registry=half))
    assert plan.handover.link == "NVLink (one 8-GPU node)"
    assert plan.handover.transfer_ms == pytest.approx(262_144_000 / (450e9 * 0.425) * 1000, abs=1e-3)


def test_an_overlay_of_a_vision_tower_class_default_reaches_its_weights():
    """A vision_config's omitted fields take its config class's defaults as the command's registry
    states them: gemma-3-27b's omits num_channels (SiglipVisionConfig: 3); at 4 the patch embedding
    (hidden 1152 × channels × 14 × 14, bf16, on every rank) grows by 1152 × 196 × 2 = 451,584 bytes."""
    tower = dict(shipped().value("config_defaults.siglip_vision_model"), num_channels=4)
    four = overlay_from({"config_defaults": {"siglip_vision_model": {"value": tower, "source": "test", "how": "test"}}})
    plain = planner.memory(model="gemma-3-27b", chip="h100", tensor_parallel_size=2)
    laid = planner.memory(model="gemma-3-27b", chip="h100", tensor_parallel_size=2, registry=four)
    assert laid.fixed.weights - plain.fixed.weights == 1152 * 14 * 14 * 2 == 451_584


def test_no_module_keeps_a_context_variable():
    """The candidate tables a command shares and the listener told its stages travel as its
    TableStore (handed down with the resolved services), never found in a context variable."""
    files = [p for folder in ("pricing", "planner") for p in (ROOT / folder).rglob("*.py")]
    assert len(files) > 100
    holding = sorted(str(p.relative_to(ROOT)) for p in files
                     if any(isinstance(n, (ast.Import, ast.ImportFrom)) and "contextvars" in
                            ([a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""])
                            for n in ast.walk(ast.parse(p.read_text(), str(p)))))
    assert holding == []


def test_the_stages_of_a_plan_are_told_to_its_stores_listener():
    """A plan's search names its stages to the listener its store carries (planner/progress.py):
    a plan at a concurrency sweeps the chip's shapes, then solves its pool and each alternative
    asked (2, so 3 CP-SAT stages, the chip offering more shapes than that); a store without a
    listener is told nothing, and the listener goes with the block that set it."""
    from planner.app.api import table_store
    from planner.progress import listening

    told: list[str] = []
    with table_store() as tables:
        with listening(tables, told.append):
            planner.plan(model="llama-3.1-8b", chip="h100", concurrency=32, context_length=8192, alternatives=2,
                         tables=tables)
        assert tables.listener is None
    assert told[0] == "sweeping instance shapes on h100"
    solves = [t for t in told if "CP-SAT: pool" in t]
    assert [t.rsplit("CP-SAT: ", 1)[1] for t in solves] == ["pool 1 of 3", "pool 2 of 3", "pool 3 of 3"]
    with table_store() as quiet:  # no listener: the same plan, nothing told
        assert planner.plan(model="llama-3.1-8b", chip="h100", concurrency=32, context_length=8192,
                            tables=quiet).feasible


def test_a_service_sent_to_a_worker_carries_its_commands_store():
    """Pickled to a worker forked from the command's process, a service's store is the command's
    (found by its token, as the fork inherited it); a store no process here made (a Ray worker's
    message) is a new, empty one, the same for every service of one message."""
    from planner.candidates.store import TableStore

    spec = ServiceSpec(model="llama-3.1-8b", concurrency=8, context_length=4096)
    with TableStore(load()) as tables:
        service = ResolvedService.of(spec, PoolLimits(chips=("h100",)), tables=tables)
        assert tables.get(("model", "llama-3.1-8b", None, shipped())) is service.graph
        back = pickle.loads(pickle.dumps(service))
        assert back.tables is tables and back.graph is service.graph  # the command's graph, not a new one
        token = tables.token
    assert token not in TableStore._made  # closed with the command
    other = service.asking(spec.model_copy(update={"concurrency": 16}))
    a, b = pickle.loads(pickle.dumps([service, other]))
    assert a.tables is b.tables and a.tables is not tables and a.tables.token not in TableStore._made
    assert a.graph is b.graph is not service.graph  # one graph per message, read in the worker's own store


def _tables_held(request) -> tuple[bool, int]:
    """In a pool worker: whether the service's store holds the table the parent built, and its size."""
    from planner.candidates.table import built_table, sweep_key

    return built_table(request[0].tables, sweep_key(*request)) is not None, len(request[0].tables.items)


def test_a_forked_worker_holds_the_tables_its_parent_built():
    """A pool forked after the tables are built (planner/app/executors.py `_prebuilt`) reads them from
    the store its services carry: the parent's, as the fork inherited it, not an empty one."""
    from planner.candidates.parallel import fork_pool
    from planner.candidates.store import TableStore
    from planner.candidates.table import candidate_table, priced_chip

    limits = PoolLimits(chips=("h100",))
    with TableStore(load()) as tables:
        service = ResolvedService.of(ServiceSpec(model="llama-3.1-8b", concurrency=8, context_length=4096), limits,
                                     tables=tables)
        request = (service, priced_chip("h100", limits), limits)
        candidate_table(*request)
        with fork_pool(1) as pool:
            assert pool.map(_tables_held, [request]) == [(True, len(tables.items))] == [(True, 2)]


def test_every_quantization_value_read_while_the_graph_is_built_is_read_as_shipped():
    """pricing/config reads registry/quantization.yaml through `_registry_file()`, which takes no
    registry: every key it reads there is in input_limits.read_as_shipped, so an overlay of it is
    refused rather than silently left unread (fp8_block_what_if_unconverted was missing)."""
    import re

    folder = Path(__file__).resolve().parents[1] / "pricing"
    read = {f"quantization.{key}" for path in folder.rglob("*.py")
            for key in re.findall(r'_registry_file\(\)\["(\w+)"\]', path.read_text())}
    assert read and read <= set(shipped().value("input_limits.read_as_shipped")), read
