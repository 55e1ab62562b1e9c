"""The bounds and names the command line checks its input against, read without pydantic (so that
`plan --help` imports no model classes): the solver's integer ranges (planner/defaults.yaml
limits.*) and the service-target metrics as `vllm bench serve` reports them."""

from __future__ import annotations

from planner import defaults

MAX_CONCURRENCY = defaults.value("limits.max_concurrency")  # the solver's integer range (planner/defaults.yaml)
MAX_GPUS = defaults.value("limits.max_gpus")
MAX_PRICE = defaults.value("limits.max_price")  # USD per GPU-hour
MAX_RATE = defaults.value("limits.max_requests_per_second")
MIN_CONTEXT = defaults.value("limits.min_context_length")

METRICS = ("ttft", "tpot", "itl", "e2e")  # as `vllm bench serve` reports them
PERCENTILES = (50, 90, 99)
METRIC_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2E"}
