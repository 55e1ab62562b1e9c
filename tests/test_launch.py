"""Launch commands right for vLLM 0.33: every flag printed is one of its parser's
(tests/vllm_flags.py, from tests/fixtures/vllm-0.33/serve_flags.json), instances placed on nodes
get their own GPUs and ports, multi-node launches use vLLM's own flags, and the model is named as
the user gave it."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from planner.app.fleet import plan_scenario
from planner.app.plan import plan
from planner.app.serve import HEAD, WEIGHTS, Launch, across_nodes, launches, served_model
from planner.cli import main
from planner.defaults import load
from planner.request import PlanRequest, PoolLimits, ServiceSpec
from planner.scenario import load_scenario
from planner.search.placement import Slot
from pricing.kernel import Deployment
from tests.vllm_flags import command_problems, parser, problems

ROOT = Path(__file__).resolve().parents[1]


def request(model, chip, concurrency, context, gpus_per_node=None, **service):
    return PlanRequest(service=ServiceSpec(model=model, concurrency=concurrency, context_length=context, **service),
                       limits=PoolLimits(chips=(chip,), gpus_per_node=gpus_per_node))


@pytest.fixture(scope="module")
def replicas_on_a_node():
    return plan(request("llama-3.1-8b", "h100", 400, 8192)).best


@pytest.fixture(scope="module")
def pipeline_across_nodes():
    return plan(request("llama-3.1-405b", "h100", 16, 32768)).best


@pytest.fixture(scope="module")
def data_parallel_across_nodes():
    return plan(request("qwen3-235b-a22b", "h200", 64, None, tp=(4,), dp=(4,), pp=(1,), gpus_per_node=8)).best


@pytest.fixture(scope="module")
def fleets():
    return [plan_scenario(load_scenario(ROOT / "scenarios" / name))
            for name in ("mixed-fleet-shared-inventory.yaml", "speculative-decoding-on-off.yaml")]


def every_command(pools) -> list[str]:
    return [c.command for p in pools for i in p.instances for c in [*i.commands, *i.ray]
            if "vllm serve" in c.command]


def test_the_flag_list_is_vllm_033s_own():
    data = parser()
    assert data["release"] == "0.33.0" and "make_arg_parser" in data["source"]
    flags = data["flags"]
    # the serve subcommand's own flags, the frontend's and the engine's, spelled as vLLM spells them
    assert not flags["--headless"]["takes_value"] and flags["--port"]["type"] == "int"
    assert flags["--data-parallel-rpc-port"]["type"] == "int" and "--nnodes" in flags
    assert "VLLM_PP_LAYER_PARTITION" in data["environment"]["names"]


def test_the_check_fails_on_a_flag_vllm_does_not_have():
    """The checker itself: flags vLLM 0.33's parser lacks, a value where none is taken, a bad type."""
    assert problems(["m", "--tensor-parallel-size", "2"]) == []
    assert problems(["m", "--data-parallel-master-addr", "x"]) == [
        "--data-parallel-master-addr is not a flag of vLLM 0.33.0's `vllm serve`"]
    assert problems(["m", "--headless=1"]) == ["--headless takes no value"]
    assert problems(["m", "--port", "eighty"]) == ["--port 'eighty' is not an int"]
    assert problems(["m", "--quantization", "nvfp4"]) == ["--quantization 'nvfp4' is not one of vLLM's choices"]
    assert command_problems("CUDA_VISIBLE_DEVICES=0 vllm serve m --port 8000") == []
    assert command_problems("NOT_A_VLLM_VAR=1 vllm serve m") == [
        "environment variable NOT_A_VLLM_VAR is not one vllm/envs.py reads"]


def test_every_printed_flag_is_in_vllm_033s_parser(replicas_on_a_node, pipeline_across_nodes,
                                                   data_parallel_across_nodes, fleets):
    pools = [replicas_on_a_node, pipeline_across_nodes, data_parallel_across_nodes,
             *[s for f in fleets for s in f.services]]
    commands = every_command(pools)
    assert len(commands) > 10
    assert any("--speculative-config" in c for c in commands) and any("--kv-cache-dtype" in c for c in commands)
    assert any("--distributed-executor-backend ray" in c for c in commands)
    assert any("--data-parallel-backend ray" in c for c in commands)
    bad = {c: command_problems(c) for c in commands if command_problems(c)}
    assert bad == {}


def test_plan_memory_takes_vllm_flags_as_vllm_spells_them():
    """`plan memory`'s flags are vLLM's, except the few it names as its own (short aliases, what vLLM
    takes inside a JSON config: --speculative-config, --eplb-config, --compilation-config)."""
    import click

    from planner.commands.memory import vllm_flags

    own = {"--pp-layer-partition", "--tp", "--pp", "--dp", "--dcp", "--pcp", "--num-speculative-tokens",
           "--speculative-method", "--cudagraph-mode", "--mega-attention", "--no-mega-attention",
           "--num-redundant-experts", "--no-enable-prefix-caching"}
    command = vllm_flags(click.command()(lambda **kw: None))
    spellings = {s for p in command.params for s in [*p.opts, *p.secondary_opts] if s.startswith("--")}
    flags = parser()["flags"]
    assert {s for s in spellings if s not in flags} <= own


def test_several_replicas_on_one_node_get_their_own_gpus_and_ports(replicas_on_a_node):
    """Done when: llama-3.1-8b at 400 × 8k on 8-GPU H100 nodes: disjoint CUDA_VISIBLE_DEVICES and
    distinct ports for the replicas sharing a node."""
    best = replicas_on_a_node
    assert best.replicas >= 2 and len(best.instances) == best.replicas
    by_node: dict[str, list] = {}
    for inst in best.instances:
        (slot,) = inst.slots
        (command,) = inst.commands
        words = shlex.split(command.command)
        assert words[0] == f"CUDA_VISIBLE_DEVICES={','.join(map(str, slot.gpus))}"
        assert words[words.index("--port") + 1] == str(slot.port) and "--host" in words
        by_node.setdefault(slot.node, []).append(slot)
    shared = [slots for slots in by_node.values() if len(slots) > 1]
    assert shared
    for slots in shared:
        gpus = [g for s in slots for g in s.gpus]
        assert len(gpus) == len(set(gpus)) and max(gpus) < 8
        assert len({s.port for s in slots}) == len(slots)


def test_pipeline_across_nodes_uses_nnodes_and_headless(pipeline_across_nodes):
    best = pipeline_across_nodes
    (inst,) = best.instances
    assert [len(s.gpus) for s in inst.slots] == [8, 8] and len({s.node for s in inst.slots}) == 2
    head, worker = (c.command for c in inst.commands)
    assert "--nnodes 2 --node-rank 0 --master-addr $HEAD_IP" in head and "--headless" not in head
    assert "--port 8000" in head
    assert "--nnodes 2 --node-rank 1 --master-addr $HEAD_IP --headless" in worker and "--port" not in worker


def test_data_parallel_across_nodes_uses_vllms_data_parallel_launch(data_parallel_across_nodes):
    """vLLM's multi-node data parallel: --data-parallel-address/-rpc-port on every node, the others
    --headless --data-parallel-start-rank; not the --nnodes launch. The text says what spans nodes."""
    best = data_parallel_across_nodes
    assert (best.tensor_parallel_size, best.data_parallel_size, best.nodes_per_replica) == (4, 4, 2)
    head, worker = (shlex.split(c.command) for c in best.instances[0].commands)
    for words in (head, worker):
        assert "--nnodes" not in words and "--master-addr" not in words
        assert words[words.index("--data-parallel-size-local") + 1] == "2"
        assert words[words.index("--data-parallel-address") + 1] == "$HEAD_IP"
        assert words[words.index("--data-parallel-rpc-port") + 1] == "29550"
    assert "--headless" not in head and "--data-parallel-start-rank" not in head
    assert "--headless" in worker and worker[worker.index("--data-parallel-start-rank") + 1] == "2"
    d = Deployment(tensor_parallel_size=4, data_parallel_size=4)
    assert "pipeline" not in across_nodes(d, 8) and "data-parallel ranks across nodes" in across_nodes(d, 8)


def test_the_plan_says_pipeline_stages_only_when_there_are_some(capsys):
    assert main(["--model", "qwen3-235b-a22b", "--chip", "h200", "--concurrency", "64", "--tp", "4", "--dp", "4",
                 "--pp", "1", "--gpus-per-node", "8"]) == 0
    out = capsys.readouterr().out
    assert "data-parallel ranks across nodes" in out and "pipeline stages across nodes" not in out
    assert out.count("or with Ray") == 1 and out.count("ray start --head") == 1  # the Ray form once


def test_ray_is_one_text(capsys):
    assert main(["--model", "llama-3.1-405b", "--chip", "h100", "--concurrency", "16", "--context-length",
                 "32768"]) == 0
    out = capsys.readouterr().out
    assert out.count("ray start --head") == 1 and out.count("--distributed-executor-backend ray") == 1
    assert "pipeline stages across nodes" in out


def test_kimi_k2_gets_trust_remote_code():
    """Kimi K2 ships its tokenizer as code (registry vllm_0_33.remote_code_model_types)."""
    model = served_model("kimi-k2")
    assert model.name == "moonshotai/Kimi-K2-Instruct" and model.trust_remote_code
    d = Deployment(tensor_parallel_size=8, pipeline_parallel_size=2, gpu_memory_utilization=0.9,
                   max_num_batched_tokens=8192, max_num_seqs=64, max_model_len=32768)
    slots = [Slot(node="h200-0", gpus=list(range(8)), port=8000), Slot(node="h200-1", gpus=list(range(8)))]
    assert all("--trust-remote-code" in x.args for x in launches(model, d, 8, slots, reads=load()))
    assert not served_model("dsv3").trust_remote_code  # DeepseekV3's config and tokenizer are transformers'


def test_the_model_is_named_as_the_user_gave_it(tmp_path, shared_models):
    assert served_model("llama-3.1-8b").name == "meta-llama/Meta-Llama-3.1-8B"  # the card's HF id
    folder = tmp_path / "my-qwen"
    folder.mkdir()
    config = (shared_models / "Qwen--Qwen3-32B-FP8.json").read_text()
    (folder / "config.json").write_text(config)
    assert served_model(str(folder)).name == str(folder)
    # a bare config file: the weights' location is needed, never _name_or_path or the file's name
    bare = tmp_path / "Qwen--Qwen3-32B-FP8.json"
    bare.write_text(config)
    for path in (bare, folder / "config.json"):
        assert served_model(str(path)).name == WEIGHTS
    (folder / "model.safetensors.index.json").write_text("{}")
    assert served_model(str(folder / "config.json")).name == str(folder)


def test_a_bare_config_says_the_weights_are_needed(tmp_path, shared_models, capsys):
    bare = tmp_path / "Qwen--Qwen3-32B-FP8.json"
    bare.write_text((shared_models / "Qwen--Qwen3-32B-FP8.json").read_text())
    assert main(["--model", str(bare), "--chip", "h100", "--concurrency", "4", "--context-length", "8192"]) == 0
    out = capsys.readouterr().out
    assert "vllm serve $MODEL_WEIGHTS " in out and "Qwen--Qwen3-32B-FP8 --" not in out
    assert "MODEL_WEIGHTS" in out.split("vllm serve")[0]  # said before the commands
    assert "Qwen/Qwen3-32B-FP8" not in [w for line in out.splitlines() if "vllm serve" in line for w in line.split()]


@pytest.mark.parametrize("method", ["nvfp4", "mxfp4"])
def test_a_prequantized_format_on_a_bf16_checkpoint_is_refused(method, capsys):
    code = main(["--model", "llama-3.1-8b" if method == "nvfp4" else "qwen3-30b-a3b", "--chip", "b200",
                 "--concurrency", "8", "--context-length", "8192", "--quantization", method])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"--quantization: {method}" in err and "quantizes online only with fp8, bitsandbytes" in err


def test_online_quantization_and_the_checkpoints_own_method(tmp_path, shared_models):
    assert served_model("llama-3.1-8b", "fp8").quantization == "fp8"  # online, as vLLM does
    assert served_model("llama-3.1-8b", "bitsandbytes").quantization == "bitsandbytes"
    folder = tmp_path / "nvfp4"
    folder.mkdir()
    (folder / "config.json").write_text((shared_models / "nvidia--Qwen3-235B-A22B-NVFP4.json").read_text())
    (folder / "hf_quant_config.json").write_text(
        (shared_models / "nvidia--Qwen3-235B-A22B-NVFP4.hf_quant_config.json").read_text())
    assert served_model(str(folder), "modelopt_fp4").quantization == "modelopt_fp4"  # vLLM takes it so
    assert served_model(str(folder), "nvfp4").quantization is None  # the checkpoint's own: no flag needed


def test_a_launch_line_keeps_the_placeholders_for_the_shell():
    line = Launch("n", ("vllm", "serve", WEIGHTS, "--master-addr", HEAD, "--speculative-config",
                        json.dumps({"method": "mtp"})), (("CUDA_VISIBLE_DEVICES", "0,1"),)).text
    assert line.startswith("CUDA_VISIBLE_DEVICES=0,1 vllm serve $MODEL_WEIGHTS --master-addr $HEAD_IP ")
    assert shlex.split(line)[-1] == '{"method": "mtp"}'


def test_placement_never_splits_a_tp_group_or_shares_a_gpu():
    """Bin-packing properties on 8-GPU nodes of two 4-GPU NVLink domains (a bridged or tray layout):
    every instance's GPUs are its own, each tp group within one domain, small instances on one node,
    large ones on whole nodes, ports distinct per node, spare nodes untouched."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from planner.search.placement import ChipNodes, PoolShape, place

    pool = st.tuples(st.sampled_from([(1, 1), (2, 2), (4, 4), (2, 4), (1, 8), (4, 8), (8, 16), (4, 16)]),
                     st.integers(1, 4))

    @settings(max_examples=60, deadline=None)
    @given(st.lists(pool, min_size=1, max_size=4), st.integers(0, 2))
    def check(pools, spare):
        shapes = [PoolShape(f"p{i}", "x", n, gpus, tp) for i, ((tp, gpus), n) in enumerate(pools)]
        laid = place(shapes, {"x": ChipNodes("x", 8, 4)}, spare, load())
        held: dict[tuple[str, int], str] = {}
        ports: set[tuple[str, int]] = set()
        for inst in laid.instances:
            shape = next(s for s in shapes if s.pool == inst.pool)
            assert sum(len(s.gpus) for s in inst.slots) == shape.gpus_per_replica
            if shape.gpus_per_replica <= 8:
                assert len(inst.slots) == 1
            else:
                assert all(len(s.gpus) == 8 for s in inst.slots)
            gpus = inst.slots[0].gpus
            if len(inst.slots) == 1 and shape.tensor_parallel_size <= 4:
                domains = [g // 4 for g in gpus]  # each tp group (consecutive in the list) in one domain
                tp = shape.tensor_parallel_size
                assert all(len(set(domains[k:k + tp])) == 1 for k in range(0, len(gpus), tp))
            for s in inst.slots:
                for g in s.gpus:
                    assert (s.node, g) not in held
                    held[s.node, g] = inst.pool
                if s.port is not None:
                    assert (s.node, s.port) not in ports
                    ports.add((s.node, s.port))
        spares = [n for n in laid.nodes if n.spare]
        assert len(spares) == spare and not {(n.node, g) for n in spares for g in range(n.gpus)} & set(held)

    check()


def test_a_fleet_of_thousands_is_laid_out_trying_each_node_a_bounded_number_of_times(monkeypatch):
    """`plan --model llama-3.1-8b --chip h100 --concurrency 1000000` lays 17,242 one-GPU instances:
    placement tried every earlier node for each instance (31 million `fit` calls, 57 s). Full nodes
    are passed over now; the layout is first fit as before (a 6-GPU instance's node takes the next
    2-GPU one, then a new node opens)."""
    from planner.search import placement
    from planner.search.placement import ChipNodes, PoolShape, place

    tried = []
    fit = placement._Node.fit
    monkeypatch.setattr(placement._Node, "fit", lambda self, *a: tried.append(self.name) or fit(self, *a))
    laid = place([PoolShape("one", "x", 4000, 1, 1)], {"x": ChipNodes("x", 8, 8)}, 0, load())
    assert len(laid.nodes) == 500 and len(tried) <= 4000 + 500  # was 1,000,000: every earlier node per instance
    laid = place([PoolShape("big", "x", 1, 6, 2), PoolShape("small", "x", 2, 2, 2)], {"x": ChipNodes("x", 8, 8)}, 0,
                 load())
    assert [(i.pool, i.slots[0].node, i.slots[0].gpus) for i in laid.instances] == [
        ("big", "x-0", [0, 1, 2, 3, 4, 5]), ("small", "x-0", [6, 7]), ("small", "x-1", [0, 1])]


def test_the_scenario_chart_draws_the_node_map(tmp_path, capsys):
    chart = tmp_path / "review.svg"
    assert main(["scenario", str(ROOT / "scenarios" / "mixed-fleet-shared-inventory.yaml"), "--chart", str(chart),
                 "--spare", "1"]) == 0
    svg = (tmp_path / "review-nodes.svg").read_text()
    for node in ("b200-0", "b200-1", "h200-0", "h200-3"):
        assert f'id="node-{node}' in svg
    assert "spare (kept free)" in svg and "analytics #0" in svg
