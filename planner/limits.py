"""The bounds and names the command line checks its input against, read without pydantic (so that
`plan --help` imports no model classes): the solver's integer ranges (planner/defaults.yaml
limits.*) and the service-target metrics as `vllm bench serve` reports them."""

from __future__ import annotations

from planner import defaults
from planner.defaults import Reads

MAX_CONCURRENCY = defaults.value("limits.max_concurrency")  # the solver's integer range (planner/defaults.yaml)
MAX_GPUS = defaults.value("limits.max_gpus")
MAX_PRICE = defaults.value("limits.max_price")  # USD per GPU-hour
MAX_RATE = defaults.value("limits.max_requests_per_second")
MIN_CONTEXT = defaults.value("limits.min_context_length")
MAX_SPARE = defaults.value("limits.max_spare_nodes")  # whole nodes per chip kept free
MAX_SPECULATIVE = defaults.value("limits.max_speculative_tokens")
MAX_GPUS_PER_NODE = defaults.value("limits.max_gpus_per_node")
MIN_MEMORY, MAX_MEMORY = defaults.value("limits.memory_bytes")  # `plan memory --memory-bytes`
MAX_GRID_POINTS = defaults.value("limits.max_grid_points")  # a scenario grid's and a compare sweep's points

METRICS = ("ttft", "tpot", "itl", "e2e")  # as `vllm bench serve` reports them


def price_units(usd: float, reads: Reads | None = None) -> int:
    """USD as the solver's integer price units (planner/defaults.yaml solver.price_units_per_dollar),
    to the nearest unit: every cost the CP-SAT models compare is counted in them."""
    return round(usd * defaults.read(reads, "solver.price_units_per_dollar"))
PERCENTILES = (50, 90, 99)
METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}
