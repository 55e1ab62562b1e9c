"""Where a review's variants are planned: one after another in this process (`sequential`: no
worker process at all, candidate tables included), in a
process pool on this machine (`pool`, one worker per CPU), or on a Ray cluster (`ray`:
`pip install '.[ray]'`; `ray.init(address=...)` with --ray-address, so a KubeRay cluster serves
it; without one, a local Ray runtime of one CPU per worker). Each variant is a whole review,
independent of the others, so every executor gives the same results in the same order.

The base is planned first, here. A pool's workers are forked once every variant's candidate
tables are built (in table workers, planner/candidates/parallel.py), so they inherit them all and
no table is swept twice; on Ray, variants that ask for the same tables (planner/candidates/table.py
`sweep_key`: the same models, context lengths and chips) are sent to one worker together, so that
worker sweeps each table once."""

from __future__ import annotations

from collections.abc import Callable

from planner.app.fleet import FleetResult, plan_scenario, refused_context, resolve_services
from planner.candidates.parallel import build_tables, fork_pool, workers
from planner.candidates.service import ResolvedService, defaults_of, store_of
from planner.candidates.store import TableStore
from planner.candidates.table import sweep_key
from planner.scenario import Scenario
from planner.search.fleet import table_requests
from pricing.errors import InputError, mention
from pricing.registry import Registry
from pricing.units import cdiv

Job = tuple[Scenario, str]  # a variant's scenario and its name
Task = tuple[Scenario, str, list[ResolvedService]]  # a job with its services, resolved once (in this process)


def plan_variants(jobs: list[Job], time_limit: float | None, executor: str, ray_address: str | None = None,
                  progress: Callable[[str], None] | None = None, registry: Registry | None = None,
                  tables: TableStore | None = None) -> list[FleetResult]:
    """Every job planned, in the order given, by `executor` (one of planner/defaults.yaml
    parallel.executors), under `registry` (the command's; None: the shipped one; it travels to the
    workers with each service) with the command's `tables` (they travel with each service too; None:
    none shared); `progress(name)` as each is done."""
    if executor == "sequential" or len(jobs) < 2:
        out = []
        for scenario, name in jobs:  # one job alone on a pool or Ray may still build its tables in workers
            # no variants to share tables with: bounded
            out.append(plan_scenario(scenario, name, time_limit, parallel_tables=executor != "sequential",
                                     bounded=len(jobs) == 1, registry=registry, tables=tables))
            if progress:
                progress(name)
        return out
    tasks = [(scenario, name, resolve_services(scenario, registry, tables)) for scenario, name in jobs]
    known = tuple(defaults_of(tasks[0][2]).value("parallel.executors"))  # the command's, as its services carry them
    if executor not in known:
        raise InputError("executor", f"no executor named {executor!r}", f"use one of {', '.join(known)}")
    found: dict[int, FleetResult] = {}
    if executor == "pool":
        groups = _prebuilt(tasks)
        with fork_pool(min(workers(), len(groups))) as pool:
            for done in pool.imap_unordered(_plan_group, [([tasks[i] for i in g], g, time_limit) for g in groups]):
                _collect(done, found, jobs, progress)
    elif executor == "ray":
        groups = _groups(tasks)
        ray = _ray(ray_address)
        remote = ray.remote(_plan_group)
        pending = [remote.remote(([tasks[i] for i in g], g, time_limit)) for g in groups]
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            _collect(ray.get(ready[0]), found, jobs, progress)
    return [found[i] for i in range(len(jobs))]


def _collect(done, found: dict, jobs: list[Job], progress) -> None:
    for i, result in done:
        found[i] = result
        if progress:
            progress(jobs[i][1])


def _plan_group(task: tuple[list[Task], list[int], float | None]) -> list[tuple[int, FleetResult]]:
    """A worker's share: its variants one after another, tables built here (a worker has no pool).
    Their services carry the command's store (`TableStore`): a forked worker's is the one the
    parent had built (the base's and every variant's tables); a Ray worker's is its own, made as
    the share arrived, so its variants share the tables they ask for."""
    group, indices, time_limit = task
    return [(i, plan_scenario(scenario, name, time_limit, parallel_tables=False, services=services))
            for i, (scenario, name, services) in zip(indices, group, strict=True)]


def _prebuilt(jobs: list[Task]) -> list[list[int]]:
    """The pool's shares of the jobs. With the command's store, every table the jobs ask
    for is built first, once (planner/candidates/parallel.py: in table workers when there are
    many), so the pool's workers, forked after, inherit them all and the jobs are dealt out in
    even runs (a few per worker, so none waits alone at the end); otherwise by `_groups`."""
    tables = store_of([s for _, _, services in jobs for s in services])
    if tables is None:
        return _groups(jobs)
    build_tables([r for scenario, _, services in jobs for s in services if refused_context(s) is None
                  for r in table_requests(scenario, s)], tables)
    runs = min(len(jobs), 4 * workers())
    size = cdiv(len(jobs), runs)
    return [list(range(i, min(i + size, len(jobs)))) for i in range(0, len(jobs), size)]


def _groups(jobs: list[Task]) -> list[list[int]]:
    """The jobs' indices grouped by the candidate tables they ask for, the largest groups first."""
    by_tables: dict[frozenset, list[int]] = {}
    for i, (scenario, _, services) in enumerate(jobs):
        keys = frozenset(hash(sweep_key(*r)) for s in services for r in table_requests(scenario, s))
        by_tables.setdefault(keys, []).append(i)
    return sorted(by_tables.values(), key=len, reverse=True)


def _ray(address: str | None):
    """Ray, connected: to the cluster at `address`, else to a local runtime (started if none runs)."""
    try:
        import ray
    except ImportError:
        raise InputError("executor", "ray is not installed", "pip install 'deployment-planner[ray]', or use "
                         f"{mention('executor')} pool") from None
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers(), include_dashboard=False, log_to_driver=False)
    return ray
