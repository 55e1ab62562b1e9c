"""What a node of the model graph carries: parameter tensors and, for layers that keep a
cache, either the generic KV declaration or the caches the layer states itself.

A node's attributes (networkx node data):
  kind       "embedding" | "attention" | "mlp" | "moe" | "norm" | "lm_head" | "mixer" | "projection" | "encoder"
  layer      decoder layer index, or None
  tensors    tuple[Tensor, ...]         parameters, with the width each is served in
  cache      AttentionCache | None      the generic KV law applies (spec: What each request adds)
  caches     tuple[StatedCache, ...]    the layer states its own caches (spec: When the graph states its caches)
  buffers    tuple[RotaryCache, ...]    buffers the layer's module builds at init beside its parameters (not in
                                        the checkpoint): held once per rank however many layers state an equal one
  state      RecurrentState | None      per-request recurrent state (spec: What each request holds regardless of length)
  routing    Routing | None             a MoE layer's routed experts and the experts each token picks
  speculative  None | "mtp" | "dspark"  held only while speculating with that method
  tower      None | "image"             a multimodal encoder's node (vision tower, projector): held with
                                        the weights, no cache, never part of a decoder step
Edges carry `flow`: "data" (activations) or "reads_cache" (owner -> reader: the reader holds nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter

from pricing.config.quantization import Scheme

# How a tensor is laid out across the ranks (vLLM's linear-layer classes):
#   column      ColumnParallelLinear: output rows divided by tp
#   row         RowParallelLinear: input columns divided by tp
#   heads       QKV K/V part: rows = heads × head width; a head is never split (max(1, heads // tp) per rank)
#   replicated  ReplicatedLinear / norms: whole on every rank
#   vocab       VocabParallelEmbedding / ParallelLMHead: rows padded, then divided by tp
#   expert_column / expert_row  routed experts: whole experts under expert parallelism, else
#               every expert sliced over the MoE tensor-parallel group (tp × dp)
SPLITS = ("column", "row", "heads", "replicated", "vocab", "expert_column", "expert_row")


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor (or `count` identical ones, e.g. one per routed expert)."""

    name: str
    rows: int
    cols: int
    fmt: Scheme  # the served layout (pricing/config/quantization.py), e.g. Unquantized("bf16")
    split: str
    count: int = 1
    heads: int = 0  # for split == "heads": the heads the rows hold
    parts: int = 1  # checkpoint modules fused in it (gate and up: 2), each with its own scales
    # the output sizes of the merged layer vLLM builds it as (MergedColumnParallelLinear output_sizes),
    # where they are not `parts` equal shards: each is split tp ways, and the block-FP8 check reads each
    outputs: tuple[int, ...] = ()
    # the index in `outputs` of the one output every rank holds whole, where vLLM's merged layer replicates it
    # (Kimi-Linear's in_proj_qkvgfab keeps f_a whole: layers/mamba/gdn/kimi_gdn_linear_attn.py
    # _KimiGDNMergedColumnParallelLinear, its output size × tp so that each rank reserves all of it); -1: none
    replicated_output: int = -1

    def __post_init__(self):
        if self.split not in SPLITS:
            raise ValueError(f"unknown split {self.split!r} for tensor {self.name}")
        if self.replicated_output >= len(self.outputs):
            raise ValueError(f"{self.name}: replicated output {self.replicated_output} is not one of its outputs")

    @property
    def replicated_rows(self) -> int:
        """Rows of this column layer every tensor-parallel rank holds whole (its replicated output's)."""
        return self.outputs[self.replicated_output] if self.replicated_output >= 0 else 0


_BUT_NAME = attrgetter(*(f.name for f in fields(Tensor) if f.name != "name"))


def without_name(t: Tensor) -> tuple:
    """Every field of `t` but its name (a tensor's bytes never depend on its name): equal for the
    identical tensors of different layers, and cheaper to build than a renamed copy."""
    return _BUT_NAME(t)


@dataclass(frozen=True)
class Routing:
    """A MoE layer's routing: each token picks `top_k` of the layer's `experts` routed experts.
    A layer states its own where vLLM builds it with its own (DeepSeek-V4.1's DSpark layers:
    dspark_n_routed_experts / dspark_num_experts_per_tok, vllm/models/deepseek_v41/nvidia/model.py
    DeepseekV4MoE); every other MoE layer takes the config's (graph/__init__.py)."""

    experts: int
    top_k: int


@dataclass(frozen=True)
class AttentionCache:
    """The generic KV law: n_tensors × max(1, ⌊kv_heads/tp⌋) × head width × element bytes per token.

    `latent` marks MLA: one tensor, one head, never divided by tp. `window` bounds a sliding
    window layer. `sparse_indexer` adds the sparse-attention indexer's own record (DeepSeek-V3.2).
    """

    kind: str  # "gqa" | "mla"
    kv_heads: int
    head_dim: int  # K width (MLA: kv_lora_rank + rope dim)
    head_dim_v: int  # V width (MLA: 0)
    window: int | None = None
    sparse_indexer: bool = False

    @property
    def n_tensors(self) -> int:
        return 1 if self.kind == "mla" else 2


@dataclass(frozen=True)
class StatedCache:
    """A cache a layer states itself (the kernel reads its record bytes and page geometry from
    the registry: the backend picks the record format).

    per_record   context tokens one record covers (a compress ratio; 1 for plain caches)
    bound        "context" (grows with the request), "window" (a ring of `window` tokens) or
                 "entries" (a fixed ring of `entries` records for the request's whole life)
    geometry     which page geometry of the family applies ("compressed", "window", "state")
    """

    name: str
    per_record: int = 1
    bound: str = "context"
    window: int = 0
    entries: int = 0
    geometry: str = "compressed"


@dataclass(frozen=True)
class RotaryCache:
    """The cos/sin cache of one rotary embedding (vLLM rotary_embedding/base.py
    RotaryEmbeddingBase: `register_buffer("cos_sin_cache", ..., persistent=False)`, shape
    rows × rotary_dim, made at model construction, so inside "Model loading took"). Its dtype is
    not the graph's to state: the kernel reads it from its registry's rotary.cache_dtype.

    get_rope memoizes instances in _ROPE_DICT keyed by the whole rope configuration, so every
    layer stating an equal RotaryCache shares one buffer; each rank (each pipeline stage that
    builds such a layer) holds it whole, never divided by tp.

    rope_type  the get_rope dispatch ("default", "llama3", "linear", "yarn", ...)
    rows       positions the cache covers (graph/rotary.py: the law per rope type)
    rotary_dim head size × partial_rotary_factor (cos and sin halves of rotary_dim / 2 each)
    identity   the rest of the configuration that tells two caches apart (base, scaling parameters)
    """

    rope_type: str
    rows: int
    rotary_dim: int
    identity: tuple = ()


@dataclass(frozen=True)
class RecurrentState:
    """Per-request state of one recurrent layer, from the config (vLLM mamba_utils.py
    MambaStateShapeCalculator). One rank holds, per state page:

      conv state      conv_dim(tp) / tp channels × (conv_kernel - 1 + speculative tokens)
      temporal state  heads / tp × head_dim × state_dim

    conv_dim(tp) = conv_channels + groups(tp) × group_channels, where Mamba-2 replicates its
    groups up to tp when tp does not divide them (groups(tp) = n_groups + (tp - n_groups if
    n_groups % tp else 0)); gated delta networks and KDA have no groups.

    kind       "mamba2" | "gated_delta" | "kda"
    conv_dtype / ssm_dtype   dtype keys: "model" (the checkpoint dtype) or an explicit one ("fp32")
    """

    kind: str
    conv_channels: int
    conv_kernel: int
    heads: int
    head_dim: int
    state_dim: int
    groups: int = 0
    group_channels: int = 0
    conv_dtype: str = "model"
    ssm_dtype: str = "model"
    chunk_size: int = 0  # the config's mamba chunk size (0: not stated; the engine default applies)
