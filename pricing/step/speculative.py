"""Speculative decoding in the step model: what one decode step runs and how many tokens it emits.

What vLLM 0.33 runs per step with `--speculative-config {method, num_speculative_tokens: k}`
(vllm/v1/spec_decode/llm_base_proposer.py `propose`, vllm/v1/spec_decode/dspark.py):

    verification  one target forward over 1 + k tokens per decoding request (the request's last
                  sampled token and its k drafts, scheduled as one query of 1 + k tokens): weights
                  and each request's cache are read once, FLOPs, activations, collectives and the
                  LM head's logits scale with the 1 + k tokens (the rejection sampler compares the
                  target's logits at every draft position; its own work is a pass over those
                  logits, left in the per-step overhead)
    MTP (EAGLE)   k sequential drafter passes: the first over every token the target ran (the
                  drafter keeps its own cache in step), then k − 1 over one token per request,
                  each sampling one draft token from the (shared) LM head
    DSpark        one drafter pass over a block of k tokens per request (parallel drafting, the
                  DFlash input layout), the Markov head sampling the block; the drafter's context
                  KV written from the target's hidden states is not priced apart

A step emits 1 + E[accepted] tokens per decoding request. With `a_i` the chance that draft
position i is accepted given every earlier one was (the chain stops at the first rejection):

    E[accepted] = Σ_{j=1..k} Π_{i≤j} a_i

(position j counts only when positions 1..j all pass; with one rate α for every position this is
Leviathan et al. 2023, arXiv 2211.17192, eq. 1: (1 − α^(k+1)) / (1 − α) tokens per step), so the
time per output token is the step over 1 + E[accepted]. The rates are registry values
(step_model.yaml `speculative.<method>.acceptance`, with their sources); a position past the
list takes its last rate. A `--registry` overlay replaces them.
"""

from __future__ import annotations

from dataclasses import dataclass

from pricing.errors import InputError, mention
from pricing.registry import Registry, Sourced


@dataclass(frozen=True)
class Acceptance:
    """The drafter's per-position acceptance: rates[i] is the chance that draft position i + 1 is
    accepted given every earlier one was."""

    method: str
    rates: tuple[float, ...]
    provenance: Sourced | None = None

    def rate(self, position: int) -> float:
        """The conditional rate of draft position `position` (1-based); past the list, its last."""
        return self.rates[min(position, len(self.rates)) - 1]

    def expected_accepted(self, drafts: int) -> float:
        """E[accepted draft tokens] of a chain of `drafts` proposals: Σ_j Π_{i≤j} a_i."""
        total, chain = 0.0, 1.0
        for j in range(1, drafts + 1):
            chain *= self.rate(j)
            total += chain
        return total

    def tokens_per_step(self, drafts: int) -> float:
        """Tokens one decoding request gets per step: the target's own token and the accepted drafts."""
        return 1.0 + self.expected_accepted(drafts)

    def describe(self, drafts: int) -> str:
        """One phrase for the output: the rates assumed and the tokens a step yields."""
        shown = ", ".join(f"{self.rate(j):.2f}" for j in range(1, drafts + 1))
        where = (f" (registry {self.provenance.name}; {mention('speculative_acceptance')} or {mention('registry')} to "
                 "change)"
                 if self.provenance else " (given, in place of the registry's)")
        return (f"{self.method} × {drafts}: acceptance {shown} by draft position (conditional), "
                f"{self.tokens_per_step(drafts):.2f} tokens per request per step{where}")


def acceptance(reg: Registry, method: str) -> Acceptance:
    """The registry's acceptance of drafter `method`; bad input names the value and the fix."""
    name = f"step_model.speculative.{method}.acceptance"
    if name not in reg:
        raise InputError("speculative_method", f"no acceptance rates for {method!r} in the step model",
                         f"add {name} to pricing/registry/step_model.yaml or a {mention('registry')} overlay")
    p = reg[name]
    values = p.value if isinstance(p.value, list) else [p.value]
    try:
        rates = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        rates = ()
    if not rates or any(not 0.0 <= r <= 1.0 for r in rates):
        raise InputError(name.removeprefix("step_model."), f"{p.value!r} is not a list of rates in [0, 1]",
                         "give the conditional acceptance of each draft position, e.g. [0.85, 0.68]")
    return Acceptance(method, rates, p)


@dataclass(frozen=True)
class DraftPass:
    """One drafter forward: `queries` tokens for each of `decode` requests (at the step's
    context), the target's prefill chunk beside them (the first MTP pass only), logits at `logits`
    positions."""

    decode: int
    queries: int
    logits: int
    chunk: int = 0
    chunk_offset: int = 0


class SequentialDrafter:
    """MTP and EAGLE-style drafters: k passes, one draft token each (llm_base_proposer.propose:
    the first pass over the target's tokens, then `for token_index in range(k - 1)` over one
    token per request)."""

    def passes(self, decode: int, queries: int, chunk: int, chunk_offset: int, drafts: int) -> list[DraftPass]:
        requests = decode + (1 if chunk else 0)
        first = DraftPass(decode, queries, requests, chunk, chunk_offset)
        return [first] + [DraftPass(requests, 1, requests) for _ in range(drafts - 1)]


class BlockDrafter:
    """DSpark: one pass over a block of k draft positions per request (dspark.py
    set_inputs_first_pass: batch_size × num_speculative_tokens tokens), logits at each."""

    def passes(self, decode: int, queries: int, chunk: int, chunk_offset: int, drafts: int) -> list[DraftPass]:
        requests = decode + (1 if chunk else 0)
        return [DraftPass(requests, drafts, requests * drafts)]


DRAFTERS = {"mtp": SequentialDrafter(), "dspark": BlockDrafter()}


def drafter_for(method: str):
    """How drafter `method` runs (a method the graph can hold: see ModelGraph.speculative_methods)."""
    try:
        return DRAFTERS[method]
    except KeyError:
        raise InputError("speculative_method", f"the step model does not know how {method!r} drafts",
                         f"use one of {', '.join(DRAFTERS)}") from None
