"""The two roles of a disaggregated fleet (vLLM 0.33 NixlConnector): a prefill instance and a
decode instance, both vLLM engines sized by the same kernel from the same candidate table, each
with its own flags and its own figures.

A prefill instance (kv_role kv_producer) runs each prompt through its token budget with few
sequences (a budget of k whole prompts runs them in one step: their linear work together, each
prompt's causal attention its own), and holds each prompt's KV cache until the decode side has read it (pull mode: the
blocks are freed when the read is reported, or when the lease expires, registry
kv_transfer.nixl.kv_lease_seconds). Its figures: one prompt's prefill alone (the service time),
the prompts a rank prefills per second, and the prompts its pool holds.

A decode instance (kv_role kv_consumer) holds every running request's whole context and, beside
them, the requests whose KV cache is still crossing: the scheduler allocates a request's prompt
blocks on admission and keeps it waiting for the remote KV (WAITING_FOR_REMOTE_KVS,
nixl/pull_scheduler.py update_state_after_alloc), outside max_num_seqs but inside the pool. So a
rank's pool must hold b running requests plus the b · t_transfer / (osl · TPOT) arriving ones
(Little's law), and b is the largest batch whose pure decode step meets the TPOT target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from planner.candidates.service import ResolvedService
from planner.candidates.table import Row
from planner.numbers import duration, given, requests, tokens
from planner.request import ServiceSpec
from pricing.chips import Chip
from pricing.kernel import Kernel
from pricing.step import StepModel
from pricing.step.serving import largest_batch, step_seconds_per_token, ttft
from pricing.units import cdiv, largest_such


@dataclass(frozen=True)
class Refused:
    """Why a row cannot serve a role: the constraint by name (flags: vLLM refuses it; context: its
    pool holds too little; latency: a target is out of reach) and the sentence."""

    constraint: str
    text: str


class Role:
    """What a role adds to a candidate instance: the connector's kv_role and its flags."""

    kv_role: str
    name: str

    def kernel(self, service: ResolvedService, chip: Chip, row: Row) -> Kernel:
        """The row's kernel in this role, at the service's context length."""
        d = row.deployment.model_copy(update={"kv_role": self.kv_role})
        return Kernel.of(service.graph, d, chip, service.registry, release=service.release)


@dataclass(frozen=True)
class PrefillFigures:
    """One prefill candidate: a prompt's prefill alone, the prompts a rank prefills per second,
    the prompts its pool holds, and the max_num_seqs it runs with."""

    row: Row
    prompt_seconds: float  # one isl-token prompt to its first token through the token budget, nothing beside it
    # (the API server's first_token_seconds and the prefill's steps)
    prompts_per_second_per_rank: float
    prompts_held_per_rank: int  # isl-token prompts the rank's pool holds (margin applied)
    max_num_seqs: int  # prompts one step takes: ceil(budget / isl)
    stage_share: Fraction = Fraction(1)  # the largest pipeline stage's part of a prompt's KV bytes (1 without stages)

    @property
    def service_rate(self) -> float:
        return self.prompts_per_second_per_rank


class PrefillRole(Role):
    kv_role = "kv_producer"
    name = "prefill"

    def figures(self, resolved: ResolvedService, chip: Chip, row: Row) -> PrefillFigures | Refused:
        """The row as a prefill instance, or why it cannot be one (its pool holds no prompt; vLLM
        refuses its pipeline stages).

        With pp stages a prompt crosses every stage in turn (the step model's pipeline time: its
        prefill alone), while vLLM keeps pp batches in flight, one per stage (a request is in one
        batch at a time): the instance prefills pp times the prompts per second of one traversal,
        and queues like one server at a stage's time (an arrival waits only for the first stage).
        Each stage's pool holds its own layers' blocks of every prompt."""
        from pricing.kernel.connector import pipeline_refusal

        service = resolved.spec
        w = service.workload
        kernel = self.kernel(resolved, chip, row)
        refused = pipeline_refusal(kernel)
        if refused is not None:
            return Refused("flags", refused)
        sm = StepModel(kernel, rates_accepted=service.speculative_acceptance)
        budget = row.max_num_batched_tokens
        alone = ttft(sm, 1, w.isl, w.isl)  # to its first token: the API server's time and the prefill's steps
        per_step = budget // w.isl  # whole prompts one step takes
        rate = 1.0 / (alone - sm.eff.first_token_seconds)  # the engine's own: the API server's time is beside it
        if per_step >= 2:  # one step of k prompts: their tokens' linear work together, each prompt's own attention
            step = sm.decode_step(0, w.isl, chunk=per_step * w.isl)
            one = sm.decode_step(0, w.isl, chunk=w.isl)
            seconds = sm.time(step).seconds - sm.attention_seconds(step) + per_step * sm.attention_seconds(one)
            rate = max(rate, per_step / seconds)
        rate *= row.shape.pp  # pp batches in flight, one per stage
        stages = kernel.instance.ranks  # every stage's rank
        prompts = [k.request_kv_bytes(w.isl) for k in stages]
        held = min(int(k.kv_pool() * (1 - service.kv_margin(k.reg))) // b if b else row.max_num_seqs
                   for k, b in zip(stages, prompts, strict=True))
        seqs = max(1, min(held, cdiv(budget, w.isl)))
        if held < 1:
            return Refused("context", f"its pool holds no {tokens(w.isl)} prompt")
        share = Fraction(max(prompts), sum(prompts)) if sum(prompts) else Fraction(1)
        return PrefillFigures(replace(row, max_num_seqs=seqs), alone, rate, held, seqs, share)


@dataclass(frozen=True)
class DecodeFigures:
    """One decode candidate at a hand-over time: the running batch per rank, its TPOT and step,
    the requests arriving per rank its pool also holds, and the requests per second an instance
    serves."""

    row: Row
    batch_per_rank: int  # running requests (max_num_seqs)
    tpot_seconds: float
    step_seconds: float
    arriving_per_rank: float  # requests waiting for their KV cache, by Little's law
    memory_per_rank: int  # requests at the context length the rank's pool holds
    binds: str  # what sets the batch: tpot, or memory (the running and the arriving)
    requests_per_second: float  # one instance


class DecodeRole(Role):
    kv_role = "kv_consumer"
    name = "decode"

    def step_model(self, service: ResolvedService, chip: Chip, row: Row) -> StepModel:
        return StepModel(self.kernel(service, chip, row), rates_accepted=service.spec.speculative_acceptance)

    def figures(self, sm: StepModel, service: ServiceSpec, row: Row, transfer_seconds: float,
                arriving_share: float) -> DecodeFigures | Refused:
        """The row as a decode instance when each request's KV cache takes `transfer_seconds` to
        arrive; `arriving_share` is the pool an arriving request holds (its prompt) over one at the
        context length. A rank runs the largest batch b whose pure decode step meets the TPOT
        target and whose pool holds b + ceil(share · b · t / (osl · TPOT(b))) requests."""
        w = service.workload
        context = w.isl + w.osl // 2  # the decoding requests' mean context (pricing/step/serving.py Workload)
        held = row.held_per_rank
        limit = held
        if service.tpot_ms is not None:
            limit = largest_batch(sm, held, context, None, tpot_seconds=service.tpot_ms / 1000)
            if limit < 1:
                one = step_seconds_per_token(sm, 1, context, None) * 1000
                return Refused("latency", f"one request takes {duration(one)} per output token, above the "
                                          f"{given(service.tpot_ms)} ms target")

        def arriving(b: int) -> float:
            return b * transfer_seconds / (w.osl * step_seconds_per_token(sm, b, context, None))

        def fits(b: int) -> bool:
            return b + math.ceil(arriving_share * arriving(b) - 1e-9) <= held

        batch = largest_such(fits, 1, limit)
        if batch < 1:
            return Refused("context", f"its pool holds {requests(held)} of the context length, none beside the "
                                      "arriving ones")
        tpot = step_seconds_per_token(sm, batch, context, None)
        binds = "tpot" if batch == limit and limit < held else "memory"
        rate = row.shape.dp * batch / (w.osl * tpot)
        return DecodeFigures(replace(row, max_num_seqs=min(row.max_num_seqs, batch)), batch, tpot,
                             tpot * sm.tokens_per_step, arriving(batch), held, binds, rate)


PREFILL, DECODE = PrefillRole(), DecodeRole()
