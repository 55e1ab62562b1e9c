"""The activation peak (spec: Activations).

forward = buffers(family, tp) × max_num_batched_tokens × hidden size × 2 bytes, with a floor;
sampler = rows × vocabulary × bytes per logit + max_num_batched_tokens × hidden × bytes per
hidden element, with rows = min(max_num_seqs, max_num_batched_tokens): the dummy sampler run
holds the logits, their fp32 copy and the processing temporaries of the warm-up pass (top-k/top-p
sort, penalties, logprobs; vllm-0.33-memory.md §1.5) beside the forward's hidden states. The two
bytes-per figures are fitted on real start-ups (registry cost_model_memory, with their era; older
releases' values by era and top-k/top-p path are vllm_eras.laws_until, laid over by the calibration). The
peak is the larger of forward and sampler, plus the model's own buffers allocated at the token
budget or the context bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from pricing.graph.model import ModelGraph
from pricing.kernel.caches import DTYPE_BYTES  # noqa: F401  (model-dtype widths, used by model hooks)
from pricing.kernel.deployment import Engine
from pricing.registry import Reads


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


def activation(model: ModelGraph, engine: Engine, chip, reg: Reads, hook: Callable | None) -> Activation:
    """The forward pass's and the sampler's peaks, and the buffers the model's family allocates
    beside them (`hook`: pricing/kernel/families.py MODEL_BUFFERS, None for none)."""
    counts = reg[f"cost_model_memory.activation_buffers.{model.activation_family}"]
    floor = reg["cost_model_memory.activation_floor_bytes"]
    width = reg["cost_model_memory.activation_element_bytes"]
    count = Fraction(str(counts.value[tp_key(counts.value, engine.tensor_parallel_size)]))
    forward = int(count * engine.max_num_batched_tokens * model.hidden_size * width.value)
    forward = max(forward, int(floor.value))
    per_logit = reg["cost_model_memory.sampler_bytes_per_logit"]
    per_hidden = reg["cost_model_memory.sampler_hidden_bytes"]
    rows = min(engine.max_num_seqs, engine.max_num_batched_tokens)
    sampler = int(Fraction(str(per_logit.value)) * rows * model.vocab_size
                  + Fraction(str(per_hidden.value)) * engine.max_num_batched_tokens * model.hidden_size)
    buffers = {}
    if hook is not None:
        buffers = hook(model, engine, chip, reg)
    return Activation(forward, sampler, sum(buffers.values()), buffers)
