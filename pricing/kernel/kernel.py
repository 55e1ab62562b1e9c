"""The memory kernel for one rank of a deployment (shared/spec/memory-model.md).

    fixed_bytes()                 weights, activation peak, CUDA graphs, EPLB, non-torch, total (no comm buffers)
    pre_snapshot_bytes()          communicator reservation + engine workspace, outside the budget
    sequence_variable_bytes(t)    the KV cache a t-token request holds, in whole pool blocks
    sequence_fixed_bytes()        window rings, fixed rings and recurrent state in steady decode
    sequence_admission_bytes()    the same state at what the engine reserves on admission
    and the rank's budget, KV pool, blocks and start-up check; what the engine works out over every
    pipeline stage (its blocks, "GPU KV cache size", concurrency) is the kernel's `instance`'s
    (pricing/kernel/instance.py).

Each sub-result is memoised by the model graph (dropped when the graph is edited), per chip,
registry, release and stage (values), and on the engine fields it read (recorded as it runs, never
listed by hand), so a planner sweep that varies the utilisation or the token budget recomputes
only what they change, and a new field cannot return a stale answer. A kernel never changes once
built (its model, engine, chip, registry and stage are fixed), so each of its own answers is also
kept on the kernel (`once`): asking twice, as the start-up checks and the requests held do,
costs one evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from operator import attrgetter

from pricing.chips import Chip
from pricing.graph.model import ModelGraph
from pricing.kernel import activations, caches, cudagraphs, families, pipeline, weights
from pricing.kernel.deployment import Deployment, Engine, resolve_engine
from pricing.kernel.instance import Instance
from pricing.registry import Reads, Registry, Sourced, shipped
from pricing.rules import Release
from pricing.rules import get as get_release
from pricing.specs import KVCacheSpec, Request

MEMO_LIMIT = 200_000  # answers one graph's memo keeps for one chip, registry, release and stage


class _Reads:
    """A read-only view of a frozen dataclass (the engine) that records every field a computation
    reads, properties included. A memo entry is keyed on the values of the fields the computation
    actually read (so a new field, once read, is part of the key without anyone listing it)."""

    __slots__ = ("_obj", "_seen")

    def __init__(self, obj):
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_seen", {})

    def __getattr__(self, name):
        obj = self._obj
        if name in obj.__dataclass_fields__:
            value = getattr(obj, name)
            self._seen[name] = value
            return value
        attr = getattr(type(obj), name)
        if isinstance(attr, property):
            return attr.fget(self)
        if callable(attr):
            return attr.__get__(self)
        return attr

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self._obj).__name__} is frozen")


class Memo:
    """Answers by what was asked and by the values of the engine fields the computation read: one
    table per set of fields read, keyed by their values. A model graph keeps one per (chip,
    registry, release, stage), all values (ModelGraph.derived), so an edit of the graph drops it."""

    __slots__ = ("tables", "size")

    def __init__(self):
        self.tables: dict = {}
        self.size = 0

    def get(self, what: str, engine, reg: Registry, compute):
        """compute(engine view, registry view): its value and the registry entries it read (the
        view records them), kept once."""
        by_fields = self.tables.setdefault(what, {})
        for read, table in by_fields.values():
            hit = table.get(read(engine))
            if hit is not None:
                return hit
        if self.size > MEMO_LIMIT:
            self.tables.clear()
            self.size = 0
            by_fields = self.tables.setdefault(what, {})
        view = _Reads(engine)
        reads = Reads(reg)
        value = compute(view, reads)
        names = tuple(view._seen)
        if names not in by_fields:
            by_fields[names] = (_reader(names), {})
        by_fields[names][1][tuple(view._seen.values())] = (value, reads.read)
        self.size += 1
        return value, reads.read


def _reader(names: tuple[str, ...]):
    """A function giving the tuple of an engine's values of `names`."""
    if not names:
        return lambda e: ()
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda e: (get(e),)
    return attrgetter(*names)


@dataclass(frozen=True)
class FixedBytes:
    weights: int
    activation_peak: int
    cuda_graph: int
    eplb_redundant: int
    non_torch: int = 0  # memory outside torch's allocator that grows after the snapshot

    @property
    def comm_buffers(self) -> int:
        """Communication buffers inside the budget: none. vLLM initialises the distributed environment
        (NCCL, custom all-reduce) before its memory snapshot (gpu_worker.py init_device,
        vllm-0.33-memory.md §1.1 step 2), so they are part of pre_snapshot_bytes, beyond the budget
        (memory-model.md, "Communication buffers")."""
        return 0

    @property
    def total(self) -> int:
        return self.weights + self.activation_peak + self.cuda_graph + self.eplb_redundant + self.non_torch


@dataclass(frozen=True)
class BudgetLaw:
    """One rank's KV pool and blocks as laws of its budget, every other setting held (§1.4): the
    pool is the budget less what the budget holds beside it (`outside`), or the
    --kv-cache-memory-bytes pool (`given_pool`) whatever the budget; the blocks, the pool's whole
    `bytes_per_block` pages (0 when the layout is not grouped into blocks)."""

    outside: int
    given_pool: int | None
    bytes_per_block: int

    def pool(self, budget: int) -> int:
        return self.given_pool if self.given_pool is not None else budget - self.outside

    def blocks(self, budget: int) -> int:
        if self.bytes_per_block == 0:
            return 0
        return max(0, self.pool(budget) // self.bytes_per_block)


class Kernel:
    """The memory of one rank of `engine` serving `model` on `chip`, under the engine's release.

    With pipeline parallelism a rank belongs to one stage (`stage`, pricing/kernel/pipeline.py):
    its weights, caches, CUDA graphs and sampler are that stage's; the engine-wide figures, which
    take every stage into account, are its `instance`'s (pricing/kernel/instance.py). `Kernel.of`
    returns the binding stage."""

    def __init__(self, model: ModelGraph, engine: Engine, chip: Chip, registry: Registry | None = None,
                 stage: pipeline.Stage | None = None):
        self.model = model
        self.engine = engine
        self.chip = chip
        self.reg = registry or shipped()
        self.stage = stage
        self.graph = pipeline.stage_graph(model, stage)  # the layers this rank builds
        self.instance = Instance(engine, (self,))  # every stage's rank, when Instance.of builds them
        self._used: dict[str, Sourced] = {}
        self._notes: list[str] = []
        self._own: dict = {}  # this kernel's answers, by what was asked (`once`)

    @property
    def release(self) -> Release:
        return self.engine.release

    @property
    def rules(self):
        return self.engine.release.rules

    @classmethod
    def of(cls, model: ModelGraph, deployment: Deployment, chip: Chip, registry: Registry | None = None,
           release: Release | str | None = None, stage: int | None = None, sampler: str | None = None) -> Kernel:
        """The kernel of one rank; with pipeline parallelism, of stage `stage`, or by default of the
        binding stage (the fewest KV blocks, then the most fixed memory: the fullest rank); its
        `instance` holds every stage's. The release's fitted fixed-memory laws are laid over the
        registry (Release.laws; `sampler`: the top-k/top-p path of the sampler warm-up, when known,
        else the release's default)."""
        release = get_release(release)
        chosen = Reads(registry or shipped())  # which era laws apply is read too
        reg = release.laws(registry or shipped(), sampler, chosen)
        defaults = Reads(reg)  # the release's defaults the deployment took shape the figures too
        engine = resolve_engine(deployment, model, chip, defaults, release)
        found = Instance.of(model, engine, lambda s: cls(model, engine, chip, reg, stage=s))
        for k in found.ranks:
            k._used.update(chosen.read)
            k._used.update(defaults.read)
        if engine.pipeline_parallel_size == 1:
            return found.ranks[0]
        if stage is not None:
            return found.ranks[stage]
        return found.binding()

    def once(self, key, compute):
        """compute() once per instance: the kernel is immutable, so its answer to `key` never
        changes (its own answers, and what a layer above works out from it alone)."""
        own = self._own
        if key in own:
            return own[key]
        value = own[key] = compute()
        return value

    def _get(self, what: str, compute):
        own = self._own
        if what in own:
            return own[what]
        memo = self.__dict__.get("_memo")
        if memo is None:
            memo = self._memo = self.model.derived(("kernel", self.chip, self.reg, self.release, self.stage), Memo)
        value, used = memo.get(what, self.engine, self.reg, compute)
        self._used.update(used)
        own[what] = value
        return value

    def derived(self, what: str, compute):
        """`compute(engine view, registry view)` memoised as the kernel's own parts are: by the model
        graph, per chip, registry, release and stage, and on the engine fields it reads through the
        view (so `compute` reads the engine and the registry only through the views it is given,
        and what it reads of the registry joins the provenance). For what a layer above
        derives from one rank and its graph alone, such as the step model's linear work, which a
        latency sweep asks of many engines differing only in settings it never reads."""
        return self._get(f"derived.{what}", compute)

    # -- fixed --------------------------------------------------------------------------------
    def weight_bytes(self) -> weights.WeightBytes:
        return self._get("weights", lambda e, reg: weights.weight_bytes(self.graph, e, reg, self.chip.generation))

    def activation(self) -> activations.Activation:
        act = self._get("activation", lambda e, reg: activations.activation(self.model, e, self.chip, reg,
                                                                                   families.hooks(self.model).model_buffers))
        if self.stage is not None and not self.stage.is_last:
            return self.once("activation_of_stage", lambda: replace(act, sampler=0))  # the sampler warm-up
        return act  # runs on the last stage only

    def cuda_graph(self) -> tuple[int, cudagraphs.Ceilings | None]:
        return self._get("cuda_graph", lambda e, reg: cudagraphs.cuda_graph_bytes(self.graph, e, self.chip, reg))

    def non_torch_bytes(self) -> int:
        """Memory outside torch's allocator that appears after vLLM's snapshot and so inside the
        budget (vLLM 0.33 counts it in total_consumed = init free − free after profiling,
        vllm-0.33-memory.md §1.4): fitted by the largest collective group the rank joins."""
        return self._get("non_torch", self._non_torch_bytes)

    def _non_torch_bytes(self, e, reg: Reads) -> int:
        entry = reg["cost_model_primitives.non_torch_in_budget"]
        groups = _collective_groups(e)
        size = max(groups.values()) if groups else 1
        return int(entry.value[activations.tp_key(entry.value, size)])

    def fixed_bytes(self) -> FixedBytes:
        return self.once("fixed_bytes", self._fixed_bytes)

    def _fixed_bytes(self) -> FixedBytes:
        w = self.weight_bytes()
        return FixedBytes(w.weights, self.activation().peak, self.cuda_graph()[0], w.eplb_redundant,
                          self.non_torch_bytes())

    def collective_groups(self) -> dict[str, int]:
        """The collective groups this rank joins, by name and size (size > 1 only)."""
        return _collective_groups(self.engine)

    def pre_snapshot_bytes(self) -> int:
        """The collective library's reservation for each group the rank joins, plus the engine
        workspace; vLLM starts both before its memory snapshot (vllm-0.33-memory.md §1.1)."""
        return self._get("pre_snapshot", self._pre_snapshot_bytes)

    def _pre_snapshot_bytes(self, e, reg: Reads) -> int:
        comm = reg["cost_model_primitives.communicator_reservation"]
        work = reg["cost_model_primitives.engine_workspace"]
        table = comm.value
        total = int(work.value)
        for size in _collective_groups(e).values():
            total += int(table[activations.tp_key(table, size)])
        return total

    # -- caches -------------------------------------------------------------------------------
    def specs(self) -> list[KVCacheSpec]:
        return self._cache_layout()[0]

    def layout(self):
        found = self._own.get("layout")  # asked at every point of a sweep: the kept answer first
        return found[1] if found is not None else self._cache_layout()[1]

    def _cache_layout(self):
        found = self._own.get("layout")
        if found is None:
            found = self._get("layout", self._layout_of)
            self._notes = found[2]
        return found[0], found[1]

    def _layout_of(self, e, reg: Reads):
        family = families.hooks(self.model)
        specs, notes = caches.cache_specs(self.model, e, self.chip, reg, stated_caches=family.stated_caches,
                                          state_caches=family.state_caches)
        layout = e.release.rules.group(specs, e.max_model_len)  # over the whole model, all stages merged
        if self.stage is not None:
            mine = frozenset(self.graph.g.nodes)
            specs = [s for s in specs if s.layer in mine]
            layout = pipeline.project(layout, mine)
        return specs, layout, notes

    def _blocks(self, group, tokens: int, in_flight: int) -> int:
        e = self.engine
        return group.blocks(Request(tokens, e.max_model_len, in_flight, e.decode_context_parallel_size))

    def _bytes(self, groups, tokens: int, in_flight: int) -> int:
        layout = self.layout()
        total = 0
        for g in groups:
            n = self._blocks(g, tokens, in_flight)
            total += n * (layout.bytes_per_block if layout.grouped else g.layer_bytes)
        return total

    def sequence_variable_bytes(self, tokens: int) -> int:
        """KV cache one request of `tokens` holds on this rank, in whole pool blocks."""
        groups = [g for g in self.layout().groups if g.grows]
        return self._bytes(groups, tokens, 1 + self.engine.num_speculative_tokens)

    def request_kv_bytes(self, tokens: int) -> int:
        """Every cache one request of `tokens` holds on this rank, growing and bounded groups (window
        rings clipped to their window, recurrent state) in whole pool blocks: what a KV connector
        moves for it (NIXL transfers whole blocks, nixl/pull_scheduler.py get_exchange_clipped_blocks)."""
        return self._bytes(self.layout().groups, tokens, 1 + self.engine.num_speculative_tokens)

    def connector(self):
        """The KV connector's memory on this rank (pricing/kernel/connector.py), None without a kv_role."""
        from pricing.kernel import connector

        found = self.once("connector", lambda: connector.connector_memory(self))
        if found is not None:
            self._used.update({p.name: p for p in found.provenance})
        return found

    def _bounded(self):
        return [g for g in self.layout().groups if not g.grows]

    def sequence_fixed_bytes(self) -> int:
        """Bounded state a request holds in steady decode (one decode step in flight: 1 + K tokens)."""
        return self._bytes(self._bounded(), self.engine.max_model_len, 1 + self.engine.num_speculative_tokens)

    def sequence_admission_bytes(self) -> int:
        """Bounded state the engine reserves on admission (every step in flight can schedule)."""
        return self._bytes(self._bounded(), self.engine.max_model_len, self.engine.max_in_flight_tokens)

    def own_page_bytes_steady(self, drafter: bool | None = None) -> int:
        """What the bounded caches' own pages sum to in steady decode (before pool blocks); of
        the drafter's layers alone (`drafter` True), of the target's alone (False), or of all."""
        if drafter is None:
            pages = [(g, g.layer_bytes) for g in self._bounded()]
        else:
            spec = {s.id: s for s in self.specs()}
            pages = [(g, sum(spec[i].page_bytes for i in g.layers if spec[i].drafter == drafter))
                     for g in self._bounded()]
        total = 0
        for g, layer_bytes in pages:
            if layer_bytes:
                steady = self._blocks(g, self.engine.max_model_len, 1 + self.engine.num_speculative_tokens)
                total += steady * layer_bytes
        return total

    def cache_bytes_per_token(self, drafter: bool | None = None) -> Fraction:
        """The owned context caches' record bytes per token, before pages and padding; of the
        drafter's layers alone (`drafter` True), of the target's alone (False), or of all."""
        return sum((s.per_token for s in self.specs() if s.grows and drafter in (None, s.drafter)), Fraction(0))

    def blocks_per_request(self, admission: bool = True) -> int:
        """Σ over groups of the blocks one request at max_model_len holds (vLLM's
        kv_cache_utils blocks_per_request uses the admission cap for bounded groups)."""
        return self.once(("blocks_per_request", admission), lambda: self._blocks_per_request(admission))

    def _blocks_per_request(self, admission: bool) -> int:
        e = self.engine
        in_flight = e.max_in_flight_tokens if admission else 1 + e.num_speculative_tokens
        return self.layout().blocks(Request(e.max_model_len, e.max_model_len, in_flight,
                                            e.decode_context_parallel_size))

    def request_bytes(self) -> int:
        """One request at max_model_len as the engine sizes it: admission state + context caches."""
        return self.once("request_bytes", self._request_bytes)

    def _request_bytes(self) -> int:
        return self.sequence_admission_bytes() + self.sequence_variable_bytes(self.engine.max_model_len)

    # -- the engine's own figures -------------------------------------------------------------
    def budget(self) -> int:
        """requested_memory = ceil(total × gpu_memory_utilization) (vllm-0.33-memory.md §1.3)."""
        return self.budget_of(self.engine.gpu_memory_utilization)

    def budget_of(self, utilization: float) -> int:
        """The budget this rank's engine would request at `utilization` (the same law as `budget`)."""
        return math.ceil(self.chip.memory_bytes * utilization)

    def kv_pool(self) -> int:
        """available KV cache memory = budget − non-KV memory − CUDA-graph estimate, or the
        --kv-cache-memory-bytes value when set (§1.4)."""
        return self.once("kv_pool", self._kv_pool)

    def _kv_pool(self) -> int:
        return self.pool_at(self.budget())

    def pool_at(self, budget: int) -> int:
        """The KV pool at `budget`, every other setting held: budget − the fixed memory (which no
        utilization changes: the pool is affine in the budget), or --kv-cache-memory-bytes (§1.4)."""
        return self.budget_law().pool(budget)

    def budget_law(self) -> BudgetLaw:
        """The pool and the blocks as laws of the budget, worked out once (what a sweep over
        utilizations reads at each point)."""
        return self.once("budget_law", self._budget_law)

    def _budget_law(self) -> BudgetLaw:
        given = self.engine.kv_cache_memory_bytes
        layout = self.layout()
        per_block = layout.bytes_per_block if layout.grouped else 0
        if given is not None:
            return BudgetLaw(outside=0, given_pool=given, bytes_per_block=per_block)
        return BudgetLaw(outside=self.once("pool_outside", self._pool_outside), given_pool=None,
                         bytes_per_block=per_block)

    def _pool_outside(self) -> int:
        """What the budget holds beside the pool: the fixed memory, less the CUDA graphs in
        releases that capture them after the pool is sized (registry graph_estimate_in_budget)."""
        fixed = self.fixed_bytes()
        entry = self.reg[self.release.key("graph_estimate_in_budget")]
        self._used[entry.name] = entry
        if self.release.of_release(entry.value):
            return fixed.total
        return fixed.total - fixed.cuda_graph  # graphs captured after the pool is sized

    def rank_blocks(self) -> int:
        """Blocks this rank's own pool holds (before the minimum over pipeline stages)."""
        return self.once("rank_blocks", lambda: self.blocks_at(self.budget()))

    def blocks_at(self, budget: int) -> int:
        """Blocks this rank's own pool holds at `budget`."""
        return self.budget_law().blocks(budget)

    def rank_fits_one_request(self) -> bool:
        return self.once("rank_fits_one_request", lambda: self.fits_one_request_at(self.budget()))

    def fits_one_request_at(self, budget: int) -> bool:
        """This rank's check at `budget`: (pool − one block) ≥ one request at max_model_len."""
        return self.fits_one_request_in(self.pool_at(budget))

    def fits_one_request_in(self, pool: int) -> bool:
        """This rank's check on a pool of `pool` bytes (`fits_one_request_at`)."""
        return self.one_request_check()(pool)

    def one_request_check(self) -> Callable[[int], bool]:
        """The check as a law of the pool, its other inputs read once (kept on the kernel): the
        release's `fits_one_request` on this rank's layout, blocks per request and per-layer bytes."""
        return self.once("one_request_check", self._one_request_check)

    def _one_request_check(self) -> Callable[[int], bool]:
        layout = self.layout()
        if not layout.groups:
            return lambda pool: pool > 0
        check, blocks, layer_bytes = self.rules.fits_one_request, self.blocks_per_request(), self._request_layer_bytes()
        return lambda pool: pool > 0 and check(pool, layout, blocks, layer_bytes)

    def _request_layer_bytes(self) -> int:
        """One request at max_model_len counted layer by layer at each layer's own page (what a
        per-layer start-up check sums): Σ over groups of its blocks × its layers' pages."""
        return self.once("request_layer_bytes", self._sum_request_layer_bytes)

    def _sum_request_layer_bytes(self) -> int:
        e = self.engine
        r = Request(e.max_model_len, e.max_model_len, e.max_in_flight_tokens, e.decode_context_parallel_size)
        return sum(g.blocks(r) * g.layer_bytes for g in self.layout().groups)

    # -- provenance ---------------------------------------------------------------------------
    def provenance(self) -> list[Sourced]:
        """Every registry value this evaluation read, with how it was obtained, plus the
        conventions of the graph and the rules pack that shaped the figures."""
        self.fixed_bytes()
        self.pre_snapshot_bytes()
        layout = self.layout()
        out = dict(self._used)
        for p in self.chip.provenance:
            out[p.name] = p
        for i, note in enumerate(self.model.conventions):
            out[f"graph.convention.{i}"] = Sourced(f"graph.convention.{i}", note, f"model graph of {self.model.name}",
                                                   "how the graph lays out the weights, as vLLM builds the model")
        if self.stage is not None:
            out["pipeline.stage"] = Sourced("pipeline.stage", str(self.stage), "vllm/distributed/utils.py "
                                            "get_pp_indices, PPMissingLayer", "this rank's layers; the embedding on "
                                            "the first stage, final norm, LM head and sampler on the last")
        out["rules.grouping"] = Sourced("rules.grouping", layout.rule, f"rules pack {self.release.name}",
                                        "applied to this rank's caches")
        for i, note in enumerate(self._notes):
            out[f"rules.note.{i}"] = Sourced(f"rules.note.{i}", note, "cache resolution", "for this chip and dtype")
        return [out[k] for k in sorted(out)]


def _collective_groups(e: Engine) -> dict[str, int]:
    """The collective groups a rank of engine `e` joins, by name and size (size > 1 only)."""
    groups = {"tensor parallel": e.tensor_parallel_size, "data parallel": e.data_parallel_size,
              "decode context parallel": e.decode_context_parallel_size,
              "prefill context parallel": e.prefill_context_parallel_size}
    if e.enable_expert_parallel:
        groups["expert parallel"] = e.ep_size
    return {k: v for k, v in groups.items() if v > 1}
