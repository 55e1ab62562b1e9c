"""A deployment as vLLM 0.33's own flags describe it, and the engine settings those flags
resolve to on a chip (defaults per vllm-0.33-memory.md §9)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pricing.chips import Chip
from pricing.errors import InputError, mention
from pricing.graph.model import ModelGraph
from pricing.kernel import pipeline
from pricing.registry import Registry, shipped
from pricing.rules import Release
from pricing.rules import get as get_release
from pricing.rules.load_checks import heads_refusal
from pricing.units import GiB


class Deployment(BaseModel):
    """One vLLM instance's flags (None: vLLM 0.33's default for the chip)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor_parallel_size: int = Field(1, ge=1)
    pipeline_parallel_size: int = Field(1, ge=1)
    pp_layer_partition: tuple[int, ...] | None = None  # VLLM_PP_LAYER_PARTITION, layers per stage
    data_parallel_size: int = Field(1, ge=1)
    enable_expert_parallel: bool = False
    decode_context_parallel_size: int = Field(1, ge=1)
    prefill_context_parallel_size: int = Field(1, ge=1)
    gpu_memory_utilization: float | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    kv_cache_dtype: str = "auto"
    block_size: int | None = None
    num_speculative_tokens: int = Field(0, ge=0)
    speculative_method: str | None = None
    enable_eplb: bool = False
    num_redundant_experts: int = Field(0, ge=0)
    enforce_eager: bool = False
    cudagraph_mode: str | None = None
    kv_cache_memory_bytes: int | None = None
    enable_prefix_caching: bool = True
    async_scheduling: bool = True
    mamba_cache_mode: Literal["none", "align", "all"] | None = None
    mega_attention: bool | None = None  # DeepSeek-V4.1 on SM100: None = the backend's own choice
    kv_role: Literal["kv_producer", "kv_consumer"] | None = None  # NixlConnector's role; None: no connector
    kv_buffer_device: Literal["cuda", "cpu"] = "cuda"  # KVTransferConfig.kv_buffer_device (vLLM's default: cuda)

    @staticmethod
    def flag(field: str) -> str:
        """`vllm serve`'s flag of a field named as vLLM's EngineArgs names it (every field of an engine
        flag here): the name with dashes (EngineArgs.add_cli_args, vllm/engine/arg_utils.py)."""
        return "--" + field.replace("_", "-")


@dataclass(frozen=True, kw_only=True)
class Engine:
    """Resolved settings of one instance on one chip: every default filled in (made by
    `resolve_engine`, its fields by name). A flag's field is named as `Deployment` names it, vLLM's
    own name (EngineArgs: `--tensor-parallel-size` is `tensor_parallel_size`); `ep_size` and
    `release` are the engine's own."""

    tensor_parallel_size: int
    data_parallel_size: int
    enable_expert_parallel: bool
    ep_size: int  # the expert-parallel group: tp × dp × pcp with expert parallel, else 1
    decode_context_parallel_size: int
    prefill_context_parallel_size: int
    gpu_memory_utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int
    kv_cache_dtype: str
    block_size: int | None
    num_speculative_tokens: int
    speculative_method: str | None
    enable_eplb: bool
    num_redundant_experts: int
    cudagraph_mode: str
    kv_cache_memory_bytes: int | None
    enable_prefix_caching: bool
    async_scheduling: bool
    mamba_cache_mode: str
    mega_attention: bool | None
    release: Release = field(default_factory=get_release)
    pipeline_parallel_size: int = 1
    pp_layer_partition: tuple[int, ...] | None = None  # VLLM_PP_LAYER_PARTITION
    kv_role: str | None = None  # the KV connector's role (kv_producer: prefill, kv_consumer: decode)
    kv_buffer_device: str = "cuda"

    def as_deployment(self) -> Deployment:
        """The flags that resolve to exactly this engine (every default pinned to its resolved
        value); `resolve_engine(e.as_deployment(), ...) == e` is a test, so a new field cannot be
        left out."""
        return Deployment(**{name: getattr(self, name) for name in Deployment.model_fields if name != "enforce_eager"})

    @property
    def in_flight_batches(self) -> int:
        """max_concurrent_batches, the release's rule: pp + 1 under asynchronous scheduling with the
        V2 runner, else pp (vllm-0.33-memory.md §2.3)."""
        return self.release.in_flight_batches(self.async_scheduling, self.pipeline_parallel_size)

    @property
    def max_in_flight_tokens(self) -> int:
        return self.in_flight_batches * self.max_num_batched_tokens

    @property
    def gpus(self) -> int:
        return (self.tensor_parallel_size * self.pipeline_parallel_size * self.data_parallel_size
                * self.prefill_context_parallel_size)


def beyond_positions(model: ModelGraph, max_model_len: int) -> str | None:
    """What is wrong with a max_model_len beyond the model's positions, or None: vLLM refuses it
    when it builds its ModelConfig (vllm/config/model.py `_get_and_verify_max_len`: "User-specified
    max_model_len (N) is greater than the derived max_model_len ..."), before any memory is sized."""
    if max_model_len <= model.max_position:
        return None
    return f"{max_model_len} exceeds the {model.max_position} positions of {model.name}"


def max_dcp(model: ModelGraph, tp: int) -> int:
    """The widest decode-context-parallel group at tensor parallel `tp`: tp / KV heads per model
    (a latent cache has one head). vLLM docs, context_parallel_deployment.md: "The dcp size should
    lie in the range of [1, tp_size/H]"."""
    return max(1, tp // model.cache_kv_heads)


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def check_tensor_parallel(model: ModelGraph, tp: int) -> None:
    """A tensor-parallel size asked of the search (`plan --tp`, a scenario's `tp:`), raised on the
    field `tensor_parallel_size` when vLLM refuses it for the model's heads (pricing/rules/
    load_checks.py `heads_refusal`: the engine config's and the QKV layer's checks, which a
    deployment's kernel meets as its release's load checks)."""
    if tp < 1:
        raise InputError("tensor_parallel_size", f"must be at least 1, got {tp}", "for example 1")
    refused = heads_refusal(model, tp)
    if refused is None:
        return
    heads = model.num_attention_heads
    if refused.check == "attention_heads":
        raise InputError("tensor_parallel_size", f"{tp} does not divide the {heads} attention heads of {model.name}",
                         f"use one of {_divisors(heads)}")
    kv = model.num_kv_heads
    if kv > tp:
        raise InputError("tensor_parallel_size", f"{tp} does not divide the {kv} KV heads of {model.name}",
                         f"use one of {_divisors(kv)}")
    raise InputError("tensor_parallel_size", f"{tp} is not a multiple of the {kv} KV heads of {model.name}",
                     "use a multiple of the KV heads")


def allows_tensor_parallel(model: ModelGraph, tp: int) -> bool:
    """Whether vLLM accepts tensor parallel `tp` for the model's heads (`heads_refusal`)."""
    return tp >= 1 and heads_refusal(model, tp) is None


def resolve_engine(d: Deployment, model: ModelGraph, chip: Chip, registry: Registry | None = None,
                   release: Release | str | None = None) -> Engine:
    """Fill the release's defaults (vLLM 0.33 by default) and check the flags against the model, as vLLM would."""
    reg = registry or shipped()
    release = get_release(release)
    tp, dp = d.tensor_parallel_size, d.data_parallel_size
    if tp < 1:
        raise InputError("tensor_parallel_size", f"must be at least 1, got {tp}", "for example 1")
    # heads that tp does not divide: the release's load checks refuse it (exit 1, vLLM's words), not the input
    dcp = d.decode_context_parallel_size
    if tp % dcp:
        raise InputError("decode_context_parallel_size", f"{dcp} does not divide tensor parallel {tp}",
                         f"use one of {_divisors(tp)}")
    if dcp > max_dcp(model, tp):
        raise InputError("decode_context_parallel_size",
                         f"{dcp} exceeds tp / KV heads for {model.name} at tp {tp} (vLLM docs, "
                         "context_parallel_deployment.md: dcp lies in [1, tp_size / H])",
                         f"use at most {max_dcp(model, tp)}")
    if dcp > 1 and model.has_window_caches:
        raise InputError("decode_context_parallel_size",
                         f"vLLM 0.33 does not shard sliding-window caches, and {model.name} has them "
                         "(SlidingWindowSpec asserts 'DCP not support sliding window', vllm-0.33-memory.md §2.2)",
                         "use 1")
    util = d.gpu_memory_utilization if d.gpu_memory_utilization is not None else release.fact(
        reg, "gpu_memory_utilization")
    if not 0 < util <= 1:
        raise InputError("gpu_memory_utilization", f"must be in (0, 1], got {util}", "for example 0.92")
    ep = d.enable_expert_parallel
    if ep and not model.has_experts:
        raise InputError("enable_expert_parallel", f"{model.name} has no routed experts", "drop the flag")
    ep_size = tp * dp * d.prefill_context_parallel_size if ep else 1
    if d.enable_eplb and not ep:
        raise InputError("enable_eplb", "needs expert parallelism", f"add {mention('enable_expert_parallel')}")
    if d.num_redundant_experts and not d.enable_eplb:
        raise InputError("num_redundant_experts", "needs EPLB", f"add {mention('enable_eplb')} or set it to 0")
    if d.enable_eplb and (model.routed_experts + d.num_redundant_experts) % ep_size:
        raise InputError("num_redundant_experts",
                         f"{model.routed_experts} experts + {d.num_redundant_experts} redundant do not divide evenly "
                         f"across {ep_size} EP ranks (vLLM EPLB requires it)",
                         "choose redundant experts so the sum is a multiple of the EP size")
    max_len = d.max_model_len if d.max_model_len is not None else model.max_position
    if max_len < 1:
        raise InputError("max_model_len", f"must be at least 1, got {max_len}", "give the context length in tokens")
    if problem := beyond_positions(model, max_len):
        raise InputError("max_model_len", problem, f"use at most {model.max_position}")
    rows = release.fact(reg, "scheduler_defaults")
    memory_gib = chip.memory_bytes / GiB
    for row in rows:
        if memory_gib >= row["min_memory_gib"] and chip.generation not in row.get("exclude_generations", []):
            default_tokens, default_seqs = row["max_num_batched_tokens"], row["max_num_seqs"]
            break
    seqs = d.max_num_seqs if d.max_num_seqs is not None else default_seqs
    tokens = d.max_num_batched_tokens if d.max_num_batched_tokens is not None else default_tokens
    if tokens < 1:
        raise InputError("max_num_batched_tokens", f"must be at least 1, got {tokens}", "for example 8192")
    if seqs < 1:
        raise InputError("max_num_seqs", f"must be at least 1, got {seqs}", "for example 256")
    if d.max_num_batched_tokens is None:
        tokens = min(seqs * max_len, tokens)
    if d.max_num_seqs is None:
        seqs = min(seqs, tokens)
    if tokens < seqs:  # vLLM 0.33 config/scheduler.py verify_max_model_len, on the values defaults resolved to
        field, fix = (("max_num_batched_tokens", f"use at least {seqs}, or lower {mention('max_num_seqs')}")
                      if d.max_num_batched_tokens is not None else
                      ("max_num_seqs", f"use at most {tokens} (the default token budget), or raise "
                       f"{mention('max_num_batched_tokens')} to at least {seqs}"))
        raise InputError(field, f"max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs "
                         f"({seqs}) (vLLM's SchedulerConfig)", fix)
    kv_dtype = d.kv_cache_dtype.lower()
    if kv_dtype not in release.kv_cache_dtypes:
        raise InputError("kv_cache_dtype", f"unknown dtype {d.kv_cache_dtype!r} for {release.name}",
                         f"use one of {', '.join(release.kv_cache_dtypes)}")
    method = d.speculative_method
    if d.num_speculative_tokens and method is None:
        method = model.speculative_methods[0] if model.speculative_methods else None
        if method is None:
            raise InputError("num_speculative_tokens", f"{model.name} ships no drafter (MTP or DSpark)",
                             "set it to 0, or name a method the model supports")
    if method is not None:
        method = method.lower()
        if method not in model.speculative_methods:
            supported = ", ".join(model.speculative_methods) or "none"
            raise InputError("speculative_method", f"{method!r} is not available for {model.name}",
                             f"supported: {supported}")
        if d.num_speculative_tokens == 0:
            raise InputError("num_speculative_tokens", "must be at least 1 when a speculative method is set",
                             "for example 1 for MTP, 5 for DSpark")
    default_mode = release.fact(reg, "default_cudagraph_mode")
    mode = "NONE" if d.enforce_eager else (d.cudagraph_mode or default_mode).upper()
    if mode not in release.cudagraph_modes:
        raise InputError("cudagraph_mode", f"unknown mode {d.cudagraph_mode!r} for {release.name}",
                         f"use one of {', '.join(release.cudagraph_modes)}")
    if d.block_size is not None and d.block_size < 1:
        raise InputError("block_size", f"must be at least 1, got {d.block_size}", "for example 16")
    if d.kv_cache_memory_bytes is not None and d.kv_cache_memory_bytes < 0:
        raise InputError("kv_cache_memory_bytes", "must not be negative", "give the KV pool in bytes")
    if d.mega_attention is not None and model.extras.get("version") != "v41":
        raise InputError("mega_attention", f"is DeepSeek-V4.1's attention backend, and "
                         f"{model.name} is not DeepSeek-V4.1", "drop the flag")
    if d.mega_attention and not chip.sm100_family:
        raise InputError("mega_attention", f"needs the SM100 family; {chip.id} is {chip.generation}",
                         "drop the flag")
    mamba = d.mamba_cache_mode or (_prefix_caching_mamba_mode(model, release, reg) if d.enable_prefix_caching
                                   else "none")
    if mamba == "align" and not d.enable_prefix_caching:
        mamba = "none"  # vLLM 0.33 MambaModelConfig: prefix caching off resolves the mode to none (golden fixture)
    # vLLM's checks of the partition (get_pp_indices)
    pipeline.layer_partition(pipeline.backbone_layers(model), d.pipeline_parallel_size, d.pp_layer_partition)
    if mamba not in release.mamba_cache_modes:
        raise InputError("mamba_cache_mode", f"unknown mode {mamba!r} for {release.name}",
                         f"use one of {', '.join(release.mamba_cache_modes)}")
    if d.kv_role is not None:
        _check_connector(d, model, tp)
    return Engine(tensor_parallel_size=tp, data_parallel_size=dp, enable_expert_parallel=ep, ep_size=ep_size,
                  decode_context_parallel_size=dcp, prefill_context_parallel_size=d.prefill_context_parallel_size,
                  gpu_memory_utilization=float(util), max_num_batched_tokens=int(tokens), max_num_seqs=int(seqs),
                  max_model_len=int(max_len), kv_cache_dtype=kv_dtype, block_size=d.block_size,
                  num_speculative_tokens=d.num_speculative_tokens, speculative_method=method,
                  enable_eplb=d.enable_eplb, num_redundant_experts=d.num_redundant_experts, cudagraph_mode=mode,
                  kv_cache_memory_bytes=d.kv_cache_memory_bytes, enable_prefix_caching=d.enable_prefix_caching,
                  async_scheduling=d.async_scheduling, mamba_cache_mode=mamba, mega_attention=d.mega_attention,
                  release=release, pipeline_parallel_size=d.pipeline_parallel_size,
                  pp_layer_partition=d.pp_layer_partition, kv_role=d.kv_role, kv_buffer_device=d.kv_buffer_device)


def _prefix_caching_mamba_mode(model: ModelGraph, release: Release, reg: Registry) -> str:
    """The recurrent cache mode vLLM picks when prefix caching is on and no mode is given
    (MambaModelConfig): the release's mamba_cache_mode_with_prefix_caching; all_if_supported is
    'all' for the state kinds whose model classes support it (recurrent.prefix_caching_all_kinds)."""
    mode = release.fact(reg, "mamba_cache_mode_with_prefix_caching")
    if mode != "all_if_supported":
        return mode
    kinds = {data["state"].kind for _, data in model.nodes() if data.get("state") is not None}
    return "all" if kinds and kinds <= set(reg.value("recurrent.prefix_caching_all_kinds")) else "align"


def _check_connector(d: Deployment, model: ModelGraph, tp: int) -> None:
    """What vLLM 0.33 refuses of a NixlConnector instance (registry kv_transfer.nixl.dcp_rule and
    consumer_pipeline_rule): dcp must be 1 or the transfer tp (config/vllm.py), and above 1 only with
    MLA; a kv_consumer runs without pipeline stages (nixl/base_worker.py)."""
    dcp, transfer_tp = d.decode_context_parallel_size, max(tp, d.prefill_context_parallel_size)
    if dcp not in (1, transfer_tp):
        raise InputError("decode_context_parallel_size", f"{dcp} with NixlConnector must be 1 or the transfer "
                         f"parallel size {transfer_tp} (vLLM config/vllm.py)", f"use 1 or {transfer_tp}")
    if dcp > 1 and model.attention_backend == "gqa":
        raise InputError("decode_context_parallel_size", "P/D with dcp > 1 is only supported for MLA models "
                         "(vLLM config/vllm.py)", "use 1")
    if d.kv_role == "kv_consumer" and d.pipeline_parallel_size > 1:
        raise InputError("pipeline_parallel_size", "a NixlConnector kv_consumer (decode) does not support "
                         "pipeline_parallel_size > 1 (vLLM nixl/base_worker.py)", "use 1")
