"""The model families whose caches or buffers a module of their own resolves, listed here once
(vLLM's generic rules, pricing/kernel/caches.py and activations.py, serve every other model): the
caches a family's layers state (by attention backend: DeepSeek-V4's compressed, windowed and
indexer caches), the recurrent state of hybrid models (by builder family) and the buffers a
family's model allocates beside the forward pass (by attention backend)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pricing.graph.model import ModelGraph
from pricing.kernel import deepseek_v4, recurrent_state

# attention backend -> function(model, engine, chip, reg) -> (specs, notes)
STATED_CACHES: dict[str, Callable] = {"deepseek_v4": deepseek_v4.resolve_caches,
                                      "deepseek_v41": deepseek_v4.resolve_caches}
# builder family -> function(model, engine, chip, reg) -> list[KVCacheSpec]
STATE_CACHES: dict[str, Callable] = {"hybrid": recurrent_state.state_specs}
# attention backend -> function(model, engine, chip, reg) -> dict name -> bytes
MODEL_BUFFERS: dict[str, Callable] = {"deepseek_v4": deepseek_v4.model_buffers,
                                      "deepseek_v41": deepseek_v4.model_buffers}


@dataclass(frozen=True)
class FamilyHooks:
    """A model's own resolvers (None where its family has none)."""

    stated_caches: Callable | None
    state_caches: Callable | None
    model_buffers: Callable | None


def hooks(model: ModelGraph) -> FamilyHooks:
    """The resolvers of `model`'s family."""
    return FamilyHooks(STATED_CACHES.get(model.attention_backend), STATE_CACHES.get(model.family),
                       MODEL_BUFFERS.get(model.attention_backend))
