"""The kernel's printout as data: a pydantic model with integer bytes (`plan memory --json`)."""

from __future__ import annotations

from pydantic import BaseModel

from pricing.kernel import startup
from pricing.kernel.capacity import Capacity
from pricing.kernel.kernel import Kernel
from pricing.kernel.startup import Startup


class FixedOut(BaseModel):
    weights: int
    activation_peak: int
    cuda_graph: int
    comm_buffers: int
    eplb_redundant: int
    non_torch: int
    total: int


class ActivationOut(BaseModel):
    forward: int
    sampler: int
    model_buffers: int
    buffers: dict[str, int] = {}


class SequenceOut(BaseModel):
    tokens: int
    variable: int
    fixed: int
    admission: int
    own_pages_steady: int


class GroupOut(BaseModel):
    """One KV cache group, in vLLM's order: its spec class as vLLM names it (the group's, e.g.
    UniformTypeKVCacheSpecs for a group of summed pages, and its layers'), vLLM's page_size_bytes
    of the group, and the group's share of one pool block."""

    layers: list[str]
    kind: str
    spec: str
    block_tokens: int
    page_bytes: int
    layer_bytes: int
    blocks_steady: int
    blocks_admission: int


class RecurrentOut(BaseModel):
    """The recurrent state a request holds on this rank, apart from the KV cache (hybrid models)."""

    mode: str
    kinds: list[str]
    layers: int
    state_bytes: int  # one layer's state (conv + temporal) before padding
    request_bytes: int  # one state in every recurrent layer
    pages: int  # pages a request holds per recurrent layer in this mode (at `tokens` for mode "all")
    page_bytes: int  # one page padded to the attention page
    attention_block_tokens: int
    state_block_tokens: int
    groups: int
    held_bytes: int  # the pool blocks the state groups hold for one request


class UnaccountedOut(BaseModel):
    pattern: str
    tensors: int
    bytes: int


class CheckpointOut(BaseModel):
    """The checkpoint's own bytes beside the graph's (pricing/kernel/checkpoint_check.py)."""

    found: bool
    note: str
    checkpoint_bytes: int = 0
    graph_bytes: int = 0
    gap: float = 0.0
    warning: str | None = None
    unaccounted: list[UnaccountedOut] = []


class ProvenanceOut(BaseModel):
    name: str
    value: object
    source: str
    how: str


class StageOut(BaseModel):
    """One pipeline stage's rank: its layers [first, end), fixed memory, pool and own block count."""

    index: int
    layers: list[int]
    fixed: FixedOut
    kv_pool: int
    block_bytes: int
    own_num_blocks: int  # before vLLM sets every stage to the fewest
    refusal: str | None


class PipelineOut(BaseModel):
    size: int
    partition: list[int]
    binding_stage: int  # the rank reported above: the fewest blocks, then the most fixed memory
    stages: list[StageOut]


class MemoryReport(BaseModel):
    model: str
    hf_id: str
    vllm_version: str
    chip: str
    chip_memory: int
    deployment: dict
    fixed: FixedOut
    activation: ActivationOut
    pre_snapshot: int
    budget: int
    kv_pool: int
    sequence: SequenceOut
    block_bytes: int
    num_blocks: int
    grouped: bool
    kv_groups: list[GroupOut]
    cache_bytes_per_token: float
    kv_cache_tokens: int
    max_concurrency: float
    requests_held: int
    starts: bool  # vLLM starts it (false also where whether it starts was not verified: refusal_check "unverified")
    refusal: str | None  # vLLM's own error text when it would not start; why it is not offered when "unverified"
    refusal_check: str | None = None  # which start-up check fails (pricing/kernel/startup.py Refusal.check)
    would_fit: str | None = None  # the nearest setting that starts
    short_by: int = 0  # bytes the fixed memory exceeds the budget by (kv_pool is then 0, never negative)
    provenance: list[ProvenanceOut]
    recurrent_state: RecurrentOut | None = None
    checkpoint: CheckpointOut | None = None
    warnings: list[str] = []
    pipeline: PipelineOut | None = None


def _checkpoint(k: Kernel) -> CheckpointOut:
    from dataclasses import asdict

    from pricing.kernel.checkpoint_check import check_checkpoint

    c = check_checkpoint(k.model, k.reg)
    return CheckpointOut(found=c.found, note=c.note, checkpoint_bytes=c.checkpoint_bytes, graph_bytes=c.graph_bytes,
                         gap=c.gap, warning=c.warning, unaccounted=[UnaccountedOut(**asdict(u)) for u in c.unaccounted])


def _fixed(f) -> FixedOut:
    return FixedOut(weights=f.weights, activation_peak=f.activation_peak, cuda_graph=f.cuda_graph,
                    comm_buffers=f.comm_buffers, eplb_redundant=f.eplb_redundant, non_torch=f.non_torch, total=f.total)


def _pipeline(k: Kernel) -> PipelineOut | None:
    if k.stage is None:
        return None
    stages = []
    for s in k.instance.ranks:
        r = startup.refusal(s)
        stages.append(StageOut(index=s.stage.index, layers=[s.stage.first_layer, s.stage.end_layer],
                               fixed=_fixed(s.fixed_bytes()), kv_pool=max(0, s.kv_pool()),
                               block_bytes=s.layout().bytes_per_block, own_num_blocks=s.rank_blocks(),
                               refusal=r.message if r else None))
    return PipelineOut(size=k.engine.pipeline_parallel_size, partition=[s.stage.layers for s in k.instance.ranks],
                       binding_stage=k.stage.index, stages=stages)



# The report's `deployment` keys for the flags whose short names its JSON has published since it was
# first written (`plan memory --json`); the engine's fields are vLLM's own names (Deployment's). Renaming
# these keys would change every plan's JSON.
PUBLISHED_KEYS = {"tensor_parallel_size": "tp", "data_parallel_size": "dp", "enable_expert_parallel": "ep",
                  "decode_context_parallel_size": "dcp", "prefill_context_parallel_size": "pcp",
                  "num_speculative_tokens": "spec_tokens", "speculative_method": "spec_method",
                  "enable_eplb": "eplb", "num_redundant_experts": "redundant_experts",
                  "enable_prefix_caching": "prefix_caching", "pipeline_parallel_size": "pp",
                  "pp_layer_partition": "pp_partition"}

def memory_report(k: Kernel, tokens: int) -> MemoryReport:
    check = _checkpoint(k)
    f = k.fixed_bytes()
    a = k.activation()
    e, instance = k.engine, k.instance
    layout = k.layout()
    refusal = Startup(k).refusal()
    groups = []
    for g in layout.groups:
        steady = k._blocks(g, e.max_model_len, 1 + e.num_speculative_tokens)
        admission = k._blocks(g, e.max_model_len, e.max_in_flight_tokens)
        groups.append(GroupOut(layers=list(g.layers), kind=g.vllm_class, spec=g.spec.vllm_class,
                               block_tokens=g.block_tokens, page_bytes=g.page_bytes, layer_bytes=g.layer_bytes,
                               blocks_steady=steady, blocks_admission=admission))
    return MemoryReport(
        model=k.model.name, hf_id=k.model.hf_id, vllm_version=k.release.full_version, chip=k.chip.id,
        chip_memory=k.chip.memory_bytes,
        deployment={PUBLISHED_KEYS.get(name, name): getattr(e, name) for name in e.__dataclass_fields__
                    if name != "release"},
        fixed=_fixed(f),
        activation=ActivationOut(forward=a.forward, sampler=a.sampler, model_buffers=a.model_buffers,
                                 buffers=dict(a.buffers)),
        pre_snapshot=k.pre_snapshot_bytes(), budget=k.budget(), kv_pool=max(0, k.kv_pool()),
        short_by=max(0, -k.kv_pool()),
        sequence=SequenceOut(tokens=tokens, variable=k.sequence_variable_bytes(tokens), fixed=k.sequence_fixed_bytes(),
                             admission=k.sequence_admission_bytes(), own_pages_steady=k.own_page_bytes_steady()),
        block_bytes=layout.bytes_per_block, num_blocks=instance.num_blocks(), grouped=layout.grouped, kv_groups=groups,
        cache_bytes_per_token=float(k.cache_bytes_per_token()), kv_cache_tokens=instance.kv_cache_tokens(),
        max_concurrency=instance.max_concurrency(), requests_held=Capacity(k).requests_held(), starts=refusal is None,
        refusal=refusal.message if refusal else None, refusal_check=refusal.check if refusal else None,
        would_fit=refusal.would_fit if refusal else None,
        recurrent_state=_recurrent(k, tokens), pipeline=_pipeline(k),
        checkpoint=check,
        warnings=[check.warning] if check.warning else [],
        provenance=[ProvenanceOut(name=p.name, value=p.value, source=p.source, how=p.how) for p in k.provenance()],
    )


def _recurrent(k: Kernel, tokens: int) -> RecurrentOut | None:
    from dataclasses import asdict

    from pricing.kernel.recurrent_state import summary

    s = summary(k, tokens)
    return None if s is None else RecurrentOut(**{**asdict(s), "kinds": list(s.kinds)})
