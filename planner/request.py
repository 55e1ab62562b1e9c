"""What the user asks the planner: one service (model, target, allowed vLLM settings) and the
limits of the pool it may use. A scenario is several services over one set of limits."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator, model_validator

from planner.limits import (  # noqa: F401  (the scenario file and the commands read them here too)
    MAX_CONCURRENCY,
    MAX_GPUS,
    MAX_GPUS_PER_NODE,
    MAX_GRID_POINTS,
    MAX_PRICE,
    MAX_RATE,
    MAX_SPARE,
    MAX_SPECULATIVE,
    METRIC_NAMES,
    METRICS,
    MIN_CONTEXT,
    PERCENTILES,
)
from pricing.errors import mention, suggest
from pricing.registry import Registry
from pricing.units import cdiv

Count = Annotated[int, Strict()]  # a whole number as typed: `concurrency: true` or 4.5 is no count


def rates_in_range(v):
    """Acceptance rates, each a probability (a service's and a scenario file's)."""
    if v is not None and any(not 0.0 <= r <= 1.0 for r in v):
        raise ValueError(f"every rate must be in [0, 1], got {', '.join(f'{r:g}' for r in v)}")
    return v


class LengthHistogram(BaseModel):
    """Token counts as a histogram: bin i holds `weights[i]` of the requests, drawn uniform in
    [edges[i], edges[i + 1]) (pricing/serving/traffic.py Histogram)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    edges: tuple[Count, ...] = Field(min_length=2, description="bin edges in tokens, rising, the first at least 1")
    weights: tuple[float, ...] = Field(min_length=1, description="each bin's share (any scale; one fewer than edges)")

    @model_validator(mode="after")
    def _bins(self):
        if len(self.edges) != len(self.weights) + 1:
            raise ValueError(f"give one edge more than the weights; got {len(self.edges)} edges and "
                             f"{len(self.weights)} weights")
        if self.edges[0] < 1 or any(a >= b for a, b in zip(self.edges, self.edges[1:], strict=False)):
            raise ValueError("edges must rise from at least 1 token")
        if any(not (w >= 0 and math.isfinite(w)) for w in self.weights) or not sum(self.weights) > 0:
            raise ValueError("weights must be 0 or more, at least one above 0")
        return self

    def histogram(self, source: str = ""):
        from pricing.serving import Histogram

        return Histogram(self.edges, self.weights, source)

    @property
    def longest(self) -> int:
        """The most tokens a draw gives: the top edge less one (bins are half-open)."""
        return self.edges[-1] - 1


class LengthsSpec(BaseModel):
    """A request mix's prompt and output lengths as histograms, with where they came from (a
    trace's own, or given inline)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    prompt: LengthHistogram
    output: LengthHistogram
    source: str = Field("", description="where the histograms came from")


def shipped_lengths(name: str) -> LengthsSpec:
    """The histograms shipped as pricing/serving/lengths/NAME.yaml (InputError naming the known ones)."""
    from pricing.serving import shipped

    prompt, output = shipped(name)
    return LengthsSpec(prompt=LengthHistogram(edges=prompt.edges, weights=prompt.weights),
                       output=LengthHistogram(edges=output.edges, weights=output.weights),
                       source=f"shipped {name}: {prompt.source}")


class WorkloadSpec(BaseModel):
    """The requests a service sees: mean input and output tokens, and the rate they arrive at; or
    their lengths as distributions (`lengths`: a shipped histogram's name, e.g. sharegpt, or the
    histograms), every simulated request drawn from them, isl/osl then their means rounded up."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    isl: Count = Field(ge=1, description="mean input (prompt) tokens of a request")
    osl: Count = Field(ge=1, description="mean output tokens of a request")
    requests_per_second: float | None = Field(None, gt=0, le=MAX_RATE,
                                              description="requests the pool must serve each second")
    range_ratio: float = Field(0.0, ge=0, lt=1, description="lengths drawn uniform in [n (1 - r), n (1 + r)], as "
                               "vllm bench serve --random-range-ratio; 0: every request isl/osl")
    lengths: str | LengthsSpec | None = Field(None, description="lengths drawn from histograms: a shipped name "
                                              "(pricing/serving/lengths: sharegpt) or {prompt, output} of {edges, "
                                              "weights}; isl/osl may be left out (their means, rounded up) and must "
                                              "agree with them when given")

    @model_validator(mode="before")
    @classmethod
    def _means_of_lengths(cls, data):
        """isl/osl from the histograms' means (rounded up) when left out; a conflict is refused."""
        if not isinstance(data, dict) or data.get("lengths") is None:
            return data
        lengths = data["lengths"]
        if isinstance(lengths, str):
            from pricing.errors import InputError

            try:
                spec = shipped_lengths(lengths)
            except InputError as err:
                raise ValueError(f"no shipped length histogram {lengths!r}; {err.fix}") from None
        else:
            spec = LengthsSpec.model_validate(lengths)
        if data.get("range_ratio"):
            raise ValueError("give lengths or range_ratio, not both: the histograms already spread the lengths")
        data = dict(data)
        for key, hist in (("isl", spec.prompt), ("osl", spec.output)):
            mean = math.ceil(hist.histogram().mean)
            given = data.get(key)
            if given is None:
                data[key] = mean
            elif given != mean:
                raise ValueError(f"{key} {given} is not the lengths' mean {key} {mean} (rounded up); leave {key} out "
                                 f"or give {mean}")
        return data

    def histograms(self) -> LengthsSpec | None:
        """The prompt and output histograms the lengths draw from (None: isl/osl, ± range_ratio)."""
        return shipped_lengths(self.lengths) if isinstance(self.lengths, str) else self.lengths

    @property
    def longest(self) -> int:
        """Tokens of the longest request the lengths draw (vllm/benchmarks/datasets.py RandomDataset's
        range: ceil(n (1 + r)) for the prompt and the output; the histograms' top edges)."""
        spec = self.histograms()
        if spec is not None:
            return spec.prompt.longest + spec.output.longest
        return math.ceil(self.isl * (1 + self.range_ratio)) + math.ceil(self.osl * (1 + self.range_ratio))


class SloSpec(BaseModel):
    """Service targets as users write them: a percentile of TTFT, TPOT, ITL or end-to-end latency
    under a bound in ms (`p99_ttft_ms: 2000`), and the fraction of requests that must meet every
    per-request bound (`goodput: 0.99`, as `vllm bench serve --goodput` counts them: TTFT, TPOT
    and E2E; ITL has no per-request value)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    p50_ttft_ms: float | None = Field(None, gt=0)
    p90_ttft_ms: float | None = Field(None, gt=0)
    p99_ttft_ms: float | None = Field(None, gt=0)
    p50_tpot_ms: float | None = Field(None, gt=0)
    p90_tpot_ms: float | None = Field(None, gt=0)
    p99_tpot_ms: float | None = Field(None, gt=0)
    p50_itl_ms: float | None = Field(None, gt=0)
    p90_itl_ms: float | None = Field(None, gt=0)
    p99_itl_ms: float | None = Field(None, gt=0)
    p50_e2e_ms: float | None = Field(None, gt=0)
    p90_e2e_ms: float | None = Field(None, gt=0)
    p99_e2e_ms: float | None = Field(None, gt=0)
    goodput: float | None = Field(None, gt=0, le=1, description="fraction of requests meeting every bound")

    @property
    def targets(self) -> list[tuple[str, int, float]]:
        """(metric, percentile, bound in ms) of every target given."""
        return [(m, p, getattr(self, f"p{p}_{m}_ms")) for m in METRICS for p in PERCENTILES
                if getattr(self, f"p{p}_{m}_ms") is not None]

    def bound(self, metric: str) -> float | None:
        """The tightest bound given on `metric` (ms): what one request must meet for goodput."""
        return min((ms for m, _, ms in self.targets if m == metric), default=None)

    @model_validator(mode="after")
    def _something(self):
        if not self.targets:
            raise ValueError("give at least one percentile target, e.g. p99_ttft_ms: 2000")
        if self.goodput is not None and not any(m != "itl" for m, _, _ in self.targets):
            raise ValueError("goodput counts requests meeting TTFT, TPOT or E2E bounds: give one of them")
        return self


def implicit_concurrency(service_targets: bool, concurrency: int) -> bool:
    """With service targets at a rate and the concurrency left at 1, the concurrency is no target:
    the pool is sized by the rate and the targets, and a headroom over 1 means nothing."""
    return service_targets and concurrency == 1


class ServiceSpec(BaseModel):
    """One model to serve at a concurrency and context length, and the vLLM settings searched."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    quantization: str | None = None
    concurrency: int = Field(ge=1, le=MAX_CONCURRENCY, description="concurrent requests at the context length")
    context_length: int | None = Field(None, ge=MIN_CONTEXT, description="max_model_len; None: at a rate the "
                                       "workload's longest request, else the model's maximum")
    headroom: float = Field(0.0, ge=0, description="percent of extra concurrency the pool must hold")
    num_speculative_tokens: Count = Field(0, ge=0, le=MAX_SPECULATIVE)
    speculative_method: str | None = None
    speculative_acceptance: tuple[float, ...] | None = Field(
        None, min_length=1, description="the drafter's conditional acceptance by draft position (a later position "
        "takes the last); None: the registry's (step_model.yaml speculative.<method>.acceptance)")
    kv_cache_dtypes: tuple[str, ...] = ("auto",)
    tp: tuple[int, ...] | None = Field(None, description="allowed tp sizes; None: all that divide the heads")
    pp: tuple[int, ...] | None = Field(None, description="allowed pipeline parallel sizes; None: the defaults grid")
    dp: tuple[int, ...] | None = Field(None, description="allowed data parallel sizes; None: the defaults grid")
    dcp: tuple[int, ...] | None = Field(None, description="allowed decode context parallel sizes; None: all valid")
    gpu_memory_utilization: tuple[float, ...] | None = None
    max_num_batched_tokens: tuple[int, ...] | None = None
    vllm_version: str = Field("0.33", description="the vLLM release whose rules and defaults apply")
    margin: float | None = Field(None, ge=0, lt=100, description="percent of the predicted KV pool held back for "
                                 "the fixed-memory laws' error; None: the registry's, from the calibration")
    tpot_ms: float | None = Field(None, gt=0, description="time per output token each request must get")
    ttft_ms: float | None = Field(None, gt=0, description="time to first token of a prompt (the workload's isl)")
    workload: WorkloadSpec | None = None
    serving: Literal["agg", "disagg", "auto"] = Field(
        "agg", description="agg: one pool of aggregated instances; disagg: a prefill pool and a decode pool (vLLM's "
        "NixlConnector); auto: plan both and keep the cheaper")
    slo: SloSpec | None = Field(None, description="percentile targets at the workload's rate (the serving simulator)")

    @model_validator(mode="after")
    def _slo_at_a_rate(self):
        if self.slo is not None and (self.workload is None or self.workload.requests_per_second is None):
            raise ValueError("service targets (slo) are met at a rate: give the workload's isl, osl and "
                             "requests_per_second")
        return self

    def kv_margin(self, registry: Registry) -> float:
        """The margin as a fraction: the one given, or `registry`'s cost_model_memory.kv_pool_margin."""
        if self.margin is not None:
            return self.margin / 100
        return float(registry.value("cost_model_memory.kv_pool_margin"))

    @field_validator("speculative_acceptance")
    @classmethod
    def _rates(cls, v):
        return rates_in_range(v)

    @field_validator("headroom")
    @classmethod
    def _within_range(cls, v, info):
        concurrency = info.data.get("concurrency")
        if concurrency is not None and concurrency * (1 + v / 100) > MAX_CONCURRENCY:
            raise ValueError(f"{concurrency:,} requests with {v:g}% headroom exceed the {MAX_CONCURRENCY:,} the "
                             "solver counts (planner/defaults.yaml limits.max_concurrency)")
        return v

    @field_validator("vllm_version")
    @classmethod
    def _known_release(cls, v):
        from pricing.rules import get

        release = get(v)  # the pack's own name when the pack serves it as itself ("0.33"), else the release asked
        return release.version if release is get(release.version) else release.full_version

    @field_validator("tp", "pp", "dp", "dcp", "max_num_batched_tokens")
    @classmethod
    def _positive(cls, v):
        if v is not None and any(x < 1 for x in v):
            raise ValueError("every value must be at least 1")
        return tuple(sorted(set(v))) if v else None

    @field_validator("gpu_memory_utilization")
    @classmethod
    def _fraction(cls, v):
        if v is not None and any(not 0 < x <= 1 for x in v):
            raise ValueError("every value must be in (0, 1]")
        return tuple(sorted(set(v))) if v else None

    @property
    def implicit_concurrency(self) -> bool:
        """Only service targets at a rate were asked: the concurrency (1) is no target to hold."""
        return implicit_concurrency(self.slo is not None, self.concurrency)

    @property
    def required(self) -> int:
        """Requests the pool must hold: ceil(concurrency × (1 + headroom / 100)), in integers."""
        scaled = round(self.headroom * 10_000)  # headroom percent to 1e-4 percent, exact for typed values
        return cdiv(self.concurrency * (1_000_000 + scaled), 1_000_000)


class PoolLimits(BaseModel):
    """Where and how large the pool may be."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chips: tuple[str, ...] = Field(min_length=1)
    price: float | None = Field(None, ge=0, le=MAX_PRICE, description="USD per GPU-hour for every chip")
    prices: dict[str, float] = Field(default_factory=dict, description="USD per GPU-hour by chip id")
    max_gpus: int | None = Field(None, ge=1, le=MAX_GPUS)
    gpus_per_node: int | None = Field(None, ge=1, le=MAX_GPUS_PER_NODE)
    time_limit: float | None = Field(None, gt=0, description="solver time limit in seconds, as deterministic work")
    spare: Count = Field(0, ge=0, le=MAX_SPARE, description="whole nodes per chip kept free as spare capacity (N+1: 1)")
    prefill_chips: tuple[str, ...] | None = Field(None, description="chips a disaggregated prefill pool may use; "
                                                  "None: `chips`")
    decode_chips: tuple[str, ...] | None = Field(None, description="chips a disaggregated decode pool may use; "
                                                 "None: `chips`")


    @field_validator("prices")
    @classmethod
    def _price_range(cls, v):
        for chip, price in v.items():
            if not 0 <= price <= MAX_PRICE:
                raise ValueError(f"{chip}={price:g} is outside 0 … {MAX_PRICE:g} USD per GPU-hour")
        return v


class PlanRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    service: ServiceSpec
    limits: PoolLimits
    alternatives: int | None = Field(None, ge=0)


def validation_message(error: dict) -> str:
    """One pydantic error's message as the user reads it: without the "Value error, " pydantic puts
    before what a validator raised."""
    return error["msg"].removeprefix("Value error, ")


def check_request_fits(isl: int | None, osl: int | None, max_model_len: int) -> None:
    """A workload's request (isl + osl tokens) within the deployment's context: vLLM rejects a prompt
    longer than max_model_len and stops a request at it, so a speed priced beyond it would be untrue."""
    from pricing.errors import InputError

    if isl is not None and osl is not None and isl + osl > max_model_len:
        raise InputError("isl", f"a request of {isl + osl:,} tokens ({isl:,} input and {osl:,} output) does not "
                         f"fit the {max_model_len:,}-token context",
                         f"lower {mention('isl')}/{mention('osl')} or raise {mention('max_model_len')} to at least "
                         f"{isl + osl:,}")


def service_problems(service: ServiceSpec, model) -> list[tuple[str, str, str]]:
    """What is wrong with `service` for `model` whatever the instance shape, as (field, problem,
    fix) with the ServiceSpec field's name: a KV cache dtype the release does not know, a drafter
    the model does not ship (pricing/kernel/deployment.py resolve_engine's checks, made once for
    the service instead of once per shape), and a workload whose request does not fit the context
    (vLLM rejects a prompt longer than max_model_len, and stops a request at it)."""
    from pricing.rules import get as release_of

    out = []
    known = release_of(service.vllm_version).kv_cache_dtypes
    for kv in service.kv_cache_dtypes:
        if kv.lower() not in known:
            out.append(("kv_cache_dtypes", f"unknown dtype {kv!r} for vLLM {service.vllm_version}",
                        suggest(kv, known) or f"use one of {', '.join(known)}"))
    method = service.speculative_method
    if method is not None and method.lower() not in model.speculative_methods:
        out.append(("speculative_method", f"{method!r} is not available for {model.name}",
                    f"supported: {', '.join(model.speculative_methods) or 'none'}"))
    elif service.num_speculative_tokens and not model.speculative_methods:
        out.append(("num_speculative_tokens", f"{model.name} ships no drafter (MTP or DSpark)", "set it to 0"))
    elif method is not None and not service.num_speculative_tokens:
        out.append(("num_speculative_tokens", "must be at least 1 when a speculative method is set",
                    "for example 1 for MTP, 5 for DSpark"))
    if service.slo is not None and service.serving == "disagg":  # auto judges both plans by them (same_arrivals)
        out.append(("serving", "percentile service targets are simulated for aggregated pools, and judge a "
                    "disaggregated fleet only beside one (auto); disagg would size the fleet without them",
                    f"use {mention('serving')} agg or auto, or size the fleet by {mention('ttft_ms')} and "
                    f"{mention('tpot_ms')} without the percentile targets"))
    w = service.workload
    length = service.context_length or model.max_position
    if w is not None and w.longest > length:
        out.append(("workload", f"a request of up to {w.longest:,} tokens ({w.isl:,} input and {w.osl:,} output"
                    + (f", lengths ±{w.range_ratio:g}" if w.range_ratio else "")
                    + f") does not fit the {length:,}-token context",
                    f"lower {mention('isl')}/{mention('osl')} or raise {mention('context_length')} to at least "
                    f"{w.longest:,}" if w.longest <= model.max_position else
                    f"lower {mention('isl')}/{mention('osl')}: {model.name} has {model.max_position:,} positions"))
    return out


class MaxRateRequest(BaseModel):
    """The most requests per second a pool serves (`plan --max-rate`): the service at a rate not
    yet known (its workload's lengths, no rate), the targets every rate is judged by, and the pool
    (`limits.max_gpus`, of the chips allowed). An aggregated pool is judged by percentile targets
    (`slo`, the serving simulator); a disaggregated fleet is sized by the service's own `ttft_ms`
    (queueing included) and `tpot_ms`, as `plan --serving disagg` sizes it, and, given `slo`, judged
    by its percentile targets on the simulated arrivals too (planner/app/same_arrivals.py)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    service: ServiceSpec
    slo: SloSpec | None = None
    limits: PoolLimits

    @model_validator(mode="after")
    def _a_pool_and_lengths(self):
        w = self.service.workload
        if self.limits.max_gpus is None:
            raise ValueError("max_gpus is the pool whose rate is asked: give it")
        if w is None:
            raise ValueError("workload: give the requests' isl and osl")
        if w.requests_per_second is not None:
            raise ValueError("workload.requests_per_second is what max_rate finds: leave it out")
        if self.service.slo is not None:
            raise ValueError("the service's slo: give the targets as the request's slo")
        if self.service.serving == "auto":
            raise ValueError("serving auto: the most of an aggregated pool or of a disaggregated fleet is asked, "
                             "not the cheaper")
        if self.service.serving == "agg" and self.slo is None:
            raise ValueError("slo: an aggregated pool's rate is the most that meets percentile targets")
        if self.service.serving == "disagg" and self.service.ttft_ms is None:
            raise ValueError("a disaggregated fleet is sized by ttft_ms (and tpot_ms), queueing included: give it")
        return self

    def at(self, rate: float) -> ServiceSpec:
        """The service at `rate` requests/s under the targets (what a plan at that rate is given)."""
        w = self.service.workload.model_copy(update={"requests_per_second": rate})
        return ServiceSpec.model_validate({**self.service.model_dump(), "workload": w.model_dump(),
                                           "slo": self.slo.model_dump() if self.slo is not None else None})

    @property
    def judged(self) -> ServiceSpec:
        """The service with its targets, at no rate: what each candidate instance is simulated as
        (the rate is the simulation's argument, planner/candidates/slo.py highest_rate)."""
        return self.service.model_copy(update={"slo": self.slo})
