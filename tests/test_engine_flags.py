"""One spelling of each engine flag: the resolved `Engine` names a flag's field as `Deployment` does,
vLLM's EngineArgs name, and `vllm serve`'s flag is spelled from that name (issue 40)."""

from __future__ import annotations

from pricing.chips import get_chip
from pricing.graph import load_model
from pricing.kernel import Deployment, Kernel
from pricing.kernel.deployment import Engine
from tests.vllm_flags import parser


def test_every_engine_flag_is_named_as_the_deployment_names_it():
    engine = set(Engine.__dataclass_fields__) - {"ep_size", "release"}  # the engine's own: a group size, the pack
    deployment = set(Deployment.model_fields)
    assert engine <= deployment
    assert deployment - engine == {"enforce_eager"}  # resolved into cudagraph_mode NONE, as vLLM resolves it


def test_an_engine_is_its_deployment_resolved_field_by_field():
    d = Deployment(tensor_parallel_size=2, data_parallel_size=2, enable_expert_parallel=True, max_model_len=8192,
                   enable_prefix_caching=False)
    e = Kernel.of(load_model("qwen3-30b-a3b"), d, get_chip("h100")).engine
    for name in ("tensor_parallel_size", "data_parallel_size", "enable_expert_parallel", "num_speculative_tokens",
                 "max_model_len", "pipeline_parallel_size", "enable_prefix_caching"):
        assert getattr(e, name) == getattr(d, name), name
    assert e.ep_size == 4 and e.as_deployment().tensor_parallel_size == 2


def test_a_flag_is_spelled_from_its_field_as_vllm_spells_it():
    flags = parser()["flags"]
    for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "enable_expert_parallel",
                 "decode_context_parallel_size", "gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs",
                 "max_model_len", "kv_cache_dtype", "enable_prefix_caching", "enable_eplb"):
        assert Deployment.flag(name) in flags, name
    assert Deployment.flag("tensor_parallel_size") == "--tensor-parallel-size"
