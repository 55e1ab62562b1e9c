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
