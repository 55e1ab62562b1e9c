"""`--serving auto`'s one queueing model: the aggregated pool and the disaggregated fleet, each
sized its own way (the aggregated one by its throughput at the rate, the disaggregated one with an
M/D/1 queue at its prefill pool), judged again on the same simulated arrivals before the cheaper
is chosen: `vllm bench serve --request-rate` Poisson arrivals (planner/defaults.yaml serving.requests
requests, seed serving.seed) through vLLM 0.33's scheduler on the step model (pricing/serving),
as service targets are judged (planner/candidates/slo.py).

Each pool's instances share the rate evenly. An aggregated instance runs the requests whole; a
disaggregated request is its prefill instance's run with one output token (its wait and prefill),
the KV hand-over, then its decode instance's run of requests arriving prefilled (pricing/serving's
own two runs), so its mean TTFT is the sum of the three means and its TPOT the decode run's."""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel, Field

from planner import defaults
from planner.kinds import Serving
from planner.request import ServiceSpec


class Simulated(BaseModel):
    """One plan's means on the shared arrivals, and whether they meet the mean targets."""

    serving: Serving
    ttft_ms: float = Field(description="mean time to first token, queueing included")
    tpot_ms: float = Field(description="mean time per output token after the first")
    meets: bool = Field(description="both means within the ttft_ms and tpot_ms targets (those given)")


class SameArrivals(BaseModel):
    """Both plans on the same simulated arrivals (`ServingChoice.same_arrivals`)."""

    requests_per_second: float
    requests: int = Field(description="Poisson requests simulated through each instance")
    seed: int
    aggregated: Simulated
    disaggregated: Simulated


def _run(kernel, service: ServiceSpec, rate: float, output=None, prefilled: bool = False):
    """One instance of `kernel` at `rate` requests/s of the service's lengths (its KV margin held back)."""
    from planner.candidates.slo import traffic
    from pricing.serving import Fixed, Instance, StepCost, simulate
    from pricing.step import StepModel

    inst = Instance.of(kernel)
    inst = replace(inst, blocks=int(inst.blocks * (1 - service.kv_margin)))
    cost = StepCost.of(StepModel(kernel, rates_accepted=service.speculative_acceptance), inst)
    sent = traffic(service, rate)
    if output is not None:
        sent = replace(sent, output=Fixed(output))
    return simulate(inst, cost, replace(sent, prefilled=prefilled))


def _mean(served, index: int) -> float:
    values = [r[index] for r in served.per_request]
    return sum(values) / len(values)


def judge(service: ServiceSpec, agg, dis) -> SameArrivals:
    """The aggregated `agg.best` and the disaggregated `dis` on the same arrivals at the service's rate."""
    rate = service.workload.requests_per_second
    best = agg.best
    a = _run(best.kernel, service, rate / best.replicas)
    prefill = _run(dis.prefill.kernel, service, rate / dis.prefill.replicas, output=1)
    decode = _run(dis.decode.kernel, service, rate / dis.decode.replicas, prefilled=True)
    d_ttft = _mean(prefill, 0) + dis.handover.transfer_ms / 1000 + _mean(decode, 0)

    def simulated(kind: Serving, ttft: float, tpot: float) -> Simulated:
        meets = (service.ttft_ms is None or ttft * 1000 <= service.ttft_ms) and (
            service.tpot_ms is None or tpot * 1000 <= service.tpot_ms)
        return Simulated(serving=kind, ttft_ms=round(ttft * 1000, 1), tpot_ms=round(tpot * 1000, 2), meets=meets)

    return SameArrivals(requests_per_second=rate, requests=defaults.value("serving.requests"),
                        seed=defaults.value("serving.seed"),
                        aggregated=simulated(Serving.AGG, _mean(a, 0), _mean(a, 1)),
                        disaggregated=simulated(Serving.DISAGG, d_ttft, _mean(decode, 1)))
