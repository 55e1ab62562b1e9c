"""Instances larger than a node (issue 12): pipeline stages across nodes with tp inside the NVLink
domain, tp across nodes only where the domain spans them (GB200 NVL72), whole nodes per instance,
and the per-node `vllm serve` commands of vLLM's multi-node launch."""

import pytest

from planner.app.plan import plan
from planner.candidates.shapes import placement
from planner.cli import main
from planner.request import PlanRequest, PoolLimits, ServiceSpec
from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Capacity, Deployment, Kernel, Startup


def request(model, chip, concurrency, context, **service):
    return PlanRequest(service=ServiceSpec(model=model, concurrency=concurrency, context_length=context, **service),
                       limits=PoolLimits(chips=(chip,)))


def test_placement_fills_whole_nodes_with_whole_tp_groups():
    assert placement(8, 8, 8) is None and placement(4, 8, 8) is None  # within one node
    assert placement(8, 16, 8) is None and placement(2, 32, 8) is None  # 2 and 4 full nodes
    assert "whole 8-GPU nodes" in placement(4, 12, 8)  # vLLM: --nnodes must divide the world size
    assert "do not pack" in placement(3, 12, 4)  # a tp group would straddle nodes
    assert placement(8, 16, 4) is None  # tp 8 over 4-GPU trays: allowed where the domain spans them


@pytest.mark.parametrize("model", ["llama-3.1-405b", "kimi-k2"])
def test_models_larger_than_an_h100_node_get_multi_node_plans(model):
    result = plan(request(model, "h100", 16, 32768))
    assert result.feasible
    best = result.best
    chip = get_chip("h100")
    assert best.nodes_per_replica >= 2 and best.pipeline_parallel_size >= 2
    assert best.tensor_parallel_size <= chip.nvlink_domain  # tp within the NVLink domain, pp across nodes
    assert best.gpus_per_replica == best.nodes_per_replica * chip.gpus_per_node  # whole nodes
    assert best.cost_per_hour == pytest.approx(best.gpus * chip.price_per_gpu_hour, abs=1e-4)
    assert best.held >= 16
    commands = best.vllm_serve_nodes
    assert len(commands) == best.nodes_per_replica
    for rank, command in enumerate(commands):
        assert f"--pipeline-parallel-size {best.pipeline_parallel_size}" in command
        assert f"--nnodes {best.nodes_per_replica} --node-rank {rank} --master-addr $HEAD_IP" in command
        assert ("--headless" in command) == (rank > 0)  # the head node serves the API
    # the flags of the plan start in the kernel and hold what the plan says
    model_graph = load_model(model)
    d = Deployment(tensor_parallel_size=best.tensor_parallel_size, pipeline_parallel_size=best.pipeline_parallel_size,
                   data_parallel_size=best.data_parallel_size, enable_expert_parallel=best.enable_expert_parallel,
                   decode_context_parallel_size=best.decode_context_parallel_size,
                   gpu_memory_utilization=best.gpu_memory_utilization,
                   max_num_batched_tokens=best.max_num_batched_tokens, max_num_seqs=best.max_num_seqs,
                   max_model_len=32768)
    k = Kernel.of(model_graph, d, chip)
    assert Startup(k).starts
    assert Capacity(k).requests_held() * best.replicas * best.data_parallel_size == best.held


def test_llama_405b_on_h100_needs_pipeline_stages_since_tp_16_exceeds_the_domain():
    """One 8-GPU node cannot hold 405B in bf16 (756 GiB of weights); tp 16 would leave NVLink."""
    result = plan(request("llama-3.1-405b", "h100", 16, 32768, tp=(16,)))
    assert not result.feasible
    assert plan(request("llama-3.1-405b", "h100", 16, 32768, pp=(1,))).feasible is False
    best = plan(request("llama-3.1-405b", "h100", 16, 32768)).best
    assert (best.tensor_parallel_size, best.pipeline_parallel_size, best.nodes_per_replica) == (8, 2, 2)


def test_tp_crosses_trays_only_where_the_nvlink_domain_does():
    """GB200 NVL72: 4-GPU trays in one 72-GPU NVLink domain, so tp 8 spans two trays."""
    result = plan(request("llama-3.1-405b", "gb200", 8, 32768, tp=(8,), pp=(1,)))
    assert result.feasible and result.best.nodes_per_replica == 2 and result.best.tensor_parallel_size == 8
    assert len(result.best.vllm_serve_nodes) == 2
    # on HGX H100 the same tp 8 stays inside one node
    h100 = plan(request("llama-3.1-70b", "h100", 8, 32768, tp=(8,), pp=(1,)))
    assert h100.best.nodes_per_replica == 1 and h100.best.vllm_serve_nodes == []


def test_one_gpu_nodes_pipeline_across_nodes():
    """GH200 96 GB: one GPU per node, no NVLink between nodes: Llama-3.1-70B (131 GiB) takes
    pipeline stages over several nodes at tp 1."""
    best = plan(request("llama-3.1-70b", "gh200-96gb", 4, 8192)).best
    assert best.tensor_parallel_size == 1 and best.pipeline_parallel_size >= 2
    assert best.nodes_per_replica == best.pipeline_parallel_size == best.gpus_per_replica


def test_plan_prints_the_commands_per_node(capsys):
    code = main(["--model", "llama-3.1-405b", "--chip", "h100", "--concurrency", "16", "--context-length", "32768"])
    assert code == 0
    out = capsys.readouterr().out
    assert "one instance takes 2 nodes of 8 GPUs" in out
    assert "# h100-0: replica 0, head: serves the API" in out and "# h100-1: replica 0, worker" in out
    assert "--distributed-executor-backend ray" in out
    assert "1 × 2" in out  # the nodes column: one instance of two nodes


def test_a_scenario_service_larger_than_a_node_gets_its_commands_per_node(tmp_path):
    path = tmp_path / "review.yaml"
    path.write_text("review: big model\ninventory:\n  h100: {gpus: 32, gpus_per_node: 8}\nservices:\n"
                    "  - {name: big, model: llama-3.1-405b, concurrency: 16, context_length: 32768, chips: [h100]}\n")
    from click.testing import CliRunner

    from planner.cli import cli

    result = CliRunner().invoke(cli, ["scenario", str(path)])
    assert result.exit_code == 0, result.output
    assert "1 × (8,2,1,off,1)" in result.output  # one spelling of the split in every table
    assert "--nnodes 2 --node-rank 1 --master-addr $HEAD_IP --headless" in result.output
    assert "need 16 GPUs (tp 8 × pp 2)" in CliRunner().invoke(cli, ["scenario", str(path), "--format",
                                                                    "markdown"]).output
