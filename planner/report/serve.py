"""The exact `vllm serve` command for one instance of a plan (vLLM 0.33 flag spelling)."""

from __future__ import annotations

import json
import shlex

from pricing.config.quantization import vllm_flag
from pricing.kernel import Deployment


def serve_command(hf_id: str, d: Deployment, gpus_per_node: int, quantization: str | None = None) -> str:
    """`vllm serve` with every flag the plan sets. Flags left at vLLM's default (dp 1, expert
    parallel off, dcp 1, kv cache dtype auto) are omitted. An instance larger than a node runs
    its data-parallel ranks across nodes: `--data-parallel-size-local` is the ranks per node."""
    args = ["vllm", "serve", hf_id, "--tensor-parallel-size", str(d.tensor_parallel_size)]
    if d.pipeline_parallel_size > 1:
        args += ["--pipeline-parallel-size", str(d.pipeline_parallel_size)]
    if d.data_parallel_size > 1:
        args += ["--data-parallel-size", str(d.data_parallel_size)]
        if d.tensor_parallel_size * d.data_parallel_size > gpus_per_node >= d.tensor_parallel_size:
            args += ["--data-parallel-size-local", str(gpus_per_node // d.tensor_parallel_size)]
    if d.enable_expert_parallel:
        args.append("--enable-expert-parallel")
    if d.decode_context_parallel_size > 1:
        args += ["--decode-context-parallel-size", str(d.decode_context_parallel_size)]
    args += ["--gpu-memory-utilization", f"{d.gpu_memory_utilization:g}",
             "--max-num-batched-tokens", str(d.max_num_batched_tokens),
             "--max-num-seqs", str(d.max_num_seqs),
             "--max-model-len", str(d.max_model_len)]
    if d.kv_cache_dtype != "auto":
        args += ["--kv-cache-dtype", d.kv_cache_dtype]
    method = vllm_flag(quantization)  # registry/quantization.yaml: the one list of methods
    if method:
        args += ["--quantization", method]
    if d.num_speculative_tokens:
        spec = {"method": d.speculative_method, "num_speculative_tokens": d.num_speculative_tokens}
        args += ["--speculative-config", json.dumps(spec)]
    return shlex.join(args)


HEAD = "$HEAD_IP"  # the head node's address, for the user to fill in


def instance_nodes(d: Deployment, gpus_per_node: int) -> int:
    world = d.tensor_parallel_size * d.pipeline_parallel_size * d.data_parallel_size
    return max(1, -(-world // gpus_per_node))


def node_commands(hf_id: str, d: Deployment, gpus_per_node: int, quantization: str | None = None) -> list[str]:
    """The commands that start one instance larger than a node, one per node, as vLLM 0.33
    launches across nodes without Ray (engine/arg_utils.py, entrypoints/cli/serve.py): every node
    runs the same `vllm serve` with `--nnodes N --node-rank R --master-addr <head>`; the head node
    (rank 0) serves the API, the others run `--headless`. vLLM splits the world evenly over the
    nodes (and infers each node's data-parallel ranks). Empty for an instance within one node."""
    nodes = instance_nodes(d, gpus_per_node)
    if nodes == 1:
        return []
    base = serve_command(hf_id, d, gpus_per_node, quantization)
    out = []
    for rank in range(nodes):
        extra = ["--nnodes", str(nodes), "--node-rank", str(rank), "--master-addr", HEAD]
        if rank:
            extra.append("--headless")
        out.append(base + " " + " ".join(extra))
    return out


def ray_commands(hf_id: str, d: Deployment, gpus_per_node: int, quantization: str | None = None) -> list[str]:
    """The Ray form of the same launch (vLLM docs, distributed serving): a Ray cluster of the
    instance's nodes, then one `vllm serve --distributed-executor-backend ray` on the head."""
    nodes = instance_nodes(d, gpus_per_node)
    if nodes == 1:
        return []
    return (["ray start --head --port 6379   # on the head node"]
            + [f"ray start --address {HEAD}:6379   # on each of the {nodes - 1} other node(s)"]
            + [serve_command(hf_id, d, gpus_per_node, quantization) + " --distributed-executor-backend ray"
               "   # on the head node"])
