"""`--serving auto`'s one queueing model: the aggregated pool and the disaggregated fleet, each
sized its own way (the aggregated one by its throughput at the rate, or by the serving simulator
under percentile targets; the disaggregated one with an M/D/1 queue at its prefill pool), judged
again on the same simulated arrivals before the cheaper is chosen: `vllm bench serve
--request-rate` Poisson arrivals (planner/defaults.yaml serving.requests requests, seed
serving.seed) through vLLM 0.33's scheduler on the step model (pricing/serving), as service targets
are judged (planner/candidates/slo.py).

Each pool's instances share the rate evenly. An aggregated instance runs the requests whole; a
disaggregated request is its prefill instance's run with one output token (its wait and prefill),
the KV hand-over, then its decode instance's run of requests arriving prefilled (pricing/serving's
own two runs). The i-th request sent is the i-th of both runs: its TTFT is its prefill TTFT, the
hand-over and its first decode step (queueing at either included), its TPOT the decode run's, its
E2E its TTFT and the rest of its decode (`disaggregated`). Both plans are judged by the service's
mean targets (ttft_ms, tpot_ms) and, where it names them, by its percentile targets and goodput
(`slo`), each read off those per-request figures as `vllm bench serve` reads them."""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel, Field

from planner.defaults import View
from planner.kinds import Serving
from planner.numbers import duration, given
from planner.request import ServiceSpec


class Simulated(BaseModel):
    """One plan on the shared arrivals: its means and, under percentile targets, the percentiles
    they name and what it misses."""

    serving: Serving
    ttft_ms: float = Field(description="mean time to first token, queueing included")
    tpot_ms: float = Field(description="mean time per output token after the first")
    percentiles: dict[str, float] = Field(default_factory=dict, description="each percentile target's figure, ms "
                                          "('p99_ttft_ms': 412.0), as the serving simulator reads it")
    goodput: float | None = Field(None, description="the fraction of requests meeting every per-request bound "
                                  "(with a goodput target)")
    misses: list[str] = Field(default_factory=list, description="the targets it misses, with its figure")
    meets: bool = Field(description="both means within the ttft_ms and tpot_ms targets (those given) and every "
                                    "percentile and goodput target met")

    def figures_words(self) -> str:
        """The percentile figures in words: 'p99 TTFT 412 ms, p90 TPOT 12.3 ms' (and goodput)."""
        from planner.limits import METRIC_NAMES
        from planner.numbers import percent

        said = []
        for key, ms in self.percentiles.items():
            p, metric, _ = key.split("_")
            said.append(f"{p} {METRIC_NAMES[metric]} {duration(ms)}")
        return ", ".join(said + ([f"goodput {percent(self.goodput)}"] if self.goodput is not None else []))


class SameArrivals(BaseModel):
    """Both plans on the same simulated arrivals (`ServingChoice.same_arrivals`)."""

    requests_per_second: float
    requests: int = Field(description="Poisson requests simulated through each instance")
    seed: int
    aggregated: Simulated
    disaggregated: Simulated


def _run(kernel, service: ServiceSpec, rate: float, reads: View, output=None, prefilled: bool = False):
    """One instance of `kernel` at `rate` requests/s of the service's lengths (its KV margin held back)."""
    from planner.candidates.slo import traffic
    from pricing.serving import Fixed, Instance, StepCost, simulate
    from pricing.step import StepModel

    inst = Instance.of(kernel)
    inst = replace(inst, blocks=int(inst.blocks * (1 - service.kv_margin(kernel.reg))))
    cost = StepCost.of(StepModel(kernel, rates_accepted=service.speculative_acceptance), inst)
    sent = traffic(service, rate, None, reads)
    if output is not None:
        sent = replace(sent, output=Fixed(output))
    return simulate(inst, cost, replace(sent, prefilled=prefilled))


def _mean(served, index: int) -> float:
    values = [r[index] for r in served.per_request]
    return sum(values) / len(values)


def disaggregated(prefill, decode, transfer_seconds: float):
    """A disaggregated request's figures (pricing/serving Served) from its prefill run and its decode
    run: the i-th request's TTFT is its prefill TTFT + `transfer_seconds` + its decode TTFT (the first
    step, after any wait for admission), its TPOT its decode TPOT, its E2E its TTFT and its decode
    time after the first token; ITL is the decode run's."""
    from pricing.serving.simulate import Distribution, Served

    rows = tuple((p[0] + transfer_seconds + d[0], d[1], p[0] + transfer_seconds + d[2])
                 for p, d in zip(prefill.per_request, decode.per_request, strict=True))
    return Served(ttft=Distribution.of([r[0] for r in rows]), tpot=Distribution.of([r[1] for r in rows]),
                  itl=decode.itl, e2e=Distribution.of([r[2] for r in rows]), per_request=rows,
                  duration=decode.duration, requests=decode.requests, input_tokens=prefill.input_tokens,
                  output_tokens=decode.output_tokens, preemptions=prefill.preemptions + decode.preemptions,
                  dp=decode.dp)


def simulated(service: ServiceSpec, kind: Serving, served) -> Simulated:
    """`served` judged by the service's mean targets and, where it has them, its percentile targets."""
    from planner.app.targets import missed_phrases
    from planner.candidates import slo

    ttft, tpot = _mean(served, 0) * 1000, _mean(served, 1) * 1000
    missed = [f"mean TTFT {duration(ttft)} against ≤ {given(service.ttft_ms)} ms"] if (
        service.ttft_ms is not None and ttft > service.ttft_ms) else []
    missed += [f"mean TPOT {duration(tpot)} against ≤ {given(service.tpot_ms)} ms"] if (
        service.tpot_ms is not None and tpot > service.tpot_ms) else []
    percentiles, met = {}, None
    if service.slo is not None:
        percentiles = {f"p{p}_{m}_ms": round(served.metric(m).percentile(p) * 1000, 2)
                       for m, p, _ in service.slo.targets}
        met = round(slo.goodput(service, served), 4) if service.slo.goodput is not None else None
        missed += missed_phrases(slo.misses(service, served))
    return Simulated(serving=kind, ttft_ms=round(ttft, 1), tpot_ms=round(tpot, 2), percentiles=percentiles,
                     goodput=met, misses=missed, meets=not missed)


def judge(service: ServiceSpec, agg, dis, reads: View) -> SameArrivals:
    """The aggregated `agg.best` and the disaggregated `dis` on the same arrivals at the service's rate
    (the simulator's defaults read through `reads`)."""
    rate = service.workload.requests_per_second
    best = agg.best
    a = _run(best.kernel, service, rate / best.replicas, reads)
    return SameArrivals(requests_per_second=rate, requests=reads.value("serving.requests"),
                        seed=reads.value("serving.seed"), aggregated=simulated(service, Serving.AGG, a),
                        disaggregated=simulated(service, Serving.DISAGG, fleet_served(service, dis, rate, reads)))


def fleet_served(service: ServiceSpec, dis, rate: float, reads: View):
    """The disaggregated fleet `dis` (a DisaggPlan) at `rate` requests/s: its requests' figures."""
    prefill = _run(dis.prefill.kernel, service, rate / dis.prefill.replicas, reads, output=1)
    decode = _run(dis.decode.kernel, service, rate / dis.decode.replicas, reads, prefilled=True)
    return disaggregated(prefill, decode, dis.handover.transfer_ms / 1000)
