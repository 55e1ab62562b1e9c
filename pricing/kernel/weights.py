"""Weights per rank (spec: What is held before any request / Weights).

Linear layers at the width they are served in, the embedding at the checkpoint's width. Dense
layers are divided across the tensor-parallel group; experts are divided by expert parallelism
into whole experts per rank (the fuller rank reported when they do not divide evenly: vLLM's
determine_expert_map gives ranks 0..rem-1 one more), and without it every rank holds a slice of
every expert over the MoE tensor-parallel group tp × dp × pcp (vllm-0.33-memory.md §7).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pricing.graph.model import ModelGraph
from pricing.graph.nodes import Tensor
from pricing.kernel.deployment import Engine
from pricing.registry import Registry
from pricing.units import cdiv, round_up


@dataclass(frozen=True)
class WeightBytes:
    weights: int  # everything but the EPLB replicas
    eplb_redundant: int  # redundant expert replicas + EPLB's expert buffer, moved out of weights
    experts_per_rank: int  # routed experts on the fullest rank (physical slots)
    expert_layer_bytes: int  # one MoE layer's local expert weights on this rank


def tensor_bytes(rows: int, cols: int, fmt: dict, block: tuple[int, int] | None) -> int:
    """Bytes of one rows × cols tensor in a weight format (formats.yaml), scales included."""
    elements = rows * cols
    data = cdiv(elements * fmt["bits"], 8)
    scale = fmt["scale"]
    if scale == "none":
        return data
    if scale == "tensor":
        return data + fmt["scale_bytes"]
    if scale == "block":
        b_rows, b_cols = block or (128, 128)
        return data + cdiv(rows, b_rows) * cdiv(cols, b_cols) * fmt["scale_bytes"]
    return data + rows * cdiv(cols, fmt["group"]) * fmt["scale_bytes"] + fmt.get("tensor_scale_bytes", 0)


def shard(t: Tensor, tp: int, moe_tp: int, vocab_pad: int) -> tuple[int, int]:
    """This rank's rows × cols of tensor `t` (one expert's, for experts)."""
    if t.split == "column":
        return cdiv(t.rows, tp), t.cols
    if t.split == "row":
        return t.rows, cdiv(t.cols, tp)
    if t.split == "heads":
        per_head = t.rows // t.heads
        return max(1, t.heads // tp) * per_head, t.cols
    if t.split == "vocab":
        return cdiv(round_up(t.rows, vocab_pad), tp), t.cols
    if t.split == "expert_column":
        return (t.rows, t.cols) if moe_tp == 0 else (cdiv(t.rows, moe_tp), t.cols)
    if t.split == "expert_row":
        return (t.rows, t.cols) if moe_tp == 0 else (t.rows, cdiv(t.cols, moe_tp))
    return t.rows, t.cols


def weight_bytes(model: ModelGraph, engine: Engine, reg: Registry, used: dict) -> WeightBytes:
    pad = reg[engine.release.key("vocab_padding")]
    used[pad.name] = pad
    formats = {}
    tally: Counter = Counter()
    for _, data in model.nodes(engine.spec_method):
        for t in data["tensors"]:
            tally[t] += 1
    experts = model.routed_experts
    moe_tp = 0 if engine.ep else engine.tp * engine.dp * engine.pcp

    def local_experts(count: int) -> int:
        if not engine.ep:
            return count
        physical = count + (engine.redundant_experts if count == experts else 0)
        return cdiv(physical, engine.ep_size)

    local = local_experts(experts)
    total = 0
    expert_total = 0
    expert_layers = set()
    for t, n in tally.items():
        if t.fmt not in formats:
            entry = reg[f"formats.weight_formats.{t.fmt}"]
            used[entry.name] = entry
            formats[t.fmt] = entry.value
        rows, cols = shard(t, engine.tp, moe_tp, pad.value)
        one = tensor_bytes(rows, cols, formats[t.fmt], t.block)
        if t.split.startswith("expert"):
            expert_total += one * local_experts(t.count) * n
            if t.count == experts:
                expert_layers.add(t.name.rsplit(".experts", 1)[0])
        else:
            total += one * t.count * n
    eplb = 0
    per_layer = expert_total // max(1, len(expert_layers)) if expert_layers else 0
    if engine.eplb and experts:
        # the replicas: the redundant share of this rank's expert slots, moved out of weights
        eplb = expert_total * engine.redundant_experts // (experts + engine.redundant_experts)
        # EPLB's expert_buffer: one more MoE layer of local expert weights (eplb_state.py:492)
        eplb_buffer = per_layer
        return WeightBytes(total + expert_total - eplb, eplb + eplb_buffer, local, per_layer)
    return WeightBytes(total + expert_total, 0, local if experts else 0, per_layer)
