"""The bounds and names the command line checks its input against, read without pydantic (so that
`plan --help` imports no model classes): the solver's integer ranges (planner/defaults.yaml
limits.*) and the service-target metrics as `vllm bench serve` reports them."""

from __future__ import annotations

from planner import defaults
from planner.defaults import View

# the input's bounds, read once at import from the one loader: the request schemas are classes built with them
BOUNDS = defaults.load()
MAX_CONCURRENCY = BOUNDS.value("limits.max_concurrency")  # the solver's integer range (planner/defaults.yaml)
MAX_GPUS = BOUNDS.value("limits.max_gpus")
MAX_PRICE = BOUNDS.value("limits.max_price")  # USD per GPU-hour
MAX_RATE = BOUNDS.value("limits.max_requests_per_second")
MIN_CONTEXT = BOUNDS.value("limits.min_context_length")
MAX_SPARE = BOUNDS.value("limits.max_spare_nodes")  # whole nodes per chip kept free
MAX_SPECULATIVE = BOUNDS.value("limits.max_speculative_tokens")
MAX_GPUS_PER_NODE = BOUNDS.value("limits.max_gpus_per_node")
MIN_MEMORY, MAX_MEMORY = BOUNDS.value("limits.memory_bytes")  # `plan memory --memory-bytes`
MAX_GRID_POINTS = BOUNDS.value("limits.max_grid_points")  # a scenario grid's and a compare sweep's points
MAX_INTERVALS = BOUNDS.value("traffic.max_intervals")  # a trace's or an export's intervals

METRICS = ("ttft", "tpot", "itl", "e2e")  # as `vllm bench serve` reports them


def price_units(usd: float, reads: View) -> int:
    """USD as the solver's integer price units (planner/defaults.yaml solver.price_units_per_dollar,
    read through the caller's view), to the nearest unit: every cost the CP-SAT models compare is
    counted in them."""
    return round(usd * reads.value("solver.price_units_per_dollar"))


PERCENTILES = (50, 90, 99)
METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}
