"""Candidate tables built in worker processes: a review of many services on many chips needs
hundreds of tables, each independent of the others (planner/candidates/table.py
`candidate_table`), so they are swept one worker per CPU and sent back whole. Below
planner/defaults.yaml parallel.min_tables they are built where they are asked for."""

from __future__ import annotations

import multiprocessing
import os
from dataclasses import replace

from planner.candidates.service import ResolvedService
from planner.candidates.shapes import ChipTable
from planner.candidates.store import TableStore
from planner.candidates.table import built_table, candidate_table, keep_table, sweep_key
from planner.defaults import View
from planner.heap import freeze_for_fork
from planner.request import PoolLimits
from pricing.chips import Chip

Request = tuple[ResolvedService, Chip, PoolLimits]  # what `candidate_table` is asked with


def workers() -> int:
    """CPUs this process may run on (its affinity, not the machine's count)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def fork_pool(processes: int):
    """A pool of `processes` workers forked from this process, which share its heap as it is now
    (copy-on-write). Everything this process has allocated so far is frozen out of the garbage
    collector first (planner/heap.py `freeze_for_fork`), so no worker's collection walks the
    inherited tables and, walking them, copies their pages."""
    freeze_for_fork()
    return multiprocessing.get_context("fork").Pool(processes)


def in_worker() -> bool:
    """A pool's worker builds its tables itself (a daemonic process has no children)."""
    return multiprocessing.current_process().daemon


def use_workers(jobs: int, reads: View) -> bool:
    """Whether `jobs` candidate tables (or services to sweep) are worth worker processes: at least
    parallel.min_tables of them (read through `reads`), more than one CPU, and not already in a worker."""
    return jobs >= reads.value("parallel.min_tables") and workers() >= 2 and not in_worker()


def build_tables(requests: list[Request], tables: TableStore | None) -> int:
    """Build the tables of `requests` not built yet in the command's store `tables`, in worker
    processes when there are at least parallel.min_tables of them and more than one CPU; returns
    how many were built there. The tables are the ones `candidate_table` builds (the same function
    runs in the workers, which hold `tables` as it was when they were forked)."""
    if tables is None:  # nowhere to keep them: each is built where it is asked for
        return 0
    todo: dict[tuple, Request] = {}
    for request in requests:
        key = sweep_key(*request)
        if key not in todo and built_table(tables, key) is None:
            todo[key] = request
    if not use_workers(len(todo), tables.defaults):
        return 0
    keys = list(todo)
    groups: dict[tuple, list[int]] = {}
    for i, key in enumerate(keys):
        service, chip, _ = todo[key]
        groups.setdefault((service.spec.model, service.spec.quantization, chip.id), []).append(i)
    jobs = sorted(groups.values(), key=len, reverse=True)  # the longest first, so no worker waits alone at the end
    with fork_pool(min(workers(), len(jobs))) as pool:
        for indices, built in pool.imap_unordered(_build, [(idx, [todo[keys[i]] for i in idx]) for idx in jobs]):
            for i, table in zip(indices, built, strict=True):
                keep_table(tables, keys[i], table)
    return len(keys)


def _build(job: tuple[list[int], list[Request]]) -> tuple[list[int], list[ChipTable]]:
    """One job's tables (one model on one chip), in a store of their own: they share the model's
    graph and its kernel memo, which go when the job is done (the tables go back to the parent,
    which keeps them in its store, `keep_table`)."""
    indices, requests = job
    with TableStore(requests[0][0].defaults.unrecorded) as job_tables:  # the command's defaults, as services carry them
        return indices, [candidate_table(replace(service, tables=job_tables), chip, limits)
                         for service, chip, limits in requests]
