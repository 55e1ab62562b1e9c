"""vLLM's load-time shape checks: while it builds the model, before any memory is planned, a
quantized layer refuses a shard its kernels cannot take (vllm-0.33-load-checks.md).

Each check is one class, named for the vLLM function it follows, judging one model (its graph's
tensors, each with its served scheme) under one `Split`; a rules pack lists the checks its release
has (`LOAD_CHECKS`), and the magnitudes a check reads that differ between releases are facts of the
pack's registry file (`Release.fact`). `refusal` gives the first refusal in vLLM's words, or None.

How a split reaches the layers (vLLM 0.33; flatten_tp_across_dp is in every wheel read, 0.10.2 to 0.33.0,
and pcp in it from the 0.19.0 wheel on, before which pcp is 1):
- linear layers are split `tp` ways (ColumnParallelLinear: output; RowParallelLinear: input);
- the fused-MoE layers are split across tp × dp × pcp without expert parallelism
  (model_executor/layers/fused_moe/config.py `FusedMoEParallelConfig.make`,
  `flatten_tp_across_dp_and_pcp`), and with it each rank holds whole experts (MoE tp 1);
  `FusedMoEConfig` then takes `intermediate_size // tp_size` per rank.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd
from typing import TYPE_CHECKING, Protocol

from pricing.config.quantization import Fp8, Nvfp4, PackedInt, sm_of

if TYPE_CHECKING:  # the graph (and networkx) only where a model is judged: the packs load without it
    from pricing.graph.model import ModelGraph
    from pricing.graph.nodes import Tensor


@dataclass(frozen=True)
class Split:
    """How one instance shards the weights: tensor parallel `tp`, data parallel `dp`, prefill
    context parallel `pcp`, expert parallel `ep`, on a chip of `generation` ("sm90", "gfx942"),
    with `pp` pipeline stages."""

    tp: int
    dp: int = 1
    pcp: int = 1
    ep: bool = False
    generation: str = "sm90"
    pp: int = 1

    @property
    def world(self) -> int:
        """torch.distributed's world: every rank of every data-parallel engine (distributed/
        parallel_state.py init_distributed_environment: world_size_across_dp = tp × pp × pcp × dp)."""
        return self.tp * self.pp * self.pcp * self.dp

    @property
    def moe_tp(self) -> int:
        """The fused-MoE layers' tensor-parallel size (FusedMoEParallelConfig.make): tp × dp × pcp
        without expert parallelism; 1 with it (use_ep needs more than one rank in that product)."""
        world = self.tp * self.dp * self.pcp
        return 1 if self.ep and world > 1 else world


@dataclass(frozen=True)
class LoadRefusal:
    """A layer vLLM refuses to build: the check, the exception vLLM raises (its type and text), the
    vLLM function it comes from, and the layer. With `vllm_refuses` false it is no refusal of vLLM's:
    the release has no check for the shard, the kernels that would take it decline it, and whether
    another one starts it was not verified, so the planner does not offer it (`message` says why)."""

    check: str
    message: str
    source: str
    layer: str
    vllm_refuses: bool = True


class LoadCheck(Protocol):
    """One load-time check: the first layer of `model` it refuses under `split`, or None. `facts`
    reads one of the release's registry facts (Release.fact, recorded for provenance)."""

    name: str
    source: str

    def judge(self, model: ModelGraph, split: Split, facts) -> LoadRefusal | None: ...


def _block_fp8(t: Tensor) -> tuple[int, int] | None:
    """The [block_n, block_k] of a block-scaled FP8 tensor, else None."""
    fmt = t.fmt
    if isinstance(fmt, Fp8) and fmt.strategy == "block" and fmt.block and not fmt.online:
        return int(fmt.block[0]), int(fmt.block[1])
    return None


def _tensors(model: ModelGraph) -> tuple:
    """(node name, tensor, the node's tensors) for every tensor of the graph, each distinct
    (name aside) shape once, in topological order; listed once per graph (ModelGraph.derived), as
    every split of a sweep is judged on the same tensors."""
    return model.derived(("load_checks.tensors",), lambda: tuple(_distinct_tensors(model)))


def _distinct_tensors(model: ModelGraph):
    seen = set()
    for name, data in model.nodes():
        tensors = data["tensors"]
        for t in tensors:
            key = (t.split, t.rows, t.cols, t.parts, t.fmt, t.name.rsplit(".", 1)[-1])
            if key not in seen:
                seen.add(key)
                yield name, t, tensors


def _partitions(t: Tensor, siblings, tp: int) -> tuple[int, int, list[int]]:
    """(input_size_per_partition, output_size, output_partition_sizes) of the layer vLLM builds `t`
    as: a RowParallelLinear's input divided by tp; a MergedColumnParallelLinear (the checkpoint
    modules fused in it: `parts` > 1) one shard per module; a QKVParallelLinear (a q_proj beside
    its k_proj and v_proj, linear.py: KV heads split, or replicated when fewer than tp,
    max(1, heads // tp) per rank) the q, k and v shards; a merged layer whose outputs are not equal
    (`outputs`: Qwen3.5's in_proj_qkvz, Mamba-2's in_proj) each output / tp, but a replicated output whole
    (Kimi-Linear's in_proj_qkvgfab: f_a, which vLLM sizes × tp, `merged_output_sizes`); any other column
    layer output / tp."""
    if t.split == "row":
        return t.cols // tp, t.rows, [t.rows]
    prefix = t.name.rsplit(".", 1)[0]
    kv = [s for s in siblings if s.split == "heads" and s.name.rsplit(".", 1)[0] == prefix]
    if t.name.endswith("q_proj") and len(kv) == 2:
        kv_rank = max(1, kv[0].heads // tp) * (kv[0].rows // kv[0].heads)
        return t.cols, t.rows + 2 * kv[0].rows, [t.rows // tp, kv_rank, kv_rank]
    if t.outputs:
        sizes = merged_output_sizes(t, tp)
        return t.cols, sum(sizes), [size // tp for size in sizes]
    return t.cols, t.rows, [t.rows // t.parts // tp] * t.parts


def merged_output_sizes(t: Tensor, tp: int) -> list[int]:
    """The output_sizes vLLM hands MergedColumnParallelLinear for merged layer `t` at `tp`: its outputs, the
    replicated one × tp (layers/mamba/gdn/kimi_gdn_linear_attn.py _KimiGDNMergedColumnParallelLinear:
    `output_sizes[replicated_shard_id] *= tp_size`, so each rank reserves it whole)."""
    return [size * tp if i == t.replicated_output else size for i, size in enumerate(t.outputs)]


@dataclass(frozen=True)
class ValidateFp8BlockShape:
    """Block-scaled FP8 linear layers (quantization/utils/fp8_utils.py `validate_fp8_block_shape`,
    from Fp8LinearMethod.create_weights, compressed-tensors W8A8/W8A16 FP8 and Quark W8A8 FP8;
    inline in fp8.py in 0.10): with tp > 1 a row-parallel input shard must be a multiple of block_k;
    a column-parallel layer's output shards (split tp ways, or fused: all but the last) multiples
    of block_n. From the release whose fact `fp8_block_fused_mismatch_allowed` is true, a fused
    layer with a shard that does not divide block_n is let through (linear.py
    `_maybe_allow_fp8_block_shape_mismatch`)."""

    name: str = "fp8_block_linear"
    source: str = "model_executor/layers/quantization/utils/fp8_utils.py validate_fp8_block_shape"

    def judge(self, model, split, facts):
        tp = split.tp
        allowed = facts("fp8_block_fused_mismatch_allowed")
        for _, t, siblings in _tensors(model):
            block = _block_fp8(t)
            if block is None or t.split not in ("row", "column"):
                continue
            block_n, block_k = block
            inner, outer, parts = _partitions(t, siblings, tp)
            if t.split == "column" and outer % tp:  # not split whole: LinearShardsDivide's
                continue
            if tp > 1 and t.split == "row" and t.cols // inner == tp and inner % block_k:
                return LoadRefusal(self.name, f"ValueError: Weight input_size_per_partition = {inner} is not "
                                   f"divisible by weight quantization block_k = {block_k}.", self.source, t.name)
            if t.split != "column" or (allowed and len(parts) > 1 and any(p % block_n for p in parts)):
                continue
            tp_split = tp > 1 and outer // sum(parts) == tp
            for size in (parts if tp_split else parts[:-1]):
                if size % block_n:
                    return LoadRefusal(self.name, f"ValueError: Weight output_partition_size = {size} is not "
                                       f"divisible by weight quantization block_n = {block_n}.", self.source, t.name)
        return None


@dataclass(frozen=True)
class ValidateFp8BlockShapeMoe:
    """Block-scaled FP8 routed experts (quantization/utils/fp8_utils.py `validate_fp8_block_shape_moe`,
    from Fp8MoEMethod.create_weights; inline there before 0.30): the experts' intermediate size per
    MoE rank must be a multiple of block_n, and of block_k when the attention tp is above 1.

    From 0.29 a shard that fails this is first refined (fused_moe/oracle/fp8.py
    `refine_fp8_moe_block_shape`, `resolve_fp8_moe_weight_block_shape` with the default
    moe_backend "auto"): when gcd(block_n, block_k, intermediate per rank, hidden) is at least the
    release's `fp8_moe_block_refinement.min_block`, the checkpoint's scales are upsampled to that
    finer block and nothing is raised; only the Triton experts take a refined block
    (experts/triton_moe.py `_supports_quant_scheme`: any block shape, where the platform
    `supports_fp8`), so on a chip without it no FP8 MoE backend is left
    (oracle/fp8.py `select_fp8_moe_backend`: NotImplementedError)."""

    name: str = "fp8_block_moe"
    source: str = ("model_executor/layers/quantization/fp8.py Fp8MoEMethod.create_weights "
                   "(utils/fp8_utils.py validate_fp8_block_shape_moe from 0.30)")

    def judge(self, model, split, facts):
        refinement = facts("fp8_moe_block_refinement")
        for _, t, _ in _tensors(model):
            block = _block_fp8(t)
            if block is None or t.split != "expert_row":
                continue
            block_n, block_k = block
            intermediate, hidden = t.cols, t.rows
            per_rank = intermediate // split.moe_tp
            if per_rank % block_n == 0 and (split.tp == 1 or per_rank % block_k == 0):
                continue
            if refinement is not None and gcd(block_n, block_k, per_rank, hidden) >= refinement["min_block"]:
                if _triton_takes_fp8(split.generation, refinement):
                    continue
                return LoadRefusal(self.name, "NotImplementedError: No FP8 MoE backend supports the deployment "
                                   "configuration.", "fused_moe/oracle/fp8.py select_fp8_moe_backend", t.name)
            if per_rank % block_n:
                return LoadRefusal(self.name, f"ValueError: The output_size of gate's and up's weight = {per_rank} "
                                   f"is not divisible by weight quantization block_n = {block_n}.", self.source,
                                   t.name)
            return LoadRefusal(self.name, f"ValueError: The input_size of down's weight = {per_rank} is not "
                               f"divisible by weight quantization block_k = {block_k}.", self.source, t.name)
        return None


@dataclass(frozen=True)
class GptOssIntermediateDividesWorld:
    """gpt-oss's MoE block (models/gpt_oss.py MLPBlock.__init__, the same in every release the packs
    serve: 0.10.2 to 0.33.0 wheels) asserts `config.intermediate_size % self.world_size == 0`, the
    world being torch.distributed's (`Split.world`), whatever the experts' format."""

    name: str = "gpt_oss_world"
    source: str = "model_executor/models/gpt_oss.py MLPBlock.__init__"

    def judge(self, model, split, facts):
        if model.model_type != "gpt_oss":
            return None
        for _, t, _ in _tensors(model):
            if t.split == "expert_row" and t.name.endswith(".w2") and t.cols % split.world:  # the down projection
                return LoadRefusal(self.name, f"AssertionError: config.intermediate_size % self.world_size == 0 "
                                   f"({t.cols} over a world of {split.world} ranks)", self.source, t.name)
        return None


@dataclass(frozen=True)
class Nvfp4InFeatures:
    """NVFP4 linear layers (model_executor/layers/quantization/modelopt.py
    `ModelOptNvFp4LinearMethod.create_weights`): each rank's input features, a row-parallel layer's
    split tp ways, must be a multiple of the release's `nvfp4_in_features_multiple` (the FP8 scale's
    16-element group), else ValueError. Routed experts are the fused-MoE method's, not judged here."""

    name: str = "nvfp4_in_features"
    source: str = "model_executor/layers/quantization/modelopt.py ModelOptNvFp4LinearMethod.create_weights"

    def judge(self, model, split, facts):
        multiple = facts("nvfp4_in_features_multiple")
        for _, t, _ in _tensors(model):
            if not isinstance(t.fmt, Nvfp4) or t.split not in ("row", "column"):
                continue
            inner = t.cols // split.tp if t.split == "row" else t.cols
            if inner % multiple:
                return LoadRefusal(self.name, "ValueError: Unsupported model when in features size is not multiple "
                                   f"of {multiple}", self.source, t.name)
        return None


@dataclass(frozen=True)
class Wna16GroupsSplit:
    """Weight-only INT4/INT8 layers with scale groups (GPTQ, AWQ, compressed-tensors WNA16: `PackedInt`)
    under a split that cuts a group: a row-parallel layer's input shard (K / tp) or a routed expert's
    intermediate size per MoE rank (intermediate / moe_tp) that is not a whole number of groups. What
    vLLM does with it is the release's fact `wna16_group_refusals`, by the checkpoint's loader (`awq`,
    `gptq`, `ct`) and kind of layer (`dense`, `moe`): a message template (`{inner}` the shard,
    `{group}` the group size, `{hidden}` the experts' hidden size, `{layer}` vLLM's module prefix,
    `model.` + the graph's name, as a *ForCausalLM model names its decoder; `refuses: false` where vLLM
    has no check and the shard is only not verified to start: `LoadRefusal.vllm_refuses`), or null where vLLM
    halves the group instead (quantization/moe_wna16.py MoeWNA16Method.create_weights: `while
    intermediate % group or hidden % group: group //= 2; assert group >= 32`). vLLM 0.33's sources
    are the fact's; the check replaces the weight sizer's release-blind refusal."""

    name: str = "wna16_groups"
    source: str = "the release's wna16_group_refusals fact (registry vllm_0_*.yaml): its loaders' create_weights"

    def judge(self, model, split, facts):
        refusals = facts("wna16_group_refusals")
        for _, t, _ in _tensors(model):
            fmt = t.fmt
            if not isinstance(fmt, PackedInt) or fmt.group <= 0:
                continue
            if t.split == "row" and (t.cols // split.tp) % fmt.group:
                found = self._refused(refusals["dense"][fmt.source], fmt, t, t.cols // split.tp, None)
            elif t.split == "expert_row":  # the down projection: rows the hidden size, cols the intermediate
                found = self._moe(refusals["moe"], fmt, t, t.cols // split.moe_tp, t.rows)
            else:
                continue
            if found is not None:
                return found
        return None

    def _moe(self, templates, fmt, t, inner, hidden):
        template = templates[fmt.source]
        if template is None:  # MoeWNA16 halves the group until it divides both, down to 32
            group = fmt.group
            while inner % group or hidden % group:
                group //= 2
                if group < 32:
                    return LoadRefusal(self.name, "AssertionError: assert group_size >= 32 (a group of "
                                       f"{fmt.group} halved to divide {inner} and {hidden})",
                                       "model_executor/layers/quantization/moe_wna16.py MoeWNA16Method."
                                       "create_weights", t.name)
            return None
        if "message" not in template:  # checked in vLLM's order: hidden size, then the shard
            for key, size in (("hidden", hidden), ("inner", inner)):
                if size % fmt.group:
                    return self._refused(template[key], fmt, t, inner, hidden)
            if not fmt.symmetric and "packed" in template and (2 * inner) % (32 // fmt.bits):
                return self._refused(template["packed"], fmt, t, inner, hidden)
            return None
        return self._refused(template, fmt, t, inner, hidden) if inner % fmt.group else None

    def _refused(self, template, fmt, t, inner, hidden):
        text = template["message"].format(inner=inner, group=fmt.group, hidden=hidden, layer=f"model.{t.name}",
                                          pack=32 // fmt.bits, w13=2 * inner)
        return LoadRefusal(self.name, text, template["source"], t.name, template.get("refuses", True))


def heads_refusal(model: ModelGraph, tp: int) -> LoadRefusal | None:
    """vLLM's own rules for the attention heads under tensor parallel `tp`, in its order: the engine's
    config (`AttentionHeadsDivideTp`), then the QKV layer (`KvHeadsSplit`); None when both pass."""
    return AttentionHeadsDivideTp().judge(model, Split(tp), None) or KvHeadsSplit().judge(model, Split(tp), None)


@dataclass(frozen=True)
class AttentionHeadsDivideTp:
    """The attention heads divide tp (config/model.py `ModelConfig.verify_with_parallel_config`,
    called from config/vllm.py as the engine's config is made, before any layer is built; the same
    in every wheel the packs serve)."""

    name: str = "attention_heads"
    source: str = "config/model.py ModelConfig.verify_with_parallel_config"

    def judge(self, model, split, facts):
        heads = model.num_attention_heads
        if heads % split.tp:
            return LoadRefusal(self.name, f"ValueError: Total number of attention heads ({heads}) must be divisible "
                               f"by tensor parallel size ({split.tp}).", self.source, "config.num_attention_heads")
        return None


@dataclass(frozen=True)
class GptqDescActRefused:
    """A GPTQ checkpoint with group activation ordering (`desc_act: true` with scale groups; per channel it
    is a no-op, PackedInt.act_order false) is refused whatever the split, as its quantization config is made
    (model_executor/layers/quantization/auto_gptq.py `AutoGPTQConfig.__init__` and moe_wna16.py
    `MoeWNA16Config.__init__`, both calling utils/gptq_utils.py `normalize_and_validate_gptq_desc_act`),
    after the engine's config checks the heads (config/vllm.py `VllmConfig.__post_init__`) and before any
    layer is built. Read in the 0.30.0 and 0.33.0 wheels (not in the 0.28.0 and 0.29.0 wheels: the 0.26 pack and older
    build such a checkpoint with act order)."""

    name: str = "gptq_desc_act"
    source: str = ("model_executor/layers/quantization/auto_gptq.py AutoGPTQConfig.__init__ "
                   "(utils/gptq_utils.py normalize_and_validate_gptq_desc_act)")

    def judge(self, model, split, facts):
        for _, t, _ in _tensors(model):
            fmt = t.fmt
            if isinstance(fmt, PackedInt) and fmt.source == "gptq" and fmt.act_order:
                return LoadRefusal(self.name, "ValueError: GPTQ group activation ordering (desc_act=True) is no "
                                   "longer supported. Use a checkpoint with static activation ordering or "
                                   "desc_act=False.", self.source, "quantization_config.desc_act")
        return None


@dataclass(frozen=True)
class CtActorderRefused:
    """A compressed-tensors checkpoint whose weight scheme orders activations by group (`actorder`
    "group", its alias "dynamic", or true) is refused whatever the split, as its quantization config is
    made (model_executor/layers/quantization/compressed_tensors/compressed_tensors.py
    `CompressedTensorsConfig._quantization_scheme_map_from_config`, for every config group), with
    GPTQ's desc_act refusal; "weight" (alias "static") and none pass. Read in the 0.33.0 wheel; vLLM
    from 0.30 on, as its GPTQ twin (the 0.33 pack covers 0.30 to 0.33). Judged on the schemes the
    graph's tensors are served with (a config group that targets no layer is not seen)."""

    name: str = "ct_actorder"
    source: str = ("model_executor/layers/quantization/compressed_tensors/compressed_tensors.py "
                   "CompressedTensorsConfig._quantization_scheme_map_from_config")

    def judge(self, model, split, facts):
        for _, t, _ in _tensors(model):
            order = t.fmt.actorder if t.fmt is not None else None
            if order in ("group", "dynamic"):
                return LoadRefusal(self.name, "ValueError: Compressed-tensors group/dynamic activation ordering "
                                   f"(actorder={order!r}) is no longer supported. Use a checkpoint with static/weight "
                                   "activation ordering or without activation ordering.", self.source,
                                   "quantization_config.config_groups weights.actorder")
        return None


@dataclass(frozen=True)
class KvHeadsSplit:
    """Grouped KV heads split or replicated whole (model_executor/layers/linear.py
    `QKVParallelLinear.__init__`: tp at least the KV heads replicates each, `divide(tp_size,
    total_num_kv_heads)`, else splits them, `divide(total_num_kv_heads, tp_size)`; distributed/utils.py
    `ensure_divisibility` asserts "{numerator} is not divisible by {denominator}"). Latent attention
    (MLA) has no KV heads to split."""

    name: str = "kv_heads"
    source: str = ("model_executor/layers/linear.py QKVParallelLinear.__init__ "
                   "(distributed/utils.py ensure_divisibility)")

    def judge(self, model, split, facts):
        if model.attention_backend != "gqa":
            return None
        kv, tp = max(1, model.num_kv_heads), split.tp
        numerator, denominator = (tp, kv) if tp >= kv else (kv, tp)
        if numerator % denominator:
            return LoadRefusal(self.name, f"AssertionError: {numerator} is not divisible by {denominator}",
                               self.source, "qkv_proj")
        return None


@dataclass(frozen=True)
class Mamba2HeadsGroupsSplit:
    """A Mamba-2 mixer splits its heads and groups tp ways (model_executor/layers/mamba/mamba_mixer2.py
    `MambaMixer2.__init__`, read in the 0.33.0 wheel and run through the oracle: tests/golden/load_checks/
    vllm-0.33.0.json `mixers`): it asserts `num_heads % tp_size == 0`, then `(n_groups % tp_size) == 0 or
    n_groups == 1` (groups are replicated to follow the head shards only when there is one), before it builds
    any of its layers."""

    name: str = "mamba2_split"
    source: str = "model_executor/layers/mamba/mamba_mixer2.py MambaMixer2.__init__"

    def judge(self, model, split, facts):
        tp = split.tp
        for name, data in model.nodes():
            state = data.get("state")
            if state is None or state.kind != "mamba2":
                continue
            if state.heads % tp:
                return LoadRefusal(self.name, "AssertionError: Tensor parallel world size must divide num heads.",
                                   self.source, name)
            if state.groups % tp and state.groups != 1:
                return LoadRefusal(self.name, "AssertionError: If tensor parallel world size does not divide "
                                   "num_groups, then num_groups must equal 1.", self.source, name)
            return None  # every Mamba-2 mixer of a model has the same heads and groups
        return None


@dataclass(frozen=True)
class LinearShardsDivide:
    """A tensor-parallel linear layer splits whole rows, whatever its format (model_executor/layers/linear.py:
    ColumnParallelLinear `divide(output_size, tp)`, RowParallelLinear `divide(input_size, tp)`, where
    distributed/utils.py ensure_divisibility asserts "{numerator} is not divisible by {denominator}";
    MergedColumnParallelLinear, a fused layer, asserts `all(output_size % self.tp_size == 0 for output_size in
    output_sizes)` with no text, which the message gives with its numbers). Read in the 0.33.0 wheel and run
    through the oracle
    (tests/golden/load_checks/vllm-0.33.0-heads-groups.json `shards`); the layers have split so since vLLM's
    first tensor-parallel release, not re-read per wheel. The attention heads are the heads checks'."""

    name: str = "linear_shards"
    source: str = ("model_executor/layers/linear.py ColumnParallelLinear / RowParallelLinear.__init__ "
                   "(distributed/utils.py ensure_divisibility)")

    def judge(self, model, split, facts):
        tp = split.tp
        if tp == 1:
            return None
        for _, t, _ in _tensors(model):
            if t.split == "column" and t.outputs:  # a merged layer of unequal outputs
                sizes = merged_output_sizes(t, tp)
                if any(size % tp for size in sizes):
                    return LoadRefusal(self.name, "AssertionError: assert all(output_size % self.tp_size == 0 "
                                       f"for output_size in output_sizes) (outputs {sizes} over tp {tp})",
                                       "model_executor/layers/linear.py MergedColumnParallelLinear.__init__", t.name)
                continue
            size = t.cols if t.split == "row" else t.rows // t.parts if t.split == "column" else 0
            if not size % tp:
                continue
            if t.split == "column" and t.parts > 1:
                return LoadRefusal(self.name, "AssertionError: assert all(output_size % self.tp_size == 0 for "
                                   f"output_size in output_sizes) ({t.parts} outputs of {size} over tp {tp})",
                                   "model_executor/layers/linear.py MergedColumnParallelLinear.__init__", t.name)
            return LoadRefusal(self.name, f"AssertionError: {size} is not divisible by {tp}", self.source, t.name)
        return None


def _triton_takes_fp8(generation: str, refinement: dict) -> bool:
    """current_platform.supports_fp8(): CUDA from the capability the fact names (platforms/cuda.py:
    has_device_capability(89)); ROCm on CDNA or RDNA (platforms/rocm.py), every ROCm chip here."""
    if generation.startswith("sm"):
        return sm_of(generation) >= refinement["triton_fp8_min_sm"]
    return True


BUILDING_THE_MODEL = (AttentionHeadsDivideTp(), KvHeadsSplit(), LinearShardsDivide(), GptOssIntermediateDividesWorld(),
                      ValidateFp8BlockShape(), ValidateFp8BlockShapeMoe(), Wna16GroupsSplit())
"""The checks every release from 0.10 to 0.26 runs while it builds the model, in vLLM's order (a
pack's LOAD_CHECKS; 0.33 adds GPTQ's desc_act refusal after the attention heads' and NVFP4's between the
FP8 and the WNA16 checks); what differs between
releases is the facts they read."""


def refusal(checks, model: ModelGraph, split: Split, facts) -> LoadRefusal | None:
    """The first refusal of `checks` (a pack's LOAD_CHECKS, in vLLM's order), or None."""
    for check in checks:
        found = check.judge(model, split, facts)
        if found is not None:
            return found
    return None


def checked_schemes(checks) -> frozenset[str]:
    """The scheme keys (quantization.py `Scheme.key`, as fnmatch patterns) some check of `checks` judges."""
    keys = set()
    for check in checks:
        keys |= set(CHECKED.get(type(check).__name__, ()))
    return frozenset(keys)


def judged(checks, key: str) -> bool:
    """Whether some check of `checks` judges the scheme `key` ("int4_g32_marlin", "fp8_block")."""
    from fnmatch import fnmatchcase

    return any(fnmatchcase(key, pattern) for pattern in checked_schemes(checks))


# the scheme keys each check judges (a quantized scheme no check judges is stated: UNCHECKED); a PackedInt
# key is int{bits}_g{group}_{layout} when it has groups (per channel, int{bits}_ch_*, there is none to cut)
CHECKED = {"ValidateFp8BlockShape": ("fp8_block", "fp8_block_ue8m0"),  # a model's own check judges no scheme
           "ValidateFp8BlockShapeMoe": ("fp8_block", "fp8_block_ue8m0"), "Nvfp4InFeatures": ("nvfp4",),
           "Wna16GroupsSplit": ("int*_g*_*",), "GptqDescActRefused": ("int*_g*_*",),
           "CtActorderRefused": ("int*_g*_*", "nvfp4")}
