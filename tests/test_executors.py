"""A review's variants give the same results, in the same order, one after another, through the
process pool and on a real local Ray runtime (planner/app/executors.py)."""

from __future__ import annotations

import importlib.util

import pytest

from planner.app.review import compare
from planner.scenario import Scenario
from tests.helpers import planner_defaults


def review() -> Scenario:
    return Scenario(review="executors", inventory={"h200": {"gpus_per_node": 8}, "h100": {"gpus": 16}},
                    services=[{"name": "chat", "model": "llama-3.1-8b", "concurrency": 64, "context_length": 32768},
                              {"name": "code", "model": "qwen3-8b", "concurrency": 32, "context_length": 16384}],
                    variants={"double": {"services.chat.concurrency": 128}, "short": {"context_length": 8192},
                              "h100-only": {"chips": ["h100"]}, "dear-h200": {"price.h200": 9.0}})


def untimed(c) -> dict:
    out = c.model_dump()
    for r in [out["base"], *out["variants"]]:
        r.pop("seconds")
    return out


@pytest.fixture(scope="module")
def sequential():
    return untimed(compare(review(), executor="sequential"))


def test_the_pool_gives_the_sequential_results(sequential):
    pooled = untimed(compare(review(), executor="pool"))
    assert pooled == sequential
    assert [r["variant"] for r in pooled["variants"]] == ["double", "short", "h100-only", "dear-h200"]


def test_the_pool_of_a_command_gives_the_sequential_results(sequential):
    """As `plan scenario --variants` runs it (with the command's TableStore): the variants'
    tables are built before the pool forks, and the variants are dealt out in even runs."""
    from planner.candidates.store import TableStore
    from planner.defaults import load

    with TableStore(load()) as tables:
        assert untimed(compare(review(), executor="pool", tables=tables)) == sequential


RAY_CHILD = """
import json, os, sys
import ray
sys.path.insert(0, os.getcwd())
from planner.app.review import compare
from tests.test_executors import review, untimed
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
try:
    print(json.dumps(untimed(compare(review(), executor="ray"))))
finally:
    ray.shutdown()
"""


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed (pip install '.[ray]')")
def test_ray_gives_the_sequential_results(sequential):
    """On a real local Ray runtime, started in a child process: Ray's client threads stay alive after
    `ray.shutdown()`, and a later test that forks table workers from a process holding them can
    deadlock in the child (a lock held at the fork), so the suite's own process never starts Ray."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "RAY_raylet_start_wait_time_s": "300",  # a loaded machine starts the raylet slowly
           "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", RAY_CHILD], cwd=root, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ray_results = json.loads(done.stdout.strip().splitlines()[-1])
    assert ray_results == json.loads(json.dumps(sequential))


def test_sequential_starts_no_process(sequential, monkeypatch):
    """`sequential` is one process: even a review with enough tables for table workers builds
    them here (the pool, on the same review, would fork)."""
    import multiprocessing

    from planner import defaults
    from planner.candidates import parallel
    from planner.candidates.store import TableStore

    planner_defaults(monkeypatch, {"parallel.min_tables": 1})
    monkeypatch.setattr(parallel, "workers", lambda: 2)

    def no_fork(*_):
        raise AssertionError("a worker process was started")

    monkeypatch.setattr(multiprocessing, "get_context", no_fork)
    with TableStore(defaults.load()) as tables:
        assert untimed(compare(review(), executor="sequential", tables=tables)) == sequential
    with TableStore(defaults.load()) as tables, pytest.raises(AssertionError, match="worker process"):
        compare(review(), executor="pool", tables=tables)
