"""The activation peak (spec: Activations).

forward = buffers(family, tp) × max_num_batched_tokens × hidden size × 2 bytes, with a floor;
sampler = min(max_num_seqs, max_num_batched_tokens) logit rows × vocabulary × (model dtype + fp32
copy) (vLLM 0.33 V2 _dummy_sampler_run, vllm-0.33-memory.md §1.5); the peak is the larger of the
two, plus the model's own buffers allocated at the token budget or the context bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from pricing.graph.model import ModelGraph
from pricing.kernel.deployment import Engine
from pricing.registry import Registry

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
FP32 = 4

# model family (attention_backend) -> function(model, engine, chip, reg, used) -> dict name -> bytes
MODEL_BUFFERS: dict[str, Callable] = {}


@dataclass(frozen=True)
class Activation:
    forward: int
    sampler: int
    model_buffers: int
    buffers: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def peak(self) -> int:
        return max(self.forward, self.sampler) + self.model_buffers


def tp_key(table: dict, tp: int):
    keys = sorted(int(k) for k in table)
    chosen = keys[0]
    for k in keys:
        if tp >= k:
            chosen = k
    return chosen if chosen in table else str(chosen)


def activation(model: ModelGraph, engine: Engine, chip, reg: Registry, used: dict) -> Activation:
    counts = reg[f"cost_model_memory.activation_buffers.{model.activation_family}"]
    floor = reg["cost_model_memory.activation_floor_bytes"]
    width = reg["cost_model_memory.activation_element_bytes"]
    for entry in (counts, floor, width):
        used[entry.name] = entry
    count = Fraction(str(counts.value[tp_key(counts.value, engine.tp)]))
    forward = int(count * engine.max_num_batched_tokens * model.hidden_size * width.value)
    forward = max(forward, int(floor.value))
    rows = min(engine.max_num_seqs, engine.max_num_batched_tokens)
    sampler = rows * model.vocab_size * (DTYPE_BYTES.get(model.dtype, 2) + FP32)
    buffers = {}
    hook = MODEL_BUFFERS.get(model.attention_backend)
    if hook is not None:
        buffers = hook(model, engine, chip, reg, used)
    return Activation(forward, sampler, sum(buffers.values()), buffers)
