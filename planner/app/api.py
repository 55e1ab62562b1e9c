"""The planner's use cases as a Python API, the one the `plan` commands call: each takes typed
inputs (planner/request.py `PlanRequest`, planner/scenario.py `Scenario`, or their fields as
keywords) and returns the result models the commands print as JSON. The library never prints and
never exits: bad input raises `InputError(field, problem, fix)`; a deployment vLLM would refuse
is an answer (`feasible` false, with vLLM's reason).

`named` (every use case): how the sentences of a result name the fields they mention (a
function field -> name, as the commands pass their flags); None keeps the field's own name.
`tables` (every planning use case): the store of model graphs and candidate tables one command's
calls share (`table_store()`, as the CLI makes one per command); None: the call makes its own,
which goes when it returns."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from planner.kinds import Role, Serving
from planner.request import MaxRateRequest, PlanRequest, PoolLimits, ServiceSpec

if TYPE_CHECKING:  # pragma: no cover
    from planner.app.max_rate import MaxRateResult
    from planner.app.memory import MemoryResult
    from planner.app.result import PlanResult
    from planner.app.review import Comparison
    from planner.app.serving import ServingOutput
    from planner.candidates.store import TableStore
    from planner.scenario import Scenario
    from pricing.registry import Registry

LIMIT_FIELDS = set(PoolLimits.model_fields) | {"chip"}
KINDS = (Role, Serving)  # the kinds a result's pools and plans come in (planner/kinds.py)


def table_store(listener: Callable[[str], None] | None = None) -> TableStore:
    """A store for one command's graphs and candidate tables (planner/candidates/service.py
    `TableStore`), to hand to each of its calls as `tables`; `close()` it (or use it as a context
    manager) when the command is done. `listener`: told each stage of the work in words
    (planner/progress.py; None: no one). The store carries the planner defaults the command reads
    (planner/defaults.yaml, read here once: `defaults.load()`), handed down with it."""
    from planner import defaults
    from planner.candidates.store import TableStore

    return TableStore(defaults.load(), listener=listener)


@contextmanager
def session(tables: TableStore | None) -> Iterator[TableStore]:
    """The store a use case's calls share: the command's `tables` when given, else one of the
    call's own, closed when it returns."""
    if tables is not None:
        yield tables
        return
    with table_store() as own:
        yield own


def request_of(**fields) -> PlanRequest:
    """A `PlanRequest` from keywords: ServiceSpec's fields (model, concurrency, context_length, ...),
    PoolLimits' (`chip`: one chip id or several, or `chips`), and `alternatives`. A field pydantic
    rejects is one InputError naming it."""
    from pydantic import ValidationError

    from planner.request import validation_message
    from pricing.errors import InputError

    alternatives = fields.pop("alternatives", None)
    limits = {k: fields.pop(k) for k in list(fields) if k in LIMIT_FIELDS}
    chip = limits.pop("chip", None)
    if chip is not None:
        limits["chips"] = (chip,) if isinstance(chip, str) else tuple(chip)
    try:
        return PlanRequest(service=ServiceSpec(**fields), limits=PoolLimits(**limits), alternatives=alternatives)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][-1]) if first["loc"] else "input"
        message = validation_message(first)
        raise InputError(field, message[:1].lower() + message[1:], "see planner/request.py") from None


def _request(request: PlanRequest | None, fields: dict) -> PlanRequest:
    if request is not None and fields:
        from pricing.errors import InputError

        raise InputError(next(iter(fields)), "is given beside a PlanRequest", "put it in the request, or give "
                         "only keywords")
    return request if request is not None else request_of(**fields)


def model_of(service: ServiceSpec, registry: Registry | None = None, tables: TableStore | None = None):
    """The graph of the service's model the command's search reads (one per command, in its store
    `tables`: planner/candidates/service.py sweep_model; None: a graph of the caller's own), read
    against `registry` (None: shipped)."""
    from planner.candidates.service import sweep_model
    from pricing.registry import shipped

    return sweep_model(service.model, service.quantization, registry or shipped(), tables)


def check_service(service: ServiceSpec, registry: Registry | None = None, tables: TableStore | None = None) -> None:
    """The first of what is wrong with the service whatever the shape, as bad input, before any
    search (planner/request.py service_problems)."""
    from planner.request import service_problems
    from pricing.errors import InputError

    for field, problem, fix in service_problems(service, model_of(service, registry, tables))[:1]:
        raise InputError(field, problem, fix)


def _notes(request: PlanRequest, sized_by_rate: bool) -> list[str]:
    """What the request asked that had no effect, and how the pool was sized without a concurrency."""
    from pricing.chips import get_chip
    from pricing.errors import mention

    s, limits = request.service, request.limits
    out = []
    if sized_by_rate:
        out.append(f"no {mention('concurrency')}: the aggregated pool is sized by "
                   f"{s.workload.requests_per_second:g} requests/s at each candidate's throughput within the "
                   "targets (its TTFT is the chunked prefill beside the decodes, without queueing for admission), "
                   "so no headroom is counted (the table's '-', the JSON's null)")
    planned = {get_chip(c).id for c in limits.chips}
    out += [f"{mention('price')} {chip}={price:g} has no effect: {chip} is not among the chips planned "
            f"({', '.join(sorted(planned))})" for chip, price in limits.prices.items() if chip not in planned]
    return out


def _sized_by_rate(service: ServiceSpec, fields: dict) -> bool:
    """Keywords without a concurrency but with a rate and its targets: the pool is sized by the rate."""
    return "concurrency" not in fields and service.slo is None and service.workload is not None \
        and service.workload.requests_per_second is not None


def _by_rate(fields: dict) -> dict:
    """Keywords without a concurrency, at a rate with mean latency targets: the concurrency floor is
    one request (each candidate's replicas serve the rate at its throughput within the targets)."""
    w = fields.get("workload")
    rate = w.get("requests_per_second") if isinstance(w, dict) else getattr(w, "requests_per_second", None)
    if "concurrency" in fields or rate is None:
        return fields
    if fields.get("slo") is None and fields.get("ttft_ms") is None and fields.get("tpot_ms") is None:
        return fields
    return {**fields, "concurrency": 1}


def _no_concurrency_asked(result: PlanResult, by_rate: bool) -> None:
    """An aggregated plan sized by the rate, or by service targets without a concurrency: its target
    says so, and no headroom is counted over the 1 request held in a concurrency's place."""
    if by_rate:
        result.target.sized_by_rate = True
    if result.target.implicit_concurrency:
        for p in [result.best, *result.alternatives]:
            if p is not None:
                p.headroom_percent = None


def plan(request: PlanRequest | None = None, *, named=None, sized_by_rate: bool | None = None,
         registry: Registry | None = None, tables: TableStore | None = None, **fields) -> PlanResult:
    """The cheapest aggregated pool for one service, its alternatives, and when nothing fits why
    (`plan --json`). `request`, or its fields as keywords: `plan(model="dsv4.1-flash", chip="h200",
    concurrency=64)`. `sized_by_rate`: no concurrency was asked, the rate sizes the pool (known from
    the keywords when they are given). `registry`: the registry the plan reads (an overlay,
    pricing/registry read_overlay; None: the shipped one), as every use case takes it."""
    from planner.app import plan as pool
    from planner.app.memory import unused_acceptance
    from pricing.errors import InputError, render

    request = _request(request, _by_rate(fields))
    if request.service.serving != Serving.AGG:
        raise InputError("serving", f"plan() plans an aggregated pool, not {request.service.serving}",
                         "call plan_serving() for a disaggregated or the cheaper plan")
    by_rate = _sized_by_rate(request.service, fields) if sized_by_rate is None else sized_by_rate
    with session(tables) as store:  # one graph of the model for the check, the search and the plan
        check_service(request.service, registry, store)
        result = pool.plan(request, named, by_rate, registry, store)
    _no_concurrency_asked(result, by_rate)
    s = request.service
    notes = _notes(request, by_rate) + unused_acceptance(s.speculative_acceptance, s.num_speculative_tokens)
    result.notes[:0] = [render(n, named) for n in notes]
    return result


def plan_serving(request: PlanRequest | None = None, *, named=None, sized_by_rate: bool | None = None,
                 registry: Registry | None = None, tables: TableStore | None = None, **fields) -> ServingOutput:
    """`serving="disagg"`: a prefill pool and a decode pool handing the KV cache over (vLLM's
    NixlConnector); `"auto"`: that and the aggregated pool, and the cheaper (`plan --serving ...
    --json`). The notes of what had no effect ride on the aggregated plan, else on the choice."""
    from planner.app.disagg_plan import plan_serving as choose
    from planner.app.serving import ServingOutput
    from pricing.errors import render

    fields = {"serving": Serving.DISAGG.value, **fields} if request is None else fields
    request = _request(request, _by_rate(fields))
    by_rate = _sized_by_rate(request.service, fields) if sized_by_rate is None else sized_by_rate
    with session(tables) as store:
        check_service(request.service, registry, store)
        choice = choose(request, named, by_rate, registry, store)
    if choice.aggregated is not None:
        _no_concurrency_asked(choice.aggregated, by_rate)
    # the rate sizes an aggregated pool only where one is planned (disagg sizes both of its pools by the rate)
    notes = [render(n, named) for n in _notes(request, by_rate and choice.aggregated is not None)]
    if choice.aggregated is not None:
        choice.aggregated.notes[:0] = notes
    else:
        choice.notes = notes
    return ServingOutput(serving=choice)


def max_rate(request: MaxRateRequest | None = None, *, named=None, registry: Registry | None = None,
             tables: TableStore | None = None, **fields) -> MaxRateResult:
    """The most requests per second a pool serves within service targets (`plan --max-rate --json`):
    `request`, or its fields as keywords: `max_rate(model="llama-3.1-8b", chip="h100", max_gpus=8,
    workload={"isl": 1000, "osl": 200}, slo={"p99_ttft_ms": 1000, "p90_tpot_ms": 15})`; the other
    keywords are `plan()`'s (tp, kv_cache_dtypes, price, spare, ...)."""
    from planner.app.max_rate import max_rate as most
    from pricing.errors import InputError

    if request is None:
        slo = fields.pop("slo", None)
        asked = request_of(concurrency=1, **{"serving": Serving.AGG.value, **fields})
        request = max_rate_request(asked.service, slo, asked.limits)
    elif fields:
        raise InputError(next(iter(fields)), "is given beside a MaxRateRequest", "put it in the request, or give "
                         "only keywords")
    with session(tables) as store:
        check_service(request.service, registry, store)  # its targets are the request's (a fleet's sizing takes none)
        return most(request, named, registry, store)


def max_rate_request(service: ServiceSpec, slo, limits: PoolLimits) -> MaxRateRequest:
    """The question `max_rate` answers, checked: the pool (`max_gpus`), the requests' lengths
    (`workload` without a rate: the rate is the answer) and the targets (`slo`), each missing one
    bad input naming its field."""
    from pydantic import ValidationError

    from planner.request import validation_message
    from pricing.errors import InputError

    w, mode = service.workload, service.serving
    for field, wrong, problem, fix in (
            ("max_gpus", limits.max_gpus is None, "is required",
             "give max_gpus=8, the GPUs of the pool whose rate is asked"),
            ("workload", w is None, "is required", "give workload={'isl': 2000, 'osl': 500}, the requests' lengths"),
            ("requests_per_second", w is not None and w.requests_per_second is not None,
             "is given, but it is the answer", "leave it out: the rate is what max_rate finds"),
            ("serving", mode == Serving.AUTO, "auto is not taken", "give 'agg' or 'disagg': the most of one kind"),
            ("slo", slo is None and mode == Serving.AGG, "is required",
             "give slo={'p99_ttft_ms': 2000, ...}: an aggregated pool's rate is the most that meets them"),
            ("ttft_ms", service.ttft_ms is None and mode == Serving.DISAGG, "is required",
             "give ttft_ms=1500: the prefill pool is sized by it, queueing included")):
        if wrong:
            raise InputError(field, problem, fix)
    try:
        return MaxRateRequest(service=service, slo=slo, limits=limits)
    except ValidationError as err:
        first = err.errors()[0]
        field = str(first["loc"][-1]) if first["loc"] else "slo"
        message = validation_message(first)
        raise InputError(field, message[:1].lower() + message[1:], "see planner/request.py SloSpec") from None


def scenario_of(scenario: str | Path | Scenario, registry: Registry | None = None) -> Scenario:
    """A scenario given as a file (read and checked whole against `registry`, planner/scenario.py)
    or as the model."""
    from planner.scenario import load_scenario

    return scenario if not isinstance(scenario, (str, Path)) else load_scenario(scenario, registry)


def review(scenario: str | Path | Scenario, variants: bool | list[str] = False, *, time_limit: float | None = None,
           spare: int | None = None, executor: str | None = None, ray_address: str | None = None,
           progress: Callable[[int, int, str], None] | None = None, named=None,
           registry: Registry | None = None, tables: TableStore | None = None) -> Comparison:
    """Every service of a scenario planned together over its inventory (`plan scenario FILE`: the
    result's `base`), and with `variants` (True: every one, or their names) each variant beside it
    (`--variants`). `spare`: whole nodes per chip kept free, instead of the file's; `executor`:
    where the variants are planned (planner/defaults.yaml parallel.executor when None)."""
    from planner.app.review import compare as plan_variants
    from planner.scenario import file_key
    from pricing.errors import named_all

    scenario = scenario_of(scenario, registry)
    if spare:
        scenario = scenario.model_copy(update={"spare": spare})
    names = list(scenario.variants) if variants is True else list(dict.fromkeys(variants or []))
    for name in names:
        scenario.apply(name)  # an unknown name is bad input, with the nearest names, before any planning
    with session(tables) as store:
        c = plan_variants(scenario, names, progress=progress, time_limit=time_limit,
                          executor=executor or store.defaults.value("parallel.executor"), ray_address=ray_address,
                          registry=registry, tables=store)
    return named_all(c, named or file_key)


def compare(scenario: str | Path | Scenario, *, time_limit: float | None = None, executor: str | None = None,
            ray_address: str | None = None, progress: Callable[[int, int, str], None] | None = None,
            named=None, registry: Registry | None = None, tables: TableStore | None = None) -> Comparison:
    """A scenario under its base and every variant, side by side (`plan compare FILE --json`)."""
    return review(scenario, True, time_limit=time_limit, executor=executor, ray_address=ray_address,
                  progress=progress, named=named, registry=registry, tables=tables)


def compare_points(points: list[tuple[str, Scenario]], title: str, *, time_limit: float | None = None,
                   executor: str | None = None, ray_address: str | None = None,
                   progress: Callable[[str], None] | None = None, named=None,
                   registry: Registry | None = None, tables: TableStore | None = None) -> Comparison:
    """What-if points (a label and a one-service scenario each) planned and set side by side, the
    first as the base (`plan compare --model ... --chip ...`)."""
    from planner.app.executors import plan_variants
    from planner.app.review import Comparison
    from pricing.errors import named_all

    with session(tables) as store:
        results = plan_variants([(s, label) for label, s in points], time_limit,
                                executor or store.defaults.value("parallel.executor"), ray_address, progress, registry,
                                store)
    results = [named_all(r, named) for r in results]
    return Comparison(review=title, base=results[0], variants=results[1:])


def compare_max_rate(points: list[tuple[str, dict, MaxRateRequest]], title: str, *,
                     progress: Callable[[str], None] | None = None, named=None, registry: Registry | None = None,
                     tables: TableStore | None = None):
    """What-if points (a label, the axes' values and a MaxRateRequest each), each answered as
    `max_rate` answers it and set side by side (`plan compare --max-rate`)."""
    from planner.app.review import compare_max_rate as most

    with session(tables) as store:
        for _, _, request in points:
            check_service(request.service, registry, store)
        return most(points, title, progress, named, registry, store)


def memory(model: str, chip: str, quantization: str | None = None, memory_bytes: int | None = None,
           tokens: int = 4096, vllm_version: str | None = None, batch: int | None = None, isl: int | None = None,
           osl: int | None = None, speculative_acceptance: tuple[float, ...] | None = None,
           registry: Registry | None = None, **deployment) -> MemoryResult:
    """One rank's memory for one deployment (`plan memory --json`): `deployment` is vLLM's flags
    as pricing/kernel/deployment.py `Deployment` names them (tensor_parallel_size=4, ...)."""
    from planner.app.memory import memory as of

    return of(model, chip, quantization, memory_bytes, tokens, vllm_version, batch, isl, osl, speculative_acceptance,
              registry, **deployment)

