"""The oracle: every candidate vLLM instance of one service on one chip, judged by the memory
kernel ahead of the solve (chips-and-solver.md §2.2 item 9, "precompute the oracle").

A candidate is an instance shape (tp, dp, expert parallel, dcp, KV cache dtype) with a
utilization and a token budget. Its concurrency at the context length is
dp × min(max_num_seqs, requests one rank's pool holds) — `Kernel.requests_held()`, which is 0
when vLLM would refuse to start. `max_num_seqs` is set to what the pool holds at vLLM's default
`max_num_seqs` (so never above that default, 1,024 on chips of 70 GiB or more; and at most the
token budget, as vLLM requires), so the instance admits
everything its memory holds and no more. A smaller `max_num_seqs` only shrinks the fixed memory
(CUDA graphs, sampler), so the pool still holds that many; `verify()` asks the kernel again for
the rows that are reported.

Monotonicity used to prune (never a second memory model): for one shape and token budget the
KV pool is budget − fixed memory and the budget grows with utilization. Utilizations are
scanned from the highest down, and the scan stops at the first that holds fewer requests than
the one above it: every lower utilization holds no more, so it cannot be the best row of its
shape (see `ChipTable.dominant`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner import defaults
from planner.request import PoolLimits, ServiceSpec
from pricing.chips import Chip, get_chip
from pricing.errors import InputError
from pricing.graph import load_model
from pricing.graph.model import ModelGraph
from pricing.kernel import Deployment, Kernel
from pricing.kernel.deployment import beyond_positions, max_dcp
from pricing.kernel.pipeline import backbone_layers


@dataclass(frozen=True, order=True)
class Shape:
    """How one instance is split: tp × pp × dp GPUs, expert parallel across them or not, dcp within tp."""

    tp: int
    dp: int
    ep: bool
    dcp: int
    kv_cache_dtype: str
    pp: int = 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    def nodes(self, gpus_per_node: int) -> int:
        """Nodes one instance takes: one when it fits a node, else whole nodes (`placement`)."""
        return max(1, -(-self.gpus // gpus_per_node))


def placement(tp: int, world: int, gpus_per_node: int) -> str | None:
    """Why an instance of `world` GPUs with tensor parallel `tp` cannot be laid out on nodes of
    `gpus_per_node`, or None when it can. vLLM's multi-node launch (`--nnodes`, engine/arg_utils.py)
    splits the world evenly over the nodes ("--nnodes must evenly divide the total world size"),
    and a tensor-parallel group must not straddle nodes unless the NVLink domain does (GB200 NVL72):
    so an instance larger than a node fills whole nodes, each holding whole tp groups (or whole
    nodes per tp group)."""
    if world <= gpus_per_node:
        return None
    if world % gpus_per_node:
        return f"{world} GPUs do not fill whole {gpus_per_node}-GPU nodes"
    if gpus_per_node % tp and tp % gpus_per_node:
        return f"tp {tp} groups do not pack into {gpus_per_node}-GPU nodes"
    return None


@dataclass(frozen=True)
class Row:
    """One instance configuration the kernel accepts, with the requests it holds."""

    chip: str
    shape: Shape
    gpu_memory_utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    held_per_rank: int

    @property
    def gpus(self) -> int:
        return self.shape.gpus

    @property
    def concurrency(self) -> int:
        """Requests at the context length the instance holds: each DP rank has its own pool."""
        return self.shape.dp * self.held_per_rank


@dataclass
class ShapeVerdict:
    """What the kernel said about one shape at its most generous setting (highest utilization,
    smallest token budget): the figures an infeasibility explanation quotes."""

    shape: Shape
    weights: int = 0
    fixed: int = 0
    budget: int = 0
    kv_pool: int = 0
    request_bytes: int = 0
    utilization: float = 0.0
    max_num_batched_tokens: int = 0
    held_per_rank: int = 0
    refusal: str | None = None  # the start-up check vLLM would fail (pricing/kernel/startup.py), if any
    invalid: str | None = None  # the kernel's InputError: vLLM would reject the flags


@dataclass
class ChipTable:
    """The candidate table of one service on one chip."""

    chip: Chip
    gpus_per_node: int
    rows: list[Row] = field(default_factory=list)
    verdicts: list[ShapeVerdict] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)  # shape filters that removed values, in words
    latency: dict = field(default_factory=dict)  # Row -> planner.candidates.latency.Cap, under latency targets
    latency_note: str | None = None  # why the latency targets left no row
    evaluated: int = 0
    skipped: int = 0  # shapes not evaluated: one instance costs more than the pools kept (search.tables_for)

    def dominant(self) -> list[Row]:
        """The best row of each shape: the most requests held, then the larger token budget,
        then the lower utilization. Within a shape every row needs the same GPUs per instance,
        so the row holding the most requests needs the fewest replicas, at the lowest cost,
        with at least as much headroom: the others can never be chosen."""
        best: dict[Shape, Row] = {}
        for row in self.rows:
            cur = best.get(row.shape)
            if cur is None or _row_key(row) < _row_key(cur):
                best[row.shape] = row
        return [best[s] for s in sorted(best)]


def _row_key(row: Row) -> tuple:
    return (-row.concurrency, -row.max_num_batched_tokens, row.gpu_memory_utilization)


def replica_cap(gpus: int, gpus_per_node: int, max_gpus: int | None) -> int | None:
    """Instances of `gpus` GPUs that pack into `max_gpus` GPUs of `gpus_per_node`-GPU nodes.

    An instance never straddles nodes unless it is larger than a node; then it takes whole
    nodes. The inventory is max_gpus // gpus_per_node full nodes plus one partial node."""
    if max_gpus is None:
        return None
    full, partial = divmod(max_gpus, gpus_per_node)
    if gpus <= gpus_per_node:
        return full * (gpus_per_node // gpus) + partial // gpus
    return full // -(-gpus // gpus_per_node)


def priced_chip(chip_id: str, limits: PoolLimits) -> Chip:
    """The chip with the user's price (`--price 3.1` for all, `--price h200=3.1` for one)."""
    chip = get_chip(chip_id)
    price = limits.prices.get(chip.id, limits.price)
    return chip.with_overrides(price=price) if price is not None else chip


def context_length(model: ModelGraph, service: ServiceSpec) -> int:
    """`--context-length`, or vLLM's default: the model's maximum position."""
    return service.context_length if service.context_length is not None else model.max_position


def nvlink_domain(chip: Chip, gpus_per_node: int) -> int:
    """GPUs one tensor-parallel group may span: the chip's NVLink domain (`Chip.tp_domain`: the
    node over PCIe on parts without one), shrunk to the node when the domain lives inside one
    node (HGX) and the user gives smaller nodes."""
    if chip.tp_domain <= chip.gpus_per_node:
        return min(chip.tp_domain, gpus_per_node)
    return chip.tp_domain


def shapes(model: ModelGraph, chip: Chip, service: ServiceSpec, max_gpus: int | None,
           gpus_per_node: int) -> tuple[list[Shape], list[str]]:
    """Instance shapes to evaluate on `chip`, and the filters that removed values (for explanations).

    tp: within the NVLink domain and dividing the attention heads (vLLM's check); pp: the
    pipeline grid (stages across nodes, dp 1), at most one stage per layer, evaluated only when no
    instance within one node holds a request or --pp asks (`candidate_table`); dp: MoE only (dense
    models scale by replicas); expert parallel: MoE with more than one rank; dcp: divides tp and
    at most tp / KV heads (the kernel's rule, pricing.kernel.deployment.max_dcp). An instance larger
    than a node must fill whole nodes with whole tp groups (`placement`)."""
    notes: list[str] = []
    heads = model.num_attention_heads
    domain = nvlink_domain(chip, gpus_per_node)
    if chip.nvlink_domain <= 1 and domain > 1:
        notes.append(f"{chip.name} has no NVLink: tp up to {domain} runs over PCIe within a node, as vLLM allows "
                     "(NCCL; vLLM's custom all-reduce serves at most two PCIe-only GPUs)")
    tps = service.tp or tuple(t for t in range(1, domain + 1) if heads % t == 0)
    if service.tp:
        over = [t for t in tps if t > domain]
        if over:
            widest_tp = max(t for t in range(1, domain + 1) if heads % t == 0)
            notes.append(f"tp {', '.join(map(str, over))} exceeds the {chip.tp_link} domain of {domain} GPUs: "
                         f"span nodes with pipeline stages instead (--tp {widest_tp} --pp 2, or leave --tp and --pp "
                         "out)")
        bad = [t for t in tps if heads % t]
        if bad:  # the model, not the chip, rules these out: bad input, as vLLM would reject it
            fits = ", ".join(str(t) for t in range(1, heads + 1) if heads % t == 0)
            raise InputError("--tp", f"{', '.join(map(str, bad))} does not divide the {heads} attention heads of "
                             f"{model.name}", f"use one of {fits}")
        tps = tuple(t for t in tps if t <= domain and heads % t == 0)
    if model.has_experts:
        dps = service.dp or tuple(defaults.value("grids.data_parallel_size"))
    else:
        dps = (1,)
        if service.dp and service.dp != (1,):
            notes.append(f"{model.name} is dense: dp is 1 and replicas scale it")
    cap = None if service.dp else defaults.value("grids.max_gpus_per_instance")
    if max_gpus is not None:
        cap = max_gpus if cap is None else min(cap, max_gpus)
    kv_heads = max(1, model.num_kv_heads) if model.attention_backend == "gqa" else 1
    layers = backbone_layers(model)
    pps = tuple(p for p in (service.pp or tuple(defaults.value("grids.pipeline_parallel_size"))) if p <= layers)
    if service.pp and any(p > layers for p in service.pp):
        notes.append(f"pp above the {layers} layers of {model.name} is not searched")
    # pp extends an instance past the NVLink domain: with NVLink, stages are searched at the widest
    # tp the domain holds (unless --tp says otherwise); without it (PCIe cards, one-GPU nodes) at any tp
    widest = max(tps, default=1)
    out = []
    unplaced = set()
    for tp in tps:
        dcps = [d for d in (service.dcp or range(1, tp + 1)) if tp % d == 0 and d <= max_dcp(model, tp)]
        for pp in pps:
            if pp > 1 and chip.nvlink_domain > 1 and not service.tp and tp != widest:
                continue
            for dp in (dps if pp == 1 else (1,)):
                world = tp * pp * dp
                if cap is not None and world > cap:
                    continue
                why = placement(tp, world, gpus_per_node)
                if why is not None:
                    unplaced.add(why)
                    continue
                for ep in ((False, True) if model.has_experts and tp * dp > 1 else (False,)):
                    for dcp in dcps:
                        for kv in service.kv_cache_dtypes:
                            out.append(Shape(tp, dp, ep, dcp, kv, pp))
    if unplaced and not out:
        notes.extend(sorted(unplaced))
    if service.dcp and not any(s.dcp in service.dcp for s in out):
        notes.append(f"dcp {', '.join(map(str, service.dcp))} must divide tp and stay within tp / {kv_heads} KV heads")
    if tps and not out and max_gpus is not None:
        notes.append(f"no tp × dp fits within --max-gpus {max_gpus}")
    return sorted(out), notes


def utilizations(service: ServiceSpec, chip: Chip, pre_snapshot: int) -> list[float]:
    """The utilization grid, highest first. The default grid tops out where the engine keeps
    `grids.spare_memory_bytes` free beside the budget and what is held before it (the cap,
    floored to the grid step, is a candidate when it binds); utilizations the user gives are
    capped only where vLLM would refuse to start (budget + pre-snapshot beyond the chip)."""
    grid = sorted(service.gpu_memory_utilization or defaults.value("grids.gpu_memory_utilization"), reverse=True)
    step = defaults.value("grids.gpu_memory_utilization_step")
    ticks = round(1 / step)
    spare = 0 if service.gpu_memory_utilization else int(defaults.value("grids.spare_memory_bytes"))
    cap = math.floor((chip.memory_bytes - pre_snapshot - spare) * ticks / chip.memory_bytes) / ticks
    kept = [u for u in grid if u <= cap]
    if service.gpu_memory_utilization is None and 0 < cap < grid[0] and cap not in kept:
        kept = [cap] + kept
    return kept


def deployment_for(shape: Shape, service: ServiceSpec, max_model_len: int, **settings) -> Deployment:
    """The vLLM flags of one instance of `shape` for `service` (one place, so no caller drops a field)."""
    return Deployment(tensor_parallel_size=shape.tp, pipeline_parallel_size=shape.pp, data_parallel_size=shape.dp,
                      enable_expert_parallel=shape.ep,
                      decode_context_parallel_size=shape.dcp, kv_cache_dtype=shape.kv_cache_dtype,
                      max_model_len=max_model_len, num_speculative_tokens=service.num_speculative_tokens,
                      speculative_method=service.speculative_method, **settings)


def evaluate_shape(model: ModelGraph, chip: Chip, service: ServiceSpec, shape: Shape, table: ChipTable) -> None:
    """Evaluate one shape over the utilization × token-budget grid, appending rows to `table`."""
    length = context_length(model, service)
    verdict = ShapeVerdict(shape)
    table.verdicts.append(verdict)
    budgets = service.max_num_batched_tokens or tuple(defaults.value("grids.max_num_batched_tokens"))
    try:
        probe = Kernel.of(model, deployment_for(shape, service, length, max_num_batched_tokens=min(budgets)), chip,
                          release=service.vllm_version)
    except InputError as err:
        verdict.invalid = str(err)
        table.evaluated += 1
        return
    table.evaluated += 1
    utils = utilizations(service, chip, probe.pre_snapshot_bytes())
    if not utils:
        verdict.refusal = probe.failed_check()
        return
    margin = service.kv_margin
    for mbt in sorted(budgets):
        top = 0
        for util in utils:
            kernel = Kernel.of(model, deployment_for(shape, service, length, gpu_memory_utilization=util,
                                                   max_num_batched_tokens=mbt), chip,
                               release=service.vllm_version)
            table.evaluated += 1
            held = kernel.requests_held(margin)
            if mbt == min(budgets) and util == utils[0]:
                _record(verdict, kernel, held)
            if held < top or held == 0:
                break  # lower utilizations leave a smaller pool: they hold no more, and this holds less
            top = held
            table.rows.append(Row(chip.id, shape, util, mbt, min(held, mbt), min(held, mbt)))


def deployment(row: Row, service: ServiceSpec, max_model_len: int) -> Deployment:
    """The vLLM flags of one candidate instance."""
    return deployment_for(row.shape, service, max_model_len, gpu_memory_utilization=row.gpu_memory_utilization,
                       max_num_batched_tokens=row.max_num_batched_tokens, max_num_seqs=row.max_num_seqs)


def verify(model: ModelGraph, chip: Chip, service: ServiceSpec, row: Row) -> Kernel:
    """The kernel of a reported row at its own max_num_seqs; it must hold what the row says."""
    kernel = Kernel.of(model, deployment(row, service, context_length(model, service)), chip,
                       release=service.vllm_version)
    held = kernel.requests_held(service.kv_margin)
    if held != row.held_per_rank:
        raise AssertionError(f"kernel holds {held} requests per rank for {row}, the oracle said {row.held_per_rank}")
    return kernel


def _record(verdict: ShapeVerdict, kernel: Kernel, held: int) -> None:
    fixed = kernel.fixed_bytes()
    verdict.weights = fixed.weights
    verdict.fixed = fixed.total
    verdict.budget = kernel.budget()
    verdict.kv_pool = kernel.kv_pool()
    verdict.request_bytes = kernel.request_bytes()
    verdict.utilization = kernel.engine.gpu_memory_utilization
    verdict.max_num_batched_tokens = kernel.engine.max_num_batched_tokens
    verdict.held_per_rank = held
    verdict.refusal = kernel.failed_check()


_TABLES: dict = {}


def clear_tables() -> None:
    """Forget the candidate tables built so far (benchmarks measure a cold sweep; the kernel's own
    memo is pricing.kernel.kernel.clear_memo)."""
    _TABLES.clear()


def sweep_key(service: ServiceSpec, chip: Chip, limits: PoolLimits) -> tuple:
    """What a candidate table depends on: the whole service but its target (concurrency and
    headroom, which only the solve reads), the whole chip, the node size, the GPU cap and the
    registry in use."""
    from pricing.registry import load

    sweep = service.model_copy(update={"concurrency": 1, "headroom": 0.0})
    return (sweep, chip, limits.gpus_per_node or chip.gpus_per_node, limits.max_gpus, load())


def start_table(service: ServiceSpec, chip: Chip, limits: PoolLimits) -> tuple[ModelGraph, ChipTable, list[Shape]]:
    """The model, an empty table and the shapes to evaluate on `chip`."""
    model = load_model(service.model, service.quantization)
    length = context_length(model, service)
    if problem := beyond_positions(model, length):
        raise InputError("--context-length", problem, f"use at most {model.max_position}")
    per_node = limits.gpus_per_node or chip.gpus_per_node
    found, notes = shapes(model, chip, service, limits.max_gpus, per_node)
    return model, ChipTable(chip, per_node, excluded=notes), found


def evaluate_staged(model: ModelGraph, chip: Chip, service: ServiceSpec, found: list[Shape], table: ChipTable) -> None:
    """Pipeline-staged shapes, evaluated only when the model needs more than a node (or --pp asks
    for stages): the single-stage shapes must have been evaluated already."""
    staged = [s for s in found if s.pp > 1]
    in_a_node = any(r.shape.nodes(table.gpus_per_node) == 1 for r in table.rows)
    if service.pp or not in_a_node:
        for shape in staged:
            evaluate_shape(model, chip, service, shape, table)


def candidate_table(service: ServiceSpec, chip: Chip, limits: PoolLimits) -> ChipTable:
    """Every candidate instance of `service` on `chip` the kernel accepts (the reusable unit of a
    scenario: one table per service and chip). Tables are reused within the process across
    services and variants that share a `sweep_key` (a review's services of one model at one
    context length share one sweep); the table is never changed after it is built."""
    key = sweep_key(service, chip, limits)
    table = _TABLES.get(key)
    if table is None:
        model, table, found = start_table(service, chip, limits)
        for shape in found:
            if shape.pp == 1:
                evaluate_shape(model, chip, service, shape, table)
        evaluate_staged(model, chip, service, found, table)
        apply_latency(table, model, service)
        _TABLES[key] = table
    return table


def has_latency_target(service: ServiceSpec) -> bool:
    return service.tpot_ms is not None or service.ttft_ms is not None or service.workload is not None


def apply_latency(table: ChipTable, model: ModelGraph, service: ServiceSpec) -> None:
    if has_latency_target(service):
        from planner.candidates import latency  # the step model is priced only when a target asks for it

        latency.cap_rows(table, model, service)
