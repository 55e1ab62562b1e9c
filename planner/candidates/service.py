"""A service resolved once per command (the application layer makes it, planner/app; every stage
below reads it): what the user asked (`spec`: the model, the targets and workload, the flags'
grids, the vLLM release), the pool's limits, the model's graph and the context length every
candidate instance runs at (`shapes.context_length`, vLLM's max_model_len). And the command's
store of what its services share (`TableStore`): one graph per model (`sweep_model`) and the
candidate tables (planner/candidates/table.py `candidate_table`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from planner.candidates.shapes import context_length
from planner.candidates.store import TableStore
from planner.defaults import Defaults, Reads, load
from planner.request import PoolLimits, ServiceSpec
from pricing.graph import load_model
from pricing.graph.model import ModelGraph
from pricing.registry import Registry, shipped


def store_of(services) -> TableStore | None:
    """The one store that `services` (one command's, resolved) carry: None when they carry none."""
    stores = {id(s.tables): s.tables for s in services}
    assert len(stores) <= 1, "one command's services share one TableStore"
    return next(iter(stores.values()), None)


def defaults_of(services) -> Defaults:
    """The planner defaults `services` (one command's, resolved, at least one) carry, unrecorded: the
    table their views read (the command's, as its first service carries it)."""
    return services[0].defaults.unrecorded


def sweep_model(model: str, quantization: str | None, registry: Registry | None = None,
                tables: TableStore | None = None) -> ModelGraph:
    """The graph of `model` the command's sweeps and checks read: with the command's `tables`,
    one graph per model, quantization and registry, so the kernel's memo it keeps (weights,
    activations, caches: each keyed by the engine fields it read) serves every table of the model,
    at every context length, and the check of every row reported (the planner never edits a
    graph); without one, a graph of the caller's own (`load_model`). Read against `registry` (None:
    the shipped one)."""
    registry = registry or shipped()
    if tables is None:
        return load_model(model, quantization, registry)
    key = ("model", model, quantization, registry)
    graph = tables.get(key)
    if graph is None:
        graph = load_model(model, quantization, registry)
        tables.keep(key, graph)
    return graph


@dataclass(frozen=True, eq=False)  # one per service: compared and hashed as itself
class ResolvedService:
    """One service as the candidates, the search and the reports read it. `graph` is the command's
    one graph of the model (`sweep_model`), never edited."""

    spec: ServiceSpec
    limits: PoolLimits
    graph: ModelGraph
    context_length: int
    defaults: Reads  # the planner defaults its search and plan read (a recording view of the command's)
    name: str = ""  # a scenario's service as its file names it ("" for the one service of `plan`)
    registry: Registry = field(default_factory=shipped)  # the command's (its --registry overlay, or the shipped one)
    tables: TableStore | None = None  # the command's shared graphs and tables (None: nothing kept)

    @classmethod
    def of(cls, spec: ServiceSpec, limits: PoolLimits, name: str = "", registry: Registry | None = None,
           tables: TableStore | None = None) -> ResolvedService:
        """The service resolved under `registry` (the command's; None: the shipped one) with the
        command's `tables` (None: nothing shared): its graph read and its context length settled, once;
        its planner defaults a new recording view of the table `tables` carries (the command's; None:
        the shipped file's, as the registry's None is the shipped registry)."""
        reg = registry or shipped()
        graph = sweep_model(spec.model, spec.quantization, reg, tables)
        table = tables.defaults if tables is not None else load()
        return cls(spec, limits, graph, context_length(graph, spec), table.reads(), name, reg, tables=tables)

    @property
    def release(self) -> str:
        """The vLLM release whose rules and defaults apply."""
        return self.spec.vllm_version

    def asking(self, spec: ServiceSpec) -> ResolvedService:
        """The same model at the same context length asked as `spec` (a disaggregated role's sweep:
        its memory alone, planner/search/disagg.py `memory_service`)."""
        return replace(self, spec=spec)

    def __reduce__(self):
        """Pickled (to a table worker, planner/candidates/parallel.py) without the graph: a worker
        reads it from its store (`TableStore`: the parent's when forked), and keeps the context
        length resolved here."""
        return _rebuilt, (self.spec, self.limits, self.context_length, self.name, self.registry, self.tables,
                          self.defaults.unrecorded)


def _rebuilt(spec: ServiceSpec, limits: PoolLimits, length: int, name: str, registry: Registry,
             tables: TableStore | None, defaults: Defaults) -> ResolvedService:
    return ResolvedService(spec, limits, sweep_model(spec.model, spec.quantization, registry, tables), length,
                           defaults.reads(), name, registry, tables=tables)
