"""The instance shapes a service may run on a chip, and the rows of a candidate table: what one
instance is (tp × pp × dp GPUs, expert parallel, dcp, KV cache dtype), how it lays out on nodes,
and the vLLM flags of one instance (`deployment`). The kernel evaluates them (`table.py`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.candidates.store import TableStore
from planner.defaults import Reads
from planner.request import ServiceSpec
from pricing.chips import Chip
from pricing.errors import mention
from pricing.graph.model import ModelGraph
from pricing.kernel import Deployment
from pricing.kernel.deployment import allows_tensor_parallel, check_tensor_parallel, max_dcp
from pricing.kernel.pipeline import backbone_layers
from pricing.registry import Registry, shipped
from pricing.units import cdiv


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
        return max(1, cdiv(self.gpus, gpus_per_node))

    def split(self) -> str:
        """The parallel split in words: 'tp 1 × pp 2 × dp 4 with expert parallel, dcp 2' (factors of 1
        and expert parallel off are left out; the KV cache dtype is not part of the split)."""
        text = f"tp {self.tp}" + (f" × pp {self.pp}" if self.pp > 1 else "")
        text += (f" × dp {self.dp}" if self.dp > 1 else "") + (" with expert parallel" if self.ep else "")
        return text + (f", dcp {self.dcp}" if self.dcp > 1 else "")


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
    """One instance configuration the kernel accepts, with the requests it holds, and the flags of
    its shape it was judged with (`deployment`)."""

    chip: str
    shape: Shape
    gpu_memory_utilization: float
    max_num_batched_tokens: int
    max_num_seqs: int
    held_per_rank: int
    flags: Deployment | None = field(default=None, compare=False, repr=False)  # the shape's, for its table's
    # service at its context length (`deployment_for`), one object for every row of the shape

    @property
    def deployment(self) -> Deployment:
        """The vLLM flags of this instance: its shape's at this row's utilization, token budget and
        max_num_seqs."""
        if self.flags is None:
            raise AssertionError(f"{self} was made without its shape's flags")
        return self.flags.model_copy(update={"gpu_memory_utilization": self.gpu_memory_utilization,
                                             "max_num_batched_tokens": self.max_num_batched_tokens,
                                             "max_num_seqs": self.max_num_seqs})

    @property
    def gpus(self) -> int:
        return self.shape.gpus

    @property
    def concurrency(self) -> int:
        """Requests at the context length the instance holds: each DP rank has its own pool."""
        return self.shape.dp * self.held_per_rank

    @property
    def chips(self) -> tuple[str, ...]:
        """The chips one replica of this choice takes GPUs on (a disaggregated choice takes two)."""
        return (self.chip,)

    def gpus_on(self, chip: str) -> int:
        """GPUs one replica takes on `chip`."""
        return self.gpus if chip == self.chip else 0

    def instances(self, chip: str) -> list[tuple[int, int]]:
        """(GPUs per instance, instances) one replica places on `chip`, for node packing."""
        return [(self.gpus, 1)] if chip == self.chip else []


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
    invalid: str | None = None  # the kernel's InputError, quoted (pricing.errors.Quoted): vLLM would reject the flags


@dataclass
class ChipTable:
    """The candidate table of one service on one chip."""

    chip: Chip
    gpus_per_node: int
    context_length: int  # max_model_len of every row: the service's, resolved once (`context_length`)
    rows: list[Row] = field(default_factory=list)
    verdicts: list[ShapeVerdict] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)  # shape filters that removed values, in words
    latency: dict = field(default_factory=dict)  # Row -> planner.candidates.latency.Cap, under latency targets
    latency_note: str | None = None  # why the latency targets left no row
    evaluated: int = 0
    skipped: int = 0  # shapes not evaluated: one instance costs more than the pools kept (search.tables_for)
    unpriced: int = 0  # shapes a sweep bounded by --time-limit left unpriced (planner/search/sweep_time.py)
    best: tuple[int, ...] | None = None  # `dominant`'s rows as indices into `rows`, once `seal` has fixed them
    defaults: Reads = field(kw_only=True)  # the planner defaults its sweep read (a plan's provenance)
    registry: Registry = field(default_factory=shipped)  # the registry its kernels read (the service's)
    tables: TableStore | None = field(default=None, compare=False, repr=False)  # the command's store (the service's)

    def in_a_node(self) -> bool:
        """A single-stage row fits in one node: pipeline-staged shapes are then swept only when asked."""
        return any(r.shape.nodes(self.gpus_per_node) == 1 for r in self.rows)

    def __getstate__(self) -> dict:
        """What pickle sends (a worker's table to the parent, planner/candidates/parallel.py): the
        rows as plain tuples, each shape and its flags once, which load several times faster than
        Row objects."""
        state = dict(self.__dict__)
        shapes: dict[Shape, int] = {}
        flags: dict[int, tuple[int, Deployment | None]] = {}
        packed = [(shapes.setdefault(r.shape, len(shapes)), flags.setdefault(id(r.flags), (len(flags), r.flags))[0],
                   r.chip, r.gpu_memory_utilization, r.max_num_batched_tokens, r.max_num_seqs, r.held_per_rank)
                  for r in self.rows]
        state["rows"] = (list(shapes), [f for _, f in flags.values()], packed)
        return state

    def __setstate__(self, state: dict) -> None:
        shapes, flags, packed = state["rows"]
        rows = [Row(chip, shapes[i], util, mbt, seqs, held, flags[f]) for i, f, chip, util, mbt, seqs, held in packed]
        self.__dict__.update(state, rows=rows)

    def seal(self) -> ChipTable:
        """The table built: its rows fixed from now on (every variant and service of a review that
        shares it reads it as it is), so its dominant rows are found once, here, and kept as
        indices (which pickle with the rows to and from worker processes)."""
        self.best = self._dominant_indices()
        return self

    def dominant(self) -> list[Row]:
        """The best row of each shape: the most requests held, then the larger token budget,
        then the lower utilization. Within a shape every row needs the same GPUs per instance,
        so the row holding the most requests needs the fewest replicas, at the lowest cost,
        with at least as much headroom: the others can never be chosen."""
        return [self.rows[i] for i in (self.best if self.best is not None else self._dominant_indices())]

    def _dominant_indices(self) -> tuple[int, ...]:
        best: dict[Shape, int] = {}
        shape = cur = least = None
        for i, row in enumerate(self.rows):
            if row.shape is not shape:  # a shape's rows come one after another: look it up once
                if shape is not None:
                    best[shape] = cur
                shape = row.shape
                cur = best.get(shape)
                least = None if cur is None else _row_key(self.rows[cur])
            key = _row_key(row)
            if cur is None or key < least:
                cur, least = i, key
        if shape is not None:
            best[shape] = cur
        return tuple(best[s] for s in sorted(best))


def _row_key(row: Row) -> tuple:
    return (-row.concurrency, -row.max_num_batched_tokens, row.gpu_memory_utilization)


def cheapest_pool(rows, need: int, gpus_per_node: int, max_gpus: int | None, price):
    """The cost of the cheapest pool of `rows` that reaches `need` requests within `max_gpus`
    (`replica_cap`) at `price` per GPU (dollars or the solver's price units); None when none does."""
    best = None
    for row in rows:
        replicas = cdiv(need, row.concurrency)
        cap = replica_cap(row.gpus, gpus_per_node, max_gpus)
        if cap is None or cap >= replicas:
            cost = replicas * row.gpus * price
            best = cost if best is None else min(best, cost)
    return best


def replica_cap(gpus: int, gpus_per_node: int, max_gpus: int | None) -> int | None:
    """Instances of `gpus` GPUs that pack into `max_gpus` GPUs of `gpus_per_node`-GPU nodes.

    An instance never straddles nodes unless it is larger than a node; then it takes whole
    nodes. The inventory is max_gpus // gpus_per_node full nodes plus one partial node."""
    if max_gpus is None:
        return None
    full, partial = divmod(max(max_gpus, 0), gpus_per_node)
    if gpus <= gpus_per_node:
        return full * (gpus_per_node // gpus) + partial // gpus
    return full // cdiv(gpus, gpus_per_node)


def pool_gpus(max_gpus: int | None, gpus_per_node: int, spare: int) -> int | None:
    """GPUs an inventory of `max_gpus` leaves to the pools once `spare` whole nodes of
    `gpus_per_node` are kept free (N+1 capacity); 0 when it has fewer whole nodes than
    spares; None without an inventory (the spares are then nodes beyond the pools')."""
    if max_gpus is None:
        return None
    return max_gpus - spare * gpus_per_node if max_gpus // gpus_per_node >= spare else 0


def context_length(model: ModelGraph, service: ServiceSpec) -> int:
    """`--context-length`; else, at a rate (a workload with requests_per_second, or service
    targets, which are met at one: every rate-based mode alike, aggregated, disaggregated and
    --max-rate), the workload's longest request (its prompt and output at the top of their range),
    so the KV pool admits by what requests hold; else vLLM's default, the model's maximum position."""
    if service.context_length is not None:
        return service.context_length
    if at_a_rate(service):
        return min(model.max_position, service.workload.longest)
    return model.max_position


def at_a_rate(service: ServiceSpec) -> bool:
    """The service is sized at a request rate (the rule of its default context length)."""
    w = service.workload
    return service.slo is not None or (w is not None and w.requests_per_second is not None)


def nvlink_domain(chip: Chip, gpus_per_node: int) -> int:
    """GPUs one tensor-parallel group may span: the chip's NVLink domain (`Chip.tp_domain`: the
    node over PCIe on parts without one), shrunk to the node when the domain lives inside one
    node (HGX) and the user gives smaller nodes."""
    if chip.tp_domain <= chip.gpus_per_node:
        return min(chip.tp_domain, gpus_per_node)
    return chip.tp_domain


def shapes(model: ModelGraph, chip: Chip, service: ServiceSpec, max_gpus: int | None,
           gpus_per_node: int, reads: Reads) -> tuple[list[Shape], list[str]]:
    """Instance shapes to evaluate on `chip`, and the filters that removed values (for explanations).

    tp: within the NVLink domain and allowed by the heads (the kernel's rule,
    pricing.kernel.deployment.check_tensor_parallel); pp: the
    pipeline grid (stages across nodes, dp 1), at most one stage per layer, evaluated only when no
    instance within one node holds a request or --pp asks (`candidate_table`); dp: MoE only (dense
    models scale by replicas); expert parallel: MoE with more than one rank; dcp: divides tp and
    at most tp / KV heads (the kernel's rule, pricing.kernel.deployment.max_dcp). An instance larger
    than a node must fill whole nodes with whole tp groups (`placement`). The grids' defaults are
    read through `reads` (the table's, `ChipTable.defaults`)."""
    notes: list[str] = []
    domain = nvlink_domain(chip, gpus_per_node)
    if chip.nvlink_domain <= 1 and domain > 1:
        notes.append(f"{chip.name} has no NVLink: tp up to {domain} runs over PCIe within a node, as vLLM allows "
                     "(NCCL; vLLM's custom all-reduce serves at most two PCIe-only GPUs)")
    allowed = tuple(t for t in range(1, domain + 1) if allows_tensor_parallel(model, t))
    tps = service.tp or allowed
    if service.tp:
        over = [t for t in tps if t > domain]
        if over:
            tp, pp = mention("tp"), mention("pp")
            notes.append(f"tp {', '.join(map(str, over))} exceeds the {chip.tp_link} domain of {domain} GPUs: "
                         f"span nodes with pipeline stages instead ({tp} {max(allowed)} {pp} 2, or leave {tp} and "
                         f"{pp} out)")
        for t in tps:  # the model, not the chip, rules these out: bad input, as vLLM would reject it
            check_tensor_parallel(model, t)
        tps = tuple(t for t in tps if t <= domain)
    if model.has_experts:
        dps = service.dp or tuple(reads.value("grids.data_parallel_size"))
    else:
        dps = (1,)
        if service.dp and service.dp != (1,):
            notes.append(f"{model.name} is dense: dp is 1 and replicas scale it")
    cap = None if service.dp else reads.value("grids.max_gpus_per_instance")
    if max_gpus is not None:
        cap = max_gpus if cap is None else min(cap, max_gpus)
    kv_heads = model.cache_kv_heads
    layers = backbone_layers(model)
    pps = tuple(p for p in (service.pp or tuple(reads.value("grids.pipeline_parallel_size"))) if p <= layers)
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
        notes.append(f"no tp × dp fits within {mention('max_gpus')} {max_gpus}")
    return sorted(out), notes


def deployment_for(shape: Shape, service: ServiceSpec, max_model_len: int, **settings) -> Deployment:
    """The vLLM flags of one instance of `shape` for `service` (one place, so no caller drops a field)."""
    return Deployment(tensor_parallel_size=shape.tp, pipeline_parallel_size=shape.pp, data_parallel_size=shape.dp,
                      enable_expert_parallel=shape.ep,
                      decode_context_parallel_size=shape.dcp, kv_cache_dtype=shape.kv_cache_dtype,
                      max_model_len=max_model_len, num_speculative_tokens=service.num_speculative_tokens,
                      speculative_method=service.speculative_method, **settings)

